//! Options shared by every `air run` query.

use air_runtime::dataflow::CheckpointConfig;
use air_runtime::JobConfig;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Runtime options of `air run`.
#[derive(clap::Args, Debug, Clone)]
pub struct RuntimeArgs {
    /// Worker threads (default: one per physical core this process may use,
    /// or per PU with `--smt`; SLURM tasks sharing a node unbound split it).
    /// 1..=1024. Default also from `AIR_WORKERS` (as a library job).
    #[arg(long, env = "AIR_WORKERS", value_parser = parse::workers)]
    pub workers: Option<usize>,
    /// Staged exchange batches are pushed, and watermarks sent, at least this
    /// often (µs; 1..=60000000).
    #[arg(long, default_value_t = 1000, value_parser = parse::flush_us)]
    pub flush_us: u64,
    /// Records per exchange batch (1..=1048576).
    #[arg(long, default_value_t = 1024, value_parser = parse::batch)]
    pub batch: usize,
    /// Capacity of each channel ring in bytes (workers² rings;
    /// 4096..=17179869184, i.e. 16 GiB), taken as given. Default: 1 MiB,
    /// scaled down (to at least 64 KiB) when a node's rings would need more
    /// than 1 GiB (`air plan` shows the sizes). Also from `AIR_RING_BYTES`
    /// (as a library job).
    #[arg(long, env = "AIR_RING_BYTES", value_parser = parse::ring_bytes)]
    pub ring_bytes: Option<usize>,
    /// Key groups of the job (Flink's max parallelism): keys hash to one of
    /// K groups and every worker owns an even range of them; keyed state
    /// is kept, checkpointed and moved per group. At least the job's
    /// workers (all ranks), at most 65536. Rows do not depend on it. Also
    /// from `AIR_MAX_PARALLELISM` (as a library job).
    #[arg(
        long,
        value_name = "K",
        env = "AIR_MAX_PARALLELISM",
        default_value_t = air_runtime::keygroups::DEFAULT_KEY_GROUPS,
        value_parser = parse::max_parallelism
    )]
    pub max_parallelism: u32,
    /// Take a checkpoint every MS ms (wall clock from each worker's
    /// start): every source places a barrier in its stream and every
    /// operator aligns it (docs/design.md, "Checkpoints"). With
    /// `--checkpoint-dir` each worker's state is written at the barrier
    /// (default there: 1000); without, only the barriers run (to measure
    /// their cost). 1..=3600000.
    #[arg(
        long,
        alias = "barrier-ms",
        value_name = "MS",
        value_parser = parse::barrier_ms
    )]
    pub checkpoint_ms: Option<u64>,
    /// Write checkpoints to DIR (every rank must reach it: a shared file
    /// system on a cluster) and, if DIR holds a complete checkpoint of the
    /// same command, resume from the newest one (stderr says so). Output
    /// files are then exactly-once: rows reach them only once the
    /// checkpoint covering them is complete (docs/guide.md,
    /// "Checkpoints").
    #[arg(long, value_name = "DIR")]
    pub checkpoint_dir: Option<std::path::PathBuf>,
    /// Complete checkpoints kept in `--checkpoint-dir` (older ones are
    /// deleted). 1..=1000.
    #[arg(
        long,
        value_name = "K",
        default_value_t = 2,
        value_parser = clap::value_parser!(u64).range(1..=1000)
    )]
    pub checkpoints_retained: u64,
    /// Ignore and delete the checkpoints in `--checkpoint-dir`: start from
    /// the first event.
    #[arg(long, requires = "checkpoint_dir")]
    pub fresh: bool,
    /// Watermark alignment (Flink's max allowed watermark drift): a
    /// source waits while its watermark is more than MS ms of event time
    /// ahead of the job's slowest source, which bounds what windows and
    /// joins keep when some workers read faster than others. 0 turns it
    /// off. Default: NEXMark's windowed queries, 60000 or their window if
    /// longer; other queries, off. At most 86400000 (a day).
    #[arg(long, value_name = "MS", value_parser = parse::drift_ms)]
    pub max_watermark_drift_ms: Option<u64>,
    /// Hot keys (docs/design.md, "Hot keys"): the senders of a windowed
    /// aggregate that sends every record to its key's owner (`--shuffle`)
    /// keep the records of key groups hotter than 1/(64 x workers) of what
    /// they send, aggregate them per window and send the owner one partial
    /// per window instead; rows are the same. `off`: every record goes to
    /// its key's owner. The report's `load` gives the balance either way.
    #[arg(
        long,
        value_name = "on|off",
        default_value = "on",
        action = clap::ArgAction::Set,
        value_parser = parse::on_off
    )]
    pub rebalance: bool,
    /// How often each sender judges again which key groups are hot, ms.
    /// 1..=3600000.
    #[arg(
        long,
        value_name = "MS",
        default_value_t = 100,
        value_parser = parse::barrier_ms
    )]
    pub rebalance_ms: u64,
    /// Do not pin workers to CPUs.
    #[arg(long)]
    pub no_pin: bool,
    /// Place workers on SMT siblings too (after one PU of every core);
    /// without it, one worker per physical core and siblings stay idle.
    #[arg(long)]
    pub smt: bool,
    /// Validate every received batch with rkyv's checked access (release
    /// builds otherwise trust batches of the same job: frame headers are
    /// always checked, payloads only with this); a corrupted batch is an
    /// error naming the channel. For the network tier across hosts.
    #[arg(long)]
    pub validate: bool,
    /// Under MPI: use the network tier (RMA windows) between ranks of one
    /// node too, instead of `/dev/shm` rings (tests the RMA path on one machine).
    #[arg(long, env = "AIR_FORCE_NETWORK", value_parser = clap::builder::FalseyValueParser::new())]
    pub force_network: bool,
    /// Write a live timeline CSV while the job runs: one row every
    /// --timeline-s with events read, events/s, resident memory (bytes) and
    /// the latency p50/p99/max (ms) of the rows emitted in that interval.
    /// Under MPI each rank writes FILE.rank<R>.<ext>.
    #[arg(long, value_name = "FILE")]
    pub timeline: Option<std::path::PathBuf>,
    /// Seconds between two --timeline rows (0.01..=86400).
    #[arg(long, value_name = "S", default_value_t = 10.0, value_parser = parse::timeline_s)]
    pub timeline_s: f64,
    /// Serve live metrics over HTTP while the job runs, in the Prometheus
    /// text format at http://HOST:PORT/metrics (docs/metrics.md). Under
    /// MPI rank R listens on PORT + R. Port 0: any free port (each rank
    /// prints the address it got on standard error).
    #[arg(long, value_name = "HOST:PORT", value_parser = parse::metrics_addr)]
    pub metrics: Option<MetricsAddr>,
}

/// A `--metrics` address: a host (name, IPv4, or `[IPv6]`) and a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsAddr {
    /// The host, as given (brackets kept for IPv6).
    pub host: String,
    /// The port of rank 0 (0: any free port).
    pub port: u16,
}

impl MetricsAddr {
    /// Where rank `rank` listens: `HOST:PORT+rank` (`HOST:0` stays 0).
    ///
    /// # Errors
    /// PORT + rank beyond 65535.
    pub fn for_rank(&self, rank: usize) -> Result<String, CliError> {
        let port = if self.port == 0 {
            0
        } else {
            u16::try_from(self.port as usize + rank).map_err(|_| {
                CliError::BadInput(format!(
                    "--metrics {}:{}: rank {rank} would listen on port {}, beyond 65535",
                    self.host,
                    self.port,
                    self.port as usize + rank
                ))
            })?
        };
        Ok(format!("{}:{port}", self.host))
    }

    /// Starts rank `rank`'s live-metrics server ([`MetricsAddr::for_rank`])
    /// and says where it listens on standard error.
    ///
    /// # Errors
    /// The port is beyond 65535, the host does not resolve, or the address
    /// cannot be bound (in use, not on this machine): a bad option.
    pub fn start(&self, rank: usize) -> Result<air_runtime::live::MetricsServer, CliError> {
        let addr = self.for_rank(rank)?;
        let s = air_runtime::live::MetricsServer::start(&addr, rank)
            .map_err(|e| CliError::BadInput(format!("--metrics {addr}: cannot listen: {e}")))?;
        air_runtime::say!(
            "air: rank {rank} serves live metrics at http://{}/metrics",
            s.local_addr()
        );
        Ok(s)
    }
}

impl RuntimeArgs {
    /// The --timeline path of this rank (`FILE.rank<R>.<ext>` when ranks > 1),
    /// for the output checks.
    pub fn timeline_path(&self, rank: usize, ranks: usize) -> Option<std::path::PathBuf> {
        let p = self.timeline.as_deref()?;
        Some(if ranks > 1 {
            super::driver::per_rank_path(p, rank)
        } else {
            p.to_path_buf()
        })
    }

    /// Checks --timeline-s and creates this rank's --timeline file now, so
    /// that a bad value or an uncreatable path is refused before any output
    /// is opened (truncated) or anything runs.
    ///
    /// # Errors
    /// As [`RuntimeArgs::start_timeline`].
    pub fn check_timeline(&self, rank: usize, ranks: usize) -> Result<(), CliError> {
        let Some(path) = self.timeline_path(rank, ranks) else {
            return Ok(());
        };
        self.timeline_interval()?;
        std::fs::File::create(&path)
            .map(drop)
            .map_err(|e| CliError::BadInput(format!("--timeline {}: {e}", path.display())))
    }

    /// Checks that `--max-parallelism` gives every worker of a job of
    /// `ranks` ranks at least one key group.
    ///
    /// # Errors
    /// Fewer key groups than workers (all ranks): a bad option.
    pub fn check_key_groups(&self, ranks: usize) -> Result<(), CliError> {
        let workers = self.job_config().workers * ranks.max(1);
        air_runtime::keygroups::KeyGroups::new(self.max_parallelism, workers)
            .map(drop)
            .map_err(|e| CliError::BadInput(format!("--max-parallelism: {e}")))
    }

    fn timeline_interval(&self) -> Result<Duration, CliError> {
        if !(self.timeline_s.is_finite() && (0.01..=86_400.0).contains(&self.timeline_s)) {
            return Err(CliError::BadInput(format!(
                "--timeline-s {}: expected seconds in 0.01..=86400",
                self.timeline_s
            )));
        }
        Ok(Duration::from_secs_f64(self.timeline_s))
    }

    /// Starts the --timeline sampler of this rank, if asked for; it stops
    /// (writing a last row) when dropped.
    ///
    /// # Errors
    /// A --timeline-s that is not a positive number of seconds, or a file
    /// that cannot be created.
    pub fn start_timeline(
        &self,
        rank: usize,
        ranks: usize,
    ) -> Result<Option<air_runtime::timeline::Timeline>, CliError> {
        let Some(path) = self.timeline_path(rank, ranks) else {
            return Ok(None);
        };
        let interval = self.timeline_interval()?;
        air_runtime::timeline::Timeline::start(&path, interval)
            .map(Some)
            .map_err(CliError::BadInput)
    }
}

/// `--checkpoint-ms` with `--checkpoint-dir` when not given, ms.
pub const DEFAULT_CHECKPOINT_MS: u64 = 1000;

/// What makes a run this job for its checkpoints (set by the driver,
/// [`set_job_identity`]; 0 until then).
static JOB_IDENTITY: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Sets what makes this run this job for its checkpoints: a hash of the
/// query's parsed options less the runtime and output ones
/// (`driver::job_identity`), so the order, spelling or defaults of options
/// do not matter, and options that change neither rows nor state (where
/// rows go, reports, pinning, ring sizes) may change between runs.
pub fn set_job_identity(id: u64) {
    JOB_IDENTITY.store(id, std::sync::atomic::Ordering::Relaxed);
}

/// `--ring-bytes` when not given, bytes (before the per-node budget).
pub const DEFAULT_RING_BYTES: usize = 1 << 20;

impl RuntimeArgs {
    /// The largest ring, bytes: `--ring-bytes`, else [`DEFAULT_RING_BYTES`].
    pub fn ring_bytes(&self) -> usize {
        self.ring_bytes.unwrap_or(DEFAULT_RING_BYTES)
    }

    /// The job configuration these options describe.
    pub fn job_config(&self) -> JobConfig {
        JobConfig {
            workers: self
                .workers
                .unwrap_or_else(|| air_runtime::placement::default_workers(self.smt))
                .max(1),
            ring_bytes: self.ring_bytes(),
            ring_budget: match self.ring_bytes {
                Some(_) => None,
                None => JobConfig::default().ring_budget,
            },
            flush: Duration::from_micros(self.flush_us.max(1)),
            batch_records: self.batch.max(1),
            pin: !self.no_pin,
            smt: self.smt,
            validate: self.validate,
            key_groups: self.max_parallelism,
            barrier_every: self
                .checkpoint_ms
                .or(self.checkpoint_dir.as_ref().map(|_| DEFAULT_CHECKPOINT_MS))
                .map(Duration::from_millis),
            checkpoint: self.checkpoint_dir.as_ref().map(|dir| CheckpointConfig {
                dir: dir.clone(),
                retained: self.checkpoints_retained as usize,
                fresh: self.fresh,
                job: JOB_IDENTITY.load(std::sync::atomic::Ordering::Relaxed),
            }),
            max_watermark_drift: self.max_watermark_drift_ms.filter(|&ms| ms > 0),
            rebalance: air_runtime::hotkeys::Rebalance {
                on: self.rebalance,
                period: Duration::from_millis(self.rebalance_ms),
                ..Default::default()
            },
            ..JobConfig::default()
        }
    }
}

/// Says on stderr what checkpoints promise with a live input (standard
/// input, TCP, `--listen`, `--follow`): a live input is not replayed.
pub fn say_live_checkpoint_promise(feed: &air_operators::sources::live::LiveFeed) {
    if feed.resumes_at_offset() {
        air_runtime::say!(
            "air: checkpoints with --follow: a resumed run reads the file on from where the last \
             complete checkpoint cut it (no line read twice, none skipped), as long as the path \
             names the same file (a file rotated, replaced or truncated since is read from its \
             start, and the run says so)"
        );
        return;
    }
    air_runtime::say!(
        "air: checkpoints with a live input: after a failure the job resumes with state and \
         committed rows that agree with each other, reading on from what the sender sends \
         then; lines read after the last complete checkpoint are lost unless the sender \
         sends them again (a consumer that wants each row once reads the committed --out file)"
    );
}

/// Wall-clock pacing of a generator (`air run wa|nexmark --rate R
/// [--duration S]`; YSB has its own `--rate`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct PaceArgs {
    /// Pace the generator by the wall clock at this many events/s (whole
    /// job) and stamp every event with its wall-clock due time (ms since the
    /// Unix epoch), so latency (emit time − newest event in the window) is
    /// meaningful; the report gets the latency percentiles and
    /// `input_lag_max_ms` (how far behind this schedule the generators
    /// fell). Without it the generator runs as fast as the job takes it,
    /// with deterministic event times (--events-per-s).
    /// 1..=10^13.
    #[arg(
        long,
        value_name = "EVENTS_PER_S",
        conflicts_with = "events_per_s",
        value_parser = parse::rate
    )]
    pub rate: Option<u64>,
    /// With --rate: generate for this many seconds (rate × seconds events,
    /// unless --events ends the stream first); a job that cannot keep up
    /// runs longer rather than drop events. At most 1e9.
    #[arg(long, value_name = "S", requires = "rate", value_parser = parse::duration)]
    pub duration: Option<f64>,
}

/// The start of a paced job: one instant, read with the wall clock.
#[derive(Clone, Copy, Debug)]
pub struct PaceStart {
    /// The pacers' start (shared by every worker of this rank).
    pub at: std::time::Instant,
    /// The wall clock at `at`, ms since the Unix epoch: event time of the
    /// first event.
    pub wall_ms: u64,
}

impl PaceArgs {
    /// Whether the generator is paced (`--rate`).
    pub fn paced(&self) -> bool {
        self.rate.is_some()
    }

    /// Checks the options for a job of `workers` workers (all ranks).
    ///
    /// # Errors
    /// A rate below one event/s per worker, a duration that is not a
    /// positive number of seconds.
    pub fn validate(&self, workers: u64) -> Result<(), CliError> {
        if let Some(r) = self.rate {
            if r < workers {
                return Err(CliError::BadInput(format!(
                    "--rate {r} is below one event per second per worker ({workers} workers in the job)"
                )));
            }
        }
        if let Some(d) = self.duration {
            if !d.is_finite() || d <= 0.0 || d > 1e9 {
                return Err(CliError::BadInput(format!(
                    "--duration {d}: expected a positive number of seconds, at most 1e9"
                )));
            }
        }
        Ok(())
    }

    /// The start of a paced job, now (`None` unless paced).
    pub fn start(&self) -> Option<PaceStart> {
        self.paced().then(|| PaceStart {
            at: std::time::Instant::now(),
            wall_ms: air_operators::now_ms(),
        })
    }

    /// Worker `index` of `workers`' pacer for a job started at `start`.
    pub fn pacer(
        &self,
        start: &PaceStart,
        index: usize,
        workers: usize,
    ) -> air_operators::sources::pace::Pacer {
        air_operators::sources::pace::Pacer::new(
            start.at,
            self.rate,
            self.duration.map(Duration::from_secs_f64),
            index,
            workers,
        )
    }

    /// The event budget of the whole job given `--events` (`given`) and its
    /// default: with `--duration` and no `--events`, unbounded (`None`; the
    /// pacer ends the stream).
    pub fn events(&self, given: Option<u64>, default: u64) -> Option<u64> {
        match (given, self.duration) {
            (Some(n), _) => Some(n),
            (None, Some(_)) => None,
            (None, None) => Some(default),
        }
    }
}

/// Value parsers of the numeric options every query shares: a value out of
/// its range is refused by clap (exit code 2) with a message naming the
/// option and the range, e.g. `invalid value '-10' for '--window-ms <MS>':
/// must be a positive integer (ms), at most 31536000000 (365 days)`.
/// Negative numbers reach these parsers (the `air` command lets every
/// option take a value starting with `-`), so `--window-ms -10` is refused
/// as a value, not as an unknown option `-1`.
pub mod parse {
    pub use air::{MAX_RING_BYTES, MAX_WORKERS, MIN_RING_BYTES};
    /// Most records per exchange batch.
    pub const MAX_BATCH: usize = 1 << 20;
    /// Longest flush interval, µs (one minute).
    pub const MAX_FLUSH_US: u64 = 60_000_000;
    /// Longest window, slide or out-of-orderness bound, ms (365 days).
    pub const MAX_WINDOW_MS: u64 = 365 * 86_400_000;
    /// Highest generator rate, events/s (10^13).
    pub const MAX_RATE: u64 = 10_000_000_000_000;
    /// Event-time rates (`--events-per-s`), events per second of event
    /// time: one event per 1000 s to 10^15 (the WA generator's exact time
    /// arithmetic needs the rate below 2^53).
    pub const MIN_EVENTS_PER_S: f64 = air_operators::sources::wa::MIN_EVENTS_PER_S;
    /// See [`MIN_EVENTS_PER_S`].
    pub const MAX_EVENTS_PER_S: f64 = air_operators::sources::wa::MAX_EVENTS_PER_S;

    /// An integer in `lo..=hi`, else `must be {what}`.
    fn int(s: &str, lo: u64, hi: u64, what: &str) -> Result<u64, String> {
        match s.trim().parse::<u64>() {
            Ok(v) if (lo..=hi).contains(&v) => Ok(v),
            _ => Err(format!("must be {what}")),
        }
    }

    /// A finite number in `lo..=hi` (`lo` excluded when `open`), else
    /// `must be {what}`.
    fn num(s: &str, lo: f64, hi: f64, open: bool, what: &str) -> Result<f64, String> {
        match s.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && v <= hi && (v > lo || (!open && v == lo)) => Ok(v),
            _ => Err(format!("must be {what}")),
        }
    }

    /// `--workers`.
    pub fn workers(s: &str) -> Result<usize, String> {
        int(s, 1, MAX_WORKERS as u64, "a positive integer, at most 1024").map(|v| v as usize)
    }

    /// `--barrier-ms`.
    pub fn barrier_ms(s: &str) -> Result<u64, String> {
        int(
            s,
            1,
            3_600_000,
            "a positive integer (ms), at most 3600000 (an hour)",
        )
    }

    /// `on` or `off` (`--rebalance`).
    pub fn on_off(s: &str) -> Result<bool, String> {
        match s {
            "on" => Ok(true),
            "off" => Ok(false),
            _ => Err("on or off".into()),
        }
    }

    /// `--max-watermark-drift-ms` (0: off).
    pub fn drift_ms(s: &str) -> Result<u64, String> {
        int(
            s,
            0,
            86_400_000,
            "a whole number of ms of event time from 0 (off) to 86400000 (a day)",
        )
    }

    /// `--max-parallelism` (key groups).
    pub fn max_parallelism(s: &str) -> Result<u32, String> {
        let max = air_runtime::keygroups::MAX_KEY_GROUPS;
        int(
            s,
            1,
            max as u64,
            "a positive integer (key groups), at most 65536",
        )
        .map(|v| v as u32)
    }

    /// `--batch`.
    pub fn batch(s: &str) -> Result<usize, String> {
        int(
            s,
            1,
            MAX_BATCH as u64,
            "a positive integer (records), at most 1048576",
        )
        .map(|v| v as usize)
    }

    /// `--ring-bytes`.
    pub fn ring_bytes(s: &str) -> Result<usize, String> {
        int(
            s,
            MIN_RING_BYTES as u64,
            MAX_RING_BYTES as u64,
            "an integer (bytes) in 4096..=17179869184 (16 GiB): a ring must hold at least a \
             batch frame and a control frame",
        )
        .map(|v| v as usize)
    }

    /// `--flush-us`.
    pub fn flush_us(s: &str) -> Result<u64, String> {
        int(
            s,
            1,
            MAX_FLUSH_US,
            "a positive integer (µs), at most 60000000 (a minute)",
        )
    }

    /// `--window-ms`, `--slide-ms`.
    pub fn window_ms(s: &str) -> Result<u64, String> {
        int(
            s,
            1,
            MAX_WINDOW_MS,
            "a positive integer (ms), at most 31536000000 (365 days)",
        )
    }

    /// `--max-delay-ms`.
    pub fn delay_ms(s: &str) -> Result<u64, String> {
        int(
            s,
            0,
            MAX_WINDOW_MS,
            "a non-negative integer (ms), at most 31536000000 (365 days)",
        )
    }

    /// `--idle-ms`: 1 ms to a day.
    /// `--state-ttl-ms`: 1 ms to 100 days.
    pub fn state_ttl_ms(s: &str) -> Result<u64, String> {
        int(
            s,
            1,
            8_640_000_000,
            "a positive integer (ms), at most 8640000000 (100 days)",
        )
    }

    /// `--listen-linger-ms`: 0 to a day.
    pub fn linger_ms(s: &str) -> Result<u64, String> {
        int(
            s,
            0,
            86_400_000,
            "a non-negative integer (ms), at most 86400000 (a day)",
        )
    }

    /// `--zipf-shift-ms`.
    pub fn zipf_shift_ms(s: &str) -> Result<u64, String> {
        int(
            s,
            1,
            MAX_WINDOW_MS,
            "a positive integer (ms of event time), at most 31536000000 (365 days)",
        )
    }

    /// `--idle-ms`, `--follow-idle-end-ms`.
    pub fn idle_ms(s: &str) -> Result<u64, String> {
        int(
            s,
            1,
            86_400_000,
            "a positive integer (ms), at most 86400000 (a day)",
        )
    }

    /// `--rate`.
    pub fn rate(s: &str) -> Result<u64, String> {
        int(
            s,
            1,
            MAX_RATE,
            "a positive integer (events/s), at most 10000000000000 (10^13)",
        )
    }

    /// `--duration`.
    pub fn duration(s: &str) -> Result<f64, String> {
        num(
            s,
            0.0,
            1e9,
            true,
            "a positive number of seconds, at most 1e9",
        )
    }

    /// `--metrics`: `HOST:PORT`, the host not empty, the port a number in
    /// 0..=65535 (`[::1]:PORT` for IPv6).
    pub fn metrics_addr(s: &str) -> Result<super::MetricsAddr, String> {
        let what = "HOST:PORT (e.g. 127.0.0.1:9400; port 0..=65535)";
        let (host, port) = s.rsplit_once(':').ok_or(format!("must be {what}"))?;
        let bracketed = host.starts_with('[') && host.ends_with(']') && host.len() > 2;
        if host.is_empty() || (host.contains(':') && !bracketed) || host.contains('/') {
            return Err(format!("must be {what}"));
        }
        let port = port
            .parse::<u16>()
            .map_err(|_| format!("must be {what}: bad port {port:?}"))?;
        Ok(super::MetricsAddr {
            host: host.to_string(),
            port,
        })
    }

    /// `--timeline-s`.
    pub fn timeline_s(s: &str) -> Result<f64, String> {
        num(s, 0.01, 86_400.0, false, "seconds in 0.01..=86400")
    }

    /// `--events-per-s` of the generators whose rate is a number (WA,
    /// NEXMark): finite, positive, with an inter-event gap (1000 / rate ms)
    /// that the millisecond clock holds.
    pub fn events_per_s(s: &str) -> Result<f64, String> {
        num(
            s,
            MIN_EVENTS_PER_S,
            MAX_EVENTS_PER_S,
            false,
            "a number of events per second of event time in 0.001..=1e15 (at most 1000 s \
             between two events)",
        )
    }

    /// An integer `--events-per-s` (`air gen ysb`).
    pub fn events_per_s_int(s: &str) -> Result<u64, String> {
        int(
            s,
            1,
            MAX_EVENTS_PER_S as u64,
            "a positive integer (events per second of event time), at most 10^15",
        )
    }

    /// `--keys`.
    pub fn keys(s: &str) -> Result<u64, String> {
        int(s, 1, u64::MAX, "a positive integer")
    }

    /// `--zipf` (0: uniform keys, as Zipf with exponent 0 is).
    pub fn zipf(s: &str) -> Result<f64, String> {
        num(
            s,
            0.0,
            1e6,
            false,
            "a number ≥ 0 (the Zipf exponent; 0: uniform)",
        )
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn ranges_and_messages() {
            assert_eq!(super::window_ms("5000"), Ok(5000));
            for bad in ["-10", "0", "1e3", "x", "31536000001"] {
                let e = super::window_ms(bad).unwrap_err();
                assert!(e.contains("positive integer"), "{bad}: {e}");
            }
            assert_eq!(super::delay_ms("0"), Ok(0));
            assert_eq!(super::batch("18446744073709551615").ok(), None);
            assert_eq!(super::workers("1024"), Ok(1024));
            assert!(super::workers("1025").is_err());
            assert_eq!(super::ring_bytes("4096"), Ok(4096));
            assert!(super::ring_bytes("4095").is_err());
            assert!(super::flush_us("0").is_err());
            assert_eq!(super::drift_ms("0"), Ok(0));
            assert_eq!(super::drift_ms("60000"), Ok(60_000));
            assert!(super::drift_ms("86400001").is_err());
            assert!(super::drift_ms("-1").is_err());
            assert_eq!(super::events_per_s("3"), Ok(3.0));
            assert_eq!(super::events_per_s("0.001"), Ok(0.001));
            for bad in ["1e-300", "0", "-1", "NaN", "inf", "1e16"] {
                assert!(super::events_per_s(bad).is_err(), "{bad}");
            }
            assert!(super::duration("0").is_err());
            assert_eq!(super::duration("1.5"), Ok(1.5));
            assert!(super::timeline_s("0.001").is_err());
            assert!(super::zipf("-1").is_err());
            assert_eq!(super::zipf("0"), Ok(0.0));
            assert!(super::rate("10000000000001").is_err());
        }
    }
}

/// An option that only some queries honour (see [`honours`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueryOption {
    /// `--window-ms`.
    WindowMs,
    /// `--slide-ms`.
    SlideMs,
    /// `--max-delay-ms`.
    MaxDelayMs,
    /// `--idle-ms`.
    IdleMs,
    /// `--shuffle`.
    Shuffle,
    /// `--keys`.
    Keys,
    /// `--zipf`.
    Zipf,
    /// `--zipf-shift-ms`.
    ZipfShiftMs,
    /// `--side-input` (NEXMark q13's table).
    SideInput,
    /// `--state-ttl-ms` (NEXMark's unwindowed keyed state: q6, q18, q19, q20).
    StateTtlMs,
    /// `--out-dir` (NEXMark q10's partitioned files).
    OutDir,
}

impl QueryOption {
    /// The option as typed.
    pub fn flag(self) -> &'static str {
        match self {
            QueryOption::WindowMs => "--window-ms",
            QueryOption::SlideMs => "--slide-ms",
            QueryOption::MaxDelayMs => "--max-delay-ms",
            QueryOption::IdleMs => "--idle-ms",
            QueryOption::Shuffle => "--shuffle",
            QueryOption::Keys => "--keys",
            QueryOption::Zipf => "--zipf",
            QueryOption::ZipfShiftMs => "--zipf-shift-ms",
            QueryOption::SideInput => "--side-input",
            QueryOption::StateTtlMs => "--state-ttl-ms",
            QueryOption::OutDir => "--out-dir",
        }
    }
}

/// A query, as the option rule [`honours`] knows it (`air run QUERY`,
/// `air bench ysb --sustainable --query QUERY`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueryKind {
    /// `ysb`.
    Ysb,
    /// `wa`.
    Wa,
    /// `nexmark --query QUERY` (its options: [`super::nexmark::Spec::honoured`]).
    Nexmark(super::nexmark::NexQuery),
    /// `wordcount`.
    Wordcount,
}

impl QueryKind {
    /// The query's name in messages.
    pub fn name(self) -> String {
        match self {
            QueryKind::Ysb => "ysb".into(),
            QueryKind::Wa => "wa".into(),
            QueryKind::Nexmark(q) => format!("nexmark {}", q.name()),
            QueryKind::Wordcount => "wordcount".into(),
        }
    }

    /// What the query is, in an option's error message.
    fn nature(self) -> &'static str {
        match self {
            QueryKind::Ysb => "tumbling windows over generated or read events",
            QueryKind::Wa => "tumbling windows over an in-order generator",
            QueryKind::Nexmark(q) => q.spec().nature,
            QueryKind::Wordcount => "batch, or tumbling windows of arrival time",
        }
    }

    /// The options it honours.
    fn honoured(self) -> &'static [QueryOption] {
        use QueryOption::*;
        match self {
            QueryKind::Ysb => &[WindowMs, MaxDelayMs, IdleMs, Shuffle, Zipf, ZipfShiftMs],
            QueryKind::Wa => &[WindowMs, Shuffle, Keys, Zipf, ZipfShiftMs],
            QueryKind::Nexmark(q) => q.spec().honoured,
            QueryKind::Wordcount => &[WindowMs],
        }
    }
}

/// Whether `query` honours `option`: the one rule every query (and the
/// sustainable search's `--query`) checks its options by. An option the
/// user gave to a query that does not honour it is refused (exit code 2)
/// rather than silently ignored; options left at their defaults are never
/// refused.
pub fn honours(query: QueryKind, option: QueryOption) -> bool {
    query.honoured().contains(&option)
}

/// Refuses the first option of `given` (option, whether the user gave it)
/// that the user gave and `query` does not honour.
///
/// # Errors
/// `BadInput` naming the option, the query and what the query takes.
pub fn check_honoured(query: QueryKind, given: &[(QueryOption, bool)]) -> Result<(), CliError> {
    let Some((option, _)) = given.iter().find(|(o, g)| *g && !honours(query, *o)) else {
        return Ok(());
    };
    let takes: Vec<&str> = query.honoured().iter().map(|o| o.flag()).collect();
    let takes = if takes.is_empty() {
        "none of the window, shuffle or key options".to_string()
    } else {
        takes.join(", ")
    };
    Err(CliError::BadInput(format!(
        "{} does not apply to {} ({}; {} takes {takes})",
        option.flag(),
        query.name(),
        query.nature(),
        query.name()
    )))
}

/// Which rings an edge has, as told by its largest frame ([`edge_kind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EdgeKind {
    /// `--ring-bytes` itself.
    Full,
    /// A sixteenth of it, at least 64 KiB (an edge that carries few
    /// records, [`small_ring_bytes`](air_runtime::dataflow::small_ring_bytes)).
    Small,
    /// Cannot tell (both are the same size, or the rings were scaled by
    /// the per-node budget): an answer must fit either.
    Either,
}

/// The kind of an edge whose largest frame was `max` bytes in a job run
/// with `--ring-bytes ring_bytes`: a frame of a ring of `c` bytes is at
/// most `c - 16` on the thread and node tiers, and one segment of it less
/// 16 on the network tier ([`air_shm::frame::segment_bytes`]).
fn edge_kind(max: usize, ring_bytes: usize) -> EdgeKind {
    use air_runtime::dataflow::small_ring_bytes;
    use air_shm::frame::segment_bytes;
    let seen = max.saturating_add(air_shm::FRAME_HEADER);
    let is = |c: usize| seen == c || seen == segment_bytes(c);
    let (full, small) = (
        ring_bytes.next_multiple_of(16),
        small_ring_bytes(ring_bytes),
    );
    match (is(full), is(small) && small != full) {
        _ if small == full => EdgeKind::Either,
        (true, false) => EdgeKind::Full,
        (false, true) => EdgeKind::Small,
        _ => EdgeKind::Either,
    }
}

/// The smallest `--ring-bytes` with which a record of `bytes` bytes
/// (archived) fits a frame of the channel whose largest frame was `max`
/// bytes in a job run with `--ring-bytes ring_bytes`, on every tier;
/// `None` if no ring up to [`parse::MAX_RING_BYTES`] holds it.
///
/// A frame of `bytes` needs `FRAME_HEADER + bytes` rounded up to 16
/// ([`air_shm::frame_size`]). A ring of `c` bytes holds frames of up to
/// `c - 16` bytes on the thread and node tiers, and of one segment less 16
/// on the network tier ([`air_shm::frame::segment_bytes`]: all of `c` up to
/// 256 KiB or when `c` has no divisor of 64–256 KiB that is a multiple of
/// 16, else such a divisor), so a record above 256 KiB needs a ring of
/// such a size. An edge's ring is `--ring-bytes`, or a sixteenth of it (at
/// least 64 KiB) on an edge that carries few records; `max` tells which
/// ([`edge_kind`]), and when it cannot the answer fits either. The answer
/// keeps the edge's rings a multiple of 16 bytes, as the network tier's
/// rings must be.
pub fn ring_bytes_to_fit(bytes: usize, max: usize, ring_bytes: usize) -> Option<usize> {
    use air_runtime::dataflow::small_ring_bytes;
    use air_shm::frame::segment_bytes;
    let need = air_shm::frame_size(bytes);
    let kind = edge_kind(max, ring_bytes);
    let (full, small) = match kind {
        EdgeKind::Full => (true, false),
        EdgeKind::Small => (false, true),
        EdgeKind::Either => (true, true),
    };
    let holds = |c: usize| segment_bytes(c) >= need;
    let fits = |r: usize| {
        (!full || holds(r.next_multiple_of(16))) && (!small || holds(small_ring_bytes(r)))
    };
    // No ring below these holds the frame at all: the smallest r with
    // r >= need (full) and small_ring_bytes(r) >= need (small).
    let mut r = need.max(parse::MIN_RING_BYTES);
    if small && need > 64 << 10 {
        // small_ring_bytes(r) rounds r / 16 up to 16: at least `need` from
        // r = 16 · (need − 15) on.
        r = r.max((need - 15).checked_mul(16)?);
    }
    // Above that, the first size whose segments hold it (at once up to
    // 256 KiB; beyond, within a few hundred steps of 16 bytes).
    while r <= parse::MAX_RING_BYTES {
        if fits(r) {
            return Some(r);
        }
        r += 16;
    }
    None
}

/// `e` with the `--ring-bytes` that fits, when it is a record too large
/// for its channel's frames ([`air_runtime::RuntimeError::BatchTooLarge`]);
/// else `e` unchanged. `ring_bytes`: the run's `--ring-bytes` (before any
/// scaling by the per-node budget).
pub fn with_ring_hint(e: CliError, ring_bytes: usize) -> CliError {
    let CliError::Other(inner) = &e else { return e };
    let Some((bytes, max)) =
        inner
            .chain()
            .find_map(|c| match c.downcast_ref::<air_runtime::RuntimeError>() {
                Some(air_runtime::RuntimeError::BatchTooLarge { bytes, max }) => {
                    Some((*bytes, *max))
                }
                _ => None,
            })
    else {
        return e;
    };
    let edge = match edge_kind(max, ring_bytes) {
        EdgeKind::Full => format!("rings are --ring-bytes {ring_bytes}"),
        EdgeKind::Small => format!(
            "rings are a sixteenth of --ring-bytes {ring_bytes} (at least 64 KiB), as on every \
             edge that carries few records"
        ),
        EdgeKind::Either => "rings are sized from --ring-bytes (or scaled down to the per-node \
                             budget when it is not given)"
            .to_string(),
    };
    let fix = match ring_bytes_to_fit(bytes, max, ring_bytes) {
        Some(r) => format!(
            "--ring-bytes {r} ({}) is the smallest that fits it on every tier (every ring of the \
             job takes that size, and edges that carry few records a sixteenth of it: if one of \
             those then refuses a record of its own, its error gives the size it needs; `air \
             plan` shows the memory)",
            bytes_human(r as u64)
        ),
        None => format!(
            "no --ring-bytes up to {} fits it",
            bytes_human(parse::MAX_RING_BYTES as u64)
        ),
    };
    CliError::Other(anyhow::anyhow!(
        "a record of {bytes} bytes (archived) exceeds the largest frame ({max} bytes) of its \
         channel, whose {edge}; a frame must fit in its ring, and on the network tier in one \
         segment of it (at most 256 KiB unless the ring's size has no divisor of 64-256 KiB): \
         {fix}"
    ))
}

/// `n` bytes in binary units with one decimal (`1.5 MiB`), or bytes below 1 KiB.
fn bytes_human(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = "bytes";
    for u in UNITS {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    if unit == "bytes" {
        format!("{n} bytes")
    } else {
        format!("{v:.1} {unit}")
    }
}

/// Whether an output path is `-`: standard output (`air gen ... --out -`,
/// `air run ... --out -`).
pub fn is_stdout(p: &Path) -> bool {
    p.as_os_str() == "-"
}

/// The live input an `air run` command line names: `--listen HOST:PORT`,
/// or `--input -` / `--input tcp://HOST:PORT` as its only `--input`;
/// `None` for files or the generator.
///
/// # Errors
/// A live input given with other inputs.
pub fn live_input(
    input: &[PathBuf],
    listen: Option<&str>,
) -> Result<Option<air_operators::sources::live::LiveInput>, CliError> {
    use air_operators::sources::live::LiveInput;
    if let Some(a) = listen {
        return Ok(Some(LiveInput::Listen(a.to_string())));
    }
    let live: Vec<_> = input
        .iter()
        .filter_map(|p| LiveInput::from_input_arg(p))
        .collect();
    match (live.len(), input.len()) {
        (0, _) => Ok(None),
        (1, 1) => Ok(live.into_iter().next()),
        _ => Err(CliError::BadInput(
            "a live input (-, tcp://HOST:PORT) must be the only --input".into(),
        )),
    }
}

/// Where `air gen … --out` writes its events: a file, standard output
/// (`-`), or a TCP connection air makes (`tcp://HOST:PORT`, to a job's
/// `--listen`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GenOut {
    /// A file, created (or truncated).
    File(PathBuf),
    /// Standard output (`-`).
    Stdout,
    /// A TCP connection to `HOST:PORT`.
    Tcp(String),
}

impl GenOut {
    /// What `--out ARG` names.
    pub fn parse(arg: &Path) -> GenOut {
        if is_stdout(arg) {
            return GenOut::Stdout;
        }
        match arg.to_str().and_then(|s| s.strip_prefix("tcp://")) {
            Some(a) => GenOut::Tcp(a.to_string()),
            None => GenOut::File(arg.to_path_buf()),
        }
    }

    /// Whether it is a stream (standard output or TCP), not a file.
    pub fn is_stream(&self) -> bool {
        !matches!(self, GenOut::File(_))
    }

    /// How messages name it: the path, `standard output`, `tcp://HOST:PORT`.
    pub fn name(&self) -> String {
        match self {
            GenOut::File(p) => p.display().to_string(),
            GenOut::Stdout => "standard output".into(),
            GenOut::Tcp(a) => format!("tcp://{a}"),
        }
    }

    /// Opens it: creates the file, locks standard output, or connects
    /// (with Nagle's delay off: paced batches leave when written).
    ///
    /// # Errors
    /// The file cannot be created (a directory, a missing parent) or the
    /// connection is refused: bad input, naming it.
    pub fn open(&self) -> Result<Box<dyn std::io::Write>, CliError> {
        let bad = |e: std::io::Error| CliError::BadInput(format!("{}: {e}", self.name()));
        Ok(match self {
            GenOut::File(p) => {
                if p.is_dir() {
                    return Err(CliError::BadInput(format!(
                        "{}: is a directory (--out takes a file)",
                        p.display()
                    )));
                }
                Box::new(std::fs::File::create(p).map_err(bad)?)
            }
            GenOut::Stdout => Box::new(std::io::stdout().lock()),
            GenOut::Tcp(a) => {
                let s = std::net::TcpStream::connect(a)
                    .map_err(|e| CliError::BadInput(format!("cannot connect to {a}: {e}")))?;
                let _ = s.set_nodelay(true);
                Box::new(s)
            }
        })
    }
}

/// An error of `air`: bad input exits with code 2, anything else with 1.
#[derive(Debug)]
pub enum CliError {
    /// Bad input (file, line, field named in the message): exit code 2.
    BadInput(String),
    /// Anything else: exit code 1.
    Other(anyhow::Error),
    /// Another rank failed and reported it; exit with this code, print nothing.
    Quiet(i32),
}

impl CliError {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::BadInput(_) => 2,
            CliError::Other(_) => 1,
            CliError::Quiet(c) => *c,
        }
    }
}

/// The message of a job the runtime refused before it made anything
/// ([`air_runtime::RuntimeError::Refused`]: it does not fit, or its ranks
/// disagree), if `e` is one, anywhere in its chain. Under MPI every rank
/// gets it together; `air` reports it as a bad option (exit code 2).
pub fn refusal(e: &CliError) -> Option<String> {
    let CliError::Other(e) = e else { return None };
    e.chain()
        .find_map(|c| match c.downcast_ref::<air_runtime::RuntimeError>() {
            Some(r @ air_runtime::RuntimeError::Refused(_)) => Some(r.to_string()),
            _ => None,
        })
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CliError::BadInput(m) => f.write_str(m),
            CliError::Quiet(c) => write!(f, "another rank failed (exit code {c})"),
            CliError::Other(e) => {
                // Our errors already name their cause in their message:
                // print a cause only if it adds something.
                let mut msg = e.to_string();
                for cause in e.chain().skip(1) {
                    let c = cause.to_string();
                    if !msg.contains(&c) {
                        msg = format!("{msg}: {c}");
                    }
                }
                f.write_str(&msg)
            }
        }
    }
}

impl<E: Into<anyhow::Error>> From<E> for CliError {
    fn from(e: E) -> Self {
        CliError::Other(e.into())
    }
}

pub use air_runtime::units::thousands;

/// Refuses output paths that name an input file or each other (creating an
/// output truncates it before the input is read). Paths are compared as
/// files (device and inode) when they exist, else by their canonical
/// parent directory and name.
pub fn check_outputs(
    outputs: &[(&str, &std::path::Path)],
    inputs: &[std::path::PathBuf],
) -> Result<(), CliError> {
    use std::os::unix::fs::MetadataExt;
    let id = |p: &std::path::Path| -> Option<(u64, u64)> {
        std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))
    };
    let canon = |p: &std::path::Path| -> Option<std::path::PathBuf> {
        let parent = p
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."));
        Some(std::fs::canonicalize(parent).ok()?.join(p.file_name()?))
    };
    let same = |a: &std::path::Path, b: &std::path::Path| match (id(a), id(b)) {
        (Some(x), Some(y)) => x == y,
        _ => canon(a).is_some() && canon(a) == canon(b),
    };
    for (i, (flag, out)) in outputs.iter().enumerate() {
        for input in inputs {
            if same(out, input) {
                return Err(CliError::BadInput(format!(
                    "{flag} {} is also an input file: writing it would destroy the input",
                    out.display()
                )));
            }
        }
        for (flag2, out2) in &outputs[..i] {
            if same(out, out2) {
                return Err(CliError::BadInput(format!(
                    "{flag2} and {flag} name the same file {}",
                    out.display()
                )));
            }
        }
    }
    Ok(())
}

/// Checks that every input path is a readable regular file (inputs are
/// split by byte range across workers: no pipes, devices, directories).
pub fn check_input_files(paths: &[std::path::PathBuf]) -> Result<(), CliError> {
    for path in paths {
        match std::fs::metadata(path) {
            Ok(m) if !m.is_file() => {
                return Err(CliError::BadInput(format!(
                    "{}: not a regular file (input files are split by byte range across \
                     workers; pipes and devices are not supported)",
                    path.display()
                )))
            }
            Ok(_) => {}
            Err(e) => return Err(CliError::BadInput(format!("{}: {e}", path.display()))),
        }
    }
    Ok(())
}

/// Peak resident set size of this process since it started or since the
/// last [`reset_peak_rss`], bytes: `VmHWM` of `/proc/self/status` on Linux,
/// else `getrusage`'s `ru_maxrss` (KiB on Linux; never reset).
pub fn peak_rss_bytes() -> u64 {
    let hwm = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        });
    if let Some(kib) = hwm {
        return kib * 1024;
    }
    max_rss_bytes()
}

/// Resets the peak resident set reported by [`peak_rss_bytes`] to the
/// current one (Linux: writing `5` to `/proc/self/clear_refs`), so the next
/// peak is of what runs after it (one probe of a search). Returns whether
/// the kernel took it.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// `getrusage(RUSAGE_SELF)`, or `None` if it fails.
fn rusage() -> Option<libc::rusage> {
    // SAFETY: a zeroed rusage is a valid out-parameter; getrusage writes it
    // and we read it only when the call succeeded.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        (libc::getrusage(libc::RUSAGE_SELF, &mut ru) == 0).then_some(ru)
    }
}

/// `ru_maxrss` of `getrusage`, bytes (the lifetime peak).
fn max_rss_bytes() -> u64 {
    rusage().map_or(0, |ru| (ru.ru_maxrss.max(0) as u64) * 1024)
}

/// CPU time of this process so far (user + system), seconds.
pub fn cpu_seconds() -> f64 {
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 * 1e-6;
    rusage().map_or(0.0, |ru| t(ru.ru_utime) + t(ru.ru_stime))
}

/// An output file (`--out`, `--report`, a per-rank `--out`) written whole or
/// not at all: created before the run as `.<name>.<pid>.tmp` beside `path`
/// (so an uncreatable path fails before anything runs, and an earlier file
/// at `path` stays intact meanwhile), then renamed over `path` once written.
/// A FIFO, a device or any other existing non-regular file is written in
/// place (a rename would replace it). If the process dies while writing, the
/// temp file may remain; `path` never holds a cut file.
pub struct Output {
    path: PathBuf,
    /// The temp file to rename over `path` (`None`: written in place).
    tmp: Option<PathBuf>,
    file: Option<std::fs::File>,
}

impl Output {
    /// Opens the output for `path`.
    ///
    /// # Errors
    /// `BadInput` naming `path` when it is a directory or its temp file
    /// cannot be created (missing directory, no permission).
    pub fn create(path: &Path) -> Result<Output, CliError> {
        let bad =
            |e: &dyn std::fmt::Display| CliError::BadInput(format!("{}: {e}", path.display()));
        let in_place = match std::fs::metadata(path) {
            Ok(m) if m.is_dir() => return Err(bad(&"is a directory")),
            Ok(m) => !m.is_file(),
            Err(_) => false,
        };
        if in_place {
            let file = std::fs::File::create(path).map_err(|e| bad(&e))?;
            return Ok(Output {
                path: path.to_path_buf(),
                tmp: None,
                file: Some(file),
            });
        }
        let name = path
            .file_name()
            .ok_or_else(|| bad(&"not a file name"))?
            .to_string_lossy();
        let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
        let file = std::fs::File::create(&tmp).map_err(|e| bad(&e))?;
        Ok(Output {
            path: path.to_path_buf(),
            tmp: Some(tmp),
            file: Some(file),
        })
    }

    /// Writes the output with `write` (which must flush what it buffers)
    /// and puts it in place.
    ///
    /// # Errors
    /// What `write` returned, or the rename's error (naming `path`).
    pub fn write(
        mut self,
        write: impl FnOnce(std::fs::File) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let file = self.file.take().expect("an output is written once");
        write(file)?;
        if let Some(tmp) = self.tmp.take() {
            if let Err(e) = std::fs::rename(&tmp, &self.path) {
                let _ = std::fs::remove_file(&tmp);
                anyhow::bail!("{}: {e}", self.path.display());
            }
        }
        Ok(())
    }
}

impl Drop for Output {
    /// An output never written (the run failed): its temp file goes.
    fn drop(&mut self) {
        if let Some(tmp) = &self.tmp {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// Writes `value` as pretty JSON to `file`, flushed.
///
/// # Errors
/// Serialization or I/O errors.
pub fn write_json(file: std::fs::File, value: &impl serde::Serialize) -> anyhow::Result<()> {
    use std::io::Write;
    let mut w = std::io::BufWriter::new(file);
    serde_json::to_writer_pretty(&mut w, value)?;
    w.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    /// The `--ring-bytes` suggested for a record too large for its frame
    /// holds it on the kind of edge that refused it, with rings of a
    /// multiple of 16 bytes (the network tier takes them as they are and
    /// needs that), and the next smaller such value does not; on an edge
    /// that cannot be told (`--ring-bytes` at most 64 KiB) it holds it on
    /// both kinds.
    /// An edge kind: its name, its ring, its ring at another
    /// `--ring-bytes`.
    type EdgeOf = (&'static str, usize, fn(usize) -> usize);

    #[test]
    fn the_suggested_ring_bytes_is_the_smallest_that_fits() {
        use air_runtime::dataflow::small_ring_bytes;
        use air_shm::frame::segment_bytes;
        // The largest frame of a ring on every tier: one segment less 16.
        let largest = |ring: usize| segment_bytes(ring) - air_shm::FRAME_HEADER;
        for ring_bytes in [4096, 4097, 60_000, 65_536, 1 << 20, 3_000_000, 1 << 24] {
            let small = small_ring_bytes(ring_bytes);
            let kinds: [EdgeOf; 2] = [
                ("full", ring_bytes.next_multiple_of(16), |r| {
                    r.next_multiple_of(16)
                }),
                ("small", small, small_ring_bytes),
            ];
            for (kind, ring, edge_of) in kinds {
                let max = largest(ring);
                for bytes in [
                    max + 1,
                    max + 17,
                    65_521,
                    100_000,
                    300_000,
                    701_176,
                    5 << 20,
                ] {
                    if bytes <= max {
                        continue;
                    }
                    let fit = super::ring_bytes_to_fit(bytes, max, ring_bytes).unwrap();
                    let what = format!("{kind} edge, --ring-bytes {ring_bytes}, {bytes} bytes");
                    assert_eq!(edge_of(fit) % 16, 0, "{what}: {fit}");
                    assert!(largest(edge_of(fit)) >= bytes, "{what}: {fit}");
                    // The smallest: 16 bytes less no longer holds it (on
                    // this kind of edge, or on one of both when the two
                    // kinds cannot be told apart).
                    let either = super::edge_kind(max, ring_bytes) == super::EdgeKind::Either;
                    if either {
                        assert!(largest(small_ring_bytes(fit)) >= bytes, "{what}: {fit}");
                    }
                    if fit > super::parse::MIN_RING_BYTES {
                        let r = fit - 16;
                        let holds = if either {
                            largest(r.next_multiple_of(16)) >= bytes
                                && largest(small_ring_bytes(r)) >= bytes
                        } else {
                            largest(edge_of(r)) >= bytes
                        };
                        assert!(!holds, "{what}: {fit}");
                    }
                }
            }
        }
        // Beyond 16 GiB no ring holds it.
        assert_eq!(super::ring_bytes_to_fit(2 << 30, 65_520, 1 << 20), None);
    }

    /// The error of a record too large names the `--ring-bytes` that
    /// fits; other errors pass unchanged.
    #[test]
    fn a_record_too_large_names_the_ring_bytes_that_fit() {
        use super::CliError;
        let too_large = |bytes, max| {
            CliError::Other(anyhow::Error::new(
                air_runtime::RuntimeError::BatchTooLarge { bytes, max },
            ))
        };
        // A 701 176-byte record on a collect edge (64 KiB rings at the
        // default 1 MiB): a frame of 701 200 bytes, 16 of them a ring.
        // A frame of 701,200 bytes: 16 × that would hold it on the thread
        // and node tiers, but its network rings' segments are 140,240
        // bytes; the first size above whose segment is the whole ring.
        let e = super::with_ring_hint(too_large(701_176, 65_520), 1 << 20);
        let m = e.to_string();
        let fit = super::ring_bytes_to_fit(701_176, 65_520, 1 << 20).unwrap();
        assert!(fit > 11_219_200, "{fit}");
        let small = air_runtime::dataflow::small_ring_bytes(fit);
        assert_eq!(air_shm::frame::segment_bytes(small), small);
        assert!(m.contains(&format!("--ring-bytes {fit} (")), "{m}");
        assert!(m.contains("a sixteenth of --ring-bytes 1048576"), "{m}");
        assert_eq!(e.exit_code(), 1);
        // On the network tier a 1 MiB ring's frames are 256 KiB segments:
        // a 300,000-byte record needs a ring that is one segment.
        let seg_max = (256 << 10) - 16;
        let m = super::with_ring_hint(too_large(300_000, seg_max), 1 << 20).to_string();
        assert!(m.contains("rings are --ring-bytes 1048576"), "{m}");
        let fit = super::ring_bytes_to_fit(300_000, seg_max, 1 << 20).unwrap();
        assert_eq!(air_shm::frame::segment_bytes(fit), fit);
        assert!((300_016..320_000).contains(&fit), "{fit}");
        let other = super::with_ring_hint(CliError::BadInput("x".into()), 1 << 20);
        assert_eq!(other.to_string(), "x");
    }

    /// After a reset the peak is what is resident now, not an earlier,
    /// larger peak (Linux; elsewhere the reset is refused and nothing is
    /// checked).
    #[test]
    fn peak_rss_resets_to_the_current_set() {
        let big: Vec<u8> = vec![1; 256 << 20];
        assert!(big.iter().step_by(4096).all(|&b| b == 1));
        let with_big = super::peak_rss_bytes();
        assert!(with_big >= 256 << 20, "{with_big}");
        drop(big);
        if super::reset_peak_rss() {
            let after = super::peak_rss_bytes();
            assert!(after + (128 << 20) < with_big, "{after} vs {with_big}");
        }
    }
}
