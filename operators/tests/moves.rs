//! Key groups moving with their state while one input of a join has
//! ended: its first input's edge still carries the states of the moves
//! its other input's barriers start (runtime/src/dataflow/moves.rs). Its
//! own test binary: it sets `AIR_MOVE_KEY_GROUPS=rotate` for the process.

use air_operators::graph::*;
use air_runtime::dataflow::{run_graph, VecSource};
use air_runtime::JobConfig;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// (key, time ms, id)
type Side = (u64, u64, u64);

/// The left input: few records, all early (it ends at once); the right:
/// many, over a long event time, so barriers keep coming after the left
/// ended and every one moves every key group.
fn sides() -> (Vec<Side>, Vec<Side>) {
    let left = (0..600u64).map(|i| (i % 50, i, i)).collect();
    let right = (0..300_000u64)
        .map(|i| ((i * 7) % 50, i / 2, 1_000_000 + i))
        .collect();
    (left, right)
}

#[test]
fn a_join_whose_first_input_ended_still_moves_its_state_exactly() {
    // SAFETY: no other thread runs yet (the test binary has this one test).
    unsafe { std::env::set_var("AIR_MOVE_KEY_GROUPS", "rotate") };
    let (l, r) = sides();
    let (lower, upper) = (-20i64, 40i64);
    let mut by_key: HashMap<u64, Vec<&Side>> = HashMap::new();
    for a in &l {
        by_key.entry(a.0).or_default().push(a);
    }
    let mut want: Vec<(u64, u64, u64)> = Vec::new();
    for b in &r {
        for a in by_key.get(&b.0).into_iter().flatten() {
            let d = b.1 as i64 - a.1 as i64;
            if lower <= d && d <= upper {
                want.push((a.0, a.2, b.2));
            }
        }
    }
    want.sort_unstable();
    assert!(want.len() > 1000, "{} pairs", want.len());
    let (l, r) = (Arc::new(l), Arc::new(r));
    for workers in [2, 3] {
        let got = Arc::new(Mutex::new(Vec::new()));
        let cfg = JobConfig {
            workers,
            barrier_every: Some(Duration::from_millis(2)),
            ..JobConfig::default()
        };
        let (out, l, r) = (got.clone(), l.clone(), r.clone());
        let o = run_graph(&cfg, move |df| {
            let (me, n) = (df.index(), df.workers());
            let mine = |v: &[Side]| v.iter().skip(me).step_by(n).copied().collect::<Vec<_>>();
            let left = df.source(VecSource::new(mine(&l))).event_time(|x| x.1, 100);
            let right = df.source(VecSource::new(mine(&r))).event_time(|x| x.1, 100);
            let out = out.clone();
            left.key_by(|x| x.0)
                .join(right.key_by(|x| x.0))
                .interval(lower, upper, |x| x.1, |x| x.1)
                .for_each(move |j| out.lock().unwrap().push((j.key, j.left.2, j.right.2)));
        })
        .unwrap_or_else(|e| panic!("{workers} workers: {e}"));
        let moves = o.stats.get("key_group_moves");
        assert!(moves >= 4, "{workers} workers: {moves} moves");
        let mut got = std::mem::take(&mut *got.lock().unwrap());
        got.sort_unstable();
        assert!(
            got == want,
            "{workers} workers, {moves} moves: {} pairs, want {}",
            got.len(),
            want.len()
        );
    }
}
