//! Files the bot sends: photos, documents and voice notes, with the message's text as their
//! caption. A voice note goes out with `sendVoice` (Telegram plays it inline, its length shown);
//! a chat whose user accepts no voice messages (Telegram answers `VOICE_MESSAGES_FORBIDDEN`) gets
//! the same recording as a file instead: with `sendAudio` where the Bot API takes it as music
//! ("must be in the .MP3 or .M4A format"), else with `sendDocument`.

use crate::adapter::TelegramAdapter;
use crate::errors::{self, classify};
use hermes_adapter::{FileKind, OutboundFile, SendError, SendReceipt};
use teloxide::payloads::{SendAudioSetters, SendDocumentSetters, SendPhotoSetters, SendVoiceSetters};
use teloxide::prelude::Requester;
use teloxide::types::{ChatId, InputFile, Message, ParseMode, ThreadId};
use teloxide::{ApiError, RequestError};

/// Where a file goes and the words that come with it.
pub(crate) struct Upload {
    pub chat: i64,
    pub thread: Option<ThreadId>,
    /// Telegram HTML, already rendered by the gateway.
    pub caption: Option<String>,
}

/// Caption (as HTML) and topic, set alike on every kind of file request.
macro_rules! decorate {
    ($request:expr, $upload:expr) => {{
        let mut request = $request;
        if let Some(c) = &$upload.caption {
            request = request.caption(c.clone()).parse_mode(ParseMode::Html);
        }
        if let Some(t) = $upload.thread {
            request = request.message_thread_id(t);
        }
        request
    }};
}

impl TelegramAdapter {
    /// Sends `file` as its kind asks; a voice note refused by the chat's privacy settings is sent
    /// again as a file.
    pub(crate) async fn send_upload(&self, upload: &Upload, file: &OutboundFile) -> Result<SendReceipt, SendError> {
        self.budget.acquire(upload.chat).await;
        let mut sent = match file.kind {
            FileKind::Image => decorate!(self.bot.send_photo(ChatId(upload.chat), input(file)), upload).await,
            FileKind::Document => self.send_document(upload, file).await,
            FileKind::Voice => self.send_voice(upload, file).await,
        };
        if file.kind == FileKind::Voice && sent.as_ref().is_err_and(voice_forbidden) {
            tracing::info!(chat = upload.chat, "this chat accepts no voice messages; sending the recording as a file");
            self.budget.acquire(upload.chat).await;
            sent = if is_music(file) {
                decorate!(self.bot.send_audio(ChatId(upload.chat), input(file)), upload).await
            } else {
                self.send_document(upload, file).await
            };
        }
        match sent {
            Ok(message) => Ok(SendReceipt { message_id: Some(message.id.0.to_string()) }),
            Err(e) => {
                if let Some(wait) = errors::retry_after(&e) {
                    self.budget.block(upload.chat, wait);
                }
                Err(classify(e))
            }
        }
    }

    async fn send_document(&self, upload: &Upload, file: &OutboundFile) -> Result<Message, RequestError> {
        decorate!(self.bot.send_document(ChatId(upload.chat), input(file)), upload).await
    }

    /// With its length, which Telegram shows before it is played.
    async fn send_voice(&self, upload: &Upload, file: &OutboundFile) -> Result<Message, RequestError> {
        let mut request = decorate!(self.bot.send_voice(ChatId(upload.chat), input(file)), upload);
        if let Some(secs) = file.duration_secs.filter(|s| s.is_finite() && *s > 0.0) {
            // Whole seconds on the wire; a float past u32 saturates, which no voice note reaches.
            request = request.duration(secs.ceil() as u32);
        }
        request.await
    }
}

fn input(file: &OutboundFile) -> InputFile {
    InputFile::file(file.path.clone()).file_name(file.file_name.clone())
}

/// The recipient's privacy settings refuse voice messages.
fn voice_forbidden(error: &RequestError) -> bool {
    matches!(error, RequestError::Api(ApiError::Unknown(detail)) if detail.contains("VOICE_MESSAGES_FORBIDDEN"))
}

/// Formats `sendAudio` takes; an OGG/Opus recording goes as a document.
fn is_music(file: &OutboundFile) -> bool {
    let extension = file.path.extension().map(|e| e.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
    matches!(extension.as_str(), "mp3" | "m4a")
}
