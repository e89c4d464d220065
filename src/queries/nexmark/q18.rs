//! q18, find the last bid: per (bidder, auction), the bidder's latest bid
//! on that auction (the Flink suite's `q18`; Beam has no such query):
//! `ROW_NUMBER() OVER (PARTITION BY bidder, auction ORDER BY dateTime
//! DESC) = 1`.
//!
//! State retention (`--state-ttl-ms`, default a minute of event time):
//! a key's state is its latest bid, kept until no bid of the key came for
//! the TTL; then its row is written and the state freed. A later bid of the
//! key starts new state and a second row (Flink's idle state retention,
//! `table.exec.state.ttl`, behaves so, in processing time). That is a
//! session window per key with the TTL as gap (bids the TTL or more apart
//! are in two sessions), so the rows depend neither on arrival order nor
//! on `--workers`. The generator bids only on the last 100 auctions
//! (Beam's `numInFlightAuctions`), so at the default TTL no key sees such a
//! gap at any rate above 30 events/s: the rows equal Flink's final table.
//!
//! Columns: `auction,bidder,price,date_time_ms` (Flink's row is the whole
//! bid; `channel`, `url` and `extra` are not carried on our hot path and
//! left out). Rows leave as keys expire: sorted by the key's expiry (its
//! last bid's time + TTL), then auction, bidder. Event time is the bid's
//! (`--max-delay-ms` of disorder; later bids are late: dropped, counted).
//!
//! Ties: Flink's `ROW_NUMBER` over bids at the same `dateTime` picks one in
//! arrival order (not deterministic). We pick the one with the highest
//! price: with the fields we carry, bids tied on (bidder, auction,
//! dateTime, price) are the same row, so the result does not depend on the
//! order bids arrive in (nor on `--workers`). From the generator the
//! result equals Flink's when bids are in time order and no two of one
//! (bidder, auction) share a millisecond.
//!
//! Graph: bids keyed by (bidder, auction) → session windows of gap TTL
//! ([`Sessions`]) at the key's owner, aggregated by [`Latest`] (one
//! (time, price) pair per open key) → a row per session as it closes.
//! Flink emits an update (retract + insert) whenever a key's latest bid
//! changes; we emit each key's final row once its state expires.

use super::{Cx, Shard, Spec};
use crate::queries::common::QueryOption::{MaxDelayMs, StateTtlMs};
use crate::queries::driver::sink_window_rows;
use air_operators::graph::{AggregateFunction, KeyedWindowExt, Sessions, Windowed};
use air_operators::sources::nexmark::Bid;
use air_runtime::dataflow::Dataflow;
use serde::Serialize;

/// q18 as the driver runs it.
pub const SPEC: Spec = Spec {
    what: "find the last bid: per (bidder, auction), the latest bid (ties on date_time: the \
           highest price), written when the key's state expires (--state-ttl-ms without a bid)",
    nature: "a deduplication per key with state retention: no windows",
    columns: &["auction", "bidder", "price", "date_time_ms"],
    order: "expiry (the key's last bid + TTL), auction, bidder",
    honoured: &[StateTtlMs, MaxDelayMs],
    window_ms: 10_000,
    slide_ms: 2_000,
    // Rows leave as keys expire.
    held_rows_per_event: |_| None,
    windowed: true,
    reads: 1,
    global: false,
    build,
};

/// The latest (date_time, price) of a key's bids: the largest pair (later,
/// or as late and dearer: a total order on the fields of one key). The accumulator is `(0, 0)` before any bid
/// (no bid is at time 0 and price 0: prices are at least 100 cents).
#[derive(Clone, Copy, Debug, Default)]
pub struct Latest;

impl AggregateFunction<Bid> for Latest {
    type Acc = (u64, u64);
    type Out = (u64, u64);
    fn create(&self) -> (u64, u64) {
        (0, 0)
    }
    #[inline]
    fn add(&self, acc: &mut (u64, u64), b: &Bid) {
        *acc = (*acc).max((b.date_time, b.price));
    }
    fn merge(&self, acc: &mut (u64, u64), other: (u64, u64)) {
        *acc = (*acc).max(other);
    }
    fn result(&self, acc: &(u64, u64)) -> (u64, u64) {
        *acc
    }
}

/// A q18 CSV row.
#[derive(Serialize)]
struct Q18Csv {
    auction: u64,
    bidder: u64,
    price: u64,
    date_time_ms: u64,
}

/// A q18 row on its way to the writer: key (bidder, auction), value the
/// latest (date_time, price).
type LastBid = Windowed<(u64, u64), (u64, u64)>;

/// Bids keyed by (bidder, auction) → sessions of gap TTL at the key's owner
/// → one row per session as it closes.
fn build(cx: &Cx<'_>, df: &Dataflow, shard: &Shard<'_>) {
    let last = df
        .source(shard.read_bids())
        .event_time(|b: &Bid| b.date_time, cx.args.max_delay())
        .key_by(|b: &Bid| (b.bidder, b.auction))
        .window(Sessions::with_gap(cx.args.state_ttl()), |b: &Bid| {
            b.date_time
        })
        .aggregate(Latest);
    sink_window_rows(
        last,
        |r: &LastBid| (r.key.1, r.key.0),
        |r| Q18Csv {
            auction: r.key.1,
            bidder: r.key.0,
            price: r.value.1,
            date_time_ms: r.value.0,
        },
        cx.header,
        cx.to,
    );
}
