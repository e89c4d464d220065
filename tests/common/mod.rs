//! Helpers shared by the end-to-end tests.

#[allow(dead_code)] // not every test crate reads NEXMark events
pub mod nexmark;

use air_operators::sources::wa::{event, zipf_of, KeyDist, WaConfig};
use std::collections::BTreeMap;
use std::path::Path;

/// A temporary directory (tempfile's), removed when the test ends, also
/// when it fails; derefs to its path.
pub struct TmpDir(tempfile::TempDir);

impl std::ops::Deref for TmpDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        self.0.path()
    }
}

/// A new temporary directory whose name starts with `air-<prefix>-<tag>-`.
pub fn tmpdir(prefix: &str, tag: &str) -> TmpDir {
    TmpDir(
        tempfile::Builder::new()
            .prefix(&format!("air-{prefix}-{tag}-"))
            .tempdir()
            .expect("create a temporary directory"),
    )
}

/// Checks the CSV `out` of `air run wa --seed S --keys K --window-ms W
/// --events-per-s R` that a signal stopped: windows contiguous from 0 (at
/// least 3), and windows 0, W and the last one equal, key by key, to the
/// generator's events in them (count and sum).
#[allow(dead_code)] // not every test crate stops a job
pub fn assert_stopped_wa_exact(
    out: &Path,
    seed: u64,
    keys: u64,
    window_ms: u64,
    events_per_s: f64,
) {
    // Rows: (window, key) -> (count, sum), windows contiguous from 0.
    let mut rows: BTreeMap<(u64, u64), (u64, i64)> = BTreeMap::new();
    let text = std::fs::read_to_string(out).unwrap();
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
            .map(|i| i * window_ms)
            .collect::<Vec<_>>()
    );
    // Every reported window is complete: equal to the generator's events
    // in it (the first two and the last one checked in full).
    let cfg = WaConfig {
        seed,
        events: u64::MAX,
        keys,
        dist: KeyDist::Uniform,
        events_per_s,
        ..WaConfig::default()
    };
    let z = zipf_of(&cfg);
    let last = *windows.last().unwrap();
    for w in [0, window_ms, last] {
        let mut want: BTreeMap<(u64, u64), (u64, i64)> = BTreeMap::new();
        // events_per_s / 1000 events per ms; scan a margin around the window.
        let per_ms = (events_per_s / 1000.0).ceil() as u64;
        let first = (w * per_ms).saturating_sub(2 * per_ms);
        for n in first..(w + window_ms + 2) * per_ms {
            let e = event(&cfg, z.as_deref(), n);
            if e.time_ms >= w && e.time_ms < w + window_ms {
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

/// A run's `--report` JSON file, parsed.
#[allow(dead_code)] // not every test crate reads a report
pub fn report(p: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// The keyed stage of WA `--shuffle` in a report's `load` (the every-event
/// window's two edges): its `records_per_worker` (global worker order), the
/// hot-key figures `load.rebalance`, and the stage.
#[allow(dead_code)] // not every test crate reads a load
pub fn window_stage_load(
    r: &serde_json::Value,
) -> (Vec<u64>, serde_json::Value, serde_json::Value) {
    let load = &r["load"];
    let stage = load["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "window records + window hot-key partials")
        .unwrap_or_else(|| panic!("no window records stage: {load}"));
    let per: Vec<u64> = stage["records_per_worker"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    (per, load["rebalance"].clone(), stage.clone())
}

/// A CSV file's rows without its header, sorted (to compare runs).
#[allow(dead_code)] // not every test crate compares rows
pub fn sorted_rows(p: &Path) -> Vec<String> {
    let mut rows: Vec<String> = std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .skip(1)
        .map(str::to_string)
        .collect();
    rows.sort();
    rows
}

/// Exit status, stdout and stderr of a finished command, for assertion
/// messages.
#[allow(dead_code)] // not every test crate runs commands
pub fn text(o: &std::process::Output) -> String {
    format!(
        "{}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Waits for `child` (its output piped) up to `limit` and returns its
/// output and how long the wait took; on a hang, kills it (and, if it leads
/// its own process group, the group: the ranks of an `mpirun` started with
/// `process_group(0)`) and panics naming `what`.
#[allow(dead_code)] // not every test crate starts a launcher
pub fn wait(
    child: std::process::Child,
    what: &str,
    limit: std::time::Duration,
) -> (std::process::Output, std::time::Duration) {
    let pid = child.id() as i32;
    let start = std::time::Instant::now();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => (out.expect("wait"), start.elapsed()),
        Err(_) => {
            // SAFETY: getpgid and kill of the process this test started
            // (and of its own process group only if it leads one).
            unsafe {
                if libc::getpgid(pid) == pid {
                    libc::kill(-pid, libc::SIGKILL);
                }
                libc::kill(pid, libc::SIGKILL);
            }
            panic!("{what} hung for {:?}", start.elapsed());
        }
    }
}

/// The pids of the `air` processes started with `AIR_TEST_TAG=<tag>` in
/// their environment (the ranks of one tagged `mpirun` job), in no order.
#[allow(dead_code)] // not every test crate tags its ranks
pub fn tagged_air_pids(tag: &str) -> Vec<u32> {
    let want = format!("AIR_TEST_TAG={tag}");
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|pid| {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            comm.trim() == "air"
                && std::fs::read(format!("/proc/{pid}/environ"))
                    .is_ok_and(|env| env.split(|&b| b == 0).any(|v| v == want.as_bytes()))
        })
        .collect()
}

/// The thread count of process `pid` (`Threads:` of `/proc/<pid>/status`),
/// 0 if it is gone.
#[allow(dead_code)] // not every test crate counts threads
pub fn threads_of(pid: u32) -> usize {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Threads:"))
                .and_then(|n| n.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// The pid of rank `rank` of the `mpirun` job started with
/// `AIR_TEST_TAG=<tag>` in its environment (MPICH's `PMI_RANK` or Open
/// MPI's `OMPI_COMM_WORLD_RANK`), if it runs.
#[allow(dead_code)] // not every test crate kills a rank
pub fn rank_pid(tag: &str, rank: usize) -> Option<u32> {
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let vars: Vec<&[u8]> = env.split(|&b| b == 0).collect();
        let has = |v: &str| vars.contains(&v.as_bytes());
        let tagged = has(&format!("AIR_TEST_TAG={tag}"));
        let ranked =
            has(&format!("PMI_RANK={rank}")) || has(&format!("OMPI_COMM_WORLD_RANK={rank}"));
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if tagged && ranked && comm.trim() == "air" {
            return Some(pid);
        }
    }
    None
}

/// The lines of the file at `p`, sorted (rows compared whatever order the
/// workers wrote them in).
#[allow(dead_code)] // not every test crate compares rows
pub fn sorted_lines(p: &Path) -> Vec<String> {
    let mut rows: Vec<String> = std::fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .lines()
        .map(str::to_string)
        .collect();
    rows.sort();
    rows
}
