//! A batched, range-splittable reader of NEXMark JSON-lines files.

use std::fmt;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::{Path, PathBuf};

use super::json::{parse_json_line, Field, FieldError, FieldErrorKind};
use super::model::NexEvent;
use crate::sources::ysb::OnBadRecord;

/// Default longest accepted line, in bytes (1 MiB, excluding the `\n`); a
/// generated line is about 150–600 bytes.
pub const DEFAULT_MAX_LINE_LEN: usize = 1 << 20;

/// Default read size, in bytes (256 KiB).
const DEFAULT_BUFFER_SIZE: usize = 256 << 10;

/// Options of a [`NexmarkFileReader`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReaderOptions {
    /// What to do with bad records (default [`OnBadRecord::Fail`]).
    pub on_bad_record: OnBadRecord,
    /// Longest accepted line in bytes, excluding its `\n` (default
    /// [`DEFAULT_MAX_LINE_LEN`]). Memory is bounded by about this plus the
    /// read size.
    pub max_line_len: usize,
    /// Bytes asked of the file per read (default 256 KiB).
    pub buffer_size: usize,
}

impl Default for ReaderOptions {
    fn default() -> ReaderOptions {
        ReaderOptions {
            on_bad_record: OnBadRecord::Fail,
            max_line_len: DEFAULT_MAX_LINE_LEN,
            buffer_size: DEFAULT_BUFFER_SIZE,
        }
    }
}

/// An error reading a NEXMark JSON-lines file: the file, the 1-based line
/// (counted from the start of the file, whatever the range), the byte
/// offset in the file, and what is wrong. Displays as
/// `events.json:7: field price (bid): missing (byte offset 1234)`.
#[derive(Debug)]
pub struct SourceError {
    /// The file.
    pub path: PathBuf,
    /// 1-based line number in the file, when the error is in a line.
    pub line: Option<u64>,
    /// Byte offset in the file (of the line, or of the invalid byte).
    pub offset: Option<u64>,
    /// What is wrong.
    pub kind: SourceErrorKind,
}

/// What is wrong in a [`SourceError`].
#[derive(Debug)]
#[non_exhaustive]
pub enum SourceErrorKind {
    /// The file could not be opened.
    Open(io::Error),
    /// Reading or seeking failed.
    Read(io::Error),
    /// The line is not a valid NEXMark event.
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

    /// The field at fault, for a bad record about one field.
    pub fn field(&self) -> Option<Field> {
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

/// Reads compact NEXMark events from a JSON-lines file, or from one byte
/// range of it (see [`split_ranges`](crate::sources::ysb::split_ranges)),
/// in batches.
///
/// Lines: `\n` ends a line, a `\r` before it is dropped, a last line
/// without `\n` is read, and blank lines are skipped.
///
/// Ranges: a line belongs to the range `[start, end)` that holds its first
/// byte; a reader of a range that starts mid-line skips to the next line
/// and reads its last line to the end even past `end`. So readers of
/// ranges that cover the file deliver every line exactly once.
///
/// Errors name the file, the 1-based line counted from the start of the
/// file (exact in every range: the lines before the range are counted, once,
/// when the first error needs them), the byte offset and the field. Under
/// [`OnBadRecord::Fail`] the events parsed before an error are delivered
/// first and the error on the next call; the reader is then finished.
///
/// Watermark: a file written by [`gen_to_file`](super::gen_to_file) is in
/// event-time order, so [`watermark_ms`](Self::watermark_ms) (the latest
/// `date_time` read) bounds the rest of the range from below; events that
/// break that order are counted in [`out_of_order`](Self::out_of_order).
#[derive(Debug)]
pub struct NexmarkFileReader {
    path: PathBuf,
    file: File,
    opts: ReaderOptions,
    /// Bytes read and not yet consumed from `pos` on.
    buf: Vec<u8>,
    pos: usize,
    /// File offset of `buf[0]`.
    buf_offset: u64,
    /// End of the range (exclusive; `u64::MAX`: the whole file).
    end: u64,
    /// File offset of the range's first line.
    first_line: u64,
    /// Lines consumed in the range (the current line's local number).
    lines: u64,
    /// Newlines before `first_line`, once counted (`Some(None)`: the count
    /// failed).
    prefix_lines: Option<Option<u64>>,
    eof: bool,
    finished: bool,
    /// Inside an over-long line: drop bytes up to its `\n`.
    discarding: bool,
    pending: Option<SourceError>,
    records: u64,
    skipped: u64,
    first_skipped: Option<SourceError>,
    max_time: Option<u64>,
    out_of_order: u64,
}

/// A line in `buf`: `buf[start..end]` (without `\n`), at file `offset`,
/// local (1-based) line `number`.
struct Line {
    start: usize,
    end: usize,
    offset: u64,
    number: u64,
}

impl NexmarkFileReader {
    /// A reader of the lines that start in `range` (byte offsets; `0..u64::MAX`
    /// for the whole file).
    pub fn open(
        path: impl AsRef<Path>,
        range: Range<u64>,
        opts: ReaderOptions,
    ) -> Result<NexmarkFileReader, SourceError> {
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
        let mut r = NexmarkFileReader {
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
            records: 0,
            skipped: 0,
            first_skipped: None,
            max_time: None,
            out_of_order: 0,
        };
        if range.start > 0 && !r.finished {
            // The range's first line starts after the first `\n` at or
            // after `start - 1`.
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

    /// Every event of the file (convenience for tests and tools).
    pub fn read_all(
        path: impl AsRef<Path>,
        opts: ReaderOptions,
    ) -> Result<Vec<NexEvent>, SourceError> {
        let mut r = Self::open(path, 0..u64::MAX, opts)?;
        let mut out = Vec::new();
        let mut batch = vec![NexEvent::default(); 4096];
        loop {
            let n = r.fill(&mut batch)?;
            if n == 0 {
                return Ok(out);
            }
            out.extend_from_slice(&batch[..n]);
        }
    }

    /// Writes the next events to the front of `out` (non-empty) and returns
    /// how many; `Ok(0)`: the range is exhausted. After a bad record under
    /// [`OnBadRecord::Fail`], the events before it come first and the error
    /// on the next call; after an error the reader is finished.
    pub fn fill(&mut self, out: &mut [NexEvent]) -> Result<usize, SourceError> {
        if let Some(e) = self.pending.take() {
            return Err(e);
        }
        let mut n = 0;
        while n < out.len() {
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
            match parse_json_line(bytes) {
                Ok(event) => {
                    let t = event.date_time();
                    match self.max_time {
                        Some(m) if t < m => self.out_of_order += 1,
                        _ => self.max_time = Some(t),
                    }
                    out[n] = event;
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
        self.records += n as u64;
        Ok(n)
    }

    /// Applies the bad-record policy: `Err` to return now; `Ok` to go on
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
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Lines of the range read so far (blank and bad ones included).
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// Bad records skipped under [`OnBadRecord::Skip`].
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// The first bad record skipped, if any (with its line and offset).
    pub fn first_skipped(&self) -> Option<&SourceError> {
        self.first_skipped.as_ref()
    }

    /// Events read whose `date_time` was earlier than an event before them.
    pub fn out_of_order(&self) -> u64 {
        self.out_of_order
    }

    /// The latest `date_time` read so far, ms since the Unix epoch (0 before
    /// the first event; `u64::MAX` once the range is exhausted): for a file
    /// in event-time order, no later event of the range is earlier.
    pub fn watermark_ms(&self) -> u64 {
        if self.finished && self.pending.is_none() {
            u64::MAX
        } else {
            self.max_time.unwrap_or(0)
        }
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
        let line = local.and_then(|l| self.prefix_lines().map(|p| p + l));
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
        let (path, first_line) = (&self.path, self.first_line);
        *self
            .prefix_lines
            .get_or_insert_with(|| count_newlines(path, first_line).ok())
    }
}

/// Newlines in the first `len` bytes of the file at `path`.
fn count_newlines(path: &Path, len: u64) -> io::Result<u64> {
    let mut f = File::open(path)?.take(len);
    let mut chunk = vec![0u8; 1 << 20];
    let mut count = 0u64;
    let mut read = 0u64;
    loop {
        let got = f.read(&mut chunk)?;
        if got == 0 {
            break;
        }
        read += got as u64;
        count += memchr::memchr_iter(b'\n', &chunk[..got]).count() as u64;
    }
    if read < len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the file shrank while being read",
        ));
    }
    Ok(count)
}
