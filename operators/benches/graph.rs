//! The cost of generality on the graph API: YSB (views of known ads, per
//! campaign per 10-s tumbling window) counted by the built-in [`Count`]
//! against the same job written with a user [`AggregateFunction`] (its own
//! accumulator type, archived by its own rkyv derive), pre-aggregated and
//! with every event exchanged.
//!
//! Run: `cargo bench -p air-operators --bench graph -j2`. One worker, no
//! pinning, 2 M generated events per iteration (deterministic event time,
//! 1 M events/s of event time: 2 s, one window); throughput is per event.
//! Every iteration checks that the windows counted every view of a known
//! ad, so a broken job cannot look fast.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use air_operators::graph::{AggregateFunction, Count, KeyedWindowExt, Tumbling};
use air_operators::sources::ysb::*;
use air_runtime::dataflow::{run_graph, Source, SourcePoll};
use air_runtime::JobConfig;
use criterion::{criterion_group, Criterion, Throughput};

const EVENTS: u64 = 2_000_000;

/// `AIR_GRAPH_BENCH_ONCE=<shape>:<events>` runs one job of that shape
/// (`builtin-pre`, `user-pre`, `builtin-every`, `user-every`) over that many
/// events and exits, for instruction counts under callgrind (`valgrind
/// --tool=callgrind target/release/deps/graph-… --bench`).
const ONCE_ENV: &str = "AIR_GRAPH_BENCH_ONCE";

/// This worker's YSB generator as a graph source.
struct Gen(YsbGenerator);

impl Source for Gen {
    type Item = YsbEvent;
    fn poll(&mut self, buf: &mut Vec<YsbEvent>, max: usize) -> SourcePoll {
        buf.resize(max, YsbEvent::default());
        let n = self.0.fill(buf);
        buf.truncate(n);
        if n == 0 {
            SourcePoll::Done
        } else {
            SourcePoll::Ready
        }
    }
}

/// A user's view counter: the same result as [`Count`], through its own
/// accumulator type.
#[derive(Clone)]
struct ViewCount;

/// The user's accumulator.
#[derive(Clone, Copy, Default, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct Views {
    n: u64,
}

impl AggregateFunction<(u32, u64)> for ViewCount {
    type Acc = Views;
    type Out = u64;
    fn create(&self) -> Views {
        Views::default()
    }
    fn add(&self, acc: &mut Views, _: &(u32, u64)) {
        acc.n += 1;
    }
    fn merge(&self, acc: &mut Views, other: Views) {
        acc.n += other.n;
    }
    fn result(&self, acc: &Views) -> u64 {
        acc.n
    }
}

/// Which aggregate and which mode one run uses.
#[derive(Clone, Copy)]
struct Shape {
    user: bool,
    every_event: bool,
}

/// Runs YSB over `events` events; returns the views counted in windows.
fn run(camps: &Campaigns, shape: Shape, events: u64) -> u64 {
    let cfg = JobConfig {
        workers: 1,
        pin: false,
        ..JobConfig::default()
    };
    let gen_cfg = YsbGenConfig::new(1, camps)
        .with_events(Some(events))
        .with_event_time(EventTimeMode::Deterministic {
            start_ms: 0,
            events_per_s: 1_000_000,
        });
    let total = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let t = total.clone();
    run_graph(&cfg, move |df| {
        let c = camps.clone();
        let views = df
            .source(Gen(YsbGenerator::new(&gen_cfg, df.index(), df.workers())))
            .flat_map(move |e: YsbEvent| {
                if e.event_type != EventType::View {
                    return None;
                }
                c.campaign_of(e.ad_id).map(|k| (k, e.event_time_ms))
            })
            .event_time(|v| v.1, 0)
            .key_by(|v: &(u32, u64)| v.0)
            .window(Tumbling::ms(10_000), |v| v.1)
            .dense_keys();
        let sum = Rc::new(Cell::new(0u64));
        let s = sum.clone();
        let t = t.clone();
        df.report_with(move |_| {
            t.fetch_add(s.get(), std::sync::atomic::Ordering::Relaxed);
        });
        let add = move |n: u64| sum.set(sum.get() + n);
        match (shape.user, shape.every_event) {
            (false, false) => views.aggregate(Count).for_each(move |r| add(r.value)),
            (true, false) => views.aggregate(ViewCount).for_each(move |r| add(r.value)),
            (false, true) => views
                .aggregate_every_event(Count)
                .for_each(move |r| add(r.value)),
            (true, true) => views
                .aggregate_every_event(ViewCount)
                .for_each(move |r| add(r.value)),
        };
    })
    .expect("the YSB graph runs");
    total.load(std::sync::atomic::Ordering::Relaxed)
}

fn bench_aggregates(c: &mut Criterion) {
    let camps = Campaigns::generate(100, 10, 42);
    // The reference: views of known ads among the generated events.
    let expected = {
        let cfg = YsbGenConfig::new(1, &camps)
            .with_events(Some(EVENTS))
            .with_event_time(EventTimeMode::Deterministic {
                start_ms: 0,
                events_per_s: 1_000_000,
            });
        let mut gen = YsbGenerator::new(&cfg, 0, 1);
        let mut buf = vec![YsbEvent::default(); 4096];
        let mut views = 0u64;
        loop {
            let n = gen.fill(&mut buf);
            if n == 0 {
                break;
            }
            views += buf[..n]
                .iter()
                .filter(|e| e.event_type == EventType::View && camps.campaign_of(e.ad_id).is_some())
                .count() as u64;
        }
        views
    };
    let mut g = c.benchmark_group("ysb_graph");
    g.throughput(Throughput::Elements(EVENTS));
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(8));
    for (name, shape) in [
        (
            "count_builtin_pre_aggregated",
            Shape {
                user: false,
                every_event: false,
            },
        ),
        (
            "count_user_pre_aggregated",
            Shape {
                user: true,
                every_event: false,
            },
        ),
        (
            "count_builtin_every_event",
            Shape {
                user: false,
                every_event: true,
            },
        ),
        (
            "count_user_every_event",
            Shape {
                user: true,
                every_event: true,
            },
        ),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| {
                let got = run(&camps, shape, EVENTS);
                assert_eq!(got, expected, "{name}: views counted");
                got
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench_aggregates);

fn main() {
    if let Ok(spec) = std::env::var(ONCE_ENV) {
        let (shape, events) = spec.split_once(':').expect("<shape>:<events>");
        let (user, every_event) = match shape {
            "builtin-pre" => (false, false),
            "user-pre" => (true, false),
            "builtin-every" => (false, true),
            "user-every" => (true, true),
            _ => panic!("{ONCE_ENV}: unknown shape {shape:?}"),
        };
        let events = events.parse().expect("events");
        let camps = Campaigns::generate(100, 10, 42);
        let views = run(&camps, Shape { user, every_event }, events);
        println!("{shape}: {views} views counted");
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
