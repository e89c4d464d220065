//! Where workers run: the one place that pins threads to cores.
//!
//! This is the simple plan (worker `w` on the `w mod n`-th CPU this process
//! may use, as `core_affinity` reports it before anything is pinned); the
//! hwloc plan (physical cores, SMT siblings idle, NUMA) replaces it later
//! behind the same functions.

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

/// The CPU worker `worker` is planned on, if the CPU set is known.
pub fn planned_core(worker: usize) -> Option<usize> {
    let cores = allowed_cores();
    if cores.is_empty() {
        None
    } else {
        Some(cores[worker % cores.len()].id)
    }
}

/// Pins the calling thread to worker `worker`'s planned CPU; returns that CPU,
/// or `None` if pinning is not possible here.
pub fn pin_current(worker: usize) -> Option<usize> {
    let cores = allowed_cores();
    if cores.is_empty() {
        return None;
    }
    let core = cores[worker % cores.len()];
    core_affinity::set_for_current(core).then_some(core.id)
}
