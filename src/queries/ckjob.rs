//! What a checkpoint directory tells people about its job (the runtime
//! checks the same by signature, in every manifest and part):
//!
//! - `DIR/JOB.json`: the job's options as text and their signature
//!   (`driver::job_identity`), written when a job first uses DIR. A job
//!   with other options is refused before it starts, with the options that
//!   differ named (the runtime would only show two signatures).
//! - `DIR/FINISHED.json`: written when the job ended. A rerun of a
//!   finished job says that its output is complete (a resumed run then
//!   replays from the last checkpoint and commits nothing new).
//!
//! - `DIR/LOCK`: held (`flock`) by rank 0 of the job using DIR while it
//!   runs: a second job started on the same directory is refused (two jobs
//!   would delete each other's checkpoints). The lock goes with the
//!   process, however it ends; on a shared file system it holds as far as
//!   the file system's `flock` does (e.g. within a node).
//!
//! `--fresh` says how many checkpoints it deletes.

use super::common::CliError;
use std::path::{Path, PathBuf};

/// The job record of a checkpoint directory.
#[derive(Debug, Clone)]
pub struct JobRecord {
    dir: PathBuf,
    signature: u64,
    text: String,
    /// `DIR/LOCK`, held while this process runs the job.
    lock: std::sync::Arc<std::sync::Mutex<Option<std::fs::File>>>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct JobFile {
    signature: String,
    options: String,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct FinishedFile {
    signature: String,
    finished_unix_ms: u64,
}

impl JobRecord {
    /// The record of the job `text` (its options, as text) with
    /// `signature` in `dir`.
    pub fn new(dir: &Path, signature: u64, text: String) -> JobRecord {
        JobRecord {
            dir: dir.to_path_buf(),
            signature,
            text,
            lock: Default::default(),
        }
    }

    /// Takes `DIR/LOCK` for this process (released when it exits).
    ///
    /// # Errors
    /// Another process holds it: another job runs in DIR.
    fn take_lock(&self) -> Result<(), CliError> {
        use std::io::{Read, Seek, Write};
        use std::os::fd::AsRawFd;
        let mut held = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        if held.is_some() {
            return Ok(());
        }
        let unusable = |what: String| {
            CliError::BadInput(format!(
                "--checkpoint-dir {}: {what}; give a directory this job can create and write \
                 (on a cluster: on a file system every rank reaches)",
                self.dir.display()
            ))
        };
        if let Err(e) = std::fs::create_dir_all(&self.dir) {
            return Err(unusable(if self.dir.exists() {
                format!("not a directory ({e})")
            } else {
                format!("cannot create it: {e}")
            }));
        }
        let path = self.dir.join("LOCK");
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| unusable(format!("cannot write {}: {e}", path.display())))?;
        // SAFETY: flock on a file descriptor `f` owns and keeps open.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let mut who = String::new();
            let _ = f.read_to_string(&mut who);
            return Err(CliError::BadInput(format!(
                "--checkpoint-dir {}: in use by another running job ({}); two jobs in one \
                 directory would delete each other's checkpoints: wait for it to end, or use \
                 another --checkpoint-dir",
                self.dir.display(),
                who.trim()
            )));
        }
        let _ = f.set_len(0);
        let _ = f.rewind();
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let _ = write!(f, "pid {} on {}", std::process::id(), host.trim());
        *held = Some(f);
        Ok(())
    }

    /// Before the job runs: with `fresh`, says how many checkpoints go and
    /// forgets the old job; else refuses a directory of another job naming
    /// the options that differ, and says so if the job finished already.
    /// `root`: this process writes the files and speaks (rank 0).
    ///
    /// # Errors
    /// [`CliError::BadInput`]: DIR holds checkpoints of another job.
    pub fn check(&self, fresh: bool, root: bool) -> Result<(), CliError> {
        let job = self.dir.join("JOB.json");
        let finished = self.dir.join("FINISHED.json");
        if root {
            self.take_lock()?;
        }
        if fresh {
            if root {
                let n = checkpoints_in(&self.dir);
                if n > 0 {
                    air_runtime::say!(
                        "air: --fresh: deleting the {n} checkpoint{} in {} and starting over",
                        if n == 1 { "" } else { "s" },
                        self.dir.display()
                    );
                }
                let _ = std::fs::remove_file(&finished);
                self.write_job(&job);
            }
            return Ok(());
        }
        let mine = format!("{:016x}", self.signature);
        if let Some(old) = read_json::<JobFile>(&job) {
            if old.signature != mine {
                return Err(CliError::BadInput(format!(
                    "--checkpoint-dir {}: holds checkpoints of another job ({}); use another \
                     --checkpoint-dir, or --fresh to delete them and start over",
                    self.dir.display(),
                    differences(&old.options, &self.text)
                )));
            }
        } else if root && checkpoints_in(&self.dir) == 0 {
            self.write_job(&job);
        }
        if root {
            if let Some(f) = read_json::<FinishedFile>(&finished).filter(|f| f.signature == mine) {
                let ago = now_ms().saturating_sub(f.finished_unix_ms) / 1000;
                air_runtime::say!(
                    "air: this job finished {ago} s ago in {} (its output is complete): this \
                     run resumes from its last checkpoint and commits no new rows; --fresh \
                     runs it again",
                    self.dir.display()
                );
            }
        }
        Ok(())
    }

    /// After the job ended well (rank 0): `FINISHED.json`.
    pub fn finished(&self) {
        let f = FinishedFile {
            signature: format!("{:016x}", self.signature),
            finished_unix_ms: now_ms(),
        };
        write_json(&self.dir.join("FINISHED.json"), &f);
    }

    fn write_job(&self, path: &Path) {
        let f = JobFile {
            signature: format!("{:016x}", self.signature),
            options: self.text.clone(),
        };
        write_json(path, &f);
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// `chk-*` directories in `dir`.
fn checkpoints_in(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| {
        d.flatten()
            .filter(|e| {
                e.file_name()
                    .to_str()
                    .is_some_and(|n| n.starts_with("chk-"))
            })
            .count()
    })
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Option<T> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// Writes `value` to `path` through a temporary name (best effort: the
/// record is for people; the runtime's own checks do not need it).
fn write_json<T: serde::Serialize>(path: &Path, value: &T) {
    if std::fs::create_dir_all(path.parent().unwrap_or(Path::new("."))).is_err() {
        return;
    }
    let tmp = path.with_extension(format!("json.{}.tmp", std::process::id()));
    let Ok(text) = serde_json::to_vec_pretty(value) else {
        return;
    };
    if std::fs::write(&tmp, text).is_ok() && std::fs::rename(&tmp, path).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// The options of `then` and `now` (`Debug` text of parsed options) that
/// differ, as `NAME: OLD → NEW`, at most four; the two texts whole if
/// none can be told apart.
fn differences(then: &str, now: &str) -> String {
    let fields = |s: &str| -> Vec<String> {
        s.split([',', '{', '}'])
            .map(str::trim)
            .filter(|t| t.contains(": "))
            .map(str::to_owned)
            .collect()
    };
    let (a, b) = (fields(then), fields(now));
    let name = |t: &str| t.split(": ").next().unwrap_or("").to_owned();
    let mut out = Vec::new();
    for t in &b {
        if a.contains(t) {
            continue;
        }
        let n = name(t);
        let old = a.iter().find(|o| name(o) == n && !b.contains(o));
        let value = |s: &str| s.split_once(": ").map_or(s.to_owned(), |x| x.1.to_owned());
        out.push(match old {
            Some(o) => format!("{n}: {} → {}", value(o), value(t)),
            None => format!("{t} (new)"),
        });
    }
    if out.is_empty() {
        return format!("it ran `{then}`, this is `{now}`");
    }
    let more = out.len().saturating_sub(4);
    out.truncate(4);
    let mut s = format!("options that differ: {}", out.join(", "));
    if more > 0 {
        s += &format!(" and {more} more");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_name_the_options_that_changed() {
        let then =
            "wa WaArgs { gen: Gen { events: Some(30000000), keys: 100000 }, window_ms: 1000 }";
        let now = "wa WaArgs { gen: Gen { events: Some(40000000), keys: 100000 }, window_ms: 500 }";
        let d = differences(then, now);
        assert_eq!(
            d,
            "options that differ: events: Some(30000000) → Some(40000000), window_ms: 1000 → 500"
        );
        let same = differences("q5", "q6");
        assert!(same.contains("`q5`") && same.contains("`q6`"), "{same}");
    }

    #[test]
    fn another_job_is_refused_and_a_finished_one_is_let_through() {
        let dir = tempfile::tempdir().unwrap();
        // Each record stands for one process: dropped, its lock goes.
        let a = || JobRecord::new(dir.path(), 1, "q { events: Some(1) }".into());
        let b = || JobRecord::new(dir.path(), 2, "q { events: Some(2) }".into());
        a().check(false, true).unwrap();
        assert!(dir.path().join("JOB.json").exists());
        let e = b().check(false, true).unwrap_err().to_string();
        assert!(e.contains("events: Some(1) → Some(2)"), "{e}");
        // The same job again, finished: let through (it only says so).
        a().finished();
        assert!(dir.path().join("FINISHED.json").exists());
        a().check(false, true).unwrap();
        // --fresh forgets the old job.
        b().check(true, true).unwrap();
        assert!(!dir.path().join("FINISHED.json").exists());
        b().check(false, true).unwrap();
        assert!(a().check(false, true).is_err());
        // While one process runs the job, another cannot use the directory.
        let running = b();
        running.check(false, true).unwrap();
        let e = b().check(false, true).unwrap_err().to_string();
        assert!(
            e.contains("in use by another running job") && e.contains("pid"),
            "{e}"
        );
        drop(running);
        b().check(false, true).unwrap();
    }

    /// A directory that cannot be made (under a file) or is a file is
    /// refused as bad input (exit 2), naming it and why.
    #[test]
    fn an_unusable_directory_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        let e = JobRecord::new(&file, 1, "q".into())
            .check(false, true)
            .unwrap_err();
        assert!(matches!(e, CliError::BadInput(_)), "{e:?}");
        let e = e.to_string();
        assert!(
            e.contains(&format!("{}: not a directory", file.display())),
            "{e}"
        );
        let under = file.join("ck");
        let e = JobRecord::new(&under, 1, "q".into())
            .check(false, true)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("{}: cannot create it", under.display())),
            "{e}"
        );
    }
}
