//! A checkpoint taken at one worker count, resumed at another (issue 31,
//! "rescale on resume"): the runtime hands every component all old
//! workers' states, and refuses, before any worker starts, a graph with a
//! component that cannot take its share, naming it.

use air_runtime::dataflow::state::{read_u64, CheckpointConfig, Rescale};
use air_runtime::dataflow::{run_graph, Dataflow, Source, SourcePoll};
use air_runtime::JobConfig;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Numbers `me, me + W, me + 2W, … < N` of worker `me` of `W`; saves the
/// next one. With `rescales`, a rescaled worker takes over every old
/// worker's next number and stride (a list of runs).
struct Stride {
    runs: Vec<(u64, u64)>, // (next, step)
    rescales: bool,
}

const N: u64 = 20_000;

impl Source for Stride {
    type Item = u64;
    fn poll(&mut self, buf: &mut Vec<u64>, _max: usize) -> SourcePoll {
        buf.clear();
        let Some((next, step)) = self.runs.first_mut() else {
            return SourcePoll::Done;
        };
        for _ in 0..16 {
            if *next >= N {
                break;
            }
            buf.push(*next);
            *next += *step;
        }
        if *next >= N {
            self.runs.remove(0);
        }
        // Slow enough for barriers to fall between polls.
        std::thread::sleep(Duration::from_micros(200));
        SourcePoll::Ready
    }
    fn save(&self) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        for (n, s) in &self.runs {
            out.extend_from_slice(&n.to_le_bytes());
            out.extend_from_slice(&s.to_le_bytes());
        }
        Some(out)
    }
    fn restore(&mut self, state: &[u8]) -> Result<(), String> {
        self.runs = runs(state)?;
        Ok(())
    }
    fn rescales(&self) -> bool {
        self.rescales
    }
    fn rescale(&mut self, states: &[&[u8]], to: Rescale) -> Result<(), String> {
        let mut all = Vec::new();
        for s in states {
            all.extend(runs(s)?);
        }
        self.runs = all
            .into_iter()
            .enumerate()
            .filter(|(i, _)| i % to.workers == to.worker)
            .map(|(_, r)| r)
            .collect();
        Ok(())
    }
}

fn runs(state: &[u8]) -> Result<Vec<(u64, u64)>, String> {
    (0..state.len() / 16)
        .map(|i| Ok((read_u64(state, 16 * i)?, read_u64(state, 16 * i + 8)?)))
        .collect()
}

/// Runs the job at `workers` with checkpoints in `dir` every 5 ms; the
/// numbers its sinks saw.
fn run(dir: &Path, workers: usize, rescales: bool) -> Result<Vec<u64>, air_runtime::RuntimeError> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let cfg = JobConfig {
        workers,
        pin: false,
        barrier_every: Some(Duration::from_millis(5)),
        checkpoint: Some(CheckpointConfig {
            dir: dir.to_path_buf(),
            retained: 2,
            fresh: false,
            job: 1,
        }),
        ..JobConfig::default()
    };
    let s = seen.clone();
    run_graph(&cfg, move |df: &Dataflow| {
        let (me, w) = (df.index() as u64, df.workers() as u64);
        let s = s.clone();
        df.source(Stride {
            runs: vec![(me, w)],
            rescales,
        })
        .sink(move |x: u64| s.lock().unwrap().push(x));
    })?;
    let v = seen.lock().unwrap().clone();
    Ok(v)
}

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("air-rescale-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// A source that cannot rescale: the resume at 3 workers of a checkpoint
/// of 2 is refused before any worker starts, naming the source and both
/// counts; at 2 workers it resumes.
#[test]
fn a_component_that_cannot_rescale_is_refused_naming_it() {
    let dir = tmp("refused");
    let all = run(&dir, 2, false).unwrap();
    assert_eq!(all.len() as u64, N);
    let err = run(&dir, 3, false).unwrap_err().to_string();
    assert!(
        err.contains("checkpoint of 2 workers, this job has 3")
            && err.contains("Stride")
            && err.contains("--fresh"),
        "{err}"
    );
    // The same count resumes (from the checkpoint at its end: nothing is
    // left to read).
    assert!(run(&dir, 2, false).unwrap().len() < N as usize);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A source that rescales gets every old worker's state: resumed at 3
/// workers from the checkpoint a run of 2 took at its end, it goes on from
/// the old workers' positions (a few numbers after that checkpoint, each
/// once), not from the start of a worker of 3.
#[test]
fn a_source_that_rescales_gets_every_old_workers_state() {
    let dir = tmp("rescales");
    let first: BTreeSet<u64> = run(&dir, 2, true).unwrap().into_iter().collect();
    assert_eq!(first.len() as u64, N);
    let again = run(&dir, 3, true).unwrap();
    let distinct: BTreeSet<u64> = again.iter().copied().collect();
    assert_eq!(distinct.len(), again.len(), "a number read twice");
    assert!(
        (again.len() as u64) < N / 4,
        "a resume at 3 workers read {} of {N} numbers again",
        again.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
