//! `hermes doctor`: check, one line each, that the configuration is valid, HERMES_HOME is
//! writable, the state database opens, the command sandbox can be enforced (Landlock and its
//! ABI), the model provider answers, and every enabled platform's endpoint is usable. Exit 0 when everything passed, 1 otherwise, 78 for an invalid config.

use super::{Cli, config_failure, resolve};
use crate::config::{Config, Home, SandboxSetting};
use crate::gateway::adapters;
use crate::store::SqliteStore;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::process::ExitCode;
use std::time::Duration;

const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

struct Report {
    failures: usize,
}

impl Report {
    fn ok(&self, what: &str) {
        println!("✓ {what}");
    }
    fn fail(&mut self, what: &str, fix: &str) {
        self.failures += 1;
        println!("✗ {what}\n    → {fix}");
    }
}

pub(super) fn run(cli: &Cli) -> ExitCode {
    let resolved = match resolve(cli) {
        Ok(r) => r,
        Err(e) => return config_failure(&e),
    };
    let mut report = Report { failures: 0 };
    report.ok(&format!("configuration valid ({})", resolved.home.config_file().display()));
    for warning in &resolved.loaded.warnings {
        println!("! {warning}");
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("hermes: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        check_home(&mut report, &resolved.home).await;
        check_sandbox(&mut report, &resolved.loaded.config);
        check_provider(&mut report, &resolved.loaded.config).await;
        check_platforms(&mut report, &resolved.loaded.config, &resolved.home).await;
    });
    if report.failures == 0 {
        println!("\nall checks passed");
        ExitCode::SUCCESS
    } else {
        println!("\n{} check(s) failed", report.failures);
        ExitCode::FAILURE
    }
}

async fn check_home(report: &mut Report, home: &Home) {
    let root = home.root().display().to_string();
    if let Err(e) = home.ensure_dirs() {
        report
            .fail(&format!("HERMES_HOME {root} cannot be created: {e}"), "create it or point HERMES_HOME / --home at a writable directory");
        return;
    }
    let probe = home.root().join(".doctor-write-test");
    match std::fs::write(&probe, b"ok").and_then(|_| std::fs::remove_file(&probe)) {
        Ok(()) => report.ok(&format!("HERMES_HOME {root} is writable")),
        Err(e) => {
            report.fail(&format!("HERMES_HOME {root} is not writable: {e}"), "fix its permissions (the gateway's user must own it)");
            return;
        }
    }
    match SqliteStore::open(&home.state_db()).await {
        Ok(_) => report.ok(&format!("state database {} opens", home.state_db().display())),
        Err(e) => report.fail(&format!("state database: {e}"), "move the file aside to start fresh, or restore a backup"),
    }
}

/// Landlock's availability, which the `terminal` sandbox needs unless it is off.
fn check_sandbox(report: &mut Report, config: &Config) {
    let landlock = hermes_guard::sandbox::availability();
    match (config.terminal.sandbox, landlock.is_supported()) {
        (_, true) => report.ok(&format!("command sandbox: {landlock}; terminal.sandbox is {}", sandbox_name(config))),
        (SandboxSetting::Off, false) => println!("! command sandbox: {landlock}; terminal.sandbox is off anyway"),
        (_, false) => report.fail(
            &format!("command sandbox: {landlock}. Commands would run unconfined and flagged commands only with a person's approval"),
            "run on Linux 5.13+ with Landlock enabled (boot with lsm=...,landlock)",
        ),
    }
}

fn sandbox_name(config: &Config) -> &'static str {
    match config.terminal.sandbox {
        SandboxSetting::WorkspaceWrite => "workspace-write",
        SandboxSetting::ReadOnly => "read-only",
        SandboxSetting::Off => "off",
    }
}

async fn check_provider(report: &mut Report, config: &Config) {
    let base = config.model.base_url.trim_end_matches('/');
    let url = format!("{base}/models");
    let client = match reqwest::Client::builder().timeout(PROBE_TIMEOUT).build() {
        Ok(c) => c,
        Err(e) => {
            report.fail(&format!("cannot build an HTTP client: {e}"), "check the system's TLS configuration");
            return;
        }
    };
    let mut request = client.get(&url);
    if let Some(key) = &config.model.api_key {
        request = request.bearer_auth(key.expose());
    }
    match request.send().await {
        Ok(r) if r.status().is_success() => report.ok(&format!("model provider {base} answers (model {})", config.model.default)),
        Ok(r) if r.status() == reqwest::StatusCode::UNAUTHORIZED || r.status() == reqwest::StatusCode::FORBIDDEN => report.fail(
            &format!("model provider {base} rejected the API key ({})", r.status()),
            "set model.api_key or OPENAI_API_KEY / LLM_API_KEY to a valid key",
        ),
        // Some OpenAI-compatible servers do not list models; reaching them is what matters.
        Ok(r) => report.ok(&format!("model provider {base} is reachable ({} on /models)", r.status())),
        Err(e) => report.fail(
            &format!("model provider {base} is unreachable: {}", without_url(&e)),
            "check model.base_url (or OPENAI_BASE_URL / LLM_BASE_URL) and the network",
        ),
    }
}

async fn check_platforms(report: &mut Report, config: &Config, home: &Home) {
    if let Err(e) = adapters::build_enabled(config, home) {
        report.fail(&format!("platform settings: {e}"), "fix the setting named above");
        return;
    }
    let mut any = false;
    for (name, platform) in &config.platforms.others {
        if !platform.is_enabled() {
            continue;
        }
        if !crate::gateway::adapters::is_supported(name) {
            report.fail(
                &format!("platform {name} is enabled but not supported by this build"),
                &format!("remove platforms.{name} or upgrade hermes"),
            );
            continue;
        }
        any = true;
        if let Some((host, port)) = platform.settings.as_ref().and_then(|s| s.listener()) {
            check_listener(report, name, &host, port, "/health").await;
        }
    }
    if !any {
        println!("! no platform is enabled: set API_SERVER_ENABLED=true or enable one in config.yaml");
    }
}

/// A listener is usable when the running gateway answers on it, or when its address is free to
/// bind for the next start.
async fn check_listener(report: &mut Report, name: &str, host: &str, port: u16, health_path: &str) {
    let addr: Option<SocketAddr> = (host, port).to_socket_addrs().ok().and_then(|mut a| a.next());
    let Some(addr) = addr else {
        report.fail(
            &format!("{name}: host {host:?} does not resolve"),
            &format!("set platforms.{name}.host to an IP address such as 127.0.0.1"),
        );
        return;
    };
    match TcpListener::bind(addr) {
        Ok(_) => {
            report.ok(&format!("{name}: {addr} is free to listen on"));
            return;
        }
        Err(e) if e.kind() != std::io::ErrorKind::AddrInUse => {
            report.fail(&format!("{name}: cannot listen on {addr}: {e}"), &format!("choose another platforms.{name}.host/port"));
            return;
        }
        Err(_) => {}
    }
    let url = format!("http://{addr}{health_path}");
    let answered = match reqwest::Client::builder().timeout(PROBE_TIMEOUT).build() {
        Ok(client) => client.get(&url).send().await.map(|r| r.status().is_success()).unwrap_or(false),
        Err(_) => false,
    };
    if answered {
        report.ok(&format!("{name}: the running gateway answers on {addr}"));
    } else {
        report.fail(&format!("{name}: {addr} is taken by another program"), &format!("stop that program or change platforms.{name}.port"));
    }
}

/// reqwest errors include the URL; the base URL is not secret, but keep the line short.
fn without_url(e: &reqwest::Error) -> String {
    let mut e = e.to_string();
    if let Some(i) = e.find(" for url") {
        e.truncate(i);
    }
    e
}
