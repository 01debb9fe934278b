//! The sandbox confining real child processes, in temporary directories: a fake workspace, a
//! private temp dir, a fake HERMES_HOME with a `.env`, and a directory outside both.

// A test crate: its helpers run only under tests, where a panic is how a test fails
// (clippy.toml's allow-unwrap-in-tests covers `#[test]` functions, not the helpers they call).
#![allow(clippy::unwrap_used)]

use hermes_guard::sandbox::{self, Availability, DenialKind, PreparedSandbox, SandboxError, SandboxMode, SandboxPolicy};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

struct Fixture {
    _root: tempfile::TempDir,
    workspace: PathBuf,
    private_tmp: PathBuf,
    hermes_home: PathBuf,
    outside: PathBuf,
}

fn fixture() -> Fixture {
    let root = tempfile::tempdir().unwrap();
    let base = fs::canonicalize(root.path()).unwrap();
    let fixture = Fixture {
        workspace: base.join("workspace"),
        private_tmp: base.join("private-tmp"),
        hermes_home: base.join("hermes-home"),
        outside: base.join("outside"),
        _root: root,
    };
    for dir in [&fixture.workspace, &fixture.private_tmp, &fixture.hermes_home, &fixture.outside.join("keep")] {
        fs::create_dir_all(dir).unwrap();
    }
    fs::write(fixture.hermes_home.join(".env"), "TELEGRAM_BOT_TOKEN=secret-token\n").unwrap();
    fs::write(fixture.outside.join("keep/precious.txt"), "precious\n").unwrap();
    fs::write(fixture.workspace.join("notes.txt"), "notes\n").unwrap();
    fixture
}

impl Fixture {
    fn policy(&self, mode: SandboxMode) -> SandboxPolicy {
        SandboxPolicy::new(mode, &self.workspace, &self.private_tmp, &self.hermes_home)
    }

    /// Runs `sh -c script` in the workspace under `sandbox`, with HOME and TMPDIR in the
    /// private temp dir.
    fn run(&self, sandbox: &Arc<PreparedSandbox>, script: &str) -> Output {
        let mut command = Command::new("sh");
        command.arg("-c").arg(script).current_dir(&self.workspace).env("HOME", &self.private_tmp).env("TMPDIR", &self.private_tmp);
        sandbox.confine(&mut command);
        command.output().unwrap()
    }

    fn confined(&self, mode: SandboxMode) -> (SandboxPolicy, Arc<PreparedSandbox>) {
        let policy = self.policy(mode);
        let sandbox = policy.prepare().unwrap();
        (policy, sandbox)
    }
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn script_for(fixture: &Fixture, template: &str) -> String {
    template.replace("OUT", &fixture.outside.display().to_string()).replace("HERMES", &fixture.hermes_home.display().to_string())
}

#[test]
fn landlock_is_available_on_this_kernel() {
    match sandbox::availability() {
        Availability::Supported { abi } => assert!(abi >= 5, "Landlock ABI {abi} is older than the one the sandbox is tested with"),
        other => panic!("{other}"),
    }
}

#[test]
fn writes_outside_the_workspace_fail_whatever_the_command() {
    let fixture = fixture();
    let (policy, sandbox) = fixture.confined(SandboxMode::WorkspaceWrite);
    fs::write(fixture.workspace.join("to-move.txt"), "x").unwrap();
    let attempts = [
        ("touch OUT/touched", "OUT/touched"),
        ("echo x > OUT/redirected", "OUT/redirected"),
        ("cp notes.txt OUT/copied", "OUT/copied"),
        ("mv to-move.txt OUT/moved", "OUT/moved"),
        ("python3 -c 'open(\"OUT/python\", \"w\").write(\"x\")'", "OUT/python"),
        ("mkdir OUT/made", "OUT/made"),
        ("ln -s /etc/hostname OUT/linked", "OUT/linked"),
        ("echo x | tee OUT/teed", "OUT/teed"),
        ("sh -c 'echo x > OUT/nested-shell'", "OUT/nested-shell"),
        ("dd if=/dev/zero of=OUT/dd bs=1 count=1", "OUT/dd"),
        ("echo x > /tmp/hermes-guard-sandbox-test-$$", "/nonexistent"),
    ];
    for (template, created) in attempts {
        let script = script_for(&fixture, template);
        let output = fixture.run(&sandbox, &script);
        assert!(!output.status.success(), "{script} succeeded under the sandbox");
        let error = stderr(&output);
        assert!(error.contains("Permission denied") || error.contains("PermissionError"), "{script}: {error}");
        assert!(!Path::new(&script_for(&fixture, created)).exists(), "{script} created its file");
        let denial = policy.explain_failure(&error, &output.status).unwrap();
        assert_eq!(denial.kind, DenialKind::WriteOutsideWorkspace, "{script}: {error}");
    }
    assert!(fixture.workspace.join("to-move.txt").exists(), "the refused move lost its source");
}

#[test]
fn deleting_outside_the_workspace_fails() {
    let fixture = fixture();
    let (_, sandbox) = fixture.confined(SandboxMode::WorkspaceWrite);
    for template in
        ["rm -rf OUT/keep", "rm OUT/keep/precious.txt", "find OUT/keep -delete", "python3 -c 'import shutil; shutil.rmtree(\"OUT/keep\")'"]
    {
        let output = fixture.run(&sandbox, &script_for(&fixture, template));
        assert!(!output.status.success(), "{template} succeeded under the sandbox");
        assert_eq!(fs::read_to_string(fixture.outside.join("keep/precious.txt")).unwrap(), "precious\n", "{template}");
    }
}

#[test]
fn hermes_home_is_unreadable_even_through_links_in_the_workspace() {
    let fixture = fixture();
    let (policy, sandbox) = fixture.confined(SandboxMode::WorkspaceWrite);
    for template in [
        "cat HERMES/.env",
        "ls HERMES",
        "base64 HERMES/.env",
        "rev HERMES/.env",
        "python3 -c 'print(open(\"HERMES/.env\").read())'",
        "cp HERMES/.env copy && cat copy",
        "ln -s HERMES/.env link && cat link",
        "ln -s HERMES dir-link && cat dir-link/.env",
        "ln HERMES/.env hard-link",
    ] {
        let script = script_for(&fixture, template);
        let output = fixture.run(&sandbox, &script);
        assert!(!output.status.success(), "{script} succeeded under the sandbox");
        assert!(!stdout(&output).contains("secret-token"), "{script} leaked the secret");
        if template.starts_with("cat HERMES") {
            assert_eq!(policy.explain_failure(&stderr(&output), &output.status).unwrap().kind, DenialKind::HermesHome);
        }
    }
}

/// Landlock keeps a sandboxed process from tracing one outside its domain, so the agent's
/// memory (where the secrets it loaded live) cannot be read through `/proc`. (It does not stop
/// reading `/proc/<pid>/environ`, the environment the daemon was started with: keep secrets
/// out of that, as the crate docs say.)
#[test]
fn the_daemons_memory_is_out_of_reach() {
    let fixture = fixture();
    let (_, sandbox) = fixture.confined(SandboxMode::WorkspaceWrite);
    let read_heap = format!(
        "python3 -c 'import sys\nfor line in open(\"/proc/{pid}/maps\"):\n    if \"[heap]\" in line:\n        start = int(line.split(\"-\")[0], 16)\n        memory = open(\"/proc/{pid}/mem\", \"rb\")\n        memory.seek(start)\n        sys.stdout.write(str(len(memory.read(64))))\n        break'",
        pid = std::process::id()
    );
    let output = fixture.run(&sandbox, &read_heap);
    assert!(!output.status.success(), "read the daemon's memory: {}", stdout(&output));
    assert!(stderr(&output).contains("Permission denied"), "{}", stderr(&output));
    // The same read works unconfined, so the refusal is the sandbox's.
    let (_, unconfined) = fixture.confined(SandboxMode::Off);
    let output = fixture.run(&unconfined, &read_heap);
    assert_eq!(stdout(&output), "64", "{}", stderr(&output));
}

#[test]
fn workspace_and_private_tmp_writes_work() {
    let fixture = fixture();
    let (_, sandbox) = fixture.confined(SandboxMode::WorkspaceWrite);
    let script = "echo hello > out.txt && mkdir -p build/x && mv out.txt build/x/ && cp build/x/out.txt copy.txt && rm -rf build \
                  && f=$(mktemp) && echo tmp > \"$f\" && cat \"$f\" && mv \"$f\" moved-from-tmp.txt && cat copy.txt";
    let output = fixture.run(&sandbox, script);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "tmp\nhello\n");
    assert!(fixture.workspace.join("moved-from-tmp.txt").exists());
}

#[test]
fn ordinary_tools_work_inside() {
    let fixture = fixture();
    let (_, sandbox) = fixture.confined(SandboxMode::WorkspaceWrite);
    let git = "git init -q && echo a > a.txt && git add a.txt && git -c user.name=t -c user.email=t@example.com commit -qm first && git log --oneline | wc -l";
    let output = fixture.run(&sandbox, git);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output).trim(), "1");
    for (script, expected) in [
        ("python3 -c 'print(6 * 7)'", "42\n"),
        ("sh -c 'ls /usr' | grep -c '^bin$'", "1\n"),
        ("echo hidden > /dev/null && echo shown", "shown\n"),
        ("echo to-stderr > /dev/stderr; head -c 4 /dev/urandom | wc -c", "4\n"),
        ("cat notes.txt | wc -l", "1\n"),
    ] {
        let output = fixture.run(&sandbox, script);
        assert!(output.status.success(), "{script}: {}", stderr(&output));
        assert_eq!(stdout(&output), expected, "{script}");
    }
}

#[test]
fn read_only_mode_reads_but_writes_nothing() {
    let fixture = fixture();
    let (policy, sandbox) = fixture.confined(SandboxMode::ReadOnly);
    let output = fixture.run(&sandbox, "cat notes.txt && echo quiet > /dev/null");
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "notes\n");
    let output = fixture.run(&sandbox, "echo x > new.txt");
    assert!(!output.status.success());
    assert!(!fixture.workspace.join("new.txt").exists());
    assert_eq!(policy.explain_failure(&stderr(&output), &output.status).unwrap().kind, DenialKind::ReadOnly);
    let output = fixture.run(&sandbox, &script_for(&fixture, "cat HERMES/.env"));
    assert!(!output.status.success() && !stdout(&output).contains("secret-token"));
}

#[test]
fn off_applies_nothing() {
    let fixture = fixture();
    let (_, sandbox) = fixture.confined(SandboxMode::Off);
    let output = fixture.run(&sandbox, &script_for(&fixture, "echo x > OUT/free.txt"));
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(fixture.outside.join("free.txt").exists());
}

#[test]
fn a_workspace_inside_hermes_home_stays_usable_while_the_rest_stays_hidden() {
    let fixture = fixture();
    let inner = fixture.hermes_home.join("workspaces/chat-1");
    fs::create_dir_all(&inner).unwrap();
    let policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &inner, &fixture.private_tmp, &fixture.hermes_home);
    let sandbox = policy.prepare().unwrap();
    let mut command = Command::new("sh");
    command.arg("-c").arg(format!("echo ok > here.txt && cat here.txt && cat {}/.env", fixture.hermes_home.display())).current_dir(&inner);
    sandbox.confine(&mut command);
    let output = command.output().unwrap();
    assert_eq!(stdout(&output), "ok\n");
    assert!(!output.status.success(), "the .env next to the workspace was readable");
}

#[test]
fn hermes_home_inside_a_writable_dir_is_refused() {
    let fixture = fixture();
    let policy =
        SandboxPolicy::new(SandboxMode::WorkspaceWrite, &fixture.workspace, &fixture.private_tmp, fixture.workspace.join(".hermes"));
    assert!(matches!(policy.prepare(), Err(SandboxError::UnsafePolicy(_))));
}
