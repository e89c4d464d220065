//! YSB on `air`'s peers, side by side with `air` in one run (issue 8).
//!
//! The same query as `air run ysb --event-time synthetic` — keep views, join
//! `ad_id` to its campaign (unknown ads dropped), count per campaign per
//! tumbling event-time window — written on two other engines:
//!
//! - [`timely_ysb`]: timely-dataflow, with local pre-aggregation
//!   ([`Mode::PreAggregated`]) or with every view crossing the exchange
//!   ([`Mode::EveryEvent`], the equivalent of `air run ysb --shuffle`);
//! - [`channel_ysb`]: a plain pipeline of bounded crossbeam channels, in the
//!   same two modes.
//!
//! Every peer worker `w` of `W` runs [`Front`]: the very generator shard that
//! `air run ysb --workers W` worker `w` runs (same seed, same event budget,
//! same deterministic event times), the same filter, campaign lookup and
//! watermark rule. Rows come back as [`Row`]s in `air`'s CSV order, so a
//! peer's result can be compared with `air`'s `--out` file exactly;
//! [`reference`] computes the expected rows sequentially. [`air_run`] runs
//! the `air` binary itself.
#![deny(missing_docs)]

use air_operators::sources::ysb::{
    uuid_to_string, Campaigns, EventTimeMode, EventType, YsbEvent, YsbGenConfig, YsbGenerator,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

pub mod air_run;
pub mod channel_ysb;
pub mod timely_ysb;

/// Records taken from the generator per step: `air`'s default `--batch`.
pub const BATCH: usize = 1024;

/// What a YSB run computes: the job every engine runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct YsbSpec {
    /// Generator seed (`air run ysb --seed`); the campaigns come from it too.
    pub seed: u64,
    /// Events of the whole job (`--events`).
    pub events: u64,
    /// Worker threads (`--workers`).
    pub workers: usize,
    /// Tumbling window size, ms (`--window-ms`).
    pub window_ms: u64,
    /// Events per second of event time for the whole job: `air`'s synthetic
    /// event time without `--rate` (1 000 000).
    pub events_per_s: u64,
    /// Bounded out-of-orderness, ms (`--max-delay-ms`, 0 by default).
    pub max_delay_ms: u64,
}

impl YsbSpec {
    /// `air run ysb --event-time synthetic --events EVENTS --workers WORKERS`
    /// with every other option at its default.
    pub fn new(events: u64, workers: usize) -> YsbSpec {
        YsbSpec {
            seed: 1,
            events,
            workers,
            window_ms: 10_000,
            events_per_s: 1_000_000,
            max_delay_ms: 0,
        }
    }

    /// The campaigns `air run ysb --seed S` uses (no `--campaigns` file).
    pub fn campaigns(&self) -> Arc<Campaigns> {
        Arc::new(Campaigns::ysb(self.seed))
    }

    /// The generator configuration of the job (synthetic event time).
    pub fn gen_config(&self, campaigns: &Campaigns) -> YsbGenConfig {
        YsbGenConfig::new(self.seed, campaigns)
            .with_events(Some(self.events))
            .with_event_time(EventTimeMode::Deterministic {
                start_ms: 0,
                events_per_s: self.events_per_s,
            })
    }

    /// The start of the window holding event time `t`.
    #[inline(always)]
    pub fn window_of(&self, t: u64) -> u64 {
        t - t % self.window_ms
    }
}

/// How the aggregate reaches the key's owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Each worker counts per (window, campaign) and sends one partial per
    /// pair when the window closes (`air run ysb`).
    PreAggregated,
    /// Every view is sent to its campaign's owner, which counts it
    /// (`air run ysb --shuffle`).
    EveryEvent,
}

impl Mode {
    /// Both modes.
    pub const ALL: [Mode; 2] = [Mode::PreAggregated, Mode::EveryEvent];

    /// The name printed in tables.
    pub fn name(self) -> &'static str {
        match self {
            Mode::PreAggregated => "pre-aggregated",
            Mode::EveryEvent => "every event exchanged",
        }
    }
}

/// The worker that owns campaign `campaign` among `workers`: `air`'s rule
/// (`mix64(key) % workers`), so every engine balances the keys alike.
#[inline(always)]
pub fn owner_hash(campaign: u32) -> u64 {
    air_runtime::mix64(campaign as u64)
}

/// One result row, as `air run ysb --out` writes it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Deserialize)]
pub struct Row {
    /// Window start, ms of event time.
    pub window_start_ms: u64,
    /// Campaign UUID.
    pub campaign_id: String,
    /// Views of the campaign's ads in the window.
    pub count: u64,
}

/// Turns `(window_start, campaign index, count)` triples into rows in `air`'s
/// order (window, then campaign UUID string), merging duplicates and
/// dropping zero counts.
pub fn to_rows(
    campaigns: &Campaigns,
    triples: impl IntoIterator<Item = (u64, u32, u64)>,
) -> Vec<Row> {
    let mut m: BTreeMap<(u64, String), u64> = BTreeMap::new();
    for (w, c, n) in triples {
        *m.entry((w, uuid_to_string(campaigns.campaign_id(c))))
            .or_default() += n;
    }
    m.into_iter()
        .filter(|(_, n)| *n != 0)
        .map(|((window_start_ms, campaign_id), count)| Row {
            window_start_ms,
            campaign_id,
            count,
        })
        .collect()
}

/// What one engine run produced.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// Result rows in `air`'s CSV order.
    pub rows: Vec<Row>,
    /// Events generated by all workers.
    pub events: u64,
    /// Wall time from starting the workers to having every row.
    pub elapsed: Duration,
    /// Events dropped as late (older than their worker's watermark).
    pub late: u64,
}

impl RunResult {
    /// Events per second of the whole job.
    pub fn events_per_s(&self) -> f64 {
        self.events as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// A worker's front end, the same in every peer: its generator shard, the
/// YSB filter (`event_type == view`), the campaign lookup (unknown ads
/// dropped) and the watermark (newest event time − max delay; an event
/// older than the watermark is late, dropped and counted), as in `air`.
pub struct Front {
    gen: YsbGenerator,
    buf: Vec<YsbEvent>,
    campaigns: Arc<Campaigns>,
    max_delay_ms: u64,
    newest: u64,
    wm: u64,
    /// Events generated.
    pub events: u64,
    /// Views whose ad is in no campaign.
    pub unmatched: u64,
    /// Late events.
    pub late: u64,
}

impl Front {
    /// Worker `index` of the job `spec` (its share of the generator).
    pub fn new(spec: &YsbSpec, campaigns: Arc<Campaigns>, index: usize) -> Front {
        let cfg = spec.gen_config(&campaigns);
        Front {
            gen: YsbGenerator::new(&cfg, index, spec.workers),
            buf: vec![YsbEvent::default(); BATCH],
            campaigns,
            max_delay_ms: spec.max_delay_ms,
            newest: 0,
            wm: 0,
            events: 0,
            unmatched: 0,
            late: 0,
        }
    }

    /// Generates the next batch ([`BATCH`] events) and passes every view
    /// that is matched and on time to `f` as `(campaign index, event time
    /// ms)`. Returns the number of events generated: 0 at the end.
    #[inline(always)]
    pub fn next_batch(&mut self, mut f: impl FnMut(u32, u64)) -> usize {
        let n = self.gen.fill(&mut self.buf);
        self.events += n as u64;
        for e in &self.buf[..n] {
            if e.event_type != EventType::View {
                continue;
            }
            let Some(c) = self.campaigns.campaign_of(e.ad_id) else {
                self.unmatched += 1;
                continue;
            };
            let t = e.event_time_ms;
            if t < self.wm {
                self.late += 1;
                continue;
            }
            if t > self.newest {
                self.newest = t;
                self.wm = self.wm.max(t.saturating_sub(self.max_delay_ms));
            }
            f(c, t);
        }
        n
    }

    /// The watermark: no event with an older time will be passed on.
    pub fn watermark(&self) -> u64 {
        self.wm
    }
}

/// Maps event times to window starts, remembering the last window so that
/// most events skip the division (as `air`'s window operator does).
#[derive(Debug, Clone, Copy)]
pub struct WindowOf {
    size: u64,
    start: u64,
    end: u64,
}

impl WindowOf {
    /// Tumbling windows of `size` ms.
    pub fn new(size: u64) -> WindowOf {
        WindowOf {
            size,
            start: u64::MAX,
            end: 0,
        }
    }

    /// The start of the window holding `t`.
    #[inline(always)]
    pub fn of(&mut self, t: u64) -> u64 {
        if !(self.start <= t && t < self.end) {
            self.start = t - t % self.size;
            self.end = self.start.saturating_add(self.size);
        }
        self.start
    }
}

/// Per-window dense counts, one slot per campaign (the campaign lookup
/// yields dense indices), with the window last added to kept at hand.
#[derive(Debug, Default)]
pub struct WindowCounts {
    campaigns: usize,
    /// The window `hot` counts, if `hot` is in use.
    hot_start: Option<u64>,
    hot: Vec<u64>,
    /// Every other window, oldest first.
    windows: BTreeMap<u64, Vec<u64>>,
}

impl WindowCounts {
    /// An empty table for `campaigns` campaigns.
    pub fn new(campaigns: usize) -> WindowCounts {
        WindowCounts {
            campaigns,
            hot_start: None,
            hot: vec![0; campaigns],
            windows: BTreeMap::new(),
        }
    }

    /// Adds `n` to (window `start`, `campaign`).
    #[inline(always)]
    pub fn add(&mut self, start: u64, campaign: u32, n: u64) {
        if self.hot_start != Some(start) {
            self.switch(start);
        }
        self.hot[campaign as usize] += n;
    }

    /// Makes window `start` the hot one.
    #[cold]
    fn switch(&mut self, start: u64) {
        self.park();
        if let Some(v) = self.windows.remove(&start) {
            self.hot = v;
        }
        self.hot_start = Some(start);
    }

    /// Moves the hot window into the map.
    fn park(&mut self) {
        if let Some(s) = self.hot_start.take() {
            let v = std::mem::replace(&mut self.hot, vec![0; self.campaigns]);
            self.windows.insert(s, v);
        }
    }

    /// The oldest window's start, if any.
    pub fn oldest(&self) -> Option<u64> {
        let first = self.windows.keys().next().copied();
        match (first, self.hot_start) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Removes every window for which `closed(start)` holds (oldest first,
    /// stopping at the first open one) and passes its non-zero counts to `f`
    /// as `(window start, campaign, count)`, campaigns in index order.
    pub fn drain_closed(&mut self, closed: impl Fn(u64) -> bool, mut f: impl FnMut(u64, u32, u64)) {
        if self.oldest().is_none_or(|s| !closed(s)) {
            return;
        }
        self.park();
        while let Some(entry) = self.windows.first_entry() {
            if !closed(*entry.key()) {
                break;
            }
            let (w, counts) = entry.remove_entry();
            for (c, &n) in counts.iter().enumerate() {
                if n != 0 {
                    f(w, c as u32, n);
                }
            }
        }
    }
}

/// The expected rows of `spec`, computed sequentially: every worker's shard
/// in turn, each with its own watermark, counted in one table.
pub fn reference(spec: &YsbSpec) -> Vec<Row> {
    let campaigns = spec.campaigns();
    let mut counts: BTreeMap<(u64, u32), u64> = BTreeMap::new();
    for w in 0..spec.workers {
        let mut front = Front::new(spec, campaigns.clone(), w);
        while front.next_batch(|c, t| *counts.entry((spec.window_of(t), c)).or_default() += 1) > 0 {
        }
    }
    to_rows(&campaigns, counts.into_iter().map(|((w, c), n)| (w, c, n)))
}

/// The generator roof of `spec`: `spec.workers` threads run only [`Front`]
/// (generator shard, filter, campaign lookup, watermark) and fold the views
/// into a checksum — no window, no exchange. No engine can beat it; the
/// closer an engine gets, the more it is bound by the generator. The result
/// has no rows (`late` holds the views seen, for a sanity check).
pub fn generator_roof(spec: &YsbSpec) -> RunResult {
    let campaigns = spec.campaigns();
    let start = std::time::Instant::now();
    let outs: Vec<(u64, u64)> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..spec.workers)
            .map(|w| {
                let campaigns = campaigns.clone();
                s.spawn(move || {
                    let mut front = Front::new(spec, campaigns, w);
                    let (mut views, mut sum) = (0u64, 0u64);
                    while front.next_batch(|c, t| {
                        views += 1;
                        sum = sum.wrapping_add(c as u64 ^ t);
                    }) > 0
                    {}
                    std::hint::black_box(sum);
                    (front.events, views)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("a roof thread panicked"))
            .collect()
    });
    RunResult {
        rows: Vec::new(),
        events: outs.iter().map(|o| o.0).sum(),
        elapsed: start.elapsed(),
        late: outs.iter().map(|o| o.1).sum(),
    }
}
