//! Two more job shapes: the records with the highest score per tumbling
//! window, ties kept ([`run_top_job`], NEXMark Q7 "highest bid"), and a
//! stateless job with no exchange at all ([`run_stateless_job`], NEXMark Q1
//! and Q2: map and filter).
//!
//! # Top per window: semantics
//!
//! A tumbling window of size `s` holds `[k·s, (k+1)·s)`. For each window
//! with at least one record, the result is the highest score in it and
//! every record with that score (ties are all kept, in no particular
//! order; callers sort). Each worker keeps, per open window, its local
//! maximum and ties (a partial aggregate); when its watermark (newest event
//! time − `max_delay_ms`) passes a window's end it sends them to the
//! window's owner (`mix64(window_start) % workers`), which merges the
//! partials and emits the window when the minimum watermark of its inputs
//! passes the window's end. Records older than the worker's watermark are
//! late: dropped and counted.

use crate::join::JoinPayload;
use crate::stream::{now_ms, Pipe, Source, SourcePoll};
use crate::window::mix64;
use air_runtime::{
    ChannelMetrics, Downstream, Emitter, ExchangeData, JobConfig, Progress, RuntimeError, Upstream,
    WorkerInfo,
};
use hdrhistogram::Histogram;
use rkyv::{Archive, Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// What crosses the exchange of a top-per-window job: one of a worker's
/// highest-scoring records of one window.
#[derive(Clone, Debug, PartialEq, Eq, Archive, Serialize, Deserialize)]
pub struct TopPartial<T> {
    /// Start of the window, ms.
    pub window_start: u64,
    /// The record's score (the window's local maximum).
    pub score: u64,
    /// The record.
    pub item: T,
}

/// One window's result: its highest score and every record with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopResult<T> {
    /// Start of the window, ms.
    pub window_start: u64,
    /// The highest score in the window.
    pub score: u64,
    /// Every record of the window with that score.
    pub items: Vec<T>,
}

/// Max and ties per window start.
type Table<T> = BTreeMap<u64, (u64, Vec<T>)>;

fn offer<T>(table: &mut Table<T>, start: u64, score: u64, item: T) {
    let e = table.entry(start).or_insert((score, Vec::new()));
    if score > e.0 {
        e.0 = score;
        e.1.clear();
    }
    if score == e.0 {
        e.1.push(item);
    }
}

/// Counters of a top job's upstream at one worker.
#[derive(Debug, Default, Clone, Copy, serde::Serialize)]
pub struct TopCounters {
    /// Records taken from the source.
    pub source_records: u64,
    /// Records that reached the operator after the stateless operators.
    pub scored_records: u64,
    /// Records older than the watermark: dropped and counted.
    pub late_records: u64,
}

/// The upstream of a top-per-window job at one worker.
pub struct TopUpstream<S: Source, P: Pipe<S::Item>, TF, SF> {
    source: S,
    pipe: P,
    time: TF,
    score: SF,
    size_ms: u64,
    max_delay_ms: u64,
    batch: usize,
    buf: Vec<S::Item>,
    table: Table<P::Out>,
    newest: u64,
    wm: u64,
    /// Counters.
    pub counters: TopCounters,
}

impl<S: Source, P: Pipe<S::Item>, TF, SF> TopUpstream<S, P, TF, SF>
where
    TF: Fn(&P::Out) -> u64 + Send,
    SF: Fn(&P::Out) -> u64 + Send,
{
    /// The records of `source` after `pipe`, at event time `time` (ms),
    /// scored by `score`, in tumbling windows of `size_ms` (> 0) with
    /// bounded out-of-orderness `max_delay_ms`.
    pub fn new(source: S, pipe: P, time: TF, score: SF, size_ms: u64, max_delay_ms: u64) -> Self {
        TopUpstream {
            source,
            pipe,
            time,
            score,
            size_ms: size_ms.max(1),
            max_delay_ms,
            batch: 1024,
            buf: Vec::new(),
            table: Table::new(),
            newest: 0,
            wm: 0,
            counters: TopCounters::default(),
        }
    }

    /// The source (for its counters and errors after the job).
    pub fn source(&self) -> &S {
        &self.source
    }

    fn emit_closed(&mut self, wm: u64, out: &mut Emitter<'_, '_, TopPartial<P::Out>>)
    where
        TopPartial<P::Out>: ExchangeData,
    {
        while let Some((&start, _)) = self.table.first_key_value() {
            if start.saturating_add(self.size_ms) > wm {
                break;
            }
            let (score, items) = self.table.remove(&start).unwrap_or_default();
            for item in items {
                out.emit(
                    mix64(start),
                    TopPartial {
                        window_start: start,
                        score,
                        item,
                    },
                );
            }
        }
    }
}

impl<S, P, TF, SF> Upstream<TopPartial<P::Out>> for TopUpstream<S, P, TF, SF>
where
    S: Source,
    P: Pipe<S::Item>,
    P::Out: Send,
    TF: Fn(&P::Out) -> u64 + Send,
    SF: Fn(&P::Out) -> u64 + Send,
    TopPartial<P::Out>: ExchangeData,
{
    fn step(&mut self, out: &mut Emitter<'_, '_, TopPartial<P::Out>>) -> Progress {
        self.buf.clear();
        let poll = self.source.poll(&mut self.buf, self.batch);
        let n = self.buf.len();
        self.counters.source_records += n as u64;
        air_runtime::timeline::add_events(n as u64);
        {
            let TopUpstream {
                pipe,
                time,
                score,
                size_ms,
                max_delay_ms,
                buf,
                table,
                newest,
                wm,
                counters,
                ..
            } = self;
            for item in buf.drain(..) {
                pipe.run(item, &mut |r| {
                    counters.scored_records += 1;
                    let t = time(&r);
                    if t < *wm {
                        counters.late_records += 1;
                        return;
                    }
                    if t > *newest {
                        *newest = t;
                        *wm = (*wm).max(t.saturating_sub(*max_delay_ms));
                    }
                    let sc = score(&r);
                    offer(table, t - t % *size_ms, sc, r);
                });
            }
        }
        let wm = self.wm;
        self.emit_closed(wm, out);
        match poll {
            SourcePoll::Done => Progress::Done,
            SourcePoll::Idle if n == 0 => Progress::Idle,
            _ => Progress::Busy,
        }
    }

    fn watermark(&self) -> u64 {
        self.wm
    }

    fn finish(&mut self, out: &mut Emitter<'_, '_, TopPartial<P::Out>>) {
        self.emit_closed(u64::MAX, out);
    }
}

/// The final stage of a top-per-window job at a window's owner.
pub struct TopDownstream<T> {
    size_ms: u64,
    table: Table<T>,
    fired_wm: u64,
    /// Windows fired, in firing order.
    pub results: Vec<TopResult<T>>,
    /// Latency of every result record, ms: emit time − the window's last
    /// millisecond (`end − 1`, the newest event time the window can hold).
    /// Partials carry only the top records, so the newest event actually in
    /// the window is not known here: this is the YSB definition (emit time −
    /// newest event in the window) when the window's last millisecond holds
    /// a record — as at any paced rate of a few thousand records/s — and a
    /// lower bound of it otherwise. Meaningful for wall-clock event times.
    pub latency: Histogram<u64>,
    /// Partials that arrived after their window fired (0 unless the
    /// watermark protocol is broken).
    pub late_partials: u64,
}

impl<T> TopDownstream<T> {
    /// The final stage for tumbling windows of `size_ms`.
    pub fn new(size_ms: u64) -> Self {
        TopDownstream {
            size_ms: size_ms.max(1),
            table: Table::new(),
            fired_wm: 0,
            results: Vec::new(),
            latency: air_runtime::metrics::latency_histogram(),
            late_partials: 0,
        }
    }
}

impl<T> Downstream<TopPartial<T>> for TopDownstream<T>
where
    T: JoinPayload,
    TopPartial<T>: ExchangeData<Item = ArchivedTopPartial<T>>,
{
    fn on_batch(&mut self, _from: usize, items: &[ArchivedTopPartial<T>]) {
        for p in items {
            let start = p.window_start.to_native();
            if start.saturating_add(self.size_ms) <= self.fired_wm {
                self.late_partials += 1;
                continue;
            }
            offer(
                &mut self.table,
                start,
                p.score.to_native(),
                T::from_archived(&p.item),
            );
        }
    }

    fn on_watermark(&mut self, wm: u64) {
        self.fired_wm = wm;
        let mut now = None;
        while let Some((&start, _)) = self.table.first_key_value() {
            if start.saturating_add(self.size_ms) > wm {
                break;
            }
            let (score, items) = self.table.remove(&start).unwrap_or_default();
            let now = *now.get_or_insert_with(now_ms);
            let newest = start.saturating_add(self.size_ms - 1);
            let _ = self
                .latency
                .record_n(now.saturating_sub(newest), items.len() as u64);
            self.results.push(TopResult {
                window_start: start,
                score,
                items,
            });
        }
    }
}

/// What a top-per-window job produced (this process's workers).
pub struct TopJobOutput<T, S> {
    /// One result per window with records, sorted by window start (ties in
    /// no particular order).
    pub results: Vec<TopResult<T>>,
    /// Each worker's source.
    pub sources: Vec<S>,
    /// Each worker's upstream counters.
    pub upstream: Vec<TopCounters>,
    /// Each worker's channel counters.
    pub channels: Vec<ChannelMetrics>,
    /// Each worker's placement.
    pub placement: Vec<air_runtime::WorkerPlacement>,
    /// Partials that arrived after their window fired (must be 0).
    pub late_partials: u64,
    /// Latency of every result record, merged across workers (ms; see
    /// [`TopDownstream::latency`]).
    pub latency_hist: Histogram<u64>,
    /// Windows not fired when the job ended (a stop by SIGINT/SIGTERM: some
    /// worker had not read past their end); 0 for a job that read its whole
    /// input.
    pub unfired_windows: u64,
    /// Longest worker wall time.
    pub elapsed: Duration,
}

/// Runs a top-per-window job: `build` makes each worker's upstream.
pub fn run_top_job<S, P, TF, SF, B>(
    cfg: &JobConfig,
    size_ms: u64,
    build: B,
) -> Result<TopJobOutput<P::Out, S>, RuntimeError>
where
    S: Source,
    P: Pipe<S::Item>,
    P::Out: JoinPayload,
    TF: Fn(&P::Out) -> u64 + Send,
    SF: Fn(&P::Out) -> u64 + Send,
    TopPartial<P::Out>: ExchangeData<Item = ArchivedTopPartial<P::Out>>,
    B: Fn(&WorkerInfo) -> TopUpstream<S, P, TF, SF> + Sync,
{
    let outcomes = air_runtime::run::<TopPartial<P::Out>, _, _, _>(cfg, |info| {
        (build(info), TopDownstream::new(size_ms))
    })?;
    let mut out = TopJobOutput {
        results: Vec::new(),
        sources: Vec::new(),
        upstream: Vec::new(),
        channels: Vec::new(),
        placement: Vec::new(),
        late_partials: 0,
        latency_hist: air_runtime::metrics::latency_histogram(),
        unfired_windows: 0,
        elapsed: Duration::ZERO,
    };
    for o in outcomes {
        out.unfired_windows += o.downstream.table.len() as u64;
        out.results.extend(o.downstream.results);
        out.late_partials += o.downstream.late_partials;
        let _ = out.latency_hist.add(&o.downstream.latency);
        out.upstream.push(o.upstream.counters);
        out.sources.push(o.upstream.source);
        out.channels.push(o.channels);
        out.placement.push(o.info.placement.clone());
        out.elapsed = out.elapsed.max(o.elapsed);
    }
    out.results.sort_by_key(|r| r.window_start);
    Ok(out)
}

/// The upstream of a stateless job: source → fused operators → a local
/// sink (nothing crosses an exchange).
pub struct StatelessUpstream<S: Source, P: Pipe<S::Item>> {
    source: S,
    pipe: P,
    buf: Vec<S::Item>,
    keep: bool,
    /// The records produced, when kept.
    pub kept: Vec<P::Out>,
    /// Records taken from the source.
    pub source_records: u64,
    /// Records the operators produced.
    pub produced: u64,
}

impl<S: Source, P: Pipe<S::Item>> StatelessUpstream<S, P> {
    /// `source` → `pipe`; `keep`: collect the output records (else count
    /// them only, as a benchmark's sink does).
    pub fn new(source: S, pipe: P, keep: bool) -> Self {
        StatelessUpstream {
            source,
            pipe,
            buf: Vec::new(),
            keep,
            kept: Vec::new(),
            source_records: 0,
            produced: 0,
        }
    }
}

impl<S, P> Upstream<u64> for StatelessUpstream<S, P>
where
    S: Source,
    P: Pipe<S::Item>,
    P::Out: Send,
{
    fn step(&mut self, _out: &mut Emitter<'_, '_, u64>) -> Progress {
        self.buf.clear();
        let poll = self.source.poll(&mut self.buf, 1024);
        let n = self.buf.len();
        self.source_records += n as u64;
        air_runtime::timeline::add_events(n as u64);
        let StatelessUpstream {
            pipe,
            buf,
            keep,
            kept,
            produced,
            ..
        } = self;
        for item in buf.drain(..) {
            pipe.run(item, &mut |r| {
                *produced += 1;
                if *keep {
                    kept.push(r);
                }
            });
        }
        match poll {
            SourcePoll::Done => Progress::Done,
            SourcePoll::Idle if n == 0 => Progress::Idle,
            _ => Progress::Busy,
        }
    }

    fn watermark(&self) -> u64 {
        0
    }
}

/// The (empty) final stage of a stateless job.
struct NoDownstream;

impl Downstream<u64> for NoDownstream {
    fn on_batch(&mut self, _from: usize, _items: &[<u64 as ExchangeData>::Item]) {}
    fn on_watermark(&mut self, _wm: u64) {}
}

/// What a stateless job produced (this process's workers, in worker order).
pub struct StatelessJobOutput<S, O> {
    /// Each worker's source.
    pub sources: Vec<S>,
    /// Each worker's kept output records (empty unless kept).
    pub kept: Vec<Vec<O>>,
    /// Each worker's (records read, records produced).
    pub counts: Vec<(u64, u64)>,
    /// Each worker's channel counters (control frames only).
    pub channels: Vec<ChannelMetrics>,
    /// Each worker's placement.
    pub placement: Vec<air_runtime::WorkerPlacement>,
    /// Longest worker wall time.
    pub elapsed: Duration,
}

/// Runs a stateless job: `build` makes each worker's source and operators;
/// with `keep`, the output records are collected per worker.
pub fn run_stateless_job<S, P, B>(
    cfg: &JobConfig,
    build: B,
) -> Result<StatelessJobOutput<S, P::Out>, RuntimeError>
where
    S: Source,
    P: Pipe<S::Item>,
    P::Out: Send,
    B: Fn(&WorkerInfo) -> StatelessUpstream<S, P> + Sync,
{
    let outcomes = air_runtime::run::<u64, _, _, _>(cfg, |info| (build(info), NoDownstream))?;
    let mut out = StatelessJobOutput {
        sources: Vec::new(),
        kept: Vec::new(),
        counts: Vec::new(),
        channels: Vec::new(),
        placement: Vec::new(),
        elapsed: Duration::ZERO,
    };
    for o in outcomes {
        let u = o.upstream;
        out.counts.push((u.source_records, u.produced));
        out.kept.push(u.kept);
        out.sources.push(u.source);
        out.channels.push(o.channels);
        out.placement.push(o.info.placement.clone());
        out.elapsed = out.elapsed.max(o.elapsed);
    }
    Ok(out)
}
