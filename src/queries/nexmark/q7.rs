//! q7, highest bid: per tumbling window, the bid(s) at the highest price
//! (Beam's `Query7`; ties all listed).

use super::{Cx, Shard, Spec};
use crate::queries::common::QueryOption::*;
use crate::queries::driver::sink_window_rows;
use air_operators::graph::{KeyedWindowExt, MaxBy, Tumbling, Windowed};
use air_operators::sources::nexmark::Bid;
use air_runtime::dataflow::Dataflow;
use serde::Serialize;

/// q7 as the driver runs it.
pub const SPEC: Spec = Spec {
    what: "highest bid: per tumbling window of --window-ms, the bid(s) with the highest \
           price; ties all listed",
    nature: "the top bid per tumbling window",
    columns: &[
        "window_start_ms",
        "window_end_ms",
        "auction",
        "bidder",
        "price",
        "date_time_ms",
    ],
    order: "window, auction, bidder, date_time",
    honoured: &[IdleMs, WindowMs, MaxDelayMs],
    window_ms: 10_000,
    slide_ms: 2_000,
    held_rows_per_event: |_| None,
    windowed: true,
    reads: 1,
    global: false,
    build,
};

/// A q7 CSV row.
#[derive(Serialize)]
struct Q7Csv {
    window_start_ms: u64,
    window_end_ms: u64,
    auction: u64,
    bidder: u64,
    price: u64,
    date_time_ms: u64,
}

/// Bids keyed by their tumbling window → the bids at the highest price
/// ([`MaxBy`], pre-aggregated per worker).
fn build(cx: &Cx<'_>, df: &Dataflow, shard: &Shard<'_>) {
    let size = cx.args.window();
    let highest = df
        .source(shard.read_bids())
        .event_time(|b: &Bid| b.date_time, cx.args.max_delay())
        .idle_after_ms(cx.args.idle_ms)
        .key_by(move |b: &Bid| b.date_time / size)
        .window(Tumbling::ms(size), |b: &Bid| b.date_time)
        .aggregate(MaxBy::of(|b: &Bid| b.price))
        .flat_map(|r| {
            let (start, end) = (r.start, r.end);
            r.value.into_iter().map(move |b| Windowed {
                start,
                end,
                key: (),
                value: b,
            })
        });
    sink_window_rows(
        highest,
        |r: &Windowed<(), Bid>| (r.value.auction, r.value.bidder, r.value.date_time),
        |r| Q7Csv {
            window_start_ms: r.start,
            window_end_ms: r.end,
            auction: r.value.auction,
            bidder: r.value.bidder,
            price: r.value.price,
            date_time_ms: r.value.date_time,
        },
        cx.header,
        cx.to,
    );
}
