//! Classifies a shell command line from its syntax tree.
//!
//! The pipeline, one module each:
//! - [`normalize`]: the text variants judged (the command as bash reads it, and a de-obfuscated
//!   copy without ANSI escapes, NUL bytes, compatibility forms or line continuations) and the
//!   size and nesting limits checked before parsing.
//! - [`syntax`]: parsing with `brush-parser`; a parse failure is flagged, never safe.
//! - [`walk`]: the walk over lists, pipelines, compound commands and redirections, keeping a
//!   [`scope::Scope`] (working directory, variables) so that `cd /tmp && rm x` or `X=rm; $X`
//!   resolve as bash would resolve them.
//! - [`expand`]: a word to the fields bash passes (quotes, escapes, `$IFS`, `~`, braces, known
//!   variables); command and process substitutions are classified as nested code.
//! - [`invocation`]: peels wrappers (`sudo`, `env`, `command`, `nice`, `timeout`, …) off a simple
//!   command and names what really runs.
//! - [`paths`]: where a path points (the workspace, a harmless device, a raw disk, a system or
//!   credential file, elsewhere).
//! - [`rules`]: what each command does with its arguments, one module per family.
//!
//! Every variant of the command is judged and the most severe answer wins, so a normalisation
//! can only add findings, never hide what bash would really run.

mod expand;
mod invocation;
mod judge;
mod normalize;
mod paths;
mod rules;
mod scope;
mod syntax;
mod walk;

use crate::verdict::{Findings, Verdict};
use std::path::{Path, PathBuf};

/// What the classifier needs to know about the machine: where the agent may write and what
/// counts as home.
#[derive(Debug, Clone)]
pub struct ClassifyContext {
    workspace: Vec<PathBuf>,
    writable: Vec<PathBuf>,
    home: PathBuf,
    hermes_home: PathBuf,
    /// Where the command starts when not in the workspace (the terminal's `workdir`).
    working_dir: Option<PathBuf>,
    sudo_password_configured: bool,
}

impl ClassifyContext {
    /// `workspace` is the working directory commands start in and may write under; `home` is
    /// the user's home (what `~` and `$HOME` mean). `HERMES_HOME` defaults to `home/.hermes`.
    pub fn new(workspace: impl Into<PathBuf>, home: impl Into<PathBuf>) -> Self {
        let home = paths::lexical_normal(&home.into());
        ClassifyContext {
            workspace: with_real_path(paths::lexical_normal(&workspace.into())),
            writable: Vec::new(),
            hermes_home: home.join(".hermes"),
            home,
            working_dir: None,
            sudo_password_configured: false,
        }
    }

    /// Where Hermes keeps its configuration and secrets (`.env`, `config.yaml`).
    pub fn with_hermes_home(mut self, hermes_home: impl Into<PathBuf>) -> Self {
        self.hermes_home = paths::lexical_normal(&hermes_home.into());
        self
    }

    /// Another directory the sandbox lets commands write (the private temp dir, extra
    /// read-write dirs): writes there are not "outside the workspace".
    pub fn with_writable_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.writable.extend(with_real_path(paths::lexical_normal(&dir.into())));
        self
    }

    /// The directory the command starts in, when it is not the workspace itself (writes there
    /// are still judged against the workspace).
    pub fn with_working_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.working_dir = Some(paths::lexical_normal(&dir.into()));
        self
    }

    /// Where the command starts: the working directory if one was set, else the workspace.
    pub fn working_dir(&self) -> &Path {
        self.working_dir.as_deref().unwrap_or_else(|| self.workspace())
    }

    /// Whether a sudo password is configured (`SUDO_PASSWORD`); without one, `sudo -S` is the
    /// model guessing passwords and is never runnable.
    pub fn with_sudo_password_configured(mut self, configured: bool) -> Self {
        self.sudo_password_configured = configured;
        self
    }

    pub fn workspace(&self) -> &Path {
        // `new` always stores the workspace as given first.
        self.workspace.first().map_or(Path::new("/"), PathBuf::as_path)
    }

    pub fn home(&self) -> &Path {
        &self.home
    }

    pub fn hermes_home(&self) -> &Path {
        &self.hermes_home
    }
}

/// The path as given and, when it differs, as the file system resolves it (a workspace reached
/// through a symlink is still the workspace).
fn with_real_path(path: PathBuf) -> Vec<PathBuf> {
    match std::fs::canonicalize(&path) {
        Ok(real) if real != path => vec![path, real],
        _ => vec![path],
    }
}

/// Judges one command line as the agent's `terminal` tool would run it (`bash -c <command>` in
/// the workspace).
pub fn classify(command: &str, context: &ClassifyContext) -> Verdict {
    let mut findings = Findings::default();
    for variant in normalize::variants(command) {
        judge::Judge::new(context, &mut findings).top_level(&variant);
    }
    findings.into_verdict()
}
