//! Code run from text: shells (`sh -c`, a script on stdin, `bash <(…)`), `eval`, `source`,
//! `su -c`, `alias`, `trap`, and interpreters given inline code (`python3 -c`, `perl -e`, …) or
//! code on their standard input.
//!
//! Text that is code is classified as a command of its own, so `sh -c 'rm -rf /'` is as
//! hardline as `rm -rf /`. Code that only exists at run time (a download, a decoder's output, a
//! variable) cannot be judged and is flagged with what fed it.

use super::super::expand::{Field, decode_ansi_c};
use super::super::invocation::{Invocation, Producer, Stdin};
use super::super::judge::Judge;
use super::inline_code::Family;
use super::write::Via;
use super::{Syntax, parse_args};
use crate::keys;

/// Programs that download.
const DOWNLOADERS: &[&str] = &["curl", "wget", "fetch", "aria2c", "http", "xh", "nc", "ncat", "socat"];

/// What consumes code on standard input.
#[derive(Clone, Copy)]
enum Reader {
    Shell,
    Interpreter(Family),
}

/// The interpreter family of a program name (`python3.12` is Python).
pub(crate) fn interpreter_family(name: &str) -> Option<Family> {
    let stem = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    match stem {
        "python" | "pypy" | "py" => Some(Family::Python),
        "perl" => Some(Family::Perl),
        "ruby" | "irb" => Some(Family::Ruby),
        "node" | "nodejs" | "bun" | "deno" => Some(Family::JavaScript),
        "php" => Some(Family::Php),
        "osascript" => Some(Family::AppleScript),
        "lua" | "luajit" | "rscript" | "tclsh" => Some(Family::Other),
        _ => None,
    }
}

impl Judge<'_> {
    /// `sh`, `bash`, `zsh`, …: `-c CODE`, a script file, or a script on standard input.
    pub(crate) fn shell(&mut self, invocation: &Invocation) {
        let mut command_mode = false;
        let mut stdin_mode = false;
        let mut operands: Vec<&Field> = Vec::new();
        let mut args = invocation.args.iter();
        while let Some(field) = args.next() {
            let text = field.text.as_str();
            if !operands.is_empty() || field.dynamic {
                operands.push(field);
            } else if text == "--" || text == "-" {
                stdin_mode |= text == "-";
                operands.extend(args.by_ref());
            } else if let Some(long) = text.strip_prefix("--").filter(|long| long.chars().all(|c| c.is_ascii_lowercase() || c == '-')) {
                if ["rcfile", "init-file"].contains(&long) {
                    args.next();
                }
            } else if text.len() > 1
                && (text.starts_with('-') || text.starts_with('+'))
                && text[1..].chars().all(|c| c.is_ascii_alphabetic())
            {
                // Only letters make options (`-lc`, `+x`); anything else is the code or script.
                command_mode |= text.contains('c');
                stdin_mode |= text.contains('s');
                if text.ends_with(['o', 'O']) {
                    args.next();
                }
            } else {
                operands.push(field);
            }
        }
        if command_mode {
            match operands.first() {
                Some(code) => self.shell_code_argument(code, &format!("{} -c", invocation.name)),
                None => self.flag(keys::SHELL_INLINE, format!("{} -c without code", invocation.name)),
            }
            return;
        }
        match operands.first() {
            Some(script) if script.process => self.script_from_process_substitution(script, &invocation.name),
            Some(script) if !stdin_mode && script.text != "/dev/stdin" => {}
            _ => self.code_on_stdin(invocation, Reader::Shell),
        }
    }

    /// Shell code given as an argument (`sh -c CODE`, `flock -c CODE`, `watch CODE`).
    pub(crate) fn shell_code_argument(&mut self, code: &Field, how: &str) {
        self.flag(keys::SHELL_INLINE, format!("{how} {}", code.text));
        if code.substituted.iter().any(|name| DOWNLOADERS.contains(&name.as_str())) {
            self.flag(keys::REMOTE_COMMAND_SUBSTITUTION, format!("{how} with downloaded code"));
        }
        if !code.dynamic {
            self.code_in_child_shell(&code.text);
        }
    }

    fn script_from_process_substitution(&mut self, script: &Field, how: &str) {
        if script.substituted.iter().any(|name| DOWNLOADERS.contains(&name.as_str())) {
            self.flag(keys::REMOTE_PROCESS_SUBSTITUTION, format!("{how} <({} …)", script.substituted.join(" | ")));
        } else {
            self.flag(keys::PROCESS_SUBSTITUTION_SCRIPT, format!("{how} <({} …)", script.substituted.join(" | ")));
        }
    }

    /// `eval ARGS`: the arguments, joined by spaces, are code run here.
    pub(crate) fn eval(&mut self, invocation: &Invocation) {
        let code = invocation.texts().collect::<Vec<_>>().join(" ");
        if invocation.args.iter().any(|field| field.dynamic) {
            let substituted: Vec<&String> = invocation.args.iter().flat_map(|field| &field.substituted).collect();
            if substituted.iter().any(|name| DOWNLOADERS.contains(&name.as_str())) {
                self.flag(keys::REMOTE_COMMAND_SUBSTITUTION, format!("eval {code}"));
            } else {
                self.flag(keys::EVAL_DYNAMIC, format!("eval {code}"));
            }
            return;
        }
        self.code(&code);
    }

    /// `source FILE` / `. FILE`: a file is the user's own script; a pipe or a download is not.
    pub(crate) fn source(&mut self, invocation: &Invocation) {
        let Some(script) = invocation.args.first() else { return };
        if script.process {
            self.script_from_process_substitution(script, &invocation.name);
        } else if script.substituted.iter().any(|name| DOWNLOADERS.contains(&name.as_str())) {
            self.flag(keys::REMOTE_COMMAND_SUBSTITUTION, format!("{} {}", invocation.name, script.text));
        } else if script.text == "/dev/stdin" || script.text == "-" {
            self.code_on_stdin(invocation, Reader::Shell);
        }
    }

    /// `su [user] -c CODE`, `runuser -c CODE`.
    pub(crate) fn su(&mut self, invocation: &Invocation) {
        let args = parse_args(
            &invocation.args,
            &Syntax { short_values: "cslgG", long_values: &["--command", "--shell", "--group", "--supp-group", "--login"] },
        );
        if let Some(code) = args.value(&["-c", "--command"]) {
            self.shell_code_argument(&code.clone(), &invocation.name);
        }
    }

    /// `alias name='code'`: the value runs wherever the alias is used.
    pub(crate) fn alias(&mut self, invocation: &Invocation) {
        for field in &invocation.args {
            if let Some((_, value)) = field.text.split_once('=').filter(|_| !field.dynamic) {
                self.code_in_subshell(value);
            }
        }
    }

    /// `trap 'code' SIGNAL…`: the code runs when the signal arrives.
    pub(crate) fn trap(&mut self, invocation: &Invocation) {
        let handler = invocation.args.iter().find(|field| !field.text.starts_with('-'));
        if let Some(handler) = handler.filter(|handler| !handler.dynamic && invocation.args.len() > 1) {
            let text = handler.text.clone();
            self.code_in_subshell(&text);
        }
    }

    /// `python3 -c CODE`, `perl -e CODE`, `node -e CODE`, `php -r CODE`, `osascript -e CODE`,
    /// `perl -i` edits, or code on standard input.
    pub(crate) fn interpreter(&mut self, invocation: &Invocation) {
        let Some(family) = interpreter_family(&invocation.name) else { return };
        let inline = inline_code(family, &invocation.name, &invocation.args);
        if let Some((code, in_place, files)) = &inline {
            self.flag(keys::SCRIPT_INLINE, format!("{} {}", invocation.name, code.text));
            self.scan_inline_code(family, &code.text);
            if *in_place {
                for file in files {
                    self.written(file, invocation.cwd.as_deref(), Via::ScriptInPlace);
                }
            }
            return;
        }
        let script = invocation.args.iter().find(|field| field.dynamic || !field.text.starts_with('-'));
        match script {
            Some(script) if script.process => self.script_from_process_substitution(script, &invocation.name),
            Some(script) if script.text != "/dev/stdin" => {}
            _ if invocation.args.iter().any(|field| field.text == "-m") => {}
            _ => self.code_on_stdin(invocation, Reader::Interpreter(family)),
        }
    }

    /// A shell or interpreter reading its program from standard input.
    fn code_on_stdin(&mut self, invocation: &Invocation, reader: Reader) {
        match &invocation.stdin {
            Stdin::Inherited | Stdin::File => {}
            Stdin::Document(document) => {
                let key = if matches!(reader, Reader::Shell) { keys::SHELL_HEREDOC } else { keys::SCRIPT_HEREDOC };
                self.flag(key, format!("{} reads a here-document", invocation.name));
                self.code_text(reader, document);
            }
            Stdin::Pipe(producers) => {
                let (key, what) = piped_code_key(producers);
                self.flag(key, format!("{what} | {}", invocation.name));
                if let Some(text) = static_output(producers) {
                    self.code_text(reader, &text);
                }
            }
        }
    }

    fn code_text(&mut self, reader: Reader, text: &Field) {
        match reader {
            Reader::Shell => {
                self.code_in_child_shell(&text.text);
            }
            Reader::Interpreter(family) => self.scan_inline_code(family, &text.text),
        }
    }
}

/// The key for code piped into a shell, by what produced it.
fn piped_code_key(producers: &[Producer]) -> (&'static str, String) {
    let names = producers.iter().map(|producer| producer.name.as_str()).collect::<Vec<_>>().join(" | ");
    let has = |test: &dyn Fn(&Producer) -> bool| producers.iter().any(test);
    let flags = |producer: &Producer, wanted: &[&str]| producer.args.iter().any(|field| wanted.contains(&field.text.as_str()));
    let key = if has(&|producer| DOWNLOADERS.contains(&producer.name.as_str())) {
        keys::PIPE_REMOTE_TO_SHELL
    } else if has(&|producer| {
        ["base64", "base32", "base16", "basenc"].contains(&producer.name.as_str()) && flags(producer, &["-d", "-D", "--decode"])
    }) {
        keys::PIPE_DECODED_TO_SHELL
    } else if has(&|producer| producer.name == "xxd" && flags(producer, &["-r", "-revert", "-rp", "-r -p"])) {
        keys::PIPE_XXD_TO_SHELL
    } else if has(&|producer| producer.name == "openssl" && flags(producer, &["-d", "-base64", "-a", "-A"])) {
        keys::PIPE_OPENSSL_TO_SHELL
    } else if has(&|producer| producer.name == "tr") {
        keys::PIPE_TR_TO_SHELL
    } else {
        keys::PIPE_TO_SHELL
    };
    (key, names)
}

/// The text a pipe carries when it is nothing but `echo`/`printf` of known words or `cat` of a
/// here-document.
fn static_output(producers: &[Producer]) -> Option<Field> {
    let [producer] = producers else { return None };
    if producer.args.iter().any(|field| field.dynamic) {
        return None;
    }
    let texts: Vec<&str> = producer.args.iter().map(|field| field.text.as_str()).collect();
    match producer.name.as_str() {
        "echo" => {
            let flags = texts
                .iter()
                .take_while(|text| text.len() > 1 && text.starts_with('-') && text[1..].chars().all(|c| "neE".contains(c)))
                .count();
            let words = texts[flags..].join(" ");
            let escapes = texts[..flags].iter().any(|flag| flag.contains('e'));
            Some(Field::literal(if escapes { decode_ansi_c(&words) } else { words }))
        }
        "printf" => texts.split_first().map(|(format, values)| Field::literal(printf(format, values))),
        "cat" if producer.args.is_empty() => producer.document.clone(),
        _ => None,
    }
}

/// What `printf FORMAT VALUES…` prints, for the conversions that pass text through.
fn printf(format: &str, values: &[&str]) -> String {
    let mut out = String::new();
    let mut values = values.iter();
    let mut chars = decode_ansi_c(format).chars().collect::<Vec<_>>().into_iter().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        // Skip flags, width and precision up to the conversion letter.
        let mut conversion = None;
        for next in chars.by_ref() {
            if next.is_ascii_alphabetic() || next == '%' {
                conversion = Some(next);
                break;
            }
        }
        match conversion {
            Some('%') => out.push('%'),
            Some('b') => out.push_str(&decode_ansi_c(values.next().unwrap_or(&""))),
            Some(_) => out.push_str(values.next().unwrap_or(&"")),
            None => {}
        }
    }
    out
}

/// The inline code an interpreter is given, whether it edits files in place (`perl -pi -e`),
/// and the files it then edits.
fn inline_code(family: Family, name: &str, args: &[Field]) -> Option<(Field, bool, Vec<Field>)> {
    let mut in_place = false;
    let mut code: Option<Field> = None;
    let mut i = 0;
    while i < args.len() {
        let text = args[i].text.as_str();
        if text == "--" || !text.starts_with('-') || text.len() < 2 {
            // The first operand is a script, or deno's `eval` subcommand; after inline code,
            // the files it reads or edits.
            if code.is_none() && name == "deno" && text == "eval" {
                code = args.get(i + 1).cloned();
                i += 2;
            }
            break;
        }
        i += 1;
        if let Some(long) = text.strip_prefix("--") {
            if family == Family::JavaScript && (long == "eval" || long == "print") {
                code = args.get(i).cloned();
                i += 1;
            } else if let Some(glued) = long.strip_prefix("eval=").or_else(|| long.strip_prefix("print=")) {
                code = Some(Field { text: glued.to_owned(), ..args[i - 1].clone() });
            }
            continue;
        }
        let flags: Vec<char> = text.chars().skip(1).collect();
        let code_flags: &[char] = match family {
            Family::Python => &['c'],
            Family::Perl => &['e', 'E'],
            Family::Ruby | Family::AppleScript | Family::Other => &['e'],
            Family::JavaScript => &['e', 'p'],
            Family::Php => &['r'],
        };
        for (at, flag) in flags.iter().enumerate() {
            if matches!(family, Family::Perl | Family::Ruby) && *flag == 'i' {
                in_place = true;
                // `-i.bak`: the rest is the backup suffix.
                break;
            }
            if code_flags.contains(flag) {
                let glued: String = flags[at + 1..].iter().collect();
                code = if glued.is_empty() {
                    i += 1;
                    args.get(i - 1).cloned()
                } else {
                    Some(Field { text: glued, ..args[i - 1].clone() })
                };
                break;
            }
            // Options whose value is the rest of the word (`-Mstrict`, `-I/lib`, `-W error`).
            if "MmIxWXCdEF".contains(*flag) && matches!(family, Family::Perl | Family::Python | Family::Ruby) {
                if at + 1 == flags.len() && matches!(flag, 'W' | 'X' | 'C' | 'E' | 'F' | 'I') {
                    i += 1;
                }
                break;
            }
        }
    }
    let files = args.get(i..).map(|rest| rest.iter().filter(|field| !field.text.starts_with('-')).cloned().collect()).unwrap_or_default();
    code.map(|code| (code, in_place, files))
}
