//! `hermes-guard`: the two layers between the agent's `terminal` tool and the machine.
//!
//! - [`classify`](mod@classify) reads a command's syntax tree (after undoing quotes, escapes, `$IFS`,
//!   wrappers, `sh -c`/`eval`/substitutions and pipes into interpreters) and answers with a
//!   [`Verdict`]: safe, flagged with stable [`keys`] to approve, or hardline (never runs).
//!   The parser is `brush-parser`; why, and what was rejected, is in the `classify::syntax`
//!   module docs.
//! - [`sandbox`] confines whatever runs with Landlock: writes only in the workspace and a
//!   private temp dir, `HERMES_HOME` unreadable. It is the guarantee; the classifier only
//!   decides what to ask about. A disguise the classifier misses still cannot write outside.
//!
//! Modules: [`verdict`] (the answer), [`keys`] (the approval keys), [`classify`](mod@classify), [`sandbox`].

pub mod classify;
pub mod keys;
pub mod sandbox;
pub mod verdict;

pub use classify::{ClassifyContext, classify};
pub use verdict::{Finding, Severity, Verdict};
