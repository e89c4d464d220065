//! Tests of the window and interval joins: rows against a plain
//! computation, save/restore midway, rescale by key group.
use super::*;
use crate::graph::{Sliding, Tumbling};
use air_runtime::dataflow::state::Rescale;
use air_runtime::keygroups::KeyGroups;

type Rec = (u64, u64); // (key, time ms)
type Row = (u64, u64, u64, u64); // (start, key, left time, right time)

fn window_join(
    windows: Windows,
    eager: bool,
) -> impl Operator2<In1 = Rec, In2 = Rec, Out = Joined<u64, Rec, Rec>> {
    WindowJoin {
        windows,
        key: (|r: &Rec| r.0, |r: &Rec| r.0),
        time: (|r: &Rec| r.1, |r: &Rec| r.1),
        open: BTreeMap::new(),
        fired: 0,
        lateness: 0,
        late: None,
        label: "test".into(),
        pairs: 0,
        unfired: 0,
        eager,
        latency: air_runtime::metrics::latency_histogram(),
    }
}

fn interval_join() -> impl Operator2<In1 = Rec, In2 = Rec, Out = Joined<u64, Rec, Rec>> {
    IntervalJoin {
        bounds: (-100, 100),
        key: (|r: &Rec| r.0, |r: &Rec| r.0),
        time: (|r: &Rec| r.1, |r: &Rec| r.1),
        left: FxHashMap::default(),
        right: FxHashMap::default(),
        pairs: 0,
    }
}

/// One step of a join's input.
enum Step {
    Left(Vec<Rec>),
    Right(Vec<Rec>),
    Watermark(u64),
}

fn run<O: Operator2<In1 = Rec, In2 = Rec, Out = Joined<u64, Rec, Rec>>>(
    op: &mut O,
    steps: &[Step],
    rows: &mut Vec<Row>,
) {
    let mut emit = |j: Joined<u64, Rec, Rec>| rows.push((j.start, j.key, j.left.1, j.right.1));
    for s in steps {
        match s {
            Step::Left(v) => {
                let b = Rec::to_bytes(v);
                op.on_batch1(Rec::read_batch(&b).unwrap(), &mut emit);
            }
            Step::Right(v) => {
                let b = Rec::to_bytes(v);
                op.on_batch2(Rec::read_batch(&b).unwrap(), &mut emit);
            }
            Step::Watermark(wm) => op.on_watermark(*wm, &mut emit),
        }
    }
}

/// Records of 5 keys over 3 s, both sides, with watermarks between.
fn steps() -> Vec<Step> {
    steps_of(5)
}

/// Records of `keys` keys over 3 s, both sides, with watermarks
/// between.
fn steps_of(keys: u64) -> Vec<Step> {
    let mut steps = Vec::new();
    for round in 0..30u64 {
        let t = round * 100;
        steps.push(Step::Left((0..keys).map(|k| (k, t + k * 7)).collect()));
        steps.push(Step::Right(
            (0..keys).map(|k| ((k + round) % keys, t + 30)).collect(),
        ));
        if round % 4 == 3 {
            steps.push(Step::Watermark(t.saturating_sub(150)));
        }
    }
    steps.push(Step::Watermark(u64::MAX));
    steps
}

/// Saved midway and restored into a new operator, a join gives the
/// rows of one that ran through (so every kept record, and the
/// watermark it fired to, came back).
fn saved_midway_gives_the_same_rows<O>(make: impl Fn() -> O)
where
    O: Operator2<In1 = Rec, In2 = Rec, Out = Joined<u64, Rec, Rec>>,
{
    let steps = steps();
    let mut want = Vec::new();
    run(&mut make(), &steps, &mut want);
    assert!(!want.is_empty());
    want.sort_unstable();
    for cut in [5, 20, 41, steps.len() - 1] {
        let mut got = Vec::new();
        let mut first = make();
        run(&mut first, &steps[..cut], &mut got);
        let saved = first.save().expect("a join saves");
        let mut second = make();
        second.restore(&saved).unwrap();
        run(&mut second, &steps[cut..], &mut got);
        got.sort_unstable();
        assert_eq!(got, want, "cut at step {cut}");
    }
    assert!(make().restore(b"not a join's state").is_err());
}

/// The steps worker `w` of `workers` sees: the records whose key its
/// key group owns (as `key_by` routes them), every watermark.
fn routed(steps: &[Step], w: usize, workers: usize) -> Vec<Step> {
    let groups = KeyGroups::new(128, workers).unwrap();
    let mine = |v: &Vec<Rec>| -> Vec<Rec> {
        v.iter()
            .copied()
            .filter(|r| groups.owner(air_runtime::key_hash(&r.0)) == w)
            .collect()
    };
    steps
        .iter()
        .map(|s| match s {
            Step::Left(v) => Step::Left(mine(v)),
            Step::Right(v) => Step::Right(mine(v)),
            Step::Watermark(wm) => Step::Watermark(*wm),
        })
        .collect()
}

/// The records a join's saved state keeps: (side, time, record).
fn kept(saved: &[u8]) -> Vec<(u8, u64, Rec)> {
    let (_, s) = state::unframe_sections(saved, 4).unwrap();
    let left = Kept::<Rec>::read(s[0], s[1]).unwrap();
    let right = Kept::<Rec>::read(s[2], s[3]).unwrap();
    let left = left.into_iter().map(|(t, r)| (0, t, r));
    left.chain(right.into_iter().map(|(t, r)| (1, t, r)))
        .collect()
}

/// Saved midway at `from` workers (each with its keys' records),
/// rescaled into `to` workers that get the rest by the new key
/// groups: together they keep every saved record once and give the
/// rows of one join that ran through. With `behind`, the
/// last old worker had not yet seen the watermark before the cut (the
/// others had): the rescaled joins fire from the smallest.
fn rescaled_midway_gives_the_same_rows<O>(make: impl Fn() -> O, behind: bool)
where
    O: Operator2<In1 = Rec, In2 = Rec, Out = Joined<u64, Rec, Rec>>,
{
    let steps = steps_of(13);
    let mut want = Vec::new();
    run(&mut make(), &steps, &mut want);
    want.sort_unstable();
    for (from, to) in [(2, 3), (2, 1), (3, 2), (1, 3)] {
        for cut in [5, 20, 41, steps.len() - 1] {
            let mut got = Vec::new();
            let saved: Vec<Vec<u8>> = (0..from)
                .map(|w| {
                    let mut op = make();
                    let mine = routed(&steps[..cut], w, from);
                    let end = if behind && w == from - 1 {
                        // Up to its last watermark, then its records.
                        let last = mine.iter().rposition(|s| matches!(s, Step::Watermark(_)));
                        let last = last.unwrap_or(0);
                        run(&mut op, &mine[..last], &mut got);
                        let rest: Vec<Step> = mine[last..]
                            .iter()
                            .filter_map(|s| match s {
                                Step::Left(v) => Some(Step::Left(v.clone())),
                                Step::Right(v) => Some(Step::Right(v.clone())),
                                Step::Watermark(_) => None,
                            })
                            .collect();
                        rest
                    } else {
                        mine
                    };
                    run(&mut op, &end, &mut got);
                    op.save().expect("a join saves")
                })
                .collect();
            let states: Vec<&[u8]> = saved.iter().map(|s| s.as_slice()).collect();
            // The watermark before the cut again (an input's newest,
            // as a rescaled worker's inputs say it again).
            let again = steps[..cut].iter().rev().find_map(|s| match s {
                Step::Watermark(wm) => Some(Step::Watermark(*wm)),
                _ => None,
            });
            let mut kept_before: Vec<_> = states.iter().flat_map(|s| kept(s)).collect();
            let mut kept_after = Vec::new();
            for w in 0..to {
                let mut op = make();
                assert!(op.rescales());
                let rescale = Rescale {
                    worker: w,
                    workers: to,
                    from,
                    groups: KeyGroups::new(128, to).unwrap().into(),
                };
                op.rescale(&states, rescale).unwrap();
                kept_after.extend(kept(&op.save().expect("a join saves")));
                if let Some(s) = &again {
                    run(&mut op, std::slice::from_ref(s), &mut got);
                }
                run(&mut op, &routed(&steps[cut..], w, to), &mut got);
            }
            kept_before.sort_unstable();
            kept_after.sort_unstable();
            assert_eq!(
                kept_after, kept_before,
                "kept records {from} -> {to} workers, cut at step {cut}"
            );
            got.sort_unstable();
            assert_eq!(got, want, "{from} -> {to} workers, cut at step {cut}");
        }
    }
    assert!(make()
        .rescale(
            &[b"not a join's state"],
            Rescale {
                worker: 0,
                workers: 1,
                from: 1,
                groups: KeyGroups::new(128, 1).unwrap().into(),
            }
        )
        .is_err());
}

#[test]
fn a_window_join_rescales_its_kept_records_by_key_group() {
    for behind in [false, true] {
        for eager in [false, true] {
            rescaled_midway_gives_the_same_rows(|| window_join(Tumbling::ms(500), eager), behind);
            rescaled_midway_gives_the_same_rows(
                || window_join(Sliding::ms(600, 200), eager),
                behind,
            );
        }
    }
}

#[test]
fn an_interval_join_rescales_its_kept_records_by_key_group() {
    rescaled_midway_gives_the_same_rows(interval_join, false);
}

#[test]
fn a_window_join_resumes_with_its_kept_records() {
    saved_midway_gives_the_same_rows(|| window_join(Tumbling::ms(500), false));
    saved_midway_gives_the_same_rows(|| window_join(Tumbling::ms(500), true));
    saved_midway_gives_the_same_rows(|| window_join(Sliding::ms(600, 200), true));
    saved_midway_gives_the_same_rows(|| window_join(Sliding::ms(600, 200), false));
}

#[test]
fn an_interval_join_resumes_with_its_kept_records() {
    saved_midway_gives_the_same_rows(interval_join);
}
