//! The frame ring between threads: stress with checksums, edge sizes,
//! backpressure, batching, closing and parking.

mod common;
use air_shm::{frame_size, FrameKind, FrameRing, ShmError, WaitPolicy};
use common::{check, fill, Rng};
use std::time::{Duration, Instant};

const STRESS_FRAMES: u64 = if cfg!(miri) { 1_000 } else { 10_000_000 };

/// 10^7 frames of random sizes from 0 to the maximum over a ring whose
/// capacity is not a power of two, with every payload checked byte for byte.
#[test]
fn stress_random_sizes_non_power_of_two() {
    for (cap, policy, batch) in [
        (3000usize, WaitPolicy::default(), 1u64),
        (1000, WaitPolicy::SPIN_THEN_YIELD, 7),
    ] {
        let (mut tx, mut rx) = FrameRing::with_policy(cap, policy, policy).unwrap();
        assert_eq!(tx.capacity() % 16, 0);
        assert!(!tx.capacity().is_power_of_two());
        let max = tx.max_payload();
        assert_eq!(max, tx.capacity() - 16);
        let n = STRESS_FRAMES / if batch == 1 { 1 } else { 2 };
        let producer = std::thread::spawn(move || {
            let mut rng = Rng(42);
            let mut sum = 0u64;
            for seq in 0..n {
                let len = match seq % 1000 {
                    0 => max,
                    1 => 0,
                    _ => rng.size(max),
                };
                let mut f = tx.reserve(len).unwrap();
                fill(f.payload_mut(), seq);
                sum = sum.wrapping_add(check(f.payload_mut(), seq));
                if seq % 3 == 0 {
                    f.set_kind(FrameKind::Watermark);
                }
                if seq % batch == 0 {
                    f.commit();
                } else {
                    f.commit_deferred();
                }
            }
            let full_waits = tx.full_waits();
            drop(tx);
            (sum, full_waits)
        });
        let mut sum = 0u64;
        let mut seq = 0u64;
        let mut maxed = 0;
        while let Some(f) = rx.peek().unwrap() {
            assert_eq!(f.seq(), seq);
            let want = if seq % 3 == 0 {
                FrameKind::Watermark
            } else {
                FrameKind::Data
            };
            assert_eq!(f.kind(), want);
            if seq % 1000 == 0 {
                assert_eq!(f.len(), max, "frame {seq} has the maximum size");
                maxed += 1;
            }
            if seq % 1000 == 1 {
                assert!(f.is_empty(), "frame {seq} is empty");
            }
            sum = sum.wrapping_add(check(f.payload(), seq));
            if seq % 5 == 0 {
                f.release();
            } else {
                f.release_deferred();
            }
            seq += 1;
        }
        let (psum, full_waits) = producer.join().unwrap();
        assert_eq!(seq, n, "every frame arrives");
        assert_eq!(sum, psum, "checksums agree");
        assert_eq!(maxed, n.div_ceil(1000));
        assert!(
            full_waits > 0,
            "a small ring must have blocked the producer"
        );
    }
}

/// Frames that end exactly at the end of the data area wrap without padding;
/// frames that do not fit are placed at offset 0 after a padding frame.
#[test]
fn exact_end_and_padding_single_thread() {
    // 256 bytes: four 64-byte frames (48-byte payloads) fill it exactly.
    let (mut tx, mut rx) = FrameRing::new(256).unwrap();
    assert_eq!(frame_size(48), 64);
    let mut seq = 0u64;
    for _lap in 0..10 {
        for _ in 0..4 {
            let mut f = tx.try_reserve(48).unwrap();
            fill(f.payload_mut(), seq);
            f.commit();
            seq += 1;
        }
        // Exactly full: a zero-length frame (16 bytes) does not fit.
        assert!(matches!(tx.try_reserve(0), Err(ShmError::Full)));
        for i in 0..4 {
            let f = rx.try_peek().unwrap().unwrap();
            assert_eq!(f.seq(), seq - 4 + i);
            check(f.payload(), f.seq());
            f.release();
        }
        assert!(rx.try_peek().unwrap().is_none());
    }
    // 96-byte frames (80-byte payload): two fit (192), the third needs a
    // 64-byte padding frame and goes to offset 0.
    let (mut tx, mut rx) = FrameRing::new(256).unwrap();
    let mut next_read = 0u64;
    for seq in 0..100u64 {
        let mut f = loop {
            match tx.try_reserve(80) {
                Ok(f) => break f,
                Err(ShmError::Full) => {
                    let f = rx.try_peek().unwrap().expect("full ring has a frame");
                    assert_eq!(f.seq(), next_read);
                    check(f.payload(), next_read);
                    next_read += 1;
                    f.release();
                }
                Err(e) => panic!("{e}"),
            }
        };
        fill(f.payload_mut(), seq);
        f.commit();
    }
    while let Some(f) = rx.try_peek().unwrap() {
        assert_eq!(f.seq(), next_read);
        check(f.payload(), next_read);
        next_read += 1;
        f.release();
    }
    assert_eq!(next_read, 100);
}

/// A frame of exactly the maximum size goes through from any offset (the
/// producer pads, waits for the ring to drain, and writes at offset 0); one
/// byte more is refused with a clear error.
#[test]
fn maximum_frame_from_any_offset() {
    let (mut tx, mut rx) = FrameRing::new(1008).unwrap();
    let max = tx.max_payload();
    assert_eq!(max, 1008 - 16);
    match tx.try_reserve(max + 1) {
        Err(ShmError::FrameTooLarge { len, max: m }) => {
            assert_eq!((len, m), (max + 1, max));
        }
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("frame larger than the maximum was accepted"),
    }
    let err = tx.reserve(max + 1).err().unwrap().to_string();
    assert!(err.contains("993") && err.contains("992"), "{err}");
    let t = std::thread::spawn(move || {
        for seq in 0..300u64 {
            let len = if seq % 2 == 0 {
                max
            } else {
                (seq as usize * 37) % 200
            };
            let mut f = tx.reserve(len).unwrap();
            fill(f.payload_mut(), seq);
            f.commit();
        }
    });
    let mut seq = 0;
    while let Some(f) = rx.peek().unwrap() {
        assert_eq!(f.seq(), seq);
        if seq % 2 == 0 {
            assert_eq!(f.len(), max);
        }
        check(f.payload(), seq);
        f.release();
        seq += 1;
    }
    t.join().unwrap();
    assert_eq!(seq, 300);
}

/// A zero-length frame is a valid frame (e.g. end-of-stream).
#[test]
fn zero_length_frame() {
    let (mut tx, mut rx) = FrameRing::new(64).unwrap();
    tx.write(FrameKind::End, &[]).unwrap();
    let f = rx.try_peek().unwrap().unwrap();
    assert_eq!((f.kind(), f.len(), f.seq()), (FrameKind::End, 0, 0));
    assert!(f.payload().is_empty());
    f.release();
}

/// Payloads are 16-byte aligned (rkyv archives are read in place).
#[test]
fn payloads_are_aligned() {
    let (mut tx, mut rx) = FrameRing::new(4000).unwrap();
    for len in [0usize, 1, 7, 15, 16, 17, 100, 333] {
        let mut f = tx.reserve(len).unwrap();
        assert_eq!(f.payload_mut().as_ptr() as usize % 16, 0);
        f.commit();
        let f = rx.try_peek().unwrap().unwrap();
        assert_eq!(f.payload().as_ptr() as usize % 16, 0);
        assert_eq!(f.len(), len);
        f.release();
    }
}

/// Deferred commits stay invisible until published, then appear all at once;
/// deferred releases return no credit until `release_pending`.
#[test]
fn batched_commit_and_release() {
    let (mut tx, mut rx) = FrameRing::new(4096).unwrap();
    // 64 frames of 64 bytes fill the ring exactly.
    for seq in 0..64u64 {
        let mut f = tx.try_reserve(48).unwrap();
        fill(f.payload_mut(), seq);
        f.commit_deferred();
    }
    assert_eq!(tx.pending(), 64);
    assert!(
        rx.try_peek().unwrap().is_none(),
        "unpublished frames are invisible"
    );
    tx.publish();
    assert_eq!(tx.pending(), 0);
    for seq in 0..64u64 {
        let f = rx.try_peek().unwrap().unwrap();
        assert_eq!(f.seq(), seq);
        check(f.payload(), seq);
        f.release_deferred();
    }
    // Every frame read, but no credit returned yet: the ring is still full.
    assert!(matches!(tx.try_reserve(0), Err(ShmError::Full)));
    rx.release_pending();
    assert!(tx.try_reserve(48).is_ok());
    // A consumer that finds the ring empty returns deferred credit by itself.
    let (mut tx, mut rx) = FrameRing::new(4096).unwrap();
    for _ in 0..64 {
        tx.try_reserve(48).unwrap().commit();
    }
    while let Some(f) = rx.try_peek().unwrap() {
        f.release_deferred();
    }
    assert!(tx.try_reserve(tx.max_payload()).is_ok());
}

/// A full ring blocks the producer (backpressure); when the consumer resumes,
/// every frame arrives, none dropped.
#[test]
fn full_ring_blocks_then_resumes() {
    let (mut tx, mut rx) = FrameRing::new(512).unwrap();
    let t = std::thread::spawn(move || {
        let start = Instant::now();
        for seq in 0..200u64 {
            let mut f = tx.reserve(100).unwrap();
            fill(f.payload_mut(), seq);
            f.commit();
        }
        (tx.full_waits(), start.elapsed())
    });
    std::thread::sleep(Duration::from_millis(150));
    let mut seq = 0;
    while let Some(f) = rx.peek().unwrap() {
        assert_eq!(f.seq(), seq);
        check(f.payload(), seq);
        f.release();
        seq += 1;
    }
    let (waits, took) = t.join().unwrap();
    assert_eq!(seq, 200);
    assert!(waits >= 1, "the producer must have waited");
    assert!(
        took >= Duration::from_millis(100),
        "the producer was blocked"
    );
}

/// A consumer that goes away is seen by a blocked producer as closed.
#[test]
fn consumer_close_unblocks_producer() {
    let (mut tx, rx) = FrameRing::new(256).unwrap();
    let t = std::thread::spawn(move || {
        let mut sent = 0u64;
        loop {
            match tx.reserve(64) {
                Ok(f) => {
                    f.commit();
                    sent += 1;
                }
                Err(e) => return (sent, e),
            }
        }
    });
    std::thread::sleep(Duration::from_millis(50));
    drop(rx);
    let (sent, err) = t.join().unwrap();
    assert!(matches!(err, ShmError::Closed), "{err}");
    assert_eq!(sent, 3, "three 80-byte frames fit in 256 bytes");
}

/// A producer that closes in order: the consumer reads every frame, then `None`.
/// A producer whose thread panics: the consumer reads every committed frame,
/// then `PeerGone`.
#[test]
fn producer_close_and_abort() {
    let (mut tx, mut rx) = FrameRing::new(1024).unwrap();
    for _ in 0..5 {
        tx.reserve(10).unwrap().commit_deferred();
    }
    tx.close();
    for seq in 0..5 {
        assert_eq!(rx.peek().unwrap().unwrap().seq(), seq);
        rx.peek().unwrap().unwrap().release();
    }
    assert!(rx.peek().unwrap().is_none());
    assert!(matches!(rx.try_peek(), Err(ShmError::Closed)));

    let (mut tx, mut rx) = FrameRing::new(1024).unwrap();
    let t = std::thread::spawn(move || {
        for _ in 0..3 {
            tx.reserve(10).unwrap().commit();
        }
        panic!("worker failure (expected by the test)");
    });
    assert!(t.join().is_err());
    for _ in 0..3 {
        rx.peek().unwrap().unwrap().release();
    }
    match rx.peek() {
        Err(ShmError::PeerGone(why)) => assert!(why.contains("panicked"), "{why}"),
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("an aborted producer looked like an orderly end"),
    }
}

/// Each side can be claimed once.
#[test]
fn sides_are_claimed_once() {
    let ring = FrameRing::anonymous(128).unwrap();
    let _p = ring.producer(WaitPolicy::default()).unwrap();
    assert!(matches!(
        ring.producer(WaitPolicy::default()),
        Err(ShmError::SideTaken("producer"))
    ));
    let _c = ring.consumer(WaitPolicy::default()).unwrap();
    assert!(matches!(
        ring.consumer(WaitPolicy::default()),
        Err(ShmError::SideTaken("consumer"))
    ));
}

fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// An idle consumer parks: waiting 300 ms for a frame costs well under 300 ms
/// of CPU, and a frame published later wakes it promptly.
#[test]
fn idle_consumer_parks_and_wakes() {
    let (mut tx, mut rx) = FrameRing::new(4096).unwrap();
    let t = std::thread::spawn(move || {
        let cpu0 = thread_cpu_time();
        let f = rx.peek().unwrap().unwrap();
        let woke = Instant::now();
        assert_eq!(f.payload(), b"late");
        f.release();
        (thread_cpu_time() - cpu0, woke, rx.empty_waits())
    });
    std::thread::sleep(Duration::from_millis(300));
    let sent = Instant::now();
    tx.write(FrameKind::Data, b"late").unwrap();
    let (cpu, woke, waits) = t.join().unwrap();
    assert_eq!(waits, 1);
    assert!(
        cpu < Duration::from_millis(60),
        "idle consumer burned {cpu:?} of CPU"
    );
    let delay = woke.saturating_duration_since(sent);
    assert!(
        delay < Duration::from_millis(50),
        "woke {delay:?} after the publish"
    );
}

/// An idle producer blocked on a full ring parks too.
#[test]
fn blocked_producer_parks() {
    let (mut tx, mut rx) = FrameRing::new(128).unwrap();
    let t = std::thread::spawn(move || {
        tx.reserve(100).unwrap().commit();
        let cpu0 = thread_cpu_time();
        tx.reserve(100).unwrap().commit();
        thread_cpu_time() - cpu0
    });
    std::thread::sleep(Duration::from_millis(300));
    rx.peek().unwrap().unwrap().release();
    rx.peek().unwrap().unwrap().release();
    let cpu = t.join().unwrap();
    assert!(
        cpu < Duration::from_millis(60),
        "blocked producer burned {cpu:?}"
    );
}

/// A consumer that finds only padding, then nothing, returns the padding's
/// credit: a producer waiting for room at offset 0 is not left waiting.
#[test]
fn skipped_padding_returns_credit() {
    let (mut tx, mut rx) = FrameRing::new(256).unwrap();
    // A: 192 bytes at offset 0, read and released.
    tx.try_reserve(176).unwrap().commit();
    rx.try_peek().unwrap().unwrap().release();
    // B: 208 bytes does not fit at 192: 64 bytes of padding are staged, and
    // at offset 0 only 192 bytes are free (the padding holds 64).
    assert!(matches!(tx.try_reserve(192), Err(ShmError::Full)));
    tx.publish(); // the padding becomes visible
                  // The consumer skips the padding and finds nothing: it must return the
                  // padding's credit, or the producer would wait forever.
    assert!(rx.try_peek().unwrap().is_none());
    let mut f = tx.try_reserve(192).expect("the padding's credit came back");
    f.payload_mut().fill(7);
    f.commit();
    let f = rx.try_peek().unwrap().unwrap();
    assert_eq!((f.seq(), f.len()), (1, 192));
    assert!(f.payload().iter().all(|&b| b == 7));
}
