//! `air shm clean`: removes this user's segments that no live process holds
//! (listing each), leaves a live job's and another user's alone, and with
//! `--dry-run` removes nothing.

use std::os::unix::io::AsRawFd;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, SystemTime};

const AIR: &str = env!("CARGO_BIN_EXE_air");

/// The tests one at a time: a cleaner locks each segment it looks at, so a
/// second `air shm clean` running at that moment sees it "in use" (the
/// other test's stale segment, once, on a loaded machine).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn plant(name: &str, owner: Option<u32>) -> PathBuf {
    let p = PathBuf::from("/dev/shm").join(name);
    let f = std::fs::File::create(&p).unwrap();
    f.set_len(4096).unwrap();
    // Older than the 2 s a fresh segment is given to be locked.
    f.set_modified(SystemTime::now() - Duration::from_secs(3600))
        .unwrap();
    if let Some(uid) = owner {
        std::os::unix::fs::chown(&p, Some(uid), Some(uid)).unwrap();
    }
    p
}

fn clean(args: &[&str]) -> String {
    let child = Command::new(AIR)
        .args(["shm", "clean"])
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    // It must never block (a FIFO among the segments once hung it).
    let watchdog = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(20));
        // SAFETY: plain kill of the child this test started (if still there).
        unsafe { libc::kill(pid, libc::SIGKILL) };
    });
    let o = child.wait_with_output().unwrap();
    drop(watchdog);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn clean_removes_only_this_users_unheld_segments_and_lists_them() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let tag = format!("cleantest{}", std::process::id());
    let stale = plant(&format!("air-{uid}-{tag}-stale"), None);
    let live = plant(&format!("air-{uid}-{tag}-live"), None);
    // A live job holds a shared flock on each segment it maps: this test
    // process plays one.
    let held = std::fs::File::open(&live).unwrap();
    // SAFETY: flock on an open descriptor this test owns.
    assert_eq!(unsafe { libc::flock(held.as_raw_fd(), libc::LOCK_SH) }, 0);
    // A FIFO with a segment's name (anyone can plant one in /dev/shm):
    // skipped, never opened (an open would block for good).
    let fifo = PathBuf::from("/dev/shm").join(format!("air-{uid}-{tag}-fifo"));
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    // Another user's segment (only root can make one): never touched.
    let foreign = (uid == 0).then(|| plant(&format!("air-4242-{tag}-other"), Some(4242)));

    let dry = clean(&["--dry-run"]);
    assert!(
        dry.contains(&format!("{}: stale (would remove)", stale.display())),
        "{dry}"
    );
    assert!(
        dry.contains(&format!("{}: in use", live.display())),
        "{dry}"
    );
    assert!(stale.exists(), "--dry-run removed {}", stale.display());

    let done = clean(&[]);
    assert!(
        done.contains(&format!("{}: removed", stale.display())),
        "{done}"
    );
    assert!(
        done.contains(&format!("{}: in use", live.display())),
        "{done}"
    );
    assert!(!stale.exists(), "the stale segment is removed");
    assert!(live.exists(), "a held segment is left alone");
    if let Some(p) = &foreign {
        assert!(p.exists(), "another user's segment is left alone");
        assert!(!done.contains("air-4242-"), "{done}");
        std::fs::remove_file(p).unwrap();
    }

    assert!(fifo.exists() && !done.contains("-fifo"), "{done}");
    std::fs::remove_file(&fifo).unwrap();

    // Once its holder is gone, the segment is stale too.
    drop(held);
    let after = clean(&[]);
    assert!(
        after.contains(&format!("{}: removed", live.display())),
        "{after}"
    );
    assert!(!live.exists());
}

/// A segment younger than 2 s (a starting job's, perhaps not yet locked)
/// is left alone, listed, and counted in the summary line.
#[test]
fn clean_skips_and_counts_segments_younger_than_2_s() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let young =
        PathBuf::from("/dev/shm").join(format!("air-{uid}-youngtest{}-g0-g1", std::process::id()));
    std::fs::File::create(&young)
        .unwrap()
        .set_len(4096)
        .unwrap();
    // A dry run: a real one would race the other test's segments.
    let done = clean(&["--dry-run"]);
    assert!(young.exists(), "a young segment was removed: {done}");
    std::fs::remove_file(&young).unwrap();
    assert!(
        done.contains(&format!("{}: just created (left alone)", young.display())),
        "{done}"
    );
    // Other tests' segments may be young too: at least this one counted.
    let last = done.lines().last().unwrap_or_default();
    let n: usize = last
        .split(", ")
        .find_map(|p| p.strip_suffix(" younger than 2 s skipped"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of young segments: {last}"));
    assert!(n >= 1, "{last}");
}
