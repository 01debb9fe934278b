//! Allowlists and allow-all flags from the file and the environment.

use super::config;

#[test]
fn allowlists_from_env() {
    let c = config("", &[("TELEGRAM_ALLOWED_USERS", "1, 2"), ("DISCORD_ALLOWED_USERS", "*")]);
    assert_eq!(c.allowed_users("telegram"), ["1", "2"]);
    assert_eq!(c.allowed_users("TELEGRAM"), ["1", "2"]);
    assert_eq!(c.allowed_users("discord"), ["*"]);
    assert!(c.allowed_users("slack").is_empty());
    assert!(!c.nothing_allowed());
    assert!(!c.allow_all("telegram"));
}

#[test]
fn env_list_replaces_file_list_and_global_is_added() {
    let yaml = "platforms:\n  telegram:\n    allowed_users: [9]\n  slack:\n    allowed_users: U1\n";
    let c = config(yaml, &[("TELEGRAM_ALLOWED_USERS", "1"), ("GATEWAY_ALLOWED_USERS", "7,1")]);
    assert_eq!(c.allowed_users("telegram"), ["1", "7"]);
    assert_eq!(c.allowed_users("slack"), ["U1", "7", "1"]);
    assert_eq!(c.allowed_users("email"), ["7", "1"]);
}

#[test]
fn allow_all_flags() {
    let c = config("platforms:\n  slack:\n    allow_all_users: true\n", &[("TELEGRAM_ALLOW_ALL_USERS", "true")]);
    assert!(c.allow_all("telegram") && c.allow_all("slack") && !c.allow_all("discord"));
    assert!(!c.nothing_allowed());

    let env_off = config("platforms:\n  slack:\n    allow_all_users: true\n", &[("SLACK_ALLOW_ALL_USERS", "no")]);
    assert!(!env_off.allow_all("slack"));
    assert!(env_off.nothing_allowed());

    // The global flag applies only where no allowlist does.
    let global = config("", &[("GATEWAY_ALLOW_ALL_USERS", "1"), ("TELEGRAM_ALLOWED_USERS", "5")]);
    assert!(global.allow_all("discord"));
    assert!(!global.allow_all("telegram"));
    assert!(!global.nothing_allowed());
}

#[test]
fn nothing_allowed_by_default() {
    assert!(config("", &[]).nothing_allowed());
    assert!(config("platforms:\n  telegram:\n    enabled: true\n", &[]).nothing_allowed());
    assert!(!config("gateway:\n  allowed_users: [a]\n", &[]).nothing_allowed());
    assert!(!config("", &[("GATEWAY_ALLOWED_USERS", "a")]).nothing_allowed());
    // An env list that replaces a file list with nothing leaves nothing.
    assert!(config("platforms:\n  telegram:\n    allowed_users: [a]\n", &[("TELEGRAM_ALLOWED_USERS", ",")]).nothing_allowed());
}

#[test]
fn a_platforms_own_allowlist_names_the_key_it_came_from() {
    let c =
        config("platforms:\n  slack:\n    allowed_users: [U1]\n", &[("DISCORD_ALLOWED_USERS", "1,alice"), ("GATEWAY_ALLOWED_USERS", "7")]);
    let (key, list) = c.platform_allowlist("discord");
    assert_eq!((key.as_str(), list), ("DISCORD_ALLOWED_USERS", &["1".to_string(), "alice".to_string()][..]));
    let (key, list) = c.platform_allowlist("slack");
    assert_eq!((key.as_str(), list), ("platforms.slack.allowed_users", &["U1".to_string()][..]));
    assert!(c.platform_allowlist("telegram").1.is_empty(), "the global list is not the platform's own");
}
