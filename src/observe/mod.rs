//! Observability: tracing setup and the one place where secrets are redacted from every log
//! line. Under systemd (its journal socket exists) records go to the journal with structured
//! fields ([`journald`]); otherwise to stderr and, for the gateway, to size-rotated files in
//! `HERMES_HOME/logs` ([`logfile`]). Every sink goes through [`redact`]. [`metrics`]: the
//! Prometheus registry.

pub(crate) mod journald;
pub(crate) mod logfile;
pub(crate) mod metrics;
pub(crate) mod redact;
pub(crate) mod secret_forms;

use redact::RedactingMakeWriter;
use std::path::Path;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::fmt::writer::MakeWriterExt;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// The journald socket. It exists on every systemd machine, so it alone does not mean that
/// systemd runs us: `JOURNAL_STREAM` says that.
pub(crate) const JOURNALD_SOCKET: &str = "/run/systemd/journal/socket";

/// Output format of the stderr logger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LogFormat {
    Text,
    Json,
}

/// Install the global subscriber: the journal under systemd, else stderr.
/// `RUST_LOG` (or `HERMES_LOG`) wins over `default_level`. `secrets` are exact strings (tokens,
/// keys) that are masked wherever they appear, in addition to the generic patterns in [`redact`].
pub(crate) fn init(default_level: &str, format: LogFormat, secrets: Vec<String>) {
    init_with_files(default_level, format, secrets, None);
}

/// [`init`], and outside systemd also the rotated log files `files` describes. Under the journal
/// `format` does not apply: its entries are structured already. A log folder that cannot be
/// opened is reported once and logging continues on stderr.
pub(crate) fn init_with_files(default_level: &str, format: LogFormat, secrets: Vec<String>, files: Option<logfile::Rotation>) {
    let filter = std::env::var("HERMES_LOG")
        .ok()
        .and_then(|v| EnvFilter::try_new(v).ok())
        .or_else(|| EnvFilter::try_from_default_env().ok())
        .unwrap_or_else(|| EnvFilter::new(format!("{default_level},hyper=warn,reqwest=warn,h2=warn")));
    let redactor = redact::Redactor::new(secrets);
    if under_systemd(Path::new(JOURNALD_SOCKET).exists(), std::env::var_os("JOURNAL_STREAM").is_some())
        && let Ok(journal) = journald::JournaldWriter::connect(Path::new(JOURNALD_SOCKET))
    {
        // A second init (tests, or a library user) keeps the first subscriber; that is fine.
        let _ = tracing_subscriber::registry().with(filter).with(journald::JournaldLayer::new(journal, redactor)).try_init();
        return;
    }
    let Some(rotation) = files else {
        install(filter, format, RedactingMakeWriter::new(std::io::stderr, redactor));
        return;
    };
    match logfile::RotatingFile::open(&rotation) {
        Ok(file) => install(filter, format, RedactingMakeWriter::new(std::io::stderr.and(file), redactor)),
        Err(e) => {
            install(filter, format, RedactingMakeWriter::new(std::io::stderr, redactor));
            tracing::warn!(
                "cannot open the log file in {}: {e}; logging to stderr only. Make the folder writable by this user",
                rotation.dir.display()
            );
        }
    }
}

/// Log to the journal only when systemd runs us with our output going to it (it sets
/// `JOURNAL_STREAM` then): on a systemd machine the journal socket exists for every process,
/// and `hermes gateway run` typed in a terminal must still log to that terminal.
fn under_systemd(journal_socket_exists: bool, journal_stream_set: bool) -> bool {
    journal_socket_exists && journal_stream_set
}

fn install<W>(filter: EnvFilter, format: LogFormat, writer: W)
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(writer).with_ansi(false);
    // A second init (tests, or a library user) keeps the first subscriber; that is fine.
    let _ = match format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
}
