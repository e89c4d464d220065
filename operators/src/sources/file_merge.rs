//! A worker that reads several streams of file pieces at once, merged by
//! event time: what a file source does after a resume at another worker
//! count gave it the remainders of several old workers (see
//! [`super::files`], "Checkpoints").
//!
//! Each old worker's stream is in event-time order only as far as the
//! uninterrupted run's was (its disorder is what the watermark delay
//! covers); one stream read after another would put the second one's
//! records far behind the first one's watermark. So every stream is read
//! ahead by one batch into its own buffer, and the merge takes the oldest
//! head of all buffers, with the run of that buffer's records up to the
//! next oldest head (as [`super::shards::Shards`] merges generator
//! shards). The merged stream's disorder is at most its streams' largest:
//! no record is later behind the watermark than it was in the run that
//! took the checkpoint.
//!
//! The built-in readers (YSB, NEXMark, [`crate::graph::FileSource`]) wrap
//! their own single-stream source in a [`MergedPieces`] only in that
//! case: a worker with one stream reads it directly, as before.

use super::files::{FilePiece, PieceStream, StreamsPosition};
use air_runtime::dataflow::{Source, SourcePoll};
use std::path::PathBuf;
use std::sync::Arc;

/// A file source over one stream of pieces that can say what it has
/// still to read.
pub trait PieceSource: Source {
    /// Its pieces still to read, between polls: the open one from its next
    /// line (a gzip piece: `range.start` is the decompressed offset), then
    /// the others.
    fn remaining(&self) -> Vec<FilePiece>;
}

/// The event time of a record, ms (what the merge orders by).
pub type TimeOf<T> = Arc<dyn Fn(&T) -> u64 + Send + Sync>;

/// Records a stream reads ahead of the merge.
const AHEAD: usize = 512;

/// One stream of a [`MergedPieces`]: its source, the batch it read ahead,
/// and where that batch started.
struct Ahead<S: Source> {
    src: S,
    buf: Vec<S::Item>,
    /// Records of `buf` already out (or skipped).
    at: usize,
    /// What the source had still to read before it read `buf`.
    base: Vec<FilePiece>,
    /// Records still to drop before the first one out (a resume's skip
    /// not yet reached).
    to_skip: u64,
    /// Its source said `Done`.
    done: bool,
}

/// What a file source of a worker goes on with, given its streams of
/// pieces ([`MergedPieces::of`]).
pub enum Streams<S: PieceSource> {
    /// One stream (or none: no input left), read directly.
    One(S),
    /// Several streams (or one whose first records are out already),
    /// merged.
    Merged(Box<MergedPieces<S>>),
}

impl<S: Source> Ahead<S> {
    /// Its source is done and every record it read is out.
    fn spent(&self) -> bool {
        self.done && self.at == self.buf.len()
    }
}

/// Several streams of file pieces read as one, merged by event time
/// (module docs). Its checkpoint position ([`save`](Self::save)) is a
/// [`StreamsPosition`]: per stream, what it had still to read before the
/// batch it read ahead, and how many records of that batch are out.
pub struct MergedPieces<S: PieceSource> {
    streams: Vec<Ahead<S>>,
    time: TimeOf<S::Item>,
    /// The job's input files (saved positions name them by index).
    files: Arc<[PathBuf]>,
    /// [`super::files::inputs_fingerprint`] of `files`.
    inputs: u64,
    /// The error that stopped a stream (and so the merge).
    error: Option<String>,
    failed: bool,
}

impl<S: PieceSource> MergedPieces<S> {
    /// The merge of `streams`: each a source over one stream's pieces and
    /// the records of it to drop first ([`PieceStream::skip`]). `time`
    /// gives a record's event time; `files` are the job's input files and
    /// `inputs` their [`super::files::inputs_fingerprint`].
    pub fn new(
        streams: Vec<(S, u64)>,
        time: TimeOf<S::Item>,
        files: Arc<[PathBuf]>,
        inputs: u64,
    ) -> MergedPieces<S> {
        let streams = streams
            .into_iter()
            .map(|(src, skip)| Ahead {
                base: src.remaining(),
                src,
                buf: Vec::new(),
                at: 0,
                to_skip: skip,
                done: false,
            })
            .collect();
        MergedPieces {
            streams,
            time,
            files,
            inputs,
            error: None,
            failed: false,
        }
    }

    /// `streams` as a worker's source: one stream with nothing to skip
    /// (or none) read by `make`'s source directly, otherwise the merge of
    /// `make`'s source for each. `make` gives a source over a stream's
    /// pieces (its `skip` ignored); `time`, `files` and `inputs` as in
    /// [`new`](Self::new).
    pub fn of(
        mut streams: Vec<PieceStream>,
        mut make: impl FnMut(PieceStream) -> S,
        time: TimeOf<S::Item>,
        files: Arc<[PathBuf]>,
        inputs: u64,
    ) -> Streams<S> {
        if streams.len() <= 1 && streams.first().is_none_or(|s| s.skip == 0) {
            return Streams::One(make(streams.pop().unwrap_or_default()));
        }
        let sources = streams
            .into_iter()
            .map(|s| {
                let skip = s.skip;
                (make(s), skip)
            })
            .collect();
        Streams::Merged(Box::new(MergedPieces::new(sources, time, files, inputs)))
    }

    /// Its streams' sources (for their counters).
    pub fn sources_mut(&mut self) -> impl Iterator<Item = &mut S> {
        self.streams.iter_mut().map(|a| &mut a.src)
    }

    /// Its streams' sources.
    pub fn sources(&self) -> impl Iterator<Item = &S> {
        self.streams.iter().map(|a| &a.src)
    }

    /// Its checkpoint position (see the type's docs).
    pub fn save(&self) -> Vec<u8> {
        let streams = self
            .streams
            .iter()
            .filter(|a| !a.spent() && !a.base.is_empty())
            .map(|a| PieceStream {
                pieces: a.base.clone(),
                skip: a.at as u64 + a.to_skip,
            })
            .collect();
        StreamsPosition {
            inputs: self.inputs,
            streams,
        }
        .save(&self.files)
    }

    /// The error that stopped it, once (after a poll said `Done`).
    pub fn take_error(&mut self) -> Option<String> {
        self.error.take()
    }

    /// Reads ahead in the streams whose batch is out; `false` if one is
    /// idle (a source with nothing now: then the merge waits).
    fn refill(&mut self) -> bool {
        for a in &mut self.streams {
            while !a.done && a.at == a.buf.len() {
                a.base = a.src.remaining();
                a.buf.clear();
                a.at = 0;
                match a.src.poll(&mut a.buf, AHEAD) {
                    SourcePoll::Ready => {}
                    SourcePoll::Done => {
                        a.done = true;
                        if let Some(e) = a.src.take_error() {
                            self.error = Some(e);
                            self.failed = true;
                        }
                    }
                    SourcePoll::Idle => {
                        a.buf.clear();
                        return false;
                    }
                }
                let d = a.to_skip.min(a.buf.len() as u64);
                a.at = d as usize;
                a.to_skip -= d;
            }
        }
        true
    }

    /// A source's poll of the merged streams: up to `max` records into
    /// `buf`, in event-time order across streams. Out of line and cold:
    /// only a worker resumed at another worker count merges.
    #[cold]
    #[inline(never)]
    pub fn poll(&mut self, buf: &mut Vec<S::Item>, max: usize) -> SourcePoll {
        buf.clear();
        while buf.len() < max && !self.failed {
            if !self.refill() {
                break;
            }
            if self.failed {
                break;
            }
            // The oldest head (the first stream listed on a tie), and the
            // next oldest: the chosen stream's records go out up to it.
            let (mut best, mut t, mut limit) = (usize::MAX, u64::MAX, u64::MAX);
            for (k, a) in self.streams.iter().enumerate() {
                let Some(head) = a.buf.get(a.at) else {
                    continue;
                };
                let tk = (self.time)(head);
                if tk < t {
                    limit = t;
                    (best, t) = (k, tk);
                } else {
                    limit = limit.min(tk);
                }
            }
            if best == usize::MAX {
                break; // every stream is spent
            }
            let a = &mut self.streams[best];
            while buf.len() < max && a.at < a.buf.len() && (self.time)(&a.buf[a.at]) <= limit {
                buf.push(a.buf[a.at].clone());
                a.at += 1;
            }
        }
        if !buf.is_empty() {
            SourcePoll::Ready
        } else if self.failed || self.streams.iter().all(Ahead::spent) {
            SourcePoll::Done
        } else {
            SourcePoll::Idle
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream of `(time, id)` records in pieces of a fake file: piece
    /// `k` holds records `recs[k]`; `remaining` says which are left.
    struct Fake {
        pieces: Vec<Vec<(u64, u64)>>,
        /// (piece, record) of the next record.
        next: (usize, usize),
        path: PathBuf,
    }

    impl Source for Fake {
        type Item = (u64, u64);
        fn poll(&mut self, buf: &mut Vec<(u64, u64)>, max: usize) -> SourcePoll {
            buf.clear();
            // At most 7 records a poll, never across pieces.
            while let Some(p) = self.pieces.get(self.next.0) {
                if self.next.1 == p.len() {
                    self.next = (self.next.0 + 1, 0);
                    continue;
                }
                let n = (p.len() - self.next.1).min(max).min(7);
                buf.extend_from_slice(&p[self.next.1..self.next.1 + n]);
                self.next.1 += n;
                return SourcePoll::Ready;
            }
            SourcePoll::Done
        }
    }

    impl PieceSource for Fake {
        fn remaining(&self) -> Vec<FilePiece> {
            (self.next.0..self.pieces.len())
                .map(|k| FilePiece {
                    path: self.path.clone(),
                    range: (k as u64 * 1000
                        + if k == self.next.0 {
                            self.next.1 as u64
                        } else {
                            0
                        })..(k as u64 * 1000 + 999),
                    gzip: false,
                })
                .collect()
        }
    }

    /// Streams with disorder within themselves (a step back of up to 5 ms
    /// between pieces) and apart from each other: the merge gives every
    /// record once, and its disorder is no larger than the streams'.
    #[test]
    fn the_merge_keeps_every_record_once_and_the_streams_disorder() {
        let path = PathBuf::from("fake.jsonl");
        let mut all = Vec::new();
        let mut streams = Vec::new();
        for s in 0..3u64 {
            let mut pieces = Vec::new();
            let mut t = s * 40;
            for k in 0..4u64 {
                let mut p = Vec::new();
                for i in 0..(20 + 3 * k + s) {
                    t += i % 3;
                    p.push((t, s * 1_000_000 + k * 1000 + i));
                }
                t -= 5.min(t);
                pieces.push(p);
            }
            all.extend(pieces.iter().flatten().copied());
            streams.push((
                Fake {
                    pieces,
                    next: (0, 0),
                    path: path.clone(),
                },
                0,
            ));
        }
        let files: Arc<[PathBuf]> = vec![path].into();
        let mut m = MergedPieces::new(streams, Arc::new(|r: &(u64, u64)| r.0), files, 1);
        let mut got = Vec::new();
        let mut buf = Vec::new();
        while m.poll(&mut buf, 10) == SourcePoll::Ready {
            got.extend_from_slice(&buf);
        }
        let mut newest = 0;
        for &(t, _) in &got {
            assert!(t + 5 >= newest, "{t} after {newest}");
            newest = newest.max(t);
        }
        got.sort_unstable();
        all.sort_unstable();
        assert_eq!(got, all);
    }

    /// A merge saved mid-way and resumed from its position (pieces and
    /// skips) gives the records not out yet, once.
    #[test]
    fn a_saved_merge_resumes_with_the_records_not_out() {
        let path = PathBuf::from("fake.jsonl");
        let make = |s: u64| -> Vec<Vec<(u64, u64)>> {
            (0..3u64)
                .map(|k| {
                    (0..25u64)
                        .map(|i| (k * 30 + i + s, s * 1000 + k * 100 + i))
                        .collect()
                })
                .collect()
        };
        let files: Arc<[PathBuf]> = vec![path.clone()].into();
        let fake = |s: u64| Fake {
            pieces: make(s),
            next: (0, 0),
            path: path.clone(),
        };
        let time: TimeOf<(u64, u64)> = Arc::new(|r: &(u64, u64)| r.0);
        let inputs = super::super::files::inputs_fingerprint(&files);
        let mut m = MergedPieces::new(
            vec![(fake(0), 0), (fake(1), 0)],
            time.clone(),
            files.clone(),
            inputs,
        );
        let mut out = Vec::new();
        let mut buf = Vec::new();
        for _ in 0..4 {
            assert_eq!(m.poll(&mut buf, 9), SourcePoll::Ready);
            out.extend_from_slice(&buf);
        }
        let saved = m.save();
        let streams = StreamsPosition::read(&saved, &files).unwrap().unwrap();
        assert!(streams.iter().any(|s| s.skip > 0), "{streams:?}");
        // Each stream's pieces back to a fake at that place.
        let resumed: Vec<(Fake, u64)> = streams
            .iter()
            .enumerate()
            .map(|(s, st)| {
                let first = &st.pieces[0].range;
                let next = ((first.start / 1000) as usize, (first.start % 1000) as usize);
                (
                    Fake {
                        pieces: make(s as u64),
                        next,
                        path: path.clone(),
                    },
                    st.skip,
                )
            })
            .collect();
        let mut m = MergedPieces::new(resumed, time, files, inputs);
        while m.poll(&mut buf, 9) == SourcePoll::Ready {
            out.extend_from_slice(&buf);
        }
        out.sort_unstable();
        let mut want: Vec<_> = make(0).into_iter().chain(make(1)).flatten().collect();
        want.sort_unstable();
        assert_eq!(out, want);
    }
}
