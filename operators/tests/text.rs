//! Tests of the word-count text layer: lines, words, byte ranges, UTF-8
//! errors, the reference count and its CSV.

use std::fs;
use std::path::{Path, PathBuf};

use air_operators::sources::text::*;
use rustc_hash::FxHashMap;

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    fs::write(&p, bytes).unwrap();
    p
}

/// Every line of `range` as (text, number, offset).
fn lines_of(
    path: &Path,
    range: std::ops::Range<u64>,
    opts: TextReaderOptions,
) -> Vec<(String, u64, u64)> {
    let mut r = TextReader::open_range(path, range, opts).unwrap();
    let mut out = Vec::new();
    while let Some(l) = r.next_line().unwrap() {
        out.push((l.text.to_owned(), l.number, l.offset));
    }
    out
}

fn all_lines(path: &Path) -> Vec<(String, u64, u64)> {
    lines_of(path, 0..u64::MAX, TextReaderOptions::default())
}

fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_word(line, |w| out.push(w.to_owned()));
    out
}

/// The word count of one string, via a file.
fn count_text(text: &str) -> Vec<(String, u64)> {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "t.txt", text.as_bytes());
    count_words_sequential(&[p], false).unwrap()
}

fn rows(pairs: &[(&str, u64)]) -> Vec<(String, u64)> {
    pairs.iter().map(|&(w, c)| (w.to_owned(), c)).collect()
}

fn line(text: &str, number: u64, offset: u64) -> (String, u64, u64) {
    (text.to_owned(), number, offset)
}

// ---------------------------------------------------------------- lines

#[test]
fn file_without_final_newline() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "a.txt", b"one two\nthree");
    assert_eq!(all_lines(&p), [line("one two", 1, 0), line("three", 2, 8)]);
    assert_eq!(
        count_words_sequential(&[p], false).unwrap(),
        rows(&[("one", 1), ("three", 1), ("two", 1)])
    );
}

#[test]
fn empty_lines_are_lines_without_words() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "a.txt", b"\n\nfoo\n\n\nbar foo\n\n");
    assert_eq!(
        all_lines(&p),
        [
            line("", 1, 0),
            line("", 2, 1),
            line("foo", 3, 2),
            line("", 4, 6),
            line("", 5, 7),
            line("bar foo", 6, 8),
            line("", 7, 16),
        ]
    );
    assert_eq!(
        count_words_sequential(&[p], false).unwrap(),
        rows(&[("foo", 2), ("bar", 1)])
    );
}

#[test]
fn crlf_lines_drop_the_cr() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "a.txt", b"a b\r\n\r\nc\r\nlast\r");
    assert_eq!(
        all_lines(&p),
        [
            line("a b", 1, 0),
            line("", 2, 5),
            line("c", 3, 7),
            line("last", 4, 10)
        ]
    );
    // Only one `\r` before the `\n` is dropped; a lone `\r` inside a line stays.
    let q = write(dir.path(), "b.txt", b"x\ry\r\r\n");
    assert_eq!(all_lines(&q), [line("x\ry\r", 1, 0)]);
    assert_eq!(words("x\ry\r"), ["x", "y"]);
}

#[test]
fn empty_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "e.txt", b"");
    assert!(all_lines(&p).is_empty());
    let counts = count_words_sequential(std::slice::from_ref(&p), false).unwrap();
    assert!(counts.is_empty());
    let mut csv = Vec::new();
    write_csv(&mut csv, &counts).unwrap();
    assert_eq!(csv, b"word,count\n");
    for parts in 1..=3 {
        let shares = split_files(std::slice::from_ref(&p), parts).unwrap();
        assert!(shares.iter().all(Vec::is_empty), "{shares:?}");
    }
}

#[test]
fn file_of_only_newlines() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "n.txt", b"\n\n\n");
    assert_eq!(
        all_lines(&p),
        [line("", 1, 0), line("", 2, 1), line("", 3, 2)]
    );
    assert!(count_words_sequential(&[p], false).unwrap().is_empty());
}

#[test]
fn reader_counts_and_position() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "a.txt", b"ab\ncd\n");
    let mut r = TextReader::open(&p, TextReaderOptions::default()).unwrap();
    assert_eq!(r.path(), p);
    assert_eq!(r.next_line().unwrap().unwrap().text, "ab");
    assert_eq!(r.position(), 3);
    assert_eq!(r.next_line().unwrap().unwrap().text, "cd");
    assert!(r.next_line().unwrap().is_none());
    assert!(r.next_line().unwrap().is_none());
    assert_eq!((r.lines(), r.replaced_lines(), r.position()), (2, 0, 6));
}

// ---------------------------------------------------------------- words

#[test]
fn punctuation_separates_words() {
    assert_eq!(
        words("Hello, world! Hello...world?"),
        ["hello", "world", "hello", "world"]
    );
    assert_eq!(
        count_text("Hello, world! Hello...world?"),
        rows(&[("hello", 2), ("world", 2)])
    );
    assert_eq!(
        words("(\"quoted\") 'single' -- foo-bar; a:b e.g. x."),
        ["quoted", "single", "foo", "bar", "a:b", "e.g", "x"]
    );
    assert_eq!(
        words("http://example.com/x?q=1"),
        ["http", "example.com", "x", "q", "1"]
    );
    // Segments of only punctuation, symbols or emoji are not words.
    assert!(words("... -- _ 😀 € !? ").is_empty());
    assert_eq!(words("#tag @user €5 50%"), ["tag", "user", "5", "50"]);
}

#[test]
fn apostrophes_stay_inside_words() {
    assert_eq!(
        words("don't Don't DON'T can’t rock'n'roll"),
        ["don't", "don't", "don't", "can’t", "rock'n'roll"]
    );
    assert_eq!(
        count_text("don't stop, don't"),
        rows(&[("don't", 2), ("stop", 1)])
    );
    // At the edges of a word an apostrophe is punctuation.
    assert_eq!(words("'tis the dogs' bone"), ["tis", "the", "dogs", "bone"]);
}

#[test]
fn numbers_and_identifiers() {
    // Digits are word characters; `.`, `,`, `;` and `'` between digits join
    // them, `_` joins anything.
    assert_eq!(
        words("v2 V2 3.14 3,14 1,000 1.2.3 42. x86_64 __init__ -7"),
        ["v2", "v2", "3.14", "3,14", "1,000", "1.2.3", "42", "x86_64", "__init__", "7"]
    );
    assert_eq!(words("3.14."), ["3.14"]);
}

#[test]
fn unicode_lower_casing() {
    // Full lower-casing, not case folding: `ß` stays, `SS` lowers to `ss`.
    assert_eq!(
        count_text("Straße STRASSE straße"),
        rows(&[("straße", 2), ("strasse", 1)])
    );
    assert_eq!(
        words("naïve NAÏVE café Café"),
        ["naïve", "naïve", "café", "café"]
    );
    // No normalization: decomposed `e` + U+0301 is another word.
    assert_eq!(
        count_text("caf\u{e9} cafe\u{301}"),
        rows(&[("cafe\u{301}", 1), ("caf\u{e9}", 1)])
    );
    // Greek with final sigma, Cyrillic.
    assert_eq!(
        words("ΟΔΟΣ Σοφία ΣΟΦΟΣ καλημέρα"),
        ["οδος", "σοφία", "σοφος", "καλημέρα"]
    );
    assert_eq!(
        count_text("Привет, МИР! мир"),
        rows(&[("мир", 2), ("привет", 1)])
    );
    assert_eq!(words("İstanbul"), ["i\u{307}stanbul"]);
    assert_eq!(words("안녕하세요 세계"), ["안녕하세요", "세계"]);
}

#[test]
fn cjk_per_uax29() {
    // Each Han ideograph and each Hiragana character is its own word; a
    // Katakana run stays one word.
    assert_eq!(words("東京タワー"), ["東", "京", "タワー"]);
    assert_eq!(
        words("東京タワーに行く。"),
        ["東", "京", "タワー", "に", "行", "く"]
    );
}

#[test]
fn word_splitter_matches_to_lowercase() {
    let mut s = WordSplitter::new();
    for text in ["ÀB Ωmega ΣΣ ΑΣ", "MIXED Ascii", "ǅemal ﬁne"] {
        let mut got = Vec::new();
        s.for_each_word(text, |w| got.push(w.to_owned()));
        let mut want = Vec::new();
        for_each_word(text, |w| want.push(w.to_owned()));
        assert_eq!(got, want);
        let by_std: Vec<String> = words(text).iter().map(|w| w.to_lowercase()).collect();
        assert_eq!(got, by_std);
    }
}

// ---------------------------------------------------------------- order and CSV

#[test]
fn rows_sorted_by_count_descending_then_word() {
    let mut m = FxHashMap::default();
    for (w, c) in [("b", 2), ("a", 2), ("é", 5), ("z", 1), ("e", 5), ("B", 2)] {
        m.insert(w.to_owned(), c);
    }
    assert_eq!(
        sort_counts(m),
        rows(&[("e", 5), ("é", 5), ("B", 2), ("a", 2), ("b", 2), ("z", 1)])
    );
    assert_eq!(
        count_text("b a c b a b"),
        rows(&[("b", 3), ("a", 2), ("c", 1)])
    );
}

#[test]
fn csv_quotes_words_with_commas_or_quotes() {
    let mut csv = Vec::new();
    write_csv(&mut csv, &rows(&[("the", 3), ("1,000", 2), ("צה\"ל", 1)])).unwrap();
    assert_eq!(
        String::from_utf8(csv).unwrap(),
        "word,count\nthe,3\n\"1,000\",2\n\"צה\"\"ל\",1\n"
    );
    // UAX #29 keeps a `"` between Hebrew letters inside the word.
    assert_eq!(words("צה\"ל"), ["צה\"ל"]);
}

// ---------------------------------------------------------------- errors

#[test]
fn invalid_utf8_names_file_byte_and_line() {
    let dir = tempfile::tempdir().unwrap();
    // Line 3 starts at byte 9; its bad byte 0xFF is 7 bytes in: byte 16.
    let p = write(
        dir.path(),
        "bad.txt",
        b"ok line\n\nsecond \xFF bad\nafter\n",
    );
    let mut r = TextReader::open(&p, TextReaderOptions::default()).unwrap();
    assert_eq!(r.next_line().unwrap().unwrap().text, "ok line");
    assert_eq!(r.next_line().unwrap().unwrap().text, "");
    let e = r.next_line().unwrap_err();
    assert!(matches!(e.kind, TextErrorKind::InvalidUtf8));
    assert_eq!((e.line, e.offset), (Some(3), Some(16)));
    assert_eq!(
        e.to_string(),
        format!("{}: invalid UTF-8 at byte 16 (line 3)", p.display())
    );
    assert!(r.next_line().unwrap().is_none(), "an error ends the reader");

    let e = count_words_sequential(std::slice::from_ref(&p), false).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("{}: invalid UTF-8 at byte 16 (line 3)", p.display())
    );

    // A truncated sequence before the `\n`: the offset is its first byte.
    let q = write(
        dir.path(),
        "trunc.txt",
        "é\ncaf\u{e9}".as_bytes().split_last().unwrap().1,
    );
    let e = count_words_sequential(std::slice::from_ref(&q), false).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("{}: invalid UTF-8 at byte 6 (line 2)", q.display())
    );
}

#[test]
fn invalid_utf8_in_a_range_and_past_a_buffer() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = Vec::new();
    for i in 0..5000 {
        bytes.extend_from_slice(format!("line {i} ünïcode\n").as_bytes());
    }
    let line_start = bytes.len() as u64;
    bytes.extend_from_slice(b"abc \xC3( def\n");
    bytes.extend_from_slice(b"tail\n");
    let p = write(dir.path(), "bad.txt", &bytes);
    let want_line = 5001;
    let want = format!(
        "{}: invalid UTF-8 at byte {} (line {want_line})",
        p.display(),
        line_start + 4
    );
    for line_numbers in [LineNumbers::FromFileStart, LineNumbers::FromRangeStart] {
        for buffer_size in [7, 4096, 1 << 20] {
            let opts = TextReaderOptions {
                buffer_size,
                line_numbers,
                ..Default::default()
            };
            let mut r = TextReader::open_range(&p, line_start - 1000..u64::MAX, opts).unwrap();
            let e = loop {
                match r.next_line() {
                    Ok(Some(_)) => {}
                    Ok(None) => panic!("no error"),
                    Err(e) => break e,
                }
            };
            assert_eq!(e.to_string(), want, "{opts:?}");
        }
    }
}

#[test]
fn lossy_replaces_and_counts() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "l.txt", b"caf\xE9 ok\nok\r\n\xFF\xFEx\r\n");
    let opts = TextReaderOptions {
        lossy: true,
        ..Default::default()
    };
    let mut r = TextReader::open(&p, opts).unwrap();
    let mut got = Vec::new();
    while let Some(l) = r.next_line().unwrap() {
        got.push((l.text.to_owned(), l.number, l.offset));
    }
    assert_eq!(
        got,
        [
            line("caf\u{FFFD} ok", 1, 0),
            line("ok", 2, 8),
            line("\u{FFFD}\u{FFFD}x", 3, 12)
        ]
    );
    assert_eq!(r.replaced_lines(), 2);
    // U+FFFD is not a letter: it separates words.
    assert_eq!(
        count_words_sequential(std::slice::from_ref(&p), true).unwrap(),
        rows(&[("ok", 2), ("caf", 1), ("x", 1)])
    );
    let mut counts = FxHashMap::default();
    assert_eq!(
        count_words_range(&p, 0..u64::MAX, opts, &mut counts).unwrap(),
        (4, 2)
    );
    assert!(count_words_sequential(&[p], false).is_err());
}

#[test]
fn line_too_long() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "long.txt", b"short\n0123456789\nx\n");
    for (text, buffer_size) in [("ends", 3), ("ends", 1 << 20)] {
        let opts = TextReaderOptions {
            max_line_len: 9,
            buffer_size,
            ..Default::default()
        };
        let mut r = TextReader::open(&p, opts).unwrap();
        assert_eq!(r.next_line().unwrap().unwrap().text, "short", "{text}");
        let e = r.next_line().unwrap_err();
        assert!(matches!(e.kind, TextErrorKind::LineTooLong { max: 9 }));
        assert_eq!(
            e.to_string(),
            format!(
                "{}: line 2 is longer than the limit of 9 bytes (line starts at byte 6)",
                p.display()
            )
        );
        assert!(r.next_line().unwrap().is_none());
    }
    // Exactly the limit is fine, also for a last line without `\n`.
    let q = write(dir.path(), "edge.txt", b"012345678\n012345678");
    let opts = TextReaderOptions {
        max_line_len: 9,
        buffer_size: 4,
        ..Default::default()
    };
    assert_eq!(lines_of(&q, 0..u64::MAX, opts).len(), 2);
}

#[test]
fn missing_file() {
    let e =
        count_words_sequential(&[PathBuf::from("/nonexistent/air-text.txt")], false).unwrap_err();
    assert!(matches!(e.kind, TextErrorKind::Open(_)));
    assert!(
        e.to_string()
            .starts_with("/nonexistent/air-text.txt: cannot open: "),
        "{e}"
    );
}

// ---------------------------------------------------------------- ranges

/// A deterministic pseudo-random stream (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const TOKENS: &[&str] = &[
    "the",
    "The",
    "a",
    "cat",
    "CAT",
    "don't",
    "x86_64",
    "3.14",
    "1,000",
    "straße",
    "STRASSE",
    "café",
    "naïve",
    "ΟΔΟΣ",
    "σοφία",
    "Москва",
    "мир",
    "東京タワー",
    "日本語",
    "안녕",
    "😀",
    "€5",
    "é",
    "ü",
    "—",
    "…",
];
const SEPS: &[&str] = &[" ", "  ", ", ", "... ", "\t", "! ", " — ", "\u{a0}"];

/// About `lines` random lines of random length, mixing multi-byte tokens,
/// empty lines, CRLF endings, and no final newline.
fn random_text(seed: u64, lines: usize) -> Vec<u8> {
    let mut rng = Rng(seed);
    let mut out = String::new();
    for i in 0..lines {
        let n = match rng.below(10) {
            0 => 0,
            1..=7 => rng.below(8) as usize,
            _ => rng.below(60) as usize,
        };
        for k in 0..n {
            if k > 0 {
                out.push_str(SEPS[rng.below(SEPS.len() as u64) as usize]);
            }
            out.push_str(TOKENS[rng.below(TOKENS.len() as u64) as usize]);
        }
        if i + 1 < lines {
            out.push_str(if rng.below(5) == 0 { "\r\n" } else { "\n" });
        }
    }
    out.into_bytes()
}

#[test]
fn ranges_give_the_same_lines_and_counts_as_sequential() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = random_text(7, 100_000);
    let p = write(dir.path(), "big.txt", &bytes);
    let whole = all_lines(&p);
    assert_eq!(whole.len(), 100_000);
    let reference = count_words_sequential(std::slice::from_ref(&p), false).unwrap();
    let total: u64 = reference.iter().map(|r| r.1).sum();
    assert!(total > 200_000, "{total}");
    // The even cuts of `split_ranges`, and the same cuts moved forward into
    // the middle of the next multi-byte character.
    let in_char = |at: u64| {
        let mut at = at as usize;
        while at > 0 && at < bytes.len() && bytes[at] & 0xC0 != 0x80 {
            at += 1;
        }
        at.min(bytes.len()) as u64
    };
    for (parts, mid_char) in (1..=5).flat_map(|p| [(p, false), (p, true)]) {
        let mut ranges = split_ranges(&p, parts).unwrap();
        if mid_char {
            for i in 1..parts {
                let cut = in_char(ranges[i].start);
                assert!(cut < bytes.len() as u64 && !text_is_boundary(&bytes, cut));
                ranges[i - 1].end = cut;
                ranges[i].start = cut;
            }
        }
        let mut lines = Vec::new();
        let mut counts = FxHashMap::default();
        for (i, range) in ranges.iter().enumerate() {
            // Vary the read size across ranges.
            let opts = TextReaderOptions {
                buffer_size: [1 << 20, 4096, 1000][i % 3],
                ..Default::default()
            };
            lines.extend(lines_of(&p, range.clone(), opts));
            count_words_range(&p, range.clone(), opts, &mut counts).unwrap();
        }
        assert_eq!(lines, whole, "{parts} parts, mid_char {mid_char}");
        assert_eq!(
            sort_counts(counts),
            reference,
            "{parts} parts, mid_char {mid_char}"
        );
    }
}

/// Whether byte `at` of `bytes` starts a character (or is the end).
fn text_is_boundary(bytes: &[u8], at: u64) -> bool {
    bytes.get(at as usize).is_none_or(|b| b & 0xC0 != 0x80)
}

#[test]
fn every_cut_point_of_a_small_file() {
    // Two ranges cut at every byte, including inside multi-byte characters
    // and between `\r` and `\n`.
    let dir = tempfile::tempdir().unwrap();
    let text = "Straße\r\n東京タワー\n\nnaïve café 😀\r\n\r\nΟΔΟΣ мир\nlast ü";
    let p = write(dir.path(), "s.txt", text.as_bytes());
    let whole = all_lines(&p);
    assert_eq!(whole.len(), 7);
    let len = text.len() as u64;
    let mut in_char = 0;
    for cut in 0..=len {
        if !text.is_char_boundary(cut as usize) {
            in_char += 1;
        }
        for line_numbers in [LineNumbers::FromFileStart, LineNumbers::FromRangeStart] {
            let opts = TextReaderOptions {
                buffer_size: 5,
                line_numbers,
                ..Default::default()
            };
            let a = lines_of(&p, 0..cut, opts);
            let b = lines_of(&p, cut..len, opts);
            let got: Vec<_> = a.iter().chain(&b).map(|l| (l.0.clone(), l.2)).collect();
            let want: Vec<_> = whole.iter().map(|l| (l.0.clone(), l.2)).collect();
            assert_eq!(got, want, "cut at {cut}");
            if line_numbers == LineNumbers::FromFileStart {
                assert_eq!(
                    a.iter().chain(&b).cloned().collect::<Vec<_>>(),
                    whole,
                    "cut at {cut}"
                );
            } else if let Some(first) = b.first() {
                assert_eq!(first.1, 1, "cut at {cut}: numbered from the range");
            }
        }
    }
    assert!(in_char > 10, "{in_char}");
}

#[test]
fn split_files_shares_several_files() {
    let dir = tempfile::tempdir().unwrap();
    let paths = vec![
        write(dir.path(), "a.txt", &random_text(1, 20_000)),
        write(dir.path(), "empty.txt", b""),
        write(dir.path(), "b.txt", &random_text(2, 3)),
        write(dir.path(), "c.txt", &random_text(3, 50_000)),
    ];
    let reference = count_words_sequential(&paths, false).unwrap();
    let sizes: Vec<u64> = paths
        .iter()
        .map(|p| fs::metadata(p).unwrap().len())
        .collect();
    let total: u64 = sizes.iter().sum();
    for parts in 1..=7 {
        let shares = split_files(&paths, parts).unwrap();
        assert_eq!(shares.len(), parts);
        // Shares are within one byte of equal, and cover each file exactly.
        for share in &shares {
            let bytes: u64 = share.iter().map(|r| r.range.end - r.range.start).sum();
            assert!(bytes.abs_diff(total / parts as u64) <= 1, "{bytes}");
        }
        for (path, &size) in paths.iter().zip(&sizes) {
            let mut ranges: Vec<_> = shares
                .iter()
                .flatten()
                .filter(|r| &r.path == path)
                .map(|r| r.range.clone())
                .collect();
            ranges.sort_by_key(|r| r.start);
            let mut at = 0;
            for r in ranges {
                assert_eq!(r.start, at);
                at = r.end;
            }
            assert_eq!(at, size);
        }
        let mut counts = FxHashMap::default();
        for share in &shares {
            for r in share {
                count_words_range(
                    &r.path,
                    r.range.clone(),
                    TextReaderOptions::default(),
                    &mut counts,
                )
                .unwrap();
            }
        }
        assert_eq!(sort_counts(counts), reference, "{parts} parts");
    }
    // One file: the same cuts as `split_ranges`.
    let one = split_files(&paths[..1], 4).unwrap();
    let ranges: Vec<_> = one.iter().map(|s| s[0].range.clone()).collect();
    assert_eq!(ranges, split_ranges(&paths[0], 4).unwrap());
}

// ---------------------------------------------------------------- speed

/// Words/s of `WordSplitter` + an `FxHashMap<String, u64>` count over about
/// 100 MB of generated ASCII text, in memory (no I/O). Run with
/// `cargo test -j2 --release -p air-operators --test text -- --ignored --nocapture speed`.
#[test]
#[ignore]
fn speed_word_count_ascii() {
    const VOCAB: usize = 50_000;
    let mut rng = Rng(99);
    let vocab: Vec<String> = (0..VOCAB)
        .map(|_| {
            let len = 2 + rng.below(9) as usize;
            (0..len)
                .map(|k| {
                    let c = (b'a' + rng.below(26) as u8) as char;
                    if k == 0 && rng.below(8) == 0 {
                        c.to_ascii_uppercase()
                    } else {
                        c
                    }
                })
                .collect()
        })
        .collect();
    let mut text = String::with_capacity(105 << 20);
    while text.len() < 100 << 20 {
        let n = 1 + rng.below(15);
        for k in 0..n {
            if k > 0 {
                text.push_str([" ", " ", " ", ", ", ". "][rng.below(5) as usize]);
            }
            // Zipf-ish: small indices are much more frequent.
            let r = rng.below(VOCAB as u64) as f64 / VOCAB as f64;
            text.push_str(&vocab[((r * r * r) * VOCAB as f64) as usize]);
        }
        text.push('\n');
    }
    let mb = text.len() as f64 / 1e6;
    for round in 0..3 {
        let t = std::time::Instant::now();
        let mut counts: FxHashMap<String, u64> = FxHashMap::default();
        let mut splitter = WordSplitter::new();
        let mut words = 0u64;
        for line in text.lines() {
            splitter.for_each_word(line, |w| {
                words += 1;
                match counts.get_mut(w) {
                    Some(c) => *c += 1,
                    None => {
                        counts.insert(w.to_owned(), 1);
                    }
                }
            });
        }
        let s = t.elapsed().as_secs_f64();
        println!(
            "round {round}: {mb:.0} MB, {words} words, {} distinct: {s:.2} s, {:.1} M words/s, {:.0} MB/s",
            counts.len(),
            words as f64 / s / 1e6,
            mb / s
        );
    }
    // The same through the reader, from a file (page cache).
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "speed.txt", text.as_bytes());
    let t = std::time::Instant::now();
    let mut counts = FxHashMap::default();
    let words = count_words_range(&p, 0..u64::MAX, TextReaderOptions::default(), &mut counts)
        .unwrap()
        .0;
    let s = t.elapsed().as_secs_f64();
    println!(
        "file: {words} words: {s:.2} s, {:.1} M words/s, {:.0} MB/s",
        words as f64 / s / 1e6,
        mb / s
    );
    let t = std::time::Instant::now();
    let mut r = TextReader::open(&p, TextReaderOptions::default()).unwrap();
    let mut lines = 0u64;
    while r.next_line().unwrap().is_some() {
        lines += 1;
    }
    let s = t.elapsed().as_secs_f64();
    println!("reader alone: {lines} lines: {s:.3} s, {:.0} MB/s", mb / s);
}
