//! The gateway's side of scheduled runs: the [`ticker`] beside the adapters, the [`host`] that
//! runs a job as an agent turn and delivers it, the [`owner`] checks (a job stops when its
//! owner loses access). The agent's `cronjob` tool, bound to the chat that asked, is
//! part of the turn's tool host ([`crate::gateway::turn::cron_tool`]).

pub(crate) mod host;
pub(crate) mod owner;
pub(crate) mod ticker;
