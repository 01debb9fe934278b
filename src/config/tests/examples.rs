//! The example `config.yaml` and `.env.example` against the registrations: generated regions
//! match, every documented key and variable is known, every registered one is documented.

use super::super::examples::{env_lines, platform_blocks, replace_region};
use super::super::{CORE_ENV_VARS, Env, load_str};
use super::{EXAMPLE_ENV, EXAMPLE_YAML};
use crate::registry::Registry;
use hermes_adapter::registration::CORE_KEYS;
use std::path::Path;

fn check_or_bless(file: &str, committed: &str, generated: &str) {
    let expected = replace_region(committed, generated).unwrap_or_else(|| panic!("{file} has no generated region"));
    if std::env::var_os("HERMES_BLESS").is_some() {
        std::fs::write(Path::new(env!("CARGO_MANIFEST_DIR")).join(file), &expected).expect("rewrite the example file");
        return;
    }
    assert!(committed == expected, "{file} is stale: run `HERMES_BLESS=1 cargo test --lib generated_examples`");
}

#[test]
fn generated_examples_match_the_registrations() {
    let registry = Registry::builtin();
    check_or_bless("config/hermes.example.yaml", EXAMPLE_YAML, &platform_blocks(&registry));
    check_or_bless("config/.env.example", EXAMPLE_ENV, &env_lines(&registry));
}

#[test]
fn every_registered_key_is_documented_and_every_documented_key_is_known() {
    let registry = Registry::builtin();
    for r in registry.iter() {
        let documented = r.documented_keys();
        // Every adapter key of the block is documented: the serialized default lists them all.
        let parsed = (r.parse)(&hermes_adapter::registration::BlockInput {
            block: &serde_json::Value::Null,
            env: &|_: &str| None,
            vars: r.env,
            enabled: false,
        })
        .unwrap();
        let serde_json::Value::Object(keys) = parsed.config.to_json() else { panic!("{}", r.platform) };
        for key in keys.keys() {
            assert!(documented.contains(&key.as_str()), "platforms.{}.{key} is not in its example", r.platform);
        }
        // ...and the documented block loads without unknown keys.
        let yaml = format!("platforms:\n  {}:\n{}", r.platform, r.example_yaml);
        let loaded = load_str(&yaml, Path::new("config.yaml"), &Env::default()).unwrap();
        assert!(loaded.warnings.is_empty(), "{}: {:?}", r.platform, loaded.warnings);
        for key in &documented {
            assert!(
                CORE_KEYS.contains(key) || *key == "extra" || keys.contains_key(*key),
                "platforms.{}.{key} is documented but unknown",
                r.platform
            );
        }
        for var in r.env {
            assert!(EXAMPLE_ENV.contains(&format!("# {}=", var.name)), "{} is not in .env.example", var.name);
        }
    }
}

#[test]
fn every_variable_in_env_example_is_read() {
    let registry = Registry::builtin();
    let per_platform = ["_ALLOWED_USERS", "_ALLOW_ALL_USERS", "_ADMIN_USERS", "_HOME_CHANNEL_THREAD_ID"];
    for line in EXAMPLE_ENV.lines() {
        let Some((name, _)) = line.strip_prefix("# ").and_then(|l| l.split_once('=')) else { continue };
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_uppercase() || b == b'_') {
            continue;
        }
        let known = CORE_ENV_VARS.contains(&name)
            || registry.iter().any(|r| r.env.iter().any(|v| v.name == name))
            || per_platform.iter().any(|s| name.strip_suffix(s).is_some_and(|p| registry.get(p).is_some()));
        assert!(known, "{name} in .env.example is read by nothing");
    }
    for name in CORE_ENV_VARS {
        assert!(EXAMPLE_ENV.contains(&format!("# {name}=")), "{name} is not in .env.example");
    }
}
