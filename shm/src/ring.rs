//! `FrameRing`: a single-producer single-consumer ring of variable-length frames.
//!
//! # Layout
//!
//! A ring is one [`RingHeader`] (five 128-byte lines) followed by the data area
//! of `capacity` bytes. The data area holds frames back to back; every frame
//! starts on a [`FRAME_ALIGN`]-byte boundary with a 16-byte [`FrameHeader`]
//! (`len: u32`, `kind: u8`, 3 reserved bytes, `seq: u64`) followed by `len`
//! payload bytes, padded up to the next 16-byte boundary. A frame never wraps:
//! when it does not fit before the end of the data area, the producer fills the
//! rest with one padding frame and places the frame at offset 0. Payloads are
//! therefore contiguous and 16-byte aligned, so an rkyv archive (alignment ≤ 16)
//! can be written and read in place.
//!
//! # Positions and flow control
//!
//! `head` and `tail` are byte positions that only grow (u64; at 100 GB/s they
//! wrap after 5 years). The producer owns `tail`, the consumer owns `head`;
//! `tail - head` bytes are in use. Each side caches the other's position and
//! re-reads the shared atomic only when its cache says full (producer) or
//! empty (consumer). Publishing is a single `Release` store of the position;
//! the other side's `Acquire` load makes every byte written before it visible.
//! Because the producer can publish several committed frames with one store
//! ([`FrameMut::commit_deferred`] + [`Producer::publish`]) and the consumer can
//! return credit for several frames with one store ([`Frame::release_deferred`]
//! + [`Consumer::release_pending`]), batching is the normal fast path.
//!
//! # The largest frame
//!
//! A payload may be up to [`Producer::max_payload`] = `capacity - 16` bytes
//! (and at most 4 GiB - 16): when a frame needs the whole ring, the producer
//! publishes its padding, waits for the consumer to drain the ring, and then
//! places the frame at offset 0. Larger requests fail with
//! [`ShmError::FrameTooLarge`].
//!
//! # Closing
//!
//! Each side has a closed word: 0 open, 1 closed in order (`close` or drop),
//! 2 aborted (dropped while its thread was panicking). A process that dies
//! without closing (SIGKILL) is detected through its pid (`kill(pid, 0)`)
//! while the other side waits. A consumer reads every committed frame before
//! it reports the end.

use crate::doorbell::Bell;
use crate::error::{Result, ShmError};
use crate::futex;
use crate::region::Region;
#[cfg(not(loom))]
use crate::region::SegmentName;
use crate::sync::{fence, spin_hint, yield_now, AtomicU32, AtomicU64, Ordering};
use crate::wait::{Backoff, Step, WaitPolicy};
use crossbeam_utils::CachePadded;
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::Duration;

/// Alignment of every frame (and of every payload) in the data area, in bytes.
pub const FRAME_ALIGN: usize = 16;
/// Size of a frame header, in bytes.
pub const FRAME_HEADER: usize = 16;
/// Smallest data area, in bytes.
pub const MIN_CAPACITY: usize = 64;

const MAGIC: u64 = u64::from_le_bytes(*b"AIRRING1");
const VERSION: u32 = 1;
/// Kind byte of a padding frame (fills the end of the data area so frames
/// never wrap); never handed to a consumer.
pub const KIND_PADDING: u8 = 0xAB;
const OPEN: u32 = 0;
const CLOSED: u32 = 1;
const ABORTED: u32 = 2;
/// Spin iterations between two liveness checks of the peer while spinning.
const LIVENESS_EVERY: u64 = 1 << 16;

/// What a frame carries. The ring itself treats all kinds alike; the runtime
/// gives them meaning (batches of records, watermarks, end-of-stream,
/// checkpoint barriers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FrameKind {
    /// A batch of records.
    Data = 1,
    /// A watermark (an event-time bound) for the channel.
    Watermark = 2,
    /// End of stream: the producer will send nothing after it.
    End = 3,
    /// A checkpoint barrier: everything the producer sent before it belongs
    /// to the checkpoint whose id (a little-endian `u64`) it carries.
    Barrier = 4,
    /// A piece of an operator's keyed state on its way to the worker that
    /// owns its key groups now (runtime/src/dataflow/moves.rs gives the
    /// payload its meaning).
    State = 5,
}

impl FrameKind {
    /// The kind whose byte in a frame header is `v` (`None` for padding or
    /// an unknown byte).
    pub fn from_u8(v: u8) -> Option<FrameKind> {
        match v {
            1 => Some(FrameKind::Data),
            2 => Some(FrameKind::Watermark),
            3 => Some(FrameKind::End),
            4 => Some(FrameKind::Barrier),
            5 => Some(FrameKind::State),
            _ => None,
        }
    }
}

/// Header of one frame in the data area (16 bytes, 16-aligned).
///
/// Written by the producer with plain stores before it publishes `tail`
/// (`Release`); read by the consumer with plain loads after it loads `tail`
/// (`Acquire`). Never written while the consumer may read it.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug)]
struct FrameHeader {
    /// Payload length in bytes (for padding: bytes to the end of the area minus 16).
    len: u32,
    /// [`FrameKind`] as u8, or `KIND_PADDING`.
    kind: u8,
    /// Zero.
    reserved: [u8; 3],
    /// Sequence number: 0 for the first frame, +1 per frame; padding carries 0.
    seq: u64,
}

/// Fields written once by the creator before the ring is shared.
#[repr(C)]
struct Meta {
    /// `MAGIC` once every other field is written. Writer: creator (`Release`,
    /// last). Reader: opener (`Acquire`, first).
    magic: AtomicU64,
    /// Data area size in bytes (a multiple of 16). Writer: creator before
    /// `magic`. Reader: opener after `magic` (`Relaxed`, ordered by it).
    capacity: AtomicU64,
    /// Layout version (`VERSION`). Same rules as `capacity`.
    version: AtomicU32,
    /// 1 once an endpoint claimed the producer side. `swap(AcqRel)` by the claimer.
    producer_claimed: AtomicU32,
    /// 1 once an endpoint claimed the consumer side. `swap(AcqRel)` by the claimer.
    consumer_claimed: AtomicU32,
}

/// Per-side state, in its own line: written by its side, read by the other.
#[repr(C)]
struct SideState {
    /// `OPEN`, `CLOSED` or `ABORTED`. Writer: this side (`Release`) when it
    /// closes. Reader: the other side (`Acquire`) when it finds the ring empty/full.
    closed: AtomicU32,
    /// 1 while this side is parked (or about to park) on `wake`. Writer: this
    /// side (`SeqCst` store, then a `SeqCst` fence, then it re-checks the ring).
    /// Reader: the other side after publishing (`SeqCst` fence, then `Relaxed`
    /// load). The two fences make a lost wake-up impossible.
    sleeping: AtomicU32,
    /// Futex word this side parks on; the other side increments it
    /// (`Release`) and wakes the futex.
    wake: AtomicU32,
    /// 1 if this side's wait policy may park (so the other side must check
    /// `sleeping` after each publish). Writer: this side when it is claimed or
    /// changes policy (`Relaxed`). Reader: the other side (`Relaxed`).
    may_park: AtomicU32,
    /// Process id holding this side, 0 before it is claimed. Writer: this side
    /// at claim (`Release`). Reader: the other side for liveness checks (`Acquire`).
    pid: AtomicU32,
}

impl SideState {
    fn new() -> SideState {
        SideState {
            closed: AtomicU32::new(OPEN),
            sleeping: AtomicU32::new(0),
            wake: AtomicU32::new(0),
            may_park: AtomicU32::new(0),
            pid: AtomicU32::new(0),
        }
    }
}

/// The ring's control block, at the start of the ring's memory. `#[repr(C)]`,
/// five lines of 128 bytes each (`CachePadded`), so the producer's and the
/// consumer's hot words never share a cache line (nor an adjacent-line
/// prefetch pair).
#[repr(C)]
pub struct RingHeader {
    /// Set once by the creator; read-only afterwards.
    meta: CachePadded<Meta>,
    /// Bytes ever published by the producer. Writer: producer (`Release`).
    /// Reader: consumer (`Acquire`), only when its cached copy says empty.
    tail: CachePadded<AtomicU64>,
    /// Bytes ever released by the consumer. Writer: consumer (`Release`).
    /// Reader: producer (`Acquire`), only when its cached copy says full.
    head: CachePadded<AtomicU64>,
    /// The producer's state.
    producer: CachePadded<SideState>,
    /// The consumer's state.
    consumer: CachePadded<SideState>,
}

/// Bytes the header occupies before the data area (a multiple of 128).
pub const HEADER_BYTES: usize = (std::mem::size_of::<RingHeader>() + 127) & !127;

impl RingHeader {
    fn new() -> RingHeader {
        RingHeader {
            meta: CachePadded::new(Meta {
                magic: AtomicU64::new(0),
                capacity: AtomicU64::new(0),
                version: AtomicU32::new(0),
                producer_claimed: AtomicU32::new(0),
                consumer_claimed: AtomicU32::new(0),
            }),
            tail: CachePadded::new(AtomicU64::new(0)),
            head: CachePadded::new(AtomicU64::new(0)),
            producer: CachePadded::new(SideState::new()),
            consumer: CachePadded::new(SideState::new()),
        }
    }
}

#[cfg_attr(loom, allow(dead_code))]
enum Backing {
    Region(#[allow(dead_code)] Region),
    /// Loom builds: header and data on the heap, plus one loom cell per
    /// 16-byte granule of the data area, through which every byte the ring
    /// protocol hands over is tracked, so loom reports a read that is not
    /// ordered after its write (a missing Release/Acquire) as a data race.
    #[cfg(loom)]
    Heap(
        #[allow(dead_code)] Box<RingHeader>,
        #[allow(dead_code)] Box<[u128]>,
        Box<[loom::cell::UnsafeCell<()>]>,
    ),
}

/// The memory of one ring, shared by its endpoints.
struct Shared {
    header: NonNull<RingHeader>,
    data: NonNull<u8>,
    capacity: usize,
    backing: Backing,
}

// SAFETY: the header is only accessed through atomics, and the data area
// through the SPSC protocol (each byte is written only by the producer while
// it owns it, and read only by the consumer after an Acquire of `tail`).
unsafe impl Send for Shared {}
// SAFETY: as above.
unsafe impl Sync for Shared {}

impl Shared {
    /// Loom only: records a write of data bytes `[offset, offset + len)`.
    #[inline(always)]
    fn track_write(&self, offset: usize, len: usize) {
        #[cfg(loom)]
        if let Backing::Heap(_, _, cells) = &self.backing {
            for g in offset / 16..(offset + len).div_ceil(16) {
                cells[g].with_mut(|_| ());
            }
        }
        #[cfg(not(loom))]
        let _ = (offset, len);
    }

    /// Loom only: records a read of data bytes `[offset, offset + len)`.
    #[inline(always)]
    fn track_read(&self, offset: usize, len: usize) {
        #[cfg(loom)]
        if let Backing::Heap(_, _, cells) = &self.backing {
            for g in offset / 16..(offset + len).div_ceil(16) {
                cells[g].with(|_| ());
            }
        }
        #[cfg(not(loom))]
        let _ = (offset, len);
    }

    #[inline(always)]
    fn header(&self) -> &RingHeader {
        // SAFETY: `header` points into `backing`, which lives as long as self,
        // and was initialized (written or validated) before `Shared` was built.
        unsafe { self.header.as_ref() }
    }
}

/// Rounds `n` up to a multiple of [`FRAME_ALIGN`].
#[inline(always)]
pub const fn align_up(n: usize) -> usize {
    (n + FRAME_ALIGN - 1) & !(FRAME_ALIGN - 1)
}

/// Bytes a frame with a payload of `len` bytes occupies in the data area.
#[inline(always)]
pub const fn frame_size(len: usize) -> usize {
    FRAME_HEADER + align_up(len)
}

fn check_capacity(capacity: usize) -> Result<usize> {
    if capacity > (isize::MAX as usize) / 2 {
        return Err(ShmError::BadCapacity {
            capacity,
            reason: "larger than half the address space",
        });
    }
    let cap = align_up(capacity);
    if capacity < MIN_CAPACITY {
        return Err(ShmError::BadCapacity {
            capacity,
            reason: "smaller than 64 bytes",
        });
    }
    if cap > (isize::MAX as usize) / 2 {
        return Err(ShmError::BadCapacity {
            capacity,
            reason: "larger than half the address space",
        });
    }
    Ok(cap)
}

#[inline(always)]
fn max_payload_for(cap: usize) -> usize {
    (cap - FRAME_HEADER).min(u32::MAX as usize & !(FRAME_ALIGN - 1))
}

/// A frame ring's memory: build endpoints with [`FrameRing::producer`] and
/// [`FrameRing::consumer`] (each side can be claimed once).
#[derive(Clone)]
pub struct FrameRing {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for FrameRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameRing")
            .field("capacity", &self.shared.capacity)
            .finish()
    }
}

impl FrameRing {
    /// A ring of `capacity` bytes (rounded up to a multiple of 16, at least 64)
    /// in anonymous memory, for two threads of this process; returns both
    /// endpoints with the default [`WaitPolicy`]. The calling thread touches
    /// every page first (see [`FrameRing::anonymous`]).
    #[allow(clippy::new_ret_no_self)] // like rtrb's RingBuffer::new: one call, two ends
    pub fn new(capacity: usize) -> Result<(Producer, Consumer)> {
        Self::with_policy(capacity, WaitPolicy::default(), WaitPolicy::default())
    }

    /// As [`FrameRing::new`], with a wait policy for each side.
    pub fn with_policy(
        capacity: usize,
        producer: WaitPolicy,
        consumer: WaitPolicy,
    ) -> Result<(Producer, Consumer)> {
        let ring = Self::anonymous(capacity)?;
        Ok((ring.producer(producer)?, ring.consumer(consumer)?))
    }

    /// A ring in anonymous memory, sides unclaimed. Every page is touched by the
    /// calling thread, so under the default NUMA policy the memory lands on the
    /// caller's node: create a ring on its consumer's thread.
    #[cfg(not(loom))]
    pub fn anonymous(capacity: usize) -> Result<FrameRing> {
        let cap = check_capacity(capacity)?;
        let region = Region::anonymous(HEADER_BYTES + cap)?;
        // SAFETY: the region is fresh, private and at least HEADER_BYTES + cap long.
        Ok(unsafe { Self::init(Backing::Region(region), cap) })
    }

    /// A ring on the heap (loom builds: loom atomics cannot live in raw memory).
    #[cfg(loom)]
    pub fn anonymous(capacity: usize) -> Result<FrameRing> {
        let cap = check_capacity(capacity)?;
        let header = Box::new(RingHeader::new());
        let data: Box<[u128]> = vec![0u128; cap / 16].into_boxed_slice();
        let h = NonNull::from(&*header);
        let d = NonNull::new(data.as_ptr() as *mut u8).expect("non-null");
        header.meta.capacity.store(cap as u64, Ordering::Relaxed);
        header.meta.version.store(VERSION, Ordering::Relaxed);
        header.meta.magic.store(MAGIC, Ordering::Release);
        Ok(FrameRing {
            shared: Arc::new(Shared {
                header: h,
                data: d,
                capacity: cap,
                backing: Backing::Heap(
                    header,
                    data,
                    (0..cap / 16)
                        .map(|_| loom::cell::UnsafeCell::new(()))
                        .collect(),
                ),
            }),
        })
    }

    /// Writes a fresh header into `backing` and touches every data page.
    ///
    /// # Safety
    /// `backing` must be a region of at least `HEADER_BYTES + cap` bytes that no
    /// one else accesses yet.
    #[cfg(not(loom))]
    unsafe fn init(backing: Backing, cap: usize) -> FrameRing {
        let Backing::Region(region) = &backing;
        let base = region.as_ptr();
        let header = base as *mut RingHeader;
        // SAFETY: base is page-aligned (≥ align of RingHeader) and the region
        // holds HEADER_BYTES ≥ size_of::<RingHeader>() bytes no one else sees yet.
        unsafe { header.write(RingHeader::new()) };
        // SAFETY: HEADER_BYTES + cap ≤ region length (caller's contract).
        let data = unsafe { base.add(HEADER_BYTES) };
        let page = 4096;
        let mut off = 0;
        while off < cap {
            // SAFETY: off < cap, inside the data area; volatile so the first
            // touch really happens on this thread.
            unsafe { data.add(off).write_volatile(0) };
            off += page;
        }
        // SAFETY: header was just initialized above.
        let h = unsafe { &*header };
        h.meta.capacity.store(cap as u64, Ordering::Relaxed);
        h.meta.version.store(VERSION, Ordering::Relaxed);
        h.meta.magic.store(MAGIC, Ordering::Release);
        FrameRing {
            shared: Arc::new(Shared {
                header: NonNull::new(header).expect("mapped memory is non-null"),
                data: NonNull::new(data).expect("mapped memory is non-null"),
                capacity: cap,
                backing,
            }),
        }
    }

    /// Creates a ring of `capacity` bytes in the new named segment `name`
    /// (see [`Region::create_segment`]: `O_EXCL`, mode 0600, space checked).
    /// The calling thread touches every page first, so create the ring on the
    /// consumer's side. The name stays until the other end opens it.
    #[cfg(not(loom))]
    pub fn create_segment(name: &SegmentName, capacity: usize) -> Result<FrameRing> {
        let cap = check_capacity(capacity)?;
        let region = Region::create_segment(name, HEADER_BYTES + cap)?;
        // SAFETY: the segment was just created exclusively and sized to
        // HEADER_BYTES + cap; the opener waits for MAGIC before touching it.
        Ok(unsafe { Self::init(Backing::Region(region), cap) })
    }

    /// Opens the ring the other end created in segment `name`, waiting up to
    /// `timeout` for it to appear and be initialized, validates it (owner, mode,
    /// magic, version, size), unlinks its name and closes its file
    /// descriptor: from then on a crash of either process leaves nothing in
    /// `/dev/shm`, and this end holds only the mapping.
    #[cfg(not(loom))]
    pub fn open_segment(name: &SegmentName, timeout: Duration) -> Result<FrameRing> {
        let start = std::time::Instant::now();
        let mut region = Region::open_segment(name, timeout)?;
        let path = region.path().map(|p| p.to_owned()).unwrap_or_default();
        if region.len() < HEADER_BYTES + MIN_CAPACITY {
            return Err(ShmError::SegmentRejected {
                path,
                reason: format!("{} bytes is too small for a ring", region.len()),
            });
        }
        let header = region.as_ptr() as *const RingHeader;
        // SAFETY: the region is at least HEADER_BYTES long and page-aligned; a
        // header of all-zero atomics is a valid value, and the creator writes
        // it before it publishes MAGIC, which we wait for with Acquire.
        let h = unsafe { &*header };
        loop {
            let magic = h.meta.magic.load(Ordering::Acquire);
            if magic == MAGIC {
                break;
            }
            if magic != 0 {
                return Err(ShmError::SegmentRejected {
                    path,
                    reason: format!("bad magic {magic:#x}: not an AIR ring"),
                });
            }
            if start.elapsed() >= timeout {
                return Err(ShmError::SegmentTimeout {
                    path,
                    waited_ms: start.elapsed().as_millis() as u64,
                });
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        let version = h.meta.version.load(Ordering::Relaxed);
        let cap = h.meta.capacity.load(Ordering::Relaxed) as usize;
        if version != VERSION {
            return Err(ShmError::SegmentRejected {
                path,
                reason: format!("ring layout version {version}, expected {VERSION}"),
            });
        }
        if cap < MIN_CAPACITY || cap % FRAME_ALIGN != 0 || HEADER_BYTES + cap > region.len() {
            return Err(ShmError::SegmentRejected {
                path,
                reason: format!(
                    "capacity {cap} does not fit a segment of {} bytes",
                    region.len()
                ),
            });
        }
        // The name is gone from here on: the descriptor is not needed either
        // (one per producer end adds up at scale: Region::unlink_and_close).
        region.unlink_and_close();
        // SAFETY: HEADER_BYTES + cap ≤ region length, checked above.
        let data = unsafe { region.as_ptr().add(HEADER_BYTES) };
        Ok(FrameRing {
            shared: Arc::new(Shared {
                header: NonNull::new(header as *mut RingHeader).expect("non-null"),
                data: NonNull::new(data).expect("non-null"),
                capacity: cap,
                backing: Backing::Region(region),
            }),
        })
    }

    /// Data area size in bytes.
    pub fn capacity(&self) -> usize {
        self.shared.capacity
    }

    /// Largest payload a frame may carry, in bytes: `capacity - 16`.
    pub fn max_payload(&self) -> usize {
        max_payload_for(self.shared.capacity)
    }

    /// The segment's path, if the ring lives in a named segment.
    pub fn path(&self) -> Option<std::path::PathBuf> {
        match &self.shared.backing {
            Backing::Region(r) => r.path().map(|p| p.to_owned()),
            #[cfg(loom)]
            Backing::Heap(..) => None,
        }
    }

    /// Claims the producer side. Errors with [`ShmError::SideTaken`] if it
    /// was claimed before (by anyone, in any process).
    pub fn producer(&self, policy: WaitPolicy) -> Result<Producer> {
        let h = self.shared.header();
        if h.meta.producer_claimed.swap(1, Ordering::AcqRel) != 0 {
            return Err(ShmError::SideTaken("producer"));
        }
        h.producer.pid.store(own_pid(), Ordering::Release);
        h.producer
            .may_park
            .store(policy.park.is_some() as u32, Ordering::Relaxed);
        let tail = h.tail.load(Ordering::Acquire);
        let head = h.head.load(Ordering::Acquire);
        Ok(Producer {
            shared: self.shared.clone(),
            data: self.shared.data.as_ptr(),
            cap: self.shared.capacity,
            tail,
            published: tail,
            offset: (tail % self.shared.capacity as u64) as usize,
            cached_head: head,
            seq: 0,
            pending: 0,
            policy,
            full_waits: 0,
            doorbell: None,
            closed: false,
        })
    }

    /// Claims the consumer side. Errors with [`ShmError::SideTaken`] if it
    /// was claimed before.
    pub fn consumer(&self, policy: WaitPolicy) -> Result<Consumer> {
        let h = self.shared.header();
        if h.meta.consumer_claimed.swap(1, Ordering::AcqRel) != 0 {
            return Err(ShmError::SideTaken("consumer"));
        }
        h.consumer.pid.store(own_pid(), Ordering::Release);
        h.consumer
            .may_park
            .store(policy.park.is_some() as u32, Ordering::Relaxed);
        let head = h.head.load(Ordering::Acquire);
        Ok(Consumer {
            shared: self.shared.clone(),
            data: self.shared.data.as_ptr(),
            cap: self.shared.capacity,
            head,
            published: head,
            offset: (head % self.shared.capacity as u64) as usize,
            cached_tail: head,
            seq: 0,
            policy,
            empty_waits: 0,
            closed: false,
        })
    }
}

/// This process's id, read once (`getpid` is a system call in current glibc).
/// A ring endpoint does not survive `fork` anyway: the child's copy of the
/// claimed side would be a second producer or consumer.
fn own_pid() -> u32 {
    static PID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    match PID.load(std::sync::atomic::Ordering::Relaxed) {
        0 => {
            let p = std::process::id();
            PID.store(p, std::sync::atomic::Ordering::Relaxed);
            p
        }
        p => p,
    }
}

/// Whether the process `pid` is still there (pid 0: not attached yet, alive).
fn pid_alive(pid: u32) -> bool {
    #[cfg(not(loom))]
    {
        if pid == 0 || pid == own_pid() {
            return true;
        }
        // SAFETY: signal 0 performs only the existence and permission check.
        let rc = unsafe { libc::kill(pid as libc::pid_t, 0) };
        rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
    }
    #[cfg(loom)]
    {
        let _ = pid;
        true
    }
}

/// Whether this CPU has `prefetchw` (checked once; every x86-64 AMD CPU and
/// Intel since Broadwell).
#[cfg(all(target_arch = "x86_64", not(loom)))]
#[inline(always)]
fn prefetchw_supported() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| {
        // CPUID leaf 0x8000_0001, ECX bit 8: 3DNowPrefetch (PREFETCHW).
        #[allow(unused_unsafe)]
        // SAFETY: CPUID is available on every x86-64 CPU; the extended leaf
        // is checked against the highest supported extended leaf first.
        let ecx = unsafe {
            if std::arch::x86_64::__cpuid(0x8000_0000).eax < 0x8000_0001 {
                return false;
            }
            std::arch::x86_64::__cpuid(0x8000_0001).ecx
        };
        ecx & (1 << 8) != 0
    })
}

/// The other side's state as seen by a waiting endpoint.
fn peer_status(peer: &SideState, who: &'static str) -> Result<()> {
    match peer.closed.load(Ordering::Acquire) {
        OPEN => {
            if pid_alive(peer.pid.load(Ordering::Acquire)) {
                Ok(())
            } else if peer.closed.load(Ordering::Acquire) != OPEN {
                Err(ShmError::Closed)
            } else {
                Err(ShmError::PeerGone(if who == "producer" {
                    "producer process exited without closing the ring"
                } else {
                    "consumer process exited without closing the ring"
                }))
            }
        }
        ABORTED => Err(ShmError::PeerGone(if who == "producer" {
            "producer aborted (its thread panicked)"
        } else {
            "consumer aborted (its thread panicked)"
        })),
        _ => Err(ShmError::Closed),
    }
}

/// Increments `peer.wake` and wakes its futex if the peer is, or may be, parked.
/// Then rings `bell` (the consuming worker's doorbell), if any, behind the
/// same `SeqCst` fence: one more load when the worker is awake.
#[inline(always)]
fn notify(peer: &SideState, bell: Option<&Bell>) {
    let may_park = peer.may_park.load(Ordering::Relaxed) != 0;
    if may_park || bell.is_some() {
        fence(Ordering::SeqCst);
        if may_park && peer.sleeping.load(Ordering::Relaxed) != 0 {
            peer.wake.fetch_add(1, Ordering::Release);
            futex::wake(&peer.wake);
        }
        if let Some(b) = bell {
            b.ring_fenced();
        }
    }
}

/// Parks the calling side on `me.wake` unless `ready()` holds, for at most `d`.
fn park(me: &SideState, d: Duration, ready: impl Fn() -> bool) {
    let w = me.wake.load(Ordering::Acquire);
    me.sleeping.store(1, Ordering::SeqCst);
    fence(Ordering::SeqCst);
    if !ready() {
        futex::wait(&me.wake, w, d);
    }
    me.sleeping.store(0, Ordering::Relaxed);
}

fn close_side(me: &SideState, peer: &SideState) {
    let state = if std::thread::panicking() {
        ABORTED
    } else {
        CLOSED
    };
    me.closed.store(state, Ordering::Release);
    fence(Ordering::SeqCst);
    peer.wake.fetch_add(1, Ordering::Release);
    futex::wake(&peer.wake);
}

/// The writing end of a ring.
///
/// Write a frame with [`Producer::reserve`] (blocks while full) or
/// [`Producer::try_reserve`], fill [`FrameMut::payload_mut`] in place, then
/// [`FrameMut::commit`] (publish now) or [`FrameMut::commit_deferred`] (publish
/// with the next [`Producer::publish`]). Dropping the producer publishes what
/// is pending and closes its side.
pub struct Producer {
    shared: Arc<Shared>,
    data: *mut u8,
    cap: usize,
    /// Local tail: bytes committed (published or pending).
    tail: u64,
    /// The tail last stored to the header.
    published: u64,
    /// `tail % cap`, kept incrementally.
    offset: usize,
    cached_head: u64,
    seq: u64,
    pending: u32,
    policy: WaitPolicy,
    full_waits: u64,
    /// The consuming worker's doorbell, rung after every publish and at close.
    doorbell: Option<Bell>,
    closed: bool,
}

// SAFETY: the producer owns its side of the protocol; moving it to another
// thread moves that ownership (the raw pointer points into `shared`).
unsafe impl Send for Producer {}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("capacity", &self.cap)
            .field("tail", &self.tail)
            .field("seq", &self.seq)
            .finish()
    }
}

impl Producer {
    /// Data area size in bytes.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Largest payload a frame may carry, in bytes (`capacity - 16`).
    #[inline(always)]
    pub fn max_payload(&self) -> usize {
        max_payload_for(self.cap)
    }

    /// Number of blocking reserves that found the ring full and had to wait
    /// (the "ring-full waits" metric).
    pub fn full_waits(&self) -> u64 {
        self.full_waits
    }

    /// Frames committed so far (the next frame's sequence number).
    pub fn frames(&self) -> u64 {
        self.seq
    }

    /// Frames committed but not yet published.
    pub fn pending(&self) -> u32 {
        self.pending
    }

    /// Rings `bell` (the consuming worker's [`crate::Doorbell`]) after every
    /// publish that finds it parked, and always when this side closes or
    /// aborts (drop during a panic): a worker parked on its doorbell
    /// learns of new frames and of the end without polling.
    pub fn set_doorbell(&mut self, bell: Bell) {
        self.doorbell = Some(bell);
    }

    /// Changes how this side waits.
    pub fn set_policy(&mut self, policy: WaitPolicy) {
        self.policy = policy;
        self.shared
            .header()
            .producer
            .may_park
            .store(policy.park.is_some() as u32, Ordering::Relaxed);
    }

    /// Whether the consumer has closed its side (or vanished).
    pub fn is_peer_closed(&self) -> bool {
        peer_status(&self.shared.header().consumer, "consumer").is_err()
    }

    #[inline(always)]
    fn has_room(&mut self, n: usize) -> bool {
        let cap = self.cap as u64;
        if cap - (self.tail - self.cached_head) >= n as u64 {
            return true;
        }
        self.cached_head = self.shared.header().head.load(Ordering::Acquire);
        cap - (self.tail - self.cached_head) >= n as u64
    }

    /// Finds room for a frame of `size` bytes; returns its offset.
    #[inline(always)]
    fn place(&mut self, size: usize) -> Result<usize> {
        if self.offset + size > self.cap {
            let pad = self.cap - self.offset;
            if !self.has_room(pad) {
                return Err(ShmError::Full);
            }
            // SAFETY: offset is 16-aligned and offset + 16 ≤ cap (pad ≥ 16
            // because both are multiples of 16 and offset < cap); the consumer
            // has released these `pad` bytes (has_room), so we own them.
            unsafe {
                (self.data.add(self.offset) as *mut FrameHeader).write(FrameHeader {
                    len: (pad - FRAME_HEADER) as u32,
                    kind: KIND_PADDING,
                    reserved: [0; 3],
                    seq: 0,
                })
            };
            self.shared.track_write(self.offset, FRAME_HEADER);
            self.tail += pad as u64;
            self.offset = 0;
        }
        if !self.has_room(size) {
            return Err(ShmError::Full);
        }
        self.prefetch_ahead();
        Ok(self.offset)
    }

    /// Asks for the cache lines a little ahead of the write position in
    /// exclusive state (`prefetchw`), so the ownership transfers from the
    /// consumer's cache overlap instead of stalling each frame's stores.
    #[inline(always)]
    fn prefetch_ahead(&self) {
        #[cfg(all(target_arch = "x86_64", not(loom)))]
        {
            const AHEAD: usize = 512;
            let at = self.offset + AHEAD;
            if at + 64 <= self.cap && prefetchw_supported() {
                // SAFETY: `at + 64 <= cap`, so both addresses are inside the
                // data area; prefetchw only hints the cache (it cannot fault
                // or change memory), and the CPU supports it (checked).
                unsafe {
                    let p = self.data.add(at);
                    std::arch::asm!("prefetchw [{0}]", "prefetchw [{0} + 64]", in(reg) p, options(nostack, readonly, preserves_flags));
                }
            }
        }
    }

    /// Reserves a frame of `len` payload bytes without blocking.
    ///
    /// Errors: [`ShmError::Full`] (no room now; a padding frame may have been
    /// staged), [`ShmError::FrameTooLarge`], [`ShmError::Closed`] /
    /// [`ShmError::PeerGone`] when the consumer is gone.
    #[inline]
    pub fn try_reserve(&mut self, len: usize) -> Result<FrameMut<'_>> {
        let max = self.max_payload();
        if len > max {
            return Err(ShmError::FrameTooLarge { len, max });
        }
        match self.place(frame_size(len)) {
            Ok(offset) => Ok(FrameMut {
                offset,
                len,
                kind: FrameKind::Data,
                producer: self,
            }),
            Err(ShmError::Full) => {
                peer_status(&self.shared.header().consumer, "consumer")?;
                Err(ShmError::Full)
            }
            Err(e) => Err(e),
        }
    }

    /// Reserves a frame of `len` payload bytes, blocking (per the wait policy)
    /// while the ring is full. Pending frames are published before it waits.
    ///
    /// Errors: [`ShmError::FrameTooLarge`], or [`ShmError::Closed`] /
    /// [`ShmError::PeerGone`] when the consumer is gone.
    #[inline]
    pub fn reserve(&mut self, len: usize) -> Result<FrameMut<'_>> {
        let max = self.max_payload();
        if len > max {
            return Err(ShmError::FrameTooLarge { len, max });
        }
        let size = frame_size(len);
        let offset = match self.place(size) {
            Ok(o) => o,
            Err(_) => self.wait_for_room(size)?,
        };
        Ok(FrameMut {
            offset,
            len,
            kind: FrameKind::Data,
            producer: self,
        })
    }

    #[cold]
    fn wait_for_room(&mut self, size: usize) -> Result<usize> {
        self.full_waits += 1;
        self.publish();
        let shared = self.shared.clone();
        let h = shared.header();
        let mut backoff = Backoff::new();
        loop {
            if let Ok(o) = self.place(size) {
                return Ok(o);
            }
            // Padding may have been staged by place(): make it visible.
            self.publish();
            if h.consumer.closed.load(Ordering::Acquire) != OPEN {
                peer_status(&h.consumer, "consumer")?;
            }
            match backoff.next(&self.policy) {
                Step::Spin => {
                    spin_hint();
                    if backoff.steps() % LIVENESS_EVERY == 0 {
                        peer_status(&h.consumer, "consumer")?;
                    }
                }
                Step::Yield => {
                    yield_now();
                    peer_status(&h.consumer, "consumer")?;
                }
                Step::Park(d) => {
                    // Any credit returned since place() looked may make room.
                    let seen = self.cached_head;
                    park(&h.producer, d, || {
                        h.head.load(Ordering::SeqCst) != seen
                            || h.consumer.closed.load(Ordering::SeqCst) != OPEN
                    });
                    peer_status(&h.consumer, "consumer")?;
                }
            }
        }
    }

    /// Makes every committed frame visible to the consumer (one `Release`
    /// store), and wakes the consumer if it is parked.
    #[inline]
    pub fn publish(&mut self) {
        if self.tail != self.published {
            let h = self.shared.header();
            h.tail.store(self.tail, Ordering::Release);
            self.published = self.tail;
            self.pending = 0;
            notify(&h.consumer, self.doorbell.as_ref());
        }
    }

    /// [`Producer::publish`] without ringing the consumer's doorbell: for
    /// frames that need not wake a parked worker (a watermark that its
    /// next timer will read soon enough). A consumer parked on the ring
    /// itself ([`WaitPolicy`]) is still woken.
    #[inline]
    pub fn publish_quiet(&mut self) {
        if self.tail != self.published {
            let h = self.shared.header();
            h.tail.store(self.tail, Ordering::Release);
            self.published = self.tail;
            self.pending = 0;
            notify(&h.consumer, None);
        }
    }

    /// Reserves, copies `payload` in, and commits-and-publishes a frame of `kind`.
    pub fn write(&mut self, kind: FrameKind, payload: &[u8]) -> Result<()> {
        let mut f = self.reserve(payload.len())?;
        f.payload_mut().copy_from_slice(payload);
        f.set_kind(kind);
        f.commit();
        Ok(())
    }

    /// Publishes what is pending and closes this side in order.
    pub fn close(mut self) {
        self.close_inner();
    }

    fn close_inner(&mut self) {
        if !self.closed {
            self.closed = true;
            self.publish();
            let h = self.shared.header();
            close_side(&h.producer, &h.consumer);
            if let Some(b) = &self.doorbell {
                b.wake();
            }
        }
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        self.close_inner();
    }
}

/// A reserved frame: write the payload in place, then commit it. Dropping it
/// without committing abandons it (nothing becomes visible).
pub struct FrameMut<'a> {
    producer: &'a mut Producer,
    offset: usize,
    len: usize,
    kind: FrameKind,
}

impl FrameMut<'_> {
    /// The payload, `len` bytes, 16-byte aligned, holding stale bytes from
    /// earlier frames: write every byte you commit.
    #[inline(always)]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        // SAFETY: place() reserved frame_size(len) bytes at offset, inside the
        // data area and released by the consumer; the payload follows the
        // 16-byte header. The producer is borrowed mutably, so this is the
        // only reference into the frame.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.producer.data.add(self.offset + FRAME_HEADER),
                self.len,
            )
        }
    }

    /// Reserved payload length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the payload is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Shrinks the payload to `len` bytes (e.g. after serializing into a
    /// frame reserved at its largest size). Panics if `len` is larger.
    pub fn truncate(&mut self, len: usize) {
        assert!(
            len <= self.len,
            "truncate({len}) beyond reserved {}",
            self.len
        );
        self.len = len;
    }

    /// Sets the frame's kind (default [`FrameKind::Data`]).
    pub fn set_kind(&mut self, kind: FrameKind) {
        self.kind = kind;
    }

    /// Commits the frame and every pending one, and publishes them now.
    #[inline]
    pub fn commit(self) {
        let p = self.stage();
        p.publish();
    }

    /// Commits the frame; it becomes visible with the next [`Producer::publish`]
    /// (or the next blocking reserve that has to wait, or close/drop).
    #[inline]
    pub fn commit_deferred(self) {
        self.stage();
    }

    #[inline(always)]
    fn stage(self) -> &'static mut Producer
    where
        Self: Sized,
    {
        let FrameMut {
            producer,
            offset,
            len,
            kind,
        } = self;
        // SAFETY: offset is the 16-aligned start of the reserved frame, owned by
        // the producer until it publishes `tail` past it.
        unsafe {
            (producer.data.add(offset) as *mut FrameHeader).write(FrameHeader {
                len: len as u32,
                kind: kind as u8,
                reserved: [0; 3],
                seq: producer.seq,
            })
        };
        let size = frame_size(len);
        producer.shared.track_write(offset, FRAME_HEADER + len);
        producer.tail += size as u64;
        producer.offset += size;
        if producer.offset == producer.cap {
            producer.offset = 0;
        }
        producer.seq += 1;
        producer.pending += 1;
        // SAFETY: lifetime extension only to let `commit` call publish on the
        // same producer right after; the reference does not escape either caller.
        unsafe { &mut *(producer as *mut Producer) }
    }
}

/// The reading end of a ring.
///
/// Read with [`Consumer::peek`] (blocks while empty) or [`Consumer::try_peek`];
/// the returned [`Frame`] borrows its payload in place; release it with
/// [`Frame::release`] (returns credit now) or [`Frame::release_deferred`]
/// (returns credit with the next [`Consumer::release_pending`]).
pub struct Consumer {
    shared: Arc<Shared>,
    data: *mut u8,
    cap: usize,
    /// Local head: the next frame to read.
    head: u64,
    /// The head last stored to the header.
    published: u64,
    offset: usize,
    cached_tail: u64,
    seq: u64,
    policy: WaitPolicy,
    empty_waits: u64,
    closed: bool,
}

// SAFETY: the consumer owns its side of the protocol; see Producer.
unsafe impl Send for Consumer {}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer")
            .field("capacity", &self.cap)
            .field("head", &self.head)
            .field("seq", &self.seq)
            .finish()
    }
}

impl Consumer {
    /// Data area size in bytes.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Bytes published by the producer and not yet read by this consumer
    /// (frames and padding, headers included): `tail - head`, with `tail`
    /// loaded Relaxed, so a gauge for metrics, not a synchronisation point.
    pub fn queued_bytes(&self) -> u64 {
        self.shared
            .header()
            .tail
            .load(Ordering::Relaxed)
            .saturating_sub(self.head)
    }

    /// The NUMA node of the data area's first page, as the kernel reports it
    /// (see [`crate::numa::node_of`]); the ring's creator touched every page.
    pub fn numa_node(&self) -> Option<usize> {
        crate::numa::node_of(self.data)
    }

    /// Number of blocking peeks that found the ring empty and had to wait.
    pub fn empty_waits(&self) -> u64 {
        self.empty_waits
    }

    /// Frames released so far (the next frame's expected sequence number).
    pub fn frames(&self) -> u64 {
        self.seq
    }

    /// Changes how this side waits.
    pub fn set_policy(&mut self, policy: WaitPolicy) {
        self.policy = policy;
        self.shared
            .header()
            .consumer
            .may_park
            .store(policy.park.is_some() as u32, Ordering::Relaxed);
    }

    /// The frame at the read position, if one is published; skips padding.
    #[inline(always)]
    fn next_frame(&mut self) -> Result<Option<FrameInfo>> {
        loop {
            if self.head == self.cached_tail {
                self.cached_tail = self.shared.header().tail.load(Ordering::Acquire);
                if self.head == self.cached_tail {
                    return Ok(None);
                }
            }
            // SAFETY: head < cached_tail, so the producer published at least one
            // whole frame (or padding) starting at `offset`, 16-aligned and
            // inside the data area; the Acquire load of tail made its header
            // visible, and the producer will not touch it until we release it.
            let hdr = unsafe { (self.data.add(self.offset) as *const FrameHeader).read() };
            self.shared.track_read(self.offset, FRAME_HEADER);
            let avail = self.cached_tail - self.head;
            if hdr.kind == KIND_PADDING {
                let pad = self.cap - self.offset;
                if hdr.len as usize != pad - FRAME_HEADER || avail < pad as u64 {
                    return Err(self.corrupt("padding frame of the wrong length", &hdr));
                }
                self.head += pad as u64;
                self.offset = 0;
                continue;
            }
            let size = frame_size(hdr.len as usize);
            let Some(kind) = FrameKind::from_u8(hdr.kind) else {
                return Err(self.corrupt("unknown frame kind", &hdr));
            };
            if size as u64 > avail || self.offset + size > self.cap {
                return Err(self.corrupt("frame extends past the published tail", &hdr));
            }
            if hdr.seq != self.seq {
                return Err(self.corrupt("sequence number out of order", &hdr));
            }
            return Ok(Some(FrameInfo {
                len: hdr.len as usize,
                kind,
                seq: hdr.seq,
            }));
        }
    }

    #[cold]
    fn corrupt(&self, what: &str, hdr: &FrameHeader) -> ShmError {
        ShmError::Corrupt(format!(
            "{what} at position {} (offset {}): len {}, kind {:#x}, seq {}, expected seq {}",
            self.head, self.offset, hdr.len, hdr.kind, hdr.seq, self.seq
        ))
    }

    #[inline(always)]
    fn frame(&mut self, info: FrameInfo) -> Frame<'_> {
        let offset = self.offset;
        Frame {
            consumer: self,
            offset,
            len: info.len,
            kind: info.kind,
            seq: info.seq,
        }
    }

    /// The next frame without blocking.
    ///
    /// `Ok(None)`: nothing published right now (deferred releases are then
    /// published, as before a blocking wait). Errors: [`ShmError::Closed`]
    /// when the producer closed and every frame has been read;
    /// [`ShmError::PeerGone`] when it aborted (after every committed frame has
    /// been read); [`ShmError::Corrupt`].
    #[inline]
    pub fn try_peek(&mut self) -> Result<Option<Frame<'_>>> {
        match self.next_frame()? {
            Some(info) => Ok(Some(self.frame(info))),
            None => {
                let closed = self.shared.header().producer.closed.load(Ordering::Acquire);
                if closed != OPEN {
                    // Frames committed before the close are visible now.
                    if let Some(info) = self.next_frame()? {
                        return Ok(Some(self.frame(info)));
                    }
                    peer_status(&self.shared.header().producer, "producer")?;
                }
                // Nothing to read: return the credit of everything released
                // (or skipped as padding) so far, so a producer waiting for
                // room is never left waiting on a consumer that has gone idle.
                self.release_pending();
                Ok(None)
            }
        }
    }

    /// The next frame, blocking (per the wait policy) while the ring is empty.
    /// Deferred releases are published before it waits.
    ///
    /// `Ok(None)`: the producer closed in order and every frame has been read.
    /// Errors: [`ShmError::PeerGone`] when the producer aborted or its process
    /// died (after every committed frame has been read); [`ShmError::Corrupt`].
    #[inline]
    pub fn peek(&mut self) -> Result<Option<Frame<'_>>> {
        loop {
            if let Some(info) = self.next_frame()? {
                return Ok(Some(self.frame(info)));
            }
            // Published bytes may have been only padding: wait again then.
            match self.wait_for_frame() {
                Ok(()) => continue,
                Err(ShmError::Closed) => return Ok(None),
                Err(e) => return Err(e),
            }
        }
    }

    /// Waits until a frame is published (Ok) or the producer is gone (Err).
    #[cold]
    fn wait_for_frame(&mut self) -> Result<()> {
        self.empty_waits += 1;
        self.release_pending();
        let shared = self.shared.clone();
        let h = shared.header();
        let mut backoff = Backoff::new();
        // SAFETY: offset is inside the data area; this volatile read only
        // pulls the next frame's cache line in while we poll `tail` (its value
        // is ignored and may be stale).
        let next_line = unsafe { self.data.add(self.offset) } as *const u64;
        loop {
            let tail = h.tail.load(Ordering::Acquire);
            // SAFETY: see `next_line`.
            let _ = unsafe { next_line.read_volatile() };
            if tail != self.head {
                self.cached_tail = tail;
                return Ok(());
            }
            if h.producer.closed.load(Ordering::Acquire) != OPEN {
                let tail = h.tail.load(Ordering::Acquire);
                if tail != self.head {
                    self.cached_tail = tail;
                    return Ok(());
                }
                return peer_status(&h.producer, "producer").and(Err(ShmError::Closed));
            }
            match backoff.next(&self.policy) {
                Step::Spin => {
                    spin_hint();
                    if backoff.steps() % LIVENESS_EVERY == 0 {
                        self.check_producer_alive()?;
                    }
                }
                Step::Yield => {
                    yield_now();
                    self.check_producer_alive()?;
                }
                Step::Park(d) => {
                    let head = self.head;
                    park(&h.consumer, d, || {
                        h.tail.load(Ordering::SeqCst) != head
                            || h.producer.closed.load(Ordering::SeqCst) != OPEN
                    });
                    self.check_producer_alive()?;
                }
            }
        }
    }

    fn check_producer_alive(&mut self) -> Result<()> {
        let h = self.shared.header();
        match peer_status(&h.producer, "producer") {
            Ok(()) => Ok(()),
            Err(e) => {
                // Frames published before it died are still ours to read.
                let tail = h.tail.load(Ordering::Acquire);
                if tail != self.head {
                    self.cached_tail = tail;
                    Ok(())
                } else {
                    Err(e)
                }
            }
        }
    }

    /// Returns the credit of every deferred release to the producer (one
    /// `Release` store) and wakes it if it is parked.
    #[inline]
    pub fn release_pending(&mut self) {
        if self.head != self.published {
            let h = self.shared.header();
            h.head.store(self.head, Ordering::Release);
            self.published = self.head;
            notify(&h.producer, None);
        }
    }

    /// Closes this side: the producer's next wait fails with `Closed`.
    pub fn close(mut self) {
        self.close_inner();
    }

    fn close_inner(&mut self) {
        if !self.closed {
            self.closed = true;
            self.release_pending();
            let h = self.shared.header();
            close_side(&h.consumer, &h.producer);
        }
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        self.close_inner();
    }
}

#[derive(Clone, Copy)]
struct FrameInfo {
    len: usize,
    kind: FrameKind,
    seq: u64,
}

/// A frame read in place. Its payload stays valid until it is released.
pub struct Frame<'a> {
    consumer: &'a mut Consumer,
    offset: usize,
    len: usize,
    kind: FrameKind,
    seq: u64,
}

impl Frame<'_> {
    /// The frame's kind.
    #[inline(always)]
    pub fn kind(&self) -> FrameKind {
        self.kind
    }

    /// The frame's sequence number (0 for the first frame of the ring).
    #[inline(always)]
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Payload length in bytes.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the payload is empty.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The payload, in place in the ring, 16-byte aligned.
    #[inline(always)]
    pub fn payload(&self) -> &[u8] {
        self.consumer
            .shared
            .track_read(self.offset + FRAME_HEADER, self.len);
        // SAFETY: next_frame() validated that the frame lies inside the data
        // area and below the published tail; the producer does not write it
        // until we release it, which needs `self` by value.
        unsafe {
            std::slice::from_raw_parts(self.consumer.data.add(self.offset + FRAME_HEADER), self.len)
        }
    }

    #[inline(always)]
    fn advance(self) -> &'static mut Consumer {
        let c = self.consumer;
        let size = frame_size(self.len);
        c.head += size as u64;
        c.offset += size;
        if c.offset == c.cap {
            c.offset = 0;
        }
        c.seq += 1;
        // SAFETY: lifetime extension only so `release` can publish through the
        // same consumer right after; the reference does not escape.
        unsafe { &mut *(c as *mut Consumer) }
    }

    /// Releases this frame (and every deferred one) and returns the credit now.
    #[inline]
    pub fn release(self) {
        self.advance().release_pending();
    }

    /// Releases this frame; its credit returns with the next
    /// [`Consumer::release_pending`] (or the next wait, or close/drop).
    #[inline]
    pub fn release_deferred(self) {
        self.advance();
    }
}
