//! q13, bounded side input join: every bid enriched with the value its
//! auction maps to in a side table (the Flink suite's `q13`; Beam's
//! `BoundedSideInputJoin`).
//!
//! Definition: the side input is a table `key → value`
//! ([`super::side_input`]: `--side-input FILE`, a headerless CSV of
//! `key,value` lines; without it the Flink suite's generated table, keys
//! 0..9999 each with its own decimal as value). Each bid joins the row
//! whose key is `auction % 10000` (Flink's `mod(B.auction, 10000) =
//! S.key`); a bid whose key is not in the table is dropped (Flink's inner
//! join). The table is read once per process before the graph is built,
//! and every worker of the process looks bids up in the same copy
//! (read-only, no exchange: the join is a lookup where the bid is read).
//!
//! Columns: `auction,bidder,price,date_time_ms,value`, rows sorted by
//! `date_time, auction, bidder, price` (as q0's: from the generator they
//! stream out as the watermark passes their millisecond; from files they
//! are sorted at the end). Flink's `dateTime` is our `date_time_ms`; its
//! bid's `extra` column is not carried.
//!
//! Where Beam and Flink differ, and what we do:
//! - Key: Beam joins on `bidder % sideInputRowCount`, Flink on `auction %
//!   10000`. We follow Flink.
//! - Missing keys: Beam keeps every bid (a missing key gives a null
//!   value, a left join); Flink drops it (inner join). We follow Flink.
//! - Output: Beam puts the value into the bid's `extra` field; Flink adds
//!   a `value` column. We follow Flink.
//! - Time: Flink's `FOR SYSTEM_TIME AS OF` the bid's processing time
//!   joins a table that may change; ours is bounded and read once, so
//!   every bid sees the same table.

use super::side_input::SideInput;
use super::{bid_rows, Cx, Shard, Spec};
use crate::queries::common::QueryOption;
use air_operators::sources::nexmark::Bid;
use air_runtime::dataflow::{Dataflow, Head, Pipe, Stream};
use serde::Serialize;
use std::sync::Arc;

/// q13 as the driver runs it.
pub const SPEC: Spec = Spec {
    what: "bounded side input join: every bid whose auction % 10000 is a key of the side \
           input (--side-input FILE, CSV key,value; default keys 0..9999 → their decimal), \
           with that key's value; other bids are dropped",
    nature: "a lookup join: no windows",
    columns: &["auction", "bidder", "price", "date_time_ms", "value"],
    order: "date_time, auction, bidder, price",
    honoured: &[QueryOption::SideInput],
    window_ms: 10_000,
    slide_ms: 2_000,
    // From files the order is known only at the end: every joined bid is
    // held.
    held_rows_per_event: |files| files.then_some(1.0),
    windowed: false,
    reads: 1,
    global: false,
    build,
};

/// Bids whose key is in the side input, looked up where they are read;
/// with `--out` in time order (per millisecond as the watermark passes it;
/// from files at the end).
fn build(cx: &Cx<'_>, df: &Dataflow, shard: &Shard<'_>) {
    let side = cx
        .side_input
        .clone()
        .expect("the driver loads q13's side input");
    let keep = side.clone();
    let bids = df
        .source(shard.read_bids())
        .filter(move |b: &Bid| keep.get(b.auction).is_some());
    if cx.args.files() {
        // No watermark before a file's end: nothing dropped as late.
        q13_rows(bids, side, cx);
    } else {
        // Each worker's times never decrease: generated, or a live
        // stream in order (a bid out of order is late, dropped, counted).
        q13_rows(bids.event_time(|b: &Bid| b.date_time, 0), side, cx);
    }
}

/// A q13 CSV row (the columns of [`SPEC`]).
#[derive(Serialize)]
struct Q13Csv {
    auction: u64,
    bidder: u64,
    price: u64,
    date_time_ms: u64,
    value: String,
}

/// Each joined bid as a row of the millisecond it happened in, its value
/// looked up again where the row is written (the exchanged record stays a
/// bid); without an output, counted where it is made.
fn q13_rows<H, P>(bids: Stream<H, P>, side: Arc<SideInput>, cx: &Cx<'_>)
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
        move |r| Q13Csv {
            auction: r.value.auction,
            bidder: r.value.bidder,
            price: r.value.price,
            date_time_ms: r.value.date_time,
            value: side.get(r.value.auction).unwrap_or_default().to_string(),
        },
        cx,
    );
}
