//! Process-to-process runs: the `air` binary starts itself again as a peer
//! (`air bench ring --peer-role ROLE …`, options hidden from `--help`), with
//! `AIR_JOB_ID` set so both processes derive the same segment names.
//!
//! The peer (child) is the consumer, or the echo server of a ping-pong: it
//! pins itself to the second CPU, creates the segment (so its pages are
//! first touched on the consumer's side), and serves one run. The parent
//! opens the segment (which unlinks its name), runs the producer or the
//! ping-pong client on a thread pinned to the first CPU, and reads the
//! peer's result line from its stdout. The parent kills and reaps the peer on
//! every path and removes any segment name the peer may have left; the peer
//! asks the kernel to kill it if the parent dies (`PR_SET_PDEATHSIG`).

use super::latency::{self, Lines, Rounds, LINES_BYTES, PINGPONG_BYTES, PINGPONG_FRAMES};
use super::throughput::{ring_consume, ring_produce, Roof, Sample};
use super::util::{pin, touch_pages, wait_until, Displaced};
use air_shm::{FrameRing, Region, SegmentName, WaitPolicy};
use anyhow::{anyhow, bail, Context, Result};
use core_affinity::CoreId;
use hdrhistogram::Histogram;
use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// What a peer process does.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerRole {
    /// Consumes a throughput run over a ring.
    RingConsumer,
    /// Consumes a throughput run over the copy roof.
    RoofConsumer,
    /// Echoes a ping-pong over two rings.
    RingEcho,
    /// Echoes a cache-line ping-pong.
    LineEcho,
}

impl PeerRole {
    fn arg(self) -> &'static str {
        match self {
            PeerRole::RingConsumer => "ring-consumer",
            PeerRole::RoofConsumer => "roof-consumer",
            PeerRole::RingEcho => "ring-echo",
            PeerRole::LineEcho => "line-echo",
        }
    }
}

/// Everything a peer needs to know (the hidden `--peer-*` options).
#[derive(Clone, Debug)]
pub struct PeerSpec {
    /// Its role.
    pub role: PeerRole,
    /// Channel name; segments are `SegmentName::for_channel(channel)` (with
    /// `-ping` / `-pong` suffixes for a ping-pong over rings).
    pub channel: String,
    /// Frame payload size in bytes.
    pub size: usize,
    /// Ring data area in bytes.
    pub capacity: usize,
    /// Frames per credit return (1: release per frame).
    pub batch: usize,
    /// The parent's pid: the peer exits at once if its parent is another.
    pub parent: u32,
}

/// Result line prefix a peer prints on stdout.
const RESULT_PREFIX: &str = "AIR-PEER ";
/// How long the parent waits for the peer's segment, and for its exit.
const PEER_TIMEOUT: Duration = Duration::from_secs(30);

fn ping_name(channel: &str) -> SegmentName {
    SegmentName::for_channel(&format!("{channel}-ping"))
}

fn pong_name(channel: &str) -> SegmentName {
    SegmentName::for_channel(&format!("{channel}-pong"))
}

/// Runs as the peer process described by `spec`, on CPU `core`.
pub fn run_peer(spec: &PeerSpec, core: CoreId) -> Result<()> {
    // SAFETY: prctl(PR_SET_PDEATHSIG) only sets a flag of this process.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) };
    // SAFETY: getppid has no preconditions.
    let ppid = unsafe { libc::getppid() } as u32;
    if ppid != spec.parent {
        bail!("peer: parent {} is gone", spec.parent);
    }
    pin(core)?;
    let spin = WaitPolicy::SPIN;
    let mut d = Displaced::default();
    let line = match spec.role {
        PeerRole::RingConsumer => {
            let name = SegmentName::for_channel(&spec.channel);
            let ring = FrameRing::create_segment(&name, spec.capacity)?;
            let mut c = ring.consumer(spin)?;
            drop(ring);
            let mut s = d.measure(|| ring_consume(&mut c, spec.size, spec.batch))?;
            s.displaced.add(d);
            s.to_line()
        }
        PeerRole::RoofConsumer => {
            let name = SegmentName::for_channel(&spec.channel);
            let region = Region::create_segment(&name, Roof::bytes(spec.size))?;
            // SAFETY: the segment is mapped and Roof::bytes(size) long.
            unsafe { touch_pages(region.as_ptr(), region.len()) };
            // SAFETY: the new segment is page-aligned, zero-filled (ftruncate),
            // Roof::bytes(size) long, kept alive below; the parent is the one
            // producer.
            let roof = unsafe { Roof::new(region.as_ptr(), spec.size) };
            let mut s = d.measure(|| roof.consume())?;
            drop(region);
            s.displaced.add(d);
            s.to_line()
        }
        PeerRole::RingEcho => {
            let ping = FrameRing::create_segment(&ping_name(&spec.channel), spec.capacity)?;
            let pong = FrameRing::create_segment(&pong_name(&spec.channel), spec.capacity)?;
            let mut rx = ping.consumer(spin)?;
            let mut tx = pong.producer(spin)?;
            drop((ping, pong));
            let n = d.measure(|| latency::ring_server(&mut rx, &mut tx))?;
            format!("total={n} runq={} wall={}", d.runq_ns, d.wall_ns)
        }
        PeerRole::LineEcho => {
            let region =
                Region::create_segment(&SegmentName::for_channel(&spec.channel), LINES_BYTES)?;
            // SAFETY: page-aligned, zero-filled, LINES_BYTES long, kept alive
            // below; the parent is the one client.
            let lines = unsafe { Lines::new(region.as_ptr()) };
            let n = d.measure(|| lines.server());
            drop(region);
            format!("total={n} runq={} wall={}", d.runq_ns, d.wall_ns)
        }
    };
    println!("{RESULT_PREFIX}{line}");
    Ok(())
}

/// Unique channel names within this process.
fn next_channel() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "bench{}x{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A running peer process. Dropping it kills and reaps the process and
/// removes the segment names it may have created.
struct Peer {
    child: Option<Child>,
    names: Vec<SegmentName>,
}

impl Peer {
    fn spawn(spec: &PeerSpec, cores: (CoreId, CoreId), names: Vec<SegmentName>) -> Result<Peer> {
        let exe = std::env::current_exe().context("cannot find the air binary to start a peer")?;
        let child = Command::new(&exe)
            .args(["bench", "ring", "--peer-role", spec.role.arg()])
            .args(["--peer-channel", &spec.channel])
            .args(["--peer-size", &spec.size.to_string()])
            .args(["--peer-capacity", &spec.capacity.to_string()])
            .args(["--peer-batch", &spec.batch.to_string()])
            .args(["--peer-parent", &spec.parent.to_string()])
            .args(["--cores", &format!("{},{}", cores.0.id, cores.1.id)])
            .env("AIR_JOB_ID", air_shm::job_id())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("cannot start peer {}", exe.display()))?;
        Ok(Peer {
            child: Some(child),
            names: names.clone(),
        })
    }

    /// Waits until the peer has created every segment (or has exited: error).
    fn wait_segments(&mut self) -> Result<()> {
        let child = self.child.as_mut().expect("running");
        let mut exited = None;
        let names = &self.names;
        let ok = wait_until(PEER_TIMEOUT, || {
            if let Ok(Some(st)) = child.try_wait() {
                exited = Some(st);
                return true;
            }
            names.iter().all(|n| n.path().exists())
        });
        if let Some(st) = exited {
            bail!("peer exited early ({st}) before creating its segments");
        }
        if !ok {
            bail!("peer created no segment within {PEER_TIMEOUT:?}");
        }
        Ok(())
    }

    /// Waits for the peer to exit and returns its result line (after the prefix).
    fn finish(mut self) -> Result<String> {
        let mut child = self.child.take().expect("running");
        let mut status = None;
        wait_until(PEER_TIMEOUT, || {
            status = child.try_wait().ok().flatten();
            status.is_some()
        });
        let Some(status) = status else {
            let _ = child.kill();
            let _ = child.wait();
            bail!("peer did not finish within {PEER_TIMEOUT:?}; killed it");
        };
        let mut out = String::new();
        if let Some(mut so) = child.stdout.take() {
            so.read_to_string(&mut out)
                .context("reading the peer's result")?;
        }
        if !status.success() {
            bail!("peer failed ({status})");
        }
        out.lines()
            .find_map(|l| l.strip_prefix(RESULT_PREFIX))
            .map(str::to_owned)
            .ok_or_else(|| anyhow!("peer printed no result"))
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for n in &self.names {
            let _ = std::fs::remove_file(n.path());
        }
    }
}

/// Runs `f` on a thread pinned to `core`; returns its result and how
/// displaced the thread was.
fn on_core<T: Send>(core: CoreId, f: impl FnOnce() -> Result<T> + Send) -> Result<(T, Displaced)> {
    std::thread::scope(|s| {
        s.spawn(move || {
            pin(core)?;
            let mut d = Displaced::default();
            let r = d.measure(f)?;
            Ok((r, d))
        })
        .join()
        .map_err(|_| anyhow!("benchmark thread panicked"))?
    })
}

fn spec(role: PeerRole, size: usize, capacity: usize, batch: usize) -> PeerSpec {
    PeerSpec {
        role,
        channel: next_channel(),
        size,
        capacity,
        batch,
        parent: std::process::id(),
    }
}

fn check_count(sent: u64, got: &Sample) -> Result<()> {
    if got.total != sent {
        bail!("producer sent {sent} frames, peer received {}", got.total);
    }
    Ok(())
}

/// A process-to-process ring run (see [`ring_produce`] / [`ring_consume`]).
pub fn ring_process(
    cores: (CoreId, CoreId),
    n: usize,
    capacity: usize,
    batch: usize,
    dur: Duration,
) -> Result<Sample> {
    let spec = spec(PeerRole::RingConsumer, n, capacity, batch);
    let name = SegmentName::for_channel(&spec.channel);
    let mut peer = Peer::spawn(&spec, cores, vec![name.clone()])?;
    peer.wait_segments()?;
    let ring = FrameRing::open_segment(&name, PEER_TIMEOUT)?;
    let mut p = ring.producer(WaitPolicy::SPIN)?;
    drop(ring);
    let (sent, ctx) = on_core(cores.0, move || {
        let r = ring_produce(&mut p, n, batch, dur);
        drop(p);
        r
    })?;
    let mut got = Sample::parse(&peer.finish()?)?;
    check_count(sent, &got)?;
    got.displaced.add(ctx);
    Ok(got)
}

/// A process-to-process copy-roof run over a `/dev/shm` segment.
pub fn roof_process(cores: (CoreId, CoreId), n: usize, dur: Duration) -> Result<Sample> {
    let spec = spec(PeerRole::RoofConsumer, n, 0, 1);
    let name = SegmentName::for_channel(&spec.channel);
    let mut peer = Peer::spawn(&spec, cores, vec![name.clone()])?;
    peer.wait_segments()?;
    let region = Region::open_segment(&name, PEER_TIMEOUT)?;
    region.unlink();
    if region.len() < Roof::bytes(n) {
        bail!("roof segment too small: {} bytes", region.len());
    }
    // SAFETY: the segment is mapped and region.len() long.
    unsafe { touch_pages(region.as_ptr(), region.len()) };
    // SAFETY: page-aligned, zero-filled by the creator's ftruncate, at least
    // Roof::bytes(n) long (checked), alive until the end of this function;
    // the peer is the one consumer, we are the one producer.
    let roof = unsafe { Roof::new(region.as_ptr(), n) };
    let (sent, ctx) = on_core(cores.0, move || roof.produce(dur))?;
    let mut got = Sample::parse(&peer.finish()?)?;
    drop(region);
    check_count(sent, &got)?;
    got.displaced.add(ctx);
    Ok(got)
}

/// Ring ping-pong between two processes; returns the round trips and how
/// displaced both sides were.
pub fn ring_latency_process(
    cores: (CoreId, CoreId),
    rounds: Rounds,
) -> Result<(Histogram<u64>, Displaced)> {
    let cap = PINGPONG_FRAMES * air_shm::frame_size(PINGPONG_BYTES);
    let spec = spec(PeerRole::RingEcho, PINGPONG_BYTES, cap, 1);
    let (ping, pong) = (ping_name(&spec.channel), pong_name(&spec.channel));
    let mut peer = Peer::spawn(&spec, cores, vec![ping.clone(), pong.clone()])?;
    peer.wait_segments()?;
    let spin = WaitPolicy::SPIN;
    let mut tx = FrameRing::open_segment(&ping, PEER_TIMEOUT)?.producer(spin)?;
    let mut rx = FrameRing::open_segment(&pong, PEER_TIMEOUT)?.consumer(spin)?;
    let (h, ctx) = on_core(cores.0, move || {
        let mut h = latency::new_histogram();
        let r = latency::ring_client(&mut tx, &mut rx, rounds, &mut h);
        drop(tx);
        r.map(|()| h)
    })?;
    let mut ctx = ctx;
    ctx.add(Sample::parse(&peer.finish()?)?.displaced);
    Ok((h, ctx))
}

/// Cache-line ping-pong between two processes over a `/dev/shm` segment;
/// returns the round trips and how displaced both sides were.
pub fn lines_latency_process(
    cores: (CoreId, CoreId),
    rounds: Rounds,
) -> Result<(Histogram<u64>, Displaced)> {
    let spec = spec(PeerRole::LineEcho, 8, 0, 1);
    let name = SegmentName::for_channel(&spec.channel);
    let mut peer = Peer::spawn(&spec, cores, vec![name.clone()])?;
    peer.wait_segments()?;
    let region = Region::open_segment(&name, PEER_TIMEOUT)?;
    region.unlink();
    if region.len() < LINES_BYTES {
        bail!("line segment too small: {} bytes", region.len());
    }
    // SAFETY: page-aligned, zero-filled, at least LINES_BYTES long (checked),
    // alive until the end of this function; the peer is the one server.
    let lines = unsafe { Lines::new(region.as_ptr()) };
    let (h, ctx) = on_core(cores.0, move || {
        let mut h = latency::new_histogram();
        lines.client(rounds, &mut h).map(|()| h)
    })?;
    let mut ctx = ctx;
    ctx.add(Sample::parse(&peer.finish()?)?.displaced);
    drop(region);
    Ok((h, ctx))
}
