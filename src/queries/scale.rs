//! `air bench scale`: a query's throughput at 1..W workers (and at 1..N
//! ranks through a launcher such as `mpirun`), against the ideal line
//! (linear in the smallest run's rate per worker), as a table, CSV and PNG.
//!
//! Every point is a separate `air run <query> … --workers w --report r.json`
//! process (strong scaling: the query's own arguments, hence the same input,
//! at every point); each point is run `--repeats` times, interleaved across
//! points (the machine drifts), and the median events/s is kept. Efficiency
//! = events/s ÷ (workers × the 1-worker events/s per worker).

use super::common::CliError;
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};

/// `air bench scale`.
#[derive(clap::Args, Debug, Clone)]
pub struct ScaleArgs {
    /// Worker counts to run, e.g. `1,2` or `1-4` (default: 1 up to one per
    /// physical core this process may use).
    #[arg(long, value_name = "LIST")]
    pub workers: Option<String>,
    /// Rank counts to run through `--launcher` (e.g. `1,2,4`), each with
    /// `--rank-workers` workers per rank; none by default.
    #[arg(long, value_name = "LIST")]
    pub ranks: Option<String>,
    /// Workers per rank for the `--ranks` points.
    #[arg(long, default_value_t = 1)]
    pub rank_workers: usize,
    /// Launcher for the `--ranks` points; `{n}` is replaced by the rank
    /// count (split on whitespace).
    #[arg(long, default_value = "mpirun -np {n}")]
    pub launcher: String,
    /// Runs per point (median kept).
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Write the points as CSV.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Plot events/s and efficiency against workers, with the ideal line.
    #[arg(long, value_name = "FILE.png")]
    pub plot: Option<PathBuf>,
    /// The query and its arguments, after `--`: e.g. `-- ysb --events
    /// 100000000` or `-- nexmark --query q7` (no `--workers`, `--report`).
    #[arg(last = true, required = true, value_name = "QUERY ARGS")]
    pub query: Vec<String>,
}

/// One point of the curve.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// `workers` (one process) or `ranks` (through the launcher).
    pub kind: &'static str,
    /// Ranks (1 for `workers` points).
    pub ranks: usize,
    /// Workers in the whole job.
    pub workers: usize,
    /// Median events/s of the job.
    pub events_per_s: f64,
    /// Every run's events/s, in run order.
    pub runs: Vec<f64>,
    /// events/s ÷ (workers × the first point's events/s per worker).
    pub efficiency: f64,
}

/// Parses `1,2,4` or `1-4` (or a mix) into sorted distinct positive counts.
pub fn parse_counts(s: &str) -> Result<Vec<usize>, String> {
    let mut v = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let num = |x: &str| -> Result<usize, String> {
            match x.trim().parse::<usize>() {
                Ok(n) if (1..=4096).contains(&n) => Ok(n),
                _ => Err(format!("{s:?}: {x:?} is not a count in 1..=4096")),
            }
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return Err(format!("{s:?}: range {part} is backwards"));
                }
                v.extend(a..=b);
            }
            None => v.push(num(part)?),
        }
    }
    if v.is_empty() {
        return Err(format!("{s:?}: no counts"));
    }
    v.sort_unstable();
    v.dedup();
    Ok(v)
}

fn run_point(
    air: &Path,
    launcher: Option<&[String]>,
    query: &[String],
    workers: usize,
    report: &Path,
) -> Result<f64, CliError> {
    let run = super::child::run_air(air, launcher, query, workers, report)?;
    run.number("events_per_s", &format!("air run {}", query.join(" ")))
}

/// `air bench scale`.
///
/// # Errors
/// Bad counts or options; a run that fails (its command and stderr are in
/// the message); an unwritable `--csv`/`--plot`.
pub fn main(a: &ScaleArgs) -> Result<(), CliError> {
    let bad = |m: String| CliError::BadInput(m);
    if a.query.is_empty() {
        return Err(bad("name the query after `--`, e.g. `-- ysb`".into()));
    }
    if a.query.iter().any(|q| q == "--workers" || q == "--report") {
        return Err(bad(
            "the query's arguments may not set --workers or --report (the benchmark does)".into(),
        ));
    }
    if a.repeats == 0 {
        return Err(bad("--repeats must be at least 1".into()));
    }
    let workers = match &a.workers {
        Some(s) => parse_counts(s).map_err(bad)?,
        None => (1..=air_runtime::placement::default_workers(false).max(1)).collect(),
    };
    let ranks = match &a.ranks {
        Some(s) => parse_counts(s).map_err(bad)?,
        None => Vec::new(),
    };
    if a.rank_workers == 0 {
        return Err(bad("--rank-workers must be at least 1".into()));
    }
    let air = std::env::current_exe().map_err(|e| bad(format!("locating air: {e}")))?;
    let dir = super::child::scratch_dir("scale")?;
    let report = dir.join("scale-report.json");
    // (kind, ranks, workers, launcher)
    let mut plan: Vec<(&'static str, usize, usize, Option<Vec<String>>)> =
        workers.iter().map(|&w| ("workers", 1, w, None)).collect();
    for &n in &ranks {
        let l = super::child::launcher_argv(&a.launcher, n)?;
        plan.push(("ranks", n, n * a.rank_workers, Some(l)));
    }
    let mut runs: Vec<Vec<f64>> = vec![Vec::new(); plan.len()];
    for rep in 0..a.repeats {
        for (i, (_, _, w, l)) in plan.iter().enumerate() {
            let per_process = if l.is_some() { a.rank_workers } else { *w };
            let eps = run_point(&air, l.as_deref(), &a.query, per_process, &report)?;
            eprintln!(
                "  run {}/{}: {} workers{}: {:.1} M events/s",
                rep + 1,
                a.repeats,
                w,
                if l.is_some() {
                    format!(" ({} ranks)", plan[i].1)
                } else {
                    String::new()
                },
                eps / 1e6
            );
            runs[i].push(eps);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let median = super::child::median;
    let base = {
        let (_, _, w, _) = &plan[0];
        median(&runs[0]) / *w as f64
    };
    let points: Vec<Point> = plan
        .iter()
        .zip(&runs)
        .map(|((kind, ranks, w, _), r)| {
            let m = median(r);
            Point {
                kind,
                ranks: *ranks,
                workers: *w,
                events_per_s: m,
                runs: r.clone(),
                efficiency: m / (*w as f64 * base),
            }
        })
        .collect();
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "scaling of `air run {}` (median of {}; ideal = workers x {:.1} M events/s)",
        a.query.join(" "),
        a.repeats,
        base / 1e6
    )?;
    writeln!(
        out,
        "{:>8} {:>6} {:>8} {:>14} {:>14} {:>10}",
        "kind", "ranks", "workers", "M events/s", "ideal", "efficiency"
    )?;
    for p in &points {
        writeln!(
            out,
            "{:>8} {:>6} {:>8} {:>14.1} {:>14.1} {:>9.0}%",
            p.kind,
            p.ranks,
            p.workers,
            p.events_per_s / 1e6,
            p.workers as f64 * base / 1e6,
            p.efficiency * 100.0
        )?;
    }
    if let Some(path) = &a.csv {
        let mut f =
            std::fs::File::create(path).map_err(|e| bad(format!("{}: {e}", path.display())))?;
        writeln!(f, "kind,ranks,workers,events_per_s,efficiency,runs")?;
        for p in &points {
            let runs: Vec<String> = p.runs.iter().map(|r| format!("{r:.0}")).collect();
            writeln!(
                f,
                "{},{},{},{:.0},{:.4},{}",
                p.kind,
                p.ranks,
                p.workers,
                p.events_per_s,
                p.efficiency,
                runs.join(" ")
            )?;
        }
    }
    if let Some(path) = &a.plot {
        let title = format!("air run {}: scaling", a.query.join(" "));
        write_plot(&points, base, path, &title)
            .map_err(|e| CliError::Other(anyhow::anyhow!("{}: {e}", path.display())))?;
    }
    Ok(())
}

/// Events/s (M, left) against workers with the ideal line, and the
/// efficiency (%) in a strip below.
fn write_plot(points: &[Point], base: f64, path: &Path, title: &str) -> Result<(), String> {
    use plotters::prelude::*;
    air_tools::ring_bench::register_fonts();
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let wmax = points.iter().map(|p| p.workers).max().unwrap_or(1) as f64;
    let ymax = points
        .iter()
        .map(|p| p.events_per_s / 1e6)
        .fold(wmax * base / 1e6, f64::max)
        * 1.15;
    let root = BitMapBackend::new(path, (1100, 900)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let (top, bottom) = root.split_vertically(620);
    let mut chart = ChartBuilder::on(&top)
        .caption(title, ("sans-serif", 22).into_font())
        .margin(16)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0.5f64..wmax + 0.5, 0f64..ymax)
        .map_err(|x| e(&x))?;
    let whole = |x: &f64| {
        if (x - x.round()).abs() < 1e-9 {
            format!("{x:.0}")
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .x_desc("workers")
        .x_labels(wmax as usize * 2 + 2)
        .x_label_formatter(&whole)
        .y_desc("M events/s")
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .draw()
        .map_err(|x| e(&x))?;
    chart
        .draw_series(plotters::series::DashedLineSeries::new(
            vec![(1.0, base / 1e6), (wmax, wmax * base / 1e6)],
            8,
            6,
            BLACK.stroke_width(1),
        ))
        .map_err(|x| e(&x))?
        .label("ideal")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], BLACK.stroke_width(2)));
    for (kind, col) in [
        ("workers", RGBColor(214, 39, 40)),
        ("ranks", RGBColor(31, 119, 180)),
    ] {
        let pts: Vec<(f64, f64)> = points
            .iter()
            .filter(|p| p.kind == kind)
            .map(|p| (p.workers as f64, p.events_per_s / 1e6))
            .collect();
        if pts.is_empty() {
            continue;
        }
        let label = if kind == "workers" {
            "one process, W workers"
        } else {
            "W ranks (launcher)"
        };
        chart
            .draw_series(LineSeries::new(pts.clone(), col.stroke_width(2)))
            .map_err(|x| e(&x))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], col.stroke_width(3)));
        chart
            .draw_series(pts.iter().map(|p| Circle::new(*p, 5, col.filled())))
            .map_err(|x| e(&x))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .draw()
        .map_err(|x| e(&x))?;
    let mut eff = ChartBuilder::on(&bottom)
        .margin(16)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0.5f64..wmax + 0.5, 0f64..120f64)
        .map_err(|x| e(&x))?;
    eff.configure_mesh()
        .x_desc("workers")
        .x_labels(wmax as usize * 2 + 2)
        .x_label_formatter(&whole)
        .y_desc("efficiency (%)")
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .draw()
        .map_err(|x| e(&x))?;
    for (kind, col) in [
        ("workers", RGBColor(214, 39, 40)),
        ("ranks", RGBColor(31, 119, 180)),
    ] {
        let pts: Vec<(f64, f64)> = points
            .iter()
            .filter(|p| p.kind == kind)
            .map(|p| (p.workers as f64, p.efficiency * 100.0))
            .collect();
        eff.draw_series(LineSeries::new(pts.clone(), col.stroke_width(2)))
            .map_err(|x| e(&x))?;
        eff.draw_series(pts.iter().map(|p| Circle::new(*p, 4, col.filled())))
            .map_err(|x| e(&x))?;
    }
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_counts;

    #[test]
    fn counts_parse_lists_and_ranges() {
        assert_eq!(parse_counts("1-3,8,2").unwrap(), vec![1, 2, 3, 8]);
        assert_eq!(parse_counts(" 4 ").unwrap(), vec![4]);
        assert!(parse_counts("0").is_err());
        assert!(parse_counts("3-1").is_err());
        assert!(parse_counts("a").is_err());
        assert!(parse_counts(",").is_err());
    }
}
