//! The Discord peer: the fake Discord of `hermes-fakes`, reached by the gateway's serenity client
//! (REST and the gateway WebSocket).

use crate::peer::{Chat, ChatPeer, Media, MediaKind, Posted};
use crate::support::Setup;
use hermes_fakes::discord::{DcAttachment, DcUser, FakeDiscord, Fault, FaultScope};
use serde_json::json;
use std::sync::Mutex;
use std::time::Duration;

/// Discord's message flag that switches link embeds off.
const SUPPRESS_EMBEDS: u64 = 1 << 2;
/// Discord's message flag of a voice message.
const IS_VOICE_MESSAGE: u64 = 1 << 13;

pub(crate) struct DiscordPeer {
    pub fake: FakeDiscord,
    /// The shared guild channel and its two threads.
    pub general: u64,
    threads: [u64; 2],
    last_message: Mutex<Option<u64>>,
}

impl DiscordPeer {
    pub(crate) fn dc_user(&self, n: u32) -> DcUser {
        self.fake.user(2000 + u64::from(n), &format!("user{n}"))
    }

    pub(crate) fn allowed_users() -> String {
        (1..=50).map(|n| (2000 + n).to_string()).collect::<Vec<_>>().join(",")
    }

    /// Users write once the bot has a session (events then reach it, at once or on RESUME).
    pub(crate) async fn session(&self) {
        assert!(self.fake.wait_until(Duration::from_secs(30), |f| f.has_session()).await, "the bot identified to the gateway");
    }

    fn remember(&self, id: u64) {
        *self.last_message.lock().unwrap() = Some(id);
    }

    fn channel_of(chat: &Chat) -> u64 {
        chat.thread_id.as_deref().unwrap_or(&chat.chat_id).parse().expect("numeric channel id")
    }
}

impl ChatPeer for DiscordPeer {
    const PLATFORM: &'static str = "discord";
    const MAX_LEN: usize = 2000;
    const PARSES_FORMATTING: bool = false;
    const DIALECT: hermes_adapter::MarkdownDialect = hermes_adapter::MarkdownDialect::Markdown;
    const UNIT: hermes_adapter::LengthUnit = hermes_adapter::LengthUnit::Chars;

    async fn start() -> Self {
        let fake = FakeDiscord::start().await.expect("start the fake Discord");
        let general = fake.text_channel("general");
        let threads = [fake.thread(general, "thread one"), fake.thread(general, "thread two")];
        DiscordPeer { fake, general, threads, last_message: Mutex::new(None) }
    }

    fn configure(&self, setup: &mut Setup) -> String {
        setup.set("DISCORD_BOT_TOKEN", &self.fake.token());
        setup.set("DISCORD_API_BASE_URL", &self.fake.api_url());
        setup.set("DISCORD_ALLOWED_USERS", &Self::allowed_users());
        "  discord:\n    require_mention: true\n".to_string()
    }

    fn measure(text: &str) -> usize {
        text.chars().count()
    }

    async fn dm(&self, user: u32, text: &str) -> Chat {
        self.session().await;
        let injected = self.fake.dm(&self.dc_user(user), text);
        self.remember(injected.id);
        Chat { chat_id: injected.channel_id.to_string(), thread_id: None }
    }

    async fn reply(&self, user: u32, chat: &Chat, message_id: &str, text: &str) {
        self.session().await;
        let (Ok(channel), Ok(message_id)) = (chat.chat_id.parse(), message_id.parse()) else {
            panic!("not a Discord channel or message id")
        };
        let injected = self.fake.reply(channel, &self.dc_user(user), message_id, text);
        self.remember(injected.id);
    }

    async fn group(&self, user: u32, text: &str, mention: bool) -> Chat {
        self.session().await;
        let injected = self.fake.channel_message(self.general, &self.dc_user(user), text, mention);
        self.remember(injected.id);
        Chat { chat_id: self.general.to_string(), thread_id: None }
    }

    async fn thread(&self, user: u32, thread: u32, text: &str) -> Chat {
        self.session().await;
        let channel = self.threads[(thread as usize - 1) % self.threads.len()];
        let injected = self.fake.channel_message(channel, &self.dc_user(user), text, false);
        self.remember(injected.id);
        Chat { chat_id: self.general.to_string(), thread_id: Some(channel.to_string()) }
    }

    fn posted(&self, chat: &Chat) -> Vec<Posted> {
        self.fake
            .sent_to(Self::channel_of(chat))
            .into_iter()
            .filter(|m| !m.deleted)
            .map(|m| Posted {
                id: m.id.to_string(),
                text: m.content.clone(),
                raw: m.content.clone(),
                previews_off: m.flags & SUPPRESS_EMBEDS != 0,
                edits: m.edits.len(),
                styles: Vec::new(),
            })
            .collect()
    }

    fn files(&self, chat: &Chat) -> Vec<String> {
        self.fake.sent_to(Self::channel_of(chat)).into_iter().flat_map(|m| m.files.into_iter().map(|(name, _)| name)).collect()
    }

    fn typing_seen(&self, chat: &Chat) -> usize {
        self.fake.typing(Self::channel_of(chat))
    }

    fn redeliver_last(&self) {
        let id = self.last_message.lock().unwrap().expect("a message was injected");
        self.fake.redeliver(id);
    }

    fn rate_limit_sends(&self, n: usize) {
        self.fake.fail_next(FaultScope::Create, n, Fault::RateLimited { retry_after: 1.0 });
    }

    fn reject_formatting(&self, _n: usize) -> bool {
        // Discord shows markdown as typed and never refuses it.
        false
    }

    async fn interrupt_connection(&self) {
        assert!(self.fake.wait_connected(Duration::from_secs(20)).await, "the bot was connected");
        assert!(self.fake.drop_connection());
        // What is said now is kept in the session and replayed when the bot resumes.
    }

    fn inject_junk(&self) {
        let user = self.dc_user(10);
        let bot_user = self.fake.user(999, "another-bot");
        // An event from a newer API, a message with a missing author, a sticker-only message,
        // a message from another bot, an interaction kind the bot does not handle.
        self.fake.dispatch_raw("SOME_FUTURE_EVENT", json!({"whatever": [1, 2, 3]}));
        self.fake.dispatch_raw("MESSAGE_CREATE", json!({"id": "1", "channel_id": "2"}));
        self.fake
            .dispatch_raw("TYPING_START", json!({"channel_id": self.general.to_string(), "user_id": user.id.to_string(), "timestamp": 0}));
        let dm = self.fake.dm_channel(&user);
        self.fake.dispatch_raw(
            "MESSAGE_CREATE",
            json!({"id": "3", "channel_id": dm.to_string(), "content": "", "timestamp": "2026-01-01T00:00:00.000Z",
                   "edited_timestamp": null, "tts": false, "mention_everyone": false, "mentions": [], "mention_roles": [],
                   "attachments": [], "embeds": [], "pinned": false, "type": 0, "sticker_items": [{"id": "5", "name": "wave", "format_type": 1}],
                   "author": {"id": user.id.to_string(), "username": "user10", "discriminator": "0", "avatar": null}}),
        );
        let bot_dm = self.fake.dm_channel(&bot_user);
        self.fake.dispatch_raw(
            "MESSAGE_CREATE",
            json!({"id": "4", "channel_id": bot_dm.to_string(), "content": "I am a bot", "timestamp": "2026-01-01T00:00:00.000Z",
                   "edited_timestamp": null, "tts": false, "mention_everyone": false, "mentions": [], "mention_roles": [],
                   "attachments": [], "embeds": [], "pinned": false, "type": 0,
                   "author": {"id": bot_user.id.to_string(), "username": "another-bot", "discriminator": "0", "avatar": null, "bot": true}}),
        );
        self.fake.dispatch_raw("INTERACTION_CREATE", json!({"id": "6", "application_id": "7", "type": 1, "token": "t", "version": 1}));
    }

    async fn dm_media(&self, user: u32, media: &Media, caption: &str) -> Chat {
        self.session().await;
        let mut file = DcAttachment::file(&media.file_name, media.mime, media.bytes.clone());
        file.declared_size = media.declared_bytes;
        // Discord's client records voice messages with a duration and a waveform; without a
        // declared duration it is an ordinary audio file.
        if let (MediaKind::Voice, Some(secs)) = (media.kind, media.declared_secs) {
            file.duration_secs = Some(f64::from(secs));
            file.waveform = Some("AAAAAAAAAAAA".to_string());
        }
        let injected = self.fake.dm_files(&self.dc_user(user), caption, &[file]);
        self.remember(injected.id);
        Chat { chat_id: injected.channel_id.to_string(), thread_id: None }
    }

    fn media_bytes_served(&self) -> u64 {
        self.fake.cdn_bytes_served()
    }

    fn voice_sent(&self, chat: &Chat) -> Vec<Vec<u8>> {
        self.fake
            .sent_to(Self::channel_of(chat))
            .into_iter()
            .filter(|m| m.flags & IS_VOICE_MESSAGE != 0)
            .flat_map(|m| m.uploads.into_iter().map(|u| u.bytes))
            .collect()
    }
}
