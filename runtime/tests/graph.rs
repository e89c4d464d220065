//! The graph runtime on real threads and rings, with its own extension
//! points only (a `Source`, a `Tail` over an `Outbox`, an `Operator`): every
//! record reaches its owner exactly once (also through tiny rings), an
//! operator's watermark is the minimum over its feeders, a panicking worker
//! fails the job instead of hanging it, and every worker runs on the CPU its
//! placement planned.

use air_runtime::data::ExchangeData;
use air_runtime::dataflow::{run_graph, Cx, Operator, Outbox, Source, SourcePoll, Stats, Tail};
use air_runtime::{JobConfig, RuntimeError};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Worker `me` yields `n` records `me * n + i` (100 a poll), with event
/// time `i * 10` (or `hold` for all of them); it can panic after `panic_after`
/// records, stay idle until `others` workers counted in `done` are done, and
/// count itself done in `done_flag`.
struct Counter {
    me: u64,
    n: u64,
    next: u64,
    panic_after: Option<u64>,
    wait_for: Option<(usize, Arc<AtomicUsize>)>,
    done_flag: Option<Arc<AtomicUsize>>,
}

impl Counter {
    fn new(me: usize, n: u64) -> Self {
        Counter {
            me: me as u64,
            n,
            next: 0,
            panic_after: None,
            wait_for: None,
            done_flag: None,
        }
    }
}

impl Source for Counter {
    type Item = u64;
    fn poll(&mut self, buf: &mut Vec<u64>, _max: usize) -> SourcePoll {
        buf.clear();
        if let Some(p) = self.panic_after {
            if self.next >= p {
                panic!("worker {} fails on purpose", self.me);
            }
        }
        let end = (self.next + 100).min(self.n);
        buf.extend((self.next..end).map(|i| self.me * self.n + i));
        self.next = end;
        if end < self.n {
            return SourcePoll::Ready;
        }
        if let Some((others, done)) = &self.wait_for {
            if done.load(Ordering::Acquire) < *others {
                return if buf.is_empty() {
                    SourcePoll::Idle
                } else {
                    SourcePoll::Ready
                };
            }
        }
        if let Some(done) = &self.done_flag {
            done.fetch_add(1, Ordering::Release);
        }
        SourcePoll::Done
    }
}

/// Sends record `v` to worker `v mod W`; at the end it waits `end_delay`
/// between its final watermark and its End frame.
struct ByResidue {
    out: Outbox<u64>,
    workers: u64,
    end_delay: Duration,
}

impl Tail<u64> for ByResidue {
    fn push(&mut self, v: u64, cx: &mut Cx<'_, '_>) {
        self.out.push((v % self.workers) as usize, v, cx)
    }
    fn watermark(&mut self, wm: u64, cx: &mut Cx<'_, '_>) {
        self.out.watermark(wm, cx)
    }
    fn tick(&mut self, cx: &mut Cx<'_, '_>) {
        self.out.flush(cx)
    }
    fn end(&mut self, final_wm: u64, cx: &mut Cx<'_, '_>) {
        std::thread::sleep(self.end_delay);
        self.out.end(final_wm, cx)
    }
    fn barrier(&mut self, id: u64, cx: &mut Cx<'_, '_>) {
        self.out.barrier(id, cx)
    }
}

/// What one worker's receiving operator saw.
#[derive(Default, Debug)]
struct Seen {
    me: u64,
    workers: u64,
    got: Vec<u64>,
    wms: Vec<u64>,
    /// Watermarks seen while `while_zero` was still 0.
    wms_while: Vec<u64>,
    misrouted: u64,
}

/// Records what arrives, in place.
struct Collect {
    seen: Rc<RefCell<Seen>>,
    while_zero: Option<Arc<AtomicUsize>>,
}

impl Operator for Collect {
    type In = u64;
    type Out = ();
    fn on_batch<E: FnMut(())>(&mut self, items: &[<u64 as ExchangeData>::Item], _: &mut E) {
        let mut s = self.seen.borrow_mut();
        for v in items {
            let v = v.to_native();
            if v % s.workers != s.me {
                s.misrouted += 1;
            }
            s.got.push(v);
        }
    }
    fn on_watermark<E: FnMut(())>(&mut self, wm: u64, _: &mut E) {
        let mut s = self.seen.borrow_mut();
        s.wms.push(wm);
        if let Some(z) = &self.while_zero {
            if z.load(Ordering::Acquire) == 0 {
                s.wms_while.push(wm);
            }
        }
    }
    fn report(&mut self, _stats: &mut Stats) {}
}

fn cfg(workers: usize, ring_bytes: usize, batch: usize) -> JobConfig {
    JobConfig {
        workers,
        ring_bytes,
        flush: Duration::from_micros(100),
        batch_records: batch,
        pin: false,
        ..JobConfig::default()
    }
}

/// The worker's graph: `source` → event time → by residue → `Collect`;
/// what `Collect` saw lands in `all` (indexed by worker) at the end.
fn wire(
    df: &air_runtime::dataflow::Dataflow,
    source: Counter,
    hold: Option<u64>,
    while_zero: Option<Arc<AtomicUsize>>,
    end_delay: Duration,
    all: &Arc<Mutex<Vec<Option<Seen>>>>,
) {
    let edge = df.new_edge("by residue");
    let out = df.outbox::<u64>(edge);
    let (me, workers) = (df.index(), df.workers());
    let n = source.n;
    df.source(source)
        .event_time(
            move |v| hold.unwrap_or_else(|| (v - (me as u64) * n) * 10),
            0,
        )
        .end_in(ByResidue {
            out,
            workers: workers as u64,
            end_delay,
        });
    let seen = Rc::new(RefCell::new(Seen {
        me: me as u64,
        workers: workers as u64,
        ..Seen::default()
    }));
    let (s, all) = (seen.clone(), all.clone());
    df.report_with(move |_| {
        let mut a = all.lock().unwrap();
        if a.len() < workers {
            a.resize_with(workers, || None);
        }
        a[me] = Some(std::mem::take(&mut *s.borrow_mut()));
    });
    df.consume(edge, Collect { seen, while_zero })
        .for_each(|()| {});
}

#[test]
fn every_record_reaches_its_owner_once() {
    for (workers, ring, batch) in [
        (1, 1 << 16, 64),
        (3, 1 << 16, 64),
        (4, 4096, 1024),
        (4, 4096, 7),
    ] {
        let n = 20_000u64;
        let all = Arc::new(Mutex::new(Vec::new()));
        let out = run_graph(&cfg(workers, ring, batch), |df| {
            wire(
                df,
                Counter::new(df.index(), n),
                None,
                None,
                Duration::ZERO,
                &all,
            )
        })
        .unwrap();
        let seen = std::mem::take(&mut *all.lock().unwrap());
        assert_eq!(seen.len(), workers);
        let mut every: Vec<u64> = Vec::new();
        let mut full_waits = 0;
        for (s, w) in seen.iter().zip(&out.workers) {
            let s = s.as_ref().expect("every worker reported");
            assert_eq!(s.misrouted, 0);
            assert_eq!(
                s.wms.last().copied(),
                Some(u64::MAX),
                "end-of-stream is the final watermark"
            );
            assert!(
                s.wms.windows(2).all(|w| w[0] < w[1]),
                "watermarks only advance: {:?}",
                s.wms
            );
            every.extend_from_slice(&s.got);
            full_waits += w.channels.ring_full_waits;
            assert_eq!(w.channels.records_in, s.got.len() as u64);
        }
        every.sort_unstable();
        let want: Vec<u64> = (0..workers as u64 * n).collect();
        assert_eq!(
            every, want,
            "{workers} workers, {ring}-byte rings: each record exactly once"
        );
        if ring <= 4096 && workers > 1 {
            assert!(full_waits > 0, "tiny rings must have pushed back");
        }
    }
}

#[test]
fn the_final_watermark_reaches_an_operator_once_when_end_comes_later() {
    // Every feeder sends its final watermark (MAX), then waits 100 ms
    // before its End frame: the receivers poll in between and see the
    // minimum at MAX with no input ended yet. `on_end` alone delivers it.
    let workers = 2;
    let all = Arc::new(Mutex::new(Vec::new()));
    run_graph(&cfg(workers, 1 << 16, 64), |df| {
        let c = Counter::new(df.index(), 1000);
        wire(df, c, None, None, Duration::from_millis(100), &all)
    })
    .unwrap();
    let seen = std::mem::take(&mut *all.lock().unwrap());
    for s in seen
        .iter()
        .map(|s| s.as_ref().expect("every worker reported"))
    {
        assert_eq!(s.wms.last().copied(), Some(u64::MAX));
        assert_eq!(
            s.wms.iter().filter(|&&w| w == u64::MAX).count(),
            1,
            "the final watermark once: {:?}",
            s.wms
        );
    }
}

#[test]
fn an_operators_watermark_is_the_minimum_over_its_feeders() {
    // Worker 0 holds its watermark at 5 and ends last; the others run ahead
    // and end (their end-of-stream is watermark MAX): every watermark an
    // operator sees while worker 0 has not ended is at most 5. (Once worker
    // 0 ended, the others' last watermarks may still be in flight, so a
    // higher one may follow before their end-of-stream arrives.)
    let done = Arc::new(AtomicUsize::new(0));
    let w0_done = Arc::new(AtomicUsize::new(0));
    let all = Arc::new(Mutex::new(Vec::new()));
    run_graph(&cfg(3, 1 << 16, 64), |df| {
        let mut c = Counter::new(df.index(), 50_000);
        let hold = if df.index() == 0 {
            c.wait_for = Some((2, done.clone()));
            c.done_flag = Some(w0_done.clone());
            Some(5)
        } else {
            c.done_flag = Some(done.clone());
            None
        };
        wire(df, c, hold, Some(w0_done.clone()), Duration::ZERO, &all)
    })
    .unwrap();
    let mut while_held = 0;
    for (w, s) in all.lock().unwrap().iter().enumerate() {
        let s = s.as_ref().unwrap();
        assert!(!s.wms.is_empty());
        for &wm in &s.wms_while {
            assert!(
                wm <= 5,
                "worker {w} saw watermark {wm} while worker 0 was at 5"
            );
        }
        while_held += s.wms_while.len();
        assert_eq!(s.wms.last().copied(), Some(u64::MAX));
    }
    assert!(while_held > 0, "some watermarks arrived while worker 0 ran");
}

#[test]
fn a_panicking_worker_fails_the_job_without_hanging() {
    let start = Instant::now();
    let all = Arc::new(Mutex::new(Vec::new()));
    let r = run_graph(&cfg(3, 4096, 16), |df| {
        let mut c = Counter::new(df.index(), 1_000_000);
        // Not while planning (the plan builds the graph but never polls).
        if df.index() == 1 {
            c.panic_after = Some(1_000);
        }
        wire(df, c, None, None, Duration::ZERO, &all)
    });
    match r {
        Err(RuntimeError::WorkerPanicked { worker, message }) => {
            assert_eq!(worker, 1);
            assert!(message.contains("on purpose"), "{message}");
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("a job with a panicking worker succeeded"),
    }
    // Every other worker notices within 10 s.
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "took {:?}",
        start.elapsed()
    );
}

#[test]
fn each_worker_thread_runs_on_exactly_its_planned_cpu() {
    let cpus = air_runtime::placement::available_cores();
    let workers = cpus.min(4);
    let mut c = cfg(workers, 1 << 16, 64);
    c.pin = true;
    let plan = air_runtime::placement::plan(workers, 1, 0, false);
    let seen = Mutex::new(Vec::new());
    let planner = std::thread::current().id();
    let all = Arc::new(Mutex::new(Vec::new()));
    run_graph(&c, |df| {
        // The graph is built on the worker's own thread, after pinning
        // (and once more on this thread, to plan it: not recorded).
        if std::thread::current().id() != planner {
            let mask = air_runtime::placement::current_affinity();
            let i = df.worker();
            seen.lock()
                .unwrap()
                .push((i.index, i.core, mask, i.placement.clone()));
        }
        wire(
            df,
            Counter::new(df.index(), 1000),
            None,
            None,
            Duration::ZERO,
            &all,
        )
    })
    .unwrap();
    let mut seen = seen.into_inner().unwrap();
    seen.sort_by_key(|s| s.0);
    assert_eq!(seen.len(), workers);
    for (w, core, mask, placed) in seen {
        let planned = plan.slots[w];
        assert_eq!(core, Some(planned.pu), "worker {w}");
        assert_eq!(mask, vec![planned.pu], "worker {w}'s thread affinity");
        assert_eq!(placed.pu, Some(planned.pu));
        assert_eq!(placed.core, Some(planned.core));
        assert_eq!(placed.numa, planned.numa);
        // The worker created (first touched) its input rings: the kernel
        // puts their pages on its NUMA node (when it answers at all).
        if let (false, Some(n)) = (placed.input_rings_numa.is_empty(), planned.numa) {
            assert_eq!(placed.input_rings_numa, vec![n], "worker {w}");
        }
    }
}
