//! What the shell knows at a point of the command: the working directory, the variables the
//! command itself set, and the files it made executable.
//!
//! A change made where it might not happen (inside `if`, a loop, after `&&`/`||`) degrades to
//! "unknown" unless it changes nothing, so `cd /tmp || cd ws; rm x` is judged as possibly
//! outside rather than guessed.

use std::collections::HashMap;
use std::path::PathBuf;

#[derive(Debug, Clone)]
pub(crate) struct Scope {
    /// `None` once the working directory cannot be known before the command runs.
    pub(crate) cwd: Option<PathBuf>,
    /// Variables assigned by the command; `None` when assigned a value known only at run time.
    vars: HashMap<String, Option<String>>,
    /// Files made executable earlier in the command (`chmod +x f; ./f`).
    pub(crate) made_executable: Vec<PathBuf>,
}

/// A variable's value as far as it is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value {
    Known(String),
    Unknown,
}

impl Scope {
    pub(crate) fn new(cwd: PathBuf) -> Self {
        Scope { cwd: Some(cwd), vars: HashMap::new(), made_executable: Vec::new() }
    }

    /// The scope a new shell process starts with: the same directory, none of the unexported
    /// variables (which are therefore unknown there).
    pub(crate) fn for_child_shell(&self) -> Self {
        Scope { cwd: self.cwd.clone(), vars: HashMap::new(), made_executable: self.made_executable.clone() }
    }

    pub(crate) fn change_dir(&mut self, to: Option<PathBuf>, conditional: bool) {
        self.cwd = if conditional && to != self.cwd { None } else { to };
    }

    pub(crate) fn assign(&mut self, name: &str, value: Option<String>, conditional: bool) {
        let previous = self.vars.get(name).cloned().flatten();
        let value = if conditional && value != previous { None } else { value };
        self.vars.insert(name.to_owned(), value);
    }

    /// A variable the command assigned, or `None` if it never did (the environment's value).
    pub(crate) fn assigned(&self, name: &str) -> Option<Value> {
        self.vars.get(name).map(|value| value.clone().map_or(Value::Unknown, Value::Known))
    }
}
