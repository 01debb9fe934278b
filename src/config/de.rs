//! Lenient deserializers for the value shapes Hermes users actually write: user lists as a YAML
//! list *or* one comma-separated string (the form the `*_ALLOWED_USERS` variables use), and ids
//! given as bare numbers (`home_channel: 123456`).

use serde::Deserializer;
use serde::de::{self, SeqAccess, Visitor};
use std::fmt;

/// Splits `"1, 2,,3"` into `["1", "2", "3"]`: items trimmed, empty items dropped.
pub fn split_list(s: &str) -> Vec<String> {
    s.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect()
}

/// A list of strings from a YAML list, a comma-separated string, a single number or null.
pub(crate) fn string_list<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    deserializer.deserialize_any(ListVisitor)
}

/// An optional string that may be written as a number; null and "" are `None`.
pub(crate) fn opt_stringish<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
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
