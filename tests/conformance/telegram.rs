//! The Telegram peer: the fake Bot API of `hermes-fakes`, reached by the gateway's teloxide client.

use crate::peer::{Chat, ChatPeer, Media, MediaKind, Posted};
use crate::support::Setup;
use hermes_fakes::telegram::{FakeTelegram, Fault, FaultScope, SentKind, TgMedia, TgUser};
use serde_json::json;
use std::sync::Mutex;
use std::time::Duration;

/// The shared forum supergroup and its two topics.
pub(crate) const GROUP: i64 = -1_001_000;
const TOPICS: [i64; 2] = [11, 12];

pub(crate) struct TelegramPeer {
    pub fake: FakeTelegram,
    last_update: Mutex<Option<i64>>,
}

impl TelegramPeer {
    pub(crate) fn tg_user(&self, n: u32) -> TgUser {
        self.fake.user(1000 + i64::from(n), &format!("user{n}"))
    }

    fn remember(&self, update_id: i64) {
        *self.last_update.lock().unwrap() = Some(update_id);
    }

    pub(crate) fn allowed_users() -> String {
        (1..=50).map(|n| (1000 + n).to_string()).collect::<Vec<_>>().join(",")
    }
}

impl ChatPeer for TelegramPeer {
    const PLATFORM: &'static str = "telegram";
    const MAX_LEN: usize = 4096;
    const PARSES_FORMATTING: bool = true;
    const DIALECT: hermes_adapter::MarkdownDialect = hermes_adapter::MarkdownDialect::TelegramHtml;
    const TABS_SHOWN_AS_SPACES: bool = true;
    const UNIT: hermes_adapter::LengthUnit = hermes_adapter::LengthUnit::Utf16;

    async fn start() -> Self {
        let fake = FakeTelegram::start().await.expect("start the fake Telegram");
        fake.group(GROUP, "Team", true);
        fake.topic(GROUP, TOPICS[0], "Topic one");
        fake.topic(GROUP, TOPICS[1], "Topic two");
        TelegramPeer { fake, last_update: Mutex::new(None) }
    }

    fn configure(&self, setup: &mut Setup) -> String {
        setup.set("TELEGRAM_BOT_TOKEN", &self.fake.token());
        setup.set("TELEGRAM_API_BASE_URL", &self.fake.api_url());
        setup.set("TELEGRAM_ALLOWED_USERS", &Self::allowed_users());
        // Limits off: the fake does not throttle by itself; the suite injects throttling.
        "  telegram:\n    require_mention: true\n    send_budget: {global_per_second: 0, per_chat_per_second: 0, group_per_minute: 0}\n"
            .to_string()
    }

    fn measure(text: &str) -> usize {
        text.encode_utf16().count()
    }

    async fn dm(&self, user: u32, text: &str) -> Chat {
        let injected = self.fake.dm(&self.tg_user(user), text);
        self.remember(injected.update_id);
        Chat { chat_id: injected.chat_id.to_string(), thread_id: None }
    }

    async fn reply(&self, user: u32, chat: &Chat, message_id: &str, text: &str) {
        let (Ok(chat_id), Ok(message_id)) = (chat.chat_id.parse(), message_id.parse()) else { panic!("not a Telegram chat or message id") };
        let injected = self.fake.reply(chat_id, &self.tg_user(user), message_id, text);
        self.remember(injected.update_id);
    }

    async fn group(&self, user: u32, text: &str, mention: bool) -> Chat {
        let text = if mention { format!("@{} {text}", self.fake.bot_username()) } else { text.to_string() };
        let injected = self.fake.group_message(GROUP, &self.tg_user(user), &text);
        self.remember(injected.update_id);
        Chat { chat_id: GROUP.to_string(), thread_id: None }
    }

    async fn thread(&self, user: u32, thread: u32, text: &str) -> Chat {
        let topic = TOPICS[(thread as usize - 1) % TOPICS.len()];
        let text = format!("@{} {text}", self.fake.bot_username());
        let injected = self.fake.topic_message(GROUP, topic, &self.tg_user(user), &text);
        self.remember(injected.update_id);
        Chat { chat_id: GROUP.to_string(), thread_id: Some(topic.to_string()) }
    }

    fn posted(&self, chat: &Chat) -> Vec<Posted> {
        let chat_id: i64 = chat.chat_id.parse().expect("numeric chat id");
        self.fake
            .sent_to(chat_id)
            .into_iter()
            .filter(|m| !m.deleted && m.thread_id.map(|t| t.to_string()) == chat.thread_id)
            .map(|m| Posted {
                id: m.message_id.to_string(),
                text: m.text.clone(),
                raw: m.raw_text.clone(),
                previews_off: m.link_preview_disabled,
                edits: m.edits.len(),
                styles: m.entities.iter().filter_map(|e| e.get("type").and_then(|t| t.as_str()).map(str::to_string)).collect(),
            })
            .collect()
    }

    fn files(&self, chat: &Chat) -> Vec<String> {
        let chat_id: i64 = chat.chat_id.parse().expect("numeric chat id");
        self.fake
            .sent_to(chat_id)
            .into_iter()
            .filter_map(|m| match m.kind {
                SentKind::Document { file_name, .. } => Some(file_name),
                SentKind::Photo { .. } => Some("(photo)".to_string()),
                SentKind::Audio { file_name, .. } => Some(file_name),
                SentKind::Voice { .. } => Some("(voice)".to_string()),
                SentKind::Text => None,
            })
            .collect()
    }

    async fn dm_media(&self, user: u32, media: &Media, caption: &str) -> Chat {
        let user = self.tg_user(user);
        let injected = self.fake.media(user.id, &user, &as_telegram_sends(media), Some(caption).filter(|c| !c.is_empty()));
        self.remember(injected.update_id);
        Chat { chat_id: injected.chat_id.to_string(), thread_id: None }
    }

    fn media_bytes_served(&self) -> u64 {
        self.fake.media_bytes_served()
    }

    fn voice_sent(&self, chat: &Chat) -> Vec<Vec<u8>> {
        let chat_id: i64 = chat.chat_id.parse().expect("numeric chat id");
        self.fake.files_sent_to(chat_id).into_iter().filter(|f| f.method == "sendvoice").map(|f| f.bytes).collect()
    }

    fn typing_seen(&self, chat: &Chat) -> usize {
        self.fake.chat_actions(chat.chat_id.parse().expect("numeric chat id")).len()
    }

    fn redeliver_last(&self) {
        let update = self.last_update.lock().unwrap().expect("a message was injected");
        self.fake.redeliver(update);
    }

    fn rate_limit_sends(&self, n: usize) {
        self.fake.fail_next(FaultScope::Method("sendMessage".into()), n, Fault::RateLimited { retry_after: 1 });
    }

    fn reject_formatting(&self, n: usize) -> bool {
        self.fake.fail_next(
            FaultScope::Method("sendMessage".into()),
            n,
            Fault::BadRequest("Bad Request: can't parse entities: Unsupported start tag \"b\" at byte offset 0".into()),
        );
        true
    }

    async fn interrupt_connection(&self) {
        let polls_before = self.fake.call_count("getUpdates");
        self.fake.fail_next(FaultScope::Polls, 1, Fault::Reset);
        // Wake the poll in flight so the next one (the broken one) starts now.
        self.fake.inject_raw(json!({"future_update_kind": {"wake": true}}));
        let woke = self.fake.wait_until(Duration::from_secs(10), |f| f.call_count("getUpdates") >= polls_before + 2).await;
        assert!(woke, "the bot polled again after the connection broke");
    }

    fn inject_junk(&self) {
        let user = self.tg_user(10);
        // A kind from a future Bot API version, a message without a sender, a sticker, an edit, a
        // button press without data, and a bare update id.
        self.fake.inject_raw(json!({"some_future_update": {"id": 1, "payload": [1, 2, 3]}}));
        self.fake
            .inject_raw(json!({"message": {"message_id": 900, "date": 0, "chat": {"id": user.id, "type": "private", "first_name": "u"}}}));
        self.fake.inject_raw(json!({"message": {"message_id": 901, "date": 0, "chat": {"id": user.id, "type": "private", "first_name": "u"},
            "from": {"id": user.id, "is_bot": false, "first_name": "u"},
            "sticker": {"file_id": "s", "file_unique_id": "s", "type": "regular", "width": 1, "height": 1, "is_animated": false, "is_video": false}}}));
        self.fake.inject_raw(json!({"edited_message": {"message_id": 902, "date": 0, "edit_date": 1, "chat": {"id": user.id, "type": "private", "first_name": "u"},
            "from": {"id": user.id, "is_bot": false, "first_name": "u"}, "text": "edited"}}));
        self.fake.inject_raw(
            json!({"callback_query": {"id": "q1", "from": {"id": user.id, "is_bot": false, "first_name": "u"}, "chat_instance": "c"}}),
        );
        self.fake.inject_raw(json!({}));
    }
}

/// What Telegram's app makes of a user's file: a voice note or audio file declares its length (the
/// real one when the test leaves it to the app), and a photo is recompressed to JPEG.
fn as_telegram_sends(media: &Media) -> TgMedia {
    let length = || media.declared_secs.unwrap_or_else(|| hermes_fakes::media::ogg_opus_secs(&media.bytes).ceil() as u32);
    let sent = match media.kind {
        MediaKind::Voice => TgMedia { mime_type: Some(media.mime.to_string()), ..TgMedia::voice(media.bytes.clone(), length()) },
        MediaKind::Audio => TgMedia::audio(media.bytes.clone(), length(), media.mime, &media.file_name),
        MediaKind::Photo => {
            let picture = image::load_from_memory(&media.bytes).expect("a test photo decodes");
            let mut jpeg = std::io::Cursor::new(Vec::new());
            picture.to_rgb8().write_to(&mut jpeg, image::ImageFormat::Jpeg).expect("encoding in memory cannot fail");
            TgMedia::photo(jpeg.into_inner(), picture.width(), picture.height())
        }
    };
    match media.declared_bytes {
        Some(bytes) => sent.declaring_size(bytes),
        None => sent,
    }
}
