//! Helpers shared by the JSON-lines parsers of YSB and NEXMark: the byte
//! scanners of their fast paths, the object reader of their slow paths and
//! the integer writer of their writers.

use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};

/// Decimal digits of `v`, written at the end of `buf`.
pub(crate) fn format_u64(mut v: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            return &buf[i..];
        }
    }
}

/// The index of the first byte at or after `i` that is not JSON whitespace
/// (space, tab, `\n`, `\r`), or `b.len()`.
#[inline(always)]
pub(crate) fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

/// Index of the closing quote of a string whose content starts at `i`, or
/// `None` if a backslash comes first or the line ends.
#[inline(always)]
pub(crate) fn string_end(b: &[u8], i: usize) -> Option<usize> {
    let j = i + memchr::memchr2(b'"', b'\\', b.get(i..)?)?;
    (b[j] == b'"').then_some(j)
}

/// Why a line is not a JSON object, as [`object_members`] says.
#[derive(Debug)]
pub(crate) enum NotAnObject {
    /// The line is valid JSON but not an object.
    OtherValue,
    /// The line is not valid JSON.
    Malformed {
        /// 1-based column (byte) where the JSON parser stopped.
        column: usize,
        /// The JSON parser's message, without its position.
        message: String,
    },
}

/// The members of the JSON object `line`, in order, duplicates kept.
/// Surrounding whitespace is ignored.
///
/// # Errors
/// [`NotAnObject`] if `line` is not a JSON object.
pub(crate) fn object_members(line: &[u8]) -> Result<Vec<(String, serde_json::Value)>, NotAnObject> {
    match serde_json::from_slice::<Members>(line) {
        Ok(m) => Ok(m.0),
        Err(e) if e.classify() == serde_json::error::Category::Data => Err(NotAnObject::OtherValue),
        Err(e) => {
            let message = e.to_string();
            let message = match message.rfind(" at line ") {
                Some(k) => message[..k].to_owned(),
                None => message,
            };
            // serde_json's words for a bare word where a value belongs
            // (it expected `null`, `true` or `false`).
            let message = if message == "expected ident" {
                "not JSON (expected an object, `{...}`)".to_owned()
            } else {
                message
            };
            Err(NotAnObject::Malformed {
                column: e.column(),
                message,
            })
        }
    }
}

/// The members of a JSON object, in order, duplicates kept.
struct Members(Vec<(String, serde_json::Value)>);

impl<'de> Deserialize<'de> for Members {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Members, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Members;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members, A::Error> {
                let mut members = Vec::with_capacity(12);
                while let Some(entry) = map.next_entry::<String, serde_json::Value>()? {
                    members.push(entry);
                }
                Ok(Members(members))
            }
        }
        d.deserialize_map(V)
    }
}
