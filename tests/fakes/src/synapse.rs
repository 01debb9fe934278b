//! What every Synapse-backed test needs before it can talk: the homeserver that
//! `tests/peers/run.sh` started (from `HERMES_TEST_SYNAPSE_URL` / `HERMES_TEST_SYNAPSE_SECRET`,
//! failing with how to get one when they are missing), account names unique across parallel
//! tests, and accounts registered through Synapse's shared-secret admin API.

use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The homeserver's URL and its registration shared secret.
pub fn homeserver() -> (String, String) {
    let url = std::env::var("HERMES_TEST_SYNAPSE_URL").ok().filter(|v| !v.is_empty());
    let secret = std::env::var("HERMES_TEST_SYNAPSE_SECRET").ok().filter(|v| !v.is_empty());
    match (url, secret) {
        (Some(url), Some(secret)) => (url.trim_end_matches('/').to_string(), secret),
        _ => panic!(
            "HERMES_TEST_SYNAPSE_URL / HERMES_TEST_SYNAPSE_SECRET are not set: the Matrix tests need a real Synapse; run them \
             through tests/peers/run.sh (e.g. `tests/peers/run.sh cargo test --test conformance matrix`)"
        ),
    }
}

/// A fresh localpart starting with `prefix`: tests share one homeserver and run in parallel,
/// and a rerun must not meet the accounts of the last run.
pub fn unique(prefix: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    format!("{prefix}{}x{}x{nanos:x}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

/// An account the admin API created.
#[derive(Clone, Debug)]
pub struct Registered {
    pub user_id: String,
    pub access_token: String,
}

/// Registers `localpart` with `password` (an admin when `admin`) on the homeserver at `url`:
/// fetch a nonce, then post the HMAC-SHA1 of nonce, user, password and admin flag keyed with
/// the shared `secret`. Panics with Synapse's answer when it refuses.
pub async fn register(url: &str, secret: &str, localpart: &str, password: &str, admin: bool) -> Registered {
    let http = reqwest::Client::builder().no_proxy().build().expect("a plain reqwest client builds");
    let endpoint = format!("{}/_synapse/admin/v1/register", url.trim_end_matches('/'));
    let nonce: Value = http.get(&endpoint).send().await.expect("GET register nonce").json().await.expect("nonce JSON");
    let nonce = nonce["nonce"].as_str().expect("Synapse answers a nonce").to_string();
    let mut mac = Hmac::<sha1::Sha1>::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any length");
    let flag = if admin { "admin" } else { "notadmin" };
    mac.update(format!("{nonce}\0{localpart}\0{password}\0{flag}").as_bytes());
    let mac = hex::encode(mac.finalize().into_bytes());
    let body = json!({"nonce": nonce, "username": localpart, "password": password, "admin": admin, "mac": mac});
    let response = http.post(&endpoint).json(&body).send().await.expect("POST register");
    let status = response.status();
    let answer: Value = response.json().await.unwrap_or(Value::Null);
    assert!(status.is_success(), "registering {localpart} failed: {status} {answer}");
    Registered {
        user_id: answer["user_id"].as_str().expect("a registered user id").to_string(),
        access_token: answer["access_token"].as_str().unwrap_or_default().to_string(),
    }
}
