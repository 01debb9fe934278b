//! The Socket Mode connection, driven here over tokio-tungstenite (the WebSocket crate
//! slack-morphism itself uses) with slack-morphism's Web API client and event models.
//! slack-morphism's own listener acknowledges correctly but hides the connection: it reconnects
//! silently, reports no disconnect, notices missing pongs only after 75 s, and opens two sockets
//! per token. A daemon must say when it is down, so this module keeps the socket itself:
//!
//! * **Acknowledged after the inbox.** Each envelope is acked only once [`AdapterContext::accept`]
//!   stored its event (or it was judged not for the bot); an envelope whose event could not be
//!   stored is left unacked, and Slack delivers it again.
//! * **In order.** Envelopes are handled one at a time in arrival order.
//! * **Once.** A redelivered envelope carries the same event, which maps to the same event id;
//!   the inbox drops the second copy (and a local set skips the work before that).
//! * **Alive or rebuilt.** The socket is pinged; when pongs and frames stop for
//!   `missed_pings` intervals, when Slack sends `disconnect`, or when the socket closes, a new
//!   one is opened (for `disconnect`, before the old one is closed, as Slack advises). Health
//!   shows degraded until the new socket's `hello`; a socket that cannot be reopened within
//!   `RECONNECT_GRACE` ends `run` with a retryable error and the supervisor rebuilds the client.

use crate::adapter::SlackAdapter;
use crate::inbound::{self, Gate, Identity, Inbound, Said, ThreadState};
use crate::web::ClientError;
use futures::{SinkExt, StreamExt};
use hermes_adapter::{AcceptError, AdapterContext, AdapterError, InboundEvent};
use serde_json::{Value, json};
use slack_morphism::prelude::*;
use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message as Frame;
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// How long the socket may stay unopenable before the supervisor takes over.
const RECONNECT_GRACE: Duration = Duration::from_secs(60);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// Ids of handled events, to skip a redelivery before it costs an API call.
const RECENT_IDS: usize = 4096;

pub(crate) async fn run(adapter: &SlackAdapter, ctx: AdapterContext) -> Result<(), AdapterError> {
    let me = identify(adapter).await?;
    adapter.set_identity(me.clone());
    let gate = adapter.gate();
    let mut socket = open(adapter).await?;
    let mut conn = Connection { me, gate, recent: Recent::default(), last_heard: Instant::now(), refusal: None, refused: HashMap::new() };
    let mut ping = tokio::time::interval(adapter.settings.ping_interval);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let silence_limit = adapter.settings.ping_interval * adapter.settings.missed_pings.max(1);
    let outcome = loop {
        tokio::select! {
            _ = ctx.shutdown.cancelled() => break Ok(()),
            frame = socket.next() => {
                let replaced = match frame {
                    Some(Ok(frame)) => {
                        conn.last_heard = Instant::now();
                        ctx.health.progress();
                        match conn.take(adapter, &ctx, &mut socket, frame).await {
                            Ok(Next::Stay) => None,
                            Ok(Next::Refresh) => Some("Slack asked for a new connection (disconnect)"),
                            Err(e) => break Err(e),
                        }
                    }
                    Some(Err(e)) => {
                        tracing::warn!("the Slack socket failed: {e}");
                        Some("the Slack socket failed")
                    }
                    None => Some("Slack closed the socket"),
                };
                if let Some(why) = replaced {
                    match reopen(adapter, &ctx, why).await {
                        Ok(fresh) => {
                            let _ = socket.close(None).await;
                            socket = fresh;
                            conn.last_heard = Instant::now();
                        }
                        Err(e) => break Err(e),
                    }
                }
            }
            _ = ping.tick() => {
                if conn.last_heard.elapsed() > silence_limit {
                    let why = format!("no pong or frame from Slack for {:?}", conn.last_heard.elapsed());
                    tracing::warn!("{why}; opening a new socket");
                    match reopen(adapter, &ctx, "pings went unanswered").await {
                        Ok(fresh) => {
                            socket = fresh;
                            conn.last_heard = Instant::now();
                        }
                        Err(e) => break Err(e),
                    }
                } else if let Err(e) = socket.send(Frame::Ping(Vec::from(*b"hermes").into())).await {
                    tracing::debug!("pinging Slack failed: {e}");
                }
            }
        }
    };
    ctx.health.mark_disconnected();
    let _ = tokio::time::timeout(Duration::from_secs(2), socket.close(None)).await;
    outcome
}

/// Who the bot is; a refused token ends here for good (until the owner fixes it).
async fn identify(adapter: &SlackAdapter) -> Result<Identity, AdapterError> {
    match adapter.web.auth_test().await {
        Ok(me) => Ok(Identity { bot_user: me.user_id.0.clone(), bot_id: me.bot_id.map(|b| b.0), team: me.team_id.0.clone() }),
        Err(ClientError::Slack(e)) if crate::errors::is_auth_failure(&e) => {
            Err(AdapterError::fatal("slack_token", format!("Slack refused the bot token ({e}); check SLACK_BOT_TOKEN")))
        }
        Err(e) => Err(AdapterError::retryable("slack_web", format!("could not reach Slack: {e}"))),
    }
}

/// A new socket after `why`, retried with backoff for up to [`RECONNECT_GRACE`]; health shows
/// it meanwhile.
async fn reopen(adapter: &SlackAdapter, ctx: &AdapterContext, why: &str) -> Result<Socket, AdapterError> {
    ctx.health.set_degraded(Some(format!("{why}; reconnecting")));
    let started = Instant::now();
    let mut wait = Duration::from_millis(250);
    loop {
        match open(adapter).await {
            Ok(socket) => {
                tracing::info!("Slack socket reopened after: {why}");
                return Ok(socket);
            }
            Err(e) if !e.is_retryable() => return Err(e),
            Err(e) if started.elapsed() > RECONNECT_GRACE => {
                return Err(AdapterError::retryable("slack_socket", format!("no Slack socket for {RECONNECT_GRACE:?}: {e}")));
            }
            Err(e) => {
                ctx.health.mark_disconnected();
                tracing::warn!("could not reopen the Slack socket: {e}; trying again in {wait:?}");
                tokio::select! {
                    _ = ctx.shutdown.cancelled() => return Err(AdapterError::retryable("slack_socket", "stopping")),
                    _ = tokio::time::sleep(wait) => {}
                }
                wait = (wait * 2).min(Duration::from_secs(10));
            }
        }
    }
}

/// `apps.connections.open`, then the WebSocket. Health turns connected at the socket's `hello`.
async fn open(adapter: &SlackAdapter) -> Result<Socket, AdapterError> {
    let url = match adapter.web.open_socket().await {
        Ok(url) => url,
        Err(ClientError::Slack(e)) if crate::errors::is_auth_failure(&e) => {
            return Err(AdapterError::fatal(
                "slack_app_token",
                format!("Slack refused the app-level token ({e}); check SLACK_APP_TOKEN (xapp-…, scope connections:write)"),
            ));
        }
        Err(e) => return Err(AdapterError::retryable("slack_socket_url", format!("could not get a Socket Mode URL: {e}"))),
    };
    let connector = Connector::Rustls(adapter.web.tls.clone());
    let connecting = tokio_tungstenite::connect_async_tls_with_config(url.as_str(), None, true, Some(connector));
    match tokio::time::timeout(CONNECT_TIMEOUT, connecting).await {
        Ok(Ok((socket, _))) => Ok(socket),
        // The URL carries a connection ticket: not logged.
        Ok(Err(e)) => Err(AdapterError::retryable("slack_socket", format!("could not open the Slack socket: {e}"))),
        Err(_) => Err(AdapterError::retryable("slack_socket", "opening the Slack socket timed out")),
    }
}

enum Next {
    Stay,
    /// Slack said `disconnect`: open a new socket now.
    Refresh,
}

struct Connection {
    me: Identity,
    gate: Gate,
    recent: Recent,
    last_heard: Instant,
    /// A stranger pressed a button: told "not allowed" once the envelope is acknowledged (Slack
    /// wants the ack within 3 s; the answer to the presser can wait for it).
    refusal: Option<Refusal>,
    /// Strangers told lately, and when: one notice per [`REFUSAL_QUIET`] each, however often
    /// they press.
    refused: HashMap<String, Instant>,
}

/// How long a stranger who was told "not allowed" is not told again.
const REFUSAL_QUIET: Duration = Duration::from_secs(60);
/// Strangers remembered as told; past this the list starts over (the worst case is one more
/// notice each).
const REFUSALS_REMEMBERED: usize = 1000;

/// Who to tell, only them, that their button press was not acted on.
struct Refusal {
    channel: String,
    user: String,
    thread: Option<String>,
}

impl Connection {
    async fn take(
        &mut self,
        adapter: &SlackAdapter,
        ctx: &AdapterContext,
        socket: &mut Socket,
        frame: Frame,
    ) -> Result<Next, AdapterError> {
        let text = match frame {
            Frame::Text(text) => text,
            Frame::Close(_) => return Ok(Next::Refresh),
            _ => return Ok(Next::Stay),
        };
        let Ok(envelope) = serde_json::from_str::<Value>(text.as_str()) else {
            tracing::warn!("Slack sent a frame that is not JSON; ignored");
            return Ok(Next::Stay);
        };
        let kind = envelope.get("type").and_then(Value::as_str).unwrap_or_default().to_string();
        let envelope_id = envelope.get("envelope_id").and_then(Value::as_str).map(str::to_string);
        let payload = envelope.get("payload").cloned().unwrap_or(Value::Null);
        let handled = match kind.as_str() {
            "hello" => {
                ctx.health.set_degraded(None);
                ctx.health.mark_connected();
                tracing::info!("Slack socket connected");
                return Ok(Next::Stay);
            }
            "disconnect" => {
                let reason = envelope.get("reason").and_then(Value::as_str).unwrap_or("unknown");
                tracing::info!(reason, "Slack asked for a new socket");
                return Ok(Next::Refresh);
            }
            "events_api" => self.event(adapter, ctx, payload).await,
            "interactive" => self.interaction(ctx, payload).await,
            "slash_commands" => self.command(ctx, payload).await,
            other => {
                tracing::debug!(kind = other, "a Socket Mode envelope of a kind the bot does not handle; acknowledged");
                Handled::Done
            }
        };
        if let (Handled::Done, Some(id)) = (handled, envelope_id) {
            let ack = json!({ "envelope_id": id }).to_string();
            if let Err(e) = socket.send(Frame::Text(ack.into())).await {
                // Slack delivers it again; the inbox drops the copy.
                tracing::warn!("acknowledging a Slack envelope failed: {e}");
            }
        }
        if let Some(refusal) = self.refusal.take() {
            adapter.refuse_press(&refusal.channel, &refusal.user, refusal.thread.as_deref()).await;
        }
        Ok(Next::Stay)
    }

    async fn event(&mut self, adapter: &SlackAdapter, ctx: &AdapterContext, payload: Value) -> Handled {
        // slack-morphism's file model lacks size, subtype and duration: read from the raw event.
        let files = crate::media::files_of(payload.get("event"));
        let callback = match serde_json::from_value::<SlackPushEventCallback>(payload) {
            Ok(callback) => callback,
            Err(e) => {
                // It will not parse better when sent again.
                tracing::warn!("a Slack event that does not parse ({e}); acknowledged and dropped");
                return Handled::Done;
            }
        };
        let mut said = match callback.event {
            SlackEventCallbackBody::Message(m) => said_of_message(m),
            SlackEventCallbackBody::AppMention(m) => said_of_mention(m),
            _ => return Handled::Done,
        };
        said.files = files;
        let key = inbound::message_event_id(&self.me.team, &said.channel, &said.ts);
        if self.recent.contains(&key) {
            return Handled::Done;
        }
        if let Some(why) = inbound::unanswerable(&said, &self.me) {
            tracing::debug!(why, "Slack message not answered");
            return Handled::Done;
        }
        // Known: the bot answered there, or took a message from it, since it started.
        let known = said.in_thread().is_some_and(|ts| adapter.takes_part(&said.channel, ts));
        let thread = match said.in_thread() {
            Some(ts) => ThreadState { bot_in_thread: known || adapter.bot_in_thread(&said.channel, ts).await },
            None => ThreadState::default(),
        };
        if inbound::needs_mention(&said, &self.me, &self.gate, thread) {
            tracing::debug!("a channel message that does not mention the bot");
            return Handled::Done;
        }
        // A reply in a thread new to the bot answers the thread's first message: someone else's
        // words (a colleague's, or an earlier answer of the bot's), which come along fenced.
        let parent = match said.in_thread() {
            Some(ts) if !known => adapter.thread_parent(&said.channel, ts).await,
            _ => None,
        };
        let mut event = match inbound::from_message(&said, &self.me, &self.gate, parent.as_ref().map(|(a, t)| (a.as_str(), t.as_str()))) {
            Inbound::Message(event) => event,
            Inbound::Ignore(why) => {
                tracing::debug!(why, "Slack message not answered");
                return Handled::Done;
            }
        };
        if let Some(thread) = &event.source.thread_id {
            adapter.join_thread(&said.channel, thread);
        }
        // Strangers' files are never requested; their events carry what was declared.
        if !event.attachments.is_empty() && ctx.sender_allowed(&event.source) {
            crate::media::fetch_all(&adapter.settings, &adapter.web.tls, &said.files, &mut event.attachments).await;
        }
        self.store(ctx, key, *event).await
    }

    async fn interaction(&mut self, ctx: &AdapterContext, payload: Value) -> Handled {
        let Ok(SlackInteractionEvent::BlockActions(actions)) = serde_json::from_value::<SlackInteractionEvent>(payload) else {
            return Handled::Done;
        };
        let (Some(user), Some(action)) = (actions.user.as_ref(), actions.actions.as_ref().and_then(|a| a.first())) else {
            return Handled::Done;
        };
        let SlackInteractionActionContainer::Message(container) = &actions.container else { return Handled::Done };
        let Some(channel) = container.channel_id.as_ref().or(actions.channel.as_ref().map(|c| &c.id)) else { return Handled::Done };
        let message = actions.message.as_ref();
        let action_ts = action.action_ts.as_ref().map(|t| t.0.as_str()).unwrap_or(actions.trigger_id.0.as_str());
        let press = inbound::Press {
            user: &user.id.0,
            channel: &channel.0,
            message_ts: &container.message_ts.0,
            thread_ts: message.and_then(|m| m.origin.thread_ts.as_ref()).map(|t| t.0.as_str()),
            action_ts,
            value: action.value.as_deref().unwrap_or_default(),
            message_author: message.and_then(|m| m.sender.user.as_ref()).map(|u| u.0.as_str()),
        };
        match inbound::from_press(&press, &self.me) {
            Inbound::Message(event) => {
                let key = event.event_id.clone();
                if self.recent.contains(&key) {
                    return Handled::Done;
                }
                // A stranger's press is stored like any event (the router refuses it, so it never
                // reaches the model); the presser alone is told, the channel sees nothing.
                let allowed = ctx.sender_allowed(&event.source);
                let refusal =
                    Refusal { channel: press.channel.to_string(), user: press.user.to_string(), thread: event.source.thread_id.clone() };
                let handled = self.store(ctx, key, *event).await;
                if !allowed && handled == Handled::Done && self.first_refusal_lately(&refusal.user) {
                    self.refusal = Some(refusal);
                }
                handled
            }
            Inbound::Ignore(why) => {
                tracing::debug!(why, "Slack button press not acted on");
                Handled::Done
            }
        }
    }

    async fn command(&mut self, ctx: &AdapterContext, payload: Value) -> Handled {
        let Ok(command) = serde_json::from_value::<SlackCommandEvent>(payload) else { return Handled::Done };
        let text = command.text.as_deref().unwrap_or_default();
        match inbound::from_command(&command.command.0, text, &command.user_id.0, &command.channel_id.0, &command.trigger_id.0, &self.me) {
            Inbound::Message(event) => {
                let key = event.event_id.clone();
                self.store(ctx, key, *event).await
            }
            Inbound::Ignore(_) => Handled::Done,
        }
    }

    /// Whether `user` was not told "not allowed" within [`REFUSAL_QUIET`]; remembers that they
    /// are being told now.
    fn first_refusal_lately(&mut self, user: &str) -> bool {
        let now = Instant::now();
        if self.refused.get(user).is_some_and(|at| now.duration_since(*at) < REFUSAL_QUIET) {
            return false;
        }
        if self.refused.len() >= REFUSALS_REMEMBERED {
            self.refused.retain(|_, at| now.duration_since(*at) < REFUSAL_QUIET);
            if self.refused.len() >= REFUSALS_REMEMBERED {
                self.refused.clear();
            }
        }
        self.refused.insert(user.to_string(), now);
        true
    }

    /// Into the inbox, a few tries; acked only when stored.
    async fn store(&mut self, ctx: &AdapterContext, key: String, event: InboundEvent) -> Handled {
        let mut last: Option<AcceptError> = None;
        for wait in [0u64, 200, 1000] {
            tokio::time::sleep(Duration::from_millis(wait)).await;
            match ctx.accept(event.clone()).await {
                Ok(_) => {
                    self.recent.insert(key);
                    return Handled::Done;
                }
                Err(e) => last = Some(e),
            }
        }
        let why = last.map(|e| e.to_string()).unwrap_or_default();
        tracing::error!(event = %key, "the inbox refused a Slack event three times ({why}); not acknowledged, so Slack sends it again");
        Handled::Unacked
    }
}

/// Whether the envelope may be acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Handled {
    Done,
    Unacked,
}

fn said_of_message(m: SlackMessageEvent) -> Said {
    let content = m.content.unwrap_or_else(SlackMessageContent::new);
    Said {
        channel: m.origin.channel.map(|c| c.0).unwrap_or_default(),
        channel_type: m.origin.channel_type.map(|t| t.0),
        user: m.sender.user.map(|u| u.0),
        bot_id: m.sender.bot_id.map(|b| b.0),
        subtype: m.subtype.and_then(|s| serde_json::to_value(s).ok()).and_then(|v| v.as_str().map(str::to_string)),
        text: content.text.unwrap_or_default(),
        ts: m.origin.ts.0,
        thread_ts: m.origin.thread_ts.map(|t| t.0),
        files: Vec::new(),
    }
}

fn said_of_mention(m: SlackAppMentionEvent) -> Said {
    Said {
        channel: m.channel.0,
        channel_type: None,
        user: Some(m.user.0),
        bot_id: None,
        subtype: None,
        text: m.content.text.unwrap_or_default(),
        ts: m.origin.ts.0,
        thread_ts: m.origin.thread_ts.map(|t| t.0),
        files: Vec::new(),
    }
}

/// Ids of handled events, bounded.
#[derive(Default)]
struct Recent {
    order: VecDeque<String>,
    set: HashSet<String>,
}

impl Recent {
    fn insert(&mut self, id: String) {
        if !self.set.insert(id.clone()) {
            return;
        }
        self.order.push_back(id);
        if self.order.len() > RECENT_IDS
            && let Some(old) = self.order.pop_front()
        {
            self.set.remove(&old);
        }
    }

    fn contains(&self, id: &str) -> bool {
        self.set.contains(id)
    }
}
