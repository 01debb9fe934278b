//! Delivery through outages, through the whole process against the fake Telegram: a 75-second
//! outage of every send with a kill -9 in the middle, the fault mix of the storm test twenty times
//! in a row, and a user who blocked the bot (a dead letter that holds up nobody and is resent by
//! hand). Each answer is counted as the user sees it: plain, marked as a possible repeat, or with
//! a note of how late it is.

use crate::peer::ChatPeer;
use crate::support::{Setup, eventually};
use crate::telegram::TelegramPeer;
use hermes_fakes::telegram::{Fault, FaultScope, SentMessage};
use hermes_fakes::{FakeLlm, Reply};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// What starts a part resent after a cut-off send, as the user sees it.
pub(crate) const RESEND_MARK: &str = "↻ (resent) ";
/// What starts a part delivered late.
pub(crate) const LATE_NOTE: &str = "⏱ Delivered ";

/// An answer as the user reads it: (the echo, marked as a possible repeat, carried a late note).
pub(crate) fn read_answer(text: &str) -> Option<(String, bool, bool)> {
    let (marked, text) = match text.strip_prefix(RESEND_MARK) {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (late, text) = match text.strip_prefix(LATE_NOTE) {
        Some(rest) => (true, rest.split_once("\n\n").map(|(_, body)| body)?),
        None => (false, text),
    };
    text.starts_with("echo: ").then(|| (text.to_string(), marked, late))
}

/// How many times each answer reached each chat, however it was marked.
fn answer_counts(sent: &[SentMessage]) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for (answer, _, _) in sent.iter().filter_map(|m| read_answer(&m.text)) {
        *counts.entry(answer).or_insert(0) += 1;
    }
    counts
}

async fn telegram_setup(llm: &FakeLlm, peer: &TelegramPeer, extra_env: &[(&str, &str)]) -> Setup {
    let mut setup = Setup::new(&llm.base_url());
    setup.set("WEBHOOK_ENABLED", "false");
    let platforms = peer.configure(&mut setup);
    for (key, value) in extra_env {
        setup.set(key, value);
    }
    setup.write_config(&format!("platforms:\n{platforms}\ndisplay:\n  busy_input_mode: queue\n"));
    setup
}

fn user_chat(user: u32) -> i64 {
    1000 + i64::from(user)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_75_s_outage_with_a_kill_9_in_the_middle_loses_and_doubles_no_answer() {
    let llm = FakeLlm::start().await;
    llm.set_default(Reply::Echo);
    let peer = TelegramPeer::start().await;
    let setup = telegram_setup(&llm, &peer, &[]).await;
    let mut gateway = setup.start().await;
    // Up and answering before Telegram breaks.
    peer.dm(1, "before").await;
    assert!(
        eventually(Duration::from_secs(20), || answer_counts(&peer.fake.sent()).contains_key("echo: before")).await,
        "{}",
        gateway.log_text()
    );

    peer.fake.fail_fraction(FaultScope::Method("sendMessage".into()), 1.0, Fault::ServerError(502));
    let outage = Instant::now();
    let mut expected: Vec<(u32, String)> = vec![(1, "echo: before".into())];
    // Ten messages answered into the outage…
    for k in 1..=5 {
        for user in 1..=2 {
            peer.dm(user, &format!("u{user}-m{k}")).await;
            expected.push((user, format!("echo: u{user}-m{k}")));
        }
    }
    let refused = || peer.fake.calls().iter().filter(|c| c.method == "sendmessage" && c.status == 502).count();
    // Every answer is written (the model was asked), and Telegram refused what was tried.
    let answered = eventually(Duration::from_secs(30), || llm.request_count() >= 11 && refused() >= 2).await;
    assert!(answered, "the answers met the outage ({} asked, {} refused)\n{}", llm.request_count(), refused(), gateway.log_text());
    // …the gateway is killed mid-outage and started again…
    gateway.signal(libc::SIGKILL).await;
    let gateway = setup.start().await;
    // …and twenty more arrive while Telegram still refuses every send.
    for k in 6..=10 {
        for user in 1..=4 {
            peer.dm(user, &format!("u{user}-m{k}")).await;
            expected.push((user, format!("echo: u{user}-m{k}")));
        }
    }
    let refused_so_far = refused();
    let later_answered = eventually(Duration::from_secs(60), || llm.request_count() >= 31 && refused() > refused_so_far).await;
    assert!(later_answered, "the later answers met the outage too ({} asked)\n{}", llm.request_count(), gateway.log_text());
    tokio::time::sleep(Duration::from_secs(75).saturating_sub(outage.elapsed())).await;
    peer.fake.clear_faults();

    let all = eventually(Duration::from_secs(180), || {
        let counts = answer_counts(&peer.fake.sent());
        expected.iter().all(|(_, a)| counts.contains_key(a))
    })
    .await;
    let counts = answer_counts(&peer.fake.sent());
    let missing: Vec<&String> = expected.iter().map(|(_, a)| a).filter(|a| !counts.contains_key(*a)).collect();
    assert!(all, "lost through the outage: {missing:?}\n--- log after restart ---\n{}", gateway.log_text());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let sent = peer.fake.sent();
    let doubled: Vec<(String, usize)> = answer_counts(&sent).into_iter().filter(|(_, n)| *n > 1).collect();
    assert!(doubled.is_empty(), "delivered twice: {doubled:?}");
    assert_eq!(answer_counts(&sent).len(), 31, "every answer exactly once");

    for user in 1..=4 {
        let shown: Vec<String> =
            sent.iter().filter(|m| m.chat_id == user_chat(user)).filter_map(|m| read_answer(&m.text)).map(|a| a.0).collect();
        let wanted: Vec<String> = expected.iter().filter(|(u, _)| *u == user).map(|(_, a)| a.clone()).collect();
        assert_eq!(shown, wanted, "user {user}'s answers arrive in the order they were asked");
    }
    // The first ten waited out the whole outage: each says it is late, and why.
    for m in sent.iter().filter(|m| read_answer(&m.text).is_some_and(|(a, _, _)| a.ends_with("-m1") || a.ends_with("-m2"))) {
        assert!(m.text.contains(LATE_NOTE) && m.text.contains("late: Telegram was unreachable."), "a late answer says so: {:?}", m.text);
    }
    assert!(!sent.iter().any(|m| m.text.contains("could not be delivered")), "no give-up notice inside the window");
    assert_eq!(peer.fake.pending_updates(), 0, "every update was confirmed to Telegram");
    let (_, status, _) = setup.run(&["outbox", "list"]);
    assert!(status.contains("Nothing is undelivered"), "no dead letter: {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_storm_fault_mix_twenty_times_in_a_row_loses_and_doubles_nothing() {
    let llm = FakeLlm::start().await;
    let peer = TelegramPeer::start().await;
    let setup = telegram_setup(&llm, &peer, &[]).await;
    let gateway = setup.start().await;
    let (users, per_user) = (5, 2);
    for round in 1..=20u64 {
        peer.fake.clear_faults();
        peer.fake.set_seed(round);
        peer.fake.fail_fraction(FaultScope::Method("sendMessage".into()), 0.1, Fault::ServerError(502));
        peer.fake.fail_fraction(FaultScope::Method("sendMessage".into()), 0.3, Fault::RateLimited { retry_after: 1 });
        let expected: Vec<String> = (1..=per_user).flat_map(|k| (1..=users).map(move |u| format!("echo: r{round}-u{u}-m{k}"))).collect();
        for k in 1..=per_user {
            for u in 1..=users {
                peer.dm(u, &format!("r{round}-u{u}-m{k}")).await;
            }
        }
        let answered = eventually(Duration::from_secs(120), || {
            let counts = answer_counts(&peer.fake.sent());
            expected.iter().all(|a| counts.contains_key(a))
        })
        .await;
        let counts = answer_counts(&peer.fake.sent());
        let missing: Vec<&String> = expected.iter().filter(|a| !counts.contains_key(*a)).collect();
        assert!(answered, "round {round}: lost {missing:?}\n{}", gateway.log_text());
        let doubled: Vec<(&String, &usize)> = counts.iter().filter(|(a, n)| a.contains(&format!("r{round}-")) && **n > 1).collect();
        assert!(doubled.is_empty(), "round {round}: doubled {doubled:?}");
        println!("round {round}: {} answers, none lost, none doubled", expected.len());
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let counts = answer_counts(&peer.fake.sent());
    assert_eq!(counts.len(), 20 * 10);
    assert!(counts.values().all(|n| *n == 1), "nothing doubled late");
    let refused = peer.fake.calls().iter().filter(|c| c.method == "sendmessage" && (c.status == 429 || c.status >= 500)).count();
    assert!(refused >= 60, "the faults really happened: {refused} sends refused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_who_blocked_the_bot_gets_a_dead_letter_that_holds_up_nobody_and_is_resent_by_hand() {
    let llm = FakeLlm::start().await;
    let peer = TelegramPeer::start().await;
    let admin = user_chat(9).to_string();
    let setup = telegram_setup(&llm, &peer, &[("TELEGRAM_ADMIN_USERS", &admin)]).await;
    let gateway = setup.start().await;
    peer.fake.set_blocked(user_chat(5), true);
    peer.dm(5, "are you there?").await;
    let dead = eventually(Duration::from_secs(20), || peer.fake.calls().iter().any(|c| c.method == "sendmessage" && c.status == 403)).await;
    assert!(dead, "the answer met the block\n{}", gateway.log_text());
    // Another chat is answered at once, not after the blocked one.
    let asked = Instant::now();
    peer.dm(6, "and me?").await;
    assert!(eventually(Duration::from_secs(10), || answer_counts(&peer.fake.sent()).contains_key("echo: and me?")).await);
    println!("another chat answered {:?} after asking", asked.elapsed());

    peer.dm(9, "/undelivered").await;
    let listing = || peer.fake.sent_to(user_chat(9)).into_iter().find(|m| m.text.contains("bot was blocked")).map(|m| m.text);
    assert!(
        eventually(Duration::from_secs(20), || listing().is_some()).await,
        "{:?}\n{}",
        peer.fake.sent_to(user_chat(9)),
        gateway.log_text()
    );
    let listing = listing().unwrap_or_default();
    let id: String = listing.split('#').nth(1).map(|rest| rest.chars().take_while(char::is_ascii_digit).collect()).unwrap_or_default();
    assert!(!id.is_empty(), "the listing names an id: {listing}");
    let (_, shell, _) = setup.run(&["outbox", "list"]);
    assert!(shell.contains("bot was blocked") && shell.contains(&id), "the shell lists it too: {shell}");

    // A stranger to admin rights cannot resend it.
    peer.dm(6, &format!("/resend {id}")).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!answer_counts(&peer.fake.sent_to(user_chat(5))).contains_key("echo: are you there?"));

    peer.fake.set_blocked(user_chat(5), false);
    peer.dm(9, &format!("/resend {id}")).await;
    let delivered =
        eventually(Duration::from_secs(20), || answer_counts(&peer.fake.sent_to(user_chat(5))).contains_key("echo: are you there?")).await;
    assert!(delivered, "resent once unblocked\n{}", gateway.log_text());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(answer_counts(&peer.fake.sent_to(user_chat(5))).get("echo: are you there?"), Some(&1), "exactly once");
    let (_, shell, _) = setup.run(&["outbox", "list"]);
    assert!(shell.contains("Nothing is undelivered"), "{shell}");
}
