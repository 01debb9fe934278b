//! [`TelegramAdapter`]: the send side (messages, edits, typing, buttons; files in
//! `crate::files`) and the entry to the polling loop in [`crate::poll`] or the webhook in
//! [`crate::webhook`].

use crate::budget::Budget;
use crate::errors::{self, classify};
use crate::files::Upload;
use crate::settings::{Mode, TelegramSettings};
use async_trait::async_trait;
use hermes_adapter::render::telegram_html::html_to_plain;
use hermes_adapter::{
    AdapterContext, AdapterError, Button, Capabilities, ChatTarget, LengthUnit, MarkdownDialect, OutboundFile, OutboundMessage, Platform,
    PlatformAdapter, SendError, SendReceipt, StreamStyle,
};
use std::time::Duration;
use teloxide::ApiError;
use teloxide::Bot;
use teloxide::RequestError;
use teloxide::payloads::{EditMessageTextSetters, SendChatActionSetters, SendMessageSetters};
use teloxide::prelude::Requester;
use teloxide::types::{
    ChatAction, ChatId, InlineKeyboardButton, InlineKeyboardMarkup, LinkPreviewOptions, MessageId, ParseMode, ReplyParameters, ThreadId,
};

/// Telegram's limit, in UTF-16 code units of the visible text.
pub const MAX_MESSAGE_LEN: usize = 4096;
/// Flood waits up to this long are sat out inside `send`; longer ones go back to the gateway.
const INLINE_FLOOD_WAIT: Duration = Duration::from_secs(5);
const MAX_INLINE_FLOOD_RETRIES: u32 = 8;
/// Sends and edits: long enough for a slow Bot API server, short enough to notice a dead one.
const SEND_TIMEOUT: Duration = Duration::from_secs(17);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const DEFAULT_API: &str = "https://api.telegram.org";

#[derive(Debug, thiserror::Error)]
pub enum TelegramError {
    #[error("the Telegram bot token is not of the form <bot id>:<secret> (check TELEGRAM_BOT_TOKEN)")]
    BadToken,
    #[error("`{0}` is not a usable Telegram API base URL (expected http(s)://host[:port][/path])")]
    BadUrl(String),
    #[error("could not build the HTTP client: {0}")]
    Client(String),
}

pub struct TelegramAdapter {
    platform: Platform,
    capabilities: Capabilities,
    pub(crate) settings: TelegramSettings,
    /// Sends, edits and downloads.
    pub(crate) bot: Bot,
    /// Long polls, on a client whose timeout outlasts the poll.
    pub(crate) poll_bot: Bot,
    pub(crate) budget: Budget,
}

/// Idle connections to the Bot API kept for reuse.
const IDLE_CONNECTIONS: usize = 16;

impl TelegramAdapter {
    pub fn new(settings: TelegramSettings) -> Result<Self, TelegramError> {
        if settings.bot_id().is_none() {
            return Err(TelegramError::BadToken);
        }
        let base = settings.api_base_url.as_deref().unwrap_or(DEFAULT_API).trim_end_matches('/');
        let url = url::Url::parse(base)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.has_host())
            .ok_or_else(|| TelegramError::BadUrl(base.to_string()))?;
        let build = |timeout: Duration| {
            teloxide::net::default_reqwest_settings()
                .connect_timeout(CONNECT_TIMEOUT)
                .timeout(timeout)
                .tcp_nodelay(true)
                // Reused, but not one kept per send that ever ran at once (each idle connection
                // holds about 20 KB for 90 s).
                .pool_max_idle_per_host(IDLE_CONNECTIONS)
                .build()
                .map_err(|e| TelegramError::Client(e.to_string()))
        };
        let bot = Bot::with_client(settings.token.clone(), build(SEND_TIMEOUT)?).set_api_url(url.clone());
        let poll_bot = Bot::with_client(settings.token.clone(), build(settings.poll_timeout + Duration::from_secs(15))?).set_api_url(url);
        let capabilities = Capabilities {
            max_message_len: MAX_MESSAGE_LEN,
            length_unit: LengthUnit::Utf16,
            // The gateway renders whole answers to Telegram HTML and splits them.
            dialect: MarkdownDialect::TelegramHtml,
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
        Ok(Self { platform: Platform::new("telegram"), capabilities, budget: Budget::new(settings.budget), settings, bot, poll_bot })
    }

    async fn send_text(&self, msg: &OutboundMessage) -> Result<SendReceipt, SendError> {
        let chat = chat_id(&msg.target)?;
        let mut thread = thread_id(&msg.target)?;
        let mut reply_to = msg.reply_to.as_deref().and_then(|id| id.parse::<i32>().ok());
        let markup = keyboard(&msg.buttons);
        let mut text = msg.text.clone();
        let mut parse_mode = Some(ParseMode::Html);
        if text.trim().is_empty() {
            return Err(SendError::Other("nothing to send: the message is empty".to_string()));
        }
        let mut flood_retries = 0;
        loop {
            self.budget.acquire(chat).await;
            let mut request = self.bot.send_message(ChatId(chat), text.clone());
            if let Some(options) = self.link_preview() {
                request = request.link_preview_options(options);
            }
            if let Some(mode) = parse_mode {
                request = request.parse_mode(mode);
            }
            if let Some(t) = thread {
                request = request.message_thread_id(ThreadId(MessageId(t)));
            }
            if let Some(r) = reply_to {
                request = request
                    .reply_parameters(ReplyParameters { allow_sending_without_reply: Some(true), ..ReplyParameters::new(MessageId(r)) });
            }
            if let Some(m) = &markup {
                request = request.reply_markup(m.clone());
            }
            let error = match request.await {
                Ok(sent) => return Ok(SendReceipt { message_id: Some(sent.id.0.to_string()) }),
                Err(e) => e,
            };
            match &error {
                // Our HTML is generated, so this is rare; the same words as plain text beat silence.
                RequestError::Api(ApiError::CantParseEntities(detail)) if parse_mode.is_some() => {
                    tracing::warn!(chat, "Telegram rejected the formatting ({detail}); sending this chunk as plain text");
                    text = html_to_plain(&msg.text);
                    parse_mode = None;
                }
                // The forum topic was deleted: the answer still belongs in the chat.
                e if thread.is_some() && errors::is_thread_not_found(e) => {
                    tracing::warn!(chat, "the topic no longer exists; sending to the main chat");
                    thread = None;
                }
                RequestError::Api(ApiError::MessageToReplyNotFound) if reply_to.is_some() => reply_to = None,
                e => match errors::retry_after(e) {
                    Some(wait) => {
                        self.budget.block(chat, wait);
                        flood_retries += 1;
                        if wait > INLINE_FLOOD_WAIT || flood_retries > MAX_INLINE_FLOOD_RETRIES {
                            return Err(SendError::RateLimited { retry_after: wait });
                        }
                        tracing::debug!(chat, wait_ms = wait.as_millis() as u64, "flood control; waiting");
                    }
                    None => return Err(classify(error)),
                },
            }
        }
    }
}

impl TelegramAdapter {
    /// Previews switched off, unless the configuration wants them: a link the model was tricked
    /// into writing would otherwise be fetched by Telegram, with whatever data its URL carries.
    fn link_preview(&self) -> Option<LinkPreviewOptions> {
        (!self.settings.link_previews).then_some(LinkPreviewOptions {
            is_disabled: true,
            url: None,
            prefer_small_media: false,
            prefer_large_media: false,
            show_above_text: false,
        })
    }

    /// A photo, a document or a voice note ([`crate::files`]), with the message's text as its
    /// caption.
    async fn send_file(&self, msg: &OutboundMessage, file: &OutboundFile) -> Result<SendReceipt, SendError> {
        let upload = Upload {
            chat: chat_id(&msg.target)?,
            thread: thread_id(&msg.target)?.map(|t| ThreadId(MessageId(t))),
            caption: (!msg.text.trim().is_empty()).then(|| msg.text.clone()),
        };
        self.send_upload(&upload, file).await
    }
}

/// Inline keyboard from button rows; Telegram refuses callback data over 64 bytes, so such a
/// button is left out (with a warning) rather than failing the whole message.
fn keyboard(rows: &[Vec<Button>]) -> Option<InlineKeyboardMarkup> {
    let rows: Vec<Vec<InlineKeyboardButton>> = rows
        .iter()
        .map(|row| {
            row.iter()
                .filter(|b| {
                    let fits = !b.data.is_empty() && b.data.len() <= 64;
                    if !fits {
                        tracing::warn!(label = %b.label, "button data must be 1-64 bytes for Telegram; button left out");
                    }
                    fits
                })
                .map(|b| InlineKeyboardButton::callback(b.label.clone(), b.data.clone()))
                .collect::<Vec<_>>()
        })
        .filter(|row| !row.is_empty())
        .collect();
    (!rows.is_empty()).then(|| InlineKeyboardMarkup::new(rows))
}

fn chat_id(target: &ChatTarget) -> Result<i64, SendError> {
    target.chat_id.parse().map_err(|_| SendError::NotFound(format!("`{}` is not a Telegram chat id (a number)", target.chat_id)))
}

fn thread_id(target: &ChatTarget) -> Result<Option<i32>, SendError> {
    target
        .thread_id
        .as_deref()
        .map(|t| t.parse().map_err(|_| SendError::NotFound(format!("`{t}` is not a Telegram topic id (a number)"))))
        .transpose()
}

#[async_trait]
impl PlatformAdapter for TelegramAdapter {
    fn platform(&self) -> &Platform {
        &self.platform
    }

    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    async fn run(&self, ctx: AdapterContext) -> Result<(), AdapterError> {
        match &self.settings.mode {
            Mode::Polling => crate::poll::run(self, ctx).await,
            Mode::Webhook(hook) => crate::webhook::run(self, ctx, hook).await,
        }
    }

    /// Only one process may long-poll a token, so polling is leased by it; any replica may serve
    /// webhook deliveries, so there is nothing to lease.
    fn credential(&self) -> Option<hermes_adapter::CredentialId> {
        match self.settings.mode {
            Mode::Polling => Some(hermes_adapter::CredentialId::new("Telegram bot token", &self.settings.token)),
            Mode::Webhook(_) => None,
        }
    }

    /// In webhook mode every replica behind the load balancer listens: a delivery is stored by
    /// whichever one Telegram reached (and `setWebhook` with the same URL is the same call from
    /// each).
    fn takes_events_on_any_replica(&self) -> bool {
        matches!(self.settings.mode, Mode::Webhook(_))
    }

    async fn probe(&self) -> Result<Option<String>, AdapterError> {
        self.identify_for_probe().await
    }

    async fn send(&self, msg: &OutboundMessage) -> Result<SendReceipt, SendError> {
        match &msg.file {
            Some(file) => self.send_file(msg, file).await,
            None => self.send_text(msg).await,
        }
    }

    async fn edit(&self, target: &ChatTarget, message_id: &str, text: &str) -> Result<(), SendError> {
        let chat = chat_id(target)?;
        let id: i32 = message_id.parse().map_err(|_| SendError::NotFound(format!("`{message_id}` is not a Telegram message id")))?;
        let html = text.to_string();
        if html.trim().is_empty() {
            return Ok(());
        }
        self.budget.acquire(chat).await;
        let mut request = self.bot.edit_message_text(ChatId(chat), MessageId(id), html).parse_mode(ParseMode::Html);
        if let Some(options) = self.link_preview() {
            request = request.link_preview_options(options);
        }
        let result = request.await;
        match result {
            Ok(_) | Err(RequestError::Api(ApiError::MessageNotModified)) => Ok(()),
            Err(RequestError::Api(ApiError::CantParseEntities(_))) => {
                match self.bot.edit_message_text(ChatId(chat), MessageId(id), html_to_plain(text)).await {
                    Ok(_) | Err(RequestError::Api(ApiError::MessageNotModified)) => Ok(()),
                    Err(e) => Err(classify(e)),
                }
            }
            Err(e) => {
                if let Some(wait) = errors::retry_after(&e) {
                    self.budget.block(chat, wait);
                }
                Err(classify(e))
            }
        }
    }

    fn liveness_timeout(&self) -> Option<Duration> {
        // Every long poll returns within its timeout; one that has not for this long is stuck. A
        // webhook waits for Telegram's calls, and a quiet bot gets none.
        matches!(self.settings.mode, Mode::Polling).then(|| self.settings.poll_timeout + Duration::from_secs(20))
    }

    async fn typing(&self, target: &ChatTarget) -> Result<(), SendError> {
        let chat = chat_id(target)?;
        let mut request = self.bot.send_chat_action(ChatId(chat), ChatAction::Typing);
        if let Some(t) = thread_id(target)? {
            request = request.message_thread_id(ThreadId(MessageId(t)));
        }
        request.await.map(|_| ()).map_err(classify)
    }
}
