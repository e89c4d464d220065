//! JSON-lines file source against the YSB file reader on the same file
//! (issue 30): records per second of one worker reading a file of YSB
//! events (`air gen ysb`'s bytes), the readers interleaved round by round,
//! medians and spread printed.
//!
//! - `ysb_reader`: [`YsbFileReader`] (hand-written parser, ids to `u128`).
//! - `json_source_strings`: [`JsonLinesSource`] of a serde struct with the
//!   seven YSB fields as `String`s (serde_json, one allocation a field).
//! - `json_source_typed`: [`JsonLinesSource`] of a serde struct that parses
//!   while it deserializes: ids to `u128`, time to `u64`, the ip to `u32`,
//!   the two enums to `u8`, from the borrowed text (no allocation).
//!
//! Run: `cargo bench -p air-operators --bench json_source -j2`; `EVENTS`
//! (default 400 000) and `ROUNDS` (default 9) in the environment change the
//! size, `ONLY=ysb_reader,json_source_typed` picks readers (e.g. for a
//! profile), `PARSE_ONLY=1` times the parsers alone on lines in memory. Each reader polls in batches of 1 024 records, as a worker does.

use std::fmt;
use std::path::Path;
use std::time::Instant;

use air_operators::graph::{FileFormat, FileSource, JsonLinesSource, RecordFault};
use air_operators::sources::ysb::{
    gen_to_files, parse_ipv4, parse_millis, parse_uuid, GenFilesOptions, ReaderOptions, YsbEvent,
    YsbFileReader,
};
use air_runtime::dataflow::{Source, SourcePoll};
use serde::de::{Deserializer, Error, Visitor};

/// A YSB event as a user would first write it: every field a `String`.
#[derive(Clone, serde::Deserialize)]
#[allow(dead_code)] // fields are read by serde only
struct YsbStrings {
    user_id: String,
    page_id: String,
    ad_id: String,
    ad_type: String,
    event_type: String,
    event_time: String,
    ip_address: String,
}

/// A YSB event parsed while deserialized, as the YSB reader does.
#[derive(Clone, serde::Deserialize)]
#[allow(dead_code)]
struct YsbTyped {
    #[serde(deserialize_with = "uuid")]
    user_id: u128,
    #[serde(deserialize_with = "uuid")]
    page_id: u128,
    #[serde(deserialize_with = "uuid")]
    ad_id: u128,
    #[serde(deserialize_with = "first_byte")]
    ad_type: u8,
    #[serde(deserialize_with = "first_byte")]
    event_type: u8,
    #[serde(deserialize_with = "millis")]
    event_time: u64,
    #[serde(deserialize_with = "ipv4")]
    ip_address: u32,
}

/// Deserializes a string field through `f`, without allocating (`f` is a
/// type parameter, so the conversion inlines into the visitor).
fn with_str<'de, D: Deserializer<'de>, T, F: Fn(&str) -> Option<T>>(
    d: D,
    what: &'static str,
    f: F,
) -> Result<T, D::Error> {
    struct V<F>(&'static str, F);
    impl<T, F: Fn(&str) -> Option<T>> Visitor<'_> for V<F> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
        fn visit_str<E: Error>(self, s: &str) -> Result<T, E> {
            (self.1)(s).ok_or_else(|| E::custom(format!("not {}: {s:?}", self.0)))
        }
    }
    d.deserialize_str(V(what, f))
}

fn uuid<'de, D: Deserializer<'de>>(d: D) -> Result<u128, D::Error> {
    with_str(d, "a UUID", |s| parse_uuid(s.as_bytes()))
}

fn first_byte<'de, D: Deserializer<'de>>(d: D) -> Result<u8, D::Error> {
    with_str(d, "a name", |s| s.bytes().next())
}

// The YSB reader's own conversions, so both readers do the same work per
// field (std's `Ipv4Addr` parser alone cost ~10% of a record).
fn millis<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    with_str(d, "milliseconds", |s| parse_millis(s.as_bytes()))
}

fn ipv4<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    with_str(d, "an IPv4 address", |s| parse_ipv4(s.as_bytes()))
}

const BATCH: usize = 1024;

/// Seconds to read every event of `path` with the YSB reader.
fn ysb_reader(path: &Path, events: u64) -> f64 {
    let t = Instant::now();
    let mut r = YsbFileReader::open(path, ReaderOptions::default()).unwrap();
    let mut buf: Vec<YsbEvent> = Vec::with_capacity(BATCH);
    let mut n = 0u64;
    loop {
        buf.clear();
        let got = r.fill(&mut buf, BATCH).unwrap();
        if got == 0 {
            break;
        }
        n += got as u64;
        std::hint::black_box(&buf);
    }
    assert_eq!(n, events);
    t.elapsed().as_secs_f64()
}

/// sonic-rs instead of serde_json (a `FileFormat` of the bench's own).
struct Sonic<T>(std::marker::PhantomData<fn() -> T>);

impl<T: serde::de::DeserializeOwned + Clone + Send + 'static> FileFormat for Sonic<T> {
    type Item = T;
    const NAME: &'static str = "sonic";
    const HEADER: bool = false;
    fn parse(&mut self, line: &[u8]) -> Result<T, RecordFault> {
        sonic_rs::from_slice(line).map_err(|e| RecordFault::new(e.to_string()))
    }
}

/// No parse: the line machinery alone.
struct LinesOnly;

impl FileFormat for LinesOnly {
    type Item = usize;
    const NAME: &'static str = "lines";
    const HEADER: bool = false;
    fn parse(&mut self, line: &[u8]) -> Result<usize, RecordFault> {
        Ok(line.len())
    }
}

fn lines_only(path: &Path, events: u64) -> f64 {
    drain_source(FileSource::with_format(LinesOnly, [path], 0, 1), events)
}

/// Seconds to read every event of `path` with a `JsonLinesSource<T>`.
fn json_source<T>(path: &Path, events: u64) -> f64
where
    T: serde::de::DeserializeOwned + Clone + Send + 'static,
{
    drain_source(JsonLinesSource::<T>::shard(path, 0, 1), events)
}

/// Seconds to read every event of `path` with sonic-rs.
fn sonic_source<T>(path: &Path, events: u64) -> f64
where
    T: serde::de::DeserializeOwned + Clone + Send + 'static,
{
    drain_source(
        FileSource::with_format(Sonic::<T>(std::marker::PhantomData), [path], 0, 1),
        events,
    )
}

/// Seconds to poll `s` to its end.
fn drain_source<S: Source>(mut s: S, events: u64) -> f64 {
    let t = Instant::now();
    let mut buf: Vec<S::Item> = Vec::with_capacity(BATCH);
    let mut n = 0u64;
    loop {
        let poll = s.poll(&mut buf, BATCH);
        n += buf.len() as u64;
        std::hint::black_box(&buf);
        if poll == SourcePoll::Done {
            break;
        }
    }
    assert_eq!(s.take_error(), None);
    assert_eq!(n, events);
    t.elapsed().as_secs_f64()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs it once,
    // small.
    let testing = !std::env::args().any(|a| a == "--bench");
    let env = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let (events, rounds) = if testing {
        (2_000, 1)
    } else {
        (env("EVENTS", 400_000), env("ROUNDS", 9) as usize)
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.json");
    let summary = gen_to_files(
        events,
        5,
        &path,
        &dir.path().join("campaigns.txt"),
        &GenFilesOptions::default(),
    )
    .unwrap();
    println!(
        "file: {} YSB events, {} bytes ({:.1} bytes/line), {} rounds, one worker, batches of {BATCH}",
        events,
        summary.bytes,
        summary.bytes as f64 / events as f64,
        rounds
    );
    if std::env::var_os("PARSE_ONLY").is_some() {
        parse_only(&path);
        return;
    }
    type Reader = (&'static str, fn(&Path, u64) -> f64);
    let readers: [Reader; 7] = [
        ("lines_only", lines_only),
        ("json_ignored_any", json_source::<serde::de::IgnoredAny>),
        ("ysb_reader", ysb_reader),
        ("json_source_strings", json_source::<YsbStrings>),
        ("json_source_typed", json_source::<YsbTyped>),
        ("sonic_strings", sonic_source::<YsbStrings>),
        ("sonic_typed", sonic_source::<YsbTyped>),
    ];
    let only = std::env::var("ONLY").ok();
    let readers: Vec<Reader> = readers
        .into_iter()
        .filter(|r| {
            only.as_deref()
                .is_none_or(|o| o.split(',').any(|o| o == r.0))
        })
        .collect();
    // Warm the page cache and the allocator.
    for (_, read) in &readers {
        read(&path, events);
    }
    let mut secs = vec![Vec::new(); readers.len()];
    for round in 0..rounds {
        // Rotate the order each round so none always runs first.
        for k in 0..readers.len() {
            let i = (k + round) % readers.len();
            secs[i].push((readers[i].1)(&path, events));
        }
    }
    let ysb_median = readers.iter().position(|r| r.0 == "ysb_reader").map(|i| {
        let mut s = secs[i].clone();
        s.sort_by(f64::total_cmp);
        events as f64 / percentile(&s, 0.5)
    });
    println!(
        "{:<22} {:>14} {:>14} {:>14} {:>9}",
        "reader", "median rec/s", "p10 rec/s", "p90 rec/s", "vs ysb"
    );
    for ((name, _), s) in readers.iter().zip(&mut secs) {
        s.sort_by(f64::total_cmp);
        let rate = |p: f64| events as f64 / percentile(s, p);
        println!(
            "{name:<22} {:>14.0} {:>14.0} {:>14.0} {:>8.2}x",
            rate(0.5),
            rate(0.9), // the slow end: the 90th percentile of time
            rate(0.1),
            ysb_median.map_or(f64::NAN, |y| rate(0.5) / y)
        );
    }
}

fn time_parse<T: serde::de::DeserializeOwned>(name: &str, lines: &[&[u8]]) {
    let t = Instant::now();
    for l in lines {
        std::hint::black_box(serde_json::from_slice::<T>(l).unwrap());
    }
    let a = t.elapsed().as_nanos() as f64 / lines.len() as f64;
    let t = Instant::now();
    for l in lines {
        std::hint::black_box(sonic_rs::from_slice::<T>(l).unwrap());
    }
    let b = t.elapsed().as_nanos() as f64 / lines.len() as f64;
    println!("{name:<12} serde_json {a:>7.1} ns/line   sonic-rs {b:>7.1} ns/line");
}

fn parse_only(path: &Path) {
    let text = std::fs::read(path).unwrap();
    let lines: Vec<&[u8]> = text
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    for _ in 0..3 {
        time_parse::<serde::de::IgnoredAny>("ignored_any", &lines);
        time_parse::<YsbStrings>("strings", &lines);
        time_parse::<YsbTyped>("typed", &lines);
        time_parse::<serde_json::Value>("value", &lines);
    }
}
