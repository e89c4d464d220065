//! Parking on a 32-bit word: a shared (not process-private) futex on Linux, so a
//! waiter in one process is woken by a store in another through a `/dev/shm`
//! mapping. Elsewhere, and under loom, parking degrades to a short sleep/yield;
//! every park is bounded in time by the caller anyway.

use crate::sync::AtomicU32;
use std::time::Duration;

/// Sleeps while `*word == expected`, for at most `timeout`. Spurious returns are
/// allowed; callers re-check their condition.
pub(crate) fn wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    #[cfg(all(target_os = "linux", not(loom)))]
    {
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: `word` is a live, 4-byte aligned atomic for the duration of the
        // call (it is borrowed); FUTEX_WAIT only reads it and compares it with
        // `expected`. The timespec outlives the call. A shared futex (no
        // FUTEX_PRIVATE_FLAG) keys on the physical page, so it works across
        // processes that map the same segment.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAIT,
                expected,
                &ts as *const libc::timespec,
                std::ptr::null::<u32>(),
                0u32,
            );
        }
    }
    #[cfg(all(not(target_os = "linux"), not(loom)))]
    {
        let _ = (word, expected);
        std::thread::sleep(timeout.min(Duration::from_micros(100)));
    }
    #[cfg(loom)]
    {
        let _ = (word, expected, timeout);
        loom::thread::yield_now();
    }
}

/// Wakes every waiter parked on `word`.
pub(crate) fn wake(word: &AtomicU32) {
    #[cfg(all(target_os = "linux", not(loom)))]
    // SAFETY: `word` is a live, aligned atomic; FUTEX_WAKE does not access the
    // memory, it only uses the address as the key of the wait queue.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX);
    }
    #[cfg(not(all(target_os = "linux", not(loom))))]
    let _ = word;
}
