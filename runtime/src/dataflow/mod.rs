//! Dataflow graphs of any shape: what user code builds once per worker, and
//! the worker loop that runs it.
//!
//! A graph is built by a closure every worker runs ([`run_graph`]), from
//! typed stream handles: a [`Dataflow::source`] (this worker's shard),
//! stateless operators fused into the worker's loop with static dispatch
//! ([`Stream::map`], [`Stream::filter`], [`Stream::flat_map`],
//! [`Stream::inspect`]), exchange edges ([`Stream::key_by`] followed by a
//! keyed operator, [`Stream::broadcast`], [`Stream::collect`]), unions and
//! fan-out within the worker ([`Stream::union`], [`Stream::tee`]) and sinks
//! ([`Stream::sink`], [`Stream::for_each`]). A stream left unconsumed makes
//! the graph fail to plan. Windows, aggregates, joins and
//! file sinks are in `air-operators`, built on [`Operator`], [`Tail`] and
//! [`Outbox`].
//!
//! ```
//! use air_runtime::dataflow::{run_graph, VecSource};
//! use air_runtime::JobConfig;
//! use std::sync::{Arc, Mutex};
//!
//! let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
//! let seen = Arc::new(Mutex::new(Vec::new()));
//! let out = seen.clone();
//! run_graph(&cfg, move |df| {
//!     // Worker w reads the numbers w, w + 2, w + 4, …
//!     let shard: Vec<u64> = (0..100).filter(|i| i % 2 == df.index() as u64).collect();
//!     let out = out.clone();
//!     df.source(VecSource::new(shard))
//!         .filter(|x| x % 3 == 0)
//!         .map(|x| x * 10)
//!         .key_by(|x| x % 7)      // exchange: each residue meets at its owner
//!         .exchange()
//!         .collect()               // every row to worker 0
//!         .for_each(move |x| out.lock().unwrap().push(x));
//! })
//! .unwrap();
//! let mut got = seen.lock().unwrap().clone();
//! got.sort();
//! assert_eq!(got, (0..100).filter(|x| x % 3 == 0).map(|x| x * 10).collect::<Vec<u64>>());
//! ```
//!
//! Every segment between two edges runs on the worker's own thread; edges
//! are one ring per (edge, sender, receiver) in the tier the two workers'
//! placement allows (thread, node, network). Watermarks and end-of-stream
//! travel in-band on every edge; an operator's watermark is the minimum of
//! its inputs'. See [`cx`] for why backpressure cannot deadlock.

mod align;
mod cut;
pub mod cx;
pub mod late;
pub mod moves;
mod names;
pub mod periods;
pub mod pipe;
use names::{brief_type_names, short_type_names};
mod report;
pub mod state;
pub mod stream;

pub use cut::{input_cuts_barriers, source_barrier};
pub use cx::{Cx, EdgeConsumer, Outbox};
pub use late::{LateLog, LateRecords, DISORDER_MAX};
pub use periods::PeriodRecords;
pub use pipe::{
    EventTime, Filter, FlatMap, Identity, IngestionTime, Inspect, Map, Pipe, Then,
    INGESTION_CLOCK_EVERY,
};
use report::stage_list;
pub use report::{max_over_mean, GraphOutput, Stage, Stats, WorkerReport};
pub use state::{CheckpointConfig, Checkpoints, StateSlot};
pub use stream::{
    Chain, Continuation, Dataflow, ExchangeTail, Head, KeyedStream, Op2Head, OpHead, Operator,
    Operator2, Out, Pass, Route, Sink, Source, SourceHead, SourcePoll, Stream, Tail, TeeHead,
    UnionHead, VecSource,
};

use crate::job::{run_workers_agreed, EdgeChannels, JobConfig, Progress, WorkerInfo};
use crate::metrics::ChannelMetrics;
use crate::topology::WorkerPlacement;
use crate::RuntimeError;
use cx::{EdgeRx, EdgeTx};
use std::cell::Cell;
use std::time::{Duration, Instant};

/// Ring capacity of an edge that carries few records
/// ([`Dataflow::new_small_edge`]): a sixteenth of the job's, at least 64 KiB
/// (at most the job's), rounded up to a multiple of 16 bytes.
pub fn small_ring_bytes(ring_bytes: usize) -> usize {
    (ring_bytes / 16)
        .max(64 << 10)
        .min(ring_bytes)
        .next_multiple_of(16)
}

/// Exchange edges as (name, ring capacity in bytes).
type EdgeSizes = Vec<(String, usize)>;

thread_local! {
    static BATCH_RECORDS: Cell<usize> = const { Cell::new(1024) };
    /// Whether this worker shares its CPU with other workers (its placement
    /// is oversubscribed): a send waiting on a full ring then sleeps rather
    /// than yields ([`full_ring_pause`]).
    static SHARED_CPU: Cell<bool> = const { Cell::new(false) };
    /// This worker's barrier schedule: its start, the interval
    /// (`JobConfig::barrier_every`) and the id it starts after (the
    /// checkpoint a resumed job started from, else 0).
    static BARRIERS: Cell<Option<(Instant, Duration, u64)>> = const { Cell::new(None) };
    /// Set when this worker staged something that its next flush tick must
    /// push on ([`mark_pending`]); cleared by the tick.
    static PENDING: Cell<bool> = const { Cell::new(false) };
    /// The error that ended one of this worker's sources early
    /// ([`Source::take_error`]): the job fails with it once this worker
    /// has processed what was read before it (its windows fire at the end
    /// of its inputs, as after a source that ended well).
    static SOURCE_ERROR: std::cell::RefCell<Option<RuntimeError>> =
        const { std::cell::RefCell::new(None) };
    /// `Some` while [`dry_run`] runs on this thread: the edges of the first
    /// graph [`run_graph`] planned, once it did.
    static DRY_RUN: std::cell::RefCell<Option<Option<EdgeSizes>>> =
        const { std::cell::RefCell::new(None) };
}

/// The message of the [`RuntimeError::Setup`] a [`run_graph`] under
/// [`dry_run`] fails with.
pub const DRY_RUN_MESSAGE: &str = "dry run: the graph was planned, not run";

/// Runs `f` with every [`run_graph`] it calls on this thread only planning
/// its graph: the first graph's exchange edges are returned as (name, ring
/// capacity in bytes, as `run_graph` gives them), and `run_graph` fails
/// with [`RuntimeError::Setup`]`(`[`DRY_RUN_MESSAGE`]`)` before any check,
/// ring or worker. `None` if `f` ran no graph. (What `air plan` reads a
/// query's real edges with.)
pub fn dry_run(f: impl FnOnce()) -> Option<Vec<(String, usize)>> {
    let old = DRY_RUN.with(|d| d.borrow_mut().replace(None));
    f();
    DRY_RUN
        .with(|d| std::mem::replace(&mut *d.borrow_mut(), old))
        .flatten()
}

/// The newest checkpoint barrier due on this worker's schedule
/// (`JobConfig::barrier_every`): barrier `n` is due once `n` intervals
/// passed since the worker started (`None`: no barriers; `Some(0)`: none
/// due yet). Every worker computes it alike, so no process coordinates
/// barriers. Sources place every id in turn at their flush ticks, never
/// skipping one: barrier `n` at the first tick it is due and checkpoint
/// `n − 1` is no longer in flight at the worker, so a source behind the
/// schedule places the ids it owes one a tick (with state: one a
/// checkpoint, each once the one before is no longer in flight) until it
/// caught up.
pub fn barrier_due() -> Option<u64> {
    BARRIERS.with(|b| {
        b.get().map(|(start, every, base)| {
            let n = (start.elapsed().as_nanos() / every.as_nanos().max(1)).min(u64::MAX as u128);
            base.saturating_add(n as u64)
        })
    })
}

/// The id this worker's barriers start after: the checkpoint the job
/// resumed from (its barriers go on from there), else 0.
pub fn barrier_base() -> u64 {
    BARRIERS.with(|b| b.get().map_or(0, |(_, _, base)| base))
}

/// How a send waits, after `spins` tries, for room in a full ring. A
/// worker with a CPU of its own spins 64 times, then yields. One that
/// shares its CPU (an oversubscribed placement: more workers than cores)
/// sleeps after the 64 spins, 10 µs doubling to 1 ms: its consumer, a
/// thread on the same CPUs, then gets them. Yielding instead leaves the
/// CPUs to every other waiting sender of the machine, so a hot consumer
/// (few keys, many senders) drains at a fraction of its speed, and a job
/// stopped with full rings took 2–22 s to drain them at 8 × 28 workers on
/// 2 CPUs (session 24).
pub(crate) fn full_ring_pause(spins: u32) {
    if spins <= 64 {
        std::hint::spin_loop();
    } else if SHARED_CPU.with(|c| c.get()) {
        let us = 10u64 << (spins - 65).min(7);
        std::thread::sleep(Duration::from_micros(us.min(1000)));
    } else {
        std::thread::yield_now();
    }
}

/// Sends what this worker owes other workers of moved key groups' state
/// ([`moves::pump`]); returns whether some is still owed.
fn send_owed(tx: &mut [cx::EdgeTx<'_>]) -> Result<bool, RuntimeError> {
    let max: Vec<usize> = tx.iter().map(|t| t.max_frame()).collect();
    moves::pump(
        |edge, dest, len, write| tx[edge].try_send_state(dest, len, write),
        |edge| max[edge],
    )?;
    for t in tx.iter_mut() {
        t.publish()?;
    }
    Ok(moves::owes_any())
}

/// The watermark a source of this worker may read up to under watermark
/// alignment (`JobConfig::max_watermark_drift`): `drift` ms past the
/// smallest watermark received on an open edge whose feeders are all
/// sources' segments; `u64::MAX` (no bound) while no such edge has
/// received one.
fn aligned_limit(tx: &[cx::EdgeTx<'_>], rx: &[cx::EdgeRx<'_>], drift: u64) -> u64 {
    tx.iter()
        .zip(rx)
        .filter(|(t, r)| !r.done && t.fed_by_sources())
        .map(|(_, r)| r.inputs.watermark())
        .filter(|&wm| wm > 0)
        .min()
        .map_or(u64::MAX, |wm| wm.saturating_add(drift))
}

/// Records per staged batch and per source poll on this worker
/// (`JobConfig::batch_records`).
pub fn batch_records() -> usize {
    BATCH_RECORDS.with(|b| b.get())
}

/// Tick interval of a worker that has nothing staged (no record in an
/// outbox, no frame written but not yet published, no sink row not yet
/// flushed): it then ticks — sends its watermarks, polls its paced sources —
/// every 10 ms (or every `JobConfig::flush` if that is longer), on a grid of
/// wall-clock multiples of this interval shared by every worker and process
/// of the machine, instead of every flush interval. Watermarks thus lag
/// their events by at most this much more, and a paced source's events
/// leave in bursts at most this far apart; anything staged is still pushed
/// within the flush interval.
pub const IDLE_TICK: Duration = Duration::from_millis(10);

/// How long a worker's network-tier inputs (those it must poll: their
/// senders cannot ring its doorbell) must have carried no data or End frame
/// before it polls them on the [`IDLE_TICK`] grid instead of every flush
/// interval: 100 ms. While data arrives it is read within a flush interval;
/// after a quiet spell the first data frame waits for an idle tick (at most
/// 10 ms, a little more when the get of the bytes completes only at the
/// next one). An idle rank of the network tier thus wakes about 100 times a
/// second, not 1,000.
pub const POLLED_QUIET_AFTER: Duration = Duration::from_millis(100);

/// Tells this worker's loop that something was staged which its next flush
/// tick must push on (records in a batch, a frame not yet published, rows
/// a sink has not flushed): the next tick then comes one flush interval
/// after the last, not at the next [`IDLE_TICK`] grid point. Operators that
/// stage through [`Outbox`] or write to a [`Sink`] need not call it; an
/// operator that buffers on its own and flushes in its `tick` must, when it
/// buffers the first item after a tick. Cheap: one thread-local store.
#[inline]
pub fn mark_pending() {
    PENDING.with(|p| p.set(true));
}

/// Keeps the first error that ended a source of this worker early, for
/// the end of the worker's run ([`SOURCE_ERROR`]).
pub(crate) fn defer_source_error(e: RuntimeError) {
    state::mark_failing();
    SOURCE_ERROR.with(|s| {
        s.borrow_mut().get_or_insert(e);
    });
}

/// Whether something was staged since the last tick ([`mark_pending`]).
#[inline]
fn pending() -> bool {
    PENDING.with(|p| p.get())
}

/// The [`IDLE_TICK`] grid: instants at wall-clock multiples of `every`.
struct Grid {
    /// An instant on the grid.
    base: Instant,
    every: Duration,
}

impl Grid {
    fn new(every: Duration) -> Grid {
        let now = Instant::now();
        let every = every.max(Duration::from_micros(1));
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let phase = Duration::from_nanos((wall.as_nanos() % every.as_nanos()) as u64);
        // `now - phase` is a wall-clock multiple of `every` (as this
        // process's clocks agree; other processes of the machine read the
        // same clocks).
        let base = now.checked_sub(phase).unwrap_or(now);
        Grid { base, every }
    }

    /// The first grid point strictly after `t`.
    fn after(&self, t: Instant) -> Instant {
        let since = t.saturating_duration_since(self.base).as_nanos();
        let every = self.every.as_nanos();
        let k = since / every + 1;
        self.base + Duration::from_nanos((k * every) as u64)
    }
}

/// Builds the graph once on the calling thread (as worker 0 of `workers`)
/// to learn its edges and check it. Returns the edges' names and whether
/// each carries few records ([`Dataflow::new_small_edge`]).
///
/// # Errors
/// [`RuntimeError::Setup`] naming an edge no operator consumes, a stream
/// never consumed (its record type and where it was made), or a stream
/// handle kept beyond the build.
///
/// ```
/// use air_runtime::dataflow::{plan, Dataflow, VecSource};
///
/// let edges = plan(2, &|df: &Dataflow| {
///     df.source(VecSource::new(vec![1u64, 2]))
///         .key_by(|x| *x)
///         .exchange()
///         .collect()
///         .for_each(|_| {});
/// })
/// .unwrap();
/// assert_eq!(edges, [("exchange".to_string(), false), ("collect".to_string(), true)]);
///
/// // A stream that ends nowhere is refused, naming the line that made it.
/// let err = plan(2, &|df: &Dataflow| {
///     let _ = df.source(VecSource::new(vec![1u64])).map(|x| x + 1);
/// })
/// .unwrap_err();
/// assert!(err.to_string().contains("is never consumed"));
/// ```
pub fn plan<B>(workers: usize, build: &B) -> Result<Vec<(String, bool)>, RuntimeError>
where
    B: Fn(&Dataflow),
{
    plan_typed(workers, build).map(|(v, _, _)| v.into_iter().map(|(n, s, _)| (n, s)).collect())
}

/// A planned graph's edges (name, small rings, record type).
type PlannedEdges = Vec<(String, bool, &'static str)>;

/// The edges of a built graph as (name, small rings, record type).
fn edge_list(b: &stream::Builder) -> Vec<(String, bool, &'static str)> {
    b.edges
        .iter()
        .map(|e| (e.name.clone(), e.small, e.ty.unwrap_or("?")))
        .collect()
}

/// [`plan`], with each edge's record type, the state slots and the stages.
fn plan_typed<B>(
    workers: usize,
    build: &B,
) -> Result<(PlannedEdges, Vec<stream::SlotPlan>, Vec<Stage>), RuntimeError>
where
    B: Fn(&Dataflow),
{
    let info = WorkerInfo {
        index: 0,
        workers,
        core: None,
        placement: WorkerPlacement::default(),
        doorbell: None,
        key_groups: crate::keygroups::DEFAULT_KEY_GROUPS.max(workers as u32),
        rebalance: crate::hotkeys::Rebalance::default(),
    };
    let df = Dataflow::new(info);
    build(&df);
    let b = df.into_builder()?;
    check(&b)?;
    let stages = stage_list(&b);
    Ok((edge_list(&b), b.slots, stages))
}

fn check(b: &stream::Builder) -> Result<(), RuntimeError> {
    if let Some(e) = &b.error {
        return Err(RuntimeError::Setup(format!("the graph cannot run: {e}")));
    }
    for (i, e) in b.edges.iter().enumerate() {
        if e.consumer.is_none() {
            return Err(RuntimeError::Setup(format!(
                "edge {i} ({}) feeds no operator: end its stream in a keyed operator or a sink",
                e.name
            )));
        }
    }
    if b.sources.is_empty() {
        return Err(RuntimeError::Setup(
            "the graph has no source that ends in a sink, an exchange or a keyed operator".into(),
        ));
    }
    Ok(())
}

/// Runs the graph `build` makes on every worker of the job (`cfg.workers`
/// per process; across every MPI rank with `cfg.cluster`). `build` runs
/// once first on the calling thread to plan and check the graph (so a graph
/// that cannot run fails before any worker starts), then once on every
/// worker's thread after pinning; it must build the same graph each time
/// (sources may differ: each worker reads its own shard).
///
/// # Errors
/// A graph that cannot run ([`plan`]), channel setup
/// ([`RuntimeError::Setup`]), a worker that panicked, a lost rank, a sink
/// that failed ([`RuntimeError::Operator`]).
///
/// ```
/// use air_runtime::dataflow::{run_graph, VecSource};
/// use air_runtime::JobConfig;
///
/// let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
/// let out = run_graph(&cfg, |df| {
///     df.source(VecSource::new(vec![1u64, 2, 3])) // 3 records at each worker
///         .key_by(|x| *x)
///         .exchange()
///         .for_each(|_| {});
/// })
/// .unwrap();
/// assert_eq!(out.edges, ["exchange"]);
/// assert_eq!(out.workers.len(), 2);
/// assert_eq!(out.stats.get("source_records"), 6);
/// assert_eq!(out.stats.get("sink_rows"), 6);
/// ```
pub fn run_graph<B>(cfg: &JobConfig, build: B) -> Result<GraphOutput, RuntimeError>
where
    B: Fn(&Dataflow) + Sync,
{
    let ranks = job_ranks(cfg);
    let local = cfg.workers.max(1);
    let total = ranks * local;
    crate::keygroups::KeyGroups::new(cfg.key_groups, total)
        .map_err(|e| RuntimeError::Setup(e.to_string()))?;
    let (planned, slots, stages) = plan_typed(total, &build)?;
    if cfg.checkpoint.is_some() {
        if cfg.barrier_every.is_none() {
            return Err(RuntimeError::Setup(
                "checkpoints need checkpoint barriers: set JobConfig::barrier_every \
                 (--checkpoint-ms)"
                    .into(),
            ));
        }
        let mut cannot: Vec<String> = slots
            .iter()
            .filter(|s| !s.saves)
            .map(|s| brief_type_names(&short_type_names(&s.what)))
            .collect();
        cannot.dedup();
        if !cannot.is_empty() {
            return Err(RuntimeError::Setup(format!(
                "checkpoints: this graph keeps state that cannot be saved yet: {} (docs/guide.md, \
                 \"Checkpoints\", says what can: e.g. not keyed process \
                 without process_checkpointed)",
                cannot.join("; ")
            )));
        }
    }
    // Every rank must build the same edges carrying the same types, and
    // split keys into the same key groups.
    let signature = planned.iter().fold(
        0xcbf2_9ce4_8422_2325u64 ^ cfg.key_groups as u64,
        |h, (n, s, t)| {
            let mut h = h;
            for b in n.bytes().chain([*s as u8, 0]).chain(t.bytes()).chain([0]) {
                h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
            }
            h
        },
    );
    let edge_ring_bytes: Vec<usize> = planned
        .iter()
        .map(|&(_, small, _)| {
            // Every tier's ring is a whole number of 16-byte frame units
            // (the network tier refuses anything else).
            if small {
                small_ring_bytes(cfg.ring_bytes)
            } else {
                cfg.ring_bytes.next_multiple_of(16)
            }
        })
        .collect();
    // The dry run gives the sizes before the per-node budget: `air plan`
    // applies it to the shape it plans, not to this process's.
    let budgeted = |sizes: Vec<usize>| match cfg.ring_budget {
        Some(budget) => {
            let small: Vec<bool> = planned.iter().map(|&(_, s, _)| s).collect();
            crate::plan::fit_ring_budget(budget, cfg.ring_bytes, &small, |e| {
                crate::job::job_shape(cfg, e)
            })
        }
        None => sizes,
    };
    let start = Instant::now();
    let dry = DRY_RUN.with(|d| {
        let mut d = d.borrow_mut();
        match &mut *d {
            Some(seen) => {
                seen.get_or_insert_with(|| {
                    planned
                        .iter()
                        .zip(&edge_ring_bytes)
                        .map(|((n, _, _), &b)| (n.clone(), b))
                        .collect()
                });
                true
            }
            None => false,
        }
    });
    if dry {
        return Err(RuntimeError::Setup(DRY_RUN_MESSAGE.into()));
    }
    let edge_ring_bytes = budgeted(edge_ring_bytes);
    let plan = crate::job::job_plan(cfg, &edge_ring_bytes);
    let opened = Instant::now();
    let checkpoints = match &cfg.checkpoint {
        Some(c) => {
            let ck = Checkpoints::open(c, signature, total)
                .map_err(|e| RuntimeError::Setup(format!("checkpoints: {e}")))?;
            if ck.rescaling() {
                // Every rank sees the same checkpoint and graph: each
                // refuses alike, before any worker starts.
                let mut cannot: Vec<String> = slots
                    .iter()
                    .filter(|s| !s.rescales)
                    .map(|s| short_type_names(&s.what))
                    .collect();
                cannot.dedup();
                if !cannot.is_empty() {
                    let e = crate::checkpoint::CheckpointError::Workers {
                        path: c.dir.clone(),
                        found: ck.resumed_workers.unwrap_or(0) as u64,
                        expected: total as u64,
                        cannot: cannot.join("; "),
                    };
                    return Err(RuntimeError::Setup(format!("checkpoints: {e}")));
                }
            }
            ck.say_resuming();
            Some(std::sync::Arc::new(ck))
        }
        None => None,
    };
    // Finding and checking the checkpoint to resume from (every part read
    // and CRC-checked), µs.
    let open_us = opened.elapsed().as_micros() as u64;
    // Every rank resumes from the same checkpoint (or none), or none
    // starts (a directory that is not shared, a rank that saw it damaged).
    let resumed = checkpoints.as_ref().and_then(|c| c.resumed).unwrap_or(0);
    let agree = [
        ("the graph's edges and their record types", signature),
        ("the checkpoint to resume from (--checkpoint-dir)", resumed),
    ];
    let ran = run_workers_agreed(cfg, &edge_ring_bytes, &agree, |info, channels| {
        run_worker(cfg, info, channels, &build, &planned, checkpoints.clone())
    });
    if let Some(ck) = &checkpoints {
        // Every part handed over is written before the job reports.
        ck.drain();
    }
    let (workers, created) = ran?;
    let edges: Vec<String> = planned.into_iter().map(|(n, _, _)| n).collect();
    let mut stats = Stats::default();
    let mut channels = ChannelMetrics::default();
    let mut stopped = false;
    for w in &workers {
        stats.merge(&w.stats);
        channels.add(&w.channels);
        stopped |= w.stopped;
    }
    let _ = start;
    if let Some(ck) = &checkpoints {
        use std::sync::atomic::Ordering::Relaxed;
        let f = &ck.figures;
        stats.add("checkpoint_parts_written", f.parts.load(Relaxed));
        stats.add("checkpoint_parts_failed", f.failed.load(Relaxed));
        stats.add("checkpoints_completed", f.completed.load(Relaxed));
        stats.add("checkpoint_bytes", f.bytes.load(Relaxed));
        stats.add("checkpoint_write_us", f.write_us.load(Relaxed));
        stats.max("checkpoint_write_max_us", f.write_max_us.load(Relaxed));
        stats.max(
            "checkpoint_newest_complete",
            f.newest_complete.load(Relaxed),
        );
        if let Some(id) = ck.resumed {
            stats.max("checkpoint_resumed_from", id);
            // The slowest worker's read and restore after the check.
            let worker_us = stats.get_max("checkpoint_restore_worker_us").unwrap_or(0);
            stats.max("checkpoint_restore_us", open_us + worker_us);
        }
    }
    Ok(GraphOutput {
        resumed_from: checkpoints.as_ref().and_then(|c| c.resumed),
        ring_bytes: edge_ring_bytes
            .iter()
            .map(|&b| (total * local * b) as u64)
            .sum(),
        edge_ring_bytes,
        edges,
        stages,
        plan,
        created,
        elapsed: workers.iter().map(|w| w.elapsed).max().unwrap_or_default(),
        workers,
        stats,
        channels,
        stopped,
    })
}

fn job_ranks(cfg: &JobConfig) -> usize {
    match &cfg.cluster {
        #[cfg(feature = "mpi")]
        Some(c) => c.mpi.size(),
        #[cfg(not(feature = "mpi"))]
        Some(c) => match *c {},
        None => 1,
    }
}

fn run_worker<B>(
    cfg: &JobConfig,
    info: &WorkerInfo,
    channels: Vec<EdgeChannels<'_>>,
    build: &B,
    planned: &[(String, bool, &'static str)],
    checkpoints: Option<std::sync::Arc<Checkpoints>>,
) -> Result<WorkerReport, RuntimeError>
where
    B: Fn(&Dataflow),
{
    let me = info.index;
    let resumed = checkpoints.as_ref().and_then(|c| c.resumed).unwrap_or(0);
    BATCH_RECORDS.with(|b| b.set(cfg.batch_records.max(1)));
    SHARED_CPU.with(|c| c.set(info.placement.oversubscribed));
    BARRIERS.with(|b| {
        b.set(
            cfg.barrier_every
                .map(|every| (Instant::now(), every, resumed)),
        )
    });
    // Key groups move only between barriers of a job without checkpoints
    // written (a checkpoint taken after a move holds state laid out by
    // the tables before; resuming from one is not built yet).
    let mode = moves::MoveMode::from_env();
    if mode != moves::MoveMode::Never && checkpoints.is_some() {
        return Err(RuntimeError::Setup(
            "AIR_MOVE_KEY_GROUPS moves key groups at barriers, which a job writing checkpoints \
             cannot resume from yet: unset it, or run without --checkpoint-dir"
                .into(),
        ));
    }
    moves::begin(if cfg.barrier_every.is_some() {
        mode
    } else {
        moves::MoveMode::Never
    });
    let restoring = Instant::now();
    let mut restored_bytes = None;
    if let Some(ck) = &checkpoints {
        let groups = crate::keygroups::KeyGroups::new(cfg.key_groups, ck.store().workers())
            .map_err(|e| RuntimeError::Setup(e.to_string()))?;
        let resumed = ck
            .resumed_state(me, groups)
            .map_err(|e| RuntimeError::Setup(format!("resuming worker {me}: {e}")))?;
        restored_bytes = match &resumed {
            state::Resumed::Nothing => None,
            state::Resumed::Own(p) => Some(p.bytes() as u64),
            // Every old part, read once per process: counted at its
            // first worker.
            state::Resumed::Rescaled { parts, .. } => Some(if me % cfg.workers.max(1) == 0 {
                parts.iter().map(|p| p.bytes() as u64).sum()
            } else {
                0
            }),
        };
        state::begin(me, ck.clone(), resumed);
    }
    // The thread's checkpoint state ends with this function, however it
    // returns.
    struct EndState;
    impl Drop for EndState {
        fn drop(&mut self) {
            let _ = state::end();
        }
    }
    let _end_state = EndState;
    let df = Dataflow::new(info.clone());
    build(&df);
    let b = df.into_builder()?;
    check(&b)?;
    // Reading this worker's part and restoring its components (in the
    // build), µs.
    let restore_us = restoring.elapsed().as_micros() as u64;
    if cfg.barrier_every.is_some() {
        if let Some(e) = b.edges.iter().find(|e| e.feeders > 1) {
            return Err(RuntimeError::Setup(format!(
                "checkpoint barriers need one operator feeding each edge at a worker; edge {} \
                 has {} (several outboxes on one edge: use a union before it)",
                e.name, e.feeders
            )));
        }
    }
    let mine = edge_list(&b);
    if mine.len() != planned.len() {
        return Err(RuntimeError::Setup(format!(
            "worker {me} built a graph of {} edges, the plan has {}: the build closure must \
             build the same graph every time",
            mine.len(),
            planned.len()
        )));
    }
    if let Some(k) = (0..mine.len()).find(|&k| mine[k] != planned[k]) {
        return Err(RuntimeError::Setup(format!(
            "worker {me} built edge {k} as {} carrying {}, the plan has {} carrying {}: the \
             build closure must build the same graph every time",
            mine[k].0, mine[k].2, planned[k].0, planned[k].2
        )));
    }
    let mut tx: Vec<EdgeTx<'_>> = Vec::with_capacity(channels.len());
    let mut rx: Vec<EdgeRx<'_>> = Vec::with_capacity(channels.len());
    // The tier of each destination's ring (live metrics tell ring-full
    // waits apart by tier).
    #[cfg(feature = "mpi")]
    let local = cfg.workers.max(1);
    let tier_of = |dest: usize| -> u8 {
        let t = match &cfg.cluster {
            #[cfg(feature = "mpi")]
            Some(c) => crate::cluster::tier(c, me / local, dest / local),
            #[cfg(not(feature = "mpi"))]
            Some(c) => {
                let _ = dest;
                match *c {}
            }
            None => crate::plan::Tier::Thread,
        };
        crate::live::tier_index(t) as u8
    };
    let edge_names: Vec<String> = b.edges.iter().map(|e| e.name.clone()).collect();
    for (e, (plan, ch)) in b.edges.into_iter().zip(channels).enumerate() {
        let tiers = (0..ch.tx.len()).map(tier_of).collect();
        let key_groups = crate::keygroups::KeyGroups::new(cfg.key_groups, ch.tx.len().max(1))
            .map_err(|e| RuntimeError::Setup(e.to_string()))?;
        let mut t = EdgeTx::new(e, me, ch.tx, tiers, plan.feeders, key_groups);
        if plan.moves.is_some() {
            t.set_moves();
        }
        tx.push(t);
        rx.push(EdgeRx {
            inputs: crate::exchange::Inputs::new(me, ch.rx)
                .with_validation(cfg.validate)
                .with_moves(plan.moves.is_some()),
            consumer: plan.consumer.expect("checked"),
            done: false,
            ended: false,
        });
    }
    let mut sources: Vec<(Box<dyn stream::SourceDriver>, bool)> =
        b.sources.into_iter().map(|s| (s, false)).collect();
    let n_slots = b.slots.len();
    let mut b = stream::Leftover {
        reporters: b.reporters,
    };
    let n_edges = rx.len();
    // Live metrics, when a server runs in this process: this worker's
    // shared blocks, filled at most every `live::PUBLISH_EVERY` at a tick.
    let mut live = crate::live::current().map(|r| {
        let masks = tx.iter().map(|t| t.tier_mask()).collect();
        crate::live::Publisher::new(r.register(me, &edge_names, masks))
    });
    let start = Instant::now();
    let mut last_flush = start;
    // Records received per edge per period of the hot-key judgments, for
    // the report's load per period: copied from the edges' counters at
    // the first tick past each period's end.
    let mut periods = periods::PeriodCounts::new(start, cfg.rebalance.period, n_edges);
    // With nothing staged, ticks fall on the shared idle grid (see
    // IDLE_TICK): every worker of the machine ticks at the same instants, so
    // a peer's watermark frames find it awake or about to look.
    // A worker with network-tier inputs is never woken by their senders: while
    // they carry data (a Data or End frame in the last POLLED_QUIET_AFTER)
    // it ticks every flush interval, from its own start, so it reads them
    // within one; once they fell quiet it ticks on the idle grid too, and
    // the first data frame after the quiet waits for an idle tick.
    let idle_grid = Grid::new(cfg.flush.max(IDLE_TICK));
    let polled = rx.iter().any(|r| r.inputs.polled());
    let fast_grid = Grid {
        base: start,
        every: cfg.flush.max(Duration::from_micros(1)),
    };
    // Whether this worker's polled inputs are quiet (it then ticks on the
    // idle grid); a worker without polled inputs always is.
    let mut quiet = !polled;
    let mut polled_frames = 0u64;
    let mut polled_data_at = start;
    let grid_of = |quiet: bool| if quiet { &idle_grid } else { &fast_grid };
    let mut grid_next = grid_of(quiet).after(start);
    PENDING.with(|p| p.set(false));
    // Whether a loop since the last tick found nothing to do: a worker
    // busy in every loop since (a source reading as fast as it can) ticks
    // every flush interval, so its watermarks keep closing windows while
    // it reads; one that paused (a paced source between bursts) waits for
    // the idle grid.
    let mut paused_since_tick = false;
    let mut stopped = false;
    let mut idler = crate::job::Idler::new(info.doorbell.clone());
    let mut error: Option<RuntimeError> = None;
    SOURCE_ERROR.with(|s| s.borrow_mut().take());
    let moving = moves::enabled();
    // Loops in which watermark alignment held a source back.
    let mut held = 0u64;
    loop {
        let mut busy = false;
        let stop = crate::stop::requested();
        // Watermark alignment: sources this far ahead of the slowest
        // source-fed edge's received watermark wait.
        let limit = match cfg.max_watermark_drift {
            Some(drift) if !stop => aligned_limit(&tx, &rx, drift),
            _ => u64::MAX,
        };
        let mut held_now = false;
        for (s, done) in sources.iter_mut() {
            if *done {
                continue;
            }
            if s.watermark() > limit {
                held_now = true;
                continue;
            }
            let mut cx = Cx::for_source(&mut tx, &mut rx, &mut error);
            if stop {
                s.finish(true, &mut cx);
                *done = true;
                stopped = true;
            } else {
                match s.step(&mut cx) {
                    Progress::Busy => busy = true,
                    Progress::Idle => {}
                    Progress::Done => {
                        s.finish(false, &mut cx);
                        *done = true;
                    }
                }
            }
            if let Some(e) = error.take() {
                return Err(e);
            }
        }
        let mut frames = 0;
        for k in 0..n_edges {
            frames += cx::poll_edge(&mut rx, k, 0, &mut tx, 0, 64, &mut error)?;
        }
        if moving {
            // State owed to other workers goes as far as rings have room;
            // a worker that owes some does not park.
            busy |= send_owed(&mut tx)?;
        }
        let now = Instant::now();
        if polled && frames > 0 {
            let f = rx.iter().map(|r| r.inputs.polled_frames()).sum::<u64>();
            if f != polled_frames {
                polled_frames = f;
                polled_data_at = now;
                if quiet {
                    quiet = false;
                    grid_next = grid_next.min(fast_grid.after(now));
                }
            }
        }
        if quiet && polled && sources.iter().all(|s| s.1) {
            // The sources ended: the End frames of the inputs are next.
            quiet = false;
            grid_next = grid_next.min(fast_grid.after(now));
        }
        // Woken from a park with the tick a quarter interval away or less:
        // tick now, rather than park again and wake once more for it.
        let slack = if idler.just_woke() {
            cfg.flush / 4
        } else {
            Duration::ZERO
        };
        // Something staged: push it within the flush interval. Else the
        // next idle grid point.
        paused_since_tick |= !(busy || frames > 0);
        if held_now {
            // A held source reads on once a watermark comes: its worker
            // ticks every flush interval meanwhile (sends its own
            // watermarks), parking in between.
            held += 1;
            paused_since_tick = false;
        }
        let due = if pending() || !paused_since_tick {
            last_flush + cfg.flush
        } else {
            grid_next
        };
        if now + slack >= due {
            last_flush = now;
            // Quiet only while a source still runs: a worker whose sources
            // ended waits for its inputs' End frames, the job's end.
            if !quiet
                && polled
                && now.duration_since(polled_data_at) >= POLLED_QUIET_AFTER
                && sources.iter().any(|s| !s.1)
            {
                quiet = true;
            }
            // Past the grid point this tick may have served early.
            grid_next = grid_of(quiet).after(now + cfg.flush / 4);
            for (s, done) in sources.iter_mut() {
                if !*done {
                    let mut cx = Cx::for_source(&mut tx, &mut rx, &mut error);
                    s.tick(&mut cx);
                }
            }
            for k in 0..n_edges {
                cx::tick_edge(&mut rx, k, 0, &mut tx, 0, &mut error)?;
            }
            for t in tx.iter_mut() {
                t.publish()?;
            }
            periods.tick(now, |e| rx[e].inputs.metrics.records_in);
            // Everything staged went out with the tick (each tail flushes
            // its outbox in its tick, and ticks run in edge order).
            PENDING.with(|p| p.set(false));
            paused_since_tick = false;
            if let Some(e) = error.take() {
                return Err(e);
            }
            if let Some(p) = live.as_mut().filter(|p| p.due(now)) {
                publish_live(p, now, &mut sources, &mut rx, &tx, &mut b.reporters);
            }
        }
        if sources.iter().all(|s| s.1) && rx.iter().all(|r| r.done) && !moves::owes_any() {
            break;
        }
        // Parks last until the next tick: one flush interval after the last
        // if something is staged, else the next idle grid point. With
        // something staged, a source due sooner (a paced source's next
        // batch) shortens the park, unless it is due within a quarter
        // interval of the tick (one wake-up for both); with nothing staged
        // sources wait for the grid point (paced events leave in bursts at
        // most one idle tick apart).
        let staged = pending();
        let tick_at = if staged || !paused_since_tick {
            last_flush + cfg.flush
        } else {
            grid_next
        };
        let mut deadline = tick_at;
        if !busy && staged {
            for (s, done) in &sources {
                if let Some(t) = s.next_due().filter(|_| !*done) {
                    if t + cfg.flush / 4 < tick_at {
                        deadline = deadline.min(t);
                    }
                }
            }
        }
        idler.after_loop(busy || frames > 0, deadline);
    }
    for t in tx.iter_mut() {
        t.publish()?;
        debug_assert!(t.ended());
    }
    if let Some(p) = live.as_mut() {
        publish_live(
            p,
            Instant::now(),
            &mut sources,
            &mut rx,
            &tx,
            &mut b.reporters,
        );
    }
    let mut stats = Stats::default();
    if held > 0 {
        stats.add("sources_held_for_alignment", held);
    }
    for (s, _) in sources.iter_mut() {
        s.report(&mut stats);
    }
    for f in b.reporters.iter_mut() {
        f(&mut stats);
    }
    let mut channels = ChannelMetrics::default();
    let mut records_in = Vec::with_capacity(rx.len());
    for r in rx.iter_mut() {
        r.consumer.report(&mut stats);
        channels.add(&r.inputs.metrics);
        records_in.push(r.inputs.metrics.records_in);
        let _ = stats.alignment.add(r.inputs.alignment());
        let given_up = r.inputs.alignments_given_up();
        if given_up > 0 {
            stats.add("checkpoint_alignments_given_up", given_up);
        }
    }
    if !stats.alignment.is_empty() {
        stats.add("checkpoint_alignments", stats.alignment.len());
    }
    let m = moves::figures();
    if m.moves > 0 {
        stats.add("key_group_moves", m.moves);
        stats.add("key_groups_moved", m.groups_given);
        stats.add("key_group_bytes_moved", m.bytes_sent);
        stats.max("key_group_move_paused_us", m.paused_ns / 1000);
    }
    if let Some(bytes) = restored_bytes {
        stats.add("checkpoint_restored_bytes", bytes);
        stats.max("checkpoint_restore_worker_us", restore_us);
    }
    if let Some((parts, bytes, skipped)) = state::end() {
        stats.add("checkpoint_parts", parts);
        stats.add("checkpoint_part_bytes", bytes);
        stats.add("checkpoints_skipped", skipped);
        stats.max("state_slots", n_slots as u64);
    }
    for t in &tx {
        channels.add(&t.metrics);
    }
    if let Some(e) = SOURCE_ERROR.with(|s| s.borrow_mut().take()) {
        return Err(e);
    }
    let records_in_periods = periods.finish(&records_in);
    Ok(WorkerReport {
        index: me,
        placement: info.placement.clone(),
        channels,
        records_in,
        records_in_periods,
        stats,
        elapsed: start.elapsed(),
        stopped,
    })
}

/// Copies this worker's counters so far into its live-metrics blocks:
/// its operators report into the publisher's scratch counters (as they do
/// at the end of the job), its edges' channel counters and watermarks are
/// read as they are. At a tick, at most every `live::PUBLISH_EVERY`.
fn publish_live(
    p: &mut crate::live::Publisher,
    now: Instant,
    sources: &mut [(Box<dyn stream::SourceDriver>, bool)],
    rx: &mut [EdgeRx<'_>],
    tx: &[EdgeTx<'_>],
    reporters: &mut [stream::Reporter],
) {
    p.clear();
    for (s, _) in sources.iter_mut() {
        s.report(&mut p.scratch);
    }
    for f in reporters.iter_mut() {
        f(&mut p.scratch);
    }
    for r in rx.iter_mut() {
        r.consumer.report(&mut p.scratch);
    }
    let edges: Vec<crate::live::EdgeSample<'_>> = tx
        .iter()
        .zip(rx.iter())
        .map(|(t, r)| crate::live::EdgeSample {
            tx: &t.metrics,
            full_by_tier: t.full_by_tier,
            rx: &r.inputs.metrics,
            watermark_ms: r.inputs.watermark(),
            occupancy: r.inputs.occupancy(),
        })
        .collect();
    p.publish(now, &edges);
}

#[cfg(test)]
mod tests;
