//! What the Synapse tests share: the homeserver from the environment (failing with the reason
//! when it is missing), users registered through the shared-secret admin API (unique names, so
//! tests never collide), a test user as a second matrix-sdk client, and the bot (the real
//! adapter) running against an inbox that records what it accepted.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, unreachable_pub)]

use async_trait::async_trait;
use hermes_adapter::{
    AcceptError, AcceptOutcome, AdapterContext, AdapterError, HealthReporter, InboundEvent, InboundSink, PlatformAdapter, SessionDirectory,
    SessionDirectoryError, SessionSource, StoredMessage,
};
use hermes_matrix::{Login, MatrixAdapter, MatrixSettings};
use matrix_sdk::Client;
use matrix_sdk::config::SyncSettings;
use matrix_sdk::room::MessagesOptions;
use matrix_sdk::ruma::{OwnedRoomId, OwnedUserId};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub const WAIT: Duration = Duration::from_secs(60);

pub use hermes_fakes::synapse::unique;

/// The homeserver URL and registration secret, from tests/peers/synapse.sh through run.sh.
pub fn synapse() -> (String, String) {
    hermes_fakes::synapse::homeserver()
}

/// Register `localpart` with `password` through Synapse's shared-secret admin API; the user id.
pub async fn register(localpart: &str, password: &str) -> String {
    let (url, secret) = synapse();
    hermes_fakes::synapse::register(&url, &secret, localpart, password, false).await.user_id
}

/// A person using Matrix: a logged-in matrix-sdk client that keeps syncing in the background.
pub struct Person {
    pub client: Client,
    pub user_id: OwnedUserId,
    pub password: String,
    _store: tempfile::TempDir,
}

impl Person {
    pub async fn new(prefix: &str) -> Person {
        let (url, _) = synapse();
        let localpart = unique(prefix);
        let password = format!("pw-{localpart}");
        let user_id = register(&localpart, &password).await;
        let store = tempfile::tempdir().unwrap();
        let client = Client::builder().homeserver_url(&url).sqlite_store(store.path(), None).build().await.unwrap();
        client.matrix_auth().login_username(&user_id, &password).send().await.unwrap();
        // One sync first, so the device keys are up before anyone needs them.
        client.sync_once(SyncSettings::default().timeout(Duration::ZERO)).await.unwrap();
        Person { client, user_id: OwnedUserId::try_from(user_id).unwrap(), password, _store: store }
    }

    /// Catch up with the homeserver (room state, keys for encrypted messages). A background
    /// sync task would be simpler, but its future is too deep for the compiler to prove Send.
    pub async fn catch_up(&self) {
        self.client.sync_once(SyncSettings::default().timeout(Duration::ZERO)).await.unwrap();
    }

    pub fn id(&self) -> String {
        self.user_id.to_string()
    }

    /// A room with `invite`d users; direct and/or encrypted as asked.
    pub async fn create_room(&self, invite: &[&str], direct: bool, encrypted: bool) -> matrix_sdk::Room {
        use matrix_sdk::ruma::api::client::room::create_room::v3::{Request, RoomPreset};
        let mut request = Request::new();
        request.invite = invite.iter().map(|u| OwnedUserId::try_from(*u).unwrap()).collect();
        request.is_direct = direct;
        request.preset = Some(RoomPreset::PrivateChat);
        if encrypted {
            let state = json!({"type": "m.room.encryption", "state_key": "", "content": {"algorithm": "m.megolm.v1.aes-sha2"}});
            request.initial_state = vec![serde_json::from_value(state).unwrap()];
        }
        self.client.create_room(request).await.unwrap()
    }

    /// Accept every pending invite (for third users in a room).
    pub async fn join(&self, room_id: &OwnedRoomId) {
        let deadline = Instant::now() + WAIT;
        loop {
            self.catch_up().await;
            if self.client.join_room_by_id(room_id).await.is_ok() {
                return;
            }
            assert!(Instant::now() < deadline, "{} could not join {room_id}", self.user_id);
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }

    pub fn room(&self, room_id: &OwnedRoomId) -> matrix_sdk::Room {
        self.client.get_room(room_id).unwrap()
    }

    /// Send a message's raw content; its event id.
    pub async fn send(&self, room_id: &OwnedRoomId, content: Value) -> String {
        self.catch_up().await;
        let room = self.room(room_id);
        room.send_raw("m.room.message", content).await.unwrap().response.event_id.to_string()
    }

    pub async fn say(&self, room_id: &OwnedRoomId, text: &str) -> String {
        self.send(room_id, json!({"msgtype": "m.text", "body": text})).await
    }

    /// The room's recent events as this person reads them (decrypted where it can), newest first.
    pub async fn recent(&self, room_id: &OwnedRoomId) -> Vec<(Value, bool)> {
        self.catch_up().await;
        let room = self.room(room_id);
        let mut options = MessagesOptions::backward();
        options.limit = 50u32.into();
        let messages = room.messages(options).await.unwrap();
        messages
            .chunk
            .iter()
            .map(|e| (serde_json::from_str::<Value>(e.raw().json().get()).unwrap(), e.encryption_info().is_some()))
            .collect()
    }

    /// Wait until an event from `sender` matching `pick` is in the room; it and whether it was
    /// encrypted.
    pub async fn wait_for(&self, room_id: &OwnedRoomId, sender: &str, pick: impl Fn(&Value) -> bool) -> (Value, bool) {
        let deadline = Instant::now() + WAIT;
        loop {
            for (event, encrypted) in self.recent(room_id).await {
                if event["sender"] == sender && pick(&event) {
                    return (event, encrypted);
                }
            }
            assert!(Instant::now() < deadline, "no matching event from {sender} in {room_id}");
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }

    /// Wait until `user` is joined to (or has left) the room, as this person sees it.
    pub async fn wait_membership(&self, room_id: &OwnedRoomId, user: &str, membership: &str) {
        let deadline = Instant::now() + WAIT;
        let http = reqwest::Client::new();
        let (url, _) = synapse();
        let token = self.client.access_token().unwrap();
        let endpoint = format!("{url}/_matrix/client/v3/rooms/{room_id}/state/m.room.member/{user}");
        loop {
            let got: Value = http.get(&endpoint).bearer_auth(&token).send().await.unwrap().json().await.unwrap_or(Value::Null);
            if got["membership"] == membership {
                return;
            }
            assert!(Instant::now() < deadline, "{user} never became {membership} in {room_id} (last: {got})");
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
}

/// The inbox as the adapter sees it: it records every accept (duplicates too) and dedups like
/// the real one.
#[derive(Default)]
pub struct Inbox {
    pub accepted: Mutex<Vec<InboundEvent>>,
    seen: Mutex<HashSet<String>>,
    pub offers: AtomicUsize,
}

#[async_trait]
impl InboundSink for Inbox {
    async fn accept(&self, event: InboundEvent) -> Result<AcceptOutcome, AcceptError> {
        self.offers.fetch_add(1, Ordering::Relaxed);
        if !self.seen.lock().unwrap().insert(event.event_id.clone()) {
            return Ok(AcceptOutcome::Duplicate);
        }
        self.accepted.lock().unwrap().push(event);
        Ok(AcceptOutcome::Accepted)
    }
}

impl Inbox {
    pub fn events(&self) -> Vec<InboundEvent> {
        self.accepted.lock().unwrap().clone()
    }

    /// Wait for an accepted event matching `pick`.
    pub async fn wait_for(&self, what: &str, pick: impl Fn(&InboundEvent) -> bool) -> InboundEvent {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(event) = self.events().into_iter().find(|e| pick(e)) {
                return event;
            }
            assert!(Instant::now() < deadline, "the bot never accepted {what}; it accepted {:#?}", self.events());
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

struct NoSessions;

#[async_trait]
impl SessionDirectory for NoSessions {
    async fn open(&self, _: &SessionSource) -> Result<String, SessionDirectoryError> {
        Err(SessionDirectoryError::Storage("not in these tests".into()))
    }
    async fn history(&self, _: &SessionSource, _: usize) -> Result<Option<Vec<StoredMessage>>, SessionDirectoryError> {
        Ok(None)
    }
    async fn close(&self, _: &SessionSource) -> Result<bool, SessionDirectoryError> {
        Ok(false)
    }
}

/// The bot account: its user, password and state folder (kept across restarts).
pub struct BotAccount {
    pub user_id: String,
    pub password: String,
    pub home: tempfile::TempDir,
}

impl BotAccount {
    pub async fn new() -> BotAccount {
        let localpart = unique("bot");
        let password = format!("pw-{localpart}");
        let user_id = register(&localpart, &password).await;
        BotAccount { user_id, password, home: tempfile::tempdir().unwrap() }
    }

    pub fn state_dir(&self) -> PathBuf {
        self.home.path().join("platforms").join("matrix")
    }

    pub fn settings(&self) -> MatrixSettings {
        self.settings_in(self.home.path())
    }

    /// The account's settings with its state under another home: another replica of the bot,
    /// which logs in as another device.
    pub fn settings_in(&self, home: &Path) -> MatrixSettings {
        let (url, _) = synapse();
        let mut settings = MatrixSettings::new(
            url.parse().unwrap(),
            Login::Password(self.password.clone()),
            home.join("platforms").join("matrix"),
            home.join("cache"),
        );
        settings.user_id = Some(self.user_id.clone());
        settings.commands = vec!["status".into(), "approve".into(), "deny".into()];
        settings.sync_timeout = Duration::from_secs(2);
        settings
    }
}

/// The adapter running, with the inbox it feeds.
pub struct Bot {
    pub adapter: Arc<MatrixAdapter>,
    pub inbox: Arc<Inbox>,
    pub health: HealthReporter,
    shutdown: CancellationToken,
    run: JoinHandle<Result<(), AdapterError>>,
}

impl Bot {
    /// Start the adapter; `allowed` are the users the gateway's allowlist lets in.
    pub async fn start(settings: MatrixSettings, allowed: &[String]) -> Bot {
        Self::start_with(settings, allowed, Arc::new(Inbox::default())).await
    }

    pub async fn start_with(settings: MatrixSettings, allowed: &[String], inbox: Arc<Inbox>) -> Bot {
        // RUST_LOG=hermes_matrix=debug shows what the adapter did when a test fails.
        let _ = tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::from_default_env()).with_test_writer().try_init();
        let adapter = Arc::new(MatrixAdapter::new(settings));
        let allowed: HashSet<String> = allowed.iter().cloned().collect();
        let policy = move |source: &SessionSource| source.user_id.as_ref().is_some_and(|u| allowed.contains(u));
        let health = HealthReporter::new();
        let shutdown = CancellationToken::new();
        let ctx =
            AdapterContext::new(inbox.clone(), Arc::new(NoSessions), health.clone(), shutdown.clone()).with_sender_policy(Arc::new(policy));
        let running = adapter.clone();
        let run = tokio::spawn(async move { running.run(ctx).await });
        let bot = Bot { adapter, inbox, health, shutdown, run };
        bot.wait_connected().await;
        bot
    }

    async fn wait_connected(&self) {
        let deadline = Instant::now() + WAIT;
        while !self.health.is_connected() {
            assert!(!self.run.is_finished(), "the adapter's run ended before it connected");
            assert!(Instant::now() < deadline, "the adapter never connected");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Past the first sync (the backlog skip), so what tests send now is new.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    /// Stop the adapter as the gateway does, and wait for its run to end.
    pub async fn stop(self) -> Arc<Inbox> {
        self.shutdown.cancel();
        let result = tokio::time::timeout(WAIT, self.run).await.expect("the run ends after shutdown").unwrap();
        assert!(result.is_ok(), "the run ended with {result:?}");
        self.inbox
    }
}

/// A state file of the bot.
pub fn read_state(dir: &Path, name: &str) -> Option<String> {
    std::fs::read_to_string(dir.join(name)).ok()
}
