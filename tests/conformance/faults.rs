//! Heavier fault scenarios through the whole process: throttling storms with 5xx bursts (and, on
//! Discord, answers lost after the message was taken), kill -9 in the middle of a burst of updates,
//! zombie Discord heartbeats seen in `/readyz`, both chat platforms in one process, and two
//! gateways configured with one bot token.

use crate::discord::DiscordPeer;
use crate::peer::ChatPeer;
use crate::support::{Setup, eventually};
use crate::telegram::TelegramPeer;
use hermes_fakes::telegram::{Fault, FaultScope, SentMessage};
use hermes_fakes::{FakeLlm, Reply};

const RESEND_MARK: &str = "↻ (resent) ";
use std::collections::HashMap;
use std::time::Duration;

/// Every answer text the bot posted, with how often (plain copies only).
fn answer_counts(sent: &[SentMessage]) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for m in sent.iter().filter(|m| m.text.starts_with("echo: ")) {
        *counts.entry(m.text.clone()).or_insert(0) += 1;
    }
    counts
}

/// Answers resent after a restart cut off their first send, marked as possible repeats.
fn resent_answers(sent: &[SentMessage]) -> Vec<String> {
    sent.iter().filter_map(|m| m.text.strip_prefix(RESEND_MARK).filter(|t| t.starts_with("echo: ")).map(str::to_string)).collect()
}

/// Answered at all, plainly or as a marked resend.
fn answered(sent: &[SentMessage]) -> HashMap<String, usize> {
    let mut counts = answer_counts(sent);
    for text in resent_answers(sent) {
        *counts.entry(text).or_insert(0) += 1;
    }
    counts
}

fn expected_answers(users: u32, per_user: u32) -> Vec<String> {
    (1..=users).flat_map(|u| (1..=per_user).map(move |k| format!("echo: u{u}-m{k}"))).collect()
}

async fn telegram_setup(llm: &FakeLlm, peer: &TelegramPeer) -> Setup {
    let mut setup = Setup::new(&llm.base_url());
    setup.set("WEBHOOK_ENABLED", "false");
    let platforms = peer.configure(&mut setup);
    // Queue mode: every message gets its own answer, however fast a user types.
    setup.write_config(&format!("platforms:\n{platforms}\ndisplay:\n  busy_input_mode: queue\n"));
    setup
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telegram_storm_of_429s_and_a_5xx_burst_answers_every_message_once() {
    let llm = FakeLlm::start().await;
    let peer = TelegramPeer::start().await;
    let setup = telegram_setup(&llm, &peer).await;
    let gateway = setup.start().await;
    peer.fake.set_seed(7);
    peer.fake.fail_next(FaultScope::Method("sendMessage".into()), 6, Fault::ServerError(502));
    peer.fake.fail_fraction(FaultScope::Method("sendMessage".into()), 0.3, Fault::RateLimited { retry_after: 1 });
    let (users, per_user) = (20, 10);
    for k in 1..=per_user {
        for u in 1..=users {
            peer.dm(u, &format!("u{u}-m{k}")).await;
        }
    }
    let expected = expected_answers(users, per_user);
    let all_answered = eventually(Duration::from_secs(120), || {
        let counts = answer_counts(&peer.fake.sent());
        expected.iter().all(|a| counts.contains_key(a))
    })
    .await;
    let counts = answer_counts(&peer.fake.sent());
    let missing: Vec<&String> = expected.iter().filter(|a| !counts.contains_key(*a)).collect();
    assert!(all_answered, "unanswered: {missing:?}\n--- gateway log ---\n{}", gateway.log_text());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let counts = answer_counts(&peer.fake.sent());
    let doubled: Vec<(&String, &usize)> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(doubled.is_empty(), "answered more than once: {doubled:?}");
    assert_eq!(counts.len(), 200);
    let throttled = peer.fake.calls().iter().filter(|c| c.method == "sendmessage" && c.status == 429).count();
    let failed = peer.fake.calls().iter().filter(|c| c.method == "sendmessage" && c.status >= 500).count();
    assert!(throttled >= 40, "the storm really happened: {throttled} sends were answered 429");
    assert_eq!(failed, 6, "the 5xx burst really happened");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discord_storm_of_429s_5xx_and_lost_answers_answers_every_message_once() {
    use hermes_fakes::discord::{Fault as DcFault, FaultScope as DcScope};
    let llm = FakeLlm::start().await;
    let peer = DiscordPeer::start().await;
    let mut setup = Setup::new(&llm.base_url());
    setup.set("WEBHOOK_ENABLED", "false");
    let platforms = peer.configure(&mut setup);
    setup.write_config(&format!("platforms:\n{platforms}\ndisplay:\n  busy_input_mode: queue\n"));
    let gateway = setup.start().await;
    peer.fake.set_seed(7);
    peer.fake.fail_next(DcScope::Create, 6, DcFault::ServerError(502));
    // Discord took these messages but the answers never arrived: the retry's nonce must not double them.
    peer.fake.fail_next(DcScope::Create, 4, DcFault::LostAnswer);
    peer.fake.fail_fraction(DcScope::Create, 0.3, DcFault::RateLimited { retry_after: 1.0 });
    let (users, per_user) = (20, 10);
    for k in 1..=per_user {
        for u in 1..=users {
            peer.dm(u, &format!("u{u}-m{k}")).await;
        }
    }
    let answers = || {
        let mut counts: HashMap<String, usize> = HashMap::new();
        for m in peer.fake.sent().iter().filter(|m| m.content.starts_with("echo: ")) {
            *counts.entry(m.content.clone()).or_insert(0) += 1;
        }
        counts
    };
    let expected = expected_answers(users, per_user);
    let all_answered = eventually(Duration::from_secs(120), || {
        let counts = answers();
        expected.iter().all(|a| counts.contains_key(a))
    })
    .await;
    let counts = answers();
    let missing: Vec<&String> = expected.iter().filter(|a| !counts.contains_key(*a)).collect();
    assert!(all_answered, "unanswered: {missing:?}\n--- gateway log ---\n{}", gateway.log_text());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let counts = answers();
    let doubled: Vec<(&String, &usize)> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(doubled.is_empty(), "answered more than once: {doubled:?}");
    assert_eq!(counts.len(), 200);
    let creates = peer.fake.calls().into_iter().filter(|c| c.method == "POST" && c.path.ends_with("/messages")).collect::<Vec<_>>();
    let throttled = creates.iter().filter(|c| c.status == 429).count();
    let failed = creates.iter().filter(|c| c.status >= 500).count();
    let cut = creates.iter().filter(|c| c.status == 0).count();
    assert!(throttled >= 40, "the storm really happened: {throttled} creates were answered 429");
    assert_eq!(failed, 6, "the 5xx burst really happened");
    assert_eq!(cut, 4, "four answers were lost after Discord took the message");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telegram_kill_9_during_a_burst_loses_and_doubles_nothing() {
    let llm = FakeLlm::start().await;
    // Slow enough that the kill lands while answers are still being produced.
    llm.set_default(Reply::Echo.delayed(Duration::from_millis(40)));
    let peer = TelegramPeer::start().await;
    let setup = telegram_setup(&llm, &peer).await;
    let mut gateway = setup.start().await;
    let (users, per_user) = (10, 10);
    for k in 1..=per_user {
        for u in 1..=users {
            peer.dm(u, &format!("u{u}-m{k}")).await;
        }
    }
    let some_answered = eventually(Duration::from_secs(30), || answer_counts(&peer.fake.sent()).len() >= 15).await;
    assert!(some_answered, "the burst started being answered:\n{}", gateway.log_text());
    gateway.signal(libc::SIGKILL).await;
    let answered_before = answer_counts(&peer.fake.sent()).len();
    assert!(answered_before < 100, "the kill landed mid-burst ({answered_before} answered)");
    // More arrive while the gateway is down.
    for u in 1..=users {
        peer.dm(u, &format!("u{u}-m{}", per_user + 1)).await;
    }
    let gateway = setup.start().await;
    let expected = expected_answers(users, per_user + 1);
    let all_answered = eventually(Duration::from_secs(60), || {
        let counts = answered(&peer.fake.sent());
        expected.iter().all(|a| counts.contains_key(a))
    })
    .await;
    let counts = answered(&peer.fake.sent());
    let missing: Vec<&String> = expected.iter().filter(|a| !counts.contains_key(*a)).collect();
    assert!(all_answered, "lost across the crash: {missing:?}\n--- log after restart ---\n{}", gateway.log_text());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let sent = peer.fake.sent();
    let doubled: Vec<(String, usize)> = answer_counts(&sent).into_iter().filter(|(_, n)| *n > 1).collect();
    assert!(doubled.is_empty(), "answered twice without a mark across the crash: {doubled:?}");
    // A send cut off by the kill is resent once, marked: at most one per chat in flight at the
    // kill, and never more than once per answer.
    let resent = resent_answers(&sent);
    assert!(resent.len() <= users as usize, "only sends in flight at the kill are resent: {resent:?}");
    let mut unique = resent.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), resent.len(), "no answer is resent twice: {resent:?}");
    println!("answered before the kill: {answered_before}; resent after the restart (marked): {resent:?}");
    assert_eq!(peer.fake.pending_updates(), 0, "every update was confirmed to Telegram in the end");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_process_with_telegram_and_discord_streams_in_both_and_status_lists_both() {
    let llm = FakeLlm::start().await;
    let telegram = TelegramPeer::start().await;
    let discord = DiscordPeer::start().await;
    let mut setup = Setup::new(&llm.base_url());
    let platforms = format!("{}{}", telegram.configure(&mut setup), discord.configure(&mut setup));
    setup.write_config(&format!("platforms:\n{platforms}\nstreaming:\n  enabled: true\n  edit_interval: 0\n  buffer_threshold: 8\n"));
    let gateway = setup.start().await;
    let full = "Streaming answers arrive as they are written.";
    llm.push(Reply::chunks(["Streaming ", "answers arrive ", "as they are ", "written."]));
    let tg_chat = telegram.dm(1, "hi from telegram").await;
    assert!(
        eventually(Duration::from_secs(20), || telegram.posted(&tg_chat).iter().any(|m| m.text == full)).await,
        "{}",
        gateway.log_text()
    );
    llm.push(Reply::chunks(["Streaming ", "answers arrive ", "as they are ", "written."]));
    let dc_chat = discord.dm(1, "hi from discord").await;
    assert!(
        eventually(Duration::from_secs(20), || discord.posted(&dc_chat).iter().any(|m| m.text == full)).await,
        "{}",
        gateway.log_text()
    );
    assert!(telegram.posted(&tg_chat)[0].edits >= 1, "the Telegram answer was edited in place while it streamed");
    assert!(discord.posted(&dc_chat)[0].edits >= 1, "the Discord answer was edited in place while it streamed");
    telegram.dm(1, "/status").await;
    discord.dm(1, "/status").await;
    let status_in = |platform: &str| {
        let posted = if platform == "telegram" { telegram.posted(&tg_chat) } else { discord.posted(&dc_chat) };
        posted.into_iter().find(|m| m.text.contains("Platforms:")).map(|m| m.text)
    };
    for platform in ["telegram", "discord"] {
        let answered = eventually(Duration::from_secs(20), || status_in(platform).is_some()).await;
        assert!(answered, "/status answered in {platform}\n{}", gateway.log_text());
        let text = status_in(platform).unwrap_or_default();
        for connected in ["telegram ✅", "discord ✅", "api_server ✅"] {
            assert!(text.contains(connected), "{connected} listed as connected in {platform}: {text}");
        }
    }
    // The same command from Discord's slash menu: published from the registry, answered in the
    // interaction's "thinking…" response.
    let published = discord.fake.commands();
    assert!(published.as_array().is_some_and(|c| c.iter().any(|c| c["name"] == "status")), "slash commands published: {published}");
    let dm_channel: u64 = dc_chat.chat_id.parse().expect("a channel id");
    discord.fake.slash_command(&discord.dc_user(1), dm_channel, "status", None);
    let statuses = || discord.posted(&dc_chat).iter().filter(|m| m.text.contains("Platforms:")).count();
    assert!(eventually(Duration::from_secs(20), || statuses() == 2).await, "the slash /status was answered\n{}", gateway.log_text());
    assert!(
        discord.fake.calls().iter().any(|c| c.method == "PATCH" && c.path.ends_with("/messages/@original")),
        "in the thinking response"
    );
    // A streamed answer naming a file: the shown message loses the tag, the file follows.
    let notes = setup.home.path().join("cache").join("notes.txt");
    std::fs::write(&notes, "remember the milk\n").expect("write notes");
    llm.push(Reply::chunks(["Here is ".to_string(), format!("the file.\nMEDIA:{}", notes.display())]));
    discord.dm(1, "send the notes").await;
    let sent = eventually(Duration::from_secs(20), || discord.files(&dc_chat) == vec!["notes.txt".to_string()]).await;
    assert!(sent, "the file followed the streamed answer: {:?}\n{}", discord.files(&dc_chat), gateway.log_text());
    let shown = eventually(Duration::from_secs(10), || discord.posted(&dc_chat).iter().any(|m| m.text == "Here is the file.")).await;
    assert!(shown, "the streamed message was corrected to the words alone: {:#?}", discord.posted(&dc_chat));
    assert!(discord.posted(&dc_chat).iter().all(|m| !m.text.contains("MEDIA:")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discord_heartbeats_left_unacknowledged_show_as_degraded_until_the_adapter_reconnects() {
    let llm = FakeLlm::start().await;
    let discord = DiscordPeer::start().await;
    let mut setup = Setup::new(&llm.base_url());
    setup.set("WEBHOOK_ENABLED", "false");
    let admin_port = crate::support::free_port();
    let platforms = discord.configure(&mut setup);
    setup.write_config(&format!("platforms:\n{platforms}\ngateway:\n  admin_port: {admin_port}\n"));
    let gateway = setup.start().await;
    let readyz = format!("http://127.0.0.1:{admin_port}/readyz");
    let client = reqwest::Client::new();
    let probe = || async {
        match client.get(&readyz).send().await {
            Ok(r) => (r.status().as_u16(), r.text().await.unwrap_or_default()),
            Err(e) => (0, e.to_string()),
        }
    };
    let mut last = (0, String::new());
    for _ in 0..200 {
        last = probe().await;
        if last.0 == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(last.0, 200, "ready once connected: {}\n{}", last.1, gateway.log_text());

    assert!(discord.fake.stop_acking_heartbeats(), "the bot was connected");
    // Discord takes a moment to answer IDENTIFY; the fake takes long enough to look at the gap.
    discord.fake.set_ready_delay(Duration::from_secs(3));
    let mut degraded = None;
    for _ in 0..300 {
        let (status, body) = probe().await;
        if status == 503 && body.contains("discord") {
            degraded = Some(body);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let degraded = degraded.unwrap_or_else(|| panic!("/readyz never reported the zombie connection\n{}", gateway.log_text()));
    assert!(degraded.contains("degraded") || degraded.contains("lost"), "{degraded}");
    let reconnected = discord.fake.wait_until(Duration::from_secs(30), |f| f.identifies() == 2 && f.connected()).await;
    assert!(reconnected, "the adapter connected again\n{}", gateway.log_text());
    let mut ready_again = false;
    for _ in 0..200 {
        if probe().await.0 == 200 {
            ready_again = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ready_again, "ready again after the reconnect: {:?}", probe().await);
    let chat = discord.dm(3, "still there?").await;
    assert!(eventually(Duration::from_secs(20), || discord.posted(&chat).iter().any(|m| m.text == "echo: still there?")).await);
    assert_eq!(discord.fake.open_connections(), 1, "one client, one connection");
}

/// Two gateways (two HERMES_HOMEs, say two profiles) configured with one bot token: the second is
/// told the token is taken and by whom, never polls against the first (no 409 fight, no update
/// answered twice), and takes over once the first is gone, even after a kill -9.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_gateway_on_the_same_bot_token_waits_instead_of_fighting_for_updates() {
    let llm = FakeLlm::start().await;
    let peer = TelegramPeer::start().await;
    let locks = tempfile::tempdir().expect("temp dir");
    let lock_dir = locks.path().to_str().expect("utf-8 temp path");
    let mut setups = Vec::new();
    for _ in 0..2 {
        let mut setup = Setup::new(&llm.base_url());
        setup.set("WEBHOOK_ENABLED", "false").set("HERMES_GATEWAY_LOCK_DIR", lock_dir);
        let platforms = peer.configure(&mut setup);
        // A short backoff cap so the waiting gateway looks again soon after the token is free.
        setup.write_config(&format!("platforms:\n{platforms}\ngateway:\n  backoff_cap_secs: 2\n"));
        setups.push(setup);
    }
    let mut first = setups[0].start().await;
    let first_pid = std::fs::read_to_string(setups[0].home.path().join("gateway.pid")).expect("the first gateway's PID file");
    let first_pid = first_pid.trim();
    assert!(peer.fake.wait_until(Duration::from_secs(20), |f| f.call_count("getUpdates") > 0).await, "{}", first.log_text());

    let second = setups[1].start().await;
    let told = eventually(Duration::from_secs(20), || {
        let (_, out, _) = setups[1].run(&["gateway", "status"]);
        out.contains("telegram: backing_off") && out.contains(&format!("already in use by another hermes gateway (PID {first_pid}"))
    })
    .await;
    let (_, status, _) = setups[1].run(&["gateway", "status"]);
    assert!(told, "the second gateway names the holder:\n{status}\n{}", second.log_text());
    assert!(!status.contains("123456:TEST-TOKEN") && !second.log_text().contains("TEST-TOKEN"), "no token in status or log");

    let chat = peer.dm(1, "who answers?").await;
    let answered = |text: &str| peer.fake.sent().iter().filter(|m| m.chat_id.to_string() == chat.chat_id && m.text == text).count();
    assert!(eventually(Duration::from_secs(20), || answered("echo: who answers?") == 1).await, "{}", first.log_text());
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(answered("echo: who answers?"), 1, "answered once");
    let conflicts = peer.fake.calls().iter().filter(|c| c.method == "getupdates" && c.status == 409).count();
    assert_eq!(conflicts, 0, "the two gateways never polled at the same time");

    first.signal(libc::SIGKILL).await;
    let took_over = eventually(Duration::from_secs(30), || {
        let (_, out, _) = setups[1].run(&["gateway", "status"]);
        out.contains("telegram: connected")
    })
    .await;
    let (_, status, _) = setups[1].run(&["gateway", "status"]);
    let calls: Vec<String> = peer.fake.calls().iter().rev().take(12).map(|c| format!("{} {} {:?}", c.method, c.status, c.params)).collect();
    assert!(took_over, "the second gateway took the token over:\n{status}\n{calls:#?}\n{}", second.log_text());
    peer.dm(1, "and now?").await;
    assert!(eventually(Duration::from_secs(20), || answered("echo: and now?") == 1).await, "{}", second.log_text());
}
