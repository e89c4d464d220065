//! q1, currency conversion: every bid, its price in euros (Beam's
//! `Query1`: `price * 89 / 100`, integer cents rounded down).

use super::{bid_rows, Cx, Shard, Spec};
use air_operators::sources::nexmark::Bid;
use air_runtime::dataflow::{Dataflow, Head, Pipe, Stream};
use serde::Serialize;

/// q1 as the driver runs it.
pub const SPEC: Spec = Spec {
    what: "currency conversion: every bid, price × 89 / 100 (dollars → euros, integer cents, \
           rounded down)",
    nature: "a map: no windows",
    columns: &["auction", "bidder", "price", "date_time_ms"],
    order: "date_time, auction, bidder, price",
    honoured: &[],
    window_ms: 10_000,
    slide_ms: 2_000,
    // From files the order is known only at the end (a file may be out of
    // order): every bid is held to be sorted.
    held_rows_per_event: |files| files.then_some(1.0),
    windowed: false,
    reads: 1,
    global: false,
    build,
};

/// Q1's conversion: dollars to euros as Beam's Query1 does it,
/// `price * 89 / 100` in integer cents (rounded down).
pub fn q1_price(cents: u64) -> u64 {
    match cents.checked_mul(89) {
        Some(x) => x / 100,
        // Beyond 2^64 / 89 cents: exact in 128 bits (rare, and slower).
        None => (cents as u128 * 89 / 100) as u64,
    }
}

/// A bid, price in euros.
fn q1_map(b: Bid) -> Bid {
    Bid {
        price: q1_price(b.price),
        ..b
    }
}

/// Every bid, price in euros; with `--out` in the order of the time
/// (sorted per millisecond as the watermark passes it).
fn build(cx: &Cx<'_>, df: &Dataflow, shard: &Shard<'_>) {
    if cx.args.files() {
        // A file may be out of order: no watermark before its end (rows
        // sorted at the end, none dropped as late).
        let bids = df.source(shard.read_bids()).map(q1_map);
        q1_rows(bids, cx);
    } else {
        // Each worker's times never decrease: generated, or a live
        // stream in order (a bid out of order is late, dropped, counted).
        let bids = df
            .source(shard.read_bids())
            .map(q1_map)
            .event_time(|b: &Bid| b.date_time, 0);
        q1_rows(bids, cx);
    }
}

/// A q1 CSV row (the columns of [`SPEC`]).
#[derive(Serialize)]
struct Q1Csv {
    auction: u64,
    bidder: u64,
    price: u64,
    date_time_ms: u64,
}

/// Q1's rows: with an output, each bid as a row of the millisecond it
/// happened in, so the writer releases them in time order (sorted within a
/// millisecond) as the watermark passes; without, counted where they are
/// made.
fn q1_rows<H, P>(bids: Stream<H, P>, cx: &Cx<'_>)
where
    H: Head,
    P: Pipe<H::Out, Out = Bid>,
{
    bid_rows(
        bids,
        |b| b.date_time.saturating_add(1),
        |r| {
            let b = &r.value;
            (b.date_time, b.auction, b.bidder, b.price)
        },
        |r| Q1Csv {
            auction: r.value.auction,
            bidder: r.value.bidder,
            price: r.value.price,
            date_time_ms: r.value.date_time,
        },
        cx,
    );
}
