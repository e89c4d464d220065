//! q6, average selling price per seller: at each closed auction with a
//! winner, the mean of its seller's last 10 winning prices (Beam's
//! `Query6`).
//!
//! Definition: the winning bids of [`super::winning`], keyed by the
//! auction's seller and taken in closing order (`expires`, then auction
//! id); at each, the seller's winning bids so far are cut to the 10 with
//! the latest bid times (Beam's `MovingMeanSellingPrice`: sorted by bid
//! time, then price, the oldest dropped) and their mean price, rounded half
//! up to whole cents, is a row.
//!
//! State retention (`--state-ttl-ms`, default a minute of event time): a
//! seller's state is its last 10 winning prices, kept until none of its
//! auctions closed with a winner for the TTL (its newest winning bid's
//! `expires` + TTL ≤ the watermark); then it is freed, and a later sale
//! starts from nothing (its row's mean is of that sale alone). As q18's,
//! that is a session per seller with the TTL as gap, over closing times:
//! two winning bids of a seller closing the TTL or more apart are in two
//! sessions, so the rows depend neither on arrival order nor on
//! `--workers`. Beam's global window keeps every seller forever, so a
//! long run's memory grows with the persons that ever sold.
//!
//! At the default TTL the rows equal Beam's (unbounded state) for the
//! generator at 900 events/s and above (its default is 10 000): an
//! auction's seller is the hot seller (the first person of the current
//! block of 100) or one of the last 1 000 persons or up to 10 beyond
//! (Beam's `numActivePeople`, `personIdLead`), and one person comes every
//! 50 events, so a person sells only during 1 010 persons' events (50 500
//! events), and an auction closes less than twice the auction horizon
//! (100 auctions: 1 667 events) after it opened. Two winning bids of one
//! seller thus close less than 53 834 events apart: under 60 s at 898
//! events/s or more. Slower streams, or files from elsewhere, can see a
//! seller's state expire; a larger `--state-ttl-ms` keeps it.
//!
//! Columns: `seller`, `auction`, `expires_ms` (when it closed),
//! `avg_price` (cents), `auctions` (how many winning prices the mean is of,
//! at most 10). Rows leave as the watermark reaches `expires`, sorted by
//! `expires`, then auction. No windows; `--max-delay-ms` is honoured.
//!
//! Where Beam and Flink disagree, and what we do: Beam's trigger fires per
//! winning bid in the order they reach the combiner (not deterministic);
//! we take them in closing order, so the rows are the same for any number
//! of workers. Flink's q6 (over a window `PARTITION BY seller ORDER BY
//! dateTime ROWS 10 PRECEDING`) is not supported by Flink itself; we
//! follow Beam. Beam's inner query (winning bids) is ours: see
//! [`super::winning`]. Memory: each seller that won in the last TTL of
//! event time keeps its last (at most 10) winning prices and a timer.

use super::q4::mean_rounded;
use super::winning::{winning_bids, AuctionBid};
use super::{Cx, Shard, Spec};
use crate::queries::common::QueryOption::*;
use crate::queries::driver::sink_window_rows;
use air_operators::graph::{KeyedProcessExt, KeyedProcessFunction, ProcessCx, Windowed};
use air_runtime::dataflow::Dataflow;
use serde::Serialize;

/// How many of a seller's latest winning prices q6 averages (Beam's
/// `maxNumBids`).
pub const Q6_LAST: usize = 10;

/// q6 as the driver runs it.
pub const SPEC: Spec = Spec {
    what: "average selling price per seller: at each closed auction, the mean of its seller's \
           last 10 winning prices (a seller with no sale for --state-ttl-ms is forgotten)",
    nature: "winning bids, then a running mean per seller: no windows",
    columns: &["seller", "auction", "expires_ms", "avg_price", "auctions"],
    order: "expires, auction",
    honoured: &[StateTtlMs, MaxDelayMs],
    window_ms: 10_000,
    slide_ms: 2_000,
    held_rows_per_event: |_| None,
    windowed: false,
    reads: 1,
    global: false,
    build,
};

/// A q6 row on its way to the writer.
#[derive(Clone, Copy, Debug, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct SellerPrice {
    seller: u64,
    auction: u64,
    expires: u64,
    avg_price: u64,
    auctions: u64,
}

/// A q6 CSV row.
#[derive(Serialize)]
struct Q6Csv {
    seller: u64,
    auction: u64,
    expires_ms: u64,
    avg_price: u64,
    auctions: u64,
}

/// One seller's state at its owner (saved at checkpoints).
#[derive(Default, Clone, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct Seller {
    /// Its latest (at most [`Q6_LAST`]) winning bids as (time, price),
    /// ascending; empty once forgotten.
    last: Vec<(u64, u64)>,
    /// When the newest of them closed (`expires`, ms); its state expires
    /// when the watermark reaches `newest + ttl`.
    newest: u64,
    /// The time of its pending expiry timer (0: none), at most
    /// `newest + ttl − 1`: when it fires before the seller expired, the
    /// next is set (one timer per TTL, not per sale).
    armed: u64,
    /// Winning bids not taken yet (each with a timer at its `expires − 1`).
    waiting: Vec<AuctionBid>,
}

/// The running mean per seller: winning bids wait until the watermark
/// reaches their `expires` (every winning bid of the seller closed before
/// has come), then are taken in closing order. A seller whose newest
/// taken winning bid closed `ttl` ms or more before the next one (or
/// before the watermark) is forgotten: the next starts from nothing.
struct MovingMean {
    /// State retention, ms of event time (`--state-ttl-ms`, at least 1).
    ttl: u64,
}

impl MovingMean {
    /// The timer that expires a seller whose newest winning bid closed at
    /// `newest`: it fires when the watermark reaches `newest + ttl`.
    fn expiry(&self, newest: u64) -> u64 {
        newest.saturating_add(self.ttl - 1)
    }
}

impl KeyedProcessFunction<u64, AuctionBid> for MovingMean {
    type State = Seller;
    type Out = SellerPrice;

    fn process(
        &mut self,
        _seller: &u64,
        w: AuctionBid,
        time: u64,
        s: &mut Seller,
        cx: &mut ProcessCx<SellerPrice>,
    ) {
        s.waiting.push(w);
        cx.register_timer(time.saturating_sub(1));
    }

    fn on_timer(&mut self, seller: &u64, t: u64, s: &mut Seller, cx: &mut ProcessCx<SellerPrice>) {
        let mut ready: Vec<AuctionBid> = Vec::new();
        s.waiting.retain(|w| {
            let due = w.time().saturating_sub(1) <= t;
            if due {
                ready.push(*w);
            }
            !due
        });
        ready.sort_by_key(|w| (w.time(), w.auction.id));
        for w in ready {
            if !s.last.is_empty() && w.time().saturating_sub(s.newest) >= self.ttl {
                // The seller's state expired before this sale: fresh.
                s.last.clear();
            }
            s.newest = s.newest.max(w.time());
            let at = s
                .last
                .partition_point(|&p| p <= (w.bid.date_time, w.bid.price));
            s.last.insert(at, (w.bid.date_time, w.bid.price));
            if s.last.len() > Q6_LAST {
                s.last.remove(0);
            }
            let sum: u64 = s.last.iter().map(|p| p.1).fold(0, u64::wrapping_add);
            cx.emit(SellerPrice {
                seller: *seller,
                auction: w.auction.id,
                expires: w.time(),
                avg_price: mean_rounded(sum, s.last.len() as u64),
                auctions: s.last.len() as u64,
            });
        }
        if s.armed == t {
            // This is the expiry timer (perhaps a waiting bid's too).
            s.armed = 0;
        }
        if !s.last.is_empty() && self.expiry(s.newest) <= t {
            // No sale for the TTL: forget the seller.
            s.last.clear();
        }
        if s.last.is_empty() {
            if s.waiting.is_empty() {
                cx.clear_state();
            }
        } else if s.armed == 0 {
            // Later than `t`: the seller has not expired.
            s.armed = self.expiry(s.newest);
            cx.register_timer(s.armed);
        }
    }
}

/// Winning bids → keyed by seller → the running mean of each seller's last
/// 10 winning prices, a row per closed auction at its `expires`.
fn build(cx: &Cx<'_>, df: &Dataflow, shard: &Shard<'_>) {
    let rows = winning_bids(cx, df, shard)
        .key_by(|w: &AuctionBid| w.auction.seller)
        .process_checkpointed(
            AuctionBid::time,
            MovingMean {
                ttl: cx.args.state_ttl().max(1),
            },
        )
        .map(|r: SellerPrice| Windowed {
            start: r.expires,
            end: r.expires,
            key: r.auction,
            value: r,
        });
    sink_window_rows(
        rows,
        |r| r.key,
        |r| Q6Csv {
            seller: r.value.seller,
            auction: r.value.auction,
            expires_ms: r.value.expires,
            avg_price: r.value.avg_price,
            auctions: r.value.auctions,
        },
        cx.header,
        cx.to,
    );
}
