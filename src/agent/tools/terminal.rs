//! `terminal`: runs one shell command for the model — the approval policy's verdict first (the
//! command's syntax tree, classified by `hermes-guard`; a flagged command or a request to leave
//! the sandbox waits for a person's approval), then `bash -c` (or `sh -c`) inside the gateway's
//! sandbox (outside it only when a person approved that), in its own process group with the
//! gateway's secrets stripped from the environment, a timeout that kills the whole group, and
//! combined output capped head-and-tail; when the sandbox stopped the command, the model is told
//! so and what it may do instead (work inside, or ask with `leave_sandbox`).

use super::{Tool, ToolContext, ToolOutput, ToolSchema, required_str};
use crate::agent::approval::{CommandDecision, CommandRequest};
use crate::agent::sandbox::Confinement;
use async_trait::async_trait;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};

pub(super) struct Terminal;

/// How long the output pipe may stay open after the shell exited (a background process that
/// inherited it) before we stop reading and return what we have.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// Suffixes of environment variable names that carry credentials by convention.
const SECRET_SUFFIXES: &[&str] = &["_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD"];

/// `bash` when it is on `PATH` (or in `/bin`), otherwise `sh`.
static SHELL: LazyLock<PathBuf> = LazyLock::new(|| {
    let on_path =
        std::env::var_os("PATH").map(|p| std::env::split_paths(&p).map(|d| d.join("bash")).find(|b| b.is_file())).unwrap_or_default();
    on_path.or_else(|| Some(PathBuf::from("/bin/bash")).filter(|b| b.is_file())).unwrap_or_else(|| PathBuf::from("sh"))
});

#[async_trait]
impl Tool for Terminal {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "terminal".into(),
            description: "Run a shell command (bash -c) on the host and get its exit code and combined stdout+stderr. \
                Runs in the working directory unless `workdir` is given. Stdin is closed, so interactive programs \
                will not work: pass flags such as -y or --no-pager. Long output is cut to its head and tail; \
                redirect to a file and use search_files or read_file for large output. Destructive commands may be \
                refused or held for the user's approval; do not retry a refused command. Commands run in a sandbox that \
                can write only in the workspace; if one truly must act outside it, pass `leave_sandbox` with the reason \
                and the user is asked to approve."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The shell command line to run, e.g. `ls -la src` or `cargo test 2>&1 | tail -50`."},
                    "timeout": {"type": "integer", "minimum": 1, "description": "Seconds before the command (and every process it started) is killed. Optional; capped at the configured maximum."},
                    "workdir": {"type": "string", "description": "Directory to run in; relative paths resolve against the working directory. Optional."},
                    "leave_sandbox": {"type": "string", "description": "Only when the command must act outside the workspace: why. The user is asked to approve running it outside the sandbox. Optional."}
                },
                "required": ["command"]
            }),
        }
    }

    fn toolset(&self) -> &'static str {
        "terminal"
    }

    fn returns_outside_content(&self) -> bool {
        true
    }

    async fn call(&self, ctx: &ToolContext, arguments: Value) -> ToolOutput {
        let invocation = match Invocation::from_arguments(ctx, &arguments) {
            Ok(invocation) => invocation,
            Err(refusal) => return refusal,
        };
        // Every command goes through the approval policy before anything runs.
        let confinement = &ctx.settings.confinement;
        let request = CommandRequest {
            command: invocation.command,
            workdir: &invocation.workdir,
            sandboxed: confinement.enforced(),
            leave_sandbox: invocation.leave_sandbox,
        };
        let confined = match ctx.approval.check_command(&ctx.scope, &request, &ctx.cancel).await {
            CommandDecision::Run { confined } => confined,
            CommandDecision::Deny(reason) => return ToolOutput::error(reason),
        };
        match run(ctx, &invocation, confined).await {
            Ok(finished) => report(ctx, &invocation, finished),
            Err(e) => ToolOutput::error(format!("could not start the shell {}: {e}", SHELL.display())),
        }
    }
}

/// What the model asked to run, checked.
struct Invocation<'a> {
    command: &'a str,
    workdir: PathBuf,
    /// The requested timeout, capped by `terminal.timeout`.
    timeout: Duration,
    /// Why it must run outside the sandbox, when the model asks for that.
    leave_sandbox: Option<&'a str>,
}

impl<'a> Invocation<'a> {
    fn from_arguments(ctx: &ToolContext, arguments: &'a Value) -> Result<Self, ToolOutput> {
        let command = required_str(arguments, "command")?;
        if command.trim().is_empty() {
            return Err(ToolOutput::error("`command` is empty; pass the shell command line to run."));
        }
        let max = ctx.settings.terminal_timeout;
        let timeout = requested_timeout(arguments)?.map_or(max, |t| t.min(max));
        let workdir = match arguments.get("workdir") {
            None | Some(Value::Null) => ctx.paths.workdir.clone(),
            Some(Value::String(w)) => ctx.paths.resolve(w),
            Some(_) => return Err(ToolOutput::error("`workdir` must be a string path.")),
        };
        if !workdir.is_dir() {
            return Err(ToolOutput::error(format!(
                "working directory {} does not exist or is not a directory; pass an existing directory as `workdir` or leave it out.",
                workdir.display()
            )));
        }
        let leave_sandbox = match arguments.get("leave_sandbox") {
            None | Some(Value::Null) => None,
            Some(Value::String(why)) if why.trim().is_empty() => None,
            Some(Value::String(why)) => Some(why.as_str()),
            Some(_) => {
                return Err(ToolOutput::error("`leave_sandbox` must be a string saying why the command must run outside the sandbox."));
            }
        };
        Ok(Self { command, workdir, timeout, leave_sandbox })
    }
}

/// Why a command did not finish by itself.
enum Stopped {
    TimedOut,
    Cancelled,
}

/// How a command's run ended.
struct Finished {
    status: std::io::Result<ExitStatus>,
    stopped: Option<Stopped>,
    output: String,
    /// Everything the command wrote was read (no background process held the output open).
    drained: bool,
}

/// Run the command (confined unless a person approved otherwise), until it exits, times out or
/// the turn is stopped (then its whole process group is killed), capturing its output.
async fn run(ctx: &ToolContext, invocation: &Invocation<'_>, confined: bool) -> std::io::Result<Finished> {
    let confinement = confined.then_some(&*ctx.settings.confinement);
    let (mut child, pid, reader) = spawn(invocation.command, &invocation.workdir, &ctx.settings.secret_env_names, confinement)?;
    let mut guard = GroupGuard { pid, armed: true };
    let capture = Arc::new(Mutex::new(Capture::new(ctx.settings.terminal_output_cap.saturating_mul(4).max(1024))));
    let mut drain = tokio::spawn(drain(reader, capture.clone()));
    let (status, stopped) = tokio::select! {
        status = child.wait() => (status, None),
        _ = tokio::time::sleep(invocation.timeout) => (Err(std::io::Error::other("timed out")), Some(Stopped::TimedOut)),
        _ = ctx.cancel.cancelled() => (Err(std::io::Error::other("cancelled")), Some(Stopped::Cancelled)),
    };
    let status = match stopped {
        // The shell is done; processes it left in the background keep running.
        None => {
            guard.armed = false;
            status
        }
        Some(_) => {
            guard.kill();
            child.wait().await
        }
    };
    let drained = tokio::time::timeout(DRAIN_GRACE, &mut drain).await.is_ok();
    if !drained {
        drain.abort();
    }
    let output = match capture.lock() {
        Ok(c) => c.render(ctx.settings.terminal_output_cap),
        Err(poisoned) => poisoned.into_inner().render(ctx.settings.terminal_output_cap),
    };
    let output = if output.is_empty() { "(no output)".to_string() } else { output };
    Ok(Finished { status, stopped, output, drained })
}

/// What the model is told: the exit status and output, or why the command was stopped, and
/// what the sandbox refused.
fn report(ctx: &ToolContext, invocation: &Invocation<'_>, finished: Finished) -> ToolOutput {
    let Finished { status, stopped, output, drained } = finished;
    let left_open =
        if drained { "" } else { "\n[a background process still holds the output open; output after the command exited was not captured]" };
    match stopped {
        Some(Stopped::TimedOut) => ToolOutput::error(format!(
            "command timed out after {} and was killed together with every process it started. \
             Run long jobs in the background with output redirected to a file, or pass a larger `timeout` (at most {}).\n\
             output before the timeout:\n{output}",
            secs(invocation.timeout),
            secs(ctx.settings.terminal_timeout)
        )),
        Some(Stopped::Cancelled) => {
            ToolOutput::error(format!("cancelled: the turn was stopped, so the command was killed.\noutput so far:\n{output}"))
        }
        None => match status {
            Ok(status) => {
                let sandbox = ctx.settings.confinement.explain(&output, status).map(|why| format!("\n{why}")).unwrap_or_default();
                ToolOutput::ok(format!("{}\n{output}{left_open}{sandbox}", describe(status)))
            }
            Err(e) => ToolOutput::error(format!("lost track of the command: {e}\noutput:\n{output}")),
        },
    }
}

/// The `timeout` argument in whole seconds (at least 1), if given.
fn requested_timeout(arguments: &Value) -> Result<Option<Duration>, ToolOutput> {
    let bad = || ToolOutput::error("`timeout` must be a positive number of seconds, e.g. 60.");
    match arguments.get("timeout") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => {
            let secs = match v {
                Value::Number(n) => n.as_f64(),
                Value::String(s) => s.trim().parse::<f64>().ok(),
                _ => None,
            }
            .filter(|s| s.is_finite() && *s > 0.0)
            .ok_or_else(bad)?;
            Ok(Some(Duration::from_secs(secs.ceil().min(u32::MAX as f64) as u64)))
        }
    }
}

/// `12s`, or `1.5s` for a fractional duration.
fn secs(d: Duration) -> String {
    if d.subsec_millis() == 0 { format!("{}s", d.as_secs()) } else { format!("{:.1}s", d.as_secs_f64()) }
}

fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code: {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        (None, None) => "exit status unknown".to_string(),
    }
}

/// Whether an environment variable must not reach the command. The gateway's own environment
/// holds its platform tokens and provider API keys; a command (and so the model, through `env`,
/// `printenv` or a script that dumps its environment) must never see them. Configured names are
/// stripped exactly; anything following the usual credential naming conventions is stripped too,
/// so a secret nobody thought to list does not leak either.
fn is_secret_env(name: &str, configured: &[String]) -> bool {
    let upper = name.to_ascii_uppercase();
    configured.iter().any(|c| c == name) || SECRET_SUFFIXES.iter().any(|s| upper.ends_with(s))
}

fn command_env(configured: &[String]) -> Vec<(OsString, OsString)> {
    std::env::vars_os().filter(|(k, _)| !is_secret_env(&k.to_string_lossy(), configured)).collect()
}

/// Start the shell confined, in its own process group with stdout and stderr on one pipe (so
/// their interleaving is kept, as with `2>&1`). The command (and its copies of the pipe's write
/// end) is dropped before returning, so the reader sees end-of-file once every writer is gone.
fn spawn(
    command: &str,
    workdir: &Path,
    secret_names: &[String],
    confinement: Option<&Confinement>,
) -> std::io::Result<(Child, i32, tokio::net::unix::pipe::Receiver)> {
    let (reader, writer) = std::io::pipe()?;
    let writer_err = writer.try_clone()?;
    let mut cmd = Command::new(&*SHELL);
    cmd.arg("-c")
        .arg(command)
        .current_dir(workdir)
        .env_clear()
        .envs(command_env(secret_names))
        .env("PWD", workdir)
        .stdin(Stdio::null())
        .stdout(Stdio::from(writer))
        .stderr(Stdio::from(writer_err))
        .process_group(0)
        .kill_on_drop(true);
    if let Some(confinement) = confinement {
        confinement.confine(&mut cmd);
    }
    let child = cmd.spawn()?;
    drop(cmd);
    let pid =
        child.id().and_then(|p| i32::try_from(p).ok()).ok_or_else(|| std::io::Error::other("the shell exited before it had a pid"))?;
    let reader = tokio::net::unix::pipe::Receiver::from_owned_fd(std::os::fd::OwnedFd::from(reader))?;
    Ok((child, pid, reader))
}

async fn drain(mut reader: tokio::net::unix::pipe::Receiver, capture: Arc<Mutex<Capture>>) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => match capture.lock() {
                Ok(mut c) => c.push(&buf[..n]),
                Err(poisoned) => poisoned.into_inner().push(&buf[..n]),
            },
        }
    }
}

/// Kills the command's whole process group unless disarmed, also when the call is dropped
/// mid-run (the turn's future was dropped).
struct GroupGuard {
    pid: i32,
    armed: bool,
}

impl GroupGuard {
    fn kill(&mut self) {
        if self.armed && self.pid > 0 {
            // SAFETY: kill(2) with a negative pid signals the process group we created with
            // process_group(0); the group id is the shell's pid, which we have not reaped yet.
            unsafe {
                libc::kill(-self.pid, libc::SIGKILL);
            }
        }
        self.armed = false;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The output kept in memory: the first and last `limit` bytes, and a count of everything.
struct Capture {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    limit: usize,
    dropped_bytes: usize,
    chars: usize,
}

impl Capture {
    fn new(limit: usize) -> Self {
        Self { head: Vec::new(), tail: VecDeque::new(), limit, dropped_bytes: 0, chars: 0 }
    }

    fn push(&mut self, mut chunk: &[u8]) {
        // UTF-8 characters are counted by their first byte, so a count across chunks is exact.
        self.chars += chunk.iter().filter(|b| (**b & 0xC0) != 0x80).count();
        if self.head.len() < self.limit {
            let n = (self.limit - self.head.len()).min(chunk.len());
            self.head.extend_from_slice(&chunk[..n]);
            chunk = &chunk[n..];
        }
        self.tail.extend(chunk);
        if self.tail.len() > self.limit {
            let excess = self.tail.len() - self.limit;
            self.tail.drain(..excess);
            self.dropped_bytes += excess;
        }
    }

    /// The output as text, at most `cap` characters with the head and tail kept and a note of
    /// how much was dropped in between.
    fn render(&self, cap: usize) -> String {
        let head_keep = cap * 2 / 5;
        let tail_keep = cap - head_keep;
        let (head, tail) = if self.dropped_bytes == 0 {
            let mut all = self.head.clone();
            all.extend(self.tail.iter());
            let text = String::from_utf8_lossy(&all).into_owned();
            let total = text.chars().count();
            if total <= cap {
                return text;
            }
            (text.chars().take(head_keep).collect::<String>(), text.chars().skip(total - tail_keep).collect::<String>())
        } else {
            let head = String::from_utf8_lossy(&self.head);
            let tail_bytes: Vec<u8> = self.tail.iter().copied().collect();
            let tail = String::from_utf8_lossy(&tail_bytes);
            // The kept tail may start inside a character; drop the replacement that leaves.
            let tail = tail.trim_start_matches('\u{FFFD}');
            let tail_total = tail.chars().count();
            (head.chars().take(head_keep).collect(), tail.chars().skip(tail_total.saturating_sub(tail_keep)).collect())
        };
        let dropped = self.chars.saturating_sub(head.chars().count() + tail.chars().count());
        format!(
            "{head}\n\n[… {dropped} characters of output dropped ({} in all, over the {cap}-character cap). \
             Redirect the output to a file and read or search it, or filter it with grep/head/tail …]\n\n{tail}",
            self.chars
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::tools::{AgentPaths, ToolSettings};
    use std::time::Instant;

    fn ctx(dir: &Path) -> ToolContext {
        ToolContext::detached(AgentPaths::under(dir), ToolSettings::default())
    }

    async fn run(ctx: &ToolContext, args: Value) -> ToolOutput {
        Terminal.call(ctx, args).await
    }

    #[tokio::test]
    async fn runs_a_command_and_reports_the_exit_code() {
        let dir = tempfile::tempdir().unwrap();
        let out = run(&ctx(dir.path()), json!({"command": "echo hello"})).await;
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(out.content, "exit code: 0\nhello\n");
    }

    #[tokio::test]
    async fn non_zero_exit_is_a_result_with_both_streams() {
        let dir = tempfile::tempdir().unwrap();
        let out = run(&ctx(dir.path()), json!({"command": "echo out; echo err >&2; exit 3"})).await;
        assert!(!out.is_error, "{}", out.content);
        assert!(out.content.starts_with("exit code: 3\n"), "{}", out.content);
        assert!(out.content.contains("out\n") && out.content.contains("err\n"), "{}", out.content);
    }

    #[tokio::test]
    async fn runs_in_the_workdir_or_the_given_one() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let ctx = ctx(dir.path());
        let out = run(&ctx, json!({"command": "pwd"})).await;
        assert_eq!(out.content, format!("exit code: 0\n{}\n", dir.path().display()));
        let out = run(&ctx, json!({"command": "pwd", "workdir": "sub"})).await;
        assert!(out.content.trim_end().ends_with("/sub"), "{}", out.content);
        let out = run(&ctx, json!({"command": "pwd", "workdir": "nope"})).await;
        assert!(out.is_error && out.content.contains("does not exist"), "{}", out.content);
    }

    #[tokio::test]
    async fn timeout_kills_the_whole_process_group() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let started = Instant::now();
        let out = run(&ctx(dir.path()), json!({"command": "sleep 30 & echo $! > pid; echo started; wait", "timeout": 1})).await;
        assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
        assert!(out.is_error, "{}", out.content);
        assert!(out.content.contains("timed out after 1s"), "{}", out.content);
        assert!(out.content.contains("started"), "{}", out.content);
        let pid: i32 = std::fs::read_to_string(pid_file).unwrap().trim().parse().unwrap();
        // The background `sleep` is gone (or a zombie waiting for init to reap it).
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let alive = match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
                Ok(stat) => !stat.rsplit(')').next().unwrap_or_default().trim_start().starts_with('Z'),
                Err(_) => false,
            };
            if !alive {
                break;
            }
            assert!(Instant::now() < deadline, "sleep {pid} survived the timeout");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    #[tokio::test]
    async fn timeout_is_capped_by_the_setting() {
        let dir = tempfile::tempdir().unwrap();
        let mut ctx = ctx(dir.path());
        ctx.settings = Arc::new(ToolSettings { terminal_timeout: Duration::from_secs(1), ..ToolSettings::default() });
        let out = run(&ctx, json!({"command": "sleep 30", "timeout": 600})).await;
        assert!(out.is_error && out.content.contains("timed out after 1s"), "{}", out.content);
        let out = run(&ctx, json!({"command": "true", "timeout": "soon"})).await;
        assert!(out.is_error && out.content.contains("`timeout`"), "{}", out.content);
    }

    #[tokio::test]
    async fn a_background_process_holding_the_output_does_not_hang_the_call() {
        let dir = tempfile::tempdir().unwrap();
        let started = Instant::now();
        let out = run(&ctx(dir.path()), json!({"command": "sleep 30 & echo $! > pid; echo launched"})).await;
        assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
        let pid: i32 = std::fs::read_to_string(dir.path().join("pid")).unwrap().trim().parse().unwrap();
        // SAFETY: signals the sleep this test started.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
        assert!(!out.is_error, "{}", out.content);
        assert!(out.content.starts_with("exit code: 0\nlaunched\n"), "{}", out.content);
        assert!(out.content.contains("background process still holds the output open"), "{}", out.content);
    }

    #[tokio::test]
    async fn cancelling_the_turn_kills_the_command() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx(dir.path());
        let cancel = ctx.cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            cancel.cancel();
        });
        let started = Instant::now();
        let out = run(&ctx, json!({"command": "sleep 30"})).await;
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(out.is_error && out.content.contains("cancelled"), "{}", out.content);
    }

    #[tokio::test]
    async fn secrets_in_the_environment_do_not_reach_the_command() {
        let dir = tempfile::tempdir().unwrap();
        // SAFETY: unique names only this test reads; setting them races with no other reader.
        unsafe {
            std::env::set_var("HERMES_TERMINAL_TEST_API_KEY", "sk-conventional-value");
            std::env::set_var("HERMES_TERMINAL_TEST_CONFIGURED", "configured-value");
            std::env::set_var("HERMES_TERMINAL_TEST_VISIBLE", "visible-value");
        }
        let mut ctx = ctx(dir.path());
        ctx.settings =
            Arc::new(ToolSettings { secret_env_names: vec!["HERMES_TERMINAL_TEST_CONFIGURED".into()], ..ToolSettings::default() });
        let out = run(&ctx, json!({"command": "env"})).await;
        assert!(!out.is_error, "{}", out.content);
        assert!(out.content.contains("HERMES_TERMINAL_TEST_VISIBLE=visible-value"), "{}", out.content);
        assert!(!out.content.contains("HERMES_TERMINAL_TEST_API_KEY") && !out.content.contains("sk-conventional-value"));
        assert!(!out.content.contains("HERMES_TERMINAL_TEST_CONFIGURED") && !out.content.contains("configured-value"));
        assert!(is_secret_env("OPENAI_API_KEY", &[]) && is_secret_env("TELEGRAM_BOT_TOKEN", &[]));
        assert!(is_secret_env("DB_PASSWORD", &[]) && is_secret_env("client_secret", &[]) && !is_secret_env("PATH", &[]));
    }

    #[tokio::test]
    async fn destructive_commands_are_refused_without_running() {
        let dir = tempfile::tempdir().unwrap();
        let out = run(&ctx(dir.path()), json!({"command": "touch ran && rm -rf /"})).await;
        assert!(out.is_error, "{}", out.content);
        assert!(out.content.contains("BLOCKED"), "{}", out.content);
        assert!(!dir.path().join("ran").exists(), "the refused command ran");
    }

    #[tokio::test]
    async fn long_output_keeps_head_and_tail() {
        let dir = tempfile::tempdir().unwrap();
        let mut ctx = ctx(dir.path());
        ctx.settings = Arc::new(ToolSettings { terminal_output_cap: 200, ..ToolSettings::default() });
        // 6 + n + 1 + 4 characters: START, n x's, END. Both the in-memory path (1000 x's fit the
        // capture) and the streaming path (5000 x's overflow it) report the exact amount dropped.
        for n in [1000usize, 5000] {
            let cmd = format!("echo START; head -c {n} /dev/zero | tr '\\0' x; echo; echo END");
            let out = run(&ctx, json!({"command": cmd})).await;
            assert!(!out.is_error, "{}", out.content);
            assert!(out.content.starts_with("exit code: 0\nSTART\n"), "{}", out.content);
            assert!(out.content.ends_with("x\nEND\n"), "{}", out.content);
            let total = 6 + n + 1 + 4;
            assert!(out.content.contains(&format!("{} characters of output dropped ({total} in all", total - 200)), "{}", out.content);
            assert!(out.content.len() < 600, "{}", out.content.len());
        }
    }

    #[tokio::test]
    async fn missing_or_empty_command_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx(dir.path());
        assert!(run(&ctx, json!({})).await.content.contains("`command`"));
        assert!(run(&ctx, json!({"command": "  "})).await.is_error);
    }
}
