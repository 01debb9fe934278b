//! Who gets in, tried the way an attacker would: strangers who set what a platform lets anyone set
//! — Telegram first and last names, Discord usernames, global names and server nicknames, group
//! titles and channel names — to the owner's id or handle are denied (no answer, nothing reaches
//! the LLM), while the owners, listed by id and on Telegram by `@username`, are answered. And
//! what a stranger attaches is never downloaded.

use crate::discord::DiscordPeer;
use crate::peer::{Chat, ChatPeer};
use crate::suite::{Run, launch_with, settle};
use crate::telegram::TelegramPeer;
use hermes_fakes::discord::DcUser;
use hermes_fakes::telegram::TgUser;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The Telegram owner listed by id, and the one listed as `@alice` (whose username is `Alice`).
const TG_OWNER: i64 = 5001;
const TG_HANDLE_OWNER: i64 = 5002;
/// The Discord owner, listed by id.
const DC_OWNER: u64 = 300_000_000_000_005_001;

fn dm_chat(id: impl ToString) -> Chat {
    Chat { chat_id: id.to_string(), thread_id: None }
}

/// No LLM request carries a stranger's words, and only the owners' messages were asked about.
fn assert_only_owners_reached_the_agent<P: ChatPeer>(run: &Run<P>, owners: usize) {
    let requests = run.llm.requests();
    let leaked: Vec<String> =
        requests.iter().flat_map(|r| r.messages()).map(|(_, text)| text).filter(|text| text.contains("spoof")).collect();
    assert!(leaked.is_empty(), "{}: a stranger's message reached the agent: {leaked:#?}", P::PLATFORM);
    assert_eq!(requests.len(), owners, "{}: one request per owner message, none for strangers", P::PLATFORM);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telegram_names_never_pass_for_an_id_or_a_username() {
    let run = launch_with::<TelegramPeer>("", &[("TELEGRAM_ALLOWED_USERS", &format!("{TG_OWNER},@alice"))]).await;
    let fake = &run.peer.fake;
    let strangers = [
        ("first name is the owner's id", TgUser::named(6001, "5001", None)),
        ("last name is the owner's id", TgUser::named(6002, "Mallory", Some("5001"))),
        ("first name is the owner's username", TgUser::named(6003, "alice", None)),
        ("first name is @username", TgUser::named(6004, "@alice", None)),
        ("last name is @username", TgUser::named(6005, "Mallory", Some("@alice"))),
        ("first name in another case", TgUser::named(6006, "ALICE", None)),
        ("names spoofed, a username of their own", TgUser::named(6007, "@alice", Some("5001")).with_username("mallory_m")),
    ];
    for (what, user) in &strangers {
        fake.dm(user, &format!("spoof: {what}"));
    }
    // A group's title is chosen by whoever made the group.
    let groups = [(-1_005_001, "5001"), (-1_005_002, "@alice")];
    for (chat, title) in groups {
        fake.group(chat, title, false);
        let text = format!("@{} spoof: in a group titled {title}", fake.bot_username());
        fake.group_message(chat, &TgUser::named(6100, title, None), &text);
    }
    // The owners write last: once both are answered, every earlier message has been decided.
    fake.dm(&TgUser::named(TG_OWNER, "Owner", None), "owner by id");
    fake.dm(&TgUser::named(TG_HANDLE_OWNER, "Alice", Some("Liddell")).with_username("Alice"), "owner by username");
    run.wait_text(&dm_chat(TG_OWNER), "echo: owner by id").await;
    run.wait_text(&dm_chat(TG_HANDLE_OWNER), "echo: owner by username").await;
    settle().await;

    for (what, user) in &strangers {
        assert!(fake.sent_to(user.id).is_empty(), "a stranger whose {what} was answered: {:#?}", fake.sent_to(user.id));
    }
    for (chat, title) in groups {
        assert!(fake.sent_to(chat).is_empty(), "a stranger in a group titled {title:?} was answered");
    }
    assert_only_owners_reached_the_agent(&run, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discord_names_never_pass_for_an_id() {
    // `alice` and `@alice` are names: listed by mistake, they are reported and match nobody.
    let run = launch_with::<DiscordPeer>("", &[("DISCORD_ALLOWED_USERS", &format!("{DC_OWNER},alice,@alice"))]).await;
    let log = run.gateway.log_text();
    for entry in ["\"alice\"", "\"@alice\""] {
        assert!(
            log.contains(&format!("DISCORD_ALLOWED_USERS: the entry {entry} never matches anyone")),
            "start-up warns about {entry}:\n{log}"
        );
    }
    run.peer.session().await;
    let fake = &run.peer.fake;
    let owner_id = DC_OWNER.to_string();
    let stranger = |id: u64, username: &str, global_name: Option<&str>, nick: Option<&str>| DcUser {
        id,
        username: username.to_string(),
        global_name: global_name.map(str::to_string),
        nick: nick.map(str::to_string),
    };
    let strangers = [
        ("global name is the owner's id", stranger(7001, "mallory1", Some(&owner_id), None)),
        ("username is the owner's id", stranger(7002, &owner_id, None, None)),
        ("server nickname is the owner's id", stranger(7003, "mallory3", Some("Mallory"), Some(&owner_id))),
        ("global name is alice", stranger(7004, "mallory4", Some("alice"), None)),
        ("global name is @alice", stranger(7005, "mallory5", Some("@alice"), None)),
        ("username is alice", stranger(7006, "alice", None, None)),
        ("server nickname is @alice", stranger(7007, "mallory7", None, Some("@alice"))),
    ];
    for (what, user) in &strangers {
        fake.dm(user, &format!("spoof: {what}"));
        fake.channel_message(run.peer.general, user, &format!("spoof: {what}, in the guild"), true);
    }
    // Channel names are chosen by whoever may manage the guild.
    let channels = [fake.text_channel(&owner_id), fake.text_channel("alice")];
    for channel in channels {
        fake.channel_message(channel, &strangers[0].1, "spoof: in a channel named after the owner", true);
    }
    let owner = stranger(DC_OWNER, "owner", Some("Owner"), Some("Boss"));
    let owner_dm = fake.dm(&owner, "owner in a dm").channel_id;
    fake.channel_message(run.peer.general, &owner, "owner in the guild", true);
    run.wait_text(&dm_chat(owner_dm), "echo: owner in a dm").await;
    run.wait_text(&dm_chat(run.peer.general), "echo: owner in the guild").await;
    settle().await;

    for (what, user) in &strangers {
        let dm = fake.dm_channel(user);
        assert!(fake.sent_to(dm).is_empty(), "a stranger whose {what} was answered in a DM: {:#?}", fake.sent_to(dm));
    }
    let in_general: Vec<String> = fake.sent_to(run.peer.general).into_iter().map(|m| m.content).collect();
    assert_eq!(in_general, ["echo: owner in the guild"], "only the owner is answered in the guild");
    for channel in channels {
        assert!(fake.sent_to(channel).is_empty(), "a stranger was answered in a channel named after the owner");
    }
    assert_only_owners_reached_the_agent(&run, 2);
}

/// Every file under `dir`, and every folder on the way.
fn walk(dir: &Path, files: &mut Vec<PathBuf>, folders: &mut Vec<PathBuf>) {
    folders.push(dir.to_path_buf());
    for entry in std::fs::read_dir(dir).expect("read the cache") {
        let path = entry.expect("a cache entry").path();
        if path.is_dir() { walk(&path, files, folders) } else { files.push(path) }
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).expect("metadata").permissions().mode() & 0o777
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telegram_attachments_of_strangers_are_never_downloaded() {
    let run = launch_with::<TelegramPeer>("", &[("TELEGRAM_ALLOWED_USERS", &TG_OWNER.to_string())]).await;
    let fake = &run.peer.fake;
    let stranger = TgUser::named(6001, "5001", None);
    fake.photo(stranger.id, &stranger, b"STRANGER-PHOTO".repeat(64), Some("spoof: look at this"));
    fake.document(stranger.id, &stranger, "invoice.pdf", b"STRANGER-DOCUMENT".repeat(64), Some("spoof: and this"));
    let owner = TgUser::named(TG_OWNER, "Owner", None);
    fake.document(TG_OWNER, &owner, "notes.txt", b"the owner's notes".to_vec(), Some("read my notes"));
    // The owner's caption, and the model told where their file is.
    let told = |p: &[crate::peer::Posted]| {
        p.iter().any(|m| m.text.starts_with("echo: ") && m.text.contains("read my notes") && m.text.contains("notes.txt"))
    };
    run.wait(&dm_chat(TG_OWNER), "the owner's answer naming their file", told).await;
    settle().await;

    assert_eq!(fake.call_count("getFile"), 1, "only the owner's file was looked up");
    assert_eq!(fake.downloads().len(), 1, "only the owner's file was downloaded: {:?}", fake.downloads());
    let cache = run._setup.home.path().join("cache");
    let (mut files, mut folders) = (Vec::new(), Vec::new());
    walk(&cache, &mut files, &mut folders);
    assert_eq!(files.len(), 1, "nothing of the stranger's was written: {files:?}");
    assert_eq!(std::fs::read(&files[0]).expect("the owner's file"), b"the owner's notes");
    assert_eq!(mode(&files[0]), 0o600, "the saved file is private");
    for folder in &folders {
        assert_eq!(mode(folder), 0o700, "{} is private", folder.display());
    }
    assert!(fake.sent_to(stranger.id).is_empty(), "the stranger got no answer");
    assert_only_owners_reached_the_agent(&run, 1);
}
