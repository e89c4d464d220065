//! Event `n` of the NEXMark stream (compact form) and the sharded generator.
//!
//! Semantics follow the Apache Beam NEXMark generator
//! (`org.apache.beam.sdk.nexmark.sources.generator`: `Generator`,
//! `GeneratorConfig`, `model.PersonGenerator`, `AuctionGenerator`,
//! `BidGenerator`, `PriceGenerator`) and its Flink port (github:
//! nexmark/nexmark): the kind of event `n` from `n % 50`, ids derived from
//! `n`, hot auctions / sellers / bidders, log-uniform prices, auction
//! lengths from the in-flight horizon. The random source differs (wyrand
//! seeded per event from `(seed, n)` instead of `java.util.Random(n)`; a
//! bid's three draws are positions `4n + 1 ..= 4n + 3` of one wyrand
//! sequence, see `Model::bid_draws`), so values are not bit-identical to
//! Beam's, but every distribution is.

use super::config::{
    NexmarkConfig, AUCTION_PROPORTION, FIRST_AUCTION_ID, FIRST_CATEGORY_ID, FIRST_PERSON_ID,
    HOT_BLOCK, NUM_CATEGORIES, PERSON_PROPORTION, PROPORTION_DENOMINATOR,
};
use super::model::{Auction, Bid, EventKind, Name, NexEvent, Person};
use crate::sources::rng::{below, splitmix64, wymix, WyRand, WY_STEP};

/// First names of generated persons (Beam's `PersonGenerator.FIRST_NAMES`).
pub(crate) const FIRST_NAMES: [&str; 11] = [
    "Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter",
];
/// Last names of generated persons (Beam's `PersonGenerator.LAST_NAMES`).
pub(crate) const LAST_NAMES: [&str; 9] = [
    "Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris",
];

/// Every `first last` combination, built at compile time, indexed
/// `first * 9 + last`: the hot path copies a name, never builds one.
static NAMES: [Name; 99] = {
    let mut t = [Name::EMPTY; 99];
    let mut i = 0;
    while i < 99 {
        t[i] = Name::joined(FIRST_NAMES[i / 9], LAST_NAMES[i % 9]);
        i += 1;
    }
    t
};

/// The kind of event `n`: a person if `n % 50 < 1`, an auction if
/// `n % 50 < 4`, else a bid (proportions 1 : 3 : 46).
#[inline(always)]
pub fn event_kind(n: u64) -> EventKind {
    let offset = n % PROPORTION_DENOMINATOR;
    if offset < PERSON_PROPORTION {
        EventKind::Person
    } else if offset < PERSON_PROPORTION + AUCTION_PROPORTION {
        EventKind::Auction
    } else {
        EventKind::Bid
    }
}

/// The last person id (0-based, without [`FIRST_PERSON_ID`]) generated up
/// to event `n`: the id of `n` itself when `n` is a person (Beam's
/// `lastBase0PersonId`).
#[inline(always)]
pub fn last_base0_person_id(n: u64) -> u64 {
    // One person per epoch, at its start: the epoch number.
    const _: () = assert!(PERSON_PROPORTION == 1);
    n / PROPORTION_DENOMINATOR
}

/// The last auction id (0-based, without [`FIRST_AUCTION_ID`]) generated up
/// to event `n`: the id of `n` itself when `n` is an auction (Beam's
/// `lastBase0AuctionId`). For a person of the first epoch, before any
/// auction, Beam's `-1` saturates to 0.
#[inline(always)]
pub fn last_base0_auction_id(n: u64) -> u64 {
    let epoch = n / PROPORTION_DENOMINATOR;
    let offset = n % PROPORTION_DENOMINATOR;
    if offset < PERSON_PROPORTION {
        // The last auction of the previous epoch.
        (epoch * AUCTION_PROPORTION).saturating_sub(1)
    } else if offset >= PERSON_PROPORTION + AUCTION_PROPORTION {
        epoch * AUCTION_PROPORTION + AUCTION_PROPORTION - 1
    } else {
        epoch * AUCTION_PROPORTION + offset - PERSON_PROPORTION
    }
}

/// A price in cents, log-uniform from $1 to $10^6: `round(10^(6u) · 100)`
/// for `u = r / 2^64` uniform in `[0, 1)` (Beam's
/// `PriceGenerator.nextPrice`, `Math.round(Math.pow(10, 6u) * 100)`).
///
/// Computed without libm (`pow` and `round` are calls there, and were half
/// of the generator's time) and without a float-to-integer conversion:
/// `10^(6u) = 2^y`, `y = u · 6 log2 10`, in fixed point, is split into
/// `k + j/64 + ρ` (`0 ≤ ρ < 1/64`), and `2^y = 2^k · 2^(j/64) · e^(ρ ln 2)`
/// from the exponent bits, a table and a degree-5 polynomial (truncation
/// error below 2·10^-15 relative). Rounding is to nearest (ties to even,
/// which no price ever is).
#[inline(always)]
pub(crate) fn price(r: u64) -> u64 {
    const SCALE: f64 = 6.0 * std::f64::consts::LOG2_10;
    /// `y` as a 6.122 fixed-point number is `r · Y_SCALE`.
    const Y_SCALE: u64 = (SCALE * (1u64 << 58) as f64) as u64;
    let y = r as u128 * Y_SCALE as u128;
    let k = (y >> 122) as u64; // 0..20
    let j = (y >> 116) as usize & 63;
    // ρ = the next 52 bits of the fraction, from 2^-7 down to 2^-58.
    // t = ρ ln 2, from the next 52 bits as an integer (one product).
    const T_SCALE: f64 = std::f64::consts::LN_2 / (1u64 << 58) as f64;
    let t = ((y >> 64) as u64 & ((1 << 52) - 1)) as i64 as f64 * T_SCALE;
    // 1 + t + t²/2 + t³/6 + t⁴/24 + t⁵/120, in Estrin's form (shorter
    // dependency chains than Horner's).
    let t2 = t * t;
    let p = (1.0 + t) + t2 * ((0.5 + t * (1.0 / 6.0)) + t2 * (1.0 / 24.0 + t * (1.0 / 120.0)));
    // 100 · 2^(j/64) · 2^k: k added to the table value's exponent (exact:
    // every value is normal and far from overflow).
    let cents = f64::from_bits(EXP2_CENTS[j].to_bits() + (k << 52)) * p;
    // Round to an integer below 2^52 by adding 2^52: the sum's low
    // mantissa bits are the integer.
    const MAGIC: f64 = (1u64 << 52) as f64;
    (cents + MAGIC).to_bits() - MAGIC.to_bits()
}

/// `2^(j/64)` for `j` in `0..64`, computed at compile time.
static EXP2_TABLE: [f64; 64] = {
    let mut t = [0.0; 64];
    let mut j = 0;
    while j < 64 {
        t[j] = exp_series(j as f64 / 64.0 * std::f64::consts::LN_2);
        j += 1;
    }
    t
};

/// `100 · 2^(j/64)`: [`EXP2_TABLE`] in cents.
static EXP2_CENTS: [f64; 64] = {
    let mut t = [0.0; 64];
    let mut j = 0;
    while j < 64 {
        t[j] = EXP2_TABLE[j] * 100.0;
        j += 1;
    }
    t
};

/// `e^x` for `x` in `[0, 1)` by its Taylor series (30 terms: the remainder
/// is far below an ulp); compile-time only.
const fn exp_series(x: f64) -> f64 {
    let mut sum = 1.0;
    let mut term = 1.0;
    let mut k = 1;
    while k < 30 {
        term = term * x / k as f64;
        sum += term;
        k += 1;
    }
    sum
}

/// A config prepared for generating: the per-stream constants of event `n`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Model {
    pub(crate) cfg: NexmarkConfig,
    /// Seed of the per-event generators (`key ^ n`).
    key: u64,
    /// Start of the bids' draws: bid `n` draws positions `4n + 1 ..= 4n + 3`
    /// of the wyrand sequence from this state ([`Model::bid_draws`]).
    bid_key: u64,
    /// Events until `num_in_flight_auctions` more auctions are generated
    /// (`num_in_flight_auctions · 50 / 3`): the auction-length horizon.
    horizon_events: u64,
}

/// Salt of the per-event seeds ("NEXMARK\0").
const EVENT_SALT: u64 = 0x4e45_584d_4152_4b00;
/// Salt of the bids' draws ("BIDDRAWS").
const BID_SALT: u64 = 0x4249_4444_5241_5753;

impl Model {
    pub(crate) fn new(cfg: &NexmarkConfig) -> Model {
        Model {
            cfg: *cfg,
            key: splitmix64(cfg.seed ^ EVENT_SALT),
            bid_key: splitmix64(cfg.seed ^ BID_SALT),
            horizon_events: cfg
                .num_in_flight_auctions
                .saturating_mul(PROPORTION_DENOMINATOR)
                / AUCTION_PROPORTION,
        }
    }

    /// The random source of event `n`: its values depend on `(seed, n)` only.
    #[inline(always)]
    pub(crate) fn rng(&self, n: u64) -> WyRand {
        WyRand::new(self.key ^ n)
    }

    /// The three random draws of bid `n`: positions `4n + 1 ..= 4n + 3`
    /// of one wyrand sequence (seeded from the stream's seed), each
    /// computed from its position (one multiply for the base, one mix per
    /// draw, nothing carried from bid to bid). The sequence is wyrand's own,
    /// so the draws of all bids together are as random as consecutive
    /// wyrand output; no seed is mixed per event.
    #[inline(always)]
    pub(crate) fn bid_draws(&self, n: u64) -> [u64; 3] {
        let s = self
            .bid_key
            .wrapping_add(n.wrapping_mul(WY_STEP.wrapping_mul(4)));
        [
            wymix(s.wrapping_add(WY_STEP)),
            wymix(s.wrapping_add(WY_STEP.wrapping_mul(2))),
            wymix(s.wrapping_add(WY_STEP.wrapping_mul(3))),
        ]
    }

    /// A second, independent key for values that are a function of the
    /// stream and a small index (bid channel URLs).
    pub(crate) fn aux_key(&self) -> u64 {
        splitmix64(self.key ^ 0x4348_414e_4e45_4c53)
    }

    /// `hot_id` with probability `1 - 1/ratio` (Beam's
    /// `random.nextInt(ratio) > 0`), else `other`, without a branch (the
    /// choice is random, so a branch would mispredict often).
    #[inline(always)]
    fn pick_hot(r: u64, ratio: u64, hot_id: u64, other: u64) -> u64 {
        let hot = (below(r, ratio) > 0) as u64;
        let mask = hot.wrapping_neg();
        (hot_id & mask) | (other & !mask)
    }

    /// [`pick_hot`](Self::pick_hot) from one draw: `r · ratio` is split
    /// into its high word (Lemire's `below(r, ratio)`, the hot choice) and
    /// its low word, the fraction left over, which is again uniform over
    /// 64 bits (exactly, for a power-of-two ratio such as the default 2
    /// and 4) and is what `other` draws from.
    #[inline(always)]
    fn pick_hot_with(r: u64, ratio: u64, hot_id: u64, other: impl FnOnce(u64) -> u64) -> u64 {
        let p = r as u128 * ratio as u128;
        let hot = ((p >> 64) as u64 > 0) as u64;
        let mask = hot.wrapping_neg();
        (hot_id & mask) | (other(p as u64) & !mask)
    }

    /// A random recent person (0-based) as of event `n` from `r`: one of
    /// the last `num_active_people`, or up to `person_id_lead` beyond the
    /// last (Beam's `nextBase0PersonId`).
    #[inline(always)]
    fn random_person(&self, n: u64, r: u64) -> u64 {
        self.random_person_after(last_base0_person_id(n), r)
    }

    /// [`random_person`](Self::random_person) given
    /// `last_base0_person_id(n)`.
    #[inline(always)]
    fn random_person_after(&self, last_person: u64, r: u64) -> u64 {
        let num_people = last_person + 1;
        let active = num_people.min(self.cfg.num_active_people);
        num_people - active + below(r, active + self.cfg.person_id_lead)
    }

    /// The compact person of event `n` (a person event) at `date_time`
    /// (`time_of(n)`); draws 1 number.
    #[inline(always)]
    pub(crate) fn person(&self, n: u64, date_time: u64, rng: &mut WyRand) -> Person {
        // One draw for both names: the first from the high bits, the last
        // from the low bits (rotated up).
        let r = rng.next_u64();
        let first = below(r, FIRST_NAMES.len() as u64) as usize;
        let last = below(r.rotate_left(32), LAST_NAMES.len() as u64) as usize;
        Person {
            id: FIRST_PERSON_ID + last_base0_person_id(n),
            date_time,
            name: NAMES[first * LAST_NAMES.len() + last],
        }
    }

    /// The compact auction of event `n` (an auction event) at `date_time`
    /// (`time_of(n)`); draws 6 numbers.
    #[inline(always)]
    pub(crate) fn auction(&self, n: u64, date_time: u64, rng: &mut WyRand) -> Auction {
        // The hot seller is the first person of the current block of 100.
        // (Unlike Beam, the random seller is drawn even when the hot one is
        // picked: a fixed number of draws keeps the hot path branch-free.)
        let (r_hot, r_seller) = (rng.next_u64(), rng.next_u64());
        let seller = Self::pick_hot(
            r_hot,
            self.cfg.hot_sellers_ratio,
            last_base0_person_id(n) / HOT_BLOCK * HOT_BLOCK,
            self.random_person(n, r_seller),
        );
        let category = FIRST_CATEGORY_ID + below(rng.next_u64(), NUM_CATEGORIES);
        let initial_bid = price(rng.next_u64());
        // Length: uniform in 1..=2·horizon, the horizon being how long it
        // takes to generate `num_in_flight_auctions` more auctions (Beam's
        // `nextAuctionLengthMs`).
        let horizon_ms = self
            .cfg
            .time_of(n.saturating_add(self.horizon_events))
            .saturating_sub(date_time);
        let length = 1 + below(rng.next_u64(), horizon_ms.saturating_mul(2).max(1));
        let reserve = initial_bid + price(rng.next_u64());
        Auction {
            id: FIRST_AUCTION_ID + last_base0_auction_id(n),
            seller: FIRST_PERSON_ID + seller,
            category,
            initial_bid,
            reserve,
            date_time,
            expires: date_time.saturating_add(length),
        }
    }

    /// The compact bid of event `n` (a bid event) at `date_time`
    /// (`time_of(n)`); its 3 random draws are [`bid_draws`]
    /// (Self::bid_draws)`(n)`, not from the event's [`rng`](Self::rng).
    #[inline(always)]
    pub(crate) fn bid(&self, n: u64, date_time: u64) -> Bid {
        self.bid_in_epoch(
            BidEpoch::of(&self.cfg, n / PROPORTION_DENOMINATOR),
            n,
            date_time,
        )
    }

    /// [`bid`](Self::bid) of bid event `n` of epoch `e` (`n / 50`).
    #[inline(always)]
    fn bid_in_epoch(&self, e: BidEpoch, n: u64, date_time: u64) -> Bid {
        let mut b = self.bid_in_epoch_unpriced(e, n, date_time);
        b.price = price(b.price);
        b
    }

    /// [`bid_in_epoch`](Self::bid_in_epoch) with the price's random draw in
    /// place of the price ([`price`] of it is the price): a loop over many
    /// bids prices them in a second loop of its own.
    #[inline(always)]
    fn bid_in_epoch_unpriced(&self, e: BidEpoch, n: u64, date_time: u64) -> Bid {
        // One draw per id, hot choice and random id from the same draw
        // (`pick_hot_with`), and one for the price. The random ids are
        // Beam's `nextBase0AuctionId` / `nextBase0PersonId`, their ranges
        // computed once per epoch.
        let [r_auction, r_bidder, r_price] = self.bid_draws(n);
        let auction =
            Self::pick_hot_with(r_auction, self.cfg.hot_auction_ratio, e.hot_auction, |r| {
                e.auction_lo + below(r, e.auction_span)
            });
        let bidder = Self::pick_hot_with(r_bidder, self.cfg.hot_bidders_ratio, e.hot_bidder, |r| {
            e.person_lo + below(r, e.person_span)
        });
        Bid {
            auction: FIRST_AUCTION_ID + auction,
            bidder: FIRST_PERSON_ID + bidder,
            price: r_price,
            date_time,
        }
    }

    /// The compact event `n` at `date_time` (`time_of(n)`).
    #[inline(always)]
    pub(crate) fn event(&self, n: u64, date_time: u64) -> NexEvent {
        let mut rng = self.rng(n);
        match event_kind(n) {
            EventKind::Bid => NexEvent::Bid(self.bid(n, date_time)),
            EventKind::Auction => NexEvent::Auction(self.auction(n, date_time, &mut rng)),
            EventKind::Person => NexEvent::Person(self.person(n, date_time, &mut rng)),
        }
    }
}

/// What a bid of epoch `epoch` (event numbers `50 · epoch ..`) draws its
/// ids from, computed once per epoch: the hot auction and bidder, and the
/// ranges of the random ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct BidEpoch {
    /// The hot auction: the first of the last auction's block of 100 (the
    /// last auction of a bid is the epoch's third).
    hot_auction: u64,
    /// The hot bidder: the second person of the epoch's block of 100 (the
    /// first is the hot seller).
    hot_bidder: u64,
    /// A random auction is `auction_lo + below(r, auction_span)`: one of
    /// the last `num_in_flight_auctions + 1` or up to `auction_id_lead`
    /// beyond (Beam's `nextBase0AuctionId`).
    auction_lo: u64,
    auction_span: u64,
    /// A random bidder is `person_lo + below(r, person_span)`: one of the
    /// last `num_active_people` or up to `person_id_lead` beyond (Beam's
    /// `nextBase0PersonId`; [`Model::random_person_after`]).
    person_lo: u64,
    person_span: u64,
}

impl BidEpoch {
    #[inline(always)]
    fn of(cfg: &NexmarkConfig, epoch: u64) -> BidEpoch {
        let last_auction = epoch * AUCTION_PROPORTION + AUCTION_PROPORTION - 1;
        let auction_lo = last_auction.saturating_sub(cfg.num_in_flight_auctions);
        // The epoch is also its last person (`last_base0_person_id`).
        let num_people = epoch + 1;
        let active = num_people.min(cfg.num_active_people);
        BidEpoch {
            hot_auction: last_auction / HOT_BLOCK * HOT_BLOCK,
            hot_bidder: epoch / HOT_BLOCK * HOT_BLOCK + 1,
            auction_lo,
            auction_span: last_auction - auction_lo + 1 + cfg.auction_id_lead,
            person_lo: num_people - active,
            person_span: active + cfg.person_id_lead,
        }
    }
}

/// Event times of one shard, cached over the runs of events that share a
/// millisecond: at high rates most events skip the division of
/// [`NexmarkConfig::time_of`]. At an integral rate, times are stepped
/// exactly in integers instead ([`Stepper`]): no division and no float per
/// event at any rate. Always equal to `time_of(n)`.
#[derive(Clone, Copy, Debug)]
struct Clock {
    /// `time_of(m)` for the event numbers `m` below `until` from the last
    /// refresh on.
    time: u64,
    until: u64,
    /// Whether refreshing pays: at least 8 of the shard's events per ms.
    enabled: bool,
    /// The integer stepper, at an integral rate.
    stepper: Option<Stepper>,
}

/// `floor(n · 1000 / rate)` stepped from one event number to the next of
/// a shard (`n + step`) in integers: quotient and remainder advance by
/// those of `step · 1000 / rate`. Equal to [`NexmarkConfig::time_of`]'s
/// f64 `n · 1000 / rate` rounded down while `n · 1000 < 2^52` (an exact
/// product, and a quotient of integers below 2^52 never rounds up to the
/// next integer in f64); beyond `LIMIT` the clock falls back to `time_of`.
#[derive(Clone, Copy, Debug)]
struct Stepper {
    rate: u64,
    step: u64,
    /// `step · 1000 / rate` and `step · 1000 % rate`.
    q: u64,
    r: u64,
    /// The event number of `t` and `rem` (`None`: none yet).
    n: Option<u64>,
    /// `floor(n · 1000 / rate)` and `n · 1000 % rate`.
    t: u64,
    rem: u64,
    /// Division by `rate` as a multiply, for times computed from the event
    /// number alone (`None` below 2 events/s).
    recip: Option<Reciprocal>,
}

/// `floor(x / d)` for every `x < 2^52` by one multiply and a shift
/// (Granlund and Montgomery's method, rounding the reciprocal up):
/// `m = ceil(2^k / d)` with `k = max(52 + ceil(log2 d), 64)`. Exact: with
/// `m = 2^k / d + e`, `0 ≤ e < 1`, `x · m / 2^k = x / d + x · e / 2^k`, and
/// `x · e / 2^k < 2^52 · d / 2^(52 + ceil(log2 d)) / d ≤ 1 / d`, less than
/// the gap from `x / d` to the next integer. `m < 2^64` for `d ≥ 2`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Reciprocal {
    m: u64,
    /// `k - 64`.
    shift: u32,
}

impl Reciprocal {
    /// The reciprocal of `d`, for `2 ≤ d < 2^52` (else `None`).
    fn new(d: u64) -> Option<Reciprocal> {
        if !(2..1 << 52).contains(&d) {
            return None;
        }
        let log = 64 - (d - 1).leading_zeros(); // ceil(log2 d)
        let k = (52 + log).max(64);
        let m = (1u128 << k).div_ceil(d as u128);
        Some(Reciprocal {
            m: u64::try_from(m).ok()?,
            shift: k - 64,
        })
    }

    /// `floor(x / d)`, for `x < 2^52`.
    #[inline(always)]
    fn div(self, x: u64) -> u64 {
        debug_assert!(x < 1 << 52);
        ((x as u128 * self.m as u128) >> 64) as u64 >> self.shift
    }
}

impl Stepper {
    /// Event numbers below this are stepped (`n · 1000 < 2^52`).
    const LIMIT: u64 = (1 << 52) / 1000;

    /// A stepper for `rate` events/s if it is an integer below 2^52.
    fn new(rate: f64, step: u64) -> Option<Stepper> {
        if !(rate >= 1.0 && rate < (1u64 << 52) as f64 && rate.fract() == 0.0) {
            return None;
        }
        let rate = rate as u64;
        let d = step as u128 * 1000;
        Some(Stepper {
            rate,
            step,
            q: (d / rate as u128) as u64,
            r: (d % rate as u128) as u64,
            n: None,
            t: 0,
            rem: 0,
            recip: Reciprocal::new(rate),
        })
    }

    /// `floor(n · 1000 / rate)`, for `n < LIMIT`.
    #[inline(always)]
    fn ms(&mut self, n: u64) -> u64 {
        match self.n {
            Some(m) if m == n => {}
            Some(m) if m.wrapping_add(self.step) == n => {
                self.t += self.q;
                self.rem += self.r;
                if self.rem >= self.rate {
                    self.rem -= self.rate;
                    self.t += 1;
                }
                self.n = Some(n);
            }
            _ => {
                let p = n as u128 * 1000;
                self.t = (p / self.rate as u128) as u64;
                self.rem = (p % self.rate as u128) as u64;
                self.n = Some(n);
            }
        }
        self.t
    }
}

impl Clock {
    fn new(cfg: &NexmarkConfig, step: u64) -> Clock {
        Clock {
            time: 0,
            until: 0,
            enabled: cfg.events_per_s / 1000.0 / step as f64 >= 8.0,
            stepper: Stepper::new(cfg.events_per_s, step),
        }
    }

    /// `cfg.time_of(n)`, for non-decreasing `n`.
    #[inline(always)]
    fn time(&mut self, cfg: &NexmarkConfig, n: u64) -> u64 {
        if let Some(st) = &mut self.stepper {
            if n < Stepper::LIMIT {
                return cfg.base_time_ms.saturating_add(st.ms(n));
            }
        }
        if n < self.until {
            self.time
        } else {
            self.refresh(cfg, n)
        }
    }

    /// Computes `time_of(n)` and the first event number after `n` with a
    /// later time (guessed from the inverse of `time_of`, then corrected:
    /// `time_of` is non-decreasing, so `until` is valid once
    /// `time_of(until - 1) <= time`).
    #[inline(never)]
    fn refresh(&mut self, cfg: &NexmarkConfig, n: u64) -> u64 {
        let t = cfg.time_of(n);
        self.time = t;
        self.until = n.saturating_add(1);
        if !self.enabled || t == u64::MAX {
            return t;
        }
        let next_ms = (t - cfg.base_time_ms + 1) as f64;
        let guess = (next_ms * cfg.events_per_s / 1000.0).ceil();
        if guess.is_nan() || guess >= 1.8e19 {
            return t;
        }
        let mut c = (guess as u64).max(n + 1);
        for _ in 0..64 {
            if c == u64::MAX || cfg.time_of(c) > t {
                break;
            }
            c += 1;
        }
        for _ in 0..64 {
            if c == n + 1 || cfg.time_of(c - 1) <= t {
                self.until = c;
                return t;
            }
            c -= 1;
        }
        t
    }
}

/// The compact event `n` (0-based) of the stream of `cfg` (the sequential
/// definition: [`NexmarkGenerator`] shards yield exactly these).
pub fn compact_event(cfg: &NexmarkConfig, n: u64) -> NexEvent {
    Model::new(cfg).event(n, cfg.time_of(n))
}

/// What one [`NexmarkGenerator::fill_bids`] call did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BidFill {
    /// Bids written to the front of the buffer.
    pub bids: usize,
    /// Events of the stream consumed: the bids and the persons and
    /// auctions stepped over (0: the shard is exhausted).
    pub events: u64,
}

/// One shard of the NEXMark stream, compact events.
///
/// Worker `w` of `W` generates event numbers `w, w + W, w + 2W, …` below
/// `cfg.events` (all of them when unbounded). Event `n` is a pure function
/// of `(cfg, n)`, so the union of the shards is exactly the sequential
/// stream ([`compact_event`] for `n = 0, 1, …`) for any `W`, and each shard
/// is in event-time order (event time is non-decreasing in `n`).
///
/// ```
/// use air_operators::sources::nexmark::*;
/// let cfg = NexmarkConfig { events: Some(100), ..NexmarkConfig::default() };
/// let mut g = NexmarkGenerator::new(&cfg, 1, 2); // odd event numbers
/// let mut buf = [NexEvent::default(); 64];
/// assert_eq!(g.fill(&mut buf), 50);
/// assert_eq!(buf[0], compact_event(&cfg, 1));
/// assert!(matches!(buf[0], NexEvent::Auction(a) if a.id == 1000));
/// assert_eq!(g.fill(&mut buf), 0);
/// ```
#[derive(Clone, Debug)]
pub struct NexmarkGenerator {
    model: Model,
    /// The next event number.
    next: u64,
    step: u64,
    /// Events this shard has left (`u64::MAX`: unbounded).
    remaining: u64,
    generated: u64,
    clock: Clock,
    /// Which shard it is: (worker, workers) it was made for.
    shard: (usize, usize),
}

impl NexmarkGenerator {
    /// The shard of worker `worker` of `workers`.
    ///
    /// # Panics
    /// If `workers == 0`, `worker >= workers`, or `cfg` does not
    /// [validate](NexmarkConfig::validate).
    pub fn new(cfg: &NexmarkConfig, worker: usize, workers: usize) -> NexmarkGenerator {
        assert!(
            workers > 0 && worker < workers,
            "worker {worker} of {workers}"
        );
        if let Err(e) = cfg.validate() {
            panic!("invalid NEXMark config: {e}");
        }
        let (w, step) = (worker as u64, workers as u64);
        let remaining = match cfg.events {
            Some(total) if total > w => (total - w - 1) / step + 1,
            Some(_) => 0,
            None => u64::MAX,
        };
        NexmarkGenerator {
            model: Model::new(cfg),
            next: w,
            step,
            remaining,
            generated: 0,
            clock: Clock::new(cfg, step),
            shard: (worker, workers),
        }
    }

    /// Goes on as if it had generated `n` events of its shard already (a
    /// checkpoint's position; [`fill_bids`](Self::fill_bids) counts the
    /// events it stepped over): every event is a function of its number, so
    /// this is O(1).
    ///
    /// # Errors
    /// It generated events already, or `n` is past its shard.
    pub fn skip_to(&mut self, n: u64) -> Result<(), String> {
        if self.generated != 0 {
            return Err("the generator already generated events".into());
        }
        if n > self.remaining {
            return Err(format!(
                "position {n} is past this worker's {} events",
                self.remaining
            ));
        }
        self.next = self.next.wrapping_add(n.wrapping_mul(self.step));
        self.remaining -= n;
        self.generated = n;
        Ok(())
    }

    /// Writes this shard's next events to the front of `out` and returns how
    /// many: `out.len()`, fewer at the end of the stream, 0 once exhausted.
    /// Builds no strings and allocates nothing.
    #[inline]
    pub fn fill(&mut self, out: &mut [NexEvent]) -> usize {
        self.fill_with(out, |model, n, t| model.event(n, t))
    }

    /// [`fill`](Self::fill) with the event `make(model, n, time of n)`.
    #[inline(always)]
    pub(crate) fn fill_with<T>(
        &mut self,
        out: &mut [T],
        mut make: impl FnMut(&Model, u64, u64) -> T,
    ) -> usize {
        let k = (out.len() as u64).min(self.remaining) as usize;
        let (model, step, clock) = (&self.model, self.step, &mut self.clock);
        let mut n = self.next;
        for slot in &mut out[..k] {
            *slot = make(model, n, clock.time(&model.cfg, n));
            n = n.wrapping_add(step);
        }
        self.next = n;
        self.remaining -= k as u64;
        self.generated += k as u64;
        k
    }

    /// Writes this shard's next bids to the front of `out`, stepping over
    /// its persons and auctions without making them: a filter on the event
    /// kind pushed into the generator, for queries that read bids only
    /// (NEXMark q0, q1, q2, q5, q7, …). The bids are exactly those
    /// [`fill`](Self::fill) yields, in the same order.
    ///
    /// Returns how many bids were written (`out.len()`, fewer at the end of
    /// the stream) and how many events of the stream that consumed, bids
    /// and skipped events together (0 once exhausted). [`generated`]
    /// (Self::generated) counts the skipped events too.
    ///
    /// ```
    /// use air_operators::sources::nexmark::*;
    /// let cfg = NexmarkConfig { events: Some(100), ..NexmarkConfig::default() };
    /// let mut bids = [Bid::default(); 128];
    /// let f = NexmarkGenerator::new(&cfg, 0, 1).fill_bids(&mut bids);
    /// assert_eq!(f, BidFill { bids: 92, events: 100 }); // 46 of every 50
    /// assert_eq!(NexEvent::Bid(bids[0]), compact_event(&cfg, 4));
    /// ```
    #[inline]
    pub fn fill_bids(&mut self, out: &mut [Bid]) -> BidFill {
        if let Some(f) = self.fill_bids_runs(out) {
            return f;
        }
        let (model, step, clock) = (&self.model, self.step, &mut self.clock);
        let mut n = self.next;
        let mut left = self.remaining;
        let mut k = 0;
        while k < out.len() && left > 0 {
            // Every event's time is stepped, bid or not: the clock steps
            // from one event number of the shard to the next.
            let t = clock.time(&model.cfg, n);
            if n % PROPORTION_DENOMINATOR >= PERSON_PROPORTION + AUCTION_PROPORTION {
                out[k] = model.bid(n, t);
                k += 1;
            }
            n = n.wrapping_add(step);
            left -= 1;
        }
        let events = self.remaining - left;
        self.next = n;
        self.remaining = left;
        self.generated += events;
        BidFill { bids: k, events }
    }

    /// [`fill_bids`](Self::fill_bids) at an integral rate with every event
    /// number of the call below [`Stepper::LIMIT`] (else `None`, nothing
    /// done), epoch by epoch: the bids of an epoch are a run of the shard's
    /// event numbers (offsets 4..50 in the epoch), made in one loop whose
    /// iterations share nothing but the epoch's constants ([`BidEpoch`]),
    /// the time of each computed from its event number
    /// ([`Reciprocal`]); persons and auctions are stepped over in one add.
    /// Consumes at most `2 · out.len() + 50` events (a shard may hold few
    /// bids or none: with 50 workers, worker 0 gets the persons alone).
    #[inline(always)]
    fn fill_bids_runs(&mut self, out: &mut [Bid]) -> Option<BidFill> {
        let recip = self.clock.stepper.as_ref()?.recip?;
        let step = self.step;
        let budget = (out.len() as u64)
            .saturating_mul(2)
            .saturating_add(PROPORTION_DENOMINATOR)
            .min(self.remaining);
        // One past the last event number this call may consume.
        let end = budget
            .checked_mul(step)
            .and_then(|d| d.checked_add(self.next))?;
        if end >= Stepper::LIMIT {
            return None;
        }
        let model = &self.model;
        let base = model.cfg.base_time_ms;
        const FIRST_BID: u64 = PERSON_PROPORTION + AUCTION_PROPORTION;
        let mut n = self.next;
        let mut k = 0;
        while k < out.len() && n < end {
            let (epoch, offset) = (n / PROPORTION_DENOMINATOR, n % PROPORTION_DENOMINATOR);
            if offset < FIRST_BID {
                // The epoch's persons and auctions of this shard.
                n += (FIRST_BID - offset).div_ceil(step) * step;
                continue;
            }
            let epoch_end = ((epoch + 1) * PROPORTION_DENOMINATOR).min(end);
            let run = ((epoch_end - n).div_ceil(step) as usize).min(out.len() - k);
            let e = BidEpoch::of(&model.cfg, epoch);
            let bids = &mut out[k..k + run];
            for (i, b) in bids.iter_mut().enumerate() {
                let m = n + i as u64 * step;
                *b = model.bid_in_epoch_unpriced(e, m, base.saturating_add(recip.div(m * 1000)));
            }
            // Prices in a loop of their own: a float chain per bid, many
            // bids in flight at once.
            for b in bids {
                b.price = price(b.price);
            }
            k += run;
            n += run as u64 * step;
        }
        // A step over persons and auctions may pass `end`: the events past
        // it are not consumed.
        let n = n.min(end);
        let events = (n - self.next) / step;
        self.next = n;
        self.remaining -= events;
        self.generated += events;
        Some(BidFill { bids: k, events })
    }

    /// Events generated so far by this shard.
    pub fn generated(&self) -> u64 {
        self.generated
    }

    /// Events this shard has left (`None`: unbounded).
    pub fn remaining(&self) -> Option<u64> {
        self.model.cfg.events.map(|_| self.remaining)
    }

    /// The event number of this shard's next event (`None`: exhausted).
    pub fn next_event_number(&self) -> Option<u64> {
        (self.remaining > 0).then_some(self.next)
    }

    /// Event-time watermark of this shard, ms since the Unix epoch: no
    /// event this shard has yet to generate has an earlier `date_time` (it
    /// is the next event's time). `u64::MAX` once the shard is exhausted.
    pub fn watermark_ms(&self) -> u64 {
        match self.next_event_number() {
            Some(n) => self.model.cfg.time_of(n),
            None => u64::MAX,
        }
    }

    /// The config this shard generates from.
    pub fn config(&self) -> &NexmarkConfig {
        &self.model.cfg
    }
}

impl NexmarkGenerator {
    /// Stamps the next event at `at_ms` and those after it on from there at
    /// the stream's rate (a resumed paced run,
    /// [`crate::sources::pace::Generator::restamp_next`]): the stream's
    /// `base_time_ms` moves by as much as the next event's time does, and
    /// with it every time the model derives (auctions' expiries).
    pub fn restamp_next(&mut self, at_ms: u64) {
        let mut cfg = self.model.cfg;
        let offset = cfg.time_of(self.next) - cfg.base_time_ms;
        cfg.base_time_ms = at_ms.saturating_sub(offset);
        self.model = Model::new(&cfg);
        self.clock = Clock::new(&cfg, self.step);
    }
}

impl crate::sources::shards::Sharded for NexmarkGenerator {
    type Event = NexEvent;
    fn shard(&self) -> (usize, usize) {
        self.shard
    }
    fn sibling(&self, shard: usize, shards: usize) -> Result<Self, String> {
        if shard >= shards {
            return Err(format!("shard {shard} of {shards}"));
        }
        Ok(NexmarkGenerator::new(&self.model.cfg, shard, shards))
    }
    fn generated(&self) -> u64 {
        self.generated
    }
    fn skip_to(&mut self, n: u64) -> Result<(), String> {
        NexmarkGenerator::skip_to(self, n)
    }
    fn time_of(event: &NexEvent) -> u64 {
        event.date_time()
    }
    fn fill(&mut self, out: &mut [NexEvent]) -> usize {
        NexmarkGenerator::fill(self, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base0_ids_follow_beam() {
        // Epoch 0: person 0, auctions 0..3, bids.
        assert_eq!(last_base0_person_id(0), 0);
        assert_eq!(last_base0_person_id(49), 0);
        assert_eq!(last_base0_person_id(50), 1);
        assert_eq!(last_base0_auction_id(0), 0); // Beam: -1
        assert_eq!(last_base0_auction_id(1), 0);
        assert_eq!(last_base0_auction_id(3), 2);
        assert_eq!(last_base0_auction_id(4), 2);
        assert_eq!(last_base0_auction_id(50), 2);
        assert_eq!(last_base0_auction_id(51), 3);
        assert_eq!(last_base0_auction_id(149), 8);
        assert_eq!(event_kind(0), EventKind::Person);
        assert_eq!(event_kind(3), EventKind::Auction);
        assert_eq!(event_kind(4), EventKind::Bid);
        assert_eq!(event_kind(100), EventKind::Person);
    }

    #[test]
    fn prices_are_log_uniform_cents() {
        assert_eq!(price(0), 100);
        assert_eq!(price(u64::MAX), 100_000_000);
        // Median of 10^(6u)·100 is 10^3·100.
        assert_eq!(price(1 << 63), 100_000);
        let mut rng = WyRand::new(5);
        let mut below_10_dollars = 0;
        for _ in 0..60_000 {
            let p = price(rng.next_u64());
            assert!((100..=100_000_000).contains(&p));
            below_10_dollars += (p < 1000) as u32;
        }
        // P(10^(6u) < 10) = 1/6.
        assert!(
            (9_500..10_500).contains(&below_10_dollars),
            "{below_10_dollars}"
        );
    }

    #[test]
    fn prices_match_beams_formula() {
        for (j, &v) in EXP2_TABLE.iter().enumerate() {
            let want = (j as f64 / 64.0).exp2();
            assert!((v - want).abs() <= 2.0 * f64::EPSILON * want, "{j}");
        }
        // `Math.round(Math.pow(10, 6u) * 100)` but for the rare value
        // within a hair of a half cent.
        let mut rng = WyRand::new(11);
        let mut differ = 0;
        for i in 0..1_000_000u64 {
            let r = if i < 64 { 1 << i } else { rng.next_u64() };
            let u = r as f64 / 2f64.powi(64);
            let beam = (10f64.powf(u * 6.0) * 100.0 + 0.5).floor() as u64;
            let p = price(r);
            assert!(p.abs_diff(beam) <= 1, "{r}: {p} vs {beam}");
            differ += (p != beam) as u32;
        }
        assert!(differ <= 2, "{differ}");
    }

    #[test]
    fn names_table() {
        assert_eq!(NAMES[0].as_str(), "Peter Shultz");
        assert_eq!(NAMES[98].as_str(), "Walter Noris");
    }

    #[test]
    fn cached_times_equal_time_of() {
        for rate in [
            3.0,
            999.0,
            1000.0,
            8000.0,
            16_001.0,
            1e4,
            7e6 + 0.3,
            1.234_567e7,
            1e9,
            3e12,
        ] {
            for workers in 1..=4 {
                let cfg = NexmarkConfig {
                    events_per_s: rate,
                    events: Some(200_000),
                    base_time_ms: 17,
                    ..NexmarkConfig::default()
                };
                let mut g = NexmarkGenerator::new(&cfg, workers - 1, workers);
                let mut buf = vec![NexEvent::default(); 1000];
                let mut n = workers as u64 - 1;
                loop {
                    let k = g.fill(&mut buf);
                    if k == 0 {
                        break;
                    }
                    for e in &buf[..k] {
                        assert_eq!(e.date_time(), cfg.time_of(n), "rate {rate}, event {n}");
                        n += workers as u64;
                    }
                }
            }
        }
        // Integral rates around the stepper's limit, each shard stepped
        // across it, and jumps (a stepper not fed every event number).
        for rate in [1.0, 7.0, 10_000.0, 999_983.0, 1e7, 4.5e15] {
            for step in [1u64, 3, 1000] {
                let cfg = NexmarkConfig {
                    events_per_s: rate,
                    events: None,
                    base_time_ms: 5,
                    ..NexmarkConfig::default()
                };
                let mut clock = Clock::new(&cfg, step);
                let start = Stepper::LIMIT - 20_000 * step;
                for n in (start..Stepper::LIMIT + 20_000 * step).step_by(step as usize) {
                    assert_eq!(
                        clock.time(&cfg, n),
                        cfg.time_of(n),
                        "rate {rate}, event {n}"
                    );
                }
                let mut clock = Clock::new(&cfg, step);
                for n in [0, 5, 5, 6, 6 + step, 1 << 40, (1 << 40) + step, 1 << 41] {
                    assert_eq!(
                        clock.time(&cfg, n),
                        cfg.time_of(n),
                        "rate {rate}, event {n}"
                    );
                }
            }
        }
        // Far event numbers, where f64 cannot tell neighbours apart.
        let cfg = NexmarkConfig {
            events_per_s: 1e9,
            events: None,
            ..NexmarkConfig::default()
        };
        let mut clock = Clock::new(&cfg, 1);
        for n in (1u64 << 60)..(1u64 << 60) + 100_000 {
            assert_eq!(clock.time(&cfg, n), cfg.time_of(n));
        }
        for n in u64::MAX - 1000..u64::MAX {
            assert_eq!(clock.time(&cfg, n), cfg.time_of(n));
        }
    }

    #[test]
    fn shard_counts() {
        let cfg = NexmarkConfig {
            events: Some(10),
            ..NexmarkConfig::default()
        };
        let counts: Vec<u64> = (0..4)
            .map(|w| NexmarkGenerator::new(&cfg, w, 4).remaining().unwrap())
            .collect();
        assert_eq!(counts, [3, 3, 2, 2]);
        assert_eq!(NexmarkGenerator::new(&cfg, 3, 20).remaining(), Some(1));
        assert_eq!(NexmarkGenerator::new(&cfg, 10, 20).remaining(), Some(0));
        let unbounded = NexmarkConfig {
            events: None,
            ..cfg
        };
        let mut g = NexmarkGenerator::new(&unbounded, 0, 1);
        assert_eq!(g.remaining(), None);
        let mut buf = [NexEvent::default(); 8];
        assert_eq!(g.fill(&mut buf), 8);
        assert_eq!(g.next_event_number(), Some(8));
        assert_eq!(g.watermark_ms(), unbounded.time_of(8));
    }

    /// `Reciprocal::div` equals integer division for every `x < 2^52`:
    /// edge divisors (2, powers of two and their neighbours, Beam's and
    /// Flink's rates, the largest) and pseudo-random ones, against edge
    /// numerators (multiples of `d` and their neighbours, the largest)
    /// and pseudo-random ones.
    #[test]
    fn reciprocal_division_is_exact() {
        assert_eq!(Reciprocal::new(0), None);
        assert_eq!(Reciprocal::new(1), None);
        assert_eq!(Reciprocal::new(1 << 52), None);
        let mut rng = WyRand::new(5);
        let mut divisors = vec![2, 3, 4, 5, 7, 1000, 1023, 1024, 1025, 4096, 4097];
        divisors.extend([10_000, 10_000_000, 1 << 30, (1 << 52) - 1, (1 << 51) + 1]);
        divisors.extend((0..200).map(|_| 2 + below(rng.next_u64(), (1 << 52) - 2)));
        divisors.extend((0..200).map(|_| 2 + below(rng.next_u64(), 100_000)));
        const X_MAX: u64 = (1 << 52) - 1;
        for d in divisors {
            let r = Reciprocal::new(d).expect("2 <= d < 2^52");
            let q_max = X_MAX / d;
            let mut xs = vec![0, 1, d - 1, d, d + 1, X_MAX, X_MAX - 1];
            xs.extend([
                q_max * d,
                q_max * d - 1,
                ((q_max / 2) * d).saturating_sub(1),
            ]);
            xs.extend((0..300).map(|_| below(rng.next_u64(), X_MAX + 1)));
            for x in xs.into_iter().filter(|&x| x <= X_MAX) {
                assert_eq!(r.div(x), x / d, "{x} / {d}");
            }
        }
    }

    /// A bid's random ids follow Beam's `nextBase0AuctionId` and
    /// `nextBase0PersonId` ranges through the per-epoch constants: over the
    /// bids of an early epoch (fewer people than `num_active_people`) and a
    /// late one, under 5000 seeds, every id is in range and both ends of
    /// each range occur. (Hot ratio 1: never hot.)
    #[test]
    fn bid_ids_cover_beams_ranges() {
        for epoch in [3u64, 40_000] {
            let mut seen = [(u64::MAX, 0), (u64::MAX, 0)];
            let mut want = [(0, 0), (0, 0)];
            for seed in 0..5000 {
                let cfg = NexmarkConfig {
                    seed,
                    hot_auction_ratio: 1,
                    hot_bidders_ratio: 1,
                    ..NexmarkConfig::default()
                };
                let last_auction = epoch * 3 + 2;
                let people = epoch + 1;
                want = [
                    (
                        last_auction.saturating_sub(cfg.num_in_flight_auctions),
                        last_auction + cfg.auction_id_lead,
                    ),
                    (
                        people - people.min(cfg.num_active_people),
                        people - 1 + cfg.person_id_lead,
                    ),
                ];
                let model = Model::new(&cfg);
                for n in epoch * 50 + 4..epoch * 50 + 50 {
                    let b = model.bid(n, 0);
                    let ids = [b.auction - FIRST_AUCTION_ID, b.bidder - FIRST_PERSON_ID];
                    for ((id, s), w) in ids.into_iter().zip(&mut seen).zip(want) {
                        assert!((w.0..=w.1).contains(&id), "id {id} of epoch {epoch}");
                        *s = (s.0.min(id), s.1.max(id));
                    }
                }
            }
            assert_eq!(seen, want, "epoch {epoch}: (auction, bidder) ranges");
        }
    }

    /// `fill_bids` yields exactly the bids of `fill`, consuming the same
    /// events, for every shape of shard: one or many workers (50 workers:
    /// shards of persons or auctions alone), tiny and large buffers,
    /// integral and fractional rates (the stepped and the generic loop),
    /// and across `Stepper::LIMIT`, where the stepped loop hands over.
    #[test]
    fn fill_bids_equals_the_bids_of_fill() {
        let check =
            |cfg: &NexmarkConfig, w: usize, workers: usize, start: Option<u64>, cap: usize| {
                let mut all = NexmarkGenerator::new(cfg, w, workers);
                let mut bids_only = all.clone();
                if let Some(n) = start {
                    all.next = n;
                    bids_only.next = n;
                }
                let mut want = Vec::new();
                let mut ev = vec![NexEvent::default(); 61];
                loop {
                    let k = all.fill(&mut ev);
                    if k == 0 || want.len() > 3000 {
                        break;
                    }
                    want.extend(ev[..k].iter().filter_map(|e| match e {
                        NexEvent::Bid(b) => Some(*b),
                        _ => None,
                    }));
                }
                let mut got = Vec::new();
                let mut buf = vec![Bid::default(); cap];
                let mut events = 0;
                while got.len() < want.len() || all.remaining == 0 {
                    let f = bids_only.fill_bids(&mut buf);
                    events += f.events;
                    got.extend_from_slice(&buf[..f.bids]);
                    if f.events == 0 {
                        break;
                    }
                }
                got.truncate(want.len());
                assert_eq!(
                    got, want,
                    "worker {w} of {workers}, cap {cap}, start {start:?}"
                );
                if all.remaining == 0 {
                    assert_eq!(events, all.generated, "worker {w} of {workers}");
                    assert_eq!(bids_only.generated(), all.generated());
                }
            };
        for rate in [10_000.0, 1e7, 333.5] {
            let cfg = NexmarkConfig {
                events: Some(2_000),
                events_per_s: rate,
                ..NexmarkConfig::default()
            };
            for (w, workers) in [(0, 1), (1, 2), (2, 3), (0, 50), (3, 50), (10, 50), (7, 51)] {
                for cap in [1, 7, 256] {
                    check(&cfg, w, workers, None, cap);
                }
            }
            // Unbounded, across the stepper's limit.
            let far = NexmarkConfig {
                events: None,
                ..cfg
            };
            for (w, workers) in [(0, 1), (1, 3)] {
                let start = Stepper::LIMIT - 700 * workers as u64 + w as u64;
                check(&far, w, workers, Some(start), 64);
            }
        }
    }
}

#[cfg(test)]
mod skip_tests {
    use super::*;

    /// A shard moved to event `n` yields what one that generated `n`
    /// events yields next, events and bids alike, at every worker of 3.
    #[test]
    fn skip_to_continues_the_same_stream() {
        let cfg = NexmarkConfig {
            events: Some(3_000),
            ..NexmarkConfig::default()
        };
        for w in 0..3 {
            let mut whole = NexmarkGenerator::new(&cfg, w, 3);
            let mut all = vec![NexEvent::default(); 1_000];
            assert_eq!(whole.fill(&mut all), 1_000);
            for n in [0u64, 1, 49, 500, 1_000] {
                let mut g = NexmarkGenerator::new(&cfg, w, 3);
                g.skip_to(n).unwrap();
                let mut rest = vec![NexEvent::default(); 1_000];
                let k = g.fill(&mut rest);
                assert_eq!(&rest[..k], &all[n as usize..], "worker {w} at {n}");
                let mut b = NexmarkGenerator::new(&cfg, w, 3);
                b.skip_to(n).unwrap();
                let mut bids = vec![Bid::default(); 1_000];
                let f = b.fill_bids(&mut bids);
                let want: Vec<Bid> = all[n as usize..]
                    .iter()
                    .filter_map(|e| match e {
                        NexEvent::Bid(b) => Some(*b),
                        _ => None,
                    })
                    .collect();
                assert_eq!(&bids[..f.bids], &want[..], "bids, worker {w} at {n}");
            }
            assert!(NexmarkGenerator::new(&cfg, w, 3).skip_to(1_001).is_err());
        }
    }
}
