//! `Extra`: the free-form `extra:` map of a platform block, now defined in `hermes-adapter` so that
//! adapter crates share it; re-exported here for the configuration's users.

pub use hermes_adapter::values::Extra;
