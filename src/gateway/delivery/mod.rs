//! Delivery: everything that leaves the gateway for a chat — the [`deliverer`] (adapters,
//! courier, file roots), [`outbound`] rendering and chunking into outbox parts, the
//! [`courier`] that delivers them per chat through outages and restarts, [`stream_edit`] for
//! answers that grow in place, and the [`home_channels`] where unsolicited messages go.

pub mod courier;
pub mod deliverer;
pub mod home_channels;
pub mod outbound;
pub(crate) mod rights;
pub mod stream_edit;
#[cfg(test)]
mod stream_edit_tests;
