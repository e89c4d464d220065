//! The store's file names, durable writes and the part encoding.

use super::*;

/// `chk-{id:08}`.
pub(super) fn chk_name(id: u64) -> String {
    format!("chk-{id:08}")
}

/// `part-{worker:05}`.
pub(super) fn part_name(worker: usize) -> String {
    format!("part-{worker:05}")
}

/// The id of a checkpoint directory name `chk-<digits>`, if it is one.
pub(super) fn parse_chk(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("chk-")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// A fresh unique suffix `{pid}.{counter}` for temporary names.
pub(super) fn temp_suffix() -> String {
    format!(
        "{}.{}",
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// fsyncs a directory (makes the renames in it durable).
pub(super) fn sync_dir(dir: &Path) -> Result<(), CheckpointError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))
}

/// Writes `bytes` to `dir/tmp_name`, fsyncs it, renames it to `dir/name` and
/// fsyncs `dir`. On failure before the rename the temporary file is removed,
/// so `dir/name` is either absent/unchanged or complete.
pub(super) fn write_atomic(
    dir: &Path,
    tmp_name: &str,
    name: &str,
    bytes: &[u8],
) -> Result<(), CheckpointError> {
    let tmp = dir.join(tmp_name);
    let dest = dir.join(name);
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(io_err(&tmp))?;
        file.write_all(bytes).map_err(io_err(&tmp))?;
        file.sync_all().map_err(io_err(&tmp))?;
        drop(file);
        fs::rename(&tmp, &dest).map_err(io_err(&dest))
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    sync_dir(dir)
}

/// Removes the tree at `path` (file or directory), ignoring entries that
/// vanish meanwhile (another process deleting the same tree).
pub(super) fn remove_tree(path: &Path) -> io::Result<()> {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if !meta.is_dir() {
        return ignore_not_found(fs::remove_file(path));
    }
    let entries = match fs::read_dir(path) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = match entry {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        remove_tree(&entry.path())?;
    }
    ignore_not_found(fs::remove_dir(path))
}

/// `Ok` for `NotFound`.
pub(super) fn ignore_not_found(r: io::Result<()>) -> io::Result<()> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        r => r,
    }
}

/// Reads a little-endian u32 at `at`.
pub(super) fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

/// Reads a little-endian u64 at `at`.
pub(super) fn le_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// `n` rounded up to a multiple of [`ALIGN`].
pub(super) fn pad16(n: usize) -> usize {
    n.div_ceil(ALIGN) * ALIGN
}

/// Encodes a part file (see the module docs).
pub(super) fn encode_part(
    signature: u64,
    id: u64,
    worker: u64,
    workers: u64,
    slots: &[(u32, &[u8])],
) -> Vec<u8> {
    let size = HEADER
        + slots
            .iter()
            .map(|(_, p)| SLOT_HEADER + pad16(p.len()))
            .sum::<usize>()
        + TRAILER;
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(&PART_MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    for v in [signature, id, worker, workers] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for &(slot, payload) in slots {
        out.extend_from_slice(&slot.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        out.extend_from_slice(payload);
        out.resize(pad16(out.len()), 0);
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&[0u8; TRAILER - 4]);
    debug_assert_eq!(out.len(), size);
    out
}
