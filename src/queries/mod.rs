//! Query definitions: each builds a dataflow with the graph API of
//! `air-operators` and runs it on `air-runtime`.

pub mod child;
pub mod ckjob;
pub mod common;
pub mod dist;
pub mod driver;
pub mod lagwatch;
pub mod load;
pub mod nexbench;
pub mod nexmark;
pub mod plan;
pub mod plots;
pub mod scale;
pub mod skew;
pub mod sustainable;
pub mod topo;
pub mod wa;
pub mod wordcount;
pub mod ysb;
