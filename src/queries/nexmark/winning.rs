//! The winning bids of closed auctions (Beam's `WinningBids`): the stage
//! q9 outputs and q4 and q6 aggregate.
//!
//! Definition: for each auction, the highest bid with `auction.date_time <=
//! bid.date_time < auction.expires` and `bid.price >= auction.reserve`;
//! among bids at the same price the earliest wins (Beam's
//! `Bid.PRICE_THEN_DESCENDING_TIME`), and among those the smallest bidder
//! id (Beam keeps whichever of them it saw first, which depends on the
//! order a group is read in; we need the same rows for every worker
//! count). An auction without such a bid has no winner and gives no row.
//! The winning bid is known once every bid before `expires` has arrived:
//! it leaves when the watermark reaches `expires`, and its event time is
//! `expires` (the time Beam's `WinningBidsSimulator` stamps it with; Beam's
//! pipeline stamps the end of the merged window, `expires − 1` ms).
//!
//! Where the definitions disagree:
//! - Beam has no lower bound on the bid's time: a bid merges into its
//!   auction's window whenever it is before `expires`, so a bid made
//!   before its auction opened (the generator makes bids for auctions up to
//!   10 ids ahead) can win. Flink's q9 SQL takes `B.dateTime BETWEEN
//!   A.dateTime AND A.expires` (both ends included). We take
//!   `[date_time, expires)`: Flink's lower bound (a bid before the auction
//!   exists is not a bid on it) and Beam's upper bound.
//! - Flink's q9 has no reserve condition and picks the highest price, then
//!   the earliest time (`ROW_NUMBER() … ORDER BY price DESC, dateTime
//!   ASC`); we follow Beam: bids under the reserve never win.
//!
//! How it runs: auctions and bids (one stream of [`AuctionOrBid`]) keyed
//! by auction id, into [`air_operators::graph::KeyedProcessExt::process`].
//! A key's state is its auction, once seen, and its best valid bid so far
//! (one bid, not all of them), with a timer at `expires − 1` (it fires when
//! the watermark reaches `expires`: every bid before `expires` is in) that
//! emits the winner and frees the key. A bid that comes before its auction
//! (another worker's shard may be ahead) is held with a timer at its own
//! time: once the watermark passes it, an auction it could belong to
//! (opened at or before the bid) would have come, so a bid still without
//! an auction then is dropped. Memory follows the open auctions and the
//! bids waiting for theirs, not every auction ever seen.

use super::{Cx, Shard};
use air_operators::graph::{KeyedProcessExt, KeyedProcessFunction, ProcessCx};
use air_operators::sources::nexmark::{Auction, Bid, NexEvent};
use air_runtime::dataflow::{Dataflow, Head, Identity, Stream};

/// An auction or a bid: the input of the winning-bids stage, keyed by
/// auction id ([`AuctionOrBid::auction_id`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub enum AuctionOrBid {
    /// A new auction.
    Auction(Auction),
    /// A bid.
    Bid(Bid),
}

impl AuctionOrBid {
    /// The event if it is an auction or a bid (persons are dropped).
    pub fn of(e: NexEvent) -> Option<AuctionOrBid> {
        match e {
            NexEvent::Auction(a) => Some(AuctionOrBid::Auction(a)),
            NexEvent::Bid(b) => Some(AuctionOrBid::Bid(b)),
            NexEvent::Person(_) => None,
        }
    }

    /// The auction's id, or the bid's auction.
    #[inline]
    pub fn auction_id(&self) -> u64 {
        match self {
            AuctionOrBid::Auction(a) => a.id,
            AuctionOrBid::Bid(b) => b.auction,
        }
    }

    /// Event time, ms.
    #[inline]
    pub fn date_time(&self) -> u64 {
        match self {
            AuctionOrBid::Auction(a) => a.date_time,
            AuctionOrBid::Bid(b) => b.date_time,
        }
    }
}

/// A closed auction and its winning bid (Beam's `AuctionBid`); its event
/// time is `auction.expires` ([`AuctionBid::time`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct AuctionBid {
    /// The auction.
    pub auction: Auction,
    /// Its winning bid.
    pub bid: Bid,
}

impl AuctionBid {
    /// Event time, ms: when the auction closed (`auction.expires`).
    #[inline]
    pub fn time(&self) -> u64 {
        self.auction.expires
    }
}

/// Whether `bid` may win `auction`: made while it was open, at or above
/// its reserve.
#[inline]
pub fn valid(auction: &Auction, bid: &Bid) -> bool {
    auction.date_time <= bid.date_time
        && bid.date_time < auction.expires
        && bid.price >= auction.reserve
}

/// Whether `bid` beats `best` (both valid): a higher price, else an
/// earlier time, else a smaller bidder id.
#[inline]
pub fn beats(bid: &Bid, best: &Bid) -> bool {
    (
        bid.price,
        std::cmp::Reverse(bid.date_time),
        std::cmp::Reverse(bid.bidder),
    ) > (
        best.price,
        std::cmp::Reverse(best.date_time),
        std::cmp::Reverse(best.bidder),
    )
}

/// The timer that closes `auction`: it fires when the watermark reaches
/// `expires` (every bid before it has come).
#[inline]
fn close_timer(auction: &Auction) -> u64 {
    auction.expires.saturating_sub(1)
}

/// One auction id's state at its owner (saved at checkpoints).
#[derive(Default, Clone, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct Open {
    /// The auction, once seen.
    auction: Option<Auction>,
    /// Its best valid bid so far.
    best: Option<Bid>,
    /// Bids that came before the auction (each with a timer at its time).
    waiting: Vec<Bid>,
}

impl Open {
    /// Counts `bid` for the auction (known).
    #[inline]
    fn offer(&mut self, bid: Bid) {
        let a = self.auction.as_ref().expect("the auction is known");
        if valid(a, &bid) && self.best.as_ref().is_none_or(|best| beats(&bid, best)) {
            self.best = Some(bid);
        }
    }
}

/// The winning-bids process function (see the module docs).
pub struct WinningBids;

impl KeyedProcessFunction<u64, AuctionOrBid> for WinningBids {
    type State = Open;
    type Out = AuctionBid;

    #[inline]
    fn process(
        &mut self,
        _id: &u64,
        record: AuctionOrBid,
        _time: u64,
        s: &mut Open,
        cx: &mut ProcessCx<AuctionBid>,
    ) {
        match record {
            AuctionOrBid::Auction(a) => {
                if s.auction.is_some() {
                    // A second auction with the same id (a bad file): the
                    // first one stands.
                    return;
                }
                s.auction = Some(a);
                // The waiting bids' timers go first: one of them may be at
                // the closing timer's time.
                for b in std::mem::take(&mut s.waiting) {
                    cx.delete_timer(b.date_time);
                    s.offer(b);
                }
                cx.register_timer(close_timer(&a));
            }
            AuctionOrBid::Bid(b) => {
                if s.auction.is_some() {
                    s.offer(b);
                } else {
                    s.waiting.push(b);
                    cx.register_timer(b.date_time);
                }
            }
        }
    }

    fn on_timer(&mut self, _id: &u64, t: u64, s: &mut Open, cx: &mut ProcessCx<AuctionBid>) {
        match s.auction {
            Some(a) if t >= close_timer(&a) => {
                if let Some(bid) = s.best {
                    cx.emit(AuctionBid { auction: a, bid });
                }
                cx.clear_state();
            }
            Some(_) => {}
            None => {
                // No auction opened at or before these bids: none will.
                s.waiting.retain(|b| b.date_time > t);
                if s.waiting.is_empty() {
                    cx.clear_state();
                }
            }
        }
    }
}

/// The winning bid of every closed auction of the input (see the module
/// docs), each emitted at the owner of its auction id when the watermark
/// reaches `expires`. Honours `--max-delay-ms`.
pub(crate) fn winning_bids(
    cx: &Cx<'_>,
    df: &Dataflow,
    shard: &Shard<'_>,
) -> Stream<impl Head<Out = AuctionBid>, Identity> {
    df.source(shard.read())
        .event_time(NexEvent::date_time, cx.args.max_delay())
        .flat_map(AuctionOrBid::of)
        .key_by(AuctionOrBid::auction_id)
        .process_checkpointed(AuctionOrBid::date_time, WinningBids)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auction(id: u64, date_time: u64, expires: u64, reserve: u64) -> Auction {
        Auction {
            id,
            reserve,
            date_time,
            expires,
            ..Auction::default()
        }
    }

    fn bid(price: u64, date_time: u64, bidder: u64) -> Bid {
        Bid {
            auction: 1,
            bidder,
            price,
            date_time,
        }
    }

    #[test]
    fn a_bid_is_valid_inside_the_auction_and_at_or_above_the_reserve() {
        let a = auction(1, 100, 200, 50);
        assert!(valid(&a, &bid(50, 100, 0)));
        assert!(valid(&a, &bid(60, 199, 0)));
        assert!(!valid(&a, &bid(60, 200, 0)), "at expires: closed");
        assert!(!valid(&a, &bid(60, 99, 0)), "before the auction opened");
        assert!(!valid(&a, &bid(49, 150, 0)), "under the reserve");
    }

    #[test]
    fn each_closed_auction_gives_its_winner_and_frees_its_state() {
        use air_operators::graph::KeyedProcessExt;
        use air_runtime::dataflow::{run_graph, VecSource};
        use air_runtime::JobConfig;
        use std::sync::{Arc, Mutex};
        let bid_on = |auction, price, date_time, bidder| {
            AuctionOrBid::Bid(Bid {
                auction,
                ..bid(price, date_time, bidder)
            })
        };
        // Auction i opens at 100·i and closes 150 ms later (reserve 10);
        // its bids: one under the reserve, one at i + 10, one after it
        // closed, and one for an auction that never comes.
        let mut events = Vec::new();
        for i in 1..=40u64 {
            let t = 100 * i;
            events.push(AuctionOrBid::Auction(auction(i, t, t + 150, 10)));
            events.push(bid_on(i, 9, t + 1, 1));
            events.push(bid_on(i, i + 10, t + 2, 2));
            events.push(bid_on(i, 1000, t + 150, 3));
            events.push(bid_on(1000 + i, 50, t + 3, 4));
        }
        events.sort_by_key(AuctionOrBid::date_time);
        let cfg = JobConfig {
            workers: 2,
            pin: false,
            ..JobConfig::default()
        };
        let rows = Arc::new(Mutex::new(Vec::new()));
        let out = rows.clone();
        let done = run_graph(&cfg, move |df| {
            let mine: Vec<AuctionOrBid> = events
                .iter()
                .enumerate()
                .filter(|(k, _)| k % 2 == df.index())
                .map(|(_, e)| *e)
                .collect();
            let out = out.clone();
            df.source(VecSource::new(mine))
                .event_time(AuctionOrBid::date_time, 0)
                .key_by(AuctionOrBid::auction_id)
                .process(AuctionOrBid::date_time, WinningBids)
                .for_each(move |w| out.lock().unwrap().push((w.auction.id, w.bid.price)));
        })
        .unwrap();
        let mut rows = rows.lock().unwrap().clone();
        rows.sort();
        let want: Vec<(u64, u64)> = (1..=40).map(|i| (i, i + 10)).collect();
        assert_eq!(rows, want);
        // Every key was freed: closed auctions and bids that waited for an
        // auction in vain.
        assert_eq!(done.stats.get("process_keys"), 0);
        assert!(done.stats.get("timers_fired") >= 80);
    }

    #[test]
    fn higher_price_then_earlier_time_then_smaller_bidder_wins() {
        assert!(beats(&bid(10, 5, 9), &bid(9, 1, 1)));
        assert!(beats(&bid(10, 4, 9), &bid(10, 5, 1)));
        assert!(beats(&bid(10, 5, 1), &bid(10, 5, 2)));
        assert!(!beats(&bid(10, 5, 2), &bid(10, 5, 2)));
    }
}
