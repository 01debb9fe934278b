//! Messages in PostgreSQL, and search over them: whole words through the stored `words`
//! tsvector (`simple` configuration, ranked by `ts_rank`) first, and a case-insensitive
//! substring scan of the scope for what word search cannot find (CJK text, text inside words).

use super::PostgresStore;
use crate::store::clock::{now_ms, to_time};
use crate::store::{LoggedMessage, MessageRow, NewMessage, RouteEntry, SearchHit, SearchScope, SessionLog, StoreError, Undone};
use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

#[async_trait]
impl SessionLog for PostgresStore {
    async fn message_append(&self, message: NewMessage) -> Result<i64, StoreError> {
        let client = self.client().await?;
        insert_message(&client, &message).await
    }

    async fn messages(&self, session_id: &str, limit: Option<usize>) -> Result<Vec<MessageRow>, StoreError> {
        let client = self.client().await?;
        read_messages(&client, session_id, limit).await
    }

    async fn messages_after(&self, after_id: i64, limit: usize) -> Result<Vec<LoggedMessage>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "SELECT m.id, m.session_id, m.role, m.content, m.tool_call_id, m.tool_calls, m.tool_name, m.event_id, m.finish_reason,
                        m.timestamp, m.images, s.session_key
                 FROM messages m JOIN sessions s ON s.id = m.session_id
                 WHERE m.id > $1 AND m.active AND m.role IN ('user', 'assistant') AND m.content <> ''
                 ORDER BY m.id LIMIT $2",
            )
            .await?;
        let rows = client.query(&stmt, &[&after_id, &limit]).await?;
        rows.iter().map(|r| Ok(LoggedMessage { session_key: r.try_get(11)?, message: message_from_row(r)? })).collect()
    }

    async fn latest_message_id(&self) -> Result<i64, StoreError> {
        let client = self.client().await?;
        let stmt = client.prepare_cached("SELECT COALESCE(MAX(id), 0) FROM messages").await?;
        Ok(client.query_one(&stmt, &[]).await?.try_get(0)?)
    }

    async fn message_for_event(&self, session_id: &str, event_id: &str, role: &str) -> Result<Option<MessageRow>, StoreError> {
        let client = self.client().await?;
        read_message_for_event(&client, session_id, event_id, role).await
    }

    async fn search_messages(&self, query: &str, scope: SearchScope, limit: usize) -> Result<Vec<SearchHit>, StoreError> {
        let query = query.trim();
        if query.is_empty() {
            return Ok(Vec::new());
        }
        let client = self.client().await?;
        let hits = search(&client, WORD_SEARCH, query, &scope, limit).await?;
        // Word search finds nothing inside CJK runs or within words; a substring does (three
        // characters at least, as SQLite's trigram index needs).
        if hits.is_empty() && query.chars().count() >= 3 {
            let hits = search(&client, SUBSTRING_SEARCH, query, &scope, limit).await?;
            return Ok(hits.into_iter().map(|hit| SearchHit { snippet: mark_substring(&hit.snippet, query), ..hit }).collect());
        }
        Ok(hits)
    }

    async fn session_prompt_freeze(&self, session_id: &str, prompt: &str) -> Result<String, StoreError> {
        self.freeze_prompt(session_id, prompt).await
    }

    async fn session_prompt(&self, session_id: &str) -> Result<Option<String>, StoreError> {
        self.read_prompt(session_id).await
    }

    async fn session_prompt_tokens(&self, session_id: &str) -> Result<(u64, u64), StoreError> {
        self.read_prompt_tokens(session_id).await
    }

    async fn session_set_title(&self, session_id: &str, title: &str) -> Result<bool, StoreError> {
        self.set_title(session_id, title).await
    }

    async fn messages_undo(&self, session_id: &str, turns: usize) -> Result<Option<Undone>, StoreError> {
        self.undo_turns(session_id, turns).await
    }

    async fn session_compress_into(
        &self,
        session_key: &str,
        expected_session: &str,
        model: &str,
        system_prompt: &str,
        carried: Vec<NewMessage>,
    ) -> Result<Option<RouteEntry>, StoreError> {
        self.compress_into(session_key, expected_session, model, system_prompt, carried).await
    }
}

/// Insert `message` and count it in its session, in one statement (so atomic without a
/// transaction); returns its id. Fails when the session does not exist (the foreign key).
pub(super) async fn insert_message(c: &impl GenericClient, message: &NewMessage) -> Result<i64, StoreError> {
    let stmt = c
        .prepare_cached(
            "WITH inserted AS (
                 INSERT INTO messages (session_id, role, content, tool_call_id, tool_calls, tool_name, event_id, finish_reason, timestamp, images)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id
             ), counted AS (
                 UPDATE sessions SET message_count = message_count + 1 WHERE id = $1
             )
             SELECT id FROM inserted",
        )
        .await?;
    let m = message;
    let params: [&(dyn ToSql + Sync); 10] = [
        &m.session_id,
        &m.role,
        &m.content,
        &m.tool_call_id,
        &m.tool_calls,
        &m.tool_name,
        &m.event_id,
        &m.finish_reason,
        &now_ms(),
        &m.images,
    ];
    Ok(c.query_one(&stmt, &params).await?.try_get(0)?)
}

/// `SELECT` of the columns [`message_from_row`] reads, as a literal for `concat!` (statements are
/// cached by their text, so they are built at compile time).
macro_rules! select_messages {
    () => {
        "SELECT id, session_id, role, content, tool_call_id, tool_calls, tool_name, event_id, finish_reason, timestamp, images FROM messages"
    };
}

/// The session's active messages in order; with `limit`, the most recent `limit` of them.
pub(super) async fn read_messages(c: &impl GenericClient, session_id: &str, limit: Option<usize>) -> Result<Vec<MessageRow>, StoreError> {
    // `LIMIT NULL` is no limit.
    let limit = limit.map(|l| i64::try_from(l).unwrap_or(i64::MAX));
    let stmt = c
        .prepare_cached(concat!(
            "SELECT * FROM (",
            select_messages!(),
            " WHERE session_id = $1 AND active ORDER BY id DESC LIMIT $2) latest ORDER BY id"
        ))
        .await?;
    c.query(&stmt, &[&session_id, &limit]).await?.iter().map(message_from_row).collect()
}

/// The session's active messages after message `after_id`, in order.
pub(super) async fn read_messages_after(c: &impl GenericClient, session_id: &str, after_id: i64) -> Result<Vec<MessageRow>, StoreError> {
    let stmt = c.prepare_cached(concat!(select_messages!(), " WHERE session_id = $1 AND active AND id > $2 ORDER BY id")).await?;
    c.query(&stmt, &[&session_id, &after_id]).await?.iter().map(message_from_row).collect()
}

/// The active message with `role` stored for an inbound event, if any.
pub(super) async fn read_message_for_event(
    c: &impl GenericClient,
    session_id: &str,
    event_id: &str,
    role: &str,
) -> Result<Option<MessageRow>, StoreError> {
    let stmt = c
        .prepare_cached(concat!(
            select_messages!(),
            " WHERE session_id = $1 AND event_id = $2 AND role = $3 AND active ORDER BY id LIMIT 1"
        ))
        .await?;
    c.query_opt(&stmt, &[&session_id, &event_id, &role]).await?.as_ref().map(message_from_row).transpose()
}

fn message_from_row(r: &Row) -> Result<MessageRow, StoreError> {
    Ok(MessageRow {
        id: r.try_get(0)?,
        session_id: r.try_get(1)?,
        role: r.try_get(2)?,
        content: r.try_get(3)?,
        tool_call_id: r.try_get(4)?,
        tool_calls: r.try_get(5)?,
        tool_name: r.try_get(6)?,
        event_id: r.try_get(7)?,
        finish_reason: r.try_get(8)?,
        timestamp: to_time(r.try_get(9)?),
        images: r.try_get(10)?,
    })
}

/// Whole words: `plainto_tsquery` reads the query as text, never as syntax; the snippet marks
/// the matched words `[...]` as SQLite's does. `{scope}` is replaced by the scope's condition.
const WORD_SEARCH: &str = "SELECT m.id, m.session_id, m.role,
        ts_headline('simple', m.content, q, 'StartSel=[, StopSel=], MaxWords=16, MinWords=8, ShortWord=0, MaxFragments=1, FragmentDelimiter=…'),
        m.timestamp
     FROM messages m, plainto_tsquery('simple', $1) q
     WHERE m.words @@ q AND {scope} AND m.active AND m.role IN ('user', 'assistant')
     ORDER BY ts_rank(m.words, q) DESC, m.id LIMIT $2";

/// A case-insensitive substring, newest first; the whole content comes back, to be cut into a
/// snippet by [`mark_substring`].
const SUBSTRING_SEARCH: &str = "SELECT m.id, m.session_id, m.role, m.content, m.timestamp
     FROM messages m
     WHERE strpos(lower(m.content), lower($1::text)) > 0 AND {scope} AND m.active AND m.role IN ('user', 'assistant')
     ORDER BY m.id DESC LIMIT $2";

/// Run one of the searches within `scope` (its condition is shared with SQLite, so both scope
/// alike).
async fn search(
    c: &impl GenericClient,
    template: &str,
    query: &str,
    scope: &SearchScope,
    limit: usize,
) -> Result<Vec<SearchHit>, StoreError> {
    let (scope_sql, scope_args) = scope.condition('$');
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let stmt = c.prepare_cached(&template.replace("{scope}", &scope_sql)).await?;
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&query, &limit];
    params.extend(scope_args.iter().map(|a| a as &(dyn ToSql + Sync)));
    let rows = c.query(&stmt, &params).await?;
    rows.iter()
        .map(|r| {
            Ok(SearchHit {
                message_id: r.try_get(0)?,
                session_id: r.try_get(1)?,
                role: r.try_get(2)?,
                snippet: r.try_get(3)?,
                timestamp: to_time(r.try_get(4)?),
            })
        })
        .collect()
}

/// Characters of context kept on each side of a substring match.
const SNIPPET_CONTEXT: usize = 32;

/// The passage of `content` around the first case-insensitive occurrence of `query`, the match
/// marked `[...]` and a cut marked `…` (what SQLite's trigram snippet gives).
fn mark_substring(content: &str, query: &str) -> String {
    let chars: Vec<char> = content.chars().collect();
    let needle: Vec<char> = query.chars().flat_map(char::to_lowercase).collect();
    let found = (0..chars.len()).find_map(|start| matched_len(&chars[start..], &needle).map(|len| (start, len)));
    let Some((start, len)) = found else {
        return content.to_string();
    };
    let from = start.saturating_sub(SNIPPET_CONTEXT);
    let to = (start + len + SNIPPET_CONTEXT).min(chars.len());
    let text = |range: std::ops::Range<usize>| chars[range].iter().collect::<String>();
    let (lead, tail) = (if from > 0 { "…" } else { "" }, if to < chars.len() { "…" } else { "" });
    format!("{lead}{}[{}]{}{tail}", text(from..start), text(start..start + len), text(start + len..to))
}

/// How many characters at the start of `text` match `needle` (already lower-cased), if they do.
fn matched_len(text: &[char], needle: &[char]) -> Option<usize> {
    let mut lowered = Vec::with_capacity(needle.len());
    for (taken, c) in text.iter().enumerate() {
        if lowered.len() >= needle.len() {
            return (lowered == needle).then_some(taken);
        }
        lowered.extend(c.to_lowercase());
        if !needle.starts_with(&lowered[..lowered.len().min(needle.len())]) {
            return None;
        }
    }
    (lowered == needle).then_some(text.len())
}

#[cfg(test)]
mod tests {
    use super::mark_substring;

    #[test]
    fn a_substring_match_is_marked_in_its_passage() {
        assert_eq!(mark_substring("The Kubernetes cluster", "bernet"), "The Ku[bernet]es cluster");
        assert_eq!(mark_substring("東京の天気は晴れです", "天気は"), "東京の[天気は]晴れです");
        let long = format!("{}needle{}", "a".repeat(40), "b".repeat(40));
        assert_eq!(mark_substring(&long, "NEEDLE"), format!("…{}[needle]{}…", "a".repeat(32), "b".repeat(32)));
    }
}
