//! `display:`: what users see while the agent works (busy handling, tool progress lines) and
//! how its messages show (link previews).

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};
use std::fmt;

/// `display.*`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DisplayConfig {
    /// What a message sent while the agent is busy does (`HERMES_GATEWAY_BUSY_INPUT_MODE`).
    pub busy_input_mode: BusyInputMode,
    /// Acknowledge such messages ("queued", "interrupting…").
    pub busy_ack_enabled: bool,
    pub tool_progress: ToolProgress,
    /// Let platforms unfurl links in the agent's messages. Off by default: a prompt-injected URL
    /// would otherwise be fetched by the platform's unfurler, with whatever data it carries.
    pub link_previews: bool,
}

impl Default for DisplayConfig {
    fn default() -> Self {
        Self { busy_input_mode: BusyInputMode::Interrupt, busy_ack_enabled: true, tool_progress: ToolProgress::All, link_previews: false }
    }
}

/// Handling of input that arrives while a turn is running.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BusyInputMode {
    /// Stop the running turn and start a new one with the message.
    #[default]
    Interrupt,
    /// Run the message after the current turn.
    Queue,
    /// Inject the message into the running turn (falls back to queue).
    Steer,
}

impl BusyInputMode {
    pub const NAMES: [&'static str; 3] = ["interrupt", "queue", "steer"];

    /// Case-insensitive parse, for the environment override.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "interrupt" => Some(Self::Interrupt),
            "queue" => Some(Self::Queue),
            "steer" => Some(Self::Steer),
            _ => None,
        }
    }
}

/// Which tool-progress lines are posted to the chat.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolProgress {
    Off,
    /// Only the first use of each tool.
    New,
    #[default]
    All,
    /// With arguments.
    Verbose,
    /// Nothing in chat; written to `logs/tool_calls.log`.
    Log,
}

impl ToolProgress {
    /// Whether a tool call gets a line in the chat; `first_use` = the tool's first call this turn.
    pub fn shows(self, first_use: bool) -> bool {
        match self {
            ToolProgress::Off | ToolProgress::Log => false,
            ToolProgress::New => first_use,
            ToolProgress::All | ToolProgress::Verbose => true,
        }
    }
}

const TOOL_PROGRESS_NAMES: &[&str] = &["off", "new", "all", "verbose", "log"];

// Hand-written to also accept YAML booleans, as Hermes does: `false` = off, `true` = all.
impl<'de> Deserialize<'de> for ToolProgress {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ToolProgressVisitor)
    }
}

struct ToolProgressVisitor;

impl Visitor<'_> for ToolProgressVisitor {
    type Value = ToolProgress;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("one of off, new, all, verbose, log (or a boolean)")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<ToolProgress, E> {
        Ok(if v { ToolProgress::All } else { ToolProgress::Off })
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<ToolProgress, E> {
        match v {
            "off" => Ok(ToolProgress::Off),
            "new" => Ok(ToolProgress::New),
            "all" => Ok(ToolProgress::All),
            "verbose" => Ok(ToolProgress::Verbose),
            "log" => Ok(ToolProgress::Log),
            other => Err(de::Error::unknown_variant(other, TOOL_PROGRESS_NAMES)),
        }
    }
}
