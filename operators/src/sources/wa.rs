//! The keyed-event generator of the windowed aggregation (`air run wa`),
//! AIR's "simple windowed aggregation" benchmark: events `(key, value,
//! event time)`, keys uniform over `0..keys` or Zipf-distributed.
//!
//! Event `n` (0-based) is a pure function of `(config, n)`: its key and
//! value come from one 64-bit hash of `n` — wyrand's output at state
//! `splitmix64(seed) + (n + 1)·P0`, i.e. the `n`-th output of a wyrand
//! stream, computed directly — and its event time is
//! `base_time_ms + floor(n · 1000 / events_per_s)` exactly (saturating at
//! `u64::MAX`), in integer arithmetic on the rate's exact value (an `f64` is
//! a fraction `N / 2^k`): a fractional spacing, so rates above 1000
//! events/s do not round to zero, and no event is stamped early (at 3
//! events/s event 30 is at 10 000 ms, not 9 999). Worker `w` of `W`
//! generates events `w, w + W, w + 2W, …`, so the union of the shards is the
//! same stream for any worker count, and each shard is in event-time order.
//!
//! Zipf keys: key `k` (0-based) has probability `∝ 1 / (k + 1)^s`, drawn
//! in O(1) from an alias table ([`ZipfTable`], built once per job and
//! shared) by a second 64-bit hash of the event, `mix(h ^ P0)`, so the key
//! is still a function of the event number alone. Values use the low 32
//! bits of `h` as with uniform keys: a uniform stream is unchanged.
//!
//! Moving hot keys (`zipf_shift_ms`): the Zipf rank drawn is rotated over
//! the keys by a function of the event's time ([`ZipfShift`]), so the hot
//! keys change every `zipf_shift_ms` ms of event time and the stream is
//! still a function of `(config, n)`.

use std::sync::Arc;

use super::rng::{below, splitmix64};
use super::zipf::ShiftCache;
pub use super::zipf::{ZipfShift, ZipfTable, MAX_KEYS as MAX_ZIPF_KEYS};

/// wyrand's increment and mixing constant.
const P0: u64 = 0xa076_1d64_78bd_642f;
const P1: u64 = 0xe703_7ed1_a0b4_28db;

/// The hash of the event whose wyrand state is `state`.
#[inline(always)]
fn mix(state: u64) -> u64 {
    let t = (state as u128).wrapping_mul((state ^ P1) as u128);
    (t >> 64) as u64 ^ t as u64
}

/// The lowest `events_per_s` accepted (one event per 1000 s).
pub const MIN_EVENTS_PER_S: f64 = 0.001;
/// The highest `events_per_s` accepted (10^15: the rate is then an exact
/// fraction with a numerator below 2^53).
pub const MAX_EVENTS_PER_S: f64 = 1e15;

/// The gap between two events, `1000 / events_per_s` ms, as an exact
/// mixed fraction `q + r / num` (`r < num`): the rate, an `f64`, is exactly
/// `num / 2^k`, so the gap is `1000 · 2^k / num`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Gap {
    q: u64,
    r: u64,
    num: u64,
}

impl Gap {
    /// The gap of `events_per_s` (validated: finite, in
    /// [`MIN_EVENTS_PER_S`]`..=`[`MAX_EVENTS_PER_S`]; outside, clamped to
    /// that range so that the arithmetic stays defined).
    fn of(events_per_s: f64) -> Gap {
        let r = if events_per_s.is_nan() {
            MIN_EVENTS_PER_S
        } else {
            events_per_s.clamp(MIN_EVENTS_PER_S, MAX_EVENTS_PER_S)
        };
        // r = m · 2^sh exactly (r is a normal f64 in this range).
        let bits = r.to_bits();
        let m = (bits & ((1 << 52) - 1)) | (1 << 52);
        let sh = ((bits >> 52) & 0x7ff) as i32 - 1075;
        let (num, k) = if sh >= 0 {
            (m << sh, 0)
        } else {
            let k = sh.unsigned_abs();
            let tz = m.trailing_zeros().min(k);
            (m >> tz, k - tz)
        };
        // k <= 62 for r >= 2^-10: 1000 · 2^k < 2^72.
        let a = 1000u128 << k;
        let num128 = num as u128;
        Gap {
            q: u64::try_from(a / num128).unwrap_or(u64::MAX),
            r: (a % num128) as u64,
            num,
        }
    }

    /// `step` gaps, as a mixed fraction over the same `num` (the quotient
    /// kept below `u64::MAX` so that adding a carry cannot overflow).
    fn times(self, step: u64) -> (u64, u64) {
        let r = step as u128 * self.r as u128;
        let q = step as u128 * self.q as u128 + r / self.num as u128;
        (
            u64::try_from(q).unwrap_or(u64::MAX).min(u64::MAX - 1),
            (r % self.num as u128) as u64,
        )
    }
}

/// One event: 24 bytes, `#[repr(C)]`, rkyv-archivable.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize,
)]
#[repr(C)]
pub struct WaEvent {
    /// The grouping key, `0..keys`.
    pub key: u64,
    /// The value summed per key and window, `0..=max_value`.
    pub value: i64,
    /// Event time, ms.
    pub time_ms: u64,
}

/// How keys are drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum KeyDist {
    /// Every key equally likely.
    Uniform,
    /// Zipf with exponent `s` (> 0): key `k` has probability ∝ 1/(k+1)^s.
    Zipf(f64),
}

/// The generator's settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WaConfig {
    /// Seed of the stream.
    pub seed: u64,
    /// Events in the whole stream (all workers).
    pub events: u64,
    /// Number of distinct keys (> 0).
    pub keys: u64,
    /// Key distribution.
    pub dist: KeyDist,
    /// Event-time rate: events per second of event time (> 0).
    pub events_per_s: f64,
    /// Event time of event 0, ms.
    pub base_time_ms: u64,
    /// Largest value (values are uniform in `0..=max_value`; at most
    /// 2^32 − 2).
    pub max_value: u64,
    /// Zipf keys only: rotate the ranks over the keys every this many ms
    /// of event time ([`ZipfShift`]), so the hot keys change; `None`: key
    /// `k` is rank `k` throughout.
    pub zipf_shift_ms: Option<u64>,
}

impl Default for WaConfig {
    fn default() -> Self {
        WaConfig {
            seed: 1,
            events: 100_000_000,
            keys: 1000,
            dist: KeyDist::Uniform,
            events_per_s: 1_000_000.0,
            base_time_ms: 0,
            max_value: 999,
            zipf_shift_ms: None,
        }
    }
}

impl WaConfig {
    /// Checks the settings.
    ///
    /// # Errors
    /// `keys` of 0, a rate that is not a positive finite number, a Zipf
    /// exponent that is not a positive finite number, Zipf keys above
    /// [`MAX_ZIPF_KEYS`] (its table: 8 bytes a key).
    pub fn validate(&self) -> Result<(), String> {
        if self.keys == 0 {
            return Err("--keys must be at least 1".into());
        }
        if !(self.events_per_s.is_finite()
            && (MIN_EVENTS_PER_S..=MAX_EVENTS_PER_S).contains(&self.events_per_s))
        {
            return Err(format!(
                "--events-per-s {}: must be a number in 0.001..=1e15",
                self.events_per_s
            ));
        }
        if self.events > 0 && self.time_of(self.events - 1) == u64::MAX {
            return Err(format!(
                "--events-per-s {} with --events {}: the last event's time overflows \
                 the millisecond clock (u64); use a higher rate or fewer events",
                self.events_per_s, self.events
            ));
        }
        match (self.zipf_shift_ms, self.dist) {
            (Some(0), _) => return Err("--zipf-shift-ms must be at least 1".into()),
            (Some(_), KeyDist::Uniform) => {
                return Err(
                    "--zipf-shift-ms moves the hot keys of --zipf keys: give --zipf above 0".into(),
                )
            }
            _ => {}
        }
        if let KeyDist::Zipf(s) = self.dist {
            if !(s.is_finite() && s > 0.0) {
                return Err(format!("--zipf {s}: the exponent must be positive"));
            }
            if self.keys > MAX_ZIPF_KEYS {
                return Err(format!(
                    "--keys {} with --zipf: at most {MAX_ZIPF_KEYS} keys (the sampling \
                     table takes 8 bytes a key)",
                    self.keys
                ));
            }
        }
        Ok(())
    }

    /// Event time of event `n`, ms: `base_time_ms + floor(n · 1000 /
    /// events_per_s)` exactly, saturating at `u64::MAX`.
    pub fn time_of(&self, n: u64) -> u64 {
        let g = Gap::of(self.events_per_s);
        let ms = n as u128 * g.q as u128 + (n as u128 * g.r as u128) / g.num as u128;
        self.base_time_ms
            .saturating_add(u64::try_from(ms).unwrap_or(u64::MAX))
    }

    /// The rotation of Zipf ranks over the keys (`zipf_shift_ms` with Zipf
    /// keys).
    pub fn shift(&self) -> Option<ZipfShift> {
        match (self.dist, self.zipf_shift_ms) {
            (KeyDist::Zipf(_), Some(ms)) => ZipfShift::new(self.keys, ms).ok(),
            _ => None,
        }
    }

    /// The wyrand state of event `n`.
    #[inline(always)]
    fn state_of(&self, n: u64) -> u64 {
        splitmix64(self.seed).wrapping_add(n.wrapping_add(1).wrapping_mul(P0))
    }
}

/// Event `n` of the stream (the sequential definition); `zipf` is
/// [`zipf_of`]`(cfg)`.
pub fn event(cfg: &WaConfig, zipf: Option<&ZipfTable>, n: u64) -> WaEvent {
    let t = cfg.time_of(n);
    let off = cfg.shift().map_or(0, |s| s.offset_at(t));
    event_at(cfg, zipf, mix(cfg.state_of(n)), t, off)
}

/// The event with hash `h` at time `time_ms`; `off`: the rotation of Zipf
/// ranks over the keys at that time (`< keys`; 0 without a shift).
#[inline(always)]
fn event_at(cfg: &WaConfig, zipf: Option<&ZipfTable>, h: u64, time_ms: u64, off: u64) -> WaEvent {
    let key = match zipf {
        None => below(h, cfg.keys),
        Some(z) => {
            let k = zipf_key(z.alias_table(), h) + off;
            if k >= cfg.keys {
                k - cfg.keys
            } else {
                k
            }
        }
    };
    // The low 32 bits (the key used the high ones): uniform in 0..=max_value
    // for max_value < 2^32, by multiply-shift.
    let value = (((h & 0xffff_ffff) * (cfg.max_value.min(u32::MAX as u64 - 1) + 1)) >> 32) as i64;
    WaEvent {
        key,
        value,
        time_ms,
    }
}

/// The Zipf key of the event with hash `h`: a second hash, `mix(h ^ P0)`,
/// gives the alias table's column and coin from all its 64 bits,
/// independent of the value's bits (h's low 32).
#[inline(always)]
fn zipf_key(table: &super::zipf::AliasTable, h: u64) -> u64 {
    table.sample(mix(h ^ P0))
}

/// The Zipf table of `cfg`, if it asks for Zipf keys: build it once per
/// job and give each worker's generator a clone of the `Arc`
/// ([`WaGenerator::with_zipf`]). About 10–20 ns and 8 bytes per key.
///
/// # Panics
/// `cfg` does not pass [`WaConfig::validate`].
pub fn zipf_of(cfg: &WaConfig) -> Option<Arc<ZipfTable>> {
    match cfg.dist {
        KeyDist::Uniform => None,
        KeyDist::Zipf(s) => Some(Arc::new(
            ZipfTable::new(cfg.keys, s).expect("a validated WaConfig"),
        )),
    }
}

/// One shard of the stream: worker `worker` of `workers` generates events
/// `worker, worker + workers, …` below `cfg.events`.
#[derive(Clone, Debug)]
pub struct WaGenerator {
    cfg: WaConfig,
    /// The Zipf table, shared by the job's generators.
    zipf: Option<Arc<ZipfTable>>,
    next: u64,
    step: u64,
    generated: u64,
    /// Event time of event `next`, ms (saturating), and the remainder of
    /// its exact value in units of `1 / num` ms (`< num`).
    time_ms: u64,
    time_rem: u64,
    /// `step` gaps: ms and remainder (units of `1 / num` ms).
    d_ms: u64,
    d_rem: u64,
    num: u64,
    /// Which shard it is: (worker, workers) it was made for.
    shard: (usize, usize),
    /// The rotation of Zipf ranks ([`WaConfig::shift`]) and its cache.
    shift: Option<ZipfShift>,
    shift_cache: ShiftCache,
}

impl WaGenerator {
    /// The shard of worker `worker` of `workers` (`worker < workers`),
    /// with a Zipf table of its own if `cfg` asks for one (a job of several
    /// workers shares one: [`WaGenerator::with_zipf`]).
    ///
    /// # Panics
    /// `cfg` does not pass [`WaConfig::validate`].
    pub fn new(cfg: &WaConfig, worker: usize, workers: usize) -> WaGenerator {
        WaGenerator::with_zipf(cfg, zipf_of(cfg), worker, workers)
    }

    /// The shard of worker `worker` of `workers` drawing Zipf keys from
    /// `zipf`, [`zipf_of`]`(cfg)` built once for the whole job.
    ///
    /// # Panics
    /// `zipf` is not the table of `cfg`'s key distribution (keys and
    /// exponent), or is missing for Zipf keys, or present for uniform ones.
    pub fn with_zipf(
        cfg: &WaConfig,
        zipf: Option<Arc<ZipfTable>>,
        worker: usize,
        workers: usize,
    ) -> WaGenerator {
        let want = match cfg.dist {
            KeyDist::Uniform => None,
            KeyDist::Zipf(s) => Some((cfg.keys, s)),
        };
        assert_eq!(
            zipf.as_ref().map(|z| (z.keys(), z.exponent())),
            want,
            "the Zipf table of another key distribution"
        );
        let gap = Gap::of(cfg.events_per_s);
        let step = workers.max(1) as u64;
        let next = worker as u64;
        let (d_ms, d_rem) = gap.times(step);
        WaGenerator {
            cfg: *cfg,
            zipf,
            next,
            step,
            generated: 0,
            time_ms: cfg.time_of(next),
            time_rem: (next as u128 * gap.r as u128 % gap.num as u128) as u64,
            d_ms,
            d_rem,
            num: gap.num,
            shard: (worker, workers.max(1)),
            shift: cfg.shift(),
            shift_cache: ShiftCache::default(),
        }
    }

    /// Writes the next events to the front of `out`; returns how many
    /// (0: the shard is exhausted).
    pub fn fill(&mut self, out: &mut [WaEvent]) -> usize {
        let cfg = &self.cfg;
        let left = cfg.events.saturating_sub(self.next).div_ceil(self.step);
        let k = (out.len() as u64).min(left) as usize;
        if k == 0 {
            return 0;
        }
        // Walk the wyrand state and the exact time (ms, and the remainder
        // in units of 1 / num ms) by `step` events: the same values `event`
        // computes from scratch.
        let mut state = cfg.state_of(self.next);
        let d_state = self.step.wrapping_mul(P0);
        let (mut t, mut rem) = (self.time_ms, self.time_rem);
        let (dq, dr, num) = (self.d_ms, self.d_rem, self.num);
        let zipf = self.zipf.as_deref();
        let (shift, cache) = (self.shift.as_ref(), &mut self.shift_cache);
        let mut off = |t: u64| shift.map_or(0, |s| cache.offset(s, t));
        let out = &mut out[..k];
        if dq == 0 && dr.saturating_mul(8) <= num {
            // At least 8 events per millisecond of this shard: runs of
            // events share a time. The current event and the next m - 1
            // have time t, m = ceil((num - rem) / dr) (the remainder then
            // wraps once: dr < num), so the per-event loop only walks the
            // hash state.
            let mut i = 0;
            while i < k {
                let m = ((num - 1 - rem) / dr + 1).min((k - i) as u64) as usize;
                let o = off(t);
                for slot in &mut out[i..i + m] {
                    *slot = event_at(cfg, zipf, mix(state), t, o);
                    state = state.wrapping_add(d_state);
                }
                i += m;
                rem += m as u64 * dr;
                if rem >= num {
                    rem -= num;
                    t = t.saturating_add(1);
                }
            }
        } else {
            for slot in out.iter_mut() {
                *slot = event_at(cfg, zipf, mix(state), t, off(t));
                state = state.wrapping_add(d_state);
                rem += dr;
                let carry = rem >= num;
                rem -= if carry { num } else { 0 };
                t = t.saturating_add(dq + u64::from(carry));
            }
        }
        (self.time_ms, self.time_rem) = (t, rem);
        self.next += k as u64 * self.step;
        self.generated += k as u64;
        k
    }

    /// Events generated so far.
    pub fn generated(&self) -> u64 {
        self.generated
    }

    /// Goes on as if it had generated `n` events already (a checkpoint's
    /// position): O(1), every event is a function of its index.
    ///
    /// # Errors
    /// It generated events already, or `n` is past its shard.
    pub fn skip_to(&mut self, n: u64) -> Result<(), String> {
        if self.generated != 0 {
            return Err("the generator already generated events".into());
        }
        let shard = self
            .cfg
            .events
            .saturating_sub(self.next)
            .div_ceil(self.step);
        if n > shard {
            return Err(format!("position {n} is past this worker's {shard} events"));
        }
        let gap = Gap::of(self.cfg.events_per_s);
        self.next += n * self.step;
        self.time_ms = self.cfg.time_of(self.next);
        self.time_rem = (self.next as u128 * gap.r as u128 % gap.num as u128) as u64;
        self.generated = n;
        Ok(())
    }
}

impl WaGenerator {
    /// Stamps the next event at `at_ms` and those after it on from there at
    /// the stream's rate (a resumed paced run,
    /// [`crate::sources::pace::Generator::restamp_next`]): the stream's
    /// `base_time_ms` moves by as much as the next event's time does.
    pub fn restamp_next(&mut self, at_ms: u64) {
        let offset = self.cfg.time_of(self.next) - self.cfg.base_time_ms;
        self.cfg.base_time_ms = at_ms.saturating_sub(offset);
        self.time_ms = self.cfg.time_of(self.next);
    }
}

impl crate::sources::shards::Sharded for WaGenerator {
    type Event = WaEvent;
    fn shard(&self) -> (usize, usize) {
        self.shard
    }
    fn sibling(&self, shard: usize, shards: usize) -> Result<Self, String> {
        if shard >= shards {
            return Err(format!("shard {shard} of {shards}"));
        }
        Ok(WaGenerator::with_zipf(
            &self.cfg,
            self.zipf.clone(),
            shard,
            shards,
        ))
    }
    fn generated(&self) -> u64 {
        self.generated
    }
    fn skip_to(&mut self, n: u64) -> Result<(), String> {
        WaGenerator::skip_to(self, n)
    }
    fn time_of(event: &WaEvent) -> u64 {
        event.time_ms
    }
    fn fill(&mut self, out: &mut [WaEvent]) -> usize {
        WaGenerator::fill(self, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A generator moved to event `n` yields what one that generated `n`
    /// events yields next, at every worker of 3.
    #[test]
    fn skip_to_continues_the_same_stream() {
        let cfg = WaConfig {
            events: 3_001,
            events_per_s: 777.0,
            ..WaConfig::default()
        };
        for w in 0..3 {
            let mut whole = WaGenerator::new(&cfg, w, 3);
            let mut all = vec![WaEvent::default(); 2_000];
            let total = whole.fill(&mut all);
            for n in [0u64, 1, 250, total as u64] {
                let mut g = WaGenerator::new(&cfg, w, 3);
                g.skip_to(n).unwrap();
                let mut rest = vec![WaEvent::default(); 2_000];
                let k = g.fill(&mut rest);
                assert_eq!(&rest[..k], &all[n as usize..total], "worker {w} at {n}");
            }
            assert!(WaGenerator::new(&cfg, w, 3)
                .skip_to(total as u64 + 1)
                .is_err());
        }
    }

    #[test]
    fn shards_walk_the_same_events_as_the_definition() {
        // Slow events (one loop per event) and fast ones (runs of events
        // sharing a millisecond), hot keys moving every few ms.
        for (dist, events_per_s, zipf_shift_ms) in [
            (KeyDist::Uniform, 333.3, None),
            (KeyDist::Zipf(1.1), 333.3, None),
            (KeyDist::Zipf(1.1), 333.3, Some(7)),
            (KeyDist::Zipf(1.1), 100_000.0, Some(3)),
        ] {
            let cfg = WaConfig {
                events: 10_007,
                keys: 97,
                dist,
                events_per_s,
                base_time_ms: 5,
                zipf_shift_ms,
                ..WaConfig::default()
            };
            let z = zipf_of(&cfg);
            for workers in [1, 2, 3, 7] {
                // Each worker with a table of its own (as `air gen wa`
                // and the tests build them) and with the job's shared one.
                let shared = (0..workers)
                    .map(|w| WaGenerator::with_zipf(&cfg, z.clone(), w, workers))
                    .collect::<Vec<_>>();
                for (w, mut g) in shared.into_iter().enumerate() {
                    let mut own = WaGenerator::new(&cfg, w, workers);
                    let (mut a, mut b) = ([WaEvent::default(); 333], [WaEvent::default(); 333]);
                    loop {
                        let k = g.fill(&mut a);
                        assert_eq!(own.fill(&mut b), k);
                        assert_eq!(a[..k], b[..k], "worker {w} of {workers}");
                        if k == 0 {
                            break;
                        }
                    }
                }
                let mut all = Vec::new();
                for w in 0..workers {
                    let mut g = WaGenerator::new(&cfg, w, workers);
                    let mut buf = vec![WaEvent::default(); 100];
                    let mut n = w as u64;
                    loop {
                        let k = g.fill(&mut buf);
                        if k == 0 {
                            break;
                        }
                        for e in &buf[..k] {
                            assert_eq!(*e, event(&cfg, z.as_deref(), n), "event {n}");
                            n += workers as u64;
                        }
                    }
                    all.push(g.generated());
                }
                assert_eq!(all.iter().sum::<u64>(), 10_007);
            }
        }
    }

    /// Exact Zipf probabilities of `keys` keys, exponent `s`, computed
    /// apart from the table.
    fn zipf_probabilities(keys: u64, s: f64) -> Vec<f64> {
        let w: Vec<f64> = (1..=keys).map(|r| (r as f64).powf(-s)).collect();
        let h: f64 = w.iter().rev().sum();
        w.into_iter().map(|x| x / h).collect()
    }

    /// Pearson's chi-square of `counts` against probabilities `p`.
    fn chi_square(counts: &[u64], p: &[f64]) -> f64 {
        let n: u64 = counts.iter().sum();
        counts
            .iter()
            .zip(p)
            .map(|(&c, &p)| {
                let e = p * n as f64;
                assert!(e >= 5.0, "an expected count below 5: {e}");
                (c as f64 - e).powi(2) / e
            })
            .sum()
    }

    /// The chi-square value a correct sampler exceeds with probability
    /// 10^-6 at `df` degrees of freedom: Wilson and Hilferty's
    /// approximation (1931), `df · (1 − 2/(9 df) + z · √(2/(9 df)))³`, with
    /// `z = 4.753`, the standard normal's 10^-6 upper quantile (about 1226
    /// at 999 degrees of freedom, where the mean is 999 and the standard
    /// deviation 44.7).
    fn chi_square_bound(df: f64) -> f64 {
        let a = 2.0 / (9.0 * df);
        df * (1.0 - a + 4.753 * a.sqrt()).powi(3)
    }

    /// Key counts of events `0..draws` drawn through `table`, by the
    /// generator's own path from an event's hash to its key.
    fn key_counts(
        cfg: &WaConfig,
        table: &crate::sources::zipf::AliasTable,
        draws: u64,
    ) -> Vec<u64> {
        let mut counts = vec![0u64; table.len() as usize];
        for n in 0..draws {
            counts[zipf_key(table, mix(cfg.state_of(n))) as usize] += 1;
        }
        counts
    }

    /// 10^6 Zipf keys over 1000 keys pass a chi-square test against the
    /// exact probabilities at s = 0.8, 1.2 and 1.5 (a correct sampler fails
    /// with probability 10^-6), and the same test rejects a table off by
    /// one rank (weights (k + 2)^-s) and tables of exponent s ± 0.05.
    #[test]
    fn zipf_keys_pass_a_chi_square_test_that_wrong_tables_fail() {
        use crate::sources::zipf::AliasTable;
        let (keys, draws) = (1000u64, 1_000_000u64);
        let bound = chi_square_bound((keys - 1) as f64);
        for s in [0.8, 1.2, 1.5] {
            let cfg = WaConfig {
                seed: 11,
                keys,
                dist: KeyDist::Zipf(s),
                ..WaConfig::default()
            };
            let z = zipf_of(&cfg).unwrap();
            let exact = zipf_probabilities(keys, s);
            // The generator's events carry the keys counted here.
            let counts = key_counts(&cfg, z.alias_table(), draws);
            let first: Vec<u64> = (0..50).map(|n| event(&cfg, Some(&z), n).key).collect();
            let mut again = vec![0u64; keys as usize];
            for &k in &first {
                again[k as usize] += 1;
            }
            assert_eq!(again, key_counts(&cfg, z.alias_table(), 50));
            let chi = chi_square(&counts, &exact);
            assert!(chi < bound, "s = {s}: chi-square {chi:.0} ≥ {bound:.0}");
            let wrong: [(&str, AliasTable); 3] = [
                (
                    "ranks off by one",
                    AliasTable::new(keys, |k| ((k + 2) as f64).powf(-s)).unwrap(),
                ),
                (
                    "exponent + 0.05",
                    AliasTable::new(keys, |k| ((k + 1) as f64).powf(-(s + 0.05))).unwrap(),
                ),
                (
                    "exponent - 0.05",
                    AliasTable::new(keys, |k| ((k + 1) as f64).powf(-(s - 0.05))).unwrap(),
                ),
            ];
            for (what, t) in &wrong {
                let chi = chi_square(&key_counts(&cfg, t, draws), &exact);
                assert!(
                    chi > bound,
                    "s = {s}, {what}: chi-square {chi:.0} < {bound:.0}"
                );
            }
        }
    }

    /// At 100,000 keys and s = 1.2 the hottest key, key 0, has probability
    /// 1 / H(100000, 1.2) = 0.1964 (ζ(1.2) − 100000^-0.2 / 0.2 ≈ 5.09),
    /// and 10^6 events give it that share within 5 standard deviations
    /// (σ = 0.0004).
    #[test]
    fn the_hottest_of_100000_zipf_keys_takes_a_fifth() {
        let cfg = WaConfig {
            seed: 5,
            keys: 100_000,
            dist: KeyDist::Zipf(1.2),
            ..WaConfig::default()
        };
        let p0 = zipf_probabilities(cfg.keys, 1.2)[0];
        assert!((p0 - 0.1964).abs() < 5e-4, "{p0}");
        let z = zipf_of(&cfg).unwrap();
        let draws = 1_000_000u64;
        let mut g = WaGenerator::with_zipf(&cfg, Some(z.clone()), 0, 1);
        let mut buf = vec![WaEvent::default(); 4096];
        let (mut hot, mut seen) = (0u64, 0u64);
        while seen < draws {
            let k = g.fill(&mut buf);
            hot += buf[..k].iter().filter(|e| e.key == 0).count() as u64;
            seen += k as u64;
        }
        let share = hot as f64 / seen as f64;
        let sigma = (p0 * (1.0 - p0) / seen as f64).sqrt();
        assert!((share - p0).abs() < 5.0 * sigma, "key 0: {share} vs {p0}");
    }

    /// A Zipf generator's siblings (rescaled shards) share its table and
    /// give each event the key the definition gives it.
    #[test]
    fn zipf_siblings_share_the_table_and_the_keys() {
        use crate::sources::shards::Sharded;
        let cfg = WaConfig {
            events: 5_000,
            keys: 300,
            dist: KeyDist::Zipf(1.2),
            ..WaConfig::default()
        };
        let z = zipf_of(&cfg).unwrap();
        let g = WaGenerator::with_zipf(&cfg, Some(z.clone()), 0, 1);
        for shards in [2, 5] {
            for shard in 0..shards {
                let mut s = g.sibling(shard, shards).unwrap();
                assert!(Arc::ptr_eq(s.zipf.as_ref().unwrap(), &z));
                let mut buf = vec![WaEvent::default(); 5_000];
                let k = s.fill(&mut buf);
                for (i, e) in buf[..k].iter().enumerate() {
                    let n = (shard + i * shards) as u64;
                    assert_eq!(*e, event(&cfg, Some(&z), n), "event {n}");
                }
            }
        }
    }

    /// The table must be the configuration's.
    #[test]
    #[should_panic(expected = "the Zipf table of another key distribution")]
    fn a_table_of_another_exponent_is_refused() {
        let cfg = WaConfig {
            dist: KeyDist::Zipf(1.2),
            ..WaConfig::default()
        };
        let other = zipf_of(&WaConfig {
            dist: KeyDist::Zipf(1.3),
            ..cfg
        });
        let _ = WaGenerator::with_zipf(&cfg, other, 0, 1);
    }

    #[test]
    fn event_time_is_exactly_floor_of_n_thousand_over_rate() {
        // 3 events/s: event 30 at 10 000 ms exactly (a 32.32 fixed-point
        // gap, rounded down, stamped it at 9 999: a window early).
        let three = WaConfig {
            events_per_s: 3.0,
            ..WaConfig::default()
        };
        assert_eq!(
            (0..7).map(|n| three.time_of(n)).collect::<Vec<_>>(),
            [0, 333, 666, 1000, 1333, 1666, 2000]
        );
        assert_eq!(three.time_of(29), 9666);
        assert_eq!(three.time_of(30), 10_000);
        // Integer rates and dyadic fractions (a / 2^j) against exact
        // integer references, from 1 and several workers.
        let integer = [
            1u64,
            3,
            7,
            999,
            1000,
            1001,
            7999,
            8000,
            16_001,
            333_333,
            1_000_000,
            123_456_789,
        ];
        let dyadic = [(5u64, 1u32), (1, 3), (7, 10), (12_345, 7)];
        let cases = integer.iter().map(|&r| (r as f64, r, 0)).chain(
            dyadic
                .iter()
                .map(|&(a, j)| (a as f64 / (1u64 << j) as f64, a, j)),
        );
        for (rate, a, j) in cases {
            let cfg = WaConfig {
                events_per_s: rate,
                events: 5_000,
                base_time_ms: 17,
                ..WaConfig::default()
            };
            let exact = |n: u64| 17 + (((n as u128 * 1000) << j) / a as u128) as u64;
            for n in (0..5_000).chain([1 << 40, 1 << 41]) {
                assert_eq!(cfg.time_of(n), exact(n), "rate {rate}, event {n}");
            }
            for workers in [1, 3] {
                for w in 0..workers {
                    let mut g = WaGenerator::new(&cfg, w, workers);
                    let mut buf = vec![WaEvent::default(); 64];
                    let mut n = w as u64;
                    loop {
                        let k = g.fill(&mut buf);
                        if k == 0 {
                            break;
                        }
                        for e in &buf[..k] {
                            assert_eq!(e.time_ms, exact(n), "rate {rate}, event {n}");
                            n += workers as u64;
                        }
                    }
                }
            }
        }
        // Times saturate instead of wrapping.
        let slow = WaConfig {
            events_per_s: 0.125,
            base_time_ms: u64::MAX - 44_000,
            ..WaConfig::default()
        };
        assert_eq!(slow.time_of(5), u64::MAX - 4_000);
        assert_eq!(slow.time_of(6), u64::MAX);
        let mut g = WaGenerator::new(&slow, 0, 1);
        let mut buf = vec![WaEvent::default(); 8];
        assert_eq!(g.fill(&mut buf), 8);
        let times: Vec<u64> = buf.iter().map(|e| e.time_ms).collect();
        assert_eq!(
            &times[4..],
            [u64::MAX - 12_000, u64::MAX - 4_000, u64::MAX, u64::MAX]
        );
    }

    #[test]
    fn rates_and_budgets_that_overflow_the_clock_are_refused() {
        let ok = WaConfig::default();
        assert_eq!(ok.validate(), Ok(()));
        for bad in [
            WaConfig {
                events_per_s: 0.0,
                ..ok
            },
            WaConfig {
                events_per_s: f64::NAN,
                ..ok
            },
            WaConfig {
                events_per_s: 1e-300,
                ..ok
            },
            WaConfig {
                events_per_s: 1e16,
                ..ok
            },
            WaConfig {
                events_per_s: 0.001,
                events: u64::MAX,
                ..ok
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn event_time_is_fractional_and_exact_at_round_rates() {
        let cfg = WaConfig {
            events_per_s: 1e9,
            ..WaConfig::default()
        };
        // 1 ns apart: the millisecond still advances every 10^6 events.
        assert_eq!(cfg.time_of(500_000), 0);
        assert_eq!(cfg.time_of(1_500_000), 1);
        assert_eq!(cfg.time_of(2_500_000), 2);
        let cfg = WaConfig {
            events_per_s: 100_000.0,
            ..WaConfig::default()
        };
        assert_eq!(cfg.time_of(25_000), 250);
        assert_eq!(cfg.time_of(24_999), 249);
    }

    /// With a shift the hottest key moves by the stride every period of
    /// event time; a shift without Zipf keys, or of 0 ms, is refused.
    #[test]
    fn shifted_hot_keys_move_every_period() {
        let cfg = WaConfig {
            events: 40_000,
            keys: 1000,
            dist: KeyDist::Zipf(1.2),
            events_per_s: 10_000.0,
            zipf_shift_ms: Some(1_000),
            ..WaConfig::default()
        };
        let mut g = WaGenerator::new(&cfg, 0, 1);
        let mut buf = vec![WaEvent::default(); 40_000];
        assert_eq!(g.fill(&mut buf), 40_000);
        let shift = cfg.shift().unwrap();
        for sec in 0..4u64 {
            let mut counts = vec![0u64; 1000];
            for e in buf.iter().filter(|e| e.time_ms / 1000 == sec) {
                counts[e.key as usize] += 1;
            }
            let hot = (0..1000).max_by_key(|&k| counts[k]).unwrap() as u64;
            assert_eq!(hot, shift.offset_at(sec * 1000), "second {sec}");
        }
        for bad in [
            WaConfig {
                zipf_shift_ms: Some(0),
                ..cfg
            },
            WaConfig {
                dist: KeyDist::Uniform,
                ..cfg
            },
        ] {
            assert!(bad.validate().unwrap_err().contains("--zipf-shift-ms"));
        }
    }
}
