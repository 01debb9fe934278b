//! `hermes doctor`'s questions to the mail servers: does the IMAP server take the login (then log
//! out), and does the SMTP server greet us, answer EHLO, start TLS as configured and take the
//! login (then QUIT). No mail is read, marked or sent. The same SMTP check runs as the adapter
//! starts, so that a certificate that does not check out shows at once.

use crate::adapter::EmailAdapter;
use crate::imap::{self, End};
use crate::settings::{EmailSettings, TlsMode};
use hermes_adapter::AdapterError;
use lettre::transport::smtp::authentication::{Credentials, Mechanism};
use lettre::transport::smtp::client::AsyncSmtpConnection;
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
            Err(End::Stopped | End::Fenced) => return Err(AdapterError::retryable("imap", "the IMAP check was stopped")),
        }
        let smtp = self.probe_smtp().await?;
        Ok(Some(format!(
            "{} (IMAP {}:{} login accepted; SMTP {}:{} {smtp})",
            s.address, s.imap_host, s.imap_port, s.smtp_host, s.smtp_port
        )))
    }

    /// The SMTP server's certificate refused, checked once as the adapter starts: answers can
    /// never go out through a server whose certificate does not check out, and waiting for the
    /// first answer to find out would hide it from `/readyz` and `gateway status`. Any other
    /// trouble (the server down for a moment, say) is left to the sends, which retry.
    pub(crate) async fn smtp_certificate_problem(&self) -> Option<AdapterError> {
        if self.settings.smtp_tls == TlsMode::None {
            return None;
        }
        match self.probe_smtp().await {
            Err(AdapterError::Fatal { code, message }) if code == "email_tls" => Some(AdapterError::Fatal { code, message }),
            Err(e) => {
                tracing::warn!("the SMTP server could not be checked at start: {e}");
                None
            }
            Ok(_) => None,
        }
    }

    /// Connect, EHLO, STARTTLS when configured, AUTH when offered, QUIT; what the server did.
    async fn probe_smtp(&self) -> Result<&'static str, AdapterError> {
        let s = &self.settings;
        let limit = s.io_timeout;
        let host = s.smtp_host.as_str();
        let hello = ClientId::Domain(s.domain());
        let tls = || crate::tls::smtp_parameters(host, s.ca_file.as_deref()).map_err(|e| AdapterError::fatal("smtp_tls", e));
        let wrapper = if s.smtp_tls == TlsMode::Tls { Some(tls()?) } else { None };
        let connecting = AsyncSmtpConnection::connect_tokio1((host, s.smtp_port), Some(limit), &hello, wrapper, None);
        let mut conn = bounded(s, "connect and EHLO", connecting).await?;
        if s.smtp_tls == TlsMode::StartTls {
            if !conn.can_starttls() {
                return Err(AdapterError::fatal(
                    "smtp_starttls",
                    format!(
                        "the SMTP server {host} does not offer STARTTLS; set EMAIL_TLS=tls with EMAIL_SMTP_PORT=465, or fix the server"
                    ),
                ));
            }
            bounded(s, "STARTTLS", conn.starttls(tls()?, &hello)).await?;
        }
        let info = conn.server_info();
        let offers_auth = [Mechanism::Plain, Mechanism::Login].into_iter().any(|m| info.supports_auth_mechanism(m));
        let outcome = if offers_auth {
            let credentials = Credentials::new(s.address.clone(), s.password.clone());
            bounded(s, "AUTH", conn.auth(&[Mechanism::Plain, Mechanism::Login], &credentials)).await?;
            "login accepted"
        } else {
            "answered EHLO (offers no login)"
        };
        let _ = tokio::time::timeout(Duration::from_secs(5), conn.quit()).await;
        Ok(outcome)
    }
}

/// One SMTP step within the I/O timeout; a refused certificate or login is fatal (asking again
/// gets the same answer), anything else worth another try.
async fn bounded<T>(
    s: &EmailSettings,
    step: &str,
    fut: impl Future<Output = Result<T, lettre::transport::smtp::Error>>,
) -> Result<T, AdapterError> {
    let limit = s.io_timeout;
    match tokio::time::timeout(limit, fut).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(match crate::smtp::certificate_refused(s, &e) {
            Some(why) => AdapterError::fatal("email_tls", why),
            None => refused(step, e),
        }),
        Err(_) => Err(AdapterError::retryable("smtp", format!("SMTP {step}: no answer within {limit:?}"))),
    }
}

fn refused(step: &str, e: lettre::transport::smtp::Error) -> AdapterError {
    if e.is_permanent() && e.status().is_some_and(|c| matches!(c.to_string().as_str(), "530" | "534" | "535")) {
        return AdapterError::fatal(
            "smtp_login",
            format!("SMTP {step}: the server refused the login ({e}); check EMAIL_ADDRESS and EMAIL_PASSWORD"),
        );
    }
    AdapterError::retryable("smtp", format!("SMTP {step}: {e}; check EMAIL_SMTP_HOST/PORT and EMAIL_TLS"))
}
