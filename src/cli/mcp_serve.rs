//! `hermes mcp serve`: an MCP server on stdio for clients that launch their servers as
//! processes (Claude Desktop, IDEs, the SDKs' stdio clients). It relays each JSON-RPC line to
//! the running gateway's MCP endpoint (`mcp_serve`, streamable HTTP behind its key) and writes
//! the answer back as one line; the tools, the conversations and the approvals are the
//! gateway's. It starts nothing of its own: no MCP children, no adapters, no second store.
//!
//! Requests are relayed concurrently, since a client may wait on `events_wait` while it calls
//! other tools. When the gateway is down or refuses, the request gets a JSON-RPC error saying so
//! and the relay keeps running, so a gateway restart does not break the client. stdout carries
//! the protocol only; everything else goes to stderr.
//!
//! Exit 0 when stdin ends; 78 when `mcp_serve` has no key (nothing to relay to).

use super::EXIT_CONFIG;
use crate::config::{Home, McpServeConfig, McpServeListen};
use serde_json::{Value, json};
use std::net::{IpAddr, Ipv4Addr};
use std::process::ExitCode;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// Longer than the longest call the gateway answers slowly (`events_wait`, at most 60 s).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(90);
/// The longest line read from the client.
const MAX_LINE_BYTES: usize = 1 << 20;

pub(super) fn run(home: &Home, config: &McpServeConfig) -> ExitCode {
    let Some(listen) = config.listen() else {
        eprintln!("hermes: `mcp_serve.key`: the gateway serves MCP only with a key, and none is set");
        eprintln!(
            "hermes: set MCP_SERVE_KEY in {} (openssl rand -hex 32), restart the gateway, then run `hermes mcp serve` again.",
            home.env_file().display()
        );
        return ExitCode::from(EXIT_CONFIG);
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("hermes: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(relay(&listen)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hermes: mcp serve: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The gateway's endpoint: where it listens, seen from this machine.
fn endpoint(listen: &McpServeListen) -> String {
    let host = if listen.host.is_unspecified() { IpAddr::V4(Ipv4Addr::LOCALHOST) } else { listen.host };
    match host {
        IpAddr::V6(v6) => format!("http://[{v6}]:{}/mcp", listen.port),
        IpAddr::V4(v4) => format!("http://{v4}:{}/mcp", listen.port),
    }
}

/// Relay stdin's lines until it ends, then let the answers still on their way be written.
async fn relay(listen: &McpServeListen) -> std::io::Result<()> {
    let http = reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .no_proxy()
        .build()
        .map_err(|e| std::io::Error::other(format!("cannot build the HTTP client: {e}")))?;
    let gateway = Gateway { http, url: endpoint(listen), key: listen.key.expose().to_string() };
    let (answers, mut to_write) = mpsc::unbounded_channel::<String>();
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = to_write.recv().await {
            if stdout.write_all(line.as_bytes()).await.is_err() || stdout.write_all(b"\n").await.is_err() {
                return;
            }
            let _ = stdout.flush().await;
        }
    });
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut in_flight = tokio::task::JoinSet::new();
    while let Some(line) = lines.next_line().await? {
        let line = line.trim().to_string();
        if line.is_empty() {
            continue;
        }
        let (gateway, answers) = (gateway.clone(), answers.clone());
        in_flight.spawn(async move {
            if let Some(answer) = gateway.forward(line).await {
                let _ = answers.send(answer);
            }
        });
        // Reap what finished, so a long session does not keep every task's result.
        while in_flight.try_join_next().is_some() {}
    }
    while in_flight.join_next().await.is_some() {}
    drop(answers);
    let _ = writer.await;
    Ok(())
}

#[derive(Clone)]
struct Gateway {
    http: reqwest::Client,
    url: String,
    key: String,
}

impl Gateway {
    /// The line to write back for `line`, if any (a notification gets none).
    async fn forward(&self, line: String) -> Option<String> {
        if line.len() > MAX_LINE_BYTES {
            return Some(error_line(&Value::Null, -32600, &format!("a message is limited to {MAX_LINE_BYTES} bytes")));
        }
        let id = request_id(&line);
        let sent = self
            .http
            .post(&self.url)
            .bearer_auth(&self.key)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, "application/json, text/event-stream")
            .body(line)
            .send()
            .await;
        let response = match sent {
            Ok(response) => response,
            Err(e) => {
                let why = if e.is_connect() {
                    format!("the hermes gateway is not answering at {} (is it running, with mcp_serve set?)", self.url)
                } else if e.is_timeout() {
                    "the hermes gateway did not answer in time".to_string()
                } else {
                    format!("cannot reach the hermes gateway: {e}")
                };
                eprintln!("hermes: mcp serve: {why}");
                return id.map(|id| error_line(&id, -32603, &why));
            }
        };
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        if status == reqwest::StatusCode::ACCEPTED {
            return None;
        }
        // The gateway answers JSON-RPC errors itself (400 included); anything else is a refusal.
        if serde_json::from_str::<Value>(&body).is_ok_and(|v| v.get("jsonrpc").is_some()) {
            return Some(body.trim().to_string());
        }
        let why = format!("the hermes gateway refused the request ({status}): {}", refusal_text(&body));
        eprintln!("hermes: mcp serve: {why}");
        id.map(|id| error_line(&id, -32603, &why))
    }
}

/// The id of a request (a notification or a response has none to answer).
fn request_id(line: &str) -> Option<Value> {
    let message: Value = serde_json::from_str(line).ok()?;
    message.get("method")?;
    message.get("id").cloned()
}

fn refusal_text(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    parsed.and_then(|v| v["error"]["message"].as_str().map(str::to_string)).unwrap_or_else(|| body.chars().take(200).collect())
}

fn error_line(id: &Value, code: i64, message: &str) -> String {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } }).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_requests_are_answered_and_an_unspecified_host_is_reached_on_loopback() {
        assert_eq!(request_id(r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#), Some(json!(3)));
        assert_eq!(request_id(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#), None);
        assert_eq!(request_id(r#"{"jsonrpc":"2.0","id":3,"result":{}}"#), None);
        assert_eq!(request_id("not json"), None);
        let listen = |host: &str| McpServeListen { host: host.parse().unwrap(), port: 8645, key: crate::config::Secret::new("k") };
        assert_eq!(endpoint(&listen("0.0.0.0")), "http://127.0.0.1:8645/mcp");
        assert_eq!(endpoint(&listen("::1")), "http://[::1]:8645/mcp");
    }

    #[tokio::test]
    async fn with_the_gateway_down_a_request_gets_an_error_naming_it_and_a_notification_nothing() {
        // A port nobody listens on: bind one, then free it.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let gateway = Gateway { http: reqwest::Client::new(), url: format!("http://127.0.0.1:{port}/mcp"), key: "k".into() };
        let answer = gateway.forward(r#"{"jsonrpc":"2.0","id":"a1","method":"tools/list"}"#.into()).await.expect("an answer");
        let answer: Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(answer["id"], "a1");
        assert!(answer["error"]["message"].as_str().unwrap().contains("not answering"), "{answer}");
        assert!(gateway.forward(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.into()).await.is_none());
    }
}
