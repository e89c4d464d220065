//! SIGTERM / SIGINT mid-run: the sources stop, the channels drain, every
//! window every worker had read past fires, the outputs are written, and
//! the command exits 128 + signal. Reported windows are exact.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const AIR: &str = env!("CARGO_BIN_EXE_air");

fn signal_after(args: &[&str], sig: i32, after: Duration) -> (Option<i32>, String, Duration) {
    let child = Command::new(AIR)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    let t = Instant::now();
    // SAFETY: plain kill of the child this test started.
    unsafe { libc::kill(child.id() as i32, sig) };
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        t.elapsed(),
    )
}

/// Starts `air args`, and sends `sig` once `ready()` holds (checked every
/// 50 ms, for at most 60 s: a loaded host may take long to close windows)
/// and at least `min` passed.
fn signal_when(
    args: &[&str],
    sig: i32,
    min: Duration,
    ready: impl Fn() -> bool,
) -> (Option<i32>, String, Duration) {
    let child = Command::new(AIR)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while start.elapsed() < min || (!ready() && start.elapsed() < Duration::from_secs(60)) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let t = Instant::now();
    // SAFETY: plain kill of the child this test started.
    unsafe { libc::kill(child.id() as i32, sig) };
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        t.elapsed(),
    )
}

#[test]
fn sigterm_mid_run_reports_exactly_the_windows_read_past_and_exits_143() {
    let dir = common::tmpdir("sig", "wa");
    let out = dir.join("o.csv");
    let rep = dir.join("r.json");
    // 10^11 events: far more than the 1.5 s before the signal.
    let (code, err, took) = signal_after(
        &[
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
            "2",
            "--out",
            out.to_str().unwrap(),
            "--report",
            rep.to_str().unwrap(),
        ],
        libc::SIGTERM,
        Duration::from_millis(1500),
    );
    assert_eq!(code, Some(143), "{err}");
    assert!(took < Duration::from_secs(10), "stopping took {took:?}");
    assert!(err.contains("stopped by signal 15"), "{err}");
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&rep).unwrap()).unwrap();
    assert_eq!(r["stopped"], true);
    common::assert_stopped_wa_exact(&out, 9, 10, 100, 1_000_000.0);
}

#[test]
fn sigint_stops_ysb_with_exit_130_and_writes_its_outputs() {
    let dir = common::tmpdir("sig", "ysb");
    let out = dir.join("o.csv");
    let rep = dir.join("r.json");
    let (code, err, took) = signal_after(
        &[
            "run",
            "ysb",
            "--rate",
            "2000000",
            "--duration",
            "60",
            "--window-ms",
            "200",
            "--workers",
            "2",
            "--out",
            out.to_str().unwrap(),
            "--report",
            rep.to_str().unwrap(),
        ],
        libc::SIGINT,
        Duration::from_millis(2500),
    );
    assert_eq!(code, Some(130), "{err}");
    assert!(took < Duration::from_secs(10), "stopping took {took:?}");
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&rep).unwrap()).unwrap();
    assert_eq!(r["stopped"], true);
    assert!(r["rows"].as_u64().unwrap() > 0, "{r}");
    let rows = std::fs::read_to_string(&out).unwrap().lines().count() - 1;
    assert_eq!(rows as u64, r["rows"].as_u64().unwrap());
}

/// `--out` a FIFO with a reader: the rows reach the reader (the checks
/// before the run must not open and close the FIFO: its reader would see an
/// end of file and the job's own open would then wait for a reader
/// forever).
#[test]
fn rows_stream_into_a_fifo_with_a_reader() {
    let dir = common::tmpdir("sig", "fifo-read");
    let fifo = dir.join("rows.csv");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(&fifo).unwrap())
    };
    let args = [
        "run",
        "ysb",
        "--events",
        "2000000",
        "--event-time",
        "synthetic",
        "--workers",
        "2",
    ];
    let mut child = Command::new(AIR)
        .args(args)
        .args(["--out", fifo.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            // Unblock the reader so the test ends.
            let _ = std::fs::OpenOptions::new().write(true).open(&fifo);
            panic!("writing into a FIFO with a reader hung");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success());
    let got = reader.join().unwrap();
    let want = Command::new(AIR)
        .args(args)
        .args(["--out", "-"])
        .output()
        .unwrap();
    assert!(want.status.success());
    let mut a: Vec<&str> = got.lines().collect();
    let want = String::from_utf8(want.stdout).unwrap();
    let mut b: Vec<&str> = want.lines().collect();
    a.sort_unstable();
    b.sort_unstable();
    assert!(a.len() > 100, "{} rows", a.len());
    assert_eq!(a, b);
}

#[test]
fn a_second_signal_exits_at_once_even_while_results_are_being_written() {
    // --out is a FIFO nobody reads: after the first signal the job stops
    // and then blocks opening its output; only the second signal ends it.
    let dir = common::tmpdir("sig", "second");
    let fifo = dir.join("o.csv");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let child = Command::new(AIR)
        .args([
            "run",
            "wa",
            "--events",
            "100000000000",
            "--events-per-s",
            "1000000",
            "--workers",
            "2",
            "--out",
            fifo.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    std::thread::sleep(Duration::from_millis(1000));
    // SAFETY: plain kill of the child this test started.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    std::thread::sleep(Duration::from_millis(1500));
    let mut status = 0;
    // SAFETY: non-blocking waitpid on our own child.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    assert_eq!(r, 0, "the job is still writing its results (blocked)");
    let t = Instant::now();
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "took {:?}",
        t.elapsed()
    );
    // The code of the second signal (SIGINT), at once, without results.
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("second signal"), "{err}");
}

/// `air run nexmark --query q` stopped by SIGTERM reports whole windows
/// only: its rows equal, window by window, those of a complete run over
/// more events, for every window up to the last one it reports.
fn nexmark_stopped_run_is_a_prefix_of_the_complete_run(q: &str) {
    let dir = common::tmpdir("sig", q);
    let (out, rep, full) = (dir.join("o.csv"), dir.join("r.json"), dir.join("f.csv"));
    let args = |events: &str, out: &std::path::Path| -> Vec<String> {
        [
            "run",
            "nexmark",
            "--query",
            q,
            "--events",
            events,
            "--events-per-s",
            "1000000",
            "--window-ms",
            "100",
            "--seed",
            "5",
            "--workers",
            "2",
            "--out",
            out.to_str().unwrap(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let mut a = args("100000000000", &out);
    a.extend(["--report".to_string(), rep.to_str().unwrap().to_string()]);
    let a: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
    let window = |l: &str| -> u64 { l.split(',').next().unwrap().parse().unwrap() };
    // Stopped once 3 windows were written (at least 1 s in): on a loaded
    // host the slowest worker, whose watermark closes windows, may lag.
    let written = || {
        std::fs::read_to_string(&out).is_ok_and(|t| {
            let w: std::collections::BTreeSet<u64> = t
                .lines()
                .skip(1)
                .filter_map(|l| l.split(',').next()?.parse().ok())
                .collect();
            w.len() >= 3
        })
    };
    let (code, err, took) = signal_when(&a, libc::SIGTERM, Duration::from_secs(1), written);
    assert_eq!(code, Some(143), "{q}: {err}");
    assert!(
        took < Duration::from_secs(10),
        "{q}: stopping took {took:?}"
    );
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&rep).unwrap()).unwrap();
    assert_eq!(r["stopped"], true, "{q}");
    let got = std::fs::read_to_string(&out).unwrap();
    let got: Vec<&str> = got.lines().skip(1).collect();
    let windows: std::collections::BTreeSet<u64> = got.iter().map(|l| window(l)).collect();
    assert!(
        windows.len() >= 3,
        "{q}: {} windows before the stop",
        windows.len()
    );
    let last = *windows.last().unwrap();
    // A complete run over 1 s (10 windows) of events more than were read.
    let more = (r["events"].as_u64().unwrap() + 1_000_000).to_string();
    let a = args(&more, &full);
    let a: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
    let o = Command::new(AIR).args(&a).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let want = std::fs::read_to_string(&full).unwrap();
    let want: Vec<&str> = want.lines().skip(1).filter(|l| window(l) <= last).collect();
    assert!(
        want.iter().any(|l| window(l) == last),
        "{q}: the complete run has the window {last}"
    );
    assert_eq!(got.len(), want.len(), "{q}: rows up to window {last}");
    assert!(got == want, "{q}: rows differ from the complete run's");
}

#[test]
fn sigterm_stops_nexmark_q7_with_whole_windows_only() {
    nexmark_stopped_run_is_a_prefix_of_the_complete_run("q7");
}

#[test]
fn sigterm_stops_nexmark_q8_with_whole_windows_only() {
    nexmark_stopped_run_is_a_prefix_of_the_complete_run("q8");
}

/// The same signal twice within half a second (GNU `timeout` signals the
/// child and then its process group) is one stop: the job drains and
/// writes its results; a different signal, or one later, still quits.
#[test]
fn the_same_signal_twice_at_once_is_one_stop() {
    let dir = common::tmpdir("signals", "twice");
    let out = dir.join("out.csv");
    let child = Command::new(AIR)
        .args(["run", "ysb", "--rate", "1000000", "--duration", "60"])
        .args(["--event-time", "synthetic", "--window-ms", "1000"])
        .args(["--workers", "2", "--no-pin", "--out"])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(3000));
    for _ in 0..2 {
        // SAFETY: plain kill of the child this test started.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        std::thread::sleep(Duration::from_millis(2));
    }
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(!err.contains("second signal"), "{err}");
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.lines().count() > 100, "results written: {text}");
}
