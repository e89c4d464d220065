//! # air-tools: microbenchmarks and tools of the `air` command
#![deny(missing_docs)]

pub mod exchange_bench;
pub mod ring_bench;
#[cfg(feature = "mpi")]
pub mod rma_bench;
