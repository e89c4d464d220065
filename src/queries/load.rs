//! The report's `load` (issue 32): records each worker received at each
//! stage of the graph, the busiest over the mean, and what the senders did
//! with hot keys (`--rebalance`); its summary line.

use air_runtime::units::thousands;
use serde::{Deserialize, Serialize};
use std::io::Write;

/// A rank's part of the report's `load`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LoadPart {
    /// The graph's stages (the same at every rank): the operators its
    /// exchange edges feed.
    pub stages: Vec<air_runtime::dataflow::Stage>,
    /// Hot keys split at the rank's senders ([`air_runtime::hotkeys`]).
    pub hot: HotKeys,
    /// Key groups its operators moved with their state.
    #[serde(default)]
    pub moves: GroupMoves,
}

impl LoadPart {
    /// The stages and hot-key figures of a rank's graph job.
    pub fn of(out: &air_runtime::dataflow::GraphOutput) -> LoadPart {
        let st = &out.stats;
        LoadPart {
            stages: out.stages.clone(),
            hot: HotKeys {
                records: st.get("hot_records"),
                partials: st.get("hot_partials"),
                groups_max: st.get_max("hot_groups_max").unwrap_or(0),
                group_changes: st.get("hot_group_changes"),
            },
            moves: GroupMoves {
                moves: st.get("key_group_moves"),
                key_groups: st.get("key_groups_moved"),
                bytes: st.get("key_group_bytes_moved"),
                paused_us_max: st.get_max("key_group_move_paused_us").unwrap_or(0),
            },
        }
    }
}

/// What the senders of every-event windowed aggregates did with hot keys
/// (`--rebalance`; [`air_runtime::hotkeys`]): summed over workers, except
/// `groups_max`.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct HotKeys {
    /// Records of hot key groups aggregated at their senders (not sent).
    pub records: u64,
    /// Partials of those records sent to their owners, one per window,
    /// key and sender.
    pub partials: u64,
    /// The most key groups one sender judged hot at once.
    pub groups_max: u64,
    /// Key groups that turned hot or cold, summed over periods and senders.
    pub group_changes: u64,
}

impl HotKeys {
    /// Adds another rank's figures (`groups_max`: the larger).
    pub fn add(&mut self, o: &HotKeys) {
        self.records += o.records;
        self.partials += o.partials;
        self.groups_max = self.groups_max.max(o.groups_max);
        self.group_changes += o.group_changes;
    }
}

/// Key groups moved from worker to worker with their state at barriers
/// (runtime/src/dataflow/moves.rs): summed over workers, except
/// `paused_us_max`.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct GroupMoves {
    /// Moves: one per operator and worker at each barrier whose key group
    /// table changed.
    pub moves: u64,
    /// Key groups given to another worker (each counted once, at its old
    /// owner).
    pub key_groups: u64,
    /// Bytes of state sent from worker to worker.
    pub bytes: u64,
    /// The longest time one worker's operators held their input, summed
    /// over its moves, µs.
    pub paused_us_max: u64,
}

impl GroupMoves {
    /// Adds another rank's figures (`paused_us_max`: the larger).
    pub fn add(&mut self, o: &GroupMoves) {
        self.moves += o.moves;
        self.key_groups += o.key_groups;
        self.bytes += o.bytes;
        self.paused_us_max = self.paused_us_max.max(o.paused_us_max);
    }
}

/// The load of each worker at each stage of the graph (the report's
/// `load`): records received over the run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LoadReport {
    /// One per consuming operator, in edge order.
    pub stages: Vec<StageLoad>,
    /// The largest `max_over_mean` of the stages that are not
    /// `to_one_worker` (`null`: no such stage received a record).
    pub max_over_mean: Option<f64>,
    /// Hot keys: `--rebalance` on or off, its period, and what the
    /// senders did.
    pub rebalance: RebalanceReport,
    /// The busiest stage's load per period of wall time (`null`: no
    /// stage received a record, or the workers reported no periods).
    pub periods: Option<PeriodsLoad>,
}

/// The report's `load.periods`: the load of the busiest stage (the one of
/// `load.max_over_mean`) in each period of the senders' hot-key judgments
/// (`--rebalance-ms`, from the workers' start; merged pairwise, the period
/// doubled, in runs past 4096 periods): how the load changed during the
/// run, e.g. when hot keys moved (`--zipf-shift-ms`) and how soon the
/// judgments evened it again.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PeriodsLoad {
    /// The stage's name.
    pub stage: String,
    /// The period, ms.
    pub period_ms: u64,
    /// The first period's start, ms since the Unix epoch (the earliest
    /// worker's start).
    pub start_unix_ms: u64,
    /// Per period: the busiest worker's records at the stage in it over
    /// the mean over workers (`null`: no record in it).
    pub max_over_mean: Vec<Option<f64>>,
    /// Per period: records the stage received in it (every worker).
    pub records: Vec<u64>,
}

/// The report's `load.rebalance`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RebalanceReport {
    /// `--rebalance on` (hot key groups aggregated at their senders).
    pub on: bool,
    /// `--rebalance-ms`: how often each sender judges again, ms.
    pub period_ms: u64,
    /// What the senders did, over every rank.
    #[serde(flatten)]
    pub hot: HotKeys,
    /// Key groups moved with their state, over every rank.
    pub moves: GroupMoves,
}

/// One stage's load ([`LoadReport`]).
#[derive(Debug, Clone, Serialize)]
pub struct StageLoad {
    /// Its edges' names (two, `" + "`-joined, for a two-input operator).
    pub name: String,
    /// Its edges, indices into each worker's `records_in_by_edge`.
    pub edges: Vec<usize>,
    /// Results on their way to one writer (`collect`): one worker
    /// receives them all by design; left out of the top-level ratio.
    pub to_one_worker: bool,
    /// Records each worker received on its edges, in global worker order
    /// (every rank's workers).
    pub records_per_worker: Vec<u64>,
    /// The busiest worker's records over the mean over workers: 1.0 when
    /// even, the worker count when one worker got them all (`null`: no
    /// record).
    pub max_over_mean: Option<f64>,
}

impl LoadReport {
    /// The load of `stages` given each worker's records received per edge
    /// (`records_in_by_edge`, global worker order).
    pub fn of(
        stages: &[air_runtime::dataflow::Stage],
        per_worker: &[&[u64]],
        rebalance: RebalanceReport,
    ) -> Self {
        let stages: Vec<StageLoad> = stages
            .iter()
            .map(|s| {
                let records_per_worker: Vec<u64> =
                    per_worker.iter().map(|w| s.records_at(w)).collect();
                StageLoad {
                    name: s.name.clone(),
                    edges: s.edges.clone(),
                    to_one_worker: s.to_one_worker,
                    max_over_mean: air_runtime::dataflow::max_over_mean(&records_per_worker),
                    records_per_worker,
                }
            })
            .collect();
        let max_over_mean = LoadReport::busiest(&stages).and_then(|s| s.max_over_mean);
        LoadReport {
            stages,
            max_over_mean,
            rebalance,
            periods: None,
        }
    }

    /// Adds the busiest stage's load per period, given each worker's
    /// records per edge per period (global worker order; a worker whose
    /// period doubled fewer times is merged to the longest period).
    pub fn with_periods(mut self, per_worker: &[air_runtime::dataflow::PeriodRecords]) -> Self {
        let Some(stage) = LoadReport::busiest(&self.stages) else {
            return self;
        };
        let period_ms = per_worker.iter().map(|p| p.period_ms).max().unwrap_or(0);
        if period_ms == 0 || per_worker.iter().any(|p| p.period_ms == 0) {
            return self;
        }
        let rows: Vec<Vec<u64>> = per_worker
            .iter()
            .map(|p| {
                let factor = (period_ms / p.period_ms) as usize;
                p.coarsened(factor)
                    .iter()
                    .map(|edges| {
                        stage
                            .edges
                            .iter()
                            .map(|&e| edges.get(e).copied().unwrap_or(0))
                            .sum()
                    })
                    .collect()
            })
            .collect();
        let n = rows.iter().map(Vec::len).max().unwrap_or(0);
        let at = |k: usize| -> Vec<u64> {
            rows.iter()
                .map(|r| r.get(k).copied().unwrap_or(0))
                .collect()
        };
        let periods = PeriodsLoad {
            stage: stage.name.clone(),
            period_ms,
            start_unix_ms: per_worker
                .iter()
                .map(|p| p.start_unix_ms)
                .min()
                .unwrap_or(0),
            max_over_mean: (0..n)
                .map(|k| air_runtime::dataflow::max_over_mean(&at(k)))
                .collect(),
            records: (0..n).map(|k| at(k).iter().sum()).collect(),
        };
        self.periods = Some(periods);
        self
    }

    /// The stage with the largest `max_over_mean`, of those not
    /// `to_one_worker` that received a record (the first of equals).
    fn busiest(stages: &[StageLoad]) -> Option<&StageLoad> {
        stages
            .iter()
            .filter(|s| !s.to_one_worker)
            .filter_map(|s| s.max_over_mean.map(|m| (s, m)))
            .fold(None, |best: Option<(&StageLoad, f64)>, (s, m)| match best {
                Some((_, b)) if b >= m => best,
                _ => Some((s, m)),
            })
            .map(|(s, _)| s)
    }
}

/// The summary line of the load at the stages: the largest max/mean over
/// workers and where (none without an exchange edge that received a
/// record).
///
/// # Errors
/// Writing fails.
pub fn summary_load(load: &LoadReport, events: u64, out: &mut dyn Write) -> std::io::Result<()> {
    let hot = &load.rebalance.hot;
    let split = match hot.records {
        0 => String::new(),
        n => format!(
            "; hot keys: {} records aggregated at their senders ({:.0}% of the events), {} \
             partial{} sent, at most {} key group{} hot",
            thousands(n),
            100.0 * n as f64 / events.max(1) as f64,
            thousands(hot.partials),
            if hot.partials == 1 { "" } else { "s" },
            hot.groups_max,
            if hot.groups_max == 1 { "" } else { "s" }
        ),
    };
    let m = &load.rebalance.moves;
    let split = if m.moves == 0 {
        split
    } else {
        format!(
            "{split}; key groups moved: {} in {} move{}, {} of state, input held at most {} ms \
             per worker",
            thousands(m.key_groups),
            thousands(m.moves),
            if m.moves == 1 { "" } else { "s" },
            air_runtime::units::binary_bytes(m.bytes),
            thousands(m.paused_us_max / 1000)
        )
    };
    match LoadReport::busiest(&load.stages) {
        Some(s) => writeln!(
            out,
            "  load: max/mean {:.2} of records per worker at {:?} ({} worker{}){split}",
            s.max_over_mean.unwrap_or(1.0),
            s.name,
            s.records_per_worker.len(),
            if s.records_per_worker.len() == 1 {
                ""
            } else {
                "s"
            }
        )?,
        None => return Ok(()),
    }
    let Some(p) = &load.periods else {
        return Ok(());
    };
    let mut ratios: Vec<f64> = p.max_over_mean.iter().flatten().copied().collect();
    if ratios.len() < 2 {
        return Ok(());
    }
    let highest = ratios.iter().copied().fold(0.0, f64::max);
    ratios.sort_by(f64::total_cmp);
    writeln!(
        out,
        "  load per {} ms period ({} periods with records): max/mean median {:.2}, highest {:.2}",
        p.period_ms,
        ratios.len(),
        ratios[ratios.len() / 2],
        highest
    )
}
