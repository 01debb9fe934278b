//! Sending one mail over SMTP with lettre's connection, step by step, so a failure can be
//! classified by where it happened:
//!
//! * before `DATA` was accepted (connect, greeting, TLS, AUTH, MAIL, RCPT, DATA): nothing was
//!   handed over, so a network failure or a 4xx is [`SendError::Transient`] (421 is a request
//!   to back off: [`SendError::RateLimited`]), a 5xx is permanent;
//! * after the message was written: if the server answered, its answer is definite (a 4xx or
//!   5xx there means it did not take the mail); if the connection broke or went silent, the
//!   mail may have been queued, so the failure is [`SendError::Ambiguous`] and never blindly
//!   resent.
//!
//! A certificate the server presents that does not check out is never accepted and never
//! retried: the failure names the server, the problem and the setting to change.

use crate::settings::{EmailSettings, TlsMode};
use crate::tls::{self, TlsFailure};
use hermes_adapter::SendError;
use lettre::address::Envelope;
use lettre::transport::smtp::authentication::{Credentials, Mechanism};
use lettre::transport::smtp::client::{AsyncSmtpConnection, TlsParameters};
use lettre::transport::smtp::commands::{Data, Mail, Rcpt};
use lettre::transport::smtp::extension::ClientId;
use std::future::Future;
use std::time::Duration;

/// The client error of one step before `DATA`: nothing has been handed over yet.
fn before_data(step: &str, e: lettre::transport::smtp::Error) -> SendError {
    let code = e.status().map(|c| c.to_string());
    if e.is_transient() {
        return match code.as_deref() {
            Some("421") => SendError::RateLimited { retry_after: Duration::from_secs(60) },
            _ => SendError::Transient(format!("SMTP {step}: {e}")),
        };
    }
    if e.is_permanent() {
        return match code.as_deref() {
            Some("535") | Some("534") | Some("530") => {
                SendError::Other(format!("SMTP {step}: the server refused the login ({e}); check EMAIL_ADDRESS and EMAIL_PASSWORD"))
            }
            Some("550") | Some("551") | Some("553") | Some("554") => SendError::Forbidden(format!("SMTP {step}: {e}")),
            _ => SendError::Other(format!("SMTP {step}: {e}")),
        };
    }
    if e.is_tls() {
        return SendError::Other(format!("SMTP {step}: TLS failed ({e})"));
    }
    SendError::Transient(format!("SMTP {step}: {e}"))
}

async fn step<T>(
    limit: Duration,
    name: &str,
    fut: impl Future<Output = Result<T, lettre::transport::smtp::Error>>,
) -> Result<T, SendError> {
    match tokio::time::timeout(limit, fut).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(before_data(name, e)),
        Err(_) => Err(SendError::Transient(format!("SMTP {name}: no answer within {limit:?}"))),
    }
}

/// A step that makes a TLS handshake: a refused certificate is told as such (and never
/// retried: the same certificate would be refused again), anything else as [`step`] does.
async fn tls_step<T>(
    settings: &EmailSettings,
    name: &str,
    fut: impl Future<Output = Result<T, lettre::transport::smtp::Error>>,
) -> Result<T, SendError> {
    let limit = settings.io_timeout;
    match tokio::time::timeout(limit, fut).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(match certificate_refused(settings, &e) {
            Some(why) => SendError::Other(why),
            None => before_data(name, e),
        }),
        Err(_) => Err(SendError::Transient(format!("SMTP {name}: no answer within {limit:?}"))),
    }
}

/// What is wrong with the SMTP server's certificate, if `e` is its refusal.
pub(crate) fn certificate_refused(settings: &EmailSettings, e: &lettre::transport::smtp::Error) -> Option<String> {
    match tls::classify("SMTP", &settings.smtp_host, settings.smtp_port, settings.ca_file.as_deref(), e) {
        TlsFailure::Certificate(why) => Some(why),
        TlsFailure::Other(_) => None,
    }
}

/// Deliver `message` (a whole RFC 5322 mail) to the envelope's recipients through the
/// configured server.
pub(crate) async fn send(settings: &EmailSettings, envelope: &Envelope, message: &[u8]) -> Result<(), SendError> {
    let limit = settings.io_timeout;
    let host = settings.smtp_host.as_str();
    let hello = ClientId::Domain(settings.domain());
    let tls = || tls::smtp_parameters(host, settings.ca_file.as_deref()).map_err(SendError::Other);
    let wrapper = match settings.smtp_tls {
        TlsMode::Tls => Some(tls()?),
        TlsMode::StartTls | TlsMode::None => None,
    };
    let connecting = AsyncSmtpConnection::connect_tokio1((host, settings.smtp_port), Some(limit), &hello, wrapper, None);
    let mut conn = tls_step(settings, "connect", connecting).await?;
    let result = transfer(settings, &mut conn, &hello, envelope, message, tls).await;
    match &result {
        Ok(()) => {
            let _ = tokio::time::timeout(Duration::from_secs(5), conn.quit()).await;
        }
        Err(_) => conn.abort().await,
    }
    result
}

async fn transfer(
    settings: &EmailSettings,
    conn: &mut AsyncSmtpConnection,
    hello: &ClientId,
    envelope: &Envelope,
    message: &[u8],
    tls: impl Fn() -> Result<TlsParameters, SendError>,
) -> Result<(), SendError> {
    let limit = settings.io_timeout;
    if settings.smtp_tls == TlsMode::StartTls {
        if !conn.can_starttls() {
            return Err(SendError::Other(format!(
                "the SMTP server {} does not offer STARTTLS; set EMAIL_TLS=tls with EMAIL_SMTP_PORT=465, or fix the server",
                settings.smtp_host
            )));
        }
        tls_step(settings, "STARTTLS", conn.starttls(tls()?, hello)).await?;
    }
    let info = conn.server_info();
    let offers_auth = [Mechanism::Plain, Mechanism::Login].into_iter().any(|m| info.supports_auth_mechanism(m));
    if offers_auth {
        let credentials = Credentials::new(settings.address.clone(), settings.password.clone());
        step(limit, "AUTH", conn.auth(&[Mechanism::Plain, Mechanism::Login], &credentials)).await?;
    } else if settings.smtp_tls != TlsMode::None {
        // A server that offers no AUTH may still relay for us (a trusted network); if it does
        // not, it refuses the recipient below, which names the problem.
        tracing::debug!("the SMTP server offers no AUTH; sending without logging in");
    }
    step(limit, "MAIL FROM", conn.command(Mail::new(envelope.from().cloned(), vec![]))).await?;
    for to in envelope.to() {
        step(limit, "RCPT TO", conn.command(Rcpt::new(to.clone(), vec![]))).await?;
    }
    step(limit, "DATA", conn.command(Data)).await?;
    // From here the server may take the mail at any moment.
    match tokio::time::timeout(limit, conn.message(message)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) if e.is_transient() => Err(SendError::Transient(format!("SMTP refused the mail for now: {e}"))),
        Ok(Err(e)) if e.is_permanent() => Err(SendError::Other(format!("SMTP refused the mail: {e}"))),
        Ok(Err(e)) => {
            Err(SendError::Ambiguous(format!("the SMTP connection failed after the mail was sent, before the server confirmed it: {e}")))
        }
        Err(_) => Err(SendError::Ambiguous(format!("the SMTP server did not confirm the mail within {limit:?}"))),
    }
}
