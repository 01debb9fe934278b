//! OGG/Opus recognition and playback length, read from the Ogg pages (RFC 3533) and the
//! `OpusHead` header (RFC 7845): enough to check what a speech engine produced and to tell a
//! platform how long a voice note plays, with no audio decoding.

/// Opus granule positions count 48 kHz samples whatever the input rate was (RFC 7845 §4).
const GRANULE_RATE: f64 = 48_000.0;
/// `OggS`, version, header type, granule (8), serial (4), sequence (4), CRC (4), segment count.
const PAGE_HEADER_LEN: usize = 27;

/// Why bytes are not a playable OGG/Opus stream.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OggError {
    #[error("the audio is not an Ogg file")]
    NotOgg,
    #[error("the Ogg file does not carry Opus audio")]
    NotOpus,
    #[error("the Ogg file is cut short")]
    Truncated,
    #[error("the Ogg file is damaged")]
    Corrupt,
}

struct Page<'a> {
    granule: u64,
    serial: u32,
    body: &'a [u8],
    len: usize,
}

/// The page at the start of `bytes`, or why there is none.
fn page(bytes: &[u8]) -> Result<Page<'_>, OggError> {
    if !bytes.starts_with(b"OggS") {
        return Err(OggError::NotOgg);
    }
    let header = bytes.get(..PAGE_HEADER_LEN).ok_or(OggError::Truncated)?;
    let segments = usize::from(header[26]);
    let table = bytes.get(PAGE_HEADER_LEN..PAGE_HEADER_LEN + segments).ok_or(OggError::Truncated)?;
    let body_len: usize = table.iter().map(|&lacing| usize::from(lacing)).sum();
    let start = PAGE_HEADER_LEN + segments;
    let body = bytes.get(start..start + body_len).ok_or(OggError::Truncated)?;
    let le = |range: std::ops::Range<usize>| header[range].iter().rev().fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
    Ok(Page { granule: le(6..14), serial: le(14..18) as u32, body, len: start + body_len })
}

/// Whether `bytes` start like an OGG/Opus stream (first page whole, first packet `OpusHead`).
pub fn is_ogg_opus(bytes: &[u8]) -> bool {
    page(bytes).is_ok_and(|first| first.body.starts_with(b"OpusHead"))
}

/// How long the stream plays, in seconds: the last page's granule position minus the encoder's
/// pre-skip, at 48 kHz. Every page must be whole, so a cut-short download is an error.
pub fn opus_duration(bytes: &[u8]) -> Result<f64, OggError> {
    let first = page(bytes)?;
    let head = first.body;
    if !head.starts_with(b"OpusHead") || head.len() < 19 {
        return Err(OggError::NotOpus);
    }
    let pre_skip = u64::from(u16::from_le_bytes([head[10], head[11]]));
    let (serial, mut last_granule, mut rest) = (first.serial, 0u64, &bytes[first.len..]);
    while !rest.is_empty() {
        let next = page(rest).map_err(|e| if e == OggError::NotOgg { OggError::Corrupt } else { e })?;
        // -1 marks a page on which no packet ends; other logical streams are not ours.
        if next.serial == serial && next.granule != u64::MAX {
            last_granule = next.granule;
        }
        rest = &rest[next.len..];
    }
    Ok(last_granule.saturating_sub(pre_skip) as f64 / GRANULE_RATE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_fakes::media::{ogg_opus_secs, voice_note};

    #[test]
    fn a_real_voice_note_is_recognised_and_its_length_matches_opusinfo() {
        let note = voice_note("Remind me to water the tomatoes on the balcony tomorrow morning.");
        assert!(is_ogg_opus(&note));
        let secs = opus_duration(&note).unwrap();
        assert!(secs > 2.0, "a sentence plays for seconds, got {secs}");
        assert!((secs - ogg_opus_secs(&note)).abs() < 0.002, "ours {secs}, opusinfo {}", ogg_opus_secs(&note));
    }

    #[test]
    fn junk_and_other_formats_are_told_apart() {
        assert_eq!(opus_duration(b""), Err(OggError::NotOgg));
        assert_eq!(opus_duration(b"ID3\x04 an mp3 pretending"), Err(OggError::NotOgg));
        assert_eq!(opus_duration(b"OggS\0"), Err(OggError::Truncated));
        assert!(!is_ogg_opus(b"RIFF....WAVEfmt "));
        // An Ogg page whose first packet is Vorbis, not Opus.
        let mut vorbis = b"OggS\0\x02".to_vec();
        vorbis.extend_from_slice(&[0; 20]);
        vorbis.push(1);
        vorbis.push(30);
        vorbis.extend_from_slice(b"\x01vorbis\0\0\0\0\x01\x44\xac\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0");
        assert!(!is_ogg_opus(&vorbis));
        assert_eq!(opus_duration(&vorbis), Err(OggError::NotOpus));
    }

    #[test]
    fn a_cut_short_note_is_an_error_not_a_shorter_length() {
        let note = voice_note("The train to Lisbon leaves at seven.");
        // Inside the last page, and inside the first (an OpusHead page is 47 bytes).
        for cut in [note.len() - 1, 40] {
            assert_eq!(opus_duration(&note[..cut]), Err(OggError::Truncated), "cut at {cut} of {}", note.len());
        }
        let mut trailing_junk = note.clone();
        trailing_junk.extend_from_slice(b"garbage");
        assert_eq!(opus_duration(&trailing_junk), Err(OggError::Corrupt));
    }
}
