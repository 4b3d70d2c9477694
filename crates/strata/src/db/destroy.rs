// SPDX-License-Identifier: MIT OR Apache-2.0
//! Destroying a database: only a database, only its own files.

use std::path::Path;

use crate::env::Env;
use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::key::InternalKeyComparator;
use crate::options::Options;

/// Deletes the database in `path`: every file of its own (the names [`FileKind`] covers: logs,
/// tables, MANIFESTs, `CURRENT`, `LOCK`, the info log, temporary and blob files), then the
/// directory if nothing else is left in it. Files and directories that are not the
/// database's (`notes.txt`, `lost/`) are left alone, and so is the directory that holds them.
///
/// Only a database is destroyed: `CURRENT` must name a MANIFEST that exists and reads whole
/// (a torn tail aside), as opening would read it; the comparator it records does not matter.
/// Anything else, a directory of other files or the remains of a damaged database, is
/// refused before anything is deleted or created. A directory that does not exist is not an
/// error: there is nothing to destroy; an empty one, or one holding only a `LOCK` file, is
/// removed (LevelDB's `DestroyDB` answers both the same).
///
/// # Errors
/// - [`Error::NoDatabase`] if `path` holds no database by the rule above; nothing changed;
/// - [`Error::Locked`] if the database is open;
/// - I/O errors (the first one; the other files are still deleted). `CURRENT` and the
///   MANIFESTs are deleted last, so a destroy stopped by an error can be run again.
///
/// # Example
///
/// ```
/// use strata::{Db, Options};
/// # let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("scratch");
/// let db = Db::open(&path, Options { create_if_missing: true, ..Options::default() })?;
/// db.put(b"k", b"v")?;
/// assert!(strata::destroy(&path, &Options::default()).is_err()); // still open
/// drop(db);
/// strata::destroy(&path, &Options::default())?;
/// assert!(!path.exists());
/// strata::destroy(&path, &Options::default())?; // nothing left to destroy
/// std::fs::create_dir(&path)?;
/// strata::destroy(&path, &Options::default())?; // an empty directory is removed
/// assert!(!path.exists());
/// ///
/// // A directory that is not a database is refused, and keeps its files.
/// std::fs::write(dir.path().join("000001.log"), b"not a log of mine")?;
/// let refused = strata::destroy(dir.path(), &Options::default());
/// assert!(matches!(refused, Err(strata::Error::NoDatabase { .. })));
/// assert!(dir.path().join("000001.log").exists());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn destroy(path: impl AsRef<Path>, options: &Options) -> Result<()> {
    let dir = path.as_ref();
    let env = &*options.env;
    let names = match env.children(dir) {
        Ok(names) => names,
        Err(e) if e.is_not_found() => return Ok(()),
        Err(e) => return Err(e),
    };
    let lock_path = filename::lock_file(dir);
    if names.iter().all(|name| name == "LOCK") {
        // Nothing to lose: an empty directory, or one a failed open left with only its lock.
        // LevelDB's `DestroyDB` removes it too (`destroy_db(mkdtemp())` is a common pattern).
        let lock = env.lock_file(&lock_path)?;
        drop(lock);
        let _ = env.remove_file(&lock_path);
        return env.remove_dir(dir);
    }
    refuse_unless_database(env, dir, options)?;
    let lock = env.lock_file(&lock_path)?;
    let mut own: Vec<(FileKind, String)> = names
        .into_iter()
        .filter_map(|name| match filename::parse_file_name(&name) {
            Some((FileKind::Lock, _)) | None => None,
            Some((kind, _)) => Some((kind, name)),
        })
        .collect();
    // While CURRENT names a MANIFEST that reads, the directory is still a database to the
    // rule above: deleting them last lets a destroy stopped by an error be run again.
    own.sort_by_key(|(kind, _)| match kind {
        FileKind::Current => 2,
        FileKind::Manifest => 1,
        _ => 0,
    });
    let mut first_error = None;
    for (_, name) in own {
        if let Err(e) = env.remove_file(&dir.join(&name)) {
            first_error.get_or_insert(e);
        }
    }
    drop(lock);
    let _ = env.remove_file(&lock_path);
    // Fails, and keeps the directory, while it holds anything that is not the database's.
    let _ = env.remove_dir(dir);
    first_error.map_or(Ok(()), Err)
}

/// `Ok` if `dir` holds a database by [`destroy`]'s rule: `CURRENT` names a MANIFEST that
/// exists and reads. Otherwise [`Error::NoDatabase`] saying why (or the I/O error that kept
/// it from knowing).
fn refuse_unless_database(env: &dyn Env, dir: &Path, options: &Options) -> Result<()> {
    if !env.exists(&filename::current_file(dir)) {
        return Err(Error::no_database(
            dir,
            "it has no CURRENT file; nothing deleted",
        ));
    }
    let icmp = InternalKeyComparator::new(options.comparator.clone());
    match crate::version::set::replay_manifest(env, dir, &icmp) {
        // Another comparator: a database all the same.
        Ok(_) | Err(Error::InvalidArgument(_)) => Ok(()),
        Err(e @ Error::Corruption { .. }) => Err(Error::no_database(
            dir,
            format!("its CURRENT does not name a MANIFEST that reads ({e}); nothing deleted"),
        )),
        Err(e) => Err(e),
    }
}
