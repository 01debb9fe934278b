//! What the gateway does to its own process so the commands its agent runs cannot read it: it
//! becomes non-dumpable, which closes its `/proc/<pid>/environ`, memory and file descriptors to
//! other processes of the same user (its own children included) and keeps it out of core dumps.

/// Mark this process non-dumpable; the error says why it could not be.
pub(crate) fn make_undumpable() -> std::io::Result<()> {
    // SAFETY: prctl(PR_SET_DUMPABLE, 0) takes no pointers and only changes this process's flag.
    let rc = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    if rc == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

/// Whether this process is dumpable.
#[cfg(test)]
pub(crate) fn is_dumpable() -> bool {
    // SAFETY: PR_GET_DUMPABLE takes no arguments and only reads this process's flag.
    unsafe { libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0) == 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_stops_being_dumpable() {
        make_undumpable().unwrap();
        assert!(!is_dumpable());
    }
}
