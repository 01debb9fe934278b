//! The state of one classification: the findings so far, the scope, and how much nesting is
//! left before the command is refused as too deep to judge.

use super::invocation::{Producer, Stdin};
use super::normalize::{MAX_COMMAND_BYTES, MAX_UNCLOSED_PARENS, nesting_depth, unclosed_parens};
use super::scope::Scope;
use super::{ClassifyContext, syntax};
use crate::keys;
use crate::verdict::Findings;

/// Nesting levels (syntax plus code inside code: `sh -c`, `$(…)`, `eval`) one command may use.
/// Bash-level recursion in the parser and the walk must fit a 2 MiB thread stack; nothing an
/// agent writes on purpose comes near this.
const NESTING_BUDGET: usize = 48;

/// Bytes of code one command may make the classifier parse, nested code included. Brace
/// expansion copies a word's substitutions into every alternative, so without a bound a short
/// command (`{a,b}{a,b}…$(…{a,b}…)`) could cost exponential time.
const WORK_BUDGET: usize = 4 * super::normalize::MAX_COMMAND_BYTES;

pub(crate) struct Judge<'a> {
    pub(crate) context: &'a ClassifyContext,
    findings: &'a mut Findings,
    pub(crate) scope: Scope,
    nesting_left: usize,
    work_left: usize,
    /// Inside `if`, a loop, a `case` arm or after `&&`/`||`: what runs here may not run.
    pub(crate) conditional: usize,
    /// Functions whose bodies are being walked, innermost last (a body calling itself in a pipe
    /// or in the background is a fork bomb).
    pub(crate) defining: Vec<String>,
    /// Every command run so far, in order (pipes and substitutions read their producers here).
    pub(crate) invoked: Vec<Producer>,
    /// The standard input of the compound command being walked (`curl x | { sh; }`).
    pub(crate) stdin: Stdin,
}

impl<'a> Judge<'a> {
    pub(crate) fn new(context: &'a ClassifyContext, findings: &'a mut Findings) -> Self {
        let scope = Scope::new(context.working_dir().to_path_buf());
        Judge {
            context,
            findings,
            scope,
            nesting_left: NESTING_BUDGET,
            work_left: WORK_BUDGET,
            conditional: 0,
            defining: Vec::new(),
            invoked: Vec::new(),
            stdin: Stdin::Inherited,
        }
    }

    pub(crate) fn flag(&mut self, key: &'static str, detail: impl Into<String>) {
        self.findings.add(key, detail);
    }

    pub(crate) fn top_level(mut self, text: &str) {
        self.code(text);
    }

    /// Classifies `text` as shell code run right here (`eval`, `source`); returns the commands
    /// it runs.
    pub(crate) fn code(&mut self, text: &str) -> Vec<Producer> {
        if text.len() > MAX_COMMAND_BYTES {
            self.flag(keys::PARSER_LIMIT, format!("{} bytes of shell code", text.len()));
            return Vec::new();
        }
        if text.len() >= self.work_left {
            self.work_left = 0;
            self.flag(keys::PARSER_LIMIT, "too much code to judge");
            return Vec::new();
        }
        self.work_left -= text.len() + 1;
        if unclosed_parens(text) > MAX_UNCLOSED_PARENS {
            // Parsing would take exponential time (see `MAX_UNCLOSED_PARENS`); such text is
            // unparseable in practice, so it is flagged as unparseable without trying.
            self.flag(keys::UNPARSEABLE, "too many unclosed parentheses to judge");
            return Vec::new();
        }
        let cost = 1 + nesting_depth(text);
        if cost > self.nesting_left {
            self.flag(keys::PARSER_LIMIT, "code nested too deeply to judge");
            return Vec::new();
        }
        self.nesting_left -= cost;
        let first = self.invoked.len();
        match syntax::parse(text) {
            Ok(program) => self.program(&program),
            Err(error) => self.flag(keys::UNPARSEABLE, error),
        }
        self.nesting_left += cost;
        self.invoked.get(first..).map(<[Producer]>::to_vec).unwrap_or_default()
    }

    /// Code run in a subshell (`$(…)`, `( … )`): it sees the scope but cannot change it.
    pub(crate) fn code_in_subshell(&mut self, text: &str) -> Vec<String> {
        let saved = self.scope.clone();
        let produced = self.code(text);
        self.scope = saved;
        produced.into_iter().map(|producer| producer.name).collect()
    }

    /// Code run by a new shell process (`sh -c`): same directory, none of this shell's
    /// unexported variables.
    pub(crate) fn code_in_child_shell(&mut self, text: &str) -> Vec<Producer> {
        let child = self.scope.for_child_shell();
        let saved = std::mem::replace(&mut self.scope, child);
        let produced = self.code(text);
        self.scope = saved;
        produced
    }

    /// Runs `walk` as a subshell: scope changes inside are forgotten afterwards.
    pub(crate) fn in_subshell(&mut self, walk: impl FnOnce(&mut Self)) {
        let saved = self.scope.clone();
        walk(self);
        self.scope = saved;
    }

    /// Runs `walk` where it may or may not happen.
    pub(crate) fn conditionally(&mut self, walk: impl FnOnce(&mut Self)) {
        self.conditional += 1;
        walk(self);
        self.conditional -= 1;
    }
}
