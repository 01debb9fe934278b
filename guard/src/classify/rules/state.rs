//! Builtins that change what later words mean: the working directory and variables.

use super::super::invocation::{Invocation, is_assignment};
use super::super::judge::Judge;

impl Judge<'_> {
    /// `cd DIR`, `cd` (home), `cd -`, `pushd DIR`, `popd`.
    pub(crate) fn change_dir(&mut self, invocation: &Invocation) {
        let operand = invocation.args.iter().find(|field| field.dynamic || !field.text.starts_with('-') || field.text == "-");
        let to = match (invocation.name.as_str(), operand) {
            ("popd", _) => None,
            (_, None) => Some(self.context.home().to_path_buf()),
            (_, Some(dir)) if dir.dynamic || dir.text == "-" => None,
            (_, Some(dir)) => self.context.absolute(&dir.text, invocation.cwd.as_deref()),
        };
        let conditional = self.conditional > 0;
        self.scope.change_dir(to, conditional);
    }

    /// `export X=1`, `declare -x X=1`, `local X=$(…)`: the assignment happens in this shell.
    pub(crate) fn declare(&mut self, invocation: &Invocation) {
        let conditional = self.conditional > 0;
        for field in &invocation.args {
            if let Some((name, value)) = field.text.split_once('=').filter(|_| is_assignment(&field.text)) {
                let value = (!field.dynamic).then(|| value.to_owned());
                self.scope.assign(name, value, conditional);
            }
        }
    }
}
