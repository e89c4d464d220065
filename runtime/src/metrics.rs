//! Per-worker counters and latency histograms, merged at the end of a job.

/// The latency histogram type of every job (HdrHistogram, values in ms).
pub use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Counters of one worker's channels (exchange in and out).
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct ChannelMetrics {
    /// Records this worker pushed into the exchange.
    pub records_out: u64,
    /// Bytes of archived batches this worker sent (frame payloads).
    pub bytes_out: u64,
    /// Data frames (batches) this worker sent.
    pub batches_out: u64,
    /// Records this worker received from the exchange.
    pub records_in: u64,
    /// Bytes of archived batches this worker received.
    pub bytes_in: u64,
    /// Data frames this worker received.
    pub batches_in: u64,
    /// Watermark frames this worker sent.
    pub watermarks_out: u64,
    /// Times a send found the destination ring full and had to wait
    /// (backpressure), draining its own inputs meanwhile.
    pub ring_full_waits: u64,
}

impl ChannelMetrics {
    /// Adds `o` into `self`.
    pub fn add(&mut self, o: &ChannelMetrics) {
        self.records_out += o.records_out;
        self.bytes_out += o.bytes_out;
        self.batches_out += o.batches_out;
        self.records_in += o.records_in;
        self.bytes_in += o.bytes_in;
        self.batches_in += o.batches_in;
        self.watermarks_out += o.watermarks_out;
        self.ring_full_waits += o.ring_full_waits;
    }
}

/// A latency histogram in milliseconds (0 .. 1 hour, 3 significant digits;
/// event times have ms resolution, so 0 means under a millisecond).
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000, 3).expect("valid histogram bounds")
}

/// A histogram of checkpoint barrier alignment times in microseconds (3
/// significant digits; it grows as values come, so a job without barriers
/// allocates next to nothing for it).
pub fn alignment_histogram() -> Histogram<u64> {
    Histogram::new(3).expect("valid histogram precision")
}

/// The recorded values of `h` as (value, count) pairs, to ship it to
/// another process and merge it there ([`record_pairs`]).
pub fn histogram_pairs(h: &Histogram<u64>) -> Vec<(u64, u64)> {
    h.iter_recorded()
        .map(|v| (v.value_iterated_to(), v.count_at_value()))
        .collect()
}

/// Adds (value, count) pairs from [`histogram_pairs`] into `h` (values
/// outside a bounded `h`'s range are clamped to it; one that grows takes
/// them all).
pub fn record_pairs(h: &mut Histogram<u64>, pairs: &[(u64, u64)]) {
    for &(v, n) in pairs {
        // A histogram that grows takes every value; a bounded one clamps.
        let v = if h.is_auto_resize() {
            v.max(h.low())
        } else {
            v.clamp(h.low(), h.high())
        };
        let _ = h.record_n(v, n);
    }
}

/// Latency percentiles in milliseconds. Without samples (no window fired,
/// or nothing measured) every percentile is `None` (JSON `null`, printed
/// as `-`), not 0: 0 ms would read as "under a millisecond".
#[derive(Debug, Default, Clone, Serialize, PartialEq)]
pub struct LatencySummary {
    /// Number of samples (windows emitted).
    pub samples: u64,
    /// Median, ms (`None` without samples).
    pub p50_ms: Option<u64>,
    /// 95th percentile, ms (`None` without samples).
    pub p95_ms: Option<u64>,
    /// 99th percentile, ms (`None` without samples).
    pub p99_ms: Option<u64>,
    /// Maximum, ms (`None` without samples).
    pub max_ms: Option<u64>,
}

impl LatencySummary {
    /// Summarizes `h` (all percentiles `None` when it is empty).
    pub fn of(h: &Histogram<u64>) -> LatencySummary {
        if h.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            samples: h.len(),
            p50_ms: Some(h.value_at_quantile(0.50)),
            p95_ms: Some(h.value_at_quantile(0.95)),
            p99_ms: Some(h.value_at_quantile(0.99)),
            max_ms: Some(h.max()),
        }
    }

    /// `"p50 A ms, p95 B ms, p99 C ms, max D ms"`, each `-` when there is
    /// no sample (for summaries printed on the terminal).
    pub fn describe(&self) -> String {
        let v = |x: Option<u64>| x.map_or_else(|| "-".to_string(), |v| v.to_string());
        format!(
            "p50 {} ms, p95 {} ms, p99 {} ms, max {} ms",
            v(self.p50_ms),
            v(self.p95_ms),
            v(self.p99_ms),
            v(self.max_ms)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_samples_have_no_percentiles() {
        let empty = LatencySummary::of(&latency_histogram());
        assert_eq!(empty.samples, 0);
        assert_eq!(empty.p50_ms, None);
        assert_eq!(empty.max_ms, None);
        assert_eq!(empty.describe(), "p50 - ms, p95 - ms, p99 - ms, max - ms");
        let mut h = latency_histogram();
        h.record(7).unwrap();
        let one = LatencySummary::of(&h);
        assert_eq!((one.samples, one.p50_ms, one.max_ms), (1, Some(7), Some(7)));
        assert_eq!(one.describe(), "p50 7 ms, p95 7 ms, p99 7 ms, max 7 ms");
    }
}
