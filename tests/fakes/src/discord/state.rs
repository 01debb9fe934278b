//! Everything the fake Discord remembers: the guild, its channels and threads, DM channels, users,
//! the messages the bot posted (with their edits), the REST call log, fault rules, and the gateway
//! side — sessions with their event logs (replayed on RESUME) and the live connections.

use crate::faults::FaultRules;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;

/// Discord's epoch (2015-01-01), the base of snowflake timestamps.
const DISCORD_EPOCH_MS: u64 = 1_420_070_400_000;

/// A Discord user the test plays. The id is Discord's; the rest is what the user chose: a
/// username, a global display name, and a nickname in the guild.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DcUser {
    pub id: u64,
    pub username: String,
    pub global_name: Option<String>,
    /// The guild member's nickname, sent as `member.nick` with their guild messages.
    pub nick: Option<String>,
}

impl DcUser {
    /// A user whose global name is their username and who has no nickname.
    pub fn new(id: u64, username: &str) -> DcUser {
        DcUser { id, username: username.to_string(), global_name: Some(username.to_string()), nick: None }
    }
}

/// What an injection produced. `seq` is `None` when no gateway session existed to carry it (the
/// event was lost, as on the real Discord when the bot is offline).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Injected {
    pub id: u64,
    pub channel_id: u64,
    pub seq: Option<u64>,
}

/// One REST call as the fake saw it.
#[derive(Debug, Clone)]
pub struct RestCall {
    pub method: String,
    /// The path under `/api/v10`, e.g. `/channels/77/messages`.
    pub path: String,
    pub body: Value,
    /// HTTP status answered (0 when the connection was cut instead).
    pub status: u16,
    pub at: Instant,
}

/// A message the bot posted, in its current state.
#[derive(Debug, Clone)]
pub struct DcSent {
    /// When the message create arrived.
    pub at: Instant,
    pub id: u64,
    pub channel_id: u64,
    pub content: String,
    /// Earlier contents, oldest first.
    pub edits: Vec<String>,
    pub deleted: bool,
    /// Action rows as sent.
    pub components: Value,
    /// The message this one replies to.
    pub reply_to: Option<u64>,
    pub allowed_mentions: Option<Value>,
    /// Uploaded files: (name, size).
    pub files: Vec<(String, usize)>,
    /// Uploaded files whole, in `files[n]` order.
    pub uploads: Vec<DcUpload>,
    /// The `attachments` array of the request's payload (file metadata: a voice message's
    /// `duration_secs` and `waveform`).
    pub attachment_meta: Value,
    /// Message flags as last set (`SUPPRESS_EMBEDS` = 1 << 2: no link previews).
    pub flags: u64,
}

/// A file the bot uploaded with a message: the multipart part as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DcUpload {
    /// The part's field name (`files[0]`).
    pub field: String,
    pub file_name: String,
    pub content_type: Option<String>,
    pub bytes: Vec<u8>,
}

/// A file a user attaches to a message, as the Discord client uploads it. Discord then describes
/// it in the message's `attachments` (<https://discord.com/developers/docs/resources/message#attachment-object>)
/// and serves it from its CDN.
#[derive(Debug, Clone, Default)]
pub struct DcAttachment {
    pub filename: String,
    pub content_type: Option<String>,
    pub bytes: Vec<u8>,
    /// The `size` the message declares, when a test makes it differ from the bytes served.
    pub declared_size: Option<u64>,
    /// Voice messages: their length and amplitude preview (base64).
    pub duration_secs: Option<f64>,
    pub waveform: Option<String>,
}

impl DcAttachment {
    /// A recorded voice message (OGG/Opus) as Discord's client sends it: `audio/ogg`, a duration
    /// and a waveform; the message carries the `IS_VOICE_MESSAGE` flag.
    pub fn voice_message(bytes: Vec<u8>, duration_secs: f64) -> DcAttachment {
        DcAttachment {
            filename: "voice-message.ogg".to_string(),
            content_type: Some("audio/ogg".to_string()),
            bytes,
            declared_size: None,
            duration_secs: Some(duration_secs),
            waveform: Some("AAAAAAAAAAAA".to_string()),
        }
    }

    /// Any other file.
    pub fn file(filename: &str, content_type: &str, bytes: Vec<u8>) -> DcAttachment {
        DcAttachment { filename: filename.to_string(), content_type: Some(content_type.to_string()), bytes, ..DcAttachment::default() }
    }

    pub(super) fn is_voice(&self) -> bool {
        self.duration_secs.is_some() && self.waveform.is_some()
    }
}

/// Which REST calls a fault or latency applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultScope {
    /// Creating and editing messages.
    Sends,
    /// Creating messages only.
    Create,
    /// Typing indicators.
    Typing,
    All,
}

impl FaultScope {
    pub(crate) fn matches(&self, method: &str, path: &str) -> bool {
        let message_call = path.starts_with("/channels/") && path.contains("/messages") && !path.contains("/reactions");
        match self {
            FaultScope::Sends => message_call && (method == "POST" || method == "PATCH"),
            FaultScope::Create => message_call && method == "POST" && path.ends_with("/messages"),
            FaultScope::Typing => path.ends_with("/typing"),
            FaultScope::All => true,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// 429 with `retry_after` (seconds) in the body and the `Retry-After` / `X-RateLimit-*` headers.
    RateLimited { retry_after: f64 },
    /// A 5xx.
    ServerError(u16),
    /// The request is read, then the connection is cut without an answer (nothing happened).
    Reset,
    /// The request takes effect, then the connection is cut: the client cannot know it worked.
    LostAnswer,
}

#[derive(Debug, Clone)]
pub(crate) enum ChannelKind {
    Dm { recipient: u64 },
    Text,
    Thread { parent: u64 },
}

#[derive(Debug, Clone)]
pub(crate) struct Channel {
    pub id: u64,
    pub name: String,
    pub kind: ChannelKind,
}

/// What a connection's writer is told to do.
#[derive(Debug)]
pub(crate) enum Frame {
    Text(String),
    /// Send a close frame with this code, then end.
    Close(u16),
    /// End without a close frame (the network died).
    Drop,
}

pub(crate) struct Connection {
    pub tx: mpsc::UnboundedSender<Frame>,
    /// The session this connection identified or resumed, once it has.
    pub session: Option<String>,
    /// Whether heartbeats on this connection are acknowledged (off: a zombie connection).
    pub acking: bool,
}

pub(crate) struct Session {
    pub seq: u64,
    /// Every dispatch of the session, for RESUME.
    pub log: Vec<(u64, Value)>,
    /// The connection currently attached.
    pub connection: Option<u64>,
}

pub(crate) struct State {
    pub token: String,
    pub bot: DcUser,
    pub application_id: u64,
    pub guild_id: u64,
    pub channels: HashMap<u64, Channel>,
    /// user id → DM channel id.
    pub dm_channels: HashMap<u64, u64>,
    /// Users' messages as dispatched, for redelivery and replies.
    pub user_messages: HashMap<u64, Value>,
    pub sent: Vec<DcSent>,
    pub sent_index: HashMap<u64, usize>,
    pub calls: Vec<RestCall>,
    pub typing: HashMap<u64, usize>,
    /// (interaction id, callback type).
    pub interaction_callbacks: Vec<(u64, u64)>,
    /// (content, ephemeral) of interaction responses that carried a message.
    pub interaction_messages: Vec<(String, bool)>,
    /// Interaction token → the interaction, for its response webhook.
    pub interactions: HashMap<String, Interaction>,
    /// (message id, emoji) the bot reacted with.
    pub reactions: Vec<(u64, String)>,
    pub commands: Value,
    /// (channel, nonce) → message id, for creates with `enforce_nonce`.
    pub nonces: HashMap<(u64, String), u64>,
    pub faults: FaultRules<FaultScope, Fault>,
    /// Rate limits enforced on message creates with 429s (none unless a test asks).
    pub limits: crate::limits::Enforcer,
    /// Where the CDN is (`http://addr/cdn`).
    pub cdn_base: String,
    /// Users' attachments on the CDN, by path under `/cdn/`.
    pub cdn: HashMap<String, Vec<u8>>,
    /// Bytes of users' attachments the CDN has sent.
    pub cdn_bytes_served: u64,
    /// Requests the CDN answered (any path).
    pub cdn_requests: usize,
    /// Channels where voice messages are refused (error 50173).
    pub no_voice_channels: std::collections::HashSet<u64>,
    last_id: u64,
    // The gateway.
    pub ws_url: String,
    pub heartbeat_interval_ms: u64,
    /// How long READY takes after IDENTIFY (Discord takes a moment; tests widen the gap).
    pub ready_delay: Duration,
    pub sessions: HashMap<String, Session>,
    /// The session new events go to (the latest identified one).
    pub current_session: Option<String>,
    pub connections: HashMap<u64, Connection>,
    pub next_connection: u64,
    pub identifies: usize,
    pub resumes: usize,
    pub heartbeats: usize,
    /// Events injected while no session existed (lost, as on Discord).
    pub lost_events: usize,
}

impl State {
    pub(super) fn new(token: String, bot: DcUser, application_id: u64) -> Self {
        let mut state = Self {
            token,
            bot,
            application_id,
            guild_id: 0,
            channels: HashMap::new(),
            dm_channels: HashMap::new(),
            user_messages: HashMap::new(),
            sent: Vec::new(),
            sent_index: HashMap::new(),
            calls: Vec::new(),
            typing: HashMap::new(),
            interaction_callbacks: Vec::new(),
            interaction_messages: Vec::new(),
            interactions: HashMap::new(),
            reactions: Vec::new(),
            commands: json!([]),
            nonces: HashMap::new(),
            faults: FaultRules::new(),
            limits: crate::limits::Enforcer::default(),
            cdn_base: String::new(),
            cdn: HashMap::new(),
            cdn_bytes_served: 0,
            cdn_requests: 0,
            no_voice_channels: Default::default(),
            last_id: 0,
            ws_url: String::new(),
            heartbeat_interval_ms: 1_000,
            ready_delay: Duration::ZERO,
            sessions: HashMap::new(),
            current_session: None,
            connections: HashMap::new(),
            next_connection: 1,
            identifies: 0,
            resumes: 0,
            heartbeats: 0,
            lost_events: 0,
        };
        state.guild_id = state.snowflake();
        state
    }

    /// A new snowflake: milliseconds since Discord's epoch in the top bits, strictly increasing.
    pub(super) fn snowflake(&mut self) -> u64 {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(DISCORD_EPOCH_MS);
        let id = (now.saturating_sub(DISCORD_EPOCH_MS) << 22).max(self.last_id + 1);
        self.last_id = id;
        id
    }

    pub(super) fn user_json(user: &DcUser, bot: bool) -> Value {
        json!({"id": user.id.to_string(), "username": user.username, "discriminator": "0", "global_name": user.global_name,
               "avatar": null, "bot": bot})
    }

    /// The partial guild member Discord attaches to a user's guild message (without `user`).
    pub(super) fn member_json(user: &DcUser) -> Value {
        json!({"roles": [], "joined_at": timestamp(), "deaf": false, "mute": false, "flags": 0, "nick": user.nick})
    }

    pub(super) fn bot_json(&self) -> Value {
        Self::user_json(&self.bot, true)
    }

    pub(super) fn add_channel(&mut self, name: &str, kind: ChannelKind) -> u64 {
        let id = self.snowflake();
        self.channels.insert(id, Channel { id, name: name.to_string(), kind });
        id
    }

    pub(super) fn dm_channel(&mut self, user: &DcUser) -> u64 {
        if let Some(id) = self.dm_channels.get(&user.id) {
            return *id;
        }
        let id = self.add_channel(&user.username, ChannelKind::Dm { recipient: user.id });
        self.dm_channels.insert(user.id, id);
        id
    }

    pub(super) fn channel_json(&self, channel: &Channel) -> Value {
        match &channel.kind {
            ChannelKind::Dm { recipient } => json!({"id": channel.id.to_string(), "type": 1, "last_message_id": null,
                "recipients": [{"id": recipient.to_string(), "username": channel.name, "discriminator": "0", "avatar": null}]}),
            ChannelKind::Text => json!({"id": channel.id.to_string(), "type": 0, "guild_id": self.guild_id.to_string(),
                "name": channel.name, "position": 0, "permission_overwrites": [], "nsfw": false, "parent_id": null}),
            ChannelKind::Thread { parent } => json!({"id": channel.id.to_string(), "type": 11, "guild_id": self.guild_id.to_string(),
                "name": channel.name, "parent_id": parent.to_string(), "owner_id": self.bot.id.to_string(),
                "message_count": 0, "member_count": 1, "rate_limit_per_user": 0,
                "thread_metadata": {"archived": false, "auto_archive_duration": 1440, "archive_timestamp": timestamp(), "locked": false}}),
        }
    }

    /// A message object as Discord serialises it.
    pub(super) fn message_json(
        &self,
        id: u64,
        channel_id: u64,
        author: Value,
        content: &str,
        mentions: Vec<Value>,
        reply_to: Option<u64>,
    ) -> Value {
        let mut message = json!({
            "id": id.to_string(), "channel_id": channel_id.to_string(), "author": author, "content": content,
            "timestamp": timestamp(), "edited_timestamp": null, "tts": false, "mention_everyone": false,
            "mentions": mentions, "mention_roles": [], "attachments": [], "embeds": [], "pinned": false, "type": 0,
        });
        if self.channels.get(&channel_id).is_some_and(|c| !matches!(c.kind, ChannelKind::Dm { .. })) {
            message["guild_id"] = json!(self.guild_id.to_string());
        }
        if let Some(reply) = reply_to {
            message["type"] = json!(19);
            message["message_reference"] = json!({"message_id": reply.to_string(), "channel_id": channel_id.to_string()});
            let referenced = self
                .user_messages
                .get(&reply)
                .cloned()
                .or_else(|| self.sent_index.get(&reply).map(|i| self.sent_message_json(&self.sent[*i])));
            if let Some(referenced) = referenced {
                message["referenced_message"] = referenced;
            }
        }
        message
    }

    pub(super) fn sent_message_json(&self, sent: &DcSent) -> Value {
        let mut message = self.message_json(sent.id, sent.channel_id, self.bot_json(), &sent.content, vec![], None);
        message["components"] = sent.components.clone();
        if !sent.edits.is_empty() {
            message["edited_timestamp"] = json!(timestamp());
        }
        message
    }

    /// Append a dispatch to the current session and send it if a connection is attached.
    pub(super) fn dispatch(&mut self, event: &str, data: Value) -> Option<u64> {
        let Some(session_id) = self.current_session.clone() else {
            self.lost_events += 1;
            return None;
        };
        let session = self.sessions.get_mut(&session_id)?;
        session.seq += 1;
        let seq = session.seq;
        let payload = json!({"op": 0, "t": event, "s": seq, "d": data});
        session.log.push((seq, payload.clone()));
        if let Some(conn) = session.connection.and_then(|c| self.connections.get(&c)) {
            let _ = conn.tx.send(Frame::Text(payload.to_string()));
        }
        Some(seq)
    }

    /// The connection serving the current session, if one is attached.
    pub(super) fn live_connection(&self) -> Option<u64> {
        let session = self.sessions.get(self.current_session.as_ref()?)?;
        session.connection.filter(|c| self.connections.contains_key(c))
    }

    pub(super) fn store_sent(&mut self, sent: DcSent) -> Value {
        let json = self.sent_message_json(&sent);
        self.sent_index.insert(sent.id, self.sent.len());
        self.sent.push(sent);
        json
    }
}

pub(crate) fn timestamp() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// An interaction the bot may answer through its token.
#[derive(Debug, Clone)]
pub(crate) struct Interaction {
    pub id: u64,
    pub channel_id: u64,
    /// Acknowledged with a callback (a deferred or immediate response).
    pub acknowledged: bool,
    /// The response message, once it has content.
    pub original: Option<u64>,
}

/// The state behind one lock, plus the wake-up for test-side waiters.
pub(crate) type Shared = crate::shared::Shared<State>;
