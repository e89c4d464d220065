//! Event-time windows and aggregates: assignment, partial (per worker,
//! before the exchange) and final (at the key's owner) aggregation.
//!
//! Definitions (as in the Dataflow model / Flink):
//! - A tumbling window of size `s` holds `[k·s, (k+1)·s)`; an event at time
//!   `t` belongs to the window starting at `floor(t / s) · s`, so an event at
//!   exactly `k·s` opens window `k`.
//! - A sliding window of size `s` and slide `d` (`d` divides... any `d ≤ s`)
//!   starts every `d` ms; an event at `t` belongs to every window
//!   `[k·d, k·d + s)` with `k·d ≤ t < k·d + s`.
//! - A window `[start, end)` is complete once the watermark `W ≥ end`: a
//!   watermark `W` promises no more events with `t < W`. An event with
//!   `t == W` is on time; `t < W` is late.

use rkyv::{Archive, Deserialize, Serialize};
use rustc_hash::FxHashMap;

/// How events are grouped in event time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowSpec {
    /// Fixed, non-overlapping windows of `size_ms`.
    Tumbling {
        /// Window length, ms (> 0).
        size_ms: u64,
    },
    /// Windows of `size_ms` starting every `slide_ms` (0 < slide ≤ size).
    Sliding {
        /// Window length, ms.
        size_ms: u64,
        /// Distance between window starts, ms.
        slide_ms: u64,
    },
}

impl WindowSpec {
    /// A tumbling window of `size_ms` (> 0).
    pub fn tumbling(size_ms: u64) -> WindowSpec {
        assert!(size_ms > 0, "window size must be positive");
        WindowSpec::Tumbling { size_ms }
    }

    /// A sliding window (0 < `slide_ms` ≤ `size_ms`).
    pub fn sliding(size_ms: u64, slide_ms: u64) -> WindowSpec {
        assert!(
            slide_ms > 0 && slide_ms <= size_ms,
            "need 0 < slide <= size"
        );
        WindowSpec::Sliding { size_ms, slide_ms }
    }

    /// Window length, ms.
    #[inline]
    pub fn size(&self) -> u64 {
        match *self {
            WindowSpec::Tumbling { size_ms } | WindowSpec::Sliding { size_ms, .. } => size_ms,
        }
    }

    /// Calls `f(start)` for every window containing event time `t`, oldest first.
    #[inline]
    pub fn assign(&self, t: u64, mut f: impl FnMut(u64)) {
        match *self {
            WindowSpec::Tumbling { size_ms } => f(t - t % size_ms),
            WindowSpec::Sliding { size_ms, slide_ms } => {
                let last = t - t % slide_ms;
                // First start s = k·slide with s + size > t.
                let span = (size_ms - 1) / slide_ms * slide_ms;
                let mut s = last.saturating_sub(span);
                // (Checked: event times near u64::MAX must not wrap.)
                while s.checked_add(size_ms).is_some_and(|end| end <= t) {
                    s += slide_ms;
                }
                while s <= last {
                    f(s);
                    match s.checked_add(slide_ms) {
                        Some(next) => s = next,
                        None => break,
                    }
                }
            }
        }
    }
}

/// Which aggregate a window computes over its values.
#[derive(Clone, Copy, Debug)]
pub enum Aggregate {
    /// Number of events. The value is not read: states keep only `count`
    /// and `max_event_time` (`sum`, `min`, `max`, `reduced` stay empty).
    Count,
    /// Sum of values (wrapping i64).
    Sum,
    /// Smallest value.
    Min,
    /// Largest value.
    Max,
    /// Mean of values (sum / count, as f64).
    Mean,
    /// A user reduce: must be associative and commutative, since partial
    /// results from several workers are combined in any order.
    Reduce(fn(i64, i64) -> i64),
}

/// The state of one (key, window): everything every [`Aggregate`] needs, so
/// partials of any aggregate merge the same way. 48 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Archive, Serialize, Deserialize)]
#[repr(C)]
pub struct AggState {
    /// Events folded in.
    pub count: u64,
    /// Newest event time folded in, ms (for the YSB latency definition).
    /// (Next to `count`: [`Aggregate::Count`] updates only these two, and
    /// the two stay within one cache line at any 48-byte-aligned slot.)
    pub max_event_time: u64,
    /// Sum of values (wrapping).
    pub sum: i64,
    /// Smallest value (`i64::MAX` when empty).
    pub min: i64,
    /// Largest value (`i64::MIN` when empty).
    pub max: i64,
    /// The user reduce's accumulator (the first value when count = 1).
    pub reduced: i64,
}

impl AggState {
    /// The state of one event.
    #[inline(always)]
    pub fn one(value: i64, event_time: u64) -> AggState {
        AggState {
            count: 1,
            sum: value,
            min: value,
            max: value,
            reduced: value,
            max_event_time: event_time,
        }
    }

    /// Folds another state in (`reduce` for the user reduce, if any).
    #[inline(always)]
    pub fn merge(&mut self, o: &AggState, reduce: Option<fn(i64, i64) -> i64>) {
        if self.count == 0 {
            *self = *o;
            return;
        }
        if o.count == 0 {
            return;
        }
        self.count += o.count;
        self.sum = self.sum.wrapping_add(o.sum);
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
        if let Some(r) = reduce {
            self.reduced = r(self.reduced, o.reduced);
        }
        self.max_event_time = self.max_event_time.max(o.max_event_time);
    }

    /// The state of one event of value `value` at `event_time` (ms), as
    /// aggregate `count_only` ([`Aggregate::Count`]) or any other keeps it.
    #[inline(always)]
    pub fn of_event(count_only: bool, value: i64, event_time: u64) -> AggState {
        if count_only {
            AggState {
                count: 1,
                max_event_time: event_time,
                ..EMPTY
            }
        } else {
            AggState::one(value, event_time)
        }
    }

    /// Counts one more event at event time `event_time` (ms): the update of
    /// [`Aggregate::Count`], which keeps only `count` and `max_event_time`.
    #[inline(always)]
    pub fn count_one(&mut self, event_time: u64) {
        self.count += 1;
        self.max_event_time = self.max_event_time.max(event_time);
    }

    /// Folds an archived state in.
    #[inline(always)]
    pub fn merge_archived(&mut self, o: &ArchivedAggState, reduce: Option<fn(i64, i64) -> i64>) {
        let o = AggState {
            count: o.count.to_native(),
            sum: o.sum.to_native(),
            min: o.min.to_native(),
            max: o.max.to_native(),
            reduced: o.reduced.to_native(),
            max_event_time: o.max_event_time.to_native(),
        };
        self.merge(&o, reduce);
    }

    /// The aggregate's value as f64 (Mean) or i64 widened (others).
    pub fn value(&self, agg: Aggregate) -> f64 {
        match agg {
            Aggregate::Count => self.count as f64,
            Aggregate::Sum => self.sum as f64,
            Aggregate::Min => self.min as f64,
            Aggregate::Max => self.max as f64,
            Aggregate::Mean => {
                if self.count == 0 {
                    0.0
                } else {
                    self.sum as f64 / self.count as f64
                }
            }
            Aggregate::Reduce(_) => self.reduced as f64,
        }
    }
}

/// What crosses the exchange of a pre-aggregated windowed aggregation: the
/// state of one (key, window) at one worker (a partial aggregate). 64 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Archive, Serialize, Deserialize)]
#[repr(C)]
pub struct WindowPartial {
    /// The grouping key.
    pub key: u64,
    /// Start of the window, ms of event time.
    pub window_start: u64,
    /// The (partial) aggregate.
    pub state: AggState,
}

/// What crosses the exchange of a windowed aggregation without
/// pre-aggregation (every event sent to its key's owner, which assigns its
/// windows): one keyed event. 24 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Archive, Serialize, Deserialize)]
#[repr(C)]
pub struct KeyedEvent {
    /// The grouping key.
    pub key: u64,
    /// Event time, ms.
    pub time: u64,
    /// The value aggregated (0 under [`Aggregate::Count`], which reads none).
    pub value: i64,
}

/// One result row: the final aggregate of one key in one window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowResult {
    /// Start of the window, ms of event time.
    pub window_start: u64,
    /// The grouping key.
    pub key: u64,
    /// The final aggregate.
    pub state: AggState,
    /// Wall-clock time the row was emitted, ms since the Unix epoch.
    pub emitted_ms: u64,
}

/// Keys below this are stored in a dense array (no hashing on the hot path);
/// larger keys in a hash map.
pub const DENSE_KEYS: u64 = 4096;

/// The state of no event: the identity of [`AggState::merge`].
pub const EMPTY: AggState = AggState {
    count: 0,
    sum: 0,
    min: i64::MAX,
    max: i64::MIN,
    reduced: 0,
    max_event_time: 0,
};

/// The states of one window: dense for small keys, hashed for the rest.
/// A dense slot holds a key iff its `count` is non-zero: every state merged
/// in carries at least one event.
#[derive(Debug, Default)]
struct KeyTable {
    dense: Vec<AggState>,
    sparse: FxHashMap<u64, AggState>,
}

impl KeyTable {
    #[inline(always)]
    fn entry(&mut self, key: u64) -> &mut AggState {
        if key < DENSE_KEYS {
            let k = key as usize;
            if k >= self.dense.len() {
                self.grow(k);
            }
            &mut self.dense[k]
        } else {
            self.sparse.entry(key).or_insert(EMPTY)
        }
    }

    #[cold]
    fn grow(&mut self, k: usize) {
        let n = (k + 1).next_power_of_two().max(64);
        self.dense.resize(n, EMPTY);
    }

    /// Passes every (key, state) to `f`: dense keys in ascending order, then
    /// the hashed ones in no particular order (nothing downstream needs an
    /// order within a window: results are sorted once, at the end).
    fn drain(self, mut f: impl FnMut(u64, &AggState)) {
        for (k, st) in self.dense.iter().enumerate() {
            if st.count != 0 {
                f(k as u64, st);
            }
        }
        for (k, st) in &self.sparse {
            f(*k, st);
        }
    }
}

/// Per-window aggregate state keyed by window start, then by key; few
/// windows are open at once, so windows are a short vector searched from the
/// newest, and keys below [`DENSE_KEYS`] index an array.
#[derive(Debug, Default)]
pub struct WindowTable {
    windows: Vec<(u64, KeyTable)>,
    /// Most hashed keys a drained window held: new windows reserve that
    /// many (a table grown by rehashing from empty in every window cost
    /// NEXMark q5 ≈ 4% of its time).
    sparse_hint: usize,
}

impl WindowTable {
    /// The state of (`window_start`, `key`), created empty.
    #[inline(always)]
    pub fn entry(&mut self, window_start: u64, key: u64) -> &mut AggState {
        let idx = match self.windows.iter().rposition(|(s, _)| *s == window_start) {
            Some(i) => i,
            None => self.insert_window(window_start),
        };
        self.windows[idx].1.entry(key)
    }

    /// The slot of window `window_start` (created empty if new), for
    /// [`WindowTable::entry_in`]. A slot stays valid until the next call that
    /// may create a window (`slot`, `entry`) or remove one (`drain_closed`).
    #[inline]
    pub fn slot(&mut self, window_start: u64) -> usize {
        match self.windows.iter().rposition(|(s, _)| *s == window_start) {
            Some(i) => i,
            None => self.insert_window(window_start),
        }
    }

    /// The state of `key` in the window at `slot` (from [`WindowTable::slot`]),
    /// created empty.
    ///
    /// # Panics
    /// If `slot` is out of range.
    #[inline(always)]
    pub fn entry_in(&mut self, slot: usize, key: u64) -> &mut AggState {
        self.windows[slot].1.entry(key)
    }

    #[cold]
    fn insert_window(&mut self, window_start: u64) -> usize {
        let pos = self.windows.partition_point(|(s, _)| *s < window_start);
        let keys = KeyTable {
            sparse: FxHashMap::with_capacity_and_hasher(self.sparse_hint, Default::default()),
            ..KeyTable::default()
        };
        self.windows.insert(pos, (window_start, keys));
        pos
    }

    /// Removes and passes to `f` every window whose end (`start + size`) is at
    /// most `watermark`, oldest first; within a window, keys below
    /// [`DENSE_KEYS`] in ascending order, then the others in no particular
    /// order.
    pub fn drain_closed(
        &mut self,
        size: u64,
        watermark: u64,
        mut f: impl FnMut(u64, u64, &AggState),
    ) -> usize {
        let n = self
            .windows
            .iter()
            .take_while(|(s, _)| s.saturating_add(size) <= watermark)
            .count();
        for (start, keys) in self.windows.drain(..n) {
            self.sparse_hint = self.sparse_hint.max(keys.sparse.len());
            keys.drain(|k, st| f(start, k, st));
        }
        n
    }

    /// Number of open windows.
    pub fn len(&self) -> usize {
        self.windows.len()
    }

    /// Whether no window is open.
    pub fn is_empty(&self) -> bool {
        self.windows.is_empty()
    }

    /// Start of the oldest open window.
    #[inline]
    pub fn oldest(&self) -> Option<u64> {
        self.windows.first().map(|(s, _)| *s)
    }
}

/// A 64-bit mix (the murmur3 finalizer) so small dense keys spread evenly
/// over workers: `owner(key) = mix(key) % workers`.
#[inline(always)]
pub fn mix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn starts(spec: WindowSpec, t: u64) -> Vec<u64> {
        let mut v = vec![];
        spec.assign(t, |s| v.push(s));
        v
    }

    #[test]
    fn tumbling_edges() {
        let w = WindowSpec::tumbling(10_000);
        assert_eq!(starts(w, 0), vec![0]);
        assert_eq!(starts(w, 9_999), vec![0]);
        assert_eq!(starts(w, 10_000), vec![10_000]);
        assert_eq!(starts(w, 25_001), vec![20_000]);
    }

    #[test]
    fn sliding_edges() {
        let w = WindowSpec::sliding(10_000, 2_000);
        assert_eq!(starts(w, 10_000), vec![2_000, 4_000, 6_000, 8_000, 10_000]);
        assert_eq!(starts(w, 11_999), vec![2_000, 4_000, 6_000, 8_000, 10_000]);
        assert_eq!(starts(w, 12_000), vec![4_000, 6_000, 8_000, 10_000, 12_000]);
        assert_eq!(starts(w, 1), vec![0]);
        // Slide that does not divide the size.
        let w = WindowSpec::sliding(10, 3);
        for t in 0..100u64 {
            let got = starts(w, t);
            let want: Vec<u64> = (0..=t).step_by(3).filter(|s| s + 10 > t).collect();
            assert_eq!(got, want, "t = {t}");
        }
    }

    #[test]
    fn merge_and_values() {
        let mut a = AggState::one(5, 100);
        a.merge(&AggState::one(-3, 90), Some(|x, y| x * y));
        a.merge(&AggState::one(7, 120), Some(|x, y| x * y));
        assert_eq!(
            (a.count, a.sum, a.min, a.max, a.reduced),
            (3, 9, -3, 7, -105)
        );
        assert_eq!(a.max_event_time, 120);
        assert_eq!(a.value(Aggregate::Mean), 3.0);
        let mut t = WindowTable::default();
        t.entry(20, 1).merge(&AggState::one(1, 21), None);
        t.entry(0, 2).merge(&AggState::one(1, 1), None);
        t.entry(0, 1).merge(&AggState::one(1, 2), None);
        t.entry(10, 1).merge(&AggState::one(1, 11), None);
        let mut out = vec![];
        assert_eq!(
            t.drain_closed(10, 20, |s, k, st| out.push((s, k, st.count))),
            2
        );
        assert_eq!(out, vec![(0, 1, 1), (0, 2, 1), (10, 1, 1)]);
        assert_eq!(t.oldest(), Some(20));
        // Dense keys come out in ascending order, then the hashed ones.
        let mut t = WindowTable::default();
        for k in [u64::MAX, 5, DENSE_KEYS, 4095, 0, 1 << 40] {
            t.entry(0, k).merge(&AggState::one(k as i64, 1), None);
        }
        let mut keys = vec![];
        t.drain_closed(10, 10, |_, k, st| {
            assert_eq!(st.count, 1);
            keys.push(k)
        });
        assert_eq!(keys[..3], [0, 5, 4095]);
        keys[3..].sort_unstable();
        assert_eq!(keys[3..], [DENSE_KEYS, 1 << 40, u64::MAX]);
    }
}
