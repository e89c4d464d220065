//! `air bench rma` (feature `mpi`, under `mpirun -np 2`): the network tier's
//! remote ring against MPI's own two-sided messaging, OSU-style, in one run.
//!
//! For each payload size (default every power of two from 8 B to 4 MiB),
//! rank 0 sends to rank 1:
//!
//! - **ring MB/s**: frames streamed through an [`RmaProducer`] /
//!   [`RmaConsumer`] pair (rank 1's window holds the ring, of `--ring-bytes`
//!   — default 1 MiB, the runtime's ring size — or 2 frames, whichever is
//!   larger; MPI's streaming keeps up to 8 MiB of buffers in flight) for
//!   `--duration-ms`, publishing every
//!   `max(1, 256 KiB / frame)` frames (and whenever the ring is full).
//! - **isend MB/s**: `MPI_Isend` / `MPI_Irecv` streaming as in OSU's
//!   `osu_bw`: windows of `min(64, max(1, 8 MiB / size))` messages, the
//!   receiver acknowledging each window, for `--duration-ms`.
//! - **ring µs / sendrecv µs**: one-way latency, half the median round trip
//!   of a ping-pong of one payload (ring: one frame each way, published at
//!   once; two-sided: blocking `MPI_Send` / `MPI_Recv`).
//!
//! Same work for everyone, as the runtime uses each channel: per message the
//! sender writes the `n` payload bytes once (the ring: in place, into the
//! frame it reserved; MPI: into its send buffer) and the receiver reads all
//! `n` once (the ring: in place, in its window; MPI: in its receive buffer),
//! summing them so the reads are not optimized away.
//!
//! Each figure is the median of `--repeats` runs, kinds interleaved so drift
//! of the host hits them alike. MB/s is 10^6 payload bytes per second.

use crate::ring_bench::util::{cpu_model, human_size, median, parse_size, parse_sizes};
use air_rdma::{
    heartbeat_bytes, ring_region_bytes, Liveness, Mpi, RmaConsumer, RmaProducer, Window,
    CREDIT_BYTES,
};
use air_shm::{frame_size, FrameKind};
use anyhow::{anyhow, bail, Result};
use mpi::point_to_point::{Destination, Source};
use mpi::topology::Communicator;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Arguments of `air bench rma`.
#[derive(clap::Args, Debug, Clone)]
pub struct RmaBenchArgs {
    /// Payload sizes: a range `A..B` (A, 2A, 4A, … up to B) or a list `64,4K,1M`.
    #[arg(long, default_value = "8..4M")]
    pub sizes: String,
    /// Length of one bandwidth measurement, ms.
    #[arg(long, default_value_t = 200)]
    pub duration_ms: u64,
    /// Runs per measurement; the median is reported.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Round trips per latency measurement at 4 KiB and below (fewer above:
    /// scaled down with the size, at least 20).
    #[arg(long, default_value_t = 2000)]
    pub latency_iters: u64,
    /// Data area of the remote ring (at least 2 frames of the size
    /// measured); default: the runtime's default ring size.
    #[arg(long, default_value = "1M")]
    pub ring_bytes: String,
    /// Write the rows to this CSV file (rank 0).
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Draw bandwidth and latency against size to this PNG file (rank 0).
    #[arg(long)]
    pub plot: Option<PathBuf>,
}

/// One size's figures.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RmaRow {
    /// Payload bytes.
    pub size: usize,
    /// Remote ring streaming bandwidth, MB/s.
    pub ring_mb_s: f64,
    /// Remote ring frames per second.
    pub ring_frames_s: f64,
    /// MPI_Isend/MPI_Irecv streaming bandwidth, MB/s.
    pub isend_mb_s: f64,
    /// Remote ring one-way latency (half the median round trip), µs.
    pub ring_lat_us: f64,
    /// MPI_Send/MPI_Recv one-way latency (half the median round trip), µs.
    pub sendrecv_lat_us: f64,
}

const PUBLISH_BYTES: usize = 256 << 10;

/// Runs `air bench rma` on this rank (both ranks call it).
pub fn run(args: &RmaBenchArgs, mpi: &Mpi) -> Result<()> {
    if mpi.size() != 2 {
        bail!(
            "air bench rma runs on exactly 2 ranks (`mpirun -np 2 air bench rma`), not {}",
            mpi.size()
        );
    }
    let sizes = parse_sizes(&args.sizes)?;
    let ring_bytes = parse_size(&args.ring_bytes)?;
    if args.repeats == 0 || args.duration_ms == 0 {
        bail!("--repeats and --duration-ms must be positive");
    }
    let me = mpi.rank();
    if me == 0 {
        println!(
            "# air bench rma: {}, {} ranks on {} node(s) ({}), {}",
            mpi.library(),
            mpi.size(),
            mpi.nodes(),
            (0..2)
                .map(|r| mpi.host_of(r))
                .collect::<Vec<_>>()
                .join(", "),
            cpu_model()
        );
        println!(
            "# {:>8} {:>11} {:>13} {:>11} {:>7} {:>10} {:>13}",
            "size", "ring MB/s", "ring frames/s", "isend MB/s", "ratio", "ring µs", "sendrecv µs"
        );
    }
    let mut rows = Vec::new();
    for &n in &sizes {
        let cap = ring_bytes.max(2 * frame_size(n)).next_multiple_of(16);
        let mut ring = Vec::new();
        let mut isend = Vec::new();
        let mut ring_lat = Vec::new();
        let mut sr_lat = Vec::new();
        let iters = (args.latency_iters * 4096 / n.max(4096) as u64).max(20);
        for _ in 0..args.repeats {
            ring.push(ring_stream(mpi, n, cap, args.duration_ms)?);
            isend.push(isend_stream(mpi, n, args.duration_ms));
            ring_lat.push(ring_pingpong(mpi, n, cap, iters)?);
            sr_lat.push(sendrecv_pingpong(mpi, n, iters));
        }
        let ring_mb = median(ring);
        let row = RmaRow {
            size: n,
            ring_mb_s: ring_mb,
            ring_frames_s: ring_mb * 1e6 / n as f64,
            isend_mb_s: median(isend),
            ring_lat_us: median(ring_lat),
            sendrecv_lat_us: median(sr_lat),
        };
        if me == 0 {
            println!(
                "  {:>8} {:>11.1} {:>13.0} {:>11.1} {:>6.2}x {:>10.2} {:>13.2}",
                human_size(n),
                row.ring_mb_s,
                row.ring_frames_s,
                row.isend_mb_s,
                row.ring_mb_s / row.isend_mb_s.max(1e-9),
                row.ring_lat_us,
                row.sendrecv_lat_us
            );
        }
        rows.push(row);
    }
    if me == 0 {
        let big: Vec<&RmaRow> = rows.iter().filter(|r| r.size >= 64 << 10).collect();
        if !big.is_empty() {
            let worst = big
                .iter()
                .map(|r| r.ring_mb_s / r.isend_mb_s.max(1e-9))
                .fold(f64::INFINITY, f64::min);
            println!(
                "# target: ring >= Isend/Irecv bandwidth for frames >= 64 KiB: worst ratio {worst:.2}x ({})",
                if worst >= 1.0 { "met" } else { "MISSED" }
            );
        }
        if let Some(p) = &args.csv {
            let mut w = csv::Writer::from_path(p).map_err(|e| anyhow!("{}: {e}", p.display()))?;
            for r in &rows {
                w.serialize(r)?;
            }
            w.flush()?;
        }
        if let Some(p) = &args.plot {
            plot(
                &rows,
                p,
                &format!("remote ring vs MPI two-sided ({})", mpi.library()),
            )?;
        }
    }
    Ok(())
}

/// A window holding one ring from the peer (in) and the credit slot of the
/// ring to the peer (out); the same layout on both ranks.
struct Pair {
    ring_at: usize,
    credit_at: usize,
    bytes: usize,
}

fn pair(mpi: &Mpi, cap: usize) -> Pair {
    let ring_at = heartbeat_bytes(mpi.size()).next_multiple_of(128);
    let credit_at = ring_at + ring_region_bytes(cap);
    Pair {
        ring_at,
        credit_at,
        bytes: credit_at + CREDIT_BYTES,
    }
}

fn rdma(e: air_rdma::RdmaError) -> anyhow::Error {
    anyhow!("{e}")
}

/// The sender's per-message work: writes all of `buf`.
#[inline]
fn produce(buf: &mut [u8], i: u64) {
    buf.fill(i as u8);
}

/// The receiver's per-message work: reads all of `buf`.
#[inline]
fn consume(buf: &[u8]) -> u64 {
    let mut sum = 0u64;
    let mut chunks = buf.chunks_exact(8);
    for c in &mut chunks {
        sum = sum.wrapping_add(u64::from_le_bytes(c.try_into().unwrap_or([0; 8])));
    }
    chunks
        .remainder()
        .iter()
        .fold(sum, |s, &b| s.wrapping_add(b as u64))
}

/// Sends one frame of `n` bytes written in place, publishing when `publish`
/// (and whenever the ring is full).
fn send_frame(
    tx: &mut RmaProducer<'_>,
    kind: FrameKind,
    n: usize,
    i: u64,
    publish: bool,
) -> Result<()> {
    loop {
        let sent = tx
            .try_send(kind, n, &mut |buf| {
                produce(&mut buf[..n], i);
                Some(n)
            })
            .map_err(rdma)?;
        if sent {
            break;
        }
        tx.flush().map_err(rdma)?;
    }
    if publish {
        tx.flush().map_err(rdma)?;
    }
    Ok(())
}

/// Receives one frame and reads its payload in place; returns its kind.
fn recv_frame(rx: &mut RmaConsumer<'_>, sink: &mut u64) -> Result<FrameKind> {
    loop {
        let mut kind = FrameKind::Data;
        let got = rx
            .try_recv(&mut |k, p| {
                kind = k;
                *sink = sink.wrapping_add(consume(p));
            })
            .map_err(rdma)?;
        if got {
            rx.release().map_err(rdma)?;
            return Ok(kind);
        }
        std::hint::spin_loop();
    }
}

fn ring_stream(mpi: &Mpi, n: usize, cap: usize, duration_ms: u64) -> Result<f64> {
    let me = mpi.rank();
    let peer = 1 - me;
    let l = pair(mpi, cap);
    let win = Window::allocate(mpi, l.bytes).map_err(rdma)?;
    let ep = win.lock_all().map_err(rdma)?;
    let live = Liveness::new(mpi);
    mpi.barrier();
    let mut mb_s = 0.0;
    if me == 0 {
        let mut tx =
            RmaProducer::new(&ep, &live, peer, l.ring_at, cap, l.credit_at).map_err(rdma)?;
        let every = (PUBLISH_BYTES / frame_size(n)).max(1) as u64;
        let end = Instant::now() + Duration::from_millis(duration_ms);
        let mut i = 0u64;
        loop {
            i += 1;
            send_frame(&mut tx, FrameKind::Data, n, i, i % every == 0)?;
            if i % every == 0 && Instant::now() >= end {
                break;
            }
        }
        send_frame(&mut tx, FrameKind::End, 0, 0, true)?;
        drop(tx);
    } else {
        let mut rx =
            RmaConsumer::new(&ep, &live, peer, l.ring_at, cap, l.credit_at).map_err(rdma)?;
        let mut sink = 0u64;
        let mut frames = 0u64;
        let mut start = None;
        loop {
            let kind = recv_frame(&mut rx, &mut sink)?;
            if kind == FrameKind::End {
                break;
            }
            // Timed from the first frame: setup and first touch are outside.
            if start.is_none() {
                start = Some(Instant::now());
            } else {
                frames += 1;
            }
        }
        let secs = start.map_or(0.0, |s| s.elapsed().as_secs_f64()).max(1e-9);
        mb_s = frames as f64 * n as f64 / secs / 1e6;
        std::hint::black_box(sink);
    }
    mpi.barrier();
    drop(ep);
    drop(win);
    Ok(f64::from_bits(mpi.broadcast_u64(1, mb_s.to_bits())))
}

fn isend_stream(mpi: &Mpi, n: usize, duration_ms: u64) -> f64 {
    let world = mpi.world();
    let me = mpi.rank();
    let peer = world.process_at_rank(1 - me as i32);
    let window = ((8usize << 20) / n).clamp(1, 64);
    mpi.barrier();
    let mut mb_s = 0.0;
    if me == 0 {
        let mut src = vec![0u8; n * window];
        let start = Instant::now();
        let end = start + Duration::from_millis(duration_ms);
        let mut windows = 0u64;
        loop {
            let go = Instant::now() < end || windows == 0;
            peer.send_with_tag(&(go as u64), 1);
            if !go {
                break;
            }
            for (i, c) in src.chunks_mut(n).enumerate() {
                produce(c, windows * window as u64 + i as u64);
            }
            mpi::request::scope(|scope| {
                let reqs: Vec<_> = src
                    .chunks(n)
                    .map(|c| peer.immediate_send_with_tag(scope, c, 2))
                    .collect();
                for r in reqs {
                    r.wait();
                }
            });
            let (_ack, _) = peer.receive_with_tag::<u64>(3);
            windows += 1;
        }
        let secs = start.elapsed().as_secs_f64().max(1e-9);
        mb_s = (windows * window as u64) as f64 * n as f64 / secs / 1e6;
    } else {
        let mut dst = vec![0u8; n * window];
        let mut sink = 0u64;
        loop {
            let (go, _) = peer.receive_with_tag::<u64>(1);
            if go == 0 {
                break;
            }
            mpi::request::scope(|scope| {
                let reqs: Vec<_> = dst
                    .chunks_mut(n)
                    .map(|c| peer.immediate_receive_into_with_tag(scope, c, 2))
                    .collect();
                for r in reqs {
                    r.wait();
                }
            });
            for c in dst.chunks(n) {
                sink = sink.wrapping_add(consume(c));
            }
            peer.send_with_tag(&1u64, 3);
        }
        std::hint::black_box(sink);
    }
    mpi.barrier();
    f64::from_bits(mpi.broadcast_u64(0, mb_s.to_bits()))
}

fn ring_pingpong(mpi: &Mpi, n: usize, cap: usize, iters: u64) -> Result<f64> {
    let me = mpi.rank();
    let peer = 1 - me;
    let l = pair(mpi, cap);
    let win = Window::allocate(mpi, l.bytes).map_err(rdma)?;
    let ep = win.lock_all().map_err(rdma)?;
    let live = Liveness::new(mpi);
    mpi.barrier();
    let mut tx = RmaProducer::new(&ep, &live, peer, l.ring_at, cap, l.credit_at).map_err(rdma)?;
    let mut rx = RmaConsumer::new(&ep, &live, peer, l.ring_at, cap, l.credit_at).map_err(rdma)?;
    let mut sink = 0u64;
    let mut rtt = Vec::with_capacity(iters as usize);
    for i in 0..iters {
        if me == 0 {
            let t = Instant::now();
            send_frame(&mut tx, FrameKind::Data, n, i, true)?;
            recv_frame(&mut rx, &mut sink)?;
            rtt.push(t.elapsed().as_secs_f64());
        } else {
            recv_frame(&mut rx, &mut sink)?;
            send_frame(&mut tx, FrameKind::Data, n, i, true)?;
        }
    }
    std::hint::black_box(sink);
    drop(tx);
    drop(rx);
    mpi.barrier();
    drop(ep);
    drop(win);
    let us = median(rtt) / 2.0 * 1e6;
    Ok(f64::from_bits(mpi.broadcast_u64(0, us.to_bits())))
}

fn sendrecv_pingpong(mpi: &Mpi, n: usize, iters: u64) -> f64 {
    let world = mpi.world();
    let me = mpi.rank();
    let peer = world.process_at_rank(1 - me as i32);
    let mut src = vec![0u8; n];
    let mut dst = vec![0u8; n];
    let mut sink = 0u64;
    let mut rtt = Vec::with_capacity(iters as usize);
    mpi.barrier();
    for i in 0..iters {
        if me == 0 {
            let t = Instant::now();
            produce(&mut src, i);
            peer.send_with_tag(&src[..], 4);
            peer.receive_into_with_tag(&mut dst[..], 4);
            sink = sink.wrapping_add(consume(&dst));
            rtt.push(t.elapsed().as_secs_f64());
        } else {
            peer.receive_into_with_tag(&mut dst[..], 4);
            sink = sink.wrapping_add(consume(&dst));
            produce(&mut src, i);
            peer.send_with_tag(&src[..], 4);
        }
    }
    std::hint::black_box(sink);
    mpi.barrier();
    let us = median(rtt) / 2.0 * 1e6;
    f64::from_bits(mpi.broadcast_u64(0, us.to_bits()))
}

/// Bandwidth (top) and latency (bottom) against size, both log scales.
fn plot(rows: &[RmaRow], path: &Path, title: &str) -> Result<()> {
    use plotters::prelude::*;
    crate::ring_bench::register_fonts();
    let err = |e: &dyn std::fmt::Display| anyhow!("plot {}: {e}", path.display());
    let xs: Vec<f64> = rows.iter().map(|r| (r.size as f64).log2()).collect();
    let (x0, x1) = (xs[0] - 0.3, xs[xs.len() - 1] + 0.3);
    let root = BitMapBackend::new(path, (1100, 900)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let (top, bottom) = root.split_vertically(450);
    type Series<'a> = Vec<(&'a str, Vec<f64>, RGBColor)>;
    let panels: [(&DrawingArea<_, _>, &str, Series<'_>); 2] = [
        (
            &top,
            "bandwidth (MB/s, log)",
            vec![
                (
                    "remote ring",
                    rows.iter().map(|r| r.ring_mb_s).collect(),
                    BLUE,
                ),
                (
                    "MPI_Isend/Irecv",
                    rows.iter().map(|r| r.isend_mb_s).collect(),
                    RED,
                ),
            ],
        ),
        (
            &bottom,
            "one-way latency (µs, log)",
            vec![
                (
                    "remote ring",
                    rows.iter().map(|r| r.ring_lat_us).collect(),
                    BLUE,
                ),
                (
                    "MPI_Send/Recv",
                    rows.iter().map(|r| r.sendrecv_lat_us).collect(),
                    RED,
                ),
            ],
        ),
    ];
    for (i, (area, ydesc, series)) in panels.into_iter().enumerate() {
        let all: Vec<f64> = series
            .iter()
            .flat_map(|s| s.1.iter().copied())
            .filter(|v| *v > 0.0)
            .collect();
        let lo = all.iter().copied().fold(f64::INFINITY, f64::min).max(1e-3) * 0.6;
        let hi = all.iter().copied().fold(0.0, f64::max).max(lo * 10.0) * 1.6;
        let mut chart = ChartBuilder::on(area)
            .caption(if i == 0 { title } else { "" }, ("sans-serif", 22))
            .margin(14)
            .x_label_area_size(45)
            .y_label_area_size(80)
            .build_cartesian_2d(x0..x1, (lo..hi).log_scale())
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .x_desc("payload (bytes, log 2)")
            .y_desc(ydesc)
            .x_label_formatter(&|x| human_size(2f64.powf(x.round()) as usize))
            .draw()
            .map_err(|e| err(&e))?;
        for (name, ys, color) in series {
            let pts: Vec<(f64, f64)> = xs.iter().copied().zip(ys).filter(|p| p.1 > 0.0).collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                .map_err(|e| err(&e))?
                .label(name)
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2))
                });
            chart
                .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))
                .map_err(|e| err(&e))?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}
