//! A job: W worker threads, each running the whole dataflow for its shard,
//! connected all-to-all by channels, one independent set per exchange edge
//! ([`run_workers`]; the graph API's [`crate::dataflow::run_graph`] runs on
//! it). No coordinator, no scheduler thread, no shared queue.

use crate::channel::thread_channel;
use crate::channel::{ChannelRx, ChannelTx};
use crate::placement;
use crate::plan::{ChannelPlan, Created, JobShape};
use crate::topology::{Slot, WorkerPlacement};
use crate::RuntimeError;
use air_shm::{Bell, Doorbells, Producer, Ticket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

/// Shape of a job on one process.
#[derive(Debug, Clone)]
pub struct JobConfig {
    /// Worker threads (default: one per physical core this process may use).
    pub workers: usize,
    /// Capacity of each channel's ring, bytes (W² rings per process): the
    /// largest, when [`JobConfig::ring_budget`] is set.
    pub ring_bytes: usize,
    /// Per-node ring budget, bytes: `Some(b)` scales every ring down (same
    /// size for every edge of one kind, a multiple of 4 KiB, at least 64
    /// KiB) until the busiest node's rings, windows and network read
    /// buffers fit
    /// in `b` ([`crate::plan::fit_ring_budget`]); a job that fits at
    /// `ring_bytes` keeps it. `None`: `ring_bytes` is taken as given.
    /// Default: [`crate::plan::RING_BUDGET_BYTES`] (1 GiB); `air run
    /// --ring-bytes` and `AIR_RING_BYTES` set `None`.
    pub ring_budget: Option<u64>,
    /// Staged batches are pushed at least this often, and watermarks are
    /// sent at most this often (`--flush-us`). A worker with nothing staged
    /// ticks only at the next point of the idle grid
    /// ([`crate::dataflow::IDLE_TICK`], 10 ms, or this if longer). A worker
    /// that wakes from a park within a quarter interval of its next tick
    /// runs the tick then (so ticks are at least ¾ of this apart), and a
    /// paced source due that close before the tick waits for it: one
    /// wake-up for both.
    pub flush: Duration,
    /// Records per staged batch (a full batch is pushed at once).
    pub batch_records: usize,
    /// Pin worker `w` to its planned CPU.
    pub pin: bool,
    /// Plan on SMT siblings too (after one PU of every core), `--smt`.
    pub smt: bool,
    /// Validate every received batch with rkyv in release builds too
    /// (`--validate`; debug builds always do).
    pub validate: bool,
    /// Key groups of the job (`--max-parallelism`; default
    /// [`crate::keygroups::DEFAULT_KEY_GROUPS`]): keys hash to one of
    /// these, groups go to workers in even ranges ([`crate::keygroups`]).
    /// Fixed for the life of a job's state; at least the job's workers
    /// (all ranks), at most [`crate::keygroups::MAX_KEY_GROUPS`].
    pub key_groups: u32,
    /// Checkpoint barriers: every source places barrier `n` at its first
    /// flush tick once `n` intervals passed since its worker started, and
    /// they travel in-band through every edge, aligned at every operator
    /// (docs/design.md, "Checkpoints"). `None` (default): no barriers.
    /// State is not written at barriers yet: this is the protocol alone.
    pub barrier_every: Option<Duration>,
    /// Checkpoints written at the barriers (`--checkpoint-dir`): each
    /// worker's state goes to `DIR/chk-n/`, and a job started with a
    /// complete checkpoint in `DIR` resumes from it
    /// ([`crate::dataflow::state`]). Needs `barrier_every`. `None`
    /// (default): barriers carry no state.
    pub checkpoint: Option<crate::dataflow::CheckpointConfig>,
    /// Watermark alignment of sources (Flink's `maxAllowedWatermarkDrift`,
    /// without its coordinator): a source does not read on while its
    /// watermark is more than this many ms of event time ahead of the
    /// slowest watermark its worker receives on an edge fed by sources
    /// only (the minimum over every worker's sources of that edge, so every
    /// worker sees the job's slowest source without asking anyone). This
    /// bounds what windows and joins downstream keep when some workers'
    /// sources run ahead of others' (NEXMark q8 at 2 workers kept 15 MB of
    /// join state per worker without it, 0.2 MB with 10 s). Too small a
    /// drift stalls sources between watermark ticks: keep it well above
    /// the event time a source reads in one flush interval. `None`
    /// (default): sources run free.
    pub max_watermark_drift: Option<u64>,
    /// Hot keys (`--rebalance`, [`crate::hotkeys`]): senders of an
    /// aggregate keep the records of hot key groups and send their owners
    /// partials instead. Default: on, judged every 100 ms.
    pub rebalance: crate::hotkeys::Rebalance,
    /// Run across the ranks of an MPI job (`None`: this process alone).
    pub cluster: Option<ClusterConfig>,
}

#[cfg(feature = "mpi")]
pub use crate::cluster::ClusterConfig;

/// Where a job runs across MPI ranks. Without the `mpi` feature there is no
/// such place: this type has no values, and `JobConfig::cluster` is `None`.
#[cfg(not(feature = "mpi"))]
#[derive(Debug, Clone)]
pub enum ClusterConfig {}

impl Default for JobConfig {
    fn default() -> Self {
        JobConfig {
            workers: placement::default_workers(false),
            ring_bytes: 1 << 20,
            ring_budget: Some(crate::plan::RING_BUDGET_BYTES),
            flush: Duration::from_micros(1000),
            batch_records: 1024,
            pin: true,
            smt: false,
            validate: false,
            key_groups: crate::keygroups::DEFAULT_KEY_GROUPS,
            barrier_every: None,
            checkpoint: None,
            max_watermark_drift: None,
            rebalance: crate::hotkeys::Rebalance::default(),
            cluster: None,
        }
    }
}

/// Who a worker is.
#[derive(Debug, Clone)]
pub struct WorkerInfo {
    /// Global worker index (0-based): `rank * workers_per_rank + local`.
    pub index: usize,
    /// Number of workers in the job (all ranks).
    pub workers: usize,
    /// The CPU (OS number) it is pinned to by the placement plan, if pinned.
    pub core: Option<usize>,
    /// Where it runs (plan) and where its input rings' memory is (measured).
    pub placement: WorkerPlacement,
    /// Its doorbell: producers of its thread- and node-tier input rings ring
    /// it when they publish while it is parked (`None`: it naps instead).
    pub doorbell: Option<Bell>,
    /// The job's key groups (`JobConfig::key_groups`).
    pub key_groups: u32,
    /// The job's hot-key handling (`JobConfig::rebalance`).
    pub rebalance: crate::hotkeys::Rebalance,
}

/// What one step of a source (or a worker's graph) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// It did work; call again.
    Busy,
    /// Nothing to do right now (e.g. a paced source ahead of its schedule).
    Idle,
    /// The source is exhausted.
    Done,
}

/// How a job's workers get their channels: which of the job's workers run
/// in this process, and for each of them its receiving ends (from every
/// worker of the job) and its sending ends (to every worker of the job), both
/// indexed by global worker. The runtime never looks at a channel's tier.
pub(crate) trait Wiring: Sync {
    /// Global index of this process's first worker.
    fn first(&self) -> usize;
    /// Workers in the whole job.
    fn total(&self) -> usize;
    /// Workers in this process.
    fn local(&self) -> usize;
    /// Processes of the job on this node.
    fn ranks_on_node(&self) -> usize {
        1
    }
    /// This process's index among them.
    fn local_rank(&self) -> usize {
        0
    }
    /// Local worker `local`'s doorbell, which the producers of its thread-
    /// and node-tier input rings ring.
    fn doorbell(&self, local: usize) -> Option<Bell> {
        let _ = local;
        None
    }
    /// Phase 1, on local worker `local`'s thread (so ring pages are first
    /// touched there): its receiving ends of exchange edge `edge`, one per
    /// global source worker.
    fn inputs<'s>(
        &'s self,
        edge: usize,
        local: usize,
    ) -> Result<Vec<Box<dyn ChannelRx + 's>>, RuntimeError>;
    /// Between the phases, called by one local worker once every local
    /// worker finished phase 1 (e.g. a barrier across ranks), with the
    /// first phase-1 error of this process's workers, if any. `Err` stops
    /// every local worker before phase 2 with that error. Under MPI it is
    /// collective and every rank gets the same verdict
    /// ([`RuntimeError::Refused`], naming the first rank that failed), so
    /// no worker waits for a ring a failed worker will never make. Alone,
    /// phase 2 finds the missing rings at once: `Ok`.
    fn between(&self, failed: Option<String>) -> Result<(), RuntimeError> {
        let _ = failed;
        Ok(())
    }
    /// Phase 2: local worker `local`'s sending ends of exchange edge `edge`,
    /// one per global destination worker.
    fn outputs<'s>(
        &'s self,
        edge: usize,
        local: usize,
    ) -> Result<Vec<Box<dyn ChannelTx + 's>>, RuntimeError>;
}

/// Thread-tier rings between the workers of one process, per exchange edge:
/// each is created by its consumer (phase 1), whose producer end waits here
/// for its sender.
pub(crate) struct ThreadSlots {
    /// `slots[edge][from][to]`, local worker indices.
    slots: Mutex<Vec<Vec<Vec<Option<Producer>>>>>,
    /// Ring capacity of each edge, bytes.
    ring_bytes: Vec<usize>,
    /// Rings created so far.
    pub(crate) created: AtomicU64,
    /// The doorbells of this process's workers (in process memory, or in
    /// this rank's doorbell segment under MPI).
    bells: Doorbells,
}

impl ThreadSlots {
    /// Slots for `workers` local workers whose doorbells are `bells`.
    pub(crate) fn new(ring_bytes: &[usize], workers: usize, bells: Doorbells) -> ThreadSlots {
        ThreadSlots {
            slots: Mutex::new(
                (0..ring_bytes.len())
                    .map(|_| {
                        (0..workers)
                            .map(|_| (0..workers).map(|_| None).collect())
                            .collect()
                    })
                    .collect(),
            ),
            ring_bytes: ring_bytes.to_vec(),
            created: AtomicU64::new(0),
            bells,
        }
    }

    /// Local worker `local`'s doorbell.
    pub(crate) fn bell(&self, local: usize) -> Bell {
        self.bells.bell(local)
    }

    /// Creates the ring of `edge` from local worker `from` to local worker
    /// `to` (on `to`'s thread) and returns its consumer.
    pub(crate) fn create(
        &self,
        edge: usize,
        from: usize,
        to: usize,
    ) -> Result<air_shm::Consumer, air_shm::ShmError> {
        let (mut p, c) = thread_channel(self.ring_bytes[edge])?;
        self.created.fetch_add(1, Ordering::Relaxed);
        p.set_doorbell(self.bells.bell(to));
        self.slots.lock().unwrap_or_else(|e| e.into_inner())[edge][from][to] = Some(p);
        Ok(c)
    }

    /// Takes the producer of the ring of `edge` from local `from` to local `to`.
    pub(crate) fn take(&self, edge: usize, from: usize, to: usize) -> Option<Producer> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())[edge][from][to].take()
    }
}

/// One process, thread tier only.
struct LocalWiring {
    workers: usize,
    slots: ThreadSlots,
    /// (processes on this node, this one's index) when a launcher (SLURM)
    /// started several unbound copies on one node: they split its cores.
    share: (usize, usize),
}

impl Wiring for LocalWiring {
    fn first(&self) -> usize {
        0
    }
    fn total(&self) -> usize {
        self.workers
    }
    fn local(&self) -> usize {
        self.workers
    }
    fn ranks_on_node(&self) -> usize {
        self.share.0
    }
    fn local_rank(&self) -> usize {
        self.share.1
    }
    fn doorbell(&self, local: usize) -> Option<Bell> {
        Some(self.slots.bell(local))
    }
    fn inputs<'s>(
        &'s self,
        edge: usize,
        me: usize,
    ) -> Result<Vec<Box<dyn ChannelRx + 's>>, RuntimeError> {
        let mut rx: Vec<Box<dyn ChannelRx + 's>> = Vec::with_capacity(self.workers);
        for from in 0..self.workers {
            let c = self
                .slots
                .create(edge, from, me)
                .map_err(|e| RuntimeError::channel(from, me, e))?;
            rx.push(Box::new(c));
        }
        Ok(rx)
    }
    fn outputs<'s>(
        &'s self,
        edge: usize,
        me: usize,
    ) -> Result<Vec<Box<dyn ChannelTx + 's>>, RuntimeError> {
        (0..self.workers)
            .map(|to| match self.slots.take(edge, me, to) {
                Some(p) => Ok(Box::new(p) as Box<dyn ChannelTx + 's>),
                None => Err(missing_channel(me, to)),
            })
            .collect()
    }
}

pub(crate) fn missing_channel(from: usize, to: usize) -> RuntimeError {
    RuntimeError::MissingChannel { from, to }
}

/// One worker's channels of one exchange edge, both indexed by global
/// worker: its receiving ends (one from every worker of the job) and its
/// sending ends (one to every worker of the job).
pub struct EdgeChannels<'c> {
    /// Receiving ends, by source worker.
    pub rx: Vec<Box<dyn ChannelRx + 'c>>,
    /// Sending ends, by destination worker.
    pub tx: Vec<Box<dyn ChannelTx + 'c>>,
}

/// Runs `cfg.workers` worker threads per process (across every rank of the
/// MPI job with `cfg.cluster`), joined all-to-all by one independent set
/// of channels per exchange edge, `edges[e]` being edge `e`'s ring
/// capacity in bytes (one ring per (edge, sender, receiver); no two edges
/// share a ring). Each worker is pinned by the placement plan, creates its
/// receiving rings on its own thread (first touch), and then runs `body`
/// with its [`WorkerInfo`] and its channels of every edge (in edge order).
/// Returns this process's workers' results in worker order, or the root
/// cause of the first failure (a panic, a setup or batch error before a
/// peer's "channel closed").
///
/// # Errors
/// [`RuntimeError::Setup`] when the rings would not fit in memory (more
/// than half of `MemAvailable`) or, under MPI, in `/dev/shm`; whatever a
/// worker's `body` returns.
pub fn run_workers<R, B>(cfg: &JobConfig, edges: &[usize], body: B) -> Result<Vec<R>, RuntimeError>
where
    R: Send,
    B: for<'c> Fn(&WorkerInfo, Vec<EdgeChannels<'c>>) -> Result<R, RuntimeError> + Sync,
{
    run_workers_signed(cfg, edges, 0, body)
}

/// [`run_workers`] for a job whose every rank must agree on `signature`
/// (e.g. a hash of the graph's edges and their record types): under MPI,
/// ranks that disagree refuse to start.
///
/// # Errors
/// As [`run_workers`]; [`RuntimeError::Setup`] when ranks disagree.
pub fn run_workers_signed<R, B>(
    cfg: &JobConfig,
    edges: &[usize],
    signature: u64,
    body: B,
) -> Result<Vec<R>, RuntimeError>
where
    R: Send,
    B: for<'c> Fn(&WorkerInfo, Vec<EdgeChannels<'c>>) -> Result<R, RuntimeError> + Sync,
{
    run_workers_counted(cfg, edges, signature, body).map(|(out, _)| out)
}

/// [`run_workers_signed`], also returning what this process's channel
/// setup made ([`Created`]: rings, segments, window bytes).
///
/// # Errors
/// As [`run_workers_signed`].
pub fn run_workers_counted<R, B>(
    cfg: &JobConfig,
    edges: &[usize],
    signature: u64,
    body: B,
) -> Result<(Vec<R>, Created), RuntimeError>
where
    R: Send,
    B: for<'c> Fn(&WorkerInfo, Vec<EdgeChannels<'c>>) -> Result<R, RuntimeError> + Sync,
{
    run_workers_agreed(
        cfg,
        edges,
        &[("the graph's edges and their record types", signature)],
        body,
    )
}

/// [`run_workers_counted`] where every rank must agree on each value of
/// `agree` (what it is, its value): ranks that disagree refuse to start,
/// naming it.
///
/// # Errors
/// As [`run_workers_signed`].
pub(crate) fn run_workers_agreed<R, B>(
    cfg: &JobConfig,
    edges: &[usize],
    agree: &[(&'static str, u64)],
    body: B,
) -> Result<(Vec<R>, Created), RuntimeError>
where
    R: Send,
    B: for<'c> Fn(&WorkerInfo, Vec<EdgeChannels<'c>>) -> Result<R, RuntimeError> + Sync,
{
    let _ = agree;
    if let Some(cluster) = &cfg.cluster {
        #[cfg(feature = "mpi")]
        return crate::cluster::run(cfg, cluster, edges, agree, body);
        #[cfg(not(feature = "mpi"))]
        match *cluster {}
    }
    let w = cfg.workers.max(1);
    // E·W² rings, each touched up front: refuse what the machine cannot hold.
    job_plan(cfg, edges)
        .check_here()
        .map_err(RuntimeError::refusal)?;
    let share = cfg
        .pin
        .then(placement::topology)
        .flatten()
        .and_then(placement::launcher_share)
        .unwrap_or((1, 0));
    let wiring = LocalWiring {
        workers: w,
        slots: ThreadSlots::new(edges, w, Doorbells::new(w)),
        share,
    };
    let out = run_wired(cfg, &wiring, edges.len(), body)?;
    let created = Created {
        thread_rings: wiring.slots.created.load(Ordering::Relaxed),
        ..Created::default()
    };
    Ok((out, created))
}

/// The shape of the job `cfg` describes with exchange edges of ring
/// capacities `edges` (bytes): this process alone, or every rank of its
/// MPI job (`cfg.cluster`).
pub fn job_shape(cfg: &JobConfig, edges: &[usize]) -> JobShape {
    if let Some(cluster) = &cfg.cluster {
        #[cfg(feature = "mpi")]
        return crate::cluster::job_shape(cfg, cluster, edges);
        #[cfg(not(feature = "mpi"))]
        match *cluster {}
    }
    JobShape {
        flush: cfg.flush,
        ..JobShape::uniform(1, 1, cfg.workers, edges)
    }
}

/// The channel figures of this process's rank (and its node) in the job
/// `cfg` describes ([`job_shape`]).
pub fn job_plan(cfg: &JobConfig, edges: &[usize]) -> ChannelPlan {
    let rank = match &cfg.cluster {
        #[cfg(feature = "mpi")]
        Some(c) => c.mpi.rank(),
        #[cfg(not(feature = "mpi"))]
        Some(c) => match *c {},
        None => 0,
    };
    ChannelPlan::for_rank(&job_shape(cfg, edges), rank)
}

/// Runs this process's workers over `wiring`.
pub(crate) fn run_wired<R, B, G>(
    cfg: &JobConfig,
    wiring: &G,
    edges: usize,
    body: B,
) -> Result<Vec<R>, RuntimeError>
where
    R: Send,
    B: for<'c> Fn(&WorkerInfo, Vec<EdgeChannels<'c>>) -> Result<R, RuntimeError> + Sync,
    G: Wiring,
{
    let w = wiring.local();
    let barrier = Barrier::new(w);
    let setup = SetupVerdict::default();
    // The placement plan, computed once, before any thread is pinned.
    let plan = cfg
        .pin
        .then(|| placement::plan(w, wiring.ranks_on_node(), wiring.local_rank(), cfg.smt));
    if let Some(p) = &plan {
        tracing::debug!(
            "placement plan (local rank {} of {} on this node, topology {}): {:?}",
            wiring.local_rank(),
            wiring.ranks_on_node(),
            placement::topology().map_or("unknown", |t| t.source),
            p.slots
        );
        // Each process has its own plan (its own share of the node): each
        // says what is wrong with its own.
        for warning in &p.warnings {
            if wiring.ranks_on_node() > 1 {
                tracing::warn!("local rank {}: {warning}", wiring.local_rank());
            } else {
                tracing::warn!("{warning}");
            }
        }
    }
    // Without a plan (--no-pin), workers outnumbering the CPUs are as
    // oversubscribed as a plan's: said the same way.
    let unpinned_shared = (!cfg.pin)
        .then(|| placement::unpinned_oversubscription(w, wiring.ranks_on_node()))
        .flatten();
    if let Some(warning) = &unpinned_shared {
        if wiring.ranks_on_node() > 1 {
            tracing::warn!("local rank {}: {warning}", wiring.local_rank());
        } else {
            tracing::warn!("{warning}");
        }
    }
    let unpinned_shared = unpinned_shared.is_some();
    let plan = plan.as_ref();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..w)
            .map(|me| {
                let barrier = (&barrier, &setup);
                let body = &body;
                std::thread::Builder::new()
                    .name(format!("air-w{}", wiring.first() + me))
                    .spawn_scoped(s, move || {
                        let slot = plan.and_then(|p| p.slots.get(me)).copied();
                        let shared = plan.is_some_and(|p| p.oversubscribed) || unpinned_shared;
                        worker((slot, shared), me, wiring, (edges, cfg), barrier, body)
                    })
                    .expect("spawn worker thread")
            })
            .collect();
        let mut out = Vec::with_capacity(w);
        let mut first_err: Option<RuntimeError> = None;
        for (i, h) in handles.into_iter().enumerate() {
            match h.join() {
                Ok(Ok(o)) => out.push(o),
                Ok(Err(e)) => {
                    // A peer's closed ring or missing channel is a
                    // consequence; keep the first cause (a batch too large,
                    // a bad batch, a ring that could not be created).
                    let replace = match &first_err {
                        None => true,
                        Some(old) => old.is_consequence() && !e.is_consequence(),
                    };
                    if replace {
                        first_err = Some(e);
                    }
                }
                Err(p) => {
                    let msg = p
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| "panic".into());
                    // A panic is the root cause; prefer it over its peers' channel errors.
                    first_err = Some(RuntimeError::WorkerPanicked {
                        worker: wiring.first() + i,
                        message: msg,
                    });
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(out),
        }
    })
}

/// What a process's workers learn between the two setup phases: the first
/// phase-1 error among them, and the job's verdict.
#[derive(Default)]
struct SetupVerdict {
    /// The first phase-1 (ring creation) error of a local worker.
    failed: Mutex<Option<String>>,
    /// Set by the leader when [`Wiring::between`] stopped the job.
    refused: std::sync::OnceLock<String>,
}

fn worker<R, B, G>(
    (slot, shared): (Option<Slot>, bool),
    local: usize,
    wiring: &G,
    (edges, cfg): (usize, &JobConfig),
    (barrier, setup): (&Barrier, &SetupVerdict),
    body: &B,
) -> Result<R, RuntimeError>
where
    B: for<'c> Fn(&WorkerInfo, Vec<EdgeChannels<'c>>) -> Result<R, RuntimeError> + Sync,
    G: Wiring,
{
    let me = wiring.first() + local;
    let core = slot.and_then(|s| placement::pin_current_to(s.pu));
    // This worker consumes one ring from every worker: create them here so
    // their pages are first touched on this worker's CPU (its NUMA node).
    let rx: Result<Vec<_>, RuntimeError> = (0..edges).map(|e| wiring.inputs(e, local)).collect();
    let mut input_rings_numa: Vec<usize> = rx
        .as_ref()
        .map(|rx| rx.iter().flatten().filter_map(|r| r.numa_node()).collect())
        .unwrap_or_default();
    input_rings_numa.sort_unstable();
    input_rings_numa.dedup();
    if let Err(e) = &rx {
        let mut first = setup.failed.lock().unwrap_or_else(|p| p.into_inner());
        first.get_or_insert_with(|| e.to_string());
    }
    if barrier.wait().is_leader() {
        let failed = setup
            .failed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Err(e) = wiring.between(failed) {
            let _ = setup.refused.set(match e {
                RuntimeError::Refused(m) => m,
                e => e.to_string(),
            });
        }
    }
    barrier.wait();
    if let Some(m) = setup.refused.get() {
        // Every worker of the job stops here, before opening any ring.
        return Err(RuntimeError::Refused(m.clone()));
    }
    let rx = rx?;
    let mut channels = Vec::with_capacity(edges);
    for (e, rx) in rx.into_iter().enumerate() {
        let tx = wiring.outputs(e, local)?;
        channels.push(EdgeChannels { rx, tx });
    }
    let info = WorkerInfo {
        index: me,
        workers: wiring.total(),
        core,
        placement: WorkerPlacement {
            pu: core,
            core: slot.map(|s| s.core),
            package: slot.map(|s| s.package),
            numa: slot.and_then(|s| s.numa),
            input_rings_numa,
            oversubscribed: shared,
        },
        doorbell: wiring.doorbell(local),
        key_groups: cfg.key_groups,
        rebalance: cfg.rebalance,
    };
    body(&info, channels)
}

/// How a worker waits when its loop found nothing to do: spin briefly,
/// then yield, then park on its doorbell until a producer publishes into one
/// of its rings or its next deadline (flush tick, a source's due time).
///
/// Parking takes two loops: the first idle loop past the yields announces
/// the park ([`Bell::prepare`]) and the worker polls everything once more;
/// if that loop finds nothing either, it sleeps on the ticket it took
/// ([`Bell::park`]), so a frame published in between is never missed (see
/// `air_shm::doorbell`). Without a doorbell it naps (≤ 100 µs) instead.
///
/// A worker woken from a park that finds a little work (a watermark, one
/// batch) parks again without spinning or yielding: only work in two loops
/// in a row brings the spin phase back. An idle job's workers thus pay a
/// few loops per wake-up, not forty.
pub(crate) struct Idler {
    /// Idle loops in a row (reset by sustained work).
    idle: u32,
    /// Loops with work in a row.
    streak: u32,
    /// Parked since the last sustained work: park again at once.
    quick: bool,
    /// The last loop ended in a park (its wake-up may run the flush tick
    /// early, see [`Idler::just_woke`]).
    woke: bool,
    bell: Option<Bell>,
    /// Set between the announcing loop and the park.
    ticket: Option<Ticket>,
    /// Parks taken (futex waits), for reports.
    pub(crate) parks: u64,
}

impl Idler {
    pub(crate) fn new(bell: Option<Bell>) -> Idler {
        Idler {
            idle: 0,
            streak: 0,
            quick: false,
            woke: false,
            bell,
            ticket: None,
            parks: 0,
        }
    }

    /// Whether the loop about to run follows a park (so an imminent flush
    /// tick may run now rather than cost a wake-up of its own).
    #[inline]
    pub(crate) fn just_woke(&self) -> bool {
        self.woke
    }

    /// After one loop: `worked` says whether it did anything; `deadline`
    /// is when the worker must run again whatever arrives.
    #[inline]
    pub(crate) fn after_loop(&mut self, worked: bool, deadline: Instant) {
        self.woke = false;
        if worked {
            self.streak += 1;
            if self.streak >= 2 {
                self.idle = 0;
                self.quick = false;
            }
            if self.ticket.take().is_some() {
                if let Some(b) = &self.bell {
                    b.cancel();
                }
            }
            return;
        }
        self.streak = 0;
        if let (Some(t), Some(b)) = (self.ticket.take(), &self.bell) {
            let now = Instant::now();
            b.park(t, deadline.saturating_duration_since(now));
            self.parks += 1;
            self.quick = true;
            self.woke = true;
            return;
        }
        self.idle = self.idle.saturating_add(1);
        if self.quick || self.idle >= 40 {
            if let Some(b) = &self.bell {
                self.ticket = Some(b.prepare());
            } else {
                let now = Instant::now();
                std::thread::sleep(
                    deadline
                        .saturating_duration_since(now)
                        .min(Duration::from_micros(100)),
                );
            }
        } else if self.idle < 32 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// `MemAvailable` from `/proc/meminfo`, in bytes (Linux), if readable.
pub fn available_memory() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = s.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
