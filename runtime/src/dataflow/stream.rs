//! The graph builder and its typed stream handles.

use super::align::{Early, TwoInputs};
use super::cx::{Cx, EdgeConsumer, Outbox};
use super::pipe::{EventTime, Filter, FlatMap, Identity, IngestionTime, Inspect, Map, Pipe};
use super::Stats;
use crate::data::{ExchangeData, Record};
use crate::exchange::key_hash;
use crate::job::{Progress, WorkerInfo};
use crate::RuntimeError;
use std::cell::RefCell;
use std::hash::Hash;
use std::marker::PhantomData;
use std::panic::Location;
use std::rc::{Rc, Weak};

/// What a source's poll produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourcePoll {
    /// Items were put in the buffer (possibly none).
    Ready,
    /// Nothing now (a paced or live source ahead of its input).
    Idle,
    /// Exhausted (or stopped on an error it keeps for the caller).
    Done,
}

/// A source of records for one worker (its shard of the input).
///
/// ```
/// use air_runtime::dataflow::{run_graph, Source, SourcePoll};
/// use air_runtime::JobConfig;
///
/// /// The numbers below `n`, at most `max` per poll.
/// struct Below { next: u64, n: u64 }
/// impl Source for Below {
///     type Item = u64;
///     fn poll(&mut self, buf: &mut Vec<u64>, max: usize) -> SourcePoll {
///         buf.clear();
///         while self.next < self.n && buf.len() < max {
///             buf.push(self.next);
///             self.next += 1;
///         }
///         if self.next == self.n { SourcePoll::Done } else { SourcePoll::Ready }
///     }
/// }
///
/// let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
/// let out = run_graph(&cfg, |df| {
///     df.source(Below { next: 0, n: 3_000 }).for_each(|_| {}); // 3 polls of 1024
/// })
/// .unwrap();
/// assert_eq!(out.stats.get("source_records"), 6_000); // 3 000 per worker
/// ```
pub trait Source: Send + 'static {
    /// The records it yields: copied out of the batch buffer, or moved out
    /// of it if they need dropping (own memory, e.g. strings).
    type Item: Clone + Send + 'static;
    /// Replaces the contents of `buf` with up to `max` new records. For an
    /// `Item` that needs no drop, `buf` keeps whatever length the source
    /// left in it last time (so a source that fills a slice in place need
    /// not re-initialize it); otherwise its records were moved out and it
    /// comes back empty.
    fn poll(&mut self, buf: &mut Vec<Self::Item>, max: usize) -> SourcePoll;
    /// After `poll` returned `Done`: the error that ended it early, if any.
    /// The job fails with it once its worker processed what was read
    /// before, as if the input had ended there (windows fire with the end
    /// of the inputs); the other workers' sources read on to their end.
    fn take_error(&mut self) -> Option<String> {
        None
    }
    /// Input events the last `poll` read, for the live timeline
    /// ([`crate::timeline`]), given the records it `yielded`. Default: the
    /// records yielded. A source that drops events as it reads (a filter
    /// pushed into it) counts those too; a second read of an input that
    /// another source already counts returns 0.
    #[inline]
    fn events_read(&self, yielded: usize) -> u64 {
        yielded as u64
    }
    /// Adds the source's counters (records read, bad records…) to `stats`
    /// once the job ended. With live metrics ([`crate::live`]) it is also
    /// called during the job, at most every `live::PUBLISH_EVERY`, with
    /// fresh `stats`: it must add what was counted so far and change
    /// nothing else.
    fn report(&mut self, stats: &mut Stats) {
        let _ = stats;
    }
    /// After a `poll` that returned [`SourcePoll::Idle`]: the instant from
    /// which it will have records again, if it knows (a paced source: its
    /// next batch's due time). An idle worker parks until then at the
    /// latest; without it (`None`, the default) it comes back at its next
    /// flush tick (`JobConfig::flush`), or when a frame arrives.
    fn next_due(&self) -> Option<std::time::Instant> {
        None
    }
    /// Its position at a checkpoint barrier (called between polls): the
    /// bytes [`Source::restore`] needs to go on from exactly there on
    /// resume (e.g. events yielded, a file's byte offset). `None` (the
    /// default): it cannot, and a job with checkpoints
    /// (`JobConfig::checkpoint`) refuses to start, naming it.
    fn save(&self) -> Option<Vec<u8>> {
        None
    }
    /// Goes to the position `save` gave (on resume, before the first
    /// poll).
    ///
    /// # Errors
    /// A position it cannot go to (the job then fails to start).
    fn restore(&mut self, state: &[u8]) -> Result<(), String> {
        let _ = state;
        Err("this source cannot resume from a checkpoint".into())
    }
    /// Whether it can resume at another worker count
    /// ([`Source::rescale`]). `false` (the default): such a resume is
    /// refused before it starts, naming it.
    fn rescales(&self) -> bool {
        false
    }
    /// On a resume at another worker count: goes on with its share of what
    /// the old workers had still to read, from every old worker's saved
    /// position (`states`, by old worker; this worker and the counts in
    /// `to`). Together, the new workers' sources read every record the
    /// old ones had not, once.
    ///
    /// # Errors
    /// A position it cannot go to (the job then fails to start).
    fn rescale(&mut self, states: &[&[u8]], to: super::state::Rescale) -> Result<(), String> {
        let _ = (states, to);
        Err("this source cannot resume at another worker count".into())
    }
}

/// A source over a vector (tests and examples).
pub struct VecSource<T> {
    items: std::vec::IntoIter<T>,
    /// Records yielded so far (its checkpoint position).
    yielded: u64,
}

impl<T> VecSource<T> {
    /// Yields `items` in order.
    pub fn new(items: Vec<T>) -> Self {
        VecSource {
            items: items.into_iter(),
            yielded: 0,
        }
    }
}

impl<T: Clone + Send + 'static> Source for VecSource<T> {
    type Item = T;
    fn poll(&mut self, buf: &mut Vec<T>, max: usize) -> SourcePoll {
        buf.clear();
        buf.extend(self.items.by_ref().take(max));
        self.yielded += buf.len() as u64;
        if self.items.len() == 0 {
            SourcePoll::Done
        } else {
            SourcePoll::Ready
        }
    }
    fn save(&self) -> Option<Vec<u8>> {
        Some(self.yielded.to_le_bytes().to_vec())
    }
    fn restore(&mut self, state: &[u8]) -> Result<(), String> {
        let n = super::state::read_u64(state, 0)?;
        let skip = usize::try_from(n).map_err(|_| format!("position {n} is too large"))?;
        if skip > self.items.len() {
            return Err(format!(
                "position {n} is past the end of the input ({} records)",
                self.items.len()
            ));
        }
        self.items.by_ref().take(skip).for_each(drop);
        self.yielded = n;
        Ok(())
    }
}

/// Where a fused chain of records ends: an exchange, a pre-aggregating
/// window, a sink. Called on the worker's thread only.
pub trait Tail<T>: 'static {
    /// One record.
    fn push(&mut self, item: T, cx: &mut Cx<'_, '_>);
    /// No record below `wm` (ms) will be pushed any more.
    fn watermark(&mut self, wm: u64, cx: &mut Cx<'_, '_>);
    /// The flush interval passed: push staged records on.
    fn tick(&mut self, cx: &mut Cx<'_, '_>) {
        let _ = cx;
    }
    /// End of stream; `final_wm` is `u64::MAX` unless the job was stopped.
    fn end(&mut self, final_wm: u64, cx: &mut Cx<'_, '_>);
    /// Checkpoint barrier `id`: every record pushed before it belongs to
    /// checkpoint `id`, none after. Pass it on behind what was staged
    /// before it (an outbox: [`Outbox::barrier`]); a sink notes it
    /// (docs/design.md, "Checkpoints").
    fn barrier(&mut self, id: u64, cx: &mut Cx<'_, '_>);
    /// Whether a checkpoint may pass this tail: it holds nothing across a
    /// barrier (it sends or flushes what it keeps before passing it on),
    /// or saves what it keeps itself ([`super::Dataflow::state_slot`]).
    /// `false` (the default) makes a job with checkpoints refuse to
    /// start, naming it.
    fn barrier_safe(&self) -> bool {
        false
    }
    /// Adds counters to `stats` once the job ended (also during the job
    /// for live metrics: see [`Source::report`]).
    fn report(&mut self, stats: &mut Stats) {
        let _ = stats;
    }
}

/// An operator fed by one exchange edge: archived batches of `In` (read in
/// place) and the edge's watermark; emits `Out` records into the fused
/// chain after it.
///
/// An operator of one's own, wired by hand: a [`Tail`] that sends a
/// segment's records on a new edge ([`Dataflow::new_edge`],
/// [`Dataflow::outbox`], [`Stream::end_in`]), and the operator that edge
/// feeds ([`Dataflow::consume`]).
///
/// ```
/// use air_runtime::dataflow::{run_graph, Cx, Operator, Outbox, Tail, VecSource};
/// use air_runtime::{ExchangeData, JobConfig, Record};
/// use std::sync::{Arc, Mutex};
///
/// /// Ends a segment: every record to worker 0.
/// struct ToFirst(Outbox<u64>);
/// impl Tail<u64> for ToFirst {
///     fn push(&mut self, x: u64, cx: &mut Cx<'_, '_>) { self.0.push(0, x, cx) }
///     fn watermark(&mut self, wm: u64, cx: &mut Cx<'_, '_>) { self.0.watermark(wm, cx) }
///     fn tick(&mut self, cx: &mut Cx<'_, '_>) { self.0.flush(cx) }
///     fn end(&mut self, wm: u64, cx: &mut Cx<'_, '_>) { self.0.end(wm, cx) }
///     fn barrier(&mut self, id: u64, cx: &mut Cx<'_, '_>) { self.0.barrier(id, cx) }
/// }
///
/// /// Sums its edge's records (read in place); emits the sum at the end.
/// struct Total(u64);
/// impl Operator for Total {
///     type In = u64;
///     type Out = u64;
///     fn on_batch<E: FnMut(u64)>(&mut self, items: &[<u64 as ExchangeData>::Item], _: &mut E) {
///         self.0 += items.iter().map(u64::from_archived).sum::<u64>();
///     }
///     fn on_watermark<E: FnMut(u64)>(&mut self, _wm: u64, _emit: &mut E) {}
///     fn on_end<E: FnMut(u64)>(&mut self, _final_wm: u64, emit: &mut E) {
///         emit(self.0)
///     }
/// }
///
/// let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
/// let sums = Arc::new(Mutex::new(Vec::new()));
/// let out = sums.clone();
/// run_graph(&cfg, move |df| {
///     let edge = df.new_edge("to first");
///     let tail = ToFirst(df.outbox::<u64>(edge));
///     df.source(VecSource::new(vec![1u64, 2, 3])).end_in(tail);
///     let out = out.clone();
///     df.consume(edge, Total(0)).for_each(move |s| out.lock().unwrap().push(s));
/// })
/// .unwrap();
/// let mut sums = sums.lock().unwrap().clone();
/// sums.sort();
/// assert_eq!(sums, [0, 12]); // worker 1's operator got nothing, worker 0's both shares
/// ```
pub trait Operator: 'static {
    /// Records of its input edge.
    type In: Record;
    /// Records it emits.
    type Out;
    /// A batch from the edge, in place.
    fn on_batch<E: FnMut(Self::Out)>(
        &mut self,
        items: &[<Self::In as ExchangeData>::Item],
        emit: &mut E,
    );
    /// The edge's watermark advanced to `wm` (ms): fire what it closes.
    fn on_watermark<E: FnMut(Self::Out)>(&mut self, wm: u64, emit: &mut E);
    /// Every input ended at final watermark `final_wm` (`u64::MAX` unless
    /// stopped): fire what it closes and count what stays open.
    fn on_end<E: FnMut(Self::Out)>(&mut self, final_wm: u64, emit: &mut E) {
        self.on_watermark(final_wm, emit)
    }
    /// Adds counters to `stats` once the job ended (also during the job
    /// for live metrics: see [`Source::report`]).
    fn report(&mut self, stats: &mut Stats) {
        let _ = stats;
    }
    /// Its state at a checkpoint barrier (everything it keeps between
    /// batches that changes what it emits: windows, their accumulators, its
    /// watermark), as bytes for [`Operator::restore`]; an operator that
    /// keeps nothing returns an empty vector. `None` (the default): it
    /// cannot, and a job with checkpoints refuses to start, naming it.
    fn save(&self) -> Option<Vec<u8>> {
        None
    }
    /// Takes back the state `save` gave (on resume, before any batch).
    ///
    /// # Errors
    /// State it cannot read (the job then fails to start).
    fn restore(&mut self, state: &[u8]) -> Result<(), String> {
        let _ = state;
        Err("this operator cannot resume from a checkpoint".into())
    }
    /// Whether it can resume at another worker count
    /// ([`Operator::rescale`]). `false` (the default): such a resume is
    /// refused before it starts, naming it.
    fn rescales(&self) -> bool {
        false
    }
    /// On a resume at another worker count: takes from every old worker's
    /// saved state (`states`, by old worker) what this worker owns now
    /// (keyed state: the keys whose key group it owns,
    /// [`super::state::Rescale::owns`]).
    ///
    /// # Errors
    /// State it cannot read (the job then fails to start).
    fn rescale(&mut self, states: &[&[u8]], to: super::state::Rescale) -> Result<(), String> {
        let _ = (states, to);
        Err("this operator cannot resume at another worker count".into())
    }
}

/// An operator fed by two exchange edges (a join): batches of each side,
/// and the minimum of the two edges' watermarks.
pub trait Operator2: 'static {
    /// Records of the first input edge.
    type In1: Record;
    /// Records of the second input edge.
    type In2: Record;
    /// Records it emits.
    type Out;
    /// A batch of the first input, in place.
    fn on_batch1<E: FnMut(Self::Out)>(
        &mut self,
        items: &[<Self::In1 as ExchangeData>::Item],
        emit: &mut E,
    );
    /// A batch of the second input, in place.
    fn on_batch2<E: FnMut(Self::Out)>(
        &mut self,
        items: &[<Self::In2 as ExchangeData>::Item],
        emit: &mut E,
    );
    /// The minimum of both inputs' watermarks advanced to `wm`.
    fn on_watermark<E: FnMut(Self::Out)>(&mut self, wm: u64, emit: &mut E);
    /// Both inputs ended; `final_wm` is the minimum of their final watermarks.
    fn on_end<E: FnMut(Self::Out)>(&mut self, final_wm: u64, emit: &mut E) {
        self.on_watermark(final_wm, emit)
    }
    /// Adds counters to `stats` once the job ended (also during the job
    /// for live metrics: see [`Source::report`]).
    fn report(&mut self, stats: &mut Stats) {
        let _ = stats;
    }
    /// Its state at a checkpoint barrier ([`Operator::save`]). `None`
    /// (the default): a job with checkpoints refuses to start.
    fn save(&self) -> Option<Vec<u8>> {
        None
    }
    /// Takes back the state `save` gave ([`Operator::restore`]).
    ///
    /// # Errors
    /// State it cannot read.
    fn restore(&mut self, state: &[u8]) -> Result<(), String> {
        let _ = state;
        Err("this operator cannot resume from a checkpoint".into())
    }
    /// Whether it can resume at another worker count
    /// ([`Operator2::rescale`]). `false` (the default): such a resume is
    /// refused before it starts, naming it.
    fn rescales(&self) -> bool {
        false
    }
    /// On a resume at another worker count: takes from every old worker's
    /// saved state (`states`, by old worker) what this worker owns now
    /// ([`Operator::rescale`]; a join: the kept records of the keys whose
    /// key group it owns, [`super::state::Rescale::owns`]).
    ///
    /// # Errors
    /// State it cannot read (the job then fails to start).
    fn rescale(&mut self, states: &[&[u8]], to: super::state::Rescale) -> Result<(), String> {
        let _ = (states, to);
        Err("this operator cannot resume at another worker count".into())
    }
}

/// What a sink does with the rows that reach it. A sink at every worker
/// sees that worker's rows; put [`Stream::collect`] before it for one
/// writer. A closure `FnMut(T)` is a sink that never fails.
///
/// An error a sink returns stops the job with its message:
///
/// ```
/// use air_runtime::dataflow::{run_graph, Sink, VecSource};
/// use air_runtime::JobConfig;
///
/// struct AtMostTwo;
/// impl Sink<u64> for AtMostTwo {
///     fn write(&mut self, row: u64) -> Result<(), String> {
///         if row > 2 { Err(format!("row {row} refused")) } else { Ok(()) }
///     }
/// }
///
/// let cfg = JobConfig { workers: 1, pin: false, ..JobConfig::default() };
/// let err = run_graph(&cfg, |df| {
///     df.source(VecSource::new(vec![1u64, 2, 3])).sink(AtMostTwo);
/// })
/// .unwrap_err();
/// assert_eq!(err.to_string(), "worker 0: row 3 refused");
/// ```
pub trait Sink<T>: 'static {
    /// Called once, before any row, with the index of the worker this
    /// sink runs at (e.g. to name a file per worker).
    fn bind(&mut self, worker: usize) {
        let _ = worker;
    }
    /// One row, written now (errors stop the job with the message).
    fn write(&mut self, row: T) -> Result<(), String>;
    /// The flush interval passed: make written rows visible (e.g. flush a
    /// file buffer).
    fn flush(&mut self) -> Result<(), String> {
        Ok(())
    }
    /// End of stream: flush and close.
    fn close(&mut self) -> Result<(), String> {
        self.flush()
    }
    /// Adds counters to `stats` once the job ended (also during the job
    /// for live metrics: see [`Source::report`]).
    fn report(&mut self, stats: &mut Stats) {
        let _ = stats;
    }
    /// Whether it takes part in checkpoints ([`Sink::barrier`],
    /// [`Sink::restore`]). `false` (the default): a job with checkpoints
    /// refuses to start, naming it.
    fn checkpoints(&self) -> bool {
        false
    }
    /// Checkpoint barrier `id` reached it: the rows written since the
    /// previous barrier belong to checkpoint `id`. Returns the state to
    /// save with the checkpoint (an exactly-once sink: the rows not yet
    /// committed, to commit once checkpoint `id` is complete).
    ///
    /// # Errors
    /// The job stops with the message.
    fn barrier(&mut self, id: u64) -> Result<Vec<u8>, String> {
        let _ = id;
        Ok(Vec::new())
    }
    /// On resume (after `bind`, before any row): the state `barrier` gave
    /// at the checkpoint resumed from.
    ///
    /// # Errors
    /// The job fails to start with the message.
    fn restore(&mut self, state: &[u8]) -> Result<(), String> {
        let _ = state;
        Ok(())
    }
    /// Whether it can resume at another worker count ([`Sink::rescale`]).
    /// `false` (the default): such a resume is refused before it starts.
    fn rescales(&self) -> bool {
        false
    }
    /// On a resume at another worker count (after `bind`, before any row):
    /// every old worker's state `barrier` gave (`states`, by old worker).
    ///
    /// # Errors
    /// The job fails to start with the message.
    fn rescale(&mut self, states: &[&[u8]], to: super::state::Rescale) -> Result<(), String> {
        let _ = (states, to);
        Err("this sink cannot resume at another worker count".into())
    }
}

/// A closure sink takes part in checkpoints at least once: after a resume
/// it is called again for the rows after the checkpoint resumed from.
impl<T, F: FnMut(T) + 'static> Sink<T> for F {
    fn write(&mut self, row: T) -> Result<(), String> {
        self(row);
        Ok(())
    }
    fn checkpoints(&self) -> bool {
        true
    }
    /// Keeps nothing: every worker's closure goes on.
    fn rescales(&self) -> bool {
        true
    }
    fn rescale(&mut self, _states: &[&[u8]], _to: super::state::Rescale) -> Result<(), String> {
        Ok(())
    }
}

/// A source-driven segment (type-erased).
pub(crate) trait SourceDriver {
    fn step(&mut self, cx: &mut Cx<'_, '_>) -> Progress;
    /// [`Source::next_due`].
    fn next_due(&self) -> Option<std::time::Instant>;
    fn tick(&mut self, cx: &mut Cx<'_, '_>);
    /// Its event-time watermark (ms; 0 without an event-time stage).
    fn watermark(&self) -> u64;
    fn finish(&mut self, stopped: bool, cx: &mut Cx<'_, '_>);
    fn report(&mut self, stats: &mut Stats);
}

pub(crate) struct EdgePlan {
    pub(crate) name: String,
    /// The record type it carries (`std::any::type_name`), once a feeder
    /// or its consumer said.
    pub(crate) ty: Option<&'static str>,
    /// Carries few records (results to one writer): smaller rings.
    pub(crate) small: bool,
    /// Every record goes to one worker by design (a collect): its stage
    /// is left out of the load ratio ([`super::Stage::to_one_worker`]).
    pub(crate) gathers: bool,
    pub(crate) feeders: usize,
    pub(crate) consumer: Option<Box<dyn EdgeConsumer>>,
    /// The other edge of the two-input operator it feeds
    /// ([`Dataflow::consume2`]), if it feeds one: the two make one stage
    /// ([`super::Stage`]).
    pub(crate) partner: Option<usize>,
    /// Its operator's key groups may move, with its state
    /// ([`super::moves`]); `Some(true)`: the operator sends its state on
    /// this edge (the first of a two-input operator's).
    pub(crate) moves: Option<bool>,
}

/// A user's counter reporter ([`Dataflow::report_with`]).
pub(crate) type Reporter = Box<dyn FnMut(&mut Stats)>;

/// What the worker keeps of the builder after wiring the graph.
pub(crate) struct Leftover {
    pub(crate) reporters: Vec<Reporter>,
}

/// The build-time mark of a stream handle not yet consumed: dropping it
/// armed records, in the graph's error, which stream was left unconsumed
/// (a stream that ends nowhere would be silently dropped with its records).
/// Lives in [`Stream`] only, never in a running segment: no cost per record.
struct Pending {
    b: Weak<RefCell<Builder>>,
    /// Where the stream handle was made (the last stream method called).
    at: &'static Location<'static>,
    /// The stream's record type.
    ty: &'static str,
    /// The edge whose operator heads the stream, if any.
    edge: Option<usize>,
    armed: bool,
}

impl Pending {
    /// Taken into another stream (a union's or a tee's), which answers for
    /// it: dropping it says nothing.
    fn settle(&mut self) {
        self.armed = false;
    }

    /// Consumed: dropping it says nothing.
    fn disarm(mut self) {
        self.armed = false;
    }

    /// The mark of the stream a stream method made from this one (records
    /// of type `T`, made at the caller).
    #[track_caller]
    fn renew<T>(mut self) -> Pending {
        self.armed = false;
        Pending {
            b: self.b.clone(),
            at: Location::caller(),
            ty: std::any::type_name::<T>(),
            edge: self.edge,
            armed: true,
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.armed || std::thread::panicking() {
            return;
        }
        let Some(b) = self.b.upgrade() else { return };
        let Ok(mut b) = b.try_borrow_mut() else {
            return;
        };
        if b.error.is_some() {
            return;
        }
        let at = self.at;
        let what = format!(
            "a stream of {} (made at {}:{}:{}) is never consumed",
            self.ty,
            at.file(),
            at.line(),
            at.column()
        );
        b.error = Some(match self.edge {
            Some(k) => format!(
                "edge {k} ({}) feeds no operator: its output, {what}; end it in a sink, an \
                 exchange or a keyed operator",
                b.edges[k].name
            ),
            None => format!("{what}: end it in a sink, an exchange or a keyed operator"),
        });
    }
}

pub(crate) struct Builder {
    pub(crate) info: WorkerInfo,
    /// Called once the job ended, to add the user's own counters.
    pub(crate) reporters: Vec<Reporter>,
    /// What is wrong with the graph (the first problem found while building).
    pub(crate) error: Option<String>,
    pub(crate) edges: Vec<EdgePlan>,
    pub(crate) sources: Vec<Box<dyn SourceDriver>>,
    /// State slots in build order: (what keeps the state, whether it can
    /// save it at a checkpoint).
    pub(crate) slots: Vec<SlotPlan>,
}

/// The dataflow graph of one worker, as user code builds it (a handle:
/// cheap to clone, every clone builds the same graph). The build closure
/// runs once on every worker, and once more before the workers start, to
/// plan the graph's edges and check it.
#[derive(Clone)]
pub struct Dataflow {
    b: Rc<RefCell<Builder>>,
}

impl Dataflow {
    pub(crate) fn new(info: WorkerInfo) -> Self {
        Dataflow {
            b: Rc::new(RefCell::new(Builder {
                info,
                reporters: Vec::new(),
                error: None,
                edges: Vec::new(),
                sources: Vec::new(),
                slots: Vec::new(),
            })),
        }
    }

    pub(crate) fn into_builder(self) -> Result<Builder, RuntimeError> {
        let b = Rc::try_unwrap(self.b).map_err(|_| {
            RuntimeError::Setup(
                "a stream handle outlived the graph's build closure (keep streams inside it)"
                    .into(),
            )
        })?;
        Ok(b.into_inner())
    }

    /// The mark of a new stream of `T` made at the caller, headed by the
    /// operator of `edge` if any.
    #[track_caller]
    fn pending<T>(&self, edge: Option<usize>) -> Pending {
        Pending {
            b: Rc::downgrade(&self.b),
            at: Location::caller(),
            ty: std::any::type_name::<T>(),
            edge,
            armed: true,
        }
    }

    /// Who this worker is (index, workers in the job, placement).
    pub fn worker(&self) -> WorkerInfo {
        self.b.borrow().info.clone()
    }

    /// This worker's index in the job (0-based).
    pub fn index(&self) -> usize {
        self.b.borrow().info.index
    }

    /// Workers in the job (all ranks).
    pub fn workers(&self) -> usize {
        self.b.borrow().info.workers
    }

    /// The job's key groups over its workers: how every exchange edge
    /// routes keys ([`crate::keygroups`]).
    pub fn key_groups(&self) -> crate::keygroups::KeyGroups {
        let b = self.b.borrow();
        crate::keygroups::KeyGroups::new(b.info.key_groups, b.info.workers)
            .expect("the job's key groups were checked before its workers started")
    }

    /// The job's hot-key handling (`JobConfig::rebalance`).
    pub fn rebalance(&self) -> crate::hotkeys::Rebalance {
        self.b.borrow().info.rebalance
    }

    /// Calls `f` once this worker's part of the job ended, to add counters
    /// of the user's own (e.g. kept in a `Rc<Cell<u64>>` a closure of the
    /// graph updates) to the worker's [`Stats`]. With live metrics
    /// ([`crate::live`]) `f` is also called during the job, at most every
    /// `live::PUBLISH_EVERY`, with fresh `Stats`: it should only add.
    ///
    /// ```
    /// use air_runtime::dataflow::{run_graph, VecSource};
    /// use air_runtime::JobConfig;
    /// use std::{cell::Cell, rc::Rc};
    ///
    /// let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
    /// let out = run_graph(&cfg, |df| {
    ///     let evens = Rc::new(Cell::new(0u64));
    ///     let e = evens.clone();
    ///     df.source(VecSource::new((0..10u64).collect()))
    ///         .inspect(move |x| if x % 2 == 0 { e.set(e.get() + 1) })
    ///         .for_each(|_| {});
    ///     df.report_with(move |stats| stats.add("evens", evens.get()));
    /// })
    /// .unwrap();
    /// assert_eq!(out.stats.get("evens"), 10); // 5 at each of the 2 workers
    /// ```
    pub fn report_with(&self, f: impl FnMut(&mut Stats) + 'static) {
        self.b.borrow_mut().reporters.push(Box::new(f));
    }

    /// A slot for the state of a component that keeps state between
    /// records (sources, operators and sinks get theirs from the runtime;
    /// an operator crate's tail that keeps state takes one), in build
    /// order: `what` names it in errors, `saves` says whether it can save
    /// its state at a checkpoint (a job with checkpoints whose graph has a
    /// slot that cannot is refused before any worker starts, naming
    /// `what`). On resume, [`super::state::StateSlot::take_restored`] gives
    /// what the slot saved at the checkpoint resumed from. `rescales` says
    /// whether the component can take its share of every old worker's
    /// state when the job resumes at another worker count
    /// ([`super::state::StateSlot::take_rescaled`]); a rescale of a graph
    /// with a slot that cannot is refused before any worker starts.
    pub fn state_slot(
        &self,
        what: impl Into<String>,
        saves: bool,
        rescales: bool,
    ) -> super::state::StateSlot {
        let mut b = self.b.borrow_mut();
        let index = b.slots.len() as u32;
        b.slots.push(SlotPlan {
            what: what.into(),
            saves,
            rescales: saves && rescales,
        });
        super::state::new_slot(index)
    }

    /// Marks the graph as one that cannot run, with `why` (operators call
    /// it for bad arguments): [`super::run_graph`] returns the first such
    /// error before any worker starts.
    ///
    /// ```
    /// use air_runtime::dataflow::{run_graph, VecSource};
    /// use air_runtime::JobConfig;
    ///
    /// let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
    /// let err = run_graph(&cfg, |df| {
    ///     df.fail("no input given");
    ///     df.source(VecSource::new(Vec::<u64>::new())).for_each(|_| {});
    /// })
    /// .unwrap_err();
    /// assert_eq!(err.to_string(), "job setup: the graph cannot run: no input given");
    /// ```
    pub fn fail(&self, why: impl Into<String>) {
        let mut b = self.b.borrow_mut();
        if b.error.is_none() {
            b.error = Some(why.into());
        }
    }

    /// A stream of `source`'s records (this worker's shard of them), with
    /// no event time: its watermark stays at 0 until it ends (see
    /// [`Stream::event_time`]).
    ///
    /// ```
    /// use air_runtime::dataflow::{run_graph, VecSource};
    /// use air_runtime::JobConfig;
    /// use std::sync::{Arc, Mutex};
    ///
    /// let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let out = seen.clone();
    /// run_graph(&cfg, move |df| {
    ///     // Each worker makes its own source: worker w reads w, w + 2, w + 4, …
    ///     let shard: Vec<u64> = (0..10).skip(df.index()).step_by(df.workers()).collect();
    ///     let out = out.clone();
    ///     df.source(VecSource::new(shard)).for_each(move |x| out.lock().unwrap().push(x));
    /// })
    /// .unwrap();
    /// let mut seen = seen.lock().unwrap().clone();
    /// seen.sort();
    /// assert_eq!(seen, (0..10).collect::<Vec<u64>>());
    /// ```
    #[track_caller]
    pub fn source<S: Source>(&self, source: S) -> Stream<SourceHead<S>, Identity> {
        Stream {
            pending: self.pending::<S::Item>(None),
            df: self.clone(),
            head: SourceHead { source },
            pipe: Identity,
        }
    }

    /// A new exchange edge named `name` (for reports and errors); returns
    /// its index. Edges are numbered in creation order: an operator fed by
    /// edge `k` may only send on edges created after `k`.
    pub fn new_edge(&self, name: impl Into<String>) -> usize {
        self.push_edge(name.into(), false, false)
    }

    /// [`Dataflow::new_edge`] for an edge that carries few records (e.g.
    /// result rows on their way to one writer): its rings get
    /// [`super::small_ring_bytes`] instead of the job's ring capacity.
    pub fn new_small_edge(&self, name: impl Into<String>) -> usize {
        self.push_edge(name.into(), true, false)
    }

    /// [`Dataflow::new_small_edge`] for an edge whose every record goes to
    /// one worker by design (rows gathered to one writer): its stage is
    /// left out of the job's load ratio, which measures how keys spread.
    pub fn new_gather_edge(&self, name: impl Into<String>) -> usize {
        self.push_edge(name.into(), true, true)
    }

    fn push_edge(&self, name: String, small: bool, gathers: bool) -> usize {
        let mut b = self.b.borrow_mut();
        b.edges.push(EdgePlan {
            name,
            ty: None,
            small,
            gathers,
            feeders: 0,
            consumer: None,
            partner: None,
            moves: None,
        });
        b.edges.len() - 1
    }

    /// Registers one more operator sending on `edge`; returns its feeder id
    /// (the edge's watermark is the minimum over its feeders').
    pub fn feed(&self, edge: usize) -> usize {
        let mut b = self.b.borrow_mut();
        let e = &mut b.edges[edge];
        e.feeders += 1;
        e.feeders - 1
    }

    /// An outbox for a new feeder of `edge`.
    pub fn outbox<T: ExchangeData>(&self, edge: usize) -> Outbox<T> {
        self.carries::<T>(edge);
        Outbox::new(edge, self.feed(edge))
    }

    /// Records that `edge` carries records of type `T` (its feeders and its
    /// consumer must agree; a graph that mixes types fails to build).
    pub fn carries<T: 'static>(&self, edge: usize) {
        let ty = std::any::type_name::<T>();
        let mut b = self.b.borrow_mut();
        let e = &mut b.edges[edge];
        match e.ty {
            None => e.ty = Some(ty),
            Some(t) if t == ty => {}
            Some(t) => {
                let msg = format!("edge {edge} ({}) carries both {t} and {ty}", e.name);
                drop(b);
                self.fail(msg);
            }
        }
    }

    /// A stream of what `op` emits, `op` being fed by `edge`.
    #[track_caller]
    pub fn consume<O: Operator>(&self, edge: usize, op: O) -> Stream<OpHead<O>, Identity> {
        self.carries::<O::In>(edge);
        Stream {
            pending: self.pending::<O::Out>(Some(edge)),
            df: self.clone(),
            head: OpHead { edge, op },
            pipe: Identity,
        }
    }

    /// A stream of what `op` emits, `op` being fed by `edge1` and `edge2`
    /// (two distinct edges).
    #[track_caller]
    pub fn consume2<O: Operator2>(
        &self,
        edge1: usize,
        edge2: usize,
        op: O,
    ) -> Stream<Op2Head<O>, Identity> {
        assert_ne!(edge1, edge2, "a two-input operator needs two edges");
        self.carries::<O::In1>(edge1);
        self.carries::<O::In2>(edge2);
        {
            let mut b = self.b.borrow_mut();
            b.edges[edge1].partner = Some(edge2);
            b.edges[edge2].partner = Some(edge1);
        }
        Stream {
            pending: self.pending::<O::Out>(Some(edge2)),
            df: self.clone(),
            head: Op2Head { edge1, edge2, op },
            pipe: Identity,
        }
    }

    /// Sets the operator (segment) that edge `edge` feeds at this worker.
    ///
    /// # Panics
    /// If the edge already has one (an edge feeds exactly one operator).
    pub fn set_consumer(&self, edge: usize, c: Box<dyn EdgeConsumer>) {
        let mut b = self.b.borrow_mut();
        let e = &mut b.edges[edge];
        assert!(
            e.consumer.is_none(),
            "edge {edge} ({}) feeds two operators",
            e.name
        );
        e.consumer = Some(c);
    }

    /// Whether the operator fed by `edge` (and `edge2`, a two-input
    /// operator's other edge) may have its key groups moved with its state
    /// in this job ([`super::moves`]): groups move, it saves and rescales,
    /// and its edges do not gather to one worker. Marks the edges so.
    fn may_move(&self, edge: usize, edge2: Option<usize>, saves: bool, rescales: bool) -> bool {
        let mut b = self.b.borrow_mut();
        let gathers = b.edges[edge].gathers || edge2.is_some_and(|e| b.edges[e].gathers);
        let moves = super::moves::enabled() && saves && rescales && !gathers;
        if moves {
            b.edges[edge].moves = Some(true);
            if let Some(e) = edge2 {
                b.edges[e].moves = Some(false);
            }
        }
        moves
    }
}

/// What a stream's records come from: a source, or an operator fed by an
/// edge. Installs its segment (itself and what follows it) in the graph.
pub trait Head: 'static {
    /// Records it produces.
    type Out;
    /// Puts the segment `self → next` into the graph.
    fn install<C: Continuation<Self::Out>>(self, df: &Dataflow, next: C);
}

/// What follows a head in its segment: the fused chain and the tail, one
/// concrete type (static dispatch per record).
pub trait Continuation<In>: 'static {
    /// One record.
    fn push(&mut self, x: In, cx: &mut Cx<'_, '_>);
    /// See [`Tail::watermark`].
    fn watermark(&mut self, wm: u64, cx: &mut Cx<'_, '_>);
    /// See [`Tail::tick`].
    fn tick(&mut self, cx: &mut Cx<'_, '_>);
    /// See [`Tail::end`].
    fn end(&mut self, final_wm: u64, cx: &mut Cx<'_, '_>);
    /// See [`Tail::barrier`].
    fn barrier(&mut self, id: u64, cx: &mut Cx<'_, '_>);
    /// See [`Tail::report`] (and [`Pipe::report`]).
    fn report(&mut self, stats: &mut Stats);
    /// The watermark of the chain's event-time stage, if any
    /// ([`Pipe::watermark`]).
    fn pipe_watermark(&self) -> Option<u64>;
    /// See [`Pipe::tick`].
    fn pipe_tick(&mut self);
    /// See [`Pipe::save`].
    fn pipe_save(&self, out: &mut Vec<u64>);
    /// See [`Pipe::restore`].
    ///
    /// # Errors
    /// See [`Pipe::restore`].
    fn pipe_restore(&mut self, state: &mut std::slice::Iter<'_, u64>) -> Result<(), String>;
    /// See [`Tail::barrier_safe`].
    fn barrier_safe(&self) -> bool;
    /// The tail's type (errors name it).
    fn tail_name(&self) -> &'static str;
}

/// A fused chain `P` ending in tail `T`.
pub struct Chain<P, T>(P, T);

impl<In, P: Pipe<In>, T: Tail<P::Out>> Continuation<In> for Chain<P, T> {
    #[inline(always)]
    fn push(&mut self, x: In, cx: &mut Cx<'_, '_>) {
        let t = &mut self.1;
        self.0.run(x, &mut |y| t.push(y, cx))
    }
    fn watermark(&mut self, wm: u64, cx: &mut Cx<'_, '_>) {
        self.1.watermark(wm, cx)
    }
    fn tick(&mut self, cx: &mut Cx<'_, '_>) {
        self.1.tick(cx)
    }
    fn end(&mut self, final_wm: u64, cx: &mut Cx<'_, '_>) {
        self.1.end(final_wm, cx)
    }
    fn barrier(&mut self, id: u64, cx: &mut Cx<'_, '_>) {
        self.1.barrier(id, cx)
    }
    fn report(&mut self, stats: &mut Stats) {
        self.0.report(stats);
        self.1.report(stats)
    }
    fn pipe_watermark(&self) -> Option<u64> {
        self.0.watermark()
    }
    fn pipe_tick(&mut self) {
        self.0.tick()
    }
    fn pipe_save(&self, out: &mut Vec<u64>) {
        self.0.save(out)
    }
    fn pipe_restore(&mut self, state: &mut std::slice::Iter<'_, u64>) -> Result<(), String> {
        self.0.restore(state)
    }
    fn barrier_safe(&self) -> bool {
        self.1.barrier_safe()
    }
    fn tail_name(&self) -> &'static str {
        std::any::type_name::<T>()
    }
}

/// The head of a source-driven segment.
pub struct SourceHead<S> {
    source: S,
}

impl<S: Source> Head for SourceHead<S> {
    type Out = S::Item;
    fn install<C: Continuation<S::Item>>(mut self, df: &Dataflow, mut next: C) {
        let what = format!("source {}", std::any::type_name::<S>());
        let mut slot = df.state_slot(
            what.clone(),
            self.source.save().is_some(),
            self.source.rescales(),
        );
        refuse_unsafe_tail(df, &next);
        if let Some(state) = slot.take_restored() {
            if let Err(e) = restore_segment(&state, &mut next, |b| self.source.restore(b)) {
                df.fail(format!(
                    "resuming the {}: {e}",
                    super::short_type_names(&what)
                ));
            }
        } else if let Some(r) = slot.take_rescaled() {
            if let Err(e) = rescale_segment(&r, |b, to| self.source.rescale(b, to)) {
                df.fail(format!(
                    "resuming the {} at another worker count: {e}",
                    super::short_type_names(&what)
                ));
            }
        }
        let seg = SourceSeg {
            me: df.index(),
            head: self,
            next,
            buf: Vec::new(),
            records: 0,
            barrier: super::barrier_base(),
            deferred: 0,
            deferred_last: 0,
            input_cuts: false,
            cut: None,
            slot,
        };
        df.b.borrow_mut().sources.push(Box::new(seg));
    }
}

/// A chain whose tail keeps state across a barrier (`Tail::barrier_safe`)
/// takes a slot that cannot save: a job with checkpoints refuses it,
/// naming the tail.
fn refuse_unsafe_tail<In, C: Continuation<In>>(df: &Dataflow, next: &C) {
    if !next.barrier_safe() {
        let _ = df.state_slot(
            format!("the end of a chain, {}", next.tail_name()),
            false,
            false,
        );
    }
}

/// Restores a segment's saved state ([`super::state::frame`]): its
/// chain's values into `next`, the body with `body`.
fn restore_segment<In, C: Continuation<In>>(
    state: &[u8],
    next: &mut C,
    body: impl FnOnce(&[u8]) -> Result<(), String>,
) -> Result<(), String> {
    let (values, rest) = super::state::unframe(state)?;
    let mut it = values.iter();
    next.pipe_restore(&mut it)?;
    if it.next().is_some() {
        return Err("the saved state of its chain is too long".into());
    }
    body(rest)
}

/// Gives a segment's body its share of every old worker's state on a
/// resume at another worker count. The chain's values (event-time stages'
/// newest times and watermarks) are not carried over: they are per input
/// share, and start again from the first records (a watermark never goes
/// back downstream, where each input's newest is kept).
fn rescale_segment(
    r: &super::state::Rescaled,
    body: impl FnOnce(&[&[u8]], super::state::Rescale) -> Result<(), String>,
) -> Result<(), String> {
    let mut bodies = Vec::new();
    for state in r.states()? {
        bodies.push(super::state::unframe(state)?.1);
    }
    body(&bodies, r.to.clone())
}

/// A segment's state: its chain's values, then `body`.
fn save_segment<In, C: Continuation<In>>(next: &C, body: Option<Vec<u8>>) -> Vec<u8> {
    let mut values = Vec::new();
    next.pipe_save(&mut values);
    super::state::frame(&values, &body.unwrap_or_default())
}

struct SourceSeg<S: Source, C> {
    me: usize,
    head: SourceHead<S>,
    next: C,
    buf: Vec<S::Item>,
    records: u64,
    /// The newest checkpoint barrier placed after its records. The next is
    /// always this + 1 (on the shared schedule: placed at the first tick
    /// it is due, [`super::barrier_due`], and the last checkpoint is not
    /// in flight), so every worker's sources place the same ids.
    barrier: u64,
    /// Barrier ids that came due while the last checkpoint was still in
    /// flight ([`super::state::in_flight`]; placed late, each once it
    /// is not), and the newest of them counted.
    deferred: u64,
    deferred_last: u64,
    /// Whether its input cuts its own barriers ([`super::input_cut`]): it
    /// then places a barrier only where its input stopped for one.
    input_cuts: bool,
    /// The barrier its input stopped at, with the input's position there:
    /// placed at the next tick the last checkpoint is not in flight.
    cut: Option<(u64, Vec<u8>)>,
    /// Its state's slot: the source's position and the chain's state.
    slot: super::state::StateSlot,
}

impl<S, C> SourceSeg<S, C>
where
    S: Source,
    C: Continuation<S::Item>,
{
    /// The segment's watermark: its event-time stage's, or 0 without one
    /// (windows then fire at the end).
    fn wm(&self) -> u64 {
        self.next.pipe_watermark().unwrap_or(0)
    }
}

impl<S, C> SourceDriver for SourceSeg<S, C>
where
    S: Source,
    C: Continuation<S::Item>,
{
    fn step(&mut self, cx: &mut Cx<'_, '_>) -> Progress {
        super::cut::before_poll(self.barrier);
        let poll = self.head.source.poll(&mut self.buf, super::batch_records());
        if let Some(cut) = super::cut::after_poll() {
            self.input_cuts = true;
            if cut.is_some() {
                self.cut = cut;
            }
        }
        let n = self.buf.len();
        self.records += n as u64;
        crate::timeline::add_events(self.head.source.events_read(n));
        let SourceSeg {
            me,
            head,
            next,
            buf,
            ..
        } = self;
        if std::mem::needs_drop::<S::Item>() {
            // Records that own memory (strings…) are moved out: a clone
            // would allocate it again. `buf` is left empty.
            for item in buf.drain(..) {
                next.push(item, cx);
            }
        } else {
            // Plain records are copied: `buf` keeps its length, so a source
            // that fills it in place need not re-initialize it.
            for item in buf.iter() {
                next.push(item.clone(), cx);
            }
        }
        if poll == SourcePoll::Done {
            if let Some(message) = head.source.take_error() {
                // The job fails once this worker drained what was read.
                super::defer_source_error(RuntimeError::Operator {
                    worker: *me,
                    message,
                });
            }
        }
        match poll {
            SourcePoll::Done => Progress::Done,
            SourcePoll::Idle if n == 0 => Progress::Idle,
            _ => Progress::Busy,
        }
    }

    fn next_due(&self) -> Option<std::time::Instant> {
        self.head.source.next_due()
    }

    fn tick(&mut self, cx: &mut Cx<'_, '_>) {
        self.next.pipe_tick();
        self.next.tick(cx);
        let wm = self.wm();
        self.next.watermark(wm, cx);
        if self.input_cuts {
            // Its input stopped at barrier `id`'s cut: every worker's share
            // of the input stops at the same place, so the barrier goes
            // exactly there (never deferred to another id: the input waits).
            if let Some((id, position)) = self.cut.take() {
                if id <= self.barrier {
                    return;
                }
                if super::state::in_flight(self.slot.index()) {
                    self.cut = Some((id, position));
                    return;
                }
                self.barrier = id;
                if super::state::enabled() {
                    self.slot.save(id, save_segment(&self.next, Some(position)));
                }
                self.next.barrier(id, cx);
            }
            return;
        }
        // Every id in turn, never skipping one: a checkpoint completes only
        // if every source of every worker placed its id, and workers that
        // skipped would skip different ids (each ticks, and sees its last
        // checkpoint in flight, at its own times).
        let Some(due) = super::barrier_due() else {
            return;
        };
        let id = self.barrier + 1;
        if due < id {
            return;
        }
        if super::state::in_flight(self.slot.index()) {
            // The last checkpoint is still being saved or written: `id`
            // waits (placed at a later tick, under the same id). Counted
            // once each: the ids that came due meanwhile.
            let counted = self.barrier.max(self.deferred_last);
            if due > counted {
                self.deferred += due - counted;
                self.deferred_last = due;
            }
            return;
        }
        self.barrier = id;
        if super::state::enabled() {
            self.slot
                .save(id, save_segment(&self.next, self.head.source.save()));
        }
        self.next.barrier(id, cx);
    }

    fn watermark(&self) -> u64 {
        self.wm()
    }

    fn finish(&mut self, stopped: bool, cx: &mut Cx<'_, '_>) {
        let wm = if stopped { self.wm() } else { u64::MAX };
        if !stopped && super::state::enabled() && super::state::ends_for_good() {
            // Read to its end: later checkpoints of this worker hold it so.
            self.slot
                .ended(save_segment(&self.next, self.head.source.save()));
        }
        self.next.watermark(wm, cx);
        self.next.end(wm, cx);
    }

    fn report(&mut self, stats: &mut Stats) {
        stats.add("source_records", self.records);
        if self.deferred > 0 {
            stats.add("checkpoint_barriers_deferred", self.deferred);
        }
        self.head.source.report(stats);
        self.next.report(stats);
    }
}

/// The head of an edge-driven segment: operator `op` fed by `edge`.
pub struct OpHead<O> {
    edge: usize,
    op: O,
}

impl<O: Operator> Head for OpHead<O> {
    type Out = O::Out;
    fn install<C: Continuation<O::Out>>(mut self, df: &Dataflow, mut next: C) {
        let me = df.index();
        let what = format!("operator {}", std::any::type_name::<O>());
        let (saves, rescales) = (self.op.save().is_some(), self.op.rescales());
        let mut slot = df.state_slot(what.clone(), saves, rescales);
        refuse_unsafe_tail(df, &next);
        if let Some(state) = slot.take_restored() {
            if let Err(e) = restore_segment(&state, &mut next, |b| self.op.restore(b)) {
                df.fail(format!(
                    "resuming the {}: {e}",
                    super::short_type_names(&what)
                ));
            }
        } else if let Some(r) = slot.take_rescaled() {
            if let Err(e) = rescale_segment(&r, |b, to| self.op.rescale(b, to)) {
                df.fail(format!(
                    "resuming the {} at another worker count: {e}",
                    super::short_type_names(&what)
                ));
            }
        }
        // (`Pass` keeps nothing: its edge need not stop at a move.)
        let keeps = std::any::TypeId::of::<O>() != std::any::TypeId::of::<Pass<O::In>>();
        let mover = df
            .may_move(self.edge, None, saves && keeps, rescales)
            .then(|| super::moves::Mover::new(self.edge, me, df.key_groups()));
        df.set_consumer(
            self.edge,
            Box::new(OpSeg {
                op: self.op,
                next,
                me,
                slot,
                mover,
            }),
        );
    }
}

struct OpSeg<O, C> {
    op: O,
    next: C,
    me: usize,
    /// Its state's slot: the operator's and the chain's state.
    slot: super::state::StateSlot,
    /// Its key groups' moves, if they may move.
    mover: Option<super::moves::Mover<super::moves::Kept>>,
}

impl<O: Operator, C: Continuation<O::Out>> OpSeg<O, C> {
    /// Every worker's state of a move arrived: the operator takes the keys
    /// it owns now, then what it kept goes on, in order.
    fn moved(&mut self, arrived: super::moves::Arrived<super::moves::Kept>, cx: &mut Cx<'_, '_>) {
        let states = arrived.states();
        if let Err(e) = self.op.rescale(&states, arrived.to.clone()) {
            cx.fail_with(RuntimeError::Setup(format!("moving key groups: {e}")));
            return;
        }
        drop(states);
        for k in arrived.kept {
            match k {
                super::moves::Kept::Data(from, bytes) => {
                    if let Err(e) = self.on_data(from, &bytes, false, cx) {
                        cx.fail_with(e);
                    }
                }
                super::moves::Kept::Watermark(wm) => self.on_watermark(wm, cx),
                super::moves::Kept::Barrier(id) => self.on_barrier(id, cx),
                super::moves::Kept::End(fin) => self.on_end(fin, cx),
            }
        }
    }
}

impl<O, C> EdgeConsumer for OpSeg<O, C>
where
    O: Operator,
    C: Continuation<O::Out>,
{
    fn on_data(
        &mut self,
        from: usize,
        bytes: &[u8],
        validate: bool,
        cx: &mut Cx<'_, '_>,
    ) -> Result<usize, RuntimeError> {
        let items = if validate {
            O::In::read_batch_validated(bytes)
        } else {
            O::In::read_batch(bytes)
        }
        .map_err(|reason| RuntimeError::BadBatch {
            from,
            to: self.me,
            reason,
        })?;
        if let Some(m) = self.mover.as_mut().filter(|m| m.moving()) {
            // Checked above as it arrived; replayed unchecked.
            let mut copy = rkyv::util::AlignedVec::<16>::with_capacity(bytes.len());
            copy.extend_from_slice(bytes);
            m.keep(super::moves::Kept::Data(from, copy));
            return Ok(0);
        }
        let OpSeg { op, next, .. } = self;
        op.on_batch(items, &mut |o| next.push(o, cx));
        Ok(items.len())
    }

    fn on_watermark(&mut self, wm: u64, cx: &mut Cx<'_, '_>) {
        if let Some(m) = self.mover.as_mut().filter(|m| m.moving()) {
            m.keep(super::moves::Kept::Watermark(wm));
            return;
        }
        let OpSeg { op, next, .. } = self;
        op.on_watermark(wm, &mut |o| next.push(o, cx));
        next.watermark(wm, cx);
    }

    fn on_end(&mut self, final_wm: u64, cx: &mut Cx<'_, '_>) {
        if let Some(m) = self.mover.as_mut().filter(|m| m.moving()) {
            // Applied once every worker's state arrived (its edge is read
            // on meanwhile: `awaits_state`).
            m.keep(super::moves::Kept::End(final_wm));
            return;
        }
        let OpSeg { op, next, .. } = self;
        op.on_end(final_wm, &mut |o| next.push(o, cx));
        if super::state::enabled() && super::state::ends_for_good() {
            self.slot.ended(save_segment(&self.next, self.op.save()));
        }
        let OpSeg { next, .. } = self;
        next.watermark(final_wm, cx);
        next.end(final_wm, cx);
    }

    fn on_barrier(&mut self, id: u64, cx: &mut Cx<'_, '_>) {
        if let Some(m) = self.mover.as_mut().filter(|m| m.moving()) {
            m.keep(super::moves::Kept::Barrier(id));
            return;
        }
        if super::state::enabled() {
            self.slot.save(id, save_segment(&self.next, self.op.save()));
        }
        self.next.barrier(id, cx);
        if let Some(m) = self.mover.as_mut() {
            let op = &self.op;
            if let super::moves::AtBarrier::Moved(a) = m.at_barrier(id, || op.save()) {
                self.moved(a, cx);
            }
        }
    }

    fn awaits_state(&self) -> bool {
        self.mover.as_ref().is_some_and(|m| m.moving())
    }

    fn on_state(&mut self, from: usize, bytes: &[u8], cx: &mut Cx<'_, '_>) {
        let Some(m) = self.mover.as_mut() else {
            cx.fail_with(RuntimeError::Setup(
                "keyed state arrived for an operator whose key groups do not move".into(),
            ));
            return;
        };
        match m.add(from, bytes) {
            Ok(None) => {}
            Ok(Some(arrived)) => self.moved(arrived, cx),
            Err(e) => cx.fail_with(RuntimeError::Setup(format!("moving key groups: {e}"))),
        }
    }

    fn tick(&mut self, cx: &mut Cx<'_, '_>) {
        self.next.tick(cx);
    }

    fn report(&mut self, stats: &mut Stats) {
        self.op.report(stats);
        self.next.report(stats);
    }
}

/// The head of a segment fed by two edges: operator `op`.
pub struct Op2Head<O> {
    edge1: usize,
    edge2: usize,
    op: O,
}

impl<O: Operator2> Head for Op2Head<O> {
    type Out = O::Out;
    fn install<C: Continuation<O::Out>>(mut self, df: &Dataflow, mut next: C) {
        let what = format!("two-input operator {}", std::any::type_name::<O>());
        let (saves, rescales) = (self.op.save().is_some(), self.op.rescales());
        let mut slot = df.state_slot(what.clone(), saves, rescales);
        refuse_unsafe_tail(df, &next);
        let mut wm = [0, 0];
        let mut fired = 0;
        if let Some(state) = slot.take_restored() {
            let restored = restore_segment(&state, &mut next, |b| {
                let ([w0, w1, f], body) = unframe_two_inputs(b)?;
                (wm, fired) = ([w0, w1], f);
                self.op.restore(body)
            });
            if let Err(e) = restored {
                df.fail(format!(
                    "resuming the {}: {e}",
                    super::short_type_names(&what)
                ));
            }
        } else if let Some(r) = slot.take_rescaled() {
            // Both inputs' watermarks and the one fired to are the smallest
            // any old worker saved (they agree at a barrier, each having
            // seen every input's watermarks up to it): never ahead of what
            // a new worker's inputs will say.
            let rescaled = rescale_segment(&r, |bodies, to| {
                let mut ops = Vec::with_capacity(bodies.len());
                let mut low = None::<[u64; 3]>;
                for b in bodies {
                    let (v, body) = unframe_two_inputs(b)?;
                    low = Some(low.map_or(v, |m| [m[0].min(v[0]), m[1].min(v[1]), m[2].min(v[2])]));
                    ops.push(body);
                }
                if let Some([w0, w1, f]) = low {
                    (wm, fired) = ([w0, w1], f);
                }
                self.op.rescale(&ops, to)
            });
            if let Err(e) = rescaled {
                df.fail(format!(
                    "resuming the {} at another worker count: {e}",
                    super::short_type_names(&what)
                ));
            }
        }
        let mover = df
            .may_move(self.edge1, Some(self.edge2), saves, rescales)
            .then(|| super::moves::Mover::new(self.edge1, df.index(), df.key_groups()));
        let shared = Rc::new(RefCell::new(Op2Seg {
            op: self.op,
            next,
            wm,
            fired,
            align: TwoInputs::new(),
            me: df.index(),
            slot,
            mover,
        }));
        df.set_consumer(
            self.edge1,
            Box::new(Op2Side {
                side: 0,
                seg: shared.clone(),
            }),
        );
        df.set_consumer(
            self.edge2,
            Box::new(Op2Side {
                side: 1,
                seg: shared,
            }),
        );
    }
}

/// A two-input segment's body as [`Op2Seg::save`] framed it: `[wm₀, wm₁,
/// fired]` and the operator's state.
fn unframe_two_inputs(body: &[u8]) -> Result<([u64; 3], &[u8]), String> {
    let (values, op) = super::state::unframe(body)?;
    let [w0, w1, f] = values[..] else {
        return Err(format!(
            "two-input state with {} values, not 3",
            values.len()
        ));
    };
    Ok(([w0, w1, f], op))
}

/// The state of a two-input segment, shared by its two edges' consumers
/// (one thread; a consumer of edge `k` only sends on edges `> k`, and both
/// inputs come before the output edge, so a send never re-enters it).
struct Op2Seg<O, C> {
    op: O,
    next: C,
    wm: [u64; 2],
    fired: u64,
    /// Barrier alignment of the two inputs (and their ends); kept
    /// deliveries are (sender, batch) for batches.
    align: TwoInputs<(usize, rkyv::util::AlignedVec<16>)>,
    me: usize,
    /// Its state's slot: both inputs' watermarks, the watermark fired
    /// to, the operator's and the chain's state.
    slot: super::state::StateSlot,
    /// Its key groups' moves, if they may move (its state travels on the
    /// first input; what either input delivers meanwhile is kept).
    mover: Option<super::moves::Mover<Kept2>>,
}

/// A delivery of a two-input operator's input `.0`, kept while its key
/// groups move.
type Kept2 = (usize, Early<(usize, rkyv::util::AlignedVec<16>)>);

impl<O: Operator2, C: Continuation<O::Out>> Op2Seg<O, C> {
    /// The segment's state: `[wm₀, wm₁, fired]` framed around the
    /// operator's, inside the chain's ([`save_segment`]).
    fn save(&self) -> Vec<u8> {
        let body = self
            .op
            .save()
            .map(|op| super::state::frame(&[self.wm[0], self.wm[1], self.fired], &op));
        save_segment(&self.next, body)
    }

    fn batch(
        &mut self,
        side: usize,
        from: usize,
        bytes: &[u8],
        validate: bool,
        cx: &mut Cx<'_, '_>,
    ) -> Result<usize, RuntimeError> {
        let Op2Seg { op, next, me, .. } = self;
        let bad = |reason| RuntimeError::BadBatch {
            from,
            to: *me,
            reason,
        };
        if side == 0 {
            let items = if validate {
                O::In1::read_batch_validated(bytes)
            } else {
                O::In1::read_batch(bytes)
            }
            .map_err(bad)?;
            op.on_batch1(items, &mut |o| next.push(o, cx));
            Ok(items.len())
        } else {
            let items = if validate {
                O::In2::read_batch_validated(bytes)
            } else {
                O::In2::read_batch(bytes)
            }
            .map_err(bad)?;
            op.on_batch2(items, &mut |o| next.push(o, cx));
            Ok(items.len())
        }
    }

    fn watermark(&mut self, side: usize, wm: u64, cx: &mut Cx<'_, '_>) {
        self.wm[side] = self.wm[side].max(wm);
        let min = self.wm[0].min(self.wm[1]);
        if min > self.fired {
            self.fired = min;
            let Op2Seg { op, next, .. } = self;
            op.on_watermark(min, &mut |o| next.push(o, cx));
            next.watermark(min, cx);
        }
    }

    fn end(&mut self, side: usize, final_wm: u64, cx: &mut Cx<'_, '_>) {
        self.align.ended[side] = Some(final_wm);
        self.wm[side] = self.wm[side].max(final_wm);
        // The other input may wait at a barrier this one never sent.
        self.pass(cx);
        if let Some(m) = self.mover.as_mut().filter(|m| m.moving()) {
            // Passing it started a move: the rest of this end (firing to
            // the final watermark) waits for it, applied again after.
            m.keep((side, Early::End(final_wm)));
            return;
        }
        if let [Some(a), Some(b)] = self.align.ended {
            if !self.align.close() {
                return; // ended by the replay of the other input's end
            }
            let fin = a.min(b);
            let Op2Seg { op, next, .. } = self;
            op.on_end(fin, &mut |o| next.push(o, cx));
            if super::state::enabled() && super::state::ends_for_good() {
                self.slot.ended(self.save());
            }
            let Op2Seg { next, .. } = self;
            next.watermark(fin, cx);
            next.end(fin, cx);
        } else {
            self.watermark(side, final_wm, cx);
        }
    }

    /// Whether its key groups are moving: what it is given waits.
    fn moving(&self) -> bool {
        self.mover.as_ref().is_some_and(|m| m.moving())
    }

    /// A delivery of input `side`: kept while groups move or while the
    /// input is ahead at a barrier, else applied.
    fn deliver(
        &mut self,
        side: usize,
        e: Early<(usize, rkyv::util::AlignedVec<16>)>,
        cx: &mut Cx<'_, '_>,
    ) {
        if let Some(m) = self.mover.as_mut().filter(|m| m.moving()) {
            m.keep((side, e));
            return;
        }
        if self.align.ahead(side) {
            self.align.keep(side, e);
            return;
        }
        match e {
            Early::Batch((from, bytes)) => {
                if let Err(e) = self.batch(side, from, &bytes, false, cx) {
                    cx.fail_with(e);
                }
            }
            Early::Watermark(wm) => self.watermark(side, wm, cx),
            Early::Barrier(id) => {
                self.align.barrier(side, id);
                self.pass(cx);
            }
            Early::End(fin) => self.end(side, fin, cx),
        }
    }

    /// Every worker's state of a move arrived: the operator takes the keys
    /// it owns now; then what the inputs delivered before (kept at a
    /// barrier) and during the move goes on, in order.
    fn moved(&mut self, arrived: super::moves::Arrived<Kept2>, cx: &mut Cx<'_, '_>) {
        let states = arrived.states();
        if let Err(e) = self.op.rescale(&states, arrived.to.clone()) {
            cx.fail_with(RuntimeError::Setup(format!("moving key groups: {e}")));
            return;
        }
        drop(states);
        self.pass(cx);
        for (side, e) in arrived.kept {
            self.deliver(side, e, cx);
        }
    }

    /// Passes on the newest barrier both inputs delivered, and applies what
    /// the input that was ahead delivered meanwhile, until it is ahead
    /// again (or its key groups start moving).
    fn pass(&mut self, cx: &mut Cx<'_, '_>) {
        loop {
            if self.moving() {
                return;
            }
            if let Some(b) = self.align.pass_barrier() {
                // Everything before barrier `b` on both inputs is in, none
                // after: the state of checkpoint `b`.
                if super::state::enabled() {
                    self.slot.save(b, self.save());
                }
                self.next.barrier(b, cx);
                if let Some(m) = self.mover.as_mut() {
                    let op = &self.op;
                    match m.at_barrier(b, || op.save()) {
                        super::moves::AtBarrier::Stays => {}
                        super::moves::AtBarrier::Moving => return,
                        super::moves::AtBarrier::Moved(a) => {
                            // (`moved` passes on and applies what waits.)
                            return self.moved(a, cx);
                        }
                    }
                }
            }
            let Some((w, e)) = self.align.next_ready() else {
                return;
            };
            match e {
                Early::Batch((from, bytes)) => {
                    if let Err(e) = self.batch(w, from, &bytes, false, cx) {
                        cx.fail_with(e);
                    }
                }
                Early::Watermark(wm) => self.watermark(w, wm, cx),
                Early::Barrier(id) => self.align.barrier(w, id),
                Early::End(fin) => self.end(w, fin, cx),
            }
        }
    }
}

struct Op2Side<O, C> {
    side: usize,
    seg: Rc<RefCell<Op2Seg<O, C>>>,
}

impl<O, C> EdgeConsumer for Op2Side<O, C>
where
    O: Operator2,
    C: Continuation<O::Out>,
{
    fn on_data(
        &mut self,
        from: usize,
        bytes: &[u8],
        validate: bool,
        cx: &mut Cx<'_, '_>,
    ) -> Result<usize, RuntimeError> {
        let mut g = self.seg.borrow_mut();
        if g.align.ahead(self.side) || g.moving() {
            let mut copy = rkyv::util::AlignedVec::<16>::with_capacity(bytes.len());
            copy.extend_from_slice(bytes);
            if validate {
                // Checked now, as it arrives (replayed unchecked).
                let n = if self.side == 0 {
                    O::In1::read_batch_validated(&copy).map(|i| i.len())
                } else {
                    O::In2::read_batch_validated(&copy).map(|i| i.len())
                };
                n.map_err(|reason| RuntimeError::BadBatch {
                    from,
                    to: g.me,
                    reason,
                })?;
            }
            g.deliver(self.side, Early::Batch((from, copy)), cx);
            return Ok(0);
        }
        g.batch(self.side, from, bytes, validate, cx)
    }

    fn on_watermark(&mut self, wm: u64, cx: &mut Cx<'_, '_>) {
        self.seg
            .borrow_mut()
            .deliver(self.side, Early::Watermark(wm), cx);
    }

    fn on_end(&mut self, final_wm: u64, cx: &mut Cx<'_, '_>) {
        // While groups move the second input's end is kept (the first's
        // waits until every state arrived: `awaits_state`).
        self.seg
            .borrow_mut()
            .deliver(self.side, Early::End(final_wm), cx);
    }

    fn on_barrier(&mut self, id: u64, cx: &mut Cx<'_, '_>) {
        self.seg
            .borrow_mut()
            .deliver(self.side, Early::Barrier(id), cx);
    }

    fn awaits_state(&self) -> bool {
        // The first input carries the states: read on after its end
        // while the other input may still pass barriers that move groups.
        let g = self.seg.borrow();
        self.side == 0 && g.mover.is_some() && (g.moving() || !g.align.closed())
    }

    fn on_state(&mut self, from: usize, bytes: &[u8], cx: &mut Cx<'_, '_>) {
        let mut g = self.seg.borrow_mut();
        let added = match g.mover.as_mut() {
            Some(m) if self.side == 0 => m.add(from, bytes),
            _ => Err("keyed state arrived for an operator whose key groups do not move".into()),
        };
        match added {
            Ok(None) => {}
            Ok(Some(arrived)) => g.moved(arrived, cx),
            Err(e) => cx.fail_with(RuntimeError::Setup(format!("moving key groups: {e}"))),
        }
    }

    fn tick(&mut self, cx: &mut Cx<'_, '_>) {
        // Both sides tick: the second does nothing new.
        self.seg.borrow_mut().next.tick(cx);
    }

    fn report(&mut self, stats: &mut Stats) {
        if self.side == 0 {
            let mut g = self.seg.borrow_mut();
            g.op.report(stats);
            g.next.report(stats);
        }
    }
}

/// The operator of a plain exchange: hands every record on, owned.
pub struct Pass<T>(PhantomData<fn() -> T>);

impl<T> Default for Pass<T> {
    fn default() -> Self {
        Pass(PhantomData)
    }
}

impl<T: Record> Operator for Pass<T> {
    type In = T;
    type Out = T;
    #[inline]
    fn on_batch<E: FnMut(T)>(&mut self, items: &[T::Item], emit: &mut E) {
        for a in items {
            emit(T::from_archived(a));
        }
    }
    fn on_watermark<E: FnMut(T)>(&mut self, _wm: u64, _emit: &mut E) {}
    /// Keeps nothing between batches.
    fn save(&self) -> Option<Vec<u8>> {
        Some(Vec::new())
    }
    fn restore(&mut self, _state: &[u8]) -> Result<(), String> {
        Ok(())
    }
    fn rescales(&self) -> bool {
        true
    }
    fn rescale(&mut self, _states: &[&[u8]], _to: super::state::Rescale) -> Result<(), String> {
        Ok(())
    }
}

/// A stream of records at one worker: a head (source or operator) and the
/// stateless operators fused after it. Consumed by the operator that ends
/// the segment (`key_by` + a keyed operator, `broadcast`, `collect`,
/// `sink`).
pub struct Stream<H, P> {
    // First: dropped first, so an unconsumed stream is named before the
    // inputs its head holds (a union's).
    pending: Pending,
    df: Dataflow,
    head: H,
    pipe: P,
}

/// A stream's record type.
pub type Out<H, P> = <P as Pipe<<H as Head>::Out>>::Out;

impl<S: Source, P: Pipe<S::Item>> Stream<SourceHead<S>, P> {
    /// Event time from the data (Flink's timestamps and watermarks), at
    /// this point of the source's chain: `time` gives a record's event time
    /// (ms); the watermark is the newest event time seen minus
    /// `max_delay_ms` (bounded out-of-orderness). A record older than the
    /// watermark goes on when the chain ends in a windowed operator
    /// (window, windowed join, session), which judges it as Flink does: late
    /// only if every window it belongs to has already closed (end +
    /// allowed lateness <= the watermark at the record;
    /// [`Pipe::pass_late`]). Where the chain ends in anything else (a
    /// keyed process function, an interval join, a sink), or the window
    /// asked for `drop_behind_watermark`, such a record is late here:
    /// dropped and counted (`late_records`), never silently — the run's
    /// summary names this stage, its first late record, and the disorder
    /// seen ([`super::LateLog`]). Records dropped before this point (by a
    /// `filter`) do not move the watermark. Without it a source's
    /// watermark stays at 0 until it ends.
    ///
    /// ```
    /// use air_runtime::dataflow::{run_graph, VecSource};
    /// use air_runtime::JobConfig;
    /// use std::sync::{Arc, Mutex};
    ///
    /// let cfg = JobConfig { workers: 1, pin: false, ..JobConfig::default() };
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let kept = seen.clone();
    /// let out = run_graph(&cfg, move |df| {
    ///     let kept = kept.clone();
    ///     // Watermark = newest − 100 ms: after 300 it is 200, so 150 is late.
    ///     df.source(VecSource::new(vec![100u64, 300, 150, 250]))
    ///         .event_time(|t| *t, 100)
    ///         .for_each(move |t| kept.lock().unwrap().push(t));
    /// })
    /// .unwrap();
    /// assert_eq!(*seen.lock().unwrap(), [100, 300, 250]);
    /// assert_eq!(out.stats.get("late_records"), 1);
    /// ```
    #[track_caller]
    pub fn event_time<F: Fn(&P::Out) -> u64 + 'static>(
        self,
        time: F,
        max_delay_ms: u64,
    ) -> Stream<SourceHead<S>, EventTime<P, F>> {
        Stream {
            pending: self.pending.renew::<P::Out>(),
            df: self.df,
            head: self.head,
            pipe: EventTime {
                inner: self.pipe,
                time,
                delay: max_delay_ms,
                newest: 0,
                wm: 0,
                late: None,
                disorder: 0,
                at: std::panic::Location::caller(),
                idle_ms: None,
                seen: false,
                last_seen: std::time::Instant::now(),
                gate: None,
            },
        }
    }
}

impl<S: Source, P: Pipe<S::Item>> Stream<SourceHead<S>, P> {
    /// Ingestion time (Flink's `TimeCharacteristic.IngestionTime`): time
    /// is the wall clock when a record is read, not a field of the data.
    /// Each record becomes `(t, record)`, `t` ms since the Unix epoch when
    /// it reached this point of the source's chain, and the source's
    /// watermark follows the wall clock (at every flush tick, records or
    /// not), so event-time windows over `t` are processing-time windows:
    /// they close as real time passes them, and each record is in exactly
    /// one tumbling window (its stamp travels with it through exchanges).
    /// No record is late. At the end of a finite input the watermark jumps
    /// to the end as with [`Stream::event_time`]. The clock is read once
    /// per [`INGESTION_CLOCK_EVERY`](super::INGESTION_CLOCK_EVERY) records
    /// and at every tick ([`IngestionTime`]).
    ///
    /// Windows on stamps are deterministic only in their totals: which
    /// window a record falls in depends on when it was read.
    ///
    /// ```
    /// use air_runtime::dataflow::{run_graph, VecSource};
    /// use air_runtime::JobConfig;
    /// use std::sync::{Arc, Mutex};
    /// use std::time::{SystemTime, UNIX_EPOCH};
    ///
    /// let cfg = JobConfig { workers: 1, pin: false, ..JobConfig::default() };
    /// let before = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let out = seen.clone();
    /// run_graph(&cfg, move |df| {
    ///     let out = out.clone();
    ///     df.source(VecSource::new(vec!['a', 'b', 'c']))
    ///         .ingestion_time()
    ///         .for_each(move |(t, c)| out.lock().unwrap().push((t, c)));
    /// })
    /// .unwrap();
    /// let after = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
    /// let seen = seen.lock().unwrap();
    /// assert_eq!(seen.iter().map(|r| r.1).collect::<String>(), "abc");
    /// // Stamped with the wall clock while the job ran, in order.
    /// assert!(seen.iter().all(|&(t, _)| (before..=after).contains(&t)));
    /// assert!(seen.windows(2).all(|w| w[0].0 <= w[1].0));
    /// ```
    #[track_caller]
    pub fn ingestion_time(self) -> Stream<SourceHead<S>, IngestionTime<P>> {
        Stream {
            pending: self.pending.renew::<(u64, P::Out)>(),
            df: self.df,
            head: self.head,
            pipe: IngestionTime::new(self.pipe),
        }
    }
}

impl<S: Source, P, F> Stream<SourceHead<S>, EventTime<P, F>> {
    /// Idleness (Flink's `withIdleness`): once no record has reached the
    /// event-time stage for `idle_ms` of wall-clock time, the source stops
    /// holding windows back — its watermark follows the wall clock (now −
    /// `idle_ms`), so the windows of a quiet live input close. Assumes event
    /// times follow the wall clock (live inputs); a record older than the
    /// advanced watermark is late. `None` (the default): never idle (a
    /// command line's optional `--idle-ms` passes straight through).
    ///
    /// A finite input such as this one never idles (its watermark jumps to
    /// the end when it ends); the setting matters for live sources that go
    /// quiet ([`SourcePoll::Idle`]).
    ///
    /// ```
    /// use air_runtime::dataflow::{run_graph, VecSource};
    /// use air_runtime::JobConfig;
    /// use std::sync::{Arc, Mutex};
    ///
    /// let cfg = JobConfig { workers: 1, pin: false, ..JobConfig::default() };
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let out = seen.clone();
    /// run_graph(&cfg, move |df| {
    ///     let out = out.clone();
    ///     df.source(VecSource::new(vec![10u64, 20, 30]))
    ///         .event_time(|t| *t, 0)
    ///         .idle_after_ms(60_000) // quiet for a minute: stop holding windows back
    ///         .for_each(move |t| out.lock().unwrap().push(t));
    /// })
    /// .unwrap();
    /// assert_eq!(*seen.lock().unwrap(), [10, 20, 30]);
    /// ```
    pub fn idle_after_ms(mut self, idle_ms: impl Into<Option<u64>>) -> Self {
        self.pipe.idle_ms = idle_ms.into();
        self
    }
}

impl<H: Head, P: Pipe<H::Out>> Stream<H, P> {
    /// The graph this stream belongs to.
    pub fn dataflow(&self) -> &Dataflow {
        &self.df
    }

    /// The fused chain of stateless operators after the head (for operator
    /// crates, e.g. to call [`Pipe::pass_late`]).
    pub fn pipe_mut(&mut self) -> &mut P {
        &mut self.pipe
    }

    /// Applies `f` to every record (fused: no channel, no dynamic call).
    ///
    /// ```
    /// use air_runtime::dataflow::{run_graph, VecSource};
    /// use air_runtime::JobConfig;
    /// use std::sync::{Arc, Mutex};
    ///
    /// let cfg = JobConfig { workers: 1, pin: false, ..JobConfig::default() };
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let out = seen.clone();
    /// run_graph(&cfg, move |df| {
    ///     let out = out.clone();
    ///     df.source(VecSource::new(vec![1u64, 2, 3]))
    ///         .map(|x| (x, x * x))
    ///         .for_each(move |r| out.lock().unwrap().push(r));
    /// })
    /// .unwrap();
    /// assert_eq!(*seen.lock().unwrap(), [(1, 1), (2, 4), (3, 9)]);
    /// ```
    #[track_caller]
    pub fn map<O: 'static, F: FnMut(P::Out) -> O + 'static>(self, f: F) -> Stream<H, Map<P, F, O>> {
        Stream {
            pending: self.pending.renew::<O>(),
            df: self.df,
            head: self.head,
            pipe: Map(self.pipe, f, PhantomData),
        }
    }

    /// Keeps the records for which `f` holds (fused).
    ///
    /// ```
    /// use air_runtime::dataflow::{run_graph, VecSource};
    /// use air_runtime::JobConfig;
    /// use std::sync::{Arc, Mutex};
    ///
    /// let cfg = JobConfig { workers: 1, pin: false, ..JobConfig::default() };
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let out = seen.clone();
    /// run_graph(&cfg, move |df| {
    ///     let out = out.clone();
    ///     df.source(VecSource::new((1..=10u64).collect()))
    ///         .filter(|x| x % 3 == 0)
    ///         .for_each(move |x| out.lock().unwrap().push(x));
    /// })
    /// .unwrap();
    /// assert_eq!(*seen.lock().unwrap(), [3, 6, 9]);
    /// ```
    #[track_caller]
    pub fn filter<F: FnMut(&P::Out) -> bool + 'static>(self, f: F) -> Stream<H, Filter<P, F>> {
        Stream {
            pending: self.pending.renew::<P::Out>(),
            df: self.df,
            head: self.head,
            pipe: Filter(self.pipe, f),
        }
    }

    /// Replaces every record by zero or more (an `Option`, a `Vec`, any
    /// iterator; fused).
    ///
    /// ```
    /// use air_runtime::dataflow::{run_graph, VecSource};
    /// use air_runtime::JobConfig;
    /// use std::sync::{Arc, Mutex};
    ///
    /// let cfg = JobConfig { workers: 1, pin: false, ..JobConfig::default() };
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let out = seen.clone();
    /// run_graph(&cfg, move |df| {
    ///     let out = out.clone();
    ///     df.source(VecSource::new(vec!["1 2", "x", "3"]))
    ///         .flat_map(|line| line.split(' '))        // an iterator: 0 or more
    ///         .flat_map(|word| word.parse::<u64>().ok()) // an Option: 0 or 1
    ///         .for_each(move |x| out.lock().unwrap().push(x));
    /// })
    /// .unwrap();
    /// assert_eq!(*seen.lock().unwrap(), [1, 2, 3]);
    /// ```
    #[track_caller]
    pub fn flat_map<I: IntoIterator + 'static, F: FnMut(P::Out) -> I + 'static>(
        self,
        f: F,
    ) -> Stream<H, FlatMap<P, F, I>> {
        Stream {
            pending: self.pending.renew::<I::Item>(),
            df: self.df,
            head: self.head,
            pipe: FlatMap(self.pipe, f, PhantomData),
        }
    }

    /// Calls `f` on every record by reference and passes it on (fused).
    ///
    /// ```
    /// use air_runtime::dataflow::{run_graph, VecSource};
    /// use air_runtime::JobConfig;
    /// use std::sync::{Arc, Mutex};
    ///
    /// let cfg = JobConfig { workers: 1, pin: false, ..JobConfig::default() };
    /// let (peeked, kept) = (Arc::new(Mutex::new(Vec::new())), Arc::new(Mutex::new(Vec::new())));
    /// let (p, k) = (peeked.clone(), kept.clone());
    /// run_graph(&cfg, move |df| {
    ///     let (p, k) = (p.clone(), k.clone());
    ///     df.source(VecSource::new(vec![3u64, 1, 2]))
    ///         .inspect(move |x| p.lock().unwrap().push(*x)) // sees what the filter drops
    ///         .filter(|x| *x > 1)
    ///         .for_each(move |x| k.lock().unwrap().push(x));
    /// })
    /// .unwrap();
    /// assert_eq!(*peeked.lock().unwrap(), [3, 1, 2]);
    /// assert_eq!(*kept.lock().unwrap(), [3, 2]);
    /// ```
    #[track_caller]
    pub fn inspect<F: FnMut(&P::Out) + 'static>(self, f: F) -> Stream<H, Inspect<P, F>> {
        Stream {
            pending: self.pending.renew::<P::Out>(),
            df: self.df,
            head: self.head,
            pipe: Inspect(self.pipe, f),
        }
    }

    /// Partitions by `key`: the records of one key meet at one worker, its
    /// owner (its key group's owner, from `key_hash(key)`, a stable hash every
    /// rank agrees on; [`crate::keygroups`]).
    /// A keyed operator follows: a window (`air-operators`'
    /// `KeyedWindowExt::window`), a join, `top_n` (keyed by window), or a
    /// plain [`KeyedStream::exchange`].
    ///
    /// ```
    /// use air_runtime::dataflow::{run_graph, VecSource};
    /// use air_runtime::JobConfig;
    /// use std::sync::{Arc, Mutex};
    ///
    /// let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let out = seen.clone();
    /// run_graph(&cfg, move |df| {
    ///     let (me, out) = (df.index(), out.clone());
    ///     df.source(VecSource::new((0..20u64).collect())) // both workers read 0..20
    ///         .key_by(|x| x % 4)
    ///         .exchange()
    ///         .for_each(move |x| out.lock().unwrap().push((x % 4, me)));
    /// })
    /// .unwrap();
    /// let seen = seen.lock().unwrap().clone();
    /// assert_eq!(seen.len(), 40);
    /// for key in 0..4 {
    ///     // Every record of a key met at one worker, its owner.
    ///     let owner = seen.iter().find(|r| r.0 == key).unwrap().1;
    ///     assert!(seen.iter().filter(|r| r.0 == key).all(|r| r.1 == owner));
    /// }
    /// ```
    #[track_caller]
    pub fn key_by<K, KF>(self, key: KF) -> KeyedStream<H, P, KF>
    where
        K: Hash + Eq + Clone + 'static,
        KF: Fn(&P::Out) -> K + 'static,
    {
        let Stream {
            df,
            head,
            pipe,
            pending,
        } = self;
        let stream = Stream {
            pending: pending.renew::<P::Out>(),
            df,
            head,
            pipe,
        };
        KeyedStream { stream, key }
    }

    /// Ends this segment in `tail` (for operator crates: a pre-aggregating
    /// window, an exchange of its own records). Returns the graph.
    pub fn end_in<T: Tail<P::Out>>(self, tail: T) -> Dataflow {
        let Stream {
            df,
            head,
            pipe,
            pending,
        } = self;
        pending.disarm();
        head.install(&df, Chain(pipe, tail));
        df
    }

    /// Every record to every worker (an exchange edge; records `Clone`).
    ///
    /// ```
    /// use air_runtime::dataflow::{run_graph, VecSource};
    /// use air_runtime::JobConfig;
    /// use std::sync::{Arc, Mutex};
    ///
    /// let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let out = seen.clone();
    /// run_graph(&cfg, move |df| {
    ///     let (me, out) = (df.index(), out.clone());
    ///     df.source(VecSource::new(vec![me as u64 * 10])) // worker w has one record, 10·w
    ///         .broadcast()
    ///         .for_each(move |x| out.lock().unwrap().push((me, x)));
    /// })
    /// .unwrap();
    /// let mut seen = seen.lock().unwrap().clone();
    /// seen.sort();
    /// assert_eq!(seen, [(0, 0), (0, 10), (1, 0), (1, 10)]);
    /// ```
    #[track_caller]
    pub fn broadcast(self) -> Stream<OpHead<Pass<P::Out>>, Identity>
    where
        P::Out: Record,
    {
        let df = self.df.clone();
        let edge = df.new_edge("broadcast");
        let out = df.outbox::<P::Out>(edge);
        self.end_in(UnkeyedTail::<P::Out> {
            out,
            route: Route::All,
        });
        df.consume(edge, Pass::default())
    }

    /// Every record to worker 0 (an exchange edge): one writer for a sink
    /// (under MPI, rank 0's first worker), rows in the order they arrive.
    ///
    /// ```
    /// use air_runtime::dataflow::{run_graph, VecSource};
    /// use air_runtime::JobConfig;
    /// use std::sync::{Arc, Mutex};
    ///
    /// let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let out = seen.clone();
    /// run_graph(&cfg, move |df| {
    ///     let (me, out) = (df.index(), out.clone());
    ///     df.source(VecSource::new(vec![me as u64]))
    ///         .collect()
    ///         .for_each(move |x| out.lock().unwrap().push((me, x)));
    /// })
    /// .unwrap();
    /// let mut seen = seen.lock().unwrap().clone();
    /// seen.sort();
    /// assert_eq!(seen, [(0, 0), (0, 1)]); // both records, at worker 0
    /// ```
    #[track_caller]
    pub fn collect(self) -> Stream<OpHead<Pass<P::Out>>, Identity>
    where
        P::Out: Record,
    {
        let df = self.df.clone();
        let edge = df.new_gather_edge("collect");
        let out = df.outbox::<P::Out>(edge);
        self.end_in(UnkeyedTail::<P::Out> {
            out,
            route: Route::To(0),
        });
        df.consume(edge, Pass::default())
    }

    /// Writes every record to `sink` as it arrives (flushed at every flush
    /// interval, closed at the end). The job's `sink_rows` counts them.
    ///
    /// ```
    /// use air_runtime::dataflow::{run_graph, Sink, VecSource};
    /// use air_runtime::JobConfig;
    /// use std::sync::{Arc, Mutex};
    ///
    /// /// Sums the rows; adds the sum to `to` when closed.
    /// struct Total { sum: u64, to: Arc<Mutex<u64>> }
    /// impl Sink<u64> for Total {
    ///     fn write(&mut self, row: u64) -> Result<(), String> {
    ///         self.sum += row;
    ///         Ok(())
    ///     }
    ///     fn close(&mut self) -> Result<(), String> {
    ///         *self.to.lock().unwrap() += self.sum;
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
    /// let total = Arc::new(Mutex::new(0));
    /// let to = total.clone();
    /// let out = run_graph(&cfg, move |df| {
    ///     let shard: Vec<u64> = (1..=10).skip(df.index()).step_by(df.workers()).collect();
    ///     df.source(VecSource::new(shard)).sink(Total { sum: 0, to: to.clone() });
    /// })
    /// .unwrap();
    /// assert_eq!(*total.lock().unwrap(), 55);
    /// assert_eq!(out.stats.get("sink_rows"), 10);
    /// ```
    pub fn sink<S: Sink<P::Out>>(self, mut sink: S) -> Dataflow {
        let me = self.df.index();
        sink.bind(me);
        let what = format!("sink {}", std::any::type_name::<S>());
        let mut slot = self
            .df
            .state_slot(what.clone(), sink.checkpoints(), sink.rescales());
        if let Some(state) = slot.take_restored() {
            if let Err(e) = sink.restore(&state) {
                self.df.fail(format!(
                    "resuming the {}: {e}",
                    super::short_type_names(&what)
                ));
            }
        } else if let Some(r) = slot.take_rescaled() {
            if let Err(e) = r
                .states()
                .and_then(|states| sink.rescale(&states, r.to.clone()))
            {
                self.df.fail(format!(
                    "resuming the {} at another worker count: {e}",
                    super::short_type_names(&what)
                ));
            }
        }
        self.end_in(SinkTail {
            sink,
            me,
            rows: 0,
            dirty: false,
            barriers: 0,
            last_barrier: 0,
            slot,
        })
    }

    /// Calls `f` on every record (a closure sink).
    ///
    /// ```
    /// use air_runtime::dataflow::{run_graph, VecSource};
    /// use air_runtime::JobConfig;
    /// use std::sync::{Arc, Mutex};
    ///
    /// let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let out = seen.clone();
    /// run_graph(&cfg, move |df| {
    ///     let (me, out) = (df.index(), out.clone());
    ///     // Runs at every worker, on that worker's records.
    ///     df.source(VecSource::new(vec![me as u64 + 1]))
    ///         .for_each(move |x| out.lock().unwrap().push((me, x)));
    /// })
    /// .unwrap();
    /// let mut seen = seen.lock().unwrap().clone();
    /// seen.sort();
    /// assert_eq!(seen, [(0, 1), (1, 2)]);
    /// ```
    pub fn for_each<F: FnMut(P::Out) + 'static>(self, f: F) -> Dataflow {
        self.sink(f)
    }

    /// This stream's records and `other`'s (one record type) as one stream
    /// at this worker, with no channel between them: each record goes on
    /// from the segment that produced it, moved, not copied or archived.
    /// The union's watermark is the minimum of its two inputs' (a window
    /// after it fires only once both inputs read past the window's end); it
    /// ends once both ended, at the minimum of their final watermarks.
    /// Chain it for more inputs (`a.union(b).union(c)`). Records of one
    /// input keep their order; the two inputs interleave as they arrive.
    ///
    /// ```
    /// use air_runtime::dataflow::{run_graph, VecSource};
    /// use air_runtime::JobConfig;
    /// use std::sync::{Arc, Mutex};
    ///
    /// let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let out = seen.clone();
    /// run_graph(&cfg, move |df| {
    ///     let w = df.index() as u64;
    ///     let clicks = df.source(VecSource::new(vec![w, w + 2]));           // 0..4
    ///     let views = df.source(VecSource::new(vec![100 + w])).map(|v| v * 10); // 1000, 1010
    ///     let out = out.clone();
    ///     clicks
    ///         .union(views)
    ///         .collect()
    ///         .for_each(move |x| out.lock().unwrap().push(x));
    /// })
    /// .unwrap();
    /// let mut got = seen.lock().unwrap().clone();
    /// got.sort();
    /// assert_eq!(got, [0, 1, 2, 3, 1000, 1010]);
    /// ```
    #[track_caller]
    pub fn union<H2, P2>(
        mut self,
        mut other: Stream<H2, P2>,
    ) -> Stream<UnionHead<H, P, H2, P2>, Identity>
    where
        H2: Head,
        P2: Pipe<H2::Out, Out = P::Out>,
    {
        // The union answers for its inputs now.
        self.pending.settle();
        other.pending.settle();
        let df = self.df.clone();
        Stream {
            pending: df.pending::<P::Out>(None),
            df,
            head: UnionHead { a: self, b: other },
            pipe: Identity,
        }
    }

    /// Fan-out: two streams that both see every record of this one (cloned
    /// for the first, moved into the second), each continued by its own
    /// chain (two sinks, a sink and a window, …). Both must be consumed.
    /// Both get this stream's watermarks and its end. No channel: the
    /// branches run in the segment that produced the record, one dynamic
    /// call per record and branch. Tee a branch again for more.
    ///
    /// ```
    /// use air_runtime::dataflow::{run_graph, VecSource};
    /// use air_runtime::JobConfig;
    /// use std::sync::{Arc, Mutex};
    ///
    /// let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
    /// let (evens, all) = (Arc::new(Mutex::new(Vec::new())), Arc::new(Mutex::new(0u64)));
    /// let (e, a) = (evens.clone(), all.clone());
    /// run_graph(&cfg, move |df| {
    ///     let shard: Vec<u64> = (0..10).filter(|i| i % 2 == df.index() as u64).collect();
    ///     let (left, right) = df.source(VecSource::new(shard)).tee();
    ///     let (e, a) = (e.clone(), a.clone());
    ///     left.filter(|x| x % 2 == 0).for_each(move |x| e.lock().unwrap().push(x));
    ///     right.for_each(move |x| *a.lock().unwrap() += x);
    /// })
    /// .unwrap();
    /// let mut got = evens.lock().unwrap().clone();
    /// got.sort();
    /// assert_eq!(got, [0, 2, 4, 6, 8]);
    /// assert_eq!(*all.lock().unwrap(), 45);
    /// ```
    #[allow(clippy::type_complexity)]
    #[track_caller]
    pub fn tee(
        mut self,
    ) -> (
        Stream<TeeHead<P::Out>, Identity>,
        Stream<TeeHead<P::Out>, Identity>,
    )
    where
        P::Out: Clone,
    {
        // The branches answer for this stream now.
        self.pending.settle();
        let df = self.df.clone();
        let upstream = self;
        let shared = Rc::new(RefCell::new(TeeShared {
            install: Some(Box::new(move |tail: TeeTail<P::Out>| {
                upstream.end_in(tail);
            })),
            branches: [None, None],
        }));
        // Both branches are named after the caller (not this closure).
        let at = Location::caller();
        let branch = |side| Stream {
            pending: Pending {
                b: Rc::downgrade(&df.b),
                at,
                ty: std::any::type_name::<P::Out>(),
                edge: None,
                armed: true,
            },
            df: df.clone(),
            head: TeeHead {
                shared: shared.clone(),
                side,
            },
            pipe: Identity,
        };
        (branch(0), branch(1))
    }
}

/// The head of a [`Stream::union`]: its two input streams, installed with
/// tails that push into one shared continuation.
pub struct UnionHead<H, P, H2, P2> {
    a: Stream<H, P>,
    b: Stream<H2, P2>,
}

impl<H, P, H2, P2> Head for UnionHead<H, P, H2, P2>
where
    H: Head,
    P: Pipe<H::Out>,
    H2: Head,
    P2: Pipe<H2::Out, Out = P::Out>,
{
    type Out = P::Out;
    fn install<C: Continuation<P::Out>>(self, _df: &Dataflow, next: C) {
        let seg = Rc::new(RefCell::new(UnionSeg {
            next,
            wm: [0; 2],
            sent: 0,
            align: TwoInputs::new(),
        }));
        self.a.end_in(UnionTail {
            seg: seg.clone(),
            side: 0,
        });
        self.b.end_in(UnionTail { seg, side: 1 });
    }
}

/// What follows a union, shared by its two inputs' tails. One thread; never
/// re-entered: an input's head is a source (never run from a drain) or the
/// operator of an edge created before the union, while everything after
/// the union sends only on edges created after it, and a send that waits
/// drains only edges from its own on ([`super::cx`]).
struct UnionSeg<C, T> {
    next: C,
    /// Per input: its watermark (ms).
    wm: [u64; 2],
    /// The watermark passed on (the minimum of `wm`).
    sent: u64,
    /// Barrier alignment of the two inputs (and their ends).
    align: TwoInputs<T>,
}

impl<T, C: Continuation<T>> UnionSeg<C, T> {
    fn watermark(&mut self, side: usize, wm: u64, cx: &mut Cx<'_, '_>) {
        self.wm[side] = self.wm[side].max(wm);
        let min = self.wm[0].min(self.wm[1]);
        if min > self.sent {
            self.sent = min;
            self.next.watermark(min, cx);
        }
    }

    fn end(&mut self, side: usize, final_wm: u64, cx: &mut Cx<'_, '_>) {
        self.align.ended[side] = Some(final_wm);
        self.wm[side] = self.wm[side].max(final_wm);
        // The other input may wait at a barrier this one never passed.
        self.pass(cx);
        if let [Some(a), Some(b)] = self.align.ended {
            if !self.align.close() {
                return; // ended by the replay of the other input's end
            }
            let fin = a.min(b);
            self.sent = self.sent.max(fin);
            self.next.watermark(fin, cx);
            self.next.end(fin, cx);
        } else {
            self.watermark(side, final_wm, cx);
        }
    }

    /// Passes on the newest barrier both inputs passed, and applies what
    /// the input that was ahead pushed meanwhile, until it is ahead again.
    fn pass(&mut self, cx: &mut Cx<'_, '_>) {
        loop {
            if let Some(b) = self.align.pass_barrier() {
                self.next.barrier(b, cx);
            }
            let Some((w, e)) = self.align.next_ready() else {
                return;
            };
            match e {
                Early::Batch(item) => self.next.push(item, cx),
                Early::Watermark(wm) => self.watermark(w, wm, cx),
                Early::Barrier(id) => self.align.barrier(w, id),
                Early::End(fin) => self.end(w, fin, cx),
            }
        }
    }
}

/// One input's end of a union.
struct UnionTail<C, T> {
    seg: Rc<RefCell<UnionSeg<C, T>>>,
    side: usize,
}

impl<T: 'static, C: Continuation<T>> Tail<T> for UnionTail<C, T> {
    #[inline(always)]
    fn push(&mut self, item: T, cx: &mut Cx<'_, '_>) {
        let mut g = self.seg.borrow_mut();
        if g.align.ahead(self.side) {
            g.align.keep(self.side, Early::Batch(item));
        } else {
            g.next.push(item, cx)
        }
    }

    fn watermark(&mut self, wm: u64, cx: &mut Cx<'_, '_>) {
        let mut g = self.seg.borrow_mut();
        if g.align.ahead(self.side) {
            g.align.keep(self.side, Early::Watermark(wm));
        } else {
            g.watermark(self.side, wm, cx);
        }
    }

    fn tick(&mut self, cx: &mut Cx<'_, '_>) {
        // Once per flush interval: from the first input still running.
        let mut g = self.seg.borrow_mut();
        if g.align.ended[..self.side].iter().all(Option::is_some) {
            g.next.tick(cx);
        }
    }

    fn barrier(&mut self, id: u64, cx: &mut Cx<'_, '_>) {
        let mut g = self.seg.borrow_mut();
        if g.align.ahead(self.side) {
            g.align.keep(self.side, Early::Barrier(id));
        } else {
            g.align.barrier(self.side, id);
            g.pass(cx);
        }
    }

    fn end(&mut self, final_wm: u64, cx: &mut Cx<'_, '_>) {
        let mut g = self.seg.borrow_mut();
        if g.align.ahead(self.side) {
            g.align.keep(self.side, Early::End(final_wm));
        } else {
            g.end(self.side, final_wm, cx);
        }
    }

    fn report(&mut self, stats: &mut Stats) {
        if self.side == 0 {
            self.seg.borrow_mut().next.report(stats);
        }
    }

    fn barrier_safe(&self) -> bool {
        // What it queues while aligning came after the barrier; its
        // chain's state (an event-time stage after the union) is not saved.
        let g = self.seg.borrow();
        stateless_chain(&g.next)
    }
}

/// Whether a continuation saves nothing in its chain and may pass a
/// barrier (a chain after a union or a tee, whose state no segment saves).
fn stateless_chain<T, C: Continuation<T> + ?Sized>(c: &C) -> bool {
    let mut v = Vec::new();
    c.pipe_save(&mut v);
    v.is_empty() && c.barrier_safe()
}

/// What a [`Stream::tee`] shares between its branches until both are
/// consumed: how to install the upstream, and the branches installed so
/// far.
struct TeeShared<T> {
    install: Option<Box<dyn FnOnce(TeeTail<T>)>>,
    branches: [Option<Box<dyn Continuation<T>>>; 2],
}

/// The head of one branch of a [`Stream::tee`].
pub struct TeeHead<T> {
    shared: Rc<RefCell<TeeShared<T>>>,
    side: usize,
}

impl<T: Clone + 'static> Head for TeeHead<T> {
    type Out = T;
    fn install<C: Continuation<T>>(self, _df: &Dataflow, next: C) {
        let mut g = self.shared.borrow_mut();
        g.branches[self.side] = Some(Box::new(next));
        if let [Some(_), Some(_)] = &g.branches {
            let [a, b] = std::mem::take(&mut g.branches);
            let install = g.install.take().expect("a tee installs its upstream once");
            drop(g);
            install(TeeTail {
                a: a.expect("installed"),
                b: b.expect("installed"),
            });
        }
    }
}

/// The end of a teed stream: both branches' chains.
struct TeeTail<T> {
    a: Box<dyn Continuation<T>>,
    b: Box<dyn Continuation<T>>,
}

impl<T: Clone + 'static> Tail<T> for TeeTail<T> {
    #[inline]
    fn push(&mut self, item: T, cx: &mut Cx<'_, '_>) {
        self.a.push(item.clone(), cx);
        self.b.push(item, cx);
    }
    fn watermark(&mut self, wm: u64, cx: &mut Cx<'_, '_>) {
        self.a.watermark(wm, cx);
        self.b.watermark(wm, cx);
    }
    fn tick(&mut self, cx: &mut Cx<'_, '_>) {
        self.a.tick(cx);
        self.b.tick(cx);
    }
    fn end(&mut self, final_wm: u64, cx: &mut Cx<'_, '_>) {
        self.a.end(final_wm, cx);
        self.b.end(final_wm, cx);
    }
    fn barrier(&mut self, id: u64, cx: &mut Cx<'_, '_>) {
        self.a.barrier(id, cx);
        self.b.barrier(id, cx);
    }
    fn barrier_safe(&self) -> bool {
        stateless_chain(&*self.a) && stateless_chain(&*self.b)
    }

    fn report(&mut self, stats: &mut Stats) {
        self.a.report(stats);
        self.b.report(stats);
    }
}

/// A stream partitioned by a key function.
pub struct KeyedStream<H, P, KF> {
    stream: Stream<H, P>,
    key: KF,
}

impl<H: Head, P: Pipe<H::Out>, KF> KeyedStream<H, P, KF> {
    /// The stream and the key function (for operator crates).
    pub fn into_parts(self) -> (Stream<H, P>, KF) {
        (self.stream, self.key)
    }

    /// The graph this stream belongs to.
    pub fn dataflow(&self) -> &Dataflow {
        &self.stream.df
    }

    /// Moves every record to its key's owner and continues there (an
    /// exchange edge).
    ///
    /// ```
    /// use air_runtime::dataflow::{run_graph, VecSource};
    /// use air_runtime::JobConfig;
    /// use std::collections::HashMap;
    /// use std::sync::{Arc, Mutex};
    ///
    /// let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
    /// let totals = Arc::new(Mutex::new(HashMap::new()));
    /// let out = totals.clone();
    /// run_graph(&cfg, move |df| {
    ///     let out = out.clone();
    ///     let mut mine = HashMap::new(); // the running totals of this worker's keys
    ///     // (key, amount); both workers read the same three.
    ///     df.source(VecSource::new(vec![(1u32, 10u64), (2, 20), (1, 30)]))
    ///         .key_by(|r| r.0)
    ///         .exchange()
    ///         .for_each(move |(k, v)| {
    ///             let t = mine.entry(k).or_insert(0);
    ///             *t += v;
    ///             out.lock().unwrap().insert(k, *t); // one worker writes a key
    ///         });
    /// })
    /// .unwrap();
    /// assert_eq!(*totals.lock().unwrap(), HashMap::from([(1, 80), (2, 40)]));
    /// ```
    #[track_caller]
    pub fn exchange<K>(self) -> Stream<OpHead<Pass<P::Out>>, Identity>
    where
        P::Out: Record,
        K: Hash + 'static,
        KF: Fn(&P::Out) -> K + 'static,
    {
        let df = self.stream.df.clone();
        let edge = df.new_edge("exchange");
        let out = df.outbox::<P::Out>(edge);
        self.stream.end_in(ExchangeTail {
            out,
            route: Route::Key(self.key, PhantomData),
        });
        df.consume(edge, Pass::default())
    }
}

/// Where an [`ExchangeTail`] sends a record.
pub enum Route<KF, K> {
    /// To its key's owner.
    Key(KF, PhantomData<fn() -> K>),
    /// To every worker.
    All,
    /// To one worker.
    To(usize),
}

/// A segment's end at an exchange edge: records staged per destination.
pub struct ExchangeTail<T, KF, K = ()> {
    out: Outbox<T>,
    route: Route<KF, K>,
}

/// A tail that sends to one worker or to all (no key).
pub type UnkeyedTail<T> = ExchangeTail<T, fn(&T) -> (), ()>;

impl<T, KF, K> Tail<T> for ExchangeTail<T, KF, K>
where
    T: Record,
    K: Hash + 'static,
    KF: Fn(&T) -> K + 'static,
{
    #[inline(always)]
    fn push(&mut self, item: T, cx: &mut Cx<'_, '_>) {
        match &self.route {
            Route::Key(kf, _) => {
                let h = key_hash(&kf(&item));
                self.out.push_hashed(h, item, cx)
            }
            Route::All => self.out.push_all(item, cx),
            Route::To(w) => {
                let w = *w;
                self.out.push(w, item, cx)
            }
        }
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
}

struct SinkTail<S> {
    sink: S,
    me: usize,
    rows: u64,
    dirty: bool,
    /// Checkpoint barriers that reached it, and the newest one's id.
    barriers: u64,
    last_barrier: u64,
    /// Its state's slot ([`Sink::barrier`]).
    slot: super::state::StateSlot,
}

impl<S> SinkTail<S> {
    fn check(&self, r: Result<(), String>, cx: &mut Cx<'_, '_>) {
        if let Err(message) = r {
            cx.fail_with(RuntimeError::Operator {
                worker: self.me,
                message,
            });
        }
    }
}

impl<T, S: Sink<T>> Tail<T> for SinkTail<S> {
    #[inline]
    fn push(&mut self, item: T, cx: &mut Cx<'_, '_>) {
        self.rows += 1;
        if !self.dirty {
            // Flushed at the next flush tick.
            self.dirty = true;
            super::mark_pending();
        }
        let r = self.sink.write(item);
        if r.is_err() {
            self.check(r, cx);
        }
    }
    fn watermark(&mut self, _wm: u64, _cx: &mut Cx<'_, '_>) {}
    fn tick(&mut self, cx: &mut Cx<'_, '_>) {
        if self.dirty {
            self.dirty = false;
            let r = self.sink.flush();
            self.check(r, cx);
        }
    }
    fn end(&mut self, _final_wm: u64, cx: &mut Cx<'_, '_>) {
        let r = self.sink.close();
        self.check(r, cx);
        if super::state::enabled() && super::state::ends_for_good() {
            // Closed: every row is out; nothing is left to commit.
            self.slot.ended(Vec::new());
        }
    }
    fn barrier(&mut self, id: u64, cx: &mut Cx<'_, '_>) {
        if id > self.last_barrier {
            self.last_barrier = id;
            self.barriers += 1;
            if super::state::enabled() {
                match self.sink.barrier(id) {
                    Ok(state) => self.slot.save(id, state),
                    Err(e) => self.check(Err(e), cx),
                }
            }
        }
    }
    fn barrier_safe(&self) -> bool {
        // Its slot says whether the sink takes part.
        true
    }
    fn report(&mut self, stats: &mut Stats) {
        stats.add("sink_rows", self.rows);
        if self.barriers > 0 {
            stats.add("sink_barriers", self.barriers);
            stats.max("sink_barrier_last", self.last_barrier);
        }
        self.sink.report(stats);
    }
}

/// A state slot as planned ([`Dataflow::state_slot`]).
#[derive(Debug, Clone)]
pub(crate) struct SlotPlan {
    /// What keeps the state (for errors).
    pub what: String,
    /// It can save its state at a checkpoint.
    pub saves: bool,
    /// It can take its share of every old worker's state (a resume at
    /// another worker count).
    pub rescales: bool,
}
