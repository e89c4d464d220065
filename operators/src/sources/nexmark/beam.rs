//! Apache Beam NEXMark's JSON form of events, read and written beside ours.
//!
//! # Beam's form
//!
//! Beam's `model.Event` holds three public fields, `newPerson`,
//! `newAuction` and `bid`, exactly one of them not null; Jackson (Beam's
//! `NexmarkUtils.MAPPER`, an `ObjectMapper` with the Joda module) writes it
//! as one nested object per line, the other two as `null`:
//!
//! ```text
//! {"newPerson":{"id":1000,"name":"…","emailAddress":"…","creditCard":"…","city":"…","state":"…","dateTime":"2015-07-15T00:00:00.000Z","extra":"…"},"newAuction":null,"bid":null}
//! {"newPerson":null,"newAuction":{"id":1000,"itemName":"…","description":"…","initialBid":1234,"reserve":5678,"dateTime":…,"expires":…,"seller":1000,"category":10,"extra":"…"},"bid":null}
//! {"newPerson":null,"newAuction":null,"bid":{"auction":1000,"bidder":1001,"price":4321,"channel":"Google","url":"…","dateTime":…,"extra":"…"}}
//! ```
//!
//! The inner objects carry Beam's `Person`, `Auction` and `Bid` fields
//! (`@JsonProperty`, camelCase, the names of our form). `dateTime` and
//! `expires` are Joda `Instant`s: Jackson's Joda module writes them as
//! integer milliseconds since the epoch by default, and as ISO-8601
//! strings (`Instant.toString()`, `2015-07-15T00:00:00.000Z`) with
//! `WRITE_DATES_AS_TIMESTAMPS` off; both are read (see
//! [`parse_instant`]). Beam's `Bid` has no `channel` and `url` (the Flink
//! suite's `Bid` adds them): in this form they are optional, an absent one
//! reads as `""` (so q21 and q22 see empty strings on Beam's own files).
//!
//! # Which form a line is in
//!
//! Exact, per line: a line with a top-level `type` member is ours (any
//! `newPerson` / `newAuction` / `bid` member beside it is ignored, like
//! every unknown member); a line without `type` and with at least one of
//! `newPerson`, `newAuction`, `bid` is Beam's; a line with neither is an
//! error (`field type: missing, and no newPerson, newAuction or bid member
//! either`). A file may mix both. In Beam's form exactly one wrapper must
//! be an object, the others `null` or absent; a wrapper given twice, a
//! second object, all `null`, or a wrapper that is neither an object nor
//! `null` are errors naming the wrapper. Inside the object the fields are
//! checked as in ours (present, once, the right type: see the
//! [`json`](super::json) module) and unknown members, `type` included, are
//! ignored.
//!
//! Our own form keeps its hot path: a line of ours is parsed exactly as
//! before; only a line our fast path does not take tries Beam's fast path
//! (a flat scan of the one inner object, no allocation for compact
//! events) before the slow path (`serde_json`, precise errors) of both.

use super::json::{
    required as required_ours, required_full as required_full_ours, scan_object, skip_scalar,
    Field, FieldError, FieldErrorKind, Values, Writer,
};
use super::model::{EventKind, FullEvent};
use crate::sources::json_scan::{skip_ws, string_end};

/// Which JSON form of events to write (both are always read).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum JsonForm {
    /// Ours: one flat object per line with a `type` member, times as
    /// integer ms ([`write_json_line`](super::write_json_line)).
    #[default]
    Ours,
    /// Apache Beam NEXMark's nested form, times as ISO-8601 strings
    /// ([`write_beam_json_line`]).
    Beam,
}

impl JsonForm {
    /// Appends `e` as one line of this form.
    pub fn write_line(self, e: &FullEvent, out: &mut Vec<u8>) {
        match self {
            JsonForm::Ours => super::json::write_json_line(e, out),
            JsonForm::Beam => write_beam_json_line(e, out),
        }
    }
}

/// Appends `e` as one line of Beam's nested form (see the module docs):
/// the wrappers in Beam's order `newPerson`, `newAuction`, `bid`, two of
/// them `null`; inside, Beam's members in the order of its model classes
/// (a bid's `channel` and `url`, the Flink suite's, after `price`);
/// `dateTime` and `expires` as ISO-8601 UTC strings with milliseconds
/// ([`write_instant`]). [`parse_json_line`](super::parse_json_line) and
/// [`parse_full_json_line`](super::parse_full_json_line) read it back.
///
/// ```
/// use air_operators::sources::nexmark::*;
/// let cfg = NexmarkConfig::default();
/// let e = full_event(&cfg, 0);
/// let mut line = Vec::new();
/// write_beam_json_line(&e, &mut line);
/// assert!(line.starts_with(br#"{"newPerson":{"id":1000,"name":"#));
/// assert!(line.ends_with(b"},\"newAuction\":null,\"bid\":null}\n"));
/// assert_eq!(parse_full_json_line(&line), Ok(e));
/// ```
pub fn write_beam_json_line(e: &FullEvent, out: &mut Vec<u8>) {
    let mut w = Writer { out };
    let instant = |w: &mut Writer<'_>, key: &[u8], ms: u64| {
        w.key(key);
        write_instant(ms, w.out);
    };
    match e {
        FullEvent::Person(p) => {
            w.raw(br#"{"newPerson":{"id":"#);
            w.int(p.id);
            w.key_str(b"name", &p.name);
            w.key_str(b"emailAddress", &p.email_address);
            w.key_str(b"creditCard", &p.credit_card);
            w.key_str(b"city", &p.city);
            w.key_str(b"state", &p.state);
            instant(&mut w, b"dateTime", p.date_time);
            w.key_str(b"extra", &p.extra);
            w.raw(br#"},"newAuction":null,"bid":null}"#);
        }
        FullEvent::Auction(a) => {
            w.raw(br#"{"newPerson":null,"newAuction":{"id":"#);
            w.int(a.id);
            w.key_str(b"itemName", &a.item_name);
            w.key_str(b"description", &a.description);
            w.key_int(b"initialBid", a.initial_bid);
            w.key_int(b"reserve", a.reserve);
            instant(&mut w, b"dateTime", a.date_time);
            instant(&mut w, b"expires", a.expires);
            w.key_int(b"seller", a.seller);
            w.key_int(b"category", a.category);
            w.key_str(b"extra", &a.extra);
            w.raw(br#"},"bid":null}"#);
        }
        FullEvent::Bid(b) => {
            w.raw(br#"{"newPerson":null,"newAuction":null,"bid":{"auction":"#);
            w.int(b.auction);
            w.key_int(b"bidder", b.bidder);
            w.key_int(b"price", b.price);
            w.key_text(b"channel", &b.channel);
            w.key_text(b"url", &b.url);
            instant(&mut w, b"dateTime", b.date_time);
            w.key_text(b"extra", &b.extra);
            w.raw(b"}}");
        }
    }
    w.raw(b"\n");
}

/// The last instant an ISO-8601 string with a 4-digit year can hold:
/// `9999-12-31T23:59:59.999Z`, ms since the epoch.
pub const MAX_ISO_MS: u64 = 253_402_300_799_999;

const MS_PER_DAY: u64 = 86_400_000;

/// Appends the instant `ms` (since the Unix epoch) as a JSON string in
/// Joda's `Instant.toString()` form, `"YYYY-MM-DDTHH:MM:SS.mmmZ"` (UTC);
/// past [`MAX_ISO_MS`] (no 4-digit year) as an integer instead, which
/// the parsers read too.
///
/// ```
/// let mut out = Vec::new();
/// air_operators::sources::nexmark::write_instant(1_436_918_400_123, &mut out);
/// assert_eq!(out, br#""2015-07-15T00:00:00.123Z""#);
/// ```
pub fn write_instant(ms: u64, out: &mut Vec<u8>) {
    if ms > MAX_ISO_MS {
        let mut buf = [0u8; 20];
        out.extend_from_slice(crate::sources::json_scan::format_u64(ms, &mut buf));
        return;
    }
    let (days, in_day) = (ms / MS_PER_DAY, ms % MS_PER_DAY);
    let (y, m, d) = civil_from_days(days as i64);
    let (h, mi, s, milli) = (
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000,
    );
    let mut text = [0u8; 26];
    let mut put = |at: usize, v: u64, n: usize| {
        let mut v = v;
        for k in (0..n).rev() {
            text[at + k] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    put(1, y as u64, 4);
    put(6, m as u64, 2);
    put(9, d as u64, 2);
    put(12, h, 2);
    put(15, mi, 2);
    put(18, s, 2);
    put(21, milli, 3);
    for (at, c) in [
        (0, b'"'),
        (5, b'-'),
        (8, b'-'),
        (11, b'T'),
        (14, b':'),
        (17, b':'),
        (20, b'.'),
        (24, b'Z'),
        (25, b'"'),
    ] {
        text[at] = c;
    }
    out.extend_from_slice(&text);
}

/// Parses an ISO-8601 instant (the text of a JSON string, without quotes)
/// into ms since the Unix epoch: `YYYY-MM-DDTHH:MM[:SS[.fraction]]`
/// followed by `Z` or an offset `±HH`, `±HHMM`, `±HH:MM`. The fraction has
/// 1 to 9 digits; digits past the millisecond are dropped (Joda instants
/// hold ms). `None` for anything else: another shape, a field out of range
/// (month 1–12, the day in its month, leap years included, hour < 24,
/// minute and second < 60, offset hour < 24), or an instant before 1970.
///
/// ```
/// use air_operators::sources::nexmark::parse_instant;
/// assert_eq!(parse_instant(b"2015-07-15T00:00:00.000Z"), Some(1_436_918_400_000));
/// assert_eq!(parse_instant(b"2015-07-15T02:00:00.5+02:00"), Some(1_436_918_400_500));
/// assert_eq!(parse_instant(b"2015-02-29T00:00:00Z"), None);
/// assert_eq!(parse_instant(b"1969-12-31T23:59:59.999Z"), None);
/// ```
pub fn parse_instant(s: &[u8]) -> Option<u64> {
    let num = |at: usize, n: usize| -> Option<u64> {
        s.get(at..at + n)?.iter().try_fold(0u64, |v, &c| {
            c.is_ascii_digit().then(|| v * 10 + (c - b'0') as u64)
        })
    };
    let lit = |at: usize, c: u8| (s.get(at) == Some(&c)).then_some(());
    let year = num(0, 4)?;
    lit(4, b'-')?;
    let month = num(5, 2)?;
    lit(7, b'-')?;
    let day = num(8, 2)?;
    lit(10, b'T')?;
    let hour = num(11, 2)?;
    lit(13, b':')?;
    let minute = num(14, 2)?;
    let (mut second, mut milli, mut i) = (0, 0, 16);
    if lit(16, b':').is_some() {
        second = num(17, 2)?;
        i = 19;
        if lit(19, b'.').is_some() {
            i = 20;
            let digits = s[i..].iter().take_while(|c| c.is_ascii_digit()).count();
            if digits == 0 || digits > 9 {
                return None;
            }
            // The first three digits, padded: ms.
            for k in 0..3 {
                milli = milli * 10
                    + if k < digits {
                        (s[i + k] - b'0') as u64
                    } else {
                        0
                    };
            }
            i += digits;
        }
    }
    // Zone offset, ms east of UTC (signed).
    let offset: i64 = match s.get(i)? {
        b'Z' => {
            i += 1;
            0
        }
        &c @ (b'+' | b'-') => {
            let oh = num(i + 1, 2)?;
            i += 3;
            if lit(i, b':').is_some() {
                i += 1;
            }
            // Minutes: after a colon, or as the last two digits.
            let om = if s[i - 1] == b':' || i < s.len() {
                let om = num(i, 2)?;
                i += 2;
                om
            } else {
                0
            };
            if oh >= 24 || om >= 60 {
                return None;
            }
            let v = ((oh * 60 + om) * 60_000) as i64;
            if c == b'-' {
                -v
            } else {
                v
            }
        }
        _ => return None,
    };
    if i != s.len()
        || !(1..=12).contains(&month)
        || day == 0
        || day > days_in_month(year, month)
        || hour >= 24
        || minute >= 60
        || second >= 60
    {
        return None;
    }
    let days = days_from_civil(year as i64, month as u32, day as u32);
    let local = days * MS_PER_DAY as i64
        + ((hour * 60 + minute) * 60 + second) as i64 * 1000
        + milli as i64;
    u64::try_from(local - offset).ok()
}

fn is_leap(y: u64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

fn days_in_month(y: u64, m: u64) -> u64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to the proleptic Gregorian date `y-m-d`. Counts
/// years from March, so a leap day ends its year: whole 400-year cycles
/// (146 097 days), then 365 days a year plus a leap day every 4 years
/// but not every 100, then the days of the months since March (their
/// lengths 31 30 31 30 31 31 30 31 30 31 31 28 follow `(153·m + 2) / 5`).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let cycle = y.div_euclid(400);
    let year_of_cycle = y - cycle * 400;
    let month_from_march = ((m + 9) % 12) as i64;
    let day_of_year = (153 * month_from_march + 2) / 5 + d as i64 - 1;
    let day_of_cycle = year_of_cycle * 365 + year_of_cycle / 4 - year_of_cycle / 100 + day_of_year;
    // 719 468: days from 0000-03-01 to 1970-01-01.
    cycle * 146_097 + day_of_cycle - 719_468
}

/// The date `(year, month, day)` of `days` after 1970-01-01: the inverse
/// of [`days_from_civil`].
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let cycle = z.div_euclid(146_097);
    let day_of_cycle = z - cycle * 146_097;
    let year_of_cycle =
        (day_of_cycle - day_of_cycle / 1460 + day_of_cycle / 36_524 - day_of_cycle / 146_096) / 365;
    let day_of_year =
        day_of_cycle - (365 * year_of_cycle + year_of_cycle / 4 - year_of_cycle / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let d = (day_of_year - (153 * month_from_march + 2) / 5 + 1) as u32;
    let m = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    } as u32;
    let y = year_of_cycle + cycle * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Beam's wrapper member named `key` and the kind of event it holds.
#[inline]
pub(super) fn wrapper(key: &[u8]) -> Option<(Field, EventKind)> {
    match key {
        b"newPerson" => Some((Field::NewPerson, EventKind::Person)),
        b"newAuction" => Some((Field::NewAuction, EventKind::Auction)),
        b"bid" => Some((Field::Bid, EventKind::Bid)),
        _ => None,
    }
}

/// The fields of a compact event of kind `k` in Beam's form: ours but
/// `type`.
pub(super) const fn required(k: EventKind) -> u32 {
    required_ours(k) & !Field::Type.bit()
}

/// The fields of a full event of kind `k` in Beam's form: ours but `type`
/// and, for a bid, `channel` and `url` (not in Beam's `Bid`).
pub(super) const fn required_full(k: EventKind) -> u32 {
    required_full_ours(k) & !(Field::Type.bit() | Field::Channel.bit() | Field::Url.bit())
}

/// The fields of a full event of kind `k` read in Beam's form when
/// present: a bid's `channel` and `url`.
pub(super) const fn optional_full(k: EventKind) -> u32 {
    match k {
        EventKind::Bid => Field::Channel.bit() | Field::Url.bit(),
        _ => 0,
    }
}

/// Beam's fast path: a line of Beam's form whose one event object is flat,
/// with integers, unescaped strings and ISO instants; its kind, values and
/// the members seen. `None` for the slow path to decide (including lines
/// with `type`, which are ours).
#[inline]
pub(super) fn fast_scan(b: &[u8]) -> Option<(EventKind, Values<'_>, u32)> {
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i = skip_ws(b, i + 1);
    let mut found = None;
    let mut wrappers = 0u32;
    loop {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let key_end = string_end(b, i + 1)?;
        let key = &b[i + 1..key_end];
        i = skip_ws(b, key_end + 1);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i = skip_ws(b, i + 1);
        i = match wrapper(key) {
            Some((f, kind)) => {
                if wrappers & f.bit() != 0 {
                    return None;
                }
                wrappers |= f.bit();
                if b.get(i..)?.starts_with(b"null") {
                    i + 4
                } else {
                    if found.is_some() {
                        return None;
                    }
                    let mut vals = Values::new();
                    let (seen, end) = scan_object::<true>(b, i, &mut vals)?;
                    found = Some((kind, vals, seen));
                    end
                }
            }
            None if key == b"type" => return None,
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
    if skip_ws(b, i + 1) != b.len() {
        return None;
    }
    found
}

/// An object's members, in order, duplicates kept.
type Members = Vec<(String, serde_json::Value)>;

/// A wrapper's value in the slow path.
enum Wrapped {
    Null,
    /// An object: its members.
    Object(Members),
    /// Another JSON type (its name).
    Other(&'static str),
}

/// The wrappers of a line of Beam's form, in order, duplicates kept
/// (other members skipped).
struct Wrappers(Vec<(Field, EventKind, Wrapped)>);

mod de {
    use super::{wrapper, Wrapped, Wrappers};
    use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
    use std::fmt;

    impl<'de> Deserialize<'de> for Wrapped {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Wrapped, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Wrapped;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("any JSON value")
                }
                fn visit_unit<E>(self) -> Result<Wrapped, E> {
                    Ok(Wrapped::Null)
                }
                fn visit_none<E>(self) -> Result<Wrapped, E> {
                    Ok(Wrapped::Null)
                }
                fn visit_bool<E>(self, _: bool) -> Result<Wrapped, E> {
                    Ok(Wrapped::Other("boolean"))
                }
                fn visit_i64<E>(self, _: i64) -> Result<Wrapped, E> {
                    Ok(Wrapped::Other("number"))
                }
                fn visit_u64<E>(self, _: u64) -> Result<Wrapped, E> {
                    Ok(Wrapped::Other("number"))
                }
                fn visit_f64<E>(self, _: f64) -> Result<Wrapped, E> {
                    Ok(Wrapped::Other("number"))
                }
                fn visit_str<E>(self, _: &str) -> Result<Wrapped, E> {
                    Ok(Wrapped::Other("string"))
                }
                fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Wrapped, A::Error> {
                    while seq.next_element::<IgnoredAny>()?.is_some() {}
                    Ok(Wrapped::Other("array"))
                }
                fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Wrapped, A::Error> {
                    let mut members = Vec::with_capacity(10);
                    while let Some(entry) = map.next_entry::<String, serde_json::Value>()? {
                        members.push(entry);
                    }
                    Ok(Wrapped::Object(members))
                }
            }
            d.deserialize_any(V)
        }
    }

    impl<'de> Deserialize<'de> for Wrappers {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Wrappers, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Wrappers;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("a JSON object")
                }
                fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Wrappers, A::Error> {
                    let mut out = Vec::with_capacity(3);
                    while let Some(key) = map.next_key::<String>()? {
                        match wrapper(key.as_bytes()) {
                            Some((f, kind)) => out.push((f, kind, map.next_value::<Wrapped>()?)),
                            None => {
                                map.next_value::<IgnoredAny>()?;
                            }
                        }
                    }
                    Ok(Wrappers(out))
                }
            }
            d.deserialize_map(V)
        }
    }
}

/// Beam's slow path, for a line that is a JSON object without `type` and
/// with a wrapper: the kind of its one event and the members of its
/// object (duplicates kept).
///
/// # Errors
/// A wrapper given twice, neither an object nor `null`, a second event
/// object, or all wrappers `null`, naming the wrapper.
#[cold]
pub(super) fn slow_event(line: &[u8]) -> Result<(EventKind, Members), FieldError> {
    let wrappers = match serde_json::from_slice::<Wrappers>(line) {
        Ok(w) => w.0,
        Err(e) => {
            // The caller read the line as an object already.
            return Err(FieldError {
                event: None,
                field: None,
                kind: FieldErrorKind::Malformed {
                    column: e.column(),
                    message: e.to_string(),
                },
            });
        }
    };
    let err = |f, kind| FieldError {
        event: None,
        field: Some(f),
        kind,
    };
    let mut given = 0u32;
    let mut found: Option<(Field, EventKind, Members)> = None;
    for (f, kind, w) in wrappers {
        if given & f.bit() != 0 {
            return Err(err(f, FieldErrorKind::Duplicate));
        }
        given |= f.bit();
        match w {
            Wrapped::Null => {}
            Wrapped::Other(found) => {
                return Err(err(
                    f,
                    FieldErrorKind::WrongType {
                        expected: "an object or null",
                        found,
                    },
                ))
            }
            Wrapped::Object(members) => {
                if let Some((first, ..)) = found {
                    return Err(err(f, FieldErrorKind::SecondEvent { first }));
                }
                found = Some((f, kind, members));
            }
        }
    }
    match found {
        Some((_, kind, members)) => Ok((kind, members)),
        None => Err(FieldError {
            event: None,
            field: None,
            kind: FieldErrorKind::NoEvent,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::nexmark::{
        compact, full_event, parse_full_json_line, parse_json_line, write_json_line, NexmarkConfig,
    };

    fn iso(ms: u64) -> String {
        let mut out = Vec::new();
        write_instant(ms, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn instants_round_trip() {
        let anchors = [
            (0, "\"1970-01-01T00:00:00.000Z\""),
            (1_436_918_400_000, "\"2015-07-15T00:00:00.000Z\""),
            (951_782_400_001, "\"2000-02-29T00:00:00.001Z\""),
            (4_107_542_399_999, "\"2100-02-28T23:59:59.999Z\""),
            (MAX_ISO_MS, "\"9999-12-31T23:59:59.999Z\""),
        ];
        for (ms, text) in anchors {
            assert_eq!(iso(ms), text);
            assert_eq!(parse_instant(text.trim_matches('"').as_bytes()), Some(ms));
        }
        assert_eq!(iso(MAX_ISO_MS + 1), (MAX_ISO_MS + 1).to_string());
        let mut rng = crate::sources::rng::WyRand::new(5);
        for _ in 0..20_000 {
            let ms = rng.next_u64() % (MAX_ISO_MS + 1);
            let text = iso(ms);
            assert_eq!(
                parse_instant(text.trim_matches('"').as_bytes()),
                Some(ms),
                "{text}"
            );
        }
        // Every day of four years, leap ones included, maps to the next.
        let mut last = None;
        for day in 10_950..(10_950 + 4 * 366) {
            let text = iso(day * MS_PER_DAY);
            let back = parse_instant(text.trim_matches('"').as_bytes()).unwrap();
            assert_eq!(back, day * MS_PER_DAY);
            assert_ne!(Some(text.clone()), last);
            last = Some(text);
        }
    }

    #[test]
    fn instant_shapes() {
        let p = |s: &str| parse_instant(s.as_bytes());
        let base = 1_436_918_400_000;
        assert_eq!(p("2015-07-15T00:00Z"), Some(base));
        assert_eq!(p("2015-07-15T00:00:01Z"), Some(base + 1000));
        assert_eq!(p("2015-07-15T00:00:00.5Z"), Some(base + 500));
        assert_eq!(p("2015-07-15T00:00:00.123999999Z"), Some(base + 123));
        assert_eq!(p("2015-07-15T01:30:00+01:30"), Some(base));
        assert_eq!(p("2015-07-15T01:30:00+0130"), Some(base));
        assert_eq!(p("2015-07-14T22:00:00-02"), Some(base));
        assert_eq!(p("2016-02-29T00:00:00Z"), Some(1_456_704_000_000));
        for bad in [
            "",
            "2015-07-15",
            "2015-07-15T00:00:00",
            "2015-07-15 00:00:00Z",
            "2015-07-15t00:00:00Z",
            "2015-13-15T00:00:00Z",
            "2015-00-15T00:00:00Z",
            "2015-04-31T00:00:00Z",
            "2015-02-29T00:00:00Z",
            "1900-02-29T00:00:00Z",
            "2015-07-15T24:00:00Z",
            "2015-07-15T00:60:00Z",
            "2015-07-15T00:00:60Z",
            "2015-07-15T00:00:00.Z",
            "2015-07-15T00:00:00.1234567890Z",
            "2015-07-15T00:00:00Zx",
            "2015-07-15T00:00:00+24:00",
            "2015-07-15T00:00:00+01:",
            "1969-12-31T23:59:59.999Z",
            "1970-01-01T00:30:00+01:00",
            "+2015-07-15T00:00:00Z",
            "20150715T000000Z",
        ] {
            assert_eq!(p(bad), None, "{bad}");
        }
    }

    #[test]
    fn beam_lines_round_trip_on_the_fast_path() {
        let cfg = NexmarkConfig::default();
        let mut line = Vec::new();
        for n in 0..1000 {
            let e = full_event(&cfg, n);
            line.clear();
            write_beam_json_line(&e, &mut line);
            let (kind, vals, seen) = fast_scan(&line).expect("fast path");
            assert_eq!(kind, compact(&e).kind());
            let need = required_full(kind);
            assert_eq!(seen & need, need, "event {n}");
            assert_eq!(vals.full_event(kind), Ok(e.clone()));
            assert_eq!(parse_full_json_line(&line), Ok(e.clone()), "event {n}");
            assert_eq!(parse_json_line(&line), Ok(compact(&e)), "event {n}");
            // Ms times (Jackson's default), another member order, spacing,
            // escapes and no channel / url take other paths to the same.
            let mut v: serde_json::Value = serde_json::from_slice(&line).unwrap();
            for w in ["newPerson", "newAuction", "bid"] {
                if let Some(obj) = v[w].as_object_mut() {
                    for t in ["dateTime", "expires"] {
                        if obj.contains_key(t) {
                            obj[t] = serde_json::json!(parse_instant(
                                obj[t].as_str().unwrap().as_bytes()
                            )
                            .unwrap());
                        }
                    }
                }
            }
            let ms = serde_json::to_vec_pretty(&v).unwrap();
            let ms_line: Vec<u8> = ms.iter().copied().filter(|&c| c != b'\n').collect();
            assert_eq!(parse_full_json_line(&ms_line), Ok(e.clone()), "event {n}");
            assert_eq!(parse_json_line(&ms_line), Ok(compact(&e)));
            let escaped = String::from_utf8(line.clone()).unwrap().replacen(
                "\"extra\":\"",
                "\"extra\":\"\\u0041",
                1,
            );
            let mut want = e.clone();
            match &mut want {
                FullEvent::Person(p) => p.extra.insert(0, 'A'),
                FullEvent::Auction(a) => a.extra.insert(0, 'A'),
                FullEvent::Bid(b) => b.extra = format!("A{}", b.extra).into(),
            }
            assert_eq!(parse_full_json_line(escaped.as_bytes()), Ok(want));
        }
        let bid = br#"{"bid":{"auction":1,"bidder":2,"price":3,"dateTime":"1970-01-01T00:00:00.004Z","extra":"x"}}"#;
        let FullEvent::Bid(b) = parse_full_json_line(bid).unwrap() else {
            panic!()
        };
        assert_eq!(
            (
                b.auction,
                b.date_time,
                b.channel.to_string(),
                b.url.to_string()
            ),
            (1, 4, String::new(), String::new())
        );
    }

    fn error(line: &str) -> String {
        let compact = parse_json_line(line.as_bytes()).unwrap_err().to_string();
        let full = parse_full_json_line(line.as_bytes())
            .unwrap_err()
            .to_string();
        assert_eq!(compact, full, "{line}");
        compact
    }

    #[test]
    fn beam_errors_name_the_field() {
        let bid = r#"{"newPerson":null,"newAuction":null,"bid":{"auction":1,"bidder":2,"price":3,"dateTime":"2015-07-15T00:00:00.000Z","extra":""}}"#;
        assert!(parse_json_line(bid.as_bytes()).is_ok());
        assert_eq!(
            error(&bid.replace("07-15T", "07-32T")),
            r#"field dateTime (bid): "2015-07-32T00:00:00.000Z" is not an ISO-8601 instant at or after 1970 (like "2015-07-15T00:00:00.000Z") nor integer ms since the epoch"#
        );
        assert_eq!(
            error(&bid.replace(r#""price":3,"#, "")),
            "field price (bid): missing"
        );
        assert_eq!(
            error(&bid.replace(r#""price":3"#, r#""price":"3""#)),
            "field price (bid): expected an integer, found string"
        );
        assert_eq!(
            error(&bid.replace(
                r#""dateTime":"2015-07-15T00:00:00.000Z""#,
                r#""dateTime":true"#
            )),
            "field dateTime (bid): expected an ISO-8601 string or integer ms, found boolean"
        );
        assert_eq!(
            error(&bid.replace(
                r#""dateTime":"2015-07-15T00:00:00.000Z""#,
                r#""dateTime":-5"#
            )),
            "field dateTime (bid): -5 is not a non-negative 64-bit integer"
        );
        assert_eq!(
            error(&bid.replace(r#""bidder":2"#, r#""bidder":2,"bidder":2"#)),
            "field bidder (bid): appears more than once"
        );
        assert_eq!(
            error(&bid.replace(
                r#""newAuction":null"#,
                r#""newAuction":{"id":1,"initialBid":1,"reserve":1,"dateTime":1,"expires":2,"seller":1,"category":1}"#
            )),
            "field bid: a second event in one line (newAuction is not null too; a line holds one event)"
        );
        assert_eq!(
            error(&bid.replace(r#""newPerson":null"#, r#""newPerson":[1]"#)),
            "field newPerson: expected an object or null, found array"
        );
        assert_eq!(
            error(&bid.replace(r#""newPerson":null"#, r#""bid":null"#)),
            "field bid: appears more than once"
        );
        assert_eq!(
            error(r#"{"newPerson":null,"bid":null}"#),
            "no event: newPerson, newAuction and bid are all null"
        );
        // A person without its name; one with too long a name.
        let person = r#"{"newPerson":{"id":1,"dateTime":2}}"#;
        assert_eq!(error(person), "field name (person): missing");
        let long = "x".repeat(65);
        assert_eq!(
            error(&person.replace('}', &format!(r#","name":"{long}"}}"#))),
            "field name (person): 65 bytes, longer than the limit of 64"
        );
        // The full parser needs the strings; the compact one does not.
        let no_extra = bid.replace(r#","extra":"""#, "");
        assert!(parse_json_line(no_extra.as_bytes()).is_ok());
        assert_eq!(
            parse_full_json_line(no_extra.as_bytes())
                .unwrap_err()
                .to_string(),
            "field extra (bid): missing"
        );
        // A `type` makes a line ours, whatever else it holds.
        assert_eq!(
            error(&bid.replacen('{', r#"{"type":"bid","#, 1)),
            "field dateTime (bid): missing"
        );
        // Channel and url, optional, are checked when present.
        let bad_url = bid.replace(r#""extra":"""#, r#""extra":"","url":5"#);
        assert_eq!(
            parse_full_json_line(bad_url.as_bytes())
                .unwrap_err()
                .to_string(),
            "field url (bid): expected a string, found number"
        );
        assert!(parse_json_line(bad_url.as_bytes()).is_ok());
    }

    #[test]
    fn ours_is_unchanged_by_beam_members() {
        let e = full_event(&NexmarkConfig::default(), 7);
        let mut line = Vec::new();
        write_json_line(&e, &mut line);
        let text = String::from_utf8(line).unwrap();
        let with = text.replacen('{', r#"{"bid":{"x":1},"#, 1);
        assert_eq!(parse_full_json_line(with.as_bytes()), Ok(e));
    }
}
