//! Tests of the configuration module, one file per concern.

mod auth;
mod env;
mod examples;
mod facts;
mod home;
mod load;
mod secret;

use super::{Config, ConfigError, Env, Loaded, load_str};
use std::path::Path;

/// The annotated example shipped with the daemon. Path relative to this file; adjust it if the
/// example moves (in the `hermes` crate it lives at `config/hermes.example.yaml`).
const EXAMPLE_YAML: &str = include_str!("../../../config/hermes.example.yaml");
/// The annotated environment example, same remark.
const EXAMPLE_ENV: &str = include_str!("../../../config/.env.example");

fn env(pairs: &[(&str, &str)]) -> Env {
    Env::from_pairs(pairs.iter().copied())
}

fn load_yaml(text: &str, pairs: &[(&str, &str)]) -> Result<Loaded, ConfigError> {
    load_str(text, Path::new("/tmp/home/config.yaml"), &env(pairs))
}

fn config(text: &str, pairs: &[(&str, &str)]) -> Config {
    match load_yaml(text, pairs) {
        Ok(loaded) => loaded.config,
        Err(e) => panic!("config should load: {e}"),
    }
}

fn error(text: &str, pairs: &[(&str, &str)]) -> ConfigError {
    match load_yaml(text, pairs) {
        Ok(loaded) => panic!("expected an error, got {:?}", loaded.config),
        Err(e) => e,
    }
}

/// The API server's block, or its defaults when the file has none.
fn api_server(c: &Config) -> hermes_api_server::ApiServerConfig {
    c.platforms.settings::<hermes_api_server::ApiServerConfig>("api_server").cloned().unwrap_or_default()
}

/// The webhook block, or its defaults when the file has none.
fn webhook(c: &Config) -> hermes_webhook::WebhookConfig {
    c.platforms.settings::<hermes_webhook::WebhookConfig>("webhook").cloned().unwrap_or_default()
}
