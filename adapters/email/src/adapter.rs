//! [`EmailAdapter`]: the send side (a threaded plain-text reply, files as attachments, a
//! Message-ID derived from the idempotency key) and the entry to the IMAP loop in
//! [`crate::imap`].

use crate::settings::EmailSettings;
use crate::state::StateStore;
use crate::text;
use async_trait::async_trait;
use hermes_adapter::FileKind;
use hermes_adapter::pacing::{Destination, Pacer};
use hermes_adapter::{
    AdapterContext, AdapterError, Capabilities, CredentialId, LengthUnit, MarkdownDialect, OutboundMessage, Platform, PlatformAdapter,
    SendError, SendReceipt, StreamStyle,
};
use lettre::Message;
use lettre::message::header::ContentType;
use lettre::message::{Attachment, Mailbox, MultiPart, SinglePart};
use sha2::{Digest, Sha256};
use std::time::Duration;

/// Hermes' email limit: one mail carries at most this many characters of an answer.
pub const MAX_MESSAGE_LEN: usize = 50_000;
/// The largest file sent as an attachment.
const MAX_FILE_BYTES: u64 = 20 * 1024 * 1024;

pub struct EmailAdapter {
    platform: Platform,
    capabilities: Capabilities,
    pub(crate) settings: EmailSettings,
    pub(crate) store: StateStore,
    /// Mails handed to the SMTP server, kept under [`crate::EmailSendBudget`] and its 421s.
    pacer: Pacer<()>,
}

impl EmailAdapter {
    pub fn new(settings: EmailSettings) -> Self {
        let capabilities = Capabilities {
            max_message_len: MAX_MESSAGE_LEN,
            length_unit: LengthUnit::Chars,
            dialect: MarkdownDialect::Plain,
            streaming: StreamStyle::None,
            supports_edit: false,
            supports_buttons: false,
            supports_typing: false,
            supports_threads: false,
            supports_async_delivery: true,
            splits_long_messages: true,
            supports_files: true,
            // Mail is read later, not as it is written: no progress lines, one answer per turn.
            read_live: false,
            // But people answer mail: an approval prompt waits for their reply.
            people_reply: true,
            voice_notes: false,
        };
        let store = StateStore::new(settings.state_dir.clone());
        let pacer = Pacer::new(settings.budget.limits());
        Self { platform: Platform::new("email"), capabilities, settings, store, pacer }
    }

    /// The Message-ID of the mail for `idempotency_key`: the same key always gives the same id,
    /// so a resent answer is recognisable as the same mail.
    pub fn message_id_for(&self, idempotency_key: &str) -> String {
        let digest = Sha256::digest(idempotency_key.as_bytes());
        format!("<hermes.{}@{}>", &hex::encode(digest)[..32], self.settings.domain())
    }

    /// The whole mail for `msg`, threaded under the mail it answers when one is known.
    pub(crate) async fn compose(&self, msg: &OutboundMessage) -> Result<Message, SendError> {
        let to_address = crate::allowlist::normalize(&msg.target.chat_id);
        if !crate::allowlist::is_address(&to_address) {
            return Err(SendError::NotFound(format!("`{}` is not an email address", msg.target.chat_id)));
        }
        let to: Mailbox = to_address.parse().map_err(|e| SendError::NotFound(format!("`{to_address}` is not an email address: {e}")))?;
        let from: Mailbox = self
            .settings
            .address
            .parse()
            .map_err(|e| SendError::Other(format!("EMAIL_ADDRESS `{}` is not an address: {e}", self.settings.address)))?;
        let thread = self.store.thread_for(&to_address, msg.reply_to.as_deref());
        let subject = match &thread {
            Some(thread) => text::reply_subject(thread.subject.as_deref()),
            None => "Message from Hermes".to_string(),
        };
        let mut builder = Message::builder()
            .from(from)
            .to(to)
            .subject(subject)
            .message_id(Some(self.message_id_for(&msg.idempotency_key)))
            .header(AutoReplied);
        if let Some(thread) = &thread {
            let mut references = thread.references.clone();
            references.push(thread.message_id.clone());
            builder = builder.in_reply_to(thread.message_id.clone()).references(references.join(" "));
        }
        let body = SinglePart::builder().header(ContentType::TEXT_PLAIN).body(msg.text.clone());
        let built = match &msg.file {
            None => builder.singlepart(body),
            Some(file) => {
                let size = tokio::fs::metadata(&file.path).await.map(|m| m.len()).unwrap_or(0);
                if size > MAX_FILE_BYTES {
                    return Err(SendError::TooLong);
                }
                let bytes =
                    tokio::fs::read(&file.path).await.map_err(|e| SendError::Other(format!("could not read `{}`: {e}", file.file_name)))?;
                // A voice note is an Ogg/Opus recording whatever it is called; mail has no
                // voice notes, so it arrives as an audio file.
                let kind = if file.kind == FileKind::Voice { audio_ogg() } else { content_type_for(&file.file_name) };
                let attachment = Attachment::new(text::safe_file_name(&file.file_name)).body(bytes, kind);
                builder.multipart(MultiPart::mixed().singlepart(body).singlepart(attachment))
            }
        };
        built.map_err(|e| SendError::Other(format!("could not build the mail: {e}")))
    }
}

/// `Auto-Submitted: auto-replied` (RFC 3834) on every answer: vacation responders and other bots
/// (another hermes among them) do not answer it, so two machines cannot mail each other forever.
#[derive(Clone)]
struct AutoReplied;

impl lettre::message::header::Header for AutoReplied {
    fn name() -> lettre::message::header::HeaderName {
        lettre::message::header::HeaderName::new_from_ascii_str("Auto-Submitted")
    }
    fn parse(_: &str) -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        Ok(AutoReplied)
    }
    fn display(&self) -> lettre::message::header::HeaderValue {
        lettre::message::header::HeaderValue::new(Self::name(), "auto-replied".to_string())
    }
}

fn content_type_for(name: &str) -> ContentType {
    let extension = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).unwrap_or_default();
    let mime = match extension.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "pdf" => "application/pdf",
        "txt" | "md" | "log" => "text/plain",
        "csv" => "text/csv",
        "ogg" | "oga" | "opus" => "audio/ogg",
        "mp3" => "audio/mpeg",
        "m4a" => "audio/mp4",
        "wav" => "audio/wav",
        "webm" => "audio/webm",
        _ => "application/octet-stream",
    };
    ContentType::parse(mime).unwrap_or(ContentType::TEXT_PLAIN)
}

fn audio_ogg() -> ContentType {
    ContentType::parse("audio/ogg").unwrap_or(ContentType::TEXT_PLAIN)
}

#[async_trait]
impl PlatformAdapter for EmailAdapter {
    fn platform(&self) -> &Platform {
        &self.platform
    }

    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    async fn probe(&self) -> Result<Option<String>, AdapterError> {
        self.identify_for_probe().await
    }

    async fn run(&self, ctx: AdapterContext) -> Result<(), AdapterError> {
        // The SMTP check runs beside the mailbox, so a slow SMTP server never delays reading.
        let smtp_refused = async {
            match self.smtp_certificate_problem().await {
                Some(e) => e,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            ended = crate::imap::run(self, ctx) => ended,
            refused = smtp_refused => Err(refused),
        }
    }

    /// The mailbox, not the password: two gateways reading one mailbox would take each other's
    /// mail.
    fn credential(&self) -> Option<CredentialId> {
        let mailbox = format!("{}\0{}", self.settings.imap_host.to_ascii_lowercase(), self.settings.address.to_ascii_lowercase());
        Some(CredentialId::new("email mailbox", &mailbox))
    }

    fn liveness_timeout(&self) -> Option<Duration> {
        // Progress comes at least once per IDLE renewal or poll.
        Some(self.settings.idle_renewal.max(self.settings.poll_interval) + Duration::from_secs(120))
    }

    async fn send(&self, msg: &OutboundMessage) -> Result<SendReceipt, SendError> {
        if msg.text.trim().is_empty() && msg.file.is_none() {
            return Err(SendError::Other("nothing to send: the message is empty".to_string()));
        }
        let mail = self.compose(msg).await?;
        let message_id = self.message_id_for(&msg.idempotency_key);
        self.pacer.acquire(Destination::global()).await;
        if let Err(e) = crate::smtp::send(&self.settings, mail.envelope(), &mail.formatted()).await {
            if let SendError::RateLimited { retry_after } = &e {
                // "Too busy" is the server's, not this mail's: every mail waits.
                self.pacer.block_all(*retry_after);
            }
            return Err(e);
        }
        Ok(SendReceipt { message_id: Some(message_id) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_adapter::ChatTarget;

    fn adapter(dir: &std::path::Path) -> EmailAdapter {
        EmailAdapter::new(EmailSettings::new("bot@example.test", "pw", dir.join("state"), dir.join("media")))
    }

    fn message(to: &str, reply_to: Option<&str>, key: &str) -> OutboundMessage {
        OutboundMessage {
            target: ChatTarget { platform: Platform::new("email"), chat_id: to.into(), thread_id: None },
            text: "Hello".into(),
            reply_to: reply_to.map(str::to_string),
            idempotency_key: key.into(),
            is_final: true,
            usage: None,
            finish_reason: None,
            buttons: Vec::new(),
            file: None,
        }
    }

    #[tokio::test]
    async fn replies_thread_under_the_mail_they_answer() {
        let dir = tempfile::tempdir().unwrap();
        let a = adapter(dir.path());
        a.store.remember("alice@example.test", "<m1@example.test>", Some("Plans"), vec!["<m0@example.test>".into()]);
        let mail =
            String::from_utf8(a.compose(&message("alice@example.test", Some("<m1@example.test>"), "t1:0")).await.unwrap().formatted())
                .unwrap();
        assert!(mail.contains("Subject: Re: Plans\r\n"), "{mail}");
        assert!(mail.contains("In-Reply-To: <m1@example.test>\r\n"), "{mail}");
        assert!(mail.contains("References: <m0@example.test> <m1@example.test>\r\n"), "{mail}");
        assert!(mail.contains(&format!("Message-ID: {}\r\n", a.message_id_for("t1:0"))), "{mail}");
        assert!(mail.contains("Auto-Submitted: auto-replied\r\n"), "{mail}");
        assert_eq!(a.message_id_for("t1:0"), a.message_id_for("t1:0"));
        assert_ne!(a.message_id_for("t1:0"), a.message_id_for("t1:1"));
    }

    #[tokio::test]
    async fn a_file_goes_as_an_attachment_under_the_text() {
        let dir = tempfile::tempdir().unwrap();
        let a = adapter(dir.path());
        let path = dir.path().join("report.csv");
        std::fs::write(&path, "a,b\n1,2\n").unwrap();
        let mut msg = message("alice@example.test", None, "t2:0");
        msg.file = Some(hermes_adapter::OutboundFile::new(path, true));
        let mail = String::from_utf8(a.compose(&msg).await.unwrap().formatted()).unwrap();
        assert!(mail.contains("multipart/mixed"), "{mail}");
        assert!(mail.contains("filename=\"report.csv\""), "{mail}");
        assert!(mail.contains("Content-Type: text/csv"), "{mail}");
        assert!(mail.contains("Hello"), "{mail}");
    }

    #[tokio::test]
    async fn a_voice_answer_is_an_ogg_audio_attachment() {
        let dir = tempfile::tempdir().unwrap();
        let a = adapter(dir.path());
        let path = dir.path().join("reply-1");
        std::fs::write(&path, b"OggS\0\x02").unwrap();
        let mut msg = message("alice@example.test", None, "t3:0");
        msg.file = Some(hermes_adapter::OutboundFile::voice(path, 2.5));
        let mail = String::from_utf8(a.compose(&msg).await.unwrap().formatted()).unwrap();
        assert!(mail.contains("Content-Type: audio/ogg"), "whatever the file is called: {mail}");
        assert_eq!(content_type_for("answer.opus"), audio_ogg());
        assert_eq!(content_type_for("song.mp3"), ContentType::parse("audio/mpeg").unwrap());
    }

    #[tokio::test]
    async fn a_target_that_is_not_an_address_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let a = adapter(dir.path());
        for bad in ["alice", "alice@example.test\r\nBcc: eve@evil.test", "a@b, c@d"] {
            assert!(matches!(a.compose(&message(bad, None, "k")).await, Err(SendError::NotFound(_))), "{bad:?}");
        }
    }
}
