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

use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};

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
/// checkpoint needs: [`position`](Self::position) and
/// [`restore`](Self::restore).
#[derive(Debug, Clone, Default)]
pub struct PieceQueue {
    pieces: std::collections::VecDeque<(PathBuf, Range<u64>)>,
    /// Pieces at the start (before any restore dropped some).
    total: u64,
    /// [`pieces_fingerprint`] of all of them.
    fingerprint: u64,
}

impl PieceQueue {
    /// The pieces to read, in order (their files looked at once now for
    /// the fingerprint).
    pub fn new(pieces: Vec<(PathBuf, Range<u64>)>) -> PieceQueue {
        let fingerprint = pieces_fingerprint(pieces.iter().map(|(p, r)| (p.as_path(), r)));
        PieceQueue {
            total: pieces.len() as u64,
            pieces: pieces.into(),
            fingerprint,
        }
    }

    /// The next piece to read.
    #[allow(clippy::should_implement_trait)] // not an iterator: it saves
    pub fn next(&mut self) -> Option<(PathBuf, Range<u64>)> {
        self.pieces.pop_front()
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

    /// Goes to the position a checkpoint saved ([`PiecesPosition::save`])
    /// before any piece is taken.
    ///
    /// # Errors
    /// As [`PiecesPosition::apply`].
    pub fn restore(&mut self, state: &[u8]) -> Result<(), String> {
        let pos = PiecesPosition::read(state)?;
        let mut v: Vec<_> = std::mem::take(&mut self.pieces).into();
        let mut files: Vec<String> = v.iter().map(|p| p.0.display().to_string()).collect();
        files.dedup();
        pos.apply(&mut v, self.fingerprint, |p| &mut p.1, |_| false)
            .map_err(|e| format!("resuming {}: {e}", files.join(", ")))?;
        self.pieces = v.into();
        Ok(())
    }
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
}
