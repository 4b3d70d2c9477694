// SPDX-License-Identifier: MIT OR Apache-2.0
//! One module a group of commands: reading (get, scan, export), writing (put, delete, load,
//! compact), inspecting (stats, check), dumping one file, and administration (repair, destroy).

pub mod admin;
pub mod dump;
pub mod inspect;
pub mod read;
pub mod write;

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use strata::{Db, Options};

use crate::error::CliError;

/// Opens `db` without writing anything (read commands). Beside a writer (a program holds the
/// database) it says on stderr which state the command reads: the writer's, as of the open.
pub fn open_read_only(db: &Path, options: Options) -> Result<Db, CliError> {
    let handle = Db::open_read_only(db, options)?;
    let (seqno, beside_writer) = handle.read_state();
    if beside_writer {
        eprintln!("strata: read the state as of sequence {seqno} (a writer holds the database)");
    }
    Ok(handle)
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

/// Standard output, buffered.
pub fn output() -> Result<Box<dyn Write>, CliError> {
    Ok(Box::new(BufWriter::with_capacity(
        1 << 16,
        io::stdout().lock(),
    )))
}

/// A file written whole or not at all: the output goes to a temporary file beside `path`,
/// which replaces `path` only once everything is written and synced
/// ([`commit`](Self::commit)). A command that fails before then removes the temporary file
/// (when the value is dropped), so it never leaves a partial file, and `path` keeps what it
/// held.
pub struct ReplacingFile {
    path: PathBuf,
    temp: PathBuf,
    /// `None` once committed.
    out: Option<BufWriter<File>>,
}

impl ReplacingFile {
    /// Creates the temporary file beside `path` (in the same directory, so that the rename
    /// that replaces `path` is atomic).
    pub fn create(path: &Path) -> Result<ReplacingFile, CliError> {
        let name = path
            .file_name()
            .ok_or_else(|| CliError::Usage(format!("{} is not a file name", path.display())))?;
        let mut temp_name = std::ffi::OsString::from(".");
        temp_name.push(name);
        temp_name.push(format!(".{}.tmp", std::process::id()));
        let temp = path.with_file_name(temp_name);
        let file = File::create(&temp)
            .map_err(|e| CliError::io(format_args!("cannot create {}", path.display()), e))?;
        Ok(ReplacingFile {
            path: path.to_path_buf(),
            temp,
            out: Some(BufWriter::with_capacity(1 << 16, file)),
        })
    }

    /// Where to write.
    pub fn writer(&mut self) -> &mut dyn Write {
        self.out.as_mut().expect("written only before commit")
    }

    /// Flushes and syncs the temporary file and renames it over the destination.
    pub fn commit(mut self) -> Result<(), CliError> {
        let out = self.out.take().expect("committed once");
        let temp = self.temp.clone();
        let failed = |e| CliError::io(format_args!("writing {}", temp.display()), e);
        let file = out.into_inner().map_err(|e| failed(e.into_error()))?;
        file.sync_all().map_err(failed)?;
        drop(file);
        fs::rename(&self.temp, &self.path).map_err(|e| {
            CliError::io(
                format_args!(
                    "renaming {} to {}",
                    self.temp.display(),
                    self.path.display()
                ),
                e,
            )
        })?;
        // Renamed: nothing is left to remove.
        self.temp = PathBuf::new();
        Ok(())
    }
}

impl Drop for ReplacingFile {
    fn drop(&mut self) {
        if !self.temp.as_os_str().is_empty() {
            // Dropped unflushed: nothing more is written to a file about to go.
            if let Some(out) = self.out.take() {
                drop(out.into_parts());
            }
            let _ = fs::remove_file(&self.temp);
        }
    }
}
