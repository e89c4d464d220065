//! Hot keys at run time, without a master (issue 32; docs/design.md, "Hot
//! keys").
//!
//! Keys go to workers by their key group ([`crate::keygroups`]), a fixed
//! hash. With skewed keys (Zipf click streams, NEXMark's hot auctions) the
//! worker owning the hottest groups receives several times its share, and
//! the whole job runs at its speed. For an aggregate that can merge partial
//! results (every `AggregateFunction` has `merge`), a sender need not send
//! a hot key's records at all: it aggregates them itself, per window, and
//! sends the owner one partial per window (two-phase or "local-global"
//! aggregation, as Flink SQL does for skew, applied to the hot keys only;
//! AutoFlow's key splitting spreads a hot key the same way). The records of
//! a hot key are then processed where they were read, spread over every
//! worker, and the owner merges a handful of partials.
//!
//! [`HotGroups`] is the sender's judge of which groups are hot. Every
//! sender decides for itself from what it sends: no agreement is needed,
//! because the owner's result is the same whichever records came as
//! partials (the merge is exact), so there is no master, no vote and no
//! pause. It samples one record in [`SAMPLE_EVERY`] on average (random
//! gaps, not a hash test, so every key is sampled at its rate), counts samples per key
//! group, and at the end of every period (`--rebalance-ms`, at a flush tick,
//! once [`MIN_SAMPLES_PER_WORKER`] per worker were taken; the first period
//! samples every record and ends at half that many, at the sample) judges:
//! the groups with more than `1 / (`[`HOT_SHARE`]` · W)` of the samples (W
//! workers) are candidates, and while the owners' load projected from the
//! samples (each owner's cold groups) has its busiest owner more than
//! [`BALANCE`] over the mean, that owner's heaviest candidate turns hot. A
//! hot group stays hot while above half the bound (hysteresis: a group
//! near it does not flap every period), unless the owners stay within
//! [`RELEASE`] of the mean with its records back. So keys that hash evenly are left
//! alone however few they are (YSB's 100 campaigns at 2 workers), and only
//! as many hot groups are split as even out the owners. A group is a key's
//! hash range, so a hot group may hold a few cold keys too: they are
//! aggregated at the sender as well, which is exact and costs nothing
//! extra.
//!
//! Why `1 / (64 · W)`: what is left after the hot groups is a long tail of
//! keys each below that share, and hashing a tail of small keys over W
//! workers is even to a few percent (Zipf 1.0 over 100,000 keys at 8
//! workers: the 42 hottest keys are candidates, 36% of the records; the
//! rest hash to within about 7% of the mean). Uniform keys never reach it (every
//! group holds `1 / K` of the records, `K / (64 · W)` ≥ 18 times less than
//! the bound at the largest shapes), so they cost one sample count every
//! [`SAMPLE_EVERY`] records and a bit test per record.

use crate::keygroups::KeyGroups;
use std::time::{Duration, Instant};

/// One record in this many is sampled into the per-group counts.
pub const SAMPLE_EVERY: u32 = 32;

/// A group is hot above `1 / (HOT_SHARE · W)` of the sampled records (W
/// workers in the job); it stays hot above half that.
pub const HOT_SHARE: u64 = 64;

/// The projected balance a judgment aims at, as a fraction: candidates
/// turn hot while the busiest owner's sampled load is above 105/100 of the
/// mean.
pub const BALANCE: (u64, u64) = (105, 100);

/// A hot group the owners no longer need turns cold if the busiest owner
/// stays within 102/100 of the mean with its records back (tighter than
/// [`BALANCE`], so a group does not flap between the two).
pub const RELEASE: (u64, u64) = (102, 100);

/// Samples a period needs before it decides, per worker of the job
/// (fewer: the period goes on): `8 · HOT_SHARE` a worker, so a group at the
/// bound has 8 samples on average.
pub const MIN_SAMPLES_PER_WORKER: u64 = 8 * HOT_SHARE;

/// The period when not set (`--rebalance-ms`): 100 ms.
pub const DEFAULT_PERIOD: Duration = Duration::from_millis(100);

/// How a job handles hot keys (`JobConfig::rebalance`; `air run
/// --rebalance on|off --rebalance-ms MS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rebalance {
    /// Judge hot key groups and aggregate them at the senders (default
    /// on). Off: every record goes to its key's owner.
    pub on: bool,
    /// How often each sender judges which groups are hot again.
    pub period: Duration,
    /// Samples a sender takes per worker of the job before it judges
    /// (one record in [`SAMPLE_EVERY`] is sampled; default
    /// [`MIN_SAMPLES_PER_WORKER`]). Its first judgment comes as soon as it
    /// has half of them, every record sampled until then; later ones at the first flush tick a period after the
    /// last, once it has them again. Tests set 1 to split hot keys from
    /// the first records.
    pub min_samples: u64,
}

impl Default for Rebalance {
    fn default() -> Self {
        Rebalance {
            on: true,
            period: DEFAULT_PERIOD,
            min_samples: MIN_SAMPLES_PER_WORKER,
        }
    }
}

/// What a [`HotGroups`] did over a run (counters for the report).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HotFigures {
    /// Periods judged.
    pub periods: u64,
    /// The most groups hot at once.
    pub hot_max: u64,
    /// Groups that turned hot or cold, summed over periods.
    pub changes: u64,
    /// Records of hot groups (kept at the sender).
    pub hot_records: u64,
}

/// One sender's judge of hot key groups on one edge (see the module's
/// documentation). Memory: 4 bytes of counts and 1 bit per key group
/// (136 KiB at the default 32,768 groups), only when on.
#[derive(Debug)]
pub struct HotGroups {
    groups: KeyGroups,
    /// Sampled records per group this period (empty when off).
    counts: Vec<u32>,
    /// Bit `g` set: group `g` is hot.
    hot: Vec<u64>,
    /// Some group is hot (the per-record bit test is skipped otherwise).
    any: bool,
    /// Records until the next sample.
    skip: u32,
    /// The sampling gaps' random state (xorshift64).
    rng: u64,
    /// Samples this period.
    samples: u64,
    /// Samples a period needs before it is judged.
    need: u64,
    period: Duration,
    /// When this period started (the first tick).
    since: Option<Instant>,
    /// Groups hot now.
    hot_now: u64,
    /// What it did.
    pub figures: HotFigures,
}

impl HotGroups {
    /// The judge of a sender whose keys go to `groups` (the edge's key
    /// groups over the job's workers); off (every group cold, no counts)
    /// unless `rebalance.on` and the job has more than one worker.
    pub fn new(groups: KeyGroups, rebalance: Rebalance) -> HotGroups {
        let on = rebalance.on && groups.workers() > 1;
        let k = if on { groups.groups() as usize } else { 0 };
        HotGroups {
            groups,
            counts: vec![0; k],
            hot: vec![0; k.div_ceil(64)],
            any: false,
            skip: if on { 1 } else { u32::MAX },
            rng: 0x9e37_79b9_7f4a_7c15,
            samples: 0,
            need: rebalance.min_samples.max(1) * groups.workers() as u64,
            period: rebalance.period.max(Duration::from_millis(1)),
            since: None,
            hot_now: 0,
            figures: HotFigures::default(),
        }
    }

    /// The worker that owns key group `group` in the even ranges.
    #[inline(always)]
    pub fn owner_of_group(&self, group: u32) -> usize {
        self.groups.owner_of_group(group)
    }

    /// Whether it judges at all.
    pub fn is_on(&self) -> bool {
        !self.counts.is_empty()
    }

    /// The owner of the key whose hash is `hash`, or `None` if its group
    /// is hot (the sender aggregates it). Samples one call in
    /// [`SAMPLE_EVERY`].
    #[inline(always)]
    pub fn owner_unless_hot(&mut self, hash: u64) -> Option<usize> {
        self.group_unless_hot(hash)
            .map(|g| self.groups.owner_of_group(g))
    }

    /// The key group of the key whose hash is `hash`, or `None` if it is
    /// hot ([`HotGroups::owner_unless_hot`]; the caller finds the group's
    /// owner now, which may have moved: [`crate::dataflow::Cx::owner_of_group`]).
    #[inline(always)]
    pub fn group_unless_hot(&mut self, hash: u64) -> Option<u32> {
        let g = self.groups.group(hash);
        self.skip -= 1;
        if self.skip == 0 {
            self.sample(g);
        }
        if self.any && (self.hot[(g >> 6) as usize] >> (g & 63)) & 1 != 0 {
            self.figures.hot_records += 1;
            return None;
        }
        Some(g)
    }

    #[cold]
    fn sample(&mut self, g: u32) {
        if let Some(c) = self.counts.get_mut(g as usize) {
            *c = c.saturating_add(1);
            self.samples += 1;
            // A random gap of 1 ..= 2·SAMPLE_EVERY − 1 records (mean
            // SAMPLE_EVERY), so a stream with a period does not alias with
            // the sampling.
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            self.skip = 1 + (self.rng % (2 * SAMPLE_EVERY as u64 - 1)) as u32;
            if self.figures.periods == 0 {
                // Until the first judgment every record is sampled, and it
                // comes as soon as there are half the samples: the records
                // of hot keys sent before it are the run's imbalance.
                self.skip = 1;
                if 2 * self.samples >= self.need {
                    self.judge();
                }
            }
        } else {
            self.skip = u32::MAX;
        }
    }

    /// At a flush tick: judges the groups again once the period passed
    /// and enough samples were taken (the first time: as soon as they
    /// were).
    pub fn tick(&mut self, now: Instant) {
        if !self.is_on() {
            return;
        }
        let since = *self.since.get_or_insert(now);
        if self.figures.periods > 0
            && now.duration_since(since) >= self.period
            && self.samples >= self.need
        {
            self.judge();
            self.since = Some(now);
        }
    }

    /// Marks hot the groups above the bound, keeps hot those above half
    /// of it, and starts a new period.
    fn judge(&mut self) {
        let w = self.groups.workers();
        let (on, off) = (HOT_SHARE * w as u64, 2 * HOT_SHARE * w as u64);
        let samples = self.samples;
        // Hot groups above half the bound stay hot; the others' samples
        // are the owners' projected load, and those above the bound are
        // the candidates, by owner.
        let mut next = vec![0u64; self.hot.len()];
        let mut load = vec![0u64; w];
        let mut candidates: Vec<Vec<(u32, u32)>> = vec![Vec::new(); w];
        let mut kept: Vec<(u32, u32)> = Vec::new();
        for (g, &c) in self.counts.iter().enumerate() {
            if c == 0 {
                continue;
            }
            let was = (self.hot[g >> 6] >> (g & 63)) & 1 != 0;
            if was && c as u64 * off > samples {
                next[g >> 6] |= 1 << (g & 63);
                kept.push((c, g as u32));
                continue;
            }
            let owner = self.groups.owner_of_group(g as u32);
            load[owner] += c as u64;
            if c as u64 * on > samples {
                candidates[owner].push((c, g as u32));
            }
        }
        for c in &mut candidates {
            // Ascending: `pop` takes the heaviest.
            c.sort_unstable();
        }
        // Greedy: while the busiest owner is more than BALANCE over the
        // mean, its heaviest candidate turns hot (its records leave every
        // owner's load: they stay at their senders).
        loop {
            let total: u64 = load.iter().sum();
            let (busiest, &max) = load
                .iter()
                .enumerate()
                .max_by_key(|&(i, l)| (*l, std::cmp::Reverse(i)))
                .expect("at least one worker");
            if max * w as u64 * BALANCE.1 <= total * BALANCE.0 {
                break;
            }
            let Some((c, g)) = candidates[busiest].pop() else {
                break;
            };
            next[(g >> 6) as usize] |= 1 << (g & 63);
            load[busiest] -= c as u64;
        }
        // Groups kept hot that the owners do not need (a noisy judgment's,
        // or a distribution that changed) go back, lightest first, while
        // the busiest owner stays within RELEASE of the mean.
        kept.sort_unstable();
        let mut total: u64 = load.iter().sum();
        for (c, g) in kept {
            let owner = self.groups.owner_of_group(g);
            let (with, total_with) = (load[owner] + c as u64, total + c as u64);
            let max = load.iter().copied().max().unwrap_or(0).max(with);
            if max * w as u64 * RELEASE.1 <= total_with * RELEASE.0 {
                next[(g >> 6) as usize] &= !(1 << (g & 63));
                load[owner] = with;
                total = total_with;
            }
        }
        let mut now = 0u64;
        let mut changes = 0u64;
        for (word, n) in self.hot.iter_mut().zip(next) {
            changes += (n ^ *word).count_ones() as u64;
            now += n.count_ones() as u64;
            *word = n;
        }
        self.counts.fill(0);
        self.samples = 0;
        self.any = now > 0;
        self.hot_now = now;
        self.figures.periods += 1;
        self.figures.changes += changes;
        self.figures.hot_max = self.figures.hot_max.max(now);
    }

    /// Groups hot now.
    pub fn hot_now(&self) -> u64 {
        self.hot_now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judge_after(h: &mut HotGroups, hashes: impl Iterator<Item = u64>) -> Vec<Option<usize>> {
        let out = hashes.map(|x| h.owner_unless_hot(x)).collect();
        h.judge();
        out
    }

    /// A group with a quarter of the records turns hot after one period
    /// (its records then stay at the sender), uniform groups stay cold,
    /// and the hot group turns cold again once its share falls below
    /// half the bound.
    #[test]
    fn a_hot_group_is_found_and_let_go() {
        let groups = KeyGroups::new(1024, 4).unwrap();
        let mut h = HotGroups::new(groups, Rebalance::default());
        let hot_hash = 12345u64 << 40;
        let hot_group = groups.group(hot_hash);
        let mixed = |n: u64| {
            (0..n).map(move |i| {
                if i % 4 == 0 {
                    hot_hash
                } else {
                    crate::mix64(i)
                }
            })
        };
        let first = judge_after(&mut h, mixed(1 << 18));
        // Judged by itself once it had 256 samples a worker (every record
        // sampled until then: 1,024 records here): nothing is hot before,
        // the hot key's records are kept after.
        assert!(first[..1000].iter().all(|o| o.is_some()));
        assert!(first[2048..].iter().step_by(4).all(|o| o.is_none()));
        assert_eq!(h.figures.periods, 2);
        assert_eq!(h.owner_unless_hot(hot_hash), None);
        let cold = crate::mix64(7);
        assert_eq!(h.owner_unless_hot(cold), Some(groups.owner(cold)));
        // Uniform keys for a period: the group falls below the bound.
        judge_after(&mut h, (0..1u64 << 18).map(crate::mix64));
        assert_eq!(h.hot_now(), 0);
        assert_eq!(
            h.owner_unless_hot(hot_hash),
            Some(groups.owner_of_group(hot_group))
        );
        // The hot group turned hot and cold (the first judgment, on half
        // the samples, may also have caught a cold group or two by chance:
        // they turn cold at the next).
        assert!(h.figures.changes >= 2, "{:?}", h.figures);
        assert!(h.figures.hot_max >= 1);
    }

    /// Hysteresis: a hot group the owners still need stays hot below the
    /// bound (down to half of it), a cold one at the same share does not
    /// turn hot, and a hot group the owners no longer need turns cold.
    #[test]
    fn groups_near_the_bound_do_not_flap() {
        let groups = KeyGroups::new(1024, 2).unwrap();
        let mut h = HotGroups::new(
            groups,
            Rebalance {
                min_samples: u64::MAX / 4,
                ..Rebalance::default()
            },
        );
        // Group g's hash (K = 1024: the top 10 bits); worker 0 owns groups
        // 0..512. `a` and `b` are worker 0's; small keys (each below the
        // bound, 1/128 of the records at 2 workers) on both sides.
        let key = |g: u64| g << 54;
        let (a, b) = (key(0), key(300));
        let round = |left: u64, right: u64, an: u64, bn: u64| {
            let mut r: Vec<u64> = (1..=left).chain(600..600 + right).map(key).collect();
            r.extend(std::iter::repeat_n(a, an as usize));
            r.extend(std::iter::repeat_n(b, bn as usize));
            r
        };
        let rounds = |r: Vec<u64>| (0..4000).flat_map(move |_| r.clone());
        // `a` 40 of 440 (9%): worker 0 has 240 : 200, 1.09 of the mean.
        judge_after(&mut h, rounds(round(200, 200, 40, 0)));
        assert_eq!(h.owner_unless_hot(a), None, "{:?}", h.figures);
        assert_eq!(h.hot_now(), 1);
        // `a` and `b` 3 of 412 (0.73%, below the bound): worker 0 would
        // have 212 : 200 (1.029) with `a` back, so `a` stays hot; `b` is
        // not a candidate.
        judge_after(&mut h, rounds(round(206, 200, 3, 3)));
        assert_eq!(h.owner_unless_hot(a), None, "{:?}", h.figures);
        assert!(h.owner_unless_hot(b).is_some());
        // Even small keys: with `a` back worker 0 has 203 : 200 (1.007),
        // so `a` turns cold.
        judge_after(&mut h, rounds(round(200, 200, 3, 0)));
        assert_eq!(h.hot_now(), 0, "{:?}", h.figures);
        assert!(h.owner_unless_hot(a).is_some());
    }

    /// Every key above the bound, but only as many turn hot as even out
    /// the owners' projected load: 10 equal keys owned by worker 0 and 6
    /// by worker 1 take 4 of worker 0's hot (7 : 6 is within 5%, 8 : 6 is
    /// not); 8 and 8 take none.
    #[test]
    fn only_enough_groups_turn_hot_to_even_out_the_owners() {
        let groups = KeyGroups::new(1024, 2).unwrap();
        // No judgment of its own: every record is sampled (exact counts)
        // until `judge`.
        let rebalance = Rebalance {
            min_samples: u64::MAX / 4,
            ..Rebalance::default()
        };
        // Group g's hash (K = 1024: the top 10 bits).
        let key = |g: u64| g << 54;
        for (left, right, hot) in [(10u64, 6u64, 4u64), (8, 8, 0)] {
            let mut h = HotGroups::new(groups, rebalance);
            let keys: Vec<u64> = (0..left).chain(600..600 + right).map(key).collect();
            judge_after(&mut h, (0..1000).flat_map(|_| keys.iter().copied()));
            assert_eq!(h.hot_now(), hot, "{left} : {right}");
            let kept: Vec<u64> = keys
                .iter()
                .copied()
                .filter(|&k| h.owner_unless_hot(k).is_none())
                .collect();
            assert!(kept.iter().all(|&k| groups.owner(k) == 0));
            assert_eq!(kept.len() as u64, hot);
        }
    }

    /// Off, or a job of one worker: every record goes to its owner and
    /// nothing is counted.
    #[test]
    fn off_judges_nothing() {
        for (workers, on) in [(4, false), (1, true)] {
            let groups = KeyGroups::new(64, workers).unwrap();
            let mut h = HotGroups::new(
                groups,
                Rebalance {
                    on,
                    ..Rebalance::default()
                },
            );
            assert!(!h.is_on());
            for i in 0..100_000u64 {
                assert_eq!(h.owner_unless_hot(7), Some(groups.owner(7)), "{i}");
            }
            h.tick(Instant::now());
            assert_eq!(h.figures, HotFigures::default());
        }
    }
}
