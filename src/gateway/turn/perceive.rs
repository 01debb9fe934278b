//! Step 1½, perceive: what the user sent besides text becomes something the model can take in,
//! before the message is stored. A voice note or audio file is transcribed and the transcript
//! becomes the user's words (marked as from outside: speech recognition hears whoever speaks);
//! a picture is prepared to the providers' limits and goes to the model as an image when the
//! session's model sees images, else it is left for `vision_analyze` with a note saying so.
//!
//! Nothing is lost on the way: a file refused by a limit or one whose transcription failed is
//! named in the message the model reads, with where it is saved, and the user is told in the
//! chat what happened and why (one notice per message). The engines are [`crate::media`]'s.

use super::admit::AnswerTo;
use crate::agent::ImagePart;
use crate::gateway::conversation::models::Sight;
use crate::gateway::delivery::reply::ReplyKey;
use crate::media::images::{self, PreparedImage};
use crate::media::ogg;
use crate::media::stt::{Transcriber, Transcript};
use crate::observe::metrics;
use hermes_adapter::attachment::{Refusal, human_duration};
use hermes_adapter::{Attachment, InboundEvent, MediaCache, untrusted};
use std::path::Path;

/// What a turn needs to hear voice notes and look at pictures; built once at start-up.
pub(crate) struct TurnMedia {
    /// `None` when `stt.enabled` is off.
    pub transcriber: Option<Transcriber>,
    /// The media cache, where prepared images are written beside the originals.
    pub cache: MediaCache,
    /// `stt.max_duration_secs`, checked again on the file itself: a platform that declares no
    /// duration (email) is held to it too.
    pub max_audio_secs: u64,
    /// `stt.echo_transcript`: the transcript is also posted in the chat.
    pub echo_transcript: bool,
    /// `stt.price_per_minute`, for `/usage`.
    pub stt_price_per_minute: f64,
    /// The name `/usage` shows transcription costs under.
    pub stt_label: String,
}

/// What the model is asked with, besides the history: the user's words (the caption, the
/// transcripts, a line per file) and the images it may look at.
pub(super) struct Perceived {
    pub text: String,
    pub images: Vec<ImagePart>,
    /// Speech transcribed, in seconds, and what it cost (recorded once the session is known).
    pub transcribed_secs: f64,
    pub stt_cost: f64,
}

impl Perceived {
    /// A message with nothing but its text.
    pub(super) fn text(text: &str) -> Self {
        Perceived { text: text.to_string(), images: Vec::new(), transcribed_secs: 0.0, stt_cost: 0.0 }
    }
}

pub(super) async fn perceive(media: &TurnMedia, event: &InboundEvent, sight: impl AsyncFnOnce() -> Sight, answer: &AnswerTo) -> Perceived {
    let mut out = Perceived::text(&event.text);
    if event.attachments.is_empty() {
        return out;
    }
    let mut notes = Notes::default();
    let mut sight = LazySight { ask: Some(sight), known: None };
    for attachment in &event.attachments {
        let name = untrusted::mark(attachment.shown_name());
        let Some(path) = attachment.path.as_deref() else {
            let refusal = attachment.refused.clone().unwrap_or(Refusal::Failed { detail: "it was not downloaded".into() });
            refused(attachment, &refusal, &mut notes);
            continue;
        };
        if attachment.is_audio() {
            hear(media, attachment, path, &name, &mut out, &mut notes).await;
        } else if attachment.is_image() {
            look(media, path, &name, sight.get().await, &mut out, &mut notes).await;
        } else {
            notes.for_model.push(format!("[The user sent a file, {name} ({}), saved at {path}]", describe(attachment)));
        }
    }
    if !notes.for_model.is_empty() {
        let lines = notes.for_model.join("\n");
        out.text = [out.text.trim(), &lines].into_iter().filter(|s| !s.is_empty()).collect::<Vec<_>>().join("\n");
    }
    if !notes.for_user.is_empty() {
        let reply = answer.reply(notes.for_user.join("\n"));
        answer.deliverer.queue(reply, ReplyKey::MediaNotice(event.event_id.clone())).await;
    }
    out
}

/// What perceiving a message has to say: lines the model reads after the user's text, and
/// notices the user reads in the chat (one message, before the answer).
#[derive(Default)]
struct Notes {
    for_model: Vec<String>,
    for_user: Vec<String>,
}

/// The session's [`Sight`], asked only when a picture needs it (it may read the route and the
/// provider's model list), and then once.
struct LazySight<F> {
    ask: Option<F>,
    known: Option<Sight>,
}

impl<F: AsyncFnOnce() -> Sight> LazySight<F> {
    async fn get(&mut self) -> Sight {
        if let Some(known) = self.known {
            return known;
        }
        let sight = match self.ask.take() {
            Some(ask) => ask().await,
            None => Sight::Blind,
        };
        self.known = Some(sight);
        sight
    }
}

/// A file not fetched: the model reads that it came and why it is missing; the user is told.
fn refused(attachment: &Attachment, refusal: &Refusal, notes: &mut Notes) {
    let noun = attachment.kind.noun();
    let verb = if attachment.is_audio() { "transcribed" } else { "downloaded" };
    notes.for_model.push(format!("[The user sent a {noun} that was not {verb}: {refusal}]"));
    notes.for_user.push(format!("⚠️ Your {noun} was not {verb}: {refusal}."));
    if attachment.is_audio() {
        metrics::global().transcription("refused");
    } else if attachment.is_image() {
        metrics::global().image("refused");
    }
}

/// A voice note or audio file: transcribed, its transcript the user's words.
async fn hear(media: &TurnMedia, attachment: &Attachment, path: &str, name: &str, out: &mut Perceived, notes: &mut Notes) {
    let noun = attachment.kind.noun();
    let Some(transcriber) = &media.transcriber else {
        metrics::global().transcription("disabled");
        notes
            .for_model
            .push(format!("[The user sent a {noun}, {name}, saved at {path}; speech-to-text is off, so it was not transcribed]"));
        notes.for_user.push(format!("⚠️ Voice notes are not transcribed here (speech-to-text is off), so I cannot hear your {noun}."));
        return;
    };
    // The declared length was checked before the download where the platform declared one;
    // the file itself tells the truth for the rest (email, a lying client).
    let secs = file_secs(Path::new(path)).await.or(attachment.duration_secs);
    if let Some(s) = secs
        && s > media.max_audio_secs as f64
    {
        let refusal = Refusal::TooLong { secs: s.round() as u64, limit_secs: media.max_audio_secs };
        return refused(attachment, &refusal, notes);
    }
    match transcriber.transcribe(Path::new(path), attachment.mime.as_deref()).await {
        Ok(Transcript { text, audio_secs }) if !text.trim().is_empty() => {
            metrics::global().transcription("ok");
            let secs = audio_secs.or(secs).unwrap_or(0.0);
            out.transcribed_secs += secs;
            out.stt_cost += secs / 60.0 * media.stt_price_per_minute;
            let length = if secs > 0.0 { format!(", {}", human_duration(secs.round() as u64)) } else { String::new() };
            notes.for_model.push(format!("[{} {noun}{length}, transcribed:]\n{}", capitalized_article(noun), untrusted::mark(text.trim())));
            if media.echo_transcript {
                notes.for_user.push(format!("🎤 \"{}\"", text.trim()));
            }
        }
        Ok(_) => {
            metrics::global().transcription("empty");
            notes.for_model.push(format!("[The user sent a {noun} in which no speech was recognised; saved at {path}]"));
            notes.for_user.push(format!("⚠️ I could not make out any speech in your {noun}."));
        }
        Err(e) => {
            metrics::global().transcription("failed");
            tracing::warn!(error = %e, "transcription failed");
            notes.for_model.push(format!("[The user sent a {noun} that could not be transcribed ({e}); saved at {path}]"));
            notes.for_user.push(format!("⚠️ I could not transcribe your {noun}: {e}"));
        }
    }
}

/// A picture: prepared, then shown to a model that sees, or left for `vision_analyze`.
async fn look(media: &TurnMedia, path: &str, name: &str, sight: Sight, out: &mut Perceived, notes: &mut Notes) {
    let prepared = match prepare(media, path).await {
        Ok(prepared) => prepared,
        Err(why) => {
            metrics::global().image("failed");
            notes.for_model.push(format!("[The user sent an image, {name}, that could not be read ({why}); saved at {path}]"));
            notes.for_user.push(format!("⚠️ I could not open your image: {why}."));
            return;
        }
    };
    match sight {
        Sight::Sees => {
            metrics::global().image("seen");
            out.images.push(prepared.into_part());
        }
        Sight::ThroughTool => {
            metrics::global().image("described");
            notes.for_model.push(format!(
                "[The user sent an image, {name} ({}x{}). You cannot see images yourself: call vision_analyze with image_path \"{}\" \
                 and a question to have it described]",
                prepared.width,
                prepared.height,
                prepared.path.display()
            ));
        }
        Sight::Blind => {
            metrics::global().image("described");
            notes.for_model.push(format!(
                "[The user sent an image, {name}, saved at {path}. This model cannot see images and no vision model is configured \
                 (auxiliary.vision): tell the user you cannot see it]"
            ));
        }
    }
}

async fn prepare(media: &TurnMedia, path: &str) -> Result<PreparedImage, String> {
    let out_dir = media.cache.folder("prepared").map_err(|e| e.to_string())?;
    let original = std::path::PathBuf::from(path);
    // Decoding and resizing a photo is CPU work of tens of milliseconds: off the runtime.
    match tokio::task::spawn_blocking(move || images::prepare(&original, &out_dir)).await {
        Ok(result) => result.map_err(|e| e.to_string()),
        Err(e) => Err(format!("the image could not be prepared ({e})")),
    }
}

/// The length of an OGG/Opus file, read from its last page; `None` for anything else.
async fn file_secs(path: &Path) -> Option<f64> {
    let bytes = tokio::fs::read(path).await.ok()?;
    ogg::opus_duration(&bytes).ok()
}

fn describe(attachment: &Attachment) -> String {
    let mut parts = Vec::new();
    if let Some(mime) = &attachment.mime {
        parts.push(untrusted::mark(mime));
    }
    if let Some(bytes) = attachment.bytes {
        parts.push(hermes_adapter::attachment::human_bytes(bytes));
    }
    if parts.is_empty() { "a file".to_string() } else { parts.join(", ") }
}

fn capitalized_article(noun: &str) -> &'static str {
    if noun.starts_with(['a', 'e', 'i', 'o', 'u']) { "An" } else { "A" }
}
