//! q18, find the last bid: per (bidder, auction), the bidder's latest bid
//! on that auction (the Flink suite's `q18`; Beam has no such query):
//! `ROW_NUMBER() OVER (PARTITION BY bidder, auction ORDER BY dateTime
//! DESC) = 1`.
//!
//! Unwindowed: the result is the final table over the whole stream, one
//! row per (bidder, auction) that bid, written at the end of the stream.
//! Columns: `auction,bidder,price,date_time_ms` (Flink's row is the whole
//! bid; `channel`, `url` and `extra` are not carried on our hot path and
//! left out); rows sorted by `auction, bidder`. No windows, no options.
//!
//! Ties: Flink's `ROW_NUMBER` over bids at the same `dateTime` picks one in
//! arrival order (not deterministic). We pick the one with the highest
//! price: with the fields we carry, bids tied on (bidder, auction,
//! dateTime, price) are the same row, so the result does not depend on the
//! order bids arrive in (nor on `--workers`). From the generator the
//! result equals Flink's when bids are in time order and no two of one
//! (bidder, auction) share a millisecond.
//!
//! Graph: bids keyed by (bidder, auction) → a keyed
//! [`process`](air_operators::graph::KeyedProcessExt::process) whose state
//! per key is its latest bid (one bid: state bounded by the keys that bid),
//! each key with one timer at `u64::MAX` that emits the row at the end.
//! Flink emits an update (retract + insert) whenever a key's latest bid
//! changes; we emit only the final table.

use super::{bid, Cx, Shard, Spec};
use crate::queries::driver::sink_window_rows;
use air_operators::graph::{process_fn, KeyedProcessExt, ProcessCx, Windowed};
use air_operators::sources::nexmark::Bid;
use air_runtime::dataflow::Dataflow;
use serde::Serialize;

/// q18 as the driver runs it.
pub const SPEC: Spec = Spec {
    what: "find the last bid: per (bidder, auction), the latest bid (ties on date_time: the \
           highest price), over the whole stream",
    nature: "a deduplication over the whole stream: no windows",
    columns: &["auction", "bidder", "price", "date_time_ms"],
    order: "auction, bidder",
    honoured: &[],
    window_ms: 10_000,
    slide_ms: 2_000,
    // One row per (bidder, auction), held to be sorted at the end: 0.29
    // per event on 2 000 000 events of the default generator, 0.27 at
    // 2 000 events/s.
    held_rows_per_event: |_| Some(0.3),
    windowed: false,
    reads: 1,
    global: false,
    build,
};

/// Whether `b` replaces `last` as its key's row: later, or as late and
/// dearer (a total order on the fields of one key).
pub fn q18_later(b: &Bid, last: &Bid) -> bool {
    (b.date_time, b.price) > (last.date_time, last.price)
}

/// A q18 CSV row.
#[derive(Serialize)]
struct Q18Csv {
    auction: u64,
    bidder: u64,
    price: u64,
    date_time_ms: u64,
}

/// Bids keyed by (bidder, auction) → the latest at the key's owner → one
/// row per key at the end of the stream.
fn build(cx: &Cx<'_>, df: &Dataflow, shard: &Shard<'_>) {
    // No event time: nothing is late, every bid counts (as in q2).
    let last = df
        .source(shard.read())
        .flat_map(bid)
        .key_by(|b: &Bid| (b.bidder, b.auction))
        .process(
            |b: &Bid| b.date_time,
            process_fn(
                |_k: &(u64, u64),
                 b: Bid,
                 _t,
                 last: &mut Option<Bid>,
                 cx: &mut ProcessCx<Windowed<(), Bid>>| {
                    match last {
                        Some(l) if !q18_later(&b, l) => {}
                        Some(l) => *l = b,
                        None => {
                            *last = Some(b);
                            // Fires at the end of the stream, once.
                            cx.register_timer(u64::MAX);
                        }
                    }
                },
            )
            .on_timer(
                |_k: &(u64, u64),
                 _t,
                 last: &mut Option<Bid>,
                 cx: &mut ProcessCx<Windowed<(), Bid>>| {
                    if let Some(b) = last.take() {
                        cx.emit(Windowed {
                            start: 0,
                            end: u64::MAX,
                            key: (),
                            value: b,
                        });
                    }
                    cx.clear_state();
                },
            ),
        );
    sink_window_rows(
        last,
        |r: &Windowed<(), Bid>| (r.value.auction, r.value.bidder),
        |r| Q18Csv {
            auction: r.value.auction,
            bidder: r.value.bidder,
            price: r.value.price,
            date_time_ms: r.value.date_time,
        },
        cx.header,
        cx.to,
    );
}
