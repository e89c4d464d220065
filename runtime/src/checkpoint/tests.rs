//! Tests of the checkpoint store: round trips, concurrent writers and
//! retention, damage and fallback, other jobs and versions, clearing,
//! failed writes.
use super::*;

const SIG: u64 = 0x0123_4567_89ab_cdef;

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let path = std::env::temp_dir().join(format!(
            "air-checkpoint-test-{tag}-{}-{}-{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Every file (not directory) under `dir`, relative paths, sorted.
fn files(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                out.push(p.strip_prefix(base).unwrap().display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

fn payload(worker: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i * 7 + worker * 13 + len) as u8)
        .collect()
}

const LENS: [usize; 6] = [0, 1, 15, 16, 17, 1000];

fn slots_of(owned: &[(u32, Vec<u8>)]) -> Vec<(u32, &[u8])> {
    owned.iter().map(|(s, p)| (*s, p.as_slice())).collect()
}

#[test]
fn checkpoint_round_trip() {
    let t = TempDir::new("roundtrip");
    let store = Store::open(&t.0, SIG, 3, 2).unwrap();
    for w in 0..3 {
        let owned: Vec<(u32, Vec<u8>)> = LENS
            .iter()
            .enumerate()
            .map(|(i, &len)| (i as u32 * 10 + 1, payload(w, len)))
            .collect();
        let written = store.write_part(1, w, &slots_of(&owned)).unwrap();
        assert!(!written.skipped);
        let expected_size =
            HEADER + LENS.iter().map(|&l| SLOT_HEADER + pad16(l)).sum::<usize>() + TRAILER;
        assert_eq!(written.bytes, expected_size as u64);
        assert_eq!(
            fs::metadata(store.part_path(1, w)).unwrap().len(),
            written.bytes
        );
        let manifest = store.checkpoint_dir(1).join(MANIFEST).exists();
        assert_eq!(written.completed, w == 2, "worker {w}");
        assert_eq!(manifest, w == 2, "manifest after worker {w}");
        assert_eq!(store.complete_ids(), if w == 2 { vec![1] } else { vec![] });
    }
    let (complete, warnings) = store.newest_complete().unwrap();
    let complete = complete.unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(complete.id, 1);
    assert_eq!(
        complete.manifest,
        t.0.join("chk-00000001").join("MANIFEST.json")
    );
    assert_eq!(complete.parts.len(), 3);

    // The manifest's JSON shape.
    let json: serde_json::Value =
        serde_json::from_slice(&fs::read(&complete.manifest).unwrap()).unwrap();
    assert_eq!(json["format"], 1);
    assert_eq!(json["job"], "0123456789abcdef");
    assert_eq!(json["checkpoint"], 1);
    assert_eq!(json["workers"], 3);
    assert_eq!(json["parts"][2]["file"], "part-00002");
    assert!(json["written_unix_ms"].as_u64().unwrap() > 0);

    for w in 0..3 {
        let raw = fs::read(store.part_path(1, w)).unwrap();
        assert_eq!(&raw[..8], b"AIRPART1");
        assert_eq!(le_u32(&raw, 8), 1);
        assert_eq!(le_u64(&raw, 16), SIG);
        assert_eq!(le_u64(&raw, 32), w as u64);
        assert_eq!(raw.len() % 16, 0);
        let crc = le_u32(&raw, raw.len() - 16);
        assert_eq!(crc, crc32fast::hash(&raw[..raw.len() - 16]));
        assert_eq!(json["parts"][w]["crc32"], crc);
        assert_eq!(json["parts"][w]["bytes"], raw.len());
        assert_eq!(complete.parts[w].crc32, crc);

        let part = store.read_part(1, w).unwrap();
        assert_eq!(part.bytes(), raw.len());
        assert_eq!(part.slots().count(), LENS.len());
        for (i, &len) in LENS.iter().enumerate() {
            let got = part.slot(i as u32 * 10 + 1).unwrap();
            assert_eq!(got, payload(w, len).as_slice(), "worker {w} slot {i}");
            assert_eq!(got.as_ptr() as usize % 16, 0, "payload not aligned");
        }
        for (s, p) in part.slots() {
            assert_eq!(p.as_ptr() as usize % 16, 0, "slot {s} not aligned");
        }
        assert!(part.slot(2).is_none());
    }

    // A late write for a complete checkpoint is skipped.
    let late = store.write_part(1, 0, &[(1, b"late")]).unwrap();
    assert!(late.skipped && !late.completed && late.bytes == 0);
    assert_eq!(store.read_part(1, 0).unwrap().slot(1).unwrap().len(), 0);
}

#[test]
fn checkpoint_concurrent_writers_and_retention() {
    let t = TempDir::new("concurrent");
    let store = Store::open(&t.0, SIG, 8, 2).unwrap();
    std::thread::scope(|s| {
        for w in 0..8usize {
            let store = &store;
            s.spawn(move || {
                for id in 1..=5u64 {
                    let data = vec![w as u8 ^ id as u8; 100 + id as usize * 10 + w];
                    let r = store.write_part(id, w, &[(0, &data), (1, b"x")]).unwrap();
                    assert!(!r.skipped, "worker {w} checkpoint {id} skipped");
                    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
                }
            });
        }
    });
    assert_eq!(store.complete_ids(), vec![4, 5]);
    let mut top: Vec<String> = fs::read_dir(&t.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    top.sort();
    assert_eq!(top, ["chk-00000004", "chk-00000005"]);
    let mut expected = Vec::new();
    for id in [4, 5] {
        expected.push(format!("chk-{id:08}/MANIFEST.json"));
        for w in 0..8 {
            expected.push(format!("chk-{id:08}/part-{w:05}"));
        }
    }
    expected.sort();
    assert_eq!(files(&t.0), expected);
    let (complete, warnings) = store.newest_complete().unwrap();
    assert_eq!(complete.unwrap().id, 5);
    assert!(warnings.is_empty());
    let part = store.read_part(5, 3).unwrap();
    assert_eq!(part.slot(0).unwrap(), vec![3u8 ^ 5; 153].as_slice());
    assert_eq!(part.slot(1).unwrap(), b"x");
}

/// Checkpoints 1..=3 of 2 workers, all retained.
fn three_checkpoints(tag: &str) -> (TempDir, Store) {
    let t = TempDir::new(tag);
    let store = Store::open(&t.0, SIG, 2, 5).unwrap();
    for id in 1..=3u64 {
        for w in 0..2 {
            let data = payload(w, 40 + id as usize);
            store.write_part(id, w, &[(7, &data)]).unwrap();
        }
    }
    assert_eq!(store.complete_ids(), vec![1, 2, 3]);
    (t, store)
}

fn flip_byte(path: &Path, at: usize) {
    let mut b = fs::read(path).unwrap();
    b[at] ^= 0x40;
    fs::write(path, b).unwrap();
}

/// Falls back to checkpoint 2, with one warning containing every `needle`.
fn assert_falls_back(store: &Store, needles: &[&str]) {
    let (complete, warnings) = store.newest_complete().unwrap();
    assert_eq!(complete.unwrap().id, 2);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let w = &warnings[0];
    assert!(w.starts_with("checkpoint 3 in "), "{w}");
    assert!(w.ends_with("; falling back to checkpoint 2"), "{w}");
    for needle in needles {
        assert!(w.contains(needle), "{w:?} lacks {needle:?}");
    }
}

#[test]
fn checkpoint_damage_falls_back() {
    // One flipped byte in a payload.
    let (_t, store) = three_checkpoints("flip");
    let part = store.part_path(3, 1);
    flip_byte(&part, 60);
    assert_falls_back(&store, &[&part.display().to_string(), "checksum"]);
    let err = store.read_part(3, 1).unwrap_err();
    assert!(matches!(err, CheckpointError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("part-00001"), "{err}");

    // Truncated by 16 bytes.
    let (_t, store) = three_checkpoints("truncate");
    let part = store.part_path(3, 0);
    let f = OpenOptions::new().write(true).open(&part).unwrap();
    f.set_len(f.metadata().unwrap().len() - 16).unwrap();
    drop(f);
    assert_falls_back(&store, &[&part.display().to_string(), "truncated"]);
    let err = store.read_part(3, 0).unwrap_err().to_string();
    assert!(
        err.contains("part-00000") && err.contains("checksum"),
        "{err}"
    );

    // Deleted.
    let (_t, store) = three_checkpoints("delete");
    let part = store.part_path(3, 1);
    fs::remove_file(&part).unwrap();
    assert_falls_back(&store, &[&part.display().to_string()]);

    // Replaced by another intact part (its CRC differs from the manifest's).
    let (_t, store) = three_checkpoints("replace");
    let part = store.part_path(3, 0);
    let other = encode_part(SIG, 3, 0, 2, &[(7, &payload(5, 43))]);
    fs::write(&part, other).unwrap();
    store.read_part(3, 0).unwrap();
    assert_falls_back(&store, &[&part.display().to_string(), "manifest"]);

    // An unreadable manifest.
    let (_t, store) = three_checkpoints("manifest");
    let manifest = store.checkpoint_dir(3).join(MANIFEST);
    fs::write(&manifest, b"{\"format\":1,").unwrap();
    assert_falls_back(&store, &["MANIFEST.json"]);

    // Every checkpoint damaged: no fallback.
    let (t, store) = three_checkpoints("all");
    for id in 1..=3 {
        flip_byte(&store.part_path(id, id as usize % 2), 70);
    }
    match store.newest_complete() {
        Err(e @ CheckpointError::NoneUsable { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains(&t.0.display().to_string()), "{msg}");
            assert!(msg.contains("checkpoint 1 is damaged"), "{msg}");
        }
        other => panic!("expected NoneUsable, got {other:?}"),
    }

    // Only incomplete checkpoints: start over.
    let t = TempDir::new("incomplete");
    let store = Store::open(&t.0, SIG, 2, 5).unwrap();
    store.write_part(1, 0, &[(0, b"a")]).unwrap();
    store.write_part(2, 1, &[(0, b"b")]).unwrap();
    let (complete, warnings) = store.newest_complete().unwrap();
    assert!(complete.is_none() && warnings.is_empty());
}

#[test]
fn checkpoint_other_job_version_workers() {
    // Another job's manifest: an error naming it, no fallback.
    let (t, _store) = three_checkpoints("otherjob");
    let other = Store::open(&t.0, SIG ^ 1, 2, 5).unwrap();
    let err = other.newest_complete().unwrap_err();
    let manifest = t.0.join("chk-00000003").join(MANIFEST);
    match &err {
        CheckpointError::OtherJob {
            path,
            found,
            expected,
        } => {
            assert_eq!(path, &manifest);
            assert_eq!((*found, *expected), (SIG, SIG ^ 1));
        }
        e => panic!("expected OtherJob, got {e:?}"),
    }
    assert!(
        err.to_string().contains(&manifest.display().to_string()),
        "{err}"
    );

    // Another worker count: found with the count it was taken at (the job
    // decides whether it can rescale), its parts read at that count.
    let more = Store::open(&t.0, SIG, 3, 5).unwrap();
    let c = more.newest_complete().unwrap().0.unwrap();
    assert_eq!((c.id, c.workers, c.parts.len()), (3, 2, 2));
    assert!(more.read_part_of(3, 1, 2).is_ok());
    assert!(more.read_part(3, 1).is_err(), "read as a part of 3 workers");

    // A part of format version 2 (well-formed otherwise) under a manifest
    // of this build's format: read alone, a Version error naming the part;
    // in its checkpoint, damage (a flipped byte: the manifest says which
    // format the checkpoint is), so the store falls back with a warning.
    let (_t, store) = three_checkpoints("version-part");
    let part = store.part_path(3, 0);
    let mut b = fs::read(&part).unwrap();
    b[8..12].copy_from_slice(&2u32.to_le_bytes());
    let body = b.len() - TRAILER;
    let crc = crc32fast::hash(&b[..body]);
    b[body..body + 4].copy_from_slice(&crc.to_le_bytes());
    fs::write(&part, &b).unwrap();
    match store.read_part(3, 0).unwrap_err() {
        CheckpointError::Version { path, found: 2 } => assert_eq!(path, part),
        e => panic!("expected Version, got {e:?}"),
    }
    let (c, warnings) = store.newest_complete().unwrap();
    assert_eq!(c.unwrap().id, 2, "fell back past the damaged one");
    assert!(
        warnings.len() == 1
            && warnings[0].contains(&part.display().to_string())
            && warnings[0].contains("format version 2 in a checkpoint whose manifest says"),
        "{warnings:?}"
    );

    // A manifest of format 2: a Version error naming the manifest.
    let (_t, store) = three_checkpoints("version-manifest");
    let manifest = store.checkpoint_dir(3).join(MANIFEST);
    let text = fs::read_to_string(&manifest).unwrap();
    let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
    json["format"] = 2.into();
    fs::write(&manifest, json.to_string()).unwrap();
    match store.newest_complete() {
        Err(CheckpointError::Version { path, found: 2 }) => assert_eq!(path, manifest),
        other => panic!("expected Version, got {other:?}"),
    }
}

#[test]
fn checkpoint_clear_keeps_other_files() {
    let (t, store) = three_checkpoints("clear");
    store.write_part(4, 0, &[(0, b"incomplete")]).unwrap();
    fs::write(t.0.join("notes.txt"), b"keep me").unwrap();
    fs::create_dir(t.0.join("chk-notes")).unwrap();
    fs::create_dir_all(t.0.join(".del-chk-00000001.w00000.1.2").join("x")).unwrap();
    store.clear().unwrap();
    let mut top: Vec<String> = fs::read_dir(&t.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    top.sort();
    assert_eq!(top, ["chk-notes", "notes.txt"]);
    assert_eq!(fs::read(t.0.join("notes.txt")).unwrap(), b"keep me");
    assert!(store.complete_ids().is_empty());
    assert!(store.newest_complete().unwrap().0.is_none());
    // The store still works after clearing.
    store.write_part(1, 0, &[(0, b"a")]).unwrap();
    assert!(store.write_part(1, 1, &[(0, b"b")]).unwrap().completed);
    assert_eq!(store.complete_ids(), vec![1]);
}

#[test]
fn checkpoint_failed_writes_leave_nothing() {
    let t = TempDir::new("fail");
    let store = Store::open(&t.0, SIG, 2, 2).unwrap();

    // The checkpoint directory cannot be created.
    let blocker = t.0.join("chk-00000009");
    fs::write(&blocker, b"not a directory").unwrap();
    let err = store.write_part(9, 0, &[(0, b"data")]).unwrap_err();
    assert!(matches!(err, CheckpointError::Io { .. }), "{err}");
    assert!(err.to_string().contains("chk-00000009"), "{err}");
    assert_eq!(files(&t.0), ["chk-00000009"]);
    assert_eq!(fs::read(&blocker).unwrap(), b"not a directory");

    // The rename onto part-00000 fails (a non-empty directory is there):
    // the temporary file is removed.
    let chk = t.0.join("chk-00000010");
    fs::create_dir_all(chk.join("part-00000")).unwrap();
    fs::write(chk.join("part-00000").join("x"), b"x").unwrap();
    let err = store.write_part(10, 0, &[(0, b"data")]).unwrap_err();
    assert!(err.to_string().contains("part-00000"), "{err}");
    assert_eq!(files(&t.0), ["chk-00000009", "chk-00000010/part-00000/x"]);

    // Invalid calls write nothing.
    for (id, worker, slots) in [
        (0u64, 0usize, vec![(0u32, &b"a"[..])]),
        (11, 2, vec![(0, &b"a"[..])]),
        (11, 0, vec![(3, &b"a"[..]), (3, &b"b"[..])]),
    ] {
        let err = store.write_part(id, worker, &slots).unwrap_err();
        assert!(matches!(err, CheckpointError::Invalid { .. }), "{err}");
    }
    assert!(!t.0.join("chk-00000011").exists());
    assert!(matches!(
        Store::open(&t.0, SIG, 2, 0),
        Err(CheckpointError::Invalid { .. })
    ));
    assert_eq!(files(&t.0), ["chk-00000009", "chk-00000010/part-00000/x"]);
}
