//! `air bench ring` (placeholder being written).

/// Arguments of `air bench ring`.
#[derive(clap::Args, Debug)]
pub struct RingBenchArgs {}

/// Runs the benchmark.
pub fn run(_args: RingBenchArgs) -> anyhow::Result<()> {
    anyhow::bail!("not yet written")
}
