//! The confinement wired into the tools, for real on this kernel: a HERMES_HOME with a `.env` and
//! a workspace inside it, a directory outside both, and the built-in tools called through the
//! registry as the turn loop calls them.

use super::Confinement;
use crate::agent::tools::{AgentPaths, ToolContext, ToolFilter, ToolOutput, ToolSettings, builtin};
use crate::config::SandboxSetting;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

const SECRET: &str = "TELEGRAM_BOT_TOKEN=123:sandbox-unit-secret";

struct Fixture {
    _root: tempfile::TempDir,
    home: PathBuf,
    workspace: PathBuf,
    outside: PathBuf,
    ctx: ToolContext,
}

fn fixture(setting: SandboxSetting) -> Fixture {
    let root = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(root.path()).unwrap();
    let (home, outside) = (base.join("hermes-home"), base.join("outside"));
    let workspace = home.join("workspace");
    for dir in [&workspace, &outside] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(home.join(".env"), format!("{SECRET}\n")).unwrap();
    let confinement = Confinement::prepare(setting, &workspace, &home).unwrap();
    let settings = ToolSettings { confinement: Arc::new(confinement), ..ToolSettings::default() };
    let mut paths = AgentPaths::under(&home);
    paths.workdir = workspace.clone();
    let ctx = ToolContext::detached(paths, settings);
    Fixture { _root: root, home, workspace, outside, ctx }
}

async fn call(fixture: &Fixture, tool: &str, args: Value) -> ToolOutput {
    let (registry, filter, raw) = (builtin(), ToolFilter::default(), args.to_string());
    let call = registry.call(&filter, &fixture.ctx, tool, &raw);
    tokio::time::timeout(Duration::from_secs(30), call).await.unwrap_or_else(|_| panic!("{tool} {args} hung"))
}

#[tokio::test]
async fn the_sandbox_is_enforced_on_this_kernel() {
    let fixture = fixture(SandboxSetting::WorkspaceWrite);
    let confinement = &fixture.ctx.settings.confinement;
    assert!(confinement.enforced(), "{:?}", confinement.degraded());
    let tmp = confinement.private_tmp().unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(tmp).unwrap().permissions().mode() & 0o777, 0o700);
    assert!(!tmp.starts_with(&fixture.home));
}

#[tokio::test]
async fn a_hardline_command_never_runs() {
    let fixture = fixture(SandboxSetting::WorkspaceWrite);
    let out = call(&fixture, "terminal", json!({"command": "touch ran; r''m -rf /"})).await;
    assert!(out.is_error && out.content.contains("BLOCKED (hardline): recursive delete of root filesystem"), "{}", out.content);
    assert!(!fixture.workspace.join("ran").exists(), "the refused command ran");
}

#[tokio::test]
async fn a_flagged_command_is_refused_with_its_key() {
    let fixture = fixture(SandboxSetting::WorkspaceWrite);
    std::fs::create_dir(fixture.workspace.join("build")).unwrap();
    let out = call(&fixture, "terminal", json!({"command": "rm --recursive --force build"})).await;
    assert!(out.is_error && out.content.contains("- recursive delete (long flag) (rm "), "{}", out.content);
    assert!(out.content.contains("Nobody can approve"), "{}", out.content);
    assert!(fixture.workspace.join("build").exists(), "the refused command ran");
}

#[tokio::test]
async fn an_innocent_looking_write_outside_fails_with_the_sandboxs_reason() {
    let fixture = fixture(SandboxSetting::WorkspaceWrite);
    let target = fixture.outside.join("escaped.txt");
    std::fs::write(fixture.workspace.join("job.sh"), format!("echo x > {}\n", target.display())).unwrap();
    let out = call(&fixture, "terminal", json!({"command": "sh job.sh"})).await;
    assert!(out.content.contains("[sandbox] the sandbox denied writing outside the workspace"), "{}", out.content);
    assert!(out.content.contains("Work inside the workspace instead"), "{}", out.content);
    assert!(!target.exists());
    let out = call(&fixture, "terminal", json!({"command": "cat ../.env"})).await;
    assert!(out.content.contains("HERMES_HOME") && !out.content.contains("sandbox-unit-secret"), "{}", out.content);
}

#[tokio::test]
async fn workspace_writes_and_temp_files_work() {
    let fixture = fixture(SandboxSetting::WorkspaceWrite);
    let out = call(&fixture, "terminal", json!({"command": "echo hi > out.txt && cat out.txt && mktemp"})).await;
    assert!(!out.is_error && out.content.contains("exit code: 0") && out.content.contains("hi\n"), "{}", out.content);
    let tmp = fixture.ctx.settings.confinement.private_tmp().unwrap();
    let made = out.content.lines().find(|line| line.starts_with(&*tmp.to_string_lossy())).unwrap_or_else(|| panic!("{}", out.content));
    assert!(Path::new(made).is_file(), "{made}");
}

#[tokio::test]
async fn file_tools_refuse_hermes_home_and_symlink_escapes() {
    let fixture = fixture(SandboxSetting::WorkspaceWrite);
    std::os::unix::fs::symlink(fixture.home.join(".env"), fixture.workspace.join("env-link")).unwrap();
    std::os::unix::fs::symlink(&fixture.outside, fixture.workspace.join("out-link")).unwrap();
    for args in [json!({"path": "../.env"}), json!({"path": fixture.home.join(".env")}), json!({"path": "env-link"})] {
        let out = call(&fixture, "read_file", args.clone()).await;
        assert!(out.is_error && out.content.contains("HERMES_HOME"), "{args}: {}", out.content);
        assert!(!out.content.contains("sandbox-unit-secret"));
    }
    let out = call(&fixture, "search_files", json!({"pattern": "sandbox-unit", "path": ".."})).await;
    assert!(out.is_error && !out.content.contains("sandbox-unit-secret"), "{}", out.content);
    let out = call(&fixture, "write_file", json!({"path": "out-link/x.txt", "content": "x"})).await;
    assert!(out.is_error && out.content.contains("outside the workspace"), "{}", out.content);
    let out = call(&fixture, "write_file", json!({"path": "../config.yaml", "content": "x"})).await;
    assert!(out.is_error && out.content.contains("outside the workspace"), "{}", out.content);
    let out = call(&fixture, "patch", json!({"path": "env-link", "old_string": "a", "new_string": "b"})).await;
    assert!(out.is_error && out.content.contains("outside the workspace"), "{}", out.content);
    assert!(!fixture.outside.join("x.txt").exists());
    let out = call(&fixture, "write_file", json!({"path": "notes/ok.txt", "content": "fine"})).await;
    assert!(!out.is_error, "{}", out.content);
}

#[tokio::test]
async fn file_tools_refuse_fifos_instead_of_hanging() {
    let fixture = fixture(SandboxSetting::WorkspaceWrite);
    let fifo = fixture.workspace.join("pipe");
    let c_path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo only creates the node.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    let out = call(&fixture, "read_file", json!({"path": "pipe"})).await;
    assert!(out.is_error && out.content.contains("a FIFO"), "{}", out.content);
    let out = call(&fixture, "patch", json!({"path": "pipe", "old_string": "a", "new_string": "b"})).await;
    assert!(out.is_error && out.content.contains("a FIFO"), "{}", out.content);
    let out = call(&fixture, "write_file", json!({"path": "pipe", "content": "x"})).await;
    assert!(out.is_error && out.content.contains("a FIFO"), "{}", out.content);
    std::fs::write(fixture.workspace.join("text.txt"), "findme\n").unwrap();
    let out = call(&fixture, "search_files", json!({"pattern": "findme"})).await;
    assert!(out.content.contains("text.txt:1: findme"), "{}", out.content);
}

#[tokio::test]
async fn read_only_refuses_file_tool_writes_and_off_allows_them() {
    let fixture = fixture(SandboxSetting::ReadOnly);
    let out = call(&fixture, "write_file", json!({"path": "x.txt", "content": "x"})).await;
    assert!(out.is_error && out.content.contains("read-only"), "{}", out.content);
    let fixture = fixture_off();
    let out = call(&fixture, "write_file", json!({"path": fixture.outside.join("x.txt"), "content": "x"})).await;
    assert!(!out.is_error, "{}", out.content);
}

fn fixture_off() -> Fixture {
    fixture(SandboxSetting::Off)
}

#[test]
fn real_paths_fold_dot_dot_after_what_exists() {
    let root = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(root.path()).unwrap();
    std::fs::create_dir(base.join("ws")).unwrap();
    assert_eq!(super::files::real_path(&base.join("ws/missing/../../x")), base.join("x"));
    assert_eq!(super::files::real_path(Path::new("/")), PathBuf::from("/"));
}

#[tokio::test]
async fn asking_to_leave_the_sandbox_is_never_granted_by_the_model_itself() {
    let fixture = fixture(SandboxSetting::WorkspaceWrite);
    let marker = fixture.outside.join("escaped");
    let touch = format!("touch {}", marker.display());
    // Where nobody can be asked, the request is refused before anything runs, even for a
    // command the classifier finds harmless.
    let out = call(&fixture, "terminal", json!({"command": touch, "leave_sandbox": "need to write there"})).await;
    assert!(out.is_error && out.content.contains("run outside the sandbox (need to write there)"), "{}", out.content);
    assert!(!marker.exists(), "the refused command ran");
    // Anything but a string is refused as malformed, not read as "no".
    let out = call(&fixture, "terminal", json!({"command": touch, "leave_sandbox": true})).await;
    assert!(out.is_error && out.content.contains("`leave_sandbox` must be a string"), "{}", out.content);
    assert!(!marker.exists());
}
