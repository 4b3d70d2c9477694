// SPDX-License-Identifier: MIT OR Apache-2.0
//! The one error type of the library.
//!
//! Every fallible function returns [`Result`]. Errors carry the context a person needs to act on
//! them: the path of the file, and for corruption the byte offset where the damage was found.
//! A missing key is not an error: lookups return `Ok(None)`. A missing database is
//! ([`Error::NoDatabase`]), and so are a database stopped by a panic ([`Error::Poisoned`]) and
//! one closed while an operation waited on it ([`Error::Closed`]), each its own kind.

use std::borrow::Cow;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

/// The result type of every fallible strata operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in strata.
///
/// Build errors through the constructors ([`Error::io`], [`Error::corruption`], ...) so that the
/// context they carry can grow without touching every call site.
///
/// # Example
///
/// ```
/// use strata::Error;
/// let e = Error::corruption("/db/000005.ldb", 4096, "bad block checksum");
/// assert!(e.is_corruption());
/// assert_eq!(e.to_string(), "corruption in /db/000005.ldb at offset 4096: bad block checksum");
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The operating system (or the [`Env`](crate::Env)) failed an I/O operation on `path`.
    #[error("I/O error: {op} {}: {source}", path.display())]
    Io {
        /// The file or directory the operation was on.
        path: PathBuf,
        /// What was being done, for example `"open"` or `"sync"`.
        op: &'static str,
        /// The underlying error, shared so that one failure can be reported to many callers.
        #[source]
        source: Arc<io::Error>,
    },
    /// Bytes read from `file` at `offset` do not follow the format.
    #[error("corruption in {} at offset {offset}: {reason}", file.display())]
    Corruption {
        /// The damaged file. Never empty: bytes decoded from a buffer are a [`RecordError`]
        /// until the reader that found them says which file and where
        /// (the log reader's `record_error`). When the
        /// damage is in an entry read through the merged view of a database, whose file is not
        /// known, this is the database's directory, and the reason names the entry's key.
        file: PathBuf,
        /// Byte offset in the file where the damage was found (0 when `file` is a directory).
        offset: u64,
        /// What is wrong, for a person.
        reason: Cow<'static, str>,
    },
    /// A caller-supplied argument or option is not acceptable.
    #[error("invalid argument: {0}")]
    InvalidArgument(Cow<'static, str>),
    /// The operation is not supported by this build, file, or environment.
    #[error("not supported: {0}")]
    NotSupported(Cow<'static, str>),
    /// A panic (in a user's comparator or filter policy, or a bug) stopped the database: the
    /// writes and background work it interrupted may be half done, so it accepts no more
    /// writes. Reads go on; reopening recovers from the log.
    #[error("the database stopped after a panic {0}; reopen it")]
    Poisoned(Cow<'static, str>),
    /// There is no database at `path`: the directory does not exist, or it has no `CURRENT`
    /// file, and `create_if_missing` is not set (or the open is read-only); for
    /// [`destroy`](crate::destroy) and [`check`](crate::check()), the directory holds no
    /// database by their rules. Nothing was created or changed.
    ///
    /// A directory that holds a database's files without `CURRENT` is not this error when
    /// `create_if_missing` is set: that is [`Error::Corruption`] (a damaged database).
    #[error("{} is not a database: {reason}", path.display())]
    NoDatabase {
        /// The directory.
        path: PathBuf,
        /// What is missing, for a person: `"the directory does not exist"`, `"it has no
        /// CURRENT file"`, ...
        reason: Cow<'static, str>,
    },
    /// The database in `path` was closed ([`Db::close`](crate::Db::close), or its handle
    /// dropped) under work that was waiting on it, which the close cut short: a wait for
    /// background work ([`Db::wait_for_compactions`](crate::Db::wait_for_compactions), a
    /// manual compaction), the blob collector's rewrite in progress. `Db::close` takes the
    /// handle by value, so no later call through it can meet a closed database; cursors made
    /// before the close are not closed by it, and keep reading the state they were made at.
    #[error("the database in {} is closed", path.display())]
    Closed {
        /// The database's directory.
        path: PathBuf,
    },
    /// Another handle, in this process or another, holds the lock on `path`.
    #[error("database is locked: {} is held by another process or handle", path.display())]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
}

/// A record (a log record holding a write batch, a MANIFEST record holding a version edit)
/// that does not follow its format, found by a decoder that sees only the record's bytes.
///
/// There is deliberately no conversion into [`Error`]: the reader of the record knows which
/// file it came from and where each of its bytes lies, and says so with
/// the log reader's `record_error`, so that every
/// [`Error::Corruption`] names its file and the file offset of the damage.
///
/// # Example
///
/// ```
/// use strata::{RecordError, WriteBatch};
/// let err: RecordError = WriteBatch::decode(&[0; 5]).unwrap_err();
/// assert_eq!(err.offset, 0);
/// assert_eq!(
///     err.to_string(),
///     "malformed at offset 0 of the record: log record too small for a write batch"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed at offset {offset} of the record: {reason}")]
pub struct RecordError {
    /// Offset within the record of the first malformed byte (or field).
    pub offset: u64,
    /// What is wrong, for a person.
    pub reason: Cow<'static, str>,
}

impl RecordError {
    /// A malformed record, damaged at `offset` within it.
    ///
    /// ```
    /// use strata::RecordError;
    /// let e = RecordError::new(12, "unknown operation in write batch");
    /// assert_eq!(e.offset, 12);
    /// ```
    pub fn new(offset: u64, reason: impl Into<Cow<'static, str>>) -> RecordError {
        RecordError {
            offset,
            reason: reason.into(),
        }
    }
}

impl Error {
    /// An I/O error from `op` on `path`.
    pub fn io(path: impl Into<PathBuf>, op: &'static str, source: io::Error) -> Error {
        Error::Io {
            path: path.into(),
            op,
            source: Arc::new(source),
        }
    }

    /// Corruption found in `file` at `offset`.
    pub fn corruption(
        file: impl Into<PathBuf>,
        offset: u64,
        reason: impl Into<Cow<'static, str>>,
    ) -> Error {
        Error::Corruption {
            file: file.into(),
            offset,
            reason: reason.into(),
        }
    }

    /// An invalid argument.
    pub fn invalid_argument(reason: impl Into<Cow<'static, str>>) -> Error {
        Error::InvalidArgument(reason.into())
    }

    /// No database at `path`, for the reason given.
    ///
    /// ```
    /// use strata::Error;
    /// let e = Error::no_database("/data/db", "it has no CURRENT file");
    /// assert!(e.is_not_found());
    /// assert_eq!(e.to_string(), "/data/db is not a database: it has no CURRENT file");
    /// ```
    pub fn no_database(path: impl Into<PathBuf>, reason: impl Into<Cow<'static, str>>) -> Error {
        Error::NoDatabase {
            path: path.into(),
            reason: reason.into(),
        }
    }

    /// An unsupported operation.
    pub fn not_supported(reason: impl Into<Cow<'static, str>>) -> Error {
        Error::NotSupported(reason.into())
    }

    /// A database stopped by a panic `context` (for example "in the background thread").
    pub fn poisoned(context: impl Into<Cow<'static, str>>) -> Error {
        Error::Poisoned(context.into())
    }

    /// The database in `path` is closed.
    ///
    /// ```
    /// use strata::Error;
    /// let e = Error::closed("/data/db");
    /// assert!(e.is_closed());
    /// assert_eq!(e.to_string(), "the database in /data/db is closed");
    /// ```
    pub fn closed(path: impl Into<PathBuf>) -> Error {
        Error::Closed { path: path.into() }
    }

    /// True for [`Error::Closed`].
    pub fn is_closed(&self) -> bool {
        matches!(self, Error::Closed { .. })
    }

    /// True for [`Error::Poisoned`].
    pub fn is_poisoned(&self) -> bool {
        matches!(self, Error::Poisoned(_))
    }

    /// True for [`Error::Corruption`].
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }

    /// True for [`Error::NoDatabase`], and for [`Error::Io`] whose source has kind `NotFound`.
    pub fn is_not_found(&self) -> bool {
        match self {
            Error::NoDatabase { .. } => true,
            Error::Io { source, .. } => source.kind() == io::ErrorKind::NotFound,
            _ => false,
        }
    }
}
