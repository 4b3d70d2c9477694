// SPDX-License-Identifier: MIT OR Apache-2.0
//! The names of a database's files, and parsing them back.
//!
//! | name | kind |
//! |---|---|
//! | `NNNNNN.log` | write-ahead log |
//! | `NNNNNN.ldb` (`NNNNNN.sst` before LevelDB 1.14) | table |
//! | `MANIFEST-NNNNNN` | descriptor |
//! | `CURRENT` | names the live MANIFEST |
//! | `LOCK` | the database lock |
//! | `LOG`, `LOG.old` | the info log |
//! | `NNNNNN.dbtmp` | a temporary file (while `CURRENT` is rewritten) |
//!
//! Numbers are decimal, zero-padded to at least six digits. Parsing accepts any number of digits
//! up to [`MAX_FILE_NUMBER`] (LevelDB accepts any u64: numbers it could never have allocated,
//! which strata refuses so that `number + 1` never overflows); names that do not parse are not
//! the database's and are never read or deleted.

use std::path::{Path, PathBuf};

/// The largest file number a database may use: a file, or a MANIFEST counter, naming a larger
/// one is not the database's. Numbers are allocated one by one from 2, so no database reaches
/// it, and the number after any valid one fits a u64.
pub const MAX_FILE_NUMBER: u64 = u64::MAX >> 1;

/// What a file in a database directory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FileKind {
    /// `NNNNNN.log`
    Log,
    /// `NNNNNN.ldb` or `NNNNNN.sst`
    Table,
    /// `MANIFEST-NNNNNN`
    Manifest,
    /// `CURRENT`
    Current,
    /// `LOCK`
    Lock,
    /// `LOG` or `LOG.old`
    InfoLog,
    /// `NNNNNN.dbtmp`
    Temp,
    /// `NNNNNN.blob`: values kept apart from the tree (key-value separation).
    Blob,
}

/// The path of log `number` in `dir`.
pub fn log_file(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.log"))
}

/// The path of table `number` in `dir`, with the name strata (and LevelDB 1.14+) writes.
pub fn table_file(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.ldb"))
}

/// The legacy path of table `number`, as LevelDB before 1.14 wrote it.
pub fn sst_table_file(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.sst"))
}

/// The path of blob file `number` in `dir`.
pub fn blob_file(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.blob"))
}

/// The path of MANIFEST `number` in `dir`.
pub fn manifest_file(dir: &Path, number: u64) -> PathBuf {
    dir.join(manifest_name(number))
}

/// The name (without directory) of MANIFEST `number`, as `CURRENT` holds it.
pub fn manifest_name(number: u64) -> String {
    format!("MANIFEST-{number:06}")
}

/// The path of temporary file `number` in `dir`.
pub fn temp_file(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.dbtmp"))
}

/// `dir/CURRENT`.
pub fn current_file(dir: &Path) -> PathBuf {
    dir.join("CURRENT")
}

/// `dir/LOCK`.
pub fn lock_file(dir: &Path) -> PathBuf {
    dir.join("LOCK")
}

/// `dir/LOG`.
pub fn info_log_file(dir: &Path) -> PathBuf {
    dir.join("LOG")
}

/// `dir/LOG.old`.
pub fn old_info_log_file(dir: &Path) -> PathBuf {
    dir.join("LOG.old")
}

fn parse_number(digits: &str) -> Option<u64> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|&n| n <= MAX_FILE_NUMBER)
}

/// Parses a file name (not a path): its kind and number (0 for names without one).
pub fn parse_file_name(name: &str) -> Option<(FileKind, u64)> {
    match name {
        "CURRENT" => return Some((FileKind::Current, 0)),
        "LOCK" => return Some((FileKind::Lock, 0)),
        "LOG" | "LOG.old" => return Some((FileKind::InfoLog, 0)),
        _ => {}
    }
    if let Some(digits) = name.strip_prefix("MANIFEST-") {
        return parse_number(digits).map(|n| (FileKind::Manifest, n));
    }
    let (digits, suffix) = name.split_at(name.find('.')?);
    let kind = match suffix {
        ".log" => FileKind::Log,
        ".ldb" | ".sst" => FileKind::Table,
        ".dbtmp" => FileKind::Temp,
        ".blob" => FileKind::Blob,
        _ => return None,
    };
    parse_number(digits).map(|n| (kind, n))
}

/// The MANIFEST name the contents of a `CURRENT` file hold: one name and a newline. The error
/// says what is wrong.
///
/// # Example
///
/// ```
/// use strata::check::parse_current;
/// assert_eq!(parse_current(b"MANIFEST-000002\n"), Ok("MANIFEST-000002"));
/// assert!(parse_current(b"MANIFEST-000002").is_err());
/// assert!(parse_current(b"000005.ldb\n").is_err());
/// ```
pub fn parse_current(contents: &[u8]) -> Result<&str, &'static str> {
    let Some(name) = contents.strip_suffix(b"\n") else {
        return Err("CURRENT file does not end with a newline");
    };
    let name = std::str::from_utf8(name).map_err(|_| "CURRENT file is not a file name")?;
    match parse_file_name(name) {
        Some((FileKind::Manifest, _)) => Ok(name),
        _ => Err("CURRENT file does not name a MANIFEST"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let dir = Path::new("/db");
        assert_eq!(log_file(dir, 7), Path::new("/db/000007.log"));
        assert_eq!(table_file(dir, 1_234_567), Path::new("/db/1234567.ldb"));
        assert_eq!(manifest_name(2), "MANIFEST-000002");
        assert_eq!(temp_file(dir, 2), Path::new("/db/000002.dbtmp"));
        assert_eq!(blob_file(dir, 9), Path::new("/db/000009.blob"));
        for (name, parsed) in [
            ("000007.log", (FileKind::Log, 7)),
            ("000009.blob", (FileKind::Blob, 9)),
            ("7.log", (FileKind::Log, 7)),
            ("0000007.log", (FileKind::Log, 7)),
            ("000005.ldb", (FileKind::Table, 5)),
            ("000005.sst", (FileKind::Table, 5)),
            ("MANIFEST-000002", (FileKind::Manifest, 2)),
            ("000002.dbtmp", (FileKind::Temp, 2)),
            ("CURRENT", (FileKind::Current, 0)),
            ("LOCK", (FileKind::Lock, 0)),
            ("LOG", (FileKind::InfoLog, 0)),
            ("LOG.old", (FileKind::InfoLog, 0)),
            ("9223372036854775807.log", (FileKind::Log, MAX_FILE_NUMBER)),
        ] {
            assert_eq!(parse_file_name(name), Some(parsed), "{name}");
        }
    }

    #[test]
    fn foreign_names_do_not_parse() {
        for name in [
            "",
            "foo",
            "foo.log",
            ".log",
            "-1.log",
            "+1.log",
            "1.log.bak",
            "1.txt",
            "MANIFEST-",
            "MANIFEST-x",
            "MANIFEST-1.old",
            "CURRENT.bak",
            "18446744073709551616.log",
            "18446744073709551615.log",
            "9223372036854775808.blob",
            "lost",
            "LOG.older",
            "1 .log",
        ] {
            assert_eq!(parse_file_name(name), None, "{name}");
        }
    }
}
