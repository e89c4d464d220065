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
//! Plan (Flink's "split distinct aggregation", [`split_distinct`], shared
//! with q16 which groups by channel): the bids go two ways. Keyed by
//! window only → the window's bids per price rank. And each bid as two
//! small records, one for its bidder and one for its auction → keyed by
//! (kind, value) → tumbling windows: the price ranks of that value's bids
//! (a byte per distinct value, each record at the value's owner, so each
//! distinct value of a window comes out once). Both
//! → keyed by window → the window's row: distinct values per rank are the
//! values with bids there (pre-aggregated per worker again). No record
//! holds a set of the window's values: one set per window would be a
//! single record of every bidder and auction of the day, larger than a
//! channel's frame.

use super::{Cx, Shard, Spec};
use crate::queries::common::QueryOption::*;
use crate::queries::driver::sink_window_rows;
use air_operators::graph::{
    AggregateFunction, Count, Filtered, KeyedWindowExt, Partial, Tumbling, Windowed,
};
use air_operators::sources::nexmark::Bid;
use air_runtime::dataflow::{Dataflow, Head, Identity, Pipe, Stream};
use air_runtime::Record;
use serde::Serialize;
use std::hash::Hash;
use std::marker::PhantomData;

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
    price_rank(b.price)
}

/// The price rank of `price` cents: 0 below 10 000, 1 below 1 000 000,
/// else 2.
fn price_rank(price: u64) -> usize {
    if price < 10_000 {
        0
    } else if price < 1_000_000 {
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

/// What the split distinct plan ([`split_distinct`]) reads of a record:
/// its bid's bidder, auction, price and time.
pub(crate) trait StatBid: Record {
    /// The record's bid.
    fn bid(&self) -> &Bid;
}

impl StatBid for Bid {
    #[inline(always)]
    fn bid(&self) -> &Bid {
        self
    }
}

/// A value of a bid: [`BIDDER`] or [`AUCTION`].
const BIDDER: u8 = 0;
/// A value of a bid: [`BIDDER`] or [`AUCTION`].
const AUCTION: u8 = 1;

/// A bid seen through one of its values (its bidder or its auction), as
/// the distinct stage of [`split_distinct`] keeps it: a few words, not the
/// record.
#[derive(Clone, Copy, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub(crate) struct ValueSeen<G> {
    /// [`BIDDER`] or [`AUCTION`].
    kind: u8,
    /// The bid's price rank (0, 1, 2: [`price_rank`]).
    rank: u8,
    /// The bid's group.
    group: G,
    /// The bidder or the auction.
    value: u64,
    /// The bid's time, ms.
    time: u64,
}

/// The price ranks a value's bids had in a window: bit `r` for rank `r`
/// (0, 1, 2). The accumulator of each (kind, group, value) of
/// [`split_distinct`]: one byte.
#[derive(Clone, Copy, Debug)]
struct RankMask;

impl<G: 'static> AggregateFunction<ValueSeen<G>> for RankMask {
    type Acc = u8;
    type Out = u8;
    fn create(&self) -> u8 {
        0
    }
    #[inline(always)]
    fn add(&self, acc: &mut u8, s: &ValueSeen<G>) {
        *acc |= 1 << s.rank;
    }
    fn merge(&self, acc: &mut u8, other: u8) {
        *acc |= other;
    }
    fn result(&self, acc: &u8) -> u8 {
        *acc
    }
}

/// A group's bids per price rank (`[rank 1, rank 2, rank 3]`).
#[derive(Clone, Copy, Debug)]
struct RankBids;

impl<T: StatBid> AggregateFunction<T> for RankBids {
    type Acc = [u64; 3];
    type Out = [u64; 3];
    fn create(&self) -> [u64; 3] {
        [0; 3]
    }
    #[inline(always)]
    fn add(&self, acc: &mut [u64; 3], t: &T) {
        acc[price_rank(t.bid().price)] += 1;
    }
    fn merge(&self, acc: &mut [u64; 3], other: [u64; 3]) {
        for (a, o) in acc.iter_mut().zip(other) {
            *a += o;
        }
    }
    fn result(&self, acc: &[u64; 3]) -> [u64; 3] {
        *acc
    }
}

/// A row of the first stage of [`split_distinct`] on its way to its
/// group's row: a group's bids per rank with the extra statistic, or one
/// distinct value (kind, rank mask).
#[derive(Clone)]
enum Part<E> {
    /// The group's bids per price rank and its extra statistic.
    Bids([u64; 3], E),
    /// One distinct value of the group: its kind ([`BIDDER`] or
    /// [`AUCTION`]) and the ranks of its bids ([`RankMask`]).
    Value(u8, u8),
}

/// A group's statistics in a window: `[bids, bids per rank, bidders,
/// bidders per rank, auctions, auctions per rank]` and the extra statistic
/// `E` over its bids.
pub(crate) type SplitStats<E> = ([u64; 12], E);

/// A group's window from its [`Part`]s (one per distinct value, and the
/// bids per rank with the extra statistic, merged by `X`). Accumulators
/// add up.
struct GroupStats<X, T> {
    extra: X,
    _t: PhantomData<fn(&T)>,
}

impl<X: Clone, T> Clone for GroupStats<X, T> {
    fn clone(&self) -> Self {
        GroupStats {
            extra: self.extra.clone(),
            _t: PhantomData,
        }
    }
}

impl<G, T, X, E> AggregateFunction<Windowed<G, Part<E>>> for GroupStats<X, T>
where
    G: 'static,
    T: 'static,
    E: Record,
    SplitStats<E>: Record,
    X: AggregateFunction<T, Acc = E, Out = E>,
{
    type Acc = SplitStats<E>;
    type Out = SplitStats<E>;
    fn create(&self) -> SplitStats<E> {
        ([0; 12], self.extra.create())
    }
    #[inline]
    fn add(&self, acc: &mut SplitStats<E>, r: &Windowed<G, Part<E>>) {
        match &r.value {
            Part::Bids([r1, r2, r3], extra) => {
                for (n, c) in acc.0[..4].iter_mut().zip([r1 + r2 + r3, *r1, *r2, *r3]) {
                    *n += c;
                }
                self.extra.merge(&mut acc.1, extra.clone());
            }
            Part::Value(kind, mask) => {
                let base = if *kind == BIDDER { 4 } else { 8 };
                acc.0[base] += 1;
                for (r, n) in acc.0[base + 1..base + 4].iter_mut().enumerate() {
                    *n += u64::from(mask >> r & 1);
                }
            }
        }
    }
    fn merge(&self, acc: &mut SplitStats<E>, other: SplitStats<E>) {
        for (n, o) in acc.0.iter_mut().zip(other.0) {
            *n += o;
        }
        self.extra.merge(&mut acc.1, other.1);
    }
    fn result(&self, acc: &SplitStats<E>) -> SplitStats<E> {
        acc.clone()
    }
}

/// No extra statistic (q15's): [`split_distinct`]'s `extra`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NoExtra;

impl<In> AggregateFunction<In> for NoExtra {
    type Acc = ();
    type Out = ();
    fn create(&self) {}
    #[inline(always)]
    fn add(&self, _acc: &mut (), _x: &In) {}
    fn merge(&self, _acc: &mut (), _other: ()) {}
    fn result(&self, _acc: &()) {}
}

/// Flink's split distinct aggregation, the plan of q15 and q16: per
/// group (`group(bid)`: q15 `()`, q16 the channel's code) and tumbling
/// window of `size` ms of the bids' times, [`SplitStats`] with `extra` (an
/// aggregate whose accumulator is its result, e.g. q16's latest minute)
/// over the group's bids. The bids go two ways: keyed by group → tumbling
/// windows: the group's bids per price rank and `extra` (a table of
/// groups); and each bid as two small records, one for its bidder and one
/// for its auction → keyed by (kind, group, value) → tumbling windows: the
/// price ranks of that value's bids (one byte, [`RankMask`]), each record
/// at the value's owner (not pre-aggregated: most values of a day are
/// seen once or twice, and pre-aggregation would keep each in a worker's
/// table and again in its owner's), so each distinct value of a window
/// comes out once. Both → keyed by (window, group) → the group's row:
/// distinct values per rank are the values with bids there
/// (pre-aggregated per worker). Rows are keyed by (window start, group).
///
/// Cost: the distinct stage's table holds a (kind, group, value) key and a
/// byte per distinct value (plus the window's slot), so `G` should be small
/// (an id, not a string). That stage measures latency once per window
/// ([`latency_per_window`](air_operators::graph::WindowedStream::latency_per_window)):
/// its rows are not the query's.
pub(crate) fn split_distinct<H, P, T, G, X, E>(
    bids: Stream<H, P>,
    size: u64,
    group: fn(&T) -> G,
    extra: X,
) -> Stream<impl Head<Out = Windowed<(u64, G), SplitStats<E>>>, Identity>
where
    H: Head,
    P: Pipe<H::Out, Out = T>,
    T: StatBid,
    G: Record + Hash + Eq,
    E: Record,
    X: AggregateFunction<T, Acc = E, Out = E>,
    (u8, G, u64): Record,
    (u64, G): Record,
    ([u64; 3], E): Record,
    SplitStats<E>: Record,
    Partial<G, ([u64; 3], E)>: Record,
    Partial<(u8, G, u64), u8>: Record,
    ValueSeen<G>: Record,
    Partial<(u64, G), SplitStats<E>>: Record,
{
    let (values, groups) = bids.tee();
    let values = values
        .flat_map(move |t: T| {
            let b = t.bid();
            let (rank, time) = (price_rank(b.price) as u8, b.date_time);
            let g = group(&t);
            let seen = |kind, group, value| ValueSeen {
                kind,
                rank,
                group,
                value,
                time,
            };
            [
                seen(BIDDER, g.clone(), b.bidder),
                seen(AUCTION, g, b.auction),
            ]
        })
        .key_by(|s: &ValueSeen<G>| (s.kind, s.group.clone(), s.value))
        .window(Tumbling::ms(size), |s: &ValueSeen<G>| s.time)
        .latency_per_window()
        .aggregate_every_event(RankMask)
        .map(|r| Windowed {
            start: r.start,
            end: r.end,
            key: r.key.1,
            value: Part::Value(r.key.0, r.value),
        });
    let groups = groups
        .key_by(move |t: &T| group(t))
        .window(Tumbling::ms(size), |t: &T| t.bid().date_time)
        .aggregate((RankBids, extra.clone()))
        .map(|r| Windowed {
            start: r.start,
            end: r.end,
            key: r.key,
            value: Part::Bids(r.value.0, r.value.1),
        });
    groups
        .union(values)
        .key_by(|r: &Windowed<G, Part<E>>| (r.start, r.key.clone()))
        .window(Tumbling::ms(size), |r: &Windowed<G, Part<E>>| r.start)
        .aggregate(GroupStats {
            extra,
            _t: PhantomData,
        })
}

/// The twelve count columns of [`SplitStats`], in the order of q15's and
/// q16's CSV rows (`total_bids` … `rank3_auctions`).
#[derive(Serialize)]
pub(crate) struct SplitCsv {
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

impl SplitCsv {
    /// The columns of `v`.
    pub(crate) fn of(v: &[u64; 12]) -> SplitCsv {
        SplitCsv {
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
    }
}

/// A q15 CSV row.
#[derive(Serialize)]
struct Q15Csv {
    window_start_ms: u64,
    window_end_ms: u64,
    /// Written as its twelve columns.
    counts: SplitCsv,
}

/// Bids → [`split_distinct`] with one group (no extra statistic) → a row
/// per window.
fn build(cx: &Cx<'_>, df: &Dataflow, shard: &Shard<'_>) {
    let bids = df
        .source(shard.read_bids())
        .event_time(|b: &Bid| b.date_time, cx.args.max_delay())
        .idle_after_ms(cx.args.idle_ms);
    let stats = split_distinct(bids, cx.args.window(), |_: &Bid| (), NoExtra).map(|r| Windowed {
        start: r.start,
        end: r.end,
        key: (),
        value: r.value.0,
    });
    sink_window_rows(
        stats,
        |_: &Windowed<(), [u64; 12]>| (),
        |r| Q15Csv {
            window_start_ms: r.start,
            window_end_ms: r.end,
            counts: SplitCsv::of(&r.value),
        },
        cx.header,
        cx.to,
    );
}
