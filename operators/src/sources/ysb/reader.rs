//! A batched, range-splittable reader of YSB JSON-lines files.

use std::fmt;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};

use super::event::YsbEvent;
use super::json::{parse_json_line_with, FieldError, FieldErrorKind, ParseMode};
use crate::sources::lines::{LineError, LineFailure, RecordError, RecordLines};
use crate::sources::live::LiveFeed;

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
    opts: ReaderOptions,
    records: RecordLines<SourceError>,
    events: u64,
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
        let records = RecordLines::open(
            path.as_ref(),
            range,
            opts.max_line_len,
            opts.buffer_size,
            opts.on_bad_record,
        )?;
        Ok(YsbFileReader {
            opts,
            records,
            events: 0,
        })
    }

    /// A reader of local worker `local`'s share of the live input `feed`
    /// (standard input, TCP): its lines are numbered, and offsets counted,
    /// from the start of their stream, and errors name the stream.
    /// [`fill`](Self::fill) returns `Ok(0)` also when nothing is queued
    /// now: [`is_finished`](Self::is_finished) tells the end apart. `wake`
    /// is called when a chunk is queued for this worker (ring its
    /// doorbell). `None` if that worker's share was taken already.
    pub fn live(
        feed: &LiveFeed,
        local: usize,
        wake: impl Fn() + Send + Sync + 'static,
        opts: ReaderOptions,
    ) -> Option<YsbFileReader> {
        let lines = feed.worker(local, wake)?;
        Some(YsbFileReader {
            opts,
            records: RecordLines::live(lines, opts.on_bad_record),
            events: 0,
        })
    }

    /// Whether the input is done: read to its end, or stopped by an error
    /// (a live input that is merely quiet is not).
    pub fn is_finished(&self) -> bool {
        self.records.lines().is_finished() && !self.records.has_pending()
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
        let mode = self.opts.mode;
        let n = self.records.fill(max, |_, bytes| {
            out.push(parse_json_line_with(bytes, mode)?);
            Ok(())
        })?;
        self.events += n as u64;
        Ok(n)
    }

    /// Events delivered so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Where the next line starts (bytes into the file; `None` for a live
    /// input): a checkpoint's position.
    pub fn position(&self) -> Option<u64> {
        self.records.position()
    }

    /// Bad records skipped under [`OnBadRecord::Skip`].
    pub fn skipped(&self) -> u64 {
        self.records.skipped()
    }

    /// The first bad record skipped, if any (with its line and offset).
    pub fn first_skipped(&self) -> Option<&SourceError> {
        self.records.first_skipped()
    }

    /// The file being read.
    pub fn path(&self) -> &Path {
        self.records.lines().path()
    }
}

impl LineError for SourceError {
    fn new(path: PathBuf, line: Option<u64>, offset: Option<u64>, failure: LineFailure) -> Self {
        let kind = match failure {
            LineFailure::Open(e) => SourceErrorKind::Open(e),
            LineFailure::Read(e) => SourceErrorKind::Read(e),
            LineFailure::TooLong { max } => SourceErrorKind::LineTooLong { max },
        };
        SourceError {
            path,
            line,
            offset,
            kind,
        }
    }
}

impl RecordError for SourceError {
    type Record = FieldError;

    fn record(path: PathBuf, line: Option<u64>, line_offset: u64, fe: FieldError) -> SourceError {
        let offset = match fe.kind {
            FieldErrorKind::NotUtf8 { offset } => line_offset + offset as u64,
            _ => line_offset,
        };
        SourceError {
            path,
            line,
            offset: Some(offset),
            kind: SourceErrorKind::Record(fe),
        }
    }

    fn skippable(&self) -> bool {
        self.is_bad_record()
    }
}
