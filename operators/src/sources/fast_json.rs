//! A fast path for deserializing one JSON line with serde, in front of
//! serde_json: [`from_line`].
//!
//! It reads the plain JSON of machine-written lines (strings without
//! escapes, integers, objects, arrays, `true`/`false`/`null`) straight into
//! the type's visitor, finding string ends with `memchr` and checking
//! UTF-8 with `simdutf8`, and hands back `None` for anything else (an
//! escape in a string, a float it would round differently, a number out of
//! range, any error at all). The caller then parses the line with
//! serde_json, whose result and error messages are the reference: the
//! fast path must never accept a line that serde_json rejects, nor give a
//! different value (a property test checks both against serde_json).

use serde::de::{self, DeserializeOwned, DeserializeSeed, Visitor};
use std::fmt;

/// `T` from the JSON text `line` if the fast path can read it; `None`
/// means "ask serde_json" (the line may be valid or not).
#[inline]
pub(crate) fn from_line<T: DeserializeOwned>(line: &[u8]) -> Option<T> {
    let mut de = De {
        b: line,
        i: 0,
        depth: 0,
    };
    let v = T::deserialize(&mut de).ok()?;
    de.ws();
    (de.i == line.len()).then_some(v)
}

/// Nesting deeper than this goes to serde_json (whose limit is 128).
const MAX_DEPTH: u32 = 100;

/// "Not handled here": the caller asks serde_json.
#[derive(Debug)]
struct Bail;

impl fmt::Display for Bail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not on the fast path")
    }
}

impl std::error::Error for Bail {}

impl de::Error for Bail {
    #[cold]
    fn custom<T: fmt::Display>(_: T) -> Bail {
        Bail
    }
}

/// The deserializer: the text and the position of the next byte.
struct De<'a> {
    b: &'a [u8],
    i: usize,
    depth: u32,
}

impl<'a> De<'a> {
    #[inline(always)]
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    /// The next byte that is not whitespace (not consumed).
    #[inline(always)]
    fn peek(&mut self) -> Result<u8, Bail> {
        // Machine-written lines have no whitespace between tokens: one
        // test in that case.
        match self.b.get(self.i) {
            Some(&c) if c > b' ' => Ok(c),
            _ => {
                self.ws();
                self.b.get(self.i).copied().ok_or(Bail)
            }
        }
    }

    /// Consumes `c`, after whitespace.
    #[inline(always)]
    fn expect(&mut self, c: u8) -> Result<(), Bail> {
        if self.peek()? == c {
            self.i += 1;
            Ok(())
        } else {
            Err(Bail)
        }
    }

    /// The string that starts at `self.i` (its `"`), if it has no escape
    /// and no control character; consumed. ASCII is scanned 16 bytes at a
    /// time (SSE2), then 8; text with other characters is checked by
    /// `simdutf8`.
    #[inline(always)]
    fn string(&mut self) -> Result<&'a str, Bail> {
        let start = self.i + 1;
        let b = self.b;
        let mut j = start;
        // The first byte that is `"`, `\`, a control character or not
        // ASCII: 16 bytes at a time with SSE2 (every x86-64 has it), then a
        // word at a time (the lowest flagged byte of a word is exact; flags
        // above it may be false).
        'scan: {
            #[cfg(target_arch = "x86_64")]
            while let Some(chunk) = b.get(j..j + 16) {
                use std::arch::x86_64::{
                    __m128i, _mm_cmpeq_epi8, _mm_cmplt_epi8, _mm_loadu_si128, _mm_movemask_epi8,
                    _mm_or_si128, _mm_set1_epi8,
                };
                // SAFETY: SSE2 is part of the x86-64 baseline, so these
                // intrinsics are always available; the load reads the 16 bytes
                // of `chunk` (unaligned loads allowed by `loadu`).
                let mask = unsafe {
                    let v = _mm_loadu_si128(chunk.as_ptr().cast::<__m128i>());
                    let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
                    let slash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
                    // Signed: bytes >= 0x80 are negative, so one compare flags
                    // both control characters and non-ASCII bytes.
                    let other = _mm_cmplt_epi8(v, _mm_set1_epi8(0x20));
                    _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, slash), other))
                };
                if mask != 0 {
                    j += mask.trailing_zeros() as usize;
                    break 'scan;
                }
                j += 16;
            }
            const ONES: u64 = 0x0101_0101_0101_0101;
            const HIGH: u64 = 0x8080_8080_8080_8080;
            while let Some(chunk) = b.get(j..j + 8) {
                let w = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
                let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
                let flags = zero(w ^ (ONES * b'"' as u64))
                    | zero(w ^ (ONES * b'\\' as u64))
                    | (w.wrapping_sub(ONES * 0x20) & !w & HIGH)
                    | (w & HIGH);
                if flags != 0 {
                    j += flags.trailing_zeros() as usize / 8;
                    break;
                }
                j += 8;
            }
        }
        loop {
            match b.get(j) {
                Some(b'"') => break,
                Some(&c) if c >= 0x80 => return self.string_utf8(start, j),
                Some(&c) if c >= 0x20 && c != b'\\' => j += 1,
                _ => return Err(Bail),
            }
        }
        self.i = j + 1;
        // SAFETY: `start..j` is ASCII (every byte was checked < 0x80 above).
        Ok(unsafe { std::str::from_utf8_unchecked(&b[start..j]) })
    }

    /// The rest of [`string`](Self::string) for text that is not all ASCII:
    /// `start` is the string's first byte, `from` the first non-ASCII one.
    #[cold]
    fn string_utf8(&mut self, start: usize, from: usize) -> Result<&'a str, Bail> {
        let rest = &self.b[from..];
        let k = memchr::memchr2(b'"', b'\\', rest).ok_or(Bail)?;
        if rest[k] != b'"' || rest[..k].iter().any(|&c| c < 0x20) {
            return Err(Bail);
        }
        let s = simdutf8::basic::from_utf8(&self.b[start..from + k]).map_err(|_| Bail)?;
        self.i = from + k + 1;
        Ok(s)
    }

    /// The literal `word` (`true`, `false`, `null`) at `self.i`; consumed.
    #[inline(always)]
    fn word(&mut self, word: &[u8]) -> Result<(), Bail> {
        if self.b[self.i..].starts_with(word) {
            self.i += word.len();
            Ok(())
        } else {
            Err(Bail)
        }
    }

    /// The number at `self.i`: an integer visited as serde_json does (`u64`
    /// if not negative, else `i64`); a float parsed by serde_json itself.
    #[inline(always)]
    fn number<V: Visitor<'a>>(&mut self, v: V) -> Result<V::Value, Bail> {
        let b = self.b;
        let start = self.i;
        let mut i = start;
        let neg = b[i] == b'-';
        i += neg as usize;
        let digits = |i: &mut usize| {
            let from = *i;
            while b.get(*i).is_some_and(u8::is_ascii_digit) {
                *i += 1;
            }
            *i > from
        };
        match b.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => {
                digits(&mut i);
            }
            _ => return Err(Bail),
        }
        let int_end = i;
        if b.get(i) == Some(&b'.') {
            i += 1;
            if !digits(&mut i) {
                return Err(Bail);
            }
        }
        if let Some(b'e' | b'E') = b.get(i) {
            i += 1;
            if let Some(b'+' | b'-') = b.get(i) {
                i += 1;
            }
            if !digits(&mut i) {
                return Err(Bail);
            }
        }
        self.i = i;
        if i != int_end {
            // serde_json's own float parsing, for the very same value.
            let f: f64 = serde_json::from_slice(&b[start..i]).map_err(|_| Bail)?;
            return v.visit_f64(f);
        }
        let mut n: u64 = 0;
        for &d in &b[start + neg as usize..int_end] {
            n = n
                .checked_mul(10)
                .and_then(|n| n.checked_add(u64::from(d - b'0')))
                .ok_or(Bail)?;
        }
        if !neg {
            v.visit_u64(n)
        } else if n == 0 || n > i64::MAX as u64 {
            // serde_json reads -0 as a float, and goes on past i64.
            Err(Bail)
        } else {
            v.visit_i64(-(n as i64))
        }
    }

    /// Enters an object or array (its opening byte consumed).
    #[inline(always)]
    fn enter(&mut self) -> Result<(), Bail> {
        self.i += 1;
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Bail);
        }
        Ok(())
    }
}

impl<'de> de::Deserializer<'de> for &mut De<'de> {
    type Error = Bail;

    #[inline]
    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Bail> {
        match self.peek()? {
            b'"' => {
                let s = self.string()?;
                v.visit_borrowed_str(s)
            }
            b'{' => {
                self.enter()?;
                let value = v.visit_map(Members {
                    de: &mut *self,
                    first: true,
                })?;
                self.expect(b'}')?;
                self.depth -= 1;
                Ok(value)
            }
            b'[' => {
                self.enter()?;
                let value = v.visit_seq(Elements {
                    de: &mut *self,
                    first: true,
                })?;
                self.expect(b']')?;
                self.depth -= 1;
                Ok(value)
            }
            b't' => {
                self.word(b"true")?;
                v.visit_bool(true)
            }
            b'f' => {
                self.word(b"false")?;
                v.visit_bool(false)
            }
            b'n' => {
                self.word(b"null")?;
                v.visit_unit()
            }
            b'-' | b'0'..=b'9' => self.number(v),
            _ => Err(Bail),
        }
    }

    #[inline]
    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Bail> {
        if self.peek()? == b'n' {
            self.word(b"null")?;
            v.visit_none()
        } else {
            v.visit_some(self)
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        v: V,
    ) -> Result<V::Value, Bail> {
        v.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Bail> {
        // Unit variants as strings; anything else goes to serde_json.
        if self.peek()? != b'"' {
            return Err(Bail);
        }
        let s = self.string()?;
        v.visit_enum(de::value::BorrowedStrDeserializer::new(s))
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, _v: V) -> Result<V::Value, Bail> {
        Err(Bail)
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, _v: V) -> Result<V::Value, Bail> {
        Err(Bail)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        unit unit_struct seq tuple tuple_struct map struct identifier ignored_any
    }
}

/// The members of an object, for a visitor.
struct Members<'d, 'a> {
    de: &'d mut De<'a>,
    first: bool,
}

impl<'de> de::MapAccess<'de> for Members<'_, 'de> {
    type Error = Bail;

    #[inline]
    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Bail> {
        let mut c = self.de.peek()?;
        if c == b'}' {
            return Ok(None);
        }
        if !std::mem::take(&mut self.first) {
            if c != b',' {
                return Err(Bail);
            }
            self.de.i += 1;
            c = self.de.peek()?;
        }
        if c != b'"' {
            return Err(Bail);
        }
        let key = self.de.string()?;
        self.de.expect(b':')?;
        seed.deserialize(de::value::BorrowedStrDeserializer::new(key))
            .map(Some)
    }

    #[inline]
    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Bail> {
        seed.deserialize(&mut *self.de)
    }
}

/// The elements of an array, for a visitor.
struct Elements<'d, 'a> {
    de: &'d mut De<'a>,
    first: bool,
}

impl<'de> de::SeqAccess<'de> for Elements<'_, 'de> {
    type Error = Bail;

    #[inline]
    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Bail> {
        let c = self.de.peek()?;
        if c == b']' {
            return Ok(None);
        }
        if !std::mem::take(&mut self.first) {
            if c != b',' {
                return Err(Bail);
            }
            self.de.i += 1;
        }
        seed.deserialize(&mut *self.de).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::from_line;
    use proptest::prelude::*;
    use serde_json::Value;

    #[derive(Debug, PartialEq, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Rec {
        id: u32,
        name: String,
        score: Option<f64>,
        #[serde(default)]
        tags: Vec<String>,
        kind: Kind,
        at: (i64, u8),
    }

    #[derive(Debug, PartialEq, serde::Deserialize)]
    enum Kind {
        A,
        B,
    }

    /// The fast path never disagrees with serde_json: when it gives a
    /// value, serde_json gives the same.
    fn agree<T>(line: &[u8]) -> Option<T>
    where
        T: serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
    {
        let fast = from_line::<T>(line);
        let slow = serde_json::from_slice::<T>(line);
        if let Some(f) = &fast {
            assert_eq!(
                Some(f),
                slow.as_ref().ok(),
                "line {:?}",
                String::from_utf8_lossy(line)
            );
        }
        fast
    }

    #[test]
    fn plain_lines_are_read_and_odd_ones_left_to_serde_json() {
        let ok = br#" {"id": 7, "name": "ab", "score": null, "kind": "B", "at": [-3, 255]} "#;
        assert!(agree::<Rec>(ok).is_some());
        for bad in [
            &br#"{"id": 7, "name": "a\"b", "score": 1, "kind": "A", "at": [1, 2]}"#[..],
            br#"{"id": 7, "name": "ab", "score": 1.5, "kind": "A", "at": [1, 2],}"#,
            br#"{"id": 7, "name": "ab", "score": 1, "kind": "C", "at": [1, 2]}"#,
            br#"{"id": 7, "name": "ab", "score": 1, "kind": "A", "at": [1, 256]}"#,
            br#"{"id": 07, "name": "ab", "score": 1, "kind": "A", "at": [1, 2]}"#,
            br#"{"id": 7, "name": "ab", "score": 1, "kind": "A", "at": [1, 2]} x"#,
            br#"{"id": 7, "name": "ab", "score": 1, "kind": "A", "at": [1, 2], "z": 1}"#,
            br#"{"id": 7, "id": 8, "name": "ab", "score": 1, "kind": "A", "at": [1, 2]}"#,
            br#"{"id": 7, "name": "ab", "score": -0, "kind": "A", "at": [-0, 2]}"#,
            b"{\"id\": 7, \"name\": \"a\tb\", \"score\": 1, \"kind\": \"A\", \"at\": [1, 2]}",
        ] {
            assert!(
                agree::<Rec>(bad).is_none(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(agree::<Value>(b"[1.5e3, -2, true, {}]").unwrap()[0], 1500.0);
        // Keys in the fields' order, out of it, escaped: the same values.
        let want = Plain {
            a: 1,
            ab: "s".into(),
            b: Some(true),
        };
        for line in [
            &br#"{"a": 1, "ab": "s", "b": true}"#[..],
            br#"{"b": true, "ab": "s", "a": 1}"#,
            br#"{"a": 1, "abc": 2, "ab": "s", "b": true}"#,
        ] {
            assert_eq!(
                agree::<Plain>(line),
                Some(want.clone()),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
        // Escaped keys are left to serde_json (which reads the first two).
        assert_eq!(
            agree::<Plain>(br#"{"\u0061": 1, "ab": "s", "b": true}"#),
            None
        );
        assert_eq!(agree::<Odd>(br#"{"a": 1, "x\\y": 2}"#), None);
        assert_eq!(agree::<Odd>(br#"{"a": 1, "x\y": 2}"#), None);
    }

    /// Strings of every length up to 64 bytes with one byte of each kind
    /// the scanner must stop at (or pass) at every position: the 16- and
    /// 8-byte steps and the byte loop agree with serde_json everywhere.
    #[test]
    fn strings_are_scanned_right_at_every_length_and_position() {
        let odd: [&[u8]; 9] = [
            b"\"",
            b"\\",
            b"\\n",
            b"\x01",
            b"\x1f",
            b"\x7f",
            b" ",
            "\u{e9}".as_bytes(),
            b"\xff",
        ];
        for len in 0..64 {
            for at in 0..=len {
                for o in odd {
                    let mut text = b"[\"".to_vec();
                    text.extend(std::iter::repeat_n(b'a', at));
                    text.extend_from_slice(o);
                    text.extend(std::iter::repeat_n(b'b', len - at));
                    text.extend_from_slice(b"\", 1]");
                    let fast = agree::<Value>(&text);
                    let plain = o.iter().all(|&c| c >= 0x20 && c != b'"' && c != b'\\');
                    if plain && std::str::from_utf8(&text).is_ok() {
                        assert!(fast.is_some(), "{}", String::from_utf8_lossy(&text));
                    }
                }
            }
        }
    }

    /// Any JSON value, as text.
    fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "[a-z\"\\\\é\t ]{0,8}".prop_map(Value::String),
            "[a-z\"\\\\é\t\u{1}\u{7f} ]{9,40}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map("[a-z]{0,3}", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn has_float(v: &Value) -> bool {
        match v {
            Value::Number(n) => n.is_f64(),
            Value::Array(a) => a.iter().any(has_float),
            Value::Object(m) => m.values().any(has_float),
            _ => false,
        }
    }

    #[derive(Debug, Clone, PartialEq, serde::Deserialize)]
    struct Plain {
        a: u32,
        ab: String,
        #[serde(default)]
        b: Option<bool>,
    }

    /// A field whose name is not JSON text as it stands: keys are scanned.
    #[derive(Debug, PartialEq, serde::Deserialize)]
    struct Odd {
        a: u32,
        #[serde(rename = "x\\y")]
        xy: u32,
    }

    /// An object of `Plain`'s or `Odd`'s members in any order, keys written
    /// plainly, escaped, with a longer name, or twice.
    fn members() -> impl Strategy<Value = Vec<(String, String)>> {
        let key = prop_oneof![
            Just("a".to_string()),
            Just("ab".to_string()),
            Just("b".to_string()),
            Just("\\u0061".to_string()),
            Just("abc".to_string()),
            Just("x\\\\y".to_string()),
            Just("x\\y".to_string()),
        ];
        let value = prop_oneof![
            Just("1".to_string()),
            Just("\"s\"".to_string()),
            Just("true".to_string()),
            Just("null".to_string()),
        ];
        prop::collection::vec((key, value), 0..6)
    }

    proptest! {
        /// Structs read by field name: never a value serde_json would not
        /// give, whatever the keys' order, escapes or repeats.
        #[test]
        fn structs_agree_with_serde_json(
            m in members(),
            cut in any::<prop::sample::Index>(),
            junk in prop::sample::select(vec!["", " ", ",", "\"", ":", "\\"]),
        ) {
            let body: Vec<String> = m.iter().map(|(k, v)| format!("\"{k}\": {v}")).collect();
            let text = format!("{{{}}}", body.join(", "));
            agree::<Plain>(text.as_bytes());
            agree::<Odd>(text.as_bytes());
            let mut bytes = text.into_bytes();
            let at = cut.index(bytes.len() + 1);
            bytes.splice(at..at, junk.bytes());
            agree::<Plain>(&bytes);
            agree::<Odd>(&bytes);
        }

        #[test]
        fn the_fast_path_agrees_with_serde_json(
            v in json(),
            cut in any::<prop::sample::Index>(),
            junk in prop::sample::select(vec!["", " ", ",", "}", "]", "\"", "-", "0", "e", ".", "\\", "\u{1}"]),
            pretty in any::<bool>(),
        ) {
            let text = if pretty { serde_json::to_string_pretty(&v) } else { serde_json::to_string(&v) }.unwrap();
            // Valid text: what the fast path reads is what serde_json reads
            // (`agree`), and it reads every text without escapes or floats.
            let fast = agree::<Value>(text.as_bytes());
            if !text.contains('\\') && !has_float(&v) {
                prop_assert!(fast.is_some(), "{}", text);
            }
            // Text with one byte run inserted: never accepted unless serde_json does.
            let mut bytes = text.into_bytes();
            let at = cut.index(bytes.len() + 1);
            bytes.splice(at..at, junk.bytes());
            agree::<Value>(&bytes);
        }
    }
}
