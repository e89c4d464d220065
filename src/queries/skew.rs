//! `air bench skew`: what hot keys cost, and what `--rebalance` wins back
//! (issue 32). WA and YSB with every event sent to its key's owner (`air
//! run wa --shuffle`, `air run ysb --shuffle`), Zipf-distributed keys (WA)
//! or campaigns (YSB) at several exponents, with the senders' hot-key
//! aggregation ([`air_runtime::hotkeys`]) off and on.
//!
//! Every run is a separate `air run wa --shuffle --keys K --zipf S
//! --workers W --no-pin --events N --rebalance off|on --report r.json`
//! (or `air run ysb --shuffle --event-time synthetic --zipf S …`, over
//! YSB's 100 campaigns) process ([`super::child::run_air`]: its CPU time
//! from `wait4`). Runs are interleaved, `--repeats` rounds: each round runs
//! every configuration once, (WA S₀ off, WA S₀ on, WA S₁ off, …, YSB S₀
//! off, …) in even rounds and the reverse in odd ones, so neither
//! rebalance setting, query nor exponent always runs first on a drifting
//! machine.
//!
//! Per run: events/s, events per CPU-second, the keyed stage's load (the
//! report's `load.max_over_mean`: the busiest worker's records over the
//! mean), the records kept at their senders (`load.rebalance.records`, as
//! a share of the events) and the partials sent. The table gives the
//! medians per configuration and, per exponent, on ÷ off of throughput and
//! of max/mean; the CSV one row per run; the PNG max/mean and events/s
//! against the exponent, off and on.

use super::child::{median, run_air, scratch_dir};
use super::common::CliError;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Which queries `air bench skew` runs.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkewQuery {
    /// `air run wa --shuffle` (`--keys` keys).
    Wa,
    /// `air run ysb --shuffle` (100 campaigns).
    Ysb,
    /// Both, interleaved.
    Both,
}

impl SkewQuery {
    /// The queries to run, in order.
    pub fn queries(self) -> &'static [&'static str] {
        match self {
            SkewQuery::Wa => &["wa"],
            SkewQuery::Ysb => &["ysb"],
            SkewQuery::Both => &["wa", "ysb"],
        }
    }
}

/// `air bench skew`.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchSkewArgs {
    /// The queries: `wa`, `ysb` or `both` (interleaved).
    #[arg(long, value_enum, default_value_t = SkewQuery::Both)]
    pub query: SkewQuery,
    /// Workers of every run (one process).
    #[arg(long, default_value_t = 8, value_parser = super::common::parse::workers)]
    pub workers: usize,
    /// Events per run (the generator's, all workers).
    #[arg(long, default_value_t = 20_000_000)]
    pub events: u64,
    /// Distinct keys of WA (YSB has its 100 campaigns).
    #[arg(long, default_value_t = 100_000, value_parser = super::common::parse::keys)]
    pub keys: u64,
    /// Zipf exponents, e.g. `0,0.8,1.2,1.5` (0: uniform keys).
    #[arg(long, value_name = "LIST", default_value = "0,0.8,1.2,1.5")]
    pub zipf: String,
    /// Rounds of runs (every configuration once per round); the median of
    /// each figure is kept.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Write one row per run as CSV.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Draw the load's max/mean (top) and M events/s (bottom) against the
    /// exponent, rebalance off and on, as PNG.
    #[arg(long, value_name = "FILE.png")]
    pub plot: Option<PathBuf>,
    /// More arguments for every run (`air run wa` and `air run ysb`), after
    /// `--` (e.g. `-- --rebalance-ms 50`); not those the benchmark sets.
    #[arg(last = true, value_name = "ARGS")]
    pub extra: Vec<String>,
}

/// Options `air bench skew` gives every run itself.
const SETS: [&str; 9] = [
    "--event-time",
    "--shuffle",
    "--keys",
    "--zipf",
    "--workers",
    "--events",
    "--rebalance",
    "--report",
    "--no-pin",
];

/// One run's figures (a CSV row).
#[derive(Debug, Clone)]
pub struct SkewRun {
    /// The query, `wa` or `ysb`.
    pub query: &'static str,
    /// The round, from 0.
    pub round: usize,
    /// Its place in the whole sequence of runs, from 0.
    pub seq: usize,
    /// The Zipf exponent.
    pub zipf: f64,
    /// `--rebalance on`.
    pub rebalance: bool,
    /// Events read (the report's).
    pub events: u64,
    /// Events/s of the job (the report's).
    pub events_per_s: f64,
    /// User + system CPU of the process, s.
    pub cpu_s: f64,
    /// Spawn to reap, s.
    pub wall_s: f64,
    /// The report's `load.max_over_mean`.
    pub max_over_mean: f64,
    /// Records kept (aggregated) at their senders.
    pub kept: u64,
    /// Partials sent for them.
    pub partials: u64,
    /// The most key groups one sender judged hot at once.
    pub groups_max: u64,
    /// Key groups that turned hot or cold.
    pub group_changes: u64,
}

impl SkewRun {
    /// Events per CPU-second.
    pub fn events_per_cpu_s(&self) -> f64 {
        self.events as f64 / self.cpu_s.max(1e-9)
    }

    /// Records kept at their senders, % of the events.
    pub fn kept_pct(&self) -> f64 {
        100.0 * self.kept as f64 / self.events.max(1) as f64
    }
}

/// Medians of one configuration's runs.
#[derive(Debug, Clone, Copy)]
pub struct SkewRow {
    /// The query, `wa` or `ysb`.
    pub query: &'static str,
    /// The Zipf exponent.
    pub zipf: f64,
    /// `--rebalance on`.
    pub rebalance: bool,
    /// Median events/s.
    pub events_per_s: f64,
    /// Median events per CPU-second.
    pub events_per_cpu_s: f64,
    /// Median load max/mean.
    pub max_over_mean: f64,
    /// Median % of the events kept at their senders.
    pub kept_pct: f64,
    /// Median partials.
    pub partials: f64,
}

/// Parses `0,0.8,1.2` into distinct exponents, ascending.
///
/// # Errors
/// A value that is not an exponent (≥ 0), or no value.
pub fn parse_exponents(s: &str) -> Result<Vec<f64>, String> {
    let mut v = Vec::new();
    for x in s.split(',').map(str::trim) {
        if x.is_empty() {
            return Err(format!("--zipf {s:?}: an empty exponent between commas"));
        }
        v.push(super::common::parse::zipf(x).map_err(|e| format!("--zipf {s:?}: {e}"))?);
    }
    if v.is_empty() {
        return Err(format!("--zipf {s:?}: no exponents"));
    }
    v.sort_by(f64::total_cmp);
    v.dedup();
    Ok(v)
}

/// The configurations, (query, exponent, rebalance), in the order of round
/// `round`: the queries in order, each's exponents ascending with off
/// first in even rounds, the reverse in odd.
pub fn round_order(
    queries: &[&'static str],
    exponents: &[f64],
    round: usize,
) -> Vec<(&'static str, f64, bool)> {
    let mut v: Vec<(&'static str, f64, bool)> = queries
        .iter()
        .flat_map(|&q| {
            exponents
                .iter()
                .flat_map(move |&s| [(q, s, false), (q, s, true)])
        })
        .collect();
    if round % 2 == 1 {
        v.reverse();
    }
    v
}

/// The medians of the runs of (`query`, `zipf`, `rebalance`).
pub fn row_of(runs: &[SkewRun], query: &'static str, zipf: f64, rebalance: bool) -> SkewRow {
    let mine: Vec<&SkewRun> = runs
        .iter()
        .filter(|r| r.query == query && r.zipf == zipf && r.rebalance == rebalance)
        .collect();
    let of = |f: &dyn Fn(&SkewRun) -> f64| median(&mine.iter().map(|r| f(r)).collect::<Vec<_>>());
    SkewRow {
        query,
        zipf,
        rebalance,
        events_per_s: of(&|r| r.events_per_s),
        events_per_cpu_s: of(&|r| r.events_per_cpu_s()),
        max_over_mean: of(&|r| r.max_over_mean),
        kept_pct: of(&|r| r.kept_pct()),
        partials: of(&|r| r.partials as f64),
    }
}

fn on_off(on: bool) -> &'static str {
    if on {
        "on"
    } else {
        "off"
    }
}

/// `air bench skew`.
///
/// # Errors
/// Bad options (exit 2); a run that fails (its command and stderr are in
/// the message) or whose report lacks a figure; an unwritable `--csv` or
/// `--plot`.
pub fn main(a: &BenchSkewArgs) -> Result<(), CliError> {
    let bad = |m: String| CliError::BadInput(m);
    let exponents = parse_exponents(&a.zipf).map_err(bad)?;
    if a.repeats == 0 {
        return Err(bad("--repeats must be at least 1".into()));
    }
    if a.events == 0 {
        return Err(bad("--events must be at least 1".into()));
    }
    if let Some(x) = a.extra.iter().find(|x| {
        SETS.iter()
            .any(|o| x.as_str() == *o || x.starts_with(&format!("{o}=")))
    }) {
        return Err(bad(format!(
            "the arguments after `--` may not set {x} (the benchmark does)"
        )));
    }
    let air = std::env::current_exe().map_err(|e| bad(format!("locating air: {e}")))?;
    let dir = scratch_dir("bench-skew")?;
    let report = dir.join("run.json");
    let queries = a.query.queries();
    let total = a.repeats * queries.len() * exponents.len() * 2;
    let mut runs: Vec<SkewRun> = Vec::with_capacity(total);
    let result = (|| -> Result<(), CliError> {
        for round in 0..a.repeats {
            for (query, zipf, on) in round_order(queries, &exponents, round) {
                let mut args: Vec<String> = vec![query.into(), "--shuffle".into()];
                if query == "wa" {
                    args.extend(["--keys".into(), a.keys.to_string()]);
                } else {
                    // Reproducible event times (YSB's default is the wall
                    // clock).
                    args.extend(["--event-time".into(), "synthetic".into()]);
                }
                args.extend([
                    "--zipf".into(),
                    zipf.to_string(),
                    "--events".into(),
                    a.events.to_string(),
                    "--no-pin".into(),
                    "--rebalance".into(),
                    on_off(on).into(),
                ]);
                args.extend(a.extra.iter().cloned());
                let run = run_air(&air, None, &args, a.workers, &report)?;
                let what = format!("air run {}", args.join(" "));
                let load = &run.report["load"];
                let hot = &load["rebalance"];
                let int = |v: &serde_json::Value, f: &str| {
                    v[f].as_u64()
                        .ok_or_else(|| bad(format!("{what}: no load.rebalance.{f} in its report")))
                };
                let r = SkewRun {
                    query,
                    round,
                    seq: runs.len(),
                    zipf,
                    rebalance: on,
                    events: run.number("events", &what)? as u64,
                    events_per_s: run.number("events_per_s", &what)?,
                    cpu_s: run.cpu_s,
                    wall_s: run.wall_s,
                    max_over_mean: load["max_over_mean"].as_f64().ok_or_else(|| {
                        bad(format!("{what}: no load.max_over_mean in its report"))
                    })?,
                    kept: int(hot, "records")?,
                    partials: int(hot, "partials")?,
                    groups_max: int(hot, "groups_max")?,
                    group_changes: int(hot, "group_changes")?,
                };
                eprintln!(
                    "  [{}/{total}] {query} zipf {zipf} rebalance {}: {:.2} M events/s, \
                     max/mean {:.2}, {:.1}% kept, {:.2} CPU s",
                    runs.len() + 1,
                    on_off(on),
                    r.events_per_s / 1e6,
                    r.max_over_mean,
                    r.kept_pct(),
                    r.cpu_s
                );
                runs.push(r);
            }
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result?;
    let rows: Vec<SkewRow> = queries
        .iter()
        .flat_map(|&q| {
            let runs = &runs;
            exponents
                .iter()
                .flat_map(move |&s| [row_of(runs, q, s, false), row_of(runs, q, s, true)])
        })
        .collect();
    print_table(a, &rows, &mut std::io::stdout().lock())?;
    if let Some(path) = &a.csv {
        let f = std::fs::File::create(path).map_err(|e| bad(format!("{}: {e}", path.display())))?;
        write_csv(&runs, std::io::BufWriter::new(f))
            .map_err(|e| bad(format!("{}: {e}", path.display())))?;
    }
    if let Some(path) = &a.plot {
        let what = match a.query {
            SkewQuery::Wa => format!("air run wa --shuffle ({} keys)", a.keys),
            SkewQuery::Ysb => "air run ysb --shuffle (100 campaigns)".to_string(),
            SkewQuery::Both => format!("wa ({} keys) and ysb --shuffle", a.keys),
        };
        let title = format!(
            "{what}: {} workers, {} M events, median of {}",
            a.workers,
            a.events as f64 / 1e6,
            a.repeats
        );
        write_plot(&rows, &runs, path, &title).map_err(|e| CliError::Other(anyhow::anyhow!(e)))?;
    }
    Ok(())
}

/// The table: medians per configuration, then on ÷ off per exponent.
fn print_table(a: &BenchSkewArgs, rows: &[SkewRow], out: &mut dyn Write) -> std::io::Result<()> {
    let extra = a
        .extra
        .iter()
        .fold(String::new(), |s, x| format!("{s} {x}"));
    for q in a.query.queries() {
        let how = if *q == "wa" {
            format!("--keys {}", a.keys)
        } else {
            "--event-time synthetic".to_string()
        };
        writeln!(
            out,
            "air bench skew: air run {q} --shuffle {how} --workers {} --no-pin --events \
             {}{extra}, median of {}",
            a.workers, a.events, a.repeats
        )?;
    }
    writeln!(
        out,
        "{:>5} {:>6} {:>9} {:>11} {:>11} {:>9} {:>7} {:>10}",
        "query", "zipf", "rebalance", "M events/s", "M ev/CPU-s", "max/mean", "kept %", "partials"
    )?;
    for r in rows {
        writeln!(
            out,
            "{:>5} {:>6} {:>9} {:>11.2} {:>11.2} {:>9.2} {:>7.1} {:>10.0}",
            r.query,
            r.zipf,
            on_off(r.rebalance),
            r.events_per_s / 1e6,
            r.events_per_cpu_s / 1e6,
            r.max_over_mean,
            r.kept_pct,
            r.partials
        )?;
    }
    writeln!(out, "on / off:")?;
    writeln!(
        out,
        "{:>5} {:>6} {:>11} {:>11} {:>9}",
        "query", "zipf", "events/s", "ev/CPU-s", "max/mean"
    )?;
    for pair in rows.chunks(2) {
        let (off, on) = (&pair[0], &pair[1]);
        let ratio = |x: f64, y: f64| x / y.max(1e-12);
        writeln!(
            out,
            "{:>5} {:>6} {:>10.2}x {:>10.2}x {:>8.2}x",
            off.query,
            off.zipf,
            ratio(on.events_per_s, off.events_per_s),
            ratio(on.events_per_cpu_s, off.events_per_cpu_s),
            ratio(on.max_over_mean, off.max_over_mean)
        )?;
    }
    writeln!(
        out,
        "max/mean: the busiest worker's records at the keyed stage over the mean; kept %: \
         events aggregated at their senders (hot keys), partials sent instead."
    )
}

/// The CSV header.
pub const CSV_COLUMNS: &str = "query,round,seq,zipf,rebalance,events,events_per_s,cpu_s,wall_s,\
                               events_per_cpu_s,max_over_mean,kept,kept_pct,partials,\
                               groups_max,group_changes";

/// One row per run, in run order.
fn write_csv(runs: &[SkewRun], mut f: impl Write) -> std::io::Result<()> {
    writeln!(f, "{CSV_COLUMNS}")?;
    for r in runs {
        writeln!(
            f,
            "{},{},{},{},{},{},{:.0},{:.3},{:.3},{:.0},{:.4},{},{:.3},{},{},{}",
            r.query,
            r.round,
            r.seq,
            r.zipf,
            on_off(r.rebalance),
            r.events,
            r.events_per_s,
            r.cpu_s,
            r.wall_s,
            r.events_per_cpu_s(),
            r.max_over_mean,
            r.kept,
            r.kept_pct(),
            r.partials,
            r.groups_max,
            r.group_changes
        )?;
    }
    f.flush()
}

/// Max/mean (top) and M events/s (bottom) against the exponent: the
/// medians as lines, off and on, every run as a small dot.
fn write_plot(rows: &[SkewRow], runs: &[SkewRun], path: &Path, title: &str) -> Result<(), String> {
    use plotters::prelude::*;
    air_tools::ring_bench::register_fonts();
    let e = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let (xmin, xmax) = rows
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), r| {
            (a.min(r.zipf), b.max(r.zipf))
        });
    let pad = ((xmax - xmin) * 0.08).max(0.1);
    let xr = (xmin - pad)..(xmax + pad);
    let root = BitMapBackend::new(path, (1100, 1000)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let root = root
        .titled(title, ("sans-serif", 22).into_font())
        .map_err(|x| e(&x))?;
    let (top, bottom) = root.split_vertically(470);
    // Per (query, rebalance): a colour; YSB's points are triangles.
    let colour = |q: &str, on: bool| match (q, on) {
        ("wa", false) => RGBColor(214, 39, 40),
        ("wa", true) => RGBColor(31, 119, 180),
        (_, false) => RGBColor(255, 127, 14),
        (_, true) => RGBColor(44, 160, 44),
    };
    let mut queries: Vec<&'static str> = rows.iter().map(|r| r.query).collect();
    queries.dedup();
    // The top panel draws the load, the bottom one M events/s.
    let pick = |load: bool, m: f64, eps: f64| if load { m } else { eps / 1e6 };
    for (area, desc, load) in [
        (&top, "load max/mean", true),
        (&bottom, "M events/s", false),
    ] {
        let ymax = rows
            .iter()
            .map(|r| pick(load, r.max_over_mean, r.events_per_s))
            .chain(
                runs.iter()
                    .map(|r| pick(load, r.max_over_mean, r.events_per_s)),
            )
            .fold(0.0f64, f64::max)
            .max(1.0)
            * 1.15;
        let mut chart = ChartBuilder::on(area)
            .margin(16)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d(xr.clone(), 0f64..ymax)
            .map_err(|x| e(&x))?;
        chart
            .configure_mesh()
            .x_desc("Zipf exponent")
            .y_desc(desc)
            .label_style(("sans-serif", 15))
            .axis_desc_style(("sans-serif", 17))
            .draw()
            .map_err(|x| e(&x))?;
        for (q, on) in queries.iter().flat_map(|&q| [(q, false), (q, true)]) {
            let col = colour(q, on);
            let pts: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| r.query == q && r.rebalance == on)
                .map(|r| (r.zipf, pick(load, r.max_over_mean, r.events_per_s)))
                .collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), col.stroke_width(2)))
                .map_err(|x| e(&x))?
                .label(format!("{q} rebalance {}", on_off(on)))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 24, y)], col.stroke_width(3))
                });
            let ysb = q == "ysb";
            let mark = move |p: (f64, f64), size: i32, style: ShapeStyle| {
                if ysb {
                    TriangleMarker::new(p, size + 1, style).into_dyn()
                } else {
                    Circle::new(p, size, style).into_dyn()
                }
            };
            chart
                .draw_series(pts.iter().map(|p| mark(*p, 5, col.filled())))
                .map_err(|x| e(&x))?;
            chart
                .draw_series(
                    runs.iter()
                        .filter(|r| r.query == q && r.rebalance == on)
                        .map(|r| {
                            let p = (r.zipf, pick(load, r.max_over_mean, r.events_per_s));
                            mark(p, 2, col.mix(0.6).filled())
                        }),
                )
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
    }
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponents_parse_sorted_and_refuse_negatives() {
        assert_eq!(parse_exponents("1.2, 0,0.8,1.2").unwrap(), [0.0, 0.8, 1.2]);
        assert!(parse_exponents("-1").is_err());
        assert!(parse_exponents("x").is_err());
        assert!(parse_exponents(",").is_err());
    }

    #[test]
    fn rounds_alternate_their_order() {
        let s = [0.0, 1.2];
        let even = round_order(&["wa", "ysb"], &s, 0);
        assert_eq!(
            even,
            [
                ("wa", 0.0, false),
                ("wa", 0.0, true),
                ("wa", 1.2, false),
                ("wa", 1.2, true),
                ("ysb", 0.0, false),
                ("ysb", 0.0, true),
                ("ysb", 1.2, false),
                ("ysb", 1.2, true)
            ]
        );
        let mut odd = round_order(&["wa", "ysb"], &s, 1);
        odd.reverse();
        assert_eq!(odd, even);
        assert_eq!(round_order(&["wa", "ysb"], &s, 2), even);
    }
}
