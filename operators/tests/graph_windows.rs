//! Session windows and allowed lateness of the graph API against sequential
//! references computed here: sessions at 1, 2 and 4 workers through 4 KiB
//! rings, on data with gaps at the edge (gap − 1, gap, gap + 1), records
//! that bridge two sessions, out-of-order records within the delay and
//! many keys; then tumbling, sliding and session windows with allowed
//! lateness and a side stream of late records, where every record ends in
//! exactly one place (its windows' final rows or the side stream).

use air_operators::graph::*;
use air_runtime::dataflow::{run_graph, Dataflow, GraphOutput, VecSource};
use air_runtime::{JobConfig, RuntimeError};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Longest one graph may run before the test calls it a hang.
const LIMIT: Duration = Duration::from_secs(60);

/// splitmix64: a small seeded PRNG.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// (key, time ms, value)
type Ev = (u32, u64, i64);

/// A result row: (key, start, end, count, sum).
type Row = (u32, u64, u64, u64, i64);

/// `workers` unpinned workers, 4 KiB rings (every edge backpressured),
/// small batches, and watermarks sent at every turn of a worker's loop (so
/// windows fire while data still flows).
fn config(workers: usize) -> JobConfig {
    JobConfig {
        workers,
        pin: false,
        ring_bytes: 4096,
        batch_records: 16,
        flush: Duration::ZERO,
        ..JobConfig::default()
    }
}

fn run_limited<B>(cfg: JobConfig, build: B) -> Result<GraphOutput, RuntimeError>
where
    B: Fn(&Dataflow) + Sync + Send + 'static,
{
    let (tx, rx) = std::sync::mpsc::channel();
    let what = format!("{} workers", cfg.workers);
    std::thread::spawn(move || {
        let _ = tx.send(run_graph(&cfg, build));
    });
    match rx.recv_timeout(LIMIT) {
        Ok(r) => r,
        Err(_) => panic!("the graph ({what}) did not end within {LIMIT:?}"),
    }
}

fn shared<T>() -> Arc<Mutex<Vec<T>>> {
    Arc::new(Mutex::new(Vec::new()))
}

fn take<T: Clone>(v: &Arc<Mutex<Vec<T>>>) -> Vec<T> {
    v.lock().unwrap().clone()
}

fn row(r: Windowed<u32, (u64, i64)>) -> Row {
    (r.key, r.start, r.end, r.value.0, r.value.1)
}

// ---------------------------------------------------------------------------
// Sequential references

/// Sessions of `gap` over `events` (any order): per key, times sorted, a
/// new session where two neighbours are `gap` or more apart; rows sorted.
fn sessions_ref(events: &[Ev], gap: u64) -> Vec<Row> {
    let mut by_key: BTreeMap<u32, Vec<(u64, i64)>> = BTreeMap::new();
    for &(k, t, v) in events {
        by_key.entry(k).or_default().push((t, v));
    }
    let mut rows = Vec::new();
    for (k, mut tv) in by_key {
        tv.sort();
        let mut cur: Option<Row> = None;
        for (t, v) in tv {
            match &mut cur {
                Some(r) if t < r.2 => {
                    r.2 = t + gap;
                    r.3 += 1;
                    r.4 += v;
                }
                _ => {
                    rows.extend(cur.take());
                    cur = Some((k, t, t + gap, 1, v));
                }
            }
        }
        rows.extend(cur);
    }
    rows.sort();
    rows
}

/// Window rows of `windows` over `(record, start of one of its windows)`
/// pairs; sorted.
fn windows_ref(assigned: &[(Ev, u64)], size: u64) -> Vec<Row> {
    let mut m: BTreeMap<(u32, u64), (u64, i64)> = BTreeMap::new();
    for &((k, _, v), start) in assigned {
        let e = m.entry((k, start)).or_default();
        e.0 += 1;
        e.1 += v;
    }
    m.into_iter()
        .map(|((k, s), (c, v))| (k, s, s + size, c, v))
        .collect()
}

/// The windows of a test with lateness.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Tumbling(u64),
    Sliding(u64, u64),
    Session(u64),
}

/// What the graph must produce for the workers' `shards` with event-time
/// delay `delay` and lateness `lateness`: each worker's event-time stage
/// has watermark (newest time seen − delay); a record behind it is judged
/// by its windows (too late when every one ends at or before watermark −
/// lateness). Returns (final rows, too-late records sorted).
fn late_ref(shards: &[Vec<Ev>], kind: Kind, delay: u64, lateness: u64) -> (Vec<Row>, Vec<Ev>) {
    let mut assigned = Vec::new();
    let mut accepted = Vec::new();
    let mut late = Vec::new();
    for shard in shards {
        let (mut newest, mut wm) = (0u64, 0u64);
        for &e in shard {
            let t = e.1;
            if t >= wm && t > newest {
                newest = t;
                wm = wm.max(t.saturating_sub(delay));
            }
            // An on-time record (t >= wm) is never too late: its windows
            // end after t.
            let alive = |end: u64| end + lateness > wm;
            match kind {
                Kind::Tumbling(size) => {
                    let start = t - t % size;
                    if alive(start + size) {
                        assigned.push((e, start));
                    } else {
                        late.push(e);
                    }
                }
                Kind::Sliding(size, slide) => {
                    let mut any = false;
                    let mut s = (t + 1).saturating_sub(size).div_ceil(slide) * slide;
                    while s <= t {
                        if alive(s + size) {
                            assigned.push((e, s));
                            any = true;
                        }
                        s += slide;
                    }
                    if !any {
                        late.push(e);
                    }
                }
                Kind::Session(gap) => {
                    if alive(t + gap) {
                        accepted.push(e);
                    } else {
                        late.push(e);
                    }
                }
            }
        }
    }
    late.sort();
    let rows = match kind {
        Kind::Tumbling(size) | Kind::Sliding(size, _) => windows_ref(&assigned, size),
        Kind::Session(gap) => sessions_ref(&accepted, gap),
    };
    (rows, late)
}

/// The final rows of a refining stream, given in emission order: a row
/// supersedes every earlier row of its key for the same window or, for
/// sessions, for a session its window overlaps.
fn superseded(rows: &[Row], sessions: bool) -> Vec<Row> {
    let mut cur: BTreeMap<u32, Vec<Row>> = BTreeMap::new();
    for &r in rows {
        let v = cur.entry(r.0).or_default();
        if sessions {
            v.retain(|o| !(o.1 < r.2 && r.1 < o.2));
        } else {
            v.retain(|o| o.1 != r.1);
        }
        v.push(r);
    }
    let mut out: Vec<Row> = cur.into_values().flatten().collect();
    out.sort();
    out
}

// ---------------------------------------------------------------------------
// Sessions

/// Events of `keys` keys with session gap `gap`: per key, neighbours
/// `gap − 1`, `gap`, `gap + 1`, well inside or well beyond the gap apart,
/// and records halfway in gaps a bit over `gap` (they bridge two
/// sessions); in arrival order, each event delayed by up to `delay` ms
/// (out of order, never late).
fn session_events(seed: u64, keys: u32, per_key: usize, gap: u64, delay: u64) -> Vec<Ev> {
    let mut rng = Rng(seed);
    let mut evs = Vec::new();
    for k in 0..keys {
        let key = k.wrapping_mul(2_654_435_761) ^ 0x5a;
        let mut t = rng.below(1_000);
        for _ in 0..per_key {
            evs.push((key, t, rng.below(201) as i64 - 100));
            let d = match rng.below(7) {
                0 => gap - 1,
                1 => gap,
                2 => gap + 1,
                3 => rng.below(gap),
                4 => gap + rng.below(3 * gap),
                _ => {
                    // A record halfway across a gap of gap + 1 ..= 2 gap − 2:
                    // it bridges the sessions on both sides.
                    let d = gap + 1 + rng.below(gap - 2);
                    evs.push((key, t + d / 2, rng.below(201) as i64 - 100));
                    d
                }
            };
            t += d;
        }
    }
    // Arrival order: by time + a delay of 0 ..= `delay` (an event never
    // arrives more than `delay` after a later-timed one: never late).
    let mut keyed: Vec<(u64, usize, Ev)> = evs
        .into_iter()
        .enumerate()
        .map(|(i, e)| (e.1 + rng.below(delay + 1), i, e))
        .collect();
    keyed.sort();
    keyed.into_iter().map(|(_, _, e)| e).collect()
}

#[test]
fn sessions_match_the_reference_at_1_2_and_4_workers() {
    let (gap, delay) = (100u64, 250u64);
    let events = Arc::new(session_events(7, 300, 40, gap, delay));
    let want = sessions_ref(&events, gap);
    assert!(want.len() > 3_000, "{} sessions", want.len());
    for workers in [1usize, 2, 4] {
        let got = shared::<Row>();
        let (out, evs) = (got.clone(), events.clone());
        let res = run_limited(config(workers), move |df| {
            let n = df.workers();
            let mine: Vec<Ev> = evs.iter().skip(df.index()).step_by(n).copied().collect();
            let out = out.clone();
            df.source(VecSource::new(mine))
                .event_time(|e: &Ev| e.1, delay)
                .key_by(|e: &Ev| e.0)
                .window(Sessions::with_gap(gap), |e: &Ev| e.1)
                .aggregate((Count, Sum::of(|e: &Ev| e.2)))
                .for_each(move |r| out.lock().unwrap().push(row(r)));
        })
        .unwrap();
        let mut rows = take(&got);
        rows.sort();
        assert_eq!(rows.len(), want.len(), "{workers} workers: rows");
        assert_eq!(rows, want, "{workers} workers");
        let s = &res.stats;
        assert_eq!(s.get("late_records"), 0, "{workers} workers");
        assert_eq!(s.get("unfired_windows"), 0, "{workers} workers");
        assert_eq!(s.get("refired_rows"), 0, "{workers} workers");
        // Records that came after both sessions they bridge joined them.
        assert!(s.get("session_merges") > 100, "{workers} workers: {s:?}");
        assert_eq!(s.get("window_records"), events.len() as u64);
    }
}

#[test]
fn fired_sessions_are_freed() {
    // 50 keys, each with a session every 1 000 ms for 2 000 sessions: at
    // any time a worker holds a few per key, not all 100 000.
    let gap = 50u64;
    let mut evs = Vec::new();
    for i in 0..2_000u64 {
        for k in 0..50u32 {
            evs.push((k, i * 1_000 + k as u64, 1i64));
            evs.push((k, i * 1_000 + k as u64 + 10, 1i64));
        }
    }
    evs.sort_by_key(|e| e.1);
    let n = evs.len();
    let got = shared::<Row>();
    let out = got.clone();
    let evs = Arc::new(evs);
    let res = run_limited(config(1), move |df| {
        let out = out.clone();
        df.source(VecSource::new(evs.to_vec()))
            .event_time(|e: &Ev| e.1, 0)
            .key_by(|e: &Ev| e.0)
            .window(Sessions::with_gap(gap), |e: &Ev| e.1)
            .aggregate((Count, Sum::of(|e: &Ev| e.2)))
            .for_each(move |r| out.lock().unwrap().push(row(r)));
    })
    .unwrap();
    let rows = take(&got);
    assert_eq!(rows.len(), 100_000);
    assert!(rows.iter().all(|r| r.3 == 2 && r.2 - r.1 == 60));
    assert_eq!(res.stats.get("window_records"), n as u64);
    let open = res.stats.get_max("sessions_open_max").unwrap();
    assert!(open <= 500, "{open} sessions held at once");
}

#[test]
fn a_zero_gap_is_refused() {
    let err = run_graph(&config(1), |df| {
        df.source(VecSource::new(vec![(1u32, 0u64, 0i64)]))
            .key_by(|e: &Ev| e.0)
            .window(Sessions::with_gap(0), |e: &Ev| e.1)
            .aggregate(Count)
            .for_each(|_| {});
    })
    .unwrap_err();
    assert!(err.to_string().contains("gap"), "{err}");
}

// ---------------------------------------------------------------------------
// Allowed lateness

/// Worker shards with late records: times grow by `0..step`; one record in
/// six lags the newest by up to `max_lag` ms (some within the delay, some
/// within lateness, some beyond).
fn late_shards(
    seed: u64,
    workers: usize,
    n: usize,
    keys: u32,
    step: u64,
    max_lag: u64,
) -> Vec<Vec<Ev>> {
    let mut rng = Rng(seed);
    (0..workers)
        .map(|_| {
            let mut t = 0u64;
            (0..n)
                .map(|_| {
                    t += rng.below(step);
                    let time = if rng.below(6) == 0 {
                        t.saturating_sub(rng.below(max_lag))
                    } else {
                        t
                    };
                    (
                        rng.below(keys as u64) as u32,
                        time,
                        rng.below(201) as i64 - 100,
                    )
                })
                .collect()
        })
        .collect()
}

/// Runs `kind` windows with `lateness` and a side stream over `shards`;
/// returns (rows in emission order, late records sorted, stats).
fn run_late(
    shards: Vec<Vec<Ev>>,
    kind: Kind,
    delay: u64,
    lateness: u64,
) -> (Vec<Row>, Vec<Ev>, GraphOutput) {
    let workers = shards.len();
    let got = shared::<Row>();
    let side = shared::<Ev>();
    let (out, lout) = (got.clone(), side.clone());
    let shards = Arc::new(shards);
    let res = run_limited(config(workers), move |df| {
        let mine = shards[df.index()].clone();
        let (out, lout) = (out.clone(), lout.clone());
        let keyed = df
            .source(VecSource::new(mine))
            .event_time(|e: &Ev| e.1, delay)
            .key_by(|e: &Ev| e.0);
        let agg = (Count, Sum::of(|e: &Ev| e.2));
        let sink = move |r| out.lock().unwrap().push(row(r));
        let late_sink = move |l: LateRecord<u32, Ev>| {
            assert_eq!((l.key, l.time), (l.record.0, l.record.1));
            lout.lock().unwrap().push(l.record)
        };
        match kind {
            Kind::Tumbling(size) => {
                let (w, late) = keyed
                    .window(Tumbling::ms(size), |e: &Ev| e.1)
                    .allowed_lateness(lateness)
                    .side_output_late();
                w.aggregate(agg).for_each(sink);
                late.for_each(late_sink);
            }
            Kind::Sliding(size, slide) => {
                let (w, late) = keyed
                    .window(Sliding::ms(size, slide), |e: &Ev| e.1)
                    .side_output_late();
                w.allowed_lateness(lateness).aggregate(agg).for_each(sink);
                late.for_each(late_sink);
            }
            Kind::Session(gap) => {
                let (w, late) = keyed
                    .window(Sessions::with_gap(gap), |e: &Ev| e.1)
                    .allowed_lateness(lateness)
                    .side_output_late();
                w.aggregate(agg).for_each(sink);
                late.for_each(late_sink);
            }
        }
    })
    .unwrap();
    let mut late = take(&side);
    late.sort();
    (take(&got), late, res)
}

fn check_late(kind: Kind, lateness: u64, seed: u64) -> u64 {
    let delay = 30;
    let mut refired = 0;
    for workers in [1usize, 2, 4] {
        let shards = late_shards(seed + workers as u64, workers, 3_000, 12, 4, 600);
        let total: usize = shards.iter().map(|s| s.len()).sum();
        let (want, want_late) = late_ref(&shards, kind, delay, lateness);
        let (rows, late, res) = run_late(shards, kind, delay, lateness);
        let what = format!("{kind:?}, lateness {lateness}, {workers} workers");
        assert!(
            !want_late.is_empty() && want_late.len() < total / 4,
            "{what}: {} late",
            want_late.len()
        );
        assert_eq!(late, want_late, "{what}: side stream");
        assert_eq!(
            res.stats.get("late_records"),
            want_late.len() as u64,
            "{what}"
        );
        assert_eq!(res.stats.get("late_partials"), 0, "{what}");
        assert_eq!(res.stats.get("unfired_windows"), 0, "{what}");
        let fin = superseded(&rows, matches!(kind, Kind::Session(_)));
        assert_eq!(fin, want, "{what}: final rows");
        if !matches!(kind, Kind::Sliding(..)) {
            // Every record once: in a final row or on the side stream.
            let counted: u64 = fin.iter().map(|r| r.3).sum();
            assert_eq!(counted as usize + late.len(), total, "{what}");
        }
        refired += res.stats.get("refired_rows");
    }
    refired
}

#[test]
fn tumbling_windows_with_lateness_and_a_side_stream() {
    let refired = check_late(Kind::Tumbling(100), 250, 11) + check_late(Kind::Tumbling(100), 0, 12);
    assert!(refired > 0, "no window fired again");
}

#[test]
fn sliding_windows_with_lateness_and_a_side_stream() {
    let refired = check_late(Kind::Sliding(200, 50), 150, 21);
    assert!(refired > 0, "no window fired again");
}

#[test]
fn session_windows_with_lateness_and_a_side_stream() {
    let refired = check_late(Kind::Session(40), 200, 31) + check_late(Kind::Session(40), 0, 32);
    assert!(refired > 0, "no session fired again");
}
