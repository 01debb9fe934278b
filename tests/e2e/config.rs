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
fn public_api_server_without_a_key_refuses_to_start() {
    let mut setup = Setup::new("http://127.0.0.1:9/v1");
    setup.set("API_SERVER_HOST", "0.0.0.0").set("API_SERVER_KEY", "");
    let (status, _, stderr) = setup.run(&["gateway", "run"]);
    assert_eq!(status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("API_SERVER_KEY") || stderr.contains("api_server.key"), "{stderr}");
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
