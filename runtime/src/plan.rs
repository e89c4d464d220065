//! The channel figures of a job, computed from its shape alone: how many
//! rings of each tier it makes, the memory they take on a node (process
//! memory, `/dev/shm` segments, MPI windows), the RMA window of each rank,
//! and the control traffic the job sends when idle.
//!
//! This module is the one place these figures are computed: `air plan`
//! prints them, and the runtime refuses a job that does not fit with the
//! same figures ([`ChannelPlan::check_memory`], [`ChannelPlan::check_shm`],
//! the window size [`JobShape::window_bytes`] a rank allocates). Formulas,
//! with `P` ranks, `W` workers per rank, `G = P·W` workers, `E` exchange
//! edges of ring capacities `c_e`:
//!
//! - within a node, every (edge, sending worker, receiving worker) has its
//!   own ring: a rank's workers consume `W²` per edge from itself (thread
//!   tier) and from each other rank of its node (node tier);
//! - across nodes (or with `force_network`), the workers of a sending rank
//!   share one ring per (edge, receiving worker) (`docs/channels.md`): a
//!   rank's workers consume `W` per edge from each network peer rank;
//! - a thread-tier ring is one anonymous mapping of
//!   `HEADER_BYTES + c_e` bytes, and a node-tier ring one `/dev/shm`
//!   segment of as many bytes, both in whole pages; a rank with node-tier
//!   producers also has one `/dev/shm` segment of `W` doorbells (128 bytes
//!   each, in whole pages);
//! - a rank's window (one per rank when `P > 1`) holds the heartbeats
//!   (`64·P` bytes, rounded up to 128), one ring region of
//!   [`RMA_RING_CTRL_BYTES`]` + c_e` per outgoing network ring (the
//!   sender writes its ring in its own part; the receiver pulls) and one
//!   credit slot of [`RMA_CREDIT_BYTES`] per incoming network ring; each
//!   incoming network ring also has a read buffer of one segment of the
//!   ring (`air_shm::frame::segment_bytes(c_e)`: `c_e` up to 256 KiB, else
//!   a divisor of it of at most 256 KiB) in its receiver's process memory
//!   (a rank has as many incoming network rings as outgoing ones, so the
//!   figures are those of the older push layout);
//! - at every flush interval in which it advanced, a worker sends a
//!   watermark frame to every worker of every edge (`E·G` frames); those
//!   for the network tier are merged per sending rank by its outboxes (a
//!   rank writes one per remote worker and edge when its minimum rises),
//!   and
//!   every rank puts a heartbeat into every rank on another node every
//!   [`HEARTBEAT_PERIOD`].

use crate::units::{binary_bytes, thousands};
use crate::RuntimeError;
use air_shm::DOORBELL_BYTES;
use std::time::Duration;

/// `/dev/shm` bytes the MPI library maps per rank at `MPI_Init`, before
/// `air run` checks its own needs, that [`ChannelPlan::check_here`] leaves
/// free: 5 MiB (measured: MPICH 4.0.2 ch4:ucx, about 4.3 MB per rank).
pub const MPI_SHM_PER_RANK_BYTES: u64 = 5 << 20;

/// Environment variable that makes a job on one machine emulate nodes of
/// this many ranks (the ranks of an emulated node use the node tier, the
/// others the network tier): tests and `air plan` of a multi-node shape.
pub const RANKS_PER_NODE_ENV: &str = "AIR_EMULATE_RANKS_PER_NODE";

/// [`RANKS_PER_NODE_ENV`] as set: `Ok(None)` when unset or empty,
/// `Ok(Some(n))` for a positive integer.
///
/// # Errors
/// Any other value, with a message naming the variable and the value (a
/// typo would otherwise change silently which tiers a job uses).
pub fn emulated_ranks_per_node_from_env() -> Result<Option<usize>, String> {
    let Some(v) = std::env::var_os(RANKS_PER_NODE_ENV) else {
        return Ok(None);
    };
    let v = v.to_string_lossy();
    if v.trim().is_empty() {
        return Ok(None);
    }
    match v.trim().parse::<usize>() {
        Ok(n) if n > 0 => Ok(Some(n)),
        _ => Err(format!(
            "{RANKS_PER_NODE_ENV}={v:?}: must be a positive integer (the ranks of one emulated \
             node), or unset"
        )),
    }
}

/// Bytes before the data area of a network-tier ring region (the tail
/// word; `air_rdma::RING_CTRL_BYTES`).
pub const RMA_RING_CTRL_BYTES: usize = 128;
/// Bytes of one credit slot of a network-tier ring, in its receiver's window
/// (`air_rdma::CREDIT_BYTES`).
pub const RMA_CREDIT_BYTES: usize = 64;
/// Bytes of one heartbeat slot, one per rank at the start of every window
/// (`air_rdma::liveness::HEARTBEAT_SLOT`).
pub const HEARTBEAT_SLOT_BYTES: usize = 64;
/// Bytes a heartbeat put carries (one `u64` counter).
pub const HEARTBEAT_PUT_BYTES: usize = 8;
/// Interval between two heartbeats of a rank to each rank on another node
/// (`air_rdma::liveness::HEARTBEAT`).
pub const HEARTBEAT_PERIOD: Duration = Duration::from_millis(100);

// The figures above are air-rdma's own (it is only linked with `mpi`).
#[cfg(feature = "mpi")]
const _: () = {
    assert!(RMA_RING_CTRL_BYTES == air_rdma::RING_CTRL_BYTES);
    assert!(RMA_CREDIT_BYTES == air_rdma::CREDIT_BYTES);
    assert!(HEARTBEAT_SLOT_BYTES == air_rdma::liveness::HEARTBEAT_SLOT);
    assert!(HEARTBEAT_PERIOD.as_nanos() == air_rdma::liveness::HEARTBEAT.as_nanos());
    assert!(air_rdma::heartbeat_bytes(3) == 3 * HEARTBEAT_SLOT_BYTES);
    assert!(air_rdma::ring_region_bytes(4096) == RMA_RING_CTRL_BYTES + 4096);
};

/// The channel tier between two workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    /// Same process: a ring in process memory.
    Thread,
    /// Same node: a ring in a `/dev/shm` segment.
    Node,
    /// Different nodes (or forced): a remote ring over MPI RMA.
    Network,
}

/// Whether ranks `a` and `b` are in one emulated node of `emulate` ranks
/// (always, without emulation).
pub fn same_emulated_node(a: usize, b: usize, emulate: Option<usize>) -> bool {
    emulate.is_none_or(|n| a / n.max(1) == b / n.max(1))
}

/// The tier between a worker of rank `a` and one of rank `b`, given
/// whether they run on one machine (`same_machine`), `--force-network` and
/// emulated nodes of `emulate` ranks: thread within a rank, node within a
/// (real and emulated) node unless forced, network otherwise.
pub fn tier_between(
    a: usize,
    b: usize,
    same_machine: bool,
    force_network: bool,
    emulate: Option<usize>,
) -> Tier {
    if a == b {
        Tier::Thread
    } else if !force_network && same_machine && same_emulated_node(a, b, emulate) {
        Tier::Node
    } else {
        Tier::Network
    }
}

/// The page size of this machine, bytes (tmpfs and anonymous mappings
/// allocate whole pages); 4096 if unknown.
pub fn page_bytes() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

/// The shape of a job: what the figures are computed from.
#[derive(Debug, Clone)]
pub struct JobShape {
    /// The node of each rank (any numbering: ranks with equal numbers share
    /// a machine); one entry per rank.
    pub node_of: Vec<usize>,
    /// Worker threads per rank.
    pub workers: usize,
    /// Ring capacity of each exchange edge, bytes (one entry per edge).
    pub edge_ring_bytes: Vec<usize>,
    /// Network tier between ranks of one node too (`--force-network`).
    pub force_network: bool,
    /// Nodes of this many consecutive ranks emulated on one machine
    /// (`AIR_EMULATE_RANKS_PER_NODE`).
    pub emulate_ranks_per_node: Option<usize>,
    /// The flush interval (`--flush-us`): at most one watermark frame per
    /// destination and edge per interval.
    pub flush: Duration,
    /// Page size, bytes.
    pub page_bytes: usize,
}

impl JobShape {
    /// `nodes` nodes of `ranks_per_node` ranks each (ranks numbered node by
    /// node, as `mpirun`/`srun` place them by default), `workers` per rank,
    /// one ring capacity per edge; no forced tier, 1 ms flush interval, this
    /// machine's page size.
    pub fn uniform(
        nodes: usize,
        ranks_per_node: usize,
        workers: usize,
        edge_ring_bytes: &[usize],
    ) -> JobShape {
        let rpn = ranks_per_node.max(1);
        JobShape {
            node_of: (0..nodes.max(1) * rpn).map(|r| r / rpn).collect(),
            workers: workers.max(1),
            edge_ring_bytes: edge_ring_bytes.to_vec(),
            force_network: false,
            emulate_ranks_per_node: None,
            flush: Duration::from_millis(1),
            page_bytes: page_bytes(),
        }
    }

    /// Ranks in the job.
    pub fn ranks(&self) -> usize {
        self.node_of.len().max(1)
    }

    /// Whether ranks `a` and `b` count as one node for channels and
    /// heartbeats: one machine and, when emulated, one emulated node.
    pub fn same_node(&self, a: usize, b: usize) -> bool {
        self.node_of.get(a) == self.node_of.get(b)
            && same_emulated_node(a, b, self.emulate_ranks_per_node)
    }

    /// The tier between a worker of rank `a` and one of rank `b`.
    pub fn tier(&self, a: usize, b: usize) -> Tier {
        tier_between(
            a,
            b,
            self.node_of.get(a) == self.node_of.get(b),
            self.force_network,
            self.emulate_ranks_per_node,
        )
    }

    /// The ranks on the machine of rank `r` (ascending).
    pub fn ranks_on_node_of(&self, r: usize) -> Vec<usize> {
        (0..self.ranks())
            .filter(|&q| self.node_of.get(q) == self.node_of.get(r))
            .collect()
    }

    /// Ranks rank `r` talks to over the network tier.
    pub fn network_peers(&self, r: usize) -> usize {
        (0..self.ranks())
            .filter(|&s| self.tier(r, s) == Tier::Network)
            .count()
    }

    /// Bytes of the heartbeat area at the start of every window: one slot
    /// per rank, rounded up to 128 so the rings after it start on a
    /// 128-byte boundary.
    pub fn heartbeat_area_bytes(&self) -> usize {
        (self.ranks() * HEARTBEAT_SLOT_BYTES).next_multiple_of(128)
    }

    /// Rings per edge from the workers of rank `s` to those of rank `r`:
    /// `W²` within a node (one per worker pair), `W` over the network tier
    /// (one per receiving worker, shared by the sending rank's workers).
    pub fn rings_between(&self, s: usize, r: usize) -> u64 {
        let w = self.workers.max(1) as u64;
        match self.tier(s, r) {
            Tier::Network => w,
            Tier::Thread | Tier::Node => w * w,
        }
    }

    /// Bytes of rank `r`'s RMA window: heartbeats, a ring region
    /// ([`RMA_RING_CTRL_BYTES`] + capacity) per network ring its workers
    /// consume (one per edge, peer rank and worker of `r`), a credit slot
    /// ([`RMA_CREDIT_BYTES`]) per network ring its workers produce into (one
    /// per edge, peer rank and worker of the peer). 0 for a job of one rank
    /// (no window).
    pub fn window_bytes(&self, r: usize) -> u64 {
        if self.ranks() < 2 {
            return 0;
        }
        let per_edge = (self.network_peers(r) * self.workers) as u128;
        let regions: u128 = self
            .edge_ring_bytes
            .iter()
            .map(|&c| per_edge * (RMA_RING_CTRL_BYTES + c) as u128)
            .sum();
        let credits = per_edge * self.edge_ring_bytes.len() as u128 * RMA_CREDIT_BYTES as u128;
        sat(self.heartbeat_area_bytes() as u128 + regions + credits)
    }

    /// Bytes one ring of capacity `c` takes in process memory or in
    /// `/dev/shm`: its header and data area, in whole pages.
    pub fn ring_pages_bytes(&self, c: usize) -> u64 {
        (air_shm::HEADER_BYTES + c).next_multiple_of(self.page_bytes.max(1)) as u64
    }
}

/// The per-node ring budget of a job whose ring size was not given
/// (`air run` without `--ring-bytes`, a library job without
/// `AIR_RING_BYTES`), bytes: 1 GiB. Its rings (all tiers, windows and send
/// mirrors, as [`NodeMemory::total_bytes`] counts them) on the busiest node
/// must fit in it ([`fit_ring_budget`]).
pub const RING_BUDGET_BYTES: u64 = 1 << 30;

/// The smallest ring [`fit_ring_budget`] scales an edge to, bytes: 64 KiB.
pub const BUDGET_FLOOR_BYTES: usize = 64 << 10;

/// Ring sizes are scaled in steps of this many bytes (4 KiB).
const BUDGET_STEP_BYTES: usize = 4 << 10;

/// The busiest node's ring memory, bytes ([`NodeMemory::total_bytes`] of
/// the node that needs the most).
pub fn busiest_node_bytes(shape: &JobShape) -> u64 {
    busiest_node(shape).0
}

/// The busiest node's ring memory (bytes) and its first rank.
fn busiest_node(shape: &JobShape) -> (u64, usize) {
    let mut best: Option<(u64, usize)> = None;
    for r in 0..shape.ranks() {
        if shape.node_of[..r].contains(&shape.node_of[r]) {
            continue; // not the node's first rank
        }
        let need = ChannelPlan::node_memory(shape, &shape.ranks_on_node_of(r)).total_bytes;
        if best.is_none_or(|(b, _)| need > b) {
            best = Some((need, r));
        }
    }
    best.unwrap_or((0, 0))
}

/// The ring capacity of every edge (bytes) once the per-node ring budget is
/// applied: the largest ring size `b` — `max`, or a multiple of 4 KiB
/// between [`BUDGET_FLOOR_BYTES`] and `max` — whose edges (`b` for a full
/// edge, [`small_ring_bytes`](crate::dataflow::small_ring_bytes)`(b)` for an
/// edge with `small[e]`) keep the busiest node of `shape_of(edges)` within
/// `budget` bytes ([`busiest_node_bytes`]). Every rank computes the same
/// sizes from the same shape. A job that does not fit even at the floor
/// gets the floor; whether it runs at all is then
/// [`ChannelPlan::check_memory`]'s decision.
///
/// A job that fits at `max` keeps `max` exactly (small jobs are unchanged).
/// Default YSB (2 edges, one small) on 8 nodes × 28 workers: 958,464-byte
/// rings instead of 1 MiB (`docs/channels.md`, "Memory per node").
pub fn fit_ring_budget(
    budget: u64,
    max: usize,
    small: &[bool],
    shape_of: impl Fn(&[usize]) -> JobShape,
) -> Vec<usize> {
    let edges = |b: usize| -> Vec<usize> {
        small
            .iter()
            .map(|&s| {
                if s {
                    crate::dataflow::small_ring_bytes(b)
                } else {
                    b.next_multiple_of(16)
                }
            })
            .collect()
    };
    let fits = |b: usize| busiest_node_bytes(&shape_of(&edges(b))) <= budget;
    if max <= BUDGET_FLOOR_BYTES || fits(max) {
        return edges(max);
    }
    // Steps of 4 KiB: the largest k in [lo, hi] with fits(k · 4 KiB); lo
    // is the floor (taken even if it does not fit), hi stays below `max`.
    let (mut lo, mut hi) = (
        BUDGET_FLOOR_BYTES / BUDGET_STEP_BYTES,
        (max - 1) / BUDGET_STEP_BYTES,
    );
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if fits(mid * BUDGET_STEP_BYTES) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    edges(lo * BUDGET_STEP_BYTES)
}

/// `x`, or `u64::MAX` if larger (figures of shapes too large to run).
fn sat(x: u128) -> u64 {
    u64::try_from(x).unwrap_or(u64::MAX)
}

/// Ring counts by tier.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct TierRings {
    /// Rings between workers of one process.
    pub thread: u64,
    /// Rings between ranks of one node (`/dev/shm` segments).
    pub node: u64,
    /// Rings between nodes (or forced): RMA ring regions.
    pub network: u64,
    /// All of them.
    pub total: u64,
}

impl TierRings {
    fn add(&mut self, tier: Tier, n: u64) {
        match tier {
            Tier::Thread => self.thread += n,
            Tier::Node => self.node += n,
            Tier::Network => self.network += n,
        }
        self.total += n;
    }

    fn plus(&mut self, o: &TierRings) {
        self.thread += o.thread;
        self.node += o.node;
        self.network += o.network;
        self.total += o.total;
    }
}

/// One exchange edge's rings over the whole job.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct EdgeRings {
    /// The edge's ring capacity, bytes.
    pub ring_bytes: usize,
    /// Its rings in the job, by tier (`G²` in all).
    pub rings: TierRings,
}

/// The memory of one node's rings, bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct NodeMemory {
    /// Thread-tier rings in the node's processes (anonymous mappings,
    /// `HEADER_BYTES` + capacity each, in whole pages).
    pub thread_bytes: u64,
    /// `/dev/shm` segments of the node's node-tier rings (one per ring),
    /// and one doorbell segment per rank that has node-tier producers.
    pub shm_segments: u64,
    /// Bytes of those segments (`HEADER_BYTES` + capacity each, in whole
    /// pages, as tmpfs allocates them).
    pub shm_bytes: u64,
    /// RMA windows of the node's ranks.
    pub window_bytes: u64,
    /// Read buffers of the network rings into the node's ranks, in process
    /// memory (one per incoming ring, one segment of its capacity each;
    /// the name is kept from the push layout, where they were the senders'
    /// mirrors).
    pub mirror_bytes: u64,
    /// All of the above.
    pub total_bytes: u64,
}

/// A rank's RMA window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct RankWindow {
    /// Windows the rank allocates: 1 under MPI with more than one rank,
    /// else 0.
    pub windows: usize,
    /// Bytes of its window.
    pub bytes: u64,
    /// Of which heartbeat slots.
    pub heartbeat_bytes: u64,
    /// Network-tier rings whose region is in it (outgoing: the sender
    /// writes its ring in its own part).
    pub ring_regions: u64,
    /// Network-tier rings whose credit slot is in it (incoming).
    pub credit_slots: u64,
}

/// Control frames and heartbeats a job sends when idle (no records), at
/// most: the watermark figures assume every source's watermark advances in
/// every flush interval (wall-clock event time does).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct ControlTraffic {
    /// The flush interval, µs.
    pub flush_us: u64,
    /// Watermark frames written into rings per worker of the node and flush
    /// interval (average, rounded up): one to every worker of its node on
    /// every edge, plus its share of its rank's frames to remote workers,
    /// which the rank's outboxes merge (`E·(R·W + (N−1)·R)` on a job of `N`
    /// nodes of `R` ranks of `W` workers; before session 14 it was `E·G`).
    pub watermark_frames_per_flush_per_worker: u64,
    /// The same per second.
    pub watermark_frames_per_s_per_worker: f64,
    /// Watermark frames per second written into rings by the node: each
    /// worker's to the workers of its node, and each rank's (merged over
    /// its workers) to every remote worker.
    pub watermark_frames_per_s_per_node: f64,
    /// Of those, frames per second that cross the network tier (one per
    /// rank, remote worker and edge per flush interval).
    pub network_watermark_frames_per_s_per_node: f64,
    /// Heartbeat puts per second of one rank (one to every rank on another
    /// node, real or emulated, every [`HEARTBEAT_PERIOD`]).
    pub heartbeats_per_s_per_rank: f64,
    /// Heartbeat puts per second sent by the node's ranks.
    pub heartbeats_per_s_per_node: f64,
    /// Heartbeat payload bytes per second sent by the node's ranks.
    pub heartbeat_bytes_per_s_per_node: f64,
}

/// What one process's channel setup actually made: counted by the runtime
/// as it creates rings, to hold against the [`ChannelPlan`] of its rank.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Created {
    /// Thread-tier rings created by this process's workers.
    pub thread_rings: u64,
    /// `/dev/shm` segments created by this process's workers (node-tier
    /// rings they consume).
    pub shm_segments: u64,
    /// Network-tier rings this process's workers consume (ring regions in
    /// its window).
    pub network_rings: u64,
    /// Bytes of the RMA window this process allocated (0: none).
    pub window_bytes: u64,
}

/// The channel figures of a job, as seen from one rank and its node
/// ([`ChannelPlan::for_rank`]) or from the node that needs the most memory
/// ([`ChannelPlan::busiest`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ChannelPlan {
    /// Nodes (machines) in the job.
    pub nodes: usize,
    /// Ranks in the job.
    pub ranks: usize,
    /// Ranks on the node these figures are of.
    pub ranks_on_node: usize,
    /// Workers per rank.
    pub workers_per_rank: usize,
    /// Workers in the job (`G`).
    pub workers: usize,
    /// Network tier between ranks of one node too.
    pub force_network: bool,
    /// Emulated nodes of this many ranks, if any.
    pub emulated_ranks_per_node: Option<usize>,
    /// Page size the byte figures are rounded to.
    pub page_bytes: usize,
    /// The rank these figures are of (per-rank figures).
    pub rank: usize,
    /// Per exchange edge: its capacity and its rings in the job.
    pub edges: Vec<EdgeRings>,
    /// Rings of the job, by tier (`E·G²`).
    pub rings: TierRings,
    /// Rings the rank's workers consume, by tier (`E·G·W`).
    pub rings_per_rank: TierRings,
    /// Rings the node's workers consume, by tier.
    pub rings_per_node: TierRings,
    /// Memory of the node's rings.
    pub memory_per_node: NodeMemory,
    /// Memory of every node's rings, bytes (the whole job).
    pub job_bytes: u64,
    /// The rank's RMA window.
    pub window_per_rank: RankWindow,
    /// Control traffic at idle.
    pub control: ControlTraffic,
}

impl ChannelPlan {
    /// The figures of rank `rank` and its node in a job of shape `shape`.
    pub fn for_rank(shape: &JobShape, rank: usize) -> ChannelPlan {
        let p = shape.ranks();
        let w = shape.workers.max(1);
        let e = shape.edge_ring_bytes.len() as u64;
        let g = (p * w) as u64;
        // Rings rank r's workers consume, by tier.
        let consumed = |r: usize| {
            let mut t = TierRings::default();
            for s in 0..p {
                t.add(shape.tier(s, r), e * shape.rings_between(s, r));
            }
            t
        };
        let mut edges: Vec<EdgeRings> = shape
            .edge_ring_bytes
            .iter()
            .map(|&c| EdgeRings {
                ring_bytes: c,
                rings: TierRings::default(),
            })
            .collect();
        let mut rings = TierRings::default();
        for r in 0..p {
            for s in 0..p {
                let t = shape.tier(s, r);
                let n = shape.rings_between(s, r);
                for edge in &mut edges {
                    edge.rings.add(t, n);
                }
                rings.add(t, e * n);
            }
        }
        let node = shape.ranks_on_node_of(rank);
        let mut rings_per_node = TierRings::default();
        for &q in &node {
            rings_per_node.plus(&consumed(q));
        }
        let mem = Self::node_memory(shape, &node);
        let mut nodes: Vec<usize> = shape.node_of.clone();
        nodes.sort_unstable();
        nodes.dedup();
        let job_bytes = sat(nodes
            .iter()
            .filter_map(|n| shape.node_of.iter().position(|x| x == n))
            .map(|first| {
                Self::node_memory(shape, &shape.ranks_on_node_of(first)).total_bytes as u128
            })
            .sum());
        let peers = shape.network_peers(rank) as u64;
        let window_per_rank = RankWindow {
            windows: usize::from(p > 1),
            bytes: shape.window_bytes(rank),
            heartbeat_bytes: if p > 1 {
                shape.heartbeat_area_bytes() as u64
            } else {
                0
            },
            ring_regions: e * peers * w as u64,
            credit_slots: e * peers * w as u64,
        };
        let per_s = 1e6 / (shape.flush.as_micros().max(1) as f64);
        // Network-tier frames of rank q: one per remote worker (W per
        // network peer) and edge, merged over q's workers by its outboxes.
        let net_frames: u64 = node
            .iter()
            .map(|&q| e * shape.network_peers(q) as u64 * w as u64)
            .sum();
        // Every worker's frames to the workers of its node, plus those.
        let local_frames: u64 = node
            .iter()
            .map(|&q| (w as u64) * e * (g - shape.network_peers(q) as u64 * w as u64))
            .sum();
        // Per worker of the node, on average (rounded up): its own frames
        // to its node's workers and its share of its rank's merged ones.
        let per_flush = (local_frames + net_frames).div_ceil((node.len() * w).max(1) as u64);
        let beat_peers = |q: usize| (0..p).filter(|&s| !shape.same_node(q, s)).count() as f64;
        let beats_per_s = 1.0 / HEARTBEAT_PERIOD.as_secs_f64();
        let node_beats: f64 = node.iter().map(|&q| beat_peers(q) * beats_per_s).sum();
        ChannelPlan {
            nodes: nodes.len(),
            ranks: p,
            ranks_on_node: node.len(),
            workers_per_rank: w,
            workers: p * w,
            force_network: shape.force_network,
            emulated_ranks_per_node: shape.emulate_ranks_per_node,
            page_bytes: shape.page_bytes,
            rank,
            edges,
            rings,
            rings_per_rank: consumed(rank),
            rings_per_node,
            memory_per_node: mem,
            job_bytes,
            window_per_rank,
            control: ControlTraffic {
                flush_us: shape.flush.as_micros() as u64,
                watermark_frames_per_flush_per_worker: per_flush,
                watermark_frames_per_s_per_worker: per_flush as f64 * per_s,
                watermark_frames_per_s_per_node: (local_frames + net_frames) as f64 * per_s,
                network_watermark_frames_per_s_per_node: net_frames as f64 * per_s,
                heartbeats_per_s_per_rank: beat_peers(rank) * beats_per_s,
                heartbeats_per_s_per_node: node_beats,
                heartbeat_bytes_per_s_per_node: node_beats * HEARTBEAT_PUT_BYTES as f64,
            },
        }
    }

    /// The figures of the node whose rings take the most memory (and of
    /// its first rank): what decides whether the job fits.
    pub fn busiest(shape: &JobShape) -> ChannelPlan {
        Self::for_rank(shape, busiest_node(shape).1)
    }

    fn node_memory(shape: &JobShape, node: &[usize]) -> NodeMemory {
        let ww = (shape.workers * shape.workers) as u128;
        let per_ring: u128 = shape
            .edge_ring_bytes
            .iter()
            .map(|&c| shape.ring_pages_bytes(c) as u128)
            .sum();
        let e = shape.edge_ring_bytes.len() as u128;
        let (mut thread, mut segments, mut shm, mut window) = (0u128, 0u128, 0u128, 0u128);
        let mut mirror = 0u128;
        // A read buffer holds one segment of its ring (at most 256 KiB);
        // a rank has one per incoming network ring (as many as outgoing).
        let caps: u128 = shape
            .edge_ring_bytes
            .iter()
            .map(|&c| air_shm::frame::segment_bytes(c) as u128)
            .sum();
        for &q in node {
            mirror += (shape.network_peers(q) * shape.workers) as u128 * caps;
            thread += ww * per_ring;
            let node_peers = (0..shape.ranks())
                .filter(|&s| shape.tier(s, q) == Tier::Node)
                .count() as u128;
            segments += node_peers * ww * e;
            shm += node_peers * ww * per_ring;
            if node_peers > 0 {
                // The rank's doorbells, for its node-tier producers: one
                // segment of W × 128 bytes.
                segments += 1;
                shm += (shape.workers.max(1) * DOORBELL_BYTES)
                    .next_multiple_of(shape.page_bytes.max(1)) as u128;
            }
            window += shape.window_bytes(q) as u128;
        }
        NodeMemory {
            thread_bytes: sat(thread),
            shm_segments: sat(segments),
            shm_bytes: sat(shm),
            window_bytes: sat(window),
            mirror_bytes: sat(mirror),
            total_bytes: sat(thread + shm + window + mirror),
        }
    }

    /// "N rings of B bytes" (or "N rings (a of B bytes, b of C bytes)")
    /// for `per_edge` rings of each edge's capacity.
    fn describe(&self, per_edge: u64) -> String {
        let caps: Vec<usize> = self.edges.iter().map(|e| e.ring_bytes).collect();
        let mut sizes = caps.clone();
        sizes.sort_unstable();
        sizes.dedup();
        let rings = per_edge * caps.len() as u64;
        if sizes.len() == 1 {
            format!(
                "{} rings of {} bytes",
                thousands(rings),
                thousands(sizes[0] as u64)
            )
        } else {
            let by: Vec<String> = sizes
                .iter()
                .map(|&b| {
                    let n = per_edge * caps.iter().filter(|&&x| x == b).count() as u64;
                    format!("{} of {} bytes", thousands(n), thousands(b as u64))
                })
                .collect();
            format!("{} rings ({})", thousands(rings), by.join(", "))
        }
    }

    /// What the job's shape is, for messages: "W workers and E exchange
    /// edge(s)", or "W workers on each of P ranks (R on this node) and E
    /// exchange edge(s)".
    pub fn what(&self) -> String {
        if self.ranks < 2 {
            format!(
                "{} workers and {} exchange edge(s)",
                self.workers_per_rank,
                self.edges.len()
            )
        } else {
            format!(
                "{} workers on each of {} ranks ({} on this node) and {} exchange edge(s)",
                self.workers_per_rank,
                self.ranks,
                self.ranks_on_node,
                self.edges.len()
            )
        }
    }

    /// Refuses a node whose rings would take more than half of `avail`
    /// bytes of available memory (`MemAvailable`): thread-tier rings,
    /// `/dev/shm` segments and windows of every rank of the node.
    ///
    /// # Errors
    /// [`RuntimeError::Setup`] naming the rings and bytes.
    pub fn check_memory(&self, avail: u64) -> Result<(), RuntimeError> {
        let m = &self.memory_per_node;
        if m.total_bytes <= avail / 2 {
            return Ok(());
        }
        let per_edge = self.rings_per_node.total / (self.edges.len().max(1) as u64);
        Err(RuntimeError::Setup(format!(
            "{} need {} on this node = {} ({} in process memory, {} in /dev/shm, {} in \
             MPI windows), more than half of the {} of available memory (lower \
             --workers or --ring-bytes; `air plan` shows the figures)",
            self.what(),
            self.describe(per_edge),
            binary_bytes(m.total_bytes),
            binary_bytes(m.thread_bytes.saturating_add(m.mirror_bytes)),
            binary_bytes(m.shm_bytes),
            binary_bytes(m.window_bytes),
            binary_bytes(avail),
        )))
    }

    /// Refuses a node whose `/dev/shm` segments would not fit in the `free`
    /// bytes of the shared-memory directory `dir`.
    ///
    /// # Errors
    /// [`RuntimeError::Setup`] with the bytes needed and free, and what to
    /// change (a tmpfs limit such as Docker's default 64 MiB `--shm-size`
    /// is the common cause).
    pub fn check_shm(&self, dir: &std::path::Path, free: u64) -> Result<(), RuntimeError> {
        let m = &self.memory_per_node;
        if m.shm_bytes <= free {
            return Ok(());
        }
        let rings = self.rings_per_node.node;
        let per_edge = rings / (self.edges.len().max(1) as u64);
        Err(RuntimeError::Setup(format!(
            "not enough shared memory in {}: the {} ranks on this node need {} and {} \
             doorbell segment(s) = {} bytes, {} bytes free (enlarge the tmpfs, e.g. \
             `docker run --shm-size`, or lower --ring-bytes or --workers)",
            dir.display(),
            self.ranks_on_node,
            self.describe(per_edge),
            m.shm_segments.saturating_sub(rings),
            thousands(m.shm_bytes),
            thousands(free),
        )))
    }

    /// Checks this node against this machine: [`ChannelPlan::check_memory`]
    /// with `MemAvailable` (skipped if unreadable) and
    /// [`ChannelPlan::check_shm`] with the free bytes of `/dev/shm` less
    /// [`MPI_SHM_PER_RANK_BYTES`] per rank of the node (only when the node
    /// has node-tier rings): the checks `air run` makes, as they come out
    /// once MPI is up.
    ///
    /// # Errors
    /// The first check that fails.
    pub fn check_here(&self) -> Result<(), RuntimeError> {
        if let Some(avail) = crate::job::available_memory() {
            self.check_memory(avail)?;
        }
        if self.memory_per_node.shm_segments > 0 {
            let dir = air_shm::shm_dir();
            let free = air_shm::region::free_bytes(&dir)
                .map_err(|e| RuntimeError::Setup(e.to_string()))?;
            // `air run` checks after MPI_Init, when the MPI library's own
            // segments are in /dev/shm already: leave room for them.
            let mpi = MPI_SHM_PER_RANK_BYTES * self.ranks_on_node as u64;
            self.check_shm(&dir, free.saturating_sub(mpi))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(nodes: usize, rpn: usize, w: usize, edges: &[usize]) -> JobShape {
        JobShape {
            page_bytes: 4096,
            ..JobShape::uniform(nodes, rpn, w, edges)
        }
    }

    /// The budget's sizes for YSB's two edges (full, small) on `nodes` ×
    /// `rpn` ranks of `w` workers, starting at 1 MiB.
    fn budgeted(nodes: usize, rpn: usize, w: usize) -> (Vec<usize>, u64) {
        let shape_of = |e: &[usize]| shape(nodes, rpn, w, e);
        let sizes = fit_ring_budget(RING_BUDGET_BYTES, 1 << 20, &[false, true], shape_of);
        let used = busiest_node_bytes(&shape_of(&sizes));
        (sizes, used)
    }

    #[test]
    fn the_ring_budget_leaves_small_jobs_alone() {
        // 2 workers, 1 rank: a few MiB, far below 1 GiB.
        assert_eq!(budgeted(1, 1, 2).0, vec![1 << 20, 64 << 10]);
        // 2 nodes × 4: still 1 MiB.
        assert_eq!(budgeted(2, 1, 4).0, vec![1 << 20, 64 << 10]);
    }

    #[test]
    fn the_ring_budget_brings_8_by_28_and_64_by_28_within_1_gib_per_node() {
        let step = 4 << 10;
        for nodes in [8, 64] {
            let (sizes, used) = budgeted(nodes, 1, 28);
            let b = sizes[0];
            assert!(b < 1 << 20 && b % step == 0, "{nodes} nodes: {sizes:?}");
            assert!(b >= BUDGET_FLOOR_BYTES, "{nodes} nodes: {sizes:?}");
            assert_eq!(sizes[1], crate::dataflow::small_ring_bytes(b));
            assert!(used <= RING_BUDGET_BYTES, "{nodes} nodes: {used}");
            // The largest such size: one step more no longer fits.
            let more = [b + step, crate::dataflow::small_ring_bytes(b + step)];
            assert!(busiest_node_bytes(&shape(nodes, 1, 28, &more)) > RING_BUDGET_BYTES);
        }
        // 8 × 28 was 1.08 GiB at 1 MiB: rings shrink by a few percent only.
        assert!(budgeted(8, 1, 28).0[0] > 900 << 10);
    }

    #[test]
    fn a_job_too_big_for_the_budget_gets_the_floor() {
        // 8 ranks × 28 workers on one node: 224² rings per edge on the node.
        let (sizes, used) = budgeted(1, 8, 28);
        assert_eq!(sizes, vec![BUDGET_FLOOR_BYTES, BUDGET_FLOOR_BYTES]);
        assert!(used > RING_BUDGET_BYTES);
        // No budget below the floor: a 64 KiB job is taken as given.
        let s = fit_ring_budget(1, 64 << 10, &[false], |e| shape(1, 8, 28, e));
        assert_eq!(s, vec![64 << 10]);
    }

    #[test]
    fn one_process_has_only_thread_rings_and_no_window() {
        // 3 workers, one edge of 4096 bytes: 9 rings of 4096 + 256 bytes,
        // two pages each.
        let p = ChannelPlan::busiest(&shape(1, 1, 3, &[4096]));
        let hdr = air_shm::HEADER_BYTES as u64;
        assert!(hdr > 0 && hdr <= 4096);
        assert_eq!(
            p.rings,
            TierRings {
                thread: 9,
                node: 0,
                network: 0,
                total: 9
            }
        );
        assert_eq!(p.rings_per_rank, p.rings);
        assert_eq!(p.memory_per_node.thread_bytes, 9 * 8192);
        assert_eq!(p.memory_per_node.shm_segments, 0);
        assert_eq!(p.memory_per_node.window_bytes, 0);
        assert_eq!(p.window_per_rank.windows, 0);
        assert_eq!(p.job_bytes, 9 * 8192);
        // 3 frames per 1 ms flush: 3,000/s per worker, 9,000/s for the node.
        assert_eq!(p.control.watermark_frames_per_flush_per_worker, 3);
        assert_eq!(p.control.watermark_frames_per_s_per_worker, 3000.0);
        assert_eq!(p.control.watermark_frames_per_s_per_node, 9000.0);
        assert_eq!(p.control.heartbeats_per_s_per_rank, 0.0);
    }

    #[test]
    fn two_nodes_of_two_ranks_split_rings_over_the_three_tiers() {
        // P = 4 ranks, W = 2, G = 8, two edges of 8192 and 4096 bytes.
        let s = shape(2, 2, 2, &[8192, 4096]);
        let p = ChannelPlan::for_rank(&s, 1);
        // Job: thread 2·4·4 = 32, node 2·(2 pairs per node · 2 nodes)·4 =
        // 32, network 2·(8 cross pairs)·2 (one ring per receiving worker,
        // shared by the sending rank's 2 workers) = 32.
        assert_eq!(
            (p.rings.thread, p.rings.node, p.rings.network, p.rings.total),
            (32, 32, 32, 96)
        );
        assert_eq!(p.edges[0].rings.total, 48);
        // Rank 1 consumes, per edge, 4 thread, 4 node, 2·2 network.
        assert_eq!(
            (
                p.rings_per_rank.thread,
                p.rings_per_rank.node,
                p.rings_per_rank.network
            ),
            (8, 8, 8)
        );
        assert_eq!(p.rings_per_node.total, 48);
        // Pages: 8192 + header -> 3 pages, 4096 + header -> 2 pages.
        let per_ring = 3 * 4096 + 2 * 4096;
        assert_eq!(p.memory_per_node.thread_bytes, 2 * 4 * per_ring);
        // 2 ranks · 4 node rings per edge, and each rank's doorbell
        // segment (2 workers · 128 bytes: one page).
        assert_eq!(p.memory_per_node.shm_segments, 2 * 2 * 4 + 2);
        assert_eq!(p.memory_per_node.shm_bytes, 2 * 4 * per_ring + 2 * 4096);
        // Window: 4·64 = 256 bytes of heartbeats; 2 network peers · 2
        // workers = 4 regions per edge, (128 + c) each, and 8 credit slots
        // of 64 (one per outgoing ring: 2 peers · 2 of their workers · 2
        // edges).
        let win = 256 + 4 * (128 + 8192) + 4 * (128 + 4096) + 8 * 64;
        assert_eq!(p.window_per_rank.bytes, win);
        assert_eq!(p.window_per_rank.windows, 1);
        assert_eq!(p.window_per_rank.ring_regions, 8);
        assert_eq!(p.memory_per_node.window_bytes, 2 * win);
        // Each rank mirrors its 4 outgoing rings of each edge.
        let mirrors = 2 * 4 * (8192 + 4096);
        assert_eq!(p.memory_per_node.mirror_bytes, mirrors);
        assert_eq!(
            p.memory_per_node.total_bytes,
            2 * 4 * per_ring * 2 + 2 * 4096 + 2 * win + mirrors
        );
        assert_eq!(p.job_bytes, 2 * p.memory_per_node.total_bytes);
        // Watermarks: each worker's 8 to the 4 workers of its node (32 per
        // ms for the node's 4 workers), and to remote workers merged per
        // rank: 2 ranks · 2 edges · 4 remote workers = 16 per ms cross the
        // network (64 unmerged). Per worker (48 / 4) = E·(R·W + (N−1)·R)
        // = 2 · (4 + 2) = 12, not E·G = 16.
        assert_eq!(p.control.watermark_frames_per_flush_per_worker, 12);
        assert_eq!(p.control.watermark_frames_per_s_per_node, 48_000.0);
        assert_eq!(p.control.network_watermark_frames_per_s_per_node, 16_000.0);
        // Heartbeats: each rank to the 2 ranks of the other node, 10/s.
        assert_eq!(p.control.heartbeats_per_s_per_rank, 20.0);
        assert_eq!(p.control.heartbeats_per_s_per_node, 40.0);
        assert_eq!(p.control.heartbeat_bytes_per_s_per_node, 320.0);
    }

    #[test]
    fn forced_network_and_emulated_nodes_change_tiers_not_ring_counts() {
        let mut s = shape(1, 3, 1, &[4096]);
        s.force_network = true;
        let p = ChannelPlan::for_rank(&s, 0);
        assert_eq!((p.rings.thread, p.rings.node, p.rings.network), (3, 0, 6));
        assert_eq!(p.memory_per_node.shm_segments, 0);
        // Forced network on one node: no heartbeats (same host).
        assert_eq!(p.control.heartbeats_per_s_per_rank, 0.0);
        // 3 ranks, emulated nodes of 2: ranks 0 and 1 share a node.
        s.force_network = false;
        s.emulate_ranks_per_node = Some(2);
        let p = ChannelPlan::for_rank(&s, 0);
        assert_eq!((p.rings.thread, p.rings.node, p.rings.network), (3, 2, 4));
        // The machine holds all 3 ranks: its segments are the 2 node rings
        // and the doorbell segments of ranks 0 and 1.
        assert_eq!(p.ranks_on_node, 3);
        assert_eq!(p.memory_per_node.shm_segments, 4);
        assert_eq!(p.window_per_rank.ring_regions, 1);
        assert_eq!(
            p.window_per_rank.bytes,
            (3 * 64u64).next_multiple_of(128) + (128 + 4096) + 64
        );
        assert_eq!(p.control.heartbeats_per_s_per_rank, 10.0);
    }

    #[test]
    fn the_issue_example_8_by_28() {
        // 8 nodes × 1 rank × 28 workers, one 1 MiB edge. The issue's layout
        // (a ring per worker pair) had 224² = 50,176 rings, 6,272 per node,
        // ≈ 6.1 GiB per node. Multiplexed: 784 thread rings per node and
        // 7 peers × 28 workers = 196 network rings in, 196 out.
        let p = ChannelPlan::busiest(&shape(8, 1, 28, &[1 << 20]));
        assert_eq!(p.rings.total, 8 * 784 + 8 * 196);
        assert_eq!(p.rings_per_node.total, 980);
        assert_eq!(p.rings_per_node.thread, 784);
        assert_eq!(p.rings_per_node.network, 196);
        // 784 MiB of thread rings (+ a header page each), 196 MiB of window
        // and 196 send mirrors of a 256 KiB segment each (49 MiB): ≈ 1.0
        // GiB per node, ≈ 8.1 GiB in all.
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        assert_eq!(p.memory_per_node.mirror_bytes, 196 << 18);
        assert!((1.0..1.05).contains(&gib(p.memory_per_node.total_bytes)));
        assert!((8.0..8.4).contains(&gib(p.job_bytes)));
    }

    #[test]
    fn refusals_name_the_figures() {
        let p = ChannelPlan::busiest(&shape(1, 2, 1, &[1 << 20, 65536]));
        let need = p.memory_per_node.total_bytes;
        assert!(p.check_memory(2 * need).is_ok());
        let e = p.check_memory(2 * need - 2).unwrap_err().to_string();
        assert!(
            e.contains(&format!("= {} (", binary_bytes(need)))
                && e.contains(&format!(
                    "of the {} of available",
                    binary_bytes(2 * need - 2)
                )),
            "{e}"
        );
        assert!(
            e.contains("1 workers on each of 2 ranks (2 on this node)"),
            "{e}"
        );
        let shm = p.memory_per_node.shm_bytes;
        assert!(p.check_shm(std::path::Path::new("/dev/shm"), shm).is_ok());
        let e = p
            .check_shm(std::path::Path::new("/dev/shm"), shm - 1)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("not enough shared memory in /dev/shm")
                && e.contains("2 of 1,048,576 bytes")
                && e.contains(&format!("= {} bytes", thousands(shm)))
                && e.contains(&format!("{} bytes free", thousands(shm - 1))),
            "{e}"
        );
    }
}
