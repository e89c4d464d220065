//! # air: a master-less, zero-copy dataflow runtime
//!
//! Write a stream job as a graph of typed operators; every worker runs the
//! whole graph for its shard of the input and routes records straight to
//! the worker that owns their key. The same program runs on one machine
//! (threads and shared-memory rings) and, started by `mpirun` or `srun`,
//! across the ranks of an MPI job (feature `mpi`).
//!
//! ```no_run
//! use air::prelude::*;
//!
//! #[derive(Clone, Debug, serde::Deserialize)]
//! struct Click { user: u64, time_ms: u64 }
//!
//! fn main() -> Result<(), air::Error> {
//!     air::Job::from_env()?.run(|df| {
//!         df.source(CsvSource::<Click>::shard("clicks.csv", df.index(), df.workers()))
//!             .event_time(|c| c.time_ms, 1_000)
//!             .key_by(|c| c.user)                         // exchange 1
//!             .window(Tumbling::ms(10_000), |c| c.time_ms)
//!             .aggregate(Count)                           // partial, then final
//!             .key_by(|r| r.start)                        // exchange 2
//!             .top_n(3, |r| r.value)                      // rows ranked 1, 2, 3
//!             .map(|r| (r.start, r.rank, r.key, r.value))
//!             .collect()                                  // one writer
//!             .sink(Csv::stdout());                       // rows as windows close
//!     })?;
//!     Ok(())
//! }
//! ```
//!
//! (Not run here: it reads a `clicks.csv` of yours. The [`prelude`] and
//! [`Job`] have examples that run.)
#![deny(missing_docs)]

pub use air_runtime::dataflow::{GraphOutput, Stats, WorkerReport};
/// Live metrics of a user's program: while a
/// [`MetricsServer`](air_runtime::live::MetricsServer) runs (started with
/// `MetricsServer::start("127.0.0.1:9400", rank)`), every job serves its
/// workers' counters in the Prometheus text format at `/metrics`
/// (what `air run --metrics` does; docs/metrics.md).
pub use air_runtime::live;
pub use air_runtime::{JobConfig, RuntimeError as Error};
/// rkyv, for the derives of records that cross an exchange edge
/// (`#[derive(Clone, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]`;
/// the derives name `::rkyv`, so add `rkyv = "0.8"` to your dependencies).
pub use rkyv;

/// Everything a graph needs: `use air::prelude::*;`.
///
/// ```
/// use air::prelude::*;
/// use std::sync::{Arc, Mutex};
///
/// let rows = Arc::new(Mutex::new(Vec::new()));
/// let out = rows.clone();
/// let mut job = air::Job::from_env()?.workers(2);
/// job.config_mut().pin = false;
/// job.run(move |df: &Dataflow| {
///     // (user, time ms): worker w reads every other click.
///     let clicks: Vec<(u64, u64)> = [(1, 100), (2, 200), (1, 300), (1, 1_100)]
///         .into_iter()
///         .skip(df.index())
///         .step_by(2)
///         .collect();
///     let out = out.clone();
///     df.source(VecSource::new(clicks))
///         .event_time(|c| c.1, 0)
///         .key_by(|c| c.0)
///         .window(Tumbling::ms(1_000), |c| c.1)
///         .aggregate(Count)
///         .collect_by_window(|r| r.key)
///         .for_each(move |r| out.lock().unwrap().push((r.start, r.key, r.value)));
/// })?;
/// assert_eq!(*rows.lock().unwrap(), [(0, 1, 2), (0, 2, 1), (1_000, 1, 1)]);
/// # Ok::<(), air::Error>(())
/// ```
pub mod prelude {
    pub use air_operators::graph::*;
    pub use air_operators::sources::live::{LiveFeed, LiveInput};
    pub use air_runtime::dataflow::{
        Dataflow, KeyedStream, Operator, Operator2, Sink, Source, SourcePoll, Stream, Tail,
        VecSource,
    };
    pub use air_runtime::Record;
}

#[cfg(feature = "mpi")]
use std::sync::Arc;

/// Environment variable: worker threads per process, 1 to [`MAX_WORKERS`]
/// (default: one per physical core this process may use). `air run`'s
/// `--workers` falls back to it too.
pub const WORKERS_ENV: &str = "AIR_WORKERS";

/// Environment variable: bytes of each channel ring, taken as given
/// ([`MIN_RING_BYTES`] to [`MAX_RING_BYTES`]; one ring per exchange edge
/// and pair of workers). Unset: 1 MiB, scaled down (to at least 64 KiB)
/// when a node's rings would need more than 1 GiB
/// (`JobConfig::ring_budget`). `air run`'s `--ring-bytes` falls back to it
/// too.
pub const RING_BYTES_ENV: &str = "AIR_RING_BYTES";

/// Environment variable: key groups of the job, 1 to
/// [`air_runtime::keygroups::MAX_KEY_GROUPS`] and at least the job's
/// workers (all ranks); default
/// [`air_runtime::keygroups::DEFAULT_KEY_GROUPS`]. Keyed state is owned,
/// checkpointed and moved per key group; a job resumed from a checkpoint
/// must keep the number. `air run`'s `--max-parallelism` falls back to it
/// too.
pub const MAX_PARALLELISM_ENV: &str = "AIR_MAX_PARALLELISM";

/// Environment variable: checkpoint directory of a job made by
/// [`Job::from_env`] ([`Job::checkpoints`]): unset, no checkpoints; set,
/// the job checkpoints there every [`CHECKPOINT_MS_ENV`] ms and a rerun of
/// the same program resumes from its newest complete checkpoint. What a
/// batch script requeued by SLURM exports, so a program resumes with no
/// change to its code (`air run`'s `--checkpoint-dir` is the option).
pub const CHECKPOINT_DIR_ENV: &str = "AIR_CHECKPOINT_DIR";

/// Environment variable: ms between checkpoints with
/// [`CHECKPOINT_DIR_ENV`], 1 to 3 600 000 (an hour; default 1000), as
/// `air run --checkpoint-ms`.
pub const CHECKPOINT_MS_ENV: &str = "AIR_CHECKPOINT_MS";

/// Environment variable: `1` deletes the checkpoints in
/// [`CHECKPOINT_DIR_ENV`] and starts over ([`Job::fresh`]).
pub const FRESH_ENV: &str = "AIR_FRESH";

/// Most worker threads per process (`AIR_WORKERS`, `--workers`).
pub const MAX_WORKERS: usize = 1024;
/// Smallest ring, bytes: it must hold a batch frame and a control frame
/// (`AIR_RING_BYTES`, `--ring-bytes`).
pub const MIN_RING_BYTES: usize = 4096;
/// Largest ring, bytes: 16 GiB (`AIR_RING_BYTES`, `--ring-bytes`).
pub const MAX_RING_BYTES: usize = 1 << 34;

/// Reads a positive number from environment variable `var`, within `range`.
fn env_number(var: &str, range: std::ops::RangeInclusive<usize>) -> Result<Option<usize>, Error> {
    match std::env::var(var) {
        Err(_) => Ok(None),
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(n) if range.contains(&n) => Ok(Some(n)),
            _ => Err(Error::Setup(format!(
                "{var}={v:?}: expected a number from {} to {}",
                range.start(),
                range.end()
            ))),
        },
    }
}

/// A job: where the graph runs (this process alone, or every rank of the
/// MPI job that started it) and how (workers, rings, batches).
///
/// ```
/// use air::prelude::*;
///
/// let mut job = air::Job::from_env()?.workers(2);
/// job.config_mut().pin = false; // no pinning (e.g. beside other jobs)
/// assert_eq!((job.rank(), job.ranks()), (0, 1)); // alone, not under mpirun
/// let out = job.run(|df| {
///     df.source(VecSource::new(vec![1u64, 2, 3])).key_by(|x| *x).exchange().for_each(|_| {});
/// })?;
/// assert_eq!(out.workers.len(), 2);
/// assert_eq!(out.stats.get("sink_rows"), 6); // 3 records read at each worker
/// # Ok::<(), air::Error>(())
/// ```
pub struct Job {
    cfg: JobConfig,
    /// Print late records per operator on stderr at the end (default).
    report_late: bool,
    /// Fail (`Error::Late`) if any record was late.
    fail_on_late: bool,
    #[cfg(feature = "mpi")]
    mpi: Option<Arc<air_rdma::Mpi>>,
}

impl Job {
    /// The job this process was started for: one rank of an MPI job when a
    /// launcher (`mpirun`, `mpiexec`, `srun`) started several, this process
    /// alone otherwise. Worker threads per process from `AIR_WORKERS`, ring
    /// capacity from `AIR_RING_BYTES` (unset: 1 MiB within a 1 GiB
    /// per-node budget, [`RING_BYTES_ENV`]), key groups from
    /// `AIR_MAX_PARALLELISM` ([`MAX_PARALLELISM_ENV`]);
    /// `AIR_FORCE_NETWORK=1` uses the network tier (RMA) between ranks of
    /// one node too; checkpoints from `AIR_CHECKPOINT_DIR`,
    /// `AIR_CHECKPOINT_MS` and `AIR_FRESH` ([`CHECKPOINT_DIR_ENV`]).
    /// Installs SIGINT/SIGTERM handlers that stop the sources (only windows
    /// every input read past fire).
    ///
    /// # Errors
    /// `AIR_WORKERS`, `AIR_RING_BYTES`, `AIR_MAX_PARALLELISM` or
    /// `AIR_CHECKPOINT_MS` out of range, `AIR_FRESH` not `0` or `1`, an
    /// empty `AIR_CHECKPOINT_DIR`; started
    /// as one of several ranks by a build without the `mpi` feature; MPI
    /// failed to start.
    pub fn from_env() -> Result<Job, Error> {
        let mut cfg = JobConfig::default();
        let dir = std::env::var_os(CHECKPOINT_DIR_ENV);
        if dir.as_ref().is_some_and(|d| d.is_empty()) {
            return Err(Error::Setup(format!(
                "{CHECKPOINT_DIR_ENV} is empty: give the checkpoint directory, or unset it for \
                 no checkpoints"
            )));
        }
        if let Some(dir) = dir {
            let ms = env_number(CHECKPOINT_MS_ENV, 1..=3_600_000)?.unwrap_or(1000);
            let fresh = match std::env::var(FRESH_ENV).as_deref() {
                Err(_) | Ok("0") => false,
                Ok("1") => true,
                Ok(v) => {
                    return Err(Error::Setup(format!(
                        "{FRESH_ENV}={v:?}: expected 1 (start over) or 0"
                    )))
                }
            };
            cfg.barrier_every = Some(std::time::Duration::from_millis(ms as u64));
            cfg.checkpoint = Some(air_runtime::dataflow::CheckpointConfig {
                dir: dir.into(),
                retained: 2,
                fresh,
                job: 0,
            });
        }
        if let Some(n) = env_number(WORKERS_ENV, 1..=MAX_WORKERS)? {
            cfg.workers = n;
        }
        if let Some(n) = env_number(RING_BYTES_ENV, MIN_RING_BYTES..=MAX_RING_BYTES)? {
            cfg.ring_bytes = n;
            cfg.ring_budget = None;
        }
        if let Some(n) = env_number(
            MAX_PARALLELISM_ENV,
            1..=air_runtime::keygroups::MAX_KEY_GROUPS as usize,
        )? {
            cfg.key_groups = n as u32;
        }
        air_runtime::stop::install_handlers();
        let launched = ["PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS"]
            .iter()
            .find_map(|var| {
                let n: usize = std::env::var(var).ok()?.trim().parse().ok()?;
                (n > 1).then_some((*var, n))
            });
        #[cfg(feature = "mpi")]
        {
            let mut mpi = None;
            if launched.is_some() {
                let m = Arc::new(air_rdma::Mpi::init().map_err(|e| Error::Setup(e.to_string()))?);
                let env = |k: &str| std::env::var(k).ok();
                cfg.cluster = Some(air_runtime::cluster::ClusterConfig {
                    mpi: m.clone(),
                    force_network: env(air_runtime::cluster::FORCE_NETWORK_ENV).as_deref()
                        == Some("1"),
                    emulate_ranks_per_node: air_runtime::plan::emulated_ranks_per_node_from_env()
                        .map_err(Error::Setup)?,
                });
                mpi = Some(m);
            }
            Ok(Job {
                cfg,
                mpi,
                report_late: true,
                fail_on_late: false,
            })
        }
        #[cfg(not(feature = "mpi"))]
        {
            if let Some((var, n)) = launched {
                return Err(Error::Setup(format!(
                    "{var}={n}: started as one of {n} ranks, but air was built without MPI \
                     (enable the `mpi` feature); each rank would run the whole job alone"
                )));
            }
            Ok(Job {
                cfg,
                report_late: true,
                fail_on_late: false,
            })
        }
    }

    /// Sets the worker threads per process.
    pub fn workers(mut self, n: usize) -> Self {
        self.cfg.workers = n.max(1);
        self
    }

    /// Sets the job's key groups (Flink's "max parallelism"): keys hash to
    /// one of `k` groups, and each worker owns an even range of groups
    /// (`air_runtime::keygroups`). At least the job's workers (all ranks)
    /// and at most 65 536, else [`Job::run`] fails with [`Error::Setup`];
    /// default 32 768. Rows do not depend on it.
    pub fn max_parallelism(mut self, k: u32) -> Self {
        self.cfg.key_groups = k;
        self
    }

    /// Checkpoints every `every` into `dir` (docs/guide.md,
    /// "Checkpoints"): each worker's state is written at in-band barriers,
    /// and a job started with a complete checkpoint of the same graph in
    /// `dir` resumes from the newest one (stderr says so), sources at their
    /// saved positions; CSV and JSON-lines sinks are then exactly-once. At
    /// another worker count the state is redistributed by key group where
    /// every operator, source and sink can rescale (the guide's "Rescale on
    /// resume"); otherwise the job is refused before it starts. Keeps the 2 newest complete checkpoints. What your
    /// build closure captures (parameters, inputs) is not checked: use
    /// another `dir`, or [`Job::fresh`], when they change. A graph with
    /// state that cannot be saved yet (keyed `process` without
    /// `_checkpointed`, a live input, a `Source` without `save`) makes
    /// [`Job::run`] fail with
    /// [`Error::Setup`] before any worker starts.
    ///
    /// ```
    /// use air::prelude::*;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let mut job = air::Job::from_env()?
    ///     .workers(2)
    ///     .checkpoints(dir.path().join("ck"), std::time::Duration::from_millis(100));
    /// job.config_mut().pin = false;
    /// let out = job.run(|df| {
    ///     let mine: Vec<(u32, u64)> = (0..10_000u64).map(|i| ((i % 7) as u32, i)).collect();
    ///     df.source(VecSource::new(mine))
    ///         .event_time(|r| r.1, 0)
    ///         .key_by(|r| r.0)
    ///         .window(Tumbling::ms(1_000), |r| r.1)
    ///         .aggregate(Count)
    ///         .collect()
    ///         .sink(Csv::to_path(dir.path().join("rows.csv")));
    /// })?;
    /// assert_eq!(out.resumed_from, None); // a fresh start
    /// assert_eq!(out.stats.get("sink_rows"), 70); // 10 windows × 7 keys
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn checkpoints(
        mut self,
        dir: impl Into<std::path::PathBuf>,
        every: std::time::Duration,
    ) -> Self {
        self.cfg.barrier_every = Some(every);
        self.cfg.checkpoint = Some(air_runtime::dataflow::CheckpointConfig {
            dir: dir.into(),
            retained: 2,
            fresh: false,
            job: 0,
        });
        self
    }

    /// With [`Job::checkpoints`]: delete the checkpoints in its directory
    /// and start from the first event (`air run --fresh`).
    pub fn fresh(mut self, on: bool) -> Self {
        if let Some(c) = &mut self.cfg.checkpoint {
            c.fresh = on;
        }
        self
    }

    /// Whether [`Job::run`] prints late records (and the number of bad
    /// input records skipped) on stderr when the job ends (default: yes):
    /// per operator (the line of the program that made
    /// it), how many, the first late record's event time and the watermark
    /// it fell behind, and a watermark delay that would have kept them (the
    /// largest lag behind the newest event time seen). Under MPI each rank
    /// prints its own workers' (`air: rank R: …`).
    pub fn report_late(mut self, on: bool) -> Self {
        self.report_late = on;
        self
    }

    /// Makes late records an error: [`Job::run`] returns
    /// [`Error::Late`] if any record was late and dropped (after the job ran
    /// to its end and wrote its rows); records a window sent to a side
    /// stream (`side_output_late`) are not lost and do not count. Off by
    /// default.
    ///
    /// ```
    /// use air::prelude::*;
    ///
    /// let mut job = air::Job::from_env()?.workers(1).fail_on_late(true).report_late(false);
    /// job.config_mut().pin = false;
    /// let err = job
    ///     .run(|df| {
    ///         // 2 500 closes [0, 1000) (delay 0): the record at 100 is late.
    ///         df.source(VecSource::new(vec![(1u32, 2_500u64), (1, 100)]))
    ///             .event_time(|r| r.1, 0)
    ///             .key_by(|r| r.0)
    ///             .window(Tumbling::ms(1_000), |r| r.1)
    ///             .aggregate(Count)
    ///             .for_each(|_| {});
    ///     })
    ///     .unwrap_err();
    /// assert!(matches!(err, air::Error::Late { records: 1, .. }), "{err}");
    /// assert!(err.to_string().contains("event time 100 ms"), "{err}");
    /// # Ok::<(), air::Error>(())
    /// ```
    pub fn fail_on_late(mut self, on: bool) -> Self {
        self.fail_on_late = on;
        self
    }

    /// The configuration (ring bytes, batch size, flush interval, pinning).
    pub fn config_mut(&mut self) -> &mut JobConfig {
        &mut self.cfg
    }

    /// This process's rank (0 when alone).
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

    /// Starts reading a live input for this process's workers, to read
    /// with [`LiveSource`](air_operators::graph::LiveSource) in the graph:
    /// `spec` is `-` (standard input), `tcp://HOST:PORT` (connect to a
    /// server that sends lines), `listen://HOST:PORT` (accept senders;
    /// the input ends when every sender that came has closed) or
    /// `follow://PATH` (a file read as it grows, like `tail -F`; it ends
    /// only with the job's stop, SIGINT/SIGTERM). `{rank}` in
    /// the address is replaced by this process's rank, so each MPI rank
    /// reads its own input. Call it before [`Job::run`], and after
    /// [`Job::workers`] (the feed hands chunks to that many workers).
    ///
    /// # Errors
    /// [`Error::Setup`]: `spec` is none of the above, the connection was
    /// refused, or the address cannot be listened on (the message names it).
    pub fn live_input(&self, spec: &str) -> Result<air_operators::sources::live::LiveFeed, Error> {
        use air_operators::sources::live::{LiveFeed, LiveInput, LiveOptions};
        let input = if let Some(a) = spec.strip_prefix("listen://") {
            LiveInput::Listen(a.to_string())
        } else if let Some(p) = spec.strip_prefix("follow://") {
            LiveInput::Follow(p.into())
        } else {
            LiveInput::from_input_arg(std::path::Path::new(spec)).ok_or_else(|| {
                Error::Setup(format!(
                    "live input {spec:?}: expected -, tcp://HOST:PORT, listen://HOST:PORT or \
                     follow://PATH"
                ))
            })?
        }
        .for_rank(self.rank());
        LiveFeed::start(&input, self.cfg.workers, LiveOptions::default())
            .map_err(|e| Error::Setup(format!("live input {}: {e}", input.name())))
    }

    /// Runs the graph `build` makes on every worker of the job (see
    /// [`air_runtime::dataflow::run_graph`]): `build` runs once to plan and
    /// check the graph, then once on every worker. Returns this process's
    /// counters and latency once every input ended (or a signal stopped
    /// the sources).
    ///
    /// # Errors
    /// A graph that cannot run, channel setup, a failed operator or sink,
    /// a panicking worker, a lost rank. Under MPI a failed job cannot be
    /// torn down collectively (peers may be dead or blocked on this rank):
    /// the rank prints the error (`air: rank R: error: …`) and ends the
    /// whole job with `MPI_Abort` (exit code 1, or 2 for a graph that cannot
    /// run or a job refused at setup, which rank 0 alone prints) instead of
    /// returning.
    pub fn run<B>(&self, build: B) -> Result<GraphOutput, Error>
    where
        B: Fn(&air_runtime::dataflow::Dataflow) + Sync,
    {
        let r = air_runtime::dataflow::run_graph(&self.cfg, build).and_then(|out| self.late(out));
        #[cfg(feature = "mpi")]
        if let (Err(e), Some(m)) = (&r, &self.mpi) {
            if m.size() > 1 {
                // A refusal is every rank's at once: rank 0 says it.
                if !matches!(e, Error::Refused(_)) || m.rank() == 0 {
                    air_runtime::say!("air: rank {}: error: {e}", m.rank());
                }
                // Give the launcher's proxy a moment to forward the line
                // before MPI_Abort has it kill every rank.
                std::thread::sleep(std::time::Duration::from_millis(200));
                let code = if matches!(e, Error::Setup(_) | Error::Refused(_)) {
                    2
                } else {
                    1
                };
                m.abort(code);
            }
        }
        r
    }

    /// Reports late records (on stderr unless [`Job::report_late`] is off)
    /// and fails if asked to ([`Job::fail_on_late`]).
    fn late(&self, out: GraphOutput) -> Result<GraphOutput, Error> {
        let who = if self.ranks() > 1 {
            format!("air: rank {}: ", self.rank())
        } else {
            "air: ".to_string()
        };
        let skipped = out.stats.get("skipped_records");
        if skipped > 0 && self.report_late {
            // A source names its first skipped record as it meets it (or
            // keeps it in the `BadRecords` handle it was given).
            air_runtime::say!("{who}{skipped} bad record(s) skipped");
        }
        let lines = out.stats.late_summary();
        if lines.is_empty() {
            return Ok(out);
        }
        if self.report_late && !(self.fail_on_late && out.stats.late.dropped() > 0) {
            for l in &lines {
                air_runtime::say!("{who}{l}");
            }
        }
        if self.fail_on_late && out.stats.late.dropped() > 0 {
            return Err(Error::Late {
                records: out.stats.late.dropped(),
                summary: lines.join("; "),
            });
        }
        Ok(out)
    }
}
