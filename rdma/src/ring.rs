//! The remote frame ring: the network tier's channel. Same frame format and
//! flow control as air-shm's ring (16-byte headers: length, kind, sequence;
//! 16-byte aligned frames that never cross a segment's end, a padding frame
//! fills it), but the two ends are on different ranks, and the receiver
//! **pulls** (see `docs/channels.md`, "The pull design"):
//!
//! - the ring (its `tail` word and data area) lives in the **sender's**
//!   window part: the sender writes frames into it with plain stores and
//!   publishes its tail with a release store followed by `MPI_Win_sync`; it
//!   makes no MPI call to send;
//! - the receiver polls with request-based gets (`MPI_Rget` of the tail
//!   word, then of the new bytes into a local buffer of one segment), whose
//!   completion it tests with `MPI_Test` (which drives MPI's progress engine,
//!   so it serves the peer's gets while it waits), and reads frames from its
//!   buffer;
//! - the `head` (credit) word lives in the **receiver's** window part: the
//!   receiver stores its head there after reading; the sender `MPI_Rget`s it
//!   when its cached copy says the ring is full.
//!
//! No call ever blocks in `MPI_Win_flush`: under MPICH with UCX's emulated
//! RMA a flush completes only when the target calls into MPI, so two ranks
//! flushing to each other waited on each other; a get tested with
//! `MPI_Test` completes as soon as the peer's loop next calls into MPI.
//!
//! The receiver checks the tail and every header against the ring (length,
//! kind, sequence): bytes from the network are never trusted.
//!
//! Region of one ring in the sender's part (`ring_region_bytes(cap)`):
//!
//! | bytes | field | writer | reader |
//! |---|---|---|---|
//! | 0..8 | `tail`: bytes ever published (a multiple of 16), u64; bit 0 set once the sender closed its end (the tail is then final) | sender (local release store, then `MPI_Win_sync`) | receiver (`MPI_Rget`) |
//! | 128..128+cap | data area | sender (local stores) | receiver (`MPI_Rget` of published bytes) |
//!
//! Credit word in the receiver's part (`CREDIT_BYTES`): bytes 0..8 `head`,
//! bytes ever released by the receiver (u64; its local release store; the
//! sender reads it with `MPI_Rget`).

use crate::error::{RdmaError, Result};
use crate::liveness::Liveness;
use crate::win::{Epoch, Request};
use air_shm::frame::{check_frame, check_published, segment_bytes, FrameCheck};
use air_shm::{frame_size, FrameKind, FRAME_ALIGN, FRAME_HEADER, KIND_PADDING};
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes before the data area of a ring region (the tail word, on a cache
/// line of its own).
pub const RING_CTRL_BYTES: usize = 128;
/// Bytes of one credit slot in the receiver's part (a cache line each, so
/// credits of different rings do not share a line).
pub const CREDIT_BYTES: usize = 64;
pub(crate) const TAIL_AT: usize = 0;
/// Bit of the tail word that says the sender closed its end.
const CLOSED_BIT: u64 = 1;
/// Empty or full polls between two liveness checks.
const PROGRESS_EVERY: u32 = 8;
/// Least time between two polls of the sender's tail that found nothing
/// new (each is an `MPI_Test`, and an `MPI_Rget` when one completed):
/// 50 µs. A worker busy with its sources loops every ~15 µs (1,024 YSB
/// events) and polled in every loop, about 3% of its CPU; data is read at
/// most this much later than it could be (senders publish once per flush
/// interval, 1 ms), and the peers' gets of this rank's words, which MPICH
/// completes when this rank calls into MPI, wait at most this much more.
const EMPTY_POLL_GAP: std::time::Duration = std::time::Duration::from_micros(50);
/// Tests of a request a dropped end makes before it gives up on it (and
/// leaks the buffer MPI may still write).
const DROP_TESTS: u32 = 1_000_000;

/// Bytes a ring with a data area of `cap` bytes takes in the sender's part.
pub const fn ring_region_bytes(cap: usize) -> usize {
    RING_CTRL_BYTES + cap
}

/// Checks a data-area capacity: at least 64 bytes, a multiple of 16.
pub fn check_capacity(cap: usize) -> Result<()> {
    if cap < 64 || cap % FRAME_ALIGN != 0 {
        return Err(RdmaError::Setup(format!(
            "remote ring capacity {cap} bytes: must be at least 64 and a multiple of 16"
        )));
    }
    Ok(())
}

/// A frame header: `len` (u32 LE, bytes 0..4), `kind` (byte 4), the sending
/// worker's index within its rank (u16 LE, bytes 6..8; 0 for a ring with one
/// producer), `seq` (u64 LE, bytes 8..16). air-shm's checks ignore bytes 5..8.
fn header(len: u32, kind: u8, from: u16, seq: u64) -> [u8; FRAME_HEADER] {
    let mut h = [0u8; FRAME_HEADER];
    h[..4].copy_from_slice(&len.to_le_bytes());
    h[4] = kind;
    h[6..8].copy_from_slice(&from.to_le_bytes());
    h[8..16].copy_from_slice(&seq.to_le_bytes());
    h
}

/// A 16-byte aligned byte buffer: the receiver's local copy of one segment
/// of a ring (the target of its gets). It is only accessed through raw
/// pointers to disjoint byte ranges (MPI writes the range of a pending get,
/// the receiver reads the range before it).
pub(crate) struct Buffer {
    ptr: *mut u128,
    words: usize,
}

// SAFETY: the buffer is owned; who touches which bytes when is governed by
// the ring's counters, not by Rust references.
unsafe impl Send for Buffer {}

impl Buffer {
    pub(crate) fn new(len: usize) -> Buffer {
        let words = len.div_ceil(16);
        let b: Box<[u128]> = vec![0u128; words].into_boxed_slice();
        Buffer {
            ptr: Box::into_raw(b).cast(),
            words,
        }
    }

    fn at(&self, off: usize) -> *mut u8 {
        debug_assert!(off <= self.words * 16);
        // SAFETY: within the allocation (or one past its end).
        unsafe { self.ptr.cast::<u8>().add(off) }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from Box::into_raw of a boxed slice of `words`
        // u128 and is freed once, here.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.ptr, self.words)) });
    }
}

/// The sender's bookkeeping of one ring, free of MPI: frames are written
/// into the ring's data area (in the sender's own window part) at `tail`;
/// what the receiver released comes from outside (the credit).
pub(crate) struct FrameWriter {
    cap: usize,
    seg: usize,
    /// Bytes ever written (frames and padding).
    tail: u64,
    /// The receiver's credit as last read (bytes it released).
    head: u64,
    seq: u64,
}

impl FrameWriter {
    pub(crate) fn new(cap: usize) -> FrameWriter {
        FrameWriter {
            cap,
            seg: segment_bytes(cap),
            tail: 0,
            head: 0,
            seq: 0,
        }
    }

    pub(crate) fn max_payload(&self) -> usize {
        self.seg - FRAME_HEADER
    }

    /// Whether `bytes` more fit behind the receiver's credit as last read.
    fn room(&self, bytes: usize) -> bool {
        self.tail + bytes as u64 - self.head <= self.cap as u64
    }

    /// Writes one frame into the data area at `data` (`cap` bytes; see
    /// [`RmaProducer::try_send_from`]) if the ring has room behind the
    /// receiver's credit as last read. `Ok(false)`: no room.
    ///
    /// # Safety
    /// `data` points to this writer's data area, which no one else writes,
    /// and the receiver reads only bytes below the published tail.
    unsafe fn try_write(
        &mut self,
        data: *mut u8,
        from: u16,
        kind: FrameKind,
        max_len: usize,
        write: &mut dyn FnMut(&mut [u8]) -> Option<usize>,
    ) -> Result<bool> {
        let need = frame_size(max_len);
        if need > self.seg {
            return Err(RdmaError::FrameTooLarge {
                len: max_len,
                max: self.max_payload(),
            });
        }
        let to_end = self.seg - (self.tail % self.seg as u64) as usize;
        if need > to_end {
            // The frame would cross a segment's end: pad to it first. The
            // padding needs room of its own (a frame of more than half the
            // ring fits only once the receiver read the padding); the frame
            // then needs room at the next segment's start.
            if !self.room(to_end) {
                return Ok(false);
            }
            let off = (self.tail % self.cap as u64) as usize;
            // SAFETY: off + 16 <= cap (segments divide the area); the bytes
            // lie at or past `tail`, which the receiver does not read before
            // the tail is published past them, and within the credit.
            let h = unsafe { std::slice::from_raw_parts_mut(data.add(off), FRAME_HEADER) };
            h.copy_from_slice(&header((to_end - FRAME_HEADER) as u32, KIND_PADDING, 0, 0));
            self.tail += to_end as u64;
        }
        if !self.room(need) {
            return Ok(false);
        }
        let off = (self.tail % self.cap as u64) as usize;
        // SAFETY: off + need <= cap (a frame never crosses a segment's end,
        // segments divide the area); the range is at or past `tail` and
        // within the credit, exclusively this writer's until published.
        let frame =
            unsafe { std::slice::from_raw_parts_mut(data.add(off), FRAME_HEADER + max_len) };
        if let Some(n) = write(&mut frame[FRAME_HEADER..]) {
            let n = n.min(max_len);
            frame[..FRAME_HEADER].copy_from_slice(&header(n as u32, kind as u8, from, self.seq));
            self.seq += 1;
            self.tail += frame_size(n) as u64;
        }
        Ok(true)
    }
}

/// The sending end of a remote ring (on the sender's rank).
pub struct RmaProducer<'e> {
    epoch: &'e Epoch<'e, 'e>,
    live: &'e Liveness,
    target: usize,
    tail_word: &'e AtomicU64,
    data: *mut u8,
    credit_disp: usize,
    w: FrameWriter,
    published: u64,
    /// Target of the credit get (heap, so it stays put; leaked if a get is
    /// still pending when the producer is dropped).
    credit: Box<u64>,
    credit_req: Option<Request>,
    full_polls: u32,
    closed: bool,
}

impl std::fmt::Debug for RmaProducer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RmaProducer")
            .field("target", &self.target)
            .field("cap", &self.w.cap)
            .field("tail", &self.w.tail)
            .field("published", &self.published)
            .field("head", &self.w.head)
            .field("credit_pending", &self.credit_req.is_some())
            .finish()
    }
}

// SAFETY: the epoch is usable from any thread (MPI_THREAD_MULTIPLE); the
// ring region is written only by this end; the credit buffer is owned.
unsafe impl Send for RmaProducer<'_> {}

/// The `u64` word at byte `disp` of this rank's part of `epoch`'s window.
fn own_word<'e>(epoch: &'e Epoch<'e, 'e>, what: &str, disp: usize) -> Result<&'e AtomicU64> {
    let win = epoch.window();
    if disp + 8 > win.len() || disp % 8 != 0 {
        return Err(crate::win::out_of_range(what, disp, 8, win.len()));
    }
    // SAFETY: inside this rank's part (checked), 8-aligned (window memory is
    // page-aligned, disp % 8 == 0); only ever accessed as an AtomicU64
    // locally, and read by remote gets of the whole word.
    Ok(unsafe { &*(win.base().add(disp) as *const AtomicU64) })
}

/// Tests `req` until it completes or `DROP_TESTS` tests passed; whether it
/// completed.
fn settle(req: &mut Request) -> bool {
    for _ in 0..DROP_TESTS {
        match req.test() {
            Ok(true) => return true,
            Ok(false) => std::hint::spin_loop(),
            Err(_) => return false,
        }
    }
    false
}

impl<'e> RmaProducer<'e> {
    /// The sender of a ring whose region starts at byte `ring_disp` of this
    /// rank's own part, with a data area of `cap` bytes, read by rank
    /// `target`, whose credit word for this ring is at byte `credit_disp`
    /// of `target`'s part. Both ends must agree on every number (the runtime
    /// computes them from one layout). The runtime's workers share rings
    /// through an [`crate::RmaOutbox`].
    ///
    /// # Errors
    /// [`RdmaError::Setup`] for a bad capacity or a region outside this
    /// rank's part.
    pub fn new(
        epoch: &'e Epoch<'e, 'e>,
        live: &'e Liveness,
        target: usize,
        ring_disp: usize,
        cap: usize,
        credit_disp: usize,
    ) -> Result<Self> {
        check_capacity(cap)?;
        let win = epoch.window();
        let bytes = ring_region_bytes(cap);
        if ring_disp + bytes > win.len() || ring_disp % FRAME_ALIGN != 0 {
            return Err(crate::win::out_of_range(
                "ring region",
                ring_disp,
                bytes,
                win.len(),
            ));
        }
        let tail_word = own_word(epoch, "ring tail", ring_disp + TAIL_AT)?;
        // SAFETY: the region is inside this rank's part (checked above).
        let data = unsafe { win.base().add(ring_disp + RING_CTRL_BYTES) };
        Ok(RmaProducer {
            epoch,
            live,
            target,
            tail_word,
            data,
            credit_disp,
            w: FrameWriter::new(cap),
            published: 0,
            credit: Box::new(0),
            credit_req: None,
            full_polls: 0,
            closed: false,
        })
    }

    /// Largest frame payload, bytes: a segment of the ring
    /// ([`segment_bytes`]) less the 16-byte header.
    pub fn max_payload(&self) -> usize {
        self.w.max_payload()
    }

    /// Writes one frame of `kind` without blocking: `write` gets `max_len`
    /// bytes of the ring and returns how many it used (`None` abandons the
    /// frame). Returns `Ok(false)` when the ring has no room (after
    /// publishing what is pending, asking for the receiver's credit and
    /// checking the peer's liveness). The frame reaches the receiver at the
    /// next [`RmaProducer::flush`].
    pub fn try_send(
        &mut self,
        kind: FrameKind,
        max_len: usize,
        write: &mut dyn FnMut(&mut [u8]) -> Option<usize>,
    ) -> Result<bool> {
        self.try_send_from(0, kind, max_len, write)
    }

    /// [`RmaProducer::try_send`] whose frame header carries `from`, the
    /// sending worker's index within its rank, which the receiver gets from
    /// [`RmaConsumer::try_recv_from`].
    ///
    /// # Errors
    /// [`RdmaError::Closed`] after [`RmaProducer::close`];
    /// [`RdmaError::FrameTooLarge`]; [`RdmaError::Corrupt`] for a credit
    /// that breaks the protocol; [`RdmaError::RankLost`]; MPI errors.
    pub fn try_send_from(
        &mut self,
        from: u16,
        kind: FrameKind,
        max_len: usize,
        write: &mut dyn FnMut(&mut [u8]) -> Option<usize>,
    ) -> Result<bool> {
        if self.closed {
            return Err(RdmaError::Closed);
        }
        for _ in 0..2 {
            // SAFETY: `data` is this ring's data area in this rank's part,
            // written only by this producer; the receiver reads only
            // published bytes.
            if unsafe { self.w.try_write(self.data, from, kind, max_len, write)? } {
                self.full_polls = 0;
                return Ok(true);
            }
            // Full as far as the cached credit knows: publish what is
            // pending (the receiver frees room only by reading it) and ask
            // for the credit.
            self.flush()?;
            if !self.poll_credit()? {
                self.full_polls += 1;
                if self.full_polls % PROGRESS_EVERY == 0 {
                    self.live.check()?;
                }
                return Ok(false);
            }
        }
        Ok(false)
    }

    /// Advances the credit get: issues one if none is pending, tests it;
    /// `Ok(true)` when a get completed (the cached credit is then current).
    fn poll_credit(&mut self) -> Result<bool> {
        if self.credit_req.is_none() {
            // SAFETY: `credit` is a heap word owned by this producer and
            // untouched until the request completes; if it is dropped
            // first, the word is leaked (Drop).
            let req = unsafe {
                self.epoch.rget(
                    (&mut *self.credit as *mut u64).cast(),
                    8,
                    self.target,
                    self.credit_disp,
                )?
            };
            self.credit_req = Some(req);
        }
        let done = match self.credit_req.as_mut() {
            Some(r) => r.test()?,
            None => false,
        };
        if !done {
            return Ok(false);
        }
        self.credit_req = None;
        let head = *self.credit;
        if head < self.w.head || head > self.published || head % FRAME_ALIGN as u64 != 0 {
            return Err(RdmaError::Corrupt {
                rank: self.target,
                offset: 0,
                reason: format!(
                    "credit {head} with credit {} before and {} bytes published",
                    self.w.head, self.published
                ),
            });
        }
        self.w.head = head;
        Ok(true)
    }

    /// Publishes every frame written so far: a release store of the new
    /// tail into this rank's part, then `MPI_Win_sync` (a memory barrier
    /// between the local stores and the receiver's gets; it does not wait
    /// for any rank). Returns at once if nothing is new.
    ///
    /// # Errors
    /// MPI errors of `MPI_Win_sync`.
    pub fn flush(&mut self) -> Result<()> {
        let tail = self.w.tail;
        if self.published == tail {
            return Ok(());
        }
        self.tail_word.store(tail, Ordering::Release);
        self.epoch.sync()?;
        self.published = tail;
        Ok(())
    }
}

impl RmaProducer<'_> {
    /// Publishes what is pending and tells the receiver this end is gone
    /// (it reports [`RdmaError::Closed`] once it has read everything
    /// published): the tail word gets its closed bit. Idempotent; dropping
    /// the producer does it too.
    ///
    /// # Errors
    /// As [`RmaProducer::flush`].
    pub fn close(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        self.flush()?;
        self.closed = true;
        self.tail_word
            .store(self.published | CLOSED_BIT, Ordering::Release);
        self.epoch.sync()
    }
}

impl Drop for RmaProducer<'_> {
    fn drop(&mut self) {
        // Errors are moot while dropping.
        let _ = self.close();
        if let Some(mut req) = self.credit_req.take() {
            if !settle(&mut req) {
                // MPI may still write the word: never free it.
                std::mem::forget(std::mem::replace(&mut self.credit, Box::new(0)));
            }
        }
    }
}

/// The receiving end of a remote ring (on the receiver's rank).
pub struct RmaConsumer<'e> {
    live: &'e Liveness,
    source: usize,
    /// Byte of the ring region in `source`'s part.
    ring_disp: usize,
    /// This ring's credit word in this rank's part.
    head_word: &'e AtomicU64,
    /// Local copy of the segment being read (`seg` bytes).
    buf: Buffer,
    cap: usize,
    seg: usize,
    epoch: &'e Epoch<'e, 'e>,
    /// Bytes read (consumed).
    head: u64,
    /// Bytes copied into `buf` (complete gets): frames in `head..fetched`
    /// are readable.
    fetched: u64,
    /// The sender's tail as last read (bytes published).
    tail: u64,
    /// The tail word as last read carried the closed bit.
    closed: bool,
    released: u64,
    seq: u64,
    /// Target of the tail get (heap; leaked if pending at drop).
    tail_buf: Box<u64>,
    tail_req: Option<Request>,
    /// The pending data get and the position it fetches to.
    data_req: Option<(Request, u64)>,
    empty_polls: u32,
    /// No tail poll before this instant: the last one found nothing new
    /// ([`EMPTY_POLL_GAP`]).
    rest_until: Option<std::time::Instant>,
}

impl std::fmt::Debug for RmaConsumer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RmaConsumer")
            .field("source", &self.source)
            .field("cap", &self.cap)
            .field("head", &self.head)
            .field("fetched", &self.fetched)
            .field("tail", &self.tail)
            .field("closed", &self.closed)
            .field("released", &self.released)
            .field("tail_pending", &self.tail_req.is_some())
            .field("data_pending", &self.data_req.is_some())
            .finish()
    }
}

// SAFETY: the epoch is usable from any thread (MPI_THREAD_MULTIPLE); the
// buffers are owned; the credit word is written only by this end.
unsafe impl Send for RmaConsumer<'_> {}

impl<'e> RmaConsumer<'e> {
    /// The receiver of a ring whose region starts at byte `ring_disp` of
    /// rank `source`'s part, data area `cap` bytes; its credit word is at
    /// byte `credit_disp` of this rank's own part.
    ///
    /// # Errors
    /// [`RdmaError::Setup`] for a bad capacity or a credit slot outside this
    /// rank's part.
    pub fn new(
        epoch: &'e Epoch<'e, 'e>,
        live: &'e Liveness,
        source: usize,
        ring_disp: usize,
        cap: usize,
        credit_disp: usize,
    ) -> Result<Self> {
        check_capacity(cap)?;
        if ring_disp % FRAME_ALIGN != 0 {
            return Err(RdmaError::Setup(format!(
                "ring region at byte {ring_disp}: must be 16-aligned"
            )));
        }
        let win = epoch.window();
        if credit_disp + CREDIT_BYTES > win.len() {
            return Err(crate::win::out_of_range(
                "credit slot",
                credit_disp,
                CREDIT_BYTES,
                win.len(),
            ));
        }
        let head_word = own_word(epoch, "credit slot", credit_disp)?;
        let seg = segment_bytes(cap);
        Ok(RmaConsumer {
            live,
            source,
            ring_disp,
            head_word,
            buf: Buffer::new(seg),
            cap,
            seg,
            epoch,
            head: 0,
            fetched: 0,
            tail: 0,
            closed: false,
            released: 0,
            seq: 0,
            tail_buf: Box::new(0),
            tail_req: None,
            data_req: None,
            empty_polls: 0,
            rest_until: None,
        })
    }

    /// The NUMA node of the local read buffer's first page (kernel's
    /// answer), if known.
    pub fn numa_node(&self) -> Option<usize> {
        air_shm::numa::node_of(self.buf.at(0))
    }

    fn corrupt(&self, offset: usize, reason: String) -> RdmaError {
        RdmaError::Corrupt {
            rank: self.source,
            offset,
            reason,
        }
    }

    /// Hands the next frame to `read` (kind, payload in place) without
    /// blocking. `Ok(true)`: a frame was read; `Ok(false)`: nothing now.
    ///
    /// # Errors
    /// [`RdmaError::Closed`] once the sender dropped its end and every frame
    /// is read; [`RdmaError::Corrupt`] for bytes that break the protocol;
    /// [`RdmaError::RankLost`] when a rank of the job is gone.
    pub fn try_recv(&mut self, read: &mut dyn FnMut(FrameKind, &[u8])) -> Result<bool> {
        self.try_recv_from(&mut |kind, _, payload| read(kind, payload))
    }

    /// Bytes the sender published into this ring (as last read) and this
    /// end has not read yet: a gauge for metrics that may lag.
    pub fn queued_bytes(&self) -> u64 {
        self.tail.saturating_sub(self.head)
    }

    /// Data area size in bytes.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// [`RmaConsumer::try_recv`] that also hands `read` the sending worker's
    /// index within its rank (from the frame header; see
    /// [`RmaProducer::try_send_from`]).
    ///
    /// # Errors
    /// As [`RmaConsumer::try_recv`].
    pub fn try_recv_from(&mut self, read: &mut dyn FnMut(FrameKind, u16, &[u8])) -> Result<bool> {
        // At most: one completed data get, one completed tail get, then the
        // data get it allows.
        for _ in 0..4 {
            if self.head < self.fetched {
                if let Some(r) = self.read_frame(read)? {
                    return Ok(r);
                }
                continue;
            }
            // The buffer is drained: fetch what is published, or ask for
            // the tail.
            if let Some((req, to)) = self.data_req.as_mut() {
                let to = *to;
                if !req.test()? {
                    return self.empty();
                }
                self.data_req = None;
                self.fetched = to;
                continue;
            }
            if self.tail > self.fetched {
                self.start_data_get()?;
                continue;
            }
            if self.closed {
                return Err(RdmaError::Closed);
            }
            let now = std::time::Instant::now();
            if self.rest_until.is_some_and(|t| now < t) {
                // Polled a moment ago: no MPI call now (credit still goes
                // back at once).
                self.release()?;
                return Ok(false);
            }
            if !self.poll_tail()? || self.tail == self.fetched {
                self.rest_until = Some(now + EMPTY_POLL_GAP);
                return self.empty();
            }
            self.rest_until = None;
        }
        Ok(false)
    }

    /// Reads the frame at `head` from the buffer. `Some(true)`: a frame was
    /// handed to `read`; `None`: a padding frame was skipped.
    fn read_frame(&mut self, read: &mut dyn FnMut(FrameKind, u16, &[u8])) -> Result<Option<bool>> {
        self.empty_polls = 0;
        let off = (self.head % self.cap as u64) as usize;
        let in_seg = off % self.seg;
        let avail = (self.fetched - self.head) as usize;
        if let Err(e) = check_published(avail) {
            return Err(self.corrupt(off, e.to_string()));
        }
        let mut h = [0u8; FRAME_HEADER];
        // SAFETY: in_seg + 16 <= seg (in_seg is 16-aligned, seg a multiple
        // of 16); the bytes are in head..fetched, copied by a completed get
        // and not written again before the next get, which starts only
        // once head reached fetched.
        unsafe { std::ptr::copy_nonoverlapping(self.buf.at(in_seg), h.as_mut_ptr(), FRAME_HEADER) };
        // Frames never cross a segment's end: check within the segment.
        let (kind, len, size) = match check_frame(&h, in_seg, self.seg, avail, self.seq) {
            Ok(FrameCheck::Padding { skip }) if skip <= avail => {
                self.head += skip as u64;
                return Ok(None);
            }
            Ok(FrameCheck::Padding { skip }) => {
                return Err(self.corrupt(
                    off,
                    format!("padding of {skip} bytes with {avail} published"),
                ))
            }
            Ok(FrameCheck::Frame { kind, len, size }) => (kind, len, size),
            Err(e) => return Err(self.corrupt(off, e.to_string())),
        };
        // SAFETY: in_seg + size <= seg and size <= avail (check_frame), so
        // the payload is in the buffer, in head..fetched (see above).
        let payload =
            unsafe { std::slice::from_raw_parts(self.buf.at(in_seg + FRAME_HEADER), len) };
        read(kind, u16::from_le_bytes([h[6], h[7]]), payload);
        self.seq += 1;
        self.head += size as u64;
        Ok(Some(true))
    }

    /// Starts the get of the published bytes `fetched..` up to the end of
    /// their segment into the buffer (at their offset in the segment), and
    /// tests it once.
    fn start_data_get(&mut self) -> Result<()> {
        let seg = self.seg as u64;
        let to = self.tail.min((self.fetched / seg + 1) * seg);
        let in_seg = (self.fetched % seg) as usize;
        let len = (to - self.fetched) as usize;
        let disp = self.ring_disp + RING_CTRL_BYTES + (self.fetched % self.cap as u64) as usize;
        // SAFETY: in_seg + len <= seg, the buffer's size; the range is not
        // read until the request completed (frames are read only below
        // `fetched`, which moves when it does); a request pending at drop
        // leaks the buffer (Drop).
        let mut req = unsafe {
            self.epoch
                .rget(self.buf.at(in_seg), len, self.source, disp)?
        };
        if req.test()? {
            self.fetched = to;
        } else {
            self.data_req = Some((req, to));
        }
        Ok(())
    }

    /// Advances the tail get: issues one if none is pending, tests it.
    /// `Ok(true)` when one completed (`tail` and `closed` are then current
    /// and checked).
    fn poll_tail(&mut self) -> Result<bool> {
        if self.tail_req.is_none() {
            // SAFETY: `tail_buf` is a heap word owned by this end, untouched
            // until the request completes; leaked if pending at drop.
            let req = unsafe {
                self.epoch.rget(
                    (&mut *self.tail_buf as *mut u64).cast(),
                    8,
                    self.source,
                    self.ring_disp + TAIL_AT,
                )?
            };
            self.tail_req = Some(req);
        }
        let done = match self.tail_req.as_mut() {
            Some(r) => r.test()?,
            None => false,
        };
        if !done {
            return Ok(false);
        }
        self.tail_req = None;
        let word = *self.tail_buf;
        let tail = word & !CLOSED_BIT;
        if tail < self.tail
            || tail - self.head > self.cap as u64
            || tail % FRAME_ALIGN as u64 != 0
            || (self.closed && tail != self.tail)
        {
            return Err(self.corrupt(
                (self.head % self.cap as u64) as usize,
                format!("tail word {word} with head {}", self.head),
            ));
        }
        self.tail = tail;
        self.closed = word & CLOSED_BIT != 0;
        Ok(true)
    }

    /// An empty poll: returns credit for what was read, checks liveness now
    /// and then. (The tests of pending gets drive MPI's progress.)
    fn empty(&mut self) -> Result<bool> {
        self.empty_polls = self.empty_polls.wrapping_add(1);
        if self.released != self.head {
            self.send_credit();
        }
        if self.empty_polls % PROGRESS_EVERY == 0 {
            self.live.check()?;
        }
        Ok(false)
    }

    /// Returns credit for frames read so far: a release store of the head
    /// into this rank's credit word, which the sender reads when its ring
    /// looks full. Makes no MPI call.
    ///
    /// # Errors
    /// None today (kept for the transports that need a call).
    pub fn release(&mut self) -> Result<()> {
        if self.released != self.head {
            self.send_credit();
        }
        Ok(())
    }

    fn send_credit(&mut self) {
        self.head_word.store(self.head, Ordering::Release);
        self.released = self.head;
    }
}

impl Drop for RmaConsumer<'_> {
    fn drop(&mut self) {
        let mut leak = false;
        if let Some(mut req) = self.tail_req.take() {
            if !settle(&mut req) {
                std::mem::forget(std::mem::replace(&mut self.tail_buf, Box::new(0)));
            }
        }
        if let Some((mut req, _)) = self.data_req.take() {
            leak = !settle(&mut req);
        }
        if leak {
            // MPI may still write the buffer: never free it.
            std::mem::forget(std::mem::replace(&mut self.buf, Buffer::new(0)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn splitmix(x: &mut u64) -> u64 {
        *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    #[test]
    fn a_writer_with_all_credit_fits_any_frame_of_half_the_ring_after_at_most_a_padding() {
        let cap = 4096;
        let area = Buffer::new(cap);
        let mut w = FrameWriter::new(cap);
        let mut rng = 0u64;
        for i in 0..50_000u64 {
            let len = (splitmix(&mut rng) as usize) % (cap / 2 + 1);
            splitmix(&mut rng);
            w.head = w.tail; // the receiver read everything
            let before = w.tail;
            let write = |w: &mut FrameWriter| {
                // SAFETY: `area` is this writer's area of `cap` bytes.
                unsafe {
                    w.try_write(area.at(0), 0, FrameKind::Data, len, &mut |_| Some(len))
                        .unwrap()
                }
            };
            let mut ok = write(&mut w);
            if !ok {
                // Only a padding frame fitted; the receiver reads it.
                assert_eq!(w.tail % 4096, 0, "frame {i} of {len} bytes at {before}");
                w.head = w.tail;
                ok = write(&mut w);
            }
            assert!(ok, "frame {i} of {len} bytes at tail {before}");
        }
    }
}
