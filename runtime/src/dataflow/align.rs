//! Barrier alignment of a segment's two inputs: a two-input operator (a
//! join) or a union. What the input ahead delivers after a barrier the
//! other has not delivered waits, in order, until the other delivers it or
//! ends (docs/design.md, "Checkpoints": aligned by keeping, never by
//! leaving an input unread).

use std::collections::VecDeque;

/// What an input delivered after its barrier, kept while it is ahead.
pub(crate) enum Early<T> {
    /// A batch (archived, with its sender) or a record.
    Batch(T),
    Watermark(u64),
    Barrier(u64),
    End(u64),
}

/// The barriers, ends and kept deliveries of two inputs.
pub(crate) struct TwoInputs<T> {
    /// Per input: its final watermark, once ended.
    pub(crate) ended: [Option<u64>; 2],
    /// Per input: the newest barrier it delivered (applied, not kept).
    at: [u64; 2],
    /// The barrier passed on (both inputs delivered it, or ended).
    passed: u64,
    /// What the input ahead delivered after its barrier: (input, delivery).
    pending: VecDeque<(usize, Early<T>)>,
    /// Both inputs ended and the end went on.
    closed: bool,
}

impl<T> TwoInputs<T> {
    pub(crate) fn new() -> Self {
        TwoInputs {
            ended: [None, None],
            at: [0, 0],
            passed: 0,
            pending: VecDeque::new(),
            closed: false,
        }
    }

    /// Whether input `side` delivered a barrier the other has not (and the
    /// other still runs): what it delivers next must be kept.
    #[inline(always)]
    pub(crate) fn ahead(&self, side: usize) -> bool {
        self.at[side] > self.passed && self.ended[1 - side].is_none()
    }

    /// Keeps `e`, delivered by input `side` while it is ahead.
    pub(crate) fn keep(&mut self, side: usize, e: Early<T>) {
        self.pending.push_back((side, e));
    }

    /// Input `side` delivered barrier `id` (not kept).
    pub(crate) fn barrier(&mut self, side: usize, id: u64) {
        self.at[side] = self.at[side].max(id);
    }

    /// Whether both inputs ended, and the segment's end has not gone on
    /// yet: true once, and the caller ends the segment.
    pub(crate) fn close(&mut self) -> bool {
        self.ended.iter().all(Option::is_some) && !std::mem::replace(&mut self.closed, true)
    }

    /// Whether both inputs ended and the end went on ([`TwoInputs::close`]).
    pub(crate) fn closed(&self) -> bool {
        self.closed
    }

    /// The newest barrier both inputs delivered (an ended input counts as
    /// past every barrier), if not passed on yet; it is passed on now.
    pub(crate) fn pass_barrier(&mut self) -> Option<u64> {
        let side = |i: usize| match self.ended[i] {
            Some(_) => u64::MAX,
            None => self.at[i],
        };
        let min = side(0).min(side(1)).min(self.at[0].max(self.at[1]));
        (min > self.passed).then(|| {
            self.passed = min;
            min
        })
    }

    /// The next kept delivery, if its input is no longer ahead (it is then
    /// applied in order: a kept barrier may make the input ahead again).
    pub(crate) fn next_ready(&mut self) -> Option<(usize, Early<T>)> {
        let &(side, _) = self.pending.front()?;
        if self.ahead(side) {
            return None;
        }
        self.pending.pop_front()
    }
}
