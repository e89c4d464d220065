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

use std::io::{self, Read};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

mod follow;
mod lines;
mod resume;
use follow::Follower;
pub(crate) use lines::{placed_by_all, LiveLines};
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
        Some(LiveLines::new(
            self.shared.clone(),
            self.name.clone(),
            rx,
            self.opts.max_line_len,
            self.shared.follow.enabled,
        ))
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
    /// A followed file's device and inode, its number at the path and a
    /// hash of its bytes before `offset` (what a cut records:
    /// [`resume::FollowPosition`]); `None` for other inputs.
    fn identity(&self, offset: u64) -> Option<((u64, u64), u64, u64)> {
        let _ = offset;
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
                        tail: f.identity(self.end_at.0).map_or(0, |i| i.2),
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
                // The whole lines read so far go first, then the cut.
                if let Some(k) = memchr::memrchr(b'\n', &buf[..filled]) {
                    let rest_len = filled - (k + 1);
                    let mut rest = self.buffer(target.max(rest_len + 4096));
                    rest[..rest_len].copy_from_slice(&buf[k + 1..filled]);
                    buf.truncate(k + 1);
                    let lines = memchr::memchr_iter(b'\n', &buf).count() as u64;
                    let n = buf.len() as u64;
                    let full = std::mem::replace(&mut buf, rest);
                    filled = rest_len;
                    if !self.send(self.chunk(full, offset, line, false)) {
                        return false;
                    }
                    offset += n;
                    line += lines;
                }
                let Some((file, files, tail)) = r.identity(offset) else {
                    self.shared.follow.made(id);
                    continue;
                };
                let at = resume::FollowPosition {
                    offset,
                    line,
                    id: file,
                    files,
                    tail,
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

#[cfg(test)]
mod tests;
