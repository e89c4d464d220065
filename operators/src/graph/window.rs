//! Event-time windows over a keyed stream: tumbling and sliding, with an
//! [`AggregateFunction`]; pre-aggregated before the exchange (each worker
//! sends one partial accumulator per window and key to the key's owner when
//! its watermark passes the window's end) or every record exchanged.
//!
//! ```
//! use air_operators::graph::*;
//! use air_runtime::dataflow::{run_graph, VecSource};
//! use air_runtime::JobConfig;
//! use std::sync::{Arc, Mutex};
//!
//! let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
//! let rows = Arc::new(Mutex::new(Vec::new()));
//! let out = rows.clone();
//! run_graph(&cfg, move |df| {
//!     // (user, time ms): worker w reads every other event.
//!     let clicks: Vec<(u32, u64)> = (0..40u64)
//!         .filter(|i| i % 2 == df.index() as u64)
//!         .map(|i| ((i % 3) as u32, i * 100))
//!         .collect();
//!     let out = out.clone();
//!     df.source(VecSource::new(clicks))
//!         .event_time(|c| c.1, 0)
//!         .key_by(|c| c.0)
//!         .window(Tumbling::ms(1000), |c| c.1)
//!         .aggregate(Count)
//!         .for_each(move |r| out.lock().unwrap().push((r.start, r.key, r.value)));
//! })
//! .unwrap();
//! let mut rows = rows.lock().unwrap().clone();
//! rows.sort();
//! // 4 windows of 10 clicks; users 0, 1, 2 get 4, 3, 3 of the first window's.
//! assert_eq!(rows.len(), 12);
//! assert_eq!(rows[0..3], [(0, 0, 4), (0, 1, 3), (0, 2, 3)]);
//! ```

use super::aggregate::AggregateFunction;
use super::late::{gate_for, Gate, LatePolicy, OnTime};
use air_runtime::dataflow::{
    Cx, Dataflow, Head, KeyedStream, Op2Head, OpHead, Outbox, Pipe, Stats, Stream, Tail,
};
use air_runtime::{key_hash, ExchangeData, Record};
use rkyv::{Archive, Deserialize, Serialize};
use rustc_hash::FxHashMap;
use std::hash::Hash;

use super::window_owner::Core;
pub use super::window_owner::{WindowEveryEvent, WindowFinal};
use super::window_partial::{Judged, PartialTail, SplitTail};
pub use super::windows::{Sliding, Tumbling, WindowSpec, Windows};
use air_runtime::hotkeys::HotGroups;

/// A window's result for one key.
#[derive(
    Debug, Clone, PartialEq, Archive, Serialize, Deserialize, serde::Serialize, serde::Deserialize,
)]
pub struct Windowed<K, V> {
    /// Window start, ms of event time.
    pub start: u64,
    /// Window end (exclusive), ms.
    pub end: u64,
    /// The key.
    pub key: K,
    /// The aggregate's result.
    pub value: V,
}

/// A row that belongs to a window (for [`super::TopNExt::top_n`],
/// [`super::MaxByWindowExt::max_by_window`] and
/// [`super::CollectByWindowExt::collect_by_window`]).
pub trait WindowRow {
    /// Its window's end (exclusive), ms: the row is final once the watermark
    /// passes it.
    fn window_end(&self) -> u64;
}

impl<K, V> WindowRow for Windowed<K, V> {
    fn window_end(&self) -> u64 {
        self.end
    }
}

/// A partial aggregate of one window and key, on its way to the key's owner.
#[derive(Debug, Clone, Archive, Serialize, Deserialize)]
pub struct Partial<K, A> {
    /// Window start, ms.
    pub start: u64,
    /// Newest event time folded in, ms (for latency).
    pub newest: u64,
    /// The key.
    pub key: K,
    /// The accumulator.
    pub acc: A,
}

pub(crate) struct Slot<A> {
    pub(crate) acc: A,
    pub(crate) newest: u64,
}

/// A window's table of keys.
pub trait KeyMap<K, V>: 'static {
    /// An empty table with room for `n` keys.
    fn with_capacity(n: usize) -> Self;
    /// The value of `k`, inserted with `f` if absent.
    fn get_or_insert_with(&mut self, k: K, f: impl FnOnce() -> V) -> &mut V;
    /// Keys held.
    fn len(&self) -> usize;
    /// Whether it holds no key.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Every (key, value), in no particular order.
    fn into_entries(self) -> impl Iterator<Item = (K, V)>;
    /// Calls `f` on every (key, value), in no particular order.
    fn for_each_entry(&self, f: impl FnMut(&K, &V));
}

impl<K: Hash + Eq + 'static, V: 'static> KeyMap<K, V> for FxHashMap<K, V> {
    fn with_capacity(n: usize) -> Self {
        let mut m = FxHashMap::default();
        m.reserve(n);
        m
    }
    #[inline(always)]
    fn get_or_insert_with(&mut self, k: K, f: impl FnOnce() -> V) -> &mut V {
        self.entry(k).or_insert_with(f)
    }
    fn len(&self) -> usize {
        FxHashMap::len(self)
    }
    fn into_entries(self) -> impl Iterator<Item = (K, V)> {
        self.into_iter()
    }
    fn for_each_entry(&self, mut f: impl FnMut(&K, &V)) {
        for (k, v) in self {
            f(k, v)
        }
    }
}

/// Keys that are small integers: a window's table can be an array indexed
/// by the key ([`WindowedStream::dense_keys`]).
pub trait DenseKey: Copy + Hash + Eq + 'static {
    /// The array index of the key.
    fn index(self) -> usize;
    /// The key at array index `i`.
    fn from_index(i: usize) -> Self;
}

macro_rules! dense_key {
    ($($t:ty),*) => {$(
        impl DenseKey for $t {
            #[inline(always)]
            fn index(self) -> usize { self as usize }
            #[inline(always)]
            fn from_index(i: usize) -> Self { i as $t }
        }
    )*};
}
dense_key!(u8, u16, u32, u64, usize);

/// A window's table as an array indexed by the key (grown to the largest
/// key seen): no hashing on the hot path.
pub struct DenseMap<K, V> {
    slots: Vec<Option<V>>,
    len: usize,
    _k: std::marker::PhantomData<fn() -> K>,
}

/// The largest key [`WindowedStream::dense_keys`] accepts (2^24 − 1): its
/// arrays hold one slot per key up to the largest.
pub const MAX_DENSE_KEY: usize = (1 << 24) - 1;

impl<K, V> DenseMap<K, V> {
    #[cold]
    fn grow(&mut self, i: usize) {
        assert!(
            i <= MAX_DENSE_KEY,
            "dense_keys(): key {i} exceeds {MAX_DENSE_KEY}; use hash tables (drop dense_keys) \
             for large or sparse keys"
        );
        self.slots.resize_with(i + 1, || None);
    }
}

impl<K: DenseKey, V: 'static> KeyMap<K, V> for DenseMap<K, V> {
    fn with_capacity(n: usize) -> Self {
        DenseMap {
            slots: Vec::with_capacity(n),
            len: 0,
            _k: std::marker::PhantomData,
        }
    }
    #[inline(always)]
    fn get_or_insert_with(&mut self, k: K, f: impl FnOnce() -> V) -> &mut V {
        let i = k.index();
        if i >= self.slots.len() {
            self.grow(i);
        }
        let s = &mut self.slots[i];
        if s.is_none() {
            self.len += 1;
        }
        s.get_or_insert_with(f)
    }
    fn len(&self) -> usize {
        self.len
    }
    fn into_entries(self) -> impl Iterator<Item = (K, V)> {
        self.slots
            .into_iter()
            .enumerate()
            .filter_map(|(i, v)| v.map(|v| (K::from_index(i), v)))
    }
    fn for_each_entry(&self, mut f: impl FnMut(&K, &V)) {
        for (i, v) in self.slots.iter().enumerate() {
            if let Some(v) = v {
                f(&K::from_index(i), v)
            }
        }
    }
}

/// Which table a window keeps its keys in.
pub trait MapKind<K>: 'static {
    /// The table of values `V`.
    type Map<V: 'static>: KeyMap<K, V>;
}

/// Hash tables (any key).
#[derive(Debug, Clone, Copy)]
pub struct Hashed;

impl<K: Hash + Eq + 'static> MapKind<K> for Hashed {
    type Map<V: 'static> = FxHashMap<K, V>;
}

/// Arrays indexed by the key (small integer keys).
#[derive(Debug, Clone, Copy)]
pub struct Dense;

impl<K: DenseKey> MapKind<K> for Dense {
    type Map<V: 'static> = DenseMap<K, V>;
}

/// Open windows, oldest first, each a table of keys.
pub(crate) struct Table<K, A: 'static, M: MapKind<K>> {
    pub(crate) windows: Vec<(u64, M::Map<Slot<A>>)>,
    /// Capacity a new window's table reserves (the largest closed one's).
    reserve: usize,
}

impl<K, A: 'static, M: MapKind<K>> Table<K, A, M> {
    pub(crate) fn new() -> Self {
        Table {
            windows: Vec::new(),
            reserve: 0,
        }
    }

    /// Index of window `start` (created if new; may shift later indices).
    #[inline]
    pub(crate) fn index(&mut self, start: u64) -> usize {
        match self.windows.binary_search_by_key(&start, |w| w.0) {
            Ok(i) => i,
            Err(i) => {
                self.windows
                    .insert(i, (start, M::Map::with_capacity(self.reserve)));
                i
            }
        }
    }

    /// Hands every window ending at or before `wm` (`start + len <= wm`),
    /// oldest first, to `f`, and forgets it.
    pub(crate) fn drain_closed(
        &mut self,
        len: u64,
        wm: u64,
        mut f: impl FnMut(u64, M::Map<Slot<A>>),
    ) {
        let n = self
            .windows
            .iter()
            .take_while(|w| w.0.saturating_add(len) <= wm)
            .count();
        for (start, m) in self.windows.drain(..n) {
            self.reserve = self.reserve.max(m.len());
            f(start, m);
        }
    }
}

/// A keyed stream cut into event-time windows: `aggregate` follows.
/// `W` is the kind of windows ([`Windows`] or [`super::Sessions`]), `L`
/// what happens to late records ([`OnTime`], the default, [`super::Lateness`]
/// or [`super::BehindWatermark`]).
pub struct WindowedStream<H, P, KF, TF, M = Hashed, W = Windows, L = OnTime> {
    pub(crate) keyed: KeyedStream<H, P, KF>,
    pub(crate) windows: W,
    pub(crate) time: TF,
    pub(crate) late: L,
    /// One latency sample per window and owner instead of one per row.
    pub(crate) latency_per_window: bool,
    pub(crate) _m: std::marker::PhantomData<M>,
}

impl<H: Head, P: Pipe<H::Out>, KF, TF, M, W, L> WindowedStream<H, P, KF, TF, M, W, L> {
    /// The graph of the stream.
    pub(crate) fn keyed_dataflow(&self) -> &Dataflow {
        self.keyed.dataflow()
    }

    /// The same stream with its lateness setting replaced.
    pub(crate) fn map_late<L2>(
        self,
        f: impl FnOnce(L) -> L2,
    ) -> WindowedStream<H, P, KF, TF, M, W, L2> {
        WindowedStream {
            keyed: self.keyed,
            windows: self.windows,
            time: self.time,
            late: f(self.late),
            latency_per_window: self.latency_per_window,
            _m: std::marker::PhantomData,
        }
    }
}

/// Windows on a keyed stream.
pub trait KeyedWindowExt<H: Head, P: Pipe<H::Out>, KF> {
    /// Cuts the stream into `windows` ([`Tumbling`], [`Sliding`] or
    /// [`super::Sessions`]) by event time `time(record)` (ms). Examples:
    /// the [module](self) (tumbling), [`Sliding::ms`], [`super::session`].
    fn window<W, TF>(self, windows: W, time: TF) -> WindowedStream<H, P, KF, TF, Hashed, W>
    where
        W: WindowSpec,
        TF: Fn(&P::Out) -> u64 + Clone + 'static;
}

impl<H: Head, P: Pipe<H::Out>, KF> KeyedWindowExt<H, P, KF> for KeyedStream<H, P, KF> {
    fn window<W, TF>(self, windows: W, time: TF) -> WindowedStream<H, P, KF, TF, Hashed, W>
    where
        W: WindowSpec,
        TF: Fn(&P::Out) -> u64 + Clone + 'static,
    {
        if let Err(e) = windows.check() {
            self.dataflow().fail(e);
        }
        WindowedStream {
            keyed: self,
            windows,
            time,
            latency_per_window: false,
            late: OnTime,
            _m: std::marker::PhantomData,
        }
    }
}

impl<H, P, KF, TF, L> WindowedStream<H, P, KF, TF, Hashed, Windows, L> {
    /// Keeps each window's keys in an array indexed by the key instead of a
    /// hash table: for small integer keys (e.g. dense ids below a few
    /// thousand), no hashing per record. Same rows. A key above
    /// [`MAX_DENSE_KEY`] stops the job (worker panic naming it).
    ///
    /// ```
    /// use air_operators::graph::*;
    /// use air_runtime::dataflow::{run_graph, VecSource};
    /// use air_runtime::JobConfig;
    /// use std::sync::{Arc, Mutex};
    ///
    /// let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
    /// let rows = Arc::new(Mutex::new(Vec::new()));
    /// let out = rows.clone();
    /// run_graph(&cfg, move |df| {
    ///     // (campaign index, time ms): worker w reads every other view.
    ///     let views: Vec<(u32, u64)> = [(3, 10), (0, 20), (3, 30), (7, 1_500)]
    ///         .into_iter()
    ///         .skip(df.index())
    ///         .step_by(2)
    ///         .collect();
    ///     let out = out.clone();
    ///     df.source(VecSource::new(views))
    ///         .event_time(|v| v.1, 0)
    ///         .key_by(|v| v.0)
    ///         .window(Tumbling::ms(1_000), |v| v.1)
    ///         .dense_keys() // each window's table: an array indexed by campaign
    ///         .aggregate(Count)
    ///         .for_each(move |r| out.lock().unwrap().push((r.start, r.key, r.value)));
    /// })
    /// .unwrap();
    /// let mut rows = rows.lock().unwrap().clone();
    /// rows.sort();
    /// assert_eq!(rows, [(0, 0, 1), (0, 3, 2), (1_000, 7, 1)]);
    /// ```
    pub fn dense_keys(self) -> WindowedStream<H, P, KF, TF, Dense, Windows, L> {
        WindowedStream {
            keyed: self.keyed,
            windows: self.windows,
            time: self.time,
            latency_per_window: self.latency_per_window,
            late: self.late,
            _m: std::marker::PhantomData,
        }
    }
}

impl<H, P, KF, TF, M, W, L> WindowedStream<H, P, KF, TF, M, W, L> {
    /// Measures latency once per window at each key's owner instead of once
    /// per row: emit time − the newest event time of any key of the window
    /// there (the YSB definition for the window as a whole). For rows that
    /// feed a top-N or a max per window (NEXMark's hottest auctions), where
    /// the rows kept may hold only old events while the window is as recent
    /// as its newest event. Same rows.
    ///
    /// ```
    /// use air_operators::graph::*;
    /// use air_runtime::dataflow::{run_graph, VecSource};
    /// use air_runtime::JobConfig;
    /// use std::time::{SystemTime, UNIX_EPOCH};
    ///
    /// // Event times of now (latencies are emit time − event time).
    /// let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
    /// let minute = now - now % 60_000;
    /// let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
    /// let out = run_graph(&cfg, move |df| {
    ///     // 10 keys in one window; worker w reads every other event.
    ///     let events: Vec<(u32, u64)> =
    ///         (0..10).map(|k| (k, minute + k as u64)).skip(df.index()).step_by(2).collect();
    ///     df.source(VecSource::new(events))
    ///         .key_by(|e| e.0)
    ///         .window(Tumbling::ms(60_000), |e| e.1)
    ///         .latency_per_window()
    ///         .aggregate(Count)
    ///         .for_each(|_| {});
    /// })
    /// .unwrap();
    /// assert_eq!(out.stats.get("window_rows"), 10);
    /// // One sample per window at each owner of its keys, not one per row.
    /// assert!((1..=2).contains(&out.stats.latency.len()));
    /// ```
    pub fn latency_per_window(mut self) -> Self {
        self.latency_per_window = true;
        self
    }
}

impl<H, P, KF, TF, K, M, L> WindowedStream<H, P, KF, TF, M, Windows, L>
where
    H: Head,
    P: Pipe<H::Out>,
    P::Out: 'static,
    K: Record + Hash + Eq,
    KF: Fn(&P::Out) -> K + Clone + 'static,
    TF: Fn(&P::Out) -> u64 + Clone + 'static,
    M: MapKind<K>,
    L: LatePolicy<K, P::Out>,
{
    /// Aggregates each window and key with `agg`: one [`Windowed`] row per
    /// window and key, emitted at the key's owner when the watermark passes
    /// the window's end. Each worker pre-aggregates its records (one
    /// accumulator per window and key) and sends the accumulators when its
    /// watermark passes the window's end; the owner merges them. With
    /// allowed lateness ([`WindowedStream::allowed_lateness`]) a worker
    /// sends a window's partial again (of the records that came after it
    /// sent it) and the owner fires the window again (see
    /// [`super::late`]); sliding windows are then kept per window, not per
    /// pane.
    ///
    /// ```
    /// use air_operators::graph::*;
    /// use air_runtime::dataflow::{run_graph, VecSource};
    /// use air_runtime::JobConfig;
    /// use std::sync::{Arc, Mutex};
    ///
    /// let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
    /// let rows = Arc::new(Mutex::new(Vec::new()));
    /// let out = rows.clone();
    /// run_graph(&cfg, move |df| {
    ///     // (user, time ms, spent): worker w reads every other purchase.
    ///     let buys: Vec<(u32, u64, u64)> = [(1, 100, 5), (2, 200, 7), (1, 900, 3), (1, 1_100, 4)]
    ///         .into_iter()
    ///         .skip(df.index())
    ///         .step_by(2)
    ///         .collect();
    ///     let out = out.clone();
    ///     df.source(VecSource::new(buys))
    ///         .event_time(|b| b.1, 0)
    ///         .key_by(|b| b.0)
    ///         .window(Tumbling::ms(1_000), |b| b.1)
    ///         .aggregate((Count, Sum::of(|b: &(u32, u64, u64)| b.2))) // a tuple: both
    ///         .for_each(move |r| out.lock().unwrap().push((r.start, r.key, r.value)));
    /// })
    /// .unwrap();
    /// let mut rows = rows.lock().unwrap().clone();
    /// rows.sort();
    /// assert_eq!(rows, [(0, 1, (2, 8)), (0, 2, (1, 7)), (1_000, 1, (1, 4))]);
    /// ```
    #[allow(clippy::type_complexity)]
    #[track_caller]
    pub fn aggregate<A>(
        self,
        agg: A,
    ) -> Stream<OpHead<WindowFinal<K, A, P::Out, M>>, air_runtime::dataflow::Identity>
    where
        A: AggregateFunction<P::Out>,
        Partial<K, A::Acc>: Record,
    {
        let label = format!("window at {}", std::panic::Location::caller());
        let WindowedStream {
            keyed,
            windows,
            time,
            late,
            latency_per_window,
            ..
        } = self;
        let (mut stream, key) = keyed.into_parts();
        let gate = gate_for(&mut stream, late);
        let lateness = gate.lateness();
        let df = stream.dataflow().clone();
        let edge = df.new_edge("window partials");
        let out = df.outbox::<Partial<K, A::Acc>>(edge);
        stream.end_in(PartialTail::<_, _, _, _, _, M, _>::new(
            out,
            key,
            time,
            agg.clone(),
            windows,
            gate,
            label,
        ));
        let mut core = Core::new(windows, agg, latency_per_window);
        core.lateness = lateness;
        df.consume(edge, WindowFinal { core })
    }
}

impl<H, P, KF, TF, K, M, L> WindowedStream<H, P, KF, TF, M, Windows, L>
where
    H: Head,
    P: Pipe<H::Out>,
    P::Out: 'static,
    K: Record + Hash + Eq,
    KF: Fn(&P::Out) -> K + Clone + 'static,
    TF: Fn(&P::Out) -> u64 + Clone + 'static,
    M: MapKind<K>,
    L: LatePolicy<K, P::Out>,
{
    /// [`WindowedStream::aggregate`] without pre-aggregation: every record
    /// goes to its key's owner, which assigns its windows (what Flink does
    /// without a combiner; the exchange carries every record). Same rows.
    /// Lateness as for [`WindowedStream::aggregate`] (see [`super::late`]
    /// for sliding windows); records within an allowed lateness are added
    /// to windows the owner keeps, which fire again.
    ///
    /// ```
    /// use air_operators::graph::*;
    /// use air_runtime::dataflow::{run_graph, VecSource};
    /// use air_runtime::JobConfig;
    /// use std::sync::{Arc, Mutex};
    ///
    /// let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
    /// let rows = Arc::new(Mutex::new(Vec::new()));
    /// let out = rows.clone();
    /// run_graph(&cfg, move |df| {
    ///     // (user, time ms): worker w reads every other click.
    ///     let clicks: Vec<(u32, u64)> = [(1, 100), (2, 200), (1, 900), (1, 1_100)]
    ///         .into_iter()
    ///         .skip(df.index())
    ///         .step_by(2)
    ///         .collect();
    ///     let out = out.clone();
    ///     df.source(VecSource::new(clicks))
    ///         .event_time(|c| c.1, 0)
    ///         .key_by(|c| c.0)
    ///         .window(Tumbling::ms(1_000), |c| c.1)
    ///         .aggregate_every_event(Count) // every click crosses to its user's owner
    ///         .for_each(move |r| out.lock().unwrap().push((r.start, r.key, r.value)));
    /// })
    /// .unwrap();
    /// let mut rows = rows.lock().unwrap().clone();
    /// rows.sort();
    /// assert_eq!(rows, [(0, 1, 2), (0, 2, 1), (1_000, 1, 1)]);
    /// ```
    #[allow(clippy::type_complexity)]
    #[track_caller]
    pub fn aggregate_every_event<A>(
        self,
        agg: A,
    ) -> Stream<Op2Head<WindowEveryEvent<K, A, P::Out, KF, TF, M>>, air_runtime::dataflow::Identity>
    where
        A: AggregateFunction<P::Out>,
        P::Out: Record,
        Partial<K, A::Acc>: Record,
    {
        let label = format!("window at {}", std::panic::Location::caller());
        let WindowedStream {
            keyed,
            windows,
            time,
            late,
            latency_per_window,
            ..
        } = self;
        let (mut stream, key) = keyed.into_parts();
        let gate = gate_for(&mut stream, late);
        let lateness = gate.lateness();
        let df = stream.dataflow().clone();
        let edge = df.new_edge("window records");
        let hot_edge = df.new_small_edge("window hot-key partials");
        let records = window_tail(
            df.outbox::<P::Out>(edge),
            key.clone(),
            time.clone(),
            windows,
            gate,
            &label,
        );
        let partials = PartialTail::<_, _, _, _, _, M, _>::new(
            df.outbox::<Partial<K, A::Acc>>(hot_edge),
            key.clone(),
            time.clone(),
            agg.clone(),
            windows,
            Judged::new(lateness),
            label.clone(),
        );
        let hot = HotGroups::new(df.key_groups(), df.rebalance());
        stream.end_in(SplitTail::new(records, partials, hot));
        let mut core = Core::new(windows, agg, latency_per_window);
        core.lateness = lateness;
        core.label = label;
        df.consume2(edge, hot_edge, WindowEveryEvent { core, key, time })
    }
}

/// Routes records to their key's owner.
pub(crate) struct KeyedTail<T, KF> {
    pub(crate) out: Outbox<T>,
    pub(crate) key: KF,
}

impl<T: ExchangeData, K: Hash, KF: Fn(&T) -> K + 'static> Tail<T> for KeyedTail<T, KF> {
    #[inline(always)]
    fn push(&mut self, item: T, cx: &mut Cx<'_, '_>) {
        let h = key_hash(&(self.key)(&item));
        self.out.push_hashed(h, item, cx);
    }
    fn watermark(&mut self, wm: u64, cx: &mut Cx<'_, '_>) {
        self.out.watermark(wm, cx)
    }
    fn tick(&mut self, cx: &mut Cx<'_, '_>) {
        self.out.flush(cx)
    }
    fn end(&mut self, final_wm: u64, cx: &mut Cx<'_, '_>) {
        self.out.end(final_wm, cx)
    }
    fn barrier(&mut self, id: u64, cx: &mut Cx<'_, '_>) {
        self.out.barrier(id, cx)
    }
    fn barrier_safe(&self) -> bool {
        true
    }
    fn report(&mut self, stats: &mut Stats) {
        stats.add("window_records", self.out.records);
    }
}

/// Routes records to their key's owner for a windowed operator there
/// (windows aggregated at the owner, windowed joins), judging lateness
/// first: a record whose windows all closed at the watermark at it (the
/// last one's end + lateness <= it) is late here (see [`super::late`]).
pub(crate) struct WindowTail<T, KF, TF, G, W = Windows> {
    pub(crate) out: Outbox<T>,
    pub(crate) key: KF,
    pub(crate) time: TF,
    pub(crate) windows: W,
    /// The last watermark this tail passed on, ms.
    pub(crate) wm: u64,
    pub(crate) gate: G,
    /// The late records' label ([`air_runtime::dataflow::LateLog`]).
    pub(crate) label: String,
}

impl<T, K, KF, TF, G, W> WindowTail<T, KF, TF, G, W>
where
    T: ExchangeData,
    K: Hash + 'static,
    KF: Fn(&T) -> K + 'static,
    TF: Fn(&T) -> u64 + 'static,
    G: Gate<K, T>,
    W: WindowSpec,
{
    /// The record, unless it is too late for all its windows at the
    /// watermark at it (then rejected by the gate: counted, side output).
    #[inline(always)]
    pub(crate) fn admit(&mut self, item: T, cx: &mut Cx<'_, '_>) -> Option<T> {
        if G::ON {
            let t = (self.time)(&item);
            let behind = self.gate.behind();
            if t < behind || t < self.wm {
                let wm = behind.max(self.wm);
                let end = self.windows.last_end(t);
                if end.saturating_add(self.gate.lateness()) <= wm {
                    let k = (self.key)(&item);
                    self.gate.reject(k, t, wm, item, cx);
                    return None;
                }
            }
        }
        Some(item)
    }
}

impl<T, K, KF, TF, G, W> Tail<T> for WindowTail<T, KF, TF, G, W>
where
    T: ExchangeData,
    K: Hash + 'static,
    KF: Fn(&T) -> K + 'static,
    TF: Fn(&T) -> u64 + 'static,
    G: Gate<K, T>,
    W: WindowSpec,
{
    #[inline(always)]
    fn push(&mut self, item: T, cx: &mut Cx<'_, '_>) {
        if let Some(item) = self.admit(item, cx) {
            let h = key_hash(&(self.key)(&item));
            self.out.push_hashed(h, item, cx);
        }
    }
    fn watermark(&mut self, wm: u64, cx: &mut Cx<'_, '_>) {
        self.wm = self.wm.max(wm);
        if G::ON {
            self.gate.watermark(wm, cx);
        }
        self.out.watermark(wm, cx)
    }
    fn tick(&mut self, cx: &mut Cx<'_, '_>) {
        if G::ON {
            self.gate.tick(cx);
        }
        self.out.flush(cx)
    }
    fn end(&mut self, final_wm: u64, cx: &mut Cx<'_, '_>) {
        if G::ON {
            self.gate.end(final_wm, cx);
        }
        self.out.end(final_wm, cx)
    }
    fn barrier(&mut self, id: u64, cx: &mut Cx<'_, '_>) {
        if G::ON {
            self.gate.barrier(id, cx);
        }
        self.out.barrier(id, cx)
    }
    fn barrier_safe(&self) -> bool {
        true
    }
    fn report(&mut self, stats: &mut Stats) {
        stats.add("window_records", self.out.records);
        self.gate.report(stats, &self.label);
    }
}

/// A [`WindowTail`] for a windowed operator at the owners (joins,
/// sessions).
pub(crate) fn window_tail<T, KF, TF, G, W>(
    out: Outbox<T>,
    key: KF,
    time: TF,
    windows: W,
    gate: G,
    label: &str,
) -> WindowTail<T, KF, TF, G, W> {
    WindowTail {
        out,
        key,
        time,
        windows,
        wm: 0,
        gate,
        label: label.to_string(),
    }
}
