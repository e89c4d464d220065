//! Stateless operators fused into the worker's loop: a chain of them is one
//! concrete type (static dispatch, inlined), applied to each record with the
//! consumer of its outputs given at the call.

use super::Stats;
use std::cell::Cell;
use std::marker::PhantomData;
use std::rc::Rc;

/// A chain of fused stateless operators from `In` to `Self::Out`.
pub trait Pipe<In>: 'static {
    /// Output record type.
    type Out;
    /// Pushes `x` through the chain, calling `emit` for every output.
    fn run<E: FnMut(Self::Out)>(&mut self, x: In, emit: &mut E);
    /// The watermark of the chain's event-time stage ([`EventTime`]), ms,
    /// if it has one.
    fn watermark(&self) -> Option<u64> {
        None
    }
    /// The flush interval passed (idleness).
    fn tick(&mut self) {}
    /// Adds the chain's counters to `stats` once the job ended.
    fn report(&self, stats: &mut Stats) {
        let _ = stats;
    }
    /// Asks the chain's event-time stage ([`EventTime`]) to pass records
    /// behind its watermark on instead of dropping them, for an operator
    /// at the chain's end that judges lateness itself (a windowed
    /// operator): before emitting such a record the stage stores
    /// its watermark (ms) in `gate`, so a record `t < gate.get()` read
    /// right after it arrived is behind the watermark `gate.get()`.
    /// Returns whether the chain has an event-time stage.
    fn pass_late(&mut self, gate: &Rc<Cell<u64>>) -> bool {
        let _ = gate;
        false
    }
    /// Appends the chain's state at a checkpoint barrier (its event-time
    /// stage's newest event time and watermark, ms), stage by stage from
    /// the first.
    fn save(&self, out: &mut Vec<u64>) {
        let _ = out;
    }
    /// Takes back what `save` appended, in the same order.
    ///
    /// # Errors
    /// Too few values (a checkpoint of another graph).
    fn restore(&mut self, state: &mut std::slice::Iter<'_, u64>) -> Result<(), String> {
        let _ = state;
        Ok(())
    }
}

/// The next value of a chain's saved state ([`Pipe::restore`]).
fn next_value(state: &mut std::slice::Iter<'_, u64>) -> Result<u64, String> {
    state
        .next()
        .copied()
        .ok_or_else(|| "the saved state of a chain is too short".to_string())
}

/// Delegates the watermark, tick and report of a chain to its inner chain.
macro_rules! inner_stage {
    () => {
        fn watermark(&self) -> Option<u64> {
            self.0.watermark()
        }
        fn tick(&mut self) {
            self.0.tick()
        }
        fn report(&self, stats: &mut Stats) {
            self.0.report(stats)
        }
        fn pass_late(&mut self, gate: &Rc<Cell<u64>>) -> bool {
            self.0.pass_late(gate)
        }
        fn save(&self, out: &mut Vec<u64>) {
            self.0.save(out)
        }
        fn restore(&mut self, state: &mut std::slice::Iter<'_, u64>) -> Result<(), String> {
            self.0.restore(state)
        }
    };
}

/// The empty chain.
#[derive(Debug, Clone, Copy, Default)]
pub struct Identity;

impl<T> Pipe<T> for Identity {
    type Out = T;
    #[inline(always)]
    fn run<E: FnMut(T)>(&mut self, x: T, emit: &mut E) {
        emit(x)
    }
}

/// `map`: one output per input.
pub struct Map<P, F, O>(
    pub(crate) P,
    pub(crate) F,
    pub(crate) PhantomData<fn() -> O>,
);

impl<In, P: Pipe<In>, F: FnMut(P::Out) -> O + 'static, O: 'static> Pipe<In> for Map<P, F, O> {
    type Out = O;
    #[inline(always)]
    fn run<E: FnMut(O)>(&mut self, x: In, emit: &mut E) {
        let f = &mut self.1;
        self.0.run(x, &mut |y| emit(f(y)))
    }
    inner_stage!();
}

/// `filter`: keeps inputs for which the predicate holds.
pub struct Filter<P, F>(pub(crate) P, pub(crate) F);

impl<In, P: Pipe<In>, F: FnMut(&P::Out) -> bool + 'static> Pipe<In> for Filter<P, F> {
    type Out = P::Out;
    #[inline(always)]
    fn run<E: FnMut(P::Out)>(&mut self, x: In, emit: &mut E) {
        let f = &mut self.1;
        self.0.run(x, &mut |y| {
            if f(&y) {
                emit(y)
            }
        })
    }
    inner_stage!();
}

/// `flat_map`: zero or more outputs per input.
pub struct FlatMap<P, F, I>(
    pub(crate) P,
    pub(crate) F,
    pub(crate) PhantomData<fn() -> I>,
);

impl<In, P: Pipe<In>, F: FnMut(P::Out) -> I + 'static, I: IntoIterator + 'static> Pipe<In>
    for FlatMap<P, F, I>
{
    type Out = I::Item;
    #[inline(always)]
    fn run<E: FnMut(I::Item)>(&mut self, x: In, emit: &mut E) {
        let f = &mut self.1;
        self.0.run(x, &mut |y| {
            for z in f(y) {
                emit(z)
            }
        })
    }
    inner_stage!();
}

/// `inspect`: sees every record by reference, passes it on.
pub struct Inspect<P, F>(pub(crate) P, pub(crate) F);

impl<In, P: Pipe<In>, F: FnMut(&P::Out) + 'static> Pipe<In> for Inspect<P, F> {
    type Out = P::Out;
    #[inline(always)]
    fn run<E: FnMut(P::Out)>(&mut self, x: In, emit: &mut E) {
        let f = &mut self.1;
        self.0.run(x, &mut |y| {
            f(&y);
            emit(y)
        })
    }
    inner_stage!();
}

/// Two chains fused one after the other.
pub struct Then<P, Q>(pub(crate) P, pub(crate) Q);

impl<In, P: Pipe<In>, Q: Pipe<P::Out>> Pipe<In> for Then<P, Q> {
    type Out = Q::Out;
    #[inline(always)]
    fn run<E: FnMut(Q::Out)>(&mut self, x: In, emit: &mut E) {
        let q = &mut self.1;
        self.0.run(x, &mut |y| q.run(y, emit))
    }
    fn watermark(&self) -> Option<u64> {
        self.1.watermark().or_else(|| self.0.watermark())
    }
    fn tick(&mut self) {
        self.0.tick();
        self.1.tick();
    }
    fn report(&self, stats: &mut Stats) {
        self.0.report(stats);
        self.1.report(stats);
    }
    fn pass_late(&mut self, gate: &Rc<Cell<u64>>) -> bool {
        // The stage whose watermark the chain reports (the later one).
        self.1.pass_late(gate) || self.0.pass_late(gate)
    }
    fn save(&self, out: &mut Vec<u64>) {
        self.0.save(out);
        self.1.save(out);
    }
    fn restore(&mut self, state: &mut std::slice::Iter<'_, u64>) -> Result<(), String> {
        self.0.restore(state)?;
        self.1.restore(state)
    }
}

/// The event-time stage of a source's chain ([`super::Stream::event_time`]):
/// the watermark is the newest event time seen minus the allowed delay. A
/// record older than the watermark goes on to the operator at the chain's
/// end, which judges it (a window: late only if every window it belongs
/// to already closed) once [`Pipe::pass_late`] gave this stage a gate;
/// without a gate (the chain ends in no windowed operator, or the window
/// asked for [`drop_behind_watermark`]-style strictness) it is late here:
/// dropped and counted (`late_records`, and the [`super::LateLog`] entry
/// of this stage). With idleness, a stage that saw no record for a while
/// lets its watermark follow the wall clock. It also keeps the largest lag
/// of a record behind the newest event time ([`super::DISORDER_MAX`]).
///
/// [`drop_behind_watermark`]: super::Stream::event_time
pub struct EventTime<P, F> {
    pub(crate) inner: P,
    pub(crate) time: F,
    pub(crate) delay: u64,
    pub(crate) newest: u64,
    pub(crate) wm: u64,
    /// Records dropped here (no gate), the first of them.
    pub(crate) late: Option<super::LateRecords>,
    /// Largest `newest − t` of a record, ms.
    pub(crate) disorder: u64,
    /// Where the user's program made this stage (the late records' label).
    pub(crate) at: &'static std::panic::Location<'static>,
    /// Idle after this many ms without a record.
    pub(crate) idle_ms: Option<u64>,
    /// Records seen since the last tick (idleness).
    pub(crate) seen: bool,
    /// When the last record was seen (idleness).
    pub(crate) last_seen: std::time::Instant,
    /// Set by [`Pipe::pass_late`]: late records go on, after their
    /// watermark is stored here.
    pub(crate) gate: Option<Rc<Cell<u64>>>,
}

impl<In, P: Pipe<In>, F: Fn(&P::Out) -> u64 + 'static> Pipe<In> for EventTime<P, F> {
    type Out = P::Out;
    #[inline(always)]
    fn run<E: FnMut(P::Out)>(&mut self, x: In, emit: &mut E) {
        let EventTime {
            inner,
            time,
            delay,
            newest,
            wm,
            late,
            disorder,
            seen,
            gate,
            ..
        } = self;
        inner.run(x, &mut |y| {
            let t = time(&y);
            if t > *newest {
                *newest = t;
                // The watermark follows every record: lateness is judged
                // against every record before it, batch or not.
                *wm = (*wm).max(t.saturating_sub(*delay));
            } else {
                *disorder = (*disorder).max(*newest - t);
                if t < *wm {
                    // Behind the watermark: judged by the operator at the
                    // chain's end, or dropped here (one call site of
                    // `emit`, so the tail stays inlined).
                    match gate {
                        Some(g) => g.set(*wm),
                        None => {
                            super::LateRecords::count(late, t, *wm);
                            return;
                        }
                    }
                }
            }
            *seen = true;
            emit(y)
        })
    }
    fn watermark(&self) -> Option<u64> {
        Some(self.wm)
    }
    fn tick(&mut self) {
        self.inner.tick();
        if let Some(idle) = self.idle_ms {
            if std::mem::take(&mut self.seen) {
                self.last_seen = std::time::Instant::now();
            } else if self.last_seen.elapsed().as_millis() as u64 >= idle {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64);
                self.wm = self.wm.max(now.saturating_sub(idle));
            }
        }
    }
    fn report(&self, stats: &mut Stats) {
        self.inner.report(stats);
        stats.add_late(&format!("event-time stage at {}", self.at), self.late);
        stats.max(super::DISORDER_MAX, self.disorder);
    }
    fn pass_late(&mut self, gate: &Rc<Cell<u64>>) -> bool {
        self.gate = Some(gate.clone());
        true
    }
    fn save(&self, out: &mut Vec<u64>) {
        self.inner.save(out);
        out.extend([self.newest, self.wm]);
    }
    fn restore(&mut self, state: &mut std::slice::Iter<'_, u64>) -> Result<(), String> {
        self.inner.restore(state)?;
        self.newest = next_value(state)?;
        self.wm = next_value(state)?;
        Ok(())
    }
}

/// Ingestion time (Flink's `IngestionTime`), the processing-time stage of
/// a source's chain: each record leaves as `(t, record)`, `t` the wall
/// clock when it reached this stage (ms since the Unix epoch), and the
/// stage's watermark follows the wall clock, so windows over `t` close in
/// real time whether records come or not. Made by
/// [`Stream::ingestion_time`](super::Stream::ingestion_time).
///
/// The clock is read once per [`INGESTION_CLOCK_EVERY`] records (and at
/// every flush tick), so a stamp may be behind the true time by the time
/// those records took; stamps never decrease (a monotonic clock carries a
/// wall-clock reading taken when the stage was made), and the watermark is
/// the newest stamp given, so no record is ever behind it (none is late).
pub struct IngestionTime<P> {
    pub(crate) inner: P,
    /// Wall clock at `base`, ms since the Unix epoch.
    pub(crate) base_ms: u64,
    pub(crate) base: std::time::Instant,
    /// The stamp given to records, ms.
    pub(crate) now: u64,
    /// Records until the clock is read again.
    pub(crate) left: u32,
    pub(crate) wm: u64,
}

/// How many records [`IngestionTime`] stamps per reading of the clock.
pub const INGESTION_CLOCK_EVERY: u32 = 64;

impl<P> IngestionTime<P> {
    pub(crate) fn new(inner: P) -> Self {
        let base_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        IngestionTime {
            inner,
            base_ms,
            base: std::time::Instant::now(),
            now: base_ms,
            left: 0,
            wm: base_ms,
        }
    }

    /// Reads the clock: the stamp moves on (never back).
    fn read_clock(&mut self) {
        let t = self
            .base_ms
            .saturating_add(self.base.elapsed().as_millis() as u64);
        self.now = self.now.max(t);
        self.left = INGESTION_CLOCK_EVERY;
    }
}

impl<In, P: Pipe<In>> Pipe<In> for IngestionTime<P> {
    type Out = (u64, P::Out);
    #[inline(always)]
    fn run<E: FnMut((u64, P::Out))>(&mut self, x: In, emit: &mut E) {
        if self.left == 0 {
            self.read_clock();
        }
        self.left -= 1;
        let now = self.now;
        self.inner.run(x, &mut |y| emit((now, y)))
    }
    fn watermark(&self) -> Option<u64> {
        Some(self.wm)
    }
    fn tick(&mut self) {
        self.inner.tick();
        self.read_clock();
        self.wm = self.now;
    }
    fn report(&self, stats: &mut Stats) {
        self.inner.report(stats);
    }
    fn pass_late(&mut self, _gate: &Rc<Cell<u64>>) -> bool {
        // A time stage whose records are never behind its watermark.
        true
    }
    fn save(&self, out: &mut Vec<u64>) {
        self.inner.save(out);
        out.push(self.wm);
    }
    fn restore(&mut self, state: &mut std::slice::Iter<'_, u64>) -> Result<(), String> {
        self.inner.restore(state)?;
        // Stamps never go back, across a resume too.
        self.wm = self.wm.max(next_value(state)?);
        self.now = self.now.max(self.wm);
        Ok(())
    }
}
