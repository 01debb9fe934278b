//! The reply-latency clock: a chat's oldest unanswered message, from the moment the inbox
//! accepted it to the first message the gateway got onto the platform in that chat (the start of
//! a streamed answer counts: it is what the user sees first).
//!
//! Kept per chat rather than per turn so that the two ends can be recorded where they happen
//! (the inbox, the outbound send) without threading a timer through the turn. A chat appears
//! here only while it waits; chats never answered (a refused stranger) are forgotten after
//! [`FORGET_AFTER`], and no platform keeps more than [`MAX_WAITING`] waiting chats.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const MAX_WAITING: usize = 10_000;
const FORGET_AFTER: Duration = Duration::from_secs(600);

#[derive(Debug, Default)]
pub(crate) struct ReplyClocks {
    /// Platform → chat id → when its oldest unanswered message was accepted.
    waiting: Mutex<HashMap<&'static str, HashMap<String, Instant>>>,
}

impl ReplyClocks {
    /// A message was accepted in `chat`; the clock starts unless the chat already waits.
    pub(crate) fn started(&self, platform: &'static str, chat: &str) {
        let mut waiting = self.waiting.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let chats = waiting.entry(platform).or_default();
        if chats.contains_key(chat) {
            return;
        }
        if chats.len() >= MAX_WAITING {
            chats.retain(|_, at| at.elapsed() < FORGET_AFTER);
            if chats.len() >= MAX_WAITING {
                return;
            }
        }
        chats.insert(chat.to_string(), Instant::now());
    }

    /// Something reached `chat`: how long its oldest message waited, if one did.
    pub(crate) fn answered(&self, platform: &'static str, chat: &str) -> Option<Duration> {
        let mut waiting = self.waiting.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        waiting.get_mut(platform)?.remove(chat).map(|at| at.elapsed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_waiting_message_is_timed_once() {
        let clocks = ReplyClocks::default();
        clocks.started("telegram", "42");
        std::thread::sleep(Duration::from_millis(5));
        clocks.started("telegram", "42");
        let waited = clocks.answered("telegram", "42").expect("the chat waited");
        assert!(waited >= Duration::from_millis(5), "timed from the first message: {waited:?}");
        assert_eq!(clocks.answered("telegram", "42"), None, "the second part of an answer is not a reply");
        assert_eq!(clocks.answered("discord", "42"), None, "another platform's chat 42 never waited");
    }
}
