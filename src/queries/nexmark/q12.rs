//! q12, processing-time windows: per bidder, the bids they made in each
//! tumbling window of processing time (Beam's `Query12`, the Flink suite's
//! `q12`).
//!
//! Definition: every bid is stamped with the wall clock when its worker
//! reads it (ingestion time,
//! [`air_runtime::dataflow::Stream::ingestion_time`]); per bidder and
//! tumbling window `[start, start + size)` of those stamps (`--window-ms`,
//! default 10 000 = Flink's `INTERVAL '10' SECOND` and Beam's
//! `windowSizeSec` 10), the number of bids. Windows are aligned to the
//! epoch (`start` a multiple of the size) and close as the wall clock
//! passes their end, whether bids come or not; at the end of a finite
//! input the open ones close at once. A (bidder, window) without bids has
//! no row.
//!
//! Columns: `bidder,bid_count,window_start_ms,window_end_ms` (Flink's
//! `starttime`, `endtime`, ms since the Unix epoch), rows sorted by
//! `window, bidder`. Which window a bid lands in depends on when it was
//! read, so the rows differ from run to run; only their totals per bidder
//! do not (every bid is counted exactly once).
//!
//! Where Beam and Flink differ, and what we do:
//! - Windows: Beam puts bids into the global window with a trigger that
//!   fires each bidder's pane `windowSizeSec` of processing time after its
//!   first bid (discarding fired panes), so its "windows" are per bidder
//!   and not aligned; Flink's `TUMBLE` on `PROCTIME()` gives aligned
//!   windows shared by every bidder, with a start and an end. We follow
//!   Flink, with its columns (Beam emits `(bidder, count)` only).
//! - Time: Flink reads the processing time at the window operator; we
//!   stamp bids when they are read (Flink's ingestion time) and window
//!   them on the stamp after the exchange. The stamp travels with the bid,
//!   so each bid is in exactly one window whatever the exchange does, and
//!   the windows close by the ordinary watermark (one that follows the
//!   wall clock); a window closes as soon as every worker's clock passed
//!   its end, not after the last bid stamped in it crossed the exchange.
//!
//! `--max-delay-ms` and `--idle-ms` do not apply (no bid is ever late, and
//! the watermark follows the wall clock anyway).

use super::{Cx, Shard, Spec};
use crate::queries::common::QueryOption::*;
use crate::queries::driver::sink_window_rows;
use air_operators::graph::{Count, KeyedWindowExt, Tumbling, Windowed};
use air_operators::sources::nexmark::Bid;
use air_runtime::dataflow::Dataflow;
use serde::Serialize;

/// q12 as the driver runs it.
pub const SPEC: Spec = Spec {
    what: "processing-time windows: per bidder, the bids in each tumbling window of \
           --window-ms of processing time (bids stamped with the wall clock when read)",
    nature: "processing-time tumbling windows per bidder",
    columns: &["bidder", "bid_count", "window_start_ms", "window_end_ms"],
    order: "window, bidder",
    honoured: &[WindowMs],
    window_ms: 10_000,
    slide_ms: 2_000,
    held_rows_per_event: |_| None,
    windowed: true,
    reads: 1,
    global: false,
    build,
};

/// A bid and its ingestion stamp, ms.
type Stamped = (u64, Bid);

/// A q12 CSV row.
#[derive(Serialize)]
struct Q12Csv {
    bidder: u64,
    bid_count: u64,
    window_start_ms: u64,
    window_end_ms: u64,
}

/// Bids stamped with the wall clock → keyed by bidder → tumbling windows of
/// the stamps → counted (pre-aggregated per worker) → rows as the wall
/// clock passes each window's end.
fn build(cx: &Cx<'_>, df: &Dataflow, shard: &Shard<'_>) {
    let size = cx.args.window();
    let counts = df
        .source(shard.read_bids())
        .ingestion_time()
        .key_by(|s: &Stamped| s.1.bidder)
        .window(Tumbling::ms(size), |s: &Stamped| s.0)
        .aggregate(Count);
    sink_window_rows(
        counts,
        |r: &Windowed<u64, u64>| r.key,
        |r| Q12Csv {
            bidder: r.key,
            bid_count: r.value,
            window_start_ms: r.start,
            window_end_ms: r.end,
        },
        cx.header,
        cx.to,
    );
}
