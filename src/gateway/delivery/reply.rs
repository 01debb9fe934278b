//! What leaves the gateway for a chat, and the name it is kept under: a [`Reply`] (where it goes,
//! what it says, its buttons and files) and its [`ReplyKey`], the outbox idempotency key that makes
//! a replayed or retried send post at most once.
//!
//! Every key the gateway writes to the outbox is rendered here and nowhere else. The rendered
//! strings are stored in `state.db` and must stay byte-identical across versions: a key that
//! renders differently after an upgrade sends a queued message twice, or drops it.

use crate::agent::tools::SendId;
use crate::cron::delivery::Occurrence;
use chrono::{DateTime, Utc};
use hermes_adapter::{Button, ChatTarget, OutboundFile, Usage};
use std::fmt;

/// Marks the last message of a turn (usage and finish reason travel with it).
#[derive(Debug, Clone)]
pub(crate) struct Finish {
    pub usage: Usage,
    pub finish_reason: String,
}

impl Finish {
    pub(crate) fn stop() -> Self {
        Self { usage: Usage::default(), finish_reason: "stop".into() }
    }
}

/// The outbox key of one message the gateway sends, named for what the message is. A key names
/// the message as a whole; its outbox rows are its parts ([`ReplyKey::part`],
/// [`ReplyKey::file_part`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReplyKey {
    /// A turn's answer to the inbound event with this id.
    Answer(String),
    /// The `n`th tool progress line of the answer to an event (chats that cannot edit).
    Progress { event_id: String, n: usize },
    /// The files of an answer that was streamed into edited messages, sent after them.
    Media(String),
    /// The `n`th message an answer being streamed into edited messages posted.
    Stream { event_id: String, n: usize },
    /// The `n`th message that completes a streamed answer the edits could not show.
    Tail { event_id: String, n: usize },
    /// A slash command's reply, or a system refusal, to an event.
    CommandReply(String),
    /// A command's notice before it runs the agent (`ReplyAndRun`).
    Notice(String),
    /// "Your message was seen" while a turn is busy.
    Ack(String),
    /// "An approval is pending" to a message that arrived while one waits.
    ApprovalPending(String),
    /// A stranger's pairing answer.
    Pairing(String),
    /// A turn that panicked: the user hears its incident id.
    Incident(String),
    /// The prompt asking to approve the command with this approval id.
    ApprovalPrompt(String),
    /// Nobody answered the approval in time.
    ApprovalTimeout(String),
    /// The approval was left open by a restart and is denied.
    ApprovalRestart(String),
    /// A question the agent asks through the clarify tool; `question_id` is new per question.
    Clarify { session_id: String, question_id: String },
    /// The courier's "could not deliver" notice for a chat's lane, one per minute of deadlines.
    /// Unlike the others it names one outbox row itself, not a message split into parts.
    Undelivered { lane: String, minute: i64 },
    /// One occurrence of a scheduled job delivered to one of its targets.
    CronDelivery { job_id: String, at: DateTime<Utc>, target: ChatTarget },
    /// The message of one `send_message` tool call.
    SendMessage { turn_id: String, call_id: String },
    /// A message an MCP client sent through `hermes mcp serve` (`messages_send`), named by the
    /// client's idempotency key, so its retry posts nothing new.
    McpSend(String),
    /// The chat is told that the operator answered its approval from an MCP client.
    ApprovalAnsweredElsewhere(String),
    /// What became of the files of an event (a voice note too long, a transcription that
    /// failed, the transcript echoed), before its answer.
    MediaNotice(String),
}

impl fmt::Display for ReplyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplyKey::Answer(event_id) => write!(f, "{event_id}:answer"),
            ReplyKey::Progress { event_id, n } => write!(f, "{event_id}:answer:progress{n}"),
            ReplyKey::Media(event_id) => write!(f, "{event_id}:answer:media"),
            ReplyKey::Stream { event_id, n } => write!(f, "{event_id}:answer:stream{n}"),
            ReplyKey::Tail { event_id, n } => write!(f, "{event_id}:answer:tail{n}"),
            ReplyKey::CommandReply(event_id) => write!(f, "{event_id}:reply"),
            ReplyKey::Notice(event_id) => write!(f, "{event_id}:notice"),
            ReplyKey::Ack(event_id) => write!(f, "{event_id}:ack"),
            ReplyKey::ApprovalPending(event_id) => write!(f, "{event_id}:approval-pending"),
            ReplyKey::Pairing(event_id) => write!(f, "{event_id}:pairing"),
            ReplyKey::Incident(event_id) => write!(f, "{event_id}:internal-error"),
            ReplyKey::ApprovalPrompt(id) => write!(f, "approval:{id}"),
            ReplyKey::ApprovalTimeout(id) => write!(f, "approval:{id}:timeout"),
            ReplyKey::ApprovalRestart(id) => write!(f, "approval:{id}:restart"),
            ReplyKey::Clarify { session_id, question_id } => write!(f, "clarify:{session_id}:{question_id}"),
            ReplyKey::Undelivered { lane, minute } => write!(f, "undelivered:{lane}:{minute}"),
            ReplyKey::CronDelivery { job_id, at, target } => {
                let thread = target.thread_id.as_deref().unwrap_or("");
                // A scheduled occurrence falls on a whole second and keeps the key it always had;
                // a run by hand happens at any instant, and two of them in one second are two
                // occurrences, so its milliseconds are part of its key.
                let when = match at.timestamp_subsec_millis() {
                    0 => at.timestamp().to_string(),
                    millis => format!("{}.{millis:03}", at.timestamp()),
                };
                write!(f, "cron:{job_id}:{when}:{}:{}:{thread}", target.platform, target.chat_id)
            }
            ReplyKey::SendMessage { turn_id, call_id } => write!(f, "{turn_id}:send_message:{call_id}"),
            ReplyKey::McpSend(key) => write!(f, "mcp_send:{key}"),
            ReplyKey::ApprovalAnsweredElsewhere(id) => write!(f, "approval:{id}:answered-by-mcp"),
            ReplyKey::MediaNotice(event_id) => write!(f, "{event_id}:media-notice"),
        }
    }
}

impl ReplyKey {
    /// The key of a scheduled job's `occurrence` delivered to `target`.
    pub(crate) fn cron_delivery(occurrence: &Occurrence, target: &ChatTarget) -> Self {
        ReplyKey::CronDelivery { job_id: occurrence.job_id.clone(), at: occurrence.at, target: target.clone() }
    }

    /// The key of the message the `send_message` tool call `id` sends.
    pub(crate) fn send_message(id: &SendId) -> Self {
        ReplyKey::SendMessage { turn_id: id.turn_id.clone(), call_id: id.call_id.clone() }
    }

    /// The outbox key of the `i`th text part of the message.
    pub(crate) fn part(&self, i: usize) -> String {
        format!("{self}:{i}")
    }

    /// The outbox key of the `i`th file sent with the message.
    pub(crate) fn file_part(&self, i: usize) -> String {
        format!("{self}:file:{i}")
    }
}

/// What a reply carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Body {
    /// Markdown: rendered in the platform's dialect and split to its limit. Sent through
    /// [`Deliverer`](crate::gateway::delivery::deliverer::Deliverer), its `MEDIA:` tags become
    /// files first.
    Markdown(String),
    /// One message already in the platform's dialect and within its limit (a part of an answer
    /// being streamed): sent as it is, `MEDIA:` tags included.
    Rendered(String),
}

/// One message for a chat, before it is rendered and split into parts.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    pub target: ChatTarget,
    /// The message this replies to (every text part replies to it).
    pub reply_to: Option<String>,
    pub body: Body,
    /// Rows of buttons, under the last part where the platform has buttons (elsewhere the text
    /// must say what they would do).
    pub buttons: Vec<Vec<Button>>,
    /// Marks the last part as the end of a turn, with its usage and finish reason.
    pub finish: Option<Finish>,
    /// Files checked as sendable, sent after the text.
    pub files: Vec<OutboundFile>,
}

impl Reply {
    /// Markdown to `target`, replying to nothing, without buttons, files or a finish.
    pub(crate) fn markdown(target: ChatTarget, text: impl Into<String>) -> Self {
        Self { target, reply_to: None, body: Body::Markdown(text.into()), buttons: Vec::new(), finish: None, files: Vec::new() }
    }

    /// One already-rendered message to `target` (see [`Body::Rendered`]).
    pub(crate) fn rendered(target: ChatTarget, text: impl Into<String>) -> Self {
        Self { body: Body::Rendered(text.into()), ..Self::markdown(target, String::new()) }
    }

    pub(crate) fn replying_to(mut self, reply_to: Option<impl Into<String>>) -> Self {
        self.reply_to = reply_to.map(Into::into);
        self
    }

    pub(crate) fn with_buttons(mut self, buttons: Vec<Vec<Button>>) -> Self {
        self.buttons = buttons;
        self
    }

    pub(crate) fn finishing(mut self, finish: Option<Finish>) -> Self {
        self.finish = finish;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every key as it is stored today. These literals must never change: the outbox of a
    /// running install holds them.
    #[test]
    fn every_key_renders_as_it_is_stored() {
        let e = || "ev1".to_string();
        let cases = [
            (ReplyKey::Answer(e()), "ev1:answer"),
            (ReplyKey::Progress { event_id: e(), n: 2 }, "ev1:answer:progress2"),
            (ReplyKey::Media(e()), "ev1:answer:media"),
            (ReplyKey::Stream { event_id: e(), n: 0 }, "ev1:answer:stream0"),
            (ReplyKey::Tail { event_id: e(), n: 3 }, "ev1:answer:tail3"),
            (ReplyKey::CommandReply(e()), "ev1:reply"),
            (ReplyKey::Notice(e()), "ev1:notice"),
            (ReplyKey::Ack(e()), "ev1:ack"),
            (ReplyKey::ApprovalPending(e()), "ev1:approval-pending"),
            (ReplyKey::Pairing(e()), "ev1:pairing"),
            (ReplyKey::Incident(e()), "ev1:internal-error"),
            (ReplyKey::ApprovalPrompt("a1b2c3d4".into()), "approval:a1b2c3d4"),
            (ReplyKey::ApprovalTimeout("a1b2c3d4".into()), "approval:a1b2c3d4:timeout"),
            (ReplyKey::ApprovalRestart("a1b2c3d4".into()), "approval:a1b2c3d4:restart"),
            (ReplyKey::Clarify { session_id: "s1".into(), question_id: "q9".into() }, "clarify:s1:q9"),
            (ReplyKey::Undelivered { lane: "telegram\u{1f}42".into(), minute: 29_000_000 }, "undelivered:telegram\u{1f}42:29000000"),
            (ReplyKey::SendMessage { turn_id: "t1".into(), call_id: "call_1".into() }, "t1:send_message:call_1"),
            (ReplyKey::McpSend("k-1".into()), "mcp_send:k-1"),
            (ReplyKey::ApprovalAnsweredElsewhere("#ab12cd34".into()), "approval:#ab12cd34:answered-by-mcp"),
        ];
        for (key, stored) in cases {
            assert_eq!(key.to_string(), stored, "{key:?}");
        }
    }

    /// A scheduled delivery's key names the job, the occurrence's time and the whole target (an
    /// empty thread when it has none), as the scheduler rendered it before the gateway did.
    #[test]
    fn a_cron_delivery_renders_as_it_is_stored() {
        let at = chrono::DateTime::from_timestamp(1_700_000_000, 0).expect("a valid timestamp");
        let occurrence = Occurrence { job_id: "j1".into(), at };
        let cases = [("telegram:42", "cron:j1:1700000000:telegram:42:"), ("telegram:-100:7", "cron:j1:1700000000:telegram:-100:7")];
        for (target, stored) in cases {
            let key = ReplyKey::cron_delivery(&occurrence, &ChatTarget::parse(target).expect("a valid target"));
            assert_eq!(key.to_string(), stored);
            assert_eq!(key.part(0).strip_suffix(":0"), Some(stored));
        }
    }

    /// Two runs by hand within one second are two occurrences: neither delivery may be taken for
    /// the other's (the second would be dropped as already sent).
    #[test]
    fn two_runs_by_hand_in_one_second_have_two_keys() {
        let target = ChatTarget::parse("matrix:!room:example.org").expect("a valid target");
        let first = chrono::DateTime::from_timestamp(1_700_000_000, 120_000_000).expect("a valid timestamp");
        let second = chrono::DateTime::from_timestamp(1_700_000_000, 870_000_000).expect("a valid timestamp");
        let key = |at| ReplyKey::cron_delivery(&Occurrence { job_id: "j1".into(), at }, &target).to_string();
        assert_ne!(key(first), key(second));
        assert_eq!(key(first), "cron:j1:1700000000.120:matrix:!room:example.org:");
    }

    /// Moved from `cron::delivery`: a key names the occurrence and the target, nothing else.
    #[test]
    fn cron_keys_name_the_occurrence_and_the_target() {
        let key = |job: &str, at, target: &str| {
            let occurrence = Occurrence { job_id: job.into(), at };
            ReplyKey::cron_delivery(&occurrence, &ChatTarget::parse(target).expect("a valid target")).to_string()
        };
        let at = DateTime::from_timestamp(1_800_000_000, 0).expect("a valid timestamp");
        assert_eq!(key("abc", at, "telegram:1:2"), key("abc", at, "telegram:1:2"));
        assert_ne!(key("abc", at, "telegram:1:2"), key("abc", at + chrono::Duration::minutes(1), "telegram:1:2"));
        assert_ne!(key("abc", at, "telegram:1:2"), key("abc", at, "telegram:1"));
    }

    #[test]
    fn a_send_message_key_is_built_from_the_calls_identity() {
        let key = ReplyKey::send_message(&SendId { turn_id: "t1".into(), call_id: "call_1".into() });
        assert_eq!(key.to_string(), "t1:send_message:call_1");
        assert_eq!(key.part(0), "t1:send_message:call_1:0");
    }

    #[test]
    fn parts_are_numbered_after_the_key() {
        let key = ReplyKey::Answer("ev1".into());
        assert_eq!(key.part(0), "ev1:answer:0");
        assert_eq!(key.part(12), "ev1:answer:12");
        assert_eq!(key.file_part(0), "ev1:answer:file:0");
        assert_eq!(ReplyKey::Stream { event_id: "ev1".into(), n: 1 }.part(0), "ev1:answer:stream1:0");
    }
}
