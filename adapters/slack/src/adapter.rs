//! [`SlackAdapter`]: the send side (messages with their idempotency key, Block Kit buttons,
//! files, paced edits), what the socket needs to know about threads, and the entry to the
//! Socket Mode connection in [`crate::socket`].

use crate::inbound::{Gate, Identity};
use crate::settings::SlackSettings;
use crate::web::{SlackError, Web};
use async_trait::async_trait;
use hermes_adapter::pacing::{Destination, Pacer};
use hermes_adapter::{
    AdapterContext, AdapterError, Capabilities, ChatTarget, CredentialId, LengthUnit, Lookup, MarkdownDialect, OutboundMessage, Platform,
    PlatformAdapter, SendError, SendReceipt, StreamStyle,
};
use slack_morphism::prelude::*;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Hermes' Slack chunk size: under Slack's 40,000-character `text` limit with room for the
/// part counter.
pub const MAX_MESSAGE_LEN: usize = 39_000;
/// What a user who may not talk to the bot sees, alone, when they press one of its buttons (the
/// words every platform uses).
const NOT_ALLOWED: &str = "⛔ Not allowed: you are not an allowed user of this bot.";
/// Threads remembered as "the bot takes part"; past this the book starts over (a forgotten
/// thread is looked up again, not lost).
const THREADS_REMEMBERED: usize = 10_000;

pub struct SlackAdapter {
    platform: Platform,
    capabilities: Capabilities,
    pub(crate) settings: SlackSettings,
    pub(crate) web: Web,
    identity: Mutex<Option<Identity>>,
    /// (channel, thread ts) → whether the bot takes part in it.
    threads: Mutex<HashMap<(String, String), bool>>,
    /// (channel, ts) → when the message was last edited, to pace edits.
    edited: Mutex<HashMap<(String, String), Instant>>,
    /// Slack's posting limits kept on our side, per channel id (see [`crate::SlackSendBudget`]).
    pacer: Pacer<String>,
}

impl SlackAdapter {
    pub fn new(settings: SlackSettings) -> Result<Self, SlackError> {
        let web = Web::new(&settings.bot_token, &settings.app_token, settings.api_base_url.as_deref(), settings.request_timeout)?;
        let capabilities = Capabilities {
            max_message_len: settings.max_message_len.clamp(1, MAX_MESSAGE_LEN),
            length_unit: LengthUnit::Chars,
            dialect: MarkdownDialect::SlackMrkdwn,
            streaming: StreamStyle::EditInPlace,
            supports_edit: true,
            supports_buttons: true,
            // Slack has no typing indicator for bots outside assistant threads.
            supports_typing: false,
            supports_threads: true,
            supports_async_delivery: true,
            splits_long_messages: true,
            supports_files: true,
            read_live: true,
            people_reply: true,
            voice_notes: false,
        };
        let pacer = Pacer::new(settings.budget.limits());
        Ok(Self {
            platform: Platform::new("slack"),
            capabilities,
            settings,
            web,
            identity: Mutex::new(None),
            threads: Mutex::new(HashMap::new()),
            edited: Mutex::new(HashMap::new()),
            pacer,
        })
    }

    pub(crate) fn set_identity(&self, me: Identity) {
        if let Ok(mut slot) = self.identity.lock() {
            *slot = Some(me);
        }
    }

    fn bot_user(&self) -> Option<String> {
        self.identity.lock().ok().and_then(|me| me.as_ref().map(|m| m.bot_user.clone()))
    }

    pub(crate) fn gate(&self) -> Gate {
        Gate {
            require_mention: self.settings.require_mention,
            strict_mention: self.settings.strict_mention,
            free_response_channels: self.settings.free_response_channels.iter().map(|c| c.trim().to_string()).collect(),
            reply_in_thread: self.settings.reply_in_thread,
            commands: self.settings.commands.iter().map(|(name, _)| name.trim_start_matches('/').to_ascii_lowercase()).collect(),
        }
    }

    /// The bot takes part in the thread (it was mentioned there, or has written there).
    pub(crate) fn join_thread(&self, channel: &str, thread: &str) {
        if let Ok(mut threads) = self.threads.lock() {
            if threads.len() >= THREADS_REMEMBERED {
                threads.clear();
            }
            threads.insert((channel.to_string(), thread.to_string()), true);
        }
    }

    /// Whether the bot is known, without asking Slack, to take part in the thread.
    pub(crate) fn takes_part(&self, channel: &str, thread: &str) -> bool {
        self.threads.lock().ok().is_some_and(|t| t.get(&(channel.to_string(), thread.to_string())) == Some(&true))
    }

    /// Whether the bot takes part in the thread: remembered, or read from the thread once.
    pub(crate) async fn bot_in_thread(&self, channel: &str, thread: &str) -> bool {
        let key = (channel.to_string(), thread.to_string());
        if let Some(known) = self.threads.lock().ok().and_then(|t| t.get(&key).copied()) {
            return known;
        }
        let Some(bot_user) = self.bot_user() else { return false };
        let found = match self.web.bot_in_thread(&channel.into(), &thread.into(), &bot_user).await {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(channel, "could not read a Slack thread to see whether the bot is in it ({e}); treating it as new");
                return false;
            }
        };
        if let Ok(mut threads) = self.threads.lock() {
            threads.insert(key, found);
        }
        found
    }

    /// The first message of a thread: who wrote it and what it says.
    pub(crate) async fn thread_parent(&self, channel: &str, thread: &str) -> Option<(String, String)> {
        let first = match self.web.first_of_thread(&channel.into(), &thread.into()).await {
            Ok(first) => first?,
            Err(e) => {
                tracing::debug!(channel, "could not read a Slack thread's first message: {e}");
                return None;
            }
        };
        let author = match (&first.sender.user, self.bot_user()) {
            (Some(user), Some(bot)) if user.0 == bot => "the assistant".to_string(),
            (Some(user), _) => format!("<@{}>", user.0),
            (None, _) => first.sender.username.clone().unwrap_or_else(|| "an app".to_string()),
        };
        Some((author, first.content.text.unwrap_or_default()))
    }

    /// Waits out the rest of [`SlackSettings::min_edit_interval`] since this message's last edit.
    async fn pace_edit(&self, channel: &str, ts: &str) {
        let key = (channel.to_string(), ts.to_string());
        let wait = self
            .edited
            .lock()
            .ok()
            .and_then(|e| e.get(&key).map(|at| self.settings.min_edit_interval.saturating_sub(at.elapsed())))
            .unwrap_or_default();
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        if let Ok(mut edited) = self.edited.lock() {
            // Old entries only pace edits that will never come.
            edited.retain(|_, at| at.elapsed() < Duration::from_secs(60));
            edited.insert(key, Instant::now());
        }
    }
}

impl SlackAdapter {
    /// Tell `user`, and only them (an ephemeral message), that their button press was refused.
    /// A courtesy, so it never waits: when the workspace's posting budget has no slot free right
    /// now (a stranger hammering buttons), the notice is skipped rather than queued in front of
    /// answers. Failing it loses nothing but the notice, so it is logged, not retried.
    pub(crate) async fn refuse_press(&self, channel: &str, user: &str, thread: Option<&str>) {
        let key = channel.to_string();
        if !self.pacer.try_reserve(Destination::global_in(&key), tokio::time::Instant::now()) {
            tracing::debug!(channel, "no posting slot free for a 'not allowed' notice; skipped");
            return;
        }
        let told = self.web.ephemeral(channel, user, thread, NOT_ALLOWED).await;
        if let Err(e) = self.note_rate_limit(channel, told) {
            tracing::warn!(channel, "could not tell a stranger their button press is not allowed: {e}");
        }
    }

    /// A 429 holds back every later post to the channel for Slack's `Retry-After`, not only
    /// this one's retry.
    fn note_rate_limit<T>(&self, channel: &str, result: Result<T, SendError>) -> Result<T, SendError> {
        if let Err(SendError::RateLimited { retry_after }) = &result {
            self.pacer.block(&channel.to_string(), *retry_after);
        }
        result
    }
}

fn channel_of(target: &ChatTarget) -> Result<SlackChannelId, SendError> {
    let id = target.chat_id.trim();
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(SendError::NotFound(format!("`{id}` is not a Slack channel id")));
    }
    Ok(SlackChannelId::new(id.to_string()))
}

#[async_trait]
impl PlatformAdapter for SlackAdapter {
    fn platform(&self) -> &Platform {
        &self.platform
    }

    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    async fn probe(&self) -> Result<Option<String>, AdapterError> {
        self.identify_for_probe().await
    }

    async fn run(&self, ctx: AdapterContext) -> Result<(), AdapterError> {
        crate::socket::run(self, ctx).await
    }

    fn credential(&self) -> Option<CredentialId> {
        Some(CredentialId::new("Slack app-level token", &self.settings.app_token))
    }

    fn liveness_timeout(&self) -> Option<Duration> {
        Some(self.settings.ping_interval * (self.settings.missed_pings + 2) + Duration::from_secs(60))
    }

    async fn send(&self, msg: &OutboundMessage) -> Result<SendReceipt, SendError> {
        let channel = channel_of(&msg.target)?;
        let thread = msg.target.thread_id.as_deref().filter(|t| !t.is_empty()).map(SlackTs::from);
        if msg.text.trim().is_empty() && msg.buttons.is_empty() && msg.file.is_none() {
            return Err(SendError::Other("nothing to send: the message is empty".to_string()));
        }
        if let Some(file) = &msg.file {
            let content =
                tokio::fs::read(&file.path).await.map_err(|e| SendError::Other(format!("could not read `{}`: {e}", file.file_name)))?;
            self.pacer.acquire(Destination::chat(&channel.0)).await;
            // Slack has no voice notes for bots: a voice reply is an audio file it plays inline.
            let mime = if file.kind == hermes_adapter::FileKind::Voice { "audio/ogg" } else { "application/octet-stream" };
            let uploaded = self.web.upload(&channel, thread.as_ref(), &file.file_name, mime, content, Some(msg.text.clone())).await;
            self.note_rate_limit(&channel.0, uploaded)?;
            return Ok(SendReceipt { message_id: None });
        }
        let mut content = SlackMessageContent::new().with_text(msg.text.clone());
        if !msg.buttons.is_empty() {
            let blocks = crate::blocks::with_buttons(&msg.text, &msg.buttons);
            content.blocks = Some(
                serde_json::from_value(serde_json::Value::Array(blocks))
                    .map_err(|e| SendError::Other(format!("could not build the buttons: {e}")))?,
            );
        }
        let mut request = SlackApiChatPostMessageRequest::new(channel.clone(), content)
            // The model's links are not fetched by Slack's unfurler unless previews are on.
            .with_unfurl_links(self.settings.link_previews)
            .with_unfurl_media(self.settings.link_previews);
        if let Some(thread) = &thread {
            request = request.with_thread_ts(thread.clone());
        }
        self.pacer.acquire(Destination::chat(&channel.0)).await;
        let ts = self.note_rate_limit(&channel.0, self.web.post(request, &msg.idempotency_key, self.bot_user().as_deref()).await)?;
        if let Some(thread) = &thread {
            self.join_thread(&channel.0, &thread.0);
        }
        Ok(SendReceipt { message_id: Some(ts.0) })
    }

    /// Every message carries its key in Slack's message metadata, so a cut-off send is looked
    /// up among the channel's (or thread's) latest messages. A file upload carries none.
    async fn find_sent(&self, msg: &OutboundMessage, _since: Duration) -> Result<Lookup, SendError> {
        if msg.file.is_some() {
            return Ok(Lookup::CannotTell);
        }
        let channel = channel_of(&msg.target)?;
        let thread = msg.target.thread_id.as_deref().filter(|t| !t.is_empty()).map(SlackTs::from);
        self.pacer.acquire(Destination::global()).await;
        Ok(match self.web.find_by_key(&channel, thread.as_ref(), &msg.idempotency_key, self.bot_user().as_deref()).await? {
            Some(ts) => Lookup::Found(SendReceipt { message_id: Some(ts.0) }),
            None => Lookup::NotThere,
        })
    }

    async fn edit(&self, target: &ChatTarget, message_id: &str, text: &str) -> Result<(), SendError> {
        let channel = channel_of(target)?;
        if text.trim().is_empty() {
            return Ok(());
        }
        self.pace_edit(&channel.0, message_id).await;
        // Edits have their own limit at Slack (chat.update, Tier 3), so they do not spend the
        // channel's posting rate; but a 429 on either holds back both, as a post's does.
        self.pacer.acquire(Destination::global_in(&channel.0)).await;
        let key = channel.0.clone();
        let request = SlackApiChatUpdateRequest::new(channel, SlackMessageContent::new().with_text(text.to_string()), message_id.into());
        self.note_rate_limit(&key, self.web.update(&request).await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_ids_are_checked_before_any_call() {
        let target = |id: &str| ChatTarget { platform: Platform::new("slack"), chat_id: id.into(), thread_id: None };
        assert!(channel_of(&target("C0123ABC")).is_ok());
        for bad in ["", "C01/../x", "#general", "C1 C2"] {
            assert!(channel_of(&target(bad)).is_err(), "{bad:?}");
        }
    }
}
