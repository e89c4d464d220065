//! Property tests of the frame ring (proptest): any sequence of
//! reserve/commit (per frame or deferred + publish), peek/release (per frame
//! or deferred + release_pending) with any payload sizes up to the largest
//! frame delivers every committed frame once, in order, with its bytes; a
//! full ring refuses (backpressure), never drops or overwrites.

use air_shm::{FrameKind, FrameRing, ShmError};
use proptest::prelude::*;
use std::collections::VecDeque;

#[derive(Debug, Clone)]
enum Op {
    /// Write a frame of this payload size (clamped to the largest payload).
    Write { len: usize, deferred: bool },
    /// Make deferred commits visible.
    Publish,
    /// Read up to this many frames.
    Read { n: usize, deferred: bool },
    /// Return credit for deferred releases.
    ReleasePending,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0usize..3000, any::<bool>()).prop_map(|(len, deferred)| Op::Write { len, deferred }),
        1 => Just(Op::Publish),
        3 => (1usize..8, any::<bool>()).prop_map(|(n, deferred)| Op::Read { n, deferred }),
        1 => Just(Op::ReleasePending),
    ]
}

/// The payload of frame `seq`: bytes derived from its number.
fn payload(seq: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seq as usize * 31 + i * 7) as u8)
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn frames_arrive_once_in_order_with_their_bytes(
        cap_kib in 1usize..16,
        ops in proptest::collection::vec(op(), 1..200),
    ) {
        let (mut tx, mut rx) = FrameRing::new(cap_kib * 1024).unwrap();
        let max = tx.max_payload();
        // Committed (visible or deferred) frames not yet read, in order.
        let mut sent: VecDeque<(u64, Vec<u8>)> = VecDeque::new();
        let mut visible = 0usize; // how many of `sent` are published
        let mut next_seq = 0u64;
        let mut read = 0u64;
        let mut unreturned = false; // deferred releases not yet returned
        for op in ops {
            match op {
                Op::Write { len, deferred } => {
                    let len = len.min(max);
                    let data = payload(next_seq, len);
                    match tx.try_reserve(len) {
                        Ok(mut f) => {
                            f.payload_mut().copy_from_slice(&data);
                            if deferred {
                                f.commit_deferred();
                            } else {
                                f.commit();
                            }
                            sent.push_back((next_seq, data));
                            next_seq += 1;
                            if !deferred {
                                visible = sent.len();
                            }
                        }
                        Err(ShmError::Full) => {
                            // Backpressure: nothing was written. Either the
                            // ring is occupied (unread frames, credit not yet
                            // returned), or the frame did not fit before the
                            // end and a padding frame was staged: once the
                            // consumer has passed it, the frame must fit.
                            if sent.is_empty() && !unreturned {
                                tx.publish();
                                prop_assert!(rx.try_peek().unwrap().is_none());
                                rx.release_pending();
                                let mut f = tx.try_reserve(len).map_err(|e| {
                                    TestCaseError::fail(format!(
                                        "an empty ring refused {len} bytes after the \
                                         consumer passed the padding: {e}"
                                    ))
                                })?;
                                f.payload_mut().copy_from_slice(&data);
                                f.commit();
                                sent.push_back((next_seq, data));
                                next_seq += 1;
                                visible = sent.len();
                            }
                        }
                        Err(e) => prop_assert!(false, "reserve: {e}"),
                    }
                }
                Op::Publish => {
                    tx.publish();
                    visible = sent.len();
                }
                Op::Read { n, deferred } => {
                    for _ in 0..n {
                        match rx.try_peek().unwrap() {
                            Some(f) => {
                                let (seq, data) = sent.pop_front().expect("a frame nobody sent");
                                prop_assert!(visible > 0, "read an unpublished frame");
                                visible -= 1;
                                prop_assert_eq!(f.kind(), FrameKind::Data);
                                prop_assert_eq!(f.seq(), seq);
                                prop_assert_eq!(f.payload(), &data[..]);
                                read += 1;
                                if deferred {
                                    f.release_deferred();
                                    unreturned = true;
                                } else {
                                    f.release();
                                    unreturned = false;
                                }
                            }
                            None => {
                                prop_assert_eq!(visible, 0, "a published frame was not seen");
                                break;
                            }
                        }
                    }
                }
                Op::ReleasePending => {
                    rx.release_pending();
                    unreturned = false;
                }
            }
        }
        // Drain: everything committed arrives after a publish.
        tx.publish();
        rx.release_pending();
        while let Some(f) = rx.try_peek().unwrap() {
            let (seq, data) = sent.pop_front().expect("a frame nobody sent");
            prop_assert_eq!(f.seq(), seq);
            prop_assert_eq!(f.payload(), &data[..]);
            read += 1;
            f.release();
        }
        prop_assert!(sent.is_empty(), "{} frames lost", sent.len());
        prop_assert_eq!(read, next_seq);
    }
}
