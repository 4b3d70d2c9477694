// SPDX-License-Identifier: MIT OR Apache-2.0
//! One module a group of commands: reading (get, scan, export), writing (put, delete, load,
//! compact), inspecting (stats, check), dumping one file, and administration (repair, destroy).

pub mod admin;
pub mod dump;
pub mod inspect;
pub mod read;
pub mod write;

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use strata::{Db, Options};

use crate::error::CliError;

/// Opens `db` without writing anything (read commands).
pub fn open_read_only(db: &Path, options: Options) -> Result<Db, CliError> {
    Ok(Db::open_read_only(db, options)?)
}

/// Opens `db` for writing, with a hint when it does not exist yet.
pub fn open_for_writing(db: &Path, options: Options) -> Result<Db, CliError> {
    let create = options.create_if_missing;
    Db::open(db, options).map_err(|e| {
        if !create && matches!(e, strata::Error::NoDatabase { .. }) {
            CliError::Failed(format!("{e}; pass --create to create a new database"))
        } else {
            CliError::from(e)
        }
    })
}

/// Where a command's output goes: FILE, or standard output for none or "-".
pub fn output(file: Option<&Path>) -> Result<Box<dyn Write>, CliError> {
    match file {
        Some(path) if path != Path::new("-") => {
            let f = File::create(path)
                .map_err(|e| CliError::io(format_args!("cannot create {}", path.display()), e))?;
            Ok(Box::new(BufWriter::with_capacity(1 << 16, f)))
        }
        _ => Ok(Box::new(BufWriter::with_capacity(
            1 << 16,
            io::stdout().lock(),
        ))),
    }
}
