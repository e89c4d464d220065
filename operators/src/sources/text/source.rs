//! [`TextSource`]: the lines of a worker's byte ranges of text files, as a
//! source of the graph API.

use super::count::FileRange;
use super::reader::{TextError, TextReader, TextReaderOptions};
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
/// The first error (a file that cannot be opened, invalid UTF-8 without
/// `lossy`, an over-long line) ends this source; the lines before it are
/// processed. The job then fails with it, or, with
/// [`TextSource::errors_to`], goes on and leaves it in a slot for the
/// caller (other workers read on).
pub struct TextSource {
    pieces: std::vec::IntoIter<FileRange>,
    reader: Option<TextReader>,
    opts: TextReaderOptions,
    /// The latest arrival time handed out.
    last_ms: u64,
    error: Option<TextError>,
    errors_to: Option<Arc<Mutex<Option<String>>>>,
    bytes: u64,
    replaced_lines: u64,
}

impl TextSource {
    /// The lines of `pieces`, in order, read with `opts`.
    pub fn new(pieces: Vec<FileRange>, opts: TextReaderOptions) -> TextSource {
        TextSource {
            pieces: pieces.into_iter(),
            reader: None,
            opts,
            last_ms: 0,
            error: None,
            errors_to: None,
            bytes: 0,
            replaced_lines: 0,
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
        self.close_reader();
        stats.add("text_bytes", self.bytes);
        stats.add("replaced_lines", self.replaced_lines);
    }
}
