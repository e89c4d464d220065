//! Placement plans on synthetic machines (issue 5's cases) and on this one.

use air_runtime::topology::{parse_cpu_list, Topology};
use std::collections::HashSet;

fn distinct_cores(p: &air_runtime::topology::Plan) -> bool {
    let cores: HashSet<usize> = p.slots.iter().map(|s| s.core).collect();
    cores.len() == p.slots.len()
}

#[test]
fn two_socket_28_core_node_with_smt_fills_socket_0_then_1_and_leaves_siblings_idle() {
    let t = Topology::synthetic(2, 14, 2, true);
    assert_eq!(
        (t.packages(), t.cores(), t.pus.len(), t.numa_nodes()),
        (2, 28, 56, 2)
    );
    let p = t.plan(28, 1, 0, false);
    assert!(distinct_cores(&p) && !p.oversubscribed && p.warnings.is_empty());
    // Workers 0..14 on package 0 (PUs 0..14), 14..28 on package 1 (PUs 14..28):
    // no SMT sibling (PUs 28..56) is used.
    for s in &p.slots {
        assert_eq!(s.package, s.worker / 14, "{s:?}");
        assert_eq!(s.pu, s.worker);
        assert_eq!(s.numa, Some(s.package));
    }
    // With --smt, 56 workers use every PU once, siblings after all cores.
    let p = t.plan(56, 1, 0, true);
    let pus: HashSet<usize> = p.slots.iter().map(|s| s.pu).collect();
    assert_eq!(pus.len(), 56);
    assert!(p.slots[..28].iter().all(|s| s.pu < 28));
}

#[test]
fn two_ranks_get_one_socket_each_and_three_ranks_split_28_cores() {
    let t = Topology::synthetic(2, 14, 2, true);
    for r in 0..2 {
        let p = t.plan(14, 2, r, false);
        assert!(p.slots.iter().all(|s| s.package == r), "rank {r}: {p:?}");
        assert!(distinct_cores(&p));
    }
    // 28 cores over 3 ranks: 10 + 9 + 9, disjoint, together all cores.
    let mut all = HashSet::new();
    for (r, n) in [(0, 10), (1, 9), (2, 9)] {
        let p = t.plan(n, 3, r, false);
        assert!(!p.oversubscribed && distinct_cores(&p), "rank {r}: {p:?}");
        for s in &p.slots {
            assert!(all.insert(s.core), "core {} given twice", s.core);
        }
    }
    assert_eq!(all.len(), 28);
    // A tenth worker on rank 1 would share a core: said so.
    let p = t.plan(10, 3, 1, false);
    assert!(p.oversubscribed && !p.warnings.is_empty());
}

#[test]
fn a_cpuset_of_5_7_9_11_is_respected() {
    let t = Topology::synthetic(1, 16, 1, true).with_allowed(&[5, 7, 9, 11]);
    let p = t.plan(4, 1, 0, false);
    let pus: Vec<usize> = p.slots.iter().map(|s| s.pu).collect();
    assert_eq!(pus, vec![5, 7, 9, 11]);
    // Siblings in a cpuset: CPUs 3 and 19 are one core of a 16-core SMT node.
    let t = Topology::synthetic(1, 16, 2, false).with_allowed(&[3, 19, 4]);
    let p = t.plan(2, 1, 0, false);
    assert_eq!(p.slots.iter().map(|s| s.pu).collect::<Vec<_>>(), vec![3, 4]);
    assert!(!p.oversubscribed);
}

#[test]
fn a_single_core_cpuset_puts_every_worker_there_and_warns() {
    let t = Topology::synthetic(1, 2, 1, true).with_allowed(&[1]);
    let p = t.plan(2, 1, 0, false);
    assert!(p.slots.iter().all(|s| s.pu == 1));
    assert!(p.oversubscribed);
    assert!(
        p.warnings[0].contains("2 workers but 1 core for"),
        "{:?}",
        p.warnings
    );
}

#[test]
fn a_machine_without_numa_information_still_plans() {
    let t = Topology::synthetic(2, 4, 1, false);
    assert_eq!(t.numa_nodes(), 0);
    let p = t.plan(8, 1, 0, false);
    assert!(distinct_cores(&p) && p.slots.iter().all(|s| s.numa.is_none()));
}

#[test]
fn cpu_lists_parse_like_linux_writes_them() {
    assert_eq!(parse_cpu_list("0-3,8,10-11\n"), vec![0, 1, 2, 3, 8, 10, 11]);
    assert_eq!(parse_cpu_list(""), Vec::<usize>::new());
}

#[test]
fn this_machine_reads_from_sysfs_like_lstopo_says() {
    let t = Topology::from_sysfs().expect("sysfs topology");
    // Every allowed CPU is a known PU, and the plan uses allowed CPUs only.
    assert!(!t.allowed.is_empty());
    for a in &t.allowed {
        assert!(t.pus.iter().any(|p| p.os == *a));
    }
    let p = t.plan(t.cores(), 1, 0, false);
    assert!(p.slots.iter().all(|s| t.allowed.contains(&s.pu)));
    // Compare with lstopo when it is installed (hwloc's own reading).
    if let Ok(o) = std::process::Command::new("lstopo-no-graphics")
        .args(["--only", "core"])
        .output()
    {
        if o.status.success() {
            let cores = String::from_utf8_lossy(&o.stdout).lines().count();
            assert_eq!(t.cores(), cores, "cores per sysfs vs lstopo");
        }
    }
}

#[test]
fn cpu_lists_format_back_compactly() {
    use air_runtime::topology::format_cpu_list;
    assert_eq!(format_cpu_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
    assert_eq!(format_cpu_list(&[5, 7, 9, 11]), "5,7,9,11");
    assert_eq!(format_cpu_list(&[]), "");
    let v: Vec<usize> = (0..56).filter(|c| c % 3 != 0).collect();
    assert_eq!(parse_cpu_list(&format_cpu_list(&v)), v);
}

#[test]
fn slurm_task_lists_name_each_nodes_task_count() {
    use air_runtime::placement::slurm_tasks_on_node;
    assert_eq!(slurm_tasks_on_node("2(x3),1", 0), Some(2));
    assert_eq!(slurm_tasks_on_node("2(x3),1", 2), Some(2));
    assert_eq!(slurm_tasks_on_node("2(x3),1", 3), Some(1));
    assert_eq!(slurm_tasks_on_node("2(x3),1", 4), None);
    assert_eq!(slurm_tasks_on_node("14", 0), Some(14));
    assert_eq!(slurm_tasks_on_node("x", 0), None);
}

fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |k| {
        vars.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    }
}

#[test]
fn unbound_slurm_tasks_split_the_node_and_bound_ones_stay_in_their_binding() {
    use air_runtime::placement::launcher_share_from;
    let node = Topology::synthetic(2, 14, 2, true);
    let two = [
        ("SLURM_LOCALID", "1"),
        ("SLURM_NODEID", "0"),
        ("SLURM_STEP_TASKS_PER_NODE", "2"),
    ];
    // Unbound (every PU allowed): task 1 of 2 gets the second socket.
    assert_eq!(launcher_share_from(&node, &env(&two)), Ok(Some((2, 1))));
    let p = node.plan(14, 2, 1, false);
    assert!(p.slots.iter().all(|s| s.package == 1) && distinct_cores(&p));
    // srun --cpu-bind gave the task its socket already: plan inside it.
    let socket1: Vec<usize> = (14..28).chain(42..56).collect();
    let bound = node.clone().with_allowed(&socket1);
    let mut with_bind = two.to_vec();
    with_bind.push(("SLURM_CPU_BIND_TYPE", "mask_cpu:"));
    assert_eq!(launcher_share_from(&bound, &env(&with_bind)), Ok(None));
    let mut with_cpt = two.to_vec();
    with_cpt.push(("SLURM_CPUS_PER_TASK", "14"));
    assert_eq!(launcher_share_from(&bound, &env(&with_cpt)), Ok(None));
    let p = bound.plan(14, 1, 0, false);
    assert!(p.slots.iter().all(|s| s.package == 1) && distinct_cores(&p));
    // A half-node job (cgroup of 14 cores) with 2 unbound tasks of 7 CPUs:
    // they split it, 7 cores each, none shared.
    let half: Vec<usize> = (0..14).chain(28..42).collect();
    let job = node.clone().with_allowed(&half);
    let mut seven = two.to_vec();
    seven.push(("SLURM_CPUS_PER_TASK", "7"));
    seven.push(("SLURM_CPU_BIND_TYPE", "none"));
    assert_eq!(launcher_share_from(&job, &env(&seven)), Ok(Some((2, 1))));
    let (a, b) = (job.plan(7, 2, 0, false), job.plan(7, 2, 1, false));
    let cores: HashSet<usize> = a.slots.iter().chain(&b.slots).map(|s| s.core).collect();
    assert_eq!(cores.len(), 14);
    // One task per node, or no SLURM: no split.
    assert_eq!(
        launcher_share_from(
            &node,
            &env(&[("SLURM_LOCALID", "0"), ("SLURM_TASKS_PER_NODE", "1")])
        ),
        Ok(None)
    );
    assert_eq!(launcher_share_from(&node, &env(&[])), Ok(None));
    // Nonsense is reported, not silently planned over rank 0's cores.
    for bad in [
        &[("SLURM_LOCALID", "3"), ("SLURM_TASKS_PER_NODE", "2")][..],
        &[("SLURM_LOCALID", "x"), ("SLURM_TASKS_PER_NODE", "2")],
        &[("SLURM_LOCALID", "0"), ("SLURM_TASKS_PER_NODE", "garbage")],
        &[
            ("SLURM_LOCALID", "0"),
            ("SLURM_NODEID", "7"),
            ("SLURM_TASKS_PER_NODE", "2(x3)"),
        ],
    ] {
        assert!(launcher_share_from(&node, &env(bad)).is_err(), "{bad:?}");
    }
}

#[test]
fn with_smt_two_ranks_still_get_a_socket_each() {
    let t = Topology::synthetic(2, 14, 2, true);
    for rank in 0..2 {
        let p = t.plan(28, 2, rank, true);
        assert!(!p.oversubscribed, "{:?}", p.warnings);
        assert!(p.slots.iter().all(|s| s.package == rank), "rank {rank}");
        let pus: HashSet<usize> = p.slots.iter().map(|s| s.pu).collect();
        assert_eq!(pus.len(), 28);
        // One PU of each of its 14 cores first, then their siblings.
        assert_eq!(p.slots[0].core, p.slots[14].core);
    }
}

#[test]
fn a_rank_without_a_core_of_its_own_is_oversubscribed() {
    let t = Topology::synthetic(1, 2, 1, true);
    let p = t.plan(1, 3, 2, false);
    assert!(p.oversubscribed);
    assert_eq!(p.slots.len(), 1);
    assert!(
        p.warnings[0].contains("no core of its own"),
        "{:?}",
        p.warnings
    );
}

#[test]
fn strict_cpu_lists_take_strides_and_refuse_nonsense() {
    use air_runtime::topology::parse_cpu_list_strict as p;
    assert_eq!(p("0-7:2"), Ok(vec![0, 2, 4, 6]));
    assert_eq!(p("5,7, 9,11,5"), Ok(vec![5, 7, 9, 11]));
    for bad in ["", "1-0", "a", "0,,1", "0-4000000000", "3:2", "0-7:0", "-1"] {
        assert!(p(bad).is_err(), "{bad:?}");
    }
    // The lenient reader (sysfs) never builds huge ranges either.
    assert!(parse_cpu_list("0-4000000000,3").len() == 1);
}

#[test]
fn numa_nodes_count_distinct_ids() {
    let mut t = Topology::synthetic(2, 2, 1, true);
    for p in &mut t.pus {
        p.numa = p.numa.map(|n| n * 2); // nodes 0 and 2
    }
    assert_eq!(t.numa_nodes(), 2);
}

#[test]
fn smt_uses_the_siblings_after_one_pu_of_every_core() {
    let t = Topology::synthetic(2, 14, 2, true);
    let p = t.plan(56, 1, 0, true);
    assert!(!p.oversubscribed, "{:?}", p.warnings);
    let pus: HashSet<usize> = p.slots.iter().map(|s| s.pu).collect();
    assert_eq!(pus.len(), 56);
    // The first 28 workers take one PU of each core (0..28), the next 28
    // their siblings (28..56, Linux numbering).
    assert!(p.slots[..28].iter().all(|s| s.pu < 28));
    assert!(p.slots[28..].iter().all(|s| s.pu >= 28));
    assert_eq!(p.slots[28].core, p.slots[0].core);
    // Without --smt the same 56 workers oversubscribe the 28 cores.
    let p = t.plan(56, 1, 0, false);
    assert!(p.oversubscribed && !p.warnings.is_empty());
}
