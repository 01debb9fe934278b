//! Running the real `hermes` binary for a test: a temporary HERMES_HOME, free loopback ports, the
//! environment a user would set, and helpers to wait for it, signal it and read its log.

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub(crate) const API_KEY: &str = "e2e-api-key-0123456789";
pub(crate) const WEBHOOK_SECRET: &str = "e2e-webhook-secret-0123";
pub(crate) const LLM_KEY: &str = "sk-e2e-provider-key-0123456789";

/// A port nobody listens on right now, and never handed to another test of this process.
///
/// The kernel may give a port whose probe listener was dropped to the next `bind(0)`: two
/// concurrent tests would then start gateways on one address, the second one's listener would
/// fail to bind, and its deliveries would reach the first test's gateway (both use the same
/// route secrets), failing both tests in a way that looks like lost or doubled events.
pub(crate) fn free_port() -> u16 {
    static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    loop {
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("no free port");
        if HANDED_OUT.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).insert(port) {
            return port;
        }
    }
}

/// A HERMES_HOME with its config, and the environment the gateway runs with.
pub(crate) struct Setup {
    pub home: tempfile::TempDir,
    pub api_port: u16,
    pub webhook_port: u16,
    pub env: Vec<(String, String)>,
}

impl Setup {
    /// Both adapters on free ports, the provider pointed at `llm_base_url`.
    pub(crate) fn new(llm_base_url: &str) -> Setup {
        let home = tempfile::tempdir().expect("temp dir");
        // Owner-only, as the gateway makes HERMES_HOME at its first start (doctor checks it).
        std::fs::set_permissions(home.path(), std::os::unix::fs::PermissionsExt::from_mode(0o700)).expect("chmod 700 HERMES_HOME");
        let (api_port, webhook_port) = (free_port(), free_port());
        let env = [
            ("OPENAI_BASE_URL", llm_base_url.to_string()),
            ("OPENAI_API_KEY", LLM_KEY.to_string()),
            ("API_SERVER_ENABLED", "true".to_string()),
            ("API_SERVER_KEY", API_KEY.to_string()),
            ("API_SERVER_PORT", api_port.to_string()),
            ("WEBHOOK_ENABLED", "true".to_string()),
            ("WEBHOOK_PORT", webhook_port.to_string()),
            ("WEBHOOK_SECRET", WEBHOOK_SECRET.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        Setup { home, api_port, webhook_port, env }
    }

    pub(crate) fn set(&mut self, key: &str, value: &str) -> &mut Self {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.to_string(), value.to_string()));
        self
    }

    pub(crate) fn write_config(&self, yaml: &str) {
        std::fs::write(self.home.path().join("config.yaml"), yaml).expect("write config.yaml");
    }

    pub(crate) fn api(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.api_port)
    }

    pub(crate) fn webhook(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.webhook_port)
    }

    pub(crate) fn state_db(&self) -> PathBuf {
        self.home.path().join("state.db")
    }

    /// `hermes <args>` with this home and environment, and nothing from the caller's.
    pub(crate) fn command(&self, args: &[&str]) -> Command {
        // HERMES_TEST_BINARY runs another build (a release binary, to measure it) under the same tests.
        let binary = std::env::var("HERMES_TEST_BINARY").unwrap_or_else(|_| env!("CARGO_BIN_EXE_hermes").to_string());
        let mut cmd = Command::new(binary);
        cmd.args(args).env_clear().env("HERMES_HOME", self.home.path()).env("HOME", self.home.path()).env("RUST_LOG", "info,hermes=debug");
        if let Ok(path) = std::env::var("PATH") {
            cmd.env("PATH", path);
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Run a command to completion: (exit status, stdout, stderr).
    pub(crate) fn run(&self, args: &[&str]) -> (ExitStatus, String, String) {
        let out = self.command(args).output().expect("run hermes");
        (out.status, String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
    }

    /// Start `hermes gateway run` and wait until the API server answers `/health`.
    pub(crate) async fn start(&self) -> Gateway {
        let mut gateway = self.spawn();
        gateway.wait_healthy(&self.api(""), Duration::from_secs(20)).await;
        gateway
    }

    /// Start `hermes gateway run` without waiting for it.
    pub(crate) fn spawn(&self) -> Gateway {
        static STARTS: AtomicUsize = AtomicUsize::new(0);
        let log = self.home.path().join(format!("gateway-{}.log", STARTS.fetch_add(1, Ordering::Relaxed)));
        let file = std::fs::File::create(&log).expect("log file");
        let child = self.command(&["gateway", "run"]).stdout(Stdio::null()).stderr(file).spawn().expect("spawn hermes gateway run");
        Gateway { child: Some(child), log }
    }
}

/// A running gateway process; killed when dropped.
pub(crate) struct Gateway {
    child: Option<Child>,
    pub log: PathBuf,
}

impl Gateway {
    /// The process's resident memory now, in kB (`VmRSS`), if it still runs.
    #[allow(dead_code)] // read by the conformance crate only
    pub(crate) fn vm_rss_kb(&self) -> Option<u64> {
        let pid = self.child.as_ref()?.id();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    }

    pub(crate) fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The process id, while it runs.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// Wait until the API server at `base` answers `/health`; panics with the log when the
    /// gateway exits or `timeout` passes first.
    pub(crate) async fn wait_healthy(&mut self, base: &str, timeout: Duration) {
        let client = reqwest::Client::new();
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(r) = client.get(format!("{base}/health")).send().await
                && r.status().is_success()
            {
                return;
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                panic!("the gateway exited early with {status}:\n{}", self.log_text());
            }
            if Instant::now() > deadline {
                panic!("the gateway did not answer /health within {timeout:?}:\n{}", self.log_text());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Send a signal and wait for the exit status.
    pub(crate) async fn signal(&mut self, signal: i32) -> ExitStatus {
        if let Some(child) = &self.child {
            // SAFETY: kill(2) on our own child's pid.
            unsafe {
                libc::kill(child.id() as libc::pid_t, signal);
            }
        }
        self.wait_exit().await
    }

    /// Wait for the process to exit by itself (e.g. replaced by another gateway).
    pub(crate) async fn wait_exit(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("gateway already stopped");
        let signal = "an exit";
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "the gateway did not exit after {signal}:\n{}", self.log_text());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
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

/// The path a peer variable of `tests/peers/run.sh` names (the MCP servers' installs); a test
/// without it fails, naming how to run it.
pub(crate) fn peer(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| panic!("{var} is not set: run the MCP tests under tests/peers/run.sh"))
}

/// Poll `check` until it returns true or `timeout` passes.
pub(crate) async fn eventually(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    check()
}

/// Open the gateway's database read-only, as an operator's `sqlite3` would.
pub(crate) fn open_db(path: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).expect("open state.db")
}

pub(crate) fn count(db: &rusqlite::Connection, sql: &str, params: impl rusqlite::Params) -> i64 {
    db.query_row(sql, params, |r| r.get(0)).expect("count query")
}

/// `text` with the untrusted-data fence taken off: the notice line and every open and close tag
/// (the boundary is random per turn, so tests compare what the fence holds, not the boundary).
pub(crate) fn unfenced(text: &str) -> String {
    let body = match text.find("(Text between <untrusted-data ") {
        Some(notice) => {
            let after = text[notice..].split_once('\n').map_or("", |(_, body)| body);
            format!("{}{after}", &text[..notice])
        }
        None => text.to_owned(),
    };
    let body = body.as_str();
    let mut out = String::with_capacity(body.len());
    let mut rest = body;
    while let Some(start) = rest.find("<untrusted-data ").into_iter().chain(rest.find("</untrusted-data ")).min() {
        out.push_str(&rest[..start]);
        rest = rest[start..].split_once('>').map_or("", |(_, after)| after);
    }
    out.push_str(rest);
    out
}

/// Whether `value` sits alone inside one fenced block of `text`.
pub(crate) fn is_fenced(text: &str, value: &str) -> bool {
    text.contains(&format!(">{value}</untrusted-data "))
}

/// Marks the calling test as not run, with why: printed (visible with `--nocapture`) and, when
/// `HERMES_TEST_SKIPPED` names a file, appended to it so `.ci/run` lists every test that did not
/// run instead of counting it as passed.
#[allow(dead_code)] // used by the e2e crate only
pub(crate) fn not_run(test: &str, why: &str) {
    println!("NOT RUN: {test}: {why}");
    if let Some(path) = std::env::var_os("HERMES_TEST_SKIPPED") {
        use std::io::Write;
        let line = format!("{test}: {why}\n");
        let written = std::fs::OpenOptions::new().create(true).append(true).open(&path).and_then(|mut f| f.write_all(line.as_bytes()));
        assert!(written.is_ok(), "cannot record the skipped test in {}: {written:?}", std::path::Path::new(&path).display());
    }
}

/// Wait until the admin listener reports MCP server `server` connected.
pub(crate) async fn wait_mcp_connected(admin_port: u16, server: &str, gateway: &Gateway) {
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let health: serde_json::Value = match client.get(format!("http://127.0.0.1:{admin_port}/health")).send().await {
            Ok(r) => r.json().await.unwrap_or_default(),
            Err(_) => serde_json::Value::Null,
        };
        let servers = health["mcp"].as_array().cloned().unwrap_or_default();
        if servers.iter().any(|s| s["name"] == server && s["state"] == "connected") {
            return;
        }
        assert!(Instant::now() < deadline, "MCP server {server} did not connect: {health}\n{}", gateway.log_text());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `promtool check metrics` on `text`: (accepted, what it said).
pub(crate) fn promtool_check(text: &str) -> (bool, String) {
    let spawned =
        Command::new("promtool").args(["check", "metrics"]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
    let mut child = spawned
        .unwrap_or_else(|e| panic!("promtool is not installed ({e}); install Debian's `prometheus` package (tests/peers/install.sh does)"));
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// A URL for a fresh, empty schema of its own on the test PostgreSQL (`HERMES_TEST_POSTGRES_URL`,
/// which `tests/peers/run.sh` exports), created here: tests share the server, never rows.
#[cfg(feature = "postgres")]
pub(crate) async fn scratch_database() -> String {
    let server = std::env::var("HERMES_TEST_POSTGRES_URL")
        .expect("HERMES_TEST_POSTGRES_URL is not set: run the tests under tests/peers/run.sh (it starts PostgreSQL)");
    let schema = format!("test_{}", uuid::Uuid::new_v4().simple());
    let (client, connection) = tokio_postgres::connect(&server, tokio_postgres::NoTls).await.expect("the test PostgreSQL answers");
    let driver = tokio::spawn(connection);
    client.batch_execute(&format!("CREATE SCHEMA {schema}")).await.expect("a scratch schema");
    drop(client);
    let _ = driver.await;
    format!("{server}?options=-c%20search_path%3D{schema}&sslmode=disable")
}
