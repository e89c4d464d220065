//! The runtime on real threads and rings: every record reaches its owner
//! exactly once (also through tiny rings), the downstream's watermark is the
//! minimum over its inputs, and a panicking worker fails the job instead of
//! hanging it.

use air_runtime::{
    run, Downstream, Emitter, ExchangeData, JobConfig, Progress, RuntimeError, Upstream, WorkerInfo,
};
use std::time::{Duration, Instant};

/// Emits `n` records `me * n + i` keyed by their value, one batch of 100 per step.
struct Counter {
    me: u64,
    n: u64,
    next: u64,
    wm: u64,
    hold_wm_at: Option<u64>,
    panic_after: Option<u64>,
    /// Stay idle (not done) until this many other workers are done.
    wait_for: Option<(usize, std::sync::Arc<std::sync::atomic::AtomicUsize>)>,
    done: Option<std::sync::Arc<std::sync::atomic::AtomicUsize>>,
}

impl Upstream<u64> for Counter {
    fn step(&mut self, out: &mut Emitter<'_, '_, u64>) -> Progress {
        if let Some(p) = self.panic_after {
            if self.next >= p {
                panic!("worker {} fails on purpose", self.me);
            }
        }
        let end = (self.next + 100).min(self.n);
        for i in self.next..end {
            let v = self.me * self.n + i;
            out.emit(v, v);
        }
        self.next = end;
        self.wm = match self.hold_wm_at {
            Some(h) => h,
            None => self.next * 10,
        };
        if self.next < self.n {
            return Progress::Busy;
        }
        if let Some((others, done)) = &self.wait_for {
            if done.load(std::sync::atomic::Ordering::Acquire) < *others {
                return Progress::Idle;
            }
        }
        if let Some(done) = &self.done {
            done.fetch_add(1, std::sync::atomic::Ordering::Release);
        }
        Progress::Done
    }
    fn watermark(&self) -> u64 {
        self.wm
    }
}

#[derive(Default)]
struct Collect {
    me: u64,
    workers: u64,
    got: Vec<u64>,
    wms: Vec<u64>,
    /// Watermarks seen while this counter was still 0 (see the watermark test).
    wms_while: Vec<u64>,
    while_zero: Option<std::sync::Arc<std::sync::atomic::AtomicUsize>>,
    misrouted: u64,
}

impl Downstream<u64> for Collect {
    fn on_batch(&mut self, _from: usize, items: &[<u64 as ExchangeData>::Item]) {
        for v in items {
            let v = v.to_native();
            if v % self.workers != self.me {
                self.misrouted += 1;
            }
            self.got.push(v);
        }
    }
    fn on_watermark(&mut self, wm: u64) {
        self.wms.push(wm);
        if let Some(z) = &self.while_zero {
            if z.load(std::sync::atomic::Ordering::Acquire) == 0 {
                self.wms_while.push(wm);
            }
        }
    }
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

fn counter(info: &WorkerInfo, n: u64) -> (Counter, Collect) {
    (
        Counter {
            me: info.index as u64,
            n,
            next: 0,
            wm: 0,
            hold_wm_at: None,
            panic_after: None,
            wait_for: None,
            done: None,
        },
        Collect {
            me: info.index as u64,
            workers: info.workers as u64,
            ..Default::default()
        },
    )
}

#[test]
fn every_record_reaches_its_owner_once() {
    for (workers, ring, batch) in [
        (1, 1 << 16, 64),
        (3, 1 << 16, 64),
        (4, 1024, 1024),
        (4, 256, 7),
    ] {
        let n = 20_000u64;
        let outs = run::<u64, _, _, _>(&cfg(workers, ring, batch), |i| counter(i, n)).unwrap();
        let mut all: Vec<u64> = Vec::new();
        let mut full_waits = 0;
        for o in &outs {
            assert_eq!(o.downstream.misrouted, 0);
            assert_eq!(
                *o.downstream.wms.last().unwrap(),
                u64::MAX,
                "end-of-stream is the final watermark"
            );
            assert!(
                o.downstream.wms.windows(2).all(|w| w[0] < w[1]),
                "watermarks only advance"
            );
            all.extend_from_slice(&o.downstream.got);
            full_waits += o.channels.ring_full_waits;
            assert_eq!(o.channels.records_in, o.downstream.got.len() as u64);
        }
        all.sort_unstable();
        let want: Vec<u64> = (0..workers as u64 * n).collect();
        assert_eq!(
            all, want,
            "{workers} workers, {ring}-byte rings: each record exactly once"
        );
        if ring <= 1024 {
            assert!(full_waits > 0, "tiny rings must have pushed back");
        }
    }
}

#[test]
fn downstream_watermark_is_the_minimum_over_inputs() {
    // Worker 0 holds its watermark at 5 and ends last; the others run ahead
    // and end (their end-of-stream is watermark MAX): every watermark a
    // downstream sees while worker 0 has not ended is at most 5. (Once worker
    // 0 ended, the others' last watermarks may still be in flight, so a
    // higher one may follow before their end-of-stream arrives.)
    let done = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let w0_done = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let outs = run::<u64, _, _, _>(&cfg(3, 1 << 16, 64), |i| {
        let (mut up, mut down) = counter(i, 50_000);
        if i.index == 0 {
            up.hold_wm_at = Some(5);
            up.wait_for = Some((2, done.clone()));
            up.done = Some(w0_done.clone());
        } else {
            up.done = Some(done.clone());
        }
        down.while_zero = Some(w0_done.clone());
        (up, down)
    })
    .unwrap();
    let mut seen = 0;
    for o in &outs {
        let wms = &o.downstream.wms;
        assert!(!wms.is_empty());
        for &w in &o.downstream.wms_while {
            assert!(
                w <= 5,
                "worker {} saw watermark {w} while worker 0 was at 5",
                o.info.index
            );
        }
        seen += o.downstream.wms_while.len();
        assert_eq!(*wms.last().unwrap(), u64::MAX);
    }
    assert!(seen > 0, "some watermarks arrived while worker 0 ran");
}

#[test]
fn a_panicking_worker_fails_the_job_without_hanging() {
    let start = Instant::now();
    let r = run::<u64, _, _, _>(&cfg(3, 1024, 16), |i| {
        let (mut up, down) = counter(i, 1_000_000);
        if i.index == 1 {
            up.panic_after = Some(1_000);
        }
        (up, down)
    });
    match r {
        Err(RuntimeError::WorkerPanicked { worker, message }) => {
            assert_eq!(worker, 1);
            assert!(message.contains("on purpose"), "{message}");
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("a job with a panicking worker succeeded"),
    }
    // Issue 7's bound: every other worker notices within 10 s.
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
    let seen = std::sync::Mutex::new(Vec::new());
    run::<u64, _, _, _>(&c, |i| {
        // `make` runs on the worker's own thread, after pinning.
        let mask = air_runtime::placement::current_affinity();
        seen.lock()
            .unwrap()
            .push((i.index, i.core, mask, i.placement.clone()));
        counter(i, 1000)
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
