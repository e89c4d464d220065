//! # air-operators: the operators of the AIR dataflow runtime
//!
//! Sources, windows, joins, top-N and sinks. This crate knows nothing of
//! transports: records are plain rkyv-archivable structs, and the runtime
//! decides how they move between workers.
//!
//! - [`graph`]: the operators of the dataflow graph API
//!   (`air_runtime::dataflow::run_graph`): keyed tumbling, sliding and
//!   session windows with partial/final aggregates, window and interval
//!   joins, per-window top-N, keyed process functions, CSV and JSON-lines
//!   sinks.
//! - [`sources`]: the data layer of the benchmarks: the Yahoo Streaming
//!   Benchmark ([`sources::ysb`]: the binary event, the ad → campaign map,
//!   a fast deterministic generator with rate pacing, a JSON-lines reader
//!   and writer), NEXMark, the WA and text (word count) sources.
#![deny(missing_docs)]

pub mod graph;
pub mod sources;

/// Milliseconds since the Unix epoch, wall clock (0 before 1970): the clock
/// of the latency and watermark-lag metrics and of the paced sources.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
