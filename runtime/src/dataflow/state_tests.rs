use super::*;

/// Checkpoints newer than the one resumed from are of the run that
/// died: an incomplete one (a part of the dead run) is deleted, or this
/// run's parts of the same id would complete it into a mixed
/// checkpoint.
#[test]
fn checkpoints_of_the_dead_run_are_deleted_on_resume() {
    let dir = std::env::temp_dir().join(format!("air-state-dead-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut cfg = CheckpointConfig {
        dir: dir.clone(),
        retained: 10,
        fresh: true,
        job: 1,
    };
    let store = Store::open(&dir, 7 ^ 1u64.rotate_left(17), 2, 10).unwrap();
    for w in 0..2 {
        store.write_part(2, w, &[(0, &[2u8][..])]).unwrap();
    }
    store.write_part(3, 1, &[(0, &[3u8][..])]).unwrap(); // worker 0 died first
    cfg.fresh = false;
    let ck = Checkpoints::open(&cfg, 7, 2).unwrap();
    assert_eq!(ck.resumed, Some(2));
    assert!(
        !store.checkpoint_dir(3).exists(),
        "the dead run's part of 3 was kept"
    );
    assert!(store.checkpoint_dir(2).exists());
    drop(ck);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A component that skipped barrier 5 (behind an alignment that gave
/// up) while another at the same worker got 5: checkpoint 5 is given up
/// at this worker, and 4 and 6 complete (a part waiting for 5 forever
/// would block every later checkpoint and keep their states).
#[test]
fn a_checkpoint_one_slot_skipped_does_not_block_later_ones() {
    let dir = std::env::temp_dir().join(format!("air-state-skip-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cfg = CheckpointConfig {
        dir: dir.clone(),
        retained: 10,
        fresh: true,
        job: 1,
    };
    let ck = Arc::new(Checkpoints::open(&cfg, 7, 1).unwrap());
    begin(0, ck.clone(), Resumed::Nothing);
    let (a, b) = (new_slot(0), new_slot(1));
    a.save(4, vec![4]);
    b.save(4, vec![40]);
    a.save(6, vec![6]); // it skipped 5
    b.save(5, vec![50]); // the other got 5
    b.save(6, vec![60]);
    a.save(7, vec![7]);
    b.save(7, vec![70]);
    let (parts, _, skipped) = end().unwrap();
    ck.drain();
    assert_eq!(parts, 3, "checkpoints 4, 6 and 7 complete");
    assert_eq!(skipped, 1);
    assert_eq!(ck.store().complete_ids(), [4, 6, 7]);
    let p = ck.store().read_part(6, 0).unwrap();
    assert_eq!(
        (p.slot(0), p.slot(1)),
        (Some(&[6u8][..]), Some(&[60u8][..]))
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Sections come back as they went, and bytes that were not framed
/// so (short, a length past the end, bytes left over) are errors.
#[test]
fn sections_round_trip_and_bad_ones_are_refused() {
    let b = frame_sections(&[7, 9], &[b"abc", b"", b"de"]);
    let (values, sections) = unframe_sections(&b, 3).unwrap();
    assert_eq!(values, [7, 9]);
    assert_eq!(sections, [&b"abc"[..], b"", b"de"]);
    assert!(unframe_sections(&b[..b.len() - 1], 3).is_err());
    assert!(unframe_sections(&b, 5).is_err());
    let mut long = b.clone();
    long.push(0);
    assert!(unframe_sections(&long, 3).is_err());
    assert!(unframe_sections(&frame(&[u64::MAX], b""), 1).is_err());
}
