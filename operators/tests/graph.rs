//! The graph API (`air_runtime::dataflow::run_graph` with the operators of
//! `air_operators::graph`) in one process, against sequential references
//! computed here: a three-stage graph with Zipf-skewed keys through 4 KiB
//! rings (every edge backpressured), sliding windows (pre-aggregated and
//! every event), interval and sliding-window joins (pairs at the window's
//! end and eager), String keys with a
//! tuple aggregate, and graphs refused before any worker starts.

use air_operators::graph::*;
use air_runtime::dataflow::{run_graph, Dataflow, GraphOutput, Source, SourcePoll, VecSource};
use air_runtime::{JobConfig, RuntimeError};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Longest one graph may run before the test calls it a hang.
const LIMIT: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------
// Inputs

/// splitmix64: a small seeded PRNG.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Zipf-distributed ranks `0..n` (rank 0 the most frequent), exponent `s`.
struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    fn new(n: usize, s: f64) -> Self {
        let mut acc = 0.0;
        let mut cdf: Vec<f64> = (1..=n)
            .map(|k| {
                acc += 1.0 / (k as f64).powf(s);
                acc
            })
            .collect();
        for c in &mut cdf {
            *c /= acc;
        }
        Zipf { cdf }
    }

    fn sample(&self, rng: &mut Rng) -> u64 {
        let u = (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1) as u64
    }
}

/// `n` event times growing by `0..step` ms each; one in five lags the
/// newest so far by up to `max_lag` ms (keep it below the graph's delay:
/// no event is late).
fn times(rng: &mut Rng, n: usize, step: u64, max_lag: u64) -> Vec<u64> {
    let mut t = 0u64;
    (0..n)
        .map(|_| {
            t += rng.below(step);
            if rng.below(5) == 0 {
                t.saturating_sub(rng.below(max_lag))
            } else {
                t
            }
        })
        .collect()
}

/// Worker `w` of `n`'s share: every `n`-th item from `w` (order kept).
fn shard<T: Clone>(items: &[T], w: usize, n: usize) -> Vec<T> {
    items.iter().skip(w).step_by(n).cloned().collect()
}

/// (key, time ms, value)
type Ev = (u64, u64, i64);

fn events(seed: u64, n: usize, keys: Zipf, step: u64, max_lag: u64) -> Vec<Ev> {
    let mut rng = Rng(seed);
    times(&mut rng, n, step, max_lag)
        .into_iter()
        .map(|t| {
            let k = keys.sample(&mut rng);
            // Keys far apart (not 0, 1, 2 …); values of both signs.
            (
                k.wrapping_mul(0x9e37_79b9) ^ 0x55,
                t,
                rng.below(2001) as i64 - 1000,
            )
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Running graphs

/// `workers` unpinned workers, rings of `ring_bytes`, sources polled and
/// batches staged `batch_records` at a time, and watermarks sent at every
/// turn of a worker's loop (so windows fire while data still flows, not
/// only at the end of these short inputs).
fn config(workers: usize, ring_bytes: usize, batch_records: usize) -> JobConfig {
    JobConfig {
        workers,
        pin: false,
        ring_bytes,
        batch_records,
        flush: Duration::ZERO,
        ..JobConfig::default()
    }
}

/// Runs the graph on another thread; fails the test if it has not returned
/// within `LIMIT` (a hang).
fn run_limited<B>(cfg: JobConfig, build: B) -> Result<GraphOutput, RuntimeError>
where
    B: Fn(&Dataflow) + Sync + Send + 'static,
{
    let (tx, rx) = std::sync::mpsc::channel();
    let what = format!("{} workers, {} ring bytes", cfg.workers, cfg.ring_bytes);
    std::thread::spawn(move || {
        let _ = tx.send(run_graph(&cfg, build));
    });
    match rx.recv_timeout(LIMIT) {
        Ok(r) => r,
        Err(_) => panic!("the graph ({what}) did not end within {LIMIT:?}"),
    }
}

/// A vector shared with every worker's `for_each`.
fn rows<T>() -> Arc<Mutex<Vec<T>>> {
    Arc::new(Mutex::new(Vec::new()))
}

fn take<T: Clone>(v: &Arc<Mutex<Vec<T>>>) -> Vec<T> {
    v.lock().unwrap().clone()
}

/// Windows holding event time `t`: starts `s` (multiples of `slide`) with
/// `s <= t < s + size`, found by walking back from `t` (independent of
/// `Windows::assign`).
fn starts(t: u64, size: u64, slide: u64) -> Vec<u64> {
    let mut v = Vec::new();
    let mut s = t - t % slide;
    loop {
        if s + size > t {
            v.push(s);
        } else {
            break;
        }
        if s < slide {
            break;
        }
        s -= slide;
    }
    v.reverse();
    v
}

// ---------------------------------------------------------------------------
// (a) Three stages, Zipf keys, 4 KiB rings

/// Sum per (1-s window, key), sequentially.
fn sums(evs: &[Ev]) -> BTreeMap<(u64, u64), i64> {
    let mut m = BTreeMap::new();
    for &(k, t, v) in evs {
        *m.entry((t / 1_000 * 1_000, k)).or_insert(0) += v;
    }
    m
}

#[test]
fn three_stages_with_skewed_keys_through_4k_rings_equal_a_sequential_top_n() {
    let evs = Arc::new(events(0xa11ce, 60_000, Zipf::new(3_000, 1.0), 2, 400));
    // Per window, best first: the 5 keys with the largest sum (ties: the
    // smaller key first).
    let mut per_window: BTreeMap<u64, Vec<(i64, u64)>> = BTreeMap::new();
    for ((w, k), s) in sums(&evs) {
        per_window.entry(w).or_default().push((s, k));
    }
    let want: Vec<(u64, u64, u64, i64)> = per_window
        .into_iter()
        .flat_map(|(w, mut v)| {
            v.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            v.into_iter()
                .take(5)
                .map(move |(s, k)| (w, w + 1_000, k, s))
        })
        .collect();
    assert!(want.len() >= 5 * 25, "{} reference rows", want.len());

    // Pre-aggregated (partials cross the first edge), then every record
    // exchanged (the first edge carries all 60k).
    for (workers, every_event) in [
        (1, false),
        (2, false),
        (3, false),
        (4, false),
        (1, true),
        (4, true),
    ] {
        let got = rows::<Ranked<Windowed<u64, i64>>>();
        // Source records read so far (all workers), and that count when
        // the first row reached the sink.
        let read = Arc::new(AtomicUsize::new(0));
        let read_at_first_row = Arc::new(AtomicUsize::new(usize::MAX));
        let (out, evs2) = (got.clone(), evs.clone());
        let (r1, r2) = (read.clone(), read_at_first_row.clone());
        let o = run_limited(config(workers, 4096, 16), move |df| {
            let out = out.clone();
            let (read, first) = (r1.clone(), r2.clone());
            let read_now = read.clone();
            let w = df
                .source(VecSource::new(shard(&evs2, df.index(), df.workers())))
                .event_time(|e| e.1, 500)
                .inspect(move |_| {
                    read.fetch_add(1, Ordering::Relaxed);
                })
                .key_by(|e| e.0)
                .window(Tumbling::ms(1_000), |e| e.1);
            let sink = move |r| {
                let _ = first.compare_exchange(
                    usize::MAX,
                    read_now.load(Ordering::Relaxed),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
                out.lock().unwrap().push(r)
            };
            let score = |r: &Windowed<u64, i64>| (r.value, Reverse(r.key));
            if every_event {
                w.aggregate_every_event(Sum::of(|e: &Ev| e.2))
                    .key_by(|r| r.start)
                    .top_n(5, score)
                    .collect()
                    .for_each(sink);
            } else {
                w.aggregate(Sum::of(|e: &Ev| e.2))
                    .key_by(|r| r.start)
                    .top_n(5, score)
                    .collect()
                    .for_each(sink);
            }
        })
        .unwrap_or_else(|e| panic!("{workers} workers: {e}"));
        let mut got = take(&got);
        // Windows in any order, each window's rows best first.
        got.sort_by_key(|r| r.start);
        // Each window's rows ranked 1, 2, … in the order they left.
        for (i, r) in got.iter().enumerate() {
            let first = i == 0 || got[i - 1].start != r.start;
            let want_rank = if first { 1 } else { got[i - 1].rank + 1 };
            assert_eq!(r.rank, want_rank, "{workers} workers: {r:?}");
        }
        let got: Vec<(u64, u64, u64, i64)> = got
            .into_iter()
            .map(|r| (r.start, r.end, r.key, r.value))
            .collect();
        assert_eq!(got, want, "{workers} workers, every_event {every_event}");
        // Every event: records and the hot keys' partials on two edges.
        let edges = if every_event { 4 } else { 3 };
        assert_eq!(o.edges.len(), edges, "{:?}", o.edges);
        assert_eq!(o.stats.get("source_records"), evs.len() as u64);
        assert_eq!(o.stats.get("late_records"), 0, "{workers} workers");
        assert_eq!(o.stats.get("late_partials"), 0, "{workers} workers");
        assert_eq!(o.stats.get("unfired_windows"), 0, "{workers} workers");
        // One worker: its records and partials leave a batch at a time
        // (a flush every loop) into its own rings, which it drains between
        // batches, and the top-n edge carries only the 5 best rows of
        // each window (`LocalTop`), so no ring need fill.
        if workers > 1 {
            assert!(
                o.channels.ring_full_waits > 0,
                "{workers} workers: no send ever found a 4 KiB ring full: {:?}",
                o.channels
            );
        }
        // Rows leave as windows close, not at the end of the input.
        let first = read_at_first_row.load(Ordering::Relaxed);
        assert!(
            first < evs.len() / 2,
            "{workers} workers: the first row came after {first} of {} records",
            evs.len()
        );
    }
}

#[test]
fn an_aggregate_of_an_aggregate_through_4k_rings_equals_a_sequential_one() {
    let evs = Arc::new(events(0xb0b, 40_000, Zipf::new(2_000, 1.1), 2, 400));
    // Per window: (keys, total, largest key sum).
    let mut want: BTreeMap<u64, (u64, i64, i64)> = BTreeMap::new();
    for ((w, _), s) in sums(&evs) {
        let e = want.entry(w).or_insert((0, 0, i64::MIN));
        e.0 += 1;
        e.1 += s;
        e.2 = e.2.max(s);
    }
    for workers in [1, 2, 3, 4] {
        let got = rows::<(u64, (u64, i64, i64))>();
        let (out, evs2) = (got.clone(), evs.clone());
        let o = run_limited(config(workers, 4096, 8), move |df| {
            let out = out.clone();
            type Row = Windowed<u64, i64>;
            df.source(VecSource::new(shard(&evs2, df.index(), df.workers())))
                .event_time(|e| e.1, 500)
                .key_by(|e| e.0)
                .window(Tumbling::ms(1_000), |e| e.1)
                .aggregate(Sum::of(|e: &Ev| e.2))
                .key_by(|r| r.start)
                .window(Tumbling::ms(1_000), |r| r.start)
                .aggregate((
                    Count,
                    Sum::of(|r: &Row| r.value),
                    Max::of(|r: &Row| r.value),
                ))
                .map(|r| (r.start, r.value))
                .collect()
                .for_each(move |r| out.lock().unwrap().push(r));
        })
        .unwrap_or_else(|e| panic!("{workers} workers: {e}"));
        let got: BTreeMap<u64, (u64, i64, i64)> = take(&got).into_iter().collect();
        assert_eq!(got, want, "{workers} workers");
        assert_eq!(o.stats.get("late_records"), 0, "{workers} workers");
        assert_eq!(o.stats.get("late_partials"), 0, "{workers} workers");
        assert!(
            o.channels.ring_full_waits > 0,
            "{workers} workers: {:?}",
            o.channels
        );
    }
}

#[test]
fn graphs_over_empty_and_tiny_inputs_end_with_their_rows() {
    // More workers than events: most shards are empty and end at once.
    for n in [0usize, 1, 2, 5] {
        let evs: Vec<Ev> = (0..n as u64).map(|i| (i % 2, i * 700, 1)).collect();
        let mut want: BTreeMap<(u64, u64), u64> = BTreeMap::new();
        for &(k, t, _) in &evs {
            *want.entry((t / 1_000 * 1_000, k)).or_default() += 1;
        }
        for workers in [1, 4] {
            let got = rows::<(u64, u64, u64)>();
            let (out, evs2) = (got.clone(), Arc::new(evs.clone()));
            run_limited(config(workers, 4096, 16), move |df| {
                let out = out.clone();
                df.source(VecSource::new(shard(&evs2, df.index(), df.workers())))
                    .event_time(|e| e.1, 0)
                    .key_by(|e| e.0)
                    .window(Tumbling::ms(1_000), |e| e.1)
                    .aggregate(Count)
                    .key_by(|r| r.start)
                    .top_n(10, |r| r.value)
                    .map(|r| (r.start, r.key, r.value))
                    .collect()
                    .for_each(move |r| out.lock().unwrap().push(r));
            })
            .unwrap_or_else(|e| panic!("{n} events, {workers} workers: {e}"));
            let got: BTreeMap<(u64, u64), u64> = take(&got)
                .into_iter()
                .map(|(w, k, c)| ((w, k), c))
                .collect();
            assert_eq!(got, want, "{n} events, {workers} workers");
        }
    }
}

// ---------------------------------------------------------------------------
// (b) Sliding windows

type Agg4 = (u64, i64, i64, i64);

/// (count, sum, min, max) per (window start, key).
fn sliding_reference(evs: &[Ev], size: u64, slide: u64) -> BTreeMap<(u64, u64), Agg4> {
    let mut m: BTreeMap<(u64, u64), Agg4> = BTreeMap::new();
    for &(k, t, v) in evs {
        for s in starts(t, size, slide) {
            let e = m.entry((s, k)).or_insert((0, 0, i64::MAX, i64::MIN));
            e.0 += 1;
            e.1 += v;
            e.2 = e.2.min(v);
            e.3 = e.3.max(v);
        }
    }
    m
}

fn sliding_run(
    evs: &Arc<Vec<Ev>>,
    windows: Windows,
    workers: usize,
    every_event: bool,
) -> BTreeMap<(u64, u64), Agg4> {
    let got = rows::<Windowed<u64, Agg4>>();
    let (out, evs2) = (got.clone(), evs.clone());
    let o = run_limited(config(workers, 64 << 10, 64), move |df| {
        let out = out.clone();
        let agg = (
            Count,
            Sum::of(|e: &Ev| e.2),
            Min::of(|e: &Ev| e.2),
            Max::of(|e: &Ev| e.2),
        );
        let w = df
            .source(VecSource::new(shard(&evs2, df.index(), df.workers())))
            .event_time(|e| e.1, 300)
            .key_by(|e| e.0)
            .window(windows, |e| e.1);
        let sink = move |r: Windowed<u64, Agg4>| out.lock().unwrap().push(r);
        if every_event {
            w.aggregate_every_event(agg).for_each(sink);
        } else {
            w.aggregate(agg).for_each(sink);
        }
    })
    .unwrap_or_else(|e| panic!("{windows:?} on {workers} workers: {e}"));
    assert_eq!(o.stats.get("late_records"), 0, "{windows:?}");
    assert_eq!(o.stats.get("unfired_windows"), 0, "{windows:?}");
    let mut m = BTreeMap::new();
    for r in take(&got) {
        assert_eq!(r.end, r.start + windows.size(), "{r:?}");
        assert!(
            m.insert((r.start, r.key), r.value).is_none(),
            "{windows:?}, {workers} workers: two rows for window {} key {}",
            r.start,
            r.key
        );
    }
    m
}

#[test]
fn sliding_windows_equal_a_sequential_computation_with_and_without_preaggregation() {
    // Keys 0..25 (Zipf), values of both signs, events from time 0 on.
    let evs = Arc::new(events(0x511de, 15_000, Zipf::new(25, 0.8), 3, 250));
    for (size, slide) in [
        (3_000, 1_000), // a multiple of the slide: panes
        (2_500, 1_000), // not a multiple
        (2_000, 300),   // not a multiple, slide does not divide 1 s
        (1_000, 1_000), // slide = size: tumbling
        (50, 1),        // a window per ms
    ] {
        let want = sliding_reference(&evs, size, slide);
        for workers in [1, 3] {
            for every_event in [false, true] {
                let got = sliding_run(&evs, Sliding::ms(size, slide), workers, every_event);
                assert!(
                    got == want,
                    "sliding {size}/{slide} ms, {workers} workers, every_event {every_event}: \
                     {} rows, want {}; first difference: {:?}",
                    got.len(),
                    want.len(),
                    first_difference(&got, &want)
                );
            }
        }
    }
}

/// The first key where two maps differ, with both values.
#[allow(clippy::type_complexity)]
fn first_difference<K: Ord + Clone, V: PartialEq + Clone>(
    a: &BTreeMap<K, V>,
    b: &BTreeMap<K, V>,
) -> Option<(K, Option<V>, Option<V>)> {
    let keys: BTreeSet<&K> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .find(|k| a.get(k) != b.get(k))
        .map(|k| (k.clone(), a.get(k).cloned(), b.get(k).cloned()))
}

// ---------------------------------------------------------------------------
// (c) Joins

/// (key, time ms, id)
type Side = (u64, u64, u64);

fn sides(seed: u64, n: usize) -> (Vec<Side>, Vec<Side>) {
    let mut rng = Rng(seed);
    let keys = Zipf::new(60, 0.9);
    let mut side = |id0: u64| -> Vec<Side> {
        let ts = times(&mut rng, n, 5, 250);
        ts.into_iter()
            .enumerate()
            .map(|(i, t)| (keys.sample(&mut rng), t, id0 + i as u64))
            .collect()
    };
    let left = side(0);
    let right = side(1_000_000);
    (left, right)
}

/// (key, left id, right id, start, end) of a join, sorted.
type Pair = (u64, u64, u64, u64, u64);

fn join_run<F>(workers: usize, left: &Arc<Vec<Side>>, right: &Arc<Vec<Side>>, join: F) -> Vec<Pair>
where
    F: Fn(&Dataflow, Vec<Side>, Vec<Side>, Box<dyn FnMut(Joined<u64, Side, Side>)>)
        + Sync
        + Send
        + 'static,
{
    let got = rows::<Pair>();
    let (out, l, r) = (got.clone(), left.clone(), right.clone());
    let o = run_limited(config(workers, 16 << 10, 32), move |df| {
        let out = out.clone();
        let (me, n) = (df.index(), df.workers());
        join(
            df,
            shard(&l, me, n),
            shard(&r, me, n),
            Box::new(move |j| {
                assert_eq!(j.key, j.left.0);
                assert_eq!(j.key, j.right.0);
                out.lock()
                    .unwrap()
                    .push((j.key, j.left.2, j.right.2, j.start, j.end));
            }),
        );
    })
    .unwrap_or_else(|e| panic!("{workers} workers: {e}"));
    assert_eq!(o.stats.get("late_records"), 0);
    let mut v = take(&got);
    v.sort_unstable();
    v
}

#[test]
fn interval_joins_equal_a_sequential_join() {
    let (l, r) = sides(0x1e7, 4_000);
    let (l, r) = (Arc::new(l), Arc::new(r));
    for (lower, upper) in [(-200i64, 300i64), (100, 500), (0, 0), (-400, -50)] {
        let mut want: Vec<Pair> = Vec::new();
        for a in l.iter() {
            for b in r.iter() {
                let d = b.1 as i64 - a.1 as i64;
                if a.0 == b.0 && lower <= d && d <= upper {
                    want.push((a.0, a.2, b.2, a.1, a.1.max(b.1) + 1));
                }
            }
        }
        want.sort_unstable();
        assert!(want.len() > 100, "({lower}, {upper}): {} pairs", want.len());
        for workers in [1, 2, 4] {
            let got = join_run(workers, &l, &r, move |df, l, r, sink| {
                let left = df.source(VecSource::new(l)).event_time(|x| x.1, 300);
                let right = df.source(VecSource::new(r)).event_time(|x| x.1, 300);
                left.key_by(|x| x.0)
                    .join(right.key_by(|x| x.0))
                    .interval(lower, upper, |x| x.1, |x| x.1)
                    .for_each(sink);
            });
            assert!(
                got == want,
                "interval ({lower}, {upper}), {workers} workers: {} pairs, want {}",
                got.len(),
                want.len()
            );
        }
    }
}

/// An interval join, then a count per key and 1-s window of the pair's
/// newer time (`end - 1`: never below the join's watermark).
#[test]
fn an_interval_join_then_a_window_on_the_newer_time_equals_a_sequential_count() {
    let (l, r) = sides(0x1e8, 4_000);
    let (l, r) = (Arc::new(l), Arc::new(r));
    let mut want: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    for a in l.iter() {
        for b in r.iter() {
            let d = b.1 as i64 - a.1 as i64;
            if a.0 == b.0 && (-200..=300).contains(&d) {
                *want.entry((a.1.max(b.1) / 1_000 * 1_000, a.0)).or_default() += 1;
            }
        }
    }
    for workers in [1, 2, 4] {
        let got = rows::<(u64, u64, u64)>();
        let (out, l2, r2) = (got.clone(), l.clone(), r.clone());
        let o = run_limited(config(workers, 16 << 10, 8), move |df| {
            let out = out.clone();
            let (me, n) = (df.index(), df.workers());
            let left = df
                .source(VecSource::new(shard(&l2, me, n)))
                .event_time(|x| x.1, 300);
            let right = df
                .source(VecSource::new(shard(&r2, me, n)))
                .event_time(|x| x.1, 300);
            left.key_by(|x| x.0)
                .join(right.key_by(|x| x.0))
                .interval(-200, 300, |x| x.1, |x| x.1)
                .key_by(|j| j.key)
                .window(Tumbling::ms(1_000), |j| j.end - 1)
                .aggregate(Count)
                .for_each(move |r| out.lock().unwrap().push((r.start, r.key, r.value)));
        })
        .unwrap_or_else(|e| panic!("{workers} workers: {e}"));
        assert_eq!(o.stats.get("late_records"), 0, "{workers} workers");
        let got: BTreeMap<(u64, u64), u64> = take(&got)
            .into_iter()
            .map(|(w, k, c)| ((w, k), c))
            .collect();
        assert!(
            got == want,
            "{workers} workers: first difference {:?}",
            first_difference(&got, &want)
        );
    }
}

#[test]
fn sliding_window_joins_equal_a_sequential_join() {
    let (l, r) = sides(0x5e7, 2_500);
    let (l, r) = (Arc::new(l), Arc::new(r));
    let (size, slide) = (1_000, 400);
    let mut want: Vec<Pair> = Vec::new();
    for a in l.iter() {
        for b in r.iter() {
            if a.0 != b.0 {
                continue;
            }
            let sb = starts(b.1, size, slide);
            for s in starts(a.1, size, slide) {
                if sb.contains(&s) {
                    want.push((a.0, a.2, b.2, s, s + size));
                }
            }
        }
    }
    want.sort_unstable();
    assert!(want.len() > 100, "{} pairs", want.len());
    // At the window's end, and as each pair's second record comes
    // (`window_eager`): the same pairs.
    for (workers, eager) in [(1, false), (3, false), (1, true), (3, true)] {
        let got = join_run(workers, &l, &r, move |df, l, r, sink| {
            let left = df.source(VecSource::new(l)).event_time(|x| x.1, 300);
            let right = df.source(VecSource::new(r)).event_time(|x| x.1, 300);
            let joined = left.key_by(|x| x.0).join(right.key_by(|x| x.0));
            let windows = Sliding::ms(size, slide);
            if eager {
                joined
                    .window_eager(windows, |x| x.1, |x| x.1)
                    .for_each(sink);
            } else {
                joined.window(windows, |x| x.1, |x| x.1).for_each(sink);
            }
        });
        assert!(
            got == want,
            "{workers} workers, eager {eager}: {} pairs, want {}",
            got.len(),
            want.len()
        );
    }
}

// ---------------------------------------------------------------------------
// (d) String keys, a tuple aggregate

/// (url, user, latency ms, time ms)
type Visit = (String, u64, i64, u64);
/// (count, mean latency, max latency, distinct users)
type Stats4 = (u64, f64, i64, u64);

#[test]
fn string_keys_with_count_mean_max_distinct_equal_a_sequential_computation() {
    let mut rng = Rng(0x571);
    let urls = Zipf::new(30, 1.0);
    let visits: Vec<Visit> = times(&mut rng, 12_000, 3, 250)
        .into_iter()
        .map(|t| {
            let u = urls.sample(&mut rng);
            (
                format!("https://example.com/{u}/{}", "x".repeat(u as usize % 7)),
                rng.below(40),
                rng.below(5_000) as i64,
                t,
            )
        })
        .collect();
    let visits = Arc::new(visits);
    for windows in [Tumbling::ms(1_000), Sliding::ms(2_000, 500)] {
        let (size, slide) = match windows {
            Windows::Tumbling { size } => (size, size),
            Windows::Sliding { size, slide } => (size, slide),
        };
        // (count, latency sum, max, users) per (window, url).
        type Acc = (u64, i64, i64, BTreeSet<u64>);
        let mut acc: BTreeMap<(u64, String), Acc> = BTreeMap::new();
        for v in visits.iter() {
            for s in starts(v.3, size, slide) {
                let e = acc
                    .entry((s, v.0.clone()))
                    .or_insert((0, 0, i64::MIN, BTreeSet::new()));
                e.0 += 1;
                e.1 += v.2;
                e.2 = e.2.max(v.2);
                e.3.insert(v.1);
            }
        }
        let want: BTreeMap<(u64, String), Stats4> = acc
            .into_iter()
            .map(|(k, (n, sum, max, users))| {
                // Sums of whole numbers are exact in f64, in any order.
                (k, (n, sum as f64 / n as f64, max, users.len() as u64))
            })
            .collect();
        for workers in [1, 2, 4] {
            for every_event in [false, true] {
                let got = rows::<Windowed<String, Stats4>>();
                let (out, vs) = (got.clone(), visits.clone());
                let o = run_limited(config(workers, 8 << 10, 32), move |df| {
                    let out = out.clone();
                    let agg = (
                        Count,
                        Mean::of(|v: &Visit| v.2),
                        Max::of(|v: &Visit| v.2),
                        DistinctCount::of(|v: &Visit| v.1),
                    );
                    let w = df
                        .source(VecSource::new(shard(&vs, df.index(), df.workers())))
                        .event_time(|v| v.3, 300)
                        .key_by(|v| v.0.clone())
                        .window(windows, |v| v.3);
                    let sink = move |r: Windowed<String, Stats4>| out.lock().unwrap().push(r);
                    if every_event {
                        w.aggregate_every_event(agg).collect().for_each(sink);
                    } else {
                        w.aggregate(agg).collect().for_each(sink);
                    }
                })
                .unwrap_or_else(|e| panic!("{windows:?}, {workers} workers: {e}"));
                assert_eq!(o.stats.get("late_records"), 0);
                let mut m = BTreeMap::new();
                for r in take(&got) {
                    assert!(m.insert((r.start, r.key), r.value).is_none());
                }
                assert!(
                    m == want,
                    "{windows:?}, {workers} workers, every_event {every_event}: \
                     first difference {:?}",
                    first_difference(&m, &want)
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------
// (e) Graphs refused before any worker starts

/// A source that counts its polls (none, when the graph is refused).
struct Counted {
    polls: Arc<AtomicUsize>,
    items: Vec<Ev>,
}

impl Source for Counted {
    type Item = Ev;
    fn poll(&mut self, buf: &mut Vec<Ev>, _max: usize) -> SourcePoll {
        self.polls.fetch_add(1, Ordering::SeqCst);
        buf.clear();
        buf.append(&mut self.items);
        SourcePoll::Done
    }
}

/// Runs a graph that `build` makes wrong; checks that `run_graph` refuses it
/// with a Setup error containing `what`, having built it once on the calling
/// thread (the plan) and polled no source.
fn refused<B>(build: B, what: &[&str])
where
    B: Fn(&Dataflow, Counted) + Sync + Send + 'static,
{
    let polls = Arc::new(AtomicUsize::new(0));
    let builds = Arc::new(Mutex::new(Vec::new()));
    let (p, b) = (polls.clone(), builds.clone());
    let caller = std::thread::current().id();
    let r = run_graph(&config(3, 64 << 10, 64), move |df| {
        b.lock().unwrap().push(std::thread::current().id());
        build(
            df,
            Counted {
                polls: p.clone(),
                items: vec![(1, 10, 1), (2, 20, 2)],
            },
        );
    });
    match r {
        Err(RuntimeError::Setup(msg)) => {
            for w in what {
                assert!(msg.contains(w), "{msg:?} does not say {w:?}");
            }
        }
        Err(e) => panic!("expected a Setup error saying {what:?}, got {e:?}"),
        Ok(_) => panic!("a graph that cannot run ran (expected {what:?})"),
    }
    assert_eq!(
        *builds.lock().unwrap(),
        [caller],
        "the graph was built on a worker before it was refused"
    );
    assert_eq!(polls.load(Ordering::SeqCst), 0, "a source was polled");
}

#[test]
fn bad_graphs_are_refused_before_any_worker_starts() {
    // A sliding window whose slide exceeds its size.
    refused(
        |df, src| {
            df.source(src)
                .event_time(|e| e.1, 0)
                .key_by(|e| e.0)
                .window(Sliding::ms(1_000, 2_000), |e| e.1)
                .aggregate(Count)
                .for_each(|_| {});
        },
        &["slide (2000 ms)", "size (1000 ms)"],
    );
    // A window of size 0.
    refused(
        |df, src| {
            df.source(src)
                .key_by(|e| e.0)
                .window(Tumbling::ms(0), |e| e.1)
                .aggregate(Count)
                .for_each(|_| {});
        },
        &["size must be at least 1 ms"],
    );
    // top_n(0, …).
    refused(
        |df, src| {
            df.source(src)
                .event_time(|e| e.1, 0)
                .key_by(|e| e.0)
                .window(Tumbling::ms(1_000), |e| e.1)
                .aggregate(Count)
                .key_by(|r| r.start)
                .top_n(0, |r| r.value)
                .for_each(|_| {});
        },
        &["top_n(0"],
    );
    // An exchange whose stream nobody consumes.
    refused(
        |df, src| {
            let _never_consumed = df.source(src).key_by(|e| e.0).exchange();
        },
        &["edge 0", "feeds no operator"],
    );
    // The same, as the second edge of a longer graph.
    refused(
        |df, src| {
            let s = df.source(src).key_by(|e| e.0).exchange();
            let _never_consumed = s.map(|e| (e.1, e.2)).key_by(|e| e.0).exchange();
        },
        &["edge 1", "feeds no operator"],
    );
    // An interval join whose lower bound exceeds its upper bound.
    refused(
        |df, src| {
            let l = df.source(src).event_time(|e| e.1, 0);
            let r = df
                .source(VecSource::new(vec![(1u64, 5u64, 0i64)]))
                .event_time(|e| e.1, 0);
            l.key_by(|e| e.0)
                .join(r.key_by(|e| e.0))
                .interval(10, -10, |e| e.1, |e| e.1)
                .for_each(|_| {});
        },
        &["lower bound (10 ms)", "upper bound (-10 ms)"],
    );
}

/// A record behind its event-time stage's watermark (newest time − delay)
/// is counted in `late_records` and never joined; one behind the newest
/// time but within the delay is joined. Tumbling 1-s window join, key 1,
/// delay 300 ms, 1 and 2 workers (every record on worker 0).
#[test]
fn a_window_join_counts_records_beyond_the_delay_and_does_not_join_them() {
    // (key, time, id): times 0, 100, ..., 2000 on both sides; then on the
    // left id 900 at 1750 (newest 2000 − delay 300 = 1700: on time) and
    // id 901 at 50 (late: dropped, counted).
    let mut left: Vec<Side> = (0..=20).map(|i| (1, i * 100, i)).collect();
    left.push((1, 1_750, 900));
    left.push((1, 50, 901));
    let right: Vec<Side> = (0..=20).map(|i| (1, i * 100, 1_000 + i)).collect();
    let size = 1_000;
    let mut want: Vec<Pair> = Vec::new();
    for a in left.iter().filter(|a| a.2 != 901) {
        for b in &right {
            let s = a.1 / size * size;
            if b.1 / size * size == s {
                want.push((1, a.2, b.2, s, s + size));
            }
        }
    }
    want.sort_unstable();
    assert!(want.iter().any(|p| p.1 == 900));
    let (left, right) = (Arc::new(left), Arc::new(right));
    for workers in [1, 2] {
        let got = rows::<Pair>();
        let (out, l, r) = (got.clone(), left.clone(), right.clone());
        let o = run_limited(config(workers, 16 << 10, 32), move |df| {
            let out = out.clone();
            let me = df.index();
            let mine = |v: &Vec<Side>| if me == 0 { v.clone() } else { Vec::new() };
            let l = df.source(VecSource::new(mine(&l))).event_time(|x| x.1, 300);
            let r = df.source(VecSource::new(mine(&r))).event_time(|x| x.1, 300);
            l.key_by(|x| x.0)
                .join(r.key_by(|x| x.0))
                .window(Tumbling::ms(size), |x| x.1, |x| x.1)
                .for_each(move |j: Joined<u64, Side, Side>| {
                    out.lock()
                        .unwrap()
                        .push((j.key, j.left.2, j.right.2, j.start, j.end))
                });
        })
        .unwrap_or_else(|e| panic!("{workers} workers: {e}"));
        assert_eq!(o.stats.get("late_records"), 1, "{workers} workers");
        let mut v = take(&got);
        v.sort_unstable();
        assert_eq!(v, want, "{workers} workers");
    }
}

/// [`Filtered`] adds only the records its predicate keeps, and merging
/// the accumulators of any split of the records gives the one-pass result.
#[test]
fn filtered_aggregates_add_only_kept_records_and_merge_in_any_split() {
    let xs: Vec<u64> = (0..200).map(|i| (i * 7919) % 101).collect();
    let even = |x: &u64| x % 2 == 0;
    let agg = (
        Count,
        Filtered::new(even, Count),
        Filtered::new(even, Sum::of(|x: &u64| *x)),
        Filtered::new(|x: &u64| *x > 1000, Max::or_none(|x: &u64| *x)),
    );
    let kept: Vec<u64> = xs.iter().copied().filter(even).collect();
    let want = (200, kept.len() as u64, kept.iter().sum::<u64>(), None);
    assert!(want.1 > 0 && want.1 < 200);
    for parts in [1, 2, 3, 7] {
        let mut acc = agg.create();
        for p in 0..parts {
            let mut part = agg.create();
            for x in xs.iter().skip(p).step_by(parts) {
                agg.add(&mut part, x);
            }
            agg.merge(&mut acc, part);
        }
        assert_eq!(agg.result(&acc), want, "{parts} parts");
    }
}
