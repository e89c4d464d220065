//! Tests of the windowed equi-join: the `WindowJoin` operator alone
//! (incremental emission, window edges, state dropped by the watermark, late
//! records), and the distributed job on 1, 2 and 4 workers checked against a
//! nested-loop join of the same records.

use air_operators::join::{
    run_join_job, JoinMatch, JoinOptions, JoinSide, WindowJoin, WindowJoinCounters,
};
use air_operators::stream::VecSource;
use air_operators::window::WindowSpec;
use air_runtime::{JobConfig, RuntimeError};
use rkyv::{Archive, Deserialize, Serialize};

/// Window size of the generated data, ms.
const SIZE: u64 = 1000;
/// Bounded out-of-orderness of the generated data, ms (≥ `SIZE`).
const DELAY: u64 = 2000;
/// Event-time span of the generated data, ms.
const SPAN: u64 = 50_000;

/// A left record: plain old data (read in place on the receiving side).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Archive, Serialize, Deserialize)]
struct Person {
    id: u64,
    key: u64,
    time: u64,
}

/// A right record with out-of-line data (deserialized on the receiving side).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Archive, Serialize, Deserialize)]
struct Auction {
    name: String,
    key: u64,
    time: u64,
}

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

/// `n` `(key, time)` pairs with keys in `keys`, in bounded disorder: record
/// `i` has time `base_i + jitter` with `base_i` nondecreasing and jitter in
/// `[0, DELAY)`, so no record (nor any subsequence of them) is ever older than
/// newest − `DELAY`. One record in four sits exactly on a window's start or
/// on its last millisecond. Records whose window index satisfies `skip` are
/// left out (windows that only the other side has).
fn gen(
    seed: u64,
    n: u64,
    keys: std::ops::Range<u64>,
    skip: impl Fn(u64) -> bool,
) -> Vec<(u64, u64)> {
    let mut rng = Rng(seed);
    let mut out = Vec::new();
    for i in 0..n {
        let base = i * SPAN / n;
        let edge = base.div_ceil(SIZE) * SIZE; // in [base, base + SIZE)
        let time = match rng.below(8) {
            0 => edge,
            1 if edge > base => edge - 1,
            _ => base + rng.below(DELAY),
        };
        let key = keys.start + rng.below(keys.end - keys.start);
        if !skip(time / SIZE) {
            out.push((key, time));
        }
    }
    out
}

/// The left and right records of the distributed tests: keys 0..16 left and
/// 8..24 right (so some keys have one side only), windows 5 mod 11 without
/// left records and 3 mod 7 without right records, ~4 records per key,
/// window and side (many-to-many matches).
fn data(seed: u64) -> (Vec<Person>, Vec<Auction>) {
    let people = gen(seed, 3000, 0..16, |w| w % 11 == 5)
        .into_iter()
        .enumerate()
        .map(|(i, (key, time))| Person {
            id: i as u64,
            key,
            time,
        })
        .collect();
    let auctions = gen(seed ^ 0xa5a5, 3000, 8..24, |w| w % 7 == 3)
        .into_iter()
        .enumerate()
        .map(|(i, (key, time))| Auction {
            name: format!("auction-{i}"),
            key,
            time,
        })
        .collect();
    (people, auctions)
}

/// The join by definition: every pair with equal keys in the same window.
fn nested_loop(people: &[Person], auctions: &[Auction]) -> Vec<JoinMatch<Person, Auction>> {
    let mut out = Vec::new();
    for p in people {
        for a in auctions {
            if p.key == a.key && p.time / SIZE == a.time / SIZE {
                out.push(JoinMatch {
                    window_start: p.time / SIZE * SIZE,
                    key: p.key,
                    left_time: p.time,
                    right_time: a.time,
                    left: p.clone(),
                    right: a.clone(),
                });
            }
        }
    }
    out.sort();
    out
}

/// Worker `w` of `workers` reads records `i` with `i % workers == w`.
fn shard<T: Clone>(all: &[T], w: usize, workers: usize) -> Vec<T> {
    all.iter()
        .enumerate()
        .filter(|(i, _)| i % workers == w)
        .map(|(_, r)| r.clone())
        .collect()
}

type Output =
    air_operators::join::JoinJobOutput<Person, Auction, VecSource<Person>, VecSource<Auction>>;

fn run(
    cfg: &JobConfig,
    people: &[Person],
    auctions: &[Auction],
    opts: JoinOptions,
) -> Result<Output, RuntimeError> {
    let workers = cfg.workers;
    run_join_job(cfg, WindowSpec::tumbling(SIZE), |w| {
        JoinSide::new(
            VecSource::new(shard(people, w.index, workers)),
            |p: &Person| p.key,
            |p| p.time,
        )
        .join(
            JoinSide::new(
                VecSource::new(shard(auctions, w.index, workers)),
                |a: &Auction| a.key,
                |a| a.time,
            ),
            opts,
        )
    })
}

fn check_against_nested_loop(cfg: &JobConfig, seed: u64, opts: JoinOptions) {
    let (people, auctions) = data(seed);
    let want = nested_loop(&people, &auctions);
    // The data covers what the test claims to cover.
    let windows_with_matches: std::collections::BTreeSet<u64> =
        want.iter().map(|m| m.window_start).collect();
    assert!(want.len() > 2000, "{} matches", want.len());
    assert!(windows_with_matches.len() < (SPAN / SIZE) as usize - 5);
    assert!(want
        .iter()
        .any(|m| m.left_time % SIZE == 0 || m.right_time % SIZE == 0));
    assert!(want
        .iter()
        .any(|m| m.left_time % SIZE == SIZE - 1 || m.right_time % SIZE == SIZE - 1));
    assert!(!want.iter().any(|m| m.key < 8 || m.key >= 16));

    let out = run(cfg, &people, &auctions, opts).unwrap();
    let mut got = out.results.clone();
    // Sorted by (window, key, left time, right time) already.
    assert!(got.windows(2).all(|p| {
        (p[0].window_start, p[0].key, p[0].left_time, p[0].right_time)
            <= (p[1].window_start, p[1].key, p[1].left_time, p[1].right_time)
    }));
    got.sort();
    assert_eq!(got.len(), want.len(), "workers = {}", cfg.workers);
    assert_eq!(got, want, "workers = {}", cfg.workers);

    let t = out.totals;
    assert_eq!(t.left.source_records, people.len() as u64);
    assert_eq!(t.left.records, people.len() as u64);
    assert_eq!(t.right.source_records, auctions.len() as u64);
    assert_eq!(t.right.records, auctions.len() as u64);
    assert_eq!((t.left.late_records, t.right.late_records), (0, 0));
    assert_eq!(out.join.matches, want.len() as u64);
    assert_eq!(out.join.left_records, people.len() as u64);
    assert_eq!(out.join.right_records, auctions.len() as u64);
    assert_eq!((out.join.late_left, out.join.late_right), (0, 0));
    assert!(out.join.windows_closed >= (SPAN / SIZE));
    assert_eq!(out.upstream.len(), cfg.workers);
    assert_eq!(out.operator.len(), cfg.workers);
    assert_eq!(out.sources.len(), cfg.workers);
    let mut sum = WindowJoinCounters::default();
    for c in &out.operator {
        sum.add(c);
    }
    assert_eq!(sum, out.join);
    let records_in: u64 = out.channels.iter().map(|c| c.records_in).sum();
    assert_eq!(records_in, (people.len() + auctions.len()) as u64);
}

#[test]
fn job_equals_nested_loop_on_1_2_4_workers() {
    let opts = JoinOptions {
        max_delay_ms: DELAY,
        ..JoinOptions::default()
    };
    for workers in [1, 2, 4] {
        let cfg = JobConfig {
            workers,
            pin: false,
            ..Default::default()
        };
        check_against_nested_loop(&cfg, 7, opts);
    }
}

#[test]
fn job_equals_nested_loop_with_small_batches_and_frequent_watermarks() {
    // Small source and exchange batches and a short flush interval: windows
    // close at the owners while records of later windows are still flowing.
    let opts = JoinOptions {
        max_delay_ms: DELAY,
        source_batch: 8,
    };
    for (workers, seed) in [(1, 11), (2, 12), (4, 13)] {
        let cfg = JobConfig {
            workers,
            pin: false,
            batch_records: 16,
            flush: std::time::Duration::from_micros(50),
            ..Default::default()
        };
        check_against_nested_loop(&cfg, seed, opts);
    }
}

#[test]
fn late_record_beyond_the_delay_is_counted_and_not_joined() {
    let p = |id, key, time| Person { id, key, time };
    let a = |name: &str, key, time| Auction {
        name: name.into(),
        key,
        time,
    };
    // One record per step per side (source_batch 1), delay 1000 ms:
    // step 1: P0@0 and A@100 join in window 0; watermark stays 0;
    // step 2: P1@5000 and A@5000 join in window 5000; watermark → 4000;
    // step 3: P2@200 is older than 4000: late, although A@100 is in its
    //         window; A@6000 (key 2) has no partner.
    let people = vec![p(0, 1, 0), p(1, 1, 5000), p(2, 1, 200)];
    let auctions = vec![a("a", 1, 100), a("b", 1, 5000), a("c", 2, 6000)];
    let opts = JoinOptions {
        max_delay_ms: 1000,
        source_batch: 1,
    };
    for workers in [1, 2] {
        let cfg = JobConfig {
            workers,
            pin: false,
            ..Default::default()
        };
        // Every record on worker 0 (the lateness is decided by its watermark).
        let out = run_join_job(&cfg, WindowSpec::tumbling(SIZE), |w| {
            let mine = w.index == 0;
            JoinSide::new(
                VecSource::new(if mine { people.clone() } else { vec![] }),
                |p: &Person| p.key,
                |p| p.time,
            )
            .join(
                JoinSide::new(
                    VecSource::new(if mine { auctions.clone() } else { vec![] }),
                    |a: &Auction| a.key,
                    |a| a.time,
                ),
                opts,
            )
        })
        .unwrap();
        let got: Vec<(u64, u64, u64, String)> = out
            .results
            .iter()
            .map(|m| (m.window_start, m.key, m.left.id, m.right.name.clone()))
            .collect();
        assert_eq!(got, vec![(0, 1, 0, "a".into()), (5000, 1, 1, "b".into())]);
        assert_eq!(out.totals.left.records, 3);
        assert_eq!(out.totals.left.late_records, 1);
        assert_eq!(out.totals.right.late_records, 0);
        assert_eq!(out.join.left_records, 2);
        assert_eq!(out.join.right_records, 3);
        assert_eq!(out.join.matches, 2);
        assert_eq!((out.join.late_left, out.join.late_right), (0, 0));
    }
}

#[test]
fn worker_watermark_is_the_min_of_both_sides() {
    // The left side runs ahead in event time: its own watermark (delay 0)
    // is 5000 after the first step, but the right side's is 100, so the
    // worker's watermark is 100 and the right records at 150 and the left
    // one at 120 are on time and joined.
    let p = |id, time| Person { id, key: 1, time };
    let a = |name: &str, time| Auction {
        name: name.into(),
        key: 1,
        time,
    };
    let people = vec![p(0, 5000), p(1, 120), p(2, 5200)];
    let auctions = vec![a("a", 100), a("b", 150), a("c", 5100)];
    let opts = JoinOptions {
        max_delay_ms: 0,
        source_batch: 1,
    };
    let cfg = JobConfig {
        workers: 1,
        pin: false,
        ..Default::default()
    };
    let out = run(&cfg, &people, &auctions, opts).unwrap();
    let got: Vec<(u64, u64, String)> = out
        .results
        .iter()
        .map(|m| (m.window_start, m.left.id, m.right.name.clone()))
        .collect();
    let want: Vec<(u64, u64, String)> = vec![
        (0, 1, "a".into()),
        (0, 1, "b".into()),
        (5000, 0, "c".into()),
        (5000, 2, "c".into()),
    ];
    assert_eq!(got, want);
    assert_eq!(
        out.totals.left.late_records + out.totals.right.late_records,
        0
    );
    assert_eq!(nested_loop(&people, &auctions).len(), 4);
}

#[test]
fn one_empty_side_gives_no_matches() {
    let (people, _) = data(3);
    let cfg = JobConfig {
        workers: 2,
        pin: false,
        ..Default::default()
    };
    let out = run(
        &cfg,
        &people,
        &[],
        JoinOptions {
            max_delay_ms: DELAY,
            ..JoinOptions::default()
        },
    )
    .unwrap();
    assert!(out.results.is_empty());
    assert_eq!(out.totals.left.records, people.len() as u64);
    assert_eq!(out.totals.right.records, 0);
    assert_eq!(out.totals.left.late_records, 0);
    assert_eq!(out.join.matches, 0);
    assert_eq!(out.latency.samples, 0);
}

#[test]
fn sliding_windows_are_refused() {
    let cfg = JobConfig {
        workers: 1,
        pin: false,
        ..Default::default()
    };
    let r = run_join_job(&cfg, WindowSpec::sliding(10, 5), |_| {
        JoinSide::new(
            VecSource::new(vec![(1u64, 1u64)]),
            |r: &(u64, u64)| r.0,
            |r| r.1,
        )
        .join(
            JoinSide::new(
                VecSource::new(vec![(1u64, 1u64)]),
                |r: &(u64, u64)| r.0,
                |r| r.1,
            ),
            JoinOptions::default(),
        )
    });
    assert!(matches!(r, Err(RuntimeError::Setup(_))));
}

// ---- WindowJoin alone ----

type Pair = (u64, u64, u64, u64, &'static str, &'static str);

fn pair(m: JoinMatch<&&'static str, &&'static str>) -> Pair {
    (
        m.window_start,
        m.key,
        m.left_time,
        m.right_time,
        *m.left,
        *m.right,
    )
}

#[test]
fn operator_emits_each_pair_once_as_soon_as_both_sides_are_in() {
    let mut j: WindowJoin<&'static str, &'static str> = WindowJoin::new(WindowSpec::tumbling(SIZE));
    let mut out: Vec<Pair> = Vec::new();
    assert_eq!(j.insert_left(1, 5, "l1", |m| out.push(pair(m))), Some(0));
    assert!(out.is_empty());
    assert_eq!(j.insert_right(1, 7, "r1", |m| out.push(pair(m))), Some(1));
    assert_eq!(out, vec![(0, 1, 5, 7, "l1", "r1")]);
    out.clear();
    assert_eq!(j.insert_right(1, 999, "r2", |m| out.push(pair(m))), Some(1));
    assert_eq!(out, vec![(0, 1, 5, 999, "l1", "r2")]);
    out.clear();
    // A second left record meets both right records, in their arrival order.
    assert_eq!(j.insert_left(1, 0, "l2", |m| out.push(pair(m))), Some(2));
    assert_eq!(
        out,
        vec![(0, 1, 0, 7, "l2", "r1"), (0, 1, 0, 999, "l2", "r2")]
    );
    out.clear();
    // Another key, and the next window (1000 is the next window's first ms).
    assert_eq!(j.insert_right(2, 5, "r3", |m| out.push(pair(m))), Some(0));
    assert_eq!(
        j.insert_right(1, 1000, "r4", |m| out.push(pair(m))),
        Some(0)
    );
    assert_eq!(j.insert_left(1, 1999, "l3", |m| out.push(pair(m))), Some(1));
    assert_eq!(out, vec![(1000, 1, 1999, 1000, "l3", "r4")]);
    let c = j.counters();
    assert_eq!((c.left_records, c.right_records, c.matches), (3, 4, 5));
    assert_eq!((c.late_left, c.late_right, c.windows_closed), (0, 0, 0));
    assert_eq!(j.stored_records(), 7);
    assert_eq!(j.open_windows(), 2);
}

#[test]
fn operator_random_inserts_equal_nested_loop() {
    let mut rng = Rng(99);
    let mut j: WindowJoin<u64, u64> = WindowJoin::new(WindowSpec::tumbling(100));
    let (mut left, mut right) = (Vec::new(), Vec::new());
    let mut got = Vec::new();
    for id in 0..2000u64 {
        let key = rng.below(5);
        let time = rng.below(1000);
        let mut emit =
            |m: JoinMatch<&u64, &u64>| got.push((m.window_start, m.key, *m.left, *m.right));
        if rng.below(2) == 0 {
            j.insert_left(key, time, id, &mut emit);
            left.push((key, time, id));
        } else {
            j.insert_right(key, time, id, &mut emit);
            right.push((key, time, id));
        }
    }
    let mut want = Vec::new();
    for &(lk, lt, lid) in &left {
        for &(rk, rt, rid) in &right {
            if lk == rk && lt / 100 == rt / 100 {
                want.push((lt / 100 * 100, lk, lid, rid));
            }
        }
    }
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got, want);
    assert_eq!(j.counters().matches, want.len() as u64);
}

#[test]
fn operator_drops_closed_windows_and_counts_late_records() {
    let mut j: WindowJoin<u64, u64> = WindowJoin::new(WindowSpec::tumbling(SIZE));
    let mut out = Vec::new();
    let mut emit = |m: JoinMatch<&u64, &u64>| out.push((m.window_start, *m.left, *m.right));
    for (i, t) in [0u64, 999, 1000, 2500].into_iter().enumerate() {
        j.insert_left(1, t, i as u64, &mut emit);
    }
    j.insert_right(1, 2999, 10, &mut emit);
    assert_eq!(j.stored_records(), 5);
    assert_eq!(j.open_windows(), 3);
    // Window [0, 1000) ends at 1000: a watermark of 999 leaves it open.
    assert_eq!(j.on_watermark(999), 0);
    assert!(!j.is_late(0));
    assert_eq!(j.on_watermark(1000), 1);
    assert_eq!(j.watermark(), 1000);
    assert_eq!(j.stored_records(), 3);
    assert_eq!(j.open_windows(), 2);
    // A record of the dropped window is late: counted, not stored, its
    // payload never built, no pair emitted.
    let r = j.insert_right_with(
        1,
        999,
        || panic!("payload of a late record built"),
        &mut emit,
    );
    assert_eq!(r, None);
    assert_eq!(j.counters().late_right, 1);
    assert_eq!(j.stored_records(), 3);
    // A record at the watermark is on time and joins its window.
    assert_eq!(j.insert_right(1, 1000, 11, &mut emit), Some(1));
    // A watermark that does not advance changes nothing.
    assert_eq!(j.on_watermark(500), 0);
    assert_eq!(j.watermark(), 1000);
    assert_eq!(j.on_watermark(2999), 1);
    assert_eq!(j.insert_left(1, 1500, 99, &mut emit), None);
    assert_eq!(j.on_watermark(u64::MAX), 1);
    assert_eq!((j.stored_records(), j.open_windows()), (0, 0));
    let c = j.counters();
    assert_eq!((c.late_left, c.late_right, c.windows_closed), (1, 1, 3));
    assert_eq!(c.matches, 2);
    assert_eq!(out, vec![(2000, 3, 10), (1000, 2, 11)]);
}

#[test]
#[should_panic(expected = "tumbling windows only")]
fn operator_refuses_sliding_windows() {
    let _ = WindowJoin::<u64, u64>::new(WindowSpec::sliding(10, 5));
}
