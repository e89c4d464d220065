//! What users get out of a window: ranked top-N rows (`Ranked`), `Min` and
//! `Max` as values (`of`) or options (`or_none`), and floats in the CSV
//! and JSON-lines sinks (shortest round-trip text, or `float_precision`).

use air_operators::graph::*;
use air_runtime::dataflow::{run_graph, VecSource};
use air_runtime::JobConfig;
use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn config(workers: usize) -> JobConfig {
    JobConfig {
        workers,
        pin: false,
        batch_records: 4,
        flush: Duration::ZERO,
        ..JobConfig::default()
    }
}

/// (user, time ms): per 1-s window, users with click counts full of ties.
/// Window `w` (0..6): user `u` (0..12) clicks `1 + (u * 7 + w) % 4` times.
fn clicks() -> Vec<(u64, u64)> {
    let mut v = Vec::new();
    for w in 0..6u64 {
        for u in 0..12u64 {
            for i in 0..1 + (u * 7 + w) % 4 {
                v.push((u, w * 1_000 + (u * 37 + i * 101) % 1_000));
            }
        }
    }
    v.sort_by_key(|c| c.1);
    v
}

/// Per window: (user, count), sorted by count descending, then user.
fn counts(clicks: &[(u64, u64)]) -> BTreeMap<u64, Vec<(u64, u64)>> {
    let mut m: BTreeMap<u64, BTreeMap<u64, u64>> = BTreeMap::new();
    for &(u, t) in clicks {
        *m.entry(t / 1_000 * 1_000)
            .or_default()
            .entry(u)
            .or_default() += 1;
    }
    m.into_iter()
        .map(|(w, users)| {
            let mut v: Vec<(u64, u64)> = users.into_iter().collect();
            v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            (w, v)
        })
        .collect()
}

/// The ranked top `n` of every window as (window, rank, user, count), in
/// the order the sink got them (one writer: `collect`).
fn ranked_top(
    workers: usize,
    n: usize,
    tie_breaker: bool,
    clicks: &Arc<Vec<(u64, u64)>>,
) -> Vec<(u64, u32, u64, u64)> {
    let got = Arc::new(Mutex::new(Vec::new()));
    let (out, clicks) = (got.clone(), clicks.clone());
    run_graph(&config(workers), move |df| {
        let out = out.clone();
        let mine: Vec<(u64, u64)> = clicks
            .iter()
            .skip(df.index())
            .step_by(df.workers())
            .copied()
            .collect();
        let counted = df
            .source(VecSource::new(mine))
            .event_time(|c| c.1, 0)
            .key_by(|c| c.0)
            .window(Tumbling::ms(1_000), |c| c.1)
            .aggregate(Count)
            .key_by(|r| r.start);
        // The ranked rows cross an edge (`collect`) as records.
        let sink = move |r: Ranked<Windowed<u64, u64>>| {
            out.lock().unwrap().push((r.start, r.rank, r.key, r.value))
        };
        if tie_breaker {
            counted
                .top_n(n, |r| (r.value, Reverse(r.key)))
                .collect()
                .for_each(sink);
        } else {
            counted.top_n(n, |r| r.value).collect().for_each(sink);
        }
    })
    .unwrap_or_else(|e| panic!("{workers} workers: {e}"));
    let mut rows = got.lock().unwrap().clone();
    // Windows may reach the writer in any order; a window's rows keep theirs.
    rows.sort_by_key(|r| r.0);
    rows
}

#[test]
fn top_n_ranks_rows_1_to_n_and_with_a_tie_breaker_equal_a_sequential_top_n() {
    let clicks = Arc::new(clicks());
    for n in [1, 3, 12, 20] {
        let want: Vec<(u64, u32, u64, u64)> = counts(&clicks)
            .into_iter()
            .flat_map(|(w, v)| {
                (1..)
                    .zip(v.into_iter().take(n))
                    .map(move |(rank, (u, c))| (w, rank, u, c))
            })
            .collect();
        // Ties exist, so the tie-breaker is what makes the rows unique.
        assert!(counts(&clicks).values().all(|v| v[0].1 == v[1].1));
        for workers in [1, 2, 4] {
            let got = ranked_top(workers, n, true, &clicks);
            assert_eq!(got, want, "top {n}, {workers} workers");
        }
    }
}

#[test]
fn top_n_ties_without_a_tie_breaker_take_consecutive_ranks_with_the_sequential_scores() {
    let clicks = Arc::new(clicks());
    let counts = counts(&clicks);
    for workers in [1, 2, 3, 4] {
        let got = ranked_top(workers, 3, false, &clicks);
        let mut by_window: BTreeMap<u64, Vec<(u32, u64, u64)>> = BTreeMap::new();
        for (w, rank, u, c) in got {
            by_window.entry(w).or_default().push((rank, u, c));
        }
        assert_eq!(by_window.len(), counts.len(), "{workers} workers");
        for (w, rows) in by_window {
            let all = &counts[&w];
            let ranks: Vec<u32> = rows.iter().map(|r| r.0).collect();
            assert_eq!(ranks, [1, 2, 3], "window {w}, {workers} workers");
            // The score at each rank is the sequential one; the user holding
            // it is one of the users with that score.
            for (i, &(_, u, c)) in rows.iter().enumerate() {
                assert_eq!(c, all[i].1, "window {w}, rank {}", i + 1);
                assert!(all.contains(&(u, c)), "window {w}: user {u} with {c}");
            }
            let mut users: Vec<u64> = rows.iter().map(|r| r.1).collect();
            users.sort();
            users.dedup();
            assert_eq!(users.len(), 3, "window {w}: a user twice");
        }
    }
}

#[test]
fn ranked_rows_read_as_their_row_and_serialize_with_their_rank() {
    let mut r = Ranked {
        rank: 2,
        row: Windowed {
            start: 1_000,
            end: 2_000,
            key: "u7".to_string(),
            value: 4u64,
        },
    };
    assert_eq!(
        (r.start, r.end, r.value, r.key.as_str()),
        (1_000, 2_000, 4, "u7")
    );
    r.value += 1; // DerefMut
    assert_eq!(r.row.value, 5);
    assert_eq!(r.window_end(), 2_000);
    assert_eq!(
        serde_json::to_string(&r).unwrap(),
        r#"{"rank":2,"row":{"start":1000,"end":2000,"key":"u7","value":5}}"#
    );
    assert_eq!(r.into_row().key, "u7");
}

/// (url, latency ms, time ms)
type Visit = (u32, f64, u64);
/// (max, min, and of no record: `Max::or_none`, `Max::of`)
type Extremes = (f64, f64, Option<f64>, f64);

#[test]
fn max_and_min_of_a_window_are_values_and_or_none_tells_an_empty_filter() {
    // Latencies with NaN among them: NaN never wins, in any split.
    let visits: Vec<Visit> = (0..60u32)
        .map(|i| {
            let lat = if i % 11 == 3 {
                f64::NAN
            } else {
                (i * 37 % 50) as f64 / 4.0
            };
            (i % 3, lat, (i as u64 * 53) % 2_000)
        })
        .collect();
    let mut want: BTreeMap<(u64, u32), Extremes> = BTreeMap::new();
    for &(u, l, t) in &visits {
        let e = want.entry((t / 1_000 * 1_000, u)).or_insert((
            f64::NEG_INFINITY,
            f64::INFINITY,
            None,
            f64::NEG_INFINITY,
        ));
        if !l.is_nan() {
            e.0 = e.0.max(l);
            e.1 = e.1.min(l);
        }
    }
    let visits = Arc::new(visits);
    for workers in [1, 2, 4] {
        type Row = Windowed<u32, Extremes>;
        let got: Arc<Mutex<Vec<Row>>> = Arc::new(Mutex::new(Vec::new()));
        let (out, vs) = (got.clone(), visits.clone());
        run_graph(&config(workers), move |df| {
            let out = out.clone();
            let mine: Vec<Visit> = vs
                .iter()
                .skip(df.index())
                .step_by(df.workers())
                .copied()
                .collect();
            let never = |v: &Visit| v.1 > 1e9;
            df.source(VecSource::new(mine))
                .key_by(|v| v.0)
                .window(Tumbling::ms(1_000), |v| v.2)
                .aggregate((
                    Max::of(|v: &Visit| v.1),
                    Min::of(|v: &Visit| v.1),
                    Filtered::new(never, Max::or_none(|v: &Visit| v.1)),
                    Filtered::new(never, Max::of(|v: &Visit| v.1)),
                ))
                .for_each(move |r| out.lock().unwrap().push(r));
        })
        .unwrap_or_else(|e| panic!("{workers} workers: {e}"));
        let got: BTreeMap<(u64, u32), _> = got
            .lock()
            .unwrap()
            .iter()
            .map(|r| ((r.start, r.key), r.value))
            .collect();
        assert_eq!(got, want, "{workers} workers");
    }
    // or_none over records: NaN first is not kept; merges keep the best.
    let agg = (Max::or_none(|x: &f64| *x), Min::or_none(|x: &f64| *x));
    let mut a = agg.create();
    assert_eq!(agg.result(&a), (None, None));
    agg.add(&mut a, &f64::NAN);
    assert_eq!(agg.result(&a), (None, None));
    agg.add(&mut a, &2.0);
    let mut b = agg.create();
    agg.add(&mut b, &-1.5);
    agg.add(&mut b, &7.0);
    agg.merge(&mut a, b);
    agg.merge(&mut a, agg.create());
    assert_eq!(agg.result(&a), (Some(7.0), Some(-1.5)));
    // Integers: the identity of `of` is the type's smallest/largest value.
    let ints = (Max::of(|x: &i64| *x), Min::of(|x: &u32| *x));
    let (m, n) = (ints.0.create(), ints.1.create());
    assert_eq!((ints.0.result(&m), ints.1.result(&n)), (i64::MIN, u32::MAX));
}

/// Runs one worker writing `rows` through the sink `make(path)` and returns
/// the file's text.
fn written<T, S>(rows: Vec<T>, make: fn(std::path::PathBuf) -> S) -> String
where
    T: air_runtime::Record + Send + Sync + Clone + 'static,
    S: air_runtime::dataflow::Sink<T> + 'static,
{
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out");
    let p = path.clone();
    run_graph(&config(1), move |df| {
        df.source(VecSource::new(rows.clone()))
            .sink(make(p.clone()));
    })
    .unwrap();
    std::fs::read_to_string(&path).unwrap()
}

#[test]
fn sinks_write_shortest_round_trip_floats_or_a_fixed_precision() {
    let rows = || {
        vec![
            ("/a".to_string(), 0.1 + 0.2, 2.0f32, Some(1.0 / 3.0)),
            ("/b,c".to_string(), -0.0004, 1e10, None),
            ("/d".to_string(), f64::NAN, f32::INFINITY, Some(12.5)),
        ]
    };
    // Shortest text that parses back to the same float.
    let csv = written(rows(), Csv::to_path);
    assert_eq!(
        csv,
        "/a,0.30000000000000004,2.0,0.3333333333333333\n\"/b,c\",-0.0004,10000000000.0,\n/d,NaN,inf,12.5\n"
    );
    for (line, row) in csv.lines().zip(rows()) {
        let f: Vec<&str> = line.rsplitn(4, ',').collect();
        let mean: f64 = f[2].parse().unwrap();
        assert!(mean == row.1 || mean.is_nan() && row.1.is_nan(), "{line}");
    }
    let csv6 = written(rows(), |p| Csv::to_path(p).float_precision(6));
    assert_eq!(
        csv6,
        "/a,0.300000,2.000000,0.333333\n\"/b,c\",-0.000400,10000000000.000000,\n/d,NaN,inf,12.500000\n"
    );
    let csv0 = written(rows(), |p| Csv::to_path(p).float_precision(0));
    assert!(csv0.starts_with("/a,0,2,0\n"), "{csv0}");

    let json = written(rows(), JsonLines::to_path);
    assert_eq!(
        json,
        "[\"/a\",0.30000000000000004,2.0,0.3333333333333333]\n\
         [\"/b,c\",-0.0004,10000000000.0,null]\n\
         [\"/d\",null,null,12.5]\n"
    );
    let json2 = written(rows(), |p| JsonLines::to_path(p).float_precision(2));
    assert_eq!(
        json2,
        "[\"/a\",0.30,2.00,0.33]\n\
         [\"/b,c\",-0.00,10000000000.00,null]\n\
         [\"/d\",null,null,12.50]\n"
    );
    // Every line is still JSON, its floats numbers.
    for line in json2.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(v[0].is_string(), "{line}");
    }
}
