//! The one place the ring takes its atomics from.
//!
//! Every atomic type, fence and spin hint used by the ring comes through this
//! module, so that building with `RUSTFLAGS="--cfg loom"` swaps in loom's
//! model-checked versions without touching the ring's code.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

/// A hint inside a busy-wait loop (`pause` on x86). Under loom it yields to the
/// model scheduler, which loom needs to explore spinning code.
#[inline(always)]
pub(crate) fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}

/// Gives the rest of this thread's time slice away.
#[inline]
pub(crate) fn yield_now() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::thread::yield_now();
}
