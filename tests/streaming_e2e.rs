//! Results that leave as windows close: a paced `air run ysb` writes each
//! window's rows to `--out` while it runs (so `tail -f` shows them), ends
//! with the rows an unpaced run of the same events gives, and keeps its
//! memory flat (rows are not kept after they are written).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const AIR: &str = env!("CARGO_BIN_EXE_air");

fn windows_in(p: &Path) -> usize {
    let text = std::fs::read_to_string(p).unwrap_or_default();
    let mut w: Vec<&str> = text
        .lines()
        .skip(1)
        .filter(|l| l.ends_with(|c: char| c.is_ascii_digit()))
        .filter_map(|l| l.split(',').next())
        .collect();
    w.dedup();
    w.len()
}

#[test]
fn a_paced_run_streams_rows_as_windows_close_with_flat_memory() {
    let dir = tempfile::tempdir().unwrap();
    let (live, tl, rep) = (
        dir.path().join("live.csv"),
        dir.path().join("t.csv"),
        dir.path().join("r.json"),
    );
    // 1 M events/s for 60 s, synthetic event time at the same rate: 1-s
    // windows of 1 M events close one per second.
    let child = Command::new(AIR)
        .args(["run", "ysb", "--rate", "1000000", "--duration", "60"])
        .args(["--event-time", "synthetic", "--window-ms", "1000"])
        .args(["--workers", "2", "--no-pin", "--timeline-s", "2"])
        .arg("--out")
        .arg(&live)
        .arg("--timeline")
        .arg(&tl)
        .arg("--report")
        .arg(&rep)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs(12));
    let at_12s = windows_in(&live);
    assert!(
        at_12s >= 8,
        "{at_12s} windows in --out after {:?}",
        start.elapsed()
    );
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The same events unpaced (synthetic event time at 1 M events/s when no
    // --rate is given): the same rows, in the same order.
    let all = dir.path().join("all.csv");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&rep).unwrap()).unwrap();
    let events = r["events"].as_u64().unwrap();
    assert_eq!(events, 60_000_000);
    let o = Command::new(AIR)
        .args(["run", "ysb", "--events", &events.to_string()])
        .args(["--event-time", "synthetic", "--window-ms", "1000"])
        .args(["--workers", "2", "--no-pin", "--out"])
        .arg(&all)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (a, b) = (
        std::fs::read_to_string(&live).unwrap(),
        std::fs::read_to_string(&all).unwrap(),
    );
    assert_eq!(
        a.lines().count(),
        1 + 60 * 100,
        "60 windows × 100 campaigns"
    );
    assert!(a == b, "paced rows differ from the unpaced run's");
    // Memory: resident set of the timeline rows after a 10-s warm-up within
    // ±10% of their median (the last row is written after the job freed its
    // rings).
    let text = std::fs::read_to_string(&tl).unwrap();
    let mut rss: Vec<f64> = text
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let t: f64 = f[0].parse().ok()?;
            (t >= 10.0).then(|| f[3].parse().ok())?
        })
        .collect();
    rss.pop();
    assert!(rss.len() >= 20, "{text}");
    let mut sorted = rss.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    for v in &rss {
        assert!(
            (v / median - 1.0).abs() <= 0.10,
            "RSS {v} vs median {median}:\n{text}"
        );
    }
}

/// `air run ysb ARGS --report R`'s report.
fn ysb_report(args: &[&str], dir: &Path) -> serde_json::Value {
    let rep = dir.join("idle.json");
    let o = Command::new(AIR)
        .args(["run", "ysb"])
        .args(args)
        .arg("--report")
        .arg(&rep)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_str(&std::fs::read_to_string(&rep).unwrap()).unwrap()
}

#[test]
fn with_idle_ms_windows_close_while_the_input_is_quiet() {
    let dir = tempfile::tempdir().unwrap();
    // One event per second per worker, 200-ms windows: a window's rows
    // wait for the next event of every worker (up to a second or two),
    // unless a quiet worker goes idle after 50 ms.
    let args = [
        "--rate",
        "2",
        "--duration",
        "8",
        "--workers",
        "2",
        "--no-pin",
        "--window-ms",
        "200",
    ];
    let slow = ysb_report(&args, dir.path());
    let mut idle_args = args.to_vec();
    idle_args.extend(["--idle-ms", "50"]);
    let idle = ysb_report(&idle_args, dir.path());
    for r in [&slow, &idle] {
        assert_eq!(r["events"], 16, "{r}");
        assert_eq!(r["late_records"], 0, "{r}");
    }
    let p50 = |r: &serde_json::Value| r["latency_ms"]["p50_ms"].as_f64().unwrap();
    let max = |r: &serde_json::Value| r["latency_ms"]["max_ms"].as_f64().unwrap();
    assert!(
        p50(&slow) >= 700.0,
        "without --idle-ms: {}",
        slow["latency_ms"]
    );
    // Idle after 50 ms, plus the flush and the worker's tick.
    assert!(
        max(&idle) < 500.0,
        "with --idle-ms 50: {}",
        idle["latency_ms"]
    );
    assert_eq!(idle["params"]["idle_ms"], 50);
    // Only where event times follow the wall clock, on windowed queries,
    // and (NEXMark, whose paced events are stamped up to one gap early)
    // above one worker's gap between events.
    for bad in [
        vec!["ysb", "--event-time", "synthetic", "--idle-ms", "50"],
        vec!["ysb", "--idle-ms", "0"],
        vec!["nexmark", "--query", "q7", "--idle-ms", "50"],
        vec![
            "nexmark",
            "--query",
            "q1",
            "--rate",
            "100",
            "--idle-ms",
            "50",
        ],
        vec![
            "nexmark",
            "--query",
            "q7",
            "--rate",
            "4",
            "--workers",
            "2",
            "--idle-ms",
            "500",
        ],
    ] {
        let o = Command::new(AIR)
            .args(["run"])
            .args(&bad)
            .args(["--events", "10"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{bad:?}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("--idle-ms"),
            "{bad:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}
