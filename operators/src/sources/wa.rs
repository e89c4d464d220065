//! The keyed-event generator of the windowed aggregation (`air run wa`),
//! AIR's "simple windowed aggregation" benchmark: events `(key, value,
//! event time)`, keys uniform over `0..keys` or Zipf-distributed.
//!
//! Event `n` (0-based) is a pure function of `(config, n)`: its key and
//! value come from one 64-bit hash of `n` — wyrand's output at state
//! `splitmix64(seed) + (n + 1)·P0`, i.e. the `n`-th output of a wyrand
//! stream, computed directly — and its event time is
//! `base_time_ms + floor(n · F / 2^32)` with `F = round(2^32 · 1000 /
//! events_per_s)`: `n · 1000 / events_per_s` in 32.32 fixed point, a
//! fractional spacing, so rates above 1000 events/s do not round to zero. Worker `w` of `W`
//! generates events `w, w + W, w + 2W, …`, so the union of the shards is the
//! same stream for any worker count, and each shard is in event-time order.
//!
//! Zipf keys: key `k` (0-based) has probability `∝ 1 / (k + 1)^s`, drawn
//! with `rand_distr::Zipf` from a generator seeded by the event's hash.

use super::rng::{below, splitmix64};

/// wyrand's increment and mixing constant.
const P0: u64 = 0xa076_1d64_78bd_642f;
const P1: u64 = 0xe703_7ed1_a0b4_28db;

/// The hash of the event whose wyrand state is `state`.
#[inline(always)]
fn mix(state: u64) -> u64 {
    let t = (state as u128).wrapping_mul((state ^ P1) as u128);
    (t >> 64) as u64 ^ t as u64
}
use rand::SeedableRng;
use rand_distr::Distribution;

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
        }
    }
}

impl WaConfig {
    /// Checks the settings.
    ///
    /// # Errors
    /// `keys` of 0, a rate that is not a positive finite number, a Zipf
    /// exponent that is not a positive finite number.
    pub fn validate(&self) -> Result<(), String> {
        if self.keys == 0 {
            return Err("--keys must be at least 1".into());
        }
        if !(self.events_per_s.is_finite() && self.events_per_s >= 0.001) {
            return Err(format!(
                "--events-per-s {}: must be a number of at least 0.001",
                self.events_per_s
            ));
        }
        if let KeyDist::Zipf(s) = self.dist {
            if !(s.is_finite() && s > 0.0) {
                return Err(format!("--zipf {s}: the exponent must be positive"));
            }
        }
        Ok(())
    }

    /// Event time of event `n`, ms.
    #[inline(always)]
    pub fn time_of(&self, n: u64) -> u64 {
        self.base_time_ms + ((n as u128 * self.ms_fixed() as u128) >> 32) as u64
    }

    /// Milliseconds per event in 32.32 fixed point (saturating).
    #[inline(always)]
    fn ms_fixed(&self) -> u64 {
        (1000.0 * 4_294_967_296.0 / self.events_per_s).round() as u64
    }

    /// The wyrand state of event `n`.
    #[inline(always)]
    fn state_of(&self, n: u64) -> u64 {
        splitmix64(self.seed).wrapping_add(n.wrapping_add(1).wrapping_mul(P0))
    }
}

/// Event `n` of the stream (the sequential definition).
pub fn event(cfg: &WaConfig, zipf: Option<&rand_distr::Zipf<f64>>, n: u64) -> WaEvent {
    event_at(cfg, zipf, mix(cfg.state_of(n)), cfg.time_of(n))
}

/// The event with hash `h` at time `time_ms`.
#[inline(always)]
fn event_at(cfg: &WaConfig, zipf: Option<&rand_distr::Zipf<f64>>, h: u64, time_ms: u64) -> WaEvent {
    let key = match zipf {
        None => below(h, cfg.keys),
        Some(z) => {
            let mut r = rand::rngs::SmallRng::seed_from_u64(h);
            (z.sample(&mut r) as u64).clamp(1, cfg.keys) - 1
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

/// The Zipf distribution of `cfg`, if it asks for one.
pub fn zipf_of(cfg: &WaConfig) -> Option<rand_distr::Zipf<f64>> {
    match cfg.dist {
        KeyDist::Uniform => None,
        KeyDist::Zipf(s) => rand_distr::Zipf::new(cfg.keys, s).ok(),
    }
}

/// One shard of the stream: worker `worker` of `workers` generates events
/// `worker, worker + workers, …` below `cfg.events`.
#[derive(Clone, Debug)]
pub struct WaGenerator {
    cfg: WaConfig,
    zipf: Option<rand_distr::Zipf<f64>>,
    next: u64,
    step: u64,
    generated: u64,
}

impl WaGenerator {
    /// The shard of worker `worker` of `workers` (`worker < workers`).
    pub fn new(cfg: &WaConfig, worker: usize, workers: usize) -> WaGenerator {
        WaGenerator {
            cfg: *cfg,
            zipf: zipf_of(cfg),
            next: worker as u64,
            step: workers.max(1) as u64,
            generated: 0,
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
        // Walk the wyrand state and the fixed-point time by `step` events
        // (the same values `event` computes from scratch).
        let mut state = cfg.state_of(self.next);
        let d_state = self.step.wrapping_mul(P0);
        let f = cfg.ms_fixed() as u128;
        let mut t_fp = self.next as u128 * f;
        let d_t = self.step as u128 * f;
        let base = cfg.base_time_ms;
        let zipf = self.zipf.as_ref();
        for slot in &mut out[..k] {
            *slot = event_at(cfg, zipf, mix(state), base + (t_fp >> 32) as u64);
            state = state.wrapping_add(d_state);
            t_fp += d_t;
        }
        self.next += k as u64 * self.step;
        self.generated += k as u64;
        k
    }

    /// Events generated so far.
    pub fn generated(&self) -> u64 {
        self.generated
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_walk_the_same_events_as_the_definition() {
        for dist in [KeyDist::Uniform, KeyDist::Zipf(1.1)] {
            let cfg = WaConfig {
                events: 10_007,
                keys: 97,
                dist,
                events_per_s: 333.3,
                base_time_ms: 5,
                ..WaConfig::default()
            };
            let z = zipf_of(&cfg);
            for workers in [1, 2, 3, 7] {
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
                            assert_eq!(*e, event(&cfg, z.as_ref(), n), "event {n}");
                            n += workers as u64;
                        }
                    }
                    all.push(g.generated());
                }
                assert_eq!(all.iter().sum::<u64>(), 10_007);
            }
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
}
