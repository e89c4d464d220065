//! Windowed aggregation jobs on 1, 2 and 4 workers equal a sequential
//! computation: tumbling and sliding windows, every aggregate, with and
//! without pre-aggregation, events on window edges and disorder within the delay.

use air_operators::stream::{
    run_window_job, run_window_job_every_event, Pipe, Source, Stream, VecSource, WindowJobOutput,
    WindowOptions, WindowedUpstream,
};
use air_operators::window::{Aggregate, WindowSpec};
use air_runtime::{JobConfig, WorkerInfo};
use std::collections::BTreeMap;

type Rec = (u64, u64, i64); // (key, time, value)
/// (count, sum, min, max, reduce) per (window start, key).
type Table = BTreeMap<(u64, u64), (u64, i64, i64, i64, i64)>;

fn records() -> Vec<Rec> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut t = 0u64;
    (0..30_000)
        .map(|i| {
            t += next() % 5;
            let time = match i % 500 {
                0 => t - t % 1_000,                   // on a tumbling edge
                1 => (t - t % 200).saturating_sub(1), // just before a slide edge
                _ => t.saturating_sub(next() % 300),  // disorder within the 1.5 s delay
            };
            let key = if i % 50 == 0 {
                1 << 40 | (next() % 3)
            } else {
                next() % 37
            };
            (key, time, (next() % 2001) as i64 - 1000)
        })
        .collect()
}

/// Sequential reference: per (window start, key) count, sum, min, max, reduce.
fn sequential(recs: &[Rec], spec: WindowSpec) -> Table {
    let mut m: Table = BTreeMap::new();
    for &(k, t, v) in recs {
        let mut starts = vec![];
        spec.assign(t, |s| starts.push(s));
        // Independent check of the assignment itself.
        let size = spec.size();
        for &s in &starts {
            assert!(s <= t && t < s + size);
        }
        for s in starts {
            let e = m.entry((s, k)).or_insert((0, 0, i64::MAX, i64::MIN, 0));
            e.0 += 1;
            e.1 += v;
            e.2 = e.2.min(v);
            e.3 = e.3.max(v);
            e.4 ^= v.rotate_left(7);
        }
    }
    m
}

/// Worker `w`'s shard: every `workers`-th block of 1000 records, in order
/// within a block.
fn shard(recs: &[Rec], w: &air_runtime::WorkerInfo) -> Vec<Rec> {
    recs.chunks(1000)
        .enumerate()
        .filter(|(i, _)| i % w.workers == w.index)
        .flat_map(|(_, c)| c.iter().copied())
        .collect()
}

/// A user reduce (associative and commutative): XOR. The job folds values
/// rotated by the `map` stage, so it also checks that `map` ran.
fn xor_rot(a: i64, b: i64) -> i64 {
    a ^ b
}

/// The job pre-aggregated (`pre`) or with every event exchanged.
fn run<S, P, K, TF, VF, B>(
    pre: bool,
    cfg: &JobConfig,
    spec: WindowSpec,
    agg: Aggregate,
    build: B,
) -> WindowJobOutput<S, P>
where
    S: Source,
    P: Pipe<S::Item>,
    K: Fn(&P::Out) -> u64 + Send,
    TF: Fn(&P::Out) -> u64 + Send,
    VF: Fn(&P::Out) -> i64 + Send,
    B: Fn(&WorkerInfo) -> WindowedUpstream<S, P, K, TF, VF> + Sync,
{
    if pre {
        run_window_job(cfg, spec, agg, build).unwrap()
    } else {
        run_window_job_every_event(cfg, spec, agg, build).unwrap()
    }
}

#[test]
fn window_jobs_equal_sequential() {
    let recs = records();
    for spec in [
        WindowSpec::tumbling(1_000),
        WindowSpec::sliding(1_000, 200),
        WindowSpec::sliding(700, 300),
    ] {
        let want = sequential(&recs, spec);
        for workers in [1usize, 2, 4] {
            for pre in [true, false] {
                let cfg = JobConfig {
                    workers,
                    pin: false,
                    ring_bytes: 1 << 14,
                    batch_records: 64,
                    ..JobConfig::default()
                };
                let opts = WindowOptions {
                    max_delay_ms: 1_500,
                    source_batch: 100,
                };
                let out = run(pre, &cfg, spec, Aggregate::Reduce(xor_rot), |w| {
                    Stream::source(VecSource::new(shard(&recs, w)))
                        .map(|(k, t, v): Rec| (k, t, v.rotate_left(7)))
                        .filter(|_| true)
                        .flat_map(Some)
                        .key_by(|r: &Rec| r.0)
                        .window(|r| r.1, |r| r.2, opts)
                });
                let late: u64 = out.upstream.iter().map(|u| u.late_records).sum();
                assert_eq!(late, 0, "{spec:?} {workers} workers");
                assert_eq!(out.late_partials, 0);
                let got: Table = out
                    .results
                    .iter()
                    .map(|r| {
                        let s = r.state;
                        (
                            (r.window_start, r.key),
                            (s.count, s.sum, s.min, s.max, s.reduced),
                        )
                    })
                    .collect();
                assert_eq!(
                    got.len(),
                    want.len(),
                    "{spec:?} {workers} workers pre={pre}: rows"
                );
                for (k, w) in &want {
                    let g = got[k];
                    assert_eq!(g.0, w.0, "count {k:?}");
                    assert_eq!(g.4, w.4, "reduce {k:?}");
                }
                // Sum/min/max over the original values: rerun with identity map.
                let direct = run(pre, &cfg, spec, Aggregate::Sum, |w| {
                    Stream::source(VecSource::new(shard(&recs, w)))
                        .key_by(|r: &Rec| r.0)
                        .window(|r| r.1, |r| r.2, opts)
                });
                for r in &direct.results {
                    let w = want[&(r.window_start, r.key)];
                    assert_eq!(
                        (r.state.count, r.state.sum, r.state.min, r.state.max),
                        (w.0, w.1, w.2, w.3)
                    );
                    let mean = r.state.value(Aggregate::Mean);
                    assert!((mean - w.1 as f64 / w.0 as f64).abs() < 1e-9);
                }
                assert_eq!(direct.results.len(), want.len());
                // Count keeps only count and the newest event time.
                let counted = run(pre, &cfg, spec, Aggregate::Count, |w| {
                    Stream::source(VecSource::new(shard(&recs, w)))
                        .key_by(|r: &Rec| r.0)
                        .window(|r| r.1, |r| r.2, opts)
                });
                let got: BTreeMap<(u64, u64), u64> = counted
                    .results
                    .iter()
                    .map(|r| ((r.window_start, r.key), r.state.count))
                    .collect();
                let want_counts: BTreeMap<(u64, u64), u64> =
                    want.iter().map(|(k, w)| (*k, w.0)).collect();
                assert_eq!(
                    got, want_counts,
                    "{spec:?} {workers} workers pre={pre}: count"
                );
                for r in &counted.results {
                    let newest = recs
                        .iter()
                        .filter(|&&(k, t, _)| {
                            k == r.key && r.window_start <= t && t < r.window_start + spec.size()
                        })
                        .map(|r| r.1)
                        .max();
                    assert_eq!(Some(r.state.max_event_time), newest, "newest event time");
                }
            }
        }
    }
}

#[test]
fn late_records_are_counted_not_aggregated() {
    let recs: Vec<Rec> = vec![
        (1, 100, 1),
        (1, 5_000, 1),
        (1, 3_999, 1),
        (1, 4_000, 1),
        (1, 4_500, 1),
    ];
    let cfg = JobConfig {
        workers: 2,
        pin: false,
        ..JobConfig::default()
    };
    let out = run_window_job(&cfg, WindowSpec::tumbling(1_000), Aggregate::Count, |w| {
        let mine = if w.index == 0 { recs.clone() } else { vec![] };
        Stream::source(VecSource::new(mine))
            .key_by(|r: &Rec| r.0)
            .window(
                |r| r.1,
                |r| r.2,
                WindowOptions {
                    max_delay_ms: 1_000,
                    ..WindowOptions::default()
                },
            )
    })
    .unwrap();
    assert_eq!(
        out.upstream.iter().map(|u| u.late_records).sum::<u64>(),
        1,
        "3 999 < 5 000 − 1 000"
    );
    let rows: Vec<(u64, u64)> = out
        .results
        .iter()
        .map(|r| (r.window_start, r.state.count))
        .collect();
    assert_eq!(rows, vec![(0, 1), (4_000, 2), (5_000, 1)]);
}
