//! Sinks that stream: CSV and JSON-lines rows written as they arrive (a
//! window's rows when it fires), made visible at every flush interval, to a
//! file or to stdout. Nothing is kept after it is written.
//!
//! A sink runs at every worker. After [`Stream::collect`] only worker 0
//! gets rows, so one process writes one file. Otherwise, worker 0 writes the
//! named file and any other worker that gets rows writes `NAME.w<index>`.
//!
//! Floats (`f32`, `f64`) are written by default as the shortest text that
//! reads back as the same number (`0.1 + 0.2` as `0.30000000000000004`,
//! `2.0` as `2.0` in CSV and JSON); `float_precision(d)` writes every float
//! with `d` decimals instead ([`Csv::float_precision`],
//! [`JsonLines::float_precision`]).
//!
//! With checkpoints, rows become visible only once the checkpoint that
//! covers them is complete (exactly-once output: [`commit`]).
//!
//! [`Stream::collect`]: air_runtime::dataflow::Stream::collect

mod commit;

use super::fixed::{Fixed, FixedJson};
use air_runtime::dataflow::{Sink, Stats};
use commit::Commits;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

/// Where rows go.
#[derive(Debug, Clone)]
enum Target {
    Stdout,
    Path(PathBuf),
}

/// Rows as text lines, buffered whole and written at every flush.
struct Lines {
    target: Target,
    worker: usize,
    file: Option<File>,
    buf: Vec<u8>,
    header: Option<Vec<u8>>,
    rows: u64,
    /// With checkpoints: rows go to a pending file and reach the output
    /// once the checkpoint that covers them is complete.
    tx: Option<Commits>,
}

impl Lines {
    fn new(target: Target) -> Self {
        Lines {
            target,
            worker: 0,
            file: None,
            buf: Vec::with_capacity(64 * 1024),
            header: None,
            rows: 0,
            tx: None,
        }
    }

    /// The output file of this worker: the named file at worker 0,
    /// `NAME.w<worker>` at the others; `None` for standard output.
    fn path(&self) -> Option<PathBuf> {
        match &self.target {
            Target::Stdout => None,
            Target::Path(p) if self.worker == 0 => Some(p.clone()),
            Target::Path(p) => {
                let mut s = p.clone().into_os_string();
                s.push(format!(".w{}", self.worker));
                Some(PathBuf::from(s))
            }
        }
    }

    fn open(&mut self) -> Result<(), String> {
        if self.file.is_some() {
            return Ok(());
        }
        if let Some(p) = self.path() {
            let f = File::create(&p).map_err(|e| format!("cannot create {}: {e}", p.display()))?;
            self.file = Some(f);
            if let Some(h) = self.header.take() {
                let mut b = h;
                b.extend_from_slice(&self.buf);
                self.buf = b;
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), String> {
        if self.tx.is_some() {
            self.hold()?;
            return self.commit_ready(false);
        }
        if self.buf.is_empty() {
            return Ok(());
        }
        match &self.target {
            Target::Stdout => {
                let out = std::io::stdout();
                let mut lock = out.lock();
                lock.write_all(&self.buf)
                    .and_then(|_| lock.flush())
                    .map_err(|e| format!("writing rows to stdout: {e}"))?;
            }
            Target::Path(_) => {
                self.open()?;
                let path = self.path();
                let f = self.file.as_mut().expect("opened");
                f.write_all(&self.buf).map_err(|e| {
                    format!(
                        "writing rows to {}: {e}",
                        path.map(|p| p.display().to_string()).unwrap_or_default()
                    )
                })?;
            }
        }
        self.buf.clear();
        Ok(())
    }

    fn close(&mut self) -> Result<(), String> {
        if self.tx.is_some() {
            return self.close_checkpointed();
        }
        // Worker 0 leaves a file even without rows (a header only, or empty).
        if self.worker == 0 && matches!(self.target, Target::Path(_)) {
            self.open()?;
        }
        self.flush()?;
        if let Some(f) = self.file.as_mut() {
            f.sync_data().ok();
        }
        Ok(())
    }
}

/// CSV rows (the `csv` crate; a row is any `serde::Serialize` whose fields
/// are scalars or tuples of scalars). Floats as the shortest text that
/// reads back as the same number, unless [`Csv::float_precision`].
///
/// ```
/// use air_operators::graph::*;
/// use air_runtime::dataflow::{run_graph, VecSource};
/// use air_runtime::JobConfig;
///
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("clicks.csv");
/// let p = path.clone();
/// let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
/// run_graph(&cfg, move |df| {
///     let rows: Vec<(u32, u64)> =
///         [(1, 10), (2, 20)].into_iter().skip(df.index()).step_by(2).collect();
///     df.source(VecSource::new(rows))
///         .collect() // one writer, one file
///         .sink(Csv::to_path(p.clone()).header(&["user", "clicks"]));
/// })
/// .unwrap();
/// let text = std::fs::read_to_string(&path).unwrap();
/// let mut lines: Vec<&str> = text.lines().collect();
/// lines[1..].sort();
/// assert_eq!(lines, ["user,clicks", "1,10", "2,20"]);
/// ```
pub struct Csv {
    lines: Lines,
    w: csv::Writer<Shared>,
    out: Shared,
    /// Decimals of every float, if fixed.
    digits: Option<usize>,
}

/// A byte buffer the CSV writer writes into and the sink drains.
#[derive(Clone, Default)]
struct Shared(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn csv_writer(out: &Shared) -> csv::Writer<Shared> {
    csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(out.clone())
}

impl Csv {
    /// Rows to the file `path` (created, truncated, when the first row
    /// comes or at the end).
    pub fn to_path(path: impl Into<PathBuf>) -> Self {
        let out = Shared::default();
        Csv {
            lines: Lines::new(Target::Path(path.into())),
            w: csv_writer(&out),
            out,
            digits: None,
        }
    }

    /// Rows to standard output (whole lines; other output may come between).
    ///
    /// ```
    /// use air_operators::graph::*;
    /// use air_runtime::dataflow::{run_graph, VecSource};
    /// use air_runtime::JobConfig;
    ///
    /// let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
    /// let out = run_graph(&cfg, |df| {
    ///     df.source(VecSource::new(vec![(df.index() as u32, 10u64)]))
    ///         .collect()
    ///         .sink(Csv::stdout().header(&["worker", "value"])); // prints 3 lines
    /// })
    /// .unwrap();
    /// assert_eq!(out.stats.get("csv_rows"), 2);
    /// ```
    pub fn stdout() -> Self {
        let out = Shared::default();
        Csv {
            lines: Lines::new(Target::Stdout),
            w: csv_writer(&out),
            out,
            digits: None,
        }
    }

    /// A first line naming the columns.
    pub fn header<S: AsRef<str>>(mut self, names: &[S]) -> Self {
        let mut h = names
            .iter()
            .map(|n| n.as_ref())
            .collect::<Vec<_>>()
            .join(",")
            .into_bytes();
        h.push(b'\n');
        match self.lines.target {
            Target::Stdout => self.lines.buf.extend_from_slice(&h),
            Target::Path(_) => self.lines.header = Some(h),
        }
        self
    }

    /// Every float (`f32`, `f64`, wherever it is in a row) written with
    /// `digits` decimals, rounded to nearest (`6`: `0.1 + 0.2` as
    /// `0.300000`, `2.0` as `2.000000`; `0`: `2.75` as `3`, without a
    /// point); NaN and infinities as `NaN`, `inf` and `-inf`. Without it,
    /// floats are the shortest text that reads back as the same number.
    ///
    /// ```
    /// use air_operators::graph::*;
    /// use air_runtime::dataflow::{run_graph, VecSource};
    /// use air_runtime::JobConfig;
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("latency.csv");
    /// let p = path.clone();
    /// let cfg = JobConfig { workers: 1, pin: false, ..JobConfig::default() };
    /// run_graph(&cfg, move |df| {
    ///     // (url, mean latency ms)
    ///     df.source(VecSource::new(vec![("/a".to_string(), 0.1 + 0.2), ("/b".into(), 2.0)]))
    ///         .sink(Csv::to_path(p.clone()).header(&["url", "mean_ms"]).float_precision(6));
    /// })
    /// .unwrap();
    /// let text = std::fs::read_to_string(&path).unwrap();
    /// assert_eq!(text, "url,mean_ms\n/a,0.300000\n/b,2.000000\n");
    /// ```
    pub fn float_precision(mut self, digits: usize) -> Self {
        self.digits = Some(digits);
        self
    }
}

impl<T: serde::Serialize> Sink<T> for Csv {
    fn bind(&mut self, worker: usize) {
        self.lines.worker = worker;
        if worker != 0 && matches!(self.lines.target, Target::Stdout) {
            // One header on stdout.
            self.lines.buf.clear();
        }
        self.lines.bind_checkpoints();
    }

    fn checkpoints(&self) -> bool {
        true
    }

    fn barrier(&mut self, id: u64) -> Result<Vec<u8>, String> {
        self.w.flush().map_err(|e| format!("CSV row: {e}"))?;
        self.lines.buf.append(&mut self.out.0.borrow_mut());
        self.lines.barrier(id)
    }

    fn restore(&mut self, state: &[u8]) -> Result<(), String> {
        self.lines.restore(state)
    }

    fn rescales(&self) -> bool {
        true
    }

    fn rescale(
        &mut self,
        states: &[&[u8]],
        to: air_runtime::dataflow::state::Rescale,
    ) -> Result<(), String> {
        self.lines.rescale(states, to)
    }

    fn write(&mut self, row: T) -> Result<(), String> {
        match self.digits {
            None => self.w.serialize(&row),
            Some(digits) => self.w.serialize(Fixed {
                value: &row,
                digits,
            }),
        }
        .map_err(|e| format!("CSV row: {e}"))?;
        self.lines.rows += 1;
        if self.out.0.borrow().len() >= 1 << 20 {
            Sink::<T>::flush(self)?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), String> {
        self.w.flush().map_err(|e| format!("CSV row: {e}"))?;
        self.lines.buf.append(&mut self.out.0.borrow_mut());
        self.lines.flush()
    }

    fn close(&mut self) -> Result<(), String> {
        Sink::<T>::flush(self)?;
        self.lines.close()
    }

    fn report(&mut self, stats: &mut Stats) {
        stats.add("csv_rows", self.lines.rows);
    }
}

/// JSON lines: one `serde_json` object (or value) per line. Floats as the
/// shortest text that reads back as the same number, unless
/// [`JsonLines::float_precision`]; NaN and infinities as `null` (JSON has
/// no such numbers).
///
/// Without [`collect`](air_runtime::dataflow::Stream::collect) first, each
/// worker with rows writes its own file:
///
/// ```
/// use air_operators::graph::*;
/// use air_runtime::dataflow::{run_graph, VecSource};
/// use air_runtime::JobConfig;
///
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("rows.jsonl");
/// let p = path.clone();
/// let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
/// run_graph(&cfg, move |df| {
///     let w = df.index() as u64;
///     df.source(VecSource::new(vec![Windowed { start: 0, end: 10, key: w, value: 10 * w }]))
///         .sink(JsonLines::to_path(p.clone()));
/// })
/// .unwrap();
/// let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap();
/// assert_eq!(read(&path), "{\"start\":0,\"end\":10,\"key\":0,\"value\":0}\n");
/// let w1 = dir.path().join("rows.jsonl.w1"); // worker 1's rows
/// assert_eq!(read(&w1), "{\"start\":0,\"end\":10,\"key\":1,\"value\":10}\n");
/// ```
pub struct JsonLines {
    lines: Lines,
    /// Decimals of every float, if fixed.
    digits: Option<usize>,
}

impl JsonLines {
    /// Rows to the file `path`.
    pub fn to_path(path: impl Into<PathBuf>) -> Self {
        JsonLines {
            lines: Lines::new(Target::Path(path.into())),
            digits: None,
        }
    }

    /// Rows to standard output.
    ///
    /// ```
    /// use air_operators::graph::*;
    /// use air_runtime::dataflow::{run_graph, VecSource};
    /// use air_runtime::JobConfig;
    ///
    /// let cfg = JobConfig { workers: 1, pin: false, ..JobConfig::default() };
    /// let out = run_graph(&cfg, |df| {
    ///     df.source(VecSource::new(vec![(1u32, "a"), (2, "b")]))
    ///         .sink(JsonLines::stdout()); // prints [1,"a"] and [2,"b"]
    /// })
    /// .unwrap();
    /// assert_eq!(out.stats.get("json_rows"), 2);
    /// ```
    pub fn stdout() -> Self {
        JsonLines {
            lines: Lines::new(Target::Stdout),
            digits: None,
        }
    }

    /// Every finite float (`f32`, `f64`, wherever it is in a row) written
    /// as a JSON number with `digits` decimals, rounded to nearest (`3`:
    /// `0.1 + 0.2` as `0.300`, `2.0` as `2.000`; `0`: `2.75` as `3`); NaN
    /// and infinities stay `null`. Without it, floats are the shortest
    /// text that reads back as the same number.
    ///
    /// ```
    /// use air_operators::graph::*;
    /// use air_runtime::dataflow::{run_graph, VecSource};
    /// use air_runtime::JobConfig;
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("latency.jsonl");
    /// let p = path.clone();
    /// let cfg = JobConfig { workers: 1, pin: false, ..JobConfig::default() };
    /// run_graph(&cfg, move |df| {
    ///     let row = Windowed { start: 0, end: 1_000, key: "/a", value: (0.1 + 0.2, 2.0f32) };
    ///     df.source(VecSource::new(vec![row])).sink(JsonLines::to_path(p.clone()).float_precision(3));
    /// })
    /// .unwrap();
    /// let text = std::fs::read_to_string(&path).unwrap();
    /// assert_eq!(text, "{\"start\":0,\"end\":1000,\"key\":\"/a\",\"value\":[0.300,2.000]}\n");
    /// ```
    pub fn float_precision(mut self, digits: usize) -> Self {
        self.digits = Some(digits);
        self
    }
}

impl<T: serde::Serialize> Sink<T> for JsonLines {
    fn bind(&mut self, worker: usize) {
        self.lines.worker = worker;
        self.lines.bind_checkpoints();
    }

    fn checkpoints(&self) -> bool {
        true
    }

    fn barrier(&mut self, id: u64) -> Result<Vec<u8>, String> {
        self.lines.barrier(id)
    }

    fn restore(&mut self, state: &[u8]) -> Result<(), String> {
        self.lines.restore(state)
    }

    fn rescales(&self) -> bool {
        true
    }

    fn rescale(
        &mut self,
        states: &[&[u8]],
        to: air_runtime::dataflow::state::Rescale,
    ) -> Result<(), String> {
        self.lines.rescale(states, to)
    }

    fn write(&mut self, row: T) -> Result<(), String> {
        match self.digits {
            None => serde_json::to_writer(&mut self.lines.buf, &row),
            Some(digits) => {
                let f = FixedJson { digits };
                let mut s = serde_json::Serializer::with_formatter(&mut self.lines.buf, f);
                row.serialize(&mut s)
            }
        }
        .map_err(|e| format!("JSON row: {e}"))?;
        self.lines.buf.push(b'\n');
        self.lines.rows += 1;
        if self.lines.buf.len() >= 1 << 20 {
            self.lines.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), String> {
        self.lines.flush()
    }

    fn close(&mut self) -> Result<(), String> {
        self.lines.close()
    }

    fn report(&mut self, stats: &mut Stats) {
        stats.add("json_rows", self.lines.rows);
    }
}
