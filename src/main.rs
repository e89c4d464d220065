//! The `air` command: run queries, generate inputs, benchmark channels.

use clap::{Parser, Subcommand};

/// AIR in Rust: a master-less, zero-copy dataflow runtime.
#[derive(Parser, Debug)]
#[command(name = "air", version, about, long_about = None)]
struct Cli {
    /// Log filter (tracing `EnvFilter` syntax), e.g. `debug` or `air=trace`.
    #[arg(long, global = true, env = "AIR_LOG", default_value = "warn")]
    log: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Channel microbenchmarks.
    #[command(subcommand)]
    Bench(BenchCommand),
}

#[derive(Subcommand, Debug)]
enum BenchCommand {
    /// The frame ring against crossbeam-channel, rtrb and the machine's roofs.
    Ring(air_tools::ring_bench::RingBenchArgs),
}

fn main() {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(&cli.log))
        .with_writer(std::io::stderr)
        .init();
    let result = match cli.command {
        Command::Bench(BenchCommand::Ring(args)) => air_tools::ring_bench::run(args),
    };
    if let Err(e) = result {
        eprintln!("air: error: {e:#}");
        std::process::exit(1);
    }
}
