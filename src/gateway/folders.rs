//! Where the cron jobs and the pairing documents are kept: in the shared store's folders when it
//! keeps them (PostgreSQL: every replica and the CLI see one set of jobs, claims, codes and
//! approvals), else in HERMES_HOME's `cron/` and `platforms/pairing/`, in Hermes' own formats.

use crate::config::{Config, Home};
use crate::cron::store::{DEFAULT_LOCK_WAIT, JobStore, LOCK_FILE as JOBS_LOCK_FILE};
use crate::gateway::intake::pairing::store::PairingStore;
use crate::store::Store;
use crate::store::folders::{FileFolder, Folder, FolderKind};

use std::sync::Arc;

/// The gateway's two folders of documents.
#[derive(Debug, Clone)]
pub(crate) struct Folders {
    home: Home,
    cron: Arc<dyn Folder>,
    pairing: Arc<dyn Folder>,
}

impl Folders {
    /// The folders `store` keeps, or HERMES_HOME's when it keeps none (`store` is `None` when
    /// it was not opened because it is not shared).
    pub(crate) fn of(home: &Home, store: Option<&Store>) -> Folders {
        let shared = |kind| store.and_then(|store| store.shared_folder(kind));
        let cron = shared(FolderKind::Cron).unwrap_or_else(|| Arc::new(FileFolder::new(home.cron_dir(), JOBS_LOCK_FILE)));
        let pairing = shared(FolderKind::Pairing).unwrap_or_else(|| Arc::new(PairingStore::file_folder(home.pairing_dir())));
        Folders { home: home.clone(), cron, pairing }
    }

    /// The cron jobs (the ticker's markers stay in this machine's cron folder).
    pub(crate) fn jobs(&self) -> JobStore {
        JobStore::in_folder(self.home.cron_dir(), self.cron.clone(), DEFAULT_LOCK_WAIT)
    }

    pub(crate) fn pairing(&self) -> PairingStore {
        PairingStore::in_folder(self.pairing.clone())
    }
}

/// For the CLI: the store when its folders are shared (opened on the caller's runtime, which
/// must outlive every use of the folders), `None` for SQLite, whose folders are HERMES_HOME's
/// and which is then not opened at all.
pub(crate) async fn shared_store(config: &Config, home: &Home) -> Result<Option<Store>, crate::store::StoreError> {
    match super::store_location(config, home) {
        crate::store::StoreLocation::Sqlite { .. } => Ok(None),
        #[allow(unreachable_patterns)] // without the `postgres` feature SQLite is the only store
        location => location.open().await.map(Some),
    }
}

#[cfg(feature = "postgres")]
/// What copying one document into a shared store did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CopiedDocument {
    pub folder: &'static str,
    pub name: String,
    /// False: the same document was there already (copied before).
    pub copied: bool,
}

#[cfg(feature = "postgres")]
#[derive(Debug, thiserror::Error)]
pub(crate) enum FolderCopyError {
    #[error("cannot copy {}: {source}", path.display())]
    Io { path: std::path::PathBuf, source: std::io::Error },
    #[error(
        "the PostgreSQL store already has a different {} (a gateway has changed it since the last copy, and copying again would lose that change); nothing more was copied. Copy into an empty database, or keep the PostgreSQL store as it is",
        path.display()
    )]
    Conflict { path: std::path::PathBuf },
}

#[cfg(feature = "postgres")]
/// Copy HERMES_HOME's cron jobs (`cron/jobs.json`, as Hermes or hermes wrote it) and pairing
/// documents into `store`'s shared folders, idempotently: a document already there the same is
/// left, a different one is a conflict. The ticker's markers and the runs' outputs stay local.
pub(crate) fn copy_home_folders(
    home: &Home,
    store: &dyn crate::store::folders::SharedFolders,
) -> Result<Vec<CopiedDocument>, FolderCopyError> {
    let local = Folders::of(home, None);
    let mut copied = Vec::new();
    for (kind, from, wanted) in [
        (FolderKind::Cron, &local.cron, (|name: &str| name == crate::cron::store::JOBS_FILE) as fn(&str) -> bool),
        (FolderKind::Pairing, &local.pairing, |name: &str| name.ends_with(".json")),
    ] {
        let Some(to) = store.shared_folder(kind) else { continue };
        let names = from.names().map_err(|source| FolderCopyError::Io { path: from.locate(""), source })?;
        for name in names.into_iter().filter(|n| wanted(n)) {
            let Some(bytes) = from.read(&name).map_err(|source| FolderCopyError::Io { path: from.locate(&name), source })? else {
                continue;
            };
            copied.push(copy_document(to.as_ref(), kind, &name, &bytes)?);
        }
    }
    Ok(copied)
}

#[cfg(feature = "postgres")]
fn copy_document(to: &dyn Folder, kind: FolderKind, name: &str, bytes: &[u8]) -> Result<CopiedDocument, FolderCopyError> {
    let io = |source| FolderCopyError::Io { path: to.locate(name), source };
    let mut lock = to.lock(crate::store::folders::LockWait::Forever).map_err(io)?;
    let copied = match lock.read(name).map_err(io)? {
        Some(there) if there == bytes => false,
        Some(_) => return Err(FolderCopyError::Conflict { path: to.locate(name) }),
        None => {
            lock.write(name, bytes).map_err(io)?;
            true
        }
    };
    lock.commit().map_err(io)?;
    Ok(CopiedDocument { folder: kind.name(), name: name.to_string(), copied })
}

#[cfg(test)]
#[cfg(feature = "postgres")]
mod tests {
    use super::*;
    use crate::cron::job::Job;
    use crate::cron::schedule::{Schedule, ScheduleKind, Zone};
    use crate::gateway::intake::pairing::store::{CodeRequest, now};
    use chrono::{DateTime, Duration as Span, Utc};

    const UTC: Zone = Zone::Named(chrono_tz::UTC);

    async fn replica(url: &str, home: &Home) -> (Store, Folders) {
        let store: Store = Arc::new(
            crate::store::PostgresStore::connect(&crate::store::PostgresOptions { url: url.to_string(), pool_size: 4 }).await.unwrap(),
        );
        let folders = Folders::of(home, Some(&store));
        (store, folders)
    }

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().to_utc()
    }

    /// Three replicas tick at the same moments, on threads of their own: every occurrence of a
    /// job due each minute is taken by exactly one of them, and recorded once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn three_replicas_ticking_together_take_each_occurrence_once() {
        let url = crate::store::postgres_tests::scratch_url().await;
        let homes: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
        let mut replicas = Vec::new();
        for home in &homes {
            replicas.push(replica(&url, &Home::at(home.path())).await);
        }
        let start = at("2026-03-01T10:00:00Z");
        let every_minute = Schedule { kind: ScheduleKind::Cron { expr: "* * * * *".into() }, display: "* * * * *".into() };
        let jobs: Vec<_> = replicas.iter().map(|(_, folders)| folders.jobs()).collect();
        let first = jobs[0].clone();
        tokio::task::spawn_blocking(move || first.create(Job::planned("ping", "ping", every_minute, start, UTC).unwrap()).unwrap())
            .await
            .unwrap();
        let taken = tokio::task::spawn_blocking(move || {
            let mut taken = Vec::new();
            for minute in 1..=5 {
                let now = start + Span::minutes(minute) + Span::seconds(1);
                let threads: Vec<_> = jobs
                    .iter()
                    .enumerate()
                    .map(|(i, store)| {
                        let store = store.clone();
                        std::thread::spawn(move || {
                            let owner = format!("replica-{i}");
                            let due = store.take_due(now, UTC, &owner, Span::minutes(30)).unwrap();
                            for run in &due.runs {
                                store.finish_run(&run.job.id, run.occurrence, Default::default(), now, UTC).unwrap();
                            }
                            due.runs.iter().map(|run| run.occurrence).collect::<Vec<_>>()
                        })
                    })
                    .collect();
                for thread in threads {
                    taken.extend(thread.join().unwrap());
                }
            }
            taken
        })
        .await
        .unwrap();
        let mut taken = taken;
        taken.sort();
        let expected: Vec<_> = (1..=5).map(|minute| start + Span::minutes(minute)).collect();
        assert_eq!(taken, expected, "each occurrence taken once, by one replica");
    }

    /// `hermes store migrate --to postgres` copies the home's jobs and pairings; the copy is
    /// idempotent, and refuses to overwrite what a replica changed since.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_homes_jobs_and_pairings_are_copied_once_and_a_later_change_is_never_overwritten() {
        let url = crate::store::postgres_tests::scratch_url().await;
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        let local = Folders::of(&home, None);
        let (store, shared) = replica(&url, &home).await;
        let (jobs, pairing) = (local.jobs(), local.pairing());
        let (shared_jobs, shared_pairing) = (shared.jobs(), shared.pairing());
        let home_for_copy = home.clone();
        tokio::task::spawn_blocking(move || {
            let schedule = Schedule { kind: ScheduleKind::Interval { minutes: 60 }, display: "every 60m".into() };
            let job = jobs.create(Job::planned("report", "send the report", schedule, Utc::now(), UTC).unwrap()).unwrap();
            let CodeRequest::Issued(code) = pairing.request_code("telegram", "42", "Ann", now()).unwrap() else { panic!("a code") };
            pairing.approve("telegram", &code, now()).unwrap();
            std::fs::create_dir_all(home_for_copy.cron_dir().join("output")).unwrap();

            let first = copy_home_folders(&home_for_copy, store.as_ref()).unwrap();
            let names: Vec<(&str, &str, bool)> = first.iter().map(|d| (d.folder, d.name.as_str(), d.copied)).collect();
            assert!(names.contains(&("cron", "jobs.json", true)), "{names:?}");
            assert!(names.contains(&("pairing", "telegram-approved.json", true)), "{names:?}");
            assert_eq!(shared_jobs.find("report").unwrap().id, job.id, "the job is in the shared store");
            assert!(shared_pairing.approved_ids("telegram").unwrap().contains("42"), "so is the approval");

            let again = copy_home_folders(&home_for_copy, store.as_ref()).unwrap();
            assert!(again.iter().all(|d| !d.copied), "a second copy changes nothing: {again:?}");

            shared_jobs.pause("report", Some("paused on a replica".into()), Utc::now()).unwrap();
            jobs.remove("report").unwrap();
            let refused = copy_home_folders(&home_for_copy, store.as_ref()).unwrap_err();
            assert!(matches!(refused, FolderCopyError::Conflict { .. }), "{refused}");
            assert!(shared_jobs.find("report").is_ok(), "the replica's change is kept");
        })
        .await
        .unwrap();
    }
}
