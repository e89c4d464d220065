//! The YSB event record, its two enums and the UUID text helpers.

use std::fmt;
use std::str::FromStr;

/// One YSB ad event, the record the runtime moves between operators.
///
/// The fields are those of the original YSB JSON event (github:
/// yahoo/streaming-benchmarks, `data/src/setup/core.clj`,
/// `make-kafka-event-at`): `user_id`, `page_id`, `ad_id`, `ad_type`,
/// `event_type`, `event_time`, `ip_address`. Ids are UUIDs held as `u128`
/// (the UUID's 16 bytes read big-endian, so `format_uuid` prints them in
/// order); the IPv4 address is a `u32` (`a.b.c.d` is `a << 24 | b << 16 |
/// c << 8 | d`).
///
/// Layout: `#[repr(C)]`, 64 bytes, 16-byte aligned on x86-64 (three `u128`,
/// one `u64`, one `u32`, two `u8` and 2 bytes of tail padding).
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
pub struct YsbEvent {
    /// The user who saw the ad (a UUID; random per event in this generator).
    pub user_id: u128,
    /// The page the ad was shown on (a UUID; random per event).
    pub page_id: u128,
    /// The ad (a UUID): the join key into [`Campaigns`](super::Campaigns).
    pub ad_id: u128,
    /// Event time in milliseconds since the Unix epoch (the JSON
    /// `event_time`, a decimal integer inside a string).
    pub event_time_ms: u64,
    /// The client's IPv4 address, `a.b.c.d` as `a << 24 | b << 16 | c << 8 | d`
    /// (the JSON `ip_address`).
    pub ip: u32,
    /// The kind of ad (the JSON `ad_type`).
    pub ad_type: AdType,
    /// What the user did (the JSON `event_type`); YSB keeps only `view`.
    pub event_type: EventType,
}

/// The `ad_type` of a YSB event: the five values of the YSB generator
/// (`ad-types` in yahoo/streaming-benchmarks `core.clj`).
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
#[rkyv(derive(Debug, Clone, Copy, PartialEq, Eq))]
#[repr(u8)]
pub enum AdType {
    /// `"banner"`.
    #[default]
    Banner = 0,
    /// `"modal"`.
    Modal = 1,
    /// `"sponsored-search"`.
    SponsoredSearch = 2,
    /// `"mail"`.
    Mail = 3,
    /// `"mobile"`.
    Mobile = 4,
}

/// The `event_type` of a YSB event: the three values of the YSB generator
/// (`event-types` in yahoo/streaming-benchmarks `core.clj`). The YSB query
/// keeps only [`EventType::View`].
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
#[rkyv(derive(Debug, Clone, Copy, PartialEq, Eq))]
#[repr(u8)]
pub enum EventType {
    /// `"view"`: the only type the YSB query counts.
    #[default]
    View = 0,
    /// `"click"`.
    Click = 1,
    /// `"purchase"`.
    Purchase = 2,
}

/// A string that names no variant of [`AdType`] or [`EventType`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownVariant {
    /// The text that was not recognised (lossily decoded if not UTF-8).
    pub value: String,
    /// The accepted values, e.g. `"view", "click", "purchase"`.
    pub expected: &'static str,
}

impl fmt::Display for UnknownVariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} is not one of {}", self.value, self.expected)
    }
}

impl std::error::Error for UnknownVariant {}

impl AdType {
    /// All variants, in discriminant order.
    pub const ALL: [AdType; 5] = [
        AdType::Banner,
        AdType::Modal,
        AdType::SponsoredSearch,
        AdType::Mail,
        AdType::Mobile,
    ];
    /// The accepted JSON spellings, for error messages.
    pub const EXPECTED: &'static str = r#""banner", "modal", "sponsored-search", "mail", "mobile""#;

    /// The YSB spelling (`"sponsored-search"` for [`AdType::SponsoredSearch`]).
    pub const fn as_str(self) -> &'static str {
        match self {
            AdType::Banner => "banner",
            AdType::Modal => "modal",
            AdType::SponsoredSearch => "sponsored-search",
            AdType::Mail => "mail",
            AdType::Mobile => "mobile",
        }
    }

    /// Parses the exact (case-sensitive) YSB spelling.
    #[inline]
    pub fn from_bytes(s: &[u8]) -> Option<AdType> {
        match s {
            b"banner" => Some(AdType::Banner),
            b"modal" => Some(AdType::Modal),
            b"sponsored-search" => Some(AdType::SponsoredSearch),
            b"mail" => Some(AdType::Mail),
            b"mobile" => Some(AdType::Mobile),
            _ => None,
        }
    }

    /// The variant with discriminant `i` (`i < 5`).
    #[inline]
    pub(crate) fn from_index(i: u64) -> AdType {
        Self::ALL[i as usize]
    }
}

impl EventType {
    /// All variants, in discriminant order.
    pub const ALL: [EventType; 3] = [EventType::View, EventType::Click, EventType::Purchase];
    /// The accepted JSON spellings, for error messages.
    pub const EXPECTED: &'static str = r#""view", "click", "purchase""#;

    /// The YSB spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            EventType::View => "view",
            EventType::Click => "click",
            EventType::Purchase => "purchase",
        }
    }

    /// Parses the exact (case-sensitive) YSB spelling.
    #[inline]
    pub fn from_bytes(s: &[u8]) -> Option<EventType> {
        match s {
            b"view" => Some(EventType::View),
            b"click" => Some(EventType::Click),
            b"purchase" => Some(EventType::Purchase),
            _ => None,
        }
    }

    /// The variant with discriminant `i` (`i < 3`).
    #[inline]
    pub(crate) fn from_index(i: u64) -> EventType {
        Self::ALL[i as usize]
    }
}

macro_rules! text_impls {
    ($t:ty) => {
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $t {
            type Err = UnknownVariant;
            fn from_str(s: &str) -> Result<Self, UnknownVariant> {
                <$t>::from_bytes(s.as_bytes()).ok_or_else(|| UnknownVariant {
                    value: s.to_owned(),
                    expected: <$t>::EXPECTED,
                })
            }
        }
    };
}
text_impls!(AdType);
text_impls!(EventType);

/// Length of a canonical UUID string (`8-4-4-4-12` hex digits and hyphens).
pub const UUID_LEN: usize = 36;

/// Positions of the hyphens in a canonical UUID string.
const HYPHENS: [usize; 4] = [8, 13, 18, 23];

/// The 16 lowercase hex digits of `v`, most significant first. SWAR: the
/// nibbles are spread one per byte of a `u128` with four shift-and-mask
/// steps, then turned into ASCII all at once.
#[inline(always)]
fn hex16(v: u64) -> [u8; 16] {
    const M32: u128 = 0x0000_0000_FFFF_FFFF_0000_0000_FFFF_FFFF;
    const M16: u128 = 0x0000_FFFF_0000_FFFF_0000_FFFF_0000_FFFF;
    const M8: u128 = 0x00FF_00FF_00FF_00FF_00FF_00FF_00FF_00FF;
    const M4: u128 = 0x0F0F_0F0F_0F0F_0F0F_0F0F_0F0F_0F0F_0F0F;
    let ones = u128::from_ne_bytes([1; 16]);
    let mut x = v as u128;
    x = (x | x << 32) & M32;
    x = (x | x << 16) & M16;
    x = (x | x << 8) & M8;
    x = (x | x << 4) & M4;
    // Byte k holds nibble k (from the least significant); 1 where it is
    // above 9, so that it becomes 'a'..'f' rather than ':'..'?'.
    let above9 = ((x + 6 * ones) >> 4) & ones;
    let ascii = x + u128::from(b'0') * ones + above9 * u128::from(b'a' - b'0' - 10);
    ascii.to_be_bytes()
}

/// Writes `id` as a canonical lowercase UUID (`xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`,
/// RFC 9562 §4), most significant byte first.
#[inline]
pub fn format_uuid(id: u128, out: &mut [u8; UUID_LEN]) {
    let hi = hex16((id >> 64) as u64);
    let lo = hex16(id as u64);
    out[0..8].copy_from_slice(&hi[0..8]);
    out[8] = b'-';
    out[9..13].copy_from_slice(&hi[8..12]);
    out[13] = b'-';
    out[14..18].copy_from_slice(&hi[12..16]);
    out[18] = b'-';
    out[19..23].copy_from_slice(&lo[0..4]);
    out[23] = b'-';
    out[24..36].copy_from_slice(&lo[4..16]);
}

/// `id` as a canonical lowercase UUID string (see [`format_uuid`]).
pub fn uuid_to_string(id: u128) -> String {
    let mut buf = [0u8; UUID_LEN];
    format_uuid(id, &mut buf);
    // Only ASCII hex digits and hyphens were written.
    String::from_utf8(buf.to_vec()).expect("ASCII")
}

/// Every byte of a `u64` set to `b`.
const fn splat(b: u8) -> u64 {
    u64::from_ne_bytes([b; 8])
}

/// Decodes 8 ASCII hex digits (either case), first digit in the lowest byte
/// (a little-endian load), into 32 bits, the first digit most significant;
/// `None` if any byte is not a hex digit. SWAR: a handful of 64-bit
/// operations instead of 8 table lookups.
#[inline(always)]
fn hex8(x: u64) -> Option<u32> {
    const HI: u64 = splat(0x80);
    // For bytes below 0x80, `(x + (0x80 - lo)) & 0x80` is set iff the byte
    // is >= lo (no carry crosses bytes).
    let ge = |v: u64, lo: u8| v.wrapping_add(splat(0x80 - lo)) & HI;
    let lower = x | splat(0x20);
    let digit = ge(x, b'0') & !ge(x, b'9' + 1);
    let alpha = ge(lower, b'a') & !ge(lower, b'f' + 1);
    if x & HI != 0 || (digit | alpha) != HI {
        return None;
    }
    // Nibble value: low 4 bits, plus 9 for letters (bit 6 set).
    let v = (x & splat(0x0f)) + ((x >> 6) & splat(0x01)) * 9;
    // Pack: byte pairs, then 16-bit pairs, then 32-bit halves (little-endian:
    // the earlier digit sits in the lower byte, and must become the higher
    // nibble).
    let v = ((v << 4) | (v >> 8)) & 0x00ff_00ff_00ff_00ff;
    let v = ((v << 8) | (v >> 16)) & 0x0000_ffff_0000_ffff;
    let v = (v << 16) | (v >> 32);
    Some(v as u32)
}

/// Parses a UUID in the canonical `8-4-4-4-12` form (hex digits of either
/// case), returning `None` for anything else (wrong length, misplaced or
/// missing hyphens, non-hex digits, braces or `urn:uuid:` prefixes).
#[inline]
pub fn parse_uuid(s: &[u8]) -> Option<u128> {
    let s: &[u8; UUID_LEN] = s.try_into().ok()?;
    if HYPHENS.iter().any(|&h| s[h] != b'-') {
        return None;
    }
    let load8 = |at: usize| u64::from_le_bytes(s[at..at + 8].try_into().expect("8 bytes"));
    let load4 = |at: usize| u32::from_le_bytes(s[at..at + 4].try_into().expect("4 bytes")) as u64;
    // Digit groups: [0..8], [9..13]+[14..18], [19..23]+[24..28], [28..36].
    let a = hex8(load8(0))?;
    let b = hex8(load4(9) | (load4(14) << 32))?;
    let c = hex8(load4(19) | (load4(24) << 32))?;
    let d = hex8(load8(28))?;
    Some(((a as u128) << 96) | ((b as u128) << 64) | ((c as u128) << 32) | d as u128)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_64_bytes() {
        assert_eq!(std::mem::size_of::<YsbEvent>(), 64);
        assert_eq!(std::mem::size_of::<AdType>(), 1);
        assert_eq!(std::mem::size_of::<EventType>(), 1);
    }

    #[test]
    fn uuid_known_value() {
        let id = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210u128;
        assert_eq!(uuid_to_string(id), "01234567-89ab-cdef-fedc-ba9876543210");
        assert_eq!(
            parse_uuid(b"01234567-89ab-cdef-fedc-ba9876543210"),
            Some(id)
        );
        assert_eq!(
            parse_uuid(b"01234567-89AB-CDEF-FEDC-BA9876543210"),
            Some(id)
        );
        assert_eq!(uuid_to_string(0), "00000000-0000-0000-0000-000000000000");
        assert_eq!(
            parse_uuid(b"ffffffff-ffff-ffff-ffff-ffffffffffff"),
            Some(u128::MAX)
        );
    }

    #[test]
    fn hex8_every_byte_value() {
        // Each position, each byte value: only hex digits decode.
        for pos in 0..8 {
            for b in 0..=255u8 {
                let mut digits = *b"01234567";
                digits[pos] = b;
                let x = u64::from_le_bytes(digits);
                let want = std::str::from_utf8(&digits)
                    .ok()
                    .filter(|t| t.bytes().all(|c| c.is_ascii_hexdigit()))
                    .map(|t| u32::from_str_radix(t, 16).unwrap());
                assert_eq!(hex8(x), want, "byte {b:#x} at {pos}");
            }
        }
    }

    #[test]
    fn uuid_rejects_bad_text() {
        for bad in [
            &b""[..],
            b"xyz",
            b"01234567-89ab-cdef-fedc-ba987654321",
            b"01234567-89ab-cdef-fedc-ba98765432100",
            b"0123456789ab-cdef-fedc-ba98-76543210",
            b"01234567_89ab-cdef-fedc-ba9876543210",
            b"g1234567-89ab-cdef-fedc-ba9876543210",
            b"01234567-89ab-cdef-fedc-ba987654321 ",
            b"{1234567-89ab-cdef-fedc-ba9876543210",
        ] {
            assert_eq!(parse_uuid(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn enums_text() {
        for t in AdType::ALL {
            assert_eq!(t.as_str().parse::<AdType>().unwrap(), t);
            assert_eq!(AdType::from_index(t as u64), t);
        }
        for t in EventType::ALL {
            assert_eq!(t.as_str().parse::<EventType>().unwrap(), t);
            assert_eq!(EventType::from_index(t as u64), t);
        }
        assert_eq!(AdType::SponsoredSearch.to_string(), "sponsored-search");
        let e = "View".parse::<EventType>().unwrap_err();
        assert_eq!(
            e.to_string(),
            r#""View" is not one of "view", "click", "purchase""#
        );
    }

    #[test]
    fn rkyv_round_trip() {
        let e = YsbEvent {
            user_id: 1,
            page_id: u128::MAX,
            ad_id: 0xdead_beef,
            event_time_ms: 1_461_024_576_817,
            ip: 0x0102_0304,
            ad_type: AdType::Mail,
            event_type: EventType::Purchase,
        };
        let events = vec![e; 3];
        let bytes = rkyv::to_bytes::<rkyv::rancor::Error>(&events).unwrap();
        let archived =
            rkyv::access::<rkyv::Archived<Vec<YsbEvent>>, rkyv::rancor::Error>(&bytes).unwrap();
        assert_eq!(archived.len(), 3);
        assert_eq!(archived[2].event_time_ms, e.event_time_ms);
        assert_eq!(archived[2].ad_id, e.ad_id);
        assert_eq!(archived[2].event_type, ArchivedEventType::Purchase);
        let back: Vec<YsbEvent> =
            rkyv::deserialize::<Vec<YsbEvent>, rkyv::rancor::Error>(archived).unwrap();
        assert_eq!(back, events);
    }
}
