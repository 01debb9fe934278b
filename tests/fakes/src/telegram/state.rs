//! Everything the fake Telegram remembers: chats and topics, the update queue and its offset,
//! stored messages, what the bot sent and edited, the call log, and the fault rules.

use super::media::{SentFile, StoredFile, TgMedia};
use crate::faults::FaultRules;
use crate::serve::ShutdownSignal;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;
use std::time::Instant;
use tokio::sync::Notify;

/// A Telegram user the test plays. As on Telegram, only the id and the first name are always
/// there; anyone may pick any first and last name, while a username is unique to one account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TgUser {
    pub id: i64,
    pub username: Option<String>,
    pub first_name: String,
    pub last_name: Option<String>,
}

impl TgUser {
    /// A user without a username, known by the names they chose.
    pub fn named(id: i64, first_name: &str, last_name: Option<&str>) -> TgUser {
        TgUser { id, username: None, first_name: first_name.to_string(), last_name: last_name.map(str::to_string) }
    }

    pub fn with_username(mut self, username: &str) -> TgUser {
        self.username = Some(username.to_string());
        self
    }

    /// The fields of a Bot API `User` (or a private `Chat`) that name this user.
    fn name_fields(&self, json: &mut Value) {
        json["first_name"] = json!(self.first_name);
        if let Some(last) = &self.last_name {
            json["last_name"] = json!(last);
        }
        if let Some(username) = &self.username {
            json["username"] = json!(username);
        }
    }
}

/// What an injection produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Injected {
    pub update_id: i64,
    pub message_id: i64,
    pub chat_id: i64,
}

/// One API call as the fake saw it.
#[derive(Debug, Clone)]
pub struct ApiCall {
    /// Lower-case method name.
    pub method: String,
    pub params: Value,
    /// HTTP status answered (0: not answered yet, or the connection was reset instead).
    pub status: u16,
    pub at: Instant,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SentKind {
    Text,
    Document {
        file_name: String,
        len: usize,
    },
    Photo {
        len: usize,
    },
    /// `sendVoice`, with the `duration` the bot stated.
    Voice {
        len: usize,
        duration: Option<u32>,
    },
    Audio {
        file_name: String,
        len: usize,
    },
}

/// A message the bot sent, in its current state.
#[derive(Debug, Clone)]
pub struct SentMessage {
    /// When the send arrived.
    pub at: Instant,
    pub chat_id: i64,
    pub message_id: i64,
    pub thread_id: Option<i64>,
    /// Visible text after entity parsing (the caption for files).
    pub text: String,
    /// The text as sent, markup included.
    pub raw_text: String,
    pub parse_mode: Option<String>,
    pub entities: Vec<Value>,
    pub reply_to: Option<i64>,
    pub reply_markup: Option<Value>,
    /// Earlier visible texts, oldest first.
    pub edits: Vec<String>,
    pub deleted: bool,
    pub kind: SentKind,
    pub caption: Option<String>,
    /// Link previews were switched off (`link_preview_options.is_disabled` or the older
    /// `disable_web_page_preview`), as last sent or edited.
    pub link_preview_disabled: bool,
}

/// Which calls a fault or latency applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultScope {
    /// sendMessage, editMessageText, sendDocument, sendPhoto, sendVoice, sendAudio, deleteMessage,
    /// sendChatAction.
    Sends,
    /// getUpdates.
    Polls,
    /// One method, any case.
    Method(String),
    All,
}

impl FaultScope {
    pub(crate) fn matches(&self, method: &str) -> bool {
        match self {
            FaultScope::Sends => {
                matches!(
                    method,
                    "sendmessage"
                        | "editmessagetext"
                        | "senddocument"
                        | "sendphoto"
                        | "sendvoice"
                        | "sendaudio"
                        | "deletemessage"
                        | "sendchataction"
                )
            }
            FaultScope::Polls => method == "getupdates",
            FaultScope::Method(m) => m.eq_ignore_ascii_case(method),
            FaultScope::All => true,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// 429 with `parameters.retry_after`.
    RateLimited { retry_after: u32 },
    /// A 5xx with Telegram's JSON error body.
    ServerError(u16),
    /// The request is read, then the connection is cut without an answer.
    Reset,
    /// 409 Conflict.
    Conflict,
    /// 400 with this description (e.g. "Bad Request: can't parse entities: …").
    BadRequest(String),
}

#[derive(Debug, Default)]
pub(crate) struct ChatInfo {
    pub json: Value,
    pub topics: HashSet<i64>,
    pub next_message_id: i64,
}

pub(crate) struct State {
    pub token: String,
    pub bot_id: i64,
    pub bot_username: String,
    next_update_id: i64,
    /// Unconfirmed updates, oldest first.
    pub pending: VecDeque<(i64, Value)>,
    /// Every update ever injected, for redelivery.
    history: HashMap<i64, Value>,
    pub redeliveries: Vec<Value>,
    pub allowed_updates: Option<Vec<String>>,
    pub confirmed_offset: i64,
    pub webhook_url: String,
    /// The rest of what `setWebhook` set, and how delivering to it went.
    pub webhook: super::webhook::Hook,
    pub chats: HashMap<i64, ChatInfo>,
    /// Every message (users' and the bot's) by (chat, id), as JSON.
    pub messages: HashMap<(i64, i64), Value>,
    pub sent: Vec<SentMessage>,
    pub sent_index: HashMap<(i64, i64), usize>,
    pub calls: Vec<ApiCall>,
    pub commands: Vec<(String, String)>,
    pub chat_actions: HashMap<i64, Vec<String>>,
    pub answered_callbacks: Vec<String>,
    /// (callback query id, the toast text shown to the presser, if any).
    pub callback_texts: Vec<(String, Option<String>)>,
    /// Users' files by file_id.
    pub files: HashMap<String, StoredFile>,
    /// File paths the bot downloaded (`/file/bot<token>/<path>`), in order.
    pub downloads: Vec<String>,
    /// Bytes of users' files the downloads sent, counted as each chunk goes out.
    pub bytes_served: u64,
    /// Files the bot uploaded, in order.
    pub uploads: Vec<SentFile>,
    /// Private chats whose user does not accept voice messages (a privacy setting): `sendVoice`
    /// answers `VOICE_MESSAGES_FORBIDDEN`.
    pub voice_forbidden: HashSet<i64>,
    next_file: u64,
    pub faults: FaultRules<FaultScope, Fault>,
    /// Private chats whose user blocked the bot.
    pub blocked_by: HashSet<i64>,
    /// Flood limits enforced on sends with 429s (none unless a test asks).
    pub limits: crate::limits::Enforcer,
    /// Bumped by every getUpdates; an older poll still waiting answers 409.
    pub poll_generation: u64,
    pub active_polls: usize,
    /// `getUpdates` is held unanswered (a wedged Bot API) until this is cleared.
    pub polls_stalled: bool,
}

impl State {
    pub(super) fn new(token: String, bot_id: i64, bot_username: String) -> Self {
        Self {
            token,
            bot_id,
            bot_username,
            next_update_id: 1,
            pending: VecDeque::new(),
            history: HashMap::new(),
            redeliveries: Vec::new(),
            allowed_updates: None,
            confirmed_offset: 0,
            webhook_url: String::new(),
            webhook: super::webhook::Hook::default(),
            chats: HashMap::new(),
            messages: HashMap::new(),
            sent: Vec::new(),
            sent_index: HashMap::new(),
            calls: Vec::new(),
            commands: Vec::new(),
            chat_actions: HashMap::new(),
            answered_callbacks: Vec::new(),
            callback_texts: Vec::new(),
            files: HashMap::new(),
            downloads: Vec::new(),
            bytes_served: 0,
            uploads: Vec::new(),
            voice_forbidden: HashSet::new(),
            next_file: 1,
            faults: FaultRules::new(),
            blocked_by: HashSet::new(),
            limits: crate::limits::Enforcer::default(),
            poll_generation: 0,
            active_polls: 0,
            polls_stalled: false,
        }
    }

    pub(super) fn bot_user_json(&self, full: bool) -> Value {
        let mut user = json!({"id": self.bot_id, "is_bot": true, "first_name": "Hermes", "username": self.bot_username});
        if full {
            user["can_join_groups"] = json!(true);
            user["can_read_all_group_messages"] = json!(false);
            user["supports_inline_queries"] = json!(false);
            user["can_connect_to_business"] = json!(false);
            user["has_main_web_app"] = json!(false);
        }
        user
    }

    fn user_json(user: &TgUser) -> Value {
        let mut json = json!({"id": user.id, "is_bot": false});
        user.name_fields(&mut json);
        json
    }

    pub(super) fn add_group(&mut self, chat_id: i64, title: &str, forum: bool) {
        let mut json = json!({"id": chat_id, "type": "supergroup", "title": title});
        if forum {
            json["is_forum"] = json!(true);
        }
        self.chats.insert(chat_id, ChatInfo { json, topics: HashSet::new(), next_message_id: 1 });
    }

    pub(super) fn add_topic(&mut self, chat_id: i64, thread_id: i64) {
        if let Some(chat) = self.chats.get_mut(&chat_id) {
            chat.topics.insert(thread_id);
            chat.next_message_id = chat.next_message_id.max(thread_id + 1);
        }
    }

    /// A private chat with `user` exists once the user writes.
    fn ensure_private(&mut self, user: &TgUser) {
        self.chats.entry(user.id).or_insert_with(|| {
            let mut json = json!({"id": user.id, "type": "private"});
            user.name_fields(&mut json);
            ChatInfo { json, topics: HashSet::new(), next_message_id: 1 }
        });
    }

    pub(super) fn next_message_id(&mut self, chat_id: i64) -> i64 {
        let chat = self.chats.entry(chat_id).or_default();
        let id = chat.next_message_id.max(1);
        chat.next_message_id = id + 1;
        id
    }

    fn push_update(&mut self, mut update: Value) -> i64 {
        let id = match update.get("update_id").and_then(Value::as_i64) {
            Some(id) => {
                self.next_update_id = self.next_update_id.max(id + 1);
                id
            }
            None => {
                let id = self.next_update_id;
                self.next_update_id += 1;
                update["update_id"] = json!(id);
                id
            }
        };
        self.history.insert(id, update.clone());
        self.pending.push_back((id, update));
        id
    }

    pub(super) fn redeliver(&mut self, update_id: i64) {
        if let Some(update) = self.history.get(&update_id) {
            self.redeliveries.push(update.clone());
        }
    }

    /// Entities a Telegram client computes: bot commands at the start, @mentions anywhere.
    fn client_entities(text: &str) -> Vec<Value> {
        let mut out = Vec::new();
        let mut offset = 0usize;
        for (i, word) in text.split(' ').enumerate() {
            let len = word.encode_utf16().count();
            if i == 0 && word.starts_with('/') && len > 1 {
                out.push(json!({"type": "bot_command", "offset": offset, "length": len}));
            } else if word.starts_with('@') && len > 1 {
                let clean = word.trim_end_matches(|c: char| !(c.is_alphanumeric() || c == '_'));
                out.push(json!({"type": "mention", "offset": offset, "length": clean.encode_utf16().count()}));
            }
            offset += len + 1;
        }
        out
    }

    fn base_message(&mut self, chat_id: i64, from: &TgUser, thread: Option<i64>) -> (i64, Value) {
        self.ensure_private(from);
        let message_id = self.next_message_id(chat_id);
        let chat = self.chats.get(&chat_id).map(|c| c.json.clone()).unwrap_or(json!({"id": chat_id, "type": "private", "first_name": "?"}));
        let mut message = json!({"message_id": message_id, "date": now_unix(), "chat": chat, "from": Self::user_json(from)});
        if let Some(t) = thread {
            message["message_thread_id"] = json!(t);
            message["is_topic_message"] = json!(true);
        }
        (message_id, message)
    }

    pub(super) fn user_message(&mut self, chat_id: i64, from: &TgUser, text: &str, thread: Option<i64>, reply_to: Option<i64>) -> Injected {
        let (message_id, mut message) = self.base_message(chat_id, from, thread);
        message["text"] = json!(text);
        let entities = Self::client_entities(text);
        if !entities.is_empty() {
            message["entities"] = json!(entities);
        }
        if let Some(r) = reply_to
            && let Some(original) = self.messages.get(&(chat_id, r))
        {
            message["reply_to_message"] = original.clone();
        }
        self.messages.insert((chat_id, message_id), message.clone());
        let update_id = self.push_update(json!({"message": message}));
        Injected { update_id, message_id, chat_id }
    }

    pub(super) fn edited_message(&mut self, chat_id: i64, message_id: i64, from: &TgUser, text: &str) -> Injected {
        let mut message = self.messages.get(&(chat_id, message_id)).cloned().unwrap_or_else(|| self.base_message(chat_id, from, None).1);
        message["text"] = json!(text);
        message["edit_date"] = json!(now_unix());
        let update_id = self.push_update(json!({"edited_message": message}));
        Injected { update_id, message_id, chat_id }
    }

    pub(super) fn callback(&mut self, chat_id: i64, message_id: i64, from: &TgUser, data: &str) -> Injected {
        let message = self.messages.get(&(chat_id, message_id)).cloned().unwrap_or(json!({
            "message_id": message_id, "date": now_unix(), "chat": {"id": chat_id, "type": "private", "first_name": "?"}
        }));
        let query_id = format!("cbq-{}", self.next_update_id);
        let update_id = self.push_update(json!({"callback_query": {
            "id": query_id, "from": Self::user_json(from), "message": message, "chat_instance": format!("ci{chat_id}"), "data": data
        }}));
        Injected { update_id, message_id, chat_id }
    }

    /// Keep `media` as Telegram would, under a new file_id; the id and the unique id.
    fn store_file(&mut self, media: &TgMedia) -> (String, String) {
        let n = self.next_file;
        self.next_file += 1;
        let file_id = format!("file-{n}");
        let unique_id = format!("u{n}");
        let (folder, extension) = media.stored_as();
        let path = format!("{folder}/file_{n}.{extension}");
        let stored = StoredFile { path, unique_id: unique_id.clone(), bytes: media.bytes.clone(), stated_size: media.stated_size() };
        self.files.insert(file_id.clone(), stored);
        (file_id, unique_id)
    }

    pub(super) fn media_message(&mut self, chat_id: i64, from: &TgUser, media: &TgMedia, caption: Option<&str>) -> Injected {
        let (message_id, mut message) = self.base_message(chat_id, from, None);
        let (file_id, unique_id) = self.store_file(media);
        let (field, value) = media.message_field(&file_id, &unique_id);
        message[field] = value;
        if let Some(c) = caption {
            message["caption"] = json!(c);
        }
        self.messages.insert((chat_id, message_id), message.clone());
        let update_id = self.push_update(json!({"message": message}));
        Injected { update_id, message_id, chat_id }
    }

    pub(super) fn raw_update(&mut self, update: Value) -> Injected {
        let update_id = self.push_update(update);
        Injected { update_id, message_id: 0, chat_id: 0 }
    }

    /// Confirm updates below `offset` and take up to `limit` of the rest (redeliveries first).
    pub(super) fn take_updates(&mut self, offset: i64, limit: usize) -> Vec<Value> {
        if offset > 0 {
            while self.pending.front().is_some_and(|(id, _)| *id < offset) {
                self.pending.pop_front();
            }
            self.confirmed_offset = self.confirmed_offset.max(offset);
        } else if offset < 0 {
            let keep = offset.unsigned_abs() as usize;
            while self.pending.len() > keep {
                self.pending.pop_front();
            }
        }
        let mut out: Vec<Value> = self.redeliveries.drain(..).collect();
        self.drop_unwanted();
        out.extend(self.pending.iter().take(limit.saturating_sub(out.len())).map(|(_, u)| u.clone()));
        out
    }
}

impl State {
    /// Updates of kinds the bot did not ask for are confirmed silently, as Telegram never sends them.
    pub(super) fn drop_unwanted(&mut self) {
        let allowed = self.allowed_updates.clone();
        let wanted = |update: &Value| {
            let kind = update.as_object().and_then(|o| o.keys().find(|k| *k != "update_id").cloned());
            match (&allowed, kind) {
                (Some(kinds), Some(kind)) if !kinds.is_empty() && is_known_kind(&kind) => kinds.contains(&kind),
                _ => true,
            }
        };
        self.pending.retain(|(_, u)| wanted(u));
    }
}

/// Update kinds of the Bot API the `allowed_updates` filter knows; anything else is passed on (a
/// kind from a newer API version the fake does not know about).
fn is_known_kind(kind: &str) -> bool {
    matches!(
        kind,
        "message"
            | "edited_message"
            | "channel_post"
            | "edited_channel_post"
            | "callback_query"
            | "inline_query"
            | "chosen_inline_result"
            | "shipping_query"
            | "pre_checkout_query"
            | "poll"
            | "poll_answer"
            | "my_chat_member"
            | "chat_member"
            | "chat_join_request"
            | "message_reaction"
    )
}

pub(crate) fn now_unix() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

/// The state behind one lock, plus the wake-ups.
pub(crate) struct Shared {
    state: Mutex<State>,
    /// Wakes long polls: an update arrived, or a newer poll took over.
    pub updates: Notify,
    /// Wakes test-side waiters: the bot did something.
    pub changed: Notify,
    pub shutdown: ShutdownSignal,
}

impl Shared {
    pub(super) fn new(state: State, shutdown: ShutdownSignal) -> Self {
        Self { state: Mutex::new(state), updates: Notify::new(), changed: Notify::new(), shutdown }
    }

    pub(super) fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut state)
    }

    pub(super) fn inject(&self, f: impl FnOnce(&mut State) -> Injected) -> Injected {
        let injected = self.with(f);
        self.updates.notify_waiters();
        injected
    }
}
