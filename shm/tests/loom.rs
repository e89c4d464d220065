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
