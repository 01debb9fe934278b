//! Observability: tracing setup (journald when its socket exists, else stderr) and the one place
//! where secrets are redacted from every log line.

pub mod journald;
pub mod redact;
pub mod secret_forms;

use redact::RedactingMakeWriter;
use std::path::Path;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

/// The journald socket; its presence means we run under systemd.
pub const JOURNALD_SOCKET: &str = "/run/systemd/journal/socket";

/// Output format of the stderr logger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// Install the global subscriber. `RUST_LOG` (or `HERMES_LOG`) wins over `default_level`.
/// `secrets` are exact strings (tokens, keys) that are masked wherever they appear, in addition to
/// the generic patterns in [`redact`].
pub fn init(default_level: &str, format: LogFormat, secrets: Vec<String>) {
    let filter = std::env::var("HERMES_LOG")
        .ok()
        .and_then(|v| EnvFilter::try_new(v).ok())
        .or_else(|| EnvFilter::try_from_default_env().ok())
        .unwrap_or_else(|| EnvFilter::new(format!("{default_level},hyper=warn,reqwest=warn,h2=warn")));
    let redactor = redact::Redactor::new(secrets);
    if Path::new(JOURNALD_SOCKET).exists()
        && let Ok(journal) = journald::JournaldWriter::connect(Path::new(JOURNALD_SOCKET))
    {
        install(filter, format, RedactingMakeWriter::new(journal, redactor), false);
        return;
    }
    install(filter, format, RedactingMakeWriter::new(std::io::stderr, redactor), true);
}

fn install<W>(filter: EnvFilter, format: LogFormat, writer: W, with_time: bool)
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(writer).with_ansi(false);
    // A second init (tests, or a library user) keeps the first subscriber; that is fine.
    let _ = match (format, with_time) {
        (LogFormat::Json, _) => builder.json().try_init(),
        (LogFormat::Text, true) => builder.try_init(),
        (LogFormat::Text, false) => builder.without_time().try_init(),
    };
}
