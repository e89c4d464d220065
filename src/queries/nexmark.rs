//! `air run nexmark --query q1|q2|q5|q7|q8` and `air gen nexmark`: the
//! NEXMark benchmark queries (semantics of the Apache Beam NEXMark suite) over
//! the NEXMark generator or JSON-lines files of its events.
//!
//! | query | what | output CSV columns (sorted by) |
//! |---|---|---|
//! | q1 | currency conversion: every bid, price × 89 / 100 (dollars → euros, integer cents, rounded down) | `auction,bidder,price,date_time_ms` (date_time, auction, bidder, price) |
//! | q2 | selection: bids whose `auction % 123 == 0` | `auction,price` (auction, price) |
//! | q5 | hot items: per sliding window (size `--window-ms`, slide `--slide-ms`), the auction(s) with the most bids; ties all listed | `window_start_ms,window_end_ms,auction,bids` (window, auction) |
//! | q7 | highest bid: per tumbling window of `--window-ms`, the bid(s) with the highest price; ties all listed | `window_start_ms,window_end_ms,auction,bidder,price,date_time_ms` (window, auction, bidder, date_time) |
//! | q8 | monitor new users: persons who opened an auction in the same tumbling window of `--window-ms` (join person.id = auction.seller) | `window_start_ms,person_id,name,auction_id,reserve` (window, person, auction) |
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
//! - q1: bids → price in euros; with `--out` each bid is a row of its
//!   millisecond, released in time order as the watermark passes it (from
//!   files: at the end, since a file may be out of order); without, rows
//!   are counted where they are made (no exchange).
//! - q2: bids → filter; with `--out` the rows are sorted by auction at the
//!   end (the order is known only then).
//! - q5: bids → keyed by auction → sliding windows, bids counted
//!   (pre-aggregated per pane and worker) → keyed by window → the hottest
//!   auctions ([`air_operators::graph::MaxByWindowExt::max_by_window`]:
//!   each worker sends only its own hottest to the window's owner).
//! - q7: bids → keyed by their tumbling window → the bids at the highest
//!   price ([`air_operators::graph::MaxBy`], pre-aggregated per worker).
//! - q8: persons and auctions (each worker reads its shard twice, once per
//!   side) → a window join on person id = seller whose pairs leave as soon
//!   as both records are in ([`air_operators::graph::JoinedStreams::window_eager`]).
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
use air_operators::graph::{
    Count, JoinExt, KeyedWindowExt, MaxBy, MaxByWindowExt, Sliding, Tumbling, Windowed,
};
use air_operators::sources::nexmark::{
    Auction, Bid, NexEvent, NexmarkConfig, NexmarkFileReader, NexmarkGenerator, OnBadRecord,
    Person, ReaderOptions,
};
use air_runtime::dataflow::{run_graph, Dataflow, Head, Pipe, Source, SourcePoll, Stats, Stream};
use serde::{Deserialize, Serialize};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The NEXMark queries `air` runs.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum NexQuery {
    /// Currency conversion (map).
    Q1,
    /// Selection (filter).
    Q2,
    /// Hot items (sliding-window count, then the top auction per window).
    Q5,
    /// Highest bid per tumbling window.
    Q7,
    /// New users: persons who opened an auction in the same window (join).
    Q8,
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
    /// [default: 10000000].
    #[arg(long, value_parser = super::common::parse::events_per_s)]
    pub events_per_s: Option<f64>,
    /// Seed of the stream [default: 0].
    #[arg(long)]
    pub seed: Option<u64>,
}

/// NEXMark's event-time rate when `--events-per-s` is not given.
pub const DEFAULT_EVENTS_PER_S: f64 = 10_000_000.0;

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
    /// Wall-clock pacing of the generator (`--rate`, `--duration`); q1 and
    /// q2 have no windowed output, hence no latency, only the input lag.
    #[command(flatten)]
    pub pace: PaceArgs,
    /// Read events from these JSON-lines files (`air gen nexmark`'s format)
    /// instead of the generator; each file is split by byte range across
    /// the workers.
    #[arg(long, num_args = 1..)]
    pub input: Vec<PathBuf>,
    /// What to do with a bad input record.
    #[arg(long, value_enum, default_value_t = BadRecord::Fail)]
    pub on_bad_record: BadRecord,
    /// Window size, ms of event time (q5: sliding; q7, q8: tumbling; q1
    /// and q2 have no windows and refuse it) [default: 10000].
    #[arg(long, value_name = "MS", value_parser = super::common::parse::window_ms)]
    pub window_ms: Option<u64>,
    /// Slide of q5's sliding window, ms (0 < slide ≤ size; q5 only)
    /// [default: 2000].
    #[arg(long, value_name = "MS", value_parser = super::common::parse::window_ms)]
    pub slide_ms: Option<u64>,
    /// Bounded out-of-orderness, ms: an event older than the newest one its
    /// worker has read minus this is late (dropped, counted). Each worker
    /// reads its own byte ranges, so with a file out of order by more than
    /// this the late events (and the results) depend on --workers: set it
    /// to the file's disorder. q5, q7, q8 only [default: 0].
    #[arg(long, value_name = "MS", value_parser = super::common::parse::delay_ms)]
    pub max_delay_ms: Option<u64>,
    /// Outputs.
    #[command(flatten)]
    pub output: OutputArgs,
    /// Runtime options.
    #[command(flatten)]
    pub runtime: RuntimeArgs,
}

/// The output columns, for `air run nexmark --help`.
pub const COLUMNS_HELP: &str = "\
Output CSV (--out) per query, rows sorted as listed:
  q1  auction,bidder,price,date_time_ms            every bid, price*89/100 (euro cents)
  q2  auction,price                                bids with auction % 123 == 0
  q5  window_start_ms,window_end_ms,auction,bids   top auction(s) by bids per sliding window
  q7  window_start_ms,window_end_ms,auction,bidder,price,date_time_ms
                                                   highest bid(s) per tumbling window
  q8  window_start_ms,person_id,name,auction_id,reserve
                                                   persons who opened an auction in the window
Limits: input lines up to 1 MiB; person names up to 64 bytes.";

/// Events of `air run nexmark` when `--events` is not given.
pub const DEFAULT_EVENTS: u64 = 100_000_000;

/// The most sliding windows one event may count in (`size / slide`).
pub const MAX_WINDOWS_PER_EVENT: u64 = 1000;

/// One result row (the columns of each query; see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum NexRow {
    /// q1.
    Q1 {
        /// Sort key first.
        date_time_ms: u64,
        /// Auction id.
        auction: u64,
        /// Bidder (person) id.
        bidder: u64,
        /// Price in euro cents.
        price: u64,
    },
    /// q2.
    Q2 {
        /// Auction id.
        auction: u64,
        /// Price, cents.
        price: u64,
    },
    /// q5 (before `finish`: one row per auction and window, its bid count).
    Q5 {
        /// Window start, ms.
        window_start_ms: u64,
        /// Auction id.
        auction: u64,
        /// Bids on it in the window.
        bids: u64,
    },
    /// q7.
    Q7 {
        /// Window start, ms.
        window_start_ms: u64,
        /// Auction id.
        auction: u64,
        /// Bidder id.
        bidder: u64,
        /// Bid time, ms.
        date_time_ms: u64,
        /// The window's highest price, cents.
        price: u64,
    },
    /// q8.
    Q8 {
        /// Window start, ms.
        window_start_ms: u64,
        /// Person id (= the auction's seller).
        person_id: u64,
        /// The auction's id.
        auction_id: u64,
        /// The person's name.
        name: String,
        /// The auction's reserve price, cents.
        reserve: u64,
    },
}

/// One byte range of one input file.
type Piece = (PathBuf, Range<u64>);

/// A worker's NEXMark source: its generator shard or its byte ranges of
/// the input files. (One per worker, never moved on the hot path: the size
/// difference of the variants does not matter.)
#[allow(clippy::large_enum_variant)]
pub enum NexSource {
    /// The generator.
    Gen(NexmarkGenerator),
    /// The generator paced by the wall clock (`--rate`), events stamped
    /// with their due times.
    Paced(Watched<NexmarkGenerator>),
    /// Input files.
    Files {
        /// (file, byte range) still to read, in order.
        pieces: std::vec::IntoIter<Piece>,
        /// The reader of the current piece.
        current: Option<NexmarkFileReader>,
        /// Reader options.
        opts: ReaderOptions,
        /// The error that stopped reading.
        error: Option<String>,
        /// Bad records skipped by finished readers.
        skipped: u64,
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
            NexSource::Paced(p) => p.poll(buf, max),
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
                        *error = Some(e.to_string());
                    }
                }
            },
        }
    }
}

impl NexSource {
    fn error(&self) -> Option<&str> {
        match self {
            NexSource::Files { error, .. } => error.as_deref(),
            NexSource::Gen(_) | NexSource::Paced(_) => None,
        }
    }
    fn skipped(&self) -> u64 {
        match self {
            NexSource::Files {
                skipped, current, ..
            } => skipped + current.as_ref().map_or(0, |r| r.skipped()),
            NexSource::Gen(_) | NexSource::Paced(_) => 0,
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

fn bid(e: NexEvent) -> Option<Bid> {
    match e {
        NexEvent::Bid(b) => Some(b),
        _ => None,
    }
}

fn person(e: NexEvent) -> Option<Person> {
    match e {
        NexEvent::Person(p) => Some(p),
        _ => None,
    }
}

fn auction(e: NexEvent) -> Option<Auction> {
    match e {
        NexEvent::Auction(a) => Some(a),
        _ => None,
    }
}

/// Q1: every bid, price in euros.
fn q1_map(e: NexEvent) -> Option<Bid> {
    bid(e).map(|b| Bid {
        price: q1_price(b.price),
        ..b
    })
}

/// Q2: bids on every 123rd auction.
fn q2_filter(e: NexEvent) -> Option<Bid> {
    bid(e).filter(|b| b.auction % Q2_AUCTION_SKIP == 0)
}

/// Q1's conversion: dollars to euros as Beam's Query1 does it,
/// `price * 89 / 100` in integer cents (rounded down).
pub fn q1_price(cents: u64) -> u64 {
    match cents.checked_mul(89) {
        Some(x) => x / 100,
        // Beyond 2^64 / 89 cents: exact in 128 bits (rare, and slower).
        None => (cents as u128 * 89 / 100) as u64,
    }
}

/// Q2's selection: Beam's Query2 keeps bids whose auction id is a multiple
/// of 123 (its `auctionSkip`).
pub const Q2_AUCTION_SKIP: u64 = 123;

impl NexmarkArgs {
    fn files(&self) -> bool {
        !self.input.is_empty()
    }

    /// `--window-ms`, or its default (10 000).
    pub fn window(&self) -> u64 {
        self.window_ms.unwrap_or(10_000)
    }

    /// `--slide-ms`, or its default (2 000).
    pub fn slide(&self) -> u64 {
        self.slide_ms.unwrap_or(2_000)
    }

    /// `--max-delay-ms`, or its default (0).
    pub fn max_delay(&self) -> u64 {
        self.max_delay_ms.unwrap_or(0)
    }

    /// The query, as the option table knows it.
    fn kind(&self) -> super::common::QueryKind {
        use super::common::QueryKind;
        match self.query {
            NexQuery::Q1 => QueryKind::NexQ1,
            NexQuery::Q2 => QueryKind::NexQ2,
            NexQuery::Q5 => QueryKind::NexQ5,
            NexQuery::Q7 => QueryKind::NexQ7,
            NexQuery::Q8 => QueryKind::NexQ8,
        }
    }

    /// Each global worker's pieces of input.
    fn pieces(&self, total: usize) -> Result<Vec<Vec<Piece>>, CliError> {
        let mut pieces: Vec<Vec<Piece>> = vec![Vec::new(); total];
        for path in &self.input {
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
}

impl Sources<'_> {
    /// A new source over worker `index` of `workers`' shard (every call
    /// reads the shard from its start: the same events, at the same times
    /// when paced).
    fn get(&self, index: usize, workers: usize) -> NexSource {
        if self.files {
            NexSource::Files {
                pieces: self.pieces[index].clone().into_iter(),
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
    type Row = NexRow;

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
        if self.files() && self.pace.paced() {
            return bad(
                "--rate and --duration apply to the generator, not to --input files".into(),
            );
        }
        if !self.files() && !self.pace.paced() {
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
                ],
            )?;
        }
        let (size, slide) = (self.window(), self.slide());
        if size == 0 {
            return bad("--window-ms must be positive".into());
        }
        if self.query == NexQuery::Q5 && (slide == 0 || slide > size) {
            return bad(format!(
                "--slide-ms {slide}: need 0 < slide <= --window-ms {size}"
            ));
        }
        if self.query == NexQuery::Q5 && size / slide > MAX_WINDOWS_PER_EVENT {
            return bad(format!(
                "--window-ms {size} / --slide-ms {slide}: each bid would count in more than \
                 {MAX_WINDOWS_PER_EVENT} windows; use a larger slide"
            ));
        }
        let held = match self.query {
            // Q2's order (by auction) is known only at the end, and so is
            // Q1's for a file (it may be out of order); Q1 from the
            // generator streams its rows in time order.
            NexQuery::Q2 => true,
            NexQuery::Q1 => self.files(),
            _ => false,
        };
        if held && self.output.out.is_some() && !self.output.out_per_rank {
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
            let rows = if self.query == NexQuery::Q1 {
                events
            } else {
                events / 100
            };
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
        if self.files()
            && (self.gen.events.is_some()
                || self.gen.seed.is_some()
                || self.gen.events_per_s.is_some())
        {
            return bad(
                "--events, --seed and --events-per-s apply to the generator, not to --input files"
                    .into(),
            );
        }
        super::common::check_input_files(&self.input)?;
        Ok(())
    }

    fn streams(&self) -> bool {
        true
    }

    fn run_rank(&self, dist: &Dist) -> Result<RankPart<NexRow>, CliError> {
        // Rows counted, not kept: the driver streams them
        // (`run_rank_streaming`).
        self.run_rank_streaming(dist, &RowsTo::Nowhere)
    }

    fn run_rank_streaming(&self, dist: &Dist, to: &RowsTo) -> Result<RankPart<NexRow>, CliError> {
        let (size, slide, delay) = (self.window(), self.slide(), self.max_delay());
        let header = self.header();
        let h = &header;
        match self.query {
            // Every bid, price in euros; with --out in the order of the
            // time (sorted per millisecond as the watermark passes it).
            NexQuery::Q1 if self.files() => self.run_graph(dist, |df, shard| {
                // A file may be out of order: no watermark before its end
                // (rows sorted at the end, none dropped as late).
                let bids = df.source(shard.read()).flat_map(q1_map);
                q1_rows(bids, h, to);
            }),
            NexQuery::Q1 => self.run_graph(dist, |df, shard| {
                // Each worker's generated times never decrease.
                let bids = df
                    .source(shard.read())
                    .flat_map(q1_map)
                    .event_time(|b: &Bid| b.date_time, 0);
                q1_rows(bids, h, to);
            }),
            // Bids on every 123rd auction, sorted by auction: written at
            // the end.
            NexQuery::Q2 => self.run_graph(dist, |df, shard| {
                let bids = df.source(shard.read()).flat_map(q2_filter);
                bid_rows(
                    bids,
                    |_| u64::MAX,
                    |r| (r.value.auction, r.value.price),
                    |r| Q2Csv {
                        auction: r.value.auction,
                        price: r.value.price,
                    },
                    h,
                    to,
                );
            }),
            // Hot items: bids per auction and sliding window, the hottest
            // auctions of each window (ties all kept).
            NexQuery::Q5 => self.run_graph(dist, |df, shard| {
                let hottest = df
                    .source(shard.read())
                    .flat_map(bid)
                    .event_time(|b: &Bid| b.date_time, delay)
                    .key_by(|b: &Bid| b.auction)
                    .window(Sliding::ms(size, slide), |b: &Bid| b.date_time)
                    .latency_per_window()
                    .aggregate(Count)
                    .key_by(|r: &Windowed<u64, u64>| r.start)
                    .max_by_window(|r: &Windowed<u64, u64>| r.value);
                sink_window_rows(
                    hottest,
                    |r| r.key,
                    |r| Q5Csv {
                        window_start_ms: r.start,
                        window_end_ms: r.end,
                        auction: r.key,
                        bids: r.value,
                    },
                    h,
                    to,
                );
            }),
            // Highest bid: per tumbling window, the bids at its highest
            // price (each worker keeps its own before the exchange).
            NexQuery::Q7 => self.run_graph(dist, |df, shard| {
                let highest = df
                    .source(shard.read())
                    .flat_map(bid)
                    .event_time(|b: &Bid| b.date_time, delay)
                    .key_by(move |b: &Bid| b.date_time / size)
                    .window(Tumbling::ms(size), |b: &Bid| b.date_time)
                    .aggregate(MaxBy::of(|b: &Bid| b.price))
                    .flat_map(|r| {
                        let (start, end) = (r.start, r.end);
                        r.value.into_iter().map(move |b| Windowed {
                            start,
                            end,
                            key: (),
                            value: b,
                        })
                    });
                sink_window_rows(
                    highest,
                    |r: &Windowed<(), Bid>| (r.value.auction, r.value.bidder, r.value.date_time),
                    |r| Q7Csv {
                        window_start_ms: r.start,
                        window_end_ms: r.end,
                        auction: r.value.auction,
                        bidder: r.value.bidder,
                        price: r.value.price,
                        date_time_ms: r.value.date_time,
                    },
                    h,
                    to,
                );
            }),
            // New users: persons who opened an auction in the window they
            // joined (each worker reads its shard twice, once per side;
            // every event moves each side's watermark).
            NexQuery::Q8 => self.run_graph(dist, |df, shard| {
                let persons = df
                    .source(shard.read())
                    .event_time(NexEvent::date_time, delay)
                    .flat_map(person);
                let auctions = df
                    .source(shard.read_again())
                    .event_time(NexEvent::date_time, delay)
                    .flat_map(auction);
                let pairs = persons
                    .key_by(|p: &Person| p.id)
                    .join(auctions.key_by(|a: &Auction| a.seller))
                    .window_eager(
                        Tumbling::ms(size),
                        |p: &Person| p.date_time,
                        |a: &Auction| a.date_time,
                    );
                sink_window_rows(
                    pairs,
                    |j| (j.key, j.right.id),
                    |j| Q8Csv {
                        window_start_ms: j.start,
                        person_id: j.key,
                        name: j.left.name.as_str().to_string(),
                        auction_id: j.right.id,
                        reserve: j.right.reserve,
                    },
                    h,
                    to,
                );
            }),
        }
    }

    fn finish(&self, mut rows: Vec<NexRow>) -> Vec<NexRow> {
        // Rows are streamed (none come back); kept for the trait's sake.
        rows.sort_unstable();
        rows
    }

    fn global_finish(&self) -> bool {
        self.query == NexQuery::Q5
    }

    fn header(&self) -> Vec<&'static str> {
        match self.query {
            NexQuery::Q1 => vec!["auction", "bidder", "price", "date_time_ms"],
            NexQuery::Q2 => vec!["auction", "price"],
            NexQuery::Q5 => vec!["window_start_ms", "window_end_ms", "auction", "bids"],
            NexQuery::Q7 => vec![
                "window_start_ms",
                "window_end_ms",
                "auction",
                "bidder",
                "price",
                "date_time_ms",
            ],
            NexQuery::Q8 => vec![
                "window_start_ms",
                "person_id",
                "name",
                "auction_id",
                "reserve",
            ],
        }
    }

    fn record(&self, row: &NexRow) -> Vec<String> {
        let s = |x: &u64| x.to_string();
        let size = self.window();
        match row {
            NexRow::Q1 {
                date_time_ms,
                auction,
                bidder,
                price,
            } => vec![s(auction), s(bidder), s(price), s(date_time_ms)],
            NexRow::Q2 { auction, price } => vec![s(auction), s(price)],
            NexRow::Q5 {
                window_start_ms,
                auction,
                bids,
            } => vec![
                s(window_start_ms),
                s(&window_start_ms.saturating_add(size)),
                s(auction),
                s(bids),
            ],
            NexRow::Q7 {
                window_start_ms,
                auction,
                bidder,
                date_time_ms,
                price,
            } => vec![
                s(window_start_ms),
                s(&window_start_ms.saturating_add(size)),
                s(auction),
                s(bidder),
                s(price),
                s(date_time_ms),
            ],
            NexRow::Q8 {
                window_start_ms,
                person_id,
                auction_id,
                name,
                reserve,
            } => vec![
                s(window_start_ms),
                s(person_id),
                name.clone(),
                s(auction_id),
                s(reserve),
            ],
        }
    }

    fn inputs(&self) -> Vec<PathBuf> {
        self.input.clone()
    }

    fn source(&self) -> &'static str {
        if self.files() {
            "files"
        } else {
            "generator"
        }
    }

    fn wallclock(&self) -> bool {
        // q1 and q2 have no windowed output: no latency.
        self.pace.paced() && !matches!(self.query, NexQuery::Q1 | NexQuery::Q2)
    }

    fn params(&self) -> serde_json::Value {
        serde_json::json!({
            "query": format!("{:?}", self.query).to_lowercase(),
            "window_ms": self.window(),
            "slide_ms": (self.query == NexQuery::Q5).then_some(self.slide()),
            "seed": (!self.files()).then_some(self.gen.seed.unwrap_or(0)),
            "events_per_s_event_time": (!self.files() && !self.pace.paced())
                .then_some(self.gen.events_per_s.unwrap_or(DEFAULT_EVENTS_PER_S)),
            "rate": self.pace.rate,
            "duration_s": self.pace.duration,
            "max_delay_ms": self.max_delay(),
        })
    }
}

/// `air gen nexmark`.
#[derive(clap::Args, Debug, Clone)]
pub struct GenNexmarkArgs {
    /// Generator options (the same as `air run nexmark`'s: the same events).
    #[command(flatten)]
    pub gen: NexGenArgs,
    /// The events as JSON lines (one object per event, with a `type` field).
    #[arg(long)]
    pub out: PathBuf,
}

/// `air gen nexmark`: writes the stream `air run nexmark` would generate.
pub fn gen(args: &GenNexmarkArgs) -> Result<(), CliError> {
    args.gen.validate(1_000_000)?;
    let cfg = args.gen.config(1_000_000);
    let n = air_operators::sources::nexmark::gen_to_file(&cfg, &args.out).map_err(|e| {
        if e.kind() == std::io::ErrorKind::InvalidInput || e.kind() == std::io::ErrorKind::NotFound
        {
            CliError::BadInput(e.to_string())
        } else {
            CliError::Other(e.into())
        }
    })?;
    eprintln!("wrote {n} events to {}", args.out.display());
    Ok(())
}

/// A q1 CSV row (the columns of [`COLUMNS_HELP`]).
#[derive(Serialize)]
struct Q1Csv {
    auction: u64,
    bidder: u64,
    price: u64,
    date_time_ms: u64,
}

/// A q2 CSV row.
#[derive(Serialize)]
struct Q2Csv {
    auction: u64,
    price: u64,
}

/// A q5 CSV row.
#[derive(Serialize)]
struct Q5Csv {
    window_start_ms: u64,
    window_end_ms: u64,
    auction: u64,
    bids: u64,
}

/// A q7 CSV row.
#[derive(Serialize)]
struct Q7Csv {
    window_start_ms: u64,
    window_end_ms: u64,
    auction: u64,
    bidder: u64,
    price: u64,
    date_time_ms: u64,
}

/// A q8 CSV row.
#[derive(Serialize)]
struct Q8Csv {
    window_start_ms: u64,
    person_id: u64,
    name: String,
    auction_id: u64,
    reserve: u64,
}

/// Q1's rows: with an output, each bid as a row of the millisecond it
/// happened in, so the writer releases them in time order (sorted within a
/// millisecond) as the watermark passes; without, counted where they are
/// made.
fn q1_rows<H, P>(bids: Stream<H, P>, header: &[&str], to: &RowsTo)
where
    H: Head,
    P: Pipe<H::Out, Out = Bid>,
{
    bid_rows(
        bids,
        |b| b.date_time.saturating_add(1),
        |r| {
            let b = &r.value;
            (b.date_time, b.auction, b.bidder, b.price)
        },
        |r| Q1Csv {
            auction: r.value.auction,
            bidder: r.value.bidder,
            price: r.value.price,
            date_time_ms: r.value.date_time,
        },
        header,
        to,
    );
}

/// Ends a graph of bids (q1, q2): with an output, each bid becomes a row
/// of a "window" ending at `end(bid)` (ms; `u64::MAX`: at the end of the
/// stream), released sorted by `sort` once the watermark passes that end
/// ([`sink_window_rows`]); without, the rows are only counted, at the
/// worker that made them (a stateless query crosses no exchange).
fn bid_rows<H, P, EF, S, SF, R, RF>(
    bids: Stream<H, P>,
    end: EF,
    sort: SF,
    row: RF,
    header: &[&str],
    to: &RowsTo,
) where
    H: Head,
    P: Pipe<H::Out, Out = Bid>,
    EF: Fn(&Bid) -> u64 + 'static,
    S: Ord + 'static,
    SF: Fn(&Windowed<(), Bid>) -> S + 'static,
    R: Serialize + 'static,
    RF: FnMut(Windowed<(), Bid>) -> R + 'static,
{
    match to {
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
            sink_window_rows(rows, sort, row, header, to);
        }
    }
}

/// A worker's source on the graph API: its input error, skipped records
/// and input lag are reported at the end (the error into `error`, shared
/// with the driver, so the rows read before it are still written).
struct GraphSource {
    src: NexSource,
    error: Arc<Mutex<Option<String>>>,
    /// Counts its events and skipped records (q8's second read of the
    /// shard does not).
    counted: bool,
    events: u64,
}

impl Source for GraphSource {
    type Item = NexEvent;
    #[inline]
    fn poll(&mut self, buf: &mut Vec<NexEvent>, max: usize) -> SourcePoll {
        let p = self.src.poll(buf, max);
        self.events += buf.len() as u64;
        p
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

/// One worker's shard of the input, as graph sources.
struct Shard<'a> {
    sources: &'a Sources<'a>,
    error: &'a Arc<Mutex<Option<String>>>,
    index: usize,
    workers: usize,
}

impl Shard<'_> {
    /// The shard's events.
    fn read(&self) -> GraphSource {
        self.source(true)
    }

    /// The same events again, not counted (the second side of a join).
    fn read_again(&self) -> GraphSource {
        self.source(false)
    }

    fn source(&self, counted: bool) -> GraphSource {
        GraphSource {
            src: self.sources.get(self.index, self.workers),
            error: self.error.clone(),
            counted,
            events: 0,
        }
    }
}

impl NexmarkArgs {
    /// Runs the graph `build` makes on every worker of this rank (`build`
    /// gets the worker's shard of the input) and reports this rank's part:
    /// rows written where the graph's sink put them and counted.
    fn run_graph<B>(&self, dist: &Dist, build: B) -> Result<RankPart<NexRow>, CliError>
    where
        B: Fn(&Dataflow, &Shard<'_>) + Sync,
    {
        let mut cfg = self.runtime.job_config();
        dist.configure(&mut cfg, self.runtime.force_network);
        let total = cfg.workers * dist.ranks();
        let mut gen = self.gen.config(DEFAULT_EVENTS);
        gen.events = self.pace.events(self.gen.events, DEFAULT_EVENTS);
        let sources = Sources {
            gen,
            pieces: self.pieces(total)?,
            files: self.files(),
            opts: self.reader_options(),
            paced: self.pace.start().map(|at| (&self.pace, at)),
        };
        let error = Arc::new(Mutex::new(None::<String>));
        let start = Instant::now();
        let out = run_graph(&cfg, |df| {
            let shard = Shard {
                sources: &sources,
                error: &error,
                index: df.index(),
                workers: df.workers(),
            };
            build(df, &shard)
        })
        .map_err(|e| CliError::Other(e.into()))?;
        let elapsed = start.elapsed().max(out.elapsed);
        // q8 reads each shard twice, and both reads judge the same events
        // late (one watermark rule over one sequence): count them once.
        let reads = if self.query == NexQuery::Q8 { 2 } else { 1 };
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
            input_error,
            skipped: st.get("skipped_records"),
            // Written (or counted) by the sinks as they came.
            uncollected_rows: st.get("sink_rows"),
            counters: Default::default(),
            stopped: out.stopped,
            // Windows still open at a stop, at their owners (and fired
            // windows the writer had not released yet).
            unfired_windows: st.get("unfired_windows") + st.get("unfired_collected_windows"),
            peak_rss_bytes: 0,
            extra: Default::default(),
        })
    }
}
