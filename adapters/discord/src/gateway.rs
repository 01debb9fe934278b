//! The gateway connection, on serenity's client. serenity heartbeats, resumes after a dropped
//! connection and re-identifies when a session is gone; this module adds what a daemon needs on
//! top:
//!
//! * **Order.** serenity runs each event handler call in its own task, so two messages arriving
//!   together can reach the handler in either order. Messages and button presses are taken from a
//!   collector instead, which the shard calls in arrival order; the event handler only covers the
//!   moment between READY and the collector's registration, after a short delay, and the inbox
//!   drops whatever both paths delivered.
//! * **Health.** Degraded from the moment a shard's connection is lost (a missed heartbeat ACK
//!   ends the shard runner, which drops its collector — that is how it is noticed at once) until
//!   the next READY or RESUMED; a connection that stays down past `reconnect_grace` is torn down
//!   and the supervisor rebuilds the whole client.
//! * **Nothing written in a gap is lost.** After READY (a new session, which Discord does not
//!   replay into) the recently active channels' history since the last message seen is read
//!   back ([`crate::backfill`]); a resume needs none, Discord replays it.
//! * **One client.** Every way out of [`run`] shuts the client's shards down first, so a rebuilt
//!   client never runs next to the old one.

use crate::adapter::DiscordAdapter;
use crate::backfill;
use crate::commands;
use crate::inbound::{self, Gate, Identity, Inbound, Place};
use hermes_adapter::{AcceptError, AdapterContext, AdapterError, InboundEvent};
use serenity::all::{
    Channel, ChannelType, ClientBuilder, CollectorCallback, Context, CreateInteractionResponse, CreateInteractionResponseMessage, Event,
    EventHandler, GatewayIntents, Interaction, InteractionId, Message, Ready, ResumedEvent, ShardId, ShardManager,
};
use serenity::gateway::{ConnectionStage, GatewayError};
use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// What a user who may not talk to the bot is told, privately, when they press one of its buttons.
const NOT_ALLOWED: &str = "⛔ Not allowed: you are not an allowed user of this bot.";

/// How long an event seen only by the event handler waits for the collector to deliver it first.
const FALLBACK_DELAY: Duration = Duration::from_millis(250);
const HEALTH_TICK: Duration = Duration::from_millis(250);
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);
/// Ids of events already handled, to drop the second delivery locally (the inbox would too).
const RECENT_IDS: usize = 4096;

/// What the serenity side hands the run loop.
enum Incoming {
    Ready {
        bot_id: u64,
        application_id: u64,
    },
    Resumed,
    /// From the collector, in the order the shard received them.
    Ordered(Item),
    /// From the event handler, which may reorder; handled after [`FALLBACK_DELAY`] unless seen.
    Fallback(Item),
    /// A shard runner ended (its collector was dropped): the connection is gone.
    ConnectionLost,
}

/// The events the adapter acts on.
enum Item {
    Message(Box<Message>),
    Interaction(Box<Interaction>),
}

impl Item {
    fn of(event: &Event) -> Option<Item> {
        match event {
            Event::MessageCreate(e) => Some(Item::Message(Box::new(e.message.clone()))),
            Event::InteractionCreate(e) => Some(Item::Interaction(Box::new(e.interaction.clone()))),
            _ => None,
        }
    }

    /// The inbox's id for it.
    fn key(&self) -> String {
        match self {
            Item::Message(m) => inbound::message_event_id(m.id.get()),
            Item::Interaction(i) => inbound::interaction_event_id(i.id().get()),
        }
    }
}

struct Handler {
    tx: mpsc::UnboundedSender<Incoming>,
}

/// Lives inside a collector; dropped with the shard runner that owns the collector.
struct RunnerWatch {
    tx: mpsc::UnboundedSender<Incoming>,
}

impl Drop for RunnerWatch {
    fn drop(&mut self) {
        let _ = self.tx.send(Incoming::ConnectionLost);
    }
}

#[serenity::async_trait]
impl EventHandler for Handler {
    async fn ready(&self, ctx: Context, ready: Ready) {
        // READY comes once per shard runner (a resume keeps the runner, a re-identify makes a new
        // one), so this registers exactly one collector per runner.
        let watch = RunnerWatch { tx: self.tx.clone() };
        ctx.shard.add_collector(CollectorCallback(Box::new(move |event| {
            if let Some(item) = Item::of(event) {
                let _ = watch.tx.send(Incoming::Ordered(item));
            }
            !watch.tx.is_closed()
        })));
        let _ = self.tx.send(Incoming::Ready { bot_id: ready.user.id.get(), application_id: ready.application.id.get() });
    }

    async fn resume(&self, _ctx: Context, _event: ResumedEvent) {
        let _ = self.tx.send(Incoming::Resumed);
    }

    async fn message(&self, _ctx: Context, message: Message) {
        let _ = self.tx.send(Incoming::Fallback(Item::Message(Box::new(message))));
    }

    async fn interaction_create(&self, _ctx: Context, interaction: Interaction) {
        let _ = self.tx.send(Incoming::Fallback(Item::Interaction(Box::new(interaction))));
    }
}

fn intents() -> GatewayIntents {
    GatewayIntents::GUILDS | GatewayIntents::GUILD_MESSAGES | GatewayIntents::DIRECT_MESSAGES | GatewayIntents::MESSAGE_CONTENT
}

pub async fn run(adapter: &DiscordAdapter, ctx: AdapterContext) -> Result<(), AdapterError> {
    preflight(adapter).await?;
    backfill::restore(adapter, &ctx).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut client = ClientBuilder::new_with_http(adapter.gateway_http(), intents())
        .event_handler(Handler { tx })
        .await
        .map_err(|e| AdapterError::retryable("discord_client", format!("could not build the Discord client: {e}")))?;
    let manager = client.shard_manager.clone();
    let mut started = tokio::spawn(async move { client.start().await });
    let gate = Gate {
        require_mention: adapter.settings.require_mention,
        thread_require_mention: adapter.settings.thread_require_mention,
        free_response_channels: adapter.settings.free_response_channels.iter().filter_map(|c| c.trim().parse().ok()).collect(),
    };
    let mut loop_state = Loop { me: None, recent: Recent::default(), fallback: VecDeque::new(), lost_at: None, ever_connected: false };
    let mut tick = tokio::time::interval(HEALTH_TICK);
    let outcome = loop {
        let next_fallback = loop_state.fallback.front().map(|(due, _)| *due);
        tokio::select! {
            _ = ctx.shutdown.cancelled() => break Ok(()),
            ended = &mut started => break Err(start_error(ended)),
            incoming = rx.recv() => {
                let Some(incoming) = incoming else { break Err(AdapterError::retryable("discord_gateway", "the Discord client stopped")) };
                if let Err(e) = loop_state.take(adapter, &ctx, &gate, incoming).await {
                    break Err(e);
                }
            }
            _ = sleep_until(next_fallback) => {
                if let Some((_, item)) = loop_state.fallback.pop_front()
                    && let Err(e) = loop_state.handle(adapter, &ctx, &gate, item, "event handler").await
                {
                    break Err(e);
                }
            }
            _ = tick.tick() => {
                if let Err(e) = loop_state.check_health(adapter, &ctx, &manager).await {
                    break Err(e);
                }
            }
        }
    };
    ctx.health.mark_disconnected();
    if tokio::time::timeout(SHUTDOWN_TIMEOUT, manager.shutdown_all()).await.is_err() {
        tracing::warn!("the Discord shards did not stop within {SHUTDOWN_TIMEOUT:?}; dropping them");
    }
    started.abort();
    outcome
}

/// The token and the gateway URL, checked before serenity gets them: serenity keeps retrying a
/// rejected token, and when the gateway URL cannot be fetched it falls back to Discord's own
/// address whatever `api_base_url` says.
async fn preflight(adapter: &DiscordAdapter) -> Result<(), AdapterError> {
    let unauthorized = |e: &serenity::Error| matches!(e, serenity::Error::Http(serenity::http::HttpError::UnsuccessfulRequest(r)) if r.status_code.as_u16() == 401);
    if let Err(e) = adapter.http.get_current_user().await {
        if unauthorized(&e) {
            return Err(AdapterError::fatal("discord_token", "Discord rejected the bot token; check DISCORD_BOT_TOKEN"));
        }
        return Err(AdapterError::retryable("discord_rest", format!("could not reach Discord: {}", crate::errors::classify(e))));
    }
    adapter.http.get_gateway().await.map(|_| ()).map_err(|e| {
        AdapterError::retryable("discord_gateway_url", format!("could not get the gateway URL: {}", crate::errors::classify(e)))
    })
}

async fn sleep_until(due: Option<Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due.into()).await,
        None => std::future::pending().await,
    }
}

fn start_error(ended: Result<Result<(), serenity::Error>, tokio::task::JoinError>) -> AdapterError {
    match ended {
        Ok(Ok(())) => AdapterError::retryable("discord_gateway", "the Discord client stopped"),
        Ok(Err(serenity::Error::Gateway(GatewayError::InvalidAuthentication))) => {
            AdapterError::fatal("discord_token", "Discord rejected the bot token; check DISCORD_BOT_TOKEN")
        }
        Ok(Err(serenity::Error::Gateway(GatewayError::DisallowedGatewayIntents | GatewayError::InvalidGatewayIntents))) => {
            AdapterError::fatal(
                "discord_intents",
                "Discord refused the gateway intents; enable the Message Content intent for the bot in the Discord developer portal",
            )
        }
        Ok(Err(serenity::Error::Http(serenity::http::HttpError::UnsuccessfulRequest(r)))) if r.status_code.as_u16() == 401 => {
            AdapterError::fatal("discord_token", "Discord rejected the bot token; check DISCORD_BOT_TOKEN")
        }
        Ok(Err(e)) => AdapterError::retryable("discord_gateway", format!("the Discord connection failed: {e}")),
        Err(e) => AdapterError::retryable("discord_gateway", format!("the Discord client task failed: {e}")),
    }
}

/// Ids of handled events, bounded.
#[derive(Default)]
struct Recent {
    order: VecDeque<String>,
    set: HashSet<String>,
}

impl Recent {
    /// False when the id was already handled.
    fn insert(&mut self, id: String) -> bool {
        if !self.set.insert(id.clone()) {
            return false;
        }
        self.order.push_back(id);
        if self.order.len() > RECENT_IDS
            && let Some(old) = self.order.pop_front()
        {
            self.set.remove(&old);
        }
        true
    }

    fn contains(&self, id: &str) -> bool {
        self.set.contains(id)
    }
}

struct Loop {
    me: Option<Identity>,
    recent: Recent,
    fallback: VecDeque<(Instant, Item)>,
    /// Since when the connection has been down, if it is.
    lost_at: Option<Instant>,
    ever_connected: bool,
}

impl Loop {
    async fn take(&mut self, adapter: &DiscordAdapter, ctx: &AdapterContext, gate: &Gate, incoming: Incoming) -> Result<(), AdapterError> {
        match incoming {
            Incoming::Ready { bot_id, application_id } => {
                self.me = Some(Identity { bot_id });
                self.connected(ctx, "connected");
                if !adapter.commands_published.swap(true, std::sync::atomic::Ordering::AcqRel) {
                    commands::publish(adapter, application_id);
                }
                self.read_back_missed(adapter, ctx, gate).await?;
            }
            Incoming::Resumed => self.connected(ctx, "resumed"),
            Incoming::ConnectionLost => {
                if self.lost_at.is_none() {
                    tracing::warn!("the Discord gateway connection was lost (heartbeats unanswered or the session ended); reconnecting");
                    self.lost_at = Some(Instant::now());
                }
                ctx.health.set_degraded(Some("the Discord gateway connection was lost; reconnecting".to_string()));
            }
            Incoming::Ordered(item) => self.handle(adapter, ctx, gate, item, "collector").await?,
            Incoming::Fallback(item) => {
                if !self.recent.contains(&item.key()) {
                    self.fallback.push_back((Instant::now() + FALLBACK_DELAY, item));
                }
            }
        }
        Ok(())
    }

    fn connected(&mut self, ctx: &AdapterContext, how: &str) {
        if self.lost_at.take().is_some() || !self.ever_connected {
            tracing::info!("Discord gateway {how}");
        }
        self.ever_connected = true;
        ctx.health.set_degraded(None);
        ctx.health.mark_connected();
    }

    async fn check_health(
        &mut self,
        adapter: &DiscordAdapter,
        ctx: &AdapterContext,
        manager: &Arc<ShardManager>,
    ) -> Result<(), AdapterError> {
        let stage = manager.runners.lock().await.get(&ShardId(0)).map(|r| r.stage);
        let up = self.ever_connected && self.lost_at.is_none() && stage == Some(ConnectionStage::Connected);
        if up {
            ctx.health.progress();
            return Ok(());
        }
        // Down since the connection was lost, or since the start when it never came up.
        let newly_down = self.lost_at.is_none();
        let since = *self.lost_at.get_or_insert_with(Instant::now);
        if self.ever_connected {
            let stage = stage.map_or("down".to_string(), |s| s.to_string());
            if newly_down {
                tracing::warn!("the Discord gateway connection is {stage}; reconnecting");
            }
            ctx.health.set_degraded(Some(format!("the Discord gateway connection is {stage}; reconnecting")));
        }
        if since.elapsed() > adapter.settings.reconnect_grace {
            return Err(AdapterError::retryable(
                "discord_gateway",
                format!("no working Discord gateway connection for {:?}; rebuilding the client", adapter.settings.reconnect_grace),
            ));
        }
        Ok(())
    }

    /// A new session does not replay what was written before it: read the recently active
    /// channels' history since the last message seen there (see [`crate::backfill`]), and take
    /// it in the order it was written (ids are timestamps). Live events wait in the channel
    /// meanwhile, so they come after.
    async fn read_back_missed(&mut self, adapter: &DiscordAdapter, ctx: &AdapterContext, gate: &Gate) -> Result<(), AdapterError> {
        let channels = adapter.seen.lock().map(|seen| seen.snapshot()).unwrap_or_default();
        let mut missed = Vec::new();
        for (channel, seen) in channels {
            match backfill::missed_in(adapter, channel, seen).await {
                Ok(messages) => missed.extend(messages),
                Err(e) => tracing::warn!(channel, "could not read back a Discord channel's messages after reconnecting: {e}"),
            }
        }
        if !missed.is_empty() {
            tracing::info!(count = missed.len(), "reading back Discord messages written while the bot had no session");
        }
        missed.sort_by_key(|m| m.id);
        for message in missed {
            self.handle(adapter, ctx, gate, Item::Message(Box::new(message)), "history").await?;
        }
        Ok(())
    }

    async fn handle(
        &mut self,
        adapter: &DiscordAdapter,
        ctx: &AdapterContext,
        gate: &Gate,
        item: Item,
        via: &str,
    ) -> Result<(), AdapterError> {
        let key = item.key();
        if !self.recent.insert(key.clone()) {
            return Ok(());
        }
        let Some(me) = self.me else {
            tracing::debug!(event = %key, "an event before READY; ignored");
            return Ok(());
        };
        if via == "event handler" {
            tracing::debug!(event = %key, "taken from the event handler (the collector had not seen it)");
        }
        let classified = match &item {
            Item::Message(message) => {
                if let Ok(mut seen) = adapter.seen.lock() {
                    seen.record(message.channel_id.get(), message.id.get(), message.guild_id.map(|g| g.get()));
                }
                let place = place_of(adapter, message.channel_id.get(), message.guild_id.is_none()).await;
                inbound::from_message(message, place, &me, gate)
            }
            Item::Interaction(interaction) => match interaction.as_ref() {
                Interaction::Component(component) => {
                    let place = place_of(adapter, component.channel_id.get(), component.guild_id.is_none()).await;
                    inbound::from_component(component, place, &me)
                }
                Interaction::Command(command) => {
                    let place = place_of(adapter, command.channel_id.get(), command.guild_id.is_none()).await;
                    inbound::from_command(command, place)
                }
                _ => Inbound::Ignore("an interaction other than a button press or a slash command"),
            },
        };
        match classified {
            Inbound::Ignore(why) => tracing::debug!(event = %key, "ignored: {why}"),
            Inbound::Message(mut event) => {
                // Strangers' files are never requested; their events carry what was declared.
                if let Item::Message(message) = &item
                    && !event.attachments.is_empty()
                    && ctx.sender_allowed(&event.source)
                {
                    crate::media::fetch_all(&adapter.settings, &adapter.client, message, &mut event.attachments).await;
                }
                accept(ctx, *event).await?;
                backfill::persist(adapter, ctx).await?;
            }
            Inbound::Command { event, interaction_id, token } => {
                // "Thinking…" first: Discord gives 3 s, and the answer is written into this
                // response. Discord never sends an interaction again, so acknowledging before the
                // inbox has it loses nothing a retry could have saved.
                let deferred = CreateInteractionResponse::Defer(CreateInteractionResponseMessage::new());
                match adapter.http.create_interaction_response(InteractionId::new(interaction_id), &token, &deferred, vec![]).await {
                    Ok(()) => {
                        if let Ok(mut pending) = adapter.pending_interactions.lock() {
                            pending.insert(interaction_id, token);
                        }
                    }
                    Err(e) => tracing::warn!("could not acknowledge a slash command ({e}); its answer goes to the channel as a message"),
                }
                accept(ctx, *event).await?;
            }
            Inbound::Button { event, interaction_id, token } => {
                // A stranger's press is stored like any event (the router refuses it); only the
                // presser is told, in a message nobody else sees.
                let allowed = ctx.sender_allowed(&event.source);
                accept(ctx, *event).await?;
                // Stops the "interaction failed" notice; the press itself is already stored.
                let http = adapter.http.clone();
                tokio::spawn(async move {
                    let response = if allowed {
                        CreateInteractionResponse::Acknowledge
                    } else {
                        CreateInteractionResponse::Message(CreateInteractionResponseMessage::new().content(NOT_ALLOWED).ephemeral(true))
                    };
                    if let Err(e) = http.create_interaction_response(InteractionId::new(interaction_id), &token, &response, vec![]).await {
                        tracing::debug!("acknowledging a button press failed: {e}");
                    }
                });
            }
        }
        Ok(())
    }
}

/// Discord does not send an event again, so the inbox gets a few tries before the event is given
/// up on — loudly, naming it.
async fn accept(ctx: &AdapterContext, event: InboundEvent) -> Result<(), AdapterError> {
    let id = event.event_id.clone();
    let mut last: Option<AcceptError> = None;
    for wait in [0u64, 200, 1000] {
        tokio::time::sleep(Duration::from_millis(wait)).await;
        match ctx.accept(event.clone()).await {
            Ok(_) => return Ok(()),
            Err(e) => last = Some(e),
        }
    }
    let why = last.map(|e| e.to_string()).unwrap_or_default();
    tracing::error!(event = %id, "the inbox refused a Discord message three times ({why}); it will not be answered");
    Ok(())
}

/// Where a channel is: DMs are known from the missing guild; a guild channel is asked about once.
async fn place_of(adapter: &DiscordAdapter, channel: u64, is_dm: bool) -> Place {
    if is_dm {
        return Place::Dm;
    }
    if let Some(place) = adapter.places.lock().ok().and_then(|p| p.get(&channel).copied()) {
        return place;
    }
    let Some(id) = std::num::NonZeroU64::new(channel) else { return Place::Channel };
    match adapter.http.get_channel(id.into()).await {
        Ok(Channel::Guild(c)) => {
            let place = match (c.kind, c.parent_id) {
                (ChannelType::PublicThread | ChannelType::PrivateThread | ChannelType::NewsThread, Some(parent)) => {
                    Place::Thread { parent: parent.get() }
                }
                _ => Place::Channel,
            };
            if let Ok(mut places) = adapter.places.lock() {
                places.insert(channel, place);
            }
            place
        }
        Ok(_) => Place::Channel,
        Err(e) => {
            tracing::warn!(channel, "could not look up a Discord channel ({e}); treating it as a plain channel this time");
            Place::Channel
        }
    }
}
