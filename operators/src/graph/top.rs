//! The best `n` rows of every window: after a windowed aggregate, keyed by
//! the window, each window's rows meet at one worker, which emits the `n`
//! with the largest score (best first, each with its rank: [`Ranked`])
//! when the watermark passes the window's end.
//!
//! [`TopNExt::top_n`] and [`MaxByWindowExt::max_by_window`] combine before
//! their exchange: each worker keeps only its own best rows of every window
//! ([`LocalTop`], a partial top — the best of the workers' bests is the
//! best) and sends them to the window's owner when its watermark passes the
//! window's end, so a window of many rows (one per key) costs its owner a
//! few rows per worker, not one per key.
//!
//! ```
//! use air_operators::graph::*;
//! use air_runtime::dataflow::{run_graph, VecSource};
//! use air_runtime::JobConfig;
//! use std::sync::{Arc, Mutex};
//!
//! let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
//! let top = Arc::new(Mutex::new(Vec::new()));
//! let out = top.clone();
//! run_graph(&cfg, move |df| {
//!     // (user, time): user u clicks u times in the first second (out of
//!     // order across users: the watermark trails by 10 ms).
//!     let clicks: Vec<(u32, u64)> = (1..=5u32)
//!         .flat_map(|u| (0..u).map(move |i| (u, i as u64)))
//!         .filter(|c| c.0 as usize % df.workers() == df.index())
//!         .collect();
//!     let out = out.clone();
//!     df.source(VecSource::new(clicks))
//!         .event_time(|c| c.1, 10)
//!         .key_by(|c| c.0)
//!         .window(Tumbling::ms(1000), |c| c.1)
//!         .aggregate(Count)
//!         .key_by(|r| r.start)
//!         .top_n(3, |r| r.value)
//!         // A `Ranked` row reads as the row it wraps, plus its `rank`.
//!         .for_each(move |r| out.lock().unwrap().push((r.rank, r.key, r.value)));
//! })
//! .unwrap();
//! assert_eq!(*top.lock().unwrap(), [(1, 5, 5), (2, 4, 4), (3, 3, 3)]);
//! ```

use super::window::WindowRow;
use air_runtime::dataflow::{
    Cx, Head, Identity, KeyedStream, OpHead, Operator, Outbox, Pipe, Stats, Stream, Tail,
};
use air_runtime::{key_hash, Record};
use rkyv::{Archive, Deserialize, Serialize};
use std::collections::BTreeMap;
use std::hash::Hash;
use std::ops::{Deref, DerefMut};

/// A row of [`TopNExt::top_n`] with its rank in its window: 1 for the
/// window's best row, then 2, 3, … up to `n` (consecutive, one rank per
/// row: SQL's `ROW_NUMBER`, not `RANK`; the tie rule is
/// [`TopNExt::top_n`]'s). It reads as the row it wraps (`Deref`):
/// `r.key`, `r.value` and `r.start` are the row's, `r.rank` its rank, and
/// `r.row` (or [`Ranked::into_row`]) the row itself.
///
/// ```
/// use air_operators::graph::{Ranked, Windowed};
/// let r = Ranked { rank: 1, row: Windowed { start: 0, end: 10, key: 7u32, value: 3u64 } };
/// assert_eq!((r.start, r.rank, r.key, r.value), (0, 1, 7, 3));
/// assert_eq!(r.into_row().key, 7);
/// ```
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Archive,
    Serialize,
    Deserialize,
    serde::Serialize,
    serde::Deserialize,
)]
pub struct Ranked<T> {
    /// The row's 1-based position in its window's top, best first.
    pub rank: u32,
    /// The row.
    pub row: T,
}

impl<T> Ranked<T> {
    /// The row, without its rank.
    pub fn into_row(self) -> T {
        self.row
    }
}

impl<T> Deref for Ranked<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.row
    }
}

impl<T> DerefMut for Ranked<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.row
    }
}

impl<T: WindowRow> WindowRow for Ranked<T> {
    fn window_end(&self) -> u64 {
        self.row.window_end()
    }
}

/// `top_n` on a stream of window rows keyed by their window.
pub trait TopNExt<H: Head, P: Pipe<H::Out>> {
    /// Each window's `n` rows with the largest `score` (fewer if the window
    /// has fewer rows), best first, each with its rank ([`Ranked`]: 1 to
    /// `n`), emitted when the watermark passes the window's end. Each
    /// worker sends only its own `n` best rows of a window ([`LocalTop`]);
    /// the rank is assigned at the window's owner as the window is emitted.
    ///
    /// Ranks are positions in the order of `score`, largest first: every
    /// row gets its own rank, also when scores are equal (`ROW_NUMBER`).
    /// Rows of equal score keep the order in which they reached the
    /// window's owner, which depends on the number of workers and on
    /// timing: so the score at each rank is deterministic, but which of
    /// the tied rows gets which rank (and, tied at the `n`-th place, which
    /// is kept) is not. For deterministic rows put a tie-breaker in the
    /// score, e.g. `(count, Reverse(key))`: the smaller key first.
    ///
    /// Fails the graph (an error from `run`) if `n` is 0. Example: the
    /// [module](self).
    fn top_n<S, SF>(self, n: usize, score: SF) -> Stream<OpHead<RankedTopN<P::Out, SF>>, Identity>
    where
        S: Ord + 'static,
        SF: Fn(&P::Out) -> S + Clone + 'static;
}

impl<H, P, KF, K> TopNExt<H, P> for KeyedStream<H, P, KF>
where
    H: Head,
    P: Pipe<H::Out>,
    P::Out: Record + WindowRow,
    K: Hash + 'static,
    KF: Fn(&P::Out) -> K + 'static,
{
    fn top_n<S, SF>(self, n: usize, score: SF) -> Stream<OpHead<RankedTopN<P::Out, SF>>, Identity>
    where
        S: Ord + 'static,
        SF: Fn(&P::Out) -> S + Clone + 'static,
    {
        let (stream, key) = self.into_parts();
        let df = stream.dataflow().clone();
        if n == 0 {
            df.fail("top_n(0, …) keeps nothing: n must be at least 1");
        }
        let edge = df.new_edge("top-n");
        let out = df.outbox::<P::Out>(edge);
        let (key, key_hash) = shared_key(key);
        stream.end_in(LocalTop::new(out, key, n, false, score.clone()));
        df.consume(
            edge,
            RankedTopN(WindowTopN {
                n,
                ties: false,
                score,
                open: BTreeMap::new(),
                unfired: 0,
                counter: "unfired_windows",
                windows: 0,
                key_hash: Some(key_hash),
            }),
        )
    }
}

/// `max_by_window` on a stream of window rows keyed by their window.
///
/// ```
/// use air_operators::graph::*;
/// use air_runtime::dataflow::{run_graph, VecSource};
/// use air_runtime::JobConfig;
/// use std::sync::{Arc, Mutex};
///
/// let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
/// let best = Arc::new(Mutex::new(Vec::new()));
/// let out = best.clone();
/// run_graph(&cfg, move |df| {
///     // (user, time): users 1 and 3 click 3 times, user 2 once.
///     let clicks: Vec<(u32, u64)> = [(1, 0), (1, 1), (1, 2), (2, 3), (3, 4), (3, 5), (3, 6)]
///         .into_iter()
///         .filter(|c: &(u32, u64)| c.0 as usize % df.workers() == df.index())
///         .collect();
///     let out = out.clone();
///     df.source(VecSource::new(clicks))
///         .event_time(|c| c.1, 10)
///         .key_by(|c| c.0)
///         .window(Tumbling::ms(1000), |c| c.1)
///         .aggregate(Count)
///         .key_by(|r| r.start)
///         .max_by_window(|r| r.value)
///         .for_each(move |r| out.lock().unwrap().push((r.key, r.value)));
/// })
/// .unwrap();
/// let mut best = best.lock().unwrap().clone();
/// best.sort();
/// assert_eq!(best, [(1, 3), (3, 3)]);
/// ```
pub trait MaxByWindowExt<H: Head, P: Pipe<H::Out>> {
    /// Each window's rows with the largest `score`, every row tied for it
    /// kept (in arrival order), emitted when the watermark passes the
    /// window's end (e.g. NEXMark's hottest auctions, ties all listed).
    /// Each worker sends only its own best rows of a window (its ties
    /// included; [`LocalTop`]).
    fn max_by_window<S, SF>(self, score: SF) -> Stream<OpHead<WindowTopN<P::Out, SF>>, Identity>
    where
        S: Ord + 'static,
        SF: Fn(&P::Out) -> S + Clone + 'static;
}

impl<H, P, KF, K> MaxByWindowExt<H, P> for KeyedStream<H, P, KF>
where
    H: Head,
    P: Pipe<H::Out>,
    P::Out: Record + WindowRow,
    K: Hash + 'static,
    KF: Fn(&P::Out) -> K + 'static,
{
    fn max_by_window<S, SF>(self, score: SF) -> Stream<OpHead<WindowTopN<P::Out, SF>>, Identity>
    where
        S: Ord + 'static,
        SF: Fn(&P::Out) -> S + Clone + 'static,
    {
        let (stream, key) = self.into_parts();
        let df = stream.dataflow().clone();
        let edge = df.new_edge("max-by-window");
        let out = df.outbox::<P::Out>(edge);
        let (key, key_hash) = shared_key(key);
        stream.end_in(LocalTop::new(out, key, usize::MAX, true, score.clone()));
        df.consume(
            edge,
            WindowTopN {
                n: usize::MAX,
                ties: true,
                score,
                open: BTreeMap::new(),
                unfired: 0,
                counter: "unfired_windows",
                windows: 0,
                key_hash: Some(key_hash),
            },
        )
    }
}

/// The top-`n` operator at a window's owner.
pub struct WindowTopN<T, SF> {
    n: usize,
    /// Keep every row tied for the best score instead of `n` rows
    /// ([`MaxByWindowExt::max_by_window`]).
    ties: bool,
    score: SF,
    /// Rows by window end.
    open: BTreeMap<u64, Vec<T>>,
    unfired: u64,
    /// The counter its unfired windows go to.
    counter: &'static str,
    /// Windows emitted.
    windows: u64,
    /// The hash of a row's key, by which it was routed here (`None`: every
    /// row went to worker 0). Used on a resume at another worker count.
    key_hash: Option<KeyHash<T>>,
}

/// A row's key hash ([`air_runtime::key_hash`] of its key).
type KeyHash<T> = std::rc::Rc<dyn Fn(&T) -> u64>;

/// A key function shared by the combiner that routes rows by it and the
/// operator that may need it again on a resume at another worker count.
fn shared_key<T: 'static, K: Hash + 'static>(
    key: impl Fn(&T) -> K + 'static,
) -> (impl Fn(&T) -> K + 'static, KeyHash<T>) {
    let key = std::rc::Rc::new(key);
    let again = key.clone();
    (
        move |r: &T| key(r),
        std::rc::Rc::new(move |r: &T| air_runtime::key_hash(&again(r))) as KeyHash<T>,
    )
}

impl<T, SF> WindowTopN<T, SF>
where
    T: Record + WindowRow,
    SF: Score<T>,
{
    /// Its state at a checkpoint: every open window's rows, window by
    /// window, in arrival order.
    fn save_rows(&self) -> Vec<u8> {
        let rows: Vec<T> = self.open.values().flatten().cloned().collect();
        air_runtime::dataflow::state::records_to_bytes(&rows)
    }

    /// On a resume at another worker count: every old worker's rows whose
    /// key this worker owns now (unkeyed: every row, at worker 0, where
    /// every row of this operator goes).
    fn rescale_rows(
        &mut self,
        states: &[&[u8]],
        to: air_runtime::dataflow::state::Rescale,
    ) -> Result<(), String> {
        // Replaces what it kept (a move of key groups during a job).
        self.open.clear();
        for state in states {
            for r in air_runtime::dataflow::state::records_from_bytes::<T>(state)? {
                let mine = match &self.key_hash {
                    Some(h) => to.groups.owner(h(&r)) == to.worker,
                    None => to.worker == 0,
                };
                if mine {
                    self.open.entry(r.window_end()).or_default().push(r);
                }
            }
        }
        Ok(())
    }

    /// Takes back what [`WindowTopN::save_rows`] gave.
    fn restore_rows(&mut self, state: &[u8]) -> Result<(), String> {
        for r in air_runtime::dataflow::state::records_from_bytes::<T>(state)? {
            self.open.entry(r.window_end()).or_default().push(r);
        }
        Ok(())
    }

    /// Adds a batch of rows to their windows.
    fn add(&mut self, items: &[T::Item]) {
        for a in items {
            let r = T::from_archived(a);
            self.open.entry(r.window_end()).or_default().push(r);
        }
    }

    /// Emits the rows of every window ending at or before `wm`, each with
    /// its 1-based position in its window's order (1 for every tie).
    fn fire<E: FnMut(u32, T)>(&mut self, wm: u64, emit: &mut E) {
        while let Some(entry) = self.open.first_entry() {
            if *entry.key() > wm {
                break;
            }
            let mut rows = entry.remove();
            self.windows += 1;
            let score = &self.score;
            if self.ties {
                let Some(best) = rows.iter().map(|r| score.score(r)).max() else {
                    continue;
                };
                for r in rows {
                    if score.score(&r) == best {
                        emit(1, r);
                    }
                }
                continue;
            }
            // Stable: equal scores keep their arrival order.
            rows.sort_by_cached_key(|r| std::cmp::Reverse(score.score(r)));
            for (i, r) in rows.into_iter().take(self.n).enumerate() {
                emit(u32::try_from(i + 1).unwrap_or(u32::MAX), r);
            }
        }
    }
}

impl<T, SF> Operator for WindowTopN<T, SF>
where
    T: Record + WindowRow,
    SF: Score<T>,
{
    type In = T;
    type Out = T;

    fn on_batch<E: FnMut(T)>(&mut self, items: &[T::Item], _emit: &mut E) {
        self.add(items);
    }

    fn on_watermark<E: FnMut(T)>(&mut self, wm: u64, emit: &mut E) {
        self.fire(wm, &mut |_, r| emit(r));
    }

    fn on_end<E: FnMut(T)>(&mut self, final_wm: u64, emit: &mut E) {
        self.fire(final_wm, &mut |_, r| emit(r));
        self.unfired += self.open.len() as u64;
    }

    fn report(&mut self, stats: &mut Stats) {
        stats.add(self.counter, self.unfired);
        if self.counter != "unfired_windows" {
            stats.add("collected_windows", self.windows);
        }
    }

    fn save(&self) -> Option<Vec<u8>> {
        Some(self.save_rows())
    }

    fn restore(&mut self, state: &[u8]) -> Result<(), String> {
        self.restore_rows(state)
    }

    fn rescales(&self) -> bool {
        true
    }

    fn rescale(
        &mut self,
        states: &[&[u8]],
        to: air_runtime::dataflow::state::Rescale,
    ) -> Result<(), String> {
        self.rescale_rows(states, to)
    }
}

/// The operator of [`TopNExt::top_n`] at a window's owner: a
/// [`WindowTopN`] whose rows leave [`Ranked`].
pub struct RankedTopN<T, SF>(WindowTopN<T, SF>);

impl<T, SF> Operator for RankedTopN<T, SF>
where
    T: Record + WindowRow,
    SF: Score<T>,
{
    type In = T;
    type Out = Ranked<T>;

    fn on_batch<E: FnMut(Ranked<T>)>(&mut self, items: &[T::Item], _emit: &mut E) {
        self.0.add(items);
    }

    fn on_watermark<E: FnMut(Ranked<T>)>(&mut self, wm: u64, emit: &mut E) {
        self.0.fire(wm, &mut |rank, row| emit(Ranked { rank, row }));
    }

    fn on_end<E: FnMut(Ranked<T>)>(&mut self, final_wm: u64, emit: &mut E) {
        self.0
            .fire(final_wm, &mut |rank, row| emit(Ranked { rank, row }));
        self.0.unfired += self.0.open.len() as u64;
    }

    fn report(&mut self, stats: &mut Stats) {
        self.0.report(stats);
    }

    fn save(&self) -> Option<Vec<u8>> {
        Some(self.0.save_rows())
    }

    fn restore(&mut self, state: &[u8]) -> Result<(), String> {
        self.0.restore_rows(state)
    }

    fn rescales(&self) -> bool {
        true
    }

    fn rescale(
        &mut self,
        states: &[&[u8]],
        to: air_runtime::dataflow::state::Rescale,
    ) -> Result<(), String> {
        self.0.rescale_rows(states, to)
    }
}

/// A partial top of every window at one worker (a combiner): the end of
/// the segment before the exchange of [`TopNExt::top_n`] and
/// [`MaxByWindowExt::max_by_window`], which use it. Of the rows of each
/// window (told apart by [`WindowRow::window_end`]) it keeps only this
/// worker's `n` best by `score` (ties in arrival order) or, with `ties`,
/// every row tied for the best score; it sends them to their key's owner
/// when its watermark passes the window's end (every row still kept at the
/// end of the stream). The best of the workers' bests is the best, so the
/// owner emits the rows it would emit without it, but receives at most `n`
/// rows (or the ties) per worker and window instead of every row.
///
/// A row of a window whose end the watermark already passed goes on at
/// once. Memory: the rows kept of the windows still open.
pub struct LocalTop<T, KF, SF: Score<T>> {
    out: Outbox<T>,
    key: KF,
    n: usize,
    ties: bool,
    score: SF,
    /// Open windows by end, ascending (few: those not yet closed), each
    /// with the best score so far (`ties`) and the rows kept.
    open: Vec<(u64, Kept<T, SF::Key>)>,
    /// Index in `open` of the window rows last went to.
    hot: usize,
    /// The watermark, ms: windows ending at or before it were sent.
    wm: u64,
}

/// The rows a [`LocalTop`] keeps of one window.
struct Kept<T, S> {
    best: Option<S>,
    rows: Vec<T>,
}

impl<T, KF, SF: Score<T>> LocalTop<T, KF, SF> {
    /// Keeps the `n` best rows by `score` of every window (with `ties`:
    /// every row tied for the best, whatever `n`) and sends them on `out`
    /// to the owner of `key(row)`.
    ///
    /// Here each worker's best row of every window goes to the window's
    /// owner as it is, without the final top of [`TopNExt::top_n`]:
    ///
    /// ```
    /// use air_operators::graph::*;
    /// use air_runtime::dataflow::{run_graph, Pass, VecSource};
    /// use air_runtime::JobConfig;
    /// use std::sync::{Arc, Mutex};
    ///
    /// type Row = Windowed<u32, u64>;
    /// let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
    /// let rows = Arc::new(Mutex::new(Vec::new()));
    /// let out = rows.clone();
    /// run_graph(&cfg, move |df| {
    ///     // (user, time ms): user u clicks u times; worker w reads every other click.
    ///     let clicks: Vec<(u32, u64)> = (1..=5u32)
    ///         .flat_map(|u| (0..u).map(move |i| (u, i as u64)))
    ///         .skip(df.index())
    ///         .step_by(2)
    ///         .collect();
    ///     let counts = df
    ///         .source(VecSource::new(clicks))
    ///         .key_by(|c| c.0)
    ///         .window(Tumbling::ms(1_000), |c| c.1)
    ///         .aggregate(Count); // one row per user, at the user's owner
    ///     // Made after the window's edge: an operator sends only on later edges.
    ///     let edge = df.new_edge("local tops");
    ///     let score = |r: &Row| r.value;
    ///     let window = |r: &Row| r.start;
    ///     counts.end_in(LocalTop::new(df.outbox::<Row>(edge), window, 1, false, score));
    ///     let out = out.clone();
    ///     df.consume(edge, Pass::<Row>::default())
    ///         .for_each(move |r| out.lock().unwrap().push((r.key, r.value)));
    /// })
    /// .unwrap();
    /// let rows = rows.lock().unwrap().clone();
    /// // One row per worker that owns a user (at most 2); the best of them is the best.
    /// assert!((1..=2).contains(&rows.len()));
    /// assert_eq!(rows.iter().max_by_key(|r| r.1), Some(&(5, 5)));
    /// ```
    pub fn new(out: Outbox<T>, key: KF, n: usize, ties: bool, score: SF) -> Self {
        LocalTop {
            out,
            key,
            n,
            ties,
            score,
            open: Vec::new(),
            hot: 0,
            wm: 0,
        }
    }

    /// The index in `open` of the window ending at `end` (added if new).
    #[inline]
    fn slot(&mut self, end: u64) -> usize {
        if self.open.get(self.hot).is_some_and(|w| w.0 == end) {
            return self.hot;
        }
        let i = match self.open.binary_search_by_key(&end, |w| w.0) {
            Ok(i) => i,
            Err(i) => {
                let kept = Kept {
                    best: None,
                    rows: Vec::new(),
                };
                self.open.insert(i, (end, kept));
                i
            }
        };
        self.hot = i;
        i
    }

    /// Keeps the `n` best of `rows` (stable: ties in arrival order).
    fn keep_n(score: &SF, n: usize, rows: &mut Vec<T>) {
        if rows.len() > n {
            rows.sort_by_cached_key(|r| std::cmp::Reverse(score.score(r)));
            rows.truncate(n);
        }
    }
}

impl<T, K, KF, SF> LocalTop<T, KF, SF>
where
    T: Record + WindowRow,
    K: Hash,
    KF: Fn(&T) -> K + 'static,
    SF: Score<T>,
{
    #[inline]
    fn send(&mut self, row: T, cx: &mut Cx<'_, '_>) {
        let h = key_hash(&(self.key)(&row));
        self.out.push_hashed(h, row, cx);
    }

    /// Sends the rows kept of every window ending at or before `wm`.
    fn send_closed(&mut self, wm: u64, cx: &mut Cx<'_, '_>) {
        let closed = self.open.iter().take_while(|w| w.0 <= wm).count();
        if closed == 0 {
            return;
        }
        self.hot = 0;
        let windows: Vec<_> = self.open.drain(..closed).collect();
        for (_, mut kept) in windows {
            if !self.ties {
                Self::keep_n(&self.score, self.n, &mut kept.rows);
            }
            for r in kept.rows {
                self.send(r, cx);
            }
        }
    }
}

impl<T, K, KF, SF> Tail<T> for LocalTop<T, KF, SF>
where
    T: Record + WindowRow,
    K: Hash,
    KF: Fn(&T) -> K + 'static,
    SF: Score<T>,
{
    #[inline]
    fn push(&mut self, row: T, cx: &mut Cx<'_, '_>) {
        let end = row.window_end();
        if end <= self.wm {
            self.send(row, cx);
            return;
        }
        let i = self.slot(end);
        let kept = &mut self.open[i].1;
        if self.ties {
            let s = self.score.score(&row);
            match &kept.best {
                Some(b) if s < *b => {}
                Some(b) if s == *b => kept.rows.push(row),
                _ => {
                    kept.best = Some(s);
                    kept.rows.clear();
                    kept.rows.push(row);
                }
            }
        } else {
            kept.rows.push(row);
            if kept.rows.len() >= self.n.saturating_mul(2).max(16) {
                Self::keep_n(&self.score, self.n, &mut kept.rows);
            }
        }
    }

    fn watermark(&mut self, wm: u64, cx: &mut Cx<'_, '_>) {
        if wm > self.wm {
            self.wm = wm;
            self.send_closed(wm, cx);
        }
        self.out.watermark(wm, cx);
    }

    fn tick(&mut self, cx: &mut Cx<'_, '_>) {
        self.out.flush(cx)
    }

    fn end(&mut self, final_wm: u64, cx: &mut Cx<'_, '_>) {
        // Everything kept goes: the owner fires only what every input read
        // past (`final_wm`) and counts the rest.
        self.send_closed(u64::MAX, cx);
        self.out.end(final_wm, cx);
    }

    fn barrier(&mut self, id: u64, cx: &mut Cx<'_, '_>) {
        // With checkpoints the rows kept of open windows leave before the
        // barrier: the owner ranks the union of every worker's partial
        // tops, and a partial top of some of a window's rows plus one of
        // the rest holds the top of all of them.
        if air_runtime::dataflow::state::enabled() {
            self.send_closed(u64::MAX, cx);
        }
        self.out.barrier(id, cx);
    }

    fn barrier_safe(&self) -> bool {
        true
    }
}

/// Sends every record to worker 0.
struct ToFirst<T> {
    out: air_runtime::dataflow::Outbox<T>,
}

impl<T: Record> air_runtime::dataflow::Tail<T> for ToFirst<T> {
    #[inline]
    fn push(&mut self, item: T, cx: &mut air_runtime::dataflow::Cx<'_, '_>) {
        self.out.push(0, item, cx)
    }
    fn watermark(&mut self, wm: u64, cx: &mut air_runtime::dataflow::Cx<'_, '_>) {
        self.out.watermark(wm, cx)
    }
    fn tick(&mut self, cx: &mut air_runtime::dataflow::Cx<'_, '_>) {
        self.out.flush(cx)
    }
    fn end(&mut self, final_wm: u64, cx: &mut air_runtime::dataflow::Cx<'_, '_>) {
        self.out.end(final_wm, cx)
    }
    fn barrier(&mut self, id: u64, cx: &mut air_runtime::dataflow::Cx<'_, '_>) {
        self.out.barrier(id, cx)
    }
    fn barrier_safe(&self) -> bool {
        true
    }
}

/// `collect_by_window` on a stream of window rows.
pub trait CollectByWindowExt<H: Head, P: Pipe<H::Out>> {
    /// Every row to worker 0 (one writer), window by window in the order
    /// the windows close, each window's rows sorted by `sort` (ascending):
    /// a window's rows leave once the watermark passes its end, so output
    /// is deterministic and still streams.
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
    ///     let me = df.index();
    ///     // (user, time ms): worker w reads every other click.
    ///     let clicks: Vec<(u32, u64)> = [(2, 0), (1, 10), (1, 20), (3, 1_200), (2, 1_500)]
    ///         .into_iter()
    ///         .skip(me)
    ///         .step_by(2)
    ///         .collect();
    ///     let out = out.clone();
    ///     df.source(VecSource::new(clicks))
    ///         .event_time(|c| c.1, 0)
    ///         .key_by(|c| c.0)
    ///         .window(Tumbling::ms(1_000), |c| c.1)
    ///         .aggregate(Count)
    ///         .collect_by_window(|r| r.key)
    ///         .for_each(move |r| out.lock().unwrap().push((me, r.start, r.key, r.value)));
    /// })
    /// .unwrap();
    /// // At worker 0, window by window, each window's rows by key (no sort here).
    /// let rows = rows.lock().unwrap().clone();
    /// assert_eq!(rows, [(0, 0, 1, 2), (0, 0, 2, 1), (0, 1_000, 2, 1), (0, 1_000, 3, 1)]);
    /// ```
    #[allow(clippy::type_complexity)]
    fn collect_by_window<S, SF>(
        self,
        sort: SF,
    ) -> Stream<OpHead<WindowTopN<P::Out, ByKey<SF>>>, Identity>
    where
        S: Ord + 'static,
        SF: Fn(&P::Out) -> S + 'static;
}

/// Ascending by a key (a score for [`WindowTopN`] that ranks the smallest
/// key first).
pub struct ByKey<SF>(SF);

impl<H, P> CollectByWindowExt<H, P> for Stream<H, P>
where
    H: Head,
    P: Pipe<H::Out>,
    P::Out: Record + WindowRow,
{
    fn collect_by_window<S, SF>(
        self,
        sort: SF,
    ) -> Stream<OpHead<WindowTopN<P::Out, ByKey<SF>>>, Identity>
    where
        S: Ord + 'static,
        SF: Fn(&P::Out) -> S + 'static,
    {
        let df = self.dataflow().clone();
        let edge = df.new_gather_edge("collect by window");
        let out = df.outbox::<P::Out>(edge);
        self.end_in(ToFirst { out });
        df.consume(
            edge,
            WindowTopN {
                n: usize::MAX,
                ties: false,
                score: ByKey(sort),
                open: BTreeMap::new(),
                unfired: 0,
                counter: "unfired_collected_windows",
                windows: 0,
                key_hash: None,
            },
        )
    }
}

/// How [`WindowTopN`] ranks rows.
pub trait Score<T>: 'static {
    /// The rank key: larger ranks first.
    type Key: Ord;
    /// The key of `r`.
    fn score(&self, r: &T) -> Self::Key;
}

impl<T, S: Ord, F: Fn(&T) -> S + 'static> Score<T> for F {
    type Key = S;
    fn score(&self, r: &T) -> S {
        self(r)
    }
}

impl<T, S: Ord, F: Fn(&T) -> S + 'static> Score<T> for ByKey<F> {
    type Key = std::cmp::Reverse<S>;
    fn score(&self, r: &T) -> std::cmp::Reverse<S> {
        std::cmp::Reverse((self.0)(r))
    }
}
