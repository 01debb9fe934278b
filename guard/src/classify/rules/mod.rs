//! What each command does with its arguments, one module per family of commands.
//!
//! - [`state`]: `cd`, `export` and friends, which change what later words mean.
//! - [`delete`]: `rm`, `rmdir`, `unlink`.
//! - [`write`](mod@write): where files get written (`>`, `tee`, `mv`, `cp`, `dd`, `sed -i`, …).
//! - [`perms`]: `chmod`, `chown`.
//! - [`fanout`]: commands that run another command over many inputs (`find -exec`, `xargs`).
//! - [`code`]: shells, `eval`, `source`, interpreters with inline code, pipes into them.
//! - [`inline_code`]: what inline interpreter code deletes or runs.
//! - [`system`]: disks, processes, power, services, `sudo`.
//! - [`services`]: Hermes' own gateway and its containers.
//! - [`git`], [`sql`], [`windows`].

mod code;
pub(crate) mod delete;
mod fanout;
mod git;
mod inline_code;
mod perms;
mod services;
mod sql;
mod state;
mod system;
mod windows;
pub(crate) mod write;

use super::expand::Field;
use super::invocation::Invocation;
use super::judge::Judge;

/// Short and long options that take a value, for [`parse_args`].
pub(crate) struct Syntax {
    pub(crate) short_values: &'static str,
    pub(crate) long_values: &'static [&'static str],
}

/// A command line split into options and operands, GNU style: options may follow operands,
/// short options cluster (`-rf`), values are glued (`-ofile`, `--output=file`) or follow.
#[derive(Default)]
pub(crate) struct Args {
    /// Each option (`-r`, `--force`) with its value when it takes one.
    pub(crate) options: Vec<(String, Option<Field>)>,
    pub(crate) operands: Vec<Field>,
}

impl Args {
    pub(crate) fn has(&self, flag: &str) -> bool {
        self.options.iter().any(|(name, _)| name == flag)
    }

    pub(crate) fn value(&self, flags: &[&str]) -> Option<&Field> {
        self.options.iter().rev().find(|(name, _)| flags.contains(&name.as_str())).and_then(|(_, value)| value.as_ref())
    }

    /// A long option spelled in full or as any unambiguous prefix of at least `min` letters
    /// (`--rec` for `--recursive`).
    pub(crate) fn has_long(&self, long: &str, min: usize) -> bool {
        self.options.iter().any(|(name, _)| name.len() >= min + 2 && long.starts_with(name.as_str()))
    }
}

pub(crate) fn parse_args(args: &[Field], syntax: &Syntax) -> Args {
    let mut parsed = Args::default();
    let mut i = 0;
    while i < args.len() {
        let field = &args[i];
        let text = field.text.as_str();
        i += 1;
        if field.dynamic && !text.starts_with('-') {
            parsed.operands.push(field.clone());
            continue;
        }
        if text == "--" {
            parsed.operands.extend(args[i..].iter().cloned());
            break;
        }
        if let Some(long) = text.strip_prefix("--") {
            let (name, glued) = long.split_once('=').map_or((long, None), |(name, value)| (name, Some(Field::literal(value))));
            let name = format!("--{name}");
            let value = match glued {
                Some(value) => Some(value),
                None if syntax.long_values.contains(&name.as_str()) => {
                    i += 1;
                    args.get(i - 1).cloned()
                }
                None => None,
            };
            parsed.options.push((name, value));
            continue;
        }
        if text.len() < 2 || !text.starts_with('-') {
            parsed.operands.push(field.clone());
            continue;
        }
        let cluster: Vec<char> = text.chars().skip(1).collect();
        for (at, flag) in cluster.iter().enumerate() {
            if syntax.short_values.contains(*flag) {
                let glued: String = cluster[at + 1..].iter().collect();
                let value = if glued.is_empty() {
                    i += 1;
                    args.get(i - 1).cloned()
                } else {
                    Some(Field::literal(glued))
                };
                parsed.options.push((format!("-{flag}"), value));
                break;
            }
            parsed.options.push((format!("-{flag}"), None));
        }
    }
    parsed
}

const SHELLS: &[&str] = &["sh", "bash", "zsh", "ksh", "dash", "ash", "mksh", "yash", "fish", "csh", "tcsh", "rbash"];

impl Judge<'_> {
    /// Applies the rules for what `invocation` runs.
    pub(crate) fn judge_invocation(&mut self, invocation: &Invocation) {
        let name = invocation.name.as_str();
        match name {
            "cd" | "pushd" | "popd" => self.change_dir(invocation),
            "export" | "declare" | "typeset" | "local" | "readonly" => self.declare(invocation),
            "alias" => self.alias(invocation),
            "trap" => self.trap(invocation),
            "rm" => self.rm(invocation),
            "rmdir" | "unlink" => self.remove_entries(invocation),
            "find" => self.find(invocation),
            "xargs" | "parallel" => self.xargs(invocation),
            "mv" => self.mv(invocation),
            "cp" | "install" => self.copy(invocation),
            "ln" => self.link(invocation),
            "dd" => self.dd(invocation),
            "truncate" | "touch" | "mkdir" => self.create_files(invocation),
            "tee" => self.tee(invocation),
            "sed" => self.sed(invocation),
            "curl" | "wget" => self.download(invocation),
            "rsync" | "scp" => self.sync(invocation),
            "tar" => self.tar(invocation),
            "unzip" => self.unzip(invocation),
            "chmod" => self.chmod(invocation),
            "chown" | "chgrp" => self.chown(invocation),
            "mkfs" | "mke2fs" => self.mkfs(invocation),
            _ if name.starts_with("mkfs.") => self.mkfs(invocation),
            "shred" | "wipefs" | "blkdiscard" | "sgdisk" | "mkswap" => self.wipe(invocation),
            "kill" => self.kill(invocation),
            "pkill" | "killall" => self.kill_by_name(invocation),
            "shutdown" | "reboot" | "halt" | "poweroff" => self.shutdown(invocation),
            "init" | "telinit" => self.init(invocation),
            "systemctl" => self.systemctl(invocation),
            "service" => self.service(invocation),
            "eval" => self.eval(invocation),
            "source" | "." => self.source(invocation),
            "su" | "runuser" => self.su(invocation),
            "git" => self.git(invocation),
            "docker" | "podman" | "docker-compose" | "podman-compose" => self.docker(invocation),
            "hermes" => self.hermes(invocation),
            "launchctl" => self.launchctl(invocation),
            "cmd" => self.windows_cmd(invocation),
            "powershell" | "pwsh" => self.powershell(invocation),
            _ if SHELLS.contains(&name) => self.shell(invocation),
            _ if code::interpreter_family(name).is_some() => self.interpreter(invocation),
            _ if sql::is_client(name) => self.sql_client(invocation),
            _ => {}
        }
    }
}
