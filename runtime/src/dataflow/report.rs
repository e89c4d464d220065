//! What a graph job reports: per-worker counters, maxima and histograms
//! ([`Stats`]), per worker ([`WorkerReport`]) and for the process
//! ([`GraphOutput`]).

use super::late::{LateLog, LateRecords, DISORDER_MAX};
use crate::metrics::{latency_histogram, ChannelMetrics, Histogram, LatencySummary};
use crate::topology::WorkerPlacement;
use serde::{Deserialize, Serialize};
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
    /// Records it received on each edge (indexed as
    /// [`GraphOutput::edges`]), records: its share of each edge's
    /// consumer's input, what [`Stage::records_at`] sums.
    pub records_in: Vec<u64>,
    /// Records it received on each edge in each period of the job's
    /// hot-key judgments (`JobConfig::rebalance`'s period, from its
    /// start): the load per period.
    pub records_in_periods: super::PeriodRecords,
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
    /// The operators the edges feed, one [`Stage`] each, in the order of
    /// their first edge: every edge is in exactly one.
    pub stages: Vec<Stage>,
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

/// One consuming operator of a graph and the edges that feed it: one edge
/// ([`super::Dataflow::consume`]), or two for a two-input operator
/// ([`super::Dataflow::consume2`]). Its load at a worker is the records that
/// worker received on these edges ([`Stage::records_at`]). Side edges (late
/// records, a broadcast) are stages too; edges to one worker
/// ([`Stage::to_one_worker`]) are by design all at one worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stage {
    /// Its edges' names, joined by `" + "` (e.g. `"window records"`,
    /// `"join left + join right"`).
    pub name: String,
    /// Its edges, indices into [`GraphOutput::edges`], ascending.
    pub edges: Vec<usize>,
    /// Every edge of it gathers ([`super::Dataflow::new_gather_edge`]):
    /// results on their way to one writer (`collect`), so one worker
    /// receives them all whatever the keys. Its imbalance says nothing of
    /// key hashing.
    pub to_one_worker: bool,
}

impl Stage {
    /// Records a worker received on this stage's edges, given what it
    /// received per edge ([`WorkerReport::records_in`]; an edge past its
    /// end counts 0).
    pub fn records_at(&self, records_in: &[u64]) -> u64 {
        self.edges
            .iter()
            .map(|&e| records_in.get(e).copied().unwrap_or(0))
            .sum()
    }
}

/// The largest of `per_worker` over their mean: 1.0 when every worker got
/// the same, the worker count when one got everything. `None` without a
/// worker or a record (no load to compare).
pub fn max_over_mean(per_worker: &[u64]) -> Option<f64> {
    let total: u64 = per_worker.iter().sum();
    if total == 0 {
        return None;
    }
    let max = *per_worker.iter().max()? as f64;
    Some(max * per_worker.len() as f64 / total as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_load_sums_its_edges_and_compares_to_the_mean() {
        let s = Stage {
            name: "join left + join right".into(),
            edges: vec![1, 2],
            to_one_worker: false,
        };
        assert_eq!(s.records_at(&[100, 3, 4]), 7);
        assert_eq!(s.records_at(&[100, 3]), 3);
        assert_eq!(max_over_mean(&[5, 5, 5, 5]), Some(1.0));
        assert_eq!(max_over_mean(&[8, 0, 0, 0]), Some(4.0));
        assert_eq!(max_over_mean(&[3, 1]), Some(1.5));
        assert_eq!(max_over_mean(&[0, 0]), None);
        assert_eq!(max_over_mean(&[]), None);
    }
}

/// The stages of a built graph: one per consuming operator, its edges
/// (two for a two-input operator), in the order of their first edge.
pub(crate) fn stage_list(b: &super::stream::Builder) -> Vec<Stage> {
    let mut stages: Vec<Stage> = Vec::new();
    // The stage of each edge seen so far.
    let mut of = vec![usize::MAX; b.edges.len()];
    for (k, e) in b.edges.iter().enumerate() {
        match e.partner.filter(|&p| p < k) {
            Some(p) => {
                let s = &mut stages[of[p]];
                s.edges.push(k);
                s.name = format!("{} + {}", s.name, e.name);
                s.to_one_worker &= e.gathers;
                of[k] = of[p];
            }
            None => {
                of[k] = stages.len();
                stages.push(Stage {
                    name: e.name.clone(),
                    edges: vec![k],
                    to_one_worker: e.gathers,
                });
            }
        }
    }
    stages
}
