//! The weight budget CI enforces (`budgets.yaml` beside this file, or `--budgets PATH`): the
//! stripped binary's size and the Telegram-only gateway's idle RSS, and the verdict against them.

use serde_yaml_ng::Value;
use std::path::Path;

pub(crate) const STRIPPED_KEY: &str = "stripped_binary_bytes";
pub(crate) const IDLE_RSS_KEY: &str = "idle_rss_telegram_only_kb";

pub(crate) struct Budgets {
    pub stripped_binary_bytes: u64,
    pub idle_rss_telegram_only_kb: u64,
}

pub(crate) fn load(path: &Path) -> Result<Budgets, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read the budget file {}: {e}", path.display()))?;
    let yaml: Value = serde_yaml_ng::from_str(&text).map_err(|e| format!("the budget file {} is not valid YAML: {e}", path.display()))?;
    Ok(Budgets { stripped_binary_bytes: number(&yaml, STRIPPED_KEY, path)?, idle_rss_telegram_only_kb: number(&yaml, IDLE_RSS_KEY, path)? })
}

/// A whole number under `key`; `42_000_000` is accepted too (YAML 1.2 reads it as a string).
fn number(yaml: &Value, key: &str, path: &Path) -> Result<u64, String> {
    let value = yaml.get(key).ok_or_else(|| format!("the budget file {} has no `{key}`", path.display()))?;
    let parsed = match value {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.replace('_', "").parse().ok(),
        _ => None,
    };
    parsed.filter(|n| *n > 0).ok_or_else(|| format!("`{key}` in the budget file {} must be a positive whole number", path.display()))
}

/// One figure beside its budget.
pub(crate) struct Verdict {
    pub key: &'static str,
    pub what: &'static str,
    pub unit: &'static str,
    pub measured: u64,
    pub budget: u64,
}

impl Verdict {
    pub(crate) fn over(&self) -> bool {
        self.measured > self.budget
    }

    /// What CI prints when the figure is over its budget.
    pub(crate) fn complaint(&self, path: &Path) -> String {
        format!(
            "{} is over budget: measured {} {unit}, budget {} {unit} (`{}` in {}). Make it smaller again; or, if a new \
             capability really needs the weight, raise `{}` in the commit that adds that capability, stating the before and \
             after figures in its message.",
            self.what,
            self.measured,
            self.budget,
            self.key,
            path.display(),
            self.key,
            unit = self.unit,
        )
    }
}
