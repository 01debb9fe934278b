use super::*;
use hermes_adapter::{ChatType, Platform, SessionSource};

async fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("state.db")).await.unwrap();
    (dir, store)
}

fn source(user: &str) -> SessionSource {
    SessionSource::new(Platform::new("api_server"), format!("chat-{user}"), ChatType::Dm)
        .with_user(user)
        .with_display_name(format!("User {user}"))
}

fn message(session_id: &str, role: &str, content: &str) -> NewMessage {
    NewMessage { session_id: session_id.into(), role: role.into(), content: content.into(), ..Default::default() }
}

#[tokio::test]
async fn inbox_drops_redelivery_and_replays_unfinished_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    {
        let store = Store::open(&path).await.unwrap();
        assert!(store.inbox_accept("ev-1", "webhook", "{\"a\":1}").await.unwrap());
        assert!(!store.inbox_accept("ev-1", "webhook", "{\"a\":2}").await.unwrap(), "a redelivery must be recognised");
        assert!(store.inbox_accept("ev-2", "webhook", "{}").await.unwrap());
        assert!(store.inbox_accept("ev-3", "webhook", "{}").await.unwrap());
        store.inbox_mark_processing("ev-1").await.unwrap();
        store.inbox_mark_done("ev-2").await.unwrap();
        store.inbox_mark_failed("ev-3", "unreadable").await.unwrap();
    }
    // A new process sees what the old one accepted.
    let store = Store::open(&path).await.unwrap();
    let unfinished = store.inbox_unfinished().await.unwrap();
    assert_eq!(unfinished.len(), 1);
    assert_eq!(unfinished[0].event_id, "ev-1");
    assert_eq!(unfinished[0].payload, "{\"a\":1}", "the first payload wins");
    assert_eq!(unfinished[0].state, InboxState::Processing);
    assert_eq!(unfinished[0].attempts, 1);
    // Finished rows still block redelivery until pruned.
    assert!(!store.inbox_accept("ev-2", "webhook", "{}").await.unwrap());
    assert_eq!(store.inbox_prune(Duration::ZERO).await.unwrap(), 2);
    assert!(store.inbox_accept("ev-2", "webhook", "{}").await.unwrap());
}

#[tokio::test]
async fn concurrent_accepts_of_one_event_store_it_once() {
    let (_dir, store) = store().await;
    let mut tasks = Vec::new();
    for _ in 0..32 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move { store.inbox_accept("same", "api_server", "{}").await.unwrap() }));
    }
    let mut inserted = 0;
    for t in tasks {
        inserted += t.await.unwrap() as usize;
    }
    assert_eq!(inserted, 1);
}

#[tokio::test]
async fn routes_keep_one_current_session_per_key() {
    let (_dir, store) = store().await;
    let first = store.route_get_or_create("k", &source("u1"), "m1").await.unwrap();
    assert!(first.created);
    let again = store.route_get_or_create("k", &source("u1"), "m1").await.unwrap();
    assert!(!again.created);
    assert_eq!(again.session_id, first.session_id);

    store.route_set_overrides("k", &serde_json::json!({"model_override": {"model": "m2"}})).await.unwrap();
    let reset = store.session_reset("k", &source("u1"), "m1", "session_reset").await.unwrap();
    assert_ne!(reset.session_id, first.session_id);
    assert_eq!(reset.overrides["model_override"]["model"], "m2", "reset keeps overrides unless cleared");
    let old = store.session_get(&first.session_id).await.unwrap().unwrap();
    assert_eq!(old.end_reason.as_deref(), Some("session_reset"));
    assert!(old.ended_at.is_some());
    assert_eq!(old.source.user_id.as_deref(), Some("u1"));

    assert!(store.session_close("k", "closed_by_client").await.unwrap());
    assert!(store.route_get("k").await.unwrap().is_none());
    assert!(!store.session_close("k", "closed_by_client").await.unwrap());
}

#[tokio::test]
async fn messages_keep_order_and_limit_returns_the_latest() {
    let (_dir, store) = store().await;
    let route = store.route_get_or_create("k", &source("u1"), "m").await.unwrap();
    for i in 0..5 {
        store.message_append(message(&route.session_id, "user", &format!("message {i}"))).await.unwrap();
    }
    let all = store.messages(&route.session_id, None).await.unwrap();
    assert_eq!(
        all.iter().map(|m| m.content.as_str()).collect::<Vec<_>>(),
        ["message 0", "message 1", "message 2", "message 3", "message 4"]
    );
    let last_two = store.messages(&route.session_id, Some(2)).await.unwrap();
    assert_eq!(last_two.iter().map(|m| m.content.as_str()).collect::<Vec<_>>(), ["message 3", "message 4"]);
    let session = store.session_get(&route.session_id).await.unwrap().unwrap();
    assert_eq!(session.message_count, 5);
}

#[tokio::test]
async fn message_for_event_finds_the_stored_user_message() {
    let (_dir, store) = store().await;
    let route = store.route_get_or_create("k", &source("u1"), "m").await.unwrap();
    let mut m = message(&route.session_id, "user", "hello");
    m.event_id = Some("ev-9".into());
    store.message_append(m).await.unwrap();
    assert!(store.message_for_event(&route.session_id, "ev-9", "user").await.unwrap().is_some());
    assert!(store.message_for_event(&route.session_id, "ev-9", "assistant").await.unwrap().is_none());
}

#[tokio::test]
async fn search_finds_words_substrings_and_cjk_but_only_in_scope() {
    let (_dir, store) = store().await;
    let alice = store.route_get_or_create("ka", &source("alice"), "m").await.unwrap();
    let bob = store.route_get_or_create("kb", &source("bob"), "m").await.unwrap();
    store.message_append(message(&alice.session_id, "user", "The deployment of kubernetes failed on Tuesday")).await.unwrap();
    store.message_append(message(&alice.session_id, "assistant", "東京の天気は晴れです")).await.unwrap();
    store.message_append(message(&bob.session_id, "user", "kubernetes secrets of bob")).await.unwrap();

    let alice_scope = SearchScope::User { platform: "api_server".into(), user_id: "alice".into() };
    let words = store.search_messages("kubernetes deployment", alice_scope.clone(), 10).await.unwrap();
    assert_eq!(words.len(), 1);
    assert_eq!(words[0].session_id, alice.session_id);
    assert!(words[0].snippet.contains("[kubernetes]"), "{}", words[0].snippet);

    let substring = store.search_messages("bernet", alice_scope.clone(), 10).await.unwrap();
    assert_eq!(substring.len(), 1, "trigram search finds text inside words");

    let cjk = store.search_messages("天気", alice_scope.clone(), 10).await;
    // Two CJK characters are below the trigram minimum; three are found.
    assert!(cjk.unwrap().is_empty());
    let cjk = store.search_messages("天気は", alice_scope, 10).await.unwrap();
    assert_eq!(cjk.len(), 1);
    assert_eq!(cjk[0].role, "assistant");

    // FTS syntax in user text is treated as text, not an error.
    let odd = store.search_messages("\"unbalanced AND (", SearchScope::Session(bob.session_id.clone()), 10).await;
    assert!(odd.unwrap().is_empty());
    let bobs = store.search_messages("kubernetes", SearchScope::Session(bob.session_id.clone()), 10).await.unwrap();
    assert_eq!(bobs.len(), 1);
    assert_eq!(bobs[0].session_id, bob.session_id);
}

#[tokio::test]
async fn outbox_reports_what_happened_to_a_key() {
    let (_dir, store) = store().await;
    assert_eq!(store.outbox_reserve("a", "t", "body").await.unwrap(), OutboxReservation::New);
    assert_eq!(store.outbox_reserve("a", "t", "body").await.unwrap(), OutboxReservation::Resume { attempts: 0 });
    store.outbox_mark_sending("a").await.unwrap();
    // A crash here leaves the send interrupted: the sender decides (it resends once, labelled).
    assert_eq!(store.outbox_reserve("a", "t", "body").await.unwrap(), OutboxReservation::Interrupted { attempts: 1 });
    store.outbox_mark_sent("a", Some("m-1")).await.unwrap();
    assert_eq!(
        store.outbox_reserve("a", "t", "body").await.unwrap(),
        OutboxReservation::AlreadySent { platform_message_id: Some("m-1".into()) }
    );
    store.outbox_reserve("b", "t", "body").await.unwrap();
    store.outbox_mark_failed("b", "403 forbidden").await.unwrap();
    assert_eq!(store.outbox_reserve("b", "t", "body").await.unwrap(), OutboxReservation::Failed { error: "403 forbidden".into() });
    store.outbox_reserve("c", "t", "body").await.unwrap();
    store.outbox_mark_ambiguous("c", "timeout").await.unwrap();
    assert_eq!(store.outbox_reserve("c", "t", "body").await.unwrap(), OutboxReservation::InDoubt);
    assert_eq!(store.outbox_get("a").await.unwrap().unwrap().attempts, 1);
}

#[tokio::test]
async fn usage_accumulates_per_model() {
    let (_dir, store) = store().await;
    let route = store.route_get_or_create("k", &source("u1"), "m").await.unwrap();
    store.usage_add(&route.session_id, "m1", &usage(100, 20, 50), 0.5).await.unwrap();
    store.usage_add(&route.session_id, "m1", &usage(10, 2, 0), 0.25).await.unwrap();
    store.usage_add(&route.session_id, "m2", &usage(1, 1, 0), 0.0).await.unwrap();
    let totals = store.session_usage(&route.session_id).await.unwrap();
    assert_eq!((totals.prompt_tokens, totals.completion_tokens, totals.cached_tokens, totals.api_calls), (111, 23, 50, 3));
    assert_eq!(totals.models, ["m1", "m2"]);
    assert!((totals.cost_usd - 0.75).abs() < 1e-9, "cost accumulates: {}", totals.cost_usd);
    let session = store.session_get(&route.session_id).await.unwrap().unwrap();
    assert_eq!((session.input_tokens, session.output_tokens), (111, 23));
}

#[tokio::test]
async fn a_failing_write_in_a_batch_does_not_undo_the_others() {
    let (_dir, store) = store().await;
    let route = store.route_get_or_create("k", &source("u1"), "m").await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..20 {
        let store = store.clone();
        // Every odd message names a session that does not exist: a foreign-key failure.
        let session = if i % 2 == 0 { route.session_id.clone() } else { "missing".to_string() };
        tasks.push(tokio::spawn(async move { store.message_append(message(&session, "user", &format!("m{i}"))).await.is_ok() }));
    }
    let mut ok = 0;
    for t in tasks {
        ok += t.await.unwrap() as usize;
    }
    assert_eq!(ok, 10);
    assert_eq!(store.messages(&route.session_id, None).await.unwrap().len(), 10);
    assert_eq!(store.session_get(&route.session_id).await.unwrap().unwrap().message_count, 10);
}

#[tokio::test]
async fn a_newer_schema_is_refused_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.pragma_update(None, "user_version", 999).unwrap();
    }
    let err = Store::open(&path).await.err().unwrap();
    assert!(err.to_string().contains("newer hermes"), "{err}");
}

fn usage(prompt: u64, completion: u64, cached: u64) -> hermes_adapter::Usage {
    hermes_adapter::Usage { prompt_tokens: prompt, completion_tokens: completion, cached_tokens: cached, cache_write_tokens: 0 }
}

#[tokio::test]
async fn the_first_prompt_snapshot_of_a_session_wins() {
    let (_dir, store) = store().await;
    let route = store.route_get_or_create("k", &source("u1"), "m").await.unwrap();
    assert_eq!(store.session_prompt_freeze(&route.session_id, "first").await.unwrap(), "first");
    assert_eq!(store.session_prompt_freeze(&route.session_id, "second").await.unwrap(), "first");
    let next = store.session_reset("k", &source("u1"), "m", "session_reset").await.unwrap();
    assert_eq!(store.session_prompt(&next.session_id).await.unwrap(), None, "a new session takes a new snapshot");
}

#[tokio::test]
async fn undo_soft_deletes_whole_turns() {
    let (_dir, store) = store().await;
    let s = store.route_get_or_create("k", &source("u1"), "m").await.unwrap().session_id;
    for (role, content) in [("user", "one"), ("assistant", "1"), ("user", "two"), ("assistant", "2"), ("tool", "t"), ("assistant", "2b")] {
        store.message_append(message(&s, role, content)).await.unwrap();
    }
    let undone = store.messages_undo(&s, 1).await.unwrap().unwrap();
    assert_eq!(undone, Undone { turns: 1, messages: 4, first_user_text: "two".into() });
    let left: Vec<_> = store.messages(&s, None).await.unwrap().into_iter().map(|m| m.content).collect();
    assert_eq!(left, ["one", "1"]);
    assert!(store.search_messages("two", SearchScope::Session(s.clone()), 10).await.unwrap().is_empty(), "undone turns are not found");
    assert_eq!(store.messages_undo(&s, 5).await.unwrap().unwrap().turns, 1);
    assert_eq!(store.messages_undo(&s, 1).await.unwrap(), None);
}

#[tokio::test]
async fn compression_rotates_to_a_child_session_with_lineage() {
    let (_dir, store) = store().await;
    let parent = store.route_get_or_create("k", &source("u1"), "m").await.unwrap().session_id;
    store.message_append(message(&parent, "user", "old words")).await.unwrap();
    let carried = vec![message("", "user", "[summary] we talked"), message("", "user", "latest")];
    let next = store.session_compress_into("k", &parent, "m", "PROMPT", carried.clone()).await.unwrap().unwrap();
    let child = store.session_get(&next.session_id).await.unwrap().unwrap();
    assert_eq!(child.parent_session_id.as_deref(), Some(parent.as_str()));
    assert_eq!(store.session_get(&parent).await.unwrap().unwrap().end_reason.as_deref(), Some("compressed"));
    assert_eq!(store.route_get("k").await.unwrap().unwrap().session_id, next.session_id, "the route follows");
    assert_eq!(store.session_prompt(&next.session_id).await.unwrap().as_deref(), Some("PROMPT"));
    assert_eq!(store.messages(&next.session_id, None).await.unwrap().len(), 2);
    assert_eq!(store.session_prompt_tokens(&next.session_id).await.unwrap().1, 1);
    assert!(store.session_compress_into("k", &parent, "m", "P", carried).await.unwrap().is_none(), "a stale compression does not fork");
}

#[tokio::test]
async fn origin_search_never_crosses_users() {
    let (_dir, store) = store().await;
    // Both in the same group chat: only the user tells them apart.
    let in_group = |user: &str| SessionSource::new(Platform::new("telegram"), "group-1", ChatType::Group).with_user(user);
    let a = store.route_get_or_create("ka", &in_group("alice"), "m").await.unwrap().session_id;
    let b = store.route_get_or_create("kb", &in_group("bob"), "m").await.unwrap().session_id;
    store.message_append(message(&a, "user", "alice secret pineapple")).await.unwrap();
    store.message_append(message(&b, "user", "bob secret pineapple")).await.unwrap();
    let src = in_group("alice");
    let scope = SearchScope::Origin { platform: src.platform.as_str().into(), chat_id: src.chat_id.clone(), user_id: src.user_id.clone() };
    let hits = store.search_messages("pineapple", scope, 10).await.unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].session_id, a);
}

fn opening(event_id: &str, key: &str, text: &str) -> TurnOpening {
    TurnOpening {
        event_id: event_id.into(),
        session_key: key.into(),
        source: source("u1"),
        default_model: "m".into(),
        user_message: NewMessage { event_id: Some(event_id.into()), ..message("", "user", text) },
        seed: vec![message("", "user", "earlier question"), message("", "assistant", "earlier answer")],
    }
}

fn after(update: HistoryUpdate) -> (Vec<String>, i64) {
    match update {
        HistoryUpdate::After { messages, active_count } => (messages.into_iter().map(|m| m.content).collect(), active_count),
        HistoryUpdate::Stale => panic!("expected the messages after the known history, got Stale"),
    }
}

#[tokio::test]
async fn opening_a_turn_stores_the_message_once_and_reads_only_what_is_new() {
    let (_dir, store) = store().await;
    store.inbox_accept("ev-1", "api_server", "{}").await.unwrap();
    let first = store.turn_open(opening("ev-1", "k", "hello"), None).await.unwrap();
    assert!(first.route.created);
    assert!(matches!(first.history, HistoryUpdate::Stale), "nothing known yet: the caller reads the whole history");
    assert_eq!(store.inbox_get("ev-1").await.unwrap().unwrap().state, InboxState::Processing);
    let s = first.route.session_id.clone();
    let context = store.turn_context(&s, 400).await.unwrap();
    let contents: Vec<_> = context.history.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(contents, ["earlier question", "earlier answer", "hello"], "the seed goes first, into the empty session only");
    let known = context.known.clone().unwrap();
    assert_eq!((known.active_count, known.last_id), (3, context.history[2].id));

    // A replay of the same event stores nothing new, and the known history is still valid.
    let replay = store.turn_open(opening("ev-1", "k", "hello"), Some(known.clone())).await.unwrap();
    assert_eq!(after(replay.history), (vec![], 3));
    assert_eq!(store.turn_context(&s, 400).await.unwrap().history.len(), 3);
    assert_eq!(store.inbox_get("ev-1").await.unwrap().unwrap().attempts, 2);

    // The answer with its usage, then the next turn reads the answer and its own message only.
    let answer = NewMessage { finish_reason: Some("stop".into()), ..message(&s, "assistant", "hi there") };
    let calls = vec![
        CallUsage { model: "m".into(), usage: usage(100, 10, 0), cost_usd: 0.5 },
        CallUsage { model: "m".into(), usage: usage(140, 5, 0), cost_usd: 0.25 },
    ];
    store.turn_record(&s, vec![answer], calls).await.unwrap();
    store.session_prompt_freeze(&s, "frozen").await.unwrap();
    let second = store.turn_open(opening("ev-2", "k", "again"), Some(known.clone())).await.unwrap();
    assert_eq!(after(second.history), (vec!["hi there".to_string(), "again".to_string()], 5), "no seed into a session with messages");
    assert_eq!((second.system_prompt.as_deref(), second.last_prompt_tokens), (Some("frozen"), 140), "the last call's prompt size");
    let totals = store.session_usage(&s).await.unwrap();
    assert_eq!((totals.prompt_tokens, totals.completion_tokens, totals.api_calls, totals.cost_usd), (240, 15, 2, 0.75));
}

#[tokio::test]
async fn a_known_history_that_changed_is_reported_stale() {
    let (_dir, store) = store().await;
    let s = store.turn_open(opening("ev-1", "k", "one"), None).await.unwrap().route.session_id;
    store.turn_record(&s, vec![message(&s, "assistant", "1")], vec![]).await.unwrap();
    let known = store.turn_context(&s, 400).await.unwrap().known.unwrap();
    store.turn_open(opening("ev-2", "k", "two"), None).await.unwrap();
    store.turn_record(&s, vec![message(&s, "assistant", "2")], vec![]).await.unwrap();
    // `/undo` of both turns deactivates messages the caller holds.
    store.messages_undo(&s, 2).await.unwrap();
    let reopened = store.turn_open(opening("ev-3", "k", "three"), Some(known.clone())).await.unwrap();
    assert!(matches!(reopened.history, HistoryUpdate::Stale));
    // Another session (after /new) makes it stale too.
    let next = store.session_reset("k", &source("u1"), "m", "session_reset").await.unwrap();
    let fresh = store.turn_open(opening("ev-4", "k", "four"), Some(known)).await.unwrap();
    assert_eq!(fresh.route.session_id, next.session_id);
    assert!(matches!(fresh.history, HistoryUpdate::Stale));
}

#[tokio::test]
async fn claiming_an_outbox_key_records_the_first_attempt_with_it() {
    let (_dir, store) = store().await;
    let send_new: fn(&OutboxReservation) -> bool = |r| matches!(r, OutboxReservation::New);
    assert_eq!(store.outbox_claim("a", "t", "body", send_new).await.unwrap(), OutboxReservation::New);
    let row = store.outbox_get("a").await.unwrap().unwrap();
    assert_eq!((row.state.as_str(), row.attempts), ("sending", 1), "on disk as sending before the request leaves");
    // A restart now finds it interrupted; a claim that does not send leaves it as it was.
    assert_eq!(store.outbox_claim("a", "t", "body", send_new).await.unwrap(), OutboxReservation::Interrupted { attempts: 1 });
    assert_eq!(store.outbox_get("a").await.unwrap().unwrap().attempts, 1);
}

#[tokio::test]
async fn a_batch_of_events_is_stored_in_one_write_and_redeliveries_in_it_are_recognised() {
    let (_dir, store) = store().await;
    assert!(store.inbox_accept("ev-2", "telegram", "{}").await.unwrap());
    let batch = ["ev-1", "ev-2", "ev-3"].map(|id| (id.to_string(), "telegram".to_string(), format!("{{\"id\":\"{id}\"}}")));
    assert_eq!(store.inbox_accept_all(batch.to_vec()).await.unwrap(), [true, false, true]);
    let unfinished: Vec<_> = store.inbox_unfinished().await.unwrap().into_iter().map(|r| (r.event_id, r.payload)).collect();
    assert_eq!(unfinished.len(), 3);
    assert!(unfinished.contains(&("ev-2".to_string(), "{}".to_string())), "the first payload of ev-2 stays");
    assert_eq!(store.inbox_accept_all(batch.to_vec()).await.unwrap(), [false, false, false]);
}
