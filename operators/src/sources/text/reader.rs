//! [`TextReader`]: whole lines of one byte range of a text file, as UTF-8.

use std::fmt;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::{Path, PathBuf};

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
    path: PathBuf,
    file: File,
    opts: TextReaderOptions,
    /// Bytes read and not yet consumed from `pos` on.
    buf: Vec<u8>,
    pos: usize,
    /// `buf[line start..valid_to]` is known valid UTF-8 for every line start
    /// in `pos..valid_to` (it was checked as one run of whole lines).
    valid_to: usize,
    /// File offset of `buf[0]`.
    buf_offset: u64,
    /// End of the range (`u64::MAX`: the whole file).
    end: u64,
    /// File offset of the range's first line.
    first_line: u64,
    /// Newlines before `first_line`: `None` not counted yet, `Some(None)`
    /// could not be counted.
    prefix_lines: Option<Option<u64>>,
    /// Lines consumed since `first_line` (the current line's local number).
    lines: u64,
    eof: bool,
    finished: bool,
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
        let path = path.as_ref().to_path_buf();
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) => {
                return Err(TextError {
                    path,
                    line: None,
                    offset: None,
                    kind: TextErrorKind::Open(e),
                })
            }
        };
        let mut r = TextReader {
            path,
            file,
            opts: TextReaderOptions {
                buffer_size: opts.buffer_size.max(1),
                ..opts
            },
            buf: Vec::new(),
            pos: 0,
            valid_to: 0,
            buf_offset: 0,
            end: range.end,
            first_line: 0,
            prefix_lines: Some(Some(0)),
            lines: 0,
            eof: false,
            finished: range.start >= range.end,
            lossy_buf: String::new(),
            replaced_lines: 0,
        };
        if range.start > 0 && !r.finished {
            // The range's first line is the one after the first `\n` at or
            // after `start - 1`.
            let skip_from = range.start - 1;
            let before = match r.opts.line_numbers {
                LineNumbers::FromFileStart => Some(r.count_newlines_up_to(skip_from)?),
                LineNumbers::FromRangeStart => {
                    r.file
                        .seek(SeekFrom::Start(skip_from))
                        .map_err(|e| r.read_error(e, skip_from))?;
                    None
                }
            };
            r.buf_offset = skip_from;
            loop {
                if let Some(k) = memchr::memchr(b'\n', &r.buf[r.pos..]) {
                    r.pos += k + 1;
                    break;
                }
                r.pos = r.buf.len();
                if r.eof {
                    r.finished = true;
                    break;
                }
                r.refill()?;
            }
            r.first_line = r.buf_offset + r.pos as u64;
            r.valid_to = r.pos;
            // The `\n` just skipped is the only one in `skip_from..first_line`.
            r.prefix_lines = before.map(|n| Some(n + 1));
        }
        Ok(r)
    }

    /// The next line of the range, or `None` at its end (and after an
    /// error).
    pub fn next_line(&mut self) -> Result<Option<Line<'_>>, TextError> {
        let max = self.opts.max_line_len;
        // Find the line: `buf[start..start + len]`, `\n` excluded.
        let (start, len, offset) = loop {
            if self.finished {
                return Ok(None);
            }
            let offset = self.buf_offset + self.pos as u64;
            if offset >= self.end {
                self.finished = true;
                return Ok(None);
            }
            let avail = &self.buf[self.pos..];
            if let Some(k) = memchr::memchr(b'\n', avail) {
                let start = self.pos;
                self.pos += k + 1;
                self.lines += 1;
                if k > max {
                    return Err(self.too_long(offset));
                }
                break (start, k, offset);
            }
            if avail.len() > max {
                self.lines += 1;
                return Err(self.too_long(offset));
            }
            if self.eof {
                if avail.is_empty() {
                    self.finished = true;
                    return Ok(None);
                }
                let start = self.pos;
                self.pos = self.buf.len();
                self.lines += 1;
                break (start, avail.len(), offset);
            }
            self.refill()?;
        };
        let end = start + len;
        if end > self.valid_to {
            if let Err(bad) = self.validate_from(start, end) {
                if !self.opts.lossy {
                    let e = self.error(
                        Some(self.lines),
                        Some(offset + bad as u64),
                        TextErrorKind::InvalidUtf8,
                    );
                    self.finished = true;
                    return Err(e);
                }
                let mut bytes = &self.buf[start..end];
                if let [rest @ .., b'\r'] = bytes {
                    bytes = rest;
                }
                self.lossy_buf.clear();
                self.lossy_buf.push_str(&String::from_utf8_lossy(bytes));
                self.replaced_lines += 1;
                return Ok(Some(Line {
                    text: &self.lossy_buf,
                    number: self.number(),
                    offset,
                }));
            }
        }
        let mut bytes = &self.buf[start..end];
        if let [rest @ .., b'\r'] = bytes {
            bytes = rest;
        }
        // SAFETY: `buf[start..end]` lies in `buf[start..valid_to]`, a run of
        // whole lines that passed UTF-8 validation starting at a line start
        // `<= start`; `start` is a line start, so the run split at its `\n`s
        // (ASCII, never inside a sequence) is valid piece by piece, and
        // dropping a final ASCII `\r` keeps it valid.
        let text = unsafe { std::str::from_utf8_unchecked(bytes) };
        Ok(Some(Line {
            text,
            number: self.number(),
            offset,
        }))
    }

    /// Lines delivered (or failed) so far.
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// Lines decoded with replacement characters under
    /// [`TextReaderOptions::lossy`].
    pub fn replaced_lines(&self) -> u64 {
        self.replaced_lines
    }

    /// File offset of the next byte to consume (progress; past the range's
    /// end once its last line is read).
    pub fn position(&self) -> u64 {
        self.buf_offset + self.pos as u64
    }

    /// The file being read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The current line's number per [`TextReaderOptions::line_numbers`].
    fn number(&self) -> u64 {
        match (self.opts.line_numbers, self.prefix_lines) {
            (LineNumbers::FromFileStart, Some(Some(p))) => p + self.lines,
            _ => self.lines,
        }
    }

    /// Checks that the line `buf[start..end]` is UTF-8, together with the
    /// whole lines after it in `buf` (one SIMD pass), and records how far
    /// the run is valid in `valid_to`. `Err(i)`: the line's first invalid
    /// byte is at `start + i`.
    fn validate_from(&mut self, start: usize, end: usize) -> Result<(), usize> {
        // The run ends after the last `\n` in `buf` (at or after `end` if the
        // line has one), or at `end` for a last line without `\n`.
        let run_end = match memchr::memrchr(b'\n', &self.buf[end..]) {
            Some(k) => end + k + 1,
            None => end,
        };
        match simdutf8::compat::from_utf8(&self.buf[start..run_end]) {
            Ok(_) => {
                self.valid_to = run_end;
                Ok(())
            }
            Err(e) => {
                let bad = e.valid_up_to();
                // The lines before the one holding the bad byte are valid.
                let valid =
                    memchr::memrchr(b'\n', &self.buf[start..start + bad]).map_or(0, |k| k + 1);
                self.valid_to = start + valid;
                if end <= self.valid_to {
                    Ok(())
                } else {
                    Err(bad)
                }
            }
        }
    }

    /// Reads bytes `0..upto` from the file's start counting `\n`s, leaving
    /// the file at `upto`.
    fn count_newlines_up_to(&mut self, upto: u64) -> Result<u64, TextError> {
        let mut chunk = vec![0u8; self.opts.buffer_size.min(upto as usize).max(1)];
        let mut done = 0u64;
        let mut count = 0u64;
        while done < upto {
            let want = chunk.len().min((upto - done) as usize);
            let got = match self.file.read(&mut chunk[..want]) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.read_error(e, done)),
            };
            count += memchr::memchr_iter(b'\n', &chunk[..got]).count() as u64;
            done += got as u64;
        }
        if done < upto {
            // The file is shorter than the range's start: nothing to read.
            self.file
                .seek(SeekFrom::Start(upto))
                .map_err(|e| self.read_error(e, upto))?;
        }
        Ok(count)
    }

    /// Drops the consumed bytes and reads up to `buffer_size` more.
    fn refill(&mut self) -> Result<(), TextError> {
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.buf_offset += self.pos as u64;
            self.valid_to = self.valid_to.saturating_sub(self.pos);
            self.pos = 0;
        }
        let want = self.opts.buffer_size;
        self.buf.reserve(want);
        let at = self.buf_offset + self.buf.len() as u64;
        let got = match (&mut self.file)
            .take(want as u64)
            .read_to_end(&mut self.buf)
        {
            Ok(n) => n,
            Err(e) => {
                self.finished = true;
                return Err(self.read_error(e, at));
            }
        };
        if got < want {
            self.eof = true;
        }
        Ok(())
    }

    fn too_long(&mut self, offset: u64) -> TextError {
        self.finished = true;
        let kind = TextErrorKind::LineTooLong {
            max: self.opts.max_line_len,
        };
        self.error(Some(self.lines), Some(offset), kind)
    }

    fn read_error(&self, e: io::Error, offset: u64) -> TextError {
        TextError {
            path: self.path.clone(),
            line: None,
            offset: Some(offset),
            kind: TextErrorKind::Read(e),
        }
    }

    /// An error at local line `local` (1-based within the range).
    fn error(&mut self, local: Option<u64>, offset: Option<u64>, kind: TextErrorKind) -> TextError {
        let line = match local {
            Some(l) => self.count_prefix_lines().map(|p| p + l),
            None => None,
        };
        TextError {
            path: self.path.clone(),
            line,
            offset,
            kind,
        }
    }

    /// Newlines before the range's first line (counted once, on demand,
    /// with a second handle so the reader's position is kept).
    fn count_prefix_lines(&mut self) -> Option<u64> {
        let first_line = self.first_line;
        let path = &self.path;
        *self.prefix_lines.get_or_insert_with(|| {
            let mut f = File::open(path).ok()?;
            let mut left = first_line;
            let mut count = 0u64;
            let mut chunk = vec![0u8; (1 << 20).min(left as usize).max(1)];
            while left > 0 {
                let want = chunk.len().min(left as usize);
                let got = f.read(&mut chunk[..want]).ok()?;
                if got == 0 {
                    return None;
                }
                count += memchr::memchr_iter(b'\n', &chunk[..got]).count() as u64;
                left -= got as u64;
            }
            Some(count)
        })
    }
}
