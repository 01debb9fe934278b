//! Delivery: everything that leaves the gateway for a chat — a [`reply`] and its outbox key,
//! the [`deliverer`] that sends it (adapters, courier, file roots), the pure [`plan`] that
//! renders and chunks it into keyed parts, [`outbound`]'s attachments and outbox rows, the
//! [`courier`] that delivers them per chat through outages and restarts (its [`sweeper`] finds
//! the lanes nobody works), [`stream_edit`] for
//! answers that grow in place, the [`home_channels`] where unsolicited messages go, and the
//! [`rights`] that say who may have a message sent where (`send_message`, `/cron add`'s
//! `deliver`, `/sethome`).

pub mod courier;
pub(crate) mod deliverer;
pub(crate) mod home_channels;
pub(crate) mod outbound;
pub(crate) mod plan;
pub(crate) mod reply;
pub(crate) mod rights;
pub(crate) mod spoken;
pub(crate) mod stream_edit;
#[cfg(test)]
mod stream_edit_tests;
pub(crate) mod sweeper;
