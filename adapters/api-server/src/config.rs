//! `platforms.api_server`: the block's keys, environment variables, documentation and checks,
//! and the [`REGISTRATION`] that turns them into an [`ApiServerAdapter`].

use crate::{ApiServerAdapter, ApiServerSettings};
use hermes_adapter::registration::{
    self, BuildContext, BuildError, EnvKind, EnvVar, ErasedConfig, PlatformFacts, Registration, Risk, SettingError,
};
use hermes_adapter::secret::{self, Secret};
use hermes_adapter::values::string_list;
use hermes_adapter::{AdapterConfig, Extra, PlatformAdapter};
use hermes_http_guard::{AllowedOrigins, check_secret};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The OpenAI-compatible HTTP API (`platforms.api_server`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ApiServerConfig {
    /// Address to bind.
    pub host: String,
    /// Port to bind.
    pub port: u16,
    /// Bearer key clients must send; without it the server refuses to start unless
    /// `allow_no_auth` is set and the host is loopback.
    #[serde(deserialize_with = "secret::optional")]
    pub key: Option<Secret>,
    /// Serve without a key; honoured on a loopback host only.
    pub allow_no_auth: bool,
    /// Model id advertised by `/v1/models`.
    pub model_name: String,
    /// Origins of the web pages allowed to call.
    #[serde(deserialize_with = "string_list")]
    pub cors_origins: Vec<String>,
    /// Free-form settings, passed through unchecked.
    #[serde(skip_serializing_if = "Extra::is_empty")]
    pub extra: Extra,
}

impl Default for ApiServerConfig {
    fn default() -> Self {
        let runtime = ApiServerSettings::default();
        Self {
            host: runtime.host,
            port: runtime.port,
            key: None,
            allow_no_auth: runtime.allow_no_auth,
            model_name: runtime.model_name,
            cors_origins: Vec::new(),
            extra: Extra::default(),
        }
    }
}

impl AdapterConfig for ApiServerConfig {
    fn validate(&self, enabled: bool) -> Result<(), SettingError> {
        if self.port == 0 {
            return Err(SettingError::key("port", "expected a port number 1-65535, found 0"));
        }
        if !enabled {
            return Ok(());
        }
        if let Some(key) = self.key.as_ref().map(|k| k.expose().trim()).filter(|k| !k.is_empty()) {
            check_secret(key).map_err(|reason| {
                SettingError::key(
                    "key (API_SERVER_KEY)",
                    format!("guessable: {reason}; generate one, e.g. with `openssl rand -hex 32`, and use it on both sides"),
                )
            })?;
        }
        let origins = AllowedOrigins::parse(&self.cors_origins)
            .map_err(|e| SettingError::key("cors_origins (API_SERVER_CORS_ORIGINS)", e.to_string()))?;
        if origins == AllowedOrigins::Any && self.key.is_none() {
            return Err(SettingError::key(
                "cors_origins (API_SERVER_CORS_ORIGINS)",
                "`*` lets every web page drive the agent, and the server has no key; list the pages' origins or set API_SERVER_KEY",
            ));
        }
        Ok(())
    }

    fn secrets(&self) -> Vec<String> {
        self.key.iter().map(|k| k.expose().to_string()).collect()
    }

    fn listener(&self) -> Option<(String, u16)> {
        Some((self.host.clone(), self.port))
    }

    fn risks(&self, enabled: bool) -> Vec<Risk> {
        let mut out = Vec::new();
        let loopback = crate::settings::is_loopback_host(&self.host);
        if enabled && !loopback && (self.key.is_none() || self.allow_no_auth) {
            out.push(Risk {
                high: true,
                key: "api_server.public_without_auth",
                what: format!("the API server listens on {} without a key: anyone who reaches it runs the agent", self.host),
                fix: "set API_SERVER_KEY (at least 16 random characters), or bind platforms.api_server.host to 127.0.0.1".into(),
            });
        }
        if enabled && self.allow_no_auth && loopback {
            out.push(Risk {
                high: false,
                key: "api_server.no_auth",
                what: "the API server accepts requests without a key (allow_no_auth): any local process can run the agent".into(),
                fix: "set API_SERVER_KEY and remove platforms.api_server.allow_no_auth".into(),
            });
        }
        out
    }
}

const ENV: &[EnvVar] = &[
    EnvVar { name: "API_SERVER_ENABLED", key: "enabled", kind: EnvKind::Bool, example: "false", description: "serve the API" },
    EnvVar {
        name: "API_SERVER_KEY",
        key: "key",
        kind: EnvKind::Secret,
        example: "3c5e8a1f9b2d47e6a0c4f7b18d2e9a53",
        description: "secret bearer key: make your own with `openssl rand -hex 32`",
    },
    EnvVar {
        name: "API_SERVER_HOST",
        key: "host",
        kind: EnvKind::Text,
        example: "127.0.0.1",
        description: "bind address; a non-loopback host requires a key",
    },
    EnvVar { name: "API_SERVER_PORT", key: "port", kind: EnvKind::Port, example: "8642", description: "1-65535" },
    EnvVar {
        name: "API_SERVER_MODEL_NAME",
        key: "model_name",
        kind: EnvKind::Text,
        example: "hermes-agent",
        description: "model id advertised by /v1/models",
    },
    EnvVar {
        name: "API_SERVER_CORS_ORIGINS",
        key: "cors_origins",
        kind: EnvKind::List,
        example: "https://a.example,https://b.example",
        description: "web pages allowed to call, comma-separated",
    },
];

const EXAMPLE: &str = "    enabled: false                     # API_SERVER_ENABLED
    host: 127.0.0.1                    # bind address; a non-loopback host requires `key` (API_SERVER_HOST)
    port: 8642                         # 1-65535 (API_SERVER_PORT)
    key: null                          # secret bearer key clients must send, 16+ characters and no placeholder: `openssl rand -hex 32` (API_SERVER_KEY)
    allow_no_auth: false               # serve without a key; honoured on a loopback host only
    model_name: hermes-agent           # model id advertised by /v1/models (API_SERVER_MODEL_NAME)
    cors_origins: []                   # web pages allowed to call, as scheme://host[:port] (API_SERVER_CORS_ORIGINS); requests from any other page get 403; `*` = any page, only with a key
";

/// The API server as the gateway registers it.
pub const REGISTRATION: Registration = Registration {
    platform: "api_server",
    summary: "OpenAI-compatible HTTP API (/v1/chat/completions, /v1/responses, /v1/runs, …).",
    env: ENV,
    example_yaml: EXAMPLE,
    allowlist_entry_problem: None,
    parse: registration::parse::<ApiServerConfig>,
    build,
    facts: PlatformFacts::ENDPOINT,
};

fn build(config: &dyn ErasedConfig, ctx: &BuildContext<'_>) -> Result<Arc<dyn PlatformAdapter>, BuildError> {
    let c: &ApiServerConfig = registration::downcast(config)?;
    let settings = ApiServerSettings {
        host: c.host.clone(),
        port: c.port,
        key: c.key.as_ref().map(|k| k.expose().to_string()),
        allow_no_auth: c.allow_no_auth,
        model_name: c.model_name.clone(),
        request_timeout: ctx.turn_timeout.max(std::time::Duration::from_secs(1)),
        cors_origins: c.cors_origins.clone(),
    };
    let adapter = ApiServerAdapter::new(settings).map_err(|e| BuildError::new(None, e.to_string()))?;
    Ok(Arc::new(adapter))
}
