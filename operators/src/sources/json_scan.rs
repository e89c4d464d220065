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
            let message = error_message(&e);
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

/// serde_json's message for `e` without the position it appends
/// (" at line L column C"): within one line, the column is what matters,
/// and [`serde_json::Error::column`] gives it.
pub(crate) fn error_message(e: &serde_json::Error) -> String {
    let mut message = e.to_string();
    if let Some(k) = message.rfind(" at line ") {
        message.truncate(k);
    }
    message
}

/// The keys that lead to the value at 1-based byte `column` of the JSON
/// text `line`, joined with `.` (array elements as `[i]`): `user`,
/// `address.city`, `items[2].price`; empty at the top level. For error
/// messages: it follows strings and nesting up to `column` without
/// checking the rest of the syntax.
pub(crate) fn key_path_at(line: &[u8], column: usize) -> String {
    enum Level {
        /// An object: its current key, and whether the next string is a key.
        Object(Option<String>, bool),
        /// An array: the index of its current element.
        Array(usize),
    }
    let end = column.min(line.len());
    let mut stack: Vec<Level> = Vec::new();
    let mut i = 0;
    while i < end {
        match line[i] {
            b'"' => {
                let start = i + 1;
                i += 1;
                while i < line.len() && line[i] != b'"' {
                    i += if line[i] == b'\\' { 2 } else { 1 };
                }
                if let Some(Level::Object(key, expect_key)) = stack.last_mut() {
                    if *expect_key {
                        let text = &line[start..i.min(line.len())];
                        *key = Some(String::from_utf8_lossy(text).into_owned());
                        *expect_key = false;
                    }
                }
            }
            b'{' => stack.push(Level::Object(None, true)),
            b'[' => stack.push(Level::Array(0)),
            b'}' | b']' => {
                stack.pop();
            }
            b',' => match stack.last_mut() {
                Some(Level::Object(_, expect_key)) => *expect_key = true,
                Some(Level::Array(n)) => *n += 1,
                None => {}
            },
            _ => {}
        }
        i += 1;
    }
    let mut path = String::new();
    for level in &stack {
        match level {
            Level::Object(Some(key), _) => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
            }
            Level::Object(None, _) => {}
            Level::Array(n) => path += &format!("[{n}]"),
        }
    }
    path
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

#[cfg(test)]
mod tests {
    use super::key_path_at;

    #[test]
    fn key_path_names_the_value_at_a_column() {
        let line = br#"{"user": "x", "a": {"b": [1, {"c": tru}]}, "d\"e": 5}"#;
        let at = |needle: &str| {
            let k = line
                .windows(needle.len())
                .position(|w| w == needle.as_bytes())
                .unwrap();
            key_path_at(line, k + needle.len())
        };
        assert_eq!(at(r#""x""#), "user");
        assert_eq!(at("[1"), "a.b[0]");
        assert_eq!(at("tru"), "a.b[1].c");
        assert_eq!(at("5"), r#"d\"e"#);
        assert_eq!(key_path_at(line, 1), "");
        assert_eq!(key_path_at(line, line.len()), "");
    }
}
