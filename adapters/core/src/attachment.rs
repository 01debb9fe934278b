//! Inbound attachments as every adapter reports them: what arrived ([`Attachment`]), the limits
//! the gateway sets before anything is fetched ([`MediaLimits`]), why a file was not fetched
//! ([`Refusal`]), and the one way a download is written to the media cache ([`save_capped`]):
//! streamed into a private `.part` file that stops at the byte cap, whatever size the platform
//! declared, and renamed only when whole.

use crate::inbound::MessageKind;
use crate::media_cache::create_private_file;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use tokio::io::{AsyncWrite, AsyncWriteExt};

/// One file that came with a message. The platform's own facts (declared size, duration, MIME
/// type, name) are untrusted: the name is never a path, and the size is enforced while saving.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "AttachmentWire")]
pub struct Attachment {
    /// Photo, Voice, Audio, Video or Document.
    pub kind: MessageKind,
    /// Where it was saved in the media cache; `None` when it was refused or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The MIME type the platform reported (or the adapter inferred), e.g. `audio/ogg`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime: Option<String>,
    /// Its size in bytes: the saved size, else the declared one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Its length in seconds, for voice, audio and video, as the platform declared it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_secs: Option<f64>,
    /// The file name the sender gave it (untrusted text, never used as a path).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Why it was not saved; the gateway tells the user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<Refusal>,
}

/// Events stored before attachments had a shape carried only the saved paths.
#[derive(Deserialize)]
#[serde(untagged)]
enum AttachmentWire {
    Path(String),
    Full {
        kind: MessageKind,
        #[serde(default)]
        path: Option<String>,
        #[serde(default)]
        mime: Option<String>,
        #[serde(default)]
        bytes: Option<u64>,
        #[serde(default)]
        duration_secs: Option<f64>,
        #[serde(default)]
        name: String,
        #[serde(default)]
        refused: Option<Refusal>,
    },
}

impl From<AttachmentWire> for Attachment {
    fn from(wire: AttachmentWire) -> Self {
        match wire {
            AttachmentWire::Path(path) => {
                let name = Path::new(&path).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                Attachment {
                    kind: MessageKind::Document,
                    path: Some(path),
                    mime: None,
                    bytes: None,
                    duration_secs: None,
                    name,
                    refused: None,
                }
            }
            AttachmentWire::Full { kind, path, mime, bytes, duration_secs, name, refused } => {
                Attachment { kind, path, mime, bytes, duration_secs, name, refused }
            }
        }
    }
}

impl Attachment {
    /// An attachment not yet fetched: what the platform declared about it.
    pub fn declared(
        kind: MessageKind,
        name: impl Into<String>,
        mime: Option<String>,
        bytes: Option<u64>,
        duration_secs: Option<f64>,
    ) -> Self {
        Self { kind, path: None, mime, bytes, duration_secs, name: name.into(), refused: None }
    }

    /// Speech to transcribe: a voice note or an audio file.
    pub fn is_audio(&self) -> bool {
        matches!(self.kind, MessageKind::Voice | MessageKind::Audio)
    }

    /// A picture a model could look at: a photo, or a document whose MIME type is an image.
    pub fn is_image(&self) -> bool {
        self.kind == MessageKind::Photo || self.mime.as_deref().is_some_and(|m| m.starts_with("image/"))
    }

    /// Marks it saved at `path` with its real size.
    pub fn saved(mut self, path: &Path, bytes: u64) -> Self {
        self.path = Some(path.to_string_lossy().into_owned());
        self.bytes = Some(bytes);
        self.refused = None;
        self
    }

    /// Marks it not saved, and why.
    pub fn refuse(mut self, refusal: Refusal) -> Self {
        self.path = None;
        self.refused = Some(refusal);
        self
    }

    /// The name to show, never empty.
    pub fn shown_name(&self) -> &str {
        if self.name.is_empty() { self.kind.noun() } else { &self.name }
    }

    /// A file name safe to create in a cache folder: `prefix-name` with everything but letters,
    /// digits, `.`, `-` and `_` replaced, no leading dot, and an extension that matches what
    /// speech services accept (`.oga` is Telegram's name for Ogg, which most reject).
    pub fn cache_file_name(&self, prefix: &str) -> String {
        let base = if self.name.is_empty() {
            format!("{}{}", self.kind.noun().replace(' ', "-"), default_extension(self.mime.as_deref()))
        } else {
            self.name.clone()
        };
        let safe: String = base.chars().take(120).map(|c| if c.is_alphanumeric() || ".-_".contains(c) { c } else { '_' }).collect();
        let safe = safe.trim_start_matches('.');
        let safe = match safe.strip_suffix(".oga") {
            Some(stem) => format!("{stem}.ogg"),
            None => safe.to_string(),
        };
        let prefix: String = prefix.chars().map(|c| if c.is_alphanumeric() || "-_".contains(c) { c } else { '_' }).collect();
        format!("{prefix}-{safe}")
    }
}

fn default_extension(mime: Option<&str>) -> &'static str {
    match mime.unwrap_or("") {
        "audio/ogg" | "audio/opus" => ".ogg",
        "audio/mpeg" => ".mp3",
        "audio/mp4" | "audio/x-m4a" => ".m4a",
        "audio/webm" => ".webm",
        "audio/wav" | "audio/x-wav" => ".wav",
        "image/jpeg" => ".jpg",
        "image/png" => ".png",
        "image/webp" => ".webp",
        "image/gif" => ".gif",
        _ => "",
    }
}

impl MessageKind {
    /// How the gateway names this kind of attachment to a user.
    pub fn noun(self) -> &'static str {
        match self {
            MessageKind::Photo => "image",
            MessageKind::Voice => "voice note",
            MessageKind::Audio => "audio file",
            MessageKind::Video => "video",
            _ => "file",
        }
    }

    /// The media cache folder this kind is saved in.
    pub fn cache_folder(self) -> &'static str {
        match self {
            MessageKind::Photo => "images",
            MessageKind::Voice | MessageKind::Audio => "audio",
            MessageKind::Video => "videos",
            _ => "documents",
        }
    }
}

/// Why an attachment was not saved. Its `Display` is the sentence the user reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Refusal {
    /// Longer than the gateway transcribes (`stt.max_duration_secs`).
    #[error("it is {} long; the limit is {}", human_duration(*secs), human_duration(*limit_secs))]
    TooLong {
        /// Its declared length.
        secs: u64,
        /// `stt.max_duration_secs`.
        limit_secs: u64,
    },
    /// Larger than the limit for its kind; nothing past the limit was downloaded.
    #[error("it is larger than {}", human_bytes(*limit_bytes))]
    TooLarge {
        /// The cap that applied to it.
        limit_bytes: u64,
    },
    /// The platform or the disk failed; the detail is for the log and the user alike.
    #[error("it could not be downloaded ({detail})")]
    Failed {
        /// What failed, in the platform's or the system's words.
        detail: String,
    },
}

/// `1 h 5 min`, `12 min`, `45 s`.
pub fn human_duration(secs: u64) -> String {
    match secs {
        s if s >= 3600 => match (s % 3600) / 60 {
            0 => format!("{} h", s / 3600),
            m => format!("{} h {m} min", s / 3600),
        },
        s if s >= 60 => match s % 60 {
            0 => format!("{} min", s / 60),
            r => format!("{} min {r} s", s / 60),
        },
        s => format!("{s} s"),
    }
}

/// `25 MB`, `512 KB`, `900 bytes` (binary units, as platforms state their limits).
pub fn human_bytes(bytes: u64) -> String {
    const MB: u64 = 1024 * 1024;
    match bytes {
        b if b >= MB => format!("{} MB", b / MB),
        b if b >= 1024 => format!("{} KB", b / 1024),
        b => format!("{b} bytes"),
    }
}

/// What the gateway accepts before anything is fetched, handed to every adapter at build time.
/// An adapter asks [`MediaLimits::admit`] with the platform's declared facts before downloading
/// and saves with the cap it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MediaLimits {
    /// Any attachment (the adapter's own `max_media_bytes` may be lower).
    pub max_file_bytes: u64,
    /// Voice notes and audio files (`stt.max_bytes`).
    pub max_audio_bytes: u64,
    /// Voice notes and audio files (`stt.max_duration_secs`).
    pub max_audio_secs: u64,
    /// Photos and image files (`vision.max_image_bytes`).
    pub max_image_bytes: u64,
}

impl Default for MediaLimits {
    fn default() -> Self {
        const MB: u64 = 1024 * 1024;
        Self { max_file_bytes: 128 * MB, max_audio_bytes: 25 * MB, max_audio_secs: 600, max_image_bytes: 20 * MB }
    }
}

impl MediaLimits {
    /// The byte cap for `attachment` (never above `adapter_max`), or why it must not be fetched
    /// at all: a declared duration or size over the limit.
    pub fn admit(&self, attachment: &Attachment, adapter_max: u64) -> Result<u64, Refusal> {
        let cap = self.cap_for(attachment).min(adapter_max);
        if attachment.is_audio()
            && let Some(secs) = attachment.duration_secs
            && secs > self.max_audio_secs as f64
        {
            return Err(Refusal::TooLong { secs: secs.round() as u64, limit_secs: self.max_audio_secs });
        }
        match attachment.bytes {
            Some(bytes) if bytes > cap => Err(Refusal::TooLarge { limit_bytes: cap }),
            _ => Ok(cap),
        }
    }

    fn cap_for(&self, attachment: &Attachment) -> u64 {
        let kind_cap = if attachment.is_audio() {
            self.max_audio_bytes
        } else if attachment.is_image() {
            self.max_image_bytes
        } else {
            self.max_file_bytes
        };
        kind_cap.min(self.max_file_bytes)
    }
}

/// Why [`save_capped`] did not save.
#[derive(Debug, thiserror::Error)]
pub enum SaveError {
    /// The body went past the cap; what was written is deleted.
    #[error("larger than {}", human_bytes(*cap))]
    TooLarge {
        /// The cap it went past.
        cap: u64,
    },
    /// The download itself failed.
    #[error("{0}")]
    Download(String),
    /// The cache could not be written.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl SaveError {
    /// The refusal the user is told about.
    pub fn refusal(&self) -> Refusal {
        match self {
            SaveError::TooLarge { cap } => Refusal::TooLarge { limit_bytes: *cap },
            other => Refusal::Failed { detail: other.to_string() },
        }
    }
}

/// A writer that fails once more than `cap` bytes were offered, so a body whose size was
/// declared wrongly (or not at all) stops at the limit instead of filling the disk.
pub struct CappedWriter<W> {
    inner: W,
    written: u64,
    cap: u64,
}

impl<W> CappedWriter<W> {
    /// Wraps `inner`, refusing writes past `cap` bytes in total.
    pub fn new(inner: W, cap: u64) -> Self {
        Self { inner, written: 0, cap }
    }
    /// Bytes accepted so far.
    pub fn written(&self) -> u64 {
        self.written
    }
    /// True once a write went past the cap.
    pub fn overflowed(&self) -> bool {
        self.written > self.cap
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for CappedWriter<W> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        use std::task::Poll;
        let room = self.cap.saturating_sub(self.written);
        if buf.len() as u64 > room {
            // Counted so `overflowed` tells this refusal from any other write error.
            self.written = self.cap.saturating_add(1);
            return Poll::Ready(Err(std::io::Error::other(format!("larger than {}", human_bytes(self.cap)))));
        }
        let this = &mut *self;
        match std::pin::Pin::new(&mut this.inner).poll_write(cx, buf) {
            Poll::Ready(Ok(n)) => {
                this.written += n as u64;
                Poll::Ready(Ok(n))
            }
            other => other,
        }
    }
    fn poll_flush(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Saves a download at `path` in a cache folder, at most `cap` bytes: `fill` writes the body
/// into the [`CappedWriter`] it is lent (teloxide's `download_file`, a loop over a response's
/// chunks). The body goes to `path.part` first and is renamed when whole; on any failure the
/// part is removed. Returns the saved size.
pub async fn save_capped<F, E>(path: &Path, cap: u64, fill: F) -> Result<u64, SaveError>
where
    F: AsyncFnOnce(&mut CappedWriter<tokio::fs::File>) -> Result<(), E>,
    E: std::fmt::Display,
{
    let partial = part_path(path);
    // A part left by a crash would make the private create fail; it is ours to replace.
    let _ = tokio::fs::remove_file(&partial).await;
    let mut writer = CappedWriter::new(create_private_file(&partial).await?, cap);
    let filled = fill(&mut writer).await;
    let result = match filled {
        _ if writer.overflowed() => Err(SaveError::TooLarge { cap }),
        Err(e) => Err(SaveError::Download(e.to_string())),
        Ok(()) => writer.flush().await.map_err(SaveError::Io),
    };
    let result = match result {
        Ok(()) => tokio::fs::rename(&partial, path).await.map(|()| writer.written()).map_err(SaveError::Io),
        Err(e) => Err(e),
    };
    if result.is_err() {
        let _ = tokio::fs::remove_file(&partial).await;
    }
    result
}

fn part_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".part");
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn voice(bytes: Option<u64>, secs: Option<f64>) -> Attachment {
        Attachment::declared(MessageKind::Voice, "", Some("audio/ogg".into()), bytes, secs)
    }

    #[test]
    fn a_declared_hour_long_voice_note_is_refused_before_any_download() {
        let limits = MediaLimits::default();
        let refusal = limits.admit(&voice(Some(9_000_000), Some(3600.0)), u64::MAX).unwrap_err();
        assert_eq!(refusal, Refusal::TooLong { secs: 3600, limit_secs: 600 });
        assert_eq!(refusal.to_string(), "it is 1 h long; the limit is 10 min");
    }

    #[test]
    fn the_cap_is_the_lowest_of_kind_file_and_adapter_limits() {
        let limits = MediaLimits::default();
        assert_eq!(limits.admit(&voice(None, Some(12.0)), u64::MAX), Ok(25 * 1024 * 1024));
        assert_eq!(limits.admit(&voice(None, None), 1024), Ok(1024));
        let photo = Attachment::declared(MessageKind::Photo, "a.jpg", None, Some(50 * 1024 * 1024), None);
        assert_eq!(limits.admit(&photo, u64::MAX), Err(Refusal::TooLarge { limit_bytes: 20 * 1024 * 1024 }));
        let doc = Attachment::declared(MessageKind::Document, "scan.png", Some("image/png".into()), None, None);
        assert_eq!(limits.admit(&doc, u64::MAX), Ok(20 * 1024 * 1024), "an image document counts as an image");
    }

    #[test]
    fn cache_names_are_safe_and_oga_becomes_ogg() {
        let mut a = voice(None, None);
        assert_eq!(a.cache_file_name("AgAD"), "AgAD-voice-note.ogg");
        a.name = "../../etc/passwd.oga".into();
        assert_eq!(a.cache_file_name("id/1"), "id_1-_.._etc_passwd.ogg");
    }

    #[test]
    fn events_stored_with_bare_paths_still_read() {
        let old: Vec<Attachment> = serde_json::from_str(r#"["/cache/images/x.jpg"]"#).unwrap();
        assert_eq!(old[0].path.as_deref(), Some("/cache/images/x.jpg"));
        assert_eq!(old[0].name, "x.jpg");
        let new = voice(Some(10), Some(2.0)).refuse(Refusal::TooLarge { limit_bytes: 5 });
        let back: Attachment = serde_json::from_str(&serde_json::to_string(&new).unwrap()).unwrap();
        assert_eq!(back, new);
    }

    #[tokio::test]
    async fn a_body_past_the_cap_stops_there_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.ogg");
        let result = save_capped(&path, 10, async |w: &mut CappedWriter<tokio::fs::File>| {
            for _ in 0..100 {
                w.write_all(b"0123").await.map_err(|e| e.to_string())?;
            }
            Ok::<(), String>(())
        })
        .await;
        assert!(matches!(result, Err(SaveError::TooLarge { cap: 10 })), "{result:?}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "neither the file nor its part is left");

        let saved = save_capped(&path, 10, async |w: &mut CappedWriter<tokio::fs::File>| w.write_all(b"fits").await).await.unwrap();
        assert_eq!((saved, std::fs::read(&path).unwrap()), (4, b"fits".to_vec()));
    }
}
