//! Live inputs on the graph API: a source that goes quiet stops holding
//! windows back after its idle time (idleness), so windows close and their
//! rows leave while the input is quiet; rows of a long run stream out as
//! windows fire instead of piling up.

use air_operators::graph::{Count, KeyedWindowExt, Tumbling};
use air_runtime::dataflow::{run_graph, Source, SourcePoll};
use air_runtime::JobConfig;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Records stamped with the wall clock: `burst` of them every 10 ms during
/// `active`, then nothing (Idle) during `quiet`, then one last record, then
/// the end. (key, event time ms)
struct Bursty {
    start: Instant,
    active: Duration,
    quiet: Duration,
    next: Instant,
    last_sent: bool,
    sent: u64,
}

impl Source for Bursty {
    type Item = (u32, u64);
    fn poll(&mut self, buf: &mut Vec<(u32, u64)>, _max: usize) -> SourcePoll {
        buf.clear();
        let t = self.start.elapsed();
        if t < self.active {
            if Instant::now() >= self.next {
                self.next += Duration::from_millis(10);
                for k in 0..4u32 {
                    buf.push((k, now_ms()));
                    self.sent += 1;
                }
                return SourcePoll::Ready;
            }
            return SourcePoll::Idle;
        }
        if t < self.active + self.quiet {
            return SourcePoll::Idle;
        }
        if !self.last_sent {
            self.last_sent = true;
            buf.push((0, now_ms()));
            self.sent += 1;
            return SourcePoll::Ready;
        }
        SourcePoll::Done
    }
}

#[test]
fn a_quiet_source_goes_idle_and_its_windows_close_while_it_is_quiet() {
    let cfg = JobConfig {
        workers: 2,
        pin: false,
        ..JobConfig::default()
    };
    let start = Instant::now();
    let (active, quiet) = (Duration::from_millis(2500), Duration::from_millis(3000));
    // (window start, key, count, ms since start when the row arrived)
    let rows = Arc::new(Mutex::new(Vec::<(u64, u32, u64, u128)>::new()));
    let sent = Arc::new(Mutex::new(0u64));
    let out = rows.clone();
    let sent2 = sent.clone();
    run_graph(&cfg, move |df| {
        let out = out.clone();
        // Only worker 0 has input; worker 1's source ends at once (it must
        // not hold windows back either).
        let source = Bursty {
            start,
            active: if df.index() == 0 {
                active
            } else {
                Duration::ZERO
            },
            quiet: if df.index() == 0 {
                quiet
            } else {
                Duration::ZERO
            },
            next: Instant::now(),
            last_sent: df.index() != 0,
            sent: 0,
        };
        let sent = sent2.clone();
        df.report_with(move |s| {
            *sent.lock().unwrap() += s.get("source_records");
        });
        df.source(source)
            .event_time(|r| r.1, 0)
            .idle_after_ms(300)
            .key_by(|r| r.0)
            .window(Tumbling::ms(1000), |r| r.1)
            .aggregate(Count)
            .for_each(move |r| {
                out.lock()
                    .unwrap()
                    .push((r.start, r.key, r.value, start.elapsed().as_millis()))
            });
    })
    .unwrap();
    let rows = rows.lock().unwrap().clone();
    let quiet_from = active.as_millis();
    let quiet_to = (active + quiet).as_millis();
    // Every record is counted exactly once.
    let total: u64 = rows.iter().map(|r| r.2).sum();
    assert_eq!(total, *sent.lock().unwrap());
    // The window holding the last record of the active phase closes during
    // the quiet phase: its rows arrive after the input went quiet (plus the
    // idle time) and well before the input resumes.
    let newest_window = rows
        .iter()
        .filter(|r| r.3 < quiet_to)
        .map(|r| r.0)
        .max()
        .expect("rows during the run");
    let arrivals: Vec<u128> = rows
        .iter()
        .filter(|r| r.0 == newest_window)
        .map(|r| r.3)
        .collect();
    assert!(
        arrivals
            .iter()
            .all(|&t| t >= quiet_from && t + 500 < quiet_to),
        "rows of the last active window arrived at {arrivals:?} ms; the input was quiet \
         from {quiet_from} to {quiet_to} ms"
    );
    // Rows of windows before it left while the input was still active.
    assert!(
        rows.iter().any(|r| r.0 < newest_window && r.3 < quiet_from),
        "no window closed while the input was active: {rows:?}"
    );
}

/// Ingestion time: records without a time of their own, stamped when read,
/// in tumbling windows of the stamps (processing-time windows). The
/// watermark follows the wall clock with no idleness setting: windows close
/// as real time passes their end, also while the input is quiet; every
/// record is counted once, in a window aligned to the size that holds its
/// stamp.
#[test]
fn ingestion_time_windows_close_in_real_time() {
    let cfg = JobConfig {
        workers: 2,
        pin: false,
        ..JobConfig::default()
    };
    let start = Instant::now();
    let (active, quiet) = (Duration::from_millis(600), Duration::from_millis(1200));
    // (window start, window end, key, count, wall clock ms at arrival)
    let rows = Arc::new(Mutex::new(Vec::<(u64, u64, u32, u64, u64)>::new()));
    let sent = Arc::new(Mutex::new(0u64));
    let out = rows.clone();
    let sent2 = sent.clone();
    let before = now_ms();
    run_graph(&cfg, move |df| {
        let out = out.clone();
        let source = Bursty {
            start,
            active,
            quiet,
            next: Instant::now(),
            last_sent: false,
            sent: 0,
        };
        let sent = sent2.clone();
        df.report_with(move |s| {
            *sent.lock().unwrap() += s.get("source_records");
        });
        df.source(source)
            .map(|r| r.0) // the key only: no time in the data
            .ingestion_time()
            .key_by(|r: &(u64, u32)| r.1)
            .window(Tumbling::ms(100), |r: &(u64, u32)| r.0)
            .aggregate(Count)
            .for_each(move |r| {
                out.lock()
                    .unwrap()
                    .push((r.start, r.end, r.key, r.value, now_ms()))
            });
    })
    .unwrap();
    let after = now_ms();
    let rows = rows.lock().unwrap().clone();
    let total: u64 = rows.iter().map(|r| r.3).sum();
    assert_eq!(total, *sent.lock().unwrap(), "every record counted once");
    assert!(total > 100);
    for &(s, e, _, _, _) in &rows {
        assert_eq!((s % 100, e - s), (0, 100), "aligned windows");
        assert!(s + 100 > before && s < after, "stamps from the run's clock");
    }
    // Every (key, window) once.
    let mut seen: Vec<(u64, u32)> = rows.iter().map(|r| (r.0, r.2)).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), rows.len());
    // Windows closed in real time: none before its end (but the last one,
    // closed when the input ended), and those of the active phase during
    // the quiet one, long before the last record came.
    let quiet_to = before + (active + quiet).as_millis() as u64;
    let early: Vec<_> = rows
        .iter()
        .filter(|r| r.4 < r.1 && r.4 < quiet_to)
        .collect();
    assert!(early.is_empty(), "closed before their end: {early:?}");
    let active_to = before + active.as_millis() as u64;
    assert!(
        rows.iter()
            .filter(|r| r.1 <= active_to)
            .all(|r| r.4 + 500 < quiet_to),
        "windows of the active phase closed only at the end: {rows:?}"
    );
    assert!(rows.iter().filter(|r| r.1 <= active_to).count() >= 4 * 4);
}

#[test]
fn workers_that_build_edges_of_other_types_are_refused_before_running() {
    let cfg = JobConfig {
        workers: 2,
        pin: false,
        ..JobConfig::default()
    };
    // The plan (worker 0's graph) sends u64 on its edge; worker 1 would
    // send (u32, u8): read as u64 that would be garbage.
    let r = run_graph(&cfg, |df| {
        if df.index() == 1 {
            df.source(air_runtime::dataflow::VecSource::new(vec![(1u32, 2u8)]))
                .key_by(|r| r.0)
                .exchange()
                .for_each(|_| {});
        } else {
            df.source(air_runtime::dataflow::VecSource::new(vec![1u64, 2]))
                .key_by(|r| *r)
                .exchange()
                .for_each(|_| {});
        }
    });
    let e = r.expect_err("refused").to_string();
    assert!(
        e.contains("worker 1 built edge 0") && e.contains("u8") && e.contains("u64"),
        "{e}"
    );
}
