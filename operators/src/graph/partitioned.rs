//! A partitioned file sink: rows written as CSV into directories chosen by
//! a partition function (`dt=2026-12-01/hm=18:40`), every worker writing
//! its own part file per open partition, each partition closed and
//! committed once the watermark passes its end (plus a commit delay). The
//! Flink filesystem connector's streaming sink with a partition-time
//! commit trigger and a success-file policy, without a coordinator.
//!
//! Layout under the output directory `DIR`, for the worker named `NAME`
//! (`r<rank>-w<local worker>`, see [`PartitionedCsv::workers_per_rank`]):
//!
//! - `DIR/<partition>/part-NAME.csv`: the worker's rows of that partition
//!   (no exchange: a row stays at the worker that made it). Created when
//!   the worker's first row of the partition comes; appended to at every
//!   flush interval.
//! - `DIR/<partition>/_SUCCESS.NAME`: the worker's commit marker of that
//!   partition, written (atomically: a temporary file renamed) after its
//!   part file was flushed, synced and closed, once the worker's watermark
//!   reached the partition's end plus the commit delay. It holds one line,
//!   `rows=<N> bytes=<B>`, the part file's rows and length.
//! - `DIR/_WATERMARK.NAME`: the worker's progress, rewritten (atomically)
//!   when it advanced, at the first flush interval after a commit, else at
//!   most once a second, and at the end:
//!   `watermark_ms=<W> workers=<N>\n`. Every partition ending (plus the
//!   delay) at or before `W` that the worker wrote to is committed; `N` is
//!   the number of workers in the job (every rank). At the end of the
//!   stream `W` is `18446744073709551615` (`u64::MAX`) unless the job was
//!   stopped.
//!
//! What a reader must check (there is no single `_SUCCESS` file: no worker
//! knows which partitions the others wrote to without a coordinator):
//! a partition ending at `E` is complete once every one of the job's `N`
//! workers has a `_WATERMARK` file at the root holding a watermark of at
//! least `E` plus the commit delay; its rows are then the part files that
//! have their `_SUCCESS.NAME` beside them (every part file then has one; a
//! part file without its marker is still being written, or its writer
//! failed). For a finished job: `N` watermark files holding `u64::MAX`, and
//! a marker for every part file.
//!
//! Rows of a partition that is already committed at this worker (the
//! watermark passed it: a late row that no earlier stage dropped) are
//! dropped and counted (`partitioned_late_rows`), never appended to a
//! committed file.
//!
//! **With checkpoints** (a job with a checkpoint directory; the details
//! are in the `ck` submodule, `partitioned/ck.rs`) the layout is the same and rows still reach the part
//! files at every flush interval, but what a reader may trust waits for
//! checkpoints:
//!
//! - a part file without its marker may still be cut back: a resume after a
//!   failure truncates it to the length its checkpoint saved and writes
//!   the rows after that again (the same rows, when the input is the same);
//!   a part file made after that checkpoint is deleted (and made again);
//! - `_SUCCESS.NAME` appears once the partition is closed (watermark past
//!   its end plus the delay; the part file synced) *and* a checkpoint taken
//!   after it closed is complete: up to one checkpoint interval (plus its
//!   write) later than without checkpoints. A marked part file is final:
//!   no resume changes it;
//! - `_WATERMARK.NAME` holds the watermark saved at the worker's newest
//!   complete checkpoint (not its current one), so the reader's rule above
//!   holds as is: every partition ending at or before `W` at this worker
//!   has its marker, and no resume takes `W` back;
//! - markers and watermark files are fsynced before they are renamed into
//!   place; a worker that reached the end of its stream marks every
//!   partition and writes `W = u64::MAX` at once (its files are final, and
//!   a later resume keeps them);
//! - the part files are named by worker: a resume at another worker count
//!   is refused before the job starts (the sink's state slot cannot
//!   rescale).

mod ck;

use air_runtime::dataflow::{Cx, Dataflow, Head, Pipe, Stats, Stream, Tail};
use air_runtime::RuntimeError;
use ck::Ck;
use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

/// Buffered bytes of one part file written out before the flush interval.
const PART_BUFFER: usize = 256 * 1024;

/// The watermark file is rewritten at most this often (and after every
/// commit).
const WATERMARK_EVERY: Duration = Duration::from_secs(1);

/// Open partitions per worker when [`PartitionedCsv::max_open`] is not
/// given.
pub const DEFAULT_MAX_OPEN: usize = 1024;

/// Rows to CSV part files under a directory, partitioned by a function of
/// the row; see the [module docs](self) for the layout and the commit
/// protocol. Put it on a stream with [`PartitionedExt::sink_partitioned`].
///
/// `partition(row, path)` writes the row's partition path (relative,
/// directories separated by `/`, no `..`) into `path` (empty on entry) and
/// returns the partition's end, ms of event time: once the watermark
/// reaches `end + commit delay` no row of that partition may come any more
/// and its files are committed.
///
/// ```
/// use air_operators::graph::*;
/// use air_runtime::dataflow::{run_graph, VecSource};
/// use air_runtime::JobConfig;
/// use std::fmt::Write;
///
/// let dir = tempfile::tempdir().unwrap();
/// let root = dir.path().join("clicks");
/// let r = root.clone();
/// let cfg = JobConfig { workers: 2, pin: false, ..JobConfig::default() };
/// let out = run_graph(&cfg, move |df| {
///     // (user, time ms): worker w reads every other click, in time order.
///     let clicks: Vec<(u32, u64)> = [(1, 0), (2, 500), (1, 1_200), (3, 1_900), (2, 2_100)]
///         .into_iter()
///         .skip(df.index())
///         .step_by(2)
///         .collect();
///     df.source(VecSource::new(clicks))
///         .event_time(|c| c.1, 0)
///         .sink_partitioned(PartitionedCsv::new(r.clone(), |c: &(u32, u64), path: &mut String| {
///             let second = c.1 / 1000;
///             write!(path, "s={second}").unwrap();
///             (second + 1) * 1000 // the partition's end
///         }));
/// })
/// .unwrap();
/// assert_eq!(out.stats.get("partitioned_rows"), 5);
/// assert_eq!(out.stats.get("partitions_committed"), 5); // part files: 2 + 2 + 1
/// let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
/// // Worker 0 read (1, 0), (1, 1200), (2, 2100); worker 1 (2, 500), (3, 1900).
/// assert_eq!(read("s=0/part-r0-w0.csv"), "1,0\n");
/// assert_eq!(read("s=0/part-r0-w1.csv"), "2,500\n");
/// assert_eq!(read("s=1/part-r0-w1.csv"), "3,1900\n");
/// assert_eq!(read("s=2/part-r0-w0.csv"), "2,2100\n");
/// assert_eq!(read("s=0/_SUCCESS.r0-w1"), "rows=1 bytes=6\n");
/// assert!(!root.join("s=2/part-r0-w1.csv").exists()); // worker 1 had no row there
/// let wm = format!("watermark_ms={} workers=2\n", u64::MAX);
/// assert_eq!(read("_WATERMARK.r0-w0"), wm);
/// assert_eq!(read("_WATERMARK.r0-w1"), wm);
/// ```
pub struct PartitionedCsv<F> {
    dir: PathBuf,
    partition: F,
    commit_delay_ms: u64,
    max_open: usize,
    header: Option<Vec<u8>>,
    workers_per_rank: Option<usize>,
}

impl<F> PartitionedCsv<F> {
    /// Rows under `dir` (created if missing), partitioned by `partition`
    /// (see the type's docs); no commit delay, at most
    /// [`DEFAULT_MAX_OPEN`] open partitions per worker, no header.
    pub fn new(dir: impl Into<PathBuf>, partition: F) -> Self {
        PartitionedCsv {
            dir: dir.into(),
            partition,
            commit_delay_ms: 0,
            max_open: DEFAULT_MAX_OPEN,
            header: None,
            workers_per_rank: None,
        }
    }

    /// A partition is committed once the watermark reaches its end plus
    /// `ms` (Flink's `sink.partition-commit.delay`, counted from the
    /// partition's end rather than its start).
    pub fn commit_delay_ms(mut self, ms: u64) -> Self {
        self.commit_delay_ms = ms;
        self
    }

    /// At most `n` partitions open at once per worker (at least 1); a row
    /// that would open one more stops the job with an error naming the
    /// limit. A stream without a watermark (e.g. files read in any order)
    /// keeps every partition open until its end. The watermark reaches
    /// the sink at flush ticks (`JobConfig::flush`), so the partitions open
    /// at once are those the watermark of the last tick had not passed, plus
    /// the new ones since.
    pub fn max_open(mut self, n: usize) -> Self {
        self.max_open = n.max(1);
        self
    }

    /// A first line naming the columns in every part file.
    pub fn header<S: AsRef<str>>(mut self, names: &[S]) -> Self {
        let mut h = names
            .iter()
            .map(|n| n.as_ref())
            .collect::<Vec<_>>()
            .join(",")
            .into_bytes();
        h.push(b'\n');
        self.header = Some(h);
        self
    }

    /// Workers per rank (process) of the job, to name each worker's files
    /// `r<rank>-w<local index>` (a global worker index is `rank ×
    /// workers_per_rank + local`). Without it every worker is named as
    /// rank 0 with its global index as local index: still distinct across
    /// ranks, since global indices are.
    pub fn workers_per_rank(mut self, n: usize) -> Self {
        self.workers_per_rank = Some(n.max(1));
        self
    }
}

/// `sink_partitioned` on a stream of rows.
pub trait PartitionedExt<H: Head, P: Pipe<H::Out>> {
    /// Writes every row into its partition's part file of this worker (see
    /// [`PartitionedCsv`]); the job's `partitioned_rows`,
    /// `partitioned_bytes`, `partitions_committed` (part files committed),
    /// `partitioned_late_rows` and `partitions_uncommitted` (part files
    /// left open by a stop) count what it did.
    fn sink_partitioned<F>(self, files: PartitionedCsv<F>) -> Dataflow
    where
        F: FnMut(&P::Out, &mut String) -> u64 + 'static,
        P::Out: serde::Serialize;

    /// [`sink_partitioned`](Self::sink_partitioned) with each row's text
    /// written by `write(row, out)`, which appends the row's bytes, line
    /// end included, to `out` (the part file's buffer: no serde, no copy)
    /// and must leave what is already there. For rows whose CSV is faster
    /// written by hand; quoting is then the writer's job.
    ///
    /// ```
    /// use air_operators::graph::*;
    /// use air_runtime::dataflow::{run_graph, VecSource};
    /// use air_runtime::JobConfig;
    /// use std::io::Write as _;
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let root = dir.path().join("t");
    /// let r = root.clone();
    /// let cfg = JobConfig { workers: 1, pin: false, ..JobConfig::default() };
    /// run_graph(&cfg, move |df| {
    ///     // (sensor, time ms)
    ///     df.source(VecSource::new(vec![(7u32, 10u64), (8, 1_500)]))
    ///         .event_time(|c| c.1, 0)
    ///         .sink_partitioned_with(
    ///             PartitionedCsv::new(r.clone(), |c: &(u32, u64), path: &mut String| {
    ///                 path.push_str(if c.1 < 1000 { "s=0" } else { "s=1" });
    ///                 (c.1 / 1000 + 1) * 1000
    ///             }),
    ///             |c: &(u32, u64), out: &mut Vec<u8>| writeln!(out, "{};{}", c.0, c.1).unwrap(),
    ///         );
    /// })
    /// .unwrap();
    /// assert_eq!(std::fs::read_to_string(root.join("s=0/part-r0-w0.csv")).unwrap(), "7;10\n");
    /// assert_eq!(std::fs::read_to_string(root.join("s=1/part-r0-w0.csv")).unwrap(), "8;1500\n");
    /// ```
    fn sink_partitioned_with<F, W>(self, files: PartitionedCsv<F>, write: W) -> Dataflow
    where
        F: FnMut(&P::Out, &mut String) -> u64 + 'static,
        W: FnMut(&P::Out, &mut Vec<u8>) + 'static;
}

impl<H, P> PartitionedExt<H, P> for Stream<H, P>
where
    H: Head,
    P: Pipe<H::Out>,
{
    fn sink_partitioned<F>(self, files: PartitionedCsv<F>) -> Dataflow
    where
        F: FnMut(&P::Out, &mut String) -> u64 + 'static,
        P::Out: serde::Serialize,
    {
        let out = Staged::default();
        let mut csv = csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(out.clone());
        let write = move |row: &P::Out, buf: &mut Vec<u8>| {
            csv.serialize(row)
                .and_then(|_| csv.flush().map_err(Into::into))
                .map_err(|e| format!("CSV row: {e}"))?;
            buf.append(&mut out.0.borrow_mut());
            Ok(())
        };
        sink(self, files, write)
    }

    fn sink_partitioned_with<F, W>(self, files: PartitionedCsv<F>, mut write: W) -> Dataflow
    where
        F: FnMut(&P::Out, &mut String) -> u64 + 'static,
        W: FnMut(&P::Out, &mut Vec<u8>) + 'static,
    {
        sink(self, files, move |row: &P::Out, buf: &mut Vec<u8>| {
            write(row, buf);
            Ok(())
        })
    }
}

/// The partitioned sink writing rows with `write` (appends a row's bytes
/// or fails with a message).
fn sink<H, P, F, W>(stream: Stream<H, P>, files: PartitionedCsv<F>, write: W) -> Dataflow
where
    H: Head,
    P: Pipe<H::Out>,
    F: FnMut(&P::Out, &mut String) -> u64 + 'static,
    W: FnMut(&P::Out, &mut Vec<u8>) -> Result<(), String> + 'static,
{
    let df = stream.dataflow().clone();
    // Each worker's files are its own (named by it): they cannot be dealt
    // out to another worker count.
    let slot = df.state_slot(
        format!(
            "partitioned files under {} (each worker's part files, _SUCCESS and \
             _WATERMARK files are named by it)",
            files.dir.display()
        ),
        true,
        false,
    );
    let mut tail = PartitionTail::new(files, df.index(), df.workers(), write);
    if let Some(checkpoints) = air_runtime::dataflow::state::checkpoints() {
        if let Err(e) = tail.join_checkpoints(checkpoints, slot) {
            df.fail(format!(
                "resuming the partitioned files under {}: {e}",
                tail.cfg.dir.display()
            ));
        }
    }
    stream.end_in(tail)
}

/// The bytes of a row the CSV writer wrote, taken by the sink.
#[derive(Clone, Default)]
struct Staged(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);

impl Write for Staged {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One open part file.
struct Part {
    /// The partition's directory.
    dir: PathBuf,
    /// Commit once the watermark reaches this (end + delay).
    due: u64,
    file: Option<File>,
    buf: Vec<u8>,
    /// Rows written to it (file and buffer).
    rows: u64,
    /// Bytes in the file (the buffer not counted).
    bytes: u64,
    /// With checkpoints: the output directory, up to which the new
    /// directories of a part file are synced when it is created.
    sync_up_to: Option<PathBuf>,
}

impl Part {
    /// Its file.
    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("part-{name}.csv"))
    }

    /// Writes the buffered bytes to the file (created on first use, with
    /// `header` first) of the worker named `name`.
    fn write_out(&mut self, name: &str, header: Option<&[u8]>) -> Result<(), String> {
        if self.buf.is_empty() {
            return Ok(());
        }
        if self.file.is_none() {
            std::fs::create_dir_all(&self.dir)
                .map_err(|e| format!("cannot create {}: {e}", self.dir.display()))?;
            if let Some(root) = &self.sync_up_to {
                // Checkpoints: the new directories' entries are durable
                // before a checkpoint names the file (the checkpoint
                // writer syncs the file and its own directory).
                ck::sync_dirs(&self.dir, root)?;
            }
            let p = self.path(name);
            let mut f =
                File::create(&p).map_err(|e| format!("cannot create {}: {e}", p.display()))?;
            if let Some(h) = header {
                f.write_all(h)
                    .map_err(|e| format!("writing {}: {e}", p.display()))?;
                self.bytes += h.len() as u64;
            }
            self.file = Some(f);
        }
        let f = self.file.as_mut().expect("opened above");
        f.write_all(&self.buf)
            .map_err(|e| format!("writing {}: {e}", self.path(name).display()))?;
        self.bytes += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }
}

struct PartitionTail<F, W> {
    cfg: PartitionedCsv<F>,
    /// `r<rank>-w<local>`.
    name: String,
    me: usize,
    workers: usize,
    /// Appends a row's bytes to a part's buffer.
    write: W,
    /// The current row's partition path (reused).
    path: String,
    open: HashMap<String, Part>,
    /// The partition of the previous row (most rows share it).
    last: Option<String>,
    /// The smallest `due` of the open partitions.
    min_end: u64,
    wm: u64,
    wm_written: Option<u64>,
    /// When the watermark file was written last.
    wm_at: Option<Instant>,
    /// Partitions committed since.
    fresh_commits: bool,
    dir_made: bool,
    rows: u64,
    bytes: u64,
    commits: u64,
    late: u64,
    uncommitted: u64,
    /// With checkpoints: what is saved at barriers and waits for their
    /// completion (module [`ck`]).
    ck: Option<Ck>,
    /// Resumed after this worker had ended (its files are final): every
    /// row is dropped (the watermark is `u64::MAX`, so each one takes the
    /// late rows' branch).
    drop_all: bool,
}

/// Writes `bytes` to `path` through a temporary file renamed over it (a
/// reader sees the old content or the new, never a part).
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path)
        .map_err(|e| format!("cannot rename {} to {}: {e}", tmp.display(), path.display()))
}

/// Checks a partition path: relative, no `..`, not empty.
fn check_path(p: &str) -> Result<(), String> {
    let path = Path::new(p);
    if p.is_empty()
        || !path
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(format!(
            "partition path {p:?}: need a relative path without `..` (e.g. `dt=2026-12-01/hm=18:40`)"
        ));
    }
    Ok(())
}

impl<F, W> PartitionTail<F, W> {
    /// The sink of worker `me` of `workers` (global indices), writing rows
    /// with `write`; no checkpoints yet.
    fn new(cfg: PartitionedCsv<F>, me: usize, workers: usize, write: W) -> Self {
        let per_rank = cfg.workers_per_rank.unwrap_or(workers.max(1));
        let name = format!("r{}-w{}", me / per_rank, me % per_rank);
        PartitionTail {
            cfg,
            name,
            me,
            workers,
            write,
            path: String::new(),
            open: HashMap::new(),
            last: None,
            min_end: u64::MAX,
            wm: 0,
            wm_written: None,
            wm_at: None,
            fresh_commits: false,
            dir_made: false,
            rows: 0,
            bytes: 0,
            commits: 0,
            late: 0,
            uncommitted: 0,
            ck: None,
            drop_all: false,
        }
    }

    fn fail(&self, message: String, cx: &mut Cx<'_, '_>) {
        cx.fail_with(RuntimeError::Operator {
            worker: self.me,
            message,
        });
    }

    /// Flushes, syncs and closes a part, then writes its marker (with
    /// checkpoints: once the first checkpoint covering all its rows is
    /// complete).
    fn commit(&mut self, mut part: Part) -> Result<(), String> {
        part.write_out(&self.name, self.cfg.header.as_deref())?;
        if let Some(f) = part.file.take() {
            f.sync_data()
                .map_err(|e| format!("syncing {}: {e}", part.path(&self.name).display()))?;
        }
        self.bytes += part.bytes;
        if let Some(ck) = self.ck.as_mut() {
            ck.closed(&self.cfg.dir, &part);
            return Ok(());
        }
        let marker = part.dir.join(format!("_SUCCESS.{}", self.name));
        write_atomic(
            &marker,
            format!("rows={} bytes={}\n", part.rows, part.bytes).as_bytes(),
        )?;
        self.commits += 1;
        self.fresh_commits = true;
        Ok(())
    }

    /// Commits every open partition due at `wm` or before.
    fn advance(&mut self, wm: u64) -> Result<(), String> {
        self.wm = self.wm.max(wm);
        if self.min_end > self.wm {
            return Ok(());
        }
        let due: Vec<String> = self
            .open
            .iter()
            .filter(|(_, p)| p.due <= self.wm)
            .map(|(k, _)| k.clone())
            .collect();
        for k in due {
            let part = self.open.remove(&k).expect("listed above");
            self.commit(part)?;
        }
        self.last = None;
        self.min_end = self.open.values().map(|p| p.due).min().unwrap_or(u64::MAX);
        Ok(())
    }

    /// Rewrites the watermark file if the watermark advanced.
    fn write_watermark(&mut self) -> Result<(), String> {
        // With checkpoints: the watermark of the newest complete one.
        let wm = self.ck.as_ref().map_or(self.wm, |c| c.visible_wm);
        if self.wm_written == Some(wm) {
            return Ok(());
        }
        if !self.dir_made {
            std::fs::create_dir_all(&self.cfg.dir)
                .map_err(|e| format!("cannot create {}: {e}", self.cfg.dir.display()))?;
            self.dir_made = true;
        }
        let p = self.cfg.dir.join(format!("_WATERMARK.{}", self.name));
        let text = format!("watermark_ms={wm} workers={}\n", self.workers);
        if self.ck.is_some() {
            ck::write_durable(&p, text.as_bytes())?;
        } else {
            write_atomic(&p, text.as_bytes())?;
        }
        self.wm_written = Some(wm);
        self.wm_at = Some(Instant::now());
        self.fresh_commits = false;
        Ok(())
    }

    /// The flush interval passed: every open part file written out, the
    /// markers a complete checkpoint covers (with checkpoints), the
    /// watermark file after a commit or at most once a second.
    fn flush_tick(&mut self) -> Result<(), String> {
        let (name, header) = (&self.name, self.cfg.header.as_deref());
        self.open
            .values_mut()
            .try_for_each(|p| p.write_out(name, header))?;
        if self.ck.is_some() {
            // Markers of partitions whose checkpoint is complete now.
            self.publish(false)?;
        }
        // The watermark file: after a commit, else at most once a second.
        let due = self.wm_at.is_none_or(|t| t.elapsed() >= WATERMARK_EVERY);
        if self.fresh_commits || due {
            self.write_watermark()?;
        }
        Ok(())
    }

    /// End of stream at `final_wm` (`u64::MAX` unless the job was stopped).
    fn finish(&mut self, final_wm: u64) -> Result<(), String> {
        if self.ck.is_some() {
            return self.end_checkpointed(final_wm);
        }
        let mut r = self.advance(final_wm);
        // Stopped: what stays open is flushed, not committed.
        let keys: Vec<String> = self.open.keys().cloned().collect();
        for k in keys {
            let mut part = self.open.remove(&k).expect("listed");
            r = r.and(part.write_out(&self.name, self.cfg.header.as_deref()));
            self.bytes += part.bytes;
            self.uncommitted += 1;
        }
        r.and_then(|_| self.write_watermark())
    }

    fn push_row<T>(&mut self, row: T) -> Result<(), String>
    where
        F: FnMut(&T, &mut String) -> u64,
        W: FnMut(&T, &mut Vec<u8>) -> Result<(), String>,
    {
        self.path.clear();
        let end = (self.cfg.partition)(&row, &mut self.path);
        let due = end.saturating_add(self.cfg.commit_delay_ms);
        if due <= self.wm {
            if self.drop_all {
                // Resumed after this worker's end: its files are final.
                return Ok(());
            }
            // Its partition was committed here (or would be at once).
            self.late += 1;
            return Ok(());
        }
        if self.last.as_deref() != Some(self.path.as_str()) {
            if !self.open.contains_key(self.path.as_str()) {
                check_path(&self.path)?;
                if self.open.len() >= self.cfg.max_open {
                    return Err(format!(
                        "partition {}: more than {} partitions open at once at this worker \
                         (the watermark has not passed their ends); raise the limit or \
                         give the stream a watermark",
                        self.path, self.cfg.max_open
                    ));
                }
                self.open.insert(
                    self.path.clone(),
                    Part {
                        dir: self.cfg.dir.join(&self.path),
                        due,
                        file: None,
                        buf: Vec::new(),
                        rows: 0,
                        bytes: 0,
                        sync_up_to: self.ck.as_ref().map(|_| self.cfg.dir.clone()),
                    },
                );
                self.min_end = self.min_end.min(due);
            }
            self.last = Some(self.path.clone());
        }
        let part = self.open.get_mut(self.path.as_str()).expect("opened above");
        (self.write)(&row, &mut part.buf)?;
        part.rows += 1;
        self.rows += 1;
        if part.buf.len() >= PART_BUFFER {
            part.write_out(&self.name, self.cfg.header.as_deref())?;
        }
        Ok(())
    }
}

impl<T, F, W> Tail<T> for PartitionTail<F, W>
where
    F: FnMut(&T, &mut String) -> u64 + 'static,
    W: FnMut(&T, &mut Vec<u8>) -> Result<(), String> + 'static,
{
    #[inline]
    fn push(&mut self, row: T, cx: &mut Cx<'_, '_>) {
        // Written out at the next flush tick.
        air_runtime::dataflow::mark_pending();
        if let Err(e) = self.push_row(row) {
            self.fail(e, cx);
        }
    }

    fn watermark(&mut self, wm: u64, cx: &mut Cx<'_, '_>) {
        if let Err(e) = self.advance(wm) {
            self.fail(e, cx);
        }
    }

    fn tick(&mut self, cx: &mut Cx<'_, '_>) {
        if let Err(e) = self.flush_tick() {
            self.fail(e, cx);
        }
    }

    fn end(&mut self, final_wm: u64, cx: &mut Cx<'_, '_>) {
        if let Err(e) = self.finish(final_wm) {
            self.fail(e, cx);
        }
    }

    fn barrier(&mut self, id: u64, cx: &mut Cx<'_, '_>) {
        // A sink: nothing to pass on; with checkpoints it saves its files'
        // lengths (module [`ck`]).
        if self.ck.is_some() {
            if let Err(e) = self.save(id) {
                self.fail(e, cx);
            }
        }
    }

    fn barrier_safe(&self) -> bool {
        // Its own slot saves what it keeps (taken in `sink`).
        true
    }

    fn report(&mut self, stats: &mut Stats) {
        stats.add("partitioned_rows", self.rows);
        stats.add("partitioned_bytes", self.bytes);
        stats.add("partitions_committed", self.commits);
        stats.add("partitioned_late_rows", self.late);
        stats.add("partitions_uncommitted", self.uncommitted);
        if let Some(ck) = self.ck.as_ref().filter(|c| c.barriers > 0) {
            // As the other sinks count them.
            stats.add("sink_barriers", ck.barriers);
            stats.max("sink_barrier_last", ck.last_barrier);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use air_runtime::dataflow::{run_graph, VecSource};
    use air_runtime::JobConfig;
    use std::fmt::Write as _;

    /// A source of one row per poll, 3 ms apart (the watermark reaches
    /// the sink at flush ticks, 1 ms apart).
    struct OneByOne(std::collections::VecDeque<(u64, u64)>);

    impl air_runtime::dataflow::Source for OneByOne {
        type Item = (u64, u64);
        fn poll(
            &mut self,
            buf: &mut Vec<(u64, u64)>,
            _max: usize,
        ) -> air_runtime::dataflow::SourcePoll {
            buf.clear();
            std::thread::sleep(std::time::Duration::from_millis(3));
            match self.0.pop_front() {
                Some(r) => {
                    buf.push(r);
                    air_runtime::dataflow::SourcePoll::Ready
                }
                None => air_runtime::dataflow::SourcePoll::Done,
            }
        }
    }

    /// Partitions of 100 ms: `p=<start>`.
    fn by_100ms(r: &(u64, u64), path: &mut String) -> u64 {
        let start = r.1 / 100 * 100;
        write!(path, "p={start}").unwrap();
        start + 100
    }

    #[test]
    fn every_row_lands_once_in_its_partition_and_each_part_is_committed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("out");
        let r = root.clone();
        // 1000 rows (id, time): times 0..=999 ms, ten partitions.
        let rows: Vec<(u64, u64)> = (0..1000).map(|i| (i, i)).collect();
        let cfg = JobConfig {
            workers: 3,
            pin: false,
            ..JobConfig::default()
        };
        let out = run_graph(&cfg, move |df| {
            let mine: Vec<(u64, u64)> = rows
                .iter()
                .copied()
                .skip(df.index())
                .step_by(df.workers())
                .collect();
            df.source(VecSource::new(mine))
                .event_time(|r| r.1, 0)
                .sink_partitioned(
                    PartitionedCsv::new(r.clone(), by_100ms)
                        .header(&["id", "time"])
                        .workers_per_rank(3),
                );
        })
        .unwrap();
        assert_eq!(out.stats.get("partitioned_rows"), 1000);
        assert_eq!(out.stats.get("partitions_committed"), 30);
        assert_eq!(out.stats.get("partitioned_late_rows"), 0);
        let mut total_bytes = 0;
        for p in 0..10u64 {
            let pdir = root.join(format!("p={}", p * 100));
            let mut ids = Vec::new();
            for w in 0..3 {
                let text = std::fs::read_to_string(pdir.join(format!("part-r0-w{w}.csv"))).unwrap();
                let marker =
                    std::fs::read_to_string(pdir.join(format!("_SUCCESS.r0-w{w}"))).unwrap();
                let lines: Vec<&str> = text.lines().collect();
                assert_eq!(lines[0], "id,time");
                assert_eq!(
                    marker,
                    format!("rows={} bytes={}\n", lines.len() - 1, text.len())
                );
                total_bytes += text.len() as u64;
                for l in &lines[1..] {
                    let (id, t) = l.split_once(',').unwrap();
                    assert_eq!(id, t);
                    let id: u64 = id.parse().unwrap();
                    assert_eq!(id % 3, w, "row {id} at worker {w}");
                    ids.push(id);
                }
            }
            ids.sort();
            assert_eq!(ids, (p * 100..p * 100 + 100).collect::<Vec<_>>());
        }
        assert_eq!(out.stats.get("partitioned_bytes"), total_bytes);
        for w in 0..3 {
            let wm = std::fs::read_to_string(root.join(format!("_WATERMARK.r0-w{w}"))).unwrap();
            assert_eq!(wm, format!("watermark_ms={} workers=3\n", u64::MAX));
        }
    }

    #[test]
    fn partitions_close_as_the_watermark_passes_and_the_open_limit_holds() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("out");
        // In time order over 50 partitions, one row each: with a watermark
        // at most 2 are open at once (one, and the next at its row before
        // the watermark passes the first; 3 allowed for a late tick).
        let rows: Vec<(u64, u64)> = (0..50).map(|i| (i, i * 100)).collect();
        let cfg = JobConfig {
            workers: 1,
            pin: false,
            ..JobConfig::default()
        };
        let (r, rs) = (root.clone(), rows.clone());
        let out = run_graph(&cfg, move |df| {
            df.source(OneByOne(rs.iter().copied().collect()))
                .event_time(|r| r.1, 0)
                .sink_partitioned(PartitionedCsv::new(r.clone(), by_100ms).max_open(3));
        })
        .unwrap();
        assert_eq!(out.stats.get("partitions_committed"), 50);
        // Without a watermark all 50 stay open: the limit stops the job.
        let r = dir.path().join("out2");
        let err = run_graph(&cfg, move |df| {
            df.source(VecSource::new(rows.clone()))
                .sink_partitioned(PartitionedCsv::new(r.clone(), by_100ms).max_open(3));
        })
        .unwrap_err();
        assert!(
            err.to_string().contains("more than 3 partitions open"),
            "{err}"
        );
        // A partition path outside the directory stops the job.
        let r = dir.path().join("out4");
        let err = run_graph(&cfg, move |df| {
            df.source(VecSource::new(vec![(1u64, 1u64)]))
                .sink_partitioned(PartitionedCsv::new(
                    r.clone(),
                    |_: &(u64, u64), p: &mut String| {
                        p.push_str("../escape");
                        1
                    },
                ));
        })
        .unwrap_err();
        assert!(err.to_string().contains("without `..`"), "{err}");
    }
}
