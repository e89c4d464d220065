//! `air bench nexmark`: one `air run nexmark` per query, point and round;
//! a CSV row per (query, workers) with positive rates, CPU and RSS, the
//! Flink figure where one is published; bad options refused with exit 2.

use std::process::Command;

const AIR: &str = env!("CARGO_BIN_EXE_air");

const COLUMNS: &str = "query,kind,ranks,workers,events,events_per_s,events_per_s_min,\
                       events_per_s_max,events_per_s_per_worker,cpu_s,cpu_cores,cpu_util,\
                       peak_rss_bytes,events_per_cpu_s,flink_events_per_core_s,ratio_to_flink,\
                       runs_events_per_s";

#[test]
fn a_tiny_suite_gives_one_row_per_query_and_worker_count() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, png, json) = (
        dir.path().join("n.csv"),
        dir.path().join("n.png"),
        dir.path().join("n.json"),
    );
    // q6 has no published Flink figure, q7 has one.
    let o = Command::new(AIR)
        .args([
            "bench",
            "nexmark",
            "--query",
            "q7,q6",
            "--events",
            "20000",
            "--repeats",
            "1",
            "--csv",
        ])
        .arg(&csv)
        .arg("--plot")
        .arg(&png)
        .arg("--report")
        .arg(&json)
        .args(["--", "--no-pin"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(
        table.contains("n/a") && table.contains("x Flink"),
        "{table}"
    );
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next().unwrap(), COLUMNS);
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let ncol = COLUMNS.split(',').count();
    // Suite order (q6 before q7), 1 then 2 workers.
    let keys: Vec<(&str, &str)> = rows.iter().map(|r| (r[0], r[3])).collect();
    assert_eq!(
        keys,
        [("q6", "1"), ("q6", "2"), ("q7", "1"), ("q7", "2")],
        "{text}"
    );
    for r in &rows {
        assert_eq!(r.len(), ncol, "{text}");
        assert_eq!(r[1], "workers");
        assert_eq!(r[2], "1");
        let num = |i: usize| -> f64 { r[i].parse().unwrap_or_else(|_| panic!("{i}: {text}")) };
        assert_eq!(num(4), 20000.0, "every event read: {text}");
        for i in [5, 6, 7, 8, 9, 10, 11, 12, 13] {
            assert!(
                num(i) > 0.0,
                "column {}: {text}",
                COLUMNS.split(',').nth(i).unwrap()
            );
        }
        // One run: min = median = max; per worker = median / workers.
        assert!(num(6) <= num(5) && num(5) <= num(7), "{text}");
        assert_eq!(r[16].split(' ').count(), 1, "{text}");
        assert!((num(8) - num(5) / num(3)).abs() <= 1.0, "{text}");
        // A run's peak RSS is at least a few MiB and far below 24 GiB.
        assert!(num(12) > 1e6 && num(12) < 24e9, "{text}");
        match r[0] {
            "q6" => assert_eq!((r[14], r[15]), ("n/a", "n/a"), "{text}"),
            _ => {
                // Flink's published q7: 12.33 K events/s per core.
                assert_eq!(num(14), 12330.0, "{text}");
                assert!(
                    (num(15) - num(13) / 12330.0).abs() < 0.01 * num(15),
                    "{text}"
                );
            }
        }
    }
    let png = std::fs::read(&png).unwrap();
    assert!(png.starts_with(b"\x89PNG") && png.len() > 5_000);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["rows"].as_array().unwrap().len(), 4);
    assert!(report["flink_source"]["url"]
        .as_str()
        .unwrap()
        .contains("github.com/nexmark/nexmark"));
}

#[test]
fn bad_options_exit_2_naming_them() {
    for (args, msg) in [
        (&["--query", "q1,q99"][..], "q99"),
        (&["--workers", "0"][..], "not a count"),
        (&["--repeats", "0"][..], "--repeats"),
        (&["--events", "0"][..], "--events"),
        (&["--", "--workers", "2"][..], "may not set --workers"),
    ] {
        let o = Command::new(AIR)
            .args(["bench", "nexmark"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(msg), "{args:?}: {err}");
    }
}
