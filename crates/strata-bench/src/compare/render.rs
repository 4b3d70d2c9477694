// SPDX-License-Identifier: MIT OR Apache-2.0
//! The comparison's report: HTML tables and bar charts, SVG charts, Markdown and JSON, from
//! the runs' results.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::report::{JsonOutcome, JsonRun};
use crate::Flags;

use super::footprint::footprints;
use super::{scale, unit, Config, Results, CONFIGS};

pub(super) fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The median rate of `benchmark` over an engine's runs.
fn rate(runs: &[JsonRun], benchmark: &str) -> Option<f64> {
    median(
        runs.iter()
            .filter_map(|r| r.results.iter().find(|o| o.name == benchmark && !o.skipped))
            .map(|o| o.ops_per_sec)
            .collect(),
    )
}

/// The median over an engine's runs of a figure of `benchmark`'s outcome.
pub(super) fn median_of(
    runs: &[JsonRun],
    benchmark: &str,
    figure: impl Fn(&JsonOutcome) -> Option<f64>,
) -> Option<f64> {
    median(
        runs.iter()
            .filter_map(|r| r.results.iter().find(|o| o.name == benchmark && !o.skipped))
            .filter_map(figure)
            .collect(),
    )
}

/// What write amplification means in the reports, and which counter it came from: `wchar`
/// is named if any run had to fall back to it.
pub(super) fn write_amp_about(results: &Results) -> String {
    let from_wchar = results
        .values()
        .flat_map(|by_engine| by_engine.values().flatten())
        .flat_map(|run| &run.results)
        .any(|o| o.write_amp_source.as_deref() == Some("wchar"));
    let mut text = String::from(
        "Write amplification is the bytes the db_bench process (background threads included) \
         caused to be written to storage while the benchmark ran, from /proc/self/io's \
         write_bytes, ÷ the bytes of keys and values it wrote. The kernel charges a page when it \
         turns dirty, so data still in the page cache counts, a page rewritten before writeback \
         counts once (an engine that updates pages in place, LMDB, may be charged less than \
         it will write: a lower bound), and work an engine leaves to background threads after the benchmark ends \
         is missed (or charged to the next benchmark).",
    );
    if from_wchar {
        text.push_str(
            " Where write_bytes stayed 0 (a database on tmpfs), the figure is from wchar, the \
             bytes handed to write(): it misses writes through memory maps (LMDB's).",
        );
    }
    text
}

/// The write benchmarks of a configuration that have write amplification figures.
fn write_amp_benchmarks<'a>(tables: &[(&'a str, Vec<Row>)]) -> Vec<&'a str> {
    tables
        .iter()
        .filter(|(_, rows)| rows.iter().any(|r| r.write_amp.is_some()))
        .map(|(b, _)| *b)
        .collect()
}

pub(super) fn write_amp_cell(x: Option<f64>) -> String {
    x.map_or("—".to_owned(), |x| format!("{x:.2}"))
}

/// The median size of the database on disk once its engine closed.
fn closed_bytes(runs: &[JsonRun]) -> Option<f64> {
    median(
        runs.iter()
            .filter_map(|r| r.disk_bytes_after_close)
            .map(|b| b as f64)
            .collect(),
    )
}

fn peak_memory(runs: &[JsonRun], of: fn(&JsonRun) -> Option<u64>) -> Option<f64> {
    median(runs.iter().filter_map(of).map(|b| b as f64).collect())
}

pub(super) fn group(n: f64) -> String {
    let s = format!("{:.0}", n);
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A ratio with enough digits to tell small ones apart.
fn ratio(x: f64) -> String {
    if x >= 10.0 {
        format!("{x:.0}")
    } else if x >= 0.1 {
        format!("{x:.2}")
    } else {
        format!("{x:.4}")
    }
}

fn mb(bytes: f64) -> String {
    format!("{:.1} MB", bytes / 1_048_576.0)
}

/// One row of a chart or table: an engine, its value, its ratio to LevelDB and to baseline.
struct Row {
    engine: String,
    value: f64,
    vs_leveldb: Option<f64>,
    vs_baseline: Option<f64>,
    /// Median write amplification, for write benchmarks.
    write_amp: Option<f64>,
}

fn rows_for(results: &Results, engines: &[String], config: &Config, benchmark: &str) -> Vec<Row> {
    let Some(by_engine) = results.get(config.id) else {
        return Vec::new();
    };
    let leveldb = by_engine.get("leveldb").and_then(|r| rate(r, benchmark));
    let base_name = config
        .baseline
        .iter()
        .find(|(b, _)| *b == benchmark)
        .map(|(_, base)| *base);
    engines
        .iter()
        .filter_map(|e| {
            let value = rate(by_engine.get(e)?, benchmark)?;
            let vs_baseline = base_name.and_then(|base| {
                let b = rate(results.get("baseline")?.get(e)?, base)?;
                Some(value / b)
            });
            Some(Row {
                engine: e.clone(),
                value,
                vs_leveldb: leveldb.map(|l| value / l),
                vs_baseline,
                write_amp: median_of(by_engine.get(e)?, benchmark, |o| o.write_amp),
            })
        })
        .collect()
}

/// Draws a horizontal bar chart, one bar per engine, into an SVG file.
fn chart(path: &Path, title: &str, unit: &str, rows: &[Row]) -> Result<(), String> {
    let height = 50 + 28 * rows.len() as u32;
    let root = SVGBackend::new(path, (760, height)).into_drawing_area();
    let err = |e: &dyn std::fmt::Display| format!("drawing {}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let max = rows.iter().map(|r| r.value).fold(0.0, f64::max).max(1.0);
    let n = rows.len() as i32;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{title} ({unit})"), ("sans-serif", 16))
        .margin(8)
        .x_label_area_size(0)
        .y_label_area_size(130)
        .build_cartesian_2d(0f64..max * 1.45, (0..n).into_segmented())
        .map_err(|e| err(&e))?;
    // Segment 0 is at the bottom: the first row goes to the top, as the reports list engines.
    let names: Vec<String> = rows.iter().rev().map(|r| r.engine.clone()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .disable_y_mesh()
        .disable_x_axis()
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => names.get(*i as usize).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .y_labels(rows.len())
        .draw()
        .map_err(|e| err(&e))?;
    let colour = |engine: &str| {
        if engine == "strata" {
            RGBColor(0x1f, 0x77, 0xb4)
        } else if engine == "leveldb" {
            RGBColor(0x2c, 0xa0, 0x2c)
        } else {
            RGBColor(0x99, 0x99, 0x99)
        }
    };
    chart
        .draw_series(rows.iter().enumerate().map(|(i, r)| {
            let i = n - 1 - i as i32;
            Rectangle::new(
                [
                    (0.0, SegmentValue::Exact(i)),
                    (r.value, SegmentValue::Exact(i + 1)),
                ],
                colour(&r.engine).filled(),
            )
        }))
        .map_err(|e| err(&e))?;
    chart
        .draw_series(rows.iter().enumerate().map(|(i, r)| {
            let mut label = group(r.value);
            if let Some(x) = r.vs_leveldb {
                label.push_str(&format!("  {}x LevelDB", ratio(x)));
            }
            if let Some(x) = r.vs_baseline {
                label.push_str(&format!("  ({}x baseline)", ratio(x)));
            }
            Text::new(
                label,
                (
                    r.value + max * 0.01,
                    SegmentValue::CenterOf(n - 1 - i as i32),
                ),
                ("sans-serif", 12),
            )
        }))
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

pub(super) fn write_report(
    flags: &Flags,
    engines: &[String],
    results: &Results,
    exe: &Path,
) -> Result<(), String> {
    let dir: PathBuf = flags.report_dir.clone();
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let write = |name: &str, text: &str| {
        std::fs::write(dir.join(name), text).map_err(|e| format!("writing {name}: {e}"))
    };
    write(
        "results.json",
        &serde_json::to_string_pretty(results).map_err(|e| e.to_string())?,
    )?;

    let mut md = String::new();
    let mut html = String::from(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>strata: db_bench comparison</title>\
         <style>body{font-family:sans-serif;max-width:900px;margin:auto}table{border-collapse:collapse}\
         td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}td:first-child{text-align:left}</style>\
         </head><body>\n<h1>db_bench: strata and its peers</h1>\n",
    );
    let _ = writeln!(
        html,
        "<p>{} entries, {}-byte keys, {}-byte values compressing to half, key order {:?}, \
         {} run(s) per configuration and engine (medians). Ratios are to LevelDB in the same \
         run, and to the same engine's baseline.</p>",
        flags.num,
        flags.key_size,
        flags.value_size,
        flags.key_order,
        flags.runs.max(1)
    );
    let _ = writeln!(
        md,
        "{} entries, {}-byte keys, {}-byte values, key order {}, {} run(s) per configuration \
         and engine (medians). Rates are operations per second (entries per second for batches); \
         × LevelDB is the ratio to LevelDB in the same run.\n",
        flags.num,
        flags.key_size,
        flags.value_size,
        format!("{:?}", flags.key_order).to_lowercase(),
        flags.runs.max(1)
    );
    let has_write_amp = results
        .values()
        .flat_map(|by_engine| by_engine.values().flatten())
        .any(|run| run.results.iter().any(|o| o.write_amp.is_some()));
    if has_write_amp {
        let about = write_amp_about(results);
        let _ = writeln!(html, "<p>{about}</p>");
        let _ = writeln!(md, "{about}\n");
    }
    // The disk-usage runs are reported in the disk table only ("large" is both).
    for config in CONFIGS
        .iter()
        .filter(|c| !c.id.starts_with("disk-") && results.contains_key(c.id))
    {
        let _ = writeln!(html, "<h2>{}</h2>\n<p>{}</p>", config.title, config.about);
        let _ = writeln!(md, "### {}\n\n{}\n", config.title, config.about);
        let benchmarks: Vec<&str> = config
            .benchmarks
            .split(',')
            .map(str::trim)
            .filter(|b| !b.is_empty())
            .collect();
        // The Markdown table: an engine per row, a benchmark per column.
        let _ = write!(md, "| engine |");
        for b in &benchmarks {
            let _ = write!(md, " {b} |");
        }
        let _ = write!(md, "\n|---|");
        for _ in &benchmarks {
            let _ = write!(md, "---|");
        }
        md.push('\n');
        let tables: Vec<(&str, Vec<Row>)> = benchmarks
            .iter()
            .map(|b| (*b, rows_for(results, engines, config, b)))
            .collect();
        for e in engines {
            let _ = write!(md, "| {e} |");
            for (_, rows) in &tables {
                match rows.iter().find(|r| &r.engine == e) {
                    Some(r) => {
                        let _ = write!(md, " {}", group(r.value));
                        if let Some(x) = r.vs_leveldb {
                            let _ = write!(md, " ({}×)", ratio(x));
                        }
                        if let Some(x) = r.vs_baseline {
                            let _ = write!(md, " [{}× baseline]", ratio(x));
                        }
                        md.push_str(" |");
                    }
                    None => md.push_str(" — |"),
                }
            }
            md.push('\n');
        }
        md.push('\n');
        let amplified = write_amp_benchmarks(&tables);
        if !amplified.is_empty() {
            let _ = writeln!(
                md,
                "Write amplification (bytes written to storage ÷ bytes of keys and values):\n"
            );
            let _ = writeln!(
                md,
                "| engine | {} |\n|---|{}",
                amplified.join(" | "),
                "---|".repeat(amplified.len())
            );
            for e in engines {
                let cells: Vec<String> = amplified
                    .iter()
                    .map(|b| {
                        let rows = &tables.iter().find(|(t, _)| t == b).expect("listed").1;
                        write_amp_cell(
                            rows.iter()
                                .find(|r| &r.engine == e)
                                .and_then(|r| r.write_amp),
                        )
                    })
                    .collect();
                let _ = writeln!(md, "| {e} | {} |", cells.join(" | "));
            }
            md.push('\n');
        }
        for (b, rows) in &tables {
            if rows.is_empty() {
                continue;
            }
            let amplified = amplified.contains(b);
            let file = format!("{}-{b}.svg", config.id);
            chart(&dir.join(&file), b, unit(b), rows)?;
            let _ = writeln!(html, "<h3>{b}</h3>\n<img src=\"{file}\" alt=\"{b}\">");
            let _ = writeln!(
                html,
                "<table><tr><th>engine</th><th>{}</th><th>× LevelDB</th><th>× baseline</th>{}</tr>",
                unit(b),
                if amplified { "<th>write-amp</th>" } else { "" }
            );
            for r in rows {
                let ratio = |x: Option<f64>| x.map_or("—".to_owned(), ratio);
                let _ = writeln!(
                    html,
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td>{}</tr>",
                    r.engine,
                    group(r.value),
                    ratio(r.vs_leveldb),
                    ratio(r.vs_baseline),
                    if amplified {
                        format!("<td>{}</td>", write_amp_cell(r.write_amp))
                    } else {
                        String::new()
                    }
                );
            }
            html.push_str("</table>\n");
        }
    }

    let (scale_md, scale_html) = scale::section(&dir, engines, results)?;
    md.push_str(&scale_md);
    html.push_str(&scale_html);

    // Disk usage, peak memory and footprint.
    let baseline = results.get("baseline");
    let closed = |config: &str, e: &str| closed_bytes(results.get(config)?.get(e)?);
    let prints = footprints(exe, engines);
    let _ = writeln!(
        md,
        "### Disk usage, memory and footprint\n\nDisk usage is the space the database's files \
         occupy (allocated blocks) after a fill, once the engine has closed. Peak memory is the db_bench process's \
         peak resident set (VmHWM) over the whole baseline run, which counts the pages of mapped files it touched (strata's, LevelDB's and LMDB's tables); peak anonymous memory is the peak of RssAnon (heap and stacks, not the page cache), sampled every 10 ms. Footprint is code size: for a C \
         library, the text and data of its shared object; for a Rust engine, its crates' \
         functions and data in db_bench (from nm).\n\n| engine | after fillseq | after fillrandom \
         | after fill100K | peak memory | peak anonymous memory | footprint |\n|---|---|---|---|---|---|---|"
    );
    html.push_str(
        "<h2>Disk usage, memory and footprint</h2>\n<table><tr><th>engine</th>\
         <th>after fillseq</th><th>after fillrandom</th><th>after fill100K</th>\
         <th>peak memory</th><th>peak anonymous memory</th><th>footprint</th></tr>\n",
    );
    let mut memory_rows = Vec::new();
    for e in engines {
        let runs = baseline.and_then(|b| b.get(e));
        let cell = |v: Option<f64>| v.map_or("—".to_owned(), mb);
        let seq = closed("disk-seq", e);
        let random = closed("disk-random", e);
        let large = closed("large", e);
        let peak = runs.and_then(|r| peak_memory(r, |j| j.peak_memory_bytes));
        let peak_anon = runs.and_then(|r| peak_memory(r, |j| j.peak_anon_memory_bytes));
        let foot = prints.get(e).map(|(s, _)| mb(*s as f64));
        let cells = [
            cell(seq),
            cell(random),
            cell(large),
            cell(peak),
            cell(peak_anon),
            foot.unwrap_or_else(|| "—".into()),
        ];
        let _ = writeln!(md, "| {e} | {} |", cells.join(" | "));
        let _ = writeln!(
            html,
            "<tr><td>{e}</td><td>{}</td></tr>",
            cells.join("</td><td>")
        );
        if let Some(p) = peak {
            memory_rows.push(Row {
                engine: e.clone(),
                value: p / 1_048_576.0,
                vs_leveldb: None,
                vs_baseline: None,
                write_amp: None,
            });
        }
    }
    html.push_str("</table>\n");
    if !memory_rows.is_empty() {
        chart(
            &dir.join("peak-memory.svg"),
            "peak memory",
            "MB",
            &memory_rows,
        )?;
        html.push_str("<img src=\"peak-memory.svg\" alt=\"peak memory\">\n");
    }
    for (e, (_, how)) in &prints {
        let _ = writeln!(html, "<p><small>{e} footprint: {how}</small></p>");
    }
    html.push_str("</body></html>\n");
    write("index.html", &html)?;
    write("report.md", &md)?;
    println!("{md}");
    eprintln!(
        "db_bench --compare: wrote {}",
        dir.join("index.html").display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::super::scale::tests::{outcome, run, synthetic};
    use super::*;

    #[test]
    fn the_report_shows_write_amplification_beside_the_rates() {
        let dir = tempfile::tempdir().unwrap();
        let mut results = synthetic();
        let baseline = results.get_mut("baseline").unwrap();
        baseline.insert(
            "leveldb".into(),
            vec![run(
                "leveldb",
                1000,
                vec![
                    outcome("fillseq", 2.0, Some(3.5)),
                    outcome("readrandom", 4.0, None),
                ],
            )],
        );
        baseline.get_mut("strata").unwrap()[0]
            .results
            .push(outcome("fillseq", 1.0, Some(1.25)));
        let report_dir = format!("--report_dir={}", dir.path().display());
        let flags = Flags::parse_from(["db_bench", "--compare", report_dir.as_str()]);
        let engines = vec!["strata".to_owned(), "leveldb".to_owned()];
        let exe = std::env::current_exe().unwrap();
        write_report(&flags, &engines, &results, &exe).unwrap();
        let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
        let html = std::fs::read_to_string(dir.path().join("index.html")).unwrap();

        // Only the write benchmarks with figures get a column: fillrandom has none for strata
        // in the baseline, and none at all for LevelDB.
        let table =
            "Write amplification (bytes written to storage ÷ bytes of keys and values):\n\n\
                     | engine | fillseq |\n|---|---|\n| strata | 1.25 |\n| leveldb | 3.50 |\n";
        assert!(md.contains(table), "{md}");
        assert!(md.contains("from /proc/self/io's write_bytes"), "{md}");
        assert!(!md.contains("from wchar"), "{md}");
        assert!(
            html.contains("<th>write-amp</th></tr>\n<tr><td>strata</td><td>1,000,000</td><td>2.00</td><td>—</td><td>1.25</td></tr>"),
            "{html}"
        );
        // The scale section follows the configurations.
        assert!(
            md.contains("### Cost against the number of entries"),
            "{md}"
        );
        assert!(dir.path().join("scale-fillrandom.svg").exists());
    }
}
