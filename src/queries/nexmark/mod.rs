//! `air run nexmark --query QUERY` and `air gen nexmark`: the NEXMark
//! benchmark queries (semantics of the Apache Beam NEXMark suite) over the
//! NEXMark generator or JSON-lines files of its events.
//!
//! Each query is a module of this one (`q1`, `q2`, ...) holding its
//! [`Spec`]: what it computes, its CSV columns and row order, the options
//! it honours, and the graph ([`air_runtime::dataflow`]) every worker
//! builds over its shard of the input with the public API alone. Rows go to
//! `--out` as they become final ([`super::driver::sink_window_rows`]:
//! worker 0 writes, each window's rows sorted); `air run nexmark --help`
//! lists every query's columns ([`columns_help`]).
//!
//! Windows hold `[start, start + size)`; an event at exactly `start` belongs
//! to the window starting there. Event times are the generator's (or the
//! file's) `dateTime`, ms.
//!
//! Every query is a graph ([`air_runtime::dataflow`]) that every worker
//! builds over its shard of the input, and writes its rows to `--out` as
//! they become final ([`super::driver::sink_window_rows`]: worker 0 writes,
//! each window's rows sorted):
//!
//! - q0: bids, unchanged (the Flink suite's pass-through); rows stream out
//!   as q1's do.
//! - q1: bids → price in euros; with `--out` each bid is a row of its
//!   millisecond, released in time order as the watermark passes it (from
//!   files: at the end, since a file may be out of order); without, rows
//!   are counted where they are made (no exchange).
//! - q2: bids → filter; with `--out` the rows are sorted by auction at the
//!   end (the order is known only then).
//! - q3: full events → persons of OR/ID/CA and category-10 auctions
//!   keyed by person id → Beam's incremental join
//!   ([`air_operators::graph::KeyedProcessExt::process`], state freed by
//!   Beam's timer); rows stream out as the watermark passes them.
//! - q5: bids → keyed by auction → sliding windows, bids counted
//!   (pre-aggregated per pane and worker) → keyed by window → the hottest
//!   auctions ([`air_operators::graph::MaxByWindowExt::max_by_window`]:
//!   each worker sends only its own hottest to the window's owner).
//! - q7: bids → keyed by their tumbling window → the bids at the highest
//!   price ([`air_operators::graph::MaxBy`], pre-aggregated per worker).
//! - q4, q6, q9: auctions and bids (one stream) keyed by auction id →
//!   the winning bid of each auction as it closes ([`winning`], on
//!   [`air_operators::graph::KeyedProcessExt::process`]); q9 writes them,
//!   q4 averages their prices per category in sliding windows, q6 per
//!   seller over its last 10 (a second `process`, keyed by seller; a
//!   seller is forgotten after `--state-ttl-ms` without a sale).
//! - q8: persons and auctions (each worker reads its shard twice, once per
//!   side) → a window join on person id = seller whose pairs leave as soon
//!   as both records are in ([`air_operators::graph::JoinedStreams::window_eager`]).
//! - q10: full events → bids as CSV rows → each worker's part files of
//!   the minutes of their event times under `--out-dir`
//!   ([`air_operators::graph::PartitionedCsv`]: no exchange, one part per
//!   worker and minute, committed with a marker as the watermark passes
//!   the minute).
//! - q11: bids → keyed by bidder → session windows of gap `--window-ms`
//!   ([`air_operators::graph::Sessions`]), bids counted per session.
//! - q12: bids stamped with the wall clock as they are read (ingestion
//!   time, [`air_runtime::dataflow::Stream::ingestion_time`]) → keyed by
//!   bidder → tumbling windows of the stamps, bids counted; the watermark
//!   follows the wall clock, so windows close in real time.
//! - q13: bids whose `auction % 10000` is a key of the side input
//!   ([`side_input`], read once per process, shared by the workers) →
//!   rows with the key's value; streamed out as q0's.
//! - q18: bids → keyed by (bidder, auction) → session windows of gap
//!   `--state-ttl-ms` keeping the latest bid; a key's row leaves (and its
//!   state is freed) once it had no bid for the TTL.
//! - q19: bids → keyed by auction → session windows of gap
//!   `--state-ttl-ms` keeping the 10 highest bids; rows leave as q18's.
//! - q15: bids, each seen through its bidder and its auction → keyed by
//!   (kind, value) → tumbling windows (a day by default), the value's bids
//!   per price rank → keyed by window → bids, distinct bidders and distinct
//!   auctions per rank (both steps pre-aggregated per worker; no record
//!   holds a window's set of values).
//! - q17: bids → keyed by auction → tumbling windows (a day by default) →
//!   bids per price rank and min/max/avg/sum price, pre-aggregated per
//!   worker.
//! - q14, q21, q22: full events (`Shard::read_full`: every string field)
//!   → bids projected to small records (inline words) → rows as q1's (no
//!   exchange without `--out`).
//! - q16: full events → bids projected to (channel, bidder, auction,
//!   price, time) → q15's plan per channel.
//! - q20: full auctions and bids keyed by auction id → a keyed process
//!   joining each bid with its auction of category 10 (state freed
//!   `--state-ttl-ms` of event time after each record's time); rows
//!   stream out as pairs join.
//!
//! With `--rate R [--duration S]` the generator is paced by the wall clock
//! ([`air_operators::sources::pace`]) and every event is stamped with its
//! wall-clock due time: the report has the generators' input lag and, for
//! the windowed queries (q5, q7, q8), latency percentiles: q5's once per
//! window at each owner of its counts, from the newest bid of any auction
//! of the window there
//! ([`air_operators::graph::WindowedStream::latency_per_window`]); q7's
//! once per window, from the window's newest bid; q8's once per pair, from
//! the newer of its two records.

use super::common::{CliError, PaceArgs, PaceStart, RuntimeArgs};
use super::dist::Dist;
use super::driver::{sink_window_rows, OutputArgs, Query, RankPart, RowsTo, WorkerFigures};
use super::lagwatch::Watched;
use air_operators::graph::Windowed;
use air_operators::sources::file_merge::{MergedPieces, PieceSource, Streams};
use air_operators::sources::files::{FilePiece, PieceQueue, PieceStream};
use air_operators::sources::live::{LiveFeed, LiveInput, LiveOptions};
use air_operators::sources::nexmark::{
    Auction, Bid, EventFileReader, JsonEvent, LiveEvents, LiveFill, LiveShare, NexEvent,
    NexmarkConfig, NexmarkFileReader, NexmarkGenerator, OnBadRecord, OpenLive, Person,
    ReaderOptions,
};
use air_operators::sources::shards::{resume, save_positions, Shards};
use air_runtime::dataflow::{run_graph, Dataflow, Head, Pipe, Source, SourcePoll, Stats, Stream};
use serde::Serialize;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Instant;

mod full;
mod q0;
mod q1;
mod q10;
mod q11;
mod q12;
mod q13;
mod q14;
mod q15;
mod q16;
mod q17;
mod q18;
mod q19;
mod q2;
mod q20;
mod q21;
mod q22;
mod q3;
mod q4;
mod q5;
mod q6;
mod q7;
mod q8;
mod q9;
pub mod side_input;
pub mod winning;

/// The NEXMark queries `air` runs (each in its own module of this one,
/// described by its [`Spec`]).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum NexQuery {
    /// Pass-through: every bid (auction, bidder, price, time).
    Q0,
    /// Currency conversion (map).
    Q1,
    /// Selection (filter).
    Q2,
    /// Local item suggestion: category-10 auctions of sellers in OR, ID, CA (join, full events).
    Q3,
    /// Average winning price per category (winning bids, then sliding windows).
    Q4,
    /// Hot items (sliding-window count, then the top auction per window).
    Q5,
    /// Average selling price per seller: the mean of its last 10 winning prices.
    Q6,
    /// Highest bid per tumbling window.
    Q7,
    /// New users: persons who opened an auction in the same window (join).
    Q8,
    /// Winning bids: each closed auction and its winning bid.
    Q9,
    /// Log to file system: every bid to CSV files partitioned by minute (--out-dir, full events).
    Q10,
    /// User sessions: bids per bidder and session window.
    Q11,
    /// Processing-time windows: bids per bidder per tumbling window of the wall clock.
    Q12,
    /// Bounded side input join: bids enriched from a key → value table (--side-input).
    Q13,
    /// Calculation: bids in a euro price range, time of day, 'c's in extra (full events).
    Q14,
    /// Bidding statistics per day: bids, bidders, auctions per price rank.
    Q15,
    /// Channel statistics per channel and day: q15 per channel (full events).
    Q16,
    /// Auction statistics per auction and day: bids per rank, min/max/avg/sum price.
    Q17,
    /// Find the last bid: the latest bid per (bidder, auction).
    Q18,
    /// Auction top-N: the 10 highest bids per auction.
    Q19,
    /// Expand bid with auction: bids joined with their auction of category 10 (full events).
    Q20,
    /// Add channel id: bids of known channels with the channel's id (full events).
    Q21,
    /// Get URL directories: every bid with its url's first three directories (full events).
    Q22,
}

impl NexQuery {
    /// The query's definition.
    pub fn spec(self) -> &'static Spec {
        match self {
            NexQuery::Q0 => &q0::SPEC,
            NexQuery::Q1 => &q1::SPEC,
            NexQuery::Q2 => &q2::SPEC,
            NexQuery::Q3 => &q3::SPEC,
            NexQuery::Q4 => &q4::SPEC,
            NexQuery::Q5 => &q5::SPEC,
            NexQuery::Q6 => &q6::SPEC,
            NexQuery::Q7 => &q7::SPEC,
            NexQuery::Q8 => &q8::SPEC,
            NexQuery::Q9 => &q9::SPEC,
            NexQuery::Q10 => &q10::SPEC,
            NexQuery::Q11 => &q11::SPEC,
            NexQuery::Q12 => &q12::SPEC,
            NexQuery::Q13 => &q13::SPEC,
            NexQuery::Q14 => &q14::SPEC,
            NexQuery::Q15 => &q15::SPEC,
            NexQuery::Q16 => &q16::SPEC,
            NexQuery::Q17 => &q17::SPEC,
            NexQuery::Q18 => &q18::SPEC,
            NexQuery::Q19 => &q19::SPEC,
            NexQuery::Q20 => &q20::SPEC,
            NexQuery::Q21 => &q21::SPEC,
            NexQuery::Q22 => &q22::SPEC,
        }
    }

    /// Its name as typed (`q5`).
    pub fn name(self) -> String {
        format!("{self:?}").to_lowercase()
    }
}

/// One NEXMark query as `air run nexmark` runs it: what it computes, its
/// output, the options it honours, and the graph every worker builds.
/// Adding a query is a module with its `SPEC` and one arm in
/// [`NexQuery::spec`].
pub struct Spec {
    /// What it computes, one line (`--help`, the module docs).
    pub what: &'static str,
    /// What it is, in an option's error message ("a map: no windows").
    pub nature: &'static str,
    /// The output CSV's columns.
    pub columns: &'static [&'static str],
    /// The order of the output rows (by these columns).
    pub order: &'static str,
    /// The window and delay options it honours (any other is refused).
    pub honoured: &'static [super::common::QueryOption],
    /// Its window (or session gap) when `--window-ms` is not given, ms
    /// (unused without windows).
    pub window_ms: u64,
    /// Its slide when `--slide-ms` is not given, ms (sliding windows only).
    pub slide_ms: u64,
    /// Rows the writer keeps to sort them at the end, per input event,
    /// given whether the input is files; `None`: rows stream out as the
    /// watermark passes them. (`--out` is refused when the kept rows would
    /// not fit in memory.)
    pub held_rows_per_event: fn(bool) -> Option<f64>,
    /// Whether its rows are windowed (a paced run then reports latency).
    pub windowed: bool,
    /// How many times each worker reads its shard (late records are
    /// counted once).
    pub reads: u64,
    /// Whether its result needs every rank's rows (`--out-per-rank` is
    /// refused).
    pub global: bool,
    /// Builds the query's graph on one worker over its shard.
    pub build: fn(&Cx<'_>, &Dataflow, &Shard<'_>),
}

/// What a query's graph is built from: the command line and where its
/// rows go.
pub struct Cx<'a> {
    /// The command line.
    pub args: &'a NexmarkArgs,
    /// The output's CSV header ([`Spec::columns`]).
    pub header: &'a [&'static str],
    /// The side input table, read once per process (queries that honour
    /// `--side-input` only; `None` for the others).
    pub side_input: Option<Arc<side_input::SideInput>>,
    /// Where the rows go.
    pub to: &'a RowsTo,
}

/// The output columns of every query, for `air run nexmark --help`.
pub fn columns_help() -> String {
    use clap::ValueEnum;
    let mut s = String::from("Output CSV (--out) per query, rows sorted as listed:\n");
    for q in NexQuery::value_variants() {
        let spec = q.spec();
        s += &format!(
            "  {:<4}{}\n      {}\n      sorted by {}\n",
            q.name(),
            spec.columns.join(","),
            spec.what,
            spec.order
        );
    }
    s + "Limits: input lines up to 1 MiB; person names up to 64 bytes."
}

/// What to do with a bad input record.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadRecord {
    /// Stop reading (exit 2; what was read before is processed).
    Fail,
    /// Skip it and count it.
    Skip,
}

/// Generator options shared by `air run nexmark` and `air gen nexmark`.
#[derive(clap::Args, Debug, Clone)]
pub struct NexGenArgs {
    /// Events in the stream (all workers) [default: 100000000 for
    /// `air run nexmark`, 1000000 for `air gen nexmark`; with `air run
    /// nexmark --rate R --duration S`: R × S].
    #[arg(long)]
    pub events: Option<u64>,
    /// Event-time rate: events per second of event time (the generator's
    /// inter-event delay is 10^6 / rate µs, fractional; 0.001..=1e15)
    /// [default: 10000, Beam's `firstEventRate`: a 1 M-event stream spans
    /// 100 s of event time, ten 10-s windows].
    #[arg(long, value_parser = super::common::parse::events_per_s)]
    pub events_per_s: Option<f64>,
    /// Seed of the stream [default: 0].
    #[arg(long)]
    pub seed: Option<u64>,
}

/// NEXMark's event-time rate when `--events-per-s` is not given: Beam's
/// default (`NexmarkConfiguration.firstEventRate`, 10 000 events/s), so
/// the default windows (10 s) hold 100 000 events and a generated file of
/// a million events spans 100 s — windows a user can see. (Until
/// 2026-12-01 it was 10 M/s: a million events were 100 ms, one q7 window.)
pub const DEFAULT_EVENTS_PER_S: f64 = 10_000.0;

impl NexGenArgs {
    fn config(&self, default_events: u64) -> NexmarkConfig {
        NexmarkConfig {
            seed: self.seed.unwrap_or(0),
            events: Some(self.events.unwrap_or(default_events)),
            events_per_s: self.events_per_s.unwrap_or(DEFAULT_EVENTS_PER_S),
            ..NexmarkConfig::default()
        }
    }

    /// Checks the generator's settings for a stream of `default_events`
    /// events unless `--events` says otherwise.
    ///
    /// # Errors
    /// The generator's own checks, or a last event whose time would
    /// overflow the millisecond clock (a rate so low that the stream's
    /// times all saturate).
    fn validate(&self, default_events: u64) -> Result<(), CliError> {
        let cfg = self.config(default_events);
        cfg.validate()
            .map_err(|e| CliError::BadInput(format!("generator: {e}")))?;
        let n = cfg.events.unwrap_or(u64::MAX);
        if n > 0 && cfg.time_of(n - 1) == u64::MAX {
            return Err(CliError::BadInput(format!(
                "--events-per-s {} with {n} events: the last event's time overflows the \
                 millisecond clock (u64); use a higher rate or fewer events",
                cfg.events_per_s
            )));
        }
        Ok(())
    }
}

/// `air run nexmark`.
#[derive(clap::Args, Debug, Clone)]
pub struct NexmarkArgs {
    /// The query.
    #[arg(long, value_enum)]
    pub query: NexQuery,
    /// Generator options (default 100 000 000 events).
    #[command(flatten)]
    pub gen: NexGenArgs,
    /// Wall-clock pacing of the generator (`--rate`, `--duration`); q1,
    /// q2, q4, q6 and q9 report no latency, only the input lag.
    #[command(flatten)]
    pub pace: PaceArgs,
    /// Read events from these JSON-lines files instead of the generator;
    /// each file is split by byte range across the workers. Two forms,
    /// told apart per line (a file may mix them): ours (`air gen
    /// nexmark`'s: one flat object with a `type` member, times in integer
    /// ms) and Apache Beam NEXMark's (`air gen nexmark --format beam`: one
    /// of `newPerson`, `newAuction`, `bid` holding the event object, the
    /// others null or absent; Beam's camelCase names; `dateTime` and
    /// `expires` as ISO-8601 strings like `2015-07-15T00:00:00.000Z` or
    /// integer ms; a bid's `channel` and `url`, not in Beam's model, may be
    /// absent and then read as empty). A bad line exits 2 naming the file,
    /// line and field. Or one live input: `-` (standard input, a pipe) or
    /// `tcp://HOST:PORT` (air connects; the server sends lines), read as it
    /// arrives by one reader thread that hands whole-line chunks to the
    /// workers, which parse them (see the guide's "Live input"; q8, which
    /// reads its input twice, parses each event once and gives it to both
    /// of its sides).
    #[arg(long, num_args = 1..)]
    pub input: Vec<PathBuf>,
    /// Live input from TCP senders air accepts on HOST:PORT (one or more;
    /// each connection's lines feed this rank). The input ends when every
    /// sender that came has closed. `{rank}` in HOST:PORT is replaced by
    /// the MPI rank.
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "input")]
    pub listen: Option<String>,
    /// What to do with a bad input record.
    #[arg(long, value_enum, default_value_t = BadRecord::Fail)]
    pub on_bad_record: BadRecord,
    /// Window size, ms of event time (q4, q5: sliding; q7, q8, q15, q16,
    /// q17: tumbling; q11: the session gap; q12: tumbling, of processing
    /// time; q0, q1, q2, q3, q6, q9, q10, q13, q14, q18, q19, q20, q21, q22 have no
    /// windows and refuse it) [default: 10000; q15, q16 and q17: 86400000,
    /// a day].
    #[arg(long, value_name = "MS", value_parser = super::common::parse::window_ms)]
    pub window_ms: Option<u64>,
    /// Slide of q4's and q5's sliding windows, ms (0 < slide ≤ size; q4
    /// and q5 only) [default: q4 5000 (Beam's), q5 2000].
    #[arg(long, value_name = "MS", value_parser = super::common::parse::window_ms)]
    pub slide_ms: Option<u64>,
    /// Bounded out-of-orderness, ms: an event older than the newest one its
    /// worker has read minus this is late (dropped, counted). Each worker
    /// reads its own byte ranges, so with a file out of order by more than
    /// this the late events (and the results) depend on --workers: set it
    /// to the file's disorder. q3, q4, q5, q6, q7, q8, q9, q11, q15, q16, q17, q18, q19,
    /// q20 only
    /// [default: 0].
    #[arg(long, value_name = "MS", value_parser = super::common::parse::delay_ms)]
    pub max_delay_ms: Option<u64>,
    /// Idleness, ms of wall-clock time: a worker whose generator brought no
    /// event for this long stops holding windows back (its watermark
    /// follows the wall clock minus this), so windows close while the input
    /// is quiet. Paced runs only (--rate: wall-clock event times), above
    /// one worker's gap between two events (events are stamped up to one
    /// gap before they are due), or a live input whose records carry
    /// wall-clock times; windowed queries only [default: never idle].
    #[arg(long, value_name = "MS", value_parser = super::common::parse::idle_ms)]
    pub idle_ms: Option<u64>,
    /// q13's side input: a CSV of `key,value` lines, no header (key: an
    /// unsigned integer, once; value: text, quoted to hold a comma); bids
    /// join the key `auction % 10000` and are dropped without one; a bad
    /// line exits 2 naming its line and field. q13 only [default: keys
    /// 0..9999, each with its own decimal as value (the Flink suite's)].
    #[arg(long, value_name = "FILE")]
    pub side_input: Option<PathBuf>,
    /// State retention of the unwindowed keyed queries, ms of event time
    /// (Flink's idle state retention, `table.exec.state.ttl`, but in event
    /// time). q18 and q19: a key with no bid for this long is final; its
    /// row is written and its state freed (a later bid of the key starts
    /// new state and a second row). q20 keeps each auction and each bid
    /// waiting for its auction this long after its own time: a bid and its
    /// auction join iff their times are at most this far apart. q6: a
    /// seller with no winning bid closing for this long is forgotten (its
    /// next sale's mean starts anew). The generator bids only on the last
    /// 100 auctions (Beam's `numInFlightAuctions`) and sells only through
    /// the last 1000 persons (`numActivePeople`), so at the default the
    /// rows equal those of unbounded state at any rate above 30 events/s
    /// (q6: 900 events/s). Queries that keep such state only [default:
    /// 60000].
    #[arg(long, value_name = "MS", value_parser = super::common::parse::state_ttl_ms)]
    pub state_ttl_ms: Option<u64>,
    /// q10's output directory: every bid as CSV under
    /// `DIR/dt=yyyy-MM-dd/hm=HH:mm/`, one part file per worker and minute,
    /// each with its commit marker (see q10 in `--help`); must be empty
    /// or absent, unless a rerun with `--checkpoint-dir` resumes the run
    /// that wrote it. q10 only, and required by it (q10 refuses --out).
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    /// Outputs.
    #[command(flatten)]
    pub output: OutputArgs,
    /// Runtime options.
    #[command(flatten)]
    pub runtime: RuntimeArgs,
}

/// State retention of the unwindowed keyed queries when `--state-ttl-ms`
/// is not given, ms of event time (a minute).
pub const DEFAULT_STATE_TTL_MS: u64 = 60_000;

/// Events of `air run nexmark` when `--events` is not given.
pub const DEFAULT_EVENTS: u64 = 100_000_000;

/// Watermark alignment of the windowed queries unless
/// `--max-watermark-drift-ms` says otherwise: sources at most this many ms
/// of event time apart, or a window if longer. 60 s is 600,000 events at
/// the default 10,000 events/s: q8's join then keeps ~1 MB a worker where
/// unaligned sources let it keep 16 MB (2 workers, 40 M events), and q5
/// runs as fast as unaligned; at 10 s q5 lost 12% to sources waiting for
/// watermarks (docs/performance.md, session 24).
pub const DEFAULT_DRIFT_MS: u64 = 60_000;

/// The most sliding windows one event may count in (`size / slide`).
pub const MAX_WINDOWS_PER_EVENT: u64 = 1000;

/// One byte range of one input file.
type Piece = (PathBuf, Range<u64>);

/// A worker's NEXMark source: its generator shard or its byte ranges of
/// the input files. (One per worker, never moved on the hot path: the size
/// difference of the variants does not matter.)
#[allow(clippy::large_enum_variant)]
pub enum NexSource {
    /// The generator.
    Gen(NexmarkGenerator),
    /// Several shards of the generator: a worker resumed at another worker
    /// count than its checkpoint's.
    Shards(Shards<NexmarkGenerator>),
    /// The generator paced by the wall clock (`--rate`), events stamped
    /// with their due times.
    Paced(Watched<NexmarkGenerator>),
    /// Several streams of input file pieces merged by event time: a
    /// worker resumed at another worker count than its checkpoint's with
    /// the remainders of several old workers (each stream a `Files`).
    MergedFiles(Box<MergedPieces<NexSource>>),
    /// Input files.
    Files {
        /// (file, byte range) still to read, in order.
        pieces: PieceQueue,
        /// The reader of the current piece.
        current: Option<NexmarkFileReader>,
        /// Reader options.
        opts: ReaderOptions,
        /// The error that stopped reading.
        error: Option<String>,
        /// Bad records skipped by finished readers.
        skipped: u64,
    },
    /// A worker's share of a live input (`--input -`, `--input tcp://`,
    /// `--listen`).
    Live {
        /// Its reader of the worker's share.
        events: LiveEvents<NexEvent>,
        /// The input (what a checkpoint saves of it).
        feed: LiveFeed,
        /// The error that stopped reading.
        error: Option<String>,
    },
}

impl Source for NexSource {
    type Item = NexEvent;

    fn poll(&mut self, buf: &mut Vec<NexEvent>, max: usize) -> SourcePoll {
        buf.resize(max, NexEvent::default());
        match self {
            NexSource::Gen(g) => {
                let n = g.fill(buf);
                buf.truncate(n);
                if n == 0 {
                    SourcePoll::Done
                } else {
                    SourcePoll::Ready
                }
            }
            NexSource::Shards(s) => s.poll(buf, max),
            NexSource::MergedFiles(m) => m.poll(buf, max),
            NexSource::Paced(p) => p.poll(buf, max),
            NexSource::Live { events, error, .. } => live_poll(events, error, buf),
            NexSource::Files {
                pieces,
                current,
                opts,
                error,
                skipped,
            } => loop {
                if error.is_some() {
                    buf.clear();
                    return SourcePoll::Done;
                }
                if current.is_none() {
                    let Some((path, range)) = pieces.next() else {
                        buf.clear();
                        return SourcePoll::Done;
                    };
                    match NexmarkFileReader::open(&path, range, *opts) {
                        Ok(r) => *current = Some(r),
                        Err(e) => {
                            air_runtime::dataflow::state::mark_failing();
                            *error = Some(e.to_string());
                            continue;
                        }
                    }
                }
                let r = current.as_mut().expect("opened above");
                match r.fill(buf) {
                    Ok(0) => {
                        *skipped += r.skipped();
                        *current = None;
                    }
                    Ok(n) => {
                        buf.truncate(n);
                        return SourcePoll::Ready;
                    }
                    Err(e) => {
                        air_runtime::dataflow::state::mark_failing();
                        *error = Some(e.to_string());
                    }
                }
            },
        }
    }
}

/// A poll of a live share into `buf` (of the batch's length): the events
/// it got, or nothing (quiet: `Idle`; ended: `Done`); an error ends it and
/// is kept in `error`.
pub(crate) fn live_poll<E: JsonEvent + Send + 'static>(
    events: &mut LiveEvents<E>,
    error: &mut Option<String>,
    buf: &mut Vec<E>,
) -> SourcePoll {
    if error.is_some() {
        buf.clear();
        return SourcePoll::Done;
    }
    match events.fill(buf) {
        Ok(LiveFill::Filled(n)) => {
            buf.truncate(n);
            SourcePoll::Ready
        }
        Ok(LiveFill::Idle) => {
            buf.clear();
            SourcePoll::Idle
        }
        Ok(LiveFill::Done) => {
            buf.clear();
            SourcePoll::Done
        }
        Err(e) => {
            air_runtime::dataflow::state::mark_failing();
            *error = Some(e.to_string());
            buf.clear();
            SourcePoll::Done
        }
    }
}

impl PieceSource for NexSource {
    fn remaining(&self) -> Vec<FilePiece> {
        match self {
            NexSource::Files {
                pieces, current, ..
            } => pieces.remaining(current.as_ref().and_then(|r| r.position())),
            _ => Vec::new(),
        }
    }
}

impl NexSource {
    /// The generator's position (events of its shard generated); the paced
    /// generator, files and live inputs cannot resume yet (a job with
    /// checkpoints refuses them).
    fn save_position(&self) -> Option<Vec<u8>> {
        match self {
            NexSource::Gen(g) => Some(save_positions(std::slice::from_ref(g))),
            NexSource::Shards(s) => Some(s.save()),
            NexSource::Paced(p) => p.save(),
            NexSource::Files {
                pieces, current, ..
            } => Some(pieces.save(current.as_ref().and_then(|r| r.position()))),
            NexSource::MergedFiles(m) => Some(m.save()),
            _ => None,
        }
    }

    fn restore_position(&mut self, state: &[u8]) -> Result<(), String> {
        match self {
            NexSource::Gen(g) => {
                if let Some(shards) = resume(g, state)? {
                    *self = NexSource::Shards(shards);
                }
                Ok(())
            }
            NexSource::Files { pieces, .. } => {
                if let Some(streams) = pieces.restore(state)? {
                    *self = self.merged(streams);
                }
                Ok(())
            }
            NexSource::Paced(p) => p.restore(state),
            _ => Err("only generators and input files resume from a checkpoint".into()),
        }
    }

    /// On a resume at another worker count: this worker's share of the
    /// old workers' generator shards, or of what they had still to read
    /// of the input files (streams of pieces, merged by event time).
    fn rescale_position(
        &mut self,
        states: &[&[u8]],
        to: air_runtime::dataflow::state::Rescale,
    ) -> Result<(), String> {
        match self {
            NexSource::Gen(g) => {
                *self = NexSource::Shards(Shards::rescaled(g, states, to)?);
                Ok(())
            }
            NexSource::Files { pieces, .. } => {
                let split = |p: &std::path::Path, n: usize| {
                    air_operators::sources::nexmark::split_ranges(p, n)
                };
                let streams = pieces.rescaled(states, &to, split)?;
                *self = self.merged(streams);
                Ok(())
            }
            _ => Err(
                "only the unpaced generator and input files resume at another worker count".into(),
            ),
        }
    }

    /// Input files (`self`, a `Files` source) going on with `streams`:
    /// one stream read as before, several merged by event time.
    fn merged(&self, streams: Vec<PieceStream>) -> NexSource {
        let NexSource::Files { pieces, opts, .. } = self else {
            unreachable!("input files only")
        };
        let make = |s: PieceStream| NexSource::Files {
            pieces: pieces.with_stream(s),
            current: None,
            opts: *opts,
            error: None,
            skipped: 0,
        };
        let time = Arc::new(|e: &NexEvent| e.date_time());
        match MergedPieces::of(streams, make, time, pieces.files(), pieces.inputs()) {
            Streams::One(s) => s,
            Streams::Merged(m) => NexSource::MergedFiles(m),
        }
    }

    fn error(&self) -> Option<&str> {
        match self {
            NexSource::Files { error, .. } | NexSource::Live { error, .. } => error.as_deref(),
            NexSource::MergedFiles(m) => m.sources().find_map(|s| s.error()),
            NexSource::Gen(_) | NexSource::Shards(_) | NexSource::Paced(_) => None,
        }
    }
    fn skipped(&self) -> u64 {
        match self {
            NexSource::Files {
                skipped, current, ..
            } => skipped + current.as_ref().map_or(0, |r| r.skipped()),
            NexSource::MergedFiles(m) => m.sources().map(|s| s.skipped()).sum(),
            NexSource::Live { events, .. } => events.skipped(),
            NexSource::Gen(_) | NexSource::Shards(_) | NexSource::Paced(_) => 0,
        }
    }
    /// Largest input lag of a paced source, ms (`None` unless paced).
    fn input_lag_max_ms(&self) -> Option<f64> {
        match self {
            NexSource::Paced(p) => p.input_lag_max_ms(),
            _ => None,
        }
    }
}

/// The event if it is a bid.
pub(crate) fn bid(e: NexEvent) -> Option<Bid> {
    match e {
        NexEvent::Bid(b) => Some(b),
        _ => None,
    }
}

/// The event if it is a person.
pub(crate) fn person(e: NexEvent) -> Option<Person> {
    match e {
        NexEvent::Person(p) => Some(p),
        _ => None,
    }
}

/// The event if it is a auction.
pub(crate) fn auction(e: NexEvent) -> Option<Auction> {
    match e {
        NexEvent::Auction(a) => Some(a),
        _ => None,
    }
}

impl NexmarkArgs {
    /// Whether the events come from `--input` files (not a live input).
    pub fn files(&self) -> bool {
        !self.input.is_empty() && !self.live()
    }

    /// Whether the events come from a live input (`--input -`, `--input
    /// tcp://HOST:PORT`, `--listen`).
    pub fn live(&self) -> bool {
        self.listen.is_some()
            || self
                .input
                .iter()
                .any(|p| LiveInput::from_input_arg(p).is_some())
    }

    /// Whether the events come from an input (files or live), not the
    /// generator.
    pub fn reads_input(&self) -> bool {
        self.files() || self.live()
    }

    /// The live input of `--input -`, `--input tcp://…` or `--listen`
    /// (`None` for files or the generator).
    ///
    /// # Errors
    /// A live input given with other inputs.
    pub fn live_input(&self) -> Result<Option<LiveInput>, CliError> {
        super::common::live_input(&self.input, self.listen.as_deref())
    }

    /// `--window-ms`, or the query's default ([`Spec::window_ms`]).
    pub fn window(&self) -> u64 {
        self.window_ms.unwrap_or(self.spec().window_ms)
    }

    /// `--slide-ms`, or the query's default ([`Spec::slide_ms`]).
    pub fn slide(&self) -> u64 {
        self.slide_ms.unwrap_or(self.spec().slide_ms)
    }

    /// `--max-delay-ms`, or its default (0).
    pub fn max_delay(&self) -> u64 {
        self.max_delay_ms.unwrap_or(0)
    }

    /// `--state-ttl-ms`, or its default ([`DEFAULT_STATE_TTL_MS`]).
    pub fn state_ttl(&self) -> u64 {
        self.state_ttl_ms.unwrap_or(DEFAULT_STATE_TTL_MS)
    }

    /// The query's definition.
    pub fn spec(&self) -> &'static Spec {
        self.query.spec()
    }

    /// Whether this run may resume an earlier one: `--checkpoint-dir`
    /// without `--fresh`, holding a job's record or checkpoints. Its
    /// `--out-dir` then holds the earlier runs' files, which the resumed
    /// sink cuts back to its checkpoint (or, with no complete checkpoint,
    /// deletes: each worker its own).
    fn may_resume(&self) -> bool {
        let Some(ck) = self
            .runtime
            .checkpoint_dir
            .as_ref()
            .filter(|_| !self.runtime.fresh)
        else {
            return false;
        };
        std::fs::read_dir(ck).is_ok_and(|d| {
            d.flatten().any(|e| {
                e.file_name()
                    .to_str()
                    .is_some_and(|n| n == "JOB.json" || n.starts_with("chk-"))
            })
        })
    }

    /// `--out-dir`: required by the queries that honour it (they write
    /// files there, not rows to `--out`), an empty directory or an absent
    /// one whose parent exists (the run creates it); a run that may resume
    /// from `--checkpoint-dir` goes on with the files already there, at the
    /// worker count (`ranks` × `--workers`) its checkpoint was taken at.
    fn check_out_dir(&self, ranks: usize) -> Result<(), CliError> {
        use super::common::QueryOption::OutDir;
        let bad = |m: String| Err(CliError::BadInput(m));
        if !self.spec().honoured.contains(&OutDir) {
            return Ok(());
        }
        let q = self.query.name();
        if self.output.out.is_some() || self.output.out_per_rank {
            return bad(format!(
                "{q} writes its rows as partitioned files under --out-dir DIR; --out and \
                 --out-per-rank do not apply to it"
            ));
        }
        let Some(dir) = &self.out_dir else {
            return bad(format!(
                "{q} needs --out-dir DIR (its rows are partitioned files under DIR)"
            ));
        };
        match std::fs::read_dir(dir) {
            Ok(mut entries) => {
                if entries.next().is_some() && !self.may_resume() {
                    return bad(format!(
                        "--out-dir {}: not empty (an earlier run's files would mix with this \
                         run's); give a new or empty directory{}",
                        dir.display(),
                        if self.runtime.fresh {
                            " (--fresh starts over: delete the files of the run it replaces)"
                        } else {
                            ""
                        }
                    ));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // Created by the run, as `--out FILE` is, in a directory
                // that exists: a mistyped path fails now, not after the
                // run with its files somewhere unexpected.
                let parent = match dir.parent() {
                    Some(p) if !p.as_os_str().is_empty() => p,
                    _ => std::path::Path::new("."),
                };
                if !parent.is_dir() {
                    return bad(format!(
                        "--out-dir {}: its parent directory {} does not exist (the run \
                         creates DIR, not its parents, as --out creates a file but not its \
                         directory)",
                        dir.display(),
                        parent.display()
                    ));
                }
            }
            Err(e) => return bad(format!("--out-dir {}: {e}", dir.display())),
        }
        if let Some(input) = self.inputs().iter().find(|i| i.starts_with(dir)) {
            return bad(format!(
                "--out-dir {} holds the input {}",
                dir.display(),
                input.display()
            ));
        }
        let workers = ranks.max(1) * self.runtime.job_config().workers;
        if let Some((ck, taken_at)) = self.resume_workers().filter(|(_, w)| *w != workers) {
            return bad(format!(
                "{q} writes partitioned files under --out-dir {}, named by worker \
                 (part-r<rank>-w<worker>.csv, _SUCCESS.r<rank>-w<worker>, \
                 _WATERMARK.r<rank>-w<worker>): they cannot move to another worker count, and \
                 {} was taken at {taken_at} workers, this run has {workers}; rerun with \
                 {taken_at} workers in all (--workers, times the ranks), or start over with \
                 --fresh and a new or empty --out-dir",
                dir.display(),
                ck.display()
            ));
        }
        Ok(())
    }

    /// The newest complete checkpoint in `--checkpoint-dir` (unless
    /// `--fresh`) and the job's worker count (all ranks) when it was
    /// taken, from its `MANIFEST.json`; `None` if there is none.
    fn resume_workers(&self) -> Option<(PathBuf, usize)> {
        let ck = self
            .runtime
            .checkpoint_dir
            .as_ref()
            .filter(|_| !self.runtime.fresh)?;
        let mut ids: Vec<(u64, PathBuf)> = std::fs::read_dir(ck)
            .ok()?
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let id = name.strip_prefix("chk-")?.parse::<u64>().ok()?;
                Some((id, e.path().join("MANIFEST.json")))
            })
            .collect();
        ids.sort_unstable_by_key(|(id, _)| std::cmp::Reverse(*id));
        ids.into_iter().find_map(|(_, manifest)| {
            let v: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&manifest).ok()?).ok()?;
            let workers = usize::try_from(v.get("workers")?.as_u64()?).ok()?;
            Some((manifest, workers))
        })
    }

    /// The query, as the option rule knows it.
    fn kind(&self) -> super::common::QueryKind {
        super::common::QueryKind::Nexmark(self.query)
    }

    /// Each global worker's pieces of input.
    fn pieces(&self, total: usize) -> Result<Vec<Vec<Piece>>, CliError> {
        let mut pieces: Vec<Vec<Piece>> = vec![Vec::new(); total];
        for path in self.input.iter().filter(|_| self.files()) {
            let ranges = air_operators::sources::nexmark::split_ranges(path, total)
                .map_err(|e| CliError::BadInput(format!("{}: {e}", path.display())))?;
            for (i, r) in ranges.into_iter().enumerate() {
                pieces[i % total].push((path.clone(), r));
            }
        }
        Ok(pieces)
    }

    fn reader_options(&self) -> ReaderOptions {
        ReaderOptions {
            on_bad_record: match self.on_bad_record {
                BadRecord::Fail => OnBadRecord::Fail,
                BadRecord::Skip => OnBadRecord::Skip,
            },
            ..ReaderOptions::default()
        }
    }
}

/// The sources of every worker of the job, built on demand by worker
/// index (as often as asked: the graph is built more than once per
/// worker, and q8 reads each shard twice).
struct Sources<'a> {
    gen: NexmarkConfig,
    /// Each worker's pieces of the input files.
    pieces: Vec<Vec<Piece>>,
    files: bool,
    opts: ReaderOptions,
    /// Pacing and the paced job's start (`--rate`).
    paced: Option<(&'a PaceArgs, PaceStart)>,
    /// The rank's live input, if any (then no pieces, no generator).
    live: Option<LiveRank>,
}

/// A rank's live input, as its workers' sources share it.
struct LiveRank {
    feed: LiveFeed,
    /// Workers of this rank (a worker's queue is its global index modulo
    /// this).
    local: usize,
    /// Set by the first reader of the rank to meet an error that ends its
    /// input: every reader then stops (see
    /// [`air_operators::sources::nexmark::LiveShare`]).
    stop: Arc<AtomicBool>,
}

impl Sources<'_> {
    /// A new source over worker `index` of `workers`' shard (every call
    /// reads the shard from its start: the same events, at the same times
    /// when paced).
    fn get(&self, index: usize, workers: usize) -> NexSource {
        if self.files {
            NexSource::Files {
                pieces: PieceQueue::new(self.pieces[index].clone()),
                current: None,
                opts: self.opts,
                error: None,
                skipped: 0,
            }
        } else if let Some((pace, at)) = &self.paced {
            // Event times follow this worker's schedule, from the wall
            // clock at the start (see `Pacer::interleaved_event_rate`); both
            // sides of q8 read the same events at the same times.
            let pacer = pace.pacer(at, index, workers);
            let cfg = NexmarkConfig {
                events_per_s: pacer.interleaved_event_rate(workers).unwrap_or(1.0),
                base_time_ms: at.wall_ms,
                ..self.gen
            };
            NexSource::Paced(Watched::new(
                NexmarkGenerator::new(&cfg, index, workers),
                pacer,
            ))
        } else {
            NexSource::Gen(NexmarkGenerator::new(&self.gen, index, workers))
        }
    }
}

impl Query for NexmarkArgs {
    type Row = ();

    fn name(&self) -> String {
        format!("nexmark-{:?}", self.query).to_lowercase()
    }
    fn runtime(&self) -> &RuntimeArgs {
        &self.runtime
    }
    fn output(&self) -> &OutputArgs {
        &self.output
    }
    fn validate(&self, ranks: usize) -> Result<(), CliError> {
        let bad = |m: String| Err(CliError::BadInput(m));
        super::ysb::check_runtime(&self.runtime)?;
        self.pace
            .validate((self.runtime.job_config().workers * ranks) as u64)?;
        self.live_input()?;
        match (self.idle_ms, self.pace.rate) {
            // A live input's records are taken to carry wall-clock times
            // (as YSB's).
            (Some(_), None) if self.live() => {}
            (Some(_), None) => {
                return bad(
                    "--idle-ms needs wall-clock event times: a paced generator (--rate) or a \
                     live input (-, tcp://, --listen) whose records carry them"
                        .into(),
                )
            }
            (Some(idle), Some(rate)) => {
                // A paced worker stamps each event up to one of its
                // inter-event gaps before it is due
                // (`Pacer::interleaved_event_rate`): an idle watermark
                // (now − idle) closer than that would make it late.
                let workers = self.runtime.job_config().workers * ranks;
                let gap_ms = 1000.0 * workers as f64 / rate.max(1) as f64;
                if idle as f64 <= gap_ms {
                    return bad(format!(
                        "--idle-ms {idle} is not above the generator's gap between two events \
                         of one worker ({gap_ms:.1} ms at --rate {rate} over {workers} \
                         workers): events are stamped up to one gap before they are due, so \
                         they would arrive behind an idle watermark; use a larger --idle-ms"
                    ));
                }
            }
            _ => {}
        }
        if self.reads_input() && self.pace.paced() {
            return bad(
                "--rate and --duration apply to the generator, not to --input or --listen".into(),
            );
        }
        if !self.reads_input() && !self.pace.paced() {
            self.gen.validate(DEFAULT_EVENTS)?;
        } else {
            self.gen.validate(1)?;
        }
        {
            use super::common::QueryOption::*;
            super::common::check_honoured(
                self.kind(),
                &[
                    (WindowMs, self.window_ms.is_some()),
                    (SlideMs, self.slide_ms.is_some()),
                    (MaxDelayMs, self.max_delay_ms.is_some()),
                    (IdleMs, self.idle_ms.is_some()),
                    (SideInput, self.side_input.is_some()),
                    (StateTtlMs, self.state_ttl_ms.is_some()),
                    (OutDir, self.out_dir.is_some()),
                ],
            )?;
        }
        self.check_out_dir(ranks)?;
        let (size, slide) = (self.window(), self.slide());
        if size == 0 {
            return bad("--window-ms must be positive".into());
        }
        let sliding = self
            .spec()
            .honoured
            .contains(&super::common::QueryOption::SlideMs);
        if sliding && (slide == 0 || slide > size) {
            return bad(format!(
                "--slide-ms {slide}: need 0 < slide <= --window-ms {size}"
            ));
        }
        if sliding && size / slide > MAX_WINDOWS_PER_EVENT {
            return bad(format!(
                "--window-ms {size} / --slide-ms {slide}: each bid would count in more than \
                 {MAX_WINDOWS_PER_EVENT} windows; use a larger slide"
            ));
        }
        // Rows the writer keeps to sort them at the end, per input event
        // (a live input's size is not known: not checked).
        let held = (self.spec().held_rows_per_event)(self.files());
        if let (Some(per_event), Some(_), false, false) = (
            held,
            &self.output.out,
            self.output.out_per_rank,
            self.live(),
        ) {
            // The rows are kept by the writer to be sorted: ~100 bytes per
            // row at the peak. Refuse what cannot fit rather than abort
            // later.
            let events = if self.files() {
                let bytes: u64 = self
                    .input
                    .iter()
                    .filter_map(|p| std::fs::metadata(p).ok())
                    .map(|m| m.len())
                    .sum();
                bytes / 60
            } else {
                let paced = self.pace.rate.zip(self.pace.duration);
                self.pace
                    .events(self.gen.events, DEFAULT_EVENTS)
                    .or(paced.map(|(r, d)| (r as f64 * d) as u64))
                    .unwrap_or(DEFAULT_EVENTS)
            };
            let rows = (events as f64 * per_event) as u64;
            let need = rows.saturating_mul(100);
            if let Some(avail) = air_runtime::job::available_memory() {
                if need > avail / 2 {
                    return bad(format!(
                        "{:?} with --out keeps every result row in memory to sort it: about \
                         {} MiB for {rows} rows, more than half of the {} MiB available; \
                         run without --out (rows are counted) or on fewer events",
                        self.query,
                        need >> 20,
                        avail >> 20
                    ));
                }
            }
        }
        if self.reads_input()
            && (self.gen.events.is_some()
                || self.gen.seed.is_some()
                || self.gen.events_per_s.is_some())
        {
            return bad(
                "--events, --seed and --events-per-s apply to the generator, not to --input or \
                 --listen"
                    .into(),
            );
        }
        if self.files() {
            super::common::check_input_files(&self.input)?;
        }
        if let Some(p) = &self.side_input {
            // Read (and its lines checked) when the job starts.
            std::fs::File::open(p)
                .map_err(|e| CliError::BadInput(format!("--side-input {}: {e}", p.display())))?;
        }
        Ok(())
    }

    fn streams(&self) -> bool {
        true
    }

    fn run_rank(&self, dist: &Dist) -> Result<RankPart<()>, CliError> {
        // Rows counted, not kept: the driver streams them
        // (`run_rank_streaming`).
        self.run_rank_streaming(dist, &RowsTo::Nowhere)
    }

    fn run_rank_streaming(&self, dist: &Dist, to: &RowsTo) -> Result<RankPart<()>, CliError> {
        let header = self.header();
        // The side input, once per process, shared read-only by the workers.
        let side_input = if self
            .spec()
            .honoured
            .contains(&super::common::QueryOption::SideInput)
        {
            Some(Arc::new(match &self.side_input {
                Some(p) => side_input::SideInput::load(p)?,
                None => side_input::SideInput::flink_default(),
            }))
        } else {
            None
        };
        let cx = Cx {
            args: self,
            header: &header,
            side_input,
            to,
        };
        let build = self.spec().build;
        self.run_graph(dist, |df, shard| build(&cx, df, shard))
    }

    fn finish(&self, rows: Vec<()>) -> Vec<()> {
        // Rows are streamed by the graph's sinks (none come back).
        rows
    }

    fn global_finish(&self) -> bool {
        self.spec().global
    }

    fn header(&self) -> Vec<&'static str> {
        self.spec().columns.to_vec()
    }

    fn record(&self, _row: &()) -> Vec<String> {
        Vec::new()
    }

    fn inputs(&self) -> Vec<PathBuf> {
        // The side input too: no output may overwrite it.
        self.input
            .iter()
            .filter(|p| LiveInput::from_input_arg(p).is_none())
            .chain(&self.side_input)
            .cloned()
            .collect()
    }

    fn source(&self) -> &'static str {
        if self.live() {
            "live"
        } else if self.files() {
            "files"
        } else {
            "generator"
        }
    }

    fn wallclock(&self) -> bool {
        // q1 and q2 have no windowed output: no latency.
        self.pace.paced() && self.spec().windowed
    }

    fn params(&self) -> serde_json::Value {
        use super::common::QueryOption::{OutDir, SlideMs, StateTtlMs, WindowMs};
        let honoured = self.spec().honoured;
        let sliding = honoured.contains(&SlideMs);
        serde_json::json!({
            "query": self.query.name(),
            "window_ms": honoured.contains(&WindowMs).then_some(self.window()),
            "slide_ms": sliding.then_some(self.slide()),
            "seed": (!self.reads_input()).then_some(self.gen.seed.unwrap_or(0)),
            "events_per_s_event_time": (!self.reads_input() && !self.pace.paced())
                .then_some(self.gen.events_per_s.unwrap_or(DEFAULT_EVENTS_PER_S)),
            "rate": self.pace.rate,
            "duration_s": self.pace.duration,
            "max_delay_ms": self.max_delay(),
            "idle_ms": self.idle_ms,
            "state_ttl_ms": honoured.contains(&StateTtlMs).then_some(self.state_ttl()),
            "out_dir": honoured
                .contains(&OutDir)
                .then(|| self.out_dir.as_ref().map(|d| d.display().to_string())),
        })
    }
}

/// `air gen nexmark`.
#[derive(clap::Args, Debug, Clone)]
pub struct GenNexmarkArgs {
    /// Generator options (the same as `air run nexmark`'s: the same events).
    #[command(flatten)]
    pub gen: NexGenArgs,
    /// The events as JSON lines, one object per event (see --format); `-`:
    /// standard output; `tcp://HOST:PORT`: connect and send (to `air run
    /// nexmark --listen`).
    #[arg(long)]
    pub out: PathBuf,
    /// The JSON form: `ours` (flat, with a `type` member, times in ms) or
    /// `beam` (Apache Beam NEXMark's `{"newPerson":{...},"newAuction":null,
    /// "bid":null}`, times as ISO-8601 UTC strings, bids with the Flink
    /// suite's `channel` and `url`). `air run nexmark --input` reads both.
    #[arg(long, value_enum, default_value_t = GenFormat::Ours)]
    pub format: GenFormat,
    /// Wall-clock pace of the output, events per second (default: as fast
    /// as it can be written): events are written in batches of about 5 ms,
    /// each flushed when due, to feed a live job (`air gen nexmark --rate
    /// 100000 --out - | air run nexmark --query q5 --input -`). Without
    /// --events the stream then has no end (it stops when the reader goes
    /// away); without --events-per-s event time advances at this rate.
    #[arg(long, value_parser = super::common::parse::rate)]
    pub rate: Option<u64>,
}

/// The JSON form `air gen nexmark` writes.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum GenFormat {
    /// Ours: flat objects with a `type` member.
    Ours,
    /// Apache Beam NEXMark's nested objects.
    Beam,
}

/// `air gen nexmark`: writes the stream `air run nexmark` would generate
/// (with `--rate`, paced by the wall clock, and without `--events`
/// unbounded).
pub fn gen(args: &GenNexmarkArgs) -> Result<(), CliError> {
    let unbounded = args.rate.is_some() && args.gen.events.is_none();
    let mut cfg = args.gen.config(1_000_000);
    if let (Some(rate), None) = (args.rate, args.gen.events_per_s) {
        // Event time keeps up with the wall clock.
        cfg.events_per_s = rate as f64;
    }
    if unbounded {
        cfg.events = None;
        cfg.validate()
            .map_err(|e| CliError::BadInput(format!("generator: {e}")))?;
    } else {
        let mut checked = args.gen.clone();
        checked.events_per_s = Some(cfg.events_per_s);
        checked.validate(1_000_000)?;
    }
    use air_operators::sources::nexmark::{
        gen_to_file_as, gen_to_writer_as, gen_to_writer_paced, JsonForm,
    };
    let form = match args.format {
        GenFormat::Ours => JsonForm::Ours,
        GenFormat::Beam => JsonForm::Beam,
    };
    let out = super::common::GenOut::parse(&args.out);
    if let super::common::GenOut::File(p) = &out {
        if p.is_dir() {
            return Err(CliError::BadInput(format!(
                "{}: is a directory (--out takes a file)",
                p.display()
            )));
        }
    }
    let named = |e: std::io::Error| std::io::Error::new(e.kind(), format!("{}: {e}", out.name()));
    let written = match (&out, args.rate) {
        (super::common::GenOut::File(p), None) => gen_to_file_as(&cfg, p, form),
        (_, None) => gen_to_writer_as(&cfg, out.open()?, form).map_err(named),
        (_, rate) => gen_to_writer_paced(&cfg, out.open()?, form, rate).map_err(named),
    };
    let n = written.map_err(|e| {
        use std::io::ErrorKind::{InvalidInput, IsADirectory, NotFound};
        if matches!(e.kind(), InvalidInput | NotFound | IsADirectory) {
            CliError::BadInput(e.to_string())
        } else {
            CliError::Other(e.into())
        }
    })?;
    eprintln!("wrote {n} events to {}", out.name());
    Ok(())
}

/// Ends a graph of bids (q1, q2) or other per-event records (q14, q21,
/// q22): with an output, each becomes a row of a "window" ending at
/// `end(record)` (ms; `u64::MAX`: at the end of the stream), released
/// sorted by `sort` once the watermark passes that end
/// ([`sink_window_rows`]); without, the rows are only counted, at the
/// worker that made them (a stateless query crosses no exchange).
pub(crate) fn bid_rows<T, H, P, EF, S, SF, R, RF>(
    bids: Stream<H, P>,
    end: EF,
    sort: SF,
    row: RF,
    cx: &Cx<'_>,
) where
    T: 'static,
    Windowed<(), T>: air_runtime::Record,
    H: Head,
    P: Pipe<H::Out, Out = T>,
    EF: Fn(&T) -> u64 + 'static,
    S: Ord + 'static,
    SF: Fn(&Windowed<(), T>) -> S + 'static,
    R: Serialize + 'static,
    RF: FnMut(Windowed<(), T>) -> R + 'static,
{
    match cx.to {
        RowsTo::Nowhere => {
            bids.for_each(|_| {});
        }
        _ => {
            let rows = bids.map(move |b| Windowed {
                start: 0,
                end: end(&b),
                key: (),
                value: b,
            });
            sink_window_rows(rows, sort, row, cx.header, cx.to);
        }
    }
}

/// A worker's source on the graph API: its input error, skipped records
/// and input lag are reported at the end (the error into `error`, shared
/// with the driver, so the rows read before it are still written).
pub(crate) struct GraphSource {
    src: NexSource,
    error: Arc<Mutex<Option<String>>>,
    /// Counts its events and skipped records (q8's second read of the
    /// shard does not).
    counted: bool,
    events: u64,
    /// Events the last poll read, as the timeline counts them (0 when not
    /// `counted`).
    last_read: u64,
}

impl Source for GraphSource {
    type Item = NexEvent;
    #[inline]
    fn poll(&mut self, buf: &mut Vec<NexEvent>, max: usize) -> SourcePoll {
        let p = self.src.poll(buf, max);
        self.events += buf.len() as u64;
        self.last_read = if self.counted { buf.len() as u64 } else { 0 };
        p
    }
    /// The events read, or none for a second read of the shard (q8's
    /// other side), which the first already counts.
    fn events_read(&self, _yielded: usize) -> u64 {
        self.last_read
    }
    /// The generator's or the files' position, or a live input's
    /// ([`LiveFeed::save_position`]: a followed file's cut; standard input
    /// and TCP are not replayable and resume with what the sender sends
    /// then).
    fn save(&self) -> Option<Vec<u8>> {
        match &self.src {
            NexSource::Live { feed, .. } => Some(feed.save_position(self.events)),
            _ => self.src.save_position(),
        }
    }
    fn restore(&mut self, state: &[u8]) -> Result<(), String> {
        match &self.src {
            NexSource::Live { feed, .. } => feed.restore(state),
            _ => self.src.restore_position(state),
        }
    }
    fn rescales(&self) -> bool {
        matches!(
            self.src,
            NexSource::Gen(_) | NexSource::Live { .. } | NexSource::Files { .. }
        )
    }
    fn rescale(
        &mut self,
        states: &[&[u8]],
        to: air_runtime::dataflow::state::Rescale,
    ) -> Result<(), String> {
        match &self.src {
            // Nothing to deal out: one position for every worker.
            NexSource::Live { feed, .. } => feed.rescale(states),
            _ => self.src.rescale_position(states, to),
        }
    }
    fn report(&mut self, stats: &mut Stats) {
        if self.counted {
            stats.add("nexmark_events", self.events);
            stats.add("skipped_records", self.src.skipped());
        }
        if let Some(lag) = self.src.input_lag_max_ms() {
            // µs: maxima are integers.
            stats.max("input_lag_max_us", (lag * 1000.0).round() as u64);
        }
        if let Some(e) = self.src.error() {
            let mut g = self.error.lock().unwrap_or_else(|e| e.into_inner());
            if g.is_none() {
                *g = Some(e.to_string());
            }
        }
    }
}

/// A worker's bids on the graph API ([`Shard::read_bids`]): from the
/// generator, its bids alone ([`NexmarkGenerator::fill_bids`]: persons and
/// auctions are stepped over, never made); from files or paced, the
/// shard's events with the others dropped. Counts every event of the
/// stream it consumed, bid or not, as [`GraphSource`] does, and reports
/// the same way.
pub(crate) struct BidGraphSource {
    inner: GraphSource,
    /// The events of a file or paced poll, before the bids are kept.
    scratch: Vec<NexEvent>,
}

impl Source for BidGraphSource {
    type Item = Bid;
    #[inline]
    fn poll(&mut self, buf: &mut Vec<Bid>, max: usize) -> SourcePoll {
        if let NexSource::Gen(g) = &mut self.inner.src {
            buf.resize(max, Bid::default());
            let f = g.fill_bids(buf);
            buf.truncate(f.bids);
            self.inner.events += f.events;
            self.inner.last_read = f.events;
            return if f.events == 0 {
                SourcePoll::Done
            } else {
                SourcePoll::Ready
            };
        }
        let p = self.inner.poll(&mut self.scratch, max);
        buf.clear();
        buf.extend(self.scratch.iter().filter_map(|e| bid(*e)));
        p
    }
    /// Events of every kind, not just the bids yielded.
    fn events_read(&self, _yielded: usize) -> u64 {
        self.inner.last_read
    }
    fn report(&mut self, stats: &mut Stats) {
        self.inner.report(stats)
    }
    /// The generator's position (bids and the events stepped over), or
    /// the input files' (a poll keeps no events for the next one); none
    /// for paced generators and live inputs.
    fn save(&self) -> Option<Vec<u8>> {
        self.inner.save()
    }
    fn restore(&mut self, state: &[u8]) -> Result<(), String> {
        self.inner.restore(state)
    }
    /// A rescaled worker's shards yield every event, bids kept (the other
    /// events are made, then dropped).
    fn rescales(&self) -> bool {
        self.inner.rescales()
    }
    fn rescale(
        &mut self,
        states: &[&[u8]],
        to: air_runtime::dataflow::state::Rescale,
    ) -> Result<(), String> {
        self.inner.rescale(states, to)
    }
}

/// One worker's shard of the input, as graph sources.
pub(crate) struct Shard<'a> {
    sources: &'a Sources<'a>,
    error: &'a Arc<Mutex<Option<String>>>,
    index: usize,
    workers: usize,
    /// Rings the worker's doorbell (a live input's reader calls it when it
    /// queued a chunk for the worker).
    wake: Arc<dyn Fn() + Send + Sync>,
    /// The worker's share of a live input, compact events: made by the
    /// first source of this graph that reads it, joined by the others
    /// (q8 reads twice: both sides get every event).
    live: std::cell::OnceCell<LiveShare<NexEvent>>,
    /// The same, full events.
    live_full: std::cell::OnceCell<LiveShare<air_operators::sources::nexmark::FullEvent>>,
}

impl Shard<'_> {
    /// The shard's events.
    pub(crate) fn read(&self) -> GraphSource {
        self.source(true)
    }

    /// The shard's bids alone (the other events are counted, not made
    /// when generated): for queries that read nothing but bids.
    pub(crate) fn read_bids(&self) -> BidGraphSource {
        BidGraphSource {
            inner: self.source(true),
            scratch: Vec::new(),
        }
    }

    /// The same events again, not counted (the second side of a join).
    pub(crate) fn read_again(&self) -> GraphSource {
        self.source(false)
    }

    fn source(&self, counted: bool) -> GraphSource {
        let src = match &self.sources.live {
            Some(l) => NexSource::Live {
                events: self.live.get_or_init(|| self.share(l)).reader(),
                feed: l.feed.clone(),
                error: None,
            },
            None => self.sources.get(self.index, self.workers),
        };
        GraphSource {
            src,
            error: self.error.clone(),
            counted,
            events: 0,
            last_read: 0,
        }
    }
}

impl Shard<'_> {
    /// A new share of this worker's queue of the live input `l` (opened at
    /// the first poll of one of its readers).
    fn share<E: JsonEvent + Send + 'static>(&self, l: &LiveRank) -> LiveShare<E> {
        let feed = l.feed.clone();
        let local = self.index % l.local.max(1);
        let wake = self.wake.clone();
        let opts = self.sources.opts;
        let open: OpenLive<E> =
            Box::new(move || EventFileReader::live(&feed, local, move || wake(), opts));
        LiveShare::new(open, l.stop.clone(), l.feed.resumes_at_offset())
    }
}

impl NexmarkArgs {
    /// Runs the graph `build` makes on every worker of this rank (`build`
    /// gets the worker's shard of the input) and reports this rank's part:
    /// rows written where the graph's sink put them and counted.
    fn run_graph<B>(&self, dist: &Dist, build: B) -> Result<RankPart<()>, CliError>
    where
        B: Fn(&Dataflow, &Shard<'_>) + Sync,
    {
        let mut cfg = self.runtime.job_config();
        dist.configure(&mut cfg, self.runtime.force_network);
        if self.runtime.max_watermark_drift_ms.is_none() && self.spec().windowed {
            // Sources at most a minute or a window apart (see the option).
            cfg.max_watermark_drift = Some(self.window().max(DEFAULT_DRIFT_MS));
        }
        let total = cfg.workers * dist.ranks();
        let mut gen = self.gen.config(DEFAULT_EVENTS);
        gen.events = self.pace.events(self.gen.events, DEFAULT_EVENTS);
        // A live input: this rank's readers hand whole-line chunks to its
        // workers (each parses its own).
        let live = match self.live_input()? {
            Some(input) => {
                let input = input.for_rank(dist.rank());
                let feed = LiveFeed::start(&input, cfg.workers, LiveOptions::default())
                    .map_err(|e| CliError::BadInput(e.to_string()))?;
                if dist.is_root() && self.runtime.checkpoint_dir.is_some() {
                    crate::queries::common::say_live_checkpoint_promise(&feed);
                }
                Some(LiveRank {
                    feed,
                    local: cfg.workers,
                    stop: Arc::new(AtomicBool::new(false)),
                })
            }
            None => None,
        };
        let sources = Sources {
            gen,
            pieces: self.pieces(total)?,
            files: self.files(),
            opts: self.reader_options(),
            paced: self.pace.start().map(|at| (&self.pace, at)),
            live,
        };
        let error = Arc::new(Mutex::new(None::<String>));
        let start = Instant::now();
        let out = run_graph(&cfg, |df| {
            let bell = df.worker().doorbell.clone();
            let shard = Shard {
                sources: &sources,
                error: &error,
                index: df.index(),
                workers: df.workers(),
                wake: Arc::new(move || {
                    if let Some(b) = &bell {
                        b.ring();
                    }
                }),
                live: std::cell::OnceCell::new(),
                live_full: std::cell::OnceCell::new(),
            };
            build(df, &shard)
        })
        .map_err(|e| CliError::Other(e.into()))?;
        // Partial lines of connections dropped mid-line count as skipped.
        let partial = sources
            .live
            .as_ref()
            .map_or(0, |l| l.feed.report().partial_lines);
        let elapsed = start.elapsed().max(out.elapsed);
        // q8 reads each shard twice, and both reads judge the same events
        // late (one watermark rule over one sequence): count them once.
        let reads = self.spec().reads;
        let per_worker = out
            .workers
            .iter()
            .map(|wr| WorkerFigures {
                worker: wr.index,
                rank: dist.rank(),
                placement: wr.placement.clone(),
                events: wr.stats.get("nexmark_events"),
                late_records: wr.stats.get("late_records") / reads,
                input_lag_max_ms: wr
                    .stats
                    .get_max("input_lag_max_us")
                    .map(|us| us as f64 / 1000.0),
                channels: wr.channels.clone(),
                records_in_by_edge: wr.records_in.clone(),
                records_in_periods: wr.records_in_periods.clone(),
                extra: Default::default(),
            })
            .collect();
        let st = &out.stats;
        let input_error = error.lock().unwrap_or_else(|e| e.into_inner()).take();
        Ok(RankPart {
            rows: Vec::new(),
            per_worker,
            latency: if self.wallclock() {
                air_runtime::metrics::histogram_pairs(&st.latency)
            } else {
                Vec::new()
            },
            elapsed_s: elapsed.as_secs_f64(),
            late_partials: st.get("late_partials"),
            checkpoints: crate::queries::driver::CheckpointPart::of(st),
            late: st.late.clone(),
            disorder_max_ms: st.get_max(air_runtime::dataflow::DISORDER_MAX),
            input_error,
            skipped: st.get("skipped_records") + partial,
            // Written (or counted) by the sinks as they came.
            uncollected_rows: st.get("sink_rows") + st.get("partitioned_rows"),
            counters: [
                "partitioned_bytes",
                "partitions_committed",
                "partitioned_late_rows",
                "partitions_uncommitted",
                "sources_held_for_alignment",
            ]
            .into_iter()
            .filter(|k| st.get(k) > 0)
            .map(|k| (k.to_string(), st.get(k)))
            .collect(),
            stopped: out.stopped,
            // Windows still open at a stop, at their owners (and fired
            // windows the writer had not released yet).
            unfired_windows: st.get("unfired_windows") + st.get("unfired_collected_windows"),
            peak_rss_bytes: 0,
            extra: Default::default(),
            channels: crate::queries::driver::channel_figures(&out),
            load: crate::queries::load::LoadPart::of(&out),
        })
    }
}
