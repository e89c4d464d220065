//! The window operator at a key's owner: [`WindowFinal`] merges the
//! partial accumulators of [`super::WindowedStream::aggregate`],
//! [`WindowEveryEvent`] adds the records of
//! [`super::WindowedStream::aggregate_every_event`]; both fire a window's
//! rows when the watermark passes its end (and, with allowed lateness, keep
//! it and fire it again for records within lateness).

use super::aggregate::AggregateFunction;
use super::window::{Hashed, KeyMap, MapKind, Partial, Slot, Table, Windowed};
use super::windows::Windows;
use air_runtime::dataflow::{LateRecords, Operator, Operator2, Stats};
use air_runtime::{ExchangeData, Record};
use std::hash::Hash;

/// The window operator's state at a key's owner: merges partials (or adds
/// records), fires a window's rows when the watermark passes its end.
pub(crate) struct Core<K, A: AggregateFunction<T>, T, M: MapKind<K>> {
    windows: Windows,
    agg: A,
    table: Table<K, A::Acc, M>,
    fired: u64,
    /// Allowed lateness, ms: fired windows are kept until the watermark
    /// passes end + lateness (0: dropped when they fire).
    pub(crate) lateness: u64,
    /// Records (partials) for windows that had fired, the first of them.
    late: Option<LateRecords>,
    /// The late records' label ([`air_runtime::dataflow::LateLog`]).
    pub(crate) label: String,
    rows: u64,
    /// Rows fired again for windows updated within their lateness.
    refired: u64,
    unfired: u64,
    /// Windows fired (one per window, whatever its keys).
    windows_fired: u64,
    /// Largest wall clock − input watermark seen, ms.
    wm_lag: u64,
    latency: air_runtime::metrics::Histogram<u64>,
    /// One latency sample per window, not per row.
    latency_per_window: bool,
}

impl<K: Hash + Eq, A: AggregateFunction<T>, T, M: MapKind<K>> Core<K, A, T, M> {
    pub(crate) fn new(windows: Windows, agg: A, latency_per_window: bool) -> Self {
        Core {
            latency_per_window,
            windows,
            agg,
            table: Table::new(),
            fired: 0,
            lateness: 0,
            late: None,
            label: String::new(),
            rows: 0,
            refired: 0,
            unfired: 0,
            windows_fired: 0,
            wm_lag: 0,
            latency: air_runtime::metrics::latency_histogram(),
        }
    }

    /// The slot of (`start`, `key`), or `None` (counted, event time `t`)
    /// if that window already fired.
    #[inline]
    fn slot(&mut self, start: u64, key: K, t: u64) -> Option<&mut Slot<A::Acc>> {
        if start.saturating_add(self.windows.size()) <= self.fired {
            LateRecords::count(&mut self.late, t, self.fired);
            return None;
        }
        let i = self.table.index(start);
        let agg = &self.agg;
        Some(self.table.windows[i].1.get_or_insert_with(key, || Slot {
            acc: agg.create(),
            newest: 0,
        }))
    }

    /// Updates (`start`, `key`) with `f` in a window that already fired:
    /// fires it again if within lateness, else counts it late.
    #[cold]
    fn refine<E: FnMut(Windowed<K, A::Out>)>(
        &mut self,
        start: u64,
        key: K,
        t: u64,
        f: impl FnOnce(&mut Slot<A::Acc>),
        emit: &mut E,
    ) where
        K: Clone,
    {
        let end = start.saturating_add(self.windows.size());
        if end.saturating_add(self.lateness) <= self.fired {
            LateRecords::count(&mut self.late, t, self.fired);
            return;
        }
        let i = self.table.index(start);
        let agg = &self.agg;
        let s = self.table.windows[i]
            .1
            .get_or_insert_with(key.clone(), || Slot {
                acc: agg.create(),
                newest: 0,
            });
        f(s);
        self.rows += 1;
        self.refired += 1;
        emit(Windowed {
            start,
            end,
            key,
            value: agg.result(&s.acc),
        });
    }

    /// Merges a batch of partial accumulators (a window that fired: again
    /// within lateness, else counted late).
    #[inline]
    pub(crate) fn merge_partials<E: FnMut(Windowed<K, A::Out>)>(
        &mut self,
        items: &[<Partial<K, A::Acc> as ExchangeData>::Item],
        emit: &mut E,
    ) where
        K: Record,
        Partial<K, A::Acc>: Record,
    {
        for a in items {
            let p = Partial::<K, A::Acc>::from_archived(a);
            let agg = self.agg.clone();
            if p.start.saturating_add(self.windows.size()) <= self.fired {
                // The window fired: within lateness, again with this
                // partial merged (else counted).
                let (newest, acc) = (p.newest, p.acc);
                self.refine(
                    p.start,
                    p.key,
                    newest,
                    |s| {
                        agg.merge(&mut s.acc, acc);
                        s.newest = s.newest.max(newest);
                    },
                    emit,
                );
                continue;
            }
            if let Some(s) = self.slot(p.start, p.key, p.newest) {
                agg.merge(&mut s.acc, p.acc);
                s.newest = s.newest.max(p.newest);
            }
        }
    }

    /// Adds a batch of records, keyed by `key`, at event times `time`.
    #[inline]
    pub(crate) fn add_records<E: FnMut(Windowed<K, A::Out>)>(
        &mut self,
        items: &[T::Item],
        key: &impl Fn(&T) -> K,
        time: &impl Fn(&T) -> u64,
        emit: &mut E,
    ) where
        K: Record,
        T: Record,
    {
        let windows = self.windows;
        let agg = self.agg.clone();
        if let Windows::Tumbling { size } = windows {
            // The window (and its index in the table) records last went
            // to: most records skip the window search. Valid for this batch
            // (the table changes only here and when windows fire).
            let mut hot = (u64::MAX, 0u64, 0usize);
            for a in items {
                let x = T::from_archived(a);
                let t = time(&x);
                if !(hot.0 <= t && t < hot.1) {
                    let start = t - t % size;
                    if start.saturating_add(size) <= self.fired {
                        // Fired: again within lateness, else late.
                        let k = key(&x);
                        self.refine(start, k, t, |s| add(&agg, s, &x, t), emit);
                        hot = (u64::MAX, 0, 0);
                        continue;
                    }
                    hot = (start, start.saturating_add(size), self.table.index(start));
                }
                let k = key(&x);
                let s = self.table.windows[hot.2].1.get_or_insert_with(k, || Slot {
                    acc: agg.create(),
                    newest: 0,
                });
                add(&agg, s, &x, t);
            }
            return;
        }
        let size = windows.size();
        for a in items {
            let x = T::from_archived(a);
            let t = time(&x);
            let k = key(&x);
            windows.assign(t, |start| {
                if start.saturating_add(size) <= self.fired {
                    let k = k.clone();
                    self.refine(start, k, t, |s| add(&agg, s, &x, t), emit);
                } else if let Some(s) = self.slot(start, k.clone(), t) {
                    add(&agg, s, &x, t);
                }
            });
        }
    }

    fn fire<E: FnMut(Windowed<K, A::Out>)>(&mut self, wm: u64, emit: &mut E)
    where
        K: Clone,
    {
        if wm <= self.fired {
            return;
        }
        if self.lateness > 0 {
            return self.fire_keeping(wm, emit);
        }
        self.fired = wm;
        if wm != u64::MAX {
            let lag = crate::now_ms().saturating_sub(wm);
            self.wm_lag = self.wm_lag.max(lag);
        }
        let size = self.windows.size();
        if self
            .table
            .windows
            .first()
            .is_none_or(|w| w.0.saturating_add(size) > wm)
        {
            return;
        }
        let now = crate::now_ms();
        let agg = &self.agg;
        let (lat, rows, per_window) = (&mut self.latency, &mut self.rows, self.latency_per_window);
        let mut samples = Vec::new();
        let fired = &mut self.windows_fired;
        self.table.drain_closed(size, wm, |start, m| {
            *fired += 1;
            let mut newest = None;
            for (key, s) in m.into_entries() {
                if per_window {
                    newest = newest.max(Some(s.newest));
                } else {
                    let l = now.saturating_sub(s.newest);
                    let _ = lat.record(l);
                    samples.push(l);
                }
                *rows += 1;
                emit(Windowed {
                    start,
                    end: start.saturating_add(size),
                    key,
                    value: agg.result(&s.acc),
                });
            }
            if let Some(n) = newest {
                let l = now.saturating_sub(n);
                let _ = lat.record(l);
                samples.push(l);
            }
        });
        air_runtime::timeline::record_latency(|h| {
            for &l in &samples {
                let _ = h.record(l);
            }
        });
    }

    /// [`Core::fire`] with lateness: fires the windows ending in
    /// (previous watermark, `wm`], keeps them until `wm` passes end +
    /// lateness.
    fn fire_keeping<E: FnMut(Windowed<K, A::Out>)>(&mut self, wm: u64, emit: &mut E)
    where
        K: Clone,
    {
        let before = self.fired;
        self.fired = wm;
        if wm != u64::MAX {
            let lag = crate::now_ms().saturating_sub(wm);
            self.wm_lag = self.wm_lag.max(lag);
        }
        let size = self.windows.size();
        let now = crate::now_ms();
        let agg = &self.agg;
        let (lat, rows) = (&mut self.latency, &mut self.rows);
        let mut samples = Vec::new();
        for (start, m) in &self.table.windows {
            let end = start.saturating_add(size);
            if end > wm {
                break;
            }
            if end <= before {
                continue;
            }
            self.windows_fired += 1;
            m.for_each_entry(|key, s| {
                let l = now.saturating_sub(s.newest);
                let _ = lat.record(l);
                samples.push(l);
                *rows += 1;
                emit(Windowed {
                    start: *start,
                    end,
                    key: key.clone(),
                    value: agg.result(&s.acc),
                });
            });
        }
        let lateness = self.lateness;
        self.table
            .drain_closed(size.saturating_add(lateness), wm, |_, _| {});
        air_runtime::timeline::record_latency(|h| {
            for &l in &samples {
                let _ = h.record(l);
            }
        });
    }

    fn end<E: FnMut(Windowed<K, A::Out>)>(&mut self, final_wm: u64, emit: &mut E)
    where
        K: Clone,
    {
        self.fire(final_wm, emit);
        let size = self.windows.size();
        self.unfired += self
            .table
            .windows
            .iter()
            .filter(|w| w.0.saturating_add(size) > final_wm)
            .count() as u64;
    }

    /// Its state at a checkpoint: the watermark it fired up to, then every
    /// open (or kept) window's accumulators as partials.
    fn save(&self) -> Vec<u8>
    where
        K: Clone,
        Partial<K, A::Acc>: Record,
    {
        let mut rows = Vec::new();
        for (start, m) in &self.table.windows {
            m.for_each_entry(|key, s| {
                rows.push(Partial {
                    start: *start,
                    newest: s.newest,
                    key: key.clone(),
                    acc: s.acc.clone(),
                })
            });
        }
        air_runtime::dataflow::state::frame(
            &[self.fired],
            &air_runtime::dataflow::state::records_to_bytes(&rows),
        )
    }

    /// Takes back what [`Core::save`] gave.
    fn restore(&mut self, state: &[u8]) -> Result<(), String>
    where
        Partial<K, A::Acc>: Record,
    {
        let (fired, body) = air_runtime::dataflow::state::unframe_one(state, "window")?;
        self.fired = fired;
        for p in air_runtime::dataflow::state::records_from_bytes::<Partial<K, A::Acc>>(body)? {
            let i = self.table.index(p.start);
            let mut acc = Some(p.acc);
            let s = self.table.windows[i].1.get_or_insert_with(p.key, || Slot {
                acc: acc.take().expect("once"),
                newest: p.newest,
            });
            if let Some(acc) = acc {
                // A key twice in one window: merge (not from our save).
                self.agg.merge(&mut s.acc, acc);
                s.newest = s.newest.max(p.newest);
            }
        }
        Ok(())
    }

    /// Takes, on a resume at another worker count, the windows of the
    /// keys this worker owns now from every old worker's saved state. It
    /// fired up to the smallest watermark any old worker had fired to
    /// (they agree at a barrier, each having seen every input's watermarks
    /// up to it); a window fired already at its old owner is in no state.
    fn rescale(
        &mut self,
        states: &[&[u8]],
        to: air_runtime::dataflow::state::Rescale,
    ) -> Result<(), String>
    where
        Partial<K, A::Acc>: Record,
    {
        use air_runtime::dataflow::state::{records_from_bytes, unframe_one};
        // Replaces what it kept (a move of key groups during a job).
        self.table.windows.clear();
        let mut fired = None::<u64>;
        for state in states {
            let (f, body) = unframe_one(state, "window")?;
            fired = Some(fired.map_or(f, |m| m.min(f)));
            for p in records_from_bytes::<Partial<K, A::Acc>>(body)? {
                if !to.owns(&p.key) {
                    continue;
                }
                let i = self.table.index(p.start);
                let mut acc = Some(p.acc);
                let s = self.table.windows[i].1.get_or_insert_with(p.key, || Slot {
                    acc: acc.take().expect("once"),
                    newest: p.newest,
                });
                if let Some(acc) = acc {
                    self.agg.merge(&mut s.acc, acc);
                    s.newest = s.newest.max(p.newest);
                }
            }
        }
        self.fired = fired.unwrap_or(0);
        Ok(())
    }

    fn report(&mut self, stats: &mut Stats, late_name: &str) {
        stats.add("window_rows", self.rows);
        stats.add("refired_rows", self.refired);
        match late_name {
            "late_records" => stats.add_late(&self.label, self.late),
            _ => stats.add(late_name, self.late.map_or(0, |l| l.records)),
        }
        stats.add("unfired_windows", self.unfired);
        stats.add("windows_fired", self.windows_fired);
        stats.max("watermark_lag_max_ms", self.wm_lag);
        let _ = stats.latency.add(&self.latency);
    }
}

/// The window operator at a key's owner, fed by partial accumulators.
pub struct WindowFinal<K, A: AggregateFunction<T>, T, M: MapKind<K> = Hashed> {
    pub(crate) core: Core<K, A, T, M>,
}

impl<K, A, T, M> Operator for WindowFinal<K, A, T, M>
where
    K: Record + Hash + Eq,
    A: AggregateFunction<T>,
    T: 'static,
    Partial<K, A::Acc>: Record,
    M: MapKind<K>,
{
    type In = Partial<K, A::Acc>;
    type Out = Windowed<K, A::Out>;

    #[inline]
    fn on_batch<E: FnMut(Self::Out)>(
        &mut self,
        items: &[<Self::In as ExchangeData>::Item],
        emit: &mut E,
    ) {
        self.core.merge_partials(items, emit);
    }

    fn on_watermark<E: FnMut(Self::Out)>(&mut self, wm: u64, emit: &mut E) {
        self.core.fire(wm, emit);
    }

    fn on_end<E: FnMut(Self::Out)>(&mut self, final_wm: u64, emit: &mut E) {
        self.core.end(final_wm, emit);
    }

    fn report(&mut self, stats: &mut Stats) {
        // Partials for a window that already fired: 0 unless the
        // watermark protocol is broken.
        self.core.report(stats, "late_partials");
    }

    fn save(&self) -> Option<Vec<u8>> {
        Some(self.core.save())
    }

    fn restore(&mut self, state: &[u8]) -> Result<(), String> {
        self.core.restore(state)
    }

    fn rescales(&self) -> bool {
        true
    }

    fn rescale(
        &mut self,
        states: &[&[u8]],
        to: air_runtime::dataflow::state::Rescale,
    ) -> Result<(), String> {
        self.core.rescale(states, to)
    }
}

/// Adds record `x` (event time `t`) to slot `s`.
#[inline(always)]
fn add<T, A: AggregateFunction<T>>(agg: &A, s: &mut Slot<A::Acc>, x: &T, t: u64) {
    agg.add(&mut s.acc, x);
    s.newest = s.newest.max(t);
}

/// The window operator at a key's owner for
/// [`super::WindowedStream::aggregate_every_event`]: fed by every record of
/// its keys (first input), and by the partial accumulators of the hot keys
/// their senders aggregated themselves (second input; see
/// [`air_runtime::hotkeys`]). Both go into the same windows; a window fires
/// when the watermark of both inputs passed its end.
pub struct WindowEveryEvent<K, A: AggregateFunction<T>, T, KF, TF, M: MapKind<K> = Hashed> {
    pub(crate) core: Core<K, A, T, M>,
    pub(crate) key: KF,
    pub(crate) time: TF,
}

impl<K, A, T, KF, TF, M> Operator2 for WindowEveryEvent<K, A, T, KF, TF, M>
where
    K: Record + Hash + Eq,
    A: AggregateFunction<T>,
    T: Record,
    KF: Fn(&T) -> K + 'static,
    TF: Fn(&T) -> u64 + 'static,
    M: MapKind<K>,
    Partial<K, A::Acc>: Record,
{
    type In1 = T;
    type In2 = Partial<K, A::Acc>;
    type Out = Windowed<K, A::Out>;

    #[inline]
    fn on_batch1<E: FnMut(Self::Out)>(&mut self, items: &[T::Item], emit: &mut E) {
        self.core.add_records(items, &self.key, &self.time, emit);
    }

    #[inline]
    fn on_batch2<E: FnMut(Self::Out)>(
        &mut self,
        items: &[<Partial<K, A::Acc> as ExchangeData>::Item],
        emit: &mut E,
    ) {
        self.core.merge_partials(items, emit);
    }

    fn on_watermark<E: FnMut(Self::Out)>(&mut self, wm: u64, emit: &mut E) {
        self.core.fire(wm, emit);
    }

    fn on_end<E: FnMut(Self::Out)>(&mut self, final_wm: u64, emit: &mut E) {
        self.core.end(final_wm, emit);
    }

    fn report(&mut self, stats: &mut Stats) {
        // Records (or partials) for a window that already fired at their
        // owner: late.
        self.core.report(stats, "late_records");
    }

    fn save(&self) -> Option<Vec<u8>> {
        Some(self.core.save())
    }

    fn restore(&mut self, state: &[u8]) -> Result<(), String> {
        self.core.restore(state)
    }

    fn rescales(&self) -> bool {
        true
    }

    fn rescale(
        &mut self,
        states: &[&[u8]],
        to: air_runtime::dataflow::state::Rescale,
    ) -> Result<(), String> {
        self.core.rescale(states, to)
    }
}
