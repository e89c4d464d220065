//! Live inputs: line streams that are read as they arrive and may never
//! end — standard input (a pipe), a TCP connection air makes
//! (`tcp://HOST:PORT`), or TCP connections air accepts (`--listen`).
//!
//! A rank has one live input. One reader thread per stream (stdin, the
//! connection, or each accepted connection) reads large chunks (up to
//! [`LiveOptions::chunk_bytes`]) from the file descriptor, cuts each at its
//! last `\n` (the partial line is carried to the next chunk) and hands the
//! whole-line chunks to the rank's workers round-robin, through one bounded
//! queue per worker ([`LiveOptions::queue_chunks`] chunks). A full queue is
//! skipped for the next one; when every queue is full the reader blocks, so
//! a sender faster than the job is held back by the pipe or by TCP flow
//! control — nothing is buffered without bound. The reader does not parse:
//! each worker finds the lines of its chunks and parses them
//! ([`LiveLines`], under the usual bad-record policy), so parsing runs on
//! every worker. The reader rings a worker's doorbell after it hands it a
//! chunk, so a parked worker wakes at once.
//!
//! Lines are numbered, and byte offsets counted, from the start of each
//! stream (for `--listen`, each connection). A worker's records come in
//! stream order (its chunks are in order), so its watermark follows its
//! records as with a file.
//!
//! End of stream: EOF on standard input, the server closing the
//! connection (`tcp://`), or — with [`LiveInput::Listen`] — every accepted
//! sender having closed its connection (after at least one came; later
//! senders are refused). A connection that ends mid-line (a sender that
//! died or dropped): the partial line is reported with its byte offset
//! ([`LiveReport::partial_lines`]) and skipped. On standard input a last
//! line without `\n` is a line, as in a file.

use std::io::{self, Read};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use super::lines::{LineError, LineFailure, RawLine};

/// Where a rank's live input comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LiveInput {
    /// Standard input (`--input -`).
    Stdin,
    /// A TCP connection air makes to `HOST:PORT` (`--input tcp://HOST:PORT`).
    Connect(String),
    /// TCP connections air accepts on `HOST:PORT` (`--listen HOST:PORT`).
    Listen(String),
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

    /// This input for rank `rank`: every `{rank}` in the address replaced
    /// by the rank's number (so each MPI rank reads its own input, e.g.
    /// `tcp://127.0.0.1:900{rank}`).
    pub fn for_rank(&self, rank: usize) -> LiveInput {
        let r = |a: &str| a.replace("{rank}", &rank.to_string());
        match self {
            LiveInput::Stdin => LiveInput::Stdin,
            LiveInput::Connect(a) => LiveInput::Connect(r(a)),
            LiveInput::Listen(a) => LiveInput::Listen(r(a)),
        }
    }

    /// How errors name the input: `-`, `tcp://HOST:PORT`,
    /// `listen://HOST:PORT`.
    pub fn name(&self) -> String {
        match self {
            LiveInput::Stdin => "-".into(),
            LiveInput::Connect(a) => format!("tcp://{a}"),
            LiveInput::Listen(a) => format!("listen://{a}"),
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
}

impl Default for LiveOptions {
    fn default() -> LiveOptions {
        LiveOptions {
            chunk_bytes: 512 << 10,
            queue_chunks: 4,
            max_line_len: 1 << 20,
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
    /// The stream: the input's name, with the connection for `--listen`.
    name: Arc<PathBuf>,
    /// A line over the limit starts at `offset` (line `line`); it was
    /// dropped.
    too_long: bool,
}

/// What a live input counted, for reports.
#[derive(Debug, Default)]
pub struct LiveReport {
    /// Bytes read from every stream.
    pub bytes: u64,
    /// Streams (connections) read.
    pub streams: u64,
    /// Partial lines dropped at the end of a connection.
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
    /// input, connects, or binds the listening socket now, and reads in
    /// background threads (which end when the input ends, or at their next
    /// read after the job is done with it).
    ///
    /// # Errors
    /// Connecting or binding failed (the message names the address).
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
        });
        let name = Arc::new(PathBuf::from(input.name()));
        let with_addr = |what: &str, a: &str, e: io::Error| {
            io::Error::new(e.kind(), format!("{what} {a}: {e}"))
        };
        match input {
            LiveInput::Stdin => {
                let pump = Pump::new(shared.clone(), senders, name.clone(), opts, false, 0);
                spawn("air-stdin", move || pump.run(io::stdin().lock(), 0));
            }
            LiveInput::Connect(a) => {
                let s = connect(a).map_err(|e| with_addr("cannot connect to", a, e))?;
                let fd = s.as_raw_fd();
                let pump = Pump::new(shared.clone(), senders, name.clone(), opts, true, 0);
                spawn("air-tcp", move || pump.run(s, fd));
            }
            LiveInput::Listen(a) => {
                let l = TcpListener::bind(a).map_err(|e| with_addr("cannot listen on", a, e))?;
                let (sh, n) = (shared.clone(), name.clone());
                spawn("air-listen", move || accept_loop(l, sh, senders, n, opts));
            }
        }
        Ok(LiveFeed { shared, name, opts })
    }

    /// The input's name in errors (`-`, `tcp://…`, `listen://…`).
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

/// Accepts senders until every one that came has closed (at least one).
fn accept_loop(
    l: TcpListener,
    shared: Arc<Shared>,
    senders: Vec<SyncSender<Chunk>>,
    name: Arc<PathBuf>,
    opts: LiveOptions,
) {
    let active = Arc::new(AtomicUsize::new(0));
    let mut came = 0usize;
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
                let pump = Pump::new(shared.clone(), senders.clone(), conn, opts, true, came);
                let active = active.clone();
                spawn("air-conn", move || {
                    pump.run(s, fd);
                    active.fetch_sub(1, Ordering::AcqRel);
                });
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if came > 0 && active.load(Ordering::Acquire) == 0 {
                    // Every sender closed: the input ends (the senders'
                    // clones are gone; dropping ours disconnects).
                    return;
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
const PIECE_BYTES: usize = 4096;

/// One stream's reader: reads chunks, cuts them at their last `\n`, hands
/// them to the workers.
struct Pump {
    shared: Arc<Shared>,
    senders: Vec<SyncSender<Chunk>>,
    /// Whether each worker still takes chunks.
    open: Vec<bool>,
    name: Arc<PathBuf>,
    opts: LiveOptions,
    /// A connection: a last line without `\n` is a partial line (dropped).
    socket: bool,
    /// Next worker to try.
    next: usize,
}

impl Pump {
    fn new(
        shared: Arc<Shared>,
        senders: Vec<SyncSender<Chunk>>,
        name: Arc<PathBuf>,
        opts: LiveOptions,
        socket: bool,
        first: usize,
    ) -> Pump {
        let n = senders.len();
        Pump {
            shared,
            open: vec![true; n],
            senders,
            name,
            opts,
            socket,
            next: first % n.max(1),
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
    /// read, so every worker gets chunks anyway), otherwise cut at line
    /// boundaries into pieces of about [`PIECE_BYTES`] (at least one per
    /// worker that takes chunks), handed round-robin. So when the input
    /// comes slower than it is read, every worker still gets lines, and
    /// lines near the end of what was read: a worker handed nothing (or
    /// only older lines) would hold every window back (its watermark
    /// follows its own records). The pieces copy at most what one unfilled
    /// read brought. `false`: no worker takes chunks any more.
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
        let pieces = open.max(bytes.len().div_ceil(PIECE_BYTES));
        let step = (bytes.len() / pieces).max(1);
        let (mut start, mut offset, mut line) = (0usize, offset, line);
        while start < bytes.len() {
            // The end of the line that holds byte start + step - 1.
            let want = (start + step - 1).min(bytes.len() - 1);
            let end = memchr::memchr(b'\n', &bytes[want..]).map_or(bytes.len(), |j| want + j + 1);
            let mut piece = self.empty_buffer();
            piece.extend_from_slice(&bytes[start..end]);
            let n = memchr::memchr_iter(b'\n', &piece).count() as u64;
            if !self.send(self.chunk(piece, offset, line, false)) {
                return false;
            }
            offset += (end - start) as u64;
            line += n;
            start = end;
        }
        self.shared
            .free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(bytes);
        true
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
        }
    }

    /// Reads `r` (whose descriptor is `fd`, polled to see whether more is
    /// ready) to its end.
    fn run(mut self, mut r: impl Read, fd: RawFd) {
        self.shared.streams.fetch_add(1, Ordering::Relaxed);
        if !self.socket {
            grow_pipe(fd);
        }
        let target = self.opts.chunk_bytes.max(4096);
        let max = self.opts.max_line_len;
        // `buf[..filled]`: bytes read and not handed on; `buf`'s length is
        // its capacity, so reads need no zeroing.
        let mut buf = self.buffer(target);
        let mut filled = 0usize;
        // Stream offset of buf[0] and number of its first line.
        let (mut offset, mut line) = (0u64, 1u64);
        // Dropping an over-long line up to its `\n`.
        let mut discarding = false;
        loop {
            if self.shared.closed.load(Ordering::Acquire) {
                return;
            }
            if buf.len() - filled < 4096 {
                buf.resize(buf.len() + target, 0);
            }
            let got = match r.read(&mut buf[filled..]) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    buf.truncate(filled);
                    self.end(buf, offset, line, Some(e));
                    return;
                }
            };
            self.shared.bytes.fetch_add(got as u64, Ordering::Relaxed);
            if got == 0 {
                buf.truncate(filled);
                self.end(buf, offset, line, None);
                return;
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
            if filled < target && ready(fd) {
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
                        return;
                    }
                    offset += n;
                    line += lines;
                }
                None if filled > max => {
                    // One line over the limit: reported, then dropped.
                    let c = self.chunk(Vec::new(), offset, line, true);
                    if !self.send(c) {
                        return;
                    }
                    offset += filled as u64;
                    filled = 0;
                    discarding = true;
                }
                None => {}
            }
        }
    }

    /// The stream ended (EOF, or a read error `e`) with `buf` unsent.
    fn end(mut self, mut buf: Vec<u8>, mut offset: u64, mut line: u64, e: Option<io::Error>) {
        if self.socket {
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
                    return;
                }
                offset += n;
                line += lines;
            }
        }
        if !buf.is_empty() {
            if self.socket {
                // A sender gone mid-line: the partial line is dropped.
                self.shared.partial.fetch_add(1, Ordering::Relaxed);
                let msg = format!(
                    "{}:{line}: connection ended mid-line: partial line of {} bytes dropped \
                     (byte offset {offset})",
                    self.name.display(),
                    buf.len()
                );
                air_runtime::say!("warning: {msg}");
                self.shared
                    .first_partial
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get_or_insert(msg);
            } else {
                // Standard input's last line without `\n` is a line.
                let c = self.chunk(buf, offset, line, false);
                self.send(c);
            }
        }
        if let Some(e) = e {
            let reset = matches!(
                e.kind(),
                io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
            );
            if !(self.socket && reset) {
                let at = offset;
                *self.shared.error.lock().unwrap_or_else(|e| e.into_inner()) =
                    Some(((*self.name).clone(), Some(at), e));
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
            match self.rx.try_recv() {
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
    }
}
