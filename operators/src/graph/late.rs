//! Allowed lateness of event-time windows (Flink's `allowedLateness`) and
//! the side stream of the records that came too late for it (Flink's
//! `sideOutputLateData`).
//!
//! Every windowed operator (tumbling and sliding windows, pre-aggregated or
//! not, sessions, windowed joins) judges lateness per window, as Flink and
//! Beam define it, by default with an allowed lateness of 0 ([`OnTime`]):
//!
//! - the event-time stage passes records behind its watermark on
//!   ([`air_runtime::dataflow::Pipe::pass_late`]) and the operator judges
//!   each against that watermark `wm` (the exact one at the record, not the
//!   one last sent downstream, so the outcome does not depend on timing);
//! - a record with a window that has not closed yet (end + lateness > `wm`)
//!   joins those of its windows as any other, even if it is behind the
//!   watermark;
//! - a record whose window closed but whose end + lateness is still after
//!   `wm` (only with [`WindowedStream::allowed_lateness`]) updates the
//!   window, which fires again: its new row (same key, start and end; for
//!   sessions, a session overlapping the earlier rows) **supersedes** the
//!   rows fired before for it (a join emits the new pairs only);
//! - a record whose windows all have end + lateness `<= wm` is late:
//!   counted in `late_records` and named in the run's summary
//!   ([`air_runtime::dataflow::LateLog`]); dropped, or, if asked, sent as a
//!   [`LateRecord`] on the side stream ([`WindowedStream::side_output_late`],
//!   to its key's owner: the summary says so, and `fail_on_late` counts
//!   only dropped ones); never silently dropped;
//! - a window's state is kept until the watermark passes end + lateness
//!   (sessions: end + gap + lateness, see [`super::session`]), then freed.
//!
//! [`WindowedStream::drop_behind_watermark`] asks for the stricter rule of
//! earlier versions by name: every record behind the source's watermark is
//! late, even if its window is still open ([`BehindWatermark`]).
//!
//! Where the rule is exact and where it is Flink's only at the operator:
//! pre-aggregated windows ([`WindowedStream::aggregate`]), tumbling windows
//! of every kind and sessions judge each record at its source against the
//! watermark there, so rows do not depend on timing. Sliding windows
//! aggregated at the owner ([`WindowedStream::aggregate_every_event`]) and
//! sliding windowed joins judge at the source only whether *every* window
//! of a record closed; a record behind the watermark with some windows
//! still open is added at the key's owner to those of its windows that
//! have not fired there yet (Flink's rule at the operator), which depends
//! on when watermarks reached the owner (flush ticks; even with one
//! worker), so such rows and the late count can differ from run to run.
//! Use pre-aggregated windows (`aggregate`) or a delay covering the
//! disorder where that matters.
//!
//! The check costs a few instructions per record; records in order take
//! one comparison more than without it.
//!
//! ```
//! use air_operators::graph::*;
//! use air_runtime::dataflow::{run_graph, VecSource};
//! use air_runtime::JobConfig;
//! use std::sync::{Arc, Mutex};
//!
//! let cfg = JobConfig { workers: 1, pin: false, ..JobConfig::default() };
//! let rows = Arc::new(Mutex::new(Vec::new()));
//! let late = Arc::new(Mutex::new(Vec::new()));
//! let (out, side) = (rows.clone(), late.clone());
//! run_graph(&cfg, move |df| {
//!     // (key, time ms) in arrival order: 1 200 moves the watermark to 1 200,
//!     // past window [0, 1000)'s end; 900 is within its lateness of 500 ms;
//!     // 2 600 moves the watermark to 2 600 >= 1000 + 500, so 100 is too late.
//!     let input = vec![(7u32, 100u64), (7, 1_200), (7, 900), (7, 2_600), (7, 100)];
//!     let (out, side) = (out.clone(), side.clone());
//!     let (windows, late) = df
//!         .source(VecSource::new(input))
//!         .event_time(|r| r.1, 0)
//!         .key_by(|r| r.0)
//!         .window(Tumbling::ms(1_000), |r| r.1)
//!         .allowed_lateness(500)
//!         .side_output_late();
//!     windows
//!         .aggregate(Count)
//!         .for_each(move |r| out.lock().unwrap().push((r.start, r.value)));
//!     late.for_each(move |l| side.lock().unwrap().push((l.key, l.time)));
//! })
//! .unwrap();
//! // [0, 1000) counts 900 (within lateness): if it fired before 900 came
//! // (with 1), it fired again with 2, and the later row supersedes the
//! // earlier one. The second 100 is on the side stream.
//! let rows = rows.lock().unwrap().clone();
//! assert_eq!(rows.iter().filter(|r| r.0 == 0).last(), Some(&(0, 2)));
//! assert_eq!(*late.lock().unwrap(), [(7, 100)]);
//! ```

use super::window::WindowedStream;
use air_runtime::dataflow::{
    Cx, Dataflow, Head, Identity, LateRecords, OpHead, Outbox, Pass, Pipe, Stats, Stream,
};
use air_runtime::{key_hash, Record};
use rkyv::{Archive, Deserialize, Serialize};
use std::cell::Cell;
use std::hash::Hash;
use std::rc::Rc;

/// A record too late for every window it belongs to, on the side stream of
/// [`WindowedStream::side_output_late`].
#[derive(
    Debug, Clone, PartialEq, Archive, Serialize, Deserialize, serde::Serialize, serde::Deserialize,
)]
pub struct LateRecord<K, T> {
    /// Its key.
    pub key: K,
    /// Its event time, ms.
    pub time: u64,
    /// The record as the window received it.
    pub record: T,
}

/// Windows without allowed lateness (the default): a record is late only
/// if every window it belongs to has already closed at the watermark at
/// the record (Flink's rule with an allowed lateness of 0).
#[derive(Debug, Clone, Copy, Default)]
pub struct OnTime;

/// The stricter rule, asked for by name
/// ([`WindowedStream::drop_behind_watermark`]): every record behind its
/// source's watermark is late (dropped and counted by the event-time
/// stage), even if its window is still open.
#[derive(Debug, Clone, Copy, Default)]
pub struct BehindWatermark;

/// Windows with allowed lateness (and maybe a side stream of too-late
/// records), as [`WindowedStream::allowed_lateness`] and
/// [`WindowedStream::side_output_late`] set them.
pub struct Lateness<K, T> {
    ms: u64,
    side: Option<Box<dyn SideOut<K, T>>>,
}

impl<K, T> Lateness<K, T> {
    /// `ms` of allowed lateness, no side stream.
    pub(crate) fn ms(ms: u64) -> Self {
        Lateness { ms, side: None }
    }

    /// The same, too-late records sent to `side` (a side stream's edge).
    pub(crate) fn side(mut self, side: Box<dyn SideOut<K, T>>) -> Self {
        self.side = Some(side);
        self
    }
}

/// Where too-late records go (type-erased outbox of the side stream's edge).
pub(crate) trait SideOut<K, T> {
    fn push(&mut self, r: LateRecord<K, T>, cx: &mut Cx<'_, '_>);
    fn watermark(&mut self, wm: u64, cx: &mut Cx<'_, '_>);
    fn tick(&mut self, cx: &mut Cx<'_, '_>);
    fn end(&mut self, final_wm: u64, cx: &mut Cx<'_, '_>);
    fn barrier(&mut self, id: u64, cx: &mut Cx<'_, '_>);
}

impl<K: Hash + 'static, T: 'static> SideOut<K, T> for Outbox<LateRecord<K, T>>
where
    LateRecord<K, T>: Record,
{
    fn push(&mut self, r: LateRecord<K, T>, cx: &mut Cx<'_, '_>) {
        let h = key_hash(&r.key);
        self.push_hashed(h, r, cx)
    }
    fn watermark(&mut self, wm: u64, cx: &mut Cx<'_, '_>) {
        Outbox::watermark(self, wm, cx)
    }
    fn tick(&mut self, cx: &mut Cx<'_, '_>) {
        self.flush(cx)
    }
    fn end(&mut self, final_wm: u64, cx: &mut Cx<'_, '_>) {
        Outbox::end(self, final_wm, cx)
    }
    fn barrier(&mut self, id: u64, cx: &mut Cx<'_, '_>) {
        Outbox::barrier(self, id, cx)
    }
}

/// What a windowed operator does with records behind the watermark:
/// [`OnTime`], [`Lateness`] or [`BehindWatermark`] (for operator code;
/// users call [`WindowedStream::allowed_lateness`] and friends).
pub trait LatePolicy<K, T>: 'static {
    /// The check the window's input tail runs per record.
    type Gate: Gate<K, T>;
    /// The same setting as a [`Lateness`] (0 ms, no side stream, for
    /// [`OnTime`] and [`BehindWatermark`]).
    fn into_lateness(self) -> Lateness<K, T>;
    /// The tail's check, reading the event-time stage's watermark from
    /// `gate` (see [`air_runtime::dataflow::Pipe::pass_late`]).
    fn into_gate(self, gate: Rc<Cell<u64>>) -> Self::Gate;
}

impl<K: 'static, T: 'static> LatePolicy<K, T> for OnTime {
    type Gate = LateGate<K, T>;
    fn into_lateness(self) -> Lateness<K, T> {
        Lateness { ms: 0, side: None }
    }
    fn into_gate(self, gate: Rc<Cell<u64>>) -> LateGate<K, T> {
        self.into_lateness().into_gate(gate)
    }
}

impl<K: 'static, T: 'static> LatePolicy<K, T> for BehindWatermark {
    type Gate = BehindWatermark;
    fn into_lateness(self) -> Lateness<K, T> {
        Lateness { ms: 0, side: None }
    }
    fn into_gate(self, _gate: Rc<Cell<u64>>) -> BehindWatermark {
        BehindWatermark
    }
}

impl<K: 'static, T: 'static> LatePolicy<K, T> for Lateness<K, T> {
    type Gate = LateGate<K, T>;
    fn into_lateness(self) -> Lateness<K, T> {
        self
    }
    fn into_gate(self, gate: Rc<Cell<u64>>) -> LateGate<K, T> {
        LateGate {
            gate,
            ms: self.ms,
            side: self.side,
            late: None,
        }
    }
}

/// The lateness check of a window's input tail, per record.
pub trait Gate<K, T>: 'static {
    /// Whether it judges lateness (false: [`BehindWatermark`], the
    /// event-time stage drops records behind its watermark, no code on the
    /// hot path).
    const ON: bool;
    /// The event-time stage's watermark when the last record behind it
    /// went through, ms (0 if none did).
    fn behind(&self) -> u64;
    /// Allowed lateness, ms.
    fn lateness(&self) -> u64;
    /// A record (event time `time`) too late for all its windows at
    /// watermark `wm`: count it, side-output it.
    fn reject(&mut self, key: K, time: u64, wm: u64, record: T, cx: &mut Cx<'_, '_>);
    /// Forwards the watermark to the side stream.
    fn watermark(&mut self, wm: u64, cx: &mut Cx<'_, '_>);
    /// Flushes the side stream.
    fn tick(&mut self, cx: &mut Cx<'_, '_>);
    /// Ends the side stream.
    fn end(&mut self, final_wm: u64, cx: &mut Cx<'_, '_>);
    /// Passes checkpoint barrier `id` on the side stream.
    fn barrier(&mut self, id: u64, cx: &mut Cx<'_, '_>);
    /// Records rejected, and the first of them.
    fn late(&self) -> Option<LateRecords>;
    /// Adds the rejected records to `stats` under `label` (the late log;
    /// marked [`LateRecords::side_output`] when they went to a side
    /// stream).
    fn report(&self, stats: &mut Stats, label: &str) {
        stats.add_late(label, self.late());
    }
}

impl<K: 'static, T: 'static> Gate<K, T> for BehindWatermark {
    const ON: bool = false;
    #[inline(always)]
    fn behind(&self) -> u64 {
        0
    }
    #[inline(always)]
    fn lateness(&self) -> u64 {
        0
    }
    fn reject(&mut self, _key: K, _time: u64, _wm: u64, _record: T, _cx: &mut Cx<'_, '_>) {}
    fn watermark(&mut self, _wm: u64, _cx: &mut Cx<'_, '_>) {}
    fn tick(&mut self, _cx: &mut Cx<'_, '_>) {}
    fn end(&mut self, _final_wm: u64, _cx: &mut Cx<'_, '_>) {}
    fn barrier(&mut self, _id: u64, _cx: &mut Cx<'_, '_>) {}
    fn late(&self) -> Option<LateRecords> {
        None
    }
}

/// The check of a window that judges lateness itself ([`OnTime`],
/// [`Lateness`]).
pub struct LateGate<K, T> {
    gate: Rc<Cell<u64>>,
    ms: u64,
    side: Option<Box<dyn SideOut<K, T>>>,
    late: Option<LateRecords>,
}

impl<K: 'static, T: 'static> Gate<K, T> for LateGate<K, T> {
    const ON: bool = true;
    #[inline(always)]
    fn behind(&self) -> u64 {
        self.gate.get()
    }
    #[inline(always)]
    fn lateness(&self) -> u64 {
        self.ms
    }
    #[cold]
    fn reject(&mut self, key: K, time: u64, wm: u64, record: T, cx: &mut Cx<'_, '_>) {
        LateRecords::count(&mut self.late, time, wm);
        if let Some(s) = &mut self.side {
            s.push(LateRecord { key, time, record }, cx);
        }
    }
    fn watermark(&mut self, wm: u64, cx: &mut Cx<'_, '_>) {
        if let Some(s) = &mut self.side {
            s.watermark(wm, cx);
        }
    }
    fn tick(&mut self, cx: &mut Cx<'_, '_>) {
        if let Some(s) = &mut self.side {
            s.tick(cx);
        }
    }
    fn end(&mut self, final_wm: u64, cx: &mut Cx<'_, '_>) {
        if let Some(s) = &mut self.side {
            s.end(final_wm, cx);
        }
    }
    fn barrier(&mut self, id: u64, cx: &mut Cx<'_, '_>) {
        if let Some(s) = &mut self.side {
            s.barrier(id, cx);
        }
    }
    fn late(&self) -> Option<LateRecords> {
        self.late
    }
    fn report(&self, stats: &mut Stats, label: &str) {
        let sided = self.side.is_some();
        let late = self.late.map(|l| LateRecords {
            side_output: sided,
            ..l
        });
        stats.add_late(label, late);
    }
}

/// The check of a windowed operator whose input chain is `stream`: a
/// policy that judges lateness ([`Gate::ON`]) has the chain's event-time
/// stage pass records behind its watermark on (storing that watermark in
/// the gate), the others leave the stage dropping them.
pub(crate) fn gate_for<K, H, P, L>(stream: &mut Stream<H, P>, late: L) -> L::Gate
where
    H: Head,
    P: Pipe<H::Out>,
    L: LatePolicy<K, P::Out>,
{
    let gate = Rc::new(Cell::new(0));
    if <L::Gate as Gate<K, P::Out>>::ON {
        stream.pipe_mut().pass_late(&gate);
    }
    late.into_gate(gate)
}

/// The side stream of too-late records of a windowed stream.
pub type LateStream<K, T> = Stream<OpHead<Pass<LateRecord<K, T>>>, Identity>;

impl<H: Head, P: Pipe<H::Out>, KF, TF, M, W, L> WindowedStream<H, P, KF, TF, M, W, L> {
    /// The stricter rule of earlier versions, by name: every record behind
    /// its source's watermark (newest event time − the delay of
    /// `event_time`) is late, dropped and counted by the event-time stage,
    /// even if its window is still open. The default ([`OnTime`]) keeps such
    /// a record when one of its windows has not closed.
    ///
    /// ```
    /// use air_operators::graph::*;
    /// use air_runtime::dataflow::{run_graph, VecSource};
    /// use air_runtime::JobConfig;
    /// use std::sync::{Arc, Mutex};
    ///
    /// for strict in [false, true] {
    ///     let cfg = JobConfig { workers: 1, pin: false, ..JobConfig::default() };
    ///     let rows = Arc::new(Mutex::new(Vec::new()));
    ///     let out = rows.clone();
    ///     let job = run_graph(&cfg, move |df| {
    ///         let out = out.clone();
    ///         // 300 moves the watermark to 300 − 100 = 200: 150 is behind it,
    ///         // but its window [0, 1000) is open.
    ///         let w = df
    ///             .source(VecSource::new(vec![(1u32, 100u64), (1, 300), (1, 150)]))
    ///             .event_time(|r| r.1, 100)
    ///             .key_by(|r| r.0)
    ///             .window(Tumbling::ms(1_000), |r| r.1);
    ///         let sink = move |r: Windowed<u32, u64>| out.lock().unwrap().push(r.value);
    ///         if strict {
    ///             w.drop_behind_watermark().aggregate(Count).for_each(sink);
    ///         } else {
    ///             w.aggregate(Count).for_each(sink);
    ///         }
    ///     })
    ///     .unwrap();
    ///     let want = if strict { 2 } else { 3 };
    ///     assert_eq!(*rows.lock().unwrap(), [want]);
    ///     assert_eq!(job.stats.get("late_records"), 3 - want);
    /// }
    /// ```
    pub fn drop_behind_watermark(self) -> WindowedStream<H, P, KF, TF, M, W, BehindWatermark> {
        self.map_late(|_| BehindWatermark)
    }

    /// Allowed lateness (Flink's `allowedLateness`), ms: a window's state is
    /// kept until the watermark passes its end + `ms`; a record that comes
    /// after the window fired but before then updates it and fires it
    /// again (the new row supersedes the earlier one); later records are
    /// counted in `late_records` (and go to [`Self::side_output_late`]'s
    /// stream if asked). See [`super::late`] for the rules and an example.
    pub fn allowed_lateness<K>(
        self,
        ms: u64,
    ) -> WindowedStream<H, P, KF, TF, M, W, Lateness<K, P::Out>>
    where
        KF: Fn(&P::Out) -> K,
        L: LatePolicy<K, P::Out>,
        K: 'static,
        P::Out: 'static,
    {
        self.map_late(|l| {
            let mut l = l.into_lateness();
            l.ms = ms;
            l
        })
    }

    /// The records too late for their windows (beyond the allowed
    /// lateness, 0 unless [`Self::allowed_lateness`] set it) as a second
    /// stream (Flink's `sideOutputLateData`): one [`LateRecord`] (key, event
    /// time, record) each, at its key's owner, over an exchange edge created
    /// here. Returns the windowed stream (for `aggregate`) and that stream,
    /// which must end in a sink or an operator like any other (example:
    /// [`super::late`]).
    #[allow(clippy::type_complexity)]
    pub fn side_output_late<K>(
        self,
    ) -> (
        WindowedStream<H, P, KF, TF, M, W, Lateness<K, P::Out>>,
        LateStream<K, P::Out>,
    )
    where
        KF: Fn(&P::Out) -> K,
        L: LatePolicy<K, P::Out>,
        K: Hash + 'static,
        P::Out: 'static,
        LateRecord<K, P::Out>: Record,
    {
        let df: Dataflow = self.keyed_dataflow().clone();
        let edge = df.new_edge("late records");
        let out = df.outbox::<LateRecord<K, P::Out>>(edge);
        let w = self.map_late(|l| {
            let mut l = l.into_lateness();
            l.side = Some(Box::new(out));
            l
        });
        (w, df.consume(edge, Pass::default()))
    }
}
