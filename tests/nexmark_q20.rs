//! `air run nexmark --query q20` (the Flink suite's "expand bid with
//! auction": bids joined with their auction of category 10) end to end:
//! the rows from 1, 2 and 4 workers over an exported file, and from the
//! generator on 3 workers, equal the plain unbounded join written here;
//! `--state-ttl-ms` frees an auction's state so a bid that comes a TTL
//! after it is not joined (on a hand-written file and on generated
//! events), while the default joins it; options q20 does not honour are
//! refused; and (feature `mpi`) two ranks give the rows of one process.

mod common;

use common::nexmark::{
    assert_accepted, assert_equal_everywhere, assert_file_on_1_2_4_workers, assert_refused, csv,
    generate, Events,
};
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap};
use std::path::Path;

/// Each auction's `extra` by id (the shared loader does not keep it).
fn auction_extras(file: &Path) -> HashMap<u64, String> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["type"] == "auction")
        .map(|v| {
            let extra = v["extra"].as_str().unwrap().to_string();
            (v["id"].as_u64().unwrap(), extra)
        })
        .collect()
}

/// q20 by the book: every bid joined with its auction (the first with its
/// id) if that auction's category is 10 and, with a `ttl`, if their times
/// are at most `ttl` ms apart (no `ttl`: Flink's unbounded join). Sorted
/// as `air` writes them: by the later of the two times, then bid time,
/// auction, bidder, price, channel, url, extra.
fn reference(e: &Events, extras: &HashMap<u64, String>, ttl: Option<u64>) -> Vec<String> {
    let mut auctions = HashMap::new();
    for a in &e.auctions {
        auctions.entry(a.id).or_insert(a);
    }
    let mut rows = Vec::new();
    for b in &e.bids {
        let Some(a) = auctions.get(&b.auction) else {
            continue;
        };
        if a.category != 10 || ttl.is_some_and(|t| a.date_time.abs_diff(b.date_time) > t) {
            continue;
        }
        let key = (
            a.date_time.max(b.date_time),
            b.date_time,
            b.auction,
            b.bidder,
            b.price,
            b.channel.clone(),
            b.url.clone(),
            b.extra.clone(),
        );
        let row = format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            b.auction,
            b.bidder,
            b.price,
            csv(&b.channel),
            csv(&b.url),
            b.date_time,
            csv(&b.extra),
            csv(&a.item_name),
            csv(&a.description),
            a.initial_bid,
            a.reserve,
            a.date_time,
            a.expires,
            a.seller,
            a.category,
            csv(&extras[&a.id]),
        );
        rows.push((key, row));
    }
    rows.sort();
    rows.into_iter().map(|(_, r)| r).collect()
}

/// 80 s of event time at 500 events/s: longer than the default TTL (a
/// minute), so its state is freed inside the stream.
const GEN: [&str; 6] = ["--events", "40000", "--events-per-s", "500", "--seed", "11"];

#[test]
fn q20_on_1_2_4_workers_and_the_generator_equals_the_unbounded_join() {
    let dir = common::tmpdir("nexq20", "eq");
    let (file, e) = generate(&dir, &GEN);
    let extras = auction_extras(&file);
    let want = reference(&e, &extras, None);
    // Not trivial: many rows, some bids made before their auction, many
    // auctions, and most bids dropped (other categories).
    assert!(
        want.len() > 2_000 && want.len() < e.bids.len() / 3,
        "{}",
        want.len()
    );
    let cols: Vec<Vec<&str>> = want.iter().map(|r| r.split(',').collect()).collect();
    let auctions: BTreeSet<&str> = cols.iter().map(|c| c[0]).collect();
    assert!(auctions.len() > 100, "{} auctions", auctions.len());
    let early = cols
        .iter()
        .filter(|c| c[5].parse::<u64>().unwrap() < c[11].parse::<u64>().unwrap())
        .count();
    assert!(early > 0, "bids before their auction");
    assert!(cols.iter().all(|c| c[14] == "10" && c.len() == 16));
    // The stream is longer than the default TTL, yet no pair is further
    // apart than it (the module doc's claim).
    let last = e.bids.last().unwrap().date_time - e.bids[0].date_time;
    assert!(last > 70_000, "{last} ms of event time");
    assert_eq!(reference(&e, &extras, Some(60_000)), want);
    assert_equal_everywhere("q20", &file, &GEN, &[], &want);
}

/// A TTL of a second on the same events: pairs more than a second apart
/// are not joined, whatever the workers.
#[test]
fn a_small_ttl_drops_the_pairs_further_apart_than_it() {
    let dir = common::tmpdir("nexq20", "ttl-gen");
    let (file, e) = generate(&dir, &GEN);
    let extras = auction_extras(&file);
    let unbounded = reference(&e, &extras, None);
    let want = reference(&e, &extras, Some(1_000));
    assert!(
        want.len() > unbounded.len() / 4 && want.len() < unbounded.len(),
        "{} of {}",
        want.len(),
        unbounded.len()
    );
    assert_file_on_1_2_4_workers("q20", &file, &["--state-ttl-ms", "1000"], &want);
}

#[test]
fn the_ttl_frees_an_auction_and_a_later_bid_is_not_joined() {
    let dir = common::tmpdir("nexq20", "ttl");
    let file = dir.join("events.json");
    let auction = |id: u64, t: u64, category: u64| {
        json!({"type":"auction","id":id,"itemName":format!("item {id}"),
            "description":"a, b","initialBid":5,"reserve":9,"dateTime":t,
            "expires":t + 10_000,"seller":1000,"category":category,"extra":"ae"})
        .to_string()
    };
    let bid = |id: u64, t: u64| {
        json!({"type":"bid","auction":id,"bidder":2000 + t,"price":100 + id,
            "channel":"Apple","url":"https://x/y","dateTime":t,"extra":"be"})
        .to_string()
    };
    let person = |t: u64| {
        json!({"type":"person","id":1000,"name":"Ann","emailAddress":"e","creditCard":"c",
            "city":"x","state":"y","dateTime":t,"extra":""})
        .to_string()
    };
    // In time order (nothing late). With a TTL of 100 ms: auction 7's
    // bids at 50 and 100 join, the one at 1000 comes long after its state
    // was freed; auction 8's bid waits for it (50 ms); auction 9's bid
    // waits 200 ms, more than the TTL, and is freed first; auction 11 is
    // of another category.
    let lines = [
        auction(7, 0, 10),
        bid(7, 50),
        bid(7, 100),
        person(500),
        bid(7, 1000),
        bid(8, 1100),
        auction(8, 1150, 10),
        bid(9, 1200),
        auction(9, 1400, 10),
        auction(11, 1500, 11),
        bid(11, 1510),
        person(3000),
    ];
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let e = common::nexmark::load(&file);
    let extras = auction_extras(&file);
    let short = reference(&e, &extras, Some(100));
    let joined = |rows: &[String]| -> Vec<(u64, u64)> {
        rows.iter()
            .map(|r| {
                let c: Vec<&str> = r.split(',').collect();
                (c[0].parse().unwrap(), c[5].parse().unwrap())
            })
            .collect()
    };
    assert_eq!(joined(&short), [(7, 50), (7, 100), (8, 1100)]);
    assert_file_on_1_2_4_workers("q20", &file, &["--state-ttl-ms", "100"], &short);
    // The default (a minute) joins them all, as the unbounded join does.
    let all = reference(&e, &extras, None);
    assert_eq!(
        joined(&all),
        [(7, 50), (7, 100), (7, 1000), (8, 1100), (9, 1200)]
    );
    assert_file_on_1_2_4_workers("q20", &file, &[], &all);
    // Every column, the auction's strings quoted where they hold a comma.
    assert_eq!(
        all[0],
        "7,2050,107,Apple,https://x/y,50,be,item 7,\"a, b\",5,9,0,10000,1000,10,ae"
    );
}

#[test]
fn options_q20_does_not_honour_are_refused() {
    assert_refused(
        "q20",
        &[
            &["--window-ms", "1000"],
            &["--slide-ms", "1000"],
            &["--state-ttl-ms", "0"],
            &["--side-input", "/nonexistent"],
        ],
    );
    assert_refused("q21", &[&["--state-ttl-ms", "1000"]]);
    assert_accepted("q20", &["--state-ttl-ms", "1000", "--max-delay-ms", "10"]);
}

/// q20 across two ranks (node tier, then `--force-network`) gives the rows
/// of one process.
#[cfg(feature = "mpi")]
#[test]
fn q20_runs_distributed() {
    let dir = common::tmpdir("nexq20", "mpi");
    let query = [
        "run",
        "nexmark",
        "--query",
        "q20",
        "--events",
        "40000",
        "--events-per-s",
        "500",
        "--state-ttl-ms",
        "2000",
    ];
    common::nexmark::assert_two_ranks_equal_one_process(&query, &dir, 1000);
}
