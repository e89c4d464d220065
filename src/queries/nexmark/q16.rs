//! q16, channel statistics report: per channel and day (a tumbling window
//! of `--window-ms`, default one day), how many bids there were in each
//! price rank, and how many distinct bidders and auctions took part in each
//! (the Flink nexmark suite's `q16.sql`: q15 per channel; Beam has no such
//! query). Reads full events ([`Shard::read_full`]): the bid's `channel`.
//!
//! Definition: over the bids of each channel and window `[start, start +
//! size)`: `minute`, the latest `HH:mm` (UTC) of those bids' times
//! (Flink's `max(DATE_FORMAT(dateTime, 'HH:mm'))`: the latest minute of
//! the day, whatever the day); `total_bids` and `rankN_bids` (bids whose
//! price in cents is in rank N: rank 1 below 10 000, rank 2 from 10 000 up
//! to below 1 000 000, rank 3 from 1 000 000 up), `total_bidders` and
//! `rankN_bidders` (distinct bidders among them), `total_auctions` and
//! `rankN_auctions` (distinct auctions among them). A channel without bids
//! in a window has no row there.
//!
//! Columns: `window_start_ms, window_end_ms, channel, minute, total_bids,
//! rank1_bids, rank2_bids, rank3_bids, total_bidders, rank1_bidders,
//! rank2_bidders, rank3_bidders, total_auctions, rank1_auctions,
//! rank2_auctions, rank3_auctions`; rows by window, then channel (byte
//! order).
//!
//! Windows: tumbling, `--window-ms` (default 86 400 000: a day of the
//! epoch's milliseconds, so the UTC day), `--max-delay-ms`, `--idle-ms`.
//!
//! Where we differ from Flink: as q15 ([`super::q15`]): Flink's unbounded
//! group aggregation by `DATE_FORMAT(dateTime, 'yyyy-MM-dd')` updates each
//! (channel, day) row at every bid; here a day is a tumbling event-time
//! window (any size) whose rows are written once, final, when the
//! watermark passes its end, and its `day` string is our
//! `window_start_ms, window_end_ms`.
//!
//! Plan (q15's split distinct aggregation, per channel): each full bid is
//! projected to (channel as an inline [`Word`], bidder, auction, price,
//! time) and seen twice, through its bidder and through its auction →
//! keyed by (kind, channel, value) → tumbling windows: that value's bids
//! per price rank ([`Filtered`] [`Count`]s) and latest minute ([`Max`]),
//! pre-aggregated per worker → keyed by (window, channel) → the row:
//! distinct values per rank are the values with bids there, bids per rank
//! the sums over the bidders (pre-aggregated per worker again).

use super::full::full_bid;
use super::{Cx, Shard, Spec};
use crate::queries::common::QueryOption::*;
use crate::queries::driver::sink_window_rows;
use air_operators::graph::{
    AggregateFunction, Count, Filtered, KeyedWindowExt, Max, Tumbling, Windowed,
};
use air_operators::sources::nexmark::{EventKind, FullBid};
use air_operators::sources::text::Word;
use air_runtime::dataflow::Dataflow;
use serde::Serialize;

/// q16 as the driver runs it.
pub const SPEC: Spec = Spec {
    what: "channel statistics: per channel and tumbling window of --window-ms (default a \
           day), the latest minute (UTC HH:mm), bids, distinct bidders and distinct auctions, \
           in all and per price rank (<10000, <1000000, >=1000000 cents)",
    nature: "a statistics report per channel and tumbling window",
    columns: &[
        "window_start_ms",
        "window_end_ms",
        "channel",
        "minute",
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
    order: "window, channel",
    honoured: &[IdleMs, WindowMs, MaxDelayMs],
    window_ms: super::q15::DAY_MS,
    slide_ms: 2_000,
    held_rows_per_event: |_| None,
    windowed: true,
    reads: 1,
    global: false,
    build,
};

/// The fields of a bid q16 reads.
#[derive(Clone, Debug, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct ChannelBid {
    channel: Word,
    bidder: u64,
    auction: u64,
    price: u64,
    date_time: u64,
}

/// A bid seen through one of its values: (kind: [`BIDDER`] or [`AUCTION`],
/// the bid).
type Seen = (u8, ChannelBid);
/// [`Seen`] through its bidder.
const BIDDER: u8 = 0;
/// [`Seen`] through its auction.
const AUCTION: u8 = 1;

/// One value's bids in a channel's window: (kind, channel, value) and its
/// bids per rank and latest minute of the day.
type ValueRow = Windowed<(u8, Word, u64), (u64, u64, u64, Option<u64>)>;

/// The minute of the UTC day of `ms` since the epoch (`0..1440`).
fn minute_of_day(ms: u64) -> u64 {
    ms / 60_000 % 1440
}

/// A channel's row from its values' rows: `[bids, bids per rank, bidders,
/// bidders per rank, auctions, auctions per rank, 1 + the latest minute]`
/// (each value comes once per window; the bids are summed over the
/// bidders). Accumulators add up (the minute: the larger).
#[derive(Clone)]
struct ChannelStats;

impl AggregateFunction<ValueRow> for ChannelStats {
    type Acc = [u64; 13];
    type Out = [u64; 13];
    fn create(&self) -> [u64; 13] {
        [0; 13]
    }
    #[inline]
    fn add(&self, acc: &mut [u64; 13], r: &ValueRow) {
        let (r1, r2, r3, minute) = r.value;
        let base = if r.key.0 == BIDDER {
            for (n, c) in acc[..4].iter_mut().zip([r1 + r2 + r3, r1, r2, r3]) {
                *n += c;
            }
            acc[12] = acc[12].max(minute.map_or(0, |m| m + 1));
            4
        } else {
            8
        };
        for (n, c) in acc[base..base + 4].iter_mut().zip([1, r1, r2, r3]) {
            *n += u64::from(c > 0);
        }
    }
    fn merge(&self, acc: &mut [u64; 13], other: [u64; 13]) {
        for (n, o) in acc[..12].iter_mut().zip(other) {
            *n += o;
        }
        acc[12] = acc[12].max(other[12]);
    }
    fn result(&self, acc: &[u64; 13]) -> [u64; 13] {
        *acc
    }
}

/// A q16 CSV row.
#[derive(Serialize)]
struct Q16Csv {
    window_start_ms: u64,
    window_end_ms: u64,
    channel: Word,
    minute: String,
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

/// The price rank of a bid (q15's).
fn rank(s: &Seen) -> usize {
    super::q15::rank(&air_operators::sources::nexmark::Bid {
        auction: s.1.auction,
        bidder: s.1.bidder,
        price: s.1.price,
        date_time: s.1.date_time,
    })
}

/// Full bids projected → seen through their bidder and their auction →
/// keyed by (kind, channel, value) → per window, that value's bids per
/// rank and latest minute → keyed by (window, channel) → the channel's
/// statistics (both steps pre-aggregated per worker).
fn build(cx: &Cx<'_>, df: &Dataflow, shard: &Shard<'_>) {
    let size = cx.args.window();
    let r1: fn(&Seen) -> bool = |s| rank(s) == 0;
    let r2: fn(&Seen) -> bool = |s| rank(s) == 1;
    let r3: fn(&Seen) -> bool = |s| rank(s) == 2;
    let stats = df
        .source(shard.read_full_of(&[EventKind::Bid]))
        .flat_map(|e| {
            full_bid(e).map(|b: FullBid| ChannelBid {
                channel: Word::new(&b.channel),
                bidder: b.bidder,
                auction: b.auction,
                price: b.price,
                date_time: b.date_time,
            })
        })
        .event_time(|b: &ChannelBid| b.date_time, cx.args.max_delay())
        .idle_after_ms(cx.args.idle_ms)
        .flat_map(|b: ChannelBid| [(BIDDER, b.clone()), (AUCTION, b)])
        .key_by(|s: &Seen| {
            let value = if s.0 == BIDDER {
                s.1.bidder
            } else {
                s.1.auction
            };
            (s.0, s.1.channel.clone(), value)
        })
        .window(Tumbling::ms(size), |s: &Seen| s.1.date_time)
        .aggregate((
            Filtered::new(r1, Count),
            Filtered::new(r2, Count),
            Filtered::new(r3, Count),
            Max::of(|s: &Seen| minute_of_day(s.1.date_time)),
        ))
        .key_by(|r: &ValueRow| (r.start, r.key.1.clone()))
        .window(Tumbling::ms(size), |r: &ValueRow| r.start)
        .aggregate(ChannelStats)
        .map(|r| Windowed {
            start: r.start,
            end: r.end,
            key: r.key.1,
            value: r.value,
        });
    sink_window_rows(
        stats,
        |r: &Windowed<Word, [u64; 13]>| r.key.clone(),
        |r| {
            let v = r.value;
            let minute = v[12].saturating_sub(1);
            Q16Csv {
                window_start_ms: r.start,
                window_end_ms: r.end,
                channel: r.key,
                minute: format!("{:02}:{:02}", minute / 60, minute % 60),
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
