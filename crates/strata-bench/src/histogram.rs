// SPDX-License-Identifier: MIT OR Apache-2.0
//! Latency histogram for `--histogram`: exponential buckets, as LevelDB's db_bench prints them.

use std::fmt::Write as _;

/// Bucket upper limits in microseconds: 1, 2, ... 10, then growing by about 20% up to 1e10.
fn limits() -> &'static [f64] {
    static LIMITS: std::sync::OnceLock<Vec<f64>> = std::sync::OnceLock::new();
    LIMITS.get_or_init(|| {
        let mut v: Vec<f64> = (1..=10).map(f64::from).collect();
        let mut x = 10.0f64;
        while x < 1e10 {
            x = (x * 1.2).round().max(x + 1.0);
            v.push(x);
        }
        v.push(f64::INFINITY);
        v
    })
}

/// Per-operation latencies, in microseconds.
#[derive(Debug, Clone, Default)]
pub struct Histogram {
    buckets: Vec<u64>,
    count: u64,
    sum: f64,
    sum_squares: f64,
    min: f64,
    max: f64,
}

impl Histogram {
    pub fn new() -> Self {
        Histogram {
            buckets: vec![0; limits().len()],
            min: f64::INFINITY,
            ..Histogram::default()
        }
    }

    pub fn add(&mut self, micros: f64) {
        let i = limits().partition_point(|&l| l <= micros);
        let last = self.buckets.len() - 1;
        self.buckets[i.min(last)] += 1;
        self.count += 1;
        self.sum += micros;
        self.sum_squares += micros * micros;
        self.min = self.min.min(micros);
        self.max = self.max.max(micros);
    }

    pub fn merge(&mut self, other: &Histogram) {
        if other.count == 0 {
            return;
        }
        if self.buckets.is_empty() {
            *self = other.clone();
            return;
        }
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a += b;
        }
        self.count += other.count;
        self.sum += other.sum;
        self.sum_squares += other.sum_squares;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    #[cfg(test)]
    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn average(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum / self.count as f64
        }
    }

    fn std_dev(&self) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let n = self.count as f64;
        ((self.sum_squares * n - self.sum * self.sum) / (n * n))
            .max(0.0)
            .sqrt()
    }

    /// The `p`th percentile (0..=100), interpolated within its bucket.
    pub fn percentile(&self, p: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let threshold = self.count as f64 * p / 100.0;
        let mut cumulative = 0.0;
        for (i, &n) in self.buckets.iter().enumerate() {
            cumulative += n as f64;
            if cumulative >= threshold {
                let left = if i == 0 { 0.0 } else { limits()[i - 1] };
                let right = limits()[i].min(self.max);
                let before = cumulative - n as f64;
                let pos = if n == 0 {
                    0.0
                } else {
                    (threshold - before) / n as f64
                };
                return (left + (right - left) * pos).clamp(self.min, self.max);
            }
        }
        self.max
    }

    /// The report LevelDB's db_bench prints under a benchmark with `--histogram`.
    pub fn report(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "Microseconds per op:\nCount: {}  Average: {:.4}  StdDev: {:.2}",
            self.count,
            self.average(),
            self.std_dev()
        );
        let _ = writeln!(
            out,
            "Min: {:.4}  Median: {:.4}  Max: {:.4}",
            if self.count == 0 { 0.0 } else { self.min },
            self.percentile(50.0),
            if self.count == 0 { 0.0 } else { self.max }
        );
        let _ = writeln!(
            out,
            "Percentiles: P50: {:.2} P75: {:.2} P99: {:.2} P99.9: {:.2} P99.99: {:.2}",
            self.percentile(50.0),
            self.percentile(75.0),
            self.percentile(99.0),
            self.percentile(99.9),
            self.percentile(99.99)
        );
        let _ = writeln!(
            out,
            "------------------------------------------------------"
        );
        let mut cumulative = 0u64;
        for (i, &n) in self.buckets.iter().enumerate() {
            if n == 0 {
                continue;
            }
            cumulative += n;
            let left = if i == 0 { 0.0 } else { limits()[i - 1] };
            let pct = 100.0 * n as f64 / self.count as f64;
            let cum_pct = 100.0 * cumulative as f64 / self.count as f64;
            let bar = "#".repeat((pct / 5.0).round() as usize);
            let _ = writeln!(
                out,
                "[ {left:>7.0}, {:>7.0} ) {n:>7} {pct:>7.3}% {cum_pct:>7.3}% {bar}",
                limits()[i]
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_follow_the_data() {
        let mut h = Histogram::new();
        for i in 1..=1000 {
            h.add(f64::from(i));
        }
        assert_eq!(h.count(), 1000);
        assert!((h.average() - 500.5).abs() < 1e-9);
        let p50 = h.percentile(50.0);
        assert!((450.0..550.0).contains(&p50), "{p50}");
        let p99 = h.percentile(99.0);
        assert!((950.0..=1000.0).contains(&p99), "{p99}");
        assert!(h.report().contains("Count: 1000"));
    }

    #[test]
    fn merging_adds_counts() {
        let mut a = Histogram::new();
        let mut b = Histogram::new();
        a.add(1.0);
        b.add(100.0);
        b.add(3.0);
        a.merge(&b);
        assert_eq!(a.count(), 3);
        assert_eq!(a.percentile(100.0), 100.0);
    }
}
