//! One-way latency from ping-pong: a client sends an 8-byte frame carrying
//! its round number, a server echoes it on a second channel, and the client
//! times each round trip with `Instant`; half a round trip is the one-way
//! time. Both sides busy-poll (the ring with `WaitPolicy::SPIN`), each on
//! its own pinned CPU. The median cost of `Instant::now()` is subtracted
//! from every round trip.

use super::util::{pin, Displaced};
use air_shm::{Consumer, Producer};
use anyhow::{anyhow, bail, Context, Result};
use core_affinity::CoreId;
use crossbeam_channel::{TryRecvError, TrySendError};
use hdrhistogram::Histogram;
use std::hint::spin_loop;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::Instant;

/// Frames each channel of a ping-pong can hold (every contender alike).
pub const PINGPONG_FRAMES: usize = 64;
/// Payload of a ping-pong frame, in bytes.
pub const PINGPONG_BYTES: usize = 8;

/// An empty round-trip histogram (1 ns to 60 s, 3 significant digits).
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds")
}

/// What the client does: how many rounds, how many of them are warm-up (not
/// recorded), and the timer cost to subtract (ns).
#[derive(Clone, Copy, Debug)]
pub struct Rounds {
    /// Rounds in total.
    pub total: u64,
    /// Leading rounds not recorded.
    pub warmup: u64,
    /// Subtracted from every measured round trip, in ns.
    pub timer_ns: u64,
}

impl Rounds {
    /// Runs the client loop: `round(i)` sends `i` and returns what came back.
    #[inline(always)]
    fn run(&self, h: &mut Histogram<u64>, mut round: impl FnMut(u64) -> Result<u64>) -> Result<()> {
        for i in 0..self.total {
            let t0 = Instant::now();
            let v = round(i)?;
            let rtt = t0.elapsed().as_nanos() as u64;
            if v != i {
                bail!("ping-pong: sent {i}, got {v} back");
            }
            if i >= self.warmup {
                h.saturating_record(rtt.saturating_sub(self.timer_ns).max(1));
            }
        }
        Ok(())
    }
}

/// Runs `client` on `cores.0` and `server` on `cores.1`, started together;
/// returns the client's round trips and how displaced both threads were.
fn run_pair<C, S>(
    cores: (CoreId, CoreId),
    client: C,
    server: S,
) -> Result<(Histogram<u64>, Displaced)>
where
    C: FnOnce(&mut Histogram<u64>) -> Result<()> + Send,
    S: FnOnce() -> Result<()> + Send,
{
    let barrier = Barrier::new(2);
    std::thread::scope(|s| {
        let b = &barrier;
        let ch = s.spawn(move || -> Result<(Histogram<u64>, Displaced)> {
            let pinned = pin(cores.0);
            b.wait();
            pinned?;
            let mut h = new_histogram();
            let mut d = Displaced::default();
            d.measure(|| client(&mut h))?;
            Ok((h, d))
        });
        let sh = s.spawn(move || -> Result<Displaced> {
            let pinned = pin(cores.1);
            b.wait();
            pinned?;
            let mut d = Displaced::default();
            d.measure(server)?;
            Ok(d)
        });
        let c = ch.join().map_err(|_| anyhow!("client thread panicked"));
        let s = sh.join().map_err(|_| anyhow!("server thread panicked"));
        let (c, s) = (c?, s?);
        let (h, mut d) = c.context("ping-pong client")?;
        d.add(s.context("ping-pong server")?);
        Ok((h, d))
    })
}

// ---------------------------------------------------------------- the ring

/// Client side over two rings: `tx` carries pings, `rx` the echoes.
pub fn ring_client(
    tx: &mut Producer,
    rx: &mut Consumer,
    rounds: Rounds,
    h: &mut Histogram<u64>,
) -> Result<()> {
    rounds.run(h, |i| {
        let mut f = tx.reserve(PINGPONG_BYTES)?;
        f.payload_mut().copy_from_slice(&i.to_le_bytes());
        f.commit();
        let f = rx.peek()?.context("server closed its ring")?;
        let v = u64::from_le_bytes(f.payload()[..8].try_into()?);
        f.release();
        Ok(v)
    })
}

/// Server side over two rings: echoes every ping until the client closes.
/// Returns the number of frames echoed.
pub fn ring_server(rx: &mut Consumer, tx: &mut Producer) -> Result<u64> {
    let mut n = 0;
    while let Some(f) = rx.peek()? {
        let mut o = tx.reserve(PINGPONG_BYTES)?;
        o.payload_mut().copy_from_slice(&f.payload()[..8]);
        o.commit();
        f.release();
        n += 1;
    }
    Ok(n)
}

/// Ring ping-pong between two threads.
pub fn ring_threads(
    cores: (CoreId, CoreId),
    rounds: Rounds,
) -> Result<(Histogram<u64>, Displaced)> {
    let spin = air_shm::WaitPolicy::SPIN;
    let cap = PINGPONG_FRAMES * air_shm::frame_size(PINGPONG_BYTES);
    let (mut ping_tx, mut ping_rx) = air_shm::FrameRing::with_policy(cap, spin, spin)?;
    let (mut pong_tx, mut pong_rx) = air_shm::FrameRing::with_policy(cap, spin, spin)?;
    run_pair(
        cores,
        move |h| {
            let r = ring_client(&mut ping_tx, &mut pong_rx, rounds, h);
            drop(ping_tx);
            r
        },
        move || ring_server(&mut ping_rx, &mut pong_tx).map(drop),
    )
}

// ------------------------------------------------------- crossbeam-channel

/// crossbeam-channel ping-pong: two `bounded(64)` channels of `u64`, polled
/// with `try_send` / `try_recv`.
pub fn crossbeam_threads(
    cores: (CoreId, CoreId),
    rounds: Rounds,
) -> Result<(Histogram<u64>, Displaced)> {
    let (ping_tx, ping_rx) = crossbeam_channel::bounded::<u64>(PINGPONG_FRAMES);
    let (pong_tx, pong_rx) = crossbeam_channel::bounded::<u64>(PINGPONG_FRAMES);
    fn send(tx: &crossbeam_channel::Sender<u64>, v: u64) -> Result<()> {
        let mut v = v;
        loop {
            match tx.try_send(v) {
                Ok(()) => return Ok(()),
                Err(TrySendError::Full(b)) => {
                    v = b;
                    spin_loop();
                }
                Err(TrySendError::Disconnected(_)) => bail!("peer gone"),
            }
        }
    }
    run_pair(
        cores,
        move |h| {
            rounds.run(h, |i| {
                send(&ping_tx, i)?;
                loop {
                    match pong_rx.try_recv() {
                        Ok(v) => return Ok(v),
                        Err(TryRecvError::Empty) => spin_loop(),
                        Err(TryRecvError::Disconnected) => bail!("server gone"),
                    }
                }
            })
        },
        move || loop {
            match ping_rx.try_recv() {
                Ok(v) => send(&pong_tx, v)?,
                Err(TryRecvError::Empty) => spin_loop(),
                Err(TryRecvError::Disconnected) => return Ok(()),
            }
        },
    )
}

// -------------------------------------------------------------------- rtrb

/// rtrb ping-pong: two `RingBuffer<u64>` of 64 slots, `push` / `pop`.
pub fn rtrb_threads(
    cores: (CoreId, CoreId),
    rounds: Rounds,
) -> Result<(Histogram<u64>, Displaced)> {
    let (mut ping_tx, mut ping_rx) = rtrb::RingBuffer::<u64>::new(PINGPONG_FRAMES);
    let (mut pong_tx, mut pong_rx) = rtrb::RingBuffer::<u64>::new(PINGPONG_FRAMES);
    run_pair(
        cores,
        move |h| {
            rounds.run(h, |i| {
                while ping_tx.push(i).is_err() {
                    spin_loop();
                }
                loop {
                    match pong_rx.pop() {
                        Ok(v) => return Ok(v),
                        Err(_) if pong_rx.is_abandoned() => bail!("server gone"),
                        Err(_) => spin_loop(),
                    }
                }
            })
        },
        move || loop {
            match ping_rx.pop() {
                Ok(v) => {
                    while pong_tx.push(v).is_err() {
                        spin_loop();
                    }
                }
                Err(_) => {
                    if ping_rx.is_abandoned() && ping_rx.is_empty() {
                        return Ok(());
                    }
                    spin_loop();
                }
            }
        },
    )
}

// -------------------------------------------------- cache-line ping-pong

const LINE: usize = 128;
const LINE_END: u64 = u64::MAX;

/// Bytes a cache-line ping-pong needs: two 128-byte lines.
pub const LINES_BYTES: usize = 2 * LINE;

/// The physical latency roof: one `AtomicU64` per direction, each in its own
/// 128-byte line; the client stores `i + 1` in the first, the server copies it
/// to the second. Nothing else moves.
#[derive(Clone, Copy)]
pub struct Lines {
    base: *mut u8,
}

// SAFETY: a Lines is a view of two atomics in shared memory.
unsafe impl Send for Lines {}

impl Lines {
    /// Lines over `base`.
    ///
    /// # Safety
    /// `base` must be 128-byte aligned, zero-filled at first use, valid for
    /// [`LINES_BYTES`] bytes while used, with one client and one server.
    pub unsafe fn new(base: *mut u8) -> Lines {
        Lines { base }
    }

    #[inline(always)]
    fn word(&self, i: usize) -> &AtomicU64 {
        // SAFETY: i < 2, inside LINES_BYTES; aligned (Lines::new's contract).
        unsafe { &*(self.base.add(i * LINE) as *const AtomicU64) }
    }

    /// Client side.
    pub fn client(&self, rounds: Rounds, h: &mut Histogram<u64>) -> Result<()> {
        let (ping, pong) = (self.word(0), self.word(1));
        let r = rounds.run(h, |i| {
            ping.store(i + 1, Ordering::Release);
            loop {
                let v = pong.load(Ordering::Acquire);
                if v == i + 1 {
                    return Ok(i);
                }
                spin_loop();
            }
        });
        ping.store(LINE_END, Ordering::Release);
        r
    }

    /// Server side: echoes until the client writes the end mark. Returns
    /// the number of rounds echoed.
    pub fn server(&self) -> u64 {
        let (ping, pong) = (self.word(0), self.word(1));
        let mut last = 0;
        let mut n = 0;
        loop {
            let v = ping.load(Ordering::Acquire);
            if v == LINE_END {
                return n;
            }
            if v != last {
                pong.store(v, Ordering::Release);
                last = v;
                n += 1;
            } else {
                spin_loop();
            }
        }
    }
}

/// Cache-line ping-pong between two threads.
pub fn lines_threads(
    cores: (CoreId, CoreId),
    rounds: Rounds,
) -> Result<(Histogram<u64>, Displaced)> {
    let region = air_shm::Region::anonymous(LINES_BYTES)?;
    // SAFETY: page-aligned, zero-filled, LINES_BYTES long, outlives the
    // scoped threads; one client and one server.
    let lines = unsafe { Lines::new(region.as_ptr()) };
    run_pair(
        cores,
        move |h| lines.client(rounds, h),
        move || {
            lines.server();
            Ok(())
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pingpong_echoes() {
        let ids = core_affinity::get_core_ids().unwrap();
        let cores = (ids[0], *ids.last().unwrap());
        let rounds = Rounds {
            total: 2000,
            warmup: 100,
            timer_ns: 0,
        };
        for (h, _) in [
            ring_threads(cores, rounds).unwrap(),
            crossbeam_threads(cores, rounds).unwrap(),
            rtrb_threads(cores, rounds).unwrap(),
            lines_threads(cores, rounds).unwrap(),
        ] {
            assert_eq!(h.len(), 1900);
            assert!(h.value_at_quantile(0.5) > 0);
        }
    }
}
