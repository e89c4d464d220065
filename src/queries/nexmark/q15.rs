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
//! Plan: bids keyed by their window → the window's counts, pre-aggregated
//! per worker: the bid counts by rank ([`Filtered`] [`Count`]s) and, for
//! bidders and auctions, a set of the values each with the ranks it was
//! seen in (merged as sets, by OR of the ranks) → one row per window.

use super::{bid, Cx, Shard, Spec};
use crate::queries::common::QueryOption::*;
use crate::queries::driver::sink_window_rows;
use air_operators::graph::{
    AggregateFunction, Count, Filtered, KeyedWindowExt, Tumbling, Windowed,
};
use air_operators::sources::nexmark::Bid;
use air_runtime::dataflow::Dataflow;
use serde::Serialize;
use std::collections::HashMap;

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

/// Distinct values of a bid's field, in all and per price rank: each value
/// with the ranks of its bids as bits (bit r: rank r + 1). Accumulators
/// merge as sets (the union, ranks OR-ed); the result is `[all, rank 1,
/// rank 2, rank 3]`.
#[derive(Clone)]
struct RankedDistinct(fn(&Bid) -> u64);

impl AggregateFunction<Bid> for RankedDistinct {
    type Acc = HashMap<u64, u8>;
    type Out = [u64; 4];
    fn create(&self) -> HashMap<u64, u8> {
        HashMap::new()
    }
    #[inline]
    fn add(&self, acc: &mut HashMap<u64, u8>, b: &Bid) {
        *acc.entry((self.0)(b)).or_insert(0) |= 1 << rank(b);
    }
    fn merge(&self, acc: &mut HashMap<u64, u8>, mut other: HashMap<u64, u8>) {
        if other.len() > acc.len() {
            std::mem::swap(acc, &mut other);
        }
        for (v, ranks) in other {
            *acc.entry(v).or_insert(0) |= ranks;
        }
    }
    fn result(&self, acc: &HashMap<u64, u8>) -> [u64; 4] {
        let mut out = [acc.len() as u64, 0, 0, 0];
        for ranks in acc.values() {
            for (r, n) in out[1..].iter_mut().enumerate() {
                *n += u64::from(ranks >> r & 1);
            }
        }
        out
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

/// Bids keyed by their tumbling window → the window's statistics,
/// pre-aggregated per worker and merged at the window's owner.
fn build(cx: &Cx<'_>, df: &Dataflow, shard: &Shard<'_>) {
    let size = cx.args.window();
    let stats = df
        .source(shard.read())
        .flat_map(bid)
        .event_time(|b: &Bid| b.date_time, cx.args.max_delay())
        .idle_after_ms(cx.args.idle_ms)
        .key_by(move |b: &Bid| b.date_time / size)
        .window(Tumbling::ms(size), |b: &Bid| b.date_time)
        .aggregate((
            rank_counts(),
            RankedDistinct(|b| b.bidder),
            RankedDistinct(|b| b.auction),
        ))
        .map(|r| {
            let ((all, r1, r2, r3), bidders, auctions) = r.value;
            let mut v = [0u64; 12];
            v[..4].copy_from_slice(&[all, r1, r2, r3]);
            v[4..8].copy_from_slice(&bidders);
            v[8..].copy_from_slice(&auctions);
            Windowed {
                start: r.start,
                end: r.end,
                key: (),
                value: v,
            }
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
