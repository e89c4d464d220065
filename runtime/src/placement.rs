//! Where workers run: the one place that pins threads to CPUs.
//!
//! The plan comes from [`crate::topology`]: one worker per physical core
//! inside the CPUs this process may use, cores in package order, SMT
//! siblings idle, the processes of a node splitting the cores by local
//! rank, wrapping around (with a warning) when workers outnumber their
//! share. When the machine's topology cannot be read, the plan falls back
//! to the allowed CPUs in order (worker `w` on the `w mod n`-th).

use crate::topology::{Plan, Slot, Topology};
use core_affinity::CoreId;
use std::sync::OnceLock;

/// The CPUs this process may run on, read once before any thread is pinned
/// (core_affinity reports the calling thread's current mask).
pub fn allowed_cores() -> &'static [CoreId] {
    static CORES: OnceLock<Vec<CoreId>> = OnceLock::new();
    CORES.get_or_init(|| core_affinity::get_core_ids().unwrap_or_default())
}

/// Number of CPUs this process may use (at least 1).
pub fn available_cores() -> usize {
    allowed_cores().len().max(1)
}

/// The machine as `air topo` shows it: read by hwloc with feature `hwloc`
/// (which may describe another machine through `HWLOC_SYNTHETIC` or
/// `HWLOC_XMLFILE`), else from sysfs with the allowed CPUs from
/// `sched_getaffinity`.
///
/// # Errors
/// When neither hwloc nor sysfs gives a topology (the message says why).
pub fn read_machine() -> Result<Topology, String> {
    #[cfg(feature = "hwloc")]
    {
        crate::hwloc::load().map(|l| l.topology)
    }
    #[cfg(not(feature = "hwloc"))]
    {
        for k in ["HWLOC_SYNTHETIC", "HWLOC_XMLFILE", "HWLOC_FSROOT"] {
            if std::env::var_os(k).is_some_and(|v| !v.is_empty()) {
                tracing::warn!(
                    "{k} is set but this build reads the machine from sysfs (build with \
                     `--features hwloc` to use it; `air topo --synthetic PxCxT` works without)"
                );
            }
        }
        Topology::from_sysfs().map_err(|e| e.to_string())
    }
}

/// This machine's topology for pinning, with the allowed CPUs read before
/// any thread was pinned; `None` if it cannot be read. With feature `hwloc`
/// it comes from hwloc, unless hwloc's environment names another machine
/// or hwloc fails (then sysfs, with a warning).
pub fn topology() -> Option<&'static Topology> {
    static TOPO: OnceLock<Option<Topology>> = OnceLock::new();
    TOPO.get_or_init(|| {
        let allowed: Vec<usize> = allowed_cores().iter().map(|c| c.id).collect();
        #[cfg(feature = "hwloc")]
        {
            if crate::hwloc::foreign_requested() {
                tracing::warn!(
                    "HWLOC_SYNTHETIC / HWLOC_XMLFILE / HWLOC_FSROOT describe another machine: \
                     pinning reads this one from sysfs"
                );
            } else {
                match crate::hwloc::load() {
                    Ok(l) => return Some(l.topology.with_allowed(&allowed)),
                    Err(e) => tracing::warn!("{e}; reading the topology from sysfs"),
                }
            }
        }
        Topology::from_sysfs()
            .ok()
            .map(|t| t.with_allowed(&allowed))
    })
    .as_ref()
}

/// The share of this node's cores the launcher gives this process when it
/// is not an MPI rank: `(processes on this node, this one's local index)`
/// from SLURM (`SLURM_LOCALID`, and `SLURM_STEP_TASKS_PER_NODE` or
/// `SLURM_TASKS_PER_NODE` at index `SLURM_NODEID`, in SLURM's `2(x3),1`
/// form). `None` outside SLURM, for one task per node, and when srun
/// already bound the task (then the plan stays inside that binding):
/// `SLURM_CPU_BIND_TYPE` names a binding (not `none`), or the allowed CPUs
/// span at most `SLURM_CPUS_PER_TASK` cores. Without that evidence the
/// tasks split the allowed cores (sharing cores would be far worse than
/// using half of a binding). Unusable SLURM values (a local id beyond the
/// task count, a list without this node) give `None` and a warning, once.
pub fn launcher_share(topo: &Topology) -> Option<(usize, usize)> {
    match launcher_share_from(topo, &|k| std::env::var(k).ok()) {
        Ok(share) => share,
        Err(e) => {
            static WARNED: OnceLock<()> = OnceLock::new();
            WARNED.get_or_init(|| tracing::warn!("{e}; planning as the only process on this node"));
            None
        }
    }
}

/// [`launcher_share`] with the environment read through `var` (for tests);
/// `Err` names the SLURM variable that makes no sense.
pub fn launcher_share_from(
    topo: &Topology,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<(usize, usize)>, String> {
    let Some(local) = var("SLURM_LOCALID") else {
        return Ok(None);
    };
    let local: usize = local
        .trim()
        .parse()
        .map_err(|_| format!("SLURM_LOCALID={local:?} is not a number"))?;
    let node_var = var("SLURM_NODEID").unwrap_or_else(|| "0".into());
    let node: usize = node_var
        .trim()
        .parse()
        .map_err(|_| format!("SLURM_NODEID={node_var:?} is not a number"))?;
    let Some(per_node) = var("SLURM_STEP_TASKS_PER_NODE").or_else(|| var("SLURM_TASKS_PER_NODE"))
    else {
        return Ok(None);
    };
    let ranks = slurm_tasks_on_node(&per_node, node).ok_or_else(|| {
        format!("SLURM tasks per node {per_node:?} has no entry for SLURM_NODEID={node}")
    })?;
    if local >= ranks {
        return Err(format!(
            "SLURM_LOCALID={local} but {ranks} task(s) on this node"
        ));
    }
    if ranks <= 1 {
        return Ok(None);
    }
    if let Some(t) = var("SLURM_CPU_BIND_TYPE") {
        let t = t.trim().to_ascii_lowercase();
        if !t.is_empty() && !t.starts_with("none") {
            return Ok(None);
        }
    }
    if let Some(c) = var("SLURM_CPUS_PER_TASK").and_then(|v| v.trim().parse::<usize>().ok()) {
        let mut cores: Vec<usize> = topo
            .allowed
            .iter()
            .filter_map(|&os| topo.pu(os).map(|p| p.core))
            .collect();
        cores.sort_unstable();
        cores.dedup();
        if cores.len() <= c {
            return Ok(None);
        }
    }
    Ok(Some((ranks, local)))
}

/// The task count of node `node` in SLURM's compressed list (`2(x3),1`:
/// nodes 0–2 run 2 tasks, node 3 runs 1).
pub fn slurm_tasks_on_node(list: &str, node: usize) -> Option<usize> {
    let mut seen = 0usize;
    for part in list.split(',') {
        let part = part.trim();
        let (n, times) = match part.split_once("(x") {
            Some((n, t)) => (n, t.trim_end_matches(')').parse::<usize>().ok()?),
            None => (part, 1),
        };
        let n: usize = n.parse().ok()?;
        if node < seen + times {
            return Some(n);
        }
        seen += times;
    }
    None
}

/// The default worker count of a process: one per physical core it may use
/// (per PU with `smt`), divided among the SLURM tasks sharing this node
/// unbound ([`launcher_share`]); the allowed CPU count if the topology is
/// unknown. At least 1.
pub fn default_workers(smt: bool) -> usize {
    match topology() {
        Some(t) if !t.allowed.is_empty() => {
            let (ranks, local) = launcher_share(t).unwrap_or((1, 0));
            t.share_len(ranks, local, smt)
        }
        _ => available_cores(),
    }
}

/// The plan for `workers` workers of local rank `local_rank` of
/// `ranks_on_node` processes on this node; with `smt`, SMT siblings are
/// used after one PU of every core.
pub fn plan(workers: usize, ranks_on_node: usize, local_rank: usize, smt: bool) -> Plan {
    if let Some(t) = topology() {
        if !t.allowed.is_empty() {
            return t.plan(workers, ranks_on_node, local_rank, smt);
        }
    }
    // No topology: the allowed CPUs in order, offset by the local rank.
    let cores = allowed_cores();
    let slots = (0..workers)
        .filter_map(|w| {
            let c = cores.get((local_rank * workers + w) % cores.len().max(1))?;
            Some(Slot {
                worker: w,
                pu: c.id,
                core: c.id,
                package: 0,
                numa: None,
            })
        })
        .collect();
    let oversubscribed = workers * ranks_on_node.max(1) > cores.len();
    Plan {
        slots,
        oversubscribed,
        warnings: if oversubscribed {
            vec![format!(
                "{} workers on this node but {} CPUs: workers share them",
                workers * ranks_on_node.max(1),
                cores.len()
            )]
        } else {
            Vec::new()
        },
    }
}

/// The warning of a job run without a plan (`--no-pin`) whose workers
/// outnumber the CPUs: `workers` threads in each of `ranks_on_node`
/// processes on this node (all free to run on any CPU this process may
/// use) and fewer allowed CPUs than that share them, as an oversubscribed
/// plan does. `None` when they fit.
pub fn unpinned_oversubscription(workers: usize, ranks_on_node: usize) -> Option<String> {
    let threads = workers * ranks_on_node.max(1);
    let cpus = available_cores();
    (threads > cpus).then(|| {
        format!(
            "{threads} workers on this node but {cpus} CPUs (--no-pin): workers share them \
             (lower --workers)"
        )
    })
}

/// Pins the calling thread to OS CPU `pu`; returns it, or `None` if
/// pinning is not possible here.
pub fn pin_current_to(pu: usize) -> Option<usize> {
    core_affinity::set_for_current(CoreId { id: pu }).then_some(pu)
}

/// The CPUs the calling thread may run on now (`sched_getaffinity`).
pub fn current_affinity() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity
    // writes at most sizeof(cpu_set_t) bytes into it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::{available_cores, unpinned_oversubscription};

    #[test]
    fn unpinned_workers_beyond_the_cpus_are_said_to_share_them() {
        let cpus = available_cores();
        assert_eq!(unpinned_oversubscription(cpus, 1), None);
        assert_eq!(unpinned_oversubscription(1, cpus), None);
        let w = unpinned_oversubscription(cpus + 1, 1).expect("a warning");
        assert!(
            w.contains(&format!(
                "{} workers on this node but {cpus} CPUs",
                cpus + 1
            )),
            "{w}"
        );
        // Every local rank's workers count: 2 ranks of `cpus` workers.
        let w = unpinned_oversubscription(cpus, 2).expect("a warning");
        assert!(w.contains(&format!("{} workers", 2 * cpus)), "{w}");
    }
}
