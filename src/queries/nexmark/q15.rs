//! q15, bidding statistics report: per day (a tumbling window of
//! `--window-ms`, default one day), how many bids there were in each price
//! rank, and how many distinct bidders and auctions took part in each (the
//! Flink nexmark suite's `q15.sql`; Beam has no such query).
//!
//! Definition: over the bids of each window `[start, start + size)`:
//! `total_bids`, `rankN_bids` (bids whose price in cents is in rank N:
//! rank 1 below 10 000, rank 2 from 10 000 up to below 1 000 000, rank 3
//! from 1 000 000 up), `total_bidders` and `rankN_bidders` (distinct bidders
//! among those bids), `total_auctions` and `rankN_auctions` (distinct
//! auctions among them). A window without bids has no row.
//!
//! Columns: `window_start_ms, window_end_ms, total_bids, rank1_bids,
//! rank2_bids, rank3_bids, total_bidders, rank1_bidders, rank2_bidders,
//! rank3_bidders, total_auctions, rank1_auctions, rank2_auctions,
//! rank3_auctions`, one row per window, in window order.
//!
//! Windows: tumbling, `--window-ms` (default 86 400 000: a day of the
//! epoch's milliseconds, so the UTC day), `--max-delay-ms`, `--idle-ms`.
//!
//! Where we differ from Flink: Flink groups by `DATE_FORMAT(time,
//! 'yyyy-MM-dd')`, an unbounded group aggregation that updates each day's
//! row at every bid; here a day is a tumbling event-time window (any size)
//! and its row is written once, final, when the watermark passes its end.
//! Its `day` string is our `window_start_ms, window_end_ms`. (Newer
//! versions of the suite group by a `customTime` column; ours is the bid's
//! `date_time`.) The suite's counts are all kept.
//!
//! Plan (Flink's "split distinct aggregation"): each bid becomes two
//! records, one for its bidder and one for its auction → keyed by (kind,
//! value) → tumbling windows: that value's bids per price rank
//! (three [`Filtered`] [`Count`]s, pre-aggregated per worker and merged at
//! the value's owner, so each distinct value of a window comes out once) →
//! keyed by window → the window's row: distinct values per rank are the
//! values with bids there, bids per rank the sums over the bidders
//! (pre-aggregated per worker again). No record holds a set of the
//! window's values: one set per window would be a single record of every
//! bidder and auction of the day, larger than a channel's frame.

use super::{bid, Cx, Shard, Spec};
use crate::queries::common::QueryOption::*;
use crate::queries::driver::sink_window_rows;
use air_operators::graph::{
    AggregateFunction, Count, Filtered, KeyedWindowExt, Tumbling, Windowed,
};
use air_operators::sources::nexmark::Bid;
use air_runtime::dataflow::Dataflow;
use serde::Serialize;

/// A day, ms: q15's and q17's default window.
pub const DAY_MS: u64 = 86_400_000;

/// q15 as the driver runs it.
pub const SPEC: Spec = Spec {
    what: "bidding statistics: per tumbling window of --window-ms (default a day), bids, \
           distinct bidders and distinct auctions, in all and per price rank (<10000, \
           <1000000, >=1000000 cents)",
    nature: "a statistics report per tumbling window",
    columns: &[
        "window_start_ms",
        "window_end_ms",
        "total_bids",
        "rank1_bids",
        "rank2_bids",
        "rank3_bids",
        "total_bidders",
        "rank1_bidders",
        "rank2_bidders",
        "rank3_bidders",
        "total_auctions",
        "rank1_auctions",
        "rank2_auctions",
        "rank3_auctions",
    ],
    order: "window",
    honoured: &[IdleMs, WindowMs, MaxDelayMs],
    window_ms: DAY_MS,
    slide_ms: 2_000,
    held_rows_per_event: |_| None,
    windowed: true,
    reads: 1,
    global: false,
    build,
};

/// The price rank of a bid (Flink's q15 and q17): 0 below 10 000 cents, 1
/// below 1 000 000, else 2.
pub(crate) fn rank(b: &Bid) -> usize {
    if b.price < 10_000 {
        0
    } else if b.price < 1_000_000 {
        1
    } else {
        2
    }
}

/// The bids, and the bids of each price rank: (all, rank 1, rank 2, rank 3).
pub(crate) type RankCounts = (
    Count,
    Filtered<Bid, fn(&Bid) -> bool, Count>,
    Filtered<Bid, fn(&Bid) -> bool, Count>,
    Filtered<Bid, fn(&Bid) -> bool, Count>,
);

/// [`RankCounts`].
pub(crate) fn rank_counts() -> RankCounts {
    let r1: fn(&Bid) -> bool = |b| rank(b) == 0;
    let r2: fn(&Bid) -> bool = |b| rank(b) == 1;
    let r3: fn(&Bid) -> bool = |b| rank(b) == 2;
    (
        Count,
        Filtered::new(r1, Count),
        Filtered::new(r2, Count),
        Filtered::new(r3, Count),
    )
}

/// A bid seen through one of its values: (kind: [`BIDDER`] or [`AUCTION`],
/// the bid).
type Seen = (u8, Bid);
/// [`Seen`] through its bidder.
const BIDDER: u8 = 0;
/// [`Seen`] through its auction.
const AUCTION: u8 = 1;

/// One value's bids in a window: (kind, value) and its bids per rank.
type ValueRow = Windowed<(u8, u64), (u64, u64, u64)>;

/// A window's row from its values' rows: `[bids, bids per rank, bidders,
/// bidders per rank, auctions, auctions per rank]` (each value comes once
/// per window; the bids are summed over the bidders). Accumulators add up.
#[derive(Clone)]
struct WindowStats;

impl AggregateFunction<ValueRow> for WindowStats {
    type Acc = [u64; 12];
    type Out = [u64; 12];
    fn create(&self) -> [u64; 12] {
        [0; 12]
    }
    #[inline]
    fn add(&self, acc: &mut [u64; 12], r: &ValueRow) {
        let (r1, r2, r3) = r.value;
        let base = if r.key.0 == BIDDER {
            for (n, c) in acc[..4].iter_mut().zip([r1 + r2 + r3, r1, r2, r3]) {
                *n += c;
            }
            4
        } else {
            8
        };
        for (n, c) in acc[base..base + 4].iter_mut().zip([1, r1, r2, r3]) {
            *n += u64::from(c > 0);
        }
    }
    fn merge(&self, acc: &mut [u64; 12], other: [u64; 12]) {
        for (n, o) in acc.iter_mut().zip(other) {
            *n += o;
        }
    }
    fn result(&self, acc: &[u64; 12]) -> [u64; 12] {
        *acc
    }
}

/// A q15 CSV row.
#[derive(Serialize)]
struct Q15Csv {
    window_start_ms: u64,
    window_end_ms: u64,
    total_bids: u64,
    rank1_bids: u64,
    rank2_bids: u64,
    rank3_bids: u64,
    total_bidders: u64,
    rank1_bidders: u64,
    rank2_bidders: u64,
    rank3_bidders: u64,
    total_auctions: u64,
    rank1_auctions: u64,
    rank2_auctions: u64,
    rank3_auctions: u64,
}

/// Bids seen through their bidder and their auction → keyed by (kind,
/// value) → per window, that value's bids per rank → keyed by window → the
/// window's statistics (both steps pre-aggregated per worker).
fn build(cx: &Cx<'_>, df: &Dataflow, shard: &Shard<'_>) {
    let size = cx.args.window();
    let r1: fn(&Seen) -> bool = |s| rank(&s.1) == 0;
    let r2: fn(&Seen) -> bool = |s| rank(&s.1) == 1;
    let r3: fn(&Seen) -> bool = |s| rank(&s.1) == 2;
    let stats = df
        .source(shard.read())
        .flat_map(bid)
        .event_time(|b: &Bid| b.date_time, cx.args.max_delay())
        .idle_after_ms(cx.args.idle_ms)
        .flat_map(|b: Bid| [(BIDDER, b), (AUCTION, b)])
        .key_by(|s: &Seen| {
            (
                s.0,
                if s.0 == BIDDER {
                    s.1.bidder
                } else {
                    s.1.auction
                },
            )
        })
        .window(Tumbling::ms(size), |s: &Seen| s.1.date_time)
        .aggregate((
            Filtered::new(r1, Count),
            Filtered::new(r2, Count),
            Filtered::new(r3, Count),
        ))
        .key_by(|r: &ValueRow| r.start)
        .window(Tumbling::ms(size), |r: &ValueRow| r.start)
        .aggregate(WindowStats)
        .map(|r| Windowed {
            start: r.start,
            end: r.end,
            key: (),
            value: r.value,
        });
    sink_window_rows(
        stats,
        |_: &Windowed<(), [u64; 12]>| (),
        |r| {
            let v = r.value;
            Q15Csv {
                window_start_ms: r.start,
                window_end_ms: r.end,
                total_bids: v[0],
                rank1_bids: v[1],
                rank2_bids: v[2],
                rank3_bids: v[3],
                total_bidders: v[4],
                rank1_bidders: v[5],
                rank2_bidders: v[6],
                rank3_bidders: v[7],
                total_auctions: v[8],
                rank1_auctions: v[9],
                rank2_auctions: v[10],
                rank3_auctions: v[11],
            }
        },
        cx.header,
        cx.to,
    );
}
