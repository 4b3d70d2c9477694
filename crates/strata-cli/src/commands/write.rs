// SPDX-License-Identifier: MIT OR Apache-2.0
//! `put`, `delete`, `load` and `compact`: the commands that change a database.

use std::fs::File;
use std::io::{self, BufRead, BufReader, IsTerminal, Read};
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use strata::{Db, WriteBatch, WriteOptions, MAX_KEY_SIZE, MAX_VALUE_SIZE};

use super::open_for_writing;
use crate::encoding::Encoding;
use crate::error::CliError;
use crate::units::human;
use crate::WriteFlags;

fn write_options(flags: &WriteFlags) -> WriteOptions {
    WriteOptions { sync: flags.sync }
}

/// `strata put DB KEY VALUE`.
pub fn put(db: &Path, key: &str, value: &str, flags: &WriteFlags) -> Result<ExitCode, CliError> {
    let encoding = flags.encoding();
    let key = encoding.parse_arg("key", key)?;
    let value = encoding.parse_arg("value", value)?;
    let handle = open_for_writing(db, flags.options())?;
    handle.put_opt(&key, &value, &write_options(flags))?;
    Ok(ExitCode::SUCCESS)
}

/// `strata delete DB KEY`.
pub fn delete(db: &Path, key: &str, flags: &WriteFlags) -> Result<ExitCode, CliError> {
    let key = flags.encoding().parse_arg("key", key)?;
    let handle = open_for_writing(db, flags.options())?;
    handle.delete_opt(&key, &write_options(flags))?;
    Ok(ExitCode::SUCCESS)
}

/// `strata load DB [FILE]`: `key<TAB>value` lines (the value runs to the end of the line and
/// may hold tabs), `batch` entries a write batch. Blank lines are skipped. When a line is bad
/// (no tab, bad hex or UTF-8, a key or value over the size limits) or the input cannot be
/// read, every entry before it is written first; every error names the input, the line and
/// how many entries are written.
pub fn load(
    db: &Path,
    file: Option<&Path>,
    batch_entries: usize,
    flags: &WriteFlags,
) -> Result<ExitCode, CliError> {
    let (input, source, total): (Box<dyn Read>, String, Option<u64>) = match file {
        Some(path) if path != Path::new("-") => {
            let f = File::open(path)
                .map_err(|e| CliError::io(format_args!("cannot open {}", path.display()), e))?;
            let len = f.metadata().ok().map(|m| m.len());
            (Box::new(f), path.display().to_string(), len)
        }
        _ => (
            Box::new(io::stdin().lock()),
            "standard input".to_owned(),
            None,
        ),
    };
    let handle = open_for_writing(db, flags.options())?;
    let progress = progress_bar(total);
    let started = Instant::now();
    let mut loader = Loader {
        handle: &handle,
        options: write_options(flags),
        batch_entries,
        batch: WriteBatch::new(),
        batch_lines: None,
        written: 0,
        source: &source,
        db,
    };
    let reader = BufReader::with_capacity(1 << 16, input);
    let loaded = loader.load_lines(reader, flags.encoding(), &progress);
    progress.finish_and_clear();
    let bytes_read = loaded?;
    if io::stderr().is_terminal() {
        eprintln!(
            "loaded {} entries ({}) into {} in {:.1} s",
            loader.written,
            human(bytes_read),
            db.display(),
            started.elapsed().as_secs_f64()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes entries to a database in batches, and keeps what an error report needs: where the
/// input is, and how much of it is written.
struct Loader<'a> {
    handle: &'a Db,
    options: WriteOptions,
    batch_entries: usize,
    batch: WriteBatch,
    /// The input lines of the first and last entries in `batch`; `None` while it is empty.
    batch_lines: Option<(u64, u64)>,
    /// Entries written (every entry of the lines before `batch_lines`, blank lines aside).
    written: u64,
    /// The input, for a person: a file name or "standard input".
    source: &'a str,
    db: &'a Path,
}

impl Loader<'_> {
    /// Loads every line of `input`; returns the bytes read.
    fn load_lines(
        &mut self,
        mut input: impl BufRead,
        encoding: Encoding,
        progress: &ProgressBar,
    ) -> Result<u64, CliError> {
        let mut line = Vec::new();
        let (mut line_number, mut bytes_read) = (0u64, 0u64);
        loop {
            line.clear();
            let n = match input.read_until(b'\n', &mut line) {
                Ok(n) => n,
                Err(e) => {
                    let reason = CliError::io("reading failed", e);
                    return Err(self.stop_at(line_number + 1, reason));
                }
            };
            if n == 0 {
                break;
            }
            line_number += 1;
            bytes_read += n as u64;
            if line.last() == Some(&b'\n') {
                line.pop();
            }
            if line.is_empty() {
                continue;
            }
            let (key, value) = match parse_line(&line, encoding) {
                Ok(entry) => entry,
                Err(reason) => return Err(self.stop_at(line_number, CliError::Failed(reason))),
            };
            self.batch.put(&key, &value);
            let first = self.batch_lines.map_or(line_number, |(first, _)| first);
            self.batch_lines = Some((first, line_number));
            if self.batch.count() as usize == self.batch_entries {
                self.write_batch()?;
                progress.set_position(bytes_read);
            }
        }
        self.write_batch()?;
        Ok(bytes_read)
    }

    /// Writes the entries waiting in the batch.
    fn write_batch(&mut self) -> Result<(), CliError> {
        let Some((first, last)) = self.batch_lines.take() else {
            return Ok(());
        };
        let batch = std::mem::take(&mut self.batch);
        let entries = u64::from(batch.count());
        match self.handle.write_opt(batch, &self.options) {
            Ok(()) => {
                self.written += entries;
                Ok(())
            }
            Err(e) => Err(with_message(CliError::from(e), |e| {
                format!(
                    "{}, lines {first}-{last}: writing them failed: {e}; the {} entries before \
                     line {first} are written to {}, the {entries} of lines {first}-{last} are \
                     not acknowledged",
                    self.source,
                    self.written,
                    self.db.display()
                )
            })),
        }
    }

    /// The error for line `line_number`: the entries before it are written first (an error
    /// writing them is reported instead).
    fn stop_at(&mut self, line_number: u64, reason: CliError) -> CliError {
        if let Err(e) = self.write_batch() {
            return e;
        }
        with_message(reason, |reason| {
            format!(
                "{}, line {line_number}: {reason}; the {} entries before it are written to {}",
                self.source,
                self.written,
                self.db.display()
            )
        })
    }
}

/// `error` with its message rewritten by `f`, and its kind (its exit code) kept.
fn with_message(error: CliError, f: impl FnOnce(&str) -> String) -> CliError {
    match error {
        CliError::Usage(m) => CliError::Usage(f(&m)),
        CliError::Failed(m) => CliError::Failed(f(&m)),
        CliError::Damage(m) => CliError::Damage(f(&m)),
        CliError::NotFound(m) => CliError::NotFound(f(&m)),
        CliError::Io(m) => CliError::Io(f(&m)),
        CliError::OutputClosed => CliError::OutputClosed,
    }
}

/// Splits one line at its first tab and decodes both sides; a key or value over the database's
/// limits is refused here, so that it costs no other line of its batch.
fn parse_line(line: &[u8], encoding: Encoding) -> Result<(Vec<u8>, Vec<u8>), String> {
    let tab = line
        .iter()
        .position(|&b| b == b'\t')
        .ok_or("no tab between key and value")?;
    let key = encoding
        .parse_field(&line[..tab])
        .map_err(|e| format!("key: {e}"))?;
    let value = encoding
        .parse_field(&line[tab + 1..])
        .map_err(|e| format!("value: {e}"))?;
    if key.len() > MAX_KEY_SIZE {
        return Err(format!(
            "key of {} bytes is over the limit of {MAX_KEY_SIZE}",
            key.len()
        ));
    }
    if value.len() > MAX_VALUE_SIZE {
        return Err(format!(
            "value of {} bytes is over the limit of {MAX_VALUE_SIZE}",
            value.len()
        ));
    }
    Ok((key, value))
}

/// A bar over the input's bytes on a terminal (a spinner when the size is unknown); hidden
/// otherwise.
fn progress_bar(total: Option<u64>) -> ProgressBar {
    if !io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    match total {
        Some(total) => ProgressBar::new(total).with_style(
            ProgressStyle::with_template(
                "{bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
            )
            .expect("a valid template"),
        ),
        None => ProgressBar::new_spinner().with_style(
            ProgressStyle::with_template("{spinner} {bytes} {bytes_per_sec}")
                .expect("a valid template"),
        ),
    }
}

/// `strata compact DB [--from KEY] [--to KEY]`.
pub fn compact(
    db: &Path,
    from: Option<&str>,
    to: Option<&str>,
    flags: &WriteFlags,
) -> Result<ExitCode, CliError> {
    let encoding = flags.encoding();
    let from = from.map(|k| encoding.parse_arg("--from", k)).transpose()?;
    let to = to.map(|k| encoding.parse_arg("--to", k)).transpose()?;
    let handle = open_for_writing(db, flags.options())?;
    let before = table_bytes(db);
    // compact_range's end is inclusive; compacting through `to` itself covers [from, to).
    handle.compact_range(from.as_deref(), to.as_deref())?;
    drop(handle);
    let after = table_bytes(db);
    println!(
        "compacted {}: {} tables, {} before; {} tables, {} after",
        db.display(),
        before.0,
        human(before.1),
        after.0,
        human(after.1)
    );
    Ok(ExitCode::SUCCESS)
}

/// The number and total size of the table files in `db`.
fn table_bytes(db: &Path) -> (usize, u64) {
    let Ok(entries) = std::fs::read_dir(db) else {
        return (0, 0);
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.ends_with(".ldb") || name.ends_with(".sst")
        })
        .fold((0, 0), |(n, bytes), e| {
            (n + 1, bytes + e.metadata().map_or(0, |m| m.len()))
        })
}

#[cfg(test)]
mod tests {
    use std::io::{BufReader, Cursor, Read};
    use std::sync::Arc;

    use strata::env::{FaultEnv, FaultKind, FaultPlan};
    use strata::{MemEnv, Options};

    use super::*;
    use crate::error::IO_ERROR;

    fn open(env: &FaultEnv<MemEnv>) -> Db {
        let options = Options {
            create_if_missing: true,
            ..Options::default()
        }
        .with_env(Arc::new(env.clone()));
        Db::open("/db", options).unwrap()
    }

    fn loader<'a>(handle: &'a Db, batch_entries: usize) -> Loader<'a> {
        Loader {
            handle,
            options: WriteOptions::default(),
            batch_entries,
            batch: WriteBatch::new(),
            batch_lines: None,
            written: 0,
            source: "input.tsv",
            db: Path::new("/db"),
        }
    }

    fn keys(handle: &Db) -> Vec<Vec<u8>> {
        handle
            .scan()
            .unwrap()
            .map(|entry| entry.unwrap().0)
            .collect()
    }

    /// A failed batch used to be a bare library error: no input, no line, no count.
    #[test]
    fn a_failed_batch_names_its_lines_and_what_was_written_before() {
        let env = FaultEnv::new(MemEnv::new());
        let handle = open(&env);
        // What one small unsynced write costs in numbered calls: the load's first batch
        // gets that much, the second fails.
        let before = env.ops();
        handle.put(b"probe", b"").unwrap();
        let per_write = env.ops() - before;
        env.set_plan(Some(FaultPlan {
            at: env.ops() + per_write,
            kind: FaultKind::Io,
            persistent: true,
        }));
        let input = Cursor::new("a\t1\nb\t2\n\nc\t3\nd\t4\ne\t5\n");
        let err = loader(&handle, 2)
            .load_lines(input, Encoding::Text, &ProgressBar::hidden())
            .unwrap_err();
        assert_eq!(err.code(), IO_ERROR);
        let CliError::Io(message) = err else {
            unreachable!("the code says I/O")
        };
        assert!(
            message.starts_with("input.tsv, lines 4-5: writing them failed: I/O error")
                && message.ends_with(
                    "; the 2 entries before line 4 are written to /db, the 2 of lines 4-5 are \
                     not acknowledged"
                ),
            "{message}"
        );
        assert_eq!(keys(&handle), [&b"a"[..], b"b", b"probe"]);
    }

    /// Input that fails to read part way: used to drop the entries of the unfinished batch
    /// and to name no line.
    #[test]
    fn a_read_error_writes_the_lines_before_it_and_names_the_line() {
        struct FailsAfter(Cursor<&'static [u8]>);
        impl Read for FailsAfter {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                match self.0.read(buf)? {
                    0 => Err(io::Error::other("the device went away")),
                    n => Ok(n),
                }
            }
        }
        let env = FaultEnv::new(MemEnv::new());
        let handle = open(&env);
        let input = BufReader::new(FailsAfter(Cursor::new(b"a\t1\nb\t2\n")));
        let err = loader(&handle, 1000)
            .load_lines(input, Encoding::Text, &ProgressBar::hidden())
            .unwrap_err();
        assert_eq!(err.code(), IO_ERROR);
        let CliError::Io(message) = err else {
            unreachable!("the code says I/O")
        };
        assert_eq!(
            message,
            "input.tsv, line 3: reading failed: the device went away; the 2 entries before it \
             are written to /db"
        );
        assert_eq!(keys(&handle), [&b"a"[..], b"b"]);
    }
}
