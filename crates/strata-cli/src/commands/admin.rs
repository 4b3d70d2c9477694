// SPDX-License-Identifier: MIT OR Apache-2.0
//! `repair`, `checkpoint` and `destroy`.

use std::path::Path;
use std::process::ExitCode;

use strata::Options;

use crate::error::CliError;
use crate::WriteFlags;

/// True if `db` holds a file that only a database has: CURRENT, a MANIFEST, a table or a log.
/// `repair` refuses other directories, so that a mistyped path changes nothing.
fn holds_a_database(db: &Path) -> Result<bool, CliError> {
    let entries = std::fs::read_dir(db).map_err(|e| {
        CliError::failed(format!("{} is not a database directory: {e}", db.display()))
    })?;
    Ok(entries.filter_map(Result::ok).any(|e| {
        let name = e.file_name();
        let name = name.to_string_lossy();
        name == "CURRENT"
            || name.starts_with("MANIFEST-")
            || [".ldb", ".sst", ".log"].iter().any(|s| {
                name.strip_suffix(s)
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            })
    }))
}

/// `strata repair DB`.
pub fn repair(db: &Path, flags: &WriteFlags) -> Result<ExitCode, CliError> {
    if !holds_a_database(db)? {
        return Err(CliError::failed(format!(
            "{} is not a database: it holds no CURRENT, MANIFEST, table or log file; nothing \
             repaired",
            db.display()
        )));
    }
    let options = Options {
        create_if_missing: false,
        ..flags.options()
    };
    let report = strata::repair(db, &options)?;
    println!(
        "repaired {}: {} logs replayed, {} tables, {} records kept, {} damaged pieces dropped",
        db.display(),
        report.logs_replayed,
        report.tables,
        report.records,
        report.damaged_pieces
    );
    for moved in &report.moved_to_lost {
        println!("moved to lost/: {}", moved.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// `strata checkpoint DB DEST`: [`strata::Db::checkpoint`] from a read-only open, which
/// copies the live logs whole and links the tables and blob files; nothing in `db` changes.
pub fn checkpoint(db: &Path, dest: &Path) -> Result<ExitCode, CliError> {
    let handle = super::open_read_only(db, Options::default())?;
    handle.checkpoint(dest)?;
    drop(handle);
    let files = std::fs::read_dir(dest)
        .map_err(|e| CliError::io(format_args!("listing {}", dest.display()), e))?
        .count();
    println!(
        "checkpoint of {} made in {}: {files} files",
        db.display(),
        dest.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `strata destroy DB`: the library refuses a directory that is not a database
/// ([`strata::Error::NoDatabase`]) before it deletes anything, and keeps every file that is
/// not the database's; those are listed.
pub fn destroy(db: &Path) -> Result<ExitCode, CliError> {
    if !db.exists() {
        return Err(CliError::failed(format!(
            "{} does not exist; nothing destroyed",
            db.display()
        )));
    }
    strata::destroy(db, &Options::default())?;
    if !db.exists() {
        println!("destroyed {}", db.display());
        return Ok(ExitCode::SUCCESS);
    }
    let mut left: Vec<String> = std::fs::read_dir(db)
        .map_err(|e| CliError::io(format_args!("listing {}", db.display()), e))?
        .filter_map(Result::ok)
        .map(|e| {
            let mut name = e.file_name().to_string_lossy().into_owned();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                name.push('/');
            }
            name
        })
        .collect();
    left.sort();
    println!(
        "destroyed the database in {}; kept the directory, which holds files that are not the \
         database's: {}",
        db.display(),
        left.join(", ")
    );
    Ok(ExitCode::SUCCESS)
}
