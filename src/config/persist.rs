//! Writing changes back to `config.yaml` (`/model --global`): the file is read as plain YAML,
//! only the keys being changed are touched, and the result replaces the file atomically.

use std::path::Path;

/// Set `model.default` (and `model.provider` when given) in the config file at `path`, turning a
/// `model: <name>` string into a mapping when needed.
pub fn write_model_default(path: &Path, model: &str, provider: Option<&str>) -> Result<(), String> {
    use serde_yaml_ng::{Mapping, Value};
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let mut root: Value = if text.trim().is_empty() {
        Value::Mapping(Mapping::new())
    } else {
        serde_yaml_ng::from_str(&text).map_err(|e| format!("{} is not valid YAML: {e}", path.display()))?
    };
    let Some(map) = root.as_mapping_mut() else {
        return Err(format!("{} does not hold a mapping at the top level", path.display()));
    };
    let key = Value::String("model".into());
    let mut model_map = match map.remove(&key) {
        Some(Value::Mapping(m)) => m,
        // `model: some-name` becomes `model: {default: …}`.
        _ => Mapping::new(),
    };
    model_map.insert(Value::String("default".into()), Value::String(model.into()));
    if let Some(p) = provider {
        model_map.insert(Value::String("provider".into()), Value::String(p.into()));
    }
    map.insert(key, Value::Mapping(model_map));
    let out = serde_yaml_ng::to_string(&root).map_err(|e| format!("cannot render the configuration: {e}"))?;
    crate::fs_atomic::write(path, out.as_bytes()).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_or_mapping_model_is_updated_and_other_keys_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        std::fs::write(&path, "model: gpt-4o-mini\nagent:\n  max_turns: 7\n").unwrap();
        write_model_default(&path, "claude-sonnet-4", Some("anthropic")).unwrap();
        let v: serde_yaml_ng::Value = serde_yaml_ng::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["model"]["default"].as_str(), Some("claude-sonnet-4"));
        assert_eq!(v["model"]["provider"].as_str(), Some("anthropic"));
        assert_eq!(v["agent"]["max_turns"].as_u64(), Some(7));
        write_model_default(&path, "m2", None).unwrap();
        let v: serde_yaml_ng::Value = serde_yaml_ng::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!((v["model"]["default"].as_str(), v["model"]["provider"].as_str()), (Some("m2"), Some("anthropic")));
    }
}
