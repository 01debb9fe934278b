//! What inline interpreter code deletes or runs.
//!
//! Inline code is flagged whatever it says; this reading only picks better keys. A call that
//! deletes a tree (`shutil.rmtree`, `remove_tree`, `rm_rf`, `fs.rmSync(…, {recursive})`) is a
//! recursive delete; one that deletes a file is the guard's own key; and the string literals
//! handed to a shell (`os.system("…")`, `subprocess.run(["rm", "-rf", "/"])`, backticks,
//! `do shell script "…"`) are classified as shell commands, so a hardline command stays
//! hardline when it is wrapped in Python.

use super::super::judge::Judge;
use crate::keys;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Family {
    Python,
    Perl,
    Ruby,
    JavaScript,
    Php,
    AppleScript,
    Other,
}

/// Calls that delete a directory tree (matched lower-cased).
const TREE_DELETES: &[&str] =
    &["rmtree", "remove_tree", "rm_rf", "rm_r(", "rm_r ", "remove_dir_all", "rimraf", "remove_entry_secure", "-recurse"];
/// Calls that delete files or empty directories (matched lower-cased).
const FILE_DELETES: &[&str] = &[
    "os.remove",
    "os.unlink",
    "os.rmdir",
    "removedirs",
    "unlink",
    "rmdir",
    "rmsync",
    "fs.rm(",
    "promises.rm(",
    "removesync",
    "deno.remove(",
    "file.delete",
    "fileutils.rm",
    "fileutils.remove",
    "send2trash",
    "remove-item",
];

/// Calls whose string arguments a shell runs, per family.
fn shell_calls(family: Family) -> &'static [&'static str] {
    match family {
        Family::Python => &[
            "system",
            "popen",
            "Popen",
            "check_output",
            "check_call",
            "getoutput",
            "getstatusoutput",
            "subprocess.run",
            "subprocess.call",
            "spawn",
        ],
        Family::Perl => &["system", "exec"],
        Family::Ruby => &["system", "exec", "spawn", "popen"],
        Family::JavaScript => &["execSync", "exec", "spawnSync", "spawn", "execFileSync", "execFile"],
        Family::Php => &["system", "shell_exec", "exec", "passthru", "popen", "proc_open"],
        Family::AppleScript => &["do shell script"],
        Family::Other => &["system", "execute", "popen"],
    }
}

impl Judge<'_> {
    pub(crate) fn scan_inline_code(&mut self, family: Family, code: &str) {
        let lower = code.to_lowercase();
        let deletes_tree = TREE_DELETES
            .iter()
            .find(|call| lower.contains(**call))
            .or_else(|| FILE_DELETES.iter().find(|call| lower.contains(**call)).filter(|_| lower.contains("recursive")));
        if let Some(call) = deletes_tree {
            self.flag(keys::RECURSIVE_DELETE, format!("inline code calls {call}"));
        } else if let Some(call) = FILE_DELETES.iter().find(|call| lower.contains(**call)) {
            self.flag(keys::INLINE_CODE_DELETES, format!("inline code calls {call}"));
        }
        for command in shell_commands(family, code) {
            self.code_in_child_shell(&command);
        }
    }
}

/// The shell commands inline code hands to a shell as string literals.
fn shell_commands(family: Family, code: &str) -> Vec<String> {
    let mut commands = Vec::new();
    for call in shell_calls(family) {
        let mut from = 0;
        while let Some(at) = code.get(from..).and_then(|rest| rest.find(call)) {
            let start = from + at;
            let after = start + call.len();
            from = after;
            // A call, not part of a longer name or of a string: `os.system(`, `system "…"`.
            let before = code.get(..start).and_then(|head| head.chars().next_back());
            let standalone = before.is_none_or(|c| !(c.is_alphanumeric() || matches!(c, '_' | '\'' | '"' | '`')));
            let rest = code.get(after..).unwrap_or("");
            let called = rest.trim_start().starts_with(['(', '"', '\'', '[']);
            if let Some(command) = string_arguments(rest).filter(|_| standalone && called) {
                commands.push(command);
            }
        }
    }
    if matches!(family, Family::Perl | Family::Ruby | Family::Php) {
        commands.extend(code.split('`').skip(1).step_by(2).map(str::to_owned));
    }
    commands
}

/// The string literal(s) opening `rest` (`("rm -rf x")`, `(["rm", "-rf", "x"])`, `"ls"`),
/// joined by spaces.
fn string_arguments(rest: &str) -> Option<String> {
    let mut chars = rest.chars().peekable();
    let mut parts = Vec::new();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace() || matches!(c, '(' | '[' | '{' | ',')) {
            chars.next();
        }
        // String prefixes: Python r"…", f"…", b"…".
        let mut probe = chars.clone();
        let mut prefix = 0;
        while probe.peek().is_some_and(|c| "rRfFbBuU".contains(*c)) && prefix < 2 {
            probe.next();
            prefix += 1;
        }
        let quote = match probe.peek() {
            Some(quote @ ('"' | '\'' | '`')) => *quote,
            _ => break,
        };
        chars = probe;
        chars.next();
        let mut literal = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => literal.extend(chars.next()),
                c if c == quote => break,
                c => literal.push(c),
            }
        }
        parts.push(literal);
        let mut probe = chars.clone();
        while probe.peek().is_some_and(|c| c.is_whitespace()) {
            probe.next();
        }
        if probe.peek() != Some(&',') {
            break;
        }
    }
    (!parts.is_empty()).then(|| parts.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_strings_are_found_in_calls() {
        assert_eq!(shell_commands(Family::Python, "import os; os.system('rm -rf /tmp/x')"), vec!["rm -rf /tmp/x"]);
        assert_eq!(shell_commands(Family::Python, "subprocess.run([\"rm\", \"-rf\", \"/\"])"), vec!["rm -rf /"]);
        assert_eq!(shell_commands(Family::Perl, "print `reboot`"), vec!["reboot"]);
        assert_eq!(shell_commands(Family::AppleScript, "do shell script \"halt\""), vec!["halt"]);
        assert!(shell_commands(Family::Python, "print('system')").is_empty());
    }
}
