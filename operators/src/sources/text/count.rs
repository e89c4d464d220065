//! Splitting files across workers, counting words, and the `word,count`
//! result.

use std::io::{self, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;

use super::reader::{TextError, TextReader, TextReaderOptions};
use super::words::WordSplitter;

/// One byte range of one file: a worker's share of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileRange {
    /// The file.
    pub path: PathBuf,
    /// Byte offsets `[start, end)` in the file; read it with
    /// [`TextReader::open_range`], which takes the lines that start in it.
    pub range: Range<u64>,
}

/// Splits several files into `parts` shares of about equal size in bytes
/// (the files laid end to end, then cut into `parts` equal byte spans), for
/// `parts` workers. Share `i` lists the pieces of the files that span `i`
/// covers, in the order of `paths`; together the shares cover every byte of
/// every file exactly once, so their readers deliver every line exactly once
/// (see [`TextReader`]). Empty files appear in no share; a share may be
/// empty when there are fewer bytes than parts.
///
/// For one file this gives the same ranges as
/// [`split_ranges`](super::split_ranges).
///
/// # Panics
/// If `parts` is 0.
pub fn split_files(paths: &[PathBuf], parts: usize) -> io::Result<Vec<Vec<FileRange>>> {
    assert!(parts > 0, "split into 0 parts");
    let lens = paths
        .iter()
        .map(|p| std::fs::metadata(p).map(|m| m.len()))
        .collect::<io::Result<Vec<u64>>>()?;
    let total: u64 = lens.iter().sum();
    let cut = |i: usize| (total as u128 * i as u128 / parts as u128) as u64;
    let mut shares = vec![Vec::new(); parts];
    for (i, share) in shares.iter_mut().enumerate() {
        let (lo, hi) = (cut(i), cut(i + 1));
        let mut base = 0u64;
        for (path, &len) in paths.iter().zip(&lens) {
            let (start, end) = (lo.max(base), hi.min(base + len));
            if start < end {
                share.push(FileRange {
                    path: path.clone(),
                    range: start - base..end - base,
                });
            }
            base += len;
        }
    }
    Ok(shares)
}

/// Counts the words of every line of `reader` into `counts` (adding to what
/// is there) and returns how many words it counted. A word allocates only
/// the first time it is seen.
pub fn count_words_into(
    reader: &mut TextReader,
    counts: &mut FxHashMap<String, u64>,
) -> Result<u64, TextError> {
    let mut splitter = WordSplitter::new();
    let mut words = 0u64;
    while let Some(line) = reader.next_line()? {
        splitter.for_each_word(line.text, |w| {
            words += 1;
            match counts.get_mut(w) {
                Some(c) => *c += 1,
                None => {
                    counts.insert(w.to_owned(), 1);
                }
            }
        });
    }
    Ok(words)
}

/// Counts the words of the lines of one byte range of a file into `counts`
/// (a worker's map side); returns the words counted and the lines replaced
/// under [`TextReaderOptions::lossy`].
pub fn count_words_range(
    path: impl AsRef<Path>,
    range: Range<u64>,
    opts: TextReaderOptions,
    counts: &mut FxHashMap<String, u64>,
) -> Result<(u64, u64), TextError> {
    let mut reader = TextReader::open_range(path, range, opts)?;
    let words = count_words_into(&mut reader, counts)?;
    Ok((words, reader.replaced_lines()))
}

/// Word count of `paths`, one after the other on this thread: the reference
/// result. Rows are sorted as [`sort_counts`] does: count descending, then
/// word ascending by byte order. `lossy`: see [`TextReaderOptions::lossy`].
/// The first error (a file that cannot be read, invalid UTF-8 without
/// `lossy`) stops the count.
pub fn count_words_sequential(
    paths: &[PathBuf],
    lossy: bool,
) -> Result<Vec<(String, u64)>, TextError> {
    let opts = TextReaderOptions {
        lossy,
        ..TextReaderOptions::default()
    };
    let mut counts = FxHashMap::default();
    for path in paths {
        count_words_range(path, 0..u64::MAX, opts, &mut counts)?;
    }
    Ok(sort_counts(counts))
}

/// The rows of a word count in output order, "sorted by count then word":
/// count **descending** (most frequent first), then word **ascending by
/// byte order** (which for UTF-8 is code point order, not a locale's
/// collation), so ties come out in one fixed order.
pub fn sort_counts(counts: impl IntoIterator<Item = (String, u64)>) -> Vec<(String, u64)> {
    let mut rows: Vec<(String, u64)> = counts.into_iter().collect();
    rows.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    rows
}

/// Writes `rows` as CSV: a `word,count` header, then one `word,count` line
/// per row, `\n`-terminated. A word holding `,` or `"` (a UAX #29 word can:
/// `1,000`, Hebrew `צה"ל`) is quoted as RFC 4180 says, with `"` doubled.
/// Unbuffered: pass a [`std::io::BufWriter`] for files.
pub fn write_csv(mut out: impl Write, rows: &[(String, u64)]) -> io::Result<()> {
    out.write_all(b"word,count\n")?;
    for (word, count) in rows {
        if word
            .bytes()
            .any(|b| matches!(b, b',' | b'"' | b'\n' | b'\r'))
        {
            writeln!(out, "\"{}\",{count}", word.replace('"', "\"\""))?;
        } else {
            writeln!(out, "{word},{count}")?;
        }
    }
    Ok(())
}
