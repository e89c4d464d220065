//! How a ring endpoint waits: spin, then yield, then park on a futex.

use std::time::Duration;

/// How an endpoint waits when the ring is full (producer) or empty (consumer).
///
/// The waiter first spins `spin` times (`pause` on x86), then calls
/// `sched_yield` `yields` times, then parks on the ring's futex for at most
/// `park` per sleep, re-checking the ring (and the peer's liveness) after
/// every sleep. An idle channel therefore costs no CPU once it has parked.
/// `park = None` never parks (pure spinning: the lowest latency, one busy core
/// per waiting endpoint).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitPolicy {
    /// Busy-wait iterations before yielding.
    pub spin: u32,
    /// `sched_yield` calls before parking.
    pub yields: u32,
    /// Longest single park; `None` spins forever.
    pub park: Option<Duration>,
}

impl WaitPolicy {
    /// Pure spinning, for latency runs with one dedicated CPU per endpoint.
    /// Never use it when endpoints can share a CPU: a spinning waiter then
    /// holds the CPU its peer needs until the scheduler preempts it (a time
    /// slice, milliseconds, per hand-off).
    pub const SPIN: WaitPolicy = WaitPolicy {
        spin: u32::MAX,
        yields: 0,
        park: None,
    };

    /// Spin about 5 µs, then yield the CPU on every retry; never park. Low
    /// latency that stays correct (if slower) when endpoints share CPUs.
    pub const SPIN_THEN_YIELD: WaitPolicy = WaitPolicy {
        spin: 1 << 10,
        yields: u32::MAX,
        park: None,
    };

    /// The default: about 20 µs of spinning, 16 yields, then parks of at most 2 ms.
    pub const BALANCED: WaitPolicy = WaitPolicy {
        spin: 1 << 12,
        yields: 16,
        park: Some(Duration::from_millis(2)),
    };
}

impl Default for WaitPolicy {
    fn default() -> Self {
        WaitPolicy::BALANCED
    }
}

/// Wait state of one blocking call.
#[derive(Debug)]
pub(crate) struct Backoff {
    step: u64,
}

/// What the waiter should do next.
pub(crate) enum Step {
    Spin,
    Yield,
    Park(Duration),
}

impl Backoff {
    pub(crate) fn new() -> Self {
        Backoff { step: 0 }
    }

    /// Next step under `policy`; also tells (via the step count) how long we waited.
    #[inline]
    pub(crate) fn next(&mut self, policy: &WaitPolicy) -> Step {
        self.step += 1;
        let spin = policy.spin as u64;
        if self.step <= spin {
            return Step::Spin;
        }
        if self.step <= spin + policy.yields as u64 {
            return Step::Yield;
        }
        match policy.park {
            Some(d) => Step::Park(d),
            None => Step::Spin,
        }
    }

    /// How many steps were taken; used to rate-limit liveness checks while spinning.
    pub(crate) fn steps(&self) -> u64 {
        self.step
    }
}
