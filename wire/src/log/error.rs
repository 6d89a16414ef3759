//! The log's one error type, with a kind of its own for a full filesystem.

use std::io;
use std::path::{Path, PathBuf};

/// A failure of the log's files.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// Reading, writing, syncing, creating or deleting a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// The filesystem (or the user's quota, or the file size limit) has no room for the write:
    /// `ENOSPC`, `EDQUOT` or `EFBIG`. Nothing of the failed append was kept; the log is as it was
    /// before it, and an append succeeds again once space is back.
    #[error("{path}: no space left: {source}")]
    OutOfSpace {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// The record is larger than the log takes (`LogOptions::max_record_bytes`).
    #[error("record of {bytes} bytes is larger than the {limit} bytes this log takes")]
    TooLarge {
        /// Size of the payload.
        bytes: u64,
        /// The largest payload this log takes.
        limit: u64,
    },
}

impl LogError {
    /// Wraps an I/O error, sorting out-of-space errors into their own kind.
    pub(crate) fn io(path: &Path, source: io::Error) -> Self {
        let path = path.to_owned();
        if is_out_of_space(&source) {
            Self::OutOfSpace { path, source }
        } else {
            Self::Io { path, source }
        }
    }

    /// True for [`LogError::OutOfSpace`]: retrying later, once space is freed, can succeed.
    pub fn is_out_of_space(&self) -> bool {
        matches!(self, Self::OutOfSpace { .. })
    }
}

/// Whether an I/O error means "no room": `ENOSPC`, `EDQUOT` or `EFBIG`.
pub fn is_out_of_space(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded | io::ErrorKind::FileTooLarge
    )
}

/// `map_err` helper: the error at `path`.
pub(crate) fn at(path: &Path) -> impl FnOnce(io::Error) -> LogError + '_ {
    move |source| LogError::io(path, source)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn out_of_space_errors_are_their_own_kind() {
        // Linux errno values: ENOSPC, EDQUOT, EFBIG
        for errno in [28, 122, 27] {
            let e = LogError::io(Path::new("x"), io::Error::from_raw_os_error(errno));
            assert!(e.is_out_of_space(), "errno {errno}: {e:?}");
        }
        // EIO, EACCES, EROFS
        for errno in [5, 13, 30] {
            let e = LogError::io(Path::new("x"), io::Error::from_raw_os_error(errno));
            assert!(!e.is_out_of_space(), "errno {errno}: {e:?}");
            assert!(matches!(e, LogError::Io { .. }));
        }
    }
}
