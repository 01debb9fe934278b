//! `hermes outbox list | resend <id> | drop <id>`: the undelivered messages (dead letters) of the
//! selected HERMES_HOME from the shell, beside a running gateway or without one, in the words of
//! `/undelivered`, `/resend` and `/drop`. `list` adds each platform's queue (messages waiting,
//! the oldest one's age, undelivered ones). `resend` puts a message back on its way with a fresh
//! `delivery.retry_window`; no courier runs here, so the running gateway's sweep picks it up (or
//! the next start does). Exit 0 on success, 1 on a bad or unknown id or an unreadable store, 78
//! on a bad configuration.

use super::{Cli, config_failure, report, resolve};
use crate::gateway::commands::undelivered::{self, Requeued};
use crate::store::{Store, StoreError, StoreLocation};
use clap::Subcommand;
use std::process::ExitCode;
use std::time::Duration;

/// Why a `hermes outbox` subcommand failed (printed after "hermes: ", exit 1).
#[derive(Debug, thiserror::Error)]
enum OutboxCliError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("`{text}` is not a message id: use a number from `hermes outbox list`")]
    NotAnId { text: String },
    #[error("no undelivered message #{id} (see `hermes outbox list`)")]
    NotFound { id: i64 },
}

#[derive(Debug, Subcommand)]
pub enum OutboxCommand {
    /// The undelivered messages, newest first, with their ids; and per platform, the messages
    /// waiting (and how long the oldest has waited) and the undelivered ones.
    List,
    /// Put an undelivered message back on its way, with a fresh retry window. The running
    /// gateway sends it within seconds; a stopped one at its next start.
    Resend {
        /// Its id, as `hermes outbox list` shows it (`12` or `#12`).
        id: String,
    },
    /// Give an undelivered message up for good: it is no longer listed or sent.
    Drop {
        /// Its id, as `hermes outbox list` shows it (`12` or `#12`).
        id: String,
    },
}

pub(super) fn run(cli: &Cli, command: &OutboxCommand) -> ExitCode {
    let resolved = match resolve(cli) {
        Ok(r) => r,
        Err(e) => return config_failure(&e),
    };
    let runtime = match super::command_runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let window = resolved.loaded.config.delivery.retry_window();
    let location = crate::gateway::store_location(&resolved.loaded.config, &resolved.home);
    report(runtime.block_on(dispatch(&location, window, command)))
}

/// What `command` answers; `window` is how long a resent message is tried.
async fn dispatch(location: &StoreLocation, window: Duration, command: &OutboxCommand) -> Result<String, OutboxCliError> {
    match command {
        OutboxCommand::List => {
            let Some(store) = open(location).await? else {
                return Ok("Nothing is undelivered, and nothing waits (no message was ever sent from this HERMES_HOME).".into());
            };
            list(&store).await
        }
        OutboxCommand::Resend { id } => {
            let id = parse_id(id)?;
            let store = open(location).await?.ok_or_else(|| not_found(id))?;
            let deadline = undelivered::deadline_after(window);
            match undelivered::requeue(store.as_ref(), id, deadline).await? {
                Some(Requeued { destination, .. }) => Ok(format!(
                    "Resending #{id} to {destination}: the running gateway picks it up within seconds (a stopped one at its next start)."
                )),
                None => Err(not_found(id)),
            }
        }
        OutboxCommand::Drop { id } => {
            let id = parse_id(id)?;
            let store = open(location).await?.ok_or_else(|| not_found(id))?;
            match undelivered::drop_letter(store.as_ref(), id).await? {
                Some(destination) => Ok(format!("Dropped #{id} to {destination}: it will not be sent.")),
                None => Err(not_found(id)),
            }
        }
    }
}

/// The dead letters (as `/undelivered` lists them) and each platform's queue.
async fn list(store: &Store) -> Result<String, OutboxCliError> {
    let letters = store.outbox_dead_letters(undelivered::SHOWN).await?;
    let summary = store.outbox_summary().await?;
    let now = undelivered::now_ms();
    let mut lines = Vec::new();
    if letters.is_empty() {
        lines.push("Nothing is undelivered.".to_string());
    } else {
        lines.push("Undelivered messages (newest first):".into());
        lines.extend(undelivered::entries(&letters, now));
        if let Some(more) = undelivered::more_line(letters.len(), undelivered::total_dead(&summary)) {
            lines.push(more);
        }
        lines.push("Resend one with `hermes outbox resend <id>`, or give it up with `hermes outbox drop <id>`.".into());
    }
    let queues: Vec<String> = summary.iter().filter_map(|s| undelivered::queue_line(s, now)).map(|q| format!("  {q}")).collect();
    if queues.is_empty() {
        lines.push("Queues: nothing waits to be delivered.".into());
    } else {
        lines.push("Queues:".into());
        lines.extend(queues);
    }
    Ok(lines.join("\n"))
}

/// The store, if there is one: listing or acting on dead letters never creates a SQLite file
/// (a PostgreSQL store is the shared database, opened as the gateway opens it).
async fn open(location: &StoreLocation) -> Result<Option<Store>, StoreError> {
    if let StoreLocation::Sqlite { path, .. } = location
        && !path.exists()
    {
        return Ok(None);
    }
    location.open().await.map(Some)
}

fn parse_id(text: &str) -> Result<i64, OutboxCliError> {
    undelivered::parse_id(text).ok_or_else(|| OutboxCliError::NotAnId { text: text.to_string() })
}

fn not_found(id: i64) -> OutboxCliError {
    OutboxCliError::NotFound { id }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Home;
    use crate::gateway::tests::support::{dead_letter, queued};
    use crate::store::SqliteStore;
    use clap::Parser;
    use std::sync::Arc;

    /// The default store of `home`: SQLite in it.
    fn here(home: &Home) -> StoreLocation {
        StoreLocation::Sqlite { path: crate::store::state_db(home), limits: Default::default() }
    }

    const DAY: Duration = Duration::from_secs(24 * 3600);

    async fn home_with_store() -> (tempfile::TempDir, Home, Store) {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        let store: Store = Arc::new(SqliteStore::open(&crate::store::state_db(&home)).await.unwrap());
        (dir, home, store)
    }

    fn resend(id: &str) -> OutboxCommand {
        OutboxCommand::Resend { id: id.into() }
    }

    fn drop_it(id: &str) -> OutboxCommand {
        OutboxCommand::Drop { id: id.into() }
    }

    #[test]
    fn the_subcommands_parse() {
        let cli = Cli::try_parse_from(["hermes", "outbox", "resend", "12"]).unwrap();
        assert!(matches!(cli.command, crate::cli::Command::Outbox { command: OutboxCommand::Resend { ref id } } if id == "12"));
        let cli = Cli::try_parse_from(["hermes", "--profile", "work", "outbox", "list"]).unwrap();
        assert!(matches!(cli.command, crate::cli::Command::Outbox { command: OutboxCommand::List }));
        assert!(Cli::try_parse_from(["hermes", "outbox", "drop"]).is_err(), "drop needs an id");
    }

    #[tokio::test]
    async fn list_shows_dead_letters_and_each_platforms_queue() {
        let (_dir, home, store) = home_with_store().await;
        let empty = dispatch(&here(&home), DAY, &OutboxCommand::List).await.unwrap();
        assert_eq!(empty, "Nothing is undelivered.\nQueues: nothing waits to be delivered.");
        let id = dead_letter(&store, "k1", "c7", "the lost answer").await;
        queued(&store, "k2", "c8", "on its way").await;
        let listing = dispatch(&here(&home), DAY, &OutboxCommand::List).await.unwrap();
        assert!(listing.starts_with("Undelivered messages (newest first):\n"), "{listing}");
        assert!(listing.contains(&format!("• #{id} chat:c7 — queued ")) && listing.contains(": chat not found"), "{listing}");
        assert!(listing.contains("  “the lost answer”"), "{listing}");
        assert!(listing.contains("`hermes outbox resend <id>`") && listing.contains("`hermes outbox drop <id>`"), "{listing}");
        let queues = listing.split_once("Queues:\n  ").map(|(_, q)| q).unwrap_or_default();
        assert!(queues.starts_with("chat 1 waiting (oldest ") && queues.ends_with(" s), 1 undelivered"), "{listing}");
    }

    #[tokio::test]
    async fn resend_and_drop_act_on_dead_letters_and_refuse_bad_or_unknown_ids() {
        let (_dir, home, store) = home_with_store().await;
        let first = dead_letter(&store, "k1", "c7", "one").await;
        let second = dead_letter(&store, "k2", "c7", "two").await;
        let resent = dispatch(&here(&home), DAY, &resend(&format!("#{first}"))).await.unwrap();
        assert!(resent.starts_with(&format!("Resending #{first} to chat:c7: ")), "{resent}");
        let summary = store.outbox_summary().await.unwrap();
        assert_eq!((summary[0].pending, summary[0].dead), (1, 1), "{summary:?}");
        assert_eq!(
            dispatch(&here(&home), DAY, &drop_it(&second.to_string())).await.unwrap(),
            format!("Dropped #{second} to chat:c7: it will not be sent.")
        );
        assert!(store.outbox_dead_letters(10).await.unwrap().is_empty());
        for gone in [first, second, 999] {
            let err = dispatch(&here(&home), DAY, &resend(&gone.to_string())).await.unwrap_err().to_string();
            assert_eq!(err, format!("no undelivered message #{gone} (see `hermes outbox list`)"));
            assert!(dispatch(&here(&home), DAY, &drop_it(&gone.to_string())).await.is_err());
        }
        let err = dispatch(&here(&home), DAY, &resend("twelve")).await.unwrap_err().to_string();
        assert_eq!(err, "`twelve` is not a message id: use a number from `hermes outbox list`");
        assert!(dispatch(&here(&home), DAY, &drop_it("-1")).await.is_err());
    }

    #[tokio::test]
    async fn a_home_without_a_store_is_left_without_one() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        let listing = dispatch(&here(&home), DAY, &OutboxCommand::List).await.unwrap();
        assert!(listing.starts_with("Nothing is undelivered"), "{listing}");
        assert!(dispatch(&here(&home), DAY, &resend("3")).await.unwrap_err().to_string().contains("no undelivered message #3"));
        assert!(!crate::store::state_db(&home).exists(), "no store was created");
    }
}
