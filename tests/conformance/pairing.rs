//! DM pairing, as a stranger and the bot's owner meet it on Telegram: with no allowlist a
//! stranger's DM is answered with a code and nothing they write reaches the model; the owner
//! approves the code with the real `hermes pairing approve` (or, as an admin, with `/pair approve`
//! in chat) and the stranger's next message is answered — no restart. The limits hold: one code
//! per user per 10 minutes (silence in between), three pending codes, a lockout after five wrong
//! codes that refuses even the right one. With an allowlist, strangers hear nothing at all.

use crate::peer::{Chat, ChatPeer};
use crate::suite::{Run, launch_with, settle};
use crate::support::{count, eventually, open_db};
use crate::telegram::{GROUP, TelegramPeer};
use hermes_fakes::telegram::TgUser;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

const TOO_MANY: &str = "Too many pairing requests right now~ Please try again later!";

/// No allowlist for Telegram: `TELEGRAM_ALLOWED_USERS=` as an owner leaves it in `.env`.
async fn launch_without_allowlist(extra_env: &[(&str, &str)]) -> Run<TelegramPeer> {
    let mut env = vec![("TELEGRAM_ALLOWED_USERS", "")];
    env.extend_from_slice(extra_env);
    launch_with::<TelegramPeer>("", &env).await
}

fn dm(id: i64) -> Chat {
    Chat { chat_id: id.to_string(), thread_id: None }
}

/// The code in a pairing reply, checked against the whole reply as the user sees it.
fn code_of(text: &str) -> String {
    let start = text.find("pairing code: ").map(|i| i + "pairing code: ".len()).unwrap_or_else(|| panic!("no code in {text:?}"));
    let code: String = text[start..].chars().take(8).collect();
    let expected = format!(
        "Hi~ I don't recognize you yet!\n\nHere's your pairing code: {code}\n\nAsk the bot owner to run:\nhermes pairing approve telegram {code}"
    );
    assert_eq!(text, expected, "the pairing reply as displayed");
    assert!(code.bytes().all(|b| b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789".contains(&b)), "{code}");
    code
}

/// `user` DMs the bot and is sent a code; returns it.
async fn ask_for_code(run: &Run<TelegramPeer>, user: &TgUser, text: &str) -> String {
    run.peer.fake.dm(user, text);
    let posted = run.wait(&dm(user.id), "a pairing code", |p| !p.is_empty()).await;
    assert_eq!(posted.len(), 1, "{posted:#?}");
    code_of(&posted[0].text)
}

/// Wait until the gateway has finished `n` inbox rows: every message so far has been decided.
async fn handled(run: &Run<TelegramPeer>, n: i64) {
    let db = open_db(&run._setup.state_db());
    let done = eventually(Duration::from_secs(20), || count(&db, "SELECT count(*) FROM inbox WHERE state = 'done'", []) >= n).await;
    assert!(done, "{n} messages were not all handled:\n{}", run.gateway.log_text());
    settle().await;
}

fn pairing(run: &Run<TelegramPeer>, args: &[&str]) -> (bool, String, String) {
    let mut full = vec!["pairing"];
    full.extend_from_slice(args);
    let (status, out, err) = run._setup.run(&full);
    (status.success(), out, err)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stranger_gets_a_code_and_once_approved_is_answered_without_a_restart() {
    let run = launch_without_allowlist(&[]).await;
    let fake = &run.peer.fake;
    let stranger = TgUser::named(6001, "Mallory", None);
    let code = ask_for_code(&run, &stranger, "hello, who are you?").await;

    // Asking again within ten minutes: silence, not a second code.
    fake.dm(&stranger, "are you there?");
    // In a group the stranger is ignored, mentioned or not.
    fake.group_message(GROUP, &stranger, &format!("@{} hi from the group", fake.bot_username()));
    handled(&run, 3).await;
    assert_eq!(run.peer.posted(&dm(stranger.id)).len(), 1, "one reply, the code");
    assert!(fake.sent_to(GROUP).is_empty(), "nothing said in the group");
    assert!(run.llm.requests().is_empty(), "nothing a stranger wrote reached the model");

    let (ok, listing, _) = pairing(&run, &["list"]);
    assert!(ok && listing.contains("6001") && listing.contains("Mallory"), "{listing}");
    assert!(!listing.contains(&code), "`pairing list` never shows a code:\n{listing}");
    let dir = run._setup.home.path().join("platforms/pairing");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600, "{}", path.display());
        assert!(!String::from_utf8_lossy(&std::fs::read(&path).unwrap()).contains(&code), "{} holds the code", path.display());
    }

    let (ok, out, err) = pairing(&run, &["approve", "telegram", &code.to_ascii_lowercase()]);
    assert!(ok, "approve with the right code: {out}{err}");
    assert!(out.contains("Approved Mallory (user id 6001) on telegram"), "{out}");
    fake.dm(&stranger, "now?");
    run.wait_text(&dm(stranger.id), "echo: now?").await;
    assert_eq!(run.llm.requests().len(), 1, "only the message after the approval reached the model");

    let (ok, out, err) = pairing(&run, &["revoke", "telegram", "6001"]);
    assert!(ok, "{out}{err}");
    fake.dm(&stranger, "still here?");
    handled(&run, 5).await;
    assert_eq!(run.llm_asked("still here?"), 0, "revoked without a restart");
    assert_eq!(run.peer.posted(&dm(stranger.id)).len(), 2, "the revoked user hears nothing (asked for a code minutes ago)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_codes_wait_at_most_and_five_wrong_codes_lock_out_even_the_right_one() {
    let run = launch_without_allowlist(&[]).await;
    let fake = &run.peer.fake;
    let mut codes = Vec::new();
    for (i, name) in ["Ann", "Ben", "Cat"].into_iter().enumerate() {
        codes.push(ask_for_code(&run, &TgUser::named(6001 + i as i64, name, None), "hi").await);
    }
    let fourth = TgUser::named(6004, "Dan", None);
    fake.dm(&fourth, "me too");
    run.wait_text(&dm(fourth.id), TOO_MANY).await;
    fake.dm(&fourth, "please?");
    handled(&run, 5).await;
    assert_eq!(run.peer.posted(&dm(fourth.id)).len(), 1, "told once, then silence");

    for attempt in 1..=5 {
        let (ok, out, err) = pairing(&run, &["approve", "telegram", "WRONGCOD"]);
        assert!(!ok, "attempt {attempt}: a wrong code is refused: {out}");
        assert!(err.contains("`WRONGCOD` is not a pending pairing code for telegram"), "attempt {attempt}: {err}");
    }
    let (ok, out, err) = pairing(&run, &["approve", "telegram", &codes[0]]);
    assert!(!ok, "the right code during the lockout is refused: {out}");
    assert!(err.contains("pairing approvals for telegram are locked for another 60 min after 5 failed attempts"), "{err}");

    fake.dm(&TgUser::named(6001, "Ann", None), "am I in?");
    handled(&run, 6).await;
    assert!(run.llm.requests().is_empty(), "no stranger reached the model");
    assert_eq!(run.peer.posted(&dm(6001)).len(), 1, "Ann still has only her code");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_an_allowlist_strangers_get_no_answer_at_all() {
    let run = launch_with::<TelegramPeer>("", &[("TELEGRAM_ALLOWED_USERS", "5001")]).await;
    let fake = &run.peer.fake;
    fake.dm(&TgUser::named(6001, "Mallory", None), "hello?");
    fake.dm(&TgUser::named(5001, "Owner", None), "owner here");
    run.wait_text(&dm(5001), "echo: owner here").await;
    handled(&run, 2).await;
    assert!(fake.sent_to(6001).is_empty(), "no code, no refusal: {:#?}", fake.sent_to(6001));
    assert!(!run._setup.home.path().join("platforms/pairing/telegram-pending.json").exists(), "no code was issued");
    assert_eq!(run.llm.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_approves_a_code_in_chat_and_a_member_cannot() {
    const ADMIN: i64 = 5001;
    let run = launch_without_allowlist(&[("TELEGRAM_ADMIN_USERS", "5001")]).await;
    let fake = &run.peer.fake;
    // The owner pairs themselves from the command line first.
    let admin = TgUser::named(ADMIN, "Owner", None);
    let code = ask_for_code(&run, &admin, "hi").await;
    let (ok, out, err) = pairing(&run, &["approve", "telegram", &code]);
    assert!(ok, "{out}{err}");

    let member = TgUser::named(5002, "Member", None);
    let member_code = ask_for_code(&run, &member, "hi").await;
    fake.dm(&admin, &format!("/pair approve {}", member_code.to_ascii_lowercase()));
    let posted = run.wait(&dm(ADMIN), "the approval", |p| p.iter().any(|m| m.text.contains("Approved"))).await;
    assert!(posted.iter().any(|m| m.text.contains("Approved Member (5002) on telegram")), "{posted:#?}");
    fake.dm(&member, "hello");
    run.wait_text(&dm(member.id), "echo: hello").await;

    let stranger = TgUser::named(6001, "Mallory", None);
    let stranger_code = ask_for_code(&run, &stranger, "hi").await;
    fake.dm(&member, &format!("/pair approve {stranger_code}"));
    run.wait_text(&dm(member.id), "⚠️ Only an admin may approve pairing codes.").await;
    fake.dm(&stranger, "let me in");
    handled(&run, 7).await;
    assert_eq!(run.llm_asked("let me in"), 0, "a member's /pair let no one in");
    assert_eq!(run.peer.posted(&dm(stranger.id)).len(), 1);
    let (_, listing, _) = pairing(&run, &["list"]);
    assert!(listing.contains("6001"), "the stranger's code is still pending:\n{listing}");
}
