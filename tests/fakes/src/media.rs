//! Real media for tests: voice notes spoken by espeak-ng and encoded by opusenc (the OGG/Opus a
//! phone sends), pictures encoded by the `image` crate, and the playback length of a voice note
//! as `opusinfo` reports it (a reference independent of hermes' own Ogg reader); how the fakes
//! serve a user's file (in chunks, counting what the client really read), and what a test reads
//! back from the media cache.

use std::io::Cursor;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

const INSTALL_HINT: &str = "apt install espeak-ng opus-tools (or run tests/peers/install.sh)";

/// `text` spoken by espeak-ng at 150 words a minute, as OGG/Opus at 24 kbit/s. Use varied
/// sentences: Whisper hears a repeated phrase as silence.
///
/// # Panics
/// When espeak-ng or opusenc is missing (the message says what to install) or fails.
pub fn voice_note(text: &str) -> Vec<u8> {
    let pipeline = "espeak-ng -s 150 --stdout \"$1\" | opusenc --quiet --bitrate 24 - -";
    let output = Command::new("sh")
        .args(["-c", pipeline, "sh", text])
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("voice_note: cannot run sh ({e}); {INSTALL_HINT}"));
    if !output.status.success() || !output.stdout.starts_with(b"OggS") {
        panic!(
            "voice_note: espeak-ng | opusenc failed ({}): {}; {INSTALL_HINT}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    output.stdout
}

/// `text` spoken by espeak-ng as a WAV file (what a speech server sends for `wav`).
///
/// # Panics
/// When espeak-ng is missing or fails.
pub fn wav(text: &str) -> Vec<u8> {
    let output = Command::new("espeak-ng")
        .args(["-s", "150", "--stdout", text])
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("wav: cannot run espeak-ng ({e}); {INSTALL_HINT}"));
    assert!(output.status.success() && output.stdout.starts_with(b"RIFF"), "wav: espeak-ng failed; {INSTALL_HINT}");
    output.stdout
}

/// How long an OGG/Opus stream plays, in seconds, as `opusinfo` reports it.
///
/// # Panics
/// When opusinfo is missing or the bytes are not OGG/Opus.
pub fn ogg_opus_secs(bytes: &[u8]) -> f64 {
    // opusinfo reads files only, not stdin.
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let path = std::env::temp_dir().join(format!("hermes-fakes-{}-{}.ogg", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
    std::fs::write(&path, bytes).expect("the voice note is written for opusinfo");
    let output = Command::new("opusinfo").arg(&path).stdin(Stdio::null()).output();
    let _ = std::fs::remove_file(&path);
    let output = output.unwrap_or_else(|e| panic!("ogg_opus_secs: cannot run opusinfo ({e}); {INSTALL_HINT}"));
    let text = String::from_utf8_lossy(&output.stdout);
    // "	Playback length: 0m:11.740s"
    let length = text
        .lines()
        .find_map(|line| line.trim().strip_prefix("Playback length: "))
        .unwrap_or_else(|| panic!("ogg_opus_secs: opusinfo found no Opus stream: {text}"));
    let (minutes, seconds) = length.trim_end_matches('s').split_once("m:").expect("opusinfo prints `Mm:S.SSSs`");
    minutes.parse::<f64>().expect("minutes") * 60.0 + seconds.parse::<f64>().expect("seconds")
}

/// A `width`×`height` PNG of a colour gradient (not one flat colour, so a resize is visible).
pub fn png(width: u32, height: u32) -> Vec<u8> {
    encode(width, height, image::ImageFormat::Png)
}

/// A `width`×`height` JPEG of the same gradient as [`png`].
pub fn jpeg(width: u32, height: u32) -> Vec<u8> {
    encode(width, height, image::ImageFormat::Jpeg)
}

fn encode(width: u32, height: u32, format: image::ImageFormat) -> Vec<u8> {
    let picture = image::RgbImage::from_fn(width, height, |x, y| {
        let scale = |v: u32, max: u32| u8::try_from(v * 255 / max.max(1)).unwrap_or(u8::MAX);
        image::Rgb([scale(x, width), scale(y, height), 128])
    });
    let mut bytes = Cursor::new(Vec::new());
    picture.write_to(&mut bytes, format).expect("encoding a picture in memory cannot fail");
    bytes.into_inner()
}

/// A user's file as a platform serves it for download: in chunks of `chunk` bytes with its
/// `Content-Length`, each chunk passed to `served` when the client pulls it, so a client that
/// stops reading (at its byte cap) stops the count.
pub fn counted_download(bytes: Vec<u8>, chunk: usize, served: impl Fn(u64) + Send + Sync + 'static) -> axum::response::Response {
    use axum::http::{StatusCode, header};
    use futures::StreamExt;
    let length = bytes.len();
    let bytes = bytes::Bytes::from(bytes);
    let chunks = (0..length.div_ceil(chunk)).map(move |i| bytes.slice(i * chunk..((i + 1) * chunk).min(length)));
    let stream = futures::stream::iter(chunks).map(move |part| {
        served(part.len() as u64);
        Ok::<bytes::Bytes, std::io::Error>(part)
    });
    axum::response::Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_LENGTH, length)
        .header(header::CONTENT_TYPE, "application/octet-stream")
        .body(axum::body::Body::from_stream(stream))
        .unwrap_or_default()
}

/// Every file under the folders of the media cache at `cache` (saved or half-written).
pub fn cached_files(cache: &std::path::Path) -> Vec<String> {
    let mut found = Vec::new();
    for folder in std::fs::read_dir(cache).into_iter().flatten().flatten() {
        for file in std::fs::read_dir(folder.path()).into_iter().flatten().flatten() {
            found.push(file.path().display().to_string());
        }
    }
    found
}

/// The bytes an adapter saved for `attachment`; panics when it was not saved.
pub fn saved_bytes(attachment: &hermes_adapter::Attachment) -> Vec<u8> {
    let path = attachment.path.as_deref().unwrap_or_else(|| panic!("not saved: {attachment:?}"));
    std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_voice_note_is_ogg_opus_that_plays_for_seconds() {
        let note = voice_note("What is the weather going to be like in Paris this weekend?");
        assert!(note.starts_with(b"OggS") && note.windows(8).any(|w| w == b"OpusHead"));
        let secs = ogg_opus_secs(&note);
        assert!((2.0..10.0).contains(&secs), "{secs} s");
    }

    #[test]
    fn pictures_decode_to_their_size() {
        for (bytes, format) in [(png(64, 48), image::ImageFormat::Png), (jpeg(64, 48), image::ImageFormat::Jpeg)] {
            assert_eq!(image::guess_format(&bytes).unwrap(), format);
            let decoded = image::load_from_memory(&bytes).unwrap();
            assert_eq!((decoded.width(), decoded.height()), (64, 48));
        }
    }
}
