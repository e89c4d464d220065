//! `air run nexmark --input` on Apache Beam NEXMark's nested JSON form of
//! events (`air gen nexmark --format beam`): the same events give the same
//! rows as in our form, for a compact query (q8) and full-event ones (q14,
//! q21), at 1 and 2 workers; bad Beam lines are refused naming the file,
//! line and field (or skipped and counted); a hand-written line with every
//! field reads as written.

mod common;

use air_operators::sources::nexmark::{
    parse_full_json_line, parse_json_line, FullAuction, FullBid, FullEvent, FullPerson, Name,
    NexEvent, Person,
};
use common::nexmark::{assert_file_on_workers, csv_body, export, refused, run};
use serde_json::Value;
use std::path::{Path, PathBuf};

const GEN: [&str; 6] = [
    "--events",
    "20000",
    "--events-per-s",
    "2000",
    "--seed",
    "11",
];

/// `air gen nexmark GEN [--format beam] --out DIR/NAME`.
fn gen(dir: &Path, name: &str, beam: bool) -> PathBuf {
    let file = dir.join(name);
    let format: &[&str] = if beam { &["--format", "beam"] } else { &[] };
    export(&file, &[&GEN[..], format].concat());
    file
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The wrapper of a Beam line's one event, checking the shape Jackson
/// writes for Beam's `Event`: the three wrappers, two of them null, no
/// `type`.
fn beam_event(v: &Value) -> &'static str {
    assert!(v.get("type").is_none(), "{v}");
    let set: Vec<&str> = ["newPerson", "newAuction", "bid"]
        .into_iter()
        .filter(|w| {
            assert!(v.get(*w).is_some(), "{w} in {v}");
            !v[*w].is_null()
        })
        .collect();
    assert_eq!(set.len(), 1, "{v}");
    set[0]
}

#[test]
fn both_forms_give_the_same_rows() {
    let dir = common::tmpdir("nexbeam", "same");
    let ours = gen(&dir, "ours.json", false);
    let beam = gen(&dir, "beam.json", true);
    let (ours_lines, beam_lines) = (lines(&ours), lines(&beam));
    assert_eq!(ours_lines.len(), 20_000);
    assert_eq!(beam_lines.len(), 20_000);

    // The Beam file is Beam's shape with ISO times; the same events as
    // ours. Derive two more files from it: Jackson's default (times in
    // integer ms) without the bids' channel and url (Beam's own `Bid`),
    // and a file mixing both forms line by line.
    let mut beam_ms = String::new();
    let mut mixed = String::new();
    for (i, (o, b)) in ours_lines.iter().zip(&beam_lines).enumerate() {
        let ov: Value = serde_json::from_str(o).unwrap();
        let mut bv: Value = serde_json::from_str(b).unwrap();
        let w = beam_event(&bv);
        let kind = ov["type"].as_str().unwrap();
        assert_eq!(
            w,
            match kind {
                "person" => "newPerson",
                "auction" => "newAuction",
                _ => "bid",
            }
        );
        let inner = bv[w].as_object_mut().unwrap();
        for (k, val) in ov.as_object().unwrap() {
            if k == "dateTime" || k == "expires" {
                let iso = inner[k].as_str().unwrap();
                assert!(
                    iso.len() == 24 && iso.ends_with('Z') && iso.as_bytes()[10] == b'T',
                    "{iso}"
                );
                inner[k] = val.clone();
            } else if k != "type" {
                assert_eq!(&inner[k], val, "line {}: {k}", i + 1);
            }
        }
        assert_eq!(inner.len() + 1, ov.as_object().unwrap().len());
        inner.remove("channel");
        inner.remove("url");
        beam_ms += &bv.to_string();
        beam_ms.push('\n');
        mixed += if i % 3 == 0 { b } else { o };
        mixed.push('\n');
    }
    let beam_ms_file = dir.join("beam_ms.json");
    std::fs::write(&beam_ms_file, beam_ms).unwrap();
    let mixed_file = dir.join("mixed.json");
    std::fs::write(&mixed_file, mixed).unwrap();

    // q8 (compact events: persons and auctions), q14 (full: a bid's
    // extra), q21 (full: channel and url, which only our generator's Beam
    // file carries).
    for (query, extra, files) in [
        (
            "q8",
            &["--window-ms", "2000"][..],
            vec![&beam, &beam_ms_file, &mixed_file],
        ),
        ("q14", &[][..], vec![&beam, &beam_ms_file, &mixed_file]),
        ("q21", &[][..], vec![&beam, &mixed_file]),
    ] {
        let input = ours.to_str().unwrap();
        let mut a = vec!["run", "nexmark", "--query", query, "--input", input];
        a.extend_from_slice(&["--workers", "1"]);
        a.extend_from_slice(extra);
        let want = run(&a, &dir.join("out.csv"));
        assert!(want.len() >= 20, "{query}: {} rows", want.len());
        for f in [&ours].into_iter().chain(files) {
            assert_file_on_workers(query, f, &["1", "2"], extra, &want);
        }
    }
}

/// A Beam bid line at `ms` for auction `auction`.
fn bid_line(auction: u64, ms: u64) -> String {
    format!(
        r#"{{"newPerson":null,"newAuction":null,"bid":{{"auction":{auction},"bidder":2,"price":3,"channel":"Apple","url":"https://a/b","dateTime":{ms},"extra":"c"}}}}"#
    )
}

#[test]
fn bad_beam_lines_name_file_line_and_field() {
    let dir = common::tmpdir("nexbeam", "bad");
    let good = format!("{}\n{}\n", bid_line(1, 4), bid_line(5, 6));
    let bad_date = bid_line(7, 8).replace(
        r#""dateTime":8"#,
        r#""dateTime":"2015-07-15T25:00:00.000Z""#,
    );
    let missing = bid_line(7, 8).replace(r#""price":3,"#, "");
    let two = bid_line(7, 8).replace(
        r#""newPerson":null"#,
        r#""newPerson":{"id":1,"name":"n","emailAddress":"","creditCard":"","city":"","state":"","dateTime":1,"extra":""}"#,
    );
    let wrong = bid_line(7, 8).replace(r#""bidder":2"#, r#""bidder":"2""#);
    for (bad, field) in [
        (
            &bad_date,
            "field dateTime (bid): \"2015-07-15T25:00:00.000Z\" is not an ISO-8601 instant",
        ),
        (&missing, "field price (bid): missing"),
        (
            &two,
            "field bid: a second event in one line (newPerson is not null too",
        ),
        (
            &wrong,
            "field bidder (bid): expected an integer, found string",
        ),
    ] {
        let file = dir.join("bad.json");
        std::fs::write(&file, format!("{good}{bad}\n{}\n", bid_line(9, 10))).unwrap();
        let f = file.to_str().unwrap();
        // q0 reads compact events, q14 full ones.
        for query in ["q0", "q14"] {
            let err = refused(&["run", "nexmark", "--query", query, "--input", f]);
            assert!(
                err.contains(&format!("bad.json:3: {field}")),
                "{query}: {err}"
            );
            // Skipped and counted: the lines around it are all read.
            let rep = dir.join("rep.json");
            let rows = run(
                &[
                    "run",
                    "nexmark",
                    "--query",
                    query,
                    "--input",
                    f,
                    "--on-bad-record",
                    "skip",
                    "--report",
                    rep.to_str().unwrap(),
                ],
                &dir.join("out.csv"),
            );
            if query == "q0" {
                assert_eq!(rows, ["1,2,3,4", "5,2,3,6", "9,2,3,10"]);
            } else {
                assert!(rows.is_empty(), "q14 keeps no bid this cheap: {rows:?}");
            }
            let report = std::fs::read_to_string(&rep).unwrap();
            let r: Value = serde_json::from_str(&report).unwrap();
            assert_eq!(r["events"], 3, "{query}: {report}");
            assert!(report.contains("skipped"), "{query}: {report}");
        }
    }
}

#[test]
fn a_bad_line_loses_nothing_read_before_it() {
    // Under --on-bad-record fail, the events before the bad line are
    // processed: q0's rows (written at the end, sorted) hold them.
    let dir = common::tmpdir("nexbeam", "fail");
    let file = dir.join("f.json");
    let mut text = String::new();
    for i in 0..50 {
        text += &bid_line(1000 + i, 10 + i);
        text.push('\n');
    }
    text += &bid_line(1, 1).replace(r#""auction":1,"#, "");
    text.push('\n');
    std::fs::write(&file, text).unwrap();
    let out = dir.join("out.csv");
    let err = refused(&[
        "run",
        "nexmark",
        "--query",
        "q0",
        "--input",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        err.contains("f.json:51: field auction (bid): missing"),
        "{err}"
    );
    let rows = csv_body(&out);
    let want: Vec<String> = (0..50)
        .map(|i| format!("{},2,3,{}", 1000 + i, 10 + i))
        .collect();
    assert_eq!(rows, want);
}

#[test]
fn a_hand_written_beam_line_reads_every_field() {
    let person = r#"{"newPerson":{"id":1001,"name":"Peter Shultz","emailAddress":"ps@x.com","creditCard":"1234 5678 9012 3456","city":"Boise","state":"ID","dateTime":"2015-07-15T00:00:01.234Z","extra":"e\"1"},"newAuction":null,"bid":null}"#;
    let auction = r#"{"newAuction":{"id":1002,"itemName":"lamp","description":"a red lamp","initialBid":150,"reserve":300,"dateTime":1436918400000,"expires":"2015-07-15T01:00:00+01:00","seller":1001,"category":12,"extra":""}}"#;
    let bid = r#" { "bid" : { "auction" : 1002, "bidder" : 1001, "price" : 160, "channel" : "Google", "url" : "https://www.nexmark.com/a/b/c/item.htm?query=1", "dateTime" : "2015-07-15T00:00:02Z", "extra" : "xy" }, "newPerson" : null } "#;
    let t0 = 1_436_918_400_000;
    assert_eq!(
        parse_full_json_line(person.as_bytes()),
        Ok(FullEvent::Person(FullPerson {
            id: 1001,
            name: "Peter Shultz".into(),
            email_address: "ps@x.com".into(),
            credit_card: "1234 5678 9012 3456".into(),
            city: "Boise".into(),
            state: "ID".into(),
            date_time: t0 + 1234,
            extra: "e\"1".into(),
        }))
    );
    assert_eq!(
        parse_json_line(person.as_bytes()),
        Ok(NexEvent::Person(Person {
            id: 1001,
            name: Name::new("Peter Shultz").unwrap(),
            date_time: t0 + 1234,
        }))
    );
    assert_eq!(
        parse_full_json_line(auction.as_bytes()),
        Ok(FullEvent::Auction(FullAuction {
            id: 1002,
            item_name: "lamp".into(),
            description: "a red lamp".into(),
            initial_bid: 150,
            reserve: 300,
            date_time: t0,
            expires: t0,
            seller: 1001,
            category: 12,
            extra: String::new(),
        }))
    );
    assert_eq!(
        parse_full_json_line(bid.as_bytes()),
        Ok(FullEvent::Bid(FullBid {
            auction: 1002,
            bidder: 1001,
            price: 160,
            channel: "Google".into(),
            url: "https://www.nexmark.com/a/b/c/item.htm?query=1".into(),
            date_time: t0 + 2000,
            extra: "xy".into(),
        }))
    );
    // The same three lines through a query: q0 (compact bids) and q21
    // (full: the channel).
    let dir = common::tmpdir("nexbeam", "hand");
    let file = dir.join("hand.json");
    std::fs::write(&file, format!("{person}\n{auction}\n{bid}\n")).unwrap();
    let f = file.to_str().unwrap();
    let out = dir.join("out.csv");
    let q0 = run(&["run", "nexmark", "--query", "q0", "--input", f], &out);
    assert_eq!(q0, [format!("1002,1001,160,{}", t0 + 2000)]);
    let q21 = run(&["run", "nexmark", "--query", "q21", "--input", f], &out);
    assert_eq!(q21.len(), 1, "{q21:?}");
    assert!(q21[0].starts_with("1002,1001,160,Google,"), "{q21:?}");
}
