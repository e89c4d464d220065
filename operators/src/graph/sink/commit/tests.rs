//! The commit of a line sink through pending files, driven barrier by
//! barrier against a real checkpoint store on disk (one worker): parts are
//! written with the states the sink returns, so "checkpoint n complete" is
//! a manifest on disk, and a crash is a sink dropped without its close.

use super::*;
use air_runtime::dataflow::CheckpointConfig;

/// A checkpoint directory and an output next to it.
struct Dirs {
    _tmp: tempfile::TempDir,
    ck: PathBuf,
    out: PathBuf,
}

fn dirs() -> Dirs {
    let tmp = tempfile::tempdir().unwrap();
    let ck = tmp.path().join("ck");
    let out = tmp.path().join("out").join("rows.csv");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    Dirs { ck, out, _tmp: tmp }
}

/// The job's checkpoints (1 worker, `retained` kept): resumes from the
/// newest complete one unless `fresh`.
fn checkpoints(d: &Dirs, retained: usize, fresh: bool) -> Arc<Checkpoints> {
    let cfg = CheckpointConfig {
        dir: d.ck.clone(),
        retained,
        fresh,
        job: 5,
    };
    Arc::new(Checkpoints::open(&cfg, 11, 1).unwrap())
}

/// A CSV-like sink of worker 0 to `d.out`, bound to `ck`, restored from the
/// checkpoint it resumes from.
fn sink(d: &Dirs, ck: &Arc<Checkpoints>) -> Lines {
    let mut l = Lines::new(Target::Path(d.out.clone()));
    l.header = Some(b"k,v\n".to_vec());
    l.bind_to(ck.clone());
    if let Some(id) = ck.resumed {
        let part = ck.store().read_part(id, 0).unwrap();
        l.restore(part.slot(0).unwrap()).unwrap();
    }
    l
}

/// Writes rows `from..to` (`"<i>,x\n"`) through the sink's buffer.
fn rows(l: &mut Lines, from: u64, to: u64) {
    for i in from..to {
        l.buf.extend_from_slice(format!("{i},x\n").as_bytes());
        if l.buf.len() >= 1 << 16 {
            l.flush().unwrap();
        }
    }
}

/// Barrier `id` and its part written: checkpoint `id` complete.
fn checkpoint(l: &mut Lines, ck: &Checkpoints, id: u64) -> Vec<u8> {
    let state = l.barrier(id).unwrap();
    ck.store().write_part(id, 0, &[(0, &state)]).unwrap();
    state
}

fn expected(upto: u64) -> String {
    let mut s = "k,v\n".to_string();
    for i in 0..upto {
        s += &format!("{i},x\n");
    }
    s
}

fn pending_files(d: &Dirs) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(d.out.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.contains(PENDING))
        .collect();
    v.sort();
    v
}

/// The part holds names and lengths, not rows: its size does not grow
/// with the rows, and the rows are in the pending file it names.
#[test]
fn a_parts_sink_state_names_the_pending_file_whatever_the_rows() {
    let mut sizes = Vec::new();
    for n in [10u64, 200_000] {
        let d = dirs();
        let ck = checkpoints(&d, 2, true);
        let mut l = sink(&d, &ck);
        rows(&mut l, 0, n);
        let state = l.barrier(1).unwrap();
        let (then, epochs) = Commits::parse(&state).unwrap();
        assert_eq!((then.epoch, then.bytes), (0, 0));
        assert_eq!(epochs.len(), 1);
        let file = d.out.parent().unwrap().join(&epochs[0].name);
        let text = std::fs::read_to_string(&file).unwrap();
        assert_eq!(text, expected(n), "the pending file holds the rows");
        assert_eq!(epochs[0].len, text.len() as u64);
        assert!(!d.out.exists(), "rows reached the output before the commit");
        sizes.push(state.len());
    }
    assert_eq!(
        sizes[0], sizes[1],
        "the state grew with the rows: {sizes:?}"
    );
    assert!(sizes[0] < 100, "a state of {} bytes", sizes[0]);
}

/// Killed after checkpoint 2 is complete and before its rows were
/// appended (or after they were, before the record): the resumed sink
/// appends them once. Killed before 2 is complete: the output goes back
/// to checkpoint 1, 2's pending file (named by no complete checkpoint) is
/// deleted.
#[test]
fn a_kill_between_complete_and_commit_gives_every_row_once() {
    for case in ["before-append", "after-append", "before-complete"] {
        let d = dirs();
        let ck = checkpoints(&d, 2, true);
        let mut l = sink(&d, &ck);
        rows(&mut l, 0, 1000);
        checkpoint(&mut l, &ck, 1);
        rows(&mut l, 1000, 3000);
        l.flush().unwrap(); // commits checkpoint 1
        assert_eq!(std::fs::read_to_string(&d.out).unwrap(), expected(1000));
        let resumed_at = if case == "before-complete" {
            l.barrier(2).unwrap(); // its part never written
            1
        } else {
            checkpoint(&mut l, &ck, 2);
            2
        };
        if case == "after-append" {
            // The commit's append happened, its record did not.
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(&d.out)
                .unwrap();
            f.write_all(&expected(3000).as_bytes()[expected(1000).len()..])
                .unwrap();
        }
        rows(&mut l, 3000, 3500); // pending, covered by no checkpoint
        l.hold().unwrap();
        drop(l); // killed

        let ck = checkpoints(&d, 2, false);
        assert_eq!(ck.resumed, Some(resumed_at), "{case}");
        let upto = if resumed_at == 2 { 3000 } else { 1000 };
        let mut l = sink(&d, &ck);
        assert_eq!(
            std::fs::read_to_string(&d.out).unwrap(),
            expected(upto),
            "{case}: the output after restore"
        );
        let named: Vec<String> = Commits::parse(
            ck.store()
                .read_part(resumed_at, 0)
                .unwrap()
                .slot(0)
                .unwrap(),
        )
        .unwrap()
        .1
        .into_iter()
        .map(|e| e.name)
        .collect();
        for f in pending_files(&d) {
            assert!(named.contains(&f), "{case}: {f} is named by no checkpoint");
        }
        rows(&mut l, upto, 5000);
        l.close_checkpointed().unwrap();
        assert_eq!(std::fs::read_to_string(&d.out).unwrap(), expected(5000));
        assert_eq!(
            pending_files(&d),
            Vec::<String>::new(),
            "{case}: left after the end"
        );
    }
}

/// Retention: pending files go once no complete checkpoint on disk can
/// name them (a bounded number stay), and none is left after the end.
#[test]
fn pending_files_go_when_no_retained_checkpoint_needs_them() {
    let d = dirs();
    let ck = checkpoints(&d, 2, true);
    let mut l = sink(&d, &ck);
    let mut most = 0;
    let mut seen = std::collections::BTreeSet::new();
    for n in 1..=12u64 {
        rows(&mut l, (n - 1) * 100, n * 100);
        let state = l.barrier(n).unwrap();
        let mut named: Vec<String> = Commits::parse(&state)
            .unwrap()
            .1
            .into_iter()
            .map(|e| e.name)
            .collect();
        for id in ck.store().complete_ids() {
            let part = ck.store().read_part(id, 0).unwrap();
            named.extend(
                Commits::parse(part.slot(0).unwrap())
                    .unwrap()
                    .1
                    .into_iter()
                    .map(|e| e.name),
            );
        }
        let on_disk = pending_files(&d);
        let newest = &named[Commits::parse(&state).unwrap().1.len() - 1];
        assert!(
            on_disk.contains(newest),
            "barrier {n}: checkpoint {n}'s rows are in no pending file"
        );
        seen.extend(on_disk.iter().cloned());
        for f in &on_disk {
            assert!(
                named.contains(f),
                "barrier {n}: {f} is named by no complete checkpoint nor this one"
            );
        }
        most = most.max(on_disk.len());
        ck.store().write_part(n, 0, &[(0, &state)]).unwrap();
    }
    assert!(most <= 4, "up to {most} pending files at once");
    assert_eq!(seen.len(), 12, "one pending file a checkpoint: {seen:?}");
    l.close_checkpointed().unwrap();
    assert_eq!(std::fs::read_to_string(&d.out).unwrap(), expected(1200));
    assert_eq!(pending_files(&d), Vec::<String>::new());
}

/// A state saved by an air that kept rows in the part is refused clearly.
#[test]
fn a_state_of_the_old_format_is_refused() {
    let mut old = Vec::new();
    for v in [0u64, 0, 1, 1, 3] {
        old.extend_from_slice(&v.to_le_bytes());
    }
    old.extend_from_slice(b"a\n\n");
    let e = Commits::parse(&old).unwrap_err();
    assert!(e.contains("--fresh"), "{e}");
}

/// A resume that finds its output missing (renamed, another `--out`) is
/// refused without creating an empty file at the new name; nothing
/// committed yet: created.
#[test]
fn a_missing_output_is_not_created_by_a_refused_resume() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rows.csv");
    let e = super::cut_back(&path, 10).unwrap_err();
    assert!(e.contains("holds 0 bytes") && e.contains("renamed"), "{e}");
    assert!(!path.exists(), "an empty file was left");
    super::cut_back(&path, 0).unwrap();
    assert!(path.exists());
    std::fs::write(&path, "0123456789abc").unwrap();
    super::cut_back(&path, 10).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"0123456789");
}
