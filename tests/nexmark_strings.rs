//! `air run nexmark --query q14|q16|q21|q22`, the queries that read the
//! events' strings (full events: `Shard::read_full`), end to end: the rows
//! from 1, 2 and 4 workers over an exported file equal a plain sequential
//! computation in this test over the same events, and the generator on 3
//! workers gives the same rows; hand-made inputs put values on the
//! definitions' edges; a bad full record names its file, line and field;
//! paced runs work; options the queries do not honour are refused; and
//! (feature `mpi`) two ranks give the single-process rows.

mod common;

use common::nexmark::{
    air, assert_accepted, assert_equal_everywhere, assert_file_on_1_2_4_workers, assert_refused,
    csv, generate, rank, refused, run, Bid, Events, GEN_20S,
};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// q21's channel id: the hot channels' numbers, else the first url piece
/// between `&`s (or the url's start) that begins `channel_id=`.
fn channel_id(b: &Bid) -> Option<String> {
    let hot = ["apple", "google", "facebook", "baidu"];
    if let Some(i) = hot.iter().position(|h| b.channel.to_lowercase() == *h) {
        return Some(i.to_string());
    }
    b.url
        .split('&')
        .find_map(|piece| piece.strip_prefix("channel_id="))
        .map(str::to_string)
}

/// Sorts rows given as (sort key, text) and returns the texts.
fn sorted<K: Ord>(mut rows: Vec<(K, String)>) -> Vec<String> {
    rows.sort();
    rows.into_iter().map(|(_, r)| r).collect()
}

fn q21(e: &Events) -> Vec<String> {
    sorted(
        e.bids
            .iter()
            .filter_map(|b| {
                let id = channel_id(b)?;
                let key = (
                    b.date_time,
                    b.auction,
                    b.bidder,
                    b.price,
                    b.channel.clone(),
                    id.clone(),
                );
                let row = format!(
                    "{},{},{},{},{},{}",
                    b.auction,
                    b.bidder,
                    b.price,
                    csv(&b.channel),
                    csv(&id),
                    b.date_time
                );
                Some((key, row))
            })
            .collect(),
    )
}

fn q22(e: &Events) -> Vec<String> {
    sorted(
        e.bids
            .iter()
            .map(|b| {
                let pieces: Vec<&str> = b.url.split('/').collect();
                let dir = |i: usize| pieces.get(i).copied().unwrap_or("").to_string();
                let dirs = [dir(3), dir(4), dir(5)];
                let row = format!(
                    "{},{},{},{},{},{},{},{}",
                    b.auction,
                    b.bidder,
                    b.price,
                    csv(&b.channel),
                    csv(&dirs[0]),
                    csv(&dirs[1]),
                    csv(&dirs[2]),
                    b.date_time
                );
                let key = (
                    b.date_time,
                    b.auction,
                    b.bidder,
                    b.price,
                    b.channel.clone(),
                    dirs,
                );
                (key, row)
            })
            .collect(),
    )
}

fn q14(e: &Events) -> Vec<String> {
    sorted(
        e.bids
            .iter()
            .filter_map(|b| {
                // 0.908 × price, in thousandths.
                let t = b.price as u128 * 908;
                if !(t > 1_000_000_000 && t < 50_000_000_000) {
                    return None;
                }
                let hour = (b.date_time / 1000 / 3600) % 24;
                let kind = if (8..=18).contains(&hour) {
                    "dayTime"
                } else if hour <= 6 || hour >= 20 {
                    "nightTime"
                } else {
                    "otherTime"
                };
                let c = b.extra.chars().filter(|&c| c == 'c').count();
                let row = format!(
                    "{},{},{}.{:03},{kind},{},{c}",
                    b.auction,
                    b.bidder,
                    t / 1000,
                    t % 1000,
                    b.date_time
                );
                Some(((b.date_time, b.auction, b.bidder, t, c), row))
            })
            .collect(),
    )
}

fn q16(e: &Events, size: u64) -> Vec<String> {
    let mut groups: BTreeMap<(u64, &str), Vec<&Bid>> = BTreeMap::new();
    for b in &e.bids {
        groups
            .entry((b.date_time / size * size, b.channel.as_str()))
            .or_default()
            .push(b);
    }
    groups
        .into_iter()
        .map(|((start, channel), bids)| {
            let minute = bids
                .iter()
                .map(|b| {
                    let m = b.date_time / 60_000 % 1440;
                    format!("{:02}:{:02}", m / 60, m % 60)
                })
                .max()
                .unwrap();
            let mut n = [0u64; 4];
            let mut bidders: [BTreeSet<u64>; 4] = Default::default();
            let mut auctions: [BTreeSet<u64>; 4] = Default::default();
            for b in bids {
                for i in [0, 1 + rank(b.price)] {
                    n[i] += 1;
                    bidders[i].insert(b.bidder);
                    auctions[i].insert(b.auction);
                }
            }
            let mut v: Vec<u64> = n.to_vec();
            v.extend(bidders.iter().map(|s| s.len() as u64));
            v.extend(auctions.iter().map(|s| s.len() as u64));
            let v: Vec<String> = v.iter().map(u64::to_string).collect();
            format!(
                "{start},{},{},{minute},{}",
                start + size,
                csv(channel),
                v.join(",")
            )
        })
        .collect()
}

fn reference(e: &Events, query: &str, window: u64) -> Vec<String> {
    match query {
        "q14" => q14(e),
        "q16" => q16(e, window),
        "q21" => q21(e),
        "q22" => q22(e),
        q => panic!("{q}"),
    }
}

/// The file on 1, 2, 4 workers and the generator on 3 give the reference.
fn assert_query(file: &Path, e: &Events, gen: &[&str], query: &str, window: &[&str]) {
    let size = match window {
        [_, w] => w.parse().unwrap(),
        _ => 86_400_000,
    };
    let want = reference(e, query, size);
    assert_equal_everywhere(query, file, gen, window, &want);
    check_not_trivial(e, query, &want);
}

/// The rows are many and varied: not all bids, not none.
fn check_not_trivial(e: &Events, query: &str, rows: &[String]) {
    let cols: Vec<Vec<&str>> = rows.iter().map(|r| r.split(',').collect()).collect();
    let distinct = |i: usize| cols.iter().map(|c| c[i]).collect::<BTreeSet<_>>().len();
    match query {
        "q21" => {
            // Hot channels and url ids; some bids dropped.
            assert!(rows.len() > e.bids.len() / 2 && rows.len() < e.bids.len());
            assert!(cols.iter().any(|c| c[4] == "2") && distinct(4) > 100);
        }
        "q22" => {
            assert_eq!(rows.len(), e.bids.len());
            assert!(distinct(4) > 100 && distinct(5) > 100 && distinct(6) > 100);
        }
        "q14" => {
            assert!(rows.len() > e.bids.len() / 10 && rows.len() < e.bids.len() / 2);
            assert!(distinct(5) > 3, "c counts vary");
        }
        "q16" => {
            assert!(rows.len() > 100, "{} rows", rows.len());
            // The hot channels have repeated bidders and auctions.
            let google: Vec<u64> = cols
                .iter()
                .find(|c| c[2] == "Google")
                .unwrap()
                .iter()
                .skip(4)
                .map(|x| x.parse().unwrap())
                .collect();
            assert!(google[0] > 100 && google[4] < google[0] && google[8] < google[0]);
            assert!(google[1..4].iter().all(|&n| n > 0), "{google:?}");
        }
        _ => unreachable!(),
    }
}

#[test]
fn q21_q22_q14_q16_on_1_2_4_workers_equal_the_sequential_result() {
    let dir = common::tmpdir("nexstr", "eq");
    let (file, e) = generate(&dir, &GEN_20S);
    assert!(e.bids.len() > 30_000);
    for query in ["q21", "q22", "q14"] {
        assert_query(&file, &e, &GEN_20S, query, &[]);
    }
    // 20 s of event time: 5-s windows (several, the last one partial),
    // and the default day.
    assert_query(&file, &e, &GEN_20S, "q16", &["--window-ms", "5000"]);
    assert_query(&file, &e, &GEN_20S, "q16", &[]);
}

/// 11 hours of event time from 22:13 UTC: every kind of q14's hours, and
/// q16's days split at midnight.
#[test]
fn q14_and_q16_over_hours_and_days() {
    let dir = common::tmpdir("nexstr", "hours");
    let gen = ["--events", "20000", "--events-per-s", "0.5", "--seed", "3"];
    let (file, e) = generate(&dir, &gen);
    assert_query(&file, &e, &gen, "q14", &[]);
    let rows = q14(&e);
    for kind in ["dayTime", "nightTime", "otherTime"] {
        assert!(rows.iter().any(|r| r.contains(kind)), "{kind}");
    }
    let want = q16(&e, 86_400_000);
    assert_file_on_1_2_4_workers("q16", &file, &[], &want);
    let days: BTreeSet<&str> = want.iter().map(|r| r.split(',').next().unwrap()).collect();
    assert_eq!(days.len(), 2, "two UTC days");
    assert!(
        want.iter().any(|r| r.contains(",23:5")),
        "late minutes of day 1"
    );
}

#[test]
fn edges_of_the_definitions() {
    let dir = common::tmpdir("nexstr", "edges");
    let file = dir.join("events.json");
    let b = |price: u64, channel: &str, url: &str, t: u64, extra: &str| {
        json!({"type":"bid","auction":7,"bidder":1,"price":price,
            "channel":channel,"url":url,"dateTime":t,"extra":extra})
        .to_string()
    };
    let h = 3_600_000;
    let lines = [
        json!({"type":"person","id":1000,"name":"Ann","emailAddress":"e","creditCard":"c",
            "city":"x","state":"y","dateTime":0,"extra":""})
        .to_string(),
        // q21: hot channels in any case; ids only at the start or after &.
        // (In time order: q16 drops late bids.)
        b(1_101_321, "APPLE", "", 0, "c"),
        b(4_000_000, "GOOGLE", "//", 6 * h + 59 * 60_000, "c"),
        b(1_101_322, "Baidu", "https://a/b/c/d", 7 * h, "cc"),
        b(55_066_079, "x", "channel_id=5&channel_id=6", 8 * h, "ccc"),
        b(55_066_080, "x", "https://a?channel_id=9", 18 * h, ""),
        b(2_000_000, "y", "u?q=1&channel_id=&z", 19 * h, "abc"),
        b(
            3_000_000,
            "z, quoted",
            "u&channel_id=12345678901234567890123456789",
            20 * h,
            "",
        ),
    ];
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let e = common::nexmark::load(&file);
    let ids: Vec<Option<String>> = e.bids.iter().map(channel_id).collect();
    assert_eq!(
        ids,
        [
            Some("0".into()),
            Some("1".into()),
            Some("3".into()),
            Some("5".into()),
            None,
            Some("".into()),
            Some("12345678901234567890123456789".into()),
        ]
    );
    // The hand-made values: q14 keeps 1 101 322 … 55 066 079 cents.
    let r14 = q14(&e);
    assert_eq!(r14.len(), 5, "{r14:?}");
    assert!(r14[1].starts_with("7,1,1000000.376,otherTime,"), "{r14:?}");
    let kinds: Vec<&str> = r14.iter().map(|r| r.split(',').nth(3).unwrap()).collect();
    // Sorted by time: 6:59, 7:00, 8:00, 19:00, 20:00 (the 1 101 322 bid is
    // at 7:00; the one at 0:00 is out of range).
    assert_eq!(
        kinds,
        [
            "nightTime",
            "otherTime",
            "dayTime",
            "otherTime",
            "nightTime"
        ]
    );
    for query in ["q14", "q21", "q22"] {
        let want = reference(&e, query, 0);
        assert_file_on_1_2_4_workers(query, &file, &[], &want);
    }
    // The quoted channel is written as CSV quotes it.
    let got = run(
        &[
            "run",
            "nexmark",
            "--query",
            "q21",
            "--input",
            file.to_str().unwrap(),
        ],
        &dir.join("q.csv"),
    );
    assert!(got.iter().any(|r| r.contains("\"z, quoted\"")), "{got:?}");
    assert_eq!(q22(&e).len(), 7);
    let want = [
        "0,3600000,APPLE,00:00,1,0,0,1,1,0,0,1,1,0,0,1",
        "21600000,25200000,GOOGLE,06:59,1,0,0,1,1,0,0,1,1,0,0,1",
        "25200000,28800000,Baidu,07:00,1,0,0,1,1,0,0,1,1,0,0,1",
        "28800000,32400000,x,08:00,1,0,0,1,1,0,0,1,1,0,0,1",
        "64800000,68400000,x,18:00,1,0,0,1,1,0,0,1,1,0,0,1",
        "68400000,72000000,y,19:00,1,0,0,1,1,0,0,1,1,0,0,1",
        "72000000,75600000,\"z, quoted\",20:00,1,0,0,1,1,0,0,1,1,0,0,1",
    ];
    let got = run(
        &[
            "run",
            "nexmark",
            "--query",
            "q16",
            "--input",
            file.to_str().unwrap(),
            "--window-ms",
            "3600000",
        ],
        &dir.join("q16.csv"),
    );
    assert_eq!(got, want);
    // One window of two channels and one bidder in two ranks.
    let two = [
        b(6, "b", "", 0, ""),
        b(5, "a", "", 60_000, ""),
        b(50_000, "a", "", 120_000, ""),
    ];
    std::fs::write(&file, two.join("\n") + "\n").unwrap();
    let e = common::nexmark::load(&file);
    let want = q16(&e, 1000 * h);
    assert_eq!(
        want,
        [
            "0,3600000000,a,00:02,2,1,1,0,1,1,1,0,1,1,1,0",
            "0,3600000000,b,00:00,1,1,0,0,1,1,0,0,1,1,0,0",
        ]
    );
    assert_file_on_1_2_4_workers("q16", &file, &["--window-ms", "3600000000"], &want);
}

/// q16 keys a channel by a code: the generator's names exact, any other
/// name hashed. Names next to the generator's (a leading zero, out of
/// range, other case, empty) stay apart from them, in one window and
/// across windows.
#[test]
fn q16_tells_channels_near_the_generators_apart() {
    let dir = common::tmpdir("nexstr", "codes");
    let file = dir.join("events.json");
    let names = [
        "channel-7",
        "channel-07",
        "channel-9999",
        "channel-10000",
        "Google",
        "google",
        "",
        "Apple",
    ];
    let lines: Vec<String> = (0..400u64)
        .map(|i| {
            let price = [50, 50_000, 5_000_000][(i % 3) as usize];
            json!({"type":"bid","auction":1000 + i % 13,"bidder":2000 + i % 7,"price":price,
                "channel":names[(i * 5 % 8) as usize],"url":"u","dateTime":i * 25,"extra":""})
            .to_string()
        })
        .collect();
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let e = common::nexmark::load(&file);
    for size in [10_000, 3_000] {
        let want = q16(&e, size);
        // Every name in every window of 10 s.
        assert!(want.len() >= names.len(), "{want:?}");
        let extra = ["--window-ms".to_string(), size.to_string()];
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        assert_file_on_1_2_4_workers("q16", &file, &extra, &want);
    }
}

#[test]
fn a_bad_full_record_names_its_file_line_and_field() {
    let dir = common::tmpdir("nexstr", "bad");
    let file = dir.join("events.json");
    let good = json!({"type":"bid","auction":1,"bidder":2,"price":3,"channel":"Apple",
        "url":"u","dateTime":4,"extra":""})
    .to_string();
    let no_url = json!({"type":"bid","auction":1,"bidder":2,"price":3,"channel":"Apple",
        "dateTime":5,"extra":""})
    .to_string();
    std::fs::write(&file, [good.clone(), no_url, good].join("\n") + "\n").unwrap();
    let f = file.to_str().unwrap();
    for query in ["q21", "q16"] {
        let err = refused(&["run", "nexmark", "--query", query, "--input", f]);
        assert!(
            err.contains("events.json:2: field url (bid): missing"),
            "{err}"
        );
    }
    // The compact queries need no url.
    let o = air(&["run", "nexmark", "--query", "q0", "--input", f]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Skipped and counted.
    let got = run(
        &[
            "run",
            "nexmark",
            "--query",
            "q21",
            "--input",
            f,
            "--on-bad-record",
            "skip",
        ],
        &dir.join("out.csv"),
    );
    assert_eq!(got, ["1,2,3,Apple,0,4", "1,2,3,Apple,0,4"]);
}

#[test]
fn paced_runs_read_full_events() {
    let dir = common::tmpdir("nexstr", "paced");
    for query in ["q21", "q16"] {
        let rep = dir.join("rep.json");
        let rows = run(
            &[
                "run",
                "nexmark",
                "--query",
                query,
                "--rate",
                "20000",
                "--duration",
                "1",
                "--workers",
                "2",
                "--report",
                rep.to_str().unwrap(),
            ],
            &dir.join("out.csv"),
        );
        assert!(!rows.is_empty(), "{query}");
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&rep).unwrap()).unwrap();
        let text = report.to_string();
        assert!(text.contains("20000"), "{query}: {text}");
    }
}

#[test]
fn options_the_queries_do_not_honour_are_refused() {
    for query in ["q14", "q21", "q22"] {
        assert_refused(
            query,
            &[
                &["--window-ms", "1000"],
                &["--slide-ms", "1000"],
                &["--max-delay-ms", "10"],
            ],
        );
    }
    assert_refused("q16", &[&["--slide-ms", "1000"], &["--window-ms", "0"]]);
    assert_accepted("q16", &["--window-ms", "1000", "--max-delay-ms", "10"]);
}

/// q16 across two ranks (node tier, then `--force-network`) gives the
/// rows of one process.
#[cfg(feature = "mpi")]
#[test]
fn q16_runs_distributed() {
    let dir = common::tmpdir("nexstr", "mpi");
    let query = [
        "run",
        "nexmark",
        "--query",
        "q16",
        "--events",
        "100000",
        "--events-per-s",
        "5000",
        "--window-ms",
        "2000",
    ];
    common::nexmark::assert_two_ranks_equal_one_process(&query, &dir, 100);
}
