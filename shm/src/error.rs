//! Errors of regions, segments and rings.

use std::path::PathBuf;

/// Everything a region, a segment or a ring can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ShmError {
    /// The ring's other side closed it in an orderly way (or its owner dropped
    /// it). For a consumer this is only reported after every committed frame
    /// has been read.
    #[error("the other side of the ring is closed")]
    Closed,
    /// The other side's process is gone without closing the ring (killed, or
    /// its thread panicked while holding the endpoint).
    #[error("the other side of the ring vanished ({0})")]
    PeerGone(&'static str),
    /// `try_reserve` found no room for the frame; nothing was written.
    #[error("the ring is full")]
    Full,
    /// A frame larger than the ring can ever hold.
    #[error("frame of {len} bytes exceeds the ring's largest frame of {max} bytes")]
    FrameTooLarge {
        /// Requested payload length in bytes.
        len: usize,
        /// Largest payload this ring accepts, in bytes (`Producer::max_payload`).
        max: usize,
    },
    /// A capacity the ring cannot be built with.
    #[error("invalid ring capacity {capacity} bytes: {reason}")]
    BadCapacity {
        /// Requested capacity in bytes.
        capacity: usize,
        /// Why it was refused.
        reason: &'static str,
    },
    /// `/dev/shm` (or the chosen directory) has less free space than the segment needs.
    #[error(
        "not enough space in {dir}: segment needs {needed} bytes, {free} bytes free \
         (enlarge the tmpfs, e.g. `docker run --shm-size`, or use smaller rings)"
    )]
    NoSpace {
        /// Directory that holds the segments.
        dir: PathBuf,
        /// Bytes the segment needs.
        needed: u64,
        /// Bytes free for an unprivileged user.
        free: u64,
    },
    /// A segment of that name exists already: another job, another user, or a
    /// stale segment of a dead job. It is never opened silently.
    #[error(
        "shared-memory segment {path} already exists (owner uid {owner_uid}); another job \
         or a dead one holds this name; `air shm clean` removes stale segments of your own jobs"
    )]
    SegmentExists {
        /// Path of the segment.
        path: PathBuf,
        /// Owner of the existing file.
        owner_uid: u32,
    },
    /// A segment that is not ours to open (other owner, open permissions, bad magic).
    #[error("refusing to open segment {path}: {reason}")]
    SegmentRejected {
        /// Path of the segment.
        path: PathBuf,
        /// Why it was refused.
        reason: String,
    },
    /// The segment did not appear, or was not initialized, within the timeout.
    #[error("timed out after {waited_ms} ms waiting for segment {path}")]
    SegmentTimeout {
        /// Path of the segment.
        path: PathBuf,
        /// How long we waited, in milliseconds.
        waited_ms: u64,
    },
    /// A side of the ring was claimed twice.
    #[error("the {0} side of this ring is already taken")]
    SideTaken(&'static str),
    /// The ring's bytes contradict its protocol (a frame header out of place,
    /// a sequence number out of order): memory corruption or a foreign writer.
    #[error("ring corrupted: {0}")]
    Corrupt(String),
    /// An operating-system call failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What we were doing.
        op: &'static str,
        /// The file involved.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// `Result` with [`ShmError`].
pub type Result<T, E = ShmError> = std::result::Result<T, E>;
