//! q14, calculation: bids whose price in euro cents is between 1 000 000
//! and 50 000 000 (10 000 and 500 000 euros), each with its time of day and the number of `c`s in its `extra` (the
//! Flink nexmark suite's `q14.sql`, with its user function `count_char`;
//! Beam has no such query). Reads full events ([`Shard::read_full`]): the
//! bid's `extra`.
//!
//! Definition: the euro price is `0.908 × price` (Flink's rate; the price
//! is in cents, as ours, so this is euro cents), exact to the thousandth
//! of a cent; a bid is kept if
//! it is above 1 000 000 and below 50 000 000 (compared exactly, in
//! thousandths). `bid_time_type` is `dayTime` for hours 8 to 18 of the
//! bid's `date_time`, `nightTime` for hours up to 6 or from 20, else
//! `otherTime` (hours 7 and 19); the hour is of the UTC day (the epoch
//! milliseconds / 3 600 000 mod 24: Flink's `HOUR` of a `TIMESTAMP(3)`
//! made from the epoch milliseconds in a UTC session). `c_counts` is how
//! many bytes of `extra` are `c` (Flink's `CountChar`).
//!
//! Columns: `auction, bidder, price, bid_time_type, date_time_ms,
//! c_counts`, with `price` the euro price in cents with three decimals
//! (e.g. `1000000.376`); one row per kept bid, sorted by date_time, auction, bidder,
//! price, c_counts. No windows, no options; like q1, rows stream out in
//! time order from the generator and are sorted at the end from files.
//!
//! Where we differ from Flink: Flink also outputs `extra` itself (a padding
//! string of about 60 random letters); we keep only its count of `c`s, so
//! the record that crosses to the writer stays small (no string).

use super::full::{full_bid_rows, utc_hour};
use super::{Cx, Shard, Spec};
use air_operators::sources::nexmark::FullBid;
use air_runtime::dataflow::Dataflow;
use serde::Serialize;

/// q14 as the driver runs it.
pub const SPEC: Spec = Spec {
    what: "calculation: bids whose price × 0.908 (euros) is in (1000000, 50000000), with that \
           price, the time of day (UTC hour: dayTime 8-18, nightTime <=6 or >=20, else \
           otherTime) and the number of 'c's in extra",
    nature: "a map and filter: no windows",
    columns: &[
        "auction",
        "bidder",
        "price",
        "bid_time_type",
        "date_time_ms",
        "c_counts",
    ],
    order: "date_time, auction, bidder, price, c_counts",
    honoured: &[],
    window_ms: 10_000,
    slide_ms: 2_000,
    // From files every kept bid is held to be sorted (at most every event).
    held_rows_per_event: |files| files.then_some(1.0),
    windowed: false,
    reads: 1,
    global: false,
    build,
};

/// A kept bid: price in thousandths of a euro, and its count of `c`s.
#[derive(Clone, Copy, Debug, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub(crate) struct Calculated {
    auction: u64,
    bidder: u64,
    /// `price × 908` (cents × 0.908 in thousandths; fits: prices below
    /// 50 000 000 / 0.908 cents).
    milli_euros: u64,
    date_time: u64,
    c_counts: u64,
}

/// Flink's `bidTimeType` of the UTC hour `h`.
pub(crate) fn bid_time_type(h: u64) -> &'static str {
    match h {
        8..=18 => "dayTime",
        0..=6 | 20.. => "nightTime",
        _ => "otherTime",
    }
}

/// The euro price `t` thousandths as a decimal with three places.
pub(crate) fn thousandths(t: u64) -> String {
    format!("{}.{:03}", t / 1000, t % 1000)
}

/// q14 of one bid: its row, or `None` if its price is out of range.
fn calculate(b: FullBid) -> Option<Calculated> {
    // 0.908 × price in thousandths, exact (u128: any u64 price).
    let t = u128::from(b.price) * 908;
    if t <= 1_000_000_000 || t >= 50_000_000_000 {
        return None;
    }
    Some(Calculated {
        auction: b.auction,
        bidder: b.bidder,
        milli_euros: t as u64,
        date_time: b.date_time,
        c_counts: b
            .extra
            .with_str(|s| s.bytes().filter(|&c| c == b'c').count()) as u64,
    })
}

/// A q14 CSV row (the columns of [`SPEC`]).
#[derive(Serialize)]
struct Q14Csv {
    auction: u64,
    bidder: u64,
    price: String,
    bid_time_type: &'static str,
    date_time_ms: u64,
    c_counts: u64,
}

/// Full bids → kept and calculated → rows, each of the millisecond it
/// happened in ([`full_bid_rows`]).
fn build(cx: &Cx<'_>, df: &Dataflow, shard: &Shard<'_>) {
    full_bid_rows(
        cx,
        df,
        shard,
        calculate,
        |r: &Calculated| r.date_time,
        |w| {
            let r = &w.value;
            (r.date_time, r.auction, r.bidder, r.milli_euros, r.c_counts)
        },
        |w| {
            let r = w.value;
            Q14Csv {
                auction: r.auction,
                bidder: r.bidder,
                price: thousandths(r.milli_euros),
                bid_time_type: bid_time_type(utc_hour(r.date_time)),
                date_time_ms: r.date_time,
                c_counts: r.c_counts,
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hours_prices_and_counts() {
        let types: Vec<&str> = (0..24).map(bid_time_type).collect();
        assert_eq!(types[6], "nightTime");
        assert_eq!(types[7], "otherTime");
        assert_eq!(types[8], "dayTime");
        assert_eq!(types[18], "dayTime");
        assert_eq!(types[19], "otherTime");
        assert_eq!(types[20], "nightTime");
        assert_eq!(utc_hour(1_700_000_000_000), 22); // 2023-11-14 22:13:20 UTC
        assert_eq!(thousandths(9_080_000), "9080.000");
        assert_eq!(thousandths(1_000_000_001), "1000000.001");
        let bid = |price, extra: &str| FullBid {
            price,
            extra: extra.into(),
            ..FullBid::default()
        };
        // 0.908 × 1 101 322 = 1 000 000.376: kept; 1 101 321 is not.
        assert!(calculate(bid(1_101_321, "")).is_none());
        let c = calculate(bid(1_101_322, "accbc")).unwrap();
        assert_eq!((c.milli_euros, c.c_counts), (1_000_000_376, 3));
        // 0.908 × 55 066 079 = 49 999 999.732: kept; 55 066 080 is not.
        assert!(calculate(bid(55_066_079, "")).is_some());
        assert!(calculate(bid(55_066_080, "")).is_none());
        assert!(calculate(bid(u64::MAX, "")).is_none());
    }
}
