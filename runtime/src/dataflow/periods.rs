//! Records each worker received per edge in each period of wall time: the
//! report's load per period (issue 32), so that a load that changes during
//! a run (hot keys that move) shows when it changed and how soon the
//! senders' hot-key judgments ([`crate::hotkeys`]) evened it again.
//!
//! The cost is at flush ticks only: a worker compares the tick's time with
//! the end of the current period, and at a period's end copies its edges'
//! cumulative `records_in` counters (already counted per batch by the
//! exchange). A period is closed by the first tick at or after its end
//! (ticks are at most an idle tick, 10 ms, apart while the worker runs),
//! so its records are those received up to that tick.

use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Periods a worker keeps before it merges them pairwise (doubling the
/// period): 4096 periods, 410 s at the default 100 ms, so a worker of a
/// long run keeps at most `4096 × edges` counters.
pub const MAX_PERIODS: usize = 4096;

/// Records a worker received on each edge in each period of wall time
/// from its start ([`super::WorkerReport::records_in_periods`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeriodRecords {
    /// The period, ms: the job's `JobConfig::rebalance` period, doubled
    /// as often as the run needed to keep at most [`MAX_PERIODS`] (0: no
    /// periods).
    pub period_ms: u64,
    /// The first period's start, ms since the Unix epoch (the worker's
    /// start).
    pub start_unix_ms: u64,
    /// Per period, in order: records received on each edge during it (the
    /// last period is cut short by the job's end).
    pub records: Vec<Vec<u64>>,
}

/// A worker's period counter ([`PeriodRecords`] as it runs).
#[derive(Debug)]
pub(crate) struct PeriodCounts {
    start: Instant,
    start_unix_ms: u64,
    every: Duration,
    /// The end of the period being counted.
    next: Instant,
    edges: usize,
    /// The cumulative counts per edge at the end of each closed period,
    /// row after row (`edges` a row).
    ends: Vec<u64>,
}

impl PeriodCounts {
    /// Periods of `every` (at least 1 ms) from `start`, over `edges` edges.
    pub(crate) fn new(start: Instant, every: Duration, edges: usize) -> PeriodCounts {
        let every = every.max(Duration::from_millis(1));
        let start_unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
            .saturating_sub(start.elapsed().as_millis() as u64);
        PeriodCounts {
            start,
            start_unix_ms,
            every,
            next: start + every,
            edges,
            ends: Vec::new(),
        }
    }

    /// At a flush tick at `now`: closes the periods that ended by then with
    /// the edges' cumulative counts (`cumulative(e)` for edge `e`); a
    /// period skipped whole (no tick in it) closes empty.
    #[inline]
    pub(crate) fn tick(&mut self, now: Instant, cumulative: impl Fn(usize) -> u64) {
        if now >= self.next {
            self.close(now, &cumulative);
        }
    }

    #[cold]
    fn close(&mut self, now: Instant, cumulative: &dyn Fn(usize) -> u64) {
        while self.next <= now {
            // A skipped period repeats the last counts: what came in it is
            // counted in the period its closing tick fell in.
            let rows = self.ends.len() / self.edges.max(1);
            let last = self.next + self.every > now;
            for e in 0..self.edges {
                let v = if last || rows == 0 {
                    cumulative(e)
                } else {
                    self.ends[(rows - 1) * self.edges + e]
                };
                self.ends.push(v);
            }
            self.next += self.every;
            if self.edges == 0 {
                break;
            }
        }
        if self.ends.len() / self.edges.max(1) >= MAX_PERIODS {
            // Merge pairs: the ends of odd periods are the ends of the
            // doubled ones.
            let e = self.edges;
            let rows = self.ends.len() / e;
            let kept: Vec<u64> = (0..rows / 2)
                .flat_map(|r| self.ends[(2 * r + 1) * e..(2 * r + 2) * e].iter().copied())
                .collect();
            self.ends = kept;
            self.every *= 2;
            self.next = self.start + self.every * (rows / 2 + 1) as u32;
        }
    }

    /// The periods, the last closed with the final counts `totals` (per
    /// edge).
    pub(crate) fn finish(self, totals: &[u64]) -> PeriodRecords {
        let e = self.edges;
        let mut records = Vec::new();
        let mut prev = vec![0u64; e];
        let rows = self.ends.chunks(e.max(1)).filter(|_| e > 0);
        for row in rows.chain(std::iter::once(totals)) {
            records.push(
                row.iter()
                    .zip(&prev)
                    .map(|(a, b)| a.saturating_sub(*b))
                    .collect(),
            );
            prev = row.to_vec();
        }
        PeriodRecords {
            period_ms: self.every.as_millis() as u64,
            start_unix_ms: self.start_unix_ms,
            records,
        }
    }
}

impl PeriodRecords {
    /// No periods (a report that left them out).
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// These periods merged `factor` at a time (a worker that doubled its
    /// period fewer times than another).
    pub fn coarsened(&self, factor: usize) -> Vec<Vec<u64>> {
        let factor = factor.max(1);
        self.records
            .chunks(factor)
            .map(|c| {
                let mut sum = vec![0u64; c.first().map_or(0, Vec::len)];
                for row in c {
                    for (s, v) in sum.iter_mut().zip(row) {
                        *s += v;
                    }
                }
                sum
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts closed at ticks become per-period differences; a skipped
    /// period is empty; the last period takes the rest.
    #[test]
    fn ticks_close_periods_and_the_end_the_last() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut p = PeriodCounts::new(t0, ms(100), 2);
        p.tick(t0 + ms(50), |_| 99); // within period 0: nothing closes
        p.tick(t0 + ms(101), |e| [10, 1][e]);
        p.tick(t0 + ms(150), |_| 1000);
        p.tick(t0 + ms(320), |e| [40, 4][e]); // periods 1 (skipped) and 2
        let r = p.finish(&[45, 9]);
        assert_eq!(r.period_ms, 100);
        assert_eq!(
            r.records,
            [vec![10, 1], vec![0, 0], vec![30, 3], vec![5, 5]]
        );
        assert_eq!(r.coarsened(2), [vec![10, 1], vec![35, 8]]);
    }

    /// A long run merges periods pairwise and doubles the period.
    #[test]
    fn a_long_run_doubles_its_period() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut p = PeriodCounts::new(t0, ms(1), 1);
        for k in 1..=(MAX_PERIODS as u64 + 10) {
            p.tick(t0 + ms(k), |_| k);
        }
        let r = p.finish(&[MAX_PERIODS as u64 + 20]);
        assert_eq!(r.period_ms, 2);
        assert!(
            r.records.len() <= MAX_PERIODS / 2 + 10,
            "{}",
            r.records.len()
        );
        assert!(r.records[..r.records.len() - 1].iter().all(|v| v == &[2]));
        let total: u64 = r.records.iter().map(|v| v[0]).sum();
        assert_eq!(total, MAX_PERIODS as u64 + 20);
    }
}
