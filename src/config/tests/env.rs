//! Environment: `.env` layering and the overrides of `config.yaml` values.

use super::super::{BusyInputMode, ConfigError, Env};
use super::{EXAMPLE_ENV, api_server, config, env, error, load_yaml, webhook};
use std::io::Write;

#[test]
fn env_overrides_file() {
    let file = "model:\n  default: file-model\n  base_url: http://file\nplatforms:\n  api_server:\n    port: 9000\n";
    let c = config(
        file,
        &[
            ("API_SERVER_PORT", "9100"),
            ("LLM_MODEL", "env-model"),
            ("OPENAI_BASE_URL", "https://openai.example/v1"),
            ("LLM_BASE_URL", "https://llm.example/v1"),
            ("OPENAI_API_KEY", "sk-openai"),
            ("LLM_API_KEY", "sk-llm"),
            ("HERMES_GATEWAY_BUSY_INPUT_MODE", "Queue"),
            ("HERMES_MAX_ITERATIONS", "12"),
            ("SESSION_IDLE_MINUTES", "30"),
            ("SESSION_RESET_HOUR", "23"),
            ("WEBHOOK_ENABLED", "yes"),
            ("WEBHOOK_SECRET", "whsec-9f2c71e4a0b3"),
            ("API_SERVER_ENABLED", "ON"),
            ("API_SERVER_KEY", "env-api-k3y-5d8e0c2f"),
        ],
    );
    assert_eq!(api_server(&c).port, 9100);
    assert_eq!(c.model.default, "env-model");
    assert_eq!(c.model.base_url, "https://llm.example/v1", "LLM_* wins over OPENAI_*");
    assert_eq!(c.model.api_key.as_ref().map(|k| k.expose()), Some("sk-llm"));
    assert_eq!(c.display.busy_input_mode, BusyInputMode::Queue);
    assert_eq!(c.agent.max_turns, 12);
    assert_eq!(c.session_reset.idle_minutes, 30);
    assert_eq!(c.session_reset.at_hour, 23);
    assert!(c.platforms.get("webhook").unwrap().is_enabled() && c.platforms.get("api_server").unwrap().is_enabled());
    assert_eq!(webhook(&c).secret.as_ref().map(|s| s.expose()), Some("whsec-9f2c71e4a0b3"));

    let only_openai = config("", &[("OPENAI_BASE_URL", "https://openai.example/v1")]);
    assert_eq!(only_openai.model.base_url, "https://openai.example/v1");
}

#[test]
fn a_named_provider_takes_its_key_from_its_own_variable_as_hermes_does() {
    let key = |file: &str, vars: &[(&str, &str)]| config(file, vars).model.api_key.map(|k| k.expose().to_string());
    let openrouter = "model:\n  provider: openrouter\n  base_url: https://openrouter.ai/api/v1\n";
    let both = [("OPENAI_API_KEY", "sk-openai"), ("OPENROUTER_API_KEY", "sk-or-v1-abc")];
    assert_eq!(key(openrouter, &both).as_deref(), Some("sk-or-v1-abc"), "a Python Hermes .env with provider: openrouter");
    assert_eq!(key(openrouter, &[("OPENAI_API_KEY", "sk-openai")]).as_deref(), Some("sk-openai"));
    let all = [("OPENROUTER_API_KEY", "sk-or-v1-abc"), ("LLM_API_KEY", "sk-llm")];
    assert_eq!(key(openrouter, &all).as_deref(), Some("sk-llm"), "LLM_API_KEY is the explicit choice");
    let anthropic = "model:\n  provider: anthropic\n";
    assert_eq!(key(anthropic, &[("OPENAI_API_KEY", "sk-openai"), ("ANTHROPIC_API_KEY", "sk-ant-x")]).as_deref(), Some("sk-ant-x"));
    assert_eq!(key("", &both).as_deref(), Some("sk-openai"), "no provider named: the OpenAI-compatible key");
}

#[test]
fn empty_env_values_count_as_unset() {
    let c = config("platforms:\n  api_server:\n    port: 9000\n", &[("API_SERVER_PORT", ""), ("LLM_MODEL", "")]);
    assert_eq!(api_server(&c).port, 9000);
    assert_eq!(c.model.default, "gpt-4o-mini");
}

#[test]
fn bad_env_values_name_the_variable() {
    let e = error("", &[("API_SERVER_PORT", "abc")]);
    assert_eq!(e.to_string(), "invalid config: `API_SERVER_PORT (environment)`: expected a port number 1-65535, found \"abc\"");
    match e {
        ConfigError::Invalid { key, message } => {
            assert_eq!(key, "API_SERVER_PORT (environment)");
            assert_eq!(message, "expected a port number 1-65535, found \"abc\"");
        }
        other => panic!("{other:?}"),
    }
    for (name, value) in [
        ("WEBHOOK_ENABLED", "maybe"),
        ("GATEWAY_ALLOW_ALL_USERS", "sure"),
        ("TELEGRAM_ALLOW_ALL_USERS", "2"),
        ("WEBHOOK_PORT", "0"),
        ("SESSION_RESET_HOUR", "24"),
        ("HERMES_MAX_ITERATIONS", "-1"),
        ("HERMES_GATEWAY_BUSY_INPUT_MODE", "later"),
    ] {
        match error("", &[(name, value)]) {
            ConfigError::Invalid { key, message } => {
                assert_eq!(key, format!("{name} (environment)"));
                assert!(message.contains(&format!("{value:?}")), "{message}");
            }
            other => panic!("{name}: {other:?}"),
        }
    }
    let e = error("", &[("LLM_BASE_URL", "localhost:8080")]);
    assert!(matches!(e, ConfigError::Invalid { ref key, .. } if key == "model.base_url"), "{e}");
}

#[test]
fn dotenv_is_read_and_process_env_wins() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".env");
    std::fs::write(&path, "# comment\nLLM_MODEL=from-dotenv\nAPI_SERVER_PORT=9001\nexport WEBHOOK_PORT=\"9002\"\nLLM_PROVIDER=dotenv\n")
        .unwrap();
    let process = env(&[("LLM_MODEL", "from-process"), ("LLM_PROVIDER", "")]);
    let layered = Env::layered(&path, process).unwrap();
    assert_eq!(layered.get("LLM_MODEL"), Some("from-process"));
    assert_eq!(layered.get("API_SERVER_PORT"), Some("9001"));
    assert_eq!(layered.get("WEBHOOK_PORT"), Some("9002"));
    assert_eq!(layered.get("LLM_PROVIDER"), Some("dotenv"), "an empty process value does not hide .env");

    let c = super::super::load_str("", &dir.path().join("config.yaml"), &layered).unwrap().config;
    assert_eq!(c.model.default, "from-process");
    assert_eq!(api_server(&c).port, 9001);
    assert_eq!(webhook(&c).port, 9002);
}

#[test]
fn missing_dotenv_is_fine() {
    let dir = tempfile::tempdir().unwrap();
    let layered = Env::layered(&dir.path().join(".env"), env(&[("A", "1")])).unwrap();
    assert_eq!(layered.get("A"), Some("1"));
}

#[test]
fn malformed_dotenv_names_file_and_line_but_not_the_value() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".env");
    let mut f = std::fs::File::create(&path).unwrap();
    writeln!(f, "GOOD=1\n\nAPI_SERVER_KEY=\"sk-verysecret").unwrap();
    drop(f);
    let e = Env::layered(&path, Env::default()).unwrap_err();
    match &e {
        ConfigError::Env { path: p, line, message } => {
            assert_eq!(p, &path);
            assert_eq!(*line, Some(3));
            assert!(message.contains("API_SERVER_KEY"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    let text = e.to_string();
    assert!(text.contains(".env:3") && !text.contains("verysecret"), "{text}");
}

#[test]
fn env_debug_shows_names_only() {
    let text = format!("{:?}", env(&[("OPENAI_API_KEY", "sk-abcdef")]));
    assert!(text.contains("OPENAI_API_KEY") && !text.contains("sk-abcdef"), "{text}");
}

/// Every variable in env.example, uncommented, is accepted, and every one of them has an effect
/// documented in the file.
#[test]
fn env_example_values_are_valid() {
    let lines: Vec<String> = EXAMPLE_ENV
        .lines()
        .filter_map(|l| l.strip_prefix("# "))
        .filter(|l| l.split('=').next().is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')))
        .filter(|l| !l.starts_with("HERMES_HOME="))
        .map(str::to_string)
        .collect();
    assert!(lines.len() >= 25, "{lines:?}");
    let text = lines.join("\n");
    let pairs: Vec<(String, String)> = dotenvy::from_read_iter(text.as_bytes()).map(|r| r.unwrap()).collect();
    assert_eq!(pairs.len(), lines.len());
    let example = Env::from_pairs(pairs);
    let c = super::super::load_str("", std::path::Path::new("config.yaml"), &example).unwrap().config;
    assert_eq!(c.model.default, "gpt-4o-mini");
    assert_eq!(api_server(&c).cors_origins, ["https://a.example", "https://b.example"]);
    assert_eq!(c.allowed_users("telegram"), ["123", "456"]);
}

#[test]
fn guessable_http_secrets_are_refused_naming_their_key() {
    let e = error("", &[("API_SERVER_ENABLED", "true"), ("API_SERVER_KEY", "change-me")]);
    let text = e.to_string();
    assert!(text.contains("platforms.api_server.key (API_SERVER_KEY)") && text.contains("at least 16"), "{text}");
    assert!(!text.contains("change-me"), "the key is not echoed: {text}");

    let route = "platforms:\n  webhook:\n    enabled: true\n    routes:\n      gh:\n        secret: Change_Me_Before_Going_Live\n";
    let text = error(route, &[]).to_string();
    assert!(text.contains("platforms.webhook.routes.gh.secret") && text.contains("placeholder"), "{text}");
    let text = error("", &[("WEBHOOK_ENABLED", "true"), ("WEBHOOK_SECRET", "whsec")]).to_string();
    assert!(text.contains("WEBHOOK_SECRET"), "{text}");

    let origins = "platforms:\n  api_server:\n    enabled: true\n    cors_origins: [localhost:3000]\n";
    let text = error(origins, &[]).to_string();
    assert!(text.contains("platforms.api_server.cors_origins") && text.contains("scheme://host"), "{text}");

    // Listeners that are off are not judged, and unsigned loopback routes have no secret to judge.
    config("", &[("API_SERVER_KEY", "k"), ("WEBHOOK_SECRET", "w")]);
    config("platforms:\n  webhook:\n    enabled: true\n    routes:\n      local:\n        secret: INSECURE_NO_AUTH\n", &[]);
}

#[test]
fn the_admin_port_can_come_from_the_environment_and_a_bad_one_names_the_variable() {
    assert_eq!(config("", &[("GATEWAY_ADMIN_PORT", "8643")]).gateway.admin_port, Some(8643));
    for bad in ["0", "70000", "http"] {
        let e = load_yaml("", &[("GATEWAY_ADMIN_PORT", bad)]).unwrap_err().to_string();
        assert!(e.contains("GATEWAY_ADMIN_PORT") && e.contains("1-65535"), "{bad}: {e}");
    }
}
