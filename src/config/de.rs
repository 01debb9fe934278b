//! The lenient value deserializers (lists as a YAML list or a comma-separated string, ids as bare
//! numbers), shared with the adapter crates through `hermes-adapter`.

pub(crate) use hermes_adapter::values::{opt_stringish, split_list, string_list};
