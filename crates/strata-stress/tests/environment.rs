// SPDX-License-Identifier: MIT OR Apache-2.0
//! The environment a database meets on a real file system: a full disk, a read-only file
//! system, a second process, an unrelated handle to `LOCK` closed, a missing or empty
//! `CURRENT`, a missing table, stray files. Each gives its clear error, or works.
//!
//! The full-disk and read-only tests mount a small tmpfs, which needs root (CI has it); where
//! mounting is not allowed they say so and check nothing.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use strata::{Db, Error, Options};

fn create() -> Options {
    Options {
        create_if_missing: true,
        write_buffer_size: 64 << 10,
        ..Options::default()
    }
}

/// A tmpfs of `size` mounted on a new directory, unmounted on drop.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().ok()?;
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .ok()?;
        if !status.success() {
            eprintln!("note: cannot mount a tmpfs here (not root?); skipping");
            return None;
        }
        Some(Tmpfs { dir })
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("db")
    }

    fn remount(&self, options: &str) {
        let status = Command::new("mount")
            .args(["-o", &format!("remount,{options}")])
            .arg(self.dir.path())
            .status()
            .unwrap();
        assert!(status.success(), "remount {options}");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

fn value(i: u32) -> Vec<u8> {
    let mut v = format!("{i}:").into_bytes();
    v.resize(4096, b'x');
    v
}

#[test]
fn a_full_disk_fails_writes_keeps_reads_and_loses_nothing_acknowledged() {
    let Some(fs) = Tmpfs::mount("2m") else { return };
    let db = Db::open(fs.path(), create()).unwrap();
    let mut acked = 0u32;
    let err = loop {
        match db.put(format!("k{acked:06}").as_bytes(), value(acked)) {
            Ok(()) => acked += 1,
            Err(e) => break e,
        }
        assert!(acked < 10_000, "the disk never filled");
    };
    let text = err.to_string();
    assert!(
        matches!(err, Error::Io { .. }) && text.contains("No space left on device"),
        "{text}"
    );
    assert!(
        text.contains(fs.path().to_str().unwrap()),
        "names no path: {text}"
    );
    // No more writes on this handle; reads go on.
    assert!(db.put(b"after", b"x").is_err());
    assert_eq!(db.get(b"k000000").unwrap().as_deref(), Some(&value(0)[..]));
    drop(db);
    // With room again, every acknowledged write is there.
    fs.remount("size=16m");
    let db = Db::open(fs.path(), create()).unwrap();
    for i in 0..acked {
        let got = db.get(format!("k{i:06}").as_bytes()).unwrap();
        assert_eq!(
            got.as_deref(),
            Some(&value(i)[..]),
            "write {i} of {acked} lost"
        );
    }
    db.put(b"after", b"x").unwrap();
}

#[test]
fn a_read_only_file_system_refuses_writers_and_serves_readers() {
    let Some(fs) = Tmpfs::mount("4m") else { return };
    let db = Db::open(fs.path(), create()).unwrap();
    for i in 0..100 {
        db.put(format!("k{i:03}").as_bytes(), value(i)).unwrap();
    }
    drop(db);
    fs.remount("ro");
    let err = Db::open(fs.path(), Options::default()).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("Read-only file system"), "{text}");
    assert!(text.contains(fs.path().to_str().unwrap()), "{text}");
    let reader = Db::open_read_only(fs.path(), Options::default()).unwrap();
    assert_eq!(reader.scan().unwrap().count(), 100);
    drop(reader);
    fs.remount("rw");
}

/// Runs a `crashloop child` on `dir`: a second process opening the database for writing.
fn second_process(dir: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_crashloop"))
        .args(["child", "--dir"])
        .arg(dir)
        .args(["--seed", "0", "--start", "0,0,0"])
        .output()
        .unwrap()
}

#[test]
fn a_second_process_is_locked_out_even_after_an_unrelated_lock_handle_closes() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), create()).unwrap();
    db.put(b"k", b"v").unwrap();
    // Another handle to LOCK in this process, opened and closed: with POSIX record locks this
    // would drop the process's lock; strata's open-file-description locks survive it.
    drop(fs::File::open(dir.path().join("LOCK")).unwrap());
    let out = second_process(dir.path());
    assert_eq!(out.status.code(), Some(3), "the second process was let in");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("database is locked"), "{stderr}");
    // And in this process too.
    assert!(matches!(
        Db::open(dir.path(), Options::default()),
        Err(Error::Locked { .. })
    ));
    drop(db);
}

#[test]
fn missing_or_empty_current_a_missing_table_and_stray_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    let db = Db::open(path, create()).unwrap();
    for i in 0..2000u32 {
        db.put(format!("k{i:05}").as_bytes(), value(i)).unwrap();
    }
    db.compact_range(None, None).unwrap();
    drop(db);
    let files = |dir: &Path| {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    };

    // Stray files are left alone, and the database works.
    fs::write(path.join("notes.txt"), "mine").unwrap();
    fs::write(path.join("000999.bak"), "mine too").unwrap();
    let db = Db::open(path, Options::default()).unwrap();
    assert_eq!(db.scan().unwrap().count(), 2000);
    drop(db);
    assert!(path.join("notes.txt").exists() && path.join("000999.bak").exists());

    // An empty CURRENT: a corruption error naming it; nothing changes.
    let current = fs::read(path.join("CURRENT")).unwrap();
    fs::write(path.join("CURRENT"), b"").unwrap();
    let before = files(path);
    let err = Db::open(path, create()).unwrap_err();
    assert!(
        err.is_corruption() && err.to_string().contains("CURRENT"),
        "{err}"
    );
    assert_eq!(files(path), before);

    // A missing CURRENT: create_if_missing refuses to create over the tables.
    fs::remove_file(path.join("CURRENT")).unwrap();
    let err = Db::open(path, create()).unwrap_err();
    assert!(
        err.to_string()
            .contains("refusing to create a new database"),
        "{err}"
    );
    assert!(
        files(path).iter().any(|n| n.ends_with(".ldb")),
        "tables were deleted"
    );
    fs::write(path.join("CURRENT"), &current).unwrap();

    // A missing table: an error naming it; the other files stay.
    let table = files(path)
        .into_iter()
        .find(|n| n.ends_with(".ldb"))
        .unwrap();
    let saved = fs::read(path.join(&table)).unwrap();
    fs::remove_file(path.join(&table)).unwrap();
    let before = files(path);
    let err = Db::open(path, Options::default()).unwrap_err();
    assert!(err.to_string().contains(&table[..6]), "{err}");
    assert_eq!(files(path), before);
    fs::write(path.join(&table), saved).unwrap();
    let db = Db::open(path, Options::default()).unwrap();
    assert_eq!(db.scan().unwrap().count(), 2000);
}

#[test]
fn a_low_open_file_limit_with_hundreds_of_tables_still_reads_everything() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), create()).unwrap();
    // Incompressible values, so that each 1 MiB table holds 1 MiB of them.
    let mut x = 0x2545_f491_4f6c_dd1d_u64;
    let mut keys = 0u32;
    while keys < 120 * 256 {
        let mut v = Vec::with_capacity(4096);
        while v.len() < 4096 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            v.extend_from_slice(&x.to_le_bytes());
        }
        db.put(format!("k{keys:07}").as_bytes(), &v).unwrap();
        keys += 1;
    }
    db.compact_range(None, None).unwrap();
    drop(db);
    let tables = fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".ldb")
        })
        .count();
    assert!(tables >= 200, "only {tables} tables");
    // 32 descriptors for the whole process, for hundreds of tables read by a scan and by
    // lookups all over them.
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -n 32 && exec '{}' readall '{}'",
            env!("CARGO_BIN_EXE_crashloop"),
            dir.path().display()
        ))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        keys.to_string()
    );
}
