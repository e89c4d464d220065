//! NEXMark events as JSON lines: writer (full events) and parsers (compact
//! or full events, with precise errors).
//!
//! Both parsers also read Apache Beam NEXMark's nested form of events
//! (`{"newPerson":{…},"newAuction":null,"bid":null}`, ISO-8601 or ms
//! times), telling the forms apart per line: a line with a top-level
//! `type` is ours, one with `newPerson`, `newAuction` or `bid` instead is
//! Beam's (see the `beam` module, [`write_beam_json_line`](super::write_beam_json_line)).
//! What follows describes our form; inside Beam's objects the same
//! fields are checked the same way, but for `type` (none) and the times.
//!
//! # Schema
//!
//! One flat object per line with a `type` member and the Beam field names
//! in camelCase (members in this order when written):
//!
//! ```text
//! {"type":"person","id":1000,"name":"Peter Shultz","emailAddress":"…","creditCard":"…","city":"…","state":"…","dateTime":1700000000000,"extra":"…"}
//! {"type":"auction","id":1000,"itemName":"…","description":"…","initialBid":1234,"reserve":5678,"dateTime":…,"expires":…,"seller":1000,"category":10,"extra":"…"}
//! {"type":"bid","auction":1000,"bidder":1001,"price":4321,"channel":"Google","url":"…","dateTime":…,"extra":"…"}
//! ```
//!
//! Ids, prices (cents), `category` and the times are JSON integers; times
//! (`dateTime`, `expires`) are milliseconds since the Unix epoch. Strings
//! are written with JSON escapes where needed (generated ones never need
//! any).
//!
//! # Parser
//!
//! [`parse_json_line`] reads what the queries use: `type`, then per kind
//! person `id`, `name`, `dateTime`; auction `id`, `seller`, `category`,
//! `initialBid`, `reserve`, `dateTime`, `expires`; bid `auction`,
//! `bidder`, `price`, `dateTime`. Those must be present, once, with the
//! right type (integers: non-negative, fitting a `u64`; `name`: a string of
//! at most 64 bytes). Every other member is ignored, whatever its type.
//!
//! [`parse_full_json_line`] reads every field into a [`FullEvent`]: the
//! compact ones, checked as above, and the kind's strings, which must be
//! present, once, as strings (person `emailAddress`, `creditCard`, `city`,
//! `state`, `extra`; auction `itemName`, `description`, `extra`; bid
//! `channel`, `url`, `extra`). So [`compact`](super::compact) of a full
//! parse is the compact parse of the same line.
//!
//! Like the YSB parser, it validates UTF-8 (SIMD) and then runs a
//! single-pass scanner specialised for flat lines with integers and
//! unescaped strings, which allocates nothing; anything else (escapes,
//! nested values, a bad or missing value, malformed JSON) goes to the slow
//! path, `serde_json`, which accepts any valid JSON object and produces the
//! error message.

use std::fmt;

use super::model::{
    Auction, Bid, EventKind, FullAuction, FullBid, FullEvent, FullPerson, Name, NameTooLong,
    NexEvent, Person, NAME_CAP,
};
use super::text::Text;
use crate::sources::json_scan::{format_u64, object_members, skip_ws, string_end, NotAnObject};

/// A member of the NEXMark JSON schema that the parser reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Field {
    /// `type`: `"person"`, `"auction"` or `"bid"`.
    Type = 0,
    /// `id` (person, auction): integer.
    Id = 1,
    /// `name` (person): string of at most 64 bytes.
    Name = 2,
    /// `dateTime`: integer, ms since the Unix epoch.
    DateTime = 3,
    /// `seller` (auction): integer person id.
    Seller = 4,
    /// `category` (auction): integer.
    Category = 5,
    /// `initialBid` (auction): integer, cents.
    InitialBid = 6,
    /// `reserve` (auction): integer, cents.
    Reserve = 7,
    /// `expires` (auction): integer, ms since the Unix epoch.
    Expires = 8,
    /// `auction` (bid): integer auction id.
    Auction = 9,
    /// `bidder` (bid): integer person id.
    Bidder = 10,
    /// `price` (bid): integer, cents.
    Price = 11,
    /// `emailAddress` (person, full events only): string.
    EmailAddress = 12,
    /// `creditCard` (person, full events only): string.
    CreditCard = 13,
    /// `city` (person, full events only): string.
    City = 14,
    /// `state` (person, full events only): string.
    State = 15,
    /// `extra` (every kind, full events only): string.
    Extra = 16,
    /// `itemName` (auction, full events only): string.
    ItemName = 17,
    /// `description` (auction, full events only): string.
    Description = 18,
    /// `channel` (bid, full events only): string.
    Channel = 19,
    /// `url` (bid, full events only): string.
    Url = 20,
    /// `newPerson` (Beam's form): the person object, or `null`.
    NewPerson = 21,
    /// `newAuction` (Beam's form): the auction object, or `null`.
    NewAuction = 22,
    /// `bid` (Beam's form): the bid object, or `null`.
    Bid = 23,
}

const NUM_FIELDS: usize = 24;

/// The fields that carry a value into [`Values`] (`type` to `url`; not
/// Beam's wrappers).
const NUM_VALUES: usize = 21;

impl Field {
    /// All fields, in discriminant order.
    pub const ALL: [Field; NUM_FIELDS] = [
        Field::Type,
        Field::Id,
        Field::Name,
        Field::DateTime,
        Field::Seller,
        Field::Category,
        Field::InitialBid,
        Field::Reserve,
        Field::Expires,
        Field::Auction,
        Field::Bidder,
        Field::Price,
        Field::EmailAddress,
        Field::CreditCard,
        Field::City,
        Field::State,
        Field::Extra,
        Field::ItemName,
        Field::Description,
        Field::Channel,
        Field::Url,
        Field::NewPerson,
        Field::NewAuction,
        Field::Bid,
    ];

    /// The JSON member name.
    pub const fn name(self) -> &'static str {
        match self {
            Field::Type => "type",
            Field::Id => "id",
            Field::Name => "name",
            Field::DateTime => "dateTime",
            Field::Seller => "seller",
            Field::Category => "category",
            Field::InitialBid => "initialBid",
            Field::Reserve => "reserve",
            Field::Expires => "expires",
            Field::Auction => "auction",
            Field::Bidder => "bidder",
            Field::Price => "price",
            Field::EmailAddress => "emailAddress",
            Field::CreditCard => "creditCard",
            Field::City => "city",
            Field::State => "state",
            Field::Extra => "extra",
            Field::ItemName => "itemName",
            Field::Description => "description",
            Field::Channel => "channel",
            Field::Url => "url",
            Field::NewPerson => "newPerson",
            Field::NewAuction => "newAuction",
            Field::Bid => "bid",
        }
    }

    /// The member of our flat form (or of the objects inside Beam's form)
    /// named `key`; Beam's wrappers (`newPerson`, ...) are not among them.
    #[inline]
    fn from_key(key: &[u8]) -> Option<Field> {
        Some(match key {
            b"type" => Field::Type,
            b"id" => Field::Id,
            b"name" => Field::Name,
            b"dateTime" => Field::DateTime,
            b"seller" => Field::Seller,
            b"category" => Field::Category,
            b"initialBid" => Field::InitialBid,
            b"reserve" => Field::Reserve,
            b"expires" => Field::Expires,
            b"auction" => Field::Auction,
            b"bidder" => Field::Bidder,
            b"price" => Field::Price,
            b"emailAddress" => Field::EmailAddress,
            b"creditCard" => Field::CreditCard,
            b"city" => Field::City,
            b"state" => Field::State,
            b"extra" => Field::Extra,
            b"itemName" => Field::ItemName,
            b"description" => Field::Description,
            b"channel" => Field::Channel,
            b"url" => Field::Url,
            _ => return None,
        })
    }

    pub(super) const fn bit(self) -> u32 {
        1 << self as u32
    }

    /// Whether its value is a string (else an integer; Beam's wrappers
    /// are neither and never asked).
    const fn is_string(self) -> bool {
        matches!(self, Field::Type | Field::Name)
            || (self as u32 >= Field::EmailAddress as u32 && self as u32 <= Field::Url as u32)
    }

    /// Whether its value is an instant (`dateTime`, `expires`): in Beam's
    /// form an ISO-8601 string or integer ms.
    const fn is_instant(self) -> bool {
        matches!(self, Field::DateTime | Field::Expires)
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The fields an event of kind `k` must have (bit set of [`Field::bit`]),
/// `type` included.
pub(super) const fn required(k: EventKind) -> u32 {
    let common = Field::Type.bit() | Field::DateTime.bit();
    match k {
        EventKind::Person => common | Field::Id.bit() | Field::Name.bit(),
        EventKind::Auction => {
            common
                | Field::Id.bit()
                | Field::Seller.bit()
                | Field::Category.bit()
                | Field::InitialBid.bit()
                | Field::Reserve.bit()
                | Field::Expires.bit()
        }
        EventKind::Bid => common | Field::Auction.bit() | Field::Bidder.bit() | Field::Price.bit(),
    }
}

/// The fields a full event of kind `k` must have: [`required`] and the
/// kind's strings.
pub(super) const fn required_full(k: EventKind) -> u32 {
    required(k)
        | Field::Extra.bit()
        | match k {
            EventKind::Person => {
                Field::EmailAddress.bit()
                    | Field::CreditCard.bit()
                    | Field::City.bit()
                    | Field::State.bit()
            }
            EventKind::Auction => Field::ItemName.bit() | Field::Description.bit(),
            EventKind::Bid => Field::Channel.bit() | Field::Url.bit(),
        }
}

/// The accepted `type` values, for error messages.
pub const TYPE_VALUES: &str = r#""person", "auction", "bid""#;

/// Why a JSON line is not a valid NEXMark event: the event kind (once
/// known), the member at fault (when the problem is in one) and what is
/// wrong. Displays as e.g. `field price (bid): missing`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// The event's kind, when its `type` was read.
    pub event: Option<EventKind>,
    /// The member at fault; `None` for problems of the whole line.
    pub field: Option<Field>,
    /// What is wrong.
    pub kind: FieldErrorKind,
}

/// What is wrong in a [`FieldError`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FieldErrorKind {
    /// The member is absent.
    Missing,
    /// The member appears more than once.
    Duplicate,
    /// The member's JSON type is wrong.
    WrongType {
        /// What was expected: `"an integer"` or `"a string"`.
        expected: &'static str,
        /// The JSON type found: `string`, `number`, `object`, `array`,
        /// `boolean`, `null`.
        found: &'static str,
    },
    /// A number that is not a non-negative integer fitting a `u64`.
    NotAnInteger {
        /// The number as JSON text (cut at 64 bytes).
        value: String,
    },
    /// `type` names no event kind.
    UnknownType {
        /// The value (cut at 64 bytes).
        value: String,
    },
    /// `name` is longer than 64 bytes.
    NameTooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// The line is not valid JSON.
    Malformed {
        /// 1-based column (byte) where the JSON parser stopped.
        column: usize,
        /// The JSON parser's message.
        message: String,
    },
    /// The line is valid JSON but not an object.
    NotAnObject,
    /// The line is not valid UTF-8.
    NotUtf8 {
        /// 0-based byte offset of the first invalid byte in the line.
        offset: usize,
    },
    /// Neither form: no `type` member (ours) and none of `newPerson`,
    /// `newAuction`, `bid` (Beam's).
    NoForm,
    /// Beam's form: `newPerson`, `newAuction` and `bid` are all `null`.
    NoEvent,
    /// Beam's form: a second event in the line (the field is the second
    /// non-null wrapper).
    SecondEvent {
        /// The wrapper of the first event.
        first: Field,
    },
    /// Beam's form: an instant (`dateTime`, `expires`) string that is not
    /// an ISO-8601 instant at or after 1970 (see
    /// [`parse_instant`](super::parse_instant)).
    BadInstant {
        /// The string (cut at 64 bytes).
        value: String,
    },
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(field) = self.field {
            write!(f, "field {field}")?;
            match self.event {
                Some(e) if field != Field::Type => write!(f, " ({e}): ")?,
                _ => f.write_str(": ")?,
            }
        }
        match &self.kind {
            FieldErrorKind::Missing => f.write_str("missing"),
            FieldErrorKind::Duplicate => f.write_str("appears more than once"),
            FieldErrorKind::WrongType { expected, found } => {
                write!(f, "expected {expected}, found {found}")
            }
            FieldErrorKind::NotAnInteger { value } => {
                write!(f, "{value} is not a non-negative 64-bit integer")
            }
            FieldErrorKind::UnknownType { value } => {
                write!(f, "{value:?} is not one of {TYPE_VALUES}")
            }
            FieldErrorKind::NameTooLong { len } => {
                write!(f, "{len} bytes, longer than the limit of {NAME_CAP}")
            }
            FieldErrorKind::Malformed { column, message } => {
                write!(
                    f,
                    "malformed JSON at column {column} of the line: {message}"
                )
            }
            FieldErrorKind::NotAnObject => f.write_str("not a JSON object"),
            FieldErrorKind::NotUtf8 { offset } => {
                write!(f, "invalid UTF-8 at byte {offset} of the line")
            }
            FieldErrorKind::NoForm => f.write_str(
                "missing, and no newPerson, newAuction or bid member either (Beam's form)",
            ),
            FieldErrorKind::NoEvent => {
                f.write_str("no event: newPerson, newAuction and bid are all null")
            }
            FieldErrorKind::SecondEvent { first } => write!(
                f,
                "a second event in one line ({first} is not null too; a line holds one event)"
            ),
            FieldErrorKind::BadInstant { value } => write!(
                f,
                "{value:?} is not an ISO-8601 instant at or after 1970 \
                 (like \"2015-07-15T00:00:00.000Z\") nor integer ms since the epoch"
            ),
        }
    }
}

impl std::error::Error for FieldError {}

// ------------------------------------------------------------------ writer

/// Appends `e` as one JSON line (compact, members in the order of the
/// module docs, ending in `\n`).
pub fn write_json_line(e: &FullEvent, out: &mut Vec<u8>) {
    let mut w = Writer { out };
    match e {
        FullEvent::Person(p) => {
            w.raw(br#"{"type":"person","id":"#);
            w.int(p.id);
            w.key_str(b"name", &p.name);
            w.key_str(b"emailAddress", &p.email_address);
            w.key_str(b"creditCard", &p.credit_card);
            w.key_str(b"city", &p.city);
            w.key_str(b"state", &p.state);
            w.key_int(b"dateTime", p.date_time);
            w.key_str(b"extra", &p.extra);
        }
        FullEvent::Auction(a) => {
            w.raw(br#"{"type":"auction","id":"#);
            w.int(a.id);
            w.key_str(b"itemName", &a.item_name);
            w.key_str(b"description", &a.description);
            w.key_int(b"initialBid", a.initial_bid);
            w.key_int(b"reserve", a.reserve);
            w.key_int(b"dateTime", a.date_time);
            w.key_int(b"expires", a.expires);
            w.key_int(b"seller", a.seller);
            w.key_int(b"category", a.category);
            w.key_str(b"extra", &a.extra);
        }
        FullEvent::Bid(b) => {
            w.raw(br#"{"type":"bid","auction":"#);
            w.int(b.auction);
            w.key_int(b"bidder", b.bidder);
            w.key_int(b"price", b.price);
            w.key_text(b"channel", &b.channel);
            w.key_text(b"url", &b.url);
            w.key_int(b"dateTime", b.date_time);
            w.key_text(b"extra", &b.extra);
        }
    }
    w.raw(b"}\n");
}

/// Appends JSON text to a buffer.
pub(super) struct Writer<'a> {
    pub(super) out: &'a mut Vec<u8>,
}

impl Writer<'_> {
    #[inline]
    pub(super) fn raw(&mut self, b: &[u8]) {
        self.out.extend_from_slice(b);
    }

    #[inline]
    pub(super) fn int(&mut self, v: u64) {
        let mut buf = [0u8; 20];
        self.raw(format_u64(v, &mut buf));
    }

    /// `,"key":`
    #[inline]
    pub(super) fn key(&mut self, key: &[u8]) {
        self.raw(b",\"");
        self.raw(key);
        self.raw(b"\":");
    }

    #[inline]
    pub(super) fn key_int(&mut self, key: &[u8], v: u64) {
        self.key(key);
        self.int(v);
    }

    #[inline]
    pub(super) fn key_str(&mut self, key: &[u8], s: &str) {
        self.key(key);
        write_json_string(s, self.out);
    }

    /// [`key_str`](Self::key_str) of a [`Text`] (lazy letters drawn on
    /// the stack).
    #[inline]
    pub(super) fn key_text(&mut self, key: &[u8], t: &Text) {
        t.with_str(|s| self.key_str(key, s));
    }
}

/// `s` as a JSON string: quoted, with `"`, `\` and control characters
/// escaped (`\n`, `\r`, `\t`, `\b`, `\f`, else `\u00XX`).
fn write_json_string(s: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    let b = s.as_bytes();
    let mut start = 0;
    for (i, &c) in b.iter().enumerate() {
        let esc: &[u8] = match c {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&b[start..i]);
        if esc.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(b"\\u00");
            out.push(HEX[(c >> 4) as usize]);
            out.push(HEX[(c & 0xf) as usize]);
        } else {
            out.extend_from_slice(esc);
        }
        start = i + 1;
    }
    out.extend_from_slice(&b[start..]);
    out.push(b'"');
}

// ------------------------------------------------------------------ parser

/// Parses one JSON line (without or with its trailing `\n` / `\r\n`;
/// surrounding whitespace is ignored) into a compact event. See the module
/// docs for what is checked.
#[inline]
pub fn parse_json_line(line: &[u8]) -> Result<NexEvent, FieldError> {
    if let Err(e) = simdutf8::compat::from_utf8(line) {
        return Err(FieldError {
            event: None,
            field: None,
            kind: FieldErrorKind::NotUtf8 {
                offset: e.valid_up_to(),
            },
        });
    }
    match fast_parse(line) {
        Some(e) => Ok(e),
        None => other_parse(line),
    }
}

/// A line our fast path did not take: Beam's form (its own fast path),
/// else the slow path of both forms.
#[cold]
#[inline(never)]
fn other_parse(line: &[u8]) -> Result<NexEvent, FieldError> {
    if let Some((kind, vals, seen)) = super::beam::fast_scan(line) {
        let need = super::beam::required(kind);
        if seen & need == need {
            if let Ok(e) = vals.event(kind) {
                return Ok(e);
            }
        }
    }
    slow_parse(line)
}

/// [`other_parse`] for full events.
#[cold]
#[inline(never)]
fn other_parse_full(line: &[u8]) -> Result<FullEvent, FieldError> {
    if let Some((kind, vals, seen)) = super::beam::fast_scan(line) {
        let need = super::beam::required_full(kind);
        if seen & need == need {
            if let Ok(e) = vals.full_event(kind) {
                return Ok(e);
            }
        }
    }
    slow_parse_with(line, true, |v, k| v.full_event(k))
}

/// Parses one JSON line into a full event: every field of its kind (see
/// the module docs), with the errors of [`parse_json_line`] and, for the
/// strings, `missing`, `appears more than once` and `expected a string`.
///
/// ```
/// use air_operators::sources::nexmark::*;
/// let line = br#"{"type":"bid","auction":1,"bidder":2,"price":3,"channel":"Apple","url":"https://a/b","dateTime":4,"extra":"x"}"#;
/// let FullEvent::Bid(b) = parse_full_json_line(line).unwrap() else { panic!() };
/// assert_eq!((b.channel, b.url, b.extra), ("Apple".into(), "https://a/b".into(), "x".into()));
/// let no_url = br#"{"type":"bid","auction":1,"bidder":2,"price":3,"channel":"Apple","dateTime":4,"extra":""}"#;
/// assert_eq!(parse_full_json_line(no_url).unwrap_err().to_string(), "field url (bid): missing");
/// assert!(parse_json_line(no_url).is_ok()); // the compact parser needs no url
/// ```
#[inline]
pub fn parse_full_json_line(line: &[u8]) -> Result<FullEvent, FieldError> {
    if let Err(e) = simdutf8::compat::from_utf8(line) {
        return Err(FieldError {
            event: None,
            field: None,
            kind: FieldErrorKind::NotUtf8 {
                offset: e.valid_up_to(),
            },
        });
    }
    match fast_scan(line) {
        Some((vals, seen)) => {
            let kind = vals.kind.filter(|&k| {
                let need = required_full(k);
                seen & need == need
            });
            match kind.map(|k| vals.full_event(k)) {
                Some(Ok(e)) => Ok(e),
                _ => other_parse_full(line),
            }
        }
        None => other_parse_full(line),
    }
}

/// The values of the known members of one line.
pub(super) struct Values<'a> {
    pub(super) kind: Option<EventKind>,
    ints: [u64; NUM_VALUES],
    /// The strings (`name` and the full events' strings).
    strs: [&'a str; NUM_VALUES],
}

impl Values<'_> {
    /// No values yet.
    #[inline(always)]
    pub(super) fn new() -> Self {
        Values {
            kind: None,
            ints: [0; NUM_VALUES],
            strs: [""; NUM_VALUES],
        }
    }

    /// The event of kind `k` from the values (all required ones present).
    pub(super) fn event(&self, k: EventKind) -> Result<NexEvent, FieldError> {
        let v = |f: Field| self.ints[f as usize];
        Ok(match k {
            EventKind::Person => NexEvent::Person(Person {
                id: v(Field::Id),
                date_time: v(Field::DateTime),
                name: Name::new(self.strs[Field::Name as usize]).map_err(
                    |NameTooLong { len }| FieldError {
                        event: Some(k),
                        field: Some(Field::Name),
                        kind: FieldErrorKind::NameTooLong { len },
                    },
                )?,
            }),
            EventKind::Auction => NexEvent::Auction(Auction {
                id: v(Field::Id),
                seller: v(Field::Seller),
                category: v(Field::Category),
                initial_bid: v(Field::InitialBid),
                reserve: v(Field::Reserve),
                date_time: v(Field::DateTime),
                expires: v(Field::Expires),
            }),
            EventKind::Bid => NexEvent::Bid(Bid {
                auction: v(Field::Auction),
                bidder: v(Field::Bidder),
                price: v(Field::Price),
                date_time: v(Field::DateTime),
            }),
        })
    }

    /// The full event of kind `k` from the values (all required ones
    /// present): the compact event's checks, and the strings.
    pub(super) fn full_event(&self, k: EventKind) -> Result<FullEvent, FieldError> {
        let s = |f: Field| self.strs[f as usize].to_owned();
        Ok(match self.event(k)? {
            NexEvent::Person(p) => FullEvent::Person(FullPerson {
                id: p.id,
                name: s(Field::Name),
                email_address: s(Field::EmailAddress),
                credit_card: s(Field::CreditCard),
                city: s(Field::City),
                state: s(Field::State),
                date_time: p.date_time,
                extra: s(Field::Extra),
            }),
            NexEvent::Auction(a) => FullEvent::Auction(FullAuction {
                id: a.id,
                item_name: s(Field::ItemName),
                description: s(Field::Description),
                initial_bid: a.initial_bid,
                reserve: a.reserve,
                date_time: a.date_time,
                expires: a.expires,
                seller: a.seller,
                category: a.category,
                extra: s(Field::Extra),
            }),
            NexEvent::Bid(b) => FullEvent::Bid(FullBid {
                auction: b.auction,
                bidder: b.bidder,
                price: b.price,
                channel: Text::from(self.strs[Field::Channel as usize]),
                url: Text::from(self.strs[Field::Url as usize]),
                date_time: b.date_time,
                extra: Text::from(self.strs[Field::Extra as usize]),
            }),
        })
    }
}

/// A JSON unsigned integer starting at `i` (no sign, no leading zero, no
/// fraction or exponent) that fits a `u64`; its value and end.
#[inline(always)]
fn parse_uint(b: &[u8], i: usize) -> Option<(u64, usize)> {
    let mut j = i;
    let mut v: u64 = 0;
    while let Some(&c) = b.get(j) {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        v = v.checked_mul(10)?.checked_add(d as u64)?;
        j += 1;
    }
    let len = j - i;
    if len == 0 || (len > 1 && b[i] == b'0') || matches!(b.get(j), Some(b'.' | b'e' | b'E')) {
        return None;
    }
    Some((v, j))
}

/// End of a scalar value that is not a string (number, `true`, `false`,
/// `null`) starting at `i`; `None` for anything else (nested values go to
/// the slow path). Numbers are only delimited here, not validated.
#[inline(always)]
pub(super) fn skip_scalar(b: &[u8], i: usize) -> Option<usize> {
    match *b.get(i)? {
        b'-' | b'0'..=b'9' => {
            let mut j = i + 1;
            while j < b.len() && matches!(b[j], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-') {
                j += 1;
            }
            Some(j)
        }
        b't' => b[i..].starts_with(b"true").then_some(i + 4),
        b'f' => b[i..].starts_with(b"false").then_some(i + 5),
        b'n' => b[i..].starts_with(b"null").then_some(i + 4),
        _ => None,
    }
}

/// The fast path: a flat line of integers and unescaped strings straight
/// into an event, or `None` for the slow path to decide.
#[inline]
fn fast_parse(b: &[u8]) -> Option<NexEvent> {
    let (vals, seen) = fast_scan(b)?;
    let kind = vals.kind?;
    let need = required(kind);
    if seen & need != need {
        return None;
    }
    vals.event(kind).ok()
}

/// The values of a flat line of integers and unescaped strings and the
/// members seen (bits of [`Field::bit`]), or `None` for the slow path to
/// decide.
#[inline(always)]
fn fast_scan(b: &[u8]) -> Option<(Values<'_>, u32)> {
    let mut vals = Values::new();
    let (seen, end) = scan_object::<false>(b, skip_ws(b, 0), &mut vals)?;
    if skip_ws(b, end) != b.len() {
        return None;
    }
    Some((vals, seen))
}

/// Reads the flat object of integers and unescaped strings that starts at
/// `b[i]` (`{`) into `vals` (fresh); returns the members seen (bits of
/// [`Field::bit`]) and the index just past its `}`, or `None` for the slow
/// path to decide.
/// `BEAM`: an object inside Beam's form, where `type` is not a member (it
/// is skipped like any unknown one) and `dateTime` / `expires` may also be
/// ISO-8601 strings.
#[inline(always)]
pub(super) fn scan_object<'a, const BEAM: bool>(
    b: &'a [u8],
    mut i: usize,
    vals: &mut Values<'a>,
) -> Option<(u32, usize)> {
    let mut seen = 0u32;
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i = skip_ws(b, i + 1);
    loop {
        if b.get(i) != Some(&b'"') {
            return None; // includes `{}`: the slow path says what is missing
        }
        let key_end = string_end(b, i + 1)?;
        let field = match Field::from_key(&b[i + 1..key_end]) {
            Some(Field::Type) if BEAM => None,
            f => f,
        };
        i = skip_ws(b, key_end + 1);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i = skip_ws(b, i + 1);
        i = match field {
            Some(f) => {
                if seen & f.bit() != 0 {
                    return None;
                }
                seen |= f.bit();
                match f {
                    _ if f.is_string() => {
                        if b.get(i) != Some(&b'"') {
                            return None;
                        }
                        let end = string_end(b, i + 1)?;
                        let s = &b[i + 1..end];
                        if f == Field::Type {
                            vals.kind = Some(EventKind::from_bytes(s)?);
                        } else {
                            if f == Field::Name && s.len() > NAME_CAP {
                                return None;
                            }
                            // The whole line is valid UTF-8 and a string
                            // without escapes ends at an ASCII quote, so
                            // this slice is valid UTF-8 too.
                            vals.strs[f as usize] = std::str::from_utf8(s).ok()?;
                        }
                        end + 1
                    }
                    _ if BEAM && f.is_instant() && b.get(i) == Some(&b'"') => {
                        let end = string_end(b, i + 1)?;
                        vals.ints[f as usize] = super::beam::parse_instant(&b[i + 1..end])?;
                        end + 1
                    }
                    _ => {
                        let (v, end) = parse_uint(b, i)?;
                        vals.ints[f as usize] = v;
                        end
                    }
                }
            }
            None => match b.get(i) {
                Some(b'"') => string_end(b, i + 1)? + 1,
                _ => skip_scalar(b, i)?,
            },
        };
        i = skip_ws(b, i);
        match b.get(i) {
            Some(b',') => i = skip_ws(b, i + 1),
            Some(b'}') => break,
            _ => return None,
        }
    }
    Some((seen, i + 1))
}

/// The JSON type of `v`, for error messages.
fn json_type(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "boolean",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Object(_) => "object",
    }
}

/// A value for an error message, cut at 64 bytes (at a character boundary).
fn cut(s: &str) -> String {
    const MAX: usize = 64;
    if s.len() <= MAX {
        return s.to_owned();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// The slow path: any JSON, precise errors.
#[cold]
fn slow_parse(line: &[u8]) -> Result<NexEvent, FieldError> {
    slow_parse_with(line, false, |v, k| v.event(k))
}

/// The slow path of both forms for compact (`full` false) or full events,
/// made into an event by `make`.
#[cold]
fn slow_parse_with<T>(
    line: &[u8],
    full: bool,
    make: fn(&Values<'_>, EventKind) -> Result<T, FieldError>,
) -> Result<T, FieldError> {
    let whole = |kind| FieldError {
        event: None,
        field: None,
        kind,
    };
    let members = match object_members(line) {
        Ok(m) => m,
        Err(NotAnObject::OtherValue) => return Err(whole(FieldErrorKind::NotAnObject)),
        Err(NotAnObject::Malformed { column, message }) => {
            return Err(whole(FieldErrorKind::Malformed { column, message }))
        }
    };
    let err = |event, f, kind| FieldError {
        event,
        field: Some(f),
        kind,
    };
    let mut types = members.iter().filter(|(k, _)| k == "type").map(|(_, v)| v);
    let kind = match (types.next(), types.next()) {
        (Some(_), Some(_)) => return Err(err(None, Field::Type, FieldErrorKind::Duplicate)),
        (None, _) => {
            if !members
                .iter()
                .any(|(k, _)| super::beam::wrapper(k.as_bytes()).is_some())
            {
                return Err(err(None, Field::Type, FieldErrorKind::NoForm));
            }
            // Beam's form: the one event object inside.
            let (kind, inner) = super::beam::slow_event(line)?;
            let (need, optional) = if full {
                (
                    super::beam::required_full(kind),
                    super::beam::optional_full(kind),
                )
            } else {
                (super::beam::required(kind), 0)
            };
            let vals = member_values(&inner, kind, need, optional, true)?;
            return make(&vals, kind);
        }
        (Some(serde_json::Value::String(s)), None) => match EventKind::from_bytes(s.as_bytes()) {
            Some(k) => k,
            None => {
                return Err(err(
                    None,
                    Field::Type,
                    FieldErrorKind::UnknownType { value: cut(s) },
                ))
            }
        },
        (Some(other), None) => {
            return Err(err(
                None,
                Field::Type,
                FieldErrorKind::WrongType {
                    expected: "a string",
                    found: json_type(other),
                },
            ))
        }
    };
    let need = if full {
        required_full(kind)
    } else {
        required(kind)
    };
    let vals = member_values(&members, kind, need, 0, false)?;
    make(&vals, kind)
}

/// The values of the fields `need` says an event of kind `kind` has, from
/// the members of its object, checked (present, once, of the right type
/// and range), and of the fields of `optional` that are present (checked
/// the same way). `beam`: the object inside Beam's form (`type` is no
/// member there; `dateTime` and `expires` may be ISO-8601 strings).
fn member_values<'a>(
    members: &'a [(String, serde_json::Value)],
    kind: EventKind,
    need: u32,
    optional: u32,
    beam: bool,
) -> Result<Values<'a>, FieldError> {
    // Each known member's value, and whether it was given twice.
    let mut values: [Option<&serde_json::Value>; NUM_VALUES] = [None; NUM_VALUES];
    let mut twice = 0u32;
    for (key, value) in members {
        if let Some(f) = Field::from_key(key.as_bytes()) {
            if values[f as usize].replace(value).is_some() {
                twice |= f.bit();
            }
        }
    }
    let mut vals = Values {
        kind: Some(kind),
        ints: [0; NUM_VALUES],
        strs: [""; NUM_VALUES],
    };
    for f in Field::ALL {
        if f == Field::Type || (need | optional) & f.bit() == 0 {
            continue;
        }
        let e = |k| {
            Err(FieldError {
                event: Some(kind),
                field: Some(f),
                kind: k,
            })
        };
        if twice & f.bit() != 0 {
            return e(FieldErrorKind::Duplicate);
        }
        let Some(v) = values[f as usize] else {
            if need & f.bit() == 0 {
                continue;
            }
            return e(FieldErrorKind::Missing);
        };
        match (f, v) {
            (Field::Name, serde_json::Value::String(s)) => {
                if s.len() > NAME_CAP {
                    return e(FieldErrorKind::NameTooLong { len: s.len() });
                }
                vals.strs[f as usize] = s;
            }
            (_, serde_json::Value::String(s)) if f.is_string() => vals.strs[f as usize] = s,
            (_, other) if f.is_string() => {
                return e(FieldErrorKind::WrongType {
                    expected: "a string",
                    found: json_type(other),
                })
            }
            (_, serde_json::Value::String(s)) if beam && f.is_instant() => {
                match super::beam::parse_instant(s.as_bytes()) {
                    Some(ms) => vals.ints[f as usize] = ms,
                    None => return e(FieldErrorKind::BadInstant { value: cut(s) }),
                }
            }
            (_, serde_json::Value::Number(num)) => match num.as_u64() {
                Some(x) => vals.ints[f as usize] = x,
                None => {
                    return e(FieldErrorKind::NotAnInteger {
                        value: cut(&num.to_string()),
                    })
                }
            },
            (_, other) => {
                return e(FieldErrorKind::WrongType {
                    expected: if beam && f.is_instant() {
                        "an ISO-8601 string or integer ms"
                    } else {
                        "an integer"
                    },
                    found: json_type(other),
                })
            }
        }
    }
    Ok(vals)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::nexmark::model::{FullAuction, FullBid, FullPerson};

    fn person() -> FullEvent {
        FullEvent::Person(FullPerson {
            id: 1000,
            name: "Peter Shultz".into(),
            email_address: "abc@de.com".into(),
            credit_card: "0001 0002 0003 0004".into(),
            city: "Boise".into(),
            state: "ID".into(),
            date_time: 1_700_000_000_000,
            extra: "xyz".into(),
        })
    }

    #[test]
    fn writer_text() {
        let mut out = Vec::new();
        write_json_line(&person(), &mut out);
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            "{\"type\":\"person\",\"id\":1000,\"name\":\"Peter Shultz\",\"emailAddress\":\"abc@de.com\",\"creditCard\":\"0001 0002 0003 0004\",\"city\":\"Boise\",\"state\":\"ID\",\"dateTime\":1700000000000,\"extra\":\"xyz\"}\n"
        );
        out.clear();
        let a = FullEvent::Auction(FullAuction {
            id: 1001,
            item_name: "a\"b\\c\n\u{1}é".into(),
            expires: u64::MAX,
            ..FullAuction::default()
        });
        write_json_line(&a, &mut out);
        let text = std::str::from_utf8(&out).unwrap();
        assert!(text.contains(r#""itemName":"a\"b\\c\n\u0001é""#), "{text}");
        let v: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(v["itemName"], "a\"b\\c\n\u{1}é");
        assert_eq!(v["expires"], u64::MAX);
        assert_eq!(parse_json_line(&out), Ok(compact(&a)));
        out.clear();
        let b = FullEvent::Bid(FullBid {
            auction: 1,
            bidder: 2,
            price: 3,
            channel: "Apple".into(),
            url: "https://x".into(),
            date_time: 4,
            extra: Text::default(),
        });
        write_json_line(&b, &mut out);
        assert_eq!(
            out,
            b"{\"type\":\"bid\",\"auction\":1,\"bidder\":2,\"price\":3,\"channel\":\"Apple\",\"url\":\"https://x\",\"dateTime\":4,\"extra\":\"\"}\n"
        );
        assert_eq!(fast_parse(&out), Some(compact(&b)));
    }

    use crate::sources::nexmark::model::compact;

    #[test]
    fn fast_and_slow_paths_agree() {
        let mut line = Vec::new();
        write_json_line(&person(), &mut line);
        let want = compact(&person());
        assert_eq!(fast_parse(&line), Some(want));
        assert_eq!(slow_parse(&line), Ok(want));
        let text = std::str::from_utf8(&line).unwrap().trim_end();
        // Another key order, spacing, escapes, nested unknown members.
        for variant in [
            r#"{ "dateTime" : 1700000000000 , "name":"Peter Shultz", "id":1000, "type":"person" }"#
                .to_owned(),
            text.replace("Peter", "P\\u0065ter"),
            text.replacen('{', r#"{"x":{"y":[1,2,null]},"z":-1.5e3,"t":true,"#, 1),
            format!("  {text}\r\n"),
        ] {
            assert_eq!(parse_json_line(variant.as_bytes()), Ok(want), "{variant}");
        }
    }

    fn error(line: &str) -> String {
        parse_json_line(line.as_bytes()).unwrap_err().to_string()
    }

    #[test]
    fn error_messages() {
        assert_eq!(
            error(r#"{"type":"bid","auction":1,"bidder":2,"dateTime":3}"#),
            "field price (bid): missing"
        );
        assert_eq!(
            error(r#"{"type":"bid","auction":1,"bidder":"2","price":1,"dateTime":3}"#),
            "field bidder (bid): expected an integer, found string"
        );
        assert_eq!(
            error(r#"{"type":"bid","auction":1,"bidder":2,"price":-1,"dateTime":3}"#),
            "field price (bid): -1 is not a non-negative 64-bit integer"
        );
        assert_eq!(
            error(r#"{"type":"bid","auction":1,"bidder":2,"price":1.5,"dateTime":3}"#),
            "field price (bid): 1.5 is not a non-negative 64-bit integer"
        );
        assert_eq!(
            error(r#"{"type":"Bid","auction":1}"#),
            r#"field type: "Bid" is not one of "person", "auction", "bid""#
        );
        assert_eq!(
            error(r#"{"auction":1}"#),
            "field type: missing, and no newPerson, newAuction or bid member either (Beam's form)"
        );
        assert_eq!(
            error(r#"{"type":7}"#),
            "field type: expected a string, found number"
        );
        let long = "x".repeat(65);
        assert_eq!(
            error(&format!(
                r#"{{"type":"person","id":1,"name":"{long}","dateTime":2}}"#
            )),
            "field name (person): 65 bytes, longer than the limit of 64"
        );
        assert_eq!(
            error(r#"{"type":"person","id":1,"name":null,"dateTime":2}"#),
            "field name (person): expected a string, found null"
        );
        assert_eq!(
            error(r#"{"type":"bid","auction":1,"auction":1,"bidder":2,"price":1,"dateTime":3}"#),
            "field auction (bid): appears more than once"
        );
        assert_eq!(error("[1,2]"), "not a JSON object");
        assert!(error(r#"{"type":"bid""#).starts_with("malformed JSON at column 13"));
        assert_eq!(
            parse_json_line(b"{\"type\":\"bid\xff\"}").unwrap_err().kind,
            FieldErrorKind::NotUtf8 { offset: 12 }
        );
        // Members of other kinds are ignored, whatever their type.
        assert_eq!(
            parse_json_line(
                br#"{"type":"bid","auction":1,"bidder":2,"price":3,"dateTime":4,"name":5,"id":"x"}"#
            ),
            Ok(NexEvent::Bid(Bid {
                auction: 1,
                bidder: 2,
                price: 3,
                date_time: 4
            }))
        );
    }

    #[test]
    fn full_events_round_trip_and_their_errors() {
        let cfg = crate::sources::nexmark::NexmarkConfig::default();
        let mut line = Vec::new();
        for n in 0..500 {
            let e = crate::sources::nexmark::full_event(&cfg, n);
            line.clear();
            write_json_line(&e, &mut line);
            assert_eq!(parse_full_json_line(&line), Ok(e.clone()), "event {n}");
            assert!(fast_scan(&line).is_some(), "event {n} takes the fast path");
            assert_eq!(parse_json_line(&line), Ok(compact(&e)));
        }
        // Escapes (the slow path) come back unescaped.
        let mut p = person();
        if let FullEvent::Person(p) = &mut p {
            p.city = "Saint \"Paul\"\n".into();
        }
        line.clear();
        write_json_line(&p, &mut line);
        assert_eq!(parse_full_json_line(&line), Ok(p));
        let full_error = |l: &str| parse_full_json_line(l.as_bytes()).unwrap_err().to_string();
        let bid = r#"{"type":"bid","auction":1,"bidder":2,"price":3,"channel":"c","url":"u","dateTime":4,"extra":""}"#;
        assert!(parse_full_json_line(bid.as_bytes()).is_ok());
        assert_eq!(
            full_error(&bid.replace(r#""url":"u","#, "")),
            "field url (bid): missing"
        );
        assert_eq!(
            full_error(&bid.replace(r#""channel":"c""#, r#""channel":7"#)),
            "field channel (bid): expected a string, found number"
        );
        assert_eq!(
            full_error(&bid.replace(r#""extra":"""#, r#""extra":"","extra":"x""#)),
            "field extra (bid): appears more than once"
        );
        assert_eq!(
            full_error(&bid.replace(r#""price":3"#, r#""price":-3"#)),
            "field price (bid): -3 is not a non-negative 64-bit integer"
        );
        // Strings of other kinds are ignored, whatever their type.
        assert!(parse_full_json_line(bid.replace('}', r#","city":1}"#).as_bytes()).is_ok());
        let auction = r#"{"type":"auction","id":1,"itemName":"i","initialBid":1,"reserve":2,"dateTime":3,"expires":4,"seller":5,"category":6,"extra":""}"#;
        assert_eq!(full_error(auction), "field description (auction): missing");
        let long = "x".repeat(65);
        assert_eq!(
            full_error(&format!(
                r#"{{"type":"person","id":1,"name":"{long}","emailAddress":"","creditCard":"","city":"","state":"","dateTime":2,"extra":""}}"#
            )),
            "field name (person): 65 bytes, longer than the limit of 64"
        );
    }

    #[test]
    fn integers() {
        assert_eq!(parse_uint(b"0", 0), Some((0, 1)));
        assert_eq!(
            parse_uint(b"18446744073709551615,", 0),
            Some((u64::MAX, 20))
        );
        assert_eq!(parse_uint(b"18446744073709551616", 0), None);
        assert_eq!(parse_uint(b"01", 0), None);
        assert_eq!(parse_uint(b"1e3", 0), None);
        assert_eq!(parse_uint(b"-1", 0), None);
        assert_eq!(parse_uint(b"", 0), None);
        assert_eq!(
            error(
                r#"{"type":"bid","auction":18446744073709551616,"bidder":2,"price":1,"dateTime":3}"#
            ),
            "field auction (bid): 1.8446744073709552e+19 is not a non-negative 64-bit integer"
        );
    }
}
