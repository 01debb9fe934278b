//! [`DiscordAdapter`]: the send side (messages with buttons, edits, typing) and the entry to the
//! gateway connection in [`crate::gateway`].

use crate::backfill::SeenChannels;
use crate::commands::{self, PendingInteractions};
use crate::errors::classify;
use crate::inbound::Place;
use crate::settings::DiscordSettings;
use crate::voice;
use async_trait::async_trait;
use hermes_adapter::pacing::{Destination, Pacer};
use hermes_adapter::{
    AdapterContext, AdapterError, Button, Capabilities, ChatTarget, FileKind, LengthUnit, Lookup, MarkdownDialect, OutboundMessage,
    Platform, PlatformAdapter, SendError, SendReceipt, StreamStyle,
};
use serenity::builder::{CreateActionRow, CreateAllowedMentions, CreateAttachment, CreateButton, CreateMessage, EditMessage};
use serenity::http::{Http, HttpBuilder};
use serenity::model::channel::{MessageFlags, MessageReference, MessageReferenceKind, Nonce};
use serenity::model::id::{ChannelId, MessageId};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Discord's limit on message content, in characters.
pub const MAX_MESSAGE_LEN: usize = 2000;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long after a send Discord is relied on to deduplicate its nonce: its documentation says
/// "the past few minutes"; two is within any reading of that.
const NONCE_MEMORY: Duration = Duration::from_secs(120);

/// Resends of a message create whose answer was lost; safe because Discord deduplicates the nonce.
const AMBIGUOUS_RETRIES: u32 = 2;

#[derive(Debug, thiserror::Error)]
pub enum DiscordError {
    #[error("the Discord bot token is empty (check DISCORD_BOT_TOKEN)")]
    EmptyToken,
    #[error("`{0}` is not a usable Discord API base URL (expected http(s)://host[:port])")]
    BadUrl(String),
    #[error("could not build the HTTP client: {0}")]
    Client(String),
}

pub struct DiscordAdapter {
    platform: Platform,
    capabilities: Capabilities,
    pub(crate) settings: DiscordSettings,
    pub(crate) http: Arc<Http>,
    pub(crate) client: reqwest012::Client,
    /// Channel id → where it is (learned once per channel; a channel never turns into a thread).
    pub(crate) places: Mutex<HashMap<u64, Place>>,
    /// The newest message seen per channel, for reading back what a new session missed.
    pub(crate) seen: Mutex<SeenChannels>,
    /// Slash commands acknowledged as "thinking…", waiting for their answer.
    pub(crate) pending_interactions: Mutex<PendingInteractions>,
    /// The slash commands are published once per process, at the first READY.
    pub(crate) commands_published: AtomicBool,
    /// Discord's send limits kept on our side, per channel id (see [`crate::DiscordSendBudget`]).
    pacer: Pacer<u64>,
}

impl DiscordAdapter {
    pub fn new(settings: DiscordSettings) -> Result<Self, DiscordError> {
        if settings.token.trim().is_empty() {
            return Err(DiscordError::EmptyToken);
        }
        if let Some(base) = &settings.api_base_url {
            let parsed = url::Url::parse(base.trim_end_matches('/')).ok();
            if !parsed.is_some_and(|u| matches!(u.scheme(), "http" | "https") && u.has_host()) {
                return Err(DiscordError::BadUrl(base.clone()));
            }
        }
        let client = reqwest012::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .tcp_nodelay(true)
            .use_rustls_tls()
            .build()
            .map_err(|e| DiscordError::Client(e.to_string()))?;
        let capabilities = Capabilities {
            max_message_len: MAX_MESSAGE_LEN,
            length_unit: LengthUnit::Chars,
            dialect: MarkdownDialect::Markdown,
            streaming: StreamStyle::EditInPlace,
            supports_edit: true,
            supports_buttons: true,
            supports_typing: true,
            supports_threads: true,
            supports_async_delivery: true,
            splits_long_messages: true,
            supports_files: true,
            read_live: true,
            people_reply: true,
            voice_notes: true,
        };
        let http = Arc::new(build_http(&settings, client.clone()));
        let pacer = Pacer::new(settings.budget.limits());
        Ok(Self {
            platform: Platform::new("discord"),
            capabilities,
            settings,
            http,
            client,
            places: Mutex::new(HashMap::new()),
            seen: Mutex::default(),
            pending_interactions: Mutex::default(),
            commands_published: AtomicBool::new(false),
            pacer,
        })
    }

    /// A fresh REST client for a gateway client (serenity's client takes its own).
    pub(crate) fn gateway_http(&self) -> Http {
        build_http(&self.settings, self.client.clone())
    }
}

fn build_http(settings: &DiscordSettings, client: reqwest012::Client) -> Http {
    let mut builder = HttpBuilder::new(settings.token.trim()).client(client);
    if let Some(base) = &settings.api_base_url {
        // serenity's rate limiter sends to https://discord.com whatever the proxy says, so with
        // another base URL it is off and 429s come back to the gateway's outbound retry.
        builder = builder.proxy(base.trim_end_matches('/')).ratelimiter_disabled(true);
    }
    builder.build()
}

/// Discord deduplicates message creates by nonce (at most 25 characters) for a few minutes when
/// `enforce_nonce` is set: the idempotency key, hashed to fit.
fn nonce(idempotency_key: &str) -> String {
    let digest = hex::encode(Sha256::digest(idempotency_key.as_bytes()));
    digest[..25].to_string()
}

fn snowflake(text: &str, what: &str) -> Result<u64, SendError> {
    text.parse::<u64>().ok().filter(|id| *id != 0).ok_or_else(|| SendError::NotFound(format!("`{text}` is not a Discord {what} id")))
}

/// The channel a target's messages go to: the thread when there is one.
fn channel_of(target: &ChatTarget) -> Result<ChannelId, SendError> {
    let id = target.thread_id.as_deref().unwrap_or(&target.chat_id);
    snowflake(id, "channel").map(ChannelId::new)
}

/// Action rows of buttons: Discord takes 5 rows of 5, custom ids of 1-100 characters and labels
/// up to 80; what does not fit is left out with a warning rather than failing the message.
pub(crate) fn action_rows(rows: &[Vec<Button>]) -> Vec<CreateActionRow> {
    rows.iter()
        .map(|row| {
            row.iter()
                .filter(|b| {
                    let fits = !b.data.is_empty() && b.data.chars().count() <= 100;
                    if !fits {
                        tracing::warn!(label = %b.label, "button data must be 1-100 characters for Discord; button left out");
                    }
                    fits
                })
                .take(5)
                .map(|b| CreateButton::new(b.data.clone()).label(b.label.chars().take(80).collect::<String>()))
                .collect::<Vec<_>>()
        })
        .filter(|row| !row.is_empty())
        .take(5)
        .map(CreateActionRow::Buttons)
        .collect()
}

#[async_trait]
impl PlatformAdapter for DiscordAdapter {
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
        crate::gateway::run(self, ctx).await
    }

    fn credential(&self) -> Option<hermes_adapter::CredentialId> {
        Some(hermes_adapter::CredentialId::new("Discord bot token", &self.settings.token))
    }

    /// Discord keeps one message per nonce (with `enforce_nonce`) for a few minutes, and its API
    /// cannot look a nonce up afterwards: within that time a resend is deduplicated; later it
    /// cannot tell.
    async fn find_sent(&self, _msg: &OutboundMessage, since: Duration) -> Result<Lookup, SendError> {
        Ok(if since < NONCE_MEMORY { Lookup::ResendIsDeduplicated } else { Lookup::CannotTell })
    }

    async fn send(&self, msg: &OutboundMessage) -> Result<SendReceipt, SendError> {
        let channel = channel_of(&msg.target)?;
        let components = action_rows(&msg.buttons);
        if msg.text.trim().is_empty() && components.is_empty() && msg.file.is_none() {
            return Err(SendError::Other("nothing to send: the message is empty".to_string()));
        }
        if let Some(answered) = commands::answer_in_place(self, msg).await {
            return answered;
        }
        let mut file = msg.file.clone();
        if let Some(voice) = file.as_ref().filter(|f| f.kind == FileKind::Voice) {
            let reply_to = msg.reply_to.as_deref().and_then(|id| snowflake(id, "message").ok());
            self.pacer.acquire(Destination::chat(&channel.get())).await;
            // A voice message has no content: words and buttons follow it as a message of their own.
            match crate::voice::send(&self.http, channel, voice, nonce(&format!("{}:voice", msg.idempotency_key)), reply_to).await? {
                voice::Sent::Voice(id) if msg.text.trim().is_empty() && components.is_empty() => {
                    return Ok(SendReceipt { message_id: Some(id.get().to_string()) });
                }
                voice::Sent::Voice(_) => file = None,
                voice::Sent::NotAllowedHere => {}
            }
        }
        // The model's words never ping anyone: @everyone, roles and users stay plain text.
        let mut message = CreateMessage::new()
            .content(msg.text.clone())
            .allowed_mentions(CreateAllowedMentions::new())
            .nonce(Nonce::String(nonce(&msg.idempotency_key)))
            .enforce_nonce(true);
        if !components.is_empty() {
            message = message.components(components);
        }
        if !self.settings.link_previews {
            // A link the model was tricked into writing is not fetched by Discord's unfurler.
            message = message.flags(MessageFlags::SUPPRESS_EMBEDS);
        }
        if let Some(file) = &file {
            let attachment = CreateAttachment::path(&file.path)
                .await
                .map_err(|e| SendError::Other(format!("could not read `{}`: {e}", file.file_name)))?;
            message = message.add_file(attachment);
        }
        if let Some(reply_to) = msg.reply_to.as_deref().and_then(|id| snowflake(id, "message").ok()) {
            // A deleted original must not cost the answer.
            let reference = MessageReference::new(MessageReferenceKind::Default, channel)
                .message_id(MessageId::new(reply_to))
                .fail_if_not_exists(false);
            message = message.reference_message(reference);
        }
        let mut retries = 0;
        loop {
            self.pacer.acquire(Destination::chat(&channel.get())).await;
            match channel.send_message(&self.http, message.clone()).await {
                Ok(sent) => return Ok(SendReceipt { message_id: Some(sent.id.get().to_string()) }),
                Err(e) => match classify(e) {
                    SendError::Ambiguous(why) if retries < AMBIGUOUS_RETRIES => {
                        retries += 1;
                        tracing::warn!(channel = channel.get(), "{why}; sending again with the same nonce (Discord keeps one copy)");
                        tokio::time::sleep(Duration::from_millis(250 * u64::from(retries))).await;
                    }
                    SendError::RateLimited { retry_after } => {
                        // Later sends to this channel wait too, not only this one's retry.
                        self.pacer.block(&channel.get(), retry_after);
                        return Err(SendError::RateLimited { retry_after });
                    }
                    other => return Err(other),
                },
            }
        }
    }

    async fn edit(&self, target: &ChatTarget, message_id: &str, text: &str) -> Result<(), SendError> {
        let channel = channel_of(target)?;
        let id = MessageId::new(snowflake(message_id, "message")?);
        if text.trim().is_empty() {
            return Ok(());
        }
        let mut edit = EditMessage::new().content(text);
        if !self.settings.link_previews {
            edit = edit.flags(MessageFlags::SUPPRESS_EMBEDS);
        }
        // Edits have their own per-message bucket at Discord; they count only globally here.
        self.pacer.acquire(Destination::global()).await;
        channel.edit_message(&self.http, id, edit).await.map(|_| ()).map_err(classify)
    }

    fn liveness_timeout(&self) -> Option<Duration> {
        // Progress is reported while the shard is connected; a run loop that stops reporting is stuck.
        Some(self.settings.reconnect_grace + Duration::from_secs(30))
    }

    async fn typing(&self, target: &ChatTarget) -> Result<(), SendError> {
        channel_of(target)?.broadcast_typing(&self.http).await.map_err(classify)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nonces_fit_discord_and_follow_the_key() {
        let a = nonce("turn-1:0");
        assert_eq!(a.len(), 25);
        assert_eq!(a, nonce("turn-1:0"));
        assert_ne!(a, nonce("turn-1:1"));
    }

    #[test]
    fn oversized_button_rows_are_trimmed_to_what_discord_takes() {
        let row: Vec<Button> = (0..7).map(|i| Button { label: format!("b{i}"), data: format!("/x {i}") }).collect();
        let rows: Vec<Vec<Button>> =
            (0..7).map(|_| row.clone()).chain([vec![Button { label: "bad".into(), data: "x".repeat(101) }]]).collect();
        let built = action_rows(&rows);
        assert_eq!(built.len(), 5);
        let json = serde_json::to_value(&built).unwrap();
        assert!(json.as_array().unwrap().iter().all(|r| r["components"].as_array().unwrap().len() == 5), "{json}");
    }
}
