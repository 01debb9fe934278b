//! A fake Telegram Bot API on loopback HTTP, faithful enough for teloxide: `/bot<token>/<method>`
//! with case-insensitive methods and JSON, form, multipart or query parameters; long-poll
//! `getUpdates` with offsets, limits and 409 for a second poller; sends, edits, deletes, chat
//! actions, command menus, callback answers, files (voice notes, audio, photos, documents in;
//! voice, audio, photos, documents out); Telegram's validation (4096 UTF-16 units,
//! "can't parse entities"). The test owns a [`FakeTelegram`] handle to inject what users do, read
//! what the bot did, and inject faults.
//!
//! * `html`: HTML and MarkdownV2 parsing into visible text and entities.
//! * `clean`: what Telegram does to text after parsing (tabs to spaces, trimming).
//! * `media`: users' files as messages declare them, and the files the bot uploaded.
//! * `state`: chats, updates, messages and the call log.
//! * `api`: the HTTP surface and method dispatch.
//! * `webhook`: `setWebhook` / `getWebhookInfo` / `deleteWebhook`, and delivery by POST.

mod api;
mod clean;
mod html;
mod media;
mod state;
mod webhook;

pub use media::{MAX_DOWNLOAD_BYTES, SentFile, TgMedia, TgMediaKind};
pub use state::{ApiCall, Fault, FaultScope, Injected, SentKind, SentMessage, TgUser};

use crate::serve::{self, Shutdown};
use serde_json::Value;
use state::{Shared, State};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How the fake presents itself.
#[derive(Debug, Clone)]
pub struct TelegramOptions {
    pub token: String,
    pub bot_id: i64,
    pub bot_username: String,
}

impl Default for TelegramOptions {
    fn default() -> Self {
        Self { token: "123456:TEST-TOKEN".to_string(), bot_id: 123456, bot_username: "hermes_test_bot".to_string() }
    }
}

/// Handle to a running fake; clones share it, and the server stops when the last one drops.
#[derive(Clone)]
pub struct FakeTelegram {
    shared: Arc<Shared>,
    addr: SocketAddr,
    _shutdown: Arc<Shutdown>,
}

impl FakeTelegram {
    pub async fn start() -> std::io::Result<FakeTelegram> {
        Self::start_with(TelegramOptions::default()).await
    }

    pub async fn start_with(options: TelegramOptions) -> std::io::Result<FakeTelegram> {
        let shutdown = Shutdown::new();
        let shared = Arc::new(Shared::new(State::new(options.token, options.bot_id, options.bot_username), shutdown.signal()));
        let router = api::router(shared.clone());
        let addr = serve::spawn(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), router, shutdown.signal()).await?;
        tokio::spawn(webhook::deliver(shared.clone()));
        Ok(FakeTelegram { shared, addr, _shutdown: Arc::new(shutdown) })
    }

    /// What teloxide's `set_api_url` (or `TELEGRAM_API_BASE_URL`) takes.
    pub fn api_url(&self) -> String {
        format!("http://{}", self.addr)
    }
    pub fn token(&self) -> String {
        self.shared.with(|s| s.token.clone())
    }
    pub fn bot_id(&self) -> i64 {
        self.shared.with(|s| s.bot_id)
    }
    pub fn bot_username(&self) -> String {
        self.shared.with(|s| s.bot_username.clone())
    }

    /// A user whose username is also their first name; [`TgUser::named`] makes others.
    pub fn user(&self, id: i64, username: &str) -> TgUser {
        TgUser::named(id, username, None).with_username(username)
    }

    /// Register a supergroup (ids are negative, e.g. -1001234), optionally a forum.
    pub fn group(&self, chat_id: i64, title: &str, forum: bool) {
        self.shared.with(|s| s.add_group(chat_id, title, forum));
    }

    /// Register a topic of a forum group.
    pub fn topic(&self, chat_id: i64, thread_id: i64, _name: &str) {
        self.shared.with(|s| s.add_topic(chat_id, thread_id));
    }

    pub fn dm(&self, from: &TgUser, text: &str) -> Injected {
        self.shared.inject(|s| s.user_message(from.id, from, text, None, None))
    }

    pub fn group_message(&self, chat_id: i64, from: &TgUser, text: &str) -> Injected {
        self.shared.inject(|s| s.user_message(chat_id, from, text, None, None))
    }

    pub fn topic_message(&self, chat_id: i64, thread_id: i64, from: &TgUser, text: &str) -> Injected {
        self.shared.inject(|s| s.user_message(chat_id, from, text, Some(thread_id), None))
    }

    pub fn reply(&self, chat_id: i64, from: &TgUser, reply_to_message_id: i64, text: &str) -> Injected {
        self.shared.inject(|s| s.user_message(chat_id, from, text, None, Some(reply_to_message_id)))
    }

    pub fn edited_message(&self, chat_id: i64, message_id: i64, from: &TgUser, new_text: &str) -> Injected {
        self.shared.inject(|s| s.edited_message(chat_id, message_id, from, new_text))
    }

    /// A press of a button (callback data `data`) under bot message `message_id`.
    pub fn callback(&self, chat_id: i64, message_id: i64, from: &TgUser, data: &str) -> Injected {
        self.shared.inject(|s| s.callback(chat_id, message_id, from, data))
    }

    /// An 800×600 photo holding `bytes`.
    pub fn photo(&self, chat_id: i64, from: &TgUser, bytes: Vec<u8>, caption: Option<&str>) -> Injected {
        self.media(chat_id, from, &TgMedia::photo(bytes, 800, 600), caption)
    }

    pub fn document(&self, chat_id: i64, from: &TgUser, file_name: &str, bytes: Vec<u8>, caption: Option<&str>) -> Injected {
        self.media(chat_id, from, &TgMedia::document(bytes, file_name, None), caption)
    }

    /// A message from `from` in `chat_id` carrying `media` (a voice note, audio, photo, ...), with
    /// what it declares about itself.
    pub fn media(&self, chat_id: i64, from: &TgUser, media: &TgMedia, caption: Option<&str>) -> Injected {
        self.shared.inject(|s| s.media_message(chat_id, from, media, caption))
    }

    /// Any update JSON (junk, unknown kinds); `update_id` is filled in when missing.
    pub fn inject_raw(&self, update: Value) -> i64 {
        self.shared.inject(|s| s.raw_update(update)).update_id
    }

    /// The next `getUpdates` returns this update again, as if its confirmation had been lost.
    pub fn redeliver(&self, update_id: i64) {
        self.shared.with(|s| s.redeliver(update_id));
        self.shared.updates.notify_waiters();
    }

    pub fn sent(&self) -> Vec<SentMessage> {
        self.shared.with(|s| s.sent.clone())
    }
    pub fn sent_to(&self, chat_id: i64) -> Vec<SentMessage> {
        self.shared.with(|s| s.sent.iter().filter(|m| m.chat_id == chat_id).cloned().collect())
    }
    pub fn sent_count(&self) -> usize {
        self.shared.with(|s| s.sent.len())
    }
    /// How many bot messages match `pred`, without copying the log: cheap enough to poll while
    /// a benchmark runs.
    pub fn count_sent(&self, pred: impl Fn(&SentMessage) -> bool) -> usize {
        self.shared.with(|s| s.sent.iter().filter(|m| pred(m)).count())
    }
    /// When the latest bot message matching `pred` arrived, if one did.
    pub fn last_sent_at(&self, pred: impl Fn(&SentMessage) -> bool) -> Option<Instant> {
        self.shared.with(|s| s.sent.iter().filter(|m| pred(m)).map(|m| m.at).max())
    }

    /// Wait for at least `count` bot messages in `chat_id`; panics with what was sent otherwise.
    pub async fn wait_sent(&self, chat_id: i64, count: usize, timeout: Duration) -> Vec<SentMessage> {
        if self.wait_until(timeout, |f| f.sent_to(chat_id).len() >= count).await {
            return self.sent_to(chat_id);
        }
        panic!("fake Telegram: expected {count} bot messages in chat {chat_id} within {timeout:?}; got {:#?}", self.sent_to(chat_id));
    }

    pub async fn wait_until(&self, timeout: Duration, pred: impl Fn(&FakeTelegram) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if pred(self) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            let changed = self.shared.changed.notified();
            let _ = tokio::time::timeout(Duration::from_millis(20), changed).await;
        }
    }

    pub fn calls(&self) -> Vec<ApiCall> {
        self.shared.with(|s| s.calls.clone())
    }
    pub fn call_count(&self, method: &str) -> usize {
        let method = method.to_ascii_lowercase();
        self.shared.with(|s| s.calls.iter().filter(|c| c.method == method).count())
    }
    /// When the first call of `method` arrived, if one did.
    pub fn first_call_at(&self, method: &str) -> Option<Instant> {
        let method = method.to_ascii_lowercase();
        self.shared.with(|s| s.calls.iter().find(|c| c.method == method).map(|c| c.at))
    }
    pub fn commands(&self) -> Vec<(String, String)> {
        self.shared.with(|s| s.commands.clone())
    }
    pub fn chat_actions(&self, chat_id: i64) -> Vec<String> {
        self.shared.with(|s| s.chat_actions.get(&chat_id).cloned().unwrap_or_default())
    }
    /// Paths of the files the bot downloaded, in order (`getFile` calls are in [`Self::calls`]).
    pub fn downloads(&self) -> Vec<String> {
        self.shared.with(|s| s.downloads.clone())
    }
    /// Bytes of users' files served to the bot so far (what went out, not what was declared).
    pub fn media_bytes_served(&self) -> u64 {
        self.shared.with(|s| s.bytes_served)
    }
    /// The files the bot uploaded to `chat_id`, in order, with their bytes.
    pub fn files_sent_to(&self, chat_id: i64) -> Vec<SentFile> {
        self.shared.with(|s| s.uploads.iter().filter(|f| f.chat_id == chat_id).cloned().collect())
    }
    /// The user of private chat `chat_id` accepts no voice messages (`true`) or does again.
    pub fn forbid_voice_messages(&self, chat_id: i64, forbidden: bool) {
        self.shared.with(|s| {
            if forbidden {
                s.voice_forbidden.insert(chat_id);
            } else {
                s.voice_forbidden.remove(&chat_id);
            }
        });
    }
    pub fn answered_callbacks(&self) -> Vec<String> {
        self.shared.with(|s| s.answered_callbacks.clone())
    }
    /// The toasts shown to pressers of buttons, in order (empty answers left out).
    pub fn callback_toasts(&self) -> Vec<String> {
        self.shared.with(|s| s.callback_texts.iter().filter_map(|(_, text)| text.clone()).collect())
    }
    /// Updates not yet confirmed by an offset.
    pub fn pending_updates(&self) -> usize {
        self.shared.with(|s| s.pending.len())
    }
    pub fn confirmed_offset(&self) -> i64 {
        self.shared.with(|s| s.confirmed_offset)
    }
    pub fn active_pollers(&self) -> usize {
        self.shared.with(|s| s.active_polls)
    }

    /// Stall (`true`) or release (`false`) long polling: while stalled, every `getUpdates`, the
    /// one waiting now included, is held without an answer (the connection stays open), as a
    /// wedged Bot API or a broken proxy does; other methods keep answering. Released, held
    /// polls answer as usual.
    pub fn stall_polls(&self, stalled: bool) {
        self.shared.with(|s| s.polls_stalled = stalled);
        self.shared.updates.notify_waiters();
    }

    /// The next `n` calls matching `scope` get `fault` (and have no effect).
    pub fn fail_next(&self, scope: FaultScope, n: usize, fault: Fault) {
        self.shared.with(|s| s.faults.fail_next(scope, n, fault));
    }
    /// Each call matching `scope` gets `fault` with this probability (seeded, see [`Self::set_seed`]).
    pub fn fail_fraction(&self, scope: FaultScope, fraction: f64, fault: Fault) {
        self.shared.with(|s| s.faults.fail_fraction(scope, fraction, fault));
    }
    pub fn set_seed(&self, seed: u64) {
        self.shared.with(|s| s.faults.reseed(seed));
    }
    /// The user of private chat `chat_id` blocks (`true`) or unblocks the bot.
    pub fn set_blocked(&self, chat_id: i64, blocked: bool) {
        self.shared.with(|s| {
            if blocked {
                s.blocked_by.insert(chat_id);
            } else {
                s.blocked_by.remove(&chat_id);
            }
        });
    }
    pub fn clear_faults(&self) {
        self.shared.with(|s| s.faults.clear());
    }
    /// Answer calls matching `scope` only after `d`.
    /// Enforce these flood limits on sends from now on: over them, a send gets a 429 with
    /// `retry_after` and is not delivered.
    pub fn enforce_limits(&self, limits: Vec<crate::limits::RateLimit>) {
        self.shared.with(|s| s.limits.set(limits));
    }

    /// Enforce Telegram's published limits, written from the Bots FAQ ("My bot is hitting limits,
    /// how do I avoid this?", <https://core.telegram.org/bots/faq#my-bot-is-hitting-limits-how-do-i-avoid-this>),
    /// not from the gateway's pacer:
    ///
    /// * "If you're sending bulk notifications to multiple users, the API will not allow more than
    ///   30 messages per second or so": 30 a second overall. The FAQ names no burst; 30 here (a
    ///   second's worth, its "or so"), so this one is lenient: a bulk run may put up to 59 into one
    ///   second and pass.
    /// * "When sending messages inside a particular chat, avoid sending more than one message per
    ///   second. We may allow short bursts that go over this limit": one a second per chat; the
    ///   FAQ gives no size for the bursts, 3 here.
    /// * "your bot will not be able to send more than 20 messages per minute to the same group":
    ///   at most 20 in ANY 60 s (a sliding window, the strictest reading), with no allowance.
    ///
    /// The two buckets judge arrivals with 250 ms of allowance for jitter between the client's
    /// send and the arrival here; the group count has none, as a count has no rate to be early to.
    pub fn enforce_published_limits(&self) {
        use crate::limits::{Per, RateLimit};
        let allowance = Duration::from_millis(250);
        self.enforce_limits(vec![
            RateLimit::bucket(Per::Everything, 30.0, 30.0, allowance),
            RateLimit::bucket(Per::Chat, 1.0, 3.0, allowance),
            RateLimit::window(Per::Group, 20, Duration::from_secs(60)),
        ]);
    }

    /// Sends refused with a 429 by the enforced limits.
    pub fn rate_limited_count(&self) -> usize {
        self.shared.with(|s| s.limits.refused)
    }

    pub fn set_latency(&self, scope: FaultScope, d: Duration) {
        self.shared.with(|s| s.faults.delay(scope, d));
    }

    /// What `getWebhookInfo` answers now.
    pub fn webhook_info(&self) -> Value {
        self.shared.with(|s| webhook::info(s))
    }

    /// Reach webhook URLs starting with `public` (the bot's public HTTPS address) at `reach`
    /// instead (`http://127.0.0.1:PORT`, a load balancer in front of the bot's replicas), as DNS
    /// and TLS termination do for a real bot.
    pub fn route_webhook(&self, public: &str, reach: &str) {
        self.shared.with(|s| s.webhook.route = Some((public.to_string(), reach.to_string())));
    }

    /// Webhook POSTs made so far (each try of each update), with the status each got (0: no
    /// answer).
    pub fn webhook_posts(&self) -> Vec<(i64, u16)> {
        self.shared.with(|s| s.webhook.posts.clone())
    }

    /// POST `update` to the webhook as someone else could, with `secret` as the secret token (or
    /// none): the status answered, 0 when nothing answered. Not queued, not retried.
    pub async fn forge_webhook_post(&self, update: Value, secret: Option<&str>) -> u16 {
        let url = self.shared.with(|s| webhook::reached_at(s));
        webhook::post(&url, secret, &update).await
    }

    /// The bot's user object, as `getMe` returns it.
    pub fn me(&self) -> Value {
        self.shared.with(|s| s.bot_user_json(true))
    }
}
