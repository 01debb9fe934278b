//! A turn's round trips in PostgreSQL: opening and recording a turn are one transaction each,
//! reading its context one consistent snapshot.
//!
//! Two replicas may open turns for the same session key at once (a redelivered event, or two
//! events of one chat): finding or creating the route locks its row for the whole transaction,
//! so the check "is this event's message stored already?" and the insert after it happen for one
//! of them at a time, and the message is stored once.

use super::PostgresStore;
use super::inbox::mark_processing;
use super::messages::{insert_message, read_message_for_event, read_messages, read_messages_after};
use super::routes::current_route;
use super::usage::add_usage;
use crate::store::{CallUsage, HistoryUpdate, KnownHistory, NewMessage, OpenedTurn, StoreError, TurnContext, TurnOpening, Turns};
use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use tokio_postgres::IsolationLevel;

#[async_trait]
impl Turns for PostgresStore {
    async fn turn_open(&self, opening: TurnOpening, known: Option<KnownHistory>) -> Result<OpenedTurn, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        mark_processing(&tx, &opening.event_id).await?;
        // Locks the route row until commit (see the module doc).
        let route = current_route(&tx, &opening.session_key, &opening.source, &opening.default_model).await?;
        let session_id = route.session_id.clone();
        if read_message_for_event(&tx, &session_id, &opening.event_id, &opening.user_message.role).await?.is_none() {
            if !opening.seed.is_empty() && !has_active_messages(&tx, &session_id).await? {
                for m in opening.seed {
                    insert_message(&tx, &NewMessage { session_id: session_id.clone(), ..m }).await?;
                }
            }
            insert_message(&tx, &NewMessage { session_id: session_id.clone(), ..opening.user_message }).await?;
        }
        let stmt = tx.prepare_cached("SELECT system_prompt, last_prompt_tokens FROM sessions WHERE id = $1").await?;
        let row = tx.query_one(&stmt, &[&session_id]).await?;
        let (system_prompt, last_prompt_tokens): (Option<String>, i64) = (row.try_get(0)?, row.try_get(1)?);
        let history = match known.filter(|k| k.session_id == session_id) {
            Some(k) => history_after(&tx, &k).await?,
            None => HistoryUpdate::Stale,
        };
        tx.commit().await?;
        Ok(OpenedTurn { route, history, system_prompt, last_prompt_tokens: last_prompt_tokens.max(0) as u64 })
    }

    async fn turn_context(&self, session_id: &str, history_limit: usize) -> Result<TurnContext, StoreError> {
        let mut client = self.client().await?;
        // One snapshot for both reads: an `/undo` between them would make the count disagree
        // with the history, and a later turn would wrongly trust it.
        let tx = client.build_transaction().isolation_level(IsolationLevel::RepeatableRead).read_only(true).start().await?;
        let history = read_messages(&tx, session_id, Some(history_limit)).await?;
        let known = match history.last() {
            Some(last) => Some(KnownHistory {
                session_id: session_id.to_string(),
                last_id: last.id,
                active_count: active_count_up_to(&tx, session_id, last.id).await?,
            }),
            None => None,
        };
        tx.commit().await?;
        Ok(TurnContext { history, known })
    }

    async fn turn_record(&self, session_id: &str, messages: Vec<NewMessage>, calls: Vec<CallUsage>) -> Result<(), StoreError> {
        if messages.is_empty() && calls.is_empty() {
            return Ok(());
        }
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        for m in &messages {
            insert_message(&tx, m).await?;
        }
        for call in &calls {
            add_usage(&tx, session_id, call).await?;
        }
        if let Some(last) = calls.last() {
            let stmt = tx.prepare_cached("UPDATE sessions SET last_prompt_tokens = $2 WHERE id = $1").await?;
            tx.execute(&stmt, &[&session_id, &(last.usage.prompt_tokens as i64)]).await?;
        }
        tx.commit().await?;
        Ok(())
    }
}

async fn has_active_messages(c: &impl GenericClient, session_id: &str) -> Result<bool, StoreError> {
    let stmt = c.prepare_cached("SELECT 1 FROM messages WHERE session_id = $1 AND active LIMIT 1").await?;
    Ok(c.query_opt(&stmt, &[&session_id]).await?.is_some())
}

/// The active messages after `known`, when every message `known` covers is still there and
/// active (an `/undo` or `/retry` deactivates some, which makes the count differ).
async fn history_after(c: &impl GenericClient, known: &KnownHistory) -> Result<HistoryUpdate, StoreError> {
    if active_count_up_to(c, &known.session_id, known.last_id).await? != known.active_count {
        return Ok(HistoryUpdate::Stale);
    }
    let messages = read_messages_after(c, &known.session_id, known.last_id).await?;
    Ok(HistoryUpdate::After { active_count: known.active_count + messages.len() as i64, messages })
}

async fn active_count_up_to(c: &impl GenericClient, session_id: &str, last_id: i64) -> Result<i64, StoreError> {
    let stmt = c.prepare_cached("SELECT count(*) FROM messages WHERE session_id = $1 AND active AND id <= $2").await?;
    Ok(c.query_one(&stmt, &[&session_id, &last_id]).await?.try_get(0)?)
}

#[cfg(test)]
mod tests {
    use super::super::tests::scratch_url;
    use super::super::{PostgresOptions, PostgresStore};
    use crate::store::suite::{message, source};
    use crate::store::{NewMessage, Routes, SessionLog, TurnOpening, Turns};

    fn opening(event_id: &str) -> TurnOpening {
        TurnOpening {
            event_id: event_id.into(),
            session_key: "k".into(),
            source: source("u1"),
            default_model: "m".into(),
            user_message: NewMessage { event_id: Some(event_id.into()), ..message("", "user", "hello") },
            seed: vec![message("", "user", "earlier")],
        }
    }

    #[tokio::test]
    async fn replicas_opening_one_new_conversation_at_once_share_a_session_and_store_the_message_once() {
        let url = scratch_url().await;
        let options = PostgresOptions { url, pool_size: 2 };
        let (a, b) = (PostgresStore::connect(&options).await.unwrap(), PostgresStore::connect(&options).await.unwrap());
        for round in 0..5 {
            let event = format!("ev-{round}");
            let (x, y) = tokio::join!(a.turn_open(opening(&event), None), b.turn_open(opening(&event), None));
            let (x, y) = (x.unwrap(), y.unwrap());
            assert_eq!(x.route.session_id, y.route.session_id, "one session for the key");
            if round == 0 {
                assert!(x.route.created != y.route.created, "exactly one replica started it");
            }
            let stored = a.messages(&x.route.session_id, None).await.unwrap();
            let of_event = stored.iter().filter(|m| m.event_id.as_deref() == Some(event.as_str())).count();
            assert_eq!(of_event, 1, "the event's message is stored once");
        }
        let route = a.route_get("k").await.unwrap().unwrap();
        let session = a.session_get(&route.session_id).await.unwrap().unwrap();
        assert_eq!(session.message_count, 6, "the seed once, and one message per event");
    }
}
