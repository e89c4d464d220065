//! Full events: the compact event `n` plus every string field of the
//! specification, drawn from the same per-event random source after the
//! compact fields (so [`compact`](super::compact) of [`full_event`] is the
//! generator's event `n`).
//!
//! String shapes follow Beam's `PersonGenerator` and `StringsGenerator`
//! and, for the bid's `channel` and `url`, the Flink NEXMark
//! `BidGenerator`; there a channel's URL is a pure function of the stream
//! seed and the channel (Flink caches one random URL per channel).

use std::fmt::Write;

use super::config::NexmarkConfig;
use super::generator::{event_kind, Model, NexmarkGenerator};
use super::model::{EventKind, FullAuction, FullBid, FullEvent, FullPerson};
use crate::sources::rng::{below, WyRand};

/// US states of generated persons (Beam's `PersonGenerator.US_STATES`).
const US_STATES: [&str; 6] = ["AZ", "CA", "ID", "OR", "WA", "WY"];
/// US cities of generated persons (Beam's `PersonGenerator.US_CITIES`).
const US_CITIES: [&str; 10] = [
    "Phoenix",
    "Los Angeles",
    "San Francisco",
    "Boise",
    "Portland",
    "Bend",
    "Redmond",
    "Seattle",
    "Kent",
    "Cheyenne",
];

/// The hot bid channels (Flink NEXMark `BidGenerator.HOT_CHANNELS`).
pub const HOT_CHANNELS: [&str; 4] = ["Google", "Facebook", "Baidu", "Apple"];
/// Number of ordinary channels, `"channel-0"` … `"channel-9999"`.
pub const CHANNELS_NUMBER: u64 = 10_000;
/// A bid comes from a hot channel with probability `1 - 1/2`.
const HOT_CHANNELS_RATIO: u64 = 2;

/// Shortest random string (Beam's `MIN_STRING_LENGTH`).
const MIN_STRING_LENGTH: u64 = 3;

/// The full event `n` (0-based) of the stream of `cfg`: the compact event
/// [`compact_event(cfg, n)`](super::compact_event) plus every string field.
/// Allocates; for export, not for the hot path.
pub fn full_event(cfg: &NexmarkConfig, n: u64) -> FullEvent {
    full_event_with(&Model::new(cfg), n)
}

/// [`full_event`] with a prepared model.
pub(crate) fn full_event_with(model: &Model, n: u64) -> FullEvent {
    full_event_at(model, n, model.cfg.time_of(n))
}

/// [`full_event`] with a prepared model and the event's time
/// (`time_of(n)`).
fn full_event_at(model: &Model, n: u64, date_time: u64) -> FullEvent {
    let mut rng = model.rng(n);
    match event_kind(n) {
        EventKind::Person => {
            let p = model.person(n, date_time, &mut rng);
            let name = p.name.as_str().to_owned();
            let mut email_address = next_string(&mut rng, 7, b' ');
            email_address.push('@');
            email_address.push_str(&next_string(&mut rng, 5, b' '));
            email_address.push_str(".com");
            let mut credit_card = String::with_capacity(19);
            for i in 0..4 {
                if i > 0 {
                    credit_card.push(' ');
                }
                let _ = write!(credit_card, "{:04}", below(rng.next_u64(), 10_000));
            }
            let city = US_CITIES[below(rng.next_u64(), US_CITIES.len() as u64) as usize];
            let state = US_STATES[below(rng.next_u64(), US_STATES.len() as u64) as usize];
            let size =
                8 + name.len() + email_address.len() + credit_card.len() + city.len() + state.len();
            let extra = next_extra(&mut rng, size, model.cfg.avg_person_byte_size);
            FullEvent::Person(FullPerson {
                id: p.id,
                name,
                email_address,
                credit_card,
                city: city.to_owned(),
                state: state.to_owned(),
                date_time: p.date_time,
                extra,
            })
        }
        EventKind::Auction => {
            let a = model.auction(n, date_time, &mut rng);
            let item_name = next_string(&mut rng, 20, b' ');
            let description = next_string(&mut rng, 100, b' ');
            let size = 8 + item_name.len() + description.len() + 5 * 8;
            let extra = next_extra(&mut rng, size, model.cfg.avg_auction_byte_size);
            FullEvent::Auction(FullAuction {
                id: a.id,
                item_name,
                description,
                initial_bid: a.initial_bid,
                reserve: a.reserve,
                date_time: a.date_time,
                expires: a.expires,
                seller: a.seller,
                category: a.category,
                extra,
            })
        }
        EventKind::Bid => {
            let b = model.bid(n, date_time, &mut rng);
            let (channel, url) = if below(rng.next_u64(), HOT_CHANNELS_RATIO) > 0 {
                let i = below(rng.next_u64(), HOT_CHANNELS.len() as u64);
                (
                    HOT_CHANNELS[i as usize].to_owned(),
                    channel_url(model, CHANNELS_NUMBER + i),
                )
            } else {
                let c = below(rng.next_u64(), CHANNELS_NUMBER);
                (format!("channel-{c}"), channel_url(model, c))
            };
            let extra = next_extra(&mut rng, 4 * 8, model.cfg.avg_bid_byte_size);
            FullEvent::Bid(FullBid {
                auction: b.auction,
                bidder: b.bidder,
                price: b.price,
                channel,
                url,
                date_time: b.date_time,
                extra,
            })
        }
    }
}

/// One shard of the NEXMark stream as full events: the events of the
/// [`NexmarkGenerator`] of the same config and shard, each with every
/// string field ([`full_event`]; `compact` of each is the compact
/// generator's event). Allocates the strings of every event: for queries
/// that read them, not for the compact hot path.
///
/// ```
/// use air_operators::sources::nexmark::*;
/// let cfg = NexmarkConfig { events: Some(100), ..NexmarkConfig::default() };
/// let mut full = NexmarkFullGenerator::new(&cfg, 1, 3);
/// let mut compact_gen = NexmarkGenerator::new(&cfg, 1, 3);
/// let mut a = vec![FullEvent::default(); 64];
/// let mut b = vec![NexEvent::default(); 64];
/// assert_eq!(full.fill(&mut a), 33);
/// assert_eq!(compact_gen.fill(&mut b), 33);
/// assert!(a[..33].iter().zip(&b).all(|(f, c)| compact(f) == *c));
/// assert_eq!(a[0], full_event(&cfg, 1));
/// assert_eq!(full.fill(&mut a), 0);
/// ```
#[derive(Clone, Debug)]
pub struct NexmarkFullGenerator(NexmarkGenerator);

impl NexmarkFullGenerator {
    /// The shard of worker `worker` of `workers` (as
    /// [`NexmarkGenerator::new`]).
    ///
    /// # Panics
    /// As [`NexmarkGenerator::new`].
    pub fn new(cfg: &NexmarkConfig, worker: usize, workers: usize) -> NexmarkFullGenerator {
        NexmarkFullGenerator(NexmarkGenerator::new(cfg, worker, workers))
    }

    /// Writes this shard's next events to the front of `out` and returns how
    /// many: `out.len()`, fewer at the end of the stream, 0 once exhausted.
    #[inline]
    pub fn fill(&mut self, out: &mut [FullEvent]) -> usize {
        self.0.fill_with(out, full_event_at)
    }

    /// The compact generator of the same shard at the same point.
    pub fn compact(&self) -> &NexmarkGenerator {
        &self.0
    }
}

/// The URL of channel `index` (`0..10000` ordinary, `10000 + i` the hot
/// channel `i`): `https://www.nexmark.com/<a>/<b>/<c>/item.htm?query=1`,
/// and for 9 in 10 ordinary channels `&channel_id=<the channel number's 32
/// bits reversed>` (Flink's `getBaseUrl` / `getNextChannelAndurl`).
fn channel_url(model: &Model, index: u64) -> String {
    let mut rng = WyRand::new(model.aux_key() ^ index);
    let mut url = String::with_capacity(80);
    url.push_str("https://www.nexmark.com/");
    for _ in 0..3 {
        url.push_str(&next_string(&mut rng, 5, b'_'));
        url.push('/');
    }
    url.push_str("item.htm?query=1");
    if index < CHANNELS_NUMBER && below(rng.next_u64(), 10) > 0 {
        let id = (index as u32).reverse_bits() as i32;
        let _ = write!(url, "&channel_id={}", id.unsigned_abs());
    }
    url
}

/// A random string of `3..max_len` characters, each a space (probability
/// 1/13; `space` is the character used) or a lowercase letter; trimmed when
/// `space` is `' '` (Beam's `nextString`).
fn next_string(rng: &mut WyRand, max_len: u64, space: u8) -> String {
    let len = MIN_STRING_LENGTH + below(rng.next_u64(), max_len - MIN_STRING_LENGTH);
    let mut s = Vec::with_capacity(len as usize);
    for _ in 0..len {
        // One draw over 13 · 26 outcomes: 26 of them (1/13) a space, 12
        // per letter.
        let v = below(rng.next_u64(), 13 * 26);
        s.push(if v < 26 { space } else { b'a' + (v % 26) as u8 });
    }
    let s = if space == b' ' {
        s.trim_ascii()
    } else {
        &s[..]
    };
    String::from_utf8(s.to_vec()).expect("ASCII")
}

/// A random string of exactly `len` lowercase letters (Beam's
/// `nextExactString`): 8 letters per 64 random bits.
fn exact_string(rng: &mut WyRand, len: usize) -> String {
    let mut s = Vec::with_capacity(len);
    while s.len() < len {
        let mut x = rng.next_u64();
        for _ in 0..(len - s.len()).min(8) {
            // Multiply-shift digit extraction: the next base-26 digit of
            // the fraction x / 2^64.
            let t = x as u128 * 26;
            s.push(b'a' + (t >> 64) as u8);
            x = t as u64;
        }
    }
    String::from_utf8(s).expect("ASCII")
}

/// Padding so that `current + extra.len()` averages `average`: `""` if
/// already larger, else a length uniform in `d - δ .. d + δ` with
/// `d = average - current`, `δ = round(d / 5)` (Beam's `nextExtra`).
fn next_extra(rng: &mut WyRand, current: usize, average: u32) -> String {
    let average = average as usize;
    if current > average {
        return String::new();
    }
    let d = average - current;
    let delta = (d as f64 * 0.2).round() as usize;
    let size = d - delta
        + if delta == 0 {
            0
        } else {
            below(rng.next_u64(), 2 * delta as u64) as usize
        };
    exact_string(rng, size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_shapes() {
        let mut rng = WyRand::new(3);
        for _ in 0..1000 {
            let s = next_string(&mut rng, 20, b' ');
            assert!(s.len() <= 19 && s == s.trim(), "{s:?}");
            assert!(s.bytes().all(|c| c == b' ' || c.is_ascii_lowercase()));
            let u = next_string(&mut rng, 5, b'_');
            assert!((3..=4).contains(&u.len()), "{u:?}");
            let e = exact_string(&mut rng, 37);
            assert_eq!(e.len(), 37);
            assert!(e.bytes().all(|c| c.is_ascii_lowercase()));
            let x = next_extra(&mut rng, 32, 100);
            assert!((54..82).contains(&x.len()), "{}", x.len());
        }
        assert_eq!(next_extra(&mut rng, 101, 100), "");
        assert_eq!(next_extra(&mut rng, 100, 100), "");
    }

    #[test]
    fn channel_urls() {
        let model = Model::new(&NexmarkConfig::default());
        let u = channel_url(&model, 7);
        assert_eq!(u, channel_url(&model, 7), "a channel has one URL");
        assert!(u.starts_with("https://www.nexmark.com/"), "{u}");
        let hot = channel_url(&model, CHANNELS_NUMBER + 1);
        assert!(hot.ends_with("/item.htm?query=1"), "{hot}");
        let with_id = (0..100)
            .filter(|&c| channel_url(&model, c).contains("&channel_id="))
            .count();
        assert!((75..=100).contains(&with_id), "{with_id}");
        // Channel 1: bit 0 reversed is bit 31, i32::MIN, whose |.| is 2^31.
        let one = channel_url(&model, 1);
        assert!(
            !one.contains("&channel_id=") || one.ends_with("&channel_id=2147483648"),
            "{one}"
        );
    }
}
