//! Every adapter of the build in one process: Telegram, Discord and Slack against their fakes,
//! Matrix against a real Synapse, email against real Dovecot and Postfix, and the API server and
//! webhook listeners. Each chat platform answers, `/status` lists every one as connected, and
//! `/readyz` says ready.

use crate::discord::DiscordPeer;
use crate::email;
use crate::matrix_peer::MatrixPeer;
use crate::peer::ChatPeer;
use crate::slack::SlackPeer;
use crate::support::{Setup, eventually, free_port};
use crate::telegram::TelegramPeer;
use hermes_fakes::FakeLlm;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_platforms_in_one_process_answer_and_are_listed_by_status_and_readyz() {
    let llm = FakeLlm::start().await;
    let telegram = TelegramPeer::start().await;
    let discord = DiscordPeer::start().await;
    let slack = SlackPeer::start().await;
    let matrix = MatrixPeer::start().await;
    let mail = email::peer();
    let bot = mail.account("bot");
    let alice = mail.account("alice");
    let mut setup = Setup::new(&llm.base_url());
    let platforms = format!(
        "{}{}{}{}",
        telegram.configure(&mut setup),
        discord.configure(&mut setup),
        slack.configure(&mut setup),
        matrix.configure(&mut setup)
    );
    mail.configure(&mut setup, &bot, &alice.0);
    let admin_port = free_port();
    setup.write_config(&format!("platforms:\n{platforms}\ngateway:\n  admin_port: {admin_port}\n"));
    let gateway = setup.start().await;

    let readyz = format!("http://127.0.0.1:{admin_port}/readyz");
    let client = reqwest::Client::new();
    let mut last = (0, String::new());
    for _ in 0..600 {
        if let Ok(answer) = client.get(&readyz).send().await {
            last = (answer.status().as_u16(), answer.text().await.unwrap_or_default());
            if last.0 == 200 {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(last.0, 200, "/readyz ready with every adapter up: {}\n{}", last.1, gateway.log_text());
    // A reading for the issue notes (run with HERMES_TEST_BINARY=<release build>), not a check.
    tokio::time::sleep(Duration::from_secs(5)).await;
    if let Some(kb) = gateway.vm_rss_kb() {
        println!("idle VmRSS with every adapter connected: {:.1} MB", kb as f64 / 1024.0);
    }

    let tg = telegram.dm(1, "hi telegram").await;
    let dc = discord.dm(1, "hi discord").await;
    let sl = slack.dm(1, "hi slack").await;
    let mx = matrix.dm(1, "hi matrix").await;
    mail.send_authenticated(&alice.0, &bot.0, "hello", "<all-platforms-1@example.test>", "hi email", &[]);
    let wait = Duration::from_secs(60);
    for (name, ok) in [
        ("telegram", eventually(wait, || telegram.posted(&tg).iter().any(|m| m.text == "echo: hi telegram")).await),
        ("discord", eventually(wait, || discord.posted(&dc).iter().any(|m| m.text == "echo: hi discord")).await),
        ("slack", eventually(wait, || slack.posted(&sl).iter().any(|m| m.text == "echo: hi slack")).await),
        ("matrix", eventually(wait, || matrix.posted(&mx).iter().any(|m| m.text == "echo: hi matrix")).await),
        ("email", eventually(wait, || mail.mails(&alice.0, &alice.1).iter().any(|m| m.raw.contains("echo: [Subject: hello]"))).await),
    ] {
        assert!(ok, "{name} answered\n{}", gateway.log_text());
    }

    slack.dm(1, "/status").await;
    let status = || slack.posted(&sl).into_iter().find(|m| m.text.contains("Platforms:")).map(|m| m.text);
    assert!(eventually(Duration::from_secs(20), || status().is_some()).await, "/status answered in Slack\n{}", gateway.log_text());
    let text = status().unwrap_or_default();
    for connected in ["telegram ✅", "discord ✅", "slack ✅", "matrix ✅", "email ✅", "api_server ✅", "webhook ✅"] {
        assert!(text.contains(connected), "{connected} listed as connected: {text}");
    }
}
