//! q20, expand bid with auction: every bid on an auction of category 10,
//! with its auction's fields (the Flink nexmark suite's `q20.sql`: `bid AS
//! B INNER JOIN auction AS A ON B.auction = A.id WHERE A.category = 10`;
//! Beam has no q20). Reads full events ([`Shard::read_full`]): the row
//! carries every string of the bid and of the auction.
//!
//! Columns, in the SQL's order: the bid's `auction, bidder, price, channel,
//! url, bid_date_time_ms, bid_extra`, then the auction's `item_name,
//! description, initial_bid, reserve, auction_date_time_ms, expires_ms,
//! seller, category, auction_extra` (Flink's sink names them `bid_dateTime`,
//! `itemName`, …; times here are epoch ms). One row per joined (bid,
//! auction) pair. No windows.
//!
//! Rows stream out: a pair is joined when the second of its two records
//! arrives, and its row belongs to the millisecond `max(bid time, auction
//! time)` (never behind the watermark when it is made: the record that
//! completes it is not late), so the writer releases each millisecond's
//! rows once the watermark passes it, sorted by that time, then bid
//! date_time, auction, bidder, price, channel, url, bid extra. Flink writes
//! its rows to a blackhole in arrival order.
//!
//! State retention (`--state-ttl-ms`, default [`super::DEFAULT_STATE_TTL_MS`],
//! a minute of event time). Flink's regular join keeps both sides forever
//! unless `table.exec.state.ttl` is set; then each stored row expires a TTL
//! after it was written (its default update type, `OnCreateAndWrite`: a
//! probe that reads a row does not refresh it). We keep that rule in event
//! time, so it does not depend on how fast a run goes:
//! - an auction (of category 10, with its strings; of another category, a
//!   marker of its id and time only, so that its bids are dropped at once)
//!   is freed when the watermark passes its `date_time + ttl`;
//! - a bid whose auction has not come (another worker's shard may be
//!   behind, and the generator names auctions up to 10 ids ahead of the
//!   last one it made: Beam's `AUCTION_ID_LEAD`) waits, with its strings,
//!   until its auction comes or the watermark passes its `date_time + ttl`;
//! - a bid and its auction join iff their times differ by at most the TTL
//!   (`|bid.date_time − auction.date_time| ≤ ttl`), checked on the two
//!   times, not on when a timer happened to fire: the rows do not depend on
//!   `--workers` or on the pace of the run. A bid that comes after its
//!   auction's state expired is not joined (it waits, in vain, for a TTL).
//!
//! Memory is the auctions and waiting bids of the last TTL of event time,
//! not every auction ever seen. Why the default changes nothing on
//! generated data: the generator bids only on one of the last 100 auctions
//! (Beam's `numInFlightAuctions`, plus the hot auction, the first of the
//! current block of 100) or up to 10 ahead; auctions are 3 events in 50, so
//! a bid and its auction are at most ~1 700 events apart, 1 700 / R seconds
//! at an event-time rate of R events/s: under a minute at any rate above
//! ~30 events/s (the default is 10 000). There the result equals the
//! unbounded join. A file may hold pairs further apart; they join only
//! with a larger `--state-ttl-ms`.
//!
//! `--max-delay-ms` is honoured (the input's bounded out-of-orderness;
//! older records are late: dropped and counted). An auction id seen twice
//! (never generated) keeps the first auction while its state lives.

use super::{bid_rows, Cx, Shard, Spec};
use crate::queries::common::QueryOption::{MaxDelayMs, StateTtlMs};
use air_operators::graph::{KeyedProcessExt, KeyedProcessFunction, ProcessCx};
use air_operators::sources::nexmark::{EventKind, FullAuction, FullBid, FullEvent};
use air_runtime::dataflow::Dataflow;
use serde::Serialize;

/// q20 as the driver runs it.
pub const SPEC: Spec = Spec {
    what: "expand bid with auction: every bid on an auction of category 10, joined with the \
           auction's fields (bid and auction times at most --state-ttl-ms apart)",
    nature: "an unwindowed join of bids and auctions: no windows",
    columns: &[
        "auction",
        "bidder",
        "price",
        "channel",
        "url",
        "bid_date_time_ms",
        "bid_extra",
        "item_name",
        "description",
        "initial_bid",
        "reserve",
        "auction_date_time_ms",
        "expires_ms",
        "seller",
        "category",
        "auction_extra",
    ],
    order: "max(bid_date_time, auction_date_time), bid_date_time, auction, bidder, price, \
            channel, url, bid_extra",
    honoured: &[MaxDelayMs, StateTtlMs],
    window_ms: 10_000,
    slide_ms: 2_000,
    // Rows leave as the watermark passes them (files have event time too).
    held_rows_per_event: |_| None,
    windowed: false,
    reads: 1,
    global: false,
    build,
};

/// The category whose auctions q20 joins (Flink's `A.category = 10`).
pub const CATEGORY: u64 = 10;

/// A bid as q20 carries it: every field.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub(crate) struct Q20Bid {
    auction: u64,
    bidder: u64,
    price: u64,
    channel: String,
    url: String,
    date_time: u64,
    extra: String,
}

/// An auction of category [`CATEGORY`] as q20 carries it: every field.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub(crate) struct Q20Auction {
    id: u64,
    item_name: String,
    description: String,
    initial_bid: u64,
    reserve: u64,
    date_time: u64,
    expires: u64,
    seller: u64,
    category: u64,
    extra: String,
}

/// The input of the join, keyed by auction id ([`Q20In::auction_id`]).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub(crate) enum Q20In {
    /// An auction of category [`CATEGORY`].
    Auction(Q20Auction),
    /// An auction of another category: its id and time (its bids are
    /// dropped; its strings never cross the exchange).
    Other {
        /// Auction id.
        id: u64,
        /// Its `date_time`, ms.
        date_time: u64,
    },
    /// A bid.
    Bid(Q20Bid),
}

impl Q20In {
    /// The event as q20's input (persons are dropped).
    fn of(e: FullEvent) -> Option<Q20In> {
        Some(match e {
            FullEvent::Auction(a) if a.category == CATEGORY => Q20In::Auction(auction(a)),
            FullEvent::Auction(a) => Q20In::Other {
                id: a.id,
                date_time: a.date_time,
            },
            FullEvent::Bid(b) => Q20In::Bid(bid(b)),
            FullEvent::Person(_) => return None,
        })
    }

    /// The auction's id, or the bid's auction.
    fn auction_id(&self) -> u64 {
        match self {
            Q20In::Auction(a) => a.id,
            Q20In::Other { id, .. } => *id,
            Q20In::Bid(b) => b.auction,
        }
    }

    /// Event time, ms.
    fn date_time(&self) -> u64 {
        match self {
            Q20In::Auction(a) => a.date_time,
            Q20In::Other { date_time, .. } => *date_time,
            Q20In::Bid(b) => b.date_time,
        }
    }
}

fn bid(b: FullBid) -> Q20Bid {
    Q20Bid {
        auction: b.auction,
        bidder: b.bidder,
        price: b.price,
        channel: b.channel.into_string(),
        url: b.url.into_string(),
        date_time: b.date_time,
        extra: b.extra.into_string(),
    }
}

fn auction(a: FullAuction) -> Q20Auction {
    Q20Auction {
        id: a.id,
        item_name: a.item_name,
        description: a.description,
        initial_bid: a.initial_bid,
        reserve: a.reserve,
        date_time: a.date_time,
        expires: a.expires,
        seller: a.seller,
        category: a.category,
        extra: a.extra,
    }
}

/// A joined pair: one output row.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub(crate) struct Joined {
    bid: Q20Bid,
    auction: Q20Auction,
}

impl Joined {
    /// The row's time, ms: the later of its two records' (when the pair
    /// became known).
    fn time(&self) -> u64 {
        self.bid.date_time.max(self.auction.date_time)
    }
}

/// What one auction id's owner knows of the auction.
#[derive(Debug, Default, Clone, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
enum Known {
    /// Nothing (not come yet, or freed).
    #[default]
    Nothing,
    /// It is of category [`CATEGORY`].
    Joins(Q20Auction),
    /// It is of another category, at this time (ms).
    Other(u64),
}

/// One auction id's state at its owner (saved at checkpoints).
#[derive(Debug, Default, Clone, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub(crate) struct Pending {
    auction: Known,
    /// Bids that came before the auction, each with a timer at its expiry.
    waiting: Vec<Q20Bid>,
}

/// The join (see the module docs): state per auction id, freed a TTL of
/// event time after each stored record's time.
pub(crate) struct ExpandJoin {
    /// ms of event time.
    ttl: u64,
}

impl ExpandJoin {
    /// When a record at `t` is freed: its timer (fires once the watermark
    /// passes it).
    fn expiry(&self, t: u64) -> u64 {
        t.saturating_add(self.ttl)
    }

    /// Whether a bid at `b` and an auction at `a` join.
    fn within(&self, a: u64, b: u64) -> bool {
        a.abs_diff(b) <= self.ttl
    }
}

impl KeyedProcessFunction<u64, Q20In> for ExpandJoin {
    type State = Pending;
    type Out = Joined;

    fn process(
        &mut self,
        _id: &u64,
        record: Q20In,
        _time: u64,
        s: &mut Pending,
        cx: &mut ProcessCx<Joined>,
    ) {
        match record {
            Q20In::Bid(b) => match &s.auction {
                Known::Joins(a) => {
                    if self.within(a.date_time, b.date_time) {
                        cx.emit(Joined {
                            bid: b,
                            auction: a.clone(),
                        });
                    }
                }
                Known::Other(_) => {}
                Known::Nothing => {
                    cx.register_timer(self.expiry(b.date_time));
                    s.waiting.push(b);
                }
            },
            Q20In::Auction(_) | Q20In::Other { .. } if !matches!(s.auction, Known::Nothing) => {
                // The same id again (a bad file): the first stands.
            }
            Q20In::Auction(a) => {
                // The waiting bids' timers go first: one may be at the
                // auction's expiry.
                for b in std::mem::take(&mut s.waiting) {
                    cx.delete_timer(self.expiry(b.date_time));
                    if self.within(a.date_time, b.date_time) {
                        cx.emit(Joined {
                            bid: b,
                            auction: a.clone(),
                        });
                    }
                }
                cx.register_timer(self.expiry(a.date_time));
                s.auction = Known::Joins(a);
            }
            Q20In::Other { date_time, .. } => {
                for b in std::mem::take(&mut s.waiting) {
                    cx.delete_timer(self.expiry(b.date_time));
                }
                cx.register_timer(self.expiry(date_time));
                s.auction = Known::Other(date_time);
            }
        }
    }

    fn on_timer(&mut self, _id: &u64, t: u64, s: &mut Pending, cx: &mut ProcessCx<Joined>) {
        let at = match &s.auction {
            Known::Joins(a) => Some(a.date_time),
            Known::Other(at) => Some(*at),
            Known::Nothing => None,
        };
        if at.is_some_and(|at| self.expiry(at) <= t) {
            s.auction = Known::Nothing;
        }
        s.waiting.retain(|b| self.expiry(b.date_time) > t);
        if matches!(s.auction, Known::Nothing) && s.waiting.is_empty() {
            cx.clear_state();
        }
    }
}

/// A q20 CSV row (the columns of [`SPEC`]).
#[derive(Serialize)]
struct Q20Csv {
    auction: u64,
    bidder: u64,
    price: u64,
    channel: String,
    url: String,
    bid_date_time_ms: u64,
    bid_extra: String,
    item_name: String,
    description: String,
    initial_bid: u64,
    reserve: u64,
    auction_date_time_ms: u64,
    expires_ms: u64,
    seller: u64,
    category: u64,
    auction_extra: String,
}

/// Full auctions and bids → keyed by auction id → the join → rows of the
/// millisecond each pair became known.
fn build(cx: &Cx<'_>, df: &Dataflow, shard: &Shard<'_>) {
    let join = ExpandJoin {
        ttl: cx.args.state_ttl(),
    };
    let joined = df
        .source(shard.read_full_of(&[EventKind::Auction, EventKind::Bid]))
        .event_time(FullEvent::date_time, cx.args.max_delay())
        .flat_map(Q20In::of)
        .key_by(Q20In::auction_id)
        .process_checkpointed(Q20In::date_time, join);
    bid_rows(
        joined,
        |j: &Joined| j.time().saturating_add(1),
        |w| {
            let b = &w.value.bid;
            (
                w.value.time(),
                b.date_time,
                b.auction,
                b.bidder,
                b.price,
                b.channel.clone(),
                b.url.clone(),
                b.extra.clone(),
            )
        },
        |w| {
            let Joined { bid: b, auction: a } = w.value;
            Q20Csv {
                auction: b.auction,
                bidder: b.bidder,
                price: b.price,
                channel: b.channel,
                url: b.url,
                bid_date_time_ms: b.date_time,
                bid_extra: b.extra,
                item_name: a.item_name,
                description: a.description,
                initial_bid: a.initial_bid,
                reserve: a.reserve,
                auction_date_time_ms: a.date_time,
                expires_ms: a.expires,
                seller: a.seller,
                category: a.category,
                auction_extra: a.extra,
            }
        },
        cx,
    );
}
