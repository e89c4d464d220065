//! A live source for user programs: records of the user's own type from a
//! live input (standard input, a TCP connection, TCP senders; see
//! [`crate::sources::live`]), one JSON object or one CSV row per line.
//!
//! The rank's [`LiveFeed`] reads the stream on its own threads and hands
//! whole-line chunks to the rank's workers round-robin; each worker's
//! `LiveSource` parses the lines of its chunks, so parsing runs on every
//! worker. The feed holds a sender back (pipe or TCP flow control) when
//! every worker's queue is full: nothing is buffered without bound.

use crate::sources::lines::{LineError, LineFailure};
use crate::sources::live::{LiveFeed, LiveLines};
use air_runtime::dataflow::{Dataflow, Source, SourcePoll, Stats};
use serde::de::DeserializeOwned;
use std::marker::PhantomData;
use std::path::PathBuf;
use std::sync::Arc;

/// How each line of a live input becomes a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineFormat {
    /// One JSON object per line, fields matched to the type's by name
    /// (serde_json).
    JsonLines,
    /// One CSV row per line, without a header: columns in the order of the
    /// type's fields (the csv crate; surrounding spaces trimmed).
    Csv,
}

/// A failure of the feed's lines (a read error, an over-long line), as
/// text naming the stream, the line and the byte offset.
#[derive(Debug)]
struct LineFault(String);

impl LineError for LineFault {
    fn new(path: PathBuf, line: Option<u64>, offset: Option<u64>, failure: LineFailure) -> Self {
        let at = match line {
            Some(l) => format!("{}:{l}", path.display()),
            None => path.display().to_string(),
        };
        let what = match failure {
            LineFailure::Open(e) => format!("cannot open: {e}"),
            LineFailure::Read(e) => format!("read failed: {e}"),
            LineFailure::TooLong { max } => format!("line longer than {max} bytes"),
        };
        LineFault(match offset {
            Some(o) => format!("{at}: {what} (byte offset {o})"),
            None => format!("{at}: {what}"),
        })
    }
}

/// Records of type `T` from this worker's share of a live input: its
/// lines, parsed as [`LineFormat`] says, in stream order. Empty lines are
/// skipped. A line that does not parse stops the job with an error naming
/// the stream, the line, the field and the byte offset (the records before
/// it are processed), unless [`LiveSource::skip_bad_records`] was asked
/// for. The source is idle while nothing is queued for its worker (the
/// feed rings the worker's doorbell when a chunk comes) and done when the
/// input ended: EOF on standard input, the server closing a `tcp://`
/// connection, every `listen://` sender gone.
///
/// Event time comes from the records (`.event_time(|r| r.time_ms, delay)`
/// after the source), as for files. When the input comes slower than the
/// feed reads it, the feed cuts the newest lines of each read into one
/// piece of about 1 KiB per worker, so every worker gets recent lines and
/// no worker's watermark holds windows back for long.
///
/// ```
/// use air_operators::graph::*;
/// use air_operators::sources::live::{LiveFeed, LiveInput, LiveOptions};
/// use air_runtime::dataflow::run_graph;
/// use air_runtime::JobConfig;
/// use std::io::Write;
/// use std::sync::{Arc, Mutex};
///
/// #[derive(Clone, serde::Deserialize)]
/// struct Click { user: u32, time_ms: u64 }
///
/// // A sender on a local TCP port; the job connects to it.
/// let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
/// let addr = server.local_addr().unwrap();
/// let sender = std::thread::spawn(move || {
///     let (mut s, _) = server.accept().unwrap();
///     for (user, t) in [(1, 100), (2, 200), (1, 300)] {
///         writeln!(s, r#"{{"user": {user}, "time_ms": {t}}}"#).unwrap();
///     }
/// });
/// let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
/// let input = LiveInput::Connect(addr.to_string());
/// let feed = LiveFeed::start(&input, cfg.workers, LiveOptions::default()).unwrap();
/// let rows = Arc::new(Mutex::new(Vec::new()));
/// let out = rows.clone();
/// run_graph(&cfg, move |df| {
///     let out = out.clone();
///     df.source(LiveSource::<Click>::json_lines(&feed, df))
///         .for_each(move |c| out.lock().unwrap().push((c.time_ms, c.user)));
/// })
/// .unwrap();
/// sender.join().unwrap();
/// let mut rows = rows.lock().unwrap().clone();
/// rows.sort();
/// assert_eq!(rows, [(100, 1), (200, 2), (300, 1)]);
/// ```
pub struct LiveSource<T> {
    feed: LiveFeed,
    local: usize,
    /// Rings the worker's doorbell (a parked worker wakes for a chunk).
    wake: Arc<dyn Fn() + Send + Sync>,
    format: LineFormat,
    skip_bad: bool,
    /// Taken from the feed at the first poll: the graph's planning run of
    /// the build closure must not take a worker's queue.
    lines: Option<LiveLines<LineFault>>,
    csv_record: csv::StringRecord,
    error: Option<String>,
    read: u64,
    skipped: u64,
    _t: PhantomData<fn() -> T>,
}

impl<T: DeserializeOwned + Clone + Send + 'static> LiveSource<T> {
    /// Worker `df`'s share of `feed`, one JSON object per line.
    pub fn json_lines(feed: &LiveFeed, df: &Dataflow) -> Self {
        Self::new(feed, df, LineFormat::JsonLines)
    }

    /// Worker `df`'s share of `feed`, one CSV row per line (no header;
    /// columns in the order of `T`'s fields).
    pub fn csv(feed: &LiveFeed, df: &Dataflow) -> Self {
        Self::new(feed, df, LineFormat::Csv)
    }

    /// Worker `df`'s share of `feed`, lines parsed as `format` says. The
    /// feed must have been started for this process's workers
    /// ([`LiveFeed::start`] with the job's workers per process): the
    /// worker's local index is its global index modulo that number.
    pub fn new(feed: &LiveFeed, df: &Dataflow, format: LineFormat) -> Self {
        let info = df.worker();
        let bell = info.doorbell;
        LiveSource {
            feed: feed.clone(),
            local: info.index % feed.workers(),
            wake: Arc::new(move || {
                if let Some(b) = &bell {
                    b.ring();
                }
            }),
            format,
            skip_bad: false,
            lines: None,
            csv_record: csv::StringRecord::new(),
            error: None,
            read: 0,
            skipped: 0,
            _t: PhantomData,
        }
    }

    /// Skips lines that do not parse instead of stopping the job: they are
    /// counted (`skipped_records`, and in the live metrics) and the first
    /// is reported on standard error.
    pub fn skip_bad_records(mut self) -> Self {
        self.skip_bad = true;
        self
    }

    fn parse(&mut self, bytes: &[u8]) -> Result<T, String> {
        match self.format {
            LineFormat::JsonLines => serde_json::from_slice(bytes).map_err(|e| {
                let what = crate::sources::json_scan::error_message(&e);
                format!("column {}: {what}", e.column())
            }),
            LineFormat::Csv => {
                let mut r = csv::ReaderBuilder::new()
                    .has_headers(false)
                    .trim(csv::Trim::All)
                    .from_reader(bytes);
                match r.read_record(&mut self.csv_record) {
                    Ok(true) => {}
                    Ok(false) => return Err("no CSV row".into()),
                    Err(e) => return Err(e.to_string()),
                }
                self.csv_record.deserialize::<T>(None).map_err(|e| {
                    let field = match e.kind() {
                        csv::ErrorKind::Deserialize { err, .. } => err.field(),
                        _ => None,
                    };
                    let what = match e.kind() {
                        csv::ErrorKind::Deserialize { err, .. } => err.kind().to_string(),
                        _ => e.to_string(),
                    };
                    match field {
                        Some(f) => format!("field {}: {what}", f + 1),
                        None => what,
                    }
                })
            }
        }
    }
}

impl<T: DeserializeOwned + Clone + Send + 'static> Source for LiveSource<T> {
    type Item = T;

    fn poll(&mut self, buf: &mut Vec<T>, max: usize) -> SourcePoll {
        buf.clear();
        if self.error.is_some() {
            return SourcePoll::Done;
        }
        if self.lines.is_none() {
            let wake = self.wake.clone();
            match self.feed.worker(self.local, move || wake()) {
                Some(l) => self.lines = Some(l),
                None => {
                    self.error = Some(format!(
                        "{}: worker {}'s share of the live input was taken by another source \
                         (one LiveSource per worker and feed)",
                        self.feed.name().display(),
                        self.local
                    ));
                    return SourcePoll::Done;
                }
            }
        }
        while buf.len() < max {
            let mut lines = self.lines.take().expect("taken above");
            let next = lines.next_line();
            let line = match next {
                Ok(Some(l)) => l,
                Ok(None) => {
                    let finished = lines.is_finished();
                    self.lines = Some(lines);
                    return if !buf.is_empty() {
                        SourcePoll::Ready
                    } else if finished {
                        SourcePoll::Done
                    } else {
                        SourcePoll::Idle
                    };
                }
                Err(LineFault(e)) => {
                    self.lines = Some(lines);
                    self.error = Some(e);
                    return SourcePoll::Ready;
                }
            };
            let text = lines.text(&line);
            if text.iter().all(u8::is_ascii_whitespace) {
                self.lines = Some(lines);
                continue;
            }
            let parsed = self.parse(text);
            match parsed {
                Ok(v) => {
                    self.read += 1;
                    buf.push(v);
                }
                Err(what) => {
                    let msg = format!(
                        "{}:{}: {what} (line at byte offset {})",
                        lines.path().display(),
                        line.number,
                        line.offset
                    );
                    if self.skip_bad {
                        if self.skipped == 0 {
                            air_runtime::say!("warning: {msg} (skipped; later ones counted)");
                        }
                        self.skipped += 1;
                    } else {
                        self.lines = Some(lines);
                        self.error = Some(msg);
                        return SourcePoll::Ready;
                    }
                }
            }
            self.lines = Some(lines);
        }
        SourcePoll::Ready
    }

    fn take_error(&mut self) -> Option<String> {
        self.error.take()
    }

    /// That it reads a live input, and its records so far
    /// ([`LivePosition`]): a live input is not replayed. On resume the
    /// source reads on from what the sender sends then: state and
    /// committed output are consistent, and the lines read after the last
    /// complete checkpoint are lost unless the sender sends them again.
    fn save(&self) -> Option<Vec<u8>> {
        Some(self.feed.save_position(self.read))
    }

    fn restore(&mut self, state: &[u8]) -> Result<(), String> {
        self.feed.restore(state)
    }

    fn rescales(&self) -> bool {
        true
    }

    /// Nothing to deal out: one position for every worker (a followed
    /// file's cut), or none (the sender's stream goes on).
    fn rescale(
        &mut self,
        states: &[&[u8]],
        _to: air_runtime::dataflow::state::Rescale,
    ) -> Result<(), String> {
        self.feed.rescale(states)
    }

    fn report(&mut self, stats: &mut Stats) {
        stats.add("live_records", self.read);
        stats.add("skipped_records", self.skipped);
    }
}
