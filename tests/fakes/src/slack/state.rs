//! Everything the fake Slack remembers: the workspace (users, channels, DM channels), users'
//! messages and the bot's (with edits, deletions, files, reactions), pending external uploads, the
//! Web API call log, fault rules, and the Socket Mode side — tickets, open connections, and every
//! envelope with its deliveries and acknowledgement.

use crate::faults::FaultRules;
use rand::Rng;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;

/// Retries Slack makes of an unacknowledged Events API envelope before it gives up.
pub(crate) const MAX_RETRIES: u64 = 3;

/// A workspace member the test plays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlUser {
    pub id: String,
    /// The username (`name` in `users.info`).
    pub name: String,
    /// What clients show; the name unless the test sets another.
    pub display_name: String,
}

/// What an injection produced: the message's `ts` (the pressed message's for a button, empty for
/// a slash command), its channel, and the event and envelope ids Slack generated for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Injected {
    pub ts: String,
    pub channel: String,
    pub event_ids: Vec<String>,
    pub envelope_ids: Vec<String>,
}

/// An ephemeral message the bot showed one user (`chat.postEphemeral`): only that user sees it,
/// it is not part of the channel's history, and it cannot be edited.
#[derive(Debug, Clone)]
pub struct SlEphemeral {
    pub at: Instant,
    pub channel: String,
    /// The one user who sees it.
    pub user: String,
    pub thread_ts: Option<String>,
    pub text: String,
}

/// A message the bot posted, in its current state.
#[derive(Debug, Clone)]
pub struct SlSent {
    /// When the post arrived.
    pub at: Instant,
    pub ts: String,
    pub channel: String,
    pub thread_ts: Option<String>,
    /// The text as sent (mrkdwn).
    pub text: String,
    /// The text as Slack's client displays it (see `mrkdwn`).
    pub shown: String,
    /// One entry per formatted span of `shown`, in order ("bold", "code", "text_link", …).
    pub styles: Vec<String>,
    /// Block Kit blocks as sent (`[]` when none).
    pub blocks: Value,
    /// Earlier texts, oldest first.
    pub edits: Vec<String>,
    pub deleted: bool,
    /// Attached files: (name, size in bytes).
    pub files: Vec<(String, usize)>,
    /// Attached files whole, with their type.
    pub uploaded: Vec<SlFile>,
    pub unfurl_links: Option<bool>,
    pub unfurl_media: Option<bool>,
    pub metadata: Option<Value>,
}

/// One Web API call as the fake saw it.
#[derive(Debug, Clone)]
pub struct ApiCall {
    /// The method name (`chat.postMessage`); `upload` for a byte upload to an upload URL.
    pub method: String,
    /// Query, JSON or form parameters merged; form values holding JSON are parsed.
    pub params: Value,
    /// HTTP status answered (0 when the connection was cut instead).
    pub status: u16,
    pub ok: bool,
    pub error: Option<String>,
    pub at: Instant,
}

/// Which Web API calls a fault or latency applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlScope {
    /// One method by name, e.g. `chat.postMessage`.
    Method(String),
    /// `chat.postMessage`.
    PostMessage,
    /// `chat.update`.
    Update,
    AnyMethod,
}

impl SlScope {
    pub(crate) fn matches(&self, method: &str) -> bool {
        match self {
            SlScope::Method(m) => m == method,
            SlScope::PostMessage => method == "chat.postMessage",
            SlScope::Update => method == "chat.update",
            SlScope::AnyMethod => true,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlFault {
    /// HTTP 429, `Retry-After: N`, `{"ok":false,"error":"ratelimited"}`; nothing happens.
    RateLimited { retry_after_secs: u64 },
    /// HTTP 500; nothing happens.
    ServerError,
    /// The request is read, then the connection is cut without an answer; nothing happens.
    CutBeforeApply,
    /// The call takes effect, then the connection is cut: the client cannot know it worked.
    CutAfterApply,
    /// HTTP 200 with `{"ok":false,"error":"<code>"}`, how the Web API refuses a call (e.g.
    /// `service_unavailable`, "the service is temporarily unavailable"); nothing happens.
    Refused(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ChannelKind {
    Public,
    Im { user: String },
}

#[derive(Debug, Clone)]
pub(crate) struct Channel {
    pub id: String,
    pub name: String,
    pub kind: ChannelKind,
    pub created: u64,
}

impl Channel {
    /// `channel_type` of message events.
    pub(crate) fn channel_type(&self) -> &'static str {
        match self.kind {
            ChannelKind::Public => "channel",
            ChannelKind::Im { .. } => "im",
        }
    }
}

/// A message a user posted (injected by the test).
#[derive(Debug, Clone)]
pub(crate) struct UserMessage {
    pub ts: String,
    pub channel: String,
    pub user: String,
    pub text: String,
    pub thread_ts: Option<String>,
}

/// A file announced by `files.getUploadURLExternal`; `size`, its bytes and type are set once
/// its bytes arrive.
#[derive(Debug, Clone)]
pub(crate) struct Upload {
    pub name: String,
    pub size: Option<usize>,
    pub bytes: Vec<u8>,
    pub mimetype: Option<String>,
}

/// A file the bot uploaded, as Slack keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlFile {
    pub name: String,
    /// The type the upload was sent with (Slack's `mimetype`).
    pub mimetype: Option<String>,
    pub bytes: Vec<u8>,
}

/// A file a user shares in a message, as Slack describes it in the event's `files`
/// (<https://api.slack.com/types/file>) and serves it at `url_private_download` to a bearer of
/// the bot token.
#[derive(Debug, Clone, Default)]
pub struct SlUserFile {
    pub name: String,
    pub mimetype: String,
    pub bytes: Vec<u8>,
    /// The `size` the event declares, when a test makes it differ from the bytes served.
    pub declared_size: Option<u64>,
    /// `slack_audio` for an audio clip recorded in Slack.
    pub subtype: Option<String>,
    /// An audio or video clip's length.
    pub duration_ms: Option<u64>,
    /// Replaces the fake's own `url_private_download` (a hostile event naming another host).
    pub url_override: Option<String>,
}

impl SlUserFile {
    /// An audio clip recorded in Slack's client.
    pub fn audio_clip(bytes: Vec<u8>, mimetype: &str, duration_ms: u64) -> SlUserFile {
        SlUserFile {
            name: "audio_message.webm".to_string(),
            mimetype: mimetype.to_string(),
            bytes,
            subtype: Some("slack_audio".to_string()),
            duration_ms: Some(duration_ms),
            ..SlUserFile::default()
        }
    }

    /// Any other file.
    pub fn file(name: &str, mimetype: &str, bytes: Vec<u8>) -> SlUserFile {
        SlUserFile { name: name.to_string(), mimetype: mimetype.to_string(), bytes, ..SlUserFile::default() }
    }
}

/// What a connection's task is told to do.
#[derive(Debug)]
pub(crate) enum Frame {
    Text(String),
    /// Send this `disconnect` message, then close the socket a second later unless the client did.
    Disconnect(String),
    /// Stop reading (so no Pong answers a Ping) and stop writing: a dead but open socket.
    Freeze,
    /// End without a close frame (the network died).
    Drop,
}

pub(crate) struct Connection {
    pub tx: mpsc::UnboundedSender<Frame>,
    /// Frozen by `stop_answering_pings`: open, but neither reading nor delivering.
    pub frozen: bool,
    /// Told to disconnect: gets no more envelopes.
    pub leaving: bool,
}

/// One envelope as Slack made it; a retry is a new envelope carrying the same payload.
pub(crate) struct Envelope {
    pub body: Value,
    /// The Events API `event_id`, for retries and redelivery.
    pub event_id: Option<String>,
    pub retry_attempt: u64,
    /// Events API envelopes are retried when unacknowledged; interactions and commands are not
    /// (Slack shows the user an error instead), nor are the test's raw envelopes.
    pub retriable: bool,
    pub delivered_at: Option<Instant>,
    pub deliveries: usize,
    pub acked: bool,
    /// A retry of this envelope was sent; its own timer is over.
    pub superseded: bool,
}

/// An acknowledgement the client sent.
#[derive(Debug, Clone)]
pub(crate) struct Ack {
    pub envelope_id: String,
    pub payload: Option<Value>,
}

pub(crate) struct State {
    pub bot_token: String,
    pub app_token: String,
    pub team_id: String,
    pub bot_user_id: String,
    pub bot_id: String,
    pub app_id: String,
    pub ack_timeout: Duration,
    /// `127.0.0.1:PORT`, for the URLs the fake hands out.
    pub host: String,
    pub users: HashMap<String, SlUser>,
    pub channels: HashMap<String, Channel>,
    /// user id → DM channel id.
    pub dm_channels: HashMap<String, String>,
    pub user_messages: Vec<UserMessage>,
    pub sent: Vec<SlSent>,
    /// Ephemeral messages, in the order posted.
    pub ephemerals: Vec<SlEphemeral>,
    /// (channel, ts, name) the bot reacted with.
    pub reactions: Vec<(String, String, String)>,
    pub uploads: HashMap<String, Upload>,
    /// Users' files by id, served at `/files-pri/<team>-<id>/download/<name>`.
    pub user_files: HashMap<String, Vec<u8>>,
    /// Bytes of users' files served so far.
    pub file_bytes_served: u64,
    /// Requests for users' files (with or without the token).
    pub file_requests: usize,
    /// The `url_private_download` of the latest user file.
    pub last_file_url: Option<String>,
    /// Bot message ts → ids of its files (`SlSent::files` has names and sizes; clients need ids).
    pub file_ids: HashMap<String, Vec<String>>,
    /// (response id, body) POSTed to `response_url`s.
    pub responses: Vec<(String, Value)>,
    pub calls: Vec<ApiCall>,
    pub faults: FaultRules<SlScope, SlFault>,
    /// Rate limits enforced on `chat.postMessage` with 429s (none unless a test asks).
    pub limits: crate::limits::Enforcer,
    last_ts_micros: u64,
    counter: u64,
    // Socket Mode.
    pub tickets: HashSet<String>,
    pub refuse_connections: bool,
    pub connections: HashMap<u64, Connection>,
    pub next_connection: u64,
    /// Round-robin cursor over connections for deliveries.
    next_target: u64,
    pub connections_opened: usize,
    pub hellos: usize,
    pub envelopes: Vec<Envelope>,
    pub envelope_index: HashMap<String, usize>,
    /// Envelopes waiting for a connection (indexes into `envelopes`).
    pub pending: VecDeque<usize>,
    pub acks: Vec<Ack>,
    /// Acks still to be ignored (`lose_next_acks`).
    pub acks_to_lose: usize,
}

impl State {
    pub(super) fn new(options: &super::SlackOptions) -> Self {
        let mut users = HashMap::new();
        let bot = SlUser { id: options.bot_user_id.clone(), name: "hermes".to_string(), display_name: "hermes".to_string() };
        users.insert(bot.id.clone(), bot);
        Self {
            bot_token: options.bot_token.clone(),
            app_token: options.app_token.clone(),
            team_id: options.team_id.clone(),
            bot_user_id: options.bot_user_id.clone(),
            bot_id: options.bot_id.clone(),
            app_id: options.app_id.clone(),
            ack_timeout: options.ack_timeout,
            host: String::new(),
            users,
            channels: HashMap::new(),
            dm_channels: HashMap::new(),
            user_messages: Vec::new(),
            sent: Vec::new(),
            ephemerals: Vec::new(),
            reactions: Vec::new(),
            uploads: HashMap::new(),
            user_files: HashMap::new(),
            file_bytes_served: 0,
            file_requests: 0,
            last_file_url: None,
            file_ids: HashMap::new(),
            responses: Vec::new(),
            calls: Vec::new(),
            faults: FaultRules::new(),
            limits: crate::limits::Enforcer::default(),
            last_ts_micros: 0,
            counter: 0,
            tickets: HashSet::new(),
            refuse_connections: false,
            connections: HashMap::new(),
            next_connection: 1,
            next_target: 0,
            connections_opened: 0,
            hellos: 0,
            envelopes: Vec::new(),
            envelope_index: HashMap::new(),
            pending: VecDeque::new(),
            acks: Vec::new(),
            acks_to_lose: 0,
        }
    }

    /// A fresh number for ids (channels, files, events, triggers).
    pub(super) fn next_id(&mut self) -> u64 {
        self.counter += 1;
        self.counter
    }

    /// A new message `ts`: Unix seconds and a six-digit fraction, strictly increasing like
    /// Slack's (two messages never share a ts in a channel; here not even across channels).
    pub(super) fn new_ts(&mut self) -> String {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0);
        let micros = now.max(self.last_ts_micros + 1);
        self.last_ts_micros = micros;
        format!("{}.{:06}", micros / 1_000_000, micros % 1_000_000)
    }

    pub(super) fn add_channel(&mut self, name: &str, kind: ChannelKind) -> String {
        let prefix = match kind {
            ChannelKind::Public => 'C',
            ChannelKind::Im { .. } => 'D',
        };
        let id = format!("{prefix}0{:07X}", self.next_id());
        let created = unix_now();
        self.channels.insert(id.clone(), Channel { id: id.clone(), name: name.to_string(), kind, created });
        id
    }

    /// The DM channel between the bot and `user` (created on first use).
    pub(super) fn dm_channel(&mut self, user: &str) -> String {
        if let Some(id) = self.dm_channels.get(user) {
            return id.clone();
        }
        let id = self.add_channel(user, ChannelKind::Im { user: user.to_string() });
        self.dm_channels.insert(user.to_string(), id.clone());
        id
    }

    pub(super) fn channel_json(&self, channel: &Channel) -> Value {
        let is_im = matches!(channel.kind, ChannelKind::Im { .. });
        let mut json = json!({
            "id": channel.id, "created": channel.created, "is_channel": !is_im, "is_group": false, "is_im": is_im,
            "is_mpim": false, "is_private": is_im, "is_archived": false, "is_general": false, "is_shared": false,
            "is_org_shared": false, "is_member": true,
        });
        match &channel.kind {
            ChannelKind::Im { user } => {
                json["user"] = json!(user);
                json["is_user_deleted"] = json!(false);
            }
            ChannelKind::Public => {
                json["name"] = json!(channel.name);
                json["name_normalized"] = json!(channel.name);
                json["creator"] = json!(self.bot_user_id);
                json["topic"] = json!({"value": "", "creator": "", "last_set": 0});
                json["purpose"] = json!({"value": "", "creator": "", "last_set": 0});
            }
        }
        json
    }

    pub(super) fn user_json(&self, user: &SlUser) -> Value {
        let is_bot = user.id == self.bot_user_id;
        json!({
            "id": user.id, "team_id": self.team_id, "name": user.name, "deleted": false, "real_name": user.display_name,
            "tz": "Europe/London", "tz_label": "Greenwich Mean Time", "tz_offset": 0, "is_bot": is_bot, "is_app_user": false,
            "is_admin": false, "is_owner": false, "updated": unix_now(),
            "profile": {"display_name": user.display_name, "display_name_normalized": user.display_name,
                        "real_name": user.display_name, "real_name_normalized": user.display_name, "team": self.team_id},
        })
    }

    /// Whether a message (a user's or the bot's, not deleted) with this ts is in `channel`.
    pub(super) fn message_exists(&self, channel: &str, ts: &str) -> bool {
        self.user_messages.iter().any(|m| m.channel == channel && m.ts == ts)
            || self.sent.iter().any(|m| m.channel == channel && m.ts == ts && !m.deleted)
    }

    /// Who wrote the message `ts` in `channel`, if it exists.
    pub(super) fn author_of(&self, channel: &str, ts: &str) -> Option<String> {
        if let Some(m) = self.user_messages.iter().find(|m| m.channel == channel && m.ts == ts) {
            return Some(m.user.clone());
        }
        self.sent.iter().any(|m| m.channel == channel && m.ts == ts).then(|| self.bot_user_id.clone())
    }

    /// A bot message as the Web API serialises it.
    pub(super) fn sent_json(&self, sent: &SlSent, with_metadata: bool) -> Value {
        let mut message = json!({
            "type": "message", "text": sent.text, "user": self.bot_user_id, "bot_id": self.bot_id, "app_id": self.app_id,
            "team": self.team_id, "ts": sent.ts, "blocks": sent.blocks,
        });
        if let Some(thread_ts) = &sent.thread_ts {
            message["thread_ts"] = json!(thread_ts);
        }
        if !sent.files.is_empty() {
            let ids = self.file_ids.get(&sent.ts).map(Vec::as_slice).unwrap_or_default();
            let files: Vec<Value> = sent
                .files
                .iter()
                .enumerate()
                .map(|(i, (name, size))| json!({"id": ids.get(i).cloned().unwrap_or_default(), "name": name, "title": name, "size": size}))
                .collect();
            message["files"] = json!(files);
            message["upload"] = json!(false);
        }
        if !sent.edits.is_empty() {
            message["edited"] = json!({"user": self.bot_user_id, "ts": sent.ts});
        }
        if with_metadata && let Some(metadata) = &sent.metadata {
            message["metadata"] = metadata.clone();
        }
        message
    }

    pub(super) fn user_message_json(&self, m: &UserMessage) -> Value {
        let mut message = json!({"type": "message", "user": m.user, "text": m.text, "ts": m.ts, "team": self.team_id, "blocks": []});
        if let Some(thread_ts) = &m.thread_ts {
            message["thread_ts"] = json!(thread_ts);
        }
        message
    }

    // ---- Socket Mode ----

    /// An Events API envelope around `event`; returns (envelope, event id).
    pub(super) fn event_envelope(&mut self, event: Value) -> (Value, String) {
        let event_id = format!("Ev0FAKE{:06}", self.next_id());
        let envelope = json!({
            "envelope_id": uuid(), "type": "events_api", "accepts_response_payload": false,
            "retry_attempt": 0, "retry_reason": "",
            "payload": {
                "token": "verif", "team_id": self.team_id, "api_app_id": self.app_id, "type": "event_callback",
                "event_id": event_id, "event_time": unix_now(),
                "authorizations": [{"enterprise_id": null, "team_id": self.team_id, "user_id": self.bot_user_id,
                                    "is_bot": true, "is_enterprise_install": false}],
                "is_ext_shared_channel": false, "event_context": format!("4-fake-{event_id}"),
                "event": event,
            },
        });
        (envelope, event_id)
    }

    /// Record an envelope and send it on a connection (or queue it); returns its id. Only
    /// `retriable` ones are sent again when their ack does not come.
    pub(super) fn push_envelope(&mut self, mut body: Value, retriable: bool) -> String {
        let id = match body.get("envelope_id").and_then(Value::as_str) {
            Some(id) => id.to_string(),
            None => {
                let id = uuid();
                if let Some(object) = body.as_object_mut() {
                    object.insert("envelope_id".to_string(), json!(id));
                }
                id
            }
        };
        let event_id = body.pointer("/payload/event_id").and_then(Value::as_str).map(str::to_string);
        let retry_attempt = body.get("retry_attempt").and_then(Value::as_u64).unwrap_or(0);
        let index = self.envelopes.len();
        self.envelopes.push(Envelope {
            body,
            event_id,
            retry_attempt,
            retriable,
            delivered_at: None,
            deliveries: 0,
            acked: false,
            superseded: false,
        });
        self.envelope_index.insert(id.clone(), index);
        self.deliver(index);
        id
    }

    /// A retry of envelope `index` as Slack sends one: a new envelope id, the same payload (same
    /// `event_id`), `retry_attempt` + 1 and `retry_reason` "timeout".
    pub(super) fn retry(&mut self, index: usize) -> String {
        self.envelopes[index].superseded = true;
        let mut body = self.envelopes[index].body.clone();
        let attempt = self.envelopes[index].retry_attempt + 1;
        body["envelope_id"] = json!(uuid());
        body["retry_attempt"] = json!(attempt);
        body["retry_reason"] = json!("timeout");
        let retriable = self.envelopes[index].retriable;
        self.push_envelope(body, retriable)
    }

    /// Connections that take envelopes now, in a stable order.
    fn ready_connections(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self.connections.iter().filter(|(_, c)| !c.frozen && !c.leaving).map(|(id, _)| *id).collect();
        ids.sort_unstable();
        ids
    }

    /// The next ready connection, round-robin.
    pub(super) fn pick_connection(&mut self) -> Option<u64> {
        let ready = self.ready_connections();
        let chosen = ready.iter().find(|id| **id > self.next_target).or(ready.first()).copied()?;
        self.next_target = chosen;
        Some(chosen)
    }

    /// Send envelope `index` on one connection, or queue it until one opens (Slack keeps
    /// undelivered events and retries them; nothing is lost while the app is offline).
    pub(super) fn deliver(&mut self, index: usize) {
        let text = self.envelopes[index].body.to_string();
        while let Some(id) = self.pick_connection() {
            let sent = self.connections.get(&id).is_some_and(|c| c.tx.send(Frame::Text(text.clone())).is_ok());
            if sent {
                let envelope = &mut self.envelopes[index];
                envelope.deliveries += 1;
                envelope.delivered_at = Some(Instant::now());
                return;
            }
            // The connection's task is gone; forget it and try the next one.
            self.connections.remove(&id);
        }
        self.pending.push_back(index);
    }

    /// Deliver what queued up while no connection was open.
    pub(super) fn flush_pending(&mut self) {
        let queued: Vec<usize> = self.pending.drain(..).collect();
        for index in queued {
            self.deliver(index);
        }
    }

    /// Retry the envelopes whose ack is overdue (called periodically).
    pub(super) fn retry_overdue(&mut self) -> bool {
        let timeout = self.ack_timeout;
        let overdue: Vec<usize> = self
            .envelopes
            .iter()
            .enumerate()
            .filter(|(_, e)| e.retriable && !e.acked && !e.superseded && e.retry_attempt < MAX_RETRIES)
            .filter(|(_, e)| e.delivered_at.is_some_and(|at| at.elapsed() >= timeout))
            .map(|(i, _)| i)
            .collect();
        for index in &overdue {
            self.retry(*index);
        }
        !overdue.is_empty()
    }

    /// An ack from the client: recorded, and marks its envelope done unless the test asked for
    /// acks to be lost.
    pub(super) fn ack(&mut self, envelope_id: &str, payload: Option<Value>) {
        if self.acks_to_lose > 0 {
            self.acks_to_lose -= 1;
            return;
        }
        self.acks.push(Ack { envelope_id: envelope_id.to_string(), payload });
        if let Some(index) = self.envelope_index.get(envelope_id) {
            self.envelopes[*index].acked = true;
        }
    }
}

pub(crate) fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// A random version-4 UUID in its usual text form (Slack's envelope and client message ids).
pub(crate) fn uuid() -> String {
    let mut bytes: [u8; 16] = rand::rng().random();
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
}

/// A random token of `len` hex digits (tickets, trigger ids).
pub(crate) fn random_hex(len: usize) -> String {
    let mut rng = rand::rng();
    (0..len).map(|_| char::from_digit(rng.random_range(0..16), 16).unwrap_or('0')).collect()
}

/// The state behind one lock, plus the wake-up for test-side waiters.
pub(crate) type Shared = crate::shared::Shared<State>;
