// SPDX-License-Identifier: MIT OR Apache-2.0
//! Times each put of a stream of large values, with key-value separation on and compression
//! off (db_bench's `strata-blobs` engine in `--configs=large-nocompression`), and prints the
//! puts that took more than 1.5× the median, by their position in the stream. With 100 KB
//! values, a blob file's space is reserved every 42 puts (4 MiB), a blob file is opened every
//! 168 (16 MiB), and the memtable switches every 671 (64 MiB): the timeline shows what each
//! of those costs a writer.
//!
//! ```sh
//! cargo run --release -p strata --example large_put_timeline -- /tmp/timeline 1000 100000
//! ```
//! Arguments: a directory (a database there is destroyed first, with `strata::destroy`, which
//! refuses a directory that holds anything else), the number of puts (at least 1, default
//! 1000), the value size in bytes (default 100000). Keys are 16 digits in a scattered order,
//! each written once.

use std::time::Instant;

/// Argument `name`, parsed, or `default` when it is not given.
fn parsed(arg: Option<String>, name: &str, default: usize) -> Result<usize, String> {
    arg.map_or(Ok(default), |a| {
        a.parse()
            .map_err(|e| format!("{name} must be a whole number, not {a:?}: {e}"))
    })
}

fn main() {
    if let Err(e) = run() {
        eprintln!("large_put_timeline: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = args
        .next()
        .unwrap_or_else(|| "/tmp/large_put_timeline".to_string());
    let puts = parsed(args.next(), "the number of puts", 1000)?;
    let value_size = parsed(args.next(), "the value size", 100_000)?;
    if puts == 0 {
        return Err("the number of puts must be at least 1".into());
    }
    strata::destroy(&dir, &strata::Options::default())?;
    let options = strata::Options {
        create_if_missing: true,
        compression: strata::Compression::None,
        blob_threshold: Some(4096),
        blob_compression: strata::Compression::None,
        ..Default::default()
    };
    let db = strata::Db::open(&dir, options)?;
    // Bytes of a xorshift stream: incompressible, as db_bench's are not, which does not
    // matter with compression off.
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let value: Vec<u8> = (0..value_size)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    let mut micros = Vec::with_capacity(puts);
    let stream = Instant::now();
    for i in 0..puts {
        // The multiplier is prime, so for fewer puts than it, `i * m % puts` visits each key
        // once.
        let key = format!(
            "{:016}",
            (i as u64).wrapping_mul(2_654_435_761) % puts as u64
        );
        let start = Instant::now();
        db.put(key.as_bytes(), &value)?;
        micros.push(start.elapsed().as_secs_f64() * 1e6);
    }
    let total = stream.elapsed().as_secs_f64() * 1e6;
    let mut sorted = micros.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[puts / 2];
    let p99 = sorted[(puts * 99 / 100).min(puts - 1)];
    let slow = 1.5 * median;
    let excess: f64 = micros
        .iter()
        .filter(|&&m| m > slow)
        .map(|m| m - median)
        .sum();
    println!(
        "{puts} puts of {value_size} bytes: mean {:.1} us, median {median:.1}, p99 {p99:.1}; \
         puts over {slow:.0} us add {:.1} us per put to the median",
        total / puts as f64,
        excess / puts as f64,
    );
    let timeline: Vec<String> = micros
        .iter()
        .enumerate()
        .filter(|(_, &m)| m > slow)
        .map(|(i, m)| format!("{i}:{m:.0}"))
        .collect();
    println!("put:us over {slow:.0} us: {}", timeline.join(" "));
    Ok(())
}
