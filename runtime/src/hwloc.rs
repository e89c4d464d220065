//! Every hwloc call of the project (feature `hwloc`, crate hwloc2 2.2 over
//! the system's libhwloc 2.x).
//!
//! hwloc2 2.2.0 has faults on hwloc 2.x, so this module uses only the parts
//! checked against `lstopo` here, and works around the rest:
//! - `TopologyObject::name()` hands a C-owned string to `CString::from_raw`
//!   (it frees it: a crash): never called.
//! - `Display for TopologyObject` writes up to 2 KiB into 1-byte buffers:
//!   never used.
//! - `objects_with_type(NUMANode)` maps hwloc 2's virtual NUMA depth (-3) to
//!   "bridge" and panics/returns garbage; the crate's object struct also
//!   lacks hwloc 2's `symmetric_subtree` field, so `memory_arity` is wrong
//!   (the fields after it line up again). NUMA nodes are therefore read from
//!   each PU's `nodeset` (the NUMA nodes local to it), which is correct.
//! - Depths are read with `depth_for_type` and used only when it returns a
//!   real depth (`Ok`).
//!
//! What to read can be changed with hwloc's own environment variables:
//! `HWLOC_SYNTHETIC="package:2 [numa] core:14 pu:2"` or
//! `HWLOC_XMLFILE=node.xml` (from `lstopo --of xml` on another machine)
//! describe another machine; then every PU of it is "allowed" and
//! [`Loaded::foreign`] is true (nothing may be pinned by it).

use crate::topology::{Cache, Pu, Topology};
use hwloc2::{CpuBindFlags, ObjectType, TopologyObject};

/// A topology read through hwloc.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The machine.
    pub topology: Topology,
    /// It describes another machine (`HWLOC_SYNTHETIC`, `HWLOC_XMLFILE`):
    /// its CPU numbers must not be used to pin threads here.
    pub foreign: bool,
}

/// Whether hwloc's environment points it at another machine
/// (`HWLOC_SYNTHETIC`, `HWLOC_XMLFILE`, `HWLOC_FSROOT`; `HWLOC_THISSYSTEM=1`
/// does not make such a description this machine for pinning).
pub fn foreign_requested() -> bool {
    let set = |k: &str| std::env::var_os(k).is_some_and(|v| !v.is_empty());
    set("HWLOC_SYNTHETIC") || set("HWLOC_XMLFILE") || set("HWLOC_FSROOT")
}

/// Loads the topology with hwloc: packages, cores, PUs, NUMA nodes (from
/// each PU's nodeset), data caches L1–L5, total memory, and the CPUs the
/// calling thread is bound to (this machine only; call it before pinning).
///
/// # Errors
/// When hwloc cannot load a topology (a malformed `HWLOC_SYNTHETIC`, an
/// unreadable `HWLOC_XMLFILE`), or it has no PU.
pub fn load() -> Result<Loaded, String> {
    let foreign = foreign_requested();
    if foreign {
        // hwloc falls back to this machine, silently, when the variable is
        // malformed: check it first.
        check_foreign_source()?;
    }
    let topo = hwloc2::Topology::new().ok_or_else(|| {
        if foreign {
            "hwloc could not load the topology named by HWLOC_SYNTHETIC / HWLOC_XMLFILE / \
             HWLOC_FSROOT (check its syntax or path)"
                .to_string()
        } else {
            "hwloc could not load this machine's topology".to_string()
        }
    })?;
    let depth = |t: ObjectType| topo.depth_for_type(&t).ok();
    let pu_depth = depth(ObjectType::PU).ok_or("hwloc reports no PU level")?;
    let core_depth = depth(ObjectType::Core);
    let package_depth = depth(ObjectType::Package);

    // (os, package, core key) where the key is the Core's logical index, or
    // for a PU without a Core above it (some XML/synthetic machines), the
    // PU itself: it then counts as a core of its own.
    let mut raw = Vec::new();
    for pu in topo.objects_at_depth(pu_depth) {
        let core_key = match core_depth.and_then(|d| ancestor_at(pu, d)) {
            Some(c) => (0u8, c.logical_index()),
            None => (1u8, pu.logical_index()),
        };
        let package = package_depth
            .and_then(|d| ancestor_at(pu, d))
            .map_or(0, |p| p.logical_index() as usize);
        let numa = pu.nodeset().and_then(|n| {
            if n.is_empty() || n.is_full() {
                None
            } else {
                usize::try_from(n.first()).ok()
            }
        });
        raw.push((pu.os_index() as usize, package, core_key, numa));
    }
    if raw.is_empty() {
        return Err("hwloc reports no PU".into());
    }
    // Cores numbered densely in package order.
    let mut keys: Vec<(usize, (u8, u32))> = raw.iter().map(|r| (r.1, r.2)).collect();
    keys.sort_unstable();
    keys.dedup();
    let mut pus: Vec<Pu> = raw
        .iter()
        .map(|&(os, package, key, numa)| Pu {
            os,
            core: keys.binary_search(&(package, key)).unwrap_or(0),
            package,
            numa,
        })
        .collect();
    pus.sort_by_key(|p| p.os);

    let mut caches = Vec::new();
    for (level, t) in [
        (1, ObjectType::L1Cache),
        (2, ObjectType::L2Cache),
        (3, ObjectType::L3Cache),
        (4, ObjectType::L4Cache),
        (5, ObjectType::L5Cache),
    ] {
        let Some(d) = depth(t) else { continue };
        for c in topo.objects_at_depth(d) {
            let size = c.cache_attributes().map_or(0, |a| a.size());
            caches.push(Cache {
                level,
                size_bytes: size,
                pus: cpus_of(c),
            });
        }
    }

    let root = topo.object_at_root();
    let machine_pus = cpus_of(root);
    let allowed = if foreign {
        machine_pus
    } else {
        // The calling thread's binding (sched_getaffinity), inside the
        // machine's PUs (hwloc drops CPUs a cgroup forbids).
        let bound: Vec<usize> = topo
            .get_cpubind(CpuBindFlags::CPUBIND_THREAD)
            .map(|s| s.into_iter().map(|c| c as usize).collect())
            .unwrap_or_else(|| machine_pus.clone());
        bound
            .into_iter()
            .filter(|c| machine_pus.contains(c))
            .collect()
    };
    let memory = root.total_memory();
    Ok(Loaded {
        topology: Topology {
            pus,
            allowed,
            caches,
            memory_bytes: (memory > 0).then_some(memory),
            source: if foreign { "hwloc (foreign)" } else { "hwloc" },
        },
        foreign,
    })
}

/// The ancestor of `obj` at `depth` (hwloc's tree: depth 0 is the machine).
fn ancestor_at(obj: &TopologyObject, depth: u32) -> Option<&TopologyObject> {
    let mut cur = Some(obj);
    while let Some(o) = cur {
        if o.depth() == depth {
            return Some(o);
        }
        if o.depth() < depth {
            return None;
        }
        cur = o.parent();
    }
    None
}

/// The OS numbers of the PUs in `obj`'s cpuset (finite: hwloc bounds an
/// object's cpuset by its PUs; an infinite set would never end, so the
/// walk stops at 65 536).
fn cpus_of(obj: &TopologyObject) -> Vec<usize> {
    obj.cpuset()
        .map(|s| {
            s.into_iter()
                .take_while(|&c| c < 65_536)
                .map(|c| c as usize)
                .collect()
        })
        .unwrap_or_default()
}

/// The few libhwloc calls hwloc2 does not expose (it keeps its topology
/// pointer private), used only to check a foreign source before loading.
mod sys {
    use std::os::raw::{c_char, c_int, c_void};
    extern "C" {
        pub fn hwloc_topology_init(topology: *mut *mut c_void) -> c_int;
        pub fn hwloc_topology_set_synthetic(topology: *mut c_void, desc: *const c_char) -> c_int;
        pub fn hwloc_topology_set_xml(topology: *mut c_void, path: *const c_char) -> c_int;
        pub fn hwloc_topology_load(topology: *mut c_void) -> c_int;
        pub fn hwloc_topology_destroy(topology: *mut c_void);
    }
}

/// Checks that `HWLOC_SYNTHETIC` / `HWLOC_XMLFILE` name a machine hwloc can
/// load (hwloc itself would print a warning at most and read this machine).
fn check_foreign_source() -> Result<(), String> {
    let get = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let (what, value, set): (&str, String, SetFn) = if let Some(d) = get("HWLOC_SYNTHETIC") {
        ("HWLOC_SYNTHETIC", d, sys::hwloc_topology_set_synthetic)
    } else if let Some(p) = get("HWLOC_XMLFILE") {
        std::fs::metadata(&p).map_err(|e| format!("HWLOC_XMLFILE={p}: {e}"))?;
        ("HWLOC_XMLFILE", p, sys::hwloc_topology_set_xml)
    } else if let Some(root) = get("HWLOC_FSROOT") {
        // hwloc reads this machine when the root is unusable: check it.
        return match std::fs::metadata(std::path::Path::new(&root).join("sys")) {
            Ok(_) => Ok(()),
            Err(e) => Err(format!("HWLOC_FSROOT={root}: no sys/ under it ({e})")),
        };
    } else {
        return Ok(());
    };
    let c = std::ffi::CString::new(value.clone())
        .map_err(|_| format!("{what}={value:?}: contains a NUL byte"))?;
    let mut topo: *mut std::os::raw::c_void = std::ptr::null_mut();
    // SAFETY: init writes a fresh topology pointer (or fails); set_* and
    // load only read the NUL-terminated string `c`, alive for the call;
    // destroy frees what init made, exactly once.
    let ok = unsafe {
        if sys::hwloc_topology_init(&mut topo) != 0 {
            return Err("hwloc_topology_init failed".into());
        }
        let ok = set(topo, c.as_ptr()) == 0 && sys::hwloc_topology_load(topo) == 0;
        sys::hwloc_topology_destroy(topo);
        ok
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{what}={value}: hwloc cannot load this {}",
            if what == "HWLOC_SYNTHETIC" {
                "synthetic description (e.g. \"package:2 [numa] core:14 pu:2\")"
            } else {
                "XML file (write one with `lstopo-no-graphics node.xml`)"
            }
        ))
    }
}

type SetFn = unsafe extern "C" fn(
    *mut std::os::raw::c_void,
    *const std::os::raw::c_char,
) -> std::os::raw::c_int;
