// SPDX-License-Identifier: MIT OR Apache-2.0
//! The tool's errors and exit codes. Every error is printed as one line on stderr.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | success (`check`: the database is sound) |
//! | 1 | the command failed: not a database, locked by another process, a bad input line, ... |
//! | 2 | usage error: a missing or malformed argument |
//! | 3 | damage: `check` or `dump` found some, or any command met corrupt data on disk |
//! | 4 | not found: `get` of a key the database does not hold |
//! | 5 | I/O error: a file could not be opened, read or written (missing, no permission, disk full) |

use std::io;
use std::process::ExitCode;

/// Exit code of a command that failed for a reason without a code of its own.
pub const FAILED: u8 = 1;
/// Exit code of a usage error.
pub const USAGE: u8 = 2;
/// Exit code of a command that found damage, or met it.
pub const DAMAGE_FOUND: u8 = 3;
/// Exit code of `get` for a key the database does not hold.
pub const NOT_FOUND: u8 = 4;
/// Exit code of a failed read or write of a file.
pub const IO_ERROR: u8 = 5;

/// Why a command stopped.
#[derive(Debug)]
pub enum CliError {
    /// The command line is wrong: exit code 2.
    Usage(String),
    /// The command failed: exit code 1.
    Failed(String),
    /// Data on disk is damaged ([`strata::Error::Corruption`]): exit code 3.
    Damage(String),
    /// What was asked for is not there (a key): exit code 4.
    NotFound(String),
    /// A file could not be opened, read or written: exit code 5.
    Io(String),
    /// Standard output was closed by its reader (`strata scan DB | head`): stop quietly.
    OutputClosed,
}

impl CliError {
    /// A failure with the path (or other context) it concerns.
    pub fn failed(message: impl Into<String>) -> CliError {
        CliError::Failed(message.into())
    }

    /// A failed read or write; `what` names the file and the operation.
    pub fn io(what: impl std::fmt::Display, e: io::Error) -> CliError {
        CliError::Io(format!("{what}: {e}"))
    }

    /// A failed write of the command's output: quiet when the reader went away.
    pub fn output(e: io::Error) -> CliError {
        if e.kind() == io::ErrorKind::BrokenPipe {
            CliError::OutputClosed
        } else {
            CliError::io("writing the output", e)
        }
    }

    /// The exit code of this error.
    pub fn code(&self) -> u8 {
        match self {
            CliError::Usage(_) => USAGE,
            CliError::Failed(_) => FAILED,
            CliError::Damage(_) => DAMAGE_FOUND,
            CliError::NotFound(_) => NOT_FOUND,
            CliError::Io(_) => IO_ERROR,
            CliError::OutputClosed => 0,
        }
    }

    /// Prints the error and returns the exit code.
    pub fn report(self) -> ExitCode {
        let code = self.code();
        match self {
            CliError::Usage(message)
            | CliError::Failed(message)
            | CliError::Damage(message)
            | CliError::NotFound(message)
            | CliError::Io(message) => eprintln!("strata: {message}"),
            CliError::OutputClosed => {}
        }
        ExitCode::from(code)
    }
}

impl From<strata::Error> for CliError {
    fn from(e: strata::Error) -> CliError {
        match e {
            strata::Error::Corruption { .. } => CliError::Damage(e.to_string()),
            strata::Error::Io { .. } => CliError::Io(e.to_string()),
            _ => CliError::Failed(e.to_string()),
        }
    }
}

/// Flattens one of clap's messages (several lines: the error, the usage, a hint) into one line.
pub fn one_line(rendered: &str) -> String {
    let mut message = String::new();
    let mut usage = None;
    for line in rendered.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.starts_with("For more information") {
            continue;
        }
        if let Some(u) = line.strip_prefix("Usage:") {
            usage = Some(u.trim().to_owned());
            continue;
        }
        let line = line.strip_prefix("error:").map_or(line, str::trim);
        if !message.is_empty() {
            message.push(' ');
        }
        message.push_str(line);
    }
    if let Some(usage) = usage {
        message.push_str(&format!(" (usage: {usage})"));
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_messages_become_one_line() {
        let rendered = "error: the following required arguments were not provided:\n  <KEY>\n\n\
                        Usage: strata get <DB> <KEY>\n\nFor more information, try '--help'.\n";
        assert_eq!(
            one_line(rendered),
            "the following required arguments were not provided: <KEY> \
             (usage: strata get <DB> <KEY>)"
        );
    }

    #[test]
    fn library_errors_get_the_code_of_their_kind() {
        let corruption = strata::Error::corruption("/db/000005.ldb", 7, "bad block checksum");
        assert_eq!(CliError::from(corruption).code(), DAMAGE_FOUND);
        let io = strata::Error::io("/db/000005.ldb", "read", io::Error::other("EIO"));
        assert_eq!(CliError::from(io).code(), IO_ERROR);
        let none = strata::Error::no_database("/db", "it has no CURRENT file");
        assert_eq!(CliError::from(none).code(), FAILED);
        let locked = strata::Error::Locked {
            path: "/db/LOCK".into(),
        };
        assert_eq!(CliError::from(locked).code(), FAILED);
    }
}
