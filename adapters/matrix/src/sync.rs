//! The sync loop: our own loop over `sync_once`, resuming from the `next_batch` token in the
//! state folder. matrix-sdk's store saves its own token before anyone has looked at the events,
//! so that one is never used: a crash between the two would lose messages. Ours is written only
//! after every event of the response went through `ctx.accept` (the gateway's durable inbox,
//! which deduplicates on `matrix:<event id>`), so a crash at any point means the next run syncs
//! from the last fully accepted token and the inbox drops what it already has. The token goes
//! through the gateway's fenced cursors first ([`crate::position`]): with replicas sharing a
//! store, a replica whose lease is over moves no token and stops, and the one taking over
//! resumes from the shared token.
//!
//! Per response: invites (joined when the gateway would let the inviter in, or, where the
//! gateway offers pairing, when a stranger invites the bot to a DM: their messages then reach
//! only the pairing code; any other stranger's invite is rejected), then messages whose room key
//! came late ([`crate::undecryptable`]), then each joined room's timeline in order (a limited
//! one completed from `/messages` by [`crate::gaps`]; messages, reactions on approval prompts,
//! undecryptable messages), then the token. A stranger's reaction on a prompt is refused with a
//! reply in the prompt's thread. On the very first start the backlog is skipped (history is not
//! answered); in a room the bot just joined, what came before its join is history too. Failures
//! retry with backoff; a rejected credential parks the adapter naming the variable to fix.

use crate::MatrixAdapter;
use crate::inbound::{self, Gate, Incoming, Me, Message, RoomFacts};
use crate::login;
use crate::media;
use crate::reactions::{self, Prompt};
use crate::undecryptable::{self, Pending, Reported, Waiting};
use futures::Stream;
use futures::{FutureExt, StreamExt};
use hermes_adapter::untrusted;
use hermes_adapter::{
    AcceptError, AdapterContext, AdapterError, ChatType, CursorWrite, InboundEvent, MessageKind, Platform, SessionSource,
};
use matrix_sdk::config::SyncSettings;
use matrix_sdk::deserialized_responses::{TimelineEvent, TimelineEventKind};
use matrix_sdk::ruma::api::client::filter::FilterDefinition;
use matrix_sdk::ruma::api::client::sync::sync_events::v3::Filter;
use matrix_sdk::ruma::{OwnedEventId, OwnedRoomId};
use matrix_sdk::sync::SyncResponse;
use matrix_sdk::{Client, Room};
use serde_json::Value;
use std::time::Duration;

/// Consecutive failed syncs before the run ends and the supervisor rebuilds the client.
const FAILURES_BEFORE_RESTART: u32 = 6;
/// Events per room per sync; a busier room than this between two syncs is a "limited" timeline,
/// whose gap [`crate::gaps`] fills.
const TIMELINE_LIMIT: u32 = 100;

/// What the loop remembers across syncs: the undecryptable sessions reported, and the messages
/// waiting for their keys.
struct Memory {
    reported: Reported,
    waiting: Waiting,
}

/// What one sync amounts to: the events for the inbox, in order, and the stranger's reactions to
/// refuse once the inbox has them.
#[derive(Default)]
struct Batch {
    events: Vec<InboundEvent>,
    refusals: Vec<Refusal>,
    /// Late messages read now: waited for no more once the inbox has them.
    read_late: Vec<String>,
}

/// What every step of reading a sync needs: the adapter, the gateway's context, the client and
/// who the bot is.
#[derive(Clone, Copy)]
struct Scope<'a> {
    adapter: &'a MatrixAdapter,
    ctx: &'a AdapterContext,
    client: &'a Client,
    me: &'a Me,
}

/// A reaction on a prompt by someone the gateway does not allow.
struct Refusal {
    room: Room,
    prompt: Prompt,
    presser: String,
    reaction: String,
}

fn sync_filter() -> Option<Filter> {
    let definition: FilterDefinition = serde_json::from_value(serde_json::json!({"room": {"timeline": {"limit": TIMELINE_LIMIT}}})).ok()?;
    Some(Filter::FilterDefinition(definition))
}

pub(crate) async fn run(adapter: &MatrixAdapter, ctx: AdapterContext) -> Result<(), AdapterError> {
    let connected = tokio::select! {
        connected = login::connect(&adapter.settings, &adapter.state) => connected?,
        _ = ctx.shutdown.cancelled() => return Ok(()),
    };
    let client = connected.client;
    let Some(user_id) = client.user_id().map(|u| u.to_string()) else {
        return Err(AdapterError::retryable("matrix_setup", "the client has no user after login"));
    };
    adapter.set_client(Some(client.clone()));
    let display_name = client.account().get_display_name().await.ok().flatten();
    let me = Me { user_id, display_name };
    if let Some(key) = &adapter.settings.recovery_key {
        login::recover(&client, key).await;
    }
    let mut memory =
        Memory { reported: Reported::load(adapter.state.undecryptable_file()), waiting: Waiting::load(adapter.state.waiting_file()) };
    // Subscribed before the first sync, so no key that sync brings is missed.
    let mut keys = client.encryption().room_keys_received_stream().await.map(Box::pin);
    // The first sync retries every waiting message: their keys may have come in an earlier run.
    let mut retry_every_waiting = !memory.waiting.is_empty();
    let resumed = crate::position::resume(&adapter.state, ctx.cursors()).await?;
    let mut token = resumed.token;
    // Taken over from another replica: the rooms' members come with the first sync, so a DM is
    // known as one (the timeline still starts at the token).
    let mut full_state = resumed.taken_over;
    tracing::info!(user = %me.user_id, resume = token.is_some(), taken_over = full_state, "Matrix connected");
    let mut failures = 0u32;
    loop {
        let mut settings = SyncSettings::new();
        if let Some(filter) = sync_filter() {
            settings = settings.filter(filter);
        }
        settings = match &token {
            Some(token) => settings.token(token.clone()).timeout(adapter.settings.sync_timeout).full_state(full_state),
            // The first sync only learns where "now" is.
            None => settings.timeout(Duration::ZERO),
        };
        let response = tokio::select! {
            response = client.sync_once(settings) => response,
            _ = ctx.shutdown.cancelled() => return Ok(()),
        };
        let response = match response {
            Ok(response) => response,
            Err(e) => {
                if crate::errors::is_auth_failure(&e) {
                    ctx.health.mark_disconnected();
                    if matches!(adapter.settings.login, crate::settings::Login::Password(_)) {
                        // The saved token was revoked (a logout elsewhere): log in again next run.
                        let _ = adapter.state.forget_session();
                        return Err(AdapterError::retryable(
                            "session_expired",
                            format!("the saved Matrix session was rejected ({e}); logging in again"),
                        ));
                    }
                    return Err(crate::errors::sync_failure(&e, connected.credential_var));
                }
                failures += 1;
                ctx.health.set_degraded(Some(format!("sync failing: {e}")));
                if failures >= FAILURES_BEFORE_RESTART {
                    return Err(crate::errors::sync_failure(&e, connected.credential_var));
                }
                let backoff = Duration::from_secs((1u64 << failures.min(5)).min(30));
                tracing::warn!(attempt = failures, "Matrix sync failed ({e}); retrying in {backoff:?}");
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => continue,
                    _ = ctx.shutdown.cancelled() => return Ok(()),
                }
            }
        };
        if failures > 0 {
            ctx.health.set_degraded(None);
        }
        failures = 0;
        full_state = false;
        ctx.health.mark_connected();
        handle_invites(&client, &ctx, &response, &me).await;
        let arrived = keys_arrived(&mut keys, |k| (k.room_id.to_string(), k.session_id.clone()));
        if let Some(since) = token.as_deref() {
            let late = match arrived {
                _ if std::mem::take(&mut retry_every_waiting) => memory.waiting.all(),
                Arrived::Keys(keys) => memory.waiting.ready(&keys),
                Arrived::Unknown => memory.waiting.all(),
            };
            let mut batch = Batch::default();
            let scope = Scope { adapter, ctx: &ctx, client: &client, me: &me };
            read_late(scope, &late, &mut batch).await;
            collect(scope, &response, since, &mut memory, &mut batch).await?;
            match ctx.accept_all(std::mem::take(&mut batch.events)).await {
                Ok(_) => {}
                Err(AcceptError::ShuttingDown) => return Ok(()),
                Err(e) => {
                    return Err(AdapterError::retryable(
                        "inbox",
                        format!("the inbox refused Matrix events ({e}); they will be synced again"),
                    ));
                }
            }
            memory.waiting.forget(&batch.read_late);
            for refusal in batch.refusals {
                refuse(refusal).await;
            }
        } else {
            tracing::info!("first Matrix start: earlier messages are not answered");
        }
        if crate::position::record(&adapter.state, ctx.cursors(), &response.next_batch).await? == CursorWrite::Fenced {
            // Another replica syncs now, from the token this one last recorded.
            return Err(AdapterError::fenced());
        }
        token = Some(response.next_batch);
    }
}

const PLATFORM: &str = "matrix";

fn source(room_id: &str, chat_type: ChatType, sender: &str) -> SessionSource {
    SessionSource::new(Platform::new(PLATFORM), room_id, chat_type).with_user(sender)
}

/// What to do with an invite, and why (for the log).
#[derive(Debug, PartialEq, Eq)]
enum Invite {
    Join(&'static str),
    Reject(&'static str),
}

/// An allowed user's invite is joined. A stranger's is joined only when it is to a DM and the
/// gateway offers pairing on Matrix: the bot is there to hand out the code, and nothing the
/// stranger writes reaches the model (the router refuses it) until the operator approves.
fn invite_decision(allowed: bool, direct: bool, pairing: bool) -> Invite {
    match (allowed, direct, pairing) {
        (true, _, _) => Invite::Join("an allowed user invited the bot"),
        (false, true, true) => Invite::Join("a stranger's DM, to hand out a pairing code"),
        (false, false, true) => Invite::Reject("only a DM invite is accepted for pairing"),
        (false, _, false) => Invite::Reject("Matrix names its users, so strangers are not offered pairing"),
    }
}

/// Which room keys arrived since the last look.
enum Arrived {
    /// (room, megolm session) of each key.
    Keys(Vec<(String, String)>),
    /// Some were missed (the stream lagged, or there is none): assume any may have come.
    Unknown,
}

/// The keys the crypto store reported since the last call, without waiting for more.
fn keys_arrived<S, K, E>(keys: &mut Option<S>, fields: impl Fn(&K) -> (String, String)) -> Arrived
where
    S: Stream<Item = Result<Vec<K>, E>> + Unpin,
{
    // Without a crypto store no key ever arrives.
    let Some(stream) = keys else { return Arrived::Keys(Vec::new()) };
    let mut arrived = Vec::new();
    while let Some(Some(update)) = stream.next().now_or_never() {
        match update {
            Ok(infos) => arrived.extend(infos.iter().map(&fields)),
            Err(_) => return Arrived::Unknown,
        }
    }
    Arrived::Keys(arrived)
}

/// Join the rooms allowed users invited the bot to; reject (leave) the others.
async fn handle_invites(client: &Client, ctx: &AdapterContext, response: &SyncResponse, me: &Me) {
    for (room_id, invite) in &response.rooms.invited {
        let member = invite.invite_state.events.iter().filter_map(|raw| serde_json::from_str::<Value>(raw.json().get()).ok()).find(|e| {
            e.get("type").and_then(Value::as_str) == Some("m.room.member")
                && e.get("state_key").and_then(Value::as_str) == Some(me.user_id.as_str())
        });
        let inviter = member.as_ref().and_then(|m| m.get("sender")).and_then(Value::as_str).unwrap_or("").to_string();
        let direct = member.as_ref().and_then(|m| m.pointer("/content/is_direct")).and_then(Value::as_bool).unwrap_or(false);
        let chat_type = if direct { ChatType::Dm } else { ChatType::Group };
        let allowed = !inviter.is_empty() && ctx.sender_allowed(&source(room_id.as_str(), chat_type, &inviter));
        let Some(room) = client.get_room(room_id) else { continue };
        let why = match invite_decision(allowed, direct, !inviter.is_empty() && ctx.offers_pairing(PLATFORM)) {
            Invite::Join(why) => why,
            Invite::Reject(why) => {
                tracing::warn!(room = %room_id, inviter, "rejected an invite from a user the gateway does not allow ({why})");
                if let Err(e) = room.leave().await {
                    tracing::warn!(room = %room_id, "could not reject the invite: {e}");
                }
                continue;
            }
        };
        match room.join().await {
            Ok(()) => tracing::info!(room = %room_id, inviter, "joined a room: {why}"),
            Err(e) => tracing::warn!(room = %room_id, inviter, "could not join a room ({why}): {e}"),
        }
    }
}

/// Everything of one response the gateway must hear about, in timeline order, added to `batch`.
/// A gap of a limited timeline that cannot be read fails the sync: the token must not move past
/// events nobody has seen.
async fn collect(
    scope: Scope<'_>,
    response: &SyncResponse,
    since: &str,
    memory: &mut Memory,
    batch: &mut Batch,
) -> Result<(), AdapterError> {
    let Scope { client, me, .. } = scope;
    for (room_id, update) in &response.rooms.joined {
        let Some(room) = client.get_room(room_id) else { continue };
        let mut timeline = Vec::new();
        if update.timeline.limited {
            timeline = crate::gaps::missed(&room, update.timeline.prev_batch.as_deref(), since).await.map_err(|e| {
                AdapterError::retryable("matrix_gap", format!("could not fetch the messages a limited sync of {room_id} left out: {e}"))
            })?;
        }
        timeline.extend(update.timeline.events.iter().cloned());
        let mut from_room = Batch::default();
        let mut unreadable = Vec::new();
        for event in &timeline {
            let Ok(json) = serde_json::from_str::<Value>(event.raw().json().get()) else { continue };
            if is_own_join(&json, me) {
                // What came before the bot joined is history, not a question to it.
                from_room = Batch::default();
                unreadable.clear();
                continue;
            }
            if let TimelineEventKind::UnableToDecrypt { utd_info, .. } = &event.kind {
                report_undecryptable(client, &room, event, utd_info.session_id.as_deref(), me, &mut memory.reported).await;
                if let (Some(session), Some(id)) = (utd_info.session_id.clone(), event.event_id()) {
                    unreadable.push((id.to_string(), session));
                }
                continue;
            }
            incoming(scope, &room, &json, &mut from_room).await;
        }
        for (event_id, session) in unreadable {
            memory.waiting.keep(room_id.as_str(), &event_id, &session);
        }
        batch.events.append(&mut from_room.events);
        batch.refusals.append(&mut from_room.refusals);
    }
    Ok(())
}

/// A timeline event the bot can read, into `batch` when the gateway must hear of it.
async fn incoming(scope: Scope<'_>, room: &Room, json: &Value, batch: &mut Batch) {
    let Scope { adapter, ctx, client, me } = scope;
    match inbound::parse(json, &me.user_id) {
        Incoming::Message(msg) => {
            if let Some(event) = message_event(adapter, ctx, client, room, me, msg).await {
                batch.events.push(event);
            }
        }
        Incoming::Reaction { event_id, sender, target, key } => {
            if let Some((event, prompt)) = button_press(adapter, room, &event_id, &sender, &target, &key).await {
                // Stored like any press (the router refuses it); the presser is told why.
                if !ctx.sender_allowed(&event.source) {
                    batch.refusals.push(Refusal { room: room.clone(), prompt, presser: sender, reaction: event_id });
                }
                batch.events.push(event);
            }
        }
        Incoming::Ignored(why) => tracing::trace!(room = %room.room_id(), "ignored a Matrix event: {why}"),
    }
}

/// The waiting messages whose key has come, read again; those now readable go into `batch`.
async fn read_late(scope: Scope<'_>, late: &[Pending], batch: &mut Batch) {
    for pending in late {
        let (Ok(room_id), Ok(event_id)) =
            (OwnedRoomId::try_from(pending.room_id.as_str()), OwnedEventId::try_from(pending.event_id.as_str()))
        else {
            batch.read_late.push(pending.event_id.clone());
            continue;
        };
        let Some(room) = scope.client.get_room(&room_id) else { continue };
        let event = match room.event(&event_id, None).await {
            Ok(event) => event,
            Err(e) => {
                tracing::warn!(room = %room_id, event = %event_id, "could not fetch a message whose key arrived: {e}; retried with the next key");
                continue;
            }
        };
        if matches!(event.kind, TimelineEventKind::UnableToDecrypt { .. }) {
            tracing::debug!(room = %room_id, event = %event_id, "a key arrived, but not this message's: it keeps waiting");
            continue;
        }
        let Ok(json) = serde_json::from_str::<Value>(event.raw().json().get()) else { continue };
        tracing::info!(room = %room_id, event = %event_id, "a message decrypted after its key arrived late is answered now");
        incoming(scope, &room, &json, batch).await;
        batch.read_late.push(pending.event_id.clone());
    }
}

/// Tell a stranger who reacted to a prompt that they may not; its transaction id (from the
/// reaction) makes a resend after a crash or a redelivered sync harmless.
async fn refuse(refusal: Refusal) {
    let content = reactions::not_allowed_content(&refusal.prompt, &refusal.presser);
    let txn = crate::adapter::txn_id(&format!("not-allowed:{}", refusal.reaction));
    if let Err(e) = refusal.room.send_raw("m.room.message", content).with_transaction_id(&txn).await {
        tracing::warn!(room = %refusal.room.room_id(), presser = refusal.presser, "could not tell a stranger their reaction is not allowed: {e}");
    }
}

fn is_own_join(json: &Value, me: &Me) -> bool {
    json.get("type").and_then(Value::as_str) == Some("m.room.member")
        && json.get("state_key").and_then(Value::as_str) == Some(me.user_id.as_str())
        && json.pointer("/content/membership").and_then(Value::as_str) == Some("join")
        && json.pointer("/unsigned/prev_content/membership").and_then(Value::as_str) != Some("join")
}

/// A DM: marked direct, or just the bot and one other person.
async fn is_dm(room: &Room) -> bool {
    room.is_direct().await.unwrap_or(false) || joined_members(room).await == 2
}

/// How many are joined. The sync's room summary carries the count only when it changed (and
/// Synapse sends summaries only with lazy-loaded members), so a room known from before the first
/// sync has none: then the member events in the store are counted.
async fn joined_members(room: &Room) -> u64 {
    match room.joined_members_count() {
        0 => room.members_no_sync(matrix_sdk::RoomMemberships::JOIN).await.map(|m| m.len() as u64).unwrap_or(0),
        known => known,
    }
}

fn gate(adapter: &MatrixAdapter) -> Gate {
    Gate {
        require_mention: adapter.settings.require_mention,
        thread_require_mention: adapter.settings.thread_require_mention,
        free_response_rooms: adapter.settings.free_response_rooms.clone(),
        auto_thread: adapter.settings.auto_thread,
    }
}

/// Whether the bot takes part in the thread at `root`: remembered, or its root mentions the bot
/// or is the bot's.
async fn bot_in_thread(adapter: &MatrixAdapter, room: &Room, root: &str, me: &Me) -> bool {
    if adapter.takes_part(room.room_id().as_str(), root) {
        return true;
    }
    let Ok(root_id) = OwnedEventId::try_from(root) else { return false };
    let Ok(event) = room.event(&root_id, None).await else { return false };
    let Ok(json) = serde_json::from_str::<Value>(event.raw().json().get()) else { return false };
    let takes_part = json.get("sender").and_then(Value::as_str) == Some(me.user_id.as_str())
        || matches!(inbound::parse(&json, &me.user_id), Incoming::Message(m) if me.is_mentioned(&m));
    if takes_part {
        adapter.join_thread(room.room_id().as_str(), root);
    }
    takes_part
}

async fn message_event(
    adapter: &MatrixAdapter,
    ctx: &AdapterContext,
    client: &Client,
    room: &Room,
    me: &Me,
    msg: Message,
) -> Option<InboundEvent> {
    let room_id = room.room_id().to_string();
    let in_thread = match &msg.thread_root {
        Some(root) => bot_in_thread(adapter, room, root, me).await,
        None => false,
    };
    let facts = RoomFacts { room_id: room_id.clone(), is_dm: is_dm(room).await, bot_in_thread: in_thread };
    let Some(route) = inbound::route(&msg, &facts, me, &gate(adapter)) else {
        tracing::debug!(room = %room_id, dm = facts.is_dm, "a room message that does not mention the bot: not answered");
        return None;
    };
    if let Some(thread) = &route.thread_id {
        adapter.join_thread(&room_id, thread);
    }
    let mut source = source(&room_id, route.chat_type, &msg.sender);
    source.thread_id = route.thread_id.clone();
    source.chat_name = room.name();
    if let Ok(user) = matrix_sdk::ruma::OwnedUserId::try_from(msg.sender.as_str())
        && let Ok(Some(member)) = room.get_member_no_sync(&user).await
    {
        source.user_display_name = member.display_name().map(str::to_string);
    }
    let own = if route.mentioned { me.strip_mention(&msg.body) } else { msg.body.clone() };
    let own = inbound::command_text(&own, &adapter.settings.command_prefix, &adapter.settings.commands);
    let mut kind = MessageKind::Text;
    let mut attachments = Vec::new();
    let mut text = match &msg.in_reply_to {
        Some(replied) => match replied_text(room, replied, me).await {
            Some((author, words)) => untrusted::with_reply_context(Some(&author), &words, &own),
            None => own,
        },
        None => own,
    };
    if let Some(attachment) = &msg.attachment {
        kind = attachment.kind;
        if ctx.sender_allowed(&source) {
            // Saved or refused, it is reported as an attachment; the gateway words a refusal.
            let saved = fetch(adapter, client, attachment, &msg.event_id).await;
            if let Some(refusal) = &saved.refused {
                tracing::info!(event = %msg.event_id, kind = ?attachment.kind, "an attachment was not saved: {refusal}");
            }
            attachments.push(saved);
        } else {
            // A stranger's upload costs nothing: not fetched (the gateway denies the event).
            let note = "[an attachment, not downloaded]";
            text = if text.trim().is_empty() { note.to_string() } else { format!("{text}\n{note}") };
        }
    }
    let mut event = InboundEvent::text(format!("matrix:{}", msg.event_id), source, inbound::bounded(&text));
    event.message_id = Some(msg.event_id.clone());
    event.kind = kind;
    event.attachments = attachments;
    Some(event)
}

/// An allowed sender's attachment, fetched from the configured homeserver as the bot.
async fn fetch(adapter: &MatrixAdapter, client: &Client, attachment: &inbound::Attachment, event_id: &str) -> hermes_adapter::Attachment {
    let token = client.access_token().unwrap_or_default();
    let server = media::Homeserver { base: &adapter.settings.homeserver, token: &token, idle: adapter.settings.request_timeout };
    media::save(client, &server, &adapter.settings, attachment, event_id).await
}

/// Who wrote the replied-to message and what it says (the bot's own as "the assistant").
async fn replied_text(room: &Room, event_id: &str, me: &Me) -> Option<(String, String)> {
    let id = OwnedEventId::try_from(event_id).ok()?;
    let event = room.event(&id, None).await.ok()?;
    let json: Value = serde_json::from_str(event.raw().json().get()).ok()?;
    let sender = json.get("sender").and_then(Value::as_str)?;
    let body = json.pointer("/content/body").and_then(Value::as_str)?;
    let author = if sender == me.user_id { "the assistant".to_string() } else { sender.to_string() };
    Some((author, body.to_string()))
}

/// A reaction on one of the bot's approval prompts, as the press of the button it stands for
/// (and the prompt).
async fn button_press(
    adapter: &MatrixAdapter,
    room: &Room,
    event_id: &str,
    sender: &str,
    target: &str,
    key: &str,
) -> Option<(InboundEvent, Prompt)> {
    let (prompt, choice) = adapter.prompts.pick(target, key)?;
    if prompt.room_id != room.room_id().as_str() {
        return None;
    }
    let chat_type = match (is_dm(room).await, &prompt.thread_id) {
        (_, Some(_)) => ChatType::Thread,
        (true, None) => ChatType::Dm,
        (false, None) => ChatType::Group,
    };
    let mut source = source(&prompt.room_id, chat_type, sender);
    source.thread_id = prompt.thread_id.clone();
    source.chat_name = room.name();
    let mut event = InboundEvent::text(format!("matrix:{event_id}"), source, choice.data);
    event.kind = MessageKind::ButtonPress;
    event.message_id = Some(prompt.event_id.clone());
    Some((event, prompt))
}

async fn report_undecryptable(
    client: &Client,
    room: &Room,
    event: &TimelineEvent,
    session: Option<&str>,
    me: &Me,
    reported: &mut Reported,
) {
    let sender = event.sender().map(|s| s.to_string()).unwrap_or_else(|| "someone".to_string());
    if sender == me.user_id {
        return;
    }
    let room_id: OwnedRoomId = room.room_id().to_owned();
    let session = session.unwrap_or("unknown session");
    let event_id = event.event_id().map(|e| e.to_string()).unwrap_or_default();
    tracing::warn!(room = %room_id, sender, event = event_id, session, "could not decrypt a Matrix message (the bot's device has no key for it)");
    if !reported.first_time(room_id.as_str(), session) {
        return;
    }
    let device = client.device_id().map(|d| d.to_string()).unwrap_or_default();
    let text = undecryptable::notice(&sender, &device);
    let content = serde_json::json!({"msgtype": "m.notice", "body": text, "m.mentions": {}});
    // A notice, so other bots do not answer it; its txn id makes a resend after a crash harmless.
    let txn = crate::adapter::txn_id(&format!("utd:{room_id}:{session}"));
    if let Err(e) = room.send_raw("m.room.message", content).with_transaction_id(&txn).await {
        tracing::warn!(room = %room_id, "could not tell the room a message was undecryptable: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_strangers_invite_is_joined_only_to_a_dm_and_only_where_pairing_is_offered() {
        assert!(matches!(invite_decision(true, false, false), Invite::Join(_)), "an allowed user's group invite");
        assert!(matches!(invite_decision(false, true, true), Invite::Join(_)), "a stranger's DM, for pairing");
        assert_eq!(invite_decision(false, false, true), Invite::Reject("only a DM invite is accepted for pairing"));
        assert!(matches!(invite_decision(false, true, false), Invite::Reject(_)), "no pairing, no stranger");
    }

    #[test]
    fn arrived_keys_are_drained_without_waiting_and_a_lag_means_any() {
        let mut keys = Some(futures::stream::iter(vec![Ok::<_, ()>(vec![("!r", "s1"), ("!r", "s2")]), Ok(vec![("!q", "s3")])]));
        let fields = |k: &(&str, &str)| (k.0.to_string(), k.1.to_string());
        let Arrived::Keys(got) = keys_arrived(&mut keys, fields) else { panic!("keys were reported") };
        assert_eq!(got.len(), 3);
        let mut lagged = Some(futures::stream::iter(vec![Err::<Vec<(&str, &str)>, ()>(())]));
        assert!(matches!(keys_arrived(&mut lagged, fields), Arrived::Unknown));
        let mut pending = Some(futures::stream::pending::<Result<Vec<(&str, &str)>, ()>>());
        assert!(matches!(keys_arrived(&mut pending, fields), Arrived::Keys(k) if k.is_empty()), "an idle stream does not block");
    }
}
