//! Exactly-once output of a line sink in a job with checkpoints: a
//! two-phase commit through pending files.
//!
//! - **Pending file.** The rows written after barrier `a` (the newest one
//!   the sink saw, 0 at the start) go, as they come (through the sink's
//!   1 MiB buffer), to a pending file next to the output:
//!   `DIR_OF_OUTPUT/.<output file name>.air-pending-<a, 8 digits>` (for
//!   `out.csv` at worker 1: `.out.csv.w1.air-pending-00000041`). Standard
//!   output has no directory: its pending files are
//!   `CHECKPOINT_DIR/stdout-w<worker, 5 digits>.air-pending-<a>`. Next to
//!   the output, the commit's copy stays on one file system (in the kernel,
//!   no bytes through user space) and the checkpoint directory holds only
//!   small files: a full checkpoint disk skips checkpoints, it does not
//!   stop the job.
//! - **Barrier `n`** seals the pending file: it is the rows of checkpoint
//!   `n`, and the process's checkpoint writer fsyncs it (and its directory)
//!   before it writes the worker's part of `n`
//!   ([`air_runtime::dataflow::state::sync_before_part`]): once `n` is
//!   complete (its manifest is on disk), its rows are durable. The sink's
//!   state in the part only names its pending files and their lengths
//!   ([`Commits::state`]: tens of bytes, whatever the rows).
//! - **Commit.** Once checkpoint `n` is complete the sealed pending files
//!   up to `n` are appended to the output, oldest first, at the committed
//!   length (`std::io::copy`, which is `copy_file_range(2)` between two
//!   files on Linux, else `sendfile`/`splice`, else a read/write loop), the
//!   output is fsynced, then the commit record
//!   (`CHECKPOINT_DIR/commit-<FNV-1a of the output's name>-w<worker>.json`)
//!   is replaced (temporary name, fsync, rename).
//! - **Resume** from checkpoint `k`: the output is cut back to the length
//!   it had committed at barrier `k` (saved in `k`'s state), then the
//!   pending files `k` names (rows of checkpoints up to `k` not yet
//!   committed at barrier `k`) are appended. A crash at any moment —
//!   before `k` is complete, between `k` complete and the append, during
//!   the append, before the record — resumes from a complete checkpoint
//!   whose rows are durable and cuts the output back to a length that
//!   holds no row that checkpoint does not cover: no committed row is lost,
//!   none is written twice. Pending files the state does not name (of the
//!   run that died after `k`) are deleted.
//! - **Deleted** when no retained checkpoint can name them: a committed
//!   pending file is named by checkpoints up to the newest barrier the
//!   sink had seen at its commit; once every complete checkpoint in the
//!   directory is newer, it goes (checked at every barrier and at the end).
//!   A job that ends (not stopped) commits everything, writes a final
//!   record and deletes all its pending files; a stopped one keeps those a
//!   retained checkpoint names.
//! - **Standard output** cannot be cut back: rows are printed at commit,
//!   and a kill between a print and its record prints those rows again on
//!   resume (at-least-once); a consumer that wants exactly-once reads a
//!   committed file.

use super::{Lines, Target};
use air_runtime::dataflow::state::{read_u64, sync_before_part, Rescale};
use air_runtime::dataflow::Checkpoints;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The first 8 bytes of a line sink's saved state (a state of an air that
/// saved rows in the part is refused with a clear error).
const STATE_MAGIC: [u8; 8] = *b"AIRSINK2";

/// Appended to a pending file's prefix: the barrier after which its rows
/// were written, 8 digits.
const PENDING: &str = ".air-pending-";

/// What a sink's commit record says: the newest checkpoint whose rows are
/// in the output, the output's length then (bytes), and whether the job
/// ended (every row is out).
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub(super) struct Committed {
    epoch: u64,
    bytes: u64,
    #[serde(rename = "final")]
    done: bool,
}

/// The rows of one checkpoint: checkpoint `id`'s pending file `name` (in
/// the pending directory), `len` bytes; no file (`name` empty) if no rows.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Epoch {
    id: u64,
    name: String,
    len: u64,
}

/// The pending file being written (rows since the last barrier).
#[derive(Debug)]
struct Open {
    name: String,
    path: PathBuf,
    file: File,
    len: u64,
}

/// Rows to append to the output at a commit.
enum Rows<'a> {
    None,
    Bytes(&'a [u8]),
    /// A pending file and its length (bytes) as sealed.
    File(&'a Path, u64),
}

impl Rows<'_> {
    fn len(&self) -> u64 {
        match self {
            Rows::None => 0,
            Rows::Bytes(b) => b.len() as u64,
            Rows::File(_, len) => *len,
        }
    }
}

/// A line sink's side of the commit (module docs).
pub(super) struct Commits {
    ck: Arc<Checkpoints>,
    record: PathBuf,
    /// Where its pending files live, and the start of their names.
    dir: PathBuf,
    prefix: String,
    /// The newest barrier seen (the one resumed from, after a resume): the
    /// next pending file's number.
    after: u64,
    open: Option<Open>,
    /// Sealed epochs not yet committed, oldest first.
    sealed: VecDeque<Epoch>,
    /// Committed pending files still on disk: (name, newest barrier whose
    /// state may name it).
    spent: Vec<(String, u64)>,
    committed: Committed,
    /// The job ended before (resumed after its end): rows are out already.
    drop_all: bool,
    /// A commit record could not be written (said once).
    record_failed: bool,
}

impl Commits {
    /// Encodes what the output held at the barrier (the newest committed
    /// checkpoint and the output's length then) and the sealed epochs:
    /// `[magic, epoch, bytes, count, (id, len, name length, name…)…]`,
    /// little-endian `u64`s and UTF-8 names.
    fn state(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(32 + self.sealed.len() * 64);
        out.extend_from_slice(&STATE_MAGIC);
        out.extend_from_slice(&self.committed.epoch.to_le_bytes());
        out.extend_from_slice(&self.committed.bytes.to_le_bytes());
        out.extend_from_slice(&(self.sealed.len() as u64).to_le_bytes());
        for e in &self.sealed {
            out.extend_from_slice(&e.id.to_le_bytes());
            out.extend_from_slice(&e.len.to_le_bytes());
            out.extend_from_slice(&(e.name.len() as u64).to_le_bytes());
            out.extend_from_slice(e.name.as_bytes());
        }
        out
    }

    /// What [`Commits::state`] encoded: (committed then, sealed epochs).
    fn parse(state: &[u8]) -> Result<(Committed, Vec<Epoch>), String> {
        if state.get(..8) != Some(&STATE_MAGIC[..]) {
            return Err(
                "a sink's saved state is not of this air version (rows were saved in \
                        the checkpoint then): finish the job with the air that began it, or \
                        start over with --fresh"
                    .into(),
            );
        }
        let committed = Committed {
            epoch: read_u64(state, 8)?,
            bytes: read_u64(state, 16)?,
            done: false,
        };
        let n = read_u64(state, 24)?;
        let mut at = 32usize;
        let mut out = Vec::new();
        for _ in 0..n {
            let id = read_u64(state, at)?;
            let len = read_u64(state, at + 8)?;
            let name_len = read_u64(state, at + 16)? as usize;
            at += 24;
            let name = state
                .get(at..at.saturating_add(name_len))
                .and_then(|b| std::str::from_utf8(b).ok())
                .ok_or("a sink's saved pending-file name is cut short")?;
            if name.contains('/') || (name.is_empty() && len > 0) {
                return Err(format!(
                    "a sink's saved pending-file name {name:?} is not one"
                ));
            }
            out.push(Epoch {
                id,
                name: name.to_string(),
                len,
            });
            at += name_len;
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

    /// Appends `rows` to the pending file of the rows since the last
    /// barrier (created when the first rows come).
    fn write(&mut self, rows: &[u8]) -> Result<(), String> {
        if self.open.is_none() {
            let name = format!("{}{:08}", self.prefix, self.after);
            let path = self.dir.join(&name);
            let file = File::create(&path)
                .map_err(|e| format!("cannot create pending rows {}: {e}", path.display()))?;
            self.open = Some(Open {
                name,
                path,
                file,
                len: 0,
            });
        }
        let o = self.open.as_mut().expect("opened");
        o.file
            .write_all(rows)
            .map_err(|e| format!("writing pending rows to {}: {e}", o.path.display()))?;
        o.len += rows.len() as u64;
        Ok(())
    }

    /// Barrier `id`: the pending file is checkpoint `id`'s rows, made
    /// durable (by the checkpoint writer) before `id`'s part is written.
    fn seal(&mut self, id: u64) {
        let epoch = match self.open.take() {
            Some(o) => {
                let e = Epoch {
                    id,
                    name: o.name,
                    len: o.len,
                };
                sync_before_part(id, o.file, o.path);
                e
            }
            None => Epoch {
                id,
                name: String::new(),
                len: 0,
            },
        };
        self.sealed.push_back(epoch);
        self.after = id;
    }

    /// The names of this sink's pending files on disk.
    fn on_disk(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| {
                n.strip_prefix(&self.prefix)
                    .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
            })
            .collect()
    }

    /// Deletes this sink's pending files on disk but those named `keep`.
    fn remove_except(&self, keep: &[&str]) {
        for name in self.on_disk() {
            if !keep.contains(&name.as_str()) {
                let _ = std::fs::remove_file(self.dir.join(name));
            }
        }
    }

    /// Deletes the committed pending files no complete checkpoint on disk
    /// can name (every one is newer than the newest barrier whose state
    /// named the file). One directory listing, when any is waiting.
    fn prune(&mut self) {
        if self.spent.is_empty() {
            return;
        }
        let Some(&oldest) = self.ck.store().complete_ids().first() else {
            return;
        };
        let dir = &self.dir;
        self.spent.retain(|(name, named_until)| {
            let keep = *named_until >= oldest;
            if !keep {
                let _ = std::fs::remove_file(dir.join(name));
            }
            keep
        });
    }
}

impl Lines {
    /// Joins the job's checkpoints, if it has any (at `bind`).
    pub(super) fn bind_checkpoints(&mut self) {
        let Some(ck) = air_runtime::dataflow::state::checkpoints() else {
            return;
        };
        self.bind_to(ck);
    }

    /// Joins checkpoints `ck` (after the worker index is set).
    fn bind_to(&mut self, ck: Arc<Checkpoints>) {
        let record = self.record_of(&ck.dir(), self.worker);
        let (dir, prefix) = match self.path() {
            Some(p) => {
                let dir = match p.parent() {
                    Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
                    _ => PathBuf::from("."),
                };
                let name = p.file_name().map(|n| n.to_string_lossy().to_string());
                (dir, format!(".{}{PENDING}", name.unwrap_or_default()))
            }
            None => (ck.dir(), format!("stdout-w{:05}{PENDING}", self.worker)),
        };
        let tx = Commits {
            after: ck.resumed.unwrap_or(0),
            ck,
            record,
            dir,
            prefix,
            open: None,
            sealed: VecDeque::new(),
            spent: Vec::new(),
            committed: Committed::default(),
            drop_all: false,
            record_failed: false,
        };
        if tx.ck.resumed.is_none() {
            // A fresh start: an old record and old pending rows say
            // nothing about this run.
            let _ = std::fs::remove_file(&tx.record);
            tx.remove_except(&[]);
        }
        self.tx = Some(tx);
    }

    /// Barrier `id`: the rows since the last one belong to checkpoint
    /// `id`; returns what the sink saves (the pending files of every epoch
    /// not yet committed, by name and length).
    pub(super) fn barrier(&mut self, id: u64) -> Result<Vec<u8>, String> {
        self.hold()?;
        let Some(tx) = self.tx.as_mut() else {
            return Ok(Vec::new());
        };
        tx.seal(id);
        let state = tx.state();
        self.commit_ready(false)?;
        if let Some(tx) = self.tx.as_mut() {
            tx.prune();
        }
        Ok(state)
    }

    /// On resume: the output back to what it held at the barrier of the
    /// checkpoint resumed from (its length then is in `state`: commits
    /// after it, of newer checkpoints than the one resumed from after a
    /// fallback, are cut off), then the pending rows of that checkpoint
    /// not yet committed then. Standard output cannot be cut: the epochs
    /// its record says were printed are skipped.
    pub(super) fn restore(&mut self, state: &[u8]) -> Result<(), String> {
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
        if out_before > 0 || epochs.iter().any(|e| e.len > 0) {
            // The header went out (or is pending) with the first rows.
            self.buf.clear();
            self.header = None;
        }
        // Pending files the checkpoint does not name are the dead run's.
        let keep: Vec<&str> = if record.done {
            Vec::new()
        } else {
            epochs.iter().map(|e| e.name.as_str()).collect()
        };
        tx.remove_except(&keep);
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
        let named_until = tx.after;
        for e in epochs {
            if e.id > printed {
                tx.sealed.push_back(e);
            } else if !e.name.is_empty() {
                tx.spent.push((e.name, named_until));
            }
        }
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
    fn record_of(&self, dir: &Path, worker: usize) -> PathBuf {
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
    /// `w`'s state (its output file and pending files are the same); a
    /// worker that did not exist starts with no output. An old worker that
    /// no longer exists must have written no row (one file per worker
    /// cannot be merged into another's): rows after [`Stream::collect`]
    /// all go to worker 0.
    ///
    /// [`Stream::collect`]: air_runtime::dataflow::Stream::collect
    pub(super) fn rescale(&mut self, states: &[&[u8]], to: Rescale) -> Result<(), String> {
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
                then.bytes > 0 || epochs.iter().any(|e| e.len > 0)
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
                tx.remove_except(&[]);
                Ok(())
            }
        }
    }

    /// Writes the buffered rows (the header before the first) to the
    /// pending file (checkpoints).
    pub(super) fn hold(&mut self) -> Result<(), String> {
        let Some(tx) = self.tx.as_mut() else {
            return Ok(());
        };
        if self.buf.is_empty() {
            return Ok(());
        }
        if tx.drop_all {
            self.buf.clear();
            return Ok(());
        }
        if let Some(h) = self.header.take() {
            tx.write(&h)?;
        }
        tx.write(&self.buf)?;
        self.buf.clear();
        Ok(())
    }

    /// Commits the sealed epochs whose checkpoints are complete (`all`:
    /// every one), oldest first.
    pub(super) fn commit_ready(&mut self, all: bool) -> Result<(), String> {
        loop {
            let Some(tx) = self.tx.as_mut() else {
                return Ok(());
            };
            let Some(front) = tx.sealed.front() else {
                return Ok(());
            };
            if !all && !tx.ck.is_complete(front.id) {
                return Ok(());
            }
            let e = tx.sealed.pop_front().expect("front");
            let path = tx.dir.join(&e.name);
            let rows = if e.name.is_empty() {
                Rows::None
            } else {
                Rows::File(&path, e.len)
            };
            self.append_committed(e.id, rows, false)?;
            if !e.name.is_empty() {
                let tx = self.tx.as_mut().expect("checkpoints");
                let named_until = tx.after;
                tx.spent.push((e.name, named_until));
            }
        }
    }

    /// Appends `rows` to the output as checkpoint `id`'s, durably, and
    /// records it. Returns whether the record says so (false: it could
    /// not be written; the job runs on).
    fn append_committed(&mut self, id: u64, rows: Rows<'_>, done: bool) -> Result<bool, String> {
        let path = self.path();
        let tx = self.tx.as_mut().expect("checkpoints");
        let len = rows.len();
        if tx.drop_all || (len == 0 && !done) {
            // Nothing to add: the record may lag (a resume appends
            // nothing for the checkpoints in between).
            return Ok(true);
        }
        if len == 0 && self.file.is_none() && tx.committed.bytes == 0 && self.worker != 0 {
            // No row ever reached this worker's sink: no file for it.
            return Ok(true);
        }
        let at = tx.committed.bytes;
        match &self.target {
            Target::Stdout => {
                let out = std::io::stdout();
                let mut lock = out.lock();
                copy_rows(&rows, &mut lock)
                    .and_then(|()| lock.flush().map_err(|e| e.to_string()))
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
                f.seek(SeekFrom::Start(at))
                    .map_err(|e| e.to_string())
                    .and_then(|_| copy_rows(&rows, f))
                    .and_then(|()| f.sync_data().map_err(|e| e.to_string()))
                    .map_err(|e| format!("writing rows to {}: {e}", path.display()))?;
            }
        }
        let c = Committed {
            epoch: id,
            bytes: at + len,
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
            return Ok(false);
        }
        Ok(true)
    }

    /// End of stream with checkpoints. A job that ended (not stopped, not
    /// failing): every row is final, so every epoch is committed now, the
    /// record says so, and no pending file is needed any more. A stopped
    /// job, or one whose source ended on an error (a bad record): only
    /// what complete checkpoints cover; the rest is recomputed when it
    /// resumes (once the input is mended).
    pub(super) fn close_checkpointed(&mut self) -> Result<(), String> {
        self.hold()?;
        if !air_runtime::dataflow::state::ends_for_good() {
            self.commit_ready(false)?;
            let tx = self.tx.as_mut().expect("checkpoints");
            if let Some(o) = tx.open.take() {
                // No checkpoint names it: recomputed on resume.
                drop(o.file);
                let _ = std::fs::remove_file(&o.path);
            }
            tx.prune();
            return Ok(());
        }
        self.commit_ready(true)?;
        // Worker 0 leaves a file even without rows: a header still here
        // means no row was ever written (the first rows take it).
        let header = if self.worker == 0 {
            self.header.take()
        } else {
            None
        };
        let tx = self.tx.as_mut().expect("checkpoints");
        let open = tx.open.take();
        let id = tx.committed.epoch.saturating_add(1);
        let rows = match (&header, &open) {
            (Some(h), _) => Rows::Bytes(h),
            (None, Some(o)) => Rows::File(&o.path, o.len),
            (None, None) => Rows::None,
        };
        let mut recorded = true;
        if self.worker == 0 || rows.len() > 0 || self.file.is_some() {
            recorded = self.append_committed(id, rows, true)?;
        }
        drop(open);
        if recorded {
            // The record says every row is out: a resume reads no
            // pending file.
            let tx = self.tx.as_mut().expect("checkpoints");
            tx.spent.clear();
            tx.remove_except(&[]);
        }
        Ok(())
    }
}

/// Writes `rows` to `out`: a pending file's first `len` bytes are copied
/// by `std::io::copy` (in the kernel where it can: `copy_file_range` to a
/// file, `splice`/`sendfile` to a pipe or socket).
///
/// # Errors
/// The pending file cannot be read or holds fewer bytes than its
/// checkpoint says; `out` cannot be written.
fn copy_rows<W: Write>(rows: &Rows<'_>, out: &mut W) -> Result<(), String> {
    match rows {
        Rows::None => Ok(()),
        Rows::Bytes(b) => out.write_all(b).map_err(|e| e.to_string()),
        Rows::File(path, len) => {
            let f = File::open(path)
                .map_err(|e| format!("cannot open pending rows {}: {e}", path.display()))?;
            let copied = std::io::copy(&mut f.take(*len), out).map_err(|e| e.to_string())?;
            if copied != *len {
                return Err(format!(
                    "pending rows {} hold {copied} bytes, the checkpoint says {len}: changed \
                     since (--fresh starts over)",
                    path.display()
                ));
            }
            Ok(())
        }
    }
}

/// Opens `path` (created if missing) and cuts it back to `len` bytes.
///
/// # Errors
/// It cannot be opened, or holds fewer than `len` bytes (changed or
/// renamed since the checkpoint).
fn cut_back(path: &Path, len: u64) -> Result<File, String> {
    // A missing output is created only if nothing was committed to it: a
    // refused resume (another --out) leaves no empty file behind.
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create(len == 0)
        .truncate(false)
        .open(path);
    let f = match f {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && len > 0 => None,
        f => Some(f.map_err(|e| format!("cannot open {}: {e}", path.display()))?),
    };
    let have = match &f {
        Some(f) => f
            .metadata()
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?
            .len(),
        None => 0,
    };
    if have < len {
        return Err(format!(
            "{} holds {have} bytes, the checkpoint says {len} were committed to it: the output \
             was changed or renamed since (a resumed job goes on with the output it wrote: give \
             the same --out, or copy that file to the new name first; --fresh starts over)",
            path.display()
        ));
    }
    let f = f.expect("opened: it holds at least len > 0 bytes, or len is 0");
    f.set_len(len).map_err(|e| {
        format!(
            "cannot cut {} back: {e} (an exactly-once output with checkpoints is a regular \
             file, cut back to its committed length on resume)",
            path.display()
        )
    })?;
    Ok(f)
}

#[cfg(test)]
mod tests;
