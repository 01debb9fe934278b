//! A job's script: only a file inside `HERMES_HOME/scripts` (a job record naming `/etc/…` or
//! `../x` is refused, symlinks included), `.sh`/`.bash` run with bash and anything else with
//! python3, in the scripts folder, without the gateway's secrets in its environment, killed at
//! its timeout.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::process::Command;

/// Standard output kept from a script.
const OUTPUT_CAP: usize = 64 * 1024;

/// Why a script did not give an output.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    #[error("script '{0}' is not a file inside {1} (scripts may only run from there)")]
    Outside(String, String),
    #[error("script '{0}' cannot start: {1}")]
    Start(String, std::io::Error),
    #[error("script '{name}' exited with {status}: {stderr}")]
    Failed { name: String, status: String, stderr: String },
    #[error("script '{0}' did not finish within {1} s and was killed")]
    TimedOut(String, u64),
    #[error("script '{0}' is refused: {1}")]
    Refused(String, super::prompt::StopsGateway),
}

/// How much of a script the lifecycle guard reads: far more than any real cron script.
const GUARD_READ_CAP: u64 = 1024 * 1024;

/// Why the script at `path` must not run from a job: its contents stop or restart the gateway
/// (the guard reads what the script does, not only what it is called).
pub(crate) fn lifecycle_refusal(name: &str, path: &Path) -> Result<(), ScriptError> {
    use std::io::Read;
    let mut head = Vec::new();
    let read = std::fs::File::open(path).and_then(|f| f.take(GUARD_READ_CAP).read_to_end(&mut head));
    read.map_err(|e| ScriptError::Start(name.to_string(), e))?;
    match super::prompt::lifecycle_refusal("", Some(&String::from_utf8_lossy(&head))) {
        Some(why) => Err(ScriptError::Refused(name.to_string(), why)),
        None => Ok(()),
    }
}

/// What a script runs with.
pub(crate) struct ScriptRun<'a> {
    pub scripts_dir: &'a Path,
    pub timeout: Duration,
    /// Environment variables removed (the gateway's secrets).
    pub hidden_env: &'a [String],
}

/// The script's path, if it names a file inside the scripts folder.
pub(crate) fn locate(scripts_dir: &Path, script: &str) -> Result<PathBuf, ScriptError> {
    let outside = || ScriptError::Outside(script.to_string(), scripts_dir.display().to_string());
    let root = scripts_dir.canonicalize().map_err(|_| outside())?;
    let path = root.join(script).canonicalize().map_err(|_| outside())?;
    if path.starts_with(&root) && path.is_file() { Ok(path) } else { Err(outside()) }
}

/// Run the script and return its standard output.
pub(crate) async fn run(script: &str, run: &ScriptRun<'_>) -> Result<String, ScriptError> {
    let path = locate(run.scripts_dir, script)?;
    // Checked again at each run: the file may have changed since the job was created.
    lifecycle_refusal(script, &path)?;
    let is_shell = path.extension().is_some_and(|e| e == "sh" || e == "bash");
    let mut command = Command::new(if is_shell { "bash" } else { "python3" });
    command.arg(&path).current_dir(run.scripts_dir).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
    for name in run.hidden_env {
        command.env_remove(name);
    }
    let child = command.spawn().map_err(|e| ScriptError::Start(script.to_string(), e))?;
    let output = match tokio::time::timeout(run.timeout, child.wait_with_output()).await {
        Ok(Ok(output)) => output,
        Ok(Err(e)) => return Err(ScriptError::Start(script.to_string(), e)),
        Err(_) => return Err(ScriptError::TimedOut(script.to_string(), run.timeout.as_secs())),
    };
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr).chars().rev().take(500).collect::<Vec<_>>().into_iter().rev().collect();
        return Err(ScriptError::Failed { name: script.to_string(), status: output.status.to_string(), stderr });
    }
    let stdout = String::from_utf8_lossy(&output.stdout[..output.stdout.len().min(OUTPUT_CAP)]).into_owned();
    Ok(stdout)
}

/// A script's way of saying the agent need not run this time (Hermes' `wakeAgent: false`).
pub(crate) fn skips_agent(output: &str) -> bool {
    output.lines().any(|l| {
        let compact: String = l.chars().filter(|c| !c.is_whitespace() && *c != '"' && *c != '\'').collect();
        compact.eq_ignore_ascii_case("wakeAgent:false") || compact.eq_ignore_ascii_case("{wakeAgent:false}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let scripts = dir.path().join("scripts");
        std::fs::create_dir_all(&scripts).unwrap();
        (dir, scripts)
    }

    #[tokio::test]
    async fn only_scripts_inside_the_folder_run_and_secrets_stay_out() {
        let (dir, scripts) = setup();
        std::fs::write(scripts.join("ok.sh"), "echo \"out:${HERMES_TEST_SECRET:-none}\"").unwrap();
        std::fs::write(dir.path().join("evil.sh"), "echo pwned").unwrap();
        std::os::unix::fs::symlink(dir.path().join("evil.sh"), scripts.join("link.sh")).unwrap();
        let hidden = vec!["HERMES_TEST_SECRET".to_string()];
        let run_with = ScriptRun { scripts_dir: &scripts, timeout: Duration::from_secs(10), hidden_env: &hidden };
        // SAFETY: test-only variable no other test reads.
        unsafe { std::env::set_var("HERMES_TEST_SECRET", "s3cret") };
        assert_eq!(run("ok.sh", &run_with).await.unwrap().trim(), "out:none");
        for bad in ["../evil.sh", "/etc/passwd", "link.sh", "missing.sh", ""] {
            assert!(matches!(run(bad, &run_with).await, Err(ScriptError::Outside(..))), "{bad}");
        }
    }

    #[tokio::test]
    async fn a_script_changed_to_restart_the_gateway_is_refused_at_its_next_run() {
        let (dir, scripts) = setup();
        let marker = dir.path().join("ran");
        let run_with = ScriptRun { scripts_dir: &scripts, timeout: Duration::from_secs(10), hidden_env: &[] };
        std::fs::write(scripts.join("nightly.sh"), "echo fine").unwrap();
        assert_eq!(run("nightly.sh", &run_with).await.unwrap().trim(), "fine");
        let hostile = format!("touch {}\nsystemctl --user restart hermes-gateway\n", marker.display());
        std::fs::write(scripts.join("nightly.sh"), hostile).unwrap();
        let refused = run("nightly.sh", &run_with).await.unwrap_err();
        assert!(
            matches!(refused, ScriptError::Refused(..)) && refused.to_string().contains("systemctl --user restart hermes"),
            "{refused}"
        );
        assert!(!marker.exists(), "nothing of the script ran");
    }

    #[tokio::test]
    async fn failures_and_timeouts_are_reported() {
        let (_dir, scripts) = setup();
        std::fs::write(scripts.join("fail.sh"), "echo bad >&2; exit 3").unwrap();
        std::fs::write(scripts.join("slow.sh"), "sleep 5").unwrap();
        let run_with = ScriptRun { scripts_dir: &scripts, timeout: Duration::from_millis(300), hidden_env: &[] };
        let e = run("fail.sh", &run_with).await.unwrap_err().to_string();
        assert!(e.contains("exit status: 3") && e.contains("bad"), "{e}");
        assert!(matches!(run("slow.sh", &run_with).await, Err(ScriptError::TimedOut(..))));
        assert!(skips_agent("checked\n{\"wakeAgent\": false}\n") && !skips_agent("wakeAgent: true"));
    }
}
