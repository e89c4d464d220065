//! A batched, range-splittable reader of NEXMark JSON-lines files, into
//! compact ([`NexmarkFileReader`]) or full ([`NexmarkFullFileReader`])
//! events.

use std::fmt;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};

use super::json::{parse_full_json_line, parse_json_line, Field, FieldError, FieldErrorKind};
use super::model::{FullEvent, NexEvent};
use crate::sources::lines::{LineError, LineFailure, RecordError, RecordLines};
use crate::sources::live::LiveFeed;
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

/// An event a [`EventFileReader`] parses from a JSON line: [`NexEvent`]
/// ([`parse_json_line`]) or [`FullEvent`] ([`parse_full_json_line`]).
pub trait JsonEvent: Clone + Default {
    /// Parses one line.
    ///
    /// # Errors
    /// What is wrong with the line (the parser's [`FieldError`]).
    fn parse(line: &[u8]) -> Result<Self, FieldError>;
    /// Event time, ms since the Unix epoch.
    fn time_ms(&self) -> u64;
}

impl JsonEvent for NexEvent {
    #[inline]
    fn parse(line: &[u8]) -> Result<NexEvent, FieldError> {
        parse_json_line(line)
    }
    #[inline]
    fn time_ms(&self) -> u64 {
        self.date_time()
    }
}

impl JsonEvent for FullEvent {
    #[inline]
    fn parse(line: &[u8]) -> Result<FullEvent, FieldError> {
        parse_full_json_line(line)
    }
    #[inline]
    fn time_ms(&self) -> u64 {
        self.date_time()
    }
}

/// Reads compact NEXMark events ([`EventFileReader`] of [`NexEvent`]).
pub type NexmarkFileReader = EventFileReader<NexEvent>;

/// Reads full NEXMark events, every field of each line
/// ([`EventFileReader`] of [`FullEvent`]; a line without one of its
/// kind's strings is a bad record naming the field).
pub type NexmarkFullFileReader = EventFileReader<FullEvent>;

/// Reads NEXMark events (`E`: compact [`NexEvent`]s or [`FullEvent`]s)
/// from a JSON-lines file, or from one byte range of it (see
/// [`split_ranges`](crate::sources::ysb::split_ranges)), in batches.
///
/// Forms: each line is ours (a flat object with a `type` member, as
/// [`gen_to_file`](super::gen_to_file) writes) or Apache Beam NEXMark's
/// (`{"newPerson":{…},"newAuction":null,"bid":null}` with ISO-8601 or ms
/// `dateTime`, as [`write_beam_json_line`](super::write_beam_json_line)
/// writes), told apart per line with no option; a file may mix them. The
/// errors and guarantees below are the same for both.
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
pub struct EventFileReader<E> {
    records: RecordLines<SourceError>,
    events: u64,
    max_time: Option<u64>,
    out_of_order: u64,
    _event: std::marker::PhantomData<fn() -> E>,
}

impl<E: JsonEvent> EventFileReader<E> {
    /// A reader of the lines that start in `range` (byte offsets; `0..u64::MAX`
    /// for the whole file).
    pub fn open(
        path: impl AsRef<Path>,
        range: Range<u64>,
        opts: ReaderOptions,
    ) -> Result<EventFileReader<E>, SourceError> {
        let records = RecordLines::open(
            path.as_ref(),
            range,
            opts.max_line_len,
            opts.buffer_size,
            opts.on_bad_record,
        )?;
        Ok(EventFileReader {
            records,
            events: 0,
            max_time: None,
            out_of_order: 0,
            _event: std::marker::PhantomData,
        })
    }

    /// A reader of local worker `local`'s share of the live input `feed`
    /// (standard input, TCP): its lines are numbered, and offsets counted,
    /// from the start of their stream, and errors name the stream (`-:5:
    /// …`). [`fill`](Self::fill) returns `Ok(0)` also when nothing is
    /// queued now: [`is_finished`](Self::is_finished) tells the end apart.
    /// `wake` is called when a chunk is queued for this worker (ring its
    /// doorbell). `None` if that worker's share was taken already.
    /// ([`opts`](ReaderOptions)' `buffer_size` does not apply: the feed
    /// reads.)
    pub fn live(
        feed: &LiveFeed,
        local: usize,
        wake: impl Fn() + Send + Sync + 'static,
        opts: ReaderOptions,
    ) -> Option<EventFileReader<E>> {
        let lines = feed.worker(local, wake)?;
        Some(EventFileReader {
            records: RecordLines::live(lines, opts.on_bad_record),
            events: 0,
            max_time: None,
            out_of_order: 0,
            _event: std::marker::PhantomData,
        })
    }

    /// Whether the input is done: read to its end, or stopped by an error
    /// (a live input that is merely quiet is not).
    pub fn is_finished(&self) -> bool {
        self.records.lines().is_finished() && !self.records.has_pending()
    }

    /// Every event of the file (convenience for tests and tools).
    pub fn read_all(path: impl AsRef<Path>, opts: ReaderOptions) -> Result<Vec<E>, SourceError> {
        let mut r = Self::open(path, 0..u64::MAX, opts)?;
        let mut out = Vec::new();
        let mut batch = vec![E::default(); 4096];
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
    pub fn fill(&mut self, out: &mut [E]) -> Result<usize, SourceError> {
        let (max_time, out_of_order) = (&mut self.max_time, &mut self.out_of_order);
        let n = self.records.fill(out.len(), |n, bytes| {
            let event = E::parse(bytes)?;
            let t = event.time_ms();
            match *max_time {
                Some(m) if t < m => *out_of_order += 1,
                _ => *max_time = Some(t),
            }
            out[n] = event;
            Ok(())
        })?;
        self.events += n as u64;
        Ok(n)
    }

    /// Events delivered so far.
    pub fn records(&self) -> u64 {
        self.events
    }

    /// Lines of the range read so far (blank and bad ones included).
    pub fn lines(&self) -> u64 {
        self.records.lines().lines()
    }

    /// Where the next line starts (bytes into the file): a checkpoint's
    /// position.
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

    /// Events read whose `date_time` was earlier than an event before them.
    pub fn out_of_order(&self) -> u64 {
        self.out_of_order
    }

    /// The latest `date_time` read so far, ms since the Unix epoch (0 before
    /// the first event; `u64::MAX` once the range is exhausted): for a file
    /// in event-time order, no later event of the range is earlier.
    pub fn watermark_ms(&self) -> u64 {
        if self.records.lines().is_finished() && !self.records.has_pending() {
            u64::MAX
        } else {
            self.max_time.unwrap_or(0)
        }
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
