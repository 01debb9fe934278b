//! Each run's record on disk: `cron/output/<job_id>/<YYYY-MM-DD_HH-MM-SS>.md` (Hermes' layout
//! and shape: the job, the run time, the schedule, the prompt and the response or the error),
//! written whether or not the result is delivered, with the newest `cron.output_retention`
//! files kept per job.

use super::job::Job;
use super::schedule::Zone;
use chrono::{DateTime, Utc};
use std::path::{Path, PathBuf};

/// How a run ended, as its output file records it.
pub(crate) enum Outcome<'a> {
    Answer(&'a str),
    Error(&'a str),
}

/// Write the run's file and prune the job's folder to `keep` files; returns the file's path.
pub(crate) fn save(
    cron_dir: &Path,
    job: &Job,
    ran_at: DateTime<Utc>,
    zone: Zone,
    outcome: Outcome<'_>,
    keep: usize,
) -> std::io::Result<PathBuf> {
    let dir = job_dir(cron_dir, &job.id);
    let path = free_name(&dir, &file_stamp(ran_at, zone));
    crate::fs_atomic::write_private(&path, render(job, ran_at, zone, &outcome).as_bytes())?;
    prune(&dir, keep.max(1))?;
    Ok(path)
}

/// The folder of a job's outputs. The id is a file name here, so anything but hex, `-` and `_`
/// is replaced (a hand-edited jobs.json must not write outside `output/`).
pub(crate) fn job_dir(cron_dir: &Path, job_id: &str) -> PathBuf {
    let safe: String = job_id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect();
    cron_dir.join("output").join(if safe.is_empty() { "_".to_string() } else { safe })
}

/// The latest output of a job (for `context_from`), up to `max_chars`.
pub(crate) fn latest(cron_dir: &Path, job_id: &str, max_chars: usize) -> Option<String> {
    let mut files = outputs(&job_dir(cron_dir, job_id)).ok()?;
    let newest = files.pop()?;
    let text = std::fs::read_to_string(newest).ok()?;
    Some(text.chars().take(max_chars).collect())
}

fn render(job: &Job, ran_at: DateTime<Utc>, zone: Zone, outcome: &Outcome<'_>) -> String {
    let (heading, body) = match outcome {
        Outcome::Answer(text) => ("Response", *text),
        Outcome::Error(text) => ("Error", *text),
    };
    format!(
        "# Cron Job: {}\n\n**Job ID:** {}\n**Run Time:** {}\n**Schedule:** {}\n\n## Prompt\n\n{}\n\n## {heading}\n\n{body}\n",
        job.name,
        job.id,
        zone.stamp(ran_at),
        job.schedule_display,
        job.prompt
    )
}

/// `YYYY-MM-DD_HH-MM-SS` in the configured zone, as Hermes names output files.
fn file_stamp(at: DateTime<Utc>, zone: Zone) -> String {
    match DateTime::parse_from_rfc3339(&zone.stamp(at)) {
        Ok(local) => local.format("%Y-%m-%d_%H-%M-%S").to_string(),
        Err(_) => at.format("%Y-%m-%d_%H-%M-%S").to_string(),
    }
}

/// `<stamp>.md`, or `<stamp>-2.md`… when two runs start within the same second.
fn free_name(dir: &Path, stamp: &str) -> PathBuf {
    let mut path = dir.join(format!("{stamp}.md"));
    let mut n = 2;
    while path.exists() {
        path = dir.join(format!("{stamp}-{n}.md"));
        n += 1;
    }
    path
}

/// The job's output files, oldest first (their names sort by time).
fn outputs(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(dir)?.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "md")).collect();
    files.sort();
    Ok(files)
}

fn prune(dir: &Path, keep: usize) -> std::io::Result<()> {
    let files = outputs(dir)?;
    let excess = files.len().saturating_sub(keep);
    for old in &files[..excess] {
        std::fs::remove_file(old)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_written_in_hermes_shape_and_old_ones_are_pruned() {
        let dir = tempfile::tempdir().unwrap();
        let job = Job::for_tests("abc123", "digest");
        let t0 = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        let first = save(dir.path(), &job, t0, Zone::Local, Outcome::Answer("all quiet"), 2).unwrap();
        let text = std::fs::read_to_string(&first).unwrap();
        assert!(text.starts_with("# Cron Job: digest\n\n**Job ID:** abc123\n"), "{text}");
        assert!(text.contains("## Prompt\n\n") && text.ends_with("## Response\n\nall quiet\n"), "{text}");
        let same_second = save(dir.path(), &job, t0, Zone::Local, Outcome::Error("boom"), 2).unwrap();
        assert_ne!(first, same_second, "two runs in one second keep both files");
        assert!(std::fs::read_to_string(&same_second).unwrap().contains("## Error\n\nboom"));
        for minutes in 1..5 {
            save(dir.path(), &job, t0 + chrono::Duration::minutes(minutes), Zone::Local, Outcome::Answer("x"), 2).unwrap();
        }
        assert_eq!(outputs(&job_dir(dir.path(), "abc123")).unwrap().len(), 2, "retention keeps the newest two");
        assert_eq!(latest(dir.path(), "abc123", 9).unwrap(), "# Cron Jo");
    }

    #[test]
    fn a_hostile_job_id_stays_inside_the_output_folder() {
        let dir = std::path::Path::new("/h/cron");
        assert_eq!(job_dir(dir, "../../etc"), dir.join("output").join("______etc"));
    }
}
