//! What the email adapter is configured with, already resolved from config and environment by
//! the gateway (this crate never reads the environment itself), and the TLS modes.

use hermes_adapter::SettingError;
use hermes_adapter::pacing::{Limits, Rate, check_burst, check_rate};
use std::path::PathBuf;
use std::time::Duration;

/// Mails sent through the SMTP server: `burst` at once, then `per_second` (a provider that
/// counts a relay's mails, or throttles a sudden flood, never sees more). A 421 "too busy" holds
/// back every mail for a minute. Zero switches the limit off.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmailSendBudget {
    pub per_second: f64,
    pub burst: f64,
}

impl Default for EmailSendBudget {
    fn default() -> Self {
        Self { per_second: 1.0, burst: 10.0 }
    }
}

impl EmailSendBudget {
    /// Every value usable; the error names the key (`send_budget.<field>`).
    pub fn check(&self) -> Result<(), SettingError> {
        check_rate("send_budget.per_second", self.per_second)?;
        check_burst("send_budget.burst", self.burst)
    }

    pub(crate) fn limits(&self) -> Limits {
        Limits { global: Rate::per_second(self.per_second, self.burst), chat: None, group: None }
    }
}

/// How a connection to the IMAP or SMTP server is protected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsMode {
    /// TLS from the first byte (IMAPS 993, SMTPS 465).
    Tls,
    /// A plain connection upgraded with STARTTLS before anything secret is sent (143, 587, 25);
    /// a server that does not offer it is refused, never used in clear text.
    StartTls,
    /// No encryption at all: allowed only when both servers are on loopback.
    None,
}

impl TlsMode {
    /// The mode a port usually means: 993 and 465 speak TLS at once, the others upgrade.
    pub fn for_port(port: u16) -> Self {
        match port {
            993 | 465 => TlsMode::Tls,
            _ => TlsMode::StartTls,
        }
    }
}

/// IDLE is renewed well inside RFC 2177's "at least every 29 minutes".
pub const DEFAULT_IDLE_RENEWAL: Duration = Duration::from_secs(25 * 60);
/// A connection that stopped answering is noticed within two minutes.
pub const DEFAULT_DEAD_AFTER: Duration = Duration::from_secs(120);

/// Everything the adapter needs, with defaults applied.
#[derive(Clone)]
pub struct EmailSettings {
    /// The bot's own address: the IMAP and SMTP login, the `From` of replies.
    pub address: String,
    /// The mailbox password (IMAP and SMTP).
    pub password: String,
    pub imap_host: String,
    pub imap_port: u16,
    pub smtp_host: String,
    pub smtp_port: u16,
    pub imap_tls: TlsMode,
    pub smtp_tls: TlsMode,
    /// How often the mailbox is polled when the server cannot IDLE (or IDLE failed).
    pub poll_interval: Duration,
    /// Wait with IDLE when the server offers it; off, the mailbox is polled (for servers whose
    /// IDLE misbehaves).
    pub use_idle: bool,
    /// How long one IDLE lasts before it is renewed: under RFC 2177's 29 minutes (servers drop
    /// an IDLE after 30).
    pub idle_renewal: Duration,
    /// How long the IMAP connection may stay silent, then unanswered, before it counts as dead
    /// and is replaced: after half of it without a word from the server the IDLE is ended, and
    /// the server has the other half to confirm. A peer that stopped answering (a NAT that forgot
    /// the connection, a hung server) is noticed within this.
    pub dead_after: Duration,
    /// Trust only the CAs in this PEM file (a server with a private CA); unset: the system's.
    pub ca_file: Option<PathBuf>,
    /// Accept the `From` header as the sender's identity without an `Authentication-Results`
    /// check (only for a mailbox whose server already refuses forged senders).
    pub trust_from_header: bool,
    /// The authserv-id of the receiving server's `Authentication-Results` headers; only those
    /// headers are believed.
    pub authserv_id: Option<String>,
    /// Where the mailbox cursor and the conversation threads are kept.
    pub state_dir: PathBuf,
    /// Where attachments are saved.
    pub media_dir: PathBuf,
    /// The largest mail downloaded whole; bigger ones are answered from their headers only.
    pub max_mail_bytes: u32,
    /// The largest attachment saved.
    pub max_attachment_bytes: usize,
    /// The gateway's limits per kind (audio and image sizes), checked with each part's real size
    /// (the mail is already fetched whole) before it is saved.
    pub media_limits: hermes_adapter::MediaLimits,
    /// How long one network step (connect, a command, a DATA transfer) may take.
    pub io_timeout: Duration,
    /// Outbound rate limit kept by the gateway.
    pub budget: EmailSendBudget,
}

impl EmailSettings {
    pub fn new(address: impl Into<String>, password: impl Into<String>, state_dir: PathBuf, media_dir: PathBuf) -> Self {
        Self {
            address: address.into(),
            password: password.into(),
            imap_host: String::new(),
            imap_port: 993,
            smtp_host: String::new(),
            smtp_port: 587,
            imap_tls: TlsMode::Tls,
            smtp_tls: TlsMode::StartTls,
            poll_interval: Duration::from_secs(15),
            use_idle: true,
            idle_renewal: DEFAULT_IDLE_RENEWAL,
            dead_after: DEFAULT_DEAD_AFTER,
            ca_file: None,
            trust_from_header: false,
            authserv_id: None,
            state_dir,
            media_dir,
            max_mail_bytes: 25 * 1024 * 1024,
            max_attachment_bytes: 20 * 1024 * 1024,
            media_limits: hermes_adapter::MediaLimits::default(),
            io_timeout: Duration::from_secs(60),
            budget: EmailSendBudget::default(),
        }
    }

    /// How long one IMAP step may take: the network step limit, but never past `dead_after`, so
    /// a connection that goes silent in the middle of a command (not only in IDLE) is noticed
    /// within the promised time too.
    pub fn imap_step_limit(&self) -> Duration {
        self.io_timeout.min(self.dead_after)
    }

    /// The domain of the bot's address, lower-cased (Message-IDs of replies are made in it).
    pub fn domain(&self) -> String {
        self.address.rsplit_once('@').map(|(_, d)| d.to_ascii_lowercase()).unwrap_or_else(|| "localhost".to_string())
    }
}

// The password is a credential: never printed.
impl std::fmt::Debug for EmailSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmailSettings")
            .field("address", &self.address)
            .field("password", &"****")
            .field("imap", &format_args!("{}:{} ({:?})", self.imap_host, self.imap_port, self.imap_tls))
            .field("smtp", &format_args!("{}:{} ({:?})", self.smtp_host, self.smtp_port, self.smtp_tls))
            .field("poll_interval", &self.poll_interval)
            .field("dead_after", &self.dead_after)
            .field("ca_file", &self.ca_file)
            .field("trust_from_header", &self.trust_from_header)
            .field("authserv_id", &self.authserv_id)
            .finish_non_exhaustive()
    }
}

/// Whether `host` is this machine (a name or an address on loopback).
pub fn is_loopback(host: &str) -> bool {
    let host = host.trim().trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}
