//! The toolset names config may mention (`agent.disabled_toolsets`, `platform_toolsets`, a
//! platform's `toolsets`), and which of them act outside the conversation (for the audit). The
//! names are plain data owned here so that validation needs no tool code; `agent::tools` checks
//! in a test that its built-in tools declare exactly these.

/// Every toolset name a built-in tool declares (a test in `agent::tools` checks both ways).
pub const TOOLSETS: &[&str] = &["terminal", "file", "memory", "session_search", "messaging", "skills", "clarify", "delegation", "cronjob"];

/// The toolsets whose tools only read the conversation's own world or ask its user; every other
/// toolset acts outside it (runs commands, writes files, sends messages, changes memory or
/// skills, starts other agents). A new toolset therefore counts as acting until it is listed
/// here, so the audit flags it where strangers could reach it rather than forgetting it.
pub(crate) const QUIET_TOOLSETS: &[&str] = &["session_search", "clarify", "cronjob"];

/// Whether `toolset`'s tools act outside the conversation (see [`QUIET_TOOLSETS`]).
pub fn toolset_acts(toolset: &str) -> bool {
    !QUIET_TOOLSETS.contains(&toolset)
}
