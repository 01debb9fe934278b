//! [`FaultProxy`]: an HTTP/1 proxy on loopback in front of a real server, for faults the real
//! server will not produce on demand. It forwards every request unchanged, and can
//! * answer the next `n` requests matching a method and a path fragment with a canned response
//!   (a 429 with the server's own error shape, a 502 of a gateway in front), without forwarding
//!   them, until told to stop;
//! * answer the next request matching a path fragment with a response recorded earlier (a stale
//!   `/sync` page: the same events delivered again);
//! * cut every open connection at once, in-flight long polls included (a network drop);
//! * count requests by method and path fragment (typing notices sent, say);
//! * hold back the `to_device` events of Matrix `/sync` responses and deliver them in a later
//!   response (a room key that arrives late: the client reads the message before its key).
//!
//! Each connection runs on its own task so that a cut can abort them all.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

/// A canned answer.
#[derive(Clone, Debug)]
pub struct Canned {
    pub status: u16,
    pub body: String,
}

struct Refusal {
    method: String,
    path_fragment: String,
    remaining: usize,
    answer: Canned,
}

/// A request the proxy saw: method, path with query, and the response status it got.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub body: String,
    pub status: u16,
}

#[derive(Default)]
struct State {
    refusals: Vec<Refusal>,
    /// Responses to replay: (path fragment, body), used once each.
    replays: Vec<(String, Canned)>,
    /// Recent responses by path fragment being recorded: (path fragment, last bodies).
    recorded: Vec<(String, VecDeque<String>)>,
    seen: Vec<Seen>,
    /// While `Some`, the `to_device.events` of `/sync` responses are taken out and kept here.
    held_to_device: Option<Vec<serde_json::Value>>,
    /// Held events to deliver in the next `/sync` response.
    released_to_device: Vec<serde_json::Value>,
}

/// How many responses per recorded fragment are kept.
const RECORDED_KEPT: usize = 64;

/// The proxy; it stops when dropped.
pub struct FaultProxy {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    connections: Arc<Mutex<JoinSet<()>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept.abort();
        if let Ok(mut connections) = self.connections.lock() {
            connections.abort_all();
        }
    }
}

impl FaultProxy {
    /// Listens on a free loopback port and forwards to `upstream` (`http://host:port`).
    pub async fn start(upstream: &str) -> io::Result<FaultProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(State::default()));
        let connections = Arc::new(Mutex::new(JoinSet::new()));
        let client = reqwest::Client::builder().no_proxy().build().map_err(io::Error::other)?;
        let upstream = upstream.trim_end_matches('/').to_string();
        let accept = tokio::spawn({
            let (state, connections) = (state.clone(), connections.clone());
            async move {
                while let Ok((stream, _)) = listener.accept().await {
                    let (state, client, upstream) = (state.clone(), client.clone(), upstream.clone());
                    let service = service_fn(move |request| forward(request, state.clone(), client.clone(), upstream.clone()));
                    let connection = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service);
                    if let Ok(mut set) = connections.lock() {
                        // Finished connections are reaped as new ones arrive.
                        while set.try_join_next().is_some() {}
                        set.spawn(async move {
                            let _ = connection.await;
                        });
                    }
                }
            }
        });
        Ok(FaultProxy { addr, state, connections, accept })
    }

    /// `http://127.0.0.1:<port>`: give this to the client instead of the server's address.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The next `n` requests with `method` whose path contains `path_fragment` get `answer`
    /// instead of reaching the server.
    pub fn refuse_next(&self, method: &str, path_fragment: &str, n: usize, answer: Canned) {
        self.with(|s| {
            s.refusals.push(Refusal { method: method.to_string(), path_fragment: path_fragment.to_string(), remaining: n, answer })
        });
    }

    /// Forget every refusal not yet used up: matching requests reach the server again.
    pub fn stop_refusing(&self) {
        self.with(|s| s.refusals.clear());
    }

    /// Keep the bodies of successful responses to requests whose path contains `path_fragment`.
    pub fn record(&self, path_fragment: &str) {
        self.with(|s| s.recorded.push((path_fragment.to_string(), VecDeque::new())));
    }

    /// The most recent recorded response (see [`Self::record`]) to `path_fragment` whose body
    /// contains `needle`.
    pub fn recorded_containing(&self, path_fragment: &str, needle: &str) -> Option<String> {
        self.with(|s| {
            s.recorded
                .iter()
                .filter(|(f, _)| f == path_fragment)
                .flat_map(|(_, bodies)| bodies.iter().rev())
                .find(|b| b.contains(needle))
                .cloned()
        })
    }

    /// The next request whose path contains `path_fragment` is answered with `body` (200).
    pub fn replay_next(&self, path_fragment: &str, body: String) {
        self.with(|s| s.replays.push((path_fragment.to_string(), Canned { status: 200, body })));
    }

    /// Closes every open connection now, requests in flight included.
    pub fn cut_connections(&self) {
        if let Ok(mut connections) = self.connections.lock() {
            connections.abort_all();
        }
    }

    /// Requests seen so far with `method` whose path contains `path_fragment`.
    pub fn seen(&self, method: &str, path_fragment: &str) -> Vec<Seen> {
        self.with(|s| s.seen.iter().filter(|r| r.method == method && r.path.contains(path_fragment)).cloned().collect())
    }

    /// From now on, `/sync` responses reach the client without their `to_device` events
    /// (the client-server API's "send-to-device messaging"; room keys travel this way); they are
    /// kept until [`Self::release_to_device`].
    pub fn hold_to_device(&self) {
        self.with(|s| s.held_to_device = Some(s.held_to_device.take().unwrap_or_default()));
    }

    /// Stop holding: the events held so far go into the next `/sync` response, in their order.
    /// How many were held.
    pub fn release_to_device(&self) -> usize {
        self.with(|s| {
            let held = s.held_to_device.take().unwrap_or_default();
            s.released_to_device.extend(held);
            s.released_to_device.len()
        })
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let mut state = self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&mut state)
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

async fn forward(
    request: Request<Incoming>,
    state: Arc<Mutex<State>>,
    client: reqwest::Client,
    upstream: String,
) -> Result<Response<Full<Bytes>>, io::Error> {
    let method = request.method().to_string();
    let path = request.uri().path_and_query().map(|p| p.to_string()).unwrap_or_else(|| "/".to_string());
    let headers = request.headers().clone();
    let body = request.into_body().collect().await.map_err(io::Error::other)?.to_bytes();
    let body_text = String::from_utf8_lossy(&body).into_owned();
    let canned = {
        let mut s = lock(&state);
        let refused = s.refusals.iter_mut().find(|r| r.remaining > 0 && r.method == method && path.contains(&r.path_fragment)).map(|r| {
            r.remaining -= 1;
            r.answer.clone()
        });
        refused.or_else(|| {
            let at = s.replays.iter().position(|(fragment, _)| path.contains(fragment.as_str()))?;
            Some(s.replays.remove(at).1)
        })
    };
    if let Some(canned) = canned {
        lock(&state).seen.push(Seen { method, path, body: body_text, status: canned.status });
        return Ok(json_response(canned.status, Bytes::from(canned.body)));
    }
    let mut outgoing =
        client.request(reqwest::Method::from_bytes(method.as_bytes()).map_err(io::Error::other)?, format!("{upstream}{path}"));
    for (name, value) in headers.iter().filter(|(name, _)| *name != hyper::header::HOST && *name != hyper::header::CONTENT_LENGTH) {
        outgoing = outgoing.header(name.as_str(), value.as_bytes());
    }
    let answer = outgoing.body(body).send().await.map_err(io::Error::other)?;
    let status = answer.status().as_u16();
    let content_type = answer.headers().get(reqwest::header::CONTENT_TYPE).cloned();
    let mut bytes = answer.bytes().await.map_err(io::Error::other)?;
    {
        let mut s = lock(&state);
        if status == 200 && path.contains("/sync") {
            bytes = shift_to_device(&mut s, bytes);
        }
        if status == 200 {
            let text = String::from_utf8_lossy(&bytes).into_owned();
            for (_, bodies) in s.recorded.iter_mut().filter(|(f, _)| path.contains(f.as_str())) {
                if bodies.len() == RECORDED_KEPT {
                    bodies.pop_front();
                }
                bodies.push_back(text.clone());
            }
        }
        s.seen.push(Seen { method, path, body: body_text, status });
    }
    let mut response = Response::new(Full::new(bytes));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    if let Some(content_type) = content_type {
        response.headers_mut().insert(hyper::header::CONTENT_TYPE, content_type);
    }
    Ok(response)
}

/// A `/sync` body with its `to_device.events` held back (while holding) or with released ones
/// put in front of its own.
fn shift_to_device(s: &mut State, body: Bytes) -> Bytes {
    if s.held_to_device.is_none() && s.released_to_device.is_empty() {
        return body;
    }
    let Ok(mut sync) = serde_json::from_slice::<serde_json::Value>(&body) else { return body };
    let own = match sync.pointer_mut("/to_device/events").and_then(serde_json::Value::as_array_mut) {
        Some(events) => std::mem::take(events),
        None => Vec::new(),
    };
    let delivered = match s.held_to_device.as_mut() {
        Some(held) => {
            held.extend(own);
            Vec::new()
        }
        None => std::mem::take(&mut s.released_to_device).into_iter().chain(own).collect(),
    };
    let Some(fields) = sync.as_object_mut() else { return body };
    fields.insert("to_device".to_string(), serde_json::json!({ "events": delivered }));
    serde_json::to_vec(&sync).map(Bytes::from).unwrap_or(body)
}

fn json_response(status: u16, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/json"));
    response
}
