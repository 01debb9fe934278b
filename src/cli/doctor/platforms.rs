//! Every enabled platform, built the way the gateway builds it ([`adapters::build_enabled`]) and
//! asked who it is there ([`hermes_adapter::PlatformAdapter::probe`]: Telegram's getMe, Discord's current user,
//! Slack's auth.test, Matrix's whoami, an IMAP login and an SMTP EHLO), under a time limit.
//! Listeners (webhook, API server) have nothing to ask: their address must be free, or already
//! answered by the running gateway.

use super::report::Report;
use crate::config::{Config, Home};
use crate::gateway::ops::adapters;
use hermes_adapter::AdapterError;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::time::Duration;

/// Long enough for a slow IMAP server's greeting, login and an SMTP EHLO in a row.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);
const LISTENER_TIMEOUT: Duration = Duration::from_secs(5);

pub(super) async fn check(report: &mut Report, config: &Config, home: &Home) {
    let mut any = false;
    for name in config.platforms.others.iter().filter(|(_, b)| b.is_enabled()).map(|(name, _)| name) {
        if !adapters::is_supported(name) {
            report.fail(
                &format!("platform {name} is enabled but this build has no {name} adapter"),
                &format!("remove platforms.{name} (and its variables) or use a build with it"),
            );
        }
        any = true;
    }
    if !any {
        report.warn("no platform is enabled: set TELEGRAM_BOT_TOKEN (or another platform's variables) in .env");
        return;
    }
    let built = match adapters::build_enabled(config, home, &crate::gateway::commands::menu()) {
        Ok(built) => built,
        Err(e) => {
            report.fail(&format!("platform settings: {e}"), "fix the setting named above in config.yaml or .env");
            return;
        }
    };
    for adapter in built {
        let name = adapter.platform().as_str().to_string();
        match tokio::time::timeout(PROBE_TIMEOUT, adapter.probe()).await {
            Ok(Ok(Some(identity))) => report.ok(&format!("{name}: connected as {identity}")),
            Ok(Ok(None)) => listener(report, config, &name).await,
            Ok(Err(e)) => refused(report, &name, &e),
            Err(_) => report.fail(
                &format!("{name}: no answer within {PROBE_TIMEOUT:?}"),
                &format!("check the network and platforms.{name}'s server address"),
            ),
        }
    }
}

fn refused(report: &mut Report, name: &str, error: &AdapterError) {
    match error {
        AdapterError::Fatal { message, .. } => {
            // Adapters word a refusal as "what happened; what to do".
            let (what, fix) = message.rsplit_once("; ").unwrap_or((message, "fix the setting named above, then run `hermes doctor` again"));
            report.fail(&format!("{name}: {what}"), fix);
        }
        AdapterError::Retryable { message, .. } => report.fail(
            &format!("{name}: unreachable: {message}"),
            &format!("check the network and platforms.{name}'s server address; the gateway keeps retrying meanwhile"),
        ),
    }
}

async fn listener(report: &mut Report, config: &Config, name: &str) {
    let address = config.platforms.get(name).and_then(|b| b.settings.as_ref()).and_then(|s| s.listener());
    match address {
        Some((host, port)) => check_listener(report, name, &host, port).await,
        None => report.ok(&format!("{name}: built (nothing to ask the platform)")),
    }
}

/// A listener is usable when its address is free to bind for the next start, or when the
/// running gateway already answers on it.
async fn check_listener(report: &mut Report, name: &str, host: &str, port: u16) {
    let Some(addr) = (host, port).to_socket_addrs().ok().and_then(|mut a| a.next()) else {
        report.fail(
            &format!("{name}: host {host:?} does not resolve"),
            &format!("set platforms.{name}.host to an IP address such as 127.0.0.1"),
        );
        return;
    };
    match TcpListener::bind(addr) {
        Ok(_) => return report.ok(&format!("{name}: {addr} is free to listen on")),
        Err(e) if e.kind() != std::io::ErrorKind::AddrInUse => {
            return report.fail(&format!("{name}: cannot listen on {addr}: {e}"), &format!("choose another platforms.{name}.host/port"));
        }
        Err(_) => {}
    }
    if answers_health(addr).await {
        report.ok(&format!("{name}: the running gateway answers on {addr}"));
    } else {
        report.fail(&format!("{name}: {addr} is taken by another program"), &format!("stop that program or change platforms.{name}.port"));
    }
}

async fn answers_health(addr: SocketAddr) -> bool {
    let Ok(client) = reqwest::Client::builder().timeout(LISTENER_TIMEOUT).build() else { return false };
    client.get(format!("http://{addr}/health")).send().await.is_ok_and(|r| r.status().is_success())
}
