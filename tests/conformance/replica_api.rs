//! The API server on every replica: three whole processes on one real PostgreSQL, each with the
//! API server on its own port, behind a real nginx spreading requests round-robin. The API server
//! answers on the request that brought each message, so every replica takes requests and runs
//! their turns; one conversation's turns still run one at a time, wherever its requests land
//! (under a claim on the session), and a request whose replica dies mid-turn is adopted by
//! another, its answer kept once in the shared history.

use crate::replica_ingress::Nginx;
use crate::support::{API_KEY, Gateway, Setup, not_run, scratch_database, unfenced};
use futures::StreamExt;
use hermes_fakes::{FakeLlm, RecordedRequest, Reply};
use std::collections::HashMap;
use std::time::{Duration, Instant};

const SESSIONS: usize = 6;
/// Two requests of each session are in flight at once, each of these chains this long.
const CHAIN: usize = 3;

/// One replica: its own home, API port and admin port, the shared database, no webhook. A
/// message for a session whose turn runs waits its turn (`queue`), in one replica as across them.
fn replica(llm: &FakeLlm, url: &str, name: &str, admin: u16) -> Setup {
    let mut setup = Setup::new(&llm.base_url());
    setup.set("DATABASE_URL", url);
    setup.set("WEBHOOK_ENABLED", "false");
    setup.write_config(&format!(
        "display:\n  busy_input_mode: queue\ngateway:\n  admin_port: {admin}\nstore:\n  lease_ttl_seconds: 3\n  replica: {name}\n"
    ));
    setup
}

async fn three_replicas(llm: &FakeLlm, url: &str) -> Vec<(Setup, Gateway, u16)> {
    let mut replicas = Vec::new();
    for name in ["replica-a", "replica-b", "replica-c"] {
        let admin = crate::support::free_port();
        let setup = replica(llm, url, name, admin);
        let gateway = setup.start().await;
        replicas.push((setup, gateway, admin));
    }
    replicas
}

/// One chat completion in `session` at `base`: the status and the answer's text (or the body).
async fn ask(client: &reqwest::Client, base: &str, session: &str, text: &str, idempotency_key: Option<&str>) -> (u16, String) {
    let mut request = client
        .post(format!("{base}/v1/chat/completions"))
        .bearer_auth(API_KEY)
        .header("X-Hermes-Session-Id", session)
        .json(&serde_json::json!({"model": "hermes-agent", "messages": [{"role": "user", "content": text}]}));
    if let Some(key) = idempotency_key {
        request = request.header("Idempotency-Key", key);
    }
    match request.send().await {
        Ok(response) => {
            let status = response.status().as_u16();
            let body: serde_json::Value = response.json().await.unwrap_or_default();
            let answer = body["choices"][0]["message"]["content"].as_str().map_or_else(|| body.to_string(), str::to_string);
            (status, answer)
        }
        Err(e) => (0, e.to_string()),
    }
}

/// How many API requests the replica behind `admin` took in (`/metrics`).
async fn received(admin: u16) -> u64 {
    let Ok(response) = reqwest::get(format!("http://127.0.0.1:{admin}/metrics")).await else { return 0 };
    let text = response.text().await.unwrap_or_default();
    text.lines()
        .filter(|line| line.starts_with("hermes_messages_received_total") && line.contains("platform=\"api_server\""))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|n| n as u64)
        .sum()
}

/// The answers of session `tag` a model request carried in its history: the turns that ended
/// before this one started.
fn answered_before(request: &RecordedRequest, tag: &str) -> usize {
    let answer = format!("echo: {tag}");
    request.messages().iter().filter(|(role, text)| role == "assistant" && text.contains(&answer)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_behind_nginx_answer_the_api_and_run_each_sessions_turns_one_at_a_time() {
    let Some(binary) = Nginx::binary() else {
        not_run("replica_api::three_replicas_behind_nginx", "nginx is not installed (Debian: nginx-light)");
        return;
    };
    let llm = FakeLlm::start().await;
    // Slow enough that two requests of one session overlap.
    llm.set_default(Reply::Delay(Duration::from_millis(150), Box::new(Reply::Echo)));
    let url = scratch_database().await;
    let replicas = three_replicas(&llm, &url).await;
    let ports: Vec<u16> = replicas.iter().map(|(setup, _, _)| setup.api_port).collect();
    let nginx = Nginx::start(&binary, &ports).await;
    let logs = || replicas.iter().map(|(_, g, _)| g.log_text()).collect::<Vec<_>>().join("\n----\n");

    let client = reqwest::Client::new();
    let base = nginx.base();
    let started = Instant::now();
    // Per session, two chains of requests run side by side, so two of its requests are always in
    // flight, most often on two replicas.
    let chains = (0..SESSIONS).flat_map(|s| ["a", "b"].map(move |chain| (s, chain)));
    let asked = futures::stream::iter(chains).map(|(s, chain)| {
        let (client, base) = (client.clone(), base.clone());
        async move {
            let mut answers = Vec::new();
            for i in 0..CHAIN {
                let text = format!("s{s}-{chain}{i}");
                answers.push((text.clone(), ask(&client, &base, &format!("conv-{s}"), &text, None).await));
            }
            answers
        }
    });
    let answers: Vec<(String, (u16, String))> = asked.buffer_unordered(2 * SESSIONS).collect::<Vec<_>>().await.concat();
    let took = started.elapsed();
    for (text, (status, answer)) in &answers {
        assert_eq!((*status, answer.as_str()), (200, format!("echo: {text}").as_str()), "nginx: {}\n{}", nginx.errors(), logs());
    }

    // Every replica took its share, and ran what it took.
    let mut taken = Vec::new();
    for (_, _, admin) in &replicas {
        taken.push(received(*admin).await);
    }
    assert_eq!(taken.iter().sum::<u64>(), (SESSIONS * 2 * CHAIN) as u64, "{taken:?}");
    assert!(taken.iter().all(|n| *n > 0), "nginx spread the requests over all three replicas, each answering its own: {taken:?}");

    // The model saw each message once, and each session's turns one after the other: every turn
    // started after all the turns before it were answered, never two beside each other.
    let requests = llm.requests();
    let mut prompted: HashMap<String, usize> = HashMap::new();
    for request in &requests {
        *prompted.entry(unfenced(&request.last_user_text().unwrap_or_default())).or_default() += 1;
    }
    assert!(prompted.values().all(|n| *n == 1) && prompted.len() == answers.len(), "each message reached the model once: {prompted:?}");
    for s in 0..SESSIONS {
        let tag = format!("s{s}-");
        let mut turns: Vec<usize> =
            requests.iter().filter(|r| r.last_user_text().is_some_and(|t| t.contains(&tag))).map(|r| answered_before(r, &tag)).collect();
        turns.sort_unstable();
        let expected: Vec<usize> = (0..2 * CHAIN).collect();
        assert_eq!(turns, expected, "session {s}: each turn saw every earlier one answered (none ran beside another)\n{}", logs());
    }
    println!("{} requests in {SESSIONS} sessions through nginx in {took:?}; taken per replica {taken:?}", answers.len());
}

/// A replica killed while its turn waits for the model: the client's request dies with it, and
/// once the replica's claim on the event runs out another replica adopts the event and runs it,
/// so the answer is in the conversation's history once. A retry with the same `Idempotency-Key`
/// is told so, and the conversation goes on through the load balancer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_mid_turn_leaves_its_request_to_another_which_keeps_the_answer_once() {
    let Some(binary) = Nginx::binary() else {
        not_run("replica_api::a_replica_killed_mid_turn", "nginx is not installed (Debian: nginx-light)");
        return;
    };
    let llm = FakeLlm::start().await;
    llm.set_default(Reply::Delay(Duration::from_secs(2), Box::new(Reply::Echo)));
    let url = scratch_database().await;
    let mut replicas = three_replicas(&llm, &url).await;
    let ports: Vec<u16> = replicas.iter().map(|(setup, _, _)| setup.api_port).collect();
    let nginx = Nginx::start(&binary, &ports).await;
    let logs = |replicas: &[(Setup, Gateway, u16)]| replicas.iter().map(|(_, g, _)| g.log_text()).collect::<Vec<_>>().join("\n----\n");

    let client = reqwest::Client::new();
    let victim = replicas[0].0.api("");
    let cut_off = tokio::spawn({
        let client = client.clone();
        async move { ask(&client, &victim, "conv-x", "remember the number 42", Some("k-42")).await }
    });
    assert!(crate::support::eventually(Duration::from_secs(20), || llm.request_count() == 1).await, "{}", logs(&replicas));
    assert!(!replicas[0].1.signal(libc::SIGKILL).await.success());
    let killed = Instant::now();
    let (status, _) = cut_off.await.unwrap();
    assert_ne!(status, 200, "the request died with its replica");

    // Adopted within the claim's TTL and a look at the inbox, and run once more there.
    let adopted = crate::support::eventually(Duration::from_secs(30), || llm.request_count() == 2).await;
    assert!(adopted, "another replica adopted the request:\n{}", logs(&replicas[1..]));
    let adopted_in = killed.elapsed();
    let adopter = replicas[1..].iter().position(|(_, g, _)| g.log_text().contains("adopting an event")).expect("one says it adopted");

    // The client retries with the same key: the event is known, its answer in the history.
    let (status, body) = ask(&client, &nginx.base(), "conv-x", "remember the number 42", Some("k-42")).await;
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("conversation history"), "{body}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (status, answer) = ask(&client, &nginx.base(), "conv-x", "what was the number?", None).await;
    assert_eq!((status, answer.as_str()), (200, "echo: what was the number?"), "{}", logs(&replicas[1..]));
    let last = llm.requests().last().cloned().expect("asked");
    let history = last.messages();
    let told = history.iter().filter(|(role, text)| role == "user" && unfenced(text).contains("remember the number 42")).count();
    let answered = history.iter().filter(|(role, text)| role == "assistant" && text.contains("echo: remember the number 42")).count();
    assert_eq!((told, answered), (1, 1), "the adopted turn is in the history once: {history:?}");
    assert_eq!(llm.request_count(), 3, "nothing ran twice after the adoption");
    println!("replica-a killed mid-turn: adopted by replica {} after {adopted_in:?}", adopter + 1);
}
