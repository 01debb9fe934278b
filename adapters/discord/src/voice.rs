//! Voice messages out: an OGG/Opus file sent the way Discord's own client sends a recording,
//! which Discord shows as a playable voice message. The message has flag `IS_VOICE_MESSAGE`
//! (1 << 13), exactly one attachment that carries `duration_secs` and a `waveform` (base64 of at
//! most 256 one-byte amplitudes), and no content. serenity 0.12's `CreateAttachment` has neither
//! field, so the multipart request is made through [`Http::send_message`] with a payload of our
//! own. Where voice messages are not allowed (Discord's error 50173), the caller sends an
//! ordinary file instead.

use crate::errors::classify;
use hermes_adapter::{OutboundFile, SendError};
use serde::Serialize;
use serenity::builder::CreateAttachment;
use serenity::http::{Http, HttpError};
use serenity::model::id::{ChannelId, MessageId};

/// `IS_VOICE_MESSAGE`.
const VOICE_MESSAGE_FLAG: u64 = 1 << 13;
/// "Cannot send voice messages in this channel".
const CANNOT_SEND_VOICE: isize = 50173;
/// The name Discord's client gives a recording; it shows none to the listener.
const FILE_NAME: &str = "voice-message.ogg";
/// Amplitude samples in the waveform preview (Discord takes at most 256).
const WAVEFORM_SAMPLES: usize = 64;
/// A mid-level amplitude: the waveform is a flat bar (the audio is not decoded to draw it).
const FLAT_AMPLITUDE: u8 = 128;

#[derive(Serialize)]
struct Payload {
    flags: u64,
    attachments: [AttachmentMeta; 1],
    nonce: String,
    enforce_nonce: bool,
    allowed_mentions: NoMentions,
    #[serde(skip_serializing_if = "Option::is_none")]
    message_reference: Option<Reference>,
}

#[derive(Serialize)]
struct AttachmentMeta {
    id: u64,
    filename: &'static str,
    duration_secs: f64,
    waveform: String,
}

#[derive(Serialize)]
struct NoMentions {
    parse: [&'static str; 0],
}

#[derive(Serialize)]
struct Reference {
    message_id: String,
    fail_if_not_exists: bool,
}

/// How a voice message went.
pub(crate) enum Sent {
    /// Posted as a voice message.
    Voice(MessageId),
    /// The channel takes no voice messages: send the file as an ordinary attachment.
    NotAllowedHere,
}

/// Sends `file` (OGG/Opus) as a voice message in `channel`, replying to `reply_to` when given.
pub(crate) async fn send(
    http: &Http,
    channel: ChannelId,
    file: &OutboundFile,
    nonce: String,
    reply_to: Option<u64>,
) -> Result<Sent, SendError> {
    let bytes = tokio::fs::read(&file.path).await.map_err(|e| SendError::Other(format!("could not read `{}`: {e}", file.file_name)))?;
    let payload = Payload {
        flags: VOICE_MESSAGE_FLAG,
        attachments: [AttachmentMeta {
            id: 0,
            filename: FILE_NAME,
            duration_secs: file.duration_secs.filter(|d| d.is_finite() && *d > 0.0).unwrap_or(1.0),
            waveform: base64(&[FLAT_AMPLITUDE; WAVEFORM_SAMPLES]),
        }],
        nonce,
        enforce_nonce: true,
        allowed_mentions: NoMentions { parse: [] },
        message_reference: reply_to.map(|id| Reference { message_id: id.to_string(), fail_if_not_exists: false }),
    };
    match http.send_message(channel, vec![CreateAttachment::bytes(bytes, FILE_NAME)], &payload).await {
        Ok(message) => Ok(Sent::Voice(message.id)),
        Err(serenity::Error::Http(HttpError::UnsuccessfulRequest(response))) if response.error.code == CANNOT_SEND_VOICE => {
            tracing::info!(channel = channel.get(), "Discord takes no voice messages in this channel; sending the audio as a file");
            Ok(Sent::NotAllowedHere)
        }
        Err(e) => Err(classify(e)),
    }
}

/// Standard base64 with padding (the waveform field's encoding).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_standard_alphabet_and_padding() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(&[0xff, 0x00, 0x80, 0x7f]), "/wCAfw==");
    }
}
