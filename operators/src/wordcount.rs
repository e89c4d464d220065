//! Word count as a map-reduce over the runtime: each worker reads its byte
//! ranges of the input files line by line, splits words (the definition is
//! [`crate::sources::text`]'s), counts them locally (a combiner), and sends
//! `(window, word, count)` partials to the word's owner, which sums them.
//!
//! Two modes:
//! - **batch** (`window_ms: None`): one window covering everything; each
//!   worker sends its counts when its input is exhausted, and the result is
//!   final when every input has ended.
//! - **windowed streaming** (`window_ms: Some(s)`): a line's event time is
//!   its arrival, the wall-clock time (ms) at which the worker read it;
//!   counts go to tumbling windows `[k·s, (k+1)·s)`; a worker's watermark is
//!   the arrival time of its latest line, and a window fires at the owner
//!   when the minimum watermark of its inputs passes its end. Arrival times
//!   depend on the run: windows differ between runs, their sum per word
//!   does not.

use crate::sources::text::{FileRange, TextError, TextReader, TextReaderOptions, WordSplitter};
use crate::stream::now_ms;
use air_runtime::{
    ChannelMetrics, Downstream, Emitter, JobConfig, Progress, RuntimeError, Upstream, WorkerInfo,
};
use rkyv::{Archive, Deserialize, Serialize};
use rustc_hash::{FxBuildHasher, FxHashMap};
use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::time::Duration;

/// What crosses the exchange: one word's count in one window at one worker.
#[derive(Clone, Debug, PartialEq, Eq, Archive, Serialize, Deserialize)]
pub struct WordPartial {
    /// Window start, ms (0 in batch mode).
    pub window_start: u64,
    /// The word (lower-cased).
    pub word: String,
    /// Its occurrences.
    pub count: u64,
}

/// One result row.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct WordCount {
    /// Window start, ms (0 in batch mode).
    pub window_start: u64,
    /// The word.
    pub word: String,
    /// Its occurrences in the window.
    pub count: u64,
}

/// Counters of one worker's map side.
#[derive(Debug, Default, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct WordCounters {
    /// Lines read.
    pub lines: u64,
    /// Words found.
    pub words: u64,
    /// Lines with invalid UTF-8 decoded with replacement characters
    /// (`lossy`).
    pub replaced_lines: u64,
    /// Bytes of input read.
    pub bytes: u64,
}

/// The map side at one worker.
pub struct WordCountUpstream {
    pieces: std::vec::IntoIter<FileRange>,
    reader: Option<TextReader>,
    opts: TextReaderOptions,
    window_ms: Option<u64>,
    splitter: WordSplitter,
    /// (window start, local counts).
    local: BTreeMap<u64, FxHashMap<String, u64>>,
    wm: u64,
    /// The error that stopped this worker's reading, if any.
    pub error: Option<TextError>,
    /// Counters.
    pub counters: WordCounters,
}

/// Lines read per step.
const LINES_PER_STEP: usize = 4096;

impl WordCountUpstream {
    /// A worker reading `pieces` (in order) with `opts`; `window_ms`: the
    /// streaming mode's window (`None`: batch).
    pub fn new(pieces: Vec<FileRange>, opts: TextReaderOptions, window_ms: Option<u64>) -> Self {
        WordCountUpstream {
            pieces: pieces.into_iter(),
            reader: None,
            opts,
            window_ms: window_ms.map(|w| w.max(1)),
            splitter: WordSplitter::new(),
            local: BTreeMap::new(),
            wm: 0,
            error: None,
            counters: WordCounters::default(),
        }
    }

    fn send_closed(&mut self, wm: u64, out: &mut Emitter<'_, '_, WordPartial>) {
        let size = self.window_ms.unwrap_or(u64::MAX);
        while let Some((&start, _)) = self.local.first_key_value() {
            if start.saturating_add(size) > wm {
                break;
            }
            let words = self.local.remove(&start).unwrap_or_default();
            for (word, count) in words {
                out.emit(
                    word_hash(&word),
                    WordPartial {
                        window_start: start,
                        word,
                        count,
                    },
                );
            }
        }
    }
}

/// The hash that routes a word to its owner.
pub fn word_hash(word: &str) -> u64 {
    FxBuildHasher.hash_one(word)
}

impl Upstream<WordPartial> for WordCountUpstream {
    fn step(&mut self, out: &mut Emitter<'_, '_, WordPartial>) -> Progress {
        if self.error.is_some() {
            return Progress::Done;
        }
        if self.reader.is_none() {
            let Some(p) = self.pieces.next() else {
                return Progress::Done;
            };
            match TextReader::open_range(&p.path, p.range.clone(), self.opts) {
                Ok(r) => self.reader = Some(r),
                Err(e) => {
                    self.error = Some(e);
                    return Progress::Done;
                }
            }
        }
        // Arrival time of this batch of lines (streaming mode).
        let window = self.window_ms.map(|s| {
            let now = now_ms().max(self.wm);
            self.wm = now;
            now - now % s
        });
        let key = window.unwrap_or(0);
        let counts = self.local.entry(key).or_default();
        let reader = self.reader.as_mut().expect("opened above");
        let before = reader.position();
        let mut words = 0u64;
        let mut lines = 0u64;
        let mut done = false;
        for _ in 0..LINES_PER_STEP {
            match reader.next_line() {
                Ok(Some(line)) => {
                    lines += 1;
                    self.splitter.for_each_word(line.text, |w| {
                        words += 1;
                        match counts.get_mut(w) {
                            Some(c) => *c += 1,
                            None => {
                                counts.insert(w.to_string(), 1);
                            }
                        }
                    });
                }
                Ok(None) => {
                    done = true;
                    break;
                }
                Err(e) => {
                    self.error = Some(e);
                    done = true;
                    break;
                }
            }
        }
        self.counters.lines += lines;
        self.counters.words += words;
        self.counters.bytes += reader.position().saturating_sub(before);
        if done {
            self.counters.replaced_lines += reader.replaced_lines();
            self.reader = None;
        }
        if self.window_ms.is_some() {
            let wm = self.wm;
            self.send_closed(wm, out);
        }
        if self.error.is_some() {
            Progress::Done
        } else {
            Progress::Busy
        }
    }

    fn watermark(&self) -> u64 {
        self.wm
    }

    fn finish(&mut self, out: &mut Emitter<'_, '_, WordPartial>) {
        if let Some(r) = self.reader.take() {
            self.counters.replaced_lines += r.replaced_lines();
        }
        self.send_closed(u64::MAX, out);
    }
}

/// The reduce side at a word's owner.
pub struct WordCountDownstream {
    size: u64,
    table: BTreeMap<u64, FxHashMap<String, u64>>,
    fired_wm: u64,
    /// Rows of fired windows (unsorted).
    pub results: Vec<WordCount>,
    /// Partials that arrived after their window fired (0 unless the
    /// watermark protocol is broken).
    pub late_partials: u64,
}

impl WordCountDownstream {
    /// The reduce side for `window_ms` (`None`: batch).
    pub fn new(window_ms: Option<u64>) -> Self {
        WordCountDownstream {
            size: window_ms.map_or(u64::MAX, |w| w.max(1)),
            table: BTreeMap::new(),
            fired_wm: 0,
            results: Vec::new(),
            late_partials: 0,
        }
    }
}

impl Downstream<WordPartial> for WordCountDownstream {
    fn on_batch(&mut self, _from: usize, items: &[ArchivedWordPartial]) {
        for p in items {
            let start = p.window_start.to_native();
            if start.saturating_add(self.size) <= self.fired_wm {
                self.late_partials += 1;
                continue;
            }
            let words = self.table.entry(start).or_default();
            let word = p.word.as_str();
            let n = p.count.to_native();
            match words.get_mut(word) {
                Some(c) => *c += n,
                None => {
                    words.insert(word.to_string(), n);
                }
            }
        }
    }

    fn on_watermark(&mut self, wm: u64) {
        self.fired_wm = wm;
        while let Some((&start, _)) = self.table.first_key_value() {
            if start.saturating_add(self.size) > wm {
                break;
            }
            let words = self.table.remove(&start).unwrap_or_default();
            self.results
                .extend(words.into_iter().map(|(word, count)| WordCount {
                    window_start: start,
                    word,
                    count,
                }));
        }
    }
}

/// What a word-count job produced (this process's workers).
pub struct WordCountOutput {
    /// Rows, sorted by window, then count descending, then word (bytes).
    pub results: Vec<WordCount>,
    /// Each worker's counters.
    pub counters: Vec<WordCounters>,
    /// The first reading error of any worker.
    pub error: Option<TextError>,
    /// Each worker's channel counters.
    pub channels: Vec<ChannelMetrics>,
    /// Each worker's placement.
    pub placement: Vec<air_runtime::WorkerPlacement>,
    /// Partials that arrived after their window fired (must be 0).
    pub late_partials: u64,
    /// Windows (per owner) still open at the end of a stopped job.
    pub unfired_windows: u64,
    /// Longest worker wall time.
    pub elapsed: Duration,
}

/// Runs word count: `pieces(worker)` gives each worker's file ranges.
pub fn run_wordcount_job<F>(
    cfg: &JobConfig,
    opts: TextReaderOptions,
    window_ms: Option<u64>,
    pieces: F,
) -> Result<WordCountOutput, RuntimeError>
where
    F: Fn(&WorkerInfo) -> Vec<FileRange> + Sync,
{
    let outcomes = air_runtime::run::<WordPartial, _, _, _>(cfg, |info| {
        (
            WordCountUpstream::new(pieces(info), opts, window_ms),
            WordCountDownstream::new(window_ms),
        )
    })?;
    let mut out = WordCountOutput {
        results: Vec::new(),
        counters: Vec::new(),
        error: None,
        channels: Vec::new(),
        placement: Vec::new(),
        late_partials: 0,
        unfired_windows: 0,
        elapsed: Duration::ZERO,
    };
    for o in outcomes {
        out.unfired_windows += o.downstream.table.len() as u64;
        out.results.extend(o.downstream.results);
        out.late_partials += o.downstream.late_partials;
        out.counters.push(o.upstream.counters);
        if out.error.is_none() {
            out.error = o.upstream.error;
        }
        out.channels.push(o.channels);
        out.placement.push(o.info.placement.clone());
        out.elapsed = out.elapsed.max(o.elapsed);
    }
    sort_rows(&mut out.results);
    Ok(out)
}

/// Sorts rows by window, then count descending, then word (byte order).
pub fn sort_rows(rows: &mut [WordCount]) {
    rows.sort_unstable_by(|a, b| {
        (a.window_start, std::cmp::Reverse(a.count), &a.word).cmp(&(
            b.window_start,
            std::cmp::Reverse(b.count),
            &b.word,
        ))
    });
}
