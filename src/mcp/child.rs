//! A stdio server's process: its own process group (so an `npx` → `node` chain dies together),
//! killed with the gateway (`PR_SET_PDEATHSIG`), an environment of the safe list plus the server's
//! own `env` (never the gateway's secrets), and killed as a group and reaped before another starts.

use crate::config::{Env, McpServerConfig};
use std::path::Path;
use std::process::Stdio;
use tokio::process::{ChildStdin, ChildStdout, Command};

/// Variables a child inherits from the gateway; everything else (tokens, keys) stays behind.
const SAFE_ENV: [&str; 8] = ["PATH", "HOME", "USER", "LANG", "LC_ALL", "TERM", "SHELL", "TMPDIR"];

/// A running stdio server. Dropping it kills the group; [`ServerChild::kill_and_reap`] also waits.
pub(crate) struct ServerChild {
    child: tokio::process::Child,
    pgid: i32,
    reaped: bool,
}

/// The child and its stdout (we read) and stdin (we write).
pub(crate) type Spawned = (ServerChild, ChildStdout, ChildStdin);

/// Spawn `server` (already interpolated); its stderr goes to the server's log. The safe variables
/// come from `env` (`.env` under the process environment), which also holds the gateway's secrets:
/// only the safe list and the server's own `env` pass.
pub(crate) fn spawn(name: &str, server: &McpServerConfig, env: &Env, logs_dir: &Path) -> std::io::Result<Spawned> {
    let program = server.command.as_deref().unwrap_or_default();
    let mut command = Command::new(program);
    command.args(&server.args).env_clear();
    for (key, value) in env.iter() {
        if SAFE_ENV.contains(&key) || key.starts_with("XDG_") {
            command.env(key, value);
        }
    }
    command.envs(&server.env);
    command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true).process_group(0);
    // The death signal follows the *thread* that forks, not the process: children are spawned
    // from the runtime's async tasks, whose worker threads live as long as the runtime (nothing
    // here uses `block_in_place` or `spawn_blocking` to spawn, which could end the thread early).
    let parent = std::process::id();
    // SAFETY: the closure runs in the forked child before exec and only calls prctl(2) and
    // getppid(2), which are async-signal-safe; it allocates nothing and touches no shared state.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            // The gateway died between fork and prctl: the signal will never come, so stop now.
            if libc::getppid() as u32 != parent {
                return Err(std::io::Error::other("the gateway exited while this server was starting"));
            }
            Ok(())
        });
    }
    let mut child = command.spawn()?;
    let pid = child.id().and_then(|p| i32::try_from(p).ok()).ok_or_else(|| std::io::Error::other("the child exited at once"))?;
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        return Err(std::io::Error::other("the child's stdio pipes are missing"));
    };
    if let Some(stderr) = child.stderr.take() {
        let header = format!("=== {} start of MCP server '{name}' (pid {pid}): {program} ===", chrono::Utc::now().to_rfc3339());
        tokio::spawn(super::stderr_log::pump(stderr, super::stderr_log::log_path(logs_dir, name), header));
    }
    // process_group(0): the child's pgid is its pid.
    Ok((ServerChild { child, pgid: pid, reaped: false }, stdout, stdin))
}

impl ServerChild {
    /// SIGKILL to the whole group, then wait for the leader so no zombie is left.
    pub(crate) async fn kill_and_reap(&mut self) {
        if self.reaped {
            return;
        }
        kill_group(self.pgid);
        let _ = self.child.wait().await;
        self.reaped = true;
    }
}

fn kill_group(pgid: i32) {
    // SAFETY: kill(2) with a negative pid signals that process group; pgid is our child's pid (>0),
    // so this never signals our own group or every process.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
}

impl Drop for ServerChild {
    fn drop(&mut self) {
        if !self.reaped {
            // kill_on_drop also kills the leader and tokio reaps it in the background.
            kill_group(self.pgid);
        }
    }
}
