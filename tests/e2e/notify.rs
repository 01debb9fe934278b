//! `gateway run` under systemd's notify protocol, with the test as systemd: it owns the
//! `NOTIFY_SOCKET` and sets `WATCHDOG_USEC`, and sees `READY=1`, watchdog pings about every
//! second and never before ready, a `STATUS=` health line, and `STOPPING=1` after SIGTERM. And
//! `/restart` from chat ends `gateway run` with 75, the status the unit restarts on.

use crate::support::{API_KEY, Setup};
use hermes_fakes::FakeLlm;
use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant};

/// The test's end of the notify socket: every datagram with when it arrived.
struct Systemd {
    socket: UnixDatagram,
    received: Vec<(Instant, String)>,
}

impl Systemd {
    fn bind(path: &std::path::Path) -> Systemd {
        let socket = UnixDatagram::bind(path).unwrap();
        socket.set_nonblocking(true).unwrap();
        Systemd { socket, received: Vec::new() }
    }

    fn collect(&mut self) {
        let mut buf = [0u8; 4096];
        while let Ok(n) = self.socket.recv(&mut buf) {
            self.received.push((Instant::now(), String::from_utf8_lossy(&buf[..n]).into_owned()));
        }
    }

    /// Collect until a datagram contains `line`, or `timeout`.
    async fn wait_for(&mut self, line: &str, timeout: Duration) -> Option<Instant> {
        let deadline = Instant::now() + timeout;
        loop {
            self.collect();
            if let Some((at, _)) = self.received.iter().find(|(_, m)| m.lines().any(|l| l == line)) {
                return Some(*at);
            }
            if Instant::now() > deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn position(&self, line: &str) -> Option<usize> {
        self.received.iter().position(|(_, m)| m.lines().any(|l| l == line))
    }

    fn pings_between(&self, from: Instant, to: Instant) -> usize {
        self.received.iter().filter(|(at, m)| *at >= from && *at <= to && m.lines().any(|l| l == "WATCHDOG=1")).count()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn gateway_run_tells_systemd_ready_pings_the_watchdog_and_says_stopping() {
    let llm = FakeLlm::start().await;
    let mut setup = Setup::new(&llm.base_url());
    let sockets = tempfile::tempdir().unwrap();
    let path = sockets.path().join("notify.sock");
    let mut systemd = Systemd::bind(&path);
    setup.set("NOTIFY_SOCKET", path.to_str().unwrap()).set("WATCHDOG_USEC", "2000000");
    let mut gateway = setup.start().await;

    let ready = systemd.wait_for("READY=1", Duration::from_secs(30)).await;
    assert!(ready.is_some(), "no READY=1: {:?}\n{}", systemd.received, gateway.log_text());
    let window_start = Instant::now();
    tokio::time::sleep(Duration::from_secs(5)).await;
    systemd.collect();
    let pings = systemd.pings_between(window_start, Instant::now());
    // WATCHDOG_USEC=2 s: a ping every second, so about 5 in 5 s; generous bounds for a loaded box.
    assert!((3..=12).contains(&pings), "{pings} pings in 5 s: {:?}", systemd.received);
    let first_ping = systemd.position("WATCHDOG=1").expect("a ping");
    assert!(systemd.position("READY=1").expect("ready") <= first_ping, "a ping came before READY=1: {:?}", systemd.received);
    let status = systemd.received.iter().flat_map(|(_, m)| m.lines()).find(|l| l.starts_with("STATUS=")).map(str::to_string);
    let status = status.expect("a STATUS= line");
    assert!(status.contains("api_server connected") && status.contains("webhook connected"), "{status}");

    let before_stop = systemd.received.len();
    let exit = gateway.signal(libc::SIGTERM).await;
    assert_eq!(exit.code(), Some(0), "{}", gateway.log_text());
    systemd.collect();
    let stopping = systemd.position("STOPPING=1").expect("STOPPING=1 after SIGTERM");
    assert!(stopping >= before_stop, "STOPPING=1 came before the signal: {:?}", systemd.received);
}

#[tokio::test(flavor = "multi_thread")]
async fn restart_from_chat_exits_75_for_the_service_manager() {
    let llm = FakeLlm::start().await;
    let setup = Setup::new(&llm.base_url());
    let mut gateway = setup.start().await;
    let answer: serde_json::Value = reqwest::Client::new()
        .post(setup.api("/v1/chat/completions"))
        .bearer_auth(API_KEY)
        .json(&serde_json::json!({"messages": [{"role": "user", "content": "/restart"}]}))
        .send()
        .await
        .expect("request")
        .json()
        .await
        .expect("json answer");
    let reply = answer["choices"][0]["message"]["content"].as_str().unwrap_or_default();
    assert!(reply.contains("Restarting"), "{reply}");
    let exit = gateway.wait_exit().await;
    assert_eq!(exit.code(), Some(75), "{}", gateway.log_text());
    assert_eq!(llm.request_count(), 0, "the command never reached the model");
}
