//! `air run wa`: AIR's simple windowed aggregation — per-key count and sum
//! of keyed events in tumbling event-time windows. Results CSV
//! `window_start_ms,key,count,sum`, sorted by window then key, streamed to
//! `--out` as the windows fire (see [`super::driver::RowsTo`]).
//!
//! With `--rate R [--duration S]` the generator is paced by the wall clock
//! ([`air_operators::sources::pace`]) and every event is stamped with its
//! wall-clock due time, so the report has latency percentiles and the
//! generators' input lag; without it, event times are deterministic
//! (`--events-per-s`) and the run goes as fast as the job takes it.
//!
//! The job is a graph ([`air_runtime::dataflow`]): each worker's shard of
//! the generator → key → tumbling windows, `(Count, Sum)` per key and window
//! (pre-aggregated per worker unless `--shuffle`) → rows.

use super::common::{CliError, PaceArgs, RuntimeArgs};
use super::dist::Dist;
use super::driver::{OutputArgs, Query, RankPart, RowsTo, WorkerFigures};
use super::lagwatch::Watched;
use air_operators::graph::{Count, KeyedWindowExt, Sum, Tumbling, Windowed};
use air_operators::sources::shards::{resume, save_positions, Shards};
use air_operators::sources::wa::{zipf_of, KeyDist, WaConfig, WaEvent, WaGenerator};
use air_runtime::dataflow::{run_graph, Dataflow, Head, Pipe, Source, SourcePoll, Stats, Stream};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

/// Generator options shared by `air run wa` and `air gen wa`.
#[derive(clap::Args, Debug, Clone)]
pub struct WaGenArgs {
    /// Events in the whole stream (all workers) [default: 200000000; with
    /// `air run wa --rate R --duration S`: R × S].
    #[arg(long)]
    pub events: Option<u64>,
    /// Distinct keys.
    #[arg(long, default_value_t = 1000, value_parser = super::common::parse::keys)]
    pub keys: u64,
    /// Zipf-distributed keys with this exponent (e.g. 1.1); uniform without
    /// or with 0 (the Zipf law with exponent 0).
    #[arg(long, value_parser = super::common::parse::zipf)]
    pub zipf: Option<f64>,
    /// With --zipf: the hot keys move every MS of event time (epochs at
    /// multiples of MS): the Zipf ranks rotate over the keys, so that other
    /// keys are hot; the stream stays a function of the seed [default: the
    /// hot keys never move].
    #[arg(long, value_name = "MS", value_parser = super::common::parse::zipf_shift_ms)]
    pub zipf_shift_ms: Option<u64>,
    /// Event-time rate: events per second of event time (fractional
    /// spacing: event n at floor(n × 1000 / rate) ms exactly; 0.001..=1e15).
    #[arg(long, default_value_t = 1_000_000.0, value_parser = super::common::parse::events_per_s)]
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
            events: self.events.unwrap_or(DEFAULT_EVENTS),
            keys: self.keys,
            dist: self
                .zipf
                .filter(|&s| s > 0.0)
                .map_or(KeyDist::Uniform, KeyDist::Zipf),
            events_per_s: self.events_per_s,
            zipf_shift_ms: self.zipf_shift_ms,
            ..WaConfig::default()
        }
    }
}

/// Events of the WA stream when `--events` is not given.
pub const DEFAULT_EVENTS: u64 = 200_000_000;

/// `air run wa`.
#[derive(clap::Args, Debug, Clone)]
pub struct WaArgs {
    /// Generator options.
    #[command(flatten)]
    pub gen: WaGenArgs,
    /// Wall-clock pacing (`--rate`, `--duration`).
    #[command(flatten)]
    pub pace: PaceArgs,
    /// Tumbling window size, ms of event time.
    #[arg(long, value_name = "MS", default_value_t = 1000, value_parser = super::common::parse::window_ms)]
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

/// A worker's shard of the generator: as fast as the job takes it, or
/// paced by the wall clock (`--rate`).
pub enum WaSource {
    /// Unthrottled, deterministic event times.
    Gen(WaGenerator),
    /// Several shards, unthrottled: a worker resumed at another worker
    /// count than its checkpoint's.
    Shards(Shards<WaGenerator>),
    /// Paced; events stamped with their wall-clock due times.
    Paced(Watched<WaGenerator>),
}

impl WaSource {
    /// Largest input lag of a paced source, ms (`None` unless paced).
    pub fn input_lag_max_ms(&self) -> Option<f64> {
        match self {
            WaSource::Gen(_) | WaSource::Shards(_) => None,
            WaSource::Paced(p) => p.input_lag_max_ms(),
        }
    }
}

impl Source for WaSource {
    type Item = WaEvent;
    #[inline]
    fn poll(&mut self, buf: &mut Vec<WaEvent>, max: usize) -> SourcePoll {
        match self {
            WaSource::Gen(g) => {
                buf.resize(max, WaEvent::default());
                let n = g.fill(buf);
                buf.truncate(n);
                if n == 0 {
                    SourcePoll::Done
                } else {
                    SourcePoll::Ready
                }
            }
            WaSource::Shards(s) => s.poll(buf, max),
            WaSource::Paced(p) => p.poll(buf, max),
        }
    }

    fn next_due(&self) -> Option<std::time::Instant> {
        match self {
            WaSource::Gen(_) | WaSource::Shards(_) => None,
            WaSource::Paced(p) => p.next_due(),
        }
    }

    /// The generator's position (events generated); the paced generator
    /// cannot resume yet (a job with checkpoints refuses it).
    fn save(&self) -> Option<Vec<u8>> {
        match self {
            WaSource::Gen(g) => Some(save_positions(std::slice::from_ref(g))),
            WaSource::Shards(s) => Some(s.save()),
            WaSource::Paced(p) => p.save(),
        }
    }

    fn restore(&mut self, state: &[u8]) -> Result<(), String> {
        match self {
            WaSource::Gen(g) => {
                if let Some(shards) = resume(g, state)? {
                    *self = WaSource::Shards(shards);
                }
                Ok(())
            }
            WaSource::Paced(p) => p.restore(state),
            WaSource::Shards(_) => Err("restored twice".into()),
        }
    }

    fn rescales(&self) -> bool {
        matches!(self, WaSource::Gen(_))
    }

    fn rescale(
        &mut self,
        states: &[&[u8]],
        to: air_runtime::dataflow::state::Rescale,
    ) -> Result<(), String> {
        match self {
            WaSource::Gen(g) => {
                *self = WaSource::Shards(Shards::rescaled(g, states, to)?);
                Ok(())
            }
            _ => Err("the paced generator cannot resume".into()),
        }
    }

    fn report(&mut self, stats: &mut Stats) {
        if let Some(lag) = self.input_lag_max_ms() {
            // µs: maxima are integers.
            stats.max("input_lag_max_us", (lag * 1000.0).round() as u64);
        }
    }
}

/// Up to this many keys, each window's table is an array indexed by the
/// key ([`air_operators::graph::WindowedStream::dense_keys`]: no hashing per
/// event); beyond, a hash table (an array grows to the largest key).
const DENSE_KEYS: u64 = 1 << 16;

/// A window's result: (count, sum) of a key.
type WaWindowed = Windowed<u64, (u64, i64)>;

/// Ends the graph: the window rows become [`WaRow`]s and go where `to`
/// says (sorted by key within a window when collected).
fn sink_rows<H, P>(windows: Stream<H, P>, header: &[&str], to: &RowsTo)
where
    H: Head,
    P: Pipe<H::Out, Out = WaWindowed>,
{
    super::driver::sink_window_rows(
        windows,
        |r: &WaWindowed| r.key,
        |r: WaWindowed| WaRow {
            window_start_ms: r.start,
            key: r.key,
            count: r.value.0,
            sum: r.value.1,
        },
        header,
        to,
    );
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
    fn validate(&self, ranks: usize) -> Result<(), CliError> {
        {
            use super::common::QueryOption::*;
            super::common::check_honoured(
                super::common::QueryKind::Wa,
                &[
                    (Shuffle, self.shuffle),
                    (Zipf, self.gen.zipf.is_some()),
                    (ZipfShiftMs, self.gen.zipf_shift_ms.is_some()),
                ],
            )?;
        }
        self.gen.config().validate().map_err(CliError::BadInput)?;
        if self.window_ms == 0 {
            return Err(CliError::BadInput("--window-ms must be positive".into()));
        }
        super::ysb::check_runtime(&self.runtime)?;
        self.pace
            .validate((self.runtime.job_config().workers * ranks) as u64)
    }
    fn run_rank(&self, dist: &Dist) -> Result<RankPart<WaRow>, CliError> {
        // Rows counted, not kept: the driver streams them
        // (`run_rank_streaming`).
        self.run_rank_streaming(dist, &RowsTo::Nowhere)
    }
    fn streams(&self) -> bool {
        true
    }
    fn run_rank_streaming(&self, dist: &Dist, to: &RowsTo) -> Result<RankPart<WaRow>, CliError> {
        let mut cfg = self.runtime.job_config();
        dist.configure(&mut cfg, self.runtime.force_network);
        let gen = self.gen.config();
        let (window_ms, shuffle) = (self.window_ms, self.shuffle);
        let dense = gen.keys <= DENSE_KEYS;
        let header = self.header();
        let start = Instant::now();
        let paced = self.pace.start();
        // One Zipf table for the whole rank, shared by its workers.
        let zipf = zipf_of(&gen);
        // The graph every worker runs: its shard of the stream → per key
        // per window (count, sum) → rows.
        let build = |df: &Dataflow| {
            let (i, w) = (df.index(), df.workers());
            let source = match &paced {
                None => WaSource::Gen(WaGenerator::with_zipf(&gen, zipf.clone(), i, w)),
                Some(at) => {
                    // Event times follow this worker's schedule, from the
                    // wall clock at the start (see
                    // `Pacer::interleaved_event_rate`).
                    let pacer = self.pace.pacer(at, i, w);
                    let cfg = WaConfig {
                        events: self
                            .pace
                            .events(self.gen.events, DEFAULT_EVENTS)
                            .unwrap_or(u64::MAX),
                        events_per_s: pacer.interleaved_event_rate(w).unwrap_or(1.0),
                        base_time_ms: at.wall_ms,
                        ..gen
                    };
                    let g = WaGenerator::with_zipf(&cfg, zipf.clone(), i, w);
                    WaSource::Paced(Watched::new(g, pacer))
                }
            };
            let windows = df
                .source(source)
                .event_time(|e: &WaEvent| e.time_ms, 0)
                .key_by(|e: &WaEvent| e.key)
                .window(Tumbling::ms(window_ms), |e: &WaEvent| e.time_ms);
            let agg = (Count, Sum::of(|e: &WaEvent| e.value));
            match (dense, shuffle) {
                (true, false) => sink_rows(windows.dense_keys().aggregate(agg), &header, to),
                (true, true) => {
                    sink_rows(windows.dense_keys().aggregate_every_event(agg), &header, to)
                }
                (false, false) => sink_rows(windows.aggregate(agg), &header, to),
                (false, true) => sink_rows(windows.aggregate_every_event(agg), &header, to),
            }
        };
        let out = run_graph(&cfg, build).map_err(|e| CliError::Other(e.into()))?;
        let elapsed = start.elapsed().max(out.elapsed);
        let per_worker = out
            .workers
            .iter()
            .map(|wr| WorkerFigures {
                worker: wr.index,
                rank: dist.rank(),
                placement: wr.placement.clone(),
                events: wr.stats.get("source_records"),
                late_records: wr.stats.get("late_records"),
                input_lag_max_ms: wr
                    .stats
                    .get_max("input_lag_max_us")
                    .map(|us| us as f64 / 1000.0),
                channels: wr.channels.clone(),
                records_in_by_edge: wr.records_in.clone(),
                records_in_periods: wr.records_in_periods.clone(),
                extra: Default::default(),
            })
            .collect();
        let st = &out.stats;
        Ok(RankPart {
            rows: Vec::new(),
            per_worker,
            latency: if self.pace.paced() {
                air_runtime::metrics::histogram_pairs(&st.latency)
            } else {
                Vec::new()
            },
            elapsed_s: elapsed.as_secs_f64(),
            late_partials: st.get("late_partials"),
            checkpoints: super::driver::CheckpointPart::of(st),
            late: st.late.clone(),
            disorder_max_ms: st.get_max(air_runtime::dataflow::DISORDER_MAX),
            input_error: None,
            skipped: 0,
            // Written as their windows fired (or only counted).
            uncollected_rows: st.get("window_rows"),
            counters: Default::default(),
            stopped: out.stopped,
            // Windows still open at a stop, at their owners (and, never
            // expected, fired windows still held by the collector).
            unfired_windows: st.get("unfired_windows") + st.get("unfired_collected_windows"),
            peak_rss_bytes: 0,
            extra: Default::default(),
            channels: super::driver::channel_figures(&out),
            load: super::load::LoadPart::of(&out),
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
        self.pace.paced()
    }
    fn params(&self) -> serde_json::Value {
        serde_json::json!({
            "window_ms": self.window_ms,
            "keys": self.gen.keys,
            "zipf": self.gen.zipf,
            "zipf_shift_ms": self.gen.zipf_shift_ms,
            "events_per_s_event_time": (!self.pace.paced()).then_some(self.gen.events_per_s),
            "rate": self.pace.rate,
            "duration_s": self.pace.duration,
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
    /// The events as CSV `time_ms,key,value` (a header line first), in
    /// event order; `-`: standard output; `tcp://HOST:PORT`: connect and
    /// send.
    #[arg(long)]
    pub out: PathBuf,
    /// Wall-clock pace of the output, events per second (default: as fast
    /// as it can be written): events are written in batches of about 5 ms,
    /// each flushed when due, to feed a live reader; without --events the
    /// stream then has no end (it stops when the reader goes away). Event
    /// times still follow --events-per-s.
    #[arg(long, value_parser = super::common::parse::rate)]
    pub rate: Option<u64>,
}

/// `air gen wa`: writes the stream `air run wa` would process.
pub fn gen(args: &GenWaArgs) -> Result<(), CliError> {
    let mut cfg = args.gen.config();
    if args.rate.is_some() && args.gen.events.is_none() {
        // Paced without a count: until the reader goes away.
        cfg.events = u64::MAX;
    }
    cfg.validate().map_err(CliError::BadInput)?;
    let out = super::common::GenOut::parse(&args.out);
    let mut w = std::io::BufWriter::with_capacity(1 << 20, out.open()?);
    writeln!(w, "time_ms,key,value")?;
    let mut g = WaGenerator::new(&cfg, 0, 1);
    let pace = air_operators::sources::pace::OutputPace::new(args.rate);
    let mut buf = vec![WaEvent::default(); pace.map_or(4096, |p| p.batch(4096))];
    let mut written = 0u64;
    loop {
        if let Some(p) = &pace {
            p.wait_for(g.generated());
        }
        let n = g.fill(&mut buf);
        if n == 0 {
            break;
        }
        for e in &buf[..n] {
            writeln!(w, "{},{},{}", e.time_ms, e.key, e.value)?;
        }
        written += n as u64;
        if pace.is_some() {
            w.flush()?;
        }
    }
    w.flush()?;
    eprintln!("wrote {written} events to {}", out.name());
    Ok(())
}
