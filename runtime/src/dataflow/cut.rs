//! Barriers cut by a source's input: an input read by a thread of its own
//! for several workers (a followed file) cannot resume at each worker's
//! own position (its lines are dealt out as they come), so under
//! checkpoints it cuts the stream for barrier `n` at one place for every
//! worker and each worker's source places barrier `n` exactly there. The
//! checkpoint's input position is then one byte offset, the same in every
//! part (docs/design.md, "Checkpoints").
//!
//! The input talks to its source's segment through this worker thread's
//! state during the source's poll: [`input_cuts_barriers`] says it cuts its
//! own barriers (the segment then places none on the shared schedule) and
//! where it stopped, and [`source_barrier`] says which barrier the segment
//! placed last (the input goes on past a cut once it was placed).

use std::cell::{Cell, RefCell};

/// A cut an input stopped at: the barrier id and the source's state there
/// (what its `restore` reads).
pub(crate) type Cut = (u64, Vec<u8>);

thread_local! {
    /// The newest barrier the source being polled placed.
    static PLACED: Cell<u64> = const { Cell::new(0) };
    /// Set during a poll by an input that cuts its own barriers: `Some(None)`
    /// no cut reached, `Some(Some(cut))` it stopped at `cut`.
    static CUT: RefCell<Option<Option<Cut>>> = const { RefCell::new(None) };
}

/// Before a source's poll: the newest barrier its segment placed.
pub(crate) fn before_poll(placed: u64) {
    PLACED.with(|p| p.set(placed));
}

/// After a source's poll: what its input said ([`input_cuts_barriers`]),
/// if it said anything.
pub(crate) fn after_poll() -> Option<Option<Cut>> {
    CUT.with(|c| c.borrow_mut().take())
}

/// Called by a source's input during the source's poll (on the worker's
/// thread): the input cuts its own barriers, so the source's segment
/// places none on the shared schedule ([`super::barrier_due`]), only those
/// its input stops at. `at`: it stopped at barrier `id`'s cut and reads
/// nothing more until the barrier was placed ([`source_barrier`] `>= id`);
/// `position` is the source's state there (what its `restore` and
/// `rescale` are given on a resume).
pub fn input_cuts_barriers(at: Option<(u64, Vec<u8>)>) {
    CUT.with(|c| {
        let mut c = c.borrow_mut();
        if at.is_some() || c.is_none() {
            *c = Some(at);
        }
    });
}

/// During a source's poll: the newest checkpoint barrier its segment
/// placed (the id a resumed job started from before its first).
pub fn source_barrier() -> u64 {
    PLACED.with(|p| p.get())
}
