//! # air-runtime: workers, channels, exchange, watermarks, metrics
//!
//! A job is W worker threads per process; every worker runs the whole
//! dataflow graph for its shard (AIR's asynchronous iterative routing,
//! [`dataflow::run_graph`]): sources and the stateless operators fused
//! after them push records into exchange edges that route each to the
//! worker owning its key (its key group's owner, [`keygroups`]); the operators after
//! an edge read the batches addressed to them in place. Watermarks and
//! end-of-stream travel in-band on every channel; an operator sees the
//! minimum watermark over its inputs. There is no coordinator.
#![deny(missing_docs)]

pub mod channel;
pub mod checkpoint;
#[cfg(feature = "mpi")]
pub mod cluster;
pub mod data;
pub mod dataflow;
pub mod exchange;
pub mod hotkeys;
#[cfg(feature = "hwloc")]
pub mod hwloc;
pub mod job;
pub mod keygroups;
pub mod live;
pub mod metrics;
pub mod placement;
pub mod plan;
pub mod say;
pub mod stop;
pub mod timeline;
pub mod topology;
pub mod units;

pub use channel::{ChannelError, ChannelRx, ChannelTx, Recv};
pub use data::{ExchangeData, Record};
pub use exchange::{key_hash, mix64, Inputs};
pub use job::{run_workers, EdgeChannels, JobConfig, Progress, WorkerInfo};
pub use metrics::{ChannelMetrics, LatencySummary};
pub use topology::WorkerPlacement;

/// Why a job failed.
#[derive(thiserror::Error)]
pub enum RuntimeError {
    /// A channel failed (its peer vanished, closed early, or memory could not be had).
    #[error("channel from worker {from} to worker {to}: {source}")]
    Channel {
        /// Sending worker.
        from: usize,
        /// Receiving worker.
        to: usize,
        /// The channel's error.
        #[source]
        source: ChannelError,
    },
    /// A worker stopped at setup because a channel it needed was never
    /// made: the worker that should have made it failed first, and that
    /// worker's error is the cause (a job returns it instead when it has
    /// it: [`RuntimeError::is_consequence`]).
    #[error("worker {to} failed to create its channel from worker {from}")]
    MissingChannel {
        /// Sending worker.
        from: usize,
        /// Receiving worker (the one that should have created the channel).
        to: usize,
    },
    /// A worker thread panicked.
    #[error("worker {worker} panicked: {message}")]
    WorkerPanicked {
        /// The worker.
        worker: usize,
        /// Its panic message.
        message: String,
    },
    /// A received batch did not validate (debug builds check every batch).
    #[error("bad batch from worker {from} to worker {to}: {reason}")]
    BadBatch {
        /// Sending worker.
        from: usize,
        /// Receiving worker.
        to: usize,
        /// What was wrong.
        reason: String,
    },
    /// A single record archives larger than a channel's largest frame
    /// (batches of several records are split until they fit).
    #[error("a record of {bytes} bytes (archived) exceeds the channel's largest frame of {max} bytes (raise the ring capacity: --ring-bytes, AIR_RING_BYTES)")]
    BatchTooLarge {
        /// Archived size in bytes.
        bytes: usize,
        /// Largest frame payload in bytes.
        max: usize,
    },
    /// A rank of a distributed job was lost (its process died, or it fell
    /// silent); the message names the rank.
    #[error("{0}")]
    RankLost(String),
    /// An operator failed (a sink could not write, a user function
    /// returned an error); the message says what and where.
    #[error("worker {worker}: {message}")]
    Operator {
        /// The worker.
        worker: usize,
        /// What went wrong.
        message: String,
    },
    /// The job could not be set up.
    #[error("job setup: {0}")]
    Setup(String),
    /// The job was refused before any record moved: it does not fit
    /// (memory, `/dev/shm`, ring capacity), its ranks disagree on the
    /// command, or a worker of some rank could not create its rings (e.g.
    /// out of file descriptors; the ranks agree on that after creating
    /// them, and remove them). Under MPI every rank returns it together (the ranks
    /// agreed on the refusal first), so no rank needs to end the others; the
    /// message is the first refusing rank's own on rank 0 and names that
    /// rank elsewhere. `air` exits with code 2 (a bad option).
    #[error("job setup: {0}")]
    Refused(String),
    /// Records were late and the job was asked to fail on late records
    /// (`fail_on_late`, `--fail-on-late`): the job ran to its end (rows
    /// written as windows closed), then failed with the late records per
    /// operator ([`dataflow::LateLog::summary`]).
    #[error("{records} late record(s) (asked to fail on late records): {summary}")]
    Late {
        /// Late records over every operator of this process.
        records: u64,
        /// The summary's lines, joined by "; ".
        summary: String,
    },
}

/// The message (what `main` returning an error prints is then readable).
impl std::fmt::Debug for RuntimeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self}")
    }
}

impl RuntimeError {
    /// A setup error that refuses the job before anything was made, as
    /// [`RuntimeError::Refused`] (other errors unchanged).
    pub(crate) fn refusal(self) -> Self {
        match self {
            RuntimeError::Setup(m) => RuntimeError::Refused(m),
            e => e,
        }
    }

    /// Whether this error is a consequence of another worker's failure
    /// rather than a cause: a channel that was never made
    /// ([`RuntimeError::MissingChannel`]), or a channel error other than a
    /// ring this worker could not create (a peer's ring closed early or
    /// vanished, a peer's `/dev/shm` segment that never appeared, a lost
    /// rank). A job whose workers fail keeps a cause over its consequences,
    /// so the error it returns says what went wrong, not what followed
    /// (e.g. a worker that could not create its rings for lack of file
    /// descriptors, rather than its peers' "failed to create its channel";
    /// a bad input row, rather than the peers' closed rings).
    pub fn is_consequence(&self) -> bool {
        match self {
            RuntimeError::MissingChannel { .. } => true,
            RuntimeError::Channel {
                source: ChannelError::Shm(e),
                ..
            } => !matches!(
                e,
                air_shm::ShmError::Io { .. }
                    | air_shm::ShmError::NoSpace { .. }
                    | air_shm::ShmError::SegmentExists { .. }
                    | air_shm::ShmError::SegmentRejected { .. }
                    | air_shm::ShmError::BadCapacity { .. }
            ),
            #[cfg(feature = "mpi")]
            RuntimeError::Channel { .. } => true,
            _ => false,
        }
    }

    pub(crate) fn channel(from: usize, to: usize, source: impl Into<ChannelError>) -> Self {
        RuntimeError::Channel {
            from,
            to,
            source: source.into(),
        }
    }
}
