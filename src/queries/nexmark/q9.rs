//! q9, winning bids: every closed auction with its winning bid (Beam's
//! `Query9`, which outputs `WinningBids`; see [`super::winning`] for the
//! definition and where Beam and Flink disagree).
//!
//! Columns: the auction's fields (`auction`, `seller`, `category`,
//! `initial_bid`, `reserve`, `date_time_ms`, `expires_ms`) then the winning
//! bid's (`bidder`, `price`, `bid_date_time_ms`). Rows leave as the
//! watermark reaches each auction's `expires`, sorted by `expires`, then
//! auction. No windows; `--max-delay-ms` is honoured (the bounded
//! out-of-orderness of the input). Flink's q9 SQL outputs every auction
//! field we do not carry (item name, description, …) and the bid's
//! `channel`, `url` and `extra`: we have only the compact fields.

use super::winning::{winning_bids, AuctionBid};
use super::{Cx, Shard, Spec};
use crate::queries::common::QueryOption::*;
use crate::queries::driver::sink_window_rows;
use air_operators::graph::Windowed;
use air_runtime::dataflow::Dataflow;
use serde::Serialize;

/// q9 as the driver runs it.
pub const SPEC: Spec = Spec {
    what: "winning bids: each closed auction and its highest bid made while it was open, at or \
           above the reserve (ties: the earliest, then the smallest bidder)",
    nature: "a per-auction join that closes at each auction's expiry: no windows",
    columns: &[
        "auction",
        "seller",
        "category",
        "initial_bid",
        "reserve",
        "date_time_ms",
        "expires_ms",
        "bidder",
        "price",
        "bid_date_time_ms",
    ],
    order: "expires, auction",
    honoured: &[MaxDelayMs],
    window_ms: 10_000,
    slide_ms: 2_000,
    held_rows_per_event: |_| None,
    windowed: false,
    reads: 1,
    global: false,
    build,
};

/// A q9 CSV row.
#[derive(Serialize)]
struct Q9Csv {
    auction: u64,
    seller: u64,
    category: u64,
    initial_bid: u64,
    reserve: u64,
    date_time_ms: u64,
    expires_ms: u64,
    bidder: u64,
    price: u64,
    bid_date_time_ms: u64,
}

/// The winning bids, each a row of the "window" ending at its auction's
/// `expires` (released as the watermark reaches it).
fn build(cx: &Cx<'_>, df: &Dataflow, shard: &Shard<'_>) {
    let rows = winning_bids(cx, df, shard).map(|w: AuctionBid| Windowed {
        start: w.time(),
        end: w.time(),
        key: w.auction.id,
        value: w,
    });
    sink_window_rows(
        rows,
        |r| r.key,
        |r| {
            let (a, b) = (r.value.auction, r.value.bid);
            Q9Csv {
                auction: a.id,
                seller: a.seller,
                category: a.category,
                initial_bid: a.initial_bid,
                reserve: a.reserve,
                date_time_ms: a.date_time,
                expires_ms: a.expires,
                bidder: b.bidder,
                price: b.price,
                bid_date_time_ms: b.date_time,
            }
        },
        cx.header,
        cx.to,
    );
}
