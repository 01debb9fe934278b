//! Scripted fake of an OpenAI-compatible Chat Completions server that also
//! speaks the Anthropic Messages API.
//!
//! Tests push [`Reply`]s into a FIFO script; each `POST
//! /v1/chat/completions` or `POST /v1/messages` is recorded first and then
//! answered with the next scripted reply, or with the default (initially
//! [`Reply::Echo`]) once the script is empty. Both routes share the script and
//! the recording, so a test scripts the conversation once whatever wire
//! format the client speaks. Recording before answering keeps hung and
//! delayed requests observable. It also serves OpenAI's audio routes
//! (transcriptions and speech, see `audio`), scripted separately.

mod anthropic;
mod audio;
mod record;
mod reply;
mod wire;

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::serve::{self, Shutdown, ShutdownSignal};

use anthropic::{MessageMeta, PromptCache};
pub use audio::{DEFAULT_TRANSCRIPT, RecordedSpeech, RecordedTranscription};
pub use record::RecordedRequest;
pub use reply::{Reply, ToolCall};
use wire::{Answer, Meta};

/// The model id reported by `GET /v1/models` and used when a request names
/// none.
const MODEL_ID: &str = "fake-model";

/// Conversations in tests can carry large tool outputs; axum's 2 MiB default
/// would turn those into confusing 413s.
const BODY_LIMIT: usize = 64 * 1024 * 1024;

/// How to start a [`FakeLlm`] beyond the test defaults.
#[derive(Debug, Clone)]
pub struct LlmConfig {
    /// Where to listen; port 0 picks a free port.
    pub addr: SocketAddr,
    /// Keep every request for [`FakeLlm::requests`]. Long benchmark runs turn
    /// this off so memory stays flat; counting still works.
    pub record: bool,
}

impl Default for LlmConfig {
    fn default() -> Self {
        Self { addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), record: true }
    }
}

/// Handle to a running fake LLM server. Clones share the server; it stops
/// when the last clone drops or on [`FakeLlm::shutdown`].
#[derive(Clone)]
pub struct FakeLlm {
    inner: Arc<Inner>,
}

struct Inner {
    state: Arc<AppState>,
    addr: SocketAddr,
    // Dropped together with the last handle, which stops the server.
    shutdown: Shutdown,
}

/// State shared with the request handlers. It deliberately holds no
/// [`Shutdown`] owner, or the server would keep itself alive.
struct AppState {
    script: Mutex<Script>,
    requests: Mutex<Vec<RecordedRequest>>,
    /// Number of model POSTs seen (both routes); a watch so waiters wake up.
    seen: watch::Sender<usize>,
    /// What earlier Anthropic requests wrote to the simulated prompt cache.
    prompt_cache: Mutex<PromptCache>,
    /// The audio routes' script and recording (always recorded: tests send few).
    audio: Mutex<audio::AudioState>,
    record: bool,
    next_id: AtomicU64,
    shutdown: ShutdownSignal,
}

struct Script {
    queue: VecDeque<Reply>,
    default: Reply,
}

/// A panicking test thread must not make every later assertion fail with a
/// poison error that hides the real cause.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl FakeLlm {
    /// Starts on `127.0.0.1:0` with recording on.
    ///
    /// # Panics
    /// If the loopback listener cannot be bound (a broken test host).
    pub async fn start() -> FakeLlm {
        FakeLlm::start_with(LlmConfig::default()).await.expect("FakeLlm: failed to bind 127.0.0.1:0")
    }

    /// Starts with an explicit address and recording mode.
    pub async fn start_with(config: LlmConfig) -> io::Result<FakeLlm> {
        let shutdown = Shutdown::new();
        let state = Arc::new(AppState {
            script: Mutex::new(Script { queue: VecDeque::new(), default: Reply::Echo }),
            requests: Mutex::new(Vec::new()),
            seen: watch::channel(0).0,
            prompt_cache: Mutex::new(PromptCache::default()),
            audio: Mutex::new(audio::AudioState::default()),
            record: config.record,
            next_id: AtomicU64::new(1),
            shutdown: shutdown.signal(),
        });
        let router = Router::new()
            .route("/v1/chat/completions", post(chat_completions))
            .route("/v1/messages", post(messages))
            .route("/v1/models", get(models))
            .route("/v1/audio/transcriptions", post(audio::transcriptions))
            .route("/v1/audio/speech", post(audio::speech))
            .fallback(not_found)
            .layer(DefaultBodyLimit::max(BODY_LIMIT))
            .with_state(Arc::clone(&state));
        let addr = serve::spawn(config.addr, router, shutdown.signal()).await?;
        Ok(FakeLlm { inner: Arc::new(Inner { state, addr, shutdown }) })
    }

    /// `http://127.0.0.1:PORT/v1`, ready to use as an OpenAI base URL; an
    /// Anthropic client that appends `/messages` to a `/v1` base (or
    /// `/v1/messages` to the bare origin) reaches the Messages route.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.inner.addr)
    }

    /// The bound socket address.
    pub fn addr(&self) -> SocketAddr {
        self.inner.addr
    }

    /// Appends a reply to the FIFO script.
    pub fn push(&self, reply: Reply) {
        lock(&self.inner.state.script).queue.push_back(reply);
    }

    /// Replaces the reply used when the script is empty.
    pub fn set_default(&self, reply: Reply) {
        lock(&self.inner.state.script).default = reply;
    }

    /// Scripted replies not yet consumed.
    pub fn pending_replies(&self) -> usize {
        lock(&self.inner.state.script).queue.len()
    }

    /// Every model request so far (both wire formats), in arrival order
    /// (empty when recording is off).
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.inner.state.requests).clone()
    }

    /// Number of model requests so far (both wire formats), recorded or not.
    pub fn request_count(&self) -> usize {
        *self.inner.state.seen.borrow()
    }

    /// Waits until at least `n` requests arrived; `false` on timeout.
    pub async fn wait_for_requests(&self, n: usize, timeout: Duration) -> bool {
        let mut seen = self.inner.state.seen.subscribe();
        matches!(tokio::time::timeout(timeout, seen.wait_for(|count| *count >= n)).await, Ok(Ok(_)))
    }

    /// Stops accepting connections and releases hung or delayed requests
    /// (they get a 503). Idempotent.
    pub fn shutdown(&self) {
        self.inner.shutdown.trigger();
    }
}

impl fmt::Debug for FakeLlm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FakeLlm").field("base_url", &self.base_url()).finish_non_exhaustive()
    }
}

impl AppState {
    /// Records the request and, when `take_reply`, pops its reply under the
    /// same lock so concurrent requests get script entries in arrival order.
    fn admit(&self, request: &RecordedRequest, take_reply: bool) -> Option<Reply> {
        let mut script = lock(&self.script);
        if self.record {
            lock(&self.requests).push(request.clone());
        }
        self.seen.send_modify(|count| *count += 1);
        take_reply.then(|| script.queue.pop_front().unwrap_or_else(|| script.default.clone()))
    }
}

/// The wire format a route speaks; decides how answers and errors look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wire {
    OpenAi,
    Anthropic,
}

impl Wire {
    fn error_body(self, status: u16, message: &str) -> Value {
        match self {
            Wire::OpenAi => reply::error_body(status, message),
            Wire::Anthropic => anthropic::error_body(status, message),
        }
    }
}

fn record(path: &str, headers: &HeaderMap, parsed: Option<&Value>) -> RecordedRequest {
    RecordedRequest {
        path: path.to_owned(),
        stream: parsed.and_then(|b| b.get("stream")).and_then(Value::as_bool).unwrap_or(false),
        body: parsed.cloned().unwrap_or(Value::Null),
        authorization: headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).map(str::to_owned),
        headers: headers.iter().map(|(k, v)| (k.as_str().to_owned(), String::from_utf8_lossy(v.as_bytes()).into_owned())).collect(),
    }
}

async fn chat_completions(State(state): State<Arc<AppState>>, headers: HeaderMap, body: Bytes) -> Response {
    let parsed = serde_json::from_slice::<Value>(&body).ok().filter(Value::is_object);
    let request = record("/v1/chat/completions", &headers, parsed.as_ref());

    // A malformed body is still a POST worth seeing in assertions, but it
    // must not eat a scripted reply meant for a well-formed request.
    let Some(reply) = state.admit(&request, parsed.is_some()) else {
        return error_response(StatusCode::BAD_REQUEST, reply::error_body(400, "request body is not a JSON object"), None);
    };
    respond(&state, Wire::OpenAi, &request, reply).await
}

async fn messages(State(state): State<Arc<AppState>>, headers: HeaderMap, body: Bytes) -> Response {
    let parsed = serde_json::from_slice::<Value>(&body).ok().filter(Value::is_object);
    let request = record("/v1/messages", &headers, parsed.as_ref());
    let version = headers.get("anthropic-version").and_then(|v| v.to_str().ok());
    // Requests the real API would reject are recorded but, like malformed
    // bodies, leave the script alone.
    let verdict = match &parsed {
        Some(body) => anthropic::validate(version, body),
        None => Err("request body is not a JSON object".to_owned()),
    };
    let Some(reply) = state.admit(&request, verdict.is_ok()) else {
        let message = verdict.err().unwrap_or_default();
        return error_response(StatusCode::BAD_REQUEST, anthropic::error_body(400, &message), None);
    };
    respond(&state, Wire::Anthropic, &request, reply).await
}

/// Turns a scripted reply into the HTTP response, honouring delays and hangs.
async fn respond(state: &AppState, dialect: Wire, request: &RecordedRequest, mut reply: Reply) -> Response {
    let answer = loop {
        reply = match reply {
            Reply::Delay(delay, inner) => {
                tokio::select! {
                    () = tokio::time::sleep(delay) => *inner,
                    () = state.shutdown.wait() => return shutting_down(dialect),
                }
            }
            Reply::Hang => {
                state.shutdown.wait().await;
                return shutting_down(dialect);
            }
            Reply::Error { status, body, retry_after_secs } => {
                let body = match dialect {
                    Wire::OpenAi => body,
                    Wire::Anthropic => anthropic::error_from_script(status, &body),
                };
                return match StatusCode::from_u16(status) {
                    Ok(status) => error_response(status, body, retry_after_secs),
                    Err(_) => error_response(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        dialect.error_body(500, &format!("test bug: invalid scripted status {status}")),
                        None,
                    ),
                };
            }
            Reply::Text(text) => break Answer::text(text),
            Reply::Chunks(chunks) => break Answer::chunks(chunks),
            Reply::ToolCalls(calls) => break Answer::ToolCalls(calls),
            Reply::Echo => {
                break Answer::text(format!("echo: {}", request.last_user_text().unwrap_or_default()));
            }
        };
    };

    let serial = state.next_id.fetch_add(1, Ordering::Relaxed);
    let model = request.model().unwrap_or(MODEL_ID).to_owned();
    if dialect == Wire::Anthropic {
        let meta = MessageMeta { id: format!("msg_fake_{serial}"), model, usage: lock(&state.prompt_cache).usage(&request.body) };
        return if request.stream {
            sse_response(anthropic::stream_events(&meta, &answer))
        } else {
            axum::Json(anthropic::message(&meta, &answer)).into_response()
        };
    }

    let prompt_chars: usize = request.messages().iter().map(|(_, text)| text.chars().count()).sum();
    let meta = Meta {
        id: format!("chatcmpl-fake-{serial}"),
        created: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        model,
        prompt_tokens: wire::estimate_tokens(prompt_chars),
    };

    if request.stream {
        sse_response(wire::stream_events(&meta, &answer, request.include_usage()))
    } else {
        axum::Json(wire::completion(&meta, &answer)).into_response()
    }
}

/// Streams pre-rendered SSE events. Yielding before each event makes the
/// body return `Pending`, so hyper flushes every event in its own write and
/// clients really see incremental delivery.
fn sse_response(events: Vec<String>) -> Response {
    let stream = futures::stream::iter(events).then(|event| async move {
        tokio::task::yield_now().await;
        Ok::<_, std::convert::Infallible>(event)
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(stream))
        .expect("static SSE response parts are valid")
}

fn error_response(status: StatusCode, body: Value, retry_after_secs: Option<u64>) -> Response {
    let mut response = (status, axum::Json(body)).into_response();
    if let Some(secs) = retry_after_secs {
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    response
}

fn shutting_down(dialect: Wire) -> Response {
    error_response(StatusCode::SERVICE_UNAVAILABLE, dialect.error_body(503, "fake LLM is shutting down"), None)
}

async fn models() -> axum::Json<Value> {
    axum::Json(json!({
        "object": "list",
        "data": [{"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "hermes-fakes"}],
    }))
}

async fn not_found() -> Response {
    error_response(StatusCode::NOT_FOUND, reply::error_body(404, "unknown endpoint (fake LLM)"), None)
}
