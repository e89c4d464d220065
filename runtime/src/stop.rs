//! Stopping a job on SIGINT / SIGTERM: the first signal asks every worker to
//! stop its source; the job then drains every channel, fires every window
//! that can fire, and the command writes its results and report and exits
//! with `128 + signal` (130 for SIGINT, 143 for SIGTERM). A second signal
//! exits at once with its code, without results — unless it is the same
//! signal within [`REPEAT_WINDOW_NS`] of the first: that is one stop
//! delivered twice (GNU `timeout` signals the child and then its whole
//! process group; a launcher may forward a signal the rank also got), so
//! it is ignored.
//!
//! "Can fire": a worker that stops sends end-of-stream carrying its
//! watermark at the stop instead of "infinity", so a window fires only if
//! its end is at most the minimum of those final watermarks — windows that
//! every worker had read past. Windows still open are not reported as if
//! they were complete; their count is reported instead.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};

/// A repeat of the first signal within this many ns of it counts as the
/// same stop (500 ms).
pub const REPEAT_WINDOW_NS: u64 = 500_000_000;

/// Set by the first SIGINT/SIGTERM (or [`request`]).
static STOP: AtomicBool = AtomicBool::new(false);
/// The signal that asked for the stop (0: none).
static SIGNAL: AtomicI32 = AtomicI32::new(0);
/// When the first signal came, ns of `CLOCK_MONOTONIC`.
static FIRST_NS: AtomicU64 = AtomicU64::new(0);

/// `CLOCK_MONOTONIC`, ns (async-signal-safe: clock_gettime(2)).
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer; it
    // is async-signal-safe (POSIX).
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Whether a stop was asked for.
#[inline]
pub fn requested() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// Asks every running job of this process to stop its sources (as the first
/// signal does).
pub fn request() {
    STOP.store(true, Ordering::Relaxed);
}

/// The signal number that asked for the stop, if one did.
pub fn signal() -> Option<i32> {
    match SIGNAL.load(Ordering::Relaxed) {
        0 => None,
        s => Some(s),
    }
}

extern "C" fn on_signal(sig: libc::c_int) {
    // Only async-signal-safe work here: atomics, clock_gettime(2),
    // write(2), _exit(2).
    let now = monotonic_ns();
    if SIGNAL
        .compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok()
    {
        FIRST_NS.store(now, Ordering::SeqCst);
        STOP.store(true, Ordering::SeqCst);
        let msg =
            b"air: stopping: draining channels and writing results (signal again to quit now)\n";
        // SAFETY: write(2) on stderr with a valid buffer is async-signal-safe.
        unsafe {
            libc::write(2, msg.as_ptr().cast(), msg.len());
        }
    } else if SIGNAL.load(Ordering::SeqCst) == sig && {
        // 0: the first is still being handled (on another thread).
        let first = FIRST_NS.load(Ordering::SeqCst);
        first == 0 || now.saturating_sub(first) < REPEAT_WINDOW_NS
    } {
        // The first signal delivered again (to the process group): the
        // same stop.
    } else {
        let msg = b"air: second signal: exiting without results\n";
        // SAFETY: write(2) and _exit(2) are async-signal-safe; _exit ends
        // the process without running destructors (none may run here).
        unsafe {
            libc::write(2, msg.as_ptr().cast(), msg.len());
            libc::_exit(128 + sig);
        }
    }
}

/// Installs the SIGINT and SIGTERM handlers (call once, early in `main`).
pub fn install_handlers() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction with a handler address and an empty
        // mask is valid; `on_signal` only does async-signal-safe work.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            sa.sa_flags = libc::SA_RESTART;
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}
