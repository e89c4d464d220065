//! YSB on timely-dataflow.
//!
//! One dataflow per worker, `W` worker threads in one process
//! (`timely::Config::process`). Timestamps are window starts (ms of event
//! time), so timely's progress tracking is the watermark: a source holds a
//! capability for the window of its worker's watermark, and the owner's
//! input frontier passing a window's start means no record of that window
//! can still arrive — the window fires, as `air` fires a window when the
//! minimum watermark of its inputs reaches the window's end.
//!
//! - The source operator runs [`Front`] (generator shard, filter, campaign
//!   lookup, watermark) for a few batches of [`BATCH`] events per
//!   activation, and reactivates itself until its shard is spent.
//! - [`Mode::EveryEvent`]: the source emits every matched view as
//!   `(campaign, event time)` at its window's timestamp (one container of up
//!   to [`BATCH`] records per window and batch); the `Exchange` pact routes
//!   each record to its campaign's owner, which counts it.
//! - [`Mode::PreAggregated`]: the source counts per (window, campaign) and
//!   emits `(campaign, window, count)` partials at the window's timestamp once its
//!   watermark passes the window's end (everything at the end of its
//!   shard), then the exchange and a final sum.
//! - The owner is a `sink` that counts per (window, campaign) and moves a
//!   window's rows out when its input frontier has passed the window.

use crate::{owner_hash, Front, Mode, RunResult, WindowCounts, WindowOf, YsbSpec, BATCH};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::operator::source;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::Capability;
use timely::dataflow::{Scope, Stream};

/// Generator batches a source processes per activation before yielding to
/// the worker (which then moves received data through the owner).
pub const BATCHES_PER_ACTIVATION: usize = 8;

/// A view on its way to the owner ([`Mode::EveryEvent`]): `(campaign, event
/// time ms)`.
type View = (u32, u64);

/// A partial count on its way to the owner ([`Mode::PreAggregated`]):
/// `(campaign, window start, count)`.
type Partial = (u32, u64, u64);

/// What a worker hands back: its rows, events generated, late events.
type WorkerOut = (Vec<(u64, u32, u64)>, u64, u64);

/// Runs YSB `spec` on timely-dataflow with `spec.workers` worker threads.
pub fn run(spec: &YsbSpec, mode: Mode) -> anyhow::Result<RunResult> {
    let spec = *spec;
    let campaigns = spec.campaigns();
    let shared = campaigns.clone();
    let start = Instant::now();
    let guards = timely::execute(timely::Config::process(spec.workers), move |worker| {
        let index = worker.index();
        let rows = Rc::new(RefCell::new(Vec::new()));
        let stats = Rc::new(RefCell::new((0u64, 0u64)));
        let front = Front::new(&spec, shared.clone(), index);
        let ncamp = shared.len();
        worker.dataflow::<u64, _, _>(|scope| {
            match mode {
                Mode::EveryEvent => {
                    // The window comes from the event time; the timestamp
                    // only says when a window is complete.
                    let mut win = WindowOf::new(spec.window_ms);
                    owner(
                        event_source(scope, spec, front, stats.clone()),
                        |r: &View| r.0,
                        move |&(campaign, t), table| table.add(win.of(t), campaign, 1),
                        ncamp,
                        rows.clone(),
                    );
                }
                Mode::PreAggregated => owner(
                    partial_source(scope, spec, front, ncamp, stats.clone()),
                    |r: &Partial| r.0,
                    |&(campaign, w, count), table| table.add(w, campaign, count),
                    ncamp,
                    rows.clone(),
                ),
            }
        });
        while worker.step() {}
        let (events, late) = *stats.borrow();
        (rows.take(), events, late) as WorkerOut
    })
    .map_err(|e| anyhow::anyhow!("timely: {e}"))?;
    let mut triples = Vec::new();
    let (mut events, mut late) = (0, 0);
    for r in guards.join() {
        let (rows, e, l) = r.map_err(|e| anyhow::anyhow!("timely worker: {e}"))?;
        triples.extend(rows);
        events += e;
        late += l;
    }
    let elapsed = start.elapsed();
    Ok(RunResult {
        rows: crate::to_rows(&campaigns, triples),
        events,
        elapsed,
        late,
    })
}

/// The source of [`Mode::EveryEvent`]: every matched, on-time view as
/// `(campaign, event time)` at its window's timestamp.
fn event_source<'s>(
    scope: Scope<'s, u64>,
    spec: YsbSpec,
    mut front: Front,
    stats: Rc<RefCell<(u64, u64)>>,
) -> Stream<'s, u64, Vec<View>> {
    source::<u64, CapacityContainerBuilder<Vec<View>>, _, _>(scope, "YsbViews", move |cap, info| {
        let activator = scope.activator_for(info.address);
        let mut cap = Some(cap);
        let mut staged: Vec<View> = Vec::with_capacity(BATCH);
        let mut win = WindowOf::new(spec.window_ms);
        move |output| {
            let Some(c) = cap.as_mut() else { return };
            for _ in 0..BATCHES_PER_ACTIVATION {
                let mut cur = u64::MAX;
                let n = front.next_batch(|campaign, t| {
                    let w = win.of(t);
                    if w != cur {
                        if !staged.is_empty() {
                            output.session(&c.delayed(&cur)).give_container(&mut staged);
                            staged.clear();
                        }
                        cur = w;
                    }
                    staged.push((campaign, t));
                });
                if !staged.is_empty() {
                    output.session(&c.delayed(&cur)).give_container(&mut staged);
                    staged.clear();
                }
                if n == 0 {
                    *stats.borrow_mut() = (front.events, front.late);
                    cap = None;
                    return;
                }
                // Every later event is at or after the watermark, so in its
                // window or a later one.
                c.downgrade(&spec.window_of(front.watermark()));
            }
            activator.activate();
        }
    })
}

/// The source of [`Mode::PreAggregated`]: `(campaign, window, count)` partials at
/// their window's timestamp, sent when the worker's watermark passes the
/// window's end.
fn partial_source<'s>(
    scope: Scope<'s, u64>,
    spec: YsbSpec,
    mut front: Front,
    campaigns: usize,
    stats: Rc<RefCell<(u64, u64)>>,
) -> Stream<'s, u64, Vec<Partial>> {
    source::<u64, CapacityContainerBuilder<Vec<Partial>>, _, _>(
        scope,
        "YsbPartials",
        move |cap, info| {
            let activator = scope.activator_for(info.address);
            let mut cap = Some(cap);
            let mut table = WindowCounts::new(campaigns);
            let mut win = WindowOf::new(spec.window_ms);
            let size = spec.window_ms;
            move |output| {
                let Some(c) = cap.as_mut() else { return };
                for _ in 0..BATCHES_PER_ACTIVATION {
                    let n = front.next_batch(|campaign, t| table.add(win.of(t), campaign, 1));
                    let wm = if n == 0 { u64::MAX } else { front.watermark() };
                    if table.oldest().is_some_and(|s| s.saturating_add(size) <= wm) {
                        let mut at: Option<(u64, Capability<u64>)> = None;
                        let mut out = Vec::new();
                        table.drain_closed(
                            |s| s.saturating_add(size) <= wm,
                            |w, campaign, count| out.push((w, campaign, count)),
                        );
                        for (w, campaign, count) in out {
                            if at.as_ref().is_none_or(|(aw, _)| *aw != w) {
                                at = Some((w, c.delayed(&w)));
                            }
                            let (_, t) = at.as_ref().expect("set above");
                            output.session(t).give((campaign, w, count));
                        }
                    }
                    if n == 0 {
                        *stats.borrow_mut() = (front.events, front.late);
                        cap = None;
                        return;
                    }
                    c.downgrade(&spec.window_of(wm));
                }
                activator.activate();
            }
        },
    )
}

/// The owner: after the exchange by campaign, `apply` adds each record to
/// the per-(window, campaign) counts; a window's rows move out once the
/// input frontier has passed it.
fn owner<R>(
    stream: Stream<'_, u64, Vec<R>>,
    campaign: fn(&R) -> u32,
    mut apply: impl FnMut(&R, &mut WindowCounts) + 'static,
    campaigns: usize,
    rows: Rc<RefCell<Vec<(u64, u32, u64)>>>,
) where
    R: Clone + Send + serde::Serialize + for<'a> serde::Deserialize<'a> + 'static,
{
    let mut table = WindowCounts::new(campaigns);
    stream.sink(
        Exchange::new(move |r: &R| owner_hash(campaign(r))),
        "YsbCount",
        move |(input, frontier)| {
            input.for_each(|_time, data| {
                for r in data.iter() {
                    apply(r, &mut table);
                }
            });
            let mut rows = rows.borrow_mut();
            table.drain_closed(
                |w| !frontier.less_equal(&w),
                |w, campaign, count| rows.push((w, campaign, count)),
            );
        },
    );
}
