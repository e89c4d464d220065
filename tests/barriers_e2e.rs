//! Checkpoint barriers through the built-in queries (issue 31, the in-band
//! protocol alone): `air run … --barrier-ms 2` places a barrier every 2 ms
//! and aligns it at every operator (windows, pre-aggregation, joins,
//! top-N), and gives exactly the rows of the same run without barriers:
//! embedded, and under `mpirun -np 2` on the node and the network tier
//! (whose rings are shared by a rank's workers and carry rank-wide
//! watermarks: one applied ahead of frames kept aside for a held sender
//! made records late in q8 until it was queued behind them). The report's
//! `checkpoints` shows that barriers reached the sinks and were aligned.

mod common;

use common::{report, text};
use std::process::{Command, Output};

const AIR: &str = env!("CARGO_BIN_EXE_air");

/// Runs `air run QUERY…` (through `launch`) without and with barriers;
/// asserts equal rows and barriers seen in the report.
fn same_rows_with_barriers(what: &str, query: &[&str], launch: &dyn Fn(&[&str]) -> Output) {
    let dir = common::tmpdir("barriers", what);
    let mut rows = Vec::new();
    for barriers in [false, true] {
        let out = dir.join(format!("out-{barriers}.csv"));
        let rep = dir.join(format!("report-{barriers}.json"));
        let (o, r) = (out.to_string_lossy(), rep.to_string_lossy());
        let mut args: Vec<&str> = vec!["run"];
        args.extend(query);
        args.extend(["--no-pin", "--out", &o, "--report", &r]);
        if barriers {
            args.extend(["--barrier-ms", "2"]);
        }
        let res = launch(&args);
        assert!(res.status.success(), "{what}: air {args:?}: {}", text(&res));
        let v = report(&rep);
        if barriers {
            let c = &v["checkpoints"];
            assert!(c["barrier_last"].as_u64().unwrap_or(0) > 0, "{what}: {c}");
            assert!(c["alignments"].as_u64().unwrap_or(0) > 0, "{what}: {c}");
            assert!(
                c["alignment_us"]["p99_us"].as_u64().is_some(),
                "{what}: {c}"
            );
            assert!(
                text(&res).contains("barriers every 2 ms: newest at the sinks"),
                "{what}: no barrier line in the summary: {}",
                text(&res)
            );
        } else {
            assert!(v["checkpoints"].is_null(), "{what}");
        }
        assert_eq!(v["late_records"], 0, "{what} (barriers {barriers})");
        rows.push(common::sorted_lines(&out));
    }
    assert!(rows[0].len() > 1, "{what}: no rows");
    assert!(rows[0] == rows[1], "{what}: rows differ with barriers");
}

fn embedded(args: &[&str]) -> Output {
    Command::new(AIR).args(args).output().expect("run air")
}

#[test]
fn built_in_queries_give_the_same_rows_with_barriers() {
    for (what, q) in [
        ("ysb", &["ysb", "--events", "1000000", "--workers", "3"][..]),
        (
            "ysb-shuffle",
            &["ysb", "--events", "600000", "--workers", "2", "--shuffle"],
        ),
        ("wa", &["wa", "--events", "20000000", "--workers", "3"]),
        (
            "q5",
            &[
                "nexmark",
                "--query",
                "q5",
                "--events",
                "400000",
                "--workers",
                "3",
            ],
        ),
        (
            "q8",
            &[
                "nexmark",
                "--query",
                "q8",
                "--events",
                "400000",
                "--workers",
                "3",
            ],
        ),
        (
            "q4",
            &[
                "nexmark",
                "--query",
                "q4",
                "--events",
                "300000",
                "--workers",
                "2",
            ],
        ),
    ] {
        same_rows_with_barriers(what, q, &embedded);
    }
}

#[cfg(feature = "mpi")]
#[test]
fn barriers_align_across_ranks_on_the_node_and_network_tiers() {
    use common::wait;
    use std::process::Stdio;
    use std::time::Duration;
    for tier in ["node", "network"] {
        let launch = |args: &[&str]| {
            let mut cmd = air_rdma::mpirun_command(2);
            cmd.arg(AIR).args(args);
            if tier == "network" {
                cmd.arg("--force-network");
            }
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
            let child = cmd.spawn().expect("start mpirun (is MPI installed?)");
            wait(
                child,
                &format!("mpirun -np 2 air {args:?}"),
                Duration::from_secs(120),
            )
            .0
        };
        for (what, q) in [
            (
                "q8",
                &[
                    "nexmark",
                    "--query",
                    "q8",
                    "--events",
                    "300000",
                    "--workers",
                    "2",
                ][..],
            ),
            ("wa", &["wa", "--events", "20000000", "--workers", "2"]),
        ] {
            same_rows_with_barriers(&format!("{what}-{tier}"), q, &launch);
        }
    }
}
