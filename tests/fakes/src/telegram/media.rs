//! Users' files as the Bot API describes them in a message, written from
//! <https://core.telegram.org/bots/api>: `voice` ([Voice]: `duration`, `mime_type`, `file_size`),
//! `audio` ([Audio]: plus `file_name`, `title`), `photo` (an array of [PhotoSize], smallest
//! first), `document` ([Document]), `video` ([Video]) and `video_note` ([VideoNote]: `length`,
//! `duration`). What a message declares (size, duration) is the test's choice: it may lie, or
//! name a huge file the fake never holds; the download serves the bytes the test gave.
//!
//! The bots' side: files uploaded with `sendVoice`, `sendAudio`, `sendDocument`, `sendPhoto`,
//! kept whole so a test can decode them.
//!
//! [Voice]: https://core.telegram.org/bots/api#voice
//! [Audio]: https://core.telegram.org/bots/api#audio
//! [PhotoSize]: https://core.telegram.org/bots/api#photosize
//! [Document]: https://core.telegram.org/bots/api#document
//! [Video]: https://core.telegram.org/bots/api#video
//! [VideoNote]: https://core.telegram.org/bots/api#videonote

use serde_json::{Value, json};

/// "For the moment, bots can download files of up to 20MB in size" (getFile).
pub const MAX_DOWNLOAD_BYTES: u64 = 20 * 1024 * 1024;

/// The message field a file arrives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TgMediaKind {
    /// `voice`: recorded in the app, OGG/Opus.
    Voice,
    /// `audio`: a music file.
    Audio,
    /// `photo`: compressed by Telegram to JPEG, offered in several sizes.
    Photo,
    /// `document`: any file, sent as such.
    Document,
    /// `video`.
    Video,
    /// `video_note`: a round video message.
    VideoNote,
}

/// A file a user sends: its bytes, and what the message declares about it.
#[derive(Debug, Clone, PartialEq)]
pub struct TgMedia {
    pub kind: TgMediaKind,
    /// What a download serves.
    pub bytes: Vec<u8>,
    pub mime_type: Option<String>,
    pub file_name: Option<String>,
    /// `duration` in seconds (voice, audio, video, video note).
    pub duration: Option<u32>,
    /// `file_size` when it differs from `bytes.len()` (a lie, or a huge file not really held).
    pub declared_size: Option<u64>,
    /// The photo's largest size, in pixels.
    pub width: u32,
    pub height: u32,
}

impl TgMedia {
    fn new(kind: TgMediaKind, bytes: Vec<u8>) -> Self {
        Self { kind, bytes, mime_type: None, file_name: None, duration: None, declared_size: None, width: 0, height: 0 }
    }

    /// A voice note (`mime_type` `audio/ogg`, as Telegram's apps record them).
    pub fn voice(bytes: Vec<u8>, duration: u32) -> Self {
        Self { mime_type: Some("audio/ogg".into()), duration: Some(duration), ..Self::new(TgMediaKind::Voice, bytes) }
    }

    pub fn audio(bytes: Vec<u8>, duration: u32, mime_type: &str, file_name: &str) -> Self {
        Self {
            mime_type: Some(mime_type.into()),
            file_name: Some(file_name.into()),
            duration: Some(duration),
            ..Self::new(TgMediaKind::Audio, bytes)
        }
    }

    /// A photo whose largest size is `width`×`height` (a thumbnail at most 90 px long comes
    /// first, as Telegram lists sizes smallest first).
    pub fn photo(bytes: Vec<u8>, width: u32, height: u32) -> Self {
        Self { width, height, ..Self::new(TgMediaKind::Photo, bytes) }
    }

    pub fn document(bytes: Vec<u8>, file_name: &str, mime_type: Option<&str>) -> Self {
        Self { file_name: Some(file_name.into()), mime_type: mime_type.map(str::to_string), ..Self::new(TgMediaKind::Document, bytes) }
    }

    pub fn video(bytes: Vec<u8>, duration: u32) -> Self {
        Self {
            mime_type: Some("video/mp4".into()),
            duration: Some(duration),
            width: 640,
            height: 360,
            ..Self::new(TgMediaKind::Video, bytes)
        }
    }

    pub fn video_note(bytes: Vec<u8>, duration: u32) -> Self {
        Self { duration: Some(duration), width: 240, height: 240, ..Self::new(TgMediaKind::VideoNote, bytes) }
    }

    /// Declare `bytes` as its `file_size`, whatever it really holds.
    pub fn declaring_size(mut self, bytes: u64) -> Self {
        self.declared_size = Some(bytes);
        self
    }

    /// The size Telegram states, in the message and in `getFile`.
    pub fn stated_size(&self) -> u64 {
        self.declared_size.unwrap_or(self.bytes.len() as u64)
    }

    /// The folder Telegram's `file_path` puts it in, and its extension there (voice notes are
    /// `voice/file_N.oga`).
    pub(crate) fn stored_as(&self) -> (&'static str, String) {
        let named_extension = || {
            let extension = self.file_name.as_deref().and_then(|n| n.rsplit_once('.')).map(|(_, e)| e)?;
            extension.chars().all(|c| c.is_ascii_alphanumeric()).then(|| extension.to_ascii_lowercase()).filter(|e| !e.is_empty())
        };
        match self.kind {
            TgMediaKind::Voice => ("voice", "oga".into()),
            TgMediaKind::Audio => ("music", named_extension().unwrap_or_else(|| "mp3".into())),
            TgMediaKind::Photo => ("photos", "jpg".into()),
            TgMediaKind::Document => ("documents", named_extension().unwrap_or_else(|| "bin".into())),
            TgMediaKind::Video => ("videos", "mp4".into()),
            TgMediaKind::VideoNote => ("video_notes", "mp4".into()),
        }
    }

    /// The message field and its value for a stored file `file_id` / `unique_id`.
    pub(crate) fn message_field(&self, file_id: &str, unique_id: &str) -> (&'static str, Value) {
        let mut file = json!({"file_id": file_id, "file_unique_id": unique_id, "file_size": self.stated_size()});
        let mut set = |key: &str, value: Value| file[key] = value;
        if let Some(mime) = &self.mime_type
            && self.kind != TgMediaKind::Photo
            && self.kind != TgMediaKind::VideoNote
        {
            set("mime_type", json!(mime));
        }
        if let Some(name) = &self.file_name
            && matches!(self.kind, TgMediaKind::Audio | TgMediaKind::Document | TgMediaKind::Video)
        {
            set("file_name", json!(name));
        }
        let duration = json!(self.duration.unwrap_or(0));
        match self.kind {
            TgMediaKind::Voice => set("duration", duration),
            TgMediaKind::Audio => set("duration", duration),
            TgMediaKind::Video => {
                set("duration", duration);
                set("width", json!(self.width));
                set("height", json!(self.height));
            }
            TgMediaKind::VideoNote => {
                set("duration", duration);
                set("length", json!(self.width));
            }
            TgMediaKind::Photo => {
                set("width", json!(self.width));
                set("height", json!(self.height));
            }
            TgMediaKind::Document => {}
        }
        match self.kind {
            TgMediaKind::Voice => ("voice", file),
            TgMediaKind::Audio => ("audio", file),
            TgMediaKind::Document => ("document", file),
            TgMediaKind::Video => ("video", file),
            TgMediaKind::VideoNote => ("video_note", file),
            TgMediaKind::Photo => {
                // Telegram's smallest size is at most 90 px on its long side; a photo that small
                // comes in one size only.
                let long = self.width.max(self.height).max(1);
                if long <= 90 {
                    return ("photo", json!([file]));
                }
                let (w, h) = (self.width * 90 / long, self.height * 90 / long);
                let thumb = json!({"file_id": format!("{file_id}-thumb"), "file_unique_id": format!("{unique_id}t"),
                    "width": w, "height": h, "file_size": 100});
                ("photo", json!([thumb, file]))
            }
        }
    }
}

/// A file a user's message holds, as `getFile` and the download see it.
#[derive(Debug, Clone)]
pub(crate) struct StoredFile {
    pub path: String,
    pub unique_id: String,
    pub bytes: Vec<u8>,
    /// `file_size` as Telegram states it.
    pub stated_size: u64,
}

/// A file the bot uploaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentFile {
    pub chat_id: i64,
    pub message_id: i64,
    /// `sendVoice`, `sendAudio`, `sendDocument` or `sendPhoto`, lower-case as logged.
    pub method: String,
    pub file_name: String,
    pub bytes: Vec<u8>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telegram::FakeTelegram;

    /// `getFile` for `file_id`, as the Bot API answers it.
    async fn get_file(fake: &FakeTelegram, file_id: &str) -> Value {
        let url = format!("{}/bot{}/getFile?file_id={file_id}", fake.api_url(), fake.token());
        reqwest::get(url).await.unwrap().json().await.unwrap()
    }

    #[tokio::test]
    async fn get_file_refuses_over_20_mb_as_the_docs_say_and_downloads_are_counted() {
        let fake = FakeTelegram::start().await.unwrap();
        let alice = fake.user(42, "alice");
        fake.media(42, &alice, &TgMedia::voice(b"OggS...".to_vec(), 3).declaring_size(MAX_DOWNLOAD_BYTES + 1), None);
        fake.media(42, &alice, &TgMedia::voice(b"OggS-whole".to_vec(), 3), None);
        let refused = get_file(&fake, "file-1").await;
        assert_eq!((refused["ok"].clone(), refused["description"].clone()), (json!(false), json!("Bad Request: file is too big")));
        let found = get_file(&fake, "file-2").await;
        assert_eq!(found["result"]["file_size"], 10);
        let path = found["result"]["file_path"].as_str().unwrap();
        assert!(path.starts_with("voice/") && path.ends_with(".oga"), "{path}");
        let url = format!("{}/file/bot{}/{path}", fake.api_url(), fake.token());
        let body = reqwest::get(url).await.unwrap().bytes().await.unwrap();
        assert_eq!((&body[..], fake.media_bytes_served()), (&b"OggS-whole"[..], 10));
    }
}
