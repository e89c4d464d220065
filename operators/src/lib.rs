//! # air-operators: the operators of the AIR dataflow runtime
//!
//! Sources, stateless operators, windows and sinks. This crate knows nothing
//! of transports: records are plain `#[repr(C)]`, rkyv-archivable structs,
//! and the runtime decides how they move between workers.
//!
//! So far it holds the data layer of the Yahoo Streaming Benchmark
//! ([`sources::ysb`]): the binary event, the ad → campaign map, a fast
//! deterministic generator with rate pacing, and a JSON-lines reader and
//! writer for the original YSB event schema.
#![deny(missing_docs)]

pub mod graph;
pub mod join;
pub mod sources;
pub mod stream;
pub mod top;
pub mod window;
pub mod wordcount;
