//! Every peer computes exactly the rows of a sequential reference (and of
//! the `air` binary, when one is built beside this test), in both modes, on
//! 1, 2 and 3 workers. Nothing here depends on timing.

use air_peers::{air_run, channel_ysb, reference, timely_ysb, Mode, YsbSpec};

/// 2 000 000 events at 1 000 000 events/s of event time, in 300 ms windows:
/// 7 windows (the last one partial), so windows close during the run too.
fn spec(workers: usize) -> YsbSpec {
    YsbSpec {
        window_ms: 300,
        ..YsbSpec::new(2_000_000, workers)
    }
}

#[test]
fn reference_counts_every_matched_view() {
    let s = spec(2);
    let rows = reference(&s);
    let windows: std::collections::BTreeSet<u64> = rows.iter().map(|r| r.window_start_ms).collect();
    assert_eq!(windows.len(), 7, "{windows:?}");
    assert!(rows.len() > 600, "{} rows", rows.len());
    // About a third of the events are views; every generated ad is in a
    // campaign, so every view is counted.
    let total: u64 = rows.iter().map(|r| r.count).sum();
    assert!((600_000..734_000).contains(&total), "{total} views");
    // The reference does not depend on the worker count's interleaving of
    // event times, only on the shards: the same total over 1 worker.
    let one: u64 = reference(&spec(1)).iter().map(|r| r.count).sum();
    assert!((600_000..734_000).contains(&one), "{one} views");
}

#[test]
fn peers_match_the_reference() {
    for workers in [1, 2, 3] {
        let s = spec(workers);
        let want = reference(&s);
        for mode in Mode::ALL {
            let t = timely_ysb::run(&s, mode).expect("timely run");
            assert_eq!(t.events, s.events);
            assert_eq!(t.late, 0);
            assert!(t.rows == want, "timely, {}, {workers} workers", mode.name());
            let c = channel_ysb::run(&s, mode).expect("crossbeam run");
            assert_eq!(c.events, s.events);
            assert_eq!(c.late, 0);
            assert!(
                c.rows == want,
                "crossbeam, {}, {workers} workers",
                mode.name()
            );
        }
    }
}

#[test]
fn peers_match_the_air_binary() {
    let Ok(air) = air_run::locate(None) else {
        eprintln!("no `air` binary built beside this test: comparison with air skipped");
        return;
    };
    for workers in [1, 2, 3] {
        let s = spec(workers);
        let want = reference(&s);
        for mode in Mode::ALL {
            let r = air_run::run(&air, &s, mode).expect("air run ysb");
            assert_eq!(r.events, s.events);
            assert!(r.rows == want, "air, {}, {workers} workers", mode.name());
        }
    }
}
