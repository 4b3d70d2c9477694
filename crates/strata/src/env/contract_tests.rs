// SPDX-License-Identifier: MIT OR Apache-2.0
//! One suite of behaviour every [`Env`] must show, run against both implementations.

use std::path::{Path, PathBuf};

use super::*;
use crate::error::Error;

fn suite(env: &dyn Env, root: &Path) {
    let dir = root.join("db");
    env.create_dir_all(&dir).unwrap();
    assert!(env.exists(&dir));
    let a = dir.join("a");

    // Write, read sequentially, read at offsets.
    let mut w = env.new_writable_file(&a).unwrap();
    w.append(b"hello ").unwrap();
    w.append(&vec![b'x'; 100_000]).unwrap();
    w.append(b" world").unwrap();
    w.sync().unwrap();
    drop(w);
    assert_eq!(env.file_size(&a).unwrap(), 100_012);
    let all = read_file_to_vec(env, &a).unwrap();
    assert_eq!(&all[..6], b"hello ");
    assert_eq!(&all[100_006..], b" world");

    let mut s = env.new_sequential_file(&a).unwrap();
    s.skip(100_006).unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(s.read(&mut buf).unwrap(), 6);
    assert_eq!(s.read(&mut buf).unwrap(), 0);

    let r = env.new_random_access_file(&a).unwrap();
    let mut five = [0u8; 5];
    r.read_exact_at(100_007, &mut five).unwrap();
    assert_eq!(&five, b"world");
    let err = r.read_exact_at(100_010, &mut five).unwrap_err();
    assert!(
        matches!(err, Error::Io { ref source, .. } if source.kind() == std::io::ErrorKind::UnexpectedEof)
    );

    // A file opened for large reads (mapped, where the environment maps): the same bytes
    // through both reads, the same error past the end.
    let m = env.new_mapped_file(&a).unwrap();
    assert_eq!(m.read_to_vec(0, 6).unwrap(), b"hello ");
    assert_eq!(m.read_to_vec(6, 100_000).unwrap(), vec![b'x'; 100_000]);
    m.read_exact_at(100_007, &mut five).unwrap();
    assert_eq!(&five, b"world");
    assert_eq!(r.read_to_vec(100_006, 6).unwrap(), b" world");
    assert_eq!(m.read_to_vec(0, 6).unwrap(), b"hello ");
    assert_eq!(r.read_to_vec(100_006, 6).unwrap(), b" world");
    for err in [
        m.read_to_vec(100_010, 5).unwrap_err(),
        m.read_exact_at(100_010, &mut five).unwrap_err(),
        r.read_to_vec(100_010, 5).unwrap_err(),
    ] {
        assert!(
            matches!(err, Error::Io { ref source, .. } if source.kind() == std::io::ErrorKind::UnexpectedEof),
            "{err}"
        );
    }

    // Append to an existing file.
    let mut ap = env.new_appendable_file(&a).unwrap();
    ap.append(b"!").unwrap();
    ap.flush().unwrap();
    drop(ap);
    assert_eq!(env.file_size(&a).unwrap(), 100_013);
    // Bytes appended after a file was opened for large reads are read too.
    assert_eq!(m.read_to_vec(100_007, 6).unwrap(), b"world!");
    assert_eq!(m.read_to_vec(100_012, 1).unwrap(), b"!");
    drop(m);

    // Truncating create.
    write_file(env, &a, b"new", true).unwrap();
    assert_eq!(read_file_to_vec(env, &a).unwrap(), b"new");

    // Link: the new name reads the same bytes; a `to` that exists or a missing `from` is
    // refused. The same for a copy.
    let linked = dir.join("linked");
    env.link_file(&a, &linked).unwrap();
    assert_eq!(read_file_to_vec(env, &linked).unwrap(), b"new");
    let err = env.link_file(&a, &linked).unwrap_err();
    assert!(
        matches!(err, Error::Io { ref source, .. } if source.kind() == std::io::ErrorKind::AlreadyExists),
        "{err}"
    );
    let err = env
        .link_file(&dir.join("missing"), &dir.join("x"))
        .unwrap_err();
    assert!(err.is_not_found(), "{err}");
    assert!(!env.exists(&dir.join("x")));
    env.remove_file(&linked).unwrap();
    copy_file(env, &a, &linked).unwrap();
    assert_eq!(read_file_to_vec(env, &linked).unwrap(), b"new");
    assert!(copy_file(env, &a, &linked).is_err());
    assert!(copy_file(env, &dir.join("missing"), &dir.join("x"))
        .unwrap_err()
        .is_not_found());
    assert!(!env.exists(&dir.join("x")), "a failed copy leaves no file");
    env.remove_file(&linked).unwrap();

    // Rename over an existing file, list, remove.
    let b = dir.join("b");
    write_file(env, &b, b"bee", false).unwrap();
    env.rename(&b, &a).unwrap();
    assert_eq!(read_file_to_vec(env, &a).unwrap(), b"bee");
    assert!(!env.exists(&b));
    let mut names = env.children(&dir).unwrap();
    names.sort();
    assert_eq!(names, vec!["a".to_string()]);
    env.sync_dir(&dir).unwrap();
    env.remove_file(&a).unwrap();
    assert!(!env.exists(&a));

    // Errors name the path.
    let missing = dir.join("missing");
    let err = env
        .new_sequential_file(&missing)
        .err()
        .expect("missing file");
    assert!(err.is_not_found(), "{err}");
    assert!(err.to_string().contains("missing"), "{err}");
    assert!(env.remove_file(&missing).unwrap_err().is_not_found());
    assert!(env.file_size(&missing).unwrap_err().is_not_found());
    assert!(env.children(&dir.join("nodir")).is_err());
    assert!(env.new_writable_file(&dir.join("nodir").join("f")).is_err());

    // Locks exclude a second holder until released.
    let lock_path = dir.join("LOCK");
    let lock = env.lock_file(&lock_path).unwrap();
    assert!(matches!(
        env.lock_file(&lock_path),
        Err(Error::Locked { .. })
    ));
    assert!(matches!(
        env.lock_file_shared(&lock_path),
        Err(Error::Locked { .. })
    ));
    drop(lock);
    let again = env.lock_file(&lock_path).unwrap();
    drop(again);

    // Shared locks coexist and exclude an exclusive one.
    let r1 = env.lock_file_shared(&lock_path).unwrap();
    let r2 = env.lock_file_shared(&lock_path).unwrap();
    assert!(matches!(
        env.lock_file(&lock_path),
        Err(Error::Locked { .. })
    ));
    drop(r1);
    assert!(matches!(
        env.lock_file(&lock_path),
        Err(Error::Locked { .. })
    ));
    drop(r2);
    drop(env.lock_file(&lock_path).unwrap());
    assert!(env.lock_file_shared(&dir.join("no-such-lock")).is_err());

    env.remove_file(&lock_path).unwrap();
    env.remove_dir(&dir).unwrap();
    assert!(!env.exists(&dir));
}

#[test]
fn posix_env_meets_the_contract() {
    let tmp = tempfile::tempdir().unwrap();
    suite(&PosixEnv::new(), tmp.path());
}

#[test]
fn mem_env_meets_the_contract() {
    suite(&MemEnv::new(), Path::new("/tmp"));
}

#[test]
fn posix_lock_survives_closing_an_unrelated_handle() {
    let tmp = tempfile::tempdir().unwrap();
    let env = PosixEnv::new();
    let lock_path = tmp.path().join("LOCK");
    let _lock = env.lock_file(&lock_path).unwrap();
    // With classic fcntl locks, closing any descriptor of the file drops the process's lock.
    drop(std::fs::File::open(&lock_path).unwrap());
    assert!(matches!(
        env.lock_file(&lock_path),
        Err(Error::Locked { .. })
    ));
}

/// A lock is released when its holder drops it, even while a child forked meanwhile still
/// holds a copy of its descriptor (as one another thread is spawning does until it execs):
/// an open-file-description lock would otherwise last as long as that copy, and reopening the
/// database in this process failed with `Error::Locked` under load.
#[test]
#[allow(unsafe_code)]
fn posix_lock_is_released_while_a_forked_child_holds_its_descriptor() {
    let tmp = tempfile::tempdir().unwrap();
    let env = PosixEnv::new();
    let lock_path = tmp.path().join("LOCK");
    let lock = env.lock_file(&lock_path).unwrap();
    // SAFETY: the child calls only async-signal-safe functions (`sleep`, `_exit`) and never
    // returns into the test harness; the parent waits for it below.
    let child = unsafe { nix::libc::fork() };
    assert!(child >= 0, "fork failed");
    if child == 0 {
        // SAFETY: async-signal-safe, and `_exit` does not run the parent's atexit handlers.
        unsafe {
            nix::libc::sleep(2);
            nix::libc::_exit(0);
        }
    }
    drop(lock);
    let again = env.lock_file(&lock_path);
    // SAFETY: waits for the child forked above; a null status pointer is allowed.
    unsafe { nix::libc::waitpid(child, std::ptr::null_mut(), 0) };
    assert!(
        again.is_ok(),
        "the lock outlived its drop: {:?}",
        again.err()
    );
}

#[test]
fn mem_crash_drops_unsynced_data_and_undoes_unsynced_renames() {
    let env = MemEnv::new();
    let dir = PathBuf::from("/db");
    env.create_dir_all(&dir).unwrap();
    let mut f = env.new_writable_file(&dir.join("f")).unwrap();
    f.append(b"durable").unwrap();
    f.sync().unwrap();
    env.sync_dir(&dir).unwrap();
    f.append(b"+volatile").unwrap();
    write_file(&env, &dir.join("tmp"), b"new name", true).unwrap();
    env.rename(&dir.join("tmp"), &dir.join("CURRENT")).unwrap();

    let killed = env.crash_clone(CrashMode::PROCESS_KILL);
    assert_eq!(
        read_file_to_vec(&killed, &dir.join("f")).unwrap(),
        b"durable+volatile"
    );
    assert!(killed.exists(&dir.join("CURRENT")));

    env.crash(CrashMode::POWER_LOSS);
    assert_eq!(read_file_to_vec(&env, &dir.join("f")).unwrap(), b"durable");
    assert!(!env.exists(&dir.join("CURRENT")));
    assert!(!env.exists(&dir.join("tmp")));
    // The old handle writes into a file nobody sees any more.
    f.append(b"zombie").unwrap();
    assert_eq!(env.file_size(&dir.join("f")).unwrap(), 7);
}

#[test]
fn mem_synced_rename_survives_power_loss() {
    let env = MemEnv::new();
    let dir = PathBuf::from("/db");
    env.create_dir_all(&dir).unwrap();
    write_file(&env, &dir.join("tmp"), b"MANIFEST-000002\n", true).unwrap();
    env.rename(&dir.join("tmp"), &dir.join("CURRENT")).unwrap();
    env.sync_dir(&dir).unwrap();
    env.crash(CrashMode::POWER_LOSS);
    assert_eq!(
        read_file_to_vec(&env, &dir.join("CURRENT")).unwrap(),
        b"MANIFEST-000002\n"
    );
}

#[test]
fn mem_stale_lock_handle_does_not_release_a_newer_lock() {
    let env = MemEnv::new();
    env.create_dir_all(Path::new("/db")).unwrap();
    let lock_path = Path::new("/db/LOCK");
    let old = env.lock_file(lock_path).unwrap();
    env.crash(CrashMode::PROCESS_KILL);
    let new = env.lock_file(lock_path).unwrap();
    drop(old);
    assert!(matches!(
        env.lock_file(lock_path),
        Err(Error::Locked { .. })
    ));
    drop(new);
}

/// Fails the `n`th write or sync (counting from 0) below the write buffer, writing half of
/// what a failed write was given first.
#[derive(Debug)]
struct FailNth {
    n: usize,
    seen: std::sync::atomic::AtomicUsize,
}

impl FailNth {
    fn new(n: usize) -> std::sync::Arc<Self> {
        std::sync::Arc::new(FailNth {
            n,
            seen: Default::default(),
        })
    }

    fn hit(&self) -> bool {
        self.seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == self.n
    }
}

impl crate::env::IoFaults for FailNth {
    fn before_write(&self, _path: &Path, len: usize) -> Option<(usize, std::io::Error)> {
        self.hit().then(|| {
            (
                len / 2,
                std::io::Error::from_raw_os_error(nix::libc::ENOSPC),
            )
        })
    }

    fn before_sync(&self, _path: &Path) -> Option<std::io::Error> {
        self.hit()
            .then(|| std::io::Error::from_raw_os_error(nix::libc::EIO))
    }
}

#[test]
fn posix_file_whose_write_failed_is_never_written_again_not_even_at_drop() {
    let tmp = tempfile::tempdir().unwrap();
    let env = PosixEnv::with_faults(FailNth::new(0));
    let path = tmp.path().join("f");
    let mut f = env.new_writable_file(&path).unwrap();
    f.append(&[1; 100]).unwrap();
    let e = f.flush().unwrap_err();
    assert!(e.to_string().contains("No space left"), "{e}");
    // The disk has room again, but the file's tail is torn: every call fails, naming the
    // first failure, and dropping the file writes nothing.
    for e in [f.flush(), f.append(b"x"), f.sync()] {
        let e = e.unwrap_err().to_string();
        assert!(e.contains("not written again"), "{e}");
    }
    drop(f);
    assert_eq!(std::fs::read(&path).unwrap(), vec![1; 50]);
}

/// A writable file writes a stream of small appends in whole aligned 64 KiB: an append that
/// would overflow the 64 KiB buffer goes out with the bytes buffered before it through the
/// next multiple of 64 KiB of the file, and the rest waits in the buffer; after a flush that
/// leaves the file's end between two multiples, appends are buffered until one would
/// overflow, and that write ends on the next multiple. A large append (64 KiB or more) goes
/// out whole with the buffered bytes, in one call, and a fault cuts the pair where it says.
#[test]
fn posix_appends_go_out_in_aligned_64k_large_ones_whole_and_a_fault_cuts_the_pair() {
    const K64: u64 = 64 << 10;
    let tmp = tempfile::tempdir().unwrap();
    let on_disk = |path: &Path| std::fs::metadata(path).unwrap().len();
    let piece: Vec<u8> = (0..5000u32).map(|i| (i % 241) as u8).collect();
    let path = tmp.path().join("small");
    let mut f = PosixEnv::new().new_writable_file(&path).unwrap();
    let mut appended = Vec::new();
    for i in 0..40 {
        f.append(&piece).unwrap();
        appended.extend_from_slice(&piece);
        // Written through the last multiple the appends reached, nothing past it.
        assert_eq!(on_disk(&path), (i + 1) * 5000 / K64 * K64);
    }
    f.flush().unwrap();
    assert_eq!(on_disk(&path), 200_000);
    // From 200,000, 13 pieces (65,000 bytes) fit the buffer, past the multiple 262,144; the
    // 14th would overflow it, and the bytes through 262,144 go out.
    for _ in 0..14 {
        assert_eq!(on_disk(&path), 200_000);
        f.append(&piece).unwrap();
        appended.extend_from_slice(&piece);
    }
    assert_eq!(on_disk(&path), 4 * K64);
    // Aligned again: the next write ends on the next multiple.
    for _ in 0..13 {
        f.append(&piece).unwrap();
        appended.extend_from_slice(&piece);
    }
    assert_eq!(on_disk(&path), 5 * K64);
    // A flush, then a record of 40,000 bytes (under 64 KiB) is one write, whole.
    f.flush().unwrap();
    let record = vec![5u8; 40_000];
    let before = on_disk(&path);
    f.append(&record).unwrap();
    appended.extend_from_slice(&record);
    assert_eq!(on_disk(&path), before);
    f.flush().unwrap();
    assert_eq!(on_disk(&path), before + 40_000);
    f.sync().unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), appended);

    let big: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    let whole = [&[9u8; 37][..], &big].concat();
    // No fault: buffered bytes, then the large append, then more, in order.
    let path = tmp.path().join("ok");
    let mut f = PosixEnv::new().new_writable_file(&path).unwrap();
    f.append(&[9; 37]).unwrap();
    f.append(&big).unwrap();
    assert_eq!(on_disk(&path), 100_037);
    f.append(b"tail").unwrap();
    f.sync().unwrap();
    assert_eq!(
        std::fs::read(&path).unwrap(),
        [&whole[..], b"tail"].concat()
    );
    // The first write fails half way through the pair (inside the large append): what is on
    // disk is that prefix, and the file is never written again.
    let path = tmp.path().join("cut");
    let env = PosixEnv::with_faults(FailNth::new(0));
    let mut f = env.new_writable_file(&path).unwrap();
    f.append(&[9; 37]).unwrap();
    let e = f.append(&big).unwrap_err();
    assert!(e.to_string().contains("No space left"), "{e}");
    assert!(f.append(b"x").is_err() && f.flush().is_err());
    drop(f);
    assert_eq!(std::fs::read(&path).unwrap(), &whole[..whole.len() / 2]);
}

#[test]
fn posix_file_whose_sync_failed_is_never_written_again() {
    let tmp = tempfile::tempdir().unwrap();
    let env = PosixEnv::with_faults(FailNth::new(1));
    let path = tmp.path().join("f");
    let mut f = env.new_writable_file(&path).unwrap();
    f.append(b"abc").unwrap();
    // Write 0 succeeds; the sync (call 1) fails.
    assert!(f.sync().is_err());
    f.append(b"def").unwrap_err();
    drop(f);
    assert_eq!(std::fs::read(&path).unwrap(), b"abc");
}

#[test]
fn posix_directory_sync_faults_are_injected() {
    #[derive(Debug)]
    struct DirFails;
    impl crate::env::IoFaults for DirFails {
        fn before_sync_dir(&self, _dir: &Path) -> Option<std::io::Error> {
            Some(std::io::Error::from_raw_os_error(nix::libc::EIO))
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let env = PosixEnv::with_faults(std::sync::Arc::new(DirFails));
    let e = env.sync_dir(tmp.path()).unwrap_err();
    assert!(e.to_string().contains("sync directory"), "{e}");
    PosixEnv::new().sync_dir(tmp.path()).unwrap();
}

#[test]
fn posix_link_falls_back_to_a_copy_only_where_links_are_refused() {
    use std::io::{Error as IoError, ErrorKind};
    for errno in [
        nix::libc::EXDEV,
        nix::libc::EPERM,
        nix::libc::EMLINK,
        nix::libc::EOPNOTSUPP,
    ] {
        assert!(
            super::posix::link_needs_copy(&IoError::from_raw_os_error(errno)),
            "{errno}"
        );
    }
    assert!(super::posix::link_needs_copy(&IoError::from(
        ErrorKind::Unsupported
    )));
    for errno in [
        nix::libc::ENOENT,
        nix::libc::EEXIST,
        nix::libc::EIO,
        nix::libc::ENOSPC,
    ] {
        assert!(
            !super::posix::link_needs_copy(&IoError::from_raw_os_error(errno)),
            "{errno}"
        );
    }
}

#[test]
fn posix_link_is_a_hard_link_on_one_device() {
    use std::os::unix::fs::MetadataExt;
    let tmp = tempfile::tempdir().unwrap();
    let env = PosixEnv::new();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    write_file(&env, &a, b"table", true).unwrap();
    env.link_file(&a, &b).unwrap();
    let (ma, mb) = (
        std::fs::metadata(&a).unwrap(),
        std::fs::metadata(&b).unwrap(),
    );
    assert_eq!((ma.ino(), ma.nlink()), (mb.ino(), 2));
}

#[test]
fn mem_link_shares_the_file_and_its_synced_bytes() {
    let env = MemEnv::new();
    let (a, b) = (Path::new("/a"), Path::new("/b"));
    let mut f = env.new_writable_file(a).unwrap();
    f.append(b"synced").unwrap();
    f.sync().unwrap();
    f.append(b" not").unwrap();
    env.link_file(a, b).unwrap();
    env.sync_dir(Path::new("/")).unwrap();
    let crashed = env.crash_clone(CrashMode::POWER_LOSS);
    assert_eq!(read_file_to_vec(&crashed, b).unwrap(), b"synced");
}

/// Writes 3,000 log records of 1,000 bytes (about 3 MiB, so records cross chunks of the mapped
/// log) to `path` in `env` and returns the writer, still open, with the records.
fn write_log_records(env: &PosixEnv, path: &Path) -> (crate::log::LogWriter, Vec<Vec<u8>>) {
    let mut writer = crate::log::LogWriter::new(env.new_log_file(path).unwrap());
    let records: Vec<Vec<u8>> = (0..3000u32)
        .map(|i| {
            let mut r = i.to_le_bytes().repeat(250);
            r.truncate(1000);
            r
        })
        .collect();
    for r in &records {
        writer.add_record(r).unwrap();
    }
    (writer, records)
}

/// Reads the log at `path` (recovery mode) and returns its records and the reader's view of
/// its tail: (torn, zeros).
fn read_log_records(env: &PosixEnv, path: &Path) -> (Vec<Vec<u8>>, bool, bool) {
    use crate::log::{LogReader, ReadMode};
    let mut reader = LogReader::new(
        env.new_sequential_file(path).unwrap(),
        path,
        ReadMode::Recovery,
    );
    let mut read = Vec::new();
    while let Some(r) = reader.next_record().unwrap() {
        read.push(r.to_vec());
    }
    (read, reader.torn_tail(), reader.zero_tail())
}

/// A mapped log's records are in the file as soon as they are added (another handle reads
/// them: a process crash would keep them), after them is allocated space of zeros the reader
/// passes over, and dropping the log cuts that space off. With `with_log_write_calls`, the
/// file is as long as its records at every moment.
#[test]
fn posix_mapped_log_is_readable_while_open_and_ends_after_its_records_when_dropped() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("000005.log");
    let env = PosixEnv::new();
    let (writer, records) = write_log_records(&env, &path);
    let len = writer.file_len();
    let size = env.file_size(&path).unwrap();
    assert!(size > len && size.is_multiple_of(1 << 20), "{size} {len}");
    let (read, torn, zeros) = read_log_records(&env, &path);
    assert!(read == records && torn && zeros);
    drop(writer);
    assert_eq!(env.file_size(&path).unwrap(), len);
    let (read, torn, zeros) = read_log_records(&env, &path);
    assert!(read == records && !torn && !zeros);

    let env = PosixEnv::new().with_log_write_calls();
    let (writer, records) = write_log_records(&env, &path);
    assert_eq!(env.file_size(&path).unwrap(), writer.file_len());
    drop(writer);
    assert_eq!(read_log_records(&env, &path), (records, false, false));
}

/// A mapped log holds exactly the bytes appended, whatever the sizes of the appends: pieces
/// from one byte to past its populate distance (64 KiB) and across its 1 MiB chunks, so that
/// the zeros it writes ahead to make its pages start at every offset within a page. Read by
/// another handle while open (the appended bytes, then zeros to the chunk's end) and after
/// the log is dropped (the appended bytes alone).
#[test]
fn posix_mapped_log_holds_exactly_the_bytes_appended() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("000013.log");
    let env = PosixEnv::new();
    let mut f = env.new_log_file(&path).unwrap();
    let mut appended = Vec::new();
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    while appended.len() < (3 << 20) + 12345 {
        // Mostly small pieces, a few over 64 KiB.
        let len = match next() % 8 {
            0 => 1 + (next() % (200 << 10)) as usize,
            _ => 1 + (next() % 5000) as usize,
        };
        // No zero byte, so that a zero written over an appended byte shows.
        let piece: Vec<u8> = (0..len).map(|_| 1 + (next() % 255) as u8).collect();
        f.append(&piece).unwrap();
        appended.extend_from_slice(&piece);
    }
    let open = std::fs::read(&path).unwrap();
    assert_eq!(&open[..appended.len()], &appended[..]);
    assert!(open.len().is_multiple_of(1 << 20), "{}", open.len());
    assert!(open[appended.len()..].iter().all(|&b| b == 0));
    drop(f);
    assert!(std::fs::read(&path).unwrap() == appended);
}

/// The resident bytes of the mappings of `path` in this process (`/proc/self/smaps`).
fn resident_bytes_mapped_from(path: &Path) -> u64 {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let name = path.to_str().unwrap();
    let mut in_path = false;
    let mut kib = 0;
    for line in smaps.lines() {
        let mut words = line.split_whitespace();
        let first = words.next().unwrap_or("");
        if first.contains('-') && !first.ends_with(':') {
            in_path = line.trim_end().ends_with(name);
        } else if in_path && first == "Rss:" {
            kib += words.next().unwrap().parse::<u64>().unwrap();
        }
    }
    kib * 1024
}

/// A mapped file told that a range is read and copied (`release_resident`) takes the pages
/// wholly inside it out of the process's resident memory, keeps the page the range starts
/// inside, and still reads every byte as before, through borrowed slices taken earlier too.
#[cfg(target_os = "linux")]
#[test]
fn posix_mapped_file_releases_the_pages_it_is_told_are_read() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("000009.ldb");
    let bytes: Vec<u8> = (0..16 * 4096 + 100).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&path, &bytes).unwrap();
    let file = PosixEnv::new().new_mapped_file(&path).unwrap();
    let whole = file.mapped(0, bytes.len()).expect("the file is mapped");
    assert_eq!(whole, &bytes[..]);
    let resident = resident_bytes_mapped_from(&path);
    assert_eq!(resident, 17 * 4096, "every page was read");
    // From inside page 1 to the end: pages 2..=16 go, pages 0 and 1 stay.
    file.release_resident(5000, bytes.len() as u64 - 5000);
    assert_eq!(resident_bytes_mapped_from(&path), 2 * 4096);
    assert_eq!(
        whole,
        &bytes[..],
        "a slice borrowed before reads the same bytes"
    );
    assert_eq!(file.read_to_vec(0, bytes.len()).unwrap(), bytes);
    drop(file);
    // A range inside one page, or past the end, releases nothing.
    let file = PosixEnv::new().new_mapped_file(&path).unwrap();
    let _ = file.read_to_vec(0, bytes.len()).unwrap();
    file.release_resident(4097, 4000);
    file.release_resident(bytes.len() as u64 + 10, 5);
    assert_eq!(resident_bytes_mapped_from(&path), 17 * 4096);
}

/// A mapped log keeps few of the pages it wrote mapped (they are the page cache's, and count
/// in no process's resident memory): after 3 MiB of records, at most 256 KiB written, the
/// 64 KiB faulted in ahead, the record being appended and the pages these round to, where
/// the whole of the current 1 MiB chunk's written part stayed before (929,792 bytes). Its
/// records are all read back, before and after a sync.
#[cfg(target_os = "linux")]
#[test]
fn posix_mapped_log_unmaps_the_pages_it_wrote() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("000011.log");
    let env = PosixEnv::new();
    let (mut writer, records) = write_log_records(&env, &path);
    let tail = writer.file_len() % (1 << 20);
    assert!(
        tail > 512 << 10,
        "the test wants a chunk written past half: {tail}"
    );
    let resident = resident_bytes_mapped_from(&path);
    assert!(resident > 0, "the log is mapped");
    assert!(
        resident <= (256 + 64 + 16) << 10,
        "{resident} bytes resident"
    );
    assert_eq!(read_log_records(&env, &path).0, records);
    writer.sync().unwrap();
    assert_eq!(read_log_records(&env, &path).0, records);
    drop(writer);
    assert_eq!(read_log_records(&env, &path), (records, false, false));
}

/// A full disk meets a mapped log when it allocates its next chunk (the fault a plan injects
/// into writes applies to allocations too): the append fails naming the file, every later
/// call fails, the file is never written again (not even cut short at drop), and what was
/// appended before the failure is in it.
#[test]
fn posix_mapped_log_that_cannot_allocate_is_never_written_again() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("000007.log");
    // Call 0 allocates the first chunk; call 1, the second, fails.
    let env = PosixEnv::with_faults(FailNth::new(1));
    let mut f = env.new_log_file(&path).unwrap();
    let piece = [7u8; 4096];
    let mut appended = 0;
    let e = loop {
        match f.append(&piece) {
            Ok(()) => appended += piece.len(),
            Err(e) => break e,
        }
    };
    assert_eq!(appended, 1 << 20);
    match &e {
        Error::Io { path: p, op, .. } => assert_eq!((p, *op), (&path, "allocate")),
        other => panic!("{other}"),
    }
    for e in [f.flush(), f.append(b"x"), f.sync()] {
        let e = e.unwrap_err().to_string();
        assert!(e.contains("not written again"), "{e}");
    }
    drop(f);
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes.len(), 1 << 20);
    assert!(bytes.iter().all(|&b| b == 7));
}

/// A mapped log whose sync fails is never written again.
#[test]
fn posix_mapped_log_whose_sync_failed_is_never_written_again() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("000009.log");
    // Call 0 allocates; call 1, the sync, fails.
    let env = PosixEnv::with_faults(FailNth::new(1));
    let mut f = env.new_log_file(&path).unwrap();
    f.append(b"abc").unwrap();
    f.flush().unwrap();
    let e = f.sync().unwrap_err();
    assert!(e.to_string().contains("sync"), "{e}");
    f.append(b"def").unwrap_err();
    drop(f);
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(&bytes[..3], b"abc");
    assert!(bytes[3..].iter().all(|&b| b == 0));
}

/// Where the file system cannot allocate space ahead (`fallocate` answers `EOPNOTSUPP`), a
/// log is written with `write` calls: it is exactly as long as its records while open.
#[test]
fn posix_log_on_a_file_system_without_fallocate_is_written_with_write_calls() {
    #[derive(Debug)]
    struct NoFallocate;
    impl crate::env::IoFaults for NoFallocate {
        fn before_allocate(&self, _path: &Path, _len: usize) -> Option<std::io::Error> {
            Some(std::io::Error::from_raw_os_error(nix::libc::EOPNOTSUPP))
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("000011.log");
    let env = PosixEnv::with_faults(std::sync::Arc::new(NoFallocate));
    let (writer, records) = write_log_records(&env, &path);
    assert_eq!(env.file_size(&path).unwrap(), writer.file_len());
    drop(writer);
    assert_eq!(read_log_records(&env, &path), (records, false, false));
}

/// Bytes of disk the file at `path` occupies (allocated blocks).
fn allocated_bytes(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().blocks() * 512
}

/// `reserve` allocates space past the file's end without changing its length (a crash leaves
/// the file as long as what was written), the appends fill it, and dropping the file gives
/// back what they did not.
#[test]
fn posix_reserved_space_keeps_the_length_and_is_given_back_at_drop() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("000012.blob");
    let env = PosixEnv::new();
    let mut f = env.new_writable_file(&path).unwrap();
    f.append(&[1; 100]).unwrap();
    f.reserve(1 << 20);
    f.append(&[2; 100_000]).unwrap();
    f.flush().unwrap();
    assert_eq!(env.file_size(&path).unwrap(), 100_100);
    // Where the file system allocates ahead (ext4, xfs, btrfs, tmpfs), the space is there.
    let probe = std::fs::File::create(tmp.path().join("probe")).unwrap();
    let can_allocate = nix::fcntl::fallocate(
        std::os::fd::AsRawFd::as_raw_fd(&probe),
        nix::fcntl::FallocateFlags::FALLOC_FL_KEEP_SIZE,
        0,
        4096,
    )
    .is_ok();
    if can_allocate {
        let reserved = allocated_bytes(&path);
        assert!(reserved >= 1 << 20, "{reserved} bytes allocated");
    }
    drop(f);
    assert!(
        allocated_bytes(&path) < 200_000,
        "{}",
        allocated_bytes(&path)
    );
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes.len(), 100_100);
    assert!(bytes[..100].iter().all(|&b| b == 1));
    assert!(bytes[100..].iter().all(|&b| b == 2));

    // A file opened to append to reserves from its end, and its drop cuts nothing written.
    let mut f = env.new_appendable_file(&path).unwrap();
    f.reserve(1 << 20);
    f.append(&[3; 10]).unwrap();
    drop(f);
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes.len(), 100_110);
    assert!(bytes[100_100..].iter().all(|&b| b == 3));
    assert!(allocated_bytes(&path) < 200_000);
}

/// A reservation the disk refuses (a full disk, injected below the buffer) is only a hint
/// that went unheeded: the appends go on, and report their own errors.
#[test]
fn posix_refused_reservation_changes_nothing() {
    #[derive(Debug)]
    struct NoRoomAhead;
    impl crate::env::IoFaults for NoRoomAhead {
        fn before_allocate(&self, _path: &Path, _len: usize) -> Option<std::io::Error> {
            Some(std::io::Error::from_raw_os_error(28)) // ENOSPC
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("000013.blob");
    let env = PosixEnv::with_faults(std::sync::Arc::new(NoRoomAhead));
    let mut f = env.new_writable_file(&path).unwrap();
    f.reserve(1 << 20);
    assert!(allocated_bytes(&path) < 1 << 20);
    f.append(&[5; 70_000]).unwrap();
    f.sync().unwrap();
    drop(f);
    assert_eq!(std::fs::read(&path).unwrap(), vec![5; 70_000]);
}

/// A crash image is one instant: a file written after another never shows a write the other
/// does not. (Files were once copied one at a time while writers went on, so an image could
/// hold a log's record without the MANIFEST edit before it, or the reverse: a state no
/// process kill leaves.) Writes alternate between `/db/a` and `/db/z` with files between
/// them in the copy's path order, and every image must show `z` no longer than `a`.
#[test]
fn mem_crash_image_is_one_instant_across_files() {
    let env = MemEnv::new();
    let dir = PathBuf::from("/db");
    env.create_dir_all(&dir).unwrap();
    for i in 0..64 {
        write_file(&env, &dir.join(format!("m{i:02}")), &[0; 4096], false).unwrap();
    }
    let mut a = env.new_writable_file(&dir.join("a")).unwrap();
    let mut z = env.new_writable_file(&dir.join("z")).unwrap();
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        // Stops the writer however the loop below ends (a failed assertion too).
        struct Stop<'a>(&'a std::sync::atomic::AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.store(true, std::sync::atomic::Ordering::Release);
            }
        }
        s.spawn(|| {
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                a.append(b"x").unwrap();
                z.append(b"x").unwrap();
            }
        });
        let _stop = Stop(&done);
        for images in 0..300 {
            let image = env.crash_clone(CrashMode::PROCESS_KILL);
            let a_len = image.file_size(&dir.join("a")).unwrap();
            let z_len = image.file_size(&dir.join("z")).unwrap();
            assert!(
                z_len <= a_len,
                "image {images}: z holds {z_len} bytes, a only {a_len}, though every write \
                 to z follows one to a"
            );
        }
    });
}
