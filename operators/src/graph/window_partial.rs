//! The pre-aggregating end of a windowed segment ([`PartialTail`]):
//! accumulators per window and key at the sender, sent to the keys' owners
//! as partials when the watermark passes a window's end
//! ([`super::WindowedStream::aggregate`]); and [`SplitTail`], the sender of
//! [`super::WindowedStream::aggregate_every_event`], which sends every
//! record to its key's owner except those of hot key groups, which it
//! pre-aggregates as a [`PartialTail`] does ([`air_runtime::hotkeys`]).

use super::aggregate::AggregateFunction;
use super::late::Gate;
use super::window::{KeyMap, MapKind, Partial, Slot, Table, WindowTail};
use super::windows::Windows;
use air_runtime::dataflow::{Cx, LateRecords, Outbox, Stats, Tail};
use air_runtime::hotkeys::HotGroups;
use air_runtime::{key_hash, ExchangeData, Record};
use std::hash::Hash;

/// The pre-aggregating end of a windowed segment: one accumulator per
/// (window or pane, key); a window's partials go to their keys' owners when
/// the watermark passes its end.
pub(crate) struct PartialTail<T, K, A: AggregateFunction<T>, KF, TF, M: MapKind<K>, G> {
    pub(crate) out: Outbox<Partial<K, A::Acc>>,
    pub(crate) key: KF,
    pub(crate) time: TF,
    pub(crate) agg: A,
    pub(crate) windows: Windows,
    pub(crate) table: Table<K, A::Acc, M>,
    /// Sliding windows kept per pane: the records behind the watermark
    /// whose pane closed, per window (only their windows still open).
    pub(crate) exact: Table<K, A::Acc, M>,
    /// (start, end, index) of the window (or pane) events last went to.
    pub(crate) hot: (u64, u64, usize),
    pub(crate) wm: u64,
    /// Records for closed windows without a gate (a stream fed by an
    /// edge, [`super::BehindWatermark`]).
    pub(crate) late: Option<LateRecords>,
    /// Records that reached the window (late ones included).
    pub(crate) records: u64,
    /// The tumbling window's size or the sliding windows' pane, ms (0:
    /// sliding windows assigned one by one).
    pub(crate) step: u64,
    /// The pane of sliding windows kept per pane.
    pub(crate) pane: Option<u64>,
    /// The lateness check ([`super::BehindWatermark`]: none).
    pub(crate) gate: G,
    /// A window whose partial went out got records again (lateness): send
    /// it at the next watermark even if the watermark did not move.
    pub(crate) pending: bool,
    /// The late records' label ([`air_runtime::dataflow::LateLog`]).
    pub(crate) label: String,
}

impl<T, K, A, KF, TF, M, G> PartialTail<T, K, A, KF, TF, M, G>
where
    K: Record + Hash + Eq,
    A: AggregateFunction<T>,
    KF: Fn(&T) -> K + 'static,
    Partial<K, A::Acc>: Record,
    M: MapKind<K>,
    G: Gate<K, T>,
{
    /// The tail sending the partials of `agg` over `windows` on `out`,
    /// judging lateness with `gate`.
    pub(crate) fn new(
        out: Outbox<Partial<K, A::Acc>>,
        key: KF,
        time: TF,
        agg: A,
        windows: Windows,
        gate: G,
        label: String,
    ) -> Self {
        // Sliding windows are kept per pane; records behind the watermark
        // that are too late for some of their windows go to `exact`, per
        // window.
        let pane = windows.pane();
        PartialTail {
            out,
            key,
            time,
            agg,
            windows,
            table: Table::new(),
            exact: Table::new(),
            hot: (u64::MAX, 0, 0),
            wm: 0,
            late: None,
            records: 0,
            step: match windows {
                Windows::Tumbling { size } => size,
                _ => pane.unwrap_or(0),
            },
            pane,
            gate,
            pending: false,
            label,
        }
    }

    /// Sends every window (pane) closed under `wm`.
    fn emit_closed(&mut self, wm: u64, cx: &mut Cx<'_, '_>) {
        self.hot = (u64::MAX, 0, 0);
        let out = &mut self.out;
        let size = self.windows.size();
        let mut send = |start: u64, m: M::Map<Slot<A::Acc>>, cx: &mut Cx<'_, '_>| {
            for (key, s) in m.into_entries() {
                let h = key_hash(&key);
                out.push_hashed(
                    h,
                    Partial {
                        start,
                        newest: s.newest,
                        key,
                        acc: s.acc,
                    },
                    cx,
                );
            }
        };
        match self.pane {
            None => {
                self.table
                    .drain_closed(size, wm, |start, m| send(start, m, cx));
            }
            Some(slide) => {
                // Records behind the watermark, per window.
                self.exact
                    .drain_closed(size, wm, |start, m| send(start, m, cx));
                // A closed pane [p, p + slide) is part of the windows
                // starting p − size + slide … p.
                let back = size - slide;
                self.table.drain_closed(slide, wm, |p, m| {
                    for (key, s) in m.into_entries() {
                        let h = key_hash(&key);
                        let mut start = p.saturating_sub(back);
                        start -= start % slide;
                        while start <= p {
                            out.push_hashed(
                                h,
                                Partial {
                                    start,
                                    newest: s.newest,
                                    key: key.clone(),
                                    acc: s.acc.clone(),
                                },
                                cx,
                            );
                            // No overflow near u64::MAX: stop after p.
                            match start.checked_add(slide) {
                                Some(next) => start = next,
                                None => break,
                            }
                        }
                    }
                });
            }
        }
    }

    /// [`Tail::push`] judging lateness: `t` is judged against the
    /// watermark at the record (the event-time stage's, or this tail's for
    /// a stream fed by an edge).
    #[inline(always)]
    fn push_gated(&mut self, item: T, t: u64, cx: &mut Cx<'_, '_>) {
        let behind = self.gate.behind();
        let step = self.step;
        if step != 0 {
            // Tumbling windows, or the panes of sliding ones.
            if t < behind || !(self.hot.0 <= t && t < self.hot.1) {
                let wm = behind.max(self.wm);
                let start = t - t % step;
                let end = start.saturating_add(step);
                if end <= wm && self.pane.is_some() {
                    // Its pane closed: some of its windows may still be open.
                    return self.push_windows(item, t, wm, true, cx);
                }
                if end.saturating_add(self.gate.lateness()) <= wm {
                    let k = (self.key)(&item);
                    self.gate.reject(k, t, wm, item, cx);
                    return;
                }
                if end <= self.wm {
                    self.pending = true;
                }
                let i = self.table.index(start);
                self.hot = (start, end, i);
            }
            let k = (self.key)(&item);
            let agg = &self.agg;
            let s = self.table.windows[self.hot.2]
                .1
                .get_or_insert_with(k, || Slot {
                    acc: agg.create(),
                    newest: 0,
                });
            agg.add(&mut s.acc, &item);
            s.newest = s.newest.max(t);
        } else {
            // Sliding windows, one by one.
            self.hot = (u64::MAX, 0, 0);
            self.push_windows(item, t, behind.max(self.wm), false, cx);
        }
    }

    /// A record judged at watermark `wm` into those of its windows still
    /// open (within lateness), kept per window in `table` (or in `exact`:
    /// a record whose pane closed); late if none is.
    #[inline(never)]
    fn push_windows(&mut self, item: T, t: u64, wm: u64, exact: bool, cx: &mut Cx<'_, '_>) {
        let (windows, lateness, own) = (self.windows, self.gate.lateness(), self.wm);
        let (key, agg, pending) = (&self.key, &self.agg, &mut self.pending);
        let table = if exact {
            &mut self.exact
        } else {
            &mut self.table
        };
        if !add_open(
            table, windows, lateness, own, wm, key, agg, pending, &item, t,
        ) {
            let k = (self.key)(&item);
            self.gate.reject(k, t, wm, item, cx);
        }
    }
}

/// Adds `item` (event time `t`) to those of its `windows` in `table` whose
/// end + `lateness` is after watermark `wm`; sets `pending` if one of them
/// already went out (end <= `own`, the tail's watermark). Returns whether
/// any took it.
#[allow(clippy::too_many_arguments)]
#[inline]
fn add_open<T, K, A, KF, M>(
    table: &mut Table<K, A::Acc, M>,
    windows: Windows,
    lateness: u64,
    own: u64,
    wm: u64,
    key: &KF,
    agg: &A,
    pending: &mut bool,
    item: &T,
    t: u64,
) -> bool
where
    K: Clone,
    A: AggregateFunction<T>,
    KF: Fn(&T) -> K,
    M: MapKind<K>,
{
    let size = windows.size();
    let k = key(item);
    let mut taken = false;
    windows.assign(t, |start| {
        let end = start.saturating_add(size);
        if end.saturating_add(lateness) <= wm {
            return;
        }
        taken = true;
        if end <= own {
            *pending = true;
        }
        let i = table.index(start);
        let s = table.windows[i].1.get_or_insert_with(k.clone(), || Slot {
            acc: agg.create(),
            newest: 0,
        });
        agg.add(&mut s.acc, item);
        s.newest = s.newest.max(t);
    });
    taken
}

impl<T, K, A, KF, TF, M, G> Tail<T> for PartialTail<T, K, A, KF, TF, M, G>
where
    T: 'static,
    K: Record + Hash + Eq,
    A: AggregateFunction<T>,
    KF: Fn(&T) -> K + 'static,
    TF: Fn(&T) -> u64 + 'static,
    Partial<K, A::Acc>: Record,
    M: MapKind<K>,
    G: Gate<K, T>,
{
    #[inline(always)]
    fn push(&mut self, item: T, cx: &mut Cx<'_, '_>) {
        self.records += 1;
        let t = (self.time)(&item);
        if G::ON {
            return self.push_gated(item, t, cx);
        }
        let _ = cx;
        // Tumbling windows, or the panes of sliding ones (0: neither).
        let step = self.step;
        if step != 0 {
            if !(self.hot.0 <= t && t < self.hot.1) {
                let start = t - t % step;
                if start.saturating_add(step) <= self.wm {
                    LateRecords::count(&mut self.late, t, self.wm);
                    return;
                }
                let i = self.table.index(start);
                self.hot = (start, start.saturating_add(step), i);
            }
            let k = (self.key)(&item);
            let agg = &self.agg;
            let s = self.table.windows[self.hot.2]
                .1
                .get_or_insert_with(k, || Slot {
                    acc: agg.create(),
                    newest: 0,
                });
            agg.add(&mut s.acc, &item);
            s.newest = s.newest.max(t);
        } else {
            let k = (self.key)(&item);
            let size = self.windows.size();
            let (table, agg, wm, late) = (&mut self.table, &self.agg, self.wm, &mut self.late);
            self.windows.assign(t, |start| {
                if start.saturating_add(size) <= wm {
                    LateRecords::count(late, t, wm);
                    return;
                }
                let i = table.index(start);
                let s = table.windows[i].1.get_or_insert_with(k.clone(), || Slot {
                    acc: agg.create(),
                    newest: 0,
                });
                agg.add(&mut s.acc, &item);
                s.newest = s.newest.max(t);
            });
            self.hot = (u64::MAX, 0, 0);
        }
    }

    fn watermark(&mut self, wm: u64, cx: &mut Cx<'_, '_>) {
        if wm > self.wm {
            self.wm = wm;
            self.pending = false;
            self.emit_closed(wm, cx);
        } else if G::ON && self.pending {
            // Late records updated windows whose partials went out.
            self.pending = false;
            self.emit_closed(self.wm, cx);
        }
        if G::ON {
            self.gate.watermark(wm, cx);
        }
        self.out.watermark(wm, cx);
    }

    fn tick(&mut self, cx: &mut Cx<'_, '_>) {
        if G::ON {
            self.gate.tick(cx);
        }
        self.out.flush(cx)
    }

    fn end(&mut self, final_wm: u64, cx: &mut Cx<'_, '_>) {
        // Every partial goes: the owners fire only what every input read
        // past (`final_wm`), and count the rest.
        self.emit_closed(u64::MAX, cx);
        if G::ON {
            self.gate.end(final_wm, cx);
        }
        self.out.end(final_wm, cx);
    }

    fn barrier(&mut self, id: u64, cx: &mut Cx<'_, '_>) {
        // With checkpoints the partials of open windows leave before the
        // barrier (the owners merge them with the rest), so this tail keeps
        // no state across it; without, they stay (barriers alone cost
        // nothing more).
        if air_runtime::dataflow::state::enabled() {
            self.emit_closed(u64::MAX, cx);
        }
        if G::ON {
            self.gate.barrier(id, cx);
        }
        self.out.barrier(id, cx);
    }

    fn barrier_safe(&self) -> bool {
        true
    }

    fn report(&mut self, stats: &mut Stats) {
        // Records added to a window: those judged late here are not.
        let late = self.late.map_or(0, |l| l.records) + self.gate.late().map_or(0, |l| l.records);
        stats.add_late(&self.label, self.late);
        self.gate.report(stats, &self.label);
        stats.add("window_records", self.records.saturating_sub(late));
    }
}

/// The gate of the hot-key partials of a [`SplitTail`]: the records that
/// reach it were judged by the split tail's own gate already, whose
/// watermark at the record (`behind`) and lateness it repeats, so the
/// [`PartialTail`] keeps exactly the windows the owner would have. It
/// rejects nothing the split tail's gate let through; should it, the
/// record is counted late, not lost silently.
pub(crate) struct Judged {
    behind: u64,
    lateness: u64,
    late: Option<LateRecords>,
}

impl Judged {
    /// A gate with allowed lateness `lateness` ms.
    pub(crate) fn new(lateness: u64) -> Judged {
        Judged {
            behind: 0,
            lateness,
            late: None,
        }
    }
}

impl<K: 'static, T: 'static> Gate<K, T> for Judged {
    const ON: bool = true;
    #[inline(always)]
    fn behind(&self) -> u64 {
        self.behind
    }
    #[inline(always)]
    fn lateness(&self) -> u64 {
        self.lateness
    }
    fn reject(&mut self, _key: K, time: u64, wm: u64, _record: T, _cx: &mut Cx<'_, '_>) {
        LateRecords::count(&mut self.late, time, wm);
    }
    fn watermark(&mut self, _wm: u64, _cx: &mut Cx<'_, '_>) {}
    fn tick(&mut self, _cx: &mut Cx<'_, '_>) {}
    fn end(&mut self, _final_wm: u64, _cx: &mut Cx<'_, '_>) {}
    fn barrier(&mut self, _id: u64, _cx: &mut Cx<'_, '_>) {}
    fn late(&self) -> Option<LateRecords> {
        self.late
    }
}

/// The sending end of [`super::WindowedStream::aggregate_every_event`]:
/// every record goes to its key's owner on the first edge (as a
/// [`WindowTail`] sends it), except the records of key groups its
/// [`HotGroups`] judges hot, which it aggregates per window itself and
/// sends their owners as partials on the second edge when the watermark
/// passes the window's end. The owner ([`super::WindowEveryEvent`]) merges
/// both, so the rows are the same whichever groups were hot when.
pub(crate) struct SplitTail<T, K, A: AggregateFunction<T>, KF, TF, M: MapKind<K>, G, W> {
    records: WindowTail<T, KF, TF, G, W>,
    partials: PartialTail<T, K, A, KF, TF, M, Judged>,
    hot: HotGroups,
    /// Key groups may move in this job: a cold record's owner is the
    /// edge's table's ([`Cx::owner_of_group`]), not the even ranges'.
    tables_move: bool,
}

impl<T, K, A: AggregateFunction<T>, KF, TF, M: MapKind<K>, G, W>
    SplitTail<T, K, A, KF, TF, M, G, W>
{
    /// Records to `records`' edge, hot groups' partials through `partials`.
    pub(crate) fn new(
        records: WindowTail<T, KF, TF, G, W>,
        partials: PartialTail<T, K, A, KF, TF, M, Judged>,
        hot: HotGroups,
    ) -> Self {
        SplitTail {
            records,
            partials,
            hot,
            tables_move: air_runtime::dataflow::moves::enabled(),
        }
    }
}

impl<T, K, A, KF, TF, M, G, W> SplitTail<T, K, A, KF, TF, M, G, W>
where
    T: 'static,
    K: Record + Hash + Eq,
    A: AggregateFunction<T>,
    KF: Fn(&T) -> K + 'static,
    TF: Fn(&T) -> u64 + 'static,
    Partial<K, A::Acc>: Record,
    M: MapKind<K>,
    G: Gate<K, T>,
{
    /// A hot group's record into its window's partial (out of line: the
    /// cold records' path stays small).
    #[inline(never)]
    fn push_hot(&mut self, item: T, cx: &mut Cx<'_, '_>) {
        self.partials.gate.behind = self.records.gate.behind();
        self.partials.push(item, cx);
    }
}

impl<T, K, A, KF, TF, M, G, W> Tail<T> for SplitTail<T, K, A, KF, TF, M, G, W>
where
    T: ExchangeData,
    K: Record + Hash + Eq,
    A: AggregateFunction<T>,
    KF: Fn(&T) -> K + 'static,
    TF: Fn(&T) -> u64 + 'static,
    Partial<K, A::Acc>: Record,
    M: MapKind<K>,
    G: Gate<K, T>,
    W: super::windows::WindowSpec,
{
    #[inline(always)]
    fn push(&mut self, item: T, cx: &mut Cx<'_, '_>) {
        let Some(item) = self.records.admit(item, cx) else {
            return;
        };
        let h = key_hash(&(self.records.key)(&item));
        match self.hot.group_unless_hot(h) {
            Some(g) => {
                let dest = if self.tables_move {
                    cx.owner_of_group(self.records.out.edge(), g)
                } else {
                    self.hot.owner_of_group(g)
                };
                self.records.out.push(dest, item, cx)
            }
            None => self.push_hot(item, cx),
        }
    }
    fn watermark(&mut self, wm: u64, cx: &mut Cx<'_, '_>) {
        self.records.watermark(wm, cx);
        self.partials.watermark(wm, cx);
    }
    fn tick(&mut self, cx: &mut Cx<'_, '_>) {
        self.records.tick(cx);
        self.partials.tick(cx);
        if self.hot.is_on() {
            self.hot.tick(std::time::Instant::now());
        }
    }
    fn end(&mut self, final_wm: u64, cx: &mut Cx<'_, '_>) {
        self.records.end(final_wm, cx);
        self.partials.end(final_wm, cx);
    }
    fn barrier(&mut self, id: u64, cx: &mut Cx<'_, '_>) {
        self.records.barrier(id, cx);
        self.partials.barrier(id, cx);
    }
    fn barrier_safe(&self) -> bool {
        true
    }
    fn report(&mut self, stats: &mut Stats) {
        self.records.report(stats);
        self.partials.report(stats);
        let f = self.hot.figures;
        stats.add("hot_records", f.hot_records);
        stats.add("hot_partials", self.partials.out.records);
        stats.add("hot_group_changes", f.changes);
        stats.max("hot_groups_max", f.hot_max);
    }
}
