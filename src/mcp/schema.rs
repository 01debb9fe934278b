//! Input schemas repaired so every provider accepts them: `definitions` becomes `$defs` (and its
//! `#/definitions/` references follow), an object schema always has `type` and `properties`, and
//! `required` names only properties that exist.

use serde_json::{Map, Value, json};

/// `schema` repaired; anything that is not an object becomes an empty object schema.
pub(crate) fn repair(schema: &Value) -> Value {
    let mut schema = match schema {
        Value::Object(_) => schema.clone(),
        _ => json!({}),
    };
    rename_definitions(&mut schema);
    if let Value::Object(top) = &mut schema {
        top.entry("type").or_insert_with(|| json!("object"));
        if top.get("type") == Some(&json!("object")) {
            top.entry("properties").or_insert_with(|| json!({}));
        }
    }
    prune_required(&mut schema);
    schema
}

fn rename_definitions(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(defs) = map.remove("definitions") {
                match map.get_mut("$defs") {
                    Some(Value::Object(existing)) => {
                        if let Value::Object(defs) = defs {
                            for (k, v) in defs {
                                existing.entry(k).or_insert(v);
                            }
                        }
                    }
                    _ => {
                        map.insert("$defs".into(), defs);
                    }
                }
            }
            if let Some(Value::String(reference)) = map.get_mut("$ref")
                && let Some(rest) = reference.strip_prefix("#/definitions/")
            {
                *reference = format!("#/$defs/{rest}");
            }
            map.values_mut().for_each(rename_definitions);
        }
        Value::Array(items) => items.iter_mut().for_each(rename_definitions),
        _ => {}
    }
}

fn prune_required(value: &mut Value) {
    match value {
        Value::Object(map) => {
            prune_one(map);
            map.values_mut().for_each(prune_required);
        }
        Value::Array(items) => items.iter_mut().for_each(prune_required),
        _ => {}
    }
}

fn prune_one(map: &mut Map<String, Value>) {
    let Some(Value::Array(required)) = map.get("required") else { return };
    let properties = map.get("properties").and_then(Value::as_object);
    let kept: Vec<Value> =
        required.iter().filter(|r| r.as_str().is_some_and(|name| properties.is_some_and(|p| p.contains_key(name)))).cloned().collect();
    if kept.is_empty() {
        map.remove("required");
    } else {
        map.insert("required".into(), Value::Array(kept));
    }
}
