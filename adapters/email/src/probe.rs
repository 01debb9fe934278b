//! `hermes doctor`'s questions to the mail servers: does the IMAP server take the login (then log
//! out), and does the SMTP server greet us, answer EHLO, start TLS as configured and take the
//! login (then QUIT). No mail is read, marked or sent.

use crate::adapter::EmailAdapter;
use crate::imap::{self, End};
use crate::settings::TlsMode;
use hermes_adapter::AdapterError;
use lettre::transport::smtp::authentication::{Credentials, Mechanism};
use lettre::transport::smtp::client::{AsyncSmtpConnection, TlsParameters};
use lettre::transport::smtp::extension::ClientId;
use std::time::Duration;

impl EmailAdapter {
    /// The mailbox and both servers, once each accepted the login; or what failed where.
    pub(crate) async fn identify_for_probe(&self) -> Result<Option<String>, AdapterError> {
        let s = &self.settings;
        match imap::connect(self).await {
            Ok(mut session) => {
                let _ = tokio::time::timeout(s.io_timeout, session.logout()).await;
            }
            Err(End::Fatal(e)) => return Err(e),
            Err(End::Retry(why)) => {
                return Err(AdapterError::retryable("imap", format!("{why}; check EMAIL_IMAP_HOST/PORT and EMAIL_TLS")));
            }
            Err(End::Stopped) => return Err(AdapterError::retryable("imap", "the IMAP check was stopped")),
        }
        let smtp = self.probe_smtp().await?;
        Ok(Some(format!(
            "{} (IMAP {}:{} login accepted; SMTP {}:{} {smtp})",
            s.address, s.imap_host, s.imap_port, s.smtp_host, s.smtp_port
        )))
    }

    /// Connect, EHLO, STARTTLS when configured, AUTH when offered, QUIT; what the server did.
    async fn probe_smtp(&self) -> Result<&'static str, AdapterError> {
        let s = &self.settings;
        let limit = s.io_timeout;
        let host = s.smtp_host.as_str();
        let hello = ClientId::Domain(s.domain());
        let tls = || {
            TlsParameters::builder(host.to_string())
                .build_rustls()
                .map_err(|e| AdapterError::fatal("smtp_tls", format!("SMTP TLS setup for {host}: {e}")))
        };
        let wrapper = if s.smtp_tls == TlsMode::Tls { Some(tls()?) } else { None };
        let connecting = AsyncSmtpConnection::connect_tokio1((host, s.smtp_port), Some(limit), &hello, wrapper, None);
        let mut conn = bounded(limit, "connect and EHLO", connecting).await?;
        if s.smtp_tls == TlsMode::StartTls {
            if !conn.can_starttls() {
                return Err(AdapterError::fatal(
                    "smtp_starttls",
                    format!(
                        "the SMTP server {host} does not offer STARTTLS; set EMAIL_TLS=tls with EMAIL_SMTP_PORT=465, or fix the server"
                    ),
                ));
            }
            bounded(limit, "STARTTLS", conn.starttls(tls()?, &hello)).await?;
        }
        let info = conn.server_info();
        let offers_auth = [Mechanism::Plain, Mechanism::Login].into_iter().any(|m| info.supports_auth_mechanism(m));
        let outcome = if offers_auth {
            let credentials = Credentials::new(s.address.clone(), s.password.clone());
            bounded(limit, "AUTH", conn.auth(&[Mechanism::Plain, Mechanism::Login], &credentials)).await?;
            "login accepted"
        } else {
            "answered EHLO (offers no login)"
        };
        let _ = tokio::time::timeout(Duration::from_secs(5), conn.quit()).await;
        Ok(outcome)
    }
}

async fn bounded<T>(
    limit: Duration,
    step: &str,
    fut: impl Future<Output = Result<T, lettre::transport::smtp::Error>>,
) -> Result<T, AdapterError> {
    match tokio::time::timeout(limit, fut).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) if e.is_permanent() && e.status().is_some_and(|c| matches!(c.to_string().as_str(), "530" | "534" | "535")) => {
            Err(AdapterError::fatal(
                "smtp_login",
                format!("SMTP {step}: the server refused the login ({e}); check EMAIL_ADDRESS and EMAIL_PASSWORD"),
            ))
        }
        Ok(Err(e)) => Err(AdapterError::retryable("smtp", format!("SMTP {step}: {e}; check EMAIL_SMTP_HOST/PORT and EMAIL_TLS"))),
        Err(_) => Err(AdapterError::retryable("smtp", format!("SMTP {step}: no answer within {limit:?}"))),
    }
}
