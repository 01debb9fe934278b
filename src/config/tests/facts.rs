//! Platform facts come from the registrations: the home channel's variables (as the reference
//! names them, thread included), the secret variables every tool is kept from, who the audit
//! counts as people, and who is offered pairing.

use super::config;
use crate::registry::Registry;
use hermes_adapter::PairingOffer;

#[test]
fn every_registrations_facts_agree_with_its_variables() {
    let registry = Registry::builtin();
    let problems: Vec<String> = registry.iter().flat_map(|r| r.fact_problems()).collect();
    assert!(problems.is_empty(), "{problems:#?}");
    let home = |p: &str| registry.get(p).and_then(|r| r.facts.home).map(|h| h.channel);
    assert_eq!(home("telegram"), Some("TELEGRAM_HOME_CHANNEL"));
    assert_eq!(home("matrix"), Some("MATRIX_HOME_ROOM"), "the reference's name, not a composed MATRIX_HOME_CHANNEL");
    assert_eq!(home("email"), Some("EMAIL_HOME_ADDRESS"));
    assert_eq!(home("api_server"), None);
    assert!(matches!(registry.get("email").map(|r| r.facts.pairing), Some(PairingOffer::NotOffered { .. })), "a From address is forgeable");
}

#[test]
fn the_home_thread_is_read_from_the_variable_the_registration_names() {
    let c = config(
        "",
        &[
            ("MATRIX_ACCESS_TOKEN", "syt_x"),
            ("MATRIX_HOMESERVER", "https://matrix.example.org"),
            ("MATRIX_USER_ID", "@bot:example.org"),
            ("MATRIX_HOME_ROOM", "!room:example.org"),
            ("MATRIX_HOME_ROOM_THREAD_ID", "$thread"),
            ("TELEGRAM_BOT_TOKEN", "123:abc"),
            ("TELEGRAM_HOME_CHANNEL", "-100200"),
            ("TELEGRAM_HOME_CHANNEL_THREAD_ID", "7"),
            // A composed name no registration declares is not read.
            ("MATRIX_HOME_CHANNEL_THREAD_ID", "$wrong"),
        ],
    );
    assert_eq!(c.platforms.get("matrix").and_then(|b| b.home_channel.as_deref()), Some("!room:example.org"));
    assert_eq!(c.home_channel_thread("matrix"), Some("$thread"));
    assert_eq!(c.home_channel_thread("telegram"), Some("7"));
}

#[test]
fn every_registered_secret_variable_is_kept_from_tools_configured_or_not() {
    let c = config("", &[]);
    let secrets = c.secret_env_names();
    for name in ["OPENAI_API_KEY", "TELEGRAM_BOT_TOKEN", "SLACK_APP_TOKEN", "EMAIL_PASSWORD", "API_SERVER_KEY", "WEBHOOK_SECRET"] {
        assert!(secrets.iter().any(|s| s == name), "{name} missing from {secrets:?}");
    }
    // Its name ends in none of the suffixes the terminal strips by pattern, and the hand-kept
    // list forgot it: only the registration knows it is a secret.
    assert!(secrets.iter().any(|s| s == "MATRIX_RECOVERY_KEY"), "{secrets:?}");
}

#[test]
fn the_audit_counts_people_platforms_from_their_facts_and_says_when_no_admin_exists() {
    let open = config("", &[("TELEGRAM_BOT_TOKEN", "123:abc"), ("TELEGRAM_ALLOW_ALL_USERS", "true"), ("API_SERVER_ENABLED", "true")]);
    let findings = crate::config::audit::access(&open);
    let keys: Vec<&str> = findings.iter().map(|f| f.key).collect();
    assert!(keys.contains(&"auth.allow_all") && keys.contains(&"auth.no_admin"), "{findings:#?}");
    assert!(!findings.iter().any(|f| f.what.contains("api_server")), "the API's callers are authenticated by key: {findings:#?}");

    let pairing = config("", &[("TELEGRAM_BOT_TOKEN", "123:abc")]);
    assert!(crate::config::audit::access(&pairing).iter().any(|f| f.key == "auth.no_admin"), "pairing names nobody either");

    let named = config("", &[("TELEGRAM_BOT_TOKEN", "123:abc"), ("TELEGRAM_ALLOW_ALL_USERS", "true"), ("GATEWAY_ADMIN_USERS", "5001")]);
    assert!(!crate::config::audit::access(&named).iter().any(|f| f.key == "auth.no_admin"));
    let listed = config("", &[("TELEGRAM_BOT_TOKEN", "123:abc"), ("TELEGRAM_ALLOWED_USERS", "5001")]);
    assert!(!crate::config::audit::access(&listed).iter().any(|f| f.key == "auth.no_admin"), "a listed user is the admin");
}
