//! Link-time choices for the `hermes` binary.
//!
//! A position-independent executable carries one 24-byte relocation for every pointer stored in
//! its read-only data — about 40,000 here, ~940 kB — and the loader reads all of them at every
//! start, so they stay resident for the life of the daemon. Packed as `DT_RELR` they take a
//! few kB, with the same address-space randomisation. Only glibc 2.36 and later understand the
//! packed form, so it is used only when the binary is built on such a system for itself (the
//! usual case: `hermes gateway install` installs the binary that was built on the host). The
//! linker then records a `GLIBC_ABI_DT_RELR` requirement, so an older loader refuses the binary
//! with a clear message instead of running it half-relocated.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if builds_for_this_glibc_at_least(2, 36) {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

fn builds_for_this_glibc_at_least(major: u32, minor: u32) -> bool {
    let env = |name: &str| std::env::var(name).unwrap_or_default();
    let native = env("TARGET") == env("HOST");
    if !native || env("CARGO_CFG_TARGET_OS") != "linux" || env("CARGO_CFG_TARGET_ENV") != "gnu" {
        return false;
    }
    host_glibc_version().is_some_and(|found| found >= (major, minor))
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn host_glibc_version() -> Option<(u32, u32)> {
    // SAFETY: gnu_get_libc_version returns a pointer to a static, NUL-terminated string.
    let version = unsafe { std::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) };
    let mut parts = version.to_str().ok()?.split('.');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn host_glibc_version() -> Option<(u32, u32)> {
    None
}
