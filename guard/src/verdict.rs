//! What the classifier says about a command: safe, flagged for approval, or never runnable.

use crate::keys;

/// One reason a command needs approval or may never run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The stable pattern key (see [`crate::keys`]); approvals remember it.
    pub key: &'static str,
    /// What was seen, for the person approving (the offending command, path or flag).
    pub detail: String,
}

/// The classifier's answer about one command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing found: runs without asking (still inside the sandbox).
    Safe,
    /// Runs only after approval of every finding's key. Never empty.
    Flagged(Vec<Finding>),
    /// Never runs, whatever the approval mode.
    Hardline(Finding),
}

/// How bad a verdict is, ordered from harmless to never runnable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    Safe,
    Flagged,
    Hardline,
}

impl Verdict {
    pub fn severity(&self) -> Severity {
        match self {
            Verdict::Safe => Severity::Safe,
            Verdict::Flagged(_) => Severity::Flagged,
            Verdict::Hardline(_) => Severity::Hardline,
        }
    }

    /// The findings behind the verdict (empty when safe).
    pub fn findings(&self) -> &[Finding] {
        match self {
            Verdict::Safe => &[],
            Verdict::Flagged(findings) => findings,
            Verdict::Hardline(finding) => std::slice::from_ref(finding),
        }
    }

    /// The keys of [`Verdict::findings`], in order.
    pub fn keys(&self) -> Vec<&'static str> {
        self.findings().iter().map(|finding| finding.key).collect()
    }
}

/// Collects findings while a command is walked: one finding per key (approvals are per key, so
/// a second sighting adds nothing), the first hardline one kept apart.
#[derive(Debug, Default)]
pub(crate) struct Findings {
    flagged: Vec<Finding>,
    hardline: Option<Finding>,
}

impl Findings {
    pub(crate) fn add(&mut self, key: &'static str, detail: impl Into<String>) {
        if keys::is_hardline(key) {
            if self.hardline.is_none() {
                self.hardline = Some(Finding { key, detail: detail.into() });
            }
        } else if !self.flagged.iter().any(|finding| finding.key == key) {
            self.flagged.push(Finding { key, detail: detail.into() });
        }
    }

    pub(crate) fn into_verdict(self) -> Verdict {
        match (self.hardline, self.flagged.is_empty()) {
            (Some(finding), _) => Verdict::Hardline(finding),
            (None, true) => Verdict::Safe,
            (None, false) => Verdict::Flagged(self.flagged),
        }
    }
}
