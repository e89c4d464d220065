//! hwloc (feature `hwloc`) against sysfs and lstopo on this machine. The
//! synthetic machines hwloc can load (`HWLOC_SYNTHETIC`) are tested through
//! `air topo` (tests/topo.rs): the variable must be set before hwloc loads,
//! i.e. in a fresh process.
#![cfg(feature = "hwloc")]

use air_runtime::topology::Topology;

#[test]
fn hwloc_and_sysfs_read_this_machine_alike() {
    if air_runtime::hwloc::foreign_requested() {
        return; // HWLOC_SYNTHETIC etc. set by the caller: another machine
    }
    let h = air_runtime::hwloc::load().expect("hwloc loads this machine");
    assert!(!h.foreign);
    let h = h.topology;
    let s = Topology::from_sysfs().expect("sysfs");
    assert_eq!(h.source, "hwloc");
    // Same PUs, each on the same core (by index), package and NUMA node.
    assert_eq!(h.pus, s.pus, "hwloc vs sysfs PUs");
    assert_eq!(h.allowed, s.allowed, "hwloc binding vs sched_getaffinity");
    assert_eq!(
        (h.packages(), h.cores(), h.numa_nodes()),
        (s.packages(), s.cores(), s.numa_nodes())
    );
    // Caches: same levels, sizes and sharing sets (sysfs may list more
    // levels than hwloc keeps, never fewer of those hwloc shows).
    for c in &h.caches {
        assert!(
            s.caches.contains(c),
            "hwloc cache {c:?} not in sysfs {:?}",
            s.caches
        );
    }
    assert!(h.memory_bytes.unwrap_or(0) > 0);
}

#[test]
fn hwloc_counts_match_hwloc_calc() {
    if air_runtime::hwloc::foreign_requested() {
        return;
    }
    let t = air_runtime::hwloc::load().unwrap().topology;
    let count = |what: &str| -> Option<usize> {
        let o = std::process::Command::new("hwloc-calc")
            .args(["-N", what, "all"])
            .output()
            .ok()?;
        String::from_utf8_lossy(&o.stdout).trim().parse().ok()
    };
    let Some(pus) = count("pu") else {
        return; // hwloc's tools not installed (CI installs them)
    };
    assert_eq!(t.pus.len(), pus);
    assert_eq!(Some(t.cores()), count("core"));
    assert_eq!(Some(t.packages()), count("package"));
    assert_eq!(Some(t.numa_nodes()), count("numa"));
    for level in 1..=3u8 {
        if let Some(n) = count(&format!("l{level}cache")) {
            let ours = t.caches.iter().filter(|c| c.level == level).count();
            assert_eq!(ours, n, "L{level} caches");
        }
    }
}
