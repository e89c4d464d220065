//! The top-per-window job (ties kept) and the stateless job, on 1–4
//! workers, against a sequential computation.

use air_operators::stream::{Identity, VecSource};
use air_operators::top::{run_stateless_job, run_top_job, StatelessUpstream, TopUpstream};
use air_runtime::JobConfig;
use std::collections::BTreeMap;

/// (time ms, id, score)
type Rec = (u64, u64, u64);

fn records() -> Vec<Rec> {
    let mut v = Vec::new();
    let mut x: u64 = 12345;
    for i in 0..20_000u64 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        // Times 0..=9999 with gaps: nothing in [3000, 4000) (an empty window).
        let mut t = i / 2;
        if (3000..4000).contains(&t) {
            t += 1000;
        }
        // Few distinct scores, so windows have ties for the maximum.
        v.push((t, i, (x >> 33) % 50));
    }
    // Exactly on a window edge: t = 5000 opens window 5000.
    v.push((5000, 99_999, 1000));
    v.push((4999, 99_998, 1000));
    v.sort();
    v
}

fn reference(v: &[Rec], size: u64) -> BTreeMap<u64, (u64, Vec<u64>)> {
    let mut m: BTreeMap<u64, (u64, Vec<u64>)> = BTreeMap::new();
    for &(t, id, s) in v {
        let e = m.entry(t - t % size).or_insert((s, Vec::new()));
        if s > e.0 {
            *e = (s, Vec::new());
        }
        if s == e.0 {
            e.1.push(id);
        }
    }
    for e in m.values_mut() {
        e.1.sort_unstable();
    }
    m
}

#[test]
fn top_per_window_keeps_ties_and_matches_a_sequential_computation() {
    let all = records();
    let want = reference(&all, 1000);
    assert!(!want.contains_key(&3000), "an empty window has no row");
    assert_eq!(want[&4000], (1000, vec![99_998]));
    assert_eq!(want[&5000], (1000, vec![99_999]));
    assert!(want.values().any(|(_, ids)| ids.len() > 1), "ties exist");
    for workers in 1..=4 {
        let cfg = JobConfig {
            workers,
            pin: false,
            ..JobConfig::default()
        };
        let out = run_top_job(&cfg, 1000, |info| {
            // Worker w reads every w-th record (in time order).
            let mine: Vec<Rec> = all
                .iter()
                .copied()
                .skip(info.index)
                .step_by(info.workers)
                .collect();
            TopUpstream::new(
                VecSource::new(mine),
                Identity,
                |r: &Rec| r.0,
                |r| r.2,
                1000,
                0,
            )
        })
        .unwrap();
        assert_eq!(out.late_partials, 0);
        let got: BTreeMap<u64, (u64, Vec<u64>)> = out
            .results
            .iter()
            .map(|r| {
                let mut ids: Vec<u64> = r.items.iter().map(|x| x.1).collect();
                ids.sort_unstable();
                (r.window_start, (r.score, ids))
            })
            .collect();
        assert_eq!(got, want, "{workers} workers");
        let read: u64 = out.upstream.iter().map(|c| c.source_records).sum();
        assert_eq!(read, all.len() as u64);
    }
}

#[test]
fn a_stateless_job_keeps_or_counts_every_output_record() {
    let all: Vec<u64> = (0..10_000).collect();
    for keep in [true, false] {
        let cfg = JobConfig {
            workers: 3,
            pin: false,
            ..JobConfig::default()
        };
        let out = run_stateless_job(&cfg, |info| {
            let mine: Vec<u64> = all.iter().copied().skip(info.index).step_by(3).collect();
            StatelessUpstream::new(VecSource::new(mine), FilterOdd, keep)
        })
        .unwrap();
        let produced: u64 = out.counts.iter().map(|c| c.1).sum();
        assert_eq!(produced, 5000);
        let mut kept: Vec<u64> = out.kept.into_iter().flatten().collect();
        kept.sort_unstable();
        if keep {
            assert_eq!(kept, (0..10_000).filter(|x| x % 2 == 1).collect::<Vec<_>>());
        } else {
            assert!(kept.is_empty());
        }
    }
}

struct FilterOdd;
impl air_operators::stream::Pipe<u64> for FilterOdd {
    type Out = u64;
    fn run<E: FnMut(u64)>(&mut self, x: u64, emit: &mut E) {
        if x % 2 == 1 {
            emit(x)
        }
    }
}
