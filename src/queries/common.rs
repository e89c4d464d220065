//! Options shared by every `air run` query.

use air_runtime::JobConfig;
use std::time::Duration;

/// Runtime options of `air run`.
#[derive(clap::Args, Debug, Clone)]
pub struct RuntimeArgs {
    /// Worker threads (default: one per physical core this process may use,
    /// or per PU with `--smt`; SLURM tasks sharing a node unbound split it).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Staged exchange batches are pushed, and watermarks sent, at least this
    /// often (µs).
    #[arg(long, default_value_t = 1000)]
    pub flush_us: u64,
    /// Records per exchange batch.
    #[arg(long, default_value_t = 1024)]
    pub batch: usize,
    /// Capacity of each channel ring in bytes (workers² rings).
    #[arg(long, default_value_t = 1 << 20)]
    pub ring_bytes: usize,
    /// Do not pin workers to CPUs.
    #[arg(long)]
    pub no_pin: bool,
    /// Place workers on SMT siblings too (after one PU of every core);
    /// without it, one worker per physical core and siblings stay idle.
    #[arg(long)]
    pub smt: bool,
    /// Under MPI: use the network tier (RMA windows) between ranks of one
    /// node too, instead of `/dev/shm` rings (tests the RMA path on one machine).
    #[arg(long, env = "AIR_FORCE_NETWORK", value_parser = clap::builder::FalseyValueParser::new())]
    pub force_network: bool,
}

impl RuntimeArgs {
    /// The job configuration these options describe.
    pub fn job_config(&self) -> JobConfig {
        JobConfig {
            workers: self
                .workers
                .unwrap_or_else(|| air_runtime::placement::default_workers(self.smt))
                .max(1),
            ring_bytes: self.ring_bytes,
            flush: Duration::from_micros(self.flush_us.max(1)),
            batch_records: self.batch.max(1),
            pin: !self.no_pin,
            smt: self.smt,
            ..JobConfig::default()
        }
    }
}

/// An error of `air`: bad input exits with code 2, anything else with 1.
#[derive(Debug)]
pub enum CliError {
    /// Bad input (file, line, field named in the message): exit code 2.
    BadInput(String),
    /// Anything else: exit code 1.
    Other(anyhow::Error),
    /// Another rank failed and reported it; exit with this code, print nothing.
    Quiet(i32),
}

impl CliError {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::BadInput(_) => 2,
            CliError::Other(_) => 1,
            CliError::Quiet(c) => *c,
        }
    }
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CliError::BadInput(m) => f.write_str(m),
            CliError::Quiet(c) => write!(f, "another rank failed (exit code {c})"),
            CliError::Other(e) => {
                // Our errors already name their cause in their message:
                // print a cause only if it adds something.
                let mut msg = e.to_string();
                for cause in e.chain().skip(1) {
                    let c = cause.to_string();
                    if !msg.contains(&c) {
                        msg = format!("{msg}: {c}");
                    }
                }
                f.write_str(&msg)
            }
        }
    }
}

impl<E: Into<anyhow::Error>> From<E> for CliError {
    fn from(e: E) -> Self {
        CliError::Other(e.into())
    }
}

/// Formats `n` with thousands separators.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}
