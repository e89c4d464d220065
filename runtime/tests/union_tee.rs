//! `Stream::union` and `Stream::tee` at 1, 2 and 4 workers through 4 KiB
//! rings (every edge backpressured), against what the inputs hold: every
//! record once (twice for a tee's two branches), a union's watermark never
//! ahead of its slower input, and graphs with an unconsumed stream refused.

use air_runtime::dataflow::{run_graph, Cx, Dataflow, GraphOutput, Stats, Tail, VecSource};
use air_runtime::{JobConfig, RuntimeError};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// Unpinned workers, 4 KiB rings, 64-record batches, watermarks at every
/// turn of a worker's loop.
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

/// Worker `w`'s share of `lo..hi`.
fn shard(lo: u64, hi: u64, w: usize, n: usize) -> Vec<u64> {
    (lo..hi).filter(|x| x % n as u64 == w as u64).collect()
}

fn sorted(v: &Arc<Mutex<Vec<u64>>>) -> Vec<u64> {
    let mut v = v.lock().unwrap().clone();
    v.sort_unstable();
    v
}

const N: u64 = 20_000;

#[test]
fn a_union_of_a_source_and_an_exchange_holds_every_record_of_both_once() {
    for workers in [1, 2, 4] {
        let got = Arc::new(Mutex::new(Vec::new()));
        let g = got.clone();
        let out = run_limited(config(workers), move |df| {
            let (w, n) = (df.index(), df.workers());
            let a = df.source(VecSource::new(shard(0, N, w, n)));
            let b = df
                .source(VecSource::new(shard(N, 2 * N, w, n)))
                .key_by(|x| x % 7)
                .exchange();
            let g = g.clone();
            a.union(b)
                .map(|x| x * 3)
                .key_by(|x| x % 5)
                .exchange()
                .for_each(move |x| g.lock().unwrap().push(x));
        })
        .unwrap();
        let want: Vec<u64> = (0..2 * N).map(|x| x * 3).collect();
        assert_eq!(sorted(&got), want, "{workers} workers");
        assert_eq!(out.stats.get("sink_rows"), 2 * N);
        assert_eq!(out.edges.len(), 2, "a union adds no edge");
    }
}

#[test]
fn a_tee_feeds_two_sinks_that_each_see_every_record_once() {
    for workers in [1, 2, 4] {
        let (left, right) = (
            Arc::new(Mutex::new(Vec::new())),
            Arc::new(Mutex::new(Vec::new())),
        );
        let (l, r) = (left.clone(), right.clone());
        run_limited(config(workers), move |df| {
            let (w, n) = (df.index(), df.workers());
            let (a, b) = df
                .source(VecSource::new(shard(0, N, w, n)))
                .key_by(|x| x % 11)
                .exchange()
                .tee();
            let (l, r) = (l.clone(), r.clone());
            a.for_each(move |x| l.lock().unwrap().push(x));
            b.map(|x| x + N)
                .key_by(|x| x % 3)
                .exchange()
                .collect()
                .for_each(move |x| r.lock().unwrap().push(x));
        })
        .unwrap();
        assert_eq!(
            sorted(&left),
            (0..N).collect::<Vec<_>>(),
            "{workers} workers"
        );
        assert_eq!(
            sorted(&right),
            (N..2 * N).collect::<Vec<_>>(),
            "{workers} workers"
        );
    }
}

#[test]
fn a_tee_whose_branches_meet_again_in_a_union_holds_every_record_twice() {
    for workers in [1, 2, 4] {
        let got = Arc::new(Mutex::new(Vec::new()));
        let g = got.clone();
        run_limited(config(workers), move |df| {
            let (w, n) = (df.index(), df.workers());
            let (a, b) = df.source(VecSource::new(shard(0, N, w, n))).tee();
            let (b, c) = b.map(|x| x + N).tee();
            let g = g.clone();
            a.union(b)
                .union(c.map(|x| x + N))
                .collect()
                .for_each(move |x| g.lock().unwrap().push(x));
        })
        .unwrap();
        assert_eq!(
            sorted(&got),
            (0..3 * N).collect::<Vec<_>>(),
            "{workers} workers"
        );
    }
}

/// A tail that counts records older than the last watermark it was given
/// (late), and keeps the largest watermark below `u64::MAX` it saw.
struct LateCheck {
    wm: u64,
    late: Arc<AtomicU64>,
    records: Arc<AtomicU64>,
    highest: Arc<AtomicU64>,
    final_wm: Arc<AtomicU64>,
}

impl Tail<(u64, u64)> for LateCheck {
    fn push(&mut self, item: (u64, u64), _cx: &mut Cx<'_, '_>) {
        self.records.fetch_add(1, Ordering::Relaxed);
        if item.1 < self.wm {
            self.late.fetch_add(1, Ordering::Relaxed);
        }
    }
    fn watermark(&mut self, wm: u64, _cx: &mut Cx<'_, '_>) {
        assert!(wm >= self.wm, "the watermark went back");
        self.wm = wm;
        if wm != u64::MAX {
            self.highest.fetch_max(wm, Ordering::Relaxed);
        }
    }
    fn end(&mut self, final_wm: u64, _cx: &mut Cx<'_, '_>) {
        self.final_wm.store(final_wm, Ordering::Relaxed);
    }
    fn barrier(&mut self, _id: u64, _cx: &mut Cx<'_, '_>) {}
    fn report(&mut self, _stats: &mut Stats) {}
}

#[test]
fn a_unions_watermark_is_the_minimum_of_its_inputs() {
    // The fast input's event times run from 1 000 000 ms, the slow one's
    // from 0 to 400 000 (twice the records: it ends last): a union that
    // passed on the fast input's watermark would make the slow one's
    // records late after it.
    for workers in [1, 2, 4] {
        for through_exchange in [false, true] {
            let counters: [Arc<AtomicU64>; 4] = Default::default();
            let c = counters.clone();
            run_limited(config(workers), move |df| {
                let (w, n) = (df.index(), df.workers());
                let fast = df
                    .source(VecSource::new(shard(0, N, w, n)))
                    .map(|i| (i, 1_000_000 + i * 10))
                    .event_time(|r| r.1, 0);
                let slow = df
                    .source(VecSource::new(shard(0, 2 * N, w, n)))
                    .map(|i| (i, i * 10))
                    .event_time(|r| r.1, 0);
                let tail = LateCheck {
                    wm: 0,
                    late: c[0].clone(),
                    records: c[1].clone(),
                    highest: c[2].clone(),
                    final_wm: c[3].clone(),
                };
                if through_exchange {
                    let slow = slow.key_by(|r| r.0 % 13).exchange();
                    fast.union(slow).end_in(tail);
                } else {
                    slow.union(fast).end_in(tail);
                }
            })
            .unwrap();
            let [late, records, highest, final_wm] = counters.map(|c| c.load(Ordering::SeqCst));
            let what = format!("{workers} workers, through an exchange: {through_exchange}");
            assert_eq!(records, 3 * N, "{what}");
            assert_eq!(late, 0, "{what}: records older than the union's watermark");
            assert!(highest > 0, "{what}: no watermark went on before the end");
            assert!(
                highest < 2 * N * 10,
                "{what}: the union's watermark ({highest}) passed its slow input's times"
            );
            assert_eq!(final_wm, u64::MAX, "{what}");
        }
    }
}

/// Checks that `run_graph` refuses the graph `build` makes, with a Setup
/// error containing every piece of `what`.
fn refused<B>(build: B, what: &[&str])
where
    B: Fn(&Dataflow) + Sync + Send + 'static,
{
    match run_graph(&config(2), build) {
        Err(RuntimeError::Setup(msg)) => {
            for w in what {
                assert!(msg.contains(w), "{msg:?} does not say {w:?}");
            }
        }
        Err(e) => panic!("expected a Setup error saying {what:?}, got {e:?}"),
        Ok(_) => panic!("a graph with an unconsumed stream ran (expected {what:?})"),
    }
}

#[test]
fn graphs_with_an_unconsumed_stream_are_refused_naming_it() {
    // A source's chain that ends nowhere.
    refused(
        |df| {
            df.source(VecSource::new(vec![1u64, 2])).for_each(|_| {});
            let _dropped = df.source(VecSource::new(vec![3u32])).map(|x| x as i16);
        },
        &["a stream of i16", "union_tee.rs:", "never consumed"],
    );
    // A tee branch nobody consumes.
    refused(
        |df| {
            let (a, _b) = df.source(VecSource::new(vec![1u64, 2])).tee();
            a.for_each(|_| {});
        },
        &["a stream of u64", "union_tee.rs:", "never consumed"],
    );
    // A union left unconsumed.
    refused(
        |df| {
            let a = df.source(VecSource::new(vec![1u8]));
            let b = df.source(VecSource::new(vec![2u8]));
            let _u = a.union(b);
        },
        &["a stream of u8", "union_tee.rs:", "never consumed"],
    );
    // The output of an exchange left unconsumed names its edge.
    refused(
        |df| {
            let _x = df
                .source(VecSource::new(vec![1u64]))
                .key_by(|x| *x)
                .exchange();
        },
        &["edge 0 (exchange)", "union_tee.rs:", "never consumed"],
    );
}
