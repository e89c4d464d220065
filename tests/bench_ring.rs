//! `air bench ring` end to end: a tiny run in both modes writes a CSV with
//! the expected rows and plausible numbers, a non-empty PNG, and leaves no
//! segment of its job in /dev/shm.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("air-bench-ring-test-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn leftover_segments(job: &str) -> Vec<String> {
    let prefix = air_shm::SegmentName::new(job, "").as_str().to_owned();
    std::fs::read_dir(air_shm::shm_dir())
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn tiny_run_in_both_modes_writes_csv_and_png() {
    let csv = scratch("ring.csv");
    let png = scratch("ring.png");
    let job = format!("benchringtest{}", std::process::id());
    let out = Command::new(env!("CARGO_BIN_EXE_air"))
        .args(["bench", "ring", "--sizes", "64,64K", "--duration-ms", "5"])
        .args([
            "--repeats",
            "2",
            "--latency-iters",
            "2000",
            "--mode",
            "both",
        ])
        .arg("--csv")
        .arg(&csv)
        .arg("--plot")
        .arg(&png)
        .env("AIR_JOB_ID", &job)
        .output()
        .expect("run air");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "air bench ring failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stdout.contains("# Targets"), "{stdout}");
    assert!(stdout.contains("cache-line"), "{stdout}");
    assert!(
        stdout.contains("ring pinned / unpinned frames/s (thread, paired medians): 64 "),
        "{stdout}"
    );

    let text = std::fs::read_to_string(&csv).expect("CSV written");
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    assert_eq!(
        header,
        [
            "kind",
            "mode",
            "contender",
            "size_bytes",
            "mb_per_s",
            "frames_per_s",
            "pct_of_roof",
            "p50_ns",
            "p99_ns",
            "p999_ns",
            "max_ns",
            "line_ns",
            "samples",
            "bad_frames",
            "runq_pct"
        ]
    );
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let num = |row: &[&str], name: &str| -> f64 {
        row[col(name)]
            .parse()
            .unwrap_or_else(|_| panic!("{name} not a number in {row:?}"))
    };
    let mut seen = BTreeSet::new();
    for line in lines {
        let row: Vec<&str> = line.split(',').collect();
        assert_eq!(row.len(), header.len(), "{line}");
        let key = (
            row[0].to_owned(),
            row[1].to_owned(),
            row[2].to_owned(),
            row[3].to_owned(),
        );
        assert!(seen.insert(key), "duplicate row {line}");
        assert_eq!(num(&row, "bad_frames"), 0.0, "{line}");
        match row[0] {
            "throughput" => {
                let size = num(&row, "size_bytes");
                let mbs = num(&row, "mb_per_s");
                let fps = num(&row, "frames_per_s");
                assert!(mbs > 0.0 && fps > 0.0, "{line}");
                assert!(
                    (fps * size / 1e6 - mbs).abs() <= 1e-6 * mbs.max(1.0),
                    "{line}"
                );
                assert!(mbs < 1e6, "implausible {mbs} MB/s: {line}");
                assert_eq!(row[col("p50_ns")], "", "{line}");
                assert!(num(&row, "line_ns") > 0.0, "{line}");
                if row[2] != "copy-roof" {
                    assert!(num(&row, "pct_of_roof") > 0.0, "{line}");
                }
            }
            "latency" => {
                let (p50, p99, max) = (
                    num(&row, "p50_ns"),
                    num(&row, "p99_ns"),
                    num(&row, "max_ns"),
                );
                assert!(p50 > 0.0 && p50 <= p99 && p99 <= max, "{line}");
                assert!(p50 < 1e7, "implausible p50 {p50} ns: {line}");
                assert_eq!(row[col("mb_per_s")], "", "{line}");
                assert!(num(&row, "samples") >= 2000.0, "{line}");
            }
            other => panic!("unknown kind {other}"),
        }
    }
    let mut want = BTreeSet::new();
    for size in ["64", "65536"] {
        for c in [
            "ring",
            "ring-frame",
            "ring-unpinned",
            "crossbeam",
            "rtrb",
            "copy-roof",
        ] {
            want.insert(("throughput", "thread", c, size));
        }
        for c in ["ring", "ring-frame", "copy-roof"] {
            want.insert(("throughput", "process", c, size));
        }
    }
    for c in ["ring", "ring-unpinned", "crossbeam", "rtrb", "cache-line"] {
        want.insert(("latency", "thread", c, "8"));
    }
    for c in ["ring", "cache-line"] {
        want.insert(("latency", "process", c, "8"));
    }
    let want: BTreeSet<(String, String, String, String)> = want
        .into_iter()
        .map(|(a, b, c, d)| (a.into(), b.into(), c.into(), d.into()))
        .collect();
    assert_eq!(seen, want);

    let bytes = std::fs::read(&png).expect("PNG written");
    assert!(bytes.len() > 10_000, "PNG of {} bytes", bytes.len());
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");

    let left = leftover_segments(&job);
    assert!(left.is_empty(), "segments left in /dev/shm: {left:?}");
    let _ = std::fs::remove_dir_all(csv.parent().unwrap());
}

#[test]
fn peer_options_are_hidden_and_bad_cores_are_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_air"))
        .args(["bench", "ring", "--help"])
        .output()
        .expect("run air");
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(
        help.contains("--sizes") && help.contains("--cores"),
        "{help}"
    );
    assert!(!help.contains("peer"), "{help}");

    let out = Command::new(env!("CARGO_BIN_EXE_air"))
        .args(["bench", "ring", "--cores", "0,4096", "--sizes", "64"])
        .output()
        .expect("run air");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("4096"));

    // Both ends on one CPU would crawl (both spin): refused up front.
    let out = Command::new(env!("CARGO_BIN_EXE_air"))
        .args(["bench", "ring", "--cores", "0,0", "--sizes", "64"])
        .output()
        .expect("run air");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("two different CPUs"));
}

/// `air bench exchange` checks that every record sent arrived (it fails
/// otherwise): at 3 workers through 4 KiB rings (backpressure on every
/// ring) it must succeed and report a positive rate for 3 workers.
#[test]
fn exchange_bench_moves_every_record_through_tiny_rings() {
    let out = Command::new(env!("CARGO_BIN_EXE_air"))
        .args(["bench", "exchange", "--records", "300000", "--repeats", "2"])
        .args(["--workers", "3", "--ring-bytes", "4096", "--no-pin"])
        .output()
        .expect("run air");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "air bench exchange failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let line = stdout
        .lines()
        .find(|l| l.starts_with("exchange: 3 workers, "))
        .unwrap_or_else(|| panic!("no result line:\n{stdout}"));
    // "312.4K records/s" or "12.5M records/s" (the unit follows the rate:
    // a loaded host may be slow).
    let rate = line["exchange: 3 workers, ".len()..]
        .split(" records/s")
        .next()
        .and_then(|v| {
            let (num, scale) = match v.trim().strip_suffix('M') {
                Some(n) => (n, 1e6),
                None => match v.trim().strip_suffix('K') {
                    Some(n) => (n, 1e3),
                    None => (v.trim(), 1.0),
                },
            };
            num.parse::<f64>().ok().map(|x| x * scale)
        })
        .unwrap_or_else(|| panic!("no records/s in {line:?}"));
    assert!(rate > 0.0, "{line}");
}
