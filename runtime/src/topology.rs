//! The machine as placement sees it: packages, cores, PUs (hardware
//! threads), NUMA nodes, and the CPUs this process may use — and the
//! placement plan computed from it. The machine is read by hwloc (feature
//! `hwloc`, module `crate::hwloc`) or from Linux's sysfs; the plan logic is the
//! same for both.
//!
//! The plan: one worker per physical core inside the allowed CPU set, cores
//! taken in package order (package 0's cores, then package 1's, …), SMT
//! siblings left idle unless `smt`; the ranks sharing a node split that
//! order into contiguous blocks by local rank (so 2 ranks on a 2-socket node
//! get one socket each); more workers than slots wrap around and the plan
//! says it is oversubscribed.

use serde::{Deserialize, Serialize};
use std::path::Path;

/// One PU (hardware thread) of the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Pu {
    /// The OS CPU number (as in `taskset`, `sched_setaffinity`).
    pub os: usize,
    /// The core it belongs to: index into the machine's cores, in package
    /// order.
    pub core: usize,
    /// Its package (socket), 0-based (sysfs: in order of package ids;
    /// hwloc: its logical index; 0 when the machine names no package).
    pub package: usize,
    /// Its NUMA node, if the machine reports one.
    pub numa: Option<usize>,
}

/// One data (or unified) cache.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cache {
    /// 1 for L1d, 2 for L2, …
    pub level: u8,
    /// Size in bytes (0 if unknown).
    pub size_bytes: u64,
    /// OS numbers of the PUs sharing it, ascending.
    pub pus: Vec<usize>,
}

/// The machine: every PU, its caches, and which PUs this process may use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Topology {
    /// Every PU, by OS number.
    pub pus: Vec<Pu>,
    /// OS numbers of the PUs this process may run on, ascending.
    pub allowed: Vec<usize>,
    /// Data and unified caches (instruction caches left out), by level
    /// then first PU; empty when unknown.
    pub caches: Vec<Cache>,
    /// Total memory in bytes, if known.
    pub memory_bytes: Option<u64>,
    /// Where it was read from ("hwloc", "hwloc (foreign)" for
    /// `HWLOC_SYNTHETIC`/`HWLOC_XMLFILE`, "sysfs", "synthetic").
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

/// Where one worker of a run was placed, planned and measured (goes into
/// run reports).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerPlacement {
    /// The OS CPU it is pinned to (`None`: not pinned: `--no-pin`, or the
    /// pin failed).
    pub pu: Option<usize>,
    /// Its core (index into the machine's cores, in package order), by the plan.
    pub core: Option<usize>,
    /// Its package, by the plan.
    pub package: Option<usize>,
    /// Its NUMA node, by the plan.
    pub numa: Option<usize>,
    /// The NUMA nodes its input rings' memory is on, as the kernel reports
    /// them for the first data page of each ring after the worker touched
    /// it (distinct, ascending; empty when unknown, e.g. a container
    /// without `get_mempolicy`).
    pub input_rings_numa: Vec<usize>,
    /// Its process's plan is oversubscribed (more workers than its share of
    /// cores, or no core of its own): some workers share a PU.
    #[serde(default)]
    pub oversubscribed: bool,
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
            caches: Vec::new(),
            memory_bytes: None,
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
        let caches = sysfs_caches(root, &pus);
        let memory_bytes = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .map(|kib| kib * 1024)
        });
        Ok(Topology {
            pus,
            allowed,
            caches,
            memory_bytes,
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

    /// Number of NUMA nodes that hold CPUs (0 when the machine reports
    /// none). Node ids need not be contiguous (nodes 0 and 2: 2 nodes).
    pub fn numa_nodes(&self) -> usize {
        let mut ids: Vec<usize> = self.pus.iter().filter_map(|p| p.numa).collect();
        ids.sort_unstable();
        ids.dedup();
        ids.len()
    }

    /// The PU with OS number `os` (`pus` is sorted by OS number).
    pub fn pu(&self, os: usize) -> Option<&Pu> {
        self.pus
            .binary_search_by_key(&os, |p| p.os)
            .ok()
            .map(|i| &self.pus[i])
    }

    /// The allowed PUs grouped by core, cores in package order (cores
    /// without an allowed PU left out), each core's PUs in OS order.
    fn allowed_by_core(&self) -> Vec<Vec<Pu>> {
        let mut per_core: Vec<Vec<Pu>> = vec![Vec::new(); self.cores()];
        for &os in &self.allowed {
            if let Some(p) = self.pu(os) {
                per_core[p.core].push(*p);
            }
        }
        per_core.retain(|c| !c.is_empty());
        per_core
    }

    /// Slot order over `cores`: the first PU of every core, then, with
    /// `smt`, the second PU of every core, and so on.
    fn order(cores: &[Vec<Pu>], smt: bool) -> Vec<Pu> {
        let mut out: Vec<Pu> = cores.iter().map(|c| c[0]).collect();
        if smt {
            let depth = cores.iter().map(Vec::len).max().unwrap_or(0);
            for i in 1..depth {
                out.extend(cores.iter().filter_map(|c| c.get(i).copied()));
            }
        }
        out
    }

    /// The node's worker slots in plan order: the first allowed PU of every
    /// core (cores in package order), then, with `smt`, the further allowed
    /// PUs of every core in the same order.
    pub fn slots_in_order(&self, smt: bool) -> Vec<Pu> {
        Self::order(&self.allowed_by_core(), smt)
    }

    /// The slots of local rank `local_rank` of `ranks_on_node`: the node's
    /// cores (those with an allowed PU, in package order) split into
    /// contiguous blocks, the first `cores mod ranks` blocks one core
    /// larger; within its block, a rank's slots are the first PU of each
    /// core, then (with `smt`) their siblings. Ranks never share a core, so
    /// with `smt` too two ranks on a two-socket node get a socket each.
    /// Empty when there are more ranks than cores.
    pub fn share(&self, ranks_on_node: usize, local_rank: usize, smt: bool) -> Vec<Pu> {
        let cores = self.allowed_by_core();
        let ranks = ranks_on_node.max(1);
        let base = cores.len() / ranks;
        let extra = cores.len() % ranks;
        let start = (local_rank * base + local_rank.min(extra)).min(cores.len());
        let len = base + usize::from(local_rank < extra);
        Self::order(&cores[start..(start + len).min(cores.len())], smt)
    }

    /// How many slots local rank `local_rank` of `ranks_on_node` gets (its
    /// default worker count; see [`Topology::share`]); at least 1.
    pub fn share_len(&self, ranks_on_node: usize, local_rank: usize, smt: bool) -> usize {
        self.share(ranks_on_node, local_rank, smt).len().max(1)
    }

    /// The plan for `workers` workers of the process that is local rank
    /// `local_rank` of `ranks_on_node` processes sharing this node (see
    /// [`Topology::share`]). Workers beyond the share wrap around it
    /// (oversubscribed, with a warning); a rank without a core of its own
    /// (more ranks than cores) shares one with the others, round robin by
    /// local rank, and is oversubscribed too.
    pub fn plan(&self, workers: usize, ranks_on_node: usize, local_rank: usize, smt: bool) -> Plan {
        let ranks = ranks_on_node.max(1);
        let unit = |n: usize| match (smt, n) {
            (true, 1) => "PU",
            (true, _) => "PUs",
            (false, 1) => "core",
            (false, _) => "cores",
        };
        let mut warnings = Vec::new();
        let mut share = self.share(ranks, local_rank, smt);
        let mut oversubscribed = false;
        if share.is_empty() {
            let order = self.slots_in_order(smt);
            if !order.is_empty() {
                share.push(order[local_rank % order.len()]);
            }
            oversubscribed = true;
            warnings.push(format!(
                "{ranks} processes on this node but {} usable cores: local rank {local_rank} has \
                 no core of its own and shares one",
                self.allowed_by_core().len()
            ));
        }
        if workers > share.len() && !share.is_empty() {
            oversubscribed = true;
            warnings.push(format!(
                "{workers} workers but {} {} for this process: workers share them",
                share.len(),
                unit(share.len())
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

/// Data and unified caches from `cpu*/cache/index*/{level,type,size,shared_cpu_list}`,
/// one per distinct (level, sharing set).
fn sysfs_caches(root: &Path, pus: &[Pu]) -> Vec<Cache> {
    let mut out: Vec<Cache> = Vec::new();
    for pu in pus {
        let dir = root.join(format!("cpu/cpu{}/cache", pu.os));
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let read = |f: &str| {
                std::fs::read_to_string(e.path().join(f))
                    .map(|s| s.trim().to_string())
                    .unwrap_or_default()
            };
            if read("type") == "Instruction" {
                continue;
            }
            let Ok(level) = read("level").parse::<u8>() else {
                continue;
            };
            let size = read("size");
            let size_bytes = match size.strip_suffix('K') {
                Some(k) => k.parse::<u64>().unwrap_or(0) * 1024,
                None => match size.strip_suffix('M') {
                    Some(m) => m.parse::<u64>().unwrap_or(0) << 20,
                    None => size.parse().unwrap_or(0),
                },
            };
            let mut shared = parse_cpu_list(&read("shared_cpu_list"));
            shared.sort_unstable();
            if shared.is_empty() {
                shared.push(pu.os);
            }
            if !out.iter().any(|c| c.level == level && c.pus == shared) {
                out.push(Cache {
                    level,
                    size_bytes,
                    pus: shared,
                });
            }
        }
    }
    out.sort_by(|a, b| (a.level, a.pus.first()).cmp(&(b.level, b.pus.first())));
    out
}

/// Formats CPU numbers as a Linux CPU list (`0-3,8,10-11`), the inverse of
/// [`parse_cpu_list`] for sorted, distinct input.
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if j > i {
            format!("{}-{}", cpus[i], cpus[j])
        } else {
            cpus[i].to_string()
        });
        i = j + 1;
    }
    out.join(",")
}

/// CPU numbers at or above this are refused (Linux's `NR_CPUS` is at most
/// 8192; this leaves room).
pub const MAX_CPU: usize = 65_536;

/// Parses a Linux CPU list such as `0-3,8,10-11` (as sysfs writes it),
/// leniently: malformed parts and CPUs at or above [`MAX_CPU`] are skipped.
pub fn parse_cpu_list(s: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if let Ok(mut cpus) = parse_cpu_part(part) {
            out.append(&mut cpus);
        }
    }
    out
}

/// Parses a CPU list given by a user (`--allowed`): numbers, ranges `A-B`,
/// and ranges with a stride `A-B:S` (as `taskset -c` takes them), separated
/// by commas; sorted and deduplicated.
///
/// # Errors
/// An empty list, an empty or malformed part, a range with `A > B`, a zero
/// stride, or a CPU number of [`MAX_CPU`] or more; the message names the part.
pub fn parse_cpu_list_strict(s: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim) {
        if part.is_empty() {
            return Err(format!("empty entry in CPU list {s:?}"));
        }
        out.append(&mut parse_cpu_part(part)?);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

fn parse_cpu_part(part: &str) -> Result<Vec<usize>, String> {
    let num = |t: &str| -> Result<usize, String> {
        let n: usize = t
            .trim()
            .parse()
            .map_err(|_| format!("{part:?}: {t:?} is not a CPU number"))?;
        if n >= MAX_CPU {
            return Err(format!("{part:?}: CPU {n} is beyond {}", MAX_CPU - 1));
        }
        Ok(n)
    };
    let (range, stride) = match part.split_once(':') {
        Some((r, st)) => {
            let st: usize = st
                .trim()
                .parse()
                .map_err(|_| format!("{part:?}: stride {st:?} is not a number"))?;
            if st == 0 {
                return Err(format!("{part:?}: stride 0"));
            }
            (r, st)
        }
        None => (part, 1),
    };
    match range.split_once('-') {
        Some((a, b)) => {
            let (a, b) = (num(a)?, num(b)?);
            if a > b {
                return Err(format!("{part:?}: range runs backwards"));
            }
            Ok((a..=b).step_by(stride).collect())
        }
        None if stride == 1 => Ok(vec![num(range)?]),
        None => Err(format!("{part:?}: a stride needs a range A-B:S")),
    }
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
