//! Matrix through the whole gateway: the real `hermes` binary with its Matrix adapter logged in
//! to a real Synapse (tests/peers/synapse.sh, through tests/peers/run.sh), the scripted LLM, and
//! people who are matrix-sdk clients. A person invites the bot, talks in an unencrypted room, an
//! encrypted room and a thread; a stranger's invite is not accepted (with an allowlist) or pairs
//! through a DM (without one); an approval is resolved by a reaction and a stranger's reaction is
//! refused; the gateway restarted mid-conversation answers everything once, a burst of 150
//! messages while it was away included.

use crate::support::{Gateway, Setup};
use hermes_fakes::{FakeLlm, Reply, ToolCall};
use matrix_sdk::Client;
use matrix_sdk::config::SyncSettings;
use matrix_sdk::room::MessagesOptions;
use matrix_sdk::ruma::{OwnedRoomId, OwnedUserId};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(60);

use hermes_fakes::synapse::{homeserver as synapse, unique};

/// A user registered through Synapse's shared-secret admin API; their user id.
async fn register(localpart: &str, password: &str) -> String {
    let (url, secret) = synapse();
    hermes_fakes::synapse::register(&url, &secret, localpart, password, false).await.user_id
}

/// Someone on Matrix, with a matrix-sdk client syncing in the background.
struct Person {
    client: Client,
    user_id: OwnedUserId,
    _store: tempfile::TempDir,
}

impl Person {
    async fn new(prefix: &str) -> Person {
        let (url, _) = synapse();
        let localpart = unique(prefix);
        let password = format!("pw-{localpart}");
        let user_id = register(&localpart, &password).await;
        let store = tempfile::tempdir().unwrap();
        let client = Client::builder().homeserver_url(&url).sqlite_store(store.path(), None).build().await.unwrap();
        client.matrix_auth().login_username(&user_id, &password).send().await.unwrap();
        client.sync_once(SyncSettings::default().timeout(Duration::ZERO)).await.unwrap();
        Person { client, user_id: user_id.try_into().unwrap(), _store: store }
    }

    /// Catch up with the homeserver (room state, keys for encrypted messages). A background
    /// sync task would be simpler, but its future is too deep for the compiler to prove Send.
    async fn catch_up(&self) {
        self.client.sync_once(SyncSettings::default().timeout(Duration::ZERO)).await.unwrap();
    }

    fn id(&self) -> String {
        self.user_id.to_string()
    }

    async fn create_room(&self, invite: &[&str], direct: bool, encrypted: bool) -> OwnedRoomId {
        use matrix_sdk::ruma::api::client::room::create_room::v3::{Request, RoomPreset};
        let mut request = Request::new();
        request.invite = invite.iter().map(|u| OwnedUserId::try_from(*u).unwrap()).collect();
        request.is_direct = direct;
        request.preset = Some(RoomPreset::PrivateChat);
        if encrypted {
            let state = json!({"type": "m.room.encryption", "state_key": "", "content": {"algorithm": "m.megolm.v1.aes-sha2"}});
            request.initial_state = vec![serde_json::from_value(state).unwrap()];
        }
        self.client.create_room(request).await.unwrap().room_id().to_owned()
    }

    async fn join(&self, room: &OwnedRoomId) {
        let deadline = Instant::now() + WAIT;
        while {
            self.catch_up().await;
            self.client.join_room_by_id(room).await.is_err()
        } {
            assert!(Instant::now() < deadline, "{} could not join {room}", self.user_id);
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }

    async fn send(&self, room: &OwnedRoomId, content: Value) -> String {
        self.catch_up().await;
        let room = self.client.get_room(room).unwrap();
        room.send_raw("m.room.message", content).await.unwrap().response.event_id.to_string()
    }

    async fn say(&self, room: &OwnedRoomId, text: &str) -> String {
        self.send(room, json!({"msgtype": "m.text", "body": text})).await
    }

    async fn membership(&self, room: &OwnedRoomId, user: &str) -> Value {
        let (url, _) = synapse();
        let endpoint = format!("{url}/_matrix/client/v3/rooms/{room}/state/m.room.member/{user}");
        let token = self.client.access_token().unwrap();
        let got: Value = reqwest::Client::new().get(endpoint).bearer_auth(token).send().await.unwrap().json().await.unwrap_or(Value::Null);
        got["membership"].clone()
    }

    async fn wait_membership(&self, room: &OwnedRoomId, user: &str, membership: &str) {
        let deadline = Instant::now() + WAIT;
        while self.membership(room, user).await != membership {
            assert!(Instant::now() < deadline, "{user} never became {membership} in {room}");
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }

    /// The room's events as this person reads them (decrypted), oldest first.
    async fn events(&self, room: &OwnedRoomId) -> Vec<Value> {
        self.catch_up().await;
        let room = self.client.get_room(room).unwrap();
        let mut options = MessagesOptions::backward();
        options.limit = 100u32.into();
        let mut events: Vec<Value> =
            room.messages(options).await.unwrap().chunk.iter().map(|e| serde_json::from_str(e.raw().json().get()).unwrap()).collect();
        events.reverse();
        events
    }
}

/// A message of the bot as a person sees it: its latest text (edits applied) and its thread.
#[derive(Debug, Clone)]
struct Shown {
    event_id: String,
    text: String,
    thread: Option<String>,
}

/// The bot's messages in the room, edits applied, oldest first.
async fn shown(person: &Person, room: &OwnedRoomId, bot: &str) -> Vec<Shown> {
    let events = person.events(room).await;
    let mut messages: Vec<Shown> = Vec::new();
    let mut edits: BTreeMap<String, String> = BTreeMap::new();
    for event in events.iter().filter(|e| e["sender"] == bot && e["type"] == "m.room.message") {
        let content = &event["content"];
        if content["m.relates_to"]["rel_type"] == "m.replace" {
            let target = content["m.relates_to"]["event_id"].as_str().unwrap_or_default().to_string();
            edits.insert(target, content["m.new_content"]["body"].as_str().unwrap_or_default().to_string());
            continue;
        }
        let thread =
            (content["m.relates_to"]["rel_type"] == "m.thread").then(|| content["m.relates_to"]["event_id"].as_str().unwrap().to_string());
        messages.push(Shown {
            event_id: event["event_id"].as_str().unwrap().to_string(),
            text: content["body"].as_str().unwrap_or_default().to_string(),
            thread,
        });
    }
    for message in &mut messages {
        if let Some(text) = edits.get(&message.event_id) {
            message.text = text.clone();
        }
    }
    messages
}

/// The bot account and a gateway configured for it.
struct Bot {
    user_id: String,
    password: String,
}

impl Bot {
    async fn new() -> Bot {
        let localpart = unique("hermesbot");
        let password = format!("pw-{localpart}");
        Bot { user_id: register(&localpart, &password).await, password }
    }

    fn setup(&self, llm: &FakeLlm, allowed: &[&str], extra_yaml: &str) -> Setup {
        let (url, _) = synapse();
        let mut setup = Setup::new(&llm.base_url());
        setup.set("WEBHOOK_ENABLED", "false");
        setup.set("MATRIX_HOMESERVER", &url);
        setup.set("MATRIX_USER_ID", &self.user_id);
        setup.set("MATRIX_PASSWORD", &self.password);
        setup.set("MATRIX_ALLOWED_USERS", &allowed.join(","));
        setup.write_config(&format!("platforms:\n  matrix:\n    require_mention: true\n{extra_yaml}"));
        setup
    }
}

/// Wait until the bot's messages in `room` satisfy `done`.
async fn wait_shown(
    person: &Person,
    room: &OwnedRoomId,
    bot: &str,
    gateway: &Gateway,
    what: &str,
    done: impl Fn(&[Shown]) -> bool,
) -> Vec<Shown> {
    let deadline = Instant::now() + WAIT;
    loop {
        let messages = shown(person, room, bot).await;
        if done(&messages) {
            return messages;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; the bot posted {messages:#?}\n--- gateway log ---\n{}",
            gateway.log_text()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

fn count(messages: &[Shown], text: &str) -> usize {
    messages.iter().filter(|m| m.text == text).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matrix_invite_dm_encrypted_room_thread_and_a_strangers_invite() {
    let bot = Bot::new().await;
    let alice = Person::new("alice").await;
    let carol = Person::new("carol").await;
    let mallory = Person::new("mallory").await;
    let llm = FakeLlm::start().await;
    let setup = bot.setup(&llm, &[&alice.id(), &carol.id()], "");
    let gateway = setup.start().await;

    // Alice invites the bot to a DM: it joins and answers.
    let dm = alice.create_room(&[&bot.user_id], true, false).await;
    alice.wait_membership(&dm, &bot.user_id, "join").await;
    alice.say(&dm, "hello there").await;
    wait_shown(&alice, &dm, &bot.user_id, &gateway, "the DM answer", |m| count(m, "echo: hello there") == 1).await;

    // An encrypted DM: the bot reads it and its answer is encrypted too.
    let secret = alice.create_room(&[&bot.user_id], true, true).await;
    alice.wait_membership(&secret, &bot.user_id, "join").await;
    alice.say(&secret, "a secret hello").await;
    wait_shown(&alice, &secret, &bot.user_id, &gateway, "the encrypted answer", |m| count(m, "echo: a secret hello") == 1).await;
    let raw_types: Vec<Value> = {
        let (url, _) = synapse();
        let token = alice.client.access_token().unwrap();
        let endpoint = format!("{url}/_matrix/client/v3/rooms/{secret}/messages?dir=b&limit=50");
        let page: Value = reqwest::Client::new().get(endpoint).bearer_auth(token).send().await.unwrap().json().await.unwrap();
        page["chunk"].as_array().unwrap().iter().filter(|e| e["sender"] == bot.user_id.as_str()).map(|e| e["type"].clone()).collect()
    };
    assert!(
        raw_types.iter().any(|t| t == "m.room.encrypted") && !raw_types.iter().any(|t| t == "m.room.message"),
        "on the wire the bot's messages are encrypted: {raw_types:?}"
    );

    // A room with three people: only a mention is answered, in a thread under it; the thread
    // then continues without a mention.
    let group = alice.create_room(&[&bot.user_id, &carol.id()], false, false).await;
    carol.join(&group).await;
    alice.wait_membership(&group, &bot.user_id, "join").await;
    carol.say(&group, "nobody asked you").await;
    let mention =
        alice.send(&group, json!({"msgtype": "m.text", "body": "bot: what is up", "m.mentions": {"user_ids": [bot.user_id]}})).await;
    let posted =
        wait_shown(&alice, &group, &bot.user_id, &gateway, "the thread answer", |m| m.iter().any(|s| s.text.contains("what is up"))).await;
    let answer = posted.iter().find(|s| s.text.contains("what is up")).unwrap();
    assert_eq!(answer.thread.as_deref(), Some(mention.as_str()), "the answer is in a thread under the mention");
    alice
        .send(&group, json!({"msgtype": "m.text", "body": "tell me more",
            "m.relates_to": {"rel_type": "m.thread", "event_id": mention, "is_falling_back": true, "m.in_reply_to": {"event_id": answer.event_id}}}))
        .await;
    let posted = wait_shown(&alice, &group, &bot.user_id, &gateway, "the thread follow-up", |m| count(m, "echo: tell me more") == 1).await;
    assert!(posted.iter().filter(|s| s.text.starts_with("echo:")).all(|s| s.thread.as_deref() == Some(mention.as_str())), "{posted:#?}");
    assert!(posted.iter().all(|s| !s.text.contains("nobody asked you")), "{posted:#?}");
    assert!(llm.requests().iter().all(|r| r.messages().iter().all(|(_, t)| !t.contains("nobody asked you"))));

    // A stranger's invite is rejected, never joined.
    let trap = mallory.create_room(&[&bot.user_id], true, false).await;
    mallory.wait_membership(&trap, &bot.user_id, "leave").await;
    assert!(gateway.log_text().contains("rejected an invite"), "the rejection is logged");
}

fn terminal(id: &str, command: &str) -> ToolCall {
    ToolCall::new(id, "terminal", json!({ "command": command }).to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matrix_an_approval_is_resolved_by_a_reaction() {
    let bot = Bot::new().await;
    let alice = Person::new("alice").await;
    let llm = FakeLlm::start().await;
    let setup = bot.setup(&llm, &[&alice.id()], "approvals:\n  mode: manual\n");
    let gateway = setup.start().await;
    let dm = alice.create_room(&[&bot.user_id], true, true).await;
    alice.wait_membership(&dm, &bot.user_id, "join").await;

    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::create_dir_all(victim.join("inner")).unwrap();
    let command = format!("rm -rf {}", victim.display());
    llm.push(Reply::ToolCalls(vec![terminal("t1", &command)]));
    llm.push(Reply::text("cleaned up"));
    alice.say(&dm, "clean up the old data").await;
    let posted =
        wait_shown(&alice, &dm, &bot.user_id, &gateway, "the approval prompt", |m| m.iter().any(|s| s.text.contains("requires approval")))
            .await;
    let prompt = posted.iter().find(|s| s.text.contains("requires approval")).unwrap().clone();
    assert!(prompt.text.contains("✅") && prompt.text.contains("❌"), "the prompt offers its reactions: {}", prompt.text);
    assert!(victim.exists());

    alice.catch_up().await;
    let room = alice.client.get_room(&dm).unwrap();
    let reaction = json!({"m.relates_to": {"rel_type": "m.annotation", "event_id": prompt.event_id, "key": "✅"}});
    room.send_raw("m.reaction", reaction).await.unwrap();
    wait_shown(&alice, &dm, &bot.user_id, &gateway, "the agent's answer", |m| m.iter().any(|s| s.text.contains("cleaned up"))).await;
    assert!(!victim.exists(), "the command approved by the reaction ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matrix_a_restart_mid_conversation_answers_everything_once() {
    let bot = Bot::new().await;
    let alice = Person::new("alice").await;
    let llm = FakeLlm::start().await;
    let setup = bot.setup(&llm, &[&alice.id()], "");
    let mut gateway = setup.start().await;
    let dm = alice.create_room(&[&bot.user_id], true, true).await;
    alice.wait_membership(&dm, &bot.user_id, "join").await;
    alice.say(&dm, "first question").await;
    wait_shown(&alice, &dm, &bot.user_id, &gateway, "the first answer", |m| count(m, "echo: first question") == 1).await;

    gateway.signal(libc::SIGTERM).await;
    alice.say(&dm, "asked while you were away").await;
    let gateway = setup.start().await;
    alice.say(&dm, "and after you came back").await;
    let posted = wait_shown(&alice, &dm, &bot.user_id, &gateway, "both later answers", |m| {
        count(m, "echo: asked while you were away") == 1 && count(m, "echo: and after you came back") == 1
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let posted_later = shown(&alice, &dm, &bot.user_id).await;
    assert_eq!(posted_later.len(), posted.len(), "nothing more arrived: {posted_later:#?}");
    for text in ["echo: first question", "echo: asked while you were away", "echo: and after you came back"] {
        assert_eq!(count(&posted_later, text), 1, "{text} answered exactly once: {posted_later:#?}");
    }
    assert_eq!(
        llm.requests().iter().filter(|r| r.last_user_text().as_deref() == Some("first question")).count(),
        1,
        "the model was asked once"
    );
}

/// The code in the pairing reply (`Here's your pairing code: `CODE``), checked against the
/// command the reply tells the owner to run.
fn pairing_code(text: &str) -> String {
    let start = text.find("pairing code: `").map(|i| i + "pairing code: `".len()).unwrap_or_else(|| panic!("no code in {text:?}"));
    let code: String = text[start..].chars().take_while(|c| *c != '`').collect();
    assert_eq!(code.len(), 8, "{text:?}");
    assert!(text.contains(&format!("hermes pairing approve matrix {code}")), "{text:?}");
    code
}

/// No allowlist: Matrix offers pairing. A stranger's DM invite is accepted only to hand out the
/// code (their invite to a group room is still rejected); nothing they write reaches the model
/// until `hermes pairing approve matrix CODE`, and then their next message is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matrix_a_stranger_pairs_through_a_dm_invite() {
    let bot = Bot::new().await;
    let mallory = Person::new("mallory").await;
    let llm = FakeLlm::start().await;
    let setup = bot.setup(&llm, &[], "");
    let gateway = setup.start().await;

    let group = mallory.create_room(&[&bot.user_id], false, false).await;
    mallory.wait_membership(&group, &bot.user_id, "leave").await;
    assert!(gateway.log_text().contains("only a DM invite is accepted for pairing"), "the rejection says why");

    let dm = mallory.create_room(&[&bot.user_id], true, false).await;
    mallory.wait_membership(&dm, &bot.user_id, "join").await;
    mallory.say(&dm, "hello, who are you?").await;
    let posted = wait_shown(&mallory, &dm, &bot.user_id, &gateway, "the pairing code", |m| !m.is_empty()).await;
    assert_eq!(posted.len(), 1, "one reply, the code: {posted:#?}");
    let code = pairing_code(&posted[0].text);
    assert!(llm.requests().is_empty(), "nothing the stranger wrote reached the model");

    let (status, out, err) = setup.run(&["pairing", "approve", "matrix", &code]);
    assert!(status.success(), "approve: {out}{err}");
    mallory.say(&dm, "now?").await;
    wait_shown(&mallory, &dm, &bot.user_id, &gateway, "the answer after approval", |m| count(m, "echo: now?") == 1).await;
    assert_eq!(llm.requests().len(), 1, "only the message after the approval reached the model");
    assert!(llm.requests().iter().all(|r| r.messages().iter().all(|(_, t)| !t.contains("who are you"))));
}

/// `person` reacts to `event_id` with `key`.
async fn react(person: &Person, room: &OwnedRoomId, event_id: &str, key: &str) {
    person.catch_up().await;
    let reaction = json!({"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}});
    person.client.get_room(room).unwrap().send_raw("m.reaction", reaction).await.unwrap();
}

/// A reaction on an approval prompt by someone in the room the gateway does not allow is refused
/// with a reply in the prompt's thread, approves nothing, and the allowed user's reaction still
/// works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matrix_a_strangers_reaction_on_a_prompt_is_refused_in_its_thread() {
    const NOT_ALLOWED: &str = "⛔ Not allowed: you are not an allowed user of this bot.";
    let bot = Bot::new().await;
    let alice = Person::new("alice").await;
    let mallory = Person::new("mallory").await;
    let llm = FakeLlm::start().await;
    let setup = bot.setup(&llm, &[&alice.id()], "approvals:\n  mode: manual\n");
    let gateway = setup.start().await;
    let room = alice.create_room(&[&bot.user_id, &mallory.id()], false, false).await;
    mallory.join(&room).await;
    alice.wait_membership(&room, &bot.user_id, "join").await;

    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    llm.push(Reply::ToolCalls(vec![terminal("t1", &format!("rm -rf {}", victim.display()))]));
    llm.push(Reply::text("cleaned up"));
    let ask = json!({"msgtype": "m.text", "body": "bot: clean up the old data", "m.mentions": {"user_ids": [bot.user_id]}});
    let mention = alice.send(&room, ask).await;
    let posted = wait_shown(&alice, &room, &bot.user_id, &gateway, "the approval prompt", |m| {
        m.iter().any(|s| s.text.contains("requires approval"))
    })
    .await;
    let prompt = posted.iter().find(|s| s.text.contains("requires approval")).unwrap().clone();
    assert_eq!(prompt.thread.as_deref(), Some(mention.as_str()), "the prompt is in the thread under the mention");

    react(&mallory, &room, &prompt.event_id, "✅").await;
    let posted = wait_shown(&alice, &room, &bot.user_id, &gateway, "the refusal", |m| count(m, NOT_ALLOWED) == 1).await;
    let refusal = posted.iter().find(|s| s.text == NOT_ALLOWED).unwrap();
    assert_eq!(refusal.thread.as_deref(), Some(mention.as_str()), "the refusal is in the prompt's thread");
    assert!(victim.exists(), "the stranger's reaction approved nothing");

    react(&alice, &room, &prompt.event_id, "✅").await;
    let posted = wait_shown(&alice, &room, &bot.user_id, &gateway, "the agent's answer", |m| count(m, "cleaned up") == 1).await;
    assert!(!victim.exists(), "the allowed user's reaction approved the command");
    assert_eq!(count(&posted, NOT_ALLOWED), 1, "refused once: {posted:#?}");
}

/// 150 messages sent while the gateway is down: on restart from its stored sync token the DM's
/// timeline is limited (100 events), and the rest are fetched with `/messages`; every one
/// reaches the inbox once and is handled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matrix_a_burst_of_150_messages_while_away_reaches_the_inbox_whole_and_once() {
    const BURST: usize = 150;
    let bot = Bot::new().await;
    let alice = Person::new("alice").await;
    let llm = FakeLlm::start().await;
    let setup = bot.setup(&llm, &[&alice.id()], "");
    let mut gateway = setup.start().await;
    let dm = alice.create_room(&[&bot.user_id], true, false).await;
    alice.wait_membership(&dm, &bot.user_id, "join").await;
    alice.say(&dm, "before the burst").await;
    wait_shown(&alice, &dm, &bot.user_id, &gateway, "the first answer", |m| count(m, "echo: before the burst") == 1).await;

    gateway.signal(libc::SIGTERM).await;
    alice.catch_up().await;
    let room = alice.client.get_room(&dm).unwrap();
    for n in 1..=BURST {
        room.send_raw("m.room.message", json!({"msgtype": "m.text", "body": format!("burst {n}")})).await.unwrap();
    }
    let gateway = setup.start().await;

    let db = crate::support::open_db(&setup.state_db());
    let texts = || -> Vec<String> {
        let mut statement =
            db.prepare("SELECT json_extract(payload, '$.text') FROM inbox WHERE platform = 'matrix' AND state = 'done'").unwrap();
        statement.query_map([], |row| row.get::<_, String>(0)).unwrap().map(Result::unwrap).collect()
    };
    let all_done = crate::support::eventually(WAIT, || texts().iter().filter(|t| t.starts_with("burst ")).count() >= BURST).await;
    let texts = texts();
    assert!(all_done, "only {} of the burst were handled:\n{}", texts.len(), gateway.log_text());
    for n in 1..=BURST {
        let text = format!("burst {n}");
        assert_eq!(texts.iter().filter(|t| **t == text).count(), 1, "{text} reached the inbox once");
    }
    assert_eq!(texts.iter().filter(|t| t.as_str() == "before the burst").count(), 1);
    assert!(gateway.log_text().contains("fetched the events a limited sync left out"), "the gap was filled from /messages");
}

/// A message whose room key comes late is answered once the key is there, and once. The key
/// travels as a to-device event in the bot's `/sync`; the proxy in front of Synapse holds those
/// back while Alice sends from a fresh megolm session, so the bot reads the message before its
/// key, then delivers them in a later sync (woken by Alice's typing notice).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matrix_a_message_whose_key_arrives_late_is_answered_once() {
    let bot = Bot::new().await;
    let alice = Person::new("alice").await;
    let llm = FakeLlm::start().await;
    let (url, _) = synapse();
    let proxy = hermes_fakes::proxy::FaultProxy::start(&url).await.unwrap();
    let mut setup = bot.setup(&llm, &[&alice.id()], "");
    setup.set("MATRIX_HOMESERVER", &proxy.url());
    let gateway = setup.start().await;
    let dm = alice.create_room(&[&bot.user_id], true, true).await;
    alice.wait_membership(&dm, &bot.user_id, "join").await;
    alice.say(&dm, "first, with its key").await;
    wait_shown(&alice, &dm, &bot.user_id, &gateway, "the first answer", |m| count(m, "echo: first, with its key") == 1).await;

    proxy.hold_to_device();
    alice.catch_up().await;
    let room = alice.client.get_room(&dm).unwrap();
    // A new megolm session: its key goes out to the bot now, and is held back.
    room.discard_room_key().await.unwrap();
    room.send_raw("m.room.message", json!({"msgtype": "m.text", "body": "a late secret"})).await.unwrap();
    let unreadable = crate::support::eventually(WAIT, || gateway.log_text().contains("could not decrypt a Matrix message")).await;
    assert!(unreadable, "the bot read the message before its key:\n{}", gateway.log_text());
    let asked = || llm.requests().iter().filter(|r| r.last_user_text().as_deref() == Some("a late secret")).count();
    assert_eq!(asked(), 0, "nothing to answer without the key");

    assert!(proxy.release_to_device() > 0, "the room key was held back");
    room.typing_notice(true).await.unwrap();
    wait_shown(&alice, &dm, &bot.user_id, &gateway, "the late answer", |m| count(m, "echo: a late secret") == 1).await;
    room.typing_notice(false).await.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let posted = shown(&alice, &dm, &bot.user_id).await;
    assert_eq!(count(&posted, "echo: a late secret"), 1, "answered once: {posted:#?}");
    assert_eq!(asked(), 1, "the model was asked once");
    assert!(gateway.log_text().contains("a message decrypted after its key arrived late is answered now"), "answered on the key's arrival");
}
