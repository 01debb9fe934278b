//! `platforms.matrix`: the adapter's keys of the block, their environment variables and
//! documentation, and the [`REGISTRATION`] that turns them into a [`MatrixAdapter`].

use crate::MatrixAdapter;
use crate::settings::{Login, MatrixSendBudget, MatrixSettings};
use hermes_adapter::registration::{
    self, BuildContext, BuildError, EnvKind, EnvVar, ErasedConfig, HomeVars, PairingOffer, PlatformFacts, Registration, SettingError,
};
use hermes_adapter::values::string_list;
use hermes_adapter::{AdapterConfig, Extra, PlatformAdapter, Secret};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use url::Url;

/// The adapter's keys of `platforms.matrix` (the gateway keeps the access token, allowlists and
/// home room).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MatrixConfig {
    /// The homeserver's base URL (`https://matrix.example.org`).
    pub homeserver: Option<String>,
    /// The bot's full user id (`@hermes:example.org`); required with a password.
    pub user_id: Option<String>,
    /// The bot account's password: the bot logs in once and keeps its session and device.
    pub password: Option<Secret>,
    /// The device to use (an access token's device, or the one to log in as).
    pub device_id: Option<String>,
    /// A recovery key of the account's key backup (secret storage).
    pub recovery_key: Option<Secret>,
    /// In rooms, answer only when mentioned; unset means yes.
    pub require_mention: Option<bool>,
    /// Threads need a mention even where the bot takes part; unset means no.
    pub thread_require_mention: Option<bool>,
    /// Rooms where every message is answered, mention or not.
    #[serde(deserialize_with = "string_list")]
    pub free_response_rooms: Vec<String>,
    /// A room mention is answered in a thread under it; unset means yes.
    pub auto_thread: Option<bool>,
    /// A prefix that also starts a command (`!status` means `/status`); unset: `!`, empty: off.
    pub command_prefix: Option<String>,
    /// Largest inbound attachment downloaded, in megabytes; unset: 20.
    pub max_media_mb: Option<u64>,
    /// Outbound rate limits kept by the gateway.
    pub send_budget: MatrixSendBudget,
    /// Free-form settings, passed through unchecked.
    pub extra: Extra,
}

impl AdapterConfig for MatrixConfig {
    fn validate(&self, enabled: bool) -> Result<(), SettingError> {
        if let Some(url) = self.homeserver.as_deref().filter(|u| !u.trim().is_empty()) {
            checked_homeserver(url).map_err(|message| SettingError::key("homeserver (MATRIX_HOMESERVER)", message))?;
        } else if enabled {
            return Err(SettingError::key(
                "homeserver (MATRIX_HOMESERVER)",
                "Matrix is enabled but has no homeserver; set MATRIX_HOMESERVER (https://your.homeserver)",
            ));
        }
        if let Some(user) = self.user_id.as_deref().filter(|u| !u.trim().is_empty())
            && !crate::allowlist::is_user_id(user.trim())
        {
            return Err(SettingError::key(
                "user_id (MATRIX_USER_ID)",
                format!("expected a full Matrix user id such as @hermes:example.org, found {user:?}"),
            ));
        }
        if self.password.as_ref().is_some_and(|p| !p.is_empty()) && self.user_id.as_deref().is_none_or(|u| u.trim().is_empty()) {
            return Err(SettingError::key(
                "user_id (MATRIX_USER_ID)",
                "a password login needs the bot's user id; set MATRIX_USER_ID (@hermes:example.org)",
            ));
        }
        self.send_budget.check()
    }

    fn secrets(&self) -> Vec<String> {
        self.password.iter().chain(self.recovery_key.iter()).filter(|s| !s.is_empty()).map(|s| s.expose().to_string()).collect()
    }

    fn has_credential(&self) -> bool {
        self.password.as_ref().is_some_and(|p| !p.is_empty())
    }
}

/// The homeserver URL, refused unless it is https, or http on a loopback host (the password and
/// tokens must not cross a network in clear text). The message says what to do.
pub(crate) fn checked_homeserver(raw: &str) -> Result<Url, String> {
    let url = Url::parse(raw.trim()).map_err(|e| format!("`{raw}` is not a URL ({e}); expected https://your.homeserver"))?;
    let loopback = match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        None => false,
    };
    match url.scheme() {
        "https" if url.has_host() => Ok(url),
        "http" if loopback => Ok(url),
        "http" => {
            Err(format!("`{raw}` is plain http to a non-loopback host; use https (credentials would cross the network in clear text)"))
        }
        _ => Err(format!("`{raw}` is not an https:// URL")),
    }
}

const ENV: &[EnvVar] = &[
    EnvVar {
        name: "MATRIX_HOMESERVER",
        key: "homeserver",
        kind: EnvKind::Text,
        example: "https://matrix.example.org",
        description: "the bot's homeserver (https; http only on loopback)",
    },
    EnvVar {
        name: "MATRIX_USER_ID",
        key: "user_id",
        kind: EnvKind::Text,
        example: "@hermes:example.org",
        description: "the bot's full user id (needed with MATRIX_PASSWORD)",
    },
    EnvVar {
        name: "MATRIX_PASSWORD",
        key: "password",
        kind: EnvKind::Secret,
        example: "...",
        description: "setting it enables Matrix: the bot logs in once and keeps its device",
    },
    EnvVar {
        name: "MATRIX_ACCESS_TOKEN",
        key: "token",
        kind: EnvKind::Secret,
        example: "syt_...",
        description: "setting it enables Matrix (instead of MATRIX_PASSWORD)",
    },
    EnvVar {
        name: "MATRIX_DEVICE_ID",
        key: "device_id",
        kind: EnvKind::Text,
        example: "HERMESBOT",
        description: "the device of the access token, or the one to log in as",
    },
    EnvVar {
        name: "MATRIX_HOME_ROOM",
        key: "home_channel",
        kind: EnvKind::Text,
        example: "!abcdef:example.org",
        description: "room for cron output and notifications",
    },
    EnvVar {
        name: "MATRIX_RECOVERY_KEY",
        key: "recovery_key",
        kind: EnvKind::Secret,
        example: "EsT...",
        description: "recovery key of the account's key backup, to read older encrypted messages",
    },
    EnvVar {
        name: "MATRIX_REQUIRE_MENTION",
        key: "require_mention",
        kind: EnvKind::Bool,
        example: "true",
        description: "rooms: answer only when mentioned",
    },
    EnvVar {
        name: "MATRIX_THREAD_REQUIRE_MENTION",
        key: "thread_require_mention",
        kind: EnvKind::Bool,
        example: "false",
        description: "threads need a mention even where the bot takes part",
    },
    EnvVar {
        name: "MATRIX_FREE_RESPONSE_ROOMS",
        key: "free_response_rooms",
        kind: EnvKind::List,
        example: "!abcdef:example.org",
        description: "rooms answered without a mention, comma-separated",
    },
    EnvVar {
        name: "MATRIX_AUTO_THREAD",
        key: "auto_thread",
        kind: EnvKind::Bool,
        example: "true",
        description: "answer a room mention in a thread under it",
    },
];

const EXAMPLE: &str = "    enabled: null                      # null: enabled when a token or password is set; false switches it off
    homeserver: null                   # https://matrix.example.org; http:// only on loopback (MATRIX_HOMESERVER)
    user_id: null                      # the bot's full user id @hermes:example.org (MATRIX_USER_ID)
    password: null                     # secret; the bot logs in once and keeps its device (MATRIX_PASSWORD)
    token: null                        # secret access token, instead of a password (MATRIX_ACCESS_TOKEN)
    device_id: null                    # the token's device, or the device to log in as (MATRIX_DEVICE_ID)
    recovery_key: null                 # secret key-backup recovery key (MATRIX_RECOVERY_KEY)
    home_channel: null                 # room id for cron output (MATRIX_HOME_ROOM)
    allowed_users: []                  # full user ids @alice:example.org only; names never match (MATRIX_ALLOWED_USERS)
    allow_all_users: false             # anyone who can reach the bot may talk to it (MATRIX_ALLOW_ALL_USERS)
    admin_users: []                    # admins on this platform (MATRIX_ADMIN_USERS)
    require_mention: null              # rooms: answer only when mentioned (default true; MATRIX_REQUIRE_MENTION)
    thread_require_mention: null       # threads need a mention even where the bot takes part
                                       # (default false; MATRIX_THREAD_REQUIRE_MENTION)
    free_response_rooms: []            # room ids answered without a mention (MATRIX_FREE_RESPONSE_ROOMS)
    auto_thread: null                  # answer a room mention in a thread under it (default true; MATRIX_AUTO_THREAD)
    command_prefix: null               # `!status` means `/status` for the gateway's commands (default \"!\"; \"\" is off)
    max_media_mb: null                 # largest inbound attachment downloaded, in MB (default 20)
    send_budget:                       # messages per room hermes allows itself (0 = no limit); the
      per_room_per_second: 1           # homeserver's own limit (Synapse: rc_message) is honoured
      per_room_burst: 10               # from its 429s, per room
    extra: {}                          # free-form adapter settings, passed through unchecked
";

/// The Matrix adapter as the gateway registers it.
pub const REGISTRATION: Registration = Registration {
    platform: "matrix",
    summary: "Matrix bot account (matrix-sdk, end-to-end encryption).",
    env: ENV,
    example_yaml: EXAMPLE,
    allowlist_entry_problem: Some(crate::allowlist::entry_problem),
    parse: registration::parse::<MatrixConfig>,
    build,
    facts: PlatformFacts {
        people: true,
        home: Some(HomeVars { channel: "MATRIX_HOME_ROOM", thread: Some("MATRIX_HOME_ROOM_THREAD_ID") }),
        pairing: PairingOffer::Offered,
        // Approval choices are reaction keys under the prompt.
        buttons: true,
        reactions: true,
    },
};

fn build(config: &dyn ErasedConfig, ctx: &BuildContext<'_>) -> Result<Arc<dyn PlatformAdapter>, BuildError> {
    let config: &MatrixConfig = registration::downcast(config)?;
    let settings = settings_from(config, ctx)?;
    Ok(Arc::new(MatrixAdapter::new(settings)))
}

/// The resolved settings, or the first key at fault.
pub fn settings_from(config: &MatrixConfig, ctx: &BuildContext<'_>) -> Result<MatrixSettings, BuildError> {
    let raw = config.homeserver.as_deref().filter(|u| !u.trim().is_empty()).ok_or_else(|| {
        BuildError::new(Some("homeserver"), "Matrix is enabled but has no homeserver; set MATRIX_HOMESERVER (https://your.homeserver)")
    })?;
    let homeserver = checked_homeserver(raw).map_err(|m| BuildError::new(Some("homeserver"), m))?;
    let password = config.password.as_ref().map(|p| p.expose().to_string()).filter(|p| !p.is_empty());
    let login = match (ctx.token, password) {
        (Some(token), _) if !token.is_empty() => Login::Token(token.to_string()),
        (_, Some(password)) => Login::Password(password),
        _ => {
            return Err(BuildError::new(
                Some("token"),
                "Matrix is enabled but has no credential; set MATRIX_ACCESS_TOKEN, or MATRIX_USER_ID and MATRIX_PASSWORD",
            ));
        }
    };
    let user_id = config.user_id.as_deref().map(str::trim).filter(|u| !u.is_empty()).map(str::to_string);
    if matches!(login, Login::Password(_)) && user_id.is_none() {
        return Err(BuildError::new(Some("user_id"), "a password login needs the bot's user id; set MATRIX_USER_ID (@hermes:example.org)"));
    }
    let mut settings = MatrixSettings::new(homeserver, login, ctx.state_dir.to_path_buf(), ctx.media_dir.to_path_buf());
    settings.user_id = user_id;
    settings.device_id = config.device_id.as_deref().map(str::trim).filter(|d| !d.is_empty()).map(str::to_string);
    settings.recovery_key = config.recovery_key.as_ref().map(|k| k.expose().trim().to_string()).filter(|k| !k.is_empty());
    settings.require_mention = config.require_mention.unwrap_or(true);
    settings.thread_require_mention = config.thread_require_mention.unwrap_or(false);
    settings.free_response_rooms = config.free_response_rooms.iter().map(|r| r.trim().to_string()).filter(|r| !r.is_empty()).collect();
    settings.auto_thread = config.auto_thread.unwrap_or(true);
    settings.command_prefix = config.command_prefix.clone().unwrap_or_else(|| "!".to_string()).trim().to_string();
    settings.link_previews = ctx.link_previews;
    settings.media_limits = ctx.media_limits;
    settings.budget = config.send_budget;
    settings.commands = ctx.commands.iter().map(|(name, _)| name.trim_start_matches('/').to_ascii_lowercase()).collect();
    if let Some(mb) = config.max_media_mb {
        settings.max_media_bytes = mb.saturating_mul(1024 * 1024);
    }
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_adapter::registration::BlockInput;
    use std::path::Path;
    use std::time::Duration;

    fn parse(block: serde_json::Value, env: &[(&str, &str)]) -> Result<MatrixConfig, SettingError> {
        let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let lookup = move |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        let input = BlockInput { block: &block, env: &lookup, vars: ENV, enabled: true };
        let parsed = registration::parse::<MatrixConfig>(&input)?;
        Ok(registration::downcast::<MatrixConfig>(parsed.config.as_ref()).unwrap().clone())
    }

    fn ctx<'a>(token: Option<&'a str>) -> BuildContext<'a> {
        BuildContext {
            token,
            media_dir: Path::new("/tmp/m"),
            media_limits: hermes_adapter::MediaLimits::default(),
            state_dir: Path::new("/tmp/s"),
            commands: &[],
            link_previews: false,
            turn_timeout: Duration::from_secs(60),
        }
    }

    #[test]
    fn plain_http_is_refused_except_on_loopback_naming_the_key() {
        let err = parse(serde_json::json!({}), &[("MATRIX_HOMESERVER", "http://matrix.example.org")]).unwrap_err();
        assert!(err.to_string().contains("homeserver (MATRIX_HOMESERVER)") && err.to_string().contains("https"), "{err}");
        for fine in ["https://matrix.example.org", "http://127.0.0.1:8008", "http://localhost:8008", "http://[::1]:8008"] {
            assert!(parse(serde_json::json!({"homeserver": fine}), &[]).is_ok(), "{fine}");
        }
        assert!(parse(serde_json::json!({"homeserver": "ftp://x"}), &[]).is_err());
    }

    #[test]
    fn a_password_enables_the_platform_and_needs_a_user_id() {
        let config =
            parse(serde_json::json!({"homeserver": "https://m.org"}), &[("MATRIX_PASSWORD", "pw"), ("MATRIX_USER_ID", "@bot:m.org")])
                .unwrap();
        assert!(AdapterConfig::has_credential(&config));
        assert_eq!(AdapterConfig::secrets(&config), vec!["pw".to_string()]);
        assert!(!format!("{config:?}").contains("\"pw\""));
        let err = parse(serde_json::json!({"homeserver": "https://m.org"}), &[("MATRIX_PASSWORD", "pw")]).unwrap_err();
        assert!(err.to_string().contains("MATRIX_USER_ID"), "{err}");
        let err = parse(serde_json::json!({"homeserver": "https://m.org", "user_id": "bot"}), &[]).unwrap_err();
        assert!(err.to_string().contains("user_id"), "{err}");
    }

    #[test]
    fn build_without_any_credential_names_the_token() {
        let config = parse(serde_json::json!({"homeserver": "https://m.org"}), &[]).unwrap();
        let err = settings_from(&config, &ctx(None)).unwrap_err();
        assert_eq!(err.key.as_deref(), Some("token"));
        let settings = settings_from(&config, &ctx(Some("syt_x"))).unwrap();
        assert!(matches!(settings.login, Login::Token(_)));
        assert!(settings.require_mention && settings.auto_thread && !settings.thread_require_mention);
        assert_eq!(settings.command_prefix, "!");
    }

    #[test]
    fn every_key_is_documented() {
        let documented = REGISTRATION.documented_keys();
        let json = serde_json::to_value(MatrixConfig::default()).unwrap();
        for key in json.as_object().unwrap().keys() {
            assert!(documented.contains(&key.as_str()), "{key} is not in the example");
        }
    }

    /// The `send_budget:` block as written, parsed; the error's text (empty when it is fine).
    fn budget_error(budget: serde_json::Value) -> String {
        let block = serde_json::json!({"send_budget": budget});
        let lookup = |_: &str| None;
        let input = registration::BlockInput { block: &block, env: &lookup, vars: &[], enabled: false };
        match registration::parse::<MatrixConfig>(&input) {
            Ok(_) => String::new(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn an_unusable_send_budget_is_refused_naming_its_key() {
        let err = budget_error(serde_json::json!({"per_room_per_second": -1}));
        assert!(err.contains("send_budget.per_room_per_second"), "{err}");
        assert_eq!(budget_error(serde_json::json!({"per_room_per_second": 0})), "", "0 switches the limit off");
        // A burst below one message would never let anything through.
        let err = budget_error(serde_json::json!({"per_room_burst": 0}));
        assert!(err.contains("send_budget.per_room_burst"), "{err}");
        assert!(budget_error(serde_json::json!({"per_hour": 5})).contains("per_hour"), "an unknown key is named");
        assert_eq!(budget_error(serde_json::json!({})), "", "the published limits by default");
    }
}
