//! Late records, per operator: how many, the first one, and the disorder
//! the event-time stages saw, so a job never drops records silently.
//!
//! Every operator that judges lateness (a window, a windowed join, a
//! session, an event-time stage that drops records behind its watermark
//! on request) adds a [`LateRecords`] entry under its label (the place in
//! the user's program that made it, e.g. `window at src/main.rs:21:14`) to
//! [`Stats::late`](super::Stats). [`LateLog::summary`] turns the merged
//! entries into the lines a run prints on stderr, with a suggested delay
//! taken from the largest disorder seen ([`DISORDER_MAX`]).
//!
//! ```
//! use air_runtime::dataflow::{LateLog, LateRecords};
//!
//! let mut log = LateLog::default();
//! log.add("window at main.rs:9:10", LateRecords::first(1_200, 5_000));
//! log.add("window at main.rs:9:10", LateRecords::first(900, 4_000));
//! let e = log.entries["window at main.rs:9:10"];
//! assert_eq!((e.records, e.first_time_ms, e.first_watermark_ms), (2, 900, 4_000));
//! let lines = log.summary(Some(6_500));
//! assert!(lines[0].contains("2 late record(s)"), "{lines:?}");
//! assert!(lines.last().unwrap().contains("6500"), "{lines:?}");
//! ```

use std::collections::BTreeMap;

/// The maximum (over workers, [`Stats::maxima`](super::Stats)) that
/// event-time stages keep: the largest lag of a record behind the newest
/// event time its stage had seen before it, ms (the stream's disorder; a
/// watermark delay at least this large makes no record late).
pub const DISORDER_MAX: &str = "event_time_disorder_max_ms";

/// Late records of one operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LateRecords {
    /// Records judged late (dropped, or sent to a side stream).
    pub records: u64,
    /// Event time of the first late record, ms: of those merged, the one
    /// that fell behind the smallest watermark (the earliest in the
    /// stream's progress).
    pub first_time_ms: u64,
    /// The watermark that record fell behind, ms.
    pub first_watermark_ms: u64,
    /// They went to the operator's side stream of late records (the user
    /// has them: not lost) instead of being dropped.
    #[serde(default)]
    pub side_output: bool,
}

impl LateRecords {
    /// One late record at event time `time_ms` behind watermark `wm_ms`.
    pub fn first(time_ms: u64, wm_ms: u64) -> Self {
        LateRecords {
            records: 1,
            first_time_ms: time_ms,
            first_watermark_ms: wm_ms,
            side_output: false,
        }
    }

    /// Counts one more late record (`time_ms` behind `wm_ms`), keeping the
    /// first.
    #[cold]
    pub fn count(slot: &mut Option<LateRecords>, time_ms: u64, wm_ms: u64) {
        match slot {
            Some(l) => l.records += 1,
            None => *slot = Some(LateRecords::first(time_ms, wm_ms)),
        }
    }

    /// Adds `o`: counts summed, the first of the two kept.
    pub fn merge(&mut self, o: &LateRecords) {
        if (o.first_watermark_ms, o.first_time_ms) < (self.first_watermark_ms, self.first_time_ms) {
            self.first_time_ms = o.first_time_ms;
            self.first_watermark_ms = o.first_watermark_ms;
        }
        self.records += o.records;
    }
}

/// Late records by operator label.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LateLog {
    /// Entries by the label of the operator that judged them.
    pub entries: BTreeMap<String, LateRecords>,
}

impl LateLog {
    /// Adds `l` under `label`.
    pub fn add(&mut self, label: &str, l: LateRecords) {
        if l.records == 0 {
            return;
        }
        match self.entries.get_mut(label) {
            Some(e) => e.merge(&l),
            None => {
                self.entries.insert(label.to_string(), l);
            }
        }
    }

    /// Adds every entry of `o`.
    pub fn merge(&mut self, o: &LateLog) {
        for (k, v) in &o.entries {
            self.add(k, *v);
        }
    }

    /// Late records over every operator.
    pub fn total(&self) -> u64 {
        self.entries.values().map(|e| e.records).sum()
    }

    /// Late records dropped (not sent to a side stream): lost to the rows.
    pub fn dropped(&self) -> u64 {
        self.entries
            .values()
            .filter(|e| !e.side_output)
            .map(|e| e.records)
            .sum()
    }

    /// The lines a run prints when records were late (none otherwise): one
    /// per operator (count, first late record's event time and the
    /// watermark it fell behind), then a suggestion from `disorder_ms`
    /// (the largest lag behind the newest event time, [`DISORDER_MAX`]):
    /// a watermark delay of at least that makes none late, or an allowed
    /// lateness.
    pub fn summary(&self, disorder_ms: Option<u64>) -> Vec<String> {
        let mut lines = Vec::new();
        for (label, e) in &self.entries {
            let side = if e.side_output {
                ", sent to its side output"
            } else {
                ""
            };
            lines.push(format!(
                "{} late record(s) at the {label}{side} (first: event time {} ms, behind \
                 watermark {} ms)",
                e.records, e.first_time_ms, e.first_watermark_ms
            ));
        }
        if lines.is_empty() {
            return lines;
        }
        match disorder_ms {
            Some(d) if d > 0 => lines.push(format!(
                "records came up to {d} ms behind the newest event time: a watermark delay \
                 (max_delay_ms of event_time, air run's --max-delay-ms) of {d} or more, or an \
                 allowed lateness (allowed_lateness) covering it, keeps them"
            )),
            _ => lines.push(
                "raise the watermark delay (max_delay_ms of event_time, air run's \
                 --max-delay-ms) or allow lateness (allowed_lateness) to keep them"
                    .to_string(),
            ),
        }
        lines
    }
}
