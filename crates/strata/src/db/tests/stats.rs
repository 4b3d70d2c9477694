// SPDX-License-Identifier: MIT OR Apache-2.0
//! `Db::stats`: each counter moves when its work happens, and the text properties say what the
//! struct says.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::*;
use crate::batch::BATCH_HEADER_LEN;
use crate::env::{FaultEnv, FileOp, OpKind};

/// The bytes `user_bytes_written` counts for a batch of one put.
fn put_bytes(key: &[u8], value: &[u8]) -> u64 {
    let mut batch = WriteBatch::new();
    batch.put(key, value);
    (batch.approximate_size() - BATCH_HEADER_LEN) as u64
}

#[test]
fn writes_count_batches_log_bytes_and_syncs() {
    let env = MemEnv::new();
    let db = Db::open(DIR, options(&env)).unwrap();
    let before = db.stats();
    assert_eq!((before.write_count, before.user_bytes_written), (0, 0));
    let mut user = 0;
    for i in 0..10u32 {
        let key = format!("key{i}");
        db.put(&key, [1u8; 100]).unwrap();
        user += put_bytes(key.as_bytes(), &[1; 100]);
    }
    let stats = db.stats();
    assert_eq!(stats.write_count, 10);
    assert_eq!(stats.user_bytes_written, user);
    // Each write is one log record: a 7-byte header, the 12-byte batch header, the entry.
    assert_eq!(stats.wal_bytes_written, user + 10 * (7 + 12));
    assert_eq!(stats.wal_sync_count, 0);
    db.put_opt("synced", "v", &WriteOptions { sync: true })
        .unwrap();
    let stats = db.stats();
    assert_eq!((stats.write_count, stats.wal_sync_count), (11, 1));
    // Refused writes count nowhere.
    let mut too_big = WriteBatch::new();
    too_big.put(vec![0u8; MAX_KEY_SIZE + 1], b"");
    assert!(db.write(too_big).is_err());
    assert_eq!(db.stats().write_count, 11);
    assert!(db.stats().memtable_bytes > 0);
    assert_eq!(db.stats().immutable_memtable_bytes, 0);
}

#[test]
fn flushes_and_compactions_move_their_counters() {
    let env = MemEnv::new();
    let opts = Options {
        compression: crate::table::Compression::None,
        ..small_options(&env)
    };
    let db = Db::open(DIR, opts).unwrap();
    assert_eq!(db.stats().flush_count, 0);
    // Two rounds over the same keys: the second round's tables overlap the first's, so the
    // manual compaction merges them and drops the overwritten entries.
    for round in 0..2u8 {
        for i in 0..3000u32 {
            db.put(format!("{i:05}"), [round; 100]).unwrap();
        }
    }
    db.compact_range(None, None).unwrap();
    let s = db.stats();
    assert!(s.flush_count >= 2, "{s:?}");
    assert!(s.flush_bytes_written > 0);
    assert!(s.compaction_count >= 1, "{s:?}");
    assert!(
        s.compaction_input_bytes > s.compaction_output_bytes,
        "{s:?}"
    );
    // The per-level figures add up to the totals.
    let sum = |f: fn(&LevelStats) -> u64| s.levels.iter().map(f).sum::<u64>();
    assert_eq!(sum(|l| l.read_bytes), s.compaction_input_bytes);
    assert_eq!(
        sum(|l| l.written_bytes),
        s.flush_bytes_written + s.compaction_output_bytes
    );
    assert_eq!(
        sum(|l| l.compaction_count),
        s.flush_count + s.compaction_count
    );
    let level_time: Duration = s.levels.iter().map(|l| l.compaction_time).sum();
    assert!(level_time >= s.compaction_time);
    // The live tables are those of the version, and hold the 3000 newest entries.
    let version = db.inner.view.load().version.clone();
    for (level, l) in s.levels.iter().enumerate() {
        assert_eq!(l.file_count as usize, version.files[level].len());
        let bytes: u64 = version.files[level].iter().map(|f| f.file_size).sum();
        assert_eq!(l.size_bytes, bytes);
    }
    assert!(sum(|l| l.size_bytes) > 3000 * 100);
    assert_eq!(
        s.memtable_bytes,
        db.inner.view.load().mem.approximate_memory_usage() as u64
    );
}

#[test]
fn repeated_reads_hit_the_caches() {
    let env = MemEnv::new();
    let db = Db::open(DIR, options(&env)).unwrap();
    db.put("k", "v").unwrap();
    db.compact_range(None, None).unwrap();
    let before = db.stats();
    for _ in 0..10 {
        assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"v"[..]));
    }
    let after = db.stats();
    let (b, a) = (&before.block_cache, &after.block_cache);
    // The first two reads miss the data block (the first is remembered by the door keeper,
    // the second is admitted); the other eight find it.
    assert_eq!(a.hit_count - b.hit_count, 8, "{b:?} -> {a:?}");
    assert_eq!(a.miss_count - b.miss_count, 2, "{b:?} -> {a:?}");
    assert_eq!(a.deferred_count - b.deferred_count, 1, "{b:?} -> {a:?}");
    assert_eq!(a.insert_count - b.insert_count, 1, "{b:?} -> {a:?}");
    // Its second hit replaced it by its search form; the later hits read that.
    assert_eq!(
        a.search_form_count - b.search_form_count,
        1,
        "{b:?} -> {a:?}"
    );
    assert!(
        a.usage_bytes > 0 && a.capacity_bytes == Options::default().block_cache_capacity as u64
    );
    let inserts = a.insert_count;
    // The first read pins the table in the version's file (a table cache hit: the flush
    // opened it); the nine after it read the pinned table without a lookup.
    let (b, a) = (&before.table_cache, &after.table_cache);
    assert_eq!(a.hit_count - b.hit_count, 1, "{b:?} -> {a:?}");
    assert_eq!((a.open_count, a.pinned_count), (1, 1), "{a:?}");
    // Reads that do not fill the cache insert nothing, nor offer anything: a block not read
    // before, read twice, stays out.
    let uncached = ReadOptions {
        fill_cache: false,
        ..ReadOptions::default()
    };
    let deferred = db.stats().block_cache.deferred_count;
    db.put("l", "w").unwrap();
    db.compact_range(None, None).unwrap();
    for _ in 0..2 {
        assert_eq!(
            db.get_opt("l", &uncached).unwrap().as_deref(),
            Some(&b"w"[..])
        );
    }
    let cache = db.stats().block_cache;
    assert_eq!(
        (cache.insert_count, cache.deferred_count),
        (inserts, deferred)
    );
    // Nor do they make search forms of the blocks they hit: a block cached and hit once by a
    // read that fills the cache is hit again by ones that do not, and stays as stored, until
    // a read that fills the cache hits it.
    db.put("m", "x").unwrap();
    db.compact_range(None, None).unwrap();
    let forms = db.stats().block_cache.search_form_count;
    let hits = db.stats().block_cache.hit_count;
    for _ in 0..3 {
        assert_eq!(db.get("m").unwrap().as_deref(), Some(&b"x"[..]));
    }
    assert_eq!(
        db.stats().block_cache.hit_count - hits,
        1,
        "missed, cached, hit once"
    );
    for _ in 0..4 {
        assert_eq!(
            db.get_opt("m", &uncached).unwrap().as_deref(),
            Some(&b"x"[..])
        );
    }
    assert_eq!(db.stats().block_cache.search_form_count, forms);
    assert_eq!(db.get("m").unwrap().as_deref(), Some(&b"x"[..]));
    assert_eq!(db.stats().block_cache.search_form_count - forms, 1);
}

#[test]
fn snapshots_and_blob_files_are_counted() {
    let env = MemEnv::new();
    let db = Db::open(DIR, options(&env)).unwrap();
    assert_eq!(db.stats().blobs, None);
    let (s1, s2) = (db.snapshot(), db.snapshot());
    assert_eq!(db.stats().snapshot_count, 2);
    drop(s1);
    assert_eq!(db.stats().snapshot_count, 1);
    drop(s2);
    assert_eq!(db.stats().snapshot_count, 0);
    drop(db);

    let opts = Options {
        blob_threshold: Some(1024),
        ..options(&env)
    };
    let db = Db::open(DIR, opts).unwrap();
    assert_eq!(db.stats().blobs, Some(BlobStats::default()));
    db.put("big", [5u8; 5000]).unwrap();
    let blobs = db.stats().blobs.unwrap();
    assert_eq!((blobs.file_count, blobs.pending_file_count), (1, 1));
    assert_eq!(blobs.value_bytes, 5000);
    // The snapshot keeps the overwritten value's file in the version (the collector may
    // rewrite it, but not remove it while the snapshot may read it).
    let _snapshot = db.snapshot();
    db.put("big", "small now").unwrap();
    db.compact_range(None, None).unwrap();
    let blobs = db.stats().blobs.unwrap();
    assert_eq!(blobs.pending_file_count, 0, "{blobs:?}");
    assert!(blobs.garbage_bytes >= 5000, "{blobs:?}");
}

/// The lines of `leveldb.stats` below its header: level, files, size, time, read, write.
fn parse_level_stats(text: &str) -> Vec<(usize, u64, [f64; 4])> {
    text.lines()
        .skip(3)
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(fields.len(), 6, "{line:?}");
            let n = |i: usize| fields[i].parse::<f64>().unwrap();
            (
                fields[0].parse().unwrap(),
                fields[1].parse().unwrap(),
                [n(2), n(3), n(4), n(5)],
            )
        })
        .collect()
}

#[test]
fn leveldb_properties_say_what_the_struct_says() {
    let env = MemEnv::new();
    let opts = Options {
        compression: crate::table::Compression::None,
        write_buffer_size: 1 << 20,
        ..options(&env)
    };
    let db = Db::open(DIR, opts).unwrap();
    for round in 0..2u8 {
        for i in 0..20_000u32 {
            db.put(format!("{i:06}"), [round; 100]).unwrap();
        }
    }
    db.compact_range(None, None).unwrap();
    db.put("in the memtable", "v").unwrap();
    db.get("000001").unwrap();
    db.get("000001").unwrap(); // a block in the cache: admitted at its second miss
    let s = db.stats();
    let text = db.property("leveldb.stats").unwrap();
    let lines = parse_level_stats(&text);
    let mb = |bytes: u64| (bytes as f64 / 1_048_576.0).round();
    let shown: Vec<usize> = lines.iter().map(|l| l.0).collect();
    let expected: Vec<usize> = (0..NUM_LEVELS)
        .filter(|&l| s.levels[l].file_count > 0 || s.levels[l].compaction_time.as_micros() > 0)
        .collect();
    assert_eq!(shown, expected, "{text}");
    assert!(
        lines.iter().any(|l| l.2[0] >= 2.0),
        "megabytes of tables: {text}"
    );
    for (level, files, [size, secs, read, write]) in lines {
        let l = &s.levels[level];
        assert_eq!(files, l.file_count, "{text}");
        assert_eq!(size, mb(l.size_bytes), "{text}");
        assert_eq!(secs, (l.compaction_time.as_secs_f64()).round(), "{text}");
        assert_eq!(read, mb(l.read_bytes), "{text}");
        assert_eq!(write, mb(l.written_bytes), "{text}");
    }
    // The file counts, against each level's property and the tables `leveldb.sstables` lists.
    let sstables = db.property("leveldb.sstables").unwrap();
    for (level, chunk) in sstables.split("--- level ").skip(1).enumerate() {
        let listed = chunk.lines().skip(1).count() as u64;
        let property = db
            .property(&format!("leveldb.num-files-at-level{level}"))
            .unwrap();
        assert_eq!(property, s.levels[level].file_count.to_string());
        assert_eq!(listed, s.levels[level].file_count, "{sstables}");
    }
    let memory: u64 = db
        .property("leveldb.approximate-memory-usage")
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(memory, s.approximate_memory_usage_bytes());
    assert!(memory > s.memtable_bytes + s.immutable_memtable_bytes);
}

/// A FaultEnv over `env` that holds the background thread before it syncs a table while
/// `gate` is closed (true).
fn gated_env(env: &MemEnv, gate: &Arc<AtomicBool>) -> Arc<FaultEnv<MemEnv>> {
    let fault = Arc::new(FaultEnv::new(env.clone()));
    let gate = gate.clone();
    fault.set_observer(Some(Arc::new(move |op: &FileOp<'_>| {
        let background = std::thread::current().name() == Some("strata-background");
        let table = op.path.extension().is_some_and(|e| e == "ldb");
        if background && table && op.kind == OpKind::Sync {
            while gate.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    })));
    fault
}

/// Opens the gate when dropped, so that a failed assertion does not leave the background
/// thread held (and the database's drop waiting for it forever).
struct OpenOnDrop(Arc<AtomicBool>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

#[test]
fn a_full_memtable_behind_a_slow_flush_counts_a_memtable_stop() {
    let env = MemEnv::new();
    let gate = Arc::new(AtomicBool::new(true));
    let opts = Options {
        write_buffer_size: 16 << 10,
        ..options(&env)
    }
    .with_env(gated_env(&env, &gate));
    let db = Db::open(DIR, opts).unwrap();
    let _open = OpenOnDrop(gate.clone());
    std::thread::scope(|s| {
        let writer = s.spawn(|| {
            // The first full memtable's flush is held; the second fills and must wait.
            for i in 0..2000u32 {
                db.put(format!("{i:05}"), [0u8; 100]).unwrap();
            }
        });
        std::thread::sleep(Duration::from_millis(100));
        gate.store(false, Ordering::Release);
        writer.join().unwrap();
    });
    let stalls = db.stats().stalls;
    assert!(stalls.memtable_stop_count >= 1, "{stalls:?}");
    assert!(
        stalls.memtable_stop_time >= Duration::from_millis(10),
        "{stalls:?}"
    );
    assert_eq!((stalls.l0_stop_count, stalls.l0_slowdown_count), (0, 0));
}

/// Leaves in `env` a database whose log holds `entries` writes of about 110 bytes: a reopen
/// with a write buffer of 32 KiB replays them into a level-0 table for each 385 or so.
fn log_of_level0_tables(env: &MemEnv, entries: u32) {
    let opts = Options {
        write_buffer_size: 64 << 20,
        ..options(env)
    };
    let db = Db::open(DIR, opts).unwrap();
    // Keys in a scattered order, so that every table spans the key range: the tables
    // overlap, and a compaction must merge them (no table moves down alone).
    let n = entries;
    for i in 0..n {
        db.put(
            format!("{:06}", (u64::from(i) * 7919) % u64::from(n)),
            [0u8; 100],
        )
        .unwrap();
    }
}

/// Opens a database whose log replays `entries` writes into level-0 tables, with the level-0
/// `(slowdown, stop)` triggers given and compaction held back; checks that the level-0 table
/// count lies in `l0`, writes one small entry, and returns the stalls counted.
fn stalls_of_one_write(
    entries: u32,
    (slowdown, stop): (usize, usize),
    l0: std::ops::Range<usize>,
) -> crate::db::WriteStalls {
    let env = MemEnv::new();
    log_of_level0_tables(&env, entries);
    let gate = Arc::new(AtomicBool::new(true));
    let opts = Options {
        write_buffer_size: 32 << 10,
        l0_slowdown_writes_trigger: slowdown,
        l0_stop_writes_trigger: stop,
        ..options(&env)
    }
    .with_env(gated_env(&env, &gate));
    let db = Db::open(DIR, opts).unwrap();
    let _open = OpenOnDrop(gate.clone());
    let count = db.stats().levels[0].file_count as usize;
    assert!(
        l0.contains(&count),
        "{count} level-0 files, expected {l0:?}"
    );
    db.put("k", "v").unwrap();
    gate.store(false, Ordering::Release);
    db.stats().stalls
}

/// LevelDB's level-0 triggers (strata's defaults are RocksDB's, 20 and 36).
const LEVELDB_TRIGGERS: (usize, usize) = (8, 12);

#[test]
fn level0_files_past_the_slowdown_trigger_delay_a_write() {
    let stalls = stalls_of_one_write(3800, LEVELDB_TRIGGERS, 8..12);
    assert_eq!(stalls.l0_slowdown_count, 1, "{stalls:?}");
    assert!(stalls.l0_slowdown_time >= Duration::from_millis(1));
    assert_eq!(stalls.l0_stop_count, 0);
}

#[test]
fn level0_files_at_the_stop_trigger_stop_writes_until_compaction() {
    let env = MemEnv::new();
    log_of_level0_tables(&env, 6000);
    let gate = Arc::new(AtomicBool::new(true));
    let opts = Options {
        write_buffer_size: 32 << 10,
        l0_slowdown_writes_trigger: LEVELDB_TRIGGERS.0,
        l0_stop_writes_trigger: LEVELDB_TRIGGERS.1,
        ..options(&env)
    }
    .with_env(gated_env(&env, &gate));
    let db = Db::open(DIR, opts).unwrap();
    let _open = OpenOnDrop(gate.clone());
    assert!(db.stats().levels[0].file_count as usize >= 12);
    std::thread::scope(|s| {
        // Large values, to fill the memtable in a few writes (each is slowed down by 1 ms):
        // the switch to a new memtable is what waits for level 0.
        let writer = s.spawn(|| {
            for i in 0..40u32 {
                db.put(format!("new{i:05}"), [0u8; 4000]).unwrap();
            }
        });
        std::thread::sleep(Duration::from_millis(100));
        gate.store(false, Ordering::Release);
        writer.join().unwrap();
    });
    let stalls = db.stats().stalls;
    assert!(stalls.l0_stop_count >= 1, "{stalls:?}");
    assert!(
        stalls.l0_stop_time >= Duration::from_millis(10),
        "{stalls:?}"
    );
    assert!(stalls.l0_slowdown_count >= 1, "{stalls:?}");
}

/// With the slowdown trigger raised past the level-0 tables there are (the default, 20),
/// the write that LevelDB's trigger delays goes through at once.
#[test]
fn a_raised_slowdown_trigger_lets_the_write_through_undelayed() {
    let defaults = Options::default();
    let triggers = (
        defaults.l0_slowdown_writes_trigger,
        defaults.l0_stop_writes_trigger,
    );
    assert_eq!(triggers, (20, 36));
    let stalls = stalls_of_one_write(3800, triggers, 8..20);
    assert_eq!(
        (stalls.l0_slowdown_count, stalls.l0_stop_count),
        (0, 0),
        "{stalls:?}"
    );
}

/// A lowered slowdown trigger delays a write with fewer level-0 tables than LevelDB's 8.
#[test]
fn a_lowered_slowdown_trigger_delays_the_write_sooner() {
    let stalls = stalls_of_one_write(2300, (5, 12), 5..8);
    assert_eq!(stalls.l0_slowdown_count, 1, "{stalls:?}");
}

/// A level-0 stop trigger that cannot work is refused at open, naming the option and its
/// value: a stop at or below the 4 tables that start a compaction would wait forever. A
/// slowdown above the stop is lowered to it (no slowdown phase), so that lowering the stop
/// alone under the default slowdown works.
#[test]
fn level0_triggers_that_cannot_work_are_refused() {
    let env = MemEnv::new();
    for (slowdown, stop) in [(4, 4), (8, 0), (20, 3)] {
        let opts = Options {
            l0_slowdown_writes_trigger: slowdown,
            l0_stop_writes_trigger: stop,
            ..options(&env)
        };
        let err = Db::open(DIR, opts).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        let names = format!("l0_stop_writes_trigger must be more than 4 (the level-0 tables that start a compaction), not {stop}");
        assert!(err.to_string().contains(&names), "{err}");
    }
    // The edges that work: no slowdown phase at all, and the lowest stop.
    let opts = Options {
        l0_slowdown_writes_trigger: 5,
        l0_stop_writes_trigger: 5,
        ..options(&env)
    };
    Db::open(DIR, opts).unwrap();
}

/// LevelDB's stop trigger set alone, under the default slowdown (20): the slowdown is lowered
/// to the stop, so the write that LevelDB's slowdown would delay at 8 to 11 tables goes
/// through at once, and nothing is refused.
#[test]
fn a_stop_trigger_below_the_default_slowdown_lowers_the_slowdown() {
    let defaults = Options::default();
    let stalls = stalls_of_one_write(3800, (defaults.l0_slowdown_writes_trigger, 12), 8..12);
    assert_eq!(
        (stalls.l0_slowdown_count, stalls.l0_stop_count),
        (0, 0),
        "{stalls:?}"
    );
    let env = MemEnv::new();
    let opts = Options {
        l0_stop_writes_trigger: 12,
        ..options(&env)
    };
    let db = Db::open(DIR, opts).unwrap();
    assert_eq!(
        (
            db.inner.options.l0_slowdown_writes_trigger,
            db.inner.options.l0_stop_writes_trigger
        ),
        (12, 12)
    );
}

#[test]
fn a_flushed_level0_table_keeps_its_memtables_key_filter_until_reopened() {
    let env = MemEnv::new();
    let db = Db::open(DIR, options(&env)).unwrap();
    // Two flushes of the range's ends go below level 0 (to levels 2 and 1: nothing above
    // overlaps them), so the third, over the same range, stays in level 0.
    for round in 0..2 {
        db.put("k0000a", [round]).unwrap();
        db.put("k0999a", [round]).unwrap();
        crate::db::flush::flush_now(&db.inner).unwrap();
    }
    for i in 0..1000u32 {
        db.put(format!("k{i:04}a"), "v").unwrap();
    }
    crate::db::flush::flush_now(&db.inner).unwrap();
    let files = |db: &Db| -> Vec<Vec<Arc<crate::version::version::LiveFile>>> {
        let view = db.inner.view.load();
        view.version.files.iter().map(|l| l.to_vec()).collect()
    };
    let levels = files(&db);
    assert_eq!(
        levels.iter().map(Vec::len).collect::<Vec<_>>(),
        [1, 1, 1, 0, 0, 0, 0]
    );
    assert!(levels[0][0].key_filter.get().is_some());
    assert!(levels[1][0].key_filter.get().is_none() && levels[2][0].key_filter.get().is_none());

    // Keys the level-0 table does not hold (between keys it holds) are ruled out before the
    // table cache is asked: a get of one reads only the two deeper tables, but for the
    // filter's false positives (about 1%). Fewer gets than the level-1 table's 100 allowed
    // seeks (each get that reads both charges it one), so that no seek compaction merges the
    // two deeper tables while the gets run.
    // A table a get reads costs one data block read (a block cache hit or miss).
    let block_reads = |db: &Db| {
        let cache = db.stats().block_cache;
        cache.hit_count + cache.miss_count
    };
    let before = block_reads(&db);
    for i in 0..90u32 {
        assert_eq!(db.get(format!("k{:04}b", i * 11)).unwrap(), None);
    }
    let probed = block_reads(&db) - before;
    assert!(
        (180..=190).contains(&probed),
        "{probed} table reads for 90 absent keys"
    );
    // Nor is the skipped table charged a seek (it is allowed 100; a false positive charges
    // one).
    let allowed = levels[0][0]
        .allowed_seeks
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(allowed >= 95, "{allowed} seeks left");
    let before = block_reads(&db);
    for i in 0..1000u32 {
        assert_eq!(
            db.get(format!("k{i:04}a")).unwrap().as_deref(),
            Some(&b"v"[..])
        );
    }
    assert_eq!(block_reads(&db) - before, 1000);

    // Reopened, the table has no filter and answers alike.
    drop(db);
    let db = Db::open(DIR, options(&env)).unwrap();
    assert!(files(&db)[0][0].key_filter.get().is_none());
    assert_eq!(db.get("k0001b").unwrap(), None);
    assert_eq!(db.get("k0999a").unwrap().as_deref(), Some(&b"v"[..]));
}
