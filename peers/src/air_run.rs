//! Runs the `air` binary on the same job and reads its rows and report.

use crate::{Mode, Row, YsbSpec};
use anyhow::Context;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What `air run ysb` reported.
#[derive(Debug, Clone)]
pub struct AirRun {
    /// Its `--out` rows.
    pub rows: Vec<Row>,
    /// `events` of its report.
    pub events: u64,
    /// `elapsed_s` of its report: the job from starting its workers to
    /// having every row (process start-up and campaign generation excluded).
    pub elapsed_s: f64,
    /// `events_per_s` of its report.
    pub events_per_s: f64,
    /// `late_records` of its report.
    pub late: u64,
}

/// The `air` binary: `explicit` if given, else `air` in the directory of
/// the running executable or its parent (a test binary lives in
/// `target/<profile>/deps/`, `air` in `target/<profile>/`).
pub fn locate(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(p) = explicit {
        anyhow::ensure!(p.is_file(), "--air {}: no such file", p.display());
        return Ok(p.to_path_buf());
    }
    let exe = std::env::current_exe().context("locating the running executable")?;
    let name = format!("air{}", std::env::consts::EXE_SUFFIX);
    for dir in exe.ancestors().skip(1).take(2) {
        let p = dir.join(&name);
        if p.is_file() {
            return Ok(p);
        }
    }
    anyhow::bail!(
        "no `air` binary beside {} (build it with `cargo build --release`, or pass --air PATH)",
        exe.display()
    )
}

/// The arguments of `air run ysb` for `spec` in `mode` (without outputs).
pub fn args(spec: &YsbSpec, mode: Mode) -> Vec<String> {
    let mut a: Vec<String> = [
        "run",
        "ysb",
        "--event-time",
        "synthetic",
        "--events",
        &spec.events.to_string(),
        "--workers",
        &spec.workers.to_string(),
        "--seed",
        &spec.seed.to_string(),
        "--window-ms",
        &spec.window_ms.to_string(),
        "--max-delay-ms",
        &spec.max_delay_ms.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if spec.events_per_s != 1_000_000 {
        // Synthetic event time runs at `--rate` events/s when it is given
        // (which also paces the generator): only the default is unpaced.
        a.push("--rate".into());
        a.push(spec.events_per_s.to_string());
    }
    if mode == Mode::EveryEvent {
        a.push("--shuffle".into());
    }
    a
}

/// Runs `air run ysb` for `spec` in `mode` and reads its rows and report.
pub fn run(air: &Path, spec: &YsbSpec, mode: Mode) -> anyhow::Result<AirRun> {
    let dir = tempfile::tempdir().context("temporary directory")?;
    let out = dir.path().join("rows.csv");
    let report = dir.path().join("report.json");
    let args = args(spec, mode);
    let o = Command::new(air)
        .args(&args)
        .arg("--out")
        .arg(&out)
        .arg("--report")
        .arg(&report)
        .output()
        .with_context(|| format!("starting {}", air.display()))?;
    anyhow::ensure!(
        o.status.success(),
        "{} {} failed ({}): {}",
        air.display(),
        args.join(" "),
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(
        &std::fs::read(&report).with_context(|| format!("reading {}", report.display()))?,
    )
    .context("parsing air's report")?;
    let num = |k: &str| {
        r.get(k)
            .and_then(|v| v.as_f64())
            .with_context(|| format!("air's report has no number `{k}`"))
    };
    let mut rows = Vec::new();
    let mut rd =
        csv::Reader::from_path(&out).with_context(|| format!("reading {}", out.display()))?;
    for row in rd.deserialize() {
        rows.push(row.context("air's rows")?);
    }
    Ok(AirRun {
        rows,
        events: num("events")? as u64,
        elapsed_s: num("elapsed_s")?,
        events_per_s: num("events_per_s")?,
        late: num("late_records")? as u64,
    })
}
