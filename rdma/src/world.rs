//! The MPI environment of one rank: initialization with the thread level the
//! runtime needs, who the other ranks are (node, host, pid), launcher
//! mix-ups, and the few collectives the runtime uses at setup and teardown.

use crate::error::{RdmaError, Result};
use crate::sys::{self, check};
use mpi::collective::{CommunicatorCollectives, Root};
use mpi::datatype::PartitionMut;
use mpi::environment::{Threading, Universe};
use mpi::ffi;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::AsRaw;
use std::os::raw::c_int;

/// Environment variables launchers set to the number of ranks they started,
/// in the order they are checked: MPICH's hydra and SLURM's PMI-2 (`PMI_SIZE`),
/// Open MPI's mpirun (`OMPI_COMM_WORLD_SIZE`), SLURM's srun (`SLURM_STEP_NUM_TASKS`).
pub const LAUNCHER_SIZE_VARS: [&str; 3] =
    ["PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS"];

/// If a launcher (mpirun, mpiexec, srun) started this process as one of
/// several ranks: the variable that says so and the number of ranks.
/// `None` when no launcher variable is set, or it says 1.
pub fn launched_ranks() -> Option<(&'static str, usize)> {
    LAUNCHER_SIZE_VARS.iter().find_map(|var| {
        let n: usize = std::env::var(var).ok()?.trim().parse().ok()?;
        (n > 1).then_some((*var, n))
    })
}

/// One rank's MPI environment. Created once per process by [`Mpi::init`];
/// dropping it finalizes MPI. Windows borrow it ([`crate::Window`]), so
/// they are always freed before MPI is finalized.
///
/// Thread level: `MPI_THREAD_MULTIPLE`. Every worker thread makes its own
/// MPI calls (it publishes the frames it writes and pulls the rings it
/// reads; no communication thread, no hand-off copy); both MPICH and Open
/// MPI on Debian grant it.
pub struct Mpi {
    rank: usize,
    size: usize,
    node_of: Vec<usize>,
    local_rank: usize,
    local_size: usize,
    pids: Vec<u32>,
    hosts: Vec<String>,
    library: String,
    world: SimpleCommunicator,
    // Last field: dropped (MPI_Finalize) after everything above.
    _universe: Universe,
}

// SAFETY: Mpi::init refuses any thread level below MPI_THREAD_MULTIPLE, so
// MPI may be called from any thread at any time; the handles it holds (a
// pointer in Open MPI, an int in MPICH) are only passed to MPI, and the
// Universe is finalized once, when the Mpi is dropped.
unsafe impl Send for Mpi {}
// SAFETY: as above; every method takes `&self` and only calls MPI.
unsafe impl Sync for Mpi {}

impl std::fmt::Debug for Mpi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mpi")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("node_of", &self.node_of)
            .field("library", &self.library)
            .finish()
    }
}

const HOST_BYTES: usize = 256;

impl Mpi {
    /// Initializes MPI with `MPI_THREAD_MULTIPLE` and `MPI_ERRORS_RETURN` on
    /// `MPI_COMM_WORLD`, then learns every rank's node, host name and pid.
    ///
    /// # Errors
    /// [`RdmaError::Setup`] if MPI is already initialized, if the thread level
    /// is not granted, or if a launcher says this process is one of N > 1
    /// ranks but MPI gave it a world of 1 (a binary linked to one MPI started
    /// by another MPI's launcher runs as N singletons).
    pub fn init() -> Result<Mpi> {
        let (universe, level) = mpi::initialize_with_threading(Threading::Multiple)
            .ok_or_else(|| RdmaError::Setup("MPI is already initialized".into()))?;
        let library = mpi::environment::library_version()
            .unwrap_or_default()
            .lines()
            .next()
            .unwrap_or("")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        if level != Threading::Multiple {
            return Err(RdmaError::Setup(format!(
                "{library} granted thread level {level:?}, the runtime needs MPI_THREAD_MULTIPLE"
            )));
        }
        let world = universe.world();
        // SAFETY: the world communicator is valid after init; the error
        // handler is a predefined constant.
        check("MPI_Comm_set_errhandler", unsafe {
            ffi::MPI_Comm_set_errhandler(world.as_raw(), ffi::RSMPI_ERRORS_RETURN)
        })?;
        let rank = world.rank() as usize;
        let size = world.size() as usize;
        if size == 1 {
            if let Some((var, n)) = launched_ranks() {
                return Err(RdmaError::Setup(format!(
                    "{var}={n} says this process is one of {n} ranks, but MPI started it alone \
                     (world size 1): this binary is linked with \"{library}\" and was probably \
                     started by another MPI's launcher. Use the mpirun of the MPI it was built \
                     with (MPICH: mpirun.mpich; Open MPI: mpirun.openmpi), or rebuild it against \
                     the launcher's MPI (MPICC or MPI_PKG_CONFIG)"
                )));
            }
        }
        // Ranks sharing memory with this one (MPI_COMM_TYPE_SHARED).
        // SAFETY: a constant of the rsmpi shim, set at load time.
        let mut node_comm: ffi::MPI_Comm = unsafe { ffi::RSMPI_COMM_NULL };
        // SAFETY: valid communicator, predefined split type and info; the
        // out-pointer is a live local.
        check("MPI_Comm_split_type", unsafe {
            ffi::MPI_Comm_split_type(
                world.as_raw(),
                ffi::RSMPI_COMM_TYPE_SHARED,
                rank as c_int,
                ffi::RSMPI_INFO_NULL,
                &mut node_comm,
            )
        })?;
        let (mut local_rank, mut local_size): (c_int, c_int) = (0, 0);
        let mut leader: u64 = 0;
        let me = rank as u64;
        // SAFETY: node_comm was just created; out-pointers are live locals;
        // MPI_UINT64_T matches u64.
        let node_rc = unsafe {
            let mut rc = ffi::MPI_Comm_rank(node_comm, &mut local_rank);
            if rc == 0 {
                rc = ffi::MPI_Comm_size(node_comm, &mut local_size);
            }
            if rc == 0 {
                // The node's leader: its lowest world rank.
                rc = ffi::MPI_Allreduce(
                    (&me as *const u64).cast(),
                    (&mut leader as *mut u64).cast(),
                    1,
                    ffi::RSMPI_UINT64_T,
                    ffi::RSMPI_MIN,
                    node_comm,
                );
            }
            ffi::MPI_Comm_free(&mut node_comm);
            rc
        };
        check("MPI_Comm_split_type", node_rc)?;
        let mut leaders = vec![0u64; size];
        world.all_gather_into(&leader, &mut leaders[..]);
        let mut distinct = leaders.clone();
        distinct.sort_unstable();
        distinct.dedup();
        let node_of = leaders
            .iter()
            .map(|l| distinct.binary_search(l).unwrap_or(0))
            .collect();
        let mut pids = vec![0u32; size];
        world.all_gather_into(&std::process::id(), &mut pids[..]);
        let mut host = [0u8; HOST_BYTES];
        let name = mpi::environment::processor_name().unwrap_or_default();
        let n = name.len().min(HOST_BYTES);
        host[..n].copy_from_slice(&name.as_bytes()[..n]);
        let mut all = vec![0u8; HOST_BYTES * size];
        world.all_gather_into(&host[..], &mut all[..]);
        let hosts = all
            .chunks(HOST_BYTES)
            .map(|c| {
                let end = c.iter().position(|&b| b == 0).unwrap_or(c.len());
                String::from_utf8_lossy(&c[..end]).into_owned()
            })
            .collect();
        Ok(Mpi {
            rank,
            size,
            node_of,
            local_rank: local_rank as usize,
            local_size: local_size as usize,
            pids,
            hosts,
            library,
            world,
            _universe: universe,
        })
    }

    /// This rank in `MPI_COMM_WORLD`.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Number of ranks.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Node index (0-based, numbered by each node's lowest rank) of `rank`.
    pub fn node_of(&self, rank: usize) -> usize {
        self.node_of[rank]
    }

    /// Number of distinct nodes.
    pub fn nodes(&self) -> usize {
        self.node_of.iter().max().map_or(1, |m| m + 1)
    }

    /// This rank's index among the ranks of its node.
    pub fn local_rank(&self) -> usize {
        self.local_rank
    }

    /// Ranks on this rank's node.
    pub fn local_size(&self) -> usize {
        self.local_size
    }

    /// Process id of `rank`.
    pub fn pid_of(&self, rank: usize) -> u32 {
        self.pids[rank]
    }

    /// Host name (`MPI_Get_processor_name`) of `rank`.
    pub fn host_of(&self, rank: usize) -> &str {
        &self.hosts[rank]
    }

    /// First line of `MPI_Get_library_version`, e.g. "MPICH Version: 4.0.2".
    pub fn library(&self) -> &str {
        &self.library
    }

    /// The world communicator, for rsmpi's safe two-sided and collective
    /// calls (benchmarks compare the remote ring with them).
    pub fn world(&self) -> &SimpleCommunicator {
        &self.world
    }

    /// The world communicator's raw handle (for windows).
    pub(crate) fn world_raw(&self) -> ffi::MPI_Comm {
        self.world.as_raw()
    }

    /// Blocks until every rank calls it (`MPI_Barrier`).
    pub fn barrier(&self) {
        self.world.barrier();
    }

    /// Every rank's `value`, indexed by rank (`MPI_Allgather`).
    pub fn all_gather_u64(&self, value: u64) -> Vec<u64> {
        let mut out = vec![0u64; self.size];
        self.world.all_gather_into(&value, &mut out[..]);
        out
    }

    /// Rank `root`'s `value` on every rank (`MPI_Bcast`).
    pub fn broadcast_u64(&self, root: usize, value: u64) -> u64 {
        let mut v = value;
        self.world
            .process_at_rank(root as c_int)
            .broadcast_into(&mut v);
        v
    }

    /// Gathers every rank's `bytes` at rank `root` (`MPI_Gatherv`): `Some`
    /// (indexed by rank) at the root, `None` elsewhere.
    ///
    /// # Errors
    /// [`RdmaError::Setup`] if the total exceeds 2 GiB (MPI counts are `int`).
    pub fn gather_bytes(&self, root: usize, bytes: &[u8]) -> Result<Option<Vec<Vec<u8>>>> {
        let proc = self.world.process_at_rank(root as c_int);
        let len = bytes.len() as u64;
        if self.rank == root {
            let mut lens = vec![0u64; self.size];
            proc.gather_into_root(&len, &mut lens[..]);
            let total: u64 = lens.iter().sum();
            if total > i32::MAX as u64 {
                return Err(RdmaError::Setup(format!(
                    "gathering {total} bytes at rank {root}: more than 2 GiB"
                )));
            }
            let counts: Vec<c_int> = lens.iter().map(|&l| l as c_int).collect();
            let displs: Vec<c_int> = counts
                .iter()
                .scan(0, |acc, &c| {
                    let d = *acc;
                    *acc += c;
                    Some(d)
                })
                .collect();
            let mut buf = vec![0u8; total as usize];
            {
                let mut part = PartitionMut::new(&mut buf[..], &counts[..], &displs[..]);
                proc.gather_varcount_into_root(bytes, &mut part);
            }
            Ok(Some(
                displs
                    .iter()
                    .zip(&counts)
                    .map(|(&d, &c)| buf[d as usize..(d + c) as usize].to_vec())
                    .collect(),
            ))
        } else {
            if len > i32::MAX as u64 {
                return Err(RdmaError::Setup(format!(
                    "gathering {len} bytes at rank {root}: more than 2 GiB"
                )));
            }
            proc.gather_into(&len);
            proc.gather_varcount_into(bytes);
            Ok(None)
        }
    }

    /// Lets MPI make progress on one-sided operations targeting this rank
    /// (`MPI_Iprobe`). MPICH's ch4:ucx does not progress passive-target RMA
    /// unless the target calls into MPI: receivers call this while they poll.
    pub fn progress(&self) {
        progress_raw(self.world.as_raw());
    }

    /// Ends every rank of the job with exit code `code` (`MPI_Abort`): the
    /// way out when a peer is lost and collective teardown would hang.
    pub fn abort(&self, code: i32) -> ! {
        // SAFETY: the world communicator is valid while `self` lives.
        unsafe {
            ffi::MPI_Abort(self.world.as_raw(), code);
        }
        std::process::exit(code)
    }
}

/// `MPI_Iprobe` on `comm`, result ignored: a call into MPI's progress engine.
pub(crate) fn progress_raw(comm: ffi::MPI_Comm) {
    let mut flag: c_int = 0;
    // SAFETY: STATUS_IGNORE is a predefined out-pointer; `flag` is a live
    // local; `comm` is a valid communicator (callers hold a borrow of Mpi).
    unsafe {
        ffi::MPI_Iprobe(
            ffi::RSMPI_ANY_SOURCE,
            ffi::RSMPI_ANY_TAG,
            comm,
            &mut flag,
            ffi::RSMPI_STATUS_IGNORE,
        );
    }
}

/// Datatype of bytes for raw calls.
pub(crate) fn byte_type() -> ffi::MPI_Datatype {
    // SAFETY: constant set by the C shim at load time.
    unsafe { sys::AIR_MPI_BYTE }
}

/// A `mpirun -np N` command for tests and tools: the launcher named by
/// `AIR_MPIRUN` (default `mpirun`), with the options Open MPI needs here
/// (`--oversubscribe`, and `--allow-run-as-root` when run as root).
pub fn mpirun_command(np: usize) -> std::process::Command {
    let launcher = std::env::var("AIR_MPIRUN").unwrap_or_else(|_| "mpirun".into());
    let mut cmd = std::process::Command::new(&launcher);
    let open_mpi = std::process::Command::new(&launcher)
        .arg("--version")
        .output()
        .map(|o| {
            // "mpirun (Open MPI) 4.1.4", or "(OpenRTE)" under another name.
            let v = String::from_utf8_lossy(&o.stdout);
            v.contains("Open MPI") || v.contains("OpenRTE")
        })
        .unwrap_or(false);
    if open_mpi {
        cmd.arg("--oversubscribe");
        // SAFETY: getuid has no preconditions.
        if unsafe { libc::getuid() } == 0 {
            cmd.arg("--allow-run-as-root");
        }
    }
    cmd.arg("-np").arg(np.to_string());
    cmd
}
