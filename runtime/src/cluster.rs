//! A job across the ranks of an MPI job (feature `mpi`): `P` ranks × `W`
//! workers, global worker `g = rank * W + w`, workers joined by channels of
//! the tier their placement allows (`docs/channels.md`):
//!
//! | between | tier | channel |
//! |---|---|---|
//! | workers of one rank | thread | a ring in process memory |
//! | ranks of one node (`MPI_COMM_TYPE_SHARED`) | node | a ring in a `/dev/shm` segment, created by the consumer, named `air-<uid>-<job>-g<from>-g<to>` with the job id agreed over MPI, unlinked as soon as the producer opens it |
//! | ranks of different nodes, or any two ranks with `force_network` | network | a remote ring in the sender's RMA window per (edge, sending rank, receiving worker), which the sending rank's workers share ([`air_rdma::RmaOutbox`]) and the receiver pulls with `MPI_Rget` |
//!
//! Each rank allocates one window: heartbeats, then one ring region per
//! outgoing network ring (edge, peer rank, worker of the peer), then one
//! credit slot per incoming network ring (edge, peer rank, worker of this
//! rank). Every rank computes every other rank's layout from the same
//! numbers (ranks, tiers, `W`, ring size), which are checked to agree first.
//! Two threads per rank notice lost ranks (see [`air_rdma::Liveness`]).
//!
//! Before anything is made, the ranks agree on whether the job fits (ring
//! capacity, memory, `/dev/shm` after local rank 0 removed stale segments
//! and a barrier): a refusal is [`RuntimeError::Refused`] on every rank at
//! once, and MPI stays usable. After any other error the job's ranks are
//! in no state for collective teardown: the window is leaked, and the
//! caller must end the job with [`air_rdma::Mpi::abort`] (which `air`
//! does).

use crate::channel::{ChannelRx, ChannelTx, SharedRmaRx};
use crate::job::{
    missing_channel, run_wired, EdgeChannels, JobConfig, ThreadSlots, Wiring, WorkerInfo,
};
use crate::plan::{ChannelPlan, Created, JobShape};
use crate::RuntimeError;
use air_rdma::{
    ring_region_bytes, Epoch, Liveness, Mpi, RmaConsumer, RmaOutbox, RmaProducer, Window,
    CREDIT_BYTES,
};
use air_shm::{Bell, Doorbells, FrameRing, SegmentName, WaitPolicy};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Environment variable that emulates nodes of N ranks each (see
/// [`ClusterConfig::emulate_ranks_per_node`]).
pub const RANKS_PER_NODE_ENV: &str = crate::plan::RANKS_PER_NODE_ENV;

/// Environment variable that forces the network tier between ranks of one
/// node when set to `1` (as `--force-network` does).
pub const FORCE_NETWORK_ENV: &str = "AIR_FORCE_NETWORK";

/// How long a producer waits for its node-tier segment to appear.
const SEGMENT_TIMEOUT: Duration = Duration::from_secs(30);

/// After a rank is found lost, how long the job may take to fail on its own
/// before the watcher ends this rank (a blocking MPI call may never return).
const LOST_GRACE: Duration = Duration::from_secs(3);

/// Exit code of a rank ended by the watcher after a lost rank.
pub const EXIT_RANK_LOST: i32 = 3;

/// Where a job runs when it spans the ranks of an MPI job.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// This rank's MPI environment.
    pub mpi: Arc<Mpi>,
    /// Use the network tier (RMA) between ranks of one node too.
    pub force_network: bool,
    /// Emulate nodes of this many consecutive ranks (ranks `r` and `s` share
    /// a node only if `r / n == s / n` as well): several nodes on one
    /// machine, so every tier can be tested at once.
    pub emulate_ranks_per_node: Option<usize>,
}

pub use crate::plan::Tier;

/// The tier between a worker on rank `a` and one on rank `b`.
pub fn tier(c: &ClusterConfig, a: usize, b: usize) -> Tier {
    crate::plan::tier_between(
        a,
        b,
        c.mpi.node_of(a) == c.mpi.node_of(b),
        c.force_network,
        c.emulate_ranks_per_node,
    )
}

/// The shape of the job `cfg` describes across the ranks of `c.mpi`, with
/// exchange edges of ring capacities `edges` (bytes): what its channel
/// figures ([`ChannelPlan`]) are computed from.
pub fn job_shape(cfg: &JobConfig, c: &ClusterConfig, edges: &[usize]) -> JobShape {
    JobShape {
        node_of: (0..c.mpi.size()).map(|r| c.mpi.node_of(r)).collect(),
        force_network: c.force_network,
        emulate_ranks_per_node: c.emulate_ranks_per_node,
        flush: cfg.flush,
        ..JobShape::uniform(1, 1, cfg.workers, edges)
    }
}

/// Checks, before any segment exists, that the shared-memory directory
/// (`/dev/shm`) holds every node-tier segment of this node
/// ([`ChannelPlan::check_shm`]). Every rank of the node computes the same
/// figure; the free space each reads is its own (after the node's stale
/// segments were removed), so the caller agrees on the verdict across ranks.
///
/// # Errors
/// [`RuntimeError::Setup`] with the bytes needed and free.
fn check_node_shm(plan: &ChannelPlan) -> Result<(), RuntimeError> {
    if plan.memory_per_node.shm_segments == 0 {
        return Ok(());
    }
    let dir = air_shm::shm_dir();
    let free = air_shm::region::free_bytes(&dir).map_err(|e| RuntimeError::Setup(e.to_string()))?;
    plan.check_shm(&dir, free)
}

/// Byte layout of every rank's window part.
struct Layout {
    /// Bytes of one ring region of each exchange edge (each edge has its
    /// own rings).
    regions: Vec<usize>,
    workers: usize,
    heartbeats: usize,
    /// Per rank: the ranks it talks to over the network tier, ascending.
    net_peers: Vec<Vec<usize>>,
}

impl Layout {
    fn new(c: &ClusterConfig, shape: &JobShape) -> Layout {
        let p = c.mpi.size();
        Layout {
            regions: shape
                .edge_ring_bytes
                .iter()
                .map(|&b| ring_region_bytes(b))
                .collect(),
            workers: shape.workers,
            heartbeats: shape.heartbeat_area_bytes(),
            net_peers: (0..p)
                .map(|r| (0..p).filter(|&s| tier(c, r, s) == Tier::Network).collect())
                .collect(),
        }
    }

    fn peer_index(&self, rank: usize, peer: usize) -> usize {
        self.net_peers[rank]
            .binary_search(&peer)
            .expect("network peer in layout")
    }

    /// Network rings into rank `rank` (one per edge, remote peer rank and
    /// worker of `rank`), which is also the number of its outboxes (one per
    /// edge, peer and worker of the peer): its part holds the ring region of
    /// each outbox and the credit slot of each incoming ring.
    fn rings(&self, rank: usize) -> usize {
        self.regions.len() * self.net_peers[rank].len() * self.workers
    }

    /// Bytes of the ring regions of edges `..edge` in rank `rank`'s part.
    fn ring_area(&self, rank: usize, edge: usize) -> usize {
        let per_edge = self.net_peers[rank].len() * self.workers;
        self.regions[..edge].iter().map(|r| per_edge * r).sum()
    }

    /// Bytes of rank `rank`'s part.
    fn part_bytes(&self, rank: usize) -> usize {
        self.heartbeats + self.ring_area(rank, self.regions.len()) + self.rings(rank) * CREDIT_BYTES
    }

    /// Index of the ring of `edge` between rank `rank` and worker `worker`
    /// of rank `peer` (for a sender `rank`: its outbox to `peer`'s worker;
    /// for a receiver `rank`: the ring from `peer` into its worker), among
    /// `rank`'s rings: edge-major, then peer, then worker.
    fn ring_index(&self, edge: usize, rank: usize, peer: usize, worker: usize) -> usize {
        let peers = self.net_peers[rank].len();
        (edge * peers + self.peer_index(rank, peer)) * self.workers + worker
    }

    /// Where, in sender `send`'s part, the ring of `edge` from its workers
    /// to worker `to` of rank `dst` starts (the sender writes it; the
    /// receiver pulls from it).
    fn ring_disp(&self, edge: usize, send: usize, dst: usize, to: usize) -> usize {
        let i = self.peer_index(send, dst) * self.workers + to;
        self.heartbeats + self.ring_area(send, edge) + i * self.regions[edge]
    }

    /// Where, in receiver `recv`'s part, the credit slot of the ring of
    /// `edge` from the workers of rank `src` to worker `to` of `recv` is
    /// (the receiver writes it; the sender reads it when its ring looks
    /// full).
    fn credit_disp(&self, edge: usize, recv: usize, src: usize, to: usize) -> usize {
        self.heartbeats
            + self.ring_area(recv, self.regions.len())
            + self.ring_index(edge, recv, src, to) * CREDIT_BYTES
    }

    /// Index of sender `send`'s outbox of `edge` to worker `to` of rank
    /// `dst` among its outboxes.
    fn outbox_index(&self, edge: usize, send: usize, dst: usize, to: usize) -> usize {
        self.ring_index(edge, send, dst, to)
    }
}

struct MpiWiring<'e> {
    mpi: &'e Mpi,
    /// (processes sharing this node's CPUs, this process's index among them).
    split: (usize, usize),
    cluster: &'e ClusterConfig,
    layout: Layout,
    slots: ThreadSlots,
    epoch: &'e Epoch<'e, 'e>,
    live: &'e Liveness,
    job: String,
    workers: usize,
    /// Ring capacity of each edge, bytes.
    ring_bytes: Vec<usize>,
    /// Node-tier segments created by this rank's workers.
    segments: AtomicU64,
    /// Network-tier rings this rank's workers consume.
    network: AtomicU64,
    /// This rank's network-tier outboxes, by [`Layout::outbox_index`]: the
    /// sending side of each ring into a remote worker, shared by this
    /// rank's workers.
    outboxes: Vec<RmaOutbox<'e>>,
    /// This rank's doorbells (in its doorbell segment when a rank of this
    /// node produces into its rings).
    bells: Doorbells,
    /// Per rank: its doorbells, opened from its segment, for the ranks this
    /// one reaches over the node tier.
    peer_bells: Vec<Option<Doorbells>>,
}

impl MpiWiring<'_> {
    fn segment(&self, edge: usize, from: usize, to: usize) -> SegmentName {
        SegmentName::new(&self.job, &format!("e{edge}-g{from}-g{to}"))
    }
}

impl Wiring for MpiWiring<'_> {
    fn first(&self) -> usize {
        self.mpi.rank() * self.workers
    }

    fn total(&self) -> usize {
        self.mpi.size() * self.workers
    }

    fn local(&self) -> usize {
        self.workers
    }

    fn ranks_on_node(&self) -> usize {
        self.split.0
    }

    fn local_rank(&self) -> usize {
        self.split.1
    }

    fn doorbell(&self, local: usize) -> Option<Bell> {
        Some(self.slots.bell(local))
    }

    fn inputs<'s>(
        &'s self,
        edge: usize,
        to: usize,
    ) -> Result<Vec<Box<dyn ChannelRx + 's>>, RuntimeError> {
        let me = self.mpi.rank();
        let dst = self.first() + to;
        let mut rx: Vec<Box<dyn ChannelRx + 's>> = Vec::with_capacity(self.total());
        for src in 0..self.total() {
            let (rank, from) = (src / self.workers, src % self.workers);
            let ch = |e: crate::channel::ChannelError| RuntimeError::channel(src, dst, e);
            let end: Box<dyn ChannelRx + 's> = match tier(self.cluster, rank, me) {
                Tier::Thread => Box::new(
                    self.slots
                        .create(edge, from, to)
                        .map_err(|e| ch(e.into()))?,
                ),
                Tier::Node => {
                    let ring = FrameRing::create_segment(
                        &self.segment(edge, src, dst),
                        self.ring_bytes[edge],
                    )
                    .map_err(|e| ch(e.into()))?;
                    self.segments.fetch_add(1, Ordering::Relaxed);
                    Box::new(
                        ring.consumer(WaitPolicy::default())
                            .map_err(|e| ch(e.into()))?,
                    )
                }
                Tier::Network if from > 0 => continue,
                Tier::Network => Box::new(SharedRmaRx {
                    rx: RmaConsumer::new(
                        self.epoch,
                        self.live,
                        rank,
                        self.layout.ring_disp(edge, rank, me, to),
                        self.ring_bytes[edge],
                        self.layout.credit_disp(edge, me, rank, to),
                    )
                    .map_err(|e| ch(e.into()))?,
                    senders: self.workers,
                }),
            };
            if tier(self.cluster, rank, me) == Tier::Network {
                self.network.fetch_add(1, Ordering::Relaxed);
            }
            rx.push(end);
        }
        Ok(rx)
    }

    fn between(&self, failed: Option<String>) -> Result<(), RuntimeError> {
        // Every rank has created its consumers (segments, ring regions), and
        // opened its node peers' doorbell segments before: the names can go.
        // The all-gather of the verdict is the barrier.
        let verdict = agree_to_run(
            self.mpi,
            failed.map_or(Ok(()), |m| Err(RuntimeError::Setup(m))),
        );
        self.bells.unlink();
        verdict
    }

    fn outputs<'s>(
        &'s self,
        edge: usize,
        from: usize,
    ) -> Result<Vec<Box<dyn ChannelTx + 's>>, RuntimeError> {
        let me = self.mpi.rank();
        let src = self.first() + from;
        let mut tx: Vec<Box<dyn ChannelTx + 's>> = Vec::with_capacity(self.total());
        for dst in 0..self.total() {
            let (rank, to) = (dst / self.workers, dst % self.workers);
            let ch = |e: crate::channel::ChannelError| RuntimeError::channel(src, dst, e);
            let end: Box<dyn ChannelTx + 's> = match tier(self.cluster, me, rank) {
                Tier::Thread => Box::new(
                    self.slots
                        .take(edge, from, to)
                        .ok_or_else(|| missing_channel(src, dst))?,
                ),
                Tier::Node => {
                    let ring =
                        FrameRing::open_segment(&self.segment(edge, src, dst), SEGMENT_TIMEOUT)
                            .map_err(|e| ch(e.into()))?;
                    let mut p = ring
                        .producer(WaitPolicy::default())
                        .map_err(|e| ch(e.into()))?;
                    if let Some(b) = &self.peer_bells[rank] {
                        p.set_doorbell(b.bell(to));
                    }
                    Box::new(p)
                }
                Tier::Network => Box::new(
                    self.outboxes[self.layout.outbox_index(edge, me, rank, to)].sender(from as u16),
                ),
            };
            tx.push(end);
        }
        Ok(tx)
    }
}

/// Counts of channels by tier that one rank's workers consume.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct TierCounts {
    /// Thread-tier channels.
    pub thread: usize,
    /// Node-tier channels.
    pub node: usize,
    /// Network-tier channels.
    pub network: usize,
}

/// The channels this rank's workers consume, by tier.
pub fn tier_counts(cluster: &ClusterConfig, workers: usize) -> TierCounts {
    let mpi = &cluster.mpi;
    let mut c = TierCounts::default();
    for r in 0..mpi.size() {
        let n = workers * workers;
        match tier(cluster, r, mpi.rank()) {
            Tier::Thread => c.thread += n,
            Tier::Node => c.node += n,
            // One ring per worker of this rank, shared by the peer's workers.
            Tier::Network => c.network += workers,
        }
    }
    c
}

/// Environment variable of the crash test hook: `<rank>:<ms>` makes that
/// rank end abruptly (`_exit(0)`, no MPI_Finalize) `ms` after its channels
/// are set up. For tests of lost-rank handling only.
pub const FAULT_EXIT_ENV: &str = "AIR_FAULT_EXIT";

fn fault_exit_after(rank: usize) -> Option<u64> {
    let v = std::env::var(FAULT_EXIT_ENV).ok()?;
    let (r, ms) = v.split_once(':')?;
    (r.trim().parse::<usize>().ok()? == rank).then_some(())?;
    ms.trim().parse().ok()
}

/// FNV-1a of a CPU list.
fn cpu_set_hash(cpus: &[usize]) -> u64 {
    cpus.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &c| {
        (h ^ c as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// How rank `me` shares its node's CPUs: (processes splitting them, its
/// index among them). Ranks of one node (`node_of`) whose CPU sets
/// (`masks`, one hash per rank) are all equal split them by local order;
/// if any differs, each rank was bound by its launcher and plans alone in
/// its own set.
pub fn cpu_split(masks: &[u64], node_of: &[usize], me: usize) -> (usize, usize) {
    let local: Vec<usize> = (0..masks.len())
        .filter(|&r| node_of[r] == node_of[me])
        .collect();
    if local.iter().all(|&r| masks[r] == masks[me]) {
        (
            local.len(),
            local.iter().position(|&r| r == me).unwrap_or(0),
        )
    } else {
        (1, 0)
    }
}

/// Every rank's own verdict on whether the job can run (`local`), made
/// one verdict they share (collective: every rank calls it once, at the
/// same step). If any rank refused, every rank returns
/// [`RuntimeError::Refused`]: rank 0 with the first refusing rank's own
/// message (prefixed with that rank when it is not 0), so that it can be
/// printed once; the other ranks with their own, or one naming that rank.
fn agree_to_run(mpi: &Mpi, local: Result<(), RuntimeError>) -> Result<(), RuntimeError> {
    let refused = mpi.all_gather_u64(u64::from(local.is_err()));
    let Some(first) = refused.iter().position(|&r| r != 0) else {
        return Ok(());
    };
    let mine = local.err().map(|e| match e {
        RuntimeError::Setup(m) | RuntimeError::Refused(m) => m,
        e => e.to_string(),
    });
    let said = mpi.gather_bytes(0, mine.as_deref().unwrap_or_default().as_bytes());
    let msg = match said {
        Ok(Some(all)) => {
            let m = String::from_utf8_lossy(&all[first]).into_owned();
            if first == 0 {
                m
            } else {
                format!("rank {first}: {m}")
            }
        }
        _ => mine.unwrap_or_else(|| format!("rank {first} refused the job")),
    };
    Err(RuntimeError::Refused(msg))
}

/// Runs this rank's share of a job across every rank of `cluster.mpi`
/// (collective: every rank calls it with the same `cfg.workers`,
/// `cfg.ring_bytes` and `edges`).
pub(crate) fn run<R, B>(
    cfg: &JobConfig,
    cluster: &ClusterConfig,
    edges: &[usize],
    agree: &[(&'static str, u64)],
    body: B,
) -> Result<(Vec<R>, Created), RuntimeError>
where
    R: Send,
    B: for<'c> Fn(&WorkerInfo, Vec<EdgeChannels<'c>>) -> Result<R, RuntimeError> + Sync,
{
    let mpi = &*cluster.mpi;
    let w = cfg.workers.max(1);
    // Every rank must agree on the numbers the layout is computed from.
    for (what, v) in [
        ("--workers", w as u64),
        ("--ring-bytes", cfg.ring_bytes as u64),
        ("the exchange edges of the graph", edges.len() as u64),
        (
            "the graph's ring sizes",
            edges.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
                (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
            }),
        ),
    ]
    .into_iter()
    .chain(agree.iter().copied())
    {
        // Every rank sees the same gathered values: all refuse together.
        let all = mpi.all_gather_u64(v);
        if all.iter().any(|&x| x != v) {
            return Err(RuntimeError::Refused(format!(
                "ranks disagree on {what}: {all:?} (every rank must run the same command)"
            )));
        }
    }
    // What this rank alone can tell about the job: whether it fits. The
    // figures are the same on every rank, but the free memory each reads
    // is its own; every rank takes the same collective steps below
    // whatever it finds, and the verdict is agreed before anyone acts.
    let mut fits = edges.iter().try_for_each(|&b| {
        air_rdma::ring::check_capacity(b).map_err(|e| RuntimeError::Setup(e.to_string()))
    });
    // This node's rings, segments and windows (air plan's figures): refuse
    // what the machine cannot hold.
    let shape = job_shape(cfg, cluster, edges);
    let plan = ChannelPlan::for_rank(&shape, mpi.rank());
    if fits.is_ok() {
        if let Some(avail) = crate::job::available_memory() {
            fits = plan.check_memory(avail);
        }
    }
    if fits.is_ok() && w > u16::MAX as usize + 1 {
        // Frame headers of a shared network ring name the sender in 16 bits.
        fits = Err(RuntimeError::Setup(format!(
            "{w} workers per rank: at most {} under MPI",
            u16::MAX as usize + 1
        )));
    }
    if mpi.local_rank() == 0 {
        // Segments of this user that no live process holds (a job killed
        // while it set up its channels leaves some): removed before this
        // job makes its own. Live jobs' and other users' are left alone.
        match air_shm::clean_stale(&air_shm::shm_dir(), false) {
            Ok(found) => {
                let n = found
                    .iter()
                    .filter(|(_, o)| *o == air_shm::CleanOutcome::Removed)
                    .count();
                if n > 0 {
                    // Said (a warning shows by default): whoever wonders
                    // where /dev/shm space went, or came from, learns it.
                    tracing::warn!(
                        "removed {n} stale shared-memory segment(s) of dead jobs from {} (as \
                         `air shm clean` does)",
                        air_shm::shm_dir().display()
                    );
                }
            }
            Err(e) => tracing::warn!("cleaning stale segments: {e}"),
        }
    }
    // The cleanup happens-before every rank's look at the free space of
    // /dev/shm (a dead job's segment would otherwise still count).
    mpi.barrier();
    if fits.is_ok() {
        fits = check_node_shm(&plan);
    }
    agree_to_run(mpi, fits)?;
    let nonce = if mpi.rank() == 0 {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        t ^ ((std::process::id() as u64) << 40)
    } else {
        0
    };
    // Segment names must agree across ranks: rank 0's nonce names the job.
    let job = format!("mpi{:x}", mpi.broadcast_u64(0, nonce));
    let layout = Layout::new(cluster, &shape);
    let setup = |e: air_rdma::RdmaError| RuntimeError::Setup(e.to_string());
    // The window is the size the plan says; the layout must fill it exactly.
    let window_bytes = plan.window_per_rank.bytes as usize;
    if layout.part_bytes(mpi.rank()) != window_bytes {
        return Err(RuntimeError::Setup(format!(
            "window layout of {} bytes, planned {window_bytes} (a bug)",
            layout.part_bytes(mpi.rank())
        )));
    }
    let window = Window::allocate(mpi, window_bytes).map_err(setup)?;
    let epoch = window.lock_all().map_err(setup)?;
    let me = mpi.rank();
    let live = Liveness::with_nodes(mpi, &|r| {
        cluster
            .emulate_ranks_per_node
            .is_none_or(|n| r / n.max(1) == me / n.max(1))
    });
    // This rank's doorbells: in one segment of W doorbells when another
    // rank of the node produces into its rings, else in process memory.
    let node_peers: Vec<usize> = (0..mpi.size())
        .filter(|&r| r != me && tier(cluster, me, r) == Tier::Node)
        .collect();
    let bell_segment = |r: usize| SegmentName::new(&job, &format!("bells-r{r}"));
    let bells = if node_peers.is_empty() {
        Doorbells::new(w)
    } else {
        Doorbells::create_segment(&bell_segment(me), w)
            .map_err(|e| RuntimeError::Setup(e.to_string()))?
    };
    // Every window is allocated and locked before any rank reads a peer's
    // part, and every
    // doorbell segment exists before any rank opens one.
    mpi.barrier();
    let mut peer_bells: Vec<Option<Doorbells>> = vec![None; mpi.size()];
    for &r in &node_peers {
        peer_bells[r] = Some(
            Doorbells::open_segment(&bell_segment(r), w, SEGMENT_TIMEOUT)
                .map_err(|e| RuntimeError::Setup(e.to_string()))?,
        );
    }
    let stop = AtomicBool::new(false);
    // Ranks of a node split its CPUs only if they see the same CPU set; a
    // launcher that bound each rank (srun --cpu-bind) already split them.
    let mask = cpu_set_hash(&crate::topology::allowed_cpus());
    let masks = mpi.all_gather_u64(mask);
    let nodes: Vec<usize> = (0..mpi.size()).map(|r| mpi.node_of(r)).collect();
    let split = cpu_split(&masks, &nodes, me);
    // The sending side of every network ring out of this rank, shared by
    // its workers (the rings are in this rank's window part), in
    // `Layout::outbox_index` order: edge, peer (ascending), worker.
    let outboxes = (0..edges.len())
        .flat_map(|e| layout.net_peers[me].iter().map(move |&p| (e, p)))
        .flat_map(|(e, p)| (0..w).map(move |to| (e, p, to)))
        .map(|(e, p, to)| {
            RmaProducer::new(
                &epoch,
                &live,
                p,
                layout.ring_disp(e, me, p, to),
                edges[e],
                layout.credit_disp(e, p, me, to),
            )
            .map(|p| RmaOutbox::new(p, w))
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(setup)?;
    let wiring = MpiWiring {
        mpi,
        split,
        cluster,
        layout,
        slots: ThreadSlots::new(edges, w, bells.clone()),
        epoch: &epoch,
        live: &live,
        job,
        workers: w,
        ring_bytes: edges.to_vec(),
        // The doorbell segment counts among the segments this rank made.
        segments: AtomicU64::new(u64::from(!node_peers.is_empty())),
        network: AtomicU64::new(0),
        outboxes,
        bells,
        peer_bells,
    };
    let result = std::thread::scope(|s| {
        let beater = std::thread::Builder::new()
            .name("air-beat".into())
            .spawn_scoped(s, || live.beat_loop(&epoch, &stop))
            .expect("spawn heartbeat thread");
        let checker = std::thread::Builder::new()
            .name("air-watch".into())
            .spawn_scoped(s, || {
                let first_seen: std::sync::Mutex<Option<Instant>> = std::sync::Mutex::new(None);
                live.check_loop(&window, &stop, &|e| {
                    let mut g = first_seen.lock().unwrap_or_else(|e| e.into_inner());
                    let t0 = *g.get_or_insert_with(Instant::now);
                    if t0.elapsed() >= LOST_GRACE {
                        // The workers did not end by themselves: one may be
                        // blocked inside MPI (a flush to a stopped rank),
                        // so no MPI call here either (MPI_Abort could wait
                        // on the same lock). The launcher ends the others.
                        crate::say!(
                            "air: rank {}: {e}; ending this rank (exit code {EXIT_RANK_LOST})",
                            mpi.rank()
                        );
                        // SAFETY: _exit ends the process at once.
                        unsafe { libc::_exit(EXIT_RANK_LOST) };
                    }
                    false
                });
            })
            .expect("spawn watcher thread");
        if let Some(ms) = fault_exit_after(me) {
            // Test hook (AIR_FAULT_EXIT=<rank>:<ms>): this rank vanishes
            // mid-run without a word, as a crashed process would.
            s.spawn(move || {
                std::thread::sleep(Duration::from_millis(ms));
                // SAFETY: _exit ends the process at once; nothing runs after.
                unsafe { libc::_exit(0) };
            });
        }
        let mut r = run_wired(cfg, &wiring, edges.len(), body);
        if r.is_ok() {
            // Every worker sent its End frames: publish the last ones and
            // close the shared network rings before the windows go.
            if let Some(e) = wiring.outboxes.iter().find_map(|o| o.close().err()) {
                r = Err(RuntimeError::Setup(format!("closing a network ring: {e}")));
            }
        }
        if r.is_ok() {
            // Every rank is done with every channel (producers flushed their
            // last frames and closed) before windows are unlocked and freed.
            mpi.barrier();
        }
        stop.store(true, Ordering::Release);
        // Both nap between rounds (`air_rdma::liveness::nap`): wake them.
        beater.thread().unpark();
        checker.thread().unpark();
        let _ = beater.join();
        let _ = checker.join();
        r
    });
    let created = Created {
        thread_rings: wiring.slots.created.load(Ordering::Relaxed),
        shm_segments: wiring.segments.load(Ordering::Relaxed),
        network_rings: wiring.network.load(Ordering::Relaxed),
        window_bytes: window.len() as u64,
    };
    drop(wiring);
    match result {
        Ok(out) => {
            drop(epoch);
            drop(window);
            Ok((out, created))
        }
        Err(e @ RuntimeError::Refused(_)) => {
            // Every rank stopped at the same step with the same verdict
            // (`between`): the collective teardown is safe, and MPI must
            // not finalize over a window still registered.
            drop(epoch);
            drop(window);
            Err(e)
        }
        Err(e) => {
            // Peers may be dead or stuck: collective teardown could hang.
            std::mem::forget(epoch);
            std::mem::forget(window);
            Err(match live.check() {
                Err(lost) if !matches!(e, RuntimeError::WorkerPanicked { .. }) => {
                    RuntimeError::RankLost(format!("{lost} (here: {e})"))
                }
                _ => e,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::cpu_split;

    #[test]
    fn ranks_seeing_the_same_cpus_split_them_bound_ranks_plan_alone() {
        // Two nodes of two ranks; node 0's ranks see the same set.
        let nodes = [0, 0, 1, 1];
        assert_eq!(cpu_split(&[7, 7, 9, 9], &nodes, 1), (2, 1));
        assert_eq!(cpu_split(&[7, 7, 9, 9], &nodes, 2), (2, 0));
        // srun --cpu-bind gave node 1's ranks different sets.
        assert_eq!(cpu_split(&[7, 7, 9, 8], &nodes, 3), (1, 0));
        assert_eq!(cpu_split(&[7, 7, 9, 8], &nodes, 0), (2, 0));
    }
}
