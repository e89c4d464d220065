//! q5, hot items: per sliding window, the auction(s) with the most bids
//! (Beam's `Query5`; ties all listed).

use super::{Cx, Shard, Spec};
use crate::queries::common::QueryOption::*;
use crate::queries::driver::sink_window_rows;
use air_operators::graph::{Count, KeyedWindowExt, MaxByWindowExt, Sliding, Windowed};
use air_operators::sources::nexmark::Bid;
use air_runtime::dataflow::Dataflow;
use serde::Serialize;

/// q5 as the driver runs it.
pub const SPEC: Spec = Spec {
    what: "hot items: per sliding window (size --window-ms, slide --slide-ms), the \
           auction(s) with the most bids; ties all listed",
    nature: "sliding windows, then the top auction per window",
    columns: &["window_start_ms", "window_end_ms", "auction", "bids"],
    order: "window, auction",
    honoured: &[IdleMs, WindowMs, SlideMs, MaxDelayMs],
    window_ms: 10_000,
    slide_ms: 2_000,
    held_rows_per_event: |_| None,
    windowed: true,
    reads: 1,
    global: true,
    build,
};

/// A q5 CSV row.
#[derive(Serialize)]
struct Q5Csv {
    window_start_ms: u64,
    window_end_ms: u64,
    auction: u64,
    bids: u64,
}

/// Bids per auction and sliding window (pre-aggregated per pane and
/// worker), then the hottest auctions of each window
/// ([`MaxByWindowExt::max_by_window`]: each worker sends only its own
/// hottest to the window's owner).
fn build(cx: &Cx<'_>, df: &Dataflow, shard: &Shard<'_>) {
    let (size, slide) = (cx.args.window(), cx.args.slide());
    let hottest = df
        .source(shard.read_bids())
        .event_time(|b: &Bid| b.date_time, cx.args.max_delay())
        .idle_after_ms(cx.args.idle_ms)
        .key_by(|b: &Bid| b.auction)
        .window(Sliding::ms(size, slide), |b: &Bid| b.date_time)
        .latency_per_window()
        .aggregate(Count)
        .key_by(|r: &Windowed<u64, u64>| r.start)
        .max_by_window(|r: &Windowed<u64, u64>| r.value);
    sink_window_rows(
        hottest,
        |r| r.key,
        |r| Q5Csv {
            window_start_ms: r.start,
            window_end_ms: r.end,
            auction: r.key,
            bids: r.value,
        },
        cx.header,
        cx.to,
    );
}
