//! [`TextReader`]: whole lines of one byte range of a text file, as UTF-8.

use std::fmt;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::sources::lines::{LineError, LineFailure, LineRange};

/// Default longest accepted line, in bytes, excluding its `\n` (16 MiB).
pub const DEFAULT_MAX_LINE_LEN: usize = 16 << 20;

/// Default read size, in bytes (1 MiB).
pub const DEFAULT_BUFFER_SIZE: usize = 1 << 20;

/// What [`Line::number`] counts from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LineNumbers {
    /// 1-based from the start of the file. A reader of a range that starts
    /// at byte `s > 0` counts the newlines of bytes `0..s` when it opens
    /// (one extra sequential pass over them, at memory speed when they are
    /// cached).
    #[default]
    FromFileStart,
    /// 1-based from the first line of the range: no extra pass. Use it when
    /// many workers share one huge file and line numbers are not needed
    /// ([`TextError::line`] stays exact: it is counted on the error path).
    FromRangeStart,
}

/// Options of a [`TextReader`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TextReaderOptions {
    /// Decode invalid UTF-8 with U+FFFD replacement characters (as
    /// [`String::from_utf8_lossy`]) and count the line
    /// ([`TextReader::replaced_lines`]) instead of failing (default `false`).
    pub lossy: bool,
    /// Longest accepted line in bytes, excluding its `\n` (default
    /// [`DEFAULT_MAX_LINE_LEN`], 16 MiB). The reader's memory is bounded by
    /// about this plus `buffer_size`.
    pub max_line_len: usize,
    /// Bytes asked of the file per read (default [`DEFAULT_BUFFER_SIZE`],
    /// 1 MiB; at least 1).
    pub buffer_size: usize,
    /// What [`Line::number`] counts from (default
    /// [`LineNumbers::FromFileStart`]).
    pub line_numbers: LineNumbers,
}

impl Default for TextReaderOptions {
    fn default() -> TextReaderOptions {
        TextReaderOptions {
            lossy: false,
            max_line_len: DEFAULT_MAX_LINE_LEN,
            buffer_size: DEFAULT_BUFFER_SIZE,
            line_numbers: LineNumbers::FromFileStart,
        }
    }
}

/// One line of a text file, borrowed from its [`TextReader`] until the next
/// call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Line<'a> {
    /// The line without its `\n` and without one `\r` before it (or at the
    /// end of a last line that has no `\n`). Under
    /// [`TextReaderOptions::lossy`], invalid bytes are U+FFFD.
    pub text: &'a str,
    /// The 1-based line number (see [`LineNumbers`]; from the start of the
    /// file by default).
    pub number: u64,
    /// Byte offset of the line's first byte in the file (0-based).
    pub offset: u64,
}

/// An error reading a text file: the file, and where in it. Displays as
/// `FILE: invalid UTF-8 at byte OFFSET (line L)`,
/// `FILE: line L is longer than the limit of MAX bytes (line starts at byte OFFSET)`,
/// `FILE: cannot open: …` or `FILE: read error at byte OFFSET: …`.
#[derive(Debug)]
pub struct TextError {
    /// The file, as given to the reader.
    pub path: PathBuf,
    /// 1-based line number from the start of the file, exact in every
    /// range (`None` for open and read errors, or if the lines before a
    /// range could not be counted).
    pub line: Option<u64>,
    /// 0-based byte offset in the file: of the first invalid byte for
    /// invalid UTF-8, of the line's first byte for an over-long line, of the
    /// failed read for a read error.
    pub offset: Option<u64>,
    /// What is wrong.
    pub kind: TextErrorKind,
}

/// What is wrong in a [`TextError`].
#[derive(Debug)]
#[non_exhaustive]
pub enum TextErrorKind {
    /// The file could not be opened (missing, unreadable, …).
    Open(io::Error),
    /// Reading or seeking failed.
    Read(io::Error),
    /// The line is not valid UTF-8 (and [`TextReaderOptions::lossy`] is off).
    InvalidUtf8,
    /// The line is longer than [`TextReaderOptions::max_line_len`].
    LineTooLong {
        /// The limit in bytes.
        max: usize,
    },
}

impl fmt::Display for TextError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.path.display())?;
        match &self.kind {
            TextErrorKind::Open(e) => write!(f, "cannot open: {e}"),
            TextErrorKind::Read(e) => match self.offset {
                Some(offset) => write!(f, "read error at byte {offset}: {e}"),
                None => write!(f, "read error: {e}"),
            },
            TextErrorKind::InvalidUtf8 => {
                f.write_str("invalid UTF-8")?;
                if let Some(offset) = self.offset {
                    write!(f, " at byte {offset}")?;
                }
                if let Some(line) = self.line {
                    write!(f, " (line {line})")?;
                }
                Ok(())
            }
            TextErrorKind::LineTooLong { max } => {
                f.write_str("line ")?;
                if let Some(line) = self.line {
                    write!(f, "{line} ")?;
                }
                write!(f, "is longer than the limit of {max} bytes")?;
                if let Some(offset) = self.offset {
                    write!(f, " (line starts at byte {offset})")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for TextError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            TextErrorKind::Open(e) | TextErrorKind::Read(e) => Some(e),
            TextErrorKind::InvalidUtf8 | TextErrorKind::LineTooLong { .. } => None,
        }
    }
}

/// Reads the whole lines of a text file, or of one byte range of it, as
/// UTF-8.
///
/// Lines: `\n` ends a line and a `\r` before it is dropped (CRLF files read
/// like LF files); a last line without `\n` is a line; an empty line is a
/// line (with no words). An empty file has no lines; a file of `n` newlines
/// has `n` empty lines.
///
/// Ranges: a line belongs to the range `[start, end)` that holds its first
/// byte; a reader of a range that starts mid-line skips to the next line,
/// and reads its last line to the end even past `end`. So the readers of
/// the ranges of [`split_ranges`](super::split_ranges) or
/// [`split_files`](super::split_files) together deliver every line exactly
/// once, in file order when concatenated.
///
/// UTF-8 is checked with SIMD over runs of whole lines (a sequence cannot
/// span a `\n`), so valid input costs no per-line call. Reads are
/// [`TextReaderOptions::buffer_size`] bytes (1 MiB), lines are found with
/// `memchr`, and [`next_line`](TextReader::next_line) allocates nothing on
/// valid input. The first error (invalid UTF-8 without `lossy`, an
/// over-long line, a read error) is returned once and ends the reader.
#[derive(Debug)]
pub struct TextReader {
    src: LineRange<TextError>,
    opts: TextReaderOptions,
    /// File offset up to which the bytes from every line start at or after
    /// the current line are known valid UTF-8 (they were checked as one run
    /// of whole lines).
    valid_to: u64,
    /// The current line decoded with replacement characters (lossy mode).
    lossy_buf: String,
    replaced_lines: u64,
}

impl TextReader {
    /// A reader of the whole file.
    pub fn open(path: impl AsRef<Path>, opts: TextReaderOptions) -> Result<TextReader, TextError> {
        Self::open_range(path, 0..u64::MAX, opts)
    }

    /// A reader of the lines that start in the byte range `range` of the
    /// file (see the type's docs).
    pub fn open_range(
        path: impl AsRef<Path>,
        range: Range<u64>,
        opts: TextReaderOptions,
    ) -> Result<TextReader, TextError> {
        let count_prefix = opts.line_numbers == LineNumbers::FromFileStart;
        let src = LineRange::open(
            path.as_ref(),
            range,
            opts.max_line_len,
            opts.buffer_size,
            count_prefix,
        )?;
        Ok(TextReader {
            valid_to: src.position(),
            src,
            opts,
            lossy_buf: String::new(),
            replaced_lines: 0,
        })
    }

    /// The next line of the range, or `None` at its end (and after an
    /// error).
    pub fn next_line(&mut self) -> Result<Option<Line<'_>>, TextError> {
        let line = match self.src.next_line() {
            Ok(Some(line)) => line,
            Ok(None) => return Ok(None),
            Err(e) => {
                self.src.finish();
                return Err(e);
            }
        };
        let (start, end, offset) = (line.start, line.end, line.offset);
        if self.src.buf_offset() + end as u64 > self.valid_to {
            if let Err(bad) = self.validate_from(start, end) {
                if !self.opts.lossy {
                    let e = TextError {
                        path: self.src.path().to_path_buf(),
                        line: self.src.file_line(line.number),
                        offset: Some(offset + bad as u64),
                        kind: TextErrorKind::InvalidUtf8,
                    };
                    self.src.finish();
                    return Err(e);
                }
                self.lossy_buf.clear();
                self.lossy_buf
                    .push_str(&String::from_utf8_lossy(self.src.text(&line)));
                self.replaced_lines += 1;
                return Ok(Some(Line {
                    text: &self.lossy_buf,
                    number: self.number(),
                    offset,
                }));
            }
        }
        let bytes = self.src.text(&line);
        // SAFETY: `bytes` lies in the buffer's `start..` up to file offset
        // `valid_to`, a run of whole lines that passed UTF-8 validation
        // starting at a line start `<= start`; `start` is a line start, so
        // the run split at its `\n`s (ASCII, never inside a sequence) is
        // valid piece by piece, and dropping a final ASCII `\r` keeps it
        // valid.
        let text = unsafe { std::str::from_utf8_unchecked(bytes) };
        Ok(Some(Line {
            text,
            number: self.number(),
            offset,
        }))
    }

    /// Lines delivered (or failed) so far.
    pub fn lines(&self) -> u64 {
        self.src.lines()
    }

    /// Lines decoded with replacement characters under
    /// [`TextReaderOptions::lossy`].
    pub fn replaced_lines(&self) -> u64 {
        self.replaced_lines
    }

    /// File offset of the next byte to consume (progress; past the range's
    /// end once its last line is read).
    pub fn position(&self) -> u64 {
        self.src.position()
    }

    /// The file being read.
    pub fn path(&self) -> &Path {
        self.src.path()
    }

    /// The current line's number per [`TextReaderOptions::line_numbers`].
    fn number(&self) -> u64 {
        let lines = self.src.lines();
        match self.opts.line_numbers {
            LineNumbers::FromFileStart => {
                self.src.counted_prefix_lines().map_or(lines, |p| p + lines)
            }
            LineNumbers::FromRangeStart => lines,
        }
    }

    /// Checks that the line `buf[start..end]` is UTF-8, together with the
    /// whole lines after it in the buffer (one SIMD pass), and records how
    /// far the run is valid in `valid_to`. `Err(i)`: the line's first
    /// invalid byte is at `start + i`.
    fn validate_from(&mut self, start: usize, end: usize) -> Result<(), usize> {
        let buf = self.src.buf();
        let base = self.src.buf_offset();
        // The run ends after the last `\n` in the buffer (at or after `end`
        // if the line has one), or at `end` for a last line without `\n`.
        let run_end = match memchr::memrchr(b'\n', &buf[end..]) {
            Some(k) => end + k + 1,
            None => end,
        };
        match simdutf8::compat::from_utf8(&buf[start..run_end]) {
            Ok(_) => {
                self.valid_to = base + run_end as u64;
                Ok(())
            }
            Err(e) => {
                let bad = e.valid_up_to();
                // The lines before the one holding the bad byte are valid.
                let valid = memchr::memrchr(b'\n', &buf[start..start + bad]).map_or(0, |k| k + 1);
                self.valid_to = base + (start + valid) as u64;
                if base + end as u64 <= self.valid_to {
                    Ok(())
                } else {
                    Err(bad)
                }
            }
        }
    }
}

impl LineError for TextError {
    fn new(path: PathBuf, line: Option<u64>, offset: Option<u64>, failure: LineFailure) -> Self {
        let kind = match failure {
            LineFailure::Open(e) => TextErrorKind::Open(e),
            LineFailure::Read(e) => TextErrorKind::Read(e),
            LineFailure::TooLong { max } => TextErrorKind::LineTooLong { max },
        };
        TextError {
            path,
            line,
            offset,
            kind,
        }
    }
}
