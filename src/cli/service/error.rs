//! Why a service command cannot go on before systemd is asked anything: the account to run as,
//! where units go, this binary's path, and paths or names a unit file cannot hold. Each message
//! says what to change.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub(crate) enum ServiceError {
    #[error("user name {name:?} contains a NUL byte")]
    NulInUserName { name: String },
    #[error("there is no user {name:?} on this system (check --run-as-user)")]
    NoSuchUser { name: String },
    #[error("the user database has no entry for uid {uid}")]
    NoEntryForUid { uid: libc::uid_t },
    #[error("HOME is not set: cannot find ~/.config/systemd/user")]
    NoHome,
    #[error("cannot tell where the hermes binary is: {0}")]
    ExeUnknown(std::io::Error),
    #[error("the hermes binary {} was replaced or deleted while running; run the new one", .0.display())]
    ExeGone(PathBuf),
    /// `User=`/`Group=` take one plain word.
    #[error("the user or group name {name:?} cannot be used in a unit (User=/Group=)")]
    UnusableAccountName { name: String },
    #[error("{what} {} is not valid UTF-8; systemd units cannot name it", path.display())]
    PathNotUtf8 { what: &'static str, path: PathBuf },
    #[error("{what} {text:?} contains a control character or a trailing backslash; systemd units cannot name it")]
    PathUnprintable { what: &'static str, text: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_refusal_says_what_to_change() {
        let cases = [
            (ServiceError::NoSuchUser { name: "bob".into() }, "there is no user \"bob\" on this system (check --run-as-user)"),
            (ServiceError::NulInUserName { name: "b\0b".into() }, "user name \"b\\0b\" contains a NUL byte"),
            (ServiceError::NoEntryForUid { uid: 1234 }, "the user database has no entry for uid 1234"),
            (ServiceError::NoHome, "HOME is not set: cannot find ~/.config/systemd/user"),
            (
                ServiceError::ExeGone(PathBuf::from("/usr/bin/hermes")),
                "the hermes binary /usr/bin/hermes was replaced or deleted while running; run the new one",
            ),
            (
                ServiceError::UnusableAccountName { name: "a b".into() },
                "the user or group name \"a b\" cannot be used in a unit (User=/Group=)",
            ),
            (
                ServiceError::PathUnprintable { what: "HERMES_HOME", text: "/a\nb".into() },
                "HERMES_HOME \"/a\\nb\" contains a control character or a trailing backslash; systemd units cannot name it",
            ),
        ];
        for (error, text) in cases {
            assert_eq!(error.to_string(), text);
        }
    }
}
