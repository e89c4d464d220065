//! Sets of input files for the file sources of user programs
//! ([`crate::graph::JsonLinesSource`], [`crate::graph::CsvSource`]): paths
//! and glob patterns resolved to files, and the files split across workers.
//!
//! Plain files are split by bytes: the files laid end to end are cut into
//! one span of about equal bytes per worker (as
//! [`split_files`] does), and a worker reads the
//! lines that start in its span. A gzip file (name ending in `.gz`) cannot
//! be entered mid-way, so gzip files are dealt whole: the `k`-th gzip file
//! of the list goes to worker `k % workers`.
//!
//! # Checkpoints, and resuming at another worker count
//!
//! A worker's checkpoint position is a [`PiecesPosition`]: how many of its
//! pieces it read, and where the next line of the open one starts. Resumed
//! at the same worker count, each worker goes on from there.
//!
//! Resumed at another worker count ([`rescale_streams`]), every new worker
//! works out, from the checkpoint alone (no master), what each old worker
//! had still to read: a [`PieceStream`], old worker `i`'s pieces (as
//! [`shard_files`] or the query's own split gives them at the old count)
//! from its saved next-line offset on (a gzip piece keeps its decompressed
//! offset in `range.start`). The streams, listed old worker by old worker,
//! are laid end to end and cut into one span of about equal bytes per new
//! worker ([`deal`]): a plain piece may be cut (a line belongs to the span
//! holding its first byte), a gzip piece goes whole to the worker whose
//! span holds its start. A new worker's share is then one run of pieces
//! per old stream its span touches, each in the order that stream had.
//! Together the new workers read every line the old ones had not, once.
//! A worker with several streams merges them by event time
//! ([`crate::sources::file_merge::MergedPieces`]); with one it reads it as
//! before. Its later checkpoints save its streams
//! ([`StreamsPosition`]: the remaining pieces of each, and the records of
//! the first one already out), so a rescaled run resumes again, at any
//! worker count. The files are checked at every resume: another set of
//! files, or a file changed since (length or modification time), makes
//! the resume fail naming the input.

use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::text::split_files;

/// One piece of input: a byte range of a plain file, or a whole gzip file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilePiece {
    /// The file.
    pub path: PathBuf,
    /// Byte offsets `[start, end)` in the file: its lines that start there
    /// are the piece's (`0..u64::MAX` for a gzip file: all of it).
    pub range: Range<u64>,
    /// Whether the file is gzip (read whole, decompressed).
    pub gzip: bool,
}

/// Whether `path` names a gzip file: its extension is `gz` (any case).
pub fn is_gzip(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gz"))
}

/// The files that `specs` name, in order: a path that exists is taken as it
/// is; otherwise a path with a glob character (`*`, `?`, `[`) is a pattern
/// (the `glob` crate's syntax, `**` for any depth), replaced by the files it
/// matches in alphabetical order (directories left out).
///
/// # Errors
/// A pattern that is not valid or matches no file, a path that does not
/// exist, or a directory that cannot be read while matching; the message
/// names the path or pattern.
pub fn expand(specs: &[PathBuf]) -> io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for spec in specs {
        if spec.exists() {
            files.push(spec.clone());
            continue;
        }
        let text = spec.to_string_lossy();
        if !text.contains(['*', '?', '[']) {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{}: no such file", spec.display()),
            ));
        }
        let bad = |e: String| io::Error::new(io::ErrorKind::InvalidInput, e);
        let matches =
            glob::glob(&text).map_err(|e| bad(format!("{text}: bad glob pattern: {e}")))?;
        let before = files.len();
        for m in matches {
            let path = m.map_err(|e| io::Error::new(e.error().kind(), e.to_string()))?;
            if !path.is_dir() {
                files.push(path);
            }
        }
        if files.len() == before {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{text}: no file matches the pattern"),
            ));
        }
    }
    Ok(files)
}

/// Worker `index` of `workers`' pieces of `files` (see the module docs), in
/// the order of `files`. Together the workers' pieces hold every line of
/// every file exactly once. Reads each file's size, nothing else.
///
/// # Errors
/// A file whose size cannot be read (the message names it).
///
/// # Panics
/// If `workers` is 0 or `index >= workers`.
pub fn shard_files(files: &[PathBuf], index: usize, workers: usize) -> io::Result<Vec<FilePiece>> {
    assert!(index < workers, "worker {index} of {workers}");
    let plain: Vec<PathBuf> = files.iter().filter(|p| !is_gzip(p)).cloned().collect();
    for p in &plain {
        // split_files' error does not name the file.
        std::fs::metadata(p)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", p.display())))?;
    }
    let mut share = split_files(&plain, workers)?
        .swap_remove(index)
        .into_iter()
        .peekable();
    let mut pieces = Vec::new();
    let mut gz = 0usize;
    for path in files {
        if is_gzip(path) {
            if gz % workers == index {
                pieces.push(FilePiece {
                    path: path.clone(),
                    range: 0..u64::MAX,
                    gzip: true,
                });
            }
            gz += 1;
        } else if let Some(r) = share.next_if(|r| &r.path == path) {
            pieces.push(FilePiece {
                path: r.path,
                range: r.range,
                gzip: false,
            });
        }
    }
    Ok(pieces)
}

/// A worker's place in its list of file pieces, as a checkpoint saves it
/// (the file sources of user programs and the YSB and NEXMark file
/// readers): how many pieces it read to their end, and the offset of the
/// next line of the piece it was reading (bytes into the file; for a gzip
/// file, into its decompressed text). A fingerprint of the pieces (paths,
/// ranges, the files' lengths and modification times) makes a resume over
/// other or changed input fail instead of reading from a wrong offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PiecesPosition {
    /// Pieces read to their end, from the start of the worker's list.
    pub done: u64,
    /// Where the next line of the piece being read starts (`None`: no
    /// piece was open).
    pub offset: Option<u64>,
    /// [`pieces_fingerprint`] of the worker's list (0: not known, e.g. the
    /// barrier came before the first read; not checked).
    pub fingerprint: u64,
}

/// Version of [`PiecesPosition::save`]'s layout.
const POSITION_VERSION: u64 = 1;

impl PiecesPosition {
    /// The position as checkpoint state: four little-endian `u64`s framed
    /// by `air_runtime::dataflow::state::frame` (version, done, offset or
    /// `u64::MAX`, fingerprint).
    pub fn save(&self) -> Vec<u8> {
        air_runtime::dataflow::state::frame(
            &[
                POSITION_VERSION,
                self.done,
                self.offset.unwrap_or(u64::MAX),
                self.fingerprint,
            ],
            &[],
        )
    }

    /// What [`save`](Self::save) gave.
    ///
    /// # Errors
    /// State of another layout or version.
    pub fn read(state: &[u8]) -> Result<PiecesPosition, String> {
        let (values, _) = air_runtime::dataflow::state::unframe(state)?;
        match values[..] {
            [POSITION_VERSION, done, offset, fingerprint] => Ok(PiecesPosition {
                done,
                offset: (offset != u64::MAX).then_some(offset),
                fingerprint,
            }),
            _ => Err(format!(
                "a file source's position of {} values (version {:?}), not this version's",
                values.len(),
                values.first()
            )),
        }
    }

    /// Applies the position to a worker's pieces before it reads any:
    /// drops the pieces read to their end and starts the next one at the
    /// saved offset (`range` gives a piece's byte range; `gzip` whether it
    /// must be entered by skipping decompressed bytes instead). Returns
    /// the decompressed offset to skip to in the first remaining piece, if
    /// it is gzip.
    ///
    /// # Errors
    /// The pieces are not those the position was saved over (other files,
    /// or files changed since: `now` is their [`pieces_fingerprint`]), or
    /// it names more pieces than there are.
    pub fn apply<P>(
        &self,
        pieces: &mut Vec<P>,
        now: u64,
        range: impl Fn(&mut P) -> &mut Range<u64>,
        gzip: impl Fn(&P) -> bool,
    ) -> Result<Option<u64>, String> {
        if self.fingerprint != 0 && self.fingerprint != now {
            return Err(
                "the input files are not those the checkpoint was taken over (other \
                 files, or files changed since: length or modification time): rerun with \
                 --fresh to start over"
                    .into(),
            );
        }
        let done = usize::try_from(self.done).unwrap_or(usize::MAX);
        if done > pieces.len() {
            return Err(format!(
                "the checkpoint read {} pieces of input, this worker has {}",
                self.done,
                pieces.len()
            ));
        }
        pieces.drain(..done);
        let Some(offset) = self.offset else {
            return Ok(None);
        };
        let Some(first) = pieces.first_mut() else {
            return Err(
                "the checkpoint was reading a piece of input this worker does not have".into(),
            );
        };
        if gzip(first) {
            return Ok(Some(offset));
        }
        let r = range(first);
        r.start = r.start.max(offset);
        Ok(None)
    }
}

/// A worker's (file, byte range) pieces of plain files, read in order
/// (the YSB and NEXMark file readers of `air run`), with what a
/// checkpoint needs: [`save`](Self::save), [`restore`](Self::restore)
/// and, at another worker count, [`rescaled`](Self::rescaled).
#[derive(Debug, Clone, Default)]
pub struct PieceQueue {
    pieces: std::collections::VecDeque<(PathBuf, Range<u64>)>,
    /// The piece last taken (the one being read, if any).
    open: Option<(PathBuf, Range<u64>)>,
    /// Pieces at the start (before any restore dropped some).
    total: u64,
    /// [`pieces_fingerprint`] of all of them.
    fingerprint: u64,
    /// The job's input files, in order: the YSB and NEXMark readers give
    /// every worker one piece of each input file (an empty one if need
    /// be), so these are the pieces' files.
    files: Arc<[PathBuf]>,
    /// Its pieces are a rescaled share (not the worker's own split): it
    /// saves them as one [`PieceStream`], checked by this
    /// [`inputs_fingerprint`] of `files`.
    given: Option<u64>,
}

impl PieceQueue {
    /// The pieces to read, in order: one of each input file, in the order
    /// of the input files (their files looked at once now for the
    /// fingerprint).
    pub fn new(pieces: Vec<(PathBuf, Range<u64>)>) -> PieceQueue {
        let fingerprint = pieces_fingerprint(pieces.iter().map(|(p, r)| (p.as_path(), r)));
        let files: Vec<PathBuf> = pieces.iter().map(|(p, _)| p.clone()).collect();
        PieceQueue {
            total: pieces.len() as u64,
            pieces: pieces.into(),
            open: None,
            fingerprint,
            files: files.into(),
            given: None,
        }
    }

    /// A queue over a rescaled share of the input: `stream`'s pieces
    /// (plain ones), of the same files as `self`.
    pub fn with_stream(&self, stream: PieceStream) -> PieceQueue {
        PieceQueue {
            total: stream.pieces.len() as u64,
            pieces: stream
                .pieces
                .into_iter()
                .map(|p| (p.path, p.range))
                .collect(),
            open: None,
            fingerprint: 0,
            files: self.files.clone(),
            given: Some(inputs_fingerprint(&self.files)),
        }
    }

    /// The job's input files, in order.
    pub fn files(&self) -> Arc<[PathBuf]> {
        self.files.clone()
    }

    /// [`inputs_fingerprint`] of [`files`](Self::files) (looked at now).
    pub fn inputs(&self) -> u64 {
        self.given
            .unwrap_or_else(|| inputs_fingerprint(&self.files))
    }

    /// The next piece to read.
    #[allow(clippy::should_implement_trait)] // not an iterator: it saves
    pub fn next(&mut self) -> Option<(PathBuf, Range<u64>)> {
        self.open = self.pieces.pop_front();
        self.open.clone()
    }

    /// Where reading stands: `open` is the offset of the next line of the
    /// piece being read (`None`: none is open).
    pub fn position(&self, open: Option<u64>) -> PiecesPosition {
        PiecesPosition {
            done: self.total - self.pieces.len() as u64 - u64::from(open.is_some()),
            offset: open,
            fingerprint: self.fingerprint,
        }
    }

    /// What is left to read, in order: the open piece from `open` (the
    /// offset of its next line; `None`: no piece is open), then the
    /// pieces not taken yet.
    pub fn remaining(&self, open: Option<u64>) -> Vec<FilePiece> {
        let plain = |(path, range): (PathBuf, Range<u64>)| FilePiece {
            path,
            range,
            gzip: false,
        };
        let mut out = Vec::with_capacity(self.pieces.len() + 1);
        if let (Some(offset), Some((path, range))) = (open, &self.open) {
            out.push(plain((path.clone(), offset.max(range.start)..range.end)));
        }
        out.extend(self.pieces.iter().cloned().map(plain));
        out.retain(|p| !p.range.is_empty());
        out
    }

    /// Its checkpoint position: a [`PiecesPosition`] over the worker's own
    /// pieces, or (a rescaled share) a [`StreamsPosition`] of one stream.
    /// `open` as in [`position`](Self::position).
    pub fn save(&self, open: Option<u64>) -> Vec<u8> {
        match self.given {
            None => self.position(open).save(),
            Some(inputs) => StreamsPosition {
                inputs,
                streams: vec![PieceStream {
                    pieces: self.remaining(open),
                    skip: 0,
                }],
            }
            .save(&self.files),
        }
    }

    /// Goes to the position a checkpoint saved ([`save`](Self::save))
    /// before any piece is taken. Returns the streams to merge if the
    /// position is a rescaled worker's with several (or with records of
    /// its stream already out): the caller reads them with
    /// [`crate::sources::file_merge::MergedPieces`]; otherwise `None`
    /// and the queue goes on from there.
    ///
    /// # Errors
    /// As [`PiecesPosition::apply`], and [`StreamsPosition::read`].
    pub fn restore(&mut self, state: &[u8]) -> Result<Option<Vec<PieceStream>>, String> {
        let context = |e: String| format!("resuming {}: {e}", describe(&self.files));
        if let Some(streams) = StreamsPosition::read(state, &self.files).map_err(context)? {
            return Ok(match <[PieceStream; 1]>::try_from(streams) {
                Ok([one]) if one.skip == 0 => {
                    *self = self.with_stream(one);
                    None
                }
                Ok([one]) => Some(vec![one]),
                Err(streams) => Some(streams),
            });
        }
        let pos = PiecesPosition::read(state)?;
        let mut v: Vec<_> = std::mem::take(&mut self.pieces).into();
        pos.apply(&mut v, self.fingerprint, |p| &mut p.1, |_| false)
            .map_err(context)?;
        self.pieces = v.into();
        Ok(None)
    }

    /// This worker's share (`to`) of what the old workers had still to
    /// read, from their saved positions (`states`, by old worker): old
    /// worker `i`'s pieces were range `i` of `split(file, to.from)` of
    /// every file, in order. See the module docs.
    ///
    /// # Errors
    /// A position that cannot be read, files changed since, or a file
    /// whose size cannot be read.
    pub fn rescaled(
        &self,
        states: &[&[u8]],
        to: &air_runtime::dataflow::state::Rescale,
        split: fn(&Path, usize) -> io::Result<Vec<Range<u64>>>,
    ) -> Result<Vec<PieceStream>, String> {
        let files = &self.files;
        let pieces_of = |old: usize| -> Result<Vec<FilePiece>, String> {
            let mut out = Vec::new();
            for f in files.iter() {
                let ranges = split(f, to.from).map_err(|e| format!("{}: {e}", f.display()))?;
                if let Some(r) = ranges.into_iter().nth(old) {
                    out.push(FilePiece {
                        path: f.clone(),
                        range: r,
                        gzip: false,
                    });
                }
            }
            Ok(out)
        };
        rescale_streams(states, files, to.worker, to.workers, pieces_of)
            .map_err(|e| format!("resuming {}: {e}", describe(files)))
    }
}

/// `PATH, PATH, …` for messages.
fn describe(files: &[PathBuf]) -> String {
    files
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// What one old worker had still to read when its checkpoint was taken
/// (or a part of it, once dealt out): pieces in reading order, each from
/// the next line not yet read (a gzip piece: `range.start` is the offset
/// in its decompressed text to skip to, `range.end` is `u64::MAX`).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct PieceStream {
    /// The pieces, in order.
    pub pieces: Vec<FilePiece>,
    /// Records of the first pieces already out (read, and handed on by
    /// the merge of a rescaled worker): a reader of the stream drops this
    /// many first.
    pub skip: u64,
}

/// A rescaled worker's checkpoint position: its streams of pieces (one
/// per old stream its share touched), each with what is left of it.
/// Saved as version 2 of the file sources' position (version 1 is
/// [`PiecesPosition`]); files named by index into the job's list of input
/// files, checked by [`inputs_fingerprint`].
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct StreamsPosition {
    /// [`inputs_fingerprint`] of the job's input files.
    pub inputs: u64,
    /// The streams.
    pub streams: Vec<PieceStream>,
}

/// Version of [`StreamsPosition::save`]'s layout.
const STREAMS_VERSION: u64 = 2;

impl StreamsPosition {
    /// The position as checkpoint state: little-endian `u64`s framed by
    /// `air_runtime::dataflow::state::frame`: version, inputs, number of
    /// streams, then per stream its skip and number of pieces, then per
    /// piece the index of its file in `files`, its start, its end and 1
    /// if gzip (else 0).
    ///
    /// # Panics
    /// A piece of a file not in `files`.
    pub fn save(&self, files: &[PathBuf]) -> Vec<u8> {
        let mut v = vec![STREAMS_VERSION, self.inputs, self.streams.len() as u64];
        for s in &self.streams {
            v.extend([s.skip, s.pieces.len() as u64]);
            for p in &s.pieces {
                let file = files
                    .iter()
                    .position(|f| *f == p.path)
                    .expect("a piece of an input file");
                v.extend([file as u64, p.range.start, p.range.end, u64::from(p.gzip)]);
            }
        }
        air_runtime::dataflow::state::frame(&v, &[])
    }

    /// What [`save`](Self::save) gave, over the job's input files `files`
    /// (`None`: the state is a [`PiecesPosition`]).
    ///
    /// # Errors
    /// State of another layout, or input files other than the
    /// checkpoint's or changed since it (length or modification time).
    pub fn read(state: &[u8], files: &[PathBuf]) -> Result<Option<Vec<PieceStream>>, String> {
        let (v, _) = air_runtime::dataflow::state::unframe(state)?;
        if v.first() != Some(&STREAMS_VERSION) {
            return Ok(None);
        }
        let bad = || "a file source's position of another layout".to_string();
        let mut it = v[1..].iter().copied();
        let mut next = || it.next().ok_or_else(bad);
        if next()? != inputs_fingerprint(files) {
            return Err(changed_files());
        }
        let n = next()?;
        let mut streams = Vec::new();
        for _ in 0..n {
            let skip = next()?;
            let k = next()?;
            let mut pieces = Vec::new();
            for _ in 0..k {
                let file = usize::try_from(next()?).map_err(|_| bad())?;
                let (start, end, gzip) = (next()?, next()?, next()? == 1);
                let path = files.get(file).ok_or_else(bad)?.clone();
                pieces.push(FilePiece {
                    path,
                    range: start..end,
                    gzip,
                });
            }
            streams.push(PieceStream { pieces, skip });
        }
        Ok(Some(streams))
    }
}

/// The error of a resume over other or changed input files.
fn changed_files() -> String {
    "the input files are not those the checkpoint was taken over (other files, or files \
     changed since: length or modification time): rerun with --fresh to start over"
        .into()
}

/// A fingerprint of a job's list of input files: each one's path, length
/// and modification time (ns) now. Stable across processes.
pub fn inputs_fingerprint(files: &[PathBuf]) -> u64 {
    pieces_fingerprint(files.iter().map(|f| (f.as_path(), &(0..0))))
}

/// On a resume at another worker count: new worker `worker` of `workers`'
/// streams of input (module docs), from every old worker's saved
/// position (`states`, by old worker: a [`PiecesPosition`] over the pieces
/// `pieces_of(old worker)` gives, or a [`StreamsPosition`] over `files`).
///
/// # Errors
/// A position that cannot be read or applied, files other than the
/// checkpoint's or changed since, or an error of `pieces_of`.
pub fn rescale_streams(
    states: &[&[u8]],
    files: &[PathBuf],
    worker: usize,
    workers: usize,
    pieces_of: impl Fn(usize) -> Result<Vec<FilePiece>, String>,
) -> Result<Vec<PieceStream>, String> {
    let mut all = Vec::new();
    for (old, state) in states.iter().enumerate() {
        if let Some(streams) = StreamsPosition::read(state, files)? {
            all.extend(streams);
            continue;
        }
        let pos = PiecesPosition::read(state)?;
        let mut pieces = pieces_of(old)?;
        let now = pieces_fingerprint(pieces.iter().map(|p| (p.path.as_path(), &p.range)));
        if let Some(skip) = pos.apply(&mut pieces, now, |p| &mut p.range, |p| p.gzip)? {
            pieces[0].range.start = skip;
        }
        // The open piece may have been read to (past) its end.
        pieces.retain(|p| p.gzip || !p.range.is_empty());
        all.push(PieceStream { pieces, skip: 0 });
    }
    let sizes = |p: &FilePiece| {
        std::fs::metadata(&p.path)
            .map(|m| m.len())
            .map_err(|e| format!("{}: {e}", p.path.display()))
    };
    deal(all, worker, workers, sizes)
}

/// New worker `worker` of `workers`' share of `streams` (module docs): the
/// streams laid end to end, cut into `workers` spans of about equal bytes;
/// its share is, for each stream its span touches, the run of (parts of)
/// pieces in it, in order. A plain piece weighs its range's bytes (cut at a
/// span's edge: a line belongs to the part holding its first byte); a gzip
/// piece weighs `gzip_size` of it (its file's compressed length) and goes
/// whole to the span holding its start. A stream with a `skip` (records
/// of it already out) is not cut: it goes whole to the span holding its
/// start.
///
/// # Errors
/// An error of `gzip_size`.
///
/// # Panics
/// If `worker >= workers`.
pub fn deal(
    streams: Vec<PieceStream>,
    worker: usize,
    workers: usize,
    gzip_size: impl Fn(&FilePiece) -> Result<u64, String>,
) -> Result<Vec<PieceStream>, String> {
    assert!(worker < workers, "worker {worker} of {workers}");
    // Each piece's weight, in order.
    let mut weights = Vec::new();
    for s in &streams {
        for p in &s.pieces {
            weights.push(if p.gzip {
                gzip_size(p)?
            } else {
                p.range.end.saturating_sub(p.range.start)
            });
        }
    }
    let total: u128 = weights.iter().map(|&w| u128::from(w)).sum();
    // Span `k` is [cut(k), cut(k + 1)) of the pieces laid end to end.
    let cut = |k: usize| (total * k as u128 / workers as u128) as u64 as u128;
    let (lo, hi) = (cut(worker), cut(worker + 1));
    let last = worker + 1 == workers;
    let mut at: u128 = 0;
    let mut weights = weights.into_iter();
    let mut mine = Vec::new();
    for s in streams {
        let holds = |x: u128| x >= lo && (x < hi || last);
        if s.skip > 0 {
            // Records of it are out already, counted from its start: it
            // cannot be cut, so it goes whole where it starts.
            let w: u128 = s
                .pieces
                .iter()
                .map(|_| weights.next().unwrap_or(0) as u128)
                .sum();
            if holds(at) {
                mine.push(s);
            }
            at += w;
            continue;
        }
        let mut part = PieceStream::default();
        for p in s.pieces {
            let w = u128::from(weights.next().expect("a weight per piece"));
            let (start, end) = (at, at + w);
            at = end;
            if p.gzip {
                if holds(start) {
                    part.pieces.push(p);
                }
                continue;
            }
            // The bytes of [start, end) in [lo, hi).
            let (a, b) = (start.max(lo), if last { end } else { end.min(hi) });
            if a < b {
                let off = |x: u128| p.range.start + (x - start) as u64;
                part.pieces.push(FilePiece {
                    path: p.path.clone(),
                    range: off(a)..off(b),
                    gzip: false,
                });
            }
        }
        if !part.pieces.is_empty() {
            mine.push(part);
        }
    }
    Ok(mine)
}

/// A fingerprint of a worker's pieces: each one's path, byte range, and
/// its file's length and modification time (ns) now (0 for a file that
/// cannot be read: opening it will say why). Stable across processes (a
/// fixed hash function).
pub fn pieces_fingerprint<'a>(pieces: impl IntoIterator<Item = (&'a Path, &'a Range<u64>)>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    for (path, range) in pieces {
        path.hash(&mut h);
        range.hash(&mut h);
        let (len, mtime) = std::fs::metadata(path).map_or((0, 0), |m| {
            let t = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos() as u64);
            (m.len(), t)
        });
        len.hash(&mut h);
        mtime.hash(&mut h);
    }
    // 0 means "not known".
    h.finish().max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_files_are_dealt_whole_and_plain_files_split_by_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.jsonl");
        let b = dir.path().join("b.jsonl.GZ");
        let c = dir.path().join("c.jsonl");
        std::fs::write(&a, vec![b'x'; 100]).unwrap();
        std::fs::write(&b, b"not read").unwrap();
        std::fs::write(&c, vec![b'x'; 50]).unwrap();
        let files = vec![a.clone(), b.clone(), c.clone()];
        let w0 = shard_files(&files, 0, 2).unwrap();
        let w1 = shard_files(&files, 1, 2).unwrap();
        let piece = |p: &PathBuf, r: Range<u64>, gzip| FilePiece {
            path: p.clone(),
            range: r,
            gzip,
        };
        assert_eq!(w0, [piece(&a, 0..75, false), piece(&b, 0..u64::MAX, true)]);
        assert_eq!(w1, [piece(&a, 75..100, false), piece(&c, 0..50, false)]);
    }

    #[test]
    fn globs_expand_in_order_and_must_match() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["b.jsonl", "a.jsonl", "c.txt"] {
            std::fs::write(dir.path().join(name), b"").unwrap();
        }
        std::fs::create_dir(dir.path().join("d.jsonl")).unwrap();
        let got = expand(&[dir.path().join("*.jsonl"), dir.path().join("c.txt")]).unwrap();
        let names: Vec<_> = got
            .iter()
            .map(|p| p.file_name().unwrap().to_owned())
            .collect();
        assert_eq!(names, ["a.jsonl", "b.jsonl", "c.txt"]);
        let e = expand(&[dir.path().join("*.csv")]).unwrap_err();
        assert!(e.to_string().contains("no file matches"), "{e}");
        let e = expand(&[dir.path().join("missing.jsonl")]).unwrap_err();
        assert!(e.to_string().contains("missing.jsonl: no such file"), "{e}");
    }

    /// The lines (start offsets of non-empty lines) a set of streams
    /// reads from `text` files: a line is read by the piece holding its
    /// first byte.
    fn lines_of(streams: &[PieceStream], texts: &[(PathBuf, Vec<u8>)]) -> Vec<(PathBuf, u64)> {
        let mut out = Vec::new();
        for s in streams {
            for p in &s.pieces {
                let text = &texts.iter().find(|t| t.0 == p.path).unwrap().1;
                let mut at = 0u64;
                for line in text.split_inclusive(|&b| b == b'\n') {
                    if p.range.contains(&at) {
                        out.push((p.path.clone(), at));
                    }
                    at += line.len() as u64;
                }
            }
        }
        out
    }

    /// Old workers of `from` read a while (each to a line start of its own
    /// pieces), saved; the remainders dealt to `to` new workers cover
    /// every line not read exactly once; a second rescale from the new
    /// workers' saved streams (read on a bit) covers what is left once.
    #[test]
    fn dealing_covers_every_remaining_line_exactly_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut texts = Vec::new();
        for (name, lines, width) in [
            ("a.jsonl", 300, 7),
            ("b.jsonl", 50, 31),
            ("c.jsonl", 170, 3),
        ] {
            let path = dir.path().join(name);
            let text: Vec<u8> = (0..lines)
                .flat_map(|i: usize| {
                    let mut l = vec![b'x'; 1 + (i * width) % 23];
                    l.push(b'\n');
                    l
                })
                .collect();
            std::fs::write(&path, &text).unwrap();
            texts.push((path, text));
        }
        let files: Vec<PathBuf> = texts.iter().map(|t| t.0.clone()).collect();
        // Line starts of the files, to read "up to" one.
        let line_after = |path: &Path, at: u64| -> u64 {
            let text = &texts.iter().find(|t| t.0 == path).unwrap().1;
            let mut o = 0u64;
            for l in text.split_inclusive(|&b| b == b'\n') {
                if o >= at {
                    return o;
                }
                o += l.len() as u64;
            }
            o
        };
        for (from, to) in [(2, 3), (3, 2), (2, 1), (1, 4), (3, 3)] {
            let pieces_of = |w: usize| shard_files(&files, w, from).map_err(|e| e.to_string());
            let mut read = Vec::new();
            let states: Vec<Vec<u8>> = (0..from)
                .map(|w| {
                    let pieces = pieces_of(w).unwrap();
                    let fp =
                        pieces_fingerprint(pieces.iter().map(|p| (p.path.as_path(), &p.range)));
                    // Worker w read its first piece up to a line a third in
                    // (or, for w = 1, its first piece whole).
                    let first = &pieces[0];
                    let mid = line_after(
                        &first.path,
                        first.range.start + (first.range.end - first.range.start) / 3,
                    );
                    let (done, offset) = if w == 1 { (1, None) } else { (0, Some(mid)) };
                    let upto = if w == 1 { first.range.end } else { mid };
                    read.extend(lines_of(
                        &[PieceStream {
                            pieces: vec![FilePiece {
                                range: first.range.start..upto,
                                ..first.clone()
                            }],
                            skip: 0,
                        }],
                        &texts,
                    ));
                    PiecesPosition {
                        done,
                        offset,
                        fingerprint: fp,
                    }
                    .save()
                })
                .collect();
            let refs: Vec<&[u8]> = states.iter().map(|s| s.as_slice()).collect();
            let mut again = Vec::new();
            let mut shares = Vec::new();
            let mut read_new = Vec::new();
            for w in 0..to {
                let mine = rescale_streams(&refs, &files, w, to, pieces_of).unwrap();
                // Each new worker then reads its first stream's first
                // piece to a line a half in, and saves its streams.
                let mut left = mine.clone();
                if let Some(p) = left.first_mut().and_then(|s| s.pieces.first_mut()) {
                    let mid =
                        line_after(&p.path, p.range.start + (p.range.end - p.range.start) / 2);
                    read_new.extend(lines_of(
                        &[PieceStream {
                            pieces: vec![FilePiece {
                                range: p.range.start..mid.min(p.range.end),
                                ..p.clone()
                            }],
                            skip: 0,
                        }],
                        &texts,
                    ));
                    p.range.start = mid;
                }
                for s in &mut left {
                    s.pieces.retain(|p| !p.range.is_empty());
                }
                left.retain(|s| !s.pieces.is_empty());
                again.push(
                    StreamsPosition {
                        inputs: inputs_fingerprint(&files),
                        streams: left,
                    }
                    .save(&files),
                );
                shares.extend(mine);
            }
            let mut once = read.clone();
            once.extend(lines_of(&shares, &texts));
            let mut all = lines_of(
                &[PieceStream {
                    pieces: shard_files(&files, 0, 1).unwrap(),
                    skip: 0,
                }],
                &texts,
            );
            once.sort();
            all.sort();
            assert_eq!(once, all, "{from} -> {to}");
            // And again, to 2 workers, from the rescaled workers' streams.
            let refs: Vec<&[u8]> = again.iter().map(|s| s.as_slice()).collect();
            let mut twice = read;
            twice.extend(read_new);
            for w in 0..2 {
                let mine = rescale_streams(&refs, &files, w, 2, |_| unreachable!()).unwrap();
                twice.extend(lines_of(&mine, &texts));
            }
            twice.sort();
            assert_eq!(twice, all, "{from} -> {to} -> 2");
        }
    }

    #[test]
    fn a_changed_file_or_another_set_fails_the_rescale() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.jsonl");
        let b = dir.path().join("b.jsonl");
        std::fs::write(&a, b"1\n2\n3\n").unwrap();
        std::fs::write(&b, b"4\n5\n").unwrap();
        let files = vec![a.clone(), b.clone()];
        let pieces_of = |w: usize| shard_files(&files, w, 2).map_err(|e| e.to_string());
        let states: Vec<Vec<u8>> = (0..2)
            .map(|w| {
                let p = pieces_of(w).unwrap();
                PiecesPosition {
                    done: 0,
                    offset: None,
                    fingerprint: pieces_fingerprint(p.iter().map(|p| (p.path.as_path(), &p.range))),
                }
                .save()
            })
            .collect();
        let refs: Vec<&[u8]> = states.iter().map(|s| s.as_slice()).collect();
        assert!(rescale_streams(&refs, &files, 0, 3, pieces_of).is_ok());
        let saved = StreamsPosition {
            inputs: inputs_fingerprint(&files),
            streams: vec![],
        }
        .save(&files);
        // Another set of files.
        let e = StreamsPosition::read(&saved, &files[..1]).unwrap_err();
        assert!(e.contains("not those the checkpoint was taken over"), "{e}");
        std::fs::write(&b, b"4\n5\n6\n").unwrap();
        let e = rescale_streams(&refs, &files, 0, 3, pieces_of).unwrap_err();
        assert!(e.contains("not those the checkpoint was taken over"), "{e}");
        let e = StreamsPosition::read(&saved, &files).unwrap_err();
        assert!(e.contains("not those the checkpoint was taken over"), "{e}");
    }
}
