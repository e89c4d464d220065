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
//! [`Stream::collect`]: air_runtime::dataflow::Stream::collect

use super::fixed::{Fixed, FixedJson};
use air_runtime::dataflow::{Sink, Stats};
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
    /// With checkpoints: rows are held until the checkpoint that covers
    /// them is complete.
    tx: Option<Commits>,
}

/// Rows of checkpoints, as (checkpoint id, bytes), oldest first.
type Epochs = Vec<(u64, Vec<u8>)>;

/// What a sink's commit record says ([`Commits`]): the newest checkpoint
/// whose rows are in the output, the output's length then, and whether
/// the job ended (every row is out).
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
struct Committed {
    epoch: u64,
    bytes: u64,
    #[serde(rename = "final")]
    done: bool,
}

/// Exactly-once output of a line sink in a job with checkpoints (a
/// two-phase commit): the rows written between barriers `n − 1` and `n`
/// are held, saved with checkpoint `n` (they are the sink's state), and
/// appended to the output once checkpoint `n` is complete; a commit record
/// (`DIR/commit-<output>-w<worker>.json`, written to a temporary name,
/// fsynced, renamed) says up to which checkpoint the output holds rows and
/// its length then. On resume the output is cut back to that length and
/// the rows of the checkpoints after it (saved in the checkpoint resumed
/// from) are appended: a row is in the output once, whenever the job was
/// killed. Standard output cannot be cut back: rows are printed at commit,
/// and a kill between a print and its record prints those rows again.
struct Commits {
    ck: std::sync::Arc<air_runtime::dataflow::Checkpoints>,
    record: PathBuf,
    /// Rows since the last barrier.
    current: Vec<u8>,
    /// Rows of checkpoints not yet committed, oldest first.
    sealed: std::collections::VecDeque<(u64, Vec<u8>)>,
    committed: Committed,
    /// The job ended before (resumed after its end): rows are out already.
    drop_all: bool,
    /// A commit record could not be written (said once).
    record_failed: bool,
}

impl Commits {
    /// Encodes what the output held at the barrier (the newest committed
    /// checkpoint and the output's length then) and the sealed epochs:
    /// `[epoch, bytes, count, (id, len, bytes…)…]`.
    fn state(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&self.committed.epoch.to_le_bytes());
        out.extend_from_slice(&self.committed.bytes.to_le_bytes());
        out.extend_from_slice(&(self.sealed.len() as u64).to_le_bytes());
        for (id, b) in &self.sealed {
            out.extend_from_slice(&id.to_le_bytes());
            out.extend_from_slice(&(b.len() as u64).to_le_bytes());
            out.extend_from_slice(b);
        }
        out
    }

    /// What [`Commits::state`] encoded: (committed then, sealed epochs).
    fn parse(state: &[u8]) -> Result<(Committed, Epochs), String> {
        use air_runtime::dataflow::state::read_u64;
        let committed = Committed {
            epoch: read_u64(state, 0)?,
            bytes: read_u64(state, 8)?,
            done: false,
        };
        let n = read_u64(state, 16)?;
        let mut at = 24usize;
        let mut out = Vec::new();
        for _ in 0..n {
            let id = read_u64(state, at)?;
            let len = read_u64(state, at + 8)? as usize;
            at += 16;
            let b = state
                .get(at..at.saturating_add(len))
                .ok_or("a sink's saved rows are cut short")?;
            out.push((id, b.to_vec()));
            at += len;
        }
        Ok((committed, out))
    }

    fn read_record(&self) -> Result<Committed, String> {
        match std::fs::read(&self.record) {
            Ok(b) => serde_json::from_slice(&b)
                .map_err(|e| format!("{}: not a commit record: {e}", self.record.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Committed::default()),
            Err(e) => Err(format!("cannot read {}: {e}", self.record.display())),
        }
    }

    fn write_record(&mut self, c: Committed) -> Result<(), String> {
        let tmp = self
            .record
            .with_extension(format!("json.{}.tmp", std::process::id()));
        let body = serde_json::to_vec(&c).expect("a record serializes");
        let r = (|| {
            let mut f = File::create(&tmp)?;
            f.write_all(&body)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.record)
        })();
        if let Err(e) = r {
            let _ = std::fs::remove_file(&tmp);
            return Err(format!("writing {}: {e}", self.record.display()));
        }
        self.committed = c;
        Ok(())
    }
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

    /// Joins the job's checkpoints, if it has any (at `bind`).
    fn bind_checkpoints(&mut self) {
        let Some(ck) = air_runtime::dataflow::state::checkpoints() else {
            return;
        };
        let record = self.record_of(&ck.dir(), self.worker);
        if ck.resumed.is_none() {
            // A fresh start: an old record says nothing about this run.
            let _ = std::fs::remove_file(&record);
        }
        self.tx = Some(Commits {
            ck,
            record,
            current: Vec::new(),
            sealed: Default::default(),
            committed: Committed::default(),
            drop_all: false,
            record_failed: false,
        });
    }

    /// Barrier `id`: the rows since the last one belong to checkpoint
    /// `id`; returns what the sink saves (every epoch not yet committed).
    fn barrier(&mut self, id: u64) -> Result<Vec<u8>, String> {
        self.hold();
        let Some(tx) = self.tx.as_mut() else {
            return Ok(Vec::new());
        };
        let rows = std::mem::take(&mut tx.current);
        tx.sealed.push_back((id, rows));
        let state = tx.state();
        self.commit_ready(false)?;
        Ok(state)
    }

    /// On resume: the output back to what it held at the barrier of the
    /// checkpoint resumed from (its length then is in `state`: commits
    /// after it, of newer checkpoints than the one resumed from after a
    /// fallback, are cut off), then the rows of that checkpoint not yet
    /// committed then. Standard output cannot be cut: the epochs its record
    /// says were printed are skipped.
    fn restore(&mut self, state: &[u8]) -> Result<(), String> {
        let Some(tx) = self.tx.as_mut() else {
            return Ok(());
        };
        let record = match tx.read_record() {
            Ok(r) => r,
            // The saved state says what the output held: a damaged record
            // is not needed (it is when the sink had ended: an empty state).
            Err(e) if !state.is_empty() => {
                air_runtime::say!(
                    "air: {e}; ignored (the output is cut back to what the checkpoint saved)"
                );
                Committed::default()
            }
            Err(e) => return Err(e),
        };
        // An empty state: the sink had ended (closed, everything committed
        // as its record says) when the checkpoint was taken.
        let (then, epochs) = if state.is_empty() {
            (record, Vec::new())
        } else {
            Commits::parse(state)?
        };
        let out_before = match self.target {
            Target::Stdout => record.bytes,
            Target::Path(_) => then.bytes,
        };
        if out_before > 0 || epochs.iter().any(|(_, rows)| !rows.is_empty()) {
            // The header went out (or is saved) with the first rows.
            self.buf.clear();
            self.header = None;
        }
        if record.done {
            tx.drop_all = true;
            return Ok(());
        }
        let printed = match self.target {
            Target::Stdout => record.epoch,
            Target::Path(_) => then.epoch,
        };
        tx.committed = match self.target {
            Target::Stdout => record,
            Target::Path(_) => then,
        };
        tx.sealed = epochs.into_iter().filter(|(id, _)| *id > printed).collect();
        // The output is cut back at the first commit, even of no rows.
        let cut = matches!(self.target, Target::Path(_));
        if cut && tx.sealed.is_empty() {
            let path = self.path();
            let tx = self.tx.as_mut().expect("checkpoints");
            if let Some(p) = path.filter(|p| p.exists() || tx.committed.bytes > 0) {
                cut_back(&p, tx.committed.bytes)?;
            }
            return Ok(());
        }
        self.commit_ready(true)
    }

    /// Worker `worker`'s commit record of this output in checkpoint
    /// directory `dir`: `commit-<FNV-1a of the output's name>-w<worker>.json`.
    fn record_of(&self, dir: &std::path::Path, worker: usize) -> PathBuf {
        let name = match &self.target {
            Target::Stdout => "stdout".to_string(),
            Target::Path(p) => p.display().to_string(),
        };
        let tag = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
        });
        dir.join(format!("commit-{tag:016x}-w{worker:05}.json"))
    }

    /// On a resume at another worker count: worker `w` takes old worker
    /// `w`'s state (its output file is the same); a worker that did not
    /// exist starts with no output. An old worker that no longer exists
    /// must have written no row (one file per worker cannot be merged into
    /// another's): rows after [`Stream::collect`] all go to worker 0.
    ///
    /// [`Stream::collect`]: air_runtime::dataflow::Stream::collect
    fn rescale(
        &mut self,
        states: &[&[u8]],
        to: air_runtime::dataflow::state::Rescale,
    ) -> Result<(), String> {
        let Some(tx) = self.tx.as_ref() else {
            return Ok(());
        };
        for (w, state) in states.iter().enumerate().skip(to.workers) {
            let rows = if state.is_empty() {
                // Ended: its record says what its output holds.
                std::fs::read(self.record_of(&tx.ck.dir(), w))
                    .ok()
                    .and_then(|b| serde_json::from_slice::<Committed>(&b).ok())
                    .is_some_and(|c| c.bytes > 0)
            } else {
                let (then, epochs) = Commits::parse(state)?;
                then.bytes > 0 || epochs.iter().any(|(_, r)| !r.is_empty())
            };
            if rows {
                return Err(format!(
                    "worker {w} of the {} the checkpoint was taken by wrote rows to its own \
                     output file, which no worker of {} would go on with: resume with at least \
                     {} workers",
                    to.from,
                    to.workers,
                    w + 1
                ));
            }
        }
        match states.get(to.worker) {
            Some(state) => self.restore(state),
            None => {
                // A new worker: no output of an earlier run is its own.
                let _ = std::fs::remove_file(&tx.record);
                Ok(())
            }
        }
    }

    /// Moves the buffered rows into the current epoch (checkpoints).
    fn hold(&mut self) {
        if let Some(tx) = self.tx.as_mut() {
            if !self.buf.is_empty() {
                if let Some(h) = self.header.take() {
                    tx.current.extend_from_slice(&h);
                }
                tx.current.append(&mut self.buf);
            }
        }
    }

    /// Commits the sealed epochs whose checkpoints are complete (`all`:
    /// every one), oldest first.
    fn commit_ready(&mut self, all: bool) -> Result<(), String> {
        loop {
            let Some(tx) = self.tx.as_mut() else {
                return Ok(());
            };
            let Some(&(id, _)) = tx.sealed.front() else {
                return Ok(());
            };
            if !all && !tx.ck.is_complete(id) {
                return Ok(());
            }
            let (id, rows) = tx.sealed.pop_front().expect("front");
            self.append_committed(id, &rows, false)?;
        }
    }

    /// Appends `rows` to the output as checkpoint `id`'s, durably, and
    /// records it.
    fn append_committed(&mut self, id: u64, rows: &[u8], done: bool) -> Result<(), String> {
        let path = self.path();
        let tx = self.tx.as_mut().expect("checkpoints");
        if tx.drop_all || (rows.is_empty() && !done) {
            // Nothing to add: the record may lag (a resume appends
            // nothing for the checkpoints in between).
            return Ok(());
        }
        if rows.is_empty() && self.file.is_none() && tx.committed.bytes == 0 && self.worker != 0 {
            // No row ever reached this worker's sink: no file for it.
            return Ok(());
        }
        let at = tx.committed.bytes;
        match &self.target {
            Target::Stdout => {
                let out = std::io::stdout();
                let mut lock = out.lock();
                lock.write_all(rows)
                    .and_then(|_| lock.flush())
                    .map_err(|e| format!("writing rows to stdout: {e}"))?;
            }
            Target::Path(_) => {
                let path = path.expect("a file");
                if self.file.is_none() {
                    // Cut back to what was committed (a resumed job), or
                    // to nothing (a fresh one).
                    self.file = Some(cut_back(&path, at)?);
                }
                let f = self.file.as_mut().expect("opened");
                use std::io::Seek;
                f.seek(std::io::SeekFrom::Start(at))
                    .and_then(|_| f.write_all(rows))
                    .and_then(|_| f.sync_data())
                    .map_err(|e| format!("writing rows to {}: {e}", path.display()))?;
            }
        }
        let c = Committed {
            epoch: id,
            bytes: at + rows.len() as u64,
            done,
        };
        let tx = self.tx.as_mut().expect("checkpoints");
        if let Err(e) = tx.write_record(c) {
            // The rows are in the output (fsynced); a resumed file is cut
            // back by what its checkpoint saved, not by the record, so the
            // job runs on (standard output may print these rows again).
            if !tx.record_failed {
                tx.record_failed = true;
                air_runtime::say!("air: {e}; the job runs on");
            }
            tx.committed = c;
        }
        Ok(())
    }

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
            self.hold();
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

/// Opens `path` (created if missing) and cuts it back to `len` bytes.
///
/// # Errors
/// It cannot be opened, or holds fewer than `len` bytes (changed or
/// renamed since the checkpoint).
fn cut_back(path: &std::path::Path, len: u64) -> Result<File, String> {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let have = f
        .metadata()
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?
        .len();
    if have < len {
        return Err(format!(
            "{} holds {have} bytes, the checkpoint says {len} were committed to it: the output \
             was changed or renamed since (a resumed job goes on with the output it wrote: give \
             the same --out, or copy that file to the new name first; --fresh starts over)",
            path.display()
        ));
    }
    f.set_len(len)
        .map_err(|e| format!("cannot cut {} back: {e}", path.display()))?;
    Ok(f)
}

impl Lines {
    /// End of stream with checkpoints. A job that ended (not stopped):
    /// every row is final, so every epoch is committed now and the record
    /// says so. A stopped job: only what complete checkpoints cover; the
    /// rest is recomputed when it resumes.
    fn close_checkpointed(&mut self) -> Result<(), String> {
        self.hold();
        if air_runtime::stop::requested() {
            return self.commit_ready(false);
        }
        if self.worker == 0 {
            if let Some(h) = self.header.take() {
                // Worker 0 leaves a file even without rows.
                let tx = self.tx.as_mut().expect("checkpoints");
                let mut b = h;
                b.append(&mut tx.current);
                tx.current = b;
            }
        }
        self.commit_ready(true)?;
        let tx = self.tx.as_mut().expect("checkpoints");
        let rows = std::mem::take(&mut tx.current);
        let id = tx.committed.epoch.saturating_add(1);
        if self.worker == 0 || !rows.is_empty() || self.file.is_some() {
            self.append_committed(id, &rows, true)?;
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
