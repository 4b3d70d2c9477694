// SPDX-License-Identifier: MIT OR Apache-2.0
//! The report, printed as LevelDB's db_bench prints it.

use std::time::Duration;

use crate::Flags;

/// Prints the header: sizes of keys, values and entries, and the raw and estimated file sizes.
pub fn print_header(flags: &Flags, engine: &str) {
    let entry = (flags.key_size + flags.value_size) as f64;
    let raw_mb = entry * flags.num as f64 / 1_048_576.0;
    let compressed = (flags.key_size as f64 + flags.value_size as f64 * flags.compression_ratio)
        * flags.num as f64
        / 1_048_576.0;
    println!("Engine:     {engine}");
    println!("Keys:       {} bytes each", flags.key_size);
    println!(
        "Values:     {} bytes each ({} bytes after compression)",
        flags.value_size,
        (flags.value_size as f64 * flags.compression_ratio) as u64
    );
    println!("Entries:    {}", flags.num);
    println!("RawSize:    {raw_mb:.1} MB (estimated)");
    println!("FileSize:   {compressed:.1} MB (estimated)");
    if cfg!(debug_assertions) {
        println!("WARNING: Optimization is disabled: benchmarks unnecessarily slow");
    }
    println!("------------------------------------------------");
}

/// One benchmark's result.
pub struct Outcome {
    pub name: &'static str,
    pub ops: u64,
    pub elapsed: Duration,
    /// Bytes of keys and values moved, for MB/s; 0 to leave it out.
    pub bytes: u64,
    /// Free text after the figures, as db_bench prints it (for example "(1000 of 1000 found)").
    pub note: String,
}

/// Prints one result line: `name : micros/op; MB/s; note`.
pub fn print_outcome(o: &Outcome) {
    let secs = o.elapsed.as_secs_f64();
    let micros_per_op = secs * 1e6 / o.ops.max(1) as f64;
    let mut line = format!("{:<12} : {:>11.3} micros/op;", o.name, micros_per_op);
    if o.bytes > 0 && secs > 0.0 {
        line.push_str(&format!(
            " {:>6.1} MB/s",
            o.bytes as f64 / 1_048_576.0 / secs
        ));
    }
    line.push_str(&format!(" {:>10.0} ops/sec", o.ops as f64 / secs.max(1e-9)));
    if !o.note.is_empty() {
        line.push(' ');
        line.push_str(&o.note);
    }
    println!("{line}");
}
