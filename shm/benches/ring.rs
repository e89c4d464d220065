//! Criterion benchmarks of the frame ring, for developers.
//!
//! - `contended`: a producer thread (the benchmark thread) pushes 64-byte
//!   frames to a consumer thread, both spinning (`WaitPolicy::SPIN`):
//!   batched (`commit_deferred` + `publish` and `release_deferred` +
//!   `release_pending` every 52 frames, about 4 KiB) and per frame
//!   (`commit` / `release`). Timed with `iter_custom` from a `Barrier` to the
//!   consumer's last frame, like rtrb's `benches/push_pop.rs`.
//! - `uncontended`: one thread writes and reads back, so only the ring's own
//!   bookkeeping is measured (no cache line crosses cores).
//!
//! `cargo bench -p air-shm --bench ring` (add `-- --test` for one quick pass).
//! The full comparison against other channels and the machine's roofs is
//! `air bench ring`.

use air_shm::{Consumer, FrameRing, Producer, WaitPolicy};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Payload of every frame, in bytes.
const SIZE: usize = 64;
/// Data area of the rings, in bytes.
const CAPACITY: usize = 64 << 10;
/// Frames per publish / credit return in the batched runs (≈ 4 KiB of 80-byte frames).
const BATCH: u64 = 52;

fn send(tx: &mut Producer, src: &[u8; SIZE], batch: u64, i: u64) {
    let mut f = tx.reserve(SIZE).expect("reserve");
    f.payload_mut().copy_from_slice(src);
    if batch > 1 {
        f.commit_deferred();
        if (i + 1) % batch == 0 {
            tx.publish();
        }
    } else {
        f.commit();
    }
}

fn recv(rx: &mut Consumer, dest: &mut [u8; SIZE], batch: u64, i: u64) {
    let f = rx.peek().expect("peek").expect("a frame");
    dest.copy_from_slice(f.payload());
    black_box(&mut *dest);
    if batch > 1 {
        f.release_deferred();
        if (i + 1) % batch == 0 {
            rx.release_pending();
        }
    } else {
        f.release();
    }
}

fn contended(c: &mut Criterion) {
    let mut group = c.benchmark_group("contended");
    group.throughput(Throughput::Elements(1));
    for (name, batch) in [("64B batched", BATCH), ("64B per frame", 1)] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let spin = WaitPolicy::SPIN;
                let (mut tx, mut rx) = FrameRing::with_policy(CAPACITY, spin, spin).expect("ring");
                let barrier = Arc::new(Barrier::new(2));
                let b2 = barrier.clone();
                let consumer = std::thread::spawn(move || {
                    let mut dest = [0u8; SIZE];
                    b2.wait();
                    for i in 0..iters {
                        recv(&mut rx, &mut dest, batch, i);
                    }
                });
                let src = [7u8; SIZE];
                barrier.wait();
                let start = Instant::now();
                for i in 0..iters {
                    send(&mut tx, &src, batch, i);
                }
                tx.publish();
                consumer.join().expect("consumer thread");
                start.elapsed()
            })
        });
    }
    group.finish();
}

fn uncontended(c: &mut Criterion) {
    let mut group = c.benchmark_group("uncontended");
    let (mut tx, mut rx) = FrameRing::new(CAPACITY).expect("ring");
    let src = [7u8; SIZE];
    let mut dest = [0u8; SIZE];
    group.throughput(Throughput::Elements(1));
    group.bench_function("64B write+read", |b| {
        let mut i = 0;
        b.iter(|| {
            send(&mut tx, &src, 1, i);
            recv(&mut rx, &mut dest, 1, i);
            i += 1;
        })
    });
    group.throughput(Throughput::Elements(BATCH));
    group.bench_function("64B write+read, batches of 52", |b| {
        b.iter(|| {
            for i in 0..BATCH {
                send(&mut tx, &src, BATCH, i);
            }
            for i in 0..BATCH {
                recv(&mut rx, &mut dest, BATCH, i);
            }
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = contended, uncontended
}
criterion_main!(benches);
