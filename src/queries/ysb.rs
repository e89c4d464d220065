//! The Yahoo Streaming Benchmark (YSB), with the original benchmark's
//! semantics: keep `event_type == "view"`, join `ad_id` to its campaign, count
//! per campaign per 10-second tumbling event-time window. (AIR's C++ code
//! counts clicks instead; we follow the original benchmark.) View events with
//! an unknown `ad_id` are counted as `unmatched` and dropped.

use super::common::{thousands, CliError, RuntimeArgs};
use super::dist::{Dist, MpiReport};
use super::lagwatch::Watched;
use air_operators::graph::{CollectByWindowExt, Count, Csv, KeyedWindowExt, Tumbling, Windowed};
use air_operators::sources::ysb::{
    split_ranges, uuid_to_string, Campaigns, EventTimeMode, EventType, OnBadRecord, Pacer,
    ParseMode, ReaderOptions, SourceError, YsbEvent, YsbFileReader, YsbGenConfig, YsbGenerator,
};
use air_runtime::dataflow::{run_graph, Dataflow, Head, Pipe, Source, SourcePoll, Stats, Stream};
use crossbeam_utils::CachePadded;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How generated events get their event time.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventTimeArg {
    /// Wall-clock time at generation (latency is meaningful).
    Wallclock,
    /// Deterministic: event `i` of the job at `i * 1000 / rate` ms (rate:
    /// `--rate`, else 1 000 000 events/s of event time); for tests.
    Synthetic,
}

/// Which JSON fields to parse from `--input`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseArg {
    /// Parse and validate every field of the YSB schema.
    Full,
    /// Parse only `ad_id`, `event_type` and `event_time` (faster).
    QueryFields,
}

/// What to do with a bad input record.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadRecordArg {
    /// Stop with an error naming file, line and field (exit code 2); events
    /// read before it are still processed and written.
    Fail,
    /// Skip it and count it in the report.
    Skip,
}

/// `air run ysb`.
#[derive(clap::Args, Debug, Clone)]
pub struct YsbArgs {
    /// Generator rate for the whole job, events/s (default: unthrottled;
    /// 1..=10^13).
    #[arg(long, value_parser = super::common::parse::rate)]
    pub rate: Option<u64>,
    /// Events to generate for the whole job (default 200 000 000 when neither
    /// --duration nor --input is given).
    #[arg(long)]
    pub events: Option<u64>,
    /// Generate for this many seconds (at most 1e9).
    #[arg(long, value_parser = super::common::parse::duration)]
    pub duration: Option<f64>,
    /// Generator seed (each worker derives its own stream from it).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Event time of generated events.
    #[arg(long, value_enum, default_value_t = EventTimeArg::Wallclock)]
    pub event_time: EventTimeArg,
    /// Read events from these JSON-lines files (YSB schema) instead of generating.
    #[arg(long, num_args = 1..)]
    pub input: Vec<PathBuf>,
    /// The ad → campaign map: `"ad_id":"campaign_id"` lines or CSV `ad_id,campaign_id`
    /// (default: 100 campaigns × 10 ads generated from --seed).
    #[arg(long)]
    pub campaigns: Option<PathBuf>,
    /// Tumbling window size, ms [default: 10000].
    #[arg(long, value_name = "MS", value_parser = super::common::parse::window_ms)]
    pub window_ms: Option<u64>,
    /// Bounded out-of-orderness, ms: watermark = newest event time − this.
    /// Older events are late: dropped and counted in `late_records`
    /// [default: 0].
    #[arg(long, value_name = "MS", value_parser = super::common::parse::delay_ms)]
    pub max_delay_ms: Option<u64>,
    /// Send every event through the exchange (no partial aggregate per worker).
    #[arg(long)]
    pub shuffle: bool,
    /// Fields parsed from --input.
    #[arg(long, value_enum, default_value_t = ParseArg::Full)]
    pub parse: ParseArg,
    /// What to do with a bad input record.
    #[arg(long, value_enum, default_value_t = BadRecordArg::Fail)]
    pub on_bad_record: BadRecordArg,
    /// Write result rows here (CSV `window_start_ms,campaign_id,count`),
    /// each window's rows when it closes; `-` for standard output.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write the JSON report here.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Plot the latency distribution (HdrHistogram percentile plot) as a
    /// PNG here (wall-clock event times only).
    #[arg(long, value_name = "FILE.png")]
    pub latency_plot: Option<PathBuf>,
    /// Under MPI: every rank writes its own workers' result rows to
    /// `<out stem>.rank<R>.<ext>` instead of rank 0 writing one merged file.
    #[arg(long)]
    pub out_per_rank: bool,
    /// Runtime options.
    #[command(flatten)]
    pub runtime: RuntimeArgs,
}

/// A worker's YSB source: the generator or its share of the input files.
/// (One per worker, never moved on the hot path: the size difference of the
/// variants does not matter.)
#[allow(clippy::large_enum_variant)]
pub enum YsbSource {
    /// The generator, unthrottled.
    Gen(YsbGenerator),
    /// The generator paced by `--rate` and/or `--duration` (it records its
    /// input lag: how late it was on its schedule after each batch).
    Paced(Watched<YsbGenerator>),
    /// Byte ranges of input files.
    Files {
        /// Pieces still to read.
        pieces: std::vec::IntoIter<(PathBuf, Range<u64>)>,
        /// The piece being read.
        current: Option<YsbFileReader>,
        /// Reader options.
        opts: ReaderOptions,
        /// The error that stopped this source, if any.
        error: Option<SourceError>,
        /// Bad records skipped (`--on-bad-record skip`).
        skipped: u64,
        /// The first skipped record's error.
        first_skipped: Option<String>,
        /// Set by the first worker that meets a bad record: every worker
        /// stops reading at its next batch.
        stop: Arc<std::sync::atomic::AtomicBool>,
        /// Where the error that stopped a source goes (the first one).
        failed: Arc<std::sync::Mutex<Option<String>>>,
    },
}

/// Events read so far for the progress line, one counter per worker thread
/// (updated once per batch). Each counter has its own cache line and one
/// writer: a counter shared by every worker would bounce between their
/// cores on every batch (measured: ~2% of YSB's throughput at 2 workers).
static PROGRESS: [CachePadded<AtomicU64>; PROGRESS_SLOTS] =
    [const { CachePadded::new(AtomicU64::new(0)) }; PROGRESS_SLOTS];

/// Counters in [`PROGRESS`]; threads beyond this share them (still correct).
const PROGRESS_SLOTS: usize = 64;

/// Slots handed out so far.
static PROGRESS_NEXT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's slot in [`PROGRESS`].
    static PROGRESS_SLOT: usize = PROGRESS_NEXT.fetch_add(1, Ordering::Relaxed) % PROGRESS_SLOTS;
}

/// Events read by every worker so far.
fn progress_events() -> u64 {
    PROGRESS.iter().map(|c| c.load(Ordering::Relaxed)).sum()
}

impl Source for YsbSource {
    type Item = YsbEvent;

    fn poll(&mut self, buf: &mut Vec<YsbEvent>, max: usize) -> SourcePoll {
        let r = self.poll_inner(buf, max);
        let n = buf.len() as u64;
        PROGRESS_SLOT.with(|&i| PROGRESS[i].fetch_add(n, Ordering::Relaxed));
        r
    }

    fn report(&mut self, stats: &mut Stats) {
        match self {
            YsbSource::Paced(p) => {
                if let Some(lag) = p.input_lag_max_ms() {
                    // µs: maxima are integers.
                    stats.max("input_lag_max_us", (lag * 1000.0).round() as u64);
                }
            }
            YsbSource::Files {
                error,
                skipped,
                current,
                failed,
                ..
            } => {
                stats.add(
                    "skipped_records",
                    *skipped + current.as_ref().map_or(0, |r| r.skipped()),
                );
                if let Some(e) = error {
                    let mut f = failed.lock().unwrap_or_else(|e| e.into_inner());
                    f.get_or_insert_with(|| e.to_string());
                }
            }
            YsbSource::Gen(_) => {}
        }
    }
}

impl YsbSource {
    fn poll_inner(&mut self, buf: &mut Vec<YsbEvent>, max: usize) -> SourcePoll {
        match self {
            YsbSource::Gen(gen) => {
                if buf.len() < max {
                    buf.resize(max, YsbEvent::default());
                }
                let n = gen.fill(&mut buf[..max]);
                buf.truncate(n);
                if n == 0 {
                    SourcePoll::Done
                } else {
                    SourcePoll::Ready
                }
            }
            YsbSource::Paced(p) => p.poll(buf, max),
            YsbSource::Files {
                pieces,
                current,
                opts,
                error,
                skipped,
                first_skipped,
                stop,
                ..
            } => {
                buf.clear();
                if error.is_some() || stop.load(std::sync::atomic::Ordering::Relaxed) {
                    return SourcePoll::Done;
                }
                loop {
                    if current.is_none() {
                        match pieces.next() {
                            None => return SourcePoll::Done,
                            Some((path, range)) => {
                                match YsbFileReader::open_range(&path, range, *opts) {
                                    Ok(r) => *current = Some(r),
                                    Err(e) => {
                                        *error = Some(e);
                                        stop.store(true, std::sync::atomic::Ordering::Relaxed);
                                        return SourcePoll::Done;
                                    }
                                }
                            }
                        }
                    }
                    let r = current.as_mut().expect("a reader is open");
                    match r.fill(buf, max) {
                        Ok(0) => {
                            *skipped += r.skipped();
                            if first_skipped.is_none() {
                                *first_skipped = r.first_skipped().map(|e| e.to_string());
                            }
                            *current = None;
                        }
                        Ok(_) => return SourcePoll::Ready,
                        Err(e) => {
                            *error = Some(e);
                            stop.store(true, std::sync::atomic::Ordering::Relaxed);
                            return if buf.is_empty() {
                                SourcePoll::Done
                            } else {
                                SourcePoll::Ready
                            };
                        }
                    }
                }
            }
        }
    }
}

/// Per-worker figures of the report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerReport {
    /// Global worker index (`rank * workers per rank + local index`).
    pub worker: usize,
    /// The rank it ran on (0 when alone).
    pub rank: usize,
    /// Where it ran: pinned CPU (`pu`), core, package and NUMA node by the
    /// placement plan, and the NUMA nodes its input rings' memory is on.
    pub placement: air_runtime::WorkerPlacement,
    /// Events read from its source.
    pub events: u64,
    /// Events dropped by the filter (not views).
    pub filtered: u64,
    /// Views with an unknown ad.
    pub unmatched: u64,
    /// Late events (older than the watermark), dropped.
    pub late_records: u64,
    /// Largest watermark lag at this worker's final aggregate, ms (wall
    /// clock − input watermark; `null` unless event times are wall-clock).
    pub watermark_lag_max_ms: Option<u64>,
    /// Largest input lag of its paced generator, ms: how far behind its
    /// schedule (`--rate`) it fell, measured after each batch as now − the
    /// due time of its next event (`null` unless paced). A job that keeps up
    /// stays near 0; one that cannot grows it without bound.
    pub input_lag_max_ms: Option<f64>,
    /// Channel counters.
    pub channels: air_runtime::ChannelMetrics,
}

/// The JSON report of `air run ysb`.
#[derive(Debug, Clone, Serialize)]
pub struct YsbReport {
    /// "ysb".
    pub query: &'static str,
    /// Workers in the job (all ranks).
    pub workers: usize,
    /// Ranks (processes) in the job: 1 when alone.
    pub ranks: usize,
    /// "generator" or "files".
    pub source: &'static str,
    /// Events read (generated or parsed).
    pub events: u64,
    /// Wall time of the job, s (processing time for file input).
    pub elapsed_s: f64,
    /// Events per second, whole job.
    pub events_per_s: f64,
    /// Events per second per worker.
    pub events_per_s_per_worker: f64,
    /// Events dropped by the filter (not views).
    pub filtered: u64,
    /// Views with an unknown ad.
    pub unmatched: u64,
    /// Late events (older than the watermark), dropped and counted.
    pub late_records: u64,
    /// Bad input records skipped (`--on-bad-record skip`).
    pub skipped_records: u64,
    /// Distinct windows with at least one row.
    pub windows_emitted: u64,
    /// Result rows.
    pub rows: u64,
    /// Latency, ms: emit time − newest event time in the window (YSB
    /// definition); `null` for file input or synthetic event time, where
    /// event times are not wall-clock times.
    pub latency_ms: Option<air_runtime::LatencySummary>,
    /// Largest input lag of any worker's paced generator, ms (see
    /// [`WorkerReport::input_lag_max_ms`]; `null` unless `--rate`).
    pub input_lag_max_ms: Option<f64>,
    /// Window size, ms.
    pub window_ms: u64,
    /// Whether partial aggregates were computed before the exchange.
    pub pre_aggregate: bool,
    /// The MPI run (library, ranks, nodes, tiers); `null` when alone.
    pub mpi: Option<MpiReport>,
    /// How workers were placed (rank 0's view; each worker's own placement
    /// is in `per_worker`).
    pub placement: PlacementReport,
    /// Stopped by SIGINT/SIGTERM: the rows hold the windows every worker
    /// had read past (`air_runtime::stop`).
    pub stopped: bool,
    /// Windows (per owner) still open at the stop, not reported.
    pub unfired_windows: u64,
    /// The largest peak resident set size of any rank, bytes.
    pub peak_rss_bytes: u64,
    /// Per-worker figures, every rank's workers in global order.
    pub per_worker: Vec<WorkerReport>,
}

/// The placement section of a report.
#[derive(Debug, Clone, Serialize)]
pub struct PlacementReport {
    /// Workers were pinned (no `--no-pin`).
    pub pinned: bool,
    /// SMT siblings were used (`--smt`).
    pub smt: bool,
    /// Where the machine's topology came from ("hwloc", "sysfs"; `null`
    /// when unknown).
    pub topology: Option<&'static str>,
    /// Some rank's plan is oversubscribed: workers share PUs (more workers
    /// than its share of cores, or no core of its own).
    pub oversubscribed: bool,
}

/// What a run produced (its rows were written as windows fired).
pub struct YsbOutcome {
    /// The report.
    pub report: YsbReport,
    /// The input error that stopped a source (exit code 2), if any.
    pub input_error: Option<String>,
    /// Latency of every row, all ranks (ms).
    pub latency: air_runtime::metrics::Histogram<u64>,
}

/// Refuses runtime options that cannot work (every query checks these;
/// clap's parsers refuse them first on the command line, see
/// [`super::common::parse`]).
pub fn check_runtime(rt: &RuntimeArgs) -> Result<(), CliError> {
    use super::common::parse::{
        MAX_BATCH, MAX_FLUSH_US, MAX_RING_BYTES, MAX_WORKERS, MIN_RING_BYTES,
    };
    let bad = |m: String| Err(CliError::BadInput(m));
    if rt.workers.is_some_and(|w| !(1..=MAX_WORKERS).contains(&w)) {
        return bad(format!("--workers must be in 1..={MAX_WORKERS}"));
    }
    if !(1..=MAX_BATCH).contains(&rt.batch) {
        return bad(format!("--batch must be in 1..={MAX_BATCH}"));
    }
    if !(1..=MAX_FLUSH_US).contains(&rt.flush_us) {
        return bad(format!("--flush-us must be in 1..={MAX_FLUSH_US}"));
    }
    if !(MIN_RING_BYTES..=MAX_RING_BYTES).contains(&rt.ring_bytes) {
        return bad(format!(
            "--ring-bytes {}: a ring must hold at least a batch frame and a control frame; \
             use {MIN_RING_BYTES}..={MAX_RING_BYTES}",
            rt.ring_bytes
        ));
    }
    Ok(())
}

impl YsbArgs {
    /// `--window-ms`, or its default.
    pub fn window(&self) -> u64 {
        self.window_ms.unwrap_or(DEFAULT_WINDOW_MS)
    }

    /// `--max-delay-ms`, or its default (0).
    pub fn max_delay(&self) -> u64 {
        self.max_delay_ms.unwrap_or(0)
    }
}

/// YSB's window when `--window-ms` is not given (the benchmark's 10 s).
pub const DEFAULT_WINDOW_MS: u64 = 10_000;

/// Refuses options that make no sense together, before anything runs
/// (`ranks`: ranks of the job, each with the same options).
fn validate(args: &YsbArgs, ranks: usize) -> Result<(), CliError> {
    let bad = |m: String| Err(CliError::BadInput(m));
    let rt = &args.runtime;
    {
        use super::common::QueryOption::*;
        super::common::check_honoured(
            super::common::QueryKind::Ysb,
            &[
                (WindowMs, args.window_ms.is_some()),
                (MaxDelayMs, args.max_delay_ms.is_some()),
                (Shuffle, args.shuffle),
            ],
        )?;
    }
    if args.window() == 0 {
        return bad("--window-ms must be positive".into());
    }
    check_runtime(rt)?;
    let workers = (rt.job_config().workers * ranks) as u64;
    if let Some(r) = args.rate {
        if r < workers {
            return bad(format!(
                "--rate {r} is below one event per second per worker ({workers} workers in the job)"
            ));
        }
    }
    if let Some(d) = args.duration {
        if !d.is_finite() || d <= 0.0 || d > 1e9 {
            return bad(format!(
                "--duration {d}: expected a positive number of seconds"
            ));
        }
    }
    if args.out_per_rank && args.out.is_none() {
        return bad("--out-per-rank needs --out".into());
    }
    {
        let mut outs: Vec<(&str, &std::path::Path)> = Vec::new();
        if let Some(o) = &args.out {
            outs.push(("--out", o));
        }
        if let Some(r) = &args.report {
            outs.push(("--report", r));
        }
        let timeline = args.runtime.timeline_path(0, ranks);
        if let Some(t) = &timeline {
            outs.push(("--timeline", t));
        }
        // Per-rank files share the suffix rule: the given names must differ
        // too (`--out X --out-per-rank --timeline X` would share X.rank0).
        if ranks > 1 {
            if let Some(t) = &args.runtime.timeline {
                outs.push(("--timeline", t));
            }
        }
        if let Some(p) = &args.latency_plot {
            if !args.input.is_empty() || args.event_time != EventTimeArg::Wallclock {
                return bad(
                    "--latency-plot needs generated events with wall-clock event times \
                     (no --input, no --event-time synthetic)"
                        .into(),
                );
            }
            outs.push(("--latency-plot", p));
        }
        let mut inputs = args.input.clone();
        inputs.extend(args.campaigns.iter().cloned());
        super::common::check_outputs(&outs, &inputs)?;
    }
    if !args.input.is_empty() {
        let conflicting = [
            ("--events", args.events.is_some()),
            ("--rate", args.rate.is_some()),
            ("--duration", args.duration.is_some()),
            ("--event-time", args.event_time != EventTimeArg::Wallclock),
        ];
        for (flag, set) in conflicting {
            if set {
                return bad(format!(
                    "{flag} applies to the generator, not to --input files"
                ));
            }
        }
        super::common::check_input_files(&args.input)?;
    }
    Ok(())
}

/// One rank's share of a run: its workers' figures (all of them when
/// alone), shipped to rank 0 to be merged. (Rows are not in it: they were
/// written as their windows fired.)
#[derive(Debug, Clone, Serialize, Deserialize)]
struct RankPart {
    /// Result rows this rank's workers emitted.
    rows: u64,
    /// Starts of the windows that had rows (distinct) among those.
    windows: Vec<u64>,
    per_worker: Vec<WorkerReport>,
    /// Latency histogram as (value ms, count) pairs.
    latency: Vec<(u64, u64)>,
    skipped: u64,
    input_error: Option<String>,
    elapsed_s: f64,
    late_partials: u64,
    #[serde(default)]
    unfired_windows: u64,
    #[serde(default)]
    peak_rss_bytes: u64,
    /// This rank was stopped by a signal (one sent to it alone too).
    #[serde(default)]
    stopped: bool,
    /// Ring memory of this rank, bytes.
    #[serde(default)]
    ring_bytes: u64,
}

/// Where a rank's result rows go.
enum RowsTo {
    /// Worker 0 of the job writes the one `--out` file, window by window.
    One(PathBuf),
    /// Every worker of this rank writes into the rank's file.
    Rank(Arc<std::sync::Mutex<csv::Writer<std::fs::File>>>),
    /// Nowhere (rows are only counted).
    Nowhere,
}

/// Ends the graph: the rows of `windows` go where `to` says, every window
/// start goes into `seen`.
#[allow(clippy::too_many_arguments)]
fn sink_rows<H, P>(
    df: &Dataflow,
    windows: Stream<H, P>,
    campaigns: &Arc<Campaigns>,
    to: &RowsTo,
    seen: &Arc<std::sync::Mutex<std::collections::BTreeSet<u64>>>,
) where
    H: Head,
    P: Pipe<H::Out, Out = Windowed<u32, u64>>,
{
    let c = campaigns.clone();
    let seen = seen.clone();
    let row = move |r: Windowed<u32, u64>| {
        seen.lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(r.start);
        (r.start, uuid_to_string(c.campaign_id(r.key)), r.value)
    };
    match to {
        RowsTo::Rank(w) => {
            let w = w.clone();
            let me = df.index();
            windows.map(row).sink(move |r: (u64, String, u64)| {
                let mut w = w.lock().unwrap_or_else(|e| e.into_inner());
                if let Err(e) = w.serialize(&r) {
                    tracing::error!("worker {me}: writing a row: {e}");
                }
            });
        }
        RowsTo::One(path) => {
            let c = campaigns.clone();
            let header = ["window_start_ms", "campaign_id", "count"];
            let csv = if path.as_os_str() == "-" {
                Csv::stdout()
            } else {
                Csv::to_path(path)
            };
            windows
                .collect_by_window(move |r| c.campaign_id(r.key))
                .map(row)
                .sink(csv.header(&header));
        }
        RowsTo::Nowhere => {
            let c = campaigns.clone();
            windows
                .collect_by_window(move |r| c.campaign_id(r.key))
                .map(row)
                .for_each(|_| {});
        }
    }
}

/// Runs this process's share of YSB as `args` say (every rank's workers
/// when distributed); its rows go where `to` says as windows fire.
fn run_rank(
    args: &YsbArgs,
    campaigns: Arc<Campaigns>,
    dist: &Dist,
    to: RowsTo,
) -> Result<RankPart, CliError> {
    let mut cfg = args.runtime.job_config();
    dist.configure(&mut cfg, args.runtime.force_network);
    // Global worker g = rank * w + local; the input and the generator are
    // split over every worker of the job.
    let w = cfg.workers;
    let total = w * dist.ranks();
    let files = !args.input.is_empty();
    // Pieces of input: each file split into one byte range per worker;
    // worker `i` reads range `i` of every file.
    let mut pieces: Vec<Vec<(PathBuf, Range<u64>)>> = vec![Vec::new(); total];
    for path in &args.input {
        let ranges = split_ranges(path, total)
            .map_err(|e| CliError::BadInput(format!("{}: {e}", path.display())))?;
        for (i, r) in ranges.into_iter().enumerate() {
            pieces[i % total].push((path.clone(), r));
        }
    }
    let events = if files {
        None
    } else if args.events.is_none() && args.duration.is_none() {
        Some(200_000_000)
    } else {
        args.events
    };
    let event_time = match args.event_time {
        EventTimeArg::Wallclock => EventTimeMode::WallClock,
        EventTimeArg::Synthetic => EventTimeMode::Deterministic {
            start_ms: 0,
            events_per_s: args.rate.unwrap_or(1_000_000),
        },
    };
    let gen_cfg = YsbGenConfig::new(args.seed, &campaigns)
        .with_events(events)
        .with_event_time(event_time);
    let duration = args.duration.map(Duration::from_secs_f64);
    let paced = args.rate.is_some() || duration.is_some();
    let opts = ReaderOptions {
        mode: match args.parse {
            ParseArg::Full => ParseMode::Full,
            ParseArg::QueryFields => ParseMode::QueryFields,
        },
        on_bad_record: match args.on_bad_record {
            BadRecordArg::Fail => OnBadRecord::Fail,
            BadRecordArg::Skip => OnBadRecord::Skip,
        },
        ..ReaderOptions::default()
    };
    let (window_ms, max_delay_ms) = (args.window(), args.max_delay());
    let start = Instant::now();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let failed = Arc::new(std::sync::Mutex::new(None));
    let seen = Arc::new(std::sync::Mutex::new(std::collections::BTreeSet::new()));
    // The graph every worker runs: source → views of known ads → per
    // campaign per window count (pre-aggregated unless --shuffle) → rows.
    let build = |df: &Dataflow| {
        let me = df.index();
        let source = if files {
            YsbSource::Files {
                pieces: pieces[me].clone().into_iter(),
                current: None,
                opts,
                error: None,
                skipped: 0,
                first_skipped: None,
                stop: stop.clone(),
                failed: failed.clone(),
            }
        } else {
            let gen = YsbGenerator::new(&gen_cfg, me, df.workers());
            if paced {
                let pacer = Pacer::new(start, args.rate, duration, me, df.workers());
                YsbSource::Paced(Watched::new(gen, pacer))
            } else {
                YsbSource::Gen(gen)
            }
        };
        let unmatched = std::rc::Rc::new(std::cell::Cell::new(0u64));
        let u = unmatched.clone();
        df.report_with(move |s| s.add("unmatched", u.get()));
        let c = campaigns.clone();
        // Event time after the projection: only views of known ads move
        // the watermark or can be late (a third of the events).
        let views = df
            .source(source)
            .flat_map(move |e: YsbEvent| {
                if e.event_type != EventType::View {
                    return None;
                }
                let k = c.campaign_of(e.ad_id);
                if k.is_none() {
                    unmatched.set(unmatched.get() + 1);
                }
                k.map(|k| (k, e.event_time_ms))
            })
            .event_time(|v| v.1, max_delay_ms)
            .key_by(|v: &(u32, u64)| v.0)
            .window(Tumbling::ms(window_ms), |v| v.1)
            .dense_keys();
        if args.shuffle {
            sink_rows(
                df,
                views.aggregate_every_event(Count),
                &campaigns,
                &to,
                &seen,
            );
        } else {
            sink_rows(df, views.aggregate(Count), &campaigns, &to, &seen);
        }
    };
    let out = run_graph(&cfg, build).map_err(|e| CliError::Other(e.into()))?;
    if let RowsTo::Rank(w) = &to {
        w.lock()
            .unwrap_or_else(|e| e.into_inner())
            .flush()
            .map_err(|e| CliError::Other(e.into()))?;
    }
    let elapsed = start.elapsed().max(out.elapsed);
    let wallclock = !files && args.event_time == EventTimeArg::Wallclock;
    let mut per_worker = Vec::new();
    for wr in &out.workers {
        let st = &wr.stats;
        let events = st.get("source_records");
        let late = st.get("late_records");
        let unmatched = st.get("unmatched");
        per_worker.push(WorkerReport {
            worker: wr.index,
            rank: dist.rank(),
            placement: wr.placement.clone(),
            events,
            filtered: events
                .saturating_sub(late)
                .saturating_sub(st.get("window_records"))
                .saturating_sub(unmatched),
            unmatched,
            late_records: late,
            watermark_lag_max_ms: wallclock
                .then(|| st.get_max("watermark_lag_max_ms").unwrap_or(0)),
            input_lag_max_ms: st.get_max("input_lag_max_us").map(|us| us as f64 / 1000.0),
            channels: wr.channels.clone(),
        });
    }
    let input_error = failed.lock().unwrap_or_else(|e| e.into_inner()).take();
    let windows = seen
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .copied()
        .collect();
    Ok(RankPart {
        rows: out.stats.get("window_rows"),
        windows,
        per_worker,
        latency: air_runtime::metrics::histogram_pairs(&out.stats.latency),
        skipped: out.stats.get("skipped_records"),
        input_error,
        elapsed_s: elapsed.as_secs_f64(),
        late_partials: out.stats.get("late_partials"),
        unfired_windows: out.stats.get("unfired_windows"),
        peak_rss_bytes: super::common::peak_rss_bytes(),
        stopped: out.stopped || air_runtime::stop::requested(),
        ring_bytes: out.ring_bytes,
    })
}

/// Merges every rank's part (rank order) into the job's rows and report.
fn merge(
    args: &YsbArgs,
    parts: Vec<RankPart>,
    mpi: Option<MpiReport>,
) -> Result<YsbOutcome, CliError> {
    let files = !args.input.is_empty();
    let mut rows = 0u64;
    let mut windows = std::collections::BTreeSet::new();
    let mut per_worker = Vec::new();
    let mut hist = air_runtime::metrics::latency_histogram();
    let mut skipped = 0;
    let mut input_error = None;
    let mut secs: f64 = 1e-9;
    let mut late_partials = 0;
    let mut unfired_windows = 0;
    let mut peak_rss_bytes = 0;
    let mut parts_stopped = false;
    for p in parts {
        parts_stopped |= p.stopped;
        unfired_windows += p.unfired_windows;
        peak_rss_bytes = peak_rss_bytes.max(p.peak_rss_bytes);
        rows += p.rows;
        windows.extend(p.windows);
        per_worker.extend(p.per_worker);
        air_runtime::metrics::record_pairs(&mut hist, &p.latency);
        skipped += p.skipped;
        if input_error.is_none() {
            input_error = p.input_error;
        }
        secs = secs.max(p.elapsed_s);
        late_partials += p.late_partials;
    }
    let w = per_worker.len().max(1);
    let events: u64 = per_worker.iter().map(|p| p.events).sum();
    if let Some(e) = &input_error {
        input_error = Some(format!(
            "{e} (reading stopped; the {events} events read before every worker stopped \
             were processed and their results written)"
        ));
    }
    let wallclock = !files && args.event_time == EventTimeArg::Wallclock;
    let report = YsbReport {
        query: "ysb",
        workers: w,
        ranks: mpi.as_ref().map_or(1, |m| m.ranks),
        source: if files { "files" } else { "generator" },
        events,
        elapsed_s: secs,
        events_per_s: events as f64 / secs,
        events_per_s_per_worker: events as f64 / secs / w as f64,
        filtered: per_worker.iter().map(|p| p.filtered).sum(),
        unmatched: per_worker.iter().map(|p| p.unmatched).sum(),
        late_records: per_worker.iter().map(|p| p.late_records).sum(),
        skipped_records: skipped,
        windows_emitted: windows.len() as u64,
        rows,
        latency_ms: wallclock.then(|| air_runtime::LatencySummary::of(&hist)),
        input_lag_max_ms: per_worker
            .iter()
            .filter_map(|p| p.input_lag_max_ms)
            .reduce(f64::max),
        window_ms: args.window(),
        pre_aggregate: !args.shuffle,
        placement: PlacementReport {
            pinned: !args.runtime.no_pin,
            smt: args.runtime.smt,
            topology: air_runtime::placement::topology().map(|t| t.source),
            oversubscribed: per_worker.iter().any(|p| p.placement.oversubscribed),
        },
        stopped: air_runtime::stop::requested() || parts_stopped,
        unfired_windows,
        peak_rss_bytes,
        mpi,
        per_worker,
    };
    if late_partials != 0 {
        return Err(CliError::Other(anyhow::anyhow!(
            "internal error: {late_partials} partial aggregates arrived after their window fired"
        )));
    }
    Ok(YsbOutcome {
        report,
        input_error,
        latency: hist,
    })
}

/// `<stem>.rank<R>.<ext>` beside `path`.
fn per_rank_path(path: &std::path::Path, rank: usize) -> PathBuf {
    let stem = path
        .file_stem()
        .map_or_else(Default::default, |s| s.to_string_lossy().into_owned());
    let name = match path.extension() {
        Some(ext) => format!("{stem}.rank{rank}.{}", ext.to_string_lossy()),
        None => format!("{stem}.rank{rank}"),
    };
    path.with_file_name(name)
}

/// `air run ysb`: runs, writes the outputs, prints a summary. Under MPI
/// every rank runs it; rank 0 writes the merged outputs and prints.
pub fn main(args: &YsbArgs, dist: &Dist) -> Result<(), CliError> {
    run(args, dist, true).map(|_| ())
}

/// Runs `air run ysb` as [`main`] does; `print`: the progress line and the
/// summary on the terminal. Returns the merged report at rank 0 (`None` on
/// the other ranks).
///
/// # Errors
/// As [`main`]: bad options or input, a failed job (every rank agrees).
pub fn run(args: &YsbArgs, dist: &Dist, print: bool) -> Result<Option<YsbReport>, CliError> {
    let root = dist.is_root();
    // A progress line on a terminal, for long runs.
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let progress = {
        use std::io::IsTerminal;
        let done = done.clone();
        (print && root && std::io::stderr().is_terminal()).then(|| {
            std::thread::spawn(move || {
                let start = Instant::now();
                let mut shown = false;
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(100));
                    let t = start.elapsed().as_secs_f64();
                    if t >= 2.0 && (t * 10.0) as u64 % 10 == 0 {
                        let n = progress_events();
                        eprint!(
                            "\r  {:>6.1} s  {} events  {:.1} M events/s   ",
                            t,
                            thousands(n),
                            n as f64 / t / 1e6
                        );
                        shown = true;
                    }
                }
                if shown {
                    eprintln!();
                }
            })
        })
    };
    // Check the options and the outputs before the run, so a bad path
    // fails now, not after it; every rank agrees before any goes on. The
    // rows stream into `--out` as windows fire (created at the first row,
    // or at the end); the report is written whole at the end.
    let open = |p: &std::path::Path| super::common::Output::create(p);
    let per_rank = args.out_per_rank;
    let mut report_file = None;
    let mut to = RowsTo::Nowhere;
    let mut campaigns = None;
    let checked = validate(args, dist.ranks()).and_then(|()| {
        campaigns = Some(Arc::new(match &args.campaigns {
            Some(p) => Campaigns::load(p).map_err(|e| CliError::BadInput(e.to_string()))?,
            None => Campaigns::ysb(args.seed),
        }));
        args.runtime.check_timeline(dist.rank(), dist.ranks())?;
        if let Some(p) = &args.out {
            if per_rank {
                let path = per_rank_path(p, dist.rank());
                let f = std::fs::File::create(&path)
                    .map_err(|e| CliError::BadInput(format!("{}: {e}", path.display())))?;
                let mut w = csv::Writer::from_writer(f);
                w.write_record(["window_start_ms", "campaign_id", "count"])
                    .map_err(|e| CliError::BadInput(format!("{}: {e}", path.display())))?;
                to = RowsTo::Rank(Arc::new(std::sync::Mutex::new(w)));
            } else {
                if root && p.as_os_str() != "-" {
                    super::driver::check_streamed_output(p)?;
                }
                to = RowsTo::One(p.clone());
            }
        }
        if root {
            report_file = args.report.as_deref().map(open).transpose()?;
        }
        Ok(())
    });
    dist.agree(checked)?;
    let campaigns = campaigns.expect("loaded when the checks passed");
    let timeline = match args.runtime.start_timeline(dist.rank(), dist.ranks()) {
        Ok(t) => t,
        Err(e) => {
            dist.abort_if_distributed(&e.to_string(), e.exit_code());
            return Err(e);
        }
    };
    let part = run_rank(args, campaigns, dist, to);
    drop(timeline);
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    if let Some(p) = progress {
        let _ = p.join();
    }
    let part = match part {
        Ok(p) => p,
        Err(e) => {
            dist.abort_if_distributed(&e.to_string(), e.exit_code());
            return Err(e);
        }
    };
    let bytes = serde_json::to_vec(&part)?;
    let code = match dist.gather(bytes)? {
        Some(parts) => {
            let parts = parts
                .iter()
                .map(|b| serde_json::from_slice::<RankPart>(b))
                .collect::<Result<Vec<_>, _>>()?;
            let mpi = dist.describe(
                args.runtime.job_config().workers,
                args.runtime.force_network,
            );
            let o = merge(args, parts, mpi);
            let code = match &o {
                Ok(o) if o.input_error.is_some() => 2,
                Ok(_) => 0,
                Err(e) => e.exit_code(),
            };
            dist.agree_exit_code(code);
            let o = o?;
            if let Some(f) = report_file {
                f.write(|f| super::common::write_json(f, &o.report))?;
            }
            if print {
                // With the rows on stdout (`--out -`), the summary goes to stderr.
                let rows_on_stdout = args.out.as_deref().is_some_and(|p| p.as_os_str() == "-");
                print_summary(&o.report, rows_on_stdout)?;
            }
            if let Some(p) = &args.latency_plot {
                super::plots::write_latency_cdf(&o.latency, p, "air run ysb latency")
                    .map_err(CliError::BadInput)?;
            }
            if let Some(e) = o.input_error {
                return Err(CliError::BadInput(e));
            }
            return Ok(Some(o.report));
        }
        None => dist.agree_exit_code(0),
    };
    match code {
        0 => Ok(None),
        c => Err(CliError::Quiet(c)),
    }
}

fn print_summary(r: &YsbReport, to_stderr: bool) -> std::io::Result<()> {
    let mut out: Box<dyn Write> = if to_stderr {
        Box::new(std::io::stderr().lock())
    } else {
        Box::new(std::io::stdout().lock())
    };
    let ranks = if r.ranks > 1 {
        format!(" on {} ranks", r.ranks)
    } else {
        String::new()
    };
    writeln!(
        out,
        "ysb: {} worker{}{ranks}, {} events in {:.3} s = {:.1} M events/s ({:.1} M/s per worker){}",
        r.workers,
        if r.workers == 1 { "" } else { "s" },
        thousands(r.events),
        r.elapsed_s,
        r.events_per_s / 1e6,
        r.events_per_s_per_worker / 1e6,
        if r.pre_aggregate {
            ""
        } else {
            ", shuffle (no pre-aggregation)"
        }
    )?;
    writeln!(
        out,
        "  filtered {} (not view), unmatched {}, late {}, skipped {}; windows {}, rows {}",
        thousands(r.filtered),
        thousands(r.unmatched),
        thousands(r.late_records),
        thousands(r.skipped_records),
        r.windows_emitted,
        r.rows
    )?;
    match &r.latency_ms {
        Some(l) => writeln!(
            out,
            "  latency (emit - newest event in window): {} ({} samples)",
            l.describe(),
            thousands(l.samples)
        )?,
        None => writeln!(
            out,
            "  processing time {:.3} s (event times are not wall-clock: no latency)",
            r.elapsed_s
        )?,
    }
    if r.stopped {
        writeln!(
            out,
            "  STOPPED by a signal: {} window(s) still open were not reported",
            thousands(r.unfired_windows)
        )?;
    }
    if let Some(lag) = r.input_lag_max_ms {
        writeln!(
            out,
            "  input lag (generator behind its --rate schedule): max {lag:.1} ms"
        )?;
    }
    Ok(())
}

/// `air gen ysb`.
#[derive(clap::Args, Debug, Clone)]
pub struct GenYsbArgs {
    /// Number of events.
    #[arg(long)]
    pub events: u64,
    /// Seed (campaigns and events).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Events file (JSON lines, YSB schema).
    #[arg(long)]
    pub out: PathBuf,
    /// Campaign map file (`"ad_id":"campaign_id"` lines).
    #[arg(long)]
    pub campaigns_out: PathBuf,
    /// Event-time rate of the file, events per second of event time
    /// (1..=10^15).
    #[arg(long, default_value_t = 100_000, value_parser = super::common::parse::events_per_s_int)]
    pub events_per_s: u64,
}

/// `air gen ysb`: writes events and campaigns.
pub fn gen(args: &GenYsbArgs) -> Result<(), CliError> {
    if args.events_per_s == 0 {
        return Err(CliError::BadInput("--events-per-s must be positive".into()));
    }
    if args.out == args.campaigns_out {
        return Err(CliError::BadInput(
            "--out and --campaigns-out name the same file".into(),
        ));
    }
    let opts = air_operators::sources::ysb::GenFilesOptions {
        event_time: EventTimeMode::Deterministic {
            start_ms: 1_461_024_576_817,
            events_per_s: args.events_per_s,
        },
        ..Default::default()
    };
    let s = air_operators::sources::ysb::gen_to_files(
        args.events,
        args.seed,
        &args.out,
        &args.campaigns_out,
        &opts,
    )?;
    println!(
        "wrote {} events ({} bytes) to {} and {} campaigns to {}",
        thousands(s.events),
        thousands(s.bytes),
        args.out.display(),
        s.campaigns.len(),
        args.campaigns_out.display()
    );
    Ok(())
}
