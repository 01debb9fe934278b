//! Secrets never print: Debug, Display, Serialize, `Config` Debug and masked YAML.

use super::super::Secret;
use super::config;

#[test]
fn mask_rules() {
    let long = Secret::new("sk-0123456789abcdWXYZ");
    assert_eq!(long.to_string(), "****WXYZ");
    assert_eq!(format!("{long:?}"), "****WXYZ");
    assert_eq!(long.expose(), "sk-0123456789abcdWXYZ");
    assert_eq!(Secret::new("short-secret").to_string(), "****");
    assert_eq!(Secret::new("exactly16chars!!").to_string(), "****rs!!");
    assert_eq!(serde_json::to_string(&long).unwrap(), "\"****WXYZ\"");
    let back: Secret = serde_json::from_str("\"plain\"").unwrap();
    assert_eq!(back.expose(), "plain");
}

#[test]
fn config_never_prints_secrets() {
    let yaml = "\
model:
  api_key: sk-model-secret-1234567890
platforms:
  api_server:
    key: apikey-secret
  webhook:
    secret: webhook-secret
    routes:
      gh:
        secret: route-secret
  irc:
    token: irc-token-secret
    extra:
      password: irc-password
      nested: {access_token: nested-token}
  matrix:
    homeserver: https://matrix.example.org
    user_id: '@bot:example.org'
    password: matrix-password-secret
    recovery_key: matrix-recovery-secret
  email:
    address: bot@example.org
    password: email-password-secret
    imap_host: imap.example.org
    smtp_host: smtp.example.org
    authserv_id: mx.example.org
";
    let c = config(yaml, &[("LLM_API_KEY", "")]);
    let debug = format!("{c:?}");
    let masked = c.to_masked_yaml();
    for secret in [
        "sk-model-secret",
        "apikey-secret",
        "webhook-secret",
        "route-secret",
        "irc-token-secret",
        "irc-password",
        "nested-token",
        "matrix-password-secret",
        "matrix-recovery-secret",
        "email-password-secret",
    ] {
        assert!(!debug.contains(secret), "Debug leaks {secret}: {debug}");
        assert!(!masked.contains(secret), "YAML leaks {secret}: {masked}");
    }
    assert!(masked.contains("****7890"), "{masked}");
    assert_eq!(c.platforms.get("irc").unwrap().extra.get("password").and_then(|v| v.as_str()), Some("irc-password"));
    assert_eq!(c.model.api_key.as_ref().map(|k| k.expose()), Some("sk-model-secret-1234567890"));
}

#[test]
fn empty_secret_is_unset() {
    let c = config("platforms:\n  api_server:\n    key: \"\"\n", &[]);
    assert!(super::api_server(&c).key.is_none());
}
