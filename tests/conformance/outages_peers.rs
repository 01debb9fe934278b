//! Delivery through outages on Discord, Slack, Matrix and email, through the whole process (the
//! Telegram scenarios are in [`crate::outages`]). For each platform, every send is refused for
//! about twenty seconds while two users ask four questions; what the users must notice is that
//! every answer comes once the platform is back, exactly once, in the order they asked, with no
//! mark of a possible repeat and no give-up notice:
//!
//! * Discord (fake): every message create answered `502`.
//! * Slack (fake): every `chat.postMessage` answered `{"ok":false,"error":"service_unavailable"}`.
//! * Matrix (real Synapse behind the fault proxy): every `PUT …/send/m.room.message/{txnId}`
//!   answered `502 Bad Gateway`, as a reverse proxy in front of an unreachable homeserver does.
//! * Email (real Postfix behind an SMTP relay that can refuse): every recipient refused with a
//!   greylisting `451`; and, separately, a `550` refusal that makes a dead letter at once instead
//!   of retries, and holds up no later answer.

use crate::discord::DiscordPeer;
use crate::email_peer::EmailPeer;
use crate::matrix_peer::MatrixPeer;
use crate::outages::{LATE_NOTE, read_answer};
use crate::peer::{Chat, ChatPeer};
use crate::slack::SlackPeer;
use crate::support::{Gateway, Setup, eventually, open_db};
use hermes_fakes::FakeLlm;
use hermes_fakes::proxy::Canned;
use hermes_fakes::smtp_proxy::SmtpFaultProxy;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// What queue mode answers a message that arrives while the chat's turn is still busy (here, still
/// waiting for its answer to be delivered).
const QUEUED_ACK: &str = "⏳ Queued for the next turn.";
/// How long each platform refuses every send.
const OUTAGE: Duration = Duration::from_secs(20);
/// The longest wait for the answers after the platform is back: the last retry before the end of
/// the outage was scheduled up to 16 s (±20 %) after the one before it.
const RECOVERY: Duration = Duration::from_secs(45);

/// The gateway's own log lines (the client libraries' are many, and say nothing about delivery).
fn gateway_lines(gateway: &Gateway) -> String {
    let log = gateway.log_text();
    log.lines().filter(|l| l.contains(" hermes::") || l.contains(" hermes_")).collect::<Vec<_>>().join("\n")
}

/// Dead letters in the gateway's outbox, with why each was given up.
fn dead_letters(setup: &Setup) -> Vec<String> {
    let db = open_db(&setup.state_db());
    let mut rows = db.prepare("SELECT error FROM outbox WHERE state = 'dead'").expect("the outbox table");
    rows.query_map([], |r| r.get::<_, Option<String>>(0)).expect("read the outbox").map(|r| r.ok().flatten().unwrap_or_default()).collect()
}

/// The gateway with only `peer`'s platform (and the API server, for health), `env` set after the
/// peer's own; queue mode, so every message gets its own answer however fast users write.
async fn start<P: ChatPeer>(llm: &FakeLlm, peer: &P, env: &[(&str, String)]) -> (Setup, Gateway) {
    let mut setup = Setup::new(&llm.base_url());
    setup.set("WEBHOOK_ENABLED", "false");
    let platforms = peer.configure(&mut setup);
    for (key, value) in env {
        setup.set(key, value);
    }
    setup.write_config(&format!("platforms:\n{platforms}\ndisplay:\n  busy_input_mode: queue\n"));
    let gateway = setup.start().await;
    (setup, gateway)
}

/// What a test does to its platform's sends.
struct Sends<'a> {
    /// Refuse every send (transiently) from now on.
    fail: &'a dyn Fn(),
    /// Let sends through again.
    mend: &'a dyn Fn(),
    /// Sends refused so far.
    refused: &'a dyn Fn() -> usize,
}

/// Two users get an answer; every send is refused for [`OUTAGE`] while they ask two more
/// questions each; then every answer arrives, once, in order, unmarked.
async fn answers_wait_out_an_outage<P: ChatPeer>(peer: &P, setup: &Setup, gateway: &Gateway, sends: Sends<'_>) {
    let users = [1, 2];
    let mut chats: Vec<Chat> = Vec::new();
    let mut expected: HashMap<String, Vec<String>> = HashMap::new();
    // Up and answering both users before the platform breaks (their chats exist by then too).
    for user in users {
        let chat = peer.dm(user, &format!("u{user}-before")).await;
        expected.entry(chat.chat_id.clone()).or_default().push(format!("echo: u{user}-before"));
        chats.push(chat);
    }
    let answered = |chats: &[Chat]| -> Vec<String> {
        chats.iter().flat_map(|c| peer.posted(c)).filter_map(|m| read_answer(&m.text)).map(|(a, _, _)| a).collect()
    };
    let all_answered = |wanted: &HashMap<String, Vec<String>>| {
        let shown = answered(&chats);
        wanted.values().flatten().all(|a| shown.contains(a))
    };
    let up = eventually(Duration::from_secs(40), || all_answered(&expected)).await;
    assert!(up, "{}: answering before the outage: {:?}\n{}", P::PLATFORM, answered(&chats), gateway_lines(gateway));

    (sends.fail)();
    let outage = Instant::now();
    let refused_before = (sends.refused)();
    for k in 1..=2 {
        for (user, chat) in users.iter().zip(&chats) {
            let asked = peer.dm(*user, &format!("u{user}-m{k}")).await;
            assert_eq!(&asked, chat, "one chat per user");
            expected.entry(chat.chat_id.clone()).or_default().push(format!("echo: u{user}-m{k}"));
        }
    }
    let met = eventually(OUTAGE, || (sends.refused)() >= refused_before + users.len()).await;
    let refused = (sends.refused)() - refused_before;
    assert!(met, "{}: both chats' answers met the outage ({refused} refused)\n{}", P::PLATFORM, gateway_lines(gateway));
    tokio::time::sleep(OUTAGE.saturating_sub(outage.elapsed())).await;
    let during = answered(&chats).into_iter().filter(|a| !a.ends_with("-before")).collect::<Vec<_>>();
    assert!(during.is_empty(), "{}: nothing got through the outage: {during:?}", P::PLATFORM);
    let refused = (sends.refused)() - refused_before;
    // A passing outage is waited out: nothing is given up for it.
    let dead = dead_letters(setup);
    assert!(dead.is_empty(), "{}: answers given up during a passing outage: {dead:#?}\n{}", P::PLATFORM, gateway_lines(gateway));
    (sends.mend)();
    let mended = Instant::now();

    let back = eventually(RECOVERY, || all_answered(&expected)).await;
    let recovered_in = mended.elapsed();
    let shown = answered(&chats);
    let missing: Vec<&String> = expected.values().flatten().filter(|a| !shown.contains(a)).collect();
    assert!(back, "{}: lost through the outage: {missing:?}\n--- gateway log ---\n{}", P::PLATFORM, gateway_lines(gateway));
    // Late copies would come within a retry or two.
    tokio::time::sleep(Duration::from_secs(3)).await;
    for chat in &chats {
        let posted = peer.posted(chat);
        let texts: Vec<&String> = posted.iter().map(|m| &m.text).collect();
        let read: Vec<(String, bool, bool)> = posted.iter().filter_map(|m| read_answer(&m.text)).collect();
        let acks = posted.iter().filter(|m| m.text.starts_with(QUEUED_ACK)).count();
        assert_eq!(read.len() + acks, posted.len(), "{}: nothing but answers in {}: {texts:#?}", P::PLATFORM, chat.chat_id);
        let order: Vec<&String> = read.iter().map(|(a, _, _)| a).collect();
        let wanted: Vec<&String> = expected[&chat.chat_id].iter().collect();
        assert_eq!(order, wanted, "{}: every answer once, in the order asked, in {}", P::PLATFORM, chat.chat_id);
        // A refused send never reached the platform: nothing is in doubt, so nothing is marked.
        assert!(read.iter().all(|(_, marked, _)| !marked), "{}: no answer marked as a possible repeat: {texts:#?}", P::PLATFORM);
        let note_where_late = posted.iter().all(|m| !m.text.starts_with(LATE_NOTE) || m.text.contains("was unreachable."));
        assert!(note_where_late, "{}: a late note says why: {texts:#?}", P::PLATFORM);
    }
    let (_, listed, _) = setup.run(&["outbox", "list"]);
    let clear = listed.contains("Nothing is undelivered.") && listed.contains("nothing waits to be delivered");
    assert!(clear, "{}: the operator finds nothing undelivered and nothing waiting: {listed}", P::PLATFORM);
    println!(
        "{}: {refused} sends refused during a {:?} outage; every answer arrived {:.1} s after it ended",
        P::PLATFORM,
        OUTAGE,
        recovered_in.as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discord_answers_wait_out_20_s_of_502s_and_arrive_once_in_order() {
    use hermes_fakes::discord::{Fault, FaultScope};
    let llm = FakeLlm::start().await;
    let peer = DiscordPeer::start().await;
    let (setup, gateway) = start(&llm, &peer, &[]).await;
    let sends = Sends {
        fail: &|| peer.fake.fail_fraction(FaultScope::Create, 1.0, Fault::ServerError(502)),
        mend: &|| peer.fake.clear_faults(),
        refused: &|| {
            let creates = peer.fake.calls().into_iter().filter(|c| c.method == "POST" && c.path.ends_with("/messages"));
            creates.filter(|c| c.status == 502).count()
        },
    };
    answers_wait_out_an_outage(&peer, &setup, &gateway, sends).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slack_answers_wait_out_20_s_of_service_unavailable_and_arrive_once_in_order() {
    use hermes_fakes::slack::{SlFault, SlScope};
    let llm = FakeLlm::start().await;
    let peer = SlackPeer::start().await;
    let (setup, gateway) = start(&llm, &peer, &[]).await;
    // Slack's own word for a passing outage (HTTP 200, `ok: false`): nothing was posted, so the
    // answer is plainly retried (a 5xx would leave it in doubt and be looked up first).
    let sends = Sends {
        fail: &|| peer.fake.fail_fraction(SlScope::PostMessage, 1.0, SlFault::Refused("service_unavailable".into())),
        mend: &|| peer.fake.clear_faults(),
        refused: &|| {
            let posts = peer.fake.calls().into_iter().filter(|c| c.method == "chat.postMessage");
            posts.filter(|c| c.error.as_deref() == Some("service_unavailable")).count()
        },
    };
    answers_wait_out_an_outage(&peer, &setup, &gateway, sends).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matrix_answers_wait_out_20_s_of_a_502_gateway_in_front_of_synapse_and_arrive_once_in_order() {
    let llm = FakeLlm::start().await;
    let peer = MatrixPeer::start().await;
    let (setup, gateway) = start(&llm, &peer, &[]).await;
    const SEND: &str = "/send/m.room.message/";
    // What nginx in front of a homeserver that is down answers: not the homeserver's JSON.
    let bad_gateway = Canned { status: 502, body: "<html><head><title>502 Bad Gateway</title></head></html>".into() };
    let sends = Sends {
        fail: &|| peer.proxy.refuse_next("PUT", SEND, usize::MAX, bad_gateway.clone()),
        mend: &|| peer.proxy.stop_refusing(),
        refused: &|| peer.proxy.seen("PUT", SEND).iter().filter(|r| r.status == 502).count(),
    };
    answers_wait_out_an_outage(&peer, &setup, &gateway, sends).await;
}

/// The test Postfix, and a relay in front of it that the gateway sends through.
async fn smtp_relay() -> SmtpFaultProxy {
    let port: u16 = crate::email::peer().smtp_port.parse().expect("HERMES_TEST_SMTP_PORT is a port");
    SmtpFaultProxy::start(SocketAddr::from(([127, 0, 0, 1], port))).await.expect("start the SMTP relay")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn email_answers_wait_out_20_s_of_451_refusals_and_arrive_once_in_order() {
    let llm = FakeLlm::start().await;
    let peer = EmailPeer::start().await;
    let relay = smtp_relay().await;
    let (setup, gateway) = start(&llm, &peer, &[("EMAIL_SMTP_PORT", relay.port().to_string())]).await;
    // Greylisting's answer: try again later. (A 421 would be "the server is too busy", which the
    // adapter waits out for a minute; 451 is this message's own trouble.)
    let sends = Sends {
        fail: &|| relay.refuse_recipients("451 4.7.1 Recipient address rejected: Greylisted, try again later"),
        mend: &|| relay.pass(),
        refused: &|| relay.refused(),
    };
    answers_wait_out_an_outage(&peer, &setup, &gateway, sends).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn email_550_refusal_makes_a_dead_letter_at_once_that_holds_up_no_later_answer() {
    let llm = FakeLlm::start().await;
    let peer = EmailPeer::start().await;
    let relay = smtp_relay().await;
    let (setup, gateway) = start(&llm, &peer, &[("EMAIL_SMTP_PORT", relay.port().to_string())]).await;
    let chat = peer.dm(1, "before").await;
    let answered = |text: &str| peer.posted(&chat).iter().filter(|m| m.text == text).count();
    assert!(eventually(Duration::from_secs(40), || answered("echo: before") == 1).await, "{}", gateway.log_text());

    relay.refuse_recipients("550 5.1.1 Recipient address rejected: User unknown in virtual mailbox table");
    peer.dm(1, "doomed").await;
    let given_up = eventually(Duration::from_secs(40), || dead_letters(&setup).len() == 1).await;
    assert!(given_up, "the refused answer became a dead letter\n{}", gateway.log_text());
    let reason = dead_letters(&setup).concat();
    assert!(reason.contains("550"), "the dead letter names the refusal: {reason}");
    let (_, listed, _) = setup.run(&["outbox", "list"]);
    assert!(listed.contains("550") && listed.contains("echo: doomed"), "the operator finds it, and why: {listed}");
    assert!(gateway.log_text().contains("message given up"), "the log says it was given up:\n{}", gateway.log_text());
    // Long enough for the first retries of a transient failure (1 s, then 2 s): none comes.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(relay.refused(), 1, "a permanent refusal is not retried");

    relay.pass();
    peer.dm(1, "after").await;
    assert!(eventually(Duration::from_secs(40), || answered("echo: after") == 1).await, "{}", gateway.log_text());
    let texts: Vec<String> = peer.posted(&chat).into_iter().map(|m| m.text).collect();
    assert_eq!(texts, ["echo: before", "echo: after"], "the dead letter was not sent later, and held up nothing");
    assert_eq!(dead_letters(&setup).len(), 1, "one dead letter");
}
