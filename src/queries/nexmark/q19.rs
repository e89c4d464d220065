//! q19, auction top-N: per auction, its 10 bids at the highest prices (the
//! Flink suite's `q19`; Beam has no such query): `ROW_NUMBER() OVER
//! (PARTITION BY auction ORDER BY price DESC) <= 10`.
//!
//! Unwindowed: the result is the final table over the whole stream,
//! written at the end. Columns: `auction,bidder,price,date_time_ms,rank`
//! (`rank` is Flink's `rank_number`, 1 = the highest price; Flink's
//! `channel`, `url` and `extra` are not carried on our hot path and left
//! out); rows sorted by `auction, rank`. No windows, no options.
//!
//! Ties: Flink's `ROW_NUMBER` orders bids at the same price in arrival
//! order (not deterministic). We rank them by price descending, then the
//! earlier `date_time` first, then the smaller bidder: a total order on
//! the fields of one auction's bids (bids equal in all of them are the
//! same row), so the result depends neither on arrival order nor on
//! `--workers`.
//!
//! Graph: bids keyed by auction → a keyed
//! [`process`](air_operators::graph::KeyedProcessExt::process) whose state
//! per auction is its best bids so far, sorted, never more than
//! [`Q19_TOP`]; one timer per auction at `u64::MAX` emits them at the end.
//! Flink emits updates as an auction's top changes; we emit only the final
//! table.

use super::{bid, Cx, Shard, Spec};
use crate::queries::driver::sink_window_rows;
use air_operators::graph::{process_fn, KeyedProcessExt, ProcessCx, Windowed};
use air_operators::sources::nexmark::Bid;
use air_runtime::dataflow::Dataflow;
use serde::Serialize;
use std::cmp::Reverse;

/// Bids kept per auction (Flink's `rank_number <= 10`).
pub const Q19_TOP: usize = 10;

/// q19 as the driver runs it.
pub const SPEC: Spec = Spec {
    what: "auction top-N: per auction, the 10 bids at the highest prices (ties: the earlier, \
           then the smaller bidder first), over the whole stream",
    nature: "a top-N per auction over the whole stream: no windows",
    columns: &["auction", "bidder", "price", "date_time_ms", "rank"],
    order: "auction, rank",
    honoured: &[],
    window_ms: 10_000,
    slide_ms: 2_000,
    // At most 10 rows per auction, held to be sorted at the end: 0.44 per
    // event on 2 000 000 events of the default generator and at 2 000
    // events/s.
    held_rows_per_event: |_| Some(0.5),
    windowed: false,
    reads: 1,
    global: false,
    build,
};

/// The rank order of one auction's bids: ascending = better (price
/// descending, then earlier, then smaller bidder).
pub fn q19_order(b: &Bid) -> (Reverse<u64>, u64, u64) {
    (Reverse(b.price), b.date_time, b.bidder)
}

/// Adds `b` to `top` (sorted by [`q19_order`], at most [`Q19_TOP`]).
fn q19_add(top: &mut Vec<Bid>, b: Bid) {
    let o = q19_order(&b);
    let at = top.partition_point(|x| q19_order(x) <= o);
    if at < Q19_TOP {
        if top.len() == Q19_TOP {
            top.pop();
        }
        top.insert(at, b);
    }
}

/// A q19 row on its way to the writer: the bid and its rank (1-based).
type Ranked = Windowed<(), (Bid, u64)>;

/// A q19 CSV row.
#[derive(Serialize)]
struct Q19Csv {
    auction: u64,
    bidder: u64,
    price: u64,
    date_time_ms: u64,
    rank: u64,
}

/// Bids keyed by auction → its top 10 at the auction's owner → ranked rows
/// at the end of the stream.
fn build(cx: &Cx<'_>, df: &Dataflow, shard: &Shard<'_>) {
    // No event time: nothing is late, every bid counts (as in q2).
    let top = df
        .source(shard.read())
        .flat_map(bid)
        .key_by(|b: &Bid| b.auction)
        .process(
            |b: &Bid| b.date_time,
            process_fn(
                |_a: &u64, b: Bid, _t, top: &mut Vec<Bid>, cx: &mut ProcessCx<Ranked>| {
                    if top.is_empty() {
                        // Fires at the end of the stream, once.
                        cx.register_timer(u64::MAX);
                    }
                    q19_add(top, b);
                },
            )
            .on_timer(
                |_a: &u64, _t, top: &mut Vec<Bid>, cx: &mut ProcessCx<Ranked>| {
                    for (i, b) in top.drain(..).enumerate() {
                        cx.emit(Windowed {
                            start: 0,
                            end: u64::MAX,
                            key: (),
                            value: (b, i as u64 + 1),
                        });
                    }
                    cx.clear_state();
                },
            ),
        );
    sink_window_rows(
        top,
        |r: &Ranked| (r.value.0.auction, r.value.1),
        |r| Q19Csv {
            auction: r.value.0.auction,
            bidder: r.value.0.bidder,
            price: r.value.0.price,
            date_time_ms: r.value.0.date_time,
            rank: r.value.1,
        },
        cx.header,
        cx.to,
    );
}
