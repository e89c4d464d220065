//! [`TextSource`]: the lines of a worker's byte ranges of text files, as a
//! source of the graph API.

use super::count::FileRange;
use super::live::LiveTextReader;
use super::reader::{TextError, TextErrorKind, TextReader, TextReaderOptions};
use air_runtime::dataflow::{Source, SourcePoll, Stats};
use std::sync::{Arc, Mutex};

/// One line of text and when it was read (cheap to clone: the text is
/// shared).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextLine {
    /// Arrival time: the wall clock (ms since the Unix epoch) when the
    /// worker read the batch of lines this one came in; never below an
    /// earlier line's at the same worker.
    pub arrival_ms: u64,
    /// The line without its `\n` (and a `\r` before it), as
    /// [`TextReader::next_line`] gives it.
    pub text: Arc<str>,
}

/// A source of the lines of some byte ranges of text files (a worker's
/// share, e.g. from [`super::split_files`]), read in order with
/// [`TextReader`]. Counts `text_bytes` (bytes read) and `replaced_lines`
/// (lines decoded with U+FFFD under [`TextReaderOptions::lossy`]) into the
/// worker's stats.
///
/// Or ([`TextSource::live`]) a worker's share of a live input, read as it
/// arrives: a poll with no line queued is [`SourcePoll::Idle`], and the
/// source ends with the input.
///
/// The first error (a file that cannot be opened, invalid UTF-8 without
/// `lossy`, an over-long line) ends this source; the lines before it are
/// processed. The job then fails with it, or, with
/// [`TextSource::errors_to`], goes on and leaves it in a slot for the
/// caller (other workers read on; the live sources that share the slot
/// stop at their next poll, since their input may never end).
pub struct TextSource {
    pieces: std::vec::IntoIter<FileRange>,
    reader: Option<TextReader>,
    /// Opens the worker's share of a live input, at the first poll (not
    /// when the graph is built: a graph may be built once more to plan it,
    /// and that build must not take the worker's queue).
    open_live: Option<OpenLiveText>,
    /// The worker's share of a live input, once open.
    live: Option<LiveTextReader>,
    /// Whether it reads a live input.
    is_live: bool,
    opts: TextReaderOptions,
    /// The latest arrival time handed out.
    last_ms: u64,
    error: Option<TextError>,
    errors_to: Option<Arc<Mutex<Option<String>>>>,
    bytes: u64,
    replaced_lines: u64,
}

/// Opens a worker's share of a live input ([`LiveTextReader::open`]);
/// `None` if the share was taken already.
pub type OpenLiveText = Box<dyn FnOnce() -> Option<LiveTextReader> + Send>;

impl TextSource {
    /// The lines of `pieces`, in order, read with `opts`.
    pub fn new(pieces: Vec<FileRange>, opts: TextReaderOptions) -> TextSource {
        TextSource {
            pieces: pieces.into_iter(),
            reader: None,
            open_live: None,
            live: None,
            is_live: false,
            opts,
            last_ms: 0,
            error: None,
            errors_to: None,
            bytes: 0,
            replaced_lines: 0,
        }
    }

    /// The lines of a worker's share of a live input, which `open` opens
    /// at the first poll (e.g. `move || LiveTextReader::open(&feed, local,
    /// wake, opts)`); of `opts`, `lossy` applies.
    pub fn live(open: OpenLiveText, opts: TextReaderOptions) -> TextSource {
        TextSource {
            open_live: Some(open),
            is_live: true,
            ..TextSource::new(Vec::new(), opts)
        }
    }

    /// Puts the error that ends this source into `slot` (unless the slot
    /// already holds one) instead of failing the job.
    pub fn errors_to(mut self, slot: Arc<Mutex<Option<String>>>) -> TextSource {
        self.errors_to = Some(slot);
        self
    }

    /// Closes the current reader, keeping its counts.
    fn close_reader(&mut self) {
        if let Some(r) = self.reader.take() {
            self.replaced_lines += r.replaced_lines();
        }
        if let Some(r) = self.live.take() {
            self.replaced_lines += r.replaced_lines();
            self.bytes += r.bytes();
        }
    }

    /// Whether another source of the slot met an error (a live source
    /// then stops).
    fn slot_failed(&self) -> bool {
        self.errors_to
            .as_ref()
            .is_some_and(|slot| slot.lock().unwrap_or_else(|e| e.into_inner()).is_some())
    }

    /// [`Source::poll`] of a live input: the lines queued now, up to `max`,
    /// arrived at `now`.
    fn poll_live(&mut self, buf: &mut Vec<TextLine>, max: usize, now: u64) -> SourcePoll {
        if let Some(open) = self.open_live.take() {
            match open() {
                Some(r) => self.live = Some(r),
                None => {
                    self.fail(TextError {
                        path: "live input".into(),
                        line: None,
                        offset: None,
                        kind: TextErrorKind::Read(std::io::Error::other(
                            "a worker's share of the live input was taken twice",
                        )),
                    });
                    return SourcePoll::Done;
                }
            }
        }
        if self.slot_failed() {
            self.close_reader();
            return SourcePoll::Done;
        }
        let Some(r) = self.live.as_mut() else {
            return SourcePoll::Done;
        };
        let mut failed = None;
        while buf.len() < max {
            match r.next_line() {
                Ok(Some(line)) => buf.push(TextLine {
                    arrival_ms: now,
                    text: line.text.into(),
                }),
                Ok(None) => break,
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        let finished = r.is_finished();
        if let Some(e) = failed {
            // The lines before it are processed.
            self.fail(e);
            return SourcePoll::Done;
        }
        if !buf.is_empty() {
            SourcePoll::Ready
        } else if finished {
            self.close_reader();
            SourcePoll::Done
        } else {
            SourcePoll::Idle
        }
    }

    fn fail(&mut self, e: TextError) {
        self.close_reader();
        match &self.errors_to {
            Some(slot) => {
                let mut s = slot.lock().unwrap_or_else(|e| e.into_inner());
                s.get_or_insert_with(|| e.to_string());
            }
            None => self.error = Some(e),
        }
        // No more reading.
        self.pieces = Vec::new().into_iter();
    }
}

impl Source for TextSource {
    type Item = TextLine;

    fn poll(&mut self, buf: &mut Vec<TextLine>, max: usize) -> SourcePoll {
        let now = crate::now_ms().max(self.last_ms);
        self.last_ms = now;
        buf.clear();
        if self.is_live {
            return self.poll_live(buf, max, now);
        }
        let mut n = 0;
        while n < max {
            if self.reader.is_none() {
                let Some(p) = self.pieces.next() else {
                    break;
                };
                match TextReader::open_range(&p.path, p.range.clone(), self.opts) {
                    Ok(r) => self.reader = Some(r),
                    Err(e) => {
                        self.fail(e);
                        break;
                    }
                }
            }
            let r = self.reader.as_mut().expect("opened above");
            let before = r.position();
            while n < max {
                match r.next_line() {
                    Ok(Some(line)) => {
                        buf.push(TextLine {
                            arrival_ms: now,
                            text: line.text.into(),
                        });
                        n += 1;
                    }
                    Ok(None) => {
                        self.bytes += r.position().saturating_sub(before);
                        self.close_reader();
                        break;
                    }
                    Err(e) => {
                        self.bytes += r.position().saturating_sub(before);
                        self.fail(e);
                        break;
                    }
                }
            }
            if let Some(r) = &self.reader {
                self.bytes += r.position().saturating_sub(before);
            }
        }
        if n == 0 {
            SourcePoll::Done
        } else {
            SourcePoll::Ready
        }
    }

    fn take_error(&mut self) -> Option<String> {
        self.error.take().map(|e| e.to_string())
    }

    fn report(&mut self, stats: &mut Stats) {
        // Counted so far, the open reader's too; nothing is closed (live
        // metrics call this while the source still reads).
        let open = self.reader.as_ref().map_or(0, |r| r.replaced_lines())
            + self.live.as_ref().map_or(0, |r| r.replaced_lines());
        let live_bytes = self.live.as_ref().map_or(0, |r| r.bytes());
        stats.add("text_bytes", self.bytes + live_bytes);
        stats.add("replaced_lines", self.replaced_lines + open);
    }
}
