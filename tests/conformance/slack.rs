//! The Slack peer: the fake Slack of `hermes-fakes`, reached by the gateway's slack-morphism
//! client (Web API) and its Socket Mode connection.

use crate::peer::{Chat, ChatPeer, Media, MediaKind, Posted};
use crate::support::Setup;
use hermes_fakes::slack::{FakeSlack, SlFault, SlScope, SlUser, SlUserFile};
use serde_json::json;
use std::sync::Mutex;
use std::time::Duration;

/// The chunk limit the suite runs Slack with: Slack's own 39,000 would fit each long answer
/// in one message, and splitting is what the suite checks.
pub(crate) const CHUNK_LIMIT: usize = 4000;

pub(crate) struct SlackPeer {
    pub fake: FakeSlack,
    /// The shared channel.
    pub general: String,
    /// The two threads of the channel, by the ts of the mention that started each (a thread
    /// starts when a user mentions the bot in the channel; the answer opens it).
    threads: Mutex<[Option<String>; 2]>,
    last_event: Mutex<Option<String>>,
}

impl SlackPeer {
    pub(crate) fn sl_user(&self, n: u32) -> SlUser {
        self.fake.user(&Self::user_id(n), &format!("user{n}"))
    }

    pub(crate) fn user_id(n: u32) -> String {
        format!("U{:04}", 100 + n)
    }

    pub(crate) fn allowed_users() -> String {
        (1..=50).map(Self::user_id).collect::<Vec<_>>().join(",")
    }

    /// Users write once the bot's socket is up (Slack would queue and retry otherwise too).
    pub(crate) async fn connected(&self) {
        assert!(self.fake.wait_connected(Duration::from_secs(30)).await, "the bot opened its Socket Mode connection");
    }

    fn remember(&self, event_ids: &[String]) {
        if let Some(first) = event_ids.first() {
            *self.last_event.lock().unwrap() = Some(first.clone());
        }
    }
}

impl ChatPeer for SlackPeer {
    const PLATFORM: &'static str = "slack";
    const MAX_LEN: usize = CHUNK_LIMIT;
    const PARSES_FORMATTING: bool = true;
    const DIALECT: hermes_adapter::MarkdownDialect = hermes_adapter::MarkdownDialect::SlackMrkdwn;
    const UNIT: hermes_adapter::LengthUnit = hermes_adapter::LengthUnit::Chars;
    const SHOWS_TYPING: bool = false;
    const TABS_SHOWN_AS_SPACES: bool = false;

    async fn start() -> Self {
        let fake = FakeSlack::start().await.expect("start the fake Slack");
        let general = fake.channel("general");
        SlackPeer { fake, general, threads: Mutex::new([None, None]), last_event: Mutex::new(None) }
    }

    fn configure(&self, setup: &mut Setup) -> String {
        setup.set("SLACK_BOT_TOKEN", &self.fake.bot_token());
        setup.set("SLACK_APP_TOKEN", &self.fake.app_token());
        setup.set("SLACK_API_BASE_URL", &self.fake.api_url());
        setup.set("SLACK_ALLOWED_USERS", &Self::allowed_users());
        format!("  slack:\n    require_mention: true\n    chunk_limit: {CHUNK_LIMIT}\n")
    }

    fn measure(text: &str) -> usize {
        text.chars().count()
    }

    async fn dm(&self, user: u32, text: &str) -> Chat {
        self.connected().await;
        let injected = self.fake.dm(&self.sl_user(user), text);
        self.remember(&injected.event_ids);
        Chat { chat_id: injected.channel, thread_id: None }
    }

    async fn reply(&self, user: u32, chat: &Chat, message_id: &str, text: &str) {
        self.connected().await;
        // Slack's way to answer one message is a thread under it.
        let injected = self.fake.thread_message(&chat.chat_id, message_id, &self.sl_user(user), text, false);
        self.remember(&injected.event_ids);
    }

    async fn group(&self, user: u32, text: &str, mention: bool) -> Chat {
        self.connected().await;
        let injected = self.fake.channel_message(&self.general, &self.sl_user(user), text, mention);
        self.remember(&injected.event_ids);
        Chat { chat_id: self.general.clone(), thread_id: None }
    }

    async fn thread(&self, user: u32, thread: u32, text: &str) -> Chat {
        self.connected().await;
        let slot = (thread as usize - 1) % 2;
        let started = self.threads.lock().unwrap()[slot].clone();
        let (injected, parent) = match started {
            // Inside the thread the bot answers in, no mention is needed.
            Some(parent) => (self.fake.thread_message(&self.general, &parent, &self.sl_user(user), text, false), parent),
            None => {
                let injected = self.fake.channel_message(&self.general, &self.sl_user(user), text, true);
                let parent = injected.ts.clone();
                self.threads.lock().unwrap()[slot] = Some(parent.clone());
                (injected, parent)
            }
        };
        self.remember(&injected.event_ids);
        Chat { chat_id: self.general.clone(), thread_id: Some(parent) }
    }

    fn posted(&self, chat: &Chat) -> Vec<Posted> {
        self.fake
            .sent_to(&chat.chat_id)
            .into_iter()
            .filter(|m| !m.deleted && m.files.is_empty())
            .filter(|m| chat.thread_id.is_none() || m.thread_ts == chat.thread_id)
            .map(|m| Posted {
                id: m.ts.clone(),
                text: m.shown.clone(),
                raw: m.text.clone(),
                previews_off: m.unfurl_links == Some(false) && m.unfurl_media == Some(false),
                edits: m.edits.len(),
                styles: m.styles.clone(),
            })
            .collect()
    }

    fn files(&self, chat: &Chat) -> Vec<String> {
        self.fake.sent_to(&chat.chat_id).into_iter().flat_map(|m| m.files.into_iter().map(|(name, _)| name)).collect()
    }

    fn typing_seen(&self, _chat: &Chat) -> usize {
        0
    }

    fn redeliver_last(&self) {
        let id = self.last_event.lock().unwrap().clone().expect("a message was injected");
        assert!(self.fake.redeliver(&id), "the fake knew the event");
    }

    fn rate_limit_sends(&self, n: usize) {
        self.fake.fail_next(SlScope::Method("chat.postMessage".into()), n, SlFault::RateLimited { retry_after_secs: 1 });
    }

    fn reject_formatting(&self, _n: usize) -> bool {
        // Slack shows mrkdwn it cannot read as text and never refuses it.
        false
    }

    async fn interrupt_connection(&self) {
        self.connected().await;
        assert!(self.fake.drop_connections(), "a socket was open to drop");
        // What is said now waits at Slack and is delivered on the next socket.
    }

    fn inject_junk(&self) {
        let user = self.sl_user(10);
        // An event type from a newer API, a message without a user, an edit, another bot's
        // message, an envelope kind the bot does not know, and a frame that is not JSON.
        self.fake.send_raw_envelope(json!({"type": "events_api", "payload": {"type": "event_callback", "team_id": "T0FAKE",
            "api_app_id": "A0FAKE", "event_id": "EvJUNK1", "event_time": 1, "event": {"type": "some_future_event", "x": [1, 2]}}}));
        let dm = self.fake.dm_channel(&user);
        self.fake.send_raw_envelope(json!({"type": "events_api", "payload": {"type": "event_callback", "team_id": "T0FAKE",
            "api_app_id": "A0FAKE", "event_id": "EvJUNK2", "event_time": 1,
            "event": {"type": "message", "channel": dm, "channel_type": "im", "text": "no user", "ts": "1.000001"}}}));
        self.fake.send_raw_envelope(json!({"type": "events_api", "payload": {"type": "event_callback", "team_id": "T0FAKE",
            "api_app_id": "A0FAKE", "event_id": "EvJUNK3", "event_time": 1,
            "event": {"type": "message", "subtype": "message_changed", "channel": dm, "channel_type": "im", "ts": "1.000002",
                      "message": {"type": "message", "user": user.id, "text": "edited", "ts": "1.000000"}}}}));
        self.fake.send_raw_envelope(json!({"type": "events_api", "payload": {"type": "event_callback", "team_id": "T0FAKE",
            "api_app_id": "A0FAKE", "event_id": "EvJUNK4", "event_time": 1,
            "event": {"type": "message", "subtype": "bot_message", "bot_id": "B0OTHER", "channel": dm, "channel_type": "im",
                      "text": "I am a bot", "ts": "1.000003"}}}));
        self.fake.send_raw_envelope(json!({"type": "some_new_envelope_kind", "payload": {"whatever": true}}));
        self.fake.send_raw_frame("this is not json");
    }

    async fn dm_media(&self, user: u32, media: &Media, caption: &str) -> Chat {
        self.connected().await;
        let mut file = SlUserFile::file(&media.file_name, media.mime, media.bytes.clone());
        file.declared_size = media.declared_bytes;
        // A clip recorded in Slack's client: `slack_audio`, with its length.
        if media.kind == MediaKind::Voice {
            file.subtype = Some("slack_audio".to_string());
            file.duration_ms = media.declared_secs.map(|s| u64::from(s) * 1000);
        }
        let from = self.sl_user(user);
        let injected = self.fake.dm_files(&from, caption, &[file]);
        self.remember(&injected.event_ids);
        Chat { chat_id: injected.channel, thread_id: None }
    }

    fn media_bytes_served(&self) -> u64 {
        self.fake.file_bytes_served()
    }

    /// Slack has no voice notes for bots: the audio files the bot uploaded.
    fn voice_sent(&self, chat: &Chat) -> Vec<Vec<u8>> {
        self.fake
            .sent_to(&chat.chat_id)
            .into_iter()
            .flat_map(|m| m.uploaded.into_iter())
            .filter(|f| f.mimetype.as_deref().is_some_and(|t| t.starts_with("audio/")))
            .map(|f| f.bytes)
            .collect()
    }
}
