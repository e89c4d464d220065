//! Writes the seed inputs of the `frame_header` and `batch` targets (real
//! frame headers in real rings, real archived batches of every record type
//! the queries exchange) to `corpus/<target>/seed-*`. The `ysb_json` and
//! `campaigns` seeds come from `air gen ysb` (see the README).
//!
//! `cargo run --example seeds` (in `fuzz/`).

use air_operators::graph::Partial;
use air_operators::sources::nexmark::Bid;
use air_runtime::ExchangeData;
use air_shm::{FrameKind, KIND_PADDING};
use std::fs;
use std::path::Path;

fn write(target: &str, name: &str, bytes: &[u8]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    fs::create_dir_all(&dir).expect("corpus directory");
    fs::write(dir.join(format!("seed-{name}")), bytes).expect("seed file");
}

/// Header (len, kind, seq) + offset, capacity, published, expected sequence.
fn frame(
    len: u32,
    kind: u8,
    seq: u64,
    offset: u64,
    cap: u64,
    published: u64,
    expected: u64,
) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&len.to_le_bytes());
    v.extend_from_slice(&[kind, 0, 0, 0]);
    for w in [seq, offset, cap, published, expected] {
        v.extend_from_slice(&w.to_le_bytes());
    }
    v
}

fn batch<T: ExchangeData>(name: &str, tag: u8, items: Vec<T>) {
    let mut v = vec![tag];
    v.extend_from_slice(&T::to_bytes(&items));
    write("batch", name, &v);
}

fn main() {
    let (data, wm, end) = (
        FrameKind::Data as u8,
        FrameKind::Watermark as u8,
        FrameKind::End as u8,
    );
    write(
        "frame_header",
        "data",
        &frame(1000, data, 0, 0, 1 << 20, 1024, 0),
    );
    write(
        "frame_header",
        "watermark",
        &frame(8, wm, 41, 4064, 4096, 32, 41),
    );
    write("frame_header", "end", &frame(0, end, 7, 48, 64, 16, 7));
    write(
        "frame_header",
        "padding",
        &frame(4096 - 4000 - 16, KIND_PADDING, 0, 4000, 4096, 4096, 3),
    );
    write("frame_header", "sequence", &frame(8, data, 5, 0, 64, 64, 4));
    write(
        "frame_header",
        "past-end",
        &frame(100, data, 0, 4032, 4096, 4096, 0),
    );

    batch("u64", 0, (0..20u64).map(|i| i * 1_000_003).collect());
    batch("u64-empty", 0, Vec::<u64>::new());
    batch(
        "window-partial",
        1,
        (0..8u64)
            .map(|k| Partial {
                start: 1_700_000_000_000,
                newest: 1_700_000_000_123,
                key: k,
                acc: k + 1,
            })
            .collect(),
    );
    batch(
        "bid",
        2,
        (0..4u64)
            .map(|i| Bid {
                auction: 1000 + i,
                bidder: 2000 + i,
                price: 100 * i,
                date_time: 1_700_000_000_000 + i,
            })
            .collect(),
    );
}
