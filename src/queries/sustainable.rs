//! `air bench ysb --sustainable`: the highest generator rate a job keeps
//! up with — the "sustainable throughput" of the AIR paper and of the
//! stream-benchmarking literature (Karimov et al., "Benchmarking Distributed
//! Stream Data Processing Systems", ICDE 2018): the input lag stays bounded
//! and the latency stays under a bound for a steady period.
//!
//! The job is YSB by default, or any query with a paced generator
//! (`--query wa|q1|q2|q5|q7|q8`). Each probe is a whole `air run QUERY
//! --rate R --duration D` (wall-clock event times: every event stamped when
//! it is due) in this process (and, under `mpirun`, in every rank, rank 0
//! deciding). A probe keeps up when ([`judge`], [`KEEPS_UP_HELP`]) it
//! reads at least 99% of the offered rate, its generators' input lag (how
//! far behind their `--rate` schedule they fell,
//! [`super::driver::WorkerFigures::input_lag_max_ms`]) stays <=
//! `--max-lag-ms` and does not grow over the probe (sampled live,
//! [`super::lagwatch`]; [`lag_trend`]), and its p99 latency (emit time −
//! newest event in the window, the YSB definition) is <= `--max-p99-ms`; a
//! query with no windowed output (NEXMark q1, q2) has no latency and is
//! judged on the rest. The search doubles the rate from `--rate` until a
//! probe falls behind (halves it if the first does), then bisects until
//! the bracket is within `--precision`.

use super::common::{thousands, CliError, PaceArgs};
use super::dist::Dist;
use super::driver::{OutputArgs, Query};
use super::nexmark::{NexGenArgs, NexQuery, NexmarkArgs};
use super::wa::{WaArgs, WaGenArgs};
use super::ysb::YsbArgs;
use air_runtime::LatencySummary;
use serde::Serialize;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The rule a probe is judged by, for `air bench ysb --help`.
pub const KEEPS_UP_HELP: &str = "\
A probe (air run QUERY --rate R --duration D) keeps up only if all of:
  1. it reads at least 99% of the offered rate: events generated / (time from
     the generators' start to their last batch) >= 0.99 R;
  2. its input lag (how far the generators fell behind their schedule)
     never exceeds --max-lag-ms;
  3. its input lag does not grow: the lag is sampled live every D/60
     (5..250 ms apart; a worker stuck on a full ring counts), and the median
     of the samples over the last 30% of the probe may exceed the median over
     10%-40% of it (after start-up) by at most max(10 ms, --max-lag-ms / 10);
     with fewer than 3 samples in either part nothing shows that the lag
     stayed flat, and the probe does not keep up;
  4. (queries with windowed output) its p99 latency is at most --max-p99-ms,
     and some window fired.";

/// The share of the offered rate a probe must read to keep up.
pub const MIN_READ_FRACTION: f64 = 0.99;

/// The parts of a probe [`lag_trend`] compares, as fractions of its
/// duration: after start-up, and the end.
pub const FIRST_PART: (f64, f64) = (0.1, 0.4);
/// See [`FIRST_PART`].
pub const LAST_PART: (f64, f64) = (0.7, 1.0);

/// The fewest lag samples a part needs.
pub const MIN_PART_SAMPLES: usize = 3;

/// The median input lag (ms) over [`FIRST_PART`] and over [`LAST_PART`] of
/// a probe of `probe_s` seconds, from (seconds since the generators'
/// start, lag ms) samples; `None` if either part has fewer than
/// [`MIN_PART_SAMPLES`] samples.
pub fn lag_trend(samples: &[(f64, f64)], probe_s: f64) -> Option<(f64, f64)> {
    let median = |(lo, hi): (f64, f64)| -> Option<f64> {
        let mut v: Vec<f64> = samples
            .iter()
            .filter(|(t, _)| *t >= lo * probe_s && *t <= hi * probe_s)
            .map(|s| s.1)
            .collect();
        if v.len() < MIN_PART_SAMPLES {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let m = v.len() / 2;
        Some(if v.len() % 2 == 1 {
            v[m]
        } else {
            (v[m - 1] + v[m]) / 2.0
        })
    };
    Some((median(FIRST_PART)?, median(LAST_PART)?))
}

/// What a probe measured, as [`judge`] reads it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Measured {
    /// The rate offered, events/s.
    pub rate: u64,
    /// Events read per second while the generators ran.
    pub read_per_s: f64,
    /// Largest input lag of any worker, ms (`None`: none measured).
    pub lag_max_ms: Option<f64>,
    /// How much the input lag grew from the first to the last part of the
    /// probe, ms (the largest of any rank; `None`: too few samples).
    pub lag_growth_ms: Option<f64>,
    /// p99 latency, ms (`None`: no window fired).
    pub p99_ms: Option<u64>,
}

/// The bounds a probe is judged by.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bounds {
    /// `--max-lag-ms`.
    pub max_lag_ms: f64,
    /// `--max-p99-ms`.
    pub max_p99_ms: u64,
    /// Whether the query has latency (windowed output).
    pub latency_judged: bool,
}

impl Bounds {
    /// How much the lag may grow over a probe, ms: max(10, --max-lag-ms / 10).
    pub fn growth_allowed_ms(&self) -> f64 {
        (self.max_lag_ms / 10.0).max(10.0)
    }
}

/// Whether a probe kept up ([`KEEPS_UP_HELP`]): `None` if it did, else why
/// not (the first rule it broke).
pub fn judge(m: &Measured, b: &Bounds) -> Option<String> {
    let fraction = m.read_per_s / m.rate.max(1) as f64;
    if fraction.is_nan() || fraction < MIN_READ_FRACTION {
        return Some(format!(
            "read {:.1}% of the rate (< {:.0}%)",
            fraction * 100.0,
            MIN_READ_FRACTION * 100.0
        ));
    }
    match m.lag_max_ms {
        Some(l) if l <= b.max_lag_ms => {}
        Some(l) => return Some(format!("input lag {l:.0} ms > {} ms", b.max_lag_ms)),
        None => return Some("no input lag measured".into()),
    }
    match m.lag_growth_ms {
        Some(g) if g <= b.growth_allowed_ms() => {}
        Some(g) => {
            return Some(format!(
                "input lag grew {g:.0} ms (> {:.0} ms)",
                b.growth_allowed_ms()
            ))
        }
        None => return Some("too few lag samples to show a flat lag".into()),
    }
    if b.latency_judged {
        match m.p99_ms {
            Some(p) if p <= b.max_p99_ms => {}
            Some(p) => return Some(format!("p99 {p} ms > {} ms", b.max_p99_ms)),
            None => return Some("no window fired (no latency)".into()),
        }
    }
    None
}

/// The queries `air bench ysb --sustainable --query` probes.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SustainableQuery {
    /// The Yahoo Streaming Benchmark (`air run ysb`).
    Ysb,
    /// Windowed aggregation (`air run wa`).
    Wa,
    /// NEXMark q1, currency conversion: no windowed output, so no latency;
    /// judged on input lag alone.
    #[value(alias = "nexmark-q1")]
    Q1,
    /// NEXMark q2, selection: no windowed output, so no latency; judged on
    /// input lag alone.
    #[value(alias = "nexmark-q2")]
    Q2,
    /// NEXMark q5, hot items (sliding windows).
    #[value(alias = "nexmark-q5")]
    Q5,
    /// NEXMark q7, highest bid (tumbling windows).
    #[value(alias = "nexmark-q7")]
    Q7,
    /// NEXMark q8, new users (tumbling-window join).
    #[value(alias = "nexmark-q8")]
    Q8,
}

impl SustainableQuery {
    /// The query's name in reports ("ysb", "wa", "nexmark-q5", …).
    pub fn name(self) -> &'static str {
        match self {
            SustainableQuery::Ysb => "ysb",
            SustainableQuery::Wa => "wa",
            SustainableQuery::Q1 => "nexmark-q1",
            SustainableQuery::Q2 => "nexmark-q2",
            SustainableQuery::Q5 => "nexmark-q5",
            SustainableQuery::Q7 => "nexmark-q7",
            SustainableQuery::Q8 => "nexmark-q8",
        }
    }

    /// The query's name in the printed table and the plot's title.
    fn label(self) -> &'static str {
        match self {
            SustainableQuery::Ysb => "YSB",
            SustainableQuery::Wa => "WA",
            SustainableQuery::Q1 => "NEXMark q1",
            SustainableQuery::Q2 => "NEXMark q2",
            SustainableQuery::Q5 => "NEXMark q5",
            SustainableQuery::Q7 => "NEXMark q7",
            SustainableQuery::Q8 => "NEXMark q8",
        }
    }

    /// The NEXMark query, if it is one.
    fn nexmark(self) -> Option<NexQuery> {
        match self {
            SustainableQuery::Ysb | SustainableQuery::Wa => None,
            SustainableQuery::Q1 => Some(NexQuery::Q1),
            SustainableQuery::Q2 => Some(NexQuery::Q2),
            SustainableQuery::Q5 => Some(NexQuery::Q5),
            SustainableQuery::Q7 => Some(NexQuery::Q7),
            SustainableQuery::Q8 => Some(NexQuery::Q8),
        }
    }

    /// The query, as the option table knows it.
    fn kind(self) -> super::common::QueryKind {
        use super::common::QueryKind;
        match self {
            SustainableQuery::Ysb => QueryKind::Ysb,
            SustainableQuery::Wa => QueryKind::Wa,
            SustainableQuery::Q1 => QueryKind::Nexmark(NexQuery::Q1),
            SustainableQuery::Q2 => QueryKind::Nexmark(NexQuery::Q2),
            SustainableQuery::Q5 => QueryKind::Nexmark(NexQuery::Q5),
            SustainableQuery::Q7 => QueryKind::Nexmark(NexQuery::Q7),
            SustainableQuery::Q8 => QueryKind::Nexmark(NexQuery::Q8),
        }
    }

    /// Whether its rows carry a latency (windowed output): false for
    /// NEXMark q1 and q2, which are then judged on input lag alone.
    pub fn has_latency(self) -> bool {
        !matches!(self, SustainableQuery::Q1 | SustainableQuery::Q2)
    }
}

/// `air bench ysb`.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchYsbArgs {
    /// Search for the sustainable rate (the only mode so far).
    #[arg(long, required = true)]
    pub sustainable: bool,
    /// The job probed: ysb, wa, or the NEXMark query q1, q2, q5, q7 or q8
    /// (each probe is `air run QUERY --rate R --duration D`). q1 and q2 have
    /// no windowed output, hence no latency: their probes keep up on the
    /// input lag alone (--max-p99-ms does not apply).
    #[arg(long, value_enum, default_value_t = SustainableQuery::Ysb)]
    pub query: SustainableQuery,
    /// A probe keeps up only if its p99 latency is at most this, ms
    /// (queries with windowed output; see the rule below).
    #[arg(long, default_value_t = 1000)]
    pub max_p99_ms: u64,
    /// A probe keeps up only if its generator never fell further behind its
    /// schedule than this, ms, and its lag grew by at most max(10 ms, a
    /// tenth of this) over the probe (see the rule below).
    #[arg(long, default_value_t = 200.0)]
    pub max_lag_ms: f64,
    /// Stop bisecting once the bracket (highest rate kept up with, lowest
    /// not) is narrower than this fraction of the rate.
    #[arg(long, default_value_t = 0.05)]
    pub precision: f64,
    /// Write every probe as CSV to this file.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Plot latency (p50, p99) and input lag against the rate of every
    /// probe, with the answer marked, as a PNG to this file.
    #[arg(long, value_name = "FILE.png")]
    pub plot: Option<PathBuf>,
    /// `--query wa`: distinct keys [default: 1000].
    #[arg(long, value_parser = super::common::parse::keys)]
    pub keys: Option<u64>,
    /// `--query q5`: slide of the sliding window, ms [default: 2000].
    #[arg(long, value_name = "MS", value_parser = super::common::parse::window_ms)]
    pub slide_ms: Option<u64>,
    /// The job of each probe (YSB's options; for the other queries
    /// `--workers`, `--window-ms`, `--seed`, `--shuffle` (wa),
    /// `--max-delay-ms` (NEXMark) and the runtime options apply): `--rate`
    /// is the first rate probed (default 10 000 000 events/s), `--duration`
    /// the seconds of each probe (default 10); `--out`, `--input` and
    /// `--event-time synthetic` do not apply; `--report` gets the search's
    /// JSON.
    #[command(flatten)]
    pub ysb: YsbArgs,
}

/// One probe of the search.
#[derive(Debug, Clone, Serialize)]
pub struct Probe {
    /// Generator rate asked for, events/s (whole job).
    pub rate: u64,
    /// Events read per second while the generators ran: events / (time
    /// from the pacers' start to the last batch generated, the largest of
    /// any rank); the whole run's rate when that was not measured.
    pub events_per_s: f64,
    /// `events_per_s / rate` (a probe keeps up only from 0.99).
    pub read_fraction: f64,
    /// Median input lag over 10%-40% of the probe, ms (the largest of any
    /// rank; `null`: too few samples).
    pub lag_first_ms: Option<f64>,
    /// Median input lag over the last 30% of the probe, ms (as above).
    pub lag_last_ms: Option<f64>,
    /// How much the lag grew between those parts, ms (the largest growth of
    /// any rank, 0 if it shrank; `null`: too few samples).
    pub lag_growth_ms: Option<f64>,
    /// Latency percentiles, ms (YSB definition: emit time − newest event
    /// in the window); `null` for a query without windowed output.
    pub p50_ms: Option<u64>,
    /// 99th percentile, ms (`null`: no latency).
    pub p99_ms: Option<u64>,
    /// Maximum, ms (`null`: no latency).
    pub max_ms: Option<u64>,
    /// Largest input lag of any worker, ms.
    pub input_lag_max_ms: f64,
    /// CPU time of every rank (user + system) over the probe's wall time:
    /// cores kept busy.
    pub cpu_cores: f64,
    /// Largest peak resident set of any rank during this probe, bytes.
    pub peak_rss_bytes: u64,
    /// Whether it kept up ([`judge`]: read rate, lag bound, lag growth and,
    /// with latency, p99).
    pub keeps_up: bool,
    /// Why it did not keep up (the first rule broken; `null` if it did).
    pub why_not: Option<String>,
}

/// The JSON of `air bench ysb --sustainable --report`.
#[derive(Debug, Clone, Serialize)]
pub struct SustainableReport {
    /// The query probed ("ysb", "wa", "nexmark-q5", …).
    pub query: &'static str,
    /// The highest rate that kept up, events/s (0: none did).
    pub sustainable_rate: u64,
    /// The probe at that rate.
    pub at_sustainable: Option<Probe>,
    /// Whether probes were judged on p99 latency too (false for a query
    /// without windowed output, NEXMark q1 and q2: on input lag alone).
    pub latency_judged: bool,
    /// Bound on the p99 latency, ms.
    pub max_p99_ms: u64,
    /// Bound on the input lag, ms.
    pub max_lag_ms: f64,
    /// Seconds per probe.
    pub probe_s: f64,
    /// Workers per rank.
    pub workers: usize,
    /// Ranks.
    pub ranks: usize,
    /// Every probe, in order.
    pub probes: Vec<Probe>,
}

/// The job of one probe.
enum ProbeJob {
    Ysb(Box<YsbArgs>),
    Wa(Box<WaArgs>),
    Nexmark(Box<NexmarkArgs>),
}

/// What rank 0 learns from one probe.
struct Outcome {
    /// Events read, whole job.
    events: u64,
    events_per_s: f64,
    latency: Option<LatencySummary>,
    input_lag_max_ms: Option<f64>,
    peak_rss_bytes: u64,
    /// Workers per rank.
    workers: usize,
}

/// Whether `q` has windows (honours `--window-ms`).
fn windowed(q: SustainableQuery) -> bool {
    super::common::honours(q.kind(), super::common::QueryOption::WindowMs)
}

/// The job of a probe at `rate` for `secs` seconds.
fn probe_job(a: &BenchYsbArgs, rate: u64, secs: f64) -> ProbeJob {
    let mut runtime = a.ysb.runtime.clone();
    runtime.timeline = None;
    let pace = PaceArgs {
        rate: Some(rate),
        duration: Some(secs),
    };
    match a.query {
        SustainableQuery::Ysb => {
            let mut ysb = a.ysb.clone();
            ysb.rate = Some(rate);
            ysb.duration = Some(secs);
            ysb.events = None;
            ysb.output.out = None;
            ysb.output.report = None;
            ysb.runtime = runtime;
            ProbeJob::Ysb(Box::new(ysb))
        }
        SustainableQuery::Wa => ProbeJob::Wa(Box::new(WaArgs {
            gen: WaGenArgs {
                events: None,
                keys: a.keys.unwrap_or(1000),
                zipf: a.ysb.zipf,
                zipf_shift_ms: a.ysb.zipf_shift_ms,
                events_per_s: 1_000_000.0,
                seed: a.ysb.seed,
            },
            pace,
            window_ms: a.ysb.window(),
            shuffle: a.ysb.shuffle,
            output: OutputArgs::default(),
            runtime,
        })),
        q => ProbeJob::Nexmark(Box::new(NexmarkArgs {
            query: q.nexmark().expect("a NEXMark query"),
            gen: NexGenArgs {
                events: None,
                events_per_s: None,
                seed: Some(a.ysb.seed),
            },
            pace,
            input: Vec::new(),
            listen: None,
            on_bad_record: super::nexmark::BadRecord::Fail,
            // The YSB default window unless the query has none (q1, q2:
            // a window given to them was refused before).
            window_ms: windowed(q).then(|| a.ysb.window()),
            slide_ms: a.slide_ms,
            max_delay_ms: a.ysb.max_delay_ms,
            idle_ms: a.ysb.idle_ms,
            side_input: None,
            state_ttl_ms: None,
            out_dir: None,
            output: OutputArgs::default(),
            runtime,
        })),
    }
}

/// The input lag of a probe as every rank saw it (each figure the largest
/// of any rank).
#[derive(Debug, Clone, Copy, Default)]
struct LagFigures {
    /// Seconds from the generators' start to their last batch.
    span_s: Option<f64>,
    /// Median lag over the first and the last part, ms.
    first_ms: Option<f64>,
    last_ms: Option<f64>,
    /// Growth from the first to the last part, ms (0 if it shrank).
    growth_ms: Option<f64>,
}

impl LagFigures {
    /// This rank's figures from its watch, combined with every rank's
    /// (collective: every rank calls it once per probe).
    fn all_ranks(trace: &super::lagwatch::LagTrace, probe_s: f64, dist: &Dist) -> LagFigures {
        let trend = lag_trend(&trace.samples, probe_s);
        let us = |v: f64| (v.max(0.0) * 1e3).round() as u64;
        let missing = dist.all_max(u64::from(trend.is_none()));
        let first = dist.all_max(trend.map_or(0, |t| us(t.0)));
        let last = dist.all_max(trend.map_or(0, |t| us(t.1)));
        let growth = dist.all_max(trend.map_or(0, |t| us(t.1 - t.0)));
        let span_us = dist.all_max(trace.span_s.map_or(0, |s| us(s * 1e3)));
        let ms = |v: u64| (missing == 0).then_some(v as f64 / 1e3);
        LagFigures {
            span_s: (span_us > 0).then_some(span_us as f64 / 1e6),
            first_ms: ms(first),
            last_ms: ms(last),
            growth_ms: ms(growth),
        }
    }
}

/// Runs one probe at `rate` on every rank; rank 0 gets its outcome, the
/// cores kept busy and the lag figures.
fn probe(
    a: &BenchYsbArgs,
    rate: u64,
    secs: f64,
    dist: &Dist,
) -> Result<Option<(Outcome, f64, LagFigures)>, CliError> {
    let job = probe_job(a, rate, secs);
    // Each probe's own peak memory, not the largest of the earlier probes.
    super::common::reset_peak_rss();
    let cpu_seconds = super::common::cpu_seconds;
    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    let watch =
        super::lagwatch::Watch::start(Duration::from_secs_f64((secs / 60.0).clamp(0.005, 0.25)));
    let outcome = match &job {
        ProbeJob::Ysb(ysb) => super::ysb::run(ysb, dist, false)?.map(Outcome::of),
        ProbeJob::Wa(q) => super::driver::run(q.as_ref(), dist, false)?.map(Outcome::of),
        ProbeJob::Nexmark(q) => super::driver::run(q.as_ref(), dist, false)?.map(Outcome::of),
    };
    let trace = watch.finish();
    let cpu_us = ((cpu_seconds() - cpu0) * 1e6) as u64;
    let cores = dist.all_sum(cpu_us) as f64 / 1e6 / t0.elapsed().as_secs_f64();
    let lag = LagFigures::all_ranks(&trace, secs, dist);
    Ok(outcome.map(|o| (o, cores, lag)))
}

impl Outcome {
    fn of(r: super::driver::Report) -> Outcome {
        Outcome {
            events: r.events,
            events_per_s: r.events_per_s,
            latency: r.latency_ms,
            input_lag_max_ms: r.input_lag_max_ms,
            peak_rss_bytes: r.peak_rss_bytes,
            workers: r.workers / r.ranks.max(1),
        }
    }
}

/// Refuses options that do not apply to the query probed: the query/option
/// table every `air run` query checks by
/// ([`super::common::honours`]), then the YSB-only options.
fn check_query_options(a: &BenchYsbArgs, ranks: usize) -> Result<(), CliError> {
    use super::common::QueryOption::*;
    let q = a.query;
    super::common::check_honoured(
        q.kind(),
        &[
            (WindowMs, a.ysb.window_ms.is_some()),
            (SlideMs, a.slide_ms.is_some()),
            (MaxDelayMs, a.ysb.max_delay_ms.is_some()),
            (Shuffle, a.ysb.shuffle),
            (Keys, a.keys.is_some()),
            (Zipf, a.ysb.zipf.is_some()),
            (ZipfShiftMs, a.ysb.zipf_shift_ms.is_some()),
        ],
    )?;
    if q == SustainableQuery::Ysb {
        return Ok(());
    }
    for (flag, set) in [
        ("--campaigns", a.ysb.campaigns.is_some()),
        ("--latency-plot", a.ysb.output.latency_plot.is_some()),
        ("--out-per-rank", a.ysb.output.out_per_rank),
    ] {
        if set {
            return Err(CliError::BadInput(format!(
                "{flag} does not apply to --query {}",
                q.name()
            )));
        }
    }
    // The probe's own checks (window sizes, keys, rate per worker), now
    // rather than at the first probe.
    let rate = a.ysb.rate.unwrap_or(10_000_000).max(1);
    let secs = a.ysb.duration.unwrap_or(10.0);
    match probe_job(a, rate, secs) {
        ProbeJob::Ysb(_) => Ok(()),
        ProbeJob::Wa(w) => w.validate(ranks),
        ProbeJob::Nexmark(n) => n.validate(ranks),
    }
}

/// `air bench ysb --sustainable`.
///
/// # Errors
/// Bad options (file input, synthetic event times, bounds that are not
/// positive, options of another query), a failed probe, or an unwritable
/// `--csv`/`--report`.
pub fn main(a: &BenchYsbArgs, dist: &Dist) -> Result<(), CliError> {
    let bad = |m: &str| Err(CliError::BadInput(m.to_string()));
    if !a.ysb.input.is_empty() {
        return bad("air bench ysb --sustainable paces the generator: --input does not apply");
    }
    if a.ysb.event_time != super::ysb::EventTimeArg::Wallclock {
        return bad("air bench ysb --sustainable needs wall-clock event times (latency)");
    }
    if a.ysb.output.out.is_some() {
        return bad("air bench ysb --sustainable writes no rows: --out does not apply");
    }
    if a.ysb.events.is_some() {
        return bad(
            "air bench ysb --sustainable: a probe's events are --rate x --duration; --events does not apply",
        );
    }
    if a.ysb.runtime.timeline.is_some() {
        return bad("air bench ysb --sustainable: --timeline does not apply (one file per probe would be overwritten)");
    }
    if a.max_p99_ms == 0 {
        return bad("--max-p99-ms must be positive (latency has 1 ms resolution)");
    }
    if !(a.precision > 0.0 && a.precision < 1.0) {
        return bad("--precision must lie in (0, 1)");
    }
    if !(a.max_lag_ms.is_finite() && a.max_lag_ms > 0.0) {
        return bad("--max-lag-ms must be positive");
    }
    let secs = a.ysb.duration.unwrap_or(10.0);
    if !(secs.is_finite() && (1.0..=86_400.0).contains(&secs)) {
        return bad("--duration (seconds per probe) must lie in 1..=86400");
    }
    if a.ysb.rate == Some(0) {
        return bad("--rate (the first rate probed) must be positive");
    }
    // A job that reads at a fraction f of the rate ends (1/f − 1)·D behind
    // schedule: a lag bound of at most D/10 tells rates apart within 10%
    // (the default 200 ms over 10 s probes: 2%).
    if a.max_lag_ms * 10.0 > secs * 1e3 {
        return bad("--max-lag-ms must be at most a tenth of a probe (--duration)");
    }
    check_query_options(a, dist.ranks())?;
    let query = a.query;
    let latency_judged = query.has_latency();
    let bounds = Bounds {
        max_lag_ms: a.max_lag_ms,
        max_p99_ms: a.max_p99_ms,
        latency_judged,
    };
    // Outputs: distinct, and creatable now rather than after the search.
    let outs: Vec<(&str, &std::path::Path)> = [
        ("--csv", a.csv.as_deref()),
        ("--plot", a.plot.as_deref()),
        ("--report", a.ysb.output.report.as_deref()),
    ]
    .into_iter()
    .filter_map(|(f, p)| p.map(|p| (f, p)))
    .collect();
    super::common::check_outputs(&outs, &[])?;
    if dist.is_root() {
        for (flag, p) in &outs {
            std::fs::File::create(p)
                .map_err(|e| CliError::BadInput(format!("{flag} {}: {e}", p.display())))?;
        }
    }
    let root = dist.is_root();
    let mut csv = match (&a.csv, root) {
        (Some(p), true) => {
            let mut f = std::fs::File::create(p)
                .map_err(|e| CliError::BadInput(format!("{}: {e}", p.display())))?;
            writeln!(
                f,
                "rate,events_per_s,p50_ms,p99_ms,max_ms,input_lag_max_ms,cpu_cores,peak_rss_bytes,\
                 read_fraction,lag_first_ms,lag_last_ms,keeps_up,query"
            )?;
            Some(f)
        }
        _ => None,
    };
    let mut out = std::io::stdout().lock();
    if root {
        let rule = format!(
            "keeps up = reads >= {:.0}% of the rate, input lag <= {} ms and grows <= {} ms",
            MIN_READ_FRACTION * 100.0,
            a.max_lag_ms,
            bounds.growth_allowed_ms()
        );
        if latency_judged {
            writeln!(
                out,
                "sustainable {}: {} s per probe, {rule}, p99 <= {} ms",
                query.label(),
                secs,
                a.max_p99_ms
            )?;
        } else {
            writeln!(
                out,
                "sustainable {}: {} s per probe, {rule} (no windowed output, so no latency: \
                 not judged on latency)",
                query.label(),
                secs,
            )?;
        }
        writeln!(
            out,
            "{:>14} {:>14} {:>6} {:>8} {:>8} {:>8} {:>10} {:>15} {:>6}  keeps up",
            "rate ev/s",
            "read ev/s",
            "read %",
            "p50 ms",
            "p99 ms",
            "max ms",
            "lag ms",
            "lag 1st -> end",
            "cores"
        )?;
    }
    let opt = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    let csv_opt = |v: Option<u64>| v.map_or_else(String::new, |v| v.to_string());
    let mut probes: Vec<Probe> = Vec::new();
    let (mut lo, mut hi): (u64, Option<u64>) = (0, None);
    let mut rate = a.ysb.rate.unwrap_or(10_000_000).max(1);
    let mut workers = 0;
    loop {
        let got = probe(a, rate, secs, dist)?;
        // Rank 0 decides; every rank follows (same sequence of probes).
        let keeps = match got {
            Some((r, cores, lag)) => {
                workers = r.workers;
                let l = if latency_judged {
                    Some(r.latency.unwrap_or_default())
                } else {
                    None
                };
                let read_per_s = lag.span_s.map_or(r.events_per_s, |s| r.events as f64 / s);
                let measured = Measured {
                    rate,
                    read_per_s,
                    lag_max_ms: r.input_lag_max_ms,
                    lag_growth_ms: lag.growth_ms,
                    p99_ms: l.as_ref().and_then(|l| l.p99_ms),
                };
                let why_not = judge(&measured, &bounds);
                let p = Probe {
                    rate,
                    events_per_s: read_per_s,
                    read_fraction: read_per_s / rate as f64,
                    lag_first_ms: lag.first_ms,
                    lag_last_ms: lag.last_ms,
                    lag_growth_ms: lag.growth_ms,
                    // No window fired during the probe: no latency to show
                    // (and the probe does not keep up: nothing proves it did).
                    p50_ms: l.as_ref().and_then(|l| l.p50_ms),
                    p99_ms: l.as_ref().and_then(|l| l.p99_ms),
                    max_ms: l.as_ref().and_then(|l| l.max_ms),
                    input_lag_max_ms: r.input_lag_max_ms.unwrap_or(f64::INFINITY),
                    cpu_cores: cores,
                    peak_rss_bytes: r.peak_rss_bytes,
                    keeps_up: why_not.is_none(),
                    why_not,
                };
                writeln!(
                    out,
                    "{:>14} {:>14} {:>6.1} {:>8} {:>8} {:>8} {:>10.1} {:>15} {:>6.2}  {}",
                    thousands(rate),
                    thousands(p.events_per_s as u64),
                    p.read_fraction * 100.0,
                    opt(p.p50_ms),
                    opt(p.p99_ms),
                    opt(p.max_ms),
                    p.input_lag_max_ms,
                    match (p.lag_first_ms, p.lag_last_ms) {
                        (Some(f), Some(l)) => format!("{f:.1} -> {l:.1}"),
                        _ => "-".to_string(),
                    },
                    p.cpu_cores,
                    match &p.why_not {
                        None => "yes".to_string(),
                        Some(w) => format!("no: {w}"),
                    }
                )?;
                out.flush()?;
                if let Some(f) = csv.as_mut() {
                    let csv_f = |v: Option<f64>| v.map_or_else(String::new, |v| format!("{v:.3}"));
                    writeln!(
                        f,
                        "{},{:.0},{},{},{},{:.3},{:.3},{},{:.4},{},{},{},{}",
                        p.rate,
                        p.events_per_s,
                        csv_opt(p.p50_ms),
                        csv_opt(p.p99_ms),
                        csv_opt(p.max_ms),
                        p.input_lag_max_ms,
                        p.cpu_cores,
                        p.peak_rss_bytes,
                        p.read_fraction,
                        csv_f(p.lag_first_ms),
                        csv_f(p.lag_last_ms),
                        p.keeps_up,
                        query.name()
                    )?;
                }
                let k = p.keeps_up;
                probes.push(p);
                k
            }
            None => false,
        };
        let keeps = dist.all_max(u64::from(keeps)) == 1;
        if keeps {
            lo = lo.max(rate);
        } else {
            hi = Some(hi.map_or(rate, |h| h.min(rate)));
        }
        rate = match hi {
            None if rate >= 1 << 40 => break,
            None => rate * 2,
            Some(h) if lo == 0 => {
                if h <= 1000 {
                    break;
                }
                h / 2
            }
            Some(h) => {
                if (h - lo) as f64 <= a.precision * lo as f64 {
                    break;
                }
                lo + (h - lo) / 2
            }
        };
    }
    if !root {
        return Ok(());
    }
    let at = probes.iter().filter(|p| p.keeps_up).max_by_key(|p| p.rate);
    match at {
        Some(p) => {
            let latency = match (p.p50_ms, p.p99_ms, p.max_ms) {
                (Some(p50), Some(p99), Some(max)) => {
                    format!("p50 {p50} ms, p99 {p99} ms, max {max} ms")
                }
                _ => "no latency (no windowed output)".to_string(),
            };
            writeln!(
                out,
                "sustainable: {} events/s ({} {} workers x {} ranks): {latency}, \
                 input lag max {:.1} ms, {:.2} cores busy",
                thousands(p.rate),
                query.label(),
                workers,
                dist.ranks(),
                p.input_lag_max_ms,
                p.cpu_cores
            )?
        }
        None => writeln!(
            out,
            "sustainable: no probed rate kept up (the lowest probed: {} events/s)",
            probes.iter().map(|p| p.rate).min().unwrap_or(0)
        )?,
    }
    if let Some(path) = &a.plot {
        let best = at.map_or(0, |p| p.rate);
        let title = format!(
            "{} sustainable throughput: {:.1} M events/s ({} workers x {} rank{}, {} s probes)",
            query.label(),
            best as f64 / 1e6,
            workers,
            dist.ranks(),
            if dist.ranks() == 1 { "" } else { "s" },
            secs
        );
        write_plot(&probes, best, a, path, &title)
            .map_err(|e| CliError::Other(anyhow::anyhow!("{}: {e}", path.display())))?;
    }
    if let Some(path) = &a.ysb.output.report {
        let rep = SustainableReport {
            query: query.name(),
            sustainable_rate: at.map_or(0, |p| p.rate),
            at_sustainable: at.cloned(),
            latency_judged,
            max_p99_ms: a.max_p99_ms,
            max_lag_ms: a.max_lag_ms,
            probe_s: secs,
            workers,
            ranks: dist.ranks(),
            probes: probes.clone(),
        };
        let f = std::fs::File::create(path)
            .map_err(|e| CliError::BadInput(format!("{}: {e}", path.display())))?;
        serde_json::to_writer_pretty(std::io::BufWriter::new(f), &rep)?;
    }
    Ok(())
}

/// Draws p50/p99 latency and input lag (ms, log scale) against the probed
/// rate (M events/s): filled markers kept up, crosses did not; the bounds as
/// dashed lines, the answer as a vertical line.
fn write_plot(
    probes: &[Probe],
    best: u64,
    a: &BenchYsbArgs,
    path: &std::path::Path,
    title: &str,
) -> Result<(), String> {
    use plotters::prelude::*;
    air_tools::ring_bench::register_fonts();
    let e = |e: &dyn std::fmt::Display| e.to_string();
    if probes.is_empty() {
        return Err("no probe to plot".into());
    }
    let mut sorted = probes.to_vec();
    sorted.sort_by_key(|p| p.rate);
    let m = |r: u64| r as f64 / 1e6;
    let floor = 0.5f64;
    let ms = |v: f64| v.max(floor);
    let xmax = m(sorted.last().map_or(1, |p| p.rate)) * 1.08;
    let latency = a.query.has_latency();
    let ymax = sorted
        .iter()
        .map(|p| (p.max_ms.unwrap_or(0) as f64).max(p.input_lag_max_ms))
        .fold(if latency { a.max_p99_ms as f64 } else { 0.0 }, f64::max)
        .max(a.max_lag_ms)
        * 2.0;
    let root = BitMapBackend::new(path, (1200, 760)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22).into_font())
        .margin(16)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..xmax, (floor..ymax).log_scale())
        .map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .x_desc("generator rate (M events/s)")
        .y_desc("ms (log)")
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .draw()
        .map_err(|x| e(&x))?;
    type Series = (&'static str, RGBColor, fn(&Probe) -> Option<f64>);
    let series: [Series; 3] = [
        ("p50 latency", RGBColor(44, 160, 44), |p| {
            p.p50_ms.map(|v| v as f64)
        }),
        ("p99 latency", RGBColor(214, 39, 40), |p| {
            p.p99_ms.map(|v| v as f64)
        }),
        ("input lag (max)", RGBColor(31, 119, 180), |p| {
            Some(p.input_lag_max_ms)
        }),
    ];
    for (label, col, f) in series {
        // A query without latency has no latency series.
        let sorted: Vec<&Probe> = sorted.iter().filter(|p| f(p).is_some()).collect();
        if sorted.is_empty() {
            continue;
        }
        let pts: Vec<(f64, f64)> = sorted
            .iter()
            .map(|p| (m(p.rate), ms(f(p).unwrap_or(0.0))))
            .collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), col.stroke_width(2)))
            .map_err(|x| e(&x))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], col.stroke_width(3)));
        chart
            .draw_series(sorted.iter().zip(&pts).map(|(p, &xy)| {
                if p.keeps_up {
                    Circle::new(xy, 5, col.filled()).into_dyn()
                } else {
                    Cross::new(xy, 6, col.stroke_width(2)).into_dyn()
                }
            }))
            .map_err(|x| e(&x))?;
    }
    for (bound, col) in [
        (a.max_p99_ms as f64, RGBColor(214, 39, 40)),
        (a.max_lag_ms, RGBColor(31, 119, 180)),
    ]
    .into_iter()
    .skip(usize::from(!latency))
    {
        chart
            .draw_series(plotters::series::DashedLineSeries::new(
                vec![(0.0, ms(bound)), (xmax, ms(bound))],
                6,
                6,
                col.stroke_width(1),
            ))
            .map_err(|x| e(&x))?;
    }
    if best > 0 {
        chart
            .draw_series(LineSeries::new(
                vec![(m(best), floor), (m(best), ymax)],
                BLACK.stroke_width(2),
            ))
            .map_err(|x| e(&x))?
            .label(format!("sustainable {:.1} M/s", m(best)))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], BLACK.stroke_width(3)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .draw()
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: Bounds = Bounds {
        max_lag_ms: 200.0,
        max_p99_ms: 1000,
        latency_judged: true,
    };

    /// A probe at 10 M events/s that keeps up on every rule.
    fn good() -> Measured {
        Measured {
            rate: 10_000_000,
            read_per_s: 9_990_000.0,
            lag_max_ms: Some(12.0),
            lag_growth_ms: Some(1.5),
            p99_ms: Some(150),
        }
    }

    #[test]
    fn a_probe_keeps_up_only_on_every_rule() {
        assert_eq!(judge(&good(), &BOUNDS), None);
        // Exactly 99% of the rate is enough; less is not.
        let at_99 = Measured {
            read_per_s: 9_900_000.0,
            ..good()
        };
        assert_eq!(judge(&at_99, &BOUNDS), None);
        // The probe that overstated: 168.75 M offered, 161.5 M read, lag
        // 134 ms under a 200 ms bound. It fell behind.
        let overstated = Measured {
            rate: 168_750_000,
            read_per_s: 161_500_000.0,
            lag_max_ms: Some(134.0),
            lag_growth_ms: Some(90.0),
            p99_ms: Some(300),
        };
        let why = judge(&overstated, &BOUNDS).expect("does not keep up");
        assert!(why.contains("read 95.7%"), "{why}");
        // Each rule alone.
        for (m, says) in [
            (
                Measured {
                    read_per_s: 9_899_000.0,
                    ..good()
                },
                "read 99.0%",
            ),
            (
                Measured {
                    read_per_s: f64::NAN,
                    ..good()
                },
                "read",
            ),
            (
                Measured {
                    lag_max_ms: Some(201.0),
                    ..good()
                },
                "input lag 201 ms",
            ),
            (
                Measured {
                    lag_max_ms: None,
                    ..good()
                },
                "no input lag",
            ),
            (
                Measured {
                    lag_growth_ms: Some(20.5),
                    ..good()
                },
                "grew 20 ms",
            ),
            (
                Measured {
                    lag_growth_ms: None,
                    ..good()
                },
                "too few lag samples",
            ),
            (
                Measured {
                    p99_ms: Some(1001),
                    ..good()
                },
                "p99 1001 ms",
            ),
            (
                Measured {
                    p99_ms: None,
                    ..good()
                },
                "no window fired",
            ),
        ] {
            let why = judge(&m, &BOUNDS).unwrap_or_else(|| panic!("{m:?} kept up"));
            assert!(why.contains(says), "{m:?}: {why}");
        }
        // Without latency (q1, q2), latency is not judged.
        let no_latency = Bounds {
            latency_judged: false,
            ..BOUNDS
        };
        let m = Measured {
            p99_ms: None,
            ..good()
        };
        assert_eq!(judge(&m, &no_latency), None);
        // The growth allowed: a tenth of --max-lag-ms, at least 10 ms.
        assert_eq!(BOUNDS.growth_allowed_ms(), 20.0);
        let tight = Bounds {
            max_lag_ms: 50.0,
            ..BOUNDS
        };
        assert_eq!(tight.growth_allowed_ms(), 10.0);
        let m = Measured {
            lag_growth_ms: Some(15.0),
            ..good()
        };
        assert_eq!(judge(&m, &BOUNDS), None);
        assert!(judge(&m, &tight).is_some());
    }

    #[test]
    fn lag_trend_compares_medians_after_start_up_and_at_the_end() {
        let every_10ms = |lag: &dyn Fn(f64) -> f64| -> Vec<(f64, f64)> {
            (0..=300)
                .map(|i| i as f64 * 0.01)
                .map(|t| (t, lag(t)))
                .collect()
        };
        // Flat, with the start-up lag (pacers start before the job) and a
        // spike in each part ignored.
        let flat = every_10ms(&|t| {
            if t < 0.2 {
                80.0
            } else if (t - 1.0).abs() < 0.005 || (t - 2.5).abs() < 0.005 {
                500.0
            } else {
                2.0
            }
        });
        let (first, last) = lag_trend(&flat, 3.0).unwrap();
        assert_eq!((first, last), (2.0, 2.0));
        // Falling behind by 4% of the time: the lag grows ~4 ms per 100 ms.
        let behind = every_10ms(&|t| 40.0 * t);
        let (first, last) = lag_trend(&behind, 3.0).unwrap();
        assert!((first - 30.0).abs() < 0.5, "{first}");
        assert!((last - 102.0).abs() < 0.5, "{last}");
        // Too few samples in a part: no trend.
        let sparse: Vec<(f64, f64)> = vec![(0.5, 1.0), (1.0, 1.0), (2.5, 1.0), (2.9, 1.0)];
        assert_eq!(lag_trend(&sparse, 3.0), None);
        assert_eq!(lag_trend(&[], 3.0), None);
        // Even counts take the mean of the middle two.
        let four: Vec<(f64, f64)> = [(0.1, 1.0), (0.2, 3.0), (0.3, 5.0), (0.35, 7.0)]
            .into_iter()
            .chain([(0.8, 1.0), (0.9, 1.0), (0.95, 1.0)])
            .collect();
        assert_eq!(lag_trend(&four, 1.0), Some((4.0, 1.0)));
    }
}
