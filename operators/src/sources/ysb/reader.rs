//! A batched, range-splittable reader of YSB JSON-lines files.

use std::fmt;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::{Path, PathBuf};

use super::event::YsbEvent;
use super::json::{parse_json_line_with, FieldError, FieldErrorKind, ParseMode};

/// Default longest accepted line, in bytes (1 MiB, excluding the `\n`); a
/// YSB line is about 250 bytes.
pub const DEFAULT_MAX_LINE_LEN: usize = 1 << 20;

/// Default read size, in bytes (256 KiB).
const DEFAULT_BUFFER_SIZE: usize = 256 << 10;

/// What a reader does with a bad record (malformed JSON, a missing or
/// invalid field, invalid UTF-8, a line over the length limit). I/O errors
/// always stop the reader.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnBadRecord {
    /// Deliver the events before it, then return the error; the reader is
    /// then finished.
    #[default]
    Fail,
    /// Count it ([`YsbFileReader::skipped`]), keep the first such error
    /// ([`YsbFileReader::first_skipped`]) and go on.
    Skip,
}

/// Options of a [`YsbFileReader`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReaderOptions {
    /// Which fields to parse (default [`ParseMode::Full`]).
    pub mode: ParseMode,
    /// What to do with bad records (default [`OnBadRecord::Fail`]).
    pub on_bad_record: OnBadRecord,
    /// Longest accepted line in bytes, excluding its `\n` (default
    /// [`DEFAULT_MAX_LINE_LEN`], 1 MiB). The reader's memory is bounded by
    /// about this plus the read size.
    pub max_line_len: usize,
    /// Bytes asked of the file per read (default 256 KiB).
    pub buffer_size: usize,
}

impl Default for ReaderOptions {
    fn default() -> ReaderOptions {
        ReaderOptions {
            mode: ParseMode::Full,
            on_bad_record: OnBadRecord::Fail,
            max_line_len: DEFAULT_MAX_LINE_LEN,
            buffer_size: DEFAULT_BUFFER_SIZE,
        }
    }
}

/// An error reading a YSB JSON-lines file: the file, the 1-based line, the
/// byte offset in the file, and what is wrong. Displays as
/// `path:line: what (byte offset N)`, e.g.
/// `events.json:3: field event_time: "abc" is not a millisecond integer (byte offset 512)`.
///
/// `line` is exact for every range of a file: it is computed, on the first
/// error only, by counting the newlines before the range.
#[derive(Debug)]
pub struct SourceError {
    /// The file, as given to the reader.
    pub path: PathBuf,
    /// 1-based line number (`None` for errors of the whole file, or if the
    /// lines before a range could not be counted).
    pub line: Option<u64>,
    /// 0-based byte offset in the file: the start of the bad line, or the
    /// first invalid byte for invalid UTF-8.
    pub offset: Option<u64>,
    /// What is wrong.
    pub kind: SourceErrorKind,
}

/// What is wrong in a [`SourceError`].
#[derive(Debug)]
#[non_exhaustive]
pub enum SourceErrorKind {
    /// The file could not be opened (missing, unreadable, …).
    Open(io::Error),
    /// Reading or seeking failed.
    Read(io::Error),
    /// The line is not a valid YSB event.
    Record(FieldError),
    /// The line is longer than [`ReaderOptions::max_line_len`].
    LineTooLong {
        /// The limit in bytes.
        max: usize,
    },
}

impl SourceError {
    /// Whether this is a bad record (skippable under [`OnBadRecord::Skip`])
    /// rather than an I/O error.
    pub fn is_bad_record(&self) -> bool {
        matches!(
            self.kind,
            SourceErrorKind::Record(_) | SourceErrorKind::LineTooLong { .. }
        )
    }

    /// The field at fault, for a bad record that is about one field.
    pub fn field(&self) -> Option<super::json::Field> {
        match &self.kind {
            SourceErrorKind::Record(e) => e.field,
            _ => None,
        }
    }
}

impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        f.write_str(": ")?;
        match &self.kind {
            SourceErrorKind::Open(e) => write!(f, "cannot open event file: {e}")?,
            SourceErrorKind::Read(e) => write!(f, "read error: {e}")?,
            SourceErrorKind::Record(e) => write!(f, "{e}")?,
            SourceErrorKind::LineTooLong { max } => {
                write!(f, "line longer than the limit of {max} bytes")?
            }
        }
        if let Some(offset) = self.offset {
            write!(f, " (byte offset {offset})")?;
        }
        Ok(())
    }
}

impl std::error::Error for SourceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            SourceErrorKind::Open(e) | SourceErrorKind::Read(e) => Some(e),
            SourceErrorKind::Record(e) => Some(e),
            SourceErrorKind::LineTooLong { .. } => None,
        }
    }
}

/// Splits the file at `path` into `parts` byte ranges of about equal size
/// that cover it exactly. The cuts may fall mid-line: [`YsbFileReader::open_range`]
/// reads each line in the range where the line starts, so readers of the
/// ranges together read every line exactly once.
///
/// # Panics
/// If `parts == 0`.
pub fn split_ranges(path: impl AsRef<Path>, parts: usize) -> io::Result<Vec<Range<u64>>> {
    assert!(parts > 0, "split into 0 parts");
    let len = std::fs::metadata(path)?.len();
    let cut = |i: usize| (len as u128 * i as u128 / parts as u128) as u64;
    Ok((0..parts).map(|i| cut(i)..cut(i + 1)).collect())
}

/// Reads YSB events from a JSON-lines file, or from one byte range of it, in
/// batches.
///
/// Lines: `\n` ends a line, a `\r` before it is dropped (CRLF files read
/// like LF files), a last line without `\n` is read, and empty or
/// whitespace-only lines are skipped (they are not records). An empty file
/// holds no events.
///
/// Ranges: a line belongs to the range `[start, end)` that holds its first
/// byte; a reader of a range that starts mid-line skips to the next line,
/// and reads its last line to the end even past `end`. So the readers of
/// [`split_ranges`] together deliver every line exactly once, in file order
/// when concatenated.
///
/// Errors name the file, the 1-based line (exact in every range), the byte
/// offset and the field; see [`SourceError`]. Under [`OnBadRecord::Fail`]
/// the events parsed before an error are delivered first: `fill` returns
/// them, and the error on the next call; the reader is then finished.
#[derive(Debug)]
pub struct YsbFileReader {
    path: PathBuf,
    file: File,
    opts: ReaderOptions,
    /// Bytes read and not yet consumed from `pos` on.
    buf: Vec<u8>,
    pos: usize,
    /// File offset of `buf[0]`.
    buf_offset: u64,
    /// End of the range (`u64::MAX`: the whole file).
    end: u64,
    /// File offset of the range's first line.
    first_line: u64,
    /// Lines consumed since `first_line` (the current line's local number).
    lines: u64,
    /// Newlines before `first_line`, once counted.
    prefix_lines: Option<Option<u64>>,
    eof: bool,
    finished: bool,
    /// Inside an over-long line: drop bytes up to its `\n`.
    discarding: bool,
    pending: Option<SourceError>,
    events: u64,
    skipped: u64,
    first_skipped: Option<SourceError>,
}

/// A line in `buf`: `buf[start..end]` (without `\n`), from file `offset`,
/// local line number `number`.
struct Line {
    start: usize,
    end: usize,
    offset: u64,
    number: u64,
}

impl YsbFileReader {
    /// A reader of the whole file.
    pub fn open(path: impl AsRef<Path>, opts: ReaderOptions) -> Result<YsbFileReader, SourceError> {
        Self::open_range(path, 0..u64::MAX, opts)
    }

    /// A reader of the lines that start in `range` (byte offsets; see the
    /// type's docs).
    pub fn open_range(
        path: impl AsRef<Path>,
        range: Range<u64>,
        opts: ReaderOptions,
    ) -> Result<YsbFileReader, SourceError> {
        let path = path.as_ref().to_path_buf();
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) => {
                return Err(SourceError {
                    path,
                    line: None,
                    offset: None,
                    kind: SourceErrorKind::Open(e),
                })
            }
        };
        let mut r = YsbFileReader {
            path,
            file,
            opts: ReaderOptions {
                buffer_size: opts.buffer_size.max(1),
                ..opts
            },
            buf: Vec::new(),
            pos: 0,
            buf_offset: 0,
            end: range.end,
            first_line: 0,
            lines: 0,
            prefix_lines: None,
            eof: false,
            finished: range.start >= range.end,
            discarding: false,
            pending: None,
            events: 0,
            skipped: 0,
            first_skipped: None,
        };
        if range.start > 0 && !r.finished {
            // The first line of the range is the one after the first `\n` at
            // or after `start - 1`.
            r.buf_offset = range.start - 1;
            r.file
                .seek(SeekFrom::Start(r.buf_offset))
                .map_err(|e| r.io_error(e))?;
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
        }
        Ok(r)
    }

    /// Reads every event of the file (convenience for tests and tools).
    pub fn read_all(
        path: impl AsRef<Path>,
        opts: ReaderOptions,
    ) -> Result<Vec<YsbEvent>, SourceError> {
        let mut r = Self::open(path, opts)?;
        let mut out = Vec::new();
        while r.fill(&mut out, 64 << 10)? > 0 {}
        Ok(out)
    }

    /// Appends up to `max` events to `out` and returns how many; `Ok(0)`
    /// means the range is exhausted (so `max` must be > 0). After a bad record under
    /// [`OnBadRecord::Fail`], the events before it are returned first and the
    /// error on the next call; after an error the reader is finished.
    pub fn fill(&mut self, out: &mut Vec<YsbEvent>, max: usize) -> Result<usize, SourceError> {
        if let Some(e) = self.pending.take() {
            return Err(e);
        }
        let mut n = 0;
        while n < max {
            let line = match self.next_line() {
                Ok(Some(line)) => line,
                Ok(None) => break,
                Err(e) => {
                    self.on_error(e, n)?;
                    if self.finished {
                        break;
                    }
                    continue;
                }
            };
            let mut bytes = &self.buf[line.start..line.end];
            if let [rest @ .., b'\r'] = bytes {
                bytes = rest;
            }
            if bytes.first().is_none_or(|c| c.is_ascii_whitespace())
                && bytes.trim_ascii().is_empty()
            {
                continue;
            }
            match parse_json_line_with(bytes, self.opts.mode) {
                Ok(event) => {
                    out.push(event);
                    n += 1;
                }
                Err(fe) => {
                    let offset = match fe.kind {
                        FieldErrorKind::NotUtf8 { offset } => line.offset + offset as u64,
                        _ => line.offset,
                    };
                    let e =
                        self.error(Some(line.number), Some(offset), SourceErrorKind::Record(fe));
                    self.on_error(e, n)?;
                    if self.finished {
                        break;
                    }
                }
            }
        }
        self.events += n as u64;
        Ok(n)
    }

    /// Applies the bad-record policy. `Err` to return now; `Ok` to go on
    /// (skipped) or, with `finished` set, to return the `n` events first.
    fn on_error(&mut self, e: SourceError, n: usize) -> Result<(), SourceError> {
        if e.is_bad_record() && self.opts.on_bad_record == OnBadRecord::Skip {
            self.skipped += 1;
            self.first_skipped.get_or_insert(e);
            return Ok(());
        }
        self.finished = true;
        if n == 0 {
            return Err(e);
        }
        self.pending = Some(e);
        Ok(())
    }

    /// Events delivered so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Bad records skipped under [`OnBadRecord::Skip`].
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// The first bad record skipped, if any (with its line and offset).
    pub fn first_skipped(&self) -> Option<&SourceError> {
        self.first_skipped.as_ref()
    }

    /// The file being read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The next line of the range, or `None` at its end.
    fn next_line(&mut self) -> Result<Option<Line>, SourceError> {
        loop {
            if self.finished {
                return Ok(None);
            }
            if self.discarding {
                if let Some(k) = memchr::memchr(b'\n', &self.buf[self.pos..]) {
                    self.pos += k + 1;
                    self.discarding = false;
                } else {
                    self.pos = self.buf.len();
                    if self.eof {
                        self.finished = true;
                        return Ok(None);
                    }
                    self.refill()?;
                }
                continue;
            }
            let offset = self.buf_offset + self.pos as u64;
            if offset >= self.end {
                self.finished = true;
                return Ok(None);
            }
            let avail = &self.buf[self.pos..];
            let max = self.opts.max_line_len;
            if let Some(k) = memchr::memchr(b'\n', avail) {
                let start = self.pos;
                self.pos += k + 1;
                self.lines += 1;
                if k > max {
                    return Err(self.too_long(offset));
                }
                return Ok(Some(Line {
                    start,
                    end: start + k,
                    offset,
                    number: self.lines,
                }));
            }
            if avail.len() > max {
                self.lines += 1;
                self.pos = self.buf.len();
                self.discarding = true;
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
                return Ok(Some(Line {
                    start,
                    end: self.pos,
                    offset,
                    number: self.lines,
                }));
            }
            self.refill()?;
        }
    }

    /// Drops the consumed bytes and reads up to `buffer_size` more.
    fn refill(&mut self) -> Result<(), SourceError> {
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.buf_offset += self.pos as u64;
            self.pos = 0;
        }
        let want = self.opts.buffer_size;
        self.buf.reserve(want);
        let got = (&mut self.file)
            .take(want as u64)
            .read_to_end(&mut self.buf)
            .map_err(|e| self.io_error(e))?;
        if got < want {
            self.eof = true;
        }
        Ok(())
    }

    fn too_long(&mut self, offset: u64) -> SourceError {
        let kind = SourceErrorKind::LineTooLong {
            max: self.opts.max_line_len,
        };
        self.error(Some(self.lines), Some(offset), kind)
    }

    fn io_error(&self, e: io::Error) -> SourceError {
        SourceError {
            path: self.path.clone(),
            line: None,
            offset: Some(self.buf_offset + self.buf.len() as u64),
            kind: SourceErrorKind::Read(e),
        }
    }

    /// An error at local line `local` (1-based within the range).
    fn error(
        &mut self,
        local: Option<u64>,
        offset: Option<u64>,
        kind: SourceErrorKind,
    ) -> SourceError {
        let line = match local {
            Some(l) => self.prefix_lines().map(|p| p + l),
            None => None,
        };
        SourceError {
            path: self.path.clone(),
            line,
            offset,
            kind,
        }
    }

    /// Newlines before the range's first line (counted once, on demand).
    fn prefix_lines(&mut self) -> Option<u64> {
        if self.first_line == 0 {
            return Some(0);
        }
        *self.prefix_lines.get_or_insert_with(|| {
            let mut f = File::open(&self.path).ok()?;
            let mut left = self.first_line;
            let mut count = 0u64;
            let mut chunk = vec![0u8; 1 << 20];
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
