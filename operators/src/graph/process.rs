//! Keyed process functions (Flink's `KeyedProcessFunction`): user code
//! that sees every record of a keyed stream at its key's owner, keeps state
//! per key, and sets event-time timers per key. What windows do, open to
//! users: deduplication, per-key timeouts, custom triggers.
//!
//! `stream.key_by(key).process(time, f)` sends every record to its key's
//! owner (an exchange edge); there `f` gets each record with its key, its
//! event time `time(record)` (ms), the key's state (`State::default()` for
//! a new key) and a [`ProcessCx`] to emit rows, set or delete timers, read
//! the watermark and clear the key's state.
//!
//! - **Timers** are event time: a timer at `t` fires once the operator's
//!   watermark passes `t` (watermark `> t`: every record up to `t` has
//!   arrived), before the watermark is passed on, so rows it emits are
//!   never late downstream. Timers fire in time order (per key, and over
//!   all keys of the worker); a key has at most one timer per time
//!   (setting it twice fires once). A timer set for a time the watermark
//!   already passed fires at the next watermark the operator receives (or,
//!   if set while timers fire, in the same round: do not set the time
//!   being fired again).
//! - **State** lives until the function clears it ([`ProcessCx::clear_state`]);
//!   a key with neither state nor timers holds no memory, so memory follows
//!   the keys in use, not the keys ever seen.
//! - **End of stream**: at the end (final watermark `u64::MAX`) every timer
//!   left fires, in time order, including timers set while they fire, and
//!   before the watermark `u64::MAX` goes on (a timer at `u64::MAX` fires
//!   at the end, its rows in time for a window ending there). A
//!   stopped job (SIGINT/SIGTERM) fires only the timers below the final
//!   watermark (what every input read past, as windows do) and counts the
//!   rest (`unfired_timers`).
//!
//! ```
//! use air_operators::graph::*;
//! use air_runtime::dataflow::{run_graph, VecSource};
//! use air_runtime::JobConfig;
//! use std::sync::{Arc, Mutex};
//!
//! /// Per user, clicks per 100 ms of event time (a tumbling window by hand):
//! /// one timer per user and window, at the window's last millisecond.
//! struct ClicksPer100ms;
//! impl KeyedProcessFunction<u32, (u32, u64)> for ClicksPer100ms {
//!     type State = Vec<(u64, u64)>; // (window start, clicks) of open windows
//!     type Out = (u32, u64, u64);   // (user, window start, clicks)
//!     fn process(&mut self, _user: &u32, _c: (u32, u64), time: u64,
//!                open: &mut Self::State, cx: &mut ProcessCx<Self::Out>) {
//!         let start = time - time % 100;
//!         match open.iter_mut().find(|w| w.0 == start) {
//!             Some(w) => w.1 += 1,
//!             None => open.push((start, 1)),
//!         }
//!         cx.register_timer(start + 99); // once per (user, time)
//!     }
//!     fn on_timer(&mut self, user: &u32, t: u64, open: &mut Self::State,
//!                 cx: &mut ProcessCx<Self::Out>) {
//!         let start = t - 99;
//!         open.retain(|w| w.0 != start || { cx.emit((*user, start, w.1)); false });
//!         if open.is_empty() {
//!             cx.clear_state(); // the user holds no memory until their next click
//!         }
//!     }
//! }
//!
//! let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
//! let rows = Arc::new(Mutex::new(Vec::new()));
//! let out = rows.clone();
//! run_graph(&cfg, move |df| {
//!     // (user, time ms); worker w reads every other click.
//!     let clicks: Vec<(u32, u64)> = [(1, 0), (2, 10), (1, 50), (1, 100), (2, 300), (1, 400)]
//!         .into_iter()
//!         .enumerate()
//!         .filter(|(i, _)| i % 2 == df.index())
//!         .map(|(_, c)| c)
//!         .collect();
//!     let out = out.clone();
//!     df.source(VecSource::new(clicks))
//!         .event_time(|c| c.1, 1_000)
//!         .key_by(|c| c.0)
//!         .process(|c| c.1, ClicksPer100ms)
//!         .for_each(move |r| out.lock().unwrap().push(r));
//! })
//! .unwrap();
//! let mut rows = rows.lock().unwrap().clone();
//! rows.sort();
//! assert_eq!(rows, [(1, 0, 2), (1, 100, 1), (1, 400, 1), (2, 0, 1), (2, 300, 1)]);
//! ```

use air_runtime::dataflow::{
    state, Cx, Head, Identity, KeyedStream, OpHead, Operator, Outbox, Pipe, Stats, Stream, Tail,
};
use air_runtime::{key_hash, ExchangeData, Record};
use rustc_hash::FxHashMap;
use std::collections::BTreeSet;
use std::hash::Hash;
use std::marker::PhantomData;

/// A function of a keyed stream with state and event-time timers per key
/// (Flink's `KeyedProcessFunction`), run at each key's owner:
/// [`KeyedProcessExt::process`]. `K` is the key ([`KeyedStream`]'s key
/// function's result), `T` the record.
///
/// ```
/// use air_operators::graph::*;
/// use air_runtime::dataflow::{run_graph, VecSource};
/// use air_runtime::JobConfig;
/// use std::sync::{Arc, Mutex};
///
/// /// Drops a key's repeated values; forgets a key 1 s (event time) after
/// /// its last record.
/// struct Dedup;
/// impl KeyedProcessFunction<u64, (u64, u32, u64)> for Dedup {
///     type State = (Vec<u32>, u64); // values seen, the key's timer
///     type Out = (u64, u32);
///     fn process(&mut self, key: &u64, r: (u64, u32, u64), time: u64,
///                s: &mut Self::State, cx: &mut ProcessCx<(u64, u32)>) {
///         if !s.0.contains(&r.1) {
///             s.0.push(r.1);
///             cx.emit((*key, r.1));
///         }
///         if time + 1_000 > s.1 {
///             cx.delete_timer(s.1);
///             s.1 = time + 1_000;
///             cx.register_timer(s.1);
///         }
///     }
///     fn on_timer(&mut self, _key: &u64, _t: u64, _s: &mut Self::State,
///                 cx: &mut ProcessCx<(u64, u32)>) {
///         cx.clear_state();
///     }
/// }
///
/// let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
/// let rows = Arc::new(Mutex::new(Vec::new()));
/// let out = rows.clone();
/// run_graph(&cfg, move |df| {
///     // (key, value, time ms): worker w reads every other record.
///     let input: Vec<(u64, u32, u64)> =
///         [(1, 7, 0), (1, 7, 10), (2, 7, 20), (1, 8, 30), (1, 7, 40)]
///             .into_iter()
///             .skip(df.index())
///             .step_by(2)
///             .collect();
///     let out = out.clone();
///     df.source(VecSource::new(input))
///         .event_time(|r| r.2, 0)
///         .key_by(|r| r.0)
///         .process(|r| r.2, Dedup)
///         .for_each(move |r| out.lock().unwrap().push(r));
/// })
/// .unwrap();
/// let mut rows = rows.lock().unwrap().clone();
/// rows.sort();
/// assert_eq!(rows, [(1, 7), (1, 8), (2, 7)]);
/// ```
pub trait KeyedProcessFunction<K, T>: 'static {
    /// The state of one key: `Default::default()` when the key is new or
    /// its state was cleared.
    type State: Default + 'static;
    /// The rows it emits.
    type Out: 'static;
    /// One record of key `key` with event time `time` (ms): update `state`,
    /// emit rows, set timers through `cx`. A record is older than
    /// [`ProcessCx::watermark`] only if an operator before the exchange
    /// emitted it late; it is passed on anyway.
    fn process(
        &mut self,
        key: &K,
        record: T,
        time: u64,
        state: &mut Self::State,
        cx: &mut ProcessCx<Self::Out>,
    );
    /// Key `key`'s timer at `timer` (ms) fired: the watermark passed it.
    /// The timer is gone; set another through `cx` to fire again.
    fn on_timer(
        &mut self,
        key: &K,
        timer: u64,
        state: &mut Self::State,
        cx: &mut ProcessCx<Self::Out>,
    ) {
        let _ = (key, timer, state, cx);
    }
}

/// A timer change a call asked for, applied when it returns.
#[derive(Debug, Clone, Copy)]
enum TimerOp {
    Set(u64),
    Delete(u64),
}

/// What a [`KeyedProcessFunction`] call can do besides changing its key's
/// state: emit rows, set and delete the key's timers, read the watermark,
/// clear the key's state. Rows go on in the order they were emitted, after
/// the call returns; timer changes apply in order when it returns.
///
/// ```
/// use air_operators::graph::*;
/// use air_runtime::dataflow::{run_graph, VecSource};
/// use air_runtime::JobConfig;
/// use std::sync::{Arc, Mutex};
///
/// /// Emits a key's sum once no record came for 500 ms of event time.
/// struct SumUntilQuiet;
/// impl KeyedProcessFunction<u8, (u8, u64, u64)> for SumUntilQuiet {
///     type State = (u64, u64); // sum, pending timer
///     type Out = (u8, u64);
///     fn process(&mut self, _k: &u8, r: (u8, u64, u64), time: u64, s: &mut (u64, u64),
///                cx: &mut ProcessCx<(u8, u64)>) {
///         cx.delete_timer(s.1);            // no-op if none is set there
///         s.0 += r.1;
///         s.1 = time.max(cx.watermark()) + 500;
///         cx.register_timer(s.1);
///     }
///     fn on_timer(&mut self, k: &u8, _t: u64, s: &mut (u64, u64),
///                 cx: &mut ProcessCx<(u8, u64)>) {
///         cx.emit((*k, s.0));
///         cx.clear_state();                 // the key holds no memory now
///     }
/// }
///
/// let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
/// let rows = Arc::new(Mutex::new(Vec::new()));
/// let out = rows.clone();
/// run_graph(&cfg, move |df| {
///     // (key, amount, time ms): worker w reads every other record.
///     let input: Vec<(u8, u64, u64)> =
///         [(1, 5, 0), (2, 1, 50), (1, 7, 100)].into_iter().skip(df.index()).step_by(2).collect();
///     let out = out.clone();
///     df.source(VecSource::new(input))
///         .event_time(|r| r.2, 0)
///         .key_by(|r| r.0)
///         .process(|r| r.2, SumUntilQuiet)
///         .for_each(move |r| out.lock().unwrap().push(r));
/// })
/// .unwrap();
/// let mut rows = rows.lock().unwrap().clone();
/// rows.sort();
/// assert_eq!(rows, [(1, 12), (2, 1)]);
/// ```
#[derive(Debug)]
pub struct ProcessCx<O> {
    out: Vec<O>,
    ops: Vec<TimerOp>,
    wm: u64,
    clear: bool,
}

impl<O> ProcessCx<O> {
    fn new() -> Self {
        ProcessCx {
            out: Vec::new(),
            ops: Vec::new(),
            wm: 0,
            clear: false,
        }
    }

    /// Emits `row` downstream.
    #[inline]
    pub fn emit(&mut self, row: O) {
        self.out.push(row);
    }

    /// Sets this key's timer at event time `time` (ms): it fires once the
    /// watermark passes `time`. Setting a time the key already has a timer
    /// at does nothing (one timer per key and time).
    #[inline]
    pub fn register_timer(&mut self, time: u64) {
        self.ops.push(TimerOp::Set(time));
    }

    /// Deletes this key's timer at `time`, if there is one.
    #[inline]
    pub fn delete_timer(&mut self, time: u64) {
        self.ops.push(TimerOp::Delete(time));
    }

    /// The operator's watermark (ms): no record below it will come. While
    /// timers fire, the watermark that fires them (`u64::MAX` at the end).
    #[inline]
    pub fn watermark(&self) -> u64 {
        self.wm
    }

    /// Drops this key's state when the call returns (its next call gets
    /// `State::default()`). Its timers stay set; a key with neither state
    /// nor timers is forgotten.
    #[inline]
    pub fn clear_state(&mut self) {
        self.clear = true;
    }
}

/// A [`KeyedProcessFunction`] made of closures: [`process_fn`].
pub struct ProcessFn<S, O, F, G> {
    on_record: F,
    on_timer: G,
    _t: PhantomData<fn() -> (S, O)>,
}

/// The closure form of a [`KeyedProcessFunction`]: `on_record(key, record,
/// time, state, cx)` for every record; add `.on_timer(|key, timer, state,
/// cx| …)` for timers (without it, timers fire and do nothing). The state
/// type `S` is often worth naming in the closure's arguments.
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
///     let shard: Vec<u64> = (0..20).filter(|i| i % 2 == df.index() as u64).collect();
///     let out = out.clone();
///     df.source(VecSource::new(shard))
///         .event_time(|x| *x * 100, 0)
///         .key_by(|x| x % 3)
///         // A running count per key, and the key's total at the end.
///         .process(
///             |x| *x * 100,
///             process_fn(|_k: &u64, _x: u64, _t, n: &mut u64, cx: &mut ProcessCx<(u64, u64)>| {
///                 *n += 1;
///                 cx.register_timer(u64::MAX); // fires at the end of the stream
///             })
///             .on_timer(|k: &u64, _t, n: &mut u64, cx: &mut ProcessCx<(u64, u64)>| {
///                 cx.emit((*k, *n))
///             }),
///         )
///         .for_each(move |r| out.lock().unwrap().push(r));
/// })
/// .unwrap();
/// let mut rows = rows.lock().unwrap().clone();
/// rows.sort();
/// assert_eq!(rows, [(0, 7), (1, 7), (2, 6)]);
/// ```
pub fn process_fn<K, T, S, O, F>(on_record: F) -> ProcessFn<S, O, F, NoTimer>
where
    F: FnMut(&K, T, u64, &mut S, &mut ProcessCx<O>) + 'static,
{
    ProcessFn {
        on_record,
        on_timer: NoTimer,
        _t: PhantomData,
    }
}

/// The timer closure of a [`process_fn`] without one: does nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoTimer;

impl<S, O, F> ProcessFn<S, O, F, NoTimer> {
    /// Calls `on_timer(key, timer, state, cx)` when one of a key's timers
    /// fires.
    pub fn on_timer<K, G>(self, on_timer: G) -> ProcessFn<S, O, F, G>
    where
        G: FnMut(&K, u64, &mut S, &mut ProcessCx<O>) + 'static,
    {
        ProcessFn {
            on_record: self.on_record,
            on_timer,
            _t: PhantomData,
        }
    }
}

/// The timer closure of a [`ProcessFn`].
pub trait TimerFn<K, S, O>: 'static {
    /// Key `key`'s timer at `timer` fired.
    fn call(&mut self, key: &K, timer: u64, state: &mut S, cx: &mut ProcessCx<O>);
}

impl<K, S, O> TimerFn<K, S, O> for NoTimer {
    fn call(&mut self, _: &K, _: u64, _: &mut S, _: &mut ProcessCx<O>) {}
}

impl<K, S, O, G> TimerFn<K, S, O> for G
where
    G: FnMut(&K, u64, &mut S, &mut ProcessCx<O>) + 'static,
{
    fn call(&mut self, key: &K, timer: u64, state: &mut S, cx: &mut ProcessCx<O>) {
        self(key, timer, state, cx)
    }
}

impl<K, T, S, O, F, G> KeyedProcessFunction<K, T> for ProcessFn<S, O, F, G>
where
    S: Default + 'static,
    O: 'static,
    F: FnMut(&K, T, u64, &mut S, &mut ProcessCx<O>) + 'static,
    G: TimerFn<K, S, O>,
{
    type State = S;
    type Out = O;
    #[inline]
    fn process(&mut self, key: &K, record: T, time: u64, state: &mut S, cx: &mut ProcessCx<O>) {
        (self.on_record)(key, record, time, state, cx)
    }
    fn on_timer(&mut self, key: &K, timer: u64, state: &mut S, cx: &mut ProcessCx<O>) {
        self.on_timer.call(key, timer, state, cx)
    }
}

/// Whether a `process` operator saves its keys and their states at
/// checkpoints: [`StateNotSaved`] ([`KeyedProcessExt::process`]: a job
/// with checkpoints refuses it, naming it) or [`StateSaved`]
/// ([`KeyedProcessExt::process_checkpointed`]: keys and states archived
/// with rkyv).
pub trait SaveState<K, S>: 'static {
    /// `keys` and `states` as bytes, two sections; `None`: it cannot.
    fn save<'a>(
        keys: impl Iterator<Item = &'a K>,
        states: impl Iterator<Item = &'a S>,
    ) -> Option<[Vec<u8>; 2]>
    where
        K: 'a,
        S: 'a;
    /// What `save` gave: (keys, states).
    ///
    /// # Errors
    /// Bytes `save` did not make.
    fn restore(keys: &[u8], states: &[u8]) -> Result<(Vec<K>, Vec<S>), String>;
}

/// A `process` whose state cannot be saved (any state type): a job with
/// checkpoints refuses it.
#[derive(Debug, Clone, Copy, Default)]
pub struct StateNotSaved;

impl<K, S> SaveState<K, S> for StateNotSaved {
    fn save<'a>(
        _: impl Iterator<Item = &'a K>,
        _: impl Iterator<Item = &'a S>,
    ) -> Option<[Vec<u8>; 2]>
    where
        K: 'a,
        S: 'a,
    {
        None
    }
    fn restore(_: &[u8], _: &[u8]) -> Result<(Vec<K>, Vec<S>), String> {
        Err("this process function's state is not saved (use process_checkpointed)".into())
    }
}

/// A `process` whose keys and states are saved at checkpoints (both
/// [`Record`]s: archived with rkyv).
#[derive(Debug, Clone, Copy, Default)]
pub struct StateSaved;

impl<K: Record, S: Record> SaveState<K, S> for StateSaved {
    fn save<'a>(
        keys: impl Iterator<Item = &'a K>,
        states: impl Iterator<Item = &'a S>,
    ) -> Option<[Vec<u8>; 2]>
    where
        K: 'a,
        S: 'a,
    {
        let keys: Vec<K> = keys.cloned().collect();
        let states: Vec<S> = states.cloned().collect();
        Some([
            state::records_to_bytes(&keys),
            state::records_to_bytes(&states),
        ])
    }
    fn restore(keys: &[u8], states: &[u8]) -> Result<(Vec<K>, Vec<S>), String> {
        Ok((
            state::records_from_bytes(keys)?,
            state::records_from_bytes(states)?,
        ))
    }
}

/// `process` on a keyed stream.
pub trait KeyedProcessExt<H: Head, P: Pipe<H::Out>, KF> {
    /// Runs `f` on every record at its key's owner (an exchange edge
    /// carries the records there), with `time(record)` as its event time
    /// (ms, as the source's `event_time` gives it). The stream of `f`'s rows
    /// follows, carrying the operator's watermark (timers fire before it
    /// goes on). See the [module docs](self) for the rules of timers, state
    /// and end of stream.
    ///
    /// Counters: `process_records` (records sent to the operator),
    /// `timers_fired`, `unfired_timers` (left by a stopped job),
    /// `process_keys` (keys holding state or timers when the job ended).
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
    ///     // (sensor, reading, time ms): each worker reads its own sensor.
    ///     let s = df.index() as u8;
    ///     let readings = vec![(s, 5u32, 0u64), (s, 5, 10), (s, 7, 20), (s, 7, 30), (s, 5, 40)];
    ///     let out = out.clone();
    ///     df.source(VecSource::new(readings))
    ///         .event_time(|r| r.2, 0)
    ///         .key_by(|r| r.0)
    ///         // Only changes of a sensor's reading go on.
    ///         .process(
    ///             |r| r.2,
    ///             process_fn(|_k: &u8, r: (u8, u32, u64), _t, last: &mut Option<u32>,
    ///                         cx: &mut ProcessCx<(u8, u32, u64)>| {
    ///                 if *last != Some(r.1) {
    ///                     *last = Some(r.1);
    ///                     cx.emit(r);
    ///                 }
    ///             }),
    ///         )
    ///         .for_each(move |r| out.lock().unwrap().push(r));
    /// })
    /// .unwrap();
    /// let mut rows = rows.lock().unwrap().clone();
    /// rows.sort_by_key(|r| (r.0, r.2));
    /// assert_eq!(rows.len(), 6);
    /// assert_eq!(rows[..3], [(0, 5, 0), (0, 7, 20), (0, 5, 40)]);
    /// ```
    #[allow(clippy::type_complexity)]
    fn process<K, TF, F>(
        self,
        time: TF,
        f: F,
    ) -> Stream<OpHead<KeyedProcess<K, P::Out, F, KF, TF>>, Identity>
    where
        P::Out: Record,
        K: Hash + Eq + Clone + 'static,
        KF: Fn(&P::Out) -> K + Clone + 'static,
        TF: Fn(&P::Out) -> u64 + 'static,
        F: KeyedProcessFunction<K, P::Out>;

    /// [`process`](Self::process) whose keys' states and timers are saved
    /// at checkpoints (and restored on resume), so a job with
    /// `--checkpoint-dir` (or `Job::checkpoints`) may use it: the key and
    /// the state must be [`Record`]s (derive `Clone, rkyv::Archive,
    /// rkyv::Serialize, rkyv::Deserialize`). `process` takes any state
    /// type, and a job with checkpoints refuses it.
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
    ///     let shard: Vec<u64> = (0..20).filter(|i| i % 2 == df.index() as u64).collect();
    ///     let out = out.clone();
    ///     df.source(VecSource::new(shard))
    ///         .event_time(|x| *x * 100, 0)
    ///         .key_by(|x| x % 3)
    ///         // A count per key (a `u64`: a `Record`), emitted at the end.
    ///         .process_checkpointed(
    ///             |x| *x * 100,
    ///             process_fn(|_k: &u64, _x: u64, _t, n: &mut u64, cx: &mut ProcessCx<(u64, u64)>| {
    ///                 *n += 1;
    ///                 cx.register_timer(u64::MAX);
    ///             })
    ///             .on_timer(|k: &u64, _t, n: &mut u64, cx: &mut ProcessCx<(u64, u64)>| {
    ///                 cx.emit((*k, *n))
    ///             }),
    ///         )
    ///         .for_each(move |r| out.lock().unwrap().push(r));
    /// })
    /// .unwrap();
    /// let mut rows = rows.lock().unwrap().clone();
    /// rows.sort();
    /// assert_eq!(rows, [(0, 7), (1, 7), (2, 6)]);
    /// ```
    #[allow(clippy::type_complexity)]
    fn process_checkpointed<K, TF, F>(
        self,
        time: TF,
        f: F,
    ) -> Stream<OpHead<KeyedProcess<K, P::Out, F, KF, TF, StateSaved>>, Identity>
    where
        P::Out: Record,
        K: Record + Hash + Eq,
        KF: Fn(&P::Out) -> K + Clone + 'static,
        TF: Fn(&P::Out) -> u64 + 'static,
        F: KeyedProcessFunction<K, P::Out>,
        F::State: Record;
}

impl<H: Head, P: Pipe<H::Out>, KF> KeyedProcessExt<H, P, KF> for KeyedStream<H, P, KF> {
    #[track_caller]
    fn process<K, TF, F>(
        self,
        time: TF,
        f: F,
    ) -> Stream<OpHead<KeyedProcess<K, P::Out, F, KF, TF>>, Identity>
    where
        P::Out: Record,
        K: Hash + Eq + Clone + 'static,
        KF: Fn(&P::Out) -> K + Clone + 'static,
        TF: Fn(&P::Out) -> u64 + 'static,
        F: KeyedProcessFunction<K, P::Out>,
    {
        keyed_process(self, time, f)
    }

    #[track_caller]
    fn process_checkpointed<K, TF, F>(
        self,
        time: TF,
        f: F,
    ) -> Stream<OpHead<KeyedProcess<K, P::Out, F, KF, TF, StateSaved>>, Identity>
    where
        P::Out: Record,
        K: Record + Hash + Eq,
        KF: Fn(&P::Out) -> K + Clone + 'static,
        TF: Fn(&P::Out) -> u64 + 'static,
        F: KeyedProcessFunction<K, P::Out>,
        F::State: Record,
    {
        keyed_process(self, time, f)
    }
}

/// `process` and `process_checkpointed`: the records to their keys'
/// owners, the operator there.
#[allow(clippy::type_complexity)]
fn keyed_process<H, P, KF, K, TF, F, Sv>(
    keyed: KeyedStream<H, P, KF>,
    time: TF,
    f: F,
) -> Stream<OpHead<KeyedProcess<K, P::Out, F, KF, TF, Sv>>, Identity>
where
    H: Head,
    P: Pipe<H::Out>,
    P::Out: Record,
    K: Hash + Eq + Clone + 'static,
    KF: Fn(&P::Out) -> K + Clone + 'static,
    TF: Fn(&P::Out) -> u64 + 'static,
    F: KeyedProcessFunction<K, P::Out>,
    Sv: SaveState<K, F::State>,
{
    let (stream, key) = keyed.into_parts();
    let df = stream.dataflow().clone();
    let edge = df.new_edge("process records");
    let out = df.outbox::<P::Out>(edge);
    stream.end_in(ProcessTail {
        out,
        key: key.clone(),
    });
    df.consume(edge, KeyedProcess::new(f, key, time))
}

/// Routes records to their key's owner (the sending side of `process`).
struct ProcessTail<T, KF> {
    out: Outbox<T>,
    key: KF,
}

impl<T: ExchangeData, K: Hash, KF: Fn(&T) -> K + 'static> Tail<T> for ProcessTail<T, KF> {
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
    /// Keeps nothing: what it staged goes on before the barrier.
    fn barrier_safe(&self) -> bool {
        true
    }
    fn report(&mut self, stats: &mut Stats) {
        stats.add("process_records", self.out.records);
    }
}

/// One key's entry at its owner.
struct Slot<K, S> {
    key: K,
    /// `None`: no state (never made, or cleared).
    state: Option<S>,
    /// Timers set for this key.
    timers: u32,
}

/// The `process` operator at a key's owner: a key's state and timers, the
/// user's function; `Sv` says whether its state is saved at checkpoints
/// ([`SaveState`]).
pub struct KeyedProcess<K, T, F: KeyedProcessFunction<K, T>, KF, TF, Sv = StateNotSaved> {
    f: F,
    key: KF,
    time: TF,
    /// Key → its slot.
    keys: FxHashMap<K, u32>,
    /// Entries of keys holding state or timers (`None`: free, in `free`).
    slots: Vec<Option<Slot<K, F::State>>>,
    free: Vec<u32>,
    /// Every timer as (time, slot), in firing order.
    timers: BTreeSet<(u64, u32)>,
    cx: ProcessCx<F::Out>,
    wm: u64,
    fired: u64,
    unfired: u64,
    _t: PhantomData<fn(T, Sv)>,
}

impl<K, T, F, KF, TF, Sv> KeyedProcess<K, T, F, KF, TF, Sv>
where
    K: Hash + Eq + Clone + 'static,
    F: KeyedProcessFunction<K, T>,
    Sv: SaveState<K, F::State>,
{
    /// A new operator: no keys, no timers.
    fn new(f: F, key: KF, time: TF) -> Self {
        KeyedProcess {
            f,
            key,
            time,
            keys: FxHashMap::default(),
            slots: Vec::new(),
            free: Vec::new(),
            timers: BTreeSet::new(),
            cx: ProcessCx::new(),
            wm: 0,
            fired: 0,
            unfired: 0,
            _t: PhantomData,
        }
    }

    /// Its state at a checkpoint: the watermark, then its keys (those with
    /// state or timers), which of them have state, their states, and every
    /// timer as (time, position of its key). `None` unless `Sv` saves.
    fn save_state(&self) -> Option<Vec<u8>> {
        let live: Vec<&Slot<K, F::State>> = self.slots.iter().flatten().collect();
        // Slot number → position among the live ones.
        let mut at = vec![u64::MAX; self.slots.len()];
        for (n, i) in self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.as_ref().map(|_| i))
            .enumerate()
        {
            at[i] = n as u64;
        }
        let [keys, states] = Sv::save(
            live.iter().map(|s| &s.key),
            live.iter().filter_map(|s| s.state.as_ref()),
        )?;
        let has: Vec<u8> = live.iter().map(|s| s.state.is_some() as u8).collect();
        let times: Vec<u64> = self.timers.iter().map(|&(t, _)| t).collect();
        let owners: Vec<u64> = self.timers.iter().map(|&(_, i)| at[i as usize]).collect();
        Some(state::frame_sections(
            &[self.wm],
            &[
                &keys,
                &has,
                &states,
                &state::records_to_bytes(&times),
                &state::records_to_bytes(&owners),
            ],
        ))
    }

    /// Takes back what [`KeyedProcess::save_state`] gave (into an operator
    /// with no keys yet).
    fn restore_state(&mut self, saved: &[u8]) -> Result<(), String> {
        self.wm = self.restore_keys(saved, |_| true)?;
        Ok(())
    }

    /// On a resume at another worker count: from every old worker's saved
    /// state, the keys this worker owns now, with their states and timers;
    /// the watermark is the smallest saved (they agree at a barrier).
    fn rescale_state(&mut self, states: &[&[u8]], to: state::Rescale) -> Result<(), String> {
        // Replaces what it kept (a move of key groups during a job).
        self.keys.clear();
        self.slots.clear();
        self.free.clear();
        self.timers.clear();
        let mut wm = None::<u64>;
        for saved in states {
            let w = self.restore_keys(saved, |k| to.owns(k))?;
            wm = Some(wm.map_or(w, |m| m.min(w)));
        }
        self.wm = wm.unwrap_or(0);
        Ok(())
    }

    /// Adds the keys of `saved` that `keep` keeps, with their states and
    /// timers; returns the saved watermark.
    fn restore_keys(&mut self, saved: &[u8], keep: impl Fn(&K) -> bool) -> Result<u64, String> {
        let (values, s) = state::unframe_sections(saved, 5)?;
        let [wm] = values[..] else {
            return Err(format!("process state with {} values, not 1", values.len()));
        };
        let (keys, states) = Sv::restore(s[0], s[2])?;
        let has = s[1];
        let times = state::records_from_bytes::<u64>(s[3])?;
        let owners = state::records_from_bytes::<u64>(s[4])?;
        let with_state = has.iter().filter(|&&h| h != 0).count();
        if has.len() != keys.len() || with_state != states.len() || times.len() != owners.len() {
            return Err(format!(
                "process state of {} keys, {} flags, {} states, {} timer times, {} timer keys",
                keys.len(),
                has.len(),
                states.len(),
                times.len(),
                owners.len()
            ));
        }
        let mut states = states.into_iter();
        // Saved key position → its slot here (`None`: not kept).
        let mut slot_of = Vec::with_capacity(keys.len());
        for (key, &h) in keys.into_iter().zip(has) {
            let st = if h != 0 { states.next() } else { None };
            if !keep(&key) {
                slot_of.push(None);
                continue;
            }
            let i = self.slot_of(key);
            let slot = self.slots[i as usize].as_mut().expect("live slot");
            if st.is_some() {
                slot.state = st;
            }
            slot_of.push(Some(i));
        }
        for (t, owner) in times.into_iter().zip(owners) {
            let &i = slot_of
                .get(owner as usize)
                .ok_or_else(|| format!("a saved timer of key {owner}, of {}", slot_of.len()))?;
            let Some(i) = i else { continue };
            if self.timers.insert((t, i)) {
                self.slots[i as usize].as_mut().expect("live slot").timers += 1;
            }
        }
        Ok(wm)
    }

    /// The slot of `key`, made if new.
    #[inline]
    fn slot_of(&mut self, key: K) -> u32 {
        if let Some(&i) = self.keys.get(&key) {
            return i;
        }
        let slot = Slot {
            key: key.clone(),
            state: None,
            timers: 0,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Some(slot);
                i
            }
            None => {
                self.slots.push(Some(slot));
                (self.slots.len() - 1) as u32
            }
        };
        self.keys.insert(key, i);
        i
    }

    /// Applies what the call on slot `i` asked for (timers, clear), forgets
    /// the key if it holds nothing, and emits the call's rows.
    #[inline]
    fn settle<E: FnMut(F::Out)>(&mut self, i: u32, emit: &mut E) {
        let slot = self.slots[i as usize].as_mut().expect("live slot");
        for op in self.cx.ops.drain(..) {
            match op {
                TimerOp::Set(t) => {
                    if self.timers.insert((t, i)) {
                        slot.timers += 1;
                    }
                }
                TimerOp::Delete(t) => {
                    if self.timers.remove(&(t, i)) {
                        slot.timers -= 1;
                    }
                }
            }
        }
        if std::mem::take(&mut self.cx.clear) {
            slot.state = None;
        }
        if slot.state.is_none() && slot.timers == 0 {
            let slot = self.slots[i as usize].take().expect("live slot");
            self.keys.remove(&slot.key);
            self.free.push(i);
        }
        for row in self.cx.out.drain(..) {
            emit(row);
        }
    }

    /// Fires, in time order, every timer below `below` (every timer if
    /// `all`), including those set meanwhile.
    fn fire<E: FnMut(F::Out)>(&mut self, below: u64, all: bool, emit: &mut E) {
        while let Some(&(t, i)) = self.timers.first() {
            if t >= below && !all {
                break;
            }
            self.timers.pop_first();
            self.fired += 1;
            let slot = self.slots[i as usize].as_mut().expect("a timer's slot");
            slot.timers -= 1;
            let state = slot.state.get_or_insert_with(Default::default);
            self.cx.wm = self.wm;
            self.f.on_timer(&slot.key, t, state, &mut self.cx);
            self.settle(i, emit);
        }
    }
}

impl<K, T, F, KF, TF, Sv> Operator for KeyedProcess<K, T, F, KF, TF, Sv>
where
    K: Hash + Eq + Clone + 'static,
    T: Record,
    F: KeyedProcessFunction<K, T>,
    KF: Fn(&T) -> K + 'static,
    TF: Fn(&T) -> u64 + 'static,
    Sv: SaveState<K, F::State>,
{
    type In = T;
    type Out = F::Out;

    #[inline]
    fn on_batch<E: FnMut(F::Out)>(&mut self, items: &[<T as ExchangeData>::Item], emit: &mut E) {
        for a in items {
            let x = T::from_archived(a);
            let key = (self.key)(&x);
            let time = (self.time)(&x);
            let i = self.slot_of(key);
            let slot = self.slots[i as usize].as_mut().expect("live slot");
            let state = slot.state.get_or_insert_with(Default::default);
            self.cx.wm = self.wm;
            self.f.process(&slot.key, x, time, state, &mut self.cx);
            self.settle(i, emit);
        }
    }

    fn on_watermark<E: FnMut(F::Out)>(&mut self, wm: u64, emit: &mut E) {
        if wm > self.wm {
            self.wm = wm;
            // `u64::MAX` is the end of every input (each sends it just
            // before its end): every timer fires now, `u64::MAX` included,
            // before the watermark goes on, so their rows are not late
            // downstream (a window ending at `u64::MAX` there would fire
            // without them).
            self.fire(wm, wm == u64::MAX, emit);
        }
    }

    fn on_end<E: FnMut(F::Out)>(&mut self, final_wm: u64, emit: &mut E) {
        self.wm = self.wm.max(final_wm);
        // The end of the stream fires every timer; a stop only those below
        // what every input read past.
        self.fire(final_wm, final_wm == u64::MAX, emit);
        self.unfired += self.timers.len() as u64;
    }

    fn report(&mut self, stats: &mut Stats) {
        stats.add("timers_fired", self.fired);
        stats.add("unfired_timers", self.unfired);
        stats.add("process_keys", self.keys.len() as u64);
    }

    /// Keys, states and timers, if `Sv` saves them ([`SaveState`]).
    fn save(&self) -> Option<Vec<u8>> {
        self.save_state()
    }

    fn restore(&mut self, state: &[u8]) -> Result<(), String> {
        self.restore_state(state)
    }

    /// Saved keys go to their key group's owner (if `Sv` saves them).
    fn rescales(&self) -> bool {
        self.save_state().is_some()
    }

    fn rescale(&mut self, states: &[&[u8]], to: state::Rescale) -> Result<(), String> {
        self.rescale_state(states, to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The operator alone: records in, then the watermark `u64::MAX` as
    /// a slow input's end delivers it (before the end itself): the timers
    /// at `u64::MAX` fire then, not at the end, so their rows precede the
    /// watermark downstream.
    #[test]
    fn the_watermark_u64_max_fires_the_timers_at_u64_max() {
        let f = process_fn(
            |_k: &u64, _x: (u64, u64), _t, n: &mut u64, cx: &mut ProcessCx<_>| {
                *n += 1;
                cx.register_timer(u64::MAX);
                cx.register_timer(5);
            },
        )
        .on_timer(
            |k: &u64, t, n: &mut u64, cx: &mut ProcessCx<(u64, u64, u64)>| cx.emit((*k, t, *n)),
        );
        let mut op: KeyedProcess<_, _, _, _, _> =
            KeyedProcess::new(f, |x: &(u64, u64)| x.0, |x: &(u64, u64)| x.1);
        let batch = <(u64, u64)>::to_bytes(&vec![(1, 0), (2, 1), (1, 2)]);
        let items = <(u64, u64)>::read_batch(&batch).unwrap();
        let mut rows = Vec::new();
        op.on_batch(items, &mut |r| rows.push(r));
        assert!(rows.is_empty());
        op.on_watermark(6, &mut |r| rows.push(r));
        assert_eq!(rows, [(1, 5, 2), (2, 5, 1)], "the timers at 5 only");
        rows.clear();
        op.on_watermark(u64::MAX, &mut |r| rows.push(r));
        rows.sort_unstable();
        assert_eq!(rows, [(1, u64::MAX, 2), (2, u64::MAX, 1)]);
        rows.clear();
        op.on_end(u64::MAX, &mut |r| rows.push(r));
        assert!(rows.is_empty(), "fired once");
        assert_eq!((op.fired, op.unfired), (4, 0));
    }

    /// A running sum per key, emitted by a timer 250 ms after each record
    /// (one timer per key and 100 ms); state cleared when a key's sum
    /// passes 40.
    #[allow(clippy::type_complexity)] // impl types cannot be aliased
    fn summing() -> KeyedProcess<
        u64,
        (u64, u64),
        impl KeyedProcessFunction<u64, (u64, u64), State = u64, Out = (u64, u64, u64)>,
        impl Fn(&(u64, u64)) -> u64,
        impl Fn(&(u64, u64)) -> u64,
        StateSaved,
    > {
        let f = process_fn(
            |_k: &u64, x: (u64, u64), t, sum: &mut u64, cx: &mut ProcessCx<_>| {
                *sum += x.0 % 7;
                cx.register_timer(t - t % 100 + 250);
            },
        )
        .on_timer(
            |k: &u64, t, sum: &mut u64, cx: &mut ProcessCx<(u64, u64, u64)>| {
                cx.emit((*k, t, *sum));
                if *sum > 40 {
                    cx.clear_state();
                }
            },
        );
        KeyedProcess::new(f, |x: &(u64, u64)| x.0 % 5, |x: &(u64, u64)| x.1)
    }

    /// Saved midway and restored into a new operator, `process` with saved
    /// state gives the rows of one that ran through; without, it cannot
    /// save.
    #[test]
    fn a_saved_process_resumes_with_its_states_and_timers() {
        enum Step {
            Batch(Vec<(u64, u64)>),
            Watermark(u64),
        }
        let mut steps = Vec::new();
        for round in 0..40u64 {
            steps.push(Step::Batch(
                (0..6)
                    .map(|i| (round * 6 + i, round * 37 + i * 3))
                    .collect(),
            ));
            if round % 3 == 2 {
                steps.push(Step::Watermark(round * 37));
            }
        }
        steps.push(Step::Watermark(u64::MAX));
        let run = |op: &mut KeyedProcess<_, _, _, _, _, _>, steps: &[Step], rows: &mut Vec<_>| {
            for s in steps {
                match s {
                    Step::Batch(v) => {
                        let b = <(u64, u64)>::to_bytes(v);
                        let items = <(u64, u64)>::read_batch(&b).unwrap();
                        op.on_batch(items, &mut |r| rows.push(r));
                    }
                    Step::Watermark(wm) => op.on_watermark(*wm, &mut |r| rows.push(r)),
                }
            }
        };
        let mut want = Vec::new();
        run(&mut summing(), &steps, &mut want);
        assert!(want.len() > 20);
        want.sort_unstable();
        for cut in [3, 10, 27, steps.len() - 1] {
            let mut first = summing();
            let mut got = Vec::new();
            run(&mut first, &steps[..cut], &mut got);
            let saved = first.save().expect("saves");
            let mut second = summing();
            second.restore(&saved).unwrap();
            run(&mut second, &steps[cut..], &mut got);
            got.sort_unstable();
            assert_eq!(got, want, "cut at step {cut}");
        }
        assert!(summing().restore(b"not a process's state").is_err());
        let f =
            process_fn(|_k: &u64, _x: (u64, u64), _t, _s: &mut u64, _cx: &mut ProcessCx<u64>| {});
        let unsaved: KeyedProcess<_, _, _, _, _> =
            KeyedProcess::new(f, |x: &(u64, u64)| x.0, |x: &(u64, u64)| x.1);
        assert!(unsaved.save().is_none());
        assert!(!unsaved.rescales());
    }

    /// Saved at 2 workers (each with its keys' records), resumed at 3: each
    /// new worker takes the keys it owns now from both states, with their
    /// sums and timers, and the rows are those of one operator that saw
    /// everything.
    #[test]
    fn a_saved_process_rescales_by_key_group() {
        use air_runtime::dataflow::state::Rescale;
        use air_runtime::keygroups::KeyGroups;
        let batches: Vec<Vec<(u64, u64)>> = (0..40u64)
            .map(|r| (0..6).map(|i| (r * 6 + i, r * 37 + i * 3)).collect())
            .collect();
        let key = |x: &(u64, u64)| x.0 % 5;
        let feed = |op: &mut KeyedProcess<_, _, _, _, _, _>,
                    rounds: std::ops::Range<usize>,
                    mine: &dyn Fn(u64) -> bool,
                    rows: &mut Vec<(u64, u64, u64)>| {
            for r in rounds {
                let v: Vec<(u64, u64)> = batches[r]
                    .iter()
                    .copied()
                    .filter(|x| mine(key(x)))
                    .collect();
                let b = <(u64, u64)>::to_bytes(&v);
                op.on_batch(<(u64, u64)>::read_batch(&b).unwrap(), &mut |x| rows.push(x));
                if r % 3 == 2 {
                    op.on_watermark(r as u64 * 37, &mut |x| rows.push(x));
                }
            }
        };
        let mut want = Vec::new();
        let mut all = summing();
        feed(&mut all, 0..40, &|_| true, &mut want);
        all.on_watermark(u64::MAX, &mut |x| want.push(x));
        want.sort_unstable();
        let owner = |k: u64, w: usize| {
            KeyGroups::new(128, w)
                .unwrap()
                .owner(air_runtime::key_hash(&k))
        };
        let mut got = Vec::new();
        let saved: Vec<Vec<u8>> = (0..2)
            .map(|w| {
                let mut op = summing();
                feed(&mut op, 0..17, &|k| owner(k, 2) == w, &mut got);
                op.save().unwrap()
            })
            .collect();
        let states: Vec<&[u8]> = saved.iter().map(|s| s.as_slice()).collect();
        for w in 0..3 {
            let mut op = summing();
            assert!(op.rescales());
            op.rescale(
                &states,
                Rescale {
                    worker: w,
                    workers: 3,
                    from: 2,
                    groups: KeyGroups::new(128, 3).unwrap().into(),
                },
            )
            .unwrap();
            feed(&mut op, 17..40, &|k| owner(k, 3) == w, &mut got);
            op.on_watermark(u64::MAX, &mut |x| got.push(x));
        }
        got.sort_unstable();
        assert_eq!(got, want);
    }

    /// A job with checkpoints refuses a keyed `process` whose state is not
    /// saved (`process`, not `process_checkpointed`) before it runs,
    /// naming it; the same graph runs without checkpoints.
    #[test]
    fn a_process_whose_state_is_not_saved_is_refused_with_checkpoints() {
        use air_runtime::dataflow::{run_graph, CheckpointConfig, Dataflow, VecSource};
        use air_runtime::JobConfig;
        let dir = tempfile::tempdir().unwrap();
        let ran = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let job = |checkpoint: Option<CheckpointConfig>| {
            let cfg = JobConfig {
                workers: 2,
                pin: false,
                barrier_every: checkpoint
                    .as_ref()
                    .map(|_| std::time::Duration::from_millis(5)),
                checkpoint,
                ..JobConfig::default()
            };
            let ran = ran.clone();
            run_graph(&cfg, move |df: &Dataflow| {
                let ran = ran.clone();
                let f = process_fn(
                    |_k: &u64, x: (u64, u64), _t, n: &mut u64, cx: &mut ProcessCx<u64>| {
                        *n += x.1;
                        cx.emit(*n);
                    },
                );
                df.source(VecSource::new(vec![(1u64, 1u64), (2, 2)]))
                    .event_time(|x: &(u64, u64)| x.1, 0)
                    .key_by(|x: &(u64, u64)| x.0)
                    .process(|x: &(u64, u64)| x.1, f)
                    .for_each(move |_| {
                        ran.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    });
            })
        };
        let e = job(Some(CheckpointConfig {
            dir: dir.path().to_path_buf(),
            retained: 2,
            fresh: false,
            job: 1,
        }))
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("cannot be saved") && e.contains("KeyedProcess"),
            "{e}"
        );
        assert_eq!(ran.load(std::sync::atomic::Ordering::Relaxed), 0, "it ran");
        job(None).unwrap();
        assert_eq!(ran.load(std::sync::atomic::Ordering::Relaxed), 4);
    }
}
