//! Where commands write: redirections, `tee`, `mv`, `cp`, `install`, `ln`, `dd`, `truncate`,
//! `touch`, `mkdir`, `sed -i`, downloads, `rsync`/`scp`, `tar`, `unzip`.
//!
//! Writing inside the workspace is safe, except over a project's `.env`/`config.yaml`; a raw
//! disk is never writable; system, credential and Hermes files have the reference keys; any
//! other place outside the workspace (or one known only at run time) is flagged.

use super::super::expand::Field;
use super::super::invocation::Invocation;
use super::super::judge::Judge;
use super::super::paths::Place;
use super::{Syntax, parse_args};
use crate::keys;
use std::path::Path;

/// How a file gets written, which picks the reference key for sensitive targets.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Via {
    Redirect,
    Tee,
    /// `cp`, `install`.
    Copy,
    Move,
    SedInPlace {
        long: bool,
    },
    /// `perl -i`, `ruby -i`.
    ScriptInPlace,
    /// Any other writer, named for the detail.
    Other(&'static str),
}

impl Via {
    fn describe(self) -> &'static str {
        match self {
            Via::Redirect => "redirection to",
            Via::Tee => "tee to",
            Via::Copy => "copy to",
            Via::Move => "move to",
            Via::SedInPlace { .. } => "sed -i on",
            Via::ScriptInPlace => "in-place edit of",
            Via::Other(name) => name,
        }
    }
}

impl Judge<'_> {
    /// Judges writing `file` (relative to `cwd`) by `via`.
    pub(crate) fn written(&mut self, file: &Field, cwd: Option<&Path>, via: Via) {
        let target = self.context.target(&file.text, file.dynamic, file.glob, cwd);
        let detail = format!("{} {}", via.describe(), target.shown());
        let named_place = matches!(target.place, Place::SystemConfig | Place::UserSecret | Place::HermesSecret);
        if target.project_config && !named_place {
            match via {
                Via::Redirect => self.flag(keys::PROJECT_ENV_VIA_REDIRECT, detail.clone()),
                Via::Tee => self.flag(keys::PROJECT_ENV_VIA_TEE, detail.clone()),
                Via::Copy | Via::Move => self.flag(keys::OVERWRITE_PROJECT_ENV, detail.clone()),
                _ => {}
            }
        }
        let key = match (target.place, via) {
            (Place::Workspace | Place::HarmlessDevice, _) => return,
            (Place::RawDevice, Via::Other("dd")) => keys::DD_RAW_DEVICE,
            (Place::RawDevice, Via::Other(_)) => keys::WIPE_RAW_DEVICE,
            (Place::RawDevice, _) => keys::REDIRECT_RAW_DEVICE,
            (Place::SystemConfig, Via::Redirect) => keys::OVERWRITE_SYSTEM_CONFIG,
            (Place::SystemConfig, Via::Tee) => keys::SYSTEM_FILE_VIA_TEE,
            (Place::SystemConfig, Via::Copy | Via::Move) => keys::COPY_INTO_SYSTEM_CONFIG,
            (Place::SystemConfig, Via::SedInPlace { long: false }) => keys::EDIT_SYSTEM_CONFIG,
            (Place::SystemConfig, Via::SedInPlace { long: true }) => keys::EDIT_SYSTEM_CONFIG_LONG,
            (Place::UserSecret | Place::HermesSecret, Via::Redirect) => keys::SYSTEM_FILE_VIA_REDIRECT,
            (Place::UserSecret | Place::HermesSecret, Via::Tee) => keys::SYSTEM_FILE_VIA_TEE,
            (Place::UserSecret | Place::HermesSecret, Via::Copy | Via::Move) => keys::COPY_INTO_SENSITIVE,
            (Place::UserSecret, Via::SedInPlace { long: false }) => keys::EDIT_SENSITIVE,
            (Place::UserSecret, Via::SedInPlace { long: true }) => keys::EDIT_SENSITIVE_LONG,
            (Place::UserSecret, Via::ScriptInPlace) => keys::EDIT_SENSITIVE_PERL,
            (Place::HermesSecret, Via::SedInPlace { long: false }) => keys::EDIT_HERMES_CONFIG,
            (Place::HermesSecret, Via::SedInPlace { long: true }) => keys::EDIT_HERMES_CONFIG_LONG,
            (Place::HermesSecret, Via::ScriptInPlace) => keys::EDIT_HERMES_CONFIG_PERL,
            (_, Via::Move) => keys::MOVE_OUTSIDE_WORKSPACE,
            _ => keys::WRITE_OUTSIDE_WORKSPACE,
        };
        self.flag(key, detail);
    }

    pub(crate) fn mv(&mut self, invocation: &Invocation) {
        let args = parse_args(&invocation.args, &Syntax { short_values: "tS", long_values: &["--target-directory", "--suffix"] });
        let cwd = invocation.cwd.as_deref();
        let (sources, destination) = split_destination(&args.operands, args.value(&["-t", "--target-directory"]));
        for source in sources {
            // Moving something away deletes it where it was.
            let target = self.context.target(&source.text, source.dynamic, source.glob, cwd);
            if target.place.is_outside() {
                self.flag(keys::MOVE_OUTSIDE_WORKSPACE, format!("move from {}", target.shown()));
            }
        }
        if let Some(destination) = destination {
            self.written(&destination, cwd, Via::Move);
        }
    }

    pub(crate) fn copy(&mut self, invocation: &Invocation) {
        let args = parse_args(
            &invocation.args,
            &Syntax { short_values: "tSmogZ", long_values: &["--target-directory", "--suffix", "--mode", "--owner", "--group"] },
        );
        let cwd = invocation.cwd.as_deref();
        if invocation.name == "install" && args.has("-d") {
            for directory in &args.operands {
                self.written(directory, cwd, Via::Other("install -d"));
            }
            return;
        }
        if let (_, Some(destination)) = split_destination(&args.operands, args.value(&["-t", "--target-directory"])) {
            self.written(&destination, cwd, Via::Copy);
        }
    }

    pub(crate) fn link(&mut self, invocation: &Invocation) {
        let args = parse_args(&invocation.args, &Syntax { short_values: "tS", long_values: &["--target-directory", "--suffix"] });
        let destination = match args.value(&["-t", "--target-directory"]) {
            Some(directory) => Some(directory.clone()),
            // `ln target` links into the working directory.
            None if args.operands.len() == 1 => None,
            None => args.operands.last().cloned(),
        };
        if let Some(destination) = destination {
            self.written(&destination, invocation.cwd.as_deref(), Via::Other("ln"));
        }
    }

    pub(crate) fn dd(&mut self, invocation: &Invocation) {
        for field in &invocation.args {
            if let Some(output) = field.text.strip_prefix("of=") {
                self.written(&Field { text: output.to_owned(), ..field.clone() }, invocation.cwd.as_deref(), Via::Other("dd"));
            }
            if let Some(input) = field.text.strip_prefix("if=") {
                let target = self.context.target(input, field.dynamic, field.glob, invocation.cwd.as_deref());
                let device = target.path.as_ref().and_then(|path| path.to_str()).and_then(|path| path.strip_prefix("/dev/"));
                if device.is_some_and(|device| !["zero", "urandom", "random", "null", "full", "stdin"].contains(&device)) {
                    self.flag(keys::DISK_COPY, format!("dd if={input}"));
                }
            }
        }
    }

    /// `truncate`, `touch`, `mkdir`: every operand is written.
    pub(crate) fn create_files(&mut self, invocation: &Invocation) {
        let syntax = match invocation.name.as_str() {
            "truncate" => Syntax { short_values: "sr", long_values: &["--size", "--reference"] },
            "touch" => Syntax { short_values: "drt", long_values: &["--date", "--reference"] },
            _ => Syntax { short_values: "mZ", long_values: &["--mode", "--context"] },
        };
        let args = parse_args(&invocation.args, &syntax);
        let via = match invocation.name.as_str() {
            "truncate" => Via::Other("truncate"),
            "touch" => Via::Other("touch"),
            _ => Via::Other("mkdir"),
        };
        for file in &args.operands {
            self.written(file, invocation.cwd.as_deref(), via);
        }
    }

    pub(crate) fn tee(&mut self, invocation: &Invocation) {
        let args = parse_args(&invocation.args, &Syntax { short_values: "", long_values: &[] });
        for file in &args.operands {
            self.written(file, invocation.cwd.as_deref(), Via::Tee);
        }
    }

    pub(crate) fn sed(&mut self, invocation: &Invocation) {
        let args = parse_args(&invocation.args, &Syntax { short_values: "efl", long_values: &["--expression", "--file", "--line-length"] });
        let long = args.options.iter().any(|(flag, _)| flag.len() > 4 && "--in-place".starts_with(flag.as_str()));
        let short = args.has("-i");
        if !(long || short) {
            return;
        }
        let has_script_option = args.value(&["-e", "-f", "--expression", "--file"]).is_some();
        let files = if has_script_option { &args.operands[..] } else { args.operands.get(1..).unwrap_or_default() };
        for file in files {
            self.written(file, invocation.cwd.as_deref(), Via::SedInPlace { long: long && !short });
        }
    }

    /// `curl -o FILE`, `curl --output-dir DIR`, `wget -O FILE`, `wget -P DIR`.
    pub(crate) fn download(&mut self, invocation: &Invocation) {
        let (syntax, outputs): (Syntax, &[&str]) = if invocation.name == "curl" {
            (
                Syntax {
                    short_values: "oDcKdHXuAbeEFrTwxzmyYUCQt",
                    long_values: &[
                        "--output",
                        "--output-dir",
                        "--dump-header",
                        "--cookie-jar",
                        "--data",
                        "--header",
                        "--request",
                        "--user",
                        "--config",
                    ],
                },
                &["-o", "--output", "--output-dir", "-D", "--dump-header", "-c", "--cookie-jar"],
            )
        } else {
            (
                Syntax {
                    short_values: "OoaPeUtTwQ",
                    long_values: &["--output-document", "--output-file", "--append-output", "--directory-prefix"],
                },
                &["-O", "--output-document", "-P", "--directory-prefix", "-o", "--output-file", "-a", "--append-output"],
            )
        };
        let args = parse_args(&invocation.args, &syntax);
        for (flag, value) in &args.options {
            if let Some(file) = value.as_ref().filter(|file| outputs.contains(&flag.as_str()) && file.text != "-") {
                self.written(file, invocation.cwd.as_deref(), Via::Other("download to"));
            }
        }
    }

    /// `rsync`/`scp`: a local destination (no `host:`) is written.
    pub(crate) fn sync(&mut self, invocation: &Invocation) {
        let syntax = if invocation.name == "scp" {
            Syntax { short_values: "PioFclSJ", long_values: &[] }
        } else {
            Syntax { short_values: "eTf", long_values: &["--rsh", "--temp-dir", "--filter", "--exclude", "--include"] }
        };
        let args = parse_args(&invocation.args, &syntax);
        if args.operands.len() < 2 {
            return;
        }
        if let Some(destination) = args.operands.last().filter(|destination| !destination.text.contains(':')) {
            self.written(destination, invocation.cwd.as_deref(), Via::Other(if invocation.name == "scp" { "scp to" } else { "rsync to" }));
        }
    }

    /// `tar -C DIR` (extracting) and `tar -cf FILE` (creating).
    pub(crate) fn tar(&mut self, invocation: &Invocation) {
        // Old style: the first word's letters are options even without a dash (`tar czf a.tgz`).
        let mut argv = invocation.args.clone();
        if let Some(first) = argv.first_mut().filter(|first| !first.text.starts_with('-') && !first.dynamic) {
            first.text.insert(0, '-');
        }
        let args = parse_args(
            &argv,
            &Syntax { short_values: "fCTXgKNV", long_values: &["--file", "--directory", "--files-from", "--exclude-from"] },
        );
        let creates = ["-c", "-r", "-u", "-A", "--create", "--append", "--update"].iter().any(|flag| args.has(flag));
        let cwd = invocation.cwd.as_deref();
        if creates {
            if let Some(archive) = args.value(&["-f", "--file"]).filter(|archive| archive.text != "-") {
                self.written(archive, cwd, Via::Other("tar archive"));
            }
        } else if let Some(directory) = args.value(&["-C", "--directory"]) {
            self.written(directory, cwd, Via::Other("tar extract into"));
        }
    }

    pub(crate) fn unzip(&mut self, invocation: &Invocation) {
        let args = parse_args(&invocation.args, &Syntax { short_values: "dxP", long_values: &[] });
        if let Some(directory) = args.value(&["-d"]) {
            self.written(directory, invocation.cwd.as_deref(), Via::Other("unzip into"));
        }
    }
}

/// `cp a b c DIR`: sources and the destination (the last operand unless `-t DIR`).
fn split_destination<'a>(operands: &'a [Field], target_directory: Option<&Field>) -> (&'a [Field], Option<Field>) {
    match target_directory {
        Some(directory) => (operands, Some(directory.clone())),
        None if operands.len() >= 2 => (&operands[..operands.len() - 1], operands.last().cloned()),
        None => (&[], None),
    }
}
