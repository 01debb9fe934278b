//! `events_wait`: like `events_poll`, but waits (up to a minute) until a message is stored or
//! an approval starts waiting. It reads the store, so it sees what any part of the gateway
//! wrote, in the order it was written.

use super::events::{answer, cursor, read, schema};
use super::{ServeTool, ToolFailure, bounded};
use crate::gateway::mcp_serve::ServeHandles;
use async_trait::async_trait;
use serde_json::{Value, json};
use std::time::Duration;

pub(super) struct EventsWait;

const DEFAULT_WAIT_SECS: u64 = 30;
/// Longer waits risk the client's or a proxy's read timeout; the client simply calls again.
const MAX_WAIT_SECS: u64 = 60;
/// How often the store is looked at while waiting: an indexed read of nothing, most times.
const LOOK_EVERY: Duration = Duration::from_millis(200);

#[async_trait]
impl ServeTool for EventsWait {
    fn name(&self) -> &'static str {
        "events_wait"
    }

    fn description(&self) -> &'static str {
        "Wait until a new message is stored in any conversation after `after`, or an approval starts waiting, then return like \
         events_poll. Returns with no events when timeout_seconds pass first (default 30, at most 60)."
    }

    fn input_schema(&self) -> Value {
        schema(json!({
            "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": MAX_WAIT_SECS, "description": "How long to wait (default 30)."}
        }))
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn call(&self, handles: &ServeHandles, args: &Value) -> Result<Value, ToolFailure> {
        let wait = Duration::from_secs(bounded(args, "timeout_seconds", DEFAULT_WAIT_SECS, MAX_WAIT_SECS)?);
        let after = cursor(handles, args).await?;
        let approvals_seen = handles.approvals.opened();
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let (events, next) = read(handles, after, args).await?;
            let new_approval = handles.approvals.opened() != approvals_seen;
            if !events.is_empty() || new_approval || tokio::time::Instant::now() >= deadline {
                return Ok(answer(handles, events, next));
            }
            tokio::time::sleep_until(deadline.min(tokio::time::Instant::now() + LOOK_EVERY)).await;
        }
    }
}
