//! A fake Discord on loopback, faithful enough for serenity: the REST API under `/api/v10` and the
//! gateway WebSocket (HELLO, IDENTIFY → READY, HEARTBEAT/ACK, dispatches with sequence numbers,
//! RESUME with replay, RECONNECT, INVALID_SESSION, close codes). The test owns a [`FakeDiscord`]
//! handle to play users (DMs, guild channels, threads, button presses), read what the bot did, and
//! break things (429s, 5xx, cut connections, unacknowledged heartbeats).
//!
//! * `state`: guild, channels, messages, call log, sessions and connections.
//! * `rest`: the HTTP API.
//! * `gateway`: the WebSocket.

mod cdn;
mod gateway;
mod rest;
mod state;

pub use rest::MAX_CONTENT;
pub use state::{DcAttachment, DcSent, DcUpload, DcUser, Fault, FaultScope, Injected, RestCall};

use crate::serve::{self, Shutdown};
use axum::Router;
use axum::routing::{any, get};
use serde_json::{Value, json};
use state::{ChannelKind, Frame, Shared, State};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Message flag `IS_VOICE_MESSAGE`.
const IS_VOICE_MESSAGE: u64 = 1 << 13;

/// How the fake presents itself.
#[derive(Debug, Clone)]
pub struct DiscordOptions {
    pub token: String,
    pub bot_id: u64,
    pub bot_name: String,
    /// Milliseconds between heartbeats asked for in HELLO (Discord asks for ~41 s; tests want
    /// a dead connection noticed quickly).
    pub heartbeat_interval_ms: u64,
}

impl Default for DiscordOptions {
    fn default() -> Self {
        Self {
            token: "MTAwMDAwMDAwMDAwMDAwMDAx.fake.discord-test-token".to_string(),
            bot_id: 100_000_000_000_000_001,
            bot_name: "hermes".to_string(),
            heartbeat_interval_ms: 1_000,
        }
    }
}

/// Handle to a running fake; clones share it, and the server stops when the last one drops.
#[derive(Clone)]
pub struct FakeDiscord {
    shared: Arc<Shared>,
    addr: SocketAddr,
    _shutdown: Arc<Shutdown>,
}

impl FakeDiscord {
    pub async fn start() -> std::io::Result<FakeDiscord> {
        Self::start_with(DiscordOptions::default()).await
    }

    pub async fn start_with(options: DiscordOptions) -> std::io::Result<FakeDiscord> {
        let shutdown = Shutdown::new();
        let bot = DcUser::new(options.bot_id, &options.bot_name);
        let mut state = State::new(options.token, bot, options.bot_id);
        state.heartbeat_interval_ms = options.heartbeat_interval_ms;
        let shared = Arc::new(Shared::new(state, shutdown.signal()));
        let router = Router::new()
            .route("/ws", get(gateway::upgrade))
            .route("/api/v10/{*path}", any(rest::handle))
            .route("/cdn/{*path}", get(cdn::serve))
            .with_state(shared.clone());
        let addr = serve::spawn(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), router, shutdown.signal()).await?;
        shared.with(|s| {
            s.ws_url = format!("ws://{addr}/ws");
            s.cdn_base = format!("http://{addr}/cdn");
        });
        Ok(FakeDiscord { shared, addr, _shutdown: Arc::new(shutdown) })
    }

    /// What replaces `https://discord.com` (`DISCORD_API_BASE_URL`).
    pub fn api_url(&self) -> String {
        format!("http://{}", self.addr)
    }
    pub fn token(&self) -> String {
        self.shared.with(|s| s.token.clone())
    }
    pub fn bot(&self) -> DcUser {
        self.shared.with(|s| s.bot.clone())
    }
    pub fn guild_id(&self) -> u64 {
        self.shared.with(|s| s.guild_id)
    }

    /// A user whose global name is their username; set [`DcUser`]'s fields for others.
    pub fn user(&self, id: u64, username: &str) -> DcUser {
        DcUser::new(id, username)
    }

    /// A text channel of the guild.
    pub fn text_channel(&self, name: &str) -> u64 {
        self.shared.with(|s| s.add_channel(name, ChannelKind::Text))
    }

    /// A public thread under `parent`.
    pub fn thread(&self, parent: u64, name: &str) -> u64 {
        self.shared.with(|s| s.add_channel(name, ChannelKind::Thread { parent }))
    }

    /// The DM channel between the bot and `user` (created on first use).
    pub fn dm_channel(&self, user: &DcUser) -> u64 {
        self.shared.with(|s| s.dm_channel(user))
    }

    pub fn dm(&self, from: &DcUser, text: &str) -> Injected {
        let channel = self.dm_channel(from);
        self.message(channel, from, text, false, None)
    }

    /// A message in a guild channel or thread; `mention` prefixes `<@bot>` and lists the bot in
    /// `mentions`, as the Discord client does.
    pub fn channel_message(&self, channel: u64, from: &DcUser, text: &str, mention: bool) -> Injected {
        self.message(channel, from, text, mention, None)
    }

    /// A reply to message `reply_to` (the bot's or a user's).
    pub fn reply(&self, channel: u64, from: &DcUser, reply_to: u64, text: &str) -> Injected {
        self.message(channel, from, text, false, Some(reply_to))
    }

    /// A DM with files attached (`text` may be empty). A voice message
    /// ([`DcAttachment::voice_message`]) sets the message's `IS_VOICE_MESSAGE` flag. The files
    /// are on the fake's CDN, at the URLs the message names.
    pub fn dm_files(&self, from: &DcUser, text: &str, files: &[DcAttachment]) -> Injected {
        let channel = self.dm_channel(from);
        self.message_with(channel, from, text, false, None, files)
    }

    fn message(&self, channel: u64, from: &DcUser, text: &str, mention: bool, reply_to: Option<u64>) -> Injected {
        self.message_with(channel, from, text, mention, reply_to, &[])
    }

    fn message_with(
        &self,
        channel: u64,
        from: &DcUser,
        text: &str,
        mention: bool,
        reply_to: Option<u64>,
        files: &[DcAttachment],
    ) -> Injected {
        let injected = self.shared.with(|s| {
            let id = s.snowflake();
            let (content, mentions) =
                if mention { (format!("<@{}> {text}", s.bot.id), vec![s.bot_json()]) } else { (text.to_string(), vec![]) };
            let mut message = s.message_json(id, channel, State::user_json(from, false), &content, mentions, reply_to);
            if !files.is_empty() {
                message["attachments"] = Value::Array(files.iter().map(|f| cdn::publish(s, channel, f)).collect());
            }
            if files.iter().any(DcAttachment::is_voice) {
                message["flags"] = json!(IS_VOICE_MESSAGE);
            }
            if message.get("guild_id").is_some() {
                message["member"] = State::member_json(from);
            }
            s.user_messages.insert(id, message.clone());
            let seq = s.dispatch("MESSAGE_CREATE", message);
            Injected { id, channel_id: channel, seq }
        });
        self.shared.changed.notify_waiters();
        injected
    }

    /// A press of the button with `custom_id` under the bot's message `message_id`; returns the
    /// interaction id.
    pub fn button(&self, from: &DcUser, message_id: u64, custom_id: &str) -> Injected {
        self.shared.with(|s| {
            let id = s.snowflake();
            let sent = s.sent_index.get(&message_id).map(|i| s.sent[*i].clone());
            let channel_id = sent.as_ref().map(|m| m.channel_id).unwrap_or_default();
            let message = sent.map(|m| s.sent_message_json(&m)).unwrap_or(json!({}));
            let mut interaction = json!({
                "id": id.to_string(), "application_id": s.application_id.to_string(), "type": 3,
                "data": {"custom_id": custom_id, "component_type": 2}, "channel_id": channel_id.to_string(),
                "user": State::user_json(from, false), "token": format!("interaction-token-{id}"), "version": 1,
                "message": message, "locale": "en-US", "app_permissions": "0", "entitlements": [],
                "authorizing_integration_owners": {}, "attachment_size_limit": 10_485_760,
            });
            if s.channels.get(&channel_id).is_some_and(|c| !matches!(c.kind, ChannelKind::Dm { .. })) {
                interaction["guild_id"] = json!(s.guild_id.to_string());
            }
            let seq = s.dispatch("INTERACTION_CREATE", interaction);
            Injected { id, channel_id, seq }
        })
    }

    /// A slash command typed in `channel`: an application-command interaction carrying `input`
    /// as its one string option, as Discord sends it for the commands the bot registered.
    pub fn slash_command(&self, from: &DcUser, channel_id: u64, name: &str, input: Option<&str>) -> Injected {
        let injected = self.shared.with(|s| {
            let id = s.snowflake();
            let options: Vec<Value> = input.map(|v| json!({"name": "input", "type": 3, "value": v})).into_iter().collect();
            let token = format!("interaction-token-{id}");
            let mut interaction = json!({
                "id": id.to_string(), "application_id": s.application_id.to_string(), "type": 2,
                "data": {"id": "1", "name": name, "type": 1, "options": options}, "channel_id": channel_id.to_string(),
                "user": State::user_json(from, false), "token": token, "version": 1,
                "locale": "en-US", "app_permissions": "0", "entitlements": [],
                "authorizing_integration_owners": {}, "attachment_size_limit": 10_485_760,
            });
            if s.channels.get(&channel_id).is_some_and(|c| !matches!(c.kind, ChannelKind::Dm { .. })) {
                interaction["guild_id"] = json!(s.guild_id.to_string());
            }
            s.interactions.insert(token, state::Interaction { id, channel_id, acknowledged: false, original: None });
            let seq = s.dispatch("INTERACTION_CREATE", interaction);
            Injected { id, channel_id, seq }
        });
        self.shared.changed.notify_waiters();
        injected
    }

    /// Any dispatch (an unknown event name, a malformed payload).
    pub fn dispatch_raw(&self, event: &str, data: Value) -> Option<u64> {
        self.shared.with(|s| s.dispatch(event, data))
    }

    /// A frame that is not a dispatch at all (unknown opcode, garbage) on the live connection.
    pub fn send_raw_frame(&self, text: &str) {
        self.to_live_connection(Frame::Text(text.to_string()));
    }

    /// MESSAGE_CREATE of a user message again, as a replay after a resume can do.
    pub fn redeliver(&self, message_id: u64) {
        self.shared.with(|s| {
            if let Some(message) = s.user_messages.get(&message_id).cloned() {
                s.dispatch("MESSAGE_CREATE", message);
            }
        });
    }

    /// Bytes of users' attachments the CDN has sent so far.
    pub fn cdn_bytes_served(&self) -> u64 {
        self.shared.with(|s| s.cdn_bytes_served)
    }
    /// Requests the CDN has answered so far (found or not).
    pub fn cdn_requests(&self) -> usize {
        self.shared.with(|s| s.cdn_requests)
    }
    /// From now on, voice messages in `channel` are refused with Discord's error 50173 ("Cannot
    /// send voice messages in this channel"), as where the bot lacks `SEND_VOICE_MESSAGES`.
    pub fn refuse_voice_messages(&self, channel: u64) {
        self.shared.with(|s| s.no_voice_channels.insert(channel));
    }

    pub fn sent(&self) -> Vec<DcSent> {
        self.shared.with(|s| s.sent.clone())
    }
    pub fn sent_to(&self, channel: u64) -> Vec<DcSent> {
        self.shared.with(|s| s.sent.iter().filter(|m| m.channel_id == channel).cloned().collect())
    }
    pub fn sent_count(&self) -> usize {
        self.shared.with(|s| s.sent.len())
    }
    /// When the latest bot message matching `pred` arrived, if one did; reads the log in place
    /// (cheap enough to poll while a benchmark runs).
    pub fn last_sent_at(&self, pred: impl Fn(&DcSent) -> bool) -> Option<Instant> {
        self.shared.with(|s| s.sent.iter().filter(|m| pred(m)).map(|m| m.at).max())
    }
    pub fn typing(&self, channel: u64) -> usize {
        self.shared.with(|s| s.typing.get(&channel).copied().unwrap_or(0))
    }
    pub fn calls(&self) -> Vec<RestCall> {
        self.shared.with(|s| s.calls.clone())
    }
    /// REST calls whose method and path (under `/api/v10`) match; `*` matches one path segment.
    pub fn call_count(&self, method: &str, path: &str) -> usize {
        let pattern: Vec<&str> = path.trim_matches('/').split('/').collect();
        self.shared.with(|s| {
            s.calls
                .iter()
                .filter(|c| c.method == method)
                .filter(|c| {
                    let segments: Vec<&str> = c.path.trim_matches('/').split('/').collect();
                    segments.len() == pattern.len() && segments.iter().zip(&pattern).all(|(seg, pat)| *pat == "*" || seg == pat)
                })
                .count()
        })
    }
    pub fn interaction_callbacks(&self) -> Vec<(u64, u64)> {
        self.shared.with(|s| s.interaction_callbacks.clone())
    }
    /// (content, ephemeral) of the interaction responses that carried a message.
    pub fn interaction_messages(&self) -> Vec<(String, bool)> {
        self.shared.with(|s| s.interaction_messages.clone())
    }
    pub fn commands(&self) -> Value {
        self.shared.with(|s| s.commands.clone())
    }

    pub fn identifies(&self) -> usize {
        self.shared.with(|s| s.identifies)
    }
    pub fn resumes(&self) -> usize {
        self.shared.with(|s| s.resumes)
    }
    pub fn heartbeats(&self) -> usize {
        self.shared.with(|s| s.heartbeats)
    }
    /// Open WebSocket connections (identified or not).
    pub fn open_connections(&self) -> usize {
        self.shared.with(|s| s.connections.len())
    }
    /// Whether a connection is attached to the current session (events reach the bot now).
    pub fn connected(&self) -> bool {
        self.shared.with(|s| s.live_connection().is_some())
    }
    /// Whether a session exists (events injected now reach the bot, at once or on RESUME).
    pub fn has_session(&self) -> bool {
        self.shared.with(|s| s.current_session.is_some())
    }
    pub fn lost_events(&self) -> usize {
        self.shared.with(|s| s.lost_events)
    }

    pub async fn wait_connected(&self, timeout: Duration) -> bool {
        self.wait_until(timeout, |f| f.connected()).await
    }

    pub async fn wait_until(&self, timeout: Duration, pred: impl Fn(&FakeDiscord) -> bool) -> bool {
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

    /// Wait for at least `count` bot messages in `channel`; panics with what was sent otherwise.
    pub async fn wait_sent(&self, channel: u64, count: usize, timeout: Duration) -> Vec<DcSent> {
        if self.wait_until(timeout, |f| f.sent_to(channel).len() >= count).await {
            return self.sent_to(channel);
        }
        panic!("fake Discord: expected {count} bot messages in channel {channel} within {timeout:?}; got {:#?}", self.sent_to(channel));
    }

    fn to_live_connection(&self, frame: Frame) -> bool {
        self.shared.with(|s| match s.live_connection().and_then(|c| s.connections.get(&c)) {
            Some(conn) => conn.tx.send(frame).is_ok(),
            None => false,
        })
    }

    /// The live connection stops acknowledging heartbeats (a zombie connection); connections made
    /// after it acknowledge normally.
    pub fn stop_acking_heartbeats(&self) -> bool {
        self.shared.with(|s| match s.live_connection().and_then(|c| s.connections.get_mut(&c)) {
            Some(conn) => {
                conn.acking = false;
                true
            }
            None => false,
        })
    }
    /// Delay READY after each later IDENTIFY by `d`.
    pub fn set_ready_delay(&self, d: Duration) {
        self.shared.with(|s| s.ready_delay = d);
    }
    /// Op 7: the bot should reconnect and resume.
    pub fn send_reconnect(&self) -> bool {
        self.to_live_connection(Frame::Text(json!({"op": 7, "d": null, "s": null, "t": null}).to_string()))
    }
    /// Op 9; unless `resumable`, the session is forgotten (events since are lost).
    pub fn invalidate_session(&self, resumable: bool) -> bool {
        let frame = Frame::Text(json!({"op": 9, "d": resumable, "s": null, "t": null}).to_string());
        // One lock: the frame goes to this session's connection, and the session is forgotten
        // before the bot can answer with a new IDENTIFY.
        self.shared.with(|s| {
            let sent = s.live_connection().and_then(|c| s.connections.get(&c)).is_some_and(|conn| conn.tx.send(frame).is_ok());
            if sent
                && !resumable
                && let Some(id) = s.current_session.take()
            {
                s.sessions.remove(&id);
            }
            sent
        })
    }
    /// Close the live connection with `code` (4000–4014 are Discord's).
    pub fn close_connection(&self, code: u16) -> bool {
        self.to_live_connection(Frame::Close(code))
    }
    /// Cut the live connection without a close frame; the session stays resumable.
    pub fn drop_connection(&self) -> bool {
        self.to_live_connection(Frame::Drop)
    }

    /// The next `n` REST calls matching `scope` get `fault` (and have no effect).
    pub fn fail_next(&self, scope: FaultScope, n: usize, fault: Fault) {
        self.shared.with(|s| s.faults.fail_next(scope, n, fault));
    }
    /// Each REST call matching `scope` gets `fault` with this probability (seeded).
    pub fn fail_fraction(&self, scope: FaultScope, fraction: f64, fault: Fault) {
        self.shared.with(|s| s.faults.fail_fraction(scope, fraction, fault));
    }
    pub fn set_seed(&self, seed: u64) {
        self.shared.with(|s| s.faults.reseed(seed));
    }
    pub fn clear_faults(&self) {
        self.shared.with(|s| s.faults.clear());
    }
    /// Answer REST calls matching `scope` only after `d`.
    /// Enforce these limits on message creates from now on: over them, a create gets a 429 and
    /// is not posted.
    pub fn enforce_limits(&self, limits: Vec<crate::limits::RateLimit>) {
        self.shared.with(|s| s.limits.set(limits));
    }

    /// Enforce Discord's published limits on message creates: 5 per 5 s per channel and 50 a
    /// second overall, each counted over a sliding window (stricter than Discord's resetting
    /// buckets).
    pub fn enforce_published_limits(&self) {
        use crate::limits::{Per, RateLimit};
        self.enforce_limits(vec![
            RateLimit::window(Per::Chat, 5, Duration::from_secs(5)),
            RateLimit::window(Per::Everything, 50, Duration::from_secs(1)),
        ]);
    }

    /// Message creates refused with a 429 by the enforced limits.
    pub fn rate_limited_count(&self) -> usize {
        self.shared.with(|s| s.limits.refused)
    }

    pub fn set_latency(&self, scope: FaultScope, d: Duration) {
        self.shared.with(|s| s.faults.delay(scope, d));
    }
}
