//! The on-disk store for checkpoints.
//!
//! Checkpoint `n` (≥ 1) of a job with `W` workers (the global count over
//! every rank) is the directory `DIR/chk-{n:08}/` holding one part file per
//! worker, `part-{w:05}` (`w` the global worker index), and, once every part
//! is durable, `MANIFEST.json`. Several processes (MPI ranks, possibly on
//! different nodes over a shared file system) and several threads write
//! parts into the same directory at once, without a coordinator: whoever
//! writes a part and then sees all `W` parts present writes the manifest
//! (racing writers write the same content; the rename is atomic) and
//! applies retention.
//!
//! Every file is written under a temporary name in its final directory,
//! fsynced, renamed into place and the directory fsynced, so a file named
//! `part-*` or `MANIFEST.json` is always complete.
//!
//! ## Part file (binary, little-endian)
//!
//! | bytes | content |
//! |-------|---------|
//! | 8     | magic `b"AIRPART1"` |
//! | 4     | format version, u32 ([`FORMAT_VERSION`]) |
//! | 4     | reserved, u32 (0) |
//! | 8 × 4 | job signature, checkpoint id, worker, workers (u64 each) |
//! | per slot | slot id u32, reserved u32 (0), payload length u64 (bytes), the payload, zero padding to a multiple of 16 |
//! | 4     | CRC-32 (crc32fast) of every byte before it |
//! | 12    | zero |
//!
//! The header is 48 bytes and every slot header 16, so every payload starts
//! at a 16-byte-aligned file offset; [`Part`] keeps the file in a 16-byte
//! aligned buffer, so payloads can be read in place (rkyv).
//!
//! ## Manifest
//!
//! `{"format":1,"job":"<signature, 16 hex digits>","checkpoint":n,"workers":W,
//! "parts":[{"worker":w,"file":"part-00003","bytes":N,"crc32":C}],"written_unix_ms":T}`
//! where `crc32` is the part's trailer CRC.
//!
//! ## Retention
//!
//! After the manifest of `n` is written: the newest `retained` complete
//! checkpoints are kept, older complete ones are deleted, incomplete
//! directories with an id below `n` (abandoned) are deleted; a directory with
//! an id above `n` is never deleted. A directory is deleted by renaming it
//! to `.del-chk-…` first (atomic), then removing the renamed tree, so a slow
//! writer can never complete a half-deleted checkpoint. Races between
//! deleting processes are harmless (`NotFound` is ignored).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rkyv::util::AlignedVec;
use serde::{Deserialize, Serialize};

mod error;
mod files;
pub use error::CheckpointError;
use error::{corrupt, io_err};
use files::*;

/// The part-file and manifest format version this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// The first 8 bytes of every part file.
pub const PART_MAGIC: [u8; 8] = *b"AIRPART1";

/// Name of the manifest file in a checkpoint directory.
pub const MANIFEST: &str = "MANIFEST.json";

/// Bytes of the part-file header (magic, version, reserved, signature, id,
/// worker, workers).
const HEADER: usize = 48;
/// Bytes of a slot header (slot id, reserved, payload length).
const SLOT_HEADER: usize = 16;
/// Bytes of the trailer (CRC-32 and 12 zero bytes).
const TRAILER: usize = 16;
/// Alignment of payloads, and of the file's length, in bytes (a power of two:
/// `x & (ALIGN - 1)` is `x % ALIGN`).
const ALIGN: usize = 16;

/// Makes temporary names unique among the threads of this process (the pid
/// and the worker index make them unique among processes and nodes).
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// The checkpoint store in one directory for one job.
///
/// Cheap to share between threads (`&Store` is enough to write parts).
#[derive(Debug, Clone)]
pub struct Store {
    /// The directory holding the `chk-*` directories.
    dir: PathBuf,
    /// The job's signature, written into every part and manifest.
    signature: u64,
    /// Global worker count (parts per checkpoint).
    workers: usize,
    /// Complete checkpoints kept by retention (≥ 1).
    retained: usize,
}

/// One part file read back and verified: the whole file in a 16-byte
/// aligned buffer, and where each slot's payload lies in it.
pub struct Part {
    /// The file's bytes (16-byte aligned start).
    data: AlignedVec<16>,
    /// (slot id, payload offset in bytes, payload length in bytes), in file order.
    slots: Vec<(u32, usize, usize)>,
    /// The file read.
    path: PathBuf,
}

impl std::fmt::Debug for Part {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Part")
            .field("path", &self.path)
            .field("bytes", &self.data.len())
            .field("slots", &self.slots)
            .finish()
    }
}

impl Part {
    /// The payload of `slot` (its bytes; may be empty), starting at a 16-byte
    /// aligned address so rkyv can access it in place; `None` if the part has
    /// no such slot.
    pub fn slot(&self, slot: u32) -> Option<&[u8]> {
        self.slots
            .iter()
            .find(|(s, _, _)| *s == slot)
            .map(|&(_, start, len)| &self.data[start..start + len])
    }

    /// Every slot as (slot id, payload), in file order (the order given to
    /// [`Store::write_part`]); every payload 16-byte aligned.
    pub fn slots(&self) -> impl Iterator<Item = (u32, &[u8])> {
        self.slots
            .iter()
            .map(|&(s, start, len)| (s, &self.data[start..start + len]))
    }

    /// Size of the whole part file, bytes (header, slots, padding, trailer).
    pub fn bytes(&self) -> usize {
        self.data.len()
    }

    /// The file this part was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// One part as listed in a manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartEntry {
    /// Global worker index.
    pub worker: usize,
    /// The part file (`DIR/chk-{n:08}/part-{w:05}`).
    pub path: PathBuf,
    /// Size of the part file, bytes.
    pub bytes: u64,
    /// The part's trailer CRC-32.
    pub crc32: u32,
}

/// A complete checkpoint whose manifest and every part were read back and
/// verified ([`Store::newest_complete`]).
#[derive(Debug, Clone)]
pub struct Complete {
    /// Checkpoint id (≥ 1).
    pub id: u64,
    /// The checkpoint's directory, `DIR/chk-{id:08}`.
    pub dir: PathBuf,
    /// Its manifest file, `DIR/chk-{id:08}/MANIFEST.json`.
    pub manifest: PathBuf,
    /// The job's workers when it was taken (all ranks): its part count.
    /// Another count than this job's is a rescale.
    pub workers: usize,
    /// Every part, indexed by global worker.
    pub parts: Vec<PartEntry>,
    /// When the manifest was written, ms since the Unix epoch (of whichever
    /// racing writer's manifest won).
    pub written_unix_ms: u64,
}

impl Complete {
    /// Total size of all parts, bytes.
    pub fn bytes(&self) -> u64 {
        self.parts.iter().map(|p| p.bytes).sum()
    }
}

/// What one [`Store::write_part`] call did.
#[derive(Debug, Clone, Default)]
pub struct Written {
    /// Size of the part file written, bytes (0 if skipped).
    pub bytes: u64,
    /// True if this call wrote the checkpoint's manifest (it saw every part
    /// present). Racing writers may both report true; the content is the same.
    pub completed: bool,
    /// True if the part was not written because a checkpoint with this id or
    /// a newer one is already complete.
    pub skipped: bool,
    /// Wall time of the whole call (part, manifest, retention).
    pub write: Duration,
    /// Retention problems other than `NotFound` (a directory that could not
    /// be deleted, each naming its path); the checkpoint itself is fine. For
    /// the caller to print.
    pub warnings: Vec<String>,
}

/// The manifest as stored (`MANIFEST.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Manifest {
    format: u32,
    job: String,
    checkpoint: u64,
    workers: u64,
    parts: Vec<ManifestPart>,
    written_unix_ms: u64,
}

/// One part in the stored manifest.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ManifestPart {
    worker: u64,
    file: String,
    bytes: u64,
    crc32: u32,
}

/// A checkpoint directory found by [`Store::list`].
struct Listed {
    id: u64,
    path: PathBuf,
    complete: bool,
}

impl Store {
    /// Opens the store in `dir`, creating the directory (and its parents) if
    /// needed. `signature` identifies the job (written into every part and
    /// manifest; a checkpoint of another signature is refused on restore),
    /// `workers` is the global worker count (≥ 1: parts per checkpoint),
    /// `retained` the number of complete checkpoints kept (≥ 1).
    ///
    /// Errors: [`CheckpointError::Invalid`] if `workers` or `retained` is 0;
    /// [`CheckpointError::Io`] naming `dir` if it cannot be created.
    pub fn open(
        dir: impl Into<PathBuf>,
        signature: u64,
        workers: usize,
        retained: usize,
    ) -> Result<Store, CheckpointError> {
        let dir = dir.into();
        if workers == 0 || retained == 0 {
            return Err(CheckpointError::Invalid {
                path: dir,
                why: format!("workers ({workers}) and retained ({retained}) must be at least 1"),
            });
        }
        if dir.exists() && !dir.is_dir() {
            return Err(CheckpointError::Invalid {
                path: dir,
                why: "not a directory (a checkpoint directory must be one)".into(),
            });
        }
        fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        Ok(Store {
            dir,
            signature,
            workers,
            retained,
        })
    }

    /// The directory holding the `chk-*` directories.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The job signature given to [`Store::open`].
    pub fn signature(&self) -> u64 {
        self.signature
    }

    /// The global worker count (parts per checkpoint).
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// Complete checkpoints kept by retention.
    pub fn retained(&self) -> usize {
        self.retained
    }

    /// The directory of checkpoint `id`: `DIR/chk-{id:08}`.
    pub fn checkpoint_dir(&self, id: u64) -> PathBuf {
        self.dir.join(chk_name(id))
    }

    /// The part file of `worker` in checkpoint `id`: `DIR/chk-{id:08}/part-{worker:05}`.
    pub fn part_path(&self, id: u64, worker: usize) -> PathBuf {
        self.checkpoint_dir(id).join(part_name(worker))
    }

    /// The checkpoint directories in DIR (any order).
    fn list(&self) -> Result<Vec<Listed>, CheckpointError> {
        let mut out = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(io_err(&self.dir))? {
            let entry = match entry {
                Ok(e) => e,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io_err(&self.dir)(e)),
            };
            let name = entry.file_name();
            let Some(id) = name
                .to_str()
                .and_then(parse_chk)
                .filter(|&id| name.to_str() == Some(chk_name(id).as_str()))
            else {
                continue;
            };
            let path = entry.path();
            if !path.is_dir() {
                continue;
            }
            let complete = path.join(MANIFEST).exists();
            out.push(Listed { id, path, complete });
        }
        Ok(out)
    }

    /// Complete checkpoint ids on disk (those whose directory holds a
    /// `MANIFEST.json`, not verified), ascending. Empty if DIR cannot be read.
    pub fn complete_ids(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self
            .list()
            .unwrap_or_default()
            .into_iter()
            .filter(|l| l.complete)
            .map(|l| l.id)
            .collect();
        ids.sort_unstable();
        ids
    }

    /// True if checkpoint `id` is complete: its directory holds a
    /// `MANIFEST.json` (one `stat`; the parts are not verified).
    pub fn is_complete(&self, id: u64) -> bool {
        self.checkpoint_dir(id).join(MANIFEST).is_file()
    }

    /// Writes global worker `worker`'s part of checkpoint `id` (≥ 1) with
    /// these slots (slot id, payload bytes; payloads of any length, slot ids
    /// distinct), durably: a temporary file
    /// `.part-{w:05}.{pid}.{counter}.tmp` in the checkpoint's directory is
    /// written, fsynced, renamed to `part-{w:05}`, and the directory fsynced.
    /// Then, if every part `0..workers` is present, writes `MANIFEST.json`
    /// the same way (`completed`) and applies retention (module docs).
    ///
    /// If a checkpoint with id ≥ `id` is already complete the call writes
    /// nothing and returns `skipped` (a slow writer of an abandoned
    /// checkpoint).
    ///
    /// Errors: [`CheckpointError::Invalid`] for `id` 0, `worker ≥ workers`
    /// or duplicate slot ids; [`CheckpointError::Io`] naming the file or
    /// directory that failed; [`CheckpointError::Corrupt`] /
    /// [`CheckpointError::OtherJob`] / [`CheckpointError::Version`] if
    /// another part's header is unusable when writing the manifest. A
    /// failure never leaves an incomplete `part-*` or `MANIFEST.json`
    /// (temporary files are removed); a failure after this part was renamed
    /// into place leaves that part, complete.
    pub fn write_part(
        &self,
        id: u64,
        worker: usize,
        slots: &[(u32, &[u8])],
    ) -> Result<Written, CheckpointError> {
        let start = Instant::now();
        let chk = self.checkpoint_dir(id);
        if id == 0 || worker >= self.workers {
            return Err(CheckpointError::Invalid {
                path: chk,
                why: format!(
                    "checkpoint id {id} (must be ≥ 1), worker {worker} (must be < {})",
                    self.workers
                ),
            });
        }
        for (i, (s, _)) in slots.iter().enumerate() {
            if slots[..i].iter().any(|(t, _)| t == s) {
                return Err(CheckpointError::Invalid {
                    path: chk.join(part_name(worker)),
                    why: format!("slot {s} given twice"),
                });
            }
        }
        let listed = self.list()?;
        if listed.iter().any(|l| l.complete && l.id >= id) {
            return Ok(Written {
                skipped: true,
                write: start.elapsed(),
                ..Written::default()
            });
        }

        let bytes = encode_part(
            self.signature,
            id,
            worker as u64,
            self.workers as u64,
            slots,
        );
        fs::create_dir_all(&chk).map_err(io_err(&chk))?;
        let name = part_name(worker);
        write_atomic(
            &chk,
            &format!(".{name}.{}.tmp", temp_suffix()),
            &name,
            &bytes,
        )?;

        let mut written = Written {
            bytes: bytes.len() as u64,
            ..Written::default()
        };
        if !chk.join(MANIFEST).exists() && self.all_parts_present(&chk)? {
            self.write_manifest(id, worker, &chk)?;
            written.completed = true;
            written.warnings = self.retain(id, worker);
        }
        written.write = start.elapsed();
        Ok(written)
    }

    /// True if every `part-{w:05}`, `w < workers`, exists in `chk`.
    fn all_parts_present(&self, chk: &Path) -> Result<bool, CheckpointError> {
        let mut present = vec![false; self.workers];
        for entry in fs::read_dir(chk).map_err(io_err(chk))? {
            let entry = entry.map_err(io_err(chk))?;
            let name = entry.file_name();
            let Some(w) = name
                .to_str()
                .and_then(|n| n.strip_prefix("part-"))
                .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|d| d.parse::<usize>().ok())
            else {
                continue;
            };
            if w < self.workers {
                present[w] = true;
            }
        }
        Ok(present.into_iter().all(|p| p))
    }

    /// Writes `chk/MANIFEST.json` for checkpoint `id` from the parts' sizes
    /// and trailer CRCs (headers checked, bodies not read). `writer` (this
    /// call's worker) makes the temporary name unique across nodes.
    fn write_manifest(&self, id: u64, writer: usize, chk: &Path) -> Result<(), CheckpointError> {
        let mut parts = Vec::with_capacity(self.workers);
        for w in 0..self.workers {
            let name = part_name(w);
            let (bytes, crc32) = self.part_summary(&chk.join(&name), id, w)?;
            parts.push(ManifestPart {
                worker: w as u64,
                file: name,
                bytes,
                crc32,
            });
        }
        let manifest = Manifest {
            format: FORMAT_VERSION,
            job: format!("{:016x}", self.signature),
            checkpoint: id,
            workers: self.workers as u64,
            parts,
            written_unix_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
        };
        let mut json = serde_json::to_vec_pretty(&manifest).expect("manifest serializes");
        json.push(b'\n');
        let tmp = format!(".{MANIFEST}.w{writer:05}.{}.tmp", temp_suffix());
        write_atomic(chk, &tmp, MANIFEST, &json)
    }

    /// Size and trailer CRC of the part file at `path`, after checking its
    /// size and header (not its checksum: [`Store::read_part`] does that).
    fn part_summary(
        &self,
        path: &Path,
        id: u64,
        worker: usize,
    ) -> Result<(u64, u32), CheckpointError> {
        let mut file = File::open(path).map_err(io_err(path))?;
        let len = file.metadata().map_err(io_err(path))?.len();
        if len < (HEADER + TRAILER) as u64 || len & (ALIGN as u64 - 1) != 0 {
            return Err(corrupt(
                path,
                format!("truncated or malformed: {len} bytes"),
            ));
        }
        let mut header = [0u8; HEADER];
        file.read_exact(&mut header).map_err(io_err(path))?;
        self.check_header(path, &header, id, worker, self.workers)?;
        let mut trailer = [0u8; TRAILER];
        file.seek(SeekFrom::Start(len - TRAILER as u64))
            .and_then(|_| file.read_exact(&mut trailer))
            .map_err(io_err(path))?;
        Ok((len, le_u32(&trailer, 0)))
    }

    /// Checks the magic and format version at the start of a part file.
    fn check_magic_version(path: &Path, header: &[u8]) -> Result<(), CheckpointError> {
        if header[..8] != PART_MAGIC {
            return Err(corrupt(path, "bad magic (not a part file)"));
        }
        let version = le_u32(header, 8);
        if version != FORMAT_VERSION {
            return Err(CheckpointError::Version {
                path: path.to_path_buf(),
                found: version,
            });
        }
        Ok(())
    }

    /// Checks a whole part header: magic, version, reserved, signature,
    /// checkpoint id, worker, workers.
    fn check_header(
        &self,
        path: &Path,
        header: &[u8],
        id: u64,
        worker: usize,
        workers: usize,
    ) -> Result<(), CheckpointError> {
        Self::check_magic_version(path, header)?;
        if le_u32(header, 12) != 0 {
            return Err(corrupt(path, "reserved header field is not 0"));
        }
        let signature = le_u64(header, 16);
        if signature != self.signature {
            return Err(CheckpointError::OtherJob {
                path: path.to_path_buf(),
                found: signature,
                expected: self.signature,
            });
        }
        let (hid, hworker, hworkers) = (le_u64(header, 24), le_u64(header, 32), le_u64(header, 40));
        if (hid, hworker, hworkers) != (id, worker as u64, workers as u64) {
            return Err(corrupt(
                path,
                format!(
                    "header says checkpoint {hid}, worker {hworker} of {hworkers}; expected checkpoint {id}, worker {worker} of {workers}"
                ),
            ));
        }
        Ok(())
    }

    /// Reads worker `worker`'s part of checkpoint `id` fully and verifies it:
    /// size (a multiple of 16, ≥ 64 bytes), magic, format version, CRC,
    /// signature, checkpoint id, worker, workers, and the slot layout.
    ///
    /// Errors (each naming the part file): [`CheckpointError::Io`] (missing
    /// or unreadable), [`CheckpointError::Corrupt`] (truncated, bad magic,
    /// checksum mismatch, inconsistent header or slots),
    /// [`CheckpointError::Version`] (intact magic, another format version:
    /// checked before the CRC, as another version's layout may differ),
    /// [`CheckpointError::OtherJob`] (checksum fine, another signature).
    pub fn read_part(&self, id: u64, worker: usize) -> Result<Part, CheckpointError> {
        self.read_part_of(id, worker, self.workers)
    }

    /// [`Store::read_part`] of a checkpoint taken by a job of `workers`
    /// workers (a job resumed at another worker count reads every part of
    /// the checkpoint it rescales from).
    ///
    /// # Errors
    /// As [`Store::read_part`].
    pub fn read_part_of(
        &self,
        id: u64,
        worker: usize,
        workers: usize,
    ) -> Result<Part, CheckpointError> {
        let path = self.part_path(id, worker);
        let mut file = File::open(&path).map_err(io_err(&path))?;
        let len = file.metadata().map_err(io_err(&path))?.len();
        let mut data =
            AlignedVec::<16>::with_capacity(usize::try_from(len).unwrap_or(0).saturating_add(1));
        data.extend_from_reader(&mut file).map_err(io_err(&path))?;
        drop(file);
        let slots = self.parse_part(&path, &data, id, worker, workers)?;
        Ok(Part { data, slots, path })
    }

    /// Verifies a whole part file's bytes `b` (see [`Store::read_part`]) and
    /// returns its slots as (slot id, payload offset, payload length).
    fn parse_part(
        &self,
        path: &Path,
        b: &[u8],
        id: u64,
        worker: usize,
        workers: usize,
    ) -> Result<Vec<(u32, usize, usize)>, CheckpointError> {
        let len = b.len();
        if len < HEADER + TRAILER {
            return Err(corrupt(
                path,
                format!(
                    "truncated: {len} bytes, a part file has at least {}",
                    HEADER + TRAILER
                ),
            ));
        }
        Self::check_magic_version(path, b)?;
        if len & (ALIGN - 1) != 0 {
            return Err(corrupt(
                path,
                format!("truncated: {len} bytes is not a multiple of {ALIGN}"),
            ));
        }
        let body = len - TRAILER;
        let stored = le_u32(b, body);
        let computed = crc32fast::hash(&b[..body]);
        if stored != computed {
            return Err(corrupt(
                path,
                format!("checksum mismatch (stored {stored:08x}, computed {computed:08x}; damaged or truncated)"),
            ));
        }
        if b[body + 4..].iter().any(|&x| x != 0) {
            return Err(corrupt(path, "trailer padding is not zero"));
        }
        self.check_header(path, &b[..HEADER], id, worker, workers)?;
        let mut slots: Vec<(u32, usize, usize)> = Vec::new();
        let mut at = HEADER;
        while at < body {
            if body - at < SLOT_HEADER {
                return Err(corrupt(
                    path,
                    format!("slot header at offset {at} runs into the trailer"),
                ));
            }
            let slot = le_u32(b, at);
            if le_u32(b, at + 4) != 0 {
                return Err(corrupt(
                    path,
                    format!("slot {slot} at offset {at}: reserved field is not 0"),
                ));
            }
            let declared = le_u64(b, at + 8);
            let start = at + SLOT_HEADER;
            let Some(plen) = usize::try_from(declared)
                .ok()
                .filter(|&p| p <= body - start)
            else {
                return Err(corrupt(
                    path,
                    format!("slot {slot} at offset {at}: payload of {declared} bytes runs into the trailer"),
                ));
            };
            let end = start + plen;
            let padded = pad16(end);
            if b[end..padded].iter().any(|&x| x != 0) {
                return Err(corrupt(
                    path,
                    format!("slot {slot} at offset {at}: padding is not zero"),
                ));
            }
            if slots.iter().any(|&(s, _, _)| s == slot) {
                return Err(corrupt(path, format!("slot {slot} appears twice")));
            }
            slots.push((slot, start, plen));
            at = padded;
        }
        Ok(slots)
    }

    /// The newest complete checkpoint whose manifest and every part read back
    /// intact: every part is read fully and verified ([`Store::read_part`]),
    /// and its size and CRC compared with the manifest's. Newer damaged
    /// checkpoints are skipped; for each the returned list has a warning for
    /// the caller to print, e.g. `checkpoint 7 in DIR is damaged
    /// (DIR/chk-00000007/part-00001: checksum mismatch …); falling back to
    /// checkpoint 6`.
    ///
    /// Returns `Ok((None, []))` if there is no complete checkpoint (none, or
    /// only directories without a manifest: a job killed before its first
    /// checkpoint completed starts over).
    ///
    /// Errors, without falling back (the directory is the wrong one or from
    /// another build): [`CheckpointError::OtherJob`] naming the manifest (or
    /// part) of another job signature; [`CheckpointError::Version`] naming the
    /// manifest or part of another format version;
    /// (A checkpoint of another worker count is returned: see
    /// [`Complete::workers`].) [`CheckpointError::NoneUsable`] naming DIR if manifests exist
    /// but every complete checkpoint is damaged; [`CheckpointError::Io`] if
    /// DIR cannot be listed.
    pub fn newest_complete(&self) -> Result<(Option<Complete>, Vec<String>), CheckpointError> {
        let mut listed = self.list()?;
        listed.retain(|l| l.complete);
        listed.sort_unstable_by_key(|l| std::cmp::Reverse(l.id));
        let mut damaged: Vec<(u64, CheckpointError)> = Vec::new();
        for l in listed {
            match self.verify(l.id, &l.path) {
                Ok(complete) => {
                    let warnings = damaged
                        .iter()
                        .map(|(id, e)| {
                            format!(
                                "checkpoint {id} in {} is damaged ({e}); falling back to checkpoint {}",
                                self.dir.display(),
                                complete.id
                            )
                        })
                        .collect();
                    return Ok((Some(complete), warnings));
                }
                Err(e @ (CheckpointError::OtherJob { .. } | CheckpointError::Version { .. })) => {
                    return Err(e)
                }
                Err(e) => damaged.push((l.id, e)),
            }
        }
        if damaged.is_empty() {
            return Ok((None, Vec::new()));
        }
        Err(CheckpointError::NoneUsable {
            dir: self.dir.clone(),
            why: damaged
                .iter()
                .map(|(id, e)| format!("checkpoint {id} is damaged ({e})"))
                .collect::<Vec<_>>()
                .join("; "),
        })
    }

    /// Verifies complete checkpoint `id` in `chk`: manifest, then every part.
    fn verify(&self, id: u64, chk: &Path) -> Result<Complete, CheckpointError> {
        let mpath = chk.join(MANIFEST);
        let text = fs::read(&mpath).map_err(io_err(&mpath))?;
        let value: serde_json::Value = serde_json::from_slice(&text)
            .map_err(|e| corrupt(&mpath, format!("unreadable manifest: {e}")))?;
        let format = value
            .get("format")
            .and_then(|v| v.as_u64())
            .ok_or_else(|| corrupt(&mpath, "manifest has no format"))?;
        if format != u64::from(FORMAT_VERSION) {
            return Err(CheckpointError::Version {
                path: mpath,
                found: u32::try_from(format).unwrap_or(u32::MAX),
            });
        }
        let job = value
            .get("job")
            .and_then(|v| v.as_str())
            .filter(|s| s.len() == 16)
            .and_then(|s| u64::from_str_radix(s, 16).ok())
            .ok_or_else(|| corrupt(&mpath, "manifest has no job signature of 16 hex digits"))?;
        if job != self.signature {
            return Err(CheckpointError::OtherJob {
                path: mpath,
                found: job,
                expected: self.signature,
            });
        }
        let m: Manifest = serde_json::from_value(value)
            .map_err(|e| corrupt(&mpath, format!("malformed manifest: {e}")))?;
        // Taken at another worker count: a rescale, which the job decides
        // on (its state may or may not be redistributable).
        let workers = usize::try_from(m.workers)
            .ok()
            .filter(|&w| (1..=crate::keygroups::MAX_KEY_GROUPS as usize).contains(&w))
            .ok_or_else(|| corrupt(&mpath, format!("manifest says {} workers", m.workers)))?;
        if m.checkpoint != id || m.parts.len() != workers {
            return Err(corrupt(
                &mpath,
                format!(
                    "manifest is for checkpoint {} with {} parts; expected checkpoint {id} with {workers}",
                    m.checkpoint,
                    m.parts.len(),
                ),
            ));
        }
        let mut parts = Vec::with_capacity(workers);
        for (w, p) in m.parts.iter().enumerate() {
            if p.worker != w as u64 || p.file != part_name(w) {
                return Err(corrupt(
                    &mpath,
                    format!(
                        "manifest entry {w} is worker {} in {:?}; expected worker {w} in {:?}",
                        p.worker,
                        p.file,
                        part_name(w)
                    ),
                ));
            }
            let path = chk.join(&p.file);
            let len = fs::metadata(&path).map_err(io_err(&path))?.len();
            if len != p.bytes {
                return Err(corrupt(
                    &path,
                    format!(
                        "{len} bytes, the manifest says {} (truncated or replaced)",
                        p.bytes
                    ),
                ));
            }
            let part = self.read_part_of(id, w, workers).map_err(|e| match e {
                // The manifest is of this build's format: a part that says
                // otherwise is damaged (a flipped byte), not another
                // version's.
                CheckpointError::Version { path, found } => corrupt(
                    &path,
                    format!(
                        "format version {found} in a checkpoint whose manifest says \
                         {FORMAT_VERSION}"
                    ),
                ),
                e => e,
            })?;
            let crc = le_u32(&part.data, part.bytes() - TRAILER);
            if crc != p.crc32 {
                return Err(corrupt(
                    &path,
                    format!(
                        "checksum {crc:08x} differs from the manifest's {:08x} (replaced)",
                        p.crc32
                    ),
                ));
            }
            parts.push(PartEntry {
                worker: w,
                path,
                bytes: len,
                crc32: crc,
            });
        }
        Ok(Complete {
            id,
            workers,
            dir: chk.to_path_buf(),
            manifest: mpath,
            parts,
            written_unix_ms: m.written_unix_ms,
        })
    }

    /// Retention after the manifest of `n` was written by `writer`'s call
    /// (module docs). Returns warnings for deletions that failed other than
    /// with `NotFound`.
    fn retain(&self, n: u64, writer: usize) -> Vec<String> {
        let listed = match self.list() {
            Ok(l) => l,
            Err(e) => return vec![format!("checkpoint retention skipped: {e}")],
        };
        let mut complete: Vec<u64> = listed.iter().filter(|l| l.complete).map(|l| l.id).collect();
        complete.sort_unstable_by_key(|&id| std::cmp::Reverse(id));
        complete.truncate(self.retained);
        let mut warnings = Vec::new();
        for l in &listed {
            let delete = l.id <= n
                && if l.complete {
                    !complete.contains(&l.id)
                } else {
                    l.id < n
                };
            if !delete {
                continue;
            }
            let trash = self.dir.join(format!(
                ".del-{}.w{writer:05}.{}",
                chk_name(l.id),
                temp_suffix()
            ));
            let result = match fs::rename(&l.path, &trash) {
                Ok(()) => remove_tree(&trash).map_err(|e| (trash.clone(), e)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err((l.path.clone(), e)),
            };
            if let Err((path, e)) = result {
                warnings.push(format!(
                    "could not delete old checkpoint {}: {e}",
                    path.display()
                ));
            }
        }
        // Trees whose deletion was interrupted (a crash), or is under way in
        // another process (harmless: NotFound is ignored).
        if let Ok(entries) = fs::read_dir(&self.dir) {
            for entry in entries.flatten() {
                let is_trash = entry
                    .file_name()
                    .to_str()
                    .is_some_and(|n| n.starts_with(".del-chk-"));
                if is_trash {
                    let path = entry.path();
                    if let Err(e) = remove_tree(&path) {
                        warnings.push(format!("could not delete {}: {e}", path.display()));
                    }
                }
            }
        }
        warnings
    }

    /// Deletes every checkpoint directory `chk-<digits>` under DIR, with the
    /// temporary files in them, and leftover `.del-chk-*` trees of
    /// interrupted deletions (for `--fresh`); other files and directories are
    /// left alone.
    ///
    /// Errors: [`CheckpointError::Io`] naming DIR or the entry that could not
    /// be deleted.
    pub fn clear(&self) -> Result<(), CheckpointError> {
        for entry in fs::read_dir(&self.dir).map_err(io_err(&self.dir))? {
            let entry = entry.map_err(io_err(&self.dir))?;
            let path = entry.path();
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                continue;
            };
            let ours =
                (parse_chk(name).is_some() && path.is_dir()) || name.starts_with(".del-chk-");
            if ours {
                remove_tree(&path).map_err(io_err(&path))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
