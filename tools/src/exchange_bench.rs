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
use air_runtime::{Downstream, Emitter, JobConfig, Progress, Upstream, WorkerInfo};
use anyhow::{bail, Result};

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
#[derive(Clone, Copy, Debug, rkyv::Archive, rkyv::Serialize)]
#[repr(C)]
pub struct Rec {
    /// Sequence number at its sender.
    pub key: u64,
    /// A value the receiver sums.
    pub value: u64,
}

struct Sender {
    next: u64,
    records: u64,
}

impl Upstream<Rec> for Sender {
    fn step(&mut self, out: &mut Emitter<'_, '_, Rec>) -> Progress {
        let w = out.workers() as u64;
        let end = (self.next + 1024).min(self.records);
        for i in self.next..end {
            out.emit_to((i % w) as usize, Rec { key: i, value: i });
        }
        self.next = end;
        if end == self.records {
            Progress::Done
        } else {
            Progress::Busy
        }
    }
    fn watermark(&self) -> u64 {
        0
    }
}

#[derive(Default)]
struct Receiver {
    records: u64,
    sum: u64,
}

impl Downstream<Rec> for Receiver {
    fn on_batch(&mut self, _from: usize, items: &[ArchivedRec]) {
        self.records += items.len() as u64;
        for r in items {
            self.sum = self.sum.wrapping_add(r.value.to_native());
        }
    }
    fn on_watermark(&mut self, _wm: u64) {}
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
        let out = air_runtime::run::<Rec, _, _, _>(cfg, |_info: &WorkerInfo| {
            (
                Sender {
                    next: 0,
                    records: args.records,
                },
                Receiver::default(),
            )
        })?;
        workers = out.first().map_or(0, |o| o.info.workers);
        let got: u64 = out.iter().map(|o| o.downstream.records).sum();
        let ns = out
            .iter()
            .map(|o| o.elapsed.as_nanos() as u64)
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
