//! SIGTERM / SIGINT mid-run: the sources stop, the channels drain, every
//! window every worker had read past fires, the outputs are written, and
//! the command exits 128 + signal. Reported windows are exact.

mod common;

use air_operators::sources::wa::{event, zipf_of, KeyDist, WaConfig};
use std::collections::BTreeMap;
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
    // Rows: (window, key) -> (count, sum), windows contiguous from 0.
    let mut rows: BTreeMap<(u64, u64), (u64, i64)> = BTreeMap::new();
    let text = std::fs::read_to_string(&out).unwrap();
    for l in text.lines().skip(1) {
        let f: Vec<i64> = l.split(',').map(|x| x.parse().unwrap()).collect();
        rows.insert((f[0] as u64, f[1] as u64), (f[2] as u64, f[3]));
    }
    let windows: Vec<u64> = {
        let mut w: Vec<u64> = rows.keys().map(|k| k.0).collect();
        w.dedup();
        w
    };
    assert!(
        windows.len() >= 3,
        "{} windows before the stop",
        windows.len()
    );
    assert_eq!(
        windows,
        (0..windows.len() as u64)
            .map(|i| i * 100)
            .collect::<Vec<_>>()
    );
    // Every reported window is complete: equal to the generator's events
    // in it (the first two and the last one checked in full).
    let cfg = WaConfig {
        seed: 9,
        events: u64::MAX,
        keys: 10,
        dist: KeyDist::Uniform,
        events_per_s: 1_000_000.0,
        ..WaConfig::default()
    };
    let z = zipf_of(&cfg);
    let last = *windows.last().unwrap();
    for w in [0, 100, last] {
        let mut want: BTreeMap<(u64, u64), (u64, i64)> = BTreeMap::new();
        // 1000 events per ms; scan a margin around the window.
        let first = (w * 1000).saturating_sub(2000);
        for n in first..(w + 100) * 1000 + 2000 {
            let e = event(&cfg, z.as_ref(), n);
            if e.time_ms >= w && e.time_ms < w + 100 {
                let s = want.entry((w, e.key)).or_default();
                s.0 += 1;
                s.1 += e.value;
            }
        }
        let got: BTreeMap<(u64, u64), (u64, i64)> = rows
            .range((w, 0)..(w + 1, 0))
            .map(|(k, v)| (*k, *v))
            .collect();
        assert_eq!(got, want, "window {w}");
    }
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
