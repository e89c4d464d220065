//! JSON lines in the original YSB event schema: writer and parser.
//!
//! The schema is the one YSB's generator writes to Kafka (github:
//! yahoo/streaming-benchmarks, `core.clj`, `make-kafka-event-at`): a flat
//! object of seven string members,
//!
//! ```text
//! {"user_id":"<uuid>","page_id":"<uuid>","ad_id":"<uuid>","ad_type":"banner",
//!  "event_type":"view","event_time":"1461024576817","ip_address":"1.2.3.4"}
//! ```
//!
//! (one line; `event_time` is milliseconds since the Unix epoch as a decimal
//! integer inside a string).
//!
//! # Parser design
//!
//! [`parse_json_line_with`] first validates UTF-8 (SIMD, `simdutf8`), then
//! runs a hand-written single-pass scanner specialised for this flat schema:
//! it matches the known keys in place and parses each needed value straight
//! into the event (UUIDs at their fixed length, digits, enum names), with no
//! allocation and no intermediate tree. Anything it does not expect
//! (escapes, non-string values, nested values, duplicates, a bad value,
//! malformed JSON) sends the line to the slow path: `serde_json` reads it
//! into a list of members and the same validators run on them. The slow path
//! is the authority: it accepts every valid JSON object (escaped strings,
//! unknown members of any type, any key order, any whitespace) and it
//! produces the error message, so errors are precise and the fast path can
//! stay simple. Unknown members are ignored; a known member given twice is
//! an error. The fast path does not check the content of ignored string
//! members beyond their delimiters (e.g. raw control characters in them are
//! let through).
//!
//! In [`ParseMode::QueryFields`] only `ad_id`, `event_type` and `event_time`
//! (the fields of the YSB query) are required and parsed; the other fields
//! are skipped unchecked and left at their defaults (0, [`AdType::Banner`]).

use std::fmt;

use super::event::{
    format_uuid, parse_uuid, AdType, EventType, UnknownVariant, YsbEvent, UUID_LEN,
};
use crate::sources::json_scan::{object_members, skip_ws, string_end, NotAnObject};

/// Longest line [`write_json_line`] writes, in bytes, including the `\n`
/// (the longest `ad_type`, `event_type`, `event_time` and IP).
pub const MAX_JSON_LINE_LEN: usize = r#"{"user_id":"","page_id":"","ad_id":"","ad_type":"","event_type":"","event_time":"","ip_address":""}"#.len()
    + 3 * UUID_LEN
    + "sponsored-search".len()
    + "purchase".len()
    + 20 // u64::MAX has 20 digits
    + "255.255.255.255".len()
    + 1;

/// A member of the YSB event schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Field {
    /// `user_id`: a UUID.
    UserId = 0,
    /// `page_id`: a UUID.
    PageId = 1,
    /// `ad_id`: a UUID.
    AdId = 2,
    /// `ad_type`: one of the [`AdType`] names.
    AdType = 3,
    /// `event_type`: one of the [`EventType`] names.
    EventType = 4,
    /// `event_time`: milliseconds since the Unix epoch, digits in a string.
    EventTime = 5,
    /// `ip_address`: dotted-quad IPv4.
    IpAddress = 6,
}

impl Field {
    /// All fields, in schema order.
    pub const ALL: [Field; 7] = [
        Field::UserId,
        Field::PageId,
        Field::AdId,
        Field::AdType,
        Field::EventType,
        Field::EventTime,
        Field::IpAddress,
    ];

    /// The JSON member name.
    pub const fn name(self) -> &'static str {
        match self {
            Field::UserId => "user_id",
            Field::PageId => "page_id",
            Field::AdId => "ad_id",
            Field::AdType => "ad_type",
            Field::EventType => "event_type",
            Field::EventTime => "event_time",
            Field::IpAddress => "ip_address",
        }
    }

    fn from_key(key: &[u8]) -> Option<Field> {
        Some(match key {
            b"user_id" => Field::UserId,
            b"page_id" => Field::PageId,
            b"ad_id" => Field::AdId,
            b"ad_type" => Field::AdType,
            b"event_type" => Field::EventType,
            b"event_time" => Field::EventTime,
            b"ip_address" => Field::IpAddress,
            _ => return None,
        })
    }

    const fn bit(self) -> u8 {
        1 << self as u8
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which fields [`parse_json_line_with`] parses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ParseMode {
    /// All seven fields are required and validated.
    #[default]
    Full,
    /// Only `ad_id`, `event_type` and `event_time` (what the YSB query
    /// reads) are required and parsed; `user_id`, `page_id`, `ip` are 0 and
    /// `ad_type` is [`AdType::Banner`] in the result.
    QueryFields,
}

impl ParseMode {
    /// Bit set of the fields this mode requires.
    const fn required(self) -> u8 {
        match self {
            ParseMode::Full => 0x7F,
            ParseMode::QueryFields => {
                Field::AdId.bit() | Field::EventType.bit() | Field::EventTime.bit()
            }
        }
    }
}

/// Why a JSON line is not a valid YSB event: the field (when the problem is
/// in one) and what is wrong. Displays as e.g.
/// `field event_time: "abc" is not a millisecond integer`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// The member at fault; `None` for problems of the whole line (malformed
    /// JSON, not an object, invalid UTF-8).
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
    /// The member's value is not a JSON string.
    NotAString {
        /// The JSON type found: `number`, `object`, `array`, `boolean`, `null`.
        found: &'static str,
    },
    /// The value is not a canonical UUID.
    NotAUuid {
        /// The value (cut at 64 bytes).
        value: String,
    },
    /// `event_time` is not a decimal integer of milliseconds fitting a `u64`.
    NotAnInteger {
        /// The value (cut at 64 bytes).
        value: String,
    },
    /// `ad_type` or `event_type` names no known variant.
    UnknownVariant(UnknownVariant),
    /// `ip_address` is not a dotted-quad IPv4 address.
    NotAnIpv4 {
        /// The value (cut at 64 bytes).
        value: String,
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
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(field) = self.field {
            write!(f, "field {field}: ")?;
        }
        match &self.kind {
            FieldErrorKind::Missing => f.write_str("missing"),
            FieldErrorKind::Duplicate => f.write_str("appears more than once"),
            FieldErrorKind::NotAString { found } => write!(f, "expected a string, found {found}"),
            FieldErrorKind::NotAUuid { value } => write!(f, "{value:?} is not a UUID"),
            FieldErrorKind::NotAnInteger { value } => {
                write!(f, "{value:?} is not a millisecond integer")
            }
            FieldErrorKind::UnknownVariant(u) => write!(f, "{u}"),
            FieldErrorKind::NotAnIpv4 { value } => write!(f, "{value:?} is not an IPv4 address"),
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
        }
    }
}

impl std::error::Error for FieldError {}

impl FieldError {
    fn new(field: Field, kind: FieldErrorKind) -> FieldError {
        FieldError {
            field: Some(field),
            kind,
        }
    }
}

/// Appends `event` as one JSON line (compact, members in schema order,
/// ending in `\n`; at most [`MAX_JSON_LINE_LEN`] bytes).
///
/// The line is built in a stack buffer with copies of constant length (the
/// literals, the UUIDs, the enum names padded to 16 bytes, the IP octets
/// padded to 4), so that it compiles to plain moves: `air gen ysb` writes
/// about 250 bytes per event and must outrun the job it feeds.
pub fn write_json_line(event: &YsbEvent, out: &mut Vec<u8>) {
    let mut w = LineBuf {
        buf: [0u8; MAX_JSON_LINE_LEN + LineBuf::SLACK],
        n: 0,
    };
    w.lit(br#"{"user_id":""#);
    w.uuid(event.user_id);
    w.lit(br#"","page_id":""#);
    w.uuid(event.page_id);
    w.lit(br#"","ad_id":""#);
    w.uuid(event.ad_id);
    w.lit(br#"","ad_type":""#);
    w.padded(&AD_TYPE_NAMES[event.ad_type as usize]);
    w.lit(br#"","event_type":""#);
    w.padded(&EVENT_TYPE_NAMES[event.event_type as usize]);
    w.lit(br#"","event_time":""#);
    w.decimal(event.event_time_ms);
    w.lit(br#"","ip_address":""#);
    let [a, b, c, d] = event.ip.to_be_bytes();
    for octet in [a, b, c] {
        w.octet(octet);
        w.lit(b".");
    }
    w.octet(d);
    w.lit(b"\"}\n");
    out.extend_from_slice(&w.buf[..w.n]);
}

/// A name of at most 16 bytes, zero-padded to 16, and its length.
type Padded = ([u8; 16], usize);

const fn pad16(s: &str) -> Padded {
    let b = s.as_bytes();
    let mut out = [0u8; 16];
    let mut i = 0;
    while i < b.len() {
        out[i] = b[i];
        i += 1;
    }
    (out, b.len())
}

/// The [`AdType`] names by discriminant.
const AD_TYPE_NAMES: [Padded; 5] = [
    pad16(AdType::Banner.as_str()),
    pad16(AdType::Modal.as_str()),
    pad16(AdType::SponsoredSearch.as_str()),
    pad16(AdType::Mail.as_str()),
    pad16(AdType::Mobile.as_str()),
];

/// The [`EventType`] names by discriminant.
const EVENT_TYPE_NAMES: [Padded; 3] = [
    pad16(EventType::View.as_str()),
    pad16(EventType::Click.as_str()),
    pad16(EventType::Purchase.as_str()),
];

/// Decimal digits of every byte value, zero-padded to 4 bytes, and their
/// count.
const OCTETS: [([u8; 4], usize); 256] = {
    let mut t = [([0u8; 4], 0); 256];
    let mut v = 0;
    while v < 256 {
        t[v] = if v >= 100 {
            (
                [
                    b'0' + (v / 100) as u8,
                    b'0' + (v / 10 % 10) as u8,
                    b'0' + (v % 10) as u8,
                    0,
                ],
                3,
            )
        } else if v >= 10 {
            ([b'0' + (v / 10) as u8, b'0' + (v % 10) as u8, 0, 0], 2)
        } else {
            ([b'0' + v as u8, 0, 0, 0], 1)
        };
        v += 1;
    }
    t
};

/// Two decimal digits of every value below 100.
const DIGIT_PAIRS: [[u8; 2]; 100] = {
    let mut t = [[0u8; 2]; 100];
    let mut v = 0;
    while v < 100 {
        t[v] = [b'0' + (v / 10) as u8, b'0' + (v % 10) as u8];
        v += 1;
    }
    t
};

/// The line being written by [`write_json_line`]: `buf[..n]` is written.
/// Padded copies may write up to [`LineBuf::SLACK`] bytes past the line's
/// end; those bytes are not part of it.
struct LineBuf {
    buf: [u8; MAX_JSON_LINE_LEN + LineBuf::SLACK],
    n: usize,
}

impl LineBuf {
    /// Room for a padded copy past the longest line.
    const SLACK: usize = 16;

    #[inline(always)]
    fn lit<const N: usize>(&mut self, s: &[u8; N]) {
        self.buf[self.n..self.n + N].copy_from_slice(s);
        self.n += N;
    }

    #[inline(always)]
    fn uuid(&mut self, id: u128) {
        let at: &mut [u8; UUID_LEN] = (&mut self.buf[self.n..self.n + UUID_LEN])
            .try_into()
            .expect("UUID_LEN bytes");
        format_uuid(id, at);
        self.n += UUID_LEN;
    }

    #[inline(always)]
    fn padded(&mut self, (name, len): &Padded) {
        self.buf[self.n..self.n + 16].copy_from_slice(name);
        self.n += len;
    }

    #[inline(always)]
    fn octet(&mut self, v: u8) {
        let (digits, len) = &OCTETS[v as usize];
        self.buf[self.n..self.n + 4].copy_from_slice(digits);
        self.n += len;
    }

    /// `v` in decimal, two digits per step from the right.
    #[inline(always)]
    fn decimal(&mut self, mut v: u64) {
        let digits = v.checked_ilog10().unwrap_or(0) as usize + 1;
        let mut end = self.n + digits;
        self.n = end;
        while v >= 100 {
            let pair = DIGIT_PAIRS[(v % 100) as usize];
            self.buf[end - 2..end].copy_from_slice(&pair);
            end -= 2;
            v /= 100;
        }
        if v >= 10 {
            self.buf[end - 2..end].copy_from_slice(&DIGIT_PAIRS[v as usize]);
        } else {
            self.buf[end - 1] = b'0' + v as u8;
        }
    }
}

/// Parses one JSON line (without or with its trailing `\n` / `\r\n`) into
/// an event, validating all seven fields ([`ParseMode::Full`]).
#[inline]
pub fn parse_json_line(line: &[u8]) -> Result<YsbEvent, FieldError> {
    parse_json_line_with(line, ParseMode::Full)
}

/// Parses one JSON line in the given mode (see the module docs for the
/// fast and slow paths). Surrounding whitespace (including a trailing
/// `\r\n`) is ignored.
#[inline]
pub fn parse_json_line_with(line: &[u8], mode: ParseMode) -> Result<YsbEvent, FieldError> {
    if let Err(e) = simdutf8::compat::from_utf8(line) {
        return Err(FieldError {
            field: None,
            kind: FieldErrorKind::NotUtf8 {
                offset: e.valid_up_to(),
            },
        });
    }
    match fast_parse(line, mode) {
        Some(event) => Ok(event),
        None => slow_parse(line, mode),
    }
}

/// Index of the closing quote of a string starting at `i`, if it comes
/// within `max` bytes and no backslash comes before it.
#[inline(always)]
fn short_string_end(b: &[u8], i: usize, max: usize) -> Option<usize> {
    let end = b.len().min(i + max + 1);
    for (j, &c) in b.get(i..end)?.iter().enumerate() {
        if c == b'"' {
            return Some(i + j);
        }
        if c == b'\\' {
            return None;
        }
    }
    None
}

/// The fast path: a valid, unescaped, flat line straight into an event, or
/// `None` for the slow path to decide.
#[inline]
fn fast_parse(b: &[u8], mode: ParseMode) -> Option<YsbEvent> {
    let required = mode.required();
    let mut ev = YsbEvent::default();
    let mut seen = 0u8;
    let mut expected = 0;
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i = skip_ws(b, i + 1);
    if b.get(i) == Some(&b'}') {
        return None; // empty object: missing fields, let the slow path say which
    }
    loop {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        i += 1;
        // Key: match the known names in place (`name"`), else scan.
        let (field, after_key) = match_key(b, i, expected)?;
        i = skip_ws(b, after_key);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i = skip_ws(b, i + 1);
        if b.get(i) != Some(&b'"') {
            return None;
        }
        i += 1;
        let close = match field {
            Some(f) => {
                expected = if f as usize == 6 { 0 } else { f as usize + 1 };
                if seen & f.bit() != 0 {
                    return None;
                }
                seen |= f.bit();
                if required & f.bit() != 0 {
                    parse_fast_value(f, b, i, &mut ev)?
                } else {
                    string_end(b, i)?
                }
            }
            None => string_end(b, i)?,
        };
        i = skip_ws(b, close + 1);
        match b.get(i) {
            Some(b',') => i = skip_ws(b, i + 1),
            Some(b'}') => break,
            _ => return None,
        }
    }
    if skip_ws(b, i + 1) != b.len() || seen & required != required {
        return None;
    }
    Some(ev)
}

/// `name"` of each field as a masked 16-byte little-endian pattern, and its
/// length, to recognise a key with one load, one AND and one compare.
static KEY_PATTERNS: [(u128, u128, usize); 7] = {
    let mut t = [(0u128, 0u128, 0usize); 7];
    let mut f = 0;
    while f < 7 {
        let name = Field::ALL[f].name().as_bytes();
        let (mut bytes, mut mask) = ([0u8; 16], [0u8; 16]);
        let mut i = 0;
        while i < name.len() {
            bytes[i] = name[i];
            mask[i] = 0xFF;
            i += 1;
        }
        bytes[i] = b'"';
        mask[i] = 0xFF;
        t[f] = (
            u128::from_le_bytes(bytes),
            u128::from_le_bytes(mask),
            name.len() + 1,
        );
        f += 1;
    }
    t
};

/// Recognises a key starting at `i` (just after its opening quote): the
/// field (or `None` for an unknown key) and the index after its closing
/// quote. `expected` is tried first (the field after the previous one: keys
/// usually come in schema order). `None` overall for keys with escapes or an
/// unterminated key.
#[inline(always)]
fn match_key(b: &[u8], i: usize, expected: usize) -> Option<(Option<Field>, usize)> {
    let rest = b.get(i..)?;
    if let Some(chunk) = rest.first_chunk::<16>() {
        let word = u128::from_le_bytes(*chunk);
        for k in 0..7 {
            let f = if expected + k >= 7 {
                expected + k - 7
            } else {
                expected + k
            };
            let (pattern, mask, len) = KEY_PATTERNS[f];
            if word & mask == pattern {
                return Some((Some(Field::ALL[f]), i + len));
            }
        }
    }
    let close = string_end(b, i)?;
    Some((Field::from_key(&b[i..close]), close + 1))
}

/// Parses the value of `f` starting at `i` (after its opening quote) into
/// `ev`; returns the index of the closing quote.
#[inline(always)]
fn parse_fast_value(f: Field, b: &[u8], i: usize, ev: &mut YsbEvent) -> Option<usize> {
    match f {
        Field::UserId | Field::PageId | Field::AdId => {
            // A canonical UUID has no quote or backslash, so a successful
            // parse of the 36 bytes before a quote is the whole string.
            let close = i + UUID_LEN;
            if b.get(close) != Some(&b'"') {
                return None;
            }
            let id = parse_uuid(&b[i..close])?;
            match f {
                Field::UserId => ev.user_id = id,
                Field::PageId => ev.page_id = id,
                _ => ev.ad_id = id,
            }
            Some(close)
        }
        Field::AdType => {
            let close = short_string_end(b, i, 16)?;
            ev.ad_type = AdType::from_bytes(&b[i..close])?;
            Some(close)
        }
        Field::EventType => {
            let close = short_string_end(b, i, 8)?;
            ev.event_type = EventType::from_bytes(&b[i..close])?;
            Some(close)
        }
        Field::EventTime => {
            let close = short_string_end(b, i, 20)?;
            ev.event_time_ms = parse_millis(&b[i..close])?;
            Some(close)
        }
        Field::IpAddress => {
            let close = short_string_end(b, i, 15)?;
            ev.ip = parse_ipv4(&b[i..close])?;
            Some(close)
        }
    }
}

/// A non-empty run of ASCII digits fitting a `u64` (YSB's `event_time`,
/// ms), or `None`.
///
/// ```
/// use air_operators::sources::ysb::parse_millis;
/// assert_eq!(parse_millis(b"1461024570000"), Some(1_461_024_570_000));
/// assert_eq!(parse_millis(b"12a"), None);
/// ```
#[inline]
pub fn parse_millis(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    // Up to 19 digits cannot overflow (10^19 - 1 < 2^64); the 20th is checked.
    let (head, last) = if s.len() == 20 {
        (&s[..19], Some(s[19]))
    } else {
        (s, None)
    };
    let mut v: u64 = 0;
    let mut bad = 0u8;
    for &c in head {
        let d = c.wrapping_sub(b'0');
        bad |= (d > 9) as u8;
        v = v.wrapping_mul(10).wrapping_add(d as u64);
    }
    if bad != 0 {
        return None;
    }
    match last {
        None => Some(v),
        Some(c) => {
            let d = c.wrapping_sub(b'0');
            if d > 9 {
                return None;
            }
            v.checked_mul(10)?.checked_add(d as u64)
        }
    }
}

/// `a.b.c.d`, each part 1–3 digits ≤ 255, as `a << 24 | b << 16 | c << 8 | d`
/// (YSB's `ip_address`), or `None`.
///
/// ```
/// use air_operators::sources::ysb::parse_ipv4;
/// assert_eq!(parse_ipv4(b"10.0.0.7"), Some(0x0A00_0007));
/// assert_eq!(parse_ipv4(b"10.0.0.256"), None);
/// ```
#[inline]
pub fn parse_ipv4(s: &[u8]) -> Option<u32> {
    let mut ip: u32 = 0;
    let mut part: u32 = 0;
    let mut digits = 0;
    let mut dots = 0;
    for &c in s {
        if c == b'.' {
            if digits == 0 || dots == 3 {
                return None;
            }
            ip = (ip << 8) | part;
            (part, digits, dots) = (0, 0, dots + 1);
        } else {
            let d = c.wrapping_sub(b'0');
            if d > 9 || digits == 3 {
                return None;
            }
            part = part * 10 + d as u32;
            digits += 1;
            if part > 255 {
                return None;
            }
        }
    }
    if digits == 0 || dots != 3 {
        return None;
    }
    Some((ip << 8) | part)
}

/// The slow path: any JSON, precise errors.
#[cold]
fn slow_parse(line: &[u8], mode: ParseMode) -> Result<YsbEvent, FieldError> {
    let members = match object_members(line) {
        Ok(m) => m,
        Err(e) => {
            let kind = match e {
                NotAnObject::OtherValue => FieldErrorKind::NotAnObject,
                NotAnObject::Malformed { column, message } => {
                    FieldErrorKind::Malformed { column, message }
                }
            };
            return Err(FieldError { field: None, kind });
        }
    };
    let mut values: [Option<&serde_json::Value>; 7] = [None; 7];
    for (key, value) in &members {
        if let Some(f) = Field::from_key(key.as_bytes()) {
            if values[f as usize].replace(value).is_some() {
                return Err(FieldError::new(f, FieldErrorKind::Duplicate));
            }
        }
    }
    let required = mode.required();
    let mut ev = YsbEvent::default();
    for f in Field::ALL {
        if required & f.bit() == 0 {
            continue;
        }
        let s = match values[f as usize] {
            None => return Err(FieldError::new(f, FieldErrorKind::Missing)),
            Some(serde_json::Value::String(s)) => s.as_bytes(),
            Some(other) => {
                let found = match other {
                    serde_json::Value::Null => "null",
                    serde_json::Value::Bool(_) => "boolean",
                    serde_json::Value::Number(_) => "number",
                    serde_json::Value::Array(_) => "array",
                    _ => "object",
                };
                return Err(FieldError::new(f, FieldErrorKind::NotAString { found }));
            }
        };
        set_field(f, s, &mut ev)?;
    }
    Ok(ev)
}

/// Validates the string value `s` of `f` and stores it in `ev`.
fn set_field(f: Field, s: &[u8], ev: &mut YsbEvent) -> Result<(), FieldError> {
    let value = || lossy_prefix(s);
    let err = |kind| Err(FieldError::new(f, kind));
    match f {
        Field::UserId | Field::PageId | Field::AdId => match parse_uuid(s) {
            Some(id) if f == Field::UserId => ev.user_id = id,
            Some(id) if f == Field::PageId => ev.page_id = id,
            Some(id) => ev.ad_id = id,
            None => return err(FieldErrorKind::NotAUuid { value: value() }),
        },
        Field::AdType => match AdType::from_bytes(s) {
            Some(t) => ev.ad_type = t,
            None => {
                return err(FieldErrorKind::UnknownVariant(UnknownVariant {
                    value: value(),
                    expected: AdType::EXPECTED,
                }))
            }
        },
        Field::EventType => match EventType::from_bytes(s) {
            Some(t) => ev.event_type = t,
            None => {
                return err(FieldErrorKind::UnknownVariant(UnknownVariant {
                    value: value(),
                    expected: EventType::EXPECTED,
                }))
            }
        },
        Field::EventTime => match parse_millis(s) {
            Some(t) => ev.event_time_ms = t,
            None => return err(FieldErrorKind::NotAnInteger { value: value() }),
        },
        Field::IpAddress => match parse_ipv4(s) {
            Some(ip) => ev.ip = ip,
            None => return err(FieldErrorKind::NotAnIpv4 { value: value() }),
        },
    }
    Ok(())
}

/// A value for an error message, cut at 64 bytes.
pub(crate) fn lossy_prefix(s: &[u8]) -> String {
    const MAX: usize = 64;
    if s.len() <= MAX {
        String::from_utf8_lossy(s).into_owned()
    } else {
        format!("{}…", String::from_utf8_lossy(&s[..MAX]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = r#"{"user_id":"3f0b3a4c-1d2e-4f5a-8b6c-7d8e9f0a1b2c","page_id":"00000000-0000-4000-8000-000000000001","ad_id":"ffffffff-ffff-4fff-bfff-ffffffffffff","ad_type":"sponsored-search","event_type":"click","event_time":"1461024576817","ip_address":"1.2.3.4"}"#;

    fn expected() -> YsbEvent {
        YsbEvent {
            user_id: 0x3f0b3a4c_1d2e_4f5a_8b6c_7d8e9f0a1b2c,
            page_id: 0x00000000_0000_4000_8000_000000000001,
            ad_id: 0xffffffff_ffff_4fff_bfff_ffffffffffff,
            ad_type: AdType::SponsoredSearch,
            event_type: EventType::Click,
            event_time_ms: 1_461_024_576_817,
            ip: 0x0102_0304,
        }
    }

    #[test]
    fn fast_path_parses_the_schema() {
        assert_eq!(
            fast_parse(LINE.as_bytes(), ParseMode::Full),
            Some(expected())
        );
        assert_eq!(parse_json_line(LINE.as_bytes()), Ok(expected()));
        let q = parse_json_line_with(LINE.as_bytes(), ParseMode::QueryFields).unwrap();
        let e = expected();
        assert_eq!(
            q,
            YsbEvent {
                ad_id: e.ad_id,
                event_type: e.event_type,
                event_time_ms: e.event_time_ms,
                ..YsbEvent::default()
            }
        );
    }

    #[test]
    fn writer_matches_schema_text() {
        let mut out = Vec::new();
        write_json_line(&expected(), &mut out);
        assert_eq!(out, format!("{LINE}\n").as_bytes());
        let max = YsbEvent {
            event_time_ms: u64::MAX,
            ip: u32::MAX,
            event_type: EventType::Purchase,
            ..expected()
        };
        out.clear();
        write_json_line(&max, &mut out);
        assert_eq!(out.len(), MAX_JSON_LINE_LEN);
        assert_eq!(parse_json_line(&out), Ok(max));
    }

    /// A UUID as `format!` writes it.
    fn reference_uuid(id: u128) -> String {
        let h = format!("{id:032x}");
        format!(
            "{}-{}-{}-{}-{}",
            &h[0..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..32]
        )
    }

    /// The line as `format!` writes it: the reference for the fast writer.
    fn reference_line(e: &YsbEvent) -> String {
        let [a, b, c, d] = e.ip.to_be_bytes();
        format!(
            r#"{{"user_id":"{}","page_id":"{}","ad_id":"{}","ad_type":"{}","event_type":"{}","event_time":"{}","ip_address":"{a}.{b}.{c}.{d}"}}"#,
            reference_uuid(e.user_id),
            reference_uuid(e.page_id),
            reference_uuid(e.ad_id),
            e.ad_type.as_str(),
            e.event_type.as_str(),
            e.event_time_ms,
        ) + "\n"
    }

    use proptest::prelude::Strategy as _;

    proptest::proptest! {
        #[test]
        fn writer_equals_format_and_parses_back(
            user in proptest::prelude::any::<u128>(),
            page in proptest::prelude::any::<u128>(),
            ad in proptest::prelude::any::<u128>(),
            ad_type in 0u64..5,
            event_type in 0u64..3,
            // Small values, powers of ten and their neighbours, and any u64.
            time in proptest::prop_oneof![
                0u64..1000,
                (0u32..20).prop_map(|k| 10u64.pow(k)),
                (1u32..20).prop_map(|k| 10u64.pow(k) - 1),
                proptest::prelude::any::<u64>(),
            ],
            ip in proptest::prelude::any::<u32>(),
        ) {
            let e = YsbEvent {
                user_id: user,
                page_id: page,
                ad_id: ad,
                ad_type: AdType::from_index(ad_type),
                event_type: EventType::from_index(event_type),
                event_time_ms: time,
                ip,
            };
            let mut out = b"prefix".to_vec();
            write_json_line(&e, &mut out);
            proptest::prop_assert_eq!(&out[..6], b"prefix");
            proptest::prop_assert_eq!(std::str::from_utf8(&out[6..]).unwrap(), reference_line(&e));
            proptest::prop_assert!(out.len() - 6 <= MAX_JSON_LINE_LEN);
            proptest::prop_assert_eq!(parse_json_line(&out[6..]), Ok(e));
        }
    }

    #[test]
    fn original_ysb_spacing_and_escapes_and_extra_members() {
        // YSB's own generator writes ", " and ": " separators.
        let spaced = LINE.replace("\":\"", "\": \"").replace("\",\"", "\", \"");
        assert_eq!(
            fast_parse(spaced.as_bytes(), ParseMode::Full),
            Some(expected())
        );
        // An escaped character goes through the slow path and still parses.
        let escaped = LINE.replace("\"click\"", "\"cl\\u0069ck\"");
        assert_eq!(fast_parse(escaped.as_bytes(), ParseMode::Full), None);
        assert_eq!(parse_json_line(escaped.as_bytes()), Ok(expected()));
        // Unknown members of any type are ignored, before or after.
        let extra = LINE.replacen('{', r#"{"x":[1,{"y":null}],"#, 1);
        assert_eq!(parse_json_line(extra.as_bytes()), Ok(expected()));
        let extra = LINE.replacen('{', r#"{"zz":"a\"b","#, 1);
        assert_eq!(parse_json_line(extra.as_bytes()), Ok(expected()));
        let crlf = format!("  {LINE} \r\n");
        assert_eq!(
            fast_parse(crlf.as_bytes(), ParseMode::Full),
            Some(expected())
        );
    }

    #[test]
    fn value_parsers() {
        assert_eq!(parse_millis(b"0"), Some(0));
        assert_eq!(parse_millis(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_millis(b"18446744073709551616"), None);
        assert_eq!(parse_millis(b""), None);
        assert_eq!(parse_millis(b"-1"), None);
        assert_eq!(parse_millis(b"12a"), None);
        assert_eq!(parse_ipv4(b"255.0.10.1"), Some(0xFF00_0A01));
        for bad in [
            &b"1.2.3"[..],
            b"1.2.3.4.5",
            b"256.1.1.1",
            b"1..2.3",
            b"",
            b"a.b.c.d",
            b"1.2.3.4.",
        ] {
            assert_eq!(parse_ipv4(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
