//! The generator's settings and the constants of the NEXMark model.

/// Persons per [`PROPORTION_DENOMINATOR`] events (Beam: 1).
pub const PERSON_PROPORTION: u64 = 1;
/// Auctions per [`PROPORTION_DENOMINATOR`] events (Beam: 3).
pub const AUCTION_PROPORTION: u64 = 3;
/// Bids per [`PROPORTION_DENOMINATOR`] events (Beam: 46).
pub const BID_PROPORTION: u64 = 46;
/// Events per epoch: event `n` is a person if `n % 50 < 1`, an auction if
/// `n % 50 < 4`, else a bid.
pub const PROPORTION_DENOMINATOR: u64 = PERSON_PROPORTION + AUCTION_PROPORTION + BID_PROPORTION;

/// Id of the first person (Beam's `FIRST_PERSON_ID`).
pub const FIRST_PERSON_ID: u64 = 1000;
/// Id of the first auction (Beam's `FIRST_AUCTION_ID`).
pub const FIRST_AUCTION_ID: u64 = 1000;
/// Id of the first category (Beam's `FIRST_CATEGORY_ID`).
pub const FIRST_CATEGORY_ID: u64 = 10;
/// Number of categories (Beam's `AuctionGenerator.NUM_CATEGORIES`).
pub const NUM_CATEGORIES: u64 = 5;

/// Size of the blocks hot ids are picked from: a hot auction is the first of
/// the current block of 100 auctions, a hot seller the first and a hot
/// bidder the second person of the current block of 100 persons (Beam's
/// `HOT_AUCTION_RATIO`, `HOT_SELLER_RATIO`, `HOT_BIDDER_RATIO`, all 100;
/// the configurable `hot_*_ratio`s set how often a hot id is picked).
pub const HOT_BLOCK: u64 = 100;

/// Default event time of event 0: 2023-11-14T22:13:20Z, ms since the Unix
/// epoch (a fixed instant, so runs are reproducible).
pub const DEFAULT_BASE_TIME_MS: u64 = 1_700_000_000_000;

/// The settings of a NEXMark stream. Event `n` (0-based) is a pure function
/// of `(config, n)`.
///
/// The defaults are Beam's `NexmarkConfiguration` defaults, except the
/// event-time rate (Beam: 10 000 events/s; here 10 000 000 events/s, near
/// what this runtime generates per second, so event time advances about as
/// fast as the wall clock in an unthrottled run), the seed and the base
/// time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NexmarkConfig {
    /// Seed of the stream's randomness.
    pub seed: u64,
    /// Number of events of the whole stream (all workers); `None`:
    /// unbounded. Default `Some(1_000_000)`.
    pub events: Option<u64>,
    /// Event-time rate of the whole stream, events per second of event time
    /// (finite, > 0; fractional inter-event delays are kept exactly, so any
    /// rate works). Default 10 000 000.
    pub events_per_s: f64,
    /// Event time of event 0, ms since the Unix epoch. Default
    /// [`DEFAULT_BASE_TIME_MS`].
    pub base_time_ms: u64,
    /// Number of recent persons random sellers and bidders are drawn from
    /// (Beam's `numActivePeople`, default 1000; ≥ 1).
    pub num_active_people: u64,
    /// Number of recent auctions random bids are drawn from, and the
    /// horizon of auction lengths (Beam's `numInFlightAuctions`, default
    /// 100).
    pub num_in_flight_auctions: u64,
    /// A bid is for the hot auction with probability `1 - 1/ratio` (Beam's
    /// `hotAuctionRatio`, default 2; ≥ 1, 1 = never hot).
    pub hot_auction_ratio: u64,
    /// An auction's seller is the hot seller with probability
    /// `1 - 1/ratio` (Beam's `hotSellersRatio`, default 4; ≥ 1).
    pub hot_sellers_ratio: u64,
    /// A bid's bidder is the hot bidder with probability `1 - 1/ratio`
    /// (Beam's `hotBiddersRatio`, default 4; ≥ 1).
    pub hot_bidders_ratio: u64,
    /// Random person ids may run this far past the last person generated
    /// (Beam's `PERSON_ID_LEAD`, 10): a few bids and auctions name a person
    /// who appears a little later.
    pub person_id_lead: u64,
    /// Random auction ids of bids may run this far past the last auction
    /// generated (Beam's `AUCTION_ID_LEAD`, 10).
    pub auction_id_lead: u64,
    /// Average size of a person in bytes, reached with its `extra` field
    /// (Beam's `avgPersonByteSize`, default 200). Full events only.
    pub avg_person_byte_size: u32,
    /// Average size of an auction in bytes (Beam's `avgAuctionByteSize`,
    /// default 500). Full events only.
    pub avg_auction_byte_size: u32,
    /// Average size of a bid in bytes (Beam's `avgBidByteSize`, default
    /// 100). Full events only.
    pub avg_bid_byte_size: u32,
}

impl Default for NexmarkConfig {
    fn default() -> NexmarkConfig {
        NexmarkConfig {
            seed: 0,
            events: Some(1_000_000),
            events_per_s: 10_000_000.0,
            base_time_ms: DEFAULT_BASE_TIME_MS,
            num_active_people: 1000,
            num_in_flight_auctions: 100,
            hot_auction_ratio: 2,
            hot_sellers_ratio: 4,
            hot_bidders_ratio: 4,
            person_id_lead: 10,
            auction_id_lead: 10,
            avg_person_byte_size: 200,
            avg_auction_byte_size: 500,
            avg_bid_byte_size: 100,
        }
    }
}

impl NexmarkConfig {
    /// Checks the settings.
    ///
    /// # Errors
    /// A rate that is not a positive finite number, a hot ratio of 0, no
    /// active people, or ids that would overflow within the event budget.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.events_per_s.is_finite() && self.events_per_s > 0.0) {
            return Err(format!(
                "events per second {}: must be a positive number",
                self.events_per_s
            ));
        }
        for (name, v) in [
            ("hot auction ratio", self.hot_auction_ratio),
            ("hot sellers ratio", self.hot_sellers_ratio),
            ("hot bidders ratio", self.hot_bidders_ratio),
            ("number of active people", self.num_active_people),
        ] {
            if v == 0 {
                return Err(format!("{name} 0: must be at least 1"));
            }
        }
        // Draw bounds (`active + lead`, `in-flight + 1 + lead`) must fit.
        if self
            .num_active_people
            .checked_add(self.person_id_lead)
            .is_none()
            || self
                .num_in_flight_auctions
                .checked_add(self.auction_id_lead)
                .and_then(|v| v.checked_add(1))
                .is_none()
        {
            return Err("active people, in-flight auctions or id leads too large".into());
        }
        Ok(())
    }

    /// Event time of event `n`, ms since the Unix epoch:
    /// `base_time_ms + floor(n · 1000 / events_per_s)`, i.e. `n` times the
    /// fractional inter-event delay `10^6 / events_per_s` µs, rounded down
    /// to the ms (computed in `f64`, so exact for integral results and
    /// non-decreasing in `n`). Saturates at `u64::MAX`.
    #[inline(always)]
    pub fn time_of(&self, n: u64) -> u64 {
        // Signed conversions below 2^63: one instruction each on x86-64.
        let x = if n >> 63 == 0 {
            n as i64 as f64
        } else {
            n as f64
        };
        let ms = x * 1000.0 / self.events_per_s;
        let ms = if ms < 9.0e18 {
            ms as i64 as u64
        } else {
            ms as u64
        };
        self.base_time_ms.saturating_add(ms)
    }

    /// Inter-event delay of the whole stream, µs (fractional).
    pub fn inter_event_delay_us(&self) -> f64 {
        1_000_000.0 / self.events_per_s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate() {
        let c = NexmarkConfig::default();
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(PROPORTION_DENOMINATOR, 50);
        assert_eq!(c.inter_event_delay_us(), 0.1);
        for bad in [
            NexmarkConfig {
                events_per_s: 0.0,
                ..c
            },
            NexmarkConfig {
                events_per_s: f64::NAN,
                ..c
            },
            NexmarkConfig {
                events_per_s: f64::INFINITY,
                ..c
            },
            NexmarkConfig {
                hot_bidders_ratio: 0,
                ..c
            },
            NexmarkConfig {
                num_active_people: 0,
                ..c
            },
            NexmarkConfig {
                auction_id_lead: u64::MAX,
                ..c
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn time_is_fractional_and_exact() {
        let c = NexmarkConfig {
            events_per_s: 3.0,
            base_time_ms: 0,
            ..NexmarkConfig::default()
        };
        // 333.33… ms apart: floor(n · 1000 / 3).
        assert_eq!(
            (0..7).map(|n| c.time_of(n)).collect::<Vec<_>>(),
            [0, 333, 666, 1000, 1333, 1666, 2000]
        );
        let fast = NexmarkConfig {
            events_per_s: 1e9,
            base_time_ms: 5,
            ..c
        };
        assert_eq!(fast.time_of(999_999), 5);
        assert_eq!(fast.time_of(1_000_000), 6);
        assert_eq!(fast.time_of(u64::MAX), 5 + 18_446_744_073_709);
        let slow = NexmarkConfig {
            events_per_s: 1e-9,
            base_time_ms: u64::MAX - 1,
            ..c
        };
        assert_eq!(slow.time_of(1), u64::MAX);
    }
}
