//! A nearly idle job costs little CPU: workers with nothing to do park on
//! their doorbells until a producer publishes or their next flush tick,
//! instead of polling in 100 µs naps.
//!
//! The bound is loose for a loaded CI host: YSB paced at 1,000 events/s on
//! 2 workers for 4 s must use at most 10% of one core (CPU time over wall
//! time, setup included). Before doorbells the same run took 13–19% of a
//! core on a loaded 2-core VM (28% in issue 18); with them 4–6% there
//! (each of the ~1,000 wake-ups per second and worker costs ~20–40 µs of
//! kernel time on that VM).

use std::process::{Command, Stdio};
use std::time::Instant;

const AIR: &str = env!("CARGO_BIN_EXE_air");

/// Runs `air args` and returns (exit code, user + system CPU seconds of the
/// process, wall seconds).
fn run_measured(args: &[&str]) -> (i32, f64, f64) {
    let start = Instant::now();
    let child = Command::new(AIR)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: zeroed rusage is a valid value for wait4 to fill.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not yet reaped (`child` is never waited
    // on); `status` and `ru` are valid for writes.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    assert_eq!(r, pid, "wait4: {}", std::io::Error::last_os_error());
    let wall = start.elapsed().as_secs_f64();
    std::mem::forget(child);
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    let cpu = secs(ru.ru_utime) + secs(ru.ru_stime);
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    (code, cpu, wall)
}

#[test]
fn a_paced_job_at_1000_events_per_second_stays_quiet() {
    let (code, cpu, wall) = run_measured(&[
        "run",
        "ysb",
        "--workers",
        "2",
        "--no-pin",
        "--rate",
        "1000",
        "--duration",
        "4",
    ]);
    assert_eq!(code, 0);
    let share = cpu / wall;
    eprintln!(
        "paced YSB at 1000 events/s: {cpu:.3} s CPU in {wall:.2} s wall = {share:.3} of a core"
    );
    assert!(wall >= 3.5, "the paced run took only {wall:.2} s");
    assert!(
        share <= 0.10,
        "an almost idle job used {:.1}% of a core ({cpu:.3} s CPU in {wall:.2} s)",
        share * 100.0
    );
}
