//! Webhook ingress on every replica: three whole processes on one real PostgreSQL, each with the
//! webhook listener on its own port, behind a real nginx that spreads deliveries round-robin.
//! Every replica takes deliveries in; the one holding the webhook platform's lease runs every
//! turn (the others store them in the shared inbox and wake it). Each delivery is processed
//! once, however many replicas saw it.

use crate::support::{Gateway, Setup, eventually, free_port, not_run, scratch_database, unfenced};
use futures::StreamExt;
use hermes_fakes::{FakeLlm, Receiver, Reply};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) const ROUTE_SECRET: &str = "replica-route-secret-42";
const DELIVERIES: usize = 500;

/// One replica: its own home and ports, the shared database, the `deploy` route answering to
/// `receiver`, no rate limit (the test sends hundreds a minute).
fn replica(llm: &FakeLlm, receiver: &Receiver, url: &str, name: &str) -> Setup {
    let mut setup = Setup::new(&llm.base_url());
    setup.set("DATABASE_URL", url);
    setup.write_config(&format!(
        "platforms:\n  webhook:\n    rate_limit_per_minute: 0\n    routes:\n      deploy:\n        secret: {ROUTE_SECRET}\n        prompt: \"Deploy of {{service.name}} finished: {{status}}\"\n        deliver: {}\nstore:\n  lease_ttl_seconds: 3\n  replica: {name}\n",
        receiver.url("/answers")
    ));
    setup
}

/// The first replica (serving the webhook turns) and two more (taking deliveries in on their
/// webhook ports).
async fn three_replicas(llm: &FakeLlm, receiver: &Receiver, url: &str) -> Vec<(Setup, Gateway)> {
    let first = replica(llm, receiver, url, "replica-a");
    let holder = first.start().await;
    let mut replicas = vec![(first, holder)];
    for name in ["replica-b", "replica-c"] {
        let setup = replica(llm, receiver, url, name);
        let gateway = setup.spawn();
        let health = setup.webhook("/health");
        let up = eventually(Duration::from_secs(30), || std::net::TcpStream::connect(("127.0.0.1", setup.webhook_port)).is_ok()).await;
        assert!(up, "the replica {name} takes webhooks in ({health}):\n{}", gateway.log_text());
        replicas.push((setup, gateway));
    }
    replicas
}

fn sign(message: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(ROUTE_SECRET.as_bytes()).expect("any key length works");
    mac.update(message);
    hex::encode(mac.finalize().into_bytes())
}

pub(crate) fn body(i: usize) -> String {
    serde_json::json!({"service": {"name": format!("svc-{i}")}, "status": "ok"}).to_string()
}

pub(crate) fn answer(i: usize) -> String {
    format!("echo: Deploy of svc-{i} finished: ok")
}

/// POST one delivery signed with the generic V2 scheme to `base`; its status and JSON answer.
pub(crate) async fn deliver(client: &reqwest::Client, base: &str, body: &str) -> (u16, serde_json::Value) {
    let timestamp = chrono::Utc::now().timestamp().to_string();
    let response = client
        .post(format!("{base}/webhooks/deploy"))
        .header("Content-Type", "application/json")
        .header("X-Webhook-Timestamp", &timestamp)
        .header("X-Webhook-Signature-V2", sign(format!("{timestamp}.{body}").as_bytes()))
        .body(body.to_string())
        .send()
        .await
        .expect("the webhook request is answered");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or_default())
}

/// How many times each answer text reached the callback.
fn answer_counts(receiver: &Receiver) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for received in receiver.received() {
        *counts.entry(unfenced(received.body["text"].as_str().unwrap_or_default())).or_insert(0) += 1;
    }
    counts
}

/// How many times each prompt reached the model.
fn prompt_counts(llm: &FakeLlm) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for request in llm.requests() {
        *counts.entry(unfenced(&request.last_user_text().unwrap_or_default())).or_insert(0) += 1;
    }
    counts
}

/// A real nginx in front of `ports`, round-robin, trying the next upstream on a refused or
/// timed-out connection; one process (no master forking workers that a kill would orphan, still
/// holding the port), stopped by its pid when dropped.
pub(crate) struct Nginx {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Nginx {
    /// The nginx binary: `HERMES_TEST_NGINX`, else Debian's `/usr/sbin/nginx`, else on PATH.
    pub(crate) fn binary() -> Option<PathBuf> {
        if let Some(path) = std::env::var_os("HERMES_TEST_NGINX") {
            return Some(PathBuf::from(path));
        }
        let debian = Path::new("/usr/sbin/nginx");
        if debian.exists() {
            return Some(debian.to_path_buf());
        }
        std::env::var_os("PATH")?.to_str()?.split(':').map(|dir| Path::new(dir).join("nginx")).find(|p| p.exists())
    }

    pub(crate) async fn start(binary: &Path, ports: &[u16]) -> Nginx {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let d = dir.path().display();
        let upstreams: String = ports.iter().map(|p| format!("    server 127.0.0.1:{p};\n")).collect();
        let config = format!(
            "master_process off;\ndaemon off;\npid {d}/nginx.pid;\nerror_log {d}/error.log warn;\nevents {{ worker_connections 1024; }}\n\
             http {{\n  access_log off;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n\
             upstream hermes {{\n{upstreams}  }}\n\
             server {{\n    listen 127.0.0.1:{port};\n    location / {{\n      proxy_pass http://hermes;\n\
             proxy_next_upstream error timeout;\n      proxy_set_header Host $host;\n    }}\n  }}\n}}\n"
        );
        let path = dir.path().join("nginx.conf");
        std::fs::write(&path, config).expect("write nginx.conf");
        let child = Command::new(binary)
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nginx");
        let nginx = Nginx { child, port, dir };
        let up = eventually(Duration::from_secs(20), || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()).await;
        assert!(up, "nginx listens on {port}: {}", nginx.errors());
        nginx
    }

    pub(crate) fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub(crate) fn errors(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_behind_nginx_500_signed_deliveries_10_percent_twice_each_processed_once() {
    let Some(binary) = Nginx::binary() else {
        not_run("replica_ingress::three_replicas_behind_nginx", "nginx is not installed (Debian: nginx-light)");
        return;
    };
    let llm = FakeLlm::start().await;
    llm.set_default(Reply::Echo);
    let receiver = Receiver::start().await;
    let url = scratch_database().await;
    let replicas = three_replicas(&llm, &receiver, &url).await;
    let ports: Vec<u16> = replicas.iter().map(|(setup, _)| setup.webhook_port).collect();
    let nginx = Nginx::start(&binary, &ports).await;

    let client = reqwest::Client::new();
    let base = nginx.base();
    let started = Instant::now();
    let sends = futures::stream::iter(0..DELIVERIES).map(|i| {
        let (client, base) = (client.clone(), base.clone());
        async move {
            let first = deliver(&client, &base, &body(i)).await;
            // Every tenth is sent again, as a sender retrying would: through nginx, so most
            // likely to another replica than the first.
            let again = if i % 10 == 0 { Some(deliver(&client, &base, &body(i)).await) } else { None };
            (i, first, again)
        }
    });
    let results: Vec<_> = sends.buffer_unordered(16).collect().await;
    let sent_in = started.elapsed();
    let logs = || replicas.iter().map(|(_, g)| g.log_text()).collect::<Vec<_>>().join("\n----\n");
    for (i, (status, json), again) in &results {
        assert_eq!(*status, 202, "delivery {i} accepted: {json}\nnginx: {}\n{}", nginx.errors(), logs());
        if let Some((status, json)) = again {
            assert_eq!(
                (*status, json["status"].as_str()),
                (200, Some("duplicate")),
                "delivery {i} sent again: {json}\nnginx: {}\n{}",
                nginx.errors(),
                logs()
            );
        }
    }

    let expected: Vec<String> = (0..DELIVERIES).map(answer).collect();
    let all = eventually(Duration::from_secs(240), || {
        let counts = answer_counts(&receiver);
        expected.iter().all(|a| counts.contains_key(a))
    })
    .await;
    let counts = answer_counts(&receiver);
    let missing: Vec<&String> = expected.iter().filter(|a| !counts.contains_key(*a)).collect();
    assert!(all, "{} answers missing: {:?}…\n{}", missing.len(), missing.iter().take(5).collect::<Vec<_>>(), logs());
    let answered_in = started.elapsed();
    // Anything routed twice would show up by now: the model answers at once.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let doubled: Vec<(String, usize)> = answer_counts(&receiver).into_iter().filter(|(_, n)| *n > 1).collect();
    assert!(doubled.is_empty(), "answered twice: {doubled:?}");
    assert_eq!(answer_counts(&receiver).len(), DELIVERIES, "each answer delivered exactly once");
    let prompted: Vec<(String, usize)> = prompt_counts(&llm).into_iter().filter(|(_, n)| *n > 1).collect();
    assert!(prompted.is_empty(), "the model saw a delivery twice: {prompted:?}");
    assert_eq!(llm.request_count(), DELIVERIES, "the model saw each delivery once");

    // Every replica took its share in; only the webhook platform's holder ran turns.
    let accepted: Vec<usize> = replicas.iter().map(|(_, g)| g.log_text().matches("webhook delivery accepted").count()).collect();
    assert_eq!(accepted.iter().sum::<usize>(), DELIVERIES, "{accepted:?}");
    assert!(accepted.iter().all(|n| *n > 0), "nginx spread the deliveries over all three replicas: {accepted:?}");
    println!(
        "{DELIVERIES} deliveries (+{} repeats) through nginx: sent in {sent_in:?}, all answered after {answered_in:?}; accepted per replica {accepted:?}",
        DELIVERIES / 10
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_to_another_replica_is_answered_by_the_holder_and_a_repeat_to_the_holder_is_a_duplicate() {
    let llm = FakeLlm::start().await;
    llm.set_default(Reply::Echo);
    let receiver = Receiver::start().await;
    let url = scratch_database().await;
    let holder_setup = replica(&llm, &receiver, &url, "replica-a");
    let holder = holder_setup.start().await;
    let other_setup = replica(&llm, &receiver, &url, "replica-b");
    let other = other_setup.spawn();
    let up = eventually(Duration::from_secs(30), || std::net::TcpStream::connect(("127.0.0.1", other_setup.webhook_port)).is_ok()).await;
    assert!(up, "the other replica takes webhooks in:\n{}", other.log_text());
    let other_api = reqwest::get(other_setup.api("/health")).await;
    assert!(other_api.is_ok_and(|r| r.status().is_success()), "the API server (which answers on the request) runs on every replica");

    let client = reqwest::Client::new();
    let started = Instant::now();
    let (status, json) = deliver(&client, &other_setup.webhook(""), &body(1)).await;
    assert_eq!(status, 202, "the other replica stored the delivery: {json}");
    let answered = receiver.wait_for(1, Duration::from_secs(30)).await;
    assert!(answered, "the holder ran it:\n{}\n----\n{}", holder.log_text(), other.log_text());
    println!("delivery to another replica answered by the holder after {:?}", started.elapsed());
    assert_eq!(unfenced(receiver.received()[0].body["text"].as_str().unwrap_or_default()), answer(1));

    let (status, json) = deliver(&client, &holder_setup.webhook(""), &body(1)).await;
    assert_eq!((status, json["status"].as_str()), (200, Some("duplicate")), "the shared inbox knows it: {json}");
    assert_eq!(other.log_text().matches("webhook delivery accepted").count(), 1);
}
