//! The single writer: a thread that owns the write connection and commits queued writes in
//! batches. Each write runs in its own SAVEPOINT, so a failing write is rolled back alone; every
//! caller is answered only after the batch's COMMIT (or told the commit failed).

use super::StoreError;
use rusqlite::Connection;
use std::sync::mpsc;
use tokio::sync::oneshot;

/// Writes taken into one transaction at most; bounds how long a batch holds the write lock.
const MAX_BATCH: usize = 128;

/// A queued write: runs against the connection and returns whether it succeeded and how to
/// answer its caller once the batch's fate is known (`None` = committed, `Some(e)` = the commit
/// failed).
type Job = Box<dyn FnOnce(&Connection) -> (bool, Reply) + Send>;
type Reply = Box<dyn FnOnce(Option<&StoreError>) + Send>;

pub(super) struct Writer {
    jobs: mpsc::Sender<Job>,
}

impl Writer {
    pub(super) fn spawn(conn: Connection) -> Result<Writer, StoreError> {
        let (jobs, queue) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("hermes-store-writer".into())
            .spawn(move || run(conn, queue))
            .map_err(|e| StoreError::NotCommitted(format!("cannot start the store writer thread: {e}")))?;
        Ok(Writer { jobs })
    }

    pub(super) async fn run<T, F>(&self, op: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move |conn: &Connection| {
            let result = op(conn);
            let ok = result.is_ok();
            let reply: Reply = Box::new(move |commit_error: Option<&StoreError>| {
                let answer = match (result, commit_error) {
                    (Ok(_), Some(e)) => Err(StoreError::NotCommitted(e.to_string())),
                    (r, _) => r,
                };
                // The caller stopped waiting (its task was cancelled); the write's outcome is
                // already in the database either way.
                let _ = tx.send(answer);
            });
            (ok, reply)
        });
        self.jobs.send(job).map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }
}

fn run(conn: Connection, queue: mpsc::Receiver<Job>) {
    // Ends when every Store handle (and with it the sender) is dropped.
    while let Ok(first) = queue.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        commit_batch(&conn, batch);
    }
}

fn commit_batch(conn: &Connection, batch: Vec<Job>) {
    if let Err(e) = control(conn, "BEGIN IMMEDIATE") {
        let err = StoreError::Sql(e);
        for job in batch {
            // Without a transaction each write runs (and commits) on its own.
            let (_, reply) = job(conn);
            reply(None);
        }
        tracing::warn!(error = %err, "could not open a write batch; wrote one by one");
        return;
    }
    let mut replies = Vec::with_capacity(batch.len());
    for job in batch {
        if control(conn, "SAVEPOINT op").is_err() {
            replies.push(job(conn).1);
            continue;
        }
        // A failed write may have applied part of its statements: roll back just its savepoint.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(conn)));
        match outcome {
            Ok((true, reply)) => {
                replies.push(reply);
                if let Err(e) = control(conn, "RELEASE op") {
                    // The write stays in the transaction and commits with it; only the savepoint
                    // bookkeeping failed, but a store that cannot release one is worth knowing about.
                    tracing::warn!(error = %e, "store: could not release a write's savepoint");
                }
            }
            Ok((false, reply)) => {
                replies.push(reply);
                roll_back_savepoint(conn);
            }
            Err(_) => {
                roll_back_savepoint(conn);
                tracing::error!("a store write panicked; it was rolled back");
            }
        }
    }
    let commit = control(conn, "COMMIT").map_err(StoreError::Sql);
    if let Err(e) = &commit {
        // Every caller of the batch gets `NotCommitted` below; this says why the rollback that
        // should follow did not happen either.
        if let Err(rollback) = control(conn, "ROLLBACK") {
            tracing::error!(commit_error = %e, error = %rollback, "store: a failed batch (inbox/outbox/session writes) could not be rolled back");
        }
    }
    let commit_error = commit.err();
    for reply in replies {
        reply(commit_error.as_ref());
    }
}

/// A transaction-control statement, from the statement cache (they run several times per batch).
fn control(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(drop)
}

fn roll_back_savepoint(conn: &Connection) {
    // A failed rollback would let part of a failed write (an inbox or outbox row) commit with
    // the rest of the batch: log it, naming what may have been kept.
    if let Err(e) = control(conn, "ROLLBACK TO op") {
        tracing::error!(error = %e, "store: could not roll back a failed write; part of it may be committed with its batch");
    }
    if let Err(e) = control(conn, "RELEASE op") {
        tracing::warn!(error = %e, "store: could not release a failed write's savepoint");
    }
}
