//! The admin listener as an operator's monitoring sees it, with Telegram (the fake Bot API) as
//! the platform: `/metrics` is Prometheus text that `promtool` accepts and whose counters move
//! with a conversation, refused to web pages like every admin route; `/readyz` turns 503 when
//! Telegram's long poll hangs and 200 again once it answers.

use crate::peer::ChatPeer;
use crate::support::{Gateway, Setup, free_port, promtool_check};
use crate::telegram::TelegramPeer;
use hermes_fakes::FakeLlm;
use std::time::{Duration, Instant};

/// Telegram enabled (with the API server and webhook the setup always has) and the admin
/// listener on a free port.
/// The setup is returned to keep its home alive as long as the gateway.
async fn gateway_with_admin(llm: &FakeLlm, telegram: &TelegramPeer) -> (Gateway, String, Setup) {
    let mut setup = Setup::new(&llm.base_url());
    let admin_port = free_port();
    let platforms = telegram.configure(&mut setup);
    setup.write_config(&format!("platforms:\n{platforms}\ngateway:\n  admin_port: {admin_port}\n"));
    let gateway = setup.start().await;
    (gateway, format!("http://127.0.0.1:{admin_port}"), setup)
}

async fn get(url: &str) -> (u16, String) {
    match reqwest::get(url).await {
        Ok(r) => (r.status().as_u16(), r.text().await.unwrap_or_default()),
        Err(e) => (0, e.to_string()),
    }
}

/// Poll `url` every 250 ms until its status is `want`; the last answer either way.
async fn wait_status(url: &str, want: u16, within: Duration) -> (bool, (u16, String)) {
    let deadline = Instant::now() + within;
    loop {
        let answer = get(url).await;
        if answer.0 == want {
            return (true, answer);
        }
        if Instant::now() > deadline {
            return (false, answer);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The value of the sample named exactly `series` (name and labels as rendered), 0 if absent.
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .filter_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .filter_map(|v| v.trim().parse::<f64>().ok())
        .next()
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_pass_promtool_and_count_a_telegram_conversation() {
    let llm = FakeLlm::start().await;
    let telegram = TelegramPeer::start().await;
    let (gateway, admin, _setup) = gateway_with_admin(&llm, &telegram).await;
    let metrics = format!("{admin}/metrics");
    let (ready, last) = wait_status(&format!("{admin}/readyz"), 200, Duration::from_secs(30)).await;
    assert!(ready, "ready once Telegram is connected: {last:?}\n{}", gateway.log_text());

    let (status, before) = get(&metrics).await;
    assert_eq!(status, 200, "{before}");
    let received = "hermes_messages_received_total{platform=\"telegram\"}";
    let replies = "hermes_reply_latency_seconds_count{platform=\"telegram\"}";
    let sent = "hermes_messages_sent_total{platform=\"telegram\"}";

    for i in 0..3 {
        let chat = telegram.dm(1, &format!("hello {i}")).await;
        let echo = format!("echo: hello {i}");
        let answered = crate::support::eventually(Duration::from_secs(20), || telegram.posted(&chat).iter().any(|m| m.text == echo)).await;
        assert!(answered, "message {i} answered\n{}", gateway.log_text());
    }
    // The counters are bumped as the send returns; the fake has the message a moment before.
    let mut after = String::new();
    // Up to 10 s: with six tests at a time on two cores the count can trail the fake by seconds.
    for _ in 0..200 {
        after = get(&metrics).await.1;
        if sample(&after, replies) >= sample(&before, replies) + 3.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(sample(&after, received) - sample(&before, received), 3.0, "three messages in:\n{after}");
    assert!(sample(&after, sent) - sample(&before, sent) >= 3.0, "three answers out:\n{after}");
    assert_eq!(sample(&after, replies) - sample(&before, replies), 3.0, "three replies timed:\n{after}");
    assert!(sample(&after, "hermes_reply_latency_seconds_sum{platform=\"telegram\"}") > 0.0, "{after}");
    assert!(after.lines().any(|l| l.starts_with("hermes_llm_request_duration_seconds_count{") && !l.ends_with(" 0")), "{after}");
    assert_eq!(sample(&after, "hermes_adapter_state{platform=\"telegram\",state=\"connected\"}"), 1.0, "{after}");
    assert!(sample(&after, "hermes_process_resident_memory_bytes") > 1e6, "{after}");
    assert!(after.contains(&format!("hermes_build_info{{version=\"{}\"}} 1", env!("CARGO_PKG_VERSION"))), "{after}");
    let user = format!("\"{}\"", telegram.tg_user(1).id);
    assert!(!after.contains(&user), "no user or chat id is a label value:\n{after}");

    let (accepted, said) = promtool_check(&after);
    assert!(accepted, "promtool check metrics refused /metrics: {said}\n{after}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_refused_to_web_pages() {
    let llm = FakeLlm::start().await;
    let telegram = TelegramPeer::start().await;
    let (_gateway, admin, _setup) = gateway_with_admin(&llm, &telegram).await;
    let client = reqwest::Client::new();
    let from_page = client.get(format!("{admin}/metrics")).header("Origin", "https://evil.example").send().await.unwrap();
    assert_eq!(from_page.status().as_u16(), 403, "a page's fetch carries Origin");
    let body = from_page.text().await.unwrap();
    assert!(!body.contains("hermes_"), "nothing of the metrics leaks in the refusal: {body}");
    let port = admin.rsplit(':').next().unwrap();
    let rebound = client.get(format!("{admin}/metrics")).header("Host", format!("evil.example:{port}")).send().await.unwrap();
    assert_eq!(rebound.status().as_u16(), 421, "a rebound DNS name is not this machine");
    assert_eq!(client.get(format!("{admin}/metrics")).send().await.unwrap().status().as_u16(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_fails_while_telegram_polls_hang_and_recovers_after() {
    let llm = FakeLlm::start().await;
    let telegram = TelegramPeer::start().await;
    let (gateway, admin, _setup) = gateway_with_admin(&llm, &telegram).await;
    let readyz = format!("{admin}/readyz");
    let (ready, last) = wait_status(&readyz, 200, Duration::from_secs(30)).await;
    assert!(ready, "ready once Telegram is connected: {last:?}\n{}", gateway.log_text());

    // getUpdates now hangs without an answer; getMe and sends still work, so only the missing
    // progress can tell.
    telegram.fake.stall_polls(true);
    let (unready, last) = wait_status(&readyz, 503, Duration::from_secs(60)).await;
    assert!(unready, "503 within 60 s of the long poll hanging: {last:?}\n{}", gateway.log_text());
    assert!(last.1.contains("telegram"), "the body names the adapter: {}", last.1);
    // A reconnect that gets through getMe but hangs on the poll again is not ready either.
    let mut seen_ready = None;
    let hold_until = Instant::now() + Duration::from_secs(40);
    while Instant::now() < hold_until {
        let answer = get(&readyz).await;
        if answer.0 == 200 {
            seen_ready = Some(answer.1);
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(seen_ready, None, "ready while every poll still hangs\n{}", gateway.log_text());

    telegram.fake.stall_polls(false);
    let (recovered, last) = wait_status(&readyz, 200, Duration::from_secs(120)).await;
    assert!(recovered, "200 again after Telegram answers: {last:?}\n{}", gateway.log_text());
    let chat = telegram.dm(2, "back?").await;
    let answered =
        crate::support::eventually(Duration::from_secs(20), || telegram.posted(&chat).iter().any(|m| m.text == "echo: back?")).await;
    assert!(answered, "messages flow again\n{}", gateway.log_text());
}
