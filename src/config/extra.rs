//! `Extra`: the free-form, adapter-specific `extra:` map of a platform block. Its keys are not
//! checked (adapters own them), but values under secret-looking keys are masked in Debug and
//! Serialize, because Hermes users keep passwords and tokens there (Matrix, email).

use serde::de::Deserializer;
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_yaml_ng::Value;
use std::collections::BTreeMap;
use std::fmt;

/// Key fragments that mark a value as secret. Deliberately broad: masking a harmless value in
/// `config check` output costs nothing, printing a password does.
const SECRET_KEY_FRAGMENTS: [&str; 5] = ["token", "secret", "password", "passwd", "key"];

/// A free-form map; see the module docs.
#[derive(Clone, Default, PartialEq)]
pub struct Extra(BTreeMap<String, Value>);

impl Extra {
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The map with real values, for the adapter that owns these keys.
    pub fn as_map(&self) -> &BTreeMap<String, Value> {
        &self.0
    }

    pub fn insert(&mut self, key: impl Into<String>, value: Value) {
        self.0.insert(key.into(), value);
    }

    /// A copy with every value under a secret-looking key (at any depth) replaced by `****`.
    fn masked(&self) -> BTreeMap<String, Value> {
        self.0.iter().map(|(k, v)| (k.clone(), mask_entry(k, v))).collect()
    }
}

pub(crate) fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    SECRET_KEY_FRAGMENTS.iter().any(|fragment| key.contains(fragment))
}

fn mask_entry(key: &str, value: &Value) -> Value {
    if is_secret_key(key) && !value.is_null() {
        return Value::String("****".to_string());
    }
    mask_value(value)
}

fn mask_value(value: &Value) -> Value {
    match value {
        Value::Mapping(map) => Value::Mapping(
            map.iter()
                .map(|(k, v)| {
                    let masked = match k.as_str() {
                        Some(name) => mask_entry(name, v),
                        None => mask_value(v),
                    };
                    (k.clone(), masked)
                })
                .collect(),
        ),
        Value::Sequence(items) => Value::Sequence(items.iter().map(mask_value).collect()),
        Value::Tagged(tagged) => mask_value(&tagged.value),
        other => other.clone(),
    }
}

impl From<BTreeMap<String, Value>> for Extra {
    fn from(map: BTreeMap<String, Value>) -> Self {
        Self(map)
    }
}

impl fmt::Debug for Extra {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.masked()).finish()
    }
}

impl Serialize for Extra {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let masked = self.masked();
        let mut map = serializer.serialize_map(Some(masked.len()))?;
        for (k, v) in &masked {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Extra {
    /// A mapping, or null (`extra:` with nothing under it).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Self(Option::<BTreeMap<String, Value>>::deserialize(deserializer)?.unwrap_or_default()))
    }
}
