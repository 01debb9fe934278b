//! Adapter registration: the one place that turns configuration into adapters. Adding a platform
//! is its crate plus one function here and one line in [`REGISTRY`].

use crate::config::Config;
use hermes_adapter::PlatformAdapter;
use std::sync::Arc;
use std::time::Duration;

type Build = fn(&Config) -> Option<Result<Arc<dyn PlatformAdapter>, String>>;

/// Every adapter the gateway knows. Each returns `None` when its platform is not enabled.
const REGISTRY: &[Build] = &[api_server, webhook];

/// Build every enabled adapter. An error names the setting to fix (the gateway exits 78).
pub fn build_enabled(config: &Config) -> Result<Vec<Arc<dyn PlatformAdapter>>, String> {
    REGISTRY.iter().filter_map(|build| build(config)).collect()
}

fn api_server(config: &Config) -> Option<Result<Arc<dyn PlatformAdapter>, String>> {
    let c = &config.platforms.api_server;
    if !c.enabled {
        return None;
    }
    if !c.cors_origins.is_empty() {
        tracing::warn!(
            "platforms.api_server.cors_origins is not supported yet and is ignored: browsers on other origins cannot call the API; call it from a server or the same origin"
        );
    }
    let settings = hermes_api_server::ApiServerSettings {
        host: c.host.clone(),
        port: c.port,
        key: c.key.as_ref().map(|k| k.expose().to_string()),
        allow_no_auth: c.allow_no_auth,
        model_name: c.model_name.clone(),
        request_timeout: Duration::from_secs(config.agent.gateway_timeout.max(1)),
    };
    Some(hermes_api_server::ApiServerAdapter::new(settings).map(|a| Arc::new(a) as Arc<dyn PlatformAdapter>).map_err(|e| e.to_string()))
}

fn webhook(config: &Config) -> Option<Result<Arc<dyn PlatformAdapter>, String>> {
    let c = &config.platforms.webhook;
    if !c.enabled {
        return None;
    }
    // Forwarding without an agent run is not built yet; running the agent instead would surprise.
    if let Some(name) = c.routes.iter().find(|(_, r)| r.deliver_only).map(|(n, _)| n) {
        return Some(Err(format!(
            "`platforms.webhook.routes.{name}.deliver_only: true` is not supported by this version of hermes; remove it (the route then runs the agent)"
        )));
    }
    let routes = c
        .routes
        .iter()
        .map(|(name, r)| {
            (
                name.clone(),
                hermes_webhook::RouteSettings {
                    secret: r.secret.as_ref().map(|s| s.expose().to_string()),
                    prompt: r.prompt.clone(),
                    deliver: r.deliver.clone(),
                    events: r.events.clone(),
                },
            )
        })
        .collect();
    let settings = hermes_webhook::WebhookSettings {
        host: c.host.clone(),
        port: c.port,
        global_secret: c.secret.as_ref().map(|s| s.expose().to_string()),
        rate_limit_per_minute: c.rate_limit_per_minute,
        routes,
        delivery_timeout: Duration::from_secs(30),
    };
    Some(hermes_webhook::WebhookAdapter::new(settings).map(|a| Arc::new(a) as Arc<dyn PlatformAdapter>).map_err(|e| e.to_string()))
}
