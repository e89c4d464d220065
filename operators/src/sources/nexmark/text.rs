//! [`Text`]: a string field of a full NEXMark bid that is cheap to make,
//! move and clone: shared text (a cached channel name or URL, or a string
//! read from a file) or letters not drawn yet (the generator's `extra`,
//! rendered only when a query reads it).

use std::borrow::Cow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::sources::rng::WyRand;

/// Longest text [`Text::with_str`] renders on the stack (longer lazy
/// letters are rendered into a `String`).
const STACK_TEXT: usize = 256;

/// An immutable UTF-8 string of a [`FullBid`](super::FullBid) field, 24
/// bytes, that never copies its characters on a clone:
///
/// - shared text (`Arc<str>`, or a `&'static str`): a clone bumps a count;
/// - `len` lowercase letters still to be drawn from a random generator's
///   state (the generator's `extra`, Beam's `nextExactString`): making,
///   cloning and dropping it touch no heap, and the letters are computed
///   each time the text is read ([`write_to`](Self::write_to),
///   [`with_str`](Self::with_str), [`Display`](fmt::Display), …).
///
/// Equality, ordering and hashing are those of the characters (a lazy
/// text equals the shared text of the same letters), so a `Text` behaves as
/// the `String` it stands for.
///
/// ```
/// use air_operators::sources::nexmark::Text;
/// let t = Text::from("channel-7");
/// let u = t.clone(); // no copy of the characters
/// assert_eq!(u, "channel-7");
/// assert_eq!(u.len(), 9);
/// let mut csv = b"1,".to_vec();
/// u.write_to(&mut csv);
/// assert_eq!(csv, b"1,channel-7");
/// assert_eq!(u.with_str(|s| s.matches('n').count()), 2);
/// assert_eq!(format!("{u}|{u:?}"), "channel-7|\"channel-7\"");
/// assert_eq!(Text::default(), "");
/// ```
#[derive(Clone)]
pub struct Text(Repr);

#[derive(Clone)]
enum Repr {
    /// Text with static lifetime (no count).
    Static(&'static str),
    /// Shared text.
    Shared(Arc<str>),
    /// `len` letters of [`push_letters`] from `rng`'s state.
    Letters { rng: WyRand, len: u32 },
}

impl Text {
    /// Text borrowed for the whole program (no allocation, no count).
    pub const fn from_static(s: &'static str) -> Text {
        Text(Repr::Static(s))
    }

    /// `len` letters drawn from `rng` as Beam's `nextExactString` (see
    /// [`push_letters`]), drawn when read.
    pub(crate) fn letters(rng: WyRand, len: usize) -> Text {
        match u32::try_from(len) {
            Ok(len) => Text(Repr::Letters { rng, len }),
            // Over 4 GiB of padding: drawn now.
            Err(_) => {
                let mut s = Vec::with_capacity(len);
                push_letters(&mut rng.clone(), len, &mut s);
                Text::from(String::from_utf8(s).expect("ASCII"))
            }
        }
    }

    /// Length in bytes (UTF-8).
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Static(s) => s.len(),
            Repr::Shared(s) => s.len(),
            Repr::Letters { len, .. } => *len as usize,
        }
    }

    /// Whether the text is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The text if it is stored as characters (shared text), `None` if
    /// its letters are still to be drawn (then see
    /// [`to_cow`](Self::to_cow) or [`with_str`](Self::with_str)).
    pub fn as_stored(&self) -> Option<&str> {
        match &self.0 {
            Repr::Static(s) => Some(s),
            Repr::Shared(s) => Some(s),
            Repr::Letters { .. } => None,
        }
    }

    /// The text: borrowed when stored, else drawn into a new `String`.
    pub fn to_cow(&self) -> Cow<'_, str> {
        match self.as_stored() {
            Some(s) => Cow::Borrowed(s),
            None => Cow::Owned(self.clone().into_string()),
        }
    }

    /// Appends the text's bytes (UTF-8) to `out`; no allocation besides
    /// `out`'s growth.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        match &self.0 {
            Repr::Static(s) => out.extend_from_slice(s.as_bytes()),
            Repr::Shared(s) => out.extend_from_slice(s.as_bytes()),
            Repr::Letters { rng, len } => push_letters(&mut rng.clone(), *len as usize, out),
        }
    }

    /// `f` of the text as a `&str`: borrowed when stored, drawn into a
    /// stack buffer when lazy letters of at most 256 bytes, else into a
    /// `String`.
    pub fn with_str<R>(&self, f: impl FnOnce(&str) -> R) -> R {
        if let Some(s) = self.as_stored() {
            return f(s);
        }
        let len = self.len();
        if len <= STACK_TEXT {
            let mut buf = [0u8; STACK_TEXT];
            // Letters are drawn 8 at a time into `buf`.
            let Repr::Letters { rng, .. } = &self.0 else {
                unreachable!("not stored")
            };
            let mut rng = rng.clone();
            let mut at = 0;
            while at < len {
                let k = (len - at).min(8);
                buf[at..at + k].copy_from_slice(&eight_letters(rng.next_u64())[..k]);
                at += k;
            }
            // SAFETY: `buf[..len]` holds only ASCII lowercase letters
            // (`eight_letters`), which are valid UTF-8.
            f(unsafe { std::str::from_utf8_unchecked(&buf[..len]) })
        } else {
            f(&self.clone().into_string())
        }
    }

    /// The text as a new `String` of exactly its length (one allocation,
    /// none for an empty text).
    pub fn into_string(self) -> String {
        if let Some(s) = self.as_stored() {
            return s.to_owned();
        }
        let mut v = Vec::with_capacity(self.len());
        self.write_to(&mut v);
        // SAFETY: `write_to` of lazy letters writes ASCII letters only
        // (`eight_letters`), valid UTF-8.
        unsafe { String::from_utf8_unchecked(v) }
    }
}

/// The first 8 base-26 digits of the fraction `x / 2^64` as letters
/// `a..=z`: digit `i` is `⌊x · 26^(i+1) / 2^64⌋ mod 26`, what multiplying
/// the fraction by 26 and taking the integer part 8 times over gives.
/// Taken two at a time: the integer part of the fraction times `26² = 676`
/// is `26 · d_i + d_(i+1)` (exactly: the fraction's `x · 26` splits into
/// `d_i · 2^64` and the next fraction), looked up in [`PAIRS`]; 4
/// multiplications for 8 letters.
#[inline]
pub(crate) fn eight_letters(x: u64) -> [u8; 8] {
    let mut f = x;
    let mut out = [0u8; 8];
    for pair in out.chunks_exact_mut(2) {
        let t = f as u128 * 676;
        // `t >> 64 < 676`: the mask only spares a bounds check.
        pair.copy_from_slice(&PAIRS[(t >> 64) as usize & (PAIRS.len() - 1)]);
        f = t as u64;
    }
    out
}

/// `PAIRS[26 · a + b] = [b'a' + a, b'a' + b]` for `a, b < 26` (the rest
/// unused; 1024 entries so that a mask bounds the index).
static PAIRS: [[u8; 2]; 1024] = {
    let mut p = [[0u8; 2]; 1024];
    let mut i = 0;
    while i < 676 {
        p[i] = [b'a' + (i / 26) as u8, b'a' + (i % 26) as u8];
        i += 1;
    }
    p
};

/// Appends `len` lowercase letters drawn from `rng` to `out` (Beam's
/// `nextExactString`): 8 letters per 64 random bits, the last draw's
/// leading ones for a remainder.
pub(crate) fn push_letters(rng: &mut WyRand, len: usize, out: &mut Vec<u8>) {
    out.reserve(len);
    let start = out.len();
    let spare = &mut out.spare_capacity_mut()[..len];
    let mut chunks = spare.chunks_exact_mut(8);
    for c in &mut chunks {
        // Whole words: a fixed-size copy, no `memcpy` call.
        let w = eight_letters(rng.next_u64());
        for (d, s) in c.iter_mut().zip(w) {
            d.write(s);
        }
    }
    let rest = chunks.into_remainder();
    if !rest.is_empty() {
        let w = eight_letters(rng.next_u64());
        for (d, s) in rest.iter_mut().zip(w) {
            d.write(s);
        }
    }
    // SAFETY: the `len` bytes after `start` were all written above (the
    // chunks and the remainder cover `spare`, which is `len` long), and
    // `reserve` made room for them.
    unsafe { out.set_len(start + len) };
}

impl Default for Text {
    /// The empty text.
    fn default() -> Text {
        Text::from_static("")
    }
}

impl From<String> for Text {
    fn from(s: String) -> Text {
        if s.is_empty() {
            return Text::default();
        }
        Text(Repr::Shared(Arc::from(s)))
    }
}

impl From<&str> for Text {
    fn from(s: &str) -> Text {
        if s.is_empty() {
            return Text::default();
        }
        Text(Repr::Shared(Arc::from(s)))
    }
}

impl From<Arc<str>> for Text {
    fn from(s: Arc<str>) -> Text {
        Text(Repr::Shared(s))
    }
}

impl From<Text> for String {
    fn from(t: Text) -> String {
        t.into_string()
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Repr::Static(s) => f.write_str(s),
            Repr::Shared(s) => f.write_str(s),
            Repr::Letters { rng, len } => {
                let mut rng = rng.clone();
                let mut left = *len as usize;
                while left > 0 {
                    let k = left.min(8);
                    let letters = eight_letters(rng.next_u64());
                    // Letters are ASCII.
                    f.write_str(std::str::from_utf8(&letters[..k]).expect("ASCII"))?;
                    left -= k;
                }
                Ok(())
            }
        }
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.with_str(|s| fmt::Debug::fmt(s, f))
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Text) -> bool {
        if self.len() != other.len() {
            return false;
        }
        self.with_str(|a| other.with_str(|b| a == b))
    }
}

impl Eq for Text {}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        self.len() == other.len() && self.with_str(|s| s == other)
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        self == *other
    }
}

impl PartialOrd for Text {
    fn partial_cmp(&self, other: &Text) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Text {
    fn cmp(&self, other: &Text) -> std::cmp::Ordering {
        self.with_str(|a| other.with_str(|b| a.cmp(b)))
    }
}

impl Hash for Text {
    /// As the `str` of the characters.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.with_str(|s| s.hash(state))
    }
}

impl serde::Serialize for Text {
    /// As a string.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.with_str(|t| s.serialize_str(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::hash_map::DefaultHasher;

    fn hash_of<T: Hash + ?Sized>(t: &T) -> u64 {
        let mut h = DefaultHasher::new();
        t.hash(&mut h);
        h.finish()
    }

    /// The letters of `Text::letters(WyRand::new(seed), len)`, drawn one
    /// digit at a time (multiply the fraction by 26, take the integer
    /// part).
    fn sequential_letters(seed: u64, len: usize) -> String {
        let mut rng = WyRand::new(seed);
        let mut want = String::new();
        while want.len() < len {
            let mut x = rng.next_u64();
            for _ in 0..(len - want.len()).min(8) {
                let t = x as u128 * 26;
                want.push((b'a' + (t >> 64) as u8) as char);
                x = t as u64;
            }
        }
        want
    }

    #[test]
    fn lazy_letters_read_the_same_every_way() {
        for len in [0, 1, 7, 8, 9, 16, 67, 255, 256, 257, 1000] {
            let want = sequential_letters(len as u64 + 3, len);
            let t = Text::letters(WyRand::new(len as u64 + 3), len);
            assert_eq!(t.len(), len);
            assert_eq!(t.is_empty(), len == 0);
            assert_eq!(t.as_stored(), None);
            assert_eq!(t.to_string(), want, "{len}");
            assert_eq!(t.to_cow(), want.as_str());
            assert_eq!(t.with_str(str::to_owned), want);
            let mut v = b"x".to_vec();
            t.write_to(&mut v);
            assert_eq!(&v[1..], want.as_bytes());
            assert_eq!(format!("{t:?}"), format!("{want:?}"));
            // Reading does not consume: the same again, and in a clone.
            assert_eq!(t.clone().into_string(), want);
            // Equal to the stored text of the same letters, by every trait.
            let s = Text::from(want.as_str());
            assert_eq!(s.as_stored(), Some(want.as_str()));
            assert_eq!(t, s);
            assert_eq!(s, t);
            assert_eq!(t, *want.as_str());
            assert_eq!(t.cmp(&s), std::cmp::Ordering::Equal);
            assert_eq!(hash_of(&t), hash_of(want.as_str()));
            assert_eq!(hash_of(&t), hash_of(&s));
            assert_eq!(serde_json::to_string(&t).unwrap(), format!("{want:?}"));
        }
        let a = Text::letters(WyRand::new(1), 40);
        let b = Text::letters(WyRand::new(2), 40);
        assert_ne!(a, b);
        assert_ne!(a, Text::letters(WyRand::new(1), 39));
        assert!(a.with_str(|s| s.bytes().all(|c| c.is_ascii_lowercase())));
    }

    #[test]
    fn shared_and_static_text() {
        let s = Text::from(String::from("https://x/y"));
        let c = s.clone();
        assert_eq!(c.as_stored(), Some("https://x/y"));
        assert!(matches!(c.to_cow(), Cow::Borrowed("https://x/y")));
        assert_eq!(Text::from_static("Apple"), Text::from("Apple"));
        assert_eq!(Text::from(Arc::<str>::from("Apple")), "Apple");
        assert_eq!(String::from(Text::from("Baidu")), "Baidu");
        assert_eq!(Text::from(""), Text::default());
        assert!(Text::default().is_empty());
        let (a, b) = (Text::from("a"), Text::from(String::from("b")));
        assert_eq!(a.cmp(&b), std::cmp::Ordering::Less);
        assert_ne!(Text::from("ab"), Text::from("abc"));
        // Non-ASCII text is kept as is.
        let u = Text::from("Zürich");
        assert_eq!((u.len(), u.to_string()), (7, "Zürich".to_owned()));
        assert_eq!(std::mem::size_of::<Text>(), 24);
    }
}
