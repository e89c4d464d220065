//! YSB data-layer benchmarks: generator fill, campaign lookup, JSON write,
//! JSON parse (ours, full and query modes, against serde_json and sonic-rs
//! on a borrowed struct), and the file reader.
//!
//! Run: `cargo bench -p air-operators --bench ysb -j2`. Throughputs are
//! printed per element (event, lookup, line) on one core.

use std::collections::HashMap;
use std::hint::black_box;
use std::net::Ipv4Addr;
use std::time::Duration;

use air_operators::sources::ysb::*;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};

fn campaigns() -> Campaigns {
    Campaigns::generate(100, 10, 42)
}

fn bench_generator(c: &mut Criterion) {
    let camps = campaigns();
    let mut g = c.benchmark_group("ysb_generator");
    const BATCH: usize = 1024;
    g.throughput(Throughput::Elements(BATCH as u64));
    for (name, mode) in [
        (
            "fill_deterministic_time",
            EventTimeMode::Deterministic {
                start_ms: 0,
                events_per_s: 1_000_000,
            },
        ),
        ("fill_wall_clock_time", EventTimeMode::WallClock),
    ] {
        let cfg = YsbGenConfig::new(1, &camps).with_event_time(mode);
        let mut gen = YsbGenerator::new(&cfg, 0, 1);
        let mut buf = vec![YsbEvent::default(); BATCH];
        g.bench_function(name, |b| {
            b.iter(|| {
                let n = gen.fill(black_box(&mut buf));
                black_box(&buf);
                n
            })
        });
    }
    g.finish();
}

fn bench_lookup(c: &mut Criterion) {
    let camps = campaigns();
    // A random sequence of known ads (hits) and of unknown ids (misses).
    let cfg = YsbGenConfig::new(9, &camps);
    let mut gen = YsbGenerator::new(&cfg, 0, 1);
    let mut events = vec![YsbEvent::default(); 4096];
    gen.fill(&mut events);
    let hits: Vec<u128> = events.iter().map(|e| e.ad_id).collect();
    let misses: Vec<u128> = events.iter().map(|e| e.user_id).collect();
    let std_map: HashMap<u128, u32> = camps.pairs().collect();
    let fx_map: rustc_hash::FxHashMap<u128, u32> = camps.pairs().collect();

    let mut g = c.benchmark_group("campaign_lookup");
    g.throughput(Throughput::Elements(hits.len() as u64));
    g.bench_function("campaigns_hit", |b| {
        b.iter(|| {
            let mut s = 0u64;
            for &ad in black_box(&hits) {
                s += camps.campaign_of(ad).unwrap() as u64;
            }
            s
        })
    });
    g.bench_function("campaigns_miss", |b| {
        b.iter(|| {
            let mut s = 0u64;
            for &ad in black_box(&misses) {
                s += camps.campaign_of(ad).is_none() as u64;
            }
            s
        })
    });
    g.bench_function("std_hashmap_hit", |b| {
        b.iter(|| {
            let mut s = 0u64;
            for ad in black_box(&hits) {
                s += *std_map.get(ad).unwrap() as u64;
            }
            s
        })
    });
    g.bench_function("fxhashmap_hit", |b| {
        b.iter(|| {
            let mut s = 0u64;
            for ad in black_box(&hits) {
                s += *fx_map.get(ad).unwrap() as u64;
            }
            s
        })
    });
    g.finish();
}

/// The competitors' view of a line: every field borrowed, unknown ones
/// ignored.
#[derive(serde::Deserialize)]
struct Raw<'a> {
    #[serde(borrow)]
    user_id: &'a str,
    #[serde(borrow)]
    page_id: &'a str,
    #[serde(borrow)]
    ad_id: &'a str,
    #[serde(borrow)]
    ad_type: &'a str,
    #[serde(borrow)]
    event_type: &'a str,
    #[serde(borrow)]
    event_time: &'a str,
    #[serde(borrow)]
    ip_address: &'a str,
}

/// The same validation as ours, on a competitor's borrowed struct.
fn from_raw(r: &Raw<'_>) -> Option<YsbEvent> {
    Some(YsbEvent {
        user_id: parse_uuid(r.user_id.as_bytes())?,
        page_id: parse_uuid(r.page_id.as_bytes())?,
        ad_id: parse_uuid(r.ad_id.as_bytes())?,
        ad_type: r.ad_type.parse().ok()?,
        event_type: r.event_type.parse().ok()?,
        event_time_ms: r.event_time.parse().ok()?,
        ip: u32::from(r.ip_address.parse::<Ipv4Addr>().ok()?),
    })
}

fn lines(n: usize) -> Vec<Vec<u8>> {
    let camps = campaigns();
    let cfg = YsbGenConfig::new(3, &camps).with_event_time(EventTimeMode::Deterministic {
        start_ms: 1_461_024_576_817,
        events_per_s: 100_000,
    });
    let mut gen = YsbGenerator::new(&cfg, 0, 1);
    let mut events = vec![YsbEvent::default(); n];
    gen.fill(&mut events);
    events
        .iter()
        .map(|e| {
            let mut l = Vec::new();
            write_json_line(e, &mut l);
            l.pop(); // the '\n'
            l
        })
        .collect()
}

fn bench_json(c: &mut Criterion) {
    let lines = lines(4096);
    let bytes: usize = lines.iter().map(|l| l.len() + 1).sum();
    println!(
        "json lines: {} lines, mean {:.1} bytes/line",
        lines.len(),
        bytes as f64 / lines.len() as f64
    );
    let mut g = c.benchmark_group("json_parse");
    g.throughput(Throughput::Elements(lines.len() as u64));
    for (name, mode) in [
        ("ours_full", ParseMode::Full),
        ("ours_query_fields", ParseMode::QueryFields),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut s = 0u64;
                for l in black_box(&lines) {
                    s = s.wrapping_add(parse_json_line_with(l, mode).unwrap().event_time_ms);
                }
                s
            })
        });
    }
    g.bench_function("serde_json_borrowed_struct", |b| {
        b.iter(|| {
            let mut s = 0u64;
            for l in black_box(&lines) {
                let raw: Raw<'_> = serde_json::from_slice(l).unwrap();
                s = s.wrapping_add(from_raw(&raw).unwrap().event_time_ms);
            }
            s
        })
    });
    g.bench_function("sonic_rs_borrowed_struct", |b| {
        b.iter(|| {
            let mut s = 0u64;
            for l in black_box(&lines) {
                let raw: Raw<'_> = sonic_rs::from_slice(l).unwrap();
                s = s.wrapping_add(from_raw(&raw).unwrap().event_time_ms);
            }
            s
        })
    });
    g.finish();

    let events: Vec<YsbEvent> = lines.iter().map(|l| parse_json_line(l).unwrap()).collect();
    let mut g = c.benchmark_group("json_write");
    g.throughput(Throughput::Elements(events.len() as u64));
    let mut out = Vec::with_capacity(events.len() * MAX_JSON_LINE_LEN);
    g.bench_function("write_json_line", |b| {
        b.iter(|| {
            out.clear();
            for e in black_box(&events) {
                write_json_line(e, &mut out);
            }
            out.len()
        })
    });
    g.finish();
}

fn bench_reader(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.json");
    const EVENTS: u64 = 200_000;
    gen_to_files(
        EVENTS,
        5,
        &path,
        &dir.path().join("campaigns.txt"),
        &GenFilesOptions::default(),
    )
    .unwrap();
    let mut g = c.benchmark_group("file_reader");
    g.throughput(Throughput::Elements(EVENTS));
    g.sample_size(10);
    for (name, mode) in [
        ("read_full", ParseMode::Full),
        ("read_query_fields", ParseMode::QueryFields),
    ] {
        let opts = ReaderOptions {
            mode,
            ..ReaderOptions::default()
        };
        g.bench_function(name, |b| {
            b.iter_batched_ref(
                || Vec::with_capacity(4096),
                |out: &mut Vec<YsbEvent>| {
                    let mut r = YsbFileReader::open(&path, opts).unwrap();
                    let mut total = 0;
                    loop {
                        out.clear();
                        let n = r.fill(out, 4096).unwrap();
                        if n == 0 {
                            break;
                        }
                        total += n;
                    }
                    assert_eq!(total as u64, EVENTS);
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30);
    targets = bench_generator, bench_lookup, bench_json, bench_reader
}
criterion_main!(benches);
