//! Adapter registration: the one place that turns configuration into adapters. Adding a platform
//! is its crate plus one function here and one line in [`REGISTRY`].

use crate::config::{Config, Home, PlatformConfig};
use hermes_adapter::PlatformAdapter;
use std::sync::Arc;
use std::time::Duration;

type Build = fn(&Config, &Home) -> Option<Result<Arc<dyn PlatformAdapter>, String>>;

/// Every adapter the gateway knows, by platform name. Each returns `None` when its platform is
/// not enabled.
const REGISTRY: &[(&str, Build)] = &[("api_server", api_server), ("webhook", webhook), ("telegram", telegram), ("discord", discord)];

/// Build every enabled adapter. An error names the setting to fix (the gateway exits 78).
pub fn build_enabled(config: &Config, home: &Home) -> Result<Vec<Arc<dyn PlatformAdapter>>, String> {
    for (name, block) in &config.platforms.others {
        if block.is_enabled() && !is_supported(name) {
            tracing::warn!("platforms.{name} is enabled (or its token is set) but this build has no {name} adapter; it is ignored");
        }
    }
    REGISTRY.iter().filter_map(|(_, build)| build(config, home)).collect()
}

/// Whether this build has an adapter for `platform`.
pub fn is_supported(platform: &str) -> bool {
    REGISTRY.iter().any(|(name, _)| name.eq_ignore_ascii_case(platform))
}

/// A chat platform's block when enabled; an enabled block without a token is an error naming
/// the variable to set.
fn chat_platform<'a>(config: &'a Config, name: &str, token_var: &str) -> Option<Result<(&'a PlatformConfig, String), String>> {
    let block = config.platforms.get(name).filter(|b| b.is_enabled())?;
    Some(match &block.token {
        Some(token) if !token.expose().trim().is_empty() => Ok((block, token.expose().trim().to_string())),
        _ => Err(format!("platforms.{name}.token: {name} is enabled but has no bot token; set {token_var} (or disable the platform)")),
    })
}

/// Warn about allowlist entries that can never match anyone on `platform` (a display name where
/// an id belongs), naming the key to fix: such an entry silently locks its owner out otherwise.
fn check_allowlist(config: &Config, platform: &str, entry_problem: fn(&str) -> Option<&'static str>) {
    let (key, entries) = config.platform_allowlist(platform);
    for entry in entries {
        if let Some(problem) = entry_problem(entry) {
            tracing::warn!("{key}: the entry {entry:?} never matches anyone: {problem}");
        }
    }
}

/// The slash commands, as a platform's command menu shows them.
fn command_menu() -> Vec<(String, String)> {
    super::commands::registry().specs().map(|spec| (spec.name.to_string(), spec.description.to_string())).collect()
}

fn telegram(config: &Config, home: &Home) -> Option<Result<Arc<dyn PlatformAdapter>, String>> {
    let (block, token) = match chat_platform(config, "telegram", "TELEGRAM_BOT_TOKEN")? {
        Ok(found) => found,
        Err(e) => return Some(Err(e)),
    };
    check_allowlist(config, "telegram", hermes_telegram::allowlist::entry_problem);
    let mut settings = hermes_telegram::TelegramSettings::new(token, home.cache_dir());
    settings.api_base_url = block.api_base_url.clone();
    settings.require_mention = block.require_mention.unwrap_or(false);
    settings.free_response_chats = block.free_response_chats.clone();
    settings.commands = command_menu();
    settings.link_previews = config.display.link_previews;
    let b = block.send_budget;
    settings.budget = hermes_telegram::SendBudget {
        global_per_second: b.global_per_second,
        per_chat_per_second: b.per_chat_per_second,
        group_per_minute: b.group_per_minute,
    };
    Some(
        hermes_telegram::TelegramAdapter::new(settings)
            .map(|a| Arc::new(a) as Arc<dyn PlatformAdapter>)
            .map_err(|e| format!("platforms.telegram: {e}")),
    )
}

fn discord(config: &Config, _home: &Home) -> Option<Result<Arc<dyn PlatformAdapter>, String>> {
    let (block, token) = match chat_platform(config, "discord", "DISCORD_BOT_TOKEN")? {
        Ok(found) => found,
        Err(e) => return Some(Err(e)),
    };
    check_allowlist(config, "discord", hermes_discord::allowlist::entry_problem);
    let mut settings = hermes_discord::DiscordSettings::new(token);
    settings.api_base_url = block.api_base_url.clone();
    settings.commands = command_menu();
    settings.require_mention = block.require_mention.unwrap_or(true);
    settings.free_response_channels = block.free_response_chats.clone();
    settings.link_previews = config.display.link_previews;
    Some(
        hermes_discord::DiscordAdapter::new(settings)
            .map(|a| Arc::new(a) as Arc<dyn PlatformAdapter>)
            .map_err(|e| format!("platforms.discord: {e}")),
    )
}

fn api_server(config: &Config, _home: &Home) -> Option<Result<Arc<dyn PlatformAdapter>, String>> {
    let c = &config.platforms.api_server;
    if !c.enabled {
        return None;
    }
    let settings = hermes_api_server::ApiServerSettings {
        host: c.host.clone(),
        port: c.port,
        key: c.key.as_ref().map(|k| k.expose().to_string()),
        allow_no_auth: c.allow_no_auth,
        model_name: c.model_name.clone(),
        request_timeout: Duration::from_secs(config.agent.gateway_timeout.max(1)),
        cors_origins: c.cors_origins.clone(),
    };
    Some(hermes_api_server::ApiServerAdapter::new(settings).map(|a| Arc::new(a) as Arc<dyn PlatformAdapter>).map_err(|e| e.to_string()))
}

fn webhook(config: &Config, _home: &Home) -> Option<Result<Arc<dyn PlatformAdapter>, String>> {
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
                    toolsets: r.toolsets.clone(),
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
