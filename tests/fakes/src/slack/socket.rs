//! The Socket Mode WebSocket at `/socket?ticket=…`: a ticket from `apps.connections.open` opens
//! one connection (each ticket once); `hello` is the first message; envelopes arrive from the
//! state's delivery (one connection each); the client's `{"envelope_id":…}` acks are recorded. The
//! control API pushes `disconnect` messages (then closes the socket a second later if the client
//! has not), dead networks, and frozen sockets through [`Frame`]s.
//!
//! The ack timer lives here too: a sweeper retries overdue Events API envelopes.

use super::state::{Connection, Frame, Shared};
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{RawQuery, State as AxumState};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// How long a connection told to disconnect stays open if the client does not close it.
const DISCONNECT_GRACE: Duration = Duration::from_secs(1);

/// How often overdue acks are looked for; small against the ack timeout.
const SWEEP_EVERY: Duration = Duration::from_millis(25);

pub(crate) async fn upgrade(
    AxumState(shared): AxumState<Arc<Shared>>,
    RawQuery(query): RawQuery,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let ticket = super::web::parse_urlencoded(query.as_deref().unwrap_or_default())
        .into_iter()
        .find(|(k, _)| k == "ticket")
        .map(|(_, v)| v)
        .unwrap_or_default();
    // Checked before the upgrade so that a refused ticket is an HTTP answer, as Slack gives.
    let verdict = shared.with(|s| {
        if s.refuse_connections {
            Err(StatusCode::SERVICE_UNAVAILABLE)
        } else if s.tickets.remove(&ticket) {
            Ok(())
        } else {
            Err(StatusCode::UNAUTHORIZED)
        }
    });
    if let Err(status) = verdict {
        return (status, "invalid ticket").into_response();
    }
    match ws {
        Ok(ws) => ws.on_upgrade(move |socket| connection(shared, socket)),
        Err(rejection) => rejection.into_response(),
    }
}

async fn connection(shared: Arc<Shared>, mut socket: WebSocket) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let id = shared.with(|s| {
        let id = s.next_connection;
        s.next_connection += 1;
        s.connections_opened += 1;
        let open = s.connections.values().filter(|c| !c.frozen).count() + 1;
        let hello = json!({
            "type": "hello", "num_connections": open,
            "debug_info": {"host": "fake-slack", "build_number": 1, "approximate_connection_time": 18060},
            "connection_info": {"app_id": s.app_id},
        });
        // Queued before the connection can be picked for an envelope, so hello is always first.
        let _ = tx.send(Frame::Text(hello.to_string()));
        s.hellos += 1;
        s.connections.insert(id, Connection { tx, frozen: false, leaving: false });
        s.flush_pending();
        id
    });
    shared.changed.notify_waiters();
    serve(&shared, &mut socket, &mut rx).await;
    shared.with(|s| s.connections.remove(&id));
    shared.changed.notify_waiters();
}

async fn serve(shared: &Shared, socket: &mut WebSocket, rx: &mut mpsc::UnboundedReceiver<Frame>) {
    let mut frozen = false;
    let mut close_at: Option<Instant> = None;
    loop {
        let deadline = close_at.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            // A frozen socket is not read: reading is what answers Pings (axum queues the Pong).
            incoming = socket.recv(), if !frozen => match incoming {
                Some(Ok(Message::Text(text))) => on_text(shared, text.as_str()),
                Some(Ok(Message::Binary(_) | Message::Ping(_) | Message::Pong(_))) => {}
                Some(Ok(Message::Close(_)) | Err(_)) | None => return,
            },
            frame = rx.recv() => match frame {
                Some(Frame::Text(text)) => {
                    if !frozen && socket.send(Message::Text(text.into())).await.is_err() {
                        return;
                    }
                }
                Some(Frame::Disconnect(text)) => {
                    if socket.send(Message::Text(text.into())).await.is_err() {
                        return;
                    }
                    close_at = Some(Instant::now() + DISCONNECT_GRACE);
                }
                Some(Frame::Freeze) => frozen = true,
                // Dropping the socket closes the TCP connection without a close frame.
                Some(Frame::Drop) | None => return,
            },
            _ = tokio::time::sleep_until(deadline), if close_at.is_some() => {
                let _ = socket.send(Message::Close(None)).await;
                return;
            }
            _ = shared.shutdown.wait() => return,
        }
    }
}

/// A text message from the client: an ack (`envelope_id`, maybe a `payload`), or ignored.
fn on_text(shared: &Shared, text: &str) {
    let Ok(message) = serde_json::from_str::<Value>(text) else {
        return;
    };
    if let Some(envelope_id) = message.get("envelope_id").and_then(Value::as_str) {
        shared.with(|s| s.ack(envelope_id, message.get("payload").cloned()));
        shared.changed.notify_waiters();
    }
}

/// Retries overdue envelopes until the fake stops.
pub(crate) async fn ack_sweeper(shared: Arc<Shared>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(SWEEP_EVERY) => {
                if shared.with(|s| s.retry_overdue()) {
                    shared.changed.notify_waiters();
                }
            }
            _ = shared.shutdown.wait() => return,
        }
    }
}
