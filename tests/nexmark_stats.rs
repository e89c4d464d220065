//! `air run nexmark --query q15|q17` (the Flink suite's bidding and auction
//! statistics reports) end to end: the rows from 1, 2 and 4 workers equal a
//! plain sequential computation in this test over the same exported events,
//! in small windows and in the default day; the generator gives what its
//! export gives; a hand-made input puts prices on the rank edges and bids
//! on window edges; options the queries do not honour are refused; and
//! (feature `mpi`) two ranks give the single-process rows.

mod common;

use common::nexmark::{
    assert_accepted, assert_equal_everywhere, assert_file_on_1_2_4_workers, assert_refused,
    generate, rank, run, Bid, Events, GEN_20S,
};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};

/// The bids of every tumbling window of `size` ms with bids, by start.
fn by_window(e: &Events, size: u64) -> BTreeMap<u64, Vec<&Bid>> {
    let mut w: BTreeMap<u64, Vec<&Bid>> = BTreeMap::new();
    for b in &e.bids {
        w.entry(b.date_time / size * size).or_default().push(b);
    }
    w
}

/// q15's expected rows: per window, bids, distinct bidders and distinct
/// auctions, in all and per rank.
fn q15(e: &Events, size: u64) -> Vec<String> {
    by_window(e, size)
        .into_iter()
        .map(|(start, bids)| {
            let mut bids_n = [0u64; 4];
            let mut bidders: [BTreeSet<u64>; 4] = Default::default();
            let mut auctions: [BTreeSet<u64>; 4] = Default::default();
            for b in bids {
                for i in [0, 1 + rank(b.price)] {
                    bids_n[i] += 1;
                    bidders[i].insert(b.bidder);
                    auctions[i].insert(b.auction);
                }
            }
            let mut row = vec![start, start + size];
            row.extend(bids_n);
            row.extend(bidders.iter().map(|s| s.len() as u64));
            row.extend(auctions.iter().map(|s| s.len() as u64));
            join(&row)
        })
        .collect()
}

/// q17's expected rows: per window and auction, bids in all and per rank,
/// min, max, mean (integer division, rounded down) and sum of the prices.
fn q17(e: &Events, size: u64) -> Vec<String> {
    let mut rows = Vec::new();
    for (start, bids) in by_window(e, size) {
        let mut per: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        for b in bids {
            per.entry(b.auction).or_default().push(b.price);
        }
        for (auction, prices) in per {
            let n = prices.len() as u64;
            let sum: u64 = prices.iter().sum();
            let mut row = vec![start, start + size, auction, n];
            row.extend((0..3).map(|r| prices.iter().filter(|&&p| rank(p) == r).count() as u64));
            row.extend([
                *prices.iter().min().unwrap(),
                *prices.iter().max().unwrap(),
                sum / n,
                sum,
            ]);
            rows.push(join(&row));
        }
    }
    rows
}

fn join(v: &[u64]) -> String {
    v.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
}

fn reference(e: &Events, query: &str, size: u64) -> Vec<String> {
    match query {
        "q15" => q15(e, size),
        "q17" => q17(e, size),
        q => panic!("{q}"),
    }
}

#[test]
fn q15_and_q17_on_1_2_4_workers_equal_the_sequential_result() {
    let dir = common::tmpdir("nexstats", "eq");
    let (file, e) = generate(&dir, &GEN_20S);
    assert!(e.bids.len() > 30_000);
    // 20 s of event time: 5-s windows (several, the last one partial),
    // and the default day.
    for (window, size) in [(&["--window-ms", "5000"][..], 5000), (&[][..], 86_400_000)] {
        for query in ["q15", "q17"] {
            let want = reference(&e, query, size);
            // The generator itself gives what its export gives.
            assert_equal_everywhere(query, &file, &GEN_20S, window, &want);
            // Small rings (4 KiB frames): no record holds a window's set of
            // bidders or auctions.
            let mut a = vec!["run", "nexmark", "--query", query, "--workers", "2"];
            a.extend_from_slice(&GEN_20S);
            a.extend_from_slice(window);
            a.extend_from_slice(&["--ring-bytes", "4096"]);
            assert_eq!(
                run(&a, &dir.join("small.csv")),
                want,
                "{query} {window:?} small rings"
            );
            // Not trivial: several windows in 5 s, every rank has bids,
            // bidders and auctions repeat, q17's means are not the prices.
            let rows: Vec<Vec<u64>> = want
                .iter()
                .map(|r| r.split(',').map(|x| x.parse().unwrap()).collect())
                .collect();
            if size == 5000 {
                let windows: BTreeSet<u64> = rows.iter().map(|r| r[0]).collect();
                assert!(windows.len() >= 4, "{query}: {} windows", windows.len());
            }
            match query {
                "q15" => {
                    for r in &rows {
                        assert!(r[3..6].iter().all(|&n| n > 0), "every rank: {r:?}");
                        assert_eq!(r[2], r[3] + r[4] + r[5]);
                        // Bidders repeat (fewer than bids) and span ranks
                        // (the ranks' bidders overlap).
                        assert!(r[6] < r[2] && r[6] < r[7] + r[8] + r[9], "{r:?}");
                        assert!(r[10] < r[2] && r[10] < r[11] + r[12] + r[13], "{r:?}");
                    }
                }
                _ => {
                    assert!(rows.len() > 100, "{query}: {} rows", rows.len());
                    assert!(rows.iter().any(|r| r[3] > 3 && r[7] < r[9] && r[9] < r[8]));
                    assert!(rows.iter().any(|r| r[4] > 0 && r[5] > 0 && r[6] > 0));
                }
            }
        }
    }
}

#[test]
fn rank_edges_window_edges_and_empty_windows() {
    let dir = common::tmpdir("nexstats", "edges");
    let file = dir.join("events.json");
    let b = |auction: u64, bidder: u64, price: u64, t: u64| {
        json!({"type":"bid","auction":auction,"bidder":bidder,"price":price,
            "channel":"ch","url":"u","dateTime":t,"extra":""})
        .to_string()
    };
    let lines = [
        json!({"type":"person","id":1000,"name":"Ann","emailAddress":"e","creditCard":"c",
            "city":"x","state":"y","dateTime":0,"extra":""})
        .to_string(),
        // [0, 10): each rank edge; bidder 1 in ranks 1 and 2, bidder 2 in
        // ranks 2 and 3, auction 7 in ranks 1 and 2.
        b(7, 1, 9_999, 0),
        b(7, 1, 10_000, 3),
        b(7, 2, 999_999, 5),
        b(8, 2, 1_000_000, 9),
        // [10, 20) has no bid. t = 20 opens [20, 30).
        b(7, 3, 1, 20),
        b(7, 3, 4, 20),
        b(7, 3, 4, 29),
    ];
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let e = common::nexmark::load(&file);
    let q15_want = [
        "0,10,4,1,2,1,2,1,2,1,2,1,1,1",
        "20,30,3,3,0,0,1,1,0,0,1,1,0,0",
    ];
    let q17_want = [
        "0,10,7,3,1,2,0,9999,999999,339999,1019998",
        "0,10,8,1,0,0,1,1000000,1000000,1000000,1000000",
        // Two bids at the same time both count; (1 + 4 + 4) / 3 = 3.
        "20,30,7,3,3,0,0,1,4,3,9",
    ];
    for (query, want) in [("q15", &q15_want[..]), ("q17", &q17_want[..])] {
        let r = reference(&e, query, 10);
        assert_eq!(r, want, "{query}: the reference agrees with the hand count");
        assert_file_on_1_2_4_workers(query, &file, &["--window-ms", "10"], &r);
    }
    // The mean rounds down: 1 + 2 over two bids is 1.
    std::fs::write(&file, [b(5, 1, 1, 0), b(5, 2, 2, 1)].join("\n") + "\n").unwrap();
    let e = common::nexmark::load(&file);
    assert_eq!(q17(&e, 10), ["0,10,5,2,2,0,0,1,2,1,3"]);
    assert_file_on_1_2_4_workers("q17", &file, &["--window-ms", "10"], &q17(&e, 10));
}

#[test]
fn options_the_queries_do_not_honour_are_refused() {
    for query in ["q15", "q17"] {
        assert_refused(
            query,
            &[
                &["--slide-ms", "1000"],
                &["--window-ms", "0"],
                &["--window-ms", "1000", "--slide-ms", "500"],
            ],
        );
        // The same run with honoured options succeeds.
        assert_accepted(query, &["--window-ms", "1000", "--max-delay-ms", "10"]);
    }
}

/// q17 across two ranks (node tier, then `--force-network`) gives the
/// rows of one process.
#[cfg(feature = "mpi")]
#[test]
fn q17_runs_distributed() {
    let dir = common::tmpdir("nexstats", "mpi");
    let query = [
        "run",
        "nexmark",
        "--query",
        "q17",
        "--events",
        "100000",
        "--events-per-s",
        "5000",
        "--window-ms",
        "2000",
    ];
    common::nexmark::assert_two_ranks_equal_one_process(&query, &dir, 100);
}
