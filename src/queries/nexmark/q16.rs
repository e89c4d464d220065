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
//! grouped by channel): each full bid is projected to (the channel's code,
//! bidder, auction, price, time): the generator's channels have exact
//! small codes, any other name a 63-bit hash and its name alongside
//! ([`channel_code`]). Keyed by channel code → tumbling windows: bids per
//! price rank, the latest minute ([`Max`]) and the name of a hashed code
//! ([`ChannelName`], which stops the job if two names share a code in a
//! window). And each bid seen twice, through its bidder and through its
//! auction → keyed by (kind, channel code, value) → tumbling windows: the
//! price ranks of that value's bids (a byte). Both → keyed by (window,
//! channel code) → the row, with the channel's name (from its code, or
//! kept).

use super::full::full_bid;
use super::q15::{split_distinct, SplitCsv, SplitStats, StatBid};
use super::{Cx, Shard, Spec};
use crate::queries::common::QueryOption::*;
use crate::queries::driver::sink_window_rows;
use air_operators::graph::{AggregateFunction, Max, Windowed};
use air_operators::sources::nexmark::{Bid, EventKind, FullBid, CHANNELS_NUMBER, HOT_CHANNELS};
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
    /// The channel's code ([`channel_code`]).
    code: u64,
    /// The channel's name when its code is a hash (not a generator
    /// channel's), else `None` ([`channel_of`] gives it).
    name: Option<Word>,
    /// The bid's bidder, auction, price and time.
    bid: Bid,
}

impl StatBid for ChannelBid {
    #[inline(always)]
    fn bid(&self) -> &Bid {
        &self.bid
    }
}

/// Codes of channels that are not the generator's: this bit and 63 bits of
/// the name's hash.
const HASHED: u64 = 1 << 63;

/// The code of channel `name`: the generator's channels (Flink's
/// `BidGenerator`: `"channel-0"` … `"channel-9999"`, then
/// [`HOT_CHANNELS`]) their index `0..CHANNELS_NUMBER + 4`, as the
/// generator numbers them; any other name [`HASHED`] and 63 bits of its
/// hash (`air_runtime::key_hash`, the same in every process). Codes of the
/// generator's channels are exact ([`channel_of`] gives the name back);
/// two other names in one window with the same hash stop the job
/// ([`ChannelName`] checks).
#[inline]
fn channel_code(name: &str) -> (u64, bool) {
    let b = name.as_bytes();
    if let Some(d) = b.strip_prefix(b"channel-") {
        // A decimal number below CHANNELS_NUMBER written as the
        // generator writes it: no sign, no leading zero.
        let canonical = !d.is_empty()
            && d.len() <= 19
            && d.iter().all(u8::is_ascii_digit)
            && (d[0] != b'0' || d.len() == 1);
        if canonical {
            let n = d.iter().fold(0u64, |n, c| n * 10 + u64::from(c - b'0'));
            if n < CHANNELS_NUMBER {
                return (n, true);
            }
        }
    } else if let Some(i) = HOT_CHANNELS.iter().position(|h| *h == name) {
        return (CHANNELS_NUMBER + i as u64, true);
    }
    (HASHED | air_runtime::key_hash(name) >> 1, false)
}

/// The name of a generator channel's code (`code < CHANNELS_NUMBER + 4`,
/// see [`channel_code`]).
fn channel_of(code: u64) -> Word {
    match code.checked_sub(CHANNELS_NUMBER) {
        Some(i) => Word::new(HOT_CHANNELS[i as usize]),
        None => Word::new(&format!("channel-{code}")),
    }
}

/// The name of a channel whose code is a hash (the generator's channels
/// carry none): checks that the bids of one code in one window all have
/// one name.
#[derive(Clone, Copy, Debug)]
struct ChannelName;

impl ChannelName {
    /// Keeps `name` in `acc`; stops the job if `acc` holds another one.
    #[inline]
    fn keep(acc: &mut Option<Word>, name: &Word) {
        match acc {
            None => *acc = Some(name.clone()),
            Some(kept) if kept.as_str() != name.as_str() => panic!(
                "q16: channels {:?} and {:?} have the same 63-bit hash; q16 cannot tell them \
                 apart",
                kept.as_str(),
                name.as_str()
            ),
            Some(_) => {}
        }
    }
}

impl AggregateFunction<ChannelBid> for ChannelName {
    type Acc = Option<Word>;
    type Out = Option<Word>;
    fn create(&self) -> Option<Word> {
        None
    }
    #[inline(always)]
    fn add(&self, acc: &mut Option<Word>, b: &ChannelBid) {
        if let Some(name) = &b.name {
            ChannelName::keep(acc, name);
        }
    }
    fn merge(&self, acc: &mut Option<Word>, other: Option<Word>) {
        if let Some(name) = &other {
            ChannelName::keep(acc, name);
        }
    }
    fn result(&self, acc: &Option<Word>) -> Option<Word> {
        acc.clone()
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

/// q16's extra statistic: the latest minute of the day and the name of a
/// channel whose code is a hash.
type Extra = (Max<ChannelBid, u64, fn(&ChannelBid) -> u64>, ChannelName);

/// Full bids projected (the channel as its code) → [`split_distinct`]
/// grouped by channel code, with the latest minute of the day and the
/// channel's name as extra statistic → a row per channel and window.
fn build(cx: &Cx<'_>, df: &Dataflow, shard: &Shard<'_>) {
    let bids = df
        .source(shard.read_full_of(&[EventKind::Bid]))
        .flat_map(|e| {
            full_bid(e).map(|b: FullBid| {
                let name = b.channel.to_cow();
                let (code, generator) = channel_code(&name);
                ChannelBid {
                    code,
                    name: (!generator).then(|| Word::new(&name)),
                    bid: Bid {
                        auction: b.auction,
                        bidder: b.bidder,
                        price: b.price,
                        date_time: b.date_time,
                    },
                }
            })
        })
        .event_time(|b: &ChannelBid| b.bid.date_time, cx.args.max_delay())
        .idle_after_ms(cx.args.idle_ms);
    let minute: fn(&ChannelBid) -> u64 = |b| minute_of_day(b.bid.date_time);
    let extra: Extra = (Max::of(minute), ChannelName);
    let stats = split_distinct(bids, cx.args.window(), |b: &ChannelBid| b.code, extra).map(|r| {
        let (counts, (minute, name)) = r.value;
        let (_, code) = r.key;
        Windowed {
            start: r.start,
            end: r.end,
            key: name.unwrap_or_else(|| channel_of(code)),
            value: (counts, minute),
        }
    });
    sink_window_rows(
        stats,
        |r: &Windowed<Word, SplitStats<u64>>| r.key.clone(),
        |r| {
            // Every channel's window has a bid, so its latest minute.
            let minute = r.value.1;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generator_channels_have_exact_codes() {
        for index in 0..CHANNELS_NUMBER + HOT_CHANNELS.len() as u64 {
            let name = channel_of(index);
            assert_eq!(
                channel_code(name.as_str()),
                (index, true),
                "{}",
                name.as_str()
            );
        }
        assert_eq!(channel_code("channel-0"), (0, true));
        assert_eq!(channel_code("Apple"), (CHANNELS_NUMBER + 3, true));
    }

    #[test]
    fn other_names_are_hashed() {
        // Not as the generator writes them: a leading zero, out of range,
        // no digits, signs, other case, overflow.
        let others = [
            "channel-007",
            "channel-00",
            "channel-10000",
            "channel-",
            "channel--1",
            "channel-+1",
            "channel-1a",
            "channel-99999999999999999999999",
            "google",
            "Google ",
            "",
            "ch",
        ];
        let mut codes = Vec::new();
        for name in others {
            let (code, generator) = channel_code(name);
            assert!(!generator, "{name}");
            assert!(code & HASHED != 0, "{name}");
            // The same in every call (and process: key_hash has no seed).
            assert_eq!(channel_code(name), (code, false));
            codes.push(code);
        }
        codes.sort();
        codes.dedup();
        assert_eq!(codes.len(), others.len());
    }

    #[test]
    fn one_name_per_hashed_code() {
        let bid = |name: &str| ChannelBid {
            code: channel_code(name).0,
            name: Some(Word::new(name)),
            bid: Bid::default(),
        };
        let mut acc = ChannelName.create();
        ChannelName.add(&mut acc, &bid("ch"));
        ChannelName.add(&mut acc, &bid("ch"));
        ChannelName.merge(&mut acc, None);
        assert_eq!(ChannelName.result(&acc).unwrap().as_str(), "ch");
        let clash = std::panic::catch_unwind(|| {
            let mut acc = Some(Word::new("ch"));
            ChannelName.merge(&mut acc, Some(Word::new("other")));
        });
        assert!(clash.is_err());
    }
}
