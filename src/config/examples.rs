//! The generated parts of `config/hermes.example.yaml` and `config/.env.example`: the platform
//! blocks and variables come from the registrations, between marker lines, so that the examples
//! cannot drift from what the build knows. `HERMES_BLESS=1 cargo test --lib generated_examples`
//! rewrites them; without it the test fails on any difference.

use crate::registry::Registry;

/// First and last line of the generated region.
pub(crate) const BEGIN: &str = "# --- generated from the adapter registrations; edit them, not this region ---";
/// See [`BEGIN`].
pub(crate) const END: &str = "# --- end of generated region ---";

/// The platform blocks of the example `config.yaml`, two spaces in (under `platforms:`).
pub(crate) fn platform_blocks(registry: &Registry) -> String {
    let mut out = String::new();
    for r in registry.iter() {
        out.push_str(&format!("\n  # {}\n  {}:\n{}", r.summary, r.platform, r.example_yaml));
    }
    out
}

/// The platform variables of `.env.example`.
pub(crate) fn env_lines(registry: &Registry) -> String {
    let mut out = String::new();
    for r in registry.iter() {
        out.push_str(&format!("\n# --- {} (platforms.{}.*) ---\n", r.summary, r.platform));
        for var in r.env {
            let assignment = format!("# {}={}", var.name, var.example);
            out.push_str(&format!("{assignment:<40} # platforms.{}.{}: {}\n", r.platform, var.key, var.description));
        }
    }
    out
}

/// `committed` with its generated region (the lines between [`BEGIN`] and [`END`], whatever
/// their indentation) replaced by `generated`; `None` without markers.
pub(crate) fn replace_region(committed: &str, generated: &str) -> Option<String> {
    let begin = committed.find(BEGIN)?;
    let body = committed[begin..].find('\n')? + begin + 1;
    let end_marker = committed[body..].find(END)? + body;
    let end_line = committed[..end_marker].rfind('\n').map_or(0, |i| i + 1);
    Some(format!("{}{}\n{}", &committed[..body], generated.trim_matches('\n'), &committed[end_line..]))
}
