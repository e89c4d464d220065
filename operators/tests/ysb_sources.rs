//! Tests of the YSB data layer: UUIDs, JSON lines, the file reader and its
//! ranges, campaign files, the generator and the pacer.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use air_operators::sources::ysb::*;

fn campaigns() -> Campaigns {
    Campaigns::generate(100, 10, 42)
}

/// `n` events of one deterministic stream.
fn events(n: usize, seed: u64) -> Vec<YsbEvent> {
    let cfg = YsbGenConfig::new(seed, &campaigns())
        .with_events(Some(n as u64))
        .with_event_time(EventTimeMode::Deterministic {
            start_ms: 1_461_024_576_817,
            events_per_s: 1000,
        });
    let mut g = YsbGenerator::new(&cfg, 0, 1);
    let mut out = vec![YsbEvent::default(); n];
    assert_eq!(g.fill(&mut out), n);
    out
}

fn json_lines(events: &[YsbEvent]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in events {
        write_json_line(e, &mut out);
    }
    out
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    fs::write(&p, bytes).unwrap();
    p
}

fn read_all(path: &Path) -> Result<Vec<YsbEvent>, SourceError> {
    YsbFileReader::read_all(path, ReaderOptions::default())
}

fn read_range(path: &Path, range: std::ops::Range<u64>, opts: ReaderOptions) -> Vec<YsbEvent> {
    let mut r = YsbFileReader::open_range(path, range, opts).unwrap();
    let mut out = Vec::new();
    while r.fill(&mut out, 97).unwrap() > 0 {}
    out
}

const GOOD: &str = r#"{"user_id":"3f0b3a4c-1d2e-4f5a-8b6c-7d8e9f0a1b2c","page_id":"00000000-0000-4000-8000-000000000001","ad_id":"ffffffff-ffff-4fff-bfff-ffffffffffff","ad_type":"banner","event_type":"view","event_time":"1461024576817","ip_address":"1.2.3.4"}"#;

// ---------------------------------------------------------------- UUIDs

#[test]
fn uuid_round_trip() {
    let mut seen = HashSet::new();
    for e in events(10_000, 1) {
        for id in [e.user_id, e.page_id, e.ad_id] {
            let s = uuid_to_string(id);
            assert_eq!(s.len(), 36);
            assert_eq!(s.as_bytes()[14], b'4', "version-4 UUID: {s}");
            assert!(s
                .bytes()
                .all(|c| c == b'-' || c.is_ascii_digit() || (b'a'..=b'f').contains(&c)));
            assert_eq!(parse_uuid(s.as_bytes()), Some(id));
            assert_eq!(parse_uuid(s.to_uppercase().as_bytes()), Some(id));
        }
        seen.insert(e.user_id);
    }
    assert_eq!(seen.len(), 10_000, "user ids are random per event");
    for id in [
        0u128,
        1,
        u128::MAX,
        0x0123_4567_89ab_cdef_0123_4567_89ab_cdef,
    ] {
        assert_eq!(parse_uuid(uuid_to_string(id).as_bytes()), Some(id));
    }
}

// ---------------------------------------------------------------- JSON

#[test]
fn json_round_trip_random_events() {
    let evs = events(20_000, 2);
    let mut line = Vec::new();
    for e in &evs {
        line.clear();
        write_json_line(e, &mut line);
        assert_eq!(line.last(), Some(&b'\n'));
        assert!(line.len() <= MAX_JSON_LINE_LEN);
        assert_eq!(parse_json_line(&line), Ok(*e));
        let q = parse_json_line_with(&line, ParseMode::QueryFields).unwrap();
        assert_eq!(
            q,
            YsbEvent {
                ad_id: e.ad_id,
                event_type: e.event_type,
                event_time_ms: e.event_time_ms,
                ..YsbEvent::default()
            }
        );
    }
}

#[test]
fn json_writer_uses_the_ysb_schema() {
    let e = YsbEvent {
        user_id: 0x3f0b3a4c_1d2e_4f5a_8b6c_7d8e9f0a1b2c,
        page_id: 1,
        ad_id: u128::MAX,
        event_time_ms: 1_461_024_576_817,
        ip: 0x0102_0304,
        ad_type: AdType::SponsoredSearch,
        event_type: EventType::Purchase,
    };
    let mut out = Vec::new();
    write_json_line(&e, &mut out);
    assert_eq!(
        std::str::from_utf8(&out).unwrap(),
        "{\"user_id\":\"3f0b3a4c-1d2e-4f5a-8b6c-7d8e9f0a1b2c\",\
         \"page_id\":\"00000000-0000-0000-0000-000000000001\",\
         \"ad_id\":\"ffffffff-ffff-ffff-ffff-ffffffffffff\",\
         \"ad_type\":\"sponsored-search\",\"event_type\":\"purchase\",\
         \"event_time\":\"1461024576817\",\"ip_address\":\"1.2.3.4\"}\n"
    );
    // serde_json agrees that it is JSON with these members.
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["event_time"], "1461024576817");
    assert_eq!(v["ad_type"], "sponsored-search");
}

/// Every way a line can be wrong, with the exact message.
#[test]
fn json_field_errors() {
    let cases: Vec<(String, &str)> = vec![
        (
            GOOD.replace(r#""ad_id":"ffffffff-ffff-4fff-bfff-ffffffffffff","#, ""),
            "field ad_id: missing",
        ),
        (
            GOOD.replace("\"1461024576817\"", "\"abc\""),
            r#"field event_time: "abc" is not a millisecond integer"#,
        ),
        (
            GOOD.replace("\"1461024576817\"", "\"-5\""),
            r#"field event_time: "-5" is not a millisecond integer"#,
        ),
        (
            GOOD.replace("\"1461024576817\"", "\"99999999999999999999\""),
            r#"field event_time: "99999999999999999999" is not a millisecond integer"#,
        ),
        (
            GOOD.replace("\"1461024576817\"", "1461024576817"),
            "field event_time: expected a string, found number",
        ),
        (
            GOOD.replace("\"view\"", "\"hover\""),
            r#"field event_type: "hover" is not one of "view", "click", "purchase""#,
        ),
        (
            GOOD.replace("\"banner\"", "\"popup\""),
            r#"field ad_type: "popup" is not one of "banner", "modal", "sponsored-search", "mail", "mobile""#,
        ),
        (
            GOOD.replace("\"ffffffff-ffff-4fff-bfff-ffffffffffff\"", "\"xyz\""),
            r#"field ad_id: "xyz" is not a UUID"#,
        ),
        (
            GOOD.replace("\"ffffffff-ffff-4fff-bfff-ffffffffffff\"", "null"),
            "field ad_id: expected a string, found null",
        ),
        (
            GOOD.replace("\"00000000-0000-4000-8000-000000000001\"", "[1]"),
            "field page_id: expected a string, found array",
        ),
        (
            GOOD.replace("\"1.2.3.4\"", "\"1.2.3\""),
            r#"field ip_address: "1.2.3" is not an IPv4 address"#,
        ),
        (
            GOOD.replace("\"1.2.3.4\"", "\"1.2.3.256\""),
            r#"field ip_address: "1.2.3.256" is not an IPv4 address"#,
        ),
        (
            GOOD.replacen('{', r#"{"event_type":"view","#, 1),
            "field event_type: appears more than once",
        ),
        (
            GOOD.replace("\"view\",", "\"view\""),
            "malformed JSON at column 185 of the line: expected `,` or `}`",
        ),
        (
            GOOD[..100].to_string(),
            "malformed JSON at column 100 of the line: EOF while parsing a string",
        ),
        (
            format!("{GOOD}x"),
            "malformed JSON at column 238 of the line: trailing characters",
        ),
        ("[1,2]".to_string(), "not a JSON object"),
        ("\"x\"".to_string(), "not a JSON object"),
        ("{}".to_string(), "field user_id: missing"),
    ];
    for (line, want) in cases {
        let err = parse_json_line(line.as_bytes()).unwrap_err();
        assert_eq!(err.to_string(), want, "line: {line}");
    }
    // Fields outside the query are not checked in QueryFields mode.
    let bad_ip = GOOD.replace("\"1.2.3.4\"", "\"nope\"");
    assert!(parse_json_line_with(bad_ip.as_bytes(), ParseMode::QueryFields).is_ok());
    let no_ad = GOOD.replace(r#""ad_id":"ffffffff-ffff-4fff-bfff-ffffffffffff","#, "");
    assert_eq!(
        parse_json_line_with(no_ad.as_bytes(), ParseMode::QueryFields)
            .unwrap_err()
            .field,
        Some(Field::AdId)
    );
    // Invalid UTF-8 names the byte.
    let mut bytes = GOOD.as_bytes().to_vec();
    bytes[150] = 0xFF;
    let err = parse_json_line(&bytes).unwrap_err();
    assert_eq!(err.kind, FieldErrorKind::NotUtf8 { offset: 150 });
    assert_eq!(err.to_string(), "invalid UTF-8 at byte 150 of the line");
}

#[test]
fn json_accepts_any_valid_layout() {
    let want = parse_json_line(GOOD.as_bytes()).unwrap();
    // YSB's own generator writes ", " and ": ".
    let spaced = GOOD.replace("\":\"", "\": \"").replace("\",\"", "\", \"");
    assert_eq!(parse_json_line(spaced.as_bytes()), Ok(want));
    // Reordered members, an unknown member of any type, escapes.
    let v: serde_json::Value = serde_json::from_str(GOOD).unwrap();
    let mut members: Vec<(String, serde_json::Value)> = v
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    members.reverse();
    members.insert(
        3,
        ("extra".into(), serde_json::json!({"a": [1, 2, "\u{e9}"]})),
    );
    let reordered = format!(
        "{{{}}}",
        members
            .iter()
            .map(|(k, v)| format!("{k:?}:{v}"))
            .collect::<Vec<_>>()
            .join(",")
    );
    assert_eq!(parse_json_line(reordered.as_bytes()), Ok(want));
    let escaped = GOOD.replace("\"banner\"", "\"b\\u0061nner\"");
    assert_eq!(parse_json_line(escaped.as_bytes()), Ok(want));
    assert_eq!(
        parse_json_line(format!(" \t{GOOD}\r\n").as_bytes()),
        Ok(want)
    );
}

// ---------------------------------------------------------------- files

#[test]
fn file_errors_name_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let good = format!("{GOOD}\n");
    let cases: Vec<(String, &str)> = vec![
        // (3rd line content, expected message after "events.json:3: ")
        (
            "{\"user_id\":".into(),
            "malformed JSON at column 11 of the line: EOF while parsing a value",
        ),
        (
            GOOD.replace(r#""ad_id":"ffffffff-ffff-4fff-bfff-ffffffffffff","#, ""),
            "field ad_id: missing",
        ),
        (
            GOOD.replace("\"1461024576817\"", "\"12:00\""),
            r#"field event_time: "12:00" is not a millisecond integer"#,
        ),
        (
            GOOD.replace("\"view\"", "\"VIEW\""),
            r#"field event_type: "VIEW" is not one of "view", "click", "purchase""#,
        ),
    ];
    for (bad, want) in cases {
        let text = format!("{good}\n{bad}\n{good}");
        let path = write(dir.path(), "events.json", text.as_bytes());
        let err = read_all(&path).unwrap_err();
        // Line 2 is empty (skipped, but counted), the bad line is line 3, at
        // byte offset len(good) + 1.
        let offset = good.len() + 1;
        assert_eq!(
            err.to_string(),
            format!("{}:3: {want} (byte offset {offset})", path.display())
        );
        assert_eq!(err.line, Some(3));
        assert_eq!(err.offset, Some(offset as u64));
        assert!(err.is_bad_record());
    }
}

#[test]
fn file_invalid_utf8_names_the_byte() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = format!("{GOOD}\n{GOOD}\n").into_bytes();
    let at = GOOD.len() + 1 + 20;
    text[at] = 0xC3; // a lead byte followed by ASCII
    let path = write(dir.path(), "events.json", &text);
    let mut r = YsbFileReader::open(&path, ReaderOptions::default()).unwrap();
    let mut out = Vec::new();
    assert_eq!(
        r.fill(&mut out, 10).unwrap(),
        1,
        "the good first line is delivered"
    );
    let err = r.fill(&mut out, 10).unwrap_err();
    assert_eq!(err.line, Some(2));
    assert_eq!(err.offset, Some(at as u64));
    assert_eq!(
        err.to_string(),
        format!(
            "{}:2: invalid UTF-8 at byte 20 of the line (byte offset {at})",
            path.display()
        )
    );
    assert_eq!(r.fill(&mut out, 10).unwrap(), 0, "finished after an error");
}

#[test]
fn file_line_too_long() {
    let dir = tempfile::tempdir().unwrap();
    let long = "x".repeat(10 << 20);
    let text = format!("{GOOD}\n{long}\n{GOOD}\n");
    let path = write(dir.path(), "events.json", text.as_bytes());
    let err = read_all(&path).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}:2: line longer than the limit of {DEFAULT_MAX_LINE_LEN} bytes (byte offset {})",
            path.display(),
            GOOD.len() + 1
        )
    );
    assert!(matches!(
        err.kind,
        SourceErrorKind::LineTooLong {
            max: DEFAULT_MAX_LINE_LEN
        }
    ));
    // Skipping drops the long line and reads the next one.
    let opts = ReaderOptions {
        on_bad_record: OnBadRecord::Skip,
        ..ReaderOptions::default()
    };
    let mut r = YsbFileReader::open(&path, opts).unwrap();
    let mut out = Vec::new();
    while r.fill(&mut out, 100).unwrap() > 0 {}
    assert_eq!(out.len(), 2);
    assert_eq!(r.skipped(), 1);
    assert_eq!(r.first_skipped().unwrap().line, Some(2));
    // A long last line without a newline, with a smaller limit.
    let text = format!("{GOOD}\n{}", "y".repeat(5000));
    let path = write(dir.path(), "tail.json", text.as_bytes());
    let opts = ReaderOptions {
        max_line_len: 1000,
        buffer_size: 64,
        ..opts
    };
    let mut r = YsbFileReader::open(&path, opts).unwrap();
    let mut out = Vec::new();
    while r.fill(&mut out, 100).unwrap() > 0 {}
    assert_eq!((out.len(), r.skipped()), (1, 1));
    assert_eq!(
        r.first_skipped().unwrap().to_string(),
        format!(
            "{}:2: line longer than the limit of 1000 bytes (byte offset {})",
            path.display(),
            GOOD.len() + 1
        )
    );
}

#[test]
fn file_missing_empty_and_unterminated() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.json");
    let err = YsbFileReader::open(&missing, ReaderOptions::default()).unwrap_err();
    assert!(matches!(err.kind, SourceErrorKind::Open(_)));
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!("{}: cannot open event file: ", missing.display())),
        "{msg}"
    );
    assert!(msg.contains("No such file"), "{msg}");

    let empty = write(dir.path(), "empty.json", b"");
    assert_eq!(read_all(&empty).unwrap(), []);
    let blank = write(dir.path(), "blank.json", b"\n\r\n  \n\t\n");
    assert_eq!(read_all(&blank).unwrap(), []);

    let evs = events(3, 3);
    let mut text = json_lines(&evs);
    text.pop();
    let unterminated = write(dir.path(), "unterminated.json", &text);
    assert_eq!(read_all(&unterminated).unwrap(), evs);
}

#[test]
fn file_delivers_events_before_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let evs = events(5, 4);
    let mut text = json_lines(&evs);
    text.extend_from_slice(b"{not json}\n");
    text.extend_from_slice(&json_lines(&events(2, 5)));
    let path = write(dir.path(), "events.json", &text);
    let mut r = YsbFileReader::open(&path, ReaderOptions::default()).unwrap();
    let mut out = Vec::new();
    assert_eq!(r.fill(&mut out, 100).unwrap(), 5);
    assert_eq!(out, evs);
    let err = r.fill(&mut out, 100).unwrap_err();
    assert_eq!(err.line, Some(6));
    assert!(
        err.to_string().contains(":6: malformed JSON at column 2"),
        "{err}"
    );
    assert_eq!(r.fill(&mut out, 100).unwrap(), 0);
    assert_eq!(r.events(), 5);

    // Skip: every good event, the bad one counted.
    let opts = ReaderOptions {
        on_bad_record: OnBadRecord::Skip,
        ..ReaderOptions::default()
    };
    let all = YsbFileReader::read_all(&path, opts).unwrap();
    assert_eq!(all.len(), 7);
    let mut r = YsbFileReader::open(&path, opts).unwrap();
    let mut out = Vec::new();
    while r.fill(&mut out, 3).unwrap() > 0 {}
    assert_eq!((out.len(), r.skipped()), (7, 1));
    assert_eq!(r.first_skipped().unwrap().line, Some(6));
}

#[test]
fn file_errors_in_later_ranges_have_exact_lines() {
    let dir = tempfile::tempdir().unwrap();
    let evs = events(1000, 6);
    let mut text = Vec::new();
    let mut bad_offset = 0;
    for (i, e) in evs.iter().enumerate() {
        if i == 799 {
            bad_offset = text.len();
            text.extend_from_slice(GOOD.replace("\"view\"", "\"hover\"").as_bytes());
            text.push(b'\n');
        } else {
            write_json_line(e, &mut text);
        }
    }
    let path = write(dir.path(), "events.json", &text);
    let ranges = split_ranges(&path, 4).unwrap();
    let mut errors = Vec::new();
    for range in ranges {
        let mut r = YsbFileReader::open_range(&path, range, ReaderOptions::default()).unwrap();
        let mut out = Vec::new();
        loop {
            match r.fill(&mut out, 64) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => errors.push(e),
            }
        }
    }
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].line, Some(800));
    assert_eq!(errors[0].offset, Some(bad_offset as u64));
    assert_eq!(errors[0].field(), Some(Field::EventType));
    assert!(errors[0]
        .to_string()
        .contains(":800: field event_type: \"hover\""));
}

// ---------------------------------------------------------------- ranges

/// The union of the ranges' events equals the whole file's, in order, for
/// 1..=7 ranges, with and without a final newline, LF and CRLF, and small
/// read buffers that cut lines everywhere.
#[test]
fn ranges_cover_every_line_once() {
    let dir = tempfile::tempdir().unwrap();
    let evs = events(500, 7);
    let lf = json_lines(&evs);
    let crlf: Vec<u8> = String::from_utf8(lf.clone())
        .unwrap()
        .replace('\n', "\r\n")
        .into_bytes();
    let variants: Vec<(&str, Vec<u8>)> = vec![
        ("lf", lf.clone()),
        ("lf_no_final_newline", lf[..lf.len() - 1].to_vec()),
        ("crlf", crlf.clone()),
        ("crlf_no_final_newline", crlf[..crlf.len() - 2].to_vec()),
        (
            "blank_lines",
            String::from_utf8(lf.clone())
                .unwrap()
                .replace('\n', "\n\n")
                .into_bytes(),
        ),
    ];
    for (name, text) in variants {
        let path = write(dir.path(), &format!("{name}.json"), &text);
        assert_eq!(read_all(&path).unwrap(), evs, "{name}");
        for buffer_size in [7, 300, 256 << 10] {
            let opts = ReaderOptions {
                buffer_size,
                ..ReaderOptions::default()
            };
            for parts in 1..=7 {
                let ranges = split_ranges(&path, parts).unwrap();
                assert_eq!(ranges.len(), parts);
                assert_eq!(ranges[0].start, 0);
                assert_eq!(ranges[parts - 1].end, text.len() as u64);
                let mut union = Vec::new();
                for r in ranges {
                    union.extend(read_range(&path, r, opts));
                }
                assert_eq!(union, evs, "{name}, {parts} parts, buffer {buffer_size}");
            }
        }
    }
}

/// Every cut point of a small file: the two ranges `[0, c)` and `[c, len)`
/// together hold every line once.
#[test]
fn ranges_at_every_cut_point() {
    let dir = tempfile::tempdir().unwrap();
    let evs = events(4, 8);
    let text = json_lines(&evs);
    let path = write(dir.path(), "events.json", &text);
    let opts = ReaderOptions {
        buffer_size: 64,
        ..ReaderOptions::default()
    };
    let len = text.len() as u64;
    for cut in 0..=len {
        let mut union = read_range(&path, 0..cut, opts);
        let first = union.len();
        union.extend(read_range(&path, cut..len, opts));
        assert_eq!(union, evs, "cut at {cut}");
        // The first range holds the lines that start before the cut.
        let starts = 1 + text[..cut.saturating_sub(1) as usize]
            .iter()
            .filter(|&&c| c == b'\n')
            .count();
        let expect_first = if cut == 0 { 0 } else { starts.min(evs.len()) };
        assert_eq!(first, expect_first, "cut at {cut}");
    }
    // More parts than bytes: many empty ranges.
    let tiny = write(dir.path(), "tiny.json", format!("{GOOD}\n").as_bytes());
    let ranges = split_ranges(&tiny, 1000).unwrap();
    let total: usize = ranges
        .into_iter()
        .map(|r| read_range(&tiny, r, opts).len())
        .sum();
    assert_eq!(total, 1);
}

// ---------------------------------------------------------------- campaigns

#[test]
fn campaign_files_both_formats_load_the_same_map() {
    let dir = tempfile::tempdir().unwrap();
    let c = campaigns();
    let mapping = dir.path().join("campaigns.txt");
    let csv = dir.path().join("campaigns.csv");
    c.write_mapping(&mapping).unwrap();
    c.write_csv(&csv).unwrap();
    let a = Campaigns::load(&mapping).unwrap();
    let b = Campaigns::load(&csv).unwrap();
    assert_eq!(a, c);
    assert_eq!(b, c);
    for (k, &ad) in c.ads().iter().enumerate() {
        assert_eq!(a.campaign_of(ad), Some((k / 10) as u32));
        assert_eq!(
            b.campaign_id(b.campaign_of(ad).unwrap()),
            c.campaign_id((k / 10) as u32)
        );
    }
    let text = fs::read_to_string(&mapping).unwrap();
    let first = text.lines().next().unwrap();
    assert_eq!(
        first,
        format!(
            "\"{}\":\"{}\"",
            uuid_to_string(c.ads()[0]),
            uuid_to_string(c.campaign_id(0))
        )
    );
    assert!(fs::read_to_string(&csv)
        .unwrap()
        .starts_with("ad_id,campaign_id\n"));

    // The mapping as a JSON object, indented, with CRLF; CSV with reversed
    // columns, quotes and a BOM.
    let object = format!(
        "{{\r\n{}\r\n}}\r\n",
        text.lines()
            .map(|l| format!("  {l}"))
            .collect::<Vec<_>>()
            .join(",\r\n")
    );
    assert!(serde_json::from_str::<serde_json::Value>(&object).is_ok());
    let p = write(dir.path(), "object.json", object.as_bytes());
    assert_eq!(Campaigns::load(&p).unwrap(), c);
    let mut reversed = String::from("\u{feff}\"campaign_id\",\"ad_id\"\n");
    for (ad, ci) in c.pairs() {
        reversed += &format!(
            "\"{}\",\"{}\"\n",
            uuid_to_string(c.campaign_id(ci)),
            uuid_to_string(ad)
        );
    }
    let p = write(dir.path(), "reversed.csv", reversed.as_bytes());
    assert_eq!(Campaigns::load(&p).unwrap(), c);
}

#[test]
fn campaign_file_errors() {
    let dir = tempfile::tempdir().unwrap();
    let ad = |i: u32| format!("00000000-0000-4000-8000-{i:012x}");
    let camp = |i: u32| format!("11111111-0000-4000-8000-{i:012x}");
    let line = |a: &str, c: &str| format!("\"{a}\":\"{c}\"\n");
    let cases: Vec<(&str, String, String)> = vec![
        (
            "campaigns.txt",
            line(&ad(1), &camp(1)) + &line(&ad(2), &camp(1)) + &line("xyz", &camp(1)),
            ":3: field ad_id: \"xyz\" is not a UUID".into(),
        ),
        (
            "campaigns.txt",
            line(&ad(1), &camp(1)) + &line(&ad(2), "12"),
            ":2: field campaign_id: \"12\" is not a UUID".into(),
        ),
        (
            "campaigns.txt",
            line(&ad(1), &camp(1)) + &line(&ad(2), &camp(1)) + "\n" + &line(&ad(1), &camp(2)),
            format!(":4: field ad_id: duplicate ad {} (first on line 1)", ad(1)),
        ),
        (
            "campaigns.txt",
            line(&ad(1), &camp(1)) + &format!("\"{}\" \"{}\"\n", ad(2), camp(1)),
            format!(":2: expected \"ad_id\":\"campaign_id\", found \"\\\"{}\\\" \\\"{}\\\"\"", ad(2), camp(1)),
        ),
        (
            "campaigns.csv",
            format!("ad_id,campaign_id\n{},{}\n{},{},x\n", ad(1), camp(1), ad(2), camp(1)),
            ":3: expected 2 CSV fields (ad_id,campaign_id), found 3".into(),
        ),
        (
            "campaigns.csv",
            format!("ad_id,campaign_id\n{},{}\n{},nope\n", ad(1), camp(1), ad(2)),
            ":3: field campaign_id: \"nope\" is not a UUID".into(),
        ),
        ("campaigns.txt", String::new(), ": no campaigns (the file holds no ad/campaign pair)".into()),
        ("campaigns.txt", "{\n}\n".into(), ": no campaigns (the file holds no ad/campaign pair)".into()),
        ("campaigns.csv", "ad_id,campaign_id\n".into(), ": no campaigns (the file holds no ad/campaign pair)".into()),
        (
            "campaigns.txt",
            "hello\n".into(),
            ":1: unknown format: expected a CSV header `ad_id,campaign_id` or `\"ad_id\":\"campaign_id\"` lines".into(),
        ),
        ("campaigns.csv", "ad,campaign\n".into(), ":1: CSV header \"ad,campaign\" is not `ad_id,campaign_id`".into()),
    ];
    for (name, text, want) in cases {
        let p = write(dir.path(), name, text.as_bytes());
        let err = Campaigns::load(&p).unwrap_err();
        assert_eq!(err.to_string(), format!("{}{want}", p.display()), "{text}");
    }
    let missing = dir.path().join("missing.txt");
    let err = Campaigns::load(&missing).unwrap_err();
    assert!(matches!(err.kind, CampaignsErrorKind::Io(_)));
    assert!(err.to_string().starts_with(&format!(
        "{}: cannot read campaign file: ",
        missing.display()
    )));
}

// ---------------------------------------------------------------- generator

fn run_worker(cfg: &YsbGenConfig, w: usize, workers: usize, batch: usize) -> Vec<YsbEvent> {
    let mut g = YsbGenerator::new(cfg, w, workers);
    let mut buf = vec![YsbEvent::default(); batch];
    let mut out = Vec::new();
    loop {
        let n = g.fill(&mut buf);
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    assert_eq!(Some(out.len() as u64), g.quota());
    assert_eq!(g.remaining(), Some(0));
    out
}

#[test]
fn generator_splits_the_event_budget_exactly() {
    let c = campaigns();
    for n in [0u64, 1, 5, 1000, 12_345] {
        for workers in 1..=7 {
            let cfg = YsbGenConfig::new(11, &c).with_events(Some(n));
            let total: usize = (0..workers)
                .map(|w| run_worker(&cfg, w, workers, 333).len())
                .sum();
            assert_eq!(total as u64, n, "{n} events over {workers} workers");
        }
    }
}

#[test]
fn generator_events_do_not_depend_on_the_worker_split() {
    // Event g is the same event whichever of W workers makes it: the job's
    // events, merged by global index, equal one worker's for any W.
    let c = campaigns();
    let cfg = YsbGenConfig::new(9, &c)
        .with_events(Some(1001))
        .with_event_time(EventTimeMode::Deterministic {
            start_ms: 5,
            events_per_s: 100,
        });
    let one = run_worker(&cfg, 0, 1, 64);
    for workers in 2..=7 {
        let mut all = vec![YsbEvent::default(); one.len()];
        for w in 0..workers {
            for (i, e) in run_worker(&cfg, w, workers, 50).into_iter().enumerate() {
                all[i * workers + w] = e;
            }
        }
        assert_eq!(all, one, "{workers} workers");
    }
}

#[test]
fn generator_streams_are_seeded_per_worker() {
    let c = campaigns();
    let time = EventTimeMode::Deterministic {
        start_ms: 0,
        events_per_s: 1000,
    };
    let cfg = YsbGenConfig::new(5, &c)
        .with_events(Some(4000))
        .with_event_time(time);
    let w0 = run_worker(&cfg, 0, 4, 100);
    let w1 = run_worker(&cfg, 1, 4, 100);
    assert_ne!(w0, w1);
    assert!(w0.iter().zip(&w1).all(|(a, b)| a.user_id != b.user_id));
    // Same seed, same worker: the same stream, whatever the batch size.
    assert_eq!(w0, run_worker(&cfg, 0, 4, 7));
    // Another seed: another stream.
    let other = YsbGenConfig::new(6, &c)
        .with_events(Some(4000))
        .with_event_time(time);
    assert_ne!(w0, run_worker(&other, 0, 4, 100));
    // Every ad drawn is a campaign ad.
    assert!(w0.iter().all(|e| c.campaign_of(e.ad_id).is_some()));
}

#[test]
fn generator_deterministic_event_times() {
    let c = campaigns();
    let (start_ms, rate) = (1_000_000u64, 3_000u64);
    let cfg = YsbGenConfig::new(1, &c)
        .with_events(Some(10_001))
        .with_event_time(EventTimeMode::Deterministic {
            start_ms,
            events_per_s: rate,
        });
    let workers = 3;
    let mut all = Vec::new();
    for w in 0..workers {
        for (i, e) in run_worker(&cfg, w, workers, 64).into_iter().enumerate() {
            let g = (i * workers + w) as u64;
            assert_eq!(
                e.event_time_ms,
                start_ms + g * 1000 / rate,
                "worker {w} event {i}"
            );
            all.push((g, e.event_time_ms));
        }
    }
    // The job as a whole: global indices 0..N, `rate` events per second.
    all.sort();
    assert!(all.iter().enumerate().all(|(k, &(g, _))| g == k as u64));
    let first_second = all.iter().filter(|&&(_, t)| t < start_ms + 1000).count();
    assert_eq!(first_second as u64, rate);
    // Rates that do not divide 1000 and large indices stay exact.
    let cfg = cfg.with_event_time(EventTimeMode::Deterministic {
        start_ms: 0,
        events_per_s: 7,
    });
    for (i, e) in run_worker(&cfg, 1, 2, 1000).into_iter().enumerate() {
        assert_eq!(e.event_time_ms, (i as u64 * 2 + 1) * 1000 / 7);
    }
}

#[test]
fn generator_wall_clock_times() {
    let cfg = YsbGenConfig::new(1, &campaigns()).with_events(Some(100));
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let evs = run_worker(&cfg, 0, 1, 10);
    let after = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert!(evs
        .iter()
        .all(|e| (before..=after).contains(&e.event_time_ms)));
}

#[test]
fn generator_distributions_are_uniform() {
    let c = campaigns();
    const N: usize = 1_000_000;
    let cfg = YsbGenConfig::new(99, &c).with_events(Some(N as u64));
    let evs = run_worker(&cfg, 0, 1, 4096);
    let mut event_types = [0usize; 3];
    let mut ad_types = [0usize; 5];
    let mut per_ad = std::collections::HashMap::new();
    let mut ip_high_bit = 0;
    for e in &evs {
        event_types[e.event_type as usize] += 1;
        ad_types[e.ad_type as usize] += 1;
        *per_ad.entry(e.ad_id).or_insert(0usize) += 1;
        ip_high_bit += (e.ip >> 31) as usize;
    }
    let within = |count: usize, p: f64, tol: f64| ((count as f64 / N as f64) - p).abs() <= p * tol;
    for (t, &n) in event_types.iter().enumerate() {
        assert!(within(n, 1.0 / 3.0, 0.02), "event type {t}: {n} of {N}");
    }
    for (t, &n) in ad_types.iter().enumerate() {
        assert!(within(n, 1.0 / 5.0, 0.02), "ad type {t}: {n} of {N}");
    }
    assert_eq!(per_ad.len(), c.num_ads(), "every ad is drawn");
    // 1000 ads, ~1000 draws each (sd ≈ 32): within 20%.
    assert!(
        per_ad.values().all(|&n| (800..1200).contains(&n)),
        "{:?}",
        per_ad.values().min()
    );
    assert!(within(ip_high_bit, 0.5, 0.02));
}

#[test]
fn gen_to_files_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("events.json");
    let camp = dir.path().join("campaigns.txt");
    let summary = gen_to_files(2500, 77, &out, &camp, &GenFilesOptions::default()).unwrap();
    assert_eq!(summary.events, 2500);
    assert_eq!(summary.bytes, fs::metadata(&out).unwrap().len());
    let loaded = Campaigns::load(&camp).unwrap();
    assert_eq!(loaded, summary.campaigns);
    assert_eq!(loaded, Campaigns::generate(100, 10, 77));
    assert_eq!(loaded, Campaigns::ysb(77));
    let evs = read_all(&out).unwrap();
    assert_eq!(evs.len(), 2500);
    assert!(evs.iter().all(|e| loaded.campaign_of(e.ad_id).is_some()));
    // The file is the one-worker stream of the same seed.
    let cfg = YsbGenConfig::new(77, &loaded)
        .with_events(Some(2500))
        .with_event_time(GenFilesOptions::default().event_time);
    assert_eq!(evs, run_worker(&cfg, 0, 1, 1000));
    // Same arguments, same bytes.
    let out2 = dir.path().join("events2.json");
    let camp2 = dir.path().join("campaigns2.csv");
    let opts = GenFilesOptions {
        campaigns_format: CampaignsFormat::Csv,
        ..GenFilesOptions::default()
    };
    gen_to_files(2500, 77, &out2, &camp2, &opts).unwrap();
    assert_eq!(fs::read(&out).unwrap(), fs::read(&out2).unwrap());
    assert_eq!(Campaigns::load(&camp2).unwrap(), loaded);
}

// ---------------------------------------------------------------- pacer

/// Rate R over duration D on the real clock: R·D events ± 1%, taking about D.
#[test]
fn pacer_rate_times_duration() {
    const RATE: u64 = 200_000;
    const WORKERS: usize = 2;
    let duration = Duration::from_millis(500);
    let c = campaigns();
    let cfg = YsbGenConfig::new(3, &c);
    let start = Instant::now();
    let results: Vec<(u64, Duration)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..WORKERS)
            .map(|w| {
                let cfg = &cfg;
                s.spawn(move || {
                    let pacer = Pacer::new(start, Some(RATE), Some(duration), w, WORKERS);
                    let mut g = YsbGenerator::new(cfg, w, WORKERS);
                    let mut buf = vec![YsbEvent::default(); 1024];
                    let mut max_ahead = 0i64;
                    loop {
                        let now = Instant::now();
                        match g.fill_paced(&mut buf, &pacer, now) {
                            PacedFill::Filled(n) => {
                                assert!(n > 0);
                                // Never ahead of the schedule.
                                let ahead =
                                    g.generated() as i64 - pacer.allowed(Instant::now()) as i64;
                                max_ahead = max_ahead.max(ahead);
                            }
                            PacedFill::WaitUntil(t) => {
                                assert!(t > now);
                                std::thread::sleep((t - now).min(Duration::from_millis(1)));
                            }
                            PacedFill::Done => break,
                        }
                    }
                    assert!(max_ahead <= 0, "ahead of the pacer by {max_ahead}");
                    (g.generated(), start.elapsed())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let total: u64 = results.iter().map(|r| r.0).sum();
    let expected = RATE as f64 * duration.as_secs_f64();
    assert!(
        (total as f64 - expected).abs() <= expected * 0.01,
        "{total} events, expected {expected} ± 1%"
    );
    for (n, elapsed) in results {
        assert_eq!(n, 50_000);
        // Paced: it cannot finish before D (minus one event's worth), and it
        // should not take much longer on an idle machine.
        assert!(
            elapsed >= duration - Duration::from_millis(1),
            "{elapsed:?}"
        );
        assert!(elapsed < duration * 6, "{elapsed:?}");
    }
}

#[test]
fn pacer_without_rate_ends_at_the_deadline() {
    let c = campaigns();
    let cfg = YsbGenConfig::new(3, &c);
    let start = Instant::now();
    let pacer = Pacer::new(start, None, Some(Duration::from_millis(50)), 0, 1);
    let mut g = YsbGenerator::new(&cfg, 0, 1);
    let mut buf = vec![YsbEvent::default(); 1024];
    while let PacedFill::Filled(_) = g.fill_paced(&mut buf, &pacer, Instant::now()) {}
    assert!(start.elapsed() >= Duration::from_millis(50));
    assert!(g.generated() > 0);
    // An event budget ends a paced stream too.
    let cfg = cfg.with_events(Some(10));
    let mut g = YsbGenerator::new(&cfg, 0, 1);
    let pacer = Pacer::unthrottled(Instant::now());
    assert_eq!(
        g.fill_paced(&mut buf, &pacer, Instant::now()),
        PacedFill::Filled(10)
    );
    assert_eq!(
        g.fill_paced(&mut buf, &pacer, Instant::now()),
        PacedFill::Done
    );
}

/// A UTF-8 byte-order mark before the first line (as Windows editors
/// write) is skipped: the file reads as without it, whole or by ranges.
#[test]
fn file_with_a_utf8_bom_reads_as_without() {
    let dir = tempfile::tempdir().unwrap();
    let evs = events(50, 11);
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend(json_lines(&evs));
    let path = write(dir.path(), "bom.json", &bytes);
    assert_eq!(read_all(&path).unwrap(), evs);
    let len = bytes.len() as u64;
    for cut in [1, 2, 3, 4, len / 2] {
        let mut got = read_range(&path, 0..cut, ReaderOptions::default());
        got.extend(read_range(&path, cut..len, ReaderOptions::default()));
        assert_eq!(got, evs, "cut at {cut}");
    }
}
