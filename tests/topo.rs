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
    assert!(out.contains("warning: 2 workers but 1 cores"), "{out}");
}

#[test]
fn bad_options_are_refused() {
    for args in [
        &["topo", "--synthetic", "2x0x1"][..],
        &["topo", "--ranks-per-node", "2", "--local-rank", "2"],
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
        .map(|w| w["core"].as_u64().unwrap())
        .collect();
    assert_eq!(cores, vec![1, 1]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("2 workers but 1 cores"), "warns:\n{err}");
}
