//! Wall-clock pacing of generators (`--rate`, `--duration`): the drift-free
//! [`Pacer`] of one worker, [`fill_paced`] for any [`Generator`], and
//! [`PacedSource`], the source every paced query uses (YSB, WA, NEXMark):
//! it releases a worker's events on its schedule and records its input lag
//! — how far behind that schedule it fell.

use std::time::{Duration, Instant};

use air_runtime::dataflow::{Source, SourcePoll};

/// Worker `w`'s share of `total` split over `workers`: `total / workers`,
/// plus one for the first `total % workers` workers (the shares add up to
/// `total` exactly).
pub(crate) fn share(total: u64, worker_index: usize, workers: usize) -> u64 {
    let (w, n) = (worker_index as u64, workers as u64);
    total / n + u64::from(w < total % n)
}

/// Result of [`fill_paced`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacedFill {
    /// This many events were written to the front of the buffer (> 0).
    Filled(usize),
    /// Nothing is allowed yet; the next event is due at this instant.
    WaitUntil(Instant),
    /// The stream is over.
    Done,
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
    /// Events generated before `start` (a resumed run: what its checkpoint
    /// had generated); the schedule goes on from there. 0 in a first run.
    first: u64,
    /// Schedule time that passed before `start` (a resumed run: the
    /// checkpoint's); counts against the duration. 0 in a first run.
    before: Duration,
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
            first: 0,
            before: Duration::ZERO,
        }
    }

    /// The same pacer going on from a checkpoint (a resumed run): `generated`
    /// events were generated and `elapsed` of the schedule passed before
    /// `start`. Event `generated + 1` is due at `start` (the time the job was
    /// down is skipped, not caught up), the limit stays the whole run's, and
    /// a duration counts `elapsed` as spent.
    pub fn resumed(self, generated: u64, elapsed: Duration) -> Pacer {
        Pacer {
            first: generated,
            before: elapsed,
            ..self
        }
    }

    /// How much of the schedule passed at `now`: since `start`, plus what
    /// passed before it ([`Pacer::resumed`]).
    pub fn elapsed(&self, now: Instant) -> Duration {
        self.before
            .saturating_add(now.saturating_duration_since(self.start))
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

    /// The event-time rate (events per second of event time) that makes an
    /// interleaved shard follow this worker's schedule: a generator whose
    /// worker `w` of `workers` generates the job's events `w, w + W, …` and
    /// stamps event `n` at `n · 1000 / rate` ms after the start stamps this
    /// worker's `k`-th event at `(k·W + w) / (rate_w·W)` s, within one
    /// inter-event gap (`1 / rate_w`) before its due time `(k + 1) / rate_w`,
    /// with no drift: `rate_w · workers`. `None` when unthrottled.
    pub fn interleaved_event_rate(&self, workers: usize) -> Option<f64> {
        self.rate.map(|r| r as f64 * workers as f64)
    }

    /// `start + duration` (less what passed before a resume), when a
    /// duration is set.
    pub fn deadline(&self) -> Option<Instant> {
        self.duration
            .map(|d| self.start + d.saturating_sub(self.before))
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
        mul_rate(elapsed, rate)
            .saturating_add(self.first)
            .min(self.limit.unwrap_or(u64::MAX))
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
        // Smallest t (ns) with first + floor(t * rate / 1e9) >= n.
        let n = n.saturating_sub(self.first);
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

/// Wall-clock pace of a generator writing its stream to an output (`air
/// gen ysb|nexmark|wa --rate R`, to feed a live job): the stream is cut
/// into batches of about 5 ms of events (`R / 200`, see
/// [`batch`](Self::batch)), and each batch is written when its first event
/// is due, `start + n / R` for the `n`-th event of the stream (a
/// one-worker [`Pacer`]: no drift, however late a write returns). The
/// writer flushes each batch, so a reader sees a steady stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputPace {
    pacer: Pacer,
}

impl OutputPace {
    /// Batches an output makes in a second (5 ms each).
    pub const BATCHES_PER_S: u64 = 200;

    /// The pace of `rate` events per second from now; `None` without a
    /// rate (or a rate of 0): write as fast as the output takes it.
    pub fn new(rate: Option<u64>) -> Option<OutputPace> {
        let rate = rate.filter(|&r| r > 0)?;
        Some(OutputPace {
            pacer: Pacer::new(Instant::now(), Some(rate), None, 0, 1),
        })
    }

    /// Events per batch, with batches of at most `max` events: about 5 ms
    /// of events, at least 1.
    pub fn batch(&self, max: usize) -> usize {
        let rate = self.pacer.worker_rate().unwrap_or(u64::MAX);
        (rate / Self::BATCHES_PER_S).clamp(1, max.max(1) as u64) as usize
    }

    /// Sleeps until the `written`-th event of the stream (0-based: the
    /// first of the next batch, after `written` events) is due.
    pub fn wait_for(&self, written: u64) {
        if let Some(due) = self.pacer.due(written) {
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
        }
    }
}

const NANOS: u128 = 1_000_000_000;

/// `floor(nanos * rate / 1e9)`, saturating at `u64::MAX`.
fn mul_rate(nanos: u128, rate: u64) -> u64 {
    u64::try_from(nanos * rate as u128 / NANOS).unwrap_or(u64::MAX)
}

/// A sharded event generator that [`fill_paced`] and [`PacedSource`] can
/// pace: it fills slices and counts what it generated.
pub trait Generator {
    /// The events it generates.
    type Item: Clone + Default + Send;
    /// Writes the next events to the front of `out`; returns how many
    /// (`out.len()`, fewer at the end of its budget, 0 once it is spent).
    fn fill(&mut self, out: &mut [Self::Item]) -> usize;
    /// Events generated so far by this shard.
    fn generated(&self) -> u64;
    /// Which shard of the stream it generates: `(shard, shards)`
    /// ([`crate::sources::shards::Sharded::shard`]).
    fn shard(&self) -> (usize, usize);
    /// Goes on as if it had generated `n` events (a checkpoint's position).
    ///
    /// # Errors
    /// It generated events already, or `n` is past its budget.
    fn skip_to(&mut self, n: u64) -> Result<(), String>;
    /// Stamps the event it generates next at `at_ms` (ms since the Unix
    /// epoch), and those after it on from there at its event-time rate: a
    /// resumed paced run's events keep their wall-clock due times. A
    /// generator that stamps events with the wall clock as it makes them
    /// has nothing to do.
    fn restamp_next(&mut self, at_ms: u64);
}

impl Generator for crate::sources::ysb::YsbGenerator {
    type Item = crate::sources::ysb::YsbEvent;
    #[inline]
    fn fill(&mut self, out: &mut [Self::Item]) -> usize {
        crate::sources::ysb::YsbGenerator::fill(self, out)
    }
    fn generated(&self) -> u64 {
        crate::sources::ysb::YsbGenerator::generated(self)
    }
    fn shard(&self) -> (usize, usize) {
        crate::sources::shards::Sharded::shard(self)
    }
    fn skip_to(&mut self, n: u64) -> Result<(), String> {
        crate::sources::ysb::YsbGenerator::skip_to(self, n)
    }
    fn restamp_next(&mut self, at_ms: u64) {
        crate::sources::ysb::YsbGenerator::restamp_next(self, at_ms)
    }
}

impl Generator for crate::sources::wa::WaGenerator {
    type Item = crate::sources::wa::WaEvent;
    #[inline]
    fn fill(&mut self, out: &mut [Self::Item]) -> usize {
        crate::sources::wa::WaGenerator::fill(self, out)
    }
    fn generated(&self) -> u64 {
        crate::sources::wa::WaGenerator::generated(self)
    }
    fn shard(&self) -> (usize, usize) {
        crate::sources::shards::Sharded::shard(self)
    }
    fn skip_to(&mut self, n: u64) -> Result<(), String> {
        crate::sources::wa::WaGenerator::skip_to(self, n)
    }
    fn restamp_next(&mut self, at_ms: u64) {
        crate::sources::wa::WaGenerator::restamp_next(self, at_ms)
    }
}

impl Generator for crate::sources::nexmark::NexmarkFullGenerator {
    type Item = crate::sources::nexmark::FullEvent;
    #[inline]
    fn fill(&mut self, out: &mut [Self::Item]) -> usize {
        crate::sources::nexmark::NexmarkFullGenerator::fill(self, out)
    }
    fn generated(&self) -> u64 {
        self.compact().generated()
    }
    fn shard(&self) -> (usize, usize) {
        crate::sources::shards::Sharded::shard(self)
    }
    fn skip_to(&mut self, n: u64) -> Result<(), String> {
        crate::sources::nexmark::NexmarkFullGenerator::skip_to(self, n)
    }
    fn restamp_next(&mut self, at_ms: u64) {
        crate::sources::nexmark::NexmarkFullGenerator::restamp_next(self, at_ms)
    }
}

impl Generator for crate::sources::nexmark::NexmarkGenerator {
    type Item = crate::sources::nexmark::NexEvent;
    #[inline]
    fn fill(&mut self, out: &mut [Self::Item]) -> usize {
        crate::sources::nexmark::NexmarkGenerator::fill(self, out)
    }
    fn generated(&self) -> u64 {
        crate::sources::nexmark::NexmarkGenerator::generated(self)
    }
    fn shard(&self) -> (usize, usize) {
        crate::sources::shards::Sharded::shard(self)
    }
    fn skip_to(&mut self, n: u64) -> Result<(), String> {
        crate::sources::nexmark::NexmarkGenerator::skip_to(self, n)
    }
    fn restamp_next(&mut self, at_ms: u64) {
        crate::sources::nexmark::NexmarkGenerator::restamp_next(self, at_ms)
    }
}

/// [`Generator::fill`] under a [`Pacer`]: writes at most as many events as
/// the pacer allows at `now` (counting all `gen` generated before), or says
/// when to come back, or that the stream is over (the generator's budget
/// spent, or the pacer's limit or deadline reached).
pub fn fill_paced<G: Generator + ?Sized>(
    gen: &mut G,
    out: &mut [G::Item],
    pacer: &Pacer,
    now: Instant,
) -> PacedFill {
    let generated = gen.generated();
    if pacer.finished(generated, now) {
        return PacedFill::Done;
    }
    let allowed = pacer.allowed(now);
    if allowed <= generated {
        return match pacer.due(generated + 1) {
            Some(at) => PacedFill::WaitUntil(at),
            None => PacedFill::Done,
        };
    }
    if out.is_empty() {
        return PacedFill::Filled(0);
    }
    let room = (allowed - generated).min(out.len() as u64) as usize;
    match gen.fill(&mut out[..room]) {
        0 => PacedFill::Done,
        n => PacedFill::Filled(n),
    }
}

/// Where a paced generator was at a checkpoint ([`PacedSource`]'s saved
/// state): [`PacedPosition::TAG`], then `shard`, `shards`, `generated` and
/// `elapsed` in ns, little-endian `u64`s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacedPosition {
    /// Its shard of the stream (the worker it ran at).
    pub shard: usize,
    /// Shards of the stream (the job's workers in all).
    pub shards: usize,
    /// Events it generated.
    pub generated: u64,
    /// Schedule time that had passed ([`Pacer::elapsed`]).
    pub elapsed: Duration,
}

impl PacedPosition {
    /// What a saved paced position starts with.
    pub const TAG: [u8; 8] = *b"air-pace";

    /// Its bytes: 40.
    pub fn save(&self) -> Vec<u8> {
        let mut v = Self::TAG.to_vec();
        let ns = u64::try_from(self.elapsed.as_nanos()).unwrap_or(u64::MAX);
        for x in [self.shard as u64, self.shards as u64, self.generated, ns] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v
    }

    /// What [`PacedPosition::save`] made.
    ///
    /// # Errors
    /// Other bytes: the position of another source (an unpaced generator,
    /// input files: the run that took the checkpoint had no `--rate`).
    pub fn read(state: &[u8]) -> Result<PacedPosition, String> {
        let bad = || {
            "the checkpoint's source is not a paced generator (was it taken without \
             --rate?): rerun with the options it was taken with, or --fresh"
                .to_string()
        };
        if state.len() != 40 || state[..8] != Self::TAG {
            return Err(bad());
        }
        let x = |i: usize| {
            u64::from_le_bytes(state[8 + 8 * i..16 + 8 * i].try_into().expect("8 bytes"))
        };
        let (shard, shards) = (x(0) as usize, x(1) as usize);
        if shards == 0 || shard >= shards {
            return Err(bad());
        }
        Ok(PacedPosition {
            shard,
            shards,
            generated: x(2),
            elapsed: Duration::from_nanos(x(3)),
        })
    }
}

/// One worker's generator released on its [`Pacer`]'s schedule: a
/// [`Source`] that yields what is due, idles when nothing is, and records
/// its input lag.
///
/// The input lag is how late the worker is on its schedule: after every
/// batch, now − the due time of its next event (of its last event once the
/// budget is spent), in wall-clock time. A job that keeps up stays near 0
/// (a batch's worth of events); one that cannot grows it without bound (its
/// generator falls further behind its rate). Latency alone cannot show that
/// when events are stamped as they are generated.
pub struct PacedSource<G: Generator> {
    gen: G,
    pacer: Pacer,
    /// Full-length buffer the generator fills.
    scratch: Vec<G::Item>,
    /// Largest input lag seen.
    lag_max: Duration,
    /// Events a poll waits for at modest rates (a quarter of its `max`).
    want: u64,
}

impl<G: Generator> PacedSource<G> {
    /// `gen` paced by `pacer`.
    pub fn new(gen: G, pacer: Pacer) -> Self {
        PacedSource {
            gen,
            pacer,
            scratch: Vec::new(),
            lag_max: Duration::ZERO,
            want: 1,
        }
    }

    /// The generator.
    pub fn generator(&self) -> &G {
        &self.gen
    }

    /// The pacer.
    pub fn pacer(&self) -> &Pacer {
        &self.pacer
    }

    /// Largest input lag seen (see [`PacedSource`]); `None` when the pacer
    /// has no rate (a `--duration` alone has no schedule to fall behind).
    pub fn input_lag_max(&self) -> Option<Duration> {
        self.pacer.worker_rate().map(|_| self.lag_max)
    }

    /// [`PacedSource::input_lag_max`] in ms.
    pub fn input_lag_max_ms(&self) -> Option<f64> {
        self.input_lag_max().map(|d| d.as_secs_f64() * 1e3)
    }
}

impl<G: Generator + Send + 'static> Source for PacedSource<G>
where
    G::Item: 'static,
{
    type Item = G::Item;

    fn poll(&mut self, buf: &mut Vec<G::Item>, max: usize) -> SourcePoll {
        let p = self.pacer;
        // At modest rates, wait until a quarter batch is due (or the first
        // due event is 1 ms old) instead of spinning on tiny batches: the
        // worker then idles.
        let now = Instant::now();
        let generated = self.gen.generated();
        let allowed = p.allowed(now);
        let want = (max as u64 / 4).max(1);
        self.want = want;
        if allowed > generated
            && allowed - generated < want
            && !p.finished(generated, now)
            && p.due(generated + 1)
                .is_some_and(|t| now.saturating_duration_since(t) < Duration::from_millis(1))
        {
            buf.clear();
            return SourcePoll::Idle;
        }
        // Paced batches are often short: fill a prefix of a full-length
        // scratch buffer and copy the batch out, rather than truncating
        // `buf` (which would have to be re-initialized to full length on
        // the next poll).
        if self.scratch.len() < max {
            self.scratch.resize(max, G::Item::default());
        }
        buf.clear();
        match fill_paced(&mut self.gen, &mut self.scratch[..max], &p, now) {
            PacedFill::Filled(n) => {
                buf.extend_from_slice(&self.scratch[..n]);
                if p.worker_rate().is_some() {
                    // The next event's due time, or the last one's once
                    // the budget is spent.
                    let n = self.gen.generated();
                    if let Some(due) = p.due(n + 1).or_else(|| p.due(n)) {
                        self.lag_max = self.lag_max.max(now.saturating_duration_since(due));
                    }
                }
                SourcePoll::Ready
            }
            PacedFill::WaitUntil(_) => SourcePoll::Idle,
            PacedFill::Done => SourcePoll::Done,
        }
    }

    /// When `poll` will next yield: a quarter batch due, or the first due
    /// event 1 ms old, whichever is first (`None` without a rate).
    fn next_due(&self) -> Option<Instant> {
        let p = &self.pacer;
        p.worker_rate()?;
        let g = self.gen.generated();
        let first = p.due(g + 1)? + Duration::from_millis(1);
        Some(p.due(g + self.want).map_or(first, |t| t.min(first)))
    }

    /// [`PacedPosition`]: the events generated and the schedule time passed.
    fn save(&self) -> Option<Vec<u8>> {
        let (shard, shards) = self.gen.shard();
        let position = PacedPosition {
            shard,
            shards,
            generated: self.gen.generated(),
            elapsed: self.pacer.elapsed(Instant::now()),
        };
        Some(position.save())
    }

    /// Goes on from a [`PacedPosition`] of the same shard: the generator
    /// skips what was generated, the pacer goes on from there at the
    /// resumed run's start ([`Pacer::resumed`]: the time the job was down
    /// is skipped, not caught up at full speed) and the next event is
    /// stamped with the wall-clock time of that start, as events of a paced
    /// run are stamped with their due times.
    fn restore(&mut self, state: &[u8]) -> Result<(), String> {
        let at = PacedPosition::read(state)?;
        if (at.shard, at.shards) != self.gen.shard() {
            return Err(format!(
                "a paced generator resumes at the worker count it was taken at ({} in all; \
                 this run has {}): rerun with that many workers, or --fresh",
                at.shards,
                self.gen.shard().1
            ));
        }
        self.gen.skip_to(at.generated)?;
        self.pacer = self.pacer.resumed(at.generated, at.elapsed);
        // The wall-clock time of the pacer's start (the job's agreed start).
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let since_start = Instant::now().saturating_duration_since(self.pacer.start());
        let start_ms = now.saturating_sub(since_start).as_millis();
        self.gen
            .restamp_next(u64::try_from(start_ms).unwrap_or(u64::MAX));
        Ok(())
    }
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

    /// A resumed pacer goes on from the checkpoint's count: the next event
    /// is due at its start, the limit is the whole run's, and a duration
    /// counts the schedule time that passed before.
    #[test]
    fn a_resumed_pacer_goes_on_from_its_count() {
        let t0 = Instant::now();
        let p = Pacer::new(t0, Some(1000), Some(Duration::from_secs(2)), 0, 1)
            .resumed(1500, Duration::from_millis(1500));
        assert_eq!(p.allowed(t0), 1500);
        assert_eq!(p.allowed(t0 + Duration::from_millis(100)), 1600);
        assert_eq!(p.allowed(t0 + Duration::from_secs(60)), 2000);
        assert_eq!(p.due(1500), Some(t0));
        assert_eq!(p.due(1501), Some(t0 + Duration::from_millis(1)));
        assert_eq!(p.due(2001), None);
        assert!(p.finished(2000, t0));
        assert_eq!(p.elapsed(t0), Duration::from_millis(1500));
        let d = Pacer::new(t0, None, Some(Duration::from_secs(2)), 0, 1)
            .resumed(7, Duration::from_millis(1500));
        assert_eq!(d.deadline(), Some(t0 + Duration::from_millis(500)));
        assert!(!d.finished(7, t0 + Duration::from_millis(499)));
        assert!(d.finished(7, t0 + Duration::from_millis(500)));
    }

    /// A paced source saved after some batches and restored into a new one
    /// of the same shard generates the rest of the stream (the same
    /// events, restamped: the next one at the new start's wall-clock
    /// time); another shard, or another source's bytes, is refused.
    #[test]
    fn a_paced_source_resumes_where_it_was_restamped_at_its_start() {
        use crate::sources::wa::{WaConfig, WaEvent, WaGenerator};
        use air_runtime::dataflow::Source;
        let cfg = WaConfig {
            events: 10_000,
            events_per_s: 1_000_000.0,
            base_time_ms: 1_000,
            ..WaConfig::default()
        };
        let t0 = Instant::now() - Duration::from_secs(1);
        let mut a = PacedSource::new(
            WaGenerator::new(&cfg, 1, 2),
            Pacer::new(t0, Some(1_000_000), None, 1, 2),
        );
        let mut buf = Vec::new();
        let mut first = Vec::new();
        while first.len() < 3000 {
            assert_eq!(a.poll(&mut buf, 1000), SourcePoll::Ready);
            first.extend_from_slice(&buf);
        }
        let state = a.save().unwrap();
        let at = PacedPosition::read(&state).unwrap();
        assert_eq!((at.shard, at.shards, at.generated), (1, 2, 3000));
        assert!(at.elapsed >= Duration::from_secs(1), "{:?}", at.elapsed);

        let start = Instant::now();
        let mut b = PacedSource::new(
            WaGenerator::new(&cfg, 1, 2),
            Pacer::new(start, Some(1_000_000), None, 1, 2),
        );
        b.restore(&state).unwrap();
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let mut rest: Vec<WaEvent> = Vec::new();
        let t = Instant::now();
        loop {
            match b.poll(&mut buf, 1000) {
                SourcePoll::Done => break,
                _ => rest.extend_from_slice(&buf),
            }
            assert!(t.elapsed() < Duration::from_secs(10), "it never ended");
        }
        assert_eq!(first.len() + rest.len(), 5000, "shard 1 of 2 of 10,000");
        // The same events as an unbroken shard, times apart.
        let mut all = vec![WaEvent::default(); 5000];
        assert_eq!(WaGenerator::new(&cfg, 1, 2).fill(&mut all), 5000);
        let strip = |e: &WaEvent| (e.key, e.value);
        assert!(first.iter().map(strip).eq(all[..3000].iter().map(strip)));
        assert!(rest.iter().map(strip).eq(all[3000..].iter().map(strip)));
        // Restamped: the next event at the start's wall-clock time, the
        // rest at the stream's rate (1,000 a ms in all: 5,000 in 4 ms for
        // every other event).
        let t_next = rest[0].time_ms;
        assert!(t_next.abs_diff(wall) < 1000, "{t_next} vs {wall}");
        assert!(t_next > first[2999].time_ms + 1_000_000, "not restamped");
        assert!(rest.last().unwrap().time_ms - t_next <= 5);

        let mut other = PacedSource::new(
            WaGenerator::new(&cfg, 0, 3),
            Pacer::new(start, Some(1_000_000), None, 0, 3),
        );
        let e = other.restore(&state).unwrap_err();
        assert!(e.contains("worker count it was taken at (2 in all"), "{e}");
        let e = other.restore(&[0u8; 40]).unwrap_err();
        assert!(e.contains("not a paced generator"), "{e}");
    }

    /// An output's batches are 5 ms of events (at least 1, at most the
    /// buffer), and the `n`-th event is written no earlier than `n / R`.
    #[test]
    fn output_pace_batches_and_waits() {
        assert_eq!(OutputPace::new(None), None);
        assert_eq!(OutputPace::new(Some(0)), None);
        let p = OutputPace::new(Some(1_000_000)).unwrap();
        assert_eq!(p.batch(4096), 4096);
        assert_eq!(p.batch(100_000), 5000);
        assert_eq!(OutputPace::new(Some(10)).unwrap().batch(4096), 1);
        let p = OutputPace::new(Some(1000)).unwrap();
        assert_eq!(p.batch(4096), 5);
        let t = Instant::now();
        p.wait_for(0);
        assert!(t.elapsed() < Duration::from_millis(50));
        p.wait_for(100);
        // Due 100 ms after the pace was made.
        assert!(
            t.elapsed() >= Duration::from_millis(99),
            "{:?}",
            t.elapsed()
        );
    }
}
