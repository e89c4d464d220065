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
//! Plan (q15's split distinct aggregation, [`super::q15::split_distinct`],
//! grouped by channel): each full bid is projected to (channel as an
//! inline [`Word`], bidder, auction, price, time) and seen twice, through
//! its bidder and through its auction → keyed by (kind, channel, value) →
//! tumbling windows: that value's bids per price rank and latest minute
//! ([`Max`]), pre-aggregated per worker → keyed by (window, channel) → the
//! row: distinct values per rank are the values with bids there, bids per
//! rank the sums over the bidders (pre-aggregated per worker again).

use super::full::full_bid;
use super::q15::{split_distinct, Seen, SplitCsv, SplitStats, StatBid};
use super::{Cx, Shard, Spec};
use crate::queries::common::QueryOption::*;
use crate::queries::driver::sink_window_rows;
use air_operators::graph::{Max, Windowed};
use air_operators::sources::nexmark::{Bid, EventKind, FullBid};
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
    /// The bid's bidder, auction, price and time.
    bid: Bid,
}

impl StatBid for ChannelBid {
    #[inline(always)]
    fn bid(&self) -> &Bid {
        &self.bid
    }
}

/// The minute of the UTC day of `ms` since the epoch (`0..1440`).
fn minute_of_day(ms: u64) -> u64 {
    ms / 60_000 % 1440
}

/// A q16 CSV row.
#[derive(Serialize)]
struct Q16Csv {
    window_start_ms: u64,
    window_end_ms: u64,
    channel: Word,
    minute: String,
    /// Written as its twelve columns.
    counts: SplitCsv,
}

/// Full bids projected → [`split_distinct`] grouped by channel, with the
/// latest minute of the day as extra statistic → a row per channel and
/// window.
fn build(cx: &Cx<'_>, df: &Dataflow, shard: &Shard<'_>) {
    let bids = df
        .source(shard.read_full_of(&[EventKind::Bid]))
        .flat_map(|e| {
            full_bid(e).map(|b: FullBid| ChannelBid {
                channel: Word::new(&b.channel.to_cow()),
                bid: Bid {
                    auction: b.auction,
                    bidder: b.bidder,
                    price: b.price,
                    date_time: b.date_time,
                },
            })
        })
        .event_time(|b: &ChannelBid| b.bid.date_time, cx.args.max_delay())
        .idle_after_ms(cx.args.idle_ms);
    let stats = split_distinct(
        bids,
        cx.args.window(),
        |b: &ChannelBid| b.channel.clone(),
        Max::of(|s: &Seen<ChannelBid>| minute_of_day(s.1.bid.date_time)),
    )
    .map(|r| Windowed {
        start: r.start,
        end: r.end,
        key: r.key.1,
        value: r.value,
    });
    sink_window_rows(
        stats,
        |r: &Windowed<Word, SplitStats<Option<u64>>>| r.key.clone(),
        |r| {
            // Every channel's window has a bid, so a minute.
            let minute = r.value.1.unwrap_or(0);
            Q16Csv {
                window_start_ms: r.start,
                window_end_ms: r.end,
                channel: r.key,
                minute: format!("{:02}:{:02}", minute / 60, minute % 60),
                counts: SplitCsv::of(&r.value.0),
            }
        },
        cx.header,
        cx.to,
    );
}
