//! HERMES_HOME: it exists and is writable, only its owner may enter it (0700), the files that
//! hold secrets or conversations are not readable by other users, and the state database opens.
//! Nothing here changes a mode: the fix is printed for the owner to run.

use super::report::{Report, shell_word};
use crate::config::Home;
use crate::store::StoreLocation;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Files directly under HERMES_HOME that hold secrets (tokens, keys) or other people's messages.
const SECRET_FILES: &[&str] = &[".env", "config.yaml", "auth.json", "state.db", "state.db-wal", "state.db-shm", "cron/jobs.json"];
/// Folders whose every file is secret: the pairing store and the Matrix keys.
const SECRET_TREES: &[&str] = &["platforms"];
/// How deep a secret tree is searched (the Matrix store nests two levels).
const MAX_DEPTH: usize = 4;

/// Paths that let other users in, with their permission bits.
type OpenPaths = Vec<(PathBuf, u32)>;

pub(super) async fn check(report: &mut Report, home: &Home, config: &crate::config::Config) {
    let root = home.root();
    let Ok(meta) = std::fs::metadata(&root) else {
        report.fail(
            &format!("HERMES_HOME {} does not exist", root.display()),
            &format!("mkdir -m 700 {} (or point HERMES_HOME / --home at your hermes folder)", shell_word(&root)),
        );
        return;
    };
    permissions(report, &root, meta.permissions().mode());
    if writable(report, &root) {
        store(report, &crate::gateway::store_location(config, home)).await;
    }
}

fn permissions(report: &mut Report, root: &Path, root_mode: u32) {
    let root_mode = root_mode & 0o777;
    if root_mode & 0o077 != 0 {
        report.fail(
            &format!("HERMES_HOME {} is open to other users (mode {root_mode:03o}; it holds tokens and conversations)", root.display()),
            &format!("chmod 700 {}", shell_word(root)),
        );
    } else {
        report.ok(&format!("HERMES_HOME {} is private (mode {root_mode:03o})", root.display()));
    }
    let (files, dirs) = open_secrets(root);
    if files.is_empty() && dirs.is_empty() {
        report.ok("secret files (.env, config.yaml, state.db, cron/jobs.json, platforms/) are readable by their owner only");
        return;
    }
    let open: Vec<&(PathBuf, u32)> = files.iter().chain(&dirs).collect();
    let what = match open.as_slice() {
        [(path, mode)] => format!("{} is open to other users (mode {mode:03o})", path.display()),
        many => {
            let listed: Vec<String> = many.iter().map(|(path, mode)| format!("{} ({mode:03o})", path.display())).collect();
            format!("{} secret files and folders are open to other users: {}", many.len(), listed.join(", "))
        }
    };
    report.fail(&what, &fix_for(&files, &dirs));
}

/// One command fixing every finding, so it can be pasted once.
fn fix_for(files: &[(PathBuf, u32)], dirs: &[(PathBuf, u32)]) -> String {
    let words = |list: &[(PathBuf, u32)]| list.iter().map(|(p, _)| shell_word(p)).collect::<Vec<_>>().join(" ");
    match (files.is_empty(), dirs.is_empty()) {
        (false, true) => format!("chmod 600 {}", words(files)),
        (true, false) => format!("chmod 700 {}", words(dirs)),
        _ => format!("chmod 600 {} && chmod 700 {}", words(files), words(dirs)),
    }
}

/// Secret files and folders whose mode lets group or others in: (files, folders), with modes.
fn open_secrets(root: &Path) -> (OpenPaths, OpenPaths) {
    let (mut files, mut dirs) = (Vec::new(), Vec::new());
    for name in SECRET_FILES {
        let path = root.join(name);
        if let Some(mode) = open_mode(&path) {
            files.push((path, mode));
        }
    }
    for tree in SECRET_TREES {
        walk(&root.join(tree), 0, &mut files, &mut dirs);
    }
    (files, dirs)
}

fn walk(dir: &Path, depth: usize, files: &mut OpenPaths, dirs: &mut OpenPaths) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    if let Some(mode) = open_mode(dir) {
        dirs.push((dir.to_path_buf(), mode));
    }
    for entry in entries.flatten() {
        let path = entry.path();
        // Symlinks are not followed: their targets are not HERMES_HOME's to judge.
        match entry.file_type() {
            Ok(t) if t.is_dir() && depth < MAX_DEPTH => walk(&path, depth + 1, files, dirs),
            Ok(t) if t.is_file() => {
                if let Some(mode) = open_mode(&path) {
                    files.push((path, mode));
                }
            }
            _ => {}
        }
    }
}

/// The permission bits of `path` when group or others have any access to it.
fn open_mode(path: &Path) -> Option<u32> {
    let mode = std::fs::symlink_metadata(path).ok()?.permissions().mode() & 0o777;
    (mode & 0o077 != 0).then_some(mode)
}

fn writable(report: &mut Report, root: &Path) -> bool {
    let probe = root.join(".doctor-write-test");
    match std::fs::write(&probe, b"ok").and_then(|_| std::fs::remove_file(&probe)) {
        Ok(()) => {
            report.ok(&format!("HERMES_HOME {} is writable", root.display()));
            true
        }
        Err(e) => {
            report.fail(
                &format!("HERMES_HOME {} is not writable: {e}", root.display()),
                &format!("chown -R \"$USER\" {} (the gateway's user must own it)", shell_word(root)),
            );
            false
        }
    }
}

async fn store(report: &mut Report, location: &StoreLocation) {
    if let StoreLocation::Sqlite { path, .. } = location
        && !path.exists()
    {
        report.ok(&format!("no state database yet ({} is created at the first start)", path.display()));
        return;
    }
    match (location.open().await, location) {
        (Ok(_), _) => report.ok(&format!("state database {} opens", location.describe())),
        (Err(e), StoreLocation::Sqlite { path, .. }) => report.fail(
            &format!("state database: {e}"),
            &format!("stop the gateway and move {} aside to start fresh, or restore a backup", shell_word(path)),
        ),
        #[cfg(feature = "postgres")]
        (Err(e), StoreLocation::Postgres(_)) => report.fail(
            &format!("state database: {e}"),
            "check store.postgres.url (or DATABASE_URL): the server, the user and its password, and that the database exists",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn open_secret_files_and_folders_are_found_and_one_command_fixes_them() {
        let home = tempfile::tempdir().unwrap();
        let root = home.path();
        std::fs::write(root.join(".env"), "TELEGRAM_BOT_TOKEN=1:x\n").unwrap();
        chmod(&root.join(".env"), 0o644);
        std::fs::write(root.join("config.yaml"), "").unwrap();
        chmod(&root.join("config.yaml"), 0o600);
        let pairing = root.join("platforms/pairing");
        std::fs::create_dir_all(&pairing).unwrap();
        chmod(&root.join("platforms"), 0o700);
        chmod(&pairing, 0o755);
        std::fs::write(pairing.join("telegram-approved.json"), "{}").unwrap();
        chmod(&pairing.join("telegram-approved.json"), 0o640);
        let (files, dirs) = open_secrets(root);
        let names: Vec<String> = files.iter().map(|(p, _)| p.strip_prefix(root).unwrap().display().to_string()).collect();
        assert_eq!(names, vec![".env", "platforms/pairing/telegram-approved.json"]);
        assert_eq!(dirs.iter().map(|(p, m)| (p.clone(), *m)).collect::<Vec<_>>(), vec![(pairing.clone(), 0o755)]);
        let fix = fix_for(&files, &dirs);
        assert_eq!(
            fix,
            format!(
                "chmod 600 {} {} && chmod 700 {}",
                root.join(".env").display(),
                pairing.join("telegram-approved.json").display(),
                pairing.display()
            )
        );
    }

    #[test]
    fn paths_with_spaces_are_quoted_for_the_shell() {
        assert_eq!(shell_word(Path::new("/home/a/.hermes/.env")), "/home/a/.hermes/.env");
        assert_eq!(shell_word(Path::new("/home/a b/it's")), r"'/home/a b/it'\''s'");
    }
}
