//! Scheduled jobs (reference §5.4, §7): "every weekday at 9, summarize my notifications and post
//! them here", once per occurrence, in the right chat, across restarts, crashes and racing
//! processes.
//!
//! - [`schedule`]: what users type (`30m`, `every 2h`, `0 9 * * mon-fri`, ISO times in the
//!   configured zone) and when it fires next.
//! - [`job`] and [`store`]: Hermes' `cron/jobs.json`, read as Hermes writes it, rewritten
//!   atomically under `cron/.jobs.lock`; due selection advances and claims before anything runs.
//! - [`ticker`]: the minute tick under `cron/.tick.lock`, woken early by changes; [`status`]: its
//!   heartbeat and health.
//! - [`run`]: one run (script, [`prompt`], agent turn through the [`run::CronHost`]), its
//!   [`output`] file, and [`delivery`] of the result or the failure.
//! - [`manage`]: creating and changing jobs, shared by `/cron`, `hermes cron` and the `cronjob`
//!   tool; [`owner`]: a job runs only while its owner may (else it is paused with the reason).
//!
//! An occurrence runs at most once: a recurring job's next run is saved before it runs, a run
//! holds a claim in the job record, and every delivery carries the key job id + occurrence.

pub mod delivery;
pub mod job;
pub(crate) mod manage;
pub(crate) mod output;
pub(crate) mod owner;
pub(crate) mod prompt;
pub mod run;
pub mod schedule;
pub(crate) mod script;
pub(crate) mod status;
pub mod store;
pub mod ticker;
