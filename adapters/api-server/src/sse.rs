//! Turning a [`PendingReply`] into a Server-Sent Events response. The endpoint supplies the
//! wire format ([`SseFormat`]); this module owns the pump: order, the idle timeout, and the
//! rule that dropping the response (the client left) unregisters the request at once.

use crate::error::ApiError;
use crate::pending::{PendingReply, ReplyEvent};
use crate::turn::timeout_error;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

/// How an endpoint writes reply events as SSE.
pub(crate) trait SseFormat: Send + 'static {
    /// The events for one reply event; the stream ends after those of [`ReplyEvent::Done`].
    fn events(&mut self, event: ReplyEvent) -> Vec<Event>;
    /// The events for a failure (the agent went silent); the stream ends after them.
    fn error(&mut self, error: ApiError) -> Vec<Event>;
}

struct Pump<F> {
    // Owned by the response body: when hyper drops the body, this drops and the request is
    // forgotten, so the gateway's next delivery fails with `Gone`.
    reply: PendingReply,
    queue: VecDeque<Event>,
    finished: bool,
    idle: Duration,
    format: F,
}

/// An SSE response that starts with `initial` and then follows the reply. The stream ends after
/// the final answer, or after `idle` without any event.
pub(crate) fn response<F: SseFormat>(reply: PendingReply, idle: Duration, initial: Vec<Event>, format: F) -> Response {
    let pump = Pump { reply, queue: initial.into(), finished: false, idle, format };
    let stream = futures::stream::unfold(pump, |mut pump| async move {
        loop {
            if let Some(event) = pump.queue.pop_front() {
                return Some((Ok::<Event, Infallible>(event), pump));
            }
            if pump.finished {
                return None;
            }
            match tokio::time::timeout(pump.idle, pump.reply.recv()).await {
                Ok(Some(event)) => {
                    pump.finished = matches!(event, ReplyEvent::Done(_));
                    let events = pump.format.events(event);
                    pump.queue.extend(events);
                }
                // Only after the final message, which already ended the stream.
                Ok(None) => pump.finished = true,
                Err(_) => {
                    pump.finished = true;
                    let events = pump.format.error(timeout_error(pump.idle));
                    pump.queue.extend(events);
                }
            }
        }
    });
    // Comments every 15 s keep proxies from closing a stream while the agent thinks.
    Sse::new(stream).keep_alive(KeepAlive::default()).into_response()
}
