//! q21, add channel id: every bid whose channel is known, with the
//! channel's id (the Flink nexmark suite's `q21.sql`; Beam has no such
//! query). Reads full events ([`Shard::read_full`]): the bid's `channel`
//! and `url`.
//!
//! Definition: `channel_id` is `"0"` for the channel `apple`, `"1"` for
//! `google`, `"2"` for `facebook`, `"3"` for `baidu` (compared lowercased,
//! as SQL `lower(channel)`); for any other channel it is what the url's
//! `channel_id` parameter holds: the text after the first `channel_id=`
//! that starts the url or follows a `&`, up to the next `&` or the end
//! (SQL `REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2)`; possibly
//! empty). A bid of another channel whose url has no such parameter is
//! dropped (Flink's `WHERE`). The generator gives 9 in 10 ordinary
//! channels a `&channel_id=` (so about 95 % of bids pass).
//!
//! Columns: `auction, bidder, price, channel, channel_id, date_time_ms`,
//! one row per kept bid, sorted by date_time, auction, bidder, price,
//! channel, channel_id. No windows, no options; like q1, rows stream out
//! in time order from the generator and are sorted at the end from files.
//!
//! Where we differ from Flink: we add `date_time_ms` (the row order; Flink
//! writes to a blackhole in arrival order). Channel and channel id are
//! carried as inline words ([`Word`], heap beyond 23 bytes), projected
//! from the full bid before any exchange.

use super::full::full_bid_rows;
use super::{Cx, Shard, Spec};
use air_operators::sources::nexmark::FullBid;
use air_operators::sources::text::Word;
use air_runtime::dataflow::Dataflow;
use serde::Serialize;

/// q21 as the driver runs it.
pub const SPEC: Spec = Spec {
    what: "add channel id: every bid of a hot channel (id 0..3) or whose url has a \
           channel_id parameter (its value), with that id",
    nature: "a map and filter: no windows",
    columns: &[
        "auction",
        "bidder",
        "price",
        "channel",
        "channel_id",
        "date_time_ms",
    ],
    order: "date_time, auction, bidder, price, channel, channel_id",
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

/// A kept bid and its channel id.
#[derive(Clone, Debug, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub(crate) struct ChannelBid {
    auction: u64,
    bidder: u64,
    price: u64,
    date_time: u64,
    channel: Word,
    channel_id: Word,
}

/// The ids of the hot channels by their lowercase names (Flink's CASE).
const HOT_IDS: [(&str, &str); 4] = [
    ("apple", "0"),
    ("google", "1"),
    ("facebook", "2"),
    ("baidu", "3"),
];

/// The id of a hot channel (`lower(channel)` one of [`HOT_IDS`]).
fn hot_id(channel: &str) -> Option<&'static str> {
    let is = |name: &str| {
        if channel.is_ascii() {
            channel.eq_ignore_ascii_case(name)
        } else {
            // Unicode lowercasing (e.g. the Kelvin sign is a `k`).
            channel.to_lowercase() == name
        }
    };
    HOT_IDS.iter().find(|(n, _)| is(n)).map(|(_, id)| *id)
}

/// `REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2)`: the value of the
/// first `channel_id=` at the start of `url` or after a `&`.
pub(crate) fn url_channel_id(url: &str) -> Option<&str> {
    const KEY: &str = "channel_id=";
    let start = if url.starts_with(KEY) {
        KEY.len()
    } else {
        url.find("&channel_id=")? + 1 + KEY.len()
    };
    let rest = &url[start..];
    Some(&rest[..rest.find('&').unwrap_or(rest.len())])
}

/// q21 of one bid: its row, or `None` if dropped.
fn add_channel_id(b: FullBid) -> Option<ChannelBid> {
    let (channel, url) = (b.channel.to_cow(), b.url.to_cow());
    let id = match hot_id(&channel) {
        Some(id) => id,
        None => url_channel_id(&url)?,
    };
    Some(ChannelBid {
        auction: b.auction,
        bidder: b.bidder,
        price: b.price,
        date_time: b.date_time,
        channel: Word::new(&channel),
        channel_id: Word::new(id),
    })
}

/// A q21 CSV row (the columns of [`SPEC`]).
#[derive(Serialize)]
struct Q21Csv {
    auction: u64,
    bidder: u64,
    price: u64,
    channel: Word,
    channel_id: Word,
    date_time_ms: u64,
}

/// Full bids → their channel id, kept or dropped → rows, each of the
/// millisecond it happened in ([`full_bid_rows`]).
fn build(cx: &Cx<'_>, df: &Dataflow, shard: &Shard<'_>) {
    full_bid_rows(
        cx,
        df,
        shard,
        add_channel_id,
        |r: &ChannelBid| r.date_time,
        |w| {
            let r = &w.value;
            (
                r.date_time,
                r.auction,
                r.bidder,
                r.price,
                r.channel.clone(),
                r.channel_id.clone(),
            )
        },
        |w| {
            let r = w.value;
            Q21Csv {
                auction: r.auction,
                bidder: r.bidder,
                price: r.price,
                channel: r.channel,
                channel_id: r.channel_id,
                date_time_ms: r.date_time,
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_ids_as_flink_extracts_them() {
        assert_eq!(
            url_channel_id("https://x/a/b/item.htm?query=1&channel_id=42"),
            Some("42")
        );
        assert_eq!(url_channel_id("channel_id=7&channel_id=8"), Some("7"));
        assert_eq!(url_channel_id("a?x=1&channel_id=&y=2"), Some(""));
        assert_eq!(url_channel_id("a?channel_id=5"), None, "after ?, not &");
        assert_eq!(url_channel_id("a&xchannel_id=5"), None);
        assert_eq!(url_channel_id("a&channel_id=5&b=1"), Some("5"));
        assert_eq!(hot_id("Apple"), Some("0"));
        assert_eq!(hot_id("GOOGLE"), Some("1"));
        assert_eq!(hot_id("FACEBOO\u{212A}"), Some("2"), "Kelvin sign");
        assert_eq!(hot_id("channel-3"), None);
    }
}
