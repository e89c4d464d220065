//! The partitioned sink in a job with checkpoints: part files cut back on
//! resume, markers and watermark files made visible once the checkpoint
//! that covers them is complete (exactly-once files).
//!
//! - **Barrier `n`.** Every open part file is written out (its buffer
//!   emptied) and handed to the checkpoint writer, which fsyncs it and its
//!   directory before it writes the worker's part of `n`
//!   ([`sync_before_part`], as the line sinks' pending files). The state
//!   saved names, for each open partition, its path, end (+ delay), rows
//!   and the part file's length in bytes; the partitions closed (watermark
//!   passed) whose marker is not yet written, with their rows and lengths;
//!   the partitions whose marker this worker wrote; and the worker's
//!   watermark at the barrier. Tens of bytes per partition, whatever the
//!   rows; the committed list grows by one entry per partition the worker
//!   wrote to (a day of q10's minutes: 1440 entries, ~40 KB).
//! - **Markers.** A partition closed between barriers `n - 1` and `n`
//!   (its part file synced and closed at once) gets its `_SUCCESS.NAME`
//!   once a checkpoint `≥ n` is complete (the first that covers all its
//!   rows; a later one covers them too, should `n` be abandoned). The
//!   watermark file says the watermark saved at the newest complete
//!   checkpoint: every partition ending at or before it is marked.
//! - **Resume** from checkpoint `k`, at build time (before any row): the
//!   output directory is walked for this worker's files (`part-NAME.csv`,
//!   `_SUCCESS.NAME`, temporary files of both); the part files of the
//!   partitions open or closed-unmarked at `k` are cut back to their saved
//!   length; their markers (a fallback to an older checkpoint may find
//!   them) are deleted; those of `k`'s committed partitions are kept; any
//!   other file of this worker (made after `k`) is deleted. Then `k`'s
//!   closed partitions are marked (`k` is complete: it covers them), the
//!   watermark file says `k`'s watermark, and the open part files are
//!   reopened at their end. A fresh start with checkpoints deletes every
//!   file of this worker's name first (a run that died before its first
//!   checkpoint).
//! - **End.** A job that ends (not stopped) closes every partition and
//!   marks them all at once (the rows are final, as a line sink commits
//!   everything at its end), writes its watermark file at `u64::MAX`
//!   (fsynced) and saves an *ended* state for later checkpoints. A resume
//!   from a checkpoint with that state, or from an older one while the
//!   watermark file already says `u64::MAX` (the worker ended after it),
//!   keeps the worker's files as they are and drops the rows replayed to
//!   it. A stopped job marks only what complete checkpoints cover.
//!
//! Markers and watermark files are written through a temporary file that is
//! fsynced before it is renamed; new partition directories are fsynced up to
//! the output directory when their part file is created.

use super::{Part, PartitionTail};
use air_runtime::dataflow::state::{read_u64, sync_before_part, StateSlot};
use air_runtime::dataflow::Checkpoints;
use std::collections::{HashMap, HashSet, VecDeque};
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The first 8 bytes of the partitioned sink's saved state.
const MAGIC: [u8; 8] = *b"AIRPART1";

/// Flag of a saved state: the worker had ended (its files are final).
const ENDED: u64 = 1;

/// A closed partition whose marker waits for a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Closed {
    /// The barrier after which it closed (0: no barrier yet since): its
    /// marker is written once that checkpoint, or a newer one, is complete.
    wait: u64,
    /// Its path under the output directory.
    path: String,
    rows: u64,
    /// The part file's length.
    bytes: u64,
}

/// An open partition as saved: path, end + delay (ms), rows, part file
/// length (bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
struct OpenPart {
    path: String,
    due: u64,
    rows: u64,
    bytes: u64,
}

/// What a barrier saves (module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Saved {
    ended: bool,
    /// The worker's watermark at the barrier, ms.
    wm: u64,
    open: Vec<OpenPart>,
    /// Closed, not yet marked (`wait` not saved: the checkpoint resumed
    /// from covers them).
    closed: Vec<Closed>,
    /// Marked by this worker.
    committed: Vec<String>,
}

fn put(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// Reads a string saved by [`put_str`] at `*at`, moving `*at` past it.
fn get_str(state: &[u8], at: &mut usize) -> Result<String, String> {
    let n = read_u64(state, *at)? as usize;
    *at += 8;
    let s = state
        .get(*at..at.saturating_add(n))
        .and_then(|b| std::str::from_utf8(b).ok())
        .ok_or("a saved partition path is cut short")?;
    super::check_path(s)?;
    *at += n;
    Ok(s.to_string())
}

impl Saved {
    /// `[magic, flags, wm, n, (path, due, rows, bytes)…, n, (path, rows,
    /// bytes)…, n, path…]`: little-endian `u64`s, a path as its length and
    /// UTF-8 bytes.
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + 48 * (self.open.len() + self.closed.len()));
        out.extend_from_slice(&MAGIC);
        put(&mut out, if self.ended { ENDED } else { 0 });
        put(&mut out, self.wm);
        put(&mut out, self.open.len() as u64);
        for p in &self.open {
            put_str(&mut out, &p.path);
            put(&mut out, p.due);
            put(&mut out, p.rows);
            put(&mut out, p.bytes);
        }
        put(&mut out, self.closed.len() as u64);
        for c in &self.closed {
            put_str(&mut out, &c.path);
            put(&mut out, c.rows);
            put(&mut out, c.bytes);
        }
        put(&mut out, self.committed.len() as u64);
        for p in &self.committed {
            put_str(&mut out, p);
        }
        out
    }

    /// What [`Saved::encode`] wrote.
    fn parse(state: &[u8]) -> Result<Saved, String> {
        if state.get(..8) != Some(&MAGIC[..]) {
            return Err(
                "its saved state is not the partitioned sink's (another air version: \
                 finish the job with the air that began it, or start over with --fresh)"
                    .into(),
            );
        }
        let mut s = Saved {
            ended: read_u64(state, 8)? & ENDED != 0,
            wm: read_u64(state, 16)?,
            ..Saved::default()
        };
        let mut at = 24;
        let count = |at: &mut usize| -> Result<u64, String> {
            let n = read_u64(state, *at)?;
            *at += 8;
            Ok(n)
        };
        for _ in 0..count(&mut at)? {
            let path = get_str(state, &mut at)?;
            let (due, rows, bytes) = (
                read_u64(state, at)?,
                read_u64(state, at + 8)?,
                read_u64(state, at + 16)?,
            );
            at += 24;
            s.open.push(OpenPart {
                path,
                due,
                rows,
                bytes,
            });
        }
        for _ in 0..count(&mut at)? {
            let path = get_str(state, &mut at)?;
            let (rows, bytes) = (read_u64(state, at)?, read_u64(state, at + 8)?);
            at += 16;
            s.closed.push(Closed {
                wait: 0,
                path,
                rows,
                bytes,
            });
        }
        for _ in 0..count(&mut at)? {
            s.committed.push(get_str(state, &mut at)?);
        }
        if at != state.len() {
            return Err(format!(
                "its saved state has {} bytes after its end",
                state.len() - at
            ));
        }
        Ok(s)
    }
}

/// The partitioned sink's side of checkpoints (module docs).
pub(super) struct Ck {
    ck: Arc<Checkpoints>,
    /// The sink's state slot (`None` in unit tests, which take the states
    /// [`PartitionTail::save`] returns).
    slot: Option<StateSlot>,
    /// The newest barrier seen.
    pub(super) last_barrier: u64,
    /// Barriers seen.
    pub(super) barriers: u64,
    /// Closed partitions whose marker is not yet written, oldest first.
    unmarked: VecDeque<Closed>,
    /// (barrier, the worker's watermark then), of checkpoints not yet
    /// known complete, oldest first.
    wms: VecDeque<(u64, u64)>,
    /// The watermark the watermark file says: that of the newest complete
    /// checkpoint (ms).
    pub(super) visible_wm: u64,
    /// Partitions this worker marked (paths under the output directory).
    committed: Vec<String>,
}

impl Ck {
    /// Partition `part` (under `root`) was closed: synced, its marker
    /// waits for the next barrier's checkpoint.
    pub(super) fn closed(&mut self, root: &Path, part: &Part) {
        let path = part
            .dir
            .strip_prefix(root)
            .expect("a partition's directory is under the output's")
            .to_string_lossy()
            .into_owned();
        self.unmarked.push_back(Closed {
            wait: 0,
            path,
            rows: part.rows,
            bytes: part.bytes,
        });
    }

    /// The newest barrier whose checkpoint is complete, as far as known
    /// (a stat of its manifest per pending checkpoint, newest first, until
    /// one is).
    fn complete_through(&self) -> u64 {
        for &(id, _) in self.wms.iter().rev() {
            if self.ck.is_complete(id) {
                return id;
            }
        }
        0
    }
}

/// fsyncs `dir` and every directory above it up to `root`, and `root`'s
/// parent (their entries for the directories just made).
///
/// # Errors
/// A directory cannot be opened or synced (naming it).
pub(super) fn sync_dirs(dir: &Path, root: &Path) -> Result<(), String> {
    let mut d = Some(dir);
    while let Some(at) = d {
        sync_dir(at)?;
        if at == root {
            if let Some(parent) = root.parent().filter(|p| !p.as_os_str().is_empty()) {
                sync_dir(parent)?;
            }
            break;
        }
        d = at.parent();
    }
    Ok(())
}

fn sync_dir(dir: &Path) -> Result<(), String> {
    File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(|e| format!("syncing directory {}: {e}", dir.display()))
}

/// Writes `bytes` to `path` through a temporary file, fsynced, renamed
/// over it (a reader sees the old content or the new; the new content is
/// on disk before its name is).
///
/// # Errors
/// The temporary file cannot be written, synced or renamed (naming it).
pub(super) fn write_durable(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    File::create(&tmp)
        .and_then(|mut f| {
            f.write_all(bytes)?;
            f.sync_data()
        })
        .map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path)
        .map_err(|e| format!("cannot rename {} to {}: {e}", tmp.display(), path.display()))
}

/// Opens `path` and cuts it back to `len` bytes; the file is positioned
/// at its end.
///
/// # Errors
/// It is missing or holds fewer than `len` bytes (changed since the
/// checkpoint), or cannot be cut.
fn cut_back(path: &Path, len: u64) -> Result<File, String> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| {
            format!(
                "cannot open {}, which the checkpoint names with {len} bytes: {e} (the \
                 output directory was changed since; --fresh starts over)",
                path.display()
            )
        })?;
    let have = f
        .metadata()
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?
        .len();
    if have < len {
        return Err(format!(
            "{} holds {have} bytes, the checkpoint says {len}: the output directory was \
             changed since (--fresh starts over)",
            path.display()
        ));
    }
    f.set_len(len)
        .and_then(|_| f.seek(SeekFrom::End(0)))
        .map_err(|e| format!("cannot cut {} back to {len} bytes: {e}", path.display()))?;
    Ok(f)
}

/// A file of one worker under the output directory.
#[derive(Debug, PartialEq, Eq)]
enum Kind {
    Part,
    Marker,
    /// A temporary marker or watermark file (a write cut short).
    Temporary,
    Watermark,
}

/// This worker's files under `root` (named by `name`): (the partition
/// path, or "" at the root, kind). Another worker's files are not touched.
fn files_of(root: &Path, name: &str) -> Result<Vec<(String, Kind)>, String> {
    let (part, marker, marker_tmp) = (
        format!("part-{name}.csv"),
        format!("_SUCCESS.{name}"),
        format!("_SUCCESS.{name}.tmp"),
    );
    let (wm, wm_tmp) = (
        format!("_WATERMARK.{name}"),
        format!("_WATERMARK.{name}.tmp"),
    );
    let mut out = Vec::new();
    let mut dirs = vec![String::new()];
    while let Some(rel) = dirs.pop() {
        let dir = if rel.is_empty() {
            root.to_path_buf()
        } else {
            root.join(&rel)
        };
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && rel.is_empty() => return Ok(out),
            Err(e) => return Err(format!("cannot list {}: {e}", dir.display())),
        };
        for e in entries {
            let e = e.map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
            let Ok(file) = e.file_name().into_string() else {
                continue;
            };
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            let child = if rel.is_empty() {
                file.clone()
            } else {
                format!("{rel}/{file}")
            };
            if is_dir {
                dirs.push(child);
                continue;
            }
            let kind = if file == part {
                Kind::Part
            } else if file == marker {
                Kind::Marker
            } else if file == marker_tmp || (rel.is_empty() && file == wm_tmp) {
                Kind::Temporary
            } else if rel.is_empty() && file == wm {
                Kind::Watermark
            } else {
                continue;
            };
            out.push((rel.clone(), kind));
        }
    }
    Ok(out)
}

impl<F, W> PartitionTail<F, W> {
    /// Joins the job's checkpoints at build time: restores what the
    /// checkpoint resumed from saved in `slot` (or, a fresh start, deletes
    /// this worker's files of a run that died before its first
    /// checkpoint), before any row comes.
    pub(super) fn join_checkpoints(
        &mut self,
        ck: Arc<Checkpoints>,
        mut slot: StateSlot,
    ) -> Result<(), String> {
        let restored = slot.take_restored();
        self.join_with(ck, Some(slot), restored)
    }

    /// [`PartitionTail::join_checkpoints`] resuming from `restored` (the
    /// state saved at the checkpoint resumed from; `None`: a fresh start).
    fn join_with(
        &mut self,
        ck: Arc<Checkpoints>,
        slot: Option<StateSlot>,
        restored: Option<Vec<u8>>,
    ) -> Result<(), String> {
        self.ck = Some(Ck {
            ck,
            slot,
            last_barrier: 0,
            barriers: 0,
            unmarked: VecDeque::new(),
            wms: VecDeque::new(),
            visible_wm: 0,
            committed: Vec::new(),
        });
        match restored {
            Some(state) => self.restore(Saved::parse(&state)?),
            None => self.clear(),
        }
    }

    /// A fresh start: every file of this worker's name under the output
    /// directory goes.
    fn clear(&mut self) -> Result<(), String> {
        for (rel, kind) in files_of(&self.cfg.dir, &self.name)? {
            let p = self.file_path(&rel, &kind);
            std::fs::remove_file(&p)
                .map_err(|e| format!("cannot delete {} (of an earlier run): {e}", p.display()))?;
        }
        Ok(())
    }

    /// The path of a file [`files_of`] found.
    fn file_path(&self, rel: &str, kind: &Kind) -> PathBuf {
        let dir = self.cfg.dir.join(rel);
        let name = &self.name;
        match kind {
            Kind::Part => dir.join(format!("part-{name}.csv")),
            Kind::Marker => dir.join(format!("_SUCCESS.{name}")),
            Kind::Temporary if rel.is_empty() => dir.join(format!("_WATERMARK.{name}.tmp")),
            Kind::Temporary => dir.join(format!("_SUCCESS.{name}.tmp")),
            Kind::Watermark => dir.join(format!("_WATERMARK.{name}")),
        }
    }

    /// Resumes from `saved` (module docs).
    fn restore(&mut self, saved: Saved) -> Result<(), String> {
        let root = self.cfg.dir.clone();
        let wm_file = root.join(format!("_WATERMARK.{}", self.name));
        let final_text = format!("watermark_ms={} workers={}\n", u64::MAX, self.workers);
        let ended_since = std::fs::read(&wm_file).is_ok_and(|b| b == final_text.as_bytes());
        if saved.ended || ended_since {
            // This worker's files are final: keep them, drop every row.
            self.drop_all = true;
            self.wm = u64::MAX;
            let ck = self.ck.as_mut().expect("joined");
            ck.visible_wm = u64::MAX;
            if ended_since {
                self.wm_written = Some(u64::MAX);
            } else {
                // Written at the worker's end; missing or changed since.
                self.write_watermark()?;
            }
            return Ok(());
        }
        let open: HashSet<&str> = saved.open.iter().map(|p| p.path.as_str()).collect();
        let closed: HashSet<&str> = saved.closed.iter().map(|c| c.path.as_str()).collect();
        let committed: HashSet<&str> = saved.committed.iter().map(String::as_str).collect();
        for (rel, kind) in files_of(&root, &self.name)? {
            let r = rel.as_str();
            let remove = match kind {
                Kind::Part => !open.contains(r) && !closed.contains(r) && !committed.contains(r),
                // Markers of open and closed partitions are rewritten when
                // they close again, or now.
                Kind::Marker => !committed.contains(r),
                Kind::Temporary => true,
                Kind::Watermark => false,
            };
            if remove {
                let p = self.file_path(&rel, &kind);
                std::fs::remove_file(&p).map_err(|e| {
                    format!(
                        "cannot delete {} (written after the checkpoint resumed from): {e}",
                        p.display()
                    )
                })?;
            }
        }
        // Closed at the checkpoint resumed from, which covers them: marked.
        for c in &saved.closed {
            let dir = root.join(&c.path);
            drop(cut_back(
                &dir.join(format!("part-{}.csv", self.name)),
                c.bytes,
            )?);
            let marker = dir.join(format!("_SUCCESS.{}", self.name));
            write_durable(
                &marker,
                format!("rows={} bytes={}\n", c.rows, c.bytes).as_bytes(),
            )?;
            self.commits += 1;
        }
        let mut opened = HashMap::with_capacity(saved.open.len());
        for p in &saved.open {
            let dir = root.join(&p.path);
            let file = cut_back(&dir.join(format!("part-{}.csv", self.name)), p.bytes)?;
            self.min_end = self.min_end.min(p.due);
            opened.insert(
                p.path.clone(),
                Part {
                    dir,
                    due: p.due,
                    file: Some(file),
                    buf: Vec::new(),
                    rows: p.rows,
                    bytes: p.bytes,
                    sync_up_to: Some(root.clone()),
                },
            );
        }
        self.open = opened;
        self.wm = saved.wm;
        let ck = self.ck.as_mut().expect("joined");
        ck.committed = saved.committed;
        ck.committed
            .extend(saved.closed.into_iter().map(|c| c.path));
        ck.visible_wm = saved.wm;
        self.write_watermark()
    }

    /// Barrier `id`: every open part file written out and handed to the
    /// checkpoint writer to sync; the state saved in the slot (module
    /// docs). Returns the state (`None`: an old barrier, nothing saved).
    pub(super) fn save(&mut self, id: u64) -> Result<Option<Vec<u8>>, String> {
        let ck = self.ck.as_mut().expect("checkpoints");
        if id <= ck.last_barrier {
            return Ok(None);
        }
        ck.last_barrier = id;
        ck.barriers += 1;
        if self.drop_all {
            let state = Saved {
                ended: true,
                ..Saved::default()
            }
            .encode();
            if let Some(slot) = &ck.slot {
                slot.save(id, state.clone());
            }
            return Ok(Some(state));
        }
        let mut saved = Saved {
            ended: false,
            wm: self.wm,
            ..Saved::default()
        };
        let header = self.cfg.header.as_deref();
        for (path, part) in self.open.iter_mut() {
            part.write_out(&self.name, header)?;
            if let Some(f) = &part.file {
                let file = part.path(&self.name);
                let dup = f
                    .try_clone()
                    .map_err(|e| format!("cannot sync {}: {e}", file.display()))?;
                sync_before_part(id, dup, file);
            }
            saved.open.push(OpenPart {
                path: path.clone(),
                due: part.due,
                rows: part.rows,
                bytes: part.bytes,
            });
        }
        for c in ck.unmarked.iter_mut() {
            if c.wait == 0 {
                c.wait = id;
            }
        }
        saved.closed = ck.unmarked.iter().cloned().collect();
        saved.committed = ck.committed.clone();
        ck.wms.push_back((id, self.wm));
        let state = saved.encode();
        if let Some(slot) = &ck.slot {
            slot.save(id, state.clone());
        }
        self.publish(false)?;
        Ok(Some(state))
    }

    /// Writes the markers of the closed partitions a complete checkpoint
    /// covers (`all`: every one, the job ended) and moves the watermark the
    /// watermark file says to the newest complete checkpoint's.
    pub(super) fn publish(&mut self, all: bool) -> Result<(), String> {
        let ck = self.ck.as_mut().expect("checkpoints");
        if ck.unmarked.is_empty() && ck.wms.is_empty() && !all {
            return Ok(());
        }
        let through = if all { u64::MAX } else { ck.complete_through() };
        while let Some(&(id, wm)) = ck.wms.front() {
            if id > through {
                break;
            }
            ck.visible_wm = ck.visible_wm.max(wm);
            ck.wms.pop_front();
        }
        while let Some(c) = ck.unmarked.front() {
            if !all && (c.wait == 0 || c.wait > through) {
                break;
            }
            let c = ck.unmarked.pop_front().expect("front");
            let marker = self
                .cfg
                .dir
                .join(&c.path)
                .join(format!("_SUCCESS.{}", self.name));
            write_durable(
                &marker,
                format!("rows={} bytes={}\n", c.rows, c.bytes).as_bytes(),
            )?;
            ck.committed.push(c.path);
            self.commits += 1;
            self.fresh_commits = true;
        }
        if all {
            ck.visible_wm = self.wm;
        }
        Ok(())
    }

    /// End of stream with checkpoints (module docs).
    pub(super) fn end_checkpointed(&mut self, final_wm: u64) -> Result<(), String> {
        // Stopped, or failing (a source ended on an error): not final.
        let stopped = !air_runtime::dataflow::state::ends_for_good();
        if !self.drop_all {
            self.advance(final_wm)?;
            self.publish(!stopped)?;
            // Stopped: what stays open is flushed, not committed (a resume
            // cuts it back to its checkpoint's length).
            let keys: Vec<String> = self.open.keys().cloned().collect();
            for k in keys {
                let mut part = self.open.remove(&k).expect("listed");
                part.write_out(&self.name, self.cfg.header.as_deref())?;
                self.bytes += part.bytes;
                self.uncommitted += 1;
            }
            self.write_watermark()?;
        }
        if !stopped {
            let ended = Saved {
                ended: true,
                ..Saved::default()
            };
            let ck = self.ck.as_ref().expect("checkpoints");
            if let Some(slot) = &ck.slot {
                slot.ended(ended.encode());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
