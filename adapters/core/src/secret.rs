//! `Secret`: a string (API key, bot token, HMAC secret) that never prints. Debug, Display and
//! Serialize all show a mask, so a secret cannot leak through a log line, `{:?}` of the config or
//! `hermes config check`; only [`Secret::expose`] gives the value.

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use std::fmt;

/// Below this many characters not even the last four are shown: on a short secret they would be
/// a large share of it.
const SHOW_TAIL_FROM_CHARS: usize = 16;

/// A secret string; see the module docs.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself. Call only where the value is used (an HTTP header, an HMAC key).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether the secret is the empty string (which counts as "not set").
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `****` plus the last 4 characters when the secret has at least 16, else `****`; enough to
    /// tell two keys apart without revealing either.
    pub fn masked(&self) -> String {
        let count = self.0.chars().count();
        if count < SHOW_TAIL_FROM_CHARS {
            return "****".to_string();
        }
        let tail: String = self.0.chars().skip(count - 4).collect();
        format!("****{tail}")
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.masked())
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.masked())
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.masked())
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(SecretVisitor)
    }
}

struct SecretVisitor;

impl Visitor<'_> for SecretVisitor {
    type Value = Secret;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Secret, E> {
        Ok(Secret::new(v))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Secret, E> {
        Ok(Secret(v))
    }

    // An all-digit secret written without quotes arrives as a number; it is still a secret.
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Secret, E> {
        Ok(Secret(v.to_string()))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Secret, E> {
        Ok(Secret(v.to_string()))
    }
}

/// For `Option<Secret>` fields: an empty string means "not set", like an empty environment
/// variable.
pub fn optional<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Secret>, D::Error> {
    Ok(Option::<Secret>::deserialize(deserializer)?.filter(|s| !s.is_empty()))
}
