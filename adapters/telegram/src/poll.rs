//! Long polling. The offset sent to `getUpdates` is what confirms updates to Telegram, so it only
//! moves past an update once the gateway's inbox has stored it: a crash at any point loses
//! nothing, and what Telegram then sends again is recognised by its event id and answered once.
//!
//! Before Telegram hears a new offset it is recorded through the gateway's fenced cursors
//! (`offset`): with replicas sharing a store, a replica whose lease on the bot is over is
//! refused, confirms nothing and stops. The offset is not read back on start: Telegram keeps the
//! confirmed offset itself, and after a week without updates it numbers the next one at random,
//! so a stored offset could lie above every new update and make the bot deaf.
//!
//! Survived here: a conflict with another poller (409, capped backoff, reported degraded), a
//! webhook left set (deleted), flood waits. Network failures end the run so the supervisor
//! reconnects with backoff; a poll that hangs is caught by the supervisor's liveness watch.

use crate::adapter::TelegramAdapter;
use crate::errors;
use crate::inbound::{self, Gate, Identity, Inbound, IncomingFile};
use crate::media;
use hermes_adapter::{AcceptOutcome, AdapterContext, AdapterError, Attachment, CursorWrite, InboundEvent, MediaCache};
use std::future::IntoFuture;
use std::time::Duration;
use teloxide::payloads::{AnswerCallbackQuerySetters, DeleteWebhookSetters, GetUpdatesSetters};
use teloxide::prelude::Requester;
use teloxide::types::{AllowedUpdate, BotCommand, CallbackQueryId, Update};
use teloxide::{ApiError, RequestError};

const MAX_CONFLICT_BACKOFF: Duration = Duration::from_secs(60);
/// The kinds of update asked for, by long polling and by `setWebhook` alike.
pub(crate) const ALLOWED_UPDATES: [AllowedUpdate; 3] = [AllowedUpdate::Message, AllowedUpdate::EditedMessage, AllowedUpdate::CallbackQuery];

pub async fn run(adapter: &TelegramAdapter, ctx: AdapterContext) -> Result<(), AdapterError> {
    let gate = gate(adapter);
    // getMe runs alongside the first poll instead of before it: start-up latency is one round
    // trip, and updates are classified only once the bot's name is known.
    let mut poller = Poller { identity: Some(tokio::spawn(identify(adapter.bot.clone()))), me: None, offset: 0, conflicts: 0 };
    loop {
        let updates = match poller.next_batch(adapter, &ctx).await? {
            Batch::Updates(updates) => updates,
            Batch::Again => continue,
            Batch::Stopped => return Ok(()),
        };
        poller.connected(adapter, &ctx).await?;
        let Some(me) = poller.me.as_ref() else { continue };
        if let Some(last) = store_batch(adapter, &ctx, me, &gate, &updates).await? {
            poller.offset = record_offset(&ctx, last as i32 + 1).await?;
        }
    }
}

/// The cursor's name in the gateway's store.
pub(crate) const OFFSET: &str = "offset";

/// Record `offset` under the connection's lease before the next poll confirms it to Telegram;
/// the offset to poll with. Fenced or failed, the run ends and nothing is confirmed (Telegram
/// sends the batch again, to whoever polls next, and the inbox drops what it already has).
async fn record_offset(ctx: &AdapterContext, offset: i32) -> Result<i32, AdapterError> {
    match ctx.cursors().save(OFFSET, &offset.to_string()).await {
        Ok(CursorWrite::Saved) => Ok(offset),
        Ok(CursorWrite::Fenced) => Err(AdapterError::fenced()),
        Err(e) => Err(AdapterError::retryable("telegram_cursor", format!("could not record the update offset {offset}: {e}"))),
    }
}

/// Group gating as configured.
pub(crate) fn gate(adapter: &TelegramAdapter) -> Gate {
    Gate {
        require_mention: adapter.settings.require_mention,
        free_response_chats: adapter.settings.free_response_chats.iter().filter_map(|c| c.trim().parse().ok()).collect(),
    }
}

/// Where the long poll stands.
struct Poller {
    /// The getMe started with the first poll, until it answered.
    identity: Option<tokio::task::JoinHandle<Result<Identity, AdapterError>>>,
    me: Option<Identity>,
    /// The next update wanted; sending it confirms everything before it to Telegram.
    offset: i32,
    /// 409 Conflicts in a row (another process polling this token).
    conflicts: u32,
}

/// What one `getUpdates` came back with.
enum Batch {
    Updates(Vec<Update>),
    /// A failure that was dealt with (a wait, a webhook deleted): poll again.
    Again,
    /// The gateway is shutting down; what was stored has been confirmed.
    Stopped,
}

impl Poller {
    /// One long poll, while the first getMe may still be answering.
    async fn next_batch(&mut self, adapter: &TelegramAdapter, ctx: &AdapterContext) -> Result<Batch, AdapterError> {
        let request = adapter
            .poll_bot
            .get_updates()
            .offset(self.offset)
            .limit(100)
            .timeout(adapter.settings.poll_timeout.as_secs() as u32)
            .allowed_updates(ALLOWED_UPDATES);
        let mut request = std::pin::pin!(request.into_future());
        let result = loop {
            tokio::select! {
                r = &mut request => break r,
                _ = ctx.shutdown.cancelled() => {
                    confirm(adapter, self.offset).await;
                    return Ok(Batch::Stopped);
                }
                // With nothing to deliver the first long poll lasts its whole timeout; a bot whose
                // token was accepted and whose poll is waiting is connected meanwhile.
                identified = async {
                    match self.identity.as_mut() {
                        Some(pending) => pending.await,
                        None => std::future::pending().await,
                    }
                }, if self.identity.is_some() => {
                    self.identity = None;
                    self.me = Some(identified.map_err(|e| AdapterError::retryable("telegram_getme", format!("getMe task failed: {e}")))??);
                    publish_commands(adapter);
                    ctx.health.mark_connected();
                }
            }
        };
        match result {
            Ok(updates) => Ok(Batch::Updates(updates)),
            Err(e) => self.poll_failed(e, adapter, ctx).await,
        }
    }

    /// A failed poll: the failures this loop survives are waited out or repaired; the rest end
    /// the run for the supervisor to retry (or give up on a rejected token).
    async fn poll_failed(&mut self, error: RequestError, adapter: &TelegramAdapter, ctx: &AdapterContext) -> Result<Batch, AdapterError> {
        let waited = |stopped: bool| if stopped { Batch::Stopped } else { Batch::Again };
        match error {
            RequestError::Api(ApiError::TerminatedByOtherGetUpdates) => {
                self.conflicts += 1;
                let wait = Duration::from_secs(1u64 << self.conflicts.min(6)).min(MAX_CONFLICT_BACKOFF);
                tracing::warn!(
                    attempt = self.conflicts,
                    wait_s = wait.as_secs(),
                    "another process is polling this bot token (409 Conflict); retrying"
                );
                ctx.health.set_degraded(Some("another process is polling this bot token (409 Conflict)".to_string()));
                ctx.health.progress();
                Ok(waited(sleep_or_stop(ctx, wait).await))
            }
            e if errors::is_webhook_active(&e) => {
                tracing::warn!("a webhook is set for this bot; deleting it to use long polling");
                if let Err(e) = adapter.poll_bot.delete_webhook().drop_pending_updates(false).await {
                    return Err(AdapterError::retryable("telegram_webhook", format!("could not delete the webhook: {e}")));
                }
                Ok(Batch::Again)
            }
            RequestError::Api(ApiError::InvalidToken) => {
                Err(AdapterError::fatal("telegram_token", "Telegram rejected the bot token; check TELEGRAM_BOT_TOKEN"))
            }
            RequestError::RetryAfter(wait) => Ok(waited(sleep_or_stop(ctx, wait.duration()).await)),
            e => Err(AdapterError::retryable("telegram_poll", format!("getUpdates failed: {e}"))),
        }
    }

    /// A poll succeeded: a conflict is over, and the bot's identity is known before its updates
    /// are classified.
    async fn connected(&mut self, adapter: &TelegramAdapter, ctx: &AdapterContext) -> Result<(), AdapterError> {
        if self.conflicts > 0 {
            self.conflicts = 0;
            ctx.health.set_degraded(None);
        }
        ctx.health.mark_connected();
        if let Some(pending) = self.identity.take() {
            self.me = Some(match pending.await {
                Ok(result) => result?,
                Err(e) => return Err(AdapterError::retryable("telegram_getme", format!("getMe task failed: {e}"))),
            });
            publish_commands(adapter);
        }
        Ok(())
    }
}

/// What a user who may not talk to the bot sees when they press one of its buttons.
const NOT_ALLOWED: &str = "⛔ Not allowed: you are not an allowed user of this bot.";

/// Store a batch in the inbox in one write and answer its button presses; the id of its last
/// update once stored (the offset may then move past it), `None` for an empty batch. Webhook
/// deliveries come through here too, one update at a time.
pub(crate) async fn store_batch(
    adapter: &TelegramAdapter,
    ctx: &AdapterContext,
    me: &Identity,
    gate: &Gate,
    updates: &[Update],
) -> Result<Option<u32>, AdapterError> {
    let Some(last) = updates.last().map(|u| u.id.0) else { return Ok(None) };
    let mut events = Vec::with_capacity(updates.len());
    // Per stored event: the button press to answer once it is stored, if it is one.
    let mut presses = Vec::new();
    for update in updates {
        match prepare(adapter, ctx, me, gate, update).await {
            Prepared::Event(event) => {
                events.push(*event);
                presses.push(None);
            }
            Prepared::Press { event, query_id } => {
                // A stranger's press is stored like any event (the router refuses it); the
                // presser alone is told, in the button's own toast, not the whole chat.
                let allowed = ctx.sender_allowed(&event.source);
                events.push(*event);
                presses.push(Some((query_id, allowed)));
            }
            Prepared::Ignored => {}
        }
    }
    let outcomes = match ctx.accept_all(events).await {
        Ok(outcomes) => outcomes,
        // Not confirmed: Telegram sends the batch again next time (duplicates are dropped).
        Err(e) => return Err(AdapterError::retryable("telegram_inbox", format!("the inbox refused updates up to {last}: {e}"))),
    };
    // A redelivered press was answered the first time it was stored.
    let fresh = presses.into_iter().zip(outcomes).filter(|(_, outcome)| *outcome == AcceptOutcome::Accepted);
    for (query_id, allowed) in fresh.filter_map(|(press, _)| press) {
        answer_press(adapter, query_id, allowed);
    }
    Ok(Some(last))
}

/// Stops the button's spinner (and refuses a stranger), in the background: failing it loses
/// nothing.
fn answer_press(adapter: &TelegramAdapter, query_id: String, allowed: bool) {
    let bot = adapter.bot.clone();
    tokio::spawn(async move {
        let answer = bot.answer_callback_query(CallbackQueryId(query_id));
        let answer = if allowed { answer } else { answer.text(NOT_ALLOWED).show_alert(true) };
        if let Err(e) = answer.await {
            tracing::debug!("answerCallbackQuery failed: {e}");
        }
    });
}

pub(crate) async fn identify(bot: teloxide::Bot) -> Result<Identity, AdapterError> {
    match bot.get_me().await {
        Ok(me) => Ok(Identity { bot_id: me.id.0, username: me.username.clone().unwrap_or_default().to_ascii_lowercase() }),
        Err(RequestError::Api(ApiError::InvalidToken)) => {
            Err(AdapterError::fatal("telegram_token", "Telegram rejected the bot token; check TELEGRAM_BOT_TOKEN"))
        }
        Err(e) => Err(AdapterError::retryable("telegram_getme", format!("getMe failed: {e}"))),
    }
}

/// What an update becomes before the batch is stored.
enum Prepared {
    Event(Box<InboundEvent>),
    /// A button press, acknowledged to Telegram once stored.
    Press {
        event: Box<InboundEvent>,
        query_id: String,
    },
    Ignored,
}

/// Attachments are downloaded only for senders the gateway allows: a stranger's file would cost
/// bandwidth and disk for an event the router then denies. The event itself is still stored (the
/// router logs the denial, and it is confirmed to Telegram like any other), its attachment listed
/// as declared, without a path.
async fn prepare(adapter: &TelegramAdapter, ctx: &AdapterContext, me: &Identity, gate: &Gate, update: &Update) -> Prepared {
    match inbound::classify(update, me, gate) {
        Inbound::Ignore(why) => {
            tracing::debug!(update_id = update.id.0, "ignored: {why}");
            Prepared::Ignored
        }
        Inbound::Message { mut event, attachment } => {
            if let Some(file) = attachment {
                let attachment = if ctx.sender_allowed(&event.source) {
                    fetch_attachment(adapter, &file, update.id.0).await
                } else {
                    tracing::debug!(update_id = update.id.0, "attachment not downloaded: the sender is not allowed");
                    file.attachment
                };
                event.attachments.push(attachment);
            }
            Prepared::Event(event)
        }
        Inbound::Button { event, query_id } => Prepared::Press { event, query_id },
    }
}

/// An allowed sender's file, saved or refused; the gateway words a refusal for the user.
async fn fetch_attachment(adapter: &TelegramAdapter, file: &IncomingFile, update_id: u32) -> Attachment {
    let cache = MediaCache::new(&adapter.settings.media_dir);
    let to = media::Fetch { cache: &cache, limits: adapter.settings.media_limits, adapter_max: adapter.settings.max_media_bytes };
    let attachment = media::fetch(&adapter.bot, file, &to).await;
    if let Some(refusal) = &attachment.refused {
        tracing::warn!(update_id, kind = attachment.kind.noun(), "attachment not saved: {refusal}");
    }
    attachment
}

/// One last zero-timeout poll so Telegram forgets what was accepted before a clean stop; what it
/// returns stays unconfirmed and comes again on the next start.
async fn confirm(adapter: &TelegramAdapter, offset: i32) {
    if offset == 0 {
        return;
    }
    let request = adapter.bot.get_updates().offset(offset).limit(1).timeout(0);
    if tokio::time::timeout(Duration::from_secs(2), request).await.is_err() {
        tracing::debug!("could not confirm the last updates before stopping; they will be deduplicated on restart");
    }
}

/// The command menu, published in the background: it decorates the client and must not delay
/// the first poll.
pub(crate) fn publish_commands(adapter: &TelegramAdapter) {
    let commands: Vec<BotCommand> = adapter
        .settings
        .commands
        .iter()
        .filter(|(name, _)| {
            !name.is_empty() && name.len() <= 32 && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        })
        .map(|(name, description)| {
            let description: String = if description.trim().is_empty() { name.clone() } else { description.chars().take(256).collect() };
            BotCommand::new(name.clone(), description)
        })
        .take(100)
        .collect();
    if commands.is_empty() {
        return;
    }
    let bot = adapter.bot.clone();
    tokio::spawn(async move {
        if let Err(e) = bot.set_my_commands(commands).await {
            tracing::warn!("could not publish the command menu: {e}");
        }
    });
}

/// Sleep unless the gateway stops first; true when it did.
async fn sleep_or_stop(ctx: &AdapterContext, wait: Duration) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(wait) => false,
        _ = ctx.shutdown.cancelled() => true,
    }
}
