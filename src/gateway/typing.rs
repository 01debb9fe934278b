//! "typing…" while a turn runs: refreshed every few seconds (platforms drop the indicator after
//! about five), in its own task so a slow or throttled typing call never delays the answer, and
//! stopped when the guard is dropped at the end of the turn.

use hermes_adapter::{ChatTarget, PlatformAdapter};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// Telegram and Discord show the indicator for about 5 s (Discord 10 s); refresh before it fades.
const REFRESH: Duration = Duration::from_secs(4);

pub struct TypingGuard(Option<JoinHandle<()>>);

impl TypingGuard {
    pub fn start(adapter: Arc<dyn PlatformAdapter>, target: ChatTarget) -> Self {
        if !adapter.capabilities().supports_typing {
            return Self(None);
        }
        Self(Some(tokio::spawn(async move {
            loop {
                if let Err(e) = adapter.typing(&target).await {
                    tracing::debug!(platform = %target.platform, "typing indicator failed: {e}");
                }
                tokio::time::sleep(REFRESH).await;
            }
        })))
    }
}

impl Drop for TypingGuard {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }
}
