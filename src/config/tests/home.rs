//! `Home` resolution and layout.

use super::super::{ConfigError, Home};
use super::env;
use std::path::PathBuf;

#[test]
fn explicit_then_hermes_home_then_home() {
    let e = env(&[("HERMES_HOME", "/srv/hermes"), ("HOME", "/home/u")]);
    assert_eq!(Home::resolve(Some("/x".into()), None, &e).unwrap().root(), PathBuf::from("/x"));
    assert_eq!(Home::resolve(None, None, &e).unwrap().root(), PathBuf::from("/srv/hermes"));
    let e = env(&[("HOME", "/home/u"), ("HERMES_HOME", "")]);
    assert_eq!(Home::resolve(None, None, &e).unwrap().root(), PathBuf::from("/home/u/.hermes"));
    let e = env(&[("HOME", "/home/u"), ("HERMES_HOME", "~/h")]);
    assert_eq!(Home::resolve(None, None, &e).unwrap().root(), PathBuf::from("/home/u/h"));
    assert!(matches!(Home::resolve(None, None, &env(&[])), Err(ConfigError::NoHome)));
}

#[test]
fn profile_path() {
    let e = env(&[("HOME", "/home/u")]);
    let home = Home::resolve(None, Some("work"), &e).unwrap();
    assert_eq!(home.root(), PathBuf::from("/home/u/.hermes/profiles/work"));
    assert_eq!(home.profile(), Some("work"));
    assert_eq!(home.config_file(), PathBuf::from("/home/u/.hermes/profiles/work/config.yaml"));
    let default = Home::resolve(None, Some("default"), &e).unwrap();
    assert_eq!(default.root(), PathBuf::from("/home/u/.hermes"));
    for bad in ["", "../x", "a b", "a/b", "é"] {
        assert!(matches!(Home::resolve(None, Some(bad), &e), Err(ConfigError::InvalidProfile(_))), "{bad:?}");
    }
}

#[test]
fn layout_and_ensure_dirs() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("h");
    let home = Home::at(&root);
    assert_eq!(home.env_file(), root.join(".env"));
    assert_eq!(home.shared_state_db(), root.join("state.db"));
    assert_eq!(home.lock_file(), root.join("gateway.lock"));
    assert_eq!(home.pid_file(), root.join("gateway.pid"));
    assert_eq!(home.status_file(), root.join("gateway_state.json"));
    assert_eq!(home.clean_shutdown_marker(), root.join(".clean_shutdown"));
    assert_eq!(home.memories_dir(), root.join("memories"));
    assert_eq!(home.skills_dir(), root.join("skills"));
    assert_eq!(home.cron_dir(), root.join("cron"));
    assert_eq!(home.platforms_dir(), root.join("platforms"));
    home.ensure_dirs().unwrap();
    assert!(home.logs_dir().is_dir() && home.cache_dir().is_dir());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&root).unwrap().permissions().mode() & 0o777, 0o700);
        assert_eq!(std::fs::metadata(home.cache_dir()).unwrap().permissions().mode() & 0o777, 0o700, "attachments are private");
    }
}
