//! Writing changes back to `config.yaml` (`/model --global`, `/approve always`): the file is read as plain YAML,
//! only the keys being changed are touched, and the result replaces the file atomically.

use std::path::{Path, PathBuf};

/// Why `config.yaml` could not be updated; the message names the file and is shown to the user
/// who asked for the change.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    /// The file exists but could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    /// The file is not YAML, so it is left alone rather than overwritten.
    #[error("{} is not valid YAML: {source}", path.display())]
    Yaml { path: PathBuf, source: serde_yaml_ng::Error },
    /// The file is YAML but not a mapping of settings.
    #[error("{} does not hold a mapping at the top level", path.display())]
    NotMapping { path: PathBuf },
    /// The changed configuration could not be written out as YAML.
    #[error("cannot render the configuration: {0}")]
    Render(serde_yaml_ng::Error),
    /// The new file could not replace the old one.
    #[error("cannot write {}: {source}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
}

/// Set `model.default` (and `model.provider` when given) in the config file at `path`, turning a
/// `model: <name>` string into a mapping when needed.
pub fn write_model_default(path: &Path, model: &str, provider: Option<&str>) -> Result<(), PersistError> {
    use serde_yaml_ng::{Mapping, Value};
    edit(path, |map| {
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
    })
}

/// Add `command` to the top-level `command_allowlist` (once), keeping every other key.
pub fn add_to_command_allowlist(path: &Path, command: &str) -> Result<(), PersistError> {
    use serde_yaml_ng::Value;
    edit(path, |map| {
        let key = Value::String("command_allowlist".into());
        let mut list = match map.remove(&key) {
            Some(Value::Sequence(list)) => list,
            _ => Vec::new(),
        };
        let entry = Value::String(command.into());
        if !list.contains(&entry) {
            list.push(entry);
        }
        map.insert(key, Value::Sequence(list));
    })
}

/// Read the file at `path` (empty when missing), change its top-level mapping, write it back.
fn edit(path: &Path, change: impl FnOnce(&mut serde_yaml_ng::Mapping)) -> Result<(), PersistError> {
    use serde_yaml_ng::{Mapping, Value};
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(source) => return Err(PersistError::Read { path: path.to_path_buf(), source }),
    };
    let mut root: Value = if text.trim().is_empty() {
        Value::Mapping(Mapping::new())
    } else {
        serde_yaml_ng::from_str(&text).map_err(|source| PersistError::Yaml { path: path.to_path_buf(), source })?
    };
    let Some(map) = root.as_mapping_mut() else {
        return Err(PersistError::NotMapping { path: path.to_path_buf() });
    };
    change(map);
    let out = serde_yaml_ng::to_string(&root).map_err(PersistError::Render)?;
    crate::fs_atomic::write(path, out.as_bytes()).map_err(|source| PersistError::Write { path: path.to_path_buf(), source })
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

    #[test]
    fn a_command_is_added_to_the_allowlist_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        std::fs::write(&path, "command_allowlist:\n  - make clean\nagent:\n  max_turns: 7\n").unwrap();
        add_to_command_allowlist(&path, "rm -rf build").unwrap();
        add_to_command_allowlist(&path, "rm -rf build").unwrap();
        let v: serde_yaml_ng::Value = serde_yaml_ng::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let list: Vec<&str> = v["command_allowlist"].as_sequence().unwrap().iter().filter_map(|e| e.as_str()).collect();
        assert_eq!(list, ["make clean", "rm -rf build"]);
        assert_eq!(v["agent"]["max_turns"].as_u64(), Some(7));
    }
}
