//! The Matrix peer: a real Synapse (started by `tests/peers/run.sh`, reached through
//! `HERMES_TEST_SYNAPSE_URL`), with the gateway's matrix-sdk client behind a [`FaultProxy`] for
//! the faults Synapse will not make on demand (429s, a cut connection, a stale `/sync` page).
//!
//! Users are real accounts, registered through Synapse's shared-secret admin API with names
//! unique to each test, and talk through the client-server API. What the bot posted is read
//! back with an admin account (`/_synapse/admin/v1/rooms/{id}/messages`): each message's `body`
//! (the Markdown a Matrix client shows when it does not render `formatted_body`), its edits
//! (`m.replace`) applied, threads by their `m.thread` relation.

use crate::peer::{Chat, ChatPeer, Media, MediaKind, Posted};
use crate::support::Setup;
use hermes_fakes::proxy::{Canned, FaultProxy};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The chunk size the Matrix adapter sends (Hermes' Matrix limit).
pub(crate) const MAX_LEN: usize = 4000;

/// The Synapse the tests run against, or a failure saying how to get one.
pub(crate) fn synapse() -> (String, String) {
    hermes_fakes::synapse::homeserver()
}

/// A registered account.
#[derive(Clone, Debug)]
pub(crate) struct Account {
    pub user_id: String,
    pub token: String,
    pub password: String,
}

/// The client-server API as one user (or the admin) speaks it.
#[derive(Clone)]
pub(crate) struct Cs {
    base: String,
    http: reqwest::Client,
}

static TXN: AtomicU64 = AtomicU64::new(0);

impl Cs {
    pub(crate) fn new(base: &str) -> Cs {
        Cs { base: base.trim_end_matches('/').to_string(), http: reqwest::Client::builder().no_proxy().build().unwrap() }
    }

    /// Registers `local` through the shared-secret admin API.
    pub(crate) async fn register(&self, secret: &str, local: &str, admin: bool) -> Account {
        let password = format!("pw-{local}-0123456789");
        let account = hermes_fakes::synapse::register(&self.base, secret, local, &password, admin).await;
        Account { user_id: account.user_id, token: account.access_token, password }
    }

    pub(crate) async fn call(&self, who: &Account, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut request = self.http.request(method.clone(), format!("{}{path}", self.base)).bearer_auth(&who.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let answer = request.send().await.unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let status = answer.status();
        let value: Value = answer.json().await.unwrap_or(Value::Null);
        assert!(status.is_success(), "{method} {path} as {}: {status} {value}", who.user_id);
        value
    }

    /// Sends an event of `kind` with `content` into `room`; its event id.
    pub(crate) async fn send(&self, who: &Account, room: &str, kind: &str, content: Value) -> String {
        let txn = format!("t{}-{}", std::process::id(), TXN.fetch_add(1, Ordering::Relaxed));
        let path = format!("/_matrix/client/v3/rooms/{}/send/{kind}/{txn}", encode(room));
        self.call(who, reqwest::Method::PUT, &path, Some(content)).await["event_id"].as_str().unwrap().to_string()
    }

    pub(crate) async fn create_room(&self, who: &Account, body: Value) -> String {
        self.call(who, reqwest::Method::POST, "/_matrix/client/v3/createRoom", Some(body)).await["room_id"].as_str().unwrap().to_string()
    }

    pub(crate) async fn join(&self, who: &Account, room: &str) {
        self.call(who, reqwest::Method::POST, &format!("/_matrix/client/v3/join/{}", encode(room)), Some(json!({}))).await;
    }

    pub(crate) async fn members(&self, who: &Account, room: &str) -> Vec<String> {
        let path = format!("/_matrix/client/v3/rooms/{}/joined_members", encode(room));
        let answer = self.call(who, reqwest::Method::GET, &path, None).await;
        answer["joined"].as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default()
    }

    /// Waits until `user` has joined `room`; false after `timeout`.
    pub(crate) async fn wait_member(&self, who: &Account, room: &str, user: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.members(who, room).await.iter().any(|m| m == user) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }

    /// Every event of `room`, oldest first, read with the admin account.
    pub(crate) async fn room_events(&self, admin: &Account, room: &str) -> Vec<Value> {
        let path = format!("/_synapse/admin/v1/rooms/{}/messages?dir=b&limit=1000", encode(room));
        let Ok(answer) = self.http.get(format!("{}{path}", self.base)).bearer_auth(&admin.token).send().await else { return Vec::new() };
        let Ok(page) = answer.json::<Value>().await else { return Vec::new() };
        let mut events = page["chunk"].as_array().cloned().unwrap_or_default();
        events.reverse();
        events
    }
}

/// A room or event id as one path segment.
pub(crate) fn encode(id: &str) -> String {
    id.bytes()
        .map(|b| if b.is_ascii_alphanumeric() || b"-._~".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

/// One message of the bot's, as a Matrix client shows it.
#[derive(Clone, Debug)]
pub(crate) struct Shown {
    pub event_id: String,
    pub body: String,
    pub formatted: Option<String>,
    pub thread: Option<String>,
    pub edits: usize,
    pub file: Option<String>,
    pub no_previews: bool,
    /// The `mxc://` URI of a voice note (`m.audio` marked `org.matrix.msc3245.voice`).
    pub voice: Option<String>,
}

/// The bot's messages in each watched room, refreshed in the background.
type Shelf = Arc<Mutex<HashMap<String, Vec<Shown>>>>;

/// What the bot's events in a room amount to once edits are applied.
pub(crate) fn shown(events: &[Value], bot: &str) -> Vec<Shown> {
    let mut out: Vec<Shown> = Vec::new();
    for event in events.iter().filter(|e| e["sender"] == bot && e["type"] == "m.room.message") {
        let content = &event["content"];
        let relation = &content["m.relates_to"];
        if relation["rel_type"] == "m.replace" {
            let new = &content["m.new_content"];
            if let Some(original) = out.iter_mut().find(|m| relation["event_id"] == m.event_id.as_str()) {
                original.body = new["body"].as_str().unwrap_or_default().to_string();
                original.formatted = new["formatted_body"].as_str().map(str::to_string);
                original.edits += 1;
            }
            continue;
        }
        let Some(body) = content["body"].as_str() else { continue };
        let msgtype = content["msgtype"].as_str().unwrap_or_default();
        let file = matches!(msgtype, "m.file" | "m.image" | "m.audio" | "m.video")
            .then(|| content["filename"].as_str().unwrap_or(body).to_string());
        out.push(Shown {
            event_id: event["event_id"].as_str().unwrap_or_default().to_string(),
            body: body.to_string(),
            formatted: content["formatted_body"].as_str().map(str::to_string),
            thread: (relation["rel_type"] == "m.thread").then(|| relation["event_id"].as_str().unwrap_or_default().to_string()),
            edits: 0,
            file,
            no_previews: content.get("com.beeper.linkpreviews").is_some_and(|p| p.as_array().is_some_and(|a| a.is_empty())),
            voice: (msgtype == "m.audio" && content.get("org.matrix.msc3245.voice").is_some())
                .then(|| content["url"].as_str().unwrap_or_default().to_string()),
        });
    }
    out
}

pub(crate) struct MatrixPeer {
    pub cs: Cs,
    pub proxy: FaultProxy,
    secret: String,
    /// Unique to this peer, so tests sharing one Synapse never meet.
    prefix: String,
    pub bot: Account,
    users: tokio::sync::Mutex<HashMap<u32, Account>>,
    dms: tokio::sync::Mutex<HashMap<u32, String>>,
    general: tokio::sync::Mutex<Option<String>>,
    threads: Mutex<[Option<String>; 2]>,
    last_event: Mutex<Option<String>>,
    /// What users uploaded: media id → its size, to count what the bot downloaded.
    uploads: Mutex<HashMap<String, u64>>,
    shelf: Shelf,
    watcher: tokio::task::JoinHandle<()>,
}

impl Drop for MatrixPeer {
    fn drop(&mut self) {
        self.watcher.abort();
    }
}

impl MatrixPeer {
    /// User `n`, registered on first use.
    pub(crate) async fn user(&self, n: u32) -> Account {
        let mut users = self.users.lock().await;
        if let Some(user) = users.get(&n) {
            return user.clone();
        }
        let user = self.cs.register(&self.secret, &format!("{}u{n}", self.prefix), false).await;
        users.insert(n, user.clone());
        user
    }

    pub(crate) fn user_id(&self, n: u32) -> String {
        let server = self.bot.user_id.split_once(':').map_or("localhost", |(_, s)| s);
        format!("@{}u{n}:{server}", self.prefix)
    }

    fn watch(&self, room: &str) {
        self.shelf.lock().unwrap().entry(room.to_string()).or_default();
    }

    /// User `n`'s direct chat with the bot, created (and joined by the bot) on first use.
    pub(crate) async fn dm_room(&self, n: u32) -> String {
        let user = self.user(n).await;
        let mut dms = self.dms.lock().await;
        if let Some(room) = dms.get(&n) {
            return room.clone();
        }
        let room =
            self.cs.create_room(&user, json!({"is_direct": true, "invite": [self.bot.user_id], "preset": "trusted_private_chat"})).await;
        assert!(
            self.cs.wait_member(&user, &room, &self.bot.user_id, Duration::from_secs(40)).await,
            "the bot joined the DM {room} it was invited to by an allowed user"
        );
        self.watch(&room);
        dms.insert(n, room.clone());
        room
    }

    /// The shared room, created by user 1 with the bot in it.
    pub(crate) async fn general(&self) -> String {
        let mut general = self.general.lock().await;
        if let Some(room) = general.as_ref() {
            return room.clone();
        }
        let owner = self.user(1).await;
        let room = self.cs.create_room(&owner, json!({"preset": "public_chat", "name": "general", "invite": [self.bot.user_id]})).await;
        assert!(self.cs.wait_member(&owner, &room, &self.bot.user_id, Duration::from_secs(40)).await, "the bot joined the shared room");
        self.watch(&room);
        *general = Some(room.clone());
        room
    }

    async fn in_general(&self, n: u32) -> (Account, String) {
        let room = self.general().await;
        let user = self.user(n).await;
        if !self.cs.members(&self.user(1).await, &room).await.contains(&user.user_id) {
            self.cs.join(&user, &room).await;
        }
        (user, room)
    }

    fn remember(&self, event_id: &str) {
        *self.last_event.lock().unwrap() = Some(event_id.to_string());
    }

    fn text(&self, text: &str, mention: bool) -> Value {
        let mut content = json!({"msgtype": "m.text", "body": text});
        if mention {
            // An intentional mention (Matrix 1.7 `m.mentions`), as current clients send it.
            content["m.mentions"] = json!({"user_ids": [self.bot.user_id]});
        }
        content
    }

    fn block_on<T>(&self, work: impl std::future::Future<Output = T>) -> T {
        tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(work))
    }
}

impl ChatPeer for MatrixPeer {
    const PLATFORM: &'static str = "matrix";
    const MAX_LEN: usize = MAX_LEN;
    /// What is compared is the `body`, the Markdown every Matrix client can show; the HTML
    /// `formatted_body` beside it is checked by `matrix_formatted_body_is_the_markdown_rendered`.
    const PARSES_FORMATTING: bool = false;
    const DIALECT: hermes_adapter::MarkdownDialect = hermes_adapter::MarkdownDialect::Markdown;
    const UNIT: hermes_adapter::LengthUnit = hermes_adapter::LengthUnit::Chars;
    /// Edits are paced at one a second, and Synapse shares two cores with the release build in
    /// CI: a 10,000-character answer once took longer than 60 s there (31 s alone).
    const STREAM_WAIT: Duration = Duration::from_secs(120);

    async fn start() -> Self {
        let (url, secret) = synapse();
        let cs = Cs::new(&url);
        let proxy = FaultProxy::start(&url).await.expect("start the proxy in front of Synapse");
        proxy.record("/sync");
        let prefix = format!("c{:08x}", rand::random::<u32>());
        let bot = cs.register(&secret, &format!("{prefix}bot"), false).await;
        let admin = cs.register(&secret, &format!("{prefix}admin"), true).await;
        let shelf: Shelf = Arc::default();
        let watcher = tokio::spawn({
            let (cs, admin, bot, shelf) = (cs.clone(), admin.clone(), bot.user_id.clone(), shelf.clone());
            async move {
                loop {
                    let rooms: Vec<String> = shelf.lock().unwrap().keys().cloned().collect();
                    for room in rooms {
                        let seen = shown(&cs.room_events(&admin, &room).await, &bot);
                        shelf.lock().unwrap().insert(room, seen);
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        });
        MatrixPeer {
            cs,
            proxy,
            secret,
            prefix,
            bot,
            users: Default::default(),
            dms: Default::default(),
            general: Default::default(),
            threads: Mutex::new([None, None]),
            last_event: Mutex::new(None),
            uploads: Mutex::default(),
            shelf,
            watcher,
        }
    }

    fn configure(&self, setup: &mut Setup) -> String {
        setup.set("MATRIX_HOMESERVER", &self.proxy.url());
        setup.set("MATRIX_USER_ID", &self.bot.user_id);
        setup.set("MATRIX_PASSWORD", &self.bot.password);
        setup.set("MATRIX_ALLOWED_USERS", &(1..=50).map(|n| self.user_id(n)).collect::<Vec<_>>().join(","));
        setup.set("MATRIX_REQUIRE_MENTION", "true");
        "  matrix:\n    enabled: true\n".to_string()
    }

    fn measure(text: &str) -> usize {
        text.chars().count()
    }

    async fn dm(&self, user: u32, text: &str) -> Chat {
        let room = self.dm_room(user).await;
        let event = self.cs.send(&self.user(user).await, &room, "m.room.message", self.text(text, false)).await;
        self.remember(&event);
        Chat { chat_id: room, thread_id: None }
    }

    async fn reply(&self, user: u32, chat: &Chat, message_id: &str, text: &str) {
        let mut content = self.text(text, false);
        content["m.relates_to"] = json!({"m.in_reply_to": {"event_id": message_id}});
        let event = self.cs.send(&self.user(user).await, &chat.chat_id, "m.room.message", content).await;
        self.remember(&event);
    }

    async fn group(&self, user: u32, text: &str, mention: bool) -> Chat {
        let (account, room) = self.in_general(user).await;
        let event = self.cs.send(&account, &room, "m.room.message", self.text(text, mention)).await;
        self.remember(&event);
        Chat { chat_id: room, thread_id: None }
    }

    async fn thread(&self, user: u32, thread: u32, text: &str) -> Chat {
        let (account, room) = self.in_general(user).await;
        let slot = (thread as usize - 1) % 2;
        let started = self.threads.lock().unwrap()[slot].clone();
        let root = match started {
            // Inside the thread the bot answers in, no mention is needed.
            Some(root) => {
                let mut content = self.text(text, false);
                content["m.relates_to"] =
                    json!({"rel_type": "m.thread", "event_id": root, "is_falling_back": true, "m.in_reply_to": {"event_id": root}});
                let event = self.cs.send(&account, &room, "m.room.message", content).await;
                self.remember(&event);
                root
            }
            // A mention in the room is answered in a thread under it.
            None => {
                let event = self.cs.send(&account, &room, "m.room.message", self.text(text, true)).await;
                self.remember(&event);
                self.threads.lock().unwrap()[slot] = Some(event.clone());
                event
            }
        };
        Chat { chat_id: room, thread_id: Some(root) }
    }

    fn posted(&self, chat: &Chat) -> Vec<Posted> {
        let shelf = self.shelf.lock().unwrap();
        shelf
            .get(&chat.chat_id)
            .map(|messages| {
                messages
                    .iter()
                    .filter(|m| m.file.is_none())
                    .filter(|m| chat.thread_id.is_none() || m.thread == chat.thread_id)
                    .map(|m| Posted {
                        id: m.event_id.clone(),
                        text: m.body.clone(),
                        raw: m.body.clone(),
                        previews_off: m.no_previews,
                        edits: m.edits,
                        styles: Vec::new(),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    fn files(&self, chat: &Chat) -> Vec<String> {
        let shelf = self.shelf.lock().unwrap();
        shelf.get(&chat.chat_id).map(|m| m.iter().filter_map(|m| m.file.clone()).collect()).unwrap_or_default()
    }

    fn typing_seen(&self, chat: &Chat) -> usize {
        let room = encode(&chat.chat_id);
        self.proxy
            .seen("PUT", "/typing/")
            .iter()
            .filter(|r| r.path.contains(&room) || r.path.contains(&chat.chat_id))
            .filter(|r| r.body.replace(' ', "").contains("\"typing\":true"))
            .count()
    }

    fn redeliver_last(&self) {
        let event = self.last_event.lock().unwrap().clone().expect("a message was sent");
        let page = self.proxy.recorded_containing("/sync", &event).expect("the bot's /sync delivered the last message");
        // The bot's next /sync gets the page that carried the message once more, with its (old)
        // `next_batch`: the message, and whatever followed it, come again.
        self.proxy.replay_next("/sync", page);
    }

    fn rate_limit_sends(&self, n: usize) {
        let limited = json!({"errcode": "M_LIMIT_EXCEEDED", "error": "Too Many Requests", "retry_after_ms": 300});
        self.proxy.refuse_next("PUT", "/send/m.room.message/", n, Canned { status: 429, body: limited.to_string() });
    }

    fn reject_formatting(&self, _n: usize) -> bool {
        // A homeserver stores whatever HTML it is given; nothing refuses formatting.
        false
    }

    async fn interrupt_connection(&self) {
        self.proxy.cut_connections();
    }

    /// An allowed user's file goes into their DM; a stranger (past user 50) cannot DM the bot
    /// (their invite is refused), so theirs goes into the shared room with a mention.
    async fn dm_media(&self, user: u32, media: &Media, caption: &str) -> Chat {
        let (account, room) = if user <= 50 { (self.user(user).await, self.dm_room(user).await) } else { self.in_general(user).await };
        let uri = self.upload(&account, media).await;
        let mut content = media_content(media, &uri, caption);
        if user > 50 {
            content["m.mentions"] = json!({"user_ids": [self.bot.user_id]});
        }
        let event = self.cs.send(&account, &room, "m.room.message", content).await;
        self.remember(&event);
        Chat { chat_id: room, thread_id: None }
    }

    /// The bytes of users' uploads the bot fetched through the proxy: every successful download
    /// request the proxy forwarded (it forwards a body whole) counts the size of the file asked
    /// for. A refusal before the download shows as 0; a download cut at the cap would count
    /// whole here, so the cap itself is tested in hermes-matrix (media.rs, tests/media.rs).
    fn media_bytes_served(&self) -> u64 {
        let uploads = self.uploads.lock().unwrap();
        self.proxy
            .seen("GET", "/download/")
            .iter()
            .filter(|r| r.status == 200)
            .filter_map(|r| uploads.iter().find(|(id, _)| r.path.split('?').next().is_some_and(|p| p.ends_with(&format!("/{id}")))))
            .map(|(_, size)| *size)
            .sum()
    }

    /// The bot's voice notes in `chat` (`m.audio` with the MSC3245 marker), downloaded from
    /// Synapse directly (not through the bot's proxy).
    fn voice_sent(&self, chat: &Chat) -> Vec<Vec<u8>> {
        let uris: Vec<String> = self.shown_in(&chat.chat_id).into_iter().filter_map(|m| m.voice).collect();
        self.block_on(async {
            let mut notes = Vec::new();
            for uri in uris {
                notes.push(self.download(&self.bot, &uri).await);
            }
            notes
        })
    }

    fn inject_junk(&self) {
        self.block_on(async {
            let room = self.dm_room(10).await;
            let user = self.user(10).await;
            // An empty message, a notice (what bots send each other), an in-room verification
            // request, an event type from the future, a ✅ reaction to the user's own message
            // (not a prompt of the bot's), an edit of a message, and a state event: none is a
            // message from the user to answer. (Synapse itself refuses a message without a body
            // or with one that is not a string, and relations to events it does not know.)
            let verification = json!({"msgtype": "m.key.verification.request", "body": "u10 wants to verify",
                "from_device": "JUNKDEVICE", "methods": ["m.sas.v1"], "to": self.bot.user_id});
            for (kind, content) in [
                ("m.room.message", json!({"msgtype": "m.text", "body": ""})),
                ("m.room.message", verification),
                ("org.example.future_event", json!({"body": "not for bots", "x": [1, 2]})),
            ] {
                self.cs.send(&user, &room, kind, content).await;
            }
            let notice = self.cs.send(&user, &room, "m.room.message", json!({"msgtype": "m.notice", "body": "a notice from a bot"})).await;
            let reaction = json!({"m.relates_to": {"rel_type": "m.annotation", "event_id": notice, "key": "✅"}});
            self.cs.send(&user, &room, "m.reaction", reaction).await;
            let edit = json!({"msgtype": "m.notice", "body": "* edited", "m.new_content": {"msgtype": "m.notice", "body": "edited"},
                "m.relates_to": {"rel_type": "m.replace", "event_id": notice}});
            self.cs.send(&user, &room, "m.room.message", edit).await;
            let path = format!("/_matrix/client/v3/rooms/{}/state/org.example.junk_state/", encode(&room));
            self.cs.call(&user, reqwest::Method::PUT, &path, Some(json!({"junk": true}))).await;
        });
    }
}

/// The event a client sends for `media` at `uri`: `m.audio` (a voice note carries MSC3245's
/// `org.matrix.msc3245.voice` and MSC1767's audio block with its length, as Element sends it) or
/// `m.image`; `info` holds the MIME type, the size (the declared one when the test lies) and the
/// length in milliseconds. A caption is the `body`, the name the `filename` (Matrix 1.10).
pub(crate) fn media_content(media: &Media, uri: &str, caption: &str) -> Value {
    let msgtype = match media.kind {
        MediaKind::Voice | MediaKind::Audio => "m.audio",
        MediaKind::Photo => "m.image",
    };
    let size = media.declared_bytes.unwrap_or(media.bytes.len() as u64);
    let mut content = json!({"msgtype": msgtype, "body": media.file_name, "url": uri,
        "info": {"mimetype": media.mime, "size": size}});
    if !caption.is_empty() {
        content["body"] = json!(caption);
        content["filename"] = json!(media.file_name);
    }
    if let Some(secs) = media.declared_secs {
        content["info"]["duration"] = json!(u64::from(secs) * 1000);
    }
    if media.kind == MediaKind::Voice {
        content["org.matrix.msc3245.voice"] = json!({});
        content["org.matrix.msc1767.audio"] = json!({"duration": media.declared_secs.map(|s| u64::from(s) * 1000)});
    }
    content
}

impl MatrixPeer {
    /// `media` uploaded by `who` through the media API; its `mxc://` URI.
    pub(crate) async fn upload(&self, who: &Account, media: &Media) -> String {
        let url = format!("{}/_matrix/media/v3/upload?filename={}", self.cs.base, encode(&media.file_name));
        let answer =
            self.cs.http.post(url).bearer_auth(&who.token).header("Content-Type", media.mime).body(media.bytes.clone()).send().await;
        let answer: Value = answer.unwrap().error_for_status().unwrap().json().await.unwrap();
        let uri = answer["content_uri"].as_str().expect("Synapse names the upload").to_string();
        let id = uri.rsplit('/').next().unwrap_or_default().to_string();
        self.uploads.lock().unwrap().insert(id, media.bytes.len() as u64);
        uri
    }

    /// The file at `uri`, downloaded by `who` from Synapse's authenticated media endpoint.
    pub(crate) async fn download(&self, who: &Account, uri: &str) -> Vec<u8> {
        let path = uri.trim_start_matches("mxc://");
        let url = format!("{}/_matrix/client/v1/media/download/{path}", self.cs.base);
        let answer = self.cs.http.get(url).bearer_auth(&who.token).send().await.unwrap();
        answer.error_for_status().unwrap().bytes().await.unwrap().to_vec()
    }

    /// The bot's messages in `room` as last read, formatted bodies included.
    pub(crate) fn shown_in(&self, room: &str) -> Vec<Shown> {
        self.shelf.lock().unwrap().get(room).cloned().unwrap_or_default()
    }
}
