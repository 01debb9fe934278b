//! The names the model sees: `mcp__<server>__<tool>` reduced to `[A-Za-z0-9_]`, clamped to 64
//! characters (providers refuse longer ones), collisions settled the same way every time; and the
//! `tools.include` / `tools.exclude` filter with `*` and `?` globs.

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// OpenAI's limit (`^[a-zA-Z0-9_-]{1,64}$`); the others allow at least this.
pub(crate) const MAX_NAME_LEN: usize = 64;

/// `text` with every character outside `[A-Za-z0-9_]` turned into `_`.
pub(crate) fn sanitize(text: &str) -> String {
    text.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect()
}

/// `mcp__<server>__<tool>`, sanitised, before clamping.
pub(crate) fn prefixed(server: &str, tool: &str) -> String {
    format!("mcp__{}__{}", sanitize(server), sanitize(tool))
}

/// A prefix of `name` + `_` + 8 hex of sha256(`key`): at most 64 characters. `name` is
/// sanitised ASCII, so byte slicing is char slicing.
fn hashed(name: &str, key: &str) -> String {
    let digest = Sha256::digest(key.as_bytes());
    let hex: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    let keep = MAX_NAME_LEN - 1 - hex.len();
    format!("{}_{hex}", &name[..name.len().min(keep)])
}

/// `name` if it fits in 64 characters, else a prefix + `_` + 8 hex of sha256 of the full name.
pub(crate) fn clamp(name: String) -> String {
    if name.len() <= MAX_NAME_LEN { name } else { hashed(&name, &name) }
}

/// One tool wanting a name: `(server, original)` orders who keeps a contested name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Claim {
    pub(crate) server: String,
    pub(crate) original: String,
    /// A utility tool (`list_resources`…) yields to a native tool of the same name.
    pub(crate) utility: bool,
}

/// Final names for `claims`, in the same order. The first claimant (native before utility, then
/// by server, then by original name) keeps a contested name; natives after it get the hashed
/// form of the full name (with the original in it, so it differs), utilities are dropped (`None`).
pub(crate) fn assign(claims: &[Claim]) -> Vec<Option<String>> {
    let mut order: Vec<usize> = (0..claims.len()).collect();
    order.sort_by(|&a, &b| (claims[a].utility, &claims[a]).cmp(&(claims[b].utility, &claims[b])));
    let mut taken: BTreeMap<String, usize> = BTreeMap::new();
    let mut names = vec![None; claims.len()];
    for i in order {
        let claim = &claims[i];
        let wanted = clamp(prefixed(&claim.server, &claim.original));
        if let Some(&owner) = taken.get(&wanted) {
            if claim.utility {
                tracing::warn!(server = %claim.server, tool = %wanted, "MCP utility tool skipped: the server has a tool of that name");
                continue;
            }
            // The hash covers the server's own spelling, so the two colliding tools differ.
            let full = prefixed(&claim.server, &claim.original);
            let alternative = hashed(&full, &format!("{}\u{0}{}", claim.server, claim.original));
            tracing::warn!(
                server = %claim.server, tool = %claim.original, name = %alternative,
                kept_by = %claims[owner].original, "MCP tool name collision: renamed"
            );
            taken.insert(alternative.clone(), i);
            names[i] = Some(alternative);
        } else {
            taken.insert(wanted.clone(), i);
            names[i] = Some(wanted);
        }
    }
    names
}

/// `*` any run, `?` one character; anything else literal.
pub(crate) fn glob_match(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// Whether `tool` (its original name) passes `include` / `exclude`; `include` wins.
pub(crate) fn allowed(tool: &str, include: Option<&[String]>, exclude: &[String]) -> bool {
    match include {
        Some(patterns) => patterns.iter().any(|p| glob_match(p, tool)),
        None => !exclude.iter().any(|p| glob_match(p, tool)),
    }
}
