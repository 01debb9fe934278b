//! Voice notes and pictures, end to end on every chat platform (issue 37): the real gateway, the
//! platform's peer (fake Telegram, Discord and Slack; real Synapse; real Dovecot and Postfix) and
//! the scripted model, whose OpenAI-compatible `/v1/audio/*` routes stand in for the speech
//! services (`stt.base_url` and `tts.base_url` default to the model's). Voice notes are real
//! OGG/Opus made with espeak-ng and opusenc; pictures real PNGs.
//!
//! What a user would notice: their voice note is answered as if they had typed it, a picture
//! reaches the model as a picture of the right size, a note too long or a file too large is
//! refused with a sentence saying why and is never downloaded, a stranger's voice note is never
//! heard, and `/voice only` answers with a voice note while code still arrives as text.

use crate::peer::{Chat, ChatPeer, Media, MediaKind};
use crate::suite::{Run, launch};
use hermes_fakes::Reply;
use std::time::Duration;

const USER: u32 = 1;
/// Peers allow users 1..=50.
const STRANGER: u32 = 99;
const WAIT: Duration = Duration::from_secs(60);
const SPOKEN: &str = "What is the weather going to be like in Paris this weekend?";

fn voice(bytes: Vec<u8>, declared_secs: Option<u32>) -> Media {
    Media { kind: MediaKind::Voice, bytes, mime: "audio/ogg", file_name: "voice-note.ogg".into(), declared_secs, declared_bytes: None }
}

fn photo(width: u32, height: u32) -> Media {
    Media {
        kind: MediaKind::Photo,
        bytes: hermes_fakes::media::png(width, height),
        mime: "image/png",
        file_name: "whiteboard.png".into(),
        declared_secs: None,
        declared_bytes: None,
    }
}

/// A command as a user of `P` types it (Slack keeps `/` for its own commands).
fn typed<P: ChatPeer>(command: &str) -> String {
    if P::PLATFORM == "slack" { format!("!{command}") } else { format!("/{command}") }
}

/// Waits until the bot posted a message containing `needle` in `chat`.
async fn wait_posted<P: ChatPeer>(run: &Run<P>, chat: &Chat, needle: &str) {
    run.wait_for(WAIT, chat, &format!("a message containing {needle:?}"), |posted| posted.iter().any(|m| m.text.contains(needle))).await;
}

/// The last model request's last user message.
fn asked<P: ChatPeer>(run: &Run<P>) -> String {
    run.llm.requests().last().and_then(|r| r.last_user_text()).unwrap_or_default()
}

/// A voice note is transcribed by the OpenAI-compatible endpoint, field by field as OpenAI
/// documents them, and the transcript is what the model is asked (fenced as data).
pub(crate) async fn a_voice_note_is_heard<P: ChatPeer>() {
    heard::<P>(MediaKind::Voice).await;
}

/// An audio file (not recorded in the chat app) is transcribed the same way.
pub(crate) async fn an_audio_file_is_heard<P: ChatPeer>() {
    heard::<P>(MediaKind::Audio).await;
}

async fn heard<P: ChatPeer>(kind: MediaKind) {
    let run = launch::<P>("").await;
    run.llm.script_transcript("please book a table for two at eight");
    run.llm.push(Reply::text("Booked it."));
    let note = hermes_fakes::media::voice_note(SPOKEN);
    let media = Media {
        kind,
        file_name: if kind == MediaKind::Audio { "memo.ogg".into() } else { "voice-note.ogg".into() },
        ..voice(note.clone(), Some(4))
    };
    let chat = run.peer.dm_media(USER, &media, "").await;
    wait_posted(&run, &chat, "Booked it.").await;

    let calls = run.llm.transcriptions();
    assert_eq!(calls.len(), 1, "{}: one transcription: {calls:#?}", P::PLATFORM);
    let call = &calls[0];
    let file_name = call.file_name.as_deref().unwrap_or_default();
    assert!(file_name.ends_with(".ogg"), "{}: a file name speech services accept: {file_name:?}", P::PLATFORM);
    assert_eq!(call.content_type.as_deref(), Some("audio/ogg"), "{}", P::PLATFORM);
    assert_eq!(call.bytes, note, "{}: the voice note's own bytes", P::PLATFORM);
    assert_eq!(call.model.as_deref(), Some("whisper-1"));
    assert_eq!(call.response_format.as_deref(), Some("json"));
    assert!(call.authorization.as_deref().is_some_and(|a| a.starts_with("Bearer ")), "the model's key goes to the model's host");

    let text = asked(&run);
    assert!(text.contains("please book a table for two at eight"), "{}: the transcript is the user's words: {text}", P::PLATFORM);
    assert!(text.contains("untrusted-data"), "{}: the transcript is fenced as data: {text}", P::PLATFORM);
}

/// A transcription that fails is told in the chat, and the message is not lost: the turn runs
/// with a line saying a voice note came and could not be heard, and the note stays saved.
pub(crate) async fn a_failed_transcription_is_told_and_the_message_kept<P: ChatPeer>() {
    let run = launch::<P>("").await;
    run.llm.fail_transcriptions(503, 1);
    run.llm.push(Reply::text("I could not listen to that, sorry."));
    let chat = run.peer.dm_media(USER, &voice(hermes_fakes::media::voice_note(SPOKEN), Some(4)), "").await;
    wait_posted(&run, &chat, "I could not transcribe your voice note").await;
    wait_posted(&run, &chat, "could not listen to that").await;
    let text = asked(&run);
    assert!(text.contains("could not be transcribed") && text.contains("saved at"), "{}: the model is told: {text}", P::PLATFORM);
    let saved = text.split("saved at ").nth(1).map(|rest| rest.trim_end_matches(']').trim().to_string()).unwrap_or_default();
    assert!(std::path::Path::new(&saved).is_file(), "{}: the voice note is kept at {saved:?}", P::PLATFORM);
}

/// A voice note longer than `stt.max_duration_secs` is refused with a sentence saying so, is
/// not transcribed, and (where the platform declares durations) is never downloaded. The turn
/// still runs: the model reads that a voice note came and why it was not heard.
pub(crate) async fn a_voice_note_too_long_is_refused<P: ChatPeer>() {
    let run = launch::<P>("stt:\n  max_duration_secs: 2\n").await;
    run.llm.push(Reply::text("Sorry, that was too long for me."));
    let note = hermes_fakes::media::voice_note(SPOKEN);
    assert!(hermes_fakes::media::ogg_opus_secs(&note) > 2.0, "the note really is longer than the limit");
    let chat = run.peer.dm_media(USER, &voice(note, Some(3600)), "").await;
    wait_posted(&run, &chat, "was not transcribed").await;
    wait_posted(&run, &chat, "too long for me").await;
    let posted = run.peer.posted(&chat);
    let notice = posted.iter().find(|m| m.text.contains("was not transcribed")).map(|m| m.text.clone()).unwrap_or_default();
    assert!(notice.contains("the limit is 2 s"), "{}: the limit is named: {notice}", P::PLATFORM);
    assert!(run.llm.transcriptions().is_empty(), "{}: nothing was sent to speech-to-text", P::PLATFORM);
    if P::DECLARES_MEDIA {
        assert_eq!(run.peer.media_bytes_served(), 0, "{}: a declared hour is refused before any download", P::PLATFORM);
    }
    assert!(asked(&run).contains("voice note that was not transcribed"), "{}: the model is told: {}", P::PLATFORM, asked(&run));
}

/// A picture declared at 50 MB is refused with a sentence naming the limit, and not one byte of
/// it is fetched.
pub(crate) async fn a_huge_image_is_refused_unfetched<P: ChatPeer>() {
    let run = launch::<P>("").await;
    run.llm.push(Reply::text("I could not see it."));
    let mut huge = photo(64, 64);
    huge.declared_bytes = Some(50 * 1024 * 1024);
    let chat = run.peer.dm_media(USER, &huge, "what is this").await;
    wait_posted(&run, &chat, "larger than 20 MB").await;
    assert_eq!(run.peer.media_bytes_served(), 0, "{}: nothing downloaded past the limit", P::PLATFORM);
    assert!(run.llm.requests().iter().all(|r| r.images().is_empty()), "no image reached the model");
}

/// A photo reaches a model that sees as an image part, downscaled to the providers' limits: a
/// 3000x2000 PNG arrives as a 1568x1045 JPEG.
pub(crate) async fn a_photo_is_seen<P: ChatPeer>() {
    let run = launch::<P>("model:\n  vision: on\n").await;
    run.llm.push(Reply::text("A whiteboard."));
    let chat = run.peer.dm_media(USER, &photo(3000, 2000), "what is on it?").await;
    wait_posted(&run, &chat, "A whiteboard.").await;
    let request = run.llm.requests().into_iter().rev().find(|r| !r.images().is_empty()).expect("a request with the image");
    let images = request.images();
    assert_eq!(images.len(), 1, "{}: one image", P::PLATFORM);
    let (media_type, bytes) = &images[0];
    assert_eq!(media_type, "image/jpeg");
    let decoded = image::load_from_memory(bytes).expect("the image part decodes");
    assert_eq!((decoded.width(), decoded.height()), (1568, 1045), "{}: downscaled, aspect kept", P::PLATFORM);
    assert!(request.last_user_text().unwrap_or_default().contains("what is on it?"), "the caption is the text");
}

/// With `model.vision: off` the picture is not sent to the model: `vision_analyze` is offered,
/// the model is told the picture's path, and the tool asks the auxiliary model with the picture.
pub(crate) async fn a_blind_model_asks_vision_analyze<P: ChatPeer>() {
    let run = launch::<P>("model:\n  vision: off\nauxiliary:\n  vision:\n    model: eyes-1\n").await;
    // Unscripted, the model echoes what it was asked: the note naming the picture's path.
    let chat = run.peer.dm_media(USER, &photo(800, 600), "look").await;
    wait_posted(&run, &chat, "vision_analyze").await;
    let first = run.llm.requests().last().cloned().expect("the model was asked");
    assert!(first.images().is_empty(), "{}: the blind model got no pixels", P::PLATFORM);
    let offered: Vec<String> = first.body["tools"]
        .as_array()
        .map(|tools| tools.iter().filter_map(|t| t["function"]["name"].as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    assert!(offered.iter().any(|t| t == "vision_analyze"), "{}: vision_analyze is offered: {offered:?}", P::PLATFORM);
    let told = first.last_user_text().unwrap_or_default();
    let path = told.split("image_path \"").nth(1).and_then(|rest| rest.split('"').next()).expect("the note names the path").to_string();

    let args = serde_json::json!({ "image_path": path, "question": "What does it show?" }).to_string();
    run.llm.push(Reply::tool_call("call-1", "vision_analyze", args));
    run.llm.push(Reply::text("It shows a sketch.")); // the auxiliary model's answer
    run.llm.push(Reply::text("Your whiteboard has a sketch."));
    let before = run.llm.requests().len();
    run.peer.dm(USER, "what is on the picture?").await;
    wait_posted(&run, &chat, "Your whiteboard has a sketch.").await;
    let requests = run.llm.requests()[before..].to_vec();
    let aux = requests.iter().find(|r| r.model() == Some("eyes-1")).expect("the auxiliary vision model was asked");
    let images = aux.images();
    assert_eq!(images.len(), 1, "{}: the picture went to the vision model", P::PLATFORM);
    let decoded = image::load_from_memory(&images[0].1).expect("decodes");
    assert_eq!((decoded.width(), decoded.height()), (800, 600));
}

/// `/voice only`: the answer arrives as a voice note (OGG/Opus that decodes), code blocks as
/// text, and the code is never read aloud.
pub(crate) async fn voice_only_answers_aloud<P: ChatPeer>() {
    let run = launch::<P>("").await;
    let chat = run.peer.dm(USER, &typed::<P>("voice only")).await;
    wait_posted(&run, &chat, "Voice only").await;
    run.llm.push(Reply::text("Run this to list the files:\n\n```\nls -la /srv\n```\n\nIt shows hidden ones too."));
    run.peer.dm(USER, "how do I list files?").await;
    wait_posted(&run, &chat, "ls -la /srv").await;
    let deadline = tokio::time::Instant::now() + WAIT;
    let notes = loop {
        let notes = run.peer.voice_sent(&chat);
        if !notes.is_empty() || tokio::time::Instant::now() > deadline {
            break notes;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(notes.len(), 1, "{}: one voice note: {} sent\n{}", P::PLATFORM, notes.len(), run.gateway.log_text());
    assert!(hermes_fakes::media::ogg_opus_secs(&notes[0]) > 0.5, "{}: a real OGG/Opus voice note", P::PLATFORM);
    let spoken: Vec<String> = run.llm.speech_requests().iter().filter_map(|r| r.input().map(str::to_string)).collect();
    assert!(spoken.iter().any(|s| s.contains("list the files")), "{}: the prose is spoken: {spoken:?}", P::PLATFORM);
    assert!(spoken.iter().all(|s| !s.contains("ls -la")), "{}: code is not read aloud: {spoken:?}", P::PLATFORM);
    let posted = run.peer.posted(&chat);
    assert!(
        posted.iter().all(|m| !m.text.contains("hidden ones too")),
        "{}: under `only` the prose is not written: {posted:#?}",
        P::PLATFORM
    );
}

/// A stranger's voice note is never fetched nor transcribed.
pub(crate) async fn a_strangers_voice_note_is_never_heard<P: ChatPeer>() {
    let run = launch::<P>("").await;
    let note = hermes_fakes::media::voice_note(SPOKEN);
    run.peer.dm_media(STRANGER, &voice(note, Some(4)), "").await;
    // Time for a download and a transcription, had they been going to happen.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(run.llm.transcriptions().is_empty(), "{}: nothing transcribed", P::PLATFORM);
    if P::DECLARES_MEDIA {
        assert_eq!(run.peer.media_bytes_served(), 0, "{}: nothing downloaded", P::PLATFORM);
    }
    assert!(run.llm.requests().is_empty(), "{}: nothing reached a model", P::PLATFORM);
}

/// Telegram's voice note through the real local engine (faster-whisper serving Whisper tiny.en
/// on loopback, started by tests/peers/run.sh): the words spoken reach the model.
pub(crate) async fn a_voice_note_is_heard_by_the_local_engine<P: ChatPeer>() {
    let stt = crate::support::peer("HERMES_TEST_STT_URL");
    let run = launch::<P>(&format!("stt:\n  base_url: {stt}\n  language: en\n")).await;
    run.llm.push(Reply::text("Sunny, mostly."));
    let chat = run.peer.dm_media(USER, &voice(hermes_fakes::media::voice_note(SPOKEN), Some(4)), "").await;
    wait_posted(&run, &chat, "Sunny, mostly.").await;
    let text = asked(&run).to_lowercase();
    assert!(text.contains("weather") && text.contains("weekend"), "the local engine heard the note: {text}");
}
