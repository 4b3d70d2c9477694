// SPDX-License-Identifier: MIT OR Apache-2.0
//! `get`, `scan` and `export`: reading entries, from a database opened read-only.

use std::io::Write;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use strata::ReadOptions;

use super::{open_read_only, output, ReplacingFile};
use crate::encoding::{Encoding, Field};
use crate::error::CliError;
use crate::ReadFlags;

/// `strata get DB KEY`: the value and a newline; exit 4 (not found) when the key is absent.
pub fn get(db: &Path, key: &str, flags: &ReadFlags) -> Result<ExitCode, CliError> {
    let encoding = flags.encoding();
    let key = encoding.parse_arg("key", key)?;
    let handle = open_read_only(db, flags.options())?;
    match handle.get(&key)? {
        Some(value) => {
            // A lone value may span lines: only its bytes must be text.
            let text = encoding
                .any_text(&value, Field::Value)
                .map_err(CliError::Failed)?;
            let mut out = output()?;
            writeln!(out, "{text}").map_err(CliError::output)?;
            out.flush().map_err(CliError::output)?;
            Ok(ExitCode::SUCCESS)
        }
        None => Err(CliError::NotFound(format!(
            "key {} not found in {}",
            encoding.show(&key),
            db.display()
        ))),
    }
}

/// `strata scan`'s arguments.
#[derive(Args, Debug)]
pub struct ScanArgs {
    /// The database directory.
    db: PathBuf,
    /// Start at this key (inclusive).
    #[arg(long, value_name = "KEY")]
    from: Option<String>,
    /// Stop before this key (exclusive).
    #[arg(long, value_name = "KEY")]
    to: Option<String>,
    /// Only keys that start with P.
    #[arg(long, value_name = "P")]
    prefix: Option<String>,
    /// Go from the last key to the first.
    #[arg(long)]
    reverse: bool,
    /// Stop after N entries.
    #[arg(long, value_name = "N")]
    limit: Option<u64>,
    /// Print keys without values.
    #[arg(long)]
    keys_only: bool,
    /// Print only the number of entries.
    #[arg(long)]
    count: bool,
    /// Print one JSON object a line ({"key":..,"value":..}), or {"count":..} with --count.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    read: ReadFlags,
}

/// A range of keys: its start and end bounds.
type KeyRange = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// A key and its value.
type Entry = (Vec<u8>, Vec<u8>);

/// The smallest key after every key that starts with `prefix`; `None` if there is none.
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last != 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// The range `--from`, `--to` and `--prefix` select together; `None` when it is empty.
fn selected_range(
    from: Option<Vec<u8>>,
    to: Option<Vec<u8>>,
    prefix: Option<Vec<u8>>,
) -> Option<KeyRange> {
    let mut start = from;
    let mut end = to;
    if let Some(p) = prefix {
        if start.as_ref().is_none_or(|s| *s < p) {
            start = Some(p.clone());
        }
        if let Some(pe) = prefix_end(&p) {
            if end.as_ref().is_none_or(|e| pe < *e) {
                end = Some(pe);
            }
        }
    }
    if let (Some(s), Some(e)) = (&start, &end) {
        if s >= e {
            return None;
        }
    }
    Some((
        start.map_or(Bound::Unbounded, Bound::Included),
        end.map_or(Bound::Unbounded, Bound::Excluded),
    ))
}

/// `strata scan DB`.
pub fn scan(args: &ScanArgs) -> Result<ExitCode, CliError> {
    let encoding = args.read.encoding();
    let from = args
        .from
        .as_deref()
        .map(|k| encoding.parse_arg("--from", k))
        .transpose()?;
    let to = args
        .to
        .as_deref()
        .map(|k| encoding.parse_arg("--to", k))
        .transpose()?;
    let prefix = args
        .prefix
        .as_deref()
        .map(|k| encoding.parse_arg("--prefix", k))
        .transpose()?;
    let db = open_read_only(&args.db, args.read.options())?;
    let mut out = output()?;
    let limit = args.limit.unwrap_or(u64::MAX);
    let mut count = 0u64;
    if let Some(range) = selected_range(from, to, prefix) {
        let iter = db.range(range)?;
        let mut iter: Box<dyn Iterator<Item = strata::Result<Entry>>> = if args.reverse {
            Box::new(iter.rev())
        } else {
            Box::new(iter)
        };
        while count < limit {
            let Some(item) = iter.next() else { break };
            let (key, value) = item?;
            count += 1;
            if !args.count {
                write_entry(
                    &mut out,
                    encoding,
                    args.json,
                    &key,
                    (!args.keys_only).then_some(&value),
                )?;
            }
        }
    }
    if args.count {
        if args.json {
            writeln!(out, "{}", serde_json::json!({ "count": count }))
        } else {
            writeln!(out, "{count}")
        }
        .map_err(CliError::output)?;
    }
    out.flush().map_err(CliError::output)?;
    Ok(ExitCode::SUCCESS)
}

/// Writes one entry as a `key<TAB>value` line (or a lone key), or as a JSON object.
fn write_entry(
    out: &mut dyn Write,
    encoding: Encoding,
    json: bool,
    key: &[u8],
    value: Option<&[u8]>,
) -> Result<(), CliError> {
    if json {
        let key = encoding
            .any_text(key, Field::Key)
            .map_err(CliError::Failed)?;
        let line = match value {
            Some(v) => {
                let v = encoding
                    .any_text(v, Field::Value)
                    .map_err(CliError::Failed)?;
                serde_json::json!({ "key": key, "value": v })
            }
            None => serde_json::json!({ "key": key }),
        };
        return writeln!(out, "{line}").map_err(CliError::output);
    }
    match value {
        Some(v) => {
            let k = encoding
                .line_field(key, Field::Key)
                .map_err(CliError::Failed)?;
            let v = encoding
                .line_field(v, Field::Value)
                .map_err(CliError::Failed)?;
            writeln!(out, "{k}\t{v}")
        }
        None => {
            let k = encoding
                .line_field(key, Field::LoneKey)
                .map_err(CliError::Failed)?;
            writeln!(out, "{k}")
        }
    }
    .map_err(CliError::output)
}

/// `strata export DB [FILE]`: every entry, in key order, as lines `load` reads back. FILE is
/// replaced only by a whole export: a failed one leaves no file behind.
pub fn export(db: &Path, file: Option<&Path>, flags: &ReadFlags) -> Result<ExitCode, CliError> {
    let encoding = flags.encoding();
    let handle = open_read_only(db, flags.options())?;
    match file {
        Some(path) if path != Path::new("-") => {
            let mut out = ReplacingFile::create(path)?;
            write_every_entry(&handle, encoding, out.writer())?;
            out.commit()?;
        }
        _ => {
            let mut out = output()?;
            write_every_entry(&handle, encoding, &mut out)?;
            out.flush().map_err(CliError::output)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn write_every_entry(
    handle: &strata::Db,
    encoding: Encoding,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let read = ReadOptions {
        fill_cache: false,
        ..ReadOptions::default()
    };
    for item in handle.scan_opt(&read)? {
        let (key, value) = item?;
        write_entry(out, encoding, false, &key, Some(&value))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_skips_trailing_ff() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff\xff"), None);
    }

    #[test]
    fn from_to_and_prefix_intersect() {
        let b = |s: &str| Some(s.as_bytes().to_vec());
        let inc = |s: &str| Bound::Included(s.as_bytes().to_vec());
        let exc = |s: &str| Bound::Excluded(s.as_bytes().to_vec());
        assert_eq!(
            selected_range(b("a"), b("z"), b("k")),
            Some((inc("k"), exc("l")))
        );
        assert_eq!(
            selected_range(b("kb"), None, b("k")),
            Some((inc("kb"), exc("l")))
        );
        assert_eq!(selected_range(b("m"), b("c"), None), None);
        assert_eq!(selected_range(b("m"), None, b("k")), None);
        assert_eq!(
            selected_range(None, None, None),
            Some((Bound::Unbounded, Bound::Unbounded))
        );
    }
}
