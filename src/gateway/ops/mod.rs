//! Operations: what keeps the gateway running and what operators see — the [`adapters`] built
//! from their registrations, the [`supervisor`] (one task per adapter, restarts with
//! [`backoff`], parking), [`instance_lock`] and [`credential_lock`] (one gateway per home, one
//! per bot token), [`health`], the [`admin`] listener, the [`status_file`], [`notify`] (what
//! systemd sees), periodic [`chores`], the [`media_sweep`], [`heap_trim`], the
//! [`process_guard`], and the [`lease`]s that say which replica serves which platform.

pub(crate) mod adapters;
pub(crate) mod admin;
pub(crate) mod backoff;
pub(crate) mod chores;
pub(crate) mod credential_lock;
pub(crate) mod health;
pub(crate) mod heap_trim;
pub(crate) mod instance_lock;
pub(crate) mod lease;
pub(crate) mod media_sweep;
pub(crate) mod notify;
pub(crate) mod process_guard;
pub(crate) mod status_file;
pub(crate) mod supervisor;
