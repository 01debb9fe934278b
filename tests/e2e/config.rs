//! Configuration errors as a user meets them: exit 78 naming the key, warnings naming unknown
//! keys, secrets masked in `hermes config check`, and the single-instance lock.

use crate::support::{API_KEY, Setup};
use hermes_fakes::FakeLlm;

#[test]
fn invalid_value_exits_78_naming_the_key() {
    let mut setup = Setup::new("http://127.0.0.1:9/v1");
    setup.set("API_SERVER_PORT", "eighty");
    let (status, _, stderr) = setup.run(&["gateway", "run"]);
    assert_eq!(status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("API_SERVER_PORT"), "{stderr}");

    let setup = Setup::new("http://127.0.0.1:9/v1");
    setup.write_config("gateway:\n  max_concurrent_sessions: lots\n");
    let (status, _, stderr) = setup.run(&["gateway", "run"]);
    assert_eq!(status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("gateway.max_concurrent_sessions"), "{stderr}");

    let (status, _, stderr) = setup.run(&["config", "check"]);
    assert_eq!(status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("gateway.max_concurrent_sessions"), "{stderr}");
}

#[test]
fn slack_refuses_a_plain_http_api_url_off_loopback_and_a_missing_app_token() {
    // The bot token would cross the network in clear text.
    let mut setup = Setup::new("http://127.0.0.1:9/v1");
    setup.set("SLACK_BOT_TOKEN", "xoxb-e2e-0000").set("SLACK_APP_TOKEN", "xapp-e2e-0000").set("SLACK_API_BASE_URL", "http://10.0.0.5/api/");
    let (status, _, stderr) = setup.run(&["gateway", "run"]);
    assert_eq!(status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("platforms.slack.api_base_url") && stderr.contains("loopback"), "{stderr}");
    assert!(!stderr.contains("xoxb-e2e-0000"), "the token is never shown: {stderr}");
    // Socket Mode cannot connect without the app-level token; say which variable.
    setup.set("SLACK_API_BASE_URL", "").set("SLACK_APP_TOKEN", "");
    let (status, _, stderr) = setup.run(&["gateway", "run"]);
    assert_eq!(status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("platforms.slack.app_token") && stderr.contains("SLACK_APP_TOKEN"), "{stderr}");
    // A bot token where the app-level token belongs.
    setup.set("SLACK_APP_TOKEN", "xoxb-e2e-0000");
    let (status, _, stderr) = setup.run(&["config", "check"]);
    assert_eq!(status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("SLACK_APP_TOKEN") && stderr.contains("xapp-"), "{stderr}");
    assert!(!stderr.contains("xoxb-e2e-0000"), "the token is never shown: {stderr}");
}

#[test]
fn public_api_server_without_a_key_refuses_to_start() {
    let mut setup = Setup::new("http://127.0.0.1:9/v1");
    setup.set("API_SERVER_HOST", "0.0.0.0").set("API_SERVER_KEY", "");
    let (status, _, stderr) = setup.run(&["gateway", "run"]);
    assert_eq!(status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("API_SERVER_KEY") || stderr.contains("api_server.key"), "{stderr}");
}

#[test]
fn a_working_directory_containing_hermes_home_refuses_to_start() {
    // The sandbox cannot hide HERMES_HOME inside a directory the agent may write.
    let setup = Setup::new("http://127.0.0.1:9/v1");
    let parent = setup.home.path().parent().unwrap().display().to_string();
    setup.write_config(&format!("terminal:\n  cwd: {parent}\n"));
    let (status, _, stderr) = setup.run(&["gateway", "run"]);
    assert_eq!(status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("terminal.sandbox") && stderr.contains("HERMES_HOME"), "{stderr}");
}

#[test]
fn a_guessable_api_key_refuses_to_start() {
    let mut setup = Setup::new("http://127.0.0.1:9/v1");
    setup.set("API_SERVER_KEY", "change-me");
    let (status, _, stderr) = setup.run(&["gateway", "run"]);
    assert_eq!(status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("API_SERVER_KEY") && stderr.contains("platforms.api_server.key"), "{stderr}");
    assert!(stderr.contains("openssl rand"), "the refusal says how to make a key: {stderr}");
    let (status, _, stderr) = setup.run(&["config", "check"]);
    assert_eq!(status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("API_SERVER_KEY"), "{stderr}");

    setup.set("API_SERVER_KEY", "e2e-api-key-0123456789").set("WEBHOOK_SECRET", "xxxxxxxxxxxxxxxxxxxxxxxx");
    let (status, _, stderr) = setup.run(&["config", "check"]);
    assert_eq!(status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("WEBHOOK_SECRET"), "{stderr}");
}

#[test]
fn unknown_key_is_reported_by_path_and_secrets_are_masked() {
    let setup = Setup::new("http://127.0.0.1:9/v1");
    setup.write_config("model:\n  default: some-model\n  temprature: 0.3\ndisplay:\n  busy_input_mode: queue\n");
    let (status, stdout, stderr) = setup.run(&["config", "check"]);
    assert!(status.success(), "{stderr}");
    assert!(stderr.contains("model.temprature"), "the unknown key is named: {stderr}");
    assert!(stdout.contains("some-model"), "{stdout}");
    assert!(stdout.contains("busy_input_mode: queue"), "{stdout}");
    assert!(!stdout.contains(API_KEY), "secrets are masked: {stdout}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_gateway_on_the_same_home_is_refused_and_replace_takes_over() {
    let llm = FakeLlm::start().await;
    let setup = Setup::new(&llm.base_url());
    let mut first = setup.start().await;
    let (status, _, stderr) = setup.run(&["gateway", "run"]);
    assert!(!status.success());
    assert!(stderr.contains("--replace"), "the refusal says how to take over: {stderr}");

    let mut replacement = setup.command(&["gateway", "run", "--replace"]).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let old_exit = first.wait_exit().await;
    assert!(old_exit.success(), "the old gateway was stopped gracefully: {old_exit}");
    let client = reqwest::Client::new();
    let mut healthy = false;
    for _ in 0..500 {
        if client.get(setup.api("/health")).send().await.is_ok_and(|r| r.status().is_success()) {
            healthy = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(replacement.id() as libc::pid_t, libc::SIGTERM) };
    let status = replacement.wait().unwrap();
    assert!(healthy, "the replacement serves");
    assert_eq!(status.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread")]
async fn doctor_checks_home_provider_and_platforms() {
    let llm = FakeLlm::start().await;
    let setup = Setup::new(&llm.base_url());
    let (status, stdout, stderr) = setup.run(&["doctor"]);
    assert!(status.success(), "{stdout}\n{stderr}");
    for expected in [
        "configuration valid",
        "is writable",
        "command sandbox: Landlock is available (ABI",
        "model provider",
        "api_server:",
        "webhook:",
        "all checks passed",
    ] {
        assert!(stdout.contains(expected), "doctor reports {expected:?}:\n{stdout}");
    }
    let asked = llm.requests();
    assert!(asked.len() == 1 && asked[0].body["max_tokens"] == 1, "doctor spends one completion token, no more: {asked:?}");

    // With the gateway running, its listeners answer instead of being free.
    let gateway = setup.start().await;
    let (status, stdout, _) = setup.run(&["doctor"]);
    assert!(status.success(), "{stdout}\n{}", gateway.log_text());
    assert!(stdout.contains("the running gateway answers"), "{stdout}");
    drop(gateway);

    let mut unreachable = Setup::new("http://127.0.0.1:9/v1");
    unreachable.set("API_SERVER_PORT", &setup.api_port.to_string());
    let (status, stdout, _) = unreachable.run(&["doctor"]);
    assert_eq!(status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("✗ model provider http://127.0.0.1:9/v1 is unreachable"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread")]
async fn admin_listener_reports_health_and_readiness_per_platform() {
    let llm = FakeLlm::start().await;
    let setup = Setup::new(&llm.base_url());
    let admin_port = crate::support::free_port();
    setup.write_config(&format!("gateway:\n  admin_port: {admin_port}\n"));
    let _gateway = setup.start().await;
    let client = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{admin_port}/readyz");
    let mut ready = serde_json::Value::Null;
    for _ in 0..200 {
        let r = client.get(&url).send().await.unwrap();
        if r.status() == 200 {
            ready = r.json().await.unwrap();
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(ready["status"], "ready", "{ready}");
    let platforms: Vec<&str> = ready["adapters"].as_array().unwrap().iter().map(|a| a["platform"].as_str().unwrap()).collect();
    assert_eq!(platforms.len(), 2, "{ready}");
    assert!(platforms.contains(&"api_server") && platforms.contains(&"webhook"), "{ready}");
    let health: serde_json::Value = client.get(format!("http://127.0.0.1:{admin_port}/health")).send().await.unwrap().json().await.unwrap();
    assert_eq!(health["status"], "ok");

    // `hermes gateway status` asks the running gateway itself when its admin listener answers.
    let (_, stdout, stderr) = setup.run(&["gateway", "status"]);
    assert!(stdout.contains(&format!("Live ({url}): ready")), "{stdout}{stderr}");
    assert!(stdout.contains("  api_server: connected") && stdout.contains("  webhook: connected"), "{stdout}");

    // No key guards it, so pages are kept out: a rebound name and a page's Origin are refused.
    let rebound = client.get(&url).header("Host", format!("evil.example:{admin_port}")).send().await.unwrap();
    assert_eq!(rebound.status(), 421);
    let from_page = client.get(&url).header("Origin", "https://evil.example").send().await.unwrap();
    assert_eq!(from_page.status(), 403);
}

/// `hermes security audit` names each risky setting with its fix and fails on a high one; a
/// careful home passes.
#[test]
fn security_audit_names_risks_and_fails_on_high_ones() {
    let mut setup = Setup::new("http://127.0.0.1:9/v1");
    setup.set("TELEGRAM_BOT_TOKEN", "123456:abcdefghijklmnopqrstuvwxyz").set("TELEGRAM_ALLOW_ALL_USERS", "true");
    setup.write_config("approvals:\n  mode: off\n");
    let (status, stdout, stderr) = setup.run(&["security", "audit"]);
    assert_eq!(status.code(), Some(1), "{stdout}{stderr}");
    for expected in
        ["auth.allow_all", "auth.no_admin", "no admin exists", "approvals.off", "TELEGRAM_ALLOWED_USERS", "approvals.mode: manual"]
    {
        assert!(stdout.contains(expected), "{expected} missing:\n{stdout}");
    }

    let setup = Setup::new("http://127.0.0.1:9/v1");
    let (status, stdout, stderr) = setup.run(&["security", "audit"]);
    assert!(status.success(), "{stdout}{stderr}");
}
