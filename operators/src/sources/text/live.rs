//! [`LiveTextReader`]: one worker's share of a live input (standard input,
//! TCP; see [`crate::sources::live`]) as UTF-8 lines.

use std::path::PathBuf;

use super::reader::{Line, TextError, TextErrorKind, TextReaderOptions};
use crate::sources::live::{LiveFeed, LiveLines};

/// The lines of one worker's share of a live input, as UTF-8, as
/// [`TextReader`](super::TextReader) reads a file: `\n` ends a line, a
/// `\r` before it is dropped, an empty line is a line. Lines are numbered,
/// and byte offsets counted, from the start of their stream, and errors
/// name the stream (`-: invalid UTF-8 at byte 1234 (line 5)`).
///
/// Each line is checked for UTF-8 (SIMD) as it is taken. Invalid UTF-8 is
/// an error, or with [`TextReaderOptions::lossy`] is replaced by U+FFFD
/// and counted ([`replaced_lines`](Self::replaced_lines)). The first error
/// (invalid UTF-8 without `lossy`, a line over the feed's limit, a read
/// error that ended the input) is returned once and ends the reader.
#[derive(Debug)]
pub struct LiveTextReader {
    lines: LiveLines<TextError>,
    lossy: bool,
    /// The current line decoded with replacement characters (lossy mode).
    lossy_buf: String,
    replaced_lines: u64,
    bytes: u64,
}

impl LiveTextReader {
    /// A reader of local worker `local`'s share of `feed`; `wake` is called
    /// when a chunk is queued for this worker (ring its doorbell). Of
    /// `opts`, `lossy` applies (the feed's own options bound the line
    /// length). `None` if that worker's share was taken already.
    pub fn open(
        feed: &LiveFeed,
        local: usize,
        wake: impl Fn() + Send + Sync + 'static,
        opts: TextReaderOptions,
    ) -> Option<LiveTextReader> {
        Some(LiveTextReader {
            lines: feed.worker(local, wake)?,
            lossy: opts.lossy,
            lossy_buf: String::new(),
            replaced_lines: 0,
            bytes: 0,
        })
    }

    /// The next line, or `None` if none is queued now or the input ended
    /// ([`is_finished`](Self::is_finished) tells them apart).
    ///
    /// # Errors
    /// The error that ends the reader (see the type's docs), once.
    pub fn next_line(&mut self) -> Result<Option<Line<'_>>, TextError> {
        let raw = match self.lines.next_line() {
            Ok(Some(raw)) => raw,
            Ok(None) => return Ok(None),
            Err(e) => {
                self.lines.finish();
                return Err(e);
            }
        };
        // The line and its `\n`.
        self.bytes += (raw.end - raw.start) as u64 + 1;
        let checked = simdutf8::compat::from_utf8(self.lines.text(&raw))
            .map(|_| ())
            .map_err(|e| e.valid_up_to());
        match checked {
            Ok(()) => {
                // SAFETY: these bytes (the same line of the same chunk,
                // not changed since) passed UTF-8 validation just above.
                let text = unsafe { std::str::from_utf8_unchecked(self.lines.text(&raw)) };
                Ok(Some(Line {
                    text,
                    number: raw.number,
                    offset: raw.offset,
                }))
            }
            Err(bad) if !self.lossy => {
                let e = TextError {
                    path: PathBuf::from(self.lines.path()),
                    line: Some(raw.number),
                    offset: Some(raw.offset + bad as u64),
                    kind: TextErrorKind::InvalidUtf8,
                };
                self.lines.finish();
                Err(e)
            }
            Err(_) => {
                self.lossy_buf.clear();
                self.lossy_buf
                    .push_str(&String::from_utf8_lossy(self.lines.text(&raw)));
                self.replaced_lines += 1;
                Ok(Some(Line {
                    text: &self.lossy_buf,
                    number: raw.number,
                    offset: raw.offset,
                }))
            }
        }
    }

    /// Whether the input ended (or an error ended this reader); a quiet
    /// input is not finished.
    pub fn is_finished(&self) -> bool {
        self.lines.is_finished()
    }

    /// Lines decoded with replacement characters under
    /// [`TextReaderOptions::lossy`].
    pub fn replaced_lines(&self) -> u64 {
        self.replaced_lines
    }

    /// Bytes of the lines taken so far, each with its `\n`.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}
