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
