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
            let e = event(&cfg, z.as_ref(), n);
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
