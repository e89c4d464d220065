//! The Yahoo Streaming Benchmark (YSB), with the original benchmark's
//! semantics: keep `event_type == "view"`, join `ad_id` to its campaign, count
//! per campaign per 10-second tumbling event-time window. (AIR's C++ code
//! counts clicks instead; we follow the original benchmark.) View events with
//! an unknown `ad_id` are counted as `unmatched` and dropped.
//!
//! The job is a graph ([`air_runtime::dataflow`]) run by the shared query
//! driver ([`super::driver`]): each worker's source (generator or its share
//! of the input files) → views of known ads → `key_by` campaign → tumbling
//! event-time window with `Count` (pre-aggregated unless `--shuffle`) →
//! rows streamed to `--out` as windows close.

use super::common::{thousands, CliError, RuntimeArgs};
use super::dist::Dist;
use super::driver::{OutputArgs, Query, RankPart, Report, RowsTo, WorkerFigures};
use super::lagwatch::Watched;
use air_operators::graph::{Count, KeyedWindowExt, Tumbling, Windowed};
use air_operators::sources::file_merge::{MergedPieces, PieceSource, Streams};
use air_operators::sources::files::{PieceQueue, PieceStream};
use air_operators::sources::live::{LiveFeed, LiveInput, LiveOptions};
use air_operators::sources::shards::{resume, save_positions, Shards};
use air_operators::sources::ysb::{
    split_ranges, uuid_to_string, Campaigns, EventTimeMode, EventType, OnBadRecord, Pacer,
    ParseMode, ReaderOptions, SourceError, YsbEvent, YsbFileReader, YsbGenConfig, YsbGenerator,
};
use air_runtime::dataflow::{run_graph, Dataflow, Head, Pipe, Source, SourcePoll, Stats, Stream};
use crossbeam_utils::CachePadded;
use serde::Serialize;
use serde_json::{json, Value};
use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};
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
    /// Generate for this many seconds (at most 1e9). With --rate: rate ×
    /// seconds events, on the rate's schedule; a job that cannot keep up
    /// runs longer rather than drop events (the summary's input lag says
    /// by how much).
    #[arg(long, value_parser = super::common::parse::duration)]
    pub duration: Option<f64>,
    /// Generator seed (each worker derives its own stream from it).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Event time of generated events.
    #[arg(long, value_enum, default_value_t = EventTimeArg::Wallclock)]
    pub event_time: EventTimeArg,
    /// Read events from these JSON-lines files (YSB schema) instead of
    /// generating; or from one live input: `-` (standard input, a pipe) or
    /// `tcp://HOST:PORT` (air connects; `{rank}` is replaced by the MPI
    /// rank, so each rank reads its own).
    #[arg(long, num_args = 1..)]
    pub input: Vec<PathBuf>,
    /// Read events from TCP senders that connect to HOST:PORT (one or
    /// more; each connection's lines feed this rank). The input ends when
    /// every sender that connected has closed (after the first came) and
    /// none came back within --listen-linger-ms; later senders are refused.
    /// `{rank}` is replaced by the MPI rank (e.g. `127.0.0.1:70{rank}0`).
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "input")]
    pub listen: Option<String>,
    /// With --listen: keep accepting senders for this long after the last
    /// connected one closed, so a sender that drops and reconnects
    /// continues the stream; the input ends when no sender was connected
    /// for MS [default: 0, the input ends when the last sender closes].
    #[arg(long, value_name = "MS", requires = "listen", value_parser = super::common::parse::linger_ms)]
    pub listen_linger_ms: Option<u64>,
    /// Read events from FILE as it grows, like `tail -F`: from its start,
    /// then what is appended. A truncation (the file shrinks below what was
    /// read) reads it again from its start; a rotation (FILE renamed or
    /// removed and a new file created at the path) finishes the old file,
    /// then reads the new one from its start. Ends at SIGINT/SIGTERM or
    /// after --follow-idle-end-ms. `{rank}` is replaced by the MPI rank.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["input", "listen"])]
    pub follow: Option<PathBuf>,
    /// With --follow: end the input when the file has not grown (and no
    /// new file appeared at its path) for MS; then every window fires and
    /// the job exits 0 [default: never].
    #[arg(long, value_name = "MS", requires = "follow", value_parser = super::common::parse::idle_ms)]
    pub follow_idle_end_ms: Option<u64>,
    /// The ad → campaign map: `"ad_id":"campaign_id"` lines or CSV `ad_id,campaign_id`
    /// (default: 100 campaigns × 10 ads generated from --seed).
    #[arg(long)]
    pub campaigns: Option<PathBuf>,
    /// Tumbling window size, ms [default: 10000].
    #[arg(long, value_name = "MS", value_parser = super::common::parse::window_ms)]
    pub window_ms: Option<u64>,
    /// Bounded out-of-orderness, ms: watermark = newest event time − this.
    /// An older event still counts if its window has not closed; one whose
    /// window closed is late: dropped, counted in `late_records` and named
    /// on stderr with the delay that would have kept it [default: 0].
    #[arg(long, value_name = "MS", value_parser = super::common::parse::delay_ms)]
    pub max_delay_ms: Option<u64>,
    /// Idleness, ms of wall-clock time: a worker whose input brought no
    /// event for this long stops holding windows back (its watermark
    /// follows the wall clock minus this), so windows close while the input
    /// is quiet (Flink's `withIdleness`). Wall-clock event times only: the
    /// generator's, or a live input's (-, tcp://, --listen, --follow) whose
    /// records
    /// carry wall-clock times; not with input files or --event-time
    /// synthetic [default: never idle].
    #[arg(long, value_name = "MS", value_parser = super::common::parse::idle_ms)]
    pub idle_ms: Option<u64>,
    /// Send every event through the exchange (no partial aggregate per worker).
    #[arg(long)]
    pub shuffle: bool,
    /// Generated events: Zipf-distributed campaigns (the window's key) with
    /// this exponent, campaign i of the map (in its order) ∝ 1 / (i + 1)^S,
    /// the ad uniform among the campaign's; 0 or without: every ad equally
    /// likely (YSB's generator).
    #[arg(long, value_name = "S", value_parser = super::common::parse::zipf)]
    pub zipf: Option<f64>,
    /// With --zipf: the hot campaigns move every MS of event time (epochs
    /// at multiples of MS): the Zipf ranks rotate over the campaigns
    /// [default: the hot campaigns never move].
    #[arg(long, value_name = "MS", value_parser = super::common::parse::zipf_shift_ms)]
    pub zipf_shift_ms: Option<u64>,
    /// Fields parsed from --input.
    #[arg(long, value_enum, default_value_t = ParseArg::Full)]
    pub parse: ParseArg,
    /// What to do with a bad input record.
    #[arg(long, value_enum, default_value_t = BadRecordArg::Fail)]
    pub on_bad_record: BadRecordArg,
    /// Outputs: `--out` (CSV `window_start_ms,campaign_id,count`, each
    /// window's rows when it closes; `-` for standard output), `--report`,
    /// `--out-per-rank`, `--latency-plot` (wall-clock event times only).
    #[command(flatten)]
    pub output: OutputArgs,
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
    /// Several shards of the generator, unthrottled: a worker resumed at
    /// another worker count than its checkpoint's.
    Shards(Shards<YsbGenerator>),
    /// The generator paced by `--rate` and/or `--duration` (it records its
    /// input lag: how late it was on its schedule after each batch).
    Paced(Watched<YsbGenerator>),
    /// Several streams of input file pieces merged by event time: a
    /// worker resumed at another worker count than its checkpoint's with
    /// the remainders of several old workers (each stream a `Files`).
    MergedFiles(Box<MergedPieces<YsbSource>>),
    /// Byte ranges of input files, or a live input.
    Files {
        /// Pieces still to read.
        pieces: PieceQueue,
        /// The live input whose share `current` reads (from the start).
        live: Option<LiveFeed>,
        /// Opens this worker's share of the live input, at the first poll
        /// (not when the graph is built: the build closure also runs once
        /// to plan the graph, and that run must not take a worker's queue).
        open_live: Option<OpenLive>,
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
        /// Where the error that stopped a source goes (the earliest in its
        /// stream of those the workers met).
        failed: Arc<std::sync::Mutex<Option<Failure>>>,
        /// The first record any worker of this rank skipped
        /// (`--on-bad-record skip`), for the summary.
        first_skip: Arc<std::sync::Mutex<Option<String>>>,
    },
}

/// Opens a worker's share of a live input (see `YsbSource::Files`).
pub type OpenLive = Box<dyn FnOnce() -> Option<YsbFileReader> + Send>;

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

    fn next_due(&self) -> Option<std::time::Instant> {
        match self {
            YsbSource::Paced(p) => p.next_due(),
            _ => None,
        }
    }

    /// The generator's position (events generated; a paced one's with its
    /// schedule), the input files' (pieces read, the offset of the next
    /// line: [`PieceQueue`]), or a live input's
    /// ([`LiveFeed::save_position`]: a followed file's cut; standard input
    /// and TCP are not replayable and resume from what the sender sends
    /// then).
    fn save(&self) -> Option<Vec<u8>> {
        match self {
            YsbSource::Files { live: Some(f), .. } => Some(f.save_position(0)),
            YsbSource::Gen(g) => Some(save_positions(std::slice::from_ref(g))),
            YsbSource::Shards(s) => Some(s.save()),
            YsbSource::Paced(p) => p.save(),
            YsbSource::Files {
                pieces,
                current,
                live: None,
                ..
            } => Some(pieces.save(current.as_ref().and_then(|r| r.position()))),
            YsbSource::MergedFiles(m) => Some(m.save()),
        }
    }

    fn restore(&mut self, state: &[u8]) -> Result<(), String> {
        match self {
            YsbSource::Gen(g) => {
                if let Some(shards) = resume(g, state)? {
                    *self = YsbSource::Shards(shards);
                }
                Ok(())
            }
            YsbSource::Files {
                pieces, live: None, ..
            } => {
                if let Some(streams) = pieces.restore(state)? {
                    *self = self.merged(streams);
                }
                Ok(())
            }
            YsbSource::Files { live: Some(f), .. } => f.restore(state),
            YsbSource::Paced(p) => p.restore(state),
            _ => Err(
                "only the unpaced generator, input files and live inputs resume from a \
                      checkpoint"
                    .into(),
            ),
        }
    }

    fn rescales(&self) -> bool {
        matches!(self, YsbSource::Gen(_) | YsbSource::Files { .. })
    }

    fn rescale(
        &mut self,
        states: &[&[u8]],
        to: air_runtime::dataflow::state::Rescale,
    ) -> Result<(), String> {
        match self {
            YsbSource::Gen(g) => {
                *self = YsbSource::Shards(Shards::rescaled(g, states, to)?);
                Ok(())
            }
            // Nothing to deal out: one position for every worker.
            YsbSource::Files { live: Some(f), .. } => f.rescale(states),
            // Its share of the old workers' remainders (streams of pieces).
            YsbSource::Files {
                pieces, live: None, ..
            } => {
                let split = |p: &Path, n: usize| split_ranges(p, n);
                let streams = pieces.rescaled(states, &to, split)?;
                *self = self.merged(streams);
                Ok(())
            }
            _ => Err(
                "only the unpaced generator, input files and live inputs resume at another \
                 worker count"
                    .into(),
            ),
        }
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
                first_skipped,
                first_skip,
                live,
                ..
            } => {
                // Partial lines of dropped connections count as skipped
                // (once per rank).
                let partial = live
                    .as_ref()
                    .and_then(|f| f.take_report())
                    .map_or(0, |r| r.partial_lines);
                stats.add(
                    "skipped_records",
                    *skipped + current.as_ref().map_or(0, |r| r.skipped()) + partial,
                );
                if let Some(e) = error {
                    // Workers fail on their own chunks or ranges at about
                    // the same time: keep the earliest in the stream.
                    let at = e.offset.map(|o| (e.path.clone(), o));
                    let mut f = failed.lock().unwrap_or_else(|e| e.into_inner());
                    let earlier = match (&*f, &at) {
                        (None, _) => true,
                        (Some((Some((p0, o0)), _)), Some((p, o))) => p == p0 && o < o0,
                        _ => false,
                    };
                    if earlier {
                        *f = Some((at, e.to_string()));
                    }
                }
                if let Some(e) = first_skipped.take() {
                    let mut f = first_skip.lock().unwrap_or_else(|e| e.into_inner());
                    f.get_or_insert(e);
                }
            }
            YsbSource::MergedFiles(m) => m.sources_mut().for_each(|s| s.report(stats)),
            YsbSource::Gen(_) | YsbSource::Shards(_) => {}
        }
    }
}

impl PieceSource for YsbSource {
    fn remaining(&self) -> Vec<air_operators::sources::files::FilePiece> {
        match self {
            YsbSource::Files {
                pieces, current, ..
            } => pieces.remaining(current.as_ref().and_then(|r| r.position())),
            _ => Vec::new(),
        }
    }
}

/// An input error that stopped a rank's workers: where it is in the stream
/// (path, byte offset), if known, and its message.
type Failure = (Option<(PathBuf, u64)>, String);

impl YsbSource {
    /// Input files (`self`, a `Files` source) going on with `streams`:
    /// one stream read as before, several merged by event time, none: no
    /// input left.
    fn merged(&self, streams: Vec<PieceStream>) -> YsbSource {
        let YsbSource::Files {
            pieces,
            opts,
            stop,
            failed,
            first_skip,
            ..
        } = self
        else {
            unreachable!("input files only")
        };
        let files = |queue: PieceQueue| YsbSource::Files {
            pieces: queue,
            live: None,
            open_live: None,
            current: None,
            opts: *opts,
            error: None,
            skipped: 0,
            first_skipped: None,
            stop: stop.clone(),
            failed: failed.clone(),
            first_skip: first_skip.clone(),
        };
        let time = std::sync::Arc::new(|e: &YsbEvent| e.event_time_ms);
        let make = |s: PieceStream| files(pieces.with_stream(s));
        match MergedPieces::of(streams, make, time, pieces.files(), pieces.inputs()) {
            Streams::One(s) => s,
            Streams::Merged(m) => YsbSource::MergedFiles(m),
        }
    }

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
            YsbSource::Shards(shards) => shards.poll(buf, max),
            YsbSource::MergedFiles(m) => m.poll(buf, max),
            YsbSource::Paced(p) => p.poll(buf, max),
            YsbSource::Files {
                pieces,
                current,
                opts,
                error,
                skipped,
                first_skipped,
                stop,
                open_live,
                failed,
                ..
            } => {
                buf.clear();
                if error.is_some() || stop.load(std::sync::atomic::Ordering::Relaxed) {
                    return SourcePoll::Done;
                }
                if let Some(open) = open_live.take() {
                    match open() {
                        Some(r) => *current = Some(r),
                        None => {
                            failed
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .get_or_insert_with(|| {
                                    (
                                        None,
                                        "a worker's share of the live input was taken twice".into(),
                                    )
                                });
                            stop.store(true, std::sync::atomic::Ordering::Relaxed);
                            return SourcePoll::Done;
                        }
                    }
                }
                loop {
                    if current.is_none() {
                        match pieces.next() {
                            None => return SourcePoll::Done,
                            Some((path, range)) => {
                                match YsbFileReader::open_range(&path, range, *opts) {
                                    Ok(r) => *current = Some(r),
                                    Err(e) => {
                                        air_runtime::dataflow::state::mark_failing();
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
                        Ok(0) if !r.is_finished() => return SourcePoll::Idle,
                        Ok(0) => {
                            *skipped += r.skipped();
                            if first_skipped.is_none() {
                                *first_skipped = r.first_skipped().map(|e| e.to_string());
                            }
                            *current = None;
                        }
                        Ok(_) => return SourcePoll::Ready,
                        Err(e) => {
                            air_runtime::dataflow::state::mark_failing();
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
    if !(MIN_RING_BYTES..=MAX_RING_BYTES).contains(&rt.ring_bytes()) {
        return bad(format!(
            "--ring-bytes {}: a ring must hold at least a batch frame and a control frame; \
             use {MIN_RING_BYTES}..={MAX_RING_BYTES}",
            rt.ring_bytes()
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
/// (`ranks`: ranks of the job, each with the same options); the driver
/// checks the outputs.
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
                (IdleMs, args.idle_ms.is_some()),
                (Shuffle, args.shuffle),
                (Zipf, args.zipf.is_some()),
                (ZipfShiftMs, args.zipf_shift_ms.is_some()),
            ],
        )?;
    }
    if args.zipf_shift_ms.is_some() && args.zipf.unwrap_or(0.0) == 0.0 {
        return bad(
            "--zipf-shift-ms moves the hot campaigns of --zipf: give --zipf above 0".into(),
        );
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
    let live = args.live_input()?;
    if args.idle_ms.is_some() && !args.wallclock() && live.is_none() {
        return bad(
            "--idle-ms needs wall-clock event times (an idle worker's watermark follows the \
             wall clock): not with input files or --event-time synthetic"
                .into(),
        );
    }
    if args.output.latency_plot.is_some() && !args.wallclock() {
        return bad(
            "--latency-plot needs generated events with wall-clock event times \
             (no --input, no --event-time synthetic)"
                .into(),
        );
    }
    if !args.input.is_empty() || live.is_some() {
        let conflicting = [
            ("--events", args.events.is_some()),
            ("--rate", args.rate.is_some()),
            ("--duration", args.duration.is_some()),
            ("--event-time", args.event_time != EventTimeArg::Wallclock),
            ("--zipf", args.zipf.is_some()),
            ("--zipf-shift-ms", args.zipf_shift_ms.is_some()),
        ];
        for (flag, set) in conflicting {
            if set {
                return bad(format!(
                    "{flag} applies to the generator, not to --input files"
                ));
            }
        }
        if live.is_none() {
            super::common::check_input_files(&args.input)?;
        }
    }
    args.load_campaigns().map(|_| ())
}

impl YsbArgs {
    /// The live input of `--input -`, `--input tcp://…`, `--listen` or
    /// `--follow` (`None` for files or the generator).
    ///
    /// # Errors
    /// A live input given with other inputs.
    pub fn live_input(&self) -> Result<Option<LiveInput>, CliError> {
        if let Some(a) = &self.listen {
            return Ok(Some(LiveInput::Listen(a.clone())));
        }
        if let Some(f) = &self.follow {
            return Ok(Some(LiveInput::Follow(f.clone())));
        }
        let live: Vec<_> = self
            .input
            .iter()
            .filter_map(|p| LiveInput::from_input_arg(p))
            .collect();
        match (live.len(), self.input.len()) {
            (0, _) => Ok(None),
            (1, 1) => Ok(live.into_iter().next()),
            _ => Err(CliError::BadInput(
                "a live input (-, tcp://HOST:PORT) must be the only --input".into(),
            )),
        }
    }

    /// The ad → campaign map: `--campaigns`, or the benchmark's generated
    /// one.
    fn load_campaigns(&self) -> Result<Campaigns, CliError> {
        match &self.campaigns {
            Some(p) => Campaigns::load(p).map_err(|e| CliError::BadInput(e.to_string())),
            None => Ok(Campaigns::ysb(self.seed)),
        }
    }
}

/// The rows' CSV header.
const HEADER: [&str; 3] = ["window_start_ms", "campaign_id", "count"];

/// One result row: a campaign's views in a window.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct YsbRow {
    /// Window start, ms of event time.
    pub window_start_ms: u64,
    /// The campaign (UUID text).
    pub campaign_id: String,
    /// Views of the campaign's ads in the window.
    pub count: u64,
}

/// Ends the graph: the rows of `windows` go where `to` says (sorted by
/// campaign id within a window when collected), every window start goes
/// into `seen`.
fn sink_rows<H, P>(
    windows: Stream<H, P>,
    campaigns: &Arc<Campaigns>,
    to: &RowsTo,
    seen: &Arc<std::sync::Mutex<std::collections::BTreeSet<u64>>>,
) where
    H: Head,
    P: Pipe<H::Out, Out = Windowed<u32, u64>>,
{
    let (c, by) = (campaigns.clone(), campaigns.clone());
    let seen = seen.clone();
    super::driver::sink_window_rows(
        windows,
        move |r: &Windowed<u32, u64>| by.campaign_id(r.key),
        move |r: Windowed<u32, u64>| {
            seen.lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(r.start);
            (r.start, uuid_to_string(c.campaign_id(r.key)), r.value)
        },
        &HEADER,
        to,
    );
}

impl Query for YsbArgs {
    type Row = YsbRow;

    fn name(&self) -> String {
        "ysb".into()
    }
    fn runtime(&self) -> &RuntimeArgs {
        &self.runtime
    }
    fn output(&self) -> &OutputArgs {
        &self.output
    }
    fn validate(&self, ranks: usize) -> Result<(), CliError> {
        validate(self, ranks)
    }
    fn run_rank(&self, dist: &Dist) -> Result<RankPart<YsbRow>, CliError> {
        // Rows counted, not kept: the driver streams them
        // (`run_rank_streaming`).
        self.run_rank_streaming(dist, &RowsTo::Nowhere)
    }
    fn streams(&self) -> bool {
        true
    }
    fn run_rank_streaming(&self, dist: &Dist, to: &RowsTo) -> Result<RankPart<YsbRow>, CliError> {
        run_rank(self, dist, to)
    }
    fn finish(&self, mut rows: Vec<YsbRow>) -> Vec<YsbRow> {
        rows.sort_unstable_by(|a, b| {
            (a.window_start_ms, &a.campaign_id).cmp(&(b.window_start_ms, &b.campaign_id))
        });
        rows
    }
    fn header(&self) -> Vec<&'static str> {
        HEADER.to_vec()
    }
    fn record(&self, r: &YsbRow) -> Vec<String> {
        vec![
            r.window_start_ms.to_string(),
            r.campaign_id.clone(),
            r.count.to_string(),
        ]
    }
    fn source(&self) -> &'static str {
        if matches!(self.live_input(), Ok(Some(_))) {
            return "live";
        }
        if self.input.is_empty() {
            "generator"
        } else {
            "files"
        }
    }
    fn inputs(&self) -> Vec<PathBuf> {
        let mut inputs: Vec<PathBuf> = self
            .input
            .iter()
            .filter(|p| LiveInput::from_input_arg(p).is_none())
            .cloned()
            .collect();
        inputs.extend(self.campaigns.iter().cloned());
        inputs
    }
    fn wallclock(&self) -> bool {
        // Generated events only: records read (files, or any live input:
        // --input -, tcp://, --listen, --follow) carry their own times.
        self.input.is_empty()
            && self.listen.is_none()
            && self.follow.is_none()
            && self.event_time == EventTimeArg::Wallclock
    }
    fn params(&self) -> Value {
        json!({
            "window_ms": self.window(),
            "max_delay_ms": self.max_delay(),
            "idle_ms": self.idle_ms,
            "pre_aggregate": !self.shuffle,
            "zipf": self.zipf,
            "zipf_shift_ms": self.zipf_shift_ms,
            "rate": self.rate,
            "duration_s": self.duration,
            "seed": self.seed,
        })
    }
    fn report_extra(&self, extras: &[Value], r: &Report) -> serde_json::Map<String, Value> {
        // Windows that had rows, over every rank's writers.
        let mut windows = std::collections::BTreeSet::new();
        for e in extras {
            if let Some(w) = e["windows"].as_array() {
                windows.extend(w.iter().filter_map(Value::as_u64));
            }
        }
        let sum = |k: &str| -> u64 {
            r.per_worker
                .iter()
                .filter_map(|w| w.extra[k].as_u64())
                .sum()
        };
        let mut m = serde_json::Map::new();
        m.insert("filtered".into(), sum("filtered").into());
        m.insert("unmatched".into(), sum("unmatched").into());
        m.insert("windows_emitted".into(), (windows.len() as u64).into());
        m.insert("window_ms".into(), self.window().into());
        m.insert("pre_aggregate".into(), (!self.shuffle).into());
        // The first record skipped (`--on-bad-record skip`), of the lowest
        // rank that skipped one.
        m.insert(
            "first_skipped_record".into(),
            extras
                .iter()
                .find_map(|e| e["first_skipped_record"].as_str())
                .map_or(Value::Null, |s| s.into()),
        );
        m
    }
    fn summary(&self, r: &Report, out: &mut dyn Write) -> std::io::Result<()> {
        let field = |k: &str| r.extra.get(k).and_then(Value::as_u64).unwrap_or(0);
        let shuffle = if self.shuffle {
            ", shuffle (no pre-aggregation)"
        } else {
            ""
        };
        super::driver::summary_head(r, shuffle, out)?;
        super::driver::summary_channels(r, out)?;
        writeln!(
            out,
            "  filtered {} (not view), unmatched {}, late {}, skipped {}; windows {}, rows {}",
            thousands(field("filtered")),
            thousands(field("unmatched")),
            thousands(r.late_records),
            thousands(r.skipped_records),
            field("windows_emitted"),
            r.rows
        )?;
        if let Some(first) = r.extra.get("first_skipped_record").and_then(Value::as_str) {
            writeln!(out, "  first skipped record: {first}")?;
        }
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
                "  STOPPED by a signal: {} window(s) or timer(s) still open were not reported",
                thousands(r.unfired_windows)
            )?;
        }
        if let Some(lag) = r.input_lag_max_ms {
            writeln!(
                out,
                "  input lag (generator behind its --rate schedule): max {lag:.1} ms"
            )?;
        }
        super::driver::summary_checkpoints(r, out)
    }
}

/// Runs this process's share of YSB as `args` say (every rank's workers
/// when distributed); its rows go where `to` says as windows close.
fn run_rank(args: &YsbArgs, dist: &Dist, to: &RowsTo) -> Result<RankPart<YsbRow>, CliError> {
    let campaigns = Arc::new(args.load_campaigns()?);
    let mut cfg = args.runtime.job_config();
    dist.configure(&mut cfg, args.runtime.force_network);
    // Global worker g = rank * w + local; the input and the generator are
    // split over every worker of the job.
    let w = cfg.workers;
    let total = w * dist.ranks();
    // A live input: this rank's readers hand whole-line chunks to its
    // workers (each parses its own).
    let live = match args.live_input()? {
        Some(input) => {
            let input = input.for_rank(dist.rank());
            let opts = LiveOptions {
                linger: Duration::from_millis(args.listen_linger_ms.unwrap_or(0)),
                idle_end: args.follow_idle_end_ms.map(Duration::from_millis),
                ..LiveOptions::default()
            };
            let feed =
                LiveFeed::start(&input, w, opts).map_err(|e| CliError::BadInput(e.to_string()))?;
            if dist.is_root() && args.runtime.checkpoint_dir.is_some() {
                super::common::say_live_checkpoint_promise(&feed);
            }
            Some(feed)
        }
        None => None,
    };
    let files = !args.input.is_empty() || live.is_some();
    // Pieces of input: each file split into one byte range per worker;
    // worker `i` reads range `i` of every file.
    let mut pieces: Vec<Vec<(PathBuf, Range<u64>)>> = vec![Vec::new(); total];
    for path in args.input.iter().filter(|_| live.is_none()) {
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
    let gen_cfg = match (files, args.zipf) {
        (false, Some(s)) => gen_cfg
            .with_zipf(&campaigns, s, args.zipf_shift_ms)
            .map_err(|e| CliError::BadInput(format!("--zipf {s}: {e}")))?,
        _ => gen_cfg,
    };
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
    let first_skip = Arc::new(std::sync::Mutex::new(None));
    let seen = Arc::new(std::sync::Mutex::new(std::collections::BTreeSet::new()));
    // The graph every worker runs: source → views of known ads → per
    // campaign per window count (pre-aggregated unless --shuffle) → rows.
    let build = |df: &Dataflow| {
        let me = df.index();
        let source = if files {
            let open_live = live.clone().map(|feed| {
                let bell = df.worker().doorbell;
                let open: OpenLive = Box::new(move || {
                    let wake = move || {
                        if let Some(b) = &bell {
                            b.ring();
                        }
                    };
                    YsbFileReader::live(&feed, me % w, wake, opts)
                });
                open
            });
            YsbSource::Files {
                pieces: PieceQueue::new(pieces[me].clone()),
                live: live.clone(),
                open_live,
                current: None,
                opts,
                error: None,
                skipped: 0,
                first_skipped: None,
                stop: stop.clone(),
                failed: failed.clone(),
                first_skip: first_skip.clone(),
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
            .idle_after_ms(args.idle_ms)
            .key_by(|v: &(u32, u64)| v.0)
            .window(Tumbling::ms(window_ms), |v| v.1)
            .dense_keys();
        if args.shuffle {
            sink_rows(views.aggregate_every_event(Count), &campaigns, to, &seen);
        } else {
            sink_rows(views.aggregate(Count), &campaigns, to, &seen);
        }
    };
    let out = run_graph(&cfg, build).map_err(|e| CliError::Other(e.into()))?;
    let elapsed = start.elapsed().max(out.elapsed);
    let wallclock = args.wallclock();
    let per_worker = out
        .workers
        .iter()
        .map(|wr| {
            let st = &wr.stats;
            let events = st.get("source_records");
            let late = st.get("late_records");
            let unmatched = st.get("unmatched");
            let filtered = events
                .saturating_sub(late)
                .saturating_sub(st.get("window_records"))
                .saturating_sub(unmatched);
            let lag = wallclock.then(|| st.get_max("watermark_lag_max_ms").unwrap_or(0));
            let extra = json!({
                "filtered": filtered,
                "unmatched": unmatched,
                // Largest wall clock − input watermark at this worker's
                // final aggregate, ms (`null` unless wall-clock event times).
                "watermark_lag_max_ms": lag,
            });
            WorkerFigures {
                worker: wr.index,
                rank: dist.rank(),
                placement: wr.placement.clone(),
                events,
                late_records: late,
                input_lag_max_ms: st.get_max("input_lag_max_us").map(|us| us as f64 / 1000.0),
                channels: wr.channels.clone(),
                records_in_by_edge: wr.records_in.clone(),
                records_in_periods: wr.records_in_periods.clone(),
                extra: match extra {
                    Value::Object(m) => m,
                    _ => unreachable!("a JSON object"),
                },
            }
        })
        .collect();
    let input_error = failed
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
        .map(|(_, message)| message);
    let windows: Vec<u64> = seen
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .copied()
        .collect();
    let st = &out.stats;
    Ok(RankPart {
        rows: Vec::new(),
        per_worker,
        latency: air_runtime::metrics::histogram_pairs(&st.latency),
        elapsed_s: elapsed.as_secs_f64(),
        late_partials: st.get("late_partials"),
        checkpoints: super::driver::CheckpointPart::of(st),
        late: st.late.clone(),
        disorder_max_ms: st.get_max(air_runtime::dataflow::DISORDER_MAX),
        input_error,
        skipped: st.get("skipped_records"),
        // Written as their windows closed (or only counted).
        uncollected_rows: st.get("window_rows"),
        counters: Default::default(),
        stopped: out.stopped,
        unfired_windows: st.get("unfired_windows"),
        peak_rss_bytes: 0,
        extra: json!({
            "windows": windows,
            "first_skipped_record": first_skip.lock().unwrap_or_else(|e| e.into_inner()).take(),
        }),
        channels: super::driver::channel_figures(&out),
        load: super::load::LoadPart::of(&out),
    })
}

/// `air run ysb`: runs, writes the outputs, prints a summary. Under MPI
/// every rank runs it; rank 0 writes the merged outputs and prints.
pub fn main(args: &YsbArgs, dist: &Dist) -> Result<(), CliError> {
    run(args, dist, true).map(|_| ())
}

/// Runs `air run ysb` as [`main`] does ([`super::driver::run`]); `print`:
/// the progress line and the summary on the terminal. Returns the merged
/// report at rank 0 (`None` on the other ranks).
///
/// # Errors
/// As [`main`]: bad options or input, a failed job (every rank agrees).
pub fn run(args: &YsbArgs, dist: &Dist, print: bool) -> Result<Option<Report>, CliError> {
    // A progress line on a terminal, for long runs.
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let progress = {
        use std::io::IsTerminal;
        let done = done.clone();
        (print && dist.is_root() && std::io::stderr().is_terminal()).then(|| {
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
    let stop_progress = || {
        done.store(true, std::sync::atomic::Ordering::Relaxed);
    };
    let r = super::driver::run(args, dist, print);
    stop_progress();
    if let Some(p) = progress {
        let _ = p.join();
    }
    r
}

/// `air gen ysb`.
#[derive(clap::Args, Debug, Clone)]
pub struct GenYsbArgs {
    /// Number of events (default with --rate: no end, until the reader
    /// goes away).
    #[arg(long, required_unless_present = "rate")]
    pub events: Option<u64>,
    /// Seed (campaigns and events).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Events file (JSON lines, YSB schema); `-`: standard output;
    /// `tcp://HOST:PORT`: connect and send (to `air run ysb --listen`).
    #[arg(long)]
    pub out: PathBuf,
    /// Campaign map file (`"ad_id":"campaign_id"` lines); required with a
    /// file --out (`air run ysb` without --campaigns derives the same map
    /// from --seed).
    #[arg(long)]
    pub campaigns_out: Option<PathBuf>,
    /// Event-time rate of the file, events per second of event time
    /// (1..=10^15) [default: --rate, else 100000].
    #[arg(long, value_parser = super::common::parse::events_per_s_int)]
    pub events_per_s: Option<u64>,
    /// Wall-clock pace of the output, events per second (default: as fast
    /// as it can be written): events are written in small batches when
    /// due, to feed a live job (`air gen ysb --rate 1000000 --out - | air
    /// run ysb --input -`).
    #[arg(long, value_parser = super::common::parse::rate)]
    pub rate: Option<u64>,
}

/// `air gen ysb`: writes events and campaigns.
pub fn gen(args: &GenYsbArgs) -> Result<(), CliError> {
    let events_per_s = args.events_per_s.or(args.rate).unwrap_or(100_000);
    if events_per_s == 0 {
        return Err(CliError::BadInput("--events-per-s must be positive".into()));
    }
    let out = super::common::GenOut::parse(&args.out);
    let to_file = !out.is_stream();
    if Some(&args.out) == args.campaigns_out.as_ref() {
        return Err(CliError::BadInput(
            "--out and --campaigns-out name the same file".into(),
        ));
    }
    match &args.campaigns_out {
        Some(c) if super::common::is_stdout(c) => {
            return Err(CliError::BadInput(
                "--campaigns-out -: the campaign map goes to a file (`air run ysb --campaigns` \
                 reads it); only --out - writes to standard output"
                    .into(),
            ));
        }
        None if to_file => {
            return Err(CliError::BadInput(
                "--campaigns-out FILE is needed with a file --out".into(),
            ));
        }
        _ => {}
    }
    let opts = air_operators::sources::ysb::GenFilesOptions {
        event_time: EventTimeMode::Deterministic {
            start_ms: 1_461_024_576_817,
            events_per_s,
        },
        rate: args.rate,
        ..Default::default()
    };
    let events = args.events.unwrap_or(u64::MAX);
    let campaigns_out = args.campaigns_out.as_deref();
    let s = if to_file {
        let c = campaigns_out.expect("checked above");
        air_operators::sources::ysb::gen_to_files(events, args.seed, &args.out, c, &opts)?
    } else {
        // Standard output, or a connection (to `air run ysb --listen`).
        air_operators::sources::ysb::gen_to_writer(
            events,
            args.seed,
            &mut out.open()?,
            Path::new(&out.name()),
            campaigns_out,
            &opts,
        )?
    };
    let campaigns_to = match campaigns_out {
        Some(c) => format!(" and {} campaigns to {}", s.campaigns.len(), c.display()),
        None => String::new(),
    };
    let summary = format!(
        "wrote {} events ({} bytes) to {}{campaigns_to}",
        thousands(s.events),
        thousands(s.bytes),
        out.name(),
    );
    // Standard output carries the events with `--out -`.
    if !to_file {
        eprintln!("{summary}");
    } else {
        println!("{summary}");
    }
    Ok(())
}
