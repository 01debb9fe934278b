//! Where a job's result goes and what it says: the `deliver` grammar (`local`, `origin`, a
//! platform's home channel, `platform:chat_id[:thread_id]`, `all`, or a comma list of these,
//! deduplicated), the wrapped body (`cron.wrap_response`), the failure text, silence, and the
//! [`Occurrence`] a delivery is keyed by, so that a retried delivery posts at most once.

use super::job::{Job, Origin};
use chrono::{DateTime, Utc};
use hermes_adapter::{ChatTarget, ChatTargetError, Platform};
use std::collections::BTreeMap;

/// The forms `deliver` accepts, for error messages and help.
pub const DELIVER_FORMS: &str =
    "local, origin, a platform name (its home channel), platform:chat_id[:thread_id], all, or a comma list of these";

/// Each connected platform's home channel, as a target.
pub type Homes = BTreeMap<String, ChatTarget>;

/// Why a `deliver` value cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("deliver '{value}': {reason}. Use {DELIVER_FORMS}")]
pub struct DeliverError {
    pub value: String,
    pub reason: String,
}

/// Check a `deliver` value's syntax when a job is created or edited (the targets themselves are
/// resolved at each run, against the home channels of that moment).
pub fn check(deliver: &str) -> Result<(), DeliverError> {
    for part in parts(deliver) {
        if let Some(reason) = syntax_problem(part) {
            return Err(DeliverError { value: deliver.to_string(), reason });
        }
    }
    Ok(())
}

fn parts(deliver: &str) -> impl Iterator<Item = &str> {
    deliver.split(',').map(str::trim).filter(|p| !p.is_empty())
}

fn syntax_problem(part: &str) -> Option<String> {
    if !part.contains(':') {
        let valid = part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        return (!valid).then(|| format!("'{part}' is not a platform name"));
    }
    ChatTarget::parse(part).err().map(|e| format!("'{part}' is not a target ({e})"))
}

/// Where one run's result goes, resolved against the job's origin and the home channels.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resolved {
    pub targets: Vec<ChatTarget>,
    /// Parts that named nowhere reachable (no home channel, platform not connected).
    pub unreachable: Vec<Unreachable>,
}

/// A part of `deliver` that names nowhere this run can reach.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unreachable {
    #[error("origin: the job has no origin and no home channel is set")]
    NoOriginNoHome,
    #[error("{platform}: no home channel is set (send /sethome there)")]
    NoHome { platform: String },
    #[error("{part}: {source}")]
    BadTarget { part: String, source: ChatTargetError },
}

/// Resolve `job.deliver` (empty = `origin` when the job has one, else `local`).
pub fn resolve(job: &Job, homes: &Homes) -> Resolved {
    let deliver = effective(job);
    let mut resolved = Resolved::default();
    for part in parts(&deliver) {
        match resolve_part(part, job.origin.as_ref(), homes) {
            Ok(targets) => {
                for t in targets {
                    if !resolved.targets.contains(&t) {
                        resolved.targets.push(t);
                    }
                }
            }
            Err(why) => resolved.unreachable.push(why),
        }
    }
    resolved
}

/// The job's `deliver`, with the default filled in.
pub fn effective(job: &Job) -> String {
    if !job.deliver.trim().is_empty() {
        return job.deliver.trim().to_string();
    }
    if job.origin.is_some() { "origin".into() } else { "local".into() }
}

fn resolve_part(part: &str, origin: Option<&Origin>, homes: &Homes) -> Result<Vec<ChatTarget>, Unreachable> {
    let lower = part.to_ascii_lowercase();
    match lower.as_str() {
        "local" => Ok(Vec::new()),
        "all" => Ok(homes.values().cloned().collect()),
        "origin" => match origin {
            Some(o) => Ok(vec![origin_target(o)]),
            // As Hermes: a job without an origin goes to the first home channel.
            None => homes.values().next().cloned().map(|t| vec![t]).ok_or(Unreachable::NoOriginNoHome),
        },
        platform if !part.contains(':') => match (homes.get(platform), origin) {
            (Some(home), _) => Ok(vec![home.clone()]),
            (None, Some(o)) if o.platform.eq_ignore_ascii_case(platform) => Ok(vec![origin_target(o)]),
            _ => Err(Unreachable::NoHome { platform: platform.to_string() }),
        },
        _ => ChatTarget::parse(part).map(|t| vec![t]).map_err(|source| Unreachable::BadTarget { part: part.to_string(), source }),
    }
}

fn origin_target(origin: &Origin) -> ChatTarget {
    ChatTarget {
        platform: Platform::new(origin.platform.to_ascii_lowercase()),
        chat_id: origin.chat_id.clone(),
        thread_id: origin.thread_id.clone().filter(|t| !t.is_empty()),
    }
}

/// The message a successful run posts: wrapped in a header naming the job when
/// `cron.wrap_response` is on (Hermes' exact shape), otherwise the answer alone.
pub fn body(job: &Job, content: &str, wrap: bool) -> String {
    if !wrap {
        return content.to_string();
    }
    format!(
        "Cronjob Response: {name}\n(job_id: {id})\n-------------\n\n{content}\n\nTo stop or manage this job, send me a new message (e.g. \"stop reminder {name}\").",
        name = job.name,
        id = job.id
    )
}

/// The message a failed run posts, whatever the job's delivery says about silence.
pub fn failure_text(job: &Job, summary: &str) -> String {
    format!("⚠️ Cron '{}' failed: {summary}", job.name)
}

/// Whether an answer asks for no delivery: a silence token, as a chat answer would be
/// ([`crate::agent::is_silence`]), or, for a scheduled run, an answer that starts with
/// `[SILENT]` or ends with it on a line of its own. A mention mid-sentence is delivered.
pub fn is_silent(answer: &str) -> bool {
    let trimmed = answer.trim();
    crate::agent::is_silence(trimmed) || trimmed.starts_with("[SILENT]") || trimmed.lines().last().is_some_and(|l| l.trim() == "[SILENT]")
}

/// One occurrence of a job, named for its delivery: the host renders it, with each target, into
/// the outbox key that makes a retried or raced delivery of the same occurrence find it already
/// sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Occurrence {
    pub job_id: String,
    /// When the occurrence was due (not when it ran).
    pub at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(deliver: &str, origin: Option<(&str, &str, Option<&str>)>) -> Job {
        let mut job = Job::for_tests("j1", "ping");
        job.deliver = deliver.into();
        job.origin = origin.map(|(p, c, t)| Origin::new(p, c, t.map(str::to_string)));
        job
    }

    fn homes() -> Homes {
        let mut homes = Homes::new();
        homes.insert("discord".into(), ChatTarget::parse("discord:555").unwrap());
        homes.insert("telegram".into(), ChatTarget::parse("telegram:-100:7").unwrap());
        homes
    }

    fn shown(r: &Resolved) -> Vec<String> {
        r.targets.iter().map(|t| format!("{}:{}:{}", t.platform, t.chat_id, t.thread_id.as_deref().unwrap_or("-"))).collect()
    }

    #[test]
    fn each_form_resolves_to_its_targets() {
        let origin = Some(("telegram", "42", Some("9")));
        let cases: &[(&str, &[&str])] = &[
            ("origin", &["telegram:42:9"]),
            ("", &["telegram:42:9"]),
            ("local", &[]),
            ("discord", &["discord:555:-"]),
            ("telegram", &["telegram:-100:7"]),
            ("all", &["discord:555:-", "telegram:-100:7"]),
            ("slack:C1:123.4", &["slack:C1:123.4"]),
            ("origin, telegram:42:9, all, discord", &["telegram:42:9", "discord:555:-", "telegram:-100:7"]),
        ];
        for (deliver, want) in cases {
            assert_eq!(shown(&resolve(&job(deliver, origin), &homes())), *want, "deliver {deliver:?}");
        }
    }

    #[test]
    fn no_origin_falls_back_to_a_home_and_names_what_is_unreachable() {
        assert_eq!(shown(&resolve(&job("", None), &homes())), Vec::<String>::new(), "no origin: local by default");
        assert_eq!(shown(&resolve(&job("origin", None), &homes())), ["discord:555:-"]);
        let r = resolve(&job("slack", None), &homes());
        assert!(r.targets.is_empty());
        assert!(r.unreachable[0].to_string().contains("slack: no home channel"), "{r:?}");
        let r = resolve(&job("slack", Some(("slack", "C9", None))), &Homes::new());
        assert_eq!(shown(&r), ["slack:C9:-"], "a platform without a home goes to the origin on it");
    }

    #[test]
    fn bad_syntax_is_refused_with_the_forms() {
        assert!(check("origin,telegram:1:2,all").is_ok());
        let e = check("origin, tele gram").unwrap_err().to_string();
        assert!(e.contains("'tele gram' is not a platform name") && e.contains("platform:chat_id"), "{e}");
        assert!(check("telegram:").is_err());
    }

    #[test]
    fn silence_is_only_an_explicit_marker() {
        for s in ["[SILENT]", " silent ", "NO_REPLY", "no reply", "[SILENT] nothing new", "Checked.\n[SILENT]", "[SILENT]\n"] {
            assert!(is_silent(s), "{s:?}");
        }
        for s in ["Use [SILENT] when idle", "3 new issues", "", "SILENTLY failing builds"] {
            assert!(!is_silent(s), "{s:?}");
        }
    }

    #[test]
    fn the_body_is_wrapped_as_hermes_wraps_it() {
        let j = job("origin", None);
        let b = body(&j, "hi", true);
        assert!(b.starts_with("Cronjob Response: ping\n(job_id: j1)\n-------------\n\nhi\n\n"), "{b}");
        assert!(b.ends_with("(e.g. \"stop reminder ping\")."));
        assert_eq!(body(&j, "hi", false), "hi");
        assert_eq!(failure_text(&j, "provider timeout"), "⚠️ Cron 'ping' failed: provider timeout");
    }

    #[test]
    fn each_unreachable_part_is_named_with_why() {
        let cases = [
            ("origin", "origin: the job has no origin and no home channel is set".to_string()),
            ("slack", "slack: no home channel is set (send /sethome there)".to_string()),
            ("telegram:", format!("telegram:: {}", ChatTargetError::EmptyChat)),
        ];
        for (deliver, why) in cases {
            let shown: Vec<String> = resolve(&job(deliver, None), &Homes::new()).unreachable.iter().map(ToString::to_string).collect();
            assert_eq!(shown, [why], "deliver {deliver:?}");
        }
    }
}
