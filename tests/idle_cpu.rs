//! A nearly idle job costs little CPU: workers with nothing to do park on
//! their doorbells until a producer publishes or their next flush tick,
//! instead of polling in 100 µs naps.
//!
//! The bound is loose for a loaded CI host: YSB paced at 1,000 events/s on
//! 2 workers must use at most 14% of one core in its steady state (CPU time
//! of the process from 1 s to 4 s after its start, from `/proc/PID/stat`,
//! so setup and teardown, slower in unoptimised builds, do not count).
//! Measured that way on a quiet 2-core VM, the same run took 21% of a core
//! before doorbells (28% in issue 18, setup included) and 8–9% with them
//! (each of the ~1,000 wake-ups per second and worker costs ~20–40 µs of
//! kernel time on that VM).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const AIR: &str = env!("CARGO_BIN_EXE_air");

/// User + system CPU seconds of process `pid` so far (`/proc/PID/stat`
/// fields 14 and 15, in clock ticks).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc/PID/stat");
    // The command name (field 2) may hold spaces: fields count from its ')'.
    let rest = &stat[stat.rfind(')').expect("stat has a command name") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    ticks as f64 / hz
}

#[test]
fn a_paced_job_at_1000_events_per_second_stays_quiet() {
    let start = Instant::now();
    let mut child = Command::new(AIR)
        .args(["run", "ysb", "--workers", "2", "--no-pin"])
        .args(["--rate", "1000", "--duration", "5"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    std::thread::sleep(Duration::from_secs(1));
    let (c0, t0) = (cpu_seconds(pid), Instant::now());
    std::thread::sleep(Duration::from_secs(3));
    let (c1, t1) = (cpu_seconds(pid), Instant::now());
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(
        start.elapsed() >= Duration::from_millis(4500),
        "the paced run took only {:?}",
        start.elapsed()
    );
    let wall = (t1 - t0).as_secs_f64();
    let share = (c1 - c0) / wall;
    eprintln!(
        "paced YSB at 1000 events/s, steady state: {:.3} s CPU in {wall:.2} s wall = {share:.3} \
         of a core",
        c1 - c0
    );
    assert!(
        share <= 0.14,
        "an almost idle job used {:.1}% of a core ({:.3} s CPU in {wall:.2} s)",
        share * 100.0,
        c1 - c0
    );
}
