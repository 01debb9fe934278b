//! What identifies the account an adapter connects as, so that no two gateways on one machine
//! connect with the same credential: two pollers on one Telegram token steal each other's
//! updates (and answer 409 to each other forever), two Discord clients on one token both answer.
//! Only a digest of the secret is kept; the secret itself never leaves the adapter.

use sha2::{Digest, Sha256};

/// A kind of credential plus a SHA-256 digest of the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct CredentialId {
    kind: String,
    digest: String,
}

impl CredentialId {
    /// `kind` names the credential for people ("Telegram bot token"); `secret` is hashed at once.
    pub fn new(kind: &str, secret: &str) -> CredentialId {
        // The kind is part of the hash: one string used as two kinds of credential is two locks.
        let mut hasher = Sha256::new();
        hasher.update(kind.as_bytes());
        hasher.update([0]);
        hasher.update(secret.as_bytes());
        CredentialId { kind: kind.to_string(), digest: hex::encode(hasher.finalize()) }
    }

    /// The credential's name for people ("Telegram bot token"), for messages about a clash.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// A file-name-safe identity: the kind in lower case with dashes, then 128 bits of the digest
    /// (a collision between two real tokens is not a concern; a bot token cannot be recovered
    /// from it).
    pub fn file_stem(&self) -> String {
        let mut slug = String::with_capacity(self.kind.len());
        for c in self.kind.chars() {
            if c.is_ascii_alphanumeric() {
                slug.push(c.to_ascii_lowercase());
            } else if !slug.ends_with('-') {
                slug.push('-');
            }
        }
        format!("{}-{}", slug.trim_matches('-'), &self.digest[..32])
    }
}

impl std::fmt::Debug for CredentialId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CredentialId({}, {}…)", self.kind, &self.digest[..8])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_stem_names_the_kind_and_never_holds_the_secret() {
        let id = CredentialId::new("Telegram bot token", "123456:SECRET-abc");
        let stem = id.file_stem();
        assert!(stem.starts_with("telegram-bot-token-"), "{stem}");
        assert_eq!(stem.len(), "telegram-bot-token-".len() + 32);
        assert!(!stem.contains("SECRET") && !format!("{id:?}").contains("SECRET"));
    }

    #[test]
    fn same_secret_same_id_and_kinds_kept_apart() {
        let a = CredentialId::new("Telegram bot token", "t1");
        assert_eq!(a, CredentialId::new("Telegram bot token", "t1"));
        assert_ne!(a.file_stem(), CredentialId::new("Telegram bot token", "t2").file_stem());
        assert_ne!(a.digest, CredentialId::new("Discord bot token", "t1").digest);
    }
}
