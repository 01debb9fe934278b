//! Value shapes of configuration blocks, shared by the gateway's loader and the adapter crates:
//! lenient deserializers for what Hermes users actually write (user lists as a YAML list *or* one
//! comma-separated string, the form the `*_ALLOWED_USERS` variables use; ids given as bare numbers,
//! `home_channel: 123456`), and [`Extra`], the free-form `extra:` map whose secret-looking values
//! never print.

use serde::Deserializer;
use serde::de::{self, SeqAccess, Visitor};
use std::fmt;

/// Splits `"1, 2,,3"` into `["1", "2", "3"]`: items trimmed, empty items dropped.
pub fn split_list(s: &str) -> Vec<String> {
    s.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect()
}

/// A list of strings from a YAML list, a comma-separated string, a single number or null.
pub fn string_list<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    deserializer.deserialize_any(ListVisitor)
}

/// An optional string that may be written as a number; null and "" are `None`.
pub fn opt_stringish<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    Ok(deserializer.deserialize_any(ScalarVisitor)?.filter(|s| !s.is_empty()))
}

struct ListVisitor;

impl<'de> Visitor<'de> for ListVisitor {
    type Value = Vec<String>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of strings or a comma-separated string")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(split_list(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(vec![v.to_string()])
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(vec![v.to_string()])
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(item) = seq.next_element::<Item>()? {
            let item = item.0.trim();
            if !item.is_empty() {
                out.push(item.to_string());
            }
        }
        Ok(out)
    }
}

/// One list element: a string or a number.
struct Item(String);

impl<'de> serde::Deserialize<'de> for Item {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match deserializer.deserialize_any(ScalarVisitor)? {
            Some(s) => Ok(Item(s)),
            None => Err(de::Error::invalid_type(de::Unexpected::Unit, &"a string or a number")),
        }
    }
}

/// A string or number as a string; null as `None`.
struct ScalarVisitor;

impl Visitor<'_> for ScalarVisitor {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string or a number")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

/// Key fragments that mark a value as secret. Deliberately broad: masking a harmless value in
/// `config check` output costs nothing, printing a password does.
const SECRET_KEY_FRAGMENTS: [&str; 5] = ["token", "secret", "password", "passwd", "key"];

/// The free-form, adapter-specific `extra:` map of a platform block. Its keys are not checked
/// (adapters own them), but values under secret-looking keys are masked in Debug and Serialize,
/// because Hermes users keep passwords and tokens there (Matrix, email).
#[derive(Clone, Default, PartialEq)]
pub struct Extra(std::collections::BTreeMap<String, serde_json::Value>);

impl Extra {
    /// The real (unmasked) value under `key`.
    pub fn get(&self, key: &str) -> Option<&serde_json::Value> {
        self.0.get(key)
    }

    /// Whether the map has no entries.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The map with real values, for the adapter that owns these keys.
    pub fn as_map(&self) -> &std::collections::BTreeMap<String, serde_json::Value> {
        &self.0
    }

    /// Adds or replaces an entry.
    pub fn insert(&mut self, key: impl Into<String>, value: serde_json::Value) {
        self.0.insert(key.into(), value);
    }

    /// A copy with every value under a secret-looking key (at any depth) replaced by `****`.
    fn masked(&self) -> std::collections::BTreeMap<String, serde_json::Value> {
        self.0.iter().map(|(k, v)| (k.clone(), mask_entry(k, v))).collect()
    }
}

/// Whether a key of a free-form map names a secret (`token`, `password`, `api_key`, …).
pub fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    SECRET_KEY_FRAGMENTS.iter().any(|fragment| key.contains(fragment))
}

fn mask_entry(key: &str, value: &serde_json::Value) -> serde_json::Value {
    if is_secret_key(key) && !value.is_null() {
        return serde_json::Value::String("****".to_string());
    }
    mask_value(value)
}

fn mask_value(value: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), mask_entry(k, v))).collect()),
        Value::Array(items) => Value::Array(items.iter().map(mask_value).collect()),
        other => other.clone(),
    }
}

impl From<std::collections::BTreeMap<String, serde_json::Value>> for Extra {
    fn from(map: std::collections::BTreeMap<String, serde_json::Value>) -> Self {
        Self(map)
    }
}

impl fmt::Debug for Extra {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.masked()).finish()
    }
}

impl serde::Serialize for Extra {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let masked = self.masked();
        let mut map = serializer.serialize_map(Some(masked.len()))?;
        for (k, v) in &masked {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> serde::Deserialize<'de> for Extra {
    /// A mapping, or null (`extra:` with nothing under it).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Self(
            <Option<std::collections::BTreeMap<String, serde_json::Value>> as serde::Deserialize>::deserialize(deserializer)?
                .unwrap_or_default(),
        ))
    }
}
