//! Benchmarks that run `air run …` as child processes, one per measured
//! run (`air bench scale`, `air bench nexmark`): launch a run (alone or
//! through a launcher such as `mpirun`), read its JSON report, and take
//! the child's CPU time and peak resident set from `wait4` (the kernel's
//! account of that process and of the descendants it waited for, e.g. the
//! ranks under `mpirun`).

use super::common::CliError;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// One finished `air run` child.
#[derive(Debug, Clone)]
pub struct ChildRun {
    /// Its `--report` JSON.
    pub report: serde_json::Value,
    /// Wall time from spawn to reap, s (start-up and teardown included).
    pub wall_s: f64,
    /// User + system CPU time of the child and of the descendants it
    /// waited for (`wait4`'s rusage), s.
    pub cpu_s: f64,
    /// `ru_maxrss` of `wait4`: the largest peak resident set of the child
    /// or of any descendant it waited for, bytes (through a launcher: of
    /// one rank or of the launcher, not their sum).
    pub max_rss_bytes: u64,
}

impl ChildRun {
    /// A number field of the report, or an error naming `what` (the run).
    ///
    /// # Errors
    /// `BadInput` when the report has no such number.
    pub fn number(&self, field: &str, what: &str) -> Result<f64, CliError> {
        self.report[field]
            .as_f64()
            .ok_or_else(|| CliError::BadInput(format!("{what}: no {field} in its report")))
    }
}

/// The launcher's command line for `n` ranks: `launcher` with `{n}`
/// replaced, split on whitespace.
///
/// # Errors
/// `BadInput` when the launcher is empty.
pub fn launcher_argv(launcher: &str, n: usize) -> Result<Vec<String>, CliError> {
    let l: Vec<String> = launcher
        .replace("{n}", &n.to_string())
        .split_whitespace()
        .map(String::from)
        .collect();
    if l.is_empty() {
        return Err(CliError::BadInput("--launcher is empty".into()));
    }
    Ok(l)
}

/// Runs `[launcher…] air run ARGS --workers W --report REPORT` and waits
/// for it (stdout discarded, stderr kept for the error message).
///
/// # Errors
/// `BadInput` naming the command: it could not start, it failed (with its
/// stderr), or its report is unreadable.
pub fn run_air(
    air: &Path,
    launcher: Option<&[String]>,
    args: &[String],
    workers: usize,
    report: &Path,
) -> Result<ChildRun, CliError> {
    let mut cmd = match launcher {
        Some(l) => {
            let mut c = Command::new(&l[0]);
            c.args(&l[1..]).arg(air);
            c
        }
        None => Command::new(air),
    };
    cmd.arg("run")
        .args(args)
        .args(["--workers", &workers.to_string()])
        .arg("--report")
        .arg(report)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let shown = format!("{cmd:?}");
    let bad = |m: String| CliError::BadInput(format!("{shown}: {m}"));
    let _ = std::fs::remove_file(report);
    let t0 = Instant::now();
    let mut child = cmd.spawn().map_err(|e| bad(e.to_string()))?;
    // Drain stderr while the child runs (a full pipe would block it).
    let mut stderr = child.stderr.take().expect("stderr is piped");
    let drain = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = stderr.read_to_end(&mut s);
        s
    });
    let pid = child.id() as libc::pid_t;
    let (status, ru) = loop {
        let mut status: libc::c_int = 0;
        // SAFETY: a zeroed rusage is a valid out-parameter; `pid` is our
        // child, not yet reaped (std's `Child` is never waited on below, so
        // it does not reap it too), and `status`/`ru` outlive the call.
        let (r, ru) = unsafe {
            let mut ru: libc::rusage = std::mem::zeroed();
            (libc::wait4(pid, &mut status, 0, &mut ru), ru)
        };
        if r == pid {
            break (status, ru);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(bad(format!("wait4: {e}")));
        }
    };
    let wall_s = t0.elapsed().as_secs_f64();
    let err = drain.join().unwrap_or_default();
    drop(child);
    let code = if libc::WIFEXITED(status) {
        Some(libc::WEXITSTATUS(status))
    } else {
        None
    };
    if code != Some(0) {
        let how = match code {
            Some(c) => format!("exit code {c}"),
            None => format!("signal {}", libc::WTERMSIG(status)),
        };
        return Err(CliError::BadInput(format!(
            "{shown} failed ({how}): {}",
            String::from_utf8_lossy(&err).trim()
        )));
    }
    let report: serde_json::Value = serde_json::from_slice(
        &std::fs::read(report).map_err(|e| bad(format!("its report: {e}")))?,
    )
    .map_err(|e| bad(format!("its report: {e}")))?;
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 * 1e-6;
    Ok(ChildRun {
        report,
        wall_s,
        cpu_s: t(ru.ru_utime) + t(ru.ru_stime),
        // Linux: KiB.
        max_rss_bytes: (ru.ru_maxrss.max(0) as u64) * 1024,
    })
}

/// The median of `v` (the upper one of an even count); 0 when empty.
pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A private scratch directory for the runs' reports, named after `tag`
/// and this process; the caller removes it.
///
/// # Errors
/// `BadInput` when it cannot be created.
pub fn scratch_dir(tag: &str) -> Result<PathBuf, CliError> {
    let d = std::env::temp_dir().join(format!("air-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).map_err(|e| CliError::BadInput(format!("{}: {e}", d.display())))?;
    Ok(d)
}

#[cfg(test)]
mod tests {
    #[test]
    fn median_takes_the_middle_and_the_upper_of_two() {
        assert_eq!(super::median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(super::median(&[4.0, 1.0]), 4.0);
        assert_eq!(super::median(&[]), 0.0);
    }

    #[test]
    fn launcher_replaces_the_rank_count() {
        assert_eq!(
            super::launcher_argv("mpirun -np {n} --oversubscribe", 2).unwrap(),
            ["mpirun", "-np", "2", "--oversubscribe"]
        );
        assert!(super::launcher_argv("  ", 2).is_err());
    }
}
