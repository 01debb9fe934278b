//! Wake-ups in PostgreSQL: `LISTEN` on the inbox's or the outbox's channel, over a connection of
//! its own (not from the pool: a pooled connection is handed to others between calls, and a
//! listener must keep its session). Accepting an event notifies the inbox's channel in the same
//! statement (`inbox.rs`), queueing a part the outbox's in the same transaction (`outbox.rs`), so
//! a wake-up arrives only once its row is committed and visible.
//!
//! The channels are named after the schema (a database may hold several hermes schemas, tests
//! do), computed by the server from `current_schema()` on both sides, so the two always agree.
//! A lost connection is made again after a pause; each (re)connection rings "maybe missed",
//! since rows added while nobody listened were announced to no one.

use super::{PostgresStore, tls};
use crate::store::backend::Ringer;
use crate::store::{Bell, StoreError, Wakeups};
use async_trait::async_trait;
use futures::StreamExt;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_postgres::AsyncMessage;

/// The SQL expression naming the inbox's channel: `hermes_inbox_` and a digest of the schema,
/// shorter than PostgreSQL's 63-byte limit on identifiers whatever the schema is called.
pub(super) const INBOX_CHANNEL: &str = "'hermes_inbox_' || left(md5(current_schema()), 16)";

/// The outbox's channel, named the same way.
pub(super) const OUTBOX_CHANNEL: &str = "'hermes_outbox_' || left(md5(current_schema()), 16)";

/// Pause before making a lost listening connection again.
const RECONNECT_AFTER: Duration = Duration::from_secs(1);

/// How often an idle listener checks that its bell is still wanted.
const CHECK_BELL_EVERY: Duration = Duration::from_secs(5);

#[async_trait]
impl Wakeups for PostgresStore {
    async fn inbox_listen(&self) -> Result<Bell, StoreError> {
        self.listen_on(INBOX_CHANNEL, "inbox").await
    }

    async fn outbox_listen(&self) -> Result<Bell, StoreError> {
        self.listen_on(OUTBOX_CHANNEL, "outbox").await
    }
}

impl PostgresStore {
    /// A bell rung by every notification on `channel` (an SQL expression), `what` naming it in
    /// the logs.
    async fn listen_on(&self, channel: &'static str, what: &'static str) -> Result<Bell, StoreError> {
        let (bell, ringer) = Bell::pair();
        // The first connection is made here, so a caller hears at once when it cannot listen.
        let listening = listen(&self.inner.config, channel).await?;
        let config = self.inner.config.clone();
        tokio::spawn(async move {
            let mut listening = Some(listening);
            while !ringer.is_gone() {
                let ended = match listening.take() {
                    Some(listening) => listening.relay(&ringer).await,
                    None => match listen(&config, channel).await {
                        Ok(listening) => listening.relay(&ringer).await,
                        Err(e) => Err(e),
                    },
                };
                if let Err(e) = ended {
                    tracing::warn!(error = %e, "the {what}'s listening connection to PostgreSQL was lost; listening again shortly");
                }
                tokio::time::sleep(RECONNECT_AFTER).await;
            }
        });
        Ok(bell)
    }
}

/// One listening connection, `LISTEN` already in effect (generic only because the TLS stream's
/// type is not nameable).
struct Listening<S, T> {
    /// Kept alive with the connection: dropping the client would close it.
    _client: tokio_postgres::Client,
    connection: tokio_postgres::Connection<S, T>,
}

/// Connect and `LISTEN` on `channel` (an SQL expression naming it).
async fn listen(
    config: &tokio_postgres::Config,
    channel: &str,
) -> Result<Listening<tokio_postgres::Socket, impl AsyncRead + AsyncWrite + Unpin + Send + 'static>, StoreError> {
    let (client, mut connection) = config.connect(tls()?).await?;
    {
        // The connection must be driven while the client's requests wait for their answers.
        let setup = async {
            let channel: String = client.query_one(format!("SELECT {channel}").as_str(), &[]).await?.try_get(0)?;
            client.batch_execute(&format!("LISTEN \"{channel}\"")).await
        };
        tokio::pin!(setup);
        let mut messages = futures::stream::poll_fn(|cx| connection.poll_message(cx));
        loop {
            tokio::select! {
                done = &mut setup => { done?; break; }
                message = messages.next() => match message {
                    // No notification can arrive before LISTEN is in effect; other messages
                    // (notices) need nothing.
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return Err(e.into()),
                    None => return Err(StoreError::Closed),
                },
            }
        }
    }
    Ok(Listening { _client: client, connection })
}

impl<S, T> Listening<S, T>
where
    S: AsyncRead + AsyncWrite + Unpin,
    T: AsyncRead + AsyncWrite + Unpin,
{
    /// Ring for every notification until the connection ends (an error) or the bell is dropped
    /// (`Ok`).
    async fn relay(mut self, ringer: &Ringer) -> Result<(), StoreError> {
        // Rows accepted before LISTEN took effect were announced to nobody.
        if !ringer.missed() {
            return Ok(());
        }
        let mut messages = futures::stream::poll_fn(|cx| self.connection.poll_message(cx));
        loop {
            tokio::select! {
                message = messages.next() => match message {
                    Some(Ok(AsyncMessage::Notification(n))) => {
                        if !ringer.ring(n.payload()) {
                            return Ok(());
                        }
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return Err(e.into()),
                    None => return Err(StoreError::Closed),
                },
                () = tokio::time::sleep(CHECK_BELL_EVERY) => {
                    if ringer.is_gone() {
                        return Ok(());
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::scratch_url;
    use super::*;
    use crate::store::{Heard, Inbox, PostgresOptions};

    async fn open(url: &str) -> PostgresStore {
        PostgresStore::connect(&PostgresOptions { url: url.to_string(), pool_size: 2 }).await.expect("the store connects")
    }

    async fn next(bell: &Bell) -> Heard {
        tokio::time::timeout(Duration::from_secs(60), bell.heard()).await.expect("the bell rang")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_accept_by_another_replica_rings_once_and_only_on_its_own_schema() {
        let url = scratch_url().await;
        let (listener, other) = (open(&url).await, open(&url).await);
        let elsewhere = open(&scratch_url().await).await;
        let bell = listener.inbox_listen().await.unwrap();
        assert_eq!(next(&bell).await, Heard { ids: vec![], maybe_missed: true }, "listening began: read the inbox once");

        assert!(other.inbox_accept("e1", "webhook", "{}").await.unwrap());
        assert!(!other.inbox_accept("e1", "webhook", "{}").await.unwrap(), "a redelivery");
        assert!(elsewhere.inbox_accept("x1", "webhook", "{}").await.unwrap(), "another hermes in another schema");
        assert!(other.inbox_accept_all(vec![("e2".into(), "webhook".into(), "{}".into())]).await.unwrap()[0]);
        let mut heard = Vec::new();
        while heard.len() < 2 {
            heard.extend(next(&bell).await.ids);
        }
        assert_eq!(heard, vec!["webhook\te1".to_string(), "webhook\te2".to_string()], "each new row once; no redelivery, no other schema");
        let rung = Heard { ids: heard, maybe_missed: false };
        assert_eq!(rung.accepted().collect::<Vec<_>>(), [Some(("webhook", "e1")), Some(("webhook", "e2"))], "each names its platform");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_part_queued_by_another_replica_rings_the_couriers_with_its_lane_once() {
        use crate::store::Outbox;
        use crate::store::suite::part;
        let url = scratch_url().await;
        let (listener, other) = (open(&url).await, open(&url).await);
        let elsewhere = open(&scratch_url().await).await;
        let bell = listener.outbox_listen().await.unwrap();
        assert_eq!(next(&bell).await, Heard { ids: vec![], maybe_missed: true }, "listening began: sweep once");

        other.outbox_enqueue(vec![part("k1", "telegram:42")]).await.unwrap();
        other.outbox_enqueue(vec![part("k1", "telegram:42")]).await.unwrap();
        elsewhere.outbox_enqueue(vec![part("x1", "telegram:7")]).await.unwrap();
        other.outbox_enqueue(vec![part("k2", "discord:9"), part("k3", "discord:9")]).await.unwrap();
        let mut heard = Vec::new();
        while heard.len() < 2 {
            heard.extend(next(&bell).await.ids);
        }
        // Two parts of one lane in one transaction ring once (PostgreSQL folds identical
        // notifications of a transaction): one wake-up starts the lane's worker for both.
        assert_eq!(heard, ["telegram:42", "discord:9"], "each new lane once; no repeat of a key, no other schema");
        let inbox_bell = listener.inbox_listen().await.unwrap();
        assert_eq!(next(&inbox_bell).await, Heard { ids: vec![], maybe_missed: true });
        other.outbox_enqueue(vec![part("k4", "telegram:42")]).await.unwrap();
        assert_eq!(next(&bell).await.ids, ["telegram:42"]);
        assert!(
            tokio::time::timeout(Duration::from_millis(300), inbox_bell.heard()).await.is_err(),
            "the inbox's listeners hear nothing of the outbox"
        );
    }
}
