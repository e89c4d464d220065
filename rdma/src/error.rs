//! Errors of the MPI layer and of the remote frame ring.

/// Everything MPI calls, windows and remote rings can fail with.
#[derive(Debug, thiserror::Error)]
pub enum RdmaError {
    /// An MPI call returned an error code (communicators and windows use
    /// `MPI_ERRORS_RETURN`, so errors come back instead of aborting).
    #[error("{call} failed: {message} (MPI error code {code})")]
    Mpi {
        /// The MPI function, e.g. `MPI_Put`.
        call: &'static str,
        /// The MPI error code.
        code: i32,
        /// `MPI_Error_string` of the code.
        message: String,
    },
    /// MPI could not be initialized as needed (already initialized, thread
    /// level not granted, or the process was started by the wrong launcher).
    #[error("MPI setup: {0}")]
    Setup(String),
    /// A remote ring has no room for the frame; nothing was written.
    #[error("the remote ring is full")]
    Full,
    /// A frame larger than the remote ring can ever hold.
    #[error("frame of {len} bytes exceeds the remote ring's largest frame of {max} bytes")]
    FrameTooLarge {
        /// Requested payload bytes.
        len: usize,
        /// Largest payload the ring accepts, bytes.
        max: usize,
    },
    /// The sending rank closed the ring (dropped its producer).
    #[error("the sending rank closed the remote ring")]
    Closed,
    /// A rank of the job is gone (its process died, or it stopped sending
    /// heartbeats).
    #[error("rank {rank} is lost: {reason}")]
    RankLost {
        /// The lost rank (in `MPI_COMM_WORLD`).
        rank: usize,
        /// How it was noticed.
        reason: String,
    },
    /// Bytes in a remote ring contradict the protocol (a length past the
    /// ring's end, an unknown kind, a sequence number out of order). Network
    /// bytes are never trusted.
    #[error("remote ring from rank {rank}: corrupt frame at byte {offset}: {reason}")]
    Corrupt {
        /// Sending rank.
        rank: usize,
        /// Offset of the bad frame header in the ring's data area, bytes.
        offset: usize,
        /// What was wrong.
        reason: String,
    },
}

/// `Result` with [`RdmaError`].
pub type Result<T, E = RdmaError> = std::result::Result<T, E>;
