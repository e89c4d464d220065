//! `air run wa`: AIR's simple windowed aggregation — per-key count and sum
//! of keyed events in tumbling event-time windows. Results CSV
//! `window_start_ms,key,count,sum`, sorted by window then key.

use super::common::{CliError, RuntimeArgs};
use super::dist::Dist;
use super::driver::{OutputArgs, Query, RankPart};
use air_operators::sources::wa::{KeyDist, WaConfig, WaEvent, WaGenerator};
use air_operators::stream::{
    run_window_job, run_window_job_every_event, Source, SourcePoll, Stream, WindowOptions,
};
use air_operators::window::{Aggregate, WindowSpec};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

/// Generator options shared by `air run wa` and `air gen wa`.
#[derive(clap::Args, Debug, Clone)]
pub struct WaGenArgs {
    /// Events in the whole stream (all workers).
    #[arg(long, default_value_t = 200_000_000)]
    pub events: u64,
    /// Distinct keys.
    #[arg(long, default_value_t = 1000)]
    pub keys: u64,
    /// Zipf-distributed keys with this exponent (e.g. 1.1); uniform without.
    #[arg(long)]
    pub zipf: Option<f64>,
    /// Event-time rate: events per second of event time (fractional spacing).
    #[arg(long, default_value_t = 1_000_000.0)]
    pub events_per_s: f64,
    /// Seed of the stream.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

impl WaGenArgs {
    /// The generator configuration.
    pub fn config(&self) -> WaConfig {
        WaConfig {
            seed: self.seed,
            events: self.events,
            keys: self.keys,
            dist: self.zipf.map_or(KeyDist::Uniform, KeyDist::Zipf),
            events_per_s: self.events_per_s,
            ..WaConfig::default()
        }
    }
}

/// `air run wa`.
#[derive(clap::Args, Debug, Clone)]
pub struct WaArgs {
    /// Generator options.
    #[command(flatten)]
    pub gen: WaGenArgs,
    /// Tumbling window size, ms of event time.
    #[arg(long, default_value_t = 1000)]
    pub window_ms: u64,
    /// Send every event through the exchange (no partial aggregate before it).
    #[arg(long)]
    pub shuffle: bool,
    /// Outputs.
    #[command(flatten)]
    pub output: OutputArgs,
    /// Runtime options.
    #[command(flatten)]
    pub runtime: RuntimeArgs,
}

/// One result row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaRow {
    /// Window start, ms of event time.
    pub window_start_ms: u64,
    /// The key.
    pub key: u64,
    /// Events of the key in the window.
    pub count: u64,
    /// Sum of their values.
    pub sum: i64,
}

/// A worker's shard of the generator.
pub struct WaSource(WaGenerator);

impl Source for WaSource {
    type Item = WaEvent;
    #[inline]
    fn poll(&mut self, buf: &mut Vec<WaEvent>, max: usize) -> SourcePoll {
        buf.resize(max, WaEvent::default());
        let n = self.0.fill(buf);
        buf.truncate(n);
        if n == 0 {
            SourcePoll::Done
        } else {
            SourcePoll::Ready
        }
    }
}

impl Query for WaArgs {
    type Row = WaRow;

    fn name(&self) -> String {
        "wa".into()
    }
    fn runtime(&self) -> &RuntimeArgs {
        &self.runtime
    }
    fn output(&self) -> &OutputArgs {
        &self.output
    }
    fn validate(&self, _ranks: usize) -> Result<(), CliError> {
        self.gen.config().validate().map_err(CliError::BadInput)?;
        if self.window_ms == 0 {
            return Err(CliError::BadInput("--window-ms must be positive".into()));
        }
        super::ysb::check_runtime(&self.runtime)
    }
    fn run_rank(&self, dist: &Dist) -> Result<RankPart<WaRow>, CliError> {
        let mut cfg = self.runtime.job_config();
        dist.configure(&mut cfg, self.runtime.force_network);
        let gen = self.gen.config();
        let wopts = WindowOptions::default();
        let start = Instant::now();
        let build = |info: &air_runtime::WorkerInfo| {
            Stream::source(WaSource(WaGenerator::new(&gen, info.index, info.workers)))
                .key_by(|e: &WaEvent| e.key)
                .window(|e| e.time_ms, |e| e.value, wopts)
        };
        let spec = WindowSpec::tumbling(self.window_ms);
        let out = if self.shuffle {
            run_window_job_every_event(&cfg, spec, Aggregate::Sum, &build)
        } else {
            run_window_job(&cfg, spec, Aggregate::Sum, &build)
        }
        .map_err(|e| CliError::Other(e.into()))?;
        let elapsed = start.elapsed().max(out.elapsed);
        Ok(RankPart {
            rows: out
                .results
                .iter()
                .map(|r| WaRow {
                    window_start_ms: r.window_start,
                    key: r.key,
                    count: r.state.count,
                    sum: r.state.sum,
                })
                .collect(),
            per_worker: super::driver::worker_figures(&out, dist),
            latency: Vec::new(),
            elapsed_s: elapsed.as_secs_f64(),
            late_partials: out.late_partials,
            input_error: None,
            skipped: 0,
            uncollected_rows: 0,
            counters: Default::default(),
            stopped: out.stopped,
            unfired_windows: out.unfired_windows,
            peak_rss_bytes: 0,
        })
    }
    fn finish(&self, mut rows: Vec<WaRow>) -> Vec<WaRow> {
        rows.sort_unstable_by_key(|r| (r.window_start_ms, r.key));
        rows
    }
    fn header(&self) -> Vec<&'static str> {
        vec!["window_start_ms", "key", "count", "sum"]
    }
    fn record(&self, r: &WaRow) -> Vec<String> {
        vec![
            r.window_start_ms.to_string(),
            r.key.to_string(),
            r.count.to_string(),
            r.sum.to_string(),
        ]
    }
    fn source(&self) -> &'static str {
        "generator"
    }
    fn wallclock(&self) -> bool {
        false
    }
    fn params(&self) -> serde_json::Value {
        serde_json::json!({
            "window_ms": self.window_ms,
            "keys": self.gen.keys,
            "zipf": self.gen.zipf,
            "events_per_s_event_time": self.gen.events_per_s,
            "seed": self.gen.seed,
            "pre_aggregate": !self.shuffle,
        })
    }
}

/// `air gen wa`.
#[derive(clap::Args, Debug, Clone)]
pub struct GenWaArgs {
    /// Generator options (the same as `air run wa`'s: the same events).
    #[command(flatten)]
    pub gen: WaGenArgs,
    /// The events as CSV `time_ms,key,value`, in event order.
    #[arg(long)]
    pub out: PathBuf,
}

/// `air gen wa`: writes the stream `air run wa` would process.
pub fn gen(args: &GenWaArgs) -> Result<(), CliError> {
    let cfg = args.gen.config();
    cfg.validate().map_err(CliError::BadInput)?;
    let file = std::fs::File::create(&args.out)
        .map_err(|e| CliError::BadInput(format!("{}: {e}", args.out.display())))?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
    writeln!(w, "time_ms,key,value")?;
    let mut g = WaGenerator::new(&cfg, 0, 1);
    let mut buf = vec![WaEvent::default(); 4096];
    loop {
        let n = g.fill(&mut buf);
        if n == 0 {
            break;
        }
        for e in &buf[..n] {
            writeln!(w, "{},{},{}", e.time_ms, e.key, e.value)?;
        }
    }
    w.flush()?;
    Ok(())
}
