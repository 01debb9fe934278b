//! Label values whose number is bounded whatever the input: platform names, provider and model
//! names (a user can `/model` any string), tool names (a model can call a tool that does not
//! exist). Each distinct value is kept once, as a `&'static str`, so that recording copies no
//! string; past the cap every new value is counted as [`OTHER`].

use std::sync::Mutex;

/// The label every value past a set's cap is folded into.
pub(crate) const OTHER: &str = "other";
/// Longer values are cut (a label is for reading on a dashboard, not for storing prompts).
const MAX_LABEL_CHARS: usize = 64;

/// A capped set of label values. Values are leaked on purpose: at most `cap` short strings per
/// set for the life of the process, which is what lets a recording site hold no lock and copy
/// no string after the lookup.
#[derive(Debug)]
pub(crate) struct BoundedLabels {
    cap: usize,
    known: Mutex<Vec<&'static str>>,
}

impl BoundedLabels {
    pub(crate) const fn new(cap: usize) -> Self {
        Self { cap, known: Mutex::new(Vec::new()) }
    }

    /// The label for `raw`: itself (sanitised) while the set has room, [`OTHER`] after.
    pub(crate) fn label(&self, raw: &str) -> &'static str {
        let mut known = self.known.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(found) = known.iter().find(|k| matches_sanitised(k, raw)) {
            return found;
        }
        if known.len() >= self.cap {
            return OTHER;
        }
        let sanitised = sanitise(raw);
        // Two raw values may sanitise to the same label.
        if let Some(found) = known.iter().find(|k| **k == sanitised) {
            return found;
        }
        let leaked: &'static str = Box::leak(sanitised.into_boxed_str());
        known.push(leaked);
        leaked
    }

    /// How many distinct values the set holds (not counting [`OTHER`]).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.known.lock().map(|k| k.len()).unwrap_or(0)
    }
}

/// Printable ASCII letters, digits and `._-:/@`, at most [`MAX_LABEL_CHARS`]; anything else is `_`
/// (label values may hold any UTF-8, but quotes, newlines and control characters have no place
/// on a dashboard).
fn sanitise(raw: &str) -> String {
    let mut out: String = raw.trim().chars().take(MAX_LABEL_CHARS).map(|c| if allowed(c) { c } else { '_' }).collect();
    if out.is_empty() {
        out.push_str("unknown");
    }
    out
}

fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':' | '/' | '@')
}

/// Whether `label` is what `raw` sanitises to, without allocating for the common case (a value
/// already seen, which needed no change).
fn matches_sanitised(label: &str, raw: &str) -> bool {
    let raw = raw.trim();
    if raw.len() <= MAX_LABEL_CHARS && raw.chars().all(allowed) && !raw.is_empty() {
        return label == raw;
    }
    label == sanitise(raw)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn arbitrary_model_names_cannot_grow_the_label_set_past_its_cap() {
        let labels = BoundedLabels::new(8);
        let seen: HashSet<&str> = (0..10_000).map(|i| labels.label(&format!("user-model-{i}"))).collect();
        assert_eq!(labels.len(), 8);
        assert_eq!(seen.len(), 9, "eight names and `other`: {seen:?}");
        assert!(seen.contains(OTHER));
        assert_eq!(labels.label("user-model-3"), "user-model-3", "a name admitted early keeps its own label");
        assert_eq!(labels.label("user-model-9999"), OTHER);
    }

    #[test]
    fn hostile_names_are_cut_and_cleaned() {
        let labels = BoundedLabels::new(8);
        let long = "x".repeat(500);
        assert_eq!(labels.label(&long).len(), MAX_LABEL_CHARS);
        assert_eq!(labels.label("gpt\"}\nevil{"), "gpt___evil_");
        assert_eq!(labels.label("   "), "unknown");
        assert_eq!(labels.label("anthropic/claude-sonnet-4.5"), "anthropic/claude-sonnet-4.5");
        assert_eq!(labels.len(), 4, "the same name again is not a new label");
        assert_eq!(labels.label(&long), labels.label(&format!("{long}y")), "cut to the same label, counted once");
        assert_eq!(labels.len(), 4);
    }
}
