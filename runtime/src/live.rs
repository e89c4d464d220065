//! Live metrics: a running job's per-worker counters, served over HTTP in
//! the Prometheus text exposition format (version 0.0.4) at `GET /metrics`.
//!
//! # Cost on the hot path
//! Workers keep counting in plain `u64`s ([`crate::ChannelMetrics`] and
//! their operators' counters), as without live metrics. Each worker owns
//! one [`WorkerLive`]: blocks of [`AtomicU64`] shared (through an [`Arc`])
//! with the HTTP thread, each block `#[repr(C, align(128))]` so no two
//! workers' blocks share a cache line (nor the adjacent-line prefetch
//! pair). At its flush tick, at most once every [`PUBLISH_EVERY`], the
//! worker copies its counters into its blocks with `Relaxed` stores (the
//! reader needs no ordering between counters: each is a monotone value
//! read on its own); it also publishes once when it ends. Nothing is
//! atomic per record. Without a [`MetricsServer`] in the process no block
//! exists and the tick's check is one branch.
//!
//! # Lifetime
//! [`MetricsServer::start`] binds the address, installs the process's
//! registry ([`LiveMetrics`]) and serves it from one thread until dropped.
//! [`crate::dataflow::run_graph`] registers its workers in the installed
//! registry, if any. A worker that runs several graphs in one process keeps
//! its counters growing across them when the graphs have the same edges
//! (else its counters restart from 0, which Prometheus reads as a reset).
//! One server, and one job at a time, per process.
//!
//! # Metrics
//! Labels: `rank` (MPI rank; 0 alone), `worker` (global worker index),
//! `edge` (exchange edge index, named by `air_edge_info`), `tier`
//! (`thread`, `node`, `network`). Counters end in `_total`; units are
//! base units (seconds, bytes). See `docs/metrics.md` for the table.

use crate::dataflow::Stats;
use crate::metrics::ChannelMetrics;
use crate::plan::Tier;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often a worker copies its counters into its shared blocks, at
/// most (at its next flush tick after this much time passed).
pub const PUBLISH_EVERY: Duration = Duration::from_millis(100);

/// The tiers in label order (index = `tier_index`).
const TIERS: [&str; 3] = ["thread", "node", "network"];

/// Index of `t` in the per-tier arrays.
pub(crate) fn tier_index(t: Tier) -> usize {
    match t {
        Tier::Thread => 0,
        Tier::Node => 1,
        Tier::Network => 2,
    }
}

/// One worker's operator counters, shared with the HTTP thread. Written
/// only by the worker (Relaxed stores, at most every [`PUBLISH_EVERY`]),
/// read by the HTTP thread (Relaxed loads) when scraped.
#[repr(C, align(128))]
#[derive(Debug, Default)]
pub struct WorkerCounters {
    /// Records its sources read.
    pub source_records: AtomicU64,
    /// Records dropped as late (behind the watermark) by its operators.
    pub late_records: AtomicU64,
    /// Input records skipped as malformed by its sources.
    pub skipped_records: AtomicU64,
    /// Result rows of windows its window operators fired.
    pub window_rows: AtomicU64,
    /// Windows its window operators fired (one per window, not per key).
    pub windows_fired: AtomicU64,
    /// Rows its sinks received.
    pub sink_rows: AtomicU64,
    /// Records of hot key groups its senders aggregated themselves
    /// instead of sending ([`crate::hotkeys`]).
    pub hot_records: AtomicU64,
    /// Partials of those records it sent to their owners.
    pub hot_partials: AtomicU64,
    /// When it last published, ms since the Unix epoch (0: never).
    pub published_unix_ms: AtomicU64,
}

/// One worker's counters of one exchange edge, shared with the HTTP
/// thread (writer: the worker; reader: the HTTP thread; Relaxed both).
#[repr(C, align(128))]
#[derive(Debug, Default)]
pub struct EdgeCounters {
    /// Records the worker sent on the edge.
    pub records_out: AtomicU64,
    /// Bytes of archived batches it sent.
    pub bytes_out: AtomicU64,
    /// Data frames (batches) it sent.
    pub batches_out: AtomicU64,
    /// Watermark frames it sent.
    pub watermarks_out: AtomicU64,
    /// Records it received on the edge.
    pub records_in: AtomicU64,
    /// Bytes of archived batches it received.
    pub bytes_in: AtomicU64,
    /// Data frames it received.
    pub batches_in: AtomicU64,
    /// Sends that found the destination ring full, by tier of the ring
    /// (thread, node, network).
    pub ring_full_waits: [AtomicU64; 3],
    /// Minimum watermark over the edge's inputs at this worker, ms of
    /// event time (0: none yet; `u64::MAX`: every input ended).
    pub watermark_ms: AtomicU64,
    /// Bytes queued in the worker's input rings of the edge (published by
    /// their senders, not yet read; frame headers and padding included),
    /// summed over the rings, at the last publish: a gauge.
    pub queued_bytes_in: AtomicU64,
    /// Capacity of those input rings, bytes, summed (0: no ring).
    pub ring_bytes_in: AtomicU64,
}

// The layout the module promises: whole 128-byte blocks.
const _: () = assert!(std::mem::size_of::<WorkerCounters>() % 128 == 0);
const _: () = assert!(std::mem::size_of::<EdgeCounters>() == 128);

/// One worker's shared blocks.
#[derive(Debug)]
pub struct WorkerLive {
    /// Global worker index.
    pub worker: usize,
    /// Its operator counters.
    pub counters: WorkerCounters,
    /// Its counters per exchange edge, by edge index.
    pub edges: Box<[EdgeCounters]>,
    /// The edges' names, by index.
    pub edge_names: Vec<String>,
    /// Per edge: bit `tier_index(t)` set if the edge has a ring of tier
    /// `t` from this worker (those tiers' waits are exposed).
    pub tiers: Vec<u8>,
}

/// The live metrics of this process: every registered worker's blocks.
#[derive(Debug)]
pub struct LiveMetrics {
    rank: usize,
    workers: Mutex<BTreeMap<usize, Arc<WorkerLive>>>,
}

/// The registry of the running [`MetricsServer`], if any.
static CURRENT: Mutex<Option<Arc<LiveMetrics>>> = Mutex::new(None);

/// The registry installed by this process's [`MetricsServer`], if one runs.
pub fn current() -> Option<Arc<LiveMetrics>> {
    CURRENT.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

impl LiveMetrics {
    /// An empty registry of MPI rank `rank`.
    pub fn new(rank: usize) -> Self {
        LiveMetrics {
            rank,
            workers: Mutex::new(BTreeMap::new()),
        }
    }

    /// The blocks of global worker `worker` for a graph with edges named
    /// `edge_names` (`tiers`: per edge, the tier mask of its rings from
    /// this worker): its blocks of an earlier graph with the same edges
    /// (its counters keep growing), else new zeroed ones.
    pub fn register(
        &self,
        worker: usize,
        edge_names: &[String],
        tiers: Vec<u8>,
    ) -> Arc<WorkerLive> {
        let mut g = self.workers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(w) = g.get(&worker) {
            if w.edge_names == edge_names && w.tiers == tiers {
                return w.clone();
            }
        }
        let w = Arc::new(WorkerLive {
            worker,
            counters: WorkerCounters::default(),
            edges: (0..edge_names.len())
                .map(|_| EdgeCounters::default())
                .collect(),
            edge_names: edge_names.to_vec(),
            tiers,
        });
        g.insert(worker, w.clone());
        w
    }

    /// The Prometheus text exposition (format 0.0.4) of every registered
    /// worker's last published counters, with the process's peak and
    /// current resident memory and wall-clock watermark lags as of now.
    pub fn render(&self) -> String {
        let workers: Vec<Arc<WorkerLive>> = self
            .workers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        let rank = self.rank;
        let now_s = unix_ms() as f64 / 1000.0;
        let mut o = String::with_capacity(4096 + workers.len() * 4096);
        let family = |o: &mut String, name: &str, kind: &str, help: &str| {
            let _ = writeln!(o, "# HELP {name} {help}");
            let _ = writeln!(o, "# TYPE {name} {kind}");
        };
        family(
            &mut o,
            "air_workers",
            "gauge",
            "Workers of this process registered for live metrics.",
        );
        let _ = writeln!(o, "air_workers{{rank=\"{rank}\"}} {}", workers.len());
        family(
            &mut o,
            "air_peak_resident_bytes",
            "gauge",
            "Peak resident set size of the process (VmHWM), bytes.",
        );
        let _ = writeln!(
            o,
            "air_peak_resident_bytes{{rank=\"{rank}\"}} {}",
            proc_status_bytes("VmHWM:")
        );
        family(
            &mut o,
            "air_resident_bytes",
            "gauge",
            "Resident set size of the process now (VmRSS), bytes.",
        );
        let _ = writeln!(
            o,
            "air_resident_bytes{{rank=\"{rank}\"}} {}",
            proc_status_bytes("VmRSS:")
        );
        family(
            &mut o,
            "air_edge_info",
            "gauge",
            "Names of the exchange edges of the job (value 1).",
        );
        let mut seen = std::collections::BTreeSet::new();
        for w in &workers {
            for (e, n) in w.edge_names.iter().enumerate() {
                if seen.insert((e, n.as_str())) {
                    let _ = writeln!(
                        o,
                        "air_edge_info{{rank=\"{rank}\",edge=\"{e}\",name=\"{}\"}} 1",
                        escape(n)
                    );
                }
            }
        }
        type Get = fn(&WorkerCounters) -> &AtomicU64;
        let per_worker: [(&str, &str, Get); 8] = [
            (
                "air_source_records_total",
                "Records read by the worker's sources.",
                |c| &c.source_records,
            ),
            (
                "air_late_records_total",
                "Records dropped as late (behind the watermark) by the worker's operators.",
                |c| &c.late_records,
            ),
            (
                "air_skipped_records_total",
                "Malformed input records skipped by the worker's sources.",
                |c| &c.skipped_records,
            ),
            (
                "air_window_rows_total",
                "Result rows of windows fired by the worker's window operators.",
                |c| &c.window_rows,
            ),
            (
                "air_windows_fired_total",
                "Windows fired by the worker's window operators (one per window, not per key).",
                |c| &c.windows_fired,
            ),
            (
                "air_sink_rows_total",
                "Rows received by the worker's sinks.",
                |c| &c.sink_rows,
            ),
            (
                "air_hot_records_total",
                "Records of hot key groups the worker aggregated itself instead of sending \
                 (--rebalance).",
                |c| &c.hot_records,
            ),
            (
                "air_hot_partials_total",
                "Partials of hot key groups the worker sent to their owners instead.",
                |c| &c.hot_partials,
            ),
        ];
        for (name, help, get) in per_worker {
            family(&mut o, name, "counter", help);
            for w in &workers {
                let _ = writeln!(
                    o,
                    "{name}{{rank=\"{rank}\",worker=\"{}\"}} {}",
                    w.worker,
                    get(&w.counters).load(Ordering::Relaxed)
                );
            }
        }
        family(
            &mut o,
            "air_published_timestamp_seconds",
            "gauge",
            "When the worker last published its counters, seconds since the Unix epoch.",
        );
        for w in &workers {
            let t = w.counters.published_unix_ms.load(Ordering::Relaxed);
            let _ = writeln!(
                o,
                "air_published_timestamp_seconds{{rank=\"{rank}\",worker=\"{}\"}} {}",
                w.worker,
                t as f64 / 1000.0
            );
        }
        type GetE = fn(&EdgeCounters) -> &AtomicU64;
        let per_edge: [(&str, &str, GetE); 7] = [
            (
                "air_records_out_total",
                "Records the worker sent on the exchange edge.",
                |c| &c.records_out,
            ),
            (
                "air_bytes_out_total",
                "Bytes of archived batches the worker sent on the edge.",
                |c| &c.bytes_out,
            ),
            (
                "air_batches_out_total",
                "Data frames (batches) the worker sent on the edge.",
                |c| &c.batches_out,
            ),
            (
                "air_watermarks_out_total",
                "Watermark frames the worker sent on the edge.",
                |c| &c.watermarks_out,
            ),
            (
                "air_records_in_total",
                "Records the worker received on the edge.",
                |c| &c.records_in,
            ),
            (
                "air_bytes_in_total",
                "Bytes of archived batches the worker received on the edge.",
                |c| &c.bytes_in,
            ),
            (
                "air_batches_in_total",
                "Data frames (batches) the worker received on the edge.",
                |c| &c.batches_in,
            ),
        ];
        for (name, help, get) in per_edge {
            family(&mut o, name, "counter", help);
            for w in &workers {
                for (e, c) in w.edges.iter().enumerate() {
                    let _ = writeln!(
                        o,
                        "{name}{{rank=\"{rank}\",worker=\"{}\",edge=\"{e}\"}} {}",
                        w.worker,
                        get(c).load(Ordering::Relaxed)
                    );
                }
            }
        }
        family(
            &mut o,
            "air_ring_full_waits_total",
            "counter",
            "Sends that found the destination ring full and waited (backpressure), by edge and \
             tier of the ring.",
        );
        for w in &workers {
            for (e, c) in w.edges.iter().enumerate() {
                for (t, tier) in TIERS.iter().enumerate() {
                    if w.tiers.get(e).is_some_and(|m| m & (1 << t) != 0) {
                        let _ = writeln!(
                            o,
                            "air_ring_full_waits_total{{rank=\"{rank}\",worker=\"{}\",edge=\"{e}\",tier=\"{tier}\"}} {}",
                            w.worker,
                            c.ring_full_waits[t].load(Ordering::Relaxed)
                        );
                    }
                }
            }
        }
        // Ring occupancy: edges with input rings at the worker.
        type Occ = fn(u64, u64) -> f64;
        let occupancy: [(&str, &str, Occ); 3] = [
            (
                "air_input_queued_bytes",
                "Bytes waiting in the worker's input rings of the edge (sent, not yet read), \
                 summed over the rings.",
                |q, _| q as f64,
            ),
            (
                "air_input_ring_bytes",
                "Capacity of the worker's input rings of the edge, bytes, summed.",
                |_, cap| cap as f64,
            ),
            (
                "air_input_ring_occupancy_ratio",
                "air_input_queued_bytes / air_input_ring_bytes: how full the worker's input \
                 rings of the edge are (0 to 1); near 1, its senders wait (backpressure).",
                |q, cap| q as f64 / cap as f64,
            ),
        ];
        for (name, help, value) in occupancy {
            family(&mut o, name, "gauge", help);
            for w in &workers {
                for (e, c) in w.edges.iter().enumerate() {
                    let cap = c.ring_bytes_in.load(Ordering::Relaxed);
                    if cap == 0 {
                        continue;
                    }
                    let q = c.queued_bytes_in.load(Ordering::Relaxed);
                    let _ = writeln!(
                        o,
                        "{name}{{rank=\"{rank}\",worker=\"{}\",edge=\"{e}\"}} {}",
                        w.worker,
                        value(q, cap)
                    );
                }
            }
        }
        // Watermarks: only edges whose inputs have one and have not all
        // ended (0 and u64::MAX are no event time).
        let marks: Vec<(usize, usize, u64)> = workers
            .iter()
            .flat_map(|w| {
                w.edges
                    .iter()
                    .enumerate()
                    .map(|(e, c)| (w.worker, e, c.watermark_ms.load(Ordering::Relaxed)))
            })
            .filter(|&(_, _, wm)| wm != 0 && wm != u64::MAX)
            .collect();
        family(
            &mut o,
            "air_watermark_seconds",
            "gauge",
            "Minimum watermark over the edge's inputs at the worker, seconds of event time.",
        );
        for &(w, e, wm) in &marks {
            let _ = writeln!(
                o,
                "air_watermark_seconds{{rank=\"{rank}\",worker=\"{w}\",edge=\"{e}\"}} {}",
                wm as f64 / 1000.0
            );
        }
        family(
            &mut o,
            "air_watermark_lag_seconds",
            "gauge",
            "Wall-clock time now minus the edge's watermark at the worker, seconds (meaningful \
             for wall-clock event times).",
        );
        for &(w, e, wm) in &marks {
            let _ = writeln!(
                o,
                "air_watermark_lag_seconds{{rank=\"{rank}\",worker=\"{w}\",edge=\"{e}\"}} {}",
                now_s - wm as f64 / 1000.0
            );
        }
        o
    }
}

/// Escapes a label value (backslash, double quote, line feed).
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Milliseconds since the Unix epoch now.
fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The `/proc/self/status` line `key` (a kB figure) in bytes; 0 if absent.
fn proc_status_bytes(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// What a worker counted of one edge so far, to publish.
pub(crate) struct EdgeSample<'a> {
    /// The sending side's counters.
    pub(crate) tx: &'a ChannelMetrics,
    /// Ring-full waits by tier (thread, node, network).
    pub(crate) full_by_tier: [u64; 3],
    /// The receiving side's counters.
    pub(crate) rx: &'a ChannelMetrics,
    /// The minimum input watermark, ms.
    pub(crate) watermark_ms: u64,
    /// The input rings' (queued bytes, capacity bytes), summed.
    pub(crate) occupancy: (u64, u64),
}

/// A worker's side of live metrics: its blocks, the values they held when
/// it started (so counters keep growing over several graphs), and when it
/// publishes next.
pub(crate) struct Publisher {
    live: Arc<WorkerLive>,
    base_worker: [u64; 8],
    base_edges: Vec<[u64; 10]>,
    next: Instant,
    /// Reused for the operators' counters at every publish.
    pub(crate) scratch: Stats,
}

impl Publisher {
    pub(crate) fn new(live: Arc<WorkerLive>) -> Self {
        let c = &live.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let base_worker = [
            l(&c.source_records),
            l(&c.late_records),
            l(&c.skipped_records),
            l(&c.window_rows),
            l(&c.windows_fired),
            l(&c.sink_rows),
            l(&c.hot_records),
            l(&c.hot_partials),
        ];
        let base_edges = live
            .edges
            .iter()
            .map(|e| {
                [
                    l(&e.records_out),
                    l(&e.bytes_out),
                    l(&e.batches_out),
                    l(&e.watermarks_out),
                    l(&e.records_in),
                    l(&e.bytes_in),
                    l(&e.batches_in),
                    l(&e.ring_full_waits[0]),
                    l(&e.ring_full_waits[1]),
                    l(&e.ring_full_waits[2]),
                ]
            })
            .collect();
        Publisher {
            live,
            base_worker,
            base_edges,
            next: Instant::now(),
            scratch: Stats::default(),
        }
    }

    /// Whether the next publish is due at `now`.
    #[inline]
    pub(crate) fn due(&self, now: Instant) -> bool {
        now >= self.next
    }

    /// Clears the scratch counters for the operators to report into.
    pub(crate) fn clear(&mut self) {
        self.scratch.counters.clear();
        self.scratch.maxima.clear();
        self.scratch.late.entries.clear();
        self.scratch.latency.reset();
    }

    /// Copies `edges` and the scratch counters into the shared blocks.
    pub(crate) fn publish(&mut self, now: Instant, edges: &[EdgeSample<'_>]) {
        self.next = now + PUBLISH_EVERY;
        let s = &self.scratch;
        let c = &self.live.counters;
        let b = &self.base_worker;
        let st = |a: &AtomicU64, v: u64| a.store(v, Ordering::Relaxed);
        st(&c.source_records, b[0] + s.get("source_records"));
        st(&c.late_records, b[1] + s.get("late_records"));
        st(&c.skipped_records, b[2] + s.get("skipped_records"));
        st(&c.window_rows, b[3] + s.get("window_rows"));
        st(&c.windows_fired, b[4] + s.get("windows_fired"));
        st(&c.sink_rows, b[5] + s.get("sink_rows"));
        st(&c.hot_records, b[6] + s.get("hot_records"));
        st(&c.hot_partials, b[7] + s.get("hot_partials"));
        for ((e, b), x) in self.live.edges.iter().zip(&self.base_edges).zip(edges) {
            st(&e.records_out, b[0] + x.tx.records_out);
            st(&e.bytes_out, b[1] + x.tx.bytes_out);
            st(&e.batches_out, b[2] + x.tx.batches_out);
            st(&e.watermarks_out, b[3] + x.tx.watermarks_out);
            st(&e.records_in, b[4] + x.rx.records_in);
            st(&e.bytes_in, b[5] + x.rx.bytes_in);
            st(&e.batches_in, b[6] + x.rx.batches_in);
            for t in 0..3 {
                st(&e.ring_full_waits[t], b[7 + t] + x.full_by_tier[t]);
            }
            st(&e.watermark_ms, x.watermark_ms);
            st(&e.queued_bytes_in, x.occupancy.0);
            st(&e.ring_bytes_in, x.occupancy.1);
        }
        st(&c.published_unix_ms, unix_ms());
    }
}

/// The HTTP endpoint of this process's live metrics (`GET /metrics`),
/// served by one thread until dropped.
pub struct MetricsServer {
    server: Arc<tiny_http::Server>,
    addr: SocketAddr,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for MetricsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsServer")
            .field("addr", &self.addr)
            .finish()
    }
}

impl MetricsServer {
    /// Binds `addr` (a `HOST:PORT` that resolves; port 0: any free port,
    /// see [`MetricsServer::local_addr`]), installs an empty registry of
    /// rank `rank` as the process's ([`current`]) and starts serving it.
    ///
    /// # Errors
    /// The address does not resolve or cannot be bound (in use, not
    /// local), or another server runs in this process.
    pub fn start(addr: &str, rank: usize) -> Result<MetricsServer, String> {
        let mut cur = CURRENT.lock().unwrap_or_else(|e| e.into_inner());
        if cur.is_some() {
            return Err("a metrics server already runs in this process".into());
        }
        let server = tiny_http::Server::http(addr).map_err(|e| e.to_string())?;
        let bound = server
            .server_addr()
            .to_ip()
            .ok_or("the server is not on an IP address")?;
        let server = Arc::new(server);
        let registry = Arc::new(LiveMetrics::new(rank));
        *cur = Some(registry.clone());
        let s = server.clone();
        let thread = std::thread::Builder::new()
            .name("air-metrics".into())
            .spawn(move || serve(&s, &registry))
            .map_err(|e| {
                *cur = None;
                format!("cannot start the metrics thread: {e}")
            })?;
        Ok(MetricsServer {
            server,
            addr: bound,
            thread: Some(thread),
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        *CURRENT.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Answers requests until the server is unblocked: `GET /metrics` (or
/// `HEAD`) with the exposition, anything else 404 or 405.
fn serve(server: &tiny_http::Server, registry: &LiveMetrics) {
    for req in server.incoming_requests() {
        let path = req.url().split('?').next().unwrap_or("");
        let get = matches!(
            req.method(),
            tiny_http::Method::Get | tiny_http::Method::Head
        );
        let resp = if path != "/metrics" {
            tiny_http::Response::from_string("not found: the metrics are at /metrics\n")
                .with_status_code(404)
        } else if !get {
            tiny_http::Response::from_string("method not allowed\n").with_status_code(405)
        } else {
            let ct = tiny_http::Header::from_bytes(
                &b"Content-Type"[..],
                &b"text/plain; version=0.0.4; charset=utf-8"[..],
            )
            .expect("a valid header");
            tiny_http::Response::from_string(registry.render()).with_header(ct)
        };
        // A client that went away is no concern of the job.
        let _ = req.respond(resp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_whole_cache_line_pairs() {
        assert_eq!(std::mem::align_of::<WorkerCounters>(), 128);
        assert_eq!(std::mem::align_of::<EdgeCounters>(), 128);
        let live = LiveMetrics::new(0);
        let w = live.register(3, &["a".into(), "b".into()], vec![1, 1]);
        assert_eq!(w.edges.as_ptr() as usize % 128, 0);
        assert_eq!(
            w.edges[1].records_out.as_ptr() as usize - w.edges[0].records_out.as_ptr() as usize,
            128
        );
    }

    /// Counters keep growing over two graphs with the same edges, restart
    /// with other edges; the text names every family once, with HELP and
    /// TYPE before its samples.
    #[test]
    fn publish_render_and_reregister() {
        let live = LiveMetrics::new(2);
        let names = vec!["exchange".to_string()];
        let mut p = Publisher::new(live.register(5, &names, vec![0b101]));
        let tx = ChannelMetrics {
            records_out: 10,
            ring_full_waits: 2,
            ..Default::default()
        };
        let rx = ChannelMetrics {
            records_in: 7,
            ..Default::default()
        };
        p.clear();
        p.scratch.add("source_records", 40);
        p.scratch.add("hot_records", 9);
        let wm = unix_ms() - 1500;
        let e = [EdgeSample {
            tx: &tx,
            full_by_tier: [1, 0, 1],
            rx: &rx,
            watermark_ms: wm,
            occupancy: (1024, 4096),
        }];
        p.publish(Instant::now(), &e);
        assert!(!p.due(Instant::now()));
        let text = live.render();
        assert!(
            text.contains("air_source_records_total{rank=\"2\",worker=\"5\"} 40\n"),
            "{text}"
        );
        assert!(
            text.contains("air_hot_records_total{rank=\"2\",worker=\"5\"} 9\n"),
            "{text}"
        );
        assert!(text.contains("air_records_out_total{rank=\"2\",worker=\"5\",edge=\"0\"} 10\n"));
        assert!(text.contains("air_records_in_total{rank=\"2\",worker=\"5\",edge=\"0\"} 7\n"));
        assert!(text.contains(
            "air_ring_full_waits_total{rank=\"2\",worker=\"5\",edge=\"0\",tier=\"network\"} 1\n"
        ));
        assert!(!text.contains("tier=\"node\""), "{text}");
        assert!(text.contains("air_edge_info{rank=\"2\",edge=\"0\",name=\"exchange\"} 1\n"));
        assert!(text.contains("air_input_queued_bytes{rank=\"2\",worker=\"5\",edge=\"0\"} 1024\n"));
        assert!(text.contains("air_input_ring_bytes{rank=\"2\",worker=\"5\",edge=\"0\"} 4096\n"));
        assert!(
            text.contains(
                "air_input_ring_occupancy_ratio{rank=\"2\",worker=\"5\",edge=\"0\"} 0.25\n"
            ),
            "{text}"
        );
        let lag = text
            .lines()
            .find_map(|l| {
                l.strip_prefix("air_watermark_lag_seconds{rank=\"2\",worker=\"5\",edge=\"0\"} ")
            })
            .and_then(|v| v.parse::<f64>().ok())
            .expect("a lag line");
        assert!((1.4..10.0).contains(&lag), "{lag}");
        assert!(text.contains("air_peak_resident_bytes{rank=\"2\"} "));
        assert!(!text.contains("air_peak_resident_bytes{rank=\"2\"} 0\n"));
        for fam in ["air_records_out_total", "air_watermark_seconds"] {
            assert_eq!(text.matches(&format!("# TYPE {fam} ")).count(), 1);
        }
        // Same edges: the next graph's worker starts from what was published.
        let mut p2 = Publisher::new(live.register(5, &names, vec![0b101]));
        p2.clear();
        p2.scratch.add("source_records", 2);
        p2.publish(Instant::now(), &e);
        assert!(live
            .render()
            .contains("air_source_records_total{rank=\"2\",worker=\"5\"} 42\n"));
        // Other edges: new blocks.
        let w = live.register(5, &["other".to_string()], vec![1]);
        assert_eq!(w.counters.source_records.load(Ordering::Relaxed), 0);
    }

    /// A real server on a free port answers /metrics, 404 elsewhere, and
    /// refuses a second server in the process and a port in use.
    #[test]
    fn server_serves_and_refuses_a_busy_port() {
        let s = MetricsServer::start("127.0.0.1:0", 0).unwrap();
        assert!(current().is_some());
        let addr = s.local_addr();
        let get = |path: &str| {
            use std::io::{Read, Write};
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            write!(
                c,
                "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            )
            .unwrap();
            let mut r = String::new();
            c.read_to_string(&mut r).unwrap();
            r
        };
        let ok = get("/metrics");
        assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
        assert!(ok.contains("text/plain; version=0.0.4"), "{ok}");
        assert!(ok.contains("# TYPE air_workers gauge"), "{ok}");
        assert!(get("/").starts_with("HTTP/1.1 404"));
        assert!(MetricsServer::start("127.0.0.1:0", 0).is_err());
        drop(s);
        assert!(current().is_none());
        let hold = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let taken = hold.local_addr().unwrap().to_string();
        let err = MetricsServer::start(&taken, 0).unwrap_err();
        assert!(err.to_lowercase().contains("in use"), "{err}");
    }
}
