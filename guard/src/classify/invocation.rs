//! A simple command as it will really run: wrappers peeled off, the program named.
//!
//! `sudo -u x nice -n 5 env A=1 /bin/rm -rf /` runs `rm`; so do `\rm`, `command rm`,
//! `builtin rm`, `exec rm`, `timeout 5 rm`, `busybox rm`. Wrappers that only ask a question
//! (`command -v rm`, `sudo -l`) run nothing; wrappers that hand their arguments to a shell
//! (`env -S`, `sudo -s`, `watch`, `flock -c`) have them classified as code.

use super::expand::Field;
use super::judge::Judge;
use super::rules::write::Via;
use crate::keys;
use std::path::PathBuf;

/// A command that ran earlier in the code being judged, as far as later pipes care.
#[derive(Debug, Clone)]
pub(crate) struct Producer {
    pub(crate) name: String,
    pub(crate) args: Vec<Field>,
    /// The here-document or here-string it read, when it read one.
    pub(crate) document: Option<Field>,
}

/// Where a command's standard input comes from.
#[derive(Debug, Clone)]
pub(crate) enum Stdin {
    /// Whatever the agent's shell was given: nothing the command line controls.
    Inherited,
    /// A file (`< script.sh`).
    File,
    /// The output of these commands (a pipe or `< <(…)`), nearest last.
    Pipe(Vec<Producer>),
    /// A here-document or here-string.
    Document(Field),
}

/// A simple command about to be judged.
#[derive(Debug, Clone)]
pub(crate) struct Invocation {
    /// The program's file name, lower-cased, without directories or `.exe`.
    pub(crate) name: String,
    /// The program word as expanded.
    pub(crate) program: Field,
    pub(crate) args: Vec<Field>,
    pub(crate) stdin: Stdin,
    /// Run with `&` (in the background).
    pub(crate) background: bool,
    /// The wrappers it was found behind (`sudo`, `nohup`, …), outermost first.
    pub(crate) wrappers: Vec<String>,
    /// Its working directory, `None` when unknown.
    pub(crate) cwd: Option<PathBuf>,
}

impl Invocation {
    pub(crate) fn new(mut argv: Vec<Field>, stdin: Stdin, background: bool, cwd: Option<PathBuf>) -> Option<Self> {
        if argv.is_empty() {
            return None;
        }
        let program = argv.remove(0);
        Some(Invocation { name: program_name(&program.text), program, args: argv, stdin, background, wrappers: Vec::new(), cwd })
    }

    /// The same invocation running `argv` instead (after a wrapper).
    fn rerun(&self, mut argv: Vec<Field>) -> Option<Self> {
        if argv.is_empty() {
            return None;
        }
        let program = argv.remove(0);
        let mut wrappers = self.wrappers.clone();
        wrappers.push(self.name.clone());
        Some(Invocation {
            name: program_name(&program.text),
            program,
            args: argv,
            stdin: self.stdin.clone(),
            background: self.background,
            wrappers,
            cwd: self.cwd.clone(),
        })
    }

    /// The arguments' texts, dynamic ones included in their source spelling.
    pub(crate) fn texts(&self) -> impl Iterator<Item = &str> {
        self.args.iter().map(|field| field.text.as_str())
    }

    pub(crate) fn behind(&self, wrapper: &str) -> bool {
        self.wrappers.iter().any(|name| name == wrapper)
    }
}

/// `/usr/bin/Python3.exe` → `python3`.
pub(crate) fn program_name(text: &str) -> String {
    let base = text.rsplit('/').next().unwrap_or(text).to_lowercase();
    base.strip_suffix(".exe").map(str::to_owned).unwrap_or(base)
}

/// How a wrapper reads its own options before the command it runs.
struct WrapperSyntax {
    /// Short options that take a value (glued or as the next argument).
    short_values: &'static str,
    long_values: &'static [&'static str],
    /// Positional arguments of the wrapper's own before the command (`timeout 5 cmd`).
    positionals: usize,
    /// Options after which the wrapper runs nothing (`command -v`).
    queries: &'static str,
}

fn wrapper_syntax(name: &str) -> Option<WrapperSyntax> {
    let syntax = |short_values, long_values, positionals, queries| Some(WrapperSyntax { short_values, long_values, positionals, queries });
    match name {
        "command" => syntax("", &[], 0, "vV"),
        "builtin" | "nohup" | "busybox" | "toybox" | "unbuffer" => syntax("", &[], 0, ""),
        "exec" => syntax("a", &[], 0, ""),
        "nice" => syntax("n", &["--adjustment"], 0, ""),
        "ionice" => syntax("cnt", &["--class", "--classdata"], 0, "pPu"),
        "chrt" => syntax("T", &["--sched-runtime", "--sched-deadline", "--sched-period"], 1, "p"),
        "taskset" => syntax("", &[], 1, "p"),
        "timeout" => syntax("sk", &["--signal", "--kill-after"], 1, ""),
        "stdbuf" => syntax("ioe", &["--input", "--output", "--error"], 0, ""),
        "setsid" => syntax("", &[], 0, ""),
        "time" => syntax("fo", &["--format", "--output"], 0, ""),
        "chroot" => syntax("", &["--userspec", "--groups"], 1, ""),
        "doas" => syntax("uC", &[], 0, "L"),
        "sudo" => syntax(
            "ughpCDrtUTR",
            &[
                "--user",
                "--group",
                "--host",
                "--prompt",
                "--close-from",
                "--chdir",
                "--role",
                "--type",
                "--other-user",
                "--command-timeout",
                "--chroot",
            ],
            0,
            "lvkK",
        ),
        "env" => syntax("uCSa", &["--unset", "--chdir", "--split-string", "--argv0"], 0, ""),
        "flock" => syntax("wEc", &["--timeout", "--conflict-exit-code", "--command"], 1, ""),
        "watch" => syntax("nqd", &["--interval", "--equexit", "--differences"], 0, ""),
        _ => None,
    }
}

/// One option a wrapper was given, with its value when it takes one.
struct WrapperOption {
    flag: String,
    value: Option<Field>,
    /// Written together with other short options (`-nS`).
    clustered: bool,
}

/// What a wrapper's argument list holds.
struct WrapperArgs {
    options: Vec<WrapperOption>,
    /// `NAME=value` words before the command (`env`).
    assignments: usize,
    command: Vec<Field>,
    query: bool,
}

fn split_wrapper_args(name: &str, syntax: &WrapperSyntax, args: &[Field]) -> WrapperArgs {
    let mut parsed = WrapperArgs { options: Vec::new(), assignments: 0, command: Vec::new(), query: false };
    let mut positionals = syntax.positionals;
    let mut i = 0;
    while i < args.len() {
        let text = args[i].text.as_str();
        if text == "--" {
            i += 1;
            break;
        }
        if let Some(long) = text.strip_prefix("--").filter(|long| !long.is_empty()) {
            let (flag, glued) = long.split_once('=').map_or((text, None), |(flag, value)| (&text[..flag.len() + 2], Some(value)));
            let takes_value = syntax.long_values.contains(&flag) && glued.is_none();
            let value = if takes_value { args.get(i + 1).cloned() } else { glued.map(Field::literal) };
            parsed.options.push(WrapperOption { flag: flag.to_owned(), value, clustered: false });
            i += 1 + usize::from(takes_value);
            continue;
        }
        if text.len() > 1 && text.starts_with('-') && !(name == "nice" && text[1..].chars().all(|c| c.is_ascii_digit())) {
            let cluster: Vec<char> = text.chars().skip(1).collect();
            let mut consumed_next = false;
            for (at, flag) in cluster.iter().enumerate() {
                parsed.query |= syntax.queries.contains(*flag);
                if syntax.short_values.contains(*flag) {
                    let glued: String = cluster[at + 1..].iter().collect();
                    let value = if glued.is_empty() {
                        consumed_next = true;
                        args.get(i + 1).cloned()
                    } else {
                        Some(Field::literal(glued))
                    };
                    parsed.options.push(WrapperOption { flag: format!("-{flag}"), value, clustered: cluster.len() > 1 });
                    break;
                }
                parsed.options.push(WrapperOption { flag: format!("-{flag}"), value: None, clustered: cluster.len() > 1 });
            }
            i += 1 + usize::from(consumed_next);
            continue;
        }
        if name == "nice" && text.starts_with('-') {
            i += 1;
            continue;
        }
        if name == "env" && is_assignment(text) {
            parsed.assignments += 1;
            i += 1;
            continue;
        }
        if positionals > 0 {
            positionals -= 1;
            i += 1;
            continue;
        }
        break;
    }
    // `env` and the wrappers it resembles may be followed by more `NAME=value` words, which
    // bash would run as a command; judging them as `env` does is the stricter reading.
    while i < args.len() && is_assignment(&args[i].text) {
        i += 1;
    }
    // An option's missing value can leave `i` past the end (`sudo -u`).
    parsed.command = args.get(i..).unwrap_or_default().to_vec();
    parsed
}

pub(crate) fn is_assignment(text: &str) -> bool {
    text.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !name.starts_with(|c: char| c.is_ascii_digit())
    })
}

impl Judge<'_> {
    /// The invocation behind any wrappers; `None` when nothing runs (or what runs was already
    /// judged as code).
    pub(crate) fn peel(&mut self, mut invocation: Invocation) -> Option<Invocation> {
        while let Some(syntax) = wrapper_syntax(&invocation.name) {
            let parsed = split_wrapper_args(&invocation.name, &syntax, &invocation.args);
            if parsed.query {
                return None;
            }
            let mut next = invocation.rerun(parsed.command.clone());
            match invocation.name.as_str() {
                "sudo" => self.sudo_options(&parsed.options, &parsed.command)?,
                "doas" if parsed.options.iter().any(|option| option.flag == "-s") && parsed.command.is_empty() => return None,
                "env" => {
                    for option in &parsed.options {
                        match (option.flag.as_str(), &option.value) {
                            ("-S" | "--split-string", Some(code)) => {
                                let rest: Vec<&str> = parsed.command.iter().map(|field| field.text.as_str()).collect();
                                self.code_in_child_shell(&format!("{} {}", code.text, rest.join(" ")));
                                return None;
                            }
                            ("-C" | "--chdir", Some(dir)) => {
                                let cwd = if dir.dynamic { None } else { self.context.absolute(&dir.text, invocation.cwd.as_deref()) };
                                if let Some(next) = next.as_mut() {
                                    next.cwd = cwd;
                                }
                            }
                            _ => {}
                        }
                    }
                }
                "time" => {
                    for option in parsed.options.iter().filter(|option| option.flag == "-o" || option.flag == "--output") {
                        if let Some(file) = &option.value {
                            self.written(file, invocation.cwd.as_deref(), Via::Other("time -o"));
                        }
                    }
                }
                "flock" => {
                    if let Some(code) = parsed
                        .options
                        .iter()
                        .find(|option| option.flag == "-c" || option.flag == "--command")
                        .and_then(|option| option.value.as_ref())
                    {
                        self.shell_code_argument(code, "flock -c");
                        return None;
                    }
                }
                "watch" if !parsed.options.iter().any(|option| option.flag == "-x" || option.flag == "--exec") => {
                    let code: Vec<&str> = parsed.command.iter().map(|field| field.text.as_str()).collect();
                    let dynamic = parsed.command.iter().any(|field| field.dynamic);
                    self.shell_code_argument(&Field { text: code.join(" "), dynamic, ..Field::default() }, "watch");
                    return None;
                }
                _ => {}
            }
            invocation = next?;
            if invocation.program.dynamic || invocation.program.glob {
                self.flag(keys::DYNAMIC_COMMAND_NAME, invocation.program.text.clone());
            }
        }
        Some(invocation)
    }

    /// Judges sudo's own options; `None` when sudo runs nothing more to judge.
    fn sudo_options(&mut self, options: &[WrapperOption], command: &[Field]) -> Option<()> {
        let mut shell = false;
        for option in options {
            let flag = option.flag.as_str();
            if matches!(flag, "-S" | "--stdin") && !self.context.sudo_password_configured {
                self.flag(keys::SUDO_STDIN, "sudo -S without a configured SUDO_PASSWORD");
            }
            let privileged = matches!(flag, "-S" | "-s" | "-A" | "-a" | "-i" | "-l")
                || ["--st", "--a", "--sh", "--lo"].iter().any(|prefix| flag.starts_with(prefix));
            if privileged {
                self.flag(keys::SUDO_PRIVILEGE_FLAG, format!("sudo {flag}"));
            }
            shell |= matches!(flag, "-s" | "-i") || flag.starts_with("--sh") || flag.starts_with("--lo");
        }
        if options.iter().any(|option| option.clustered && matches!(option.flag.as_str(), "-S" | "-s" | "-A" | "-a")) {
            self.flag(keys::SUDO_COMBINED_FLAG, "sudo with combined privilege flags");
        }
        if shell && !command.is_empty() {
            // `sudo -s cmd args` runs `$SHELL -c 'cmd args'`.
            let code: Vec<&str> = command.iter().map(|field| field.text.as_str()).collect();
            self.code_in_child_shell(&code.join(" "));
            return None;
        }
        Some(())
    }
}
