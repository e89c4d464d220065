//! q17, auction statistics report: per auction and day (a tumbling window
//! of `--window-ms`, default one day), its bids in all and per price rank,
//! and the lowest, highest, mean and total price (the Flink nexmark suite's
//! `q17.sql`; Beam has no such query).
//!
//! Definition: over the bids of each (auction, window `[start, start +
//! size)`) with at least one bid: `total_bids`, `rankN_bids` (the price
//! ranks of q15: below 10 000 cents, below 1 000 000, the rest),
//! `min_price`, `max_price`, `sum_price` (cents; the sum wraps at 2^64,
//! which NEXMark prices never reach), and `avg_price = sum_price /
//! total_bids` rounded down: an integer, as Flink's `AVG` of a `BIGINT`
//! column is a `BIGINT` (integer division; prices are never negative, so
//! truncation is rounding down).
//!
//! Columns: `window_start_ms, window_end_ms, auction, total_bids,
//! rank1_bids, rank2_bids, rank3_bids, min_price, max_price, avg_price,
//! sum_price`, sorted by window, then auction.
//!
//! Windows: tumbling, `--window-ms` (default 86 400 000: the UTC day),
//! `--max-delay-ms`, `--idle-ms`.
//!
//! Where we differ from Flink: Flink groups by `(auction,
//! DATE_FORMAT(dateTime, 'yyyy-MM-dd'))`, an unbounded group aggregation
//! that updates each row at every bid; here a day is a tumbling event-time
//! window (any size) and each row is written once, final, when the
//! watermark passes the window's end. Flink's `day` string is our
//! `window_start_ms, window_end_ms`, and the window leads the columns (as in
//! every windowed query here) where Flink's row starts with `auction`.
//!
//! Plan: bids keyed by auction → tumbling windows, aggregated per worker
//! (the counts by rank are [`Filtered`] [`Count`]s; [`Min`], [`Max`],
//! [`Sum`]) and merged at the auction's owner → one row per (auction,
//! window).

use super::q15::{rank_counts, RankCounts};
use super::{Cx, Shard, Spec};
use crate::queries::common::QueryOption::*;
use crate::queries::driver::sink_window_rows;
use air_operators::graph::{KeyedWindowExt, Max, Min, Sum, Tumbling, Windowed};
use air_operators::sources::nexmark::Bid;
use air_runtime::dataflow::Dataflow;
use serde::Serialize;

/// q17 as the driver runs it.
pub const SPEC: Spec = Spec {
    what: "auction statistics: per auction and tumbling window of --window-ms (default a \
           day), its bids in all and per price rank, and the min, max, mean (rounded down) \
           and total price",
    nature: "a statistics report per auction and tumbling window",
    columns: &[
        "window_start_ms",
        "window_end_ms",
        "auction",
        "total_bids",
        "rank1_bids",
        "rank2_bids",
        "rank3_bids",
        "min_price",
        "max_price",
        "avg_price",
        "sum_price",
    ],
    order: "window, auction",
    honoured: &[IdleMs, WindowMs, MaxDelayMs],
    window_ms: super::q15::DAY_MS,
    slide_ms: 2_000,
    held_rows_per_event: |_| None,
    windowed: true,
    reads: 1,
    global: false,
    build,
};

/// A q17 CSV row.
#[derive(Serialize)]
struct Q17Csv {
    window_start_ms: u64,
    window_end_ms: u64,
    auction: u64,
    total_bids: u64,
    rank1_bids: u64,
    rank2_bids: u64,
    rank3_bids: u64,
    min_price: u64,
    max_price: u64,
    avg_price: u64,
    sum_price: u64,
}

/// (counts by rank, min, max, sum of the prices).
type Stats = (
    RankCounts,
    Min<Bid, u64, fn(&Bid) -> u64>,
    Max<Bid, u64, fn(&Bid) -> u64>,
    Sum<Bid, u64, fn(&Bid) -> u64>,
);

/// Bids keyed by auction → tumbling windows, the statistics pre-aggregated
/// per worker and merged at the auction's owner.
fn build(cx: &Cx<'_>, df: &Dataflow, shard: &Shard<'_>) {
    let size = cx.args.window();
    let price: fn(&Bid) -> u64 = |b| b.price;
    let stats: Stats = (
        rank_counts(),
        Min::of(price),
        Max::of(price),
        Sum::of(price),
    );
    let rows = df
        .source(shard.read_bids())
        .event_time(|b: &Bid| b.date_time, cx.args.max_delay())
        .idle_after_ms(cx.args.idle_ms)
        .key_by(|b: &Bid| b.auction)
        .window(Tumbling::ms(size), |b: &Bid| b.date_time)
        .aggregate(stats)
        .map(|r| {
            // A window of a key has at least one bid: min and max are its.
            let ((all, r1, r2, r3), min, max, sum) = r.value;
            Windowed {
                start: r.start,
                end: r.end,
                key: r.key,
                value: [all, r1, r2, r3, min, max, sum / all.max(1), sum],
            }
        });
    sink_window_rows(
        rows,
        |r: &Windowed<u64, [u64; 8]>| r.key,
        |r| {
            let v = r.value;
            Q17Csv {
                window_start_ms: r.start,
                window_end_ms: r.end,
                auction: r.key,
                total_bids: v[0],
                rank1_bids: v[1],
                rank2_bids: v[2],
                rank3_bids: v[3],
                min_price: v[4],
                max_price: v[5],
                avg_price: v[6],
                sum_price: v[7],
            }
        },
        cx.header,
        cx.to,
    );
}
