//! One fetched mail → what the adapter does with it. [`judge`] reads the headers only (who sent
//! it, is it a machine's, is the sender authenticated); [`event`] reads the whole mail of a
//! sender the gateway allows: its new text, subject and attachments, and (for a reply) the
//! quoted mail it answers, marked as someone else's words.

use crate::decide::{self, Headers};
use crate::settings::EmailSettings;
use crate::text;
use hermes_adapter::media_cache::MediaCache;
use hermes_adapter::untrusted;
use hermes_adapter::{Attachment, CappedWriter, ChatType, InboundEvent, MessageKind, Platform, Refusal, SessionSource, save_capped};
use mail_parser::{MessageParser, MimeHeaders};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

/// The sender of a mail that may be answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sender {
    /// The `From` address, lower-cased: the session's chat id and the sender's id.
    pub address: String,
    pub display_name: Option<String>,
}

/// What to do with one mail, from its headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A person's mail from an authenticated address; the gateway's allowlist decides next.
    Candidate(Sender),
    /// A machine's mail (auto-reply, bounce, list): never answered, marked read.
    Automated(String),
    /// The sender could not be established (forged or unauthenticated `From`): ignored, left
    /// unread for a person to look at.
    Untrusted(String),
}

/// The header fields of a raw header block, topmost first, folded lines joined.
pub fn header_fields(raw: &[u8]) -> Vec<(String, String)> {
    let Some(message) = MessageParser::default().parse_headers(raw) else { return Vec::new() };
    message.headers_raw().map(|(name, value)| (name.to_string(), unfold(value))).collect()
}

fn unfold(value: &str) -> String {
    value.split(['\r', '\n']).map(str::trim).filter(|s| !s.is_empty()).collect::<Vec<_>>().join(" ")
}

/// Judge a mail by its header block.
pub fn judge(raw_headers: &[u8], settings: &EmailSettings) -> Verdict {
    let Some(message) = MessageParser::default().parse_headers(raw_headers) else {
        return Verdict::Untrusted("the header could not be parsed".into());
    };
    let fields = header_fields(raw_headers);
    let addresses: Vec<_> = message.from().map(|from| from.iter().collect()).unwrap_or_default();
    let [from] = addresses.as_slice() else {
        return Verdict::Untrusted(format!("the From header names {} addresses, not one", addresses.len()));
    };
    let Some(address) = from.address().map(crate::allowlist::normalize).filter(|a| crate::allowlist::is_address(a)) else {
        return Verdict::Untrusted("the From header has no usable address".into());
    };
    if fields.iter().filter(|(n, _)| n.eq_ignore_ascii_case("From")).count() > 1 {
        return Verdict::Untrusted("the mail has several From headers".into());
    }
    let own = crate::allowlist::normalize(&settings.address);
    if let Some(why) = decide::automated(&fields, &address, &own) {
        return Verdict::Automated(why);
    }
    if !settings.trust_from_header {
        let authserv_id = settings.authserv_id.as_deref().unwrap_or("");
        if let Err(why) = decide::authenticated(&fields as &Headers, authserv_id, &address) {
            return Verdict::Untrusted(why);
        }
    }
    let display_name =
        from.name().map(|n| n.chars().filter(|c| !c.is_control()).take(100).collect::<String>()).filter(|n| !n.trim().is_empty());
    Verdict::Candidate(Sender { address, display_name })
}

/// The session a sender's mail belongs to: one DM per address.
pub fn source(sender: &Sender) -> SessionSource {
    let mut source = SessionSource::new(Platform::new("email"), sender.address.clone(), ChatType::Dm).with_user(sender.address.clone());
    // The address is authenticated (or trusted by configuration) by now and names one mailbox,
    // so it is also the verified handle: allowlist entries match it whatever their case.
    source.user_handle = Some(sender.address.clone());
    if let Some(name) = &sender.display_name {
        source = source.with_display_name(name.clone());
        source.chat_name = Some(name.clone());
    }
    source
}

/// The inbox's id of a mail: the sender plus its Message-ID when it has one, so the same mail
/// delivered twice (a resend after an unclear SMTP failure, a copy after the mailbox was
/// rebuilt with a new UIDVALIDITY) is handled once; a sender cannot suppress another sender's
/// mail by reusing a Message-ID, because the sender is part of the id. A mail without a
/// Message-ID falls back to the mailbox position (UIDVALIDITY + UID), which is unique too.
pub fn event_id(own: &str, sender: &str, message_id: Option<&str>, uid_validity: u32, uid: u32) -> String {
    match message_id.map(str::trim).filter(|m| !m.is_empty()) {
        Some(id) => {
            let digest = Sha256::digest(format!("{sender}\0{id}").as_bytes());
            format!("email:{own}:{}", &hex::encode(digest)[..32])
        }
        None => format!("email:{own}:{uid_validity}:{uid}"),
    }
}

/// What a whole mail of an allowed sender gives the gateway, plus what threading needs.
pub struct Parsed {
    pub event: InboundEvent,
    /// Message-ID with angle brackets.
    pub message_id: Option<String>,
    pub subject: Option<String>,
    pub references: Vec<String>,
}

/// The event for the whole raw mail `raw` of `sender` (its attachments saved in the cache).
pub async fn event(raw: &[u8], sender: &Sender, settings: &EmailSettings, uid_validity: u32, uid: u32) -> Parsed {
    let own = crate::allowlist::normalize(&settings.address);
    let Some(message) = MessageParser::default().parse(raw) else {
        let mut event = InboundEvent::text(
            event_id(&own, &sender.address, None, uid_validity, uid),
            source(sender),
            "[an email that could not be read]",
        );
        event.message_id = None;
        return Parsed { event, message_id: None, subject: None, references: Vec::new() };
    };
    let message_id = message.message_id().map(|id| format!("<{}>", id.trim_matches(['<', '>'])));
    let subject = message.subject().map(str::to_string);
    let mut references: Vec<String> = message
        .references()
        .as_text_list()
        .map(|l| l.iter().map(|r| format!("<{}>", r.trim_matches(['<', '>']))).collect())
        .or_else(|| message.references().as_text().map(|r| vec![format!("<{}>", r.trim_matches(['<', '>']))]))
        .unwrap_or_default();
    references.truncate(50);
    // The text part, or the HTML part converted to text by the parser.
    let body = message.body_text(0).map(|b| b.into_owned()).unwrap_or_default();
    let mut text = text::with_subject(subject.as_deref(), &text::strip_quoted(&body));
    // A reply's quote is the mail it answers as the sender's program shows it: anyone could
    // have written it, so it reaches the agent marked as someone else's words.
    let quote = text::quoted(&body);
    if !message.in_reply_to().is_empty() && !quote.is_empty() {
        text = untrusted::with_reply_context(None, &quote, &text);
    }
    let mut attachments = Vec::new();
    for (index, part) in message.attachments().enumerate().take(MAX_ATTACHMENTS) {
        let name = part.attachment_name().map(text::safe_file_name).unwrap_or_else(|| format!("attachment-{index}"));
        let prefix = format!("{uid_validity}-{uid}-{index}");
        attachments.push(keep(settings, &prefix, name, mime_of(part), part.contents()).await);
    }
    let kind = attachments.first().map_or(MessageKind::Text, |a| a.kind);
    let mut event = InboundEvent::text(event_id(&own, &sender.address, message_id.as_deref(), uid_validity, uid), source(sender), text);
    event.message_id = message_id.clone();
    event.attachments = attachments;
    event.kind = kind;
    Parsed { event, message_id, subject, references }
}

/// Attachments of one mail looked at; past this they are left in the mailbox.
const MAX_ATTACHMENTS: usize = 20;

/// A part's MIME type, lower-cased (`application/octet-stream` when it names none).
fn mime_of(part: &mail_parser::MessagePart<'_>) -> String {
    match part.content_type() {
        Some(ct) => match ct.subtype() {
            Some(sub) => format!("{}/{}", ct.ctype(), sub).to_ascii_lowercase(),
            None => ct.ctype().to_ascii_lowercase(),
        },
        None => "application/octet-stream".to_string(),
    }
}

/// What a part is: every `audio/*` an audio file, except an Ogg/Opus one whose name says it is a
/// voice note (`voice…`, as phones and chat apps name recordings they mail), which is a voice
/// note; every `image/*` a photo; anything else a document.
pub fn kind_of(mime: &str, name: &str) -> MessageKind {
    let voice_named = name.to_ascii_lowercase().contains("voice");
    match mime.split_once('/').map_or(mime, |(top, _)| top) {
        "audio" if voice_named && matches!(mime, "audio/ogg" | "audio/opus") => MessageKind::Voice,
        "audio" => MessageKind::Audio,
        "image" => MessageKind::Photo,
        _ => MessageKind::Document,
    }
}

/// One part as an attachment: saved into the cache folder of its kind (private, never through
/// an existing path), or refused by the gateway's limits on its real size.
async fn keep(settings: &EmailSettings, prefix: &str, name: String, mime: String, contents: &[u8]) -> Attachment {
    let declared = Attachment::declared(kind_of(&mime, &name), name, Some(mime), Some(contents.len() as u64), None);
    let cap = match settings.media_limits.admit(&declared, settings.max_attachment_bytes as u64) {
        Ok(cap) => cap,
        Err(refusal) => return declared.refuse(refusal),
    };
    let folder = match MediaCache::new(&settings.media_dir).folder(declared.kind.cache_folder()) {
        Ok(folder) => folder,
        Err(e) => return declared.refuse(Refusal::Failed { detail: e.to_string() }),
    };
    let path = folder.join(declared.cache_file_name(prefix));
    // The same mail read again (a retried accept) finds its own earlier copy: replace it.
    let _ = tokio::fs::remove_file(&path).await;
    match save_capped(&path, cap, async |out: &mut CappedWriter<tokio::fs::File>| out.write_all(contents).await).await {
        Ok(bytes) => declared.saved(&path, bytes),
        Err(e) => declared.refuse(e.refusal()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn settings(trust: bool) -> EmailSettings {
        let mut s = EmailSettings::new("bot@example.test", "pw", PathBuf::from("/nonexistent"), PathBuf::from("/nonexistent"));
        s.trust_from_header = trust;
        s.authserv_id = Some("mx.example.test".into());
        s
    }

    #[test]
    fn judging_reads_sender_machines_and_authentication() {
        let good = b"Authentication-Results: mx.example.test; dkim=pass header.d=example.test\r\nFrom: Alice <Alice@Example.test>\r\nSubject: hi\r\n\r\n";
        assert_eq!(
            judge(good, &settings(false)),
            Verdict::Candidate(Sender { address: "alice@example.test".into(), display_name: Some("Alice".into()) })
        );
        let forged = b"From: Alice <alice@example.test>\r\nSubject: hi\r\n\r\n";
        assert!(matches!(judge(forged, &settings(false)), Verdict::Untrusted(_)));
        assert!(matches!(judge(forged, &settings(true)), Verdict::Candidate(_)));
        let two = b"From: alice@example.test, bob@example.test\r\n\r\n";
        assert!(matches!(judge(two, &settings(true)), Verdict::Untrusted(_)));
        let auto = b"From: alice@example.test\r\nAuto-Submitted: auto-replied\r\n\r\n";
        assert!(matches!(judge(auto, &settings(true)), Verdict::Automated(_)));
        let folded = b"Authentication-Results: mx.example.test;\r\n  dkim=pass header.d=example.test\r\nFrom: alice@example.test\r\n\r\n";
        assert!(matches!(judge(folded, &settings(false)), Verdict::Candidate(_)));
    }

    #[tokio::test]
    async fn an_html_only_mail_is_read_as_text() {
        let raw = b"From: Alice <alice@example.test>\r\nSubject: Re: x\r\nMessage-ID: <h1@x>\r\nMIME-Version: 1.0\r\n\
Content-Type: text/html; charset=utf-8\r\n\r\n<html><body><p>Hello <b>there</b></p><script>evil()</script></body></html>\r\n";
        let sender = Sender { address: "alice@example.test".into(), display_name: None };
        let parsed = event(raw, &sender, &settings(true), 1, 1).await;
        assert!(parsed.event.text.contains("Hello") && parsed.event.text.contains("there"), "{:?}", parsed.event.text);
        assert!(!parsed.event.text.contains('<'), "no markup left: {:?}", parsed.event.text);
        assert_eq!(parsed.message_id.as_deref(), Some("<h1@x>"));
    }

    #[test]
    fn audio_is_audio_a_named_ogg_recording_is_a_voice_note_images_are_photos() {
        assert_eq!(kind_of("audio/ogg", "Voice-2024-01-01.ogg"), MessageKind::Voice);
        assert_eq!(kind_of("audio/opus", "voice_note.opus"), MessageKind::Voice);
        assert_eq!(kind_of("audio/ogg", "song.ogg"), MessageKind::Audio);
        assert_eq!(kind_of("audio/mpeg", "voice.mp3"), MessageKind::Audio, "only Ogg/Opus recordings are voice notes");
        assert_eq!(kind_of("image/png", "x.png"), MessageKind::Photo);
        assert_eq!(kind_of("application/pdf", "voice.pdf"), MessageKind::Document);
    }

    #[tokio::test]
    async fn each_part_is_its_own_attachment_and_an_oversized_one_is_refused_unsaved() {
        let dir = tempfile::tempdir().unwrap();
        let mut settings = EmailSettings::new("bot@example.test", "pw", dir.path().join("s"), dir.path().join("m"));
        settings.trust_from_header = true;
        settings.media_limits.max_image_bytes = 8;
        let raw = b"From: alice@example.test\r\nSubject: media\r\nMessage-ID: <m@x>\r\nMIME-Version: 1.0\r\n\
Content-Type: multipart/mixed; boundary=\"B\"\r\n\r\n--B\r\nContent-Type: text/plain\r\n\r\nlisten\r\n\
--B\r\nContent-Type: audio/ogg\r\nContent-Disposition: attachment; filename=\"voice-note.ogg\"\r\n\r\nOggS-voice\r\n\
--B\r\nContent-Type: image/png\r\nContent-Disposition: attachment; filename=\"big.png\"\r\n\r\n0123456789abcdef\r\n--B--\r\n";
        let sender = Sender { address: "alice@example.test".into(), display_name: None };
        let event = event(raw, &sender, &settings, 1, 2).await.event;
        assert_eq!(event.kind, MessageKind::Voice, "the first attachment's kind");
        assert_eq!(event.text, "[Subject: media]\n\nlisten", "no notes: the gateway words a refusal");
        let [voice, image] = event.attachments.as_slice() else { panic!("{:?}", event.attachments) };
        assert_eq!((voice.kind, voice.mime.as_deref(), voice.name.as_str()), (MessageKind::Voice, Some("audio/ogg"), "voice-note.ogg"));
        assert_eq!(std::fs::read(voice.path.as_deref().unwrap()).unwrap(), b"OggS-voice");
        assert!(voice.path.as_deref().unwrap().contains("/audio/"), "{voice:?}");
        assert_eq!((image.kind, image.path.as_deref()), (MessageKind::Photo, None));
        assert_eq!(image.refused, Some(Refusal::TooLarge { limit_bytes: 8 }));
        assert!(!dir.path().join("m/images").exists() || std::fs::read_dir(dir.path().join("m/images")).unwrap().count() == 0);
    }

    #[test]
    fn a_mail_is_one_event_whatever_its_mailbox_position() {
        let a = event_id("bot@x", "alice@x", Some("<m1@x>"), 1, 5);
        assert_eq!(a, event_id("bot@x", "alice@x", Some("<m1@x>"), 9, 77), "the same mail after a UIDVALIDITY change");
        assert_ne!(a, event_id("bot@x", "eve@x", Some("<m1@x>"), 1, 5), "another sender reusing the id");
        assert_eq!(event_id("bot@x", "alice@x", None, 1, 5), "email:bot@x:1:5");
    }
}
