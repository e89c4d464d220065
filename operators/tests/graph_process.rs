//! Keyed process functions and unions before windows, at 1, 2 and 4 workers
//! through 4 KiB rings (every edge backpressured), against sequential
//! references computed here.

use air_operators::graph::*;
use air_runtime::dataflow::{run_graph, Dataflow, GraphOutput, VecSource};
use air_runtime::{JobConfig, RuntimeError};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// splitmix64.
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

fn config(workers: usize) -> JobConfig {
    JobConfig {
        workers,
        pin: false,
        ring_bytes: 4096,
        batch_records: 64,
        flush: Duration::ZERO,
        ..JobConfig::default()
    }
}

fn run_limited<B>(cfg: JobConfig, build: B) -> Result<GraphOutput, RuntimeError>
where
    B: Fn(&Dataflow) + Sync + Send + 'static,
{
    let (tx, rx) = std::sync::mpsc::channel();
    let workers = cfg.workers;
    std::thread::spawn(move || {
        let _ = tx.send(run_graph(&cfg, build));
    });
    match rx.recv_timeout(LIMIT) {
        Ok(r) => r,
        Err(_) => panic!("the graph ({workers} workers) did not end within {LIMIT:?}"),
    }
}

fn shard<T: Clone>(items: &[T], w: usize, n: usize) -> Vec<T> {
    items.iter().skip(w).step_by(n).cloned().collect()
}

/// (key, id, time ms)
type Ev = (u64, u32, u64);

/// Largest lag of an event behind the newest before it, ms.
const MAX_LAG: u64 = 300;

/// `n` events over `keys` keys (skewed: key k about twice as likely as
/// k + 1 among the first few), ids from 0..8 (repeats), times growing by
/// 0..20 ms, one in five lagging the newest by up to `MAX_LAG` ms.
fn events(seed: u64, n: usize, keys: u64) -> Vec<Ev> {
    let mut rng = Rng(seed);
    let mut t = 0u64;
    (0..n)
        .map(|_| {
            t += rng.below(20);
            let time = if rng.below(5) == 0 {
                t.saturating_sub(rng.below(MAX_LAG))
            } else {
                t
            };
            let key = rng.below(keys).min(rng.below(keys)) * 1_000_003 + 7;
            (key, rng.below(8) as u32, time)
        })
        .collect()
}

/// The dedup-and-count function, sequentially: per key, in event time, a
/// period opens at its first record not in an earlier period and closes 1 s
/// later (inclusive); a period's row is (key, close, distinct ids in it).
fn periods_reference(evs: &[Ev]) -> BTreeSet<(u64, u64, u64)> {
    let mut by_key: BTreeMap<u64, Vec<(u64, u32)>> = BTreeMap::new();
    for &(k, id, t) in evs {
        by_key.entry(k).or_default().push((t, id));
    }
    let mut rows = BTreeSet::new();
    for (k, mut v) in by_key {
        v.sort_unstable();
        let mut i = 0;
        while i < v.len() {
            let close = v[i].0 + 1_000;
            let mut ids = BTreeSet::new();
            while i < v.len() && v[i].0 <= close {
                ids.insert(v[i].1);
                i += 1;
            }
            rows.insert((k, close, ids.len() as u64));
        }
    }
    rows
}

/// The key's records not yet in a row, and the start of its open period.
#[derive(Default)]
struct Open {
    records: Vec<(u32, u64)>,
    first: Option<u64>,
}

/// Dedups ids per key and counts them per period (see
/// [`periods_reference`]): the period's timer is 1 s after its first
/// record, moved earlier (delete, set) when an earlier record arrives late
/// but before the timer fired, and set again on every record (one timer per
/// key and time).
struct DedupCount;

impl KeyedProcessFunction<u64, Ev> for DedupCount {
    type State = Open;
    type Out = (u64, u64, u64);

    fn process(&mut self, _k: &u64, r: Ev, time: u64, s: &mut Open, cx: &mut ProcessCx<Self::Out>) {
        assert!(time >= cx.watermark(), "a record older than the watermark");
        s.records.push((r.1, time));
        match s.first {
            Some(f) if time < f => {
                cx.delete_timer(f + 1_000);
                s.first = Some(time);
            }
            Some(_) => {}
            None => s.first = Some(time),
        }
        cx.register_timer(s.first.unwrap() + 1_000);
    }

    fn on_timer(&mut self, key: &u64, t: u64, s: &mut Open, cx: &mut ProcessCx<Self::Out>) {
        assert!(
            cx.watermark() > t,
            "a timer fired before the watermark passed it"
        );
        let ids: BTreeSet<u32> = s.records.iter().filter(|r| r.1 <= t).map(|r| r.0).collect();
        cx.emit((*key, t, ids.len() as u64));
        s.records.retain(|r| r.1 > t);
        s.first = s.records.iter().map(|r| r.1).min();
        match s.first {
            Some(f) => cx.register_timer(f + 1_000),
            None => cx.clear_state(),
        }
    }
}

#[test]
fn dedup_and_count_per_key_with_timers_equals_a_sequential_computation() {
    let evs = Arc::new(events(7, 30_000, 40));
    let want = periods_reference(&evs);
    for workers in [1, 2, 4] {
        // (worker, key, timer, count) in the order each worker emitted them.
        let rows = Arc::new(Mutex::new(Vec::new()));
        let (r, e) = (rows.clone(), evs.clone());
        let out = run_limited(config(workers), move |df| {
            let me = df.index();
            let r = r.clone();
            df.source(VecSource::new(shard(&e, me, df.workers())))
                .event_time(|e| e.2, MAX_LAG)
                .key_by(|e| e.0)
                .process(|e| e.2, DedupCount)
                .for_each(move |(k, t, n)| r.lock().unwrap().push((me, k, t, n)));
        })
        .unwrap();
        let rows = rows.lock().unwrap().clone();
        let got: BTreeSet<(u64, u64, u64)> = rows.iter().map(|r| (r.1, r.2, r.3)).collect();
        assert_eq!(got.len(), rows.len(), "{workers} workers: a row twice");
        assert_eq!(got, want, "{workers} workers");
        // Timers fire in time order at every worker (over all its keys).
        for w in 0..workers {
            let times: Vec<u64> = rows.iter().filter(|r| r.0 == w).map(|r| r.2).collect();
            assert!(
                times.windows(2).all(|p| p[0] <= p[1]),
                "{workers} workers: worker {w}'s timers fired out of time order"
            );
        }
        let s = &out.stats;
        assert_eq!(
            s.get("timers_fired"),
            want.len() as u64,
            "{workers} workers"
        );
        assert_eq!(s.get("process_records"), evs.len() as u64);
        assert_eq!(s.get("late_records"), 0);
        assert_eq!(s.get("unfired_timers"), 0);
        // Every key cleared its state after its last period: none is held.
        assert_eq!(s.get("process_keys"), 0, "{workers} workers: state left");
        // Rows came out while the input flowed, not only at the end.
        assert!(
            want.len() > 100,
            "the input should make many periods ({})",
            want.len()
        );
    }
}

#[test]
fn keys_whose_state_is_never_cleared_stay_and_end_of_stream_fires_every_timer() {
    // A running sum per key, kept forever, with a timer at u64::MAX (only
    // the end of the stream fires it) and one at the key's first time that
    // is deleted at once (never fires).
    let evs = Arc::new(events(11, 5_000, 25));
    let mut want: BTreeMap<u64, u64> = BTreeMap::new();
    for e in evs.iter() {
        *want.entry(e.0).or_default() += e.1 as u64;
    }
    for workers in [1, 2, 4] {
        let rows = Arc::new(Mutex::new(Vec::new()));
        let (r, e) = (rows.clone(), evs.clone());
        let out = run_limited(config(workers), move |df| {
            let r = r.clone();
            df.source(VecSource::new(shard(&e, df.index(), df.workers())))
                .event_time(|e| e.2, MAX_LAG)
                .key_by(|e| e.0)
                .process(
                    |e| e.2,
                    process_fn(
                        |_k: &u64, e: Ev, t: u64, sum: &mut u64, cx: &mut ProcessCx<(u64, u64)>| {
                            *sum += e.1 as u64;
                            cx.register_timer(u64::MAX);
                            cx.register_timer(t);
                            cx.delete_timer(t);
                        },
                    )
                    .on_timer(
                        |k: &u64, t, sum: &mut u64, cx: &mut ProcessCx<(u64, u64)>| {
                            assert_eq!(t, u64::MAX);
                            cx.emit((*k, *sum))
                        },
                    ),
                )
                .for_each(move |x| r.lock().unwrap().push(x));
        })
        .unwrap();
        let mut rows = rows.lock().unwrap().clone();
        rows.sort_unstable();
        assert_eq!(rows, want.clone().into_iter().collect::<Vec<_>>());
        assert_eq!(out.stats.get("timers_fired"), want.len() as u64);
        assert_eq!(out.stats.get("process_keys"), want.len() as u64);
    }
}

#[test]
fn rows_of_timers_at_u64_max_come_before_the_final_watermark() {
    // Every key's total leaves from a timer at u64::MAX; a second process
    // downstream (across an exchange: one channel per sender, in order)
    // notes the watermark each row finds there. Every source sends the
    // watermark u64::MAX just before its end: the timers must fire before
    // that watermark goes on, or a window ending at u64::MAX downstream
    // would fire without their rows. (Here the watermark and the ends
    // usually come in one poll; the unit test in process.rs delivers them
    // apart, as a slow input does.)
    let evs = Arc::new(events(5, 2_000, 40));
    for workers in [1, 2, 4] {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (s, e) = (seen.clone(), evs.clone());
        run_limited(config(workers), move |df| {
            let s = s.clone();
            df.source(VecSource::new(shard(&e, df.index(), df.workers())))
                .event_time(|e| e.2, MAX_LAG)
                .key_by(|e| e.0)
                .process(
                    |e| e.2,
                    process_fn(
                        |_k: &u64, _e: Ev, _t, n: &mut u64, cx: &mut ProcessCx<(u64, u64)>| {
                            *n += 1;
                            cx.register_timer(u64::MAX);
                        },
                    )
                    .on_timer(
                        |k: &u64, _t, n: &mut u64, cx: &mut ProcessCx<(u64, u64)>| {
                            cx.emit((*k, *n))
                        },
                    ),
                )
                .key_by(|r| r.0)
                .process(
                    |_| 0,
                    process_fn(
                        move |_k: &u64, r: (u64, u64), _t, _s: &mut (), cx: &mut ProcessCx<()>| {
                            s.lock().unwrap().push((r.0, r.1, cx.watermark()));
                        },
                    ),
                )
                .for_each(|_| {});
        })
        .unwrap();
        let seen = seen.lock().unwrap();
        let keys: BTreeSet<u64> = evs.iter().map(|e| e.0).collect();
        assert_eq!(seen.len(), keys.len(), "{workers} workers: one row per key");
        assert_eq!(seen.iter().map(|r| r.1).sum::<u64>(), 2_000);
        let late: Vec<_> = seen.iter().filter(|r| r.2 == u64::MAX).collect();
        assert!(
            late.is_empty(),
            "{workers} workers: rows after the final watermark: {late:?}"
        );
    }
}

#[test]
fn a_window_after_a_union_waits_for_the_slower_input() {
    // Per worker: a fast input whose event times start at 500 s and a
    // slow one (through an exchange first) from 0 s. If the union passed
    // on the fast input's watermark, the windows of the slow input's times
    // would close before its records came: counted late, missing from the
    // rows.
    let mut rng = Rng(3);
    let slow: Arc<Vec<(u64, u64)>> = Arc::new(
        (0..20_000u64)
            .map(|i| (rng.below(30), i * 20 + rng.below(10)))
            .collect(),
    );
    let fast: Arc<Vec<(u64, u64)>> = Arc::new(
        (0..10_000u64)
            .map(|i| (rng.below(30), 500_000 + i * 20))
            .collect(),
    );
    let mut want: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    for &(k, t) in slow.iter().chain(fast.iter()) {
        *want.entry((t - t % 1_000, k)).or_default() += 1;
    }
    for workers in [1, 2, 4] {
        let rows = Arc::new(Mutex::new(Vec::new()));
        let (r, s, f) = (rows.clone(), slow.clone(), fast.clone());
        let out = run_limited(config(workers), move |df| {
            let (w, n) = (df.index(), df.workers());
            let r = r.clone();
            let fast = df
                .source(VecSource::new(shard(&f, w, n)))
                .event_time(|e| e.1, 0);
            let slow = df
                .source(VecSource::new(shard(&s, w, n)))
                .event_time(|e| e.1, 10)
                .key_by(|e| e.0 % 7)
                .exchange();
            fast.union(slow)
                .key_by(|e| e.0)
                .window(Tumbling::ms(1_000), |e| e.1)
                .aggregate(Count)
                .for_each(move |x| r.lock().unwrap().push(((x.start, x.key), x.value)));
        })
        .unwrap();
        let got: BTreeMap<(u64, u64), u64> = rows.lock().unwrap().iter().cloned().collect();
        assert_eq!(out.stats.get("late_records"), 0, "{workers} workers: late");
        assert_eq!(got, want, "{workers} workers");
        assert_eq!(out.stats.get("window_rows"), want.len() as u64);
    }
}
