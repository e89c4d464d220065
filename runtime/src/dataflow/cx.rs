//! The channels of a running graph at one worker, and the context every
//! operator call gets: send on an edge (with backpressure that keeps the
//! worker's later edges draining), report watermarks and end-of-stream.
//!
//! Deadlock freedom (DESIGN.md, "Backpressure without deadlock"): edges are
//! numbered in the order the graph creates them, and an operator fed by
//! edge `k` only sends on edges created after it (`> k`). A send on edge `j`
//! that finds its ring full drains this worker's inputs of edges `>= j`
//! (recursively, each with the edges after it); edges `< j` wait. Every ring
//! belongs to one edge, so a frame of an earlier edge never waits in front
//! of a later edge's frames.

use crate::channel::ChannelTx;
use crate::data::ExchangeData;
use crate::exchange::{InputEvent, Inputs};
use crate::keygroups::{Assignment, KeyGroups};
use crate::metrics::ChannelMetrics;
use crate::RuntimeError;
use air_shm::FrameKind;

/// The sending side of one exchange edge at one worker: a channel to every
/// worker of the job, and the watermarks of the operators feeding it (a
/// `union` or several sources may feed one edge; the edge's watermark is
/// their minimum).
pub struct EdgeTx<'c> {
    edge: usize,
    me: usize,
    tx: Vec<Box<dyn ChannelTx + 'c>>,
    key_groups: KeyGroups,
    /// The owner of each key group now (changes at a barrier when groups
    /// move: [`super::moves`]).
    assign: Assignment,
    /// Whether its operator's key groups may move ([`EdgeTx::set_moves`]).
    moves: bool,
    max_frame: usize,
    /// Per feeder: its watermark (ms), and its final watermark once ended.
    feeders: Vec<(u64, Option<u64>)>,
    /// Per feeder, once it sent a watermark: whether it is a source's
    /// segment (its watermark is the source's own, held back by nothing
    /// downstream), for watermark alignment ([`EdgeTx::fed_by_sources`]).
    feeder_is_source: Vec<Option<bool>>,
    sent_wm: u64,
    /// Per feeder: the newest checkpoint barrier it passed (0: none).
    feeder_barriers: Vec<u64>,
    /// The newest barrier sent to every worker.
    sent_barrier: u64,
    ended: bool,
    unflushed: bool,
    /// Counters of this edge's sending side.
    pub metrics: ChannelMetrics,
    /// Per destination worker: the tier of its ring (index into
    /// `full_by_tier`: thread, node, network).
    tiers: Vec<u8>,
    /// `metrics.ring_full_waits` by the tier of the full ring (for live
    /// metrics; counted on the wait path only).
    pub(crate) full_by_tier: [u64; 3],
}

impl<'c> EdgeTx<'c> {
    /// Edge `edge`'s sending ends at worker `me` (`tx` by destination
    /// worker, `tiers[d]` the tier index of destination `d`'s ring:
    /// 0 thread, 1 node, 2 network), fed by `feeders` operators of this
    /// worker's graph; keys go to their group's owner by `key_groups`
    /// (over `tx.len()` workers).
    pub(crate) fn new(
        edge: usize,
        me: usize,
        tx: Vec<Box<dyn ChannelTx + 'c>>,
        tiers: Vec<u8>,
        feeders: usize,
        key_groups: KeyGroups,
    ) -> Self {
        debug_assert_eq!(tiers.len(), tx.len());
        debug_assert_eq!(key_groups.workers(), tx.len().max(1));
        let max_frame = tx.iter().map(|t| t.max_frame()).min().unwrap_or(usize::MAX);
        EdgeTx {
            edge,
            me,
            tx,
            key_groups,
            assign: Assignment::ranges(key_groups),
            moves: false,
            max_frame,
            feeders: vec![(0, None); feeders],
            feeder_is_source: vec![None; feeders],
            sent_wm: 0,
            feeder_barriers: vec![0; feeders],
            sent_barrier: 0,
            // An edge nobody feeds at this worker has ended here already.
            ended: false,
            unflushed: false,
            metrics: ChannelMetrics::default(),
            tiers,
            full_by_tier: [0; 3],
        }
    }

    /// Its operator's key groups may move ([`super::moves`]).
    pub(crate) fn set_moves(&mut self) {
        self.moves = true;
    }

    /// The largest payload of one frame on this edge, bytes.
    pub(crate) fn max_frame(&self) -> usize {
        self.max_frame
    }

    /// Tries to write one state frame to `dest`, never waiting (`Ok(false)`:
    /// its ring is full). State frames may follow the edge's End (a
    /// receiver reads a moving edge's rings to the last frame).
    pub(crate) fn try_send_state(
        &mut self,
        dest: usize,
        len: usize,
        write: &mut dyn FnMut(&mut [u8]) -> Option<usize>,
    ) -> Result<bool, RuntimeError> {
        let sent = self.tx[dest]
            .try_send(FrameKind::State, len, write)
            .map_err(|e| self.err(dest, e))?;
        if sent {
            self.unflushed = true;
        }
        Ok(sent)
    }

    /// Bit `t` set for each tier index `t` among this edge's rings.
    pub(crate) fn tier_mask(&self) -> u8 {
        self.tiers.iter().fold(0, |m, &t| m | 1 << t)
    }

    /// Whether every feeder ended and End went out.
    pub(crate) fn ended(&self) -> bool {
        self.ended
    }

    /// Whether every feeder of this edge at this worker is a source's
    /// segment, each known from a watermark it sent: the edge's received
    /// watermark is then the minimum of the job's sources that feed it,
    /// which watermark alignment may wait on without waiting on itself.
    pub(crate) fn fed_by_sources(&self) -> bool {
        !self.feeder_is_source.is_empty() && self.feeder_is_source.iter().all(|s| *s == Some(true))
    }

    fn err(&self, to: usize, e: impl Into<crate::ChannelError>) -> RuntimeError {
        let _ = self.edge;
        RuntimeError::channel(self.me, to, e)
    }

    /// Makes every frame sent so far visible to its receiver.
    pub(crate) fn publish(&mut self) -> Result<(), RuntimeError> {
        if !self.unflushed {
            return Ok(());
        }
        for to in 0..self.tx.len() {
            self.tx[to].flush().map_err(|e| self.err(to, e))?;
        }
        self.unflushed = false;
        Ok(())
    }
}

/// The receiving side of one exchange edge at one worker, and the operator
/// it feeds.
pub(crate) struct EdgeRx<'c> {
    pub(crate) inputs: Inputs<'c>,
    pub(crate) consumer: Box<dyn EdgeConsumer>,
    /// `on_end` was delivered and nothing more is read (see `ended`).
    pub(crate) done: bool,
    /// `on_end` was delivered; the edge is still read while its operator
    /// awaits state of a move ([`EdgeConsumer::awaits_state`]).
    pub(crate) ended: bool,
}

/// What an operator fed by an exchange edge receives (type-erased: the
/// graph's segments implement it; users implement [`crate::dataflow::Operator`]).
pub trait EdgeConsumer {
    /// An archived batch from worker `from`; returns the records it held.
    fn on_data(
        &mut self,
        from: usize,
        bytes: &[u8],
        validate: bool,
        cx: &mut Cx<'_, '_>,
    ) -> Result<usize, RuntimeError>;
    /// The minimum watermark over the edge's inputs advanced to `wm`.
    fn on_watermark(&mut self, wm: u64, cx: &mut Cx<'_, '_>);
    /// Every input ended; `final_wm` is the minimum of their final
    /// watermarks (`u64::MAX` unless the job was stopped).
    fn on_end(&mut self, final_wm: u64, cx: &mut Cx<'_, '_>);
    /// A piece of worker `from`'s state of this edge's operator, sent
    /// after a barrier at which its key groups moved
    /// ([`super::moves`]). Only an operator whose groups move gets one.
    fn on_state(&mut self, from: usize, bytes: &[u8], cx: &mut Cx<'_, '_>) {
        let _ = (from, bytes);
        cx.fail_with(RuntimeError::Setup(
            "keyed state arrived for an operator whose key groups do not move".into(),
        ));
    }

    /// Whether it may still get state of a move of its key groups: its
    /// edge is read on after its end (state may follow its senders' End
    /// frames).
    fn awaits_state(&self) -> bool {
        false
    }

    /// The edge's inputs are aligned at checkpoint barrier `id` (every
    /// record sent before it was handed on, none after): snapshot, then
    /// pass the barrier on (after what was staged before it).
    fn on_barrier(&mut self, id: u64, cx: &mut Cx<'_, '_>);
    /// The flush interval passed: push staged records on.
    fn tick(&mut self, cx: &mut Cx<'_, '_>);
    /// Adds this segment's counters into `stats` (after the job; during it
    /// too for live metrics, at most every `live::PUBLISH_EVERY`).
    fn report(&mut self, stats: &mut crate::dataflow::Stats);
}

/// The context of one operator call at one worker: the sending sides of the
/// edges it may send on, and the receiving sides of the edges it may drain
/// while a send waits for room.
pub struct Cx<'a, 'c> {
    /// Edges `base..` (sending sides).
    tx: &'a mut [EdgeTx<'c>],
    /// Edges `base..` (receiving sides and their operators).
    rx: &'a mut [EdgeRx<'c>],
    base: usize,
    error: &'a mut Option<RuntimeError>,
    /// The call is a source segment's (step, tick, finish), not an
    /// operator's.
    source: bool,
}

impl<'a, 'c> Cx<'a, 'c> {
    pub(crate) fn new(
        tx: &'a mut [EdgeTx<'c>],
        rx: &'a mut [EdgeRx<'c>],
        base: usize,
        error: &'a mut Option<RuntimeError>,
    ) -> Self {
        Cx {
            tx,
            rx,
            base,
            error,
            source: false,
        }
    }

    /// [`Cx::new`] for a call of a source segment (edges from 0).
    pub(crate) fn for_source(
        tx: &'a mut [EdgeTx<'c>],
        rx: &'a mut [EdgeRx<'c>],
        error: &'a mut Option<RuntimeError>,
    ) -> Self {
        Cx {
            source: true,
            ..Cx::new(tx, rx, 0, error)
        }
    }

    /// Whether a send failed (the worker stops at the end of the call).
    #[inline]
    pub fn failed(&self) -> bool {
        self.error.is_some()
    }

    /// Stops the worker with `e` at the end of this call (the first
    /// failure is kept).
    pub fn fail_with(&mut self, e: RuntimeError) {
        self.fail(e)
    }

    fn fail(&mut self, e: RuntimeError) {
        if self.error.is_none() {
            *self.error = Some(e);
        }
    }

    /// Number of workers edge `edge` reaches (the whole job).
    #[inline]
    pub fn workers(&self, edge: usize) -> usize {
        self.tx[edge - self.base].tx.len()
    }

    /// The worker that owns `hash` on `edge`: its key group's owner
    /// ([`KeyGroups::owner`]).
    #[inline(always)]
    pub fn owner(&self, edge: usize, hash: u64) -> usize {
        self.tx[edge - self.base].assign.owner(hash)
    }

    /// The worker that owns key group `group` on `edge` now.
    #[inline(always)]
    pub fn owner_of_group(&self, edge: usize, group: u32) -> usize {
        self.tx[edge - self.base].assign.owner_of_group(group)
    }

    /// Records per batch that fit one frame of `edge` (at most `want`).
    pub fn batch_fit<T: ExchangeData>(&self, edge: usize, want: usize) -> usize {
        let max = self.tx[edge - self.base].max_frame;
        let mut b = want.max(1);
        while b > 1 && T::size_hint(b) > max {
            b /= 2;
        }
        b
    }

    /// Sends `items` to worker `dest` on `edge` as one archived frame (split
    /// in halves when variable-size records archive larger than a frame),
    /// and clears `items`. Blocks while the ring is full, draining this
    /// worker's edges `>= edge` meanwhile. A failure is kept (see
    /// [`Cx::failed`]) and later sends do nothing.
    pub fn send_batch<T: ExchangeData>(&mut self, edge: usize, dest: usize, items: &mut Vec<T>) {
        if items.is_empty() || self.error.is_some() {
            items.clear();
            return;
        }
        if let Err(e) = self.send_items(edge, dest, items) {
            self.fail(e);
        }
        items.clear();
    }

    #[allow(clippy::ptr_arg)]
    fn send_items<T: ExchangeData>(
        &mut self,
        edge: usize,
        dest: usize,
        items: &mut Vec<T>,
    ) -> Result<(), RuntimeError> {
        let max = self.tx[edge - self.base].max_frame;
        let hint = T::size_hint(items.len()).min(max);
        let bytes = match self.send_frame(edge, dest, FrameKind::Data, hint, &mut |buf| {
            T::write_batch(items, buf)
        })? {
            Some(len) => len,
            None => {
                let archived = T::to_bytes(items);
                let len = archived.len();
                if len > max {
                    if items.len() > 1 {
                        let mut second = items.split_off(items.len() / 2);
                        self.send_items(edge, dest, items)?;
                        return self.send_items(edge, dest, &mut second);
                    }
                    return Err(RuntimeError::BatchTooLarge { bytes: len, max });
                }
                self.send_frame(edge, dest, FrameKind::Data, len, &mut |buf| {
                    buf[..len].copy_from_slice(&archived);
                    Some(len)
                })?;
                len
            }
        };
        let t = &mut self.tx[edge - self.base];
        t.metrics.records_out += items.len() as u64;
        t.metrics.bytes_out += bytes as u64;
        t.metrics.batches_out += 1;
        if !t.unflushed {
            // Published at the next flush tick.
            t.unflushed = true;
            crate::dataflow::mark_pending();
        }
        Ok(())
    }

    /// Writes one frame on `edge` to `dest`, waiting (and draining) while
    /// the ring is full. Returns what `write` returned.
    fn send_frame(
        &mut self,
        edge: usize,
        dest: usize,
        kind: FrameKind,
        len: usize,
        write: &mut dyn FnMut(&mut [u8]) -> Option<usize>,
    ) -> Result<Option<usize>, RuntimeError> {
        let j = edge - self.base;
        let (tx_here, tx_later) = self.tx.split_at_mut(j + 1);
        let t = &mut tx_here[j];
        let mut waited = false;
        let mut spins = 0u32;
        loop {
            // State this worker owes `dest` on this edge goes first (the
            // receiver keeps the records until it has it).
            let owed_first = t.moves
                && kind == FrameKind::Data
                && super::moves::owes_to(edge, dest)
                && !super::moves::pump_to(edge, dest, t.max_frame, &mut |len, w| {
                    t.tx[dest].try_send(FrameKind::State, len, w)
                })
                .map_err(|e| RuntimeError::channel(t.me, dest, e))?;
            let mut used = None;
            let sent = !owed_first
                && t.tx[dest]
                    .try_send(kind, len, &mut |buf| {
                        used = write(buf);
                        used
                    })
                    .map_err(|e| t.err(dest, e))?;
            if sent {
                return Ok(used);
            }
            if !waited {
                waited = true;
                t.metrics.ring_full_waits += 1;
                if let Some(&k) = t.tiers.get(dest) {
                    t.full_by_tier[(k as usize).min(2)] += 1;
                }
            }
            t.tx[dest].flush().map_err(|e| t.err(dest, e))?;
            // Keep this worker's inputs of edges >= `edge` moving.
            drain(&mut self.rx[j..], edge, tx_later, edge + 1, self.error)?;
            spins = spins.saturating_add(1);
            crate::dataflow::full_ring_pause(spins);
        }
    }

    /// Feeder `feeder` of `edge` promises no record below `wm` any more:
    /// when the minimum over the edge's feeders advances, a watermark frame
    /// goes to every worker (after what this worker sent before it).
    pub fn watermark(&mut self, edge: usize, feeder: usize, wm: u64) {
        let t = &mut self.tx[edge - self.base];
        t.feeder_is_source[feeder] = Some(self.source);
        let f = &mut t.feeders[feeder];
        if f.1.is_some() || wm <= f.0 {
            return;
        }
        f.0 = wm;
        let min = t
            .feeders
            .iter()
            .map(|f| f.1.unwrap_or(f.0))
            .min()
            .unwrap_or(u64::MAX);
        if min > t.sent_wm && !t.ended {
            t.sent_wm = min;
            t.metrics.watermarks_out += 1;
            if let Err(e) = self.broadcast(edge, FrameKind::Watermark, min) {
                self.fail(e);
            }
        }
    }

    /// Feeder `feeder` of `edge` passed checkpoint barrier `id` (after
    /// sending what came before it): once every feeder of the edge at this
    /// worker passed it (ended ones count as past every barrier), a barrier
    /// frame with the feeders' minimum goes to every worker. (A job with
    /// barriers has one feeder per edge: `run_graph` refuses others, whose
    /// records after a barrier could overtake it.)
    pub fn barrier(&mut self, edge: usize, feeder: usize, id: u64) {
        let t = &mut self.tx[edge - self.base];
        if t.feeders[feeder].1.is_some() || id <= t.feeder_barriers[feeder] {
            return;
        }
        t.feeder_barriers[feeder] = id;
        self.send_barrier(edge);
    }

    /// Sends the newest barrier every open feeder of `edge` passed, if new.
    fn send_barrier(&mut self, edge: usize) {
        let t = &mut self.tx[edge - self.base];
        if t.ended {
            return;
        }
        let min = t
            .feeders
            .iter()
            .zip(&t.feeder_barriers)
            .filter(|(f, _)| f.1.is_none())
            .map(|(_, &b)| b)
            .min();
        let Some(min) = min.filter(|&m| m > t.sent_barrier) else {
            return;
        };
        t.sent_barrier = min;
        if let Err(e) = self.broadcast(edge, FrameKind::Barrier, min) {
            self.fail(e);
        }
        // Records after the barrier go by the table in force after it.
        let t = &mut self.tx[edge - self.base];
        if t.moves {
            let next = super::moves::table_at(t.key_groups, min);
            if next != t.assign {
                t.assign = next;
            }
        }
    }

    /// Feeder `feeder` of `edge` ended with final watermark `final_wm`
    /// (`u64::MAX`, or where a stopped source was): once every feeder ended,
    /// End (carrying their minimum) goes to every worker.
    pub fn end(&mut self, edge: usize, feeder: usize, final_wm: u64) {
        let t = &mut self.tx[edge - self.base];
        if t.feeders[feeder].1.is_some() {
            return;
        }
        t.feeders[feeder].1 = Some(final_wm);
        if t.feeders.iter().any(|f| f.1.is_none()) {
            // The open feeders may all be past a barrier this one was not.
            self.send_barrier(edge);
            return;
        }
        let t = &mut self.tx[edge - self.base];
        if !t.ended {
            t.ended = true;
            let min = t
                .feeders
                .iter()
                .filter_map(|f| f.1)
                .min()
                .unwrap_or(u64::MAX);
            if let Err(e) = self.broadcast(edge, FrameKind::End, min) {
                self.fail(e);
            }
        }
    }

    fn broadcast(&mut self, edge: usize, kind: FrameKind, value: u64) -> Result<(), RuntimeError> {
        let n = self.tx[edge - self.base].tx.len();
        // A watermark behind no unpublished data is published without
        // ringing parked receivers: each reads it at its next tick, at most
        // one idle tick later (`crate::dataflow::IDLE_TICK`), when every
        // worker ticks anyway. Data and End frames ring.
        let quiet = kind == FrameKind::Watermark && !self.tx[edge - self.base].unflushed;
        let bytes = value.to_le_bytes();
        for dest in 0..n {
            self.send_frame(edge, dest, kind, 8, &mut |buf| {
                buf[..8].copy_from_slice(&bytes);
                Some(8)
            })?;
        }
        let t = &mut self.tx[edge - self.base];
        if quiet {
            for to in 0..t.tx.len() {
                t.tx[to].flush_quiet().map_err(|e| t.err(to, e))?;
            }
            t.unflushed = false;
            return Ok(());
        }
        t.unflushed = true;
        t.publish()
    }
}

/// Drains `rx` (edges `rx_base..`), each edge's operator sending on the
/// edges after it (`tx`, edges `tx_base..`).
pub(crate) fn drain<'c>(
    rx: &mut [EdgeRx<'c>],
    rx_base: usize,
    tx: &mut [EdgeTx<'c>],
    tx_base: usize,
    error: &mut Option<RuntimeError>,
) -> Result<(), RuntimeError> {
    for i in 0..rx.len() {
        poll_edge(rx, i, rx_base, tx, tx_base, 16, error)?;
    }
    Ok(())
}

/// Polls edge `rx_base + i` once (up to `budget` frames per input) into its
/// operator; delivers end-of-stream once every input ended. Returns the
/// frames read.
pub(crate) fn poll_edge<'c>(
    rx: &mut [EdgeRx<'c>],
    i: usize,
    rx_base: usize,
    tx: &mut [EdgeTx<'c>],
    tx_base: usize,
    budget: usize,
    error: &mut Option<RuntimeError>,
) -> Result<usize, RuntimeError> {
    let edge = rx_base + i;
    let (here, later) = rx.split_at_mut(i + 1);
    let r = &mut here[i];
    if r.done {
        return Ok(0);
    }
    // The operator of edge `edge` sends on edges > `edge` only.
    let tx_later = &mut tx[(edge + 1 - tx_base)..];
    let validate = r.inputs.validates();
    let consumer = &mut r.consumer;
    // The watermark event comes last in a poll; it is held until the poll
    // returns: when it is the final one (every input ended), `on_end`
    // delivers it, so an operator never sees its final watermark twice.
    // A watermark of `u64::MAX` is always final: a source sends it just
    // before its End frame, which may land in a later poll (each frame is
    // published on its own), so it is held for `on_end` too.
    let mut advanced = None;
    let frames = r.inputs.poll_raw(budget, &mut |ev| {
        let (from, bytes) = match ev {
            InputEvent::Data { from, bytes } => (from, bytes),
            InputEvent::Watermark(wm) => {
                advanced = Some(wm);
                return Ok(0);
            }
            InputEvent::Barrier(id) => {
                // The watermark the frames before the barrier made goes
                // first (never the final one: inputs are still open).
                let mut cx = Cx::new(&mut *tx_later, &mut *later, edge + 1, &mut *error);
                if let Some(wm) = advanced.take().filter(|&wm| wm < u64::MAX) {
                    consumer.on_watermark(wm, &mut cx);
                }
                consumer.on_barrier(id, &mut cx);
                return match cx.error.take() {
                    Some(e) => Err(e),
                    None => Ok(0),
                };
            }
            InputEvent::State { from, bytes } => {
                let mut cx = Cx::new(&mut *tx_later, &mut *later, edge + 1, &mut *error);
                return state_event(&mut **consumer, advanced.take(), from, bytes, &mut cx);
            }
        };
        let mut cx = Cx::new(&mut *tx_later, &mut *later, edge + 1, &mut *error);
        let n = consumer.on_data(from, bytes, validate, &mut cx)?;
        match cx.error.take() {
            Some(e) => Err(e),
            None => Ok(n),
        }
    })?;
    if let Some(wm) = advanced.filter(|&wm| wm < u64::MAX && !r.inputs.all_ended()) {
        let mut cx = Cx::new(&mut *tx_later, &mut *later, edge + 1, &mut *error);
        r.consumer.on_watermark(wm, &mut cx);
        if let Some(e) = cx.error.take() {
            return Err(e);
        }
    }
    if r.inputs.all_ended() {
        if !r.ended {
            r.ended = true;
            let final_wm = r.inputs.watermark();
            let mut cx = Cx::new(tx_later, later, edge + 1, error);
            r.consumer.on_end(final_wm, &mut cx);
            if let Some(e) = cx.error.take() {
                return Err(e);
            }
        }
        // State of a move may still come (after its senders' End frames).
        r.done = !r.consumer.awaits_state();
    }
    Ok(frames)
}

/// A state frame for `consumer` (kept out of the data path: moves are
/// rare), after the watermark the frames before it made.
#[cold]
#[inline(never)]
fn state_event(
    consumer: &mut dyn EdgeConsumer,
    advanced: Option<u64>,
    from: usize,
    bytes: &[u8],
    cx: &mut Cx<'_, '_>,
) -> Result<usize, RuntimeError> {
    if let Some(wm) = advanced.filter(|&wm| wm < u64::MAX) {
        consumer.on_watermark(wm, cx);
    }
    consumer.on_state(from, bytes, cx);
    match cx.error.take() {
        Some(e) => Err(e),
        None => Ok(0),
    }
}

/// Calls `tick` on edge `rx_base + i`'s operator.
pub(crate) fn tick_edge<'c>(
    rx: &mut [EdgeRx<'c>],
    i: usize,
    rx_base: usize,
    tx: &mut [EdgeTx<'c>],
    tx_base: usize,
    error: &mut Option<RuntimeError>,
) -> Result<(), RuntimeError> {
    let edge = rx_base + i;
    let (here, later) = rx.split_at_mut(i + 1);
    let r = &mut here[i];
    if r.done {
        return Ok(());
    }
    let tx_later = &mut tx[(edge + 1 - tx_base)..];
    let mut cx = Cx::new(tx_later, later, edge + 1, error);
    r.consumer.tick(&mut cx);
    match cx.error.take() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Per-destination staging batches of one feeder of one edge: the piece
/// every exchanging operator embeds. Records are staged per destination
/// worker and sent as one archived frame when `batch` are staged, at every
/// flush tick, and before every watermark (so a watermark never overtakes
/// the records below it).
pub struct Outbox<T> {
    edge: usize,
    feeder: usize,
    batch: usize,
    staging: Vec<Vec<T>>,
    /// Counters: records pushed into this outbox.
    pub records: u64,
}

impl<T: ExchangeData> Outbox<T> {
    /// The outbox of feeder `feeder` of `edge` (from [`crate::dataflow::Dataflow::feed`]).
    pub fn new(edge: usize, feeder: usize) -> Self {
        Outbox {
            edge,
            feeder,
            batch: 0,
            staging: Vec::new(),
            records: 0,
        }
    }

    /// Its edge.
    pub fn edge(&self) -> usize {
        self.edge
    }

    #[cold]
    fn init(&mut self, cx: &Cx<'_, '_>) {
        assert!(
            self.edge >= cx.base,
            "an operator fed by edge {} sends on edge {}, created before it: an operator may \
             only send on edges created after its input edge (create the output edge after \
             the input's; `air_runtime::dataflow::plan` lists the edges in order)",
            cx.base.saturating_sub(1),
            self.edge
        );
        let n = cx.workers(self.edge);
        self.batch = cx.batch_fit::<T>(self.edge, crate::dataflow::batch_records());
        self.staging = (0..n).map(|_| Vec::with_capacity(self.batch)).collect();
    }

    /// The worker owning `hash` on this edge.
    #[inline(always)]
    pub fn owner(&mut self, hash: u64, cx: &Cx<'_, '_>) -> usize {
        cx.owner(self.edge, hash)
    }

    /// Stages `item` for worker `dest`; sends the batch when full.
    #[inline(always)]
    pub fn push(&mut self, dest: usize, item: T, cx: &mut Cx<'_, '_>) {
        if self.staging.is_empty() {
            self.init(cx);
        }
        self.records += 1;
        let s = &mut self.staging[dest];
        s.push(item);
        if s.len() == 1 {
            // The first record staged since this batch went: the next
            // flush tick must push it.
            crate::dataflow::mark_pending();
        }
        if s.len() >= self.batch {
            cx.send_batch(self.edge, dest, s);
        }
    }

    /// Stages `item` for its key's owner (its key group's owner).
    #[inline(always)]
    pub fn push_hashed(&mut self, hash: u64, item: T, cx: &mut Cx<'_, '_>) {
        if self.staging.is_empty() {
            self.init(cx);
        }
        let dest = cx.owner(self.edge, hash);
        self.push(dest, item, cx);
    }

    /// Stages a copy of `item` for every worker.
    pub fn push_all(&mut self, item: T, cx: &mut Cx<'_, '_>)
    where
        T: Clone,
    {
        if self.staging.is_empty() {
            self.init(cx);
        }
        for dest in 0..self.staging.len() {
            self.push(dest, item.clone(), cx);
        }
    }

    /// Sends every staged batch.
    pub fn flush(&mut self, cx: &mut Cx<'_, '_>) {
        for dest in 0..self.staging.len() {
            if !self.staging[dest].is_empty() {
                cx.send_batch(self.edge, dest, &mut self.staging[dest]);
            }
        }
    }

    /// Sends what is staged, then this feeder's watermark `wm`.
    pub fn watermark(&mut self, wm: u64, cx: &mut Cx<'_, '_>) {
        self.flush(cx);
        cx.watermark(self.edge, self.feeder, wm);
    }

    /// Sends what is staged, then checkpoint barrier `id` from this feeder
    /// ([`Cx::barrier`]).
    pub fn barrier(&mut self, id: u64, cx: &mut Cx<'_, '_>) {
        self.flush(cx);
        cx.barrier(self.edge, self.feeder, id);
    }

    /// Sends what is staged, then this feeder's end (final watermark `wm`).
    pub fn end(&mut self, wm: u64, cx: &mut Cx<'_, '_>) {
        self.flush(cx);
        cx.end(self.edge, self.feeder, wm);
    }
}
