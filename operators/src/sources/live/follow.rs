//! A file followed like `tail -F` (`--follow`): its reads, its rotations
//! and truncations, and where a resumed run starts reading it.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{resume, Input, LiveOptions, Shared, Tail};

/// Why a [`Follower`]'s read returned 0.
#[derive(Debug)]
enum FileEnd {
    /// It has not (a read returns bytes, or waits for them).
    Open,
    /// The path names another file (opened here, with its device and
    /// inode); the old one was read to its end.
    Rotated(File, (u64, u64)),
    /// The file shrank below what was read; it is now this long.
    Truncated(u64),
    /// It did not grow for [`LiveOptions::idle_end`].
    Idle,
    /// The job is done with the input.
    Closed,
}

/// A file followed like `tail -F`: reads return what the file holds, then
/// wait (polling its size every [`LiveOptions::poll`], sleeping in between)
/// for more. A read returns 0 at the end of one file: a truncation, a
/// rotation, the idle end or the input's close ([`FileEnd`]);
/// [`next_file`](Self::next_file) then starts the next one, if any.
pub(super) struct Follower {
    /// The path followed.
    pub(super) path: PathBuf,
    /// The file being read, and its device and inode.
    pub(super) file: File,
    pub(super) id: (u64, u64),
    /// Bytes read from `file` (where the next read starts).
    pub(super) pos: u64,
    /// 1-based number of the file being read at the path (truncations
    /// count: each start from byte 0 is a new one).
    pub(super) files: u64,
    /// How errors name the file being read: the path, then `PATH (file N)`.
    pub(super) name: Arc<PathBuf>,
    shared: Arc<Shared>,
    poll: Duration,
    idle_end: Option<Duration>,
    /// When the file last grew (or was opened).
    grew: Instant,
    /// The path was seen naming another file: one more poll of the old
    /// one (for a writer that still holds it), then switch.
    rotating: bool,
    end: FileEnd,
}

impl Follower {
    /// Opens `path` (a regular file) to follow it from its start.
    pub(super) fn open(
        path: &Path,
        shared: Arc<Shared>,
        opts: LiveOptions,
    ) -> io::Result<Follower> {
        let file = File::open(path)?;
        let m = file.metadata()?;
        if !m.is_file() {
            let what = if m.is_dir() {
                "a directory, not a file (--follow takes a file)"
            } else {
                "not a regular file (read a pipe with --input -)"
            };
            return Err(io::Error::new(io::ErrorKind::InvalidInput, what));
        }
        Ok(Follower {
            path: path.to_path_buf(),
            file,
            id: (m.dev(), m.ino()),
            pos: 0,
            files: 1,
            name: Arc::new(path.to_path_buf()),
            shared,
            poll: opts.poll.max(Duration::from_millis(1)),
            idle_end: opts.idle_end,
            grew: Instant::now(),
            rotating: false,
            end: FileEnd::Open,
        })
    }

    /// After a read returned 0: starts the next file (the new one at the
    /// path, or the truncated one again from byte 0) and says so on
    /// standard error; `false` if the input ended.
    pub(super) fn next_file(&mut self) -> io::Result<bool> {
        let old = self.name.clone();
        let read = self.pos;
        let why = match std::mem::replace(&mut self.end, FileEnd::Open) {
            FileEnd::Rotated(file, id) => {
                self.file = file;
                self.id = id;
                format!("rotated (a new file at the path; the old one was read to its end, {read} bytes)")
            }
            FileEnd::Truncated(size) => {
                self.file.seek(SeekFrom::Start(0))?;
                format!("truncated to {size} bytes after {read} were read")
            }
            FileEnd::Open | FileEnd::Idle | FileEnd::Closed => return Ok(false),
        };
        self.pos = 0;
        self.files += 1;
        self.rotating = false;
        self.grew = Instant::now();
        self.name = Arc::new(PathBuf::from(format!(
            "{} (file {})",
            self.path.display(),
            self.files
        )));
        air_runtime::say!(
            "air: {}: {why}: reading from its start as \"{}\" (lines and byte offsets restart)",
            old.display(),
            self.name.display()
        );
        Ok(true)
    }

    /// Goes to a checkpoint's cut `at` before the first read: the offset
    /// and line number the stream starts from, or `None` if the file at
    /// the path is not the one the checkpoint read (rotated, replaced) or
    /// is shorter than the cut (truncated): it is then read from its start
    /// as the next file at the path, and the run says so.
    pub(super) fn resume_at(
        &mut self,
        at: &resume::FollowPosition,
    ) -> io::Result<Option<(u64, u64)>> {
        let m = self.file.metadata()?;
        // The same inode, long enough, and the same bytes before the cut
        // (a new file may get the old one's inode).
        let same = (m.dev(), m.ino()) == at.id
            && m.len() >= at.offset
            && tail_hash(&self.file, at.offset).is_ok_and(|h| h == at.tail);
        self.files = at.files + u64::from(!same);
        if self.files > 1 {
            self.name = Arc::new(PathBuf::from(format!(
                "{} (file {})",
                self.path.display(),
                self.files
            )));
        }
        if !same {
            air_runtime::say!(
                "warning: {}: not the file the checkpoint read up to byte {} (it was \
                 rotated, replaced or truncated since): reading the file at the path from \
                 its start as \"{}\"; lines of the old file after that byte are not read",
                self.path.display(),
                at.offset,
                self.name.display()
            );
            return Ok(None);
        }
        self.file.seek(SeekFrom::Start(at.offset))?;
        self.pos = at.offset;
        air_runtime::say!(
            "air: {}: resuming at byte {} (line {}), where the checkpoint cut it",
            self.name.display(),
            at.offset,
            at.line
        );
        Ok(Some((at.offset, at.line)))
    }

    /// Whether the path now names another file than the one being read
    /// (not when it names none: a rotation's gap, waited out).
    fn path_moved(&self) -> bool {
        std::fs::metadata(&self.path).is_ok_and(|m| (m.dev(), m.ino()) != self.id)
    }
}

impl Read for Follower {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let n = self.file.read(buf)?;
            if n > 0 {
                self.pos += n as u64;
                self.grew = Instant::now();
                return Ok(n);
            }
            // At the end of what the file holds now.
            if self.shared.closed.load(Ordering::Acquire) {
                self.end = FileEnd::Closed;
                return Ok(0);
            }
            if self.shared.follow.due().is_some() {
                // A worker asked for a checkpoint's cut: the reader makes
                // it (at its loop's top), then reads on.
                return Err(io::ErrorKind::Interrupted.into());
            }
            let size = self.file.metadata()?.len();
            if size > self.pos {
                continue;
            }
            if size < self.pos {
                self.end = FileEnd::Truncated(size);
                return Ok(0);
            }
            if self.rotating {
                // Read to its end one poll after the path moved: the new
                // file, unless it went away again (wait for the next).
                match File::open(&self.path).and_then(|f| {
                    let m = f.metadata()?;
                    Ok((f, (m.dev(), m.ino())))
                }) {
                    Ok((f, id)) if id != self.id => {
                        self.end = FileEnd::Rotated(f, id);
                        return Ok(0);
                    }
                    Ok(_) => self.rotating = false,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => self.rotating = false,
                    Err(e) => return Err(e),
                }
            } else if self.path_moved() {
                self.rotating = true;
                self.grew = Instant::now();
            }
            if let Some(idle) = self.idle_end {
                if !self.rotating && self.grew.elapsed() >= idle {
                    self.end = FileEnd::Idle;
                    return Ok(0);
                }
            }
            std::thread::sleep(self.poll);
        }
    }
}

impl Input for Follower {
    fn ready(&mut self) -> bool {
        self.file.metadata().is_ok_and(|m| m.len() > self.pos)
    }
    fn identity(&self, offset: u64) -> Option<((u64, u64), u64, u64)> {
        Some((self.id, self.files, tail_hash(&self.file, offset).ok()?))
    }
    fn tail(&self) -> Tail {
        match self.end {
            // The rest of that line was thrown away with the file's bytes.
            FileEnd::Truncated(_) => Tail::Partial("file truncated mid-line"),
            _ => Tail::Line,
        }
    }
}

/// Bytes before a cut whose hash a checkpoint keeps
/// ([`resume::FollowPosition::tail`]).
const TAIL_BYTES: u64 = 64;

/// FNV-1a of `file`'s [`TAIL_BYTES`] bytes before `offset` (fewer near
/// the start): what tells a resumed run that the file at the path is the
/// one its checkpoint read, even when a new file got the old one's inode.
pub(super) fn tail_hash(file: &File, offset: u64) -> io::Result<u64> {
    use std::os::unix::fs::FileExt;
    let from = offset.saturating_sub(TAIL_BYTES);
    let mut buf = [0u8; TAIL_BYTES as usize];
    let want = &mut buf[..(offset - from) as usize];
    file.read_exact_at(want, from)?;
    Ok(want.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    }))
}
