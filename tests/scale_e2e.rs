//! 8 ranks × 28 workers (224 workers: the AIR paper's cluster, issue 18) on
//! this machine: `mpirun -np 8 air run ysb --workers 28` on the node tier,
//! the network tier (`--force-network`) and both (nodes of 2 ranks
//! emulated) gives exactly the embedded run's rows and ends within 120 s;
//! SIGTERM mid-run ends the job within 10 s with whole windows only.
//!
//! One job at a time (a lock): 8 processes of 28 workers share 2 CPUs.

#![cfg(feature = "mpi")]

mod common;

use common::{report, tagged_air_pids, text, threads_of, wait, TmpDir};
use serde_json::Value;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

const AIR: &str = env!("CARGO_BIN_EXE_air");
const RANKS: usize = 8;
const WORKERS: usize = 28;
/// The bound on a whole 8 × 28 job, launch to exit.
const LIMIT: Duration = Duration::from_secs(120);
/// The bound on a job's stop after SIGTERM.
const STOP_LIMIT: Duration = Duration::from_secs(10);
/// Small rings: 224 workers have 2 × 224² = 100,352 rings of YSB's two edges.
const RING_BYTES: &str = "65536";

/// Serializes the jobs of this file (the test harness runs tests in threads).
fn one_job() -> MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

/// `mpirun -np 8 air <args>` with `env`, tagged `tag` (so its ranks can be
/// found), in its own process group (so a hang kills every rank), output
/// piped.
fn start(tag: &str, args: &[&str], env: &[(&str, &str)]) -> Child {
    let mut cmd = air_rdma::mpirun_command(RANKS);
    cmd.arg(AIR).args(args).envs(env.iter().copied());
    cmd.env("AIR_TEST_TAG", tag).process_group(0);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.spawn().expect("start mpirun (is MPI installed?)")
}

/// A unique tag for one job of this test process.
fn tag(what: &str) -> String {
    format!("scale-{what}-{}", std::process::id())
}

/// A YSB file and the embedded run's rows over it.
struct Input {
    dir: TmpDir,
    args: Vec<String>,
    reference: String,
}

/// 100,000 events over 5 s of event time in 1 s windows: 6 windows of 100
/// campaigns. Few events, so that a debug build's 224 workers are done soon.
fn input(tag: &str) -> Input {
    let dir = common::tmpdir("scale", tag);
    let s = |p: std::path::PathBuf| p.to_string_lossy().into_owned();
    let (events, camps, out) = (
        s(dir.join("ysb.json")),
        s(dir.join("camp.txt")),
        s(dir.join("reference.csv")),
    );
    let run = |args: &[&str]| {
        let o = Command::new(AIR).args(args).output().expect("run air");
        assert!(o.status.success(), "air {args:?}: {}", text(&o));
    };
    run(&[
        "gen",
        "ysb",
        "--events",
        "100000",
        "--seed",
        "18",
        "--events-per-s",
        "20000",
        "--out",
        &events,
        "--campaigns-out",
        &camps,
    ]);
    let args: Vec<String> = [
        "run",
        "ysb",
        "--input",
        &events,
        "--campaigns",
        &camps,
        "--window-ms",
        "1000",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    let mut embedded: Vec<&str> = args.iter().map(String::as_str).collect();
    embedded.extend(["--workers", "2", "--no-pin", "--out", &out]);
    run(&embedded);
    let reference = std::fs::read_to_string(&out).unwrap();
    assert!(
        reference.lines().count() > 500,
        "the reference has rows:\n{reference}"
    );
    Input {
        dir,
        args,
        reference,
    }
}

/// Runs YSB over a fresh input at 8 × 28 with `extra` options and `env`:
/// the job succeeds within [`LIMIT`], its rows are the embedded run's, and
/// its report counts 224 workers. Returns the report.
fn check_8_by_28(what: &str, extra: &[&str], env: &[(&str, &str)]) -> Value {
    let inp = input(what);
    let _one = one_job();
    let (out, rep) = (inp.dir.join("out.csv"), inp.dir.join("report.json"));
    let (out_s, rep_s, w) = (
        out.to_string_lossy(),
        rep.to_string_lossy(),
        WORKERS.to_string(),
    );
    let mut args: Vec<&str> = inp.args.iter().map(String::as_str).collect();
    args.extend(["--workers", &w, "--ring-bytes", RING_BYTES, "--no-pin"]);
    args.extend(["--out", &out_s, "--report", &rep_s]);
    args.extend(extra);
    let tag = tag(what);
    // Past the limit, `wait` kills the job's process group and fails; the
    // margin lets a job that ends late report how late.
    let (o, took) = wait(
        start(&tag, &args, env),
        &format!("mpirun -np {RANKS} air {args:?} {env:?}"),
        LIMIT + Duration::from_secs(60),
    );
    assert!(o.status.success(), "{what}: {}", text(&o));
    eprintln!("{what}: the job took {took:?}");
    assert!(took < LIMIT, "{what}: the job took {took:?}");
    assert!(
        tagged_air_pids(&tag).is_empty(),
        "{what}: a rank outlived mpirun"
    );
    let got = std::fs::read_to_string(&out).unwrap();
    assert_eq!(
        got.lines().count(),
        inp.reference.lines().count(),
        "{what}: rows"
    );
    assert!(
        got == inp.reference,
        "{what}: rows differ from the embedded run's"
    );
    let r = report(&rep);
    assert_eq!(r["ranks"], RANKS as u64, "{r}");
    assert_eq!(r["workers"], (RANKS * WORKERS) as u64, "{r}");
    assert_eq!(r["events"], 100_000, "{r}");
    r
}

/// Channels rank 0's workers consume, by tier: (thread, node, network).
fn tiers(r: &Value) -> (u64, u64, u64) {
    let t = &r["mpi"]["rank0_channels_by_tier"];
    let n = |k: &str| t[k].as_u64().unwrap_or_else(|| panic!("{k} in {r}"));
    (n("thread"), n("node"), n("network"))
}

const W2: u64 = (WORKERS * WORKERS) as u64;

#[test]
fn node_tier_8_by_28_gives_the_embedded_rows_within_120_s() {
    let r = check_8_by_28("node", &[], &[]);
    // From every rank one ring per worker pair: 7 other ranks on this node.
    assert_eq!(tiers(&r), (W2, 7 * W2, 0), "{r}");
}

#[test]
fn network_tier_8_by_28_gives_the_embedded_rows_within_120_s() {
    let r = check_8_by_28("net", &["--force-network"], &[]);
    // One ring per worker of rank 0 from each other rank (shared by the
    // sender's 28 workers).
    assert_eq!(tiers(&r), (W2, 0, 7 * WORKERS as u64), "{r}");
    assert_eq!(r["mpi"]["force_network"], true);
}

/// Ignored until session 17 (2 runs of 5 were killed by signal 9 under the
/// push ring); with the pull ring it passed 8 runs of 8 in sessions 17–18,
/// 3 of them with two helpers building (load 85–135).
#[test]
fn three_tiers_8_by_28_give_the_embedded_rows_within_120_s() {
    let r = check_8_by_28("tiers", &[], &[("AIR_EMULATE_RANKS_PER_NODE", "2")]);
    // Nodes of 2 ranks: rank 1 on the node tier, ranks 2–7 on the network.
    assert_eq!(tiers(&r), (W2, W2, 6 * WORKERS as u64), "{r}");
    assert_eq!(r["mpi"]["emulated_ranks_per_node"], 2);
}

/// Segments in `/dev/shm` that process `pid` holds open under their name
/// (not yet unlinked): a rank's node-tier rings and doorbells during setup.
fn named_segments_held(pid: u32) -> usize {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return 0;
    };
    fds.flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .map(|l| l.to_string_lossy().into_owned())
        .filter(|l| l.starts_with("/dev/shm/air-") && !l.ends_with(" (deleted)"))
        .count()
}

/// Starts `air run wa` without end at 8 × 28 (deterministic event times,
/// 100 ms windows), sends SIGTERM to mpirun once every rank's setup is over
/// and 2 s more passed, and checks that the job ended within
/// [`STOP_LIMIT`] with exit 143 from the ranks and whole windows only.
fn sigterm_8_by_28(what: &str, extra: &[&str], env: &[(&str, &str)]) {
    let dir = common::tmpdir("scale", what);
    let _one = one_job();
    let (out, rep) = (dir.join("out.csv"), dir.join("report.json"));
    let (out_s, rep_s, w) = (
        out.to_string_lossy(),
        rep.to_string_lossy(),
        WORKERS.to_string(),
    );
    let mut args = vec![
        "run",
        "wa",
        "--events",
        "100000000000",
        "--keys",
        "10",
        "--window-ms",
        "100",
        "--events-per-s",
        "100000",
        "--seed",
        "9",
        "--workers",
        &w,
        "--ring-bytes",
        RING_BYTES,
        "--no-pin",
        "--out",
        &out_s,
        "--report",
        &rep_s,
    ];
    args.extend(extra);
    let tag = tag(what);
    let child = start(&tag, &args, env);
    let pid = child.id() as i32;
    // Running: every rank has its 28 worker threads and has held no named
    // segment for a second (its workers made their rings, their peers
    // opened them and unlinked the names, the doorbells' names are gone:
    // setup is over); then 2 s of windows.
    let begin = Instant::now();
    let mut quiet_since: Option<Instant> = None;
    loop {
        let pids = tagged_air_pids(&tag);
        let up = pids.len() == RANKS && pids.iter().all(|&p| threads_of(p) >= WORKERS);
        if up && pids.iter().all(|&p| named_segments_held(p) == 0) {
            let since = *quiet_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= Duration::from_secs(1) {
                break;
            }
        } else {
            quiet_since = None;
        }
        if begin.elapsed() > LIMIT {
            // SAFETY: kill of the process group this test started.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            panic!("{what}: the job did not finish its setup in {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(2));
    let running = begin.elapsed();
    // SAFETY: plain kill of the launcher this test started; it forwards
    // the signal to the ranks.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let (o, took) = wait(child, &format!("{what}: mpirun after SIGTERM"), LIMIT);
    eprintln!("{what}: stopped in {took:?} after {running:?}");
    assert!(
        took < STOP_LIMIT,
        "{what}: stopping took {took:?} (after {running:?} of running)"
    );
    assert!(
        tagged_air_pids(&tag).is_empty(),
        "{what}: a rank outlived mpirun"
    );
    // Each rank exits 143; what mpirun exits with varies (see mpi_e2e).
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("stopped by signal 15"), "{what}: {}", text(&o));
    let r = report(&rep);
    assert_eq!(r["stopped"], true, "{r}");
    assert_eq!(r["ranks"], RANKS as u64, "{r}");
    assert_eq!(r["workers"], (RANKS * WORKERS) as u64, "{r}");
    common::assert_stopped_wa_exact(&out, 9, 10, 100, 100_000.0);
}

#[test]
fn sigterm_stops_node_tier_8_by_28_within_10_s_with_whole_windows() {
    sigterm_8_by_28("sig-node", &[], &[]);
}

/// Ignored until session 17 (the stop took 270 s while senders spun in
/// `MPI_Win_flush`); with the pull ring it passed 8 runs of 8 in sessions
/// 17–18.
#[test]
fn sigterm_stops_network_tier_8_by_28_within_10_s_with_whole_windows() {
    sigterm_8_by_28("sig-net", &["--force-network"], &[]);
}
