//! Memory regions a ring lives in: anonymous memory (threads of one process)
//! and named segments in `/dev/shm` (processes of one node).
//!
//! A segment's name is `air-<uid>-<job>-<channel>` (see [`SegmentName`]), so
//! two users or two jobs never collide. It is created with `O_EXCL` and mode
//! 0600, its space is checked against the free space of the directory and then
//! reserved with `posix_fallocate` (a full tmpfs is a clear error at creation,
//! never a SIGBUS later), and it is unlinked as soon as both ends have mapped
//! it ([`Region::unlink`]), so a crash afterwards leaves nothing behind.

use crate::error::{Result, ShmError};
use memmap2::MmapMut;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Prefix of every segment this project creates.
pub const SEGMENT_PREFIX: &str = "air-";

/// Directory that holds segments: `$AIR_SHM_DIR` when set, else `/dev/shm`.
pub fn shm_dir() -> PathBuf {
    std::env::var_os("AIR_SHM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/dev/shm"))
}

/// This job's id, the same in every process of the job:
/// `$AIR_JOB_ID` when set (the `air` command sets it for the processes it
/// starts), else `$SLURM_JOB_ID` (with `.$SLURM_STEP_ID` when set), else one
/// generated once per process from the pid and the start time.
pub fn job_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        if let Ok(id) = std::env::var("AIR_JOB_ID") {
            if !id.is_empty() {
                return sanitize(&id);
            }
        }
        if let Ok(id) = std::env::var("SLURM_JOB_ID") {
            let step = std::env::var("SLURM_STEP_ID").unwrap_or_default();
            return if step.is_empty() {
                sanitize(&id)
            } else {
                sanitize(&format!("{id}.{step}"))
            };
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        format!("p{}x{:x}", std::process::id(), nanos & 0xffff_ffff_ffff)
    })
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The effective user id of this process.
pub fn uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The file name of a named segment: `air-<uid>-<job>-<channel>`.
///
/// `job` and `channel` are sanitized to `[A-Za-z0-9._]` (anything else becomes
/// `_`), so the name is always a single path component.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SegmentName(String);

impl SegmentName {
    /// The name for `channel` (e.g. `"r0w1-r1w0"`, the two ends) in `job`.
    pub fn new(job: &str, channel: &str) -> SegmentName {
        SegmentName(format!(
            "{SEGMENT_PREFIX}{}-{}-{}",
            uid(),
            sanitize(job),
            sanitize(channel)
        ))
    }

    /// The name for `channel` in this process's [`job_id`].
    pub fn for_channel(channel: &str) -> SegmentName {
        SegmentName::new(job_id(), channel)
    }

    /// The file name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Full path under [`shm_dir`].
    pub fn path(&self) -> PathBuf {
        shm_dir().join(&self.0)
    }
}

impl std::fmt::Display for SegmentName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Bytes free for an unprivileged user in the file system holding `dir`.
pub fn free_bytes(dir: &Path) -> Result<u64> {
    let c =
        std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).map_err(|_| ShmError::Io {
            op: "statvfs",
            path: dir.to_owned(),
            source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
        })?;
    // SAFETY: an all-zero statvfs is a valid value of this plain C struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path that outlives the call; `st` is a
    // valid, writable statvfs.
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    if rc != 0 {
        return Err(ShmError::Io {
            op: "statvfs",
            path: dir.to_owned(),
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}

enum Backing {
    Anon(MmapMut),
    Segment {
        map: MmapMut,
        /// The open file, holding a shared `flock` while this end may need
        /// the segment's name: [`clean_stale`] removes only segments nobody
        /// holds. `None` once [`Region::unlink_and_close`] closed it.
        file: Option<File>,
        path: PathBuf,
        /// (device, inode) of the file we mapped, so we never unlink a
        /// different file that took the same name later.
        id: (u64, u64),
        unlinked: AtomicBool,
        creator: bool,
    },
}

/// A mapped memory region: page-aligned, zero-filled at creation, `len` bytes.
pub struct Region {
    backing: Backing,
}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.backing {
            Backing::Anon(m) => write!(f, "Region::Anon({} bytes)", m.len()),
            Backing::Segment { map, path, .. } => {
                write!(
                    f,
                    "Region::Segment({}, {} bytes)",
                    path.display(),
                    map.len()
                )
            }
        }
    }
}

impl Region {
    /// Anonymous private memory of `len` bytes, for rings between threads.
    pub fn anonymous(len: usize) -> Result<Region> {
        let map = MmapMut::map_anon(len).map_err(|e| ShmError::Io {
            op: "mmap anonymous",
            path: PathBuf::from(format!("<{len} bytes>")),
            source: e,
        })?;
        Ok(Region {
            backing: Backing::Anon(map),
        })
    }

    /// Creates the named segment `name` of `len` bytes in [`shm_dir`]:
    /// `O_CREAT|O_EXCL`, mode 0600, space checked and reserved.
    ///
    /// Errors: [`ShmError::SegmentExists`] if the name is taken,
    /// [`ShmError::NoSpace`] if the directory has less than `len` bytes free,
    /// [`ShmError::Io`] for other failures.
    pub fn create_segment(name: &SegmentName, len: usize) -> Result<Region> {
        Self::create_segment_inner(name, len, true)
    }

    /// As [`Region::create_segment`], but the segment's pages are not
    /// reserved yet: the free space of the directory is checked for all
    /// `len` bytes, and each user of a part of the segment reserves that
    /// part with [`Region::reserve`] before touching it (so that the pages
    /// of each part are allocated by the thread that reserves it, on its
    /// NUMA node, and a full tmpfs is still an error, never a SIGBUS).
    ///
    /// # Errors
    /// As [`Region::create_segment`].
    pub fn create_segment_unreserved(name: &SegmentName, len: usize) -> Result<Region> {
        Self::create_segment_inner(name, len, false)
    }

    fn create_segment_inner(name: &SegmentName, len: usize, reserve_all: bool) -> Result<Region> {
        let dir = shm_dir();
        let path = dir.join(name.as_str());
        let free = free_bytes(&dir)?;
        if len as u64 > free {
            return Err(ShmError::NoSpace {
                dir,
                needed: len as u64,
                free,
            });
        }
        let file = match OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let owner_uid = std::fs::symlink_metadata(&path)
                    .map(|m| m.uid())
                    .unwrap_or(u32::MAX);
                return Err(ShmError::SegmentExists { path, owner_uid });
            }
            Err(e) => {
                return Err(ShmError::Io {
                    op: "create segment",
                    path,
                    source: e,
                })
            }
        };
        let fail = |op: &'static str, source: std::io::Error| {
            let _ = std::fs::remove_file(&path);
            ShmError::Io {
                op,
                path: path.clone(),
                source,
            }
        };
        file.set_len(len as u64).map_err(|e| fail("ftruncate", e))?;
        if reserve_all {
            reserve(&file, 0, len).map_err(|e| {
                if e.raw_os_error() == Some(libc::ENOSPC) {
                    let _ = std::fs::remove_file(&path);
                    ShmError::NoSpace {
                        dir: dir.clone(),
                        needed: len as u64,
                        free: free_bytes(&dir).unwrap_or(0),
                    }
                } else {
                    fail("posix_fallocate", e)
                }
            })?;
        }
        // SAFETY: the file is ours (just created with O_EXCL, mode 0600) and
        // sized to `len`; all later access to the mapping goes through the
        // ring's atomics and its single-producer/single-consumer protocol.
        unsafe { map_segment(file, path.clone(), true) }.inspect_err(|_| {
            let _ = std::fs::remove_file(&path);
        })
    }

    /// Opens the named segment `name` created by the other end, waiting up to
    /// `timeout` for it to appear and be sized. The file must belong to this
    /// user and be closed to everyone else (mode 0600), or it is refused.
    pub fn open_segment(name: &SegmentName, timeout: Duration) -> Result<Region> {
        let path = name.path();
        let start = Instant::now();
        let file: File = loop {
            match OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&path)
            {
                Ok(f) => {
                    let meta = f.metadata().map_err(|e| ShmError::Io {
                        op: "fstat",
                        path: path.clone(),
                        source: e,
                    })?;
                    if !meta.file_type().is_file() {
                        return Err(ShmError::SegmentRejected {
                            path,
                            reason: "not a regular file".into(),
                        });
                    }
                    if meta.uid() != uid() {
                        return Err(ShmError::SegmentRejected {
                            path,
                            reason: format!(
                                "owned by uid {}, not by this user (uid {})",
                                meta.uid(),
                                uid()
                            ),
                        });
                    }
                    if meta.mode() & 0o077 != 0 {
                        return Err(ShmError::SegmentRejected {
                            path,
                            reason: format!(
                                "mode {:o} is open to other users",
                                meta.mode() & 0o777
                            ),
                        });
                    }
                    if meta.len() > 0 {
                        break f;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(ShmError::Io {
                        op: "open segment",
                        path,
                        source: e,
                    })
                }
            }
            if start.elapsed() >= timeout {
                return Err(ShmError::SegmentTimeout {
                    path,
                    waited_ms: start.elapsed().as_millis() as u64,
                });
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        // SAFETY: the file belongs to this user with mode 0600 (checked above);
        // the creator sized it before we could see a non-zero length, and it is
        // never shrunk. Access goes through the ring protocol.
        unsafe { map_segment(file, path, false) }
    }

    /// Start of the region (page-aligned).
    pub fn as_ptr(&self) -> *mut u8 {
        match &self.backing {
            Backing::Anon(m) => m.as_ptr() as *mut u8,
            Backing::Segment { map, .. } => map.as_ptr() as *mut u8,
        }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        match &self.backing {
            Backing::Anon(m) => m.len(),
            Backing::Segment { map, .. } => map.len(),
        }
    }

    /// Whether the region is empty (never, for a region we made).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The segment's path, or `None` for anonymous memory.
    pub fn path(&self) -> Option<&Path> {
        match &self.backing {
            Backing::Anon(_) => None,
            Backing::Segment { path, .. } => Some(path),
        }
    }

    /// Removes the segment's name from the file system (the mapping stays
    /// valid). Called once both ends have mapped it; idempotent; a no-op for
    /// anonymous memory or when the name now points to another file.
    pub fn unlink(&self) {
        if let Backing::Segment {
            path, id, unlinked, ..
        } = &self.backing
        {
            if unlinked.swap(true, Ordering::AcqRel) {
                return;
            }
            if let Ok(m) = std::fs::symlink_metadata(path) {
                if (m.dev(), m.ino()) == *id {
                    let _ = std::fs::remove_file(path);
                }
            }
        }
    }

    /// [`Region::unlink`], then closes the segment's file descriptor; the
    /// mapping stays valid. A segment without a name cannot be found by
    /// [`clean_stale`], so its `flock` has nothing left to protect, and an
    /// end that keeps no descriptor lets a process map more segments than
    /// its open-file limit (`ulimit -n`). (The runtime puts all the
    /// node-tier rings a rank consumes in one segment, so it holds a few.)
    pub fn unlink_and_close(&mut self) {
        self.unlink();
        if let Backing::Segment { file, .. } = &mut self.backing {
            *file = None;
        }
    }

    /// Reserves (allocates) the segment's bytes `[offset, offset + len)`
    /// with `posix_fallocate`, from the calling thread: a part of a segment
    /// made by [`Region::create_segment_unreserved`], before it is touched.
    /// A no-op for anonymous memory, on file systems that cannot fallocate,
    /// and for an end that closed its descriptor (an opener: the creator
    /// reserves).
    ///
    /// # Errors
    /// [`ShmError::BadCapacity`] if the range is outside the region,
    /// [`ShmError::NoSpace`] if the file system is full,
    /// [`ShmError::Io`] for other failures.
    pub fn reserve(&self, offset: usize, len: usize) -> Result<()> {
        if offset.checked_add(len).is_none_or(|end| end > self.len()) {
            return Err(ShmError::BadCapacity {
                capacity: len,
                reason: "a range outside its region",
            });
        }
        let Backing::Segment {
            file: Some(file),
            path,
            ..
        } = &self.backing
        else {
            return Ok(());
        };
        reserve(file, offset, len).map_err(|e| {
            let dir = path.parent().map(Path::to_owned).unwrap_or_default();
            if e.raw_os_error() == Some(libc::ENOSPC) {
                ShmError::NoSpace {
                    needed: len as u64,
                    free: free_bytes(&dir).unwrap_or(0),
                    dir,
                }
            } else {
                ShmError::Io {
                    op: "posix_fallocate",
                    path: path.clone(),
                    source: e,
                }
            }
        })
    }

    /// Closes this end's file descriptor and keeps the name and the
    /// mapping: for an opener of a segment that other processes still have
    /// to open (the creator, which holds its descriptor and `flock` until
    /// it unlinks the name, keeps [`clean_stale`] away from it).
    pub fn close_descriptor(&mut self) {
        if let Backing::Segment { file, .. } = &mut self.backing {
            *file = None;
        }
    }

    /// Whether this process created the segment (false for anonymous memory).
    pub fn is_creator(&self) -> bool {
        matches!(&self.backing, Backing::Segment { creator: true, .. })
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // A creator whose peer never attached still removes its name; an
        // opener that refused a segment leaves it alone.
        if self.is_creator() {
            self.unlink();
        }
    }
}

/// Takes a shared `flock` on an open segment file (held for as long as the
/// region lives), maps it, and wraps it.
///
/// # Safety
/// `file` must be this job's segment, already sized, and every access to the
/// mapping must go through the ring protocol.
unsafe fn map_segment(file: File, path: PathBuf, creator: bool) -> Result<Region> {
    let io = |op: &'static str, source: std::io::Error| ShmError::Io {
        op,
        path: path.clone(),
        source,
    };
    let meta = file.metadata().map_err(|e| io("fstat", e))?;
    lock_shared(&file).map_err(|e| io("flock", e))?;
    // SAFETY: the caller's contract.
    let map = unsafe { MmapMut::map_mut(&file) }.map_err(|e| io("mmap", e))?;
    Ok(Region {
        backing: Backing::Segment {
            map,
            file: Some(file),
            path,
            id: (meta.dev(), meta.ino()),
            unlinked: AtomicBool::new(false),
            creator,
        },
    })
}

fn reserve(file: &File, offset: usize, len: usize) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: the fd is open for writing for the duration of the call.
    let rc = unsafe {
        libc::posix_fallocate(file.as_raw_fd(), offset as libc::off_t, len as libc::off_t)
    };
    match rc {
        0 => Ok(()),
        // Some file systems cannot fallocate; the statvfs check above still holds.
        libc::EOPNOTSUPP | libc::EINVAL => Ok(()),
        e => Err(std::io::Error::from_raw_os_error(e)),
    }
}

fn flock(file: &File, op: libc::c_int) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: the fd is open for the duration of the call; flock has no
    // memory-safety preconditions.
    if unsafe { libc::flock(file.as_raw_fd(), op) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn lock_shared(file: &File) -> std::io::Result<()> {
    flock(file, libc::LOCK_SH)
}

/// What [`clean_stale`] did with one segment.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum CleanOutcome {
    /// Nobody held it: removed (or would be, with `dry_run`).
    Removed,
    /// A live process holds it: left alone.
    InUse,
    /// Created less than two seconds ago (its creator may not hold the lock
    /// yet): left alone.
    TooYoung,
}

/// Finds this user's segments (`air-<uid>-*`) in `dir` that no live process
/// holds — every end holds a shared `flock` on its segment for its whole
/// life, and the kernel drops it when the process dies, however it dies —
/// and removes them unless `dry_run`. Returns every segment of this user it
/// looked at, with what it did.
pub fn clean_stale(dir: &Path, dry_run: bool) -> Result<Vec<(PathBuf, CleanOutcome)>> {
    let prefix = format!("{SEGMENT_PREFIX}{}-", uid());
    let entries = std::fs::read_dir(dir).map_err(|e| ShmError::Io {
        op: "read directory",
        path: dir.to_owned(),
        source: e,
    })?;
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with(&prefix) {
            continue;
        }
        let path = entry.path();
        // Only regular files are ever segments: a FIFO (or device) planted
        // in the world-writable directory must not block the open below.
        if !std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_file()) {
            continue;
        }
        // O_NONBLOCK too: should the entry be swapped for a FIFO between the
        // check and the open, the open still returns at once.
        let Ok(file) = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
            .open(&path)
        else {
            continue;
        };
        let Ok(meta) = file.metadata() else { continue };
        if !meta.file_type().is_file() || meta.uid() != uid() {
            continue;
        }
        let age = meta
            .modified()
            .ok()
            .and_then(|m| m.elapsed().ok())
            .unwrap_or_default();
        if age < Duration::from_secs(2) {
            out.push((path, CleanOutcome::TooYoung));
            continue;
        }
        if flock(&file, libc::LOCK_EX | libc::LOCK_NB).is_err() {
            out.push((path, CleanOutcome::InUse));
            continue;
        }
        if !dry_run {
            let _ = std::fs::remove_file(&path);
        }
        out.push((path, CleanOutcome::Removed));
    }
    out.sort();
    Ok(out)
}
