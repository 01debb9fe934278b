//! What the gateway's unit tests share.

pub(crate) mod support;
