//! Event-time session windows (Flink's `EventTimeSessionWindows.withGap`):
//! per key, records closer than the gap to each other fall in one session;
//! a session is `[first, last + gap)` ms and fires (one [`Windowed`] row per
//! session and key) when the watermark passes its end.
//!
//! A record at `t` opens the window `[t, t + gap)`; windows of one key that
//! overlap merge (their accumulators by [`AggregateFunction::merge`]), so a
//! record that bridges two sessions joins them into one. Records exactly
//! `gap` apart do not overlap and stay in two sessions (Flink merges windows
//! that touch, i.e. it joins records up to `gap` apart inclusive).
//!
//! Sessions are not pre-aggregated (as in Flink, whose merging windows have
//! no combiner): every record goes to its key's owner, which keeps the open
//! sessions of its keys and frees a session's state when the watermark
//! passes end + gap + lateness (0 unless allowed): a record behind the
//! watermark whose own window `[t, t + gap)` is still open (+ lateness) may
//! bridge into a session that ended up to `gap` before, and keeping that
//! session makes the result the same whatever the timing. See
//! [`super::late`] for lateness; a session fired again supersedes the rows
//! fired before for every session it merged (same key, overlapping).
//! [`super::WindowedStream::drop_behind_watermark`] drops records behind
//! the watermark instead, and frees a session when it fires.
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
//!     // (user, time ms); worker 0 reads them all, worker 1 nothing.
//!     let clicks: Vec<(u32, u64)> = if df.index() == 0 {
//!         vec![(1, 0), (1, 400), (2, 450), (1, 1_300), (1, 850), (1, 3_000)]
//!     } else {
//!         Vec::new()
//!     };
//!     let out = out.clone();
//!     df.source(VecSource::new(clicks))
//!         .event_time(|c| c.1, 600)
//!         .key_by(|c| c.0)
//!         .window(Sessions::with_gap(500), |c| c.1)
//!         .aggregate(Count)
//!         .for_each(move |r| out.lock().unwrap().push((r.key, r.start, r.end, r.value)));
//! })
//! .unwrap();
//! let mut rows = rows.lock().unwrap().clone();
//! rows.sort();
//! // User 1: [0, 900) and [1 300, 1 800), then 850 (out of order, within
//! // the delay) bridges them: one session [0, 1 800) of 4; 3 000 alone.
//! assert_eq!(rows, [(1, 0, 1_800, 4), (1, 3_000, 3_500, 1), (2, 450, 950, 1)]);
//! ```

use super::aggregate::AggregateFunction;
use super::late::{gate_for, Gate, LatePolicy};
use super::window::{window_tail, WindowSpec, Windowed, WindowedStream};
use air_runtime::dataflow::{Head, Identity, LateRecords, OpHead, Operator, Pipe, Stats, Stream};
use air_runtime::Record;
use rkyv::{Archive, Deserialize, Serialize};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;
use std::hash::Hash;

/// Session windows of a gap, ms (> 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sessions {
    gap: u64,
}

impl Sessions {
    /// Sessions that close after `gap` ms of event time without a record
    /// of their key.
    pub fn with_gap(gap: u64) -> Sessions {
        Sessions { gap }
    }

    /// The gap, ms.
    pub fn gap(&self) -> u64 {
        self.gap
    }
}

impl WindowSpec for Sessions {
    fn last_end(&self, t: u64) -> u64 {
        t.saturating_add(self.gap)
    }
    fn check(&self) -> Result<(), String> {
        if self.gap == 0 {
            Err("a session window's gap must be at least 1 ms".into())
        } else {
            Ok(())
        }
    }
}

impl<H, P, KF, TF, K, M, L> WindowedStream<H, P, KF, TF, M, Sessions, L>
where
    H: Head,
    P: Pipe<H::Out>,
    P::Out: Record,
    K: Record + Hash + Eq,
    KF: Fn(&P::Out) -> K + Clone + 'static,
    TF: Fn(&P::Out) -> u64 + Clone + 'static,
    L: LatePolicy<K, P::Out>,
{
    /// Aggregates each session of each key with `agg`: one [`Windowed`] row
    /// per session (start = its first record's time, end = its last
    /// record's time + gap), at the key's owner, when the watermark passes
    /// the session's end. Every record goes to its key's owner (no
    /// pre-aggregation).
    #[allow(clippy::type_complexity)]
    #[track_caller]
    pub fn aggregate<A>(
        self,
        agg: A,
    ) -> Stream<OpHead<SessionWindow<K, A, P::Out, KF, TF>>, Identity>
    where
        A: AggregateFunction<P::Out>,
        SavedSession<K, A::Acc>: Record,
    {
        let label = format!("session window at {}", std::panic::Location::caller());
        let WindowedStream {
            keyed,
            windows,
            time,
            late,
            ..
        } = self;
        let (mut stream, key) = keyed.into_parts();
        let gate = gate_for(&mut stream, late);
        let lateness = gate.lateness();
        let gap = windows.gap;
        let df = stream.dataflow().clone();
        let edge = df.new_edge("session records");
        let out = df.outbox::<P::Out>(edge);
        // Records too late for their own window `[t, t + gap)` go to the
        // side stream there.
        stream.end_in(window_tail(
            out,
            key.clone(),
            time.clone(),
            windows,
            gate,
            &label,
        ));
        let keep = if <L::Gate as Gate<K, P::Out>>::ON {
            gap.saturating_add(lateness)
        } else {
            0
        };
        df.consume(
            edge,
            SessionWindow {
                keys: FxHashMap::default(),
                core: SessionCore::new(gap, lateness, keep, agg, label),
                key,
                time,
            },
        )
    }
}

/// One session of one key.
struct Session<A> {
    start: u64,
    /// Exclusive: the last record's time + gap.
    end: u64,
    acc: A,
    /// Newest event time in it (latency).
    newest: u64,
    /// Its row went out with the current accumulator.
    fired: bool,
}

/// The sessions of one key, by start (disjoint), and the time of the
/// timer that will look at them next (`u64::MAX`: none).
struct KeyState<A> {
    sessions: Vec<Session<A>>,
    timer: u64,
}

impl<A> KeyState<A> {
    /// When a timer must next look at these sessions: the end of an open
    /// one, or end + `keep` ms of a fired one kept for lateness (`None`:
    /// no sessions).
    fn next_due(&self, keep: u64) -> Option<u64> {
        self.sessions
            .iter()
            .map(|s| {
                if s.fired {
                    s.end.saturating_add(keep)
                } else {
                    s.end
                }
            })
            .min()
    }
}

/// One session of one key as a checkpoint saves it: the session
/// operator's state is the watermark it fired up to and one of these per
/// session it holds (open ones, and fired ones kept for lateness).
#[derive(Debug, Clone, Archive, Serialize, Deserialize)]
pub struct SavedSession<K, A> {
    /// The key.
    pub key: K,
    /// First record's time, ms.
    pub start: u64,
    /// Last record's time + gap, ms (exclusive).
    pub end: u64,
    /// Newest event time in it, ms (latency).
    pub newest: u64,
    /// Its row went out with this accumulator.
    pub fired: bool,
    /// The accumulator.
    pub acc: A,
}

/// The session operator's state beside its table of keys.
struct SessionCore<K, A: AggregateFunction<T>, T> {
    gap: u64,
    lateness: u64,
    /// How long after its end a fired session is kept, ms (0 without
    /// lateness; gap + lateness with it).
    keep: u64,
    agg: A,
    /// Timers by time, the keys due then; a key's valid one is at its
    /// `KeyState::timer`, others are stale and skipped. (Grouped by
    /// millisecond: at high rates many keys share one, and a B-tree over
    /// the times in flight stays small and cache-friendly where a binary
    /// heap of every timer did not: its pops were a quarter of NEXMark
    /// q18's time.)
    timers: BTreeMap<u64, Vec<K>>,
    /// Emptied key lists of fired times, reused for new times.
    spare: Vec<Vec<K>>,
    /// The watermark fired up to, ms.
    fired: u64,
    /// Records too late here (a stream fed by an edge), the first of them.
    late: Option<LateRecords>,
    /// The late records' label ([`air_runtime::dataflow::LateLog`]).
    label: String,
    rows: u64,
    refired: u64,
    unfired: u64,
    /// Sessions held now, and the most held at once.
    open: u64,
    open_max: u64,
    /// Sessions joined to another by a record that bridged them.
    merged: u64,
    wm_lag: u64,
    latency: air_runtime::metrics::Histogram<u64>,
    samples: Vec<u64>,
    _t: std::marker::PhantomData<fn(&T)>,
}

impl<K: Clone, A: AggregateFunction<T>, T> SessionCore<K, A, T> {
    /// No sessions yet: gap, allowed lateness and how long a fired session
    /// is kept, ms; `label` names it in late-record reports.
    fn new(gap: u64, lateness: u64, keep: u64, agg: A, label: String) -> Self {
        SessionCore {
            gap,
            lateness,
            keep,
            agg,
            timers: BTreeMap::new(),
            spare: Vec::new(),
            fired: 0,
            late: None,
            label,
            rows: 0,
            refired: 0,
            unfired: 0,
            open: 0,
            open_max: 0,
            merged: 0,
            wm_lag: 0,
            latency: air_runtime::metrics::latency_histogram(),
            samples: Vec::new(),
            _t: std::marker::PhantomData,
        }
    }

    /// Makes sure `ks` has a timer at or before `at`.
    fn ensure(&mut self, ks: &mut KeyState<A::Acc>, key: &K, at: u64) {
        if at < ks.timer {
            ks.timer = at;
            let spare = &mut self.spare;
            self.timers
                .entry(at)
                .or_insert_with(|| spare.pop().unwrap_or_default())
                .push(key.clone());
        }
    }

    /// Its state at a checkpoint: the watermark it fired up to, then every
    /// session of `keys` ([`SavedSession`]).
    fn save(&self, keys: &FxHashMap<K, KeyState<A::Acc>>) -> Vec<u8>
    where
        SavedSession<K, A::Acc>: Record,
    {
        let rows: Vec<SavedSession<K, A::Acc>> = keys
            .iter()
            .flat_map(|(key, ks)| {
                ks.sessions.iter().map(|s| SavedSession {
                    key: key.clone(),
                    start: s.start,
                    end: s.end,
                    newest: s.newest,
                    fired: s.fired,
                    acc: s.acc.clone(),
                })
            })
            .collect();
        air_runtime::dataflow::state::frame(
            &[self.fired],
            &air_runtime::dataflow::state::records_to_bytes(&rows),
        )
    }

    /// Drops every timer (the keys' sessions go with the caller's map):
    /// before a [`SessionCore::restore`] that replaces what it held.
    fn clear(&mut self) {
        self.timers.clear();
        self.open = 0;
    }

    /// Takes back the sessions that [`SessionCore::save`] gave in `states`
    /// (one state; or, on a resume at another worker count, every old
    /// worker's, keeping the keys `to` owns now). It fired up to the
    /// smallest saved watermark (as the window owners do: a session fired
    /// at its old owner comes back marked fired, so it is not fired twice).
    fn restore(
        &mut self,
        keys: &mut FxHashMap<K, KeyState<A::Acc>>,
        states: &[&[u8]],
        to: Option<&air_runtime::dataflow::state::Rescale>,
    ) -> Result<(), String>
    where
        K: Hash + Eq,
        SavedSession<K, A::Acc>: Record,
    {
        use air_runtime::dataflow::state::{records_from_bytes, unframe_one};
        let mut fired = None::<u64>;
        for state in states {
            let (f, body) = unframe_one(state, "session")?;
            fired = Some(fired.map_or(f, |m| m.min(f)));
            for s in records_from_bytes::<SavedSession<K, A::Acc>>(body)? {
                if to.is_some_and(|to| !to.owns(&s.key)) {
                    continue;
                }
                if s.start >= s.end {
                    return Err(format!(
                        "a saved session ends ({}) before it starts ({})",
                        s.end, s.start
                    ));
                }
                let ks = keys.entry(s.key).or_insert_with(|| KeyState {
                    sessions: Vec::with_capacity(1),
                    timer: u64::MAX,
                });
                ks.sessions.push(Session {
                    start: s.start,
                    end: s.end,
                    acc: s.acc,
                    newest: s.newest,
                    fired: s.fired,
                });
            }
        }
        self.fired = fired.unwrap_or(0);
        let keep = self.keep;
        for (key, ks) in keys.iter_mut() {
            ks.sessions.sort_by_key(|s| s.start);
            if ks.sessions.windows(2).any(|w| w[0].end > w[1].start) {
                return Err("saved sessions of one key overlap".into());
            }
            self.open += ks.sessions.len() as u64;
            if let Some(at) = ks.next_due(keep) {
                self.ensure(ks, key, at);
            }
        }
        self.open_max = self.open_max.max(self.open);
        Ok(())
    }

    fn row(&mut self, key: &K, s: &Session<A::Acc>, now: u64) -> Windowed<K, A::Out> {
        let l = now.saturating_sub(s.newest);
        let _ = self.latency.record(l);
        self.samples.push(l);
        self.rows += 1;
        Windowed {
            start: s.start,
            end: s.end,
            key: key.clone(),
            value: self.agg.result(&s.acc),
        }
    }

    /// Adds record `x` at `t` to the sessions of `key`, merging the ones
    /// its window overlaps; fires the session at once if it already ended.
    fn add<E: FnMut(Windowed<K, A::Out>)>(
        &mut self,
        ks: &mut KeyState<A::Acc>,
        key: &K,
        t: u64,
        x: &T,
        emit: &mut E,
    ) {
        let end = t.saturating_add(self.gap);
        let v = &mut ks.sessions;
        // Sessions are disjoint and sorted by start: the ones [t, end)
        // overlaps are consecutive.
        let i = v.iter().position(|s| s.end > t).unwrap_or(v.len());
        let mut j = i;
        while j < v.len() && v[j].start < end {
            j += 1;
        }
        let new = i == j;
        if new {
            v.insert(
                i,
                Session {
                    start: t,
                    end,
                    acc: self.agg.create(),
                    newest: t,
                    fired: false,
                },
            );
            self.open += 1;
            self.open_max = self.open_max.max(self.open);
        } else {
            self.open -= (j - i - 1) as u64;
            self.merged += (j - i - 1) as u64;
            if j > i + 1 {
                let (head, rest) = v.split_at_mut(i + 1);
                let first = &mut head[i];
                for s in rest[..j - i - 1].iter_mut() {
                    let acc = std::mem::replace(&mut s.acc, self.agg.create());
                    self.agg.merge(&mut first.acc, acc);
                    first.end = first.end.max(s.end);
                    first.newest = first.newest.max(s.newest);
                }
                v.drain(i + 1..j);
            }
            let first = &mut v[i];
            first.start = first.start.min(t);
            first.end = first.end.max(end);
        }
        let s = &mut ks.sessions[i];
        self.agg.add(&mut s.acc, x);
        s.newest = s.newest.max(t);
        if s.end <= self.fired {
            // Ended already (a late record within lateness): fire now.
            s.fired = true;
            let due = s.end.saturating_add(self.keep);
            let now = crate::now_ms();
            let r = self.row(key, &ks.sessions[i], now);
            self.refired += 1;
            emit(r);
            self.ensure(ks, key, due);
        } else {
            // Open (again, if it merged fired sessions kept for lateness,
            // whose timers may be later than its end).
            s.fired = false;
            let due = s.end;
            self.ensure(ks, key, due);
        }
    }

    /// Fires the sessions of `ks` that ended by `wm`, frees the ones kept
    /// long enough, and sets its next timer. Returns whether `ks` is empty.
    fn visit<E: FnMut(Windowed<K, A::Out>)>(
        &mut self,
        ks: &mut KeyState<A::Acc>,
        key: &K,
        wm: u64,
        now: u64,
        emit: &mut E,
    ) -> bool {
        ks.timer = u64::MAX;
        for i in 0..ks.sessions.len() {
            let s = &ks.sessions[i];
            if !s.fired && s.end <= wm {
                let r = self.row(key, s, now);
                ks.sessions[i].fired = true;
                emit(r);
            }
        }
        let keep = self.keep;
        let held = ks.sessions.len();
        ks.sessions
            .retain(|s| !(s.fired && s.end.saturating_add(keep) <= wm));
        self.open -= (held - ks.sessions.len()) as u64;
        match ks.next_due(keep) {
            Some(at) => {
                self.ensure(ks, key, at);
                false
            }
            None => true,
        }
    }
}

/// The session window operator at a key's owner, fed by every record.
pub struct SessionWindow<K, A: AggregateFunction<T>, T, KF, TF> {
    keys: FxHashMap<K, KeyState<A::Acc>>,
    core: SessionCore<K, A, T>,
    key: KF,
    time: TF,
}

impl<K, A, T, KF, TF> Operator for SessionWindow<K, A, T, KF, TF>
where
    K: Record + Hash + Eq,
    A: AggregateFunction<T>,
    T: Record,
    KF: Fn(&T) -> K + 'static,
    TF: Fn(&T) -> u64 + 'static,
    SavedSession<K, A::Acc>: Record,
{
    type In = T;
    type Out = Windowed<K, A::Out>;

    fn on_batch<E: FnMut(Self::Out)>(&mut self, items: &[T::Item], emit: &mut E) {
        for a in items {
            let x = T::from_archived(a);
            let t = (self.time)(&x);
            let c = &mut self.core;
            // Its own window ended more than lateness ago: late (the
            // sender judged it against a watermark at least this one, so
            // only a stream fed by an edge gets here).
            if t.saturating_add(c.gap).saturating_add(c.lateness) <= c.fired {
                LateRecords::count(&mut c.late, t, c.fired);
                continue;
            }
            let k = (self.key)(&x);
            match self.keys.get_mut(&k) {
                Some(ks) => c.add(ks, &k, t, &x, emit),
                None => {
                    let mut ks = KeyState {
                        sessions: Vec::with_capacity(1),
                        timer: u64::MAX,
                    };
                    c.add(&mut ks, &k, t, &x, emit);
                    self.keys.insert(k, ks);
                }
            }
        }
        if !self.core.samples.is_empty() {
            let samples = std::mem::take(&mut self.core.samples);
            air_runtime::timeline::record_latency(|h| {
                for &l in &samples {
                    let _ = h.record(l);
                }
            });
        }
    }

    fn on_watermark<E: FnMut(Self::Out)>(&mut self, wm: u64, emit: &mut E) {
        let c = &mut self.core;
        if wm <= c.fired {
            return;
        }
        c.fired = wm;
        let now = crate::now_ms();
        if wm != u64::MAX {
            c.wm_lag = c.wm_lag.max(now.saturating_sub(wm));
        }
        while let Some(due) = c.timers.first_entry() {
            if *due.key() > wm {
                break;
            }
            // Visiting sets timers only after `wm` (sessions not yet
            // ended, or kept until after it): never in this list.
            let (at, mut keys) = due.remove_entry();
            for key in keys.drain(..) {
                let Some(ks) = self.keys.get_mut(&key) else {
                    continue;
                };
                if ks.timer != at {
                    continue;
                }
                if c.visit(ks, &key, wm, now, emit) {
                    self.keys.remove(&key);
                }
            }
            c.spare.push(keys);
        }
        if wm == u64::MAX {
            // The end of every input: a session ending at `u64::MAX` (a gap
            // that saturated) has no timer (`u64::MAX` means none): fire
            // what is left.
            self.keys.retain(|key, ks| !c.visit(ks, key, wm, now, emit));
        }
        if !c.samples.is_empty() {
            let samples = std::mem::take(&mut c.samples);
            air_runtime::timeline::record_latency(|h| {
                for &l in &samples {
                    let _ = h.record(l);
                }
            });
        }
    }

    fn on_end<E: FnMut(Self::Out)>(&mut self, final_wm: u64, emit: &mut E) {
        self.on_watermark(final_wm, emit);
        self.core.unfired += self
            .keys
            .values()
            .flat_map(|ks| ks.sessions.iter())
            .filter(|s| !s.fired)
            .count() as u64;
    }

    fn report(&mut self, stats: &mut Stats) {
        let c = &mut self.core;
        stats.add("window_rows", c.rows);
        stats.add("refired_rows", c.refired);
        stats.add_late(&c.label, c.late);
        stats.add("unfired_windows", c.unfired);
        stats.add("session_merges", c.merged);
        stats.max("sessions_open_max", c.open_max);
        stats.max("watermark_lag_max_ms", c.wm_lag);
        let _ = stats.latency.add(&c.latency);
    }

    fn save(&self) -> Option<Vec<u8>> {
        Some(self.core.save(&self.keys))
    }

    fn restore(&mut self, state: &[u8]) -> Result<(), String> {
        self.core.restore(&mut self.keys, &[state], None)
    }

    fn rescales(&self) -> bool {
        true
    }

    fn rescale(
        &mut self,
        states: &[&[u8]],
        to: air_runtime::dataflow::state::Rescale,
    ) -> Result<(), String> {
        // Replaces what it kept (a move of key groups during a job).
        self.keys.clear();
        self.core.clear();
        self.core.restore(&mut self.keys, states, Some(&to))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Count;
    use air_runtime::dataflow::state::Rescale;
    use air_runtime::keygroups::KeyGroups;
    use air_runtime::ExchangeData;

    type Rec = (u64, u64);

    /// Sessions of gap 50 ms per key `x.0 % 7`, times `x.1`, kept 50 ms
    /// after they fire (lateness 0, as with Flink's rule).
    fn op() -> SessionWindow<u64, Count, Rec, impl Fn(&Rec) -> u64, impl Fn(&Rec) -> u64> {
        SessionWindow {
            keys: FxHashMap::default(),
            core: SessionCore::new(50, 0, 50, Count, "test".into()),
            key: |x: &Rec| x.0 % 7,
            time: |x: &Rec| x.1,
        }
    }

    /// (round it came out in, key, start, end, count): a row must come out
    /// when the uninterrupted operator emits it, not just some time.
    type Row = (u64, u64, u64, u64, u64);

    /// Rounds of records out of order (up to 40 ms behind the newest),
    /// with gaps between bursts so sessions close, merge and fire again.
    fn rounds() -> Vec<Vec<Rec>> {
        (0..60u64)
            .map(|r| {
                (0..5)
                    .map(|i| {
                        let n = r * 5 + i;
                        let t = r * 23 + (n * 17 % 41) + if r % 9 < 2 { 0 } else { 90 * (r / 9) };
                        (n, t)
                    })
                    .collect()
            })
            .collect()
    }

    fn feed<O>(
        op: &mut O,
        data: &[Vec<Rec>],
        rounds: std::ops::Range<usize>,
        mine: &dyn Fn(u64) -> bool,
        rows: &mut Vec<Row>,
    ) where
        O: Operator<In = Rec, Out = Windowed<u64, u64>>,
    {
        for r in rounds {
            let v: Vec<Rec> = data[r].iter().copied().filter(|x| mine(x.0 % 7)).collect();
            let b = Rec::to_bytes(&v);
            let r64 = r as u64;
            op.on_batch(Rec::read_batch(&b).unwrap(), &mut |w| {
                rows.push((r64, w.key, w.start, w.end, w.value))
            });
            // The newest time so far less 40 ms, as an event-time stage
            // with that delay would say.
            let newest = data[..=r].iter().flatten().map(|x| x.1).max().unwrap();
            op.on_watermark(newest.saturating_sub(40), &mut |w| {
                rows.push((r64, w.key, w.start, w.end, w.value))
            });
        }
    }

    fn uninterrupted(data: &[Vec<Rec>]) -> Vec<Row> {
        let mut want = Vec::new();
        let mut all = op();
        feed(&mut all, data, 0..data.len(), &|_| true, &mut want);
        all.on_end(u64::MAX, &mut |w| {
            want.push((u64::MAX, w.key, w.start, w.end, w.value))
        });
        want.sort_unstable();
        want
    }

    /// Saved mid-stream and restored into a fresh operator: the rows of
    /// both halves are those of one operator that never stopped (sessions
    /// open at the barrier, and fired ones kept for a bridging record,
    /// carried over with their timers).
    #[test]
    fn a_saved_session_window_resumes_where_it_stopped() {
        let data = rounds();
        let want = uninterrupted(&data);
        assert!(want.len() > 20, "{want:?}");
        for cut in [1, 13, 30, 47] {
            let mut got = Vec::new();
            let mut first = op();
            feed(&mut first, &data, 0..cut, &|_| true, &mut got);
            let state = first.save().unwrap();
            assert!(first.core.open > 0 || cut == 1, "sessions open at the cut");
            let mut second = op();
            second.restore(&state).unwrap();
            assert_eq!(second.core.fired, first.core.fired);
            feed(&mut second, &data, cut..data.len(), &|_| true, &mut got);
            second.on_end(u64::MAX, &mut |w| {
                got.push((u64::MAX, w.key, w.start, w.end, w.value))
            });
            got.sort_unstable();
            assert_eq!(got, want, "cut after round {cut}");
        }
        assert!(op().restore(b"not a state").is_err());
    }

    /// Saved at 2 workers (each with its keys' records), resumed at 3:
    /// each new worker takes the sessions of the keys it owns now.
    #[test]
    fn a_saved_session_window_rescales_by_key_group() {
        let data = rounds();
        let want = uninterrupted(&data);
        let owner = |k: u64, w: usize| {
            KeyGroups::new(128, w)
                .unwrap()
                .owner(air_runtime::key_hash(&k))
        };
        let mut got = Vec::new();
        let saved: Vec<Vec<u8>> = (0..2)
            .map(|w| {
                let mut op = op();
                feed(&mut op, &data, 0..25, &|k| owner(k, 2) == w, &mut got);
                op.save().unwrap()
            })
            .collect();
        let states: Vec<&[u8]> = saved.iter().map(|s| s.as_slice()).collect();
        for w in 0..3 {
            let mut op = op();
            assert!(op.rescales());
            let to = Rescale {
                worker: w,
                workers: 3,
                from: 2,
                groups: KeyGroups::new(128, 3).unwrap().into(),
            };
            op.rescale(&states, to).unwrap();
            feed(
                &mut op,
                &data,
                25..data.len(),
                &|k| owner(k, 3) == w,
                &mut got,
            );
            op.on_end(u64::MAX, &mut |r| {
                got.push((u64::MAX, r.key, r.start, r.end, r.value))
            });
        }
        got.sort_unstable();
        assert_eq!(got, want);
    }
}
