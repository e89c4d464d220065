//! `air run nexmark` q0, q11, q18 and q19 end to end: on 1, 2 and 4
//! workers the rows equal a plain sequential computation in this test over
//! the same exported events (`air gen nexmark`), the generator gives what
//! its export gives, a hand-made input pins ties and session edges, options
//! a query does not honour are refused, and (with the `mpi` feature) two
//! ranks give the embedded rows on the node and the network tier.

mod common;

use common::nexmark::{
    assert_accepted, assert_equal_everywhere, assert_file_on_1_2_4_workers, assert_refused,
    generate, load, query_refused, run, Events, GEN_20S,
};
use serde_json::json;
use std::cmp::Reverse;
use std::collections::BTreeMap;

/// Splits `items` into sessions of gap `gap` by `time` (items `gap` or
/// more apart are in two): (end = last time + gap, the session's items).
fn sessions<T>(mut items: Vec<T>, time: impl Fn(&T) -> u64, gap: u64) -> Vec<(u64, Vec<T>)> {
    items.sort_by_key(|x| time(x));
    let mut out: Vec<(u64, Vec<T>)> = Vec::new();
    for x in items {
        let t = time(&x);
        match out.last_mut() {
            Some((end, s)) if t < *end => {
                *end = t + gap;
                s.push(x);
            }
            _ => out.push((t + gap, vec![x])),
        }
    }
    out
}

/// The state retention of q18 and q19 when `--state-ttl-ms` is not given.
const DEFAULT_TTL: u64 = 60_000;

/// The expected CSV body (no header) of `query` (`gap`: q11's session
/// gap, ms; q18 and q19 use the default TTL), computed sequentially.
fn reference(e: &Events, query: &str, gap: u64) -> Vec<String> {
    reference_ttl(e, query, gap, DEFAULT_TTL)
}

/// [`reference`] with q18's and q19's state retention `ttl`, ms.
fn reference_ttl(e: &Events, query: &str, gap: u64, ttl: u64) -> Vec<String> {
    match query {
        "q0" => {
            let mut rows: Vec<(u64, u64, u64, u64)> = e
                .bids
                .iter()
                .map(|b| (b.date_time, b.auction, b.bidder, b.price))
                .collect();
            rows.sort();
            rows.iter()
                .map(|(t, a, b, p)| format!("{a},{b},{p},{t}"))
                .collect()
        }
        "q11" => {
            // Each bidder's bid times in order; a new session starts where
            // the next bid is gap or more after the previous one.
            let mut times: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
            for b in &e.bids {
                times.entry(b.bidder).or_default().push(b.date_time);
            }
            let mut rows = Vec::new(); // (end, bidder, start, count)
            for (bidder, mut ts) in times {
                ts.sort();
                let (mut start, mut last, mut n) = (ts[0], ts[0], 0u64);
                for t in ts {
                    if t - last >= gap {
                        rows.push((last + gap, bidder, start, n));
                        (start, n) = (t, 0);
                    }
                    last = t;
                    n += 1;
                }
                rows.push((last + gap, bidder, start, n));
            }
            rows.sort();
            rows.iter()
                .map(|(end, b, start, n)| format!("{b},{n},{start},{end}"))
                .collect()
        }
        "q18" => {
            // Per (auction, bidder), sessions of gap `ttl`: each one's
            // bid with the largest (time, price), by (end, auction, bidder).
            let mut by_key: BTreeMap<(u64, u64), Vec<(u64, u64)>> = BTreeMap::new();
            for b in &e.bids {
                by_key
                    .entry((b.auction, b.bidder))
                    .or_default()
                    .push((b.date_time, b.price));
            }
            let mut rows = Vec::new(); // (end, auction, bidder, time, price)
            for ((a, b), bids) in by_key {
                for (end, s) in sessions(bids, |x| x.0, ttl) {
                    let (t, p) = s.into_iter().max().unwrap();
                    rows.push((end, a, b, t, p));
                }
            }
            rows.sort();
            rows.iter()
                .map(|(_, a, b, t, p)| format!("{a},{b},{p},{t}"))
                .collect()
        }
        "q19" => {
            // Per auction, sessions of gap `ttl`: each one's 10 best bids,
            // by (end, auction, rank).
            let mut by_auction: BTreeMap<u64, Vec<(Reverse<u64>, u64, u64)>> = BTreeMap::new();
            for b in &e.bids {
                by_auction.entry(b.auction).or_default().push((
                    Reverse(b.price),
                    b.date_time,
                    b.bidder,
                ));
            }
            let mut rows = Vec::new(); // (end, auction, rank, row)
            for (a, bids) in by_auction {
                for (end, mut s) in sessions(bids, |x| x.1, ttl) {
                    s.sort();
                    for (i, (Reverse(p), t, b)) in s.iter().take(10).enumerate() {
                        rows.push((end, a, i + 1, format!("{a},{b},{p},{t},{}", i + 1)));
                    }
                }
            }
            rows.sort();
            rows.into_iter().map(|r| r.3).collect()
        }
        q => panic!("{q}"),
    }
}

/// Runs `query` over `file` on 1, 2 and 4 workers, unpinned, (with
/// `extra` options) and checks every run gives `want`.
fn check_workers(query: &str, file: &std::path::Path, extra: &[&str], want: &[String]) {
    assert_file_on_1_2_4_workers(query, file, &[&["--no-pin"], extra].concat(), want);
}

#[test]
fn q0_q11_q18_q19_on_1_2_4_workers_equal_the_sequential_result() {
    let dir = common::tmpdir("nexmore", "eq");
    let (file, e) = generate(&dir, &GEN_20S);
    assert_eq!(e.bids.len(), 36_800);
    // The default gap (10 s) and a short one (1 s) that cuts the 20 s of
    // event time into many sessions; for q18 and q19 (`gap` is then the
    // state TTL) the default TTL (a minute: one session per key) and 200 ms,
    // which expires the state of keys between their bids.
    for (query, gap) in [
        ("q0", None),
        ("q11", None),
        ("q11", Some("1000")),
        ("q18", None),
        ("q19", None),
        ("q18", Some("200")),
        ("q19", Some("200")),
    ] {
        let ttl_query = matches!(query, "q18" | "q19");
        let want = match (ttl_query, gap) {
            (true, Some(ttl)) => {
                let short = reference_ttl(&e, query, 0, ttl.parse().unwrap());
                let mut whole = reference(&e, query, 0);
                // Expired state: the short TTL gives more rows (keys with
                // two sessions) than the final table.
                assert!(short.len() > whole.len(), "{query}: {ttl} ms expires keys");
                whole.sort();
                let mut sorted = short.clone();
                sorted.sort();
                assert_ne!(sorted, whole);
                short
            }
            _ => reference(&e, query, gap.map_or(10_000, |g| g.parse().unwrap())),
        };
        assert!(!want.is_empty(), "{query}: the reference has rows");
        let flag = if ttl_query {
            "--state-ttl-ms"
        } else {
            "--window-ms"
        };
        let mut w = vec!["--no-pin"];
        if let Some(g) = gap {
            w.extend([flag, g]);
        }
        match query {
            "q0" => assert_eq!(want.len(), e.bids.len()),
            "q11" => {
                // Not trivial: sessions of several bids, every bid counted
                // once, and (1 s gap) bidders with several sessions.
                let counts: Vec<u64> = want
                    .iter()
                    .map(|r| r.split(',').nth(1).unwrap().parse().unwrap())
                    .collect();
                assert!(counts.iter().any(|&c| c > 1), "{query} {gap:?}");
                assert_eq!(counts.iter().sum::<u64>(), e.bids.len() as u64);
                let mut bidders: Vec<&str> =
                    want.iter().map(|r| r.split(',').next().unwrap()).collect();
                let sessions = bidders.len();
                bidders.sort();
                bidders.dedup();
                if gap.is_some() {
                    assert!(bidders.len() < sessions, "some bidder has 2+ sessions");
                }
            }
            "q18" if gap.is_none() => {
                // Deduplication removed bids: some (bidder, auction) bid
                // more than once.
                assert!(want.len() < e.bids.len() && want.len() > 100);
            }
            "q19" if gap.is_none() => {
                // Truncation happened: some auction has more than 10 bids.
                let mut per: BTreeMap<u64, usize> = BTreeMap::new();
                for b in &e.bids {
                    *per.entry(b.auction).or_default() += 1;
                }
                assert!(per.values().any(|&n| n > 10));
                assert!(want.iter().any(|r| r.ends_with(",10")));
                assert!(want.len() < e.bids.len());
            }
            _ => {}
        }
        // The generator itself gives what its export gives.
        assert_equal_everywhere(query, &file, &GEN_20S, &w, &want);
    }
}

fn bid(auction: u64, bidder: u64, price: u64, t: u64) -> String {
    json!({"type":"bid","auction":auction,"bidder":bidder,"price":price,
        "channel":"ch","url":"u","dateTime":t,"extra":""})
    .to_string()
}

#[test]
fn ties_and_session_edges_are_decided_as_documented() {
    let dir = common::tmpdir("nexmore", "ties");
    let file = dir.join("events.json");
    let mut lines = vec![
        // q11, gap 10: bidder 1 at 0, 9 (one session [0, 19)), then 19
        // (exactly the gap after 9: a new session), 28; bidder 2 alone.
        bid(100, 1, 5, 0),
        bid(100, 2, 5, 3),
        bid(101, 1, 5, 9),
        bid(100, 1, 5, 19),
        bid(101, 1, 5, 28),
        // q18: bidder 3 on auction 200: the latest time is 50, twice; the
        // dearer of the two wins. Bidder 4's older bid comes later in the
        // file and loses.
        bid(200, 3, 7, 40),
        bid(200, 3, 6, 50),
        bid(200, 3, 9, 50),
        bid(200, 4, 1, 60),
        bid(200, 4, 8, 55),
    ];
    // q19: auction 300 gets 12 bids; prices tie at 20: earlier first, then
    // the smaller bidder.
    for (bidder, price, t) in [
        (10, 20, 70),
        (11, 20, 65),
        (12, 20, 65),
        (13, 30, 80),
        (14, 1, 81),
        (15, 2, 82),
        (16, 3, 83),
        (17, 4, 84),
        (18, 5, 85),
        (19, 6, 86),
        (20, 7, 87),
        (21, 8, 88),
    ] {
        lines.push(bid(300, bidder, price, t));
    }
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let e = load(&file);

    // Out of order by up to 10 ms (bidder 4's 55 after 60). Rows by
    // session end: bidder 2's [3, 13) first.
    let q11 = reference(&e, "q11", 10);
    assert_eq!(
        q11[..3],
        ["2,1,3,13", "1,2,0,19", "1,2,19,38"],
        "bids exactly the gap apart are two sessions"
    );
    check_workers(
        "q11",
        &file,
        &["--window-ms", "10", "--max-delay-ms", "10"],
        &q11,
    );

    // q18 and q19 read in event time: the file is out of order by 10 ms.
    let q18 = reference(&e, "q18", 0);
    assert!(q18.contains(&"200,3,9,50".to_string()), "{q18:?}");
    assert!(q18.contains(&"200,4,1,60".to_string()), "{q18:?}");
    assert!(!q18.contains(&"200,3,7,40".to_string()), "{q18:?}");
    check_workers("q18", &file, &["--max-delay-ms", "10"], &q18);
    // A state TTL of 5 ms: bidder 3's bid at 40 expired before the ones at
    // 50 (a row of its own), bidder 4's bids 5 ms apart are two rows too.
    let q18 = reference_ttl(&e, "q18", 0, 5);
    for row in ["200,3,7,40", "200,3,9,50", "200,4,8,55", "200,4,1,60"] {
        assert!(q18.contains(&row.to_string()), "{row}: {q18:?}");
    }
    check_workers(
        "q18",
        &file,
        &["--max-delay-ms", "10", "--state-ttl-ms", "5"],
        &q18,
    );
    // Without the delay the 55 is late (dropped): no row of its own.
    let o = run(
        &[
            "run",
            "nexmark",
            "--query",
            "q18",
            "--input",
            file.to_str().unwrap(),
            "--workers",
            "1",
            "--no-pin",
            "--state-ttl-ms",
            "5",
        ],
        &dir.join("q18-late.csv"),
    );
    assert!(!o.contains(&"200,4,8,55".to_string()), "{o:?}");

    let q19 = reference(&e, "q19", 0);
    let top: Vec<&str> = q19
        .iter()
        .filter(|r| r.starts_with("300,"))
        .map(String::as_str)
        .collect();
    assert_eq!(
        top[..5],
        [
            "300,13,30,80,1",
            "300,11,20,65,2",
            "300,12,20,65,3",
            "300,10,20,70,4",
            "300,21,8,88,5"
        ]
    );
    assert_eq!(top.len(), 10, "the two cheapest bids are cut");
    assert_eq!(top[9], "300,16,3,83,10");
    check_workers("q19", &file, &["--max-delay-ms", "10"], &q19);
    // A 5 ms TTL splits auction 300's bids at 65 | 70 | 80..88.
    let q19 = reference_ttl(&e, "q19", 0, 5);
    let ranks: Vec<&str> = q19
        .iter()
        .filter(|r| r.starts_with("300,"))
        .map(|r| r.rsplit(',').next().unwrap())
        .collect();
    assert_eq!(ranks.iter().filter(|r| **r == "1").count(), 3, "{q19:?}");
    check_workers(
        "q19",
        &file,
        &["--max-delay-ms", "10", "--state-ttl-ms", "5"],
        &q19,
    );

    let q0 = reference(&e, "q0", 0);
    assert_eq!(q0.len(), lines.len());
    check_workers("q0", &file, &[], &q0);
}

#[test]
fn options_a_query_does_not_honour_are_refused() {
    for (query, opt, val) in [
        ("q0", "--window-ms", "1000"),
        ("q0", "--max-delay-ms", "5"),
        ("q11", "--slide-ms", "1000"),
        ("q18", "--window-ms", "1000"),
        ("q0", "--state-ttl-ms", "5"),
        ("q11", "--state-ttl-ms", "5"),
        ("q19", "--window-ms", "1000"),
        ("q19", "--slide-ms", "1000"),
    ] {
        let err = query_refused(query, &[opt, val]);
        assert!(err.contains(opt), "{query} {opt}: {err}");
    }
    // q11 honours its gap and the delay, and refuses a zero gap.
    assert_accepted(
        "q11",
        &[
            "--window-ms",
            "500",
            "--max-delay-ms",
            "5",
            "--workers",
            "1",
            "--no-pin",
        ],
    );
    assert_refused("q11", &[&["--window-ms", "0"]]);
}

/// q19 and q11 under `mpirun -np 2`, node tier and `--force-network`,
/// give the embedded rows.
#[cfg(feature = "mpi")]
#[test]
fn two_ranks_give_the_embedded_rows() {
    let dir = common::tmpdir("nexmore", "mpi");
    let (file, e) = generate(&dir, &GEN_20S);
    for query in ["q19", "q11"] {
        let want = reference(&e, query, 10_000);
        assert!(!want.is_empty());
        let input = file.to_str().unwrap();
        let args = ["run", "nexmark", "--query", query, "--input", input];
        let args = [&args[..], &["--workers", "2", "--no-pin"]].concat();
        common::nexmark::assert_two_ranks_give(&args, &dir, &want);
    }
}
