//! The full-event source of the queries that read string fields (q14, q16,
//! q21, q22): [`Shard::read_full`], every field of each event
//! ([`FullEvent`]), from the same generator shards or byte ranges of the
//! input files as [`Shard::read`] (so `compact` of each event is the event
//! `read` yields there, in the same order), paced by `--rate` the same
//! way.
//!
//! A query names the kinds of event it reads ([`Shard::read_full_of`]):
//! the generator then draws no strings for the others, and they never
//! enter the graph (the `nexmark_events` count still counts every event
//! read).
//!
//! Cost: a person's and an auction's strings are allocated by the
//! generator or the file reader; a bid's are [`Text`]s: the generator
//! shares each channel's name and URL (built once per generator, cloned
//! by a count) and keeps `extra` as letters drawn only when read (q10
//! draws them straight into its part file's buffer; q16, q21 and q22
//! never draw them); the file reader allocates each string it reads once
//! (shared by the clones). The
//! graph's source moves events out of its batch. A query
//! projects a full event to a small record (inline strings,
//! [`air_operators::sources::text::Word`]) right after the source, before
//! any exchange.
//!
//! [`Text`]: air_operators::sources::nexmark::Text

use super::{bid_rows, Cx, Shard, Sources};
use crate::queries::lagwatch::Watched;
use air_operators::graph::Windowed;
use air_operators::sources::file_merge::{MergedPieces, PieceSource, Streams};
use air_operators::sources::files::{FilePiece, PieceQueue, PieceStream};
use air_operators::sources::nexmark::{
    EventKind, FullBid, FullEvent, LiveEvents, NexmarkConfig, NexmarkFullFileReader,
    NexmarkFullGenerator, ReaderOptions,
};
use air_operators::sources::shards::{resume, save_positions, Shards};
use air_runtime::dataflow::{Dataflow, Source, SourcePoll, Stats};
use serde::Serialize;
use std::sync::{Arc, Mutex};

/// A worker's full-event source: its generator shard, paced or not, or its
/// byte ranges of the input files (as [`super::NexSource`], full events).
#[allow(clippy::large_enum_variant)]
pub(crate) enum FullSource {
    /// The generator.
    Gen(NexmarkFullGenerator),
    /// Several shards of the generator: a worker resumed at another worker
    /// count than its checkpoint's (every kind made, then kept by kind).
    Shards(Shards<NexmarkFullGenerator>),
    /// The generator paced by the wall clock (`--rate`).
    Paced(Watched<NexmarkFullGenerator>),
    /// Input files.
    Files(FullFiles),
    /// Several streams of input file pieces merged by event time: a
    /// worker resumed at another worker count than its checkpoint's with
    /// the remainders of several old workers.
    MergedFiles(Box<MergedPieces<FullFiles>>),
    /// A worker's share of a live input.
    Live {
        /// Its reader of the worker's share.
        events: LiveEvents<FullEvent>,
        /// The input (what a checkpoint saves of it).
        feed: air_operators::sources::live::LiveFeed,
        /// The error that stopped reading.
        error: Option<String>,
    },
}

impl FullSource {
    /// Replaces `buf` with the next events of `kinds` out of up to `max`
    /// read; returns the poll and how many events were read (of every
    /// kind).
    fn poll(
        &mut self,
        kinds: &[EventKind],
        buf: &mut Vec<FullEvent>,
        max: usize,
    ) -> (SourcePoll, usize) {
        let keep = |buf: &mut Vec<FullEvent>| {
            let read = buf.len();
            buf.retain(|e| kinds.contains(&e.kind()));
            read
        };
        match self {
            FullSource::Gen(g) => {
                buf.clear();
                let n = g.fill_kinds(kinds, buf, max);
                let poll = if n == 0 {
                    SourcePoll::Done
                } else {
                    SourcePoll::Ready
                };
                (poll, n)
            }
            FullSource::Shards(s) => {
                let poll = s.poll(buf, max);
                (poll, keep(buf))
            }
            FullSource::Paced(p) => {
                let poll = p.poll(buf, max);
                (poll, keep(buf))
            }
            FullSource::Files(f) => {
                let poll = f.poll(buf, max);
                (poll, keep(buf))
            }
            FullSource::MergedFiles(m) => {
                let poll = m.poll(buf, max);
                (poll, keep(buf))
            }
            FullSource::Live { events, error, .. } => {
                buf.resize(max, FullEvent::default());
                let poll = super::live_poll(events, error, buf);
                (poll, keep(buf))
            }
        }
    }

    fn skipped(&self) -> u64 {
        match self {
            FullSource::Files(f) => f.skipped(),
            FullSource::MergedFiles(m) => m.sources().map(FullFiles::skipped).sum(),
            FullSource::Live { events, .. } => events.skipped(),
            FullSource::Gen(_) | FullSource::Shards(_) | FullSource::Paced(_) => 0,
        }
    }
}

/// A worker's byte ranges of the input files, full events.
pub(crate) struct FullFiles {
    /// (file, byte range) still to read, in order.
    pieces: PieceQueue,
    /// The reader of the current piece.
    current: Option<NexmarkFullFileReader>,
    /// Reader options.
    opts: ReaderOptions,
    /// The error that stopped reading.
    error: Option<String>,
    /// Bad records skipped by finished readers.
    skipped: u64,
}

impl FullFiles {
    fn skipped(&self) -> u64 {
        self.skipped + self.current.as_ref().map_or(0, |r| r.skipped())
    }

    /// Its position (see [`PieceQueue::save`]).
    fn save(&self) -> Vec<u8> {
        self.pieces
            .save(self.current.as_ref().and_then(|r| r.position()))
    }

    /// The same files going on with `streams`: one stream read directly,
    /// several merged by event time.
    fn merged(&self, streams: Vec<PieceStream>) -> FullSource {
        let make = |s: PieceStream| FullFiles {
            pieces: self.pieces.with_stream(s),
            current: None,
            opts: self.opts,
            error: None,
            skipped: 0,
        };
        let time = Arc::new(|e: &FullEvent| e.date_time());
        let (files, inputs) = (self.pieces.files(), self.pieces.inputs());
        match MergedPieces::of(streams, make, time, files, inputs) {
            Streams::One(f) => FullSource::Files(f),
            Streams::Merged(m) => FullSource::MergedFiles(m),
        }
    }
}

impl Source for FullFiles {
    type Item = FullEvent;
    /// Every kind, into `buf`.
    fn poll(&mut self, buf: &mut Vec<FullEvent>, max: usize) -> SourcePoll {
        buf.resize(max, FullEvent::default());
        loop {
            if self.error.is_some() {
                buf.clear();
                return SourcePoll::Done;
            }
            if self.current.is_none() {
                let Some((path, range)) = self.pieces.next() else {
                    buf.clear();
                    return SourcePoll::Done;
                };
                match NexmarkFullFileReader::open(&path, range, self.opts) {
                    Ok(r) => self.current = Some(r),
                    Err(e) => {
                        air_runtime::dataflow::state::mark_failing();
                        self.error = Some(e.to_string());
                        continue;
                    }
                }
            }
            let r = self.current.as_mut().expect("opened above");
            match r.fill(buf) {
                Ok(0) => {
                    self.skipped += r.skipped();
                    self.current = None;
                }
                Ok(n) => {
                    buf.truncate(n);
                    return SourcePoll::Ready;
                }
                Err(e) => {
                    air_runtime::dataflow::state::mark_failing();
                    self.error = Some(e.to_string());
                }
            }
        }
    }
}

impl PieceSource for FullFiles {
    fn remaining(&self) -> Vec<FilePiece> {
        self.pieces
            .remaining(self.current.as_ref().and_then(|r| r.position()))
    }
}

/// A worker's full-event source on the graph API: its events, skipped
/// records, input lag and input error are reported as
/// [`super::GraphSource`] reports them.
pub(crate) struct FullGraphSource {
    src: FullSource,
    /// The kinds of event it yields.
    kinds: &'static [EventKind],
    error: Arc<Mutex<Option<String>>>,
    events: u64,
    /// Events of every kind the last poll read.
    last_read: u64,
}

impl Source for FullGraphSource {
    type Item = FullEvent;
    #[inline]
    fn poll(&mut self, buf: &mut Vec<FullEvent>, max: usize) -> SourcePoll {
        let (p, read) = self.src.poll(self.kinds, buf, max);
        self.events += read as u64;
        self.last_read = read as u64;
        p
    }
    /// Events of every kind, not just those yielded.
    fn events_read(&self, _yielded: usize) -> u64 {
        self.last_read
    }
    /// The unpaced generator's position (its shards, each with the events
    /// generated: [`save_positions`]), or the input files'
    /// ([`PieceQueue`]), the paced generator's ([`Watched`]), or a live
    /// input's (`LiveFeed::save_position`: a followed file's cut; standard
    /// input and TCP are not replayed).
    fn save(&self) -> Option<Vec<u8>> {
        match &self.src {
            FullSource::Gen(g) => Some(save_positions(std::slice::from_ref(g))),
            FullSource::Shards(s) => Some(s.save()),
            FullSource::Paced(p) => p.save(),
            FullSource::Live { feed, .. } => Some(feed.save_position(self.events)),
            FullSource::Files(f) => Some(f.save()),
            FullSource::MergedFiles(m) => Some(m.save()),
        }
    }
    fn restore(&mut self, state: &[u8]) -> Result<(), String> {
        match &mut self.src {
            FullSource::Gen(g) => {
                if let Some(shards) = resume(g, state)? {
                    self.src = FullSource::Shards(shards);
                }
                Ok(())
            }
            FullSource::Files(f) => {
                if let Some(streams) = f.pieces.restore(state)? {
                    self.src = f.merged(streams);
                }
                Ok(())
            }
            FullSource::Live { feed, .. } => feed.restore(state),
            FullSource::Paced(p) => p.restore(state),
            _ => {
                Err("only generators, input files and live inputs resume from a checkpoint".into())
            }
        }
    }
    /// The unpaced generator (its share of the old workers' shards) and
    /// input files (of what the old workers had left to read).
    fn rescales(&self) -> bool {
        matches!(
            self.src,
            FullSource::Gen(_) | FullSource::Live { .. } | FullSource::Files(_)
        )
    }
    fn rescale(
        &mut self,
        states: &[&[u8]],
        to: air_runtime::dataflow::state::Rescale,
    ) -> Result<(), String> {
        match &self.src {
            FullSource::Gen(g) => {
                self.src = FullSource::Shards(Shards::rescaled(g, states, to)?);
                Ok(())
            }
            // Nothing to deal out: one position for every worker.
            FullSource::Live { feed, .. } => feed.rescale(states),
            FullSource::Files(f) => {
                let split = |p: &std::path::Path, n: usize| {
                    air_operators::sources::nexmark::split_ranges(p, n)
                };
                let streams = f.pieces.rescaled(states, &to, split)?;
                self.src = f.merged(streams);
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
        stats.add("nexmark_events", self.events);
        stats.add("skipped_records", self.src.skipped());
        if let FullSource::Paced(p) = &self.src {
            if let Some(lag) = p.input_lag_max_ms() {
                // µs: maxima are integers.
                stats.max("input_lag_max_us", (lag * 1000.0).round() as u64);
            }
        }
        let error = match &self.src {
            FullSource::Files(f) => f.error.as_ref(),
            FullSource::MergedFiles(m) => m.sources().find_map(|f| f.error.as_ref()),
            FullSource::Live { error, .. } => error.as_ref(),
            _ => None,
        };
        if let Some(e) = error {
            let mut g = self.error.lock().unwrap_or_else(|e| e.into_inner());
            if g.is_none() {
                *g = Some(e.clone());
            }
        }
    }
}

impl Shard<'_> {
    /// The shard's events with every field ([`FullEvent`]): the events of
    /// [`read`](Self::read), with their strings.
    #[allow(dead_code)]
    pub(crate) fn read_full(&self) -> FullGraphSource {
        self.read_full_of(&[EventKind::Person, EventKind::Auction, EventKind::Bid])
    }

    /// [`read_full`](Self::read_full)'s events of the kinds in `kinds`
    /// only, in the same order (the generator draws no strings for the
    /// others).
    pub(crate) fn read_full_of(&self, kinds: &'static [EventKind]) -> FullGraphSource {
        let src = match &self.sources.live {
            Some(l) => FullSource::Live {
                events: self.live_full.get_or_init(|| self.share(l)).reader(),
                feed: l.feed.clone(),
                error: None,
            },
            None => self.sources.get_full(self.index, self.workers),
        };
        FullGraphSource {
            src,
            kinds,
            error: self.error.clone(),
            events: 0,
            last_read: 0,
        }
    }
}

impl Sources<'_> {
    /// [`Sources::get`] as full events.
    fn get_full(&self, index: usize, workers: usize) -> FullSource {
        if self.files {
            FullSource::Files(FullFiles {
                pieces: PieceQueue::new(self.pieces[index].clone()),
                current: None,
                opts: self.opts,
                error: None,
                skipped: 0,
            })
        } else if let Some((pace, at)) = &self.paced {
            // The schedule of `Sources::get`: the same events at the same
            // times.
            let pacer = pace.pacer(at, index, workers);
            let cfg = NexmarkConfig {
                events_per_s: pacer.interleaved_event_rate(workers).unwrap_or(1.0),
                base_time_ms: at.wall_ms,
                ..self.gen
            };
            FullSource::Paced(Watched::new(
                NexmarkFullGenerator::new(&cfg, index, workers),
                pacer,
            ))
        } else {
            FullSource::Gen(NexmarkFullGenerator::new(&self.gen, index, workers))
        }
    }
}

/// The event if it is a bid.
pub(crate) fn full_bid(e: FullEvent) -> Option<FullBid> {
    match e {
        FullEvent::Bid(b) => Some(b),
        _ => None,
    }
}

/// The rows of a query that makes at most one record of each bid (q14,
/// q21, q22): `f` of every full bid of the shard (`None`: dropped), each
/// record a row of the millisecond `time(record)` (ms) it happened in
/// ([`bid_rows`]), sorted by `sort` and written as `row`. As q1's rows: in
/// time order from the generator or a live input (each worker's times
/// never decrease: generated, or in stream order), sorted at the end from
/// files (a file may be out of order: no watermark before its end).
pub(crate) fn full_bid_rows<T, F, TF, S, SF, R, RF>(
    cx: &Cx<'_>,
    df: &Dataflow,
    shard: &Shard<'_>,
    mut f: F,
    time: TF,
    sort: SF,
    row: RF,
) where
    T: 'static,
    Windowed<(), T>: air_runtime::Record,
    F: FnMut(FullBid) -> Option<T> + 'static,
    TF: Fn(&T) -> u64 + Copy + 'static,
    S: Ord + 'static,
    SF: Fn(&Windowed<(), T>) -> S + 'static,
    R: Serialize + 'static,
    RF: FnMut(Windowed<(), T>) -> R + 'static,
{
    let rows = df
        .source(shard.read_full_of(&[EventKind::Bid]))
        .flat_map(move |e| full_bid(e).and_then(&mut f));
    let end = move |r: &T| time(r).saturating_add(1);
    if cx.args.files() {
        bid_rows(rows, end, sort, row, cx);
    } else {
        bid_rows(rows.event_time(time, 0), end, sort, row, cx);
    }
}

/// The hour of the day of `ms` since the Unix epoch, UTC (`0..24`).
pub(crate) fn utc_hour(ms: u64) -> u64 {
    ms / 3_600_000 % 24
}
