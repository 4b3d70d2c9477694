// SPDX-License-Identifier: MIT OR Apache-2.0
//! Runs the `strata` binary: every command, and every error path, on real databases in
//! temporary directories, including copies of the databases LevelDB 1.23 wrote.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use strata::{Db, Options};
use strata_testkit::{copy_fixture, expected_tsv, project_fixtures, shared_fixtures};

/// Runs `strata` with `args` (and `stdin`, if any).
fn strata_with_input(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run strata");
    if let Some(input) = stdin {
        child.stdin.take().unwrap().write_all(input).unwrap();
    }
    let output = child.wait_with_output().expect("wait for strata");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("panicked") && !stderr.contains("backtrace"),
        "strata {args:?} panicked: {stderr}"
    );
    output
}

fn strata(args: &[&str]) -> Output {
    strata_with_input(args, None)
}

/// Runs a command that must succeed, and returns its stdout.
fn ok(args: &[&str]) -> String {
    let out = strata(args);
    assert!(
        out.status.success(),
        "strata {args:?} failed ({:?}): {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// Runs a command that must fail with `code` and one line on stderr; returns that line.
fn fails(args: &[&str], code: i32) -> String {
    let out = strata(args);
    assert_eq!(
        out.status.code(),
        Some(code),
        "strata {args:?}: stdout {} stderr {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    one_line(&out.stderr)
}

fn one_line(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr).into_owned();
    assert_eq!(text.lines().count(), 1, "not one line: {text:?}");
    assert!(text.starts_with("strata: "), "{text:?}");
    text
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Every file in `dir` (recursively) with its contents.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(snapshot(&path));
        } else {
            files.insert(path.clone(), fs::read(&path).unwrap());
        }
    }
    files
}

/// A database of `n` keys `key00000`.. with values `value-i`, flushed into tables, plus a few
/// writes left in the log.
fn database(n: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        create_if_missing: true,
        write_buffer_size: 64 << 10,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options).unwrap();
    for i in 0..n {
        let key = format!("key{i:05}");
        db.put(key.as_bytes(), format!("value-{i}").as_bytes())
            .unwrap();
    }
    db.compact_range(None, None).unwrap();
    db.put(b"zz-in-the-log", b"1").unwrap();
    dir
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn put_get_delete() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    ok(&["put", p(&db), "apple", "red", "--create"]);
    ok(&["put", p(&db), "pear", "green", "--sync"]);
    assert_eq!(ok(&["get", p(&db), "apple"]), "red\n");
    ok(&["delete", p(&db), "apple"]);
    // A missing key has an exit code of its own (4), apart from errors (1).
    let err = fails(&["get", p(&db), "apple"], 4);
    assert!(err.contains("'apple' not found in"), "{err}");
    // Hex keys read, and hex values printed.
    assert_eq!(ok(&["get", p(&db), "70656172", "--hex"]), "677265656e\n");
    ok(&["put", p(&db), "00ff", "", "--hex"]);
    assert_eq!(ok(&["get", p(&db), "00ff", "--hex"]), "\n");
    // Without --create, a new path is refused, with a hint, and nothing is created.
    let other = dir.path().join("other");
    let err = fails(&["put", p(&other), "k", "v"], 1);
    assert!(err.contains("--create") && err.contains(p(&other)), "{err}");
    assert!(!other.exists());
}

#[test]
fn load_then_export_round_trips_binary_data_through_hex() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    // Keys and values with every byte value, tabs, newlines, empty strings.
    let mut entries = BTreeMap::new();
    for i in 0..=255u8 {
        let key = vec![i, b'\t', 255 - i, b'\n'];
        let value: Vec<u8> = (0..i).map(|j| j.wrapping_mul(i)).collect();
        entries.insert(key, value);
    }
    entries.insert(Vec::new(), b"empty key".to_vec());
    entries.insert(b"empty value".to_vec(), Vec::new());
    let mut input = String::new();
    for (k, v) in entries.iter().rev() {
        input.push_str(&format!("{}\t{}\n", hex(k), hex(v)));
    }
    let file = dir.path().join("input.tsv");
    fs::write(&file, &input).unwrap();
    ok(&[
        "load",
        p(&db),
        p(&file),
        "--hex",
        "--create",
        "--batch",
        "7",
    ]);

    let expected: String = entries
        .iter()
        .map(|(k, v)| format!("{}\t{}\n", hex(k), hex(v)))
        .collect();
    assert_eq!(ok(&["export", p(&db), "--hex"]), expected);
    let exported = dir.path().join("export.tsv");
    ok(&["export", p(&db), p(&exported), "--hex"]);
    assert_eq!(fs::read_to_string(&exported).unwrap(), expected);

    // The export loads into another database (from stdin) with the same contents.
    let copy = dir.path().join("copy");
    let out = strata_with_input(
        &["load", p(&copy), "--hex", "--create"],
        Some(expected.as_bytes()),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reopened = Db::open_read_only(&copy, Options::default()).unwrap();
    let read: BTreeMap<Vec<u8>, Vec<u8>> = reopened.scan().unwrap().map(Result::unwrap).collect();
    assert_eq!(read, entries);

    // Text mode refuses what it cannot print as a line, and says to use --hex.
    let err = fails(&["export", p(&db)], 1);
    assert!(err.contains("use --hex"), "{err}");
    let err = fails(&["scan", p(&db)], 1);
    assert!(err.contains("use --hex"), "{err}");
}

#[test]
fn load_reports_the_bad_line_and_keeps_the_lines_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let input = "a\t1\n\nb\t2 with\ttabs\nno tab here\nc\t3\n";
    let out = strata_with_input(
        &["load", p(&db), "--create", "--batch", "1"],
        Some(input.as_bytes()),
    );
    assert_eq!(out.status.code(), Some(1));
    let err = one_line(&out.stderr);
    assert!(
        err.contains("standard input, line 4: no tab between key and value")
            && err.contains("the 2 entries before it are written"),
        "{err}"
    );
    assert_eq!(ok(&["scan", p(&db)]), "a\t1\nb\t2 with\ttabs\n");

    let bad_hex = dir.path().join("bad.tsv");
    fs::write(&bad_hex, "6b\t76\n6b\tzz\n").unwrap();
    let err = fails(&["load", p(&db), p(&bad_hex), "--hex"], 1);
    assert!(
        err.contains(&format!(
            "{}, line 2: value: z at position 1 is not a hex digit",
            p(&bad_hex)
        )),
        "{err}"
    );
    let not_utf8 = dir.path().join("latin1.tsv");
    fs::write(&not_utf8, b"caf\xe9\tx\n").unwrap();
    let err = fails(&["load", p(&db), p(&not_utf8)], 1);
    assert!(
        err.contains("line 1: key: not UTF-8") && err.contains("--hex"),
        "{err}"
    );
    // A key over the library's limit, in the middle of a batch: it used to fail the whole
    // batch as a bare "invalid argument", dropping the good lines before it unreported.
    let huge = dir.path().join("huge.tsv");
    let mut text = b"h1\tx\nh2\ty\n".to_vec();
    text.extend(std::iter::repeat_n(b'k', strata::MAX_KEY_SIZE + 1));
    text.extend_from_slice(b"\tv\nh3\tz\n");
    fs::write(&huge, &text).unwrap();
    drop(text);
    let err = fails(&["load", p(&db), p(&huge)], 1);
    assert!(
        err.contains(&format!(
            "{}, line 3: key of {} bytes is over the limit of {}; the 2 entries before it are \
             written to {}",
            p(&huge),
            strata::MAX_KEY_SIZE + 1,
            strata::MAX_KEY_SIZE,
            p(&db)
        )),
        "{err}"
    );
    assert_eq!(ok(&["get", p(&db), "h2"]), "y\n");
    fails(&["get", p(&db), "h3"], 4);

    let err = fails(&["load", p(&db), p(&dir.path().join("missing.tsv"))], 5);
    assert!(
        err.contains("cannot open") && err.contains("missing.tsv"),
        "{err}"
    );
}

#[test]
fn scan_selects_orders_limits_and_counts() {
    let dir = database(1000);
    let db = p(dir.path());
    let all = ok(&["scan", db]);
    assert_eq!(all.lines().count(), 1001);
    assert!(all.starts_with("key00000\tvalue-0\nkey00001\tvalue-1\n"));
    assert_eq!(
        ok(&["scan", db, "--from", "key00998"]),
        "key00998\tvalue-998\nkey00999\tvalue-999\nzz-in-the-log\t1\n"
    );
    assert_eq!(
        ok(&["scan", db, "--to", "key00002", "--keys-only"]),
        "key00000\nkey00001\n"
    );
    assert_eq!(
        ok(&[
            "scan",
            db,
            "--prefix",
            "key0099",
            "--reverse",
            "--limit",
            "3",
            "--keys-only"
        ]),
        "key00999\nkey00998\nkey00997\n"
    );
    assert_eq!(ok(&["scan", db, "--prefix", "key001", "--count"]), "100\n");
    assert_eq!(
        ok(&["scan", db, "--from", "key00500", "--to", "key00400", "--count"]),
        "0\n"
    );
    assert_eq!(
        ok(&["scan", db, "--count", "--json"]).trim(),
        r#"{"count":1001}"#
    );
    let json = ok(&["scan", db, "--prefix", "zz", "--json"]);
    let line: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(
        line,
        serde_json::json!({"key": "zz-in-the-log", "value": "1"})
    );
    let json = ok(&[
        "scan",
        db,
        "--prefix",
        "7a7a",
        "--hex",
        "--json",
        "--keys-only",
    ]);
    assert_eq!(
        json.trim(),
        format!(r#"{{"key":"{}"}}"#, hex(b"zz-in-the-log"))
    );
}

#[test]
fn every_leveldb_fixture_scans_to_its_expected_contents() {
    let mut roots = vec![(project_fixtures(), "log-only")];
    for name in ["log-edge", "small", "uncompressed", "with-log"] {
        roots.push((project_fixtures(), name));
    }
    let shared = shared_fixtures();
    if let Some(shared) = &shared {
        roots.push((shared.clone(), "compacted"));
    }
    for (root, name) in roots {
        let copy = copy_fixture(&root, name);
        let before = snapshot(copy.path());
        let scanned = ok(&["scan", p(copy.path()), "--hex"]);
        assert!(
            scanned == expected_tsv(&root, name),
            "fixture {name} scans differently"
        );
        let report = ok(&["check", p(copy.path())]);
        assert!(report.contains(": sound;"), "{name}: {report}");
        assert_eq!(
            snapshot(copy.path()),
            before,
            "{name}: a read changed the database"
        );
    }
}

#[test]
fn commands_that_read_change_nothing() {
    let dir = database(3000);
    let db = p(dir.path());
    let before = snapshot(dir.path());
    let table = before
        .keys()
        .find(|k| k.extension().is_some_and(|e| e == "ldb"))
        .unwrap()
        .clone();
    let log = before
        .keys()
        .find(|k| k.extension().is_some_and(|e| e == "log"))
        .unwrap()
        .clone();
    let manifest = before
        .keys()
        .find(|k| {
            k.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("MANIFEST")
        })
        .unwrap()
        .clone();
    // Many gets of missing keys would charge seeks and start a compaction in a writer.
    for _ in 0..20 {
        let _ = strata(&["get", db, "key00100x"]);
    }
    for args in [
        vec!["get", db, "key00100"],
        vec!["scan", db],
        vec!["scan", db, "--reverse", "--json"],
        vec!["export", db],
        vec!["stats", db],
        vec!["stats", db, "--json"],
        vec!["check", db],
        vec!["check", db, "--json"],
        vec!["dump", p(&table)],
        vec!["dump", p(&log)],
        vec!["dump", p(&manifest)],
        vec!["dump", p(&dir.path().join("CURRENT"))],
    ] {
        ok(&args);
    }
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn stats_describes_levels_and_properties() {
    let dir = database(5000);
    let text = ok(&["stats", p(dir.path())]);
    assert!(text.contains("leveldb.stats:"), "{text}");
    assert!(text.contains("leveldb.sstables:"), "{text}");
    assert!(text.contains("logs           1 ("), "{text}");
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["stats", p(dir.path()), "--json"])).unwrap();
    assert_eq!(json["total"]["entries"], 5000);
    assert_eq!(json["logs"]["operations"], 1);
    assert_eq!(json["blobs"], serde_json::Value::Null);
    assert!(json["total"]["compression_ratio"].as_f64().unwrap() > 1.0);
    let levels = json["levels"].as_array().unwrap();
    assert!(!levels.is_empty());
    let files: u64 = levels.iter().map(|l| l["tables"].as_u64().unwrap()).sum();
    let listed: u64 = (0..7)
        .map(|l| {
            json["properties"][format!("leveldb.num-files-at-level{l}")]
                .as_str()
                .unwrap()
                .parse::<u64>()
                .unwrap()
        })
        .sum();
    assert_eq!(files, listed);
}

#[test]
fn check_finds_damage_names_file_and_offset_and_exits_3() {
    let dir = database(3000);
    let db = p(dir.path());
    let json: serde_json::Value = serde_json::from_str(&ok(&["check", db, "--json"])).unwrap();
    assert_eq!(json["sound"], true);
    let table = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "ldb"))
        .unwrap();
    // The first key of the table, to read it back after the damage.
    let dumped = ok(&["dump", p(&table)]);
    let first_key = dumped
        .lines()
        .find_map(|l| l.strip_prefix("  '")?.split('\'').next())
        .unwrap()
        .to_owned();
    let mut data = fs::read(&table).unwrap();
    data[100] ^= 1;
    fs::write(&table, &data).unwrap();

    let out = strata(&["check", db]);
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(&format!(
            "damaged: {} at offset 0: block checksum mismatch",
            p(&table)
        )),
        "{text}"
    );
    assert!(text.contains("DAMAGED (1 piece)"), "{text}");
    let out = strata(&["check", db, "--json"]);
    assert_eq!(out.status.code(), Some(3));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["sound"], false);
    assert_eq!(json["damage"][0]["file"], p(&table));
    assert_eq!(json["damage"][0]["offset"], 0);

    // A read of the damaged block is an error naming the file and offset, not a wrong value.
    // Corruption met by any command is damage: exit 3, as from check.
    let err = fails(&["get", db, &first_key], 3);
    assert!(
        err.contains(&format!("corruption in {} at offset 0", p(&table))),
        "{err}"
    );
    let err = fails(&["scan", db], 3);
    assert!(err.contains("corruption in"), "{err}");
    // dump shows the damage and exits 3 too.
    let out = strata(&["dump", p(&table)]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stdout).contains("damaged: corruption in"));
}

/// `check` fails where opening fails: without its live log a database does not open, and
/// `check` used to call it sound (exit 0) while `scan` failed.
#[test]
fn check_reports_a_missing_live_log_as_damage() {
    let dir = database(100);
    let db = p(dir.path());
    assert!(ok(&["check", db]).contains(": sound;"));
    let log = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "log"))
        .unwrap();
    fs::remove_file(&log).unwrap();
    let err = one_line(&strata(&["scan", db]).stderr);
    assert!(err.contains(p(&log)), "{err}");
    let out = strata(&["check", db]);
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(&format!(
            "damaged: {} at offset 0: the log the MANIFEST names as live is missing",
            p(&log)
        )),
        "{text}"
    );
}

/// A failed `export FILE` used to leave the part it had written in FILE (replacing what FILE
/// held); now FILE is replaced only by a whole export, and nothing else is left behind.
#[test]
fn a_failed_export_leaves_no_partial_file() {
    let dir = database(3000);
    let db = p(dir.path());
    let out_dir = tempfile::tempdir().unwrap();
    let out = out_dir.path().join("export.tsv");
    // Text mode stops at a key it cannot print: exit 1, no file.
    let binary = tempfile::tempdir().unwrap();
    ok(&["put", p(binary.path()), "7a0a", "31", "--hex", "--create"]);
    ok(&["put", p(binary.path()), "a", "1"]);
    fails(&["export", p(binary.path()), p(&out)], 1);
    assert_eq!(fs::read_dir(out_dir.path()).unwrap().count(), 0);

    // A whole export replaces the file; a damaged table stops the next one (exit 3), and the
    // file keeps the whole export.
    ok(&["export", db, p(&out)]);
    let whole = fs::read(&out).unwrap();
    assert!(whole == ok(&["export", db]).into_bytes());
    let table = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "ldb"))
        .unwrap();
    let mut data = fs::read(&table).unwrap();
    let middle = data.len() / 2;
    data[middle] ^= 0x10;
    fs::write(&table, &data).unwrap();
    let err = fails(&["export", db, p(&out)], 3);
    assert!(err.contains("corruption in"), "{err}");
    assert!(
        fs::read(&out).unwrap() == whole,
        "the failed export changed the file"
    );
    let names: Vec<_> = fs::read_dir(out_dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["export.tsv"]);
}

#[test]
fn repair_rebuilds_a_database_that_will_not_open() {
    let dir = database(2000);
    let db = p(dir.path());
    let before = ok(&["export", db]);
    fs::remove_file(dir.path().join("CURRENT")).unwrap();
    let err = fails(&["scan", db], 1);
    assert!(
        err.contains("not a database") || err.contains("CURRENT"),
        "{err}"
    );
    let out = ok(&["repair", db]);
    assert!(out.starts_with(&format!("repaired {db}: ")), "{out}");
    assert_eq!(ok(&["export", db]), before);
    assert!(ok(&["check", db]).contains("sound"));
}

#[test]
fn compact_moves_everything_down_and_keeps_every_entry() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let input: String = (0..20_000)
        .map(|i| format!("k{i:06}\t{}\n", "v".repeat(i % 50)))
        .collect();
    let file = dir.path().join("in.tsv");
    fs::write(&file, &input).unwrap();
    ok(&[
        "load",
        p(&db),
        p(&file),
        "--create",
        "--no-compression",
        "--bloom-bits",
        "10",
    ]);
    // Compaction rewrites tables with the options of its own open: uncompressed again.
    let out = ok(&["compact", p(&db), "--no-compression"]);
    assert!(out.starts_with(&format!("compacted {}: ", p(&db))), "{out}");
    let json: serde_json::Value = serde_json::from_str(&ok(&["stats", p(&db), "--json"])).unwrap();
    assert_eq!(json["total"]["entries"], 20_000);
    assert_eq!(json["logs"]["operations"], 0, "the log was flushed");
    assert!(json["levels"]
        .as_array()
        .unwrap()
        .iter()
        .all(|l| l["level"] != 0));
    // No compression was asked for: stored bytes equal raw bytes.
    assert_eq!(json["total"]["compression_ratio"], 1.0);
    assert_eq!(ok(&["export", p(&db)]), input);
    ok(&["compact", p(&db), "--from", "k000100", "--to", "k000200"]);
    assert_eq!(ok(&["scan", p(&db), "--count"]), "20000\n");
}

#[test]
fn dump_prints_every_kind_of_file() {
    let fixture = copy_fixture(&project_fixtures(), "small");
    let path = |name: &str| fixture.path().join(name);
    let log = ok(&["dump", p(&path("000004.log"))]);
    assert!(log.contains("@0 batch seq 501, 1 operations"), "{log}");
    assert!(log.contains("  put 'key000500' => 'v000500:"), "{log}");
    let manifest = ok(&["dump", p(&path("MANIFEST-000002"))]);
    assert!(
        manifest.contains("comparator leveldb.BytewiseComparator"),
        "{manifest}"
    );
    assert!(
        manifest.contains("add table 000005 at level 2: 14565 bytes, 'key000000' @ 1 put .. 'key000499' @ 500 put"),
        "{manifest}"
    );
    let table = ok(&["dump", p(&path("000005.ldb"))]);
    assert!(table.contains("footer: metaindex @"), "{table}");
    assert!(
        table.contains("  'key000000' @ 1 put => 'v000000:lzatmouelzat'"),
        "{table}"
    );
    assert!(table.ends_with("500 entries\n"), "{table}");
    let hex_table = ok(&["dump", p(&path("000005.ldb")), "--hex"]);
    assert!(
        hex_table.contains(&format!("  {} @ 1 put", hex(b"key000000"))),
        "{hex_table}"
    );
    assert_eq!(
        ok(&["dump", p(&path("CURRENT"))]).lines().nth(1),
        Some("'MANIFEST-000002\\x0a'")
    );

    // A name that does not say what the file is needs --kind: a usage error until given.
    let renamed = fixture.path().join("table.bin");
    fs::copy(path("000005.ldb"), &renamed).unwrap();
    let err = fails(&["dump", p(&renamed)], 2);
    assert!(err.contains("--kind"), "{err}");
    assert!(ok(&["dump", p(&renamed), "--kind", "table"]).ends_with("500 entries\n"));
    let err = fails(&["dump", p(&fixture.path().join("000099.log"))], 5);
    assert!(err.contains("000099.log"), "{err}");
}

/// `dump` exits 3 for damage only: it used to exit 3 for an I/O error, and 0 for a file of
/// garbage read as a log (no record, so "empty") or for a CURRENT that `check` calls damaged.
#[test]
fn dump_exit_codes_tell_damage_from_io_errors_and_garbage_from_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    // 100 bytes from a fixed xorshift: no log writer wrote them.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let garbage: Vec<u8> = (0..100)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect();
    let log = dir.path().join("000007.log");
    fs::write(&log, &garbage).unwrap();
    let out = strata(&["dump", p(&log)]);
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(&format!("damaged: {} at offset 0: ", p(&log)))
            && text.contains("(100 bytes dropped)"),
        "{text}"
    );
    let manifest = dir.path().join("MANIFEST-000002");
    fs::write(&manifest, &garbage).unwrap();
    assert_eq!(strata(&["dump", p(&manifest)]).status.code(), Some(3));

    // A log whose last record a crash cut short: a note, not damage.
    let fixture = copy_fixture(&project_fixtures(), "small");
    let whole = fs::read(fixture.path().join("000004.log")).unwrap();
    fs::write(&log, &whole[..whole.len() - 5]).unwrap();
    let text = ok(&["dump", p(&log)]);
    assert!(text.contains("torn tail: "), "{text}");

    // A file that cannot be read is an I/O error (5), not damage.
    for name in ["000008.log", "000009.ldb", "000010.blob"] {
        let a_dir = dir.path().join(name);
        fs::create_dir(&a_dir).unwrap();
        let err = fails(&["dump", p(&a_dir)], 5);
        assert!(
            err.contains("I/O error") && err.contains(p(&a_dir)),
            "{err}"
        );
    }

    // CURRENT: damaged when check would call it so, or when it names a missing MANIFEST.
    let current = fixture.path().join("CURRENT");
    ok(&["dump", p(&current)]);
    fs::write(&current, "MANIFEST-000002").unwrap();
    let out = strata(&["dump", p(&current)]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stdout).contains("does not end with a newline"));
    fs::write(&current, "MANIFEST-000099\n").unwrap();
    let out = strata(&["dump", p(&current)]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stdout)
        .contains("names MANIFEST-000099, which does not exist"));
}

#[test]
fn destroy_removes_a_database_and_refuses_anything_else() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain");
    fs::create_dir(&plain).unwrap();
    fs::write(plain.join("notes.txt"), "keep me").unwrap();
    fs::write(plain.join("LOG"), "not a database's").unwrap();
    let err = fails(&["destroy", p(&plain)], 1);
    assert!(
        err.contains("is not a database") && err.contains("nothing deleted"),
        "{err}"
    );
    assert_eq!(fs::read_dir(&plain).unwrap().count(), 2);
    let err = fails(&["repair", p(&plain)], 1);
    assert!(err.contains("is not a database"), "{err}");
    assert_eq!(fs::read_dir(&plain).unwrap().count(), 2);

    let db = dir.path().join("db");
    ok(&["put", p(&db), "k", "v", "--create"]);
    assert_eq!(ok(&["destroy", p(&db)]), format!("destroyed {}\n", p(&db)));
    assert!(!db.exists());
    let err = fails(&["destroy", p(&db)], 1);
    assert!(err.contains("does not exist"), "{err}");
}

/// `destroy` used to delete any file a database could own (a `.log`, `LOG`) in a directory
/// that is not a database, and the directory with them when nothing else was there.
#[test]
fn destroy_deletes_nothing_of_a_directory_that_is_not_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    fs::create_dir(&logs).unwrap();
    fs::write(logs.join("000001.log"), "an application's log").unwrap();
    fs::write(logs.join("LOG"), "another").unwrap();
    let before = snapshot(&logs);
    let err = fails(&["destroy", p(&logs)], 1);
    assert!(
        err.contains(&format!(
            "{} is not a database: it has no CURRENT file",
            p(&logs)
        )),
        "{err}"
    );
    assert_eq!(snapshot(&logs), before);

    // A CURRENT that names no MANIFEST, beside a table: not a database either.
    let remains = dir.path().join("remains");
    fs::create_dir(&remains).unwrap();
    fs::write(remains.join("CURRENT"), "MANIFEST-000009\n").unwrap();
    fs::write(remains.join("000005.sst"), "a table").unwrap();
    let before = snapshot(&remains);
    let err = fails(&["destroy", p(&remains)], 1);
    assert!(
        err.contains("CURRENT names a MANIFEST that does not exist")
            && err.contains("nothing deleted"),
        "{err}"
    );
    assert_eq!(snapshot(&remains), before);

    // A database beside files of its owner's: the database goes, the rest stays, and is named.
    let db = dir.path().join("db");
    ok(&["put", p(&db), "k", "v", "--create"]);
    fs::write(db.join("notes.txt"), "mine").unwrap();
    fs::create_dir(db.join("lost")).unwrap();
    let out = ok(&["destroy", p(&db)]);
    assert_eq!(
        out,
        format!(
            "destroyed the database in {}; kept the directory, which holds files that are not \
             the database's: lost/, notes.txt\n",
            p(&db)
        )
    );
    let mut left: Vec<_> = fs::read_dir(&db)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["lost", "notes.txt"]);
}

#[test]
fn paths_that_are_not_databases_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    fs::create_dir(&empty).unwrap();
    let file = dir.path().join("file.txt");
    fs::write(&file, "text").unwrap();
    let missing = dir.path().join("missing");
    for path in [&empty, &file, &missing] {
        for command in ["get", "scan", "export", "stats", "check"] {
            let mut args = vec![command, p(path)];
            if command == "get" {
                args.push("k");
            }
            let err = fails(&args, 1);
            assert!(err.contains(p(path)), "{command} {}: {err}", path.display());
        }
    }
    assert_eq!(
        fs::read_dir(&empty).unwrap().count(),
        0,
        "nothing was created"
    );
    assert!(!missing.exists());
}

/// A command that changes a database, run without --create on a directory that holds none,
/// fails before it creates anything there (it used to leave LOCK and LOG behind).
#[test]
fn write_commands_create_nothing_where_there_is_no_database() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    fs::create_dir(&empty).unwrap();
    let input = dir.path().join("input.tsv");
    fs::write(&input, "k\tv\n").unwrap();
    let db = p(&empty);
    for args in [
        vec!["put", db, "k", "v"],
        vec!["delete", db, "k"],
        vec!["load", db, p(&input)],
        vec!["compact", db],
        vec!["repair", db],
    ] {
        let err = fails(&args, 1);
        assert!(
            err.contains(&format!("{db} is not a database")),
            "{args:?}: {err}"
        );
        let left: Vec<_> = fs::read_dir(&empty).unwrap().collect();
        assert!(left.is_empty(), "{args:?} left {left:?}");
    }
    let err = fails(&["put", db, "k", "v"], 1);
    assert!(
        err.ends_with(
            "it has no CURRENT file (create_if_missing is not set); pass --create to \
                       create a new database\n"
        ),
        "{err}"
    );
    // `destroy` of an empty directory removes it, as LevelDB's DestroyDB does; one holding
    // a file that is not the database's is refused and keeps it.
    fs::write(empty.join("notes.txt"), "mine").unwrap();
    let err = fails(&["destroy", db], 1);
    assert!(err.contains(&format!("{db} is not a database")), "{err}");
    fs::remove_file(empty.join("notes.txt")).unwrap();
    ok(&["destroy", db]);
    assert!(!empty.exists());
}

#[test]
fn writing_a_database_another_process_writes_is_refused() {
    let dir = database(100);
    let db = p(dir.path());
    // This test's process holds the database open, as another program would. Reading it
    // works (`read_commands_work_beside_a_writer`); writing does not.
    let open = Db::open(dir.path(), Options::default()).unwrap();
    for args in [
        vec!["put", db, "k", "v"],
        vec!["compact", db],
        vec!["repair", db],
    ] {
        let err = fails(&args, 1);
        assert!(
            err.contains("database is locked") && err.contains(&format!("{db}/LOCK")),
            "{args:?}: {err}"
        );
    }
    drop(open);
    assert_eq!(ok(&["get", db, "key00001"]), "value-1\n");
}

/// Each kind of failure has its exit code, and --help lists them: a missing key (4) is not an
/// error (1), an I/O error (5) is not damage (3).
#[test]
fn exit_codes_tell_not_found_failure_damage_and_io_apart() {
    let dir = database(10);
    let db = p(dir.path());
    fails(&["get", db, "absent"], 4);
    let err = fails(&["get", &format!("{db}/nowhere"), "k"], 1);
    assert!(err.contains("is not a database"), "{err}");
    let out_dir = tempfile::tempdir().unwrap();
    let unwritable = out_dir.path().join("no-such-dir").join("out.tsv");
    let err = fails(&["export", db, p(&unwritable)], 5);
    assert!(err.contains(p(&unwritable)), "{err}");
    let help = ok(&["--help"]);
    for code in [
        "0 success",
        "1 the command failed",
        "2 usage error",
        "3 damage",
        "4 not found",
        "5 I/O error",
    ] {
        assert!(
            help.contains(code),
            "--help does not document {code:?}: {help}"
        );
    }
}

#[test]
fn usage_errors_exit_2_with_one_line() {
    let err = fails(&["get", "/tmp"], 2);
    assert!(
        err.contains("<KEY>") && err.contains("usage: strata get"),
        "{err}"
    );
    let err = fails(&["frobnicate"], 2);
    assert!(err.contains("frobnicate"), "{err}");
    let err = fails(&["scan", "/tmp", "--limit", "many"], 2);
    assert!(err.contains("many"), "{err}");
    let err = fails(&["get", "/tmp", "abc", "--hex"], 2);
    assert!(err.contains("odd number of hex digits"), "{err}");
    let err = fails(&["scan", "/tmp", "--from", "xy", "--hex"], 2);
    assert!(err.contains("--from \"xy\" is not hex"), "{err}");
    let err = fails(&["stats", "/tmp", "--cache-size", "lots"], 2);
    assert!(err.contains("not a size in bytes"), "{err}");
    // No arguments: the help, on stderr, exit 2.
    let out = strata(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Usage: strata"));
    assert!(ok(&["--help"]).contains("Commands:"));
}

#[test]
fn a_reader_that_stops_early_ends_the_scan_quietly() {
    let dir = database(20_000);
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["scan", p(dir.path())])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert_eq!(first, "key00000\tvalue-0\n");
    // The read end is closed here, with most of the output unread.
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

/// A database with blob files (key-value separation): `check` reads them, `stats` counts them,
/// `dump` prints a blob file's records and the pointers in logs and tables.
#[test]
fn the_tool_understands_blob_files() {
    let dir = tempfile::tempdir().unwrap();
    let options = strata::Options {
        create_if_missing: true,
        blob_threshold: Some(1000),
        ..strata::Options::default()
    };
    let db = strata::Db::open(dir.path(), options).unwrap();
    for i in 0..5u8 {
        db.put([b'k', b'0' + i], vec![b'x'; 3000]).unwrap();
    }
    db.compact_range(None, None).unwrap();
    db.put(b"late", vec![b'y'; 5000]).unwrap();
    drop(db);
    ok(&["check", p(dir.path())]);
    let text = ok(&["stats", p(dir.path())]);
    assert!(text.contains("blob files     "), "{text}");
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["stats", p(dir.path()), "--json"])).unwrap();
    // The five values of 3000 bytes in the flushed file. The late value's file is not in the
    // version yet, and a read-only open writes no blob file, so it lists only the first.
    assert_eq!(json["blobs"]["value_bytes"], 5 * 3000, "{json:#}");
    assert_eq!(json["blobs"]["files"], 1, "{json:#}");
    assert!(json["memtable_bytes"].as_u64().unwrap() > 0, "{json:#}");
    let mut names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let blob = names.iter().find(|n| n.ends_with(".blob")).unwrap();
    let text = ok(&["dump", p(&dir.path().join(blob))]);
    assert!(text.contains("'k0' => 'xxxx"), "{text}");
    assert!(text.contains("5 records"), "{text}");
    let table = names.iter().find(|n| n.ends_with(".ldb")).unwrap();
    let text = ok(&["dump", p(&dir.path().join(table))]);
    assert!(
        text.contains("blob") && text.contains("(in blob file"),
        "{text}"
    );
    let log = names.iter().rev().find(|n| n.ends_with(".log")).unwrap();
    let text = ok(&["dump", p(&dir.path().join(log))]);
    assert!(text.contains("put 'late' => (in blob file"), "{text}");
}

#[test]
fn checkpoint_copies_a_database_that_opens_and_changes_nothing_in_it() {
    let source = database(3_000);
    let before = snapshot(source.path());
    let tmp = tempfile::tempdir().unwrap();
    let dest = tmp.path().join("backup");
    let out = ok(&["checkpoint", p(source.path()), p(&dest)]);
    assert!(
        out.starts_with(&format!(
            "checkpoint of {} made in {}: ",
            p(source.path()),
            p(&dest)
        )),
        "{out}"
    );
    assert_eq!(snapshot(source.path()), before, "the source changed");
    // The copy holds the tables' entries and the one left in the log.
    assert_eq!(ok(&["scan", p(&dest), "--count"]), "3001\n");
    assert_eq!(ok(&["get", p(&dest), "zz-in-the-log"]), "1\n");
    ok(&["check", p(&dest)]);
    // It is a database of its own: writing to it leaves the source alone.
    ok(&["put", p(&dest), "only-in-copy", "v"]);
    fails(&["get", p(source.path()), "only-in-copy"], 4);

    // A non-empty destination, a missing parent and a missing database: one line, exit 1.
    let err = fails(&["checkpoint", p(source.path()), p(&dest)], 1);
    assert!(err.contains(p(&dest)) && err.contains("not empty"), "{err}");
    let orphan = tmp.path().join("no").join("dest");
    let err = fails(&["checkpoint", p(source.path()), p(&orphan)], 1);
    assert!(err.contains("parent"), "{err}");
    let missing = tmp.path().join("missing");
    let err = fails(&["checkpoint", p(&missing), p(&tmp.path().join("d2"))], 1);
    assert!(
        err.contains(&format!("{} is not a database", p(&missing))),
        "{err}"
    );
    assert!(!tmp.path().join("d2").exists());
    fails(&["checkpoint", p(source.path())], 2);
}

/// The read commands work on a database a program holds (this test's writer), say which
/// state they read, and see the writes made before they ran.
#[test]
fn read_commands_work_beside_a_writer() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let writer = Db::open(
        &db,
        Options {
            create_if_missing: true,
            write_buffer_size: 64 << 10,
            ..Options::default()
        },
    )
    .unwrap();
    for i in 0..3000 {
        writer
            .put(format!("k{i:05}"), format!("v{i}-{}", "x".repeat(100)))
            .unwrap();
    }
    writer.put("last", "1").unwrap();
    let path = db.to_str().unwrap();
    let said = |out: &Output| {
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        stderr
    };
    let get = strata(&["get", path, "last"]);
    assert!(said(&get).contains("read the state as of sequence 3001 (a writer holds the database)"));
    assert_eq!(String::from_utf8_lossy(&get.stdout).trim(), "1");
    let scan = strata(&["scan", path, "--count"]);
    said(&scan);
    assert_eq!(String::from_utf8_lossy(&scan.stdout).trim(), "3001");
    let export = strata(&["export", path]);
    said(&export);
    assert_eq!(
        String::from_utf8_lossy(&export.stdout).lines().count(),
        3001
    );
    let stats = strata(&["stats", path]);
    assert!(said(&stats).contains("a writer holds the database"));
    let check = strata(&["check", path]);
    assert!(said(&check).contains("checked beside a writer"));
    writer.put("last", "2").unwrap();
    let get = strata(&["get", path, "last"]);
    said(&get);
    assert_eq!(String::from_utf8_lossy(&get.stdout).trim(), "2");
    // The writer's lock is untouched: a second writer is still refused.
    assert_eq!(strata(&["put", path, "k", "v"]).status.code(), Some(1));
}
