//! The partitioned sink driven barrier by barrier against a real
//! checkpoint store on disk (one worker): a checkpoint is complete once its
//! part is written with the state the sink returned, and a crash is a sink
//! dropped without its end.

use super::*;
use crate::graph::partitioned::PartitionedCsv;
use air_runtime::dataflow::CheckpointConfig;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// (id, time ms).
type Row = (u64, u64);
type By = fn(&Row, &mut String) -> u64;
type Writer = fn(&Row, &mut Vec<u8>) -> Result<(), String>;
type Sink = PartitionTail<By, Writer>;

/// Partitions of 100 ms: `p=<start>`.
fn by_100ms(r: &Row, path: &mut String) -> u64 {
    let start = r.1 / 100 * 100;
    write!(path, "p={start}").unwrap();
    start + 100
}

fn csv(r: &Row, out: &mut Vec<u8>) -> Result<(), String> {
    out.extend_from_slice(format!("{},{}\n", r.0, r.1).as_bytes());
    Ok(())
}

/// A checkpoint directory and an output directory.
struct Dirs {
    _tmp: tempfile::TempDir,
    ck: PathBuf,
    out: PathBuf,
}

fn dirs() -> Dirs {
    let tmp = tempfile::tempdir().unwrap();
    Dirs {
        ck: tmp.path().join("ck"),
        out: tmp.path().join("out"),
        _tmp: tmp,
    }
}

/// The job's checkpoints (1 worker): resumes from the newest complete one
/// unless `fresh`.
fn checkpoints(d: &Dirs, fresh: bool) -> Arc<Checkpoints> {
    let cfg = CheckpointConfig {
        dir: d.ck.clone(),
        retained: 3,
        fresh,
        job: 5,
    };
    Arc::new(Checkpoints::open(&cfg, 11, 1).unwrap())
}

/// Worker 0 of 1 writing under `root` with a header; with `ck`, restored
/// from the checkpoint it resumes from.
fn sink(root: &Path, ck: Option<&Arc<Checkpoints>>) -> Sink {
    let cfg = PartitionedCsv::new(root, by_100ms as By).header(&["id", "time"]);
    let mut t = PartitionTail::new(cfg, 0, 1, csv as Writer);
    if let Some(ck) = ck {
        let restored = ck.resumed.map(|id| {
            let part = ck.store().read_part(id, 0).unwrap();
            part.slot(0).unwrap().to_vec()
        });
        t.join_with(ck.clone(), None, restored).unwrap();
    }
    t
}

fn rows(t: &mut Sink, from: u64, to: u64) {
    for i in from..to {
        t.push_row((i, i)).unwrap();
    }
}

/// Barrier `id`; with `complete`, its part written: checkpoint `id`
/// complete.
/// Returns the state saved.
fn barrier(t: &mut Sink, ck: &Checkpoints, id: u64, complete: bool) -> Vec<u8> {
    let state = t.save(id).unwrap().expect("a new barrier");
    if complete {
        ck.store().write_part(id, 0, &[(0, &state)]).unwrap();
        assert!(ck.is_complete(id));
    }
    state
}

/// Every file under `root`: path → content.
fn tree(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                dirs.push(e.path());
            } else {
                let rel = e.path().strip_prefix(root).unwrap().display().to_string();
                out.insert(rel, std::fs::read_to_string(e.path()).unwrap());
            }
        }
    }
    out
}

/// The rows `from..to` as the part file of their partition holds them.
fn part_text(from: u64, to: u64) -> String {
    let mut s = "id,time\n".to_string();
    for i in from..to {
        s += &format!("{i},{i}\n");
    }
    s
}

/// The reference: rows 0..450, the watermark at 100, 200 and 400 as the
/// checkpointed runs get them, to the end; no checkpoints.
fn uninterrupted(root: &Path) -> BTreeMap<String, String> {
    let mut t = sink(root, None);
    rows(&mut t, 0, 150);
    t.advance(100).unwrap();
    rows(&mut t, 150, 250);
    t.advance(200).unwrap();
    rows(&mut t, 250, 420);
    t.advance(400).unwrap();
    rows(&mut t, 420, 450);
    t.finish(u64::MAX).unwrap();
    tree(root)
}

/// A closed partition's marker, and the watermark file's move past it,
/// wait until a checkpoint covering its rows is complete; without
/// checkpoints both come at once.
#[test]
fn a_marker_appears_only_once_the_checkpoint_covering_its_partition_is_complete() {
    let d = dirs();
    let ck = checkpoints(&d, true);
    let mut t = sink(&d.out, Some(&ck));
    let marker = d.out.join("p=0/_SUCCESS.r0-w0");
    let wm = d.out.join("_WATERMARK.r0-w0");
    let read = |p: &Path| std::fs::read_to_string(p).unwrap();
    rows(&mut t, 0, 150);
    t.advance(100).unwrap();
    t.flush_tick().unwrap();
    assert_eq!(read(&d.out.join("p=0/part-r0-w0.csv")), part_text(0, 100));
    assert!(!marker.exists(), "marked before any barrier");
    assert_eq!(read(&wm), "watermark_ms=0 workers=1\n");
    // Barrier 1 covers p=0; not complete yet.
    let state = barrier(&mut t, &ck, 1, false);
    t.flush_tick().unwrap();
    assert!(!marker.exists(), "marked before its checkpoint is complete");
    assert_eq!(read(&wm), "watermark_ms=0 workers=1\n");
    assert!(t.save(1).unwrap().is_none(), "an old barrier saves nothing");
    // Complete: marked at the next tick, the watermark file moves on.
    ck.store().write_part(1, 0, &[(0, &state)]).unwrap();
    assert!(ck.is_complete(1));
    t.flush_tick().unwrap();
    assert_eq!(
        read(&marker),
        format!("rows=100 bytes={}\n", part_text(0, 100).len())
    );
    assert_eq!(read(&wm), "watermark_ms=100 workers=1\n");
    // p=100 closes after barrier 1: it waits for checkpoint 2.
    t.advance(200).unwrap();
    t.flush_tick().unwrap();
    assert!(!d.out.join("p=100/_SUCCESS.r0-w0").exists());
    barrier(&mut t, &ck, 2, true);
    t.flush_tick().unwrap();
    assert!(d.out.join("p=100/_SUCCESS.r0-w0").exists());
    assert_eq!(read(&wm), "watermark_ms=200 workers=1\n");

    // Without checkpoints: the marker as the watermark passes.
    let plain = d.out.with_file_name("plain");
    let mut t = sink(&plain, None);
    rows(&mut t, 0, 150);
    t.advance(100).unwrap();
    assert!(plain.join("p=0/_SUCCESS.r0-w0").exists());
    t.flush_tick().unwrap();
    assert_eq!(
        read(&plain.join("_WATERMARK.r0-w0")),
        "watermark_ms=100 workers=1\n"
    );
}

/// Killed after checkpoint 3 marked two partitions, with 3 then lost (a
/// fallback to 2): the resumed sink cuts p=200's part file back to
/// checkpoint 2's length, deletes the markers of partitions open or not
/// yet made at 2 and the part files made after it, marks p=100 (closed
/// before barrier 2), keeps p=0 (committed at 2); replayed to the end,
/// every file equals an uninterrupted run's. Resumed again after the end,
/// nothing changes.
#[test]
fn a_resume_cuts_part_files_back_and_deletes_what_came_after_its_checkpoint() {
    let d = dirs();
    let reference = uninterrupted(&d.out.with_file_name("reference"));
    let ck = checkpoints(&d, true);
    let mut t = sink(&d.out, Some(&ck));
    rows(&mut t, 0, 150);
    t.advance(100).unwrap();
    barrier(&mut t, &ck, 1, true);
    t.flush_tick().unwrap(); // p=0 marked
    rows(&mut t, 150, 250);
    t.advance(200).unwrap(); // p=100 closed
    t.flush_tick().unwrap();
    barrier(&mut t, &ck, 2, true); // the crash comes before p=100's marker
    let len_at_2 = std::fs::metadata(d.out.join("p=200/part-r0-w0.csv"))
        .unwrap()
        .len();
    rows(&mut t, 250, 420);
    t.advance(400).unwrap(); // p=200, p=300 closed
    barrier(&mut t, &ck, 3, true);
    t.flush_tick().unwrap(); // p=100, p=200, p=300 marked
    assert!(d.out.join("p=300/_SUCCESS.r0-w0").exists());
    rows(&mut t, 420, 450);
    t.flush_tick().unwrap();
    drop(t); // killed
             // Checkpoint 3 lost: the resume falls back to 2.
    let chk3 = std::fs::read_dir(&d.ck)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            let n = p.file_name().unwrap().to_string_lossy().to_string();
            n.starts_with("chk-") && n.trim_start_matches("chk-").parse::<u64>() == Ok(3)
        })
        .expect("checkpoint 3's directory");
    std::fs::remove_dir_all(chk3).unwrap();
    let ck = checkpoints(&d, false);
    assert_eq!(ck.resumed, Some(2));
    let mut t = sink(&d.out, Some(&ck));
    let after = tree(&d.out);
    assert_eq!(after["p=0/part-r0-w0.csv"], part_text(0, 100));
    assert!(after.contains_key("p=0/_SUCCESS.r0-w0"), "committed at 2");
    assert_eq!(
        after["p=100/_SUCCESS.r0-w0"],
        format!("rows=100 bytes={}\n", part_text(100, 200).len()),
        "closed before barrier 2: marked on resume"
    );
    assert_eq!(after["p=200/part-r0-w0.csv"], part_text(200, 250));
    assert_eq!(len_at_2, part_text(200, 250).len() as u64);
    assert!(!after.contains_key("p=200/_SUCCESS.r0-w0"), "open at 2");
    for gone in [
        "p=300/part-r0-w0.csv",
        "p=300/_SUCCESS.r0-w0",
        "p=400/part-r0-w0.csv",
    ] {
        assert!(!after.contains_key(gone), "{gone} made after checkpoint 2");
    }
    assert_eq!(after["_WATERMARK.r0-w0"], "watermark_ms=200 workers=1\n");
    // Replayed from checkpoint 2 to the end.
    rows(&mut t, 250, 420);
    t.advance(400).unwrap();
    barrier(&mut t, &ck, 3, false);
    rows(&mut t, 420, 450);
    t.flush_tick().unwrap();
    t.finish(u64::MAX).unwrap();
    let done = tree(&d.out);
    assert_eq!(done, reference);
    assert_eq!(
        done["_WATERMARK.r0-w0"],
        format!("watermark_ms={} workers=1\n", u64::MAX)
    );
    // Resumed from checkpoint 2 once more (the worker had ended since):
    // its files are final, the replayed rows are dropped.
    let ck = checkpoints(&d, false);
    assert_eq!(ck.resumed, Some(2));
    let mut t = sink(&d.out, Some(&ck));
    rows(&mut t, 250, 450);
    t.advance(400).unwrap();
    assert!(t.save(4).unwrap().is_some());
    t.flush_tick().unwrap();
    t.finish(u64::MAX).unwrap();
    assert_eq!(tree(&d.out), reference);
}

/// A fresh start with checkpoints deletes this worker's files of an
/// earlier run (one that died before its first checkpoint), not another
/// worker's; a saved state of something else is refused.
#[test]
fn a_fresh_start_deletes_only_this_workers_files() {
    let d = dirs();
    let files = [
        "p=0/part-r0-w0.csv",
        "p=0/_SUCCESS.r0-w0",
        "p=0/_SUCCESS.r0-w0.tmp",
        "p=0/part-r0-w1.csv",
        "p=0/_SUCCESS.r0-w1",
        "p=100/part-r0-w0.csv",
        "_WATERMARK.r0-w0",
        "_WATERMARK.r0-w1",
        "notes.txt",
    ];
    for f in files {
        let p = d.out.join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "x").unwrap();
    }
    let ck = checkpoints(&d, true);
    let _t = sink(&d.out, Some(&ck));
    let left: Vec<String> = tree(&d.out).into_keys().collect();
    assert_eq!(
        left,
        [
            "_WATERMARK.r0-w1",
            "notes.txt",
            "p=0/_SUCCESS.r0-w1",
            "p=0/part-r0-w1.csv"
        ]
    );
    let mut t = sink(&d.out, None);
    let err = t
        .join_with(ck.clone(), None, Some(b"AIRSINK2........".to_vec()))
        .unwrap_err();
    assert!(err.contains("not the partitioned sink's"), "{err}");
}

/// The saved state reads back as written.
#[test]
fn a_saved_state_reads_back() {
    let s = Saved {
        ended: false,
        wm: 1_234,
        open: vec![OpenPart {
            path: "dt=2026-12-01/hm=18:40".into(),
            due: 99,
            rows: 3,
            bytes: 40,
        }],
        closed: vec![Closed {
            wait: 0,
            path: "a/b".into(),
            rows: 1,
            bytes: 2,
        }],
        committed: vec!["c".into(), "d/e".into()],
    };
    assert_eq!(Saved::parse(&s.encode()).unwrap(), s);
    let mut cut = s.encode();
    cut.pop();
    assert!(Saved::parse(&cut).is_err());
    let bad = Saved {
        committed: vec!["../x".into()],
        ..Saved::default()
    };
    assert!(Saved::parse(&bad.encode())
        .unwrap_err()
        .contains("without `..`"));
}
