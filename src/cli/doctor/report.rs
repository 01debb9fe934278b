//! How doctor's findings are printed: one line each, a fix under every failure, and the count
//! that decides the exit code (warnings never fail).

pub(super) struct Report {
    failures: usize,
    warnings: usize,
}

impl Report {
    pub(super) fn new() -> Self {
        Self { failures: 0, warnings: 0 }
    }

    pub(super) fn ok(&self, what: &str) {
        println!("✓ {what}");
    }

    pub(super) fn warn(&mut self, what: &str) {
        self.warnings += 1;
        println!("! {what}");
    }

    pub(super) fn fail(&mut self, what: &str, fix: &str) {
        self.failures += 1;
        println!("✗ {what}\n    fix: {fix}");
    }

    pub(super) fn failures(&self) -> usize {
        self.failures
    }

    pub(super) fn warnings(&self) -> usize {
        self.warnings
    }
}

/// `path` as a shell word: quoted only when it holds something a shell would split or expand.
pub(super) fn shell_word(path: &std::path::Path) -> String {
    let text = path.display().to_string();
    let plain = text.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-+:@%,=".contains(&b));
    if plain && !text.is_empty() { text } else { format!("'{}'", text.replace('\'', r"'\''")) }
}
