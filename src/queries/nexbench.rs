//! `air bench nexmark`: the NEXMark suite as a benchmark. Every chosen
//! query ([`NexQuery`], all by default) runs at every worker count (and
//! rank count through a launcher) as a separate `air run nexmark --query q
//! --events N --workers w --report r.json` process, so that CPU time and
//! peak RSS are each run's own ([`super::child::run_air`]: `wait4`). Runs
//! are interleaved across queries and points, `--repeats` rounds (query
//! A, B, C at every point, then again), since the machine drifts.
//!
//! Per query and point: the median events/s (and its min–max over the
//! runs), events/s per worker, CPU seconds (user + system) and the cores
//! that kept busy, peak RSS, and events per CPU-second beside the Flink
//! suite's published throughput per core ([`FLINK`], quoted from
//! [`FLINK_SOURCE`]), with their ratio. Flink's "Throughput/Cores" is
//! events ÷ (cores × time), "cores" being the CPU usage measured on its
//! workers: events per CPU-second, the measure we put beside it.

use super::child::{launcher_argv, median, run_air, scratch_dir};
use super::common::CliError;
use super::nexmark::NexQuery;
use serde::Serialize;
use std::io::Write;
use std::path::PathBuf;

/// The event-time rate of the benchmark's runs, events/s: the rate of the
/// Flink suite's generator in its published runs (10 M records/s, see
/// [`FLINK_SOURCE`]).
pub const FLINK_EVENTS_PER_S: u64 = 10_000_000;

/// `air bench nexmark`.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchNexmarkArgs {
    /// The queries: `all` (every query `air run nexmark` has) or a list,
    /// e.g. `q1,q5,q7`.
    #[arg(long, value_name = "all|LIST", default_value = "all")]
    pub query: String,
    /// Worker counts of the one-process runs, e.g. `1,2` or `1-4`.
    #[arg(long, value_name = "LIST", default_value = "1,2")]
    pub workers: String,
    /// Rank counts to run through `--launcher` (e.g. `1,2`), each with
    /// `--rank-workers` workers per rank; none by default.
    #[arg(long, value_name = "LIST")]
    pub ranks: Option<String>,
    /// Workers per rank for the `--ranks` runs.
    #[arg(long, default_value_t = 1)]
    pub rank_workers: usize,
    /// Launcher for the `--ranks` runs; `{n}` is replaced by the rank count
    /// (split on whitespace).
    #[arg(long, default_value = "mpirun -np {n}")]
    pub launcher: String,
    /// Events per run (the generator's, all workers), stamped at the Flink
    /// suite's event-time rate of 10 M events/s (`--events-per-s
    /// 10000000`, unless given after `--`), as in its published runs.
    #[arg(long, default_value_t = 10_000_000)]
    pub events: u64,
    /// Rounds of runs (every query at every point once per round); the
    /// median of each figure is kept.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Write one row per query and point as CSV.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Draw events/s per worker per query, one bar per point, as PNG.
    #[arg(long, value_name = "FILE.png")]
    pub plot: Option<PathBuf>,
    /// Write the rows, every run's figures and the Flink source as JSON.
    #[arg(long, value_name = "FILE.json")]
    pub report: Option<PathBuf>,
    /// More arguments for every `air run nexmark`, after `--` (e.g. `--
    /// --no-pin`); not `--query`, `--events`, `--workers`, `--report`.
    #[arg(last = true, value_name = "ARGS")]
    pub extra: Vec<String>,
}

/// Where [`FLINK`] comes from.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct FlinkSource {
    /// The document quoted.
    pub url: &'static str,
    /// The commit of nexmark/nexmark that added the table to its README.
    pub commit: &'static str,
    /// Flink's version, as stated beside the table.
    pub version: &'static str,
    /// The machines and configuration, as stated beside the table.
    pub hardware: &'static str,
    /// The workload, as stated beside the table.
    pub workload: &'static str,
}

/// The source of the Flink figures.
pub const FLINK_SOURCE: FlinkSource = FlinkSource {
    url: "https://github.com/nexmark/nexmark/blob/master/GUIDE_V1.md#benchmark-results \
          (until 2025-03 in README.md, \"Benchmark Results\")",
    commit: "8ff9866ef7908967a7c40a82dd51c27140f738e4 (2021-05-31, \"[queries] Extend several \
             queries (#15)\"), still in GUIDE_V1.md at 6b3646c3 (2025-12-26) as \"an example \
             of result table\"",
    version: "Flink 1.13 (the README at that commit; GUIDE_V1.md now says 1.13 ~ 2.0)",
    hardware: "\"Minimum requirements: 3 worker node; each machine has 8 cores and 32 GB RAM; \
               800 GB SSD local disk\"; 8 TaskManagers of 1 slot, 8 GB each, parallelism 8, \
               exactly-once checkpoints every 3 min, RocksDB state backend (incremental), \
               MiniBatch (2 s, 5000 rows), split distinct aggregation",
    workload: "100 million events per query from the datagen source at 10 M records/s \
               (bids 92%, auctions 6%, persons 2%); Cores = CPU usage measured on the \
               workers; Throughput/Cores = events / (Cores x Time)",
};

/// One query's row of the published Flink table ([`FLINK_SOURCE`]), as
/// printed there.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct FlinkFigure {
    /// The query (`q5`).
    pub query: &'static str,
    /// "Cores": CPU cores used on average.
    pub cores: f64,
    /// "Time(s)" for 100 M events.
    pub time_s: f64,
    /// "Throughput/Cores", events per second per core (printed in K/s).
    pub events_per_core_s: f64,
}

const fn flink(query: &'static str, cores: f64, time_s: f64, k_per_s: f64) -> FlinkFigure {
    FlinkFigure {
        query,
        cores,
        time_s,
        events_per_core_s: k_per_s * 1000.0,
    }
}

/// The Flink suite's published figures, q0–q22 (q6 is not in the table:
/// Flink SQL cannot express it, FLINK-19059). Quoted from [`FLINK_SOURCE`].
pub const FLINK: &[FlinkFigure] = &[
    flink("q0", 8.45, 76.323, 155.02),
    flink("q1", 8.26, 76.643, 157.94),
    flink("q2", 8.23, 69.309, 175.21),
    flink("q3", 8.59, 76.531, 152.12),
    flink("q4", 12.85, 226.605, 34.33),
    flink("q5", 10.8, 418.242, 22.14),
    flink("q7", 14.21, 570.983, 12.33),
    flink("q8", 9.42, 72.673, 146.14),
    flink("q9", 16.11, 435.882, 14.24),
    flink("q10", 8.09, 213.795, 57.81),
    flink("q11", 10.6, 237.599, 39.7),
    flink("q12", 13.69, 96.559, 75.67),
    flink("q13", 8.24, 92.839, 130.73),
    flink("q14", 8.28, 74.861, 161.23),
    flink("q15", 8.73, 158.224, 72.42),
    flink("q16", 11.51, 466.008, 18.65),
    flink("q17", 9.24, 92.666, 116.8),
    flink("q18", 12.49, 149.076, 53.7),
    flink("q19", 21.38, 106.190, 44.04),
    flink("q20", 17.27, 305.099, 18.98),
    flink("q21", 8.33, 121.845, 98.49),
    flink("q22", 8.25, 93.244, 129.96),
];

/// The published Flink figure of a query, if there is one.
pub fn flink_figure(query: &str) -> Option<&'static FlinkFigure> {
    FLINK.iter().find(|f| f.query == query)
}

/// Where a query runs: one process of `workers` workers, or `ranks`
/// processes through the launcher.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Point {
    /// `workers` (one process) or `ranks` (through the launcher).
    pub kind: &'static str,
    /// Ranks (1 for `workers` points).
    pub ranks: usize,
    /// Workers in the whole job.
    pub workers: usize,
}

impl Point {
    fn label(&self) -> String {
        match self.kind {
            "workers" if self.workers == 1 => "1 worker".into(),
            "workers" => format!("{} workers", self.workers),
            _ => format!("{} ranks x {}", self.ranks, self.workers / self.ranks),
        }
    }
}

/// One run's figures.
#[derive(Debug, Clone, Serialize)]
pub struct RunFigures {
    /// Events read (the report's).
    pub events: u64,
    /// Events/s of the job (the report's: events ÷ the job's run time).
    pub events_per_s: f64,
    /// User + system CPU of the process (and its waited-for descendants), s.
    pub cpu_s: f64,
    /// Spawn to reap, s.
    pub wall_s: f64,
    /// Peak RSS, bytes: the report's (largest rank's `VmHWM`), else
    /// `wait4`'s `ru_maxrss`.
    pub peak_rss_bytes: u64,
}

/// One query at one point: medians over its runs.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The query (`q5`).
    pub query: String,
    /// Where it ran.
    #[serde(flatten)]
    pub point: Point,
    /// Events per run.
    pub events: u64,
    /// Median events/s of the job.
    pub events_per_s: f64,
    /// Smallest events/s of the runs.
    pub events_per_s_min: f64,
    /// Largest events/s of the runs.
    pub events_per_s_max: f64,
    /// Median events/s ÷ workers.
    pub events_per_s_per_worker: f64,
    /// Median CPU seconds (user + system) of a run.
    pub cpu_s: f64,
    /// Median cores kept busy: CPU s ÷ wall s of a run.
    pub cpu_cores: f64,
    /// Median CPU utilisation: CPU s ÷ (wall s × workers), 1 = every
    /// worker's core busy for the whole run.
    pub cpu_util: f64,
    /// Median peak RSS, bytes.
    pub peak_rss_bytes: u64,
    /// Median events per CPU-second (events ÷ CPU s): our throughput per
    /// core, as Flink's is defined.
    pub events_per_cpu_s: f64,
    /// Flink's published throughput per core ([`FLINK`]); `None`: n/a.
    pub flink_events_per_core_s: Option<f64>,
    /// `events_per_cpu_s` ÷ Flink's; `None` when Flink has no figure.
    pub ratio_to_flink: Option<f64>,
    /// Every run, in run order.
    pub runs: Vec<RunFigures>,
}

/// The `--report` JSON.
#[derive(Debug, Serialize)]
struct BenchReport<'a> {
    events: u64,
    repeats: usize,
    extra_args: &'a [String],
    flink_source: FlinkSource,
    flink: &'static [FlinkFigure],
    rows: &'a [Row],
}

/// Parses `all` or `q1,q5,…` into queries in the order of [`NexQuery`]
/// (each once).
///
/// # Errors
/// An unknown name (the message lists the known ones) or an empty list.
pub fn parse_queries(s: &str) -> Result<Vec<NexQuery>, String> {
    use clap::ValueEnum;
    let all = NexQuery::value_variants();
    if s.trim().eq_ignore_ascii_case("all") {
        return Ok(all.to_vec());
    }
    let mut chosen = Vec::new();
    for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let q = NexQuery::from_str(name, true).map_err(|_| {
            let known: Vec<String> = all.iter().map(|q| q.name()).collect();
            format!(
                "--query {s:?}: unknown query {name:?} (known: all, {})",
                known.join(", ")
            )
        })?;
        chosen.push(q);
    }
    if chosen.is_empty() {
        return Err(format!("--query {s:?}: no queries"));
    }
    let mut ordered: Vec<NexQuery> = all.iter().copied().filter(|q| chosen.contains(q)).collect();
    ordered.dedup();
    Ok(ordered)
}

/// `air bench nexmark`.
///
/// # Errors
/// Bad options (exit 2); a run that fails (its command and stderr are in
/// the message); an unwritable `--csv`, `--plot` or `--report`.
pub fn main(a: &BenchNexmarkArgs) -> Result<(), CliError> {
    let bad = |m: String| CliError::BadInput(m);
    let queries = parse_queries(&a.query).map_err(bad)?;
    let workers =
        super::scale::parse_counts(&a.workers).map_err(|m| bad(format!("--workers {m}")))?;
    let ranks = match &a.ranks {
        Some(s) => super::scale::parse_counts(s).map_err(|m| bad(format!("--ranks {m}")))?,
        None => Vec::new(),
    };
    if a.repeats == 0 {
        return Err(bad("--repeats must be at least 1".into()));
    }
    if a.rank_workers == 0 {
        return Err(bad("--rank-workers must be at least 1".into()));
    }
    if a.events == 0 {
        return Err(bad("--events must be at least 1".into()));
    }
    if let Some(x) = a.extra.iter().find(|x| {
        ["--query", "--events", "--workers", "--report"]
            .iter()
            .any(|o| x.as_str() == *o || x.starts_with(&format!("{o}=")))
    }) {
        return Err(bad(format!(
            "the arguments after `--` may not set {x} (the benchmark does)"
        )));
    }
    let mut plan: Vec<(Point, Option<Vec<String>>)> = workers
        .iter()
        .map(|&w| {
            let p = Point {
                kind: "workers",
                ranks: 1,
                workers: w,
            };
            (p, None)
        })
        .collect();
    for &n in &ranks {
        let p = Point {
            kind: "ranks",
            ranks: n,
            workers: n * a.rank_workers,
        };
        plan.push((p, Some(launcher_argv(&a.launcher, n)?)));
    }
    let air = std::env::current_exe().map_err(|e| bad(format!("locating air: {e}")))?;
    let dir = scratch_dir("bench-nexmark")?;
    let report = dir.join("run.json");
    let total = a.repeats * queries.len() * plan.len();
    let mut runs: Vec<Vec<Vec<RunFigures>>> = vec![vec![Vec::new(); plan.len()]; queries.len()];
    let mut done = 0;
    let result = (|| -> Result<(), CliError> {
        for _ in 0..a.repeats {
            for (qi, q) in queries.iter().enumerate() {
                for (pi, (point, launcher)) in plan.iter().enumerate() {
                    let mut args = vec![
                        "nexmark".to_string(),
                        "--query".into(),
                        q.name(),
                        "--events".into(),
                        a.events.to_string(),
                    ];
                    args.extend(a.extra.iter().cloned());
                    if !a.extra.iter().any(|x| x.starts_with("--events-per-s")) {
                        args.push("--events-per-s".into());
                        args.push(FLINK_EVENTS_PER_S.to_string());
                    }
                    // q10 writes files: into the scratch directory, removed
                    // after the run.
                    let out_dir = dir.join("out-dir");
                    let _ = std::fs::remove_dir_all(&out_dir);
                    let honours = super::common::honours(
                        super::common::QueryKind::Nexmark(*q),
                        super::common::QueryOption::OutDir,
                    );
                    if honours && !a.extra.iter().any(|x| x.starts_with("--out-dir")) {
                        args.push("--out-dir".into());
                        args.push(out_dir.display().to_string());
                    }
                    let per_process = if launcher.is_some() {
                        a.rank_workers
                    } else {
                        point.workers
                    };
                    let run = run_air(&air, launcher.as_deref(), &args, per_process, &report)?;
                    let what = format!("air run {}", args.join(" "));
                    let rss = run.report["peak_rss_bytes"].as_u64().unwrap_or(0);
                    let f = RunFigures {
                        events: run.number("events", &what)? as u64,
                        events_per_s: run.number("events_per_s", &what)?,
                        cpu_s: run.cpu_s,
                        wall_s: run.wall_s,
                        peak_rss_bytes: if rss > 0 { rss } else { run.max_rss_bytes },
                    };
                    done += 1;
                    eprintln!(
                        "  [{done}/{total}] {} {}: {:.2} M events/s, {:.2} CPU s, {:.0} MiB",
                        q.name(),
                        point.label(),
                        f.events_per_s / 1e6,
                        f.cpu_s,
                        f.peak_rss_bytes as f64 / (1 << 20) as f64
                    );
                    runs[qi][pi].push(f);
                    let _ = std::fs::remove_dir_all(&out_dir);
                }
            }
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result?;
    let mut rows = Vec::new();
    for (qi, q) in queries.iter().enumerate() {
        for (pi, (point, _)) in plan.iter().enumerate() {
            rows.push(row(q.name(), point.clone(), &runs[qi][pi]));
        }
    }
    print_table(a, &rows, &mut std::io::stdout().lock())?;
    if let Some(path) = &a.csv {
        let f = std::fs::File::create(path).map_err(|e| bad(format!("{}: {e}", path.display())))?;
        write_csv(&rows, std::io::BufWriter::new(f))
            .map_err(|e| bad(format!("{}: {e}", path.display())))?;
    }
    if let Some(path) = &a.report {
        let f = std::fs::File::create(path).map_err(|e| bad(format!("{}: {e}", path.display())))?;
        let r = BenchReport {
            events: a.events,
            repeats: a.repeats,
            extra_args: &a.extra,
            flink_source: FLINK_SOURCE,
            flink: FLINK,
            rows: &rows,
        };
        super::common::write_json(f, &r).map_err(|e| bad(format!("{}: {e}", path.display())))?;
    }
    if let Some(path) = &a.plot {
        let groups: Vec<String> = queries.iter().map(|q| q.name()).collect();
        let series: Vec<(String, Vec<Option<f64>>)> = plan
            .iter()
            .map(|(p, _)| {
                let v = rows
                    .iter()
                    .filter(|r| r.point == *p)
                    .map(|r| Some(r.events_per_s_per_worker / 1e6))
                    .collect();
                (p.label(), v)
            })
            .collect();
        let title = format!(
            "air bench nexmark: {} M events per run, median of {}",
            a.events as f64 / 1e6,
            a.repeats
        );
        super::plots::write_grouped_bars(path, &title, "M events/s per worker", &groups, &series)
            .map_err(|e| CliError::Other(anyhow::anyhow!(e)))?;
    }
    Ok(())
}

/// The medians of one query's runs at one point.
fn row(query: String, point: Point, runs: &[RunFigures]) -> Row {
    let of = |f: &dyn Fn(&RunFigures) -> f64| -> Vec<f64> { runs.iter().map(f).collect() };
    let eps = of(&|r| r.events_per_s);
    let events_per_s = median(&eps);
    let w = point.workers as f64;
    let events_per_cpu_s = median(&of(&|r| r.events as f64 / r.cpu_s.max(1e-9)));
    let flink = flink_figure(&query).map(|f| f.events_per_core_s);
    Row {
        events: runs.iter().map(|r| r.events).max().unwrap_or(0),
        events_per_s,
        events_per_s_min: eps.iter().copied().fold(f64::INFINITY, f64::min),
        events_per_s_max: eps.iter().copied().fold(0.0, f64::max),
        events_per_s_per_worker: events_per_s / w,
        cpu_s: median(&of(&|r| r.cpu_s)),
        cpu_cores: median(&of(&|r| r.cpu_s / r.wall_s.max(1e-9))),
        cpu_util: median(&of(&|r| r.cpu_s / (r.wall_s.max(1e-9) * w))),
        peak_rss_bytes: median(&of(&|r| r.peak_rss_bytes as f64)) as u64,
        events_per_cpu_s,
        flink_events_per_core_s: flink,
        ratio_to_flink: flink.map(|f| events_per_cpu_s / f),
        runs: runs.to_vec(),
        query,
        point,
    }
}

/// The CSV columns, in order.
pub const CSV_COLUMNS: &[&str] = &[
    "query",
    "kind",
    "ranks",
    "workers",
    "events",
    "events_per_s",
    "events_per_s_min",
    "events_per_s_max",
    "events_per_s_per_worker",
    "cpu_s",
    "cpu_cores",
    "cpu_util",
    "peak_rss_bytes",
    "events_per_cpu_s",
    "flink_events_per_core_s",
    "ratio_to_flink",
    "runs_events_per_s",
];

fn write_csv(rows: &[Row], mut f: impl Write) -> std::io::Result<()> {
    writeln!(f, "{}", CSV_COLUMNS.join(","))?;
    let na = |v: Option<f64>, prec: usize| v.map_or("n/a".into(), |v| format!("{v:.prec$}"));
    for r in rows {
        let runs: Vec<String> = r
            .runs
            .iter()
            .map(|x| format!("{:.0}", x.events_per_s))
            .collect();
        writeln!(
            f,
            "{},{},{},{},{},{:.0},{:.0},{:.0},{:.0},{:.3},{:.3},{:.4},{},{:.0},{},{},{}",
            r.query,
            r.point.kind,
            r.point.ranks,
            r.point.workers,
            r.events,
            r.events_per_s,
            r.events_per_s_min,
            r.events_per_s_max,
            r.events_per_s_per_worker,
            r.cpu_s,
            r.cpu_cores,
            r.cpu_util,
            r.peak_rss_bytes,
            r.events_per_cpu_s,
            na(r.flink_events_per_core_s, 0),
            na(r.ratio_to_flink, 2),
            runs.join(" ")
        )?;
    }
    f.flush()
}

fn print_table(a: &BenchNexmarkArgs, rows: &[Row], out: &mut impl Write) -> std::io::Result<()> {
    writeln!(
        out,
        "air bench nexmark: {} events per run, median of {} (min-max of events/s beside it)",
        a.events, a.repeats
    )?;
    writeln!(
        out,
        "{:<5} {:<12} {:>17} {:>10} {:>7} {:>6} {:>5} {:>8} {:>10} {:>10} {:>7}",
        "query",
        "where",
        "M ev/s (min-max)",
        "M ev/s/wkr",
        "CPU s",
        "cores",
        "util",
        "RSS MiB",
        "M ev/CPU-s",
        "Flink/core",
        "x Flink"
    )?;
    for r in rows {
        let spread = format!(
            "{:.2} ({:.2}-{:.2})",
            r.events_per_s / 1e6,
            r.events_per_s_min / 1e6,
            r.events_per_s_max / 1e6
        );
        writeln!(
            out,
            "{:<5} {:<12} {:>17} {:>10.2} {:>7.2} {:>6.2} {:>4.0}% {:>8.0} {:>10.2} {:>10} {:>7}",
            r.query,
            r.point.label(),
            spread,
            r.events_per_s_per_worker / 1e6,
            r.cpu_s,
            r.cpu_cores,
            r.cpu_util * 100.0,
            r.peak_rss_bytes as f64 / (1 << 20) as f64,
            r.events_per_cpu_s / 1e6,
            r.flink_events_per_core_s
                .map_or("n/a".into(), |f| format!("{:.1} K", f / 1e3)),
            r.ratio_to_flink
                .map_or("n/a".into(), |x| format!("{x:.0}x")),
        )?;
    }
    writeln!(
        out,
        "Flink/core: the Flink suite's published Throughput/Cores (events per CPU-second; \
         Flink 1.13, 3 nodes x 8 cores, parallelism 8, RocksDB, exactly-once checkpoints),\n\
         from {}; x Flink = our M ev/CPU-s / Flink's; n/a: no published figure.",
        FLINK_SOURCE.url
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_parse_all_lists_and_refuse_unknown_names() {
        use clap::ValueEnum;
        assert_eq!(
            parse_queries("all").unwrap().len(),
            NexQuery::value_variants().len()
        );
        // Suite order, each once.
        assert_eq!(
            parse_queries("q5,Q1,q5").unwrap(),
            vec![NexQuery::Q1, NexQuery::Q5]
        );
        let e = parse_queries("q1,q99").unwrap_err();
        assert!(e.contains("q99") && e.contains("q0"), "{e}");
        assert!(parse_queries(",").is_err());
    }

    #[test]
    fn flink_figures_agree_with_their_own_table() {
        // Throughput/Cores = 100 M events / (Cores x Time), to the printed
        // precision: a mistyped figure shows.
        for f in FLINK {
            let derived = 100e6 / (f.cores * f.time_s);
            assert!(
                (derived / f.events_per_core_s - 1.0).abs() < 0.005,
                "{}: {derived} vs {}",
                f.query,
                f.events_per_core_s
            );
        }
        assert!(flink_figure("q6").is_none());
        assert_eq!(FLINK.len(), 22);
    }
}
