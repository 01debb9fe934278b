//! One measured `BINARY gateway run`: a temporary HERMES_HOME with its config.yaml, only the
//! environment given (nothing of the caller's, so no stray token enables another adapter),
//! its log kept for failures, stopped with SIGTERM as systemd would (killed if it hangs or on
//! drop).
//!
//! `HERMES_BENCH_WRAPPER`, as in `benches/telegram.rs`, is a command line the gateway runs under
//! (split on whitespace, the binary and its arguments appended): `scripts/order-hot-code.py` sets
//! it to `valgrind --tool=callgrind …`. A wrapped gateway gets [`WRAPPED_SLOWDOWN`] times longer
//! to come up and to stop, since callgrind runs it ~50× slower and writes its profile at exit.

use crate::support::{wrapped_command, wrapper};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// How many times longer every timeout is for a wrapped gateway. Not the full ~50× of
/// callgrind: the timeouts are generous to start with, and network waits do not slow down.
pub(crate) const WRAPPED_SLOWDOWN: u32 = 10;

pub(crate) struct Gateway {
    child: Option<Child>,
    home: tempfile::TempDir,
    wrapped: bool,
    pub spawned: Instant,
}

impl Gateway {
    pub(crate) fn spawn(binary: &Path, env: &[(String, String)], config_yaml: &str) -> Result<Gateway, String> {
        let home = tempfile::tempdir().map_err(|e| format!("cannot make a temporary HERMES_HOME: {e}"))?;
        // No file at all rather than an empty one when the environment says everything.
        if !config_yaml.is_empty() {
            std::fs::write(home.path().join("config.yaml"), config_yaml).map_err(|e| format!("cannot write config.yaml: {e}"))?;
        }
        let log = std::fs::File::create(home.path().join("gateway.log")).map_err(|e| format!("cannot make the gateway log: {e}"))?;
        let wrapper = wrapper();
        let mut command = wrapped_command(&wrapper, binary);
        command.args(["gateway", "run"]).env_clear().env("HERMES_HOME", home.path()).env("HOME", home.path()).env("RUST_LOG", "warn");
        if let Some(path) = std::env::var_os("PATH") {
            command.env("PATH", path);
        }
        command.envs(env.iter().map(|(k, v)| (k, v))).stdout(Stdio::null()).stderr(log);
        let spawned = Instant::now();
        let child = command.spawn().map_err(|e| format!("cannot run {}: {e}", describe(&wrapper, binary)))?;
        Ok(Gateway { child: Some(child), home, wrapped: !wrapper.is_empty(), spawned })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).unwrap_or(0)
    }

    /// How many times longer than usual to wait for this gateway.
    pub(crate) fn slowdown(&self) -> u32 {
        if self.wrapped { WRAPPED_SLOWDOWN } else { 1 }
    }

    /// `Some(description)` once the process has exited.
    pub(crate) fn exited(&mut self) -> Option<String> {
        let status = self.child.as_mut()?.try_wait().ok()??;
        Some(format!("the gateway exited early ({status}):\n{}", self.log()))
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.home.path().join("gateway.log")).unwrap_or_default()
    }

    /// SIGTERM, then wait for the exit: how it exited and how long that took, or an error once it
    /// had to be killed after the stop timeout (a wrapped gateway killed leaves no profile).
    pub(crate) async fn stop(mut self) -> Result<(std::process::ExitStatus, Duration), String> {
        let timeout = STOP_TIMEOUT * self.slowdown();
        let Some(mut child) = self.child.take() else { return Err("the gateway was already stopped".into()) };
        let asked = Instant::now();
        // SAFETY: kill(2) on our own child's pid, which has not been reaped yet.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
        }
        while Instant::now() <= asked + timeout {
            match child.try_wait() {
                Ok(Some(status)) => return Ok((status, asked.elapsed())),
                Ok(None) => tokio::time::sleep(Duration::from_millis(20)).await,
                Err(e) => return Err(format!("cannot wait for the gateway: {e}")),
            }
        }
        let _ = child.kill();
        let _ = child.wait();
        Err(format!("the gateway ignored SIGTERM for {timeout:?}; killed it:\n{}", self.log()))
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The command line spawned, for messages.
pub(crate) fn describe(wrapper: &[String], binary: &Path) -> String {
    let mut words = wrapper.to_vec();
    words.push(binary.display().to_string());
    words.join(" ")
}
