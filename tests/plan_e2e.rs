//! `air plan` against what runs create: its figures for a shape equal the
//! rings, `/dev/shm` segments and window bytes a real run of that shape
//! reports (`"channels"` in `--report`), embedded and under `mpirun` on all
//! three tiers; and the 8 × 28 example.

mod common;

use serde_json::Value;
use std::process::{Command, Output};

const AIR: &str = env!("CARGO_BIN_EXE_air");

fn text(o: &Output) -> String {
    format!(
        "{}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `air plan ARGS --json`, parsed.
fn plan(args: &[&str]) -> Value {
    let o = Command::new(AIR)
        .args(["plan", "--json"])
        .args(args)
        .env_remove("SLURM_JOB_ID")
        .env_remove("AIR_EMULATE_RANKS_PER_NODE")
        .output()
        .expect("run air plan");
    assert!(o.status.success(), "{}", text(&o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)))
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn the_8_by_28_example_counts_every_edge_of_ysb() {
    let p = plan(&["--nodes", "8", "--ranks-per-node", "1", "--workers", "28"]);
    let edges = p["edges"].as_array().unwrap();
    // YSB's real graph: the partial aggregates at --ring-bytes, the rows
    // to their writer at a sixteenth (at least 64 KiB).
    assert_eq!(edges.len(), 2, "{p}");
    // Without --ring-bytes, 1 MiB rings would need 1.08 GiB per node: the
    // per-node budget scales them to the largest 4 KiB step within 1 GiB.
    let b = u(&edges[0]["ring_bytes"]);
    assert!(((900 << 10)..1 << 20).contains(&b) && b % 4096 == 0, "{p}");
    assert_eq!(u(&edges[1]["ring_bytes"]), 64 << 10);
    assert_eq!(p["rings_scaled_to_budget"], true, "{p}");
    assert_eq!(p["within_ring_budget"], true, "{p}");
    assert_eq!(u(&p["ring_budget_bytes"]), 1 << 30, "{p}");
    let plan = &p["plan"];
    // Per edge and node: 28² = 784 thread rings, and 7 peers × 28 workers
    // = 196 network rings in (one per worker, shared by the sending rank's
    // workers; a ring per worker pair would be 5,488): 7,840 per edge in
    // the job, where one ring per pair of the 224 workers was 50,176.
    assert_eq!(u(&plan["edges"][0]["rings"]["total"]), 7_840);
    assert_eq!(u(&plan["rings"]["total"]), 2 * 7_840);
    assert_eq!(u(&plan["rings_per_node"]["total"]), 2 * 980);
    assert_eq!(u(&plan["rings_per_node"]["thread"]), 2 * 784);
    assert_eq!(u(&plan["rings_per_node"]["network"]), 2 * 196);
    assert_eq!(u(&plan["rings_per_node"]["node"]), 0);
    let gib = |v: &Value| u(v) as f64 / (1u64 << 30) as f64;
    // Thread rings, window, and send mirrors (one segment of each outgoing
    // ring, all of a 64 KiB one), 196 of each: at most 1 GiB per node.
    let node = gib(&plan["memory_per_node"]["total_bytes"]);
    assert!((0.98..=1.0).contains(&node), "{node} GiB per node");
    let seg = |b: u64| air_shm::frame::segment_bytes(b as usize) as u64;
    assert_eq!(
        u(&plan["memory_per_node"]["mirror_bytes"]),
        196 * (seg(b) + (64 << 10))
    );
    assert!((7.8..=8.0).contains(&gib(&plan["job_bytes"])), "{plan}");
    // --ring-bytes is taken as given: 1 MiB rings, 1.05-1.1 GiB per node.
    let given = self::plan(&["--nodes", "8", "--workers", "28", "--ring-bytes", "1048576"]);
    assert_eq!(u(&given["edges"][0]["ring_bytes"]), 1 << 20);
    assert_eq!(given["rings_scaled_to_budget"], false, "{given}");
    let node = gib(&given["plan"]["memory_per_node"]["total_bytes"]);
    assert!((1.05..1.1).contains(&node), "{node} GiB per node");
    assert_eq!(
        u(&given["plan"]["memory_per_node"]["mirror_bytes"]),
        196 * ((256 << 10) + (64 << 10))
    );
    assert_eq!(u(&plan["window_per_rank"]["windows"]), 1);
    // Idle: 2 edges × (28 workers of the node + 7 remote ranks) per flush
    // (1 ms): E·(R·W + (N−1)·R), not E·G = 448.
    assert_eq!(
        u(&plan["control"]["watermark_frames_per_flush_per_worker"]),
        70
    );
    // The table says the same.
    let o = Command::new(AIR)
        .args(["plan", "--nodes", "8", "--ranks-per-node", "1"])
        .args(["--workers", "28"])
        .env_remove("SLURM_JOB_ID")
        .output()
        .unwrap();
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", text(&o));
    assert!(t.contains("7,840") && t.contains("15,680"), "{t}");
    assert!(t.contains("memory per node") && t.contains("GiB"), "{t}");
    assert!(t.contains("scaled down from 1,048,576 bytes"), "{t}");
    // A node the floor cannot bring within the budget says so.
    let big = self::plan(&["--nodes", "1", "--ranks-per-node", "8", "--workers", "28"]);
    assert_eq!(big["within_ring_budget"], false, "{big}");
    assert_eq!(u(&big["edges"][0]["ring_bytes"]), 64 << 10);
    let o = Command::new(AIR)
        .args(["plan", "--ranks-per-node", "8", "--workers", "28"])
        .env_remove("SLURM_JOB_ID")
        .output()
        .unwrap();
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(
        t.contains("to the floor (64.00 KiB): the busiest node still needs"),
        "{t}"
    );
}

#[test]
fn a_job_that_does_not_fit_exits_1_with_the_plan_and_the_refusal() {
    // 224 workers on one node with 16 MiB rings: 50,176 node-tier rings,
    // hundreds of GiB, which `air run` refuses here.
    let o = Command::new(AIR)
        .args(["plan", "--ranks-per-node", "8", "--workers", "28"])
        .args(["--ring-bytes", "16777216"])
        .env_remove("SLURM_JOB_ID")
        .env_remove("AIR_EMULATE_RANKS_PER_NODE")
        .output()
        .unwrap();
    let t = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(t.contains("memory per node"), "{t}");
    assert!(t.contains("does not fit: "), "{t}");
    // The JSON says the same, with the same status.
    let o = Command::new(AIR)
        .args(["plan", "--json", "--ranks-per-node", "8", "--workers", "28"])
        .args(["--ring-bytes", "16777216"])
        .env_remove("SLURM_JOB_ID")
        .env_remove("AIR_EMULATE_RANKS_PER_NODE")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["fits_this_machine"], false, "{v}");
    assert!(v["refusal"].as_str().is_some_and(|r| !r.is_empty()), "{v}");
    // A small job fits: exit 0.
    let o = Command::new(AIR)
        .args(["plan", "--workers", "2"])
        .env_remove("SLURM_JOB_ID")
        .env_remove("AIR_EMULATE_RANKS_PER_NODE")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains(": fits ("));
}

#[test]
fn a_run_without_ring_bytes_keeps_its_node_within_the_ring_budget() {
    // 40 workers in one process: 1,600 rings per edge, 1.7 GiB at 1 MiB.
    // The run scales its rings to the per-node budget (1 GiB) as `air
    // plan` does, and reports the same figures.
    let dir = common::tmpdir("plan", "budget");
    let rep = dir.join("r.json");
    let o = Command::new(AIR)
        .args(["run", "ysb", "--workers", "40", "--events", "20000"])
        .args(["--no-pin", "--report"])
        .arg(&rep)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&rep).unwrap()).unwrap();
    let p = plan(&["--workers", "40"]);
    assert_eq!(r["channels"]["plan"], p["plan"], "{r}");
    let plan = &p["plan"];
    let b = u(&plan["edges"][0]["ring_bytes"]);
    assert!(b < 1 << 20 && b % 4096 == 0, "{p}");
    assert!(u(&plan["memory_per_node"]["total_bytes"]) <= 1 << 30, "{p}");
    assert_eq!(
        u(&r["channels"]["created_per_rank"][0]["thread_rings"]),
        2 * 1_600
    );
    // The summary names the scaled rings, and says they were scaled.
    assert_eq!(r["channels"]["scaled_to_budget"], true, "{r}");
    assert_eq!(u(&r["channels"]["ring_bytes_requested"]), 1 << 20, "{r}");
    assert_eq!(u(&r["channels"]["ring_budget_bytes"]), 1 << 30, "{r}");
    let out = String::from_utf8_lossy(&o.stdout);
    let sizes = format!(
        ") of {} / 65,536 bytes (scaled down from 1,048,576 to keep a node's rings within \
         1.00 GiB; --ring-bytes sets them)",
        air_runtime::units::thousands(b)
    );
    assert!(out.contains(&sizes), "{sizes}: {}", text(&o));
    // With --ring-bytes: taken as given, not scaled, and not said to be.
    let o = Command::new(AIR)
        .args(["run", "ysb", "--workers", "2", "--events", "2000"])
        .args(["--no-pin", "--ring-bytes", "65536", "--report"])
        .arg(&rep)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&rep).unwrap()).unwrap();
    assert_eq!(r["channels"]["scaled_to_budget"], false, "{r}");
    assert!(r["channels"]["ring_budget_bytes"].is_null(), "{r}");
    assert!(!String::from_utf8_lossy(&o.stdout).contains("scaled down"));
}

/// A shape whose rings exceed the per-node budget even at the floor size
/// (150 workers in one process: 45,000 rings of 64 KiB, 2.9 GiB) runs with
/// floor-sized rings, and its summary says the budget was not met rather
/// than that the rings were scaled to fit it.
#[test]
fn a_run_over_the_budget_at_the_floor_says_so() {
    let o = Command::new(AIR)
        .args([
            "run",
            "ysb",
            "--workers",
            "150",
            "--events",
            "2000",
            "--no-pin",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains(
            "of 65,536 / 65,536 bytes (scaled down from 1,048,576 to the floor; a node's rings \
             still need 2."
        ) && out.contains("above the per-node budget of 1.00 GiB"),
        "{}",
        text(&o)
    );
    assert!(
        !out.contains("to keep a node's rings within"),
        "{}",
        text(&o)
    );
}

#[test]
fn plan_options_and_queries_follow_air_run() {
    // --ring-bytes and a query after `--`: WA has one keyed exchange
    // (and a collect of its rows).
    let p = plan(&["--workers", "3", "--ring-bytes", "65536", "--", "wa"]);
    let edges = p["edges"].as_array().unwrap();
    assert!(!edges.is_empty(), "{p}");
    assert_eq!(u(&edges[0]["ring_bytes"]), 65536);
    assert_eq!(
        u(&p["plan"]["rings"]["total"]),
        9 * edges.len() as u64,
        "{p}"
    );
    // A bad option of the query is refused as `air run` refuses it.
    let o = Command::new(AIR)
        .args(["plan", "--", "ysb", "--no-such-option"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    // SLURM's allocation when no shape is given.
    let o = Command::new(AIR)
        .args(["plan", "--json"])
        .env("SLURM_JOB_ID", "7")
        .env("SLURM_JOB_NUM_NODES", "4")
        .env("SLURM_TASKS_PER_NODE", "2(x4)")
        .env("SLURM_CPUS_PER_TASK", "3")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let p: Value = serde_json::from_slice(&o.stdout).unwrap();
    let plan = &p["plan"];
    assert_eq!(
        (
            u(&plan["nodes"]),
            u(&plan["ranks"]),
            u(&plan["workers_per_rank"])
        ),
        (4, 8, 3),
        "{p}"
    );
}

#[test]
fn an_embedded_run_creates_the_planned_rings() {
    let dir = common::tmpdir("plan", "embedded");
    let rep = dir.join("r.json");
    let o = Command::new(AIR)
        .args([
            "run",
            "ysb",
            "--workers",
            "2",
            "--events",
            "20000",
            "--no-pin",
        ])
        .args(["--ring-bytes", "65536", "--report"])
        .arg(&rep)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("channels: 8 rings"),
        "{}",
        text(&o)
    );
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&rep).unwrap()).unwrap();
    let p = plan(&["--workers", "2", "--ring-bytes", "65536"]);
    // The run's own plan is `air plan`'s.
    assert_eq!(r["channels"]["plan"], p["plan"], "{r}");
    let created = &r["channels"]["created_per_rank"][0];
    assert_eq!(
        u(&created["thread_rings"]),
        u(&p["plan"]["rings_per_rank"]["thread"])
    );
    assert_eq!(u(&created["thread_rings"]), 8);
    assert_eq!(u(&created["shm_segments"]), 0);
    assert_eq!(u(&created["window_bytes"]), 0);
}

#[cfg(feature = "mpi")]
mod mpi {
    use super::*;
    use std::process::Stdio;
    use std::time::Duration;

    fn mpirun(np: usize, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = air_rdma::mpirun_command(np);
        cmd.arg(AIR).args(args).envs(env.iter().copied());
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let child = cmd.spawn().expect("start mpirun (is MPI installed?)");
        let pid = child.id();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(o) => o.expect("wait"),
            Err(_) => {
                // SAFETY: plain kill of the launcher this test started.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
                panic!("mpirun -np {np} air {args:?} hung");
            }
        }
    }

    /// Runs YSB on `np` ranks × 2 workers with `env`, and checks every
    /// rank's created rings, segments and window against `air plan` with
    /// `plan_args` for the same shape (one machine: the node is all ranks).
    fn check(np: usize, extra: &[&str], env: &[(&str, &str)], plan_args: &[&str]) -> Value {
        let dir = common::tmpdir("plan", "mpi");
        let rep = dir.join("r.json");
        let rep_s = rep.to_string_lossy().into_owned();
        let mut args = vec!["run", "ysb", "--workers", "2", "--events", "20000"];
        args.extend(["--no-pin", "--ring-bytes", "65536", "--report", &rep_s]);
        args.extend(extra);
        let o = mpirun(np, &args, env);
        assert!(o.status.success(), "{}", text(&o));
        let r: Value = serde_json::from_str(&std::fs::read_to_string(&rep).unwrap()).unwrap();
        let mut pa = vec!["--nodes", "1", "--workers", "2", "--ring-bytes", "65536"];
        let n = np.to_string();
        pa.extend(["--ranks-per-node", &n]);
        pa.extend(plan_args);
        let p = plan(&pa);
        let plan = &p["plan"];
        let created = r["channels"]["created_per_rank"].as_array().unwrap();
        assert_eq!(created.len(), np, "{r}");
        let sum = |k: &str| created.iter().map(|c| u(&c[k])).sum::<u64>();
        // What the node's ranks created is what the plan says the node has.
        assert_eq!(
            sum("thread_rings"),
            u(&plan["rings_per_node"]["thread"]),
            "{r}\n{p}"
        );
        assert_eq!(
            sum("shm_segments"),
            u(&plan["memory_per_node"]["shm_segments"]),
            "{r}\n{p}"
        );
        assert_eq!(
            sum("network_rings"),
            u(&plan["rings_per_node"]["network"]),
            "{r}\n{p}"
        );
        assert_eq!(
            sum("window_bytes"),
            u(&plan["memory_per_node"]["window_bytes"]),
            "{r}\n{p}"
        );
        // Rank 0's window is the planned window of rank 0.
        assert_eq!(
            u(&created[0]["window_bytes"]),
            u(&r["channels"]["plan"]["window_per_rank"]["bytes"]),
            "{r}"
        );
        assert_eq!(
            r["channels"]["plan"]["memory_per_node"],
            plan["memory_per_node"]
        );
        r
    }

    #[test]
    fn three_ranks_on_all_tiers_create_the_planned_segments_and_windows() {
        // Emulated nodes of 2: ranks 0 and 1 share /dev/shm rings, rank 2
        // is on the network tier.
        let r = check(
            3,
            &[],
            &[("AIR_EMULATE_RANKS_PER_NODE", "2")],
            &["--emulate-ranks-per-node", "2"],
        );
        let created = &r["channels"]["created_per_rank"];
        // 2 edges × 2×2 rings from the other rank of the emulated node, and
        // the rank's doorbell segment.
        assert_eq!(u(&created[0]["shm_segments"]), 9, "{r}");
        assert_eq!(u(&created[2]["shm_segments"]), 0, "{r}");
        // Rank 2: 2 edges × 2 peer ranks × one ring per worker (2).
        assert_eq!(u(&created[2]["network_rings"]), 8, "{r}");
    }

    #[test]
    fn forced_network_ranks_allocate_the_planned_windows() {
        let r = check(2, &["--force-network"], &[], &["--force-network"]);
        let created = &r["channels"]["created_per_rank"];
        assert_eq!(u(&created[1]["shm_segments"]), 0, "{r}");
        // 2 edges × 1 peer rank × one ring per worker (2).
        assert_eq!(u(&created[1]["network_rings"]), 4, "{r}");
    }
}

#[test]
fn a_bad_query_option_is_named_once_and_plan_options_after_dashes_get_a_hint() {
    let run = |args: &[&str]| {
        let o = Command::new(AIR)
            .arg("plan")
            .args(args)
            .env_remove("SLURM_JOB_ID")
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let err = run(&["--", "ysb", "--bogus"]);
    assert_eq!(err.matches("error:").count(), 1, "{err}");
    assert!(
        err.contains("`air run ysb --bogus`: unexpected argument '--bogus'"),
        "{err}"
    );
    let err = run(&["--", "ysb", "--json"]);
    assert!(
        err.contains("(--json is an option of `air plan`: give it before `--`)"),
        "{err}"
    );
}
