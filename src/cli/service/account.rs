//! Who a unit runs as: a user account's name, primary group and home directory, read from the
//! system's user database (`getpwnam_r`/`getpwuid_r`, so NSS sources such as LDAP count too).

use super::error::ServiceError;
use std::ffi::{CStr, CString};
use std::path::PathBuf;

/// A user account as `User=`, `Group=` and `Environment=HOME=…` need it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Account {
    pub name: String,
    pub group: String,
    pub home: PathBuf,
}

/// The account called `name`, or why there is none.
pub(crate) fn by_name(name: &str) -> Result<Account, ServiceError> {
    let c_name = CString::new(name).map_err(|_| ServiceError::NulInUserName { name: name.to_string() })?;
    lookup(|pwd, buf, result| {
        // SAFETY: every pointer is valid for the call; `buf` outlives the use of `pwd`'s fields.
        unsafe { libc::getpwnam_r(c_name.as_ptr(), pwd, buf.as_mut_ptr(), buf.len(), result) }
    })
    .ok_or_else(|| ServiceError::NoSuchUser { name: name.to_string() })
}

/// The account this process runs as (its effective user, which `sudo` changes and `$USER`
/// may not reflect).
pub(crate) fn current() -> Result<Account, ServiceError> {
    // SAFETY: geteuid cannot fail and has no side effects.
    let uid = unsafe { libc::geteuid() };
    lookup(|pwd, buf, result| {
        // SAFETY: as in `by_name`.
        unsafe { libc::getpwuid_r(uid, pwd, buf.as_mut_ptr(), buf.len(), result) }
    })
    .ok_or(ServiceError::NoEntryForUid { uid })
}

/// Runs a `getpw*_r` call, growing its buffer while it reports ERANGE.
fn lookup(mut call: impl FnMut(*mut libc::passwd, &mut Vec<libc::c_char>, *mut *mut libc::passwd) -> libc::c_int) -> Option<Account> {
    let mut buf: Vec<libc::c_char> = vec![0; 4096];
    loop {
        // SAFETY: an all-zero passwd is a valid value for a C struct of pointers and integers.
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        let rc = call(&mut pwd, &mut buf, &mut result);
        if rc == libc::ERANGE && buf.len() < 1 << 20 {
            buf.resize(buf.len() * 2, 0);
            continue;
        }
        if rc != 0 || result.is_null() {
            return None;
        }
        // SAFETY: on success the fields point into `buf` as NUL-terminated strings.
        let (name, home) = unsafe { (cstr(pwd.pw_name), cstr(pwd.pw_dir)) };
        let group = group_name(pwd.pw_gid).unwrap_or_else(|| pwd.pw_gid.to_string());
        return Some(Account { name, group, home: PathBuf::from(home) });
    }
}

/// The name of group `gid`, when the group database has one.
fn group_name(gid: libc::gid_t) -> Option<String> {
    let mut buf: Vec<libc::c_char> = vec![0; 4096];
    loop {
        // SAFETY: an all-zero group is a valid value for a C struct of pointers and integers.
        let mut grp: libc::group = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::group = std::ptr::null_mut();
        // SAFETY: every pointer is valid for the call.
        let rc = unsafe { libc::getgrgid_r(gid, &mut grp, buf.as_mut_ptr(), buf.len(), &mut result) };
        if rc == libc::ERANGE && buf.len() < 1 << 20 {
            buf.resize(buf.len() * 2, 0);
            continue;
        }
        if rc != 0 || result.is_null() {
            return None;
        }
        // SAFETY: on success gr_name points into `buf` as a NUL-terminated string.
        return Some(unsafe { cstr(grp.gr_name) });
    }
}

/// # Safety
/// `ptr` is null or points to a NUL-terminated string.
unsafe fn cstr(ptr: *const libc::c_char) -> String {
    if ptr.is_null() {
        return String::new();
    }
    // SAFETY: the caller guarantees a NUL-terminated string.
    unsafe { CStr::from_ptr(ptr) }.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_exists_with_its_home_and_a_missing_user_is_named() {
        let root = by_name("root").unwrap();
        assert_eq!(root.home, PathBuf::from("/root"));
        assert_eq!(root.group, "root");
        let err = by_name("no-such-user-hermes-test").unwrap_err().to_string();
        assert!(err.contains("no-such-user-hermes-test") && err.contains("--run-as-user"), "{err}");
        assert!(!current().unwrap().name.is_empty());
    }
}
