//! Throughput runs: one producer streams frames of `n` bytes to one consumer
//! for a fixed time, both busy-polling on their own pinned CPU.
//!
//! The work per frame is the same for every contender: the producer stamps
//! the frame number into its source buffer and copies the `n` bytes into the
//! channel (in place for the ring); the consumer copies the `n` bytes out of
//! the channel into a destination buffer and checks the stamp. The consumer
//! times the run, from its first frame to the producer's end, so start-up
//! costs (threads, processes, segments) are not in the figure.

use super::util::{check_every, pattern, pin, stamp, stamp_ok, touched, Displaced};
use air_shm::{frame_size, Consumer, Producer};
use anyhow::{anyhow, bail, Context, Result};
use core_affinity::CoreId;
use crossbeam_channel::{TryRecvError, TrySendError};
use std::hint::{black_box, spin_loop};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// How long a spinning side waits for its peer before it gives up (a peer
/// that died or hung), in seconds.
const STALL_SECS: u64 = 30;

/// What the consumer saw in one run.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sample {
    /// Frames received in all.
    pub total: u64,
    /// Frames timed: those after the frame that started the clock.
    pub frames: u64,
    /// Nanoseconds from the frame that started the clock to the end of the stream.
    pub ns: u64,
    /// Frames whose stamp (or length) was wrong: must be 0.
    pub bad: u64,
    /// Run-queue wait and wall time of the producer and consumer threads.
    pub displaced: Displaced,
}

/// The consumer's stopwatch. It notes the arrival of frame 0 and of frame
/// `warm` (one lap of the channel: from then on every slot has been used
/// once, so first-touch page faults and cold caches are behind), and times
/// from frame `warm` when at least another lap followed, else from frame 0.
pub struct Clock {
    warm: u64,
    t0: Option<Instant>,
    tw: Option<Instant>,
}

impl Clock {
    /// A stopwatch whose warm-up is `warm` frames.
    pub fn new(warm: u64) -> Clock {
        Clock {
            warm,
            t0: None,
            tw: None,
        }
    }

    /// Call on the arrival of frame `i` (0, 1, …), before processing it.
    #[inline(always)]
    pub fn tick(&mut self, i: u64) {
        if i == 0 {
            self.t0 = Some(Instant::now());
        }
        if i == self.warm {
            self.tw = Some(Instant::now());
        }
    }

    /// The sample at the end of the stream, after `total` frames.
    pub fn finish(&self, total: u64, bad: u64) -> Sample {
        let end = Instant::now();
        let (k, t) = match (self.tw, self.t0) {
            (Some(tw), _) if total >= 2 * self.warm => (self.warm, tw),
            (_, Some(t0)) => (0, t0),
            _ => (0, end),
        };
        Sample {
            total,
            frames: total.saturating_sub(k + 1),
            ns: (end - t).as_nanos() as u64,
            bad,
            displaced: Displaced::default(),
        }
    }
}

impl Sample {
    /// Frames per second (0 if the run was too short to time).
    pub fn frames_per_s(&self) -> f64 {
        if self.ns == 0 {
            0.0
        } else {
            self.frames as f64 * 1e9 / self.ns as f64
        }
    }

    /// Parses the line a peer process prints:
    /// `total=N frames=F ns=T bad=B runq=Q wall=W`.
    pub fn parse(line: &str) -> Result<Sample> {
        let mut s = Sample::default();
        for kv in line.split_whitespace() {
            let (k, v) = kv.split_once('=').context("expected key=value")?;
            let v: u64 = v.parse().with_context(|| format!("bad number in {kv:?}"))?;
            match k {
                "total" => s.total = v,
                "frames" => s.frames = v,
                "ns" => s.ns = v,
                "bad" => s.bad = v,
                "runq" => s.displaced.runq_ns = v,
                "wall" => s.displaced.wall_ns = v,
                _ => {}
            }
        }
        Ok(s)
    }

    /// The line a peer process prints (see [`Sample::parse`]).
    pub fn to_line(self) -> String {
        format!(
            "total={} frames={} ns={} bad={} runq={} wall={}",
            self.total,
            self.frames,
            self.ns,
            self.bad,
            self.displaced.runq_ns,
            self.displaced.wall_ns
        )
    }
}

/// Frames every contender may hold at once for frames of `n` bytes: as many
/// as fill `budget` bytes of ring (`16 + round_up(n, 16)` bytes each), and
/// at least 16.
pub fn budget_frames(n: usize, budget: usize) -> usize {
    (budget / frame_size(n)).max(16)
}

/// The ring's data area for frames of `n` bytes under `budget`, in bytes.
pub fn ring_capacity(n: usize, budget: usize) -> usize {
    budget_frames(n, budget) * frame_size(n)
}

/// Frames per publish (producer) and per credit return (consumer) in the
/// batched ring runs: about 4 KiB of frames, 1 to 64.
pub fn ring_batch(n: usize) -> usize {
    4096usize.div_ceil(frame_size(n)).clamp(1, 64)
}

/// Runs `produce` on `cores.0` and `consume` on `cores.1`, started together.
pub fn run_pair<P, C>(cores: (CoreId, CoreId), produce: P, consume: C) -> Result<Sample>
where
    P: FnOnce() -> Result<u64> + Send,
    C: FnOnce() -> Result<Sample> + Send,
{
    let barrier = Barrier::new(2);
    std::thread::scope(|s| {
        let b = &barrier;
        let ph = s.spawn(move || -> Result<(u64, Displaced)> {
            let pinned = pin(cores.0);
            b.wait();
            pinned?;
            let mut d = Displaced::default();
            let sent = d.measure(produce)?;
            Ok((sent, d))
        });
        let ch = s.spawn(move || -> Result<Sample> {
            let pinned = pin(cores.1);
            b.wait();
            pinned?;
            let mut d = Displaced::default();
            let mut got = d.measure(consume)?;
            got.displaced.add(d);
            Ok(got)
        });
        let p = ph.join().map_err(|_| anyhow!("producer thread panicked"));
        let c = ch.join().map_err(|_| anyhow!("consumer thread panicked"));
        let (p, c) = (p?, c?);
        let (sent, d) = p.context("producer")?;
        let mut got = c.context("consumer")?;
        got.displaced.add(d);
        if got.total != sent {
            bail!(
                "producer sent {sent} frames, consumer received {}",
                got.total
            );
        }
        Ok(got)
    })
}

/// Calls `f` until it returns true, spinning; fails after `STALL_SECS`.
#[inline(always)]
fn spin_until(what: &str, mut f: impl FnMut() -> bool) -> Result<()> {
    let mut spins = 0u32;
    let mut since: Option<Instant> = None;
    while !f() {
        spin_loop();
        spins = spins.wrapping_add(1);
        if spins % (1 << 16) == 0 {
            let t = *since.get_or_insert_with(Instant::now);
            if t.elapsed() > Duration::from_secs(STALL_SECS) {
                bail!("{what}: the peer made no progress for {STALL_SECS} s");
            }
        }
    }
    Ok(())
}

/// The producer's loop skeleton: `send(src, i)` for frames 0, 1, … until
/// `dur` has passed (the clock is read every [`check_every`] frames).
/// Returns the number of frames sent.
#[inline(always)]
fn produce_for(
    n: usize,
    dur: Duration,
    mut send: impl FnMut(&[u8], u64) -> Result<()>,
) -> Result<u64> {
    let mut src = pattern(n);
    let every = check_every(n);
    let deadline = Instant::now() + dur;
    let mut i = 0u64;
    loop {
        for _ in 0..every {
            stamp(&mut src, i);
            send(&src, i)?;
            i += 1;
        }
        if Instant::now() >= deadline {
            return Ok(i);
        }
    }
}

// ---------------------------------------------------------------- the ring

/// Producer side of a ring run. `batch` > 1: `commit_deferred` and one
/// `publish` every `batch` frames; 1: `commit` per frame.
pub fn ring_produce(p: &mut Producer, n: usize, batch: usize, dur: Duration) -> Result<u64> {
    let mut since = 0usize;
    let sent = produce_for(n, dur, |src, _| {
        let mut f = p.reserve(n)?;
        f.payload_mut().copy_from_slice(src);
        if batch > 1 {
            f.commit_deferred();
            since += 1;
            if since >= batch {
                p.publish();
                since = 0;
            }
        } else {
            f.commit();
        }
        Ok(())
    })?;
    p.publish();
    Ok(sent)
}

/// Consumer side of a ring run, until the producer closes. `batch` > 1:
/// `release_deferred` and one `release_pending` every `batch` frames.
pub fn ring_consume(c: &mut Consumer, n: usize, batch: usize) -> Result<Sample> {
    let mut dest = touched(n);
    let (mut frames, mut bad, mut since) = (0u64, 0u64, 0usize);
    let mut clock = Clock::new((c.capacity() / frame_size(n)) as u64);
    while let Some(f) = c.peek()? {
        clock.tick(frames);
        let p = f.payload();
        if p.len() == n {
            dest.copy_from_slice(p);
            black_box(&mut dest);
            bad += !stamp_ok(&dest, frames) as u64;
        } else {
            bad += 1;
        }
        frames += 1;
        if batch > 1 {
            f.release_deferred();
            since += 1;
            if since >= batch {
                c.release_pending();
                since = 0;
            }
        } else {
            f.release();
        }
    }
    Ok(clock.finish(frames, bad))
}

// ---------------------------------------------------------- the copy roof

/// Slots of the copy roof.
pub const ROOF_SLOTS: usize = 16;
const LINE: usize = 128;
const EMPTY: u32 = 0;
const FULL: u32 = 1;
const END: u32 = 2;

/// The cross-core copy roof's memory: `ROOF_SLOTS` flags, each in its own
/// 128-byte line, then `ROOF_SLOTS` slots of `n` bytes (stride rounded up to
/// 128). No ring logic: the producer fills slot `i % 16` when its flag says
/// empty, the consumer empties it when it says full.
#[derive(Clone, Copy)]
pub struct Roof {
    base: *mut u8,
    n: usize,
}

// SAFETY: a Roof is a view of shared memory whose slots are handed between
// the two sides only through their flags (Release store, Acquire load).
unsafe impl Send for Roof {}

impl Roof {
    /// Bytes of memory a roof for frames of `n` bytes needs.
    pub fn bytes(n: usize) -> usize {
        ROOF_SLOTS * LINE + ROOF_SLOTS * n.next_multiple_of(LINE)
    }

    /// A roof over `base`.
    ///
    /// # Safety
    /// `base` must be 128-byte aligned, zero-filled at first use, valid for
    /// [`Roof::bytes`]`(n)` bytes for as long as the roof is used, and used
    /// by exactly one producer and one consumer.
    pub unsafe fn new(base: *mut u8, n: usize) -> Roof {
        Roof { base, n }
    }

    #[inline(always)]
    fn flag(&self, i: usize) -> &AtomicU32 {
        // SAFETY: i < ROOF_SLOTS, so the flag lies in the first ROOF_SLOTS
        // lines of the region (Roof::new's contract); AtomicU32 has alignment
        // 4 ≤ 128 and every bit pattern is valid.
        unsafe { &*(self.base.add(i * LINE) as *const AtomicU32) }
    }

    #[inline(always)]
    fn slot(&self, i: usize) -> *mut u8 {
        // SAFETY: i < ROOF_SLOTS; the slot lies inside Roof::bytes(n).
        unsafe {
            self.base
                .add(ROOF_SLOTS * LINE + i * self.n.next_multiple_of(LINE))
        }
    }

    /// Producer side: copies frames in until `dur` has passed, then marks the end.
    pub fn produce(&self, dur: Duration) -> Result<u64> {
        let n = self.n;
        let mut s = 0usize;
        let sent = produce_for(n, dur, |src, _| {
            let f = self.flag(s);
            spin_until("roof producer", || f.load(Ordering::Acquire) == EMPTY)?;
            // SAFETY: the flag says EMPTY, so the consumer is done with slot
            // s (its Release store made that so) and will not touch it until
            // we store FULL; the slot holds n bytes; src has n bytes.
            unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.slot(s), n) };
            f.store(FULL, Ordering::Release);
            s = (s + 1) % ROOF_SLOTS;
            Ok(())
        })?;
        let f = self.flag(s);
        spin_until("roof producer", || f.load(Ordering::Acquire) == EMPTY)?;
        f.store(END, Ordering::Release);
        Ok(sent)
    }

    /// Consumer side: copies frames out until the producer marks the end.
    pub fn consume(&self) -> Result<Sample> {
        let n = self.n;
        let mut dest = touched(n);
        let (mut frames, mut bad, mut s) = (0u64, 0u64, 0usize);
        let mut clock = Clock::new(ROOF_SLOTS as u64);
        loop {
            let f = self.flag(s);
            let mut v = EMPTY;
            spin_until("roof consumer", || {
                v = f.load(Ordering::Acquire);
                v != EMPTY
            })?;
            if v == END {
                break;
            }
            clock.tick(frames);
            // SAFETY: the flag says FULL (Acquire), so the producer finished
            // writing slot s and will not touch it until we store EMPTY.
            unsafe { std::ptr::copy_nonoverlapping(self.slot(s), dest.as_mut_ptr(), n) };
            black_box(&mut dest);
            bad += !stamp_ok(&dest, frames) as u64;
            frames += 1;
            f.store(EMPTY, Ordering::Release);
            s = (s + 1) % ROOF_SLOTS;
        }
        Ok(clock.finish(frames, bad))
    }
}

/// A thread-to-thread copy-roof run over anonymous memory.
pub fn roof_threads(cores: (CoreId, CoreId), n: usize, dur: Duration) -> Result<Sample> {
    let region = air_shm::Region::anonymous(Roof::bytes(n))?;
    let mut off = 0;
    while off < region.len() {
        // SAFETY: off < len; no one else uses the region yet; writing the
        // zero it holds maps the page now rather than inside the run.
        unsafe { region.as_ptr().add(off).write_volatile(0) };
        off += 4096;
    }
    // SAFETY: the region is page-aligned, zero-filled, Roof::bytes(n) long,
    // outlives both threads (scoped), and has one producer and one consumer.
    let roof = unsafe { Roof::new(region.as_ptr(), n) };
    run_pair(cores, move || roof.produce(dur), move || roof.consume())
}

// ------------------------------------------------------- crossbeam-channel

/// A crossbeam-channel run: `bounded(slots)` of `[u8; n]` arrays for the
/// powers of two up to 4096 bytes, else of recycled `Vec<u8>` buffers.
pub fn crossbeam_threads(
    cores: (CoreId, CoreId),
    n: usize,
    slots: usize,
    dur: Duration,
) -> Result<Sample> {
    macro_rules! arrays {
        ($($k:literal)*) => {
            match n {
                $($k => crossbeam_array::<$k>(cores, slots, dur),)*
                _ => crossbeam_vec(cores, n, slots, dur),
            }
        };
    }
    arrays!(1 2 4 8 16 32 64 128 256 512 1024 2048 4096)
}

fn crossbeam_array<const N: usize>(
    cores: (CoreId, CoreId),
    slots: usize,
    dur: Duration,
) -> Result<Sample> {
    let (tx, rx) = crossbeam_channel::bounded::<[u8; N]>(slots);
    run_pair(
        cores,
        move || {
            produce_for(N, dur, |src, _| {
                let mut m: [u8; N] = src.try_into().expect("src has N bytes");
                loop {
                    match tx.try_send(m) {
                        Ok(()) => return Ok(()),
                        Err(TrySendError::Full(back)) => {
                            m = back;
                            spin_loop();
                        }
                        Err(TrySendError::Disconnected(_)) => bail!("consumer gone"),
                    }
                }
            })
        },
        move || {
            let mut dest = [0u8; N];
            let (mut frames, mut bad) = (0u64, 0u64);
            let mut clock = Clock::new(slots as u64);
            loop {
                match rx.try_recv() {
                    Ok(m) => {
                        clock.tick(frames);
                        dest.copy_from_slice(&m);
                        black_box(&mut dest);
                        bad += !stamp_ok(&dest, frames) as u64;
                        frames += 1;
                    }
                    Err(TryRecvError::Empty) => spin_loop(),
                    Err(TryRecvError::Disconnected) => break,
                }
            }
            Ok(clock.finish(frames, bad))
        },
    )
}

fn crossbeam_vec(cores: (CoreId, CoreId), n: usize, slots: usize, dur: Duration) -> Result<Sample> {
    let (tx, rx) = crossbeam_channel::bounded::<Vec<u8>>(slots);
    // Buffers come back on a second channel: nothing is allocated or freed on
    // the hot path (glibc's cross-thread free is slow, see MACHINE-NOTES).
    let (back_tx, back_rx) = crossbeam_channel::bounded::<Vec<u8>>(slots + 2);
    for _ in 0..slots + 2 {
        back_tx.send(touched(n)).expect("fresh channel");
    }
    run_pair(
        cores,
        move || {
            produce_for(n, dur, |src, _| {
                let mut b = loop {
                    match back_rx.try_recv() {
                        Ok(b) => break b,
                        Err(TryRecvError::Empty) => spin_loop(),
                        Err(TryRecvError::Disconnected) => bail!("consumer gone"),
                    }
                };
                b.copy_from_slice(src);
                loop {
                    match tx.try_send(b) {
                        Ok(()) => return Ok(()),
                        Err(TrySendError::Full(v)) => {
                            b = v;
                            spin_loop();
                        }
                        Err(TrySendError::Disconnected(_)) => bail!("consumer gone"),
                    }
                }
            })
        },
        move || {
            let mut dest = touched(n);
            let (mut frames, mut bad) = (0u64, 0u64);
            let mut clock = Clock::new(slots as u64);
            loop {
                match rx.try_recv() {
                    Ok(b) => {
                        clock.tick(frames);
                        dest.copy_from_slice(&b);
                        black_box(&mut dest);
                        bad += !stamp_ok(&dest, frames) as u64;
                        frames += 1;
                        // Never full (it holds every buffer); fails only once
                        // the producer is gone, when the buffer is dropped.
                        let _ = back_tx.try_send(b);
                    }
                    Err(TryRecvError::Empty) => spin_loop(),
                    Err(TryRecvError::Disconnected) => break,
                }
            }
            Ok(clock.finish(frames, bad))
        },
    )
}

// -------------------------------------------------------------------- rtrb

/// An rtrb run: a `RingBuffer<u8>` of `slots * n` bytes; each frame is one
/// `write_chunk_uninit(n)` / `read_chunk(n)` (two slices when it wraps).
pub fn rtrb_threads(
    cores: (CoreId, CoreId),
    n: usize,
    slots: usize,
    dur: Duration,
) -> Result<Sample> {
    let (mut p, mut c) = rtrb::RingBuffer::<u8>::new(slots * n);
    // One lap from this thread maps every page of the buffer before the run.
    {
        let mut w = p.write_chunk_uninit(slots * n).expect("empty buffer");
        let (a, b) = w.as_mut_slices();
        for x in a.iter_mut().chain(b.iter_mut()) {
            x.write(0);
        }
        // SAFETY: every slot of the chunk was written just above.
        unsafe { w.commit_all() };
        c.read_chunk(slots * n).expect("full buffer").commit_all();
    }
    run_pair(
        cores,
        move || {
            produce_for(n, dur, |src, _| {
                loop {
                    if let Ok(mut chunk) = p.write_chunk_uninit(n) {
                        let (a, b) = chunk.as_mut_slices();
                        let k = a.len();
                        // SAFETY: a and b are the chunk's two parts, a.len() +
                        // b.len() == n == src.len(); u8 and MaybeUninit<u8>
                        // share a layout.
                        unsafe {
                            std::ptr::copy_nonoverlapping(
                                src.as_ptr(),
                                a.as_mut_ptr().cast::<u8>(),
                                k,
                            );
                            std::ptr::copy_nonoverlapping(
                                src.as_ptr().add(k),
                                b.as_mut_ptr().cast::<u8>(),
                                n - k,
                            );
                        }
                        // SAFETY: every one of the n slots was written just above.
                        unsafe { chunk.commit_all() };
                        return Ok(());
                    }
                    if p.is_abandoned() {
                        bail!("consumer gone");
                    }
                    spin_loop();
                }
            })
        },
        move || {
            let mut dest = touched(n);
            let (mut frames, mut bad) = (0u64, 0u64);
            let mut clock = Clock::new(slots as u64);
            loop {
                match c.read_chunk(n) {
                    Ok(chunk) => {
                        clock.tick(frames);
                        let (a, b) = chunk.as_slices();
                        dest[..a.len()].copy_from_slice(a);
                        dest[a.len()..].copy_from_slice(b);
                        chunk.commit_all();
                        black_box(&mut dest);
                        bad += !stamp_ok(&dest, frames) as u64;
                        frames += 1;
                    }
                    Err(_) => {
                        if c.is_abandoned() && c.slots() < n {
                            break;
                        }
                        spin_loop();
                    }
                }
            }
            Ok(clock.finish(frames, bad))
        },
    )
}

// ---------------------------------------------------------- ring (threads)

/// A thread-to-thread ring run (both sides `WaitPolicy::SPIN`) with a data
/// area of `capacity` bytes.
pub fn ring_threads(
    cores: (CoreId, CoreId),
    n: usize,
    capacity: usize,
    batch: usize,
    dur: Duration,
) -> Result<Sample> {
    let spin = air_shm::WaitPolicy::SPIN;
    let (mut p, mut c) = air_shm::FrameRing::with_policy(capacity, spin, spin)?;
    run_pair(
        cores,
        move || {
            let r = ring_produce(&mut p, n, batch, dur);
            drop(p);
            r
        },
        move || ring_consume(&mut c, n, batch),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cores() -> (CoreId, CoreId) {
        let ids = core_affinity::get_core_ids().unwrap();
        (ids[0], *ids.last().unwrap())
    }

    #[test]
    fn every_contender_moves_frames() {
        let d = Duration::from_millis(5);
        for n in [8, 64, 100, 8192] {
            let f = budget_frames(n, 64 << 10);
            for s in [
                ring_threads(cores(), n, ring_capacity(n, 64 << 10), ring_batch(n), d).unwrap(),
                ring_threads(cores(), n, ring_capacity(n, 64 << 10), 1, d).unwrap(),
                crossbeam_threads(cores(), n, f, d).unwrap(),
                rtrb_threads(cores(), n, f, d).unwrap(),
                roof_threads(cores(), n, d).unwrap(),
            ] {
                assert_eq!(s.bad, 0, "size {n}");
                assert!(s.frames > 0, "size {n}");
            }
        }
    }

    #[test]
    fn budget() {
        assert_eq!(budget_frames(64, 1 << 20), (1 << 20) / 80);
        assert_eq!(budget_frames(1 << 20, 1 << 20), 16);
        assert_eq!(ring_batch(8), 64);
        assert_eq!(ring_batch(64), 52);
        assert_eq!(ring_batch(65536), 1);
        let s = Sample::parse("total=11 frames=10 ns=20 bad=0").unwrap();
        assert_eq!(s.total, 11);
        assert_eq!((s.frames, s.ns, s.bad), (10, 20, 0));
    }
}
