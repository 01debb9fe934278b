//! `events_poll`: the messages stored since a cursor, at once.

use super::events::{answer, cursor, read, schema};
use super::{ServeTool, ToolFailure};
use crate::gateway::mcp_serve::ServeHandles;
use async_trait::async_trait;
use serde_json::{Value, json};

pub(super) struct EventsPoll;

#[async_trait]
impl ServeTool for EventsPoll {
    fn name(&self) -> &'static str {
        "events_poll"
    }

    fn description(&self) -> &'static str {
        "New messages in any conversation since `after` (oldest first), the cursor to pass next time, and how many approvals wait. \
         Returns at once; events_wait waits for the next one."
    }

    fn input_schema(&self) -> Value {
        schema(json!({}))
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn call(&self, handles: &ServeHandles, args: &Value) -> Result<Value, ToolFailure> {
        let after = cursor(handles, args).await?;
        let (events, next) = read(handles, after, args).await?;
        Ok(answer(handles, events, next))
    }
}
