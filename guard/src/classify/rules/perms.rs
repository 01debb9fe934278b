//! Permissions and ownership: `chmod`, `chown`, `chgrp`.
//!
//! Landlock does not cover permission or ownership changes, so changing them outside the
//! workspace is flagged here: the sandbox would not stop it.

use super::super::invocation::Invocation;
use super::super::judge::Judge;
use super::{Syntax, parse_args};
use crate::keys;

impl Judge<'_> {
    pub(crate) fn chmod(&mut self, invocation: &Invocation) {
        // Modes such as `-w` or `-x` look like options; chmod takes them as the mode.
        let (mode, rest) = match invocation.args.iter().position(|field| is_mode(&field.text)) {
            Some(at) => {
                let mut rest = invocation.args.clone();
                let mode = rest.remove(at);
                (Some(mode), rest)
            }
            None => (None, invocation.args.clone()),
        };
        let args = parse_args(&rest, &Syntax { short_values: "", long_values: &["--reference"] });
        let recursive_long = args.has_long("--recursive", 3);
        let mode_text = mode.as_ref().map_or("", |mode| mode.text.as_str());
        if world_writable(mode_text) {
            let key = if recursive_long { keys::WORLD_WRITABLE_RECURSIVE_LONG } else { keys::WORLD_WRITABLE };
            self.flag(key, format!("chmod {mode_text}"));
        }
        let executable = adds_execute(mode_text);
        for file in &args.operands {
            let target = self.context.target(&file.text, file.dynamic, file.glob, invocation.cwd.as_deref());
            if target.place.is_outside() {
                self.flag(keys::PERMISSIONS_OUTSIDE_WORKSPACE, format!("chmod {mode_text} {}", target.shown()));
            }
            if let Some(path) = target.path.filter(|_| executable) {
                self.scope.made_executable.push(path);
            }
        }
    }

    pub(crate) fn chown(&mut self, invocation: &Invocation) {
        let args = parse_args(&invocation.args, &Syntax { short_values: "", long_values: &["--reference", "--from"] });
        let recursive_short = args.has("-R");
        let recursive_long = args.has_long("--recursive", 3);
        let mut operands = args.operands.iter();
        let owner = if invocation.name == "chown" && args.value(&["--reference"]).is_none() { operands.next() } else { None };
        if let Some(owner) = owner.filter(|owner| owner.text.starts_with("root") || owner.text.starts_with("0:") || owner.text == "0") {
            if recursive_short {
                self.flag(keys::CHOWN_ROOT, format!("chown -R {}", owner.text));
            } else if recursive_long {
                self.flag(keys::CHOWN_ROOT_LONG, format!("chown --recursive {}", owner.text));
            }
        }
        for file in operands {
            let target = self.context.target(&file.text, file.dynamic, file.glob, invocation.cwd.as_deref());
            if target.place.is_outside() {
                self.flag(keys::PERMISSIONS_OUTSIDE_WORKSPACE, format!("{} {}", invocation.name, target.shown()));
            }
        }
    }
}

/// An octal mode (`755`) or a symbolic one (`u+x,go-w`, `-w`, `=r`).
fn is_mode(text: &str) -> bool {
    let octal = !text.is_empty() && text.len() <= 5 && text.chars().all(|c| c.is_digit(8));
    let symbolic = text.split(',').all(|clause| {
        let operations = clause.trim_start_matches(['u', 'g', 'o', 'a']);
        operations.starts_with(['+', '-', '=']) && operations.chars().all(|c| "+-=rwxXstugo".contains(c))
    });
    octal || (!text.is_empty() && symbolic)
}

/// Whether the mode lets others (or everyone) write: `777`, `666`, `o+w`, `a+rw`.
fn world_writable(mode: &str) -> bool {
    if !mode.is_empty() && mode.chars().all(|c| c.is_digit(8)) {
        return mode.chars().last().and_then(|others| others.to_digit(8)).is_some_and(|others| others & 2 != 0);
    }
    mode.split(',').any(|clause| {
        let who_end = clause.find(['+', '=']).unwrap_or(clause.len());
        let (who, change) = clause.split_at(who_end);
        (who.contains(['o', 'a'])) && change.contains('w') && !change.starts_with('-')
    })
}

/// Whether the mode makes files executable (`+x`, `u+x`, `755`).
fn adds_execute(mode: &str) -> bool {
    if !mode.is_empty() && mode.chars().all(|c| c.is_digit(8)) {
        return mode.chars().rev().take(3).any(|digit| digit.to_digit(8).is_some_and(|bits| bits & 1 != 0));
    }
    mode.split(',').any(|clause| clause.contains(['+', '=']) && clause.contains('x'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_are_read_like_chmod() {
        assert!(world_writable("777") && world_writable("0666") && world_writable("o+w") && world_writable("a+rwx"));
        assert!(!world_writable("755") && !world_writable("u+w") && !world_writable("o-w") && !world_writable("go-w"));
        assert!(adds_execute("+x") && adds_execute("u+x") && adds_execute("755"));
        assert!(!adds_execute("644") && !adds_execute("-x"));
        assert!(is_mode("-w") && is_mode("u+x,go-w") && is_mode("0755") && !is_mode("-R") && !is_mode("file.txt"));
    }
}
