//! `air bench ring`: the frame ring against crossbeam-channel, rtrb and the
//! machine's own roofs, on one pair of CPUs, in one run.
//!
//! # What is measured
//!
//! - **Throughput** for each frame size (default every power of two from 8 B
//!   to 1 MiB), thread-to-thread and process-to-process: one producer streams
//!   frames to one consumer for `--duration-ms`; each measurement is repeated
//!   `--repeats` times (contenders interleaved, so drift of the host hits them
//!   alike) and the median is reported, in MB/s (10^6 payload bytes per
//!   second) and frames/s.
//!   The consumer times each run from the end of the first lap (once every
//!   slot of the channel was used once: no first-touch page faults inside the
//!   figure) to the end of the stream. Before each repeat a short cache-line
//!   ping-pong probe is taken and its one-way p50 printed beside the rows
//!   (`line ns`): the host may move the vCPUs, and every cross-core figure
//!   follows that time. `% runq` is the share of the run the two threads
//!   waited for a CPU (from `/proc/thread-self/schedstat`): other work on the
//!   same CPUs shows there.
//! - **One-way latency**: half the round trip of an 8-byte ping-pong over two
//!   channels (one each way), as p50 / p99 / p99.9 / max in ns, from an
//!   HdrHistogram of `--latency-iters` round trips (in `--repeats` interleaved
//!   rounds). The median cost of `Instant::now()` is measured, printed and
//!   subtracted from every round trip.
//!
//! # Same work for everyone
//!
//! Per frame the producer stamps the frame number into its source buffer and
//! copies the `n` bytes into the channel (the ring: in place, into the
//! reserved frame); the consumer copies the `n` bytes out into a destination
//! buffer and checks the stamp. Every side busy-polls (the ring with
//! `WaitPolicy::SPIN`, the others with `try_*` in a spin loop).
//!
//! Memory budget: every channel holds the same number of frames, as many as
//! fill `--ring-bytes` (default 1 MiB) of ring (`16 + round_up(n, 16)` bytes a
//! frame), at least 16: the ring's data area is that many frames,
//! crossbeam-channel is `bounded(frames)`, rtrb holds `frames * n` bytes. The
//! copy roof has 16 slots of `n` bytes. Ping-pong channels hold 64 frames.
//!
//! # Contenders
//!
//! - `ring`: the frame ring, batched: `commit_deferred` and one `publish` per
//!   `min(64, ⌈4096 / frame⌉)` frames, `release_deferred` and one
//!   `release_pending` per as many.
//! - `ring-frame`: the frame ring, `commit` and `release` per frame.
//! - `ring-unpinned`: `ring` with neither thread pinned (the scheduler
//!   places them inside this process's CPU set): pinned vs unpinned core
//!   pairs in the same run. Threads only.
//! - `crossbeam`: crossbeam-channel `bounded`; by-value `[u8; n]` arrays for
//!   powers of two up to 4 KiB, recycled `Vec<u8>` buffers (sent back on a
//!   second channel, no allocation on the hot path) otherwise. Threads only.
//! - `rtrb`: a `RingBuffer<u8>`, one `write_chunk_uninit(n)` / `read_chunk(n)`
//!   per frame; in the ping-pong, `push` / `pop` of a `u64`. Threads only.
//! - `copy-roof`: 16 fixed slots with one flag each (own cache line): the
//!   producer copies a frame into a free slot, the consumer copies it out. No
//!   ring logic: what moving `n` bytes across the two cores costs.
//! - `cache-line`: the latency roof: one `AtomicU64` each way, each in its
//!   own 128-byte line.
//!
//! Process mode: the binary re-executes itself as the consumer (or echo
//! server); the peer creates the segments, the parent opens them. The ring
//! and both roofs run over `/dev/shm` segments there; no segment is left
//! behind. crossbeam-channel and rtrb cannot cross processes.

mod latency;
mod process;
mod report;
mod throughput;
pub(crate) mod util;

use anyhow::{Context, Result};
use core_affinity::CoreId;
use report::{Contender, LatencyRow, Results, ThroughputRow, Where};
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub use process::PeerRole;
pub use report::register_fonts;

/// Which placements to measure.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Two threads of this process.
    Thread,
    /// Two processes over `/dev/shm` (ring and roofs only).
    Process,
    /// Both, threads first.
    Both,
}

/// A family of contenders for `--only`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Only {
    /// The frame ring (batched and per frame).
    Ring,
    /// crossbeam-channel.
    Crossbeam,
    /// rtrb.
    Rtrb,
    /// The copy roof and the cache-line ping-pong.
    Roof,
    /// The ring with neither thread pinned (threads only): pinned vs
    /// unpinned in the same run.
    Unpinned,
}

/// Arguments of `air bench ring`.
#[derive(clap::Args, Debug, Clone)]
pub struct RingBenchArgs {
    /// Frame payload sizes: a range `A..B` (A, 2A, 4A, … up to B; powers of
    /// two when A is one) or a list `64,4K,1M`.
    #[arg(long, default_value = "8..1M")]
    pub sizes: String,
    /// Length of one throughput measurement, in milliseconds.
    #[arg(long, default_value_t = 40)]
    pub duration_ms: u64,
    /// Runs per measurement; the median is reported.
    #[arg(long, default_value_t = 5)]
    pub repeats: usize,
    /// Threads, processes, or both.
    #[arg(long, value_enum, default_value_t = Mode::Both)]
    pub mode: Mode,
    /// Round trips per latency contender and mode (0: no latency runs).
    #[arg(long, default_value_t = 100_000)]
    pub latency_iters: u64,
    /// Skip the throughput runs.
    #[arg(long)]
    pub no_throughput: bool,
    /// Measure only these contenders (comma-separated; default all).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub only: Vec<Only>,
    /// Producer and consumer CPUs, `A,B` (default: the first two CPUs this
    /// process may use).
    #[arg(long)]
    pub cores: Option<String>,
    /// Memory budget of a channel: frames that fill this much ring (at least
    /// 16). Same frame count for every contender.
    #[arg(long, default_value = "1M")]
    pub ring_bytes: String,
    /// Write every result to this CSV file.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Draw throughput against frame size to this PNG file.
    #[arg(long)]
    pub plot: Option<PathBuf>,

    /// Internal: run as a peer process with this role.
    #[arg(long, value_enum, hide = true)]
    pub peer_role: Option<PeerRole>,
    /// Internal: the peer's channel name.
    #[arg(long, hide = true, default_value = "")]
    pub peer_channel: String,
    /// Internal: the peer's frame size in bytes.
    #[arg(long, hide = true, default_value_t = 0)]
    pub peer_size: usize,
    /// Internal: the peer's ring data area in bytes.
    #[arg(long, hide = true, default_value_t = 0)]
    pub peer_capacity: usize,
    /// Internal: the peer's frames per credit return.
    #[arg(long, hide = true, default_value_t = 1)]
    pub peer_batch: usize,
    /// Internal: the pid the peer expects as its parent.
    #[arg(long, hide = true, default_value_t = 0)]
    pub peer_parent: u32,
}

impl RingBenchArgs {
    fn wants(&self, o: Only) -> bool {
        self.only.is_empty() || self.only.contains(&o)
    }
}

/// Runs `air bench ring` (or, with `--peer-role`, one peer process of it).
pub fn run(args: RingBenchArgs) -> Result<()> {
    // Read the CPU set before anything is pinned.
    let allowed = core_affinity::get_core_ids().context("cannot read this process's CPU set")?;
    let cores = util::choose_cores(args.cores.as_deref(), &allowed)?;
    if let Some(role) = args.peer_role {
        let spec = process::PeerSpec {
            role,
            channel: args.peer_channel.clone(),
            size: args.peer_size,
            capacity: args.peer_capacity,
            batch: args.peer_batch.max(1),
            parent: args.peer_parent,
        };
        return process::run_peer(&spec, cores.1);
    }
    Bench::new(args, cores, allowed.len())?.run()
}

struct Bench {
    args: RingBenchArgs,
    cores: (CoreId, CoreId),
    sizes: Vec<usize>,
    budget: usize,
    dur: Duration,
    timer_ns: u64,
    res: Results,
}

impl Bench {
    fn new(args: RingBenchArgs, cores: (CoreId, CoreId), ncpus: usize) -> Result<Bench> {
        let sizes = util::parse_sizes(&args.sizes)?;
        let budget = util::parse_size(&args.ring_bytes).context("--ring-bytes")?;
        if budget < 16 {
            anyhow::bail!(
                "--ring-bytes {}: a channel needs at least 16 bytes",
                args.ring_bytes
            );
        }
        if args.repeats == 0 {
            anyhow::bail!("--repeats must be at least 1");
        }
        if args.duration_ms == 0 {
            anyhow::bail!("--duration-ms must be at least 1");
        }
        let timer_ns = util::timer_overhead_ns();
        println!(
            "# air bench ring: {}, {} CPUs allowed; producer CPU {} -> consumer CPU {}; \
             clocksource {}; load average {}",
            util::cpu_model(),
            ncpus,
            cores.0.id,
            cores.1.id,
            util::clocksource(),
            util::loadavg()
        );
        println!(
            "# per frame: producer stamps + copies n bytes in (ring: in place), consumer copies \
             n bytes out + checks; all sides busy-poll"
        );
        println!(
            "# budget: frames filling {} of ring (>= 16) for ring, crossbeam, rtrb; copy roof: \
             16 slots; ring batches publish/release every min(64, ceil(4K/frame)) frames",
            util::human_size(budget)
        );
        println!(
            "# throughput: median of {} runs x {} ms; MB/s = 10^6 payload bytes/s; \
             % roof = median over repeats of frames/s / copy-roof frames/s of the same repeat",
            args.repeats.max(1),
            args.duration_ms
        );
        println!(
            "# line ns = one-way p50 of a quick cache-line ping-pong probe taken before each \
             repeat (median): the host may move the vCPUs, and throughput follows it"
        );
        if args.wants(Only::Unpinned) && args.mode != Mode::Process {
            println!(
                "# ring-unpinned: the batched ring with neither thread pinned (the scheduler \
                 places them within the {ncpus} allowed CPUs; the CPUs above and line ns \
                 apply to the pinned rows)"
            );
        }
        println!(
            "# % runq = time the two sides waited for a CPU while runnable, over their run \
             time (~0 on a quiet machine; more: other work shared the CPUs)"
        );
        Ok(Bench {
            dur: Duration::from_millis(args.duration_ms.max(1)),
            args,
            cores,
            sizes,
            budget,
            timer_ns,
            res: Results::default(),
        })
    }

    fn run(mut self) -> Result<()> {
        let start = Instant::now();
        let modes: &[Where] = match self.args.mode {
            Mode::Thread => &[Where::Thread],
            Mode::Process => &[Where::Process],
            Mode::Both => &[Where::Thread, Where::Process],
        };
        for &mode in modes {
            if !self.args.no_throughput {
                self.throughput(mode)?;
            }
            if self.args.latency_iters > 0 {
                self.latency(mode)?;
            }
        }
        if self.args.wants(Only::Unpinned)
            && !self.args.only.is_empty()
            && self.args.mode == Mode::Process
        {
            println!("# (ring-unpinned runs in thread mode only: --mode thread or both)");
        }
        println!();
        println!("# Targets (issue 2) and comparisons, measured in this run:");
        for l in report::targets(&self.res) {
            println!("#   {l}");
        }
        let bad: u64 = self.res.throughput.iter().map(|r| r.bad).sum();
        if bad > 0 {
            println!("# WARNING: {bad} frames arrived with a wrong stamp or length");
        }
        let mut displaced = util::Displaced::default();
        for d in self.res.throughput.iter().map(|r| r.displaced) {
            displaced.add(d);
        }
        for d in self.res.latency.iter().map(|r| r.displaced) {
            displaced.add(d);
        }
        println!(
            "# the benchmark threads waited for a CPU {:.2}% of their time{}",
            displaced.pct(),
            if displaced.pct() > 1.0 {
                ": other work shared these CPUs, so some figures are low (see % runq)"
            } else {
                ""
            }
        );
        println!("# total time {:.1} s", start.elapsed().as_secs_f64());
        if let Some(p) = &self.args.csv {
            report::write_csv(&self.res, p)?;
            println!("# CSV: {}", p.display());
        }
        if let Some(p) = &self.args.plot {
            let title = format!(
                "air bench ring: throughput vs frame size (CPU {} -> {})",
                self.cores.0.id, self.cores.1.id
            );
            report::write_plot(&self.res, p, &title)?;
            println!("# plot: {}", p.display());
        }
        if bad > 0 {
            anyhow::bail!("{bad} frames arrived corrupted");
        }
        Ok(())
    }

    fn contenders(&self, mode: Where) -> Vec<Contender> {
        let mut v = Vec::new();
        if self.args.wants(Only::Ring) {
            v.extend([Contender::Ring, Contender::RingFrame]);
        }
        if mode == Where::Thread && self.args.wants(Only::Unpinned) {
            v.push(Contender::RingUnpinned);
        }
        if mode == Where::Thread && self.args.wants(Only::Crossbeam) {
            v.push(Contender::Crossbeam);
        }
        if mode == Where::Thread && self.args.wants(Only::Rtrb) {
            v.push(Contender::Rtrb);
        }
        if self.args.wants(Only::Roof) {
            v.push(Contender::CopyRoof);
        }
        v
    }

    fn one_run(&self, mode: Where, c: Contender, n: usize) -> Result<throughput::Sample> {
        use throughput as t;
        let (cores, dur, b) = (self.cores, self.dur, self.budget);
        let cap = t::ring_capacity(n, b);
        let frames = t::budget_frames(n, b);
        match (mode, c) {
            (Where::Thread, Contender::Ring) => {
                t::ring_threads(cores, n, cap, t::ring_batch(n), dur)
            }
            (Where::Thread, Contender::RingFrame) => t::ring_threads(cores, n, cap, 1, dur),
            (Where::Thread, Contender::RingUnpinned) => {
                util::unpinned(|| t::ring_threads(cores, n, cap, t::ring_batch(n), dur))
            }
            (Where::Thread, Contender::Crossbeam) => t::crossbeam_threads(cores, n, frames, dur),
            (Where::Thread, Contender::Rtrb) => t::rtrb_threads(cores, n, frames, dur),
            (Where::Thread, Contender::CopyRoof) => t::roof_threads(cores, n, dur),
            (Where::Process, Contender::Ring) => {
                process::ring_process(cores, n, cap, t::ring_batch(n), dur)
            }
            (Where::Process, Contender::RingFrame) => process::ring_process(cores, n, cap, 1, dur),
            (Where::Process, Contender::CopyRoof) => process::roof_process(cores, n, dur),
            (m, c) => anyhow::bail!("no {} run in {} mode", c.label(), m.label()),
        }
        .with_context(|| format!("{} {} {} B", m_label(mode), c.label(), n))
    }

    fn throughput(&mut self, mode: Where) -> Result<()> {
        let contenders = self.contenders(mode);
        if contenders.is_empty() {
            return Ok(());
        }
        println!();
        println!(
            "# {} throughput",
            match mode {
                Where::Thread => "Thread-to-thread",
                Where::Process => "Process-to-process",
            }
        );
        println!("{}", report::throughput_header());
        let repeats = self.args.repeats.max(1);
        for &n in &self.sizes.clone() {
            let mut rates = vec![Vec::new(); contenders.len()];
            let mut bad = vec![0u64; contenders.len()];
            let mut ctx = vec![util::Displaced::default(); contenders.len()];
            let mut line = Vec::new();
            for _ in 0..repeats {
                line.push(self.line_probe()?);
                for (k, &c) in contenders.iter().enumerate() {
                    let s = self.one_run(mode, c, n)?;
                    rates[k].push(s.frames_per_s());
                    bad[k] += s.bad;
                    ctx[k].add(s.displaced);
                }
            }
            let line_ns = util::median(line);
            let rows: Vec<ThroughputRow> = contenders
                .iter()
                .enumerate()
                .map(|(k, &c)| ThroughputRow {
                    mode,
                    contender: c,
                    size: n,
                    frames_per_s: util::median(rates[k].clone()),
                    samples: rates[k].clone(),
                    runs: repeats,
                    bad: bad[k],
                    displaced: ctx[k],
                    line_ns,
                })
                .collect();
            let roof = rows
                .iter()
                .find(|r| r.contender == Contender::CopyRoof)
                .cloned();
            for r in &rows {
                println!("{}", report::throughput_line(r, roof.as_ref()));
            }
            self.res.throughput.extend(rows);
        }
        Ok(())
    }

    /// A quick cache-line ping-pong between the two CPUs (thread to thread):
    /// its one-way p50 in ns. The host may move the vCPUs at any time, and
    /// every cross-core figure follows this one.
    fn line_probe(&self) -> Result<f64> {
        let rounds = latency::Rounds {
            total: 3000,
            warmup: 500,
            timer_ns: self.timer_ns,
        };
        let (h, _) = latency::lines_threads(self.cores, rounds).context("cache-line probe")?;
        Ok(h.value_at_quantile(0.5) as f64 / 2.0)
    }

    fn latency(&mut self, mode: Where) -> Result<()> {
        let mut cs = Vec::new();
        if self.args.wants(Only::Ring) {
            cs.push(Contender::Ring);
        }
        if mode == Where::Thread && self.args.wants(Only::Unpinned) {
            cs.push(Contender::RingUnpinned);
        }
        if mode == Where::Thread && self.args.wants(Only::Crossbeam) {
            cs.push(Contender::Crossbeam);
        }
        if mode == Where::Thread && self.args.wants(Only::Rtrb) {
            cs.push(Contender::Rtrb);
        }
        if self.args.wants(Only::Roof) {
            cs.push(Contender::CacheLine);
        }
        if cs.is_empty() {
            return Ok(());
        }
        let rounds_n = self.args.repeats.max(1) as u64;
        let per = self.args.latency_iters.div_ceil(rounds_n).max(1);
        let rounds = latency::Rounds {
            total: per + (per / 10).max(1000),
            warmup: (per / 10).max(1000),
            timer_ns: self.timer_ns,
        };
        let mut hists: Vec<_> = cs.iter().map(|_| latency::new_histogram()).collect();
        let mut ctx = vec![util::Displaced::default(); cs.len()];
        for _ in 0..rounds_n {
            for (k, &c) in cs.iter().enumerate() {
                let cores = self.cores;
                let (h, displaced) = match (mode, c) {
                    (Where::Thread, Contender::Ring) => latency::ring_threads(cores, rounds),
                    (Where::Thread, Contender::RingUnpinned) => {
                        util::unpinned(|| latency::ring_threads(cores, rounds))
                    }
                    (Where::Thread, Contender::Crossbeam) => {
                        latency::crossbeam_threads(cores, rounds)
                    }
                    (Where::Thread, Contender::Rtrb) => latency::rtrb_threads(cores, rounds),
                    (Where::Thread, _) => latency::lines_threads(cores, rounds),
                    (Where::Process, Contender::Ring) => {
                        process::ring_latency_process(cores, rounds)
                    }
                    (Where::Process, _) => process::lines_latency_process(cores, rounds),
                }
                .with_context(|| format!("{} {} ping-pong", m_label(mode), c.label()))?;
                hists[k].add(&h).context("merging histograms")?;
                ctx[k].add(displaced);
            }
        }
        println!();
        println!(
            "# {} one-way latency (ns): half round trip of an {}-byte ping-pong; \
             Instant::now() overhead {} ns subtracted per round trip",
            match mode {
                Where::Thread => "Thread-to-thread",
                Where::Process => "Process-to-process",
            },
            latency::PINGPONG_BYTES,
            self.timer_ns
        );
        println!("{}", report::latency_header());
        for (k, &c) in cs.iter().enumerate() {
            let h = &hists[k];
            let half = |q: f64| h.value_at_quantile(q) as f64 / 2.0;
            let row = LatencyRow {
                mode,
                contender: c,
                size: latency::PINGPONG_BYTES,
                p50_ns: half(0.5),
                p99_ns: half(0.99),
                p999_ns: half(0.999),
                max_ns: h.max() as f64 / 2.0,
                rounds: h.len(),
                displaced: ctx[k],
            };
            println!("{}", report::latency_line(&row));
            self.res.latency.push(row);
        }
        Ok(())
    }
}

fn m_label(m: Where) -> &'static str {
    m.label()
}
