//! `air topo` end to end: this machine, a synthetic one, a restricted cpuset.

use std::process::Command;

const AIR: &str = env!("CARGO_BIN_EXE_air");

#[test]
fn json_describes_this_machine_and_a_plan_inside_the_allowed_cpus() {
    let o = Command::new(AIR).args(["topo", "--json"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let allowed: Vec<u64> = v["machine"]["allowed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect();
    let slots = v["plan"]["slots"].as_array().unwrap();
    assert!(!slots.is_empty());
    for s in slots {
        assert!(allowed.contains(&s["pu"].as_u64().unwrap()), "{s}");
    }
}

#[test]
fn a_synthetic_two_socket_node_splits_between_two_ranks_by_socket() {
    for rank in ["0", "1"] {
        let o = Command::new(AIR)
            .args([
                "topo",
                "--synthetic",
                "2x14x2",
                "--ranks-per-node",
                "2",
                "--local-rank",
                rank,
                "--json",
            ])
            .output()
            .unwrap();
        assert!(o.status.success());
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let slots = v["plan"]["slots"].as_array().unwrap();
        assert_eq!(slots.len(), 14);
        assert!(slots
            .iter()
            .all(|s| s["package"] == rank.parse::<u64>().unwrap()));
    }
}

#[test]
fn a_one_cpu_cpuset_puts_every_worker_on_it_and_warns() {
    let o = Command::new("taskset")
        .args(["-c", "1", AIR, "topo", "--workers", "2"])
        .output();
    let Ok(o) = o else { return }; // no taskset: nothing to check
    if !o.status.success() {
        return; // CPU 1 not available here
    }
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("allowed CPUs: 1\n"), "{out}");
    assert_eq!(out.matches("-> PU   1 ").count(), 2, "{out}");
    assert!(out.contains("warning: 2 workers but 1 core"), "{out}");
}

#[test]
fn bad_options_are_refused() {
    for args in [
        &["topo", "--synthetic", "2x0x1"][..],
        &["topo", "--ranks-per-node", "2", "--local-rank", "2"],
        &["topo", "--workers", "0"],
        &["topo", "--workers", "18446744073709551615"],
        &["topo", "--allowed", "0-4000000000"],
        &["topo", "--allowed", "1-0"],
        &["topo", "--allowed", "0,,1"],
        &["topo", "--allowed", ""],
        &["topo", "--synthetic", "18446744073709551615x2x1"],
        &["topo", "--synthetic", "100000x100000x100000"],
    ] {
        let o = Command::new(AIR).args(args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
    }
}

#[test]
fn a_run_under_taskset_c_1_places_every_worker_on_cpu_1_and_warns() {
    let dir = tempfile::tempdir().unwrap();
    let rep = dir.path().join("r.json");
    let o = Command::new("taskset")
        .args([
            "-c",
            "1",
            AIR,
            "run",
            "ysb",
            "--events",
            "1000000",
            "--workers",
            "2",
            "--report",
        ])
        .arg(&rep)
        .output();
    let Ok(o) = o else { return }; // no taskset here
    if !o.status.success() && String::from_utf8_lossy(&o.stderr).contains("taskset") {
        return; // CPU 1 not available here
    }
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&rep).unwrap()).unwrap();
    let cores: Vec<u64> = v["per_worker"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["placement"]["pu"].as_u64().unwrap())
        .collect();
    assert_eq!(cores, vec![1, 1]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("2 workers but 1 core"), "warns:\n{err}");
}

/// `air topo --json` on the machine hwloc loads from `HWLOC_SYNTHETIC=desc`.
#[cfg(feature = "hwloc")]
fn hwloc_plan(desc: &str, args: &[&str]) -> serde_json::Value {
    let o = Command::new(AIR)
        .args(["topo", "--json"])
        .args(args)
        .env("HWLOC_SYNTHETIC", desc)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{desc} {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

#[cfg(feature = "hwloc")]
fn slots(v: &serde_json::Value) -> Vec<(u64, u64, u64, u64)> {
    v["plan"]["slots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["pu"].as_u64().unwrap(),
                s["core"].as_u64().unwrap(),
                s["package"].as_u64().unwrap(),
                s["numa"].as_u64().unwrap_or(u64::MAX),
            )
        })
        .collect()
}

#[cfg(feature = "hwloc")]
fn distinct<T: std::hash::Hash + Eq>(it: impl Iterator<Item = T>) -> usize {
    it.collect::<std::collections::HashSet<_>>().len()
}

#[cfg(feature = "hwloc")]
const NODE_28: &str = "package:2 [numa] l3:1 core:14 pu:2";

#[test]
#[cfg(feature = "hwloc")]
fn hwloc_two_socket_28_core_node_fills_socket_0_then_1_without_siblings() {
    let v = hwloc_plan(NODE_28, &[]);
    assert_eq!(v["machine"]["source"], "hwloc (foreign)");
    assert_eq!(
        v["counts"],
        serde_json::json!({"packages": 2, "numa_nodes": 2, "cores": 28, "pus": 56})
    );
    let s = slots(&v);
    assert_eq!(s.len(), 28, "one worker per core by default");
    assert_eq!(distinct(s.iter().map(|x| x.1)), 28, "distinct cores");
    // hwloc numbers a synthetic machine's PUs core by core: core c has PUs
    // 2c and 2c+1; the plan takes the first PU of every core.
    for (w, &(pu, core, package, numa)) in s.iter().enumerate() {
        assert_eq!(core, w as u64);
        assert_eq!(pu, 2 * core, "worker {w}");
        assert_eq!(package, core / 14);
        assert_eq!(numa, package, "NUMA node of worker {w}");
    }
    // The caches hwloc describes: one 16 MiB L3 (its default size) per package.
    let caches = v["machine"]["caches"].as_array().unwrap();
    assert_eq!(caches.len(), 2);
    assert!(caches
        .iter()
        .all(|c| c["level"] == 3 && c["pus"].as_array().unwrap().len() == 28));
    // With --smt the 56 workers take the siblings after one PU per core.
    let s = slots(&hwloc_plan(NODE_28, &["--smt"]));
    assert_eq!(s.len(), 56);
    assert_eq!(distinct(s.iter().map(|x| x.0)), 56);
    assert!(s[..28].iter().all(|x| x.0 % 2 == 0) && s[28..].iter().all(|x| x.0 % 2 == 1));
}

#[test]
#[cfg(feature = "hwloc")]
fn hwloc_three_ranks_split_28_cores_into_disjoint_blocks() {
    let mut all = Vec::new();
    for (rank, want) in [(0, 10), (1, 9), (2, 9)] {
        let v = hwloc_plan(
            NODE_28,
            &["--ranks-per-node", "3", "--local-rank", &rank.to_string()],
        );
        let s = slots(&v);
        assert_eq!(s.len(), want, "rank {rank}");
        assert!(v["plan"]["warnings"].as_array().unwrap().is_empty());
        all.extend(s.iter().map(|x| x.1));
    }
    assert_eq!(all.len(), 28);
    assert_eq!(distinct(all.iter()), 28, "no core shared between ranks");
    // Contiguous blocks: rank 0 cores 0..10, rank 1 10..19, rank 2 19..28.
    assert_eq!(all, (0..28).collect::<Vec<u64>>());
}

#[test]
#[cfg(feature = "hwloc")]
fn hwloc_plans_stay_inside_a_cpuset() {
    // {5,7,9,11} on a 16-core machine without SMT.
    let v = hwloc_plan("package:1 core:16 pu:1", &["--allowed", "5,7,9,11"]);
    let s = slots(&v);
    assert_eq!(s.iter().map(|x| x.0).collect::<Vec<_>>(), vec![5, 7, 9, 11]);
    // A single-core cpuset: every worker there, with a warning.
    let v = hwloc_plan(NODE_28, &["--allowed", "3", "--workers", "3"]);
    let s = slots(&v);
    assert!(s.iter().all(|x| x.0 == 3), "{s:?}");
    assert_eq!(s.len(), 3);
    let w = v["plan"]["warnings"].to_string();
    assert!(w.contains("3 workers but 1 core"), "{w}");
    // PUs 2 and 3 are one core's siblings: one worker per core means one.
    let s = slots(&hwloc_plan(NODE_28, &["--allowed", "2-5"]));
    assert_eq!(s.iter().map(|x| x.0).collect::<Vec<_>>(), vec![2, 4]);
}

#[test]
#[cfg(feature = "hwloc")]
fn hwloc_machine_without_numa_information_still_plans() {
    // No NUMA level in the description: hwloc puts all memory in one node.
    let v = hwloc_plan("package:2 core:4 pu:1", &[]);
    assert_eq!(v["counts"]["numa_nodes"], 1);
    let s = slots(&v);
    assert_eq!(s.len(), 8);
    assert_eq!(distinct(s.iter().map(|x| x.1)), 8);
    assert_eq!(s.iter().filter(|x| x.2 == 0).count(), 4);
}

#[test]
#[cfg(feature = "hwloc")]
fn hwloc_reads_a_machine_from_an_xml_export() {
    // lstopo exports a machine as XML; air plans for it on another host.
    let dir = tempfile::tempdir().unwrap();
    let xml = dir.path().join("node.xml");
    let ok = Command::new("lstopo-no-graphics")
        .arg(&xml)
        .env("HWLOC_SYNTHETIC", NODE_28)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        return; // lstopo not installed (CI installs it)
    }
    let o = Command::new(AIR)
        .args(["topo", "--json", "--workers", "28"])
        .env("HWLOC_XMLFILE", &xml)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["counts"]["pus"], 56);
    assert_eq!(slots(&v), slots(&hwloc_plan(NODE_28, &["--workers", "28"])));
}

#[test]
#[cfg(feature = "hwloc")]
fn a_bad_hwloc_description_is_a_clear_error() {
    let o = Command::new(AIR)
        .args(["topo"])
        .env("HWLOC_SYNTHETIC", "package:zz")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("HWLOC_SYNTHETIC"), "{err}");
}

#[test]
fn this_machine_matches_lstopo() {
    // lstopo's counts (hwloc's tools) against `air topo`'s, whichever
    // reader (hwloc or sysfs) this build uses.
    let count = |what: &str| -> Option<u64> {
        let o = Command::new("hwloc-calc")
            .args(["-N", what, "all"])
            .output()
            .ok()?;
        String::from_utf8_lossy(&o.stdout).trim().parse().ok()
    };
    let Some(pus) = count("pu") else {
        return; // hwloc's tools are not installed (CI installs them)
    };
    let o = Command::new(AIR).args(["topo", "--json"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let c = &v["counts"];
    assert_eq!(c["pus"], pus);
    assert_eq!(c["cores"], count("core").unwrap());
    assert_eq!(c["packages"], count("package").unwrap());
    assert_eq!(c["numa_nodes"], count("numa").unwrap());
}

#[test]
fn unbound_slurm_tasks_split_the_node_in_air_topo() {
    let run = |env: &[(&str, &str)], extra: &[&str]| -> serde_json::Value {
        let mut c = Command::new(AIR);
        c.args(["topo", "--json", "--synthetic", "2x14x2"])
            .args(extra);
        for (k, v) in env {
            c.env(k, v);
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let slurm = [
        ("SLURM_LOCALID", "1"),
        ("SLURM_NODEID", "0"),
        ("SLURM_STEP_TASKS_PER_NODE", "2"),
    ];
    let v = run(&slurm, &[]);
    assert_eq!(
        (v["ranks_per_node"].as_u64(), v["local_rank"].as_u64()),
        (Some(2), Some(1))
    );
    let s = v["plan"]["slots"].as_array().unwrap();
    assert_eq!(s.len(), 14);
    assert!(s.iter().all(|s| s["package"] == 1));
    // Bound by srun to socket 1 already: one share, inside the binding.
    let mut bound = slurm.to_vec();
    bound.push(("SLURM_CPU_BIND_TYPE", "mask_cpu:"));
    let v = run(&bound, &["--allowed", "14-27,42-55"]);
    assert_eq!(v["ranks_per_node"], 1);
    let s = v["plan"]["slots"].as_array().unwrap();
    assert_eq!(s.len(), 14);
    assert!(s.iter().all(|s| s["package"] == 1));
}

#[test]
fn a_closed_pipe_ends_air_topo_quietly() {
    use std::io::Read;
    let mut child = Command::new(AIR)
        .args(["topo", "--synthetic", "64x64x2"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut first = [0u8; 16];
    out.read_exact(&mut first).unwrap();
    drop(out); // as `| head -c 16` would
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(!err.contains("panicked"), "{err}");
    assert_ne!(status.code(), Some(101), "{err}");
}

/// `air topo --json` on the machine hwloc loads from `HWLOC_XMLFILE=xml`.
#[cfg(feature = "hwloc")]
fn hwloc_xml(xml: &str) -> serde_json::Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(xml);
    let o = Command::new(AIR)
        .args(["topo", "--json"])
        .env("HWLOC_XMLFILE", path)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
#[cfg(feature = "hwloc")]
fn hwloc_pus_without_a_core_count_as_cores_of_their_own() {
    // Synthetic: no core level at all.
    let v = hwloc_plan("package:2 pu:2", &[]);
    assert_eq!(v["counts"]["cores"], 4);
    assert_eq!(distinct(slots(&v).iter().map(|x| x.1)), 4);
    // XML: package 0 holds PU 0 directly, package 1 a core with PUs 1, 2.
    let v = hwloc_xml("hwloc-pu-without-core.xml");
    assert_eq!(v["counts"]["cores"], 2);
    let s = slots(&v);
    assert_eq!(
        s.iter().map(|x| (x.0, x.2)).collect::<Vec<_>>(),
        vec![(0, 0), (1, 1)]
    );
}

#[test]
#[cfg(feature = "hwloc")]
fn hwloc_numa_nodes_0_and_2_are_two_nodes() {
    let v = hwloc_xml("hwloc-numa-0-and-2.xml");
    assert_eq!(v["counts"]["numa_nodes"], 2);
    let numa: Vec<u64> = slots(&v).iter().map(|x| x.3).collect();
    assert_eq!(numa, vec![0, 2]);
}
