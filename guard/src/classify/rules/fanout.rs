//! Commands that run another command over many inputs: `find -exec`, `find -delete`, `xargs`.
//!
//! The command they run is judged like any other, with the inputs (`{}`, what xargs reads)
//! standing for paths known only at run time. A command that only reads (`grep`, `wc`, …) is
//! safe; deleting has the reference keys; anything else is flagged, because it runs on inputs
//! the approver cannot see.

use super::super::expand::Field;
use super::super::invocation::{Invocation, Stdin};
use super::super::judge::Judge;
use super::delete::Recursion;
use crate::keys;

/// Commands that only read their inputs and print.
const READ_ONLY: &[&str] = &[
    "cat",
    "head",
    "tail",
    "wc",
    "grep",
    "egrep",
    "fgrep",
    "rg",
    "ls",
    "stat",
    "file",
    "echo",
    "printf",
    "basename",
    "dirname",
    "realpath",
    "readlink",
    "md5sum",
    "sha1sum",
    "sha224sum",
    "sha256sum",
    "sha384sum",
    "sha512sum",
    "b2sum",
    "cksum",
    "du",
    "diff",
    "cmp",
    "true",
    "false",
    "test",
    "[",
    "sort",
    "uniq",
    "cut",
    "nl",
    "od",
    "hexdump",
    "strings",
    "jq",
];

/// What a fan-out runs, judged as the key to report when the command itself finds nothing.
enum Runner {
    Find,
    Xargs,
}

impl Judge<'_> {
    pub(crate) fn find(&mut self, invocation: &Invocation) {
        let args = &invocation.args;
        let starts: Vec<&Field> =
            args.iter().take_while(|field| !field.text.starts_with('-') && !matches!(field.text.as_str(), "(" | "!" | ",")).collect();
        let mut i = starts.len();
        while i < args.len() {
            let predicate = args[i].text.as_str();
            i += 1;
            match predicate {
                "-delete" => {
                    // `find / -delete` is `rm -rf /` by another name.
                    for start in &starts {
                        let target = self.context.target(&start.text, start.dynamic, start.glob, invocation.cwd.as_deref());
                        self.recursive_delete(&target, "find -delete");
                    }
                    self.flag(
                        keys::FIND_DELETE,
                        format!("find {} -delete", starts.iter().map(|start| start.text.as_str()).collect::<Vec<_>>().join(" ")),
                    );
                }
                "-exec" | "-execdir" | "-ok" | "-okdir" => {
                    let end = args[i..].iter().position(|field| field.text == ";" || field.text == "+").map_or(args.len(), |at| i + at);
                    let command: Vec<Field> = args[i..end]
                        .iter()
                        .map(|field| if field.text.contains("{}") { Field::unknown(field.text.clone()) } else { field.clone() })
                        .collect();
                    self.fan_out(command, invocation, Runner::Find);
                    i = end + 1;
                }
                "-fprint" | "-fprint0" | "-fprintf" | "-fls" => {
                    if let Some(file) = args.get(i) {
                        self.written(file, invocation.cwd.as_deref(), super::write::Via::Other("find -fprint"));
                    }
                    i += 1;
                }
                _ => {}
            }
        }
    }

    pub(crate) fn xargs(&mut self, invocation: &Invocation) {
        const WITH_VALUE: &str = "aEeIiLlnPsd";
        const LONG_WITH_VALUE: &[&str] = &[
            "--arg-file",
            "--eof",
            "--replace",
            "--max-lines",
            "--max-args",
            "--max-procs",
            "--max-chars",
            "--delimiter",
            "--process-slot-var",
        ];
        let mut i = 0;
        let args = &invocation.args;
        let mut replace: Option<String> = None;
        while let Some(field) = args.get(i) {
            let text = field.text.as_str();
            if text == "--" {
                i += 1;
                break;
            }
            if !text.starts_with('-') || text.len() < 2 || invocation.name == "parallel" && text.starts_with(":::") {
                break;
            }
            i += 1;
            if let Some(long) = text.strip_prefix("--") {
                let name = format!("--{}", long.split('=').next().unwrap_or(long));
                if name == "--replace" {
                    replace = Some(long.split_once('=').map_or("{}", |(_, value)| value).to_owned());
                }
                if LONG_WITH_VALUE.contains(&name.as_str()) && !long.contains('=') {
                    i += 1;
                }
                continue;
            }
            let flag = text.chars().nth(1).unwrap_or('-');
            if flag == 'I' {
                replace = Some(if text.len() > 2 {
                    text[2..].to_owned()
                } else {
                    args.get(i).map(|value| value.text.clone()).unwrap_or_default()
                });
            }
            // `-i`/`-e`/`-l` take their value glued only; the others glued or next.
            if WITH_VALUE.contains(flag) && text.len() == 2 && !"iel".contains(flag) {
                i += 1;
            }
        }
        // An option's missing value can leave `i` past the end (`xargs -s`).
        let command: Vec<Field> = args
            .get(i..)
            .unwrap_or_default()
            .iter()
            .map(|field| {
                if replace.as_deref().is_some_and(|token| field.text.contains(token)) {
                    Field::unknown(field.text.clone())
                } else {
                    field.clone()
                }
            })
            .chain(std::iter::once(Field::unknown("(input)")))
            .collect();
        self.fan_out(command, invocation, Runner::Xargs);
    }

    fn fan_out(&mut self, command: Vec<Field>, parent: &Invocation, runner: Runner) {
        let command = if command.is_empty() { vec![Field::literal("echo"), Field::unknown("(input)")] } else { command };
        let Some(inner) = Invocation::new(command, Stdin::Inherited, parent.background, parent.cwd.clone()) else { return };
        if inner.program.dynamic {
            self.flag(keys::DYNAMIC_COMMAND_NAME, inner.program.text.clone());
        }
        let Some(inner) = self.peel(inner) else { return };
        let name = inner.name.clone();
        if name == "rm" {
            let key = match runner {
                Runner::Find => keys::FIND_EXEC_RM,
                Runner::Xargs => keys::XARGS_RM,
            };
            self.flag(key, format!("{} {}", name, inner.texts().collect::<Vec<_>>().join(" ")));
            let recursive = inner
                .args
                .iter()
                .any(|field| field.text.starts_with('-') && !field.text.starts_with("--") && field.text.contains(['r', 'R']));
            if recursive {
                self.flag(keys::RECURSIVE_DELETE, "rm -r on every input");
            }
            // The static operands are judged as any rm would be.
            for operand in inner.args.iter().filter(|field| !field.dynamic && !field.text.starts_with('-')) {
                self.deleted(operand, &inner, if recursive { Recursion::ShortFlag } else { Recursion::None }, "rm");
            }
            return;
        }
        if READ_ONLY.contains(&name.as_str()) {
            return;
        }
        self.judge_invocation(&inner);
        let key = match runner {
            Runner::Find => keys::FIND_EXEC,
            Runner::Xargs => keys::XARGS_COMMAND,
        };
        self.flag(key, format!("{} {}", name, inner.texts().collect::<Vec<_>>().join(" ")));
    }
}
