//! The remote frame ring: the network tier's channel. Same frame format and
//! flow control as air-shm's ring (16-byte headers: length, kind, sequence;
//! 16-byte aligned frames that never wrap, a padding frame fills the end),
//! but the two ends are on different ranks:
//!
//! - the ring's data area and its `tail` word live in the **receiver's**
//!   window part; the sender writes frames into a local mirror of the ring,
//!   `MPI_Put`s the new bytes at publish, flushes, then puts the new `tail`
//!   and flushes again (MPI orders nothing between two puts, so the data must
//!   be complete at the target before the tail that announces it);
//! - the `head` (credit) word lives in the **sender's** window part; the
//!   receiver puts its head there when it has freed a quarter of the ring, or
//!   when it finds the ring empty, so a blocked sender always gets credit.
//!
//! The receiver reads frames in place in its window memory after
//! `MPI_Win_sync`, and checks every header against the ring (length, kind,
//! sequence): bytes from the network are never trusted.
//!
//! Region of one ring in the receiver's part (`ring_region_bytes(cap)`):
//!
//! | bytes | field | writer |
//! |---|---|---|
//! | 0..8 | `tail`: bytes ever published, u64 | sender (put) |
//! | 64..72 | `closed`: 1 once the sender dropped its end, u64 | sender (put) |
//! | 128..128+cap | data area | sender (put) |
//!
//! Credit word in the sender's part (`CREDIT_BYTES`): bytes 0..8 `head`,
//! bytes ever released by the receiver (u64, written by the receiver's put).

use crate::error::{RdmaError, Result};
use crate::liveness::Liveness;
use crate::win::Epoch;
use air_shm::frame::{check_frame, check_published, segment_bytes, FrameCheck};
use air_shm::{frame_size, FrameKind, FRAME_ALIGN, FRAME_HEADER, KIND_PADDING};
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes before the data area of a ring region (the tail and closed words,
/// each on its own cache line).
pub const RING_CTRL_BYTES: usize = 128;
/// Bytes of one credit slot in the sender's part (a cache line each, so
/// credits of different rings do not share a line).
pub const CREDIT_BYTES: usize = 64;
pub(crate) const TAIL_AT: usize = 0;
pub(crate) const CLOSED_AT: usize = 64;
/// Empty polls between two calls into MPI's progress engine.
const PROGRESS_EVERY: u32 = 8;

/// Bytes a ring with a data area of `cap` bytes takes in the receiver's part.
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

/// The pieces of the byte range `from..to` (at most one segment of `seg`
/// bytes) of a ring of `cap` bytes, as (mirror offset, remote data offset,
/// length): one, or two when it crosses a segment's end (the second may be
/// empty).
pub(crate) fn pieces(cap: usize, seg: usize, from: u64, to: u64) -> [(usize, usize, usize); 2] {
    debug_assert!(to - from <= seg as u64);
    let seg = seg as u64;
    let cut = (from / seg + 1) * seg;
    let piece = |a: u64, b: u64| {
        (
            (a % seg) as usize,
            (a % cap as u64) as usize,
            b.saturating_sub(a) as usize,
        )
    };
    [piece(from, to.min(cut)), piece(cut.min(to), to)]
}

/// A 16-byte aligned byte buffer, the sender's mirror of one segment of a
/// ring. It is only accessed through raw pointers to disjoint byte ranges:
/// workers write frames at the staging end while the thread that puts them
/// reads the range before it (the ring's counters keep the ranges apart).
pub(crate) struct Mirror {
    ptr: *mut u128,
    words: usize,
}

// SAFETY: the buffer is owned; who touches which bytes when is governed by
// the ring's counters (see `FrameWriter` and `RmaOutbox`), not by Rust
// references, and every access goes through the raw pointer.
unsafe impl Send for Mirror {}
// SAFETY: as above; shared access reads only bytes no writer touches.
unsafe impl Sync for Mirror {}

impl Mirror {
    pub(crate) fn new(len: usize) -> Mirror {
        let words = len.div_ceil(16);
        let b: Box<[u128]> = vec![0u128; words].into_boxed_slice();
        Mirror {
            ptr: Box::into_raw(b).cast(),
            words,
        }
    }

    /// `len` bytes at `off`, for reading.
    ///
    /// # Safety
    /// `off + len` is within the buffer, and no one writes those bytes while
    /// the slice lives.
    pub(crate) unsafe fn bytes(&self, off: usize, len: usize) -> &[u8] {
        // SAFETY: in bounds and not written meanwhile (the caller's
        // promise); u8 has no alignment or validity requirement.
        unsafe { std::slice::from_raw_parts(self.ptr.cast::<u8>().add(off), len) }
    }

    /// `len` bytes at `off`, for writing.
    ///
    /// # Safety
    /// `off + len` is within the buffer, and no one else reads or writes
    /// those bytes while the slice lives.
    #[allow(clippy::mut_from_ref)]
    unsafe fn bytes_mut(&self, off: usize, len: usize) -> &mut [u8] {
        // SAFETY: in bounds and exclusive (the caller's promise).
        unsafe { std::slice::from_raw_parts_mut(self.ptr.cast::<u8>().add(off), len) }
    }
}

impl Drop for Mirror {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from Box::into_raw of a boxed slice of `words`
        // u128 and is freed once, here.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.ptr, self.words)) });
    }
}

/// Why a frame could not be written now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Blocked {
    /// The receiver has not released enough of the ring (credit).
    Credit,
    /// The mirror holds a segment of frames not yet put.
    Stage,
}

/// The sender's bookkeeping of one ring, free of MPI: frames are written
/// into the mirror at `tail`; what is put and what the receiver released
/// come from outside (the put position and the credit word).
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
        let seg = segment_bytes(cap);
        FrameWriter {
            cap,
            seg,
            tail: 0,
            head: 0,
            seq: 0,
        }
    }

    pub(crate) fn max_payload(&self) -> usize {
        self.seg - FRAME_HEADER
    }

    pub(crate) fn tail(&self) -> u64 {
        self.tail
    }

    /// Writes one frame into `mirror` (see [`RmaProducer::try_send_from`])
    /// if the ring has room behind the receiver's credit (`credit`,
    /// reloaded when the cached one says no) and the mirror has room behind
    /// `put` (bytes already put to the receiver, whose mirror bytes may be
    /// reused). `mirror` is this writer's, of [`FrameWriter::mirror_bytes`].
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn try_write(
        &mut self,
        mirror: &Mirror,
        from: u16,
        kind: FrameKind,
        max_len: usize,
        write: &mut dyn FnMut(&mut [u8]) -> Option<usize>,
        credit: &AtomicU64,
        put: u64,
    ) -> Result<std::result::Result<(), Blocked>> {
        let need = frame_size(max_len);
        if need > self.seg {
            return Err(RdmaError::FrameTooLarge {
                len: max_len,
                max: self.max_payload(),
            });
        }
        let off = (self.tail % self.seg as u64) as usize;
        let to_end = self.seg - off;
        if need > to_end {
            // The frame would cross a segment's end: pad to it first. The
            // padding needs room of its own; the frame then needs room at
            // the next segment's start.
            if let Err(b) = self.room(to_end, credit, put) {
                return Ok(Err(b));
            }
            // SAFETY: off + 16 <= seg; the bytes lie behind `tail`, which no
            // one reads before it is advanced and committed (the room check
            // kept them clear of the range not yet put).
            let h = unsafe { mirror.bytes_mut(off, FRAME_HEADER) };
            h.copy_from_slice(&header((to_end - FRAME_HEADER) as u32, KIND_PADDING, 0, 0));
            self.tail += to_end as u64;
        }
        if let Err(b) = self.room(need, credit, put) {
            return Ok(Err(b));
        }
        let off = (self.tail % self.seg as u64) as usize;
        // SAFETY: off + need <= seg (a frame never crosses a segment's end);
        // the range is behind `tail`, exclusively this writer's until
        // `tail` moves past it and it is published.
        let frame = unsafe { mirror.bytes_mut(off, FRAME_HEADER + max_len) };
        if let Some(n) = write(&mut frame[FRAME_HEADER..]) {
            let n = n.min(max_len);
            frame[..FRAME_HEADER].copy_from_slice(&header(n as u32, kind as u8, from, self.seq));
            self.seq += 1;
            self.tail += frame_size(n) as u64;
        }
        Ok(Ok(()))
    }

    fn room(
        &mut self,
        bytes: usize,
        credit: &AtomicU64,
        put: u64,
    ) -> std::result::Result<(), Blocked> {
        let end = self.tail + bytes as u64;
        if end - put > self.seg as u64 {
            return Err(Blocked::Stage);
        }
        if end - self.head > self.cap as u64 {
            self.head = credit.load(Ordering::Acquire);
            if end - self.head > self.cap as u64 {
                return Err(Blocked::Credit);
            }
        }
        Ok(())
    }

    /// [`pieces`] of this writer's ring.
    pub(crate) fn pieces(&self, from: u64, to: u64) -> [(usize, usize, usize); 2] {
        pieces(self.cap, self.seg, from, to)
    }
}

/// The sending end of a remote ring (on the sender's rank).
pub struct RmaProducer<'e> {
    epoch: &'e Epoch<'e, 'e>,
    live: &'e Liveness,
    target: usize,
    ring_disp: usize,
    w: FrameWriter,
    mirror: Mirror,
    published: u64,
    credit: &'e AtomicU64,
    word: Box<[u64; 1]>,
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
            .field("credit_word", &self.credit.load(Ordering::Acquire))
            .finish()
    }
}

// SAFETY: the epoch is usable from any thread (MPI_THREAD_MULTIPLE); the
// mirror is owned; the credit word is an atomic in window memory.
unsafe impl Send for RmaProducer<'_> {}

/// The credit word at byte `disp` of this rank's part of `epoch`'s window.
pub(crate) fn credit_word<'e>(epoch: &'e Epoch<'e, 'e>, disp: usize) -> Result<&'e AtomicU64> {
    let win = epoch.window();
    if disp + CREDIT_BYTES > win.len() || disp % 8 != 0 {
        return Err(crate::win::out_of_range(
            "credit slot",
            disp,
            CREDIT_BYTES,
            win.len(),
        ));
    }
    // SAFETY: the slot is inside this rank's part (checked), 8-aligned
    // (window memory is page-aligned, disp % 8 == 0), and only ever
    // accessed as an AtomicU64 locally (remote puts of whole words land
    // there; x86-64 and aarch64 make aligned 8-byte stores atomic).
    Ok(unsafe { &*(win.base().add(disp) as *const AtomicU64) })
}

impl<'e> RmaProducer<'e> {
    /// The sender of a ring whose region starts at byte `ring_disp` of rank
    /// `target`'s part, with a data area of `cap` bytes; its credit word is
    /// at byte `credit_disp` of this rank's own part. Both ends must agree on
    /// every number (the runtime computes them from one layout). It makes
    /// its MPI calls itself, on the thread that calls it; the runtime's
    /// workers share rings through an [`crate::RmaOutbox`] instead.
    ///
    /// # Errors
    /// [`RdmaError::Setup`] for a bad capacity or a credit slot outside this
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
        let credit = credit_word(epoch, credit_disp)?;
        Ok(RmaProducer {
            epoch,
            live,
            target,
            ring_disp,
            mirror: Mirror::new(segment_bytes(cap)),
            w: FrameWriter::new(cap),
            published: 0,
            credit,
            word: Box::new([0]),
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
    /// bytes of the local mirror and returns how many it used (`None`
    /// abandons the frame). Returns `Ok(false)` when the ring has no room
    /// (after publishing what is pending and checking the peer's liveness).
    /// The frame reaches the receiver at the next [`RmaProducer::flush`]
    /// (or earlier, when a segment of frames is waiting).
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
    pub fn try_send_from(
        &mut self,
        from: u16,
        kind: FrameKind,
        max_len: usize,
        write: &mut dyn FnMut(&mut [u8]) -> Option<usize>,
    ) -> Result<bool> {
        for _ in 0..2 {
            match self.w.try_write(
                &self.mirror,
                from,
                kind,
                max_len,
                write,
                self.credit,
                self.published,
            )? {
                Ok(()) => {
                    self.full_polls = 0;
                    return Ok(true);
                }
                Err(Blocked::Stage) => self.flush()?,
                Err(Blocked::Credit) => {
                    self.epoch.sync()?;
                    self.full_polls += 1;
                    if self.full_polls % PROGRESS_EVERY == 0 {
                        self.epoch.window().progress();
                        self.live.check()?;
                    }
                }
            }
        }
        Ok(false)
    }

    /// Publishes every frame written so far: puts the new bytes, flushes,
    /// puts the new tail, flushes. Returns at once if nothing is new.
    pub fn flush(&mut self) -> Result<()> {
        let tail = self.w.tail();
        if self.published == tail {
            return Ok(());
        }
        let data = self.ring_disp + RING_CTRL_BYTES;
        let [a, b] = self.w.pieces(self.published, tail);
        // SAFETY: written and not yet put; this thread is the only writer
        // and does not write while putting.
        let first = unsafe { self.mirror.bytes(a.0, a.2) };
        let p = self.epoch.put(first, self.target, data + a.1)?;
        if b.2 > 0 {
            // SAFETY: as above.
            let second = unsafe { self.mirror.bytes(b.0, b.2) };
            p.and(self.epoch.put(second, self.target, data + b.1)?)
                .flush()?;
        } else {
            p.flush()?;
        }
        self.word[0] = tail;
        let w: &[u8] = u64_bytes(&self.word[..]);
        self.epoch
            .put(w, self.target, self.ring_disp + TAIL_AT)?
            .flush()?;
        self.published = tail;
        Ok(())
    }
}

impl RmaProducer<'_> {
    /// Publishes what is pending and tells the receiver this end is gone
    /// (it reports [`RdmaError::Closed`] once it has read everything
    /// published). Idempotent; dropping the producer does it too.
    ///
    /// # Errors
    /// As [`RmaProducer::flush`].
    pub fn close(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        self.flush()?;
        self.word[0] = 1;
        self.epoch
            .put(
                u64_bytes(&self.word[..]),
                self.target,
                self.ring_disp + CLOSED_AT,
            )?
            .flush()
    }
}

impl Drop for RmaProducer<'_> {
    fn drop(&mut self) {
        // Errors are moot while dropping.
        let _ = self.close();
    }
}

pub(crate) fn u64_bytes(w: &[u64]) -> &[u8] {
    // SAFETY: u64 has no padding; any initialized u64 is valid as bytes.
    unsafe { std::slice::from_raw_parts(w.as_ptr().cast(), std::mem::size_of_val(w)) }
}

/// The receiving end of a remote ring (on the receiver's rank).
pub struct RmaConsumer<'e> {
    live: &'e Liveness,
    source: usize,
    tail_word: &'e AtomicU64,
    closed_word: &'e AtomicU64,
    data: *const u8,
    cap: usize,
    seg: usize,
    epoch: &'e Epoch<'e, 'e>,
    credit_disp: usize,
    word: Box<[u64; 1]>,
    head: u64,
    tail: u64,
    released: u64,
    seq: u64,
    empty_polls: u32,
}

impl std::fmt::Debug for RmaConsumer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RmaConsumer")
            .field("source", &self.source)
            .field("cap", &self.cap)
            .field("head", &self.head)
            .field("tail", &self.tail)
            .field("released", &self.released)
            .field("tail_word", &self.tail_word.load(Ordering::Acquire))
            .finish()
    }
}

// SAFETY: the epoch is usable from any thread (MPI_THREAD_MULTIPLE); the
// ring region is read only by this end (the sender writes it remotely).
unsafe impl Send for RmaConsumer<'_> {}

impl<'e> RmaConsumer<'e> {
    /// The receiver of a ring whose region starts at byte `ring_disp` of this
    /// rank's part, data area `cap` bytes, fed by rank `source`, whose credit
    /// word is at byte `credit_disp` of `source`'s part.
    ///
    /// # Errors
    /// [`RdmaError::Setup`] for a bad capacity or a region outside this
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
        // SAFETY: the region is inside this rank's part (checked) and
        // 16-aligned; its words are only accessed as atomics here, and the
        // data area only read; the sender writes them through MPI.
        let (tail_word, closed_word, data) = unsafe {
            let base = win.base().add(ring_disp);
            (
                &*(base.add(TAIL_AT) as *const AtomicU64),
                &*(base.add(CLOSED_AT) as *const AtomicU64),
                base.add(RING_CTRL_BYTES) as *const u8,
            )
        };
        // The window was zeroed by the thread that allocated it: move this
        // ring's whole pages to the consumer's NUMA node (no-op on one node).
        air_shm::numa::bring_here(data, cap);
        Ok(RmaConsumer {
            live,
            source,
            tail_word,
            closed_word,
            data,
            cap,
            seg: segment_bytes(cap),
            epoch,
            credit_disp,
            word: Box::new([0]),
            head: 0,
            tail: 0,
            released: 0,
            seq: 0,
            empty_polls: 0,
        })
    }

    /// The NUMA node of the data area's first page (kernel's answer), if known.
    pub fn numa_node(&self) -> Option<usize> {
        air_shm::numa::node_of(self.data)
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

    /// Bytes the sender published into this ring and this end has not read
    /// yet: the tail word as last put (a Relaxed load without
    /// `MPI_Win_sync`, so a gauge for metrics that may lag) less the read
    /// position.
    pub fn queued_bytes(&self) -> u64 {
        self.tail_word
            .load(Ordering::Relaxed)
            .max(self.tail)
            .saturating_sub(self.head)
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
        loop {
            if self.head == self.tail {
                // An empty poll makes no MPI call (but every
                // PROGRESS_EVERY-th); a new tail is followed by one
                // MPI_Win_sync before the frame bytes are read.
                let mut tail = self.tail_word.load(Ordering::Acquire);
                if tail != self.head {
                    self.epoch.sync()?;
                    tail = self.tail_word.load(Ordering::Acquire);
                }
                if tail == self.head {
                    return self.empty();
                }
                if tail < self.head
                    || tail - self.head > self.cap as u64
                    || tail % FRAME_ALIGN as u64 != 0
                {
                    return Err(self.corrupt(
                        (self.head % self.cap as u64) as usize,
                        format!("tail {tail} with head {}", self.head),
                    ));
                }
                self.tail = tail;
            }
            self.empty_polls = 0;
            let off = (self.head % self.cap as u64) as usize;
            let avail = (self.tail - self.head) as usize;
            if let Err(e) = check_published(avail) {
                return Err(self.corrupt(off, e.to_string()));
            }
            let mut h = [0u8; FRAME_HEADER];
            // SAFETY: off + 16 <= cap (off is 16-aligned, cap a multiple of
            // 16); the bytes were published (off lies in head..tail).
            unsafe {
                std::ptr::copy_nonoverlapping(self.data.add(off), h.as_mut_ptr(), FRAME_HEADER)
            };
            // Frames never cross a segment's end: check within the segment.
            let in_seg = off % self.seg;
            let (kind, len, size) = match check_frame(&h, in_seg, self.seg, avail, self.seq) {
                Ok(FrameCheck::Padding { skip }) => {
                    self.head += skip as u64;
                    continue;
                }
                Ok(FrameCheck::Frame { kind, len, size }) => (kind, len, size),
                Err(e) => return Err(self.corrupt(off, e.to_string())),
            };
            // SAFETY: in_seg + size <= seg (check_frame) and the segment
            // lies within the area, and size <= avail, so the payload is in
            // the area and published; the sender does not write it again
            // before we release it.
            let payload =
                unsafe { std::slice::from_raw_parts(self.data.add(off + FRAME_HEADER), len) };
            read(kind, u16::from_le_bytes([h[6], h[7]]), payload);
            self.seq += 1;
            self.head += size as u64;
            return Ok(true);
        }
    }

    /// An empty poll: returns credit for what was read, drives MPI now and
    /// then, checks liveness and the closed word.
    fn empty(&mut self) -> Result<bool> {
        self.empty_polls = self.empty_polls.wrapping_add(1);
        if self.released != self.head {
            self.send_credit()?;
        }
        if self.empty_polls % PROGRESS_EVERY == 0 {
            // MPICH completes puts into this rank only while it calls
            // into MPI (MACHINE-NOTES: passive target).
            self.epoch.sync()?;
            self.epoch.window().progress();
            self.live.check()?;
        }
        if self.closed_word.load(Ordering::Acquire) != 0
            && self.tail_word.load(Ordering::Acquire) == self.head
        {
            return Err(RdmaError::Closed);
        }
        Ok(false)
    }

    /// Returns credit for frames read so far when a quarter of the ring or
    /// more is waiting to be released (the rest goes back when the ring is
    /// found empty).
    pub fn release(&mut self) -> Result<()> {
        if self.head - self.released >= (self.cap / 4) as u64 {
            self.send_credit()?;
        }
        Ok(())
    }

    fn send_credit(&mut self) -> Result<()> {
        self.word[0] = self.head;
        self.epoch
            .put(u64_bytes(&self.word[..]), self.source, self.credit_disp)?
            .flush()?;
        self.released = self.head;
        Ok(())
    }
}
