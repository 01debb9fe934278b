//! Email as people really connect: IMAP over implicit TLS and STARTTLS, SMTP over implicit TLS
//! (SMTPS) and STARTTLS (submission), against the real Dovecot and Postfix of
//! tests/peers/mail.sh, whose certificate a throwaway test CA signed for `localhost` and
//! 127.0.0.1 (the submission ports take mail only after a login, and a login only over TLS).
//! Certificate checks are on: a server signed by another CA, or reached under a name its
//! certificate lacks (127.0.0.2), is refused with a message naming the server, the problem and
//! the setting to change, in `gateway status` and `/readyz`; clear text is refused off loopback.
//!
//! And a connection whose peer stops answering (a [`StallProxy`] that stops relaying without
//! closing) is noticed within `EMAIL_DEAD_AFTER`, shown as down, and replaced; mail that arrived
//! meanwhile is answered once.

use crate::email::{self, MailPeer};
use crate::support::{Gateway, Setup, eventually, free_port};
use hermes_fakes::FakeLlm;
use hermes_fakes::stall_proxy::StallProxy;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);

/// The TLS side of the mail peer (tests/peers/mail.sh exports it).
struct TlsPeer {
    imap_port: String,
    imaps_port: String,
    submission_port: String,
    smtps_port: String,
    /// The test CA that signed the servers' certificate.
    ca: String,
    /// A CA that signed nothing the servers present.
    other_ca: String,
    /// A loopback address the servers listen on that their certificate does not name.
    wrong_host: String,
}

fn tls_peer() -> TlsPeer {
    let var = |name: &str| {
        std::env::var(name).ok().filter(|v| !v.is_empty()).unwrap_or_else(|| {
            panic!("{name} is not set: run the tests through tests/peers/run.sh (e.g. `tests/peers/run.sh cargo test --test conformance email_tls`)")
        })
    };
    TlsPeer {
        imap_port: var("HERMES_TEST_IMAP_PORT"),
        imaps_port: var("HERMES_TEST_IMAPS_PORT"),
        submission_port: var("HERMES_TEST_SUBMISSION_PORT"),
        smtps_port: var("HERMES_TEST_SMTPS_PORT"),
        ca: var("HERMES_TEST_MAIL_CA"),
        other_ca: var("HERMES_TEST_MAIL_OTHER_CA"),
        wrong_host: var("HERMES_TEST_MAIL_WRONG_NAME_HOST"),
    }
}

/// A gateway with email as `bot` allowing `allowed`, the peer's loopback settings overridden by
/// `env`, and the admin listener (for `/readyz`) on a free port.
struct Running {
    setup: Setup,
    gateway: Gateway,
    readyz: String,
    _llm: FakeLlm,
}

async fn start(peer: &MailPeer, bot: &(String, String), allowed: &str, env: &[(&str, &str)]) -> Running {
    start_with(peer, bot, allowed, env, "").await
}

/// `start`, with more of the config file (`extra_yaml`, top-level keys).
async fn start_with(peer: &MailPeer, bot: &(String, String), allowed: &str, env: &[(&str, &str)], extra_yaml: &str) -> Running {
    let llm = FakeLlm::start().await;
    let mut setup = Setup::new(&llm.base_url());
    setup.set("WEBHOOK_ENABLED", "false");
    peer.configure(&mut setup, bot, allowed);
    for (key, value) in env {
        setup.set(key, value);
    }
    let admin = free_port();
    setup.write_config(&format!("gateway:\n  admin_port: {admin}\n{extra_yaml}"));
    let gateway = setup.start().await;
    Running { setup, gateway, readyz: format!("http://127.0.0.1:{admin}/readyz"), _llm: llm }
}

impl Running {
    fn status(&self) -> String {
        let (_, out, err) = self.setup.run(&["gateway", "status"]);
        format!("{out}{err}")
    }

    async fn readyz(&self) -> (u16, String) {
        match reqwest::get(&self.readyz).await {
            Ok(r) => (r.status().as_u16(), r.text().await.unwrap_or_default()),
            Err(e) => (0, e.to_string()),
        }
    }

    /// Wait until `/readyz` answers `want`; the last answer.
    async fn wait_ready(&self, want: u16) -> (u16, String) {
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            let answer = self.readyz().await;
            if answer.0 == want || std::time::Instant::now() > deadline {
                return answer;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Wait until the email adapter is parked and `gateway status` says all of `words`; the
    /// status and `/readyz`'s body.
    async fn wait_parked(&self, words: &[&str]) -> (String, String) {
        let parked = eventually(WAIT, || {
            let status = self.status();
            status.contains("email: parked") && words.iter().all(|w| status.contains(w))
        })
        .await;
        let status = self.status();
        assert!(parked, "parked, saying {words:?}:\n{status}\n--- gateway log ---\n{}", self.gateway.log_text());
        let (code, body) = self.readyz().await;
        assert_eq!(code, 503, "not ready while the adapter is parked: {body}");
        (status, body)
    }
}

/// alice mails the bot; the answer arrives, threaded, through the configured servers.
async fn round_trip(peer: &MailPeer, running: &Running, bot: &str, alice: &(String, String), tag: &str) {
    let connected = eventually(WAIT, || running.gateway.log_text().contains("connected to the mailbox")).await;
    assert!(connected, "the adapter reached the mailbox:\n{}", running.gateway.log_text());
    let id = format!("<{tag}@example.test>");
    peer.send_authenticated(&alice.0, bot, "Over TLS", &id, &format!("hello over {tag}"), &[]);
    let mails = peer.wait_mails(&alice.0, &alice.1, 1, &running.gateway).await;
    assert_eq!(mails[0].header("In-Reply-To").as_deref(), Some(id.as_str()), "{:?}", mails[0]);
    assert!(mails[0].raw.contains("echo: [Subject: Over TLS]") && mails[0].raw.contains(&format!("hello over {tag}")), "{}", mails[0].raw);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn email_reads_imaps_and_answers_through_smtps_over_implicit_tls() {
    let (peer, tls) = (email::peer(), tls_peer());
    let (bot, alice) = (peer.account("bot"), peer.account("alice"));
    let env = [
        ("EMAIL_TLS", "tls"),
        // A DNS name for IMAP and an address for SMTP: the certificate names both.
        ("EMAIL_IMAP_HOST", "localhost"),
        ("EMAIL_IMAP_PORT", tls.imaps_port.as_str()),
        ("EMAIL_SMTP_PORT", tls.smtps_port.as_str()),
        ("EMAIL_CA_FILE", tls.ca.as_str()),
    ];
    let running = start(&peer, &bot, &alice.0, &env).await;
    round_trip(&peer, &running, &bot.0, &alice, "implicit-tls").await;
    let (code, body) = running.wait_ready(200).await;
    assert_eq!(code, 200, "ready over TLS: {body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn email_reads_imap_and_answers_through_submission_over_starttls() {
    let (peer, tls) = (email::peer(), tls_peer());
    let (bot, alice) = (peer.account("bot"), peer.account("alice"));
    let env = [
        ("EMAIL_TLS", "starttls"),
        ("EMAIL_IMAP_PORT", tls.imap_port.as_str()),
        ("EMAIL_SMTP_HOST", "localhost"),
        ("EMAIL_SMTP_PORT", tls.submission_port.as_str()),
        ("EMAIL_CA_FILE", tls.ca.as_str()),
    ];
    let running = start(&peer, &bot, &alice.0, &env).await;
    round_trip(&peer, &running, &bot.0, &alice, "starttls").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_from_a_ca_not_trusted_is_refused_naming_the_server_and_the_fix() {
    let (peer, tls) = (email::peer(), tls_peer());
    let bot = peer.account("bot");
    let imaps = [("EMAIL_TLS", "tls"), ("EMAIL_IMAP_PORT", tls.imaps_port.as_str()), ("EMAIL_SMTP_PORT", tls.smtps_port.as_str())];

    // No CA file: the system's CAs do not know the test CA.
    let running = start(&peer, &bot, "alice@example.test", &imaps).await;
    // Both servers are refused; whichever is tried first is named.
    let server = "server 127.0.0.1:";
    let (_, body) = running.wait_parked(&[server, "a CA this machine does not trust", "set EMAIL_CA_FILE"]).await;
    assert!(body.contains("does not trust"), "/readyz says why: {body}");
    drop(running);

    // A CA file of another CA.
    let env: Vec<(&str, &str)> = imaps.iter().copied().chain([("EMAIL_CA_FILE", tls.other_ca.as_str())]).collect();
    let running = start(&peer, &bot, "alice@example.test", &env).await;
    running.wait_parked(&[server, &format!("the CA in EMAIL_CA_FILE ({}) did not sign", tls.other_ca)]).await;
    let log = running.gateway.log_text();
    assert!(!log.contains("connected to the mailbox") && log.contains("did not sign"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_for_another_name_is_refused_for_imap_and_for_smtp() {
    let (peer, tls) = (email::peer(), tls_peer());
    let bot = peer.account("bot");
    let base = [
        ("EMAIL_TLS", "starttls"),
        ("EMAIL_IMAP_PORT", tls.imap_port.as_str()),
        ("EMAIL_SMTP_PORT", tls.submission_port.as_str()),
        ("EMAIL_CA_FILE", tls.ca.as_str()),
    ];
    // IMAP reached under an address the certificate does not name (STARTTLS: after the upgrade).
    let env: Vec<(&str, &str)> = base.iter().copied().chain([("EMAIL_IMAP_HOST", tls.wrong_host.as_str())]).collect();
    let running = start(&peer, &bot, "alice@example.test", &env).await;
    let imap = format!("IMAP server {}:{}", tls.wrong_host, tls.imap_port);
    let name = format!("not valid for the name `{}` (it names localhost, 127.0.0.1)", tls.wrong_host);
    running.wait_parked(&[&imap, &name, "set EMAIL_IMAP_HOST"]).await;
    drop(running);

    // IMAP fine, SMTP under the wrong name: refused as the adapter starts, not at the first answer.
    let env: Vec<(&str, &str)> = base.iter().copied().chain([("EMAIL_SMTP_HOST", tls.wrong_host.as_str())]).collect();
    let running = start(&peer, &bot, "alice@example.test", &env).await;
    let smtp = format!("SMTP server {}:{}", tls.wrong_host, tls.submission_port);
    running.wait_parked(&[&smtp, &name, "set EMAIL_SMTP_HOST"]).await;
}

/// `hermes gateway run` with email configured by `env` (no peer needed: refused before any
/// connection): exit status and stderr.
fn refused_config(env: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut setup = Setup::new("http://127.0.0.1:9/v1");
    setup.set("WEBHOOK_ENABLED", "false");
    for (key, value) in [
        ("EMAIL_ADDRESS", "bot@example.test"),
        ("EMAIL_PASSWORD", "a-secret-password"),
        ("EMAIL_IMAP_HOST", "127.0.0.1"),
        ("EMAIL_SMTP_HOST", "127.0.0.1"),
        ("EMAIL_AUTHSERV_ID", email::AUTHSERV),
    ] {
        setup.set(key, value);
    }
    for (key, value) in env {
        setup.set(key, value);
    }
    setup.write_config("");
    let (status, stdout, stderr) = setup.run(&["gateway", "run"]);
    assert!(!stderr.contains("a-secret-password") && !stdout.contains("a-secret-password"), "the password is never shown");
    (status.code(), stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clear_text_off_loopback_and_an_unusable_ca_file_are_refused_naming_the_key() {
    // The password would cross the network in clear text.
    for (imap, smtp) in [("imap.example.com", "127.0.0.1"), ("127.0.0.1", "smtp.example.com")] {
        let (code, stderr) = refused_config(&[("EMAIL_TLS", "none"), ("EMAIL_IMAP_HOST", imap), ("EMAIL_SMTP_HOST", smtp)]);
        assert_eq!(code, Some(78), "{imap}/{smtp}: {stderr}");
        assert!(stderr.contains("platforms.email.tls") && stderr.contains("EMAIL_TLS=none"), "{stderr}");
    }
    // A CA file that is missing, not PEM, or PEM without a certificate (a private key).
    let dir = tempfile::tempdir().unwrap();
    let not_pem = dir.path().join("ca.txt");
    std::fs::write(&not_pem, "just some words\n").unwrap();
    let key_only = dir.path().join("key.pem");
    std::fs::write(&key_only, "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n").unwrap();
    let missing = dir.path().join("missing.pem");
    for (path, says) in [(&missing, "cannot read the CA file"), (&not_pem, "no `BEGIN CERTIFICATE`"), (&key_only, "no `BEGIN CERTIFICATE`")]
    {
        let path = path.to_string_lossy();
        let (code, stderr) = refused_config(&[("EMAIL_TLS", "tls"), ("EMAIL_CA_FILE", &path)]);
        assert_eq!(code, Some(78), "{path}: {stderr}");
        assert!(stderr.contains("platforms.email.ca_file") && stderr.contains(says) && stderr.contains(&*path), "{stderr}");
    }
    // A dead-connection limit above two minutes would hide a dead connection longer than promised.
    let (code, stderr) = refused_config(&[("EMAIL_TLS", "tls"), ("EMAIL_DEAD_AFTER", "600")]);
    assert_eq!(code, Some(78), "{stderr}");
    assert!(stderr.contains("dead_after") && stderr.contains("EMAIL_DEAD_AFTER"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_imap_connection_is_noticed_shown_down_replaced_and_nothing_is_answered_twice() {
    silent_connection_is_replaced("").await;
}

/// Without IDLE the connection goes silent in the middle of a command (a poll's NOOP or FETCH),
/// not while idling: that too must be noticed within `dead_after`, not the minute a network
/// step may otherwise take.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_silent_mid_command_is_noticed_within_dead_after_too() {
    silent_connection_is_replaced("platforms:\n  email:\n    idle: false\n    poll_interval: 1\n").await;
}

async fn silent_connection_is_replaced(extra_yaml: &str) {
    let (peer, tls) = (email::peer(), tls_peer());
    let (bot, alice) = (peer.account("bot"), peer.account("alice"));
    let imaps: u16 = tls.imaps_port.parse().unwrap();
    let proxy = StallProxy::start(([127, 0, 0, 1], imaps).into()).await.unwrap();
    let proxy_port = proxy.port().to_string();
    let env = [
        ("EMAIL_TLS", "tls"),
        ("EMAIL_IMAP_PORT", proxy_port.as_str()),
        ("EMAIL_SMTP_PORT", tls.smtps_port.as_str()),
        ("EMAIL_CA_FILE", tls.ca.as_str()),
        // Short, so the test need not wait the default two minutes.
        ("EMAIL_DEAD_AFTER", "4"),
    ];
    let running = start_with(&peer, &bot, &alice.0, &env, extra_yaml).await;
    round_trip(&peer, &running, &bot.0, &alice, "before-the-silence").await;
    let (code, body) = running.wait_ready(200).await;
    assert_eq!(code, 200, "{body}");

    // The path to the server goes silent: nothing closes, nothing answers, and the server stays
    // out of reach until thawed.
    proxy.freeze();
    let frozen_at = std::time::Instant::now();
    let (code, body) = running.wait_ready(503).await;
    // For the record (not asserted: speed belongs to benches).
    println!("the silent connection was noticed after {:?} (EMAIL_DEAD_AFTER=4)", frozen_at.elapsed());
    assert_eq!(code, 503, "not ready once the connection went silent: {body}\n{}", running.gateway.log_text());
    // In IDLE the silence is named as such; mid-command, the command names the limit it hit.
    let noticed = eventually(WAIT, || {
        let log = running.gateway.log_text();
        log.contains("the IMAP server stopped answering") || log.contains("no answer within 4s")
    })
    .await;
    assert!(noticed, "{}", running.gateway.log_text());
    let shown = eventually(WAIT, || {
        let status = running.status();
        status.contains("email: starting") && status.contains("reconnecting")
    })
    .await;
    assert!(shown, "gateway status shows email down and why:\n{}", running.status());

    // Mail that arrives meanwhile waits in the mailbox.
    peer.send_authenticated(&alice.0, &bot.0, "Re: Over TLS", "<during@example.test>", "did you miss me?", &[]);
    let relayed = proxy.relayed();
    proxy.thaw();
    let (code, body) = running.wait_ready(200).await;
    assert_eq!(code, 200, "ready again on a new connection: {body}\n{}", running.gateway.log_text());
    assert!(proxy.relayed() > relayed, "a new connection replaced the silent one");
    let mails = peer.wait_mails(&alice.0, &alice.1, 2, &running.gateway).await;
    assert_eq!(mails[1].header("In-Reply-To").as_deref(), Some("<during@example.test>"));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let answers = peer.mails(&alice.0, &alice.1);
    assert_eq!(answers.len(), 2, "each mail answered once: {answers:#?}");
}
