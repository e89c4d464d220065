//! `air run nexmark --query q10 --out-dir DIR`, log to file system: every
//! bid as a CSV row in its worker's part file of the minute of its event
//! time (`DIR/dt=yyyy-MM-dd/hm=HH:mm/part-r<rank>-w<worker>.csv`). For 1, 2
//! and 4 workers over an exported file and the generator on 3 workers, the
//! union of each minute's part files equals a plain sequential computation
//! in this test; every part file has its commit marker and every worker its
//! watermark file; options that do not fit are refused (exit 2); and
//! (feature `mpi`) two ranks write part files named by rank with the same
//! union.

mod common;

use common::nexmark::{air, csv, generate, refused, Events};
use std::collections::BTreeMap;
use std::path::Path;

/// Days in `month` (1..=12) of `year`.
fn month_days(year: u64, month: u64) -> u64 {
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// (year, month, day, hour, minute, second, ms) of `ms` since the epoch,
/// UTC, by counting whole years and months from 1970.
fn utc(ms: u64) -> (u64, u64, u64, u64, u64, u64, u64) {
    let mut days = ms / 86_400_000;
    let mut year = 1970;
    loop {
        let n = if month_days(year, 2) == 29 { 366 } else { 365 };
        if days < n {
            break;
        }
        days -= n;
        year += 1;
    }
    let mut month = 1;
    while days >= month_days(year, month) {
        days -= month_days(year, month);
        month += 1;
    }
    let t = ms % 86_400_000;
    (
        year,
        month,
        days + 1,
        t / 3_600_000,
        t / 60_000 % 60,
        t / 1000 % 60,
        t % 1000,
    )
}

/// The reference: partition path → its rows, sorted.
fn q10(e: &Events) -> BTreeMap<String, Vec<String>> {
    let mut parts: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for b in &e.bids {
        let (y, mo, d, h, mi, s, ms) = utc(b.date_time);
        let path = format!("dt={y:04}-{mo:02}-{d:02}/hm={h:02}:{mi:02}");
        let row = format!(
            "{},{},{},{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}.{ms:03},{}",
            b.auction,
            b.bidder,
            b.price,
            csv(&b.extra)
        );
        parts.entry(path).or_default().push(row);
    }
    for rows in parts.values_mut() {
        rows.sort();
    }
    parts
}

/// What a q10 run wrote under `dir`: partition path → (the union of its
/// part files' rows, sorted; the part files' names). Checks every part
/// file's commit marker (rows and bytes), and that the only other files
/// are the `_WATERMARK` files of `workers` workers, each at the end of the
/// stream.
fn read_out(dir: &Path, workers: usize) -> BTreeMap<String, (Vec<String>, Vec<String>)> {
    let mut out = BTreeMap::new();
    let mut watermarks = Vec::new();
    for dt in std::fs::read_dir(dir).unwrap() {
        let dt = dt.unwrap();
        let dname = dt.file_name().into_string().unwrap();
        if let Some(name) = dname.strip_prefix("_WATERMARK.") {
            let text = std::fs::read_to_string(dt.path()).unwrap();
            assert_eq!(
                text,
                format!("watermark_ms={} workers={workers}\n", u64::MAX),
                "{dname}"
            );
            watermarks.push(name.to_string());
            continue;
        }
        assert!(dname.starts_with("dt="), "unexpected {dname}");
        for hm in std::fs::read_dir(dt.path()).unwrap() {
            let hm = hm.unwrap();
            let hname = hm.file_name().into_string().unwrap();
            assert!(hname.starts_with("hm="), "unexpected {dname}/{hname}");
            let mut rows = Vec::new();
            let mut parts = Vec::new();
            let mut markers = 0;
            for f in std::fs::read_dir(hm.path()).unwrap() {
                let f = f.unwrap();
                let name = f.file_name().into_string().unwrap();
                if name.starts_with("_SUCCESS.") {
                    markers += 1;
                    continue;
                }
                let worker = name
                    .strip_prefix("part-")
                    .and_then(|n| n.strip_suffix(".csv"))
                    .unwrap_or_else(|| panic!("unexpected {dname}/{hname}/{name}"));
                let text = std::fs::read_to_string(f.path()).unwrap();
                let marker = hm.path().join(format!("_SUCCESS.{worker}"));
                let marker = std::fs::read_to_string(&marker)
                    .unwrap_or_else(|e| panic!("{}: {e}", marker.display()));
                let n = text.lines().count();
                assert!(n > 0, "an empty part file {dname}/{hname}/{name}");
                assert_eq!(
                    marker,
                    format!("rows={n} bytes={}\n", text.len()),
                    "{dname}/{hname}/{name}"
                );
                rows.extend(text.lines().map(str::to_string));
                parts.push(worker.to_string());
            }
            assert_eq!(markers, parts.len(), "{dname}/{hname}: a marker per part");
            rows.sort();
            parts.sort();
            out.insert(format!("{dname}/{hname}"), (rows, parts));
        }
    }
    watermarks.sort();
    assert_eq!(watermarks.len(), workers, "{watermarks:?}");
    out
}

/// `--out-dir`'s content without the part names.
fn rows_of(out: &BTreeMap<String, (Vec<String>, Vec<String>)>) -> BTreeMap<String, Vec<String>> {
    out.iter()
        .map(|(k, (r, _))| (k.clone(), r.clone()))
        .collect()
}

/// 20 000 events at 100 events/s: 200 s of event time from 22:13:20, so
/// four minutes (the first and last partial).
const GEN: [&str; 6] = ["--events", "20000", "--events-per-s", "100", "--seed", "11"];

fn run_q10(args: &[&str], dir: &Path) -> serde_json::Value {
    let report = dir.with_extension("json");
    let mut a = vec!["run", "nexmark", "--query", "q10"];
    a.extend_from_slice(args);
    a.extend_from_slice(&[
        "--out-dir",
        dir.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    let o = air(&a);
    assert!(
        o.status.success(),
        "{a:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap()
}

#[test]
fn q10_partitions_equal_the_reference_for_any_workers() {
    let tmp = common::tmpdir("nexq10", "ref");
    let (file, events) = generate(&tmp, &GEN);
    let want = q10(&events);
    assert_eq!(want.len(), 4, "{:?}", want.keys());
    assert_eq!(
        want.keys().next().unwrap(),
        "dt=2023-11-14/hm=22:13",
        "the generator starts at 1 700 000 000 000 ms, 2023-11-14 22:13:20 UTC"
    );
    let total: usize = want.values().map(Vec::len).sum();
    assert!(total > 15_000, "{total} bids");
    assert!(want.values().all(|r| r.len() > 1000));
    let file = file.to_str().unwrap();
    for w in [1usize, 2, 4] {
        let dir = tmp.join(format!("files-w{w}"));
        let ws = w.to_string();
        let report = run_q10(&["--input", file, "--workers", &ws], &dir);
        let got = read_out(&dir, w);
        assert_eq!(rows_of(&got), want, "{w} workers from the file");
        // Each worker reads byte ranges of the file (some minutes): the
        // part files are named by worker, every worker has some, and the
        // report counts them all.
        let names: Vec<String> = (0..w).map(|i| format!("r0-w{i}")).collect();
        let mut seen: Vec<String> = got.values().flat_map(|(_, p)| p.clone()).collect();
        let files = seen.len();
        seen.sort();
        seen.dedup();
        assert_eq!(seen, names, "{w} workers");
        assert_eq!(
            report["counters"]["partitions_committed"], files as u64,
            "{report}"
        );
        assert_eq!(report["rows"], total as u64, "{report}");
    }
    let dir = tmp.join("gen-w3");
    let mut args = GEN.to_vec();
    args.extend_from_slice(&["--workers", "3"]);
    run_q10(&args, &dir);
    let got = read_out(&dir, 3);
    assert_eq!(rows_of(&got), want, "the generator on 3 workers");
    // The generator interleaves the workers' events: each has every minute.
    for (p, (_, parts)) in &got {
        assert_eq!(parts, &["r0-w0", "r0-w1", "r0-w2"], "{p}");
    }
}

/// From a file, q10 reads in event time with `--max-delay-ms`: a bid older
/// than that behind the newest one read is late (dropped, counted), as in
/// the other queries; within the delay it lands in its minute.
#[test]
fn q10_files_are_read_in_event_time() {
    let tmp = common::tmpdir("nexq10", "late");
    let file = tmp.join("events.json");
    let bid = |t: u64| {
        format!(
            r#"{{"type":"bid","auction":1000,"bidder":1001,"price":100,"channel":"c","url":"u","dateTime":{t},"extra":""}}"#
        )
    };
    // Minute 1, minute 3, then minute 1 again (120 s behind the newest).
    let lines = [bid(60_000), bid(180_000), bid(61_000)];
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let f = file.to_str().unwrap();
    for (delay, late, minute1) in [("0", 0, 1), ("120000", 1, 2)] {
        let out = tmp.join(format!("out-{delay}"));
        let rep = run_q10(
            &[
                "--input",
                f,
                "--workers",
                "1",
                "--no-pin",
                "--max-delay-ms",
                delay,
            ],
            &out,
        );
        let late_got = rep["late_records"].as_u64().unwrap();
        assert_eq!(late_got, 1 - late, "delay {delay}: {rep}");
        let rows = rows_of(&read_out(&out, 1));
        let m1: usize = rows
            .iter()
            .filter(|(k, _)| k.contains("hm=00:01"))
            .map(|(_, v)| v.len())
            .sum();
        assert_eq!(m1, minute1, "delay {delay}: {rows:?}");
    }
}

#[test]
fn q10_refuses_what_does_not_fit() {
    let tmp = common::tmpdir("nexq10", "bad");
    let d = tmp.join("out");
    let d = d.to_str().unwrap();
    let o = tmp.join("o.csv");
    let o = o.to_str().unwrap();
    let base = ["run", "nexmark", "--events", "1000"];
    let cases: [&[&str]; 6] = [
        &["--query", "q10"],                             // no --out-dir
        &["--query", "q10", "--out-dir", d, "--out", o], // --out does not apply
        &["--query", "q10", "--out-dir", d, "--out-per-rank"],
        &["--query", "q10", "--out-dir", d, "--window-ms", "1000"],
        &["--query", "q0", "--out-dir", d], // q10 only
        &["--query", "q7", "--out-dir", d, "--out", o],
    ];
    for c in cases {
        refused(&[&base[..], c].concat());
        assert!(!Path::new(d).exists(), "{c:?} wrote nothing");
    }
    // A directory that is not empty is refused; an empty one is used.
    std::fs::create_dir_all(d).unwrap();
    std::fs::write(tmp.join("out/old.csv"), "x\n").unwrap();
    let mut a = base.to_vec();
    a.extend_from_slice(&["--query", "q10", "--out-dir", d]);
    let err = refused(&a);
    assert!(err.contains("not empty"), "{err}");
    std::fs::remove_file(tmp.join("out/old.csv")).unwrap();
    let r = air(&a);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(tmp
        .join("out/dt=2023-11-14/hm=22:13/part-r0-w0.csv")
        .exists());
}

/// q10 across two ranks (node tier, then `--force-network`): each rank's
/// worker writes its own part files, named by rank, and the union is the
/// reference.
#[cfg(feature = "mpi")]
#[test]
fn q10_runs_distributed() {
    let tmp = common::tmpdir("nexq10", "mpi");
    let (file, events) = generate(&tmp, &GEN);
    let want = q10(&events);
    for (i, extra) in common::nexmark::TIERS.into_iter().enumerate() {
        let dir = tmp.join(format!("dist{i}"));
        let mut args = vec!["run", "nexmark", "--query", "q10", "--workers", "1"];
        args.extend_from_slice(&["--input", file.to_str().unwrap()]);
        args.extend_from_slice(&["--out-dir", dir.to_str().unwrap()]);
        args.extend_from_slice(extra);
        common::nexmark::mpirun2(&args);
        let got = read_out(&dir, 2);
        assert_eq!(rows_of(&got), want, "two ranks {extra:?}");
        // Each rank's worker reads its byte range of the file (some
        // minutes) and names its part files by its rank.
        let mut seen: Vec<String> = got.values().flat_map(|(_, p)| p.clone()).collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen, ["r0-w0", "r1-w0"], "{extra:?}");
    }
}
