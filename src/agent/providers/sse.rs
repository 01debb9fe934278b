//! A minimal Server-Sent Events decoder for provider streams: feed it bytes, get `data:` payloads.

/// Accumulates bytes and yields complete events' data fields.
#[derive(Debug, Default)]
pub(crate) struct SseDecoder {
    buf: String,
    pending_bytes: Vec<u8>,
}

impl SseDecoder {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Feed a chunk; returns the data of every event completed by it, in order.
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> Vec<String> {
        // A UTF-8 sequence may be split across network chunks; keep the incomplete tail.
        self.pending_bytes.extend_from_slice(chunk);
        let valid_up_to = match std::str::from_utf8(&self.pending_bytes) {
            Ok(_) => self.pending_bytes.len(),
            Err(e) => e.valid_up_to(),
        };
        let text = String::from_utf8_lossy(&self.pending_bytes[..valid_up_to]).into_owned();
        self.pending_bytes.drain(..valid_up_to);
        self.buf.push_str(&text.replace("\r\n", "\n"));
        let mut events = Vec::new();
        while let Some(end) = self.buf.find("\n\n") {
            let block: String = self.buf.drain(..end + 2).collect();
            let mut data = Vec::new();
            for line in block.lines() {
                if let Some(rest) = line.strip_prefix("data:") {
                    data.push(rest.strip_prefix(' ').unwrap_or(rest).to_string());
                }
            }
            if !data.is_empty() {
                events.push(data.join("\n"));
            }
        }
        events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_events_across_chunks_and_utf8_boundaries() {
        let mut d = SseDecoder::new();
        let payload = "data: {\"a\":\"é\"}\n\ndata: [DONE]\n\n".as_bytes();
        let (a, b) = payload.split_at(12); // inside the two-byte é
        assert!(d.feed(a).is_empty());
        let events = d.feed(b);
        assert_eq!(events, vec!["{\"a\":\"é\"}".to_string(), "[DONE]".to_string()]);
    }

    #[test]
    fn ignores_comments_and_named_events_without_data() {
        let mut d = SseDecoder::new();
        assert!(d.feed(b": keep-alive\n\n").is_empty());
        assert_eq!(d.feed(b"event: x\ndata: 1\r\n\r\n"), vec!["1"]);
    }
}
