//! "typing…" while a turn runs: shown once the turn has taken longer than a moment, refreshed
//! every few seconds (platforms drop the indicator after about five), in its own task so a slow
//! or throttled typing call never delays the answer, and stopped when the guard is dropped at the
//! end of the turn.
//!
//! The short delay is deliberate: an answer that is ready within it (a command, a cached or very
//! fast reply) arrives before the indicator could even be drawn, so a typing call then is only a
//! wasted request against the platform's rate limits — under a burst it was a third of the
//! requests the gateway made. Any real model call takes longer, and its indicator appears
//! 250 ms later than it could have, below what a person notices next to the network's own delay.

use hermes_adapter::{ChatTarget, PlatformAdapter};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// Telegram and Discord show the indicator for about 5 s (Discord 10 s); refresh before it fades.
const REFRESH: Duration = Duration::from_secs(4);
/// How often a paused indicator checks whether the turn runs again.
const PAUSED_CHECK: Duration = Duration::from_millis(250);
/// How long a turn runs before the indicator is shown.
pub(super) const TYPING_DELAY: Duration = Duration::from_millis(250);

pub(super) struct TypingGuard(Option<JoinHandle<()>>);

impl TypingGuard {
    /// Show the indicator until dropped, except while `waiting_for_user` says the turn is
    /// paused on the user (an approval prompt): then "typing…" would claim the agent is busy.
    pub(super) fn start(
        adapter: Arc<dyn PlatformAdapter>,
        target: ChatTarget,
        waiting_for_user: impl Fn() -> bool + Send + 'static,
    ) -> Self {
        if !adapter.capabilities().supports_typing {
            return Self(None);
        }
        Self(Some(tokio::spawn(async move {
            tokio::time::sleep(TYPING_DELAY).await;
            loop {
                if waiting_for_user() {
                    tokio::time::sleep(PAUSED_CHECK).await;
                    continue;
                }
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
