//! `platforms.email`: the adapter's keys of the block, their environment variables and
//! documentation, and the [`REGISTRATION`] that turns them into an [`EmailAdapter`].

use crate::EmailAdapter;
use crate::settings::{EmailSendBudget, EmailSettings, TlsMode, is_loopback};
use hermes_adapter::registration::{
    self, BuildContext, BuildError, EnvKind, EnvVar, ErasedConfig, HomeVars, PairingOffer, PlatformFacts, Registration, SettingError,
};
use hermes_adapter::{AdapterConfig, Extra, PlatformAdapter, Secret};
use serde::{Deserialize, Deserializer, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// The adapter's keys of `platforms.email` (the gateway keeps allowlists and the home channel).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct EmailConfig {
    /// The bot's mailbox address, also the IMAP/SMTP login.
    pub address: Option<String>,
    /// The mailbox password; setting it enables the platform.
    pub password: Option<Secret>,
    pub imap_host: Option<String>,
    pub imap_port: Option<u16>,
    pub smtp_host: Option<String>,
    pub smtp_port: Option<u16>,
    /// `tls`, `starttls` or `none`; unset: chosen per server from its port.
    pub tls: Option<String>,
    /// Seconds between polls when the server cannot IDLE; unset: 15.
    #[serde(deserialize_with = "seconds")]
    pub poll_interval: Option<u64>,
    /// Wait for mail with IDLE when the server offers it; unset: yes.
    pub idle: Option<bool>,
    /// Trust only the CAs in this PEM file (a server with a private CA); unset: the system's.
    pub ca_file: Option<String>,
    /// Seconds the IMAP connection may stay silent and unanswered before it counts as dead and
    /// is replaced; unset: 120.
    #[serde(deserialize_with = "seconds")]
    pub dead_after: Option<u64>,
    /// Believe the `From` header without an `Authentication-Results` check.
    pub trust_from_header: Option<bool>,
    /// The authserv-id whose `Authentication-Results` headers are believed.
    pub authserv_id: Option<String>,
    /// Outbound rate limit kept by the gateway.
    pub send_budget: EmailSendBudget,
    /// Free-form settings, passed through unchecked.
    pub extra: Extra,
}

/// Seconds as a number or as text (environment variables are text).
fn seconds<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Number(u64),
        Text(String),
    }
    match Option::<Raw>::deserialize(deserializer)? {
        None => Ok(None),
        Some(Raw::Number(n)) => Ok(Some(n)),
        Some(Raw::Text(t)) => t
            .trim()
            .parse::<u64>()
            .map(Some)
            .map_err(|_| serde::de::Error::custom(format!("expected a whole number of seconds, found {t:?}"))),
    }
}

impl AdapterConfig for EmailConfig {
    fn validate(&self, _enabled: bool) -> Result<(), SettingError> {
        if let Some(tls) = &self.tls {
            parse_tls(tls).map_err(|message| SettingError::key("tls (EMAIL_TLS)", message))?;
        }
        if let Some(secs) = self.poll_interval
            && !(1..=3600).contains(&secs)
        {
            return Err(SettingError::key("poll_interval (EMAIL_POLL_INTERVAL)", format!("expected 1 to 3600 seconds, found {secs}")));
        }
        if let Some(secs) = self.dead_after
            && !(2..=120).contains(&secs)
        {
            return Err(SettingError::key(
                "dead_after (EMAIL_DEAD_AFTER)",
                format!("expected 2 to 120 seconds (a dead connection must be noticed within two minutes), found {secs}"),
            ));
        }
        self.send_budget.check()
    }

    fn secrets(&self) -> Vec<String> {
        self.password.iter().map(|s| s.expose().to_string()).filter(|s| !s.is_empty()).collect()
    }

    fn has_credential(&self) -> bool {
        self.password.as_ref().is_some_and(|p| !p.expose().trim().is_empty())
    }
}

fn parse_tls(text: &str) -> Result<TlsMode, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "tls" | "ssl" | "implicit" => Ok(TlsMode::Tls),
        "starttls" => Ok(TlsMode::StartTls),
        "none" | "plain" => Ok(TlsMode::None),
        other => Err(format!("expected tls, starttls or none, found {other:?}")),
    }
}

const ENV: &[EnvVar] = &[
    EnvVar {
        name: "EMAIL_ADDRESS",
        key: "address",
        kind: EnvKind::Text,
        example: "hermes@example.com",
        description: "the bot's mailbox address (also the IMAP/SMTP login)",
    },
    EnvVar {
        name: "EMAIL_PASSWORD",
        key: "password",
        kind: EnvKind::Secret,
        example: "app-password",
        description: "the mailbox password; setting it enables email",
    },
    EnvVar { name: "EMAIL_IMAP_HOST", key: "imap_host", kind: EnvKind::Text, example: "imap.example.com", description: "IMAP server" },
    EnvVar {
        name: "EMAIL_IMAP_PORT",
        key: "imap_port",
        kind: EnvKind::Port,
        example: "993",
        description: "IMAP port (993: TLS, 143: STARTTLS)",
    },
    EnvVar {
        name: "EMAIL_SMTP_HOST",
        key: "smtp_host",
        kind: EnvKind::Text,
        example: "smtp.example.com",
        description: "SMTP server for replies",
    },
    EnvVar {
        name: "EMAIL_SMTP_PORT",
        key: "smtp_port",
        kind: EnvKind::Port,
        example: "587",
        description: "SMTP port (587: STARTTLS, 465: TLS)",
    },
    EnvVar {
        name: "EMAIL_TLS",
        key: "tls",
        kind: EnvKind::Text,
        example: "",
        description: "tls, starttls or none (none only to loopback); default from each port",
    },
    EnvVar {
        name: "EMAIL_CA_FILE",
        key: "ca_file",
        kind: EnvKind::Text,
        example: "",
        description: "PEM file of the CA that signed your mail servers' certificates (a private CA); only it is trusted",
    },
    EnvVar {
        name: "EMAIL_DEAD_AFTER",
        key: "dead_after",
        kind: EnvKind::Text,
        example: "120",
        description: "seconds after which a silent, unanswering IMAP connection counts as dead and is replaced",
    },
    EnvVar {
        name: "EMAIL_POLL_INTERVAL",
        key: "poll_interval",
        kind: EnvKind::Text,
        example: "15",
        description: "seconds between polls when the server cannot IDLE",
    },
    EnvVar {
        name: "EMAIL_HOME_ADDRESS",
        key: "home_channel",
        kind: EnvKind::Text,
        example: "owner@example.com",
        description: "address for cron output and notifications",
    },
    EnvVar {
        name: "EMAIL_TRUST_FROM_HEADER",
        key: "trust_from_header",
        kind: EnvKind::Bool,
        example: "false",
        description: "believe From: without an Authentication-Results check (unsafe unless the server refuses forged senders)",
    },
    EnvVar {
        name: "EMAIL_AUTHSERV_ID",
        key: "authserv_id",
        kind: EnvKind::Text,
        example: "mx.example.com",
        description: "authserv-id of the Authentication-Results headers your mail server adds",
    },
];

const EXAMPLE: &str = "    enabled: null                      # null: enabled when a password is set; false switches it off
    address: null                      # the bot's mailbox, also the login (EMAIL_ADDRESS)
    password: null                     # secret mailbox password; setting it enables email (EMAIL_PASSWORD)
    imap_host: null                    # IMAP server (EMAIL_IMAP_HOST)
    imap_port: null                    # default 993 (EMAIL_IMAP_PORT)
    smtp_host: null                    # SMTP server for replies (EMAIL_SMTP_HOST)
    smtp_port: null                    # default 587 (EMAIL_SMTP_PORT)
    tls: null                          # tls | starttls | none; default from each port (993/465: tls,
                                       # others: starttls); none only when both hosts are loopback (EMAIL_TLS)
    ca_file: null                      # PEM file of a private CA that signed the servers' certificates; when
                                       # set only it is trusted, else the system's CAs (EMAIL_CA_FILE)
    poll_interval: null                # seconds between polls when the server cannot IDLE, default 15
                                       # (EMAIL_POLL_INTERVAL)
    idle: null                         # wait for mail with IMAP IDLE when offered (default true);
                                       # false polls every poll_interval instead
    dead_after: null                   # seconds (2-120, default 120) in which a silent IMAP connection that
                                       # does not answer is noticed and replaced (EMAIL_DEAD_AFTER)
    home_channel: null                 # address for cron output (EMAIL_HOME_ADDRESS)
    allowed_users: []                  # full sender addresses, e.g. alice@example.com (EMAIL_ALLOWED_USERS)
    allow_all_users: false             # anyone who can mail the bot may use it (EMAIL_ALLOW_ALL_USERS)
    admin_users: []                    # admins on this platform (EMAIL_ADMIN_USERS)
    trust_from_header: null            # default false: a sender counts only when an Authentication-Results
                                       # header of authserv_id passes DKIM/SPF/DMARC aligned with From
                                       # (EMAIL_TRUST_FROM_HEADER)
    authserv_id: null                  # the authserv-id your receiving server writes in Authentication-Results,
                                       # required unless trust_from_header (EMAIL_AUTHSERV_ID)
    send_budget:                       # mails hermes hands the SMTP server (0 = no limit):
      per_second: 1                    # a burst of 10 at once, then one a second
      burst: 10
    extra: {}                          # free-form adapter settings, passed through unchecked
";

/// The email adapter as the gateway registers it.
pub const REGISTRATION: Registration = Registration {
    platform: "email",
    summary: "Email (IMAP in with IDLE, SMTP out).",
    env: ENV,
    example_yaml: EXAMPLE,
    allowlist_entry_problem: Some(crate::allowlist::entry_problem),
    parse: registration::parse::<EmailConfig>,
    build,
    facts: PlatformFacts {
        people: true,
        home: Some(HomeVars { channel: "EMAIL_HOME_ADDRESS", thread: None }),
        // A sender address is whatever the sender wrote, and answering strangers mails whoever
        // was named (backscatter): an allowlist of addresses is the only way in.
        pairing: PairingOffer::NotOffered {
            why: "a mail's From address can be forged and answering unknown senders sends mail to whoever was named; list addresses in EMAIL_ALLOWED_USERS",
        },
        buttons: false,
        reactions: false,
    },
};

fn text(value: &Option<String>) -> Option<String> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty()).map(str::to_string)
}

/// The settings `config` describes, or the first key that is wrong.
pub fn settings_from(config: &EmailConfig, ctx: &BuildContext<'_>) -> Result<EmailSettings, BuildError> {
    let password = config.password.as_ref().map(|p| p.expose().to_string()).filter(|p| !p.trim().is_empty()).ok_or_else(|| {
        BuildError::new(Some("password"), "email is enabled but has no password; set EMAIL_PASSWORD (or disable the platform)")
    })?;
    let address = text(&config.address)
        .filter(|a| crate::allowlist::is_address(a))
        .ok_or_else(|| BuildError::new(Some("address"), "set EMAIL_ADDRESS to the bot's full mailbox address (name@domain)"))?;
    let imap_host = text(&config.imap_host)
        .ok_or_else(|| BuildError::new(Some("imap_host"), "set EMAIL_IMAP_HOST to the IMAP server the bot reads its mail from"))?;
    let smtp_host = text(&config.smtp_host)
        .ok_or_else(|| BuildError::new(Some("smtp_host"), "set EMAIL_SMTP_HOST to the SMTP server the bot sends its replies through"))?;
    let trust_from_header = config.trust_from_header.unwrap_or(false);
    let authserv_id = text(&config.authserv_id);
    if !trust_from_header && authserv_id.is_none() {
        return Err(BuildError::new(
            Some("authserv_id"),
            "set EMAIL_AUTHSERV_ID to the authserv-id your mail server writes in Authentication-Results headers (the \
             host name at the start of the header, e.g. mx.example.com): anyone can write any From: address, so a \
             sender is believed only when that server's DKIM/SPF/DMARC result passes for the From domain. Only if \
             the server itself refuses forged senders, set EMAIL_TRUST_FROM_HEADER=true instead",
        ));
    }
    let imap_port = config.imap_port.unwrap_or(993);
    let smtp_port = config.smtp_port.unwrap_or(587);
    let chosen = config.tls.as_deref().map(parse_tls).transpose().map_err(|m| BuildError::new(Some("tls"), m))?;
    let (imap_tls, smtp_tls) = match chosen {
        Some(mode) => (mode, mode),
        None => (TlsMode::for_port(imap_port), TlsMode::for_port(smtp_port)),
    };
    if (imap_tls == TlsMode::None || smtp_tls == TlsMode::None) && !(is_loopback(&imap_host) && is_loopback(&smtp_host)) {
        return Err(BuildError::new(
            Some("tls"),
            "EMAIL_TLS=none would send the mailbox password in clear text; it is allowed only when both EMAIL_IMAP_HOST \
             and EMAIL_SMTP_HOST are loopback (a local server). Use tls or starttls",
        ));
    }
    let mut settings = EmailSettings::new(address, password, ctx.state_dir.to_path_buf(), ctx.media_dir.to_path_buf());
    settings.imap_host = imap_host;
    settings.smtp_host = smtp_host;
    settings.imap_port = imap_port;
    settings.smtp_port = smtp_port;
    settings.imap_tls = imap_tls;
    settings.smtp_tls = smtp_tls;
    settings.trust_from_header = trust_from_header;
    settings.authserv_id = authserv_id;
    settings.use_idle = config.idle.unwrap_or(true);
    settings.media_limits = ctx.media_limits;
    settings.budget = config.send_budget;
    if let Some(secs) = config.poll_interval {
        settings.poll_interval = Duration::from_secs(secs.max(1));
    }
    if let Some(secs) = config.dead_after {
        settings.dead_after = Duration::from_secs(secs.clamp(2, 120));
    }
    settings.ca_file = ca_file(config)?;
    Ok(settings)
}

/// The CA file, read once here so that a wrong path or a file without a certificate is a
/// configuration error at start, not a failed connection later.
fn ca_file(config: &EmailConfig) -> Result<Option<std::path::PathBuf>, BuildError> {
    let Some(path) = text(&config.ca_file).map(std::path::PathBuf::from) else { return Ok(None) };
    crate::tls::read_ca_file(&path).map_err(|why| BuildError::new(Some("ca_file"), format!("{why} (EMAIL_CA_FILE)")))?;
    Ok(Some(path))
}

fn build(config: &dyn ErasedConfig, ctx: &BuildContext<'_>) -> Result<Arc<dyn PlatformAdapter>, BuildError> {
    let config: &EmailConfig = registration::downcast(config)?;
    let settings = settings_from(config, ctx)?;
    Ok(Arc::new(EmailAdapter::new(settings)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn ctx() -> BuildContext<'static> {
        BuildContext {
            token: None,
            media_dir: Path::new("/tmp/m"),
            media_limits: hermes_adapter::MediaLimits::default(),
            state_dir: Path::new("/tmp/s"),
            commands: &[],
            link_previews: false,
            turn_timeout: Duration::from_secs(60),
        }
    }

    fn config() -> EmailConfig {
        EmailConfig {
            address: Some("bot@example.com".into()),
            password: Some(Secret::new("pw")),
            imap_host: Some("imap.example.com".into()),
            smtp_host: Some("smtp.example.com".into()),
            authserv_id: Some("mx.example.com".into()),
            ..EmailConfig::default()
        }
    }

    #[test]
    fn tls_follows_the_ports_unless_chosen() {
        let s = settings_from(&config(), &ctx()).unwrap();
        assert_eq!((s.imap_port, s.imap_tls, s.smtp_port, s.smtp_tls), (993, TlsMode::Tls, 587, TlsMode::StartTls));
        let s = settings_from(&EmailConfig { imap_port: Some(143), smtp_port: Some(465), ..config() }, &ctx()).unwrap();
        assert_eq!((s.imap_tls, s.smtp_tls), (TlsMode::StartTls, TlsMode::Tls));
    }

    #[test]
    fn no_tls_is_refused_unless_both_servers_are_loopback() {
        let err = settings_from(&EmailConfig { tls: Some("none".into()), ..config() }, &ctx()).unwrap_err();
        assert_eq!(err.key.as_deref(), Some("tls"));
        assert!(err.message.contains("EMAIL_TLS=none"), "{}", err.message);
        let local =
            EmailConfig { tls: Some("none".into()), imap_host: Some("127.0.0.1".into()), smtp_host: Some("localhost".into()), ..config() };
        assert_eq!(settings_from(&local, &ctx()).unwrap().smtp_tls, TlsMode::None);
        let half = EmailConfig { smtp_host: Some("smtp.example.com".into()), ..local };
        assert!(settings_from(&half, &ctx()).is_err());
    }

    #[test]
    fn idle_is_renewed_within_rfc_2177_and_a_dead_connection_is_noticed_within_two_minutes() {
        let s = settings_from(&config(), &ctx()).unwrap();
        assert!(s.idle_renewal < Duration::from_secs(29 * 60), "RFC 2177: re-issue IDLE at least every 29 minutes");
        assert!(s.dead_after <= Duration::from_secs(120));
        let s = settings_from(&EmailConfig { dead_after: Some(5), ..config() }, &ctx()).unwrap();
        assert_eq!(s.dead_after, Duration::from_secs(5));
        for bad in [0, 1, 121, 3600] {
            let err = EmailConfig { dead_after: Some(bad), ..config() }.validate(true).unwrap_err().to_string();
            assert!(err.contains("EMAIL_DEAD_AFTER"), "{bad}: {err}");
        }
    }

    #[test]
    fn an_authserv_id_is_required_unless_from_is_trusted() {
        let err = settings_from(&EmailConfig { authserv_id: None, ..config() }, &ctx()).unwrap_err();
        assert_eq!(err.key.as_deref(), Some("authserv_id"));
        assert!(err.message.contains("EMAIL_AUTHSERV_ID") && err.message.contains("EMAIL_TRUST_FROM_HEADER"));
        assert!(settings_from(&EmailConfig { authserv_id: None, trust_from_header: Some(true), ..config() }, &ctx()).is_ok());
    }

    #[test]
    fn missing_keys_are_named() {
        for (cfg, key) in [
            (EmailConfig { password: None, ..config() }, "password"),
            (EmailConfig { address: Some("not-an-address".into()), ..config() }, "address"),
            (EmailConfig { imap_host: None, ..config() }, "imap_host"),
            (EmailConfig { smtp_host: Some(" ".into()), ..config() }, "smtp_host"),
        ] {
            assert_eq!(settings_from(&cfg, &ctx()).unwrap_err().key.as_deref(), Some(key));
        }
    }

    #[test]
    fn the_password_enables_the_platform_and_is_never_shown() {
        assert!(AdapterConfig::has_credential(&config()));
        assert!(!AdapterConfig::has_credential(&EmailConfig::default()));
        assert_eq!(AdapterConfig::secrets(&config()), vec!["pw".to_string()]);
        assert!(!format!("{:?}", settings_from(&config(), &ctx()).unwrap()).contains("pw\""));
        assert!(!ErasedConfig::to_json(&config()).to_string().contains("\"pw\""));
    }

    #[test]
    fn bad_values_name_their_key() {
        assert!(EmailConfig { tls: Some("maybe".into()), ..config() }.validate(true).is_err());
        assert!(EmailConfig { poll_interval: Some(0), ..config() }.validate(true).is_err());
        let parsed: EmailConfig = serde_json::from_value(serde_json::json!({"poll_interval": "30"})).unwrap();
        assert_eq!(parsed.poll_interval, Some(30));
    }

    /// The `send_budget:` block as written, parsed; the error's text (empty when it is fine).
    fn budget_error(budget: serde_json::Value) -> String {
        let block = serde_json::json!({"send_budget": budget});
        let lookup = |_: &str| None;
        let input = registration::BlockInput { block: &block, env: &lookup, vars: &[], enabled: false };
        match registration::parse::<EmailConfig>(&input) {
            Ok(_) => String::new(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn an_unusable_send_budget_is_refused_naming_its_key() {
        let err = budget_error(serde_json::json!({"per_second": -1}));
        assert!(err.contains("send_budget.per_second"), "{err}");
        assert_eq!(budget_error(serde_json::json!({"per_second": 0})), "", "0 switches the limit off");
        // A burst below one message would never let anything through.
        let err = budget_error(serde_json::json!({"burst": 0}));
        assert!(err.contains("send_budget.burst"), "{err}");
        assert!(budget_error(serde_json::json!({"per_hour": 5})).contains("per_hour"), "an unknown key is named");
        assert_eq!(budget_error(serde_json::json!({})), "", "the published limits by default");
    }
}
