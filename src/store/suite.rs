//! The behaviour every store backend must show: async tests over a [`Store`], written against
//! the traits only, and [`store_suite!`] that runs each of them as a `#[tokio::test]` against
//! one backend. A backend's tests invoke `store_suite!(open)`, `open` being an async fn that
//! returns a fresh, empty store and whatever keeps it alive (a temp dir, a scratch database).
//!
//! A suite test missing from the macro's list is dead code, which the lints refuse.

use super::*;
use hermes_adapter::{ChatType, Platform, SessionSource};
use std::time::Duration;

/// Run the whole suite against the backend `$open` returns.
macro_rules! store_suite {
    ($open:path) => {
        $crate::store::suite::store_suite!(@each $open;
            inbox_drops_redelivery_and_replays_unfinished,
            inbox_marks_never_revive_a_finished_event,
            poisoned_events_are_listed_newest_first,
            unfinished_events_are_read_for_the_platforms_asked,
            pruning_keeps_unfinished_and_recent_events,
            concurrent_accepts_of_one_event_store_it_once,
            a_batch_of_events_is_stored_in_one_write_and_redeliveries_in_it_are_recognised,
            routes_keep_one_current_session_per_key,
            the_latest_origin_wins,
            user_talked_in_needs_a_session_of_theirs_in_that_chat,
            messages_keep_order_and_limit_returns_the_latest,
            a_messages_pictures_are_kept_with_it_and_carried_by_compression_when_given,
            conversations_list_routes_most_recent_first,
            messages_after_a_cursor_cross_sessions_and_skip_tools_and_undone,
            a_message_for_a_missing_session_is_refused,
            message_for_event_finds_the_stored_user_message,
            search_finds_words_substrings_and_cjk_but_only_in_scope,
            origin_search_never_crosses_users,
            session_key_and_userless_origin_scopes,
            outbox_reports_what_happened_to_a_key,
            an_outbox_lane_yields_its_parts_in_order_and_remembers_each_attempt,
            usage_accumulates_per_model,
            the_first_prompt_snapshot_of_a_session_wins,
            prompt_tokens_of_an_unknown_session_are_zero,
            titles_are_unique_across_sessions,
            undo_soft_deletes_whole_turns,
            compression_rotates_to_a_child_session_with_lineage,
            opening_a_turn_stores_the_message_once_and_reads_only_what_is_new,
            a_known_history_that_changed_is_reported_stale,
            a_claim_is_exclusive_between_holders,
            an_expired_claim_can_be_taken_by_another,
            retaking_a_claim_extends_it,
            only_the_holder_releases_a_claim,
            of_concurrent_takers_one_wins,
            a_lease_has_one_holder_and_every_tenure_a_larger_token,
            an_expired_lease_goes_to_a_standby_and_the_old_holder_cannot_renew,
            a_released_lease_is_free_at_once_and_its_next_tenure_is_newer,
            a_cursor_moves_only_under_the_live_tenure_and_never_back,
            hostile_cursor_names_and_values_are_stored_as_data,
            of_concurrent_lease_takers_one_wins,
            an_open_approval_closes_once,
            approvals_left_open_by_a_crash_are_closed_oldest_first,
            a_platform_taken_over_closes_only_its_own_approvals,
        );
    };
    (@each $open:path; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                let (_keep, store) = $open().await;
                $crate::store::suite::$name(store).await;
            }
        )*
    };
}
pub(crate) use store_suite;

pub(crate) fn source(user: &str) -> SessionSource {
    SessionSource::new(Platform::new("api_server"), format!("chat-{user}"), ChatType::Dm)
        .with_user(user)
        .with_display_name(format!("User {user}"))
}

pub(crate) fn message(session_id: &str, role: &str, content: &str) -> NewMessage {
    NewMessage { session_id: session_id.into(), role: role.into(), content: content.into(), ..Default::default() }
}

fn usage(prompt: u64, completion: u64, cached: u64) -> hermes_adapter::Usage {
    hermes_adapter::Usage { prompt_tokens: prompt, completion_tokens: completion, cached_tokens: cached, cache_write_tokens: 0 }
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

// --- inbox ---

pub(crate) async fn inbox_drops_redelivery_and_replays_unfinished(store: Store) {
    assert!(store.inbox_accept("ev-1", "webhook", "{\"a\":1}").await.unwrap());
    assert!(!store.inbox_accept("ev-1", "webhook", "{\"a\":2}").await.unwrap(), "a redelivery must be recognised");
    assert!(store.inbox_accept("ev-2", "webhook", "{}").await.unwrap());
    assert!(store.inbox_accept("ev-3", "webhook", "{}").await.unwrap());
    assert!(store.inbox_accept("ev-4", "webhook", "{}").await.unwrap());
    store.inbox_mark_processing("ev-1").await.unwrap();
    store.inbox_mark_done("ev-2").await.unwrap();
    store.inbox_mark_failed("ev-3", "unreadable").await.unwrap();
    let unfinished = store.inbox_unfinished().await.unwrap();
    assert_eq!(unfinished.iter().map(|r| r.event_id.as_str()).collect::<Vec<_>>(), ["ev-1", "ev-4"], "oldest first");
    assert_eq!(unfinished[0].payload, "{\"a\":1}", "the first payload wins");
    assert_eq!((unfinished[0].state, unfinished[0].attempts), (InboxState::Processing, 1));
    assert_eq!((unfinished[1].state, unfinished[1].attempts), (InboxState::Accepted, 0));
    let failed = store.inbox_get("ev-3").await.unwrap().unwrap();
    assert_eq!((failed.state, failed.error.as_deref(), failed.platform.as_str()), (InboxState::Failed, Some("unreadable"), "webhook"));
    assert!(store.inbox_get("missing").await.unwrap().is_none());
    // Finished rows still block redelivery until pruned.
    assert!(!store.inbox_accept("ev-2", "webhook", "{}").await.unwrap());
    assert_eq!(store.inbox_prune(Duration::ZERO).await.unwrap(), 2);
    assert!(store.inbox_accept("ev-2", "webhook", "{}").await.unwrap());
}

pub(crate) async fn inbox_marks_never_revive_a_finished_event(store: Store) {
    store.inbox_accept("ev-1", "chat", "{}").await.unwrap();
    store.inbox_mark_processing("ev-1").await.unwrap();
    store.inbox_mark_processing("ev-1").await.unwrap();
    store.inbox_mark_done("ev-1").await.unwrap();
    // A late replay starting a turn on it does not make it unfinished again.
    store.inbox_mark_processing("ev-1").await.unwrap();
    let row = store.inbox_get("ev-1").await.unwrap().unwrap();
    assert_eq!((row.state, row.attempts), (InboxState::Done, 2));
    assert!(store.inbox_unfinished().await.unwrap().is_empty());
}

pub(crate) async fn poisoned_events_are_listed_newest_first(store: Store) {
    for id in ["a", "b", "c"] {
        store.inbox_accept(id, "chat", "{}").await.unwrap();
        store.inbox_mark_processing(id).await.unwrap();
    }
    store.inbox_mark_poisoned("a", "panicked (incident 1)").await.unwrap();
    store.inbox_mark_poisoned("c", "panicked (incident 2)").await.unwrap();
    let parked = store.inbox_poisoned(10).await.unwrap();
    assert_eq!(parked.iter().map(|r| r.event_id.as_str()).collect::<Vec<_>>(), ["c", "a"]);
    assert_eq!(parked[0].error.as_deref(), Some("panicked (incident 2)"));
    assert_eq!(parked[0].state, InboxState::Poisoned);
    assert_eq!(store.inbox_poisoned(1).await.unwrap().len(), 1);
    // Parked events are never replayed, and pruning keeps them to be looked at.
    assert_eq!(store.inbox_unfinished().await.unwrap().iter().map(|r| r.event_id.as_str()).collect::<Vec<_>>(), ["b"]);
    assert_eq!(store.inbox_prune(Duration::ZERO).await.unwrap(), 0);
    assert_eq!(store.inbox_poisoned(10).await.unwrap().len(), 2);
}

/// A replica reads only the unfinished rows of the platforms it serves, oldest first.
pub(crate) async fn unfinished_events_are_read_for_the_platforms_asked(store: Store) {
    for (id, platform) in [("t1", "telegram"), ("w1", "webhook"), ("d1", "discord"), ("t2", "telegram"), ("done", "telegram")] {
        store.inbox_accept(id, platform, "{}").await.unwrap();
    }
    store.inbox_mark_processing("t2").await.unwrap();
    store.inbox_mark_done("done").await.unwrap();
    let ids = |rows: Vec<InboxRow>| rows.into_iter().map(|r| r.event_id).collect::<Vec<_>>();
    let of = |platforms: &[&str]| platforms.iter().map(|p| p.to_string()).collect::<Vec<_>>();
    assert_eq!(ids(store.inbox_unfinished_of(&of(&["telegram"])).await.unwrap()), ["t1", "t2"]);
    assert_eq!(ids(store.inbox_unfinished_of(&of(&["webhook", "telegram"])).await.unwrap()), ["t1", "w1", "t2"]);
    assert!(store.inbox_unfinished_of(&of(&["slack"])).await.unwrap().is_empty());
    assert!(store.inbox_unfinished_of(&[]).await.unwrap().is_empty(), "serving nothing, nothing is read");
}

pub(crate) async fn pruning_keeps_unfinished_and_recent_events(store: Store) {
    store.inbox_accept("open", "chat", "{}").await.unwrap();
    store.inbox_accept("done", "chat", "{}").await.unwrap();
    store.inbox_mark_done("done").await.unwrap();
    assert_eq!(store.inbox_prune(Duration::from_secs(3600)).await.unwrap(), 0, "finished within the hour: kept");
    assert_eq!(store.inbox_prune(Duration::ZERO).await.unwrap(), 1);
    assert!(store.inbox_get("done").await.unwrap().is_none());
    assert!(store.inbox_get("open").await.unwrap().is_some());
}

pub(crate) async fn concurrent_accepts_of_one_event_store_it_once(store: Store) {
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

pub(crate) async fn a_batch_of_events_is_stored_in_one_write_and_redeliveries_in_it_are_recognised(store: Store) {
    assert!(store.inbox_accept("ev-2", "telegram", "{}").await.unwrap());
    let batch = ["ev-1", "ev-2", "ev-3"].map(|id| (id.to_string(), "telegram".to_string(), format!("{{\"id\":\"{id}\"}}")));
    assert_eq!(store.inbox_accept_all(batch.to_vec()).await.unwrap(), [true, false, true]);
    let unfinished: Vec<_> = store.inbox_unfinished().await.unwrap().into_iter().map(|r| (r.event_id, r.payload)).collect();
    assert_eq!(unfinished.len(), 3);
    assert!(unfinished.contains(&("ev-2".to_string(), "{}".to_string())), "the first payload of ev-2 stays");
    assert_eq!(store.inbox_accept_all(batch.to_vec()).await.unwrap(), [false, false, false]);
}

// --- sessions and routes ---

pub(crate) async fn routes_keep_one_current_session_per_key(store: Store) {
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

pub(crate) async fn the_latest_origin_wins(store: Store) {
    let first = store.route_get_or_create("k", &source("u1"), "m").await.unwrap();
    let moved = SessionSource { chat_id: "elsewhere".into(), ..source("u1") };
    let again = store.route_get_or_create("k", &moved, "other-model").await.unwrap();
    assert_eq!((again.session_id.as_str(), again.created), (first.session_id.as_str(), false), "same session");
    assert_eq!(again.origin.chat_id, "elsewhere");
    assert_eq!(store.route_get("k").await.unwrap().unwrap().origin.chat_id, "elsewhere", "replies go where the user last wrote from");
    let session = store.session_get(&first.session_id).await.unwrap().unwrap();
    assert_eq!((session.model.as_deref(), session.chat_id.as_str()), (Some("m"), "chat-u1"), "the session keeps how it started");
    assert!(store.session_get("missing").await.unwrap().is_none());
    assert!(!store.route_set_overrides("no-such-key", &serde_json::json!({})).await.unwrap());
}

pub(crate) async fn user_talked_in_needs_a_session_of_theirs_in_that_chat(store: Store) {
    store.route_get_or_create("k", &source("u1"), "m").await.unwrap();
    assert!(store.user_talked_in("api_server", "chat-u1", "u1").await.unwrap());
    assert!(!store.user_talked_in("api_server", "chat-u1", "u2").await.unwrap(), "another user");
    assert!(!store.user_talked_in("api_server", "chat-u2", "u1").await.unwrap(), "another chat");
    assert!(!store.user_talked_in("telegram", "chat-u1", "u1").await.unwrap(), "another platform");
}

// --- messages and search ---

pub(crate) async fn messages_keep_order_and_limit_returns_the_latest(store: Store) {
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

pub(crate) async fn a_messages_pictures_are_kept_with_it_and_carried_by_compression_when_given(store: Store) {
    let s = store.route_get_or_create("k", &source("u1"), "m").await.unwrap().session_id;
    let images = r#"[{"media_type":"image/jpeg","path":"/cache/images/a.prepared.jpg","width":1568,"height":1176}]"#;
    let with_picture = NewMessage { images: Some(images.into()), event_id: Some("ev-1".into()), ..message(&s, "user", "what is this?") };
    store.message_append(with_picture).await.unwrap();
    store.message_append(message(&s, "assistant", "a cat")).await.unwrap();
    let rows = store.messages(&s, None).await.unwrap();
    assert_eq!(rows[0].images.as_deref(), Some(images), "the references come back as stored");
    assert_eq!(rows[1].images, None, "a message without pictures has none");
    let by_event = store.message_for_event(&s, "ev-1", "user").await.unwrap().unwrap();
    assert_eq!(by_event.images.as_deref(), Some(images));
    let logged = store.messages_after(0, 10).await.unwrap();
    assert_eq!(logged[0].message.images.as_deref(), Some(images));

    let carried = vec![
        message("", "user", "[summary] a picture of a cat"),
        NewMessage { images: Some(images.into()), ..message("", "user", "latest") },
    ];
    let next = store.session_compress_into("k", &s, "m", "P", carried).await.unwrap().unwrap();
    let child = store.messages(&next.session_id, None).await.unwrap();
    assert_eq!(child.iter().map(|m| m.images.as_deref()).collect::<Vec<_>>(), [None, Some(images)]);
}

pub(crate) async fn conversations_list_routes_most_recent_first(store: Store) {
    assert!(store.conversations(10).await.unwrap().is_empty());
    let older = store.route_get_or_create("k1", &source("u1"), "m").await.unwrap();
    store.message_append(message(&older.session_id, "user", "hi")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let newer = store.route_get_or_create("k2", &source("u2"), "m").await.unwrap();
    store.session_set_title(&newer.session_id, "Trip").await.unwrap();
    let listed = store.conversations(10).await.unwrap();
    let keys: Vec<&str> = listed.iter().map(|c| c.session_key.as_str()).collect();
    assert_eq!(keys, ["k2", "k1"], "the most recently active first");
    assert_eq!((listed[0].title.as_deref(), listed[0].origin.chat_id.as_str()), (Some("Trip"), "chat-u2"));
    assert_eq!((listed[1].session_id.as_str(), listed[1].message_count), (older.session_id.as_str(), 1));
    assert_eq!(store.conversations(1).await.unwrap().len(), 1, "the limit holds");
    store.session_close("k1", "closed").await.unwrap();
    assert_eq!(store.conversations(10).await.unwrap().len(), 1, "a closed conversation is gone");
}

pub(crate) async fn messages_after_a_cursor_cross_sessions_and_skip_tools_and_undone(store: Store) {
    assert_eq!(store.latest_message_id().await.unwrap(), 0);
    let a = store.route_get_or_create("ka", &source("u1"), "m").await.unwrap().session_id;
    let b = store.route_get_or_create("kb", &source("u2"), "m").await.unwrap().session_id;
    let start = store.message_append(message(&a, "user", "before the cursor")).await.unwrap();
    assert_eq!(store.latest_message_id().await.unwrap(), start);
    store.message_append(message(&b, "user", "question")).await.unwrap();
    store.message_append(message(&b, "tool", "tool output")).await.unwrap();
    store.message_append(message(&b, "assistant", "")).await.unwrap();
    store.message_append(message(&a, "assistant", "answer")).await.unwrap();
    let seen = store.messages_after(start, 10).await.unwrap();
    let what: Vec<(&str, &str, &str)> =
        seen.iter().map(|m| (m.session_key.as_str(), m.message.role.as_str(), m.message.content.as_str())).collect();
    assert_eq!(what, [("kb", "user", "question"), ("ka", "assistant", "answer")]);
    let first = store.messages_after(start, 1).await.unwrap();
    assert_eq!(first.len(), 1, "the limit holds");
    let rest = store.messages_after(first[0].message.id, 10).await.unwrap();
    assert_eq!(rest.iter().map(|m| m.message.content.as_str()).collect::<Vec<_>>(), ["answer"], "reading on from a cursor");
    store.messages_undo(&a, 1).await.unwrap();
    let after_undo = store.messages_after(start, 10).await.unwrap();
    assert!(after_undo.iter().all(|m| m.message.content != "answer"), "an undone message is not an event: {after_undo:?}");
}

pub(crate) async fn a_message_for_a_missing_session_is_refused(store: Store) {
    assert!(store.message_append(message("missing", "user", "hello")).await.is_err());
    let s = store.route_get_or_create("k", &source("u1"), "m").await.unwrap().session_id;
    let first = store.message_append(message(&s, "user", "one")).await.unwrap();
    let second = store.message_append(message(&s, "assistant", "two")).await.unwrap();
    assert!(second > first, "ids grow in append order");
}

pub(crate) async fn message_for_event_finds_the_stored_user_message(store: Store) {
    let route = store.route_get_or_create("k", &source("u1"), "m").await.unwrap();
    let mut m = message(&route.session_id, "user", "hello");
    m.event_id = Some("ev-9".into());
    store.message_append(m).await.unwrap();
    assert!(store.message_for_event(&route.session_id, "ev-9", "user").await.unwrap().is_some());
    assert!(store.message_for_event(&route.session_id, "ev-9", "assistant").await.unwrap().is_none());
}

pub(crate) async fn search_finds_words_substrings_and_cjk_but_only_in_scope(store: Store) {
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

pub(crate) async fn origin_search_never_crosses_users(store: Store) {
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

pub(crate) async fn session_key_and_userless_origin_scopes(store: Store) {
    let channel = SessionSource::new(Platform::new("webhook"), "feed", ChatType::Channel);
    let old = store.route_get_or_create("shared", &channel, "m").await.unwrap().session_id;
    store.message_append(message(&old, "user", "quarterly report draft")).await.unwrap();
    let new = store.session_reset("shared", &channel, "m", "session_reset").await.unwrap().session_id;
    store.message_append(message(&new, "assistant", "quarterly report final")).await.unwrap();
    let other = store.route_get_or_create("other", &source("u1"), "m").await.unwrap().session_id;
    store.message_append(message(&other, "user", "quarterly report of u1")).await.unwrap();

    let by_key = store.search_messages("quarterly", SearchScope::SessionKey("shared".into()), 10).await.unwrap();
    let mut sessions: Vec<_> = by_key.iter().map(|h| h.session_id.clone()).collect();
    sessions.sort();
    let mut expected = vec![old.clone(), new.clone()];
    expected.sort();
    assert_eq!(sessions, expected, "every session of the key, none of another key");

    let userless = SearchScope::Origin { platform: "webhook".into(), chat_id: "feed".into(), user_id: None };
    assert_eq!(store.search_messages("quarterly", userless, 10).await.unwrap().len(), 2);
    let with_user = SearchScope::Origin { platform: "webhook".into(), chat_id: "feed".into(), user_id: Some("u1".into()) };
    assert!(store.search_messages("quarterly", with_user, 10).await.unwrap().is_empty(), "a user scope never sees user-less sessions");
    assert_eq!(store.search_messages("quarterly", SearchScope::SessionKey("shared".into()), 1).await.unwrap().len(), 1, "the limit holds");
    assert!(store.search_messages("   ", SearchScope::SessionKey("shared".into()), 10).await.unwrap().is_empty());
}

// --- outbox ---

pub(crate) fn part(key: &str, lane: &str) -> NewOutboxRow {
    NewOutboxRow {
        key: key.into(),
        lane: lane.into(),
        platform: "telegram".into(),
        target: "{}".into(),
        body: format!("body of {key}"),
        message: format!("{{\"key\":\"{key}\"}}"),
        deadline_ms: i64::MAX,
        notify_on_death: true,
        lead: key.ends_with(":0"),
    }
}

pub(crate) async fn outbox_reports_what_happened_to_a_key(store: Store) {
    assert_eq!(store.outbox_enqueue(vec![part("a:0", "l1")]).await.unwrap(), [Queued::New]);
    assert_eq!(store.outbox_enqueue(vec![part("a:0", "l1")]).await.unwrap(), [Queued::Waiting], "queued twice is one row");
    store.outbox_begin_attempt("a:0", false).await.unwrap();
    store.outbox_end_attempt("a:0", AttemptEnd::Sent { platform_message_id: Some("m-1".into()) }).await.unwrap();
    assert_eq!(store.outbox_enqueue(vec![part("a:0", "l1")]).await.unwrap(), [Queued::Sent { platform_message_id: Some("m-1".into()) }]);
    store.outbox_enqueue(vec![part("b:0", "l1")]).await.unwrap();
    store.outbox_end_attempt("b:0", AttemptEnd::Dead { reason: "403 forbidden".into() }).await.unwrap();
    assert_eq!(store.outbox_enqueue(vec![part("b:0", "l1")]).await.unwrap(), [Queued::GivenUp { reason: "403 forbidden".into() }]);
    assert_eq!(store.outbox_get("a:0").await.unwrap().unwrap().attempts, 1);
}

pub(crate) async fn an_outbox_lane_yields_its_parts_in_order_and_remembers_each_attempt(store: Store) {
    store.outbox_enqueue(vec![part("t1:0", "chat-1"), part("t1:1", "chat-1"), part("t2:0", "chat-2")]).await.unwrap();
    store.outbox_enqueue(vec![part("t3:0", "chat-1")]).await.unwrap();
    let mut lanes = store.outbox_busy_lanes().await.unwrap();
    lanes.sort();
    assert_eq!(lanes, ["chat-1", "chat-2"]);
    let head = store.outbox_lane_head("chat-1").await.unwrap().unwrap();
    assert_eq!((head.key.as_str(), head.state.as_str(), head.lead, head.message.as_str()), ("t1:0", "pending", true, "{\"key\":\"t1:0\"}"));
    // A definite failure keeps the part at the head, pending, with when and why.
    store.outbox_begin_attempt("t1:0", false).await.unwrap();
    store.outbox_end_attempt("t1:0", AttemptEnd::RetryAt { at: 1234, error: "502".into() }).await.unwrap();
    let head = store.outbox_lane_head("chat-1").await.unwrap().unwrap();
    assert_eq!((head.key.as_str(), head.state.as_str(), head.attempts, head.next_attempt_at), ("t1:0", "pending", 1, 1234));
    assert_eq!(head.error.as_deref(), Some("502"));
    // An attempt that never recorded its end is found `sending` (a restart cut it off).
    store.outbox_begin_attempt("t1:0", true).await.unwrap();
    let head = store.outbox_lane_head("chat-1").await.unwrap().unwrap();
    assert_eq!((head.state.as_str(), head.attempts, head.resent_marked), ("sending", 2, true));
    store.outbox_end_attempt("t1:0", AttemptEnd::Sent { platform_message_id: None }).await.unwrap();
    let head = store.outbox_lane_head("chat-1").await.unwrap().unwrap();
    assert_eq!((head.key.as_str(), head.lead), ("t1:1", false), "the next part of the same chat, in order");
    store.outbox_end_attempt("t1:1", AttemptEnd::Dead { reason: "bot blocked".into() }).await.unwrap();
    assert_eq!(store.outbox_lane_head("chat-1").await.unwrap().unwrap().key, "t3:0", "a dead part no longer holds its lane");

    let summary = store.outbox_summary().await.unwrap();
    assert_eq!(summary.len(), 1);
    assert_eq!((summary[0].platform.as_str(), summary[0].pending, summary[0].dead), ("telegram", 2, 1));
    assert!(summary[0].oldest_pending_at.is_some());

    let dead = store.outbox_dead_letters(10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!((dead[0].key.as_str(), dead[0].reason.as_str(), dead[0].body.as_str()), ("t1:1", "bot blocked", "body of t1:1"));
    // Resent by hand: back on its way, ahead of the later part of its chat.
    assert_eq!(store.outbox_requeue(dead[0].id, i64::MAX).await.unwrap().as_deref(), Some("chat-1"));
    assert_eq!(store.outbox_requeue(dead[0].id, i64::MAX).await.unwrap(), None, "only a dead letter is requeued");
    let head = store.outbox_lane_head("chat-1").await.unwrap().unwrap();
    assert_eq!((head.key.as_str(), head.attempts), ("t1:1", 0));
    store.outbox_end_attempt("t1:1", AttemptEnd::Dead { reason: "still blocked".into() }).await.unwrap();
    assert!(store.outbox_drop(dead[0].id).await.unwrap());
    assert!(!store.outbox_drop(dead[0].id).await.unwrap(), "dropped once");
    assert!(store.outbox_dead_letters(10).await.unwrap().is_empty());
    assert_eq!(store.outbox_get("t1:1").await.unwrap().unwrap().state, "dropped");

    // Pruning forgets finished records and old dead letters, never a part on its way.
    store.outbox_end_attempt("t2:0", AttemptEnd::Dead { reason: "gone".into() }).await.unwrap();
    assert_eq!(store.outbox_prune(Duration::from_secs(3600), Duration::from_secs(3600)).await.unwrap(), 0, "nothing is old yet");
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(store.outbox_prune(Duration::ZERO, Duration::from_secs(3600)).await.unwrap(), 2, "the sent and the dropped row");
    assert!(store.outbox_get("t1:0").await.unwrap().is_none());
    assert_eq!(store.outbox_dead_letters(10).await.unwrap().len(), 1, "a recent dead letter stays");
    assert_eq!(store.outbox_prune(Duration::ZERO, Duration::ZERO).await.unwrap(), 1);
    assert_eq!(store.outbox_lane_head("chat-1").await.unwrap().unwrap().key, "t3:0", "a part on its way is never pruned");
}

// --- usage ---

pub(crate) async fn usage_accumulates_per_model(store: Store) {
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

// --- session state ---

pub(crate) async fn the_first_prompt_snapshot_of_a_session_wins(store: Store) {
    let route = store.route_get_or_create("k", &source("u1"), "m").await.unwrap();
    assert_eq!(store.session_prompt_freeze(&route.session_id, "first").await.unwrap(), "first");
    assert_eq!(store.session_prompt_freeze(&route.session_id, "second").await.unwrap(), "first");
    let next = store.session_reset("k", &source("u1"), "m", "session_reset").await.unwrap();
    assert_eq!(store.session_prompt(&next.session_id).await.unwrap(), None, "a new session takes a new snapshot");
}

pub(crate) async fn prompt_tokens_of_an_unknown_session_are_zero(store: Store) {
    assert_eq!(store.session_prompt_tokens("missing").await.unwrap(), (0, 0));
    assert_eq!(store.session_prompt("missing").await.unwrap(), None);
    let s = store.route_get_or_create("k", &source("u1"), "m").await.unwrap().session_id;
    assert_eq!(store.session_prompt_tokens(&s).await.unwrap(), (0, 0));
    assert_eq!(store.session_usage(&s).await.unwrap(), UsageTotals::default(), "no calls yet");
}

pub(crate) async fn titles_are_unique_across_sessions(store: Store) {
    let a = store.route_get_or_create("ka", &source("a"), "m").await.unwrap().session_id;
    let b = store.route_get_or_create("kb", &source("b"), "m").await.unwrap().session_id;
    assert!(store.session_set_title(&a, "Trip planning").await.unwrap());
    assert!(store.session_set_title(&a, "Trip planning").await.unwrap(), "a session may set its own title again");
    assert!(!store.session_set_title(&b, "Trip planning").await.unwrap(), "another session has it");
    assert_eq!(store.session_get(&b).await.unwrap().unwrap().title, None);
    assert!(store.session_set_title(&a, "Trip, day two").await.unwrap());
    assert!(store.session_set_title(&b, "Trip planning").await.unwrap(), "a title given up is free again");
    assert_eq!(store.session_get(&a).await.unwrap().unwrap().title.as_deref(), Some("Trip, day two"));
}

pub(crate) async fn undo_soft_deletes_whole_turns(store: Store) {
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

pub(crate) async fn compression_rotates_to_a_child_session_with_lineage(store: Store) {
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

// --- turns ---

pub(crate) async fn opening_a_turn_stores_the_message_once_and_reads_only_what_is_new(store: Store) {
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

pub(crate) async fn a_known_history_that_changed_is_reported_stale(store: Store) {
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

// --- claims ---

pub(crate) async fn a_claim_is_exclusive_between_holders(store: Store) {
    let hour = Duration::from_secs(3600);
    assert_eq!(store.claim_holder("cron:daily").await.unwrap(), None);
    assert!(store.claim_take("cron:daily", "gateway-a", hour).await.unwrap());
    assert!(!store.claim_take("cron:daily", "gateway-b", hour).await.unwrap());
    assert_eq!(store.claim_holder("cron:daily").await.unwrap().as_deref(), Some("gateway-a"));
    assert!(store.claim_take("cron:weekly", "gateway-b", hour).await.unwrap(), "claims on other names are independent");
}

pub(crate) async fn an_expired_claim_can_be_taken_by_another(store: Store) {
    assert!(store.claim_take("job", "a", Duration::from_millis(1)).await.unwrap());
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(store.claim_holder("job").await.unwrap(), None, "an expired claim has no holder");
    assert!(store.claim_take("job", "b", Duration::from_secs(3600)).await.unwrap());
    assert_eq!(store.claim_holder("job").await.unwrap().as_deref(), Some("b"));
    assert!(!store.claim_release("job", "a").await.unwrap(), "the old holder lost it");
    assert_eq!(store.claim_holder("job").await.unwrap().as_deref(), Some("b"));
}

pub(crate) async fn retaking_a_claim_extends_it(store: Store) {
    assert!(store.claim_take("job", "a", Duration::from_millis(1)).await.unwrap());
    assert!(store.claim_take("job", "a", Duration::from_secs(3600)).await.unwrap(), "the holder may take it again");
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(!store.claim_take("job", "b", Duration::from_secs(3600)).await.unwrap(), "extended past the first expiry");
    assert_eq!(store.claim_holder("job").await.unwrap().as_deref(), Some("a"));
}

pub(crate) async fn only_the_holder_releases_a_claim(store: Store) {
    let hour = Duration::from_secs(3600);
    assert!(!store.claim_release("job", "a").await.unwrap(), "nothing to release");
    assert!(store.claim_take("job", "a", hour).await.unwrap());
    assert!(!store.claim_release("job", "b").await.unwrap());
    assert_eq!(store.claim_holder("job").await.unwrap().as_deref(), Some("a"));
    assert!(store.claim_release("job", "a").await.unwrap());
    assert_eq!(store.claim_holder("job").await.unwrap(), None);
    assert!(!store.claim_release("job", "a").await.unwrap(), "already released");
    assert!(store.claim_take("job", "b", hour).await.unwrap(), "a released claim is free at once");
}

pub(crate) async fn of_concurrent_takers_one_wins(store: Store) {
    let mut tasks = Vec::new();
    for i in 0..16 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move { store.claim_take("job", &format!("holder-{i}"), Duration::from_secs(3600)).await.unwrap() }));
    }
    let mut taken = 0;
    for t in tasks {
        taken += t.await.unwrap() as usize;
    }
    assert_eq!(taken, 1);
}

// --- leases and fenced cursors ---

pub(crate) async fn a_lease_has_one_holder_and_every_tenure_a_larger_token(store: Store) {
    let minute = Duration::from_secs(60);
    let first = store.lease_acquire("platform:telegram", "replica-a", minute).await.unwrap().expect("a free lease is taken");
    assert_eq!(first.holder, "replica-a");
    assert!(store.lease_acquire("platform:telegram", "replica-b", minute).await.unwrap().is_none(), "held by another");
    let again = store.lease_acquire("platform:telegram", "replica-a", minute).await.unwrap().expect("its holder extends it");
    assert_eq!((again.token, again.since), (first.token, first.since), "an extension is the same tenure");
    assert!(again.expires_at >= first.expires_at);
    let other = store.lease_acquire("platform:discord", "replica-b", minute).await.unwrap().expect("leases on other names are independent");
    assert_eq!(other.holder, "replica-b");
    let listed: Vec<(String, String)> = store.leases().await.unwrap().into_iter().map(|l| (l.name, l.holder)).collect();
    assert_eq!(
        listed,
        [("platform:discord".to_string(), "replica-b".to_string()), ("platform:telegram".to_string(), "replica-a".to_string())]
    );
}

pub(crate) async fn an_expired_lease_goes_to_a_standby_and_the_old_holder_cannot_renew(store: Store) {
    let old = store.lease_acquire("platform:telegram", "replica-a", Duration::from_millis(50)).await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(120)).await;
    assert!(
        !store.lease_renew("platform:telegram", "replica-a", old.token, Duration::from_secs(60)).await.unwrap(),
        "an expired tenure is over"
    );
    let new = store.lease_acquire("platform:telegram", "replica-b", Duration::from_secs(60)).await.unwrap().expect("a standby takes it");
    assert!(new.token > old.token, "the new tenure's token is larger: {} then {}", old.token, new.token);
    assert!(!store.lease_renew("platform:telegram", "replica-a", old.token, Duration::from_secs(60)).await.unwrap());
    assert!(!store.lease_release("platform:telegram", "replica-a", old.token).await.unwrap(), "nor can it end the new tenure");
    assert!(store.lease_renew("platform:telegram", "replica-b", new.token, Duration::from_secs(60)).await.unwrap());
    assert!(
        !store.lease_renew("platform:telegram", "replica-b", old.token, Duration::from_secs(60)).await.unwrap(),
        "a token names one tenure"
    );
}

pub(crate) async fn a_released_lease_is_free_at_once_and_its_next_tenure_is_newer(store: Store) {
    let hour = Duration::from_secs(3600);
    let first = store.lease_acquire("platform:slack", "replica-a", hour).await.unwrap().unwrap();
    assert!(store.lease_release("platform:slack", "replica-a", first.token).await.unwrap());
    assert!(!store.lease_release("platform:slack", "replica-a", first.token).await.unwrap(), "already released");
    let next = store.lease_acquire("platform:slack", "replica-b", hour).await.unwrap().expect("free without waiting for the TTL");
    assert!(next.token > first.token);
    assert!(store.lease_release("platform:slack", "replica-b", next.token).await.unwrap());
    let back = store.lease_acquire("platform:slack", "replica-a", hour).await.unwrap().expect("the first holder may take it again");
    assert!(back.token > next.token, "coming back is a new tenure too");
}

pub(crate) async fn a_cursor_moves_only_under_the_live_tenure_and_never_back(store: Store) {
    let lease = "platform:telegram";
    assert!(!store.cursor_put(lease, 1, "telegram:offset", "5").await.unwrap(), "no lease, no write");
    let old = store.lease_acquire(lease, "replica-a", Duration::from_millis(50)).await.unwrap().unwrap();
    assert!(store.cursor_put(lease, old.token, "telegram:offset", "10").await.unwrap());
    assert_eq!(store.cursor_get("telegram:offset").await.unwrap().as_deref(), Some("10"));
    tokio::time::sleep(Duration::from_millis(120)).await;
    assert!(!store.cursor_put(lease, old.token, "telegram:offset", "11").await.unwrap(), "an expired tenure writes nothing");
    let new = store.lease_acquire(lease, "replica-b", Duration::from_secs(60)).await.unwrap().unwrap();
    assert!(store.cursor_put(lease, new.token, "telegram:offset", "20").await.unwrap());
    assert!(!store.cursor_put(lease, old.token, "telegram:offset", "12").await.unwrap(), "the paused holder, woken, is fenced out");
    assert_eq!(store.cursor_get("telegram:offset").await.unwrap().as_deref(), Some("20"));
    assert_eq!(store.cursor_get("discord:sequence").await.unwrap(), None);
}

pub(crate) async fn hostile_cursor_names_and_values_are_stored_as_data(store: Store) {
    let lease = "connection:it's \"quoted\"; DROP TABLE leases; --";
    let held = store.lease_acquire(lease, "replica-a'--", Duration::from_secs(60)).await.unwrap().unwrap();
    let name = format!("{lease}:x'); DELETE FROM cursors; --");
    let value = "'\"\\%_ $1 ?1 ;-- \u{202e}ﬁ😀\r\n\t\u{7f}";
    assert!(store.cursor_put(lease, held.token, &name, value).await.unwrap());
    assert_eq!(store.cursor_get(&name).await.unwrap().as_deref(), Some(value));
    // The largest value the adapters' contract lets through round-trips whole.
    let largest = "é".repeat(hermes_adapter::cursors::MAX_CURSOR_VALUE_BYTES / 2);
    assert!(store.cursor_put(lease, held.token, "big", &largest).await.unwrap());
    assert_eq!(store.cursor_get("big").await.unwrap().as_deref(), Some(largest.as_str()));
    // A wildcard in a name matches only itself.
    assert_eq!(store.cursor_get(&format!("{lease}:%")).await.unwrap(), None);
    assert_eq!(store.leases().await.unwrap().len(), 1);
    assert_eq!(store.leases().await.unwrap()[0].name, lease);
}

pub(crate) async fn of_concurrent_lease_takers_one_wins(store: Store) {
    let takers = (0..16).map(|i| {
        let store = store.clone();
        tokio::spawn(async move { store.lease_acquire("platform:matrix", &format!("replica-{i}"), Duration::from_secs(60)).await.unwrap() })
    });
    let mut won = Vec::new();
    for taker in takers {
        won.extend(taker.await.unwrap());
    }
    assert_eq!(won.len(), 1, "{won:?}");
    assert_eq!(store.leases().await.unwrap()[0].holder, won[0].holder);
}

// --- approvals ---

fn pending(id: &str, session_key: &str, age_secs: i64) -> PendingApproval {
    PendingApproval {
        id: id.into(),
        session_key: session_key.into(),
        target: hermes_adapter::ChatTarget { platform: Platform::new("telegram"), chat_id: "42".into(), thread_id: Some("7".into()) },
        command: format!("rm -rf /srv/{id}"),
        created_at: chrono::Utc::now() - chrono::Duration::seconds(age_secs),
    }
}

pub(crate) async fn an_open_approval_closes_once(store: Store) {
    store.approval_open(&pending("a1", "k", 0)).await.unwrap();
    assert!(store.approval_open(&pending("a1", "k", 0)).await.is_err(), "an id is never reused");
    assert!(store.approval_close("a1", "approved").await.unwrap());
    assert!(!store.approval_close("a1", "denied").await.unwrap(), "an answered approval stays answered");
    assert!(!store.approval_close("nope", "denied").await.unwrap());
    assert!(store.approval_close_orphans("denied_by_restart", None).await.unwrap().is_empty(), "nothing is left open");
}

pub(crate) async fn approvals_left_open_by_a_crash_are_closed_oldest_first(store: Store) {
    store.approval_open(&pending("new", "k2", 5)).await.unwrap();
    store.approval_open(&pending("old", "k1", 60)).await.unwrap();
    store.approval_open(&pending("done", "k1", 90)).await.unwrap();
    store.approval_close("done", "approved").await.unwrap();
    let orphans = store.approval_close_orphans("denied_by_restart", None).await.unwrap();
    let ids: Vec<&str> = orphans.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["old", "new"]);
    assert_eq!(orphans[0].target.thread_id.as_deref(), Some("7"), "the chat to tell is kept whole");
    assert_eq!(orphans[0].command, "rm -rf /srv/old");
    assert!(store.approval_close_orphans("denied_by_restart", None).await.unwrap().is_empty(), "each is reported once");
    assert!(!store.approval_close("new", "approved").await.unwrap(), "a restart's denial is final");
}

pub(crate) async fn a_platform_taken_over_closes_only_its_own_approvals(store: Store) {
    store.approval_open(&pending("tg", "k1", 5)).await.unwrap();
    let mut on_discord = pending("dc", "k2", 5);
    on_discord.target.platform = Platform::new("discord");
    store.approval_open(&on_discord).await.unwrap();
    let orphans = store.approval_close_orphans("denied_by_restart", Some("discord")).await.unwrap();
    assert_eq!(orphans.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(), ["dc"]);
    assert!(store.approval_close("tg", "approved").await.unwrap(), "another platform's approval still waits for its answer");
}
