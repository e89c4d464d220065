//! Small helpers of the ring benchmark: core pinning, size parsing, the
//! per-frame stamp, the timer's own cost, and machine facts for the header.

use anyhow::{bail, Context, Result};
use core_affinity::CoreId;
use std::time::{Duration, Instant};

/// Whether [`pin`] pins (off only inside [`unpinned`]).
static PINNING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Runs `f` with [`pin`] a no-op: the threads it starts stay where the
/// kernel's scheduler puts them (inside this process's CPU set). The
/// benchmark runs one measurement at a time, so the switch is global.
pub fn unpinned<R>(f: impl FnOnce() -> R) -> R {
    use std::sync::atomic::Ordering;
    /// Turns pinning back on however `f` ends (a panic too).
    struct Restore;
    impl Drop for Restore {
        fn drop(&mut self) {
            PINNING.store(true, Ordering::SeqCst);
        }
    }
    PINNING.store(false, Ordering::SeqCst);
    let _restore = Restore;
    f()
}

/// Pins the calling thread to `core`; an error if the kernel refuses. A
/// no-op inside [`unpinned`].
pub fn pin(core: CoreId) -> Result<()> {
    if !PINNING.load(std::sync::atomic::Ordering::SeqCst) {
        return Ok(());
    }
    if !core_affinity::set_for_current(core) {
        bail!("cannot pin this thread to CPU {}", core.id);
    }
    Ok(())
}

/// The producer and consumer CPUs: `spec` ("A,B") or the first two CPUs this
/// process may run on. `allowed` must come from `core_affinity::get_core_ids()`
/// called before anything was pinned.
pub fn choose_cores(spec: Option<&str>, allowed: &[CoreId]) -> Result<(CoreId, CoreId)> {
    match spec {
        Some(s) => {
            let ids: Vec<usize> = s
                .split(',')
                .map(|p| p.trim().parse::<usize>())
                .collect::<std::result::Result<_, _>>()
                .with_context(|| format!("--cores {s:?}: expected two CPU numbers, e.g. 0,1"))?;
            if ids.len() != 2 {
                bail!("--cores {s:?}: expected exactly two CPU numbers, e.g. 0,1");
            }
            for id in &ids {
                if !allowed.iter().any(|c| c.id == *id) {
                    bail!(
                        "--cores: CPU {id} is not in this process's CPU set {:?}",
                        allowed.iter().map(|c| c.id).collect::<Vec<_>>()
                    );
                }
            }
            if ids[0] == ids[1] {
                bail!(
                    "--cores {s:?}: producer and consumer must be on two different CPUs \
                     (both spin; on one CPU each hand-off would wait for a scheduler time slice)"
                );
            }
            Ok((CoreId { id: ids[0] }, CoreId { id: ids[1] }))
        }
        None => {
            if allowed.len() < 2 {
                bail!(
                    "the ring benchmark needs two CPUs (producer and consumer spin); \
                     this process may run on {} only",
                    allowed.len()
                );
            }
            Ok((allowed[0], allowed[1]))
        }
    }
}

/// Parses one size: `64`, `4K`, `4KiB`, `1M`, `1MiB` (binary multiples).
pub fn parse_size(s: &str) -> Result<usize> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let (num, mult) = if let Some(n) = lower
        .strip_suffix("kib")
        .or_else(|| lower.strip_suffix("kb"))
        .or_else(|| lower.strip_suffix('k'))
    {
        (n, 1usize << 10)
    } else if let Some(n) = lower
        .strip_suffix("mib")
        .or_else(|| lower.strip_suffix("mb"))
        .or_else(|| lower.strip_suffix('m'))
    {
        (n, 1 << 20)
    } else if let Some(n) = lower.strip_suffix('b') {
        (n, 1)
    } else {
        (lower.as_str(), 1)
    };
    let v: usize = num
        .trim()
        .parse()
        .with_context(|| format!("bad size {t:?} (e.g. 64, 4K, 1MiB)"))?;
    let v = v.checked_mul(mult).context("size overflows")?;
    if v == 0 {
        bail!("size {t:?} is zero");
    }
    Ok(v)
}

/// Parses `--sizes`: a range `A..B` (every power of two from A up to B,
/// doubling; A need not be a power of two) or a comma-separated list.
pub fn parse_sizes(spec: &str) -> Result<Vec<usize>> {
    let mut out = Vec::new();
    if let Some((a, b)) = spec.split_once("..") {
        let a = parse_size(a)?;
        let b = parse_size(b.trim_start_matches('='))?;
        if a > b {
            bail!("--sizes {spec:?}: empty range");
        }
        let mut s = a;
        while s <= b {
            out.push(s);
            s *= 2;
        }
    } else {
        for p in spec.split(',').filter(|p| !p.trim().is_empty()) {
            out.push(parse_size(p)?);
        }
    }
    if out.is_empty() {
        bail!("--sizes {spec:?}: no sizes");
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// A size for humans: `64`, `4K`, `1M` (binary multiples, exact only).
pub fn human_size(n: usize) -> String {
    if n >= 1 << 20 && n % (1 << 20) == 0 {
        format!("{}M", n >> 20)
    } else if n >= 1 << 10 && n % (1 << 10) == 0 {
        format!("{}K", n >> 10)
    } else {
        n.to_string()
    }
}

/// A rate for humans: `12.3M`, `850.0K`, `1.20G` (decimal multiples).
pub fn human_rate(v: f64) -> String {
    if v >= 1e9 {
        format!("{:.2}G", v / 1e9)
    } else if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}K", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// Writes frame number `i` into the first `min(8, len)` bytes of `buf`
/// (little endian): the producer stamps its source buffer before each copy.
#[inline(always)]
pub fn stamp(buf: &mut [u8], i: u64) {
    if let Some(head) = buf.first_chunk_mut::<8>() {
        *head = i.to_le_bytes();
    } else {
        let k = buf.len();
        buf.copy_from_slice(&i.to_le_bytes()[..k]);
    }
}

/// Whether `buf` carries the stamp of frame `i` (see [`stamp`]).
#[inline(always)]
pub fn stamp_ok(buf: &[u8], i: u64) -> bool {
    if let Some(head) = buf.first_chunk::<8>() {
        u64::from_le_bytes(*head) == i
    } else {
        buf == &i.to_le_bytes()[..buf.len()]
    }
}

/// A source buffer of `n` bytes with a fixed pattern.
pub fn pattern(n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(7))
        .collect()
}

/// A buffer of `n` bytes whose pages are all touched (filled with 0xA5), so
/// no page fault lands inside a timed run.
pub fn touched(n: usize) -> Vec<u8> {
    vec![0xA5; n]
}

/// Reads one byte of every 4 KiB page of `[ptr, ptr + len)` so the pages
/// are mapped before a timed run (a read maps a shared-memory page for
/// writing too; for private anonymous memory write it instead).
///
/// # Safety
/// The range must be mapped and readable.
pub unsafe fn touch_pages(ptr: *const u8, len: usize) {
    let mut off = 0;
    while off < len {
        // SAFETY: off < len, inside the caller's mapped range.
        unsafe { ptr.add(off).read_volatile() };
        off += 4096;
    }
}

/// How many frames a producer sends between two looks at the clock: about
/// 64 KiB worth, 1 to 1024 frames.
pub fn check_every(n: usize) -> u64 {
    (65536 / n.max(1)).clamp(1, 1024) as u64
}

/// Median cost of `Instant::now()` measured as back-to-back pairs, in ns.
pub fn timer_overhead_ns() -> u64 {
    let mut v: Vec<u64> = (0..20_000)
        .map(|_| {
            let a = Instant::now();
            let b = Instant::now();
            (b - a).as_nanos() as u64
        })
        .collect();
    v.sort_unstable();
    v[v.len() / 2]
}

/// The median of `v` (the lower middle for an even count); 0 for none.
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[(v.len() - 1) / 2]
}

/// CPU model name from `/proc/cpuinfo`, or "unknown CPU".
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

/// The kernel's clock source (`tsc`, `kvm-clock`, …), which sets the cost of
/// `Instant::now()`.
pub fn clocksource() -> String {
    std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "unknown".into())
}

/// The 1-minute load average from `/proc/loadavg` (other work on the two
/// CPUs skews every figure), or "?".
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}

/// Nanoseconds the calling thread has spent runnable but waiting for a CPU
/// (`/proc/thread-self/schedstat`, second field), 0 if unknown. A spinning
/// benchmark thread that waited was displaced by other work, and so was the
/// figure it produced.
pub fn runq_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// How much of a run its threads spent displaced: waiting for a CPU while
/// runnable, summed over the threads, against their summed wall time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Displaced {
    /// Run-queue wait, ns.
    pub runq_ns: u64,
    /// Wall time, ns.
    pub wall_ns: u64,
}

impl Displaced {
    /// Adds `o` to `self`.
    pub fn add(&mut self, o: Displaced) {
        self.runq_ns += o.runq_ns;
        self.wall_ns += o.wall_ns;
    }

    /// Run-queue wait as a percentage of wall time.
    pub fn pct(&self) -> f64 {
        if self.wall_ns == 0 {
            0.0
        } else {
            100.0 * self.runq_ns as f64 / self.wall_ns as f64
        }
    }

    /// Runs `f` on the calling thread and adds its displacement to `self`.
    pub fn measure<T>(&mut self, f: impl FnOnce() -> T) -> T {
        let (q0, t0) = (runq_ns(), Instant::now());
        let r = f();
        self.add(Displaced {
            runq_ns: runq_ns().saturating_sub(q0),
            wall_ns: t0.elapsed().as_nanos() as u64,
        });
        r
    }
}

/// Sleeps in small steps until `done()` or `timeout`; returns whether done.
pub fn wait_until(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if done() {
            return true;
        }
        if start.elapsed() >= timeout {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_sizes("8..64").unwrap(), vec![8, 16, 32, 64]);
        assert_eq!(parse_sizes("8..=1M").unwrap().len(), 18);
        assert_eq!(
            parse_sizes("64,4K,1MiB,100").unwrap(),
            vec![64, 100, 4096, 1 << 20]
        );
        assert!(parse_sizes("0").is_err());
        assert!(parse_sizes("x").is_err());
        assert_eq!(human_size(65536), "64K");
        assert_eq!(human_size(100), "100");
    }

    #[test]
    fn stamps() {
        let mut b = vec![0u8; 4];
        stamp(&mut b, 0x0102_0304_0506);
        assert!(stamp_ok(&b, 0x0102_0304_0506));
        assert!(!stamp_ok(&b, 7));
        let mut b = vec![0u8; 64];
        stamp(&mut b, 99);
        assert!(stamp_ok(&b, 99));
    }
}
