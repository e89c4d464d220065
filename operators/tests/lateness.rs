//! Lateness as Flink defines it (issue 30), against batch references
//! computed here, on random streams with bounded disorder read by 1–3
//! workers (each worker's share its own source, with its own watermark):
//!
//! - with a watermark delay at least the disorder, windowed aggregates
//!   (tumbling and sliding, pre-aggregated and not), windowed joins and
//!   sessions equal a batch computation over every record, and no record
//!   is late;
//! - with a smaller delay, a record is left out of exactly those of its
//!   windows that had closed at the watermark at the record (a sequential
//!   simulation of each worker's watermark says which), and counted late
//!   only if all of them had — also exact at any worker count;
//! - `drop_behind_watermark` drops exactly the records behind their
//!   source's watermark;
//! - the late log names the operator, the first late record and the
//!   disorder seen.

use air_operators::graph::*;
use air_runtime::dataflow::{run_graph, Dataflow, GraphOutput, VecSource};
use air_runtime::JobConfig;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// (key, event time ms, value)
type Ev = (u32, u64, i64);

/// Per (key, window start): (count, sum).
type Rows = BTreeMap<(u32, u64), (u64, i64)>;

/// Small rings and batches, watermarks at every turn: windows fire while
/// records still flow, so a wrong rule shows.
fn config(workers: usize) -> JobConfig {
    JobConfig {
        workers,
        pin: false,
        ring_bytes: 8192,
        batch_records: 8,
        flush: Duration::ZERO,
        // Hot keys split from the first records (every key of these short
        // streams turns hot at a sender once sampled): rows must not change.
        rebalance: air_runtime::hotkeys::Rebalance {
            min_samples: 1,
            ..Default::default()
        },
        ..JobConfig::default()
    }
}

/// A stream of `n` records whose disorder is at most `d` ms: record i's
/// time is at least the newest before it minus `d`.
fn stream(seed: u64, n: usize, d: u64, keys: u32) -> Vec<Ev> {
    let mut s = seed | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut base = 0u64;
    (0..n)
        .map(|_| {
            base += next() % 40;
            let jitter = if d == 0 { 0 } else { next() % (d + 1) };
            let t = base.saturating_sub(jitter);
            ((next() % keys as u64) as u32, t, (next() % 100) as i64)
        })
        .collect()
}

/// Worker `w` of `n`'s share: every n-th record.
fn share(evs: &[Ev], w: usize, n: usize) -> Vec<Ev> {
    evs.iter().copied().skip(w).step_by(n).collect()
}

/// The watermark at each record of one worker's share (the event-time
/// stage's rule: newest − delay, before the record moves it): `Some(wm)`
/// for a record behind it, `None` for one that is not.
fn behind(evs: &[Ev], delay: u64) -> Vec<Option<u64>> {
    let (mut newest, mut wm) = (0u64, 0u64);
    evs.iter()
        .map(|e| {
            if e.1 > newest {
                newest = e.1;
                wm = wm.max(e.1.saturating_sub(delay));
                None
            } else {
                (e.1 < wm).then_some(wm)
            }
        })
        .collect()
}

/// Per (key, start): (count, sum) of the records the rule keeps in that
/// window, and the records late for all their windows.
fn reference(
    evs: &[Ev],
    workers: usize,
    delay: u64,
    windows: Windows,
    strict: bool,
) -> (Rows, u64) {
    let mut rows = BTreeMap::new();
    let mut late = 0;
    for w in 0..workers {
        let mine = share(evs, w, workers);
        for (e, b) in mine.iter().zip(behind(&mine, delay)) {
            let mut kept = false;
            windows.assign(e.1, |start| {
                let end = start + windows.size();
                let open = match b {
                    None => true,
                    Some(_) if strict => false,
                    Some(wm) => end > wm,
                };
                if open {
                    kept = true;
                    let r = rows.entry((e.0, start)).or_insert((0, 0));
                    r.0 += 1;
                    r.1 += e.2;
                }
            });
            late += u64::from(!kept);
        }
    }
    (rows, late)
}

/// Runs `build` (given the worker's share and a row sink) at `workers`.
fn run<B>(workers: usize, evs: &[Ev], build: B) -> (Rows, GraphOutput)
where
    B: Fn(&Dataflow, Vec<Ev>, Arc<Mutex<Rows>>) + Send + Sync + 'static,
{
    let rows = Arc::new(Mutex::new(BTreeMap::new()));
    let (evs, out) = (evs.to_vec(), rows.clone());
    let job = run_graph(&config(workers), move |df| {
        build(df, share(&evs, df.index(), df.workers()), out.clone())
    })
    .unwrap();
    let rows = rows.lock().unwrap().clone();
    (rows, job)
}

#[derive(Clone, Copy, Debug)]
enum Shape {
    PreAggregated,
    EveryEvent,
    Strict,
}

fn windowed(
    workers: usize,
    evs: &[Ev],
    delay: u64,
    windows: Windows,
    shape: Shape,
) -> (Rows, GraphOutput) {
    run(workers, evs, move |df, mine, out| {
        let w = df
            .source(VecSource::new(mine))
            .event_time(|e| e.1, delay)
            .key_by(|e| e.0)
            .window(windows, |e| e.1);
        let agg = (Count, Sum::of(|e: &Ev| e.2));
        let sink = move |r: Windowed<u32, (u64, i64)>| {
            let prev = out.lock().unwrap().insert((r.key, r.start), r.value);
            assert!(
                prev.is_none(),
                "window ({}, {}) fired twice",
                r.key,
                r.start
            );
        };
        let _ = match shape {
            Shape::PreAggregated => w.aggregate(agg).for_each(sink),
            Shape::EveryEvent => w.aggregate_every_event(agg).for_each(sink),
            Shape::Strict => w.drop_behind_watermark().aggregate(agg).for_each(sink),
        };
    })
}

/// Every windows kind the tests use: tumbling, sliding kept per pane,
/// sliding kept per window (size not a multiple of the slide).
fn kinds() -> [Windows; 3] {
    [
        Tumbling::ms(200),
        Sliding::ms(300, 100),
        Sliding::ms(250, 100),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Disorder up to D, delay >= D: every windowed aggregate equals the
    /// batch computation and nothing is late.
    #[test]
    fn windows_equal_batch_when_delay_covers_disorder(
        seed in any::<u64>(), d in 0u64..300, extra in 0u64..50, workers in 1usize..=3,
    ) {
        let evs = stream(seed, 300, d, 5);
        for windows in kinds() {
            let (want, late) = reference(&evs, 1, u64::MAX, windows, false);
            prop_assert_eq!(late, 0);
            for shape in [Shape::PreAggregated, Shape::EveryEvent, Shape::Strict] {
                let (got, job) = windowed(workers, &evs, d + extra, windows, shape);
                prop_assert_eq!(&got, &want, "{:?} {:?}", windows, shape);
                prop_assert_eq!(job.stats.get("late_records"), 0);
                if let (Shape::EveryEvent, 2..) = (shape, workers) {
                    // Hot groups' records were aggregated at their senders.
                    prop_assert!(job.stats.get("hot_records") > 0);
                    prop_assert!(job.stats.get("hot_partials") > 0);
                }
                prop_assert!(job.stats.late_summary().is_empty());
            }
        }
    }

    /// Delay below the disorder: a record is left out of exactly the
    /// windows that closed at the watermark at it (Flink's rule), late only
    /// if all did; exact at 1, 2 and 3 workers for pre-aggregated windows
    /// and tumbling windows at the owner; the strict rule drops every
    /// record behind the watermark.
    #[test]
    fn flink_rule_is_exact_below_the_disorder(
        seed in any::<u64>(), d in 50u64..400, workers in 1usize..=3,
    ) {
        let evs = stream(seed, 300, d, 5);
        let delay = d / 3;
        for windows in kinds() {
            let (want, late) = reference(&evs, workers, delay, windows, false);
            let (got, job) = windowed(workers, &evs, delay, windows, Shape::PreAggregated);
            prop_assert_eq!(&got, &want, "{:?}", windows);
            prop_assert_eq!(job.stats.get("late_records"), late, "{:?}", windows);
            let (want, late) = reference(&evs, workers, delay, windows, true);
            let (got, job) = windowed(workers, &evs, delay, windows, Shape::Strict);
            prop_assert_eq!(&got, &want, "strict {:?}", windows);
            prop_assert_eq!(job.stats.get("late_records"), late);
        }
        let tumbling = Tumbling::ms(200);
        let (want, late) = reference(&evs, workers, delay, tumbling, false);
        let (got, job) = windowed(workers, &evs, delay, tumbling, Shape::EveryEvent);
        prop_assert_eq!(&got, &want);
        prop_assert_eq!(job.stats.get("late_records"), late);
    }

    /// Windowed joins: with delay >= disorder every pair of a batch join;
    /// below it (tumbling windows), exactly the pairs of the records the
    /// rule keeps.
    #[test]
    fn joins_follow_the_rule(seed in any::<u64>(), d in 0u64..300, workers in 1usize..=3) {
        let left = stream(seed, 150, d, 4);
        let right = stream(seed ^ 0x5eed, 150, d, 4);
        for (delay, windows) in [
            (d, Tumbling::ms(200)),
            (d, Sliding::ms(300, 100)),
            (d / 3, Tumbling::ms(200)),
        ] {
            let pairs = Arc::new(Mutex::new(Vec::new()));
            let (l, r, out) = (left.clone(), right.clone(), pairs.clone());
            let job = run_graph(&config(workers), move |df| {
                let (i, n) = (df.index(), df.workers());
                let a = df.source(VecSource::new(share(&l, i, n))).event_time(|e| e.1, delay);
                let b = df.source(VecSource::new(share(&r, i, n))).event_time(|e| e.1, delay);
                let out = out.clone();
                a.key_by(|e| e.0)
                    .join(b.key_by(|e| e.0))
                    .window(windows, |e| e.1, |e| e.1)
                    .for_each(move |j| out.lock().unwrap().push((j.start, j.left, j.right)));
            })
            .unwrap();
            let mut got = pairs.lock().unwrap().clone();
            got.sort();
            // Reference: each side's kept (record, window) pairs, joined.
            let kept = |evs: &[Ev]| {
                let mut v = Vec::new();
                for w in 0..workers {
                    let mine = share(evs, w, workers);
                    for (e, b) in mine.iter().zip(behind(&mine, delay)) {
                        windows.assign(e.1, |s| {
                            if b.is_none_or(|wm| s + windows.size() > wm) {
                                v.push((s, *e));
                            }
                        });
                    }
                }
                v
            };
            let (kl, kr) = (kept(&left), kept(&right));
            let mut want = Vec::new();
            for (s, a) in &kl {
                for (t, b) in &kr {
                    if s == t && a.0 == b.0 {
                        want.push((*s, *a, *b));
                    }
                }
            }
            want.sort();
            prop_assert_eq!(&got, &want, "delay {} {:?}", delay, windows);
            if delay >= d {
                prop_assert_eq!(job.stats.get("late_records"), 0);
            }
        }
    }

    /// Sessions with delay >= disorder: the batch sessions, nothing late.
    #[test]
    fn sessions_equal_batch_when_delay_covers_disorder(
        seed in any::<u64>(), d in 0u64..200, workers in 1usize..=3,
    ) {
        let evs = stream(seed, 200, d, 3);
        let gap = 60;
        let (got, job) = run(workers, &evs, move |df, mine, out| {
            df.source(VecSource::new(mine))
                .event_time(|e| e.1, d)
                .key_by(|e| e.0)
                .window(Sessions::with_gap(gap), |e| e.1)
                .aggregate((Count, Sum::of(|e: &Ev| e.2)))
                .for_each(move |r| {
                    out.lock().unwrap().insert((r.key, r.start), r.value);
                });
        });
        // Batch sessions: per key, sorted times split where the next is
        // `gap` or more after the previous.
        let mut by_key: BTreeMap<u32, Vec<(u64, i64)>> = BTreeMap::new();
        for e in &evs {
            by_key.entry(e.0).or_default().push((e.1, e.2));
        }
        let mut want = BTreeMap::new();
        for (k, mut v) in by_key {
            v.sort();
            let mut cur: Option<(u64, u64, u64, i64)> = None; // start, last, count, sum
            for (t, x) in v {
                cur = match cur {
                    Some((s, last, c, sum)) if t < last + gap => Some((s, t, c + 1, sum + x)),
                    Some((s, _, c, sum)) => {
                        want.insert((k, s), (c, sum));
                        Some((t, t, 1, x))
                    }
                    None => Some((t, t, 1, x)),
                };
            }
            if let Some((s, _, c, sum)) = cur {
                want.insert((k, s), (c, sum));
            }
        }
        prop_assert_eq!(&got, &want);
        prop_assert_eq!(job.stats.get("late_records"), 0);
    }
}

/// The late log names the window's line in this file, counts the records
/// late for every window, gives the first (smallest watermark) and the
/// disorder seen; the suggestion's delay keeps them all.
#[test]
fn late_log_names_operator_first_record_and_disorder() {
    // 1 000 moves the watermark to 1 000 (delay 0): 150 ([0, 200)) and 950
    // ([800, 1000)) are behind it and their windows closed: late; 1 100 is
    // on time.
    let evs: Vec<Ev> = vec![
        (1, 100, 1),
        (1, 1_000, 1),
        (1, 150, 1),
        (1, 950, 1),
        (1, 1_100, 1),
    ];
    let (rows, job) = windowed(1, &evs, 0, Tumbling::ms(200), Shape::PreAggregated);
    assert_eq!(job.stats.get("late_records"), 2);
    let (label, e) = job.stats.late.entries.iter().next().unwrap();
    assert!(
        label.starts_with("window at operators/tests/lateness.rs:"),
        "{label}"
    );
    assert_eq!(
        (e.records, e.first_time_ms, e.first_watermark_ms),
        (2, 150, 1_000)
    );
    assert_eq!(
        job.stats.get_max(air_runtime::dataflow::DISORDER_MAX),
        Some(850)
    );
    let lines = job.stats.late_summary();
    assert!(
        lines[0].starts_with("2 late record(s) at the window at"),
        "{lines:?}"
    );
    assert!(lines[1].contains("850 ms"), "{lines:?}");
    assert_eq!(rows.len(), 2); // [0, 200) with 100, [1000, 1200) with 1 000 and 1 100
                               // With the suggested delay nothing is late.
    let (_, job) = windowed(1, &evs, 850, Tumbling::ms(200), Shape::PreAggregated);
    assert_eq!(job.stats.get("late_records"), 0);
}

/// Late records sent to a side stream are counted and named as such, and
/// are not "dropped" (what `fail_on_late` counts).
#[test]
fn side_output_late_records_are_named_but_not_dropped() {
    let evs: Vec<Ev> = vec![(1, 100, 1), (1, 1_000, 1), (1, 150, 1), (1, 1_100, 1)];
    let side = Arc::new(Mutex::new(Vec::new()));
    let out = side.clone();
    let job = run_graph(&config(1), move |df| {
        let (w, late) = df
            .source(VecSource::new(evs.clone()))
            .event_time(|e| e.1, 0)
            .key_by(|e| e.0)
            .window(Tumbling::ms(200), |e| e.1)
            .side_output_late();
        w.aggregate(Count).for_each(|_| {});
        let out = out.clone();
        late.for_each(move |l| out.lock().unwrap().push(l.time));
    })
    .unwrap();
    assert_eq!(*side.lock().unwrap(), [150]);
    assert_eq!(job.stats.get("late_records"), 1);
    assert_eq!((job.stats.late.total(), job.stats.late.dropped()), (1, 0));
    let lines = job.stats.late_summary();
    assert!(
        lines[0].contains(", sent to its side output (first: event time 150 ms"),
        "{lines:?}"
    );
}

/// A session gap so large that the session's end saturates at `u64::MAX`
/// still fires at the end of the input (it has no timer).
#[test]
fn a_session_ending_at_u64_max_fires_at_the_end() {
    let rows = Arc::new(Mutex::new(Vec::new()));
    let out = rows.clone();
    let job = run_graph(&config(2), move |df| {
        let out = out.clone();
        let evs: Vec<Ev> = if df.index() == 0 {
            vec![(1, 100, 1), (1, 200, 1)]
        } else {
            vec![]
        };
        df.source(VecSource::new(evs))
            .event_time(|e| e.1, 0)
            .key_by(|e| e.0)
            .window(Sessions::with_gap(u64::MAX - 100), |e| e.1)
            .aggregate(Count)
            .for_each(move |r| out.lock().unwrap().push((r.start, r.end, r.value)));
    })
    .unwrap();
    assert_eq!(*rows.lock().unwrap(), [(100, u64::MAX, 2)]);
    assert_eq!(job.stats.get("unfired_windows"), 0);
}
