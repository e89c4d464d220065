//! The machine as placement sees it: packages, cores, PUs (hardware
//! threads), NUMA nodes, and the CPUs this process may use — and the
//! placement plan computed from it (issue 5, first part: the plan logic and
//! the sysfs reader; hwloc and pinning by the plan come next).
//!
//! The plan: one worker per physical core inside the allowed CPU set, cores
//! taken in package order (package 0's cores, then package 1's, …), SMT
//! siblings left idle unless `smt`; the ranks sharing a node split that
//! order into contiguous blocks by local rank (so 2 ranks on a 2-socket node
//! get one socket each); more workers than slots wrap around and the plan
//! says it is oversubscribed.

use serde::Serialize;
use std::path::Path;

/// One PU (hardware thread) of the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Pu {
    /// The OS CPU number (as in `taskset`, `sched_setaffinity`).
    pub os: usize,
    /// The core it belongs to: index into the machine's cores, in package
    /// order.
    pub core: usize,
    /// Its package (socket), 0-based in OS order.
    pub package: usize,
    /// Its NUMA node, if the machine reports one.
    pub numa: Option<usize>,
}

/// The machine: every PU, and which of them this process may use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Topology {
    /// Every PU, by OS number.
    pub pus: Vec<Pu>,
    /// OS numbers of the PUs this process may run on, ascending.
    pub allowed: Vec<usize>,
    /// Where it was read from ("sysfs", "synthetic").
    pub source: &'static str,
}

/// Where one worker runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Slot {
    /// Worker index on this process.
    pub worker: usize,
    /// The PU (OS CPU number) it is pinned to.
    pub pu: usize,
    /// Its core (index into the machine's cores).
    pub core: usize,
    /// Its package.
    pub package: usize,
    /// Its NUMA node, if known (its rings' memory is first touched there).
    pub numa: Option<usize>,
}

/// A placement plan for the workers of one process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// One slot per worker, in worker order.
    pub slots: Vec<Slot>,
    /// More workers than this process's share of PUs: some share a PU.
    pub oversubscribed: bool,
    /// What the user should know (oversubscription, an empty share).
    pub warnings: Vec<String>,
}

impl Topology {
    /// A synthetic machine: `packages` × `cores` × `threads` PUs, numbered
    /// like Linux numbers them (first thread of every core first, then the
    /// second threads), one NUMA node per package if `numa`, every PU
    /// allowed. For tests and for `air topo --synthetic`.
    pub fn synthetic(packages: usize, cores: usize, threads: usize, numa: bool) -> Topology {
        let per_thread = packages * cores;
        let mut pus = Vec::with_capacity(per_thread * threads);
        for t in 0..threads {
            for p in 0..packages {
                for c in 0..cores {
                    pus.push(Pu {
                        os: t * per_thread + p * cores + c,
                        core: p * cores + c,
                        package: p,
                        numa: numa.then_some(p),
                    });
                }
            }
        }
        pus.sort_by_key(|p| p.os);
        let allowed = pus.iter().map(|p| p.os).collect();
        Topology {
            pus,
            allowed,
            source: "synthetic",
        }
    }

    /// This machine from `/sys/devices/system/cpu` and `/sys/devices/system/node`,
    /// with the allowed set from `sched_getaffinity`.
    ///
    /// # Errors
    /// When sysfs has no CPU topology (then nothing is known to plan with).
    pub fn from_sysfs() -> std::io::Result<Topology> {
        Self::from_sysfs_at(Path::new("/sys/devices/system"), allowed_cpus())
    }

    fn from_sysfs_at(root: &Path, allowed: Vec<usize>) -> std::io::Result<Topology> {
        let read = |p: std::path::PathBuf| -> Option<String> {
            std::fs::read_to_string(p)
                .ok()
                .map(|s| s.trim().to_string())
        };
        let mut raw = Vec::new(); // (os, package id, core id)
        for e in std::fs::read_dir(root.join("cpu"))?.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(os) = name
                .strip_prefix("cpu")
                .and_then(|n| n.parse::<usize>().ok())
            else {
                continue;
            };
            let t = e.path().join("topology");
            let pkg = read(t.join("physical_package_id")).and_then(|s| s.parse::<i64>().ok());
            let core = read(t.join("core_id")).and_then(|s| s.parse::<i64>().ok());
            if let (Some(pkg), Some(core)) = (pkg, core) {
                raw.push((os, pkg, core));
            }
        }
        if raw.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no CPU topology under /sys/devices/system/cpu",
            ));
        }
        let mut numa_of = std::collections::HashMap::new();
        if let Ok(rd) = std::fs::read_dir(root.join("node")) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if let Some(n) = name
                    .strip_prefix("node")
                    .and_then(|n| n.parse::<usize>().ok())
                {
                    if let Some(list) = read(e.path().join("cpulist")) {
                        for cpu in parse_cpu_list(&list) {
                            numa_of.insert(cpu, n);
                        }
                    }
                }
            }
        }
        // Packages in OS order of their ids; cores in package order.
        let mut pkgs: Vec<i64> = raw.iter().map(|r| r.1).collect();
        pkgs.sort_unstable();
        pkgs.dedup();
        let mut cores: Vec<(usize, i64)> = raw
            .iter()
            .map(|r| (pkgs.binary_search(&r.1).unwrap_or(0), r.2))
            .collect();
        cores.sort_unstable();
        cores.dedup();
        let mut pus: Vec<Pu> = raw
            .iter()
            .map(|&(os, pkg, core)| {
                let package = pkgs.binary_search(&pkg).unwrap_or(0);
                Pu {
                    os,
                    core: cores.binary_search(&(package, core)).unwrap_or(0),
                    package,
                    numa: numa_of.get(&os).copied(),
                }
            })
            .collect();
        pus.sort_by_key(|p| p.os);
        Ok(Topology {
            pus,
            allowed,
            source: "sysfs",
        })
    }

    /// Restricts the allowed set to `cpus` (as a cpuset would).
    pub fn with_allowed(mut self, cpus: &[usize]) -> Topology {
        let mut a: Vec<usize> = cpus.to_vec();
        a.sort_unstable();
        a.dedup();
        self.allowed = a;
        self
    }

    /// Number of packages.
    pub fn packages(&self) -> usize {
        self.pus.iter().map(|p| p.package + 1).max().unwrap_or(0)
    }

    /// Number of cores.
    pub fn cores(&self) -> usize {
        self.pus.iter().map(|p| p.core + 1).max().unwrap_or(0)
    }

    /// Number of NUMA nodes (0 when the machine reports none).
    pub fn numa_nodes(&self) -> usize {
        self.pus
            .iter()
            .filter_map(|p| p.numa)
            .map(|n| n + 1)
            .max()
            .unwrap_or(0)
    }

    fn pu(&self, os: usize) -> Option<&Pu> {
        self.pus.iter().find(|p| p.os == os)
    }

    /// The node's worker slots in plan order: the first allowed PU of every
    /// core (cores in package order), then, with `smt`, the further allowed
    /// PUs of every core in the same order.
    pub fn slots_in_order(&self, smt: bool) -> Vec<Pu> {
        let mut per_core: Vec<Vec<Pu>> = vec![Vec::new(); self.cores()];
        for &os in &self.allowed {
            if let Some(p) = self.pu(os) {
                per_core[p.core].push(*p);
            }
        }
        let mut out: Vec<Pu> = per_core.iter().filter_map(|c| c.first().copied()).collect();
        if smt {
            let depth = per_core.iter().map(Vec::len).max().unwrap_or(0);
            for i in 1..depth {
                out.extend(per_core.iter().filter_map(|c| c.get(i).copied()));
            }
        }
        out
    }

    /// The plan for `workers` workers of the process that is local rank
    /// `local_rank` of `ranks_on_node` processes sharing this node.
    pub fn plan(&self, workers: usize, ranks_on_node: usize, local_rank: usize, smt: bool) -> Plan {
        let order = self.slots_in_order(smt);
        let ranks = ranks_on_node.max(1);
        let mut warnings = Vec::new();
        // Contiguous blocks; the first `extra` ranks get one slot more.
        let base = order.len() / ranks;
        let extra = order.len() % ranks;
        let start = local_rank * base + local_rank.min(extra);
        let len = base + usize::from(local_rank < extra);
        let mut share: Vec<Pu> =
            order[start.min(order.len())..(start + len).min(order.len())].to_vec();
        if share.is_empty() {
            // More ranks than slots: share the whole order, wrapping by rank.
            if !order.is_empty() {
                share.push(order[local_rank % order.len()]);
            }
            warnings.push(format!(
                "{ranks} processes on this node but {} usable {}: this process has no slot \
                 of its own",
                order.len(),
                if smt { "PUs" } else { "cores" }
            ));
        }
        let oversubscribed = workers > share.len();
        if oversubscribed && !share.is_empty() {
            warnings.push(format!(
                "{workers} workers but {} {} for this process: workers share them",
                share.len(),
                if smt { "PUs" } else { "cores" }
            ));
        }
        let slots = (0..workers)
            .filter_map(|w| {
                let p = share.get(w % share.len().max(1))?;
                Some(Slot {
                    worker: w,
                    pu: p.os,
                    core: p.core,
                    package: p.package,
                    numa: p.numa,
                })
            })
            .collect();
        Plan {
            slots,
            oversubscribed,
            warnings,
        }
    }
}

/// Parses a Linux CPU list such as `0-3,8,10-11`.
pub fn parse_cpu_list(s: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
                    out.extend(a..=b);
                }
            }
            None => {
                if let Ok(a) = part.parse() {
                    out.push(a);
                }
            }
        }
    }
    out
}

/// The CPUs this thread may run on (`sched_getaffinity`), ascending.
pub fn allowed_cpus() -> Vec<usize> {
    let mut v: Vec<usize> = crate::placement::allowed_cores()
        .iter()
        .map(|c| c.id)
        .collect();
    v.sort_unstable();
    v
}
