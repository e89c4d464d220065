//! Where this `air` process stands in a run: alone (the embedded default),
//! or one rank of an MPI job started by `mpirun`/`mpiexec`/`srun` (feature
//! `mpi`). Only the few places that must differ look at it: the job
//! configuration, who writes the outputs, and how errors end the job.

use super::common::CliError;
#[cfg(feature = "mpi")]
use std::sync::Arc;

/// This process's place in the run.
#[derive(Clone, Debug, Default)]
pub struct Dist {
    /// The MPI environment when started as one of several ranks.
    #[cfg(feature = "mpi")]
    pub mpi: Option<Arc<air_rdma::Mpi>>,
}

impl Dist {
    /// Initializes MPI when a launcher started this process as one of
    /// several ranks; the embedded default otherwise.
    ///
    /// # Errors
    /// Built without the `mpi` feature but started as one of several ranks;
    /// or MPI initialization failed (e.g. a launcher of another MPI).
    pub fn init() -> Result<Dist, CliError> {
        let launched = air_rdma_launched();
        #[cfg(feature = "mpi")]
        {
            if launched.is_some() {
                let mpi =
                    air_rdma::Mpi::init().map_err(|e| CliError::Other(anyhow::anyhow!("{e}")))?;
                if let Err(e) = air_runtime::plan::emulated_ranks_per_node_from_env() {
                    // Every rank has the same environment: rank 0 says it.
                    return Err(if mpi.rank() == 0 {
                        CliError::BadInput(e)
                    } else {
                        quiet_after_rank0(2)
                    });
                }
                return Ok(Dist {
                    mpi: Some(Arc::new(mpi)),
                });
            }
            Ok(Dist { mpi: None })
        }
        #[cfg(not(feature = "mpi"))]
        {
            if let Some((var, n)) = launched {
                return Err(CliError::Other(anyhow::anyhow!(
                    "{var}={n}: started as one of {n} ranks, but this air was built without \
                     MPI; rebuild with `cargo build --release --features mpi` (the ranks would \
                     otherwise each run the whole job alone)"
                )));
            }
            Ok(Dist::default())
        }
    }

    /// Checks that every rank was started with the same arguments (an MPMD
    /// launch could give ranks different options, and a job whose ranks
    /// disagree on, say, the window size or the seed would give wrong
    /// results). Rank 0 reports; the others exit quietly with the same code.
    pub fn check_same_args(&self) -> Result<(), CliError> {
        #[cfg(feature = "mpi")]
        if let Some(m) = &self.mpi {
            // FNV-1a over the arguments (the program path excluded).
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            for a in std::env::args_os().skip(1) {
                for b in a.as_encoded_bytes().iter().chain(&[0u8]) {
                    h = (h ^ *b as u64).wrapping_mul(0x0100_0000_01b3);
                }
            }
            let all = m.all_gather_u64(h);
            if let Some(r) = all.iter().position(|&x| x != all[0]) {
                if m.rank() != 0 {
                    return Err(CliError::Quiet(2));
                }
                return Err(CliError::BadInput(format!(
                    "rank {r} was started with other arguments than rank 0: every rank of a \
                     job must run the same command"
                )));
            }
        }
        Ok(())
    }

    /// This rank (0 when alone).
    pub fn rank(&self) -> usize {
        #[cfg(feature = "mpi")]
        if let Some(m) = &self.mpi {
            return m.rank();
        }
        0
    }

    /// Number of ranks (1 when alone).
    pub fn ranks(&self) -> usize {
        #[cfg(feature = "mpi")]
        if let Some(m) = &self.mpi {
            return m.size();
        }
        1
    }

    /// Whether this process writes the merged outputs (rank 0).
    pub fn is_root(&self) -> bool {
        self.rank() == 0
    }

    #[cfg(feature = "mpi")]
    fn cluster(&self, force_network: bool) -> Option<air_runtime::cluster::ClusterConfig> {
        // Checked in `Dist::init`.
        let emulate = air_runtime::plan::emulated_ranks_per_node_from_env()
            .ok()
            .flatten();
        self.mpi
            .as_ref()
            .map(|m| air_runtime::cluster::ClusterConfig {
                mpi: m.clone(),
                force_network,
                emulate_ranks_per_node: emulate,
            })
    }

    /// Sets `cfg` to span every rank.
    pub fn configure(&self, cfg: &mut air_runtime::JobConfig, force_network: bool) {
        #[cfg(feature = "mpi")]
        {
            cfg.cluster = self.cluster(force_network);
        }
        #[cfg(not(feature = "mpi"))]
        let _ = (cfg, force_network);
    }

    /// Every rank's `local` result: `Err` on every rank if any rank failed
    /// (the failing rank's own message, or one naming the failed rank), so
    /// no rank enters a collective step the others skip.
    pub fn agree(&self, local: Result<(), CliError>) -> Result<(), CliError> {
        #[cfg(feature = "mpi")]
        if let Some(m) = &self.mpi {
            let code = match &local {
                Ok(()) => 0,
                Err(CliError::BadInput(_)) => 2,
                Err(_) => 1,
            };
            let all = m.all_gather_u64(code);
            // Every rank saw the same options: only rank 0 reports errors
            // that every rank hit alike; a rank's own error is its to print.
            let same = all.iter().all(|&c| c == code);
            match local {
                Err(e) if same && m.rank() != 0 => return Err(CliError::Quiet(e.exit_code())),
                Err(e) => return Err(e),
                Ok(()) => {}
            }
            if let Some((r, &c)) = all.iter().enumerate().find(|(_, &c)| c != 0) {
                if m.rank() != 0 {
                    return Err(CliError::Quiet(c as i32));
                }
                let msg = format!("rank {r} failed before the run (see its message)");
                return Err(if c == 2 {
                    CliError::BadInput(msg)
                } else {
                    CliError::Other(anyhow::anyhow!(msg))
                });
            }
            return Ok(());
        }
        local
    }

    /// Gathers every rank's `bytes` at rank 0 (indexed by rank); `None` on
    /// other ranks. Alone: `Some(vec![bytes])`.
    pub fn gather(&self, bytes: Vec<u8>) -> Result<Option<Vec<Vec<u8>>>, CliError> {
        #[cfg(feature = "mpi")]
        if let Some(m) = &self.mpi {
            return m
                .gather_bytes(0, &bytes)
                .map_err(|e| CliError::Other(anyhow::anyhow!("{e}")));
        }
        Ok(Some(vec![bytes]))
    }

    /// The maximum of `v` over every rank (alone: `v`).
    pub fn all_max(&self, v: u64) -> u64 {
        #[cfg(feature = "mpi")]
        if let Some(m) = &self.mpi {
            return m.all_gather_u64(v).into_iter().max().unwrap_or(v);
        }
        v
    }

    /// The sum of `v` over every rank (alone: `v`).
    pub fn all_sum(&self, v: u64) -> u64 {
        #[cfg(feature = "mpi")]
        if let Some(m) = &self.mpi {
            return m.all_gather_u64(v).into_iter().sum();
        }
        v
    }

    /// Waits for every rank (`MPI_Barrier`); alone: returns at once.
    pub fn barrier(&self) {
        #[cfg(feature = "mpi")]
        if let Some(m) = &self.mpi {
            m.barrier();
        }
    }

    /// Rank 0's exit code on every rank (alone: `code`).
    pub fn agree_exit_code(&self, code: i32) -> i32 {
        #[cfg(feature = "mpi")]
        if let Some(m) = &self.mpi {
            return m.broadcast_u64(0, code as u64) as i32;
        }
        code
    }

    /// Ends a failed distributed job: prints `msg` and aborts every rank
    /// (collective teardown could hang when a peer is gone). Alone: returns.
    pub fn abort_if_distributed(&self, msg: &str, code: i32) {
        #[cfg(feature = "mpi")]
        if let Some(m) = &self.mpi {
            if m.size() > 1 {
                air_runtime::say!("air: rank {}: error: {msg}", m.rank());
                // MPI_Abort has the launcher kill every rank at once; give
                // its proxy a moment to forward the line above first (under
                // load, hydra was seen to lose it).
                std::thread::sleep(std::time::Duration::from_millis(200));
                m.abort(code);
            }
        }
        let _ = (msg, code);
    }

    /// What the report says about the MPI run, if distributed.
    pub fn describe(&self, workers: usize, force_network: bool) -> Option<MpiReport> {
        #[cfg(feature = "mpi")]
        if let Some(m) = &self.mpi {
            let cluster = self.cluster(force_network)?;
            return Some(MpiReport {
                library: m.library().to_string(),
                ranks: m.size(),
                nodes: m.nodes(),
                force_network,
                emulated_ranks_per_node: cluster.emulate_ranks_per_node,
                hosts: (0..m.size()).map(|r| m.host_of(r).to_string()).collect(),
                rank0_channels_by_tier: air_runtime::cluster::tier_counts(&cluster, workers),
            });
        }
        let _ = (workers, force_network);
        None
    }
}

/// The MPI part of a report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MpiReport {
    /// `MPI_Get_library_version`, first line.
    pub library: String,
    /// Ranks in the job.
    pub ranks: usize,
    /// Distinct nodes.
    pub nodes: usize,
    /// Whether ranks of one node used the network tier.
    pub force_network: bool,
    /// Host of each rank.
    pub hosts: Vec<String>,
    /// Nodes of this many ranks emulated on one machine (`AIR_EMULATE_RANKS_PER_NODE`).
    pub emulated_ranks_per_node: Option<usize>,
    /// Channels rank 0's workers consume, by tier.
    #[cfg(feature = "mpi")]
    pub rank0_channels_by_tier: air_runtime::cluster::TierCounts,
}

/// This process's rank as its launcher numbered it, before MPI is up, if it
/// was started as one of several ranks: `PMI_RANK` (MPICH's hydra),
/// `OMPI_COMM_WORLD_RANK` (Open MPI), `SLURM_PROCID` (srun). Used to print
/// an error every rank meets alike (a bad option, found before MPI starts)
/// once, from rank 0.
pub fn launcher_rank() -> Option<usize> {
    air_rdma_launched()?;
    ["PMI_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"]
        .iter()
        .find_map(|var| std::env::var(var).ok()?.trim().parse().ok())
}

/// The error of a rank other than 0 that meets the error rank 0 reports
/// (a bad option or environment, found before the ranks can synchronize):
/// exit code `code`, no message, after a pause of 2 s. Open MPI's mpirun
/// kills every rank as soon as one exits non-zero, so a rank that exits
/// before rank 0 has printed would take rank 0's message with it.
pub fn quiet_after_rank0(code: i32) -> CliError {
    std::thread::sleep(std::time::Duration::from_secs(2));
    CliError::Quiet(code)
}

/// The launcher's rank count if this process was started as one of several
/// ranks (the same check air-rdma makes, without linking MPI).
fn air_rdma_launched() -> Option<(&'static str, usize)> {
    const VARS: [&str; 3] = ["PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS"];
    VARS.iter().find_map(|var| {
        let n: usize = std::env::var(var).ok()?.trim().parse().ok()?;
        (n > 1).then_some((*var, n))
    })
}
