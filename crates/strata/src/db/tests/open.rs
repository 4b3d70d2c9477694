// SPDX-License-Identifier: MIT OR Apache-2.0
//! Opening, recovering and destroying databases on the in-memory env: what an open creates,
//! refuses and replays, and what `destroy` deletes.

use super::*;

#[test]
fn fresh_database_has_leveldbs_files() {
    let env = MemEnv::new();
    drop(Db::open(DIR, options(&env)).unwrap());
    let mut names = env.children(Path::new(DIR)).unwrap();
    names.sort();
    assert_eq!(
        names,
        ["000003.log", "CURRENT", "LOCK", "LOG", "MANIFEST-000002"]
    );
    assert_eq!(
        crate::env::read_file_to_vec(&env, Path::new("/db/CURRENT")).unwrap(),
        b"MANIFEST-000002\n"
    );
    assert_eq!(env.file_size(Path::new("/db/MANIFEST-000002")).unwrap(), 50);
}

/// A refused open of a directory that holds no database creates nothing in it: no `LOCK`, no
/// `LOG` (it used to take the lock and open the info log before it looked for `CURRENT`).
#[test]
fn a_refused_open_creates_no_file() {
    let env = MemEnv::new();
    let dir = Path::new("/plain");
    env.create_dir_all(dir).unwrap();
    crate::env::write_file(&env, &dir.join("notes.txt"), b"mine", true).unwrap();
    let no_create = Options::default().with_env(Arc::new(env.clone()));
    for read_only in [false, true] {
        let err = if read_only {
            Db::open_read_only(dir, no_create.clone()).unwrap_err()
        } else {
            Db::open(dir, no_create.clone()).unwrap_err()
        };
        assert!(
            matches!(&err, Error::NoDatabase { path, reason } if path == dir
                && reason.contains("no CURRENT")),
            "{err}"
        );
        assert_eq!(env.children(dir).unwrap(), ["notes.txt"]);
    }
    // With create_if_missing, a directory holding a table but no CURRENT is refused, and
    // nothing is added to it either.
    crate::env::write_file(&env, &dir.join("000005.ldb"), b"table", true).unwrap();
    let err = Db::open(dir, options(&env)).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    let mut names = env.children(dir).unwrap();
    names.sort();
    assert_eq!(names, ["000005.ldb", "notes.txt"]);
}

#[test]
fn open_errors_are_clear() {
    let env = MemEnv::new();
    let no_create = Options::default().with_env(Arc::new(env.clone()));
    let err = Db::open("/missing", no_create.clone()).unwrap_err();
    assert!(
        matches!(&err, Error::NoDatabase { path, .. } if path == Path::new("/missing")),
        "{err}"
    );
    assert!(err.is_not_found());
    assert_eq!(
        err.to_string(),
        "/missing is not a database: the directory does not exist (create_if_missing is not set)"
    );
    let err = Db::open_read_only("/missing", no_create.clone()).unwrap_err();
    assert!(matches!(err, Error::NoDatabase { .. }), "{err}");
    let db = Db::open(DIR, options(&env)).unwrap();
    assert!(matches!(
        Db::open(DIR, options(&env)),
        Err(Error::Locked { .. })
    ));
    drop(db);
    let err = Db::open(
        DIR,
        Options {
            error_if_exists: true,
            ..options(&env)
        },
    )
    .unwrap_err();
    assert!(err.to_string().contains("already exists"), "{err}");
    let err = Db::open(
        DIR,
        Options {
            comparator: Arc::new(Reverse),
            ..options(&env)
        },
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("leveldb.BytewiseComparator"),
        "{err}"
    );
}

#[test]
fn read_only_open_writes_nothing() {
    let env = MemEnv::new();
    let db = Db::open(DIR, small_options(&env)).unwrap();
    for i in 0..3000u32 {
        db.put_opt(format!("{i:05}").as_bytes(), b"v", &w())
            .unwrap();
    }
    drop(db);
    let before = env.snapshot();
    let ro = Db::open_read_only(DIR, small_options(&env)).unwrap();
    // Readers share the database; a writer is kept out while they read.
    let ro2 = Db::open_read_only(DIR, small_options(&env)).unwrap();
    assert!(matches!(
        Db::open(DIR, small_options(&env)),
        Err(Error::Locked { .. })
    ));
    drop(ro2);
    assert_eq!(scan(&ro).len(), 3000);
    assert!(matches!(
        ro.put_opt(b"x", b"y", &w()),
        Err(Error::NotSupported(_))
    ));
    assert!(matches!(
        ro.compact_range(None, None),
        Err(Error::NotSupported(_))
    ));
    drop(ro);
    let mut a = before.children(Path::new(DIR)).unwrap();
    let mut b = env.children(Path::new(DIR)).unwrap();
    a.sort();
    b.sort();
    assert_eq!(a, b);
    for name in a {
        let p = Path::new(DIR).join(name);
        assert_eq!(
            crate::env::read_file_to_vec(&before, &p).unwrap(),
            crate::env::read_file_to_vec(&env, &p).unwrap()
        );
    }
    // A reader opened while a writer has the database reads beside it, without a lock.
    let writer = Db::open(DIR, small_options(&env)).unwrap();
    let beside = Db::open_read_only(DIR, small_options(&env)).unwrap();
    assert_eq!(beside.read_state(), (3000, true));
    assert_eq!(ro_is_unlocked(&env), 1);
    drop((beside, writer));
}

/// How many handles hold `LOCK` exclusively: a new writer's open fails while one does.
fn ro_is_unlocked(env: &MemEnv) -> usize {
    usize::from(matches!(
        Db::open(DIR, small_options(env)),
        Err(Error::Locked { .. })
    ))
}

#[test]
fn destroy_removes_the_database() {
    let env = MemEnv::new();
    let opts = options(&env);
    let db = Db::open(DIR, opts.clone()).unwrap();
    db.put_opt(b"k", b"v", &w()).unwrap();
    assert!(matches!(
        crate::destroy(DIR, &opts),
        Err(Error::Locked { .. })
    ));
    drop(db);
    crate::destroy(DIR, &opts).unwrap();
    assert!(!env.exists(Path::new(DIR)));
}

/// The names in `dir`, sorted.
fn names_in(env: &MemEnv, dir: &str) -> Vec<String> {
    let mut names = env.children(Path::new(dir)).unwrap();
    names.sort();
    names
}

/// `destroy` deletes only a database: it used to delete every file whose name the database
/// could use (`000001.log`, `LOG`), and, with nothing else there, the directory itself.
#[test]
fn destroy_refuses_a_directory_that_is_not_a_database_and_changes_nothing() {
    let env = MemEnv::new();
    let opts = options(&env);
    let put = |name: &str, bytes: &[u8]| {
        crate::env::write_file(&env, &Path::new("/plain").join(name), bytes, true).unwrap()
    };
    env.create_dir_all(Path::new("/plain")).unwrap();
    put("000001.log", b"someone else's log");
    put("LOG", b"someone else's notes");
    let refused = |expected: &str| {
        let before = names_in(&env, "/plain");
        let err = crate::destroy("/plain", &opts).unwrap_err();
        assert!(
            matches!(&err, Error::NoDatabase { path, reason }
                if path == Path::new("/plain") && reason.contains(expected)),
            "{err}"
        );
        assert!(err.is_not_found());
        assert_eq!(
            names_in(&env, "/plain"),
            before,
            "nothing deleted or created"
        );
    };
    refused("it has no CURRENT file");
    // A CURRENT that names nothing, beside a table.
    put("000005.sst", b"a table");
    put("CURRENT", b"MANIFEST-000004\n");
    refused("CURRENT names a MANIFEST that does not exist");
    put("CURRENT", b"not a manifest name\n");
    refused("does not name a MANIFEST");
    put("CURRENT", b"MANIFEST-000004\n");
    put("MANIFEST-000004", &[0x5a; 64]);
    refused("its CURRENT does not name a MANIFEST that reads");
}

#[test]
fn destroy_keeps_what_is_not_the_databases_and_the_directory_holding_it() {
    let env = MemEnv::new();
    let opts = options(&env);
    let db = Db::open(DIR, small_options(&env)).unwrap();
    for i in 0..2000u32 {
        db.put_opt(format!("{i:05}").as_bytes(), [1u8; 100], &w())
            .unwrap();
    }
    drop(db);
    crate::env::write_file(&env, Path::new("/db/notes.txt"), b"mine", true).unwrap();
    env.create_dir_all(Path::new("/db/lost")).unwrap();
    crate::destroy(DIR, &opts).unwrap();
    assert_eq!(names_in(&env, DIR), ["lost", "notes.txt"]);
    // A missing directory: nothing to destroy, as in LevelDB.
    crate::destroy("/nowhere", &opts).unwrap();
}

#[test]
fn destroy_removes_a_database_made_with_another_comparator() {
    let env = MemEnv::new();
    let made = Options {
        comparator: Arc::new(Reverse),
        ..options(&env)
    };
    let db = Db::open(DIR, made).unwrap();
    db.put_opt(b"k", b"v", &w()).unwrap();
    drop(db);
    crate::destroy(DIR, &options(&env)).unwrap();
    assert!(!env.exists(Path::new(DIR)));
}

/// The database's files of one kind, by extension (`log`, `ldb`).
fn files_named(env: &MemEnv, extension: &str) -> Vec<String> {
    let mut names: Vec<String> = env
        .children(Path::new(DIR))
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(&format!(".{extension}")))
        .collect();
    names.sort();
    names
}

#[test]
fn reuse_logs_keeps_appending_to_the_last_log() {
    let env = MemEnv::new();
    let reuse = || Options {
        reuse_logs: true,
        ..options(&env)
    };
    let db = Db::open(DIR, reuse()).unwrap();
    db.put_opt(b"a", b"1", &w()).unwrap();
    db.put_opt(b"b", b"2", &w()).unwrap();
    drop(db);
    let log = files_named(&env, "log");
    assert_eq!(log.len(), 1);
    let len = env.file_size(&Path::new(DIR).join(&log[0])).unwrap();

    // Reopened, the log and its memtable carry on: no table, no new log.
    let db = Db::open(DIR, reuse()).unwrap();
    assert_eq!(files_named(&env, "log"), log);
    assert!(files_named(&env, "ldb").is_empty());
    assert_eq!(db.get_opt(b"a", &r()).unwrap().as_deref(), Some(&b"1"[..]));
    db.put_opt(b"c", b"3", &w()).unwrap();
    assert!(env.file_size(&Path::new(DIR).join(&log[0])).unwrap() > len);
    drop(db);

    // The log is an ordinary log: a default open replays it whole and starts a new one.
    let db = Db::open(DIR, options(&env)).unwrap();
    assert_ne!(files_named(&env, "log"), log);
    assert_eq!(
        scan(&db),
        [
            (b"a".to_vec(), b"1".to_vec()),
            (b"b".to_vec(), b"2".to_vec()),
            (b"c".to_vec(), b"3".to_vec())
        ]
    );
}

#[test]
fn reuse_logs_does_not_append_after_a_torn_tail() {
    let env = MemEnv::new();
    let reuse = |paranoid_checks| Options {
        reuse_logs: true,
        paranoid_checks,
        ..options(&env)
    };
    let db = Db::open(DIR, reuse(false)).unwrap();
    db.put_opt(b"kept", b"1", &w()).unwrap();
    db.put_opt(b"torn", b"2", &w()).unwrap();
    drop(db);
    let log = files_named(&env, "log");
    let path = Path::new(DIR).join(&log[0]);
    let bytes = crate::env::read_file_to_vec(&env, &path).unwrap();
    // Cut the last record short, as a crash in the middle of its write leaves it.
    crate::env::write_file(&env, &path, &bytes[..bytes.len() - 2], false).unwrap();

    let db = Db::open(DIR, reuse(false)).unwrap();
    assert_ne!(files_named(&env, "log"), log, "a torn log was reused");
    assert_eq!(
        db.get_opt(b"kept", &r()).unwrap().as_deref(),
        Some(&b"1"[..])
    );
    assert_eq!(db.get_opt(b"torn", &r()).unwrap(), None);
    db.put_opt(b"after", b"3", &w()).unwrap();
    drop(db);
    // Nothing was appended after damage, so even a strict open finds none.
    let db = Db::open(DIR, reuse(true)).unwrap();
    assert_eq!(scan(&db).len(), 2);
}

/// Failing to start a thread panicked in open (`expect`). It is an I/O error, and the failed
/// open leaves nothing running: a thread already started holds the database, and with it
/// `LOCK`, so it is stopped and joined before open returns.
#[test]
fn a_thread_that_cannot_be_started_fails_the_open_and_leaves_nothing_running() {
    let env = MemEnv::new();
    let opts = Options {
        blob_threshold: Some(1000),
        ..options(&env)
    };
    for name in ["strata-background", "strata-blob-gc"] {
        FAIL_SPAWN.set(Some(name));
        let opened = Db::open(DIR, opts.clone());
        FAIL_SPAWN.set(None);
        let err = opened.unwrap_err();
        assert!(
            matches!(&err, Error::Io { op: "spawn thread", path, .. } if path == Path::new(DIR)),
            "{name}: {err}"
        );
        // Released: it opens again at once, and works.
        let db = Db::open(DIR, opts.clone()).unwrap();
        db.put_opt(b"k", name.as_bytes(), &w()).unwrap();
        assert_eq!(
            db.get_opt(b"k", &r()).unwrap().as_deref(),
            Some(name.as_bytes())
        );
    }
}

/// A file whose number no database could have allocated (u64::MAX) is not the database's:
/// opening marked every log and blob file number as used, `number + 1`, which overflowed (a
/// panic in debug builds).
#[test]
fn a_file_numbered_beyond_any_database_is_left_alone() {
    let env = MemEnv::new();
    drop(Db::open(DIR, options(&env)).unwrap());
    for name in ["18446744073709551615.log", "18446744073709551615.blob"] {
        let path = Path::new(DIR).join(name);
        crate::env::write_file(&env, &path, b"not ours", true).unwrap();
    }
    let db = Db::open(DIR, options(&env)).unwrap();
    db.put_opt(b"k", b"v", &w()).unwrap();
    drop(db);
    let db = Db::open(DIR, options(&env)).unwrap();
    assert_eq!(db.get_opt(b"k", &r()).unwrap().as_deref(), Some(&b"v"[..]));
    assert!(env.exists(&Path::new(DIR).join("18446744073709551615.log")));
}

/// Writes log `number` holding one put per `(key, seqno)`, then `tail` raw bytes after the
/// last record.
fn write_log(env: &MemEnv, number: u64, puts: &[(&[u8], u64)], tail: &[u8]) {
    let path = crate::filename::log_file(Path::new(DIR), number);
    let mut log = LogWriter::new(env.new_writable_file(&path).unwrap());
    for &(key, seqno) in puts {
        let mut batch = WriteBatch::new();
        batch.put(key, b"v");
        batch.set_seqno(seqno);
        log.add_record(batch.encoded()).unwrap();
    }
    log.sync().unwrap();
    drop(log);
    let mut bytes = crate::env::read_file_to_vec(env, &path).unwrap();
    bytes.extend_from_slice(tail);
    crate::env::write_file(env, &path, &bytes, true).unwrap();
}

/// Zeros after a log's last record are space a mapped log allocated ahead (a process killed
/// while writing it leaves them): the next log is replayed after it. A tail of other bytes is
/// a write cut short, and the logs after it are set aside in `lost/`.
#[test]
fn logs_after_a_log_ending_in_zeros_are_replayed_but_not_after_a_torn_one() {
    for (tail, replayed) in [(vec![0u8; 40_000], true), (vec![0x5a; 9], false)] {
        let env = MemEnv::new();
        drop(Db::open(DIR, options(&env)).unwrap());
        write_log(&env, 90, &[(b"a", 1), (b"b", 2)], &tail);
        write_log(&env, 91, &[(b"c", 3)], &[]);
        let db = Db::open(DIR, options(&env)).unwrap();
        let keys: Vec<Vec<u8>> = scan(&db).into_iter().map(|(k, _)| k).collect();
        if replayed {
            assert_eq!(keys, [b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
            assert!(!env.exists(&Path::new(DIR).join("lost")));
        } else {
            assert_eq!(keys, [b"a".to_vec(), b"b".to_vec()]);
            assert!(env.exists(&Path::new(DIR).join("lost/000091.log")));
        }
    }
}

/// A logged batch whose sequence numbers run past the largest (crafted, with a good
/// checksum) is corruption naming the log; replaying it overflowed `seqno + count` (a panic in
/// debug builds).
#[test]
fn a_logged_batch_with_sequence_numbers_past_the_largest_is_corruption() {
    let env = MemEnv::new();
    drop(Db::open(DIR, options(&env)).unwrap());
    let path = Path::new(DIR).join("000099.log");
    let mut log = LogWriter::new(env.new_writable_file(&path).unwrap());
    let mut batch = WriteBatch::new();
    batch.put(b"k", b"v");
    batch.set_seqno(u64::MAX);
    log.add_record(batch.encoded()).unwrap();
    log.sync().unwrap();
    match Db::open(DIR, options(&env)) {
        // The batch's sequence number: its record's first byte, past the log record's header.
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!((file, offset), (path, crate::log::HEADER_SIZE as u64))
        }
        other => panic!("expected corruption, got {:?}", other.map(|_| ())),
    }
}

/// A log that holds the same write twice (crafted, good checksums) is corruption naming the
/// log and the repeated record: replaying it inserted one internal key twice (a debug
/// assertion in the skiplist, a panic in debug builds).
#[test]
fn a_log_that_repeats_a_write_is_corruption() {
    let env = MemEnv::new();
    drop(Db::open(DIR, options(&env)).unwrap());
    let path = Path::new(DIR).join("000099.log");
    let mut log = LogWriter::new(env.new_writable_file(&path).unwrap());
    let mut batch = WriteBatch::new();
    batch.put(b"k", b"v");
    batch.set_seqno(1);
    log.add_record(batch.encoded()).unwrap();
    let second_record = log.file_len();
    log.add_record(batch.encoded()).unwrap();
    log.sync().unwrap();
    match Db::open(DIR, options(&env)) {
        Err(Error::Corruption {
            file,
            offset,
            reason,
        }) => {
            assert_eq!((file, offset), (path, second_record), "{reason}");
            assert!(reason.contains("repeats"), "{reason}");
        }
        other => panic!("expected corruption, got {:?}", other.map(|_| ())),
    }
}

/// A log record that is not a write batch (crafted, with a good checksum, after a good one) is
/// corruption naming the log and the file offset of the bad operation: past the record's
/// header, the operation's offset in the record.
#[test]
fn a_malformed_batch_in_a_log_names_the_log_and_the_absolute_offset() {
    let env = MemEnv::new();
    drop(Db::open(DIR, options(&env)).unwrap());
    let path = Path::new(DIR).join("000099.log");
    let mut log = LogWriter::new(env.new_writable_file(&path).unwrap());
    let mut good = WriteBatch::new();
    good.put(b"k", b"v");
    good.set_seqno(1);
    log.add_record(good.encoded()).unwrap();
    let second_record = log.file_len();
    let mut bad = WriteBatch::new();
    bad.put(b"k", b"v");
    bad.set_seqno(2);
    let mut bytes = bad.encoded().to_vec();
    bytes[12] = 7; // not an operation
    log.add_record(&bytes).unwrap();
    log.sync().unwrap();
    match Db::open(DIR, options(&env)) {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!(
                (file, offset),
                (path, second_record + crate::log::HEADER_SIZE as u64 + 12)
            )
        }
        other => panic!("expected corruption, got {:?}", other.map(|_| ())),
    }
}

/// `destroy` removes an empty directory, or one holding only `LOCK` (as LevelDB's
/// `DestroyDB`), on the real file system; but not while another holder has the lock (a
/// database being created there), and then it changes nothing.
#[test]
fn destroy_removes_an_empty_or_lock_only_directory_unless_it_is_locked() {
    let root = tempfile::tempdir().unwrap();
    let env: Arc<dyn Env> = Arc::new(crate::PosixEnv::new());
    let opts = Options::default().with_env(env.clone());

    let empty = root.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    crate::destroy(&empty, &opts).unwrap();
    assert!(!empty.exists());

    let lock_only = root.path().join("lock-only");
    std::fs::create_dir(&lock_only).unwrap();
    let held = env.lock_file(&lock_only.join("LOCK")).unwrap();
    let err = crate::destroy(&lock_only, &opts).unwrap_err();
    assert!(matches!(err, Error::Locked { .. }), "{err}");
    assert!(
        lock_only.join("LOCK").exists(),
        "nothing deleted while locked"
    );
    drop(held);
    crate::destroy(&lock_only, &opts).unwrap();
    assert!(!lock_only.exists());
}
