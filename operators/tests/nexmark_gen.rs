//! Tests of the NEXMark data layer: the generator (proportions, ids, skew,
//! event time, determinism, sharding), full events, JSON lines and the
//! range-splittable file reader.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use air_operators::sources::nexmark::*;
use air_runtime::ExchangeData;

fn cfg(events: u64) -> NexmarkConfig {
    NexmarkConfig {
        events: Some(events),
        ..NexmarkConfig::default()
    }
}

/// The whole stream of `cfg` from one shard.
fn stream(cfg: &NexmarkConfig) -> Vec<NexEvent> {
    let mut g = NexmarkGenerator::new(cfg, 0, 1);
    let mut out = vec![NexEvent::default(); cfg.events.unwrap() as usize];
    assert_eq!(g.fill(&mut out), out.len());
    assert_eq!(g.fill(&mut out), 0);
    out
}

// ------------------------------------------------------------ generator

#[test]
fn proportions_over_a_million_events() {
    let events = stream(&cfg(1_000_000));
    let mut counts = [0u64; 3];
    for e in &events {
        counts[e.kind() as usize] += 1;
    }
    let total = events.len() as f64;
    for (count, want) in counts.iter().zip([1.0 / 50.0, 3.0 / 50.0, 46.0 / 50.0]) {
        let share = *count as f64 / total;
        assert!(
            (share - want).abs() <= 0.01 * want,
            "{counts:?}: {share} vs {want}"
        );
    }
    // The kinds are exact: 20 000 persons, 60 000 auctions, 920 000 bids.
    assert_eq!(counts, [20_000, 60_000, 920_000]);
}

#[test]
fn same_seed_same_stream_other_seed_differs() {
    let a = stream(&cfg(20_000));
    let b = stream(&cfg(20_000));
    assert_eq!(a, b);
    let c = stream(&NexmarkConfig {
        seed: 1,
        ..cfg(20_000)
    });
    assert_ne!(a, c);
    // Same kinds and ids, other random fields.
    let differing = a.iter().zip(&c).filter(|(x, y)| x != y).count();
    assert!(differing > 19_000, "{differing}");
    for (x, y) in a.iter().zip(&c) {
        assert_eq!(x.kind(), y.kind());
        assert_eq!(x.date_time(), y.date_time());
    }
}

#[test]
fn shards_union_is_the_sequential_stream() {
    let cfg = cfg(100_003);
    let seq = stream(&cfg);
    for workers in 1..=4 {
        let mut merged = vec![None; seq.len()];
        for w in 0..workers {
            let mut g = NexmarkGenerator::new(&cfg, w, workers);
            let mut buf = vec![NexEvent::default(); 777];
            let mut n = w as u64;
            let mut last_time = 0;
            loop {
                let wm = g.watermark_ms();
                let k = g.fill(&mut buf);
                if k == 0 {
                    break;
                }
                assert!(buf[0].date_time() >= wm, "watermark bounds the shard");
                for e in &buf[..k] {
                    assert!(
                        e.date_time() >= last_time,
                        "shard {w}/{workers} out of order"
                    );
                    last_time = e.date_time();
                    assert!(merged[n as usize].replace(*e).is_none());
                    n += workers as u64;
                }
            }
            assert_eq!(g.watermark_ms(), u64::MAX);
            assert_eq!(g.remaining(), Some(0));
            assert_eq!(g.next_event_number(), None);
        }
        let merged: Vec<NexEvent> = merged.into_iter().map(Option::unwrap).collect();
        assert_eq!(merged, seq, "{workers} workers");
    }
    assert_eq!(seq[12_345], compact_event(&cfg, 12_345));
}

/// The last person and auction ids generated before each event, and the
/// bids with them.
fn walk(cfg: &NexmarkConfig, mut f: impl FnMut(&NexEvent, Option<u64>, Option<u64>)) {
    let (mut last_person, mut last_auction) = (None, None);
    for e in stream(cfg) {
        f(&e, last_person, last_auction);
        match e {
            NexEvent::Person(p) => last_person = Some(p.id),
            NexEvent::Auction(a) => last_auction = Some(a.id),
            NexEvent::Bid(_) => {}
        }
    }
}

#[test]
fn person_and_auction_ids_are_sequential() {
    let mut persons = Vec::new();
    let mut auctions = Vec::new();
    walk(&cfg(100_000), |e, _, _| match e {
        NexEvent::Person(p) => persons.push(p.id),
        NexEvent::Auction(a) => auctions.push(a.id),
        NexEvent::Bid(_) => {}
    });
    assert_eq!(persons.len(), 2000);
    assert_eq!(auctions.len(), 6000);
    assert!(persons.iter().copied().eq(1000..3000));
    assert!(auctions.iter().copied().eq(1000..7000));
}

#[test]
fn bid_and_auction_references_are_recent() {
    let cfg = cfg(200_000);
    let lead = cfg.auction_id_lead;
    let mut beyond_last = 0;
    let mut bids = 0;
    walk(&cfg, |e, last_person, last_auction| match e {
        NexEvent::Bid(b) => {
            bids += 1;
            let last_auction = last_auction.expect("an auction precedes every bid");
            assert!(b.auction >= FIRST_AUCTION_ID, "{b:?}");
            // Beam lets random auctions run `AUCTION_ID_LEAD` (10) ahead.
            assert!(
                b.auction <= last_auction + lead,
                "{b:?} after {last_auction}"
            );
            assert!(b.auction + cfg.num_in_flight_auctions >= last_auction || b.auction % 100 == 0);
            beyond_last += (b.auction > last_auction) as u32;
            let last_person = last_person.unwrap();
            assert!(b.bidder >= FIRST_PERSON_ID && b.bidder <= last_person + cfg.person_id_lead);
            assert!(b.price >= 100 && b.price <= 100_000_000);
        }
        NexEvent::Auction(a) => {
            assert!((FIRST_CATEGORY_ID..FIRST_CATEGORY_ID + NUM_CATEGORIES).contains(&a.category));
            assert!(a.reserve >= a.initial_bid);
            assert!(a.expires > a.date_time);
            assert!(a.seller >= FIRST_PERSON_ID);
            assert!(a.seller <= last_person.unwrap() + cfg.person_id_lead);
        }
        NexEvent::Person(_) => {}
    });
    // About 1/2 (not hot) × 10/111 (the lead) of bids name a future auction.
    let share = beyond_last as f64 / bids as f64;
    assert!((0.035..0.055).contains(&share), "{share}");

    // Without the lead, every bid names an auction generated before it.
    let no_lead = NexmarkConfig {
        auction_id_lead: 0,
        person_id_lead: 0,
        ..cfg
    };
    walk(&no_lead, |e, last_person, last_auction| {
        if let NexEvent::Bid(b) = e {
            assert!((FIRST_AUCTION_ID..=last_auction.unwrap()).contains(&b.auction));
            // The hot bidder is the second person of the current block of
            // 100 (Beam), which may be the next person to join.
            let last_person = last_person.unwrap();
            let hot = (last_person - FIRST_PERSON_ID) / HOT_BLOCK * HOT_BLOCK + FIRST_PERSON_ID + 1;
            assert!(
                (FIRST_PERSON_ID..=last_person).contains(&b.bidder) || b.bidder == hot,
                "{b:?} after person {last_person}"
            );
        }
    });
}

#[test]
fn hot_auctions_bidders_and_sellers_are_skewed() {
    let cfg = cfg(1_000_000);
    let (mut auctions, mut bidders, mut sellers) = (HashMap::new(), HashMap::new(), HashMap::new());
    let (mut bids, mut num_auctions) = (0u64, 0u64);
    for e in stream(&cfg) {
        match e {
            NexEvent::Bid(b) => {
                bids += 1;
                *auctions.entry(b.auction).or_insert(0u64) += 1;
                *bidders.entry(b.bidder).or_insert(0u64) += 1;
            }
            NexEvent::Auction(a) => {
                num_auctions += 1;
                *sellers.entry(a.seller).or_insert(0u64) += 1;
            }
            NexEvent::Person(_) => {}
        }
    }
    let average = bids / num_auctions; // about 15
    let (&hottest, &max) = auctions.iter().max_by_key(|(_, &c)| c).unwrap();
    // The hot auction of each block of 100 auctions gets half of the ~1533
    // bids of its block.
    assert!(max > 30 * average, "max {max}, average {average}");
    assert_eq!((hottest - FIRST_AUCTION_ID) % HOT_BLOCK, 0);
    // 3/4 of the bids come from the hot bidder of the block (person 1 of
    // each 100), 3/4 of the auctions from the hot seller (person 0).
    let hot_bids: u64 = bidders
        .iter()
        .filter(|(&p, _)| (p - FIRST_PERSON_ID) % HOT_BLOCK == 1)
        .map(|(_, &c)| c)
        .sum();
    let share = hot_bids as f64 / bids as f64;
    assert!((0.74..0.77).contains(&share), "{share}");
    let hot_sales: u64 = sellers
        .iter()
        .filter(|(&p, _)| (p - FIRST_PERSON_ID) % HOT_BLOCK == 0)
        .map(|(_, &c)| c)
        .sum();
    let share = hot_sales as f64 / num_auctions as f64;
    assert!((0.74..0.77).contains(&share), "{share}");
}

#[test]
fn event_time_is_fractional() {
    let fast = NexmarkConfig {
        events_per_s: 1e9,
        events: None,
        ..NexmarkConfig::default()
    };
    let t0 = compact_event(&fast, 0).date_time();
    assert_eq!(t0, DEFAULT_BASE_TIME_MS);
    assert_eq!(compact_event(&fast, 999_999).date_time(), t0);
    assert_eq!(compact_event(&fast, 1_000_000).date_time() - t0, 1);
    // The default 10 M events/s: 10 000 events per ms.
    let d = NexmarkConfig::default();
    assert_eq!(
        compact_event(&d, 10_000).date_time() - compact_event(&d, 0).date_time(),
        1
    );
    // A shard's watermark is its next event's time.
    let mut g = NexmarkGenerator::new(&fast, 1, 4);
    let mut buf = vec![NexEvent::default(); 250_000];
    assert_eq!(g.fill(&mut buf), buf.len());
    assert_eq!(g.next_event_number(), Some(1_000_001));
    assert_eq!(g.watermark_ms(), t0 + 1);
}

#[test]
fn auction_lengths_follow_the_in_flight_horizon() {
    // Beam's default rate, 10 000 events/s: 100 auctions take 1666 events,
    // 166 ms, so lengths are uniform in 1..=332 ms.
    let cfg = NexmarkConfig {
        events_per_s: 10_000.0,
        ..cfg(200_000)
    };
    let mut lengths = Vec::new();
    for e in stream(&cfg) {
        if let NexEvent::Auction(a) = e {
            lengths.push(a.expires - a.date_time);
        }
    }
    assert!(lengths.iter().all(|l| (1..=333).contains(l)));
    let mean = lengths.iter().sum::<u64>() as f64 / lengths.len() as f64;
    assert!((160.0..174.0).contains(&mean), "{mean}");
}

#[test]
fn compact_events_cross_an_exchange() {
    let events = stream(&cfg(1000));
    let bytes = <NexEvent as ExchangeData>::to_bytes(&events);
    let archived = <NexEvent as ExchangeData>::read_batch(&bytes).unwrap();
    assert_eq!(archived.len(), 1000);
    for (a, e) in archived.iter().zip(&events) {
        assert_eq!(a.to_native(), *e);
        assert_eq!(a.date_time(), e.date_time());
    }
    match (&archived[0], events[0]) {
        (ArchivedNexEvent::Person(a), NexEvent::Person(p)) => {
            assert_eq!(a.name.as_str(), p.name.as_str())
        }
        _ => panic!("event 0 is a person"),
    }
}

// ------------------------------------------------------------ full events

#[test]
fn full_events_have_the_spec_fields_and_sizes() {
    let cfg = cfg(50_000);
    // Beam's size estimate: 8 bytes per number, strings by length.
    let mut sizes = [(0usize, 0usize); 3];
    for n in 0..cfg.events.unwrap() {
        let e = full_event(&cfg, n);
        let (k, size) = match &e {
            FullEvent::Person(p) => {
                assert!(p.name.contains(' ') && p.name.len() <= NAME_CAP);
                let (user, domain) = p.email_address.split_once('@').unwrap();
                assert!(!user.is_empty() && domain.ends_with(".com"), "{p:?}");
                assert_eq!(p.credit_card.len(), 19);
                assert!(p
                    .credit_card
                    .split(' ')
                    .all(|g| g.len() == 4 && g.bytes().all(|c| c.is_ascii_digit())));
                assert_eq!(p.state.len(), 2);
                let s = 8
                    + p.name.len()
                    + p.email_address.len()
                    + p.credit_card.len()
                    + p.city.len()
                    + p.state.len()
                    + p.extra.len();
                (0, s)
            }
            FullEvent::Auction(a) => {
                assert!(a.item_name.len() < 20 && a.description.len() < 100);
                (
                    1,
                    8 + a.item_name.len() + a.description.len() + 40 + a.extra.len(),
                )
            }
            FullEvent::Bid(b) => {
                let (channel, url) = (b.channel.to_string(), b.url.to_string());
                assert!(
                    HOT_CHANNELS.contains(&channel.as_str())
                        || channel
                            .strip_prefix("channel-")
                            .is_some_and(|c| c.parse::<u64>().is_ok_and(|c| c < CHANNELS_NUMBER)),
                    "{b:?}"
                );
                assert!(url.starts_with("https://www.nexmark.com/"), "{b:?}");
                (2, 32 + b.extra.len())
            }
        };
        sizes[k].0 += size;
        sizes[k].1 += 1;
        assert_eq!(compact(&e), compact_event(&cfg, n));
        assert_eq!(e.date_time(), cfg.time_of(n));
    }
    for ((total, count), want) in sizes.into_iter().zip([200.0, 500.0, 100.0]) {
        let mean = total as f64 / count as f64;
        assert!((mean - want).abs() < want * 0.03, "mean {mean} vs {want}");
    }
}

// ------------------------------------------------------------ JSON lines

#[test]
fn json_round_trip_of_ten_thousand_events() {
    let cfg = cfg(10_000);
    let seq = stream(&cfg);
    let mut line = Vec::new();
    for (n, want) in seq.iter().enumerate() {
        let full = full_event(&cfg, n as u64);
        line.clear();
        write_json_line(&full, &mut line);
        assert_eq!(line.last(), Some(&b'\n'));
        assert_eq!(line.iter().filter(|&&c| c == b'\n').count(), 1);
        let parsed = parse_json_line(&line).unwrap();
        assert_eq!(parsed, compact(&full));
        assert_eq!(parsed, *want, "event {n}");
        // Every member, as serde sees it.
        let v: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(v["type"], full.kind().as_str());
        assert_eq!(v["dateTime"], want.date_time());
    }
}

#[test]
fn json_error_messages() {
    let err = |line: &str| parse_json_line(line.as_bytes()).unwrap_err();
    let e = err(
        r#"{"type":"auction","id":1,"seller":2,"category":10,"initialBid":5,"dateTime":1,"expires":2}"#,
    );
    assert_eq!(e.field, Some(Field::Reserve));
    assert_eq!(e.kind, FieldErrorKind::Missing);
    assert_eq!(e.to_string(), "field reserve (auction): missing");
    let e = err(r#"{"type":"bid","auction":1,"bidder":2,"price":"3","dateTime":4}"#);
    assert_eq!(
        e.to_string(),
        "field price (bid): expected an integer, found string"
    );
    let e = err(r#"{"type":"bid","auction":1,"bidder":2,"price":3,"dateTime":[4]}"#);
    assert_eq!(
        e.to_string(),
        "field dateTime (bid): expected an integer, found array"
    );
    let e = err(r#"{"type":"seller","id":1}"#);
    assert_eq!(e.field, Some(Field::Type));
    assert_eq!(
        e.to_string(),
        r#"field type: "seller" is not one of "person", "auction", "bid""#
    );
    let name = "Ω".repeat(40); // 80 bytes
    let e = err(&format!(
        r#"{{"type":"person","id":1000,"name":"{name}","dateTime":5}}"#
    ));
    assert_eq!(e.kind, FieldErrorKind::NameTooLong { len: 80 });
    assert_eq!(
        e.to_string(),
        "field name (person): 80 bytes, longer than the limit of 64"
    );
    // 64 bytes of name is fine.
    let name = "Ω".repeat(32);
    let ok = parse_json_line(
        format!(r#"{{"type":"person","id":1000,"name":"{name}","dateTime":5}}"#).as_bytes(),
    )
    .unwrap();
    assert!(matches!(ok, NexEvent::Person(p) if p.name.as_str() == name));
}

// ------------------------------------------------------------ files

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn read_range(path: &Path, range: std::ops::Range<u64>, opts: ReaderOptions) -> Vec<NexEvent> {
    let mut r = NexmarkFileReader::open(path, range, opts).unwrap();
    let mut out = Vec::new();
    let mut buf = vec![NexEvent::default(); 97];
    loop {
        let n = r.fill(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    assert_eq!(r.records(), out.len() as u64);
    assert_eq!(r.out_of_order(), 0);
    assert_eq!(r.watermark_ms(), u64::MAX);
    out
}

#[test]
fn gen_to_file_and_read_back_in_ranges() {
    let dir = tmp();
    let path = dir.path().join("nexmark.json");
    let cfg = cfg(20_000);
    assert_eq!(gen_to_file(&cfg, &path).unwrap(), 20_000);
    let seq = stream(&cfg);
    assert_eq!(
        NexmarkFileReader::read_all(&path, ReaderOptions::default()).unwrap(),
        seq
    );
    // The file is the full events' lines in order, whatever the threads.
    for events in [20_000, 100, 0] {
        let small = NexmarkConfig {
            events: Some(events),
            ..cfg
        };
        let p = dir.path().join(format!("{events}.json"));
        assert_eq!(gen_to_file(&small, &p).unwrap(), events);
        let mut want = Vec::new();
        for n in 0..events {
            write_json_line(&full_event(&small, n), &mut want);
        }
        assert!(fs::read(&p).unwrap() == want, "{events} events");
    }
    let again = dir.path().join("again.json");
    for parts in 1..=4 {
        for buffer_size in [100, 4096, 1 << 18] {
            let opts = ReaderOptions {
                buffer_size,
                ..ReaderOptions::default()
            };
            let mut all = Vec::new();
            for range in split_ranges(&path, parts).unwrap() {
                all.extend(read_range(&path, range, opts));
            }
            assert_eq!(all, seq, "{parts} parts, buffer {buffer_size}");
        }
    }
    let unbounded = NexmarkConfig {
        events: None,
        ..cfg
    };
    let e = gen_to_file(&unbounded, &again).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    let e = gen_to_file(&cfg, &dir.path().join("no/such/dir.json")).unwrap_err();
    assert!(e.to_string().contains("no/such/dir.json"), "{e}");
}

/// A file of `n` events with line `bad` (1-based) replaced by `text`.
fn file_with_bad_line(dir: &Path, n: u64, bad: usize, text: &str) -> (PathBuf, Vec<NexEvent>) {
    let cfg = cfg(n);
    let mut lines = Vec::new();
    let mut events = Vec::new();
    for i in 0..n {
        let mut line = Vec::new();
        let full = full_event(&cfg, i);
        write_json_line(&full, &mut line);
        if i as usize + 1 == bad {
            line = format!("{text}\r\n").into_bytes();
        } else {
            events.push(compact(&full));
        }
        lines.extend_from_slice(&line);
        if i == 10 {
            lines.extend_from_slice(b"\n   \n"); // blank lines are skipped
        }
    }
    let path = dir.join("bad.json");
    fs::write(&path, lines).unwrap();
    (path, events)
}

#[test]
fn a_bad_line_reports_its_file_line_in_every_range() {
    let dir = tmp();
    // Line 1001 of the file (blank lines 12 and 13 included) is event 998.
    let bad = r#"{"type":"bid","auction":1,"bidder":2,"dateTime":3}"#;
    let (path, good) = file_with_bad_line(dir.path(), 3000, 999, bad);
    let text = fs::read(&path).unwrap();
    let bad_offset = text
        .windows(bad.len())
        .position(|w| w == bad.as_bytes())
        .unwrap() as u64;
    for parts in 1..=4 {
        let mut seen_error = false;
        let mut all = Vec::new();
        for range in split_ranges(&path, parts).unwrap() {
            let holds_bad = range.contains(&bad_offset);
            let mut r = NexmarkFileReader::open(&path, range, ReaderOptions::default()).unwrap();
            let mut buf = vec![NexEvent::default(); 64];
            loop {
                match r.fill(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => all.extend_from_slice(&buf[..n]),
                    Err(e) => {
                        assert!(holds_bad);
                        seen_error = true;
                        assert_eq!(e.line, Some(1001));
                        assert_eq!(e.field(), Some(Field::Price));
                        assert_eq!(
                            e.to_string(),
                            format!(
                                "{}:1001: field price (bid): missing (byte offset {bad_offset})",
                                path.display()
                            )
                        );
                        assert_eq!(r.fill(&mut buf).unwrap(), 0, "finished after an error");
                        break;
                    }
                }
            }
        }
        assert!(seen_error, "{parts} parts");
        // Under Fail, the range stops at the bad line.
        assert!(all.len() < good.len());
        // Under Skip, every good event exactly once, the bad one counted.
        let opts = ReaderOptions {
            on_bad_record: OnBadRecord::Skip,
            ..ReaderOptions::default()
        };
        let mut all = Vec::new();
        let mut skipped = 0;
        for range in split_ranges(&path, parts).unwrap() {
            let mut r = NexmarkFileReader::open(&path, range, opts).unwrap();
            let mut buf = vec![NexEvent::default(); 64];
            loop {
                let n = r.fill(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                all.extend_from_slice(&buf[..n]);
            }
            skipped += r.skipped();
            if let Some(e) = r.first_skipped() {
                assert_eq!(e.line, Some(1001));
            }
        }
        assert_eq!(all, good, "{parts} parts");
        assert_eq!(skipped, 1);
    }
}

#[test]
fn reader_edge_cases() {
    let dir = tmp();
    let opts = ReaderOptions::default();
    // Missing file.
    let e = NexmarkFileReader::open(dir.path().join("none.json"), 0..u64::MAX, opts).unwrap_err();
    assert!(e.to_string().contains("cannot open event file"), "{e}");
    // Empty file, and a last line without `\n`.
    let empty = dir.path().join("empty.json");
    fs::write(&empty, b"").unwrap();
    assert_eq!(NexmarkFileReader::read_all(&empty, opts).unwrap(), vec![]);
    let mut line = Vec::new();
    write_json_line(&full_event(&cfg(1), 0), &mut line);
    line.pop();
    let one = dir.path().join("one.json");
    fs::write(&one, &line).unwrap();
    assert_eq!(
        NexmarkFileReader::read_all(&one, opts).unwrap(),
        vec![compact_event(&cfg(1), 0)]
    );
    // An over-long line is a bad record with its line number.
    let long = dir.path().join("long.json");
    let mut text = line.clone();
    text.push(b'\n');
    text.extend_from_slice(&vec![b'x'; line.len() + 50]);
    text.push(b'\n');
    text.extend_from_slice(&line);
    fs::write(&long, &text).unwrap();
    let max = line.len() + 10;
    let small = ReaderOptions {
        max_line_len: max,
        buffer_size: 64,
        on_bad_record: OnBadRecord::Skip,
    };
    let mut r = NexmarkFileReader::open(&long, 0..u64::MAX, small).unwrap();
    let mut buf = vec![NexEvent::default(); 8];
    assert_eq!(r.fill(&mut buf).unwrap(), 2);
    assert_eq!(r.fill(&mut buf).unwrap(), 0);
    assert_eq!(r.skipped(), 1);
    let e = r.first_skipped().unwrap();
    assert_eq!(e.line, Some(2));
    assert_eq!(
        e.to_string(),
        format!(
            "{}:2: line longer than the limit of {max} bytes (byte offset {})",
            long.display(),
            line.len() + 1
        )
    );
    assert_eq!(r.lines(), 3);
}

// ------------------------------------------------------------ speed

/// `cargo test --release -p air-operators --test nexmark_gen -- --ignored --nocapture`
///
/// Rounds of 10 M events (one shard, batches of 1024); prints the best and
/// the median round (the best is the machine's speed when nothing else
/// runs on the core).
#[test]
#[ignore = "a measurement: run in release mode"]
fn generator_speed() {
    let per_round = 10_000_000u64;
    let cfg = NexmarkConfig {
        events: None,
        ..NexmarkConfig::default()
    };
    let mut g = NexmarkGenerator::new(&cfg, 0, 1);
    let mut buf = vec![NexEvent::default(); 1024];
    let mut checksum = 0u64;
    let mut rates = Vec::new();
    for _ in 0..15 {
        let t = Instant::now();
        let mut done = 0;
        while done < per_round {
            let n = g.fill(&mut buf);
            checksum = checksum.wrapping_add(buf[n - 1].date_time());
            done += n as u64;
        }
        rates.push(done as f64 / t.elapsed().as_secs_f64() / 1e6);
    }
    rates.sort_by(f64::total_cmp);
    println!(
        "NexmarkGenerator::fill: best {:.1} M events/s, median {:.1} M events/s over {} rounds of {per_round} events (checksum {checksum})",
        rates[rates.len() - 1],
        rates[rates.len() / 2],
        rates.len()
    );
}

/// `cargo test --release -p air-operators --test nexmark_gen -- --ignored --nocapture`
#[test]
#[ignore = "a measurement: run in release mode"]
fn json_speed() {
    let cfg = NexmarkConfig::default();
    let full = 1_000_000u64;
    let t = Instant::now();
    let mut bytes = 0;
    let mut line = Vec::new();
    for n in 0..full {
        line.clear();
        write_json_line(&full_event(&cfg, n), &mut line);
        bytes += line.len();
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "full_event + write_json_line: {:.2} M events/s, {:.0} MB/s",
        full as f64 / secs / 1e6,
        bytes as f64 / secs / 1e6
    );
    let dir = tmp();
    let path = dir.path().join("speed.json");
    let t = Instant::now();
    gen_to_file(
        &NexmarkConfig {
            events: Some(full),
            ..cfg
        },
        &path,
    )
    .unwrap();
    let secs = t.elapsed().as_secs_f64();
    println!(
        "gen_to_file (all cores): {:.2} M events/s",
        full as f64 / secs / 1e6
    );
    let mut text = Vec::new();
    for n in 0..full {
        write_json_line(&full_event(&cfg, n), &mut text);
    }
    let t = Instant::now();
    let mut parsed = 0;
    for l in text.split(|&c| c == b'\n').filter(|l| !l.is_empty()) {
        parsed += parse_json_line(l).is_ok() as u64;
    }
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(parsed, full);
    println!(
        "parse_json_line: {:.2} M lines/s, {:.0} MB/s",
        full as f64 / secs / 1e6,
        text.len() as f64 / secs / 1e6
    );
}
