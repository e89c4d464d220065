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

/// This machine's topology with the allowed CPUs read before any pinning,
/// or `None` if sysfs has none.
pub fn topology() -> Option<&'static Topology> {
    static TOPO: OnceLock<Option<Topology>> = OnceLock::new();
    TOPO.get_or_init(|| {
        let allowed: Vec<usize> = allowed_cores().iter().map(|c| c.id).collect();
        Topology::from_sysfs()
            .ok()
            .map(|t| t.with_allowed(&allowed))
    })
    .as_ref()
}

/// The plan for `workers` workers of local rank `local_rank` of
/// `ranks_on_node` processes on this node.
pub fn plan(workers: usize, ranks_on_node: usize, local_rank: usize) -> Plan {
    if let Some(t) = topology() {
        if !t.allowed.is_empty() {
            return t.plan(workers, ranks_on_node, local_rank, false);
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
