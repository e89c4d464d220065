//! `air run wordcount --input FILE…`: word count as a map-reduce over text
//! files (or a live input: `--input -`, `--input tcp://HOST:PORT`,
//! `--listen HOST:PORT`) (the definition of a word is in `air_operators::sources::text`:
//! Unicode word segmentation, UAX #29, lower-cased). Batch mode: one
//! result, CSV `word,count` sorted by count (descending), then word (byte
//! order). With `--window-ms S`, the windowed streaming mode: a line's event
//! time is its arrival (when a worker read it), counts per tumbling window,
//! CSV `window_start_ms,word,count` sorted by window, then count
//! (descending), then word.
//!
//! The job is a graph ([`air_runtime::dataflow`]): each worker's lines
//! ([`TextSource`], event time: arrival) → words → `key_by` word → a
//! tumbling window (batch mode: one window holding all time) with `Count`,
//! pre-aggregated per worker → rows, streamed to `--out` as each window
//! closes (see [`super::driver::RowsTo`]; batch mode's one window closes
//! when every input has ended).

use super::common::{CliError, RuntimeArgs};
use super::dist::Dist;
use super::driver::{sink_window_rows, OutputArgs, Query, RankPart, RowsTo, WorkerFigures};
use air_operators::graph::{Count, KeyedWindowExt, Tumbling, Windowed};
use air_operators::sources::live::{LiveFeed, LiveInput, LiveOptions};
use air_operators::sources::text::{
    split_files, LiveTextReader, OpenLiveText, TextLine, TextReaderOptions, TextSource, Word, Words,
};
use air_runtime::dataflow::{run_graph, Dataflow};
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// `air run wordcount`.
#[derive(clap::Args, Debug, Clone)]
pub struct WordCountArgs {
    /// Text files (UTF-8), split by byte range across the workers. Or one
    /// live input: `-` (standard input, a pipe) or `tcp://HOST:PORT` (air
    /// connects; the server sends lines), read as it arrives (one reader
    /// thread hands whole-line chunks to the workers); batch mode's one
    /// result then comes when the input ends, windowed mode's rows as the
    /// windows of arrival time close.
    #[arg(long, num_args = 1.., required_unless_present = "listen")]
    pub input: Vec<PathBuf>,
    /// Live input from TCP senders air accepts on HOST:PORT (one or more;
    /// each connection's lines feed this rank). The input ends when every
    /// sender that came has closed. `{rank}` in HOST:PORT is replaced by
    /// the MPI rank.
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "input")]
    pub listen: Option<String>,
    /// Replace invalid UTF-8 with U+FFFD instead of failing (the report
    /// counts the lines that needed it).
    #[arg(long)]
    pub lossy: bool,
    /// Windowed streaming mode: tumbling windows of this many ms of arrival
    /// time (without it: batch mode, one result).
    #[arg(long, value_name = "MS", value_parser = super::common::parse::window_ms)]
    pub window_ms: Option<u64>,
    /// Outputs.
    #[command(flatten)]
    pub output: OutputArgs,
    /// Runtime options.
    #[command(flatten)]
    pub runtime: RuntimeArgs,
}

impl WordCountArgs {
    /// The live input of `--input -`, `--input tcp://…` or `--listen`
    /// (`None` for files).
    ///
    /// # Errors
    /// A live input given with other inputs.
    pub fn live_input(&self) -> Result<Option<LiveInput>, CliError> {
        super::common::live_input(&self.input, self.listen.as_deref())
    }
}

/// One result row (window 0 in batch mode).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WordRow {
    /// Window start, ms of arrival time (0 in batch mode).
    pub window_start_ms: u64,
    /// The word.
    pub word: String,
    /// Its occurrences.
    pub count: u64,
}

impl Query for WordCountArgs {
    type Row = WordRow;

    fn name(&self) -> String {
        "wordcount".into()
    }
    fn runtime(&self) -> &RuntimeArgs {
        &self.runtime
    }
    fn output(&self) -> &OutputArgs {
        &self.output
    }
    fn validate(&self, _ranks: usize) -> Result<(), CliError> {
        let bad = |m: String| Err(CliError::BadInput(m));
        super::ysb::check_runtime(&self.runtime)?;
        super::common::check_honoured(
            super::common::QueryKind::Wordcount,
            &[(
                super::common::QueryOption::WindowMs,
                self.window_ms.is_some(),
            )],
        )?;
        if self.window_ms == Some(0) {
            return bad("--window-ms must be positive".into());
        }
        if self.live_input()?.is_none() {
            super::common::check_input_files(&self.input)?;
        }
        Ok(())
    }

    fn run_rank(&self, dist: &Dist) -> Result<RankPart<WordRow>, CliError> {
        // Rows counted, not kept: the driver streams them
        // (`run_rank_streaming`).
        self.run_rank_streaming(dist, &RowsTo::Nowhere)
    }

    fn streams(&self) -> bool {
        true
    }

    fn run_rank_streaming(&self, dist: &Dist, to: &RowsTo) -> Result<RankPart<WordRow>, CliError> {
        let mut cfg = self.runtime.job_config();
        dist.configure(&mut cfg, self.runtime.force_network);
        let total = cfg.workers * dist.ranks();
        let opts = TextReaderOptions {
            lossy: self.lossy,
            ..TextReaderOptions::default()
        };
        // A live input: this rank's readers hand whole-line chunks to its
        // workers (each checks and splits its own).
        let w = cfg.workers;
        let live = match self.live_input()? {
            Some(input) => {
                let lo = LiveOptions {
                    max_line_len: opts.max_line_len,
                    ..LiveOptions::default()
                };
                Some(
                    LiveFeed::start(&input.for_rank(dist.rank()), w, lo)
                        .map_err(|e| CliError::BadInput(e.to_string()))?,
                )
            }
            None => None,
        };
        let shares = if live.is_some() {
            vec![Vec::new(); total]
        } else {
            split_files(&self.input, total)
                .map_err(|e| CliError::BadInput(format!("splitting the input: {e}")))?
        };
        // Batch mode is one window holding all time: it closes when every
        // input ended.
        let windows = Tumbling::ms(self.window_ms.unwrap_or(u64::MAX));
        let windowed = self.window_ms.is_some();
        let header = self.header();
        let failed = Arc::new(Mutex::new(None));
        let start = Instant::now();
        // The graph every worker runs: its lines (event time: arrival) →
        // words → per word (per window) count → rows.
        let build = |df: &Dataflow| {
            let lines = match &live {
                Some(feed) => {
                    let (feed, local) = (feed.clone(), df.index() % w);
                    let bell = df.worker().doorbell.clone();
                    let open: OpenLiveText = Box::new(move || {
                        let wake = move || {
                            if let Some(b) = &bell {
                                b.ring();
                            }
                        };
                        LiveTextReader::open(&feed, local, wake, opts)
                    });
                    TextSource::live(open, opts)
                }
                None => TextSource::new(shares[df.index()].clone(), opts),
            }
            .errors_to(failed.clone());
            let counts = df
                .source(lines)
                .event_time(|l: &TextLine| l.arrival_ms, 0)
                .flat_map(|l: TextLine| Words::of(l.text).map(move |w| (l.arrival_ms, w)))
                .key_by(|w: &(u64, Word)| w.1.clone())
                .window(windows, |w: &(u64, Word)| w.0)
                .aggregate(Count);
            // Within a window: count descending, then word (byte order).
            let sort = |r: &Windowed<Word, u64>| (Reverse(r.value), r.key.clone());
            if windowed {
                let row = |r: Windowed<Word, u64>| (r.start, r.key, r.value);
                sink_window_rows(counts, sort, row, &header, to);
            } else {
                let row = |r: Windowed<Word, u64>| (r.key, r.value);
                sink_window_rows(counts, sort, row, &header, to);
            }
        };
        let out = run_graph(&cfg, build).map_err(|e| CliError::Other(e.into()))?;
        let per_worker = out
            .workers
            .iter()
            .map(|wr| WorkerFigures {
                worker: wr.index,
                rank: dist.rank(),
                placement: wr.placement.clone(),
                events: wr.stats.get("source_records"),
                late_records: wr.stats.get("late_records"),
                input_lag_max_ms: None,
                channels: wr.channels.clone(),
                records_in_by_edge: wr.records_in.clone(),
                records_in_periods: wr.records_in_periods.clone(),
                extra: Default::default(),
            })
            .collect();
        let st = &out.stats;
        let input_error = failed.lock().unwrap_or_else(|e| e.into_inner()).take();
        // Partial lines of connections dropped mid-line are skipped.
        let partial = live.as_ref().map_or(0, |f| f.report().partial_lines);
        Ok(RankPart {
            rows: Vec::new(),
            per_worker,
            latency: Vec::new(),
            elapsed_s: start.elapsed().max(out.elapsed).as_secs_f64(),
            late_partials: st.get("late_partials"),
            checkpoints: super::driver::CheckpointPart::of(st),
            late: st.late.clone(),
            disorder_max_ms: st.get_max(air_runtime::dataflow::DISORDER_MAX),
            input_error,
            skipped: partial,
            // Written as their windows closed (or only counted).
            uncollected_rows: st.get("window_rows"),
            counters: [
                ("replaced_lines", st.get("replaced_lines")),
                // Every word reaches the window.
                ("words", st.get("window_records")),
                ("bytes", st.get("text_bytes")),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
            stopped: out.stopped,
            unfired_windows: st.get("unfired_windows") + st.get("unfired_collected_windows"),
            peak_rss_bytes: 0,
            extra: Default::default(),
            channels: super::driver::channel_figures(&out),
            load: super::load::LoadPart::of(&out),
        })
    }

    fn finish(&self, mut rows: Vec<WordRow>) -> Vec<WordRow> {
        // By window, then count descending, then word (byte order).
        rows.sort_unstable_by(|a, b| {
            (a.window_start_ms, Reverse(a.count), &a.word).cmp(&(
                b.window_start_ms,
                Reverse(b.count),
                &b.word,
            ))
        });
        rows
    }

    fn header(&self) -> Vec<&'static str> {
        if self.window_ms.is_some() {
            vec!["window_start_ms", "word", "count"]
        } else {
            vec!["word", "count"]
        }
    }

    fn record(&self, r: &WordRow) -> Vec<String> {
        if self.window_ms.is_some() {
            vec![
                r.window_start_ms.to_string(),
                r.word.clone(),
                r.count.to_string(),
            ]
        } else {
            vec![r.word.clone(), r.count.to_string()]
        }
    }

    fn inputs(&self) -> Vec<PathBuf> {
        self.input
            .iter()
            .filter(|p| LiveInput::from_input_arg(p).is_none())
            .cloned()
            .collect()
    }

    fn source(&self) -> &'static str {
        if matches!(self.live_input(), Ok(Some(_))) {
            "live"
        } else {
            "files"
        }
    }

    fn wallclock(&self) -> bool {
        false
    }

    fn params(&self) -> serde_json::Value {
        serde_json::json!({
            "mode": if self.window_ms.is_some() { "windowed" } else { "batch" },
            "window_ms": self.window_ms,
            "lossy": self.lossy,
            "inputs": self.input,
            "note": "events = lines; counters.replaced_lines = lines decoded with U+FFFD (--lossy)",
        })
    }
}
