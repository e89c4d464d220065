//! A windowed equi-join (symmetric hash join) of two keyed streams over
//! tumbling event-time windows: the operator [`WindowJoin`], and the
//! distributed job [`run_join_job`] that runs it at each key's owner.
//!
//! # Semantics (Flink's tumbling window join)
//!
//! - A left record `(key, t_l)` and a right record `(key, t_r)` form a pair
//!   when their keys are equal and their event times fall in the same
//!   tumbling window: `floor(t_l / s) == floor(t_r / s)` for window size `s`
//!   (ms). A window holds `[k·s, (k+1)·s)`, so a record at exactly `k·s`
//!   belongs to window `k`, one at `k·s − 1` to window `k − 1`.
//! - Every pair is emitted exactly once, as a [`JoinMatch`]
//!   `(window_start, key, left, right)`, as soon as both records are present
//!   (incrementally, not when the window closes): a record arriving on one
//!   side is stored in its side's table of its `(window, key)` and probed
//!   against the other side's table of the same `(window, key)`.
//! - A watermark `W` (ms) promises no record with `t < W` any more; every
//!   window whose end is `≤ W` is then complete and its state is dropped. A
//!   record that arrives for a window already dropped is late: it is counted,
//!   never joined, never silently lost.
//!
//! # The distributed job
//!
//! Each worker runs two sources, left and right ([`JoinSide`]: a [`Source`],
//! optionally a [`Pipe`] of fused stateless operators, a key fn and a time
//! fn), tags each record with its side and routes it as a [`JoinRecord`] to
//! the key's owner (`mix64(key) % workers`), where a [`JoinDownstream`] reads
//! it in place and feeds its [`WindowJoin`]. Each side keeps its own bounded
//! out-of-orderness watermark (newest event time − `max_delay_ms`); the
//! worker's watermark is the minimum of the two (a side whose source is
//! exhausted no longer holds it back). A side whose operators filter a
//! shared stream ([`JoinSide::with_source_time`]) takes its newest event
//! time from every record its source reads, kept or not: a worker whose
//! shard holds none of that side's records (NEXMark's one person in 50
//! events, sharded over 2 workers) still advances its watermark. A record older than the worker's
//! watermark is late at the source: dropped and counted, as in
//! [`crate::stream`]'s windows.
//!
//! The stateless operators of a side are a [`Pipe`] given to
//! [`JoinSide::with_pipe`] ([`JoinSide::new`] has none): a
//! [`crate::stream::Keyed`] stream cannot be turned into a side yet.
//!
//! ```
//! use air_operators::join::{run_join_job, JoinOptions, JoinSide};
//! use air_operators::stream::VecSource;
//! use air_operators::window::WindowSpec;
//! use air_runtime::JobConfig;
//! let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
//! let out = run_join_job(&cfg, WindowSpec::tumbling(10), |w| {
//!     // Each worker reads its shard: people (id, time) and auctions (seller, time, price).
//!     let people: Vec<(u64, u64)> = vec![(1, 0), (2, 3), (1, 12)];
//!     let auctions: Vec<(u64, u64, u64)> = vec![(1, 5, 100), (2, 9, 70), (1, 10, 30), (3, 4, 5)];
//!     let shard = w.index == 0;
//!     let people = if shard { people } else { vec![] };
//!     let auctions = if shard { auctions } else { vec![] };
//!     JoinSide::new(VecSource::new(people), |p: &(u64, u64)| p.0, |p| p.1).join(
//!         JoinSide::new(VecSource::new(auctions), |a: &(u64, u64, u64)| a.0, |a| a.1),
//!         JoinOptions::default(),
//!     )
//! })
//! .unwrap();
//! let pairs: Vec<(u64, u64, u64)> =
//!     out.results.iter().map(|m| (m.window_start, m.key, m.right.2)).collect();
//! assert_eq!(pairs, vec![(0, 1, 100), (0, 2, 70), (10, 1, 30)]);
//! ```

use crate::stream::{now_ms, Identity, Pipe, Source, SourcePoll};
use crate::window::{mix64, WindowSpec};
use air_runtime::{
    ChannelMetrics, Downstream, Emitter, ExchangeData, JobConfig, LatencySummary, Progress,
    RuntimeError, Upstream, WorkerInfo,
};
use hdrhistogram::Histogram;
use rkyv::api::high::HighDeserializer;
use rkyv::{rancor, Archive, Deserialize, Serialize};
use rustc_hash::FxHashMap;
use std::time::Duration;

/// One output pair of the join: a left and a right record with the same key
/// in the same window. [`WindowJoin`] hands out `JoinMatch<&L, &R>` (borrowed
/// from its tables); [`JoinMatch::cloned`] makes an owned one.
///
/// The derived order is by `(window_start, key, left_time, right_time, left,
/// right)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JoinMatch<L, R> {
    /// Start of the window both records fall in, ms of event time.
    pub window_start: u64,
    /// The join key.
    pub key: u64,
    /// Event time of the left record, ms.
    pub left_time: u64,
    /// Event time of the right record, ms.
    pub right_time: u64,
    /// The left record's payload.
    pub left: L,
    /// The right record's payload.
    pub right: R,
}

impl<L: Clone, R: Clone> JoinMatch<&L, &R> {
    /// An owned copy of this pair.
    pub fn cloned(&self) -> JoinMatch<L, R> {
        JoinMatch {
            window_start: self.window_start,
            key: self.key,
            left_time: self.left_time,
            right_time: self.right_time,
            left: self.left.clone(),
            right: self.right.clone(),
        }
    }
}

/// Counters of one [`WindowJoin`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct WindowJoinCounters {
    /// Left records stored and probed (late ones excluded).
    pub left_records: u64,
    /// Right records stored and probed (late ones excluded).
    pub right_records: u64,
    /// Left records whose window had already closed: counted, not joined.
    pub late_left: u64,
    /// Right records whose window had already closed: counted, not joined.
    pub late_right: u64,
    /// Pairs emitted.
    pub matches: u64,
    /// Windows whose state was dropped by a watermark.
    pub windows_closed: u64,
}

impl WindowJoinCounters {
    /// Adds `o` into `self`.
    pub fn add(&mut self, o: &WindowJoinCounters) {
        self.left_records += o.left_records;
        self.right_records += o.right_records;
        self.late_left += o.late_left;
        self.late_right += o.late_right;
        self.matches += o.matches;
        self.windows_closed += o.windows_closed;
    }
}

/// The records of one `(window, key)`: each side's `(event time ms, payload)`
/// in arrival order.
struct JoinCell<L, R> {
    left: Vec<(u64, L)>,
    right: Vec<(u64, R)>,
}

impl<L, R> Default for JoinCell<L, R> {
    fn default() -> Self {
        JoinCell {
            left: Vec::new(),
            right: Vec::new(),
        }
    }
}

/// The cells of one window, by key.
type WindowCells<L, R> = FxHashMap<u64, JoinCell<L, R>>;

/// A symmetric hash join over tumbling event-time windows, at one worker
/// (see the [module docs](self) for the semantics).
///
/// State: per open window (a short vector sorted by start, searched from the
/// newest), a hash map from key to both sides' records. Memory is the open
/// windows' records; [`on_watermark`](Self::on_watermark) frees closed ones.
///
/// ```
/// use air_operators::join::WindowJoin;
/// use air_operators::window::WindowSpec;
/// let mut j: WindowJoin<&str, &str> = WindowJoin::new(WindowSpec::tumbling(1000));
/// let mut out = vec![];
/// assert_eq!(j.insert_left(7, 10, "a", |m| out.push(m.cloned())), Some(0));
/// assert_eq!(j.insert_right(7, 999, "x", |m| out.push(m.cloned())), Some(1));
/// assert_eq!(j.insert_right(7, 1000, "y", |m| out.push(m.cloned())), Some(0)); // next window
/// assert_eq!((out[0].left, out[0].right, out[0].window_start), ("a", "x", 0));
/// j.on_watermark(1000); // window [0, 1000) is complete: dropped
/// assert_eq!(j.insert_left(7, 500, "late", |m| out.push(m.cloned())), None);
/// assert_eq!(j.counters().late_left, 1);
/// ```
pub struct WindowJoin<L, R> {
    size_ms: u64,
    windows: Vec<(u64, WindowCells<L, R>)>,
    closed_wm: u64,
    stored: usize,
    counters: WindowJoinCounters,
}

impl<L, R> WindowJoin<L, R> {
    /// An empty join over the tumbling windows of `spec`.
    ///
    /// # Panics
    ///
    /// If `spec` is not [`WindowSpec::Tumbling`] (sliding windows are not
    /// supported by the join).
    pub fn new(spec: WindowSpec) -> Self {
        let WindowSpec::Tumbling { size_ms } = spec else {
            panic!("the window join supports tumbling windows only, got {spec:?}");
        };
        assert!(size_ms > 0, "window size must be positive");
        WindowJoin {
            size_ms,
            windows: Vec::new(),
            closed_wm: 0,
            stored: 0,
            counters: WindowJoinCounters::default(),
        }
    }

    /// Window length, ms.
    pub fn size_ms(&self) -> u64 {
        self.size_ms
    }

    /// Start of the window holding event time `time` (ms).
    #[inline]
    pub fn window_start(&self, time: u64) -> u64 {
        time - time % self.size_ms
    }

    /// Whether a record at event time `time` (ms) is late: its window ended
    /// at or before the last watermark, so its state is gone.
    #[inline]
    pub fn is_late(&self, time: u64) -> bool {
        self.window_start(time).saturating_add(self.size_ms) <= self.closed_wm
    }

    /// The last watermark passed to [`on_watermark`](Self::on_watermark), ms.
    pub fn watermark(&self) -> u64 {
        self.closed_wm
    }

    /// Windows with state.
    pub fn open_windows(&self) -> usize {
        self.windows.len()
    }

    /// Records held (both sides, all open windows).
    pub fn stored_records(&self) -> usize {
        self.stored
    }

    /// The counters so far.
    pub fn counters(&self) -> WindowJoinCounters {
        self.counters
    }

    /// The cell of `(window_start, key)`, created empty.
    #[inline]
    fn cell(&mut self, window_start: u64, key: u64) -> &mut JoinCell<L, R> {
        let idx = match self.windows.iter().rposition(|(s, _)| *s == window_start) {
            Some(i) => i,
            None => {
                let pos = self.windows.partition_point(|(s, _)| *s < window_start);
                self.windows
                    .insert(pos, (window_start, FxHashMap::default()));
                pos
            }
        };
        self.windows[idx].1.entry(key).or_default()
    }

    /// Inserts a left record and emits its pair with every right record of
    /// the same `(window, key)`. Returns the pairs emitted, or `None` if the
    /// record is late (counted, not stored).
    #[inline]
    pub fn insert_left(
        &mut self,
        key: u64,
        time: u64,
        item: L,
        emit: impl FnMut(JoinMatch<&L, &R>),
    ) -> Option<usize> {
        self.insert_left_with(key, time, || item, emit)
    }

    /// [`insert_left`](Self::insert_left) with the payload built by `make`,
    /// which is called only if the record is not late (so a late record is
    /// never deserialized).
    pub fn insert_left_with(
        &mut self,
        key: u64,
        time: u64,
        make: impl FnOnce() -> L,
        mut emit: impl FnMut(JoinMatch<&L, &R>),
    ) -> Option<usize> {
        if self.is_late(time) {
            self.counters.late_left += 1;
            return None;
        }
        let window_start = self.window_start(time);
        let cell = self.cell(window_start, key);
        cell.left.push((time, make()));
        let (_, left) = &cell.left[cell.left.len() - 1];
        for (right_time, right) in &cell.right {
            emit(JoinMatch {
                window_start,
                key,
                left_time: time,
                right_time: *right_time,
                left,
                right,
            });
        }
        let n = cell.right.len();
        self.stored += 1;
        self.counters.left_records += 1;
        self.counters.matches += n as u64;
        Some(n)
    }

    /// Inserts a right record and emits its pair with every left record of
    /// the same `(window, key)`. Returns the pairs emitted, or `None` if the
    /// record is late (counted, not stored).
    #[inline]
    pub fn insert_right(
        &mut self,
        key: u64,
        time: u64,
        item: R,
        emit: impl FnMut(JoinMatch<&L, &R>),
    ) -> Option<usize> {
        self.insert_right_with(key, time, || item, emit)
    }

    /// [`insert_right`](Self::insert_right) with the payload built by `make`,
    /// which is called only if the record is not late.
    pub fn insert_right_with(
        &mut self,
        key: u64,
        time: u64,
        make: impl FnOnce() -> R,
        mut emit: impl FnMut(JoinMatch<&L, &R>),
    ) -> Option<usize> {
        if self.is_late(time) {
            self.counters.late_right += 1;
            return None;
        }
        let window_start = self.window_start(time);
        let cell = self.cell(window_start, key);
        cell.right.push((time, make()));
        let (_, right) = &cell.right[cell.right.len() - 1];
        for (left_time, left) in &cell.left {
            emit(JoinMatch {
                window_start,
                key,
                left_time: *left_time,
                right_time: time,
                left,
                right,
            });
        }
        let n = cell.left.len();
        self.stored += 1;
        self.counters.right_records += 1;
        self.counters.matches += n as u64;
        Some(n)
    }

    /// The watermark advanced to `wm` (ms): drops the state of every window
    /// whose end (`start + size`) is `≤ wm`; records for those windows are
    /// late from now on. Returns the number of windows dropped. A watermark
    /// that does not advance is ignored.
    pub fn on_watermark(&mut self, wm: u64) -> usize {
        if wm <= self.closed_wm {
            return 0;
        }
        self.closed_wm = wm;
        let size = self.size_ms;
        let n = self
            .windows
            .iter()
            .take_while(|(s, _)| s.saturating_add(size) <= wm)
            .count();
        for (_, cells) in self.windows.drain(..n) {
            for c in cells.values() {
                self.stored -= c.left.len() + c.right.len();
            }
        }
        self.counters.windows_closed += n as u64;
        n
    }
}

/// One record of one side of a join as it crosses the exchange: its key and
/// event time (read in place by the receiver) and its payload.
#[derive(Clone, Debug, PartialEq, Eq, Archive, Serialize, Deserialize)]
pub struct JoinItem<T> {
    /// The join key.
    pub key: u64,
    /// Event time, ms.
    pub time: u64,
    /// The record.
    pub payload: T,
}

/// What crosses the exchange of a join: one record of either side, tagged
/// with its side. Its archived form, [`ArchivedJoinRecord`], has the same
/// variants over [`ArchivedJoinItem`]s.
#[derive(Clone, Debug, PartialEq, Eq, Archive, Serialize, Deserialize)]
pub enum JoinRecord<L, R> {
    /// A record of the left input.
    Left(JoinItem<L>),
    /// A record of the right input.
    Right(JoinItem<R>),
}

/// A payload that can be joined: an rkyv-archivable record that can be
/// rebuilt from its archived form. Implemented for every `Clone` type whose
/// archive derives rkyv's `Deserialize` (all rkyv-derived types).
///
/// For a plain-old-data payload (fixed-size fields, no pointers) rebuilding
/// is a read of its fields in place; for one with out-of-line data (a
/// `String`, a `Vec`) it allocates.
pub trait JoinPayload: Archive + Clone + Send + 'static {
    /// The owned record of archive `a`.
    fn from_archived(a: &Self::Archived) -> Self;
}

impl<T> JoinPayload for T
where
    T: Archive + Clone + Send + 'static,
    T::Archived: Deserialize<T, HighDeserializer<rancor::Error>>,
{
    #[inline]
    fn from_archived(a: &T::Archived) -> T {
        rkyv::deserialize::<T, rancor::Error>(a)
            .expect("deserializing a validated archive from the same job")
    }
}

/// One input of a join at one worker: something that yields
/// `(key, event time ms, payload)` triples. Implemented by [`JoinSide`].
pub trait JoinInput: Send {
    /// The source it reads (handed back after the job).
    type Source;
    /// The records it yields.
    type Payload;
    /// Takes up to `max` records from the source and calls `f(key, time,
    /// payload)` for every record its operators produce. Returns the
    /// source's answer and the number of records taken from it.
    fn poll<F: FnMut(u64, u64, Self::Payload)>(&mut self, max: usize, f: F) -> (SourcePoll, usize);
    /// Newest event time (ms) of any record the source has read, kept by
    /// the operators or not; 0 if unknown. The side's watermark follows it
    /// as well as the records it yields.
    fn source_time(&self) -> u64 {
        0
    }
    /// The source.
    fn source(&self) -> &Self::Source;
    /// The source, by value (after the job).
    fn into_source(self) -> Self::Source;
}

/// One side of a join: a [`Source`], the stateless operators fused after it
/// (a [`Pipe`]; none with [`JoinSide::new`]), a key fn and an event-time fn
/// (ms) over the records the operators produce. The record itself is the
/// payload that crosses the exchange.
pub struct JoinSide<S: Source, P, K, TF> {
    source: S,
    pipe: P,
    key: K,
    time: TF,
    buf: Vec<S::Item>,
    /// Event time (ms) of every source record, kept or not (see
    /// [`JoinSide::with_source_time`]).
    source_time: Option<fn(&S::Item) -> u64>,
    /// Newest `source_time` read, ms (0: none yet, or no `source_time`).
    newest_source: u64,
}

impl<S: Source, K, TF> JoinSide<S, Identity, K, TF>
where
    K: Fn(&S::Item) -> u64 + Send,
    TF: Fn(&S::Item) -> u64 + Send,
{
    /// The records of `source` as they are, keyed by `key`, at event time
    /// `time` (ms).
    pub fn new(source: S, key: K, time: TF) -> Self {
        JoinSide {
            source,
            pipe: Identity,
            key,
            time,
            buf: Vec::new(),
            source_time: None,
            newest_source: 0,
        }
    }
}

impl<S: Source, P: Pipe<S::Item>, K, TF> JoinSide<S, P, K, TF>
where
    K: Fn(&P::Out) -> u64 + Send,
    TF: Fn(&P::Out) -> u64 + Send,
{
    /// The records of `source` after the fused operators `pipe`, keyed by
    /// `key`, at event time `time` (ms).
    pub fn with_pipe(source: S, pipe: P, key: K, time: TF) -> Self {
        JoinSide {
            source,
            pipe,
            key,
            time,
            buf: Vec::new(),
            source_time: None,
            newest_source: 0,
        }
    }

    /// This side's watermark follows `time_of` over every record its source
    /// reads, also those its operators drop (the stream's event time, ms),
    /// as well as the records it keeps. For a side that filters a shared
    /// stream: without it, a worker that reads none of the side's records
    /// holds every window open until its source ends.
    pub fn with_source_time(mut self, time_of: fn(&S::Item) -> u64) -> Self {
        self.source_time = Some(time_of);
        self
    }

    /// A join of this side (left) with `right`: each worker's upstream.
    pub fn join<B: JoinInput>(self, right: B, opts: JoinOptions) -> JoinUpstream<Self, B> {
        JoinUpstream::new(self, right, opts)
    }
}

impl<S, P, K, TF> JoinInput for JoinSide<S, P, K, TF>
where
    S: Source,
    P: Pipe<S::Item>,
    K: Fn(&P::Out) -> u64 + Send,
    TF: Fn(&P::Out) -> u64 + Send,
{
    type Source = S;
    type Payload = P::Out;

    #[inline]
    fn poll<F: FnMut(u64, u64, P::Out)>(&mut self, max: usize, mut f: F) -> (SourcePoll, usize) {
        self.buf.clear();
        let poll = self.source.poll(&mut self.buf, max);
        let n = self.buf.len();
        if let Some(time_of) = self.source_time {
            for item in &self.buf {
                self.newest_source = self.newest_source.max(time_of(item));
            }
        }
        let JoinSide {
            pipe,
            key,
            time,
            buf,
            ..
        } = self;
        for item in buf.drain(..) {
            pipe.run(item, &mut |r| {
                let k = key(&r);
                let t = time(&r);
                f(k, t, r)
            });
        }
        (poll, n)
    }

    fn source_time(&self) -> u64 {
        self.newest_source
    }

    fn source(&self) -> &S {
        &self.source
    }

    fn into_source(self) -> S {
        self.source
    }
}

/// Options of a join's upstream.
#[derive(Debug, Clone, Copy)]
pub struct JoinOptions {
    /// Bounded out-of-orderness of each side, ms: a side's watermark is the
    /// newest event time it has seen minus this. A record older than the
    /// worker's watermark (the minimum of its sides') is late: dropped and
    /// counted in [`SideCounters::late_records`].
    pub max_delay_ms: u64,
    /// Records taken from each source per step.
    pub source_batch: usize,
}

impl Default for JoinOptions {
    fn default() -> Self {
        JoinOptions {
            max_delay_ms: 0,
            source_batch: 1024,
        }
    }
}

/// Counters of one side of a join's upstream at one worker.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct SideCounters {
    /// Records taken from the source.
    pub source_records: u64,
    /// Records the fused operators produced (sent or late).
    pub records: u64,
    /// Records older than the worker's watermark: dropped and counted.
    pub late_records: u64,
}

impl SideCounters {
    /// Adds `o` into `self`.
    pub fn add(&mut self, o: &SideCounters) {
        self.source_records += o.source_records;
        self.records += o.records;
        self.late_records += o.late_records;
    }
}

/// Counters of a join's upstream at one worker.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct JoinCounters {
    /// The left side.
    pub left: SideCounters,
    /// The right side.
    pub right: SideCounters,
}

impl JoinCounters {
    /// Adds `o` into `self`.
    pub fn add(&mut self, o: &JoinCounters) {
        self.left.add(&o.left);
        self.right.add(&o.right);
    }
}

/// Watermark state of one side.
#[derive(Debug, Default, Clone, Copy)]
struct SideState {
    newest: u64,
    done: bool,
}

impl SideState {
    /// This side's watermark (ms) for `delay`: `u64::MAX` once its source is
    /// exhausted (it no longer holds the worker back).
    fn watermark(&self, delay: u64) -> u64 {
        if self.done {
            u64::MAX
        } else {
            self.newest.saturating_sub(delay)
        }
    }
}

/// The upstream of a join at one worker: both sides' sources and operators,
/// the late check, and the exchange (each record to `mix64(key) % workers`).
/// Each step takes up to `source_batch` records from each side whose source
/// is not exhausted.
pub struct JoinUpstream<A, B> {
    left: A,
    right: B,
    opts: JoinOptions,
    left_state: SideState,
    right_state: SideState,
    wm: u64,
    counters: JoinCounters,
}

impl<A: JoinInput, B: JoinInput> JoinUpstream<A, B> {
    /// The upstream joining `left` with `right`.
    pub fn new(left: A, right: B, opts: JoinOptions) -> Self {
        JoinUpstream {
            left,
            right,
            opts,
            left_state: SideState::default(),
            right_state: SideState::default(),
            wm: 0,
            counters: JoinCounters::default(),
        }
    }

    /// The counters so far.
    pub fn counters(&self) -> JoinCounters {
        self.counters
    }

    /// The left side.
    pub fn left(&self) -> &A {
        &self.left
    }

    /// The right side.
    pub fn right(&self) -> &B {
        &self.right
    }

    /// Both sides' sources, by value (after the job).
    pub fn into_sources(self) -> (A::Source, B::Source) {
        (self.left.into_source(), self.right.into_source())
    }
}

/// Polls one side unless exhausted; returns whether it did work. The
/// worker's watermark `wm` advances with every record, as in the window
/// jobs: `min(this side's newest, other side's watermark `other`) − delay`.
#[inline]
#[allow(clippy::too_many_arguments)]
fn step_side<I: JoinInput>(
    input: &mut I,
    state: &mut SideState,
    counters: &mut SideCounters,
    max: usize,
    wm: &mut u64,
    other: u64,
    delay: u64,
    mut send: impl FnMut(u64, u64, I::Payload),
) -> bool {
    if state.done {
        return false;
    }
    let mut newest = state.newest;
    let (poll, n) = input.poll(max, |key, time, payload| {
        counters.records += 1;
        if time < *wm {
            counters.late_records += 1;
            return;
        }
        if time > newest {
            newest = time;
            *wm = (*wm).max(newest.saturating_sub(delay).min(other));
        }
        send(key, time, payload);
    });
    counters.source_records += n as u64;
    let seen = input.source_time();
    if seen > newest {
        newest = seen;
        *wm = (*wm).max(newest.saturating_sub(delay).min(other));
    }
    state.newest = newest;
    match poll {
        SourcePoll::Done => {
            state.done = true;
            n > 0
        }
        SourcePoll::Idle => n > 0,
        SourcePoll::Ready => true,
    }
}

impl<A, B> Upstream<JoinRecord<A::Payload, B::Payload>> for JoinUpstream<A, B>
where
    A: JoinInput,
    B: JoinInput,
    JoinRecord<A::Payload, B::Payload>: ExchangeData,
{
    fn step(&mut self, out: &mut Emitter<'_, '_, JoinRecord<A::Payload, B::Payload>>) -> Progress {
        let max = self.opts.source_batch.max(1);
        let delay = self.opts.max_delay_ms;
        let mut wm = self.wm;
        let other = self.right_state.watermark(delay);
        let busy_left = step_side(
            &mut self.left,
            &mut self.left_state,
            &mut self.counters.left,
            max,
            &mut wm,
            other,
            delay,
            |key, time, payload| {
                out.emit(
                    mix64(key),
                    JoinRecord::Left(JoinItem { key, time, payload }),
                )
            },
        );
        let other = self.left_state.watermark(delay);
        // The live timeline counts the right side's reads (NEXMark q8 reads
        // one stream on both sides and counts each event once, the auction
        // side's).
        let read = self.counters.right.source_records;
        let busy_right = step_side(
            &mut self.right,
            &mut self.right_state,
            &mut self.counters.right,
            max,
            &mut wm,
            other,
            delay,
            |key, time, payload| {
                out.emit(
                    mix64(key),
                    JoinRecord::Right(JoinItem { key, time, payload }),
                )
            },
        );
        air_runtime::timeline::add_events(self.counters.right.source_records - read);
        let new_wm = self
            .left_state
            .watermark(delay)
            .min(self.right_state.watermark(delay));
        if self.left_state.done && self.right_state.done {
            return Progress::Done;
        }
        self.wm = wm.max(new_wm);
        if busy_left || busy_right {
            Progress::Busy
        } else {
            Progress::Idle
        }
    }

    fn watermark(&self) -> u64 {
        self.wm
    }
}

/// The downstream of a join at a key's owner: reads each record's side, key
/// and time in place, rebuilds its payload only if it is not late (see
/// [`JoinPayload`]), and feeds the [`WindowJoin`]; keeps every pair emitted.
///
/// Stored records must outlive the batch they came in (the ring frame is
/// released after `on_batch`), so each on-time payload is rebuilt once, on
/// arrival, whether or not it will ever match; a pair's payloads are cloned
/// from the tables into [`results`](Self::results).
pub struct JoinDownstream<L, R> {
    join: WindowJoin<L, R>,
    /// The pairs in emission order.
    pub results: Vec<JoinMatch<L, R>>,
    /// Latency of every pair: emit time − the newer of its two event times
    /// (ms; the YSB definition: the pair exists once its second record is
    /// in). Samples beyond the histogram's hour are not recorded.
    pub latency: Histogram<u64>,
}

impl<L, R> JoinDownstream<L, R> {
    /// A downstream joining over the tumbling windows of `spec`.
    ///
    /// # Panics
    ///
    /// If `spec` is not tumbling (see [`WindowJoin::new`]).
    pub fn new(spec: WindowSpec) -> Self {
        JoinDownstream {
            join: WindowJoin::new(spec),
            results: Vec::new(),
            latency: air_runtime::metrics::latency_histogram(),
        }
    }

    /// The join operator (its counters and state).
    pub fn join(&self) -> &WindowJoin<L, R> {
        &self.join
    }
}

impl<L, R> Downstream<JoinRecord<L, R>> for JoinDownstream<L, R>
where
    L: JoinPayload,
    R: JoinPayload,
    JoinRecord<L, R>: ExchangeData<Item = ArchivedJoinRecord<L, R>>,
{
    fn on_batch(&mut self, _from: usize, items: &[ArchivedJoinRecord<L, R>]) {
        let now = now_ms();
        let JoinDownstream {
            join,
            results,
            latency,
        } = self;
        let mut emit = |m: JoinMatch<&L, &R>| {
            let newest = m.left_time.max(m.right_time);
            let _ = latency.record(now.saturating_sub(newest).max(1));
            results.push(m.cloned());
        };
        for rec in items {
            match rec {
                ArchivedJoinRecord::Left(r) => {
                    join.insert_left_with(
                        r.key.to_native(),
                        r.time.to_native(),
                        || L::from_archived(&r.payload),
                        &mut emit,
                    );
                }
                ArchivedJoinRecord::Right(r) => {
                    join.insert_right_with(
                        r.key.to_native(),
                        r.time.to_native(),
                        || R::from_archived(&r.payload),
                        &mut emit,
                    );
                }
            }
        }
    }

    fn on_watermark(&mut self, wm: u64) {
        self.join.on_watermark(wm);
    }
}

/// What a join job produced.
pub struct JoinJobOutput<L, R, SL, SR> {
    /// Every pair, sorted by `(window_start, key, left_time, right_time)`;
    /// pairs equal in all four come in no particular order.
    pub results: Vec<JoinMatch<L, R>>,
    /// Each worker's sources (left, right), for their own counters and errors.
    pub sources: Vec<(SL, SR)>,
    /// Each worker's upstream counters.
    pub upstream: Vec<JoinCounters>,
    /// Upstream counters summed over workers (records per side, late records).
    pub totals: JoinCounters,
    /// Each worker's join operator counters.
    pub operator: Vec<WindowJoinCounters>,
    /// Join operator counters summed over workers: `matches` equals
    /// `results.len()`, and `late_left + late_right` is 0 unless the
    /// watermark protocol is broken.
    pub join: WindowJoinCounters,
    /// Each worker's channel counters.
    pub channels: Vec<ChannelMetrics>,
    /// Each worker's placement (pinned CPU, core, package, NUMA node, and
    /// where its input rings' memory is).
    pub placement: Vec<air_runtime::WorkerPlacement>,
    /// Latency over all pairs, merged across workers (ms).
    pub latency: LatencySummary,
    /// The merged latency histogram (ms), to merge further (across ranks).
    pub latency_hist: Histogram<u64>,
    /// Windows still open when the job ended (a stop by SIGINT/SIGTERM:
    /// some worker had not read past their end); their pairs are not in
    /// `results` (the window is incomplete). 0 for a job that read its
    /// whole input.
    pub unfired_windows: u64,
    /// Longest worker wall time.
    pub elapsed: Duration,
}

/// Runs a windowed join: `build` makes each worker's upstream (its shards of
/// both inputs: `left.join(right, opts)`); the [`WindowJoin`] over the
/// tumbling windows of `spec` runs at each key's owner. Errors with
/// [`RuntimeError::Setup`] if `spec` is not tumbling.
#[allow(clippy::type_complexity)] // the output's four type parameters
pub fn run_join_job<A, B, F>(
    cfg: &JobConfig,
    spec: WindowSpec,
    build: F,
) -> Result<JoinJobOutput<A::Payload, B::Payload, A::Source, B::Source>, RuntimeError>
where
    A: JoinInput,
    B: JoinInput,
    A::Payload: JoinPayload,
    B::Payload: JoinPayload,
    JoinRecord<A::Payload, B::Payload>:
        ExchangeData<Item = ArchivedJoinRecord<A::Payload, B::Payload>>,
    F: Fn(&WorkerInfo) -> JoinUpstream<A, B> + Sync,
{
    if !matches!(spec, WindowSpec::Tumbling { .. }) {
        return Err(RuntimeError::Setup(format!(
            "the window join supports tumbling windows only, got {spec:?}"
        )));
    }
    let outcomes = air_runtime::run::<JoinRecord<A::Payload, B::Payload>, _, _, _>(cfg, |info| {
        (build(info), JoinDownstream::new(spec))
    })?;
    let mut results = Vec::new();
    let mut hist = air_runtime::metrics::latency_histogram();
    let mut sources = Vec::new();
    let mut upstream = Vec::new();
    let mut totals = JoinCounters::default();
    let mut operator = Vec::new();
    let mut join = WindowJoinCounters::default();
    let mut channels = Vec::new();
    let mut placement = Vec::new();
    let mut elapsed = Duration::ZERO;
    let mut unfired_windows = 0u64;
    for o in outcomes {
        let down = o.downstream;
        let _ = hist.add(&down.latency);
        let c = down.join.counters();
        join.add(&c);
        operator.push(c);
        // A window is complete once the final watermark passed its end;
        // after a stop, later windows hold only some of their pairs.
        let closed = down.join.watermark();
        unfired_windows += down.join.open_windows() as u64;
        results.extend(
            down.results
                .into_iter()
                .filter(|m| m.window_start.saturating_add(spec.size()) <= closed),
        );
        let u = o.upstream.counters();
        totals.add(&u);
        upstream.push(u);
        sources.push(o.upstream.into_sources());
        channels.push(o.channels);
        placement.push(o.info.placement.clone());
        elapsed = elapsed.max(o.elapsed);
    }
    results.sort_by_key(|m| (m.window_start, m.key, m.left_time, m.right_time));
    Ok(JoinJobOutput {
        results,
        sources,
        upstream,
        totals,
        operator,
        join,
        channels,
        placement,
        latency: LatencySummary::of(&hist),
        latency_hist: hist,
        unfired_windows,
        elapsed,
    })
}
