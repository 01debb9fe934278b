//! A `multipart/form-data` body (RFC 7578) written by hand: the speech-to-text upload is text
//! fields and one file, and the project's reqwest is built without its `multipart` feature.

use rand::Rng;

/// A form being written; [`Form::finish`] gives the `Content-Type` and the body.
pub(crate) struct Form {
    boundary: String,
    body: Vec<u8>,
}

impl Form {
    /// A form whose boundary appears in none of `payloads` (the file bytes), so no part can end
    /// early whatever the audio contains.
    pub(crate) fn new(payloads: &[&[u8]]) -> Self {
        let mut rng = rand::rng();
        loop {
            let boundary = format!("hermes-{:032x}", rng.random::<u128>());
            if !payloads.iter().any(|p| p.windows(boundary.len()).any(|w| w == boundary.as_bytes())) {
                return Self { boundary, body: Vec::new() };
            }
        }
    }

    /// A text field. Names and values are ours or the operator's configuration; quotes and line
    /// breaks are dropped so no value can forge a header.
    pub(crate) fn text(&mut self, name: &str, value: &str) {
        self.open_part(name, None, None);
        self.body.extend_from_slice(header_safe(value).as_bytes());
        self.body.extend_from_slice(b"\r\n");
    }

    /// A file field with its file name and content type.
    pub(crate) fn file(&mut self, name: &str, file_name: &str, content_type: &str, bytes: &[u8]) {
        self.open_part(name, Some(file_name), Some(content_type));
        self.body.extend_from_slice(bytes);
        self.body.extend_from_slice(b"\r\n");
    }

    fn open_part(&mut self, name: &str, file_name: Option<&str>, content_type: Option<&str>) {
        let mut head = format!("--{}\r\nContent-Disposition: form-data; name=\"{}\"", self.boundary, header_safe(name));
        if let Some(file_name) = file_name {
            head.push_str(&format!("; filename=\"{}\"", header_safe(file_name)));
        }
        if let Some(content_type) = content_type {
            head.push_str(&format!("\r\nContent-Type: {}", header_safe(content_type)));
        }
        head.push_str("\r\n\r\n");
        self.body.extend_from_slice(head.as_bytes());
    }

    /// The `Content-Type` header value and the whole body.
    pub(crate) fn finish(mut self) -> (String, Vec<u8>) {
        self.body.extend_from_slice(format!("--{}--\r\n", self.boundary).as_bytes());
        (format!("multipart/form-data; boundary={}", self.boundary), self.body)
    }
}

fn header_safe(value: &str) -> String {
    value.chars().filter(|c| !matches!(c, '"' | '\r' | '\n' | '\\')).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_has_each_field_once_and_the_file_bytes_untouched() {
        let audio = b"OggS\r\n--not-a-boundary\r\n\0\xff";
        let mut form = Form::new(&[audio]);
        form.text("model", "whisper-1");
        form.file("file", "voice.ogg", "audio/ogg", audio);
        let (content_type, body) = form.finish();
        let boundary = content_type.strip_prefix("multipart/form-data; boundary=").unwrap();
        let text = String::from_utf8_lossy(&body);
        assert_eq!(text.matches(&format!("--{boundary}\r\n")).count(), 2);
        assert!(text.ends_with(&format!("--{boundary}--\r\n")));
        assert!(text.contains("name=\"model\"\r\n\r\nwhisper-1\r\n"));
        assert!(text.contains("name=\"file\"; filename=\"voice.ogg\"\r\nContent-Type: audio/ogg\r\n\r\n"));
        assert!(body.windows(audio.len()).any(|w| w == audio));
    }

    #[test]
    fn a_value_cannot_add_a_header_or_end_a_part() {
        let mut form = Form::new(&[]);
        form.text("language", "en\r\nContent-Type: text/html\"");
        let (_, body) = form.finish();
        let text = String::from_utf8(body).unwrap();
        assert!(text.contains("\r\n\r\nenContent-Type: text/html\r\n"), "{text:?}");
    }
}
