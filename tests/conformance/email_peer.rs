//! The email peer of the shared suite: a real Dovecot mailbox and Postfix (tests/peers/mail.sh),
//! people who write with `smtplib` and read with `imaplib`, and the bot's answers read back over
//! IMAP and parsed as a mail program would (mail-parser).
//!
//! Email has one kind of chat, a sender's own conversation, and no edits, typing, groups or
//! threads; so it runs the suite's behaviours that a mailbox can show (see `main.rs`). A reply
//! quotes the mail it answers, as mail programs do. A
//! redelivery is the same mail (same `Message-ID`) arriving again; a broken connection is
//! Dovecot kicking the bot's IMAP sessions (`doveadm kick`).

use crate::email::{self, AUTHSERV, MailPeer};
use crate::peer::{Chat, ChatPeer, Media, Posted};
use crate::support::Setup;
use mail_parser::MimeHeaders;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A mail the bot sent, as a mail program shows it.
struct Received {
    message_id: String,
    text: String,
    files: Vec<String>,
    /// The contents of its `audio/*` attachments.
    audio: Vec<Vec<u8>>,
}

pub(crate) struct EmailPeer {
    mail: MailPeer,
    bot: (String, String),
    /// Unique to this peer: users are `<prefix>u<n>@example.test`.
    prefix: String,
    created: Mutex<Vec<u32>>,
    /// Every gateway's HERMES_HOME configured for this mailbox (replicas share one), to know
    /// when an adapter has taken its place in the mailbox.
    homes: Mutex<Vec<PathBuf>>,
    /// (from, subject, message id, body) of the last mail sent, for a redelivery.
    last: Mutex<Option<(String, String, String, String)>>,
}

const PASSWORD: &str = "user-password-0123";

impl EmailPeer {
    fn address(&self, n: u32) -> String {
        format!("{}u{n}@example.test", self.prefix)
    }

    /// User `n`'s account, created on first use (the bot answers to it).
    fn account(&self, n: u32) -> String {
        let address = self.address(n);
        let mut created = self.created.lock().unwrap();
        if !created.contains(&n) {
            email::mailtool(&["add-user", &self.mail.users, &self.mail.imap_port, &address, PASSWORD]);
            created.push(n);
        }
        address
    }

    /// Mail sent before the adapter's first look at the mailbox is old mail it never answers:
    /// wait until it has recorded where the mailbox stood.
    /// With replicas, the one holding the mailbox is the one that recorded it.
    async fn adapter_ready(&self) {
        let homes = self.homes.lock().unwrap().clone();
        assert!(!homes.is_empty(), "configure() ran");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !homes.iter().any(|home| home.join("platforms/email/cursor.json").exists()) {
            assert!(Instant::now() < deadline, "the email adapter never connected to the mailbox");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn send(&self, from: &str, subject: &str, message_id: &str, body: &str) {
        self.mail.send_authenticated(from, &self.bot.0, subject, message_id, body, &[]);
        *self.last.lock().unwrap() = Some((from.to_string(), subject.to_string(), message_id.to_string(), body.to_string()));
    }

    /// The bot's mails to `chat`, as a reader orders them: by `Date`, and within one second by
    /// a split answer's `(i/n)` counter. The mailbox's own order is the order the servers
    /// delivered in, which Postfix's parallel delivery does not keep.
    fn received(&self, chat: &Chat) -> Vec<Received> {
        let parser = mail_parser::MessageParser::default();
        let mut mails: Vec<(i64, usize, Received)> = self
            .mail
            .mails(&chat.chat_id, PASSWORD)
            .into_iter()
            .filter_map(|m| {
                let parsed = parser.parse(m.raw.as_bytes())?;
                let from_bot = parsed.from().and_then(|f| f.first()).and_then(|a| a.address()).is_some_and(|a| a == self.bot.0);
                // Mail's lines end in CRLF on the wire (RFC 5322 §2.3); a reader sees lines.
                let text = parsed.body_text(0).map(|t| t.trim_end().replace("\r\n", "\n")).unwrap_or_default();
                let sent = parsed.date().map(|d| d.to_timestamp()).unwrap_or(0);
                let part = part_number(&text);
                from_bot.then(|| {
                    let received = Received {
                        message_id: parsed.message_id().unwrap_or_default().to_string(),
                        text,
                        files: parsed.attachments().filter_map(|a| a.attachment_name().map(str::to_string)).collect(),
                        audio: parsed
                            .attachments()
                            .filter(|a| a.content_type().is_some_and(|ct| ct.ctype().eq_ignore_ascii_case("audio")))
                            .map(|a| a.contents().to_vec())
                            .collect(),
                    };
                    (sent, part, received)
                })
            })
            .collect();
        mails.sort_by_key(|(sent, part, _)| (*sent, *part));
        mails.into_iter().map(|(_, _, m)| m).collect()
    }
}

/// A mail with `media` attached under `caption`, as a mail program writes it: multipart/mixed,
/// the text first, the file base64-encoded with its MIME type and name.
fn media_mail(from: &str, to: &str, message_id: &str, media: &Media, caption: &str) -> String {
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(&media.bytes);
    let lines: Vec<&str> = encoded.as_bytes().chunks(76).map(|c| std::str::from_utf8(c).unwrap()).collect();
    format!(
        "Authentication-Results: {AUTHSERV}; dkim=pass header.d=example.test header.s=t1\r\nFrom: {from}\r\nTo: {to}\r\n\
         Subject: Re: hermes\r\nMessage-ID: {message_id}\r\nMIME-Version: 1.0\r\n\
         Content-Type: multipart/mixed; boundary=\"hermes-media-part\"\r\n\r\n\
         --hermes-media-part\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n{caption}\r\n\
         --hermes-media-part\r\nContent-Type: {}\r\nContent-Disposition: attachment; filename=\"{}\"\r\n\
         Content-Transfer-Encoding: base64\r\n\r\n{}\r\n--hermes-media-part--\r\n",
        media.mime,
        media.file_name,
        lines.join("\r\n")
    )
}

/// Hands `raw` to Postfix over SMTP (RFC 5321: EHLO, MAIL, RCPT, DATA with dot-stuffing).
async fn submit(smtp_port: &str, from: &str, to: &str, raw: &str) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let stream = tokio::net::TcpStream::connect(format!("127.0.0.1:{smtp_port}")).await.expect("connect to Postfix");
    let (read, mut write) = stream.into_split();
    let mut replies = BufReader::new(read).lines();
    let mut expect = async |code: &str| loop {
        let line = replies.next_line().await.unwrap().expect("Postfix answers");
        assert!(line.starts_with(code), "Postfix answered {line:?}, not {code}");
        if line.as_bytes().get(3) == Some(&b' ') {
            break;
        }
    };
    expect("220").await;
    let stuffed: String = raw.split("\r\n").map(|l| if l.starts_with('.') { format!(".{l}\r\n") } else { format!("{l}\r\n") }).collect();
    for (command, code) in [
        ("EHLO peer.example.test\r\n".to_string(), "250"),
        (format!("MAIL FROM:<{from}>\r\n"), "250"),
        (format!("RCPT TO:<{to}>\r\n"), "250"),
        ("DATA\r\n".to_string(), "354"),
        (format!("{stuffed}.\r\n"), "250"),
        ("QUIT\r\n".to_string(), "221"),
    ] {
        write.write_all(command.as_bytes()).await.unwrap();
        expect(code).await;
    }
}

/// `i` of a text ending in a split answer's `(i/n)`; 0 for a whole answer.
fn part_number(text: &str) -> usize {
    let Some(counter) = text.strip_suffix(')').and_then(|t| t.rsplit_once('(')).map(|(_, c)| c) else { return 0 };
    counter.split_once('/').and_then(|(i, _)| i.parse().ok()).unwrap_or(0)
}

static SENT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn message_id() -> String {
    format!("<suite-{}-{}@example.test>", std::process::id(), SENT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
}

impl ChatPeer for EmailPeer {
    const PLATFORM: &'static str = "email";
    const MAX_LEN: usize = 50_000;
    const PARSES_FORMATTING: bool = false;
    const DIALECT: hermes_adapter::MarkdownDialect = hermes_adapter::MarkdownDialect::Plain;
    const UNIT: hermes_adapter::LengthUnit = hermes_adapter::LengthUnit::Chars;
    const SHOWS_TYPING: bool = false;
    // Three mails' worth: a shorter answer fits in one.
    const LONG_ANSWER_CHARS: usize = 120_000;
    const HAS_GROUPS: bool = false;
    const DECLARES_MEDIA: bool = false;

    async fn start() -> Self {
        let mail = email::peer();
        let bot = mail.account("bot");
        let prefix = format!("s{:08x}", rand::random::<u32>());
        EmailPeer { mail, bot, prefix, created: Mutex::new(Vec::new()), homes: Mutex::new(Vec::new()), last: Mutex::new(None) }
    }

    fn configure(&self, setup: &mut Setup) -> String {
        let allowed = (1..=50).map(|n| self.address(n)).collect::<Vec<_>>().join(",");
        self.mail.configure(setup, &self.bot, &allowed);
        self.homes.lock().unwrap().push(setup.home.path().to_path_buf());
        "  email:\n    enabled: true\n".to_string()
    }

    fn measure(text: &str) -> usize {
        text.chars().count()
    }

    async fn dm(&self, user: u32, text: &str) -> Chat {
        self.adapter_ready().await;
        let from = self.account(user);
        // A reply subject: the text reaches the agent without a `[Subject: …]` line.
        self.send(&from, "Re: hermes", &message_id(), text);
        Chat { chat_id: from, thread_id: None }
    }

    async fn reply(&self, user: u32, chat: &Chat, message_id: &str, text: &str) {
        let from = self.account(user);
        // As a mail program answers: the new words on top, the mail answered quoted below.
        let answered = self.received(chat).into_iter().find(|m| format!("<{}>", m.message_id) == message_id);
        let quote: String = answered.map(|m| m.text.lines().map(|l| format!("> {l}\n")).collect()).unwrap_or_default();
        let body = format!("{text}\n\nOn Sat, 28 Nov 2026 at 10:00, Hermes <{}> wrote:\n{quote}", self.bot.0);
        let in_reply_to = format!("In-Reply-To: {message_id}");
        self.mail.send_authenticated(&from, &self.bot.0, "Re: hermes", &self::message_id(), &body, &[&in_reply_to]);
    }

    async fn group(&self, _user: u32, _text: &str, _mention: bool) -> Chat {
        unreachable!("email has no group chats; the suite's group behaviours are not run for it")
    }

    async fn thread(&self, _user: u32, _thread: u32, _text: &str) -> Chat {
        unreachable!("email has no threads of its own; the suite's thread behaviours are not run for it")
    }

    fn posted(&self, chat: &Chat) -> Vec<Posted> {
        self.received(chat)
            .into_iter()
            .filter(|m| m.files.is_empty() || !m.text.is_empty())
            .map(|m| Posted {
                id: format!("<{}>", m.message_id),
                text: m.text.clone(),
                raw: m.text,
                // A mail program shows a link as text; nothing fetches it.
                previews_off: true,
                edits: 0,
                styles: Vec::new(),
            })
            .collect()
    }

    fn files(&self, chat: &Chat) -> Vec<String> {
        self.received(chat).into_iter().flat_map(|m| m.files).collect()
    }

    fn typing_seen(&self, _chat: &Chat) -> usize {
        0
    }

    fn redeliver_last(&self) {
        // The same mail, Message-ID and all, delivered once more (a sender's retry, a copy).
        let (from, subject, id, body) = self.last.lock().unwrap().clone().expect("a mail was sent");
        self.mail.send_authenticated(&from, &self.bot.0, &subject, &id, &body, &[]);
    }

    fn rate_limit_sends(&self, _n: usize) {
        unreachable!("Postfix cannot be told to throttle; the suite's rate-limit behaviour is not run for email")
    }

    fn reject_formatting(&self, _n: usize) -> bool {
        false
    }

    async fn interrupt_connection(&self) {
        let conf = std::env::var("HERMES_TEST_DOVECOT_CONF").expect("HERMES_TEST_DOVECOT_CONF (set by tests/peers/mail.sh)");
        let kicked = std::process::Command::new("doveadm").args(["-c", &conf, "kick", &self.bot.0]).output().expect("run doveadm");
        let said = format!("{}{}", String::from_utf8_lossy(&kicked.stdout), String::from_utf8_lossy(&kicked.stderr));
        assert!(kicked.status.success() && !said.contains("no users kicked"), "the bot's IMAP session was cut: {said}");
    }

    async fn dm_media(&self, user: u32, media: &Media, caption: &str) -> Chat {
        self.adapter_ready().await;
        let from = self.account(user);
        let raw = media_mail(&from, &self.bot.0, &message_id(), media, caption);
        submit(&self.mail.smtp_port, &from, &self.bot.0, &raw).await;
        Chat { chat_id: from, thread_id: None }
    }

    /// Email delivers a mail whole (IMAP fetches it with its attachments, nothing is declared
    /// apart), so what counts is what the adapter kept: the bytes of the files in the gateway's
    /// media cache.
    fn media_bytes_served(&self) -> u64 {
        let mut total = 0;
        let mut folders: Vec<PathBuf> = self.homes.lock().unwrap().iter().map(|home| home.join("cache")).collect();
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
                match entry.metadata() {
                    Ok(meta) if meta.is_dir() => folders.push(entry.path()),
                    Ok(meta) => total += meta.len(),
                    Err(_) => {}
                }
            }
        }
        total
    }

    /// The `audio/*` attachments of the bot's mails: mail has no voice notes, so a spoken answer
    /// arrives as an `audio/ogg` file.
    fn voice_sent(&self, chat: &Chat) -> Vec<Vec<u8>> {
        self.received(chat).into_iter().flat_map(|m| m.audio).collect()
    }

    fn inject_junk(&self) {
        // Junk the adapter would skip as old mail proves nothing.
        tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(self.adapter_ready()));
        let from = self.account(10);
        let to = &self.bot.0;
        // A bounce, an out-of-office answer, list mail, and mail claiming to be user 10 that no
        // receiving server vouched for: none is answered.
        let pass = format!("Authentication-Results: {AUTHSERV}; dkim=pass header.d=example.test");
        self.mail.send("MAILER-DAEMON@example.test", to, "Undelivered Mail Returned to Sender", &message_id(), "bounce", &[]);
        self.mail.send(&from, to, "Out of office", &message_id(), "away until Monday", &[&pass, "Auto-Submitted: auto-replied"]);
        self.mail.send(&from, to, "Newsletter", &message_id(), "news", &[&pass, "Precedence: list", "List-Id: <news.example.test>"]);
        self.mail.send(&from, to, "Re: hermes", &message_id(), "forged: nobody checked me", &[]);
    }
}
