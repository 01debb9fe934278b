//! Building the enabled adapters from their registrations ([`crate::registry`]): the one place
//! that turns configuration into running adapters. Nothing here knows a platform by name.

use crate::config::{Config, Home};
use crate::registry::Registry;
use hermes_adapter::registration::BuildContext;
use hermes_adapter::{BuildError, PlatformAdapter};
use std::sync::Arc;
use std::time::Duration;

/// Why the enabled adapters could not be built; the gateway exits 78 (the configuration cannot
/// work). The message names the setting to fix.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AdaptersError {
    /// An adapter refused its settings.
    #[error("{0}")]
    Build(String),
    /// A block is enabled but was never parsed by its registration (configuration built by hand
    /// without `config::load`).
    #[error("platforms.{0}: the block was not loaded through its registration")]
    NotParsed(String),
}

/// Build every enabled adapter of the built-in registry.
pub(crate) fn build_enabled(
    config: &Config,
    home: &Home,
    commands: &[(String, String)],
) -> Result<Vec<Arc<dyn PlatformAdapter>>, AdaptersError> {
    build_enabled_with(config, home, &Registry::builtin(), commands)
}

/// Build every enabled adapter `registry` has; enabled blocks it has none for are warned about.
/// `commands` is the slash-command menu (name, description) adapters that show one publish.
pub(crate) fn build_enabled_with(
    config: &Config,
    home: &Home,
    registry: &Registry,
    commands: &[(String, String)],
) -> Result<Vec<Arc<dyn PlatformAdapter>>, AdaptersError> {
    for (name, block) in &config.platforms.others {
        if block.is_enabled() && registry.get(name).is_none() {
            tracing::warn!("platforms.{name} is enabled (or its token is set) but this build has no {name} adapter; it is ignored");
        }
    }
    let media_dir = home.cache_dir();
    let mut adapters = Vec::new();
    for registration in registry.iter() {
        let name = registration.platform;
        let Some(block) = config.platforms.get(name).filter(|b| b.is_enabled()) else { continue };
        let settings = block.settings.as_deref().ok_or_else(|| AdaptersError::NotParsed(name.to_string()))?;
        if let Some(problem) = registration.allowlist_entry_problem {
            check_allowlist(config, name, problem);
        }
        let token = block.token.as_ref().map(|t| t.expose().trim()).filter(|t| !t.is_empty());
        let state_dir = home.platforms_dir().join(name);
        let ctx = BuildContext {
            token,
            media_dir: &media_dir,
            media_limits: config.media().limits(),
            state_dir: &state_dir,
            commands,
            link_previews: config.display.link_previews,
            turn_timeout: Duration::from_secs(config.agent.gateway_timeout),
        };
        let adapter = (registration.build)(settings, &ctx).map_err(|e| AdaptersError::Build(located(name, e)))?;
        adapters.push(adapter);
    }
    Ok(adapters)
}

/// Whether this build has an adapter for `platform`.
pub(crate) fn is_supported(platform: &str) -> bool {
    Registry::builtin().get(platform).is_some()
}

/// `platforms.<name>.<key>: <message>`, or the message alone when it names its keys.
fn located(platform: &str, e: BuildError) -> String {
    match e.key.as_deref() {
        None => e.message,
        Some("") => format!("platforms.{platform}: {}", e.message),
        Some(key) => format!("platforms.{platform}.{key}: {}", e.message),
    }
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
