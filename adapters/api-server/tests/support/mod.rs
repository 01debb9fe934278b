//! A running API server over loopback with a fake gateway behind it: an inbox that records
//! events and answers them through the adapter's `stream()` / `send()` like the gateway does,
//! and an in-memory session directory.

#![allow(dead_code)]

use async_trait::async_trait;
use hermes_adapter::{
    AcceptError, AcceptOutcome, AdapterContext, AdapterError, ChatTarget, HealthReporter, InboundEvent, InboundSink, OutboundMessage,
    PlatformAdapter, SessionDirectory, SessionDirectoryError, SessionSource, StoredMessage, StreamEvent, Usage,
};
use hermes_api_server::{ApiServerAdapter, ApiServerSettings};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub(crate) const KEY: &str = "api-test-k3y-5f0c9e2a";
pub(crate) const USAGE: Usage = Usage { prompt_tokens: 11, completion_tokens: 5, cached_tokens: 0, cache_write_tokens: 0 };

/// Records events; deduplicates on event id like the real inbox.
pub(crate) struct FakeInbox {
    pub events: Mutex<Vec<InboundEvent>>,
    seen: Mutex<HashSet<String>>,
    tx: mpsc::UnboundedSender<InboundEvent>,
    pub shutting_down: AtomicBool,
}

#[async_trait]
impl InboundSink for FakeInbox {
    async fn accept(&self, event: InboundEvent) -> Result<AcceptOutcome, AcceptError> {
        if self.shutting_down.load(Ordering::SeqCst) {
            return Err(AcceptError::ShuttingDown);
        }
        if !self.seen.lock().unwrap().insert(event.event_id.clone()) {
            return Ok(AcceptOutcome::Duplicate);
        }
        self.events.lock().unwrap().push(event.clone());
        let _ = self.tx.send(event);
        Ok(AcceptOutcome::Accepted)
    }
}

/// Conversations by chat id.
#[derive(Default)]
pub(crate) struct FakeSessions {
    pub map: Mutex<HashMap<String, Vec<StoredMessage>>>,
}

impl FakeSessions {
    fn record(&self, source: &SessionSource, role: &str, content: &str) {
        self.map.lock().unwrap().entry(source.chat_id.clone()).or_default().push(StoredMessage {
            role: role.to_string(),
            content: content.to_string(),
            tool_name: None,
            timestamp: chrono::Utc::now(),
        });
    }
}

#[async_trait]
impl SessionDirectory for FakeSessions {
    async fn open(&self, source: &SessionSource) -> Result<String, SessionDirectoryError> {
        self.map.lock().unwrap().entry(source.chat_id.clone()).or_default();
        Ok(format!("sess-{}", source.chat_id))
    }
    async fn history(&self, source: &SessionSource, limit: usize) -> Result<Option<Vec<StoredMessage>>, SessionDirectoryError> {
        Ok(self.map.lock().unwrap().get(&source.chat_id).map(|messages| {
            let skip = messages.len().saturating_sub(limit);
            messages[skip..].to_vec()
        }))
    }
    async fn close(&self, source: &SessionSource) -> Result<bool, SessionDirectoryError> {
        Ok(self.map.lock().unwrap().remove(&source.chat_id).is_some())
    }
}

fn outbound(event: &InboundEvent, text: &str, is_final: bool) -> OutboundMessage {
    OutboundMessage {
        target: target(event),
        text: text.to_string(),
        reply_to: event.message_id.clone(),
        idempotency_key: format!("{}:{}", event.event_id, is_final),
        is_final,
        usage: is_final.then_some(USAGE),
        finish_reason: is_final.then(|| "stop".to_string()),
        buttons: Vec::new(),
        file: None,
    }
}

fn target(event: &InboundEvent) -> ChatTarget {
    ChatTarget { platform: event.source.platform.clone(), chat_id: event.source.chat_id.clone(), thread_id: None }
}

/// What the fake gateway does with a message, chosen by its text.
async fn answer(adapter: &ApiServerAdapter, sessions: &FakeSessions, event: InboundEvent) {
    sessions.record(&event.source, "user", &event.text);
    let target = target(&event);
    let reply_to = event.message_id.as_deref();
    let stream = |e: StreamEvent| {
        let target = target.clone();
        async move {
            let _ = adapter.stream(&target, reply_to, &e).await;
        }
    };
    let token = |t: &str| StreamEvent::Token { text: t.to_string() };
    let final_text = match event.text.as_str() {
        "silent" => return,
        "stream" => {
            for t in ["Hello ", "there "] {
                stream(token(t)).await;
            }
            // The final send repeats what was streamed, as the gateway does.
            "Hello there friend".to_string()
        }
        "tools" => {
            let args = r#"{"cmd":"date"}"#.to_string();
            stream(StreamEvent::ToolCall { id: "call_1".into(), name: "terminal".into(), arguments: args }).await;
            stream(StreamEvent::ToolResult { id: "call_1".into(), name: "terminal".into(), content: "noon".into() }).await;
            stream(token("It is noon.")).await;
            "It is noon.".to_string()
        }
        "parts" => {
            let _ = adapter.send(&outbound(&event, "part one", false)).await;
            "part two".to_string()
        }
        "slow" => {
            tokio::time::sleep(Duration::from_millis(400)).await;
            "slow answer".to_string()
        }
        other => format!("echo: {other}"),
    };
    let _ = adapter.send(&outbound(&event, &final_text, true)).await;
    sessions.record(&event.source, "assistant", &final_text);
}

pub(crate) struct Harness {
    pub base: String,
    pub client: reqwest::Client,
    pub adapter: Arc<ApiServerAdapter>,
    pub inbox: Arc<FakeInbox>,
    pub sessions: Arc<FakeSessions>,
    pub health: HealthReporter,
    pub shutdown: CancellationToken,
    pub run: JoinHandle<Result<(), AdapterError>>,
}

pub(crate) fn settings() -> ApiServerSettings {
    ApiServerSettings {
        host: "127.0.0.1".into(),
        port: 0,
        key: Some(KEY.into()),
        allow_no_auth: false,
        model_name: "hermes-test".into(),
        request_timeout: Duration::from_secs(5),
        cors_origins: Vec::new(),
    }
}

impl Harness {
    pub(crate) async fn start() -> Self {
        Self::with(settings()).await
    }

    pub(crate) async fn with(settings: ApiServerSettings) -> Self {
        let adapter = Arc::new(ApiServerAdapter::new(settings).expect("valid settings"));
        let (tx, mut rx) = mpsc::unbounded_channel::<InboundEvent>();
        let inbox = Arc::new(FakeInbox {
            events: Mutex::new(Vec::new()),
            seen: Mutex::new(HashSet::new()),
            tx,
            shutting_down: AtomicBool::new(false),
        });
        let sessions = Arc::new(FakeSessions::default());
        let gateway_adapter = adapter.clone();
        let gateway_sessions = sessions.clone();
        tokio::spawn(async move {
            while let Some(event) = rx.recv().await {
                let adapter = gateway_adapter.clone();
                let sessions = gateway_sessions.clone();
                tokio::spawn(async move { answer(&adapter, &sessions, event).await });
            }
        });
        let health = HealthReporter::new();
        let shutdown = CancellationToken::new();
        let ctx = AdapterContext::new(inbox.clone(), sessions.clone(), health.clone(), shutdown.clone());
        let runner = adapter.clone();
        let run = tokio::spawn(async move { runner.run(ctx).await });
        let mut addr = None;
        for _ in 0..500 {
            addr = adapter.local_addr();
            if addr.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let addr = addr.expect("server listening");
        Self { base: format!("http://{addr}"), client: reqwest::Client::new(), adapter, inbox, sessions, health, shutdown, run }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub(crate) fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.client.get(self.url(path)).bearer_auth(KEY)
    }

    pub(crate) fn post(&self, path: &str, body: serde_json::Value) -> reqwest::RequestBuilder {
        self.client.post(self.url(path)).bearer_auth(KEY).json(&body)
    }

    pub(crate) fn delete(&self, path: &str) -> reqwest::RequestBuilder {
        self.client.delete(self.url(path)).bearer_auth(KEY)
    }

    pub(crate) fn events(&self) -> Vec<InboundEvent> {
        self.inbox.events.lock().unwrap().clone()
    }

    pub(crate) fn last_event(&self) -> InboundEvent {
        self.events().pop().expect("an event was accepted")
    }
}

/// One Server-Sent Event.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sse {
    pub event: Option<String>,
    pub id: Option<String>,
    pub data: String,
}

impl Sse {
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.data).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.data))
    }
}

/// Parse a complete SSE body, skipping comments (keep-alives).
pub(crate) fn parse_sse(body: &str) -> Vec<Sse> {
    let mut out = Vec::new();
    for block in body.split("\n\n") {
        let mut sse = Sse { event: None, id: None, data: String::new() };
        let mut has_data = false;
        for line in block.lines() {
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "event" => sse.event = Some(value.to_string()),
                "id" => sse.id = Some(value.to_string()),
                "data" => {
                    if has_data {
                        sse.data.push('\n');
                    }
                    sse.data.push_str(value);
                    has_data = true;
                }
                _ => {}
            }
        }
        if has_data {
            out.push(sse);
        }
    }
    out
}

pub(crate) fn chat(content: &str) -> serde_json::Value {
    serde_json::json!({"model": "gpt-test", "messages": [{"role": "user", "content": content}]})
}
