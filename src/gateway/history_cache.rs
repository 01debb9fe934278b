//! The recent history of the sessions that talked last, kept between their turns: opening a turn
//! then reads only the messages added since (the store checks that what is kept is still the
//! session's history: same session, nothing undone). Reading and converting a long conversation
//! on every turn was the largest single cost of a reply. Bounded by the size of the text kept;
//! the least recently used session goes first.

use crate::agent::ChatMessage;
use crate::store::{KnownHistory, MessageRow};
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// A session's recent history, oldest first, as the model reads it.
#[derive(Debug, Clone)]
pub struct SessionHistory {
    pub known: KnownHistory,
    pub messages: VecDeque<ChatMessage>,
}

impl SessionHistory {
    /// The history read from the store; `None` when it is empty.
    pub fn from_rows(
        rows: &[MessageRow],
        known: Option<KnownHistory>,
        limit: usize,
        convert: fn(&MessageRow) -> Option<ChatMessage>,
    ) -> Option<Self> {
        let mut history = SessionHistory { known: known?, messages: VecDeque::new() };
        history.messages.extend(rows.iter().filter_map(convert));
        history.trim(limit);
        Some(history)
    }

    /// Append the messages that followed (as the store returned them), keeping the last `limit`.
    pub fn extend(&mut self, rows: &[MessageRow], active_count: i64, limit: usize, convert: fn(&MessageRow) -> Option<ChatMessage>) {
        if let Some(last) = rows.last() {
            self.known.last_id = last.id;
        }
        self.known.active_count = active_count;
        self.messages.extend(rows.iter().filter_map(convert));
        self.trim(limit);
    }

    fn trim(&mut self, limit: usize) {
        let excess = self.messages.len().saturating_sub(limit);
        self.messages.drain(..excess);
    }

    fn text_bytes(&self) -> usize {
        self.messages
            .iter()
            .map(|m| 64 + m.content.len() + m.tool_calls.iter().map(|c| c.id.len() + c.name.len() + c.arguments.len()).sum::<usize>())
            .sum()
    }
}

pub struct HistoryCache {
    max_bytes: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<String, Entry>,
    bytes: usize,
    clock: u64,
}

struct Entry {
    history: SessionHistory,
    bytes: usize,
    last_used: u64,
}

impl HistoryCache {
    /// A cache holding at most about `max_bytes` of message text.
    pub fn new(max_bytes: usize) -> Self {
        Self { max_bytes, inner: Mutex::new(Inner::default()) }
    }

    /// Take the session key's history out (a concurrent turn of the same key then reads its own).
    pub fn take(&self, session_key: &str) -> Option<SessionHistory> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let entry = inner.entries.remove(session_key)?;
        inner.bytes -= entry.bytes;
        Some(entry.history)
    }

    /// Keep `history` for the session key's next turn, making room by dropping the least
    /// recently used sessions. A history larger than the whole cache is not kept.
    pub fn put(&self, session_key: &str, history: SessionHistory) {
        let bytes = history.text_bytes();
        if bytes > self.max_bytes {
            return;
        }
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.clock += 1;
        let last_used = inner.clock;
        if let Some(old) = inner.entries.insert(session_key.to_string(), Entry { history, bytes, last_used }) {
            inner.bytes -= old.bytes;
        }
        inner.bytes += bytes;
        while inner.bytes > self.max_bytes {
            let Some(oldest) = inner.entries.iter().min_by_key(|(_, e)| e.last_used).map(|(k, _)| k.clone()) else { break };
            if let Some(gone) = inner.entries.remove(&oldest) {
                inner.bytes -= gone.bytes;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history(session: &str, text: &str) -> SessionHistory {
        SessionHistory {
            known: KnownHistory { session_id: session.into(), last_id: 1, active_count: 1 },
            messages: VecDeque::from([ChatMessage::user(text)]),
        }
    }

    #[test]
    fn the_least_recently_used_session_makes_room() {
        let cache = HistoryCache::new(3 * (64 + 100));
        for key in ["a", "b", "c"] {
            cache.put(key, history(key, &"x".repeat(100)));
        }
        let a = cache.take("a").expect("a kept");
        cache.put("a", a);
        cache.put("d", history("d", &"x".repeat(100)));
        assert!(cache.take("b").is_none(), "b was the least recently used");
        for key in ["a", "c", "d"] {
            assert_eq!(cache.take(key).map(|h| h.known.session_id), Some(key.to_string()));
        }
        cache.put("huge", history("huge", &"x".repeat(1000)));
        assert!(cache.take("huge").is_none(), "a history larger than the cache is not kept");
    }

    #[test]
    fn extending_keeps_the_last_messages_and_what_the_store_knows() {
        let mut h = history("s", "first");
        let row = |id: i64, text: &str| MessageRow {
            id,
            session_id: "s".into(),
            role: "assistant".into(),
            content: text.into(),
            tool_call_id: None,
            tool_calls: None,
            tool_name: None,
            event_id: None,
            finish_reason: None,
            timestamp: Default::default(),
        };
        let convert: fn(&MessageRow) -> Option<ChatMessage> = |r| Some(ChatMessage::assistant(r.content.clone()));
        h.extend(&[row(5, "second"), row(7, "third")], 3, 2, convert);
        assert_eq!(h.messages.iter().map(|m| m.content.as_str()).collect::<Vec<_>>(), ["second", "third"]);
        assert_eq!(h.known, KnownHistory { session_id: "s".into(), last_id: 7, active_count: 3 });
    }
}
