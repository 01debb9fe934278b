//! hermes as an MCP server: another MCP client (an IDE, a desktop assistant, a script with the
//! official SDK) lists the gateway's conversations, reads them, waits for new messages, sends
//! into a chat and answers pending approvals. The gateway serves streamable HTTP on its own
//! listener ([`http`]), loopback by default and always behind `mcp_serve.key`; `hermes mcp
//! serve` relays an MCP client's stdio to it (`crate::cli::mcp_serve`), so the conversations,
//! the live approvals and the outbox are the running gateway's own, never a second copy.
//!
//! - [`http`]: the listener, its guards (web pages, Host names, the key, key guessing).
//! - [`protocol`]: JSON-RPC and the MCP lifecycle (`initialize`, `ping`, `tools/list`,
//!   `tools/call`).
//! - [`tools`]: one file per tool; what each may see and do.
//!
//! The key holder is the operator: like an admin, they see every chat. What they may send is
//! what `send_message` allows an admin, and no more: into a conversation the gateway has, on a
//! platform that can receive a message outside a request.

mod http;
mod protocol;
mod tools;

#[cfg(test)]
mod tests;

use crate::gateway::delivery::deliverer::Deliverer;
use crate::gateway::turn::approvals::board::ApprovalBoard;
use crate::store::{Routes, SessionLog};
use std::sync::Arc;

pub(crate) use http::serve;

/// What the tools may reach: the conversations and their messages, the approvals waiting now,
/// and the outbound path.
#[derive(Clone)]
pub(crate) struct ServeHandles {
    pub routes: Arc<dyn Routes>,
    pub log: Arc<dyn SessionLog>,
    pub approvals: Arc<ApprovalBoard>,
    pub deliverer: Arc<Deliverer>,
}
