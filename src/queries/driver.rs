//! The part every `air run` query shares:
//! check options and open outputs before running (every rank agrees), run
//! this rank's share, gather the rank parts at rank 0, merge, write the CSV
//! and the JSON report, print a summary, end with the right exit code.
//!
//! Two ways to produce rows. A query on the end-of-job path returns its
//! rows in its [`RankPart`]; rank 0 merges, sorts ([`Query::finish`]) and
//! writes them whole at the end (a temp file renamed over `--out`). A query
//! that [`Query::streams`] (WA, on the graph API) writes them as its windows
//! fire, where [`RowsTo`] says ([`sink_window_rows`]): worker 0 of the job
//! writes `--out` window by window (each window's rows sorted; `--out -`:
//! standard output, and the summary goes to standard error), or, with
//! `--out-per-rank`, every worker of a rank appends to the rank's file
//! through a shared [`RankFile`]. Either way the JSON report is written at
//! the end.

use super::common::{thousands, CliError, RuntimeArgs};
use super::dist::{Dist, MpiReport};
use super::load::{summary_load, GroupMoves, HotKeys, LoadPart, LoadReport, RebalanceReport};
use air_operators::graph::{CollectByWindowExt, Csv, WindowRow};
use air_runtime::dataflow::PeriodRecords;
use air_runtime::dataflow::{Head, Pipe, Sink, Stream};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Output options of a query.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct OutputArgs {
    /// Result rows as CSV (columns per query, see `air run QUERY --help`);
    /// every query writes its rows as its windows close (`-`: to standard
    /// output, the summary then on standard error); NEXMark q1 from the
    /// generator writes each millisecond's rows, q1 from files and q2 all
    /// rows at the end.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The JSON report (throughput, latency, per-worker counters, placement).
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Under MPI: every rank writes its own rows to `<stem>.rank<R>.<ext>`
    /// instead of rank 0 writing all rows to `--out`.
    #[arg(long)]
    pub out_per_rank: bool,
    /// Plot the run's latency distribution (HdrHistogram percentile plot,
    /// all ranks) as a PNG here; needs wall-clock event times (`--rate`)
    /// and a query with windows.
    #[arg(long, value_name = "FILE.png")]
    pub latency_plot: Option<PathBuf>,
    /// Exit with an error (code 1) if any record was late (after the run
    /// wrote its rows and report): for jobs whose results must hold every
    /// record. Late records are printed on stderr either way.
    #[arg(long)]
    pub fail_on_late: bool,
}

/// One worker's figures in a report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerFigures {
    /// Global worker index (`rank * workers per rank + local index`).
    pub worker: usize,
    /// The rank it ran on (0 when alone).
    pub rank: usize,
    /// Where it ran and where its input rings' memory is.
    pub placement: air_runtime::WorkerPlacement,
    /// Records read from its source.
    pub events: u64,
    /// Late records (older than the watermark), dropped and counted.
    pub late_records: u64,
    /// Largest input lag of its paced generator, ms: how far behind its
    /// `--rate` schedule it fell, measured after each batch as now − the
    /// due time of its next event (`null` unless paced). A job that keeps up
    /// stays near 0; one that cannot grows it without bound.
    #[serde(default)]
    pub input_lag_max_ms: Option<f64>,
    /// Channel counters.
    pub channels: air_runtime::ChannelMetrics,
    /// Records it received on each exchange edge, by edge index (the
    /// report's `load.stages[].edges`): its load at each stage.
    #[serde(default)]
    pub records_in_by_edge: Vec<u64>,
    /// Records it received on each edge per period of wall time (the
    /// report's `load.periods`; left out of the report's `per_worker`).
    #[serde(default, skip_serializing_if = "PeriodRecords::is_empty")]
    pub records_in_periods: PeriodRecords,
    /// Query-specific figures of the worker (e.g. YSB's `filtered`),
    /// fields of the worker's object in the report.
    #[serde(flatten, default)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// What one rank produced: its rows (before [`Query::finish`]) and figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(bound = "R: Serialize + DeserializeOwned")]
pub struct RankPart<R> {
    /// Result rows of the keys this rank owns.
    pub rows: Vec<R>,
    /// Its workers' figures.
    pub per_worker: Vec<WorkerFigures>,
    /// Latency histogram (ms) as (value, count) pairs.
    pub latency: Vec<(u64, u64)>,
    /// Checkpoint barriers that reached this rank's sinks, alignments.
    pub checkpoints: CheckpointPart,
    /// Longest worker wall time, s.
    pub elapsed_s: f64,
    /// Partials that arrived after their window fired (must be 0).
    pub late_partials: u64,
    /// Late records by operator.
    #[serde(default)]
    pub late: air_runtime::dataflow::LateLog,
    /// The largest lag of a record behind the newest event time before it,
    /// ms (`None`: no event-time stage).
    #[serde(default)]
    pub disorder_max_ms: Option<u64>,
    /// The input error that stopped a source, if any.
    pub input_error: Option<String>,
    /// Bad records skipped (`--on-bad-record skip`).
    pub skipped: u64,
    /// Result rows produced but not in `rows`: counted only (a stateless
    /// query without `--out`, as a benchmark's sink does), or written as
    /// their windows fired (a query that [`Query::streams`]).
    #[serde(default)]
    pub uncollected_rows: u64,
    /// Query-specific counters, summed over ranks into the report's
    /// `counters` (e.g. word count's `replaced_lines`).
    #[serde(default)]
    pub counters: std::collections::BTreeMap<String, u64>,
    /// Stopped early by SIGINT/SIGTERM (`air_runtime::stop`).
    #[serde(default)]
    pub stopped: bool,
    /// This rank's peak resident set size, bytes (filled by the driver).
    #[serde(default)]
    pub peak_rss_bytes: u64,
    /// Windows still open at a stop: not fired, not in the rows.
    #[serde(default)]
    pub unfired_windows: u64,
    /// Query-specific figures of the rank that are not sums (e.g. the
    /// windows that had rows), for [`Query::report_extra`].
    #[serde(default)]
    pub extra: serde_json::Value,
    /// The rank's channel figures ([`channel_figures`]).
    #[serde(default)]
    pub channels: serde_json::Value,
    /// The graph's stages and what the rank's senders did with hot keys,
    /// for the report's `load` ([`LoadPart::of`]).
    #[serde(default)]
    pub load: LoadPart,
}

/// A rank's channel figures for its [`RankPart`]: `{"plan": the
/// `ChannelPlan` of the rank and its node, "created": what its setup made}`.
pub fn channel_figures(out: &air_runtime::dataflow::GraphOutput) -> serde_json::Value {
    serde_json::json!({ "plan": out.plan, "created": out.created })
}

/// The channels section of a report.
#[derive(Debug, Clone, Serialize)]
pub struct ChannelsReport {
    /// Rank 0's figures (`air plan`'s for this shape): rings per tier,
    /// memory per node, window per rank, control traffic at idle.
    pub plan: serde_json::Value,
    /// Per rank, in rank order: thread rings, `/dev/shm` segments and
    /// network rings its setup created, and the bytes of its window.
    pub created_per_rank: Vec<serde_json::Value>,
    /// The ring bytes asked for (`--ring-bytes`, `AIR_RING_BYTES`, or the
    /// 1 MiB default).
    pub ring_bytes_requested: u64,
    /// The per-node ring budget, bytes (`None` with `--ring-bytes`: taken
    /// as given).
    pub ring_budget_bytes: Option<u64>,
    /// Whether the rings were scaled down to keep the busiest node within
    /// the per-node budget (no `--ring-bytes` given, and the job's shape
    /// needed it): the plan's `edges` give the sizes used.
    pub scaled_to_budget: bool,
}

/// A rank's checkpoint barrier figures ([`RankPart::checkpoints`]).
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct CheckpointPart {
    /// The newest barrier id that reached a sink.
    pub barrier_last: u64,
    /// Alignments (one per edge and barrier at each worker).
    pub alignments: u64,
    /// Alignment times, µs, as (value, count) pairs.
    pub alignment_us: Vec<(u64, u64)>,
    /// Alignments given up (too much kept aside: their checkpoints are
    /// not taken).
    #[serde(default)]
    pub alignments_given_up: u64,
    /// Barrier ids that came due at a source while its last checkpoint
    /// was still in flight at its worker (placed late, once it was not;
    /// summed over sources).
    #[serde(default)]
    pub barriers_deferred: u64,
    /// What this rank wrote (`--checkpoint-dir`).
    pub state: StateFigures,
}

/// Checkpoint state written by a rank or a job (`--checkpoint-dir`).
#[derive(Debug, Clone, Copy, Default, Serialize, serde::Deserialize)]
pub struct StateFigures {
    /// The checkpoint the run resumed from (0: a fresh start).
    pub resumed_from: u64,
    /// The newest checkpoint known complete at the end.
    pub newest_complete: u64,
    /// Checkpoints whose manifest this rank (or job) wrote.
    pub completed: u64,
    /// Worker parts written.
    pub parts_written: u64,
    /// Worker parts that failed to be written (their checkpoints skipped).
    pub parts_failed: u64,
    /// Bytes of parts written.
    pub bytes: u64,
    /// Sum of part write times (temporary file, fsync, rename, manifest), µs.
    pub write_us: u64,
    /// Longest part write, µs.
    pub write_max_us: u64,
    /// Bytes of the parts read on resume (0: a fresh start).
    pub restored_bytes: u64,
    /// Resume time, µs: finding the newest complete checkpoint (every
    /// part read and CRC-checked) plus the slowest worker's read of its
    /// part and restore of its components.
    pub restore_us: u64,
}

impl StateFigures {
    fn add(&mut self, o: &StateFigures) {
        self.resumed_from = self.resumed_from.max(o.resumed_from);
        self.newest_complete = self.newest_complete.max(o.newest_complete);
        self.completed += o.completed;
        self.parts_written += o.parts_written;
        self.parts_failed += o.parts_failed;
        self.bytes += o.bytes;
        self.write_us += o.write_us;
        self.write_max_us = self.write_max_us.max(o.write_max_us);
        self.restored_bytes += o.restored_bytes;
        self.restore_us = self.restore_us.max(o.restore_us);
    }
}

impl CheckpointPart {
    /// The figures in a rank's counters.
    pub fn of(st: &air_runtime::dataflow::Stats) -> CheckpointPart {
        let max = |k: &str| st.get_max(k).unwrap_or(0);
        CheckpointPart {
            barrier_last: max("sink_barrier_last"),
            alignments: st.get("checkpoint_alignments"),
            alignment_us: air_runtime::metrics::histogram_pairs(&st.alignment),
            alignments_given_up: st.get("checkpoint_alignments_given_up"),
            barriers_deferred: st.get("checkpoint_barriers_deferred"),
            state: StateFigures {
                resumed_from: max("checkpoint_resumed_from"),
                newest_complete: max("checkpoint_newest_complete"),
                completed: st.get("checkpoints_completed"),
                parts_written: st.get("checkpoint_parts_written"),
                parts_failed: st.get("checkpoint_parts_failed"),
                bytes: st.get("checkpoint_bytes"),
                write_us: st.get("checkpoint_write_us"),
                write_max_us: max("checkpoint_write_max_us"),
                restored_bytes: st.get("checkpoint_restored_bytes"),
                restore_us: max("checkpoint_restore_us"),
            },
        }
    }
}

/// Checkpoint barriers of a run (`--barrier-ms`): the in-band protocol
/// alone (issue 31; no state is written yet).
#[derive(Debug, Clone, Serialize)]
pub struct CheckpointReport {
    /// The barrier interval, ms.
    pub barrier_every_ms: u64,
    /// The newest barrier id that reached a sink (ids count barriers
    /// placed, every one in turn).
    pub barrier_last: u64,
    /// Alignments (one per edge and barrier at each worker).
    pub alignments: u64,
    /// Alignment time, µs, from the first input's barrier to the last
    /// one's, one sample per edge and barrier at each worker.
    pub alignment_us: AlignmentSummary,
    /// Alignments given up: the frames kept aside for held senders passed
    /// `air_runtime::exchange::KEPT_BYTES_MAX` (those checkpoints are not
    /// taken).
    pub alignments_given_up: u64,
    /// Barrier ids that came due at a source while its last checkpoint was
    /// still being saved or written at its worker, summed over sources
    /// (placed late, once it was not: one checkpoint in flight at a time).
    pub barriers_deferred: u64,
    /// The state written (`null` without `--checkpoint-dir`).
    pub state: Option<StateFigures>,
}

/// Alignment time percentiles, µs (`null` without samples).
#[derive(Debug, Clone, Default, Serialize)]
pub struct AlignmentSummary {
    /// Alignments measured.
    pub samples: u64,
    /// Median, µs.
    pub p50_us: Option<u64>,
    /// 95th percentile, µs.
    pub p95_us: Option<u64>,
    /// 99th percentile, µs.
    pub p99_us: Option<u64>,
    /// Maximum, µs.
    pub max_us: Option<u64>,
}

impl AlignmentSummary {
    /// Summarizes a histogram of µs.
    pub fn of(h: &air_runtime::metrics::Histogram<u64>) -> AlignmentSummary {
        if h.is_empty() {
            return AlignmentSummary::default();
        }
        AlignmentSummary {
            samples: h.len(),
            p50_us: Some(h.value_at_quantile(0.50)),
            p95_us: Some(h.value_at_quantile(0.95)),
            p99_us: Some(h.value_at_quantile(0.99)),
            max_us: Some(h.max()),
        }
    }
}

/// The JSON report of a query run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The query ("wa", "nexmark-q5", …).
    pub query: String,
    /// Workers in the job (all ranks).
    pub workers: usize,
    /// Ranks (processes) in the job: 1 when alone.
    pub ranks: usize,
    /// Key groups of the job (`--max-parallelism`): keys hash to one of
    /// these; every worker owns an even range of them.
    pub key_groups: u32,
    /// "generator" or "files".
    pub source: &'static str,
    /// Records read by every source.
    pub events: u64,
    /// Wall time of the job, s (longest worker).
    pub elapsed_s: f64,
    /// Events per second, whole job.
    pub events_per_s: f64,
    /// Events per second per worker.
    pub events_per_s_per_worker: f64,
    /// Late records, dropped and counted.
    pub late_records: u64,
    /// Late records by operator (the place in the query that judged them):
    /// count, first late record's event time and the watermark it fell
    /// behind.
    pub late_by_operator: air_runtime::dataflow::LateLog,
    /// The largest lag of a record behind the newest event time before it,
    /// ms: a `--max-delay-ms` at least this large makes no record late
    /// (`null`: no event-time stage).
    pub disorder_max_ms: Option<u64>,
    /// Bad input records skipped.
    pub skipped_records: u64,
    /// Result rows (counted, also when not collected).
    pub rows: u64,
    /// Latency, ms: emit time − newest event time in the window; `null`
    /// when event times are not wall-clock times (no `--rate`) or the query
    /// has no windowed output (NEXMark q1, q2).
    pub latency_ms: Option<air_runtime::LatencySummary>,
    /// Largest input lag of any worker's paced generator, ms (see
    /// [`WorkerFigures::input_lag_max_ms`]; `null` unless `--rate`).
    pub input_lag_max_ms: Option<f64>,
    /// The query's own settings (window sizes, keys, …).
    pub params: serde_json::Value,
    /// Checkpoint barriers (`null` without `--barrier-ms`).
    pub checkpoints: Option<CheckpointReport>,
    /// Query-specific counters, summed over ranks.
    pub counters: std::collections::BTreeMap<String, u64>,
    /// The run was stopped by SIGINT/SIGTERM: the rows hold the windows
    /// every worker had read past; `unfired_windows` were dropped.
    pub stopped: bool,
    /// Windows (per owner) still open at the stop, not reported.
    pub unfired_windows: u64,
    /// The largest peak resident set size of any rank, bytes (memory stays
    /// bounded under backpressure: a full channel blocks its sender).
    pub peak_rss_bytes: u64,
    /// How workers were placed.
    pub placement: super::ysb::PlacementReport,
    /// The MPI run; `null` when alone.
    pub mpi: Option<MpiReport>,
    /// The job's channels: planned figures and what was created.
    pub channels: ChannelsReport,
    /// Records per worker at each stage, and how uneven key hashing made
    /// them.
    pub load: LoadReport,
    /// Per-worker figures, every rank's workers in global order.
    pub per_worker: Vec<WorkerFigures>,
    /// Query-specific fields of the report ([`Query::report_extra`]), at
    /// its top level.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// A query the driver can run.
pub trait Query: Sync + std::fmt::Debug {
    /// One result row.
    type Row: Serialize + DeserializeOwned + Clone + Send;
    /// The query's name in reports and messages.
    fn name(&self) -> String;
    /// Runtime options.
    fn runtime(&self) -> &RuntimeArgs;
    /// Output options.
    fn output(&self) -> &OutputArgs;
    /// Checks the options (and input files) before anything runs, for a job
    /// of `ranks` ranks. Bad input is [`CliError::BadInput`].
    fn validate(&self, ranks: usize) -> Result<(), CliError>;
    /// Runs this rank's share.
    fn run_rank(&self, dist: &Dist) -> Result<RankPart<Self::Row>, CliError>;
    /// Whether the query writes its rows as its windows fire (through
    /// [`Query::run_rank_streaming`], into what [`RowsTo`] says) instead of
    /// returning them for the driver to write at the end.
    fn streams(&self) -> bool {
        false
    }
    /// Runs this rank's share; a query that [`Query::streams`] writes its
    /// rows where `to` says as they come and returns none (it counts them
    /// in [`RankPart::uncollected_rows`]). Others return their rows
    /// ([`Query::run_rank`]; `to` is then [`RowsTo::Nowhere`]).
    fn run_rank_streaming(
        &self,
        dist: &Dist,
        to: &RowsTo,
    ) -> Result<RankPart<Self::Row>, CliError> {
        let _ = to;
        self.run_rank(dist)
    }
    /// Turns all ranks' rows into the result, in output order (sorting,
    /// and a last global step such as "the top auction per window").
    fn finish(&self, rows: Vec<Self::Row>) -> Vec<Self::Row>;
    /// Whether [`Query::finish`] needs every rank's rows (then
    /// `--out-per-rank` is refused).
    fn global_finish(&self) -> bool {
        false
    }
    /// The CSV header.
    fn header(&self) -> Vec<&'static str>;
    /// One row's CSV fields.
    fn record(&self, row: &Self::Row) -> Vec<String>;
    /// "generator" or "files".
    fn source(&self) -> &'static str;
    /// The input files (outputs must not name them).
    fn inputs(&self) -> Vec<PathBuf> {
        Vec::new()
    }
    /// Whether event times are wall-clock times and the query's rows carry
    /// a latency (emit time − newest event time): then the report has
    /// latency percentiles.
    fn wallclock(&self) -> bool;
    /// Settings for the report.
    fn params(&self) -> serde_json::Value;
    /// Query-specific fields of the report's top level, from every rank's
    /// [`RankPart::extra`] (rank order) and the report merged so far.
    fn report_extra(
        &self,
        extras: &[serde_json::Value],
        report: &Report,
    ) -> serde_json::Map<String, serde_json::Value> {
        let _ = (extras, report);
        serde_json::Map::new()
    }
    /// Writes the summary of a run to `out` (the terminal).
    ///
    /// # Errors
    /// Writing fails.
    fn summary(&self, r: &Report, out: &mut dyn Write) -> std::io::Result<()> {
        print_summary(r, out)
    }
}

/// Whether `--out` names standard output (`-`).
pub fn is_stdout(p: &Path) -> bool {
    p.as_os_str() == "-"
}

/// Writes `rows` of `q` as CSV to `file`.
fn write_csv<Q: Query>(q: &Q, file: std::fs::File, rows: &[Q::Row]) -> anyhow::Result<()> {
    let mut w = csv::Writer::from_writer(std::io::BufWriter::new(file));
    w.write_record(q.header())?;
    for r in rows {
        w.write_record(q.record(r))?;
    }
    w.flush()?;
    Ok(())
}

/// `<stem>.rank<R>.<ext>` beside `path`.
pub fn per_rank_path(path: &Path, rank: usize) -> PathBuf {
    let stem = path
        .file_stem()
        .map_or_else(Default::default, |s| s.to_string_lossy().into_owned());
    let name = match path.extension() {
        Some(ext) => format!("{stem}.rank{rank}.{}", ext.to_string_lossy()),
        None => format!("{stem}.rank{rank}"),
    };
    path.with_file_name(name)
}

/// Where a streaming query's rows go ([`Query::run_rank_streaming`]).
pub enum RowsTo {
    /// Worker 0 of the job writes the one `--out` file, window by window
    /// (created at the first rows, or at the end).
    One(PathBuf),
    /// Every worker of this rank appends to the rank's file
    /// (`--out-per-rank`).
    Rank(RankFile),
    /// Nowhere (rows are only counted).
    Nowhere,
}

/// Ends a graph in a stream of window rows: each row becomes `row(r)`, and
/// goes where `to` says. [`RowsTo::One`]: every row to worker 0 of the job
/// ([`CollectByWindowExt::collect_by_window`]), which writes each window's
/// rows sorted by `sort` when the watermark passes its end, under a header
/// of `header` (to standard output for `-`). [`RowsTo::Rank`]: each worker hands its rows to the rank's
/// shared file at every flush (in the order it emitted them). Without an
/// output, the rows still go to worker 0 (the same graph as with `--out`,
/// so runs with and without it cost the same) and are dropped there.
pub fn sink_window_rows<H, P, S, SF, R, RF>(
    windows: Stream<H, P>,
    sort: SF,
    row: RF,
    header: &[&str],
    to: &RowsTo,
) where
    H: Head,
    P: Pipe<H::Out>,
    P::Out: air_runtime::Record + WindowRow,
    S: Ord + 'static,
    SF: Fn(&P::Out) -> S + 'static,
    R: Serialize + 'static,
    RF: FnMut(P::Out) -> R + 'static,
{
    match to {
        RowsTo::One(path) => {
            let csv = if is_stdout(path) {
                Csv::stdout()
            } else {
                Csv::to_path(path)
            };
            windows
                .collect_by_window(sort)
                .map(row)
                .sink(csv.header(header));
        }
        RowsTo::Rank(file) => {
            windows.map(row).sink(file.sink());
        }
        RowsTo::Nowhere => {
            windows.collect_by_window(sort).map(row).for_each(|_| {});
        }
    }
}

/// A rank's `--out-per-rank` file, shared by its workers: created (header
/// first) when the first rows come, or by [`RankFile::finish`] at the end,
/// so a job that fails to start leaves an earlier file alone.
#[derive(Clone)]
pub struct RankFile(Arc<Mutex<RankFileState>>);

struct RankFileState {
    path: PathBuf,
    /// The header line.
    header: Vec<u8>,
    file: Option<std::fs::File>,
}

impl RankFileState {
    fn open(&mut self) -> Result<&mut std::fs::File, String> {
        if self.file.is_none() {
            let mut f = std::fs::File::create(&self.path)
                .map_err(|e| format!("cannot create {}: {e}", self.path.display()))?;
            f.write_all(&self.header)
                .map_err(|e| format!("writing rows to {}: {e}", self.path.display()))?;
            self.file = Some(f);
        }
        Ok(self.file.as_mut().expect("opened"))
    }
}

impl RankFile {
    /// The file at `path`, with a header line of `header`.
    pub fn new(path: PathBuf, header: &[&str]) -> RankFile {
        let mut h = header.join(",").into_bytes();
        h.push(b'\n');
        RankFile(Arc::new(Mutex::new(RankFileState {
            path,
            header: h,
            file: None,
        })))
    }

    /// Appends whole CSV lines.
    fn append(&self, lines: &[u8]) -> Result<(), String> {
        let mut s = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let path = s.path.display().to_string();
        s.open()?
            .write_all(lines)
            .map_err(|e| format!("writing rows to {path}: {e}"))
    }

    /// After the job: creates the file if no row came (a header only) and
    /// syncs it.
    ///
    /// # Errors
    /// The file cannot be created or written.
    pub fn finish(&self) -> Result<(), CliError> {
        let mut s = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let f = s.open().map_err(|e| CliError::Other(anyhow::anyhow!(e)))?;
        f.sync_data().ok();
        Ok(())
    }

    /// A worker's sink into this file: it buffers its rows as CSV lines
    /// and appends them at every flush (at most 1 MiB at a time).
    pub fn sink(&self) -> RankSink {
        RankSink {
            file: self.clone(),
            buf: rank_csv(),
        }
    }
}

fn rank_csv() -> csv::Writer<Vec<u8>> {
    csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(Vec::new())
}

/// One worker's end of a [`RankFile`].
pub struct RankSink {
    file: RankFile,
    buf: csv::Writer<Vec<u8>>,
}

impl<T: Serialize> Sink<T> for RankSink {
    fn write(&mut self, row: T) -> Result<(), String> {
        self.buf
            .serialize(&row)
            .map_err(|e| format!("CSV row: {e}"))?;
        if self.buf.get_ref().len() >= 1 << 20 {
            Sink::<T>::flush(self)?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), String> {
        let lines = std::mem::replace(&mut self.buf, rank_csv())
            .into_inner()
            .map_err(|e| format!("CSV row: {e}"))?;
        if lines.is_empty() {
            return Ok(());
        }
        self.file.append(&lines)
    }
}

/// Refuses an output path rows could not be streamed into (a directory, a
/// missing directory), without creating it: the file is created when the
/// first rows come (or at the end), so a job that fails to start leaves an
/// earlier file alone.
///
/// # Errors
/// [`CliError::BadInput`] naming `p`.
pub fn check_streamed_output(p: &Path) -> Result<(), CliError> {
    let bad = |e: &dyn std::fmt::Display| CliError::BadInput(format!("{}: {e}", p.display()));
    if std::fs::metadata(p).is_ok_and(|m| m.is_dir()) {
        return Err(bad(&"is a directory"));
    }
    let parent = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !parent.is_dir() {
        return Err(bad(&"its directory does not exist"));
    }
    // Writable? An existing file is opened for appending (not truncated:
    // it keeps its content until the first rows come); a new one is
    // probed with a temp file beside it.
    if let Ok(m) = std::fs::metadata(p) {
        // A FIFO or device is written in place and not probed: opening and
        // closing a FIFO would hand its reader an end of file (and block
        // while it has none).
        if m.is_file() {
            std::fs::OpenOptions::new()
                .append(true)
                .open(p)
                .map_err(|e| bad(&e))?;
        }
    } else {
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
        let probe = parent.join(format!(
            ".{}.{}.probe",
            name.unwrap_or_default(),
            std::process::id()
        ));
        std::fs::File::create(&probe).map_err(|e| bad(&e))?;
        let _ = std::fs::remove_file(&probe);
    }
    Ok(())
}

/// Runs `q`: every rank runs its share; rank 0 merges and writes.
pub fn main<Q: Query>(q: &Q, dist: &Dist) -> Result<(), CliError> {
    run(q, dist, true).map(|_| ())
}

/// What makes a run of `q` this job for its checkpoints: a hash of its name
/// and parsed options (so their order, spelling and defaults do not
/// matter) less the runtime and output options (workers are checked on
/// their own; the key groups are in the graph's signature).
pub fn job_identity<Q: Query>(q: &Q) -> u64 {
    job_options(q)
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
        })
}

/// The text [`job_identity`] hashes: the query's name and parsed options
/// (`Debug`) less the runtime and output options.
fn job_options<Q: Query>(q: &Q) -> String {
    let mut d = format!("{} {q:?}", q.name());
    for part in [format!("{:?}", q.runtime()), format!("{:?}", q.output())] {
        d = d.replacen(&part, "", 1);
    }
    d
}

/// Runs `q` as [`main`] does; `print`: the summary on the terminal. Returns
/// the merged report at rank 0 (`None` on the other ranks).
///
/// # Errors
/// As [`main`]: bad options or input, a failed job (every rank agrees).
pub fn run<Q: Query>(q: &Q, dist: &Dist, print: bool) -> Result<Option<Report>, CliError> {
    super::common::set_job_identity(job_identity(q));
    let root = dist.is_root();
    // What the checkpoint directory says of its job, for people.
    let record = q
        .runtime()
        .checkpoint_dir
        .as_deref()
        .map(|dir| super::ckjob::JobRecord::new(dir, job_identity(q), job_options(q)));
    let out = q.output();
    let open = |p: &Path| super::common::Output::create(p);
    let streams = q.streams();
    let mut files = (None, None, None);
    // Where a streaming query's rows go (checked, not created, now).
    let mut to = RowsTo::Nowhere;
    // The live-metrics server (`--metrics`), serving until the job ended.
    let mut metrics = None;
    let checked = q.validate(dist.ranks()).and_then(|()| {
        if out.out_per_rank && out.out.is_none() {
            return Err(CliError::BadInput("--out-per-rank needs --out".into()));
        }
        let mut outs: Vec<(&str, &Path)> = Vec::new();
        if let Some(o) = &out.out {
            outs.push(("--out", o));
        }
        if let Some(r) = &out.report {
            if is_stdout(r) {
                return Err(CliError::BadInput(
                    "--report -: the JSON report goes to a file (the summary is printed to \
                     standard output; --out - streams the rows there)"
                        .into(),
                ));
            }
            outs.push(("--report", r));
        }
        if let Some(p) = &out.latency_plot {
            if !q.wallclock() {
                return Err(CliError::BadInput(format!(
                    "--latency-plot: {} has no latency here (it needs --rate, wall-clock event times, and windows)",
                    q.name()
                )));
            }
            outs.push(("--latency-plot", p));
        }
        let timeline = q.runtime().timeline_path(dist.rank(), dist.ranks());
        if let Some(t) = &timeline {
            outs.push(("--timeline", t));
        }
        // Per-rank files share the suffix rule: the given names must differ
        // too (`--out X --out-per-rank --timeline X` would share X.rank0).
        if dist.ranks() > 1 {
            if let Some(t) = &q.runtime().timeline {
                outs.push(("--timeline", t));
            }
        }
        super::common::check_outputs(&outs, &q.inputs())?;
        q.runtime().check_timeline(dist.rank(), dist.ranks())?;
        q.runtime().check_key_groups(dist.ranks())?;
        // Bound now, so that a port in use is refused before anything runs.
        if let Some(m) = &q.runtime().metrics {
            metrics = Some(m.start(dist.rank())?);
        }
        if out.out_per_rank && q.global_finish() {
            return Err(CliError::BadInput(format!(
                "--out-per-rank: {} computes its result from every rank's rows; use --out",
                q.name()
            )));
        }
        if root {
            files.0 = out
                .out
                .as_deref()
                .filter(|_| !out.out_per_rank && !streams)
                .map(open)
                .transpose()?;
            files.1 = out.report.as_deref().map(open).transpose()?;
            // Drawn after the run: its directory is checked now, as the
            // other outputs', so that a mistyped path does not end a long
            // run with an error.
            if let Some(p) = &out.latency_plot {
                check_streamed_output(p)?;
            }
        }
        match (&out.out, out.out_per_rank, streams) {
            (Some(p), true, true) => {
                let p = per_rank_path(p, dist.rank());
                check_streamed_output(&p)?;
                to = RowsTo::Rank(RankFile::new(p, &q.header()));
            }
            (Some(p), true, false) => files.2 = Some(open(&per_rank_path(p, dist.rank()))?),
            (Some(p), false, true) => {
                if root && !is_stdout(p) {
                    check_streamed_output(p)?;
                }
                to = RowsTo::One(p.clone());
            }
            _ => {}
        }
        if let Some(r) = &record {
            if let Some(p) = out.out.as_deref().filter(|p| !is_stdout(p)) {
                if std::fs::metadata(p).is_ok_and(|m| !m.is_file()) {
                    return Err(CliError::BadInput(format!(
                        "--out {} with --checkpoint-dir: exactly-once output goes to a regular \
                         file (cut back to its committed length on resume); leave out --out to \
                         count rows only, or use --out - to print them as checkpoints commit",
                        p.display()
                    )));
                }
            }
            r.check(q.runtime().fresh, root)?;
        }
        Ok(())
    });
    dist.agree(checked)?;
    let (out_file, report_file, rank_file) = files;
    let timeline = match q.runtime().start_timeline(dist.rank(), dist.ranks()) {
        Ok(t) => t,
        Err(e) => {
            // The abort ends this process at once: its unwritten outputs'
            // temp files go first.
            drop((out_file, report_file, rank_file));
            dist.abort_if_distributed(&e.to_string(), e.exit_code());
            return Err(e);
        }
    };
    let part = q.run_rank_streaming(dist, &to);
    drop(timeline);
    drop(metrics);
    // A rank's streamed file exists once the job ran (a header only
    // without rows).
    let part = match (part, &to) {
        (Ok(p), RowsTo::Rank(f)) => f.finish().map(|()| p),
        (part, _) => part,
    };
    let part = match part {
        Ok(mut p) => {
            p.peak_rss_bytes = super::common::peak_rss_bytes();
            // A signal sent to this rank alone stops it too.
            p.stopped |= air_runtime::stop::requested();
            p
        }
        Err(e) => {
            let e = super::common::with_ring_hint(e, q.runtime().ring_bytes());
            if let Some(msg) = super::common::refusal(&e) {
                // Every rank refused the job together, before anything was
                // made (`RuntimeError::Refused`): MPI is intact and no rank
                // is in the job, so no abort. Rank 0 says why, once; every
                // rank exits 2 (a bad option); the outputs' temp files go
                // with them on return.
                return Err(if root {
                    CliError::BadInput(msg)
                } else {
                    CliError::Quiet(2)
                });
            }
            // The abort ends this process at once: its unwritten outputs'
            // temp files go first.
            drop((out_file, report_file, rank_file));
            dist.abort_if_distributed(&e.to_string(), e.exit_code());
            return Err(e);
        }
    };
    if let Some(f) = rank_file {
        let rows = q.finish(part.rows.clone());
        f.write(|f| write_csv(q, f, &rows))?;
    }
    let parts = if dist.ranks() == 1 {
        // Alone: no need to serialize (Q1's kept rows can be millions).
        vec![part]
    } else {
        let bytes = serde_json::to_vec(&part)?;
        let Some(parts) = dist.gather(bytes)? else {
            return match dist.agree_exit_code(0) {
                0 => Ok(None),
                c => Err(CliError::Quiet(c)),
            };
        };
        parts
            .iter()
            .map(|b| serde_json::from_slice::<RankPart<Q::Row>>(b))
            .collect::<Result<Vec<_>, _>>()?
    };
    let mpi = dist.describe(q.runtime().job_config().workers, q.runtime().force_network);
    let merged = merge(q, parts, mpi);
    let code = match &merged {
        Ok((_, _, Some(_), _)) => 2,
        Ok((_, r, None, _)) if out.fail_on_late && r.late_by_operator.dropped() > 0 => 1,
        Ok(_) => 0,
        Err(e) => e.exit_code(),
    };
    dist.agree_exit_code(code);
    let (rows, report, input_error, hist) = merged?;
    if let Some(f) = out_file {
        f.write(|f| write_csv(q, f, &rows))?;
    }
    if let Some(f) = report_file {
        f.write(|f| super::common::write_json(f, &report))?;
    }
    // A run an input error stopped before any event was read has nothing
    // to sum up: the error alone is printed.
    if print && !(input_error.is_some() && report.events == 0) {
        // With the rows on standard output, the summary goes to stderr.
        if out.out.as_deref().is_some_and(is_stdout) {
            q.summary(&report, &mut std::io::stderr().lock())?;
        } else {
            q.summary(&report, &mut std::io::stdout().lock())?;
        }
    }
    if let Some(p) = &out.latency_plot {
        let title = format!("air run {} latency", q.name());
        super::plots::write_latency_cdf(&hist, p, &title).map_err(CliError::BadInput)?;
    }
    // Late records are never silent: on stderr, whatever the summary's way.
    let late = report.late_by_operator.summary(report.disorder_max_ms);
    if print {
        for l in &late {
            air_runtime::say!("air: {l}");
        }
    }
    if let Some(r) = record.filter(|_| root && code == 0 && input_error.is_none()) {
        if !report.stopped {
            r.finished();
        }
    }
    match input_error {
        Some(e) => Err(CliError::BadInput(e)),
        None if out.fail_on_late && report.late_by_operator.dropped() > 0 => {
            Err(CliError::Other(anyhow::anyhow!(
                "{} late record(s) (--fail-on-late)",
                report.late_by_operator.dropped()
            )))
        }
        None => Ok(Some(report)),
    }
}

/// Rows, report, input error, latency histogram (ms).
type Merged<R> = (
    Vec<R>,
    Report,
    Option<String>,
    air_runtime::metrics::Histogram<u64>,
);

fn merge<Q: Query>(
    q: &Q,
    parts: Vec<RankPart<Q::Row>>,
    mpi: Option<MpiReport>,
) -> Result<Merged<Q::Row>, CliError> {
    let mut rows = Vec::new();
    let mut per_worker = Vec::new();
    let mut hist = air_runtime::metrics::latency_histogram();
    let mut align = air_runtime::metrics::alignment_histogram();
    let (mut barrier_last, mut alignments, mut given_up, mut deferred) = (0, 0, 0, 0);
    let mut state = StateFigures::default();
    let (mut skipped, mut late_partials, mut secs, mut uncollected) = (0, 0, 1e-9f64, 0);
    let mut input_error = None;
    let mut counters = std::collections::BTreeMap::new();
    let (mut stopped, mut unfired) = (air_runtime::stop::requested(), 0);
    let mut peak_rss = 0;
    let mut extras = Vec::new();
    let mut stages = Vec::new();
    let mut hot = HotKeys::default();
    let mut moves = GroupMoves::default();
    let mut late = air_runtime::dataflow::LateLog::default();
    let mut disorder: Option<u64> = None;
    let rt = q.runtime();
    let mut channels = ChannelsReport {
        plan: serde_json::Value::Null,
        created_per_rank: Vec::new(),
        ring_bytes_requested: rt.ring_bytes() as u64,
        ring_budget_bytes: rt.job_config().ring_budget,
        scaled_to_budget: false,
    };
    for p in parts {
        extras.push(p.extra);
        hot.add(&p.load.hot);
        moves.add(&p.load.moves);
        if stages.is_empty() {
            stages = p.load.stages;
        }
        if channels.plan.is_null() {
            channels.plan = p.channels["plan"].clone();
            // The largest edge's ring is the requested size unless the
            // budget scaled it (small edges get a sixteenth either way).
            let largest = channels.plan["edges"]
                .as_array()
                .and_then(|e| e.iter().filter_map(|e| e["ring_bytes"].as_u64()).max());
            channels.scaled_to_budget = channels.ring_budget_bytes.is_some()
                && largest.is_some_and(|b| b < channels.ring_bytes_requested.next_multiple_of(16));
        }
        channels
            .created_per_rank
            .push(p.channels["created"].clone());
        peak_rss = p.peak_rss_bytes.max(peak_rss);
        stopped |= p.stopped;
        unfired += p.unfired_windows;
        for (k, v) in &p.counters {
            *counters.entry(k.clone()).or_insert(0) += v;
        }
        rows.extend(p.rows);
        per_worker.extend(p.per_worker);
        air_runtime::metrics::record_pairs(&mut hist, &p.latency);
        air_runtime::metrics::record_pairs(&mut align, &p.checkpoints.alignment_us);
        barrier_last = barrier_last.max(p.checkpoints.barrier_last);
        alignments += p.checkpoints.alignments;
        given_up += p.checkpoints.alignments_given_up;
        deferred += p.checkpoints.barriers_deferred;
        state.add(&p.checkpoints.state);
        skipped += p.skipped;
        uncollected += p.uncollected_rows;
        late_partials += p.late_partials;
        late.merge(&p.late);
        disorder = disorder.max(p.disorder_max_ms);
        secs = secs.max(p.elapsed_s);
        if input_error.is_none() {
            input_error = p.input_error;
        }
    }
    if late_partials != 0 {
        return Err(CliError::Other(anyhow::anyhow!(
            "internal error: {late_partials} partial aggregates arrived after their window fired"
        )));
    }
    let rows = q.finish(rows);
    let w = per_worker.len().max(1);
    let events: u64 = per_worker.iter().map(|p| p.events).sum();
    let rt = q.runtime();
    if let Some(e) = &input_error {
        input_error = Some(if rt.checkpoint_dir.is_some() {
            // Nothing past the last complete checkpoint was committed as
            // final: a rerun once the input is mended resumes from it.
            format!(
                "{e} (reading stopped; the output holds the rows of the last complete \
                 checkpoint: mend the input after that point and rerun the same command to \
                 resume, or --fresh to start over)"
            )
        } else {
            format!(
                "{e} (reading stopped; the {events} events read before every worker stopped \
                 were processed and their results written)"
            )
        });
    }
    let mut report = Report {
        query: q.name(),
        workers: w,
        ranks: mpi.as_ref().map_or(1, |m| m.ranks),
        key_groups: q.runtime().max_parallelism,
        source: q.source(),
        events,
        elapsed_s: secs,
        events_per_s: events as f64 / secs,
        events_per_s_per_worker: events as f64 / secs / w as f64,
        late_records: per_worker.iter().map(|p| p.late_records).sum(),
        late_by_operator: late,
        disorder_max_ms: disorder,
        skipped_records: skipped,
        rows: rows.len() as u64 + uncollected,
        latency_ms: q
            .wallclock()
            .then(|| air_runtime::LatencySummary::of(&hist)),
        input_lag_max_ms: per_worker
            .iter()
            .filter_map(|p| p.input_lag_max_ms)
            .reduce(f64::max),
        params: q.params(),
        checkpoints: q
            .runtime()
            .job_config()
            .barrier_every
            .map(|every| CheckpointReport {
                barrier_every_ms: every.as_millis() as u64,
                barrier_last,
                alignments,
                alignment_us: AlignmentSummary::of(&align),
                alignments_given_up: given_up,
                barriers_deferred: deferred,
                state: q.runtime().checkpoint_dir.is_some().then_some(state),
            }),
        counters,
        stopped,
        unfired_windows: unfired,
        peak_rss_bytes: peak_rss,
        placement: super::ysb::PlacementReport {
            pinned: !rt.no_pin,
            smt: rt.smt,
            topology: air_runtime::placement::topology().map(|t| t.source),
            oversubscribed: per_worker.iter().any(|p| p.placement.oversubscribed),
        },
        mpi,
        channels,
        load: LoadReport::of(
            &stages,
            &per_worker
                .iter()
                .map(|w| w.records_in_by_edge.as_slice())
                .collect::<Vec<_>>(),
            RebalanceReport {
                on: rt.rebalance,
                period_ms: rt.rebalance_ms,
                hot,
                moves,
            },
        )
        .with_periods(
            &per_worker
                .iter_mut()
                .map(|w| std::mem::take(&mut w.records_in_periods))
                .collect::<Vec<_>>(),
        ),
        per_worker,
        extra: serde_json::Map::new(),
    };
    report.extra = q.report_extra(&extras, &report);
    Ok((rows, report, input_error, hist))
}

/// The first line of a summary: the query, workers, ranks, events and
/// throughput, then `suffix`.
///
/// # Errors
/// Writing fails.
pub fn summary_head(r: &Report, suffix: &str, out: &mut dyn Write) -> std::io::Result<()> {
    let ranks = if r.ranks > 1 {
        format!(" on {} ranks", r.ranks)
    } else {
        String::new()
    };
    writeln!(
        out,
        "{}: {} worker{}{ranks}, {} events in {:.3} s = {} M events/s ({} M/s per worker){suffix}",
        r.query,
        r.workers,
        if r.workers == 1 { "" } else { "s" },
        thousands(r.events),
        r.elapsed_s,
        mega(r.events_per_s),
        mega(r.events_per_s_per_worker),
    )
}

/// `per_s` events/s in millions, with one decimal from 1 M/s up and at
/// least two significant digits below (`0.33`, `0.0061`), so a slow run
/// never reads `0.0`.
fn mega(per_s: f64) -> String {
    let m = per_s / 1e6;
    let decimals = if m >= 1.0 || m <= 0.0 || !m.is_finite() {
        1
    } else {
        // Two significant digits: 0.33 → 2, 0.1 → 2, 0.0061 → 4.
        ((-m.log10()).ceil() as usize + 1).min(9)
    };
    format!("{m:.decimals$}")
}

/// The summary line of the job's channels (rank 0's plan: rings by tier
/// and memory on its node), then the load line ([`summary_load`]).
///
/// # Errors
/// Writing fails.
pub fn summary_channels(r: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    let p = &r.channels.plan;
    let n = |v: &serde_json::Value| thousands(v.as_u64().unwrap_or(0));
    let mib = |v: &serde_json::Value| v.as_u64().unwrap_or(0) as f64 / (1u64 << 20) as f64;
    if p.is_null() {
        return summary_load(&r.load, r.events, out);
    }
    let (rings, mem) = (&p["rings_per_node"], &p["memory_per_node"]);
    // Each edge's ring, bytes (the per-node budget may have scaled them).
    let sizes: Vec<String> = p["edges"]
        .as_array()
        .map(|e| e.iter().map(|e| n(&e["ring_bytes"])).collect())
        .unwrap_or_default();
    let budget = r.channels.ring_budget_bytes.unwrap_or(0);
    let needs = mem["total_bytes"].as_u64().unwrap_or(0);
    let scaled = if r.channels.scaled_to_budget && needs > budget {
        // Even the smallest rings do not fit: say so, not that they do.
        format!(
            " (scaled down from {} to the floor; a node's rings still need {}, above the \
             per-node budget of {}: lower --workers or ranks per node)",
            thousands(r.channels.ring_bytes_requested),
            air_runtime::units::binary_bytes(needs),
            air_runtime::units::binary_bytes(budget)
        )
    } else if r.channels.scaled_to_budget {
        format!(
            " (scaled down from {} to keep a node's rings within {}; --ring-bytes sets them)",
            thousands(r.channels.ring_bytes_requested),
            air_runtime::units::binary_bytes(budget)
        )
    } else {
        String::new()
    };
    writeln!(
        out,
        "  channels: {} rings on node 0 (thread {}, node {}, network {}) of {} bytes{scaled}, \
         {:.1} MiB (process {:.1}, /dev/shm {:.1}, windows {:.1}); {} in the job (`air plan` \
         explains)",
        n(&rings["total"]),
        n(&rings["thread"]),
        n(&rings["node"]),
        n(&rings["network"]),
        sizes.join(" / "),
        mib(&mem["total_bytes"]),
        // Process memory: thread-tier rings and network read buffers.
        mib(&mem["thread_bytes"]) + mib(&mem["mirror_bytes"]),
        mib(&mem["shm_bytes"]),
        mib(&mem["window_bytes"]),
        n(&p["rings"]["total"])
    )?;
    summary_load(&r.load, r.events, out)
}

/// The summary lines of checkpoint barriers (`--barrier-ms`) and state
/// (`--checkpoint-dir`), if any.
pub fn summary_checkpoints(r: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    if let Some(c) = &r.checkpoints {
        let a = &c.alignment_us;
        let us = |v: Option<u64>| v.map_or("-".to_string(), |v| format!("{} µs", thousands(v)));
        let deferred = match c.barriers_deferred {
            0 => String::new(),
            n => format!(
                "; {} barriers deferred at sources (the last checkpoint still in flight: \
                 state takes longer to save or write than the interval)",
                thousands(n)
            ),
        };
        writeln!(
            out,
            "  barriers every {} ms: newest at the sinks {}, {} alignments (p50 {}, p99 {}, max \
             {}){deferred}",
            c.barrier_every_ms,
            c.barrier_last,
            thousands(c.alignments),
            us(a.p50_us),
            us(a.p99_us),
            us(a.max_us)
        )?;
        if let Some(st) = &c.state {
            let from = match st.resumed_from {
                0 => "a fresh start".to_string(),
                n => format!(
                    "resumed from checkpoint {n} ({} bytes of parts read and restored in {} ms)",
                    thousands(st.restored_bytes),
                    thousands(st.restore_us / 1000)
                ),
            };
            writeln!(
                out,
                "  checkpoints: {from}; newest complete {}, {} parts written ({} bytes, write \
                 mean {} µs, max {} µs), {} failed",
                st.newest_complete,
                thousands(st.parts_written),
                thousands(st.bytes),
                thousands(st.write_us / st.parts_written.max(1)),
                thousands(st.write_max_us),
                st.parts_failed
            )?;
        }
    }
    Ok(())
}

fn print_summary(r: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    summary_head(r, "", out)?;
    summary_channels(r, out)?;
    writeln!(
        out,
        "  rows {}, late {}, skipped {}",
        thousands(r.rows),
        thousands(r.late_records),
        thousands(r.skipped_records)
    )?;
    if r.stopped {
        writeln!(
            out,
            "  STOPPED by a signal: {} window(s) or timer(s) still open were not reported",
            thousands(r.unfired_windows)
        )?;
    }
    if !r.counters.is_empty() {
        let c: Vec<String> = r
            .counters
            .iter()
            .map(|(k, v)| format!("{k} {}", thousands(*v)))
            .collect();
        writeln!(out, "  {}", c.join(", "))?;
    }
    if let Some(l) = &r.latency_ms {
        writeln!(
            out,
            "  latency (emit - newest event in window): {} ({} samples)",
            l.describe(),
            thousands(l.samples)
        )?;
    }
    if let Some(lag) = r.input_lag_max_ms {
        writeln!(
            out,
            "  input lag (generator behind its --rate schedule): max {lag:.1} ms"
        )?;
    }
    summary_checkpoints(r, out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn slow_rates_keep_two_significant_digits() {
        assert_eq!(super::mega(61_900_000.0), "61.9");
        assert_eq!(super::mega(1_000_000.0), "1.0");
        assert_eq!(super::mega(330_000.0), "0.33");
        assert_eq!(super::mega(100_000.0), "0.10");
        assert_eq!(super::mega(6_100.0), "0.0061");
        assert_eq!(super::mega(0.0), "0.0");
    }
}
