//! Aggregate functions in the shape of Flink's `AggregateFunction`
//! (create an accumulator, add a record, merge two accumulators, get the
//! result), and the built-ins: [`Count`], [`Sum`], [`Min`], [`Max`],
//! [`Mean`], [`DistinctCount`], [`TopN`], [`MaxBy`], and [`Filtered`]
//! (an aggregate over the records a predicate keeps). A tuple of aggregates is an
//! aggregate whose result is the tuple of results.
//!
//! ```
//! use air_operators::graph::{AggregateFunction, Count, Max, Mean};
//! let agg = (Count, Mean::of(|x: &f64| *x), Max::of(|x: &f64| *x));
//! let mut a = agg.create();
//! for x in [1.0, 2.0, 6.0] {
//!     agg.add(&mut a, &x);
//! }
//! let mut b = agg.create();
//! agg.add(&mut b, &3.0);
//! agg.merge(&mut a, b);
//! assert_eq!(agg.result(&a), (4, 3.0, 6.0));
//! ```

use air_runtime::Record;
use std::collections::HashSet;
use std::hash::Hash;
use std::marker::PhantomData;

/// An aggregate over records of type `In` (Flink's `AggregateFunction`).
/// When a window pre-aggregates (the default), each worker keeps one
/// accumulator per (window, key) and sends it to the key's owner, where the
/// accumulators of every worker are merged: so `merge` must give the same
/// result as adding every record to one accumulator, in any order.
///
/// ```
/// use air_operators::graph::*;
/// use air_runtime::dataflow::{run_graph, VecSource};
/// use air_runtime::JobConfig;
/// use std::sync::{Arc, Mutex};
///
/// /// The spread of a sensor's readings: largest − smallest.
/// #[derive(Clone)]
/// struct Spread;
/// impl AggregateFunction<(u32, u64)> for Spread {
///     type Acc = (u64, u64); // (smallest, largest) so far
///     type Out = u64;
///     fn create(&self) -> (u64, u64) { (u64::MAX, 0) }
///     fn add(&self, a: &mut (u64, u64), r: &(u32, u64)) { self.merge(a, (r.1, r.1)) }
///     fn merge(&self, a: &mut (u64, u64), o: (u64, u64)) { *a = (a.0.min(o.0), a.1.max(o.1)) }
///     fn result(&self, a: &(u64, u64)) -> u64 { a.1 - a.0 }
/// }
///
/// let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
/// let rows = Arc::new(Mutex::new(Vec::new()));
/// let out = rows.clone();
/// run_graph(&cfg, move |df| {
///     // (sensor, reading): worker w reads every other one.
///     let input: Vec<(u32, u64)> =
///         [(1, 20), (2, 5), (1, 30), (1, 10)].into_iter().skip(df.index()).step_by(2).collect();
///     let out = out.clone();
///     df.source(VecSource::new(input))
///         .key_by(|r| r.0)
///         .window(Tumbling::ms(1_000), |_| 0) // one window, [0, 1000), for all
///         .aggregate(Spread)
///         .for_each(move |r| out.lock().unwrap().push((r.key, r.value)));
/// })
/// .unwrap();
/// let mut rows = rows.lock().unwrap().clone();
/// rows.sort();
/// assert_eq!(rows, [(1, 20), (2, 0)]);
/// ```
pub trait AggregateFunction<In>: Clone + 'static {
    /// The accumulator: crosses the exchange archived (rkyv).
    type Acc: Record;
    /// The result of a window.
    type Out: 'static;
    /// An empty accumulator.
    fn create(&self) -> Self::Acc;
    /// Adds one record.
    fn add(&self, acc: &mut Self::Acc, x: &In);
    /// Merges `other` into `acc`.
    fn merge(&self, acc: &mut Self::Acc, other: Self::Acc);
    /// The result of `acc`.
    fn result(&self, acc: &Self::Acc) -> Self::Out;
}

/// The number of records (`u64`).
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
///     // (sensor, reading): worker w reads every other one.
///     let input: Vec<(u32, u64)> =
///         [(1, 20), (2, 5), (1, 30), (1, 10)].into_iter().skip(df.index()).step_by(2).collect();
///     let out = out.clone();
///     df.source(VecSource::new(input))
///         .key_by(|r| r.0)
///         .window(Tumbling::ms(1_000), |_| 0) // one window, [0, 1000), for all
///         .aggregate(Count)
///         .for_each(move |r| out.lock().unwrap().push((r.key, r.value)));
/// })
/// .unwrap();
/// let mut rows = rows.lock().unwrap().clone();
/// rows.sort_by_key(|r| r.0);
/// assert_eq!(rows, [(1, 3), (2, 1)]);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Count;

impl<In> AggregateFunction<In> for Count {
    type Acc = u64;
    type Out = u64;
    #[inline(always)]
    fn create(&self) -> u64 {
        0
    }
    #[inline(always)]
    fn add(&self, acc: &mut u64, _: &In) {
        *acc += 1;
    }
    #[inline(always)]
    fn merge(&self, acc: &mut u64, other: u64) {
        *acc += other;
    }
    fn result(&self, acc: &u64) -> u64 {
        *acc
    }
}

/// Numbers that [`Sum`], [`Min`], [`Max`] and [`Mean`] accept.
pub trait Number: Record + Copy + PartialOrd + 'static {
    /// 0.
    const ZERO: Self;
    /// The smallest value (`-inf` for floats): what [`Max::of`] gives
    /// when no record was added.
    const LOWEST: Self;
    /// The largest value (`+inf` for floats): what [`Min::of`] gives when
    /// no record was added.
    const HIGHEST: Self;
    /// `self + o` (wrapping for integers: sums of a window never panic).
    fn plus(self, o: Self) -> Self;
    /// As an `f64` (for means).
    fn as_f64(self) -> f64;
}

macro_rules! int_number {
    ($($t:ty),*) => {$(
        impl Number for $t {
            const ZERO: Self = 0;
            const LOWEST: Self = <$t>::MIN;
            const HIGHEST: Self = <$t>::MAX;
            #[inline(always)]
            fn plus(self, o: Self) -> Self { self.wrapping_add(o) }
            #[inline(always)]
            fn as_f64(self) -> f64 { self as f64 }
        }
    )*};
}
int_number!(i32, i64, u32, u64);

impl Number for f64 {
    const ZERO: Self = 0.0;
    const LOWEST: Self = f64::NEG_INFINITY;
    const HIGHEST: Self = f64::INFINITY;
    #[inline(always)]
    fn plus(self, o: Self) -> Self {
        self + o
    }
    #[inline(always)]
    fn as_f64(self) -> f64 {
        self
    }
}

impl Number for f32 {
    const ZERO: Self = 0.0;
    const LOWEST: Self = f32::NEG_INFINITY;
    const HIGHEST: Self = f32::INFINITY;
    #[inline(always)]
    fn plus(self, o: Self) -> Self {
        self + o
    }
    #[inline(always)]
    fn as_f64(self) -> f64 {
        self as f64
    }
}

/// The sum of `value(record)`.
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
///     // (sensor, reading): worker w reads every other one.
///     let input: Vec<(u32, u64)> =
///         [(1, 20), (2, 5), (1, 30), (1, 10)].into_iter().skip(df.index()).step_by(2).collect();
///     let out = out.clone();
///     df.source(VecSource::new(input))
///         .key_by(|r| r.0)
///         .window(Tumbling::ms(1_000), |_| 0) // one window, [0, 1000), for all
///         .aggregate(Sum::of(|r: &(u32, u64)| r.1))
///         .for_each(move |r| out.lock().unwrap().push((r.key, r.value)));
/// })
/// .unwrap();
/// let mut rows = rows.lock().unwrap().clone();
/// rows.sort_by_key(|r| r.0);
/// assert_eq!(rows, [(1, 60), (2, 5)]);
/// ```
pub struct Sum<In, V, F> {
    value: F,
    _t: PhantomData<fn(&In) -> V>,
}

impl<In, V, F: Clone> Clone for Sum<In, V, F> {
    fn clone(&self) -> Self {
        Sum {
            value: self.value.clone(),
            _t: PhantomData,
        }
    }
}

impl<In, V: Number, F: Fn(&In) -> V + Clone + 'static> Sum<In, V, F> {
    /// Sums `value` of every record.
    pub fn of(value: F) -> Self {
        Sum {
            value,
            _t: PhantomData,
        }
    }
}

impl<In: 'static, V: Number, F: Fn(&In) -> V + Clone + 'static> AggregateFunction<In>
    for Sum<In, V, F>
{
    type Acc = V;
    type Out = V;
    #[inline(always)]
    fn create(&self) -> V {
        V::ZERO
    }
    #[inline(always)]
    fn add(&self, acc: &mut V, x: &In) {
        *acc = acc.plus((self.value)(x));
    }
    #[inline(always)]
    fn merge(&self, acc: &mut V, other: V) {
        *acc = acc.plus(other);
    }
    fn result(&self, acc: &V) -> V {
        *acc
    }
}

/// What [`Min`] and [`Max`] give: the value itself ([`Bare`], from
/// `of`) or an `Option` of it ([`OrNone`], from `or_none`).
pub trait Extreme<V: Number>: 'static {
    /// The accumulator.
    type Acc: Record;
    /// The result.
    type Out: 'static;
    /// An empty accumulator, holding `identity` (the value that never
    /// wins).
    fn create(identity: V) -> Self::Acc;
    /// Replaces the accumulated value by `v` if `wins(v, accumulated)`.
    fn keep(acc: &mut Self::Acc, v: V, wins: impl Fn(V, V) -> bool);
    /// The accumulated value of `acc`, if any.
    fn get(acc: &Self::Acc) -> Option<V>;
    /// The result of `acc`.
    fn result(acc: &Self::Acc) -> Self::Out;
}

/// [`Min::of`] and [`Max::of`]: the result is the value (the identity —
/// the type's largest or smallest value — if no record was added).
#[derive(Debug, Clone, Copy, Default)]
pub struct Bare;

/// [`Min::or_none`] and [`Max::or_none`]: the result is `None` if no
/// record was added.
#[derive(Debug, Clone, Copy, Default)]
pub struct OrNone;

impl<V: Number> Extreme<V> for Bare {
    type Acc = V;
    type Out = V;
    #[inline(always)]
    fn create(identity: V) -> V {
        identity
    }
    #[inline(always)]
    fn keep(acc: &mut V, v: V, wins: impl Fn(V, V) -> bool) {
        if wins(v, *acc) {
            *acc = v;
        }
    }
    #[inline(always)]
    fn get(acc: &V) -> Option<V> {
        Some(*acc)
    }
    fn result(acc: &V) -> V {
        *acc
    }
}

impl<V: Number> Extreme<V> for OrNone
where
    Option<V>: Record,
{
    type Acc = Option<V>;
    type Out = Option<V>;
    fn create(_: V) -> Option<V> {
        None
    }
    #[inline(always)]
    fn keep(acc: &mut Option<V>, v: V, wins: impl Fn(V, V) -> bool) {
        // NaN is unordered: it never wins, so it is never kept first either.
        #[allow(clippy::eq_op)]
        let number = v == v;
        match acc {
            Some(a) if !wins(v, *a) => {}
            _ if !number => {}
            _ => *acc = Some(v),
        }
    }
    fn get(acc: &Option<V>) -> Option<V> {
        *acc
    }
    fn result(acc: &Option<V>) -> Option<V> {
        *acc
    }
}

macro_rules! extreme {
    ($(#[$doc:meta])* $name:ident, $keep:tt, $identity:ident) => {
        $(#[$doc])*
        pub struct $name<In, V, F, R = Bare> {
            value: F,
            _t: PhantomData<fn(&In) -> (V, R)>,
        }

        impl<In, V, F: Clone, R> Clone for $name<In, V, F, R> {
            fn clone(&self) -> Self {
                $name {
                    value: self.value.clone(),
                    _t: PhantomData,
                }
            }
        }

        impl<In, V: Number, F: Fn(&In) -> V + Clone + 'static> $name<In, V, F> {
            /// Over `value` of every record; the result is a `V`.
            pub fn of(value: F) -> Self {
                $name {
                    value,
                    _t: PhantomData,
                }
            }

            /// Over `value` of every record; the result is an
            /// `Option<V>`, `None` if no record was added (e.g. under
            /// [`Filtered`] when the predicate kept none).
            pub fn or_none(value: F) -> $name<In, V, F, OrNone> {
                $name {
                    value,
                    _t: PhantomData,
                }
            }
        }

        impl<In: 'static, V: Number, F: Fn(&In) -> V + Clone + 'static, R: Extreme<V>>
            AggregateFunction<In> for $name<In, V, F, R>
        {
            type Acc = R::Acc;
            type Out = R::Out;
            fn create(&self) -> R::Acc {
                R::create(V::$identity)
            }
            #[inline(always)]
            fn add(&self, acc: &mut R::Acc, x: &In) {
                R::keep(acc, (self.value)(x), |v, a| v $keep a);
            }
            fn merge(&self, acc: &mut R::Acc, other: R::Acc) {
                if let Some(v) = R::get(&other) {
                    R::keep(acc, v, |v, a| v $keep a);
                }
            }
            fn result(&self, acc: &R::Acc) -> R::Out {
                R::result(acc)
            }
        }
    };
}

extreme!(
    /// The smallest `value(record)`, as a `V` ([`Min::of`]) or an
    /// `Option<V>` ([`Min::or_none`]). A window's row exists only if a
    /// record of its key came, so a window's minimum always exists: `of`
    /// is the one to use. With no record added (possible only under
    /// [`Filtered`]), `of` gives `V`'s largest value (`+inf` for floats)
    /// and `or_none` gives `None`. NaN never wins (a window of NaN only
    /// gives the largest value, or `None`).
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
    ///     // (sensor, reading): worker w reads every other one.
    ///     let input: Vec<(u32, u64)> = [(1, 20), (2, 5), (1, 30), (1, 10)]
    ///         .into_iter()
    ///         .skip(df.index())
    ///         .step_by(2)
    ///         .collect();
    ///     let out = out.clone();
    ///     df.source(VecSource::new(input))
    ///         .key_by(|r| r.0)
    ///         .window(Tumbling::ms(1_000), |_| 0) // one window, [0, 1000), for all
    ///         .aggregate(Min::of(|r: &(u32, u64)| r.1))
    ///         .for_each(move |r| out.lock().unwrap().push((r.key, r.value)));
    /// })
    /// .unwrap();
    /// let mut rows = rows.lock().unwrap().clone();
    /// rows.sort_by_key(|r| r.0);
    /// assert_eq!(rows, [(1, 10), (2, 5)]);
    /// ```
    Min,
    <,
    HIGHEST
);
extreme!(
    /// The largest `value(record)`, as a `V` ([`Max::of`]) or an
    /// `Option<V>` ([`Max::or_none`]). A window's row exists only if a
    /// record of its key came, so a window's maximum always exists: `of`
    /// is the one to use. With no record added (possible only under
    /// [`Filtered`]), `of` gives `V`'s smallest value (`-inf` for floats)
    /// and `or_none` gives `None`. NaN never wins (a window of NaN only
    /// gives the smallest value, or `None`).
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
    ///     // (url, latency ms): worker w reads every other one.
    ///     let input: Vec<(u32, f64)> = [(1, 20.5), (2, 5.0), (1, 30.25), (1, 10.0)]
    ///         .into_iter()
    ///         .skip(df.index())
    ///         .step_by(2)
    ///         .collect();
    ///     let out = out.clone();
    ///     df.source(VecSource::new(input))
    ///         .key_by(|r| r.0)
    ///         .window(Tumbling::ms(1_000), |_| 0) // one window, [0, 1000), for all
    ///         .aggregate(Max::of(|v: &(u32, f64)| v.1)) // an f64, not an Option
    ///         .for_each(move |r| out.lock().unwrap().push((r.key, r.value)));
    /// })
    /// .unwrap();
    /// let mut rows = rows.lock().unwrap().clone();
    /// rows.sort_by_key(|r| r.0);
    /// assert_eq!(rows, [(1, 30.25), (2, 5.0)]);
    ///
    /// // Under `Filtered`, no record may be kept: `or_none` tells.
    /// let big = Filtered::new(|x: &u64| *x > 100, Max::or_none(|x: &u64| *x));
    /// let mut acc = big.create();
    /// big.add(&mut acc, &7);
    /// assert_eq!(big.result(&acc), None);
    /// big.add(&mut acc, &700);
    /// assert_eq!(big.result(&acc), Some(700));
    /// ```
    Max,
    >,
    LOWEST
);

/// The arithmetic mean of `value(record)` as `f64` (NaN for no record).
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
///     // (sensor, reading): worker w reads every other one.
///     let input: Vec<(u32, u64)> =
///         [(1, 20), (2, 5), (1, 30), (1, 10)].into_iter().skip(df.index()).step_by(2).collect();
///     let out = out.clone();
///     df.source(VecSource::new(input))
///         .key_by(|r| r.0)
///         .window(Tumbling::ms(1_000), |_| 0) // one window, [0, 1000), for all
///         .aggregate(Mean::of(|r: &(u32, u64)| r.1))
///         .for_each(move |r| out.lock().unwrap().push((r.key, r.value)));
/// })
/// .unwrap();
/// let mut rows = rows.lock().unwrap().clone();
/// rows.sort_by_key(|r| r.0);
/// assert_eq!(rows, [(1, 20.0), (2, 5.0)]);
/// ```
pub struct Mean<In, V, F> {
    value: F,
    _t: PhantomData<fn(&In) -> V>,
}

impl<In, V, F: Clone> Clone for Mean<In, V, F> {
    fn clone(&self) -> Self {
        Mean {
            value: self.value.clone(),
            _t: PhantomData,
        }
    }
}

impl<In, V: Number, F: Fn(&In) -> V + Clone + 'static> Mean<In, V, F> {
    /// The mean of `value` over the records.
    pub fn of(value: F) -> Self {
        Mean {
            value,
            _t: PhantomData,
        }
    }
}

impl<In: 'static, V: Number, F: Fn(&In) -> V + Clone + 'static> AggregateFunction<In>
    for Mean<In, V, F>
{
    /// (sum, count)
    type Acc = (f64, u64);
    type Out = f64;
    fn create(&self) -> (f64, u64) {
        (0.0, 0)
    }
    #[inline(always)]
    fn add(&self, acc: &mut (f64, u64), x: &In) {
        acc.0 += (self.value)(x).as_f64();
        acc.1 += 1;
    }
    fn merge(&self, acc: &mut (f64, u64), other: (f64, u64)) {
        acc.0 += other.0;
        acc.1 += other.1;
    }
    fn result(&self, acc: &(f64, u64)) -> f64 {
        acc.0 / acc.1 as f64
    }
}

/// The number of distinct `value(record)`s (exact: a set per window and
/// key; partial sets are merged at the owner).
///
/// A worker's partial set crosses the exchange as one record, which must
/// fit a channel's largest frame (set by `JobConfig::ring_bytes`): with
/// many distinct values per window and key (more than some tens of
/// thousands of `u64`s in a 1 MiB frame), key by
/// (key, value) instead, so each value is its own record, and count the
/// values in a second window keyed by the key (NEXMark q15 does).
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
///     // (page, user) of each visit: worker w reads every other one.
///     let input: Vec<(u32, u64)> =
///         [(1, 7), (1, 8), (1, 7), (2, 7)].into_iter().skip(df.index()).step_by(2).collect();
///     let out = out.clone();
///     df.source(VecSource::new(input))
///         .key_by(|r| r.0)
///         .window(Tumbling::ms(1_000), |_| 0) // one window, [0, 1000), for all
///         .aggregate(DistinctCount::of(|v: &(u32, u64)| v.1))
///         .for_each(move |r| out.lock().unwrap().push((r.key, r.value)));
/// })
/// .unwrap();
/// let mut rows = rows.lock().unwrap().clone();
/// rows.sort_by_key(|r| r.0);
/// assert_eq!(rows, [(1, 2), (2, 1)]);
/// ```
pub struct DistinctCount<In, V, F> {
    value: F,
    _t: PhantomData<fn(&In) -> V>,
}

impl<In, V, F: Clone> Clone for DistinctCount<In, V, F> {
    fn clone(&self) -> Self {
        DistinctCount {
            value: self.value.clone(),
            _t: PhantomData,
        }
    }
}

impl<In, V, F> DistinctCount<In, V, F>
where
    V: Hash + Eq,
    F: Fn(&In) -> V + Clone + 'static,
{
    /// Counts the distinct values of `value`.
    pub fn of(value: F) -> Self {
        DistinctCount {
            value,
            _t: PhantomData,
        }
    }
}

impl<In: 'static, V, F> AggregateFunction<In> for DistinctCount<In, V, F>
where
    V: Hash + Eq + 'static,
    HashSet<V>: Record,
    F: Fn(&In) -> V + Clone + 'static,
{
    type Acc = HashSet<V>;
    type Out = u64;
    fn create(&self) -> HashSet<V> {
        HashSet::new()
    }
    #[inline]
    fn add(&self, acc: &mut HashSet<V>, x: &In) {
        acc.insert((self.value)(x));
    }
    fn merge(&self, acc: &mut HashSet<V>, other: HashSet<V>) {
        if other.len() > acc.len() {
            let small = std::mem::replace(acc, other);
            acc.extend(small);
        } else {
            acc.extend(other);
        }
    }
    fn result(&self, acc: &HashSet<V>) -> u64 {
        acc.len() as u64
    }
}

/// An aggregate over the records that pass `keep` alone (SQL's
/// `agg(...) FILTER (WHERE ...)`): the records `keep` rejects are not added.
/// Its accumulator and result are the inner aggregate's; in a tuple, several
/// filtered aggregates share one pass over the records.
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
///     // (auction, price): worker w reads every other one.
///     let input: Vec<(u32, u64)> = [(1, 20), (2, 5), (1, 300), (1, 10)]
///         .into_iter()
///         .skip(df.index())
///         .step_by(2)
///         .collect();
///     let out = out.clone();
///     let cheap = |b: &(u32, u64)| b.1 < 100;
///     df.source(VecSource::new(input))
///         .key_by(|b| b.0)
///         .window(Tumbling::ms(1_000), |_| 0) // one window, [0, 1000), for all
///         // (bids, cheap bids, sum of the cheap prices)
///         .aggregate((
///             Count,
///             Filtered::new(cheap, Count),
///             Filtered::new(cheap, Sum::of(|b: &(u32, u64)| b.1)),
///         ))
///         .for_each(move |r| out.lock().unwrap().push((r.key, r.value)));
/// })
/// .unwrap();
/// let mut rows = rows.lock().unwrap().clone();
/// rows.sort_by_key(|r| r.0);
/// assert_eq!(rows, [(1, (3, 2, 30)), (2, (1, 1, 5))]);
/// ```
pub struct Filtered<In, P, A> {
    keep: P,
    inner: A,
    _t: PhantomData<fn(&In)>,
}

impl<In, P: Clone, A: Clone> Clone for Filtered<In, P, A> {
    fn clone(&self) -> Self {
        Filtered {
            keep: self.keep.clone(),
            inner: self.inner.clone(),
            _t: PhantomData,
        }
    }
}

impl<In, P, A> Filtered<In, P, A>
where
    P: Fn(&In) -> bool + Clone + 'static,
    A: AggregateFunction<In>,
{
    /// `inner` over the records for which `keep` is true.
    pub fn new(keep: P, inner: A) -> Self {
        Filtered {
            keep,
            inner,
            _t: PhantomData,
        }
    }
}

impl<In: 'static, P, A> AggregateFunction<In> for Filtered<In, P, A>
where
    P: Fn(&In) -> bool + Clone + 'static,
    A: AggregateFunction<In>,
{
    type Acc = A::Acc;
    type Out = A::Out;
    #[inline(always)]
    fn create(&self) -> A::Acc {
        self.inner.create()
    }
    #[inline(always)]
    fn add(&self, acc: &mut A::Acc, x: &In) {
        if (self.keep)(x) {
            self.inner.add(acc, x);
        }
    }
    #[inline(always)]
    fn merge(&self, acc: &mut A::Acc, other: A::Acc) {
        self.inner.merge(acc, other);
    }
    fn result(&self, acc: &A::Acc) -> A::Out {
        self.inner.result(acc)
    }
}

/// The `n` records with the largest `score` (ties: the smaller record
/// first, so results are deterministic), best first.
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
///     // (sensor, reading): worker w reads every other one.
///     let input: Vec<(u32, u64)> =
///         [(1, 20), (2, 5), (1, 30), (1, 10)].into_iter().skip(df.index()).step_by(2).collect();
///     let out = out.clone();
///     df.source(VecSource::new(input))
///         .key_by(|r| r.0)
///         .window(Tumbling::ms(1_000), |_| 0) // one window, [0, 1000), for all
///         .aggregate(TopN::by(2, |r: &(u32, u64)| r.1))
///         .for_each(move |r| out.lock().unwrap().push((r.key, r.value)));
/// })
/// .unwrap();
/// let mut rows = rows.lock().unwrap().clone();
/// rows.sort_by_key(|r| r.0);
/// assert_eq!(rows, [(1, vec![(1, 30), (1, 20)]), (2, vec![(2, 5)])]);
/// ```
pub struct TopN<In, S, F> {
    n: usize,
    score: F,
    _t: PhantomData<fn(&In) -> S>,
}

impl<In, S, F: Clone> Clone for TopN<In, S, F> {
    fn clone(&self) -> Self {
        TopN {
            n: self.n,
            score: self.score.clone(),
            _t: PhantomData,
        }
    }
}

impl<In, S: Ord, F: Fn(&In) -> S + Clone + 'static> TopN<In, S, F> {
    /// The `n` best records by `score`.
    pub fn by(n: usize, score: F) -> Self {
        TopN {
            n,
            score,
            _t: PhantomData,
        }
    }

    fn keep(&self, acc: &mut Vec<In>)
    where
        In: Ord,
    {
        acc.sort_by(|a, b| (self.score)(b).cmp(&(self.score)(a)).then_with(|| a.cmp(b)));
        acc.truncate(self.n);
    }
}

impl<In, S, F> AggregateFunction<In> for TopN<In, S, F>
where
    In: Record + Ord,
    Vec<In>: Record,
    S: Ord + 'static,
    F: Fn(&In) -> S + Clone + 'static,
{
    type Acc = Vec<In>;
    type Out = Vec<In>;
    fn create(&self) -> Vec<In> {
        Vec::new()
    }
    fn add(&self, acc: &mut Vec<In>, x: &In) {
        acc.push(x.clone());
        if acc.len() >= 2 * self.n.max(8) {
            self.keep(acc);
        }
    }
    fn merge(&self, acc: &mut Vec<In>, other: Vec<In>) {
        acc.extend(other);
        self.keep(acc);
    }
    fn result(&self, acc: &Vec<In>) -> Vec<In> {
        let mut v = acc.clone();
        self.keep(&mut v);
        v
    }
}

/// Every record with the largest `score` (ties all kept, in the order they
/// were added and merged): e.g. NEXMark's highest bid of a window, every
/// bid at that price. The accumulator holds only the current best records.
///
/// ```
/// use air_operators::graph::{AggregateFunction, MaxBy};
/// let agg = MaxBy::of(|x: &(u32, char)| x.0);
/// let mut a = agg.create();
/// for x in [(3, 'a'), (5, 'b'), (1, 'c')] {
///     agg.add(&mut a, &x);
/// }
/// let mut b = agg.create();
/// agg.add(&mut b, &(5, 'd'));
/// agg.merge(&mut a, b);
/// assert_eq!(agg.result(&a), [(5, 'b'), (5, 'd')]);
/// ```
pub struct MaxBy<In, S, F> {
    score: F,
    _t: PhantomData<fn(&In) -> S>,
}

impl<In, S, F: Clone> Clone for MaxBy<In, S, F> {
    fn clone(&self) -> Self {
        MaxBy {
            score: self.score.clone(),
            _t: PhantomData,
        }
    }
}

impl<In, S: Ord, F: Fn(&In) -> S + Clone + 'static> MaxBy<In, S, F> {
    /// The records with the largest `score`.
    pub fn of(score: F) -> Self {
        MaxBy {
            score,
            _t: PhantomData,
        }
    }
}

impl<In, S, F> AggregateFunction<In> for MaxBy<In, S, F>
where
    In: Record,
    Vec<In>: Record,
    S: Ord + 'static,
    F: Fn(&In) -> S + Clone + 'static,
{
    type Acc = Vec<In>;
    type Out = Vec<In>;
    fn create(&self) -> Vec<In> {
        Vec::new()
    }
    #[inline]
    fn add(&self, acc: &mut Vec<In>, x: &In) {
        match acc.first().map(|m| (self.score)(m).cmp(&(self.score)(x))) {
            Some(std::cmp::Ordering::Greater) => {}
            Some(std::cmp::Ordering::Equal) => acc.push(x.clone()),
            _ => {
                acc.clear();
                acc.push(x.clone());
            }
        }
    }
    fn merge(&self, acc: &mut Vec<In>, other: Vec<In>) {
        let Some(o) = other.first() else {
            return;
        };
        match acc.first().map(|m| (self.score)(m).cmp(&(self.score)(o))) {
            Some(std::cmp::Ordering::Greater) => {}
            Some(std::cmp::Ordering::Equal) => acc.extend(other),
            _ => *acc = other,
        }
    }
    fn result(&self, acc: &Vec<In>) -> Vec<In> {
        acc.clone()
    }
}

macro_rules! tuple_aggregate {
    ($(($A:ident, $i:tt)),+) => {
        impl<In, $($A: AggregateFunction<In>),+> AggregateFunction<In> for ($($A,)+)
        where
            ($($A::Acc,)+): Record,
        {
            type Acc = ($($A::Acc,)+);
            type Out = ($($A::Out,)+);
            fn create(&self) -> Self::Acc {
                ($(self.$i.create(),)+)
            }
            #[inline(always)]
            fn add(&self, acc: &mut Self::Acc, x: &In) {
                $(self.$i.add(&mut acc.$i, x);)+
            }
            fn merge(&self, acc: &mut Self::Acc, other: Self::Acc) {
                $(self.$i.merge(&mut acc.$i, other.$i);)+
            }
            fn result(&self, acc: &Self::Acc) -> Self::Out {
                ($(self.$i.result(&acc.$i),)+)
            }
        }
    };
}
tuple_aggregate!((A, 0), (B, 1));
tuple_aggregate!((A, 0), (B, 1), (C, 2));
tuple_aggregate!((A, 0), (B, 1), (C, 2), (D, 3));
