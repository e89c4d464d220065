//! Loom model of the ring's protocol: reserve/commit/publish against
//! peek/release over a tiny ring, every interleaving of the atomics explored.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p air-shm --test loom --release`.
//! Loom checks the index protocol (positions, cached copies, closing) for
//! lost or duplicated frames and deadlocks, and, because the loom build
//! tracks every 16-byte granule of the data area through a loom cell, that
//! every header and payload byte is read only after its write happened-before
//! (weakening the `tail` or `head` store to `Relaxed` makes both tests fail
//! with a causality violation).
#![cfg(loom)]

use air_shm::{FrameKind, FrameRing, WaitPolicy};

fn payload(seq: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seq as u8).wrapping_mul(31).wrapping_add(i as u8))
        .collect()
}

/// Three frames through a 64-byte ring: the second one does not fit before
/// the end (padding, wrap to offset 0), the producer must wait for credit.
#[test]
fn reserve_commit_peek_release() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(|| {
        let (mut tx, mut rx) =
            FrameRing::with_policy(64, WaitPolicy::SPIN, WaitPolicy::SPIN).unwrap();
        let sizes = [8usize, 24, 0];
        let t = loom::thread::spawn(move || {
            for (seq, &len) in sizes.iter().enumerate() {
                let mut f = tx.reserve(len).unwrap();
                f.payload_mut().copy_from_slice(&payload(seq as u64, len));
                if len == 0 {
                    f.set_kind(FrameKind::End);
                }
                f.commit();
            }
        });
        let mut seq = 0u64;
        while let Some(f) = rx.peek().unwrap() {
            assert_eq!(f.seq(), seq);
            assert_eq!(f.payload(), &payload(seq, sizes[seq as usize])[..]);
            if seq == 2 {
                assert_eq!(f.kind(), FrameKind::End);
            }
            f.release();
            seq += 1;
        }
        assert_eq!(seq, 3);
        t.join().unwrap();
    });
}

/// Deferred commits and releases: one publish for two frames, one credit
/// return for two frames.
#[test]
fn batched_publish_and_credit() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(|| {
        let (mut tx, mut rx) =
            FrameRing::with_policy(64, WaitPolicy::SPIN, WaitPolicy::SPIN).unwrap();
        let t = loom::thread::spawn(move || {
            for round in 0..2u64 {
                for k in 0..2u64 {
                    let seq = round * 2 + k;
                    let mut f = tx.reserve(8).unwrap();
                    f.payload_mut().copy_from_slice(&seq.to_le_bytes());
                    f.commit_deferred();
                }
                tx.publish();
            }
        });
        let mut seq = 0u64;
        while let Some(f) = rx.peek().unwrap() {
            assert_eq!(f.payload(), &seq.to_le_bytes());
            f.release_deferred();
            seq += 1;
            if seq % 2 == 0 {
                rx.release_pending();
            }
        }
        assert_eq!(seq, 4);
        t.join().unwrap();
    });
}

/// The doorbell protocol: a consumer announces a park (`prepare`), polls its
/// ring once more and, finding nothing, would `futex_wait` on its ticket. In
/// every interleaving with a producer that publishes a frame, either that
/// last poll sees the frame or the producer rang after the ticket was taken
/// (so the wait returns at once): no wake-up is lost. The producer stays
/// open until the check (closing rings unconditionally and would hide a
/// lost wake-up).
#[test]
fn doorbell_no_lost_wakeup() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(|| {
        let bells = air_shm::Doorbells::new(1);
        let (mut tx, mut rx) =
            FrameRing::with_policy(64, WaitPolicy::SPIN, WaitPolicy::SPIN).unwrap();
        tx.set_doorbell(bells.bell(0));
        let t = loom::thread::spawn(move || {
            let mut f = tx.reserve(8).unwrap();
            f.payload_mut().copy_from_slice(&7u64.to_le_bytes());
            f.commit_deferred();
            tx.publish();
            tx
        });
        let bell = bells.bell(0);
        let ticket = bell.prepare();
        let found = match rx.try_peek().unwrap() {
            Some(f) => {
                assert_eq!(f.payload(), &7u64.to_le_bytes());
                f.release();
                true
            }
            None => false,
        };
        if found {
            bell.cancel();
        }
        let tx = t.join().unwrap();
        if !found {
            assert!(
                bell.rung_since(ticket),
                "lost wake-up: the last poll saw nothing and nobody rang"
            );
            bell.park(ticket, std::time::Duration::from_millis(1));
            let f = rx.try_peek().unwrap().expect("the frame after the wake-up");
            assert_eq!(f.payload(), &7u64.to_le_bytes());
            f.release();
        }
        drop(tx);
    });
}
