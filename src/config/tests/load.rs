//! `config.yaml` parsing: defaults, shapes Hermes accepts, unknown keys, error paths.

use super::super::{BusyInputMode, Config, ConfigError, Home, ResetMode, StreamingConfig, ToolProgress, load};
use super::{EXAMPLE_YAML, config, error, load_yaml};
use super::{api_server, webhook};
use hermes_webhook::DEFAULT_ROUTE_PROMPT;

#[test]
fn no_file_gives_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let loaded = load(&Home::at(dir.path()), &super::env(&[])).unwrap();
    assert!(loaded.warnings.is_empty());
    let c = loaded.config;
    assert_eq!(c, Config::default());
    assert_eq!(c.model.default, "gpt-4o-mini");
    assert_eq!(c.model.base_url, "https://api.openai.com/v1");
    assert_eq!(c.model.request_timeout_secs, 120);
    assert_eq!(api_server(&c).port, 8642);
    assert_eq!(api_server(&c).model_name, "hermes-agent");
    assert_eq!(webhook(&c).port, 8644);
    assert_eq!(webhook(&c).rate_limit_per_minute, 30);
    assert_eq!(c.gateway.drain_timeout_secs, 30);
    assert!(c.gateway.group_sessions_per_user && !c.gateway.thread_sessions_per_user);
    assert_eq!(c.gateway.admin_port, None);
    assert_eq!(c.display.busy_input_mode, BusyInputMode::Interrupt);
    assert_eq!(c.display.tool_progress, ToolProgress::All);
    assert_eq!(c.streaming.cursor, " ▉");
    assert_eq!(c.session_reset.mode, ResetMode::None);
    assert_eq!(c.session_reset.notify_exclude_platforms, ["api_server", "webhook"]);
    assert_eq!(c.approvals.mode, "smart");
    assert_eq!(c.agent.max_turns, 90);
    assert!(c.security.redact_secrets);
}

#[test]
fn empty_or_comment_only_file_gives_defaults() {
    for text in ["", "\n", "# nothing here\n", "---\n"] {
        let loaded = load_yaml(text, &[]).unwrap();
        assert_eq!(loaded.config, Config::default(), "{text:?}");
        assert!(loaded.warnings.is_empty());
    }
}

#[test]
fn empty_sections_are_defaults() {
    let c = config("gateway:\nplatforms:\n  telegram:\nmodel:\nstreaming:\n", &[]);
    assert_eq!(c.gateway, Config::default().gateway);
    assert!(c.platforms.get("telegram").is_some());
    assert_eq!(c.model, Config::default().model);
}

#[test]
fn model_as_plain_string() {
    let c = config("model: some-model\n", &[]);
    assert_eq!(c.model.default, "some-model");
    assert_eq!(c.model.base_url, "https://api.openai.com/v1");
}

#[test]
fn model_as_mapping_reports_unknown_keys() {
    let loaded = load_yaml("model:\n  default: m\n  temprature: 0.2\n", &[]).unwrap();
    assert_eq!(loaded.config.model.default, "m");
    assert_eq!(loaded.warnings, ["config.yaml: unknown key `model.temprature` (ignored)"]);
}

#[test]
fn example_file_parses_without_warnings_and_documents_the_defaults() {
    let loaded = load_yaml(EXAMPLE_YAML, &[]).unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let (c, d) = (loaded.config, Config::default());
    // Everything but the sample route and platform block is the default.
    assert_eq!(c.model, d.model);
    assert_eq!(api_server(&c), api_server(&d));
    let mut hook = webhook(&c);
    hook.routes.clear();
    assert_eq!(hook, webhook(&d));
    let telegram = c.platforms.get("telegram").unwrap();
    assert_eq!(c.platforms.settings::<hermes_telegram::TelegramConfig>("telegram"), Some(&Default::default()));
    let core_keys = super::super::PlatformConfig { settings: None, ..telegram.clone() };
    assert_eq!(core_keys, Default::default());
    assert_eq!((&c.gateway, &c.display, &c.streaming), (&d.gateway, &d.display, &d.streaming));
    assert_eq!((&c.session_reset, &c.approvals, &c.cron), (&d.session_reset, &d.approvals, &d.cron));
    assert_eq!((&c.agent, &c.logging, &c.security, &c.timezone), (&d.agent, &d.logging, &d.security, &d.timezone));
    let hooks = webhook(&c);
    let route = &hooks.routes["github"];
    assert_eq!(route.deliver, "log");
    assert_eq!(route.events, ["pull_request", "issues"]);
}

#[test]
fn masked_yaml_reloads_without_warnings() {
    let c = config(EXAMPLE_YAML, &[]);
    let loaded = load_yaml(&c.to_masked_yaml(), &[]).unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert_eq!(loaded.config, c);
}

#[test]
fn unknown_keys_are_reported_with_their_path() {
    let text = "\
platforms:
  webhook:
    routez: {}
    routes:
      gh:
        delivr: log
  telegram:
    tokn: x
    extra:
      anything: goes
compression:
  enabled: true
  treshold: 0.4
";
    let loaded = load_yaml(text, &[]).unwrap();
    let mut warnings = loaded.warnings.clone();
    warnings.sort();
    assert_eq!(
        warnings,
        [
            "config.yaml: unknown key `compression.treshold` (ignored)",
            "config.yaml: unknown key `platforms.telegram.tokn` (ignored)",
            "config.yaml: unknown key `platforms.webhook.routes.gh.delivr` (ignored)",
            "config.yaml: unknown key `platforms.webhook.routez` (ignored)",
        ]
    );
    // Free-form `extra` is not reported, and kept.
    let telegram = loaded.config.platforms.settings::<hermes_telegram::TelegramConfig>("telegram").unwrap();
    assert_eq!(telegram.extra.get("anything").and_then(|v| v.as_str()), Some("goes"));
}

#[test]
fn a_platform_without_an_adapter_keeps_its_extra_and_reports_the_rest() {
    let text = "platforms:\n  mattermost:\n    enabled: true\n    bot_tokn: x\n    extra:\n      team: t1\n  signal:\n    extra: 5\n";
    let loaded = load_yaml(text, &[]).unwrap();
    let mut warnings = loaded.warnings.clone();
    warnings.sort();
    assert_eq!(
        warnings,
        [
            "config.yaml: `platforms.signal.extra` is not a mapping (ignored)",
            "config.yaml: unknown key `platforms.mattermost.bot_tokn` (ignored)",
        ]
    );
    let mattermost = loaded.config.platforms.get("mattermost").unwrap();
    assert_eq!(mattermost.extra.get("team").and_then(|v| v.as_str()), Some("t1"));
}

#[test]
fn invalid_value_names_its_path() {
    let e = error("gateway:\n  max_concurrent_sessions: many\n", &[]);
    match &e {
        ConfigError::Invalid { key, message } => {
            assert_eq!(key, "gateway.max_concurrent_sessions");
            assert!(message.starts_with("invalid type: string \"many\", expected"), "{message}");
            assert!(message.contains("usize"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    let text = e.to_string();
    assert!(text.starts_with("invalid config: `gateway.max_concurrent_sessions`: invalid type: string \"many\", expected usize"), "{text}");
}

#[test]
fn invalid_values_deep_inside_are_located() {
    let cases = [
        ("platforms:\n  telegram:\n    enabled: maybe\n", "platforms.telegram.enabled"),
        ("platforms:\n  webhook:\n    routes:\n      gh:\n        deliver_only: 3\n", "platforms.webhook.routes.gh.deliver_only"),
        (
            "platforms:\n  webhook:\n    extra:\n      routes:\n        gh:\n          events: {a: 1}\n",
            "platforms.webhook.extra.routes.gh.events",
        ),
        ("platforms:\n  api_server:\n    port: 70000\n", "platforms.api_server.port"),
        ("display:\n  busy_input_mode: later\n", "display.busy_input_mode"),
        ("model:\n  request_timeout_secs: -1\n", "model.request_timeout_secs"),
    ];
    for (text, expected) in cases {
        match error(text, &[]) {
            ConfigError::Invalid { key, .. } => assert_eq!(key, expected, "{text}"),
            other => panic!("{text}: {other:?}"),
        }
    }
}

#[test]
fn yaml_syntax_error_has_a_location() {
    match error("gateway:\n  drain_timeout_secs: [1\n", &[]) {
        ConfigError::Yaml { line, column, .. } => {
            assert!(line >= 2 && column > 0, "{line}:{column}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn semantic_checks_name_the_key() {
    let cases = [
        ("platforms:\n  webhook:\n    port: 0\n", "platforms.webhook.port"),
        ("session_reset:\n  at_hour: 24\n", "session_reset.at_hour"),
        ("approvals:\n  mode: yolo\n", "approvals.mode"),
        ("approvals:\n  cron_mode: ask\n", "approvals.cron_mode"),
        ("approvals:\n  deny: ['ok', 'git [push']\n", "approvals.deny[1]"),
        ("gateway:\n  max_concurrent_sessions: 0\n", "gateway.max_concurrent_sessions"),
        ("model:\n  base_url: api.example.com\n", "model.base_url"),
        ("platforms:\n  webhook:\n    routes:\n      \"a/b\": {}\n", "platforms.webhook.routes.a/b"),
        ("streaming:\n  transport: carrier-pigeon\n", "streaming.transport"),
        ("delivery:\n  retry_window: soon\n", "delivery.retry_window"),
        ("delivery:\n  retry_window: 5s\n", "delivery.retry_window"),
        ("delivery:\n  retry_window: 90d\n", "delivery.retry_window"),
    ];
    for (text, expected) in cases {
        match error(text, &[]) {
            ConfigError::Invalid { key, .. } => assert_eq!(key, expected, "{text}"),
            other => panic!("{text}: {other:?}"),
        }
    }
}

#[test]
fn the_retry_window_reads_as_a_person_writes_it() {
    assert_eq!(config("", &[]).delivery.retry_window(), std::time::Duration::from_secs(24 * 3600), "a day by default");
    assert_eq!(config("delivery:\n  retry_window: 90m\n", &[]).delivery.retry_window(), std::time::Duration::from_secs(5400));
    assert_eq!(config("delivery:\n  retry_window: 600\n", &[]).delivery.retry_window(), std::time::Duration::from_secs(600), "seconds");
    assert_eq!(config("delivery:\n  retry_window: 7d\n", &[]).delivery.retry_window(), std::time::Duration::from_secs(7 * 86_400));
}

#[test]
fn hermes_value_shapes_are_accepted() {
    let c = config(
        "\
approvals:
  mode: false
display:
  tool_progress: false
platforms:
  Telegram:
    allowed_users: 123, 456
    home_channel: -100123
  discord:
    allowed_users: [111, \"222\"]
",
        &[],
    );
    assert_eq!(c.approvals.mode, "off");
    assert_eq!(c.display.tool_progress, ToolProgress::Off);
    let telegram = c.platforms.get("telegram").unwrap();
    assert_eq!(telegram.allowed_users, ["123", "456"]);
    assert_eq!(telegram.home_channel.as_deref(), Some("-100123"));
    assert_eq!(c.platforms.get("discord").unwrap().allowed_users, ["111", "222"]);
}

#[test]
fn alternative_locations_fold_in() {
    let c = config(
        "gateway:\n  group_sessions_per_user: true\n  streaming:\n    enabled: true\n    transport: edit\n  platforms:\n    slack: {enabled: true}\ngroup_sessions_per_user: false\nthread_sessions_per_user: true\n",
        &[],
    );
    assert!(!c.gateway.group_sessions_per_user, "top-level key wins");
    assert!(c.gateway.thread_sessions_per_user);
    assert!(c.streaming.enabled && c.streaming.transport == "edit");
    assert!(c.platforms.get("slack").is_some_and(|p| p.is_enabled()));

    let both = config("streaming:\n  buffer_threshold: 5\ngateway:\n  streaming:\n    buffer_threshold: 9\n", &[]);
    assert_eq!(both.streaming, StreamingConfig { buffer_threshold: 5, ..StreamingConfig::default() });
}

#[test]
fn legacy_webhook_routes_merge() {
    let c = config(
        "platforms:\n  webhook:\n    routes:\n      a: {deliver: log}\n    extra:\n      routes:\n        b: {deliver: 'telegram:1'}\n      port_hint: 1\n",
        &[],
    );
    let hooks = webhook(&c);
    let routes = &hooks.routes;
    assert_eq!(routes.keys().collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(routes["b"].deliver, "telegram:1");
    assert_eq!(routes["b"].prompt, DEFAULT_ROUTE_PROMPT);
    assert!(hooks.extra.routes.is_empty());
    assert!(hooks.extra.other.get("port_hint").is_some());

    let e = error("platforms:\n  webhook:\n    routes:\n      a: {}\n    extra:\n      routes:\n        a: {}\n", &[]);
    match e {
        ConfigError::Invalid { key, message } => {
            assert_eq!(key, "platforms.webhook");
            assert!(message.starts_with("route `a` is defined both"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

/// Python Hermes asks before `/new`, `/reset` and `/undo` under this key; hermes does not, so a
/// home that sets it is told the key has no effect instead of believing it protects anything.
#[test]
fn destructive_slash_confirm_is_reported_as_having_no_effect() {
    let loaded = load_yaml("approvals:\n  destructive_slash_confirm: true\n", &[]).unwrap();
    assert!(loaded.warnings.iter().any(|w| w.contains("unknown key `approvals.destructive_slash_confirm`")), "{:?}", loaded.warnings);
}
