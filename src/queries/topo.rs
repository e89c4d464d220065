//! `air topo`: the machine as placement sees it, and the placement plan.

use super::common::CliError;
use air_runtime::placement;
use air_runtime::topology::{format_cpu_list, parse_cpu_list_strict, Topology, MAX_CPU};

/// `air topo`.
#[derive(clap::Args, Debug, Clone)]
pub struct TopoArgs {
    /// Workers per process to plan for (default: this process's share: one
    /// per allowed core, or per allowed PU with `--smt`).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Processes (ranks) sharing this node (default: SLURM's tasks on this
    /// node when they are not bound, else 1).
    #[arg(long)]
    pub ranks_per_node: Option<usize>,
    /// Which of them to plan for (0-based; default: `SLURM_LOCALID` or 0).
    #[arg(long)]
    pub local_rank: Option<usize>,
    /// Use SMT siblings too (after one PU of every core).
    #[arg(long)]
    pub smt: bool,
    /// Plan for a synthetic machine `PACKAGESxCORESxTHREADS` (e.g. `2x14x2`,
    /// Linux numbering, one NUMA node per package) instead of this one.
    /// (With feature `hwloc`, hwloc's `HWLOC_SYNTHETIC` and `HWLOC_XMLFILE`
    /// work too.)
    #[arg(long)]
    pub synthetic: Option<String>,
    /// Plan as if this process could use only these CPUs (a Linux CPU list,
    /// e.g. `5,7,9,11` or `0-13`), as a SLURM or cgroup cpuset would.
    #[arg(long)]
    pub allowed: Option<String>,
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
            let pus = n
                .iter()
                .try_fold(1usize, |acc, &x| acc.checked_mul(x))
                .filter(|&p| p < MAX_CPU);
            if n.len() != 3 || n.contains(&0) || pus.is_none() {
                return Err(CliError::BadInput(format!(
                    "--synthetic {spec}: expected three positive numbers PxCxT with fewer \
                     than {MAX_CPU} PUs in all"
                )));
            }
            Topology::synthetic(n[0], n[1], n[2], true)
        }
        None => placement::read_machine().map_err(|e| CliError::Other(anyhow::anyhow!(e)))?,
    };
    let topo = match &args.allowed {
        None => topo,
        Some(list) => {
            let cpus = parse_cpu_list_strict(list)
                .map_err(|e| CliError::BadInput(format!("--allowed {list}: {e}")))?;
            let unknown: Vec<usize> = cpus
                .iter()
                .copied()
                .filter(|&c| topo.pu(c).is_none())
                .collect();
            if !unknown.is_empty() {
                let shown: Vec<String> = unknown.iter().take(8).map(|c| c.to_string()).collect();
                return Err(CliError::BadInput(format!(
                    "--allowed {list}: CPU {}{} not on this machine (its PUs: {})",
                    shown.join(", "),
                    if unknown.len() > 8 {
                        format!(" and {} more", unknown.len() - 8)
                    } else {
                        String::new()
                    },
                    format_cpu_list(&topo.pus.iter().map(|p| p.os).collect::<Vec<_>>()),
                )));
            }
            topo.with_allowed(&cpus)
        }
    };
    let share = placement::launcher_share(&topo);
    let ranks_per_node = args.ranks_per_node.or(share.map(|s| s.0)).unwrap_or(1);
    let local_rank = args.local_rank.or(share.map(|s| s.1)).unwrap_or(0);
    if ranks_per_node == 0 || local_rank >= ranks_per_node {
        return Err(CliError::BadInput(format!(
            "--local-rank {local_rank} must be below --ranks-per-node {ranks_per_node}"
        )));
    }
    if let Some(w) = args.workers {
        if w == 0 || w >= MAX_CPU {
            return Err(CliError::BadInput(format!(
                "--workers {w}: expected 1 to {}",
                MAX_CPU - 1
            )));
        }
    }
    let workers = args
        .workers
        .unwrap_or_else(|| topo.share_len(ranks_per_node, local_rank, args.smt))
        .max(1);
    let plan = topo.plan(workers, ranks_per_node, local_rank, args.smt);
    if args.json {
        let v = serde_json::json!({
            "machine": topo,
            "counts": {
                "packages": topo.packages(),
                "numa_nodes": topo.numa_nodes(),
                "cores": topo.cores(),
                "pus": topo.pus.len(),
            },
            "ranks_per_node": ranks_per_node,
            "local_rank": local_rank,
            "plan": plan,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!(
        "machine ({}): {} package(s), {} NUMA node(s), {} core(s), {} PU(s){}",
        topo.source,
        topo.packages(),
        topo.numa_nodes(),
        topo.cores(),
        topo.pus.len(),
        topo.memory_bytes
            .map_or(String::new(), |b| format!(", {}", bytes(b)))
    );
    if !topo.caches.is_empty() {
        let mut levels: Vec<String> = Vec::new();
        for level in (1..=5u8).rev() {
            let of: Vec<&air_runtime::topology::Cache> =
                topo.caches.iter().filter(|c| c.level == level).collect();
            if let Some(first) = of.first() {
                levels.push(format!(
                    "L{level} {} x {} (shared by {} PU(s) each)",
                    of.len(),
                    bytes(first.size_bytes),
                    first.pus.len()
                ));
            }
        }
        println!("  caches: {}", levels.join(", "));
    }
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
        let mut numa: Vec<usize> = topo
            .pus
            .iter()
            .filter(|p| p.package == pkg)
            .filter_map(|p| p.numa)
            .collect();
        numa.sort_unstable();
        numa.dedup();
        let numa = if numa.is_empty() {
            String::new()
        } else {
            format!(
                " (NUMA {})",
                numa.iter()
                    .map(|n| n.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            )
        };
        println!("  package {pkg}{numa}: {}", line.join(" "));
    }
    println!("allowed CPUs: {}", format_cpu_list(&topo.allowed));
    println!(
        "plan: {workers} worker(s), local rank {} of {}{}",
        local_rank,
        ranks_per_node,
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

/// `n` bytes as KiB/MiB/GiB (binary units, as lstopo prints them).
fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}
