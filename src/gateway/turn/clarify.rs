//! Pending `clarify` questions, one per session key at most: the next plain message from that
//! session answers it instead of starting or interrupting a turn.

use std::collections::HashMap;
use std::sync::Mutex;
use tokio::sync::oneshot;

#[derive(Default)]
pub(crate) struct ClarifyBoard {
    waiting: Mutex<HashMap<String, oneshot::Sender<String>>>,
}

impl ClarifyBoard {
    /// Register a question for `session_key`; the receiver gets the answer. A question already
    /// waiting there is replaced (its asker sees no answer).
    pub(crate) fn ask(&self, session_key: &str) -> oneshot::Receiver<String> {
        let (tx, rx) = oneshot::channel();
        if let Ok(mut w) = self.waiting.lock() {
            w.insert(session_key.to_string(), tx);
        }
        rx
    }

    /// Hand `text` to the question waiting for `session_key`; false when none waits.
    pub(crate) fn answer(&self, session_key: &str, text: &str) -> bool {
        let waiting = self.waiting.lock().ok().and_then(|mut w| w.remove(session_key));
        match waiting {
            Some(tx) => tx.send(text.to_string()).is_ok(),
            None => false,
        }
    }

    /// Forget the question of `session_key` (timed out, turn stopped).
    pub(crate) fn cancel(&self, session_key: &str) {
        if let Ok(mut w) = self.waiting.lock() {
            w.remove(session_key);
        }
    }
}
