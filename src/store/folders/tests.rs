//! The folder suite on a directory of files; what only files do.

use super::suite;
use super::{FileFolder, Folder, LockWait};
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::Duration;

/// Two handles on one directory, as the gateway and the CLI hold.
fn two(dir: &tempfile::TempDir) -> (Arc<dyn Folder>, Arc<dyn Folder>) {
    let at = dir.path().join("cron");
    (Arc::new(FileFolder::new(at.clone(), ".jobs.lock")), Arc::new(FileFolder::new(at, ".jobs.lock")))
}

#[test]
fn a_change_is_seen_whole_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let (one, other) = two(&dir);
    suite::a_change_is_seen_whole_elsewhere(one, other);
}

#[test]
fn changes_under_the_lock_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (one, other) = two(&dir);
    suite::changes_under_the_lock_lose_nothing(one, other);
}

#[test]
fn a_held_lock_refuses_a_second_holder_until_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let (one, other) = two(&dir);
    suite::a_held_lock_refuses_a_second_holder_until_dropped(one, other);
}

#[test]
fn documents_are_private_and_lock_files_and_sub_folders_are_not_documents() {
    let dir = tempfile::tempdir().unwrap();
    let (one, _) = two(&dir);
    let mut lock = one.lock(LockWait::Forever).unwrap();
    lock.write("jobs.json", b"{}").unwrap();
    lock.commit().unwrap();
    std::fs::create_dir(dir.path().join("cron/output")).unwrap();
    assert_eq!(one.names().unwrap(), vec!["jobs.json".to_string()]);
    let mode = |p: &str| std::fs::metadata(dir.path().join(p)).unwrap().permissions().mode() & 0o777;
    assert_eq!((mode("cron"), mode("cron/jobs.json")), (0o700, 0o600));
}

#[test]
fn a_bounded_wait_goes_on_without_a_wedged_process_lock() {
    let dir = tempfile::tempdir().unwrap();
    let (one, other) = two(&dir);
    // Another process's lock, held by an open file description of its own.
    std::fs::create_dir_all(dir.path().join("cron")).unwrap();
    let wedged = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(dir.path().join("cron/.jobs.lock")).unwrap();
    wedged.lock().unwrap();
    let mut lock = other.lock(LockWait::AtMost(Duration::from_millis(50))).expect("the scheduler stays alive");
    lock.write("jobs.json", b"{\"jobs\":[]}").unwrap();
    lock.commit().unwrap();
    assert!(one.read("jobs.json").unwrap().is_some());
}
