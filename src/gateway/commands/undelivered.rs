//! `/undelivered`: admins see the dead letters, the outbound messages the courier gave up on (a
//! refusal that will not pass, or no delivery within `delivery.retry_window`), newest first, each
//! with its id, chat, age, reason and the start of its text, and how to act on it (`/resend`,
//! `/drop`).
//!
//! This file also owns what `/resend`, `/drop` and `hermes outbox` share with it: how a dead
//! letter is described, how an id is read, and the requeue and drop themselves, so the chat and
//! the shell say the same things about the same rows.

use super::{CommandContext, CommandOutcome, CommandSpec, SlashCommand};
use crate::gateway::delivery::courier::human;
use crate::gateway::intake::auth::AuthPolicy;
use crate::observe::redact::redact_patterns;
use crate::store::{DeadLetter, Outbox, QueueSummary, StoreError};
use async_trait::async_trait;
use hermes_adapter::{ChatTarget, InboundEvent};
use std::time::Duration;

pub(super) struct Undelivered;

static SPEC: CommandSpec = CommandSpec {
    name: "undelivered",
    aliases: &[],
    args_hint: "",
    description: "List the messages that could not be delivered, to resend or drop (admins)",
    runs_mid_turn: true,
};

/// Dead letters one listing shows: a chat message stays readable, and the rest are listed once
/// these are dealt with.
pub(crate) const SHOWN: usize = 20;
/// Characters of a message's text a listing shows.
const PREVIEW_CHARS: usize = 80;
/// Dead letters searched to name an id's chat before it is resent or dropped; there are rarely
/// more than a handful, and one past this is still resent or dropped, just not named.
const LOOKUP: usize = 10_000;

#[async_trait]
impl SlashCommand for Undelivered {
    fn spec(&self) -> &'static CommandSpec {
        &SPEC
    }
    async fn run(&self, ctx: &mut CommandContext<'_>, _args: &str) -> CommandOutcome {
        CommandOutcome::Reply(respond(&ctx.handles.auth, ctx.handles.outbox.as_ref(), ctx.event).await)
    }
}

/// The reply to `/undelivered` from `event`'s sender.
async fn respond(auth: &AuthPolicy, outbox: &dyn Outbox, event: &InboundEvent) -> String {
    if !auth.is_admin(event) {
        return "⛔ Only an admin can see the undelivered messages.".into();
    }
    let letters = match outbox.outbox_dead_letters(SHOWN).await {
        Ok(letters) => letters,
        Err(e) => {
            tracing::warn!(error = %e, "cannot list the dead letters");
            return format!("Could not read the outbox: {e}");
        }
    };
    if letters.is_empty() {
        return "Nothing is undelivered.".into();
    }
    // Only for "20 of 34": without it the listing is still right.
    let total = outbox.outbox_summary().await.map(|s| total_dead(&s)).unwrap_or(0);
    let mut lines = vec!["📭 **Undelivered messages** (newest first)".to_string()];
    lines.extend(entries(&letters, now_ms()));
    if let Some(more) = more_line(letters.len(), total) {
        lines.push(more);
    }
    lines.push("Resend one with `/resend <id>`, or give it up with `/drop <id>`.".into());
    lines.join("\n")
}

/// Two lines per dead letter: `• #id platform:chat — queued …, given up …: reason`, then the
/// start of its text.
pub(crate) fn entries(letters: &[DeadLetter], now_ms: i64) -> Vec<String> {
    let mut lines = Vec::with_capacity(letters.len() * 2);
    for letter in letters {
        let tries = if letter.attempts > 0 { format!(" after {} attempt(s)", letter.attempts) } else { String::new() };
        lines.push(format!(
            "• #{} {} — queued {} ago, given up {} ago{tries}: {}",
            letter.id,
            destination(letter),
            age(letter.created_at, now_ms),
            age(letter.updated_at, now_ms),
            // Reasons are platform errors; some quote a URL with the bot's token in it.
            redact_patterns(&letter.reason)
        ));
        lines.push(format!("  “{}”", preview(&letter.body)));
    }
    lines
}

/// "Showing the newest 20 of 34." when the listing is not all of them.
pub(crate) fn more_line(shown: usize, total: u64) -> Option<String> {
    (total > shown as u64).then(|| format!("Showing the newest {shown} of {total}."))
}

pub(crate) fn total_dead(summary: &[QueueSummary]) -> u64 {
    summary.iter().map(|s| s.dead).sum()
}

/// `platform:chat[:thread]`, from the stored target; the platform alone if the target is
/// unreadable (a row from an older hermes).
pub(crate) fn destination(letter: &DeadLetter) -> String {
    match serde_json::from_str::<ChatTarget>(&letter.target) {
        Ok(target) => match &target.thread_id {
            Some(thread) => format!("{}:{}:{thread}", target.platform, target.chat_id),
            None => format!("{}:{}", target.platform, target.chat_id),
        },
        Err(_) => letter.platform.clone(),
    }
}

/// The text on one line, cut to [`PREVIEW_CHARS`].
pub(crate) fn preview(body: &str) -> String {
    let line = body.split_whitespace().collect::<Vec<_>>().join(" ");
    let line = redact_patterns(&line);
    if line.chars().count() <= PREVIEW_CHARS {
        return line;
    }
    let cut: String = line.chars().take(PREVIEW_CHARS - 1).collect();
    format!("{}…", cut.trim_end())
}

/// How long ago `then_ms` was, as people say it ("4 min").
pub(crate) fn age(then_ms: i64, now_ms: i64) -> String {
    human(Duration::from_millis(u64::try_from(now_ms - then_ms).unwrap_or(0)))
}

/// One platform's queue: "telegram 3 waiting (oldest 4 min), 1 undelivered"; `None` when both
/// are zero.
pub(crate) fn queue_line(summary: &QueueSummary, now_ms: i64) -> Option<String> {
    let mut parts = Vec::new();
    if summary.pending > 0 {
        let oldest = summary.oldest_pending_at.map(|at| format!(" (oldest {})", age(at, now_ms))).unwrap_or_default();
        parts.push(format!("{} waiting{oldest}", summary.pending));
    }
    if summary.dead > 0 {
        parts.push(format!("{} undelivered", summary.dead));
    }
    (!parts.is_empty()).then(|| format!("{} {}", summary.platform, parts.join(", ")))
}

/// A dead letter's id as typed: `12` or `#12`, alone.
pub(crate) fn parse_id(args: &str) -> Option<i64> {
    let mut words = args.split_whitespace();
    let (Some(word), None) = (words.next(), words.next()) else { return None };
    word.strip_prefix('#').unwrap_or(word).parse::<i64>().ok().filter(|id| *id > 0)
}

/// Dead letter `id`, if it is one (and among the newest [`LOOKUP`]).
async fn find(outbox: &dyn Outbox, id: i64) -> Result<Option<DeadLetter>, StoreError> {
    Ok(outbox.outbox_dead_letters(LOOKUP).await?.into_iter().find(|l| l.id == id))
}

/// A dead letter put back on its way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Requeued {
    /// Its lane, for the courier to wake.
    pub lane: String,
    /// Where it goes (`platform:chat`).
    pub destination: String,
}

/// Put dead letter `id` back on its way, to be tried until `deadline_ms`; `None` if there is no
/// such dead letter.
pub(crate) async fn requeue(outbox: &dyn Outbox, id: i64, deadline_ms: i64) -> Result<Option<Requeued>, StoreError> {
    let letter = find(outbox, id).await?;
    let Some(lane) = outbox.outbox_requeue(id, deadline_ms).await? else { return Ok(None) };
    let destination = letter.as_ref().map(destination).unwrap_or_else(|| "its chat".into());
    Ok(Some(Requeued { lane, destination }))
}

/// Give dead letter `id` up for good; where it was going, or `None` if there is no such dead
/// letter.
pub(crate) async fn drop_letter(outbox: &dyn Outbox, id: i64) -> Result<Option<String>, StoreError> {
    let letter = find(outbox, id).await?;
    if !outbox.outbox_drop(id).await? {
        return Ok(None);
    }
    Ok(Some(letter.as_ref().map(destination).unwrap_or_else(|| "its chat".into())))
}

/// A deadline `window` from now, in milliseconds since the epoch.
pub(crate) fn deadline_after(window: Duration) -> i64 {
    now_ms().saturating_add(i64::try_from(window.as_millis()).unwrap_or(i64::MAX))
}

pub(crate) fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::gateway::tests::support::{dead_letter, queued, rig};
    use crate::store::AttemptEnd;
    use hermes_adapter::{ChatType, Platform, SessionSource};

    pub(in crate::gateway) fn from(user: &str, text: &str) -> InboundEvent {
        let mut source = SessionSource::new(Platform::new("chat"), "c1", ChatType::Dm);
        source.user_id = Some(user.into());
        InboundEvent::text("e1", source, text)
    }

    /// `/undelivered` from `event`'s sender, with the handles the command takes.
    async fn ask(handles: &crate::gateway::commands::CommandHandles, event: &InboundEvent) -> String {
        respond(&handles.auth, handles.outbox.as_ref(), event).await
    }

    #[tokio::test]
    async fn a_platform_error_or_an_answer_quoting_a_secret_is_listed_without_it() {
        let (_dir, wiring, _chat) = rig().await;
        let handles = &wiring.actors.commands;
        let token = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw";
        queued(&wiring.store, "k1", "c9", "the key is sk-proj-abcdefghijklmnop").await;
        let reason = format!("error sending request for url (https://api.telegram.org/bot{token}/sendMessage)");
        wiring.store.outbox_end_attempt("k1", AttemptEnd::Dead { reason }).await.unwrap();
        let reply = ask(handles, &from("boss", "/undelivered")).await;
        assert!(reply.contains("#") && reply.contains("api.telegram.org"), "{reply}");
        assert!(!reply.contains("AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw") && !reply.contains("abcdefghijklmnop"), "{reply}");
    }

    #[tokio::test]
    async fn lists_dead_letters_for_admins_only() {
        let (_dir, wiring, _chat) = rig().await;
        let handles = &wiring.actors.commands;
        assert_eq!(ask(handles, &from("boss", "/undelivered")).await, "Nothing is undelivered.");
        let long = format!("first line\nsecond line {}", "x".repeat(200));
        let id = dead_letter(&wiring.store, "k1", "c9", &long).await;
        let reply = ask(handles, &from("boss", "/undelivered")).await;
        assert!(reply.contains(&format!("• #{id} chat:c9 — queued ")), "{reply}");
        assert!(reply.contains(" ago: chat not found"), "{reply}");
        assert!(reply.contains("“first line second line xxx"), "one line: {reply}");
        let preview_line = reply.lines().find(|l| l.contains("first line")).unwrap();
        assert!(preview_line.chars().count() <= PREVIEW_CHARS + 4 && preview_line.ends_with("…”"), "{preview_line}");
        assert!(reply.contains("`/resend <id>`") && reply.contains("`/drop <id>`"), "{reply}");
        let refused = ask(handles, &from("guest", "/undelivered")).await;
        assert!(refused.starts_with("⛔ Only an admin"), "{refused}");
        assert!(!refused.contains("first line"));
    }

    #[tokio::test]
    async fn a_long_list_shows_the_newest_twenty_and_says_how_many_there_are() {
        let (_dir, wiring, _chat) = rig().await;
        let handles = &wiring.actors.commands;
        for i in 0..23 {
            dead_letter(&wiring.store, &format!("k{i}"), "c1", &format!("message {i}")).await;
        }
        let reply = ask(handles, &from("boss", "/undelivered")).await;
        assert_eq!(reply.lines().filter(|l| l.starts_with("• #")).count(), SHOWN, "{reply}");
        assert!(reply.contains("Showing the newest 20 of 23."), "{reply}");
    }

    #[test]
    fn ids_previews_and_queue_lines_read_as_people_write_them() {
        assert_eq!(parse_id("12"), Some(12));
        assert_eq!(parse_id(" #7 "), Some(7));
        for bad in ["", "abc", "0", "-3", "1 2", "#"] {
            assert_eq!(parse_id(bad), None, "{bad:?}");
        }
        assert_eq!(preview("  a\n\n b  "), "a b");
        let now = 10_000_000;
        let summary = QueueSummary { platform: "telegram".into(), pending: 3, dead: 1, oldest_pending_at: Some(now - 4 * 60_000) };
        assert_eq!(queue_line(&summary, now).as_deref(), Some("telegram 3 waiting (oldest 4 min), 1 undelivered"));
        let dead_only = QueueSummary { platform: "discord".into(), dead: 2, ..Default::default() };
        assert_eq!(queue_line(&dead_only, now).as_deref(), Some("discord 2 undelivered"));
        assert_eq!(queue_line(&QueueSummary { platform: "slack".into(), ..Default::default() }, now), None);
        let odd = DeadLetter {
            id: 1,
            key: "k".into(),
            platform: "matrix".into(),
            target: "not json".into(),
            body: String::new(),
            reason: String::new(),
            attempts: 0,
            created_at: 0,
            updated_at: 0,
        };
        assert_eq!(destination(&odd), "matrix");
        let threaded = DeadLetter { target: r#"{"platform":"telegram","chat_id":"-100","thread_id":"5"}"#.into(), ..odd };
        assert_eq!(destination(&threaded), "telegram:-100:5");
    }
}
