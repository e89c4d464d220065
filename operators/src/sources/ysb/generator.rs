//! The per-worker YSB event generator and its rate pacer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::campaigns::Campaigns;
use super::event::{AdType, EventType, YsbEvent};
use super::rng::{below, splitmix64, uuid_v4, WyRand};

/// How [`YsbGenerator`] stamps `event_time_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventTimeMode {
    /// Reproducible event times: the job's `g`-th event (global index `g`,
    /// see [`YsbGenerator`]) has `event_time_ms = start_ms + g * 1000 /
    /// events_per_s` (integer division), so the job as a whole produces
    /// `events_per_s` events per second of event time, independent of the
    /// number of workers and of the wall clock. For tests and files.
    Deterministic {
        /// Event time of the job's first event, in ms since the Unix epoch.
        start_ms: u64,
        /// Events per second of event time for the whole job (> 0).
        events_per_s: u64,
    },
    /// `event_time_ms` is the wall clock (ms since the Unix epoch) when the
    /// batch is generated: the clock is read once per [`YsbGenerator::fill`]
    /// call, so a batch shares one timestamp. This is YSB's behaviour (its
    /// generator stamps events with the current time as it emits them).
    WallClock,
}

/// What a job's generators share: the seed, the ads to draw from, the event
/// budget and the event-time mode. Each worker builds its own
/// [`YsbGenerator`] from it.
#[derive(Clone, Debug)]
pub struct YsbGenConfig {
    /// Seed of the job; worker `w` derives its stream from `(seed, w)`.
    pub seed: u64,
    /// The ads `ad_id` is drawn from, uniformly (the ads of [`Campaigns`]).
    pub ads: Arc<[u128]>,
    /// Number of events of the whole job (`--events`), or `None` for an
    /// endless stream (ended by a [`Pacer`] duration or the caller).
    pub events: Option<u64>,
    /// How event times are stamped.
    pub event_time: EventTimeMode,
}

impl YsbGenConfig {
    /// An endless, wall-clock-stamped stream over the ads of `campaigns`.
    pub fn new(seed: u64, campaigns: &Campaigns) -> YsbGenConfig {
        YsbGenConfig {
            seed,
            ads: campaigns.ads_shared(),
            events: None,
            event_time: EventTimeMode::WallClock,
        }
    }

    /// Sets the job's event budget (`None`: endless).
    pub fn with_events(mut self, events: Option<u64>) -> YsbGenConfig {
        self.events = events;
        self
    }

    /// Sets the event-time mode.
    pub fn with_event_time(mut self, mode: EventTimeMode) -> YsbGenConfig {
        self.event_time = mode;
        self
    }
}

/// Worker `w`'s share of `total` split over `workers`: `total / workers`,
/// plus one for the first `total % workers` workers (the shares add up to
/// `total` exactly).
pub(crate) fn share(total: u64, worker_index: usize, workers: usize) -> u64 {
    let (w, n) = (worker_index as u64, workers as u64);
    total / n + u64::from(w < total % n)
}

/// One worker's shard of the YSB event stream.
///
/// Every field is drawn per event: `user_id` and `page_id` are random
/// version-4 UUIDs, `ad_id` is uniform over the configured ads, `ad_type`
/// uniform over the 5 [`AdType`]s, `event_type` uniform over the 3
/// [`EventType`]s, `ip` a random `u32`. The random source is wyrand, seeded
/// from `(seed, worker_index)`: the same seed and worker give the same
/// stream; different workers give unrelated streams.
///
/// With `events = Some(N)` over `W` workers, worker `w` generates `N / W`
/// events, plus one if `w < N % W`: the job generates exactly `N`.
///
/// The global index of worker `w`'s `i`-th event is `g = i * W + w` (workers
/// interleave); [`EventTimeMode::Deterministic`] stamps events from `g`.
///
/// ```
/// use air_operators::sources::ysb::*;
/// let c = Campaigns::generate(10, 10, 1);
/// let cfg = YsbGenConfig::new(3, &c)
///     .with_events(Some(10))
///     .with_event_time(EventTimeMode::Deterministic { start_ms: 0, events_per_s: 1000 });
/// let mut g = YsbGenerator::new(&cfg, 1, 2); // worker 1 of 2
/// let mut buf = [YsbEvent::default(); 8];
/// assert_eq!(g.fill(&mut buf), 5);
/// // global indices 1, 3, 5, 7, 9 → 1 ms apart at 1000 events/s
/// assert_eq!(buf[..5].iter().map(|e| e.event_time_ms).collect::<Vec<_>>(), [1, 3, 5, 7, 9]);
/// assert_eq!(g.fill(&mut buf), 0);
/// ```
#[derive(Clone, Debug)]
pub struct YsbGenerator {
    rng: WyRand,
    ads: Arc<[u128]>,
    /// Events this worker may still generate (`None`: endless).
    remaining: Option<u64>,
    quota: Option<u64>,
    generated: u64,
    time: TimeState,
}

/// Incremental state of `start_ms + g * 1000 / rate`: `g * 1000 = q * rate + r`
/// for the next event's `g`; each event adds `W * 1000 = dq * rate + dr`.
#[derive(Clone, Debug)]
enum TimeState {
    Deterministic {
        start_ms: u64,
        rate: u64,
        q: u64,
        r: u64,
        dq: u64,
        dr: u64,
    },
    WallClock,
}

impl YsbGenerator {
    /// The generator of worker `worker_index` of `workers`.
    ///
    /// # Panics
    /// If `workers == 0`, `worker_index >= workers`, the config has no ads,
    /// or a deterministic `events_per_s` is 0.
    pub fn new(config: &YsbGenConfig, worker_index: usize, workers: usize) -> YsbGenerator {
        assert!(
            workers > 0 && worker_index < workers,
            "worker {worker_index} of {workers}"
        );
        assert!(!config.ads.is_empty(), "no ads to draw from");
        let quota = config.events.map(|n| share(n, worker_index, workers));
        let time = match config.event_time {
            EventTimeMode::Deterministic {
                start_ms,
                events_per_s: rate,
            } => {
                assert!(rate > 0, "events_per_s must be > 0");
                let first = worker_index as u128 * 1000;
                let step = workers as u128 * 1000;
                TimeState::Deterministic {
                    start_ms,
                    rate,
                    q: (first / rate as u128) as u64,
                    r: (first % rate as u128) as u64,
                    dq: (step / rate as u128) as u64,
                    dr: (step % rate as u128) as u64,
                }
            }
            EventTimeMode::WallClock => TimeState::WallClock,
        };
        let stream =
            splitmix64(config.seed) ^ splitmix64(0x5745_5244_0000_0000 ^ worker_index as u64);
        YsbGenerator {
            rng: WyRand::new(stream),
            ads: Arc::clone(&config.ads),
            remaining: quota,
            quota,
            generated: 0,
            time,
        }
    }

    /// Fills the front of `out` with the next events and returns how many it
    /// wrote: `out.len()`, fewer at the end of the budget, 0 once the budget
    /// is spent. Unthrottled; see [`YsbGenerator::fill_paced`] for `--rate`.
    ///
    /// Kept out of line: inlined into a consumer's per-event loop it took
    /// that loop's registers (measured: YSB at 2 workers 165 vs 171 M
    /// events/s, `peers-ysb --modes pre-aggregated`).
    #[inline(never)]
    pub fn fill(&mut self, out: &mut [YsbEvent]) -> usize {
        let n = match self.remaining {
            Some(rem) => (out.len() as u64).min(rem) as usize,
            None => out.len(),
        };
        let out = &mut out[..n];
        match &mut self.time {
            TimeState::Deterministic {
                start_ms,
                rate,
                q,
                r,
                dq,
                dr,
            } => {
                let (start_ms, rate, dq, dr) = (*start_ms, *rate, *dq, *dr);
                let (mut tq, mut tr) = (*q, *r);
                generate(&mut self.rng, &self.ads, out, || {
                    let t = start_ms.wrapping_add(tq);
                    tq += dq;
                    tr += dr;
                    if tr >= rate {
                        tr -= rate;
                        tq += 1;
                    }
                    t
                });
                (*q, *r) = (tq, tr);
            }
            TimeState::WallClock => {
                let now = wall_clock_ms();
                generate(&mut self.rng, &self.ads, out, || now);
            }
        }
        self.generated += n as u64;
        if let Some(rem) = &mut self.remaining {
            *rem -= n as u64;
        }
        n
    }

    /// [`YsbGenerator::fill`] under a [`Pacer`]: writes at most as many events
    /// as the pacer allows at `now` (counting all this generator generated
    /// before), or says when to come back, or that the stream is over (event
    /// budget spent, or the pacer's limit or deadline reached).
    pub fn fill_paced(&mut self, out: &mut [YsbEvent], pacer: &Pacer, now: Instant) -> PacedFill {
        if self.remaining == Some(0) || pacer.finished(self.generated, now) {
            return PacedFill::Done;
        }
        let allowed = pacer.allowed(now);
        if allowed <= self.generated {
            return match pacer.due(self.generated + 1) {
                Some(at) => PacedFill::WaitUntil(at),
                None => PacedFill::Done,
            };
        }
        let room = (allowed - self.generated).min(out.len() as u64) as usize;
        PacedFill::Filled(self.fill(&mut out[..room]))
    }

    /// Events generated so far by this worker.
    pub fn generated(&self) -> u64 {
        self.generated
    }

    /// This worker's event budget (`None`: endless).
    pub fn quota(&self) -> Option<u64> {
        self.quota
    }

    /// Events this worker may still generate (`None`: endless).
    pub fn remaining(&self) -> Option<u64> {
        self.remaining
    }
}

/// Result of [`YsbGenerator::fill_paced`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacedFill {
    /// This many events were written to the front of the buffer (> 0).
    Filled(usize),
    /// Nothing is allowed yet; the next event is due at this instant.
    WaitUntil(Instant),
    /// The stream is over.
    Done,
}

use crate::stream::now_ms as wall_clock_ms;

/// The hot loop: six 64-bit draws per event.
#[inline(always)]
fn generate(rng: &mut WyRand, ads: &[u128], out: &mut [YsbEvent], mut time: impl FnMut() -> u64) {
    let num_ads = ads.len() as u64;
    for e in out {
        let user_id = uuid_v4(rng.next_u128());
        let page_id = uuid_v4(rng.next_u128());
        let ad_id = ads[below(rng.next_u64(), num_ads) as usize];
        let r = rng.next_u64();
        // Low 32 bits: the IP; bits 32..48 and 48..64: the two enums
        // (multiply-shift on 16 bits, bias < 2^-13, far below sampling noise).
        let ad_type = AdType::from_index((((r >> 32) & 0xFFFF) * 5) >> 16);
        let event_type = EventType::from_index(((r >> 48) * 3) >> 16);
        *e = YsbEvent {
            user_id,
            page_id,
            ad_id,
            event_time_ms: time(),
            ip: r as u32,
            ad_type,
            event_type,
        };
    }
}

/// Rate pacing and duration limit for one worker (`--rate`, `--duration`).
///
/// The job's rate `R` (events/s) is split like the event budget: worker `w`
/// of `W` gets `R / W`, plus one for the first `R % W` workers, so the job's
/// rate is exactly `R`. The number of events allowed by time `now` is
/// computed from the absolute `start` (shared by all workers) as
/// `floor((now - start) * rate)`, so pacing never drifts, however late the
/// worker is woken.
///
/// With a duration `D` and a rate, a worker's total is capped at
/// `floor(rate_w * D)` events, so the job produces `R·D` events (minus at most
/// one per worker for the rounding). The count is exact; if the job cannot
/// keep up, it runs longer than `D` rather than dropping events. With a
/// duration but no rate, the stream ends at `start + D`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pacer {
    start: Instant,
    /// This worker's events per second; `None`: unthrottled.
    rate: Option<u64>,
    duration: Option<Duration>,
    /// This worker's total, `floor(rate * duration)`.
    limit: Option<u64>,
}

impl Pacer {
    /// The pacer of worker `worker_index` of `workers` for a job started at
    /// `start` with rate `job_rate` (events/s for the whole job; `None`:
    /// unthrottled) and `duration` (`None`: unlimited).
    ///
    /// # Panics
    /// If `workers == 0` or `worker_index >= workers`.
    pub fn new(
        start: Instant,
        job_rate: Option<u64>,
        duration: Option<Duration>,
        worker_index: usize,
        workers: usize,
    ) -> Pacer {
        assert!(
            workers > 0 && worker_index < workers,
            "worker {worker_index} of {workers}"
        );
        let rate = job_rate.map(|r| share(r, worker_index, workers));
        let limit = match (rate, duration) {
            (Some(r), Some(d)) => Some(mul_rate(d.as_nanos(), r)),
            _ => None,
        };
        Pacer {
            start,
            rate,
            duration,
            limit,
        }
    }

    /// An unthrottled, unlimited pacer.
    pub fn unthrottled(start: Instant) -> Pacer {
        Pacer::new(start, None, None, 0, 1)
    }

    /// The job's start, shared by all workers.
    pub fn start(&self) -> Instant {
        self.start
    }

    /// This worker's rate in events per second (`None`: unthrottled).
    pub fn worker_rate(&self) -> Option<u64> {
        self.rate
    }

    /// This worker's total number of events, `floor(rate * duration)`, when
    /// both are set.
    pub fn limit(&self) -> Option<u64> {
        self.limit
    }

    /// `start + duration`, when a duration is set.
    pub fn deadline(&self) -> Option<Instant> {
        self.duration.map(|d| self.start + d)
    }

    /// How many events this worker may have generated in total by `now`:
    /// `floor((now - start) * rate)`, capped at [`Pacer::limit`];
    /// `u64::MAX` when unthrottled.
    #[inline]
    pub fn allowed(&self, now: Instant) -> u64 {
        let Some(rate) = self.rate else {
            return u64::MAX;
        };
        let elapsed = now.saturating_duration_since(self.start).as_nanos();
        mul_rate(elapsed, rate).min(self.limit.unwrap_or(u64::MAX))
    }

    /// The instant from which [`Pacer::allowed`] is at least `n`; `None` if
    /// that never happens (rate 0, or `n` beyond the limit).
    pub fn due(&self, n: u64) -> Option<Instant> {
        let Some(rate) = self.rate else {
            return Some(self.start);
        };
        if rate == 0 || self.limit.is_some_and(|l| n > l) {
            return None;
        }
        // Smallest t (ns) with floor(t * rate / 1e9) >= n.
        let ns = (n as u128 * NANOS).div_ceil(rate as u128);
        Some(self.start + Duration::from_nanos(u64::try_from(ns).ok()?))
    }

    /// Whether a worker that generated `generated` events is done: its limit
    /// is reached, or (without a rate) the deadline has passed.
    pub fn finished(&self, generated: u64, now: Instant) -> bool {
        match (self.limit, self.rate, self.deadline()) {
            (Some(limit), _, _) => generated >= limit,
            (None, None, Some(deadline)) => now >= deadline,
            _ => false,
        }
    }
}

const NANOS: u128 = 1_000_000_000;

/// `floor(nanos * rate / 1e9)`, saturating at `u64::MAX`.
fn mul_rate(nanos: u128, rate: u64) -> u64 {
    u64::try_from(nanos * rate as u128 / NANOS).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn share_adds_up() {
        for total in [0u64, 1, 7, 100, 1_000_003] {
            for workers in 1..=9 {
                let sum: u64 = (0..workers).map(|w| share(total, w, workers)).sum();
                assert_eq!(sum, total);
            }
        }
    }

    #[test]
    fn pacer_arithmetic() {
        let t0 = Instant::now();
        let p = Pacer::new(t0, Some(1000), Some(Duration::from_secs(2)), 0, 1);
        assert_eq!(p.limit(), Some(2000));
        assert_eq!(p.allowed(t0), 0);
        assert_eq!(p.allowed(t0 + Duration::from_micros(999)), 0);
        assert_eq!(p.allowed(t0 + Duration::from_millis(1)), 1);
        assert_eq!(p.allowed(t0 + Duration::from_millis(1500)), 1500);
        assert_eq!(p.allowed(t0 + Duration::from_secs(60)), 2000);
        assert_eq!(p.due(1), Some(t0 + Duration::from_millis(1)));
        assert_eq!(p.due(2001), None);
        assert!(!p.finished(1999, t0));
        assert!(p.finished(2000, t0));
        // 3 workers share 1000/s as 334 + 333 + 333.
        let rates: Vec<_> = (0..3)
            .map(|w| {
                Pacer::new(t0, Some(1000), None, w, 3)
                    .worker_rate()
                    .unwrap()
            })
            .collect();
        assert_eq!(rates, [334, 333, 333]);
        let u = Pacer::unthrottled(t0);
        assert_eq!(u.allowed(t0), u64::MAX);
        assert!(!u.finished(u64::MAX, t0 + Duration::from_secs(1000)));
        let d = Pacer::new(t0, None, Some(Duration::from_secs(1)), 0, 1);
        assert!(!d.finished(5, t0));
        assert!(d.finished(5, t0 + Duration::from_secs(1)));
    }
}
