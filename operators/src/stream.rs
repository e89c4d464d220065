//! The graph API: a source, stateless operators fused into the worker's loop
//! (`map`, `filter`, `flat_map`), `key_by`, and a windowed aggregate whose
//! partial aggregate runs before the exchange and whose final aggregate runs
//! at the key's owner.
//!
//! ```
//! use air_operators::stream::{Stream, VecSource, WindowOptions};
//! use air_operators::window::{Aggregate, WindowSpec};
//! use air_runtime::JobConfig;
//! let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
//! let out = air_operators::stream::run_window_job(&cfg, WindowSpec::tumbling(10), Aggregate::Sum, |w| {
//!     // Each worker reads its own shard: (key, time, value) triples.
//!     let data: Vec<(u64, u64, i64)> = (0..100u64).filter(|i| i % 2 == w.index as u64).map(|i| (i % 3, i, 1)).collect();
//!     Stream::source(VecSource::new(data))
//!         .filter(|&(k, _, _)| k != 2)
//!         .map(|(k, t, v)| (k, t, v * 10))
//!         .key_by(|r: &(u64, u64, i64)| r.0)
//!         .window(|r| r.1, |r| r.2, WindowOptions::default())
//! }).unwrap();
//! let total: i64 = out.results.iter().map(|r| r.state.sum).sum();
//! assert_eq!(total, 10 * (0..100).filter(|i| i % 3 != 2).count() as i64);
//! ```

use crate::window::{
    mix64, AggState, Aggregate, KeyedEvent, WindowPartial, WindowResult, WindowSpec, WindowTable,
};
use air_runtime::{
    ChannelMetrics, Downstream, Emitter, ExchangeData, JobConfig, LatencySummary, Progress,
    RuntimeError, Upstream, WorkerInfo,
};
use hdrhistogram::Histogram;
use std::marker::PhantomData;
use std::time::Duration;

pub use air_runtime::dataflow::{Source, SourcePoll, VecSource};

/// A chain of fused stateless operators from `In` to `Self::Out`.
pub trait Pipe<In>: Send {
    /// Output record type.
    type Out;
    /// Pushes `x` through the chain, calling `emit` for every output.
    fn run<E: FnMut(Self::Out)>(&mut self, x: In, emit: &mut E);
}

/// The empty chain.
pub struct Identity;

impl<T> Pipe<T> for Identity {
    type Out = T;
    #[inline(always)]
    fn run<E: FnMut(T)>(&mut self, x: T, emit: &mut E) {
        emit(x)
    }
}

/// `map`: one output per input.
pub struct Map<P, F, O>(P, F, PhantomData<fn() -> O>);

impl<In, P: Pipe<In>, F: FnMut(P::Out) -> O + Send, O> Pipe<In> for Map<P, F, O> {
    type Out = O;
    #[inline(always)]
    fn run<E: FnMut(O)>(&mut self, x: In, emit: &mut E) {
        let f = &mut self.1;
        self.0.run(x, &mut |y| emit(f(y)))
    }
}

/// `filter`: keeps inputs for which the predicate holds.
pub struct Filter<P, F>(P, F);

impl<In, P: Pipe<In>, F: FnMut(&P::Out) -> bool + Send> Pipe<In> for Filter<P, F> {
    type Out = P::Out;
    #[inline(always)]
    fn run<E: FnMut(P::Out)>(&mut self, x: In, emit: &mut E) {
        let f = &mut self.1;
        self.0.run(x, &mut |y| {
            if f(&y) {
                emit(y)
            }
        })
    }
}

/// `flat_map` (split): zero or more outputs per input.
pub struct FlatMap<P, F, I>(P, F, PhantomData<fn() -> I>);

impl<In, P: Pipe<In>, F: FnMut(P::Out) -> I + Send, I: IntoIterator> Pipe<In> for FlatMap<P, F, I> {
    type Out = I::Item;
    #[inline(always)]
    fn run<E: FnMut(I::Item)>(&mut self, x: In, emit: &mut E) {
        let f = &mut self.1;
        self.0.run(x, &mut |y| {
            for z in f(y) {
                emit(z)
            }
        })
    }
}

/// Two chains fused one after the other (see [`Stream::pipe`]).
pub struct Then<P, Q>(P, Q);

impl<P, Q> Then<P, Q> {
    /// The second chain.
    pub fn second(&self) -> &Q {
        &self.1
    }
}

impl<In, P: Pipe<In>, Q: Pipe<P::Out>> Pipe<In> for Then<P, Q> {
    type Out = Q::Out;
    #[inline(always)]
    fn run<E: FnMut(Q::Out)>(&mut self, x: In, emit: &mut E) {
        let q = &mut self.1;
        self.0.run(x, &mut |y| q.run(y, emit))
    }
}

/// A source with fused stateless operators.
pub struct Stream<S, P> {
    source: S,
    pipe: P,
}

impl<S: Source> Stream<S, Identity> {
    /// A stream from `source`.
    pub fn source(source: S) -> Self {
        Stream {
            source,
            pipe: Identity,
        }
    }
}

impl<S: Source, P: Pipe<S::Item>> Stream<S, P> {
    /// Applies `f` to every record.
    pub fn map<O, F: FnMut(P::Out) -> O + Send>(self, f: F) -> Stream<S, Map<P, F, O>> {
        Stream {
            source: self.source,
            pipe: Map(self.pipe, f, PhantomData),
        }
    }

    /// Keeps the records for which `f` holds.
    pub fn filter<F: FnMut(&P::Out) -> bool + Send>(self, f: F) -> Stream<S, Filter<P, F>> {
        Stream {
            source: self.source,
            pipe: Filter(self.pipe, f),
        }
    }

    /// Replaces every record by zero or more records (e.g. `Option`, `Vec`).
    pub fn flat_map<I: IntoIterator, F: FnMut(P::Out) -> I + Send>(
        self,
        f: F,
    ) -> Stream<S, FlatMap<P, F, I>> {
        Stream {
            source: self.source,
            pipe: FlatMap(self.pipe, f, PhantomData),
        }
    }

    /// Appends a custom fused operator (any [`Pipe`]), e.g. one that keeps
    /// its own counters, readable after the job through
    /// [`WindowJobOutput::pipes`].
    pub fn pipe<Q: Pipe<P::Out>>(self, q: Q) -> Stream<S, Then<P, Q>> {
        Stream {
            source: self.source,
            pipe: Then(self.pipe, q),
        }
    }

    /// Partitions by `key` (a u64; the owner worker is `mix64(key) % workers`).
    pub fn key_by<K: Fn(&P::Out) -> u64 + Send>(self, key: K) -> Keyed<S, P, K> {
        Keyed {
            source: self.source,
            pipe: self.pipe,
            key,
        }
    }
}

/// A keyed stream.
pub struct Keyed<S, P, K> {
    source: S,
    pipe: P,
    key: K,
}

/// Options of a windowed aggregate.
#[derive(Debug, Clone, Copy)]
pub struct WindowOptions {
    /// Bounded out-of-orderness, ms: the watermark is the newest event time
    /// seen minus this. An event older than the watermark is late: it is
    /// dropped and counted in `late_records` (never silently).
    pub max_delay_ms: u64,
    /// Records taken from the source per step.
    pub source_batch: usize,
}

impl Default for WindowOptions {
    fn default() -> Self {
        WindowOptions {
            max_delay_ms: 0,
            source_batch: 1024,
        }
    }
}

impl<S: Source, P: Pipe<S::Item>, K: Fn(&P::Out) -> u64 + Send> Keyed<S, P, K> {
    /// This keyed stream as one side of a windowed join, at event time `time`
    /// (ms); see [`crate::join::JoinSide::join`].
    pub fn join_side<TF: Fn(&P::Out) -> u64 + Send>(
        self,
        time: TF,
    ) -> crate::join::JoinSide<S, P, K, TF> {
        crate::join::JoinSide::with_pipe(self.source, self.pipe, self.key, time)
    }

    /// A windowed aggregate over this keyed stream: `time` gives a record's
    /// event time (ms), `value` the value aggregated.
    pub fn window<TF, VF>(
        self,
        time: TF,
        value: VF,
        opts: WindowOptions,
    ) -> WindowedUpstream<S, P, K, TF, VF>
    where
        TF: Fn(&P::Out) -> u64 + Send,
        VF: Fn(&P::Out) -> i64 + Send,
    {
        WindowedUpstream {
            source: self.source,
            pipe: self.pipe,
            key: self.key,
            time,
            value,
            opts,
            spec: WindowSpec::tumbling(1),
            reduce: None,
            count_only: false,
            buf: Vec::with_capacity(opts.source_batch),
            table: WindowTable::default(),
            max_seen: 0,
            wm: 0,
            counters: UpstreamCounters::default(),
        }
    }
}

/// Counters of a worker's upstream.
#[derive(Debug, Default, Clone, Copy, serde::Serialize)]
pub struct UpstreamCounters {
    /// Records taken from the source.
    pub source_records: u64,
    /// Records that reached the window after the stateless operators.
    pub windowed_records: u64,
    /// Records older than the watermark: dropped and counted.
    pub late_records: u64,
}

/// The upstream of a windowed aggregate at one worker: source → fused
/// operators → (partial aggregate) → exchange.
pub struct WindowedUpstream<S: Source, P, K, TF, VF> {
    source: S,
    pipe: P,
    key: K,
    time: TF,
    value: VF,
    opts: WindowOptions,
    spec: WindowSpec,
    reduce: Option<fn(i64, i64) -> i64>,
    /// The aggregate is [`Aggregate::Count`]: states keep only count and
    /// newest event time.
    count_only: bool,
    buf: Vec<S::Item>,
    table: WindowTable,
    max_seen: u64,
    wm: u64,
    /// Counters.
    pub counters: UpstreamCounters,
}

impl<S: Source, P, K, TF, VF> WindowedUpstream<S, P, K, TF, VF> {
    /// The source (for its own counters and errors after the job).
    pub fn source(&self) -> &S {
        &self.source
    }

    /// The fused operator chain (for counters kept by custom [`Pipe`]s).
    pub fn pipe(&self) -> &P {
        &self.pipe
    }
}

impl<S, P, K, TF, VF> WindowedUpstream<S, P, K, TF, VF>
where
    S: Source,
    P: Pipe<S::Item>,
    K: Fn(&P::Out) -> u64 + Send,
    TF: Fn(&P::Out) -> u64 + Send,
    VF: Fn(&P::Out) -> i64 + Send,
{
    /// Takes one batch from the source through the fused operators and
    /// passes every record that reaches the window on time to `f` as
    /// `(table, key, event time ms, value)` (value 0 under
    /// [`Aggregate::Count`]); late ones are dropped and counted. Moves the
    /// watermark. Returns what the source said and how many records it gave.
    #[inline(always)]
    fn poll_windowed<const COUNT_ONLY: bool>(
        &mut self,
        mut f: impl FnMut(&mut WindowTable, u64, u64, i64),
    ) -> (SourcePoll, usize) {
        let poll = self.source.poll(&mut self.buf, self.opts.source_batch);
        let n = self.buf.len();
        self.counters.source_records += n as u64;
        air_runtime::timeline::add_events(n as u64);
        let WindowedUpstream {
            pipe,
            key,
            time,
            value,
            opts,
            count_only,
            buf,
            table,
            max_seen,
            wm,
            counters,
            ..
        } = self;
        debug_assert_eq!(COUNT_ONLY, *count_only);
        let max_delay = opts.max_delay_ms;
        let mut newest = *max_seen;
        let mut w = *wm;
        let (mut windowed, mut late) = (0u64, 0u64);
        for item in buf.iter() {
            pipe.run(item.clone(), &mut |r| {
                let t = time(&r);
                windowed += 1;
                if t < w {
                    late += 1;
                    return;
                }
                if t > newest {
                    newest = t;
                    // The watermark follows every event, so lateness is
                    // judged against all events before it, batch or not.
                    w = w.max(t.saturating_sub(max_delay));
                }
                let v = if COUNT_ONLY { 0 } else { value(&r) };
                f(table, key(&r), t, v);
            });
        }
        *max_seen = newest;
        *wm = w;
        counters.windowed_records += windowed;
        counters.late_records += late;
        (poll, n)
    }
}

/// The window (or pane) events of a tumbling aggregate last went to, and its
/// slot in the table: most events skip the division and the window search.
struct HotWindow {
    start: u64,
    end: u64,
    size: u64,
    slot: usize,
}

impl HotWindow {
    /// No window yet; windows of `size` ms.
    fn new(size: u64) -> HotWindow {
        HotWindow {
            start: u64::MAX,
            end: 0,
            size,
            slot: 0,
        }
    }

    /// Whether event time `t` is in the window held.
    #[inline(always)]
    fn contains(&self, t: u64) -> bool {
        self.start <= t && t < self.end
    }

    /// Holds no window any more (the table's slots moved: a window was
    /// created elsewhere or fired).
    fn forget(&mut self) {
        *self = HotWindow::new(self.size);
    }

    /// The slot in `table` of the window holding event time `t` (created if
    /// new). A new window may shift the others' slots, so the slot is looked
    /// up again at every switch.
    #[inline(always)]
    fn slot(&mut self, table: &mut WindowTable, t: u64) -> usize {
        if !self.contains(t) {
            self.start = t - t % self.size;
            self.end = self.start.saturating_add(self.size);
            self.slot = table.slot(self.start);
        }
        self.slot
    }
}

/// A step's progress from what the source said and how many records it gave.
fn progress(poll: SourcePoll, n: usize) -> Progress {
    match poll {
        SourcePoll::Done => Progress::Done,
        SourcePoll::Idle if n == 0 => Progress::Idle,
        _ => Progress::Busy,
    }
}

/// Pre-aggregated: each worker keeps a partial aggregate per (window, key)
/// and sends it to the key's owner when the window (or pane) closes.
impl<S, P, K, TF, VF> Upstream<WindowPartial> for WindowedUpstream<S, P, K, TF, VF>
where
    S: Source,
    P: Pipe<S::Item>,
    K: Fn(&P::Out) -> u64 + Send,
    TF: Fn(&P::Out) -> u64 + Send,
    VF: Fn(&P::Out) -> i64 + Send,
{
    fn step(&mut self, out: &mut Emitter<'_, '_, WindowPartial>) -> Progress {
        let (spec, reduce, count_only) = (self.spec, self.reduce, self.count_only);
        // Tumbling windows: remember the last window (and its table slot) so
        // most events skip the division in `assign` and the window search.
        // Sliding windows whose size is a multiple of the slide are
        // pre-aggregated per pane (a tumbling window of the slide): one table
        // update per event instead of size/slide, the windows are composed
        // from their panes when a pane closes.
        let pane = pane_of(spec);
        let tumbling = matches!(spec, WindowSpec::Tumbling { .. }) || pane.is_some();
        let step_size = pane.unwrap_or(spec.size());
        // One loop per case (the flags are not tested per event).
        let mut hot = HotWindow::new(step_size);
        let (poll, n) = match (tumbling, count_only) {
            (true, true) => self.poll_windowed::<true>(|table, k, t, _| {
                let slot = hot.slot(table, t);
                table.entry_in(slot, k).count_one(t);
            }),
            (true, false) => self.poll_windowed::<false>(|table, k, t, v| {
                let slot = hot.slot(table, t);
                table.entry_in(slot, k).merge(&AggState::one(v, t), reduce);
            }),
            (false, true) => self.poll_windowed::<true>(|table, k, t, _| {
                let one = AggState::of_event(true, 0, t);
                spec.assign(t, |s| table.entry(s, k).merge(&one, reduce));
            }),
            (false, false) => self.poll_windowed::<false>(|table, k, t, v| {
                let one = AggState::one(v, t);
                spec.assign(t, |s| table.entry(s, k).merge(&one, reduce));
            }),
        };
        let wm_now = self.wm;
        if self
            .table
            .oldest()
            .is_some_and(|s| s.saturating_add(step_size) <= wm_now)
        {
            emit_closed(&mut self.table, spec, wm_now, out);
        }
        progress(poll, n)
    }

    fn watermark(&self) -> u64 {
        self.wm
    }

    fn finish(&mut self, out: &mut Emitter<'_, '_, WindowPartial>) {
        emit_closed(&mut self.table, self.spec, u64::MAX, out);
    }
}

/// Every event exchanged: each record goes to its key's owner as a 24-byte
/// [`KeyedEvent`]; the owner assigns windows and aggregates.
impl<S, P, K, TF, VF> Upstream<KeyedEvent> for WindowedUpstream<S, P, K, TF, VF>
where
    S: Source,
    P: Pipe<S::Item>,
    K: Fn(&P::Out) -> u64 + Send,
    TF: Fn(&P::Out) -> u64 + Send,
    VF: Fn(&P::Out) -> i64 + Send,
{
    fn step(&mut self, out: &mut Emitter<'_, '_, KeyedEvent>) -> Progress {
        let emit = |_: &mut WindowTable, key, time, value| {
            out.emit(mix64(key), KeyedEvent { key, time, value })
        };
        let (poll, n) = if self.count_only {
            self.poll_windowed::<true>(emit)
        } else {
            self.poll_windowed::<false>(emit)
        };
        progress(poll, n)
    }

    fn watermark(&self) -> u64 {
        self.wm
    }

    fn finish(&mut self, _out: &mut Emitter<'_, '_, KeyedEvent>) {}
}

/// The pane (slide) of a sliding window whose size is a multiple of its
/// slide: such windows are unions of panes.
fn pane_of(spec: WindowSpec) -> Option<u64> {
    match spec {
        WindowSpec::Sliding { size_ms, slide_ms } if size_ms % slide_ms == 0 => Some(slide_ms),
        _ => None,
    }
}

/// Sends the partial aggregate of every window (or pane) that closed under
/// `watermark` to its key's owner, and forgets it here. A closed pane
/// `[p, p + slide)` goes out as a partial of every window containing it
/// (starts `p − size + slide … p` in steps of the slide, none below 0).
fn emit_closed(
    table: &mut WindowTable,
    spec: WindowSpec,
    watermark: u64,
    out: &mut Emitter<'_, '_, WindowPartial>,
) {
    match pane_of(spec) {
        None => {
            table.drain_closed(spec.size(), watermark, |s, k, st| {
                out.emit(
                    mix64(k),
                    WindowPartial {
                        key: k,
                        window_start: s,
                        state: *st,
                    },
                )
            });
        }
        Some(slide) => {
            let back = spec.size() - slide;
            table.drain_closed(slide, watermark, |p, k, st| {
                let h = mix64(k);
                let mut s = p.saturating_sub(back);
                loop {
                    out.emit(
                        h,
                        WindowPartial {
                            key: k,
                            window_start: s,
                            state: *st,
                        },
                    );
                    if s >= p {
                        break;
                    }
                    s += slide;
                }
            });
        }
    }
}

/// Milliseconds since the Unix epoch, wall clock (0 before 1970).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The downstream of a windowed aggregate: the final aggregate at the key's owner.
pub struct WindowedDownstream {
    spec: WindowSpec,
    reduce: Option<fn(i64, i64) -> i64>,
    table: WindowTable,
    fired_wm: u64,
    /// Result rows in emission order.
    pub results: Vec<WindowResult>,
    /// Latency of every row: emit time − newest event time in it (ms; the YSB definition).
    pub latency: Histogram<u64>,
    /// Partials (every-event mode: events) that arrived for an already
    /// fired window (0 unless the watermark protocol is broken).
    pub late_partials: u64,
    /// Largest watermark lag seen, ms: wall-clock time minus the input
    /// watermark when it advanced (meaningful for wall-clock event times).
    pub watermark_lag_max_ms: u64,
    /// Which rows to keep when a window fires.
    pub fire: Fire,
    /// The aggregate is [`Aggregate::Count`] (events folded in keep only
    /// count and newest event time).
    pub count_only: bool,
    /// The window events last went to (every-event mode, tumbling).
    hot: HotWindow,
}

impl WindowedDownstream {
    /// A final aggregate for `spec` (with `reduce` for `Aggregate::Reduce`).
    pub fn new(spec: WindowSpec, reduce: Option<fn(i64, i64) -> i64>) -> Self {
        WindowedDownstream {
            spec,
            reduce,
            table: WindowTable::default(),
            fired_wm: 0,
            results: Vec::new(),
            latency: air_runtime::metrics::latency_histogram(),
            late_partials: 0,
            watermark_lag_max_ms: 0,
            fire: Fire::All,
            count_only: false,
            hot: HotWindow::new(spec.size()),
        }
    }
}

impl Downstream<WindowPartial> for WindowedDownstream {
    #[inline]
    fn on_batch(&mut self, _from: usize, items: &[<WindowPartial as ExchangeData>::Item]) {
        let size = self.spec.size();
        for p in items {
            let start = p.window_start.to_native();
            if start.saturating_add(size) <= self.fired_wm {
                self.late_partials += 1;
                continue;
            }
            self.table
                .entry(start, p.key.to_native())
                .merge_archived(&p.state, self.reduce);
        }
    }

    fn on_watermark(&mut self, wm: u64) {
        self.advance(wm);
    }
}

/// Every event exchanged: the owner assigns each event's windows.
impl Downstream<KeyedEvent> for WindowedDownstream {
    #[inline]
    fn on_batch(&mut self, _from: usize, items: &[<KeyedEvent as ExchangeData>::Item]) {
        let spec = self.spec;
        let size = spec.size();
        let (reduce, count_only, fired) = (self.reduce, self.count_only, self.fired_wm);
        let tumbling = matches!(spec, WindowSpec::Tumbling { .. });
        for e in items {
            let (k, t) = (e.key.to_native(), e.time.to_native());
            if tumbling {
                if !self.hot.contains(t) && (t - t % size).saturating_add(size) <= fired {
                    self.late_partials += 1;
                    continue;
                }
                let slot = self.hot.slot(&mut self.table, t);
                let st = self.table.entry_in(slot, k);
                if count_only {
                    st.count_one(t);
                } else {
                    st.merge(&AggState::one(e.value.to_native(), t), reduce);
                }
            } else {
                let one = AggState::of_event(count_only, e.value.to_native(), t);
                let (table, late) = (&mut self.table, &mut self.late_partials);
                spec.assign(t, |s| {
                    if s.saturating_add(size) <= fired {
                        *late += 1;
                    } else {
                        table.entry(s, k).merge(&one, reduce);
                    }
                });
                // A new window may have shifted the slots.
                self.hot.forget();
            }
        }
    }

    fn on_watermark(&mut self, wm: u64) {
        self.advance(wm);
    }
}

impl WindowedDownstream {
    /// The input watermark advanced to `wm`: fires every window that ends
    /// at or before it.
    fn advance(&mut self, wm: u64) {
        self.hot.forget();
        self.fired_wm = wm;
        if wm != u64::MAX {
            self.watermark_lag_max_ms = self.watermark_lag_max_ms.max(now_ms().saturating_sub(wm));
        }
        if self
            .table
            .oldest()
            .is_none_or(|s| s.saturating_add(self.spec.size()) > wm)
        {
            return;
        }
        let now = now_ms();
        let before = self.results.len();
        let results = &mut self.results;
        let top = self.fire == Fire::TopCountPerWindow;
        // (window, best count, index of its first kept row)
        let mut cur: Option<(u64, u64, usize)> = None;
        // Per fired window, the newest event time of any key here: the
        // latency of a top row (its own newest event may be much older than
        // the window's, e.g. a NEXMark auction's bids come in one burst).
        let mut newest: Vec<(u64, u64)> = Vec::new();
        self.table.drain_closed(self.spec.size(), wm, |s, k, st| {
            match newest.last_mut() {
                Some((w, n)) if *w == s => *n = (*n).max(st.max_event_time),
                _ => newest.push((s, st.max_event_time)),
            }
            if top {
                match cur {
                    Some((w, best, _)) if w == s && st.count < best => return,
                    Some((w, best, first)) if w == s && st.count > best => {
                        results.truncate(first);
                        cur = Some((s, st.count, first));
                    }
                    Some((w, _, _)) if w == s => {}
                    _ => cur = Some((s, st.count, results.len())),
                }
            }
            results.push(WindowResult {
                window_start: s,
                key: k,
                state: *st,
                emitted_ms: now,
            });
        });
        // Latency, the YSB definition: emit time − newest event in the row;
        // top rows: one sample per window fired here, from the newest event
        // of any key in it (a kept row's own newest event may be much older
        // than the window's, e.g. a NEXMark auction's bids come in a burst;
        // and rows a larger count replaced are not results).
        let fired = &self.results[before.min(self.results.len())..];
        let samples: Vec<u64> = if top {
            newest.iter().map(|(_, n)| now.saturating_sub(*n)).collect()
        } else {
            fired
                .iter()
                .map(|r| r.emitted_ms.saturating_sub(r.state.max_event_time))
                .collect()
        };
        for &l in &samples {
            let _ = self.latency.record(l);
        }
        air_runtime::timeline::record_latency(|h| {
            for &l in &samples {
                let _ = h.record(l);
            }
        });
    }
}

/// What a windowed aggregation job produced.
pub struct WindowJobOutput<S, P> {
    /// Every result row, sorted by (window_start, key).
    pub results: Vec<WindowResult>,
    /// Each worker's source, in worker order (their counters and errors).
    pub sources: Vec<S>,
    /// Each worker's fused operator chain (custom counters), in worker order.
    pub pipes: Vec<P>,
    /// Each worker's upstream counters.
    pub upstream: Vec<UpstreamCounters>,
    /// Each worker's channel counters.
    pub channels: Vec<ChannelMetrics>,
    /// Each worker's placement (pinned CPU, core, package, NUMA node, and
    /// where its input rings' memory is).
    pub placement: Vec<air_runtime::WorkerPlacement>,
    /// Latency over all rows, merged across workers.
    pub latency: LatencySummary,
    /// The merged latency histogram (ms), to merge further (across ranks).
    pub latency_hist: hdrhistogram::Histogram<u64>,
    /// Partials (every-event mode: events) that arrived after their window
    /// fired (must be 0).
    pub late_partials: u64,
    /// The job was stopped early (SIGINT/SIGTERM, `air_runtime::stop`).
    pub stopped: bool,
    /// Windows (per owner) still open at the end of a stopped job: not
    /// fired, not in `results` (0 unless stopped).
    pub unfired_windows: u64,
    /// Each worker's largest watermark lag, ms (wall clock − input watermark).
    pub watermark_lag_max_ms: Vec<u64>,
    /// Longest worker wall time.
    pub elapsed: Duration,
}

/// Runs a windowed aggregation: `build` makes each worker's upstream (its
/// source shard and operators); the final aggregate runs at each key's owner.
pub fn run_window_job<S, P, K, TF, VF, B>(
    cfg: &JobConfig,
    spec: WindowSpec,
    agg: Aggregate,
    build: B,
) -> Result<WindowJobOutput<S, P>, RuntimeError>
where
    S: Source,
    P: Pipe<S::Item>,
    K: Fn(&P::Out) -> u64 + Send,
    TF: Fn(&P::Out) -> u64 + Send,
    VF: Fn(&P::Out) -> i64 + Send,
    B: Fn(&WorkerInfo) -> WindowedUpstream<S, P, K, TF, VF> + Sync,
{
    run_window_job_firing(cfg, spec, agg, Fire::All, build)
}

/// Which rows a key's owner keeps when a window fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fire {
    /// Every (window, key) row.
    All,
    /// Per window, only the rows with the largest count (ties kept): each
    /// owner's local top. The global top per window is the top of the
    /// owners' tops, since every (window, key) is final at one owner
    /// (NEXMark Q5's "hottest item": the caller takes that last step).
    TopCountPerWindow,
}

/// [`run_window_job`], keeping what `fire` says when a window fires (on the
/// owner's thread, so a large key space is reduced in parallel).
pub fn run_window_job_firing<S, P, K, TF, VF, B>(
    cfg: &JobConfig,
    spec: WindowSpec,
    agg: Aggregate,
    fire: Fire,
    build: B,
) -> Result<WindowJobOutput<S, P>, RuntimeError>
where
    S: Source,
    P: Pipe<S::Item>,
    K: Fn(&P::Out) -> u64 + Send,
    TF: Fn(&P::Out) -> u64 + Send,
    VF: Fn(&P::Out) -> i64 + Send,
    B: Fn(&WorkerInfo) -> WindowedUpstream<S, P, K, TF, VF> + Sync,
{
    run_window_job_as::<WindowPartial, _, _, _, _, _, _>(cfg, spec, agg, fire, build)
}

/// [`run_window_job`] without pre-aggregation: every record crosses the
/// exchange to its key's owner as a [`KeyedEvent`] (24 bytes), and the owner
/// assigns its windows (`air run ysb --shuffle`: the channel-bound mode).
/// Same results as [`run_window_job`].
pub fn run_window_job_every_event<S, P, K, TF, VF, B>(
    cfg: &JobConfig,
    spec: WindowSpec,
    agg: Aggregate,
    build: B,
) -> Result<WindowJobOutput<S, P>, RuntimeError>
where
    S: Source,
    P: Pipe<S::Item>,
    K: Fn(&P::Out) -> u64 + Send,
    TF: Fn(&P::Out) -> u64 + Send,
    VF: Fn(&P::Out) -> i64 + Send,
    B: Fn(&WorkerInfo) -> WindowedUpstream<S, P, K, TF, VF> + Sync,
{
    run_window_job_as::<KeyedEvent, _, _, _, _, _, _>(cfg, spec, agg, Fire::All, build)
}

/// A windowed aggregation job whose exchange carries `T`: [`WindowPartial`]s
/// (pre-aggregated) or [`KeyedEvent`]s (every event).
fn run_window_job_as<T, S, P, K, TF, VF, B>(
    cfg: &JobConfig,
    spec: WindowSpec,
    agg: Aggregate,
    fire: Fire,
    build: B,
) -> Result<WindowJobOutput<S, P>, RuntimeError>
where
    T: ExchangeData,
    S: Source,
    P: Pipe<S::Item>,
    K: Fn(&P::Out) -> u64 + Send,
    TF: Fn(&P::Out) -> u64 + Send,
    VF: Fn(&P::Out) -> i64 + Send,
    B: Fn(&WorkerInfo) -> WindowedUpstream<S, P, K, TF, VF> + Sync,
    WindowedUpstream<S, P, K, TF, VF>: Upstream<T>,
    WindowedDownstream: Downstream<T>,
{
    let reduce = match agg {
        Aggregate::Reduce(f) => Some(f),
        _ => None,
    };
    let count_only = matches!(agg, Aggregate::Count);
    let outcomes = air_runtime::run::<T, _, _, _>(cfg, |info| {
        let mut up = build(info);
        up.spec = spec;
        up.reduce = reduce;
        up.count_only = count_only;
        let mut down = WindowedDownstream::new(spec, reduce);
        down.fire = fire;
        down.count_only = count_only;
        (up, down)
    })?;
    let mut results = Vec::new();
    let mut hist = air_runtime::metrics::latency_histogram();
    let mut sources = Vec::new();
    let mut pipes = Vec::new();
    let mut upstream = Vec::new();
    let mut channels = Vec::new();
    let mut placement = Vec::new();
    let mut late_partials = 0;
    let mut stopped = false;
    let mut unfired_windows = 0u64;
    let mut watermark_lag_max_ms = Vec::new();
    let mut elapsed = Duration::ZERO;
    for o in outcomes {
        results.extend_from_slice(&o.downstream.results);
        let _ = hist.add(&o.downstream.latency);
        late_partials += o.downstream.late_partials;
        stopped |= o.stopped;
        unfired_windows += o.downstream.table.len() as u64;
        watermark_lag_max_ms.push(o.downstream.watermark_lag_max_ms);
        upstream.push(o.upstream.counters);
        sources.push(o.upstream.source);
        pipes.push(o.upstream.pipe);
        channels.push(o.channels);
        placement.push(o.info.placement.clone());
        elapsed = elapsed.max(o.elapsed);
    }
    results.sort_unstable_by_key(|r| (r.window_start, r.key));
    Ok(WindowJobOutput {
        results,
        sources,
        pipes,
        upstream,
        channels,
        placement,
        latency: LatencySummary::of(&hist),
        latency_hist: hist,
        late_partials,
        stopped,
        unfired_windows,
        watermark_lag_max_ms,
        elapsed,
    })
}
