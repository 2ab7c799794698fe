//! Errors as the kernel reports them: a negative errno value.

use std::fmt;

pub use iwnic_proto::errno::*;

/// I/O error: the device broke its own protocol (the kernel's drivers give it for a
/// firmware answer that makes no sense).
pub const EIO: i32 = 5;
/// No such device: the device was closed (or its transport went away) under the call.
pub const ENODEV: i32 = 19;

/// A failed call's status, as the kernel's iw_cm would return it: always a negative
/// errno value (`Errno::EINVAL.get() == -22`). Statuses the NIC reports travel through
/// unchanged, so an `Errno` may hold a value this module has no name for.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Errno(i32);

impl Errno {
    pub const EINVAL: Errno = Errno(-EINVAL);
    pub const ENOMEM: Errno = Errno(-ENOMEM);
    pub const EIO: Errno = Errno(-EIO);
    pub const ENODEV: Errno = Errno(-ENODEV);
    pub const ECONNRESET: Errno = Errno(-ECONNRESET);
    pub const ECONNREFUSED: Errno = Errno(-ECONNREFUSED);
    pub const ETIMEDOUT: Errno = Errno(-ETIMEDOUT);
    pub const EHOSTUNREACH: Errno = Errno(-EHOSTUNREACH);

    /// The errno for a negative status; `None` for 0 (success) and positive values
    /// (which the contract never uses as a status).
    pub const fn from_status(status: i32) -> Option<Errno> {
        if status < 0 {
            Some(Errno(status))
        } else {
            None
        }
    }

    /// The negative value, as a C caller receives it.
    pub const fn get(self) -> i32 {
        self.0
    }

    /// The errno's symbolic name, if this module knows it.
    pub fn name(self) -> Option<&'static str> {
        // Wrapping: a NIC's status can be any negative number, `i32::MIN` too.
        let name = match self.0.wrapping_neg() {
            ENOENT => "ENOENT",
            EIO => "EIO",
            EAGAIN => "EAGAIN",
            ENOMEM => "ENOMEM",
            EBUSY => "EBUSY",
            ENODEV => "ENODEV",
            EINVAL => "EINVAL",
            ENOSPC => "ENOSPC",
            EPROTO => "EPROTO",
            EMSGSIZE => "EMSGSIZE",
            EOPNOTSUPP => "EOPNOTSUPP",
            EADDRINUSE => "EADDRINUSE",
            EADDRNOTAVAIL => "EADDRNOTAVAIL",
            ECONNABORTED => "ECONNABORTED",
            ECONNRESET => "ECONNRESET",
            ENOBUFS => "ENOBUFS",
            EISCONN => "EISCONN",
            ENOTCONN => "ENOTCONN",
            ETIMEDOUT => "ETIMEDOUT",
            ECONNREFUSED => "ECONNREFUSED",
            EHOSTUNREACH => "EHOSTUNREACH",
            _ => return None,
        };
        Some(name)
    }
}

/// The status of a call: `Ok` for the kernel's 0, `Err` for a negative errno.
pub type Result<T> = std::result::Result<T, Errno>;

/// The C view of a result: 0 or the negative errno.
pub fn status_of(result: Result<()>) -> i32 {
    result.err().map_or(0, Errno::get)
}

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "-{name}"),
            None => write!(f, "Errno({})", self.0),
        }
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl std::error::Error for Errno {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Any negative status a NIC reports is shown, `i32::MIN` too (its negation
    /// overflows: it must not panic, on the dispatch thread or under C).
    #[test]
    fn every_negative_status_has_a_view() {
        for status in [-1, -EINVAL, -4095, i32::MIN + 1, i32::MIN] {
            let errno = Errno::from_status(status).unwrap();
            assert_eq!(errno.get(), status);
            assert!(!format!("{errno}").is_empty());
            assert!(!crate::cm::reject_msg(status).is_empty());
        }
        assert_eq!(format!("{}", Errno::EINVAL), "-EINVAL");
        assert_eq!(
            format!("{:?}", Errno::from_status(i32::MIN).unwrap()),
            "Errno(-2147483648)"
        );
        assert_eq!(
            crate::cm::reject_msg(-ECONNREFUSED),
            "refused by remote application"
        );
    }
}
