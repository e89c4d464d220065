//! `air topo`: the machine as placement sees it, and the placement plan.

use super::common::CliError;
use air_runtime::topology::Topology;

/// `air topo`.
#[derive(clap::Args, Debug, Clone)]
pub struct TopoArgs {
    /// Workers per process to plan for (default: one per allowed core).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Processes (ranks) sharing this node.
    #[arg(long, default_value_t = 1)]
    pub ranks_per_node: usize,
    /// Which of them to plan for (0-based).
    #[arg(long, default_value_t = 0)]
    pub local_rank: usize,
    /// Use SMT siblings too (after one PU of every core).
    #[arg(long)]
    pub smt: bool,
    /// Plan for a synthetic machine `PACKAGESxCORESxTHREADS` (e.g. `2x14x2`)
    /// instead of this one.
    #[arg(long)]
    pub synthetic: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `air topo`.
pub fn main(args: &TopoArgs) -> Result<(), CliError> {
    let topo = match &args.synthetic {
        Some(spec) => {
            let n: Vec<usize> = spec
                .split('x')
                .map(|p| p.trim().parse::<usize>())
                .collect::<Result<_, _>>()
                .map_err(|_| {
                    CliError::BadInput(format!("--synthetic {spec}: expected PxCxT, e.g. 2x14x2"))
                })?;
            if n.len() != 3 || n.contains(&0) {
                return Err(CliError::BadInput(format!(
                    "--synthetic {spec}: expected three positive numbers PxCxT"
                )));
            }
            Topology::synthetic(n[0], n[1], n[2], true)
        }
        None => Topology::from_sysfs().map_err(|e| CliError::Other(e.into()))?,
    };
    if args.ranks_per_node == 0 || args.local_rank >= args.ranks_per_node {
        return Err(CliError::BadInput(format!(
            "--local-rank {} must be below --ranks-per-node {}",
            args.local_rank, args.ranks_per_node
        )));
    }
    let workers = args
        .workers
        .unwrap_or_else(|| topo.slots_in_order(args.smt).len() / args.ranks_per_node)
        .max(1);
    let plan = topo.plan(workers, args.ranks_per_node, args.local_rank, args.smt);
    if args.json {
        let v = serde_json::json!({ "machine": topo, "plan": plan });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!(
        "machine ({}): {} package(s), {} NUMA node(s), {} core(s), {} PU(s)",
        topo.source,
        topo.packages(),
        topo.numa_nodes(),
        topo.cores(),
        topo.pus.len()
    );
    for pkg in 0..topo.packages() {
        let mut cores: Vec<usize> = topo
            .pus
            .iter()
            .filter(|p| p.package == pkg)
            .map(|p| p.core)
            .collect();
        cores.sort_unstable();
        cores.dedup();
        let line: Vec<String> = cores
            .iter()
            .map(|&c| {
                let pus: Vec<String> = topo
                    .pus
                    .iter()
                    .filter(|p| p.core == c)
                    .map(|p| p.os.to_string())
                    .collect();
                format!("core {c} [PU {}]", pus.join(","))
            })
            .collect();
        println!("  package {pkg}: {}", line.join(" "));
    }
    println!(
        "allowed CPUs: {}",
        topo.allowed
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(",")
    );
    println!(
        "plan: {workers} worker(s), local rank {} of {}{}",
        args.local_rank,
        args.ranks_per_node,
        if args.smt { ", SMT siblings used" } else { "" }
    );
    for s in &plan.slots {
        println!(
            "  worker {:>3} -> PU {:>3} (core {}, package {}, NUMA {})",
            s.worker,
            s.pu,
            s.core,
            s.package,
            s.numa.map_or("-".to_string(), |n| n.to_string())
        );
    }
    for w in &plan.warnings {
        println!("warning: {w}");
    }
    Ok(())
}
