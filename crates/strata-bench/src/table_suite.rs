// SPDX-License-Identifier: MIT OR Apache-2.0
//! The suite on strata's table layer (the database layer is not built yet).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata::cache::BlockCache;
use strata::filter::BloomFilterPolicy;
use strata::iter::InternalIterator;
use strata::key::{append_internal_key, user_key, ValueKind, MAX_SEQNO};
use strata::table::{BlockReadOptions, Compression, Table, TableBuilder, TableOptions};
use strata::{Env, PosixEnv, Result};

use crate::generator::{make_key, ValueGenerator};
use crate::report::{print_header, print_outcome, Outcome};
use crate::Flags;

struct Bench {
    flags: Flags,
    env: PosixEnv,
    path: PathBuf,
    options: TableOptions,
    cache: Arc<BlockCache>,
    table: Option<Arc<Table>>,
    file_size: u64,
}

/// Runs `--benchmarks` in order and prints the report.
pub fn run(flags: &Flags) -> Result<()> {
    let tmp;
    let dir: &Path = match &flags.db {
        Some(d) => {
            std::fs::create_dir_all(d).map_err(|e| strata::Error::io(d, "create directory", e))?;
            d
        }
        None => {
            tmp = tempfile::tempdir()
                .map_err(|e| strata::Error::io("/tmp", "create directory", e))?;
            tmp.path()
        }
    };
    let options = TableOptions {
        compression: if flags.no_compression {
            Compression::None
        } else {
            Compression::Snappy
        },
        filter_policy: usize::try_from(flags.bloom_bits)
            .ok()
            .map(|bits| Arc::new(BloomFilterPolicy::new(bits)) as _),
        ..TableOptions::default()
    };
    let mut bench = Bench {
        flags: flags.clone(),
        env: PosixEnv::new(),
        path: dir.join("000001.ldb"),
        options,
        cache: Arc::new(BlockCache::new(flags.cache_size)),
        table: None,
        file_size: 0,
    };
    print_header(
        flags,
        "strata (table layer: the database layer arrives with issue #3)",
    );
    for name in flags.benchmarks.split(',').filter(|n| !n.is_empty()) {
        let outcome = match name {
            "fillseq" => bench.fillseq()?,
            "readseq" => bench.read_scan(false)?,
            "readreverse" => bench.read_scan(true)?,
            "readrandom" => bench.read_random(false)?,
            "readmissing" => bench.read_random(true)?,
            other => {
                eprintln!("db_bench: unknown benchmark '{other}' (this interim suite runs fillseq, readseq, readreverse, readrandom, readmissing)");
                continue;
            }
        };
        print_outcome(&outcome);
    }
    Ok(())
}

fn internal_key(buf: &mut Vec<u8>, user: &[u8], seqno: u64) {
    buf.clear();
    append_internal_key(buf, user, seqno, ValueKind::Value);
}

impl Bench {
    fn fillseq(&mut self) -> Result<Outcome> {
        let mut values = ValueGenerator::new(self.flags.compression_ratio, 301);
        let (mut user, mut ikey) = (Vec::new(), Vec::new());
        let start = Instant::now();
        let file = self.env.new_writable_file(&self.path)?;
        let mut builder = TableBuilder::new(self.options.clone(), file);
        for i in 0..self.flags.num {
            make_key(&mut user, i, self.flags.key_size);
            internal_key(&mut ikey, &user, i + 1);
            builder.add(&ikey, values.next(self.flags.value_size))?;
        }
        self.file_size = builder.finish(false)?;
        let elapsed = start.elapsed();
        self.table = None;
        Ok(Outcome {
            name: "fillseq",
            ops: self.flags.num,
            elapsed,
            bytes: self.flags.num * (self.flags.key_size + self.flags.value_size) as u64,
            note: format!("(table of {:.1} MB)", self.file_size as f64 / 1_048_576.0),
        })
    }

    fn table(&mut self) -> Result<Arc<Table>> {
        if let Some(t) = &self.table {
            return Ok(t.clone());
        }
        if self.file_size == 0 {
            self.fillseq()?;
        }
        let file = self.env.new_random_access_file(&self.path)?;
        let table = Arc::new(Table::open(
            self.options.clone(),
            file,
            &self.path,
            self.file_size,
            Some(self.cache.clone()),
        )?);
        self.table = Some(table.clone());
        Ok(table)
    }

    fn read_scan(&mut self, reverse: bool) -> Result<Outcome> {
        let table = self.table()?;
        let mut it = table.iter(BlockReadOptions::default());
        let (mut ops, mut bytes) = (0u64, 0u64);
        let start = Instant::now();
        if reverse {
            it.seek_to_last();
        } else {
            it.seek_to_first();
        }
        while it.valid() {
            bytes += (it.key().len() - 8 + it.value().len()) as u64;
            ops += 1;
            if reverse {
                it.prev();
            } else {
                it.next();
            }
        }
        it.status()?;
        Ok(Outcome {
            name: if reverse { "readreverse" } else { "readseq" },
            ops,
            elapsed: start.elapsed(),
            bytes,
            note: String::new(),
        })
    }

    fn read_random(&mut self, missing: bool) -> Result<Outcome> {
        let table = self.table()?;
        let reads = self.flags.reads();
        let mut rng = StdRng::seed_from_u64(1000);
        let (mut user, mut ikey) = (Vec::new(), Vec::new());
        let read_options = BlockReadOptions::default();
        let mut found = 0u64;
        let start = Instant::now();
        for _ in 0..reads {
            let k = rng.gen_range(0..self.flags.num.max(1));
            make_key(&mut user, k, self.flags.key_size);
            if missing {
                user.push(b'.');
            }
            internal_key(&mut ikey, &user, MAX_SEQNO);
            let hit = table.get(&read_options, &ikey, |fk, _| {
                user_key(fk) == user.as_slice()
            })?;
            found += u64::from(hit == Some(true));
        }
        Ok(Outcome {
            name: if missing { "readmissing" } else { "readrandom" },
            ops: reads,
            elapsed: start.elapsed(),
            bytes: 0,
            note: format!("({found} of {reads} found)"),
        })
    }
}
