//! `air run ysb` across real ranks: `mpirun -np N air …` on the node tier
//! (`/dev/shm` rings between ranks), the network tier (`--force-network`:
//! RMA windows), and all three tiers at once (nodes emulated on this
//! machine), against the embedded single-process run of the same input.

#![cfg(feature = "mpi")]

mod common;

use common::{report, text, wait, TmpDir};
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const AIR: &str = env!("CARGO_BIN_EXE_air");
/// Longest a multi-rank run may take before the test calls it a hang.
const LIMIT: Duration = Duration::from_secs(120);

fn tmpdir(tag: &str) -> TmpDir {
    common::tmpdir("mpi", tag)
}

fn mpirun(np: usize, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = air_rdma::mpirun_command(np);
    cmd.arg(AIR).args(args).envs(env.iter().copied());
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = cmd.spawn().expect("start mpirun (is MPI installed?)");
    wait(child, &format!("mpirun -np {np} air {args:?}"), LIMIT).0
}

fn embedded(args: &[&str]) -> Output {
    let out = Command::new(AIR).args(args).output().expect("run air");
    assert!(out.status.success(), "air {args:?}: {}", text(&out));
    out
}

/// Input files (two, so byte ranges of several files are split across
/// ranks) and the embedded reference result over them.
struct Input {
    dir: TmpDir,
    args: Vec<String>,
    reference: String,
}

fn input(tag: &str) -> Input {
    let dir = tmpdir(tag);
    let s = |p: PathBuf| p.to_string_lossy().into_owned();
    let (a, b, c) = (
        s(dir.join("a.json")),
        s(dir.join("b.json")),
        s(dir.join("camp.txt")),
    );
    embedded(&[
        "gen",
        "ysb",
        "--events",
        "150000",
        "--seed",
        "3",
        "--events-per-s",
        "20000",
        "--out",
        &a,
        "--campaigns-out",
        &c,
    ]);
    embedded(&[
        "gen",
        "ysb",
        "--events",
        "90000",
        "--seed",
        "3",
        "--events-per-s",
        "20000",
        "--out",
        &b,
        "--campaigns-out",
        &c,
    ]);
    // b repeats the first 4.5 s of a: a worker that reads the end of a,
    // then b, sees b behind its watermark. A delay covering that disorder
    // makes no event late, so the rows are the same however the files are
    // split between workers (with a smaller one, which windows had closed
    // at each worker depends on where its byte range starts).
    let args = vec![
        "run".into(),
        "ysb".into(),
        "--input".into(),
        a,
        b,
        "--campaigns".into(),
        c,
        "--max-delay-ms".into(),
        "10000".into(),
    ];
    let out = s(dir.join("reference.csv"));
    let mut ref_args: Vec<&str> = args.iter().map(String::as_str).collect();
    ref_args.extend(["--workers", "3", "--out", &out, "--no-pin"]);
    embedded(&ref_args);
    let reference = std::fs::read_to_string(&out).unwrap();
    assert!(
        reference.lines().count() > 100,
        "reference has rows:\n{reference}"
    );
    Input {
        dir,
        args,
        reference,
    }
}

/// Runs the input under `mpirun -np np` and checks rows and report.
fn check_distributed(
    inp: &Input,
    np: usize,
    workers: usize,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Value {
    let tag = format!("np{np}w{workers}{}", extra.join("").replace('-', ""));
    let out = inp.dir.join(format!("{tag}.csv"));
    let rep = inp.dir.join(format!("{tag}.json"));
    let (out_s, rep_s, w) = (
        out.to_string_lossy(),
        rep.to_string_lossy(),
        workers.to_string(),
    );
    let mut args: Vec<&str> = inp.args.iter().map(String::as_str).collect();
    args.extend([
        "--workers",
        &w,
        "--out",
        &out_s,
        "--report",
        &rep_s,
        "--no-pin",
    ]);
    args.extend(extra);
    let o = mpirun(np, &args, env);
    assert!(o.status.success(), "mpirun -np {np} {args:?}: {}", text(&o));
    let got = std::fs::read_to_string(&out).unwrap();
    assert!(
        got == inp.reference,
        "np {np} {extra:?}: rows differ from the embedded run"
    );
    let r = report(&rep);
    assert_eq!(r["ranks"], np as u64);
    assert_eq!(r["workers"], (np * workers) as u64);
    assert_eq!(r["per_worker"].as_array().unwrap().len(), np * workers);
    // Only rank 0 prints the summary.
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(stdout.matches("ysb: ").count(), 1, "{stdout}");
    r
}

#[test]
fn node_tier_gives_the_embedded_results_for_2_3_4_ranks() {
    let inp = input("node");
    for np in [2, 3, 4] {
        let r = check_distributed(&inp, np, 1, &[], &[]);
        let tiers = &r["mpi"]["rank0_channels_by_tier"];
        assert_eq!(tiers["thread"], 1);
        assert_eq!(tiers["node"], (np - 1) as u64, "{r}");
        assert_eq!(tiers["network"], 0);
    }
}

#[test]
fn network_tier_gives_the_embedded_results_for_2_3_4_ranks() {
    let inp = input("net");
    for np in [2, 3, 4] {
        let r = check_distributed(&inp, np, 1, &["--force-network"], &[]);
        let tiers = &r["mpi"]["rank0_channels_by_tier"];
        assert_eq!(tiers["node"], 0, "{r}");
        assert_eq!(tiers["network"], (np - 1) as u64, "{r}");
        assert_eq!(r["mpi"]["force_network"], true);
    }
}

#[test]
fn several_workers_per_rank_use_all_three_tiers_at_once() {
    let inp = input("tiers");
    // 4 ranks × 2 workers, nodes of 2 ranks emulated: rank 0's workers read
    // 2×2 thread rings, 2×2 from rank 1 (node), and from ranks 2 and 3 one
    // network ring each per worker of rank 0 (shared by the sender's 2
    // workers: docs/channels.md), 2×2.
    let r = check_distributed(&inp, 4, 2, &[], &[("AIR_EMULATE_RANKS_PER_NODE", "2")]);
    let tiers = &r["mpi"]["rank0_channels_by_tier"];
    assert_eq!(
        (
            tiers["thread"].as_u64(),
            tiers["node"].as_u64(),
            tiers["network"].as_u64()
        ),
        (Some(4), Some(4), Some(4)),
        "{r}"
    );
    // And 2 ranks × 2 workers on the node tier.
    check_distributed(&inp, 2, 2, &[], &[]);
}

#[test]
fn tiny_rings_under_force_network_neither_deadlock_nor_lose_rows() {
    let inp = input("tiny");
    // 4 KiB rings hold a few batch frames: senders wait on credit all the
    // time, on every tier, while receivers are senders too.
    check_distributed(
        &inp,
        3,
        2,
        &["--force-network", "--ring-bytes", "4096", "--batch", "64"],
        &[],
    );
    check_distributed(&inp, 2, 1, &["--ring-bytes", "4096"], &[]);
}

#[test]
fn odd_ring_sizes_and_segmented_rings_work_on_the_network_tier() {
    let inp = input("oddring");
    // Not a multiple of 16 (its small edge neither): rounded up on every
    // tier. And 2 MB: a ring of eight 250 KB segments, frames padded at
    // each segment's end, the sender's mirror one segment.
    check_distributed(
        &inp,
        2,
        1,
        &["--force-network", "--ring-bytes", "2000000"],
        &[],
    );
    check_distributed(
        &inp,
        2,
        1,
        &["--force-network", "--ring-bytes", "70001"],
        &[],
    );
}

#[test]
fn generator_split_across_ranks_equals_the_embedded_generator() {
    let dir = tmpdir("gen");
    let s = |p: PathBuf| p.to_string_lossy().into_owned();
    let (a, b) = (s(dir.join("emb.csv")), s(dir.join("mpi.csv")));
    let common = [
        "run",
        "ysb",
        "--events",
        "400000",
        "--event-time",
        "synthetic",
        "--rate",
        "40000",
        "--no-pin",
    ];
    let mut args = common.to_vec();
    args.extend(["--workers", "4", "--out", &a]);
    embedded(&args);
    let mut args = common.to_vec();
    args.extend(["--workers", "2", "--out", &b, "--force-network"]);
    let o = mpirun(2, &args, &[]);
    assert!(o.status.success(), "{}", text(&o));
    let (x, y) = (
        std::fs::read_to_string(&a).unwrap(),
        std::fs::read_to_string(&b).unwrap(),
    );
    assert!(x.lines().count() > 100);
    assert!(
        x == y,
        "generator rows differ between 4 workers in one process and 2 ranks × 2 workers"
    );
}

#[test]
fn per_rank_outputs_together_hold_the_merged_rows() {
    let inp = input("perrank");
    let out = inp.dir.join("pr.csv");
    let out_s = out.to_string_lossy();
    let mut args: Vec<&str> = inp.args.iter().map(String::as_str).collect();
    args.extend([
        "--workers",
        "1",
        "--out",
        &out_s,
        "--out-per-rank",
        "--no-pin",
    ]);
    let o = mpirun(3, &args, &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!out.exists(), "--out-per-rank writes no merged file");
    let mut rows: Vec<String> = Vec::new();
    for r in 0..3 {
        let p = inp.dir.join(format!("pr.rank{r}.csv"));
        let t = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let mut lines = t.lines();
        assert_eq!(lines.next(), Some("window_start_ms,campaign_id,count"));
        let mine: Vec<String> = lines.map(String::from).collect();
        assert!(!mine.is_empty(), "rank {r} owns some keys");
        rows.extend(mine);
    }
    rows.sort();
    let mut want: Vec<String> = inp.reference.lines().skip(1).map(String::from).collect();
    want.sort();
    assert_eq!(rows, want);
}

#[test]
fn bad_input_under_mpirun_is_reported_once_and_every_rank_exits_2() {
    let dir = tmpdir("bad");
    let missing = dir.join("nope.json");
    let o = mpirun(
        3,
        &[
            "run",
            "ysb",
            "--input",
            &missing.to_string_lossy(),
            "--no-pin",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        err.matches("nope.json").count(),
        1,
        "one message, not one per rank:\n{err}"
    );
    // A bad option (found before MPI starts), from the command line or the
    // environment: rank 0 says it, every rank exits 2.
    for (args, env) in [
        (&["run", "ysb", "--workers", "abc"][..], &[][..]),
        (&["run", "ysb", "--bogus"][..], &[][..]),
        (&["run", "ysb"][..], &[("AIR_WORKERS", "abc")][..]),
        (
            &["run", "ysb"][..],
            &[("AIR_EMULATE_RANKS_PER_NODE", "x")][..],
        ),
        (
            &["run", "ysb"][..],
            &[("AIR_EMULATE_RANKS_PER_NODE", "0")][..],
        ),
    ] {
        let o = mpirun(3, args, env);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(
            err.matches("air: error:").count(),
            1,
            "{args:?} {env:?}: one message, not one per rank:\n{err}"
        );
    }
    // A campaign file that every rank fails to read: reported once too.
    let nocamp = dir.join("nope-campaigns.txt");
    let o = mpirun(
        2,
        &[
            "run",
            "ysb",
            "--events",
            "1000",
            "--campaigns",
            &nocamp.to_string_lossy(),
            "--no-pin",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        err.matches("nope-campaigns.txt").count(),
        1,
        "one message, not one per rank:\n{err}"
    );
}

#[test]
fn ranks_started_with_different_options_refuse_to_run() {
    // MPMD launch: rank 0 with 1 worker, rank 1 with 2 (any other option
    // that differs, e.g. --seed or --window-ms, would give wrong rows).
    let mut cmd = air_rdma::mpirun_command(1);
    cmd.args([
        AIR,
        "run",
        "ysb",
        "--events",
        "1000",
        "--workers",
        "1",
        "--no-pin",
        ":",
        "-np",
        "1",
        AIR,
        "run",
        "ysb",
        "--events",
        "1000",
        "--workers",
        "2",
        "--no-pin",
    ]);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let (o, _) = wait(cmd.spawn().unwrap(), "MPMD mpirun", LIMIT);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("rank 1 was started with other arguments than rank 0"),
        "{}",
        text(&o)
    );
    assert_eq!(
        err.matches("air: error").count(),
        1,
        "reported once:\n{err}"
    );
}

#[test]
fn a_rank_that_cannot_create_its_rings_reports_why_not_its_peers_consequences() {
    // Rank 1 may hold 300 file descriptors: enough for MPI, too few for
    // the creating ends of its node-tier rings (16 workers × 16 senders of
    // rank 0 × 2 edges, one descriptor each). Its workers that fail say
    // why (EMFILE); the others would find a channel missing, a
    // consequence, and rank 0's would wait 30 s for segments that never
    // come. The ranks agree to stop after creating their rings: rank 0
    // reports rank 1's cause once, every rank exits 2, nobody waits.
    let args = "run ysb --events 2000 --workers 16 --no-pin --ring-bytes 65536";
    let mut cmd = air_rdma::mpirun_command(1);
    cmd.arg(AIR).args(args.split(' '));
    cmd.args([":", "-np", "1", "sh", "-c"]);
    cmd.arg(format!("ulimit -n 300 && exec {AIR} {args}"));
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let start = Instant::now();
    let (o, _) = wait(cmd.spawn().unwrap(), "mpirun with a low fd limit", LIMIT);
    let took = start.elapsed();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("rank 1: ") && err.contains("Too many open files"),
        "the cause is reported: {}",
        text(&o)
    );
    assert_eq!(
        err.matches("air: error").count(),
        1,
        "reported once:\n{err}"
    );
    assert!(
        !err.contains("failed to create its channel"),
        "a consequence was reported instead of the cause: {}",
        text(&o)
    );
    assert!(
        took < Duration::from_secs(25),
        "took {took:?}: {}",
        text(&o)
    );
}

#[test]
fn a_process_started_alone_by_a_launcher_of_several_ranks_fails_loudly() {
    // What a binary linked to one MPI sees under another MPI's mpirun.
    let o = Command::new(AIR)
        .args(["run", "ysb", "--events", "1000"])
        .env("OMPI_COMM_WORLD_SIZE", "4")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("OMPI_COMM_WORLD_SIZE=4") && err.contains("world size 1"),
        "{err}"
    );
}

fn job_segments() -> Vec<String> {
    // Segments of distributed jobs: air-<uid>-mpi<nonce>-g<from>-g<to>.
    // SAFETY: getuid has no preconditions.
    let prefix = format!("air-{}-mpi", unsafe { libc::getuid() });
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// Starts `mpirun -np np air run ysb` paced for a minute, tagged so the
/// test can find its ranks (`rank_pid`), with extra environment `env`.
fn start_tagged_run(np: usize, tag: &str, env: &[(&str, &str)]) -> std::process::Child {
    let mut cmd = air_rdma::mpirun_command(np);
    cmd.args([
        AIR,
        "run",
        "ysb",
        "--rate",
        "2000000",
        "--duration",
        "60",
        "--workers",
        "1",
        "--no-pin",
    ]);
    cmd.env("AIR_TEST_TAG", tag).envs(env.iter().copied());
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.spawn().expect("start mpirun")
}

/// The pid of rank `rank` of the run tagged `tag`, waiting up to 30 s.
fn wait_for_rank(tag: &str, rank: usize) -> u32 {
    let start = Instant::now();
    loop {
        if let Some(p) = common::rank_pid(tag, rank) {
            return p;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "rank {rank} never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_rank_killed_mid_run_ends_the_job_within_10_s_and_leaves_no_segment() {
    let before = job_segments();
    let tag = format!("kill{}", std::process::id());
    let child = start_tagged_run(3, &tag, &[]);
    // Wait until the ranks run, then kill rank 1.
    let pids: Vec<u32> = (0..3).map(|r| wait_for_rank(&tag, r)).collect();
    std::thread::sleep(Duration::from_secs(2));
    // SAFETY: plain kill of a process this test started (through mpirun).
    unsafe { libc::kill(pids[1] as i32, libc::SIGKILL) };
    let (o, took) = wait(
        child,
        "mpirun after a rank was killed",
        Duration::from_secs(30),
    );
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        took < Duration::from_secs(10),
        "the job took {took:?} to end after rank 1 was killed"
    );
    // mpirun ends every rank at once (SIGKILL) and says why: Open MPI names
    // the rank; MPICH's hydra names a process of the job ("BAD TERMINATION",
    // on stdout) — the first it saw die, the victim or a rank it killed.
    // (Under srun, which leaves the other ranks running, the ranks notice
    // themselves and print "rank 1 is lost": tests/slurm.rs.)
    let all = text(&o);
    let named = all.contains("rank 1")
        || (all.contains("BAD TERMINATION")
            && pids.iter().any(|p| all.contains(&format!("PID {p} "))));
    assert!(
        named,
        "no message names the lost rank or a process of the job:\n{all}"
    );
    std::thread::sleep(Duration::from_millis(200));
    let left: Vec<String> = job_segments()
        .into_iter()
        .filter(|s| !before.contains(s))
        .collect();
    assert!(left.is_empty(), "segments left in /dev/shm: {left:?}");
}

/// Starts a 2-rank run (with `env`), stops rank 1 with SIGSTOP after 2 s,
/// and returns rank 0's stderr once the job ended, asserting it failed
/// within 15 s (5 s to notice, 3 s for the workers to fail on their own).
fn stop_rank_1(tag: &str, env: &[(&str, &str)]) -> String {
    let child = start_tagged_run(2, tag, env);
    let victim = wait_for_rank(tag, 1);
    std::thread::sleep(Duration::from_secs(2));
    // SAFETY: plain signals to a process this test started (through mpirun).
    unsafe { libc::kill(victim as i32, libc::SIGSTOP) };
    let (o, took) = wait(
        child,
        "mpirun after a rank was stopped",
        Duration::from_secs(60),
    );
    // SAFETY: as above; the process may be gone already.
    unsafe { libc::kill(victim as i32, libc::SIGKILL) };
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        took < Duration::from_secs(15),
        "the job took {took:?} to end after rank 1 was stopped"
    );
    text(&o)
}

#[test]
fn a_stopped_rank_on_another_node_is_noticed_by_its_missing_heartbeats() {
    // Nodes of one rank emulated: rank 0 watches rank 1 by heartbeats. A
    // stopped rank 1 keeps its process (no launcher notices), and rank 0's
    // worker blocks inside MPI on a flush to it; the MPI-free checker must
    // still end the job, naming rank 1.
    let tag = format!("stop{}", std::process::id());
    let all = stop_rank_1(&tag, &[("AIR_EMULATE_RANKS_PER_NODE", "1")]);
    assert!(all.contains("rank 1 is lost: no heartbeat"), "{all}");
}

#[test]
fn a_stopped_rank_on_this_node_is_noticed_by_its_process_state() {
    // Same node, node tier (/dev/shm rings): a stopped rank 1 still exists
    // (kill(pid, 0) succeeds), so rank 0 must see state `T` in
    // /proc/<pid>/stat for 5 s and end the job, naming rank 1.
    let tag = format!("sstop{}", std::process::id());
    let all = stop_rank_1(&tag, &[]);
    assert!(
        all.contains("rank 1 is lost: its process") && all.contains("stopped (SIGSTOP)"),
        "{all}"
    );
}

#[test]
fn a_job_start_removes_stale_segments_of_dead_jobs_only() {
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let old = std::time::SystemTime::now() - Duration::from_secs(3600);
    let plant = |name: String| {
        let p = PathBuf::from("/dev/shm").join(name);
        let f = std::fs::File::create(&p).unwrap();
        f.set_len(4096).unwrap();
        f.set_modified(old).unwrap();
        p
    };
    let stale = plant(format!("air-{uid}-mpistale{}-g0-g1", std::process::id()));
    // Another user's segment (only root can make one here): never touched.
    let foreign = (uid == 0).then(|| {
        let p = plant(format!("air-4242-mpistale{}-g0-g1", std::process::id()));
        std::os::unix::fs::chown(&p, Some(4242), Some(4242)).unwrap();
        p
    });
    let o = mpirun(
        2,
        &[
            "run",
            "ysb",
            "--events",
            "10000",
            "--workers",
            "1",
            "--no-pin",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(!stale.exists(), "the stale segment of this user is removed");
    if let Some(p) = foreign {
        assert!(p.exists(), "another user's segment is left alone");
        let _ = std::fs::remove_file(p);
    }
}

/// The CSV of `air run <query…> --out` run embedded (2 workers) and under
/// `mpirun -np 2` (1 worker each, node tier, then network tier).
fn same_rows_embedded_and_distributed(tag: &str, query: &[&str]) {
    let dir = tmpdir(tag);
    let emb = dir.join("emb.csv");
    let mut args = query.to_vec();
    args.extend_from_slice(&["--workers", "2", "--out", emb.to_str().unwrap()]);
    embedded(&args);
    let want = std::fs::read_to_string(&emb).unwrap();
    assert!(want.lines().count() > 1, "{tag}: the embedded run has rows");
    for extra in [&[][..], &["--force-network"]] {
        let d = dir.join("dist.csv");
        let rep = dir.join("dist.json");
        let mut args = query.to_vec();
        args.extend_from_slice(&[
            "--workers",
            "1",
            "--out",
            d.to_str().unwrap(),
            "--report",
            rep.to_str().unwrap(),
        ]);
        args.extend_from_slice(extra);
        let o = mpirun(2, &args, &[]);
        assert!(o.status.success(), "{tag} {extra:?}: {}", text(&o));
        assert_eq!(
            std::fs::read_to_string(&d).unwrap(),
            want,
            "{tag} {extra:?}"
        );
        assert_eq!(report(&rep)["ranks"], 2);
    }
}

/// The report's `load` under `mpirun -np 2` (2 workers each) covers every
/// rank's workers, in global order: with `--shuffle` each of the 4 gets a
/// share of the keyed stage. With Zipf 1.2 keys, `--rebalance on` evens
/// it out against `off` with the same rows, on the node tier and the
/// forced network tier; off, the shares add up to the events, on, every
/// event is received or kept at its sender.
#[test]
fn report_load_covers_every_ranks_workers() {
    let dir = tmpdir("load");
    let (rep, out) = (dir.join("r.json"), dir.join("rows.csv"));
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "wa",
            "--events",
            "400000",
            "--keys",
            "100000",
            "--zipf",
            "1.2",
            "--shuffle",
            "--workers",
            "2",
            "--no-pin",
            "--report",
            rep.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend(extra);
        let o = mpirun(2, &args, &[]);
        assert!(o.status.success(), "{extra:?}: {}", text(&o));
        let r = report(&rep);
        let workers: Vec<u64> = r["per_worker"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["worker"].as_u64().unwrap())
            .collect();
        assert_eq!(workers, [0, 1, 2, 3]);
        let load = r["load"].clone();
        let (per, hot, _) = common::window_stage_load(&r);
        assert_eq!(per.len(), 4, "{load}");
        assert!(per.iter().all(|&n| n > 0), "{load}");
        let (kept, partials) = (
            hot["records"].as_u64().unwrap(),
            hot["partials"].as_u64().unwrap(),
        );
        assert_eq!(per.iter().sum::<u64>() - partials + kept, 400_000, "{load}");
        let rows = common::sorted_rows(&out);
        (load["max_over_mean"].as_f64().unwrap(), kept, rows)
    };
    let (off, kept, rows) = run(&["--rebalance", "off"]);
    assert_eq!(kept, 0);
    assert!(off > 1.4, "zipf 1.2 off: max/mean {off}");
    for tier in [&[][..], &["--force-network"][..]] {
        let (on, kept, on_rows) = run(tier);
        assert!(kept > 0, "{tier:?}");
        assert!(on < 1.25, "{tier:?}: max/mean {on} on, {off} off");
        assert_eq!(on_rows, rows, "{tier:?}: rows differ from --rebalance off");
    }
}

#[test]
fn windowed_aggregation_nexmark_and_word_count_run_distributed() {
    same_rows_embedded_and_distributed(
        "wa",
        &[
            "run",
            "wa",
            "--events",
            "200000",
            "--keys",
            "100",
            "--window-ms",
            "100",
        ],
    );
    for q in ["q5", "q7", "q8"] {
        let mut args = vec![
            "run",
            "nexmark",
            "--query",
            q,
            "--events",
            "100000",
            "--events-per-s",
            "5000",
            "--window-ms",
            "2000",
        ];
        if q == "q5" {
            args.extend_from_slice(&["--slide-ms", "1000"]);
        }
        same_rows_embedded_and_distributed(q, &args);
    }
    // Q1 and Q2 keep their rows per rank; the merged CSV is sorted.
    same_rows_embedded_and_distributed(
        "q2",
        &["run", "nexmark", "--query", "q2", "--events", "300000"],
    );
    let dir = tmpdir("wcin");
    let f = dir.join("words.txt");
    std::fs::write(&f, "a b c a b a\nd e f\n".repeat(5000)).unwrap();
    same_rows_embedded_and_distributed("wc", &["run", "wordcount", "--input", f.to_str().unwrap()]);
}

#[test]
fn sigterm_to_mpirun_stops_every_rank_with_whole_windows() {
    // mpirun (MPICH's hydra, Open MPI's) forwards SIGTERM to the ranks;
    // each stops its sources, the ranks drain, and rank 0 writes the
    // windows every worker of every rank had read past.
    let dir = tmpdir("sigterm");
    let (out, rep) = (dir.join("o.csv"), dir.join("r.json"));
    let mut cmd = air_rdma::mpirun_command(2);
    cmd.arg(AIR).args([
        "run",
        "wa",
        "--events",
        "100000000000",
        "--keys",
        "10",
        "--window-ms",
        "100",
        "--events-per-s",
        "1000000",
        "--seed",
        "9",
        "--workers",
        "1",
        "--no-pin",
        "--out",
        out.to_str().unwrap(),
        "--report",
        rep.to_str().unwrap(),
    ]);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = cmd.spawn().expect("start mpirun");
    let pid = child.id() as i32;
    std::thread::sleep(Duration::from_secs(3));
    // SAFETY: plain kill of the launcher this test started.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let (o, took) = wait(child, "mpirun after SIGTERM", Duration::from_secs(30));
    assert!(took < Duration::from_secs(10), "stopping took {took:?}");
    // Each rank exits 143, but what mpirun says varies (MPICH's 143 or,
    // at times, 0; Open MPI's 1): the report is the sign.
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("stopped by signal 15"), "{}", text(&o));
    let r = report(&rep);
    assert_eq!(r["stopped"], true);
    assert_eq!(r["ranks"], 2);
    common::assert_stopped_wa_exact(&out, 9, 10, 100, 1_000_000.0);
}

#[test]
fn a_dev_shm_too_small_for_the_node_rings_fails_before_start() {
    // Docker's default: a 64 MiB /dev/shm (a private tmpfs in a mount
    // namespace, as root; CI runs as root). Two ranks on this node need two
    // node-tier rings of 64 MiB: refused up front with the sizes, never a
    // SIGBUS mid-run.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: a private /dev/shm mount needs root");
        return;
    }
    let ring: u64 = 64 << 20;
    let mpirun = air_rdma::mpirun_command(2);
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg("mount -t tmpfs -o size=64m tmpfs /dev/shm && exec \"$@\"")
        .arg("sh")
        .arg(mpirun.get_program())
        .args(mpirun.get_args())
        .arg(AIR)
        .args(["run", "ysb", "--events", "100000", "--workers", "1"])
        .args(["--no-pin", "--ring-bytes", &ring.to_string()]);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = cmd.spawn().expect("start unshare");
    let (o, took) = wait(
        child,
        "a run with a small /dev/shm",
        Duration::from_secs(60),
    );
    // A refusal (a bad option): exit code 2, said once, by rank 0.
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(took < Duration::from_secs(30), "{took:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.matches("not enough shared memory").count(), 1, "{err}");
    // Whole pages, as tmpfs allocates them. YSB's graph has two edges: the
    // partial aggregates (rings of --ring-bytes) and the rows on their way
    // to one writer (small rings).
    let small = air_runtime::dataflow::small_ring_bytes(ring as usize) as u64;
    let page = |b: u64| (b + air_shm::HEADER_BYTES as u64).next_multiple_of(4096);
    // And each rank's doorbell segment (one worker: one page).
    let need = 2 * page(ring) + 2 * page(small) + 2 * 4096;
    assert!(
        err.contains("not enough shared memory in /dev/shm")
            && err.contains(&format!(
                "2 of {} bytes",
                air_runtime::units::thousands(ring)
            ))
            && err.contains(&format!("= {} bytes", air_runtime::units::thousands(need)))
            && err.contains("bytes free"),
        "{}",
        text(&o)
    );
    assert!(
        !err.contains("SIGBUS") && !err.contains("Bus error"),
        "{err}"
    );
}

#[test]
fn sustainable_search_runs_under_mpirun() {
    let dir = tmpdir("sustainable");
    let rep = dir.join("s.json");
    let o = mpirun(
        2,
        &[
            "bench",
            "ysb",
            "--sustainable",
            "--rate",
            "2000000",
            "--duration",
            "1",
            "--window-ms",
            "100",
            "--max-lag-ms",
            "100",
            "--precision",
            "0.5",
            "--workers",
            "1",
            "--no-pin",
            "--report",
            rep.to_str().unwrap(),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    let r = report(&rep);
    assert_eq!(r["ranks"], 2);
    assert!(r["sustainable_rate"].as_u64().unwrap() > 0, "{r}");
    let out = String::from_utf8_lossy(&o.stdout);
    // Rank 0 alone prints the table and the answer.
    assert_eq!(out.matches("sustainable: ").count(), 1, "{out}");
}

#[test]
fn sustainable_search_of_wa_runs_under_mpirun() {
    let dir = tmpdir("sustainable-wa");
    let (rep, csv) = (dir.join("s.json"), dir.join("p.csv"));
    let o = mpirun(
        2,
        &[
            "bench",
            "ysb",
            "--sustainable",
            "--query",
            "wa",
            "--rate",
            "1000000",
            "--duration",
            "1",
            "--window-ms",
            "100",
            "--max-lag-ms",
            "100",
            "--precision",
            "0.5",
            "--workers",
            "1",
            "--no-pin",
            "--csv",
            csv.to_str().unwrap(),
            "--report",
            rep.to_str().unwrap(),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    let r = report(&rep);
    assert_eq!(r["ranks"], 2);
    assert_eq!(r["query"], "wa");
    assert!(r["sustainable_rate"].as_u64().unwrap() > 0, "{r}");
    // Every probe has both ranks' latency and input lag.
    for p in r["probes"].as_array().unwrap() {
        assert!(p["p99_ms"].as_u64().is_some(), "{p}");
        assert!(p["input_lag_max_ms"].as_f64().unwrap().is_finite(), "{p}");
    }
    let probes = r["probes"].as_array().unwrap().len();
    assert_eq!(
        std::fs::read_to_string(&csv).unwrap().lines().count(),
        probes + 1
    );
    let out = String::from_utf8_lossy(&o.stdout);
    // Rank 0 alone prints the table and the answer.
    assert_eq!(out.matches("sustainable: ").count(), 1, "{out}");
    assert_eq!(out.matches("sustainable WA: ").count(), 1, "{out}");
}

#[test]
fn scale_runs_rank_points_through_the_launcher() {
    // The launcher of this MPI (MPICH's or Open MPI's flags), `{n}` ranks.
    let l = air_rdma::mpirun_command(9999);
    let launcher = std::iter::once(l.get_program())
        .chain(l.get_args())
        .map(|a| a.to_string_lossy().replace("9999", "{n}"))
        .collect::<Vec<_>>()
        .join(" ");
    let dir = tmpdir("scale");
    let csv = dir.join("s.csv");
    let o = Command::new(AIR)
        .args(["bench", "scale", "--workers", "1", "--ranks", "1,2"])
        .args(["--launcher", &launcher, "--repeats", "1", "--csv"])
        .arg(&csv)
        .args(["--", "ysb", "--events", "2000000", "--no-pin"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let rows = std::fs::read_to_string(&csv).unwrap();
    let kinds: Vec<(String, String)> = rows
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[0].to_string(), f[1].to_string())
        })
        .collect();
    assert_eq!(
        kinds,
        [("workers", "1"), ("ranks", "1"), ("ranks", "2")]
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .to_vec(),
        "{rows}"
    );
}

#[test]
fn a_rank_stuck_after_the_run_cannot_hang_the_teardown() {
    // Rank 1 hangs before the final barrier (test hook); the job's liveness
    // watcher has stopped by then, so only the teardown bound ends it.
    let dir = tmpdir("teardown");
    let out = dir.join("o.csv");
    let o = mpirun(
        2,
        &[
            "run",
            "ysb",
            "--events",
            "100000",
            "--workers",
            "1",
            "--no-pin",
            "--out",
            out.to_str().unwrap(),
        ],
        &[("AIR_FAULT_TEARDOWN_HANG", "1")],
    );
    assert!(!o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("did not finish together within 30 s") && err.contains("exiting with code 3"),
        "{}",
        text(&o)
    );
    // The results were written before teardown began.
    assert_eq!(std::fs::read_to_string(&out).unwrap().lines().count(), 101);
}

/// `air bench exchange` across 2 ranks × 2 workers on the node tier and on
/// the network tier: it fails unless every record sent arrived.
#[test]
fn exchange_bench_runs_across_ranks_on_both_tiers() {
    for extra in [&[][..], &["--force-network"][..]] {
        let mut args = vec![
            "bench",
            "exchange",
            "--records",
            "200000",
            "--repeats",
            "1",
            "--workers",
            "2",
            "--ring-bytes",
            "8192",
            "--no-pin",
        ];
        args.extend_from_slice(extra);
        let out = mpirun(2, &args, &[]);
        assert!(out.status.success(), "{}", text(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            stdout.matches("exchange: 4 workers, ").count(),
            1,
            "one result line, from rank 0, for the job's 4 workers: {}",
            text(&out)
        );
    }
}

/// Key groups moving with their state across ranks
/// (`AIR_MOVE_KEY_GROUPS=rotate`: every group to the next worker at every
/// barrier, so state crosses between ranks at every other one): the rows
/// of 2 ranks × 2 workers equal the static routing's, on the node tier
/// and through the network tier's RMA rings.
#[test]
fn key_groups_move_with_their_state_between_ranks() {
    let dir = tmpdir("moves");
    let out = dir.join("rows.csv");
    let rep = dir.join("r.json");
    for (job, events) in [
        (&["wa", "--shuffle", "--keys", "5000"][..], "20000000"),
        (&["nexmark", "--query", "q8"][..], "2000000"),
    ] {
        let mut args = vec!["run"];
        args.extend(job);
        args.extend([
            "--events",
            events,
            "--workers",
            "2",
            "--no-pin",
            "--checkpoint-ms",
            "20",
        ]);
        args.extend([
            "--out",
            out.to_str().unwrap(),
            "--report",
            rep.to_str().unwrap(),
        ]);
        let o = mpirun(2, &args, &[]);
        assert!(o.status.success(), "{args:?}: {}", text(&o));
        let rows = common::sorted_rows(&out);
        assert!(rows.len() > 1, "{args:?}: no rows");
        for tier in [&[][..], &["--force-network"][..]] {
            let mut a = args.clone();
            a.extend(tier);
            let o = mpirun(2, &a, &[("AIR_MOVE_KEY_GROUPS", "rotate")]);
            assert!(o.status.success(), "{a:?}: {}", text(&o));
            let m = report(&rep)["load"]["rebalance"]["moves"].clone();
            assert!(m["moves"].as_u64().unwrap() >= 4, "{a:?}: {m}");
            assert_eq!(
                common::sorted_rows(&out),
                rows,
                "{a:?}: rows differ when key groups move ({m})"
            );
        }
    }
}
