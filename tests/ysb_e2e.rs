//! End-to-end tests of `air run ysb` / `air gen ysb`: results equal a plain
//! sequential computation for 1–4 workers, lateness, bad input, generator counts.

mod common;

use common::TmpDir;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const AIR: &str = env!("CARGO_BIN_EXE_air");

fn tmpdir(tag: &str) -> TmpDir {
    common::tmpdir("e2e", tag)
}

fn uuid(x: u128) -> String {
    let h = format!("{x:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

fn air(args: &[&str]) -> Output {
    Command::new(AIR).args(args).output().expect("run air")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Campaign c has ads 10c .. 10c+9; ids are derived so tests can name them.
fn ad(i: u128) -> u128 {
    0xad00_0000_0000_4000_8000_0000_0000_0000 + i
}
fn campaign(c: u128) -> u128 {
    0xca00_0000_0000_4000_8000_0000_0000_0000 + c
}

fn write_campaigns_csv(dir: &Path, n: u128) -> PathBuf {
    let p = dir.join("campaigns.csv");
    let mut s = String::from("ad_id,campaign_id\n");
    for c in 0..n {
        for a in 0..10 {
            s += &format!("{},{}\n", uuid(ad(c * 10 + a)), uuid(campaign(c)));
        }
    }
    std::fs::write(&p, s).unwrap();
    p
}

#[derive(Clone, Copy)]
struct Ev {
    ad: u128,
    view: bool,
    t: u64,
}

fn line(e: &Ev, i: u64) -> String {
    format!(
        "{{\"user_id\":\"{}\",\"page_id\":\"{}\",\"ad_id\":\"{}\",\"ad_type\":\"banner\",\"event_type\":\"{}\",\"event_time\":\"{}\",\"ip_address\":\"10.0.0.{}\"}}\n",
        uuid(0x1111_0000_0000_4000_8000_0000_0000_0000 + i as u128),
        uuid(0x2222_0000_0000_4000_8000_0000_0000_0000 + i as u128),
        uuid(e.ad),
        if e.view { "view" } else { "click" },
        e.t,
        i % 250
    )
}

fn write_events(dir: &Path, name: &str, evs: &[Ev]) -> PathBuf {
    let p = dir.join(name);
    let mut s = String::new();
    for (i, e) in evs.iter().enumerate() {
        s += &line(e, i as u64);
    }
    std::fs::write(&p, s).unwrap();
    p
}

/// The sequential YSB: views of known ads, counted per (window, campaign);
/// an event older than (newest so far − delay) is late and dropped.
fn sequential(
    evs: &[Ev],
    n_campaigns: u128,
    window: u64,
    delay: u64,
) -> (BTreeMap<(u64, String), u64>, u64) {
    let mut out = BTreeMap::new();
    let mut newest = 0u64;
    let mut late = 0;
    for e in evs {
        if !e.view {
            continue;
        }
        let a = e.ad.wrapping_sub(ad(0));
        if a >= n_campaigns * 10 {
            continue;
        }
        if e.t < newest.saturating_sub(delay) {
            late += 1;
            continue;
        }
        newest = newest.max(e.t);
        *out.entry((e.t - e.t % window, uuid(campaign(a / 10))))
            .or_insert(0) += 1;
    }
    (out, late)
}

fn read_csv(p: &Path) -> BTreeMap<(u64, String), u64> {
    let s = std::fs::read_to_string(p).unwrap();
    let mut lines = s.lines();
    assert_eq!(lines.next(), Some("window_start_ms,campaign_id,count"));
    let mut m = BTreeMap::new();
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        assert_eq!(f.len(), 3, "{l}");
        let c: u64 = f[2].parse().unwrap();
        assert!(c > 0, "rows have non-zero counts");
        assert!(
            m.insert((f[0].parse().unwrap(), f[1].to_string()), c)
                .is_none(),
            "duplicate row {l}"
        );
    }
    m
}

fn report(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Events with window edges, disorder within the delay, unknown ads, clicks,
/// and an empty window (no events between 30 s and 40 s).
fn mixed_events() -> Vec<Ev> {
    let mut r = Rng(0x9e3779b97f4a7c15);
    let mut evs = Vec::new();
    let mut t = 1_000u64;
    let mut window = 0u64;
    for i in 0..20_000u64 {
        t += r.next() % 7;
        if (30_000..40_000).contains(&t) {
            t = 40_000;
        }
        if t - t % 10_000 != window {
            // Crossing into a new window: one view exactly on its start and
            // one on the last ms of the previous window (disorder within delay).
            window = t - t % 10_000;
            for et in [window, window - 1] {
                if (30_000..40_000).contains(&et) {
                    continue; // keep 30 s .. 40 s empty
                }
                evs.push(Ev {
                    ad: ad((r.next() % 1_000) as u128),
                    view: true,
                    t: et,
                });
            }
        }
        let mut et = t.saturating_sub(r.next() % 1_500); // disorder within a 2 s delay
        if (30_000..40_000).contains(&et) {
            et = 40_000;
        }
        let a = match i % 101 {
            0 => 5_000 + i as u128, // unknown ad
            _ => (r.next() % 1_000) as u128,
        };
        evs.push(Ev {
            ad: ad(a),
            view: r.next() % 3 != 0,
            t: et,
        });
    }
    evs
}

#[test]
fn same_results_for_1_to_4_workers_and_equal_to_sequential() {
    let dir = tmpdir("workers");
    let camp = write_campaigns_csv(&dir, 100);
    let evs = mixed_events();
    let input = write_events(&dir, "events.json", &evs);
    // Every event's lateness is judged within its worker's shard; with a
    // 3 s delay over ≤ 1.5 s of disorder nothing is late in any split.
    let (want, late) = sequential(&evs, 100, 10_000, 3_000);
    assert_eq!(late, 0);
    assert!(
        !want.keys().any(|(w, _)| *w == 30_000),
        "the empty window has no rows"
    );
    let unmatched = evs
        .iter()
        .filter(|e| e.view && e.ad.wrapping_sub(ad(0)) >= 1000)
        .count() as u64;
    assert!(unmatched > 0);
    for workers in 1..=4 {
        for mode in [
            &[][..],
            &["--shuffle", "--ring-bytes", "4096", "--batch", "16"][..],
        ] {
            let out = dir.join(format!("out{workers}.csv"));
            let rep = dir.join(format!("report{workers}.json"));
            let w = workers.to_string();
            let mut args = vec![
                "run",
                "ysb",
                "--input",
                input.to_str().unwrap(),
                "--campaigns",
                camp.to_str().unwrap(),
                "--workers",
                &w,
                "--max-delay-ms",
                "3000",
                "--no-pin",
                "--out",
                out.to_str().unwrap(),
                "--report",
                rep.to_str().unwrap(),
            ];
            args.extend_from_slice(mode);
            let o = air(&args);
            assert!(
                o.status.success(),
                "workers {workers} {mode:?}: {}",
                stderr(&o)
            );
            assert_eq!(read_csv(&out), want, "workers {workers} {mode:?}");
            let r = report(&rep);
            assert_eq!(r["events"], evs.len() as u64);
            assert_eq!(r["unmatched"], unmatched);
            assert_eq!(r["filtered"], evs.iter().filter(|e| !e.view).count() as u64);
            assert_eq!(r["late_records"], 0);
            assert_eq!(r["rows"], want.len() as u64);
            assert_eq!(r["per_worker"].as_array().unwrap().len(), workers);
            assert!(
                r["latency_ms"].is_null(),
                "file input has no wall-clock latency"
            );
        }
    }
}

#[test]
fn late_events_are_counted_and_dropped() {
    let dir = tmpdir("late");
    let v = |a: u128, t: u64| Ev {
        ad: ad(a),
        view: true,
        t,
    };
    let evs = vec![
        v(1, 1_000),
        v(2, 12_000),
        v(3, 10_500), // within the 2 s delay: on time
        v(4, 10_000), // exactly the watermark (12 000 − 2 000): on time
        v(5, 9_999),  // behind the watermark, its window [0, 10 000) closed: late
        v(6, 50_000),
        v(7, 1_000),  // far behind: late
        v(8, 48_000), // exactly the watermark: on time
        v(9, 47_000), // behind the watermark, but [40 000, 50 000) is open: counted
        Ev {
            ad: ad(1),
            view: false, // a click: filtered, whatever its time
            t: 3_000,
        },
    ];
    let (want, late) = sequential(&evs, 10, 10_000, 2_000);
    assert_eq!(late, 3, "the strict rule drops 9 999, 1 000 and 47 000");
    let mut want = want;
    *want.entry((40_000, uuid(campaign(0)))).or_insert(0) += 1;
    let input = write_events(&dir, "late.json", &evs);
    let (o, out, rep) = run_input(&dir, &input, &["--max-delay-ms", "2000"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(read_csv(&out), want);
    let r = report(&rep);
    assert_eq!(r["late_records"], 2);
    assert_eq!(r["disorder_max_ms"], 49_000);
    // Late views are late, not filtered (they reach the window first).
    let filtered: u64 = r["per_worker"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["filtered"].as_u64().unwrap())
        .sum();
    assert_eq!(filtered, 1, "{r}");
    let ops = r["late_by_operator"]["entries"].as_object().unwrap();
    assert_eq!(ops.len(), 1, "{ops:?}");
    let (label, e) = ops.iter().next().unwrap();
    assert!(
        label.starts_with("window at src/queries/ysb.rs:"),
        "{label}"
    );
    assert_eq!(e["records"], 2);
    assert_eq!(
        (&e["first_time_ms"], &e["first_watermark_ms"]),
        (&9_999.into(), &10_000.into())
    );
    // Never silent: stderr names the operator, the first late event and
    // the delay that keeps them all.
    let err = stderr(&o);
    assert!(
        err.contains("2 late record(s) at the window at src/queries/ysb.rs:")
            && err.contains("first: event time 9999 ms, behind watermark 10000 ms")
            && err.contains("came up to 49000 ms behind"),
        "{err}"
    );
    // With that delay none is late, and the rows are those of every event.
    let (o, out, rep) = run_input(&dir, &input, &["--max-delay-ms", "49000"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(report(&rep)["late_records"], 0);
    assert!(!stderr(&o).contains("late record"), "{}", stderr(&o));
    let (all, none) = sequential(&evs, 10, 10_000, u64::MAX);
    assert_eq!(none, 0);
    assert_eq!(read_csv(&out), all);
    // --fail-on-late: the rows and report are written, then exit 1.
    let (o, out, rep) = run_input(&dir, &input, &["--max-delay-ms", "2000", "--fail-on-late"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("2 late record(s) (--fail-on-late)"),
        "{}",
        stderr(&o)
    );
    assert_eq!(read_csv(&out), want);
    assert_eq!(report(&rep)["late_records"], 2);
}

fn run_input(dir: &Path, input: &Path, extra: &[&str]) -> (Output, PathBuf, PathBuf) {
    let camp = write_campaigns_csv(dir, 10);
    let out = dir.join("bad-out.csv");
    let rep = dir.join("bad-report.json");
    let _ = std::fs::remove_file(&out);
    let mut args = vec![
        "run",
        "ysb",
        "--input",
        input.to_str().unwrap(),
        "--campaigns",
        camp.to_str().unwrap(),
        "--workers",
        "1",
        "--no-pin",
        "--out",
        out.to_str().unwrap(),
        "--report",
        rep.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    (air(&args), out, rep)
}

fn good_lines(n: u64) -> String {
    (0..n)
        .map(|i| {
            line(
                &Ev {
                    ad: ad(i as u128 % 100),
                    view: true,
                    t: 1_000 + i,
                },
                i,
            )
        })
        .collect()
}

#[test]
fn bad_input_names_file_line_and_field() {
    let dir = tmpdir("bad");
    // (file, bytes, text the error must contain, events accepted before it)
    let cases: Vec<(&str, Vec<u8>, &str, u64)> = vec![
        ("malformed.json", format!("{}{{\"user_id\": oops\n", good_lines(2)).into_bytes(), ":3:", 2),
        (
            "missing.json",
            format!("{}{{\"user_id\":\"{}\",\"page_id\":\"{}\",\"ad_id\":\"{}\",\"ad_type\":\"banner\",\"event_type\":\"view\",\"ip_address\":\"1.2.3.4\"}}\n", good_lines(1), uuid(1), uuid(2), uuid(ad(1))).into_bytes(),
            "event_time",
            1,
        ),
        (
            "nonnumeric.json",
            good_lines(3).replacen("\"event_time\":\"1001\"", "\"event_time\":\"12ab\"", 1).into_bytes(),
            "nonnumeric.json:2: field event_time",
            1,
        ),
        ("utf8.json", [good_lines(1).into_bytes(), b"{\"user_id\":\"\xff\xfe\"}\n".to_vec()].concat(), ":2:", 1),
    ];
    for (name, bytes, needle, good) in cases {
        let p = dir.join(name);
        std::fs::write(&p, &bytes).unwrap();
        let (o, out, _) = run_input(&dir, &p, &[]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains(name) && err.contains(needle), "{name}: {err}");
        // Nothing accepted is lost: the good lines before the error are counted.
        let rows = read_csv(&out);
        let total: u64 = rows.values().sum();
        assert_eq!(
            total, good,
            "{name}: results of the accepted events are written"
        );
    }
    // Each field of a missing-field line is named.
    let p = dir.join("nofield.json");
    std::fs::write(&p, good_lines(2).replacen("\"ad_id\"", "\"ad_idx\"", 1)).unwrap();
    let (o, _, _) = run_input(&dir, &p, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("nofield.json:1:") && stderr(&o).contains("ad_id"),
        "{}",
        stderr(&o)
    );

    // A 10 MB line.
    let p = dir.join("huge.json");
    let mut s = good_lines(1);
    s += &format!("{{\"user_id\":\"{}\"}}\n", "x".repeat(10 << 20));
    std::fs::write(&p, s).unwrap();
    let (o, _, _) = run_input(&dir, &p, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("huge.json:2:"), "{}", stderr(&o));

    // A missing file.
    let (o, _, _) = run_input(&dir, &dir.join("nope.json"), &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("nope.json"), "{}", stderr(&o));

    // --on-bad-record skip: skipped and counted, exit 0.
    let p = dir.join("skip.json");
    std::fs::write(&p, format!("{}not json\n{}", good_lines(3), good_lines(2))).unwrap();
    let (o, out, rep) = run_input(
        &dir,
        &p,
        &["--on-bad-record", "skip", "--max-delay-ms", "100"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(report(&rep)["skipped_records"], 1);
    assert_eq!(read_csv(&out).values().sum::<u64>(), 5);
    // The summary and the report name the first record skipped.
    let first = format!(
        "{}:4: malformed JSON at column 2 of the line: not JSON",
        p.display()
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).contains(&format!("  first skipped record: {first}")),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(
        report(&rep)["first_skipped_record"]
            .as_str()
            .is_some_and(|s| s.starts_with(&first)),
        "{}",
        report(&rep)
    );
}

#[test]
fn empty_file_and_missing_final_newline() {
    let dir = tmpdir("edge");
    let p = dir.join("empty.json");
    std::fs::write(&p, "").unwrap();
    let (o, out, rep) = run_input(&dir, &p, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(read_csv(&out).is_empty());
    assert_eq!(report(&rep)["rows"], 0);

    let p = dir.join("nonl.json");
    let s = good_lines(3);
    std::fs::write(&p, s.trim_end_matches('\n')).unwrap();
    let (o, out, _) = run_input(&dir, &p, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        read_csv(&out).values().sum::<u64>(),
        3,
        "the last line is read"
    );
}

#[test]
fn malformed_campaign_file() {
    let dir = tmpdir("camp");
    let camp = dir.join("bad-campaigns.txt");
    std::fs::write(
        &camp,
        format!(
            "\"{}\":\"{}\"\n\"not-a-uuid\":\"{}\"\n",
            uuid(ad(1)),
            uuid(campaign(1)),
            uuid(campaign(1))
        ),
    )
    .unwrap();
    let o = air(&[
        "run",
        "ysb",
        "--campaigns",
        camp.to_str().unwrap(),
        "--events",
        "10",
        "--no-pin",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("bad-campaigns.txt:2") && e.contains("ad_id"),
        "{e}"
    );
}

#[test]
fn generator_event_counts_and_rate() {
    let dir = tmpdir("gen");
    for workers in ["1", "3"] {
        let rep = dir.join("g.json");
        let o = air(&[
            "run",
            "ysb",
            "--events",
            "1000003",
            "--workers",
            workers,
            "--no-pin",
            "--report",
            rep.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let r = report(&rep);
        assert_eq!(r["events"], 1_000_003);
        // Memory stays small: 1 M events generated and aggregated, never held.
        let rss = r["peak_rss_bytes"].as_u64().unwrap();
        assert!(rss > 0 && rss < 256 << 20, "peak RSS {rss} bytes");
        let rows: u64 = r["rows"].as_u64().unwrap();
        assert!(rows >= 100, "100 campaigns see views");
        assert!(r["latency_ms"]["p99_ms"].as_u64().is_some());
    }
    let rep = dir.join("rate.json");
    let o = air(&[
        "run",
        "ysb",
        "--rate",
        "400000",
        "--duration",
        "1.0",
        "--workers",
        "2",
        "--no-pin",
        "--report",
        rep.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let n = report(&rep)["events"].as_u64().unwrap();
    assert!(
        (396_000..=404_000).contains(&n),
        "rate 400k/s for 1 s gave {n}"
    );
}

#[test]
fn generated_files_round_trip() {
    let dir = tmpdir("genfiles");
    let ev = dir.join("ev.json");
    let camp = dir.join("camp.txt");
    let o = air(&[
        "gen",
        "ysb",
        "--events",
        "50000",
        "--seed",
        "7",
        "--out",
        ev.to_str().unwrap(),
        "--campaigns-out",
        camp.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Sequential count over the file, parsed here.
    let mut want: BTreeMap<(u64, String), u64> = BTreeMap::new();
    let mut map = std::collections::HashMap::new();
    for l in std::fs::read_to_string(&camp).unwrap().lines() {
        let parts: Vec<&str> = l.split('"').collect();
        map.insert(parts[1].to_string(), parts[3].to_string());
    }
    for l in std::fs::read_to_string(&ev).unwrap().lines() {
        let v: Value = serde_json::from_str(l).unwrap();
        if v["event_type"] != "view" {
            continue;
        }
        let t: u64 = v["event_time"].as_str().unwrap().parse().unwrap();
        let c = map[v["ad_id"].as_str().unwrap()].clone();
        *want.entry((t - t % 10_000, c)).or_insert(0) += 1;
    }
    for workers in ["1", "2", "4"] {
        let out = dir.join("o.csv");
        let o = air(&[
            "run",
            "ysb",
            "--input",
            ev.to_str().unwrap(),
            "--campaigns",
            camp.to_str().unwrap(),
            "--workers",
            workers,
            "--no-pin",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(read_csv(&out), want, "workers {workers}");
    }
}

#[test]
fn generated_jobs_have_the_same_rows_for_any_number_of_workers() {
    // The generator's event g is the same whichever worker makes it, so a
    // generated job's rows do not depend on --workers.
    let dir = tmpdir("gen-workers");
    let mut outs = Vec::new();
    for workers in ["1", "3", "4"] {
        let out = dir.join(format!("w{workers}.csv"));
        let o = air(&[
            "run",
            "ysb",
            "--events",
            "200000",
            "--seed",
            "3",
            "--window-ms",
            "10",
            "--event-time",
            "synthetic",
            "--workers",
            workers,
            "--no-pin",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let rows = read_csv(&out);
        assert!(rows.len() >= 1000, "{} rows", rows.len());
        outs.push((workers, rows));
    }
    for (w, rows) in &outs[1..] {
        assert_eq!(rows, &outs[0].1, "{w} workers against 1");
    }
}

#[test]
fn absurd_options_are_refused_before_running() {
    let cases: &[(&[&str], &str)] = &[
        (&["--workers", "0"], "--workers"),
        (&["--batch", "0"], "--batch"),
        (&["--ring-bytes", "64"], "--ring-bytes"),
        (&["--rate", "1", "--workers", "2"], "--rate"),
        (&["--duration", "nan"], "--duration"),
        (&["--window-ms", "0"], "--window-ms"),
        (&["--input", "/dev/null", "--events", "5"], "--events"),
        (&["--input", "/dev/stdin"], "not a regular file"),
        (
            &["--events", "10", "--out", "/nonexistent-dir/x.csv"],
            "nonexistent-dir",
        ),
    ];
    for (extra, needle) in cases {
        let mut args = vec!["run", "ysb", "--no-pin"];
        args.extend_from_slice(extra);
        let start = std::time::Instant::now();
        let o = air(&args);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{extra:?}: {}", stderr(&o));
        assert!(
            start.elapsed() < std::time::Duration::from_secs(5),
            "{extra:?} ran before failing"
        );
    }
}

#[test]
fn timeline_rows_track_events_memory_and_latency_while_the_job_runs() {
    let dir = tmpdir("timeline");
    let (tl, rep) = (dir.join("t.csv"), dir.join("r.json"));
    let o = air(&[
        "run",
        "ysb",
        "--rate",
        "1000000",
        "--duration",
        "3",
        "--window-ms",
        "250",
        "--workers",
        "2",
        "--timeline",
        tl.to_str().unwrap(),
        "--timeline-s",
        "0.25",
        "--report",
        rep.to_str().unwrap(),
        "--latency-plot",
        dir.join("l.png").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let png = std::fs::read(dir.join("l.png")).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "latency plot"
    );
    let text = std::fs::read_to_string(&tl).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next().unwrap(),
        "elapsed_s,events,events_per_s,rss_bytes,rows,latency_p50_ms,latency_p99_ms,latency_max_ms"
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    // 3 s in rows of 0.25 s, plus the last partial one.
    assert!(
        (10..=16).contains(&rows.len()),
        "{} rows:\n{text}",
        rows.len()
    );
    let num = |s: &str| -> f64 { s.parse().unwrap() };
    let events: Vec<f64> = rows.iter().map(|r| num(r[1])).collect();
    assert!(events.windows(2).all(|w| w[0] <= w[1]), "{text}");
    assert_eq!(
        *events.last().unwrap() as u64,
        report(&rep)["events"].as_u64().unwrap()
    );
    // Paced at 1 M/s: the middle rows read about 1 M events/s.
    let mid = num(rows[rows.len() / 2][2]);
    assert!((5e5..2e6).contains(&mid), "{mid} events/s\n{text}");
    assert!(
        rows.iter().all(|r| num(r[3]) > 1e6),
        "resident bytes\n{text}"
    );
    // Windows of 250 ms fire during the run: latency samples in most rows,
    // and the samples add up to the report's rows (one per window and
    // campaign).
    let sampled: f64 = rows.iter().map(|r| num(r[4])).sum();
    assert_eq!(sampled as u64, report(&rep)["rows"].as_u64().unwrap());
    let with = rows.iter().filter(|r| !r[6].is_empty()).count();
    assert!(with >= rows.len() / 2, "{text}");

    let o = air(&[
        "run",
        "ysb",
        "--events",
        "1000",
        "--timeline",
        tl.to_str().unwrap(),
        "--timeline-s",
        "0",
    ]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("invalid value '0' for '--timeline-s"),
        "{}",
        stderr(&o)
    );
    // An uncreatable timeline is refused before the outputs are opened:
    // an existing --out survives.
    let keep = dir.join("keep.csv");
    std::fs::write(&keep, "precious\n").unwrap();
    let o = air(&[
        "run",
        "ysb",
        "--events",
        "1000",
        "--out",
        keep.to_str().unwrap(),
        "--timeline",
        "/nonexistent/t.csv",
    ]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("--timeline /nonexistent/t.csv"),
        "{}",
        stderr(&o)
    );
    assert_eq!(std::fs::read_to_string(&keep).unwrap(), "precious\n");
}

/// A probe of the sustainable search keeps up exactly when it read 99% of
/// its rate, its input lag stayed within `max_lag_ms` and grew by at most
/// max(10 ms, a tenth of it), and (with latency) its p99 is within
/// `max_p99_ms`; `why_not` says which rule a probe broke.
#[track_caller]
fn assert_keeps_up_by_the_rules(p: &Value, max_lag_ms: f64, max_p99_ms: Option<u64>) {
    let read = p["read_fraction"].as_f64().unwrap();
    let rate = p["rate"].as_f64().unwrap();
    assert!(
        (p["events_per_s"].as_f64().unwrap() / rate - read).abs() < 1e-6,
        "{p}"
    );
    let kept = read >= 0.99
        && p["input_lag_max_ms"].as_f64().unwrap() <= max_lag_ms
        && p["lag_growth_ms"]
            .as_f64()
            .is_some_and(|g| g <= (max_lag_ms / 10.0).max(10.0))
        && max_p99_ms.is_none_or(|m| p["p99_ms"].as_u64().is_some_and(|v| v <= m));
    assert_eq!(p["keeps_up"] == true, kept, "{p}");
    assert_eq!(p["why_not"].is_null(), kept, "{p}");
}

#[test]
fn sustainable_search_brackets_the_highest_rate_that_keeps_up() {
    let dir = tmpdir("sustainable");
    let (csv, rep) = (dir.join("p.csv"), dir.join("s.json"));
    let o = air(&[
        "bench",
        "ysb",
        "--sustainable",
        "--rate",
        "4000000",
        "--duration",
        "1",
        "--window-ms",
        "100",
        "--max-lag-ms",
        "100",
        "--precision",
        "0.5",
        "--workers",
        "2",
        "--csv",
        csv.to_str().unwrap(),
        "--report",
        rep.to_str().unwrap(),
        "--plot",
        dir.join("s.png").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let png = std::fs::read(dir.join("s.png")).unwrap();
    assert!(
        png.len() > 10_000 && png.starts_with(b"\x89PNG"),
        "a PNG plot"
    );
    let r = report(&rep);
    let probes = r["probes"].as_array().unwrap();
    let rate = |p: &Value| p["rate"].as_u64().unwrap();
    let best = r["sustainable_rate"].as_u64().unwrap();
    assert!(best > 0, "{r}");
    // The answer is the highest rate that kept up, and a probe above it
    // fell behind within the precision asked for.
    let kept: Vec<u64> = probes
        .iter()
        .filter(|p| p["keeps_up"] == true)
        .map(rate)
        .collect();
    assert_eq!(kept.iter().max(), Some(&best), "{r}");
    let above = probes
        .iter()
        .filter(|p| p["keeps_up"] == false && rate(p) > best)
        .map(rate)
        .min()
        .expect("a probe above the answer fell behind");
    assert!((above - best) as f64 <= 0.5 * best as f64, "{r}");
    // Every probe that failed broke a rule; every one kept up kept all.
    for p in probes {
        assert_keeps_up_by_the_rules(p, 100.0, Some(1000));
    }
    assert_eq!(r["at_sustainable"]["rate"].as_u64(), Some(best));
    let lines = std::fs::read_to_string(&csv).unwrap().lines().count();
    assert_eq!(lines, probes.len() + 1);

    // Probes too short to mean anything, and outputs that cannot be
    // written, are refused before the search.
    for (args, msg) in [
        (&["--duration", "0.5"][..], "--duration"),
        (&["--rate", "0"][..], "--rate"),
        (
            &["--max-lag-ms", "300", "--duration", "2"][..],
            "--max-lag-ms",
        ),
        (
            &["--plot", "/nonexistent/p.png"][..],
            "--plot /nonexistent/p.png",
        ),
    ] {
        let o = air(&[&["bench", "ysb", "--sustainable"][..], args].concat());
        assert!(!o.status.success(), "{args:?}");
        assert!(stderr(&o).contains(msg), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn sustainable_search_probes_wa_and_nexmark_queries() {
    // Options a probe cannot honour are refused before any probe runs.
    for (extra, says) in [
        (&["--events", "5"][..], "--events does not apply"),
        (&["--timeline", "t.csv"][..], "--timeline does not apply"),
        (&["--max-p99-ms", "0"][..], "--max-p99-ms must be positive"),
    ] {
        let mut args = vec![
            "bench",
            "ysb",
            "--sustainable",
            "--query",
            "wa",
            "--duration",
            "1",
        ];
        args.extend_from_slice(extra);
        let o = air(&args);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{extra:?}: {}", stderr(&o));
    }
    let dir = tmpdir("sustainable-query");
    let (csv, rep) = (dir.join("p.csv"), dir.join("s.json"));
    let search = |query: &str| -> (Output, Value) {
        let mut args = vec![
            "bench",
            "ysb",
            "--sustainable",
            "--query",
            query,
            "--rate",
            "1000000",
            "--duration",
            "1",
            "--max-lag-ms",
            "100",
            "--precision",
            "0.5",
            "--workers",
            "2",
            "--no-pin",
            "--csv",
            csv.to_str().unwrap(),
            "--report",
            rep.to_str().unwrap(),
        ];
        // q1 has no windows (and refuses window options).
        if query != "q1" {
            args.extend_from_slice(&["--window-ms", "100"]);
        }
        let o = air(&args);
        assert!(o.status.success(), "{query}: {}", stderr(&o));
        (o, report(&rep))
    };
    // WA: judged on input lag and p99 latency.
    let (o, r) = search("wa");
    assert_eq!(r["query"], "wa");
    assert_eq!(r["latency_judged"], true);
    let best = r["sustainable_rate"].as_u64().unwrap();
    assert!(best > 0, "{r}");
    for p in r["probes"].as_array().unwrap() {
        assert_keeps_up_by_the_rules(p, 100.0, Some(1000));
    }
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.starts_with("sustainable WA: "), "{out}");
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(text.lines().next().unwrap().ends_with(",query"), "{text}");
    assert!(text.lines().skip(1).all(|l| l.ends_with(",wa")), "{text}");

    // q1 has no windowed output: no latency, judged on the other rules.
    let (o, r) = search("q1");
    assert_eq!(r["query"], "nexmark-q1");
    assert_eq!(r["latency_judged"], false);
    assert!(r["sustainable_rate"].as_u64().unwrap() > 0, "{r}");
    for p in r["probes"].as_array().unwrap() {
        assert!(p["p99_ms"].is_null(), "{p}");
        assert_keeps_up_by_the_rules(p, 100.0, None);
    }
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("not judged on latency"), "{out}");

    // A query it does not know, and options of another query, are refused.
    for (args, msg) in [
        (&["--query", "q3"][..], "invalid value 'q3' for '--query"),
        (
            &["--query", "ysb", "--keys", "10"][..],
            "--keys does not apply to ysb",
        ),
        (
            &["--query", "q7", "--slide-ms", "10"][..],
            "--slide-ms does not apply to nexmark q7",
        ),
        (
            &["--query", "wa", "--max-delay-ms", "5"][..],
            "--max-delay-ms",
        ),
    ] {
        let o = air(&[&["bench", "ysb", "--sustainable"][..], args].concat());
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(msg), "{args:?}: {}", stderr(&o));
    }
    let o = air(&["bench", "ysb", "--sustainable", "--query", "q3"]);
    assert!(
        stderr(&o).contains("possible values: ysb, wa, q1, q2, q5, q7, q8"),
        "{}",
        stderr(&o)
    );
}

/// `--out` and `--report` are written whole or not at all: a run that
/// fails after its outputs were opened (here at job setup: rings larger
/// than the memory) leaves an earlier file at `--out` as it was and no
/// temp file beside it; a good run replaces it; a directory is refused.
#[test]
fn outputs_are_replaced_whole_or_left_alone() {
    for query in ["ysb", "wa"] {
        let dir = tmpdir(&format!("atomic-{query}"));
        let out = dir.join("o.csv");
        let rep = dir.join("r.json");
        std::fs::write(&out, "previous\n").unwrap();
        let o = air(&[
            "run",
            query,
            "--events",
            "1000",
            "--workers",
            "2",
            "--no-pin",
            "--ring-bytes",
            "8589934592",
            "--out",
            out.to_str().unwrap(),
            "--report",
            rep.to_str().unwrap(),
        ]);
        // A job refused at setup is a bad option: exit code 2.
        assert_eq!(o.status.code(), Some(2), "{query}: {}", stderr(&o));
        assert!(stderr(&o).contains("job setup"), "{query}: {}", stderr(&o));
        assert_eq!(
            std::fs::read_to_string(&out).unwrap(),
            "previous\n",
            "{query}"
        );
        assert!(!rep.exists(), "{query}: a report of a failed run");
        let names: Vec<String> = std::fs::read_dir(&*dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["o.csv"], "{query}: temp files left");
        let o = air(&[
            "run",
            query,
            "--events",
            "100000",
            "--workers",
            "2",
            "--no-pin",
            "--out",
            out.to_str().unwrap(),
            "--report",
            rep.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{query}: {}", stderr(&o));
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(text.starts_with("window_start_ms,"), "{query}: {text:.40}");
        assert!(report(&rep)["events"].as_u64().is_some(), "{query}");
        let o = air(&[
            "run",
            query,
            "--events",
            "1000",
            "--out",
            dir.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(2), "{query}");
        assert!(
            stderr(&o).contains("is a directory"),
            "{query}: {}",
            stderr(&o)
        );
    }
}

/// `--zipf 1.2` skews the campaigns (the window's key): with `--shuffle`
/// at 4 workers and `--rebalance off` the busiest worker gets well over the
/// mean at the keyed stage; `--rebalance on` evens it with the same rows,
/// and the rows are those of 1 worker. The hottest campaign (the map's
/// first) takes its Zipf share of the views, 1 / H(100, 1.2) = 0.2745.
#[test]
fn zipf_campaigns_skew_the_load_and_rebalance_keeps_the_rows() {
    let dir = tmpdir("zipf");
    let run = |name: &str, extra: &[&str]| {
        let (out, rep) = (
            dir.join(format!("{name}.csv")),
            dir.join(format!("{name}.json")),
        );
        let mut args = vec![
            "run",
            "ysb",
            "--events",
            "600000",
            "--seed",
            "3",
            "--window-ms",
            "100",
            "--event-time",
            "synthetic",
            "--zipf",
            "1.2",
            "--no-pin",
            "--out",
            out.to_str().unwrap(),
            "--report",
            rep.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let o = air(&args);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        (read_csv(&out), report(&rep))
    };
    let shuffle4 = ["--shuffle", "--workers", "4"];
    let (off_rows, off) = run("off", &[&shuffle4[..], &["--rebalance", "off"]].concat());
    let (on_rows, on) = run("on", &[&shuffle4[..], &["--rebalance", "on"]].concat());
    let (one_rows, _) = run("one", &["--workers", "1"]);
    assert_eq!(on_rows, off_rows, "rebalance on against off");
    assert_eq!(one_rows, off_rows, "4 workers against 1");
    let ratio = |r: &Value| r["load"]["max_over_mean"].as_f64().unwrap();
    assert!(ratio(&off) > 1.2, "not skewed: {}", off["load"]);
    assert!(
        ratio(&on) < ratio(&off),
        "on {} off {}",
        ratio(&on),
        ratio(&off)
    );
    assert!(on["load"]["rebalance"]["records"].as_u64().unwrap() > 0);
    let mut per_campaign: BTreeMap<&str, u64> = BTreeMap::new();
    for ((_, c), n) in &off_rows {
        *per_campaign.entry(c).or_insert(0) += n;
    }
    let views: u64 = per_campaign.values().sum();
    let top = *per_campaign.values().max().unwrap() as f64 / views as f64;
    assert!(
        (top - 0.2745).abs() < 0.01,
        "hottest campaign: {top} of {views} views"
    );
    let o = air(&["run", "ysb", "--events", "1000", "--zipf-shift-ms", "100"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--zipf-shift-ms"), "{}", stderr(&o));
}
