//! The line machinery shared by the file readers: [`LineRange`], the whole
//! lines of one byte range of a file, and [`RecordLines`], the bad-record
//! policy of the JSON-lines readers on top of it.
//!
//! The readers keep their own error types and parsing; they tell this
//! module how to build their errors through [`LineError`] and
//! [`RecordError`].
//!
//! A gzip file ([`LineRange::open_gzip`]) is read whole, decompressed as it
//! is read: its byte offsets are those of the decompressed text.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::marker::PhantomData;
use std::ops::Range;
use std::path::{Path, PathBuf};

use super::live::LiveLines;
use super::ysb::OnBadRecord;

/// What went wrong in a [`LineRange`], for [`LineError::new`].
#[derive(Debug)]
pub(crate) enum LineFailure {
    /// The file could not be opened.
    Open(io::Error),
    /// Reading or seeking failed.
    Read(io::Error),
    /// The line is longer than the limit.
    TooLong {
        /// The limit in bytes, `\n` excluded.
        max: usize,
    },
}

/// How a reader's error type is built for the failures of [`LineRange`].
pub(crate) trait LineError: Sized {
    /// The error `failure` in the file at `path`: at 1-based line `line` of
    /// the file (`None` for open and read errors, or if the lines before the
    /// range could not be counted) and byte `offset` (`None` for open
    /// errors; the failed read for read errors, the line's first byte for
    /// an over-long line).
    fn new(path: PathBuf, line: Option<u64>, offset: Option<u64>, failure: LineFailure) -> Self;
}

/// How a JSON-lines reader's error type is built for a bad record, for
/// [`RecordLines`].
pub(crate) trait RecordError: LineError {
    /// What the reader's parser says of a bad line.
    type Record;
    /// The line that starts at byte `line_offset`, 1-based line `line` of
    /// the file (`None` if it could not be counted), is not a valid record.
    fn record(path: PathBuf, line: Option<u64>, line_offset: u64, record: Self::Record) -> Self;
    /// Whether the error is a bad record (skippable under
    /// [`OnBadRecord::Skip`]) rather than an I/O error.
    fn skippable(&self) -> bool;
}

/// A line found by [`LineRange::next_line`]: bytes `start..end` of
/// [`LineRange::buf`] (without the `\n`, with a `\r` before it if any),
/// valid until the next call that reads.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawLine {
    /// Index of the line's first byte in the buffer.
    pub start: usize,
    /// Index just past the line's last byte (its `\n` excluded).
    pub end: usize,
    /// Byte offset of the line's first byte in the file.
    pub offset: u64,
    /// 1-based number of the line within the range.
    pub number: u64,
}

/// The whole lines of a file, or of one byte range of it, read in chunks.
///
/// Lines: `\n` ends a line; a last line without `\n` is a line; an empty
/// file has no lines. [`RawLine`] keeps a `\r` before the `\n`;
/// [`text`](Self::text) drops it.
///
/// Ranges: a line belongs to the range `[start, end)` that holds its first
/// byte. A range that starts at `start > 0` starts after the first `\n` at
/// or after byte `start - 1` (so a cut just after a `\n` loses nothing), and
/// its last line is read to its end even past `end`.
///
/// Over-long lines (more than `max_line_len` bytes, `\n` excluded) are an
/// error ([`LineFailure::TooLong`]); the next call goes on after the line, so
/// a reader that skips bad lines can keep reading, and one that stops calls
/// [`finish`](Self::finish) (its [`position`](Self::position) is then the
/// line's start if the line was still unterminated in the buffer). A read
/// error ends the range.
#[derive(Debug)]
pub(crate) struct LineRange<E> {
    path: PathBuf,
    file: Input,
    /// Longest accepted line in bytes, `\n` excluded.
    max_line_len: usize,
    /// Bytes asked of the file per read (at least 1).
    buffer_size: usize,
    /// Bytes read and not yet consumed from `pos` on.
    buf: Vec<u8>,
    pos: usize,
    /// File offset of `buf[0]`.
    buf_offset: u64,
    /// End of the range (exclusive; `u64::MAX`: the whole file).
    end: u64,
    /// File offset of the range's first line.
    first_line: u64,
    /// Lines consumed since `first_line` (the current line's local number).
    lines: u64,
    /// Newlines before `first_line`: `None` not counted yet, `Some(None)`
    /// could not be counted.
    prefix_lines: Option<Option<u64>>,
    eof: bool,
    finished: bool,
    /// After an over-long line without its `\n` in the buffer: drop bytes
    /// from `pos` up to its `\n`.
    discarding: bool,
    _error: PhantomData<fn() -> E>,
}

impl<E: LineError> LineRange<E> {
    /// Opens `path` for the lines that start in `range` (byte offsets;
    /// `0..u64::MAX` for the whole file) and skips to the range's first
    /// line. `max_line_len` is in bytes, `\n` excluded; `buffer_size` is the
    /// read size in bytes (at least 1 is used).
    ///
    /// With `count_prefix`, the newlines before the range are counted now,
    /// by reading the file from its start (a failed read is an error);
    /// otherwise the reader seeks, and they are counted on the first call to
    /// [`file_line`](Self::file_line) that needs them.
    ///
    /// # Errors
    /// [`LineFailure::Open`] if the file cannot be opened,
    /// [`LineFailure::Read`] if seeking or reading to the first line fails.
    pub(crate) fn open(
        path: &Path,
        range: Range<u64>,
        max_line_len: usize,
        buffer_size: usize,
        count_prefix: bool,
    ) -> Result<LineRange<E>, E> {
        let path = path.to_path_buf();
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) => return Err(E::new(path, None, None, LineFailure::Open(e))),
        };
        let mut r = LineRange {
            path,
            file: Input::Plain(file),
            max_line_len,
            buffer_size: buffer_size.max(1),
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
            _error: PhantomData,
        };
        if range.start > 0 && !r.finished {
            // The range's first line is the one after the first `\n` at or
            // after `start - 1`.
            let skip_from = range.start - 1;
            let before = if count_prefix {
                Some(r.count_newlines_up_to(skip_from)?)
            } else {
                r.file
                    .seek(SeekFrom::Start(skip_from))
                    .map_err(|e| r.read_error(e, skip_from))?;
                None
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
            if let Some(n) = before {
                // The `\n` just skipped is the only one in
                // `skip_from..first_line`.
                r.prefix_lines = Some(Some(n + 1));
            }
        }
        Ok(r)
    }

    /// Opens the gzip file at `path` for all its lines, decompressed as they
    /// are read (a gzip stream cannot be entered mid-way, so there are no
    /// ranges; several gzip members one after the other are read as one
    /// text, as `gunzip` does). Offsets are those of the decompressed text.
    ///
    /// # Errors
    /// [`LineFailure::Open`] if the file cannot be opened; a file that is not
    /// gzip fails at the first read ([`LineFailure::Read`]).
    pub(crate) fn open_gzip(
        path: &Path,
        max_line_len: usize,
        buffer_size: usize,
    ) -> Result<LineRange<E>, E> {
        let mut r = Self::open(path, 0..u64::MAX, max_line_len, buffer_size, false)?;
        let Input::Plain(file) = std::mem::replace(&mut r.file, Input::Empty) else {
            unreachable!("open makes a plain input");
        };
        let file = io::BufReader::with_capacity(64 << 10, file);
        r.file = Input::Gzip(Box::new(flate2::bufread::MultiGzDecoder::new(file)));
        Ok(r)
    }

    /// The next line of the range, or `None` at its end (and once
    /// finished).
    ///
    /// # Errors
    /// [`LineFailure::TooLong`] for a line over the limit (counted as a
    /// line; the next call goes on after it), [`LineFailure::Read`] if reading
    /// fails (the range is then finished).
    pub(crate) fn next_line(&mut self) -> Result<Option<RawLine>, E> {
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
            let max = self.max_line_len;
            if let Some(k) = memchr::memchr(b'\n', avail) {
                let start = self.pos;
                self.pos += k + 1;
                self.lines += 1;
                if k > max {
                    return Err(self.too_long(offset));
                }
                return Ok(Some(RawLine {
                    start: self.skip_bom(start, start + k, offset),
                    end: start + k,
                    offset,
                    number: self.lines,
                }));
            }
            if avail.len() > max {
                // The line is dropped up to its `\n` on the next call.
                self.lines += 1;
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
                return Ok(Some(RawLine {
                    start: self.skip_bom(start, self.pos, offset),
                    end: self.pos,
                    offset,
                    number: self.lines,
                }));
            }
            self.refill()?;
        }
    }

    /// Where the text of the line at `buf[start..end]` starts: after a
    /// UTF-8 byte-order mark if the line is the file's first (`offset` 0),
    /// which editors on Windows write and RFC 8259 lets a reader ignore.
    fn skip_bom(&self, start: usize, end: usize, offset: u64) -> usize {
        if offset == 0 && self.buf[start..end].starts_with(b"\xEF\xBB\xBF") {
            start + 3
        } else {
            start
        }
    }

    /// Drops the consumed bytes and reads up to `buffer_size` more; a read
    /// error finishes the range.
    fn refill(&mut self) -> Result<(), E> {
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.buf_offset += self.pos as u64;
            self.pos = 0;
        }
        let want = self.buffer_size;
        self.buf.reserve(want);
        let got = match (&mut self.file)
            .take(want as u64)
            .read_to_end(&mut self.buf)
        {
            Ok(n) => n,
            Err(e) => {
                self.finished = true;
                let at = self.buf_offset + self.buf.len() as u64;
                return Err(self.read_error(e, at));
            }
        };
        if got < want {
            self.eof = true;
        }
        Ok(())
    }

    /// Reads bytes `0..upto` from the file's start counting `\n`s, leaving
    /// the file at `upto` (a plain file: ranges of gzip files are whole).
    fn count_newlines_up_to(&mut self, upto: u64) -> Result<u64, E> {
        let mut chunk = vec![0u8; self.buffer_size.min(upto as usize).max(1)];
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

    fn too_long(&mut self, offset: u64) -> E {
        let line = self.file_line(self.lines);
        let max = self.max_line_len;
        E::new(
            self.path.clone(),
            line,
            Some(offset),
            LineFailure::TooLong { max },
        )
    }

    fn read_error(&self, e: io::Error, offset: u64) -> E {
        E::new(self.path.clone(), None, Some(offset), LineFailure::Read(e))
    }
}

impl<E> LineRange<E> {
    /// The buffer that [`RawLine`]s index.
    pub(crate) fn buf(&self) -> &[u8] {
        &self.buf
    }

    /// File offset of `buf()[0]`.
    pub(crate) fn buf_offset(&self) -> u64 {
        self.buf_offset
    }

    /// The bytes of `line`, without one `\r` at their end.
    pub(crate) fn text(&self, line: &RawLine) -> &[u8] {
        let bytes = &self.buf[line.start..line.end];
        match bytes {
            [rest @ .., b'\r'] => rest,
            _ => bytes,
        }
    }

    /// Lines of the range consumed so far (over-long ones included).
    pub(crate) fn lines(&self) -> u64 {
        self.lines
    }

    /// File offset of the next byte to consume.
    pub(crate) fn position(&self) -> u64 {
        self.buf_offset + self.pos as u64
    }

    /// The file being read.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the range is done (read to its end, or ended by an error or
    /// [`finish`](Self::finish)).
    pub(crate) fn is_finished(&self) -> bool {
        self.finished
    }

    /// Ends the range: [`next_line`](Self::next_line) returns `None` from
    /// now on.
    pub(crate) fn finish(&mut self) {
        self.finished = true;
    }

    /// The newlines before the range, if counted already (by
    /// [`open`](Self::open) with `count_prefix`, or on an error); `None` for
    /// a range that starts at the file's start.
    pub(crate) fn counted_prefix_lines(&self) -> Option<u64> {
        self.prefix_lines.flatten()
    }

    /// The 1-based line of the file of the range's line `local` (1-based
    /// within the range). The lines before the range are counted once, on
    /// the first call that needs them, with a second handle so the reading
    /// position is kept; `None` if that fails.
    pub(crate) fn file_line(&mut self, local: u64) -> Option<u64> {
        if self.first_line == 0 {
            return Some(local);
        }
        let (path, first_line) = (&self.path, self.first_line);
        let prefix = *self
            .prefix_lines
            .get_or_insert_with(|| count_newlines(path, first_line));
        prefix.map(|p| p + local)
    }
}

/// What a [`LineRange`] reads: a plain file, or a gzip file through its
/// decoder.
enum Input {
    /// A plain file (seekable).
    Plain(File),
    /// A gzip file, decompressed as it is read.
    Gzip(Box<flate2::bufread::MultiGzDecoder<io::BufReader<File>>>),
    /// Nothing (while the input is being replaced).
    Empty,
}

impl std::fmt::Debug for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Input::Plain(_) => "Plain",
            Input::Gzip(_) => "Gzip",
            Input::Empty => "Empty",
        })
    }
}

impl Read for Input {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Input::Plain(f) => f.read(buf),
            Input::Gzip(d) => d.read(buf),
            Input::Empty => Ok(0),
        }
    }
}

impl Input {
    /// Seeks a plain file; a gzip stream cannot seek.
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        match self {
            Input::Plain(f) => f.seek(to),
            _ => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "a gzip file is read whole",
            )),
        }
    }
}

/// Newlines in the first `len` bytes of the file at `path`; `None` if it
/// cannot be read or is shorter.
fn count_newlines(path: &Path, len: u64) -> Option<u64> {
    let mut f = File::open(path).ok()?;
    let mut left = len;
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
}

/// The records of a JSON-lines range, one a line, under a bad-record
/// policy: a `\r` before the `\n` is dropped, blank (empty or
/// whitespace-only) lines are skipped, and a bad record (an error that
/// [`RecordError::skippable`] says is one) is counted and passed over under
/// [`OnBadRecord::Skip`]. Any other error, or a bad record under
/// [`OnBadRecord::Fail`], ends the reader: the records before it are
/// delivered first and the error on the next call.
#[derive(Debug)]
pub(crate) struct RecordLines<E> {
    lines: Lines<E>,
    on_bad_record: OnBadRecord,
    /// An error to return on the next call.
    pending: Option<E>,
    skipped: u64,
    first_skipped: Option<E>,
}

impl<E: RecordError> RecordLines<E> {
    /// Opens `path` for the records of the lines that start in `range`
    /// (see [`LineRange::open`]; the lines before the range are counted
    /// only when an error needs them).
    ///
    /// # Errors
    /// As [`LineRange::open`].
    pub(crate) fn open(
        path: &Path,
        range: Range<u64>,
        max_line_len: usize,
        buffer_size: usize,
        on_bad_record: OnBadRecord,
    ) -> Result<RecordLines<E>, E> {
        let lines = LineRange::open(path, range, max_line_len, buffer_size, false)?;
        Ok(Self::file(lines, on_bad_record))
    }

    /// The records of `lines` (opened by [`LineRange::open`] or
    /// [`LineRange::open_gzip`]) under the policy `on_bad_record`.
    pub(crate) fn file(lines: LineRange<E>, on_bad_record: OnBadRecord) -> RecordLines<E> {
        RecordLines {
            lines: Lines::File(lines),
            on_bad_record,
            pending: None,
            skipped: 0,
            first_skipped: None,
        }
    }

    /// The records of one worker's share of a live input, under the same
    /// policy. [`fill`](Self::fill) returns `Ok(0)` also when nothing is
    /// queued now: [`Lines::is_finished`] tells the end apart.
    pub(crate) fn live(lines: LiveLines<E>, on_bad_record: OnBadRecord) -> RecordLines<E> {
        RecordLines {
            lines: Lines::Live(lines),
            on_bad_record,
            pending: None,
            skipped: 0,
            first_skipped: None,
        }
    }

    /// Calls `record(n, bytes)` for the next non-blank lines (`bytes`
    /// without `\n` and `\r`; `n` the number of records accepted so far in
    /// this call) until `max` records are accepted or the range ends, and
    /// returns how many were; `Ok(0)`: the range is exhausted (so `max`
    /// must be > 0). `record` accepts a line with `Ok`, or rejects it with
    /// what [`RecordError::record`] makes an error of.
    ///
    /// # Errors
    /// The error that ends the reader (see the type's docs), once.
    pub(crate) fn fill(
        &mut self,
        max: usize,
        mut record: impl FnMut(usize, &[u8]) -> Result<(), E::Record>,
    ) -> Result<usize, E> {
        if let Some(e) = self.pending.take() {
            return Err(e);
        }
        let mut n = 0;
        while n < max {
            let line = match self.lines.next_line() {
                Ok(Some(line)) => line,
                Ok(None) => break,
                Err(e) => {
                    self.on_error(e, n)?;
                    if self.lines.is_finished() {
                        break;
                    }
                    continue;
                }
            };
            let bytes = self.lines.text(&line);
            if bytes.first().is_none_or(|c| c.is_ascii_whitespace())
                && bytes.trim_ascii().is_empty()
            {
                continue;
            }
            match record(n, bytes) {
                Ok(()) => n += 1,
                Err(bad) => {
                    let number = self.lines.file_line(line.number);
                    let path = self.lines.path().to_path_buf();
                    let e = E::record(path, number, line.offset, bad);
                    self.on_error(e, n)?;
                    if self.lines.is_finished() {
                        break;
                    }
                }
            }
        }
        Ok(n)
    }

    /// Skips the lines of a file range that start before `offset` (a
    /// resume into a gzip file, which cannot seek), counting them.
    ///
    /// # Errors
    /// A read error.
    pub(crate) fn skip_to(&mut self, offset: u64) -> Result<(), E> {
        while self.position().is_some_and(|p| p < offset) {
            if self.lines.next_line()?.is_none() {
                break;
            }
        }
        Ok(())
    }

    /// Applies the bad-record policy: `Err` to return now; `Ok` to go on
    /// (skipped) or, with the range finished, to return the `n` records
    /// first.
    fn on_error(&mut self, e: E, n: usize) -> Result<(), E> {
        if e.skippable() && self.on_bad_record == OnBadRecord::Skip {
            self.skipped += 1;
            self.first_skipped.get_or_insert(e);
            return Ok(());
        }
        self.lines.finish();
        if n == 0 {
            return Err(e);
        }
        self.pending = Some(e);
        Ok(())
    }
}

impl<E> RecordLines<E> {
    /// The lines underneath (counts, path, state).
    pub(crate) fn lines(&self) -> &Lines<E> {
        &self.lines
    }

    /// Whether an error is held back for the next call.
    pub(crate) fn has_pending(&self) -> bool {
        self.pending.is_some()
    }

    /// Where the next line of a file range starts (bytes into the file;
    /// into the decompressed text of a gzip file); `None` for a live input.
    pub(crate) fn position(&self) -> Option<u64> {
        match &self.lines {
            Lines::File(l) => Some(l.position()),
            Lines::Live(_) => None,
        }
    }

    /// Bad records skipped under [`OnBadRecord::Skip`].
    pub(crate) fn skipped(&self) -> u64 {
        self.skipped
    }

    /// The first bad record skipped, if any.
    pub(crate) fn first_skipped(&self) -> Option<&E> {
        self.first_skipped.as_ref()
    }
}

/// The lines a [`RecordLines`] reads: one byte range of a file, or one
/// worker's share of a live input.
#[derive(Debug)]
pub(crate) enum Lines<E> {
    /// A byte range of a file.
    File(LineRange<E>),
    /// A worker's chunks of a live input.
    Live(LiveLines<E>),
}

impl<E: LineError> Lines<E> {
    /// The next line (see [`LineRange::next_line`] and
    /// [`LiveLines::next_line`]).
    fn next_line(&mut self) -> Result<Option<RawLine>, E> {
        match self {
            Lines::File(l) => l.next_line(),
            Lines::Live(l) => l.next_line(),
        }
    }

    /// The 1-based line number of the input of the line numbered `local`
    /// by [`RawLine::number`].
    fn file_line(&mut self, local: u64) -> Option<u64> {
        match self {
            Lines::File(l) => l.file_line(local),
            Lines::Live(_) => Some(local),
        }
    }
}

impl<E> Lines<E> {
    /// The bytes of `line`, without one `\r` at their end.
    fn text(&self, line: &RawLine) -> &[u8] {
        match self {
            Lines::File(l) => l.text(line),
            Lines::Live(l) => l.text(line),
        }
    }

    /// Lines consumed so far (over-long ones included).
    pub(crate) fn lines(&self) -> u64 {
        match self {
            Lines::File(l) => l.lines(),
            Lines::Live(l) => l.lines(),
        }
    }

    /// The input being read (for a live input: the stream of the current
    /// line).
    pub(crate) fn path(&self) -> &Path {
        match self {
            Lines::File(l) => l.path(),
            Lines::Live(l) => l.path(),
        }
    }

    /// Whether the input is done (a live input: ended, not merely quiet).
    pub(crate) fn is_finished(&self) -> bool {
        match self {
            Lines::File(l) => l.is_finished(),
            Lines::Live(l) => l.is_finished(),
        }
    }

    /// Stops reading.
    fn finish(&mut self) {
        match self {
            Lines::File(l) => l.finish(),
            Lines::Live(l) => l.finish(),
        }
    }
}
