//! What every folder must do, run against a directory of files and a shared PostgreSQL folder:
//! each function takes two handles on one folder, as two processes (or replicas) would hold.
//! They block, so the async tests call them from `spawn_blocking`.

use super::{Folder, LockWait};
use std::sync::Arc;

/// A change of two documents is seen whole by the other handle, with new revisions.
pub(crate) fn a_change_is_seen_whole_elsewhere(one: Arc<dyn Folder>, other: Arc<dyn Folder>) {
    assert_eq!(other.read("a.json").unwrap(), None);
    assert_eq!(other.revision("a.json").unwrap(), None);
    let mut lock = one.lock(LockWait::Forever).unwrap();
    lock.write("b.json", b"{\"b\":1}").unwrap();
    lock.write("a.json", b"{\"a\":1}").unwrap();
    assert_eq!(lock.read("a.json").unwrap().as_deref(), Some(&b"{\"a\":1}"[..]), "a change reads its own writes");
    lock.commit().unwrap();
    assert_eq!(other.read("a.json").unwrap().as_deref(), Some(&b"{\"a\":1}"[..]));
    assert_eq!(other.names().unwrap(), vec!["a.json".to_string(), "b.json".to_string()]);
    let before = other.revision("a.json").unwrap().expect("a revision once written");
    let mut lock = one.lock(LockWait::Forever).unwrap();
    lock.write("a.json", b"{\"a\":2}").unwrap();
    lock.commit().unwrap();
    assert_ne!(other.revision("a.json").unwrap(), Some(before), "a write is a new revision");
}

/// Read-modify-writes from both handles at once, on several threads, lose no update.
pub(crate) fn changes_under_the_lock_lose_nothing(one: Arc<dyn Folder>, other: Arc<dyn Folder>) {
    const WRITERS: usize = 6;
    const EACH: usize = 15;
    let threads: Vec<_> = (0..WRITERS)
        .map(|i| {
            let folder = if i % 2 == 0 { one.clone() } else { other.clone() };
            std::thread::spawn(move || {
                for _ in 0..EACH {
                    let mut lock = folder.lock(LockWait::Forever).unwrap();
                    let count: usize = lock.read("count").unwrap().map_or(0, |b| String::from_utf8(b).unwrap().parse().unwrap());
                    lock.write("count", (count + 1).to_string().as_bytes()).unwrap();
                    lock.commit().unwrap();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    assert_eq!(one.read("count").unwrap(), Some((WRITERS * EACH).to_string().into_bytes()));
}

/// The no-wait lock is had by one holder at a time, and free again once dropped.
pub(crate) fn a_held_lock_refuses_a_second_holder_until_dropped(one: Arc<dyn Folder>, other: Arc<dyn Folder>) {
    let held = one.try_hold(".tick.lock").unwrap().expect("free at first");
    assert!(other.try_hold(".tick.lock").unwrap().is_none(), "another holder is refused at once");
    assert!(one.try_hold(".tick.lock").unwrap().is_none(), "so is a second tick of the same process");
    assert!(other.try_hold(".other.lock").unwrap().is_some(), "another lock's name is another lock");
    drop(held);
    assert!(other.try_hold(".tick.lock").unwrap().is_some(), "free again once released");
}
