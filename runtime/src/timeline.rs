//! A live timeline of a running job: every interval, one CSV row with the
//! events read, the throughput, the resident memory and the latency of the
//! rows emitted during that interval. It is how a soak run shows that memory
//! and latency stay flat (`tools/soak.sh`), and how a user watches a long
//! job.
//!
//! Workers feed it through two process-wide hooks that cost nothing while no
//! timeline runs: [`add_events`] (one relaxed atomic add per source batch)
//! and [`record_latency`] (one uncontended lock per fired window). A
//! [`Timeline`] thread samples them.
//!
//! CSV columns (one row per interval, flushed as written):
//! `elapsed_s` (s since start, end of the interval), `events` (read so far),
//! `events_per_s` (in the interval), `rss_bytes` (resident set now, from
//! `/proc/self/statm`), `rows` (latency samples in the interval),
//! `latency_p50_ms`, `latency_p99_ms`, `latency_max_ms` (empty without
//! samples).

use hdrhistogram::Histogram;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Whether a timeline is sampling (the hooks do nothing otherwise).
static ON: AtomicBool = AtomicBool::new(false);
/// Events read by every worker of this process since the timeline started.
static EVENTS: AtomicU64 = AtomicU64::new(0);
/// Latency samples (ms) of the current interval.
static LATENCY: Mutex<Option<Histogram<u64>>> = Mutex::new(None);

/// Counts `n` events read by a source (call once per batch).
#[inline]
pub fn add_events(n: u64) {
    if ON.load(Ordering::Relaxed) {
        EVENTS.fetch_add(n, Ordering::Relaxed);
    }
}

/// Records latency samples (ms) of rows just emitted; `samples` is called
/// only while a timeline runs, with the interval's histogram.
#[inline]
pub fn record_latency(samples: impl FnOnce(&mut Histogram<u64>)) {
    if ON.load(Ordering::Relaxed) {
        if let Ok(mut h) = LATENCY.lock() {
            if let Some(h) = h.as_mut() {
                samples(h);
            }
        }
    }
}

/// The resident set size of this process now, bytes (`/proc/self/statm`'s
/// second field times the page size); 0 if unreadable.
pub fn current_rss_bytes() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * page.max(0) as u64
}

/// A sampling thread writing the timeline CSV; stops (writing a last row)
/// when dropped. One per process at a time.
pub struct Timeline {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Timeline {
    /// Starts sampling every `interval` into the CSV file `path` (created or
    /// truncated; header written now).
    ///
    /// # Errors
    /// The file cannot be created (the message names it), or another
    /// timeline runs in this process.
    pub fn start(path: &Path, interval: Duration) -> Result<Timeline, String> {
        if ON.swap(true, Ordering::SeqCst) {
            return Err("a timeline is already running in this process".into());
        }
        let file = std::fs::File::create(path).map_err(|e| {
            ON.store(false, Ordering::SeqCst);
            format!("{}: cannot create the timeline: {e}", path.display())
        })?;
        EVENTS.store(0, Ordering::SeqCst);
        if let Ok(mut h) = LATENCY.lock() {
            *h = Some(crate::metrics::latency_histogram());
        }
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let path = path.to_path_buf();
        let interval = interval.max(Duration::from_millis(10));
        let thread = std::thread::Builder::new()
            .name("air-timeline".into())
            .spawn(move || sample(file, &path, interval, &s))
            .map_err(|e| format!("cannot start the timeline thread: {e}"))?;
        Ok(Timeline {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Timeline {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
        ON.store(false, Ordering::SeqCst);
        if let Ok(mut h) = LATENCY.lock() {
            *h = None;
        }
    }
}

fn sample(file: std::fs::File, path: &Path, interval: Duration, stop: &AtomicBool) {
    let mut out = std::io::BufWriter::new(file);
    let warn = |e: std::io::Error| tracing::warn!("{}: timeline: {e}", path.display());
    let _ = writeln!(
        out,
        "elapsed_s,events,events_per_s,rss_bytes,rows,latency_p50_ms,latency_p99_ms,latency_max_ms"
    )
    .and_then(|_| out.flush())
    .map_err(warn);
    let start = Instant::now();
    let (mut last_t, mut last_n) = (start, 0u64);
    let mut next = start + interval;
    loop {
        let done = stop.load(Ordering::SeqCst);
        if !done {
            let now = Instant::now();
            if now < next {
                std::thread::park_timeout(next - now);
                continue;
            }
            next += interval;
        }
        let now = Instant::now();
        let n = EVENTS.load(Ordering::Relaxed);
        let h = LATENCY.lock().ok().and_then(|mut h| {
            h.as_mut()
                .map(|h| std::mem::replace(h, crate::metrics::latency_histogram()))
        });
        let dt = now.duration_since(last_t).as_secs_f64();
        let rate = if dt > 0.0 {
            (n - last_n) as f64 / dt
        } else {
            0.0
        };
        let (rows, lat) = match &h {
            Some(h) if !h.is_empty() => (
                h.len(),
                format!(
                    "{},{},{}",
                    h.value_at_quantile(0.5),
                    h.value_at_quantile(0.99),
                    h.max()
                ),
            ),
            _ => (0, ",,".to_string()),
        };
        let _ = writeln!(
            out,
            "{:.3},{n},{rate:.0},{},{rows},{lat}",
            now.duration_since(start).as_secs_f64(),
            current_rss_bytes()
        )
        .and_then(|_| out.flush())
        .map_err(warn);
        (last_t, last_n) = (now, n);
        if done {
            return;
        }
    }
}
