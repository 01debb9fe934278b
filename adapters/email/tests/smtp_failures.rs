//! How a failed SMTP delivery is classified, against a scripted SMTP server on loopback: before
//! the message is handed over a failure is safe to retry; once the message was written, a broken
//! connection may have delivered it and is never blindly resent.

#![allow(clippy::unwrap_used)]

use hermes_adapter::{ChatTarget, OutboundMessage, Platform, PlatformAdapter, SendError};
use hermes_email::{EmailAdapter, EmailSettings, TlsMode};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

/// Where the scripted server stops behaving.
#[derive(Clone, Copy)]
enum Script {
    /// `421` as the greeting.
    BusyGreeting,
    /// `550` to RCPT TO.
    RefuseRecipient,
    /// Takes the message, then closes without a final answer.
    CutAfterData,
    /// Takes the message and answers `451`.
    TemporaryAfterData,
    /// Takes the message and answers `250`.
    Deliver,
}

async fn serve(script: Script) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let (socket, _) = listener.accept().await.unwrap();
        let (read, mut write) = socket.into_split();
        let mut lines = BufReader::new(read).lines();
        if matches!(script, Script::BusyGreeting) {
            write.write_all(b"421 4.3.2 too busy, try later\r\n").await.unwrap();
            return;
        }
        write.write_all(b"220 fake ESMTP\r\n").await.unwrap();
        while let Ok(Some(line)) = lines.next_line().await {
            let command = line.to_ascii_uppercase();
            let answer: &[u8] = if command.starts_with("EHLO") {
                b"250-fake\r\n250 8BITMIME\r\n"
            } else if command.starts_with("MAIL") {
                b"250 ok\r\n"
            } else if command.starts_with("RCPT") {
                if matches!(script, Script::RefuseRecipient) { b"550 5.1.1 no such user\r\n" } else { b"250 ok\r\n" }
            } else if command.starts_with("DATA") {
                write.write_all(b"354 go ahead\r\n").await.unwrap();
                while let Ok(Some(body)) = lines.next_line().await {
                    if body == "." {
                        break;
                    }
                }
                match script {
                    Script::CutAfterData => return,
                    Script::TemporaryAfterData => b"451 4.3.0 queue trouble\r\n",
                    _ => b"250 2.0.0 queued\r\n",
                }
            } else if command.starts_with("QUIT") {
                write.write_all(b"221 bye\r\n").await.unwrap();
                return;
            } else {
                b"250 ok\r\n"
            };
            write.write_all(answer).await.unwrap();
        }
    });
    port
}

fn adapter(port: u16, dir: &std::path::Path) -> EmailAdapter {
    let mut settings = EmailSettings::new("bot@example.test", "pw", dir.join("state"), dir.join("media"));
    settings.smtp_host = "127.0.0.1".into();
    settings.smtp_port = port;
    settings.smtp_tls = TlsMode::None;
    settings.io_timeout = Duration::from_secs(5);
    EmailAdapter::new(settings)
}

fn message() -> OutboundMessage {
    OutboundMessage {
        target: ChatTarget { platform: Platform::new("email"), chat_id: "alice@example.test".into(), thread_id: None },
        text: "hello".into(),
        reply_to: None,
        idempotency_key: "turn:0".into(),
        is_final: true,
        usage: None,
        finish_reason: None,
        buttons: Vec::new(),
        file: None,
    }
}

async fn outcome(script: Script) -> Result<hermes_adapter::SendReceipt, SendError> {
    let dir = tempfile::tempdir().unwrap();
    let port = serve(script).await;
    adapter(port, dir.path()).send(&message()).await
}

#[tokio::test]
async fn a_cut_after_the_message_was_written_is_ambiguous() {
    let result = outcome(Script::CutAfterData).await;
    assert!(matches!(result, Err(SendError::Ambiguous(_))), "{result:?}");
    assert!(!result.unwrap_err().is_retryable());
}

#[tokio::test]
async fn failures_before_the_message_was_handed_over_are_safe_to_retry_or_final() {
    let busy = outcome(Script::BusyGreeting).await;
    assert!(matches!(busy, Err(SendError::RateLimited { .. })), "{busy:?}");
    let refused = outcome(Script::RefuseRecipient).await;
    assert!(matches!(refused, Err(SendError::Forbidden(_))), "{refused:?}");
    let later = outcome(Script::TemporaryAfterData).await;
    assert!(matches!(later, Err(SendError::Transient(_))), "a 451 answer is a definite no: {later:?}");
    let dir = tempfile::tempdir().unwrap();
    let nobody = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap().port();
    let unreachable = adapter(nobody, dir.path()).send(&message()).await;
    assert!(matches!(unreachable, Err(SendError::Transient(_))), "{unreachable:?}");
}

#[tokio::test]
async fn a_delivered_mail_reports_its_message_id() {
    let receipt = outcome(Script::Deliver).await.unwrap();
    let id = receipt.message_id.unwrap();
    assert!(id.starts_with("<hermes.") && id.ends_with("@example.test>"), "{id}");
}
