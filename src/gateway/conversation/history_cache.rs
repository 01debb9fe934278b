//! The recent history of the sessions that talked last, kept between their turns: opening a turn
//! then reads only the messages added since (the store checks that what is kept is still the
//! session's history: same session, nothing undone). Reading and converting a long conversation
//! on every turn was the largest single cost of a reply. Bounded by the memory the kept histories
//! take (`gateway.memory.history_cache_megabytes`, counted as the heap holds them: structs,
//! string capacities, the session key); the least recently used session goes first.

use crate::agent::{ChatMessage, ToolCallRequest};
use crate::store::{KnownHistory, MessageRow};
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// A session's recent history, oldest first, as the model reads it.
#[derive(Debug, Clone)]
pub(crate) struct SessionHistory {
    pub known: KnownHistory,
    pub messages: VecDeque<ChatMessage>,
}

impl SessionHistory {
    /// The history read from the store; `None` when it is empty.
    pub(crate) fn from_rows(
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
    pub(crate) fn extend(&mut self, rows: &[MessageRow], active_count: i64, limit: usize, convert: fn(&MessageRow) -> Option<ChatMessage>) {
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

    /// The heap this history holds. Counting only the text under-counted by half: a short
    /// chat message is mostly its struct and its allocation's slack.
    fn heap_bytes(&self) -> usize {
        let message = |m: &ChatMessage| {
            let calls = m.tool_calls.capacity() * size_of::<ToolCallRequest>()
                + m.tool_calls.iter().map(|c| c.id.capacity() + c.name.capacity() + c.arguments.capacity()).sum::<usize>();
            let strings = m.content.capacity()
                + m.tool_call_id.as_ref().map_or(0, String::capacity)
                + m.tool_name.as_ref().map_or(0, String::capacity);
            strings + calls
        };
        size_of::<Self>()
            + self.known.session_id.capacity()
            + self.messages.capacity() * size_of::<ChatMessage>()
            + self.messages.iter().map(message).sum::<usize>()
    }
}

pub(crate) struct HistoryCache {
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
    /// A cache holding at most about `max_bytes` of histories (0 = none kept).
    pub(crate) fn new(max_bytes: usize) -> Self {
        Self { max_bytes, inner: Mutex::new(Inner::default()) }
    }

    /// Take the session key's history out (a concurrent turn of the same key then reads its own).
    pub(crate) fn take(&self, session_key: &str) -> Option<SessionHistory> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let entry = inner.entries.remove(session_key)?;
        inner.bytes -= entry.bytes;
        Some(entry.history)
    }

    /// Keep `history` for the session key's next turn, making room by dropping the least
    /// recently used sessions. A history larger than the whole cache is not kept.
    pub(crate) fn put(&self, session_key: &str, history: SessionHistory) {
        let bytes = history.heap_bytes() + size_of::<Entry>() + session_key.len();
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

    /// What one test history of `text` takes in the cache under a one-letter key.
    fn cost(text: &str) -> usize {
        history("a", text).heap_bytes() + size_of::<Entry>() + 1
    }

    #[test]
    fn the_least_recently_used_session_makes_room() {
        let cache = HistoryCache::new(3 * cost(&"x".repeat(100)));
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
    fn the_bound_counts_what_the_heap_holds_not_only_the_text() {
        // A thousand one-word messages: 4 KB of text, but each message is a struct of its own.
        let mut h = history("s", "hi");
        h.messages.extend((0..999).map(|_| ChatMessage::user("hi")));
        assert!(h.heap_bytes() >= 1000 * size_of::<ChatMessage>(), "{} bytes counted", h.heap_bytes());
        let cache = HistoryCache::new(1000 * 64);
        cache.put("s", h);
        assert!(cache.take("s").is_none(), "more than the bound in memory, though its text would fit");
        let none = HistoryCache::new(0);
        none.put("s", history("s", "hi"));
        assert!(none.take("s").is_none(), "a zero bound keeps nothing");
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
            images: None,
            timestamp: Default::default(),
        };
        let convert: fn(&MessageRow) -> Option<ChatMessage> = |r| Some(ChatMessage::assistant(r.content.clone()));
        h.extend(&[row(5, "second"), row(7, "third")], 3, 2, convert);
        assert_eq!(h.messages.iter().map(|m| m.content.as_str()).collect::<Vec<_>>(), ["second", "third"]);
        assert_eq!(h.known, KnownHistory { session_id: "s".into(), last_id: 7, active_count: 3 });
    }
}
