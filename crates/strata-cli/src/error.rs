// SPDX-License-Identifier: MIT OR Apache-2.0
//! The tool's errors and exit codes: 1 for an error, 2 for a usage error, 3 for damage found
//! (`check`, `dump`). Every error is printed as one line on stderr.

use std::io;
use std::process::ExitCode;

/// Why a command stopped.
#[derive(Debug)]
pub enum CliError {
    /// The command line is wrong: exit code 2.
    Usage(String),
    /// The command failed: exit code 1.
    Failed(String),
    /// Standard output was closed by its reader (`strata scan DB | head`): stop quietly.
    OutputClosed,
}

impl CliError {
    /// A failure with the path (or other context) it concerns.
    pub fn failed(message: impl Into<String>) -> CliError {
        CliError::Failed(message.into())
    }

    /// A failed write of the command's output: quiet when the reader went away.
    pub fn output(e: io::Error) -> CliError {
        if e.kind() == io::ErrorKind::BrokenPipe {
            CliError::OutputClosed
        } else {
            CliError::Failed(format!("writing the output: {e}"))
        }
    }

    /// Prints the error and returns the exit code.
    pub fn report(self) -> ExitCode {
        match self {
            CliError::Usage(message) => {
                eprintln!("strata: {message}");
                ExitCode::from(2)
            }
            CliError::Failed(message) => {
                eprintln!("strata: {message}");
                ExitCode::from(1)
            }
            CliError::OutputClosed => ExitCode::SUCCESS,
        }
    }
}

impl From<strata::Error> for CliError {
    fn from(e: strata::Error) -> CliError {
        CliError::Failed(e.to_string())
    }
}

/// Exit code for a command that found damage.
pub const DAMAGE_FOUND: u8 = 3;

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
}
