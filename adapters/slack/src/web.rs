//! The Web API side: one slack-morphism client over a TLS setup of our own, every call bounded
//! by a timeout, and the ambiguous-send rule. Slack has no idempotency key for `chat.postMessage`,
//! so each message carries its key in Slack's message metadata; after an answer that was lost,
//! the channel (or thread) is read back for that key before anything is sent again.

use crate::errors::classify;
use hermes_adapter::SendError;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use slack_morphism::prelude::*;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

pub(crate) type Connector = SlackClientHyperConnector<HttpsConnector<HttpConnector>>;

/// The metadata event type our messages carry their key under.
pub(crate) const KEY_EVENT_TYPE: &str = "hermes_message";
/// How far back a lost send is looked for (the key is unique, so a wide window costs nothing
/// but a page of history).
const LOOKUP_LIMIT: u16 = 50;

#[derive(Debug, thiserror::Error)]
pub enum SlackError {
    #[error("the Slack bot token is empty or not a bot token (expected xoxb-…; check SLACK_BOT_TOKEN)")]
    BadBotToken,
    #[error("the Slack app-level token is empty or not an app token (expected xapp-…; check SLACK_APP_TOKEN)")]
    BadAppToken,
    #[error(
        "`{0}` is not a usable Slack API URL (expected https://host/api/, or http:// on a loopback host; the tokens must not cross a network in clear text)"
    )]
    BadUrl(String),
    #[error("could not set up TLS for Slack: {0}")]
    Tls(String),
}

impl SlackError {
    /// The key of `platforms.slack` at fault.
    pub fn key(&self) -> Option<&'static str> {
        Some(match self {
            SlackError::BadBotToken => "token",
            SlackError::BadAppToken => "app_token",
            SlackError::BadUrl(_) => "api_base_url",
            SlackError::Tls(_) => "",
        })
    }
}

/// The Web API client and the two tokens.
pub(crate) struct Web {
    pub(crate) client: Arc<SlackClient<Connector>>,
    bot: SlackApiToken,
    app: SlackApiToken,
    timeout: Duration,
    /// The TLS setup the socket uses too.
    pub(crate) tls: Arc<rustls::ClientConfig>,
}

impl Web {
    pub(crate) fn new(bot: &str, app: &str, api_base_url: Option<&str>, timeout: Duration) -> Result<Self, SlackError> {
        if !bot.trim().starts_with("xoxb-") {
            return Err(SlackError::BadBotToken);
        }
        if !app.trim().starts_with("xapp-") {
            return Err(SlackError::BadAppToken);
        }
        let tls = Arc::new(tls_config()?);
        let https = hyper_rustls::HttpsConnectorBuilder::new().with_tls_config((*tls).clone());
        let connector = match api_base_url {
            Some(base) => {
                let base = checked_base(base)?;
                Connector::with_connector(https.https_or_http().enable_http1().build()).with_slack_api_url(&base)
            }
            None => Connector::with_connector(https.https_only().enable_http1().build()),
        };
        let token = |value: &str| SlackApiToken::new(SlackApiTokenValue::new(value.trim().to_string()));
        Ok(Self { client: Arc::new(SlackClient::new(connector)), bot: token(bot), app: token(app), timeout, tls })
    }

    fn bot(&self) -> SlackClientSession<'_, Connector> {
        self.client.open_session(&self.bot)
    }

    /// `call`, given up on after the timeout: an unanswered call may have been carried out.
    async fn bounded<T>(&self, what: &str, call: impl Future<Output = ClientResult<T>>) -> Result<T, SendError> {
        match tokio::time::timeout(self.timeout, call).await {
            Ok(result) => result.map_err(classify),
            Err(_) => Err(SendError::Ambiguous(format!("Slack did not answer {what} within {:?}", self.timeout))),
        }
    }

    /// Who the bot is (also proves the bot token works).
    pub(crate) async fn auth_test(&self) -> Result<SlackApiAuthTestResponse, ClientError> {
        match tokio::time::timeout(self.timeout, self.bot().auth_test()).await {
            Ok(result) => result.map_err(ClientError::Slack),
            Err(_) => Err(ClientError::Timeout),
        }
    }

    /// A fresh Socket Mode URL (app-level token).
    pub(crate) async fn open_socket(&self) -> Result<String, ClientError> {
        let session = self.client.open_session(&self.app);
        match tokio::time::timeout(self.timeout, session.apps_connections_open(&SlackApiAppsConnectionOpenRequest::new())).await {
            Ok(result) => result.map(|r| r.url.0.to_string()).map_err(ClientError::Slack),
            Err(_) => Err(ClientError::Timeout),
        }
    }

    /// Post a message carrying `key`; an answer that was lost is settled by looking for the key
    /// (see the module doc), and a message not found is sent once more.
    /// `author`: the bot's user id, when known; only its own messages count as found.
    pub(crate) async fn post(
        &self,
        request: SlackApiChatPostMessageRequest,
        key: &str,
        author: Option<&str>,
    ) -> Result<SlackTs, SendError> {
        let request = with_key(request, key);
        let mut attempts = 0;
        loop {
            attempts += 1;
            match self.bounded("chat.postMessage", self.bot().chat_post_message(&request)).await {
                Ok(sent) => return Ok(sent.ts),
                Err(SendError::Ambiguous(why)) => {
                    // Give Slack a moment to finish what it may have started.
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    match self.find_by_key(&request.channel, request.thread_ts.as_ref(), key, author).await {
                        Ok(Some(ts)) => {
                            tracing::info!(channel = %request.channel, "a send whose answer was lost had been posted; not sending it again");
                            return Ok(ts);
                        }
                        Ok(None) if attempts < 2 => {
                            tracing::warn!(channel = %request.channel, "{why}; the message is not in the channel, sending it again");
                        }
                        Ok(None) => return Err(SendError::Ambiguous(why)),
                        Err(e) => return Err(SendError::Ambiguous(format!("{why}; and it could not be looked up: {e}"))),
                    }
                }
                Err(other) => return Err(other),
            }
        }
    }

    /// A message only `user` sees, in `channel` (and `thread`): not part of the channel's history.
    pub(crate) async fn ephemeral(&self, channel: &str, user: &str, thread: Option<&str>, text: &str) -> Result<(), SendError> {
        let mut request =
            SlackApiChatPostEphemeralRequest::new(channel.into(), user.into(), SlackMessageContent::new().with_text(text.into()));
        request.thread_ts = thread.map(SlackTs::from);
        self.bounded("chat.postEphemeral", self.bot().chat_post_ephemeral(&request)).await.map(|_| ())
    }

    pub(crate) async fn update(&self, request: &SlackApiChatUpdateRequest) -> Result<(), SendError> {
        self.bounded("chat.update", self.bot().chat_update(request)).await.map(|_| ())
    }

    /// The message with `key` in its metadata among the latest of the channel (or thread),
    /// written by `author` when it is known: another app in the channel could post the same
    /// metadata, and taking its message for ours would silently drop an answer.
    pub(crate) async fn find_by_key(
        &self,
        channel: &SlackChannelId,
        thread: Option<&SlackTs>,
        key: &str,
        author: Option<&str>,
    ) -> Result<Option<SlackTs>, SendError> {
        let messages = match thread {
            Some(ts) => {
                // slack-morphism's request type lacks `include_all_metadata`; its generic GET
                // takes the parameter list as Slack documents it.
                let limit = LOOKUP_LIMIT.to_string();
                let yes = "true".to_string();
                let params =
                    vec![("channel", Some(&channel.0)), ("ts", Some(&ts.0)), ("limit", Some(&limit)), ("include_all_metadata", Some(&yes))];
                let session = self.bot();
                let call =
                    session.http_session_api.http_get::<SlackApiConversationsRepliesResponse, _, _>("conversations.replies", &params, None);
                self.bounded("conversations.replies", call).await?.messages
            }
            None => {
                let request = SlackApiConversationsHistoryRequest::new()
                    .with_channel(channel.clone())
                    .with_limit(LOOKUP_LIMIT)
                    .with_include_all_metadata(true);
                self.bounded("conversations.history", self.bot().conversations_history(&request)).await?.messages
            }
        };
        let by_author = |m: &SlackHistoryMessage| author.is_none_or(|a| m.sender.user.as_ref().is_some_and(|u| u.0 == a));
        Ok(messages.into_iter().find(|m| by_author(m) && carries_key(&m.content, key)).map(|m| m.origin.ts))
    }

    /// Whether the bot has written in the thread (a thread it takes part in needs no mention).
    pub(crate) async fn bot_in_thread(&self, channel: &SlackChannelId, thread: &SlackTs, bot_user: &str) -> Result<bool, SendError> {
        let request = SlackApiConversationsRepliesRequest::new(channel.clone(), thread.clone()).with_limit(200);
        let replies = self.bounded("conversations.replies", self.bot().conversations_replies(&request)).await?;
        Ok(replies.messages.iter().any(|m| m.sender.user.as_ref().is_some_and(|u| u.0 == bot_user)))
    }

    /// The first message of a thread (its parent), if Slack still has it.
    pub(crate) async fn first_of_thread(
        &self,
        channel: &SlackChannelId,
        thread: &SlackTs,
    ) -> Result<Option<SlackHistoryMessage>, SendError> {
        let request = SlackApiConversationsRepliesRequest::new(channel.clone(), thread.clone()).with_limit(1);
        let replies = self.bounded("conversations.replies", self.bot().conversations_replies(&request)).await?;
        Ok(replies.messages.into_iter().find(|m| m.origin.ts == *thread))
    }

    /// A file through Slack's external upload: reserve, upload, then share it in the chat.
    pub(crate) async fn upload(
        &self,
        channel: &SlackChannelId,
        thread: Option<&SlackTs>,
        file_name: &str,
        mime: &str,
        content: Vec<u8>,
        comment: Option<String>,
    ) -> Result<(), SendError> {
        let reserve = SlackApiFilesGetUploadUrlExternalRequest::new(file_name.to_string(), content.len());
        let reserved = self.bounded("files.getUploadURLExternal", self.bot().get_upload_url_external(&reserve)).await?;
        let upload = SlackApiFilesUploadViaUrlRequest::new(reserved.upload_url, content, mime.to_string());
        self.bounded("the file upload", self.bot().files_upload_via_url(&upload)).await?;
        let mut complete = SlackApiFilesCompleteUploadExternalRequest::new(vec![
            SlackApiFilesComplete::new(reserved.file_id).with_title(file_name.to_string()),
        ])
        .with_channel_id(channel.clone());
        if let Some(thread) = thread {
            complete = complete.with_thread_ts(thread.clone());
        }
        if let Some(comment) = comment.filter(|c| !c.trim().is_empty()) {
            complete = complete.with_initial_comment(comment);
        }
        self.bounded("files.completeUploadExternal", self.bot().files_complete_upload_external(&complete)).await.map(|_| ())
    }
}

/// A failure of a call made outside sending (start-up, the socket URL).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClientError {
    #[error("{0}")]
    Slack(slack_morphism::errors::SlackClientError),
    #[error("Slack did not answer in time")]
    Timeout,
}

fn with_key(mut request: SlackApiChatPostMessageRequest, key: &str) -> SlackApiChatPostMessageRequest {
    let payload = HashMap::from([("key".to_string(), key.to_string())]);
    request.content.metadata = Some(SlackMessageMetadata { event_type: KEY_EVENT_TYPE.to_string(), event_payload: Some(payload) });
    request
}

fn carries_key(content: &SlackMessageContent, key: &str) -> bool {
    content
        .metadata
        .as_ref()
        .is_some_and(|m| m.event_type == KEY_EVENT_TYPE && m.event_payload.as_ref().and_then(|p| p.get("key")).is_some_and(|k| k == key))
}

/// `base` without its trailing slash (slack-morphism appends `/<method>`), refused unless it is
/// https, or http on a loopback host.
fn checked_base(base: &str) -> Result<String, SlackError> {
    let trimmed = base.trim().trim_end_matches('/');
    let url = url::Url::parse(trimmed).map_err(|_| SlackError::BadUrl(base.to_string()))?;
    let loopback = match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        None => false,
    };
    match url.scheme() {
        "https" if url.has_host() => Ok(trimmed.to_string()),
        "http" if loopback => Ok(trimmed.to_string()),
        _ => Err(SlackError::BadUrl(base.to_string())),
    }
}

/// TLS with ring named explicitly and the system's roots (none found is not fatal here: a
/// loopback fake needs none, and a real handshake then fails with a clear error).
fn tls_config() -> Result<rustls::ClientConfig, SlackError> {
    let mut roots = rustls::RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    for error in &found.errors {
        tracing::debug!("reading the system's TLS roots: {error}");
    }
    let (added, _) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        tracing::warn!("no system TLS root certificates found; connections to https://slack.com will fail (install ca-certificates)");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| SlackError::Tls(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_urls_are_https_or_loopback_http() {
        assert_eq!(checked_base("https://slack.example.com/api/").unwrap(), "https://slack.example.com/api");
        assert_eq!(checked_base("http://127.0.0.1:8083/api/").unwrap(), "http://127.0.0.1:8083/api");
        assert_eq!(checked_base("http://localhost:1/api").unwrap(), "http://localhost:1/api");
        for bad in ["http://10.0.0.5/api/", "http://slack.example.com/api", "ftp://127.0.0.1/", "not a url", "http://[::2]/"] {
            assert!(checked_base(bad).is_err(), "{bad} is refused");
        }
    }

    #[test]
    fn the_key_travels_in_metadata_and_is_found_again() {
        let request =
            with_key(SlackApiChatPostMessageRequest::new("C1".into(), SlackMessageContent::new().with_text("hi".into())), "turn-1:0");
        assert!(carries_key(&request.content, "turn-1:0"));
        assert!(!carries_key(&request.content, "turn-1:1"));
        let json = serde_json::to_value(&request).unwrap();
        assert_eq!(json["metadata"]["event_type"], KEY_EVENT_TYPE, "{json}");
    }
}
