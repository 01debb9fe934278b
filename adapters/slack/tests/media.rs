//! Users' files through the Slack adapter against the fake Slack: an allowed user's audio clip,
//! audio file and picture are saved with kind, type and length; what is declared too long or too
//! large is refused before the file is requested; a size that lies stops at the cap and leaves
//! nothing; a stranger's file is never requested; a file URL on another host is never requested,
//! so the bot token never leaves. And voice out: an `audio/ogg` file.

#![allow(clippy::unwrap_used)]

use hermes_adapter::{
    AdapterContext, AdapterError, ChatTarget, InboundEvent, MediaLimits, MessageKind, OutboundFile, OutboundMessage, Platform,
    PlatformAdapter, Refusal, SessionSource,
};
use hermes_fakes::inbox::{NoSessions, RecordingInbox};
use hermes_fakes::media::{png, saved_bytes, voice_note};
use hermes_fakes::slack::{FakeSlack, SlUser, SlUserFile};
use hermes_slack::{SlackAdapter, SlackSettings};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const STRANGER: &str = "U0STRANGER";
const MB: u64 = 1024 * 1024;

struct Bot {
    fake: FakeSlack,
    adapter: Arc<SlackAdapter>,
    inbox: Arc<RecordingInbox>,
    media: tempfile::TempDir,
    stop: CancellationToken,
    task: Option<JoinHandle<Result<(), AdapterError>>>,
}

impl Bot {
    async fn start(limits: MediaLimits) -> Bot {
        let fake = FakeSlack::start().await.unwrap();
        let media = tempfile::tempdir().unwrap();
        let mut settings = SlackSettings::new(fake.bot_token(), fake.app_token());
        settings.api_base_url = Some(fake.api_url());
        settings.media_dir = Some(media.path().join("cache"));
        settings.media_limits = limits;
        let adapter = Arc::new(SlackAdapter::new(settings).unwrap());
        let inbox = Arc::new(RecordingInbox::default());
        let stop = CancellationToken::new();
        let ctx = AdapterContext::new(inbox.clone(), Arc::new(NoSessions), hermes_adapter::HealthReporter::new(), stop.clone())
            .with_sender_policy(Arc::new(|source: &SessionSource| source.user_id.as_deref() != Some(STRANGER)));
        let task = tokio::spawn({
            let adapter = adapter.clone();
            async move { adapter.run(ctx).await }
        });
        for _ in 0..750 {
            if fake.connected() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
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

    fn user(&self) -> SlUser {
        self.fake.user("U0ALICE", "alice")
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
async fn an_allowed_users_audio_clip_audio_file_and_picture_are_saved_with_kind_type_and_length() {
    let bot = Bot::start(MediaLimits::default()).await;
    let clip = voice_note("Call the plumber tomorrow morning about the kitchen sink.");
    let song = voice_note("A recording sent as a plain file.");
    let picture = png(64, 48);
    bot.fake.dm_files(&bot.user(), "", &[SlUserFile::audio_clip(clip.clone(), "audio/webm", 4200)]);
    bot.fake.dm_files(&bot.user(), "listen", &[SlUserFile::file("song.ogg", "audio/ogg", song.clone())]);
    bot.fake.dm_files(&bot.user(), "what is this?", &[SlUserFile::file("cat.png", "image/png", picture.clone())]);

    let voice = bot.event(1).await;
    let a = &voice.attachments[0];
    assert_eq!((voice.kind, voice.text.as_str()), (MessageKind::Voice, ""));
    assert_eq!((a.mime.as_deref(), a.duration_secs, a.refused.as_ref()), (Some("audio/webm"), Some(4.2), None));
    assert_eq!(saved_bytes(a), clip, "the clip arrived whole");
    assert!(a.path.as_deref().unwrap().contains("/audio/"), "{:?}", a.path);

    let audio = bot.event(2).await;
    assert_eq!((audio.kind, audio.text.as_str()), (MessageKind::Audio, "listen"));
    assert_eq!(saved_bytes(&audio.attachments[0]), song);

    let photo = bot.event(3).await;
    let p = &photo.attachments[0];
    assert_eq!((photo.kind, p.mime.as_deref(), p.name.as_str()), (MessageKind::Photo, Some("image/png"), "cat.png"));
    assert_eq!(saved_bytes(p), picture);
    assert_eq!(bot.fake.file_bytes_served(), (clip.len() + song.len() + picture.len()) as u64);
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_hour_long_clip_and_a_50_mb_picture_are_refused_before_anything_is_downloaded() {
    let bot = Bot::start(MediaLimits::default()).await;
    bot.fake.dm_files(&bot.user(), "", &[SlUserFile::audio_clip(voice_note("It says it lasts an hour."), "audio/mp4", 3_600_000)]);
    let huge = SlUserFile { declared_size: Some(50 * MB), ..SlUserFile::file("huge.png", "image/png", png(8, 8)) };
    bot.fake.dm_files(&bot.user(), "", &[huge]);

    assert_eq!(bot.event(1).await.attachments[0].refused, Some(Refusal::TooLong { secs: 3600, limit_secs: 600 }));
    let picture = bot.event(2).await;
    assert_eq!(picture.attachments[0].refused, Some(Refusal::TooLarge { limit_bytes: 20 * MB }));
    assert!(picture.text.is_empty(), "refusals are the gateway's to word: {:?}", picture.text);
    assert_eq!((bot.fake.file_requests(), bot.fake.file_bytes_served()), (0, 0), "no file was requested");
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_larger_than_it_says_stops_at_the_cap_and_leaves_nothing() {
    let bot = Bot::start(MediaLimits { max_image_bytes: 64 * 1024, ..MediaLimits::default() }).await;
    // Far more than loopback socket buffers hold, so a stop shows on the server's side.
    let big = vec![0x5a; 32 * MB as usize];
    bot.fake.dm_files(
        &bot.user(),
        "",
        &[SlUserFile { declared_size: Some(1000), ..SlUserFile::file("small.png", "image/png", big.clone()) }],
    );

    let event = bot.event(1).await;
    assert_eq!(event.attachments[0].refused, Some(Refusal::TooLarge { limit_bytes: 64 * 1024 }));
    assert!(bot.cached_files().is_empty(), "neither the file nor its part is left: {:?}", bot.cached_files());
    assert!(bot.fake.file_bytes_served() < big.len() as u64 / 2, "the download stopped: {} of {}", bot.fake.file_bytes_served(), big.len());
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strangers_file_is_never_requested() {
    let bot = Bot::start(MediaLimits::default()).await;
    let stranger = bot.fake.user(STRANGER, "mallory");
    bot.fake.dm_files(&stranger, "", &[SlUserFile::audio_clip(voice_note("Transcribe me for free."), "audio/webm", 2000)]);
    let event = bot.event(1).await;
    assert_eq!((event.attachments[0].kind, event.attachments[0].path.as_deref()), (MessageKind::Voice, None));
    assert_eq!((bot.fake.file_requests(), bot.fake.file_bytes_served()), (0, 0));
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_url_on_another_host_is_never_requested_so_the_token_stays_home() {
    let bot = Bot::start(MediaLimits::default()).await;
    // Another host (another port is another origin): it records whatever reaches it.
    let elsewhere = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = elsewhere.local_addr().unwrap().port();
    let heard = tokio::spawn(async move {
        let (mut socket, _) = elsewhere.accept().await.unwrap();
        let mut request = vec![0; 4096];
        let n = socket.read(&mut request).await.unwrap_or(0);
        String::from_utf8_lossy(&request[..n]).into_owned()
    });
    let hostile = SlUserFile {
        url_override: Some(format!("http://127.0.0.1:{port}/files-pri/T0FAKE-F1/download/cat.png")),
        ..SlUserFile::file("cat.png", "image/png", png(8, 8))
    };
    bot.fake.dm_files(&bot.user(), "look", &[hostile]);

    let event = bot.event(1).await;
    let refused = event.attachments[0].refused.as_ref().map(ToString::to_string).unwrap_or_default();
    assert!(refused.contains("not on Slack's file server"), "{refused:?}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!heard.is_finished(), "nothing connected to the other host: {:?}", heard.await);
    heard.abort();
    assert_eq!(bot.fake.file_requests(), 0);
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_without_the_bot_token_is_refused_by_the_fake() {
    // The fake is faithful: Slack serves private files only to a bearer of the bot token.
    let fake = FakeSlack::start().await.unwrap();
    let user = fake.user("U0ALICE", "alice");
    fake.dm_files(&user, "", &[SlUserFile::file("cat.png", "image/png", png(8, 8))]);
    let url = fake.last_file_url().unwrap();
    let status = |token: Option<String>| {
        let url = url.clone();
        async move {
            let mut request = reqwest_like_get(&url, token).await;
            request.truncate(12);
            request
        }
    };
    assert_eq!(status(None).await, "HTTP/1.1 401");
    assert_eq!(status(Some(fake.bot_token())).await, "HTTP/1.1 200");
}

/// The status line of a plain GET, with an optional bearer token.
async fn reqwest_like_get(url: &str, token: Option<String>) -> String {
    use tokio::io::AsyncWriteExt;
    let url = url::Url::parse(url).unwrap();
    let mut socket = tokio::net::TcpStream::connect((url.host_str().unwrap(), url.port().unwrap())).await.unwrap();
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    let request = format!("GET {} HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n", url.path());
    socket.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    socket.read_to_end(&mut answer).await.unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_reply_is_an_audio_ogg_file() {
    let bot = Bot::start(MediaLimits::default()).await;
    assert!(!bot.adapter.capabilities().voice_notes, "Slack plays no bot voice notes");
    let note = voice_note("Here is your answer, spoken.");
    let path = bot.media.path().join("reply.ogg");
    std::fs::write(&path, &note).unwrap();
    let dm = bot.fake.dm_channel(&bot.user());
    let reply = OutboundMessage {
        target: ChatTarget { platform: Platform::new("slack"), chat_id: dm.clone(), thread_id: None },
        text: String::new(),
        reply_to: None,
        idempotency_key: "turn-1:0".to_string(),
        is_final: true,
        usage: None,
        finish_reason: None,
        buttons: Vec::new(),
        file: Some(OutboundFile::voice(path, 2.0)),
    };
    bot.adapter.send(&reply).await.unwrap();
    let sent = bot.fake.sent_to(&dm);
    let file = &sent[0].uploaded[0];
    assert_eq!((file.name.as_str(), file.mimetype.as_deref()), ("reply.ogg", Some("audio/ogg")));
    assert_eq!(file.bytes, note, "the OGG/Opus bytes arrive intact");
    bot.stop().await;
}
