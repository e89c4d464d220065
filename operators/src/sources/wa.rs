//! The keyed-event generator of the windowed aggregation (`air run wa`),
//! AIR's "simple windowed aggregation" benchmark: events `(key, value,
//! event time)`, keys uniform over `0..keys` or Zipf-distributed.
//!
//! Event `n` (0-based) is a pure function of `(config, n)`: its key and
//! value come from `splitmix64(seed, n)`, its event time is
//! `base_time_ms + floor(n · 1000 / events_per_s)` (a fractional spacing, so
//! rates above 1000 events/s do not round to zero). Worker `w` of `W`
//! generates events `w, w + W, w + 2W, …`, so the union of the shards is the
//! same stream for any worker count, and each shard is in event-time order.
//!
//! Zipf keys: key `k` (0-based) has probability `∝ 1 / (k + 1)^s`, drawn
//! with `rand_distr::Zipf` from a generator seeded by the event's hash.

use super::rng::{below, splitmix64};
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
        if !(self.events_per_s.is_finite() && self.events_per_s > 0.0) {
            return Err(format!(
                "--events-per-s {}: must be a positive number",
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
        self.base_time_ms + (n as f64 * (1000.0 / self.events_per_s)) as u64
    }
}

/// Event `n` of the stream (the sequential definition).
pub fn event(cfg: &WaConfig, zipf: Option<&rand_distr::Zipf<f64>>, n: u64) -> WaEvent {
    let h = splitmix64(cfg.seed ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15));
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
        time_ms: cfg.time_of(n),
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
        let mut i = 0;
        while i < out.len() && self.next < self.cfg.events {
            out[i] = event(&self.cfg, self.zipf.as_ref(), self.next);
            self.next += self.step;
            i += 1;
        }
        self.generated += i as u64;
        i
    }

    /// Events generated so far.
    pub fn generated(&self) -> u64 {
        self.generated
    }
}
