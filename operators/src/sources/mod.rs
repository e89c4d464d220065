//! Sources: where the records of a job come from (generators, files and
//! live inputs: standard input, TCP).
//!
//! Every source is sharded: a job of `W` workers builds one source per worker
//! (`worker_index` in `0..W`), and the shards together produce the job's
//! stream exactly once.

pub(crate) mod fast_json;
pub mod file_merge;
pub mod files;
pub(crate) mod json_scan;
pub(crate) mod lines;
pub mod live;
pub mod nexmark;
pub mod pace;
pub(crate) mod rng;
pub mod shards;
pub mod text;
pub mod wa;
pub mod ysb;
pub mod zipf;
