//! Operations: what keeps the gateway running and what operators see — the [`adapters`] built
//! from their registrations, the [`supervisor`] (one task per adapter, restarts with
//! [`backoff`], parking), [`instance_lock`] and [`credential_lock`] (one gateway per home, one
//! per bot token), [`health`], the [`admin`] listener, the [`status_file`], [`notify`] (what
//! systemd sees), periodic [`chores`], the [`media_sweep`], [`heap_trim`] and the
//! [`process_guard`].

pub mod adapters;
pub mod admin;
pub mod backoff;
pub mod chores;
pub mod credential_lock;
pub mod health;
pub mod heap_trim;
pub mod instance_lock;
pub mod media_sweep;
pub mod notify;
pub mod process_guard;
pub mod status_file;
pub mod supervisor;
