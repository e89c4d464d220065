//! q19, auction top-N: per auction, its 10 bids at the highest prices (the
//! Flink suite's `q19`; Beam has no such query): `ROW_NUMBER() OVER
//! (PARTITION BY auction ORDER BY price DESC) <= 10`.
//!
//! State retention (`--state-ttl-ms`, default a minute of event time):
//! an auction's state is its best bids so far, kept until no bid on it
//! came for the TTL; then its rows are written and the state freed. A
//! later bid on that auction starts new state and a second ranking (as
//! Flink's idle state retention, `table.exec.state.ttl`, in processing
//! time). That is a session window per auction with the TTL as gap, so the
//! rows depend neither on arrival order nor on `--workers`. The generator
//! bids only on the last 100 auctions (Beam's `numInFlightAuctions`), so at
//! the default TTL no auction sees such a gap at any rate above 30
//! events/s: the rows equal Flink's final table.
//!
//! Columns: `auction,bidder,price,date_time_ms,rank` (`rank` is Flink's
//! `rank_number`, 1 = the highest price; Flink's `channel`, `url` and
//! `extra` are not carried on our hot path and left out). Rows leave as
//! auctions expire: sorted by expiry (the auction's last bid + TTL), then
//! auction, rank. Event time is the bid's (`--max-delay-ms` of disorder;
//! later bids are late: dropped, counted).
//!
//! Ties: Flink's `ROW_NUMBER` orders bids at the same price in arrival
//! order (not deterministic). We rank them by price descending, then the
//! earlier `date_time` first, then the smaller bidder: a total order on
//! the fields of one auction's bids (bids equal in all of them are the
//! same row), so the result depends neither on arrival order nor on
//! `--workers`.
//!
//! Graph: bids keyed by auction → session windows of gap TTL
//! ([`Sessions`]) at the auction's owner, aggregated by [`Top10`] (at most
//! [`Q19_TOP`] bids per open auction) → ranked rows per session as it
//! closes. Flink emits updates as an auction's top changes; we emit each
//! auction's final ranking once its state expires.

use super::{Cx, Shard, Spec};
use crate::queries::common::QueryOption::{MaxDelayMs, StateTtlMs};
use crate::queries::driver::sink_window_rows;
use air_operators::graph::{AggregateFunction, KeyedWindowExt, Sessions, Windowed};
use air_operators::sources::nexmark::Bid;
use air_runtime::dataflow::Dataflow;
use serde::Serialize;
use std::cmp::Reverse;

/// Bids kept per auction (Flink's `rank_number <= 10`).
pub const Q19_TOP: usize = 10;

/// q19 as the driver runs it.
pub const SPEC: Spec = Spec {
    what: "auction top-N: per auction, the 10 bids at the highest prices (ties: the earlier, \
           then the smaller bidder first), written when the auction's state expires \
           (--state-ttl-ms without a bid)",
    nature: "a top-N per auction with state retention: no windows",
    columns: &["auction", "bidder", "price", "date_time_ms", "rank"],
    order: "expiry (the auction's last bid + TTL), auction, rank",
    honoured: &[StateTtlMs, MaxDelayMs],
    window_ms: 10_000,
    slide_ms: 2_000,
    // Rows leave as auctions expire.
    held_rows_per_event: |_| None,
    windowed: true,
    reads: 1,
    global: false,
    build,
};

/// The rank order of one auction's bids: ascending = better (price
/// descending, then earlier, then smaller bidder).
pub fn q19_order(b: &Bid) -> (Reverse<u64>, u64, u64) {
    (Reverse(b.price), b.date_time, b.bidder)
}

/// Adds `b` to `top` (sorted by [`q19_order`], at most [`Q19_TOP`]).
fn q19_add(top: &mut Vec<Bid>, b: Bid) {
    let o = q19_order(&b);
    let at = top.partition_point(|x| q19_order(x) <= o);
    if at < Q19_TOP {
        if top.len() == Q19_TOP {
            top.pop();
        }
        top.insert(at, b);
    }
}

/// An auction's best [`Q19_TOP`] bids by [`q19_order`], best first.
#[derive(Clone, Copy, Debug, Default)]
pub struct Top10;

impl AggregateFunction<Bid> for Top10 {
    type Acc = Vec<Bid>;
    type Out = Vec<Bid>;
    fn create(&self) -> Vec<Bid> {
        Vec::new()
    }
    #[inline]
    fn add(&self, top: &mut Vec<Bid>, b: &Bid) {
        q19_add(top, *b);
    }
    fn merge(&self, top: &mut Vec<Bid>, other: Vec<Bid>) {
        for b in other {
            q19_add(top, b);
        }
    }
    fn result(&self, top: &Vec<Bid>) -> Vec<Bid> {
        top.clone()
    }
}

/// A q19 row on its way to the writer: the bid and its rank (1-based).
type Ranked = Windowed<(), (Bid, u64)>;

/// A q19 CSV row.
#[derive(Serialize)]
struct Q19Csv {
    auction: u64,
    bidder: u64,
    price: u64,
    date_time_ms: u64,
    rank: u64,
}

/// Bids keyed by auction → sessions of gap TTL at the auction's owner →
/// ranked rows per session as it closes.
fn build(cx: &Cx<'_>, df: &Dataflow, shard: &Shard<'_>) {
    let top = df
        .source(shard.read_bids())
        .event_time(|b: &Bid| b.date_time, cx.args.max_delay())
        .key_by(|b: &Bid| b.auction)
        .window(Sessions::with_gap(cx.args.state_ttl()), |b: &Bid| {
            b.date_time
        })
        .aggregate(Top10)
        .flat_map(|w: Windowed<u64, Vec<Bid>>| {
            let (start, end) = (w.start, w.end);
            w.value.into_iter().enumerate().map(move |(i, b)| Windowed {
                start,
                end,
                key: (),
                value: (b, i as u64 + 1),
            })
        });
    sink_window_rows(
        top,
        |r: &Ranked| (r.value.0.auction, r.value.1),
        |r| Q19Csv {
            auction: r.value.0.auction,
            bidder: r.value.0.bidder,
            price: r.value.0.price,
            date_time_ms: r.value.0.date_time,
            rank: r.value.1,
        },
        cx.header,
        cx.to,
    );
}
