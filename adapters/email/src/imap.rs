//! The receiving side: one IMAP session at a time on INBOX, reading every mail past the stored
//! cursor, then waiting with IDLE (renewed every `idle_renewal`, under RFC 2177's 29 minutes) or,
//! where the server has no IDLE or IDLE failed, polling. A connection that goes silent and then
//! does not answer is declared dead within `dead_after` (see [`idle`]); so is one that goes silent
//! mid-command, every IMAP step being bounded by it too. Connection failures
//! reconnect with backoff, the health showing the adapter down and why meanwhile; a refused
//! login or a server certificate that does not check out ends `run` for good, naming what to
//! fix.
//!
//! **Once, and nothing lost.** Mails are handled in UID order. A mail's headers decide first
//! (see [`crate::inbound::judge`]); only an allowed, authenticated sender's mail is downloaded
//! whole. It is handed to the inbox, and only after the inbox took it is it marked `\Seen` and
//! the cursor moved past it. If the inbox refuses, the cursor stays, the mail stays unread and
//! it is tried again. A crash between the inbox and the cursor replays the mail; the inbox
//! knows its event id and drops the copy.
//!
//! **One reader.** The cursor is recorded through the gateway's fenced cursors first
//! ([`crate::position`]): with replicas sharing a store, a replica whose lease on the mailbox is
//! over is refused, marks nothing more `\Seen`, moves no cursor and stops; the replica taking
//! over starts from the shared cursor.
//!
//! **No backlog.** On first start, or when the server changed the mailbox's UIDVALIDITY (the
//! UIDs mean something else now), the cursor is set to the end of the mailbox: old mail is
//! never answered.

use crate::adapter::EmailAdapter;
use crate::inbound::{self, Verdict};
use crate::position::{self, RecordError};
use crate::settings::TlsMode;
use crate::state::Cursor;
use crate::tls::{self, MailStream, TlsFailure};
use futures::TryStreamExt;
use hermes_adapter::{AcceptError, AdapterContext, AdapterError, CursorWrite};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

type Session = async_imap::Session<MailStream>;

/// How long the connection may stay unopenable before `run` gives up to the supervisor.
const RECONNECT_GRACE: Duration = Duration::from_secs(120);

/// How a session ended.
pub(crate) enum End {
    /// Shutdown was asked for.
    Stopped,
    /// Worth reconnecting (network, server trouble).
    Retry(String),
    /// Retrying cannot help (login refused).
    Fatal(AdapterError),
    /// Another replica holds the mailbox now: stop reading at once.
    Fenced,
}

impl From<async_imap::error::Error> for End {
    fn from(e: async_imap::error::Error) -> Self {
        End::Retry(format!("IMAP: {e}"))
    }
}

pub(crate) async fn run(adapter: &EmailAdapter, ctx: AdapterContext) -> Result<(), AdapterError> {
    let mut wait = Duration::from_secs(1);
    let mut failing_since: Option<Instant> = None;
    loop {
        let connected_at = Instant::now();
        let end = session(adapter, &ctx).await;
        ctx.health.mark_disconnected();
        match end {
            End::Stopped => return Ok(()),
            End::Fatal(e) => return Err(e),
            End::Fenced => return Err(AdapterError::fenced()),
            End::Retry(why) => {
                if connected_at.elapsed() > Duration::from_secs(60) {
                    // The session was up for a while: this is a new outage.
                    failing_since = None;
                    wait = Duration::from_secs(1);
                }
                let since = *failing_since.get_or_insert_with(Instant::now);
                if since.elapsed() > RECONNECT_GRACE {
                    return Err(AdapterError::retryable("imap", format!("no IMAP session for {RECONNECT_GRACE:?}: {why}")));
                }
                ctx.health.set_degraded(Some(format!("{why}; reconnecting")));
                tracing::warn!("the IMAP session ended: {why}; reconnecting in {wait:?}");
                tokio::select! {
                    _ = ctx.shutdown.cancelled() => return Ok(()),
                    _ = tokio::time::sleep(wait) => {}
                }
                wait = (wait * 2).min(Duration::from_secs(30));
            }
        }
    }
}

async fn timed<T, E: std::fmt::Display>(
    limit: Duration,
    what: &str,
    fut: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, End> {
    match tokio::time::timeout(limit, fut).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(End::Retry(format!("{what}: {e}"))),
        Err(_) => Err(End::Retry(format!("{what}: no answer within {limit:?}"))),
    }
}

/// Connect, log in and select INBOX.
pub(crate) async fn connect(adapter: &EmailAdapter) -> Result<Session, End> {
    let s = &adapter.settings;
    let limit = s.imap_step_limit();
    let tcp = timed(limit, "connecting to the IMAP server", TcpStream::connect((s.imap_host.as_str(), s.imap_port))).await?;
    let stream = match s.imap_tls {
        TlsMode::Tls => secure(adapter, tcp).await?,
        TlsMode::None | TlsMode::StartTls => MailStream::Plain(tcp),
    };
    let mut client = async_imap::Client::new(stream);
    timed(limit, "reading the IMAP greeting", async {
        client.read_response().await.map_err(|e| e.to_string())?.ok_or_else(|| "the server closed the connection".to_string())
    })
    .await?;
    if s.imap_tls == TlsMode::StartTls {
        match tokio::time::timeout(limit, client.run_command_and_check_ok("STARTTLS", None)).await {
            Ok(Ok(())) => {}
            // The server said no: it will keep saying no, and clear text is never the fallback.
            Ok(Err(async_imap::error::Error::No(why) | async_imap::error::Error::Bad(why))) => {
                return Err(End::Fatal(AdapterError::fatal(
                    "imap_starttls",
                    format!("the IMAP server refused STARTTLS ({why}); set EMAIL_TLS=tls with EMAIL_IMAP_PORT=993, or fix the server"),
                )));
            }
            Ok(Err(e)) => return Err(End::Retry(format!("IMAP STARTTLS: {e}"))),
            Err(_) => return Err(End::Retry(format!("IMAP STARTTLS: no answer within {limit:?}"))),
        }
        let MailStream::Plain(tcp) = client.into_inner() else {
            return Err(End::Retry("internal: STARTTLS on an encrypted stream".into()));
        };
        client = async_imap::Client::new(secure(adapter, tcp).await?);
    }
    let login = tokio::time::timeout(limit, client.login(&s.address, &s.password)).await;
    let session = match login {
        Ok(Ok(session)) => session,
        Ok(Err((async_imap::error::Error::No(why) | async_imap::error::Error::Bad(why), _))) => {
            return Err(End::Fatal(AdapterError::fatal(
                "email_login",
                format!("the IMAP server refused the login of {} ({why}); check EMAIL_ADDRESS and EMAIL_PASSWORD", s.address),
            )));
        }
        Ok(Err((e, _))) => return Err(End::Retry(format!("IMAP login: {e}"))),
        Err(_) => return Err(End::Retry(format!("IMAP login: no answer within {limit:?}"))),
    };
    Ok(session)
}

/// TLS over `tcp`, the certificate checked. A refused certificate ends `run` (retrying cannot
/// fix it), saying what is wrong and what to change.
async fn secure(adapter: &EmailAdapter, tcp: TcpStream) -> Result<MailStream, End> {
    let s = &adapter.settings;
    let handshake = tls::wrap(tcp, &s.imap_host, s.imap_port, s.ca_file.as_deref());
    match tokio::time::timeout(s.imap_step_limit(), handshake).await {
        Ok(Ok(stream)) => Ok(stream),
        Ok(Err(TlsFailure::Certificate(why))) => Err(End::Fatal(AdapterError::fatal("email_tls", why))),
        Ok(Err(TlsFailure::Other(why))) => Err(End::Retry(why)),
        Err(_) => Err(End::Retry(format!("IMAP TLS: no answer within {:?}", s.imap_step_limit()))),
    }
}

/// One session: connect, settle the cursor, then read and wait until something breaks.
async fn session(adapter: &EmailAdapter, ctx: &AdapterContext) -> End {
    let s = &adapter.settings;
    let mut session = match connect(adapter).await {
        Ok(session) => session,
        Err(end) => return end,
    };
    let mailbox = match timed(s.imap_step_limit(), "selecting INBOX", session.select("INBOX")).await {
        Ok(mailbox) => mailbox,
        Err(end) => return end,
    };
    let can_idle = match timed(s.imap_step_limit(), "reading capabilities", session.capabilities()).await {
        Ok(caps) => caps.has_str("IDLE"),
        Err(end) => return end,
    };
    let Some(uid_validity) = mailbox.uid_validity else {
        return End::Fatal(AdapterError::fatal("imap_uids", "the IMAP server gives no UIDVALIDITY, so mail cannot be tracked"));
    };
    let stored = match position::resume(&adapter.store, ctx.cursors()).await {
        Ok(stored) => stored,
        Err(e) => return End::Retry(format!("could not read the mailbox cursor: {e}")),
    };
    let mut cursor = match stored {
        Some(cursor) if cursor.uid_validity == uid_validity => cursor,
        stored => {
            let end = match mailbox.uid_next {
                Some(next) => next.saturating_sub(1),
                None => match highest_uid(&mut session, s.imap_step_limit()).await {
                    Ok(uid) => uid,
                    Err(end) => return end,
                },
            };
            if stored.is_some() {
                tracing::warn!(uid_validity, "the mailbox's UIDVALIDITY changed; mail already there is not read again, only new mail is");
            } else {
                tracing::info!(uid_validity, "first start on this mailbox: mail already there is left alone, only new mail is read");
            }
            let cursor = Cursor { uid_validity, last_uid: end };
            match position::record(&adapter.store, ctx.cursors(), cursor).await {
                Ok(CursorWrite::Saved) => {}
                Ok(CursorWrite::Fenced) => return End::Fenced,
                Err(e @ RecordError::Shared(_)) => return End::Retry(format!("could not save the mailbox cursor: {e}")),
                Err(e @ RecordError::File(_)) => {
                    return End::Fatal(AdapterError::fatal("email_state", format!("could not save the mailbox cursor: {e}")));
                }
            }
            cursor
        }
    };
    ctx.health.mark_connected();
    ctx.health.set_degraded(None);
    tracing::info!(address = %s.address, idle = can_idle, "connected to the mailbox");
    let mut use_idle = can_idle && s.use_idle;
    loop {
        let backlog = match read_new(adapter, ctx, &mut session, &mut cursor).await {
            Ok(()) => {
                ctx.health.set_degraded(None);
                false
            }
            Err(Stop::End(end)) => return end,
            Err(Stop::InboxRefused(why)) => {
                ctx.health.set_degraded(Some(format!("the inbox refused a mail ({why}); it stays unread and is retried")));
                true
            }
        };
        ctx.health.progress();
        // New mail the server reported while we were fetching or flagging went to the
        // unsolicited channel, and IDLE would not report it again: read again at once.
        if !backlog && new_mail_reported(&mut session) {
            continue;
        }
        if ctx.shutdown.is_cancelled() {
            let _ = tokio::time::timeout(Duration::from_secs(2), session.logout()).await;
            return End::Stopped;
        }
        if use_idle && !backlog {
            match idle(session, ctx, s.idle_renewal, s.dead_after).await {
                Ok((back, stopped)) => {
                    session = back;
                    if stopped {
                        let _ = tokio::time::timeout(Duration::from_secs(2), session.logout()).await;
                        return End::Stopped;
                    }
                }
                Err(IdleFailed::Refused(why, back)) => {
                    tracing::warn!("IMAP IDLE failed ({why}); polling every {:?} instead", s.poll_interval);
                    use_idle = false;
                    session = back;
                }
                Err(IdleFailed::Lost(why)) => return End::Retry(why),
            }
        } else {
            tokio::select! {
                _ = ctx.shutdown.cancelled() => {
                    let _ = tokio::time::timeout(Duration::from_secs(2), session.logout()).await;
                    return End::Stopped;
                }
                _ = tokio::time::sleep(s.poll_interval) => {}
            }
            if let Err(end) = timed(s.imap_step_limit(), "NOOP", session.noop()).await {
                return end;
            }
        }
    }
}

/// Whether the server said, outside IDLE, that mail arrived (the channel is drained, so it does
/// not fill up either).
fn new_mail_reported(session: &mut Session) -> bool {
    let mut reported = false;
    while let Ok(response) = session.unsolicited_responses.try_recv() {
        if matches!(response, async_imap::types::UnsolicitedResponse::Exists(_) | async_imap::types::UnsolicitedResponse::Recent(_)) {
            reported = true;
        }
    }
    reported
}

/// The highest UID in the mailbox (0 when empty), for servers that do not report UIDNEXT.
async fn highest_uid(session: &mut Session, limit: Duration) -> Result<u32, End> {
    let uids = timed(limit, "UID SEARCH", session.uid_search("ALL")).await?;
    Ok(uids.into_iter().max().unwrap_or(0))
}

enum IdleFailed {
    /// The server would not IDLE; the session is still usable.
    Refused(String, Session),
    /// The connection broke.
    Lost(String),
}

/// Wait in IDLE until the server reports something, `renewal` passes, the server says nothing
/// for half of `dead_after`, or shutdown; then end the IDLE, which the server must confirm
/// within the other half. The session comes back, and whether shutdown was asked for.
///
/// A silent server is asked (by ending the IDLE) rather than trusted: a connection whose peer
/// stopped answering — a NAT or firewall that forgot it, a hung server — looks exactly like a
/// quiet mailbox until something is sent. Servers that send keepalives during IDLE (Dovecot's
/// `* OK Still here`) are never interrupted by this; the others get a new IDLE every
/// `dead_after / 2`, which RFC 2177 allows (it asks for one at least every 29 minutes).
async fn idle(session: Session, ctx: &AdapterContext, renewal: Duration, dead_after: Duration) -> Result<(Session, bool), IdleFailed> {
    let half = dead_after / 2;
    let mut handle = session.idle();
    if let Err(e) = tokio::time::timeout(half, handle.init()).await.unwrap_or(Err(async_imap::error::Error::ConnectionLost)) {
        // After a refused IDLE the server is still in the selected state.
        return match tokio::time::timeout(half, handle.done()).await {
            Ok(Ok(session)) => Err(IdleFailed::Refused(e.to_string(), session)),
            _ => Err(IdleFailed::Lost(format!("IDLE failed: {e}"))),
        };
    }
    let (stopped, silent) = {
        // wait_with_timeout's timer restarts at every keepalive: it ends after `half` of silence.
        let (wait, _stop) = handle.wait_with_timeout(half);
        tokio::select! {
            _ = ctx.shutdown.cancelled() => (true, false),
            outcome = tokio::time::timeout(renewal, wait) => match outcome {
                Ok(Err(e)) => return Err(IdleFailed::Lost(format!("IDLE: {e}"))),
                Ok(Ok(async_imap::extensions::idle::IdleResponse::Timeout)) => (false, true),
                // New data, or the renewal is due.
                Ok(Ok(_)) | Err(_) => (false, false),
            },
        }
    };
    match tokio::time::timeout(half, handle.done()).await {
        Ok(Ok(session)) => Ok((session, stopped)),
        Ok(Err(e)) => Err(IdleFailed::Lost(format!("ending IDLE: {e}"))),
        Err(_) if silent => Err(IdleFailed::Lost(format!(
            "the IMAP server stopped answering: nothing for {half:?} in IDLE, then no answer to DONE within {half:?}; the \
             connection is dead"
        ))),
        Err(_) => Err(IdleFailed::Lost(format!("ending IDLE: no answer within {half:?}"))),
    }
}

enum Stop {
    End(End),
    /// The inbox did not take a mail; the cursor stays before it.
    InboxRefused(String),
}

impl From<End> for Stop {
    fn from(end: End) -> Self {
        Stop::End(end)
    }
}

/// Handle every mail past the cursor, in UID order.
async fn read_new(adapter: &EmailAdapter, ctx: &AdapterContext, session: &mut Session, cursor: &mut Cursor) -> Result<(), Stop> {
    let s = &adapter.settings;
    let query = format!("{}:*", cursor.last_uid.saturating_add(1));
    let mut heads: Vec<(u32, u32, Vec<u8>)> = timed(s.imap_step_limit(), "fetching new headers", async {
        let fetches: Vec<_> = session.uid_fetch(&query, "(UID RFC822.SIZE BODY.PEEK[HEADER])").await?.try_collect().await?;
        Ok::<_, async_imap::error::Error>(
            fetches.iter().filter_map(|f| Some((f.uid?, f.size.unwrap_or(0), f.header().unwrap_or_default().to_vec()))).collect(),
        )
    })
    .await?;
    // `n:*` always names at least the last mail, even one below n.
    heads.retain(|(uid, _, _)| *uid > cursor.last_uid);
    heads.sort_by_key(|(uid, _, _)| *uid);
    for (uid, size, header) in heads {
        if ctx.shutdown.is_cancelled() {
            return Ok(());
        }
        let mark_seen = match inbound::judge(&header, s) {
            Verdict::Automated(why) => {
                tracing::debug!(uid, "not answering a machine's mail: {why}");
                true
            }
            Verdict::Untrusted(why) => {
                tracing::warn!(uid, "ignoring a mail whose sender is not authenticated: {why}");
                false
            }
            Verdict::Candidate(sender) => {
                if !ctx.sender_allowed(&inbound::source(&sender)) {
                    tracing::info!(uid, "ignoring a mail from {}, who is not allowed to use the bot", sender.address);
                    false
                } else {
                    deliver(adapter, ctx, session, cursor.uid_validity, uid, size, &sender).await?;
                    true
                }
            }
        };
        if mark_seen {
            timed(s.imap_step_limit(), "marking a mail read", async {
                let _: Vec<_> = session.uid_store(uid.to_string(), "+FLAGS.SILENT (\\Seen)").await?.try_collect().await?;
                Ok::<_, async_imap::error::Error>(())
            })
            .await?;
        }
        let moved = Cursor { last_uid: uid, ..*cursor };
        match position::record(&adapter.store, ctx.cursors(), moved).await {
            Ok(CursorWrite::Saved) => {}
            // Another replica reads the mailbox now and has the mail (its inbox is this one's).
            Ok(CursorWrite::Fenced) => return Err(Stop::End(End::Fenced)),
            // The mail is in the inbox; a replay after a restart is dropped there as a duplicate.
            Err(e) => tracing::warn!("could not save the mailbox cursor: {e}"),
        }
        cursor.last_uid = uid;
        ctx.health.progress();
    }
    Ok(())
}

/// Download an allowed sender's mail and hand it to the inbox.
async fn deliver(
    adapter: &EmailAdapter,
    ctx: &AdapterContext,
    session: &mut Session,
    uid_validity: u32,
    uid: u32,
    size: u32,
    sender: &inbound::Sender,
) -> Result<(), Stop> {
    let s = &adapter.settings;
    let raw = if size > s.max_mail_bytes {
        tracing::warn!(uid, size, "a mail too large to download whole; only its headers are read");
        let fetched = fetch_one(session, uid, "BODY.PEEK[HEADER]", s.imap_step_limit()).await?;
        let mut raw = fetched;
        raw.extend_from_slice(format!("\r\n[this email was {size} bytes, too large to read; ask for a smaller one]\r\n").as_bytes());
        raw
    } else {
        fetch_one(session, uid, "BODY.PEEK[]", s.imap_step_limit()).await?
    };
    let parsed = inbound::event(&raw, sender, s, uid_validity, uid).await;
    match ctx.accept(parsed.event).await {
        Ok(_) => {
            if let Some(message_id) = &parsed.message_id {
                adapter.store.remember(&sender.address, message_id, parsed.subject.as_deref(), parsed.references);
            }
            Ok(())
        }
        Err(AcceptError::ShuttingDown) => Err(Stop::End(End::Stopped)),
        Err(e) => Err(Stop::InboxRefused(e.to_string())),
    }
}

async fn fetch_one(session: &mut Session, uid: u32, item: &str, limit: Duration) -> Result<Vec<u8>, End> {
    let query = format!("(UID {item})");
    timed(limit, "fetching a mail", async {
        let fetches: Vec<_> = session.uid_fetch(uid.to_string(), &query).await?.try_collect().await?;
        let found = fetches.iter().find(|f| f.uid == Some(uid));
        Ok::<_, async_imap::error::Error>(found.and_then(|f| f.body().or_else(|| f.header())).map(<[u8]>::to_vec).unwrap_or_default())
    })
    .await
}
