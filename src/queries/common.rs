//! Options shared by every `air run` query.

use air_runtime::JobConfig;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Runtime options of `air run`.
#[derive(clap::Args, Debug, Clone)]
pub struct RuntimeArgs {
    /// Worker threads (default: one per physical core this process may use,
    /// or per PU with `--smt`; SLURM tasks sharing a node unbound split it).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Staged exchange batches are pushed, and watermarks sent, at least this
    /// often (µs).
    #[arg(long, default_value_t = 1000)]
    pub flush_us: u64,
    /// Records per exchange batch.
    #[arg(long, default_value_t = 1024)]
    pub batch: usize,
    /// Capacity of each channel ring in bytes (workers² rings).
    #[arg(long, default_value_t = 1 << 20)]
    pub ring_bytes: usize,
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
    /// Seconds between two --timeline rows.
    #[arg(long, value_name = "S", default_value_t = 10.0)]
    pub timeline_s: f64,
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

impl RuntimeArgs {
    /// The job configuration these options describe.
    pub fn job_config(&self) -> JobConfig {
        JobConfig {
            workers: self
                .workers
                .unwrap_or_else(|| air_runtime::placement::default_workers(self.smt))
                .max(1),
            ring_bytes: self.ring_bytes,
            flush: Duration::from_micros(self.flush_us.max(1)),
            batch_records: self.batch.max(1),
            pin: !self.no_pin,
            smt: self.smt,
            validate: self.validate,
            ..JobConfig::default()
        }
    }
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
    #[arg(long, value_name = "EVENTS_PER_S", conflicts_with = "events_per_s")]
    pub rate: Option<u64>,
    /// With --rate: generate for this many seconds (rate × seconds events,
    /// unless --events ends the stream first); a job that cannot keep up
    /// runs longer rather than drop events.
    #[arg(long, value_name = "S", requires = "rate")]
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
            wall_ms: air_operators::stream::now_ms(),
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

/// Formats `n` with thousands separators.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

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
