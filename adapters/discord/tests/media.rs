//! Users' files through the real serenity client against the fake Discord: an allowed user's
//! voice message, audio file and picture are saved with their kind, type and length; what is
//! declared too long or too large is refused before the CDN is asked; a size that lies stops at
//! the cap and leaves nothing; a stranger's file is never requested. And voice out: a voice
//! message as Discord's client sends one, or a plain file where the channel takes none.

#![allow(clippy::unwrap_used)]

use hermes_adapter::{
    AdapterContext, AdapterError, ChatTarget, InboundEvent, MediaLimits, MessageKind, OutboundFile, OutboundMessage, Platform,
    PlatformAdapter, Refusal, SessionSource,
};
use hermes_discord::{DiscordAdapter, DiscordSettings};
use hermes_fakes::discord::{DcAttachment, DcUser, FakeDiscord};
use hermes_fakes::inbox::{NoSessions, RecordingInbox};
use hermes_fakes::media::{png, saved_bytes, voice_note};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const STRANGER: u64 = 666;
const MB: u64 = 1024 * 1024;

struct Bot {
    fake: FakeDiscord,
    adapter: Arc<DiscordAdapter>,
    inbox: Arc<RecordingInbox>,
    media: tempfile::TempDir,
    stop: CancellationToken,
    task: Option<JoinHandle<Result<(), AdapterError>>>,
}

impl Bot {
    async fn start(limits: MediaLimits) -> Bot {
        let fake = FakeDiscord::start().await.unwrap();
        let media = tempfile::tempdir().unwrap();
        let mut settings = DiscordSettings::new(fake.token());
        settings.api_base_url = Some(fake.api_url());
        settings.media_dir = Some(media.path().join("cache"));
        settings.media_limits = limits;
        let adapter = Arc::new(DiscordAdapter::new(settings).unwrap());
        let inbox = Arc::new(RecordingInbox::default());
        let stop = CancellationToken::new();
        let ctx = AdapterContext::new(inbox.clone(), Arc::new(NoSessions), hermes_adapter::HealthReporter::new(), stop.clone())
            .with_sender_policy(Arc::new(|source: &SessionSource| source.user_id.as_deref() != Some(STRANGER.to_string().as_str())));
        let task = tokio::spawn({
            let adapter = adapter.clone();
            async move { adapter.run(ctx).await }
        });
        assert!(fake.wait_connected(Duration::from_secs(15)).await, "the bot connected");
        Bot { fake, adapter, inbox, media, stop, task: Some(task) }
    }

    async fn event(&self, n: usize) -> InboundEvent {
        for _ in 0..1500 {
            if let Some(event) = self.inbox.events().get(n - 1) {
                return event.clone();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("expected {n} events, got {:#?}", self.inbox.events());
    }

    fn user(&self) -> DcUser {
        self.fake.user(2001, "alice")
    }

    /// Files left in the media cache (saved or half-written).
    fn cached_files(&self) -> Vec<String> {
        hermes_fakes::media::cached_files(&self.media.path().join("cache"))
    }

    async fn stop(mut self) {
        self.stop.cancel();
        let _ = self.task.take().unwrap().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_users_voice_message_audio_file_and_picture_are_saved_with_kind_type_and_length() {
    let bot = Bot::start(MediaLimits::default()).await;
    let note = voice_note("Meet me at the station at nine, and bring the blue umbrella.");
    let song = voice_note("This one is a recording, not a voice message.");
    let picture = png(64, 48);
    bot.fake.dm_files(&bot.user(), "", &[DcAttachment::voice_message(note.clone(), 4.5)]);
    bot.fake.dm_files(&bot.user(), "listen", &[DcAttachment::file("song.ogg", "audio/ogg", song.clone())]);
    bot.fake.dm_files(&bot.user(), "what is this?", &[DcAttachment::file("cat.png", "image/png", picture.clone())]);

    let voice = bot.event(1).await;
    assert_eq!((voice.kind, voice.text.as_str()), (MessageKind::Voice, ""));
    let a = &voice.attachments[0];
    assert_eq!((a.kind, a.mime.as_deref(), a.duration_secs, a.refused.as_ref()), (MessageKind::Voice, Some("audio/ogg"), Some(4.5), None));
    assert_eq!(saved_bytes(a), note, "the voice message arrived whole");
    assert!(a.path.as_deref().unwrap().contains("/audio/"), "{:?}", a.path);

    let audio = bot.event(2).await;
    assert_eq!((audio.kind, audio.attachments[0].kind, audio.text.as_str()), (MessageKind::Audio, MessageKind::Audio, "listen"));
    assert_eq!(saved_bytes(&audio.attachments[0]), song);

    let photo = bot.event(3).await;
    let p = &photo.attachments[0];
    assert_eq!((photo.kind, p.mime.as_deref(), p.name.as_str()), (MessageKind::Photo, Some("image/png"), "cat.png"));
    assert!(p.path.as_deref().unwrap().contains("/images/"), "{:?}", p.path);
    assert_eq!(saved_bytes(p), picture);
    assert_eq!(bot.fake.cdn_bytes_served(), (note.len() + song.len() + picture.len()) as u64);
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_hour_long_voice_message_and_a_50_mb_picture_are_refused_before_anything_is_downloaded() {
    let bot = Bot::start(MediaLimits::default()).await;
    let hour = DcAttachment::voice_message(voice_note("Short really, but it says it is an hour."), 3600.0);
    bot.fake.dm_files(&bot.user(), "", &[hour]);
    let huge = DcAttachment { declared_size: Some(50 * MB), ..DcAttachment::file("huge.png", "image/png", png(8, 8)) };
    bot.fake.dm_files(&bot.user(), "", &[huge]);

    let voice = bot.event(1).await;
    assert_eq!(voice.attachments[0].refused, Some(Refusal::TooLong { secs: 3600, limit_secs: 600 }));
    assert_eq!(voice.attachments[0].path, None);
    let picture = bot.event(2).await;
    assert_eq!(picture.attachments[0].refused, Some(Refusal::TooLarge { limit_bytes: 20 * MB }));
    assert!(picture.text.is_empty(), "refusals are the gateway's to word: {:?}", picture.text);
    assert_eq!((bot.fake.cdn_requests(), bot.fake.cdn_bytes_served()), (0, 0), "the CDN was never asked");
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_larger_than_it_says_stops_at_the_cap_and_leaves_nothing() {
    let limits = MediaLimits { max_image_bytes: 64 * 1024, ..MediaLimits::default() };
    let bot = Bot::start(limits).await;
    // Far more than loopback socket buffers hold, so a stop shows on the server's side.
    let big = vec![0x5a; 32 * MB as usize];
    let liar = DcAttachment { declared_size: Some(1000), ..DcAttachment::file("small.png", "image/png", big.clone()) };
    bot.fake.dm_files(&bot.user(), "", &[liar]);

    let event = bot.event(1).await;
    assert_eq!(event.attachments[0].refused, Some(Refusal::TooLarge { limit_bytes: 64 * 1024 }));
    assert!(bot.cached_files().is_empty(), "neither the file nor its part is left: {:?}", bot.cached_files());
    assert!(bot.fake.cdn_bytes_served() < big.len() as u64 / 2, "the download stopped: {} of {}", bot.fake.cdn_bytes_served(), big.len());
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strangers_file_is_never_requested() {
    let bot = Bot::start(MediaLimits::default()).await;
    let stranger = bot.fake.user(STRANGER, "mallory");
    bot.fake.dm_files(&stranger, "", &[DcAttachment::voice_message(voice_note("Please transcribe me for free."), 3.0)]);
    let event = bot.event(1).await;
    assert_eq!(event.attachments[0].path, None, "declared only");
    assert_eq!(event.attachments[0].kind, MessageKind::Voice);
    assert_eq!((bot.fake.cdn_requests(), bot.fake.cdn_bytes_served()), (0, 0));
    bot.stop().await;
}

fn voice_reply(channel: u64, path: &Path) -> OutboundMessage {
    OutboundMessage {
        target: ChatTarget { platform: Platform::new("discord"), chat_id: channel.to_string(), thread_id: None },
        text: String::new(),
        reply_to: None,
        idempotency_key: format!("turn-{channel}:0"),
        is_final: true,
        usage: None,
        finish_reason: None,
        buttons: Vec::new(),
        file: Some(OutboundFile::voice(path.to_path_buf(), 3.2)),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_reply_is_a_discord_voice_message_or_a_file_where_the_channel_takes_none() {
    let bot = Bot::start(MediaLimits::default()).await;
    assert!(bot.adapter.capabilities().voice_notes);
    let note = voice_note("Here is your answer, spoken.");
    let path = bot.media.path().join("reply.ogg");
    std::fs::write(&path, &note).unwrap();
    let dm = bot.fake.dm_channel(&bot.user());

    bot.adapter.send(&voice_reply(dm, &path)).await.unwrap();
    let sent = bot.fake.sent_to(dm);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].flags, 1 << 13, "IS_VOICE_MESSAGE");
    assert_eq!(sent[0].content, "");
    assert_eq!(sent[0].uploads[0].field, "files[0]");
    assert_eq!(sent[0].uploads[0].bytes, note, "the OGG/Opus bytes arrive intact");
    assert_eq!(sent[0].attachment_meta[0]["duration_secs"], 3.2);
    assert!(sent[0].attachment_meta[0]["waveform"].as_str().is_some_and(|w| !w.is_empty()));

    let general = bot.fake.text_channel("general");
    bot.fake.refuse_voice_messages(general);
    bot.adapter.send(&voice_reply(general, &path)).await.unwrap();
    let sent = bot.fake.sent_to(general);
    assert_eq!(sent.len(), 1, "one message: the fallback");
    assert_eq!(sent[0].flags & (1 << 13), 0, "an ordinary message");
    assert_eq!(sent[0].uploads[0].bytes, note, "carrying the audio as a file");
    bot.stop().await;
}
