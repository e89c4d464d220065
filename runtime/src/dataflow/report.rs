//! What a graph job reports: per-worker counters, maxima and histograms
//! ([`Stats`]), per worker ([`WorkerReport`]) and for the process
//! ([`GraphOutput`]).

use super::late::{LateLog, LateRecords, DISORDER_MAX};
use crate::metrics::{latency_histogram, ChannelMetrics, Histogram, LatencySummary};
use crate::topology::WorkerPlacement;
use std::collections::BTreeMap;
use std::time::Duration;

/// Counters and a latency histogram, per worker, merged over the job.
/// Operators add what they counted when the job ends; counter names are
/// the report's field names (`source_records`, `late_records`,
/// `sink_rows`, `unfired_windows`, …).
#[derive(Debug, Clone)]
pub struct Stats {
    /// Named counters (summed over workers).
    pub counters: BTreeMap<String, u64>,
    /// Named maxima (the largest over workers), e.g. lags.
    pub maxima: BTreeMap<String, u64>,
    /// Latency of result rows, ms (the YSB definition: emit time minus the
    /// newest event time in the row's window), where an operator measures it.
    pub latency: Histogram<u64>,
    /// Late records by operator ([`LateLog`]): what [`LateLog::summary`]
    /// prints at the end of a run.
    pub late: LateLog,
    /// Checkpoint barrier alignment times, µs, one sample per edge and
    /// barrier at each worker: from the first input's barrier to the last
    /// one's ([`crate::metrics::alignment_histogram`]).
    pub alignment: Histogram<u64>,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            counters: BTreeMap::new(),
            maxima: BTreeMap::new(),
            latency: latency_histogram(),
            late: LateLog::default(),
            alignment: crate::metrics::alignment_histogram(),
        }
    }
}

impl Stats {
    /// Adds `v` to counter `name`.
    pub fn add(&mut self, name: &str, v: u64) {
        *self.counters.entry(name.to_string()).or_insert(0) += v;
    }

    /// Counter `name` (0 if nobody counted it).
    pub fn get(&self, name: &str) -> u64 {
        self.counters.get(name).copied().unwrap_or(0)
    }

    /// Raises maximum `name` to `v`.
    pub fn max(&mut self, name: &str, v: u64) {
        let m = self.maxima.entry(name.to_string()).or_insert(0);
        *m = (*m).max(v);
    }

    /// Maximum `name`, if anybody set it.
    pub fn get_max(&self, name: &str) -> Option<u64> {
        self.maxima.get(name).copied()
    }

    /// Adds `o` into `self` (counters summed, maxima kept).
    pub fn merge(&mut self, o: &Stats) {
        for (k, v) in &o.counters {
            self.add(k, *v);
        }
        for (k, v) in &o.maxima {
            self.max(k, *v);
        }
        let _ = self.latency.add(&o.latency);
        let _ = self.alignment.add(&o.alignment);
        self.late.merge(&o.late);
    }

    /// Records `l` late at the operator `label` (also counted in
    /// `late_records`).
    pub fn add_late(&mut self, label: &str, l: Option<LateRecords>) {
        if let Some(l) = l {
            self.add("late_records", l.records);
            self.late.add(label, l);
        }
    }

    /// The lines to print about late records (none if none was late):
    /// [`LateLog::summary`] with the disorder the event-time stages saw.
    pub fn late_summary(&self) -> Vec<String> {
        self.late.summary(self.get_max(DISORDER_MAX))
    }

    /// Latency percentiles (none without samples).
    pub fn latency_summary(&self) -> LatencySummary {
        LatencySummary::of(&self.latency)
    }
}

/// What one worker of a graph job reports.
#[derive(Debug, Clone)]
pub struct WorkerReport {
    /// Global worker index.
    pub index: usize,
    /// Where it ran.
    pub placement: WorkerPlacement,
    /// Its channel counters over every edge.
    pub channels: ChannelMetrics,
    /// Its operators' counters and latency.
    pub stats: Stats,
    /// Wall time from its start to its end.
    pub elapsed: Duration,
    /// Its sources were stopped early ([`crate::stop`]).
    pub stopped: bool,
}

/// What a graph job reports, for this process's workers.
#[derive(Debug, Clone)]
pub struct GraphOutput {
    /// The graph's exchange edges, by index: their names.
    pub edges: Vec<String>,
    /// Each edge's ring capacity, bytes.
    pub edge_ring_bytes: Vec<usize>,
    /// Ring memory of this process, bytes: over the edges, job workers ×
    /// local workers × the edge's ring capacity (each ring is one
    /// consumer's input).
    pub ring_bytes: u64,
    /// The channel figures of this process's rank and node
    /// ([`crate::plan`], what `air plan` prints for the job's shape).
    pub plan: crate::plan::ChannelPlan,
    /// What this process's channel setup made (to hold against `plan`).
    pub created: crate::plan::Created,
    /// Per worker of this process, in worker order.
    pub workers: Vec<WorkerReport>,
    /// Counters and latency merged over this process's workers.
    pub stats: Stats,
    /// Channel counters merged over this process's workers.
    pub channels: ChannelMetrics,
    /// Longest worker wall time.
    pub elapsed: Duration,
    /// The job was stopped early (SIGINT/SIGTERM): only windows every input
    /// read past fired.
    pub stopped: bool,
    /// The checkpoint this run resumed from (`JobConfig::checkpoint`).
    pub resumed_from: Option<u64>,
}
