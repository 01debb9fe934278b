//! The waveform a voice note is shown with (MSC3245 / MSC1767's `waveform`, values 0–1), read
//! from the OGG/Opus file without decoding it: Opus is variable-bitrate, so a packet's size
//! follows how much is going on in its 20 ms (silence packets are a few bytes, speech tens to
//! hundreds). matrix-sdk only writes the `org.matrix.msc1767.audio` block (duration and
//! waveform) when both are given, so a rough, honest shape beats none.

/// How many bars clients draw; MSC3245 suggests 30–120.
const BARS: usize = 64;

/// The sizes of the audio packets in an Ogg stream (the two Opus header packets skipped), or
/// `None` when `ogg` is not an Ogg stream.
fn packet_sizes(ogg: &[u8]) -> Option<Vec<usize>> {
    let mut sizes = Vec::new();
    let mut at = 0;
    let mut current = 0usize;
    while at < ogg.len() {
        let header = ogg.get(at..at + 27)?;
        if &header[..4] != b"OggS" {
            return None;
        }
        let segments = usize::from(header[26]);
        let lacing = ogg.get(at + 27..at + 27 + segments)?;
        for &value in lacing {
            current += usize::from(value);
            // A lacing value under 255 ends a packet; 255 continues it.
            if value < 255 {
                sizes.push(current);
                current = 0;
            }
        }
        at += 27 + segments + lacing.iter().map(|&v| usize::from(v)).sum::<usize>();
    }
    Some(sizes.into_iter().skip(2).collect())
}

/// The waveform of an OGG/Opus voice note, `BARS` values in 0–1; `None` when it is not one.
pub(crate) fn waveform(ogg: &[u8]) -> Option<Vec<f32>> {
    let sizes = packet_sizes(ogg)?;
    if sizes.is_empty() {
        return None;
    }
    let bars: Vec<f32> = (0..BARS.min(sizes.len()))
        .map(|bar| {
            let (from, to) = (bar * sizes.len() / BARS.min(sizes.len()), (bar + 1) * sizes.len() / BARS.min(sizes.len()));
            let slice = &sizes[from..to.max(from + 1)];
            slice.iter().sum::<usize>() as f32 / slice.len() as f32
        })
        .collect();
    let (low, high) = bars.iter().fold((f32::MAX, 0f32), |(lo, hi), &b| (lo.min(b), hi.max(b)));
    let span = (high - low).max(1.0);
    Some(bars.iter().map(|b| ((b - low) / span).clamp(0.0, 1.0)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One Ogg page holding `packets` (each under 255 bytes).
    fn page(packets: &[usize]) -> Vec<u8> {
        let mut out = b"OggS".to_vec();
        out.extend_from_slice(&[0; 22]);
        out.push(packets.len() as u8);
        out.extend(packets.iter().map(|&p| p as u8));
        for &p in packets {
            out.extend(std::iter::repeat_n(0u8, p));
        }
        out
    }

    #[test]
    fn loud_packets_are_tall_bars_and_silence_is_flat() {
        let mut ogg = page(&[19]);
        ogg.extend(page(&[40]));
        ogg.extend(page(&[3, 3, 3, 120, 120, 120, 3, 3]));
        let bars = waveform(&ogg).unwrap();
        assert_eq!(bars.len(), 8);
        assert_eq!(bars[0], 0.0);
        assert_eq!(bars[3], 1.0);
        assert!(bars.iter().all(|b| (0.0..=1.0).contains(b)));
        assert_eq!(waveform(b"not an ogg stream at all, just text"), None);
        assert_eq!(waveform(&page(&[19])), None, "headers only: no audio");
    }
}
