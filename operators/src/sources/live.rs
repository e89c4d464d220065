//! Live inputs: line streams that are read as they arrive and may never
//! end — standard input (a pipe), a TCP connection air makes
//! (`tcp://HOST:PORT`), TCP connections air accepts (`--listen`), or a file
//! that grows (`--follow`, as `tail -F`).
//!
//! A rank has one live input. One reader thread per stream (stdin, the
//! connection, each accepted connection, or the followed file) reads large
//! chunks (up to [`LiveOptions::chunk_bytes`]) from the file descriptor,
//! cuts each at its last `\n` (the partial line is carried to the next
//! chunk) and hands the whole-line chunks to the rank's workers round-robin,
//! through one bounded queue per worker ([`LiveOptions::queue_chunks`]
//! chunks). A full queue is skipped for the next one; when every queue is
//! full the reader blocks, so a sender faster than the job is held back by
//! the pipe or by TCP flow control — nothing is buffered without bound. The
//! reader does not parse: each worker finds the lines of its chunks and
//! parses them ([`LiveLines`], under the usual bad-record policy), so
//! parsing runs on every worker. The reader rings a worker's doorbell after
//! it hands it a chunk, so a parked worker wakes at once.
//!
//! Lines are numbered, and byte offsets counted, from the start of each
//! stream (for `--listen`, each connection; for `--follow`, each file read
//! at the path: a rotation or a truncation starts a new one). A worker's
//! records come in stream order (its chunks are in order), so its watermark
//! follows its records as with a file.
//!
//! End of stream: EOF on standard input, the server closing the
//! connection (`tcp://`), with [`LiveInput::Listen`] every accepted sender
//! having closed its connection (after at least one came) and none coming
//! for [`LiveOptions::linger`] (later senders are refused), with
//! [`LiveInput::Follow`] the file not growing for
//! [`LiveOptions::idle_end`] (if set). A connection that ends mid-line (a
//! sender that died or dropped), or a followed file truncated after a line
//! was begun: the partial line is reported with its byte offset
//! ([`LiveReport::partial_lines`]) and skipped. On standard input, and at
//! the end of a followed file (rotated away, or at the idle end), a last
//! line without `\n` is a line, as in a file.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::lines::{LineError, LineFailure, RawLine};

mod resume;
pub use resume::{FollowPosition, LivePosition};

/// Where a rank's live input comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LiveInput {
    /// Standard input (`--input -`).
    Stdin,
    /// A TCP connection air makes to `HOST:PORT` (`--input tcp://HOST:PORT`).
    Connect(String),
    /// TCP connections air accepts on `HOST:PORT` (`--listen HOST:PORT`).
    Listen(String),
    /// A file read from its start and then as it grows, like `tail -F`
    /// (`--follow FILE`): a truncation (the size drops below what was
    /// read) starts it again from byte 0; a rotation (the path names
    /// another file) finishes the old file, then reads the new one from
    /// byte 0.
    Follow(PathBuf),
}

impl LiveInput {
    /// The live input an `--input` argument names: `-` (standard input) or
    /// `tcp://HOST:PORT`; `None` for anything else (a file path).
    pub fn from_input_arg(arg: &Path) -> Option<LiveInput> {
        let s = arg.to_str()?;
        if s == "-" {
            Some(LiveInput::Stdin)
        } else {
            s.strip_prefix("tcp://")
                .map(|a| LiveInput::Connect(a.to_string()))
        }
    }

    /// This input for rank `rank`: every `{rank}` in the address or path
    /// replaced by the rank's number (so each MPI rank reads its own input,
    /// e.g. `tcp://127.0.0.1:900{rank}`, `events-{rank}.json`; a path that
    /// is not UTF-8 is kept as it is).
    pub fn for_rank(&self, rank: usize) -> LiveInput {
        let r = |a: &str| a.replace("{rank}", &rank.to_string());
        match self {
            LiveInput::Stdin => LiveInput::Stdin,
            LiveInput::Connect(a) => LiveInput::Connect(r(a)),
            LiveInput::Listen(a) => LiveInput::Listen(r(a)),
            LiveInput::Follow(p) => {
                LiveInput::Follow(p.to_str().map_or_else(|| p.clone(), |s| r(s).into()))
            }
        }
    }

    /// How errors name the input: `-`, `tcp://HOST:PORT`,
    /// `listen://HOST:PORT`, or the followed file's path.
    pub fn name(&self) -> String {
        match self {
            LiveInput::Stdin => "-".into(),
            LiveInput::Connect(a) => format!("tcp://{a}"),
            LiveInput::Listen(a) => format!("listen://{a}"),
            LiveInput::Follow(p) => p.display().to_string(),
        }
    }
}

/// Sizes of a live input's reader and queues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LiveOptions {
    /// Bytes read before a chunk is handed on (default 512 KiB); a chunk
    /// goes earlier when the input has nothing more to read at once.
    pub chunk_bytes: usize,
    /// Chunks each worker's queue holds (default 4): at most
    /// `workers × queue_chunks × chunk_bytes` bytes wait in memory.
    pub queue_chunks: usize,
    /// Longest accepted line in bytes, `\n` excluded (default 1 MiB).
    pub max_line_len: usize,
    /// [`LiveInput::Listen`]: how long to keep accepting senders after the
    /// last connected one closed (default zero: the input ends when every
    /// sender that came has closed). A sender that reconnects within it
    /// continues the stream; the input ends when no sender was connected
    /// for this long.
    pub linger: Duration,
    /// [`LiveInput::Follow`]: the input ends when the file has not grown
    /// (and no new file appeared at its path) for this long (default
    /// `None`: never; the job is stopped by a signal).
    pub idle_end: Option<Duration>,
    /// [`LiveInput::Follow`]: how often a file read to its end is checked
    /// for growth, truncation and rotation (default 50 ms); the reader
    /// sleeps in between.
    pub poll: Duration,
}

impl Default for LiveOptions {
    fn default() -> LiveOptions {
        LiveOptions {
            chunk_bytes: 512 << 10,
            queue_chunks: 4,
            max_line_len: 1 << 20,
            linger: Duration::ZERO,
            idle_end: None,
            poll: Duration::from_millis(50),
        }
    }
}

/// What a reader hands a worker.
#[derive(Debug)]
struct Chunk {
    /// Whole lines, each ending in `\n` (the last may lack it: a last line
    /// of standard input). Empty for a [`Chunk::too_long`] marker.
    bytes: Vec<u8>,
    /// Byte offset of `bytes[0]` in its stream.
    offset: u64,
    /// 1-based number of its first line in its stream.
    line: u64,
    /// The stream: the input's name, with the connection for `--listen`
    /// and the file's number after a `--follow` restart.
    name: Arc<PathBuf>,
    /// A line over the limit starts at `offset` (line `line`); it was
    /// dropped.
    too_long: bool,
    /// A cut of a followed file for a checkpoint barrier (no bytes): the
    /// barrier's id and the source's state there
    /// ([`resume::FollowPosition`]).
    cut: Option<(u64, Vec<u8>)>,
}

/// What a live input counted, for reports.
#[derive(Debug, Default)]
pub struct LiveReport {
    /// Bytes read from every stream.
    pub bytes: u64,
    /// Streams read (connections; files read at a followed path).
    pub streams: u64,
    /// Partial lines dropped at the end of a connection (or at a followed
    /// file's truncation).
    pub partial_lines: u64,
    /// The first of them: stream, line and byte offset.
    pub first_partial: Option<String>,
}

/// State shared by the readers and the workers of one live input.
struct Shared {
    /// Each local worker's queue, until the worker takes it.
    receivers: Mutex<Vec<Option<Receiver<Chunk>>>>,
    /// Each local worker's wake-up (its doorbell), once it registered.
    wakers: Vec<OnceLock<Waker>>,
    /// Emptied buffers, recycled by the readers (buffers are not freed on
    /// another thread than the one that made them).
    free: Mutex<Vec<Vec<u8>>>,
    /// A read error that ended a stream, for the first worker that sees
    /// the input end.
    error: Mutex<Option<(PathBuf, Option<u64>, io::Error)>>,
    bytes: AtomicU64,
    streams: AtomicU64,
    partial: AtomicU64,
    first_partial: Mutex<Option<String>>,
    /// Set when the job no longer reads (readers stop at their next read).
    closed: AtomicBool,
    /// A followed file's cuts for checkpoints, and where its reader starts.
    follow: resume::FollowCuts,
    /// Whether the counters were taken into a report already.
    reported: AtomicBool,
}

type Waker = Box<dyn Fn() + Send + Sync>;

/// A running live input of one rank: its reader threads, and one queue per
/// local worker ([`LiveFeed::worker`]). Cheap to clone.
#[derive(Clone)]
pub struct LiveFeed {
    shared: Arc<Shared>,
    name: Arc<PathBuf>,
    opts: LiveOptions,
}

impl std::fmt::Debug for LiveFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveFeed")
            .field("name", &self.name)
            .field("opts", &self.opts)
            .finish()
    }
}

impl LiveFeed {
    /// Starts reading `input` for `workers` local workers: opens standard
    /// input, connects, binds the listening socket, or opens the followed
    /// file now, and reads in background threads (which end when the input
    /// ends, or at their next read after the job is done with it).
    ///
    /// # Errors
    /// Connecting, binding or opening failed, or the followed path is not
    /// a regular file (the message names the address or the path).
    pub fn start(input: &LiveInput, workers: usize, opts: LiveOptions) -> io::Result<LiveFeed> {
        let workers = workers.max(1);
        let depth = opts.queue_chunks.max(1);
        let (senders, receivers): (Vec<_>, Vec<_>) =
            (0..workers).map(|_| sync_channel::<Chunk>(depth)).unzip();
        let shared = Arc::new(Shared {
            receivers: Mutex::new(receivers.into_iter().map(Some).collect()),
            wakers: (0..workers).map(|_| OnceLock::new()).collect(),
            free: Mutex::new(Vec::new()),
            error: Mutex::new(None),
            bytes: AtomicU64::new(0),
            streams: AtomicU64::new(0),
            partial: AtomicU64::new(0),
            first_partial: Mutex::new(None),
            closed: AtomicBool::new(false),
            reported: AtomicBool::new(false),
            follow: resume::FollowCuts::new(input),
        });
        let name = Arc::new(PathBuf::from(input.name()));
        let with_addr = |what: &str, a: &str, e: io::Error| {
            io::Error::new(e.kind(), format!("{what} {a}: {e}"))
        };
        match input {
            LiveInput::Stdin => {
                let pump = Pump::new(shared.clone(), senders, name.clone(), opts, 0);
                spawn("air-stdin", move || {
                    grow_pipe(0);
                    pump.run(Fd::new(io::stdin().lock(), 0, false));
                });
            }
            LiveInput::Connect(a) => {
                let s = connect(a).map_err(|e| with_addr("cannot connect to", a, e))?;
                let fd = s.as_raw_fd();
                let pump = Pump::new(shared.clone(), senders, name.clone(), opts, 0);
                spawn("air-tcp", move || pump.run(Fd::new(s, fd, true)));
            }
            LiveInput::Listen(a) => {
                let l = TcpListener::bind(a).map_err(|e| with_addr("cannot listen on", a, e))?;
                let (sh, n) = (shared.clone(), name.clone());
                spawn("air-listen", move || accept_loop(l, sh, senders, n, opts));
            }
            LiveInput::Follow(p) => {
                let f = Follower::open(p, shared.clone(), opts).map_err(|e| {
                    io::Error::new(e.kind(), format!("cannot follow {}: {e}", p.display()))
                })?;
                let pump = Pump::new(shared.clone(), senders, name.clone(), opts, 0);
                spawn("air-follow", move || pump.follow(f));
            }
        }
        Ok(LiveFeed { shared, name, opts })
    }

    /// The input's name in errors (`-`, `tcp://…`, `listen://…`, the
    /// followed path).
    pub fn name(&self) -> &Path {
        &self.name
    }

    /// The local workers it was started for (chunks go to these).
    pub fn workers(&self) -> usize {
        self.shared.wakers.len()
    }

    /// Local worker `local`'s lines (the first call for each worker takes
    /// its queue; `None` if taken already or out of range). `wake` is
    /// called after a chunk was queued for it (ring its doorbell).
    pub(crate) fn worker<E>(
        &self,
        local: usize,
        wake: impl Fn() + Send + Sync + 'static,
    ) -> Option<LiveLines<E>> {
        let rx = self
            .shared
            .receivers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(local)?
            .take()?;
        let _ = self.shared.wakers[local].set(Box::new(wake));
        self.shared.follow.opened();
        Some(LiveLines {
            shared: self.shared.clone(),
            name: self.name.clone(),
            rx,
            cur: None,
            pos: 0,
            line: 0,
            lines: 0,
            max_line_len: self.opts.max_line_len,
            finished: false,
            cuts: self.shared.follow.enabled,
            requested: 0,
            held: None,
            _error: std::marker::PhantomData,
        })
    }

    /// What the input counted so far; `None` once taken (the first caller
    /// gets it, so a rank reports it once).
    pub fn take_report(&self) -> Option<LiveReport> {
        if self.shared.reported.swap(true, Ordering::AcqRel) {
            return None;
        }
        Some(self.report())
    }

    /// What the input counted so far.
    pub fn report(&self) -> LiveReport {
        let s = &self.shared;
        LiveReport {
            bytes: s.bytes.load(Ordering::Relaxed),
            streams: s.streams.load(Ordering::Relaxed),
            partial_lines: s.partial.load(Ordering::Relaxed),
            first_partial: s
                .first_partial
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }

    /// Tells the readers the job is done with the input: they stop at
    /// their next read.
    pub fn close(&self) {
        self.shared.closed.store(true, Ordering::Release);
    }
}

/// Connects to `addr`, trying each address it resolves to.
fn connect(addr: &str) -> io::Result<TcpStream> {
    let mut last = None;
    for a in addr.to_socket_addrs()? {
        match TcpStream::connect_timeout(&a, Duration::from_secs(10)) {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address")))
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) {
    // Detached: a reader blocked in `read` must not hold the process when
    // the job ends (a signal, a bad record); the process exit ends it.
    let _ = std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .expect("spawn a live-input reader thread");
}

/// Accepts senders until every one that came has closed (at least one
/// came) and none was connected for [`LiveOptions::linger`].
fn accept_loop(
    l: TcpListener,
    shared: Arc<Shared>,
    senders: Vec<SyncSender<Chunk>>,
    name: Arc<PathBuf>,
    opts: LiveOptions,
) {
    let active = Arc::new(AtomicUsize::new(0));
    let mut came = 0usize;
    // Since when no sender has been connected (after the first came).
    let mut quiet_since: Option<Instant> = None;
    if l.set_nonblocking(true).is_err() {
        return;
    }
    loop {
        if shared.closed.load(Ordering::Acquire) {
            return;
        }
        match l.accept() {
            Ok((s, peer)) => {
                let _ = s.set_nonblocking(false);
                came += 1;
                active.fetch_add(1, Ordering::AcqRel);
                let conn = Arc::new(PathBuf::from(format!(
                    "{} (connection {came} from {peer})",
                    name.display()
                )));
                let fd = s.as_raw_fd();
                let pump = Pump::new(shared.clone(), senders.clone(), conn, opts, came);
                let active = active.clone();
                spawn("air-conn", move || {
                    pump.run(Fd::new(s, fd, true));
                    active.fetch_sub(1, Ordering::AcqRel);
                });
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if came > 0 && active.load(Ordering::Acquire) == 0 {
                    // Every sender closed, and none came back within the
                    // linger: the input ends (the senders' clones are
                    // gone; dropping ours disconnects).
                    let since = *quiet_since.get_or_insert_with(Instant::now);
                    if since.elapsed() >= opts.linger {
                        return;
                    }
                } else {
                    quiet_since = None;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                *shared.error.lock().unwrap_or_else(|e| e.into_inner()) =
                    Some(((*name).clone(), None, e));
                return;
            }
        }
    }
}

/// Size of the pieces a read that did not fill a chunk is cut into, bytes
/// (see `Pump::send_lines`): small enough that every worker's newest line
/// is near the newest line read, large enough that handing them on costs
/// little next to parsing them.
const PIECE_BYTES: usize = 1024;

/// A stream a [`Pump`] reads.
trait Input: Read {
    /// Whether more bytes can be read at once, without waiting.
    fn ready(&mut self) -> bool;
    /// What the bytes after the last `\n` are when a read returned 0 or
    /// failed.
    fn tail(&self) -> Tail;
    /// A followed file's device and inode and its number at the path
    /// (what a cut records); `None` for other inputs.
    fn identity(&self) -> Option<((u64, u64), u64)> {
        None
    }
}

/// The bytes after a stream's last `\n` at its end.
#[derive(Clone, Copy, Debug)]
enum Tail {
    /// A last line, as in a file.
    Line,
    /// A partial line, reported (with why, e.g. "connection ended
    /// mid-line") and dropped.
    Partial(&'static str),
}

/// Standard input or a TCP connection: a reader and its descriptor
/// (polled to see whether more is ready).
struct Fd<R> {
    r: R,
    fd: RawFd,
    /// A connection: a last line without `\n` is a partial line.
    socket: bool,
}

impl<R: Read> Fd<R> {
    fn new(r: R, fd: RawFd, socket: bool) -> Fd<R> {
        Fd { r, fd, socket }
    }
}

impl<R: Read> Read for Fd<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.r.read(buf)
    }
}

impl<R: Read> Input for Fd<R> {
    fn ready(&mut self) -> bool {
        ready(self.fd)
    }
    fn tail(&self) -> Tail {
        if self.socket {
            Tail::Partial("connection ended mid-line")
        } else {
            Tail::Line
        }
    }
}

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
struct Follower {
    /// The path followed.
    path: PathBuf,
    /// The file being read, and its device and inode.
    file: File,
    id: (u64, u64),
    /// Bytes read from `file` (where the next read starts).
    pos: u64,
    /// 1-based number of the file being read at the path (truncations
    /// count: each start from byte 0 is a new one).
    files: u64,
    /// How errors name the file being read: the path, then `PATH (file N)`.
    name: Arc<PathBuf>,
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
    fn open(path: &Path, shared: Arc<Shared>, opts: LiveOptions) -> io::Result<Follower> {
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
    fn next_file(&mut self) -> io::Result<bool> {
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
    fn resume_at(&mut self, at: &resume::FollowPosition) -> io::Result<Option<(u64, u64)>> {
        let m = self.file.metadata()?;
        let same = (m.dev(), m.ino()) == at.id && m.len() >= at.offset;
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
    fn identity(&self) -> Option<((u64, u64), u64)> {
        Some((self.id, self.files))
    }
    fn tail(&self) -> Tail {
        match self.end {
            // The rest of that line was thrown away with the file's bytes.
            FileEnd::Truncated(_) => Tail::Partial("file truncated mid-line"),
            _ => Tail::Line,
        }
    }
}

/// One stream's reader: reads chunks, cuts them at their last `\n`, hands
/// them to the workers.
struct Pump {
    shared: Arc<Shared>,
    senders: Vec<SyncSender<Chunk>>,
    /// Whether each worker still takes chunks.
    open: Vec<bool>,
    /// The stream, as chunks name it.
    name: Arc<PathBuf>,
    opts: LiveOptions,
    /// Next worker to try.
    next: usize,
    /// Offset and line number the next stream starts at (a followed file
    /// resumed at a checkpoint's cut; else 0 and 1).
    start: (u64, u64),
    /// Offset and line number after the last line of the last stream.
    end_at: (u64, u64),
}

impl Pump {
    fn new(
        shared: Arc<Shared>,
        senders: Vec<SyncSender<Chunk>>,
        name: Arc<PathBuf>,
        opts: LiveOptions,
        first: usize,
    ) -> Pump {
        let n = senders.len();
        Pump {
            shared,
            open: vec![true; n],
            senders,
            name,
            opts,
            next: first % n.max(1),
            start: (0, 1),
            end_at: (0, 1),
        }
    }

    /// A buffer of at least `len` bytes (its length is its capacity; the
    /// bytes are whatever it held), recycled if possible.
    fn buffer(&self, len: usize) -> Vec<u8> {
        let b = self
            .shared
            .free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop();
        let mut b = b.unwrap_or_default();
        let want = b.capacity().max(len);
        b.resize(want, 0);
        b
    }

    /// An empty buffer, recycled if possible (nothing to zero).
    fn empty_buffer(&self) -> Vec<u8> {
        let mut b = self
            .shared
            .free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .unwrap_or_default();
        b.clear();
        b
    }

    /// Hands `chunk` to the next worker whose queue has room, or waits for
    /// the next worker's room if every queue is full. `false`: no worker
    /// takes chunks any more.
    fn send(&mut self, mut chunk: Chunk) -> bool {
        let n = self.senders.len();
        for _ in 0..2 {
            for i in 0..n {
                let k = (self.next + i) % n;
                if !self.open[k] {
                    continue;
                }
                match self.senders[k].try_send(chunk) {
                    Ok(()) => {
                        self.sent(k);
                        return true;
                    }
                    Err(TrySendError::Full(c)) => chunk = c,
                    Err(TrySendError::Disconnected(c)) => {
                        self.open[k] = false;
                        chunk = c;
                    }
                }
            }
            // Every queue full: wait for the next open worker's room.
            let Some(k) = (0..n).map(|i| (self.next + i) % n).find(|&k| self.open[k]) else {
                return false;
            };
            self.wake(k);
            match self.senders[k].send(chunk) {
                Ok(()) => {
                    self.sent(k);
                    return true;
                }
                Err(e) => {
                    self.open[k] = false;
                    chunk = e.0;
                }
            }
        }
        self.open.iter().any(|&o| o) && self.send(chunk)
    }

    /// Hands on `bytes`, whole lines (`lines` of them, the first at stream
    /// offset `offset`, numbered `line`): as one chunk after a read that
    /// filled a chunk (`whole_read`: the input comes faster than it is
    /// read, so every worker gets chunks anyway); otherwise its newest
    /// lines are cut off at line starts into one piece of about
    /// [`PIECE_BYTES`] (or a worker's share of a shorter read) per worker
    /// that takes chunks, and the rest goes
    /// first, whole, then the pieces, all round-robin. So when the input
    /// comes slower than it is read, every worker still gets lines near the
    /// newest line read: a worker handed nothing (or only older lines)
    /// would hold every window back (its watermark follows its own
    /// records). Costs at most one send per worker and the copy of one
    /// piece per worker more than a whole chunk. `false`: no worker takes
    /// chunks any more.
    fn send_lines(
        &mut self,
        bytes: Vec<u8>,
        offset: u64,
        line: u64,
        lines: u64,
        whole_read: bool,
    ) -> bool {
        let open = self.open.iter().filter(|&&o| o).count();
        if whole_read || open < 2 || lines < 2 {
            return self.send(self.chunk(bytes, offset, line, false));
        }
        // The newest lines: one piece of about PIECE_BYTES per worker, cut
        // from the end at line starts (fewer if the read is short).
        let piece_bytes = PIECE_BYTES.min(bytes.len() / open).max(1);
        let mut cuts = Vec::with_capacity(open);
        let mut end = bytes.len();
        while cuts.len() < open && end > 0 {
            let want = end.saturating_sub(piece_bytes);
            let start = if want == 0 {
                0
            } else {
                memchr::memrchr(b'\n', &bytes[..want]).map_or(0, |j| j + 1)
            };
            cuts.push(start);
            end = start;
        }
        cuts.reverse();
        let mut pieces = Vec::with_capacity(cuts.len());
        for (i, &start) in cuts.iter().enumerate() {
            let end = cuts.get(i + 1).copied().unwrap_or(bytes.len());
            let mut piece = self.empty_buffer();
            piece.extend_from_slice(&bytes[start..end]);
            pieces.push(piece);
        }
        // What comes before them goes first, whole, in the read's buffer.
        let mut front = bytes;
        front.truncate(cuts[0]);
        let (mut offset, mut line) = (offset, line);
        if front.is_empty() {
            self.recycle(front);
        } else {
            let n = front.len() as u64;
            let l = memchr::memchr_iter(b'\n', &front).count() as u64;
            if !self.send(self.chunk(front, offset, line, false)) {
                return false;
            }
            offset += n;
            line += l;
        }
        for piece in pieces {
            let n = piece.len() as u64;
            let l = memchr::memchr_iter(b'\n', &piece).count() as u64;
            if !self.send(self.chunk(piece, offset, line, false)) {
                return false;
            }
            offset += n;
            line += l;
        }
        true
    }

    /// Queues barrier `id`'s cut (`at`: the source's state there) to every
    /// worker that takes chunks, behind what it was handed: each worker's
    /// source places the barrier when it reaches it. Waits for room in a
    /// full queue. `false`: no worker takes chunks any more.
    fn send_cut(&mut self, id: u64, at: Vec<u8>) -> bool {
        for k in 0..self.senders.len() {
            if !self.open[k] {
                continue;
            }
            let mut c = self.chunk(Vec::new(), 0, 0, false);
            c.cut = Some((id, at.clone()));
            self.wake(k);
            match self.senders[k].send(c) {
                Ok(()) => self.wake(k),
                Err(_) => self.open[k] = false,
            }
        }
        self.open.iter().any(|&o| o)
    }

    /// Returns a buffer to the free list.
    fn recycle(&self, b: Vec<u8>) {
        self.shared
            .free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(b);
    }

    fn sent(&mut self, k: usize) {
        self.next = (k + 1) % self.senders.len();
        self.wake(k);
    }

    fn wake(&self, k: usize) {
        if let Some(w) = self.shared.wakers[k].get() {
            w();
        }
    }

    fn chunk(&self, bytes: Vec<u8>, offset: u64, line: u64, too_long: bool) -> Chunk {
        Chunk {
            bytes,
            offset,
            line,
            name: self.name.clone(),
            too_long,
            cut: None,
        }
    }

    /// Reads standard input or a connection to its end.
    fn run(mut self, mut r: impl Input) {
        self.shared.streams.fetch_add(1, Ordering::Relaxed);
        self.stream(&mut r);
    }

    /// Reads a followed file, and the files that follow it at its path,
    /// until the input ends.
    fn follow(mut self, mut f: Follower) {
        // From a checkpoint's cut, or from the start: known once a worker
        // restored its source or opened its share.
        if let Some(at) = self.shared.follow.wait_start() {
            match f.resume_at(&at) {
                Ok(start) => self.start = start.unwrap_or((0, 1)),
                Err(e) => {
                    *self.shared.error.lock().unwrap_or_else(|e| e.into_inner()) =
                        Some(((*f.name).clone(), Some(at.offset), e));
                    return;
                }
            }
        }
        loop {
            self.shared.streams.fetch_add(1, Ordering::Relaxed);
            self.name = f.name.clone();
            if !self.stream(&mut f) {
                return;
            }
            match f.next_file() {
                Ok(true) => {}
                Ok(false) => {
                    // Read to its end: a checkpoint of a worker whose share
                    // ended holds this.
                    self.shared.follow.ended(resume::FollowPosition {
                        offset: self.end_at.0,
                        line: self.end_at.1,
                        id: f.id,
                        files: f.files,
                        ended: true,
                    });
                    return;
                }
                Err(e) => {
                    *self.shared.error.lock().unwrap_or_else(|e| e.into_inner()) =
                        Some(((*self.name).clone(), Some(f.pos), e));
                    return;
                }
            }
        }
    }

    /// Reads `r` to its end (a read that returns 0 or fails); `false` if
    /// the input cannot go on (a read error, the job done with it).
    fn stream(&mut self, r: &mut impl Input) -> bool {
        let target = self.opts.chunk_bytes.max(4096);
        let max = self.opts.max_line_len;
        // `buf[..filled]`: bytes read and not handed on; `buf`'s length is
        // its capacity, so reads need no zeroing.
        let mut buf = self.buffer(target);
        let mut filled = 0usize;
        // Stream offset of buf[0] and number of its first line.
        let (mut offset, mut line) = std::mem::replace(&mut self.start, (0, 1));
        // Dropping an over-long line up to its `\n`.
        let mut discarding = false;
        loop {
            if self.shared.closed.load(Ordering::Acquire) {
                return false;
            }
            if let Some(id) = self.shared.follow.due().filter(|_| !discarding) {
                let Some((file, files)) = r.identity() else {
                    self.shared.follow.made(id);
                    continue;
                };
                // The whole lines read so far go first, then the cut.
                if let Some(k) = memchr::memrchr(b'\n', &buf[..filled]) {
                    let tail = filled - (k + 1);
                    let mut rest = self.buffer(target.max(tail + 4096));
                    rest[..tail].copy_from_slice(&buf[k + 1..filled]);
                    buf.truncate(k + 1);
                    let lines = memchr::memchr_iter(b'\n', &buf).count() as u64;
                    let n = buf.len() as u64;
                    let full = std::mem::replace(&mut buf, rest);
                    filled = tail;
                    if !self.send(self.chunk(full, offset, line, false)) {
                        return false;
                    }
                    offset += n;
                    line += lines;
                }
                let at = resume::FollowPosition {
                    offset,
                    line,
                    id: file,
                    files,
                    ended: false,
                };
                if !self.send_cut(id, at.save()) {
                    return false;
                }
                self.shared.follow.made(id);
            }
            if buf.len() - filled < 4096 {
                buf.resize(buf.len() + target, 0);
            }
            let got = match r.read(&mut buf[filled..]) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    buf.truncate(filled);
                    let tail = r.tail();
                    self.end(buf, offset, line, Some(e), tail);
                    return false;
                }
            };
            self.shared.bytes.fetch_add(got as u64, Ordering::Relaxed);
            if got == 0 {
                buf.truncate(filled);
                let tail = r.tail();
                let lines = memchr::memchr_iter(b'\n', &buf).count() as u64;
                let last = u64::from(!buf.is_empty() && buf.last() != Some(&b'\n'));
                self.end_at = (offset + buf.len() as u64, line + lines + last);
                return self.end(buf, offset, line, None, tail);
            }
            let from = filled;
            filled += got;
            if discarding {
                match memchr::memchr(b'\n', &buf[from..filled]) {
                    Some(k) => {
                        let k = from + k;
                        buf.copy_within(k + 1..filled, 0);
                        filled -= k + 1;
                        offset += k as u64 + 1;
                        line += 1;
                        discarding = false;
                    }
                    None => {
                        offset += filled as u64;
                        filled = 0;
                        continue;
                    }
                }
            }
            // Gather more while more is ready at once, up to a chunk.
            if filled < target && r.ready() {
                continue;
            }
            match memchr::memrchr(b'\n', &buf[..filled]) {
                Some(k) => {
                    let tail = filled - (k + 1);
                    let mut rest = self.buffer(target.max(tail + 4096));
                    rest[..tail].copy_from_slice(&buf[k + 1..filled]);
                    buf.truncate(k + 1);
                    let lines = memchr::memchr_iter(b'\n', &buf).count() as u64;
                    let n = buf.len() as u64;
                    let whole_read = filled >= target;
                    let full = std::mem::replace(&mut buf, rest);
                    filled = tail;
                    if !self.send_lines(full, offset, line, lines, whole_read) {
                        return false;
                    }
                    offset += n;
                    line += lines;
                }
                None if filled > max => {
                    // One line over the limit: reported, then dropped.
                    let c = self.chunk(Vec::new(), offset, line, true);
                    if !self.send(c) {
                        return false;
                    }
                    offset += filled as u64;
                    filled = 0;
                    discarding = true;
                }
                None => {}
            }
        }
    }

    /// The stream ended (EOF, or a read error `e`) with `buf` unsent, whose
    /// bytes after the last `\n` are `tail`. `false` if the input cannot go
    /// on (a read error, no worker takes chunks).
    fn end(
        &mut self,
        mut buf: Vec<u8>,
        mut offset: u64,
        mut line: u64,
        e: Option<io::Error>,
        tail: Tail,
    ) -> bool {
        if let Tail::Partial(_) = tail {
            // The whole lines go on; what follows the last `\n` is partial.
            if let Some(k) = memchr::memrchr(b'\n', &buf) {
                let mut rest = self.buffer(0);
                rest.clear();
                rest.extend_from_slice(&buf[k + 1..]);
                buf.truncate(k + 1);
                let lines = memchr::memchr_iter(b'\n', &buf).count() as u64;
                let n = buf.len() as u64;
                let full = std::mem::replace(&mut buf, rest);
                if !self.send(self.chunk(full, offset, line, false)) {
                    return false;
                }
                offset += n;
                line += lines;
            }
        }
        if !buf.is_empty() {
            match tail {
                Tail::Partial(why) => {
                    // A sender gone mid-line, a file truncated under a
                    // line being written: the partial line is dropped.
                    self.shared.partial.fetch_add(1, Ordering::Relaxed);
                    let msg = format!(
                        "{}:{line}: {why}: partial line of {} bytes dropped (byte offset \
                         {offset})",
                        self.name.display(),
                        buf.len()
                    );
                    air_runtime::say!("warning: {msg}");
                    self.shared
                        .first_partial
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get_or_insert(msg);
                }
                Tail::Line => {
                    // A last line without `\n` is a line, as in a file.
                    let c = self.chunk(buf, offset, line, false);
                    if !self.send(c) {
                        return false;
                    }
                }
            }
        }
        match e {
            None => true,
            Some(e) => {
                let reset = matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
                );
                // A connection reset ends that connection, as its close
                // would (its partial line was reported above).
                if !(matches!(tail, Tail::Partial(_)) && reset) {
                    let at = offset;
                    *self.shared.error.lock().unwrap_or_else(|e| e.into_inner()) =
                        Some(((*self.name).clone(), Some(at), e));
                }
                false
            }
        }
    }
}

/// Whether `fd` has bytes to read at once.
fn ready(fd: RawFd) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `p` is one valid pollfd for the duration of the call.
    let r = unsafe { libc::poll(&mut p, 1, 0) };
    r > 0 && p.revents & libc::POLLIN != 0
}

/// Asks for a 1 MiB pipe buffer if `fd` is a pipe (fewer switches between
/// the writer and the reader); nothing happens otherwise.
fn grow_pipe(fd: RawFd) {
    // SAFETY: fcntl on a descriptor this process holds; F_SETPIPE_SZ fails
    // harmlessly (EBADF/EINVAL/EPERM) on anything but a pipe.
    #[cfg(target_os = "linux")]
    unsafe {
        libc::fcntl(fd, libc::F_SETPIPE_SZ, 1 << 20);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = fd;
}

thread_local! {
    /// Set while one of several sources that share a worker's lines reads
    /// them ([`placed_by_all`]): the oldest barrier they all placed.
    static PLACED_BY_ALL: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// Runs `read` (a read of a worker's lines by one of several sources that
/// share them, e.g. NEXMark q8's two) with `placed` as the barrier the
/// sources placed: the oldest any of them placed. A cut is then passed only
/// once every source sharing the lines placed its barrier (each source
/// stops at it in turn, with what was read before it for that source).
pub(crate) fn placed_by_all<R>(placed: u64, read: impl FnOnce() -> R) -> R {
    PLACED_BY_ALL.with(|p| p.set(Some(placed)));
    let r = read();
    PLACED_BY_ALL.with(|p| p.set(None));
    r
}

/// One worker's share of a live input: the lines of the chunks it was
/// handed, in stream order. [`next_line`](Self::next_line) returns
/// `Ok(None)` when nothing is queued now ([`is_finished`](Self::is_finished)
/// false: come back later) and at the input's end (finished).
pub(crate) struct LiveLines<E> {
    shared: Arc<Shared>,
    name: Arc<PathBuf>,
    rx: Receiver<Chunk>,
    cur: Option<Chunk>,
    pos: usize,
    /// Stream line number of the next line of `cur`.
    line: u64,
    /// Lines consumed.
    lines: u64,
    max_line_len: usize,
    finished: bool,
    /// A followed file: under checkpoints, its reader cuts the stream for
    /// each barrier ([`resume`]).
    cuts: bool,
    /// The newest barrier this worker asked its reader to cut for.
    requested: u64,
    /// The cut this worker stopped at (barrier id, the source's state
    /// there), until its source placed the barrier.
    held: Option<(u64, Vec<u8>)>,
    _error: std::marker::PhantomData<fn() -> E>,
}

impl<E> std::fmt::Debug for LiveLines<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveLines")
            .field("name", &self.name)
            .field("lines", &self.lines)
            .field("finished", &self.finished)
            .finish()
    }
}

impl<E: LineError> LiveLines<E> {
    /// The next line, `Ok(None)` if none is queued now or at the end (see
    /// the type's docs).
    ///
    /// # Errors
    /// [`LineFailure::TooLong`] for a line over the limit (the next call
    /// goes on after it); [`LineFailure::Read`] once, for a read error that
    /// ended the input (then finished).
    pub(crate) fn next_line(&mut self) -> Result<Option<RawLine>, E> {
        loop {
            if let Some(c) = &self.cur {
                if self.pos < c.bytes.len() {
                    let rest = &c.bytes[self.pos..];
                    let k = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
                    let start = self.pos;
                    let offset = c.offset + start as u64;
                    let number = self.line;
                    self.pos += (k + 1).min(rest.len());
                    self.line += 1;
                    self.lines += 1;
                    if k > self.max_line_len {
                        let max = self.max_line_len;
                        let name = (*c.name).clone();
                        return Err(E::new(
                            name,
                            Some(number),
                            Some(offset),
                            LineFailure::TooLong { max },
                        ));
                    }
                    return Ok(Some(RawLine {
                        start,
                        end: start + k,
                        offset,
                        number,
                    }));
                }
                let done = self.cur.take().expect("a chunk");
                self.shared
                    .free
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(done.bytes);
            }
            if self.finished {
                return Ok(None);
            }
            if self.cuts && !self.cut_passed() {
                return Ok(None);
            }
            match self.rx.try_recv() {
                Ok(c) if c.cut.is_some() => {
                    // Every line before the cut was read: nothing more
                    // until the source placed the cut's barrier.
                    self.held = c.cut;
                    air_runtime::dataflow::input_cuts_barriers(self.held.clone());
                    return Ok(None);
                }
                Ok(c) => {
                    self.pos = 0;
                    self.line = c.line;
                    if c.too_long {
                        self.lines += 1;
                        let max = self.max_line_len;
                        return Err(E::new(
                            (*c.name).clone(),
                            Some(c.line),
                            Some(c.offset),
                            LineFailure::TooLong { max },
                        ));
                    }
                    self.cur = Some(c);
                }
                Err(TryRecvError::Empty) => return Ok(None),
                Err(TryRecvError::Disconnected) => {
                    self.finished = true;
                    let e = self
                        .shared
                        .error
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .take();
                    return match e {
                        Some((name, at, e)) => Err(E::new(name, None, at, LineFailure::Read(e))),
                        None => Ok(None),
                    };
                }
            }
        }
    }
}

impl<E> LiveLines<E> {
    /// Under checkpoints, for a followed file: tells the source's segment
    /// that its input cuts its barriers, asks the reader for the cut of
    /// the barrier now due, and says whether this worker may read on
    /// (`false` while it is stopped at a cut whose barrier its source has
    /// not placed yet).
    fn cut_passed(&mut self) -> bool {
        use air_runtime::dataflow::{barrier_due, input_cuts_barriers, source_barrier};
        let Some(due) = barrier_due() else {
            return true;
        };
        let placed = PLACED_BY_ALL
            .with(|p| p.get())
            .unwrap_or_else(source_barrier);
        if let Some((id, _)) = &self.held {
            if placed < *id {
                input_cuts_barriers(self.held.clone());
                return false;
            }
            self.held = None;
        }
        input_cuts_barriers(None);
        if due > self.requested.max(placed) {
            self.requested = due;
            self.shared.follow.request(due);
        }
        true
    }

    /// The bytes of `line` (from the last [`next_line`](Self::next_line)),
    /// without one `\r` at their end.
    pub(crate) fn text(&self, line: &RawLine) -> &[u8] {
        let bytes = self
            .cur
            .as_ref()
            .map_or(&[][..], |c| &c.bytes[line.start..line.end]);
        match bytes {
            [rest @ .., b'\r'] => rest,
            _ => bytes,
        }
    }

    /// The stream the current line comes from (the input, or its
    /// connection).
    pub(crate) fn path(&self) -> &Path {
        self.cur.as_ref().map_or(&self.name, |c| &c.name)
    }

    /// Lines consumed so far.
    pub(crate) fn lines(&self) -> u64 {
        self.lines
    }

    /// Whether the input ended (or [`finish`](Self::finish) was called).
    pub(crate) fn is_finished(&self) -> bool {
        self.finished && self.cur.is_none()
    }

    /// Stops reading: the queue is dropped, so the readers stop handing
    /// this worker chunks.
    pub(crate) fn finish(&mut self) {
        self.finished = true;
        self.cur = None;
        // Disconnect: drain nothing more, readers see the queue closed.
        let (_, rx) = sync_channel(0);
        self.rx = rx;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--input` arguments: `-` and `tcp://` are live, paths are not;
    /// `{rank}` becomes the rank.
    #[test]
    fn input_args_and_rank_names() {
        assert_eq!(
            LiveInput::from_input_arg(Path::new("-")),
            Some(LiveInput::Stdin)
        );
        assert_eq!(LiveInput::from_input_arg(Path::new("events.json")), None);
        let t = LiveInput::from_input_arg(Path::new("tcp://127.0.0.1:900{rank}")).unwrap();
        assert_eq!(t.for_rank(3), LiveInput::Connect("127.0.0.1:9003".into()));
        assert_eq!(t.for_rank(3).name(), "tcp://127.0.0.1:9003");
        let l = LiveInput::Listen("127.0.0.1:70{rank}0".into());
        assert_eq!(l.for_rank(2).name(), "listen://127.0.0.1:7020");
        let f = LiveInput::Follow("/data/events-{rank}.json".into());
        assert_eq!(
            f.for_rank(1),
            LiveInput::Follow("/data/events-1.json".into())
        );
        assert_eq!(f.for_rank(1).name(), "/data/events-1.json");
    }

    /// A line failure as text, to compare.
    #[derive(Debug)]
    struct Failed(String);

    impl LineError for Failed {
        fn new(path: PathBuf, line: Option<u64>, offset: Option<u64>, f: LineFailure) -> Self {
            Failed(format!("{}:{line:?}:{offset:?}: {f:?}", path.display()))
        }
    }

    /// One line as a worker saw it: stream, line number, byte offset, text.
    type Seen = (String, u64, u64, String);

    /// Reads worker 0's lines of `feed` until the input ends (in a thread).
    fn drain(feed: &LiveFeed) -> std::thread::JoinHandle<Vec<Seen>> {
        let mut lines = feed.worker::<Failed>(0, || {}).unwrap();
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            let t = Instant::now();
            loop {
                match lines.next_line().unwrap_or_else(|e| panic!("{}", e.0)) {
                    Some(l) => seen.push((
                        lines.path().display().to_string(),
                        l.number,
                        l.offset,
                        String::from_utf8_lossy(lines.text(&l)).into_owned(),
                    )),
                    None if lines.is_finished() => return seen,
                    None => std::thread::sleep(Duration::from_millis(1)),
                }
                assert!(t.elapsed() < Duration::from_secs(60), "no end in 60 s");
            }
        })
    }

    fn follow_opts() -> LiveOptions {
        LiveOptions {
            poll: Duration::from_millis(5),
            idle_end: Some(Duration::from_millis(400)),
            ..LiveOptions::default()
        }
    }

    fn append(f: &mut File, bytes: &[u8]) {
        use std::io::Write;
        f.write_all(bytes).unwrap();
        f.flush().unwrap();
    }

    /// Growth (a line split across writes), a rotation by rename with a
    /// writer that still appends to the old file, a new file whose last
    /// line has no `\n` (a line at the idle end): every line once, in
    /// order, numbered per file.
    #[test]
    fn follow_reads_growth_and_a_rotation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.log");
        let mut old = File::create(&path).unwrap();
        append(&mut old, b"a1\na2\n");
        let feed = LiveFeed::start(&LiveInput::Follow(path.clone()), 1, follow_opts()).unwrap();
        let reader = drain(&feed);
        std::thread::sleep(Duration::from_millis(50));
        append(&mut old, b"a3\npart");
        std::thread::sleep(Duration::from_millis(50));
        append(&mut old, b"ial\n");
        std::fs::rename(&path, dir.path().join("f.log.1")).unwrap();
        append(&mut old, b"a5-old\n");
        let mut new = File::create(&path).unwrap();
        append(&mut new, b"b1\nb2");
        let seen = reader.join().unwrap();
        let p = path.display().to_string();
        let p2 = format!("{p} (file 2)");
        let want: Vec<Seen> = [
            (&p, 1, 0, "a1"),
            (&p, 2, 3, "a2"),
            (&p, 3, 6, "a3"),
            (&p, 4, 9, "partial"),
            (&p, 5, 17, "a5-old"),
            (&p2, 1, 0, "b1"),
            (&p2, 2, 3, "b2"),
        ]
        .into_iter()
        .map(|(n, l, o, t)| (n.clone(), l, o, t.to_string()))
        .collect();
        assert_eq!(seen, want);
        let r = feed.report();
        assert_eq!((r.streams, r.partial_lines, r.bytes), (2, 0, 24 + 5));
    }

    /// A truncation under a line being written: the whole lines before it
    /// count, the partial line is reported with its offset and dropped,
    /// and the file is read again from byte 0.
    #[test]
    fn follow_restarts_after_a_truncation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.log");
        let mut f = File::create(&path).unwrap();
        append(&mut f, b"x1\nx2\nx3-part");
        let feed = LiveFeed::start(&LiveInput::Follow(path.clone()), 1, follow_opts()).unwrap();
        let reader = drain(&feed);
        // Until the reader has read it all.
        let t = Instant::now();
        while feed.report().bytes < 13 {
            assert!(t.elapsed() < Duration::from_secs(30));
            std::thread::sleep(Duration::from_millis(2));
        }
        f.set_len(0).unwrap();
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        append(&mut f, b"y1\n");
        let seen = reader.join().unwrap();
        let p = path.display().to_string();
        let p2 = format!("{p} (file 2)");
        let want: Vec<Seen> = vec![
            (p.clone(), 1, 0, "x1".into()),
            (p.clone(), 2, 3, "x2".into()),
            (p2, 1, 0, "y1".into()),
        ];
        assert_eq!(seen, want);
        let r = feed.report();
        assert_eq!((r.streams, r.partial_lines), (2, 1));
        assert_eq!(
            r.first_partial.as_deref(),
            Some(&*format!(
                "{p}:3: file truncated mid-line: partial line of 7 bytes dropped (byte offset 6)"
            ))
        );
    }

    /// A path that is missing or not a regular file is refused at start.
    #[test]
    fn follow_refuses_what_it_cannot_follow() {
        let dir = tempfile::tempdir().unwrap();
        let missing = LiveInput::Follow(dir.path().join("none"));
        let e = LiveFeed::start(&missing, 1, LiveOptions::default()).unwrap_err();
        assert!(e.to_string().starts_with("cannot follow "), "{e}");
        let d = LiveInput::Follow(dir.path().to_path_buf());
        let e = LiveFeed::start(&d, 1, LiveOptions::default()).unwrap_err();
        assert!(e.to_string().contains("a directory, not a file"), "{e}");
    }
}
