//! A log sink that sends each (already redacted) record to the systemd journal over its native
//! datagram protocol. The `tracing-journald` layer writes field values verbatim, which would
//! bypass the single redaction point; formatting first and sending the finished line keeps every
//! sink behind [`super::redact`].

use std::io::{self, Write};
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::sync::Arc;
use tracing::Level;
use tracing_subscriber::fmt::MakeWriter;

#[derive(Clone)]
pub struct JournaldWriter {
    socket: Arc<UnixDatagram>,
    target: std::path::PathBuf,
}

impl JournaldWriter {
    pub fn connect(path: &Path) -> io::Result<Self> {
        let socket = UnixDatagram::unbound()?;
        Ok(Self { socket: Arc::new(socket), target: path.to_path_buf() })
    }
}

/// One record's writer; sends on flush or drop.
pub struct JournaldRecord {
    writer: JournaldWriter,
    priority: u8,
    buf: Vec<u8>,
}

fn priority(level: &Level) -> u8 {
    match *level {
        Level::ERROR => 3,
        Level::WARN => 4,
        Level::INFO => 6,
        Level::DEBUG | Level::TRACE => 7,
    }
}

/// Encode one journal entry; a field whose value contains a newline uses the length-prefixed form.
pub fn encode_entry(priority: u8, message: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len() + 64);
    out.extend_from_slice(format!("PRIORITY={priority}\nSYSLOG_IDENTIFIER=hermes\n").as_bytes());
    let message = message.trim_end_matches('\n');
    if message.contains('\n') {
        out.extend_from_slice(b"MESSAGE\n");
        out.extend_from_slice(&(message.len() as u64).to_le_bytes());
        out.extend_from_slice(message.as_bytes());
        out.push(b'\n');
    } else {
        out.extend_from_slice(b"MESSAGE=");
        out.extend_from_slice(message.as_bytes());
        out.push(b'\n');
    }
    out
}

impl Write for JournaldRecord {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let message = String::from_utf8_lossy(&self.buf).into_owned();
        self.buf.clear();
        let entry = encode_entry(self.priority, &message);
        self.writer.socket.send_to(&entry, &self.writer.target).map(|_| ())
    }
}

impl Drop for JournaldRecord {
    fn drop(&mut self) {
        // Nowhere to report a failed log write.
        let _ = self.flush();
    }
}

impl<'a> MakeWriter<'a> for JournaldWriter {
    type Writer = JournaldRecord;
    fn make_writer(&'a self) -> Self::Writer {
        JournaldRecord { writer: self.clone(), priority: 6, buf: Vec::new() }
    }
    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> Self::Writer {
        JournaldRecord { writer: self.clone(), priority: priority(meta.level()), buf: Vec::new() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_native_entries_to_the_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.sock");
        let server = UnixDatagram::bind(&path).unwrap();
        let writer = JournaldWriter::connect(&path).unwrap();
        {
            let mut rec = writer.make_writer();
            rec.write_all(b"hello journal\n").unwrap();
        }
        let mut buf = [0u8; 512];
        let n = server.recv(&mut buf).unwrap();
        let text = String::from_utf8_lossy(&buf[..n]);
        assert!(text.contains("MESSAGE=hello journal\n"), "{text}");
        assert!(text.contains("PRIORITY=6"));
        let multi = encode_entry(3, "a\nb");
        assert!(multi.starts_with(b"PRIORITY=3\n"));
        assert!(multi.windows(8).any(|w| w == b"MESSAGE\n"));
    }
}
