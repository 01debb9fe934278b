//! The systemd journal sink: each record is sent over journald's native datagram protocol as
//! structured fields — `PRIORITY` from the level, `TARGET`, `MESSAGE`, and `PLATFORM`,
//! `SESSION_KEY` and `EVENT_ID` when the event or one of its spans carries `platform`,
//! `session_key` or `event_id` (`journalctl -u hermes-gateway PLATFORM=telegram`).
//!
//! The `tracing-journald` layer writes field values verbatim, which would bypass the single
//! redaction point; [`JournaldLayer`] passes every value through [`Redactor`] before it leaves the
//! process.

use super::redact::Redactor;
use std::fmt::Write as _;
use std::io;
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::sync::Arc;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

/// Span and event fields sent as journal fields of their own, and the journal's name for them.
const JOURNAL_FIELDS: [(&str, &str); 3] = [("platform", "PLATFORM"), ("session_key", "SESSION_KEY"), ("event_id", "EVENT_ID")];
/// A `MESSAGE` longer than this is cut when the whole entry does not fit in one datagram.
const FALLBACK_MESSAGE_BYTES: usize = 16 * 1024;

#[derive(Clone)]
pub(crate) struct JournaldWriter {
    socket: Arc<UnixDatagram>,
    target: std::path::PathBuf,
}

impl JournaldWriter {
    pub(crate) fn connect(path: &Path) -> io::Result<Self> {
        let socket = UnixDatagram::unbound()?;
        Ok(Self { socket: Arc::new(socket), target: path.to_path_buf() })
    }
}

fn priority(level: &Level) -> u8 {
    match *level {
        Level::ERROR => 3,
        Level::WARN => 4,
        Level::INFO => 6,
        Level::DEBUG | Level::TRACE => 7,
    }
}

/// Encode one journal entry; a value containing a newline uses the length-prefixed form.
pub(crate) fn encode_fields(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(fields.iter().map(|(k, v)| k.len() + v.len() + 2).sum::<usize>() + 16);
    for (name, value) in fields {
        out.extend_from_slice(name.as_bytes());
        if value.contains('\n') {
            out.push(b'\n');
            out.extend_from_slice(&(value.len() as u64).to_le_bytes());
        } else {
            out.push(b'=');
        }
        out.extend_from_slice(value.as_bytes());
        out.push(b'\n');
    }
    out
}

/// Encode one entry with just a priority and a message.
#[cfg(test)]
pub(crate) fn encode_entry(priority: u8, message: &str) -> Vec<u8> {
    let priority = priority.to_string();
    encode_fields(&[("PRIORITY", &priority), ("SYSLOG_IDENTIFIER", "hermes"), ("MESSAGE", message.trim_end_matches('\n'))])
}

impl JournaldWriter {
    /// Send one entry; an entry too large for a datagram is sent again with its message cut.
    fn send(&self, fields: &mut [(&str, String)]) -> io::Result<()> {
        let borrowed: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
        match self.socket.send_to(&encode_fields(&borrowed), &self.target) {
            Err(e) if e.raw_os_error() == Some(libc::EMSGSIZE) => {
                for (name, value) in fields.iter_mut() {
                    if *name == "MESSAGE" && value.len() > FALLBACK_MESSAGE_BYTES {
                        let cut = (0..=FALLBACK_MESSAGE_BYTES).rev().find(|&i| value.is_char_boundary(i)).unwrap_or(0);
                        value.truncate(cut);
                        value.push_str(" …[cut: too long for the journal]");
                    }
                }
                let borrowed: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
                self.socket.send_to(&encode_fields(&borrowed), &self.target).map(|_| ())
            }
            other => other.map(|_| ()),
        }
    }
}

/// The journal fields a span carries, kept in its extensions.
#[derive(Debug, Default, Clone)]
struct Tagged([Option<String>; 3]);

impl Tagged {
    fn set(&mut self, name: &str, value: String) -> bool {
        match JOURNAL_FIELDS.iter().position(|(field, _)| *field == name) {
            Some(i) => {
                self.0[i] = Some(value);
                true
            }
            None => false,
        }
    }

    /// Fill what is still unset from an enclosing span's tags.
    fn inherit(&mut self, outer: &Tagged) {
        for (mine, theirs) in self.0.iter_mut().zip(&outer.0) {
            if mine.is_none() {
                mine.clone_from(theirs);
            }
        }
    }
}

/// Collects a span's journal fields.
struct TagVisitor<'a>(&'a mut Tagged);

impl Visit for TagVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.set(field.name(), value.to_string());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.set(field.name(), format!("{value:?}"));
    }
}

/// Collects an event: its message, its other fields as ` name=value`, and its journal fields.
#[derive(Default)]
struct EventVisitor {
    message: String,
    rest: String,
    tagged: Tagged,
}

impl EventVisitor {
    fn add(&mut self, name: &str, value: String) {
        if name == "message" {
            self.message = value;
            return;
        }
        if name.starts_with("log.") {
            return;
        }
        let _ = write!(self.rest, " {name}={value}");
        self.tagged.set(name, value);
    }
}

impl Visit for EventVisitor {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.add(field.name(), value.to_string());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.add(field.name(), format!("{value:?}"));
    }
}

/// A tracing layer that sends every event to the journal, redacted, with its journal fields.
pub(crate) struct JournaldLayer {
    writer: JournaldWriter,
    redactor: Redactor,
}

impl JournaldLayer {
    pub(crate) fn new(writer: JournaldWriter, redactor: Redactor) -> Self {
        Self { writer, redactor }
    }
}

impl<S> Layer<S> for JournaldLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut tagged = Tagged::default();
        attrs.record(&mut TagVisitor(&mut tagged));
        span.extensions_mut().insert(tagged);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut extensions = span.extensions_mut();
        if let Some(tagged) = extensions.get_mut::<Tagged>() {
            values.record(&mut TagVisitor(tagged));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut visitor = EventVisitor::default();
        event.record(&mut visitor);
        if let Some(scope) = ctx.event_scope(event) {
            for span in scope {
                if let Some(outer) = span.extensions().get::<Tagged>() {
                    visitor.tagged.inherit(outer);
                }
            }
        }
        let meta = event.metadata();
        let redact = |text: &str| self.redactor.redact(text);
        let mut fields: Vec<(&str, String)> = vec![
            ("PRIORITY", priority(meta.level()).to_string()),
            ("SYSLOG_IDENTIFIER", "hermes".to_string()),
            ("TARGET", meta.target().to_string()),
        ];
        for ((_, journal_name), value) in JOURNAL_FIELDS.iter().zip(&visitor.tagged.0) {
            if let Some(value) = value {
                fields.push((journal_name, redact(value)));
            }
        }
        fields.push(("MESSAGE", redact(&format!("{}{}", visitor.message, visitor.rest))));
        // Nowhere to report a failed log write.
        let _ = self.writer.send(&mut fields);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    const SECRET: &str = "hunter2-very-secret-value";

    fn bound(dir: &Path) -> (UnixDatagram, JournaldWriter) {
        let path = dir.join("journal.sock");
        let server = UnixDatagram::bind(&path).unwrap();
        server.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        (server, JournaldWriter::connect(&path).unwrap())
    }

    fn receive(server: &UnixDatagram) -> String {
        let mut buf = vec![0u8; 64 * 1024];
        let n = server.recv(&mut buf).unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    #[test]
    fn entries_carry_priority_and_span_fields_and_every_value_is_redacted() {
        let dir = tempfile::tempdir().unwrap();
        let (server, writer) = bound(dir.path());
        let layer = JournaldLayer::new(writer, Redactor::new(vec![SECRET.into()]));
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("turn", platform = "telegram", session_key = "agent:main:telegram:dm:42");
            let _entered = span.enter();
            tracing::warn!(event_id = %format!("ev-{SECRET}"), error = SECRET, "send failed with key {SECRET}");
        });
        let entry = receive(&server);
        assert!(entry.contains("PRIORITY=4\n"), "{entry}");
        assert!(entry.contains("PLATFORM=telegram\n"), "{entry}");
        assert!(entry.contains("SESSION_KEY=agent:main:telegram:dm:42\n"), "{entry}");
        assert!(entry.contains("EVENT_ID=ev-[REDACTED]\n"), "{entry}");
        assert!(entry.contains("MESSAGE=send failed with key [REDACTED]"), "{entry}");
        assert!(!entry.contains(SECRET), "a secret reached the journal: {entry}");
    }

    #[test]
    fn an_event_field_wins_over_its_span_and_errors_are_priority_3() {
        let dir = tempfile::tempdir().unwrap();
        let (server, writer) = bound(dir.path());
        let subscriber = tracing_subscriber::registry().with(JournaldLayer::new(writer, Redactor::default()));
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("adapter", platform = "discord");
            let _entered = span.enter();
            tracing::error!(platform = "slack", "parked:\nbad token");
            tracing::info!("no fields");
        });
        let first = receive(&server);
        assert!(first.contains("PRIORITY=3\n") && first.contains("PLATFORM=slack\n"), "{first}");
        assert!(first.contains("MESSAGE\n"), "a multi-line message uses the length-prefixed form: {first}");
        let second = receive(&server);
        assert!(second.contains("PRIORITY=6\n") && second.contains("PLATFORM=discord\n"), "{second}");
        assert!(!second.contains("SESSION_KEY") && !second.contains("EVENT_ID"), "{second}");
    }

    #[test]
    fn encodes_native_entries() {
        let multi = encode_entry(3, "a\nb");
        assert!(multi.starts_with(b"PRIORITY=3\n"));
        assert!(multi.windows(8).any(|w| w == b"MESSAGE\n"));
        assert!(encode_entry(6, "hello\n").ends_with(b"MESSAGE=hello\n"));
    }
}
