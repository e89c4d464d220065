//! Setting up a job across ranks without races or noise: the stale
//! segments of a dead job are removed before any rank checks `/dev/shm`
//! for room, a refused job is reported once (by rank 0) with exit code 2
//! and leaves no temp output behind, and `--no-pin` warns of more workers
//! than CPUs as the pinned plan does.

#![cfg(feature = "mpi")]

mod common;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const AIR: &str = env!("CARGO_BIN_EXE_air");
/// Longest a run here may take before the test calls it a hang.
const LIMIT: Duration = Duration::from_secs(120);

/// Runs `cmd` with its output captured; kills it (and fails) on a hang.
fn run(mut cmd: Command, what: &str) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap_or_else(|e| panic!("start {what}: {e}"));
    let pid = child.id();
    let start = Instant::now();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(LIMIT) {
        Ok(out) => out.expect("wait"),
        Err(_) => {
            // SAFETY: plain kill of the process this test started.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("{what} hung for {:?}", start.elapsed());
        }
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `mpirun -np <np> air <args…>`.
fn mpirun(np: usize, args: &[&str]) -> Command {
    let mut cmd = air_rdma::mpirun_command(np);
    cmd.arg(AIR).args(args);
    cmd
}

/// Whether this process may make a private mount namespace with its own
/// `/dev/shm` (root, and `unshare` permitted here).
fn private_mounts_allowed() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return false;
    }
    Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg("mount -t tmpfs -o size=1m tmpfs /dev/shm")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The race of issue 18: local rank 0 removed a dead job's segments while
/// the other local ranks already checked `/dev/shm` for room, so a tight
/// `/dev/shm` holding a stale segment failed a job the cleanup would have
/// let run. Here: a private 64 MiB tmpfs holding one stale 20 MiB segment
/// of this user (a name `air-<uid>-…`, no lock held, a minute old); two
/// ranks of two workers need 8 node-tier rings of 6.5 MiB (52 MiB, more
/// than the 44 MiB free before the cleanup, less than the 64 MiB after).
#[test]
fn stale_segment_is_removed_before_any_rank_checks_shm() {
    if !private_mounts_allowed() {
        eprintln!("skipped: needs root and unshare (a private /dev/shm mount)");
        return;
    }
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let stale = format!("/dev/shm/air-{uid}-deadjob-0-1");
    let mpi = air_rdma::mpirun_command(2);
    let mut cmd = Command::new("unshare");
    // Inside the namespace: the tmpfs, the stale segment (written, so its
    // pages count against the tmpfs; aged past the 2 s grace), the job,
    // then whether the segment is still there.
    let script = format!(
        "mount -t tmpfs -o size=64m tmpfs /dev/shm || exit 90
         head -c 20971520 /dev/zero > {stale} && chmod 600 {stale} || exit 91
         touch -d '1 minute ago' {stale} || exit 92
         \"$@\"; rc=$?
         if [ -e {stale} ]; then echo 'stale segment left' >&2; fi
         exit $rc"
    );
    cmd.args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(script)
        .arg("sh")
        .arg(mpi.get_program())
        .args(mpi.get_args())
        .arg(AIR)
        .args(["run", "ysb", "--workers", "2", "--ring-bytes", "6815744"])
        .args(["--events", "20000", "--no-pin"]);
    let o = run(cmd, "a run beside a stale segment");
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("stale segment left"), "{}", text(&o));
    assert!(!err.contains("not enough shared memory"), "{}", text(&o));
    // And says so, once (local rank 0 cleans).
    assert_eq!(
        err.matches("removed 1 stale shared-memory segment(s)")
            .count(),
        1,
        "{}",
        text(&o)
    );
}

/// A job every rank refuses at setup (its rings cannot fit in memory):
/// the error is printed once, by rank 0; every rank exits 2 (a bad
/// option), nothing hangs, and the outputs opened before the run leave no
/// `.NAME.<pid>.tmp` behind (an earlier `--out` file is left as it was).
#[test]
fn refused_job_reports_once_exits_2_and_leaves_no_temp_files() {
    let dir = common::tmpdir("setup", "refused");
    let out = dir.join("x.csv");
    let rep = dir.join("r.json");
    let per = dir.join("p.csv");
    std::fs::write(&out, "previous\n").unwrap();
    let (out_s, rep_s) = (out.to_str().unwrap(), rep.to_str().unwrap());
    // 2 ranks × 4 workers: 32 input rings of 16 GiB per rank.
    let refused = [
        "run",
        "ysb",
        "--workers",
        "4",
        "--no-pin",
        "--events",
        "1000",
        "--ring-bytes",
        "17179869184",
    ];
    let o = run(
        mpirun(
            2,
            &[&refused[..], &["--out", out_s, "--report", rep_s]].concat(),
        ),
        "a refused 2-rank job",
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.matches("job setup").count(), 1, "{}", text(&o));
    assert_eq!(err.matches("air: error").count(), 1, "{}", text(&o));
    assert!(err.contains("more than half"), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "previous\n");
    // Per-rank outputs (opened on every rank) go too.
    let o = run(
        mpirun(
            2,
            &[
                &refused[..],
                &[
                    "--shuffle",
                    "--out",
                    per.to_str().unwrap(),
                    "--out-per-rank",
                ],
            ]
            .concat(),
        ),
        "a refused 2-rank job with per-rank outputs",
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let names: Vec<String> = std::fs::read_dir(&*dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["x.csv"], "files left: {names:?}");
}

/// Restricts `cmd` (and what it starts) to one CPU, the first this
/// process may use.
fn on_one_cpu(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity
    // writes at most sizeof(cpu_set_t) bytes into it.
    let cpu = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set),
            0
        );
        (0..libc::CPU_SETSIZE as usize)
            .find(|&c| libc::CPU_ISSET(c, &set))
            .expect("a CPU")
    };
    // SAFETY: the closure runs in the child between fork and exec and only
    // makes async-signal-safe calls (sched_setaffinity) on its own stack.
    unsafe {
        cmd.pre_exec(move || {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// `--no-pin` with more workers than CPUs warns of oversubscription as
/// the pinned plan does: alone (2 workers on 1 CPU) and across 2 ranks of
/// one worker each on the same CPU; with as many workers as CPUs, no word.
#[test]
fn no_pin_warns_of_more_workers_than_cpus() {
    let ysb = |workers: &str| {
        [
            "run",
            "ysb",
            "--no-pin",
            "--events",
            "2000",
            "--ring-bytes",
            "65536",
            "--workers",
        ]
        .into_iter()
        .chain([workers])
        .map(String::from)
        .collect::<Vec<_>>()
    };
    let mut alone = Command::new(AIR);
    alone.args(ysb("2"));
    on_one_cpu(&mut alone);
    let o = run(alone, "air run ysb --no-pin on one CPU");
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("2 workers on this node but 1 CPUs") && err.contains("--no-pin"),
        "{}",
        text(&o)
    );

    let args = ysb("1");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut ranks = mpirun(2, &args);
    on_one_cpu(&mut ranks);
    let o = run(ranks, "mpirun -np 2 air run ysb --no-pin on one CPU");
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("2 workers on this node but 1 CPUs"),
        "{}",
        text(&o)
    );

    let mut fits = Command::new(AIR);
    fits.args(ysb("1"));
    on_one_cpu(&mut fits);
    let o = run(fits, "air run ysb --no-pin --workers 1 on one CPU");
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("workers share"),
        "{}",
        text(&o)
    );
}
