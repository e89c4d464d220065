//! Text input for word count: lines of UTF-8 files, split into words.
//!
//! # What a word is
//!
//! A line is split at the word boundaries of Unicode's default word
//! segmentation (UAX #29, "Unicode Text Segmentation", as implemented by the
//! `unicode-segmentation` crate's `unicode_words`), and a **word** is a
//! segment that holds at least one letter or digit (a character with the
//! `Alphabetic` property or of general category `Number`). Whitespace and
//! punctuation separate words and are never part of one, except as UAX #29
//! joins them: a `'` (or `’`), `.` or `:` between two letters stays inside
//! the word (`don't`, `rock'n'roll`, `e.g` from `e.g.`, `a:b`), and a `.`,
//! `,`, `;` or `'` between two digits too (`3.14`, `1,000`, `1.2.3`); letters,
//! digits and `_` run together (`v2`, `x86_64`, `__init__`). A segment of
//! only punctuation, symbols or emoji (`--`, `_`, `😀`, `€`) is not a word.
//! Each word is then lower-cased with full Unicode lower-casing,
//! [`str::to_lowercase`] (final sigma included: `ΟΔΟΣ` → `οδος`).
//!
//! What follows from that, all checked in `operators/tests/text.rs`:
//!
//! - `Hello, world! Hello...world?` → `hello` ×2, `world` ×2; `'quoted'` →
//!   `quoted`; `foo-bar` → `foo`, `bar`; `http://example.com/x` → `http`,
//!   `example.com`, `x`.
//! - Lower-casing is not case folding: `ß` stays `ß`, so `Straße straße
//!   STRASSE` counts `straße` ×2 and `strasse` ×1; `İ` becomes `i̇` (two
//!   code points).
//! - No normalization: precomposed `café` and decomposed `cafe\u{301}` are
//!   different words.
//! - Scripts with spaces (Latin, Greek, Cyrillic, Hangul, …) give the words
//!   one expects. Chinese and Japanese have no spaces and UAX #29 has no
//!   dictionary: every Han ideograph and every Hiragana character is a word
//!   of its own, while a run of Katakana stays one word, so `東京タワー`
//!   gives `東`, `京`, `タワー`. Thai (and the other scripts UAX #29 leaves
//!   to dictionaries) is cut into single letters with their marks.
//!
//! # Reading
//!
//! [`TextReader`] reads the whole lines of a file or of one byte range of it
//! (`\n` ends a line, `\r\n` reads like `\n`, a last line without `\n`
//! counts), validating UTF-8 with SIMD; invalid UTF-8 is an error naming the
//! file, the byte offset of the first invalid byte and the line
//! (`FILE: invalid UTF-8 at byte OFFSET (line L)`), or, with
//! [`TextReaderOptions::lossy`], is replaced by U+FFFD and counted. Large
//! files are shared between workers by byte range: [`split_ranges`] (one
//! file) or [`split_files`] (several), and a line belongs to the range that
//! holds its first byte.
//!
//! # Counting
//!
//! [`WordSplitter`] / [`for_each_word`] give the words of a line;
//! [`count_words_into`] and [`count_words_range`] count them into a map (a
//! worker's share); [`count_words_sequential`] is the single-threaded
//! reference; [`sort_counts`] puts rows in output order (count descending,
//! then word ascending by byte order) and [`write_csv`] writes `word,count`.
//!
//! # In a graph
//!
//! [`TextSource`] gives a worker's lines ([`TextLine`]: the text and its
//! arrival time) to a graph of the graph API, [`Words`] the words of an
//! owned line, and [`Word`] is a word as a record and a key (short words
//! inline, no allocation): `air run wordcount` is `TextSource` →
//! `flat_map` to words → `key_by` word → window → `Count`.
//!
//! ```
//! use air_operators::sources::text::*;
//! let dir = std::env::temp_dir().join(format!("air-text-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let path = dir.join("a.txt");
//! std::fs::write(&path, "The cat\r\n\nthe CAT, the end").unwrap();
//! let rows = count_words_sequential(&[path.clone()], false).unwrap();
//! assert_eq!(rows, [("the".into(), 3), ("cat".into(), 2), ("end".into(), 1)]);
//! let mut csv = Vec::new();
//! write_csv(&mut csv, &rows).unwrap();
//! assert_eq!(csv, b"word,count\nthe,3\ncat,2\nend,1\n");
//! std::fs::remove_dir_all(&dir).unwrap();
//! ```

mod count;
mod live;
mod reader;
mod source;
mod word;
mod words;

pub use super::ysb::split_ranges;
pub use count::{
    count_words_into, count_words_range, count_words_sequential, sort_counts, split_files,
    write_csv, FileRange,
};
pub use live::LiveTextReader;
pub use reader::{
    Line, LineNumbers, TextError, TextErrorKind, TextReader, TextReaderOptions,
    DEFAULT_BUFFER_SIZE, DEFAULT_MAX_LINE_LEN,
};
pub use source::{OpenLiveText, TextLine, TextSource};
pub use word::{Word, INLINE_WORD_BYTES};
pub use words::{for_each_word, WordSplitter, Words};
