//! Doorbells: how a worker with nothing to do sleeps until a producer
//! publishes into one of its input rings (or its own timer fires).
//!
//! Each consuming worker owns one [`Doorbell`], a 128-byte `#[repr(C)]`
//! block (two cache lines, so no neighbour's doorbell shares an
//! adjacent-line prefetch pair with it). Every ring into that worker knows
//! it ([`crate::Producer::set_doorbell`]). The doorbells of one process's
//! workers live together in a [`Doorbells`] block: in process memory for the
//! thread tier, or in one small `/dev/shm` segment per process
//! ([`Doorbells::create_segment`], [`Doorbells::open_segment`]) so producers
//! in the other processes of the node can ring them (a shared futex keys on
//! the physical page).
//!
//! # Protocol (no lost wake-up)
//!
//! Consumer, after a loop that found nothing: [`Bell::prepare`] reads
//! `seq` (the ticket), stores `sleeping = 1` (`SeqCst`), fences (`SeqCst`);
//! then it polls every input ring once more; if that found nothing it
//! [`Bell::park`]s: `futex_wait(seq, ticket, timeout)`, then `sleeping = 0`.
//! If the re-poll found something it calls [`Bell::cancel`] instead.
//!
//! Producer, after publishing a ring's tail (`Release`): a `SeqCst` fence,
//! then one `Relaxed` load of `sleeping`; only if it is set, `seq += 1`
//! (`Release`) and `futex_wake`. Of the two fences one is ordered first: if
//! the producer's, the consumer's re-poll sees the published tail; if the
//! consumer's, the producer sees `sleeping = 1`, bumps `seq`, and the
//! consumer's `futex_wait` (which compares `seq` with the ticket
//! atomically in the kernel) returns at once or is woken. Either way the
//! frame is read without waiting for the timeout. A producer that finds the
//! consumer awake pays the fence and one load per publish.
//!
//! Every park is bounded by a timeout (the worker's next flush tick), so a
//! producer that dies without ringing (SIGKILL) costs at most that.

use crate::error::Result;
use crate::futex;
#[cfg(not(loom))]
use crate::region::{Region, SegmentName};
use crate::sync::{fence, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// One consuming worker's doorbell (128 bytes, `#[repr(C)]`, 128-aligned).
/// Its two words are written by different sides; both are touched rarely
/// (a park, a wake-up), and only read on the producer's hot path.
#[repr(C, align(128))]
pub struct Doorbell {
    /// Futex word: the wake-up sequence. Writer: any producer that found
    /// `sleeping` set (`fetch_add(1, Release)`, then `futex_wake`). Reader:
    /// the consumer when it prepares to park (`Acquire`; the value is its
    /// ticket), and the kernel in `futex_wait`. Wraps around freely.
    seq: AtomicU32,
    /// 1 while the consumer is parked or about to park, else 0. Writer: the
    /// consumer (`SeqCst` store of 1 followed by a `SeqCst` fence before its
    /// last poll; `Relaxed` store of 0 after waking). Reader: producers after
    /// every publish (`SeqCst` fence, then `Relaxed` load).
    sleeping: AtomicU32,
    /// Wake-ups rung (`seq` increments by producers), kept for reports.
    /// Writer: producers (`Relaxed` add), only when they wake.
    rung: AtomicU32,
    /// Version tag of this layout (`DOORBELL_MAGIC`), written by the creator
    /// of a segment before anyone opens it; checked by openers.
    magic: AtomicU32,
}

/// Tag in [`Doorbell`]'s `magic` word of an initialized doorbell.
const DOORBELL_MAGIC: u32 = u32::from_le_bytes(*b"BEL1");

/// Bytes of one [`Doorbell`].
pub const DOORBELL_BYTES: usize = 128;

#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<Doorbell>() == DOORBELL_BYTES);

impl Doorbell {
    fn new() -> Doorbell {
        Doorbell {
            seq: AtomicU32::new(0),
            sleeping: AtomicU32::new(0),
            rung: AtomicU32::new(0),
            magic: AtomicU32::new(DOORBELL_MAGIC),
        }
    }

    /// Producer side, after a `SeqCst` fence that follows the publish:
    /// wakes the consumer if it is parked or about to park.
    #[inline(always)]
    pub(crate) fn ring_fenced(&self) {
        if self.sleeping.load(Ordering::Relaxed) != 0 {
            self.wake();
        }
    }

    /// Wakes the consumer unconditionally (a close, an abort).
    #[cold]
    pub(crate) fn wake(&self) {
        self.seq.fetch_add(1, Ordering::Release);
        self.rung.fetch_add(1, Ordering::Relaxed);
        futex::wake(&self.seq);
    }
}

enum Backing {
    /// Process memory (the thread tier, loom).
    Heap(#[allow(dead_code)] Box<[Doorbell]>),
    /// A `/dev/shm` segment (the node tier).
    #[cfg(not(loom))]
    Segment(#[allow(dead_code)] Region),
}

struct Block {
    bells: *const Doorbell,
    len: usize,
    backing: Backing,
}

// SAFETY: `bells` points into `backing`, which the block owns; doorbells
// are only accessed through atomics.
unsafe impl Send for Block {}
// SAFETY: as above.
unsafe impl Sync for Block {}

/// The doorbells of one process's consuming workers, `len` of them, shared
/// by every handle ([`Bell`]) to them.
#[derive(Clone)]
pub struct Doorbells {
    block: Arc<Block>,
}

impl std::fmt::Debug for Doorbells {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Doorbells")
            .field("len", &self.block.len)
            .field(
                "in_process",
                &matches!(self.block.backing, Backing::Heap(_)),
            )
            .finish()
    }
}

impl Doorbells {
    /// `n` doorbells in process memory (producers in this process only).
    pub fn new(n: usize) -> Doorbells {
        let bells: Box<[Doorbell]> = (0..n).map(|_| Doorbell::new()).collect();
        Doorbells {
            block: Arc::new(Block {
                bells: bells.as_ptr(),
                len: n,
                backing: Backing::Heap(bells),
            }),
        }
    }

    /// `n` doorbells in the new segment `name` (`n × 128` bytes, rounded up
    /// to a page by the file system), for producers in other processes of
    /// the node. The name stays until [`Doorbells::unlink`] (or drop).
    ///
    /// # Errors
    /// As [`Region::create_segment`].
    #[cfg(not(loom))]
    pub fn create_segment(name: &SegmentName, n: usize) -> Result<Doorbells> {
        let region = Region::create_segment(name, (n.max(1)) * DOORBELL_BYTES)?;
        let bells = region.as_ptr() as *mut Doorbell;
        for i in 0..n {
            // SAFETY: the segment was just created, is page-aligned (so
            // 128-aligned), zero-filled (a doorbell of zeroed atomics is a
            // valid value) and holds `n` doorbells. Only the tag is written,
            // atomically, last: openers wait for it.
            unsafe { &*bells.add(i) }
                .magic
                .store(DOORBELL_MAGIC, Ordering::Release);
        }
        Ok(Doorbells {
            block: Arc::new(Block {
                bells,
                len: n,
                backing: Backing::Segment(region),
            }),
        })
    }

    /// Opens the `n` doorbells another process of the node created in
    /// segment `name`, waiting up to `timeout` for it to appear.
    ///
    /// # Errors
    /// As [`Region::open_segment`]; [`crate::ShmError::SegmentRejected`] when
    /// the segment is too small for `n` doorbells or not initialized.
    #[cfg(not(loom))]
    pub fn open_segment(name: &SegmentName, n: usize, timeout: Duration) -> Result<Doorbells> {
        let region = Region::open_segment(name, timeout)?;
        let path = region.path().map(|p| p.to_owned()).unwrap_or_default();
        if region.len() < n * DOORBELL_BYTES {
            return Err(crate::ShmError::SegmentRejected {
                path,
                reason: format!("{} bytes is too small for {n} doorbells", region.len()),
            });
        }
        let bells = region.as_ptr() as *const Doorbell;
        let start = std::time::Instant::now();
        for i in 0..n {
            // SAFETY: in bounds (checked above), page-aligned base; a
            // doorbell of zeroed atomics is a valid value.
            let b = unsafe { &*bells.add(i) };
            // The creator sizes the file before it writes the doorbells.
            while b.magic.load(Ordering::Acquire) != DOORBELL_MAGIC {
                if start.elapsed() >= timeout {
                    return Err(crate::ShmError::SegmentRejected {
                        path,
                        reason: format!("doorbell {i} is not initialized"),
                    });
                }
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        Ok(Doorbells {
            block: Arc::new(Block {
                bells,
                len: n,
                backing: Backing::Segment(region),
            }),
        })
    }

    /// Removes the segment's name (once every process of the node opened
    /// it); the mapping stays. A no-op in process memory.
    pub fn unlink(&self) {
        #[cfg(not(loom))]
        if let Backing::Segment(r) = &self.block.backing {
            r.unlink();
        }
    }

    /// Number of doorbells.
    pub fn len(&self) -> usize {
        self.block.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.block.len == 0
    }

    /// A handle to doorbell `i`.
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn bell(&self, i: usize) -> Bell {
        assert!(i < self.block.len, "doorbell {i} of {}", self.block.len);
        Bell {
            block: self.block.clone(),
            index: i,
        }
    }
}

/// A handle to one [`Doorbell`]: the consumer parks on it, producers ring it.
#[derive(Clone)]
pub struct Bell {
    block: Arc<Block>,
    index: usize,
}

impl std::fmt::Debug for Bell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bell").field("index", &self.index).finish()
    }
}

/// What [`Bell::prepare`] read: the sequence a park waits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "park or cancel"]
pub struct Ticket(u32);

impl Bell {
    #[inline(always)]
    fn get(&self) -> &Doorbell {
        // SAFETY: index < len (checked in `Doorbells::bell`); the block
        // keeps the memory alive as long as this handle.
        unsafe { &*self.block.bells.add(self.index) }
    }

    /// Consumer: announces a park. Poll every input once more after this;
    /// then [`Bell::park`] (nothing found) or [`Bell::cancel`].
    #[inline]
    pub fn prepare(&self) -> Ticket {
        let d = self.get();
        let t = d.seq.load(Ordering::Acquire);
        d.sleeping.store(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        Ticket(t)
    }

    /// Consumer: the re-poll found work; no park.
    #[inline]
    pub fn cancel(&self) {
        self.get().sleeping.store(0, Ordering::Relaxed);
    }

    /// Whether a producer rang since `t` was taken (a park would return at
    /// once).
    #[inline]
    pub fn rung_since(&self, t: Ticket) -> bool {
        self.get().seq.load(Ordering::Acquire) != t.0
    }

    /// Consumer: sleeps until a producer rings after `t` was taken, or for
    /// at most `timeout` (spurious returns are possible); then clears the
    /// sleeping flag.
    pub fn park(&self, t: Ticket, timeout: Duration) {
        let d = self.get();
        if !timeout.is_zero() {
            futex::wait(&d.seq, t.0, timeout);
        }
        d.sleeping.store(0, Ordering::Relaxed);
        // Pair with the producer's Release bump: what it published before
        // ringing is visible to the polls that follow.
        fence(Ordering::Acquire);
    }

    /// Producer: after publishing, wakes the consumer if it sleeps (a
    /// `SeqCst` fence and one load when it is awake).
    #[inline]
    pub fn ring(&self) {
        fence(Ordering::SeqCst);
        self.get().ring_fenced();
    }

    /// Producer, after a `SeqCst` fence of its own following the publish.
    #[inline(always)]
    pub(crate) fn ring_fenced(&self) {
        self.get().ring_fenced();
    }

    /// Wakes the consumer whether or not it sleeps (a producer closing or
    /// aborting).
    pub fn wake(&self) {
        fence(Ordering::SeqCst);
        self.get().wake();
    }

    /// Wake-ups rung so far on this doorbell (by every producer).
    pub fn rung(&self) -> u32 {
        self.get().rung.load(Ordering::Relaxed)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::{FrameRing, SegmentName};
    use std::time::Instant;

    #[test]
    fn a_doorbell_is_two_cache_lines() {
        assert_eq!(std::mem::size_of::<Doorbell>(), 128);
        assert_eq!(std::mem::align_of::<Doorbell>(), 128);
    }

    /// A parked consumer is woken by a publish long before its timeout; an
    /// awake consumer is not rung at all.
    #[test]
    fn publish_wakes_a_parked_consumer_only() {
        let bells = Doorbells::new(2);
        let (mut tx, mut rx) = FrameRing::new(4096).unwrap();
        tx.set_doorbell(bells.bell(1));
        let bell = bells.bell(1);
        // Awake: publishing does not ring.
        tx.write(crate::FrameKind::Data, b"a").unwrap();
        assert_eq!(bell.rung(), 0);
        rx.try_peek().unwrap().unwrap().release();
        let t = bell.prepare();
        assert!(rx.try_peek().unwrap().is_none());
        let producer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            tx.write(crate::FrameKind::Data, b"b").unwrap();
            tx
        });
        let start = Instant::now();
        bell.park(t, Duration::from_secs(20));
        let waited = start.elapsed();
        let tx = producer.join().unwrap();
        assert!(waited < Duration::from_secs(10), "parked {waited:?}");
        assert_eq!(bell.rung(), 1);
        assert_eq!(rx.try_peek().unwrap().unwrap().payload(), b"b");
        // The other doorbell of the block was never rung.
        assert_eq!(bells.bell(0).rung(), 0);
        // Closing rings whether or not the consumer sleeps.
        drop(tx);
        assert_eq!(bell.rung(), 2);
    }

    /// A ticket taken before a publish makes the park return at once.
    #[test]
    fn a_publish_between_prepare_and_park_is_not_lost() {
        let bells = Doorbells::new(1);
        let (mut tx, _rx) = FrameRing::new(4096).unwrap();
        tx.set_doorbell(bells.bell(0));
        let bell = bells.bell(0);
        let t = bell.prepare();
        tx.write(crate::FrameKind::Data, b"x").unwrap();
        assert!(bell.rung_since(t));
        let start = Instant::now();
        bell.park(t, Duration::from_secs(20));
        assert!(start.elapsed() < Duration::from_secs(10));
    }

    /// Doorbells in a segment: the opener's producer wakes the creator's
    /// parked consumer through another mapping of the same page.
    #[test]
    fn segment_doorbells_wake_across_mappings() {
        let name = SegmentName::for_channel(&format!("bells-test-{}", std::process::id()));
        let mine = Doorbells::create_segment(&name, 3).unwrap();
        let theirs = Doorbells::open_segment(&name, 3, Duration::from_secs(5)).unwrap();
        mine.unlink();
        assert!(!name.path().exists());
        assert!(Doorbells::open_segment(&name, 3, Duration::from_millis(10)).is_err());
        let bell = mine.bell(2);
        let t = bell.prepare();
        let remote = theirs.bell(2);
        let ringer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            remote.ring();
        });
        let start = Instant::now();
        bell.park(t, Duration::from_secs(20));
        ringer.join().unwrap();
        assert!(start.elapsed() < Duration::from_secs(10));
        assert_eq!(mine.bell(2).rung(), 1);
        assert_eq!(mine.bell(0).rung() + mine.bell(1).rung(), 0);
    }

    #[test]
    fn open_refuses_a_segment_too_small() {
        let name = SegmentName::for_channel(&format!("bells-small-{}", std::process::id()));
        let _mine = Doorbells::create_segment(&name, 1).unwrap();
        // One page holds 32 doorbells; 64 do not fit.
        let err = Doorbells::open_segment(&name, 64, Duration::from_secs(1)).unwrap_err();
        assert!(err.to_string().contains("too small"), "{err}");
    }
}
