//! A worker's side of a live input: the lines of the chunks its reader
//! handed it, in stream order, and where it stops for a followed file's
//! checkpoint cuts.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, TryRecvError};
use std::sync::Arc;

use super::{Chunk, Shared};
use crate::sources::lines::{LineError, LineFailure, RawLine};

thread_local! {
    /// Set while one of several sources that share a worker's lines reads
    /// them ([`placed_by_all`]): the oldest barrier they all placed.
    static PLACED_BY_ALL: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// Runs `read` (a read of a worker's lines by one of several sources that
/// share them, e.g. NEXMark q8's two) with `placed` as the barrier the
/// sources placed: the oldest any of them placed. A cut is then passed only
/// once every source sharing the lines placed its barrier (each source
/// stops at it in turn, with what was read before it for that source).
pub(crate) fn placed_by_all<R>(placed: u64, read: impl FnOnce() -> R) -> R {
    PLACED_BY_ALL.with(|p| p.set(Some(placed)));
    let r = read();
    PLACED_BY_ALL.with(|p| p.set(None));
    r
}

/// One worker's share of a live input: the lines of the chunks it was
/// handed, in stream order. [`next_line`](Self::next_line) returns
/// `Ok(None)` when nothing is queued now ([`is_finished`](Self::is_finished)
/// false: come back later) and at the input's end (finished).
pub(crate) struct LiveLines<E> {
    shared: Arc<Shared>,
    name: Arc<PathBuf>,
    rx: Receiver<Chunk>,
    cur: Option<Chunk>,
    pos: usize,
    /// Stream line number of the next line of `cur`.
    line: u64,
    /// Lines consumed.
    lines: u64,
    max_line_len: usize,
    finished: bool,
    /// A followed file: under checkpoints, its reader cuts the stream for
    /// each barrier ([`resume`]).
    cuts: bool,
    /// The newest barrier this worker asked its reader to cut for.
    requested: u64,
    /// The cut this worker stopped at (barrier id, the source's state
    /// there), until its source placed the barrier.
    held: Option<(u64, Vec<u8>)>,
    _error: std::marker::PhantomData<fn() -> E>,
}

impl<E> LiveLines<E> {
    /// A worker's lines from `rx`, the queue its reader hands it chunks
    /// through; `cuts`: the input is a followed file (under checkpoints
    /// its reader cuts the stream for barriers).
    pub(super) fn new(
        shared: Arc<Shared>,
        name: Arc<PathBuf>,
        rx: Receiver<Chunk>,
        max_line_len: usize,
        cuts: bool,
    ) -> LiveLines<E> {
        LiveLines {
            shared,
            name,
            rx,
            cur: None,
            pos: 0,
            line: 0,
            lines: 0,
            max_line_len,
            finished: false,
            cuts,
            requested: 0,
            held: None,
            _error: std::marker::PhantomData,
        }
    }
}

impl<E> std::fmt::Debug for LiveLines<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveLines")
            .field("name", &self.name)
            .field("lines", &self.lines)
            .field("finished", &self.finished)
            .finish()
    }
}

impl<E: LineError> LiveLines<E> {
    /// The next line, `Ok(None)` if none is queued now or at the end (see
    /// the type's docs).
    ///
    /// # Errors
    /// [`LineFailure::TooLong`] for a line over the limit (the next call
    /// goes on after it); [`LineFailure::Read`] once, for a read error that
    /// ended the input (then finished).
    pub(crate) fn next_line(&mut self) -> Result<Option<RawLine>, E> {
        loop {
            if let Some(c) = &self.cur {
                if self.pos < c.bytes.len() {
                    let rest = &c.bytes[self.pos..];
                    let k = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
                    let start = self.pos;
                    let offset = c.offset + start as u64;
                    let number = self.line;
                    self.pos += (k + 1).min(rest.len());
                    self.line += 1;
                    self.lines += 1;
                    if k > self.max_line_len {
                        let max = self.max_line_len;
                        let name = (*c.name).clone();
                        return Err(E::new(
                            name,
                            Some(number),
                            Some(offset),
                            LineFailure::TooLong { max },
                        ));
                    }
                    return Ok(Some(RawLine {
                        start,
                        end: start + k,
                        offset,
                        number,
                    }));
                }
                let done = self.cur.take().expect("a chunk");
                self.shared
                    .free
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(done.bytes);
            }
            if self.finished {
                return Ok(None);
            }
            if self.cuts && !self.cut_passed() {
                return Ok(None);
            }
            match self.rx.try_recv() {
                Ok(c) if c.cut.is_some() => {
                    // Every line before the cut was read: nothing more
                    // until the source placed the cut's barrier.
                    self.held = c.cut;
                    air_runtime::dataflow::input_cuts_barriers(self.held.clone());
                    return Ok(None);
                }
                Ok(c) => {
                    self.pos = 0;
                    self.line = c.line;
                    if c.too_long {
                        self.lines += 1;
                        let max = self.max_line_len;
                        return Err(E::new(
                            (*c.name).clone(),
                            Some(c.line),
                            Some(c.offset),
                            LineFailure::TooLong { max },
                        ));
                    }
                    self.cur = Some(c);
                }
                Err(TryRecvError::Empty) => return Ok(None),
                Err(TryRecvError::Disconnected) => {
                    self.finished = true;
                    let e = self
                        .shared
                        .error
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .take();
                    return match e {
                        Some((name, at, e)) => Err(E::new(name, None, at, LineFailure::Read(e))),
                        None => Ok(None),
                    };
                }
            }
        }
    }
}

impl<E> LiveLines<E> {
    /// Under checkpoints, for a followed file: tells the source's segment
    /// that its input cuts its barriers, asks the reader for the cut of
    /// the barrier now due, and says whether this worker may read on
    /// (`false` while it is stopped at a cut whose barrier its source has
    /// not placed yet).
    fn cut_passed(&mut self) -> bool {
        use air_runtime::dataflow::{barrier_due, input_cuts_barriers, source_barrier};
        let Some(due) = barrier_due() else {
            return true;
        };
        let placed = PLACED_BY_ALL
            .with(|p| p.get())
            .unwrap_or_else(source_barrier);
        if let Some((id, _)) = &self.held {
            if placed < *id {
                input_cuts_barriers(self.held.clone());
                return false;
            }
            self.held = None;
        }
        input_cuts_barriers(None);
        if due > self.requested.max(placed) {
            self.requested = due;
            self.shared.follow.request(due);
        }
        true
    }

    /// The bytes of `line` (from the last [`next_line`](Self::next_line)),
    /// without one `\r` at their end.
    pub(crate) fn text(&self, line: &RawLine) -> &[u8] {
        let bytes = self
            .cur
            .as_ref()
            .map_or(&[][..], |c| &c.bytes[line.start..line.end]);
        match bytes {
            [rest @ .., b'\r'] => rest,
            _ => bytes,
        }
    }

    /// The stream the current line comes from (the input, or its
    /// connection).
    pub(crate) fn path(&self) -> &Path {
        self.cur.as_ref().map_or(&self.name, |c| &c.name)
    }

    /// Lines consumed so far.
    pub(crate) fn lines(&self) -> u64 {
        self.lines
    }

    /// Whether the input ended (or [`finish`](Self::finish) was called).
    pub(crate) fn is_finished(&self) -> bool {
        self.finished && self.cur.is_none()
    }

    /// Stops reading: the queue is dropped, so the readers stop handing
    /// this worker chunks.
    pub(crate) fn finish(&mut self) {
        self.finished = true;
        self.cur = None;
        // Disconnect: drain nothing more, readers see the queue closed.
        let (_, rx) = sync_channel(0);
        self.rx = rx;
    }
}
