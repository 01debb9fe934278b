//! The approvals waiting right now, per session and in the order they were asked, with the
//! answers that outlive one command: patterns approved for a session (`/approve session`) and
//! sessions in `/yolo`. An MCP tool call is approved like a command (its one key names the tool);
//! `/approve always` cannot store it in `command_allowlist`, so for it `always` means this session.
//! An answer reaches exactly the approval it names, or the session's oldest;
//! an id from another session is refused, so nobody answers for a chat they are not in.
//! The operator's MCP client (`hermes mcp serve`) sees every chat: it lists what waits and may
//! answer any approval by id.
//! The remembered answers are kept for at most `gateway.memory.approval_sessions` sessions; the
//! least recently answered session's are forgotten first (it is asked again, never let through).

use crate::store::PendingApproval;
use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};
use tokio::sync::oneshot;

/// How far an approval reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reach {
    /// This command, this time.
    Once,
    /// Its patterns, for the rest of the session.
    Session,
    /// This command, for ever (`command_allowlist`).
    Always,
}

impl Reach {
    pub(crate) fn word(self) -> &'static str {
        match self {
            Reach::Once => "once",
            Reach::Session => "session",
            Reach::Always => "always",
        }
    }
}

/// A person's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    Approve(Reach),
    Deny { reason: Option<String> },
}

/// An approval that was answered: what the answering command may still need to act on.
#[derive(Debug, Clone)]
pub(crate) struct Answered {
    /// The command exactly as the agent asked (for `command_allowlist`); `None` for an MCP tool
    /// call, which `/approve always` approves for the session only.
    pub command: Option<String>,
}

/// What answering one approval by id found.
#[derive(Debug)]
pub(crate) enum ById {
    Answered(Answered),
    /// It belongs to another session.
    NotYours,
    /// Nobody waits for it any more (answered, timed out, stopped).
    Stale,
}

struct Waiting {
    /// What was asked, where, and when (as recorded in the store).
    about: PendingApproval,
    /// `None` for an MCP tool call (see [`Answered::command`]).
    command: Option<String>,
    keys: Vec<String>,
    reply: oneshot::Sender<Answer>,
    opened: std::time::Instant,
}

/// A session's answers that outlive one command.
#[derive(Default)]
struct Remembered {
    patterns: HashSet<String>,
    yolo: bool,
    /// When it was last changed (the board's clock), for evicting the least recent.
    changed: u64,
}

struct State {
    /// Oldest first.
    waiting: Vec<Waiting>,
    remembered: HashMap<String, Remembered>,
    clock: u64,
    max_sessions: usize,
    /// Approvals opened since start.
    opened: u64,
}

impl State {
    /// The session's remembered answers, made room for when it is new.
    fn remember(&mut self, session_key: &str) -> &mut Remembered {
        self.clock += 1;
        if !self.remembered.contains_key(session_key) && self.remembered.len() >= self.max_sessions {
            let oldest = self.remembered.iter().min_by_key(|(_, r)| r.changed).map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                self.remembered.remove(&oldest);
            }
        }
        let entry = self.remembered.entry(session_key.to_string()).or_default();
        entry.changed = self.clock;
        entry
    }
}

/// Sessions whose answers are remembered by default (`gateway.memory.approval_sessions`).
pub(crate) const DEFAULT_MAX_SESSIONS: usize = 1000;

pub(crate) struct ApprovalBoard {
    state: Mutex<State>,
}

impl Default for ApprovalBoard {
    fn default() -> Self {
        Self::with_bound(DEFAULT_MAX_SESSIONS)
    }
}

impl ApprovalBoard {
    /// A board remembering the answers of at most `max_sessions` sessions (at least one).
    pub(crate) fn with_bound(max_sessions: usize) -> Self {
        let state = State { waiting: Vec::new(), remembered: HashMap::new(), clock: 0, max_sessions: max_sessions.max(1), opened: 0 };
        Self { state: Mutex::new(state) }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // The state stays consistent across a panic elsewhere (every change is one push/remove).
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Start waiting for an answer to `about`, asked about `command` (`None`: an MCP tool call),
    /// whose approval keys are `keys`.
    pub(crate) fn open(
        &self,
        about: &PendingApproval,
        command: Option<&str>,
        keys: impl IntoIterator<Item = impl Into<String>>,
    ) -> oneshot::Receiver<Answer> {
        let (reply, answer) = oneshot::channel();
        let waiting = Waiting {
            about: about.clone(),
            command: command.map(str::to_string),
            keys: keys.into_iter().map(Into::into).collect(),
            reply,
            opened: std::time::Instant::now(),
        };
        let mut state = self.state();
        state.waiting.push(waiting);
        state.opened += 1;
        crate::observe::metrics::global().set_approvals_pending(state.waiting.len());
        answer
    }

    /// Every approval waiting now, oldest first.
    pub(crate) fn waiting(&self) -> Vec<PendingApproval> {
        self.state().waiting.iter().map(|w| w.about.clone()).collect()
    }

    /// How many approvals were ever opened: a reader that saw a smaller number has new ones to see.
    pub(crate) fn opened(&self) -> u64 {
        self.state().opened
    }

    /// Answer approval `id`, whichever chat it is in (for the operator, who sees them all);
    /// `None` when nobody waits for it any more.
    pub(crate) fn answer_any(&self, id: &str, answer: &Answer) -> Option<(PendingApproval, Answered)> {
        let mut state = self.state();
        let index = state.waiting.iter().position(|w| w.about.id == id)?;
        let about = state.waiting[index].about.clone();
        Some((about, Self::answer_at(&mut state, index, answer)))
    }

    /// Stop waiting for `id` (answered, timed out, the turn stopped).
    pub(super) fn close(&self, id: &str) {
        let mut state = self.state();
        state.waiting.retain(|w| w.about.id != id);
        crate::observe::metrics::global().set_approvals_pending(state.waiting.len());
    }

    /// How long ago the newest approval of `id`'s session was opened (`None` once `id` is gone).
    pub(super) fn quiet_for(&self, id: &str) -> Option<std::time::Duration> {
        let state = self.state();
        let session = &state.waiting.iter().find(|w| w.about.id == id)?.about.session_key;
        state.waiting.iter().filter(|w| &w.about.session_key == session).map(|w| w.opened.elapsed()).min()
    }

    /// Where `id` stands among its session's waiting approvals: `(position, of)`, 1-based.
    pub(super) fn place(&self, id: &str) -> Option<(usize, usize)> {
        let state = self.state();
        let session = &state.waiting.iter().find(|w| w.about.id == id)?.about.session_key;
        let mine: Vec<&Waiting> = state.waiting.iter().filter(|w| &w.about.session_key == session).collect();
        let position = mine.iter().position(|w| w.about.id == id)?;
        Some((position + 1, mine.len()))
    }

    /// How many approvals `session_key` is waiting for.
    pub(crate) fn pending(&self, session_key: &str) -> usize {
        self.state().waiting.iter().filter(|w| w.about.session_key == session_key).count()
    }

    /// Answer the oldest approval of `session_key`; `None` when none waits.
    pub(crate) fn answer_oldest(&self, session_key: &str, answer: &Answer) -> Option<Answered> {
        let mut state = self.state();
        let index = state.waiting.iter().position(|w| w.about.session_key == session_key)?;
        Some(Self::answer_at(&mut state, index, answer))
    }

    /// Answer every approval of `session_key`, oldest first.
    pub(crate) fn answer_all(&self, session_key: &str, answer: &Answer) -> Vec<Answered> {
        let mut state = self.state();
        let mut answered = Vec::new();
        while let Some(index) = state.waiting.iter().position(|w| w.about.session_key == session_key) {
            answered.push(Self::answer_at(&mut state, index, answer));
        }
        answered
    }

    /// Answer approval `id`, if it belongs to `session_key` and still waits.
    pub(crate) fn answer_id(&self, session_key: &str, id: &str, answer: &Answer) -> ById {
        let mut state = self.state();
        match state.waiting.iter().position(|w| w.about.id == id) {
            None => ById::Stale,
            Some(index) if state.waiting[index].about.session_key != session_key => ById::NotYours,
            Some(index) => ById::Answered(Self::answer_at(&mut state, index, answer)),
        }
    }

    fn answer_at(state: &mut State, index: usize, answer: &Answer) -> Answered {
        let waiting = state.waiting.remove(index);
        let for_session = match answer {
            Answer::Approve(Reach::Session) => true,
            // Nothing but a command goes to `command_allowlist`: a tool call's "always" is this session.
            Answer::Approve(Reach::Always) => waiting.command.is_none(),
            _ => false,
        };
        if for_session {
            let keys = waiting.keys.clone();
            state.remember(&waiting.about.session_key).patterns.extend(keys);
        }
        // The asker may have stopped waiting a moment ago; then the answer just goes nowhere.
        let _ = waiting.reply.send(answer.clone());
        Answered { command: waiting.command }
    }

    /// Whether every one of `keys` was approved for `session_key` (`/approve session`).
    pub(super) fn session_allows(&self, session_key: &str, keys: &[&str]) -> bool {
        self.state().remembered.get(session_key).is_some_and(|r| keys.iter().all(|k| r.patterns.contains(*k)))
    }

    /// Turn `/yolo` on or off for `session_key`.
    pub(crate) fn set_yolo(&self, session_key: &str, on: bool) {
        let mut state = self.state();
        if on {
            state.remember(session_key).yolo = true;
        } else if let Some(r) = state.remembered.get_mut(session_key) {
            r.yolo = false;
        }
    }

    pub(crate) fn yolo(&self, session_key: &str) -> bool {
        self.state().remembered.get(session_key).is_some_and(|r| r.yolo)
    }

    /// A new conversation starts without the old one's approvals (`/new`).
    pub(crate) fn forget_session(&self, session_key: &str) {
        self.state().remembered.remove(session_key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_adapter::{ChatTarget, Platform};

    /// A board entry for `command` in `session`, as the policy records it.
    fn asked(id: &str, session: &str, shown: &str) -> PendingApproval {
        PendingApproval {
            id: id.into(),
            session_key: session.into(),
            target: ChatTarget { platform: Platform::new("telegram"), chat_id: "1".into(), thread_id: None },
            command: shown.into(),
            created_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn answers_go_oldest_first_and_only_within_the_session() {
        let board = ApprovalBoard::default();
        let mut first = board.open(&asked("a", "s1", "rm -rf a"), Some("rm -rf a"), vec!["recursive delete"]);
        let mut second = board.open(&asked("b", "s1", "rm -rf b"), Some("rm -rf b"), vec!["recursive delete"]);
        let _other = board.open(&asked("c", "s2", "rm -rf c"), Some("rm -rf c"), vec!["recursive delete"]);
        assert_eq!(board.place("b"), Some((2, 2)));
        assert_eq!(board.pending("s1"), 2);
        assert!(matches!(board.answer_id("s1", "c", &Answer::Approve(Reach::Once)), ById::NotYours));
        let answered = board.answer_oldest("s1", &Answer::Approve(Reach::Once)).unwrap();
        assert_eq!(answered.command.as_deref(), Some("rm -rf a"), "the oldest is answered first");
        assert_eq!(first.try_recv().unwrap(), Answer::Approve(Reach::Once));
        assert!(second.try_recv().is_err(), "the second still waits");
        assert!(matches!(board.answer_id("s1", "a", &Answer::Approve(Reach::Once)), ById::Stale));
        let all = board.answer_all("s1", &Answer::Deny { reason: None });
        assert_eq!(all.len(), 1);
        assert_eq!(board.pending("s2"), 1, "another session's approval is untouched");
    }

    #[test]
    fn session_approval_remembers_the_patterns_until_new() {
        let board = ApprovalBoard::default();
        let _rx = board.open(
            &asked("a", "s1", "git reset --hard"),
            Some("git reset --hard"),
            vec!["git reset --hard (destroys uncommitted changes)"],
        );
        board.answer_oldest("s1", &Answer::Approve(Reach::Session));
        assert!(board.session_allows("s1", &["git reset --hard (destroys uncommitted changes)"]));
        assert!(!board.session_allows("s1", &["git reset --hard (destroys uncommitted changes)", "recursive delete"]));
        assert!(!board.session_allows("s2", &["git reset --hard (destroys uncommitted changes)"]));
        board.set_yolo("s1", true);
        board.forget_session("s1");
        assert!(!board.session_allows("s1", &["git reset --hard (destroys uncommitted changes)"]));
        assert!(!board.yolo("s1"));
    }

    #[test]
    fn always_for_a_tool_call_is_remembered_for_the_session_only() {
        let board = ApprovalBoard::default();
        let key = "MCP tool mcp__fs__write_file";
        let _rx = board.open(&asked("a", "s1", "write_file {}"), None, [key]);
        let answered = board.answer_oldest("s1", &Answer::Approve(Reach::Always)).unwrap();
        assert_eq!(answered.command, None, "nothing to write to command_allowlist");
        assert!(board.session_allows("s1", &[key]), "the tool is approved for this session");
        assert!(!board.session_allows("s2", &[key]), "and for no other");
        board.forget_session("s1");
        assert!(!board.session_allows("s1", &[key]), "a new conversation asks again");
        let _rx = board.open(&asked("b", "s1", "rm -rf x"), Some("rm -rf x"), ["recursive delete"]);
        board.answer_oldest("s1", &Answer::Approve(Reach::Always));
        assert!(!board.session_allows("s1", &["recursive delete"]), "a command's always goes to the allowlist, not the session");
    }

    #[test]
    fn beyond_its_bound_the_least_recently_answered_session_is_forgotten() {
        let board = ApprovalBoard::with_bound(2);
        let key = "recursive delete";
        for (id, session) in [("a", "s1"), ("b", "s2")] {
            let _rx = board.open(&asked(id, session, "rm -rf x"), Some("rm -rf x"), vec![key]);
            board.answer_oldest(session, &Answer::Approve(Reach::Session));
        }
        // s1 answered again: s2 is now the least recent.
        board.set_yolo("s1", true);
        let _rx = board.open(&asked("c", "s3", "rm -rf x"), Some("rm -rf x"), vec![key]);
        board.answer_oldest("s3", &Answer::Approve(Reach::Session));
        assert!(board.session_allows("s1", &[key]) && board.yolo("s1"), "the recently answered session is kept");
        assert!(board.session_allows("s3", &[key]), "the new session is remembered");
        assert!(!board.session_allows("s2", &[key]), "the least recent session's approval was forgotten, so it is asked again");
        assert_eq!(board.state().remembered.len(), 2);
    }

    #[test]
    fn the_operator_sees_every_chat_and_answers_any_id_once() {
        let board = ApprovalBoard::default();
        let before = board.opened();
        let mut first = board.open(&asked("#a", "s1", "rm -rf a"), Some("rm -rf a"), ["recursive delete"]);
        let _second = board.open(&asked("#b", "s2", "rm -rf b"), Some("rm -rf b"), ["recursive delete"]);
        assert_eq!(board.opened(), before + 2, "a reader sees that two were opened");
        let listed: Vec<(String, String, String)> = board.waiting().into_iter().map(|p| (p.id, p.session_key, p.command)).collect();
        assert_eq!(listed, [("#a".into(), "s1".into(), "rm -rf a".into()), ("#b".into(), "s2".into(), "rm -rf b".into())]);
        let (about, answered) = board.answer_any("#a", &Answer::Deny { reason: None }).expect("it waits");
        assert_eq!((about.session_key.as_str(), answered.command.as_deref()), ("s1", Some("rm -rf a")));
        assert_eq!(first.try_recv().ok(), Some(Answer::Deny { reason: None }), "the asker got the answer");
        assert!(board.answer_any("#a", &Answer::Approve(Reach::Once)).is_none(), "answered once only");
        assert_eq!(board.waiting().len(), 1);
    }
}
