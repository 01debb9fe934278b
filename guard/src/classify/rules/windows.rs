//! Windows shells reached from a POSIX shell (Git Bash, WSL interop): `cmd /c del …`,
//! `powershell Remove-Item …`, `powershell -EncodedCommand …`.

use super::super::invocation::Invocation;
use super::super::judge::Judge;
use crate::keys;

impl Judge<'_> {
    pub(crate) fn windows_cmd(&mut self, invocation: &Invocation) {
        let lower: Vec<String> = invocation.texts().map(str::to_lowercase).collect();
        let Some(start) = lower.iter().position(|arg| arg == "/c" || arg == "/k") else { return };
        let deletes = lower[start + 1..]
            .iter()
            .flat_map(|arg| arg.split([' ', '&', '|']))
            .any(|word| matches!(word, "del" | "erase" | "rd" | "rmdir"));
        if deletes {
            self.flag(keys::WINDOWS_CMD_DELETE, format!("cmd {}", lower.join(" ")));
        }
    }

    pub(crate) fn powershell(&mut self, invocation: &Invocation) {
        let lower: Vec<String> = invocation.texts().map(str::to_lowercase).collect();
        let shown = format!("{} {}", invocation.name, lower.join(" "));
        // PowerShell takes any unambiguous prefix of -EncodedCommand (and the alias -ec).
        if lower.iter().any(|arg| arg == "-ec" || (arg.len() >= 2 && "-encodedcommand".starts_with(arg.as_str()))) {
            self.flag(keys::POWERSHELL_ENCODED, shown.clone());
        }
        let command_words =
            lower.iter().filter(|arg| !arg.starts_with('-')).flat_map(|arg| arg.split([' ', ';', '|', '(', '{'])).collect::<Vec<_>>();
        if command_words.iter().any(|word| matches!(*word, "remove-item" | "rmdir" | "erase" | "del" | "rd" | "ri" | "rm")) {
            self.flag(keys::POWERSHELL_DELETE, shown.clone());
        }
        if lower.iter().any(|arg| matches!(arg.as_str(), "-c" | "-command" | "-file" | "-f") || !arg.starts_with('-')) {
            self.flag(keys::SCRIPT_INLINE, shown);
        }
    }
}
