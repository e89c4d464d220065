//! Joins of two keyed streams: a windowed join (every pair of records with
//! one key in one tumbling or sliding window, emitted when the window
//! closes) and an interval join (every pair with one key whose event times
//! differ by a bounded amount, emitted as soon as both are there). The two
//! sides' keys must have one type; the join's watermark is the minimum of
//! its two inputs'.
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
//!     let mine = |v: Vec<(u32, u64)>| -> Vec<(u32, u64)> {
//!         v.into_iter().filter(|r| r.0 as usize % 2 == df.index()).collect()
//!     };
//!     // (order id, time) and (order id, time)
//!     let orders = df.source(VecSource::new(mine(vec![(1, 100), (2, 200), (3, 4_900)])))
//!         .event_time(|o| o.1, 0);
//!     let payments = df.source(VecSource::new(mine(vec![(1, 900), (3, 5_100), (2, 300)])))
//!         .event_time(|p| p.1, 0);
//!     let out = out.clone();
//!     orders
//!         .key_by(|o| o.0)
//!         .join(payments.key_by(|p| p.0))
//!         .window(Tumbling::ms(5_000), |o| o.1, |p| p.1)
//!         .for_each(move |j| out.lock().unwrap().push((j.start, j.key, j.left.1, j.right.1)));
//! })
//! .unwrap();
//! let mut rows = rows.lock().unwrap().clone();
//! rows.sort();
//! // Order 3 and its payment fall in different windows: no pair.
//! assert_eq!(rows, [(0, 1, 100, 900), (0, 2, 200, 300)]);
//! ```

use super::late::{BehindWatermark, LatePolicy, LateRecord, LateStream, Lateness, SideOut};
use super::window::{window_tail, KeyedTail, Windows};
use air_runtime::dataflow::{
    state, Head, Identity, KeyedStream, LateRecords, Op2Head, Operator2, Pipe, Stats, Stream,
};
use air_runtime::{ExchangeData, Record};
use rkyv::{Archive, Deserialize, Serialize};
use rustc_hash::FxHashMap;
use std::any::Any;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::hash::Hash;
use std::rc::Rc;

/// A pair of records with one key in one window.
#[derive(
    Debug, Clone, PartialEq, Archive, Serialize, Deserialize, serde::Serialize, serde::Deserialize,
)]
pub struct Joined<K, A, B> {
    /// Window start, ms (for an interval join: the left record's time).
    pub start: u64,
    /// Window end (exclusive), ms (for an interval join: the newer time + 1).
    pub end: u64,
    /// The key.
    pub key: K,
    /// The left record.
    pub left: A,
    /// The right record.
    pub right: B,
}

impl<K, A, B> Joined<K, A, B> {
    /// The pair's event time, ms: `end - 1` (a window join: the window's
    /// last millisecond; an interval join: the newer record's time). A
    /// window after a join should use it: the join emits a pair before its
    /// watermark passes this time, so the pair is never late there (the
    /// left record's time of an interval join may already be).
    pub fn time(&self) -> u64 {
        self.end.saturating_sub(1)
    }
}

impl<K, A, B> super::window::WindowRow for Joined<K, A, B> {
    fn window_end(&self) -> u64 {
        self.end
    }
}

/// Two keyed streams to join.
pub struct JoinedStreams<L, R> {
    left: L,
    right: R,
    /// Allowed lateness of a windowed join, ms.
    lateness: u64,
    /// Records behind their source's watermark are late even if their
    /// window is open ([`JoinedStreams::drop_behind_watermark`]).
    strict: bool,
    /// The side streams of late records, left and right
    /// (`Box<dyn SideOut<K, A>>`, `Box<dyn SideOut<K, B>>`), from
    /// [`JoinedStreams::side_output_late`].
    sides: Option<(Box<dyn Any>, Box<dyn Any>)>,
}

/// Joins on a keyed stream.
pub trait JoinExt: Sized {
    /// This stream (left) with `right`, on equal keys: `window` or
    /// `interval` follows.
    fn join<R>(self, right: R) -> JoinedStreams<Self, R> {
        JoinedStreams {
            left: self,
            right,
            lateness: 0,
            strict: false,
            sides: None,
        }
    }
}

impl<H, P, KF> JoinExt for KeyedStream<H, P, KF> {}

type JoinOut<Op> = Stream<Op2Head<Op>, Identity>;

impl<H1, P1, KF1, H2, P2, KF2, K> JoinedStreams<KeyedStream<H1, P1, KF1>, KeyedStream<H2, P2, KF2>>
where
    H1: Head,
    P1: Pipe<H1::Out>,
    P1::Out: Record,
    KF1: Fn(&P1::Out) -> K + Clone + 'static,
    H2: Head,
    P2: Pipe<H2::Out>,
    P2::Out: Record,
    KF2: Fn(&P2::Out) -> K + Clone + 'static,
    K: Record + Hash + Eq,
{
    /// Allowed lateness of a windowed join (Flink's `allowedLateness`), ms:
    /// a window's records are kept until the watermark passes its end +
    /// `ms`; a record that comes after the window fired but before then
    /// is paired at once with the other side's records of that window
    /// (the new pairs only: pairs are never retracted). Later records are
    /// late (counted, named in the run's summary). Without it (0), a record
    /// is late only if every window it belongs to closed at the watermark
    /// at the record (see [`super::late`]).
    ///
    /// ```
    /// use air_operators::graph::*;
    /// use air_runtime::dataflow::{run_graph, VecSource};
    /// use air_runtime::JobConfig;
    /// use std::sync::{Arc, Mutex};
    ///
    /// let cfg = JobConfig { workers: 1, pin: false, ..JobConfig::default() };
    /// let rows = Arc::new(Mutex::new(Vec::new()));
    /// let out = rows.clone();
    /// let job = run_graph(&cfg, move |df| {
    ///     // The order at 900 comes after 1 500 moved the watermark past
    ///     // [0, 1000): within 1 s of lateness it still meets its payment.
    ///     let orders = df.source(VecSource::new(vec![(1u32, 1_500u64), (7, 900)]))
    ///         .event_time(|o| o.1, 0);
    ///     let payments = df.source(VecSource::new(vec![(7u32, 950u64)]))
    ///         .event_time(|p| p.1, 0);
    ///     let out = out.clone();
    ///     orders
    ///         .key_by(|o| o.0)
    ///         .join(payments.key_by(|p| p.0))
    ///         .allowed_lateness(1_000)
    ///         .window(Tumbling::ms(1_000), |o| o.1, |p| p.1)
    ///         .for_each(move |j| out.lock().unwrap().push((j.key, j.left.1, j.right.1)));
    /// })
    /// .unwrap();
    /// assert_eq!(*rows.lock().unwrap(), [(7, 900, 950)]);
    /// assert_eq!(job.stats.get("late_records"), 0);
    /// ```
    pub fn allowed_lateness(mut self, ms: u64) -> Self {
        self.lateness = ms;
        self
    }

    /// The records too late for a windowed join (beyond the allowed
    /// lateness) as two more streams, left and right (Flink's
    /// `sideOutputLateData`): one [`LateRecord`] (key, event time, record)
    /// each, at its key's owner. Both must end in a sink or an operator.
    ///
    /// ```
    /// use air_operators::graph::*;
    /// use air_runtime::dataflow::{run_graph, VecSource};
    /// use air_runtime::JobConfig;
    /// use std::sync::{Arc, Mutex};
    ///
    /// let cfg = JobConfig { workers: 1, pin: false, ..JobConfig::default() };
    /// let late = Arc::new(Mutex::new(Vec::new()));
    /// let out = late.clone();
    /// run_graph(&cfg, move |df| {
    ///     // 2 500 closes [0, 1000) (delay 0): the order at 100 is late.
    ///     let orders = df.source(VecSource::new(vec![(1u32, 2_500u64), (7, 100)]))
    ///         .event_time(|o| o.1, 0);
    ///     let payments = df.source(VecSource::new(vec![(7u32, 150u64)]))
    ///         .event_time(|p| p.1, 0);
    ///     let (joined, late_orders, late_payments) =
    ///         orders.key_by(|o| o.0).join(payments.key_by(|p| p.0)).side_output_late();
    ///     joined.window(Tumbling::ms(1_000), |o| o.1, |p| p.1).for_each(|_| {});
    ///     let out = out.clone();
    ///     late_orders.for_each(move |l| out.lock().unwrap().push((l.key, l.time)));
    ///     late_payments.for_each(|_| {});
    /// })
    /// .unwrap();
    /// assert_eq!(*late.lock().unwrap(), [(7, 100)]);
    /// ```
    #[allow(clippy::type_complexity)]
    pub fn side_output_late(mut self) -> (Self, LateStream<K, P1::Out>, LateStream<K, P2::Out>)
    where
        LateRecord<K, P1::Out>: Record,
        LateRecord<K, P2::Out>: Record,
    {
        let df = self.left.dataflow().clone();
        let (e1, e2) = (
            df.new_edge("late left records"),
            df.new_edge("late right records"),
        );
        let o1: Box<dyn SideOut<K, P1::Out>> = Box::new(df.outbox::<LateRecord<K, P1::Out>>(e1));
        let o2: Box<dyn SideOut<K, P2::Out>> = Box::new(df.outbox::<LateRecord<K, P2::Out>>(e2));
        self.sides = Some((Box::new(o1), Box::new(o2)));
        let (s1, s2) = (
            df.consume(e1, air_runtime::dataflow::Pass::default()),
            df.consume(e2, air_runtime::dataflow::Pass::default()),
        );
        (self, s1, s2)
    }

    /// The stricter rule of earlier versions, by name: every record behind
    /// its source's watermark is late (dropped, counted), even if its window
    /// is still open.
    pub fn drop_behind_watermark(mut self) -> Self {
        self.strict = true;
        self
    }

    /// Ends both sides in tails that route records to their key's owner
    /// for a windowed join (judging lateness there unless strict).
    #[allow(clippy::type_complexity)]
    fn window_edges<TL, TR>(
        self,
        windows: Windows,
        time: (&TL, &TR),
        label: &str,
    ) -> (air_runtime::dataflow::Dataflow, usize, usize, KF1, KF2)
    where
        TL: Fn(&P1::Out) -> u64 + Clone + 'static,
        TR: Fn(&P2::Out) -> u64 + Clone + 'static,
    {
        let sides = self.sides;
        let (mut l, kl) = self.left.into_parts();
        let (mut r, kr) = self.right.into_parts();
        let df = l.dataflow().clone();
        let e1 = df.new_edge("join left");
        let e2 = df.new_edge("join right");
        let o1 = df.outbox::<P1::Out>(e1);
        let o2 = df.outbox::<P2::Out>(e2);
        let (mut late1, mut late2) = (
            Lateness::<K, P1::Out>::ms(self.lateness),
            Lateness::<K, P2::Out>::ms(self.lateness),
        );
        let sided = sides.is_some();
        if let Some((o1, o2)) = sides {
            let o1 = o1.downcast::<Box<dyn SideOut<K, P1::Out>>>();
            let o2 = o2.downcast::<Box<dyn SideOut<K, P2::Out>>>();
            late1 = late1.side(*o1.unwrap_or_else(|_| panic!("left side outbox of another type")));
            late2 = late2.side(*o2.unwrap_or_else(|_| panic!("right side outbox of another type")));
        }
        let (t1, t2) = (time.0.clone(), time.1.clone());
        if self.strict && !sided {
            let strict = BehindWatermark;
            l.end_in(window_tail(o1, kl.clone(), t1, windows, strict, label));
            r.end_in(window_tail(o2, kr.clone(), t2, windows, strict, label));
        } else {
            // Strict with side streams: the event-time stages drop what is
            // behind them; the gates still carry the side streams' ends.
            let (g1, g2) = (Rc::new(Cell::new(0)), Rc::new(Cell::new(0)));
            if !self.strict {
                l.pipe_mut().pass_late(&g1);
                r.pipe_mut().pass_late(&g2);
            }
            let (gate1, gate2) = (late1.into_gate(g1), late2.into_gate(g2));
            l.end_in(window_tail(o1, kl.clone(), t1, windows, gate1, label));
            r.end_in(window_tail(o2, kr.clone(), t2, windows, gate2, label));
        }
        (df, e1, e2, kl, kr)
    }

    fn edges(self) -> (air_runtime::dataflow::Dataflow, usize, usize, KF1, KF2) {
        let (l, kl) = self.left.into_parts();
        let (r, kr) = self.right.into_parts();
        let df = l.dataflow().clone();
        let e1 = df.new_edge("join left");
        let e2 = df.new_edge("join right");
        let o1 = df.outbox::<P1::Out>(e1);
        let o2 = df.outbox::<P2::Out>(e2);
        l.end_in(KeyedTail {
            out: o1,
            key: kl.clone(),
        });
        r.end_in(KeyedTail {
            out: o2,
            key: kr.clone(),
        });
        (df, e1, e2, kl, kr)
    }

    /// Every pair (left, right) with one key in one window of `windows`
    /// (event times `time_left`, `time_right`, ms), emitted at the key's
    /// owner when the watermark (the minimum of both sides') passes the
    /// window's end. Latency (the report's): emit time − the newer of the
    /// pair's two event times, one sample per pair. Example: the
    /// [module](self).
    #[allow(clippy::type_complexity)]
    #[track_caller]
    pub fn window<TL, TR>(
        self,
        windows: Windows,
        time_left: TL,
        time_right: TR,
    ) -> JoinOut<WindowJoin<K, P1::Out, P2::Out, KF1, KF2, TL, TR>>
    where
        TL: Fn(&P1::Out) -> u64 + Clone + 'static,
        TR: Fn(&P2::Out) -> u64 + Clone + 'static,
    {
        self.window_join(windows, time_left, time_right, false)
    }

    /// The pairs of [`JoinedStreams::window`], each emitted as soon as its
    /// second record arrives at the key's owner instead of when the window
    /// closes (a symmetric hash join: each record is stored in its side's
    /// table of its window and key and probed against the other side's).
    /// The same pairs, earlier: a pair's latency is the time its second
    /// record took to arrive. Records are kept until the watermark passes
    /// their window's end; a record for a window that closed is late
    /// (dropped, counted).
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
    ///     let mine = |v: Vec<(u32, u64)>| -> Vec<(u32, u64)> {
    ///         v.into_iter().filter(|r| r.0 as usize % 2 == df.index()).collect()
    ///     };
    ///     // (order id, time ms) and (order id, time ms)
    ///     let orders = df.source(VecSource::new(mine(vec![(1, 100), (2, 200), (3, 4_900)])));
    ///     let payments = df.source(VecSource::new(mine(vec![(1, 900), (3, 5_100), (2, 300)])));
    ///     let out = out.clone();
    ///     orders
    ///         .key_by(|o| o.0)
    ///         .join(payments.key_by(|p| p.0))
    ///         .window_eager(Tumbling::ms(5_000), |o| o.1, |p| p.1)
    ///         .for_each(move |j| out.lock().unwrap().push((j.start, j.key, j.left.1, j.right.1)));
    /// })
    /// .unwrap();
    /// let mut rows = rows.lock().unwrap().clone();
    /// rows.sort();
    /// // The pairs of `window` (order 3 and its payment are in different windows).
    /// assert_eq!(rows, [(0, 1, 100, 900), (0, 2, 200, 300)]);
    /// ```
    #[allow(clippy::type_complexity)]
    #[track_caller]
    pub fn window_eager<TL, TR>(
        self,
        windows: Windows,
        time_left: TL,
        time_right: TR,
    ) -> JoinOut<WindowJoin<K, P1::Out, P2::Out, KF1, KF2, TL, TR>>
    where
        TL: Fn(&P1::Out) -> u64 + Clone + 'static,
        TR: Fn(&P2::Out) -> u64 + Clone + 'static,
    {
        self.window_join(windows, time_left, time_right, true)
    }

    #[allow(clippy::type_complexity)]
    #[track_caller]
    fn window_join<TL, TR>(
        self,
        windows: Windows,
        time_left: TL,
        time_right: TR,
        eager: bool,
    ) -> JoinOut<WindowJoin<K, P1::Out, P2::Out, KF1, KF2, TL, TR>>
    where
        TL: Fn(&P1::Out) -> u64 + Clone + 'static,
        TR: Fn(&P2::Out) -> u64 + Clone + 'static,
    {
        let label = format!("windowed join at {}", std::panic::Location::caller());
        let lateness = self.lateness;
        let (df, e1, e2, kl, kr) = self.window_edges(windows, (&time_left, &time_right), &label);
        if let Err(e) = windows.check() {
            df.fail(e);
        }
        df.consume2(
            e1,
            e2,
            WindowJoin {
                windows,
                key: (kl, kr),
                time: (time_left, time_right),
                open: BTreeMap::new(),
                fired: 0,
                lateness,
                late: None,
                label,
                pairs: 0,
                unfired: 0,
                eager,
                latency: air_runtime::metrics::latency_histogram(),
            },
        )
    }

    /// Every pair (left, right) with one key and `time_left(l) + lower_ms
    /// <= time_right(r) <= time_left(l) + upper_ms` (Flink's interval join),
    /// emitted as soon as its second record arrives; records are kept until
    /// the watermark shows no partner can come any more.
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
    ///     let mine = |v: Vec<(u32, u64)>| -> Vec<(u32, u64)> {
    ///         v.into_iter().filter(|r| r.0 as usize % 2 == df.index()).collect()
    ///     };
    ///     // (order id, time ms) and (order id, time ms)
    ///     let orders = df.source(VecSource::new(mine(vec![(1, 100), (2, 200), (3, 4_900)])))
    ///         .event_time(|o| o.1, 0);
    ///     let payments = df.source(VecSource::new(mine(vec![(1, 900), (2, 1_500), (3, 5_100)])))
    ///         .event_time(|p| p.1, 0);
    ///     let out = out.clone();
    ///     orders
    ///         .key_by(|o| o.0)
    ///         .join(payments.key_by(|p| p.0))
    ///         .interval(0, 1_000, |o| o.1, |p| p.1) // paid within 1 s of the order
    ///         .map(|j| (j.key, j.left.1, j.right.1, j.time()))
    ///         .for_each(move |r| out.lock().unwrap().push(r));
    /// })
    /// .unwrap();
    /// let mut rows = rows.lock().unwrap().clone();
    /// rows.sort();
    /// // Order 2 was paid 1 300 ms after: no pair. `time()` is the newer time.
    /// assert_eq!(rows, [(1, 100, 900, 900), (3, 4_900, 5_100, 5_100)]);
    /// ```
    #[allow(clippy::type_complexity)]
    pub fn interval<TL, TR>(
        self,
        lower_ms: i64,
        upper_ms: i64,
        time_left: TL,
        time_right: TR,
    ) -> JoinOut<IntervalJoin<K, P1::Out, P2::Out, KF1, KF2, TL, TR>>
    where
        TL: Fn(&P1::Out) -> u64 + 'static,
        TR: Fn(&P2::Out) -> u64 + 'static,
    {
        let (df, e1, e2, kl, kr) = self.edges();
        if lower_ms > upper_ms {
            df.fail(format!(
                "an interval join's lower bound ({lower_ms} ms) exceeds its upper bound \
                 ({upper_ms} ms)"
            ));
        }
        df.consume2(
            e1,
            e2,
            IntervalJoin {
                bounds: (lower_ms, upper_ms),
                key: (kl, kr),
                time: (time_left, time_right),
                left: FxHashMap::default(),
                right: FxHashMap::default(),
                pairs: 0,
            },
        )
    }
}

/// The windowed join at a key's owner.
#[allow(clippy::type_complexity)]
pub struct WindowJoin<K, A, B, KF1, KF2, TL, TR> {
    windows: Windows,
    key: (KF1, KF2),
    time: (TL, TR),
    /// By window start: per key, both sides' records.
    open: BTreeMap<u64, FxHashMap<K, (Vec<A>, Vec<B>)>>,
    /// The watermark fired up to, ms.
    fired: u64,
    /// Allowed lateness, ms: fired windows are kept until the watermark
    /// passes end + lateness.
    lateness: u64,
    /// Records too late here (a stream fed by an edge, or a sliding
    /// window's record some of whose windows fired here), the first.
    late: Option<LateRecords>,
    /// The late records' label ([`air_runtime::dataflow::LateLog`]).
    label: String,
    pairs: u64,
    unfired: u64,
    /// Pairs emitted as their second record arrives, not at the window's end.
    eager: bool,
    /// Emit time − the newer event time of each pair, ms.
    latency: air_runtime::metrics::Histogram<u64>,
}

impl<K, A, B, KF1, KF2, TL, TR> WindowJoin<K, A, B, KF1, KF2, TL, TR> {
    /// Records the latency of pairs whose newer event times are `newest`.
    fn record_latency(&mut self, newest: &[u64]) {
        if newest.is_empty() {
            return;
        }
        let now = crate::now_ms();
        let lat = &mut self.latency;
        for &t in newest {
            let _ = lat.record(now.saturating_sub(t));
        }
        air_runtime::timeline::record_latency(|h| {
            for &t in newest {
                let _ = h.record(now.saturating_sub(t));
            }
        });
    }
}

impl<K, A, B, KF1, KF2, TL, TR> WindowJoin<K, A, B, KF1, KF2, TL, TR>
where
    K: Hash + Eq,
    A: Record,
    B: Record,
    KF1: Fn(&A) -> K,
    KF2: Fn(&B) -> K,
{
    /// Adds the records of `saved` ([`Operator2::save`]'s) whose key
    /// `keep` keeps, each to its window and key; returns the watermark it
    /// saved as fired to (ms).
    fn restore_kept(&mut self, saved: &[u8], keep: impl Fn(&K) -> bool) -> Result<u64, String> {
        let (values, s) = state::unframe_sections(saved, 4)?;
        let [fired] = values[..] else {
            return Err(format!("join state with {} values, not 1", values.len()));
        };
        for (start, a) in Kept::<A>::read(s[0], s[1])? {
            let k = (self.key.0)(&a);
            if keep(&k) {
                let e = self.open.entry(start).or_default().entry(k).or_default();
                e.0.push(a);
            }
        }
        for (start, b) in Kept::<B>::read(s[2], s[3])? {
            let k = (self.key.1)(&b);
            if keep(&k) {
                let e = self.open.entry(start).or_default().entry(k).or_default();
                e.1.push(b);
            }
        }
        Ok(fired)
    }
}

impl<K, A, B, KF1, KF2, TL, TR> Operator2 for WindowJoin<K, A, B, KF1, KF2, TL, TR>
where
    K: Record + Hash + Eq,
    A: Record,
    B: Record,
    KF1: Fn(&A) -> K + 'static,
    KF2: Fn(&B) -> K + 'static,
    TL: Fn(&A) -> u64 + 'static,
    TR: Fn(&B) -> u64 + 'static,
{
    type In1 = A;
    type In2 = B;
    type Out = Joined<K, A, B>;

    fn on_batch1<E: FnMut(Self::Out)>(
        &mut self,
        items: &[<A as ExchangeData>::Item],
        emit: &mut E,
    ) {
        let size = self.windows.size();
        let mut newest = Vec::new();
        for x in items {
            let a = A::from_archived(x);
            let (k, t) = ((self.key.0)(&a), (self.time.0)(&a));
            let (open, fired, late) = (&mut self.open, self.fired, &mut self.late);
            let (eager, time_r, pairs) = (self.eager, &self.time.1, &mut self.pairs);
            let lateness = self.lateness;
            self.windows.assign(t, |s| {
                let end = s.saturating_add(size);
                if end.saturating_add(lateness) <= fired {
                    LateRecords::count(late, t, fired);
                } else {
                    let e = open.entry(s).or_default().entry(k.clone()).or_default();
                    // A window that fired (kept for lateness) pairs at once.
                    if eager || end <= fired {
                        for b in &e.1 {
                            *pairs += 1;
                            newest.push(t.max(time_r(b)));
                            emit(Joined {
                                start: s,
                                end: s.saturating_add(size),
                                key: k.clone(),
                                left: a.clone(),
                                right: b.clone(),
                            });
                        }
                    }
                    e.0.push(a.clone());
                }
            });
        }
        self.record_latency(&newest);
    }

    fn on_batch2<E: FnMut(Self::Out)>(
        &mut self,
        items: &[<B as ExchangeData>::Item],
        emit: &mut E,
    ) {
        let size = self.windows.size();
        let mut newest = Vec::new();
        for x in items {
            let b = B::from_archived(x);
            let (k, t) = ((self.key.1)(&b), (self.time.1)(&b));
            let (open, fired, late) = (&mut self.open, self.fired, &mut self.late);
            let (eager, time_l, pairs) = (self.eager, &self.time.0, &mut self.pairs);
            let lateness = self.lateness;
            self.windows.assign(t, |s| {
                let end = s.saturating_add(size);
                if end.saturating_add(lateness) <= fired {
                    LateRecords::count(late, t, fired);
                } else {
                    let e = open.entry(s).or_default().entry(k.clone()).or_default();
                    // A window that fired (kept for lateness) pairs at once.
                    if eager || end <= fired {
                        for a in &e.0 {
                            *pairs += 1;
                            newest.push(t.max(time_l(a)));
                            emit(Joined {
                                start: s,
                                end: s.saturating_add(size),
                                key: k.clone(),
                                left: a.clone(),
                                right: b.clone(),
                            });
                        }
                    }
                    e.1.push(b.clone());
                }
            });
        }
        self.record_latency(&newest);
    }

    fn on_watermark<E: FnMut(Self::Out)>(&mut self, wm: u64, emit: &mut E) {
        if wm <= self.fired {
            return;
        }
        let before = self.fired;
        self.fired = wm;
        let size = self.windows.size();
        let mut newest = Vec::new();
        // Fire the windows ending in (before, wm]; with lateness they stay.
        if !self.eager {
            for (&start, keys) in self.open.iter() {
                let end = start.saturating_add(size);
                if end > wm {
                    break;
                }
                if end <= before {
                    continue;
                }
                for (key, (ls, rs)) in keys {
                    for l in ls {
                        for r in rs {
                            self.pairs += 1;
                            newest.push((self.time.0)(l).max((self.time.1)(r)));
                            emit(Joined {
                                start,
                                end,
                                key: key.clone(),
                                left: l.clone(),
                                right: r.clone(),
                            });
                        }
                    }
                }
            }
        }
        // Free the windows whose lateness ran out.
        while let Some(entry) = self.open.first_entry() {
            let end = entry.key().saturating_add(size);
            if end.saturating_add(self.lateness) > wm {
                break;
            }
            entry.remove();
        }
        self.record_latency(&newest);
    }

    fn on_end<E: FnMut(Self::Out)>(&mut self, final_wm: u64, emit: &mut E) {
        self.on_watermark(final_wm, emit);
        let size = self.windows.size();
        self.unfired += self
            .open
            .keys()
            .filter(|s| s.saturating_add(size) > final_wm)
            .count() as u64;
    }

    /// The watermark it fired to and every record it keeps (both sides',
    /// each with its window's start; a sliding window's record once per
    /// window it is kept in). Counters are the run's, not saved.
    fn save(&self) -> Option<Vec<u8>> {
        let (mut left, mut right) = (Kept::default(), Kept::default());
        for (&start, keys) in &self.open {
            for (ls, rs) in keys.values() {
                left.add(start, ls);
                right.add(start, rs);
            }
        }
        Some(state::frame_sections(
            &[self.fired],
            &[
                &state::records_to_bytes(&left.times),
                &state::records_to_bytes(&left.records),
                &state::records_to_bytes(&right.times),
                &state::records_to_bytes(&right.records),
            ],
        ))
    }

    fn restore(&mut self, saved: &[u8]) -> Result<(), String> {
        self.fired = self.restore_kept(saved, |_| true)?;
        Ok(())
    }

    fn rescales(&self) -> bool {
        true
    }

    /// The kept records of the keys this worker owns now, from every old
    /// worker's state (each key was at one old worker: no record twice,
    /// none lost). It fired up to the smallest watermark any old worker
    /// had fired to (they agree at a barrier, each having seen both
    /// inputs' watermarks up to it; a window that fired at its old owner
    /// and was freed is in no state, and one kept for lateness is kept
    /// here too).
    fn rescale(&mut self, states: &[&[u8]], to: state::Rescale) -> Result<(), String> {
        // Replaces what it kept (a move of key groups during a job).
        self.open.clear();
        let mut fired = None::<u64>;
        for saved in states {
            let f = self.restore_kept(saved, |k| to.owns(k))?;
            fired = Some(fired.map_or(f, |m| m.min(f)));
        }
        self.fired = fired.unwrap_or(0);
        Ok(())
    }

    fn report(&mut self, stats: &mut Stats) {
        stats.add("join_pairs", self.pairs);
        stats.add_late(&self.label, self.late);
        stats.add("unfired_windows", self.unfired);
        let _ = stats.latency.add(&self.latency);
    }
}

/// The interval join at a key's owner.
#[allow(clippy::type_complexity)]
pub struct IntervalJoin<K, A, B, KF1, KF2, TL, TR> {
    bounds: (i64, i64),
    key: (KF1, KF2),
    time: (TL, TR),
    left: FxHashMap<K, Vec<(u64, A)>>,
    right: FxHashMap<K, Vec<(u64, B)>>,
    pairs: u64,
}

impl<K, A, B, KF1, KF2, TL, TR> IntervalJoin<K, A, B, KF1, KF2, TL, TR> {
    /// Whether right time `tr` is within the bounds of left time `tl`.
    #[inline]
    fn matches(&self, tl: u64, tr: u64) -> bool {
        let d = tr as i128 - tl as i128;
        self.bounds.0 as i128 <= d && d <= self.bounds.1 as i128
    }
}

impl<K, A, B, KF1, KF2, TL, TR> IntervalJoin<K, A, B, KF1, KF2, TL, TR>
where
    K: Hash + Eq,
    A: Record,
    B: Record,
    KF1: Fn(&A) -> K,
    KF2: Fn(&B) -> K,
{
    /// Adds the records of `saved` ([`Operator2::save`]'s) whose key
    /// `keep` keeps, each with its event time.
    fn restore_kept(&mut self, saved: &[u8], keep: impl Fn(&K) -> bool) -> Result<(), String> {
        let (values, s) = state::unframe_sections(saved, 4)?;
        if !values.is_empty() {
            return Err(format!("join state with {} values, not 0", values.len()));
        }
        for (t, a) in Kept::<A>::read(s[0], s[1])? {
            let k = (self.key.0)(&a);
            if keep(&k) {
                self.left.entry(k).or_default().push((t, a));
            }
        }
        for (t, b) in Kept::<B>::read(s[2], s[3])? {
            let k = (self.key.1)(&b);
            if keep(&k) {
                self.right.entry(k).or_default().push((t, b));
            }
        }
        Ok(())
    }
}

impl<K, A, B, KF1, KF2, TL, TR> Operator2 for IntervalJoin<K, A, B, KF1, KF2, TL, TR>
where
    K: Record + Hash + Eq,
    A: Record,
    B: Record,
    KF1: Fn(&A) -> K + 'static,
    KF2: Fn(&B) -> K + 'static,
    TL: Fn(&A) -> u64 + 'static,
    TR: Fn(&B) -> u64 + 'static,
{
    type In1 = A;
    type In2 = B;
    type Out = Joined<K, A, B>;

    fn on_batch1<E: FnMut(Self::Out)>(
        &mut self,
        items: &[<A as ExchangeData>::Item],
        emit: &mut E,
    ) {
        for x in items {
            let a = A::from_archived(x);
            let (k, t) = ((self.key.0)(&a), (self.time.0)(&a));
            if let Some(rs) = self.right.get(&k) {
                for (tr, b) in rs {
                    if self.matches(t, *tr) {
                        self.pairs += 1;
                        emit(Joined {
                            start: t,
                            end: t.max(*tr) + 1,
                            key: k.clone(),
                            left: a.clone(),
                            right: b.clone(),
                        });
                    }
                }
            }
            self.left.entry(k).or_default().push((t, a));
        }
    }

    fn on_batch2<E: FnMut(Self::Out)>(
        &mut self,
        items: &[<B as ExchangeData>::Item],
        emit: &mut E,
    ) {
        for x in items {
            let b = B::from_archived(x);
            let (k, t) = ((self.key.1)(&b), (self.time.1)(&b));
            if let Some(ls) = self.left.get(&k) {
                for (tl, a) in ls {
                    if self.matches(*tl, t) {
                        self.pairs += 1;
                        emit(Joined {
                            start: *tl,
                            end: t.max(*tl) + 1,
                            key: k.clone(),
                            left: a.clone(),
                            right: b.clone(),
                        });
                    }
                }
            }
            self.right.entry(k).or_default().push((t, b));
        }
    }

    fn on_watermark<E: FnMut(Self::Out)>(&mut self, wm: u64, _emit: &mut E) {
        // Every record still to come has a time >= wm: a left record at tl
        // can still match iff tl + upper >= wm; a right one at tr iff
        // tr - lower >= wm.
        let (lo, up) = self.bounds;
        let wm = wm as i128;
        self.left.retain(|_, v| {
            v.retain(|(t, _)| *t as i128 + up as i128 >= wm);
            !v.is_empty()
        });
        self.right.retain(|_, v| {
            v.retain(|(t, _)| *t as i128 - lo as i128 >= wm);
            !v.is_empty()
        });
    }

    /// Every record it keeps, both sides', with its event time.
    fn save(&self) -> Option<Vec<u8>> {
        let (mut left, mut right) = (Kept::default(), Kept::default());
        for v in self.left.values() {
            left.add_timed(v);
        }
        for v in self.right.values() {
            right.add_timed(v);
        }
        Some(state::frame_sections(
            &[],
            &[
                &state::records_to_bytes(&left.times),
                &state::records_to_bytes(&left.records),
                &state::records_to_bytes(&right.times),
                &state::records_to_bytes(&right.records),
            ],
        ))
    }

    fn restore(&mut self, saved: &[u8]) -> Result<(), String> {
        self.restore_kept(saved, |_| true)
    }

    fn rescales(&self) -> bool {
        true
    }

    /// The kept records of the keys this worker owns now, from every old
    /// worker's state (each key was at one old worker: no record twice,
    /// none lost). It keeps no watermark: the runtime's two-input segment
    /// resumes at the smallest one saved, and the next one frees what can
    /// no longer match.
    fn rescale(&mut self, states: &[&[u8]], to: state::Rescale) -> Result<(), String> {
        // Replaces what it kept (a move of key groups during a job).
        self.left.clear();
        self.right.clear();
        for saved in states {
            self.restore_kept(saved, |k| to.owns(k))?;
        }
        Ok(())
    }

    fn report(&mut self, stats: &mut Stats) {
        stats.add("join_pairs", self.pairs);
    }
}

/// One side's kept records as saved: each record with a time (its
/// window's start, or its event time), in two parallel vectors so that
/// only `A: Record` is needed. The key is not saved: the side's key
/// function gives it back.
struct Kept<A> {
    times: Vec<u64>,
    records: Vec<A>,
}

impl<A> Default for Kept<A> {
    fn default() -> Self {
        Kept {
            times: Vec::new(),
            records: Vec::new(),
        }
    }
}

impl<A: Record> Kept<A> {
    /// Adds `records`, all at time `t`.
    fn add(&mut self, t: u64, records: &[A]) {
        self.times.extend(std::iter::repeat_n(t, records.len()));
        self.records.extend_from_slice(records);
    }

    /// Adds records with their own times.
    fn add_timed(&mut self, records: &[(u64, A)]) {
        for (t, a) in records {
            self.times.push(*t);
            self.records.push(a.clone());
        }
    }

    /// The (time, record) pairs saved as `times` and `records` bytes.
    fn read(times: &[u8], records: &[u8]) -> Result<Vec<(u64, A)>, String> {
        let times = state::records_from_bytes::<u64>(times)?;
        let records = state::records_from_bytes::<A>(records)?;
        if times.len() != records.len() {
            return Err(format!(
                "join state with {} times for {} records",
                times.len(),
                records.len()
            ));
        }
        Ok(times.into_iter().zip(records).collect())
    }
}

#[cfg(test)]
mod tests;
