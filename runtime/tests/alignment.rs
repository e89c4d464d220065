//! Watermark alignment (`JobConfig::max_watermark_drift`) on real threads
//! and rings: worker 0's source can read its whole input at once while
//! worker 1's trickles. Without alignment records reach the operator
//! downstream thousands of ms of event time ahead of its watermark (what a
//! window or a join must keep); with a drift of D ms they arrive at most D
//! plus one poll ahead, every record arrives once, and the job says how
//! often a source waited.

use air_runtime::dataflow::{run_graph, Cx, Source, SourcePoll, Tail};
use air_runtime::JobConfig;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Records per source.
const N: u64 = 100_000;
/// Leads are measured past this event time: before the first watermarks
/// are in, sources run free (a source with nothing received yet cannot
/// know how far ahead it is), and what they read then sits in the rings
/// (64 KiB: under 8,000 records).
const SKIP: u64 = 20_000;
/// Records per poll (1 ms of event time each).
const POLL: u64 = 100;

/// Event times `0..N` ms; the slow one sleeps 1 ms before each poll (so
/// its N records take ~1 s, 100 ms of event time a ms).
struct Times {
    next: u64,
    slow: bool,
}

impl Source for Times {
    type Item = u64;
    fn poll(&mut self, buf: &mut Vec<u64>, _max: usize) -> SourcePoll {
        buf.clear();
        if self.slow {
            std::thread::sleep(Duration::from_millis(1));
        }
        let end = (self.next + POLL).min(N);
        buf.extend(self.next..end);
        self.next = end;
        if end < N {
            SourcePoll::Ready
        } else {
            SourcePoll::Done
        }
    }
}

/// Per worker: records seen and the largest lead of a record's event time
/// over the watermark received before it.
#[derive(Default, Clone, Copy, Debug)]
struct Seen {
    records: u64,
    max_lead: u64,
}

struct Lead {
    wm: u64,
    seen: Seen,
    out: Arc<Mutex<Vec<Seen>>>,
}

impl Tail<u64> for Lead {
    fn push(&mut self, t: u64, _cx: &mut Cx<'_, '_>) {
        self.seen.records += 1;
        if self.wm > 0 && t > SKIP {
            self.seen.max_lead = self.seen.max_lead.max(t.saturating_sub(self.wm));
        }
    }
    fn watermark(&mut self, wm: u64, _cx: &mut Cx<'_, '_>) {
        self.wm = self.wm.max(wm);
    }
    fn end(&mut self, _wm: u64, _cx: &mut Cx<'_, '_>) {
        self.out.lock().unwrap().push(self.seen);
    }
    fn barrier(&mut self, _id: u64, _cx: &mut Cx<'_, '_>) {}
}

/// Runs the job at 2 workers with `drift`; returns what each worker saw
/// and how many loops a source was held.
fn run(drift: Option<u64>) -> (Vec<Seen>, u64) {
    let cfg = JobConfig {
        workers: 2,
        pin: false,
        ring_bytes: 1 << 16,
        ring_budget: None,
        max_watermark_drift: drift,
        ..JobConfig::default()
    };
    let seen = Arc::new(Mutex::new(Vec::new()));
    let out = seen.clone();
    let res = run_graph(&cfg, move |df| {
        let slow = df.index() == 1;
        // Event time starts at 1 ms: a watermark of 0 means "none yet".
        df.source(Times { next: 0, slow })
            .map(|t| t + 1)
            .event_time(|t: &u64| *t, 0)
            .broadcast()
            .end_in(Lead {
                wm: 0,
                seen: Seen::default(),
                out: out.clone(),
            });
    })
    .expect("the job runs");
    let seen = seen.lock().unwrap().clone();
    (seen, res.stats.get("sources_held_for_alignment"))
}

#[test]
fn aligned_sources_stay_within_the_drift_of_the_slowest() {
    let (free, held_free) = run(None);
    assert_eq!(held_free, 0);
    let lead_free = free.iter().map(|s| s.max_lead).max().unwrap();
    // Without alignment worker 0 reads everything while worker 1 is at
    // its start.
    assert!(
        lead_free > 30_000,
        "unaligned lead only {lead_free} ms: {free:?}"
    );

    let drift = 2000;
    let (aligned, held) = run(Some(drift));
    assert_eq!(aligned.len(), 2);
    for s in &aligned {
        assert_eq!(s.records, 2 * N, "every record once: {aligned:?}");
    }
    let lead = aligned.iter().map(|s| s.max_lead).max().unwrap();
    eprintln!("max lead: free {lead_free} ms, aligned {lead} ms (drift {drift}), held {held}");
    // The drift, one poll past it, and what the slow source reads while
    // its watermark travels to the two workers (generous: 10 ms of wall
    // time at 100 ms of event time a ms).
    assert!(
        lead <= drift + POLL + 1000,
        "aligned lead {lead} ms over a drift of {drift}: {aligned:?}"
    );
    assert!(held > 0, "a source was held: {held}");
}
