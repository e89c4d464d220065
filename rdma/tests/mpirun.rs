//! air-rdma across real ranks: `mpirun -np N air-rdma-selftest MODE`.

use std::os::unix::process::CommandExt;
use std::process::Output;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One `mpirun` at a time: several at once oversubscribe the 2 CPUs of the
/// test machine with ranks that spin in MPI, and MPICH completes a flush
/// only while its target rank gets CPU time to call into MPI
/// (MACHINE-NOTES), so concurrent jobs stall each other for tens of seconds.
static ONE_JOB: Mutex<()> = Mutex::new(());

fn run(np: usize, args: &[&str], limit: Duration) -> Output {
    let _one = ONE_JOB.lock().unwrap_or_else(|e| e.into_inner());
    let mut cmd = air_rdma::mpirun_command(np);
    cmd.arg(env!("CARGO_BIN_EXE_air-rdma-selftest")).args(args);
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    // Its own process group, so a hang kills the ranks too.
    cmd.process_group(0);
    let child = cmd.spawn().expect("start mpirun (is MPI installed?)");
    let pid = child.id();
    let start = Instant::now();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.expect("wait for mpirun"),
        Err(_) => {
            // SAFETY: plain kill of the process group of the launcher we
            // started (its ranks included).
            unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
            panic!("mpirun -np {np} {args:?} hung for {:?}", start.elapsed());
        }
    }
}

fn assert_ok(np: usize, args: &[&str], out: &Output) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "mpirun -np {np} {args:?}: {}\n{stdout}\n{stderr}",
        out.status
    );
    for r in 0..np {
        let want = format!("OK {} rank {r}", args[0]);
        assert!(
            stdout.contains(&want),
            "missing `{want}` in\n{stdout}\n{stderr}"
        );
    }
}

#[test]
fn one_sided_operations_give_predicted_values() {
    for np in [2, 3] {
        let out = run(np, &["ops"], Duration::from_secs(60));
        assert_ok(np, &["ops"], &out);
    }
}

#[test]
fn remote_ring_delivers_every_frame_in_order_with_a_passive_receiver() {
    // Ring of 4 KiB with frames up to 2 KiB: wraps, padding, full ring.
    let args = ["ring", "50000", "4096"];
    let out = run(2, &args, Duration::from_secs(120));
    assert_ok(2, &args, &out);
    // Three ranks in a cycle, the smallest ring (frames up to 32 bytes).
    let args = ["ring", "3000", "64"];
    let out = run(3, &args, Duration::from_secs(120));
    assert_ok(3, &args, &out);
    // A 1 MiB ring: four 256 KiB segments, frames padded at each segment's
    // end, a 256 KiB mirror that publishes when it is full.
    let args = ["ring", "3000", "1048576"];
    let out = run(2, &args, Duration::from_secs(60));
    assert_ok(2, &args, &out);
}

#[test]
fn a_full_remote_ring_blocks_its_sender_and_loses_nothing() {
    // The receiver reads nothing for a second: at most a ring of frames is
    // accepted, then the sender is refused until the receiver reads; every
    // frame then arrives once, in order.
    let args = ["full", "2000", "4096"];
    let out = run(2, &args, Duration::from_secs(60));
    assert_ok(2, &args, &out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("then all 2000 frames arrived"), "{stdout}");
}

#[test]
fn ranks_know_their_node_host_and_library() {
    let out = run(2, &["info"], Duration::from_secs(60));
    assert_ok(2, &["info"], &out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("rank 1 of 2 node 0 of 1 local 1 of 2"),
        "{stdout}"
    );
}

#[test]
fn a_single_process_started_by_a_launcher_for_several_ranks_fails_loudly() {
    // What a binary linked to one MPI sees under another MPI's mpirun: the
    // launcher says 3 ranks, MPI gives a world of 1.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_air-rdma-selftest"))
        .arg("info")
        .env("OMPI_COMM_WORLD_SIZE", "3")
        .output()
        .expect("run selftest");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("OMPI_COMM_WORLD_SIZE=3") && stderr.contains("world size 1"),
        "{stderr}"
    );
}

#[test]
fn a_remote_ring_shared_by_several_senders_keeps_each_senders_order() {
    // Three threads per rank share one 4 KiB ring to the next rank: wraps,
    // padding, a full ring, and frames of different senders interleaved.
    let args = ["outbox", "2000", "4096", "3"];
    let out = run(2, &args, Duration::from_secs(120));
    assert_ok(2, &args, &out);
    // Three ranks in a cycle, the smallest ring.
    let args = ["outbox", "300", "64", "2"];
    let out = run(3, &args, Duration::from_secs(120));
    assert_ok(3, &args, &out);
}
