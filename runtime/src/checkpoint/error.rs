//! What can go wrong with a checkpoint directory, naming the file.

use super::FORMAT_VERSION;
use std::io;
use std::path::{Path, PathBuf};

/// Why a checkpoint could not be written, read or found. Every variant names
/// the file or directory concerned.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// A file-system operation on `path` failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// The file at `path` is damaged (truncated, checksum mismatch, bad
    /// magic, inconsistent header or manifest, missing part).
    #[error("{}: {why}", path.display())]
    Corrupt {
        /// The damaged file.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// The file at `path` belongs to another job: its signature is `found`,
    /// this job's is `expected`. The directory is probably the wrong one.
    #[error(
        "{}: belongs to another job (another query, options or inputs: signature {found:016x}, this job's is {expected:016x}); use another --checkpoint-dir, or --fresh (a library job: Job::fresh) to delete it and start over",
        path.display()
    )]
    OtherJob {
        /// The manifest or part file.
        path: PathBuf,
        /// The job signature in the file.
        found: u64,
        /// This job's signature.
        expected: u64,
    },
    /// The file at `path` has format version `found`, which this build
    /// (version [`FORMAT_VERSION`]) cannot read.
    #[error(
        "{}: checkpoint format version {found}, this build reads version {FORMAT_VERSION}",
        path.display()
    )]
    Version {
        /// The manifest or part file.
        path: PathBuf,
        /// The version in the file.
        found: u32,
    },
    /// The manifest at `path` is for `found` workers, this job has
    /// `expected`, and some of the job's state (`cannot`) cannot be
    /// redistributed to another worker count.
    #[error(
        "{}: checkpoint of {found} workers, this job has {expected}, and this state cannot move to another worker count: {cannot} (rerun with {found} workers in all, or --fresh (a library job: Job::fresh) to start over)",
        path.display()
    )]
    Workers {
        /// The manifest.
        path: PathBuf,
        /// Workers in the manifest.
        found: u64,
        /// Workers of this job.
        expected: u64,
        /// What cannot rescale (short type names).
        cannot: String,
    },
    /// `dir` holds complete checkpoints but every one is damaged; `why`
    /// lists each with its damage.
    #[error(
        "no usable checkpoint in {}: {why} (--fresh, in a library job Job::fresh, deletes them and starts over)",
        dir.display()
    )]
    NoneUsable {
        /// The checkpoint directory.
        dir: PathBuf,
        /// Every complete checkpoint and why it is unusable.
        why: String,
    },
    /// A call's arguments are invalid for the store at `path` (worker out of
    /// range, checkpoint id 0, duplicate slot, `retained` or `workers` 0).
    #[error("{}: {why}", path.display())]
    Invalid {
        /// The store's directory or the file concerned.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
}

/// Shorthand for an I/O error on `path`.
pub(super) fn io_err(path: &Path) -> impl FnOnce(io::Error) -> CheckpointError + '_ {
    move |source| CheckpointError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Shorthand for a corrupt-file error.
pub(super) fn corrupt(path: &Path, why: impl Into<String>) -> CheckpointError {
    CheckpointError::Corrupt {
        path: path.to_path_buf(),
        why: why.into(),
    }
}
