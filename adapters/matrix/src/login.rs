//! Connecting as the bot: the matrix-sdk client with its SQLite state and crypto stores in the
//! state folder, the login (a saved session, an access token, or a password once), and the
//! encryption set-up that makes the bot verifiable (cross-signing when it has a password) and
//! lets it read older messages (key-backup recovery with `MATRIX_RECOVERY_KEY`).

use crate::settings::{Login, MatrixSettings};
use crate::state::{SavedSession, StateDir};
use hermes_adapter::AdapterError;
use matrix_sdk::authentication::matrix::MatrixSession;
use matrix_sdk::config::{RequestConfig, StoreConfig};
use matrix_sdk::cross_process_lock::CrossProcessLockConfig;
use matrix_sdk::ruma::api::client::uiaa;
use matrix_sdk::ruma::{OwnedDeviceId, OwnedUserId};
use matrix_sdk::store::RoomLoadSettings;
use matrix_sdk::{Client, SessionMeta, SessionTokens};
use matrix_sdk_sqlite::{SqliteCryptoStore, SqliteStateStore, SqliteStoreConfig};
use std::time::Duration;

/// The device name other users see in their device lists.
const DEVICE_NAME: &str = "hermes gateway";

/// A logged-in client and which variable holds its credential (for error messages).
pub(crate) struct Connected {
    pub client: Client,
    pub credential_var: &'static str,
}

fn setup_error(what: &str, e: impl std::fmt::Display) -> AdapterError {
    AdapterError::retryable("matrix_setup", format!("{what}: {e}"))
}

async fn new_client(settings: &MatrixSettings, state: &StateDir) -> Result<Client, AdapterError> {
    Client::builder()
        .homeserver_url(settings.homeserver.as_str())
        .store_config(stores(state).await?)
        // No limit is the SDK's default, which would retry an unreachable homeserver forever
        // inside one call; the sync loop has its own backoff and health reporting.
        .request_config(RequestConfig::new().timeout(settings.request_timeout).retry_limit(2).max_retry_time(Duration::from_secs(20)))
        .build()
        .await
        .map_err(|e| setup_error("could not open the Matrix client (stores in the state folder)", e))
}

/// The stores the bot keeps across restarts, in SQLite in the state folder and encrypted with its
/// passphrase: the state store (rooms, members, sync token, the send queue) and the crypto store
/// (its device keys and room keys). The SDK's event cache and media cache stay in memory: the
/// adapter reads neither back (it follows `/sync`, and downloads media uncached), and their SQLite
/// stores would add ~0.2 MiB of code to every build and write files nothing reads.
async fn stores(state: &StateDir) -> Result<StoreConfig, AdapterError> {
    let passphrase = state.store_passphrase().map_err(|e| setup_error("could not read or create the store passphrase", e))?;
    // One reader and one writer are plenty for one bot; the SDK's default pool is 4 per core.
    let config = SqliteStoreConfig::with_low_memory_config(state.store()).pool_max_size(2).passphrase(Some(&passphrase));
    let open_error = |e| setup_error("could not open the Matrix stores in the state folder", e);
    let state_store = SqliteStateStore::open_with_config(&config).await.map_err(open_error)?;
    let crypto_store = SqliteCryptoStore::open_with_config(&config).await.map_err(open_error)?;
    // The holder name the SDK's own `sqlite_store` uses, so a store written before stays valid.
    let locks = CrossProcessLockConfig::multi_process("main");
    Ok(StoreConfig::new(locks).state_store(state_store).crypto_store(crypto_store))
}

fn parse_ids(user: &str, device: &str) -> Result<(OwnedUserId, OwnedDeviceId), AdapterError> {
    let user_id =
        OwnedUserId::try_from(user).map_err(|e| AdapterError::fatal("bad_config", format!("`{user}` is not a Matrix user id: {e}")))?;
    Ok((user_id, OwnedDeviceId::from(device)))
}

/// The user and device an access token belongs to, asked of the homeserver (`/whoami`).
async fn whoami(settings: &MatrixSettings, token: &str) -> Result<(String, Option<String>), AdapterError> {
    let url = settings.homeserver.join("_matrix/client/v3/account/whoami").map_err(|e| setup_error("bad homeserver URL", e))?;
    let http = reqwest::Client::builder()
        .timeout(settings.request_timeout)
        .build()
        .map_err(|e| setup_error("could not build an HTTP client", e))?;
    let response =
        http.get(url).bearer_auth(token).send().await.map_err(|e| AdapterError::retryable("network", format!("whoami failed: {e}")))?;
    if response.status().as_u16() == 401 {
        return Err(AdapterError::fatal("unauthorized", "the homeserver rejected MATRIX_ACCESS_TOKEN (401 on whoami); set a valid token"));
    }
    let body: serde_json::Value = response
        .error_for_status()
        .map_err(|e| setup_error("whoami failed", e))?
        .json()
        .await
        .map_err(|e| setup_error("whoami answered nonsense", e))?;
    let user = body.get("user_id").and_then(|u| u.as_str()).ok_or_else(|| setup_error("whoami", "no user_id in the answer"))?;
    Ok((user.to_string(), body.get("device_id").and_then(|d| d.as_str()).map(str::to_string)))
}

async fn restore(client: &Client, saved: &SavedSession) -> Result<(), AdapterError> {
    let (user_id, device_id) = parse_ids(&saved.user_id, &saved.device_id)?;
    let session = MatrixSession {
        meta: SessionMeta { user_id, device_id },
        tokens: SessionTokens { access_token: saved.access_token.clone(), refresh_token: None },
    };
    client
        .matrix_auth()
        .restore_session(session, RoomLoadSettings::default())
        .await
        .map_err(|e| setup_error("could not restore the Matrix session (is the state folder from another account?)", e))
}

/// Log in (or restore the saved session) and return the client.
pub(crate) async fn connect(settings: &MatrixSettings, state: &StateDir) -> Result<Connected, AdapterError> {
    state.prepare().map_err(|e| setup_error(&format!("could not prepare the state folder {}", settings.state_dir.display()), e))?;
    let client = new_client(settings, state).await?;
    let homeserver = settings.homeserver.as_str().to_string();
    let saved = state.session().map_err(|e| setup_error("could not read the saved session", e))?;
    match &settings.login {
        Login::Token(token) => {
            // A saved session for this token keeps its device; a new token is asked who it is.
            let session = match saved.filter(|s| &s.access_token == token && s.homeserver == homeserver) {
                Some(saved) => saved,
                None => {
                    let (user, device) = match (&settings.user_id, &settings.device_id) {
                        (Some(user), Some(device)) => (user.clone(), Some(device.clone())),
                        _ => whoami(settings, token).await?,
                    };
                    if let Some(expected) = settings.user_id.as_ref().filter(|u| **u != user) {
                        return Err(AdapterError::fatal(
                            "bad_config",
                            format!("MATRIX_ACCESS_TOKEN belongs to {user}, not to MATRIX_USER_ID {expected}; fix one of them"),
                        ));
                    }
                    let device = settings.device_id.clone().or(device).ok_or_else(|| {
                        AdapterError::fatal(
                            "bad_config",
                            "the homeserver did not say which device MATRIX_ACCESS_TOKEN belongs to; set MATRIX_DEVICE_ID",
                        )
                    })?;
                    let session = SavedSession { homeserver, user_id: user, device_id: device, access_token: token.clone() };
                    state.save_session(&session).map_err(|e| setup_error("could not save the session", e))?;
                    session
                }
            };
            restore(&client, &session).await?;
            Ok(Connected { client, credential_var: "MATRIX_ACCESS_TOKEN" })
        }
        Login::Password(password) => {
            let user = settings.user_id.clone().unwrap_or_default();
            if let Some(saved) = saved.filter(|s| s.user_id == user && s.homeserver == homeserver) {
                restore(&client, &saved).await?;
                return Ok(Connected { client, credential_var: "MATRIX_PASSWORD" });
            }
            let mut login = client.matrix_auth().login_username(&user, password).initial_device_display_name(DEVICE_NAME);
            if let Some(device) = &settings.device_id {
                login = login.device_id(device);
            }
            let response = login.send().await.map_err(|e| {
                if e.client_api_error_kind().is_some_and(|k| matches!(k, matrix_sdk::ruma::api::error::ErrorKind::Forbidden)) {
                    AdapterError::fatal(
                        "unauthorized",
                        format!("the homeserver refused the login of {user}; check MATRIX_USER_ID and MATRIX_PASSWORD"),
                    )
                } else {
                    AdapterError::retryable("network", format!("login failed: {e}"))
                }
            })?;
            let session = SavedSession {
                homeserver,
                user_id: response.user_id.to_string(),
                device_id: response.device_id.to_string(),
                access_token: response.access_token.clone(),
            };
            state.save_session(&session).map_err(|e| setup_error("could not save the session", e))?;
            tracing::info!(user = %session.user_id, device = %session.device_id, "logged in to Matrix; the session is kept in the state folder");
            bootstrap_cross_signing(&client, &user, password).await;
            Ok(Connected { client, credential_var: "MATRIX_PASSWORD" })
        }
    }
}

/// Make the bot's device verifiable: create its cross-signing identity (once; the homeserver
/// asks for the password). Failing here leaves an unverified but working bot, so it is a warning.
async fn bootstrap_cross_signing(client: &Client, user: &str, password: &str) {
    let encryption = client.encryption();
    let Err(first) = encryption.bootstrap_cross_signing_if_needed(None).await else {
        // The homeserver let the first upload through without asking for the password (MSC3967).
        tracing::info!("cross-signing set up: the bot's device can be verified");
        return;
    };
    let Some(uiaa) = first.as_uiaa_response() else {
        tracing::warn!("could not set up cross-signing for the bot ({first}); it works but cannot be verified");
        return;
    };
    let mut auth =
        uiaa::Password::new(uiaa::UserIdentifier::Matrix(uiaa::MatrixUserIdentifier::new(user.to_string())), password.to_string());
    auth.session = uiaa.session.clone();
    if let Err(e) = encryption.bootstrap_cross_signing_if_needed(Some(uiaa::AuthData::Password(auth))).await {
        tracing::warn!("could not set up cross-signing for the bot ({e}); it works but cannot be verified");
    } else {
        tracing::info!("cross-signing set up: the bot's device can be verified");
    }
}

/// With a recovery key, fetch the account's secrets and room keys from the key backup, so the
/// bot can read messages encrypted before this device existed.
pub(crate) async fn recover(client: &Client, recovery_key: &str) {
    match client.encryption().recovery().recover(recovery_key).await {
        Ok(()) => tracing::info!("recovered the bot's secrets from the key backup"),
        Err(e) => tracing::warn!("MATRIX_RECOVERY_KEY did not open the key backup ({e}); older encrypted messages stay unreadable"),
    }
}
