use super::Grid;
use super::{run_graph, stage_list, Dataflow, Operator2, Stage, VecSource};
use crate::job::{JobConfig, WorkerInfo};
use crate::topology::WorkerPlacement;
use crate::ExchangeData;

/// A two-input operator that emits nothing.
struct Drop2;

impl Operator2 for Drop2 {
    type In1 = u64;
    type In2 = u64;
    type Out = u64;
    fn on_batch1<E: FnMut(u64)>(&mut self, _: &[<u64 as ExchangeData>::Item], _: &mut E) {}
    fn on_batch2<E: FnMut(u64)>(&mut self, _: &[<u64 as ExchangeData>::Item], _: &mut E) {}
    fn on_watermark<E: FnMut(u64)>(&mut self, _: u64, _: &mut E) {}
}

/// A two-input operator's edges make one stage; every other edge is a
/// stage of its own; gathering edges go to one worker (small ones
/// need not).
#[test]
fn stages_pair_the_edges_of_two_input_operators() {
    let df = Dataflow::new(WorkerInfo {
        index: 0,
        workers: 2,
        core: None,
        placement: WorkerPlacement::default(),
        doorbell: None,
        key_groups: 64,
        rebalance: crate::hotkeys::Rebalance::default(),
    });
    let a = df.new_edge("a");
    let left = df.new_edge("left");
    let right = df.new_edge("right");
    let c = df.new_gather_edge("collect");
    let small = df.new_small_edge("few");
    drop(df.consume2(left, right, Drop2));
    let b = df.into_builder().unwrap();
    let stage = |name: &str, edges: Vec<usize>, to_one_worker| Stage {
        name: name.into(),
        edges,
        to_one_worker,
    };
    assert_eq!(
        stage_list(&b),
        [
            stage("a", vec![a], false),
            stage("left + right", vec![left, right], false),
            stage("collect", vec![c], true),
            stage("few", vec![small], false),
        ]
    );
}

/// Each worker counts the records it received per edge: over the
/// workers, every record sent once.
#[test]
fn workers_count_records_in_per_edge() {
    let cfg = JobConfig {
        workers: 2,
        pin: false,
        ..JobConfig::default()
    };
    let out = run_graph(&cfg, |df| {
        df.source(VecSource::new((0..100u64).collect()))
            .key_by(|x| *x)
            .exchange()
            .collect()
            .for_each(|_| {});
    })
    .unwrap();
    assert_eq!(out.edges, ["exchange", "collect"]);
    assert_eq!(out.stages.len(), 2);
    assert!(out.stages[1].to_one_worker);
    let per_worker = |s: &Stage| -> Vec<u64> {
        out.workers
            .iter()
            .map(|w| s.records_at(&w.records_in))
            .collect()
    };
    assert_eq!(per_worker(&out.stages[0]).iter().sum::<u64>(), 200);
    // Every record to worker 0.
    assert_eq!(per_worker(&out.stages[1]), [200, 0]);
}

use std::time::Duration;

/// Grid points are `every` apart, strictly after the instant asked
/// about, and fall on wall-clock multiples of `every` (two grids made
/// at different instants agree).
#[test]
fn grid_points_are_shared_and_strictly_later() {
    let every = Duration::from_millis(10);
    let a = Grid::new(every);
    std::thread::sleep(Duration::from_millis(3));
    let b = Grid::new(every);
    let t = std::time::Instant::now();
    let (pa, pb) = (a.after(t), b.after(t));
    assert!(pa > t && pa <= t + every, "{:?}", pa - t);
    // The two grids' points agree within the clocks' read jitter.
    let d = if pa > pb { pa - pb } else { pb - pa };
    assert!(
        d < Duration::from_millis(1) || d > every - Duration::from_millis(1),
        "{d:?}"
    );
    assert_eq!(a.after(pa), pa + every);
    assert_eq!(a.after(pa - Duration::from_nanos(1)), pa);
}
