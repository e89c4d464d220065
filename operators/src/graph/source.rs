//! A file source for user programs: rows of a CSV file, deserialized with
//! serde, each worker keeping every `workers`-th row (row `i` goes to
//! worker `i % workers`).

use air_runtime::dataflow::{Source, SourcePoll, Stats};
use serde::de::DeserializeOwned;
use std::fs::File;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

/// Rows of type `T` from a CSV file with a header line (columns matched to
/// `T`'s fields by name), this worker's share of them. A bad row stops the
/// job with an error naming the file, the line and the field; the rows
/// before it have been processed.
pub struct CsvSource<T> {
    path: PathBuf,
    reader: Option<csv::Reader<File>>,
    headers: Option<csv::StringRecord>,
    record: csv::StringRecord,
    row: u64,
    worker: u64,
    workers: u64,
    error: Option<String>,
    read: u64,
    _t: PhantomData<fn() -> T>,
}

impl<T: DeserializeOwned + Clone + 'static> CsvSource<T> {
    /// Worker `worker` of `workers`' share of the rows of `path`. The file
    /// is opened at the first poll; an error then stops the job.
    ///
    /// ```
    /// use air_operators::graph::*;
    /// use air_runtime::dataflow::run_graph;
    /// use air_runtime::JobConfig;
    /// use std::sync::{Arc, Mutex};
    ///
    /// #[derive(Clone, serde::Deserialize)]
    /// struct Click { user: u32, time_ms: u64 }
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("clicks.csv");
    /// std::fs::write(&path, "time_ms,user\n100,1\n200,2\n300,1\n").unwrap();
    /// let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
    /// let rows = Arc::new(Mutex::new(Vec::new()));
    /// let out = rows.clone();
    /// run_graph(&cfg, move |df| {
    ///     let (me, out) = (df.index(), out.clone());
    ///     df.source(CsvSource::<Click>::shard(&path, me, df.workers()))
    ///         .for_each(move |c| out.lock().unwrap().push((me, c.user, c.time_ms)));
    /// })
    /// .unwrap();
    /// let mut rows = rows.lock().unwrap().clone();
    /// rows.sort();
    /// // Row i at worker i % 2; columns matched to fields by name.
    /// assert_eq!(rows, [(0, 1, 100), (0, 1, 300), (1, 2, 200)]);
    /// ```
    pub fn shard(path: impl AsRef<Path>, worker: usize, workers: usize) -> Self {
        CsvSource {
            path: path.as_ref().to_path_buf(),
            reader: None,
            headers: None,
            record: csv::StringRecord::new(),
            row: 0,
            worker: worker as u64,
            workers: workers.max(1) as u64,
            error: None,
            read: 0,
            _t: PhantomData,
        }
    }

    fn fail(&mut self, e: impl std::fmt::Display) -> SourcePoll {
        self.error = Some(format!("{}: {e}", self.path.display()));
        SourcePoll::Done
    }
}

/// "line N, field F (name): what" from a csv error.
fn describe(e: &csv::Error, headers: Option<&csv::StringRecord>) -> String {
    let line = e.position().map(|p| p.line());
    let field = match e.kind() {
        csv::ErrorKind::Deserialize { err, .. } => err.field(),
        _ => None,
    };
    let mut s = String::new();
    if let Some(l) = line {
        s += &format!("line {l}");
    }
    if let Some(f) = field {
        let name = headers.and_then(|h| h.get(f as usize)).unwrap_or("?");
        s += &format!(", field {} ({name})", f + 1);
    }
    let what = match e.kind() {
        csv::ErrorKind::Deserialize { err, .. } => err.kind().to_string(),
        _ => e.to_string(),
    };
    if s.is_empty() {
        what
    } else {
        format!("{s}: {what}")
    }
}

impl<T: DeserializeOwned + Clone + Send + 'static> Source for CsvSource<T> {
    type Item = T;

    fn poll(&mut self, buf: &mut Vec<T>, max: usize) -> SourcePoll {
        buf.clear();
        if self.error.is_some() {
            return SourcePoll::Done;
        }
        if self.reader.is_none() {
            match csv::ReaderBuilder::new()
                .trim(csv::Trim::All)
                .from_path(&self.path)
            {
                Ok(mut r) => {
                    self.headers = r.headers().ok().cloned();
                    self.reader = Some(r);
                }
                Err(e) => return self.fail(e),
            }
        }
        let r = self.reader.as_mut().expect("opened");
        while buf.len() < max {
            match r.read_record(&mut self.record) {
                Ok(true) => {
                    let mine = self.row % self.workers == self.worker;
                    self.row += 1;
                    if !mine {
                        continue;
                    }
                    match self.record.deserialize::<T>(self.headers.as_ref()) {
                        Ok(v) => {
                            self.read += 1;
                            buf.push(v);
                        }
                        Err(e) => {
                            let d = describe(&e, self.headers.as_ref());
                            let line = self.record.position().map(|p| p.line());
                            let d = match (line, d.starts_with("line")) {
                                (Some(l), false) => format!("line {l}, {d}"),
                                _ => d,
                            };
                            return self.fail(d);
                        }
                    }
                }
                Ok(false) => return SourcePoll::Done,
                Err(e) => {
                    let d = describe(&e, self.headers.as_ref());
                    return self.fail(d);
                }
            }
        }
        SourcePoll::Ready
    }

    fn take_error(&mut self) -> Option<String> {
        self.error.take()
    }

    fn report(&mut self, stats: &mut Stats) {
        stats.add("csv_records", self.read);
    }
}
