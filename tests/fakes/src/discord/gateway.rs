//! The gateway WebSocket: HELLO on connect; IDENTIFY → READY (with `resume_gateway_url`) on a new
//! session; RESUME → the missed dispatches replayed, then RESUMED; HEARTBEAT → ACK (unless the
//! test turned ACKs off for the connection); a bad token closes with 4004, an unknown opcode with
//! 4001, a RESUME of an unknown session gets INVALID_SESSION. The control API pushes RECONNECT,
//! INVALID_SESSION, close codes and dead networks through [`Frame`]s.

use super::state::{Connection, Frame, Session, Shared};
use axum::extract::State as AxumState;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use serde_json::{Value, json};
use std::sync::Arc;
use tokio::sync::mpsc;

pub(crate) async fn upgrade(AxumState(shared): AxumState<Arc<Shared>>, ws: WebSocketUpgrade) -> Response {
    ws.on_upgrade(move |socket| connection(shared, socket))
}

async fn connection(shared: Arc<Shared>, mut socket: WebSocket) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (id, interval) = shared.with(|s| {
        let id = s.next_connection;
        s.next_connection += 1;
        s.connections.insert(id, Connection { tx, session: None, acking: true });
        (id, s.heartbeat_interval_ms)
    });
    let hello = json!({"op": 10, "d": {"heartbeat_interval": interval}, "s": null, "t": null});
    if socket.send(Message::Text(hello.to_string().into())).await.is_ok() {
        serve(&shared, id, &mut socket, &mut rx).await;
    }
    shared.with(|s| {
        if let Some(session) = s.connections.remove(&id).and_then(|c| c.session)
            && let Some(session) = s.sessions.get_mut(&session)
            && session.connection == Some(id)
        {
            session.connection = None;
        }
    });
    shared.changed.notify_waiters();
}

async fn serve(shared: &Arc<Shared>, id: u64, socket: &mut WebSocket, rx: &mut mpsc::UnboundedReceiver<Frame>) {
    loop {
        tokio::select! {
            incoming = socket.recv() => {
                let text = match incoming {
                    Some(Ok(Message::Text(text))) => text.to_string(),
                    Some(Ok(Message::Binary(_))) => {
                        close(socket, 4002, "Error while decoding payload.").await;
                        return;
                    }
                    Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                    Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                };
                let Ok(payload) = serde_json::from_str::<Value>(&text) else {
                    close(socket, 4002, "Error while decoding payload.").await;
                    return;
                };
                match payload.get("op").and_then(Value::as_u64) {
                    Some(1) => heartbeat(shared, id),
                    Some(2) => {
                        if !identify(shared.clone(), id, &payload) {
                            close(socket, 4004, "Authentication failed.").await;
                            return;
                        }
                    }
                    Some(6) => resume(shared, id, &payload),
                    // Presence and voice updates, request guild members: accepted, not acted on.
                    Some(3 | 4 | 8) => {}
                    _ => {
                        close(socket, 4001, "Unknown opcode.").await;
                        return;
                    }
                }
                shared.changed.notify_waiters();
            }
            frame = rx.recv() => match frame {
                Some(Frame::Text(text)) => {
                    if socket.send(Message::Text(text.into())).await.is_err() {
                        return;
                    }
                }
                Some(Frame::Close(code)) => {
                    close(socket, code, "closed by the test").await;
                    return;
                }
                Some(Frame::Drop) | None => return,
            },
            _ = shared.shutdown.wait() => return,
        }
    }
}

async fn close(socket: &mut WebSocket, code: u16, reason: &'static str) {
    let _ = socket.send(Message::Close(Some(CloseFrame { code, reason: reason.into() }))).await;
}

fn send(shared: &Shared, id: u64, payload: Value) {
    shared.with(|s| {
        if let Some(conn) = s.connections.get(&id) {
            let _ = conn.tx.send(Frame::Text(payload.to_string()));
        }
    });
}

fn heartbeat(shared: &Shared, id: u64) {
    let acking = shared.with(|s| {
        s.heartbeats += 1;
        s.connections.get(&id).is_some_and(|c| c.acking)
    });
    if acking {
        send(shared, id, json!({"op": 11, "d": null, "s": null, "t": null}));
    }
}

fn token_of(payload: &Value) -> String {
    let token = payload.pointer("/d/token").and_then(Value::as_str).unwrap_or_default();
    token.strip_prefix("Bot ").unwrap_or(token).to_string()
}

/// A new session: READY is its first dispatch (after the configured delay). False when the token
/// is wrong.
fn identify(shared: Arc<Shared>, id: u64, payload: &Value) -> bool {
    let ready = shared.with(|s| {
        if token_of(payload) != s.token {
            return None;
        }
        s.identifies += 1;
        let session_id = format!("session-{}", s.snowflake());
        s.sessions.insert(session_id.clone(), Session { seq: 0, log: Vec::new(), connection: Some(id) });
        s.current_session = Some(session_id.clone());
        if let Some(conn) = s.connections.get_mut(&id) {
            conn.session = Some(session_id.clone());
        }
        let ready = json!({
            "v": 10, "user": s.bot_json(), "guilds": [{"id": s.guild_id.to_string(), "unavailable": true}],
            "session_id": session_id, "resume_gateway_url": s.ws_url, "shard": [0, 1],
            "application": {"id": s.application_id.to_string(), "flags": 0}, "private_channels": [], "presences": [],
            "relationships": [], "_trace": ["fake-discord"],
        });
        Some((ready, s.ready_delay))
    });
    let Some((ready, delay)) = ready else { return false };
    if delay.is_zero() {
        shared.with(|s| s.dispatch("READY", ready));
    } else {
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            shared.with(|s| s.dispatch("READY", ready));
            shared.changed.notify_waiters();
        });
    }
    true
}

/// Reattach a session and replay what it missed, or refuse with INVALID_SESSION (not resumable).
fn resume(shared: &Shared, id: u64, payload: &Value) {
    let session_id = payload.pointer("/d/session_id").and_then(Value::as_str).unwrap_or_default().to_string();
    let after = payload.pointer("/d/seq").and_then(Value::as_u64).unwrap_or(0);
    let token_ok = shared.with(|s| token_of(payload) == s.token);
    let resumed = shared.with(|s| {
        let session = s.sessions.get_mut(&session_id).filter(|_| token_ok)?;
        session.connection = Some(id);
        let missed: Vec<Value> = session.log.iter().filter(|(seq, _)| *seq > after).map(|(_, p)| p.clone()).collect();
        s.resumes += 1;
        if let Some(conn) = s.connections.get_mut(&id) {
            conn.session = Some(session_id.clone());
        }
        Some(missed)
    });
    match resumed {
        Some(missed) => {
            for payload in missed {
                send(shared, id, payload);
            }
            shared.with(|s| {
                s.current_session = Some(session_id);
                s.dispatch("RESUMED", json!({"_trace": ["fake-discord"]}));
            });
        }
        None => send(shared, id, json!({"op": 9, "d": false, "s": null, "t": null})),
    }
}
