// SPDX-License-Identifier: MIT OR Apache-2.0
//! Test support shared by strata's crates (strata's integration tests, strata-cli's tests,
//! db_bench and the crash loop): finding and copying LevelDB fixtures, reading their expected
//! contents, small deterministic random numbers, a panic counter and a watchdog, the table
//! numbers of a database, numbered writes recognisable after a crash ([`writes`]), and, with the
//! `leveldb` feature, LevelDB 1.23 itself through its C API ([`leveldb`]).

#[cfg(feature = "leveldb")]
pub mod leveldb;
pub mod writes;

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;

/// SplitMix64's output for state `x`: small deterministic random numbers (`splitmix64(x)`
/// of successive or unrelated `x` look independent).
pub fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The fixtures committed with the project (in strata's tests). Never open them in place:
/// [`copy_fixture`] first.
pub fn project_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../strata/tests/fixtures/leveldb-1.23")
}

/// The shared fixtures beside the project (for the large `compacted` one), if present.
///
/// In CI (`CI` set) a missing shared directory is an error, so the test cannot pass by skipping.
pub fn shared_fixtures() -> Option<PathBuf> {
    let dir = match std::env::var_os("STRATA_SHARED_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared"),
    }
    .join("fixtures/leveldb-1.23");
    if dir.join("compacted").is_dir() {
        return Some(dir);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must have the shared fixtures at {}",
        dir.display()
    );
    eprintln!(
        "note: {} not found; skipping the shared fixture",
        dir.display()
    );
    None
}

/// Copies fixture directory `name` from `root` into a new temporary directory: the fixture
/// itself is never opened.
pub fn copy_fixture(root: &Path, name: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("tempdir");
    for entry in fs::read_dir(root.join(name)).expect("fixture dir") {
        let entry = entry.expect("entry");
        let dest = tmp.path().join(entry.file_name());
        fs::copy(entry.path(), &dest).expect("copy");
        let mut perms = fs::metadata(&dest).expect("meta").permissions();
        #[allow(clippy::permissions_set_readonly_false)]
        perms.set_readonly(false);
        fs::set_permissions(&dest, perms).expect("chmod");
    }
    tmp
}

pub fn hex_decode(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd hex length");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// The text of `<name>.expected.tsv` (or `.tsv.gz`) in `root`: a line per entry, the key and
/// the value in hex, separated by a tab.
pub fn expected_tsv(root: &Path, name: &str) -> String {
    let plain = root.join(format!("{name}.expected.tsv"));
    if plain.exists() {
        return fs::read_to_string(plain).expect("read tsv");
    }
    let gz = fs::File::open(root.join(format!("{name}.expected.tsv.gz"))).expect("open gz");
    let mut s = String::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_string(&mut s)
        .expect("gunzip");
    s
}

/// Reads `<name>.expected.tsv` (or `.tsv.gz`) from `root`.
pub fn expected_contents(root: &Path, name: &str) -> BTreeMap<Vec<u8>, Vec<u8>> {
    expected_tsv(root, name)
        .lines()
        .map(|line| {
            let (k, v) = line.split_once('\t').expect("tab");
            (hex_decode(k), hex_decode(v))
        })
        .collect()
}

/// Panics seen in any thread (a background thread's too) since [`count_panics`] was first
/// called in this test binary: a test asserting that none happened shares its binary only with
/// tests that do not panic on purpose.
pub static PANICS: AtomicU64 = AtomicU64::new(0);

/// Starts counting panics in [`PANICS`], keeping the default report.
pub fn count_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            default(info);
        }));
    });
}

/// The number of panics counted so far.
pub fn panics() -> u64 {
    PANICS.load(Ordering::SeqCst)
}

/// Runs `f` on another thread and waits at most `limit` for it: `Err` naming `what` if it
/// did not finish (it hung; the thread is left behind). A panic in `f` is also `Err`.
pub fn within<T: Send + 'static>(
    what: &str,
    limit: std::time::Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit)
        .map_err(|_| format!("{what}: did not finish within {limit:?} (hung or panicked)"))
}

/// The table numbers the current version lists (`leveldb.sstables`), sorted.
pub fn version_tables(db: &strata::Db) -> Vec<u64> {
    let listed = db.property("leveldb.sstables").unwrap_or_default();
    let mut live: Vec<u64> = listed
        .lines()
        .filter_map(|line| line.trim_start().split(':').next()?.parse().ok())
        .collect();
    live.sort_unstable();
    live
}

/// The table numbers among file `names` (`NNNNNN.ldb`), sorted.
pub fn table_numbers<S: AsRef<str>>(names: impl IntoIterator<Item = S>) -> Vec<u64> {
    let mut numbers: Vec<u64> = names
        .into_iter()
        .filter_map(|name| name.as_ref().strip_suffix(".ldb")?.parse().ok())
        .collect();
    numbers.sort_unstable();
    numbers
}
