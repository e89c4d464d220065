//! `air run wordcount --input FILE…`: word count as a map-reduce over text
//! files (the definition of a word is in `air_operators::sources::text`:
//! Unicode word segmentation, UAX #29, lower-cased). Batch mode: one
//! result, CSV `word,count` sorted by count (descending), then word (byte
//! order). With `--window-ms S`, the windowed streaming mode: a line's event
//! time is its arrival (when a worker read it), counts per tumbling window,
//! CSV `window_start_ms,word,count` sorted by window, then count
//! (descending), then word.

use super::common::{CliError, RuntimeArgs};
use super::dist::Dist;
use super::driver::{OutputArgs, Query, RankPart, WorkerFigures};
use air_operators::sources::text::{split_files, TextReaderOptions};
use air_operators::wordcount::{run_wordcount_job, sort_rows, WordCount};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Instant;

/// `air run wordcount`.
#[derive(clap::Args, Debug, Clone)]
pub struct WordCountArgs {
    /// Text files (UTF-8), split by byte range across the workers.
    #[arg(long, num_args = 1.., required = true)]
    pub input: Vec<PathBuf>,
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
        super::common::check_input_files(&self.input)?;
        Ok(())
    }

    fn run_rank(&self, dist: &Dist) -> Result<RankPart<WordRow>, CliError> {
        let mut cfg = self.runtime.job_config();
        dist.configure(&mut cfg, self.runtime.force_network);
        let total = cfg.workers * dist.ranks();
        let shares = split_files(&self.input, total)
            .map_err(|e| CliError::BadInput(format!("splitting the input: {e}")))?;
        let opts = TextReaderOptions {
            lossy: self.lossy,
            ..TextReaderOptions::default()
        };
        let start = Instant::now();
        let out = run_wordcount_job(&cfg, opts, self.window_ms, |info| {
            shares.get(info.index).cloned().unwrap_or_default()
        })
        .map_err(|e| CliError::Other(e.into()))?;
        let w = out.counters.len();
        let per_worker = (0..w)
            .map(|i| WorkerFigures {
                worker: dist.rank() * w + i,
                rank: dist.rank(),
                placement: out.placement[i].clone(),
                events: out.counters[i].lines,
                late_records: 0,
                input_lag_max_ms: None,
                channels: out.channels[i].clone(),
            })
            .collect();
        Ok(RankPart {
            rows: out
                .results
                .into_iter()
                .map(|r| WordRow {
                    window_start_ms: r.window_start,
                    word: r.word,
                    count: r.count,
                })
                .collect(),
            per_worker,
            latency: Vec::new(),
            elapsed_s: start.elapsed().as_secs_f64(),
            late_partials: out.late_partials,
            input_error: out.error.map(|e| e.to_string()),
            skipped: 0,
            uncollected_rows: 0,
            counters: [
                (
                    "replaced_lines".to_string(),
                    out.counters.iter().map(|c| c.replaced_lines).sum(),
                ),
                (
                    "words".to_string(),
                    out.counters.iter().map(|c| c.words).sum(),
                ),
                (
                    "bytes".to_string(),
                    out.counters.iter().map(|c| c.bytes).sum(),
                ),
            ]
            .into_iter()
            .collect(),
            stopped: false,
            unfired_windows: out.unfired_windows,
            peak_rss_bytes: 0,
        })
    }

    fn finish(&self, rows: Vec<WordRow>) -> Vec<WordRow> {
        let mut rows: Vec<WordCount> = rows
            .into_iter()
            .map(|r| WordCount {
                window_start: r.window_start_ms,
                word: r.word,
                count: r.count,
            })
            .collect();
        sort_rows(&mut rows);
        rows.into_iter()
            .map(|r| WordRow {
                window_start_ms: r.window_start,
                word: r.word,
                count: r.count,
            })
            .collect()
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
        self.input.clone()
    }

    fn source(&self) -> &'static str {
        "files"
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
