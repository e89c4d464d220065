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
use super::text::{push_letters, Text};
use crate::sources::rng::{below, WyRand};
use crate::sources::shards::Sharded;

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
/// Longest `max_len` of [`next_string`] (the description's 100).
const MAX_STRING_LENGTH: usize = 100;

/// The full event `n` (0-based) of the stream of `cfg`: the compact event
/// [`compact_event(cfg, n)`](super::compact_event) plus every string field.
/// Allocates; for export, not for the hot path.
pub fn full_event(cfg: &NexmarkConfig, n: u64) -> FullEvent {
    full_event_with(&Model::new(cfg), n)
}

/// [`full_event`] with a prepared model.
pub(crate) fn full_event_with(model: &Model, n: u64) -> FullEvent {
    full_event_at(model, n, model.cfg.time_of(n), None)
}

/// [`full_event`] with a prepared model, the event's time (`time_of(n)`)
/// and, for a stream of events, a cache of the channels' names and URLs.
fn full_event_at(
    model: &Model,
    n: u64,
    date_time: u64,
    channels: Option<&mut Channels>,
) -> FullEvent {
    let mut rng = model.rng(n);
    match event_kind(n) {
        EventKind::Person => {
            let p = model.person(n, date_time, &mut rng);
            let name = p.name.as_str().to_owned();
            let mut email_address = String::with_capacity(16);
            push_next_string(&mut rng, 7, b' ', &mut email_address);
            email_address.push('@');
            push_next_string(&mut rng, 5, b' ', &mut email_address);
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
            let b = model.bid(n, date_time);
            let index = if below(rng.next_u64(), HOT_CHANNELS_RATIO) > 0 {
                CHANNELS_NUMBER + below(rng.next_u64(), HOT_CHANNELS.len() as u64)
            } else {
                below(rng.next_u64(), CHANNELS_NUMBER)
            };
            let (channel, url) = match channels {
                Some(c) => c.get(model, index),
                None => (
                    Text::from(channel_name(index)),
                    Text::from(channel_url(model, index)),
                ),
            };
            // Lazy: the letters are drawn from this state when read (no
            // later field draws from `rng`).
            let len = extra_len(&mut rng, 4 * 8, model.cfg.avg_bid_byte_size);
            let extra = Text::letters(rng, len);
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
/// generator's event). Allocates the strings of every person and auction;
/// a bid's channel and URL are shared per channel and its `extra` is
/// drawn only when read ([`Text`]). For queries that read strings, not for
/// the compact hot path.
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
pub struct NexmarkFullGenerator {
    /// The compact generator of the shard (event numbers and times).
    gen: NexmarkGenerator,
    /// The channels' names and URLs met so far.
    channels: Channels,
}

impl NexmarkFullGenerator {
    /// The shard of worker `worker` of `workers` (as
    /// [`NexmarkGenerator::new`]).
    ///
    /// # Panics
    /// As [`NexmarkGenerator::new`].
    pub fn new(cfg: &NexmarkConfig, worker: usize, workers: usize) -> NexmarkFullGenerator {
        NexmarkFullGenerator {
            gen: NexmarkGenerator::new(cfg, worker, workers),
            channels: Channels::default(),
        }
    }

    /// Writes this shard's next events to the front of `out` and returns how
    /// many: `out.len()`, fewer at the end of the stream, 0 once exhausted.
    #[inline]
    pub fn fill(&mut self, out: &mut [FullEvent]) -> usize {
        let channels = &mut self.channels;
        self.gen.fill_with(out, |model, n, t| {
            full_event_at(model, n, t, Some(channels))
        })
    }

    /// Generates this shard's next events, up to `max` of them, and
    /// appends those of the kinds in `kinds` to `out` (the others' strings
    /// are not drawn). Returns how many events were generated (of every
    /// kind): `max`, fewer at the end of the stream, 0 once exhausted.
    /// Each event appended equals the one [`fill`](Self::fill) would give.
    ///
    /// ```
    /// use air_operators::sources::nexmark::*;
    /// let cfg = NexmarkConfig { events: Some(200), ..NexmarkConfig::default() };
    /// let mut bids = Vec::new();
    /// let mut g = NexmarkFullGenerator::new(&cfg, 0, 1);
    /// assert_eq!(g.fill_kinds(&[EventKind::Bid], &mut bids, 150), 150);
    /// assert_eq!(g.fill_kinds(&[EventKind::Bid], &mut bids, 150), 50);
    /// assert_eq!(g.fill_kinds(&[EventKind::Bid], &mut bids, 150), 0);
    /// let all: Vec<FullEvent> = (0..200).map(|n| full_event(&cfg, n)).collect();
    /// let want: Vec<&FullEvent> = all.iter().filter(|e| e.kind() == EventKind::Bid).collect();
    /// assert_eq!(bids.iter().collect::<Vec<_>>(), want);
    /// ```
    pub fn fill_kinds(
        &mut self,
        kinds: &[EventKind],
        out: &mut Vec<FullEvent>,
        max: usize,
    ) -> usize {
        let wanted = |k: EventKind| kinds.contains(&k);
        let mask = [
            wanted(EventKind::Person),
            wanted(EventKind::Auction),
            wanted(EventKind::Bid),
        ];
        let channels = &mut self.channels;
        // Units, not events: `fill_with` walks the shard's event numbers
        // and times; the events themselves are pushed (no allocation for a
        // vector of `()`).
        let mut units = vec![(); max];
        self.gen.fill_with(&mut units, |model, n, t| {
            let k = event_kind(n);
            if mask[k as usize] {
                out.push(full_event_at(model, n, t, Some(channels)));
            }
        })
    }

    /// The compact generator of the same shard at the same point.
    pub fn compact(&self) -> &NexmarkGenerator {
        &self.gen
    }

    /// Goes on as if it had generated `n` events of its shard already (a
    /// checkpoint's position: [`NexmarkGenerator::generated`] of
    /// [`compact`](Self::compact)), in O(1) ([`NexmarkGenerator::skip_to`]).
    ///
    /// ```
    /// use air_operators::sources::nexmark::*;
    /// let cfg = NexmarkConfig { events: Some(100), ..NexmarkConfig::default() };
    /// let mut all = vec![FullEvent::default(); 100];
    /// assert_eq!(NexmarkFullGenerator::new(&cfg, 0, 1).fill(&mut all), 100);
    /// let mut g = NexmarkFullGenerator::new(&cfg, 0, 1);
    /// g.skip_to(60).unwrap();
    /// let mut rest = vec![FullEvent::default(); 100];
    /// assert_eq!(g.fill(&mut rest), 40);
    /// assert_eq!(rest[..40], all[60..]);
    /// ```
    ///
    /// # Errors
    /// It generated events already, or `n` is past its shard.
    pub fn skip_to(&mut self, n: u64) -> Result<(), String> {
        self.gen.skip_to(n)
    }

    /// Stamps the next event at `at_ms` (as
    /// [`NexmarkGenerator::restamp_next`]).
    pub fn restamp_next(&mut self, at_ms: u64) {
        self.gen.restamp_next(at_ms)
    }
}

/// The full events of the compact generator's shards
/// ([`crate::sources::shards`]): what lets a full-event source resume at
/// another worker count.
impl Sharded for NexmarkFullGenerator {
    type Event = FullEvent;
    fn shard(&self) -> (usize, usize) {
        self.gen.shard()
    }
    /// The sibling shares the channels met so far (a channel's name and
    /// URL are the stream's, not the shard's).
    fn sibling(&self, shard: usize, shards: usize) -> Result<Self, String> {
        Ok(NexmarkFullGenerator {
            gen: self.gen.sibling(shard, shards)?,
            channels: self.channels.clone(),
        })
    }
    fn generated(&self) -> u64 {
        self.gen.generated()
    }
    fn skip_to(&mut self, n: u64) -> Result<(), String> {
        NexmarkFullGenerator::skip_to(self, n)
    }
    fn time_of(event: &FullEvent) -> u64 {
        event.date_time()
    }
    fn fill(&mut self, out: &mut [FullEvent]) -> usize {
        NexmarkFullGenerator::fill(self, out)
    }
}

/// The names and URLs of the channels a generator met so far, built on
/// first use (a channel's URL is a pure function of the stream and the
/// channel, as Flink's generator caches it): a bid then clones two shared
/// texts (two count increments) instead of drawing and formatting its URL.
#[derive(Clone, Debug, Default)]
struct Channels {
    /// By channel index (`0..CHANNELS_NUMBER + 4`): `(name, url)`, or
    /// `None` not yet met.
    known: Vec<Option<(Text, Text)>>,
}

impl Channels {
    /// The name and URL of channel `index` (see [`channel_url`]).
    fn get(&mut self, model: &Model, index: u64) -> (Text, Text) {
        if self.known.is_empty() {
            self.known = vec![None; (CHANNELS_NUMBER as usize) + HOT_CHANNELS.len()];
        }
        self.known[index as usize]
            .get_or_insert_with(|| {
                (
                    Text::from(channel_name(index)),
                    Text::from(channel_url(model, index)),
                )
            })
            .clone()
    }
}

/// The name of channel `index` (`0..10000`: `"channel-<index>"`,
/// `10000 + i`: hot channel `i`).
fn channel_name(index: u64) -> String {
    match index.checked_sub(CHANNELS_NUMBER) {
        Some(i) => HOT_CHANNELS[i as usize].to_owned(),
        None => format!("channel-{index}"),
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
        push_next_string(&mut rng, 5, b'_', &mut url);
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
    let mut s = String::new();
    push_next_string(rng, max_len, space, &mut s);
    s
}

/// Appends [`next_string`]`(rng, max_len, space)` to `out` (one
/// allocation at most). `max_len` is at most [`MAX_STRING_LENGTH`].
fn push_next_string(rng: &mut WyRand, max_len: u64, space: u8, out: &mut String) {
    debug_assert!(max_len <= MAX_STRING_LENGTH as u64);
    let len = MIN_STRING_LENGTH + below(rng.next_u64(), max_len - MIN_STRING_LENGTH);
    let mut buf = [0u8; MAX_STRING_LENGTH];
    let s = &mut buf[..len as usize];
    for c in s.iter_mut() {
        // One draw over 13 · 26 outcomes: 26 of them (1/13) a space, 12
        // per letter.
        let v = below(rng.next_u64(), 13 * 26);
        *c = if v < 26 { space } else { b'a' + (v % 26) as u8 };
    }
    let s = if space == b' ' {
        s.trim_ascii()
    } else {
        &s[..]
    };
    out.push_str(std::str::from_utf8(s).expect("ASCII"));
}

/// A random string of exactly `len` lowercase letters (Beam's
/// `nextExactString`): 8 letters per 64 random bits ([`push_letters`]).
fn exact_string(rng: &mut WyRand, len: usize) -> String {
    let mut s = Vec::new();
    push_letters(rng, len, &mut s);
    String::from_utf8(s).expect("ASCII")
}

/// Padding so that `current + extra.len()` averages `average`: `""` if
/// already larger, else a length uniform in `d - δ .. d + δ` with
/// `d = average - current`, `δ = round(d / 5)` (Beam's `nextExtra`).
fn next_extra(rng: &mut WyRand, current: usize, average: u32) -> String {
    let len = extra_len(rng, current, average);
    exact_string(rng, len)
}

/// The length of [`next_extra`]`(rng, current, average)`, drawn from
/// `rng` (its letters are the next draws).
fn extra_len(rng: &mut WyRand, current: usize, average: u32) -> usize {
    let average = average as usize;
    if current > average {
        return 0;
    }
    let d = average - current;
    let delta = (d as f64 * 0.2).round() as usize;
    d - delta
        + if delta == 0 {
            0
        } else {
            below(rng.next_u64(), 2 * delta as u64) as usize
        }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two shards saved midway and resumed at 3 workers (each its share of
    /// the shards, merged by event time): with what the two had made, every
    /// event of the stream once, each the event `full_event` makes.
    #[test]
    fn full_generator_shards_rescale() {
        use crate::sources::shards::{save_positions, Shards};
        use air_runtime::dataflow::state::Rescale;
        let cfg = NexmarkConfig {
            events: Some(900),
            ..NexmarkConfig::default()
        };
        let mut got = Vec::new();
        let saved: Vec<Vec<u8>> = [70, 210]
            .iter()
            .enumerate()
            .map(|(w, &n)| {
                let mut g = NexmarkFullGenerator::new(&cfg, w, 2);
                let mut buf = vec![FullEvent::default(); n];
                assert_eq!(g.fill(&mut buf), n);
                got.extend(buf);
                save_positions(std::slice::from_ref(&g))
            })
            .collect();
        let states: Vec<&[u8]> = saved.iter().map(|s| s.as_slice()).collect();
        for worker in 0..3 {
            let to = Rescale {
                worker,
                workers: 3,
                from: 2,
                groups: air_runtime::keygroups::KeyGroups::new(16, 3)
                    .unwrap()
                    .into(),
            };
            let proto = NexmarkFullGenerator::new(&cfg, worker, 3);
            let mut s = Shards::rescaled(&proto, &states, to).unwrap();
            let mut buf = vec![FullEvent::default(); 128];
            loop {
                let n = s.fill(&mut buf);
                if n == 0 {
                    break;
                }
                assert!(buf[..n]
                    .windows(2)
                    .all(|p| p[0].date_time() <= p[1].date_time()));
                got.extend_from_slice(&buf[..n]);
            }
        }
        let key = |e: &FullEvent| format!("{e:?}");
        let mut got: Vec<String> = got.iter().map(key).collect();
        let mut want: Vec<String> = (0..900).map(|n| key(&full_event(&cfg, n))).collect();
        got.sort_unstable();
        want.sort_unstable();
        assert_eq!(got.len(), want.len());
        assert!(got == want, "the rescaled shards' events differ");
    }

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
    fn exact_string_digits_are_sequential_ones() {
        // The digits of x / 2^64 taken one by one (multiply by 26, take
        // the integer part) equal `exact_string`'s.
        let mut a = WyRand::new(9);
        let mut b = WyRand::new(9);
        for len in [0, 1, 7, 8, 9, 16, 67, 400] {
            let got = exact_string(&mut a, len);
            let mut want = Vec::new();
            while want.len() < len {
                let mut x = b.next_u64();
                for _ in 0..(len - want.len()).min(8) {
                    let t = x as u128 * 26;
                    want.push(b'a' + (t >> 64) as u8);
                    x = t as u64;
                }
            }
            assert_eq!(got.as_bytes(), &want[..], "{len}");
        }
        // Extremes: the largest fraction gives all 'z', 0 all 'a'.
        assert_eq!(super::super::text::eight_letters(u64::MAX), [b'z'; 8]);
        assert_eq!(super::super::text::eight_letters(0), [b'a'; 8]);
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
