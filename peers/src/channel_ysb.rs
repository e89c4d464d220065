//! YSB on a plain crossbeam-channel pipeline.
//!
//! `W` threads, each both a generator and the owner of its campaigns, joined
//! all to all by `W × W` bounded channels (each thread has one to itself
//! too, as `air`'s workers do). A thread runs [`Front`] one batch of
//! [`BATCH`] events at a time and stages records per destination; a full
//! staging batch (a `Vec` of [`BATCH`] records) goes out as one message, with
//! the sender's watermark. Between batches, and while a send finds its
//! channel full, the thread drains its own inputs (so two threads blocked on
//! each other's full channels cannot deadlock). An owner fires a window when
//! the minimum watermark of its inputs reaches the window's end; end of
//! input counts as an infinite watermark. When a sender's watermark enters a
//! new window it flushes every destination, so windows fire during the run.
//!
//! - [`Mode::EveryEvent`]: every matched view travels as `(campaign, event
//!   time)` to its campaign's owner, which counts it.
//! - [`Mode::PreAggregated`]: each thread counts per (window, campaign) and
//!   sends `(campaign, window, count)` partials when its watermark passes the
//!   window's end.

use crate::{owner_hash, Front, Mode, RunResult, WindowCounts, WindowOf, YsbSpec, BATCH};
use crossbeam_channel::{bounded, Receiver, Sender, TrySendError};
use std::time::Instant;

/// What a thread hands back: its rows (window start, campaign, count),
/// events generated, late events.
type WorkerOut = (Vec<(u64, u32, u64)>, u64, u64);

/// Capacity of each channel, in batches (about 512 KiB of 16-byte views).
pub const CHANNEL_BATCHES: usize = 32;

/// One message on a channel: records, then the sender's watermark (no later
/// record from this sender is older), and whether the sender is done.
struct Msg<R> {
    records: Vec<R>,
    wm: u64,
    last: bool,
}

/// A thread's ends of the pipeline and its owner state.
struct Node<R> {
    tx: Vec<Sender<Msg<R>>>,
    rx: Vec<Receiver<Msg<R>>>,
    staging: Vec<Vec<R>>,
    /// This thread's watermark, sent with every batch.
    wm: u64,
    /// Each input's watermark (`u64::MAX` once it has ended).
    input_wm: Vec<u64>,
    /// Inputs still open.
    open: usize,
    /// Minimum of `input_wm` as of the last firing.
    fired_wm: u64,
    table: WindowCounts,
    window_ms: u64,
    /// Adds a received record to the owner's counts.
    apply: fn(&R, &mut WindowCounts, &mut WindowOf),
    win: WindowOf,
    /// Rows fired: (window start, campaign, count).
    rows: Vec<(u64, u32, u64)>,
}

impl<R> Node<R> {
    /// Stages `r` for the owner of `campaign`; sends the batch when full.
    #[inline(always)]
    fn stage(&mut self, campaign: u32, r: R) {
        let dest = (owner_hash(campaign) % self.tx.len() as u64) as usize;
        let s = &mut self.staging[dest];
        s.push(r);
        if s.len() >= BATCH {
            self.send(dest, false);
        }
    }

    /// Sends the staging batch of `dest` (possibly empty) with this thread's
    /// watermark, draining this thread's own inputs while the channel is full.
    fn send(&mut self, dest: usize, last: bool) {
        let records = std::mem::replace(&mut self.staging[dest], Vec::with_capacity(BATCH));
        let mut msg = Msg {
            records,
            wm: if last { u64::MAX } else { self.wm },
            last,
        };
        loop {
            match self.tx[dest].try_send(msg) {
                Ok(()) => return,
                Err(TrySendError::Full(m)) => {
                    msg = m;
                    if !self.poll() {
                        std::thread::yield_now();
                    }
                }
                Err(TrySendError::Disconnected(_)) => panic!("a pipeline thread died"),
            }
        }
    }

    /// Sends every staging batch (even empty ones: the watermark moves).
    fn flush_all(&mut self, last: bool) {
        for dest in 0..self.tx.len() {
            self.send(dest, last);
        }
    }

    /// Drains every input that has messages; fires the windows the inputs'
    /// minimum watermark has closed. Returns whether anything arrived.
    fn poll(&mut self) -> bool {
        let mut got = false;
        for src in 0..self.rx.len() {
            while let Ok(m) = self.rx[src].try_recv() {
                got = true;
                for r in &m.records {
                    (self.apply)(r, &mut self.table, &mut self.win);
                }
                self.input_wm[src] = m.wm;
                if m.last {
                    self.open -= 1;
                }
            }
        }
        if got {
            let wm = self.input_wm.iter().copied().min().unwrap_or(u64::MAX);
            if wm > self.fired_wm {
                self.fired_wm = wm;
                let size = self.window_ms;
                let rows = &mut self.rows;
                self.table.drain_closed(
                    |s| s.saturating_add(size) <= wm,
                    |w, c, n| rows.push((w, c, n)),
                );
            }
        }
        got
    }
}

/// A thread's own state besides its [`Node`]: the partial table of
/// [`Mode::PreAggregated`] and the window its watermark was last in.
struct Local {
    table: WindowCounts,
    win: WindowOf,
    wm_win: WindowOf,
    flushed_w: u64,
}

/// Runs YSB `spec` on the crossbeam pipeline with `spec.workers` threads.
pub fn run(spec: &YsbSpec, mode: Mode) -> anyhow::Result<RunResult> {
    match mode {
        Mode::EveryEvent => run_with::<(u32, u64)>(
            spec,
            |&(c, t), table, win| table.add(win.of(t), c, 1),
            every_event_step,
        ),
        Mode::PreAggregated => run_with::<(u32, u64, u64)>(
            spec,
            |&(c, w, n), table, _| table.add(w, c, n),
            pre_aggregated_step,
        ),
    }
}

/// One batch of [`Mode::EveryEvent`]: every view is staged for its owner.
fn every_event_step(front: &mut Front, node: &mut Node<(u32, u64)>, local: &mut Local) -> usize {
    let n = front.next_batch(|c, t| node.stage(c, (c, t)));
    node.wm = front.watermark();
    let w = local.wm_win.of(node.wm);
    if w != local.flushed_w {
        local.flushed_w = w;
        node.flush_all(false);
    }
    n
}

/// One batch of [`Mode::PreAggregated`]: count locally, send the partials of
/// the windows the watermark has closed (all of them at the end).
fn pre_aggregated_step(
    front: &mut Front,
    node: &mut Node<(u32, u64, u64)>,
    local: &mut Local,
) -> usize {
    let Local { table, win, .. } = local;
    let n = front.next_batch(|c, t| table.add(win.of(t), c, 1));
    node.wm = front.watermark();
    let wm = if n == 0 { u64::MAX } else { node.wm };
    let size = node.window_ms;
    if table.oldest().is_some_and(|s| s.saturating_add(size) <= wm) {
        table.drain_closed(
            |s| s.saturating_add(size) <= wm,
            |w, c, k| node.stage(c, (c, w, k)),
        );
        node.flush_all(false);
    }
    n
}

/// Starts the threads and channels, runs `step` until every shard is spent,
/// and collects the rows.
fn run_with<R: Send>(
    spec: &YsbSpec,
    apply: fn(&R, &mut WindowCounts, &mut WindowOf),
    step: fn(&mut Front, &mut Node<R>, &mut Local) -> usize,
) -> anyhow::Result<RunResult> {
    let w = spec.workers;
    anyhow::ensure!(w > 0, "no workers");
    let campaigns = spec.campaigns();
    let ncamp = campaigns.len();
    let start = Instant::now();
    // tx[src][dst], rx[dst][src]
    let mut tx: Vec<Vec<Sender<Msg<R>>>> = (0..w).map(|_| Vec::new()).collect();
    let mut rx: Vec<Vec<Receiver<Msg<R>>>> = (0..w).map(|_| Vec::new()).collect();
    for txs in tx.iter_mut() {
        for rxs in rx.iter_mut() {
            let (t, r) = bounded(CHANNEL_BATCHES);
            txs.push(t);
            rxs.push(r);
        }
    }
    let outs: Vec<WorkerOut> = std::thread::scope(|s| {
        let handles: Vec<_> = tx
            .into_iter()
            .zip(rx)
            .enumerate()
            .map(|(index, (tx, rx))| {
                let campaigns = campaigns.clone();
                let spec = *spec;
                s.spawn(move || {
                    let mut front = Front::new(&spec, campaigns, index);
                    let mut node = Node {
                        staging: (0..tx.len()).map(|_| Vec::with_capacity(BATCH)).collect(),
                        input_wm: vec![0; rx.len()],
                        open: rx.len(),
                        tx,
                        rx,
                        wm: 0,
                        fired_wm: 0,
                        table: WindowCounts::new(ncamp),
                        window_ms: spec.window_ms,
                        apply,
                        win: WindowOf::new(spec.window_ms),
                        rows: Vec::new(),
                    };
                    let mut local = Local {
                        table: WindowCounts::new(ncamp),
                        win: WindowOf::new(spec.window_ms),
                        wm_win: WindowOf::new(spec.window_ms),
                        flushed_w: 0,
                    };
                    while step(&mut front, &mut node, &mut local) > 0 {
                        node.poll();
                    }
                    node.flush_all(true);
                    while node.open > 0 {
                        if !node.poll() {
                            std::thread::yield_now();
                        }
                    }
                    (node.rows, front.events, front.late)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a pipeline thread panicked"))
            .collect()
    });
    let elapsed = start.elapsed();
    let mut triples = Vec::new();
    let (mut events, mut late) = (0, 0);
    for (rows, e, l) in outs {
        triples.extend(rows);
        events += e;
        late += l;
    }
    Ok(RunResult {
        rows: crate::to_rows(&campaigns, triples),
        events,
        elapsed,
        late,
    })
}
