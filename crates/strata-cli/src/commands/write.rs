// SPDX-License-Identifier: MIT OR Apache-2.0
//! `put`, `delete`, `load` and `compact`: the commands that change a database.

use std::fs::File;
use std::io::{self, BufRead, BufReader, IsTerminal, Read};
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use strata::{WriteBatch, WriteOptions};

use super::open_for_writing;
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
    handle.put(&write_options(flags), &key, &value)?;
    Ok(ExitCode::SUCCESS)
}

/// `strata delete DB KEY`.
pub fn delete(db: &Path, key: &str, flags: &WriteFlags) -> Result<ExitCode, CliError> {
    let key = flags.encoding().parse_arg("key", key)?;
    let handle = open_for_writing(db, flags.options())?;
    handle.delete(&write_options(flags), &key)?;
    Ok(ExitCode::SUCCESS)
}

/// `strata load DB [FILE]`: `key<TAB>value` lines (the value runs to the end of the line and
/// may hold tabs), `batch` entries a write batch. Blank lines are skipped. On a bad line,
/// every line before it is written and the error names the line.
pub fn load(
    db: &Path,
    file: Option<&Path>,
    batch_entries: usize,
    flags: &WriteFlags,
) -> Result<ExitCode, CliError> {
    let encoding = flags.encoding();
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
    let options = write_options(flags);
    let progress = progress_bar(total);
    let started = Instant::now();

    let mut reader = BufReader::with_capacity(1 << 16, input);
    let mut line = Vec::new();
    let mut batch = WriteBatch::new();
    let (mut line_number, mut written, mut pending, mut bytes_read) = (0u64, 0u64, 0usize, 0u64);
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| CliError::io(format_args!("reading {source}"), e))?;
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
        let parsed = parse_line(&line, encoding);
        let (key, value) = match parsed {
            Ok(entry) => entry,
            Err(reason) => {
                if pending > 0 {
                    handle.write(&options, std::mem::take(&mut batch))?;
                    written += pending as u64;
                }
                progress.finish_and_clear();
                return Err(CliError::failed(format!(
                    "{source}, line {line_number}: {reason}; the {written} entries before it \
                     are written to {}",
                    db.display()
                )));
            }
        };
        batch.put(&key, &value);
        pending += 1;
        if pending == batch_entries {
            handle.write(&options, std::mem::take(&mut batch))?;
            written += pending as u64;
            pending = 0;
            progress.set_position(bytes_read);
        }
    }
    if pending > 0 {
        handle.write(&options, batch)?;
        written += pending as u64;
    }
    progress.finish_and_clear();
    if io::stderr().is_terminal() {
        eprintln!(
            "loaded {written} entries ({}) into {} in {:.1} s",
            human(bytes_read),
            db.display(),
            started.elapsed().as_secs_f64()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Splits one line at its first tab and decodes both sides.
fn parse_line(
    line: &[u8],
    encoding: crate::encoding::Encoding,
) -> Result<(Vec<u8>, Vec<u8>), String> {
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
