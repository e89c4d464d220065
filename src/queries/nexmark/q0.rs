//! q0, pass-through: every bid as it came, no change (the Flink suite's
//! `q0`: `SELECT auction, bidder, price, dateTime, extra FROM bid`).
//!
//! Columns: `auction,bidder,price,date_time_ms`, rows sorted by
//! `date_time, auction, bidder, price`. No windows, no options.
//!
//! Beam and Flink differ: Beam's `Query0` passes every event (persons,
//! auctions and bids) through a serialization round trip and emits each
//! unchanged, so its output mixes three record shapes; the Flink suite's
//! `q0` selects every bid's columns. We follow Flink (one CSV shape), with
//! the columns we carry: Flink's `extra` (padding, not on our hot path)
//! is left out. Like q1, rows from the generator stream out as the
//! watermark passes their millisecond; from files (which may be out of
//! order) they are sorted at the end.

use super::{bid_rows, Cx, Shard, Spec};
use air_operators::sources::nexmark::Bid;
use air_runtime::dataflow::{Dataflow, Head, Pipe, Stream};
use serde::Serialize;

/// q0 as the driver runs it.
pub const SPEC: Spec = Spec {
    what: "pass-through: every bid's auction, bidder, price and time (the Flink suite's q0, without `extra`)",
    nature: "a pass-through: no windows",
    columns: &["auction", "bidder", "price", "date_time_ms"],
    order: "date_time, auction, bidder, price",
    honoured: &[],
    window_ms: 10_000,
    slide_ms: 2_000,
    // From files the order is known only at the end: every bid is held.
    held_rows_per_event: |files| files.then_some(1.0),
    windowed: false,
    reads: 1,
    global: false,
    build,
};

/// Every bid; with `--out` in time order (sorted per millisecond as the
/// watermark passes it; from files at the end).
fn build(cx: &Cx<'_>, df: &Dataflow, shard: &Shard<'_>) {
    if cx.args.files() {
        // No watermark before a file's end: nothing dropped as late.
        q0_rows(df.source(shard.read_bids()), cx);
    } else {
        // Each worker's times never decrease: generated, or a live
        // stream in order (a bid out of order is late, dropped, counted).
        let bids = df
            .source(shard.read_bids())
            .event_time(|b: &Bid| b.date_time, 0);
        q0_rows(bids, cx);
    }
}

/// A q0 CSV row (the columns of [`SPEC`]).
#[derive(Serialize)]
struct Q0Csv {
    auction: u64,
    bidder: u64,
    price: u64,
    date_time_ms: u64,
}

/// Each bid as a row of the millisecond it happened in (released in time
/// order, sorted within a millisecond); without an output, counted where
/// it is made.
fn q0_rows<H, P>(bids: Stream<H, P>, cx: &Cx<'_>)
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
        |r| Q0Csv {
            auction: r.value.auction,
            bidder: r.value.bidder,
            price: r.value.price,
            date_time_ms: r.value.date_time,
        },
        cx,
    );
}
