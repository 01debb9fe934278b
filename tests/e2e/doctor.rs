//! `hermes doctor` against the fake platforms and the scripted model: it names the bot on every
//! platform it was pointed at and passes; a revoked token, a refused model key and a secret file
//! other users can read each fail with the fix printed under them, and the exit code says so.

use crate::support::Setup;
use hermes_fakes::discord::FakeDiscord;
use hermes_fakes::slack::FakeSlack;
use hermes_fakes::telegram::FakeTelegram;
use hermes_fakes::{FakeLlm, Reply};
use std::os::unix::fs::PermissionsExt;

/// A home with the API server on a free port (from [`Setup`]), the webhook off and Telegram
/// pointed at `telegram` with `token`.
fn with_telegram(llm: &FakeLlm, telegram: &FakeTelegram, token: &str) -> Setup {
    let mut setup = Setup::new(&llm.base_url());
    setup.set("WEBHOOK_ENABLED", "false");
    setup.set("TELEGRAM_BOT_TOKEN", token);
    setup.set("TELEGRAM_API_BASE_URL", &telegram.api_url());
    setup.set("TELEGRAM_ALLOWED_USERS", "5001");
    setup
}

/// The lines doctor printed that start with `mark` (✓, ! or ✗), and the fix under each failure.
fn lines_with<'a>(stdout: &'a str, mark: &str) -> Vec<&'a str> {
    stdout.lines().filter(|l| l.starts_with(mark)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_working_setup_passes_and_names_the_bot_on_each_platform() {
    let llm = FakeLlm::start().await;
    let telegram = FakeTelegram::start().await.unwrap();
    let slack = FakeSlack::start().await.unwrap();
    let discord = FakeDiscord::start().await.unwrap();
    let mut setup = with_telegram(&llm, &telegram, &telegram.token());
    setup.set("SLACK_BOT_TOKEN", &slack.bot_token());
    setup.set("SLACK_APP_TOKEN", &slack.app_token());
    setup.set("SLACK_API_BASE_URL", &slack.api_url());
    setup.set("SLACK_ALLOWED_USERS", "U0001");
    setup.set("DISCORD_BOT_TOKEN", &discord.token());
    setup.set("DISCORD_API_BASE_URL", &discord.api_url());
    setup.set("DISCORD_ALLOWED_USERS", "100000000000000123");

    let (status, stdout, stderr) = setup.run(&["doctor"]);

    assert!(status.success(), "doctor failed: {status}\n{stdout}\n{stderr}");
    assert!(lines_with(&stdout, "✗").is_empty(), "{stdout}");
    let ok = lines_with(&stdout, "✓").join("\n");
    assert!(ok.contains(&format!("telegram: connected as @{} (bot id {})", telegram.bot_username(), telegram.bot_id())), "{stdout}");
    assert!(ok.contains(&format!("slack: connected as @hermes ({})", slack.bot_user_id())), "{stdout}");
    assert!(ok.contains("discord: connected as hermes (user id 100000000000000001)"), "{stdout}");
    assert!(ok.contains("answered a one-token completion"), "{stdout}");
    assert!(ok.contains("clock within 60s of the provider's"), "{stdout}");
    assert!(ok.contains(&format!("api_server: 127.0.0.1:{} is free to listen on", setup.api_port)), "{stdout}");
    assert!(stdout.contains("all checks passed"), "{stdout}");
    // The provider was really asked, for one token, with the configured key.
    let asked = llm.requests();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0].body["max_tokens"], 1);
    assert_eq!(asked[0].authorization.as_deref(), Some(format!("Bearer {}", crate::support::LLM_KEY).as_str()));
    // Nothing was sent to anyone.
    assert_eq!(telegram.sent_count(), 0);
    assert_eq!(telegram.call_count("getMe"), 1);
    assert_eq!(telegram.call_count("getUpdates"), 0, "doctor must not take the bot's updates");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_bot_token_fails_with_the_fix() {
    let llm = FakeLlm::start().await;
    let telegram = FakeTelegram::start().await.unwrap();
    // The fake answers 401 to any other token, as Telegram does to a revoked one.
    let setup = with_telegram(&llm, &telegram, "123456:REVOKED-TOKEN");

    let (status, stdout, _) = setup.run(&["doctor"]);

    assert_eq!(status.code(), Some(1), "{stdout}");
    let failed = lines_with(&stdout, "✗");
    assert_eq!(failed.len(), 1, "only Telegram fails: {stdout}");
    assert_eq!(failed[0], "✗ telegram: Telegram rejected the bot token (revoked or mistyped)", "{stdout}");
    let fix = stdout.lines().skip_while(|l| !l.starts_with("✗ telegram")).nth(1).unwrap_or_default();
    assert_eq!(fix, "    fix: set TELEGRAM_BOT_TOKEN to the token @BotFather shows", "{stdout}");
    assert!(!stdout.contains("REVOKED-TOKEN"), "the token is never printed: {stdout}");
    assert!(stdout.contains("1 check(s) failed"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_model_key_fails_with_the_fix() {
    let llm = FakeLlm::start().await;
    llm.push(Reply::error(401, "Incorrect API key provided"));
    let telegram = FakeTelegram::start().await.unwrap();
    let setup = with_telegram(&llm, &telegram, &telegram.token());

    let (status, stdout, _) = setup.run(&["doctor"]);

    assert_eq!(status.code(), Some(1), "{stdout}");
    let failed = lines_with(&stdout, "✗");
    assert_eq!(failed.len(), 1, "{stdout}");
    assert!(failed[0].contains("the provider rejected the API key") && failed[0].contains("Incorrect API key provided"), "{stdout}");
    assert!(stdout.contains("fix: set model.api_key, or OPENAI_API_KEY"), "{stdout}");
    assert!(!stdout.contains(crate::support::LLM_KEY), "the key is never printed: {stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_world_readable_env_file_fails_with_the_chmod_that_fixes_it() {
    let llm = FakeLlm::start().await;
    let telegram = FakeTelegram::start().await.unwrap();
    let setup = with_telegram(&llm, &telegram, &telegram.token());
    let env_file = setup.home.path().join(".env");
    std::fs::write(&env_file, "OPENAI_API_KEY=sk-from-dotenv-0123456789\n").unwrap();
    std::fs::set_permissions(&env_file, std::fs::Permissions::from_mode(0o644)).unwrap();

    let (status, stdout, _) = setup.run(&["doctor"]);

    assert_eq!(status.code(), Some(1), "{stdout}");
    let failed = lines_with(&stdout, "✗");
    assert_eq!(failed, vec![format!("✗ {} is open to other users (mode 644)", env_file.display())], "{stdout}");
    assert!(stdout.contains(&format!("    fix: chmod 600 {}\n", env_file.display())), "{stdout}");

    // Run the printed fix: doctor passes.
    std::fs::set_permissions(&env_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (status, stdout, _) = setup.run(&["doctor"]);
    assert!(status.success(), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_config_exits_78_naming_the_key() {
    let llm = FakeLlm::start().await;
    let telegram = FakeTelegram::start().await.unwrap();
    let setup = with_telegram(&llm, &telegram, &telegram.token());
    setup.write_config("agent:\n  max_turns: lots\n");

    let (status, _, stderr) = setup.run(&["doctor"]);

    assert_eq!(status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("agent.max_turns"), "{stderr}");
}
