//! `Secret`: a string that never prints, shared with the adapter crates through `hermes-adapter`.

pub(crate) use hermes_adapter::secret::{Secret, optional};
