//! The process's one TLS crypto provider: rustls with ring.
//!
//! Every HTTPS client in the binary — ours (reqwest 0.13, built with `rustls-no-provider`),
//! teloxide's and serenity's (reqwest 0.12), matrix-sdk's — asks rustls for the process default
//! before it falls back on a provider of its own, so installing ring here, before any client is
//! built, makes ring the only provider that runs. A build without Matrix then links no other
//! crypto library at all; with Matrix, aws-lc-rs is still linked (matrix-sdk turns on reqwest's
//! `rustls` feature, which names it as the fallback) but never used.

/// Installs ring as the process-wide provider; a second call (or a provider installed by someone
/// else first) leaves the first in place, which is what every caller wants.
pub(crate) fn install_process_crypto_provider() {
    // `Err` only says a provider was already installed: the process has one either way.
    let _already_installed = rustls::crypto::ring::default_provider().install_default();
}
