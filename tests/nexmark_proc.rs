//! `air run nexmark --query q12|q13` end to end. q12 (processing-time
//! windows) depends on the wall clock, so its invariants are checked, not
//! its rows: every bid counted exactly once per bidder over all windows,
//! windows aligned to their size, one row per (bidder, window), and rows
//! written while a paced run is still going. q13 (bounded side input join)
//! is deterministic: its rows from 1, 2 and 4 workers and from the
//! generator equal a sequential join in this test, with a side input file
//! and with the default table; bad side input lines are refused by file,
//! line and field (exit 2); options a query does not honour are refused;
//! and (feature `mpi`) two ranks give the single-process rows.

mod common;

use common::nexmark::{
    assert_accepted, assert_equal_everywhere, generate, query_refused, run, runs_everywhere,
    Events, GEN_20S,
};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Each bidder's bids.
fn bids_per_bidder(e: &Events) -> BTreeMap<u64, u64> {
    let mut m = BTreeMap::new();
    for b in &e.bids {
        *m.entry(b.bidder).or_insert(0) += 1;
    }
    m
}

/// Checks q12's rows (`bidder,bid_count,start,end`) for windows of `size`
/// ms: aligned, in (window, bidder) order, one per (bidder, window), a
/// positive count; returns the counts per bidder over all windows and the
/// windows seen.
fn q12_check(rows: &[String], size: u64, what: &str) -> (BTreeMap<u64, u64>, BTreeSet<u64>) {
    let mut per = BTreeMap::new();
    let mut windows = BTreeSet::new();
    let mut prev: Option<(u64, u64)> = None;
    for r in rows {
        let v: Vec<u64> = r.split(',').map(|x| x.parse().unwrap()).collect();
        let [bidder, count, start, end] = v[..] else {
            panic!("{what}: row {r}")
        };
        assert_eq!(start % size, 0, "{what}: window not aligned: {r}");
        assert_eq!(end, start + size, "{what}: {r}");
        assert!(count > 0, "{what}: {r}");
        // (window, bidder) strictly increasing: sorted, and no bidder
        // twice in one window.
        assert!(prev < Some((start, bidder)), "{what}: {prev:?} then {r}");
        prev = Some((start, bidder));
        *per.entry(bidder).or_insert(0) += count;
        windows.insert(start);
    }
    (per, windows)
}

#[test]
fn q12_counts_every_bid_once_in_aligned_windows() {
    let dir = common::tmpdir("nexproc", "q12");
    let (file, e) = generate(&dir, &GEN_20S);
    let want = bids_per_bidder(&e);
    // Not trivial: many bidders, most with several bids.
    assert!(want.len() > 100, "{} bidders", want.len());
    assert!(want.values().filter(|&&n| n > 1).count() > want.len() / 2);
    // Small windows (a run lasts longer than one), and the default 10 s.
    // The file on 1, 2 and 4 workers, and the generator itself: the same
    // bids.
    for (window, size) in [(&["--window-ms", "7"][..], 7), (&[][..], 10_000)] {
        for (what, rows) in runs_everywhere("q12", &file, &GEN_20S, window) {
            let (got, _) = q12_check(&rows, size, &what);
            assert_eq!(got, want, "{what}: bids per bidder");
        }
    }
}

/// Lines of `path` after the header (none if it does not exist yet).
fn data_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .map(|s| s.lines().skip(1).map(str::to_string).collect())
        .unwrap_or_default()
}

#[test]
fn q12_paced_rows_leave_while_the_run_goes_on() {
    let dir = common::tmpdir("nexproc", "q12paced");
    let out = dir.join("paced.csv");
    // 4 s at 2000 events/s: 8000 events, windows of 500 ms.
    let mut child = Command::new(env!("CARGO_BIN_EXE_air"))
        .args([
            "run",
            "nexmark",
            "--query",
            "q12",
            "--workers",
            "2",
            "--rate",
            "2000",
            "--duration",
            "4",
            "--seed",
            "11",
            "--window-ms",
            "500",
            "--out",
            out.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    // Rows seen in the file in the first 3.9 s after the spawn, while the
    // paced input was still running: the windows closing from 4 s on (at
    // least the last one) cannot be among them, however slowly the
    // process exits after writing them.
    let mut early = 0;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() < Duration::from_millis(3900) {
            early = early.max(data_lines(&out).len());
        }
        assert!(start.elapsed() < Duration::from_secs(60), "paced run hangs");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(status.success(), "{err}");
    let rows = data_lines(&out);
    assert!(
        early > 0 && early < rows.len(),
        "rows written before the end: {early} of {}",
        rows.len()
    );
    let (got, windows) = q12_check(&rows, 500, "paced");
    // About 8 windows in 4 s of wall clock.
    assert!(windows.len() >= 6, "{} windows", windows.len());
    // The same 8000 events unpaced: every bid counted once.
    let (_, e) = generate(&dir, &["--events", "8000", "--seed", "11"]);
    assert_eq!(got, bids_per_bidder(&e), "paced: bids per bidder");
}

/// q13's expected rows: bids whose `auction % 10000` is in `table`, with
/// its value, sorted by (date_time, auction, bidder, price); the value as
/// the CSV writer quotes it.
fn q13(e: &Events, table: &BTreeMap<u64, String>) -> Vec<String> {
    let mut rows: Vec<_> = e
        .bids
        .iter()
        .filter_map(|b| {
            let v = table.get(&(b.auction % 10_000))?;
            Some((b.date_time, b.auction, b.bidder, b.price, v))
        })
        .collect();
    rows.sort();
    rows.into_iter()
        .map(|(t, a, b, p, v)| {
            let v = if v.contains(',') || v.contains('"') {
                format!("\"{}\"", v.replace('"', "\"\""))
            } else {
                v.clone()
            };
            format!("{a},{b},{p},{t},{v}")
        })
        .collect()
}

#[test]
fn q13_joins_the_side_input_on_1_2_4_workers() {
    let dir = common::tmpdir("nexproc", "q13");
    let (file, e) = generate(&dir, &GEN_20S);
    // Every third key missing, one value with a comma and a quote, one
    // empty value, and a key no bid can reach (≥ 10000).
    let mut table = BTreeMap::new();
    let mut csv = String::new();
    for k in (0..10_000u64).filter(|k| k % 3 != 0) {
        let v = match k {
            1001 => "a,\"b\"".to_string(),
            1003 => String::new(),
            _ => format!("v{k}"),
        };
        table.insert(k, v);
    }
    for (k, v) in &table {
        if v.contains(',') {
            csv += &format!("{k},\"{}\"\n", v.replace('"', "\"\""));
        } else {
            csv += &format!("{k},{v}\n");
        }
    }
    csv += "\n12345,unreachable\n";
    let side = dir.join("side.csv");
    std::fs::write(&side, csv).unwrap();
    let want = q13(&e, &table);
    // Not trivial: about a third of the bids dropped, the odd values hit.
    assert!(
        want.len() > e.bids.len() / 2 && want.len() < e.bids.len() * 3 / 4,
        "{} of {} bids joined",
        want.len(),
        e.bids.len()
    );
    assert!(want.iter().any(|r| r.ends_with(",\"a,\"\"b\"\"\"")));
    assert!(want
        .iter()
        .any(|r| r.starts_with("1003,") && r.ends_with(',')));
    let side_arg = ["--side-input", side.to_str().unwrap()];
    assert_equal_everywhere("q13", &file, &GEN_20S, &side_arg, &want);
    // The default table (the Flink suite's: key k → "k"): every bid.
    let flink: BTreeMap<u64, String> = (0..10_000).map(|k| (k, k.to_string())).collect();
    let want = q13(&e, &flink);
    assert_eq!(want.len(), e.bids.len());
    let mut a = vec!["run", "nexmark", "--query", "q13", "--workers", "2"];
    a.extend_from_slice(&GEN_20S);
    assert_eq!(run(&a, &dir.join("def.csv")), want, "default table");
}

#[test]
fn bad_side_inputs_and_options_are_refused() {
    let dir = common::tmpdir("nexproc", "bad");
    let side = dir.join("side.csv");
    for (text, want) in [
        ("1,a\n2,b\nx,c\n", "line 3, field 1 (key)"),
        ("1,a\n-2,b\n", "line 2, field 1 (key)"),
        ("1,a\n2,b,c\n", "line 2: 3 fields"),
        ("1\n", "line 1: 1 fields"),
        (
            "1,a\n\n7,b\n7,c\n",
            "line 4, field 1 (key): key 7 was given already on line 3",
        ),
        ("1,a\n2,\"b\n", "line 2: a quote is not closed"),
        (
            "20000,a\n20000,b\n",
            "key 20000 was given already on line 1",
        ),
        ("1,\"a\n", "line 1"),
    ] {
        std::fs::write(&side, text).unwrap();
        let err = query_refused("q13", &["--side-input", side.to_str().unwrap()]);
        assert!(
            err.contains(side.to_str().unwrap()) && err.contains(want),
            "{text:?}: {err}"
        );
    }
    let missing = dir.join("missing.csv");
    let err = query_refused("q13", &["--side-input", missing.to_str().unwrap()]);
    assert!(err.contains("missing.csv"), "{err}");
    // A good file runs.
    std::fs::write(&side, "1,a\n").unwrap();
    assert_accepted("q13", &["--side-input", side.to_str().unwrap()]);
    // --side-input is q13's only; q12 takes --window-ms only; q13 no window.
    let side = side.to_str().unwrap();
    for (query, bad) in [
        ("q12", &["--side-input", side][..]),
        ("q0", &["--side-input", side]),
        ("q7", &["--side-input", side]),
        ("q12", &["--max-delay-ms", "10"]),
        ("q12", &["--slide-ms", "10"]),
        ("q12", &["--window-ms", "0"]),
        ("q13", &["--window-ms", "1000"]),
        ("q13", &["--max-delay-ms", "10"]),
    ] {
        query_refused(query, bad);
    }
    assert_accepted("q12", &["--window-ms", "1000"]);
}

/// q13 across two ranks (node tier, then `--force-network`) gives the
/// rows of one process; each rank reads the side input itself.
#[cfg(feature = "mpi")]
#[test]
fn q13_runs_distributed() {
    let dir = common::tmpdir("nexproc", "mpi");
    let side = dir.join("side.csv");
    let csv: String = (0..10_000u64)
        .filter(|k| k % 2 == 0)
        .map(|k| format!("{k},s{k}\n"))
        .collect();
    std::fs::write(&side, csv).unwrap();
    let query = [
        "run",
        "nexmark",
        "--query",
        "q13",
        "--events",
        "100000",
        "--events-per-s",
        "5000",
        "--side-input",
        side.to_str().unwrap(),
    ];
    common::nexmark::assert_two_ranks_equal_one_process(&query, &dir, 10_000);
}
