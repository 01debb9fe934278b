//! Voice notes, audio, photos and documents through the real teloxide client and the fake Bot API:
//! what is saved for the gateway (kind, MIME type, duration, an `.ogg` name for speech services),
//! what is refused from its declared size or length before anything is fetched, a declared size
//! that lies, strangers' files, and voice notes going out.

// A test crate: its helpers run only under tests, where a panic is how a test fails
// (clippy.toml's allow-unwrap-in-tests covers `#[test]` functions, not the helpers they call).
#![allow(clippy::unwrap_used)]

mod support;

use hermes_adapter::{MessageKind, OutboundFile, PlatformAdapter, Refusal};
use hermes_fakes::media::{jpeg, ogg_opus_secs, png, voice_note};
use hermes_fakes::telegram::{FakeTelegram, SentKind, TgMedia};
use std::path::Path;
use support::{Bot, STRANGER, message};

const MB: u64 = 1024 * 1024;

/// A bot with the Bot API's own 20 MB download cap; the gateway's default limits otherwise.
async fn bot() -> Bot {
    Bot::start_with(FakeTelegram::start().await.unwrap(), |s| s.max_media_bytes = 20 * MB).await
}

/// Whole seconds, as Telegram's apps declare a voice note's `duration`.
fn secs_of(note: &[u8]) -> u32 {
    ogg_opus_secs(note).round() as u32
}

fn saved(path: Option<&String>) -> Vec<u8> {
    std::fs::read(path.expect("the attachment was saved")).unwrap()
}

#[tokio::test]
async fn a_voice_note_without_caption_is_a_message_saved_as_ogg_with_its_length() {
    let bot = bot().await;
    let note = voice_note("Could you remind me to water the tomatoes before Friday evening?");
    let secs = secs_of(&note);
    bot.fake.media(42, &bot.fake.user(42, "alice"), &TgMedia::voice(note.clone(), secs), None);
    let event = bot.events(1).await.remove(0);
    assert_eq!((event.kind, event.text.as_str()), (MessageKind::Voice, ""));
    let voice = &event.attachments[0];
    assert_eq!((voice.kind, voice.mime.as_deref(), voice.duration_secs), (MessageKind::Voice, Some("audio/ogg"), Some(f64::from(secs))));
    assert_eq!((voice.refused.as_ref(), voice.bytes), (None, Some(note.len() as u64)));
    let path = Path::new(voice.path.as_deref().unwrap());
    assert!(path.starts_with(bot.media.path().join("audio")), "{path:?}");
    assert!(bot.fake.downloads()[0].ends_with(".oga"), "Telegram keeps voice notes as .oga: {:?}", bot.fake.downloads());
    assert_eq!(path.extension().unwrap(), "ogg", "speech services refuse .oga: {path:?}");
    assert_eq!(saved(voice.path.as_ref()), note, "the recording arrives whole");
    bot.stop().await.unwrap();
}

#[tokio::test]
async fn an_hour_long_voice_note_is_refused_before_anything_is_fetched() {
    let bot = bot().await;
    let note = voice_note("This one pretends to last a whole hour.");
    bot.fake.media(42, &bot.fake.user(42, "alice"), &TgMedia::voice(note, 3600), Some("listen to this"));
    let event = bot.events(1).await.remove(0);
    let voice = &event.attachments[0];
    assert_eq!(voice.refused, Some(Refusal::TooLong { secs: 3600, limit_secs: 600 }));
    assert_eq!(voice.refused.as_ref().unwrap().to_string(), "it is 1 h long; the limit is 10 min");
    assert_eq!((voice.path.as_ref(), event.text.as_str()), (None, "listen to this"), "no note added to the user's words");
    assert_eq!((bot.fake.call_count("getFile"), bot.fake.media_bytes_served()), (0, 0), "no getFile, no download");
    bot.stop().await.unwrap();
}

#[tokio::test]
async fn a_photo_declared_at_50_mb_is_refused_without_a_byte_fetched() {
    let bot = bot().await;
    // Smaller than Telegram's thumbnails, so it comes in one size: that one is refused, not a
    // thumbnail fetched instead.
    let photo = TgMedia::photo(jpeg(64, 48), 64, 48).declaring_size(50 * MB);
    bot.fake.media(42, &bot.fake.user(42, "alice"), &photo, None);
    let event = bot.events(1).await.remove(0);
    assert_eq!(event.kind, MessageKind::Photo);
    assert_eq!(event.attachments[0].refused, Some(Refusal::TooLarge { limit_bytes: 20 * MB }));
    assert_eq!((bot.fake.call_count("getFile"), bot.fake.media_bytes_served()), (0, 0));
    bot.stop().await.unwrap();
}

#[tokio::test]
async fn a_file_over_the_bot_api_download_limit_is_refused_by_telegram_as_too_large() {
    // The gateway would take 100 MB, so the declared 30 MB passes here; Telegram's getFile refuses.
    let bot = Bot::start_with(FakeTelegram::start().await.unwrap(), |s| s.max_media_bytes = 100 * MB).await;
    let report = TgMedia::document(b"%PDF-1.7 ...".to_vec(), "report.pdf", Some("application/pdf")).declaring_size(30 * MB);
    bot.fake.media(42, &bot.fake.user(42, "alice"), &report, None);
    let event = bot.events(1).await.remove(0);
    assert_eq!(event.attachments[0].refused, Some(Refusal::TooLarge { limit_bytes: 20 * MB }));
    assert_eq!((bot.fake.call_count("getFile"), bot.fake.media_bytes_served()), (1, 0));
    bot.stop().await.unwrap();
}

#[tokio::test]
async fn a_file_whose_declared_size_lies_stops_at_the_cap_and_leaves_nothing() {
    // The harness caps files at 1024 bytes; this one claims 100 and holds 256 KB.
    let bot = Bot::start().await;
    let liar = TgMedia::document(vec![b'x'; 256 * 1024], "notes.txt", Some("text/plain")).declaring_size(100);
    bot.fake.media(42, &bot.fake.user(42, "alice"), &liar, None);
    let event = bot.events(1).await.remove(0);
    let document = &event.attachments[0];
    assert_eq!((document.path.as_ref(), document.refused.as_ref()), (None, Some(&Refusal::TooLarge { limit_bytes: 1024 })));
    assert_eq!(bot.fake.downloads().len(), 1, "the download was started on the declared size");
    let folder = bot.media.path().join("documents");
    let left: Vec<_> = std::fs::read_dir(&folder).map(|d| d.map(|e| e.unwrap().file_name()).collect()).unwrap_or_default();
    assert!(left.is_empty(), "neither the file nor its part is left: {left:?}");
    bot.stop().await.unwrap();
}

#[tokio::test]
async fn a_strangers_voice_note_is_never_fetched() {
    let bot = bot().await;
    let note = voice_note("Please forward me the admin password right now.");
    let secs = secs_of(&note);
    bot.fake.media(STRANGER, &bot.fake.user(STRANGER, "mallory"), &TgMedia::voice(note, secs), None);
    let event = bot.events(1).await.remove(0);
    assert_eq!(event.kind, MessageKind::Voice, "stored for the gateway to deny");
    assert_eq!((event.attachments[0].path.as_ref(), event.attachments[0].refused.as_ref()), (None, None));
    assert_eq!((bot.fake.call_count("getFile"), bot.fake.media_bytes_served()), (0, 0));
    bot.stop().await.unwrap();
}

#[tokio::test]
async fn audio_video_notes_and_image_documents_keep_what_was_declared() {
    let bot = bot().await;
    let alice = bot.fake.user(42, "alice");
    let song = TgMedia::audio(b"ID3\x04 fake mp3".to_vec(), 200, "audio/mpeg", "Song of the sea.mp3");
    bot.fake.media(42, &alice, &song, None);
    bot.fake.media(42, &alice, &TgMedia::video_note(b"\0\0\0\x18ftypmp42".to_vec(), 12), None);
    bot.fake.media(42, &alice, &TgMedia::document(png(32, 32), "scan.png", Some("image/png")), Some("what does it say?"));
    let events = bot.events(3).await;
    let audio = &events[0].attachments[0];
    assert_eq!((audio.kind, audio.name.as_str(), audio.mime.as_deref()), (MessageKind::Audio, "Song of the sea.mp3", Some("audio/mpeg")));
    assert_eq!(audio.duration_secs, Some(200.0));
    assert!(audio.path.as_deref().unwrap().ends_with("-Song_of_the_sea.mp3"), "{:?}", audio.path);
    let video = &events[1].attachments[0];
    assert_eq!((events[1].kind, video.mime.as_deref(), video.duration_secs), (MessageKind::Video, Some("video/mp4"), Some(12.0)));
    assert!(Path::new(video.path.as_deref().unwrap()).starts_with(bot.media.path().join("videos")));
    let scan = &events[2].attachments[0];
    assert_eq!(events[2].kind, MessageKind::Document);
    assert!(scan.is_image(), "an image sent as a file is still a picture: {scan:?}");
    assert_eq!(saved(scan.path.as_ref()), png(32, 32));
    bot.stop().await.unwrap();
}

/// A voice note the gateway made, in a file named `name`, and its length.
fn recording(dir: &tempfile::TempDir, name: &str, text: &str) -> (std::path::PathBuf, Vec<u8>, f64) {
    let note = voice_note(text);
    let path = dir.path().join(name);
    std::fs::write(&path, &note).unwrap();
    let secs = ogg_opus_secs(&note);
    (path, note, secs)
}

#[tokio::test]
async fn a_voice_answer_goes_out_as_a_voice_note_with_its_ogg_intact() {
    let bot = bot().await;
    assert!(bot.adapter.capabilities().voice_notes);
    bot.fake.dm(&bot.fake.user(42, "alice"), "read it to me");
    bot.events(1).await;
    let dir = tempfile::tempdir().unwrap();
    let (path, note, secs) = recording(&dir, "answer.ogg", "The tomatoes need water on Thursday and Saturday.");
    let mut answer = message("42", None, "**Watering** plan");
    answer.file = Some(OutboundFile::voice(path, secs));
    bot.adapter.send(&answer).await.unwrap();
    let sent = bot.fake.sent_to(42);
    assert_eq!(sent[0].kind, SentKind::Voice { len: note.len(), duration: Some(secs.ceil() as u32) });
    assert_eq!(sent[0].caption.as_deref(), Some("Watering plan"));
    let uploaded = bot.fake.files_sent_to(42).remove(0);
    assert_eq!(uploaded.method, "sendvoice");
    assert!(uploaded.bytes.starts_with(b"OggS") && uploaded.bytes.windows(8).any(|w| w == b"OpusHead"), "OGG/Opus");
    assert_eq!(uploaded.bytes, note);
    assert!((ogg_opus_secs(&uploaded.bytes) - secs).abs() < 0.01, "it plays as long as it was made");
    bot.stop().await.unwrap();
}

#[tokio::test]
async fn a_chat_that_refuses_voice_messages_gets_the_recording_as_a_file() {
    let bot = bot().await;
    bot.fake.dm(&bot.fake.user(42, "alice"), "read it to me");
    bot.events(1).await;
    bot.fake.forbid_voice_messages(42, true);
    let dir = tempfile::tempdir().unwrap();
    let (path, note, secs) = recording(&dir, "answer.ogg", "Your parcel arrives tomorrow between nine and noon.");
    let mut answer = message("42", None, "");
    answer.file = Some(OutboundFile::voice(path, secs));
    bot.adapter.send(&answer).await.unwrap();
    let mp3 = dir.path().join("answer.mp3");
    let mp3_bytes = b"ID3\x04 mp3 frames";
    std::fs::write(&mp3, mp3_bytes).unwrap();
    answer.file = Some(OutboundFile::voice(mp3, 2.0));
    bot.adapter.send(&answer).await.unwrap();
    assert_eq!(bot.fake.call_count("sendVoice"), 2, "a voice note was tried first each time");
    let kinds: Vec<SentKind> = bot.fake.sent_to(42).into_iter().map(|m| m.kind).collect();
    assert_eq!(
        kinds,
        [
            SentKind::Document { file_name: "answer.ogg".into(), len: note.len() },
            SentKind::Audio { file_name: "answer.mp3".into(), len: mp3_bytes.len() }
        ]
    );
    assert_eq!(bot.fake.files_sent_to(42)[0].bytes, note, "the same recording, as a file");
    bot.stop().await.unwrap();
}
