//! `terminal`: run a shell command on this machine. Every command first passes the approval
//! policy; it runs in the working directory with the gateway's environment minus its secrets,
//! with no stdin, a timeout, and its output capped (head and tail kept). Timeouts and a stopped
//! turn kill the command's whole process group.

use super::{Tool, ToolContext, ToolOutput, ToolSchema, required_str};
use crate::agent::approval::CommandDecision;
use async_trait::async_trait;
use serde_json::{Value, json};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncReadExt;

pub struct Terminal;

/// Environment variable names that are never passed on, whatever is configured: a command's
/// `env` must not show the model the gateway's credentials.
fn is_secret_name(name: &str, configured: &[String]) -> bool {
    let upper = name.to_ascii_uppercase();
    configured.iter().any(|c| c.eq_ignore_ascii_case(name))
        || ["_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD"].iter().any(|suffix| upper.ends_with(suffix))
}

fn shell() -> &'static str {
    if std::path::Path::new("/bin/bash").exists() { "/bin/bash" } else { "/bin/sh" }
}

/// `text` cut to `cap` characters, keeping its head and tail.
fn cap_output(text: &str, cap: usize) -> String {
    let total = text.chars().count();
    if total <= cap {
        return text.to_string();
    }
    let head: String = text.chars().take(cap / 2).collect();
    let tail: String = text.chars().skip(total - cap / 2).collect();
    format!("{head}\n\n[… {} characters of output omitted …]\n\n{tail}", total - cap)
}

#[async_trait]
impl Tool for Terminal {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "terminal".into(),
            description: "Run a shell command on the gateway's machine and get its output and exit code. Commands run \
                          non-interactively (no stdin) with a timeout; destructive commands need approval."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string"},
                    "timeout": {"type": "integer", "minimum": 1, "description": "Seconds (capped by the configured limit)."},
                    "workdir": {"type": "string", "description": "Directory to run in (default: the working directory)."}
                },
                "required": ["command"]
            }),
        }
    }

    fn toolset(&self) -> &'static str {
        "terminal"
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> ToolOutput {
        let command = match required_str(&args, "command") {
            Ok(c) if !c.trim().is_empty() => c,
            Ok(_) => return ToolOutput::error("`command` is empty."),
            Err(e) => return e,
        };
        if let CommandDecision::Deny(reason) = ctx.approval.check_command(&ctx.scope, command).await {
            return ToolOutput::error(reason);
        }
        let limit = ctx.settings.terminal_timeout;
        let timeout = args.get("timeout").and_then(Value::as_u64).map(Duration::from_secs).map_or(limit, |t| t.min(limit));
        let workdir =
            args.get("workdir").and_then(Value::as_str).map(|w| ctx.paths.resolve(w)).unwrap_or_else(|| ctx.paths.workdir.clone());
        if !workdir.is_dir() {
            return ToolOutput::error(format!("working directory {} does not exist", workdir.display()));
        }
        let mut cmd = tokio::process::Command::new(shell());
        cmd.arg("-c").arg(command).current_dir(&workdir).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd.env_clear();
        for (name, value) in std::env::vars_os() {
            if let Some(n) = name.to_str()
                && !is_secret_name(n, &ctx.settings.secret_env_names)
            {
                cmd.env(&name, value);
            }
        }
        // Its own process group, so a timeout kills everything it started.
        cmd.process_group(0);
        cmd.kill_on_drop(true);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => return ToolOutput::error(format!("could not start the shell: {e}")),
        };
        let pid = child.id();
        let (Some(mut stdout), Some(mut stderr)) = (child.stdout.take(), child.stderr.take()) else {
            return ToolOutput::error("could not capture the command's output");
        };
        let collect = async {
            let (mut out, mut err) = (Vec::new(), Vec::new());
            let _ = tokio::join!(stdout.read_to_end(&mut out), stderr.read_to_end(&mut err));
            let status = child.wait().await;
            (out, err, status)
        };
        let kill_group = || {
            if let Some(pid) = pid {
                // SAFETY: kill(2) with a negative pid signals the process group we created above
                // (process_group(0) made the child its leader); it touches no memory.
                unsafe {
                    libc::kill(-(pid as i32), libc::SIGKILL);
                }
            }
        };
        let (out, err, status) = tokio::select! {
            r = tokio::time::timeout(timeout, collect) => match r {
                Ok(r) => r,
                Err(_) => {
                    kill_group();
                    return ToolOutput::error(format!("the command timed out after {}s and was killed. Run long jobs in the background (`nohup … &`) or raise the timeout.", timeout.as_secs()));
                }
            },
            _ = ctx.cancel.cancelled() => {
                kill_group();
                return ToolOutput::error("the turn was stopped; the command was killed.");
            }
        };
        let mut text = String::from_utf8_lossy(&out).into_owned();
        let err = String::from_utf8_lossy(&err);
        if !err.trim().is_empty() {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str("[stderr]\n");
            text.push_str(&err);
        }
        let code = match status {
            Ok(s) => s.code().map(|c| c.to_string()).unwrap_or_else(|| "killed by a signal".into()),
            Err(e) => format!("unknown ({e})"),
        };
        let body = cap_output(text.trim_end(), ctx.settings.terminal_output_cap);
        ToolOutput::ok(format!("exit code: {code}\n{body}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::tools::{AgentPaths, ToolSettings};

    fn ctx(dir: &std::path::Path, settings: ToolSettings) -> ToolContext {
        let mut c = ToolContext::detached(AgentPaths::under(dir), settings);
        c.paths = std::sync::Arc::new(AgentPaths::under(dir));
        c
    }

    #[tokio::test]
    async fn runs_in_the_workdir_and_reports_the_exit_code() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let c = ctx(dir.path(), ToolSettings::default());
        let out = Terminal.call(&c, json!({"command": "echo hello; pwd"})).await;
        assert!(out.content.starts_with("exit code: 0\nhello\n"), "{}", out.content);
        assert!(out.content.contains(dir.path().to_str().unwrap()));
        let out = Terminal.call(&c, json!({"command": "pwd; echo oops >&2; exit 3", "workdir": "sub"})).await;
        assert!(!out.is_error);
        assert!(
            out.content.starts_with("exit code: 3\n") && out.content.contains("/sub") && out.content.contains("[stderr]\noops"),
            "{}",
            out.content
        );
    }

    #[tokio::test]
    async fn secrets_are_not_in_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        // SAFETY: test-only; the names are unique to this test, so no other thread reads them.
        unsafe {
            std::env::set_var("HERMES_TEST_TERMINAL_API_KEY", "sk-should-not-leak");
            std::env::set_var("HERMES_TEST_TERMINAL_CUSTOM", "configured-secret");
            std::env::set_var("HERMES_TEST_TERMINAL_PLAIN", "visible");
        }
        let settings = ToolSettings { secret_env_names: vec!["HERMES_TEST_TERMINAL_CUSTOM".into()], ..ToolSettings::default() };
        let out = Terminal.call(&ctx(dir.path(), settings), json!({"command": "env"})).await.content;
        assert!(out.contains("HERMES_TEST_TERMINAL_PLAIN=visible"));
        assert!(!out.contains("sk-should-not-leak") && !out.contains("configured-secret"), "{out}");
    }

    #[tokio::test]
    async fn a_timeout_kills_the_whole_process_group() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("survived");
        let c = ctx(dir.path(), ToolSettings::default());
        let cmd = format!("(sleep 3; touch {}) & sleep 30", marker.display());
        let out = Terminal.call(&c, json!({"command": cmd, "timeout": 1})).await;
        assert!(out.is_error && out.content.contains("timed out after 1s"), "{}", out.content);
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert!(!marker.exists(), "a background child of the command outlived the timeout");
    }

    #[tokio::test]
    async fn destructive_commands_are_refused_without_running() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("keep");
        std::fs::create_dir(&victim).unwrap();
        let c = ctx(dir.path(), ToolSettings::default());
        let out = Terminal.call(&c, json!({"command": format!("rm -rf {}", victim.display())})).await;
        assert!(out.is_error && out.content.contains("BLOCKED"), "{}", out.content);
        assert!(victim.exists(), "the command did not run");
    }

    #[tokio::test]
    async fn long_output_keeps_head_and_tail() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx(dir.path(), ToolSettings { terminal_output_cap: 100, ..ToolSettings::default() });
        let out = Terminal.call(&c, json!({"command": "echo START; seq 1 5000; echo END"})).await.content;
        assert!(out.contains("START") && out.contains("END") && out.contains("characters of output omitted"), "{out}");
    }
}
