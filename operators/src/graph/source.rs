//! File sources for user programs: records of the user's own serde type
//! from JSON-lines files ([`JsonLinesSource`]) or CSV files with a header
//! ([`CsvSource`]), one record a line.
//!
//! Both are a [`FileSource`] with a [`FileFormat`]. A source reads one
//! worker's share of its files: the plain files, laid end to end, are cut
//! into one byte range per worker, and each worker reads the whole lines
//! that start in its range (no worker reads the whole file, none reads a
//! byte twice, except the few bytes to the end of its last line). A gzip
//! file (`.gz`) cannot be entered mid-way: gzip files are dealt whole, the
//! `k`-th to worker `k % workers` (see [`crate::sources::files`]).
//!
//! With checkpoints a source saves where it stands in its pieces, and
//! resumes there; resumed at another worker count, each new worker takes a
//! share of what the old workers had still to read (dealt by bytes), and a
//! worker with several old workers' remainders merges them by the event
//! time [`FileSource::event_time_of`] gives (see
//! [`crate::sources::files`], "Checkpoints").

use crate::sources::file_merge::{MergedPieces, PieceSource, Streams, TimeOf};
use crate::sources::files::{self, FilePiece, PieceStream, StreamsPosition};
use crate::sources::lines::{LineError, LineFailure, LineRange, RecordError, RecordLines};
use crate::sources::ysb::OnBadRecord;
use crate::sources::{fast_json, json_scan};
use air_runtime::dataflow::{Source, SourcePoll, Stats};
use serde::de::DeserializeOwned;
use std::fmt;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Default longest line a file source accepts, in bytes (16 MiB, `\n`
/// excluded); [`FileSource::max_line_len`] changes it.
pub const DEFAULT_MAX_LINE_LEN: usize = 16 << 20;

/// Bytes a file source asks of its file per read (256 KiB).
const READ_SIZE: usize = 256 << 10;

/// How the lines of a [`FileSource`] become records: JSON lines
/// ([`JsonFormat`]), CSV rows ([`CsvFormat`]), or a format of your own.
pub trait FileFormat: Send + 'static {
    /// The records.
    type Item: Clone + Send + 'static;
    /// The format's name in the job's counters: records read are counted
    /// as `"{NAME}_records"`.
    const NAME: &'static str;
    /// Whether every file starts with a header line (its first non-blank
    /// line), which is handed to [`header`](Self::header) and is not a
    /// record. Every worker reads the header of each file it reads a
    /// piece of, before the piece.
    const HEADER: bool;
    /// Takes the header line of the file that the next lines come from
    /// (only if [`HEADER`](Self::HEADER); `\n` and `\r` removed).
    ///
    /// # Errors
    /// A header that cannot be used stops the job.
    fn header(&mut self, line: &[u8]) -> Result<(), RecordFault> {
        let _ = line;
        Ok(())
    }
    /// A new format of the same kind, as it was before any line: on a
    /// resume at another worker count a worker may read the remainders of
    /// several old workers at once, each with a format of its own. `None`
    /// (the default): such a resume is refused where a worker gets more
    /// than one (with one, it reads it with this format).
    fn fresh(&self) -> Option<Self>
    where
        Self: Sized,
    {
        None
    }
    /// The record of one non-blank line (`\n` and `\r` removed).
    ///
    /// # Errors
    /// What is wrong with the line: the source adds the file, the line
    /// number and the byte offset.
    fn parse(&mut self, line: &[u8]) -> Result<Self::Item, RecordFault>;
}

/// What is wrong with a line, as a [`FileFormat`] says; the source names
/// the file, the line and the byte offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordFault {
    /// The field at fault, if known: a JSON key path (`user`,
    /// `address.city`, `items[2]`) or a CSV column name.
    pub field: Option<String>,
    /// 1-based byte column in the line where the parser stopped, if known.
    pub column: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl RecordFault {
    /// A fault of the whole line.
    pub fn new(message: impl Into<String>) -> RecordFault {
        RecordFault {
            field: None,
            column: None,
            message: message.into(),
        }
    }
}

/// Bad records that a source skipped ([`OnBadRecord::Skip`]), shared by
/// every worker's source of a job: how many, and the first in input order
/// (the earliest file of the list, then the earliest line). Make one before
/// the job and hand a clone to each worker's source with
/// [`FileSource::bad_records`]; read it after the job. The count is also
/// in the job's `skipped_records` counter.
#[derive(Clone, Debug, Default)]
pub struct BadRecords(Arc<Mutex<BadRecordsInner>>);

#[derive(Debug, Default)]
struct BadRecordsInner {
    count: u64,
    /// (file index in the source's list, byte offset, message).
    first: Option<(usize, u64, String)>,
}

impl BadRecords {
    /// A new, empty report.
    pub fn new() -> BadRecords {
        BadRecords::default()
    }

    /// Bad records skipped so far, over every source it was given to.
    pub fn count(&self) -> u64 {
        self.lock().count
    }

    /// The first bad record skipped, as `file:line: what (byte offset N)`.
    pub fn first(&self) -> Option<String> {
        self.lock().first.as_ref().map(|f| f.2.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BadRecordsInner> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn add(&self, n: u64, first: Option<(usize, u64, String)>) {
        let mut r = self.lock();
        r.count += n;
        if let Some(f) = first {
            if r.first.as_ref().is_none_or(|g| (f.0, f.1) < (g.0, g.1)) {
                r.first = Some(f);
            }
        }
    }
}

/// Records of type `F::Item` from files of format `F`, this worker's share
/// of them (see the [module docs](self)): [`JsonLinesSource`] and
/// [`CsvSource`] are the two formats built in.
///
/// Files: a path, a glob pattern (`data/*.jsonl`, `logs/**/*.jsonl.gz`:
/// the files it matches, in alphabetical order) or a list of both
/// ([`JsonLinesSource::shard_files`]). Names ending in `.gz` are gzip,
/// decompressed as they are read; a gzip file is read whole by one worker,
/// so a single `.gz` file is read by one worker and the others have
/// nothing to read (split it into several files, or decompress it, to
/// read it in parallel). Files are found and opened at the first poll, so
/// a missing file stops the job then. Each worker finds the files and
/// reads their sizes itself, so they must not change while the job runs
/// (a file that grows is a live input: [`LiveSource`](super::LiveSource)).
///
/// Lines: `\n` ends a line, a `\r` before it is dropped (CRLF files read
/// as LF files), a last line without `\n` is read, a UTF-8 byte-order
/// mark at the start of a file is ignored, and blank lines (empty or
/// whitespace only) are skipped: they are not records. An empty file has
/// no records. A line longer than [`max_line_len`](Self::max_line_len) is
/// a bad record.
///
/// Errors: a line that does not parse is a bad record. By default
/// ([`OnBadRecord::Fail`]) it stops the job with an error naming the file,
/// the 1-based line of the file (right in every worker's range), the field
/// and the byte offset, e.g. ``clicks.jsonl:3: field `user`: invalid type:
/// string "x", expected u32 (column 12, byte offset 40)``; the records
/// before it have been processed. [`OnBadRecord::Skip`] counts it in
/// `skipped_records` and goes on (see [`on_bad_record`](Self::on_bad_record)).
/// A file that cannot be opened or read always stops the job.
///
/// Counters: `{F::NAME}_records` (`json_records`, `csv_records`): records
/// read; `skipped_records`: bad records skipped.
pub struct FileSource<F: FileFormat> {
    format: F,
    specs: Vec<PathBuf>,
    index: usize,
    workers: usize,
    on_bad_record: OnBadRecord,
    max_line_len: usize,
    report_to: Option<BadRecords>,
    /// The files of `specs`, found at the first poll.
    files: Vec<PathBuf>,
    /// This worker's pieces still to read (found at the first poll).
    pieces: Option<std::vec::IntoIter<FilePiece>>,
    /// The piece being read: its file's index in `files`, and its records.
    current: Option<(usize, RecordLines<FileError>)>,
    /// The next record line of the current piece is its file's header.
    header_next: bool,
    error: Option<String>,
    done: bool,
    read: u64,
    /// Bad records skipped in the pieces read to their end.
    skipped: u64,
    /// Bad records of the current piece already counted in `report_to`.
    reported: u64,
    /// Whether the first skipped record was announced.
    announced: bool,
    /// Pieces taken from `pieces` so far (the current one included).
    taken: u64,
    /// [`files::pieces_fingerprint`] of this worker's pieces (found with
    /// them; 0 before).
    fingerprint: u64,
    /// A checkpoint's position to start from (set by `restore`, applied
    /// when the pieces are found).
    resume: Option<files::PiecesPosition>,
    /// In the first piece after a resume into a gzip file: the
    /// decompressed offset to skip to.
    skip_to: Option<u64>,
    /// The piece being read.
    open: Option<FilePiece>,
    /// After a resume at another worker count: the one stream of pieces
    /// to read instead of this worker's own (taken at the first poll),
    /// and the [`files::inputs_fingerprint`] its later checkpoints are
    /// checked by (they save a [`StreamsPosition`]).
    given: Option<(Option<Vec<FilePiece>>, u64)>,
    /// After a resume at another worker count with several streams: their
    /// merge, which this source's polls read.
    merged: Option<Box<MergedPieces<FileSource<F>>>>,
    /// A record's event time, for that merge (`None`: the streams are read
    /// one after the other).
    time_of: Option<TimeOf<F::Item>>,
}

impl<F: FileFormat> FileSource<F> {
    /// Worker `index` of `workers`' share of the files `paths` (each a path
    /// or a glob pattern), read as `format` says.
    ///
    /// # Panics
    /// If `index >= workers` (when `workers` > 0).
    pub fn with_format<P: AsRef<Path>>(
        format: F,
        paths: impl IntoIterator<Item = P>,
        index: usize,
        workers: usize,
    ) -> Self {
        let workers = workers.max(1);
        assert!(index < workers, "worker {index} of {workers}");
        FileSource {
            format,
            specs: paths
                .into_iter()
                .map(|p| p.as_ref().to_path_buf())
                .collect(),
            index,
            workers,
            on_bad_record: OnBadRecord::Fail,
            max_line_len: DEFAULT_MAX_LINE_LEN,
            report_to: None,
            files: Vec::new(),
            pieces: None,
            current: None,
            header_next: false,
            error: None,
            done: false,
            read: 0,
            skipped: 0,
            reported: 0,
            announced: false,
            taken: 0,
            fingerprint: 0,
            resume: None,
            skip_to: None,
            open: None,
            given: None,
            merged: None,
            time_of: None,
        }
    }

    /// A record's event time, ms, as the job's `event_time` stage reads
    /// it: on a resume at another worker count, a worker that reads what
    /// several old workers had left merges their records by it, so that
    /// none is later behind the watermark than in the run that took the
    /// checkpoint (see [`crate::sources::files`]). Without it such a
    /// worker reads them one after the other: fine for a job without
    /// event time, but a windowed job may then count records as late.
    pub fn event_time_of(mut self, time: impl Fn(&F::Item) -> u64 + Send + Sync + 'static) -> Self {
        self.time_of = Some(std::sync::Arc::new(time));
        self
    }

    /// What to do with a line that is not a valid record (or is longer than
    /// [`max_line_len`](Self::max_line_len)): [`OnBadRecord::Fail`] (the
    /// default) stops the job with an error naming it, after the records
    /// before it; [`OnBadRecord::Skip`] counts it (`skipped_records`, and
    /// [`bad_records`](Self::bad_records) if given) and goes on. The first
    /// one a worker skips is printed on standard error unless a
    /// [`BadRecords`] report is given. I/O errors always stop the job.
    ///
    /// ```
    /// use air_operators::graph::*;
    /// use air_runtime::dataflow::run_graph;
    /// use air_runtime::JobConfig;
    ///
    /// #[derive(Clone, serde::Deserialize)]
    /// struct Click { user: u32 }
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("clicks.jsonl");
    /// std::fs::write(&path, "{\"user\": 1}\n{\"user\": \"x\"}\n{\"user\": 3}\n").unwrap();
    /// let cfg = JobConfig { workers: 1, pin: false, ..JobConfig::default() };
    /// let bad = BadRecords::new();
    /// let report = bad.clone();
    /// let out = run_graph(&cfg, move |df| {
    ///     df.source(
    ///         JsonLinesSource::<Click>::shard(&path, df.index(), df.workers())
    ///             .on_bad_record(OnBadRecord::Skip)
    ///             .bad_records(&report),
    ///     )
    ///     .for_each(|_| {});
    /// })
    /// .unwrap();
    /// assert_eq!(out.stats.get("json_records"), 2);
    /// assert_eq!(out.stats.get("skipped_records"), 1);
    /// assert_eq!(bad.count(), 1);
    /// let first = bad.first().unwrap();
    /// assert!(first.contains("clicks.jsonl:2: field `user`: invalid type"), "{first}");
    /// ```
    pub fn on_bad_record(mut self, policy: OnBadRecord) -> Self {
        self.on_bad_record = policy;
        self
    }

    /// Where skipped bad records are reported (their count and the first
    /// in input order), shared by every worker's source; see
    /// [`BadRecords`].
    pub fn bad_records(mut self, report: &BadRecords) -> Self {
        self.report_to = Some(report.clone());
        self
    }

    /// The longest line accepted, in bytes, `\n` excluded (default
    /// [`DEFAULT_MAX_LINE_LEN`], 16 MiB); a longer line is a bad record.
    /// A worker's memory holds about one such line plus 256 KiB.
    pub fn max_line_len(mut self, bytes: usize) -> Self {
        self.max_line_len = bytes;
        self
    }

    /// The inputs, for messages: `PATH` or `PATH, PATH, …`.
    fn describe(&self) -> String {
        self.specs
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn fail(&mut self, message: String) -> SourcePoll {
        self.error = Some(message);
        self.done = true;
        SourcePoll::Done
    }

    /// Opens the next piece (and reads its file's header if the format has
    /// one); `Ok(false)` when there is none left.
    fn open_next(&mut self) -> Result<bool, String> {
        let pieces = match &mut self.pieces {
            Some(p) => p,
            None if matches!(self.given, Some((Some(_), _))) => {
                let mine = self
                    .given
                    .as_mut()
                    .and_then(|g| g.0.take())
                    .unwrap_or_default();
                self.pieces.insert(mine.into_iter())
            }
            None => {
                self.files = files::expand(&self.specs).map_err(|e| e.to_string())?;
                let mut mine = files::shard_files(&self.files, self.index, self.workers)
                    .map_err(|e| e.to_string())?;
                self.fingerprint =
                    files::pieces_fingerprint(mine.iter().map(|p| (p.path.as_path(), &p.range)));
                if let Some(pos) = self.resume.take() {
                    self.skip_to = pos
                        .apply(&mut mine, self.fingerprint, |p| &mut p.range, |p| p.gzip)
                        .map_err(|e| format!("resuming {}: {e}", self.describe()))?;
                    self.taken = pos.done;
                }
                self.pieces.insert(mine.into_iter())
            }
        };
        let Some(piece) = pieces.next() else {
            return Ok(false);
        };
        self.taken += 1;
        // A gzip piece of a rescaled share starts at a decompressed offset.
        let skip_to = self
            .skip_to
            .take()
            .or((piece.gzip && piece.range.start > 0).then_some(piece.range.start));
        let file = self
            .files
            .iter()
            .position(|f| *f == piece.path)
            .unwrap_or(0);
        let lines = open_lines(&piece, self.max_line_len, READ_SIZE).map_err(|e| e.to_string())?;
        self.header_next = F::HEADER && piece.range.start == 0 && skip_to.is_none();
        if F::HEADER && !self.header_next {
            let header = read_header(&piece, self.max_line_len)?;
            self.format
                .header(&header)
                .map_err(|f| format!("{}:1: header: {}", piece.path.display(), fault_text(&f)))?;
        }
        let mut records = RecordLines::file(lines, self.on_bad_record);
        if let Some(offset) = skip_to {
            records.skip_to(offset).map_err(|e| e.to_string())?;
        }
        self.current = Some((file, records));
        self.open = Some(piece);
        self.reported = 0;
        Ok(true)
    }

    /// Goes on with `streams` (found before the first poll, with
    /// `self.files`): one read by this source, several merged.
    fn go_on_with(&mut self, streams: Vec<PieceStream>) -> Result<(), String> {
        let inputs = files::inputs_fingerprint(&self.files);
        let (specs, index, workers) = (self.specs.clone(), self.index, self.workers);
        let (on_bad, max_line, report) = (
            self.on_bad_record,
            self.max_line_len,
            self.report_to.clone(),
        );
        let several = streams.len() > 1 || streams.first().is_some_and(|s| s.skip > 0);
        let formats: Vec<F> = if several {
            streams
                .iter()
                .map(|_| self.format.fresh())
                .collect::<Option<_>>()
                .ok_or_else(|| {
                    format!(
                        "resuming {}: this worker gets what {} old workers had left to read, \
                         and its format cannot make a fresh copy of itself for each \
                         (FileFormat::fresh): rerun with the old worker count",
                        self.describe(),
                        streams.len()
                    )
                })?
        } else {
            Vec::new()
        };
        let mut formats = formats.into_iter();
        let all = self.files.clone();
        let make = |s: PieceStream| {
            let format = formats.next();
            let mut src = FileSource {
                on_bad_record: on_bad,
                max_line_len: max_line,
                report_to: report.clone(),
                ..FileSource::with_format(
                    format.expect("a format per stream"),
                    specs.clone(),
                    index,
                    workers,
                )
            };
            src.files = all.clone();
            src.given = Some((Some(s.pieces), inputs));
            src
        };
        if !several {
            let pieces = streams
                .into_iter()
                .next()
                .map(|s| s.pieces)
                .unwrap_or_default();
            self.given = Some((Some(pieces), inputs));
            return Ok(());
        }
        let time = self
            .time_of
            .clone()
            .unwrap_or_else(|| std::sync::Arc::new(|_: &F::Item| 0));
        let files: std::sync::Arc<[PathBuf]> = self.files.clone().into();
        match MergedPieces::of(streams, make, time, files, inputs) {
            Streams::Merged(m) => self.merged = Some(m),
            Streams::One(_) => unreachable!("several streams"),
        }
        Ok(())
    }

    /// Its pieces still to read (between polls): the open one from its
    /// next line, then the others.
    fn remaining(&self) -> Vec<FilePiece> {
        let mut out = Vec::new();
        if let (Some((_, records)), Some(open)) = (&self.current, &self.open) {
            if let Some(at) = records.position() {
                let start = if open.gzip {
                    at
                } else {
                    at.max(open.range.start)
                };
                if open.gzip || start < open.range.end {
                    out.push(FilePiece {
                        range: start..open.range.end,
                        ..open.clone()
                    });
                }
            }
        }
        if let Some((Some(given), _)) = &self.given {
            out.extend(given.iter().cloned());
        } else if let Some(rest) = &self.pieces {
            out.extend(rest.as_slice().iter().cloned());
        }
        out
    }

    /// Reports the skipped records of the current piece not reported yet
    /// (to [`BadRecords`], or the first one on standard error).
    fn note_skipped(&mut self) {
        let Some((file, records)) = &self.current else {
            return;
        };
        let n = records.skipped();
        if n == self.reported {
            return;
        }
        let first = records.first_skipped();
        match &self.report_to {
            Some(report) => {
                let first = first
                    .filter(|_| self.reported == 0)
                    .map(|e| (*file, e.offset.unwrap_or(0), e.to_string()));
                report.add(n - self.reported, first);
            }
            None if !self.announced => {
                if let Some(e) = first {
                    air_runtime::say!(
                        "air: warning: skipped a bad record: {e} (later ones are only counted, \
                         in skipped_records)"
                    );
                }
                self.announced = true;
            }
            None => {}
        }
        self.reported = n;
    }
}

impl<F: FileFormat + Default> FileSource<F> {
    /// Worker `index` of `workers`' share of the records of `path`: a
    /// file, or a glob pattern for several (see [`FileSource`]), in the
    /// format `F` (`JsonLinesSource::<T>::shard`, `CsvSource::<T>::shard`).
    /// Nothing is read until the first poll.
    ///
    /// ```
    /// use air_operators::graph::*;
    /// use air_runtime::dataflow::run_graph;
    /// use air_runtime::JobConfig;
    /// use std::sync::{Arc, Mutex};
    ///
    /// #[derive(Clone, serde::Deserialize)]
    /// struct Click { user: u32, time_ms: u64 }
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("clicks.jsonl");
    /// std::fs::write(
    ///     &path,
    ///     "{\"user\": 1, \"time_ms\": 100}\n{\"user\": 2, \"time_ms\": 200}\n{\"time_ms\": 300, \"user\": 1}\n",
    /// )
    /// .unwrap();
    /// let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
    /// let rows = Arc::new(Mutex::new(Vec::new()));
    /// let out = rows.clone();
    /// run_graph(&cfg, move |df| {
    ///     let out = out.clone();
    ///     df.source(JsonLinesSource::<Click>::shard(&path, df.index(), df.workers()))
    ///         .for_each(move |c| out.lock().unwrap().push((c.user, c.time_ms)));
    /// })
    /// .unwrap();
    /// let mut rows = rows.lock().unwrap().clone();
    /// rows.sort();
    /// // Each line read by exactly one of the two workers.
    /// assert_eq!(rows, [(1, 100), (1, 300), (2, 200)]);
    /// ```
    pub fn shard(path: impl AsRef<Path>, index: usize, workers: usize) -> Self {
        Self::shard_files([path], index, workers)
    }

    /// Worker `index` of `workers`' share of the records of several files
    /// (each a path or a glob pattern, in order): their bytes together are
    /// split evenly over the workers (gzip files dealt whole).
    ///
    /// ```
    /// use air_operators::graph::*;
    /// use air_runtime::dataflow::run_graph;
    /// use air_runtime::JobConfig;
    ///
    /// #[derive(Clone, serde::Deserialize)]
    /// struct Click { user: u32 }
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// for (name, text) in [("a.jsonl", "{\"user\": 1}\n"), ("b.jsonl", "{\"user\": 2}\n"), ("c.json", "{\"user\": 3}")] {
    ///     std::fs::write(dir.path().join(name), text).unwrap();
    /// }
    /// let files = [dir.path().join("*.jsonl"), dir.path().join("c.json")];
    /// let cfg = JobConfig { workers: 3, pin: false, ..JobConfig::default() };
    /// let out = run_graph(&cfg, move |df| {
    ///     df.source(JsonLinesSource::<Click>::shard_files(&files, df.index(), df.workers()))
    ///         .for_each(|_| {});
    /// })
    /// .unwrap();
    /// assert_eq!(out.stats.get("json_records"), 3);
    /// ```
    pub fn shard_files<P: AsRef<Path>>(
        paths: impl IntoIterator<Item = P>,
        index: usize,
        workers: usize,
    ) -> Self {
        Self::with_format(F::default(), paths, index, workers)
    }
}

/// The lines of `piece`.
fn open_lines(
    piece: &FilePiece,
    max_line_len: usize,
    buffer_size: usize,
) -> Result<LineRange<FileError>, FileError> {
    if piece.gzip {
        LineRange::open_gzip(&piece.path, max_line_len, buffer_size)
    } else {
        LineRange::open(
            &piece.path,
            piece.range.clone(),
            max_line_len,
            buffer_size,
            false,
        )
    }
}

/// The first non-blank line of `piece`'s file (empty if it has none).
fn read_header(piece: &FilePiece, max_line_len: usize) -> Result<Vec<u8>, String> {
    let whole = FilePiece {
        range: 0..u64::MAX,
        ..piece.clone()
    };
    let mut lines = open_lines(&whole, max_line_len, 16 << 10).map_err(|e| e.to_string())?;
    while let Some(line) = lines.next_line().map_err(|e| e.to_string())? {
        let text = lines.text(&line);
        if !text.trim_ascii().is_empty() {
            return Ok(text.to_vec());
        }
    }
    Ok(Vec::new())
}

impl<F: FileFormat> Source for FileSource<F> {
    type Item = F::Item;

    fn poll(&mut self, buf: &mut Vec<F::Item>, max: usize) -> SourcePoll {
        if let Some(m) = &mut self.merged {
            return m.poll(buf, max);
        }
        buf.clear();
        if self.done {
            return SourcePoll::Done;
        }
        while buf.len() < max {
            if self.current.is_none() {
                match self.open_next() {
                    Ok(true) => {}
                    Ok(false) => {
                        self.done = true;
                        return SourcePoll::Done;
                    }
                    Err(e) => return self.fail(e),
                }
            }
            let (_, records) = self.current.as_mut().expect("a piece is open");
            let (format, header_next) = (&mut self.format, &mut self.header_next);
            let before = buf.len();
            let got = records.fill(max - before, |_, line| {
                if std::mem::take(header_next) {
                    return format.header(line).map_err(|f| RecordFault {
                        message: format!("header: {}", f.message),
                        ..f
                    });
                }
                buf.push(format.parse(line)?);
                Ok(())
            });
            self.read += (buf.len() - before) as u64;
            self.note_skipped();
            match got {
                Ok(0) => {
                    let (_, records) = self.current.take().expect("a piece is open");
                    self.skipped += records.skipped();
                }
                Ok(_) => {}
                // The records before the error are in `buf`: the job
                // processes them, then fails.
                Err(e) => return self.fail(e.to_string()),
            }
        }
        SourcePoll::Ready
    }

    fn take_error(&mut self) -> Option<String> {
        match &mut self.merged {
            Some(m) => m.take_error(),
            None => self.error.take(),
        }
    }

    /// Its place in its pieces ([`files::PiecesPosition`]): pieces read
    /// to their end, and where the next line of the open one starts. After
    /// a resume at another worker count: its streams' remaining pieces
    /// ([`StreamsPosition`]).
    fn save(&self) -> Option<Vec<u8>> {
        if let Some(m) = &self.merged {
            return Some(m.save());
        }
        if let Some((given, inputs)) = &self.given {
            let pieces = match given {
                Some(pieces) => pieces.clone(),
                None => self.remaining(),
            };
            let streams = vec![PieceStream { pieces, skip: 0 }];
            return Some(
                StreamsPosition {
                    inputs: *inputs,
                    streams,
                }
                .save(&self.files),
            );
        }
        let pos = match (&self.resume, &self.current) {
            // Restored and not polled since: the position it was given.
            (Some(pos), _) => *pos,
            (None, Some((_, records))) => files::PiecesPosition {
                done: self.taken - 1,
                offset: records.position(),
                fingerprint: self.fingerprint,
            },
            (None, None) => files::PiecesPosition {
                done: self.taken,
                offset: None,
                fingerprint: self.fingerprint,
            },
        };
        Some(pos.save())
    }

    /// Starts (at the first poll) from the position `save` gave: the same
    /// files, unchanged since (else the first poll fails, naming them).
    fn restore(&mut self, state: &[u8]) -> Result<(), String> {
        if air_runtime::dataflow::state::unframe(state)?.0.first() != Some(&2) {
            self.resume = Some(files::PiecesPosition::read(state)?);
            return Ok(());
        }
        // A rescaled run's position: its streams, over the files as they
        // are now.
        self.files = files::expand(&self.specs).map_err(|e| e.to_string())?;
        let streams = StreamsPosition::read(state, &self.files)
            .map_err(|e| format!("resuming {}: {e}", self.describe()))?
            .unwrap_or_default();
        self.go_on_with(streams)
    }

    /// Resumes at another worker count (see [`crate::sources::files`]):
    /// this worker's share of what the old workers had still to read,
    /// merged by [`event_time_of`](Self::event_time_of) if it has several
    /// old workers' remainders.
    fn rescales(&self) -> bool {
        true
    }

    fn rescale(
        &mut self,
        states: &[&[u8]],
        to: air_runtime::dataflow::state::Rescale,
    ) -> Result<(), String> {
        self.files = files::expand(&self.specs).map_err(|e| e.to_string())?;
        let all = &self.files;
        let pieces_of = |old| files::shard_files(all, old, to.from).map_err(|e| e.to_string());
        let streams = files::rescale_streams(states, all, to.worker, to.workers, pieces_of)
            .map_err(|e| format!("resuming {}: {e}", self.describe()))?;
        self.go_on_with(streams)
    }

    fn report(&mut self, stats: &mut Stats) {
        if let Some(m) = &mut self.merged {
            m.sources_mut().for_each(|s| s.report(stats));
            return;
        }
        let current = self.current.as_ref().map_or(0, |(_, r)| r.skipped());
        stats.add(&format!("{}_records", F::NAME), self.read);
        stats.add("skipped_records", self.skipped + current);
    }
}

impl<F: FileFormat> PieceSource for FileSource<F> {
    fn remaining(&self) -> Vec<FilePiece> {
        FileSource::remaining(self)
    }
}

/// `field `f`: message (column C` — the start of a fault's text, without
/// the closing parenthesis that the byte offset goes into.
fn fault_text(f: &RecordFault) -> String {
    let mut s = String::new();
    if let Some(field) = &f.field {
        s += &format!("field `{field}`: ");
    }
    s += &f.message;
    if let Some(c) = f.column {
        s += &format!(" (column {c})");
    }
    s
}

/// An error of a file source: the file, the 1-based line, the byte offset
/// and what is wrong. Displays as `path:line: what (column C, byte offset
/// N)`.
#[derive(Debug)]
struct FileError {
    path: PathBuf,
    line: Option<u64>,
    offset: Option<u64>,
    kind: FileErrorKind,
}

#[derive(Debug)]
enum FileErrorKind {
    Line(LineFailure),
    Record(RecordFault),
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        f.write_str(": ")?;
        let mut column = None;
        match &self.kind {
            FileErrorKind::Line(LineFailure::Open(e)) => write!(f, "cannot open: {e}")?,
            FileErrorKind::Line(LineFailure::Read(e)) => write!(f, "read error: {e}")?,
            FileErrorKind::Line(LineFailure::TooLong { max }) => {
                write!(f, "line longer than the limit of {max} bytes")?
            }
            FileErrorKind::Record(r) => {
                if let Some(field) = &r.field {
                    write!(f, "field `{field}`: ")?;
                }
                f.write_str(&r.message)?;
                column = r.column;
            }
        }
        match (column, self.offset) {
            (Some(c), Some(o)) => write!(f, " (column {c}, byte offset {o})"),
            (Some(c), None) => write!(f, " (column {c})"),
            (None, Some(o)) => write!(f, " (byte offset {o})"),
            (None, None) => Ok(()),
        }
    }
}

impl LineError for FileError {
    fn new(path: PathBuf, line: Option<u64>, offset: Option<u64>, failure: LineFailure) -> Self {
        FileError {
            path,
            line,
            offset,
            kind: FileErrorKind::Line(failure),
        }
    }
}

impl RecordError for FileError {
    type Record = RecordFault;

    fn record(path: PathBuf, line: Option<u64>, line_offset: u64, record: RecordFault) -> Self {
        FileError {
            path,
            line,
            offset: Some(line_offset),
            kind: FileErrorKind::Record(record),
        }
    }

    fn skippable(&self) -> bool {
        matches!(
            self.kind,
            FileErrorKind::Record(_) | FileErrorKind::Line(LineFailure::TooLong { .. })
        )
    }
}

/// One JSON value a line, deserialized with serde into `T` (fields
/// matched by name; unknown fields ignored unless `T` says
/// `#[serde(deny_unknown_fields)]`), exactly as `serde_json::from_slice`
/// would: plain lines (no escapes in strings) go through a faster reader of
/// the same grammar that gives the same values, any other line and every
/// error through serde_json itself, whose messages the errors carry.
pub struct JsonFormat<T>(PhantomData<fn() -> T>);

impl<T> Default for JsonFormat<T> {
    fn default() -> Self {
        JsonFormat(PhantomData)
    }
}

impl<T: DeserializeOwned + Clone + Send + 'static> FileFormat for JsonFormat<T> {
    type Item = T;
    const NAME: &'static str = "json";
    const HEADER: bool = false;

    fn fresh(&self) -> Option<Self> {
        Some(JsonFormat::default())
    }

    #[inline]
    fn parse(&mut self, line: &[u8]) -> Result<T, RecordFault> {
        // Plain lines take the fast path; serde_json reads the others and
        // says what is wrong with bad ones.
        if let Some(v) = fast_json::from_line(line) {
            return Ok(v);
        }
        serde_json::from_slice(line).map_err(|e| {
            let path = json_scan::key_path_at(line, e.column());
            RecordFault {
                field: (!path.is_empty()).then_some(path),
                column: Some(e.column()),
                message: json_scan::error_message(&e),
            }
        })
    }
}

/// Records of type `T` from JSON-lines files: one JSON object a line,
/// deserialized with serde_json (fields matched to `T`'s by name). See
/// [`FileSource`] for files, globs, gzip, lines and errors.
pub type JsonLinesSource<T> = FileSource<JsonFormat<T>>;

/// One CSV row a line, after a header line that names the columns: rows
/// are deserialized into `T` with the csv crate, columns matched to `T`'s
/// fields by name, spaces around fields and names trimmed. Quoting is
/// RFC 4180's (`"a, b"`, `""` for a quote), but a quoted field cannot hold
/// a line break: lines are split at every `\n` before they are parsed (so
/// that any worker can start mid-file), and a line with an unclosed quote
/// is a bad record.
pub struct CsvFormat<T> {
    reader: csv_core::Reader,
    out: Vec<u8>,
    ends: Vec<usize>,
    record: csv::ByteRecord,
    headers: Option<csv::ByteRecord>,
    _t: PhantomData<fn() -> T>,
}

impl<T> Default for CsvFormat<T> {
    fn default() -> Self {
        CsvFormat {
            reader: csv_core::Reader::new(),
            out: vec![0; 256],
            ends: vec![0; 16],
            record: csv::ByteRecord::new(),
            headers: None,
            _t: PhantomData,
        }
    }
}

impl<T> CsvFormat<T> {
    /// Splits `line` into the fields of `self.record`, trimmed.
    fn split(&mut self, line: &[u8]) -> Result<(), RecordFault> {
        if memchr::memchr_iter(b'"', line).count() % 2 == 1 {
            return Err(RecordFault::new(
                "unclosed quote (a quoted field cannot hold a line break)",
            ));
        }
        self.reader.reset();
        let (mut input, mut nout, mut nends) = (line, 0, 0);
        loop {
            let (res, i, o, e) =
                self.reader
                    .read_record(input, &mut self.out[nout..], &mut self.ends[nends..]);
            input = &input[i..];
            nout += o;
            nends += e;
            match res {
                csv_core::ReadRecordResult::InputEmpty => input = &[],
                csv_core::ReadRecordResult::OutputFull => {
                    let n = self.out.len() * 2;
                    self.out.resize(n, 0);
                }
                csv_core::ReadRecordResult::OutputEndsFull => {
                    let n = self.ends.len() * 2;
                    self.ends.resize(n, 0);
                }
                csv_core::ReadRecordResult::Record | csv_core::ReadRecordResult::End => break,
            }
        }
        self.record.clear();
        let mut start = 0;
        for &end in &self.ends[..nends] {
            self.record.push_field(&self.out[start..end]);
            start = end;
        }
        self.record.trim();
        Ok(())
    }
}

impl<T: DeserializeOwned + Clone + Send + 'static> FileFormat for CsvFormat<T> {
    type Item = T;
    const NAME: &'static str = "csv";
    const HEADER: bool = true;

    fn fresh(&self) -> Option<Self> {
        Some(CsvFormat::default())
    }

    fn header(&mut self, line: &[u8]) -> Result<(), RecordFault> {
        self.split(line)?;
        self.headers = Some(self.record.clone());
        Ok(())
    }

    fn parse(&mut self, line: &[u8]) -> Result<T, RecordFault> {
        self.split(line)?;
        self.record
            .deserialize::<T>(self.headers.as_ref())
            .map_err(|e| match e.kind() {
                csv::ErrorKind::Deserialize { err, .. } => {
                    let name = err.field().map(|f| {
                        let h = self.headers.as_ref().and_then(|h| h.get(f as usize));
                        match h {
                            Some(h) => String::from_utf8_lossy(h).into_owned(),
                            None => format!("#{}", f + 1),
                        }
                    });
                    RecordFault {
                        field: name,
                        column: None,
                        message: err.kind().to_string(),
                    }
                }
                _ => RecordFault::new(e.to_string()),
            })
    }
}

/// Records of type `T` from CSV files with a header line (columns matched
/// to `T`'s fields by name); see [`CsvFormat`] for the CSV accepted and
/// [`FileSource`] for files, globs, gzip, lines and errors. Every worker
/// reads the header line of each file it reads a piece of; the rows are
/// split by byte range.
///
/// ```
/// use air_operators::graph::*;
/// use air_runtime::dataflow::run_graph;
/// use air_runtime::JobConfig;
/// use std::sync::{Arc, Mutex};
///
/// #[derive(Clone, serde::Deserialize)]
/// struct Click { user: u32, time_ms: u64 }
///
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("clicks.csv");
/// std::fs::write(&path, "time_ms,user\n100,1\n200,2\n300,1\n").unwrap();
/// let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
/// let rows = Arc::new(Mutex::new(Vec::new()));
/// let out = rows.clone();
/// run_graph(&cfg, move |df| {
///     let out = out.clone();
///     df.source(CsvSource::<Click>::shard(&path, df.index(), df.workers()))
///         .for_each(move |c| out.lock().unwrap().push((c.user, c.time_ms)));
/// })
/// .unwrap();
/// let mut rows = rows.lock().unwrap().clone();
/// rows.sort();
/// // Columns matched to fields by name; each row read by one worker.
/// assert_eq!(rows, [(1, 100), (1, 300), (2, 200)]);
/// ```
pub type CsvSource<T> = FileSource<CsvFormat<T>>;
