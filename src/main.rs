//! The `air` command: run queries, generate inputs, benchmark channels.

mod queries;

use clap::{Parser, Subcommand};
use queries::common::CliError;

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
    /// Run a query.
    #[command(subcommand)]
    Run(RunCommand),
    /// Generate input files for a query.
    #[command(subcommand)]
    Gen(GenCommand),
    /// Channel microbenchmarks.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Shared-memory segments.
    #[command(subcommand)]
    Shm(ShmCommand),
    /// The machine (packages, cores, PUs, NUMA, allowed CPUs) and the
    /// placement plan for a number of workers.
    Topo(queries::topo::TopoArgs),
    /// The channel figures of a job before running it: rings per tier,
    /// memory per node (process memory, /dev/shm, MPI windows), windows per
    /// rank, control traffic at idle, and whether it fits this machine.
    Plan(Box<queries::plan::PlanArgs>),
}

#[derive(Subcommand, Debug)]
enum ShmCommand {
    /// Remove this user's segments that no live process holds (left by
    /// processes killed before their peer attached).
    Clean {
        /// Only list what would be removed.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Subcommand, Debug)]
enum RunCommand {
    /// Yahoo Streaming Benchmark: views per campaign per 10 s event-time window.
    Ysb(Box<queries::ysb::YsbArgs>),
    /// Windowed aggregation (AIR's benchmark): per-key count and sum of keyed
    /// events in tumbling event-time windows; CSV `window_start_ms,key,count,sum`.
    Wa(Box<queries::wa::WaArgs>),
    /// NEXMark queries q0-q22 (Beam and the Flink suite) over the generator or
    /// JSON-lines files (see `air gen nexmark`).
    #[command(after_help = queries::nexmark::columns_help())]
    Nexmark(Box<queries::nexmark::NexmarkArgs>),
    /// Word count over text files (map-reduce; batch, or windowed by arrival
    /// time with --window-ms); CSV `word,count` by count then word.
    Wordcount(Box<queries::wordcount::WordCountArgs>),
}

#[derive(Subcommand, Debug)]
enum GenCommand {
    /// YSB events (JSON lines) and the campaign map.
    Ysb(queries::ysb::GenYsbArgs),
    /// The keyed events of `air run wa` (CSV `time_ms,key,value`).
    Wa(queries::wa::GenWaArgs),
    /// NEXMark events as JSON lines (persons, auctions, bids; a `type` field).
    Nexmark(queries::nexmark::GenNexmarkArgs),
}

/// `air bench exchange`.
#[derive(clap::Args, Debug)]
struct ExchangeArgs {
    #[command(flatten)]
    bench: air_tools::exchange_bench::ExchangeBenchArgs,
    #[command(flatten)]
    runtime: queries::common::RuntimeArgs,
}

#[derive(Subcommand, Debug)]
enum BenchCommand {
    /// The frame ring against crossbeam-channel, rtrb and the machine's roofs.
    Ring(air_tools::ring_bench::RingBenchArgs),
    /// All-to-all records/s through the runtime's exchange, on the tiers the
    /// placement gives (under `mpirun`: node tier, or `--force-network`).
    Exchange(ExchangeArgs),
    /// The remote ring (network tier) against MPI two-sided messaging; run
    /// under `mpirun -np 2` (feature `mpi`).
    #[cfg(feature = "mpi")]
    Rma(air_tools::rma_bench::RmaBenchArgs),
    /// Sustainable throughput of YSB (or of `--query wa|q1|q2|q5|q7|q8`):
    /// the highest generator rate the job keeps up with (reads 99% of it,
    /// input lag bounded and not growing, p99 latency bounded; q1 and q2,
    /// which have no latency, on the rest), by doubling then bisection;
    /// embedded or under `mpirun`.
    #[command(after_help = queries::sustainable::KEEPS_UP_HELP)]
    Ysb(Box<queries::sustainable::BenchYsbArgs>),
    /// A query's events/s at 1..W workers (and 1..N ranks through a
    /// launcher), against the ideal line: table, CSV, PNG. Each point is a
    /// separate `air run` process: `air bench scale --workers 1-2 -- ysb`.
    Scale(queries::scale::ScaleArgs),
    /// The NEXMark suite: every query (or `--query q1,q5`) at 1 and 2
    /// workers (and `--ranks`), each run a separate `air run nexmark`
    /// process, interleaved, `--repeats` rounds: median events/s (min-max),
    /// per worker, CPU s, peak RSS, and events per CPU-second beside the
    /// Flink suite's published throughput per core. Table, CSV, PNG, JSON.
    Nexmark(Box<queries::nexbench::BenchNexmarkArgs>),
    /// Hot keys: `air run wa --shuffle` and `air run ysb --shuffle`
    /// (`--query wa|ysb|both`) at Zipf exponents `--zipf` (0, 0.8, 1.2,
    /// 1.5), `--rebalance off` and `on`, each run a separate process,
    /// interleaved, `--repeats` rounds: median events/s, events per
    /// CPU-second, the keyed stage's load max/mean, % of the events kept at
    /// their senders, and on / off per exponent. Table, CSV, PNG.
    Skew(Box<queries::skew::BenchSkewArgs>),
}

/// glibc's malloc serves blocks of at least this many bytes (window and
/// join tables) from their own mappings, returned to the system when freed.
const MMAP_THRESHOLD_BYTES: i32 = 4 << 20;

/// Fixes glibc's mmap threshold at [`MMAP_THRESHOLD_BYTES`] unless the user
/// set `MALLOC_MMAP_THRESHOLD_`. By default glibc raises the threshold each
/// time a mapped block is freed (up to 32 MiB), so the next windows'
/// tables come from the heap, whose freed pages it keeps: in 10-minute
/// paced NEXMark runs q15 and q17 then step up to 72 and 54–99 MiB,
/// against flat 35 and 32 MiB with the threshold fixed (docs/performance.md,
/// "Ten-minute paced runs"); the CPU cost was within noise.
fn fix_mmap_threshold() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
        // SAFETY: mallopt only sets a malloc parameter; called first thing
        // in main, before any other thread allocates.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES);
        }
    }
}

fn main() {
    // `air topo | head -1` ends quietly, as a Unix tool does: Rust ignores
    // SIGPIPE (then `println!` panics on a closed pipe); restore the default.
    // SAFETY: first thing in main, before any other thread exists; SIG_DFL
    // is a valid disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    fix_mmap_threshold();
    let cli = parse_cli();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(&cli.log))
        .with_writer(std::io::stderr)
        // Colour codes only on a terminal (not in logs, CI or SLURM files).
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    if matches!(cli.command, Command::Run(_)) {
        // SIGINT/SIGTERM stop the sources; the run drains, writes what is
        // complete and exits 128 + signal (air_runtime::stop).
        air_runtime::stop::install_handlers();
    }
    let result: Result<(), CliError> = match cli.command {
        Command::Run(RunCommand::Ysb(args)) => run_query(|dist| queries::ysb::main(&args, dist)),
        Command::Run(RunCommand::Wa(args)) => {
            run_query(|dist| queries::driver::main(args.as_ref(), dist))
        }
        Command::Gen(GenCommand::Ysb(args)) => queries::ysb::gen(&args),
        Command::Gen(GenCommand::Wa(args)) => queries::wa::gen(&args),
        Command::Run(RunCommand::Nexmark(args)) => {
            run_query(|dist| queries::driver::main(args.as_ref(), dist))
        }
        Command::Gen(GenCommand::Nexmark(args)) => queries::nexmark::gen(&args),
        Command::Run(RunCommand::Wordcount(args)) => {
            run_query(|dist| queries::driver::main(args.as_ref(), dist))
        }
        Command::Shm(ShmCommand::Clean { dry_run }) => shm_clean(dry_run),
        Command::Topo(args) => queries::topo::main(&args),
        Command::Plan(args) => queries::plan::main(&args, &plan_graph),
        Command::Bench(BenchCommand::Ysb(args)) => {
            run_query(|dist| queries::sustainable::main(&args, dist))
        }
        Command::Bench(BenchCommand::Scale(args)) => queries::scale::main(&args),
        Command::Bench(BenchCommand::Nexmark(args)) => queries::nexbench::main(&args),
        Command::Bench(BenchCommand::Skew(args)) => queries::skew::main(&args),
        Command::Bench(BenchCommand::Ring(args)) => {
            air_tools::ring_bench::run(args).map_err(CliError::Other)
        }
        Command::Bench(BenchCommand::Exchange(args)) => run_query(|dist| {
            let mut cfg = args.runtime.job_config();
            dist.configure(&mut cfg, args.runtime.force_network);
            air_tools::exchange_bench::run(
                &args.bench,
                &cfg,
                dist.rank(),
                &|v| dist.all_max(v),
                &|v| dist.all_sum(v),
            )
            .map(|_| ())
            .map_err(CliError::Other)
        }),
        #[cfg(feature = "mpi")]
        Command::Bench(BenchCommand::Rma(args)) => run_query(|dist| match &dist.mpi {
            Some(mpi) if mpi.size() == 2 => {
                air_tools::rma_bench::run(&args, mpi).map_err(CliError::Other)
            }
            Some(mpi) if mpi.rank() != 0 => Err(CliError::Quiet(2)),
            _ => Err(CliError::BadInput(format!(
                "air bench rma runs on exactly 2 ranks: `mpirun -np 2 air bench rma` \
                 (started as {} rank(s))",
                dist.ranks()
            ))),
        }),
    };
    match result {
        Ok(()) => {}
        Err(CliError::Quiet(code)) => std::process::exit(code),
        Err(e) => {
            air_runtime::say!("air: error: {e}");
            std::process::exit(e.exit_code());
        }
    }
}

/// Parses the command line. Every option that takes a value takes one
/// starting with `-` too (`--window-ms -10`), so that a negative number
/// reaches the option's own parser and is refused there, naming the option
/// and its range (exit code 2), instead of being read as an unknown option
/// `-1`.
fn parse_cli() -> Cli {
    use clap::{CommandFactory, FromArgMatches};
    fn negative_numbers_are_values(cmd: clap::Command) -> clap::Command {
        cmd.mut_args(|a| {
            if a.get_action().takes_values() {
                a.allow_negative_numbers(true)
            } else {
                a
            }
        })
        .mut_subcommands(negative_numbers_are_values)
    }
    // A bad option is reported as every other error is ("air: error: …",
    // exit 2); help and version go out as clap prints them.
    fn fail(e: clap::Error) -> ! {
        use clap::error::ErrorKind;
        if matches!(
            e.kind(),
            ErrorKind::DisplayHelp
                | ErrorKind::DisplayVersion
                | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
        ) {
            e.exit()
        }
        let mut text = e.render().to_string().trim_end().to_string();
        // A bad value that came from the environment, not the command line:
        // say where it came from.
        if e.kind() == ErrorKind::ValueValidation {
            let argv: Vec<String> = std::env::args().collect();
            for (opt, var) in [
                ("--workers", air::WORKERS_ENV),
                ("--ring-bytes", air::RING_BYTES_ENV),
            ] {
                let given = argv
                    .iter()
                    .any(|a| a == opt || a.starts_with(&format!("{opt}=")));
                if !given
                    && text.contains(&format!("for '{opt} "))
                    && std::env::var_os(var).is_some()
                {
                    if let Some(end) = text.find('\n') {
                        text.insert_str(end, &format!(" (the value of {var})"));
                    } else {
                        text.push_str(&format!(" (the value of {var})"));
                    }
                }
            }
        }
        // Under a launcher every rank parses the same options: rank 0 says
        // it, the others only exit (after rank 0 has spoken).
        let code = match queries::dist::launcher_rank() {
            None | Some(0) => {
                air_runtime::say!("air: {text}");
                2
            }
            Some(_) => queries::dist::quiet_after_rank0(2).exit_code(),
        };
        std::process::exit(code)
    }
    let mut matches = negative_numbers_are_values(Cli::command())
        .try_get_matches()
        .unwrap_or_else(|e| fail(e));
    Cli::from_arg_matches_mut(&mut matches)
        .map_err(|e| e.format(&mut Cli::command()))
        .unwrap_or_else(|e| fail(e))
}

/// The graph `air run <words>` would run, built by the query's own code
/// with its graph planned and not run ([`air_runtime::dataflow::dry_run`]).
fn plan_graph(words: &[String]) -> Result<queries::plan::PlannedQuery, CliError> {
    let argv = ["air", "run"]
        .into_iter()
        .map(String::from)
        .chain(words.iter().cloned());
    let cli = Cli::try_parse_from(argv).map_err(|e| {
        let text = e.render().to_string();
        let text = text.trim_start_matches("error: ").trim_end();
        // An option of `air plan` itself given after `--`.
        let plan_options =
            <queries::plan::PlanArgs as clap::Args>::augment_args(clap::Command::new("plan"));
        let own = plan_options
            .get_arguments()
            .filter_map(|a| a.get_long())
            .map(|l| format!("--{l}"))
            .find(|o| text.contains(&format!("unexpected argument '{o}'")));
        let (first, rest) = text.split_once('\n').unwrap_or((text, ""));
        let hint = own.map_or(String::new(), |o| {
            format!(" ({o} is an option of `air plan`: give it before `--`)")
        });
        CliError::BadInput(format!(
            "`air run {}`: {first}{hint}\n{rest}",
            words.join(" ")
        ))
    })?;
    let Command::Run(mut cmd) = cli.command else {
        unreachable!("parsed as `air run`")
    };
    // Planning writes nothing: a --timeline would be started (and an
    // existing file of that name truncated) by the dry run.
    match &mut cmd {
        RunCommand::Ysb(a) => a.runtime.timeline = None,
        RunCommand::Wa(a) => a.runtime.timeline = None,
        RunCommand::Nexmark(a) => a.runtime.timeline = None,
        RunCommand::Wordcount(a) => a.runtime.timeline = None,
    }
    let dist = queries::dist::Dist::default();
    let mut failed = None;
    let (runtime, edges) = match cmd {
        RunCommand::Ysb(a) => (
            a.runtime.clone(),
            air_runtime::dataflow::dry_run(|| {
                failed = queries::ysb::run(&a, &dist, false).err();
            }),
        ),
        RunCommand::Wa(a) => (
            a.runtime.clone(),
            air_runtime::dataflow::dry_run(|| {
                failed = queries::driver::run(a.as_ref(), &dist, false).err();
            }),
        ),
        RunCommand::Nexmark(a) => (
            a.runtime.clone(),
            air_runtime::dataflow::dry_run(|| {
                failed = queries::driver::run(a.as_ref(), &dist, false).err();
            }),
        ),
        RunCommand::Wordcount(a) => (
            a.runtime.clone(),
            air_runtime::dataflow::dry_run(|| {
                failed = queries::driver::run(a.as_ref(), &dist, false).err();
            }),
        ),
    };
    match edges {
        Some(edges) => Ok(queries::plan::PlannedQuery { edges, runtime }),
        None => Err(failed.unwrap_or_else(|| {
            CliError::Other(anyhow::anyhow!(
                "`air run {}` builds no dataflow graph to plan",
                words.join(" ")
            ))
        })),
    }
}

/// How long the final barrier and `MPI_Finalize` may take before a rank
/// gives up on its peers.
const TEARDOWN_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Runs a query as this process's part of the run (alone, or one rank of
/// an MPI job). Errors are printed before MPI is finalized and every rank
/// passes a barrier after printing, so a launcher that ends the job at the
/// first non-zero exit cannot cut rank 0's message short.
fn run_query(
    query: impl FnOnce(&queries::dist::Dist) -> Result<(), CliError>,
) -> Result<(), CliError> {
    let code = {
        let dist = queries::dist::Dist::init()?;
        let code = match dist.check_same_args().and_then(|()| query(&dist)) {
            Ok(()) => match air_runtime::stop::signal() {
                // Stopped by a signal: results and report hold what was
                // complete; the exit code says the run did not finish.
                Some(sig) => {
                    if dist.is_root() {
                        air_runtime::say!(
                            "air: stopped by signal {sig}: the results hold the windows every \
                             worker had read past"
                        );
                    }
                    128 + sig
                }
                None => 0,
            },
            Err(CliError::Quiet(c)) => c,
            Err(e) => {
                air_runtime::say!("air: error: {e}");
                e.exit_code()
            }
        };
        if dist.ranks() > 1 {
            // Teardown is collective (a barrier, MPI_Finalize) and runs after
            // the job's liveness watcher has stopped: a rank lost now would
            // hold the others for good. Bound it.
            std::thread::spawn(move || {
                std::thread::sleep(TEARDOWN_LIMIT);
                let exit = if code == 0 { 3 } else { code };
                air_runtime::say!(
                    "air: the ranks did not finish together within {} s (a rank lost after \
                     the run?); exiting with code {exit}",
                    TEARDOWN_LIMIT.as_secs()
                );
                // SAFETY: _exit ends the process at once; the results were
                // written before teardown began.
                unsafe { libc::_exit(exit) };
            });
        }
        if std::env::var("AIR_FAULT_TEARDOWN_HANG")
            .ok()
            .and_then(|r| r.parse().ok())
            == Some(dist.rank())
        {
            // Test hook: this rank hangs after the run, before teardown (as
            // a rank stopped or stuck then would).
            loop {
                std::thread::park();
            }
        }
        dist.barrier();
        code
    }; // MPI is finalized here, after every rank printed what it had to.
    match code {
        0 => Ok(()),
        c => Err(CliError::Quiet(c)),
    }
}

fn shm_clean(dry_run: bool) -> Result<(), CliError> {
    let dir = air_shm::shm_dir();
    let found = air_shm::clean_stale(&dir, dry_run).map_err(|e| CliError::Other(e.into()))?;
    let (mut removed, mut young) = (0, 0);
    for (path, what) in &found {
        young += usize::from(*what == air_shm::CleanOutcome::TooYoung);
        let what = match what {
            air_shm::CleanOutcome::Removed if dry_run => "stale (would remove)",
            air_shm::CleanOutcome::Removed => {
                removed += 1;
                "removed"
            }
            air_shm::CleanOutcome::InUse => "in use",
            air_shm::CleanOutcome::TooYoung => "just created (left alone)",
        };
        println!("{}: {what}", path.display());
    }
    // Younger than 2 s: a job may be creating it (not yet locked).
    let skipped = if young > 0 {
        format!(", {young} younger than 2 s skipped")
    } else {
        String::new()
    };
    println!(
        "{} segment(s) of this user in {}, {removed} removed{skipped}",
        found.len(),
        dir.display()
    );
    Ok(())
}
