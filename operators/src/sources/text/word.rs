//! [`Word`]: a word as a record and a key, without an allocation for the
//! usual short word.

use rkyv::{Archive, Deserialize, Serialize};
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};

/// Bytes a [`Word`] holds inline (longer words go to the heap).
pub const INLINE_WORD_BYTES: usize = 22;

/// A word (any UTF-8 string) as a record of the graph API: up to
/// [`INLINE_WORD_BYTES`] bytes it is stored inline (copying or creating it
/// allocates nothing), longer on the heap. Equality and ordering (byte
/// order) are those of the string, so a `Word` keys a table or an exchange
/// (`key_by`) as its `String` would (the hash differs: a short word hashes
/// its fixed-size form), and crosses edges archived (rkyv).
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
    /// `bytes[..len]`, the rest zero.
    Inline {
        len: u8,
        bytes: [u8; INLINE_WORD_BYTES],
    },
    /// More than [`INLINE_WORD_BYTES`] bytes.
    Heap(Box<str>),
}

impl Word {
    /// The word `s`.
    #[inline]
    pub fn new(s: &str) -> Word {
        let (src, n) = (s.as_bytes(), s.len());
        if n <= INLINE_WORD_BYTES {
            // Fixed-size copies (overlapping where the length is not a
            // multiple), no call to `memcpy` for a few bytes.
            let mut bytes = [0u8; INLINE_WORD_BYTES];
            if n >= 8 {
                bytes[..8].copy_from_slice(&src[..8]);
                if n > 16 {
                    bytes[8..16].copy_from_slice(&src[8..16]);
                }
                bytes[n - 8..n].copy_from_slice(&src[n - 8..]);
            } else if n >= 4 {
                bytes[..4].copy_from_slice(&src[..4]);
                bytes[n - 4..n].copy_from_slice(&src[n - 4..]);
            } else if n > 0 {
                bytes[0] = src[0];
                bytes[n / 2] = src[n / 2];
                bytes[n - 1] = src[n - 1];
            }
            Word(Repr::Inline {
                len: n as u8,
                bytes,
            })
        } else {
            Word(Repr::Heap(s.into()))
        }
    }

    /// The word as a string.
    #[inline]
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Inline { len, bytes } => {
                // SAFETY: `bytes[..len]` is a copy of a whole `&str` (see
                // `Word::new`, the only place an `Inline` is made; archived
                // words come back through rkyv's `Deserialize` of the same
                // bytes), so it is valid UTF-8.
                unsafe { std::str::from_utf8_unchecked(&bytes[..*len as usize]) }
            }
            Repr::Heap(s) => s,
        }
    }
}

impl PartialEq for Word {
    #[inline]
    fn eq(&self, o: &Word) -> bool {
        match (&self.0, &o.0) {
            // Fixed-size compare: the bytes after `len` are zero in both.
            (Repr::Inline { len: a, bytes: x }, Repr::Inline { len: b, bytes: y }) => {
                a == b && x == y
            }
            _ => self.as_str() == o.as_str(),
        }
    }
}

impl Eq for Word {}

impl Hash for Word {
    /// An inline word hashes its fixed-size form (equal words have equal
    /// forms), a longer one its string.
    #[inline]
    fn hash<H: Hasher>(&self, h: &mut H) {
        match &self.0 {
            Repr::Inline { len, bytes } => {
                let word = |i: usize| {
                    let mut b = [0u8; 8];
                    let end = (i + 8).min(INLINE_WORD_BYTES);
                    b[..end - i].copy_from_slice(&bytes[i..end]);
                    u64::from_le_bytes(b)
                };
                h.write_u64(word(0));
                h.write_u64(word(8));
                h.write_u64(word(16) ^ (*len as u64) << 56);
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
            assert_eq!(key_hash(&w), key_hash(&Word::new(&s.to_string())));
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
}
