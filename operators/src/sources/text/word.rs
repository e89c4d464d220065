//! [`Word`]: a word as a record and a key, without an allocation for the
//! usual short word.

use rkyv::{Archive, Deserialize, Serialize};
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};

/// Bytes a [`Word`] holds inline (longer words go to the heap).
pub const INLINE_WORD_BYTES: usize = 23;

/// A word (any UTF-8 string) as a record of the graph API: up to
/// [`INLINE_WORD_BYTES`] bytes it is stored inline (copying or creating it
/// allocates nothing), longer on the heap. Equality and ordering (byte
/// order) are those of the string, so a `Word` keys a table or an exchange
/// (`key_by`) as its `String` would (the hash differs: a short word hashes
/// its three inline machine words), and crosses edges archived (rkyv).
///
/// ```
/// use air_operators::sources::text::Word;
/// let w = Word::new("école");
/// assert_eq!(w.as_str(), "école");
/// assert_eq!(w, Word::new(&String::from("école")));
/// let long = Word::new(&"x".repeat(100));
/// assert_eq!(long.as_str().len(), 100);
/// assert!(Word::new("a") < Word::new("b"));
/// ```
#[derive(Clone, Archive, Serialize, Deserialize)]
pub struct Word(Repr);

/// The two forms of a word: a word of at most [`INLINE_WORD_BYTES`] bytes
/// is always `Inline`, a longer one always `Heap` (so equal words have
/// equal forms).
#[derive(Clone, Archive, Serialize, Deserialize)]
enum Repr {
    /// 24 bytes in memory order (`to_ne_bytes` of each word): the word's
    /// bytes, zeros up to byte 23, and its length in byte 23.
    Inline([u64; 3]),
    /// More than [`INLINE_WORD_BYTES`] bytes.
    Heap(Box<str>),
}

impl Word {
    /// The word `s`.
    #[inline]
    pub fn new(s: &str) -> Word {
        let (src, n) = (s.as_bytes(), s.len());
        if n > INLINE_WORD_BYTES {
            return Word(Repr::Heap(s.into()));
        }
        // Fixed-size copies (overlapping where the length is not a
        // multiple), no call to `memcpy` for a few bytes.
        let mut b = [0u8; 24];
        if n >= 8 {
            b[..8].copy_from_slice(&src[..8]);
            if n > 16 {
                b[8..16].copy_from_slice(&src[8..16]);
            }
            b[n - 8..n].copy_from_slice(&src[n - 8..]);
        } else if n >= 4 {
            b[..4].copy_from_slice(&src[..4]);
            b[n - 4..n].copy_from_slice(&src[n - 4..]);
        } else if n > 0 {
            b[0] = src[0];
            b[n / 2] = src[n / 2];
            b[n - 1] = src[n - 1];
        }
        b[23] = n as u8;
        let w = |i: usize| u64::from_ne_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        Word(Repr::Inline([w(0), w(8), w(16)]))
    }

    /// The word as a string.
    #[inline]
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Inline(words) => {
                // SAFETY: `[u64; 3]` is 24 initialized bytes, and `u8` has
                // no alignment requirement: viewing them as bytes is valid
                // for the borrow's lifetime.
                let b: &[u8; 24] = unsafe { &*(words as *const [u64; 3] as *const [u8; 24]) };
                // A word made here has its length (at most 23) in byte 23
                // and UTF-8 before it; an archived one read from a ring is
                // checked by rkyv only as three integers, so both are
                // checked here (a corrupted word reads as U+FFFD, never out
                // of bounds or as invalid UTF-8). Only output and ordering
                // call this, never the per-record hash and equality.
                let n = b[23] as usize;
                match b[..INLINE_WORD_BYTES].get(..n).map(std::str::from_utf8) {
                    Some(Ok(s)) => s,
                    _ => "\u{FFFD}",
                }
            }
            Repr::Heap(s) => s,
        }
    }
}

impl PartialEq for Word {
    #[inline]
    fn eq(&self, o: &Word) -> bool {
        match (&self.0, &o.0) {
            // Equal words have equal inline forms (zeros after the bytes,
            // the length in the last byte).
            (Repr::Inline(x), Repr::Inline(y)) => x == y,
            (Repr::Heap(x), Repr::Heap(y)) => x == y,
            _ => false,
        }
    }
}

impl Eq for Word {}

impl Hash for Word {
    /// An inline word hashes its three machine words (equal words have
    /// equal forms), a longer one its string.
    #[inline]
    fn hash<H: Hasher>(&self, h: &mut H) {
        match &self.0 {
            Repr::Inline([a, b, c]) => {
                h.write_u64(*a);
                h.write_u64(*b);
                h.write_u64(*c);
            }
            Repr::Heap(s) => s.hash(h),
        }
    }
}

impl PartialOrd for Word {
    fn partial_cmp(&self, o: &Word) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Word {
    fn cmp(&self, o: &Word) -> Ordering {
        self.as_str().cmp(o.as_str())
    }
}

impl fmt::Debug for Word {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Word {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for Word {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use air_runtime::{key_hash, Record};

    #[test]
    fn words_of_every_length_keep_their_bytes_and_equal_words_hash_alike() {
        let all: Vec<String> = (0..30)
            .map(|n| "abcdefghijklmnopqrstuvwxyz0123"[..n].to_string())
            .collect();
        for s in ["é", "école", "東京タワー"]
            .into_iter()
            .chain(all.iter().map(String::as_str))
        {
            let w = Word::new(s);
            assert_eq!(w.as_str(), s);
            let owned = String::from(s);
            assert_eq!(key_hash(&w), key_hash(&Word::new(&owned)));
            let back = Word::from_archived(
                &<Word as air_runtime::ExchangeData>::read_batch_validated(
                    &<Word as air_runtime::ExchangeData>::to_bytes(&vec![w.clone()]),
                )
                .unwrap()[0],
            );
            assert_eq!(back, w);
            assert_eq!(back.as_str(), s);
        }
        assert_ne!(Word::new("ab"), Word::new("ab\0"));
        assert_ne!(key_hash(&Word::new("ab")), key_hash(&Word::new("ab\0")));
        let mut v: Vec<Word> = ["b", "a", "ab", &"a".repeat(30)].map(Word::new).to_vec();
        v.sort();
        let s: Vec<&str> = v.iter().map(Word::as_str).collect();
        assert_eq!(s, ["a", &"a".repeat(30), "ab", "b"]);
    }

    /// A batch that passes rkyv's validation but holds a corrupted inline
    /// word (a length byte above 23, bytes that are not UTF-8) reads as
    /// U+FFFD: never a panic, never invalid UTF-8.
    #[test]
    fn corrupted_inline_words_read_as_the_replacement_character() {
        let forged = |b: [u8; 24]| {
            let w = |i: usize| u64::from_ne_bytes(b[i..i + 8].try_into().unwrap());
            Word(Repr::Inline([w(0), w(8), w(16)]))
        };
        let mut long = [b'a'; 24];
        long[23] = 104;
        let mut bad = [0u8; 24];
        bad[..3].copy_from_slice(&[0xff, 0xfe, b'x']);
        bad[23] = 3;
        for w in [forged(long), forged(bad)] {
            let bytes = <Word as air_runtime::ExchangeData>::to_bytes(&vec![w]);
            let items = <Word as air_runtime::ExchangeData>::read_batch_validated(&bytes)
                .expect("three integers validate");
            assert_eq!(Word::from_archived(&items[0]).as_str(), "\u{FFFD}");
        }
    }
}
