//! `air bench exchange`: all-to-all records per second between the workers
//! of a job, through the runtime's real exchange (staging batches, rkyv
//! archives in ring frames, in-band end-of-stream), on whatever tiers the
//! job's placement gives: thread tier alone (`air bench exchange`), node tier
//! between ranks (`mpirun -np N air bench exchange`), network tier
//! (`… --force-network`).
//!
//! Every worker emits `--records` records of 16 bytes (key, value), record
//! `i` to worker `i mod W_total`, and reads every record sent to it (summing
//! the values in place). Records/s = all records / the longest worker's wall
//! time, median of `--repeats` jobs.

use crate::ring_bench::util::{human_rate, median};
use air_runtime::data::ExchangeData;
use air_runtime::dataflow::{run_graph, Cx, Operator, Outbox, Source, SourcePoll, Tail};
use air_runtime::JobConfig;
use anyhow::{bail, Result};
use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Arguments of `air bench exchange`.
#[derive(clap::Args, Debug, Clone)]
pub struct ExchangeBenchArgs {
    /// Records each worker sends.
    #[arg(long, default_value_t = 20_000_000)]
    pub records: u64,
    /// Jobs to run; the median is reported.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
}

/// The 16-byte record of the benchmark.
#[derive(Clone, Copy, Debug, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[repr(C)]
pub struct Rec {
    /// Sequence number at its sender.
    pub key: u64,
    /// A value the receiver sums.
    pub value: u64,
}

/// A worker's records `0..records`, 1024 a poll.
struct Numbers {
    next: u64,
    records: u64,
}

impl Source for Numbers {
    type Item = Rec;
    fn poll(&mut self, buf: &mut Vec<Rec>, max: usize) -> SourcePoll {
        buf.clear();
        let end = (self.next + max as u64).min(self.records);
        buf.extend((self.next..end).map(|i| Rec { key: i, value: i }));
        self.next = end;
        if end == self.records {
            SourcePoll::Done
        } else {
            SourcePoll::Ready
        }
    }
}

/// Sends record `i` to worker `i mod W` (no hashing: the channel's cost
/// alone).
struct RoundRobin {
    out: Outbox<Rec>,
    workers: u64,
}

impl Tail<Rec> for RoundRobin {
    #[inline(always)]
    fn push(&mut self, r: Rec, cx: &mut Cx<'_, '_>) {
        self.out.push((r.key % self.workers) as usize, r, cx)
    }
    fn watermark(&mut self, wm: u64, cx: &mut Cx<'_, '_>) {
        self.out.watermark(wm, cx)
    }
    fn tick(&mut self, cx: &mut Cx<'_, '_>) {
        self.out.flush(cx)
    }
    fn end(&mut self, final_wm: u64, cx: &mut Cx<'_, '_>) {
        self.out.end(final_wm, cx)
    }
    fn barrier(&mut self, id: u64, cx: &mut Cx<'_, '_>) {
        self.out.barrier(id, cx)
    }
}

/// Counts and sums the records it receives, read in place.
struct Receiver {
    records: Rc<Cell<u64>>,
    sum: u64,
}

impl Operator for Receiver {
    type In = Rec;
    type Out = ();
    #[inline]
    fn on_batch<E: FnMut(())>(&mut self, items: &[<Rec as ExchangeData>::Item], _emit: &mut E) {
        self.records.set(self.records.get() + items.len() as u64);
        for r in items {
            self.sum = self.sum.wrapping_add(r.value.to_native());
        }
    }
    fn on_watermark<E: FnMut(())>(&mut self, _wm: u64, _emit: &mut E) {}
}

/// Figures of one `air bench exchange` (the whole job, all ranks).
#[derive(Debug, Clone)]
pub struct ExchangeFigures {
    /// Workers in the job.
    pub workers: usize,
    /// Records moved per second (median job).
    pub records_per_s: f64,
    /// Payload bytes per second (16 bytes a record).
    pub bytes_per_s: f64,
}

/// Runs the benchmark on this process's share of `cfg` (collective under
/// MPI); prints on rank `0` (`rank` of `ranks`). `all_max` combines a value
/// over every rank (maximum; identity when alone), `all_sum` sums.
pub fn run(
    args: &ExchangeBenchArgs,
    cfg: &JobConfig,
    rank: usize,
    all_max: &dyn Fn(u64) -> u64,
    all_sum: &dyn Fn(u64) -> u64,
) -> Result<ExchangeFigures> {
    if args.repeats == 0 || args.records == 0 {
        bail!("--records and --repeats must be positive");
    }
    let mut rates = Vec::new();
    let mut workers = 0;
    for _ in 0..args.repeats {
        let received = Arc::new(AtomicU64::new(0));
        let job_workers = AtomicU64::new(0);
        let out = run_graph(cfg, |df| {
            job_workers.store(df.workers() as u64, Ordering::Relaxed);
            let edge = df.new_edge("exchange");
            let out = df.outbox::<Rec>(edge);
            let workers = df.workers() as u64;
            df.source(Numbers {
                next: 0,
                records: args.records,
            })
            .end_in(RoundRobin { out, workers });
            let records = Rc::new(Cell::new(0u64));
            let (r, total) = (records.clone(), received.clone());
            df.report_with(move |_| {
                total.fetch_add(r.get(), Ordering::Relaxed);
            });
            df.consume(edge, Receiver { records, sum: 0 })
                .for_each(|()| {});
        })?;
        workers = job_workers.load(Ordering::Relaxed) as usize;
        let got = received.load(Ordering::Relaxed);
        let ns = out
            .workers
            .iter()
            .map(|w| w.elapsed.as_nanos() as u64)
            .max()
            .unwrap_or(1);
        let (got, ns) = (all_sum(got), all_max(ns));
        let want = args.records * workers as u64;
        if got != want {
            bail!("received {got} records, sent {want}");
        }
        rates.push(got as f64 / (ns as f64 / 1e9));
    }
    let r = median(rates);
    let f = ExchangeFigures {
        workers,
        records_per_s: r,
        bytes_per_s: r * 16.0,
    };
    if rank == 0 {
        println!(
            "exchange: {} workers, {} records/s ({} per worker), {} MB/s of records",
            f.workers,
            human_rate(f.records_per_s),
            human_rate(f.records_per_s / f.workers.max(1) as f64),
            (f.bytes_per_s / 1e6).round()
        );
    }
    Ok(f)
}
