//! Writing changes back to `config.yaml` (`/model --global`, `/approve always`, the "Always
//! Approve" of `/reload-mcp`, `hermes mcp add|remove`) and `.env` (`/sethome`): the file is read as it is, only the keys being changed are touched, and the
//! result replaces the file atomically. Each read-modify-write holds a lock (in this process and,
//! through a `.<file>.lock` beside it, across processes), so two changes made at the same moment,
//! say `/sethome` in two chats, both land.

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

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

/// Set `approvals.mcp_reload_confirm` ("Always Approve" of `/reload-mcp` writes `false`).
pub fn set_mcp_reload_confirm(path: &Path, confirm: bool) -> Result<(), PersistError> {
    use serde_yaml_ng::{Mapping, Value};
    edit(path, |map| {
        let key = Value::String("approvals".into());
        let mut approvals = match map.remove(&key) {
            Some(Value::Mapping(m)) => m,
            _ => Mapping::new(),
        };
        approvals.insert(Value::String("mcp_reload_confirm".into()), Value::Bool(confirm));
        map.insert(key, Value::Mapping(approvals));
    })
}

/// Write `mcp_servers.<name>` (replacing an entry of that name), with only the keys that differ
/// from their defaults, keeping every other key of the file.
pub fn write_mcp_server(path: &Path, name: &str, server: &super::McpServerConfig) -> Result<(), PersistError> {
    use serde_yaml_ng::{Mapping, Value};
    let mut entry = serde_yaml_ng::to_value(server).map_err(PersistError::Render)?;
    prune_empty(&mut entry);
    edit(path, |map| {
        let key = Value::String("mcp_servers".into());
        let mut servers = match map.remove(&key) {
            Some(Value::Mapping(m)) => m,
            _ => Mapping::new(),
        };
        servers.insert(Value::String(name.into()), entry);
        map.insert(key, Value::Mapping(servers));
    })
}

/// Remove `mcp_servers.<name>`; `Ok(false)` (and the file untouched) when there is none.
pub fn remove_mcp_server(path: &Path, name: &str) -> Result<bool, PersistError> {
    use serde_yaml_ng::Value;
    edit_if(path, |map| {
        let Some(Value::Mapping(servers)) = map.get_mut("mcp_servers") else { return false };
        let removed = servers.remove(name).is_some();
        if removed && servers.is_empty() {
            map.remove("mcp_servers");
        }
        removed
    })
}

/// Drop nulls, empty lists and empty mappings (the defaults) from a serialized entry.
fn prune_empty(value: &mut serde_yaml_ng::Value) {
    use serde_yaml_ng::Value;
    if let Value::Mapping(map) = value {
        for (_, v) in map.iter_mut() {
            prune_empty(v);
        }
        map.retain(|_, v| match v {
            Value::Null => false,
            Value::Sequence(s) => !s.is_empty(),
            Value::Mapping(m) => !m.is_empty(),
            _ => true,
        });
    }
}

/// Runs `change` (a read-modify-write of the file at `path`) while no other change of a settings
/// file runs, here or in another hermes process. The lock is held for one small rewrite, so
/// waiting for it blocks only for a moment.
fn locked<T>(path: &Path, change: impl FnOnce() -> Result<T, PersistError>) -> Result<T, PersistError> {
    static IN_PROCESS: Mutex<()> = Mutex::new(());
    let _in_process = IN_PROCESS.lock().unwrap_or_else(PoisonError::into_inner);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let lock_path = path.with_file_name(format!(".{name}.lock"));
    let failed = |source| PersistError::Write { path: lock_path.clone(), source };
    let lock = OpenOptions::new().create(true).truncate(false).write(true).mode(0o600).open(&lock_path).map_err(failed)?;
    lock.lock().map_err(failed)?;
    // Released when `lock` closes, after the change.
    change()
}

/// Read the file at `path` (empty when missing), change its top-level mapping, write it back.
fn edit(path: &Path, change: impl FnOnce(&mut serde_yaml_ng::Mapping)) -> Result<(), PersistError> {
    edit_if(path, |map| {
        change(map);
        true
    })
    .map(|_| ())
}

/// [`edit`] where `change` says whether it changed anything; the file is written only then.
fn edit_if(path: &Path, change: impl FnOnce(&mut serde_yaml_ng::Mapping) -> bool) -> Result<bool, PersistError> {
    locked(path, || edit_unlocked(path, change))
}

fn edit_unlocked(path: &Path, change: impl FnOnce(&mut serde_yaml_ng::Mapping) -> bool) -> Result<bool, PersistError> {
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
    if !change(map) {
        return Ok(false);
    }
    let out = serde_yaml_ng::to_string(&root).map_err(PersistError::Render)?;
    crate::fs_atomic::write(path, out.as_bytes()).map_err(|source| PersistError::Write { path: path.to_path_buf(), source })?;
    Ok(true)
}

/// Set (or, with `None`, remove) variables in the `.env` file at `path`, keeping every other
/// line as it is; the file stays private (0600) because it holds secrets.
pub fn set_env_vars(path: &Path, vars: &[(&str, Option<&str>)]) -> Result<(), PersistError> {
    locked(path, || set_env_vars_unlocked(path, vars))
}

fn set_env_vars_unlocked(path: &Path, vars: &[(&str, Option<&str>)]) -> Result<(), PersistError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(source) => return Err(PersistError::Read { path: path.to_path_buf(), source }),
    };
    // A value comes from outside (a chat's id): a line break would add a variable of its own
    // choosing, and a quote would end the literal it is written in.
    if let Some((key, _)) = vars.iter().find(|(_, v)| v.is_some_and(|v| v.chars().any(|c| c.is_control() || c == '\''))) {
        let refused = std::io::Error::other(format!("the value of {key} holds a control character or a single quote"));
        return Err(PersistError::Write { path: path.to_path_buf(), source: refused });
    }
    let names: Vec<&str> = vars.iter().map(|(k, _)| *k).collect();
    let mut lines: Vec<String> = text.lines().filter(|l| !env_line_sets(l, &names)).map(str::to_string).collect();
    for (key, value) in vars {
        if let Some(value) = value {
            lines.push(format!("{key}={}", quote_env(value)));
        }
    }
    let mut out = lines.join("\n");
    out.push('\n');
    crate::fs_atomic::write_private(path, out.as_bytes()).map_err(|source| PersistError::Write { path: path.to_path_buf(), source })
}

/// Whether a `.env` line assigns one of `names` (`KEY=…` or `export KEY=…`).
fn env_line_sets(line: &str, names: &[&str]) -> bool {
    let line = line.trim_start();
    let line = line.strip_prefix("export ").unwrap_or(line);
    line.split_once('=').is_some_and(|(k, _)| names.contains(&k.trim()))
}

/// A value as `.env` reads it back, to the letter: bare when it is plain, else single-quoted (a
/// double-quoted or bare `$NAME` would be replaced by that variable, a secret perhaps, when read).
fn quote_env(value: &str) -> String {
    if value.chars().all(|c| c.is_ascii_alphanumeric() || "-_.:@/".contains(c)) { value.to_string() } else { format!("'{value}'") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_variables_are_replaced_and_other_lines_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".env");
        std::fs::write(&path, "# comment\nTELEGRAM_BOT_TOKEN=123:abc\nexport TELEGRAM_HOME_CHANNEL=1\nTELEGRAM_HOME_CHANNEL_THREAD_ID=4\n")
            .unwrap();
        set_env_vars(&path, &[("TELEGRAM_HOME_CHANNEL", Some("-100200")), ("TELEGRAM_HOME_CHANNEL_THREAD_ID", None)]).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "# comment\nTELEGRAM_BOT_TOKEN=123:abc\nTELEGRAM_HOME_CHANNEL=-100200\n");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let env = crate::config::Env::from_dotenv_file(&path).unwrap();
        assert_eq!(env.get("TELEGRAM_HOME_CHANNEL"), Some("-100200"));
    }

    #[test]
    fn a_hostile_value_is_written_literally_or_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".env");
        std::fs::write(&path, "OPENAI_API_KEY=sk-secret\n").unwrap();
        set_env_vars(&path, &[("MATRIX_HOME_CHANNEL", Some("!room:$OPENAI_API_KEY \"x\" #y"))]).unwrap();
        let env = crate::config::Env::from_dotenv_file(&path).unwrap();
        assert_eq!(env.get("MATRIX_HOME_CHANNEL"), Some("!room:$OPENAI_API_KEY \"x\" #y"), "read back as written, nothing expanded");
        for hostile in ["1\nOPENAI_BASE_URL=http://evil", "it's"] {
            assert!(set_env_vars(&path, &[("TELEGRAM_HOME_CHANNEL", Some(hostile))]).is_err(), "{hostile:?}");
        }
        let env = crate::config::Env::from_dotenv_file(&path).unwrap();
        assert_eq!((env.get("OPENAI_BASE_URL"), env.get("TELEGRAM_HOME_CHANNEL")), (None, None), "nothing refused was written");
    }

    #[test]
    fn changes_made_at_the_same_moment_all_land() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".env");
        let names: Vec<String> = (0..16).map(|n| format!("P{n}_HOME_CHANNEL")).collect();
        std::thread::scope(|scope| {
            for name in &names {
                let path = &path;
                scope.spawn(move || set_env_vars(path, &[(name.as_str(), Some("1"))]).unwrap());
            }
        });
        let env = crate::config::Env::from_dotenv_file(&path).unwrap();
        for name in &names {
            assert_eq!(env.get(name), Some("1"), "{name} was lost");
        }
    }

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

    #[test]
    fn an_mcp_server_is_written_without_defaults_and_removed_keeping_other_keys() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        std::fs::write(&path, "agent:\n  max_turns: 7\n").unwrap();
        let server = crate::config::McpServerConfig {
            command: Some("npx".into()),
            args: vec!["-y".into(), "server".into()],
            env: [("TOKEN".to_string(), "${GITHUB_TOKEN}".to_string())].into(),
            ..Default::default()
        };
        write_mcp_server(&path, "git hub", &server).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let v: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
        assert_eq!(v["mcp_servers"]["git hub"]["command"].as_str(), Some("npx"));
        assert_eq!(v["mcp_servers"]["git hub"]["env"]["TOKEN"].as_str(), Some("${GITHUB_TOKEN}"));
        assert!(!text.contains("null") && !text.contains("headers") && !text.contains("tools"), "defaults are not written: {text}");
        assert_eq!(v["agent"]["max_turns"].as_u64(), Some(7));
        let back: crate::config::McpServers = serde_yaml_ng::from_value(v["mcp_servers"].clone()).unwrap();
        assert_eq!(back["git hub"], server, "the entry reads back as written");
        assert!(remove_mcp_server(&path, "git hub").unwrap());
        assert!(!remove_mcp_server(&path, "git hub").unwrap(), "already gone");
        let v: serde_yaml_ng::Value = serde_yaml_ng::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert!(v.get("mcp_servers").is_none(), "no empty mapping left behind");
        assert_eq!(v["agent"]["max_turns"].as_u64(), Some(7));
    }

    #[test]
    fn mcp_reload_confirm_is_saved_beside_the_other_approval_settings() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        std::fs::write(&path, "approvals:\n  mode: manual\n").unwrap();
        set_mcp_reload_confirm(&path, false).unwrap();
        let v: serde_yaml_ng::Value = serde_yaml_ng::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["approvals"]["mcp_reload_confirm"].as_bool(), Some(false));
        assert_eq!(v["approvals"]["mode"].as_str(), Some("manual"));
    }
}
