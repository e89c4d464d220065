//! q2, selection: the bids on every 123rd auction (Beam's `Query2`).

use super::{bid_rows, Cx, Shard, Spec};
use air_operators::sources::nexmark::Bid;
use air_runtime::dataflow::Dataflow;
use serde::Serialize;

/// q2 as the driver runs it.
pub const SPEC: Spec = Spec {
    what: "selection: bids whose auction % 123 == 0",
    nature: "a filter: no windows",
    columns: &["auction", "price"],
    order: "auction, price",
    honoured: &[],
    window_ms: 10_000,
    slide_ms: 2_000,
    // Sorted by auction: the order is known only at the end.
    held_rows_per_event: |_| Some(0.01),
    windowed: false,
    reads: 1,
    global: false,
    build,
};

/// Q2's selection: Beam's Query2 keeps bids whose auction id is a multiple
/// of 123 (its `auctionSkip`).
pub const Q2_AUCTION_SKIP: u64 = 123;

/// Bids on every 123rd auction.
fn q2_filter(b: &Bid) -> bool {
    b.auction % Q2_AUCTION_SKIP == 0
}

/// A q2 CSV row.
#[derive(Serialize)]
struct Q2Csv {
    auction: u64,
    price: u64,
}

/// Bids on every 123rd auction, sorted by auction: written at the end.
fn build(cx: &Cx<'_>, df: &Dataflow, shard: &Shard<'_>) {
    let bids = df.source(shard.read_bids()).filter(q2_filter);
    bid_rows(
        bids,
        |_| u64::MAX,
        |r| (r.value.auction, r.value.price),
        |r| Q2Csv {
            auction: r.value.auction,
            price: r.value.price,
        },
        cx,
    );
}
