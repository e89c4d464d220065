//! The live input lag of this process's paced generators, sampled while a
//! probe of the sustainable search runs (`air bench ysb --sustainable`).
//!
//! Every paced source of a query is a [`Watched`] [`PacedSource`]: after
//! each poll it publishes, in its own slot (one cache line, one writer), the
//! due time of its next event and the time of its last batch. Publishing
//! costs one relaxed load per batch while no watch runs. A [`Watch`] thread
//! samples the slots every interval: the lag at `t` is `t` minus the
//! earliest due time of a generator that is not done, so it keeps growing
//! while a worker is stuck (blocked on a full ring, descheduled), not only
//! when it next polls. [`Watch::finish`] returns the samples and the span
//! from the pacers' start to the last batch generated, over which the
//! probe's read rate is measured.

use air_operators::sources::pace::{Generator, PacedSource, Pacer};
use air_runtime::dataflow::{Source, SourcePoll};
use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Whether a watch samples (sources publish only then).
static ON: AtomicBool = AtomicBool::new(false);
/// Slots handed out since the watch started.
static NEXT: AtomicUsize = AtomicUsize::new(0);
/// Slots: more than the sources of the largest job (1024 workers, two
/// sources each for NEXMark q8); beyond, sources share slots.
const SLOTS: usize = 2048;
/// "No value" in a slot.
const NONE: u64 = u64::MAX;

/// One source's published schedule, ns since [`epoch`].
struct Slot {
    /// Due time of its next event (`NONE`: done, or not started).
    due: AtomicU64,
    /// Its pacer's start.
    start: AtomicU64,
    /// When it last generated a batch (`NONE`: never).
    last: AtomicU64,
}

static SLOT: [CachePadded<Slot>; SLOTS] = [const {
    CachePadded::new(Slot {
        due: AtomicU64::new(NONE),
        start: AtomicU64::new(NONE),
        last: AtomicU64::new(NONE),
    })
}; SLOTS];

/// The instant slot times count from.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// `t` in ns since [`epoch`] (0 before it).
fn ns(t: Instant) -> u64 {
    u64::try_from(t.saturating_duration_since(epoch()).as_nanos()).unwrap_or(NONE - 1)
}

/// A paced generator that publishes its schedule for a [`Watch`]; derefs
/// to its [`PacedSource`].
pub struct Watched<G: Generator> {
    inner: PacedSource<G>,
    slot: usize,
}

impl<G: Generator> Watched<G> {
    /// `gen` paced by `pacer`, watched.
    pub fn new(gen: G, pacer: Pacer) -> Self {
        let slot = NEXT.fetch_add(1, Ordering::Relaxed) % SLOTS;
        if ON.load(Ordering::Relaxed) {
            SLOT[slot].start.store(ns(pacer.start()), Ordering::Relaxed);
        }
        Watched {
            inner: PacedSource::new(gen, pacer),
            slot,
        }
    }

    /// Publishes the due time of the next event (`NONE` once done) and,
    /// when `generated`, the time of this batch.
    #[inline(never)]
    fn publish(&self, done: bool, generated: bool) {
        let p = self.inner.pacer();
        if p.worker_rate().is_none() {
            return;
        }
        let s = &SLOT[self.slot];
        let n = self.inner.generator().generated();
        let due = if done { None } else { p.due(n + 1) };
        s.due.store(due.map_or(NONE, ns), Ordering::Relaxed);
        if generated {
            s.last.store(ns(Instant::now()), Ordering::Relaxed);
        }
    }
}

impl<G: Generator> std::ops::Deref for Watched<G> {
    type Target = PacedSource<G>;
    fn deref(&self) -> &PacedSource<G> {
        &self.inner
    }
}

impl<G: Generator + Send + 'static> Source for Watched<G>
where
    G::Item: 'static,
{
    type Item = G::Item;

    #[inline]
    fn poll(&mut self, buf: &mut Vec<G::Item>, max: usize) -> SourcePoll {
        let r = self.inner.poll(buf, max);
        if ON.load(Ordering::Relaxed) {
            self.publish(matches!(r, SourcePoll::Done), !buf.is_empty());
        }
        r
    }

    fn next_due(&self) -> Option<std::time::Instant> {
        self.inner.next_due()
    }

    fn save(&self) -> Option<Vec<u8>> {
        self.inner.save()
    }

    fn restore(&mut self, state: &[u8]) -> Result<(), String> {
        self.inner.restore(state)
    }
}

/// What a watch saw.
#[derive(Debug, Clone, Default)]
pub struct LagTrace {
    /// (seconds since the pacers' start, input lag in ms) every interval
    /// while some generator was not done.
    pub samples: Vec<(f64, f64)>,
    /// Seconds from the pacers' start to the last batch generated (`None`:
    /// no batch).
    pub span_s: Option<f64>,
}

/// A sampling thread; [`Watch::finish`] stops it. One per process at a
/// time (the probes of a search run one after another).
pub struct Watch {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Vec<(u64, f64)>>>,
}

impl Watch {
    /// Resets the slots and starts sampling every `interval`.
    pub fn start(interval: Duration) -> Watch {
        for s in &SLOT {
            s.due.store(NONE, Ordering::Relaxed);
            s.start.store(NONE, Ordering::Relaxed);
            s.last.store(NONE, Ordering::Relaxed);
        }
        NEXT.store(0, Ordering::SeqCst);
        let _ = epoch();
        ON.store(true, Ordering::SeqCst);
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("air-lagwatch".into())
            .spawn(move || {
                let mut samples = Vec::new();
                let mut next = Instant::now() + interval;
                while !s.load(Ordering::Relaxed) {
                    let now = Instant::now();
                    if now < next {
                        std::thread::park_timeout(next - now);
                        continue;
                    }
                    next += interval;
                    let now_ns = ns(now);
                    let used = NEXT.load(Ordering::Relaxed).min(SLOTS);
                    let earliest = SLOT[..used]
                        .iter()
                        .map(|s| s.due.load(Ordering::Relaxed))
                        .min()
                        .unwrap_or(NONE);
                    if earliest != NONE {
                        let lag_ms = now_ns.saturating_sub(earliest) as f64 / 1e6;
                        samples.push((now_ns, lag_ms));
                    }
                }
                samples
            })
            .ok();
        Watch { stop, thread }
    }

    /// Stops sampling; the samples, timed from the pacers' start.
    pub fn finish(mut self) -> LagTrace {
        self.stop.store(true, Ordering::SeqCst);
        let raw = match self.thread.take() {
            Some(t) => {
                t.thread().unpark();
                t.join().unwrap_or_default()
            }
            None => Vec::new(),
        };
        ON.store(false, Ordering::SeqCst);
        let used = NEXT.load(Ordering::Relaxed).min(SLOTS);
        let start = SLOT[..used]
            .iter()
            .map(|s| s.start.load(Ordering::Relaxed))
            .min()
            .unwrap_or(NONE);
        let last = SLOT[..used]
            .iter()
            .map(|s| s.last.load(Ordering::Relaxed))
            .filter(|&l| l != NONE)
            .max();
        if start == NONE {
            return LagTrace::default();
        }
        let secs = |t: u64| (t as f64 - start as f64) / 1e9;
        LagTrace {
            samples: raw.into_iter().map(|(t, lag)| (secs(t), lag)).collect(),
            span_s: last.map(secs).filter(|s| *s > 0.0),
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            self.stop.store(true, Ordering::SeqCst);
            t.thread().unpark();
            let _ = t.join();
            ON.store(false, Ordering::SeqCst);
        }
    }
}
