//! What the benchmarks share: percentiles and verdicts, the command a gateway is spawned with
//! (under `HERMES_BENCH_WRAPPER`, e.g. callgrind, when set), and a spawned `hermes` process whose
//! memory can be read and which is stopped with SIGTERM (as systemd would) or killed on drop.

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

pub(crate) fn verdict(met: bool, target: &str) -> String {
    format!("{target} {}", if met { "met" } else { "NOT met" })
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// `sorted` must be sorted and non-empty.
pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// A running `hermes` child process; killed when dropped.
pub(crate) struct Process {
    child: Option<Child>,
    pub spawned: Instant,
}

impl Process {
    /// `spawned` is taken just before the spawn by the caller, so start-up timings include it.
    pub(crate) fn new(child: Child, spawned: Instant) -> Self {
        Self { child: Some(child), spawned }
    }

    /// (VmRSS, VmHWM) in kB.
    pub(crate) fn memory_kb(&self) -> (u64, u64) {
        let pid = self.child.as_ref().map(Child::id).unwrap_or(0);
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let field = |name: &str| {
            status.lines().find(|l| l.starts_with(name)).and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse().ok()).unwrap_or(0)
        };
        (field("VmRSS:"), field("VmHWM:"))
    }

    /// SIGTERM and wait, as systemd would stop it.
    pub(crate) fn stop(mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: kill(2) on our own child's pid.
            unsafe {
                libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
            }
            let _ = child.wait();
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The wrapper command line from `HERMES_BENCH_WRAPPER`, split on whitespace (empty when unset).
pub(crate) fn wrapper() -> Vec<String> {
    std::env::var("HERMES_BENCH_WRAPPER").unwrap_or_default().split_whitespace().map(String::from).collect()
}

/// `BINARY`, or `WRAPPER… BINARY` when a wrapper is set.
pub(crate) fn wrapped_command(wrapper: &[String], binary: &Path) -> Command {
    match wrapper.split_first() {
        Some((program, args)) => {
            let mut command = Command::new(program);
            command.args(args).arg(binary);
            command
        }
        None => Command::new(binary),
    }
}
