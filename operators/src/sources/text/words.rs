//! Splitting a line into lower-cased words (see the module docs of
//! [`super`] for the definition of a word).

use super::word::Word;
use std::sync::Arc;
use unicode_segmentation::{UnicodeSegmentation, UnicodeWords};

/// Splits lines into lower-cased words, reusing one buffer for the words
/// that need lower-casing, so a long run allocates only when a word is longer
/// than every word lowered before it.
///
/// A word already in lower-case ASCII is handed out as a slice of the line,
/// without a copy.
///
/// ```
/// use air_operators::sources::text::WordSplitter;
/// let mut words = Vec::new();
/// let mut splitter = WordSplitter::new();
/// splitter.for_each_word("Don't panic: 42 ΟΔΟΣ!", |w| words.push(w.to_owned()));
/// assert_eq!(words, ["don't", "panic", "42", "οδος"]);
/// ```
#[derive(Clone, Debug, Default)]
pub struct WordSplitter {
    /// The lower-cased copy of the current word, when it needed one.
    buf: String,
}

impl WordSplitter {
    /// A splitter with an empty buffer (no allocation until a word needs
    /// lower-casing).
    pub fn new() -> WordSplitter {
        WordSplitter::default()
    }

    /// Calls `f` with each word of `line`, lower-cased, in line order.
    #[inline]
    pub fn for_each_word(&mut self, line: &str, mut f: impl FnMut(&str)) {
        if line.is_ascii() {
            // Each word is ASCII too: skip the per-word checks.
            for word in line.unicode_words() {
                f(lower_ascii(word, &mut self.buf));
            }
        } else {
            for word in line.unicode_words() {
                f(lower(word, &mut self.buf));
            }
        }
    }
}

/// The lower-cased words of an owned line, as [`Word`]s, in line order: an
/// iterator that owns its line (a share of it: e.g. a
/// [`super::TextLine`]'s text, to return from a `flat_map` of the graph
/// API), splitting it as it goes (no list of words is built).
///
/// ```
/// use air_operators::sources::text::Words;
/// let w: Vec<String> = Words::of("Don't panic: 42 ΟΔΟΣ!")
///     .map(|w| w.as_str().to_owned())
///     .collect();
/// assert_eq!(w, ["don't", "panic", "42", "οδος"]);
/// ```
pub struct Words {
    /// The words of `line`'s text, borrowing its heap buffer (see
    /// [`Words::of`]). Declared before `line`: dropped before it.
    words: UnicodeWords<'static>,
    /// The lowered copy of the current word, when it needs one.
    buf: String,
    ascii: bool,
    /// Never moved out of while `words` lives.
    line: Arc<str>,
}

impl Words {
    /// The words of `line`.
    pub fn of(line: impl Into<Arc<str>>) -> Words {
        let line: Arc<str> = line.into();
        // SAFETY: `text` points into the shared allocation of `line`, which
        // keeps its address and bytes (a `str` behind an `Arc` is
        // immutable) for as long as this `Words` holds `line`: moving an
        // `Arc` moves its pointer, not the allocation; `line` is private;
        // and `words`, the only holder of `text`, is dropped before `line`
        // (field order). The `'static` never escapes: `next` hands out
        // `Word`s, which own copies of the bytes.
        let text: &'static str = unsafe { &*(&*line as *const str) };
        Words {
            words: text.unicode_words(),
            buf: String::new(),
            ascii: text.is_ascii(),
            line,
        }
    }

    /// The line the words come from.
    pub fn line(&self) -> &str {
        &self.line
    }
}

impl Iterator for Words {
    type Item = Word;

    #[inline]
    fn next(&mut self) -> Option<Word> {
        let w = self.words.next()?;
        Some(Word::new(if self.ascii {
            lower_ascii(w, &mut self.buf)
        } else {
            lower(w, &mut self.buf)
        }))
    }
}

impl std::fmt::Debug for Words {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Words").field("line", &self.line).finish()
    }
}

/// Calls `f` with each lower-cased word of `line` (see the module docs of
/// [`super`]). Convenience for one line; in a loop use a [`WordSplitter`],
/// which keeps its buffer between lines.
///
/// ```
/// let mut words = Vec::new();
/// air_operators::sources::text::for_each_word("Hello, world! Hello...world?", |w| {
///     words.push(w.to_owned())
/// });
/// assert_eq!(words, ["hello", "world", "hello", "world"]);
/// ```
pub fn for_each_word(line: &str, f: impl FnMut(&str)) {
    WordSplitter::new().for_each_word(line, f)
}

/// `word` (ASCII) lower-cased: itself if it has no upper-case letter, else
/// a lowered copy in `buf`.
#[inline]
fn lower_ascii<'a>(word: &'a str, buf: &'a mut String) -> &'a str {
    if !word.bytes().any(|b| b.is_ascii_uppercase()) {
        return word;
    }
    buf.clear();
    buf.push_str(word);
    buf.make_ascii_lowercase();
    buf
}

/// `word` lower-cased exactly as [`str::to_lowercase`] does, without
/// allocating unless `buf` must grow.
#[inline]
fn lower<'a>(word: &'a str, buf: &'a mut String) -> &'a str {
    if word.is_ascii() {
        return lower_ascii(word, buf);
    }
    buf.clear();
    if word.contains('Σ') {
        // Capital sigma lowers to `ς` at the end of a word and `σ` elsewhere;
        // `str::to_lowercase` knows the rule, `char::to_lowercase` does not.
        buf.push_str(&word.to_lowercase());
    } else {
        buf.extend(word.chars().flat_map(char::to_lowercase));
    }
    buf
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        let mut out = Vec::new();
        for_each_word(line, |w| out.push(w.to_owned()));
        out
    }

    #[test]
    fn lowering_matches_std() {
        for line in [
            "ΣΟΦΟΣ ΟΔΟΣ Σ ΑΣ",
            "İstanbul ǅemal ﬁne Straße STRASSE",
            "MiXeD ascii WORDS",
            "ÀÉÎÕÜ àéîõü",
        ] {
            let expect: Vec<String> = line.unicode_words().map(str::to_lowercase).collect();
            assert_eq!(words(line), expect, "{line}");
        }
    }

    #[test]
    fn words_of_an_owned_line_are_the_splitters_words() {
        for line in [
            "ΣΟΦΟΣ ΟΔΟΣ Σ ΑΣ",
            "İstanbul ǅemal ﬁne Straße STRASSE",
            "MiXeD ascii WORDS, don't 3.14 x86_64",
            "ÀÉÎÕÜ àéîõü 東京タワー",
            "",
            "-- ... --",
        ] {
            let got: Vec<String> = Words::of(line).map(|w| w.as_str().to_owned()).collect();
            assert_eq!(got, words(line), "{line}");
        }
    }

    #[test]
    fn ascii_lower_words_are_not_copied() {
        let line = "already lower";
        let mut splitter = WordSplitter::new();
        let mut ptrs = Vec::new();
        splitter.for_each_word(line, |w| ptrs.push(w.as_ptr()));
        assert_eq!(ptrs, [line.as_ptr(), line[8..].as_ptr()]);
        assert_eq!(splitter.buf.capacity(), 0);
    }
}
