//! The frame ring between two real processes through a `/dev/shm` segment.
//!
//! The test binary re-executes itself as the peer process: with
//! `AIR_RING_TEST_ROLE` set, the test named by `--exact` runs the child's role
//! and exits instead of running the parent's.

mod common;
use air_shm::{FrameKind, FrameRing, Region, SegmentName, ShmError, WaitPolicy};
use common::{check, fill, Rng};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const ROLE: &str = "AIR_RING_TEST_ROLE";
const SEG: &str = "AIR_RING_TEST_SEGMENT";

fn unique(tag: &str) -> SegmentName {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    SegmentName::new(&format!("test{}x{nanos:x}", std::process::id()), tag)
}

fn spawn_child(test: &str, role: &str, seg: &SegmentName) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .env(SEG, seg.as_str())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

fn child_role() -> Option<(String, SegmentName)> {
    let role = std::env::var(ROLE).ok()?;
    let seg = std::env::var(SEG).unwrap();
    // The child is given the segment's full file name.
    let name = SegmentNameFromFile(seg).into_name();
    Some((role, name))
}

/// Rebuilds a `SegmentName` from the file name the parent passed.
struct SegmentNameFromFile(String);
impl SegmentNameFromFile {
    fn into_name(self) -> SegmentName {
        // "air-<uid>-<job>-<channel>": job and channel contain no '-'.
        let parts: Vec<&str> = self.0.splitn(4, '-').collect();
        let n = SegmentName::new(parts[2], parts[3]);
        assert_eq!(n.as_str(), self.0);
        n
    }
}

fn wait_timeout(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("child did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn assert_gone(seg: &SegmentName) {
    assert!(
        !Path::new(&seg.path()).exists(),
        "{} was left behind",
        seg.path().display()
    );
}

const PROCESS_FRAMES: u64 = 1_000_000;

/// Two processes exchange 10^6 frames of random sizes, checked by sequence
/// number and checksum; the segment is gone once both ends mapped it.
#[test]
fn million_frames_between_processes() {
    const TEST: &str = "million_frames_between_processes";
    if let Some((role, seg)) = child_role() {
        assert_eq!(role, "producer");
        let ring = FrameRing::open_segment(&seg, Duration::from_secs(10)).unwrap();
        let mut tx = ring.producer(WaitPolicy::default()).unwrap();
        let mut rng = Rng(7);
        let max = tx.max_payload();
        let mut sum = 0u64;
        for seq in 0..PROCESS_FRAMES {
            let len = rng.size(max);
            let mut f = tx.reserve(len).unwrap();
            fill(f.payload_mut(), seq);
            sum = sum.wrapping_add(check(f.payload_mut(), seq));
            if seq % 4 == 3 {
                f.commit();
            } else {
                f.commit_deferred();
            }
        }
        // The checksum travels in the last frame.
        tx.write(FrameKind::End, &sum.to_le_bytes()).unwrap();
        return;
    }
    let seg = unique("million");
    let ring = FrameRing::create_segment(&seg, 64 * 1024 + 48).unwrap();
    assert!(seg.path().exists());
    let mut rx = ring.consumer(WaitPolicy::default()).unwrap();
    let mut child = spawn_child(TEST, "producer", &seg);
    let mut seq = 0u64;
    let mut sum = 0u64;
    let mut their_sum = None;
    while let Some(f) = rx.peek().unwrap() {
        if seq == 0 {
            assert_gone(&seg);
        }
        assert_eq!(f.seq(), seq);
        if f.kind() == FrameKind::End {
            their_sum = Some(u64::from_le_bytes(f.payload().try_into().unwrap()));
        } else {
            sum = sum.wrapping_add(check(f.payload(), seq));
        }
        f.release_deferred();
        seq += 1;
    }
    assert!(wait_timeout(&mut child, Duration::from_secs(60)).success());
    assert_eq!(seq, PROCESS_FRAMES + 1);
    assert_eq!(their_sum, Some(sum), "checksums agree");
    drop(ring);
    assert_gone(&seg);
}

/// Rings of one segment: `SHARED_RINGS` rings of different capacities at
/// page offsets of one segment the consumer made (pages reserved ring by
/// ring); the producer process maps it once, opens every ring in it, and
/// sends `SHARED_FRAMES` checked frames into each, interleaved. The name
/// goes once the producer mapped it, and the producer holds one mapping.
#[test]
fn rings_sharing_one_segment_between_processes() {
    const TEST: &str = "rings_sharing_one_segment_between_processes";
    const SHARED_RINGS: usize = 5;
    const SHARED_FRAMES: u64 = 20_000;
    let caps = |i: usize| 4096 << (i % 3);
    let slot = |i: usize| {
        FrameRing::region_bytes(caps(i))
            .unwrap()
            .next_multiple_of(4096)
    };
    let offsets: Vec<usize> = (0..SHARED_RINGS)
        .scan(0, |at, i| {
            let o = *at;
            *at += slot(i);
            Some(o)
        })
        .collect();
    let len = offsets[SHARED_RINGS - 1] + slot(SHARED_RINGS - 1);
    if let Some((role, seg)) = child_role() {
        assert_eq!(role, "producer");
        let mut region = Region::open_segment(&seg, Duration::from_secs(10)).unwrap();
        assert_eq!(region.len(), len);
        region.close_descriptor();
        let region = Arc::new(region);
        let mut txs: Vec<_> = offsets
            .iter()
            .map(|&o| {
                let ring = FrameRing::open_in(&region, o, Duration::from_secs(10)).unwrap();
                ring.producer(WaitPolicy::default()).unwrap()
            })
            .collect();
        for (i, tx) in txs.iter().enumerate() {
            assert_eq!(tx.capacity(), caps(i));
        }
        // The whole segment is one mapping of this process.
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        assert_eq!(maps.lines().filter(|l| l.contains(seg.as_str())).count(), 1);
        let mut rng = Rng(11);
        let mut sums = vec![0u64; SHARED_RINGS];
        for seq in 0..SHARED_FRAMES {
            for (i, tx) in txs.iter_mut().enumerate() {
                let len = rng.size(tx.max_payload().min(3000));
                let mut f = tx.reserve(len).unwrap();
                fill(f.payload_mut(), seq ^ i as u64);
                sums[i] = sums[i].wrapping_add(check(f.payload_mut(), seq ^ i as u64));
                f.commit();
            }
        }
        for (tx, sum) in txs.iter_mut().zip(&sums) {
            tx.write(FrameKind::End, &sum.to_le_bytes()).unwrap();
        }
        return;
    }
    let seg = unique("shared");
    let region = Arc::new(Region::create_segment_unreserved(&seg, len).unwrap());
    // A misaligned or overflowing slot is refused; so is a second ring at
    // the same offset.
    assert!(FrameRing::create_in(&region, 64, 4096).is_err());
    assert!(FrameRing::create_in(&region, len - 4096, 4096).is_err());
    let rings: Vec<FrameRing> = offsets
        .iter()
        .enumerate()
        .map(|(i, &o)| FrameRing::create_in(&region, o, caps(i)).unwrap())
        .collect();
    assert!(FrameRing::create_in(&region, offsets[1], caps(1)).is_err());
    let mut rxs: Vec<_> = rings
        .iter()
        .map(|r| r.consumer(WaitPolicy::default()).unwrap())
        .collect();
    let mut child = spawn_child(TEST, "producer", &seg);
    let mut seqs = vec![0u64; SHARED_RINGS];
    let mut sums = vec![0u64; SHARED_RINGS];
    let mut ended = 0;
    let start = Instant::now();
    while ended < SHARED_RINGS {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "frames stopped coming: {seqs:?}"
        );
        for (i, rx) in rxs.iter_mut().enumerate() {
            if seqs[i] > SHARED_FRAMES {
                continue;
            }
            let Some(f) = rx.try_peek().unwrap() else {
                continue;
            };
            assert_eq!(f.seq(), seqs[i], "ring {i}");
            if f.kind() == FrameKind::End {
                let theirs = u64::from_le_bytes(f.payload().try_into().unwrap());
                assert_eq!(theirs, sums[i], "ring {i}: checksums agree");
                ended += 1;
            } else {
                sums[i] = sums[i].wrapping_add(check(f.payload(), seqs[i] ^ i as u64));
            }
            f.release();
            seqs[i] += 1;
        }
    }
    assert!(wait_timeout(&mut child, Duration::from_secs(60)).success());
    region.unlink();
    assert_gone(&seg);
    drop(rxs);
    drop(rings);
    drop(region);
}

/// A consumer process that exits early is seen by the producer as closed.
#[test]
fn early_consumer_exit_is_seen_as_closed() {
    const TEST: &str = "early_consumer_exit_is_seen_as_closed";
    if let Some((role, seg)) = child_role() {
        assert_eq!(role, "consumer");
        let ring = FrameRing::open_segment(&seg, Duration::from_secs(10)).unwrap();
        let mut rx = ring.consumer(WaitPolicy::default()).unwrap();
        for seq in 0..10 {
            let f = rx.peek().unwrap().unwrap();
            assert_eq!(f.seq(), seq);
            f.release();
        }
        return; // drops rx: closes in order
    }
    let seg = unique("early");
    let ring = FrameRing::create_segment(&seg, 4096).unwrap();
    let mut tx = ring.producer(WaitPolicy::default()).unwrap();
    let mut child = spawn_child(TEST, "consumer", &seg);
    let start = Instant::now();
    let mut sent = 0u64;
    let err = loop {
        match tx.reserve(100) {
            Ok(f) => {
                f.commit();
                sent += 1;
            }
            Err(e) => break e,
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "producer never saw the close"
        );
    };
    assert!(matches!(err, ShmError::Closed), "{err}");
    assert!(sent >= 10);
    assert!(wait_timeout(&mut child, Duration::from_secs(30)).success());
    drop(tx);
    drop(ring);
    assert_gone(&seg);
}

/// A producer process killed with SIGKILL mid-stream: the consumer reads what
/// was committed, then sees the peer gone (no hang), and no segment is left.
#[test]
fn producer_killed_mid_stream() {
    const TEST: &str = "producer_killed_mid_stream";
    if let Some((role, seg)) = child_role() {
        assert_eq!(role, "producer");
        let ring = FrameRing::open_segment(&seg, Duration::from_secs(10)).unwrap();
        let mut tx = ring.producer(WaitPolicy::default()).unwrap();
        let mut seq = 0u64;
        loop {
            let mut f = tx.reserve(200).unwrap();
            fill(f.payload_mut(), seq);
            f.commit();
            seq += 1;
        }
    }
    let seg = unique("killed");
    let ring = FrameRing::create_segment(&seg, 16 * 1024).unwrap();
    let mut rx = ring.consumer(WaitPolicy::default()).unwrap();
    let mut child = spawn_child(TEST, "producer", &seg);
    let mut seq = 0u64;
    while seq < 10_000 {
        let f = rx.peek().unwrap().unwrap();
        assert_eq!(f.seq(), seq);
        check(f.payload(), seq);
        f.release();
        seq += 1;
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert_gone(&seg);
    let start = Instant::now();
    let err = loop {
        match rx.peek() {
            Ok(Some(f)) => {
                assert_eq!(f.seq(), seq);
                check(f.payload(), seq);
                f.release();
                seq += 1;
            }
            Ok(None) => panic!("a killed producer looked like an orderly close"),
            Err(e) => break e,
        }
    };
    assert!(start.elapsed() < Duration::from_secs(10));
    match err {
        ShmError::PeerGone(why) => assert!(why.contains("exited"), "{why}"),
        e => panic!("wrong error: {e}"),
    }
    drop(rx);
    drop(ring);
    assert_gone(&seg);
}

/// A name that exists already (another job, a stale segment) is a clear
/// error, never a silent open; segments of others and open permissions are refused.
#[test]
fn existing_or_foreign_segments_are_refused() {
    if child_role().is_some() {
        return;
    }
    let seg = unique("exists");
    std::fs::write(seg.path(), b"someone else's memory").unwrap();
    let err = FrameRing::create_segment(&seg, 4096).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, ShmError::SegmentExists { .. }), "{msg}");
    assert!(
        msg.contains(seg.as_str()) && msg.contains("already exists"),
        "{msg}"
    );
    assert_eq!(
        std::fs::read(seg.path()).unwrap(),
        b"someone else's memory",
        "the existing file is untouched"
    );

    // Open permissions: refused.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(seg.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = FrameRing::open_segment(&seg, Duration::from_millis(100)).unwrap_err();
    assert!(err.to_string().contains("open to other users"), "{err}");

    // Another user's file: refused (needs root to chown).
    if air_shm::region::uid() == 0 {
        std::fs::set_permissions(seg.path(), std::fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::chown(seg.path(), Some(12345), None).unwrap();
        let err = FrameRing::open_segment(&seg, Duration::from_millis(100)).unwrap_err();
        assert!(err.to_string().contains("owned by uid 12345"), "{err}");
    }
    std::fs::remove_file(seg.path()).unwrap();

    // Not a ring: bad magic.
    let seg = unique("notaring");
    {
        use std::os::unix::fs::OpenOptionsExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(seg.path())
            .unwrap();
        f.set_len(8192).unwrap();
        use std::io::Write;
        (&f).write_all(&0xdead_beef_u64.to_le_bytes()).unwrap();
    }
    let err = FrameRing::open_segment(&seg, Duration::from_millis(100)).unwrap_err();
    assert!(err.to_string().contains("bad magic"), "{err}");
    std::fs::remove_file(seg.path()).unwrap();

    // A segment that never appears: a timeout naming it.
    let seg = unique("never");
    let err = FrameRing::open_segment(&seg, Duration::from_millis(50)).unwrap_err();
    assert!(err.to_string().contains(seg.as_str()), "{err}");
}

/// A segment larger than the free space of /dev/shm fails at creation with
/// the size needed and the size free, and leaves no file behind.
#[test]
fn no_space_is_a_clear_error() {
    if child_role().is_some() {
        return;
    }
    let seg = unique("huge");
    let free = air_shm::region::free_bytes(&air_shm::shm_dir()).unwrap();
    let want = (free as usize).saturating_mul(2).max(1 << 40);
    let err = FrameRing::create_segment(&seg, want).unwrap_err();
    match &err {
        ShmError::NoSpace { needed, free, .. } => {
            assert!(*needed >= want as u64 && needed > free);
        }
        e => panic!("wrong error: {e}"),
    }
    let msg = err.to_string();
    assert!(msg.contains("bytes free") && msg.contains("needs"), "{msg}");
    assert_gone(&seg);
}

/// A creator whose peer never came removes its segment when dropped.
#[test]
fn creator_removes_unopened_segment() {
    if child_role().is_some() {
        return;
    }
    let seg = unique("unopened");
    let ring = FrameRing::create_segment(&seg, 4096).unwrap();
    assert!(seg.path().exists());
    let meta = std::fs::metadata(seg.path()).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(meta.mode() & 0o777, 0o600);
    assert_eq!(meta.uid(), air_shm::region::uid());
    drop(ring);
    assert_gone(&seg);
}

/// A creator killed before its peer opened the segment leaves it behind;
/// `clean_stale` removes it (nobody holds its lock), and leaves a live
/// segment alone.
#[test]
fn stale_segment_of_a_killed_creator_is_cleaned() {
    const TEST: &str = "stale_segment_of_a_killed_creator_is_cleaned";
    if let Some((role, seg)) = child_role() {
        assert_eq!(role, "creator");
        let _ring = FrameRing::create_segment(&seg, 4096).unwrap();
        std::thread::sleep(Duration::from_secs(60));
        return;
    }
    let stale = unique("stale");
    let mut child = spawn_child(TEST, "creator", &stale);
    let start = Instant::now();
    while !stale.path().exists() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "child never created its segment"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(50));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(stale.path().exists(), "a killed creator leaves its segment");
    let live = unique("live");
    let _ring = FrameRing::create_segment(&live, 4096).unwrap();
    // Age both past the two-second grace period.
    let old = std::time::SystemTime::now() - Duration::from_secs(60);
    for p in [stale.path(), live.path()] {
        std::fs::File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_modified(old)
            .unwrap();
    }
    let dry = air_shm::clean_stale(&air_shm::shm_dir(), true).unwrap();
    assert!(
        dry.contains(&(stale.path(), air_shm::CleanOutcome::Removed)),
        "{dry:?}"
    );
    assert!(stale.path().exists(), "a dry run removes nothing");
    let done = air_shm::clean_stale(&air_shm::shm_dir(), false).unwrap();
    assert!(
        done.contains(&(stale.path(), air_shm::CleanOutcome::Removed)),
        "{done:?}"
    );
    assert!(
        done.contains(&(live.path(), air_shm::CleanOutcome::InUse)),
        "{done:?}"
    );
    assert_gone(&stale);
    assert!(live.path().exists(), "a live segment is left alone");
}

/// Opening a ring unlinks its name and closes the opener's descriptor: the
/// producer end keeps only its mapping, so a rank at one end of thousands
/// of node-tier rings holds one descriptor per ring it consumes, not one
/// per end (8 ranks × 28 workers of YSB: 10,976, not 21,952, against a
/// `ulimit -n` of 20,000 here).
#[test]
fn the_opening_end_keeps_no_file_descriptor() {
    if child_role().is_some() {
        return;
    }
    let seg = unique("fds");
    // Descriptors of this process open on the segment (named or deleted).
    let fds_on = |seg: &SegmentName| -> usize {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .flatten()
            .filter(|e| {
                std::fs::read_link(e.path())
                    .is_ok_and(|l| l.to_string_lossy().contains(seg.as_str()))
            })
            .count()
    };
    let created = FrameRing::create_segment(&seg, 64 * 1024).unwrap();
    assert_eq!(fds_on(&seg), 1, "the creator's descriptor");
    let opened = FrameRing::open_segment(&seg, Duration::from_secs(10)).unwrap();
    assert_gone(&seg);
    assert_eq!(fds_on(&seg), 1, "still only the creator's descriptor");
    // Both ends still work through their mappings.
    let mut tx = opened.producer(WaitPolicy::default()).unwrap();
    let mut rx = created.consumer(WaitPolicy::default()).unwrap();
    tx.write(FrameKind::End, b"through the mapping").unwrap();
    let f = rx.peek().unwrap().expect("a frame");
    assert_eq!(f.kind(), FrameKind::End);
    assert_eq!(f.payload(), b"through the mapping");
}
