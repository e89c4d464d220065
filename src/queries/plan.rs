//! `air plan`: the channel figures of a job before running it (rings per
//! tier, memory per node, windows per rank, control traffic at idle), from
//! the shape given on the command line or the current SLURM allocation,
//! with the edges of the real query graph ([`air_runtime::plan`] computes
//! them; `air run` refuses a job that does not fit with the same figures).

use super::common::{thousands, CliError, RuntimeArgs};
use air_runtime::plan::{fit_ring_budget, ChannelPlan, JobShape, TierRings};
use std::time::Duration;

/// `air plan`.
#[derive(clap::Args, Debug, Clone)]
#[command(after_help = "\
Examples:
  air plan --nodes 8 --ranks-per-node 1 --workers 28
  air plan --nodes 64 --workers 28 --ring-bytes 65536 --json
  air plan --workers 4 -- nexmark --query q5     (the query and its `air run` options)
Inside a SLURM allocation, --nodes, --ranks-per-node and --workers default to
SLURM_JOB_NUM_NODES, SLURM_NTASKS_PER_NODE (or SLURM_TASKS_PER_NODE) and
SLURM_CPUS_PER_TASK; elsewhere to 1 node, 1 rank and `air run`'s workers.
Exit status: 0 if the job fits this machine (one node of it, for several
nodes), 1 if `air run` would refuse it here (the plan is printed either way),
2 for bad options.")]
pub struct PlanArgs {
    /// Nodes (machines) of the job.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub nodes: Option<u64>,
    /// MPI ranks (processes) per node.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub ranks_per_node: Option<u64>,
    /// Worker threads per rank (as `air run --workers`).
    #[arg(long, value_parser = super::common::parse::workers)]
    pub workers: Option<usize>,
    /// Ring capacity, bytes (as `air run --ring-bytes`).
    #[arg(long, value_parser = super::common::parse::ring_bytes)]
    pub ring_bytes: Option<usize>,
    /// Flush interval, µs (as `air run --flush-us`).
    #[arg(long, value_parser = super::common::parse::flush_us)]
    pub flush_us: Option<u64>,
    /// The network tier between ranks of one node too (as `air run
    /// --force-network`).
    #[arg(long)]
    pub force_network: bool,
    /// Nodes of this many ranks emulated on one machine (default:
    /// `AIR_EMULATE_RANKS_PER_NODE`).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub emulate_ranks_per_node: Option<u64>,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// The query and its `air run` options, after `--` (default: `ysb`).
    #[arg(last = true, value_name = "QUERY")]
    pub query: Vec<String>,
}

/// The most ranks `air plan` computes figures for (its work grows with the
/// square of the ranks).
const MAX_RANKS: u64 = 4096;

/// A query's graph as `air run` would build it: its exchange edges (name,
/// ring capacity in bytes) and its runtime options.
pub struct PlannedQuery {
    /// The edges, in graph order.
    pub edges: Vec<(String, usize)>,
    /// The query's runtime options (`--workers`, `--ring-bytes`, …).
    pub runtime: RuntimeArgs,
}

/// `SLURM_TASKS_PER_NODE` (`2(x3),1`): the largest count.
fn tasks_per_node(v: &str) -> Option<u64> {
    v.split(',')
        .filter_map(|item| item.split('(').next()?.trim().parse::<u64>().ok())
        .max()
}

fn env_u64(var: &str) -> Option<u64> {
    std::env::var(var).ok()?.trim().parse().ok()
}

/// The job's nodes and ranks per node: the options, else the SLURM
/// allocation, else 1 and 1.
fn allocation(args: &PlanArgs) -> (u64, u64, &'static str) {
    let slurm = std::env::var_os("SLURM_JOB_ID").is_some();
    let nodes = args.nodes.or_else(|| {
        slurm
            .then(|| env_u64("SLURM_JOB_NUM_NODES").or_else(|| env_u64("SLURM_NNODES")))
            .flatten()
    });
    let rpn = args.ranks_per_node.or_else(|| {
        slurm
            .then(|| {
                env_u64("SLURM_NTASKS_PER_NODE").or_else(|| {
                    std::env::var("SLURM_TASKS_PER_NODE")
                        .ok()
                        .and_then(|v| tasks_per_node(&v))
                })
            })
            .flatten()
    });
    let from = if slurm && (args.nodes.is_none() || args.ranks_per_node.is_none()) {
        "the SLURM allocation"
    } else {
        "the options"
    };
    (nodes.unwrap_or(1).max(1), rpn.unwrap_or(1).max(1), from)
}

/// The words of the `air run` command to plan: the query (default `ysb`)
/// with this command's runtime options added. An option given both here
/// and after `--` (a copied `air run` command line) is taken once when the
/// two values agree, and refused when they differ.
fn run_words(args: &PlanArgs) -> Result<Vec<String>, CliError> {
    let mut words = if args.query.is_empty() {
        vec!["ysb".to_string()]
    } else {
        args.query.clone()
    };
    let has = |w: &[String], opt: &str| {
        w.iter()
            .any(|x| x == opt || x.starts_with(&format!("{opt}=")))
    };
    let workers = args.workers.map(|w| w as u64).or_else(|| {
        (std::env::var_os("SLURM_JOB_ID").is_some() && !has(&words, "--workers"))
            .then(|| env_u64("SLURM_CPUS_PER_TASK"))
            .flatten()
    });
    for (opt, value) in [
        ("--workers", workers),
        ("--ring-bytes", args.ring_bytes.map(|b| b as u64)),
        ("--flush-us", args.flush_us),
    ] {
        let Some(value) = value else { continue };
        match query_value(&words, opt) {
            None => words.extend([opt.to_string(), value.to_string()]),
            Some(v) if v.trim().parse::<u64>() == Ok(value) => {}
            Some(v) => {
                return Err(CliError::BadInput(format!(
                    "{opt} {value} (of air plan) and {opt} {v} (after `--`) differ: give it once"
                )))
            }
        }
    }
    if args.force_network && !has(&words, "--force-network") {
        words.push("--force-network".into());
    }
    Ok(words)
}

/// The value of `opt` in the query's words (`--opt V` or `--opt=V`).
fn query_value<'w>(words: &'w [String], opt: &str) -> Option<&'w str> {
    let eq = format!("{opt}=");
    words.iter().enumerate().find_map(|(i, w)| {
        if w == opt {
            words.get(i + 1).map(String::as_str)
        } else {
            w.strip_prefix(&eq)
        }
    })
}

use air_runtime::units::binary_bytes as bytes;

fn rate(v: f64) -> String {
    thousands(v.round() as u64)
}

fn tiers(t: &TierRings) -> String {
    format!(
        "{} (thread {}, node {}, network {})",
        thousands(t.total),
        thousands(t.thread),
        thousands(t.node),
        thousands(t.network)
    )
}

/// Whether the plan's node fits this machine, with the same checks `air
/// run` makes: `None` if it fits, else the refusal.
fn fit(plan: &ChannelPlan) -> Option<String> {
    plan.check_here().err().map(|e| e.to_string())
}

/// Writes the human table.
fn table(
    query: &str,
    edges: &[(String, usize)],
    plan: &ChannelPlan,
    from: &str,
    fits: &Option<String>,
) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let m = &plan.memory_per_node;
    let win = &plan.window_per_rank;
    let c = &plan.control;
    let _ = writeln!(
        s,
        "air plan: {query}, {} node(s) × {} rank(s) × {} workers = {} workers (shape from {from}){}",
        plan.nodes,
        plan.ranks / plan.nodes.max(1),
        plan.workers_per_rank,
        plan.workers,
        // The query's words already say --force-network when it is on.
        if plan.force_network && !query.contains("--force-network") {
            ", --force-network"
        } else {
            ""
        }
    );
    let _ = writeln!(
        s,
        "{:<20} {:>12} {:>14} {:>12} {:>12} {:>14}",
        "edge", "ring bytes", "rings (job)", "thread", "node", "network"
    );
    for ((name, _), e) in edges.iter().zip(&plan.edges) {
        let _ = writeln!(
            s,
            "{:<20} {:>12} {:>14} {:>12} {:>12} {:>14}",
            name,
            thousands(e.ring_bytes as u64),
            thousands(e.rings.total),
            thousands(e.rings.thread),
            thousands(e.rings.node),
            thousands(e.rings.network)
        );
    }
    let _ = writeln!(s, "rings, job        {}", tiers(&plan.rings));
    let _ = writeln!(s, "rings per node    {}", tiers(&plan.rings_per_node));
    let _ = writeln!(s, "rings per rank    {}", tiers(&plan.rings_per_rank));
    let _ = writeln!(
        s,
        "memory per node   {} = {} thread-tier rings (process memory) + {} /dev/shm ({} \
         segments) + {} MPI windows + {} network read buffers (process memory)",
        bytes(m.total_bytes),
        bytes(m.thread_bytes),
        bytes(m.shm_bytes),
        thousands(m.shm_segments),
        bytes(m.window_bytes),
        bytes(m.mirror_bytes)
    );
    let _ = writeln!(s, "memory, job       {}", bytes(plan.job_bytes));
    let _ = writeln!(
        s,
        "window per rank   {} window(s) of {} ({} ring regions in, {} credit slots out, {} \
         of heartbeats)",
        win.windows,
        bytes(win.bytes),
        thousands(win.ring_regions),
        thousands(win.credit_slots),
        bytes(win.heartbeat_bytes)
    );
    let _ = writeln!(
        s,
        "idle traffic      watermarks: at most {} frames per worker per flush ({} µs) = {}/s per \
         worker, {}/s per node ({}/s of them over the network); heartbeats: {}/s per rank, \
         {}/s per node ({} B/s)",
        thousands(c.watermark_frames_per_flush_per_worker),
        c.flush_us,
        rate(c.watermark_frames_per_s_per_worker),
        rate(c.watermark_frames_per_s_per_node),
        rate(c.network_watermark_frames_per_s_per_node),
        rate(c.heartbeats_per_s_per_rank),
        rate(c.heartbeats_per_s_per_node),
        rate(c.heartbeat_bytes_per_s_per_node)
    );
    let here = if plan.nodes == 1 {
        "this job on this machine"
    } else {
        "one node of this job on this machine"
    };
    let _ = match fits {
        None => writeln!(
            s,
            "{here}: fits ({} available memory, {} free in {}){}",
            available(),
            shm_free(),
            air_shm::shm_dir().display(),
            // The check left room for them (check_here).
            if plan.memory_per_node.shm_segments > 0 {
                "; 5 MiB per rank of it left for the MPI library's own segments"
            } else {
                ""
            }
        ),
        Some(e) => writeln!(s, "{here}: does not fit: {e}"),
    };
    s
}

fn available() -> String {
    air_runtime::job::available_memory().map_or("unknown".into(), bytes)
}

fn shm_free() -> String {
    air_shm::region::free_bytes(&air_shm::shm_dir()).map_or("unknown".into(), bytes)
}

/// `air plan`: plans the query `args` name (through `graph`, which builds
/// it as `air run` would and returns its edges) on the shape `args` give.
///
/// # Errors
/// Bad options (exit code 2), a graph that cannot be built.
pub fn main(
    args: &PlanArgs,
    graph: &dyn Fn(&[String]) -> Result<PlannedQuery, CliError>,
) -> Result<(), CliError> {
    let (nodes, rpn, from) = allocation(args);
    if nodes * rpn > MAX_RANKS {
        return Err(CliError::BadInput(format!(
            "{nodes} nodes × {rpn} ranks per node: at most {MAX_RANKS} ranks can be planned"
        )));
    }
    let words = run_words(args)?;
    let q = graph(&words)?;
    let rt = q.runtime.job_config();
    let emulate = match args.emulate_ranks_per_node {
        Some(n) => Some(n as usize).filter(|&n| n > 0),
        None => {
            air_runtime::plan::emulated_ranks_per_node_from_env().map_err(CliError::BadInput)?
        }
    };
    let shape_of = |ring_bytes: &[usize]| JobShape {
        force_network: q.runtime.force_network,
        emulate_ranks_per_node: emulate,
        flush: Duration::from_micros(q.runtime.flush_us.max(1)),
        ..JobShape::uniform(nodes as usize, rpn as usize, rt.workers, ring_bytes)
    };
    // The graph gives each edge's ring before the per-node budget (a small
    // edge's is below --ring-bytes); without --ring-bytes, `air run` scales
    // them to the budget on this shape, and so does the plan.
    let mut edges = q.edges.clone();
    if let Some(budget) = rt.ring_budget {
        let full = rt.ring_bytes.next_multiple_of(16);
        let small: Vec<bool> = edges.iter().map(|e| e.1 < full).collect();
        let sizes = fit_ring_budget(budget, rt.ring_bytes, &small, shape_of);
        for (e, b) in edges.iter_mut().zip(sizes) {
            e.1 = b;
        }
    }
    let ring_bytes: Vec<usize> = edges.iter().map(|e| e.1).collect();
    let shape = shape_of(&ring_bytes);
    let plan = ChannelPlan::busiest(&shape);
    let fits = fit(&plan);
    // Whether the busiest node keeps to the budget (`None`: no budget,
    // --ring-bytes was given).
    let within_budget = rt
        .ring_budget
        .map(|b| plan.memory_per_node.total_bytes <= b);
    if args.json {
        let v = serde_json::json!({
            "query": words,
            "shape_from": from,
            "edges": edges.iter().map(|(n, b)| serde_json::json!({"name": n, "ring_bytes": b}))
                .collect::<Vec<_>>(),
            "ring_budget_bytes": rt.ring_budget,
            "rings_scaled_to_budget": edges != q.edges,
            "within_ring_budget": within_budget,
            "plan": plan,
            "fits_this_machine": fits.is_none(),
            "refusal": fits,
            "mem_available_bytes": air_runtime::job::available_memory(),
            "shm_free_bytes": air_shm::region::free_bytes(&air_shm::shm_dir()).ok(),
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&v).map_err(|e| CliError::Other(e.into()))?
        );
    } else {
        print!("{}", table(&words.join(" "), &edges, &plan, from, &fits));
        if edges != q.edges && within_budget == Some(true) {
            println!(
                "ring sizes        scaled down from {} bytes so the busiest node's rings fit the \
                 per-node budget of {} (--ring-bytes sets them as given)",
                thousands(rt.ring_bytes as u64),
                bytes(rt.ring_budget.unwrap_or_default())
            );
        } else if within_budget == Some(false) {
            println!(
                "ring sizes        scaled down from {} bytes to the floor ({}): the busiest node \
                 still needs {}, above the per-node budget of {} (lower --workers or ranks per \
                 node, or set --ring-bytes)",
                thousands(rt.ring_bytes as u64),
                bytes(air_runtime::plan::BUDGET_FLOOR_BYTES as u64),
                bytes(plan.memory_per_node.total_bytes),
                bytes(rt.ring_budget.unwrap_or_default())
            );
        }
    }
    // A script can test it: `air plan … && sbatch …`. The refusal was
    // printed with the plan.
    if fits.is_some() {
        return Err(CliError::Quiet(1));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn slurm_tasks_per_node_takes_the_largest_count() {
        assert_eq!(super::tasks_per_node("2(x3),1"), Some(2));
        assert_eq!(super::tasks_per_node("4"), Some(4));
        assert_eq!(super::tasks_per_node("1,3(x2)"), Some(3));
        assert_eq!(super::tasks_per_node(""), None);
    }

    #[test]
    fn bytes_are_printed_in_binary_units() {
        assert_eq!(super::bytes(512), "512 B");
        assert_eq!(super::bytes(3 << 29), "1.50 GiB");
    }
}
