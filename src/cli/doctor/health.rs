//! `hermes doctor --health`: the one question a container's `HEALTHCHECK` (or any supervisor)
//! asks, answered by the binary itself so the runtime image needs no curl: does the running
//! gateway's admin listener answer `/health` (`gateway.admin_port`)? Without an admin listener,
//! whether the process named in the status file is alive. Exit 0 healthy, 1 not.

use crate::config::{Config, Home};
use crate::gateway::ops::status_file::StatusFile;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::process::ExitCode;
use std::time::Duration;

/// Why the gateway is not healthy, after "unhealthy: ".
#[derive(Debug, thiserror::Error)]
enum Unhealthy {
    #[error("no async runtime: {0}")]
    NoRuntime(std::io::Error),
    #[error("no HTTP client: {0}")]
    NoHttpClient(reqwest::Error),
    #[error("{url} answered {status}")]
    BadStatus { url: String, status: reqwest::StatusCode },
    /// The request itself failed (refused, timed out); the error without its URL, which comes first.
    #[error("{url}: {source}")]
    NoAnswer { url: String, source: reqwest::Error },
    #[error("no gateway status at {} ({source})", path.display())]
    NoStatus { path: std::path::PathBuf, source: std::io::Error },
    #[error("gateway pid {pid} is not running")]
    NotRunning { pid: u32 },
}

/// Docker's default HEALTHCHECK timeout is 30 s; answer well within it.
const TIMEOUT: Duration = Duration::from_secs(5);

pub(super) fn run(config: &Config, home: &Home) -> ExitCode {
    let verdict = match config.gateway.admin_port {
        Some(port) => probe(admin_address(&config.gateway.admin_host, port)),
        None => process_alive(home),
    };
    match verdict {
        Ok(line) => {
            println!("healthy: {line}");
            ExitCode::SUCCESS
        }
        Err(line) => {
            println!("unhealthy: {line}");
            ExitCode::FAILURE
        }
    }
}

/// Where to reach the admin listener from this machine: a wildcard bind is reached on loopback.
pub(crate) fn admin_address(host: &str, port: u16) -> SocketAddr {
    let ip = match host.parse::<IpAddr>() {
        Ok(ip) if ip.is_unspecified() && ip.is_ipv6() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        Ok(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        Ok(ip) => ip,
        Err(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
    };
    SocketAddr::new(ip, port)
}

fn probe(addr: SocketAddr) -> Result<String, Unhealthy> {
    let url = format!("http://{addr}/health");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(Unhealthy::NoRuntime)?;
    runtime.block_on(async {
        let client = reqwest::Client::builder().timeout(TIMEOUT).build().map_err(Unhealthy::NoHttpClient)?;
        match client.get(&url).send().await {
            Ok(r) if r.status().is_success() => Ok(format!("{url} answered {}", r.status())),
            Ok(r) => Err(Unhealthy::BadStatus { url, status: r.status() }),
            Err(e) => Err(Unhealthy::NoAnswer { url, source: e.without_url() }),
        }
    })
}

fn process_alive(home: &Home) -> Result<String, Unhealthy> {
    let path = home.status_file();
    let status = StatusFile::read(&path).map_err(|source| Unhealthy::NoStatus { path: path.clone(), source })?;
    if crate::cli::process_alive(status.pid) {
        Ok(format!("gateway pid {} is running (set gateway.admin_port for a /health check)", status.pid))
    } else {
        Err(Unhealthy::NotRunning { pid: status.pid })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wildcard_admin_bind_is_probed_on_loopback() {
        assert_eq!(admin_address("0.0.0.0", 9090), "127.0.0.1:9090".parse().unwrap());
        assert_eq!(admin_address("::", 9090), "[::1]:9090".parse().unwrap());
        assert_eq!(admin_address("10.0.0.5", 9090), "10.0.0.5:9090".parse().unwrap());
    }

    #[test]
    fn a_closed_admin_port_is_unhealthy() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let refused = probe(addr).unwrap_err().to_string();
        assert!(refused.starts_with(&format!("http://{addr}/health: ")), "{refused}");
        assert!(!refused[format!("http://{addr}/health: ").len()..].contains("http://"), "the URL is named once: {refused}");
    }

    #[test]
    fn a_missing_status_file_or_a_dead_pid_is_unhealthy() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        let missing = process_alive(&home).unwrap_err().to_string();
        assert!(missing.starts_with(&format!("no gateway status at {} (", home.status_file().display())), "{missing}");
        assert_eq!(Unhealthy::NotRunning { pid: 42 }.to_string(), "gateway pid 42 is not running");
    }
}
