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
//! file's) `dateTime`, ms. Q5's last step (the top auction per window) runs
//! at rank 0 over every rank's per-auction counts; the counts themselves
//! are computed where the auctions are owned.
//!
//! With `--rate R [--duration S]` the generator is paced by the wall clock
//! ([`air_operators::sources::pace`]) and every event is stamped with its
//! wall-clock due time: the report has the generators' input lag and, for
//! the windowed queries (q5, q7, q8), latency percentiles (q7's latency is
//! measured from the window's last millisecond, see
//! [`air_operators::top::TopDownstream::latency`]).

use super::common::{CliError, PaceArgs, PaceStart, RuntimeArgs};
use super::dist::Dist;
use super::driver::{OutputArgs, Query, RankPart, WorkerFigures};
use super::lagwatch::Watched;
use air_operators::join::{run_join_job, JoinOptions, JoinSide};
use air_operators::sources::nexmark::{
    Auction, Bid, NexEvent, NexmarkConfig, NexmarkFileReader, NexmarkGenerator, OnBadRecord,
    Person, ReaderOptions,
};
use air_operators::stream::{
    run_window_job_firing, Fire, Pipe, Source, SourcePoll, Stream, WindowOptions,
};
use air_operators::top::{run_stateless_job, run_top_job, StatelessUpstream, TopUpstream};
use air_operators::window::{Aggregate, WindowSpec};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::PathBuf;
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

/// A fused stateless operator over NEXMark events: `f` maps an event to
/// at most one record (a filter and a map in one).
struct Only<F>(F);

impl<T, F: FnMut(NexEvent) -> Option<T> + Send> Pipe<NexEvent> for Only<F> {
    type Out = T;
    #[inline(always)]
    fn run<E: FnMut(T)>(&mut self, e: NexEvent, emit: &mut E) {
        if let Some(x) = (self.0)(e) {
            emit(x)
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

/// The sources of every worker of this rank, built on demand by worker
/// index (each taken once).
struct Sources<'a> {
    gen: NexmarkConfig,
    pieces: std::sync::Mutex<Vec<Vec<Piece>>>,
    files: bool,
    opts: ReaderOptions,
    /// Pacing and the paced job's start (`--rate`).
    paced: Option<(&'a PaceArgs, PaceStart)>,
}

impl Sources<'_> {
    /// Worker `index` of `workers`' source; `copy` (0 or 1) asks for a
    /// second, independent source over the same shard (the join's two
    /// sides read the stream twice).
    fn get(&self, index: usize, workers: usize, copy: bool) -> NexSource {
        if self.files {
            let mut all = self.pieces.lock().unwrap_or_else(|e| e.into_inner());
            let mine = if copy {
                all[index].clone()
            } else {
                std::mem::take(&mut all[index])
            };
            NexSource::Files {
                pieces: mine.into_iter(),
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

/// Figures common to the per-worker report of every query shape.
fn figures(
    dist: &Dist,
    placement: &[air_runtime::WorkerPlacement],
    channels: &[air_runtime::ChannelMetrics],
    events: &[u64],
    late: &[u64],
    lags: &[Option<f64>],
) -> Vec<WorkerFigures> {
    let w = placement.len();
    (0..w)
        .map(|i| WorkerFigures {
            worker: dist.rank() * w + i,
            rank: dist.rank(),
            placement: placement[i].clone(),
            events: events[i],
            late_records: late[i],
            input_lag_max_ms: lags[i],
            channels: channels[i].clone(),
            extra: Default::default(),
        })
        .collect()
}

fn input_outcome<'a>(sources: impl Iterator<Item = &'a NexSource>) -> (Option<String>, u64) {
    let mut err = None;
    let mut skipped = 0;
    for s in sources {
        skipped += s.skipped();
        if err.is_none() {
            err = s.error().map(str::to_string);
        }
    }
    (err, skipped)
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
        if matches!(self.query, NexQuery::Q1 | NexQuery::Q2) && self.output.out.is_some() {
            // The rows are kept to be sorted and written: ~100 bytes per row
            // at the peak. Refuse what cannot fit rather than abort later.
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

    fn run_rank(&self, dist: &Dist) -> Result<RankPart<NexRow>, CliError> {
        let mut cfg = self.runtime.job_config();
        dist.configure(&mut cfg, self.runtime.force_network);
        let total = cfg.workers * dist.ranks();
        let mut gen = self.gen.config(DEFAULT_EVENTS);
        gen.events = self.pace.events(self.gen.events, DEFAULT_EVENTS);
        let sources = Sources {
            gen,
            pieces: std::sync::Mutex::new(self.pieces(total)?),
            files: self.files(),
            opts: self.reader_options(),
            paced: self.pace.start().map(|at| (&self.pace, at)),
        };
        let lags = |s: &mut dyn Iterator<Item = &NexSource>| -> Vec<Option<f64>> {
            s.map(NexSource::input_lag_max_ms).collect()
        };
        let latency = |h: &air_runtime::metrics::Histogram<u64>| {
            if self.pace.paced() {
                air_runtime::metrics::histogram_pairs(h)
            } else {
                Vec::new()
            }
        };
        let start = Instant::now();
        let rt = |e: air_runtime::RuntimeError| CliError::Other(e.into());
        let wopts = WindowOptions {
            max_delay_ms: self.max_delay(),
            ..WindowOptions::default()
        };
        let mut part = match self.query {
            NexQuery::Q1 | NexQuery::Q2 => {
                let keep = self.output.out.is_some();
                let q1 = self.query == NexQuery::Q1;
                let out = if q1 {
                    run_stateless_job(&cfg, |i| {
                        StatelessUpstream::new(
                            sources.get(i.index, i.workers, false),
                            Only(q1_map),
                            keep,
                        )
                    })
                } else {
                    run_stateless_job(&cfg, |i| {
                        StatelessUpstream::new(
                            sources.get(i.index, i.workers, false),
                            Only(q2_filter),
                            keep,
                        )
                    })
                }
                .map_err(rt)?;
                let rows = out
                    .kept
                    .iter()
                    .flatten()
                    .map(|b| {
                        if q1 {
                            NexRow::Q1 {
                                date_time_ms: b.date_time,
                                auction: b.auction,
                                bidder: b.bidder,
                                price: b.price,
                            }
                        } else {
                            NexRow::Q2 {
                                auction: b.auction,
                                price: b.price,
                            }
                        }
                    })
                    .collect();
                let events: Vec<u64> = out.counts.iter().map(|c| c.0).collect();
                let produced: u64 = out.counts.iter().map(|c| c.1).sum();
                let (input_error, skipped) = input_outcome(out.sources.iter());
                RankPart {
                    rows,
                    per_worker: figures(
                        dist,
                        &out.placement,
                        &out.channels,
                        &events,
                        &vec![0; events.len()],
                        &lags(&mut out.sources.iter()),
                    ),
                    latency: Vec::new(),
                    elapsed_s: out.elapsed.as_secs_f64(),
                    late_partials: 0,
                    input_error,
                    skipped,
                    uncollected_rows: if keep { 0 } else { produced },
                    counters: Default::default(),
                    stopped: false,
                    unfired_windows: 0,
                    peak_rss_bytes: 0,
                    extra: Default::default(),
                }
            }
            NexQuery::Q5 => {
                let out = run_window_job_firing(
                    &cfg,
                    WindowSpec::sliding(self.window(), self.slide()),
                    Aggregate::Count,
                    Fire::TopCountPerWindow,
                    |i| {
                        Stream::source(sources.get(i.index, i.workers, false))
                            .pipe(Only(bid))
                            .key_by(|b: &Bid| b.auction)
                            .window(|b| b.date_time, |_| 1, wopts)
                    },
                )
                .map_err(rt)?;
                let (input_error, skipped) = input_outcome(out.sources.iter());
                let counts: Vec<NexRow> = out
                    .results
                    .iter()
                    .map(|r| NexRow::Q5 {
                        window_start_ms: r.window_start,
                        auction: r.key,
                        bids: r.state.count,
                    })
                    .collect();
                let mut per_worker = super::driver::worker_figures(&out, dist);
                for (f, lag) in per_worker.iter_mut().zip(lags(&mut out.sources.iter())) {
                    f.input_lag_max_ms = lag;
                }
                RankPart {
                    rows: q5_top(&counts),
                    per_worker,
                    latency: latency(&out.latency_hist),
                    elapsed_s: out.elapsed.as_secs_f64(),
                    late_partials: out.late_partials,
                    input_error,
                    skipped,
                    uncollected_rows: 0,
                    counters: Default::default(),
                    stopped: false,
                    unfired_windows: out.unfired_windows,
                    peak_rss_bytes: 0,
                    extra: Default::default(),
                }
            }
            NexQuery::Q7 => {
                let size = self.window();
                let out = run_top_job(&cfg, size, |i| {
                    TopUpstream::new(
                        sources.get(i.index, i.workers, false),
                        Only(bid),
                        |b: &Bid| b.date_time,
                        |b: &Bid| b.price,
                        size,
                        self.max_delay(),
                    )
                })
                .map_err(rt)?;
                let mut rows = Vec::new();
                for r in &out.results {
                    for b in &r.items {
                        rows.push(NexRow::Q7 {
                            window_start_ms: r.window_start,
                            auction: b.auction,
                            bidder: b.bidder,
                            date_time_ms: b.date_time,
                            price: b.price,
                        });
                    }
                }
                let events: Vec<u64> = out.upstream.iter().map(|c| c.source_records).collect();
                let late: Vec<u64> = out.upstream.iter().map(|c| c.late_records).collect();
                let (input_error, skipped) = input_outcome(out.sources.iter());
                RankPart {
                    rows,
                    per_worker: figures(
                        dist,
                        &out.placement,
                        &out.channels,
                        &events,
                        &late,
                        &lags(&mut out.sources.iter()),
                    ),
                    latency: latency(&out.latency_hist),
                    elapsed_s: out.elapsed.as_secs_f64(),
                    late_partials: out.late_partials,
                    input_error,
                    skipped,
                    uncollected_rows: 0,
                    counters: Default::default(),
                    stopped: false,
                    unfired_windows: out.unfired_windows,
                    peak_rss_bytes: 0,
                    extra: Default::default(),
                }
            }
            NexQuery::Q8 => {
                let opts = JoinOptions {
                    max_delay_ms: self.max_delay(),
                    ..JoinOptions::default()
                };
                let out = run_join_job(&cfg, WindowSpec::tumbling(self.window()), |i| {
                    JoinSide::with_pipe(
                        sources.get(i.index, i.workers, true),
                        Only(person),
                        |p: &Person| p.id,
                        |p: &Person| p.date_time,
                    )
                    .with_source_time(NexEvent::date_time)
                    .join(
                        JoinSide::with_pipe(
                            sources.get(i.index, i.workers, false),
                            Only(auction),
                            |a: &Auction| a.seller,
                            |a: &Auction| a.date_time,
                        )
                        .with_source_time(NexEvent::date_time),
                        opts,
                    )
                })
                .map_err(rt)?;
                if out.join.late_left + out.join.late_right != 0 {
                    return Err(CliError::Other(anyhow::anyhow!(
                        "internal error: join records arrived after their window closed"
                    )));
                }
                let rows = out
                    .results
                    .iter()
                    .map(|m| NexRow::Q8 {
                        window_start_ms: m.window_start,
                        person_id: m.left.id,
                        auction_id: m.right.id,
                        name: m.left.name.as_str().to_string(),
                        reserve: m.right.reserve,
                    })
                    .collect();
                // The join reads the stream twice (once per side): count
                // each event once (the auction side's reads).
                let events: Vec<u64> = out
                    .upstream
                    .iter()
                    .map(|c| c.right.source_records)
                    .collect();
                let late: Vec<u64> = out
                    .upstream
                    .iter()
                    .map(|c| c.left.late_records + c.right.late_records)
                    .collect();
                let (input_error, skipped) =
                    input_outcome(out.sources.iter().flat_map(|(l, r)| [l, r]));
                // Both sides read the same paced events: the worker's lag is
                // the larger of the two.
                let side_lags: Vec<Option<f64>> = out
                    .sources
                    .iter()
                    .map(|(l, r)| {
                        l.input_lag_max_ms()
                            .into_iter()
                            .chain(r.input_lag_max_ms())
                            .reduce(f64::max)
                    })
                    .collect();
                RankPart {
                    rows,
                    per_worker: figures(
                        dist,
                        &out.placement,
                        &out.channels,
                        &events,
                        &late,
                        &side_lags,
                    ),
                    latency: latency(&out.latency_hist),
                    elapsed_s: out.elapsed.as_secs_f64(),
                    late_partials: 0,
                    input_error,
                    skipped: skipped / 2,
                    uncollected_rows: 0,
                    counters: Default::default(),
                    stopped: false,
                    unfired_windows: out.unfired_windows,
                    peak_rss_bytes: 0,
                    extra: Default::default(),
                }
            }
        };
        // Wall time of this rank's job, setup included (as YSB reports it).
        part.elapsed_s = part.elapsed_s.max(start.elapsed().as_secs_f64());
        Ok(part)
    }

    fn finish(&self, mut rows: Vec<NexRow>) -> Vec<NexRow> {
        if self.query == NexQuery::Q5 {
            rows = q5_top(&rows);
        }
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

/// Q5's last step: per window, the auction(s) with the most bids (ties all
/// kept). Each (window, auction) count is final at exactly one worker, so
/// the top of the workers' (or ranks') local tops is the global top: each
/// rank reduces its rows with this, and rank 0 reduces the reductions.
fn q5_top(rows: &[NexRow]) -> Vec<NexRow> {
    let mut best: BTreeMap<u64, (u64, Vec<u64>)> = BTreeMap::new();
    for r in rows {
        if let NexRow::Q5 {
            window_start_ms,
            auction,
            bids,
        } = *r
        {
            let e = best.entry(window_start_ms).or_insert((bids, Vec::new()));
            if bids > e.0 {
                *e = (bids, Vec::new());
            }
            if bids == e.0 {
                e.1.push(auction);
            }
        }
    }
    best.into_iter()
        .flat_map(|(w, (bids, auctions))| {
            auctions.into_iter().map(move |auction| NexRow::Q5 {
                window_start_ms: w,
                auction,
                bids,
            })
        })
        .collect()
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
