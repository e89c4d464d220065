//! q4, average price per category: the mean winning price of the auctions
//! of each category that closed in each sliding window (Beam's `Query4`).
//!
//! Definition: the winning bids of [`super::winning`], each at its
//! auction's closing time (`expires`), keyed by the auction's category,
//! in sliding windows `[start, start + --window-ms)` starting every
//! `--slide-ms`; per window and category, the mean of the winning prices
//! rounded half up to whole cents (Beam's `Math.round` of the mean; we
//! compute it exactly in integers, Beam in `double`), and how many
//! auctions it averages.
//!
//! Columns: `window_start_ms`, `window_end_ms`, `category`, `avg_price`
//! (cents), `auctions`; rows sorted by window, then category. Windows:
//! Beam's defaults, 10 s sliding every 5 s (`windowSizeSec`,
//! `windowPeriodSec`), unscaled: at NEXMark's event rates an auction lasts
//! at most twice the time 100 more auctions take to come (≈ 1.7 s at 2 000
//! events/s), so a 10 s window holds many closings. `--max-delay-ms` is
//! honoured.
//!
//! Where Beam and Flink disagree: Flink's q4 is an unwindowed `GROUP BY
//! category` over every closed auction (its result is updated forever);
//! we follow Beam's sliding windows. Flink's inner query has no reserve
//! condition and takes the highest price (`MAX(B.price)`); we follow
//! Beam's winning bids (at or above the reserve). Beam emits early and
//! late panes (`isLast`) as well; we emit each window once, when the
//! watermark passes its end.

use super::winning::{winning_bids, AuctionBid};
use super::{Cx, Shard, Spec};
use crate::queries::common::QueryOption::*;
use crate::queries::driver::sink_window_rows;
use air_operators::graph::{Count, KeyedWindowExt, Sliding, Sum};
use air_runtime::dataflow::Dataflow;
use serde::Serialize;

/// q4's default slide, ms (Beam's `windowPeriodSec` = 5); the size's
/// default is the common 10 s (Beam's `windowSizeSec`).
pub const Q4_SLIDE_MS: u64 = 5_000;

/// q4 as the driver runs it.
pub const SPEC: Spec = Spec {
    what: "average price per category: per sliding window (size --window-ms, slide \
           --slide-ms) and category, the mean winning price of the auctions that closed in it",
    nature: "winning bids, then sliding windows",
    columns: &[
        "window_start_ms",
        "window_end_ms",
        "category",
        "avg_price",
        "auctions",
    ],
    order: "window, category",
    honoured: &[WindowMs, SlideMs, MaxDelayMs],
    window_ms: 10_000,
    slide_ms: Q4_SLIDE_MS,
    held_rows_per_event: |_| None,
    windowed: false,
    reads: 1,
    global: false,
    build,
};

/// A q4 CSV row.
#[derive(Serialize)]
struct Q4Csv {
    window_start_ms: u64,
    window_end_ms: u64,
    category: u64,
    avg_price: u64,
    auctions: u64,
}

/// `sum / n` rounded half up (Java's `Math.round` of the mean), exact.
pub fn mean_rounded(sum: u64, n: u64) -> u64 {
    let n = n.max(1) as u128;
    ((2 * sum as u128 + n) / (2 * n)) as u64
}

/// Winning bids → keyed by category → sliding windows of their closing
/// times, (count, sum of prices) pre-aggregated per pane and worker.
fn build(cx: &Cx<'_>, df: &Dataflow, shard: &Shard<'_>) {
    let (size, slide) = (cx.args.window(), cx.args.slide());
    let means = winning_bids(cx, df, shard)
        .key_by(|w: &AuctionBid| w.auction.category)
        .window(Sliding::ms(size, slide), AuctionBid::time)
        .aggregate((Count, Sum::of(|w: &AuctionBid| w.bid.price)));
    sink_window_rows(
        means,
        |r| r.key,
        |r| {
            let (n, sum) = r.value;
            Q4Csv {
                window_start_ms: r.start,
                window_end_ms: r.end,
                category: r.key,
                avg_price: mean_rounded(sum, n),
                auctions: n,
            }
        },
        cx.header,
        cx.to,
    );
}

#[cfg(test)]
mod tests {
    use super::mean_rounded;

    #[test]
    fn means_round_half_up() {
        assert_eq!(mean_rounded(5, 2), 3);
        assert_eq!(mean_rounded(4, 3), 1);
        assert_eq!(mean_rounded(5, 3), 2);
        assert_eq!(mean_rounded(u64::MAX, 1), u64::MAX);
    }
}
