//! A fake Slack on loopback, faithful enough for slack-morphism: the Web API under `/api/<method>`
//! (JSON, form or query parameters; bot and app-level tokens; Slack's `ok`/`error` answers), the
//! external file upload, and Socket Mode (tickets, `hello`, envelopes delivered to one of several
//! connections, acks, retries of unacknowledged events, `disconnect`). The test owns a
//! [`FakeSlack`] handle to play users (DMs, channel and thread messages with mentions, button
//! presses, slash commands), read what the bot did, and break things (429s, 5xx, cut connections,
//! lost acks, dead sockets).
//!
//! * `state`: workspace, messages, call log, connections and envelopes.
//! * `web`: the HTTP API.
//! * `socket`: the Socket Mode WebSocket and the ack timer.
//! * `mrkdwn`: how Slack displays the bot's mrkdwn.

mod mrkdwn;
mod socket;
mod state;
mod web;

pub use state::{ApiCall, Injected, SlEphemeral, SlFault, SlFile, SlScope, SlSent, SlUser, SlUserFile};
pub use web::MAX_TEXT;

use crate::serve::{self, Shutdown};
use axum::Router;
use axum::routing::{get, post};
use serde_json::{Value, json};
use state::{Frame, Shared, State, UserMessage, random_hex, uuid};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How the fake presents itself.
#[derive(Debug, Clone)]
pub struct SlackOptions {
    /// The bot token (`xoxb-…`) every method but `apps.connections.open` wants.
    pub bot_token: String,
    /// The app-level token (`xapp-…`) `apps.connections.open` wants.
    pub app_token: String,
    pub team_id: String,
    pub bot_user_id: String,
    pub bot_id: String,
    pub app_id: String,
    /// How long an Events API envelope waits for its ack before Slack retries it (Slack: 3 s).
    pub ack_timeout: Duration,
}

impl Default for SlackOptions {
    fn default() -> Self {
        Self {
            bot_token: "xoxb-fake-bot-token-0123456789".to_string(),
            app_token: "xapp-1-fake-app-token-0123456789".to_string(),
            team_id: "T0FAKE".to_string(),
            bot_user_id: "U0BOT".to_string(),
            bot_id: "B0BOT".to_string(),
            app_id: "A0FAKE".to_string(),
            ack_timeout: Duration::from_secs(3),
        }
    }
}

/// Handle to a running fake; clones share it, and the server stops when the last one drops.
#[derive(Clone)]
pub struct FakeSlack {
    shared: Arc<Shared>,
    addr: SocketAddr,
    _shutdown: Arc<Shutdown>,
}

impl FakeSlack {
    pub async fn start() -> std::io::Result<FakeSlack> {
        Self::start_with(SlackOptions::default()).await
    }

    pub async fn start_with(options: SlackOptions) -> std::io::Result<FakeSlack> {
        let shutdown = Shutdown::new();
        let shared = Arc::new(Shared::new(State::new(&options), shutdown.signal()));
        let router = Router::new()
            .route("/socket", get(socket::upgrade))
            .route("/upload/{file_id}", post(web::upload))
            .route("/response/{id}", post(web::response_url))
            .route("/files-pri/{*path}", get(web::private_file))
            // Everything else is the Web API; the handler tolerates `/api//method`.
            .fallback(web::handle)
            .with_state(shared.clone());
        let addr = serve::spawn(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), router, shutdown.signal()).await?;
        shared.with(|s| s.host = addr.to_string());
        tokio::spawn(socket::ack_sweeper(shared.clone()));
        Ok(FakeSlack { shared, addr, _shutdown: Arc::new(shutdown) })
    }

    /// Slack's API URL for slack-morphism (`with_slack_api_url`): `http://127.0.0.1:PORT/api/`.
    pub fn api_url(&self) -> String {
        format!("http://{}/api/", self.addr)
    }
    pub fn bot_token(&self) -> String {
        self.shared.with(|s| s.bot_token.clone())
    }
    pub fn app_token(&self) -> String {
        self.shared.with(|s| s.app_token.clone())
    }
    pub fn bot_user_id(&self) -> String {
        self.shared.with(|s| s.bot_user_id.clone())
    }

    /// A workspace member (`users.info` knows them); the display name is the name.
    pub fn user(&self, id: &str, name: &str) -> SlUser {
        let user = SlUser { id: id.to_string(), name: name.to_string(), display_name: name.to_string() };
        self.shared.with(|s| s.users.insert(user.id.clone(), user.clone()));
        user
    }

    /// A public channel the bot is a member of.
    pub fn channel(&self, name: &str) -> String {
        self.shared.with(|s| s.add_channel(name, state::ChannelKind::Public))
    }

    /// The DM channel between the bot and `user` (created on first use).
    pub fn dm_channel(&self, user: &SlUser) -> String {
        self.shared.with(|s| {
            s.users.entry(user.id.clone()).or_insert_with(|| user.clone());
            s.dm_channel(&user.id)
        })
    }

    /// A direct message to the bot (`message.im`).
    pub fn dm(&self, from: &SlUser, text: &str) -> Injected {
        let channel = self.dm_channel(from);
        self.message(&channel, None, from, text, false)
    }

    /// A message in a channel; `mention` prefixes `<@BOT> `, and then Slack sends an `app_mention`
    /// event as well as the `message` event (same ts, different event ids).
    pub fn channel_message(&self, channel: &str, from: &SlUser, text: &str, mention: bool) -> Injected {
        self.message(channel, None, from, text, mention)
    }

    /// A reply in the thread under `thread_ts`.
    pub fn thread_message(&self, channel: &str, thread_ts: &str, from: &SlUser, text: &str, mention: bool) -> Injected {
        self.message(channel, Some(thread_ts), from, text, mention)
    }

    /// A direct message sharing `files` (`text` may be empty): a `file_share` message whose
    /// `files` describe them, served by the fake at their `url_private_download`.
    pub fn dm_files(&self, from: &SlUser, text: &str, files: &[SlUserFile]) -> Injected {
        let channel = self.dm_channel(from);
        self.message_with(&channel, None, from, text, false, files)
    }

    /// Bytes of users' files served so far.
    pub fn file_bytes_served(&self) -> u64 {
        self.shared.with(|s| s.file_bytes_served)
    }
    /// The `url_private_download` of the latest file a user shared.
    pub fn last_file_url(&self) -> Option<String> {
        self.shared.with(|s| s.last_file_url.clone())
    }
    /// Requests for users' files so far (with the token or not).
    pub fn file_requests(&self) -> usize {
        self.shared.with(|s| s.file_requests)
    }

    fn message(&self, channel: &str, thread_ts: Option<&str>, from: &SlUser, text: &str, mention: bool) -> Injected {
        self.message_with(channel, thread_ts, from, text, mention, &[])
    }

    fn message_with(
        &self,
        channel: &str,
        thread_ts: Option<&str>,
        from: &SlUser,
        text: &str,
        mention: bool,
        files: &[SlUserFile],
    ) -> Injected {
        let injected = self.shared.with(|s| {
            s.users.entry(from.id.clone()).or_insert_with(|| from.clone());
            let bot_mention = format!("<@{}>", s.bot_user_id);
            let text = if mention { format!("{bot_mention} {text}") } else { text.to_string() };
            let ts = s.new_ts();
            let channel_type = s.channels.get(channel).map(|c| c.channel_type()).unwrap_or("channel");
            let mut event = json!({
                "type": "message", "channel": channel, "user": from.id, "text": text, "ts": ts, "event_ts": ts,
                "channel_type": channel_type, "team": s.team_id, "client_msg_id": uuid(), "blocks": [],
            });
            if !files.is_empty() {
                event["subtype"] = json!("file_share");
                event["files"] = Value::Array(files.iter().map(|f| share_file(s, &from.id, f)).collect());
            }
            if let Some(thread) = thread_ts {
                event["thread_ts"] = json!(thread);
                if let Some(parent) = s.author_of(channel, thread) {
                    event["parent_user_id"] = json!(parent);
                }
            }
            s.user_messages.push(UserMessage {
                ts: ts.clone(),
                channel: channel.to_string(),
                user: from.id.clone(),
                text: text.clone(),
                thread_ts: thread_ts.map(str::to_string),
            });
            let mut injected = Injected { ts: ts.clone(), channel: channel.to_string(), event_ids: vec![], envelope_ids: vec![] };
            let mut app_mention = (channel_type != "im" && text.contains(&bot_mention)).then(|| {
                json!({"type": "app_mention", "user": from.id, "text": text, "ts": ts, "channel": channel, "event_ts": ts,
                       "team": s.team_id, "client_msg_id": event["client_msg_id"], "blocks": []})
            });
            if let (Some(mention_event), Some(thread)) = (app_mention.as_mut(), thread_ts) {
                mention_event["thread_ts"] = json!(thread);
            }
            for event in std::iter::once(event).chain(app_mention) {
                let (envelope, event_id) = s.event_envelope(event);
                injected.event_ids.push(event_id);
                injected.envelope_ids.push(s.push_envelope(envelope, true));
            }
            injected
        });
        self.shared.changed.notify_waiters();
        injected
    }

    /// A press of the button `action_id` (with `value`) on the message `message_ts`: a
    /// `block_actions` interaction. The block id and button text come from the bot's blocks when
    /// the message has that button.
    pub fn press_button(&self, from: &SlUser, channel: &str, message_ts: &str, action_id: &str, value: &str) -> Injected {
        let injected = self.shared.with(|s| {
            let sent = s.sent.iter().find(|m| m.channel == channel && m.ts == message_ts);
            let message = match sent {
                Some(m) => s.sent_json(m, false),
                None => s
                    .user_messages
                    .iter()
                    .find(|m| m.channel == channel && m.ts == message_ts)
                    .map(|m| s.user_message_json(m))
                    .unwrap_or_else(|| json!({"type": "message", "ts": message_ts, "text": ""})),
            };
            let (block_id, label) =
                sent.and_then(|m| find_button(&m.blocks, action_id)).unwrap_or(("fake-block".to_string(), action_id.to_string()));
            let channel_name = s.channels.get(channel).map(|c| c.name.clone()).unwrap_or_default();
            let id = s.next_id();
            let action_ts = s.new_ts();
            let envelope = json!({
                "envelope_id": uuid(), "type": "interactive", "accepts_response_payload": false,
                "payload": {
                    "type": "block_actions",
                    "user": {"id": from.id, "username": from.name, "name": from.name, "team_id": s.team_id},
                    "api_app_id": s.app_id, "token": "verif",
                    "container": {"type": "message", "message_ts": message_ts, "channel_id": channel, "is_ephemeral": false},
                    "trigger_id": format!("{id}.{}", random_hex(16)),
                    "team": {"id": s.team_id, "domain": "fake"},
                    "enterprise": null, "is_enterprise_install": false,
                    "channel": {"id": channel, "name": channel_name},
                    "message": message,
                    "state": {"values": {}},
                    "response_url": format!("http://{}/response/{id}", s.host),
                    "actions": [{"action_id": action_id, "block_id": block_id, "text": {"type": "plain_text", "text": label, "emoji": true},
                                 "value": value, "type": "button", "action_ts": action_ts}],
                },
            });
            let envelope_id = s.push_envelope(envelope, false);
            Injected { ts: message_ts.to_string(), channel: channel.to_string(), event_ids: vec![], envelope_ids: vec![envelope_id] }
        });
        self.shared.changed.notify_waiters();
        injected
    }

    /// A slash command (`/hermes`) typed in `channel`; its ack may carry a response `payload`.
    pub fn slash_command(&self, from: &SlUser, channel: &str, command: &str, text: &str) -> Injected {
        let injected = self.shared.with(|s| {
            let channel_name = match s.channels.get(channel) {
                Some(c) if c.channel_type() == "im" => "directmessage".to_string(),
                Some(c) => c.name.clone(),
                None => String::new(),
            };
            let id = s.next_id();
            let envelope = json!({
                "envelope_id": uuid(), "type": "slash_commands", "accepts_response_payload": true,
                "payload": {
                    "token": "verif", "team_id": s.team_id, "team_domain": "fake", "channel_id": channel,
                    "channel_name": channel_name, "user_id": from.id, "user_name": from.name, "command": command,
                    "text": text, "api_app_id": s.app_id, "is_enterprise_install": "false",
                    "response_url": format!("http://{}/response/{id}", s.host),
                    "trigger_id": format!("{id}.{}", random_hex(16)),
                },
            });
            let envelope_id = s.push_envelope(envelope, false);
            Injected { ts: String::new(), channel: channel.to_string(), event_ids: vec![], envelope_ids: vec![envelope_id] }
        });
        self.shared.changed.notify_waiters();
        injected
    }

    /// Any envelope, delivered as-is (an `envelope_id` is added when missing) and never retried,
    /// whether acked or not.
    pub fn send_raw_envelope(&self, envelope: Value) {
        self.shared.with(|s| s.push_envelope(envelope, false));
        self.shared.changed.notify_waiters();
    }

    /// A text frame that is not an envelope (garbage, unknown types) on one open connection.
    pub fn send_raw_frame(&self, text: &str) {
        self.shared.with(|s| {
            if let Some(conn) = s.pick_connection().and_then(|id| s.connections.get(&id)) {
                let _ = conn.tx.send(Frame::Text(text.to_string()));
            }
        });
    }

    /// The event `event_id` again, as Slack retries after a lost ack: a new envelope id, the same
    /// payload, `retry_attempt` + 1. False when no such event was sent.
    pub fn redeliver(&self, event_id: &str) -> bool {
        let found = self.shared.with(|s| {
            let index = s.envelopes.iter().rposition(|e| e.event_id.as_deref() == Some(event_id))?;
            Some(s.retry(index))
        });
        self.shared.changed.notify_waiters();
        found.is_some()
    }

    /// Every message the bot posted, in ts order.
    pub fn sent(&self) -> Vec<SlSent> {
        self.shared.with(|s| s.sent.clone())
    }
    /// The bot's messages in `channel` (all threads), in ts order.
    pub fn sent_to(&self, channel: &str) -> Vec<SlSent> {
        self.shared.with(|s| s.sent.iter().filter(|m| m.channel == channel).cloned().collect())
    }
    /// Wait for at least `count` bot messages in `channel`; panics with what was sent otherwise.
    pub async fn wait_sent(&self, channel: &str, count: usize, timeout: Duration) -> Vec<SlSent> {
        if self.wait_until(timeout, |f| f.sent_to(channel).len() >= count).await {
            return self.sent_to(channel);
        }
        panic!("fake Slack: expected {count} bot messages in {channel} within {timeout:?}; got {:#?}", self.sent_to(channel));
    }
    /// Every ephemeral message the bot showed someone, in the order posted.
    pub fn ephemerals(&self) -> Vec<SlEphemeral> {
        self.shared.with(|s| s.ephemerals.clone())
    }
    pub fn calls(&self) -> Vec<ApiCall> {
        self.shared.with(|s| s.calls.clone())
    }
    pub fn call_count(&self, method: &str) -> usize {
        self.shared.with(|s| s.calls.iter().filter(|c| c.method == method).count())
    }
    /// (channel, ts, name) of the bot's current reactions.
    pub fn reactions(&self) -> Vec<(String, String, String)> {
        self.shared.with(|s| s.reactions.clone())
    }
    /// (response id, JSON body) of what was POSTed to `response_url`s.
    pub fn responses(&self) -> Vec<(String, Value)> {
        self.shared.with(|s| s.responses.clone())
    }

    pub fn acked(&self, envelope_id: &str) -> bool {
        self.shared.with(|s| s.acks.iter().any(|a| a.envelope_id == envelope_id))
    }
    /// Acks received (lost ones not counted).
    pub fn ack_count(&self) -> usize {
        self.shared.with(|s| s.acks.len())
    }
    /// The `payload` the ack of `envelope_id` carried (a slash command's response).
    pub fn ack_payload(&self, envelope_id: &str) -> Option<Value> {
        self.shared.with(|s| s.acks.iter().find(|a| a.envelope_id == envelope_id).and_then(|a| a.payload.clone()))
    }
    /// Envelopes sent on connections, retries included.
    pub fn deliveries(&self) -> usize {
        self.shared.with(|s| s.envelopes.iter().map(|e| e.deliveries).sum())
    }
    /// Deliveries of the event `event_id` (its first envelope and every retry).
    pub fn deliveries_of(&self, event_id: &str) -> usize {
        self.shared.with(|s| s.envelopes.iter().filter(|e| e.event_id.as_deref() == Some(event_id)).map(|e| e.deliveries).sum())
    }

    /// WebSocket connections accepted since the start.
    pub fn connections_opened(&self) -> usize {
        self.shared.with(|s| s.connections_opened)
    }
    /// Open connections, not counting frozen ones (see [`FakeSlack::stop_answering_pings`]).
    pub fn open_connections(&self) -> usize {
        self.shared.with(|s| s.connections.values().filter(|c| !c.frozen).count())
    }
    pub fn hellos(&self) -> usize {
        self.shared.with(|s| s.hellos)
    }
    /// Whether a connection takes envelopes now (open, not frozen, not told to disconnect).
    pub fn connected(&self) -> bool {
        self.shared.with(|s| s.connections.values().any(|c| !c.frozen && !c.leaving))
    }

    pub async fn wait_connected(&self, timeout: Duration) -> bool {
        self.wait_until(timeout, |f| f.connected()).await
    }

    pub async fn wait_until(&self, timeout: Duration, pred: impl Fn(&FakeSlack) -> bool) -> bool {
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

    /// `{"type":"disconnect","reason":…}` to every open connection; each is closed a second later
    /// if the client has not closed it. False when no connection was open.
    pub fn send_disconnect(&self, reason: &str) -> bool {
        let message = json!({"type": "disconnect", "reason": reason, "debug_info": {"host": "fake-slack"}}).to_string();
        let sent = self.shared.with(|s| {
            let mut sent = false;
            for conn in s.connections.values_mut().filter(|c| !c.frozen) {
                conn.leaving = true;
                sent |= conn.tx.send(Frame::Disconnect(message.clone())).is_ok();
            }
            sent
        });
        self.shared.changed.notify_waiters();
        sent
    }
    /// Cut every connection (frozen ones too) without a close frame. They are forgotten at once,
    /// so what is injected next waits for the client's next connection. False when none was open.
    pub fn drop_connections(&self) -> bool {
        let any = self.shared.with(|s| {
            let mut any = false;
            for (_, conn) in s.connections.drain() {
                any |= conn.tx.send(Frame::Drop).is_ok();
            }
            any
        });
        self.shared.changed.notify_waiters();
        any
    }
    /// The open connections go dead but stay open: no Pong answers the client's Pings and no
    /// envelope is sent on them (unacked ones are retried elsewhere). Later connections are normal.
    pub fn stop_answering_pings(&self) {
        self.shared.with(|s| {
            for conn in s.connections.values_mut() {
                conn.frozen = true;
                let _ = conn.tx.send(Frame::Freeze);
            }
        });
        self.shared.changed.notify_waiters();
    }
    /// Ignore the next `n` acks: their envelopes are retried after the ack timeout.
    pub fn lose_next_acks(&self, n: usize) {
        self.shared.with(|s| s.acks_to_lose += n);
    }
    /// Refuse (HTTP 503) or accept new WebSocket connections.
    pub fn refuse_connections(&self, refuse: bool) {
        self.shared.with(|s| s.refuse_connections = refuse);
    }
    pub fn set_ack_timeout(&self, d: Duration) {
        self.shared.with(|s| s.ack_timeout = d);
    }

    /// Enforce these limits on `chat.postMessage` from now on: over them, a post gets a 429 and
    /// is not posted.
    pub fn enforce_limits(&self, limits: Vec<crate::limits::RateLimit>) {
        self.shared.with(|s| s.limits.set(limits));
    }

    /// Enforce Slack's published `chat.postMessage` limit: about one message a second per
    /// channel with short bursts (4 here) allowed.
    pub fn enforce_published_limits(&self) {
        use crate::limits::{Per, RateLimit};
        self.enforce_limits(vec![RateLimit::bucket(Per::Chat, 1.0, 4.0, Duration::ZERO)]);
    }

    /// Posts refused with a 429 by the enforced limits.
    pub fn rate_limited_count(&self) -> usize {
        self.shared.with(|s| s.limits.refused)
    }

    /// The next `n` Web API calls matching `scope` get `fault`.
    pub fn fail_next(&self, scope: SlScope, n: usize, fault: SlFault) {
        self.shared.with(|s| s.faults.fail_next(scope, n, fault));
    }
    /// Each Web API call matching `scope` gets `fault` with this probability (seeded).
    pub fn fail_fraction(&self, scope: SlScope, fraction: f64, fault: SlFault) {
        self.shared.with(|s| s.faults.fail_fraction(scope, fraction, fault));
    }
    pub fn set_seed(&self, seed: u64) {
        self.shared.with(|s| s.faults.reseed(seed));
    }
    pub fn clear_faults(&self) {
        self.shared.with(|s| s.faults.clear());
    }
    /// Answer Web API calls matching `scope` only after `d`.
    pub fn set_latency(&self, scope: SlScope, d: Duration) {
        self.shared.with(|s| s.faults.delay(scope, d));
    }
}

/// (block id, button text) of the button `action_id` in `blocks` (actions blocks and section
/// accessories).
fn find_button(blocks: &Value, action_id: &str) -> Option<(String, String)> {
    for block in blocks.as_array()? {
        let elements = block.get("elements").and_then(Value::as_array).into_iter().flatten().chain(block.get("accessory"));
        for element in elements {
            if element.get("action_id").and_then(Value::as_str) == Some(action_id) {
                let block_id = block.get("block_id").and_then(Value::as_str).unwrap_or("fake-block").to_string();
                let text = element.pointer("/text/text").and_then(Value::as_str).unwrap_or(action_id).to_string();
                return Some((block_id, text));
            }
        }
    }
    None
}

/// Stores a user's file and describes it as Slack's file object does.
fn share_file(s: &mut State, user: &str, file: &SlUserFile) -> Value {
    let id = format!("F0{:08X}", s.next_id());
    s.user_files.insert(id.clone(), file.bytes.clone());
    let safe: String = file.name.chars().map(|c| if c.is_ascii_alphanumeric() || ".-_".contains(c) { c } else { '_' }).collect();
    let private = format!("http://{}/files-pri/{}-{id}/{safe}", s.host, s.team_id);
    let download = file.url_override.clone().unwrap_or_else(|| format!("http://{}/files-pri/{}-{id}/download/{safe}", s.host, s.team_id));
    s.last_file_url = Some(download.clone());
    let filetype = file.name.rsplit_once('.').map(|(_, ext)| ext.to_ascii_lowercase()).unwrap_or_default();
    let mut object = json!({
        "id": id, "created": state::unix_now(), "timestamp": state::unix_now(), "name": file.name, "title": file.name,
        "mimetype": file.mimetype, "filetype": filetype, "pretty_type": filetype.to_uppercase(), "user": user,
        "mode": "hosted", "editable": false, "is_external": false, "external_type": "",
        "size": file.declared_size.unwrap_or(file.bytes.len() as u64),
        "url_private": private, "url_private_download": download,
    });
    if let Some(subtype) = &file.subtype {
        object["subtype"] = json!(subtype);
    }
    if let Some(ms) = file.duration_ms {
        object["duration_ms"] = json!(ms);
    }
    object
}
