// SPDX-License-Identifier: MIT OR Apache-2.0
//! `stats` and `check`: what a database holds, and whether every byte of it reads back.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use serde_json::json;
use strata::check::{CheckReport, CheckedFile, FileKind};
use strata::filter::BloomFilterPolicy;
use strata::version::NUM_LEVELS;
use strata::{DbStats, Options};

use super::{open_read_only, output};
use crate::error::{CliError, DAMAGE_FOUND};
use crate::units::human;
use crate::ReadFlags;

/// The properties that `stats` prints, besides one `num-files-at-levelN` a level: LevelDB's,
/// and strata's blob files (`number size value_bytes garbage_bytes`, one a line).
const PROPERTIES: [&str; 4] = [
    "leveldb.stats",
    "leveldb.sstables",
    "leveldb.approximate-memory-usage",
    "strata.blob-files",
];

/// One level's figures, summed over its tables.
#[derive(Default, Clone, Copy)]
struct LevelFigures {
    tables: u64,
    bytes: u64,
    entries: u64,
    deletions: u64,
    key_value_bytes: u64,
    raw_data_bytes: u64,
    stored_data_bytes: u64,
}

impl LevelFigures {
    fn add(&mut self, file: &CheckedFile) {
        self.tables += 1;
        self.bytes += file.size;
        if let Some(t) = &file.table {
            self.entries += t.entries;
            self.deletions += t.deletions;
            self.key_value_bytes += t.key_bytes + t.value_bytes;
            self.raw_data_bytes += t.raw_data_bytes;
            self.stored_data_bytes += t.stored_data_bytes;
        }
    }

    fn merge(&mut self, other: &LevelFigures) {
        self.tables += other.tables;
        self.bytes += other.bytes;
        self.entries += other.entries;
        self.deletions += other.deletions;
        self.key_value_bytes += other.key_value_bytes;
        self.raw_data_bytes += other.raw_data_bytes;
        self.stored_data_bytes += other.stored_data_bytes;
    }

    /// Uncompressed over stored data-block bytes; 1.0 for no data.
    fn compression_ratio(&self) -> f64 {
        if self.stored_data_bytes == 0 {
            1.0
        } else {
            self.raw_data_bytes as f64 / self.stored_data_bytes as f64
        }
    }

    fn to_json(self, level: Option<usize>) -> serde_json::Value {
        json!({
            "level": level,
            "tables": self.tables,
            "bytes": self.bytes,
            "entries": self.entries,
            "deletions": self.deletions,
            "key_value_bytes": self.key_value_bytes,
            "raw_data_bytes": self.raw_data_bytes,
            "stored_data_bytes": self.stored_data_bytes,
            "compression_ratio": self.compression_ratio(),
        })
    }
}

/// `strata stats DB`: opens the database read-only for LevelDB's properties, then reads every
/// live table for the figures the MANIFEST does not keep (entries, compression).
pub fn stats(db: &Path, json: bool, flags: &ReadFlags) -> Result<ExitCode, CliError> {
    let options = flags.options();
    let handle = open_read_only(db, options.clone())?;
    let mut properties: Vec<(String, String)> = PROPERTIES
        .iter()
        .map(|name| (name.to_string(), handle.property(name).unwrap_or_default()))
        .collect();
    for level in 0..NUM_LEVELS {
        let name = format!("leveldb.num-files-at-level{level}");
        let value = handle.property(&name).unwrap_or_default();
        properties.push((name, value));
    }
    // From a read-only open, only what the database holds means anything here (its blob
    // files, the memtable its live logs replay into); the counters of work done are zero.
    let db_stats = handle.stats();
    drop(handle);
    let report = strata::check(db, &options)?;

    let mut levels = [LevelFigures::default(); NUM_LEVELS];
    for file in report.live_tables() {
        levels[file.level.unwrap_or(0)].add(file);
    }
    let mut total = LevelFigures::default();
    levels.iter().for_each(|l| total.merge(l));
    let logs: Vec<&CheckedFile> = report
        .files
        .iter()
        .filter(|f| f.kind == FileKind::Log && f.live)
        .collect();
    let log_bytes: u64 = logs.iter().map(|f| f.size).sum();
    let log_records: u64 = logs.iter().map(|f| f.records).sum();
    let log_operations: u64 = logs.iter().map(|f| f.operations).sum();

    let mut out = output()?;
    if json {
        let document = json!({
            "database": db.display().to_string(),
            "manifest": report.manifest,
            "comparator": report.comparator,
            "last_sequence": report.last_sequence,
            "logs": { "files": logs.len(), "bytes": log_bytes, "records": log_records,
                      "operations": log_operations },
            "memtable_bytes": db_stats.memtable_bytes,
            "blobs": db_stats.blobs.as_ref().map(|b| json!({
                "files": b.file_count,
                "bytes": b.file_bytes,
                "value_bytes": b.value_bytes,
                "garbage_bytes": b.garbage_bytes,
            })),
            "levels": (0..NUM_LEVELS)
                .filter(|&l| levels[l].tables > 0)
                .map(|l| levels[l].to_json(Some(l)))
                .collect::<Vec<_>>(),
            "total": total.to_json(None),
            "properties": properties.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<_, _>>(),
            "damage": report.damage.iter().map(|d| d.to_string()).collect::<Vec<_>>(),
        });
        writeln!(out, "{document:#}").map_err(CliError::output)?;
    } else {
        let logs = LogFigures {
            files: logs.len(),
            bytes: log_bytes,
            records: log_records,
            operations: log_operations,
        };
        let figures = StatsFigures {
            levels: &levels,
            total: &total,
            logs: &logs,
            db_stats: &db_stats,
        };
        write_stats_text(&mut out, db, &report, &figures, &properties).map_err(CliError::output)?;
    }
    out.flush().map_err(CliError::output)?;
    if !report.is_sound() {
        eprintln!(
            "strata: warning: {} damaged pieces in {}; run `strata check` for the list",
            report.damage.len(),
            db.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The live logs, summed.
struct LogFigures {
    files: usize,
    bytes: u64,
    records: u64,
    operations: u64,
}

/// What `stats` prints besides the check report and the properties.
struct StatsFigures<'a> {
    levels: &'a [LevelFigures; NUM_LEVELS],
    total: &'a LevelFigures,
    logs: &'a LogFigures,
    db_stats: &'a DbStats,
}

fn write_stats_text(
    out: &mut dyn Write,
    db: &Path,
    report: &CheckReport,
    figures: &StatsFigures<'_>,
    properties: &[(String, String)],
) -> std::io::Result<()> {
    let StatsFigures {
        levels,
        total,
        logs,
        db_stats,
    } = *figures;
    writeln!(out, "database       {}", db.display())?;
    writeln!(
        out,
        "manifest       {}",
        report.manifest.as_deref().unwrap_or("(unknown)")
    )?;
    if let Some(c) = &report.comparator {
        writeln!(out, "comparator     {c}")?;
    }
    if let Some(seq) = report.last_sequence {
        writeln!(out, "last sequence  {seq} (as the MANIFEST records it)")?;
    }
    writeln!(
        out,
        "logs           {} ({}, {} batches, {} writes)",
        logs.files,
        human(logs.bytes),
        logs.records,
        logs.operations
    )?;
    if let Some(blobs) = db_stats.blobs.as_ref().filter(|b| b.file_count > 0) {
        writeln!(
            out,
            "blob files     {} ({}, of which {} no entry reaches)",
            blobs.file_count,
            human(blobs.file_bytes),
            human(blobs.garbage_bytes)
        )?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "level  tables        size       entries   deletions  keys+values  compression"
    )?;
    let row = |out: &mut dyn Write, name: &str, l: &LevelFigures| {
        writeln!(
            out,
            "{name:>5} {:>7} {:>11} {:>13} {:>11} {:>12} {:>11.2}x",
            l.tables,
            human(l.bytes),
            l.entries,
            l.deletions,
            human(l.key_value_bytes),
            l.compression_ratio()
        )
    };
    for (level, figures) in levels.iter().enumerate() {
        if figures.tables > 0 {
            row(out, &level.to_string(), figures)?;
        }
    }
    row(out, "total", total)?;
    writeln!(out)?;
    // One num-files-at-levelN a level repeats the table above; JSON keeps them.
    let shown = properties
        .iter()
        .filter(|(n, _)| !n.contains("num-files-at-level"));
    for (name, value) in shown {
        if value.contains('\n') {
            writeln!(out, "{name}:")?;
            for line in value.lines() {
                writeln!(out, "  {line}")?;
            }
        } else {
            writeln!(out, "{name}: {value}")?;
        }
    }
    Ok(())
}

/// `strata check DB`: exit 0 when sound, 3 when damage is found.
pub fn check(db: &Path, json: bool, bloom_bits: Option<usize>) -> Result<ExitCode, CliError> {
    let mut options = Options::default();
    if let Some(bits) = bloom_bits {
        options.filter_policy = Some(Arc::new(BloomFilterPolicy::new(bits)));
    }
    let report = strata::check(db, &options)?;
    if report.checks_beside_writer > 0 {
        eprintln!(
            "strata: checked beside a writer that holds the database, the state of MANIFEST {} \
             as of sequence {} ({} run(s); {} file(s) the writer deleted during the check \
             skipped)",
            report.manifest.as_deref().unwrap_or("?"),
            report.last_sequence.unwrap_or(0),
            report.checks_beside_writer,
            report.deleted_during_check
        );
    }
    let mut out = output()?;
    if json {
        let document = json!({
            "database": db.display().to_string(),
            "sound": report.is_sound(),
            "checks_beside_writer": report.checks_beside_writer,
            "deleted_during_check": report.deleted_during_check,
            "manifest": report.manifest,
            "files": report.files.iter().map(|f| json!({
                "name": f.name,
                "kind": format!("{:?}", f.kind).to_lowercase(),
                "bytes": f.size,
                "live": f.live,
                "level": f.level,
                "records": f.records,
                "torn_tail": f.torn_tail,
            })).collect::<Vec<_>>(),
            "damage": report.damage.iter().map(|d| json!({
                "file": d.file.display().to_string(),
                "offset": d.offset,
                "reason": d.reason,
            })).collect::<Vec<_>>(),
        });
        writeln!(out, "{document:#}").map_err(CliError::output)?;
    } else {
        for damage in &report.damage {
            writeln!(out, "damaged: {damage}").map_err(CliError::output)?;
        }
        for file in report.files.iter().filter(|f| f.torn_tail) {
            writeln!(
                out,
                "note: {} ends in a write a crash cut short; opening the database drops it",
                db.join(&file.name).display()
            )
            .map_err(CliError::output)?;
        }
        writeln!(out, "{}", summary(db, &report)).map_err(CliError::output)?;
    }
    out.flush().map_err(CliError::output)?;
    Ok(if report.is_sound() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(DAMAGE_FOUND)
    })
}

/// One line: what was read, and the verdict.
fn summary(db: &Path, report: &CheckReport) -> String {
    let live = |kind: FileKind| {
        report
            .files
            .iter()
            .filter(move |f| f.kind == kind && f.live)
    };
    let tables = live(FileKind::Table).count();
    let table_bytes: u64 = live(FileKind::Table).map(|f| f.size).sum();
    let entries: u64 = live(FileKind::Table).map(|f| f.records).sum();
    let logs = live(FileKind::Log).count();
    let records: u64 = live(FileKind::Log).map(|f| f.records).sum();
    let unused = report
        .files
        .iter()
        .filter(|f| {
            !f.live && matches!(f.kind, FileKind::Table | FileKind::Log | FileKind::Manifest)
        })
        .count();
    let verdict = if report.is_sound() {
        "sound".to_owned()
    } else {
        format!("DAMAGED ({})", plural(report.damage.len() as u64, "piece"))
    };
    let mut line = format!(
        "{}: {verdict}; read {} with {} ({}, {}) and {} ({})",
        db.display(),
        report.manifest.as_deref().unwrap_or("no MANIFEST"),
        plural(tables as u64, "table"),
        human(table_bytes),
        plural(entries, "entry"),
        plural(logs as u64, "log"),
        plural(records, "record"),
    );
    if unused > 0 {
        line.push_str(&format!(
            "; {} not read",
            plural(unused as u64, "obsolete file")
        ));
    }
    line
}

/// `1 table`, `2 tables`, `1 entry`, `3 entries`.
fn plural(n: u64, noun: &str) -> String {
    match (n, noun.strip_suffix('y')) {
        (1, _) => format!("{n} {noun}"),
        (_, Some(stem)) => format!("{n} {stem}ies"),
        _ => format!("{n} {noun}s"),
    }
}
