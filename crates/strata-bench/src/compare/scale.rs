// SPDX-License-Identifier: MIT OR Apache-2.0
//! The report's section for `--configs=scale`: per benchmark, each engine's cost per operation
//! (micros/op) against the number of entries, as a table and as a line chart over a
//! logarithmic axis of entries; and, for the write benchmarks, the write amplification at each
//! size.
//!
//! The sizes come from the results' keys (`scale-N`), not from the flags, so that `--render`
//! of an earlier results.json draws the sizes that ran.

use std::fmt::Write as _;
use std::path::Path;

use plotters::prelude::*;

use super::render::{group, median_of, write_amp_cell};
use super::{Results, SCALE};
use crate::report::JsonOutcome;

/// The sizes that ran, ascending, each with its results key. Keys of the form `scale-N` with N
/// not a number are not the scale configuration's and are left out.
fn sizes(results: &Results) -> Vec<(u64, &str)> {
    let prefix = format!("{}-", SCALE.id);
    let mut out: Vec<(u64, &str)> = results
        .keys()
        .filter_map(|k| Some((k.strip_prefix(&prefix)?.parse().ok()?, k.as_str())))
        .collect();
    out.sort_unstable();
    out
}

/// One engine's medians of a figure, one per size (`None` where it has none).
struct Series {
    engine: String,
    /// The engine's place in the report's list, which picks its colour: the same in every
    /// chart, whichever engines lack a benchmark.
    place: usize,
    points: Vec<Option<f64>>,
}

/// The series of every engine with at least one figure for `benchmark`.
fn series(
    results: &Results,
    engines: &[String],
    sizes: &[(u64, &str)],
    benchmark: &str,
    figure: fn(&JsonOutcome) -> Option<f64>,
) -> Vec<Series> {
    engines
        .iter()
        .enumerate()
        .filter_map(|(place, e)| {
            let points: Vec<Option<f64>> = sizes
                .iter()
                .map(|(_, key)| median_of(results.get(*key)?.get(e)?, benchmark, figure))
                .collect();
            points.iter().any(Option::is_some).then(|| Series {
                engine: e.clone(),
                place,
                points,
            })
        })
        .collect()
}

/// A number of entries as column heads and the chart's axis show it: 2K, 1M, 100M; others in
/// full.
fn entries_label(n: u64) -> String {
    for (unit, suffix) in [(1_000_000, "M"), (1_000, "K")] {
        if n >= unit && n.is_multiple_of(unit) {
            return format!("{}{suffix}", n / unit);
        }
    }
    group(n as f64)
}

/// A table with an engine per row and a size per column, in Markdown and in HTML.
fn tables(
    sizes: &[(u64, &str)],
    series: &[Series],
    cell: fn(Option<f64>) -> String,
) -> (String, String) {
    let heads: Vec<String> = sizes.iter().map(|(n, _)| entries_label(*n)).collect();
    let mut md = format!(
        "| engine | {} |\n|---|{}\n",
        heads.join(" | "),
        "---|".repeat(heads.len())
    );
    let mut html = format!(
        "<table><tr><th>engine</th><th>{}</th></tr>\n",
        heads.join("</th><th>")
    );
    for s in series {
        let cells: Vec<String> = s.points.iter().map(|p| cell(*p)).collect();
        let _ = writeln!(md, "| {} | {} |", s.engine, cells.join(" | "));
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td>{}</td></tr>",
            s.engine,
            cells.join("</td><td>")
        );
    }
    html.push_str("</table>\n");
    (md, html)
}

fn micros_cell(x: Option<f64>) -> String {
    x.map_or("—".to_owned(), |x| format!("{x:.3}"))
}

/// The section in Markdown and in HTML, with a chart per benchmark written into `dir`; empty
/// if no scale runs are in `results`.
pub(super) fn section(
    dir: &Path,
    engines: &[String],
    results: &Results,
) -> Result<(String, String), String> {
    let sizes = sizes(results);
    if sizes.is_empty() {
        return Ok((String::new(), String::new()));
    }
    let listed: Vec<String> = sizes.iter().map(|(n, _)| group(*n as f64)).collect();
    let about = format!(
        "{} Entries: {}. Cost is micros/op (lower is better, the median of the runs); the write \
         benchmarks' write amplification is under their cost.",
        SCALE.about,
        listed.join(", ")
    );
    let mut md = format!("### {}\n\n{about}\n\n", SCALE.title);
    let mut html = format!("<h2>{}</h2>\n<p>{about}</p>\n", SCALE.title);
    for b in SCALE.benchmarks.split(',').map(str::trim) {
        let cost = series(results, engines, &sizes, b, |o| Some(o.micros_per_op));
        if cost.is_empty() {
            continue;
        }
        let file = format!("{}-{b}.svg", SCALE.id);
        line_chart(&dir.join(&file), b, &sizes, &cost)?;
        let (cost_md, cost_html) = tables(&sizes, &cost, micros_cell);
        let _ = writeln!(md, "#### {b}\n\nmicros/op:\n\n{cost_md}");
        let _ = writeln!(
            html,
            "<h3>{b}</h3>\n<img src=\"{file}\" alt=\"{b}: micros/op against entries\">\n\
             <p>micros/op:</p>\n{cost_html}"
        );
        let amp = series(results, engines, &sizes, b, |o| o.write_amp);
        if !amp.is_empty() {
            let (amp_md, amp_html) = tables(&sizes, &amp, write_amp_cell);
            let _ = writeln!(md, "write amplification:\n\n{amp_md}");
            let _ = writeln!(html, "<p>write amplification:</p>\n{amp_html}");
        }
    }
    Ok((md, html))
}

/// The colour of an engine's line: the bar charts' blue for strata and green for LevelDB;
/// the others take distinct colours by their place in the list.
fn colour(engine: &str, place: usize) -> RGBColor {
    const OTHERS: [RGBColor; 8] = [
        RGBColor(0xff, 0x7f, 0x0e),
        RGBColor(0xd6, 0x27, 0x28),
        RGBColor(0x94, 0x67, 0xbd),
        RGBColor(0x8c, 0x56, 0x4b),
        RGBColor(0xe3, 0x77, 0xc2),
        RGBColor(0x7f, 0x7f, 0x7f),
        RGBColor(0xbc, 0xbd, 0x22),
        RGBColor(0x17, 0xbe, 0xcf),
    ];
    match engine {
        "strata" => RGBColor(0x1f, 0x77, 0xb4),
        "leveldb" => RGBColor(0x2c, 0xa0, 0x2c),
        _ => OTHERS[place % OTHERS.len()],
    }
}

/// Draws micros/op against entries, a line per engine, into an SVG file. The x axis is
/// logarithmic, labelled at the sizes that ran.
fn line_chart(
    path: &Path,
    benchmark: &str,
    sizes: &[(u64, &str)],
    series: &[Series],
) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("drawing {}: {e}", path.display());
    let root = SVGBackend::new(path, (760, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let xs: Vec<f64> = sizes.iter().map(|(n, _)| *n as f64).collect();
    // A factor of 2 beyond each end keeps the end points and their labels off the frame.
    let (lo, hi) = (xs[0] / 2.0, xs[xs.len() - 1] * 2.0);
    let top = series
        .iter()
        .flat_map(|s| s.points.iter().flatten())
        .fold(0.0, |a: f64, &b| a.max(b))
        .max(1e-3)
        * 1.15;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{benchmark}: micros/op against entries"),
            ("sans-serif", 16),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((lo..hi).log_scale().with_key_points(xs.clone()), 0f64..top)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("entries (log scale)")
        .y_desc("micros/op")
        .x_label_formatter(&|x| entries_label(x.round() as u64))
        .draw()
        .map_err(|e| err(&e))?;
    for s in series {
        let c = colour(&s.engine, s.place);
        let points: Vec<(f64, f64)> = xs
            .iter()
            .zip(&s.points)
            .filter_map(|(x, y)| Some((*x, (*y)?)))
            .collect();
        chart
            .draw_series(std::iter::once(PathElement::new(
                points.clone(),
                c.stroke_width(2),
            )))
            .map_err(|e| err(&e))?
            .label(s.engine.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
        chart
            .draw_series(points.iter().map(|p| Circle::new(*p, 3, c.filled())))
            .map_err(|e| err(&e))?;
    }
    // The legend goes in the upper corner on the side where costs are lower, so that it
    // hides as little of the lines as it can.
    let mean_at = |i: usize| {
        let v: Vec<f64> = series.iter().filter_map(|s| s.points[i]).collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    };
    let corner = if mean_at(0) > mean_at(xs.len() - 1) {
        SeriesLabelPosition::UpperRight
    } else {
        SeriesLabelPosition::UpperLeft
    };
    chart
        .configure_series_labels()
        .position(corner)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

#[cfg(test)]
pub(super) mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::report::JsonRun;

    pub(in crate::compare) fn outcome(
        name: &str,
        micros: f64,
        write_amp: Option<f64>,
    ) -> JsonOutcome {
        JsonOutcome {
            name: name.to_owned(),
            ops: 1000,
            seconds: micros * 1e-3,
            micros_per_op: micros,
            ops_per_sec: 1e6 / micros,
            mb_per_sec: None,
            found: None,
            db_bytes: None,
            latency: None,
            note: String::new(),
            skipped: false,
            io_write_bytes: write_amp.map(|w| (w * 116_000.0) as u64),
            io_cancelled_write_bytes: write_amp.map(|_| 0),
            io_wchar: None,
            user_bytes_written: write_amp.map(|_| 116_000),
            write_amp,
            write_amp_source: write_amp.map(|_| "write_bytes".to_owned()),
        }
    }

    pub(in crate::compare) fn run(engine: &str, num: u64, results: Vec<JsonOutcome>) -> JsonRun {
        JsonRun {
            engine: engine.to_owned(),
            num,
            key_size: 16,
            value_size: 100,
            threads: 1,
            key_order: "shuffle".into(),
            cache_size: 4 << 20,
            write_buffer_size: 4 << 20,
            compression: true,
            results,
            peak_memory_bytes: None,
            peak_anon_memory_bytes: None,
            disk_bytes_after_close: None,
        }
    }

    /// strata at 1M and 10M entries, LevelDB at 1M only, and a configuration that is not
    /// scale's; fillrandom is a write with write amplification, readrandom a read.
    pub(in crate::compare) fn synthetic() -> Results {
        let mut results: Results = BTreeMap::new();
        let mut put = |key: &str, engine: &str, num, outcomes| {
            results
                .entry(key.to_owned())
                .or_default()
                .entry(engine.to_owned())
                .or_default()
                .push(run(engine, num, outcomes));
        };
        put(
            "scale-1000000",
            "strata",
            1_000_000,
            vec![
                outcome("fillrandom", 1.5, Some(2.0)),
                outcome("readrandom", 2.0, None),
            ],
        );
        put(
            "scale-10000000",
            "strata",
            10_000_000,
            vec![
                outcome("fillrandom", 3.0, Some(4.25)),
                outcome("readrandom", 5.0, None),
            ],
        );
        put(
            "scale-1000000",
            "leveldb",
            1_000_000,
            vec![
                outcome("fillrandom", 4.0, Some(6.0)),
                outcome("readrandom", 8.0, None),
            ],
        );
        put(
            "baseline",
            "strata",
            1000,
            vec![outcome("fillrandom", 99.0, None)],
        );
        results
    }

    /// Every element opened is closed, in order: the file is well-formed as far as tags go.
    fn assert_tags_balance(svg: &str) {
        let mut open: Vec<&str> = Vec::new();
        let mut rest = svg;
        while let Some(start) = rest.find('<') {
            let end = start + rest[start..].find('>').expect("a tag ends");
            let tag = &rest[start + 1..end];
            rest = &rest[end + 1..];
            if tag.starts_with('?') || tag.starts_with('!') || tag.ends_with('/') {
                continue;
            }
            if let Some(closing) = tag.strip_prefix('/') {
                assert_eq!(open.pop(), Some(closing.trim()), "in {svg}");
            } else {
                open.push(tag.split_whitespace().next().expect("a tag name"));
            }
        }
        assert!(open.is_empty(), "unclosed: {open:?}");
    }

    #[test]
    fn the_section_tabulates_and_charts_cost_against_entries() {
        let dir = tempfile::tempdir().unwrap();
        let engines = vec!["strata".to_owned(), "leveldb".to_owned()];
        let results = synthetic();
        let (md, html) = section(dir.path(), &engines, &results).unwrap();

        // Columns ascend by entries though the keys sort the other way as strings.
        assert!(md.contains("| engine | 1M | 10M |"), "{md}");
        assert!(md.contains("#### fillrandom\n\nmicros/op:\n\n| engine | 1M | 10M |\n|---|---|---|\n| strata | 1.500 | 3.000 |\n| leveldb | 4.000 | — |\n"), "{md}");
        assert!(md.contains("write amplification:\n\n| engine | 1M | 10M |\n|---|---|---|\n| strata | 2.00 | 4.25 |\n| leveldb | 6.00 | — |\n"), "{md}");
        assert!(md.contains("| strata | 2.000 | 5.000 |"), "{md}");
        // A read has no write amplification table; benchmarks without results have no section.
        let readrandom = &md[md.find("#### readrandom").unwrap()..];
        assert!(!readrandom.contains("write amplification"), "{md}");
        assert!(!md.contains("#### fillseq"), "{md}");
        // The other configuration's figures stay out.
        assert!(!md.contains("99.000"), "{md}");
        assert!(
            html.contains("<td>strata</td><td>1.500</td><td>3.000</td>"),
            "{html}"
        );
        assert!(html.contains("<img src=\"scale-fillrandom.svg\""), "{html}");

        for b in ["fillrandom", "readrandom"] {
            let svg = std::fs::read_to_string(dir.path().join(format!("scale-{b}.svg"))).unwrap();
            assert!(svg.trim_start().starts_with("<svg"), "{svg}");
            assert!(svg.trim_end().ends_with("</svg>"), "{svg}");
            assert_tags_balance(&svg);
            // A line per engine plus its legend sample; the axis labels at the sizes.
            assert!(svg.matches("<polyline").count() >= 4, "{svg}");
            for text in ["strata", "leveldb", "\n1M\n", "\n10M\n", "micros/op"] {
                assert!(svg.contains(text), "{text} missing from {svg}");
            }
        }
    }

    #[test]
    fn without_scale_runs_the_section_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let mut results = synthetic();
        results.retain(|k, _| !k.starts_with("scale-"));
        results.insert("scale-x".into(), BTreeMap::new());
        let (md, html) = section(dir.path(), &["strata".to_owned()], &results).unwrap();
        assert!(md.is_empty() && html.is_empty());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn entries_are_labelled_briefly() {
        assert_eq!(entries_label(2000), "2K");
        assert_eq!(entries_label(1_000_000), "1M");
        assert_eq!(entries_label(100_000_000), "100M");
        assert_eq!(entries_label(1500), "1,500");
        assert_eq!(entries_label(999), "999");
    }
}
