//! The NEXMark records: the compact ones the runtime moves ([`NexEvent`]:
//! [`Person`], [`Auction`], [`Bid`], with an inline [`Name`]) and the full
//! ones of the specification ([`FullEvent`]), for files.

use super::text::Text;
use std::fmt;
use std::hash::{Hash, Hasher};

/// Capacity of a [`Name`], in bytes of UTF-8.
pub const NAME_CAP: usize = 64;

/// A person's name stored inline: up to [`NAME_CAP`] (64) bytes of UTF-8 and
/// its length, no heap. Bytes past the length are zero.
///
/// Layout: `#[repr(C)]`, 65 bytes, alignment 1.
#[derive(Clone, Copy, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[repr(C)]
pub struct Name {
    bytes: [u8; NAME_CAP],
    len: u8,
}

/// A name longer than [`NAME_CAP`] bytes (see [`Name::new`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NameTooLong {
    /// The length of the rejected name, in bytes.
    pub len: usize,
}

impl fmt::Display for NameTooLong {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "name of {} bytes is longer than the limit of {NAME_CAP} bytes",
            self.len
        )
    }
}

impl std::error::Error for NameTooLong {}

impl Name {
    /// The empty name.
    pub const EMPTY: Name = Name {
        bytes: [0; NAME_CAP],
        len: 0,
    };

    /// `s` as a name.
    ///
    /// # Errors
    /// [`NameTooLong`] if `s` has more than [`NAME_CAP`] bytes.
    pub fn new(s: &str) -> Result<Name, NameTooLong> {
        if s.len() > NAME_CAP {
            return Err(NameTooLong { len: s.len() });
        }
        let mut n = Name::EMPTY;
        n.bytes[..s.len()].copy_from_slice(s.as_bytes());
        n.len = s.len() as u8;
        Ok(n)
    }

    /// `s` cut to at most [`NAME_CAP`] bytes at a character boundary.
    pub fn truncated(s: &str) -> Name {
        let mut end = s.len().min(NAME_CAP);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        Name::new(&s[..end]).expect("cut to the capacity")
    }

    /// `first + " " + last` at compile time (the generator's name table).
    /// Panics (at compile time) if the result is longer than [`NAME_CAP`].
    pub(crate) const fn joined(first: &str, last: &str) -> Name {
        let (a, b) = (first.as_bytes(), last.as_bytes());
        assert!(a.len() + 1 + b.len() <= NAME_CAP);
        let mut n = Name::EMPTY;
        let mut i = 0;
        while i < a.len() {
            n.bytes[i] = a[i];
            i += 1;
        }
        n.bytes[i] = b' ';
        let mut j = 0;
        while j < b.len() {
            n.bytes[i + 1 + j] = b[j];
            j += 1;
        }
        n.len = (a.len() + 1 + b.len()) as u8;
        n
    }

    /// The name's bytes (UTF-8).
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..(self.len as usize).min(NAME_CAP)]
    }

    /// The name. Always the whole name for a `Name` built by this module;
    /// for one deserialized from corrupt bytes, the longest valid UTF-8
    /// prefix of its bytes.
    #[inline]
    pub fn as_str(&self) -> &str {
        utf8_prefix(self.as_bytes())
    }

    /// Length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.as_bytes().len()
    }

    /// Whether the name is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The longest valid UTF-8 prefix of `b` (all of it when valid).
#[inline]
fn utf8_prefix(b: &[u8]) -> &str {
    match std::str::from_utf8(b) {
        Ok(s) => s,
        Err(e) => std::str::from_utf8(&b[..e.valid_up_to()]).expect("valid prefix"),
    }
}

impl ArchivedName {
    /// The archived name's bytes.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..(self.len as usize).min(NAME_CAP)]
    }

    /// The archived name (see [`Name::as_str`]), read in place.
    #[inline]
    pub fn as_str(&self) -> &str {
        utf8_prefix(self.as_bytes())
    }
}

impl Default for Name {
    fn default() -> Name {
        Name::EMPTY
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Name) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for Name {}

impl Hash for Name {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state)
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl TryFrom<&str> for Name {
    type Error = NameTooLong;
    fn try_from(s: &str) -> Result<Name, NameTooLong> {
        Name::new(s)
    }
}

/// A new person (compact): the fields the queries read.
///
/// Layout: `#[repr(C)]`, 88 bytes (two `u64`, the 65-byte [`Name`], 7 bytes
/// of tail padding).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    rkyv::Archive,
    rkyv::Serialize,
    rkyv::Deserialize,
)]
#[repr(C)]
pub struct Person {
    /// Person id (from [`FIRST_PERSON_ID`](super::FIRST_PERSON_ID) = 1000 on,
    /// one more per person).
    pub id: u64,
    /// Event time, ms since the Unix epoch.
    pub date_time: u64,
    /// Full name, e.g. `"Peter Shultz"`.
    pub name: Name,
}

/// A new auction (compact): every scalar field of the specification.
///
/// Layout: `#[repr(C)]`, 56 bytes (seven `u64`).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    rkyv::Archive,
    rkyv::Serialize,
    rkyv::Deserialize,
)]
#[rkyv(derive(Debug, PartialEq, Eq))]
#[repr(C)]
pub struct Auction {
    /// Auction id (from [`FIRST_AUCTION_ID`](super::FIRST_AUCTION_ID) = 1000
    /// on, one more per auction).
    pub id: u64,
    /// The seller's person id.
    pub seller: u64,
    /// Category, `10..15` ([`FIRST_CATEGORY_ID`](super::FIRST_CATEGORY_ID) +
    /// `0..`[`NUM_CATEGORIES`](super::NUM_CATEGORIES)).
    pub category: u64,
    /// Opening price, in cents.
    pub initial_bid: u64,
    /// Reserve price, in cents (≥ `initial_bid`).
    pub reserve: u64,
    /// Event time (the auction opens), ms since the Unix epoch.
    pub date_time: u64,
    /// When the auction closes, ms since the Unix epoch (> `date_time`).
    pub expires: u64,
}

/// A bid (compact): every scalar field of the specification.
///
/// Layout: `#[repr(C)]`, 32 bytes (four `u64`).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    rkyv::Archive,
    rkyv::Serialize,
    rkyv::Deserialize,
)]
#[rkyv(derive(Debug, PartialEq, Eq))]
#[repr(C)]
pub struct Bid {
    /// The auction's id.
    pub auction: u64,
    /// The bidder's person id.
    pub bidder: u64,
    /// Bid price, in cents.
    pub price: u64,
    /// Event time, ms since the Unix epoch.
    pub date_time: u64,
}

/// One NEXMark event as the runtime moves it: `Copy`, no heap,
/// rkyv-archivable.
///
/// Layout: `#[repr(C, u8)]`: a one-byte tag (0 person, 1 auction, 2 bid) at
/// offset 0, the variant at offset 8; 96 bytes.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize,
)]
#[repr(C, u8)]
pub enum NexEvent {
    /// A new person.
    Person(Person),
    /// A new auction.
    Auction(Auction),
    /// A bid.
    Bid(Bid),
}

impl Default for NexEvent {
    /// A zero bid (a placeholder for batch buffers).
    fn default() -> NexEvent {
        NexEvent::Bid(Bid::default())
    }
}

impl NexEvent {
    /// Event time, ms since the Unix epoch.
    #[inline]
    pub fn date_time(&self) -> u64 {
        match self {
            NexEvent::Person(p) => p.date_time,
            NexEvent::Auction(a) => a.date_time,
            NexEvent::Bid(b) => b.date_time,
        }
    }

    /// Which kind of event this is.
    #[inline]
    pub fn kind(&self) -> EventKind {
        match self {
            NexEvent::Person(_) => EventKind::Person,
            NexEvent::Auction(_) => EventKind::Auction,
            NexEvent::Bid(_) => EventKind::Bid,
        }
    }
}

impl ArchivedNexEvent {
    /// Event time, ms since the Unix epoch, read in place.
    #[inline]
    pub fn date_time(&self) -> u64 {
        match self {
            ArchivedNexEvent::Person(p) => p.date_time.to_native(),
            ArchivedNexEvent::Auction(a) => a.date_time.to_native(),
            ArchivedNexEvent::Bid(b) => b.date_time.to_native(),
        }
    }

    /// Which kind of event this is.
    #[inline]
    pub fn kind(&self) -> EventKind {
        match self {
            ArchivedNexEvent::Person(_) => EventKind::Person,
            ArchivedNexEvent::Auction(_) => EventKind::Auction,
            ArchivedNexEvent::Bid(_) => EventKind::Bid,
        }
    }

    /// The event, copied out of the archive (no allocation).
    #[inline]
    pub fn to_native(&self) -> NexEvent {
        match self {
            ArchivedNexEvent::Person(p) => NexEvent::Person(p.to_native()),
            ArchivedNexEvent::Auction(a) => NexEvent::Auction(a.to_native()),
            ArchivedNexEvent::Bid(b) => NexEvent::Bid(b.to_native()),
        }
    }
}

impl ArchivedPerson {
    /// The person, copied out of the archive.
    #[inline]
    pub fn to_native(&self) -> Person {
        let mut name = Name::EMPTY;
        let b = self.name.as_bytes();
        name.bytes[..b.len()].copy_from_slice(b);
        name.len = b.len() as u8;
        Person {
            id: self.id.to_native(),
            date_time: self.date_time.to_native(),
            name,
        }
    }
}

impl ArchivedAuction {
    /// The auction, copied out of the archive.
    #[inline]
    pub fn to_native(&self) -> Auction {
        Auction {
            id: self.id.to_native(),
            seller: self.seller.to_native(),
            category: self.category.to_native(),
            initial_bid: self.initial_bid.to_native(),
            reserve: self.reserve.to_native(),
            date_time: self.date_time.to_native(),
            expires: self.expires.to_native(),
        }
    }
}

impl ArchivedBid {
    /// The bid, copied out of the archive.
    #[inline]
    pub fn to_native(&self) -> Bid {
        Bid {
            auction: self.auction.to_native(),
            bidder: self.bidder.to_native(),
            price: self.price.to_native(),
            date_time: self.date_time.to_native(),
        }
    }
}

/// The three kinds of NEXMark event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventKind {
    /// A new person (`"type":"person"`).
    Person,
    /// A new auction (`"type":"auction"`).
    Auction,
    /// A bid (`"type":"bid"`).
    Bid,
}

impl EventKind {
    /// The JSON `type` value: `"person"`, `"auction"` or `"bid"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            EventKind::Person => "person",
            EventKind::Auction => "auction",
            EventKind::Bid => "bid",
        }
    }

    /// Parses the exact (case-sensitive) JSON `type` value.
    #[inline]
    pub fn from_bytes(s: &[u8]) -> Option<EventKind> {
        match s {
            b"person" => Some(EventKind::Person),
            b"auction" => Some(EventKind::Auction),
            b"bid" => Some(EventKind::Bid),
            _ => None,
        }
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A new person with every field of the specification (Beam's
/// `model.Person`). Times are ms since the Unix epoch.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct FullPerson {
    /// Person id.
    pub id: u64,
    /// Full name, `"<first> <last>"`.
    pub name: String,
    /// E-mail address `<user>@<domain>.com`: `user` 3–6 and `domain` 3–4
    /// random lowercase letters or spaces, trimmed (Beam's shape).
    pub email_address: String,
    /// Credit card number: four groups of four digits, space-separated.
    pub credit_card: String,
    /// US city.
    pub city: String,
    /// US state (two letters).
    pub state: String,
    /// Event time, ms since the Unix epoch.
    pub date_time: u64,
    /// Padding letters bringing the person to about
    /// [`avg_person_byte_size`](super::NexmarkConfig::avg_person_byte_size)
    /// bytes on average.
    pub extra: String,
}

/// A new auction with every field of the specification (Beam's
/// `model.Auction`). Prices in cents, times in ms since the Unix epoch.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct FullAuction {
    /// Auction id.
    pub id: u64,
    /// Item name: 3–19 random lowercase letters or spaces, trimmed.
    pub item_name: String,
    /// Description: 3–99 random lowercase letters or spaces, trimmed.
    pub description: String,
    /// Opening price, cents.
    pub initial_bid: u64,
    /// Reserve price, cents.
    pub reserve: u64,
    /// Event time, ms since the Unix epoch.
    pub date_time: u64,
    /// Closing time, ms since the Unix epoch.
    pub expires: u64,
    /// The seller's person id.
    pub seller: u64,
    /// Category id.
    pub category: u64,
    /// Padding letters bringing the auction to about
    /// [`avg_auction_byte_size`](super::NexmarkConfig::avg_auction_byte_size)
    /// bytes on average.
    pub extra: String,
}

/// A bid with every field of the specification (the Flink NEXMark
/// `model.Bid`, which adds `channel` and `url` to Beam's). Price in cents,
/// time in ms since the Unix epoch.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct FullBid {
    /// The auction's id.
    pub auction: u64,
    /// The bidder's person id.
    pub bidder: u64,
    /// Bid price, cents.
    pub price: u64,
    /// Where the bid came from: one of four hot channels (`"Google"`,
    /// `"Facebook"`, `"Baidu"`, `"Apple"`) or `"channel-<0..10000>"`. The
    /// generator shares one text per channel (a clone, no copy).
    pub channel: Text,
    /// The channel's URL (shared per channel by the generator).
    pub url: Text,
    /// Event time, ms since the Unix epoch.
    pub date_time: u64,
    /// Padding letters bringing the bid to about
    /// [`avg_bid_byte_size`](super::NexmarkConfig::avg_bid_byte_size) bytes on
    /// average. The generator's are lazy: drawn each time they are read
    /// (see [`Text`]); a query that never reads them never draws them.
    pub extra: Text,
}

/// One NEXMark event with every field (for files; see [`NexEvent`] for the
/// compact form the runtime moves).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum FullEvent {
    /// A new person.
    Person(FullPerson),
    /// A new auction.
    Auction(FullAuction),
    /// A bid.
    Bid(FullBid),
}

impl Default for FullEvent {
    /// An empty bid (for buffers).
    fn default() -> FullEvent {
        FullEvent::Bid(FullBid::default())
    }
}

impl FullEvent {
    /// Event time, ms since the Unix epoch.
    pub fn date_time(&self) -> u64 {
        match self {
            FullEvent::Person(p) => p.date_time,
            FullEvent::Auction(a) => a.date_time,
            FullEvent::Bid(b) => b.date_time,
        }
    }

    /// Which kind of event this is.
    pub fn kind(&self) -> EventKind {
        match self {
            FullEvent::Person(_) => EventKind::Person,
            FullEvent::Auction(_) => EventKind::Auction,
            FullEvent::Bid(_) => EventKind::Bid,
        }
    }
}

/// The compact projection of a full event: the fields [`NexEvent`] keeps.
/// A person's name longer than [`NAME_CAP`] bytes (never generated) is cut
/// at a character boundary.
pub fn compact(e: &FullEvent) -> NexEvent {
    match e {
        FullEvent::Person(p) => NexEvent::Person(Person {
            id: p.id,
            date_time: p.date_time,
            name: Name::truncated(&p.name),
        }),
        FullEvent::Auction(a) => NexEvent::Auction(Auction {
            id: a.id,
            seller: a.seller,
            category: a.category,
            initial_bid: a.initial_bid,
            reserve: a.reserve,
            date_time: a.date_time,
            expires: a.expires,
        }),
        FullEvent::Bid(b) => NexEvent::Bid(Bid {
            auction: b.auction,
            bidder: b.bidder,
            price: b.price,
            date_time: b.date_time,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts() {
        assert_eq!(std::mem::size_of::<Name>(), 65);
        assert_eq!(std::mem::size_of::<Person>(), 88);
        assert_eq!(std::mem::size_of::<Auction>(), 56);
        assert_eq!(std::mem::size_of::<Bid>(), 32);
        assert_eq!(std::mem::size_of::<NexEvent>(), 96);
    }

    #[test]
    fn names() {
        let n = Name::new("Peter Shultz").unwrap();
        assert_eq!(n.as_str(), "Peter Shultz");
        assert_eq!(n.len(), 12);
        assert_eq!(n, Name::joined("Peter", "Shultz"));
        assert_eq!(format!("{n:?}"), "\"Peter Shultz\"");
        let long = "é".repeat(33); // 66 bytes
        assert_eq!(Name::new(&long), Err(NameTooLong { len: 66 }));
        assert_eq!(
            Name::new(&long).unwrap_err().to_string(),
            "name of 66 bytes is longer than the limit of 64 bytes"
        );
        assert_eq!(Name::truncated(&long).as_str(), "é".repeat(32));
        assert!(Name::new(&"x".repeat(64)).is_ok());
        assert!(Name::default().is_empty());
    }

    #[test]
    fn rkyv_round_trip() {
        let events = vec![
            NexEvent::Person(Person {
                id: 1000,
                date_time: 7,
                name: Name::new("Kate Smith").unwrap(),
            }),
            NexEvent::Auction(Auction {
                id: 1001,
                seller: 1000,
                category: 12,
                initial_bid: 5,
                reserve: 9,
                date_time: 8,
                expires: 20,
            }),
            NexEvent::Bid(Bid {
                auction: 1001,
                bidder: 1000,
                price: 77,
                date_time: 9,
            }),
        ];
        let bytes = rkyv::to_bytes::<rkyv::rancor::Error>(&events).unwrap();
        let archived =
            rkyv::access::<rkyv::Archived<Vec<NexEvent>>, rkyv::rancor::Error>(&bytes).unwrap();
        assert_eq!(archived.len(), 3);
        let back: Vec<NexEvent> = archived.iter().map(|a| a.to_native()).collect();
        assert_eq!(back, events);
        assert_eq!(archived[1].date_time(), 8);
        assert_eq!(archived[2].kind(), EventKind::Bid);
        match &archived[0] {
            ArchivedNexEvent::Person(p) => assert_eq!(p.name.as_str(), "Kate Smith"),
            _ => panic!("not a person"),
        }
        let de: Vec<NexEvent> =
            rkyv::deserialize::<Vec<NexEvent>, rkyv::rancor::Error>(archived).unwrap();
        assert_eq!(de, events);
    }
}
