//! `air bench scale`: one `air run` per point, medians, efficiency against
//! the 1-worker rate, CSV and PNG; bad options refused.

use std::process::Command;

const AIR: &str = env!("CARGO_BIN_EXE_air");

#[test]
fn scale_runs_every_point_and_reports_efficiency_against_one_worker() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, png) = (dir.path().join("s.csv"), dir.path().join("s.png"));
    let o = Command::new(AIR)
        .args([
            "bench",
            "scale",
            "--workers",
            "1-2",
            "--repeats",
            "2",
            "--csv",
        ])
        .arg(&csv)
        .arg("--plot")
        .arg(&png)
        .args(["--", "wa", "--events", "2000000", "--no-pin"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&csv).unwrap();
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    assert_eq!(rows.len(), 2, "{text}");
    for (r, w) in rows.iter().zip([1, 2]) {
        assert_eq!(r[0], "workers");
        assert_eq!(r[2], w.to_string());
        // Two runs each, the median in events_per_s.
        let runs: Vec<f64> = r[5].split(' ').map(|x| x.parse().unwrap()).collect();
        assert_eq!(runs.len(), 2, "{text}");
        let eps: f64 = r[3].parse().unwrap();
        assert!(runs.iter().any(|x| (x - eps).abs() <= 1.0), "{text}");
    }
    let eff1: f64 = rows[0][4].parse().unwrap();
    assert!(
        (eff1 - 1.0).abs() < 1e-3,
        "1 worker is the baseline: {text}"
    );
    let eff2: f64 = rows[1][4].parse().unwrap();
    let eps: Vec<f64> = rows.iter().map(|r| r[3].parse().unwrap()).collect();
    assert!((eff2 - eps[1] / (2.0 * eps[0])).abs() < 1e-3, "{text}");
    let png = std::fs::read(&png).unwrap();
    assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000);
}

#[test]
fn scale_refuses_what_it_sets_itself_and_bad_counts() {
    for (args, msg) in [
        (&["--workers", "0", "--", "ysb"][..], "not a count"),
        (&["--workers", "3-1", "--", "ysb"][..], "backwards"),
        (
            &["--", "ysb", "--workers", "2"][..],
            "may not set --workers",
        ),
        (&["--repeats", "0", "--", "ysb"][..], "--repeats"),
    ] {
        let o = Command::new(AIR)
            .args(["bench", "scale"])
            .args(args)
            .output()
            .unwrap();
        assert!(!o.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(msg), "{args:?}: {err}");
    }
    // A failing run names its command.
    let o = Command::new(AIR)
        .args([
            "bench",
            "scale",
            "--workers",
            "1",
            "--",
            "ysb",
            "--window-ms",
            "0",
        ])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--window-ms") && err.contains("failed"),
        "{err}"
    );
}
