//! Reports of `air run`: a run without latency samples reports no
//! percentiles (JSON `null`, printed `-`), not 0 ms.

mod common;

use serde_json::Value;
use std::process::{Command, Output};

const AIR: &str = env!("CARGO_BIN_EXE_air");

fn air(args: &[&str]) -> Output {
    Command::new(AIR).args(args).output().expect("run air")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn runs_without_latency_samples_report_no_percentiles() {
    let dir = common::tmpdir("options", "no-latency");
    let rep = dir.join("r.json");
    let r = rep.to_str().unwrap();
    // Paced (wall-clock event times, so latency is measured) but nothing
    // fires: no events, or no bid for q5's windows.
    for args in [
        &[
            "run", "wa", "--rate", "1000", "--events", "0", "--report", r,
        ][..],
        &[
            "run", "nexmark", "--query", "q5", "--rate", "1000", "--events", "1", "--report", r,
        ],
        &["run", "ysb", "--events", "0", "--report", r],
    ] {
        let o = air(args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&rep).unwrap()).unwrap();
        let l = &v["latency_ms"];
        assert_eq!(l["samples"], 0, "{args:?}: {v}");
        for p in ["p50_ms", "p95_ms", "p99_ms", "max_ms"] {
            assert!(l[p].is_null(), "{args:?}: {p} should be null: {l}");
        }
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            out.contains("p50 - ms, p95 - ms, p99 - ms, max - ms"),
            "{args:?}: {out}"
        );
    }
}
