//! `cronjob`: the agent schedules and manages jobs for the user it talks to (create, list,
//! update, pause, resume, remove, run), through the gateway's [`super::ToolHost`]: a job created
//! here has this chat as its origin, and the user's rights are the same as with `/cron`.
//! Scheduled runs themselves never get this tool.

use super::{Tool, ToolContext, ToolOutput, ToolSchema};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

pub(super) struct CronJob;

/// The tool's arguments, as the host receives them.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CronJobArgs {
    pub action: String,
    pub job_id: Option<String>,
    pub prompt: Option<String>,
    pub schedule: Option<String>,
    pub name: Option<String>,
    pub repeat: Option<i64>,
    pub deliver: Option<String>,
    pub skills: Option<Vec<String>>,
    /// A model name, or Hermes' `{provider, model}`.
    pub model: Option<Value>,
    pub script: Option<String>,
    pub no_agent: Option<bool>,
    pub enabled_toolsets: Option<Vec<String>>,
}

impl CronJobArgs {
    /// The model name and provider, from either form.
    pub fn model_and_provider(&self) -> (Option<String>, Option<String>) {
        match &self.model {
            Some(Value::String(m)) => (Some(m.clone()), None),
            Some(Value::Object(o)) => {
                let field = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_string);
                (field("model"), field("provider"))
            }
            _ => (None, None),
        }
    }
}

const ACTIONS: &[&str] = &["create", "list", "update", "pause", "resume", "remove", "run"];

#[async_trait]
impl Tool for CronJob {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "cronjob".into(),
            description: "Schedule a task whose result is delivered to this chat (or elsewhere), and manage scheduled tasks. \
                          Schedules: '30m', '2h', '1d' (once, after a delay), 'every 30m' (repeating), a cron expression \
                          '0 9 * * mon-fri' (translate 'every weekday at 9' into one), or an ISO time '2026-02-03T14:00'. \
                          The prompt must say everything the task needs: it runs later as a fresh conversation."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ACTIONS},
                    "job_id": {"type": "string", "description": "The job's id or name (update, pause, resume, remove, run)."},
                    "prompt": {"type": "string", "description": "What to do at each run, self-contained."},
                    "schedule": {"type": "string"},
                    "name": {"type": "string"},
                    "repeat": {"type": "integer", "description": "Runs before the job ends; omit for once (delays) or forever (repeating)."},
                    "deliver": {"type": "string", "description": "origin (default: this chat), local (keep only), a platform name (its home channel), platform:chat_id[:thread_id], all, or a comma list."},
                    "skills": {"type": "array", "items": {"type": "string"}},
                    "model": {"type": "string", "description": "A model for this job (default: the configured one)."},
                    "script": {"type": "string", "description": "A script in HERMES_HOME/scripts run first; its output is given to you."},
                    "no_agent": {"type": "boolean", "description": "Run only the script and deliver its output."},
                    "enabled_toolsets": {"type": "array", "items": {"type": "string"}}
                },
                "required": ["action"]
            }),
        }
    }

    fn toolset(&self) -> &'static str {
        "cronjob"
    }

    async fn call(&self, ctx: &ToolContext, arguments: Value) -> ToolOutput {
        let args: CronJobArgs = match serde_json::from_value(arguments) {
            Ok(a) => a,
            Err(e) => return ToolOutput::error(format!("bad arguments: {e}")),
        };
        if !ACTIONS.contains(&args.action.as_str()) {
            return ToolOutput::error(format!("unknown action `{}`; use one of {}", args.action, ACTIONS.join(", ")));
        }
        match ctx.host.cronjob(&ctx.scope, args).await {
            Ok(text) => ToolOutput::ok(text),
            Err(e) => ToolOutput::error(e.to_string()),
        }
    }
}
