//! What the tests against the real mail peer share: accounts, sending with SMTP, reading with
//! IMAP, and an adapter run with a recording inbox. The peer is started by
//! `tests/peers/mail.sh` (or `tests/peers/run.sh`), which exports where it listens.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use async_trait::async_trait;
use futures::TryStreamExt;
use hermes_adapter::{
    AcceptError, AcceptOutcome, AdapterContext, AdapterError, HealthReporter, InboundEvent, InboundSink, PlatformAdapter, SessionDirectory,
    SessionDirectoryError, SessionSource,
};
use hermes_email::{EmailAdapter, EmailSettings, TlsMode};
use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

pub const AUTHSERV: &str = "mx.example.test";

fn env(name: &str) -> String {
    std::env::var(name).ok().filter(|v| !v.is_empty()).unwrap_or_else(|| {
        panic!("{name} is not set: run the tests through tests/peers/run.sh (or start tests/peers/mail.sh and export what it prints)")
    })
}

/// Where the peer listens.
#[derive(Clone, Debug)]
pub struct Peer {
    pub imap_port: u16,
    pub smtp_port: u16,
    pub users: PathBuf,
}

impl Peer {
    pub fn from_env() -> Peer {
        Peer {
            imap_port: env("HERMES_TEST_IMAP_PORT").parse().unwrap(),
            smtp_port: env("HERMES_TEST_SMTP_PORT").parse().unwrap(),
            users: PathBuf::from(env("HERMES_TEST_MAIL_USERS")),
        }
    }

    /// A fresh account `<name>-<unique>@example.test`; returns (address, password).
    pub async fn account(&self, name: &str) -> (String, String) {
        let unique = uuid::Uuid::new_v4().simple().to_string();
        let address = format!("{name}-{}@example.test", &unique[..12]);
        let password = format!("pw{}", &unique[12..24]);
        add_account(&self.users, &address, &password);
        // Dovecot looks at the file at most once a second: wait until the account logs in.
        let started = Instant::now();
        loop {
            let tcp = TcpStream::connect(("127.0.0.1", self.imap_port)).await.unwrap();
            let mut client = async_imap::Client::new(tcp);
            client.read_response().await.unwrap();
            match client.login(&address, &password).await {
                Ok(mut session) => {
                    let _ = session.logout().await;
                    break;
                }
                Err(_) if started.elapsed() < Duration::from_secs(10) => tokio::time::sleep(Duration::from_millis(200)).await,
                Err((e, _)) => panic!("the new account {address} cannot log in: {e}"),
            }
        }
        (address, password)
    }

    /// Settings for a bot on `address`, plain text to the loopback peer.
    pub fn settings(&self, address: &str, password: &str, dir: &Path) -> EmailSettings {
        let mut s = EmailSettings::new(address, password, dir.join("state"), dir.join("media"));
        s.imap_host = "127.0.0.1".into();
        s.smtp_host = "127.0.0.1".into();
        s.imap_port = self.imap_port;
        s.smtp_port = self.smtp_port;
        s.imap_tls = TlsMode::None;
        s.smtp_tls = TlsMode::None;
        s.poll_interval = Duration::from_secs(1);
        s.authserv_id = Some(AUTHSERV.into());
        s.io_timeout = Duration::from_secs(20);
        s
    }

    /// Hand a raw mail to the SMTP server, for `to`. The sending side writes the
    /// `Authentication-Results` header that the receiving MTA would stamp in real life.
    pub async fn send_raw(&self, from: &str, to: &str, raw: &str) {
        use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};
        let transport = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous("127.0.0.1").port(self.smtp_port).build();
        let envelope = lettre::address::Envelope::new(Some(from.parse().unwrap()), vec![to.parse().unwrap()]).unwrap();
        transport.send_raw(&envelope, raw.replace("\r\n", "\n").replace('\n', "\r\n").as_bytes()).await.unwrap();
    }

    /// Log in to a mailbox and select INBOX.
    pub async fn imap(&self, address: &str, password: &str) -> async_imap::Session<TcpStream> {
        let tcp = TcpStream::connect(("127.0.0.1", self.imap_port)).await.unwrap();
        let mut client = async_imap::Client::new(tcp);
        client.read_response().await.unwrap();
        let mut session = client.login(address, password).await.map_err(|(e, _)| e).unwrap();
        session.select("INBOX").await.unwrap();
        session
    }

    /// Every mail in a mailbox: (uid, seen, raw).
    pub async fn mails(&self, address: &str, password: &str) -> Vec<(u32, bool, String)> {
        let mut session = self.imap(address, password).await;
        let fetches: Vec<_> = session.uid_fetch("1:*", "(UID FLAGS BODY.PEEK[])").await.unwrap().try_collect().await.unwrap_or_default();
        let mut out: Vec<_> = fetches
            .iter()
            .map(|f| {
                let seen = f.flags().any(|flag| matches!(flag, async_imap::types::Flag::Seen));
                (f.uid.unwrap_or(0), seen, String::from_utf8_lossy(f.body().unwrap_or_default()).into_owned())
            })
            .collect();
        out.sort_by_key(|m| m.0);
        let _ = session.logout().await;
        out
    }

    /// Wait (up to 20 s) until `address`'s mailbox has `count` mails.
    pub async fn wait_for_mails(&self, address: &str, password: &str, count: usize) -> Vec<(u32, bool, String)> {
        let started = Instant::now();
        loop {
            let mails = self.mails(address, password).await;
            if mails.len() >= count || started.elapsed() > Duration::from_secs(20) {
                return mails;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Append an account to Dovecot's passwd-file. Dovecot notices a change of the file by its
/// modification time in whole seconds, so a line appended in the same second as its last read
/// would go unnoticed: under a lock shared by every test, the line is appended and the time is
/// moved at least one second past the previous one.
pub fn add_account(users: &Path, address: &str, password: &str) {
    let file = std::fs::OpenOptions::new().append(true).open(users).unwrap();
    file.lock().unwrap();
    let before = file.metadata().unwrap().modified().unwrap();
    (&file).write_all(format!("{address}:{{PLAIN}}{password}\n").as_bytes()).unwrap();
    let now = std::time::SystemTime::now();
    let bumped = (before + Duration::from_secs(1)).max(now);
    file.set_modified(bumped).unwrap();
    file.unlock().unwrap();
}

/// A mail from `from` to `to`, authenticated for `from`'s domain by our authserv-id.
pub fn authenticated_mail(from: &str, to: &str, subject: &str, message_id: &str, body: &str) -> String {
    format!(
        "Authentication-Results: {AUTHSERV}; dkim=pass header.d=example.test header.s=test\n\
         From: Alice Example <{from}>\nTo: {to}\nSubject: {subject}\nMessage-ID: {message_id}\n\
         Date: Fri, 27 Nov 2026 04:00:00 +0000\nMIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\n\n{body}\n"
    )
}

/// An inbox that records events, deduplicates on their id, and can be told to refuse.
#[derive(Default)]
pub struct Inbox {
    pub events: Mutex<Vec<InboundEvent>>,
    seen: Mutex<HashSet<String>>,
    pub refuse: AtomicUsize,
    pub refused: AtomicUsize,
}

#[async_trait]
impl InboundSink for Inbox {
    async fn accept(&self, event: InboundEvent) -> Result<AcceptOutcome, AcceptError> {
        if self.refuse.load(Ordering::SeqCst) > 0 {
            self.refuse.fetch_sub(1, Ordering::SeqCst);
            self.refused.fetch_add(1, Ordering::SeqCst);
            return Err(AcceptError::Storage("the test inbox refuses".into()));
        }
        if !self.seen.lock().unwrap().insert(event.event_id.clone()) {
            return Ok(AcceptOutcome::Duplicate);
        }
        self.events.lock().unwrap().push(event);
        Ok(AcceptOutcome::Accepted)
    }
}

impl Inbox {
    pub fn events(&self) -> Vec<InboundEvent> {
        self.events.lock().unwrap().clone()
    }

    /// Wait (up to 20 s) until `count` events arrived.
    pub async fn wait_for(&self, count: usize) -> Vec<InboundEvent> {
        let started = Instant::now();
        while self.events.lock().unwrap().len() < count && started.elapsed() < Duration::from_secs(20) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.events()
    }
}

struct NoSessions;

#[async_trait]
impl SessionDirectory for NoSessions {
    async fn open(&self, _: &SessionSource) -> Result<String, SessionDirectoryError> {
        Err(SessionDirectoryError::Storage("none".into()))
    }
    async fn history(&self, _: &SessionSource, _: usize) -> Result<Option<Vec<hermes_adapter::StoredMessage>>, SessionDirectoryError> {
        Ok(None)
    }
    async fn close(&self, _: &SessionSource) -> Result<bool, SessionDirectoryError> {
        Ok(false)
    }
}

/// A running adapter: its inbox, health and the handle of its `run`.
pub struct Running {
    pub adapter: Arc<EmailAdapter>,
    pub inbox: Arc<Inbox>,
    pub health: HealthReporter,
    pub shutdown: CancellationToken,
    pub task: tokio::task::JoinHandle<Result<(), AdapterError>>,
}

impl Running {
    /// Start `settings`' adapter with `inbox`, letting in only `allowed` senders.
    pub async fn start(settings: EmailSettings, inbox: Arc<Inbox>, allowed: &[&str]) -> Running {
        let adapter = Arc::new(EmailAdapter::new(settings));
        let allowed: Vec<String> = allowed.iter().map(|a| a.to_lowercase()).collect();
        let health = HealthReporter::new();
        let shutdown = CancellationToken::new();
        let ctx = AdapterContext::new(inbox.clone(), Arc::new(NoSessions), health.clone(), shutdown.clone())
            .with_sender_policy(Arc::new(move |s: &SessionSource| s.user_id.as_ref().is_some_and(|u| allowed.contains(u))));
        let runner = adapter.clone();
        let task = tokio::spawn(async move { runner.run(ctx).await });
        let started = Instant::now();
        while !health.is_connected() && started.elapsed() < Duration::from_secs(20) && !task.is_finished() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(health.is_connected(), "the adapter did not connect to the mailbox");
        Running { adapter, inbox, health, shutdown, task }
    }

    pub async fn stop(self) {
        self.shutdown.cancel();
        let outcome = tokio::time::timeout(Duration::from_secs(20), self.task).await.expect("run ends after shutdown").unwrap();
        assert!(outcome.is_ok(), "run ended with {outcome:?}");
    }
}
