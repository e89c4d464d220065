//! Live inputs of `air run ysb`, with real processes on loopback: standard
//! input (`--input -`), a TCP server air connects to (`--input tcp://`),
//! TCP senders air accepts (`--listen`, also a sender that reconnects under
//! `--listen-linger-ms`), a file that grows (`--follow`, with a rotation and
//! with a truncation). Results equal the same events read from a file
//! (exact rows); rows appear before the input ends; a connection dropped
//! mid-line is reported with its byte offset and skipped; a sender killed
//! with SIGKILL ends the job cleanly with the rows of what it delivered; a
//! signal (SIGINT on standard input, SIGTERM on a followed file) stops a
//! job whose input never ends with whole windows; a sender faster than the
//! job is held back by TCP flow control (bounded memory, nothing lost); a bad
//! record is named by stream, line and byte offset; with checkpoints, a job
//! killed after a checkpoint covered what it read resumes with the rest of
//! the stream and the file's rows. Under MPI each rank
//! reads its own stream (`{rank}` in the address).

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const AIR: &str = env!("CARGO_BIN_EXE_air");

/// Every test's bound on one `air` process.
const LIMIT: Duration = Duration::from_secs(120);

/// Options of every run: 2 workers, 1 s windows (the events below carry
/// 1000 events per second of event time, so 1000 events a window).
const RUN: [&str; 6] = [
    "--workers",
    "2",
    "--no-pin",
    "--window-ms",
    "1000",
    "--seed",
];

/// Writes `events` YSB events (1000 a second of event time, seed 5) to
/// `dir/events.json` and returns its bytes.
fn gen(dir: &Path, events: u64) -> Vec<u8> {
    let out = dir.join("events.json");
    let st = Command::new(AIR)
        .args(["gen", "ysb", "--events", &events.to_string(), "--seed", "5"])
        .args(["--events-per-s", "1000", "--out"])
        .arg(&out)
        .arg("--campaigns-out")
        .arg(dir.join("campaigns.txt"))
        .output()
        .unwrap();
    assert!(st.status.success(), "{}", common::text(&st));
    std::fs::read(out).unwrap()
}

/// The rows of a CSV output (header dropped), sorted.
fn rows(csv: &str) -> Vec<String> {
    let mut r: Vec<String> = csv
        .lines()
        .skip(1)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    r.sort();
    r
}

/// The rows of `air run ysb` over the events file in `dir`.
fn file_rows(dir: &Path) -> Vec<String> {
    let out = dir.join("file.csv");
    let o = Command::new(AIR)
        .args(["run", "ysb", "--input"])
        .arg(dir.join("events.json"))
        .args(RUN)
        .arg("5")
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::text(&o));
    let r = rows(&std::fs::read_to_string(out).unwrap());
    assert!(r.len() >= 100, "{} rows", r.len());
    r
}

/// `air run ysb` with `live` args and `extra`, stdout and stderr piped,
/// stdin piped too.
fn start(live: &[&str], extra: &[&str]) -> std::process::Child {
    Command::new(AIR)
        .args(["run", "ysb"])
        .args(live)
        .args(RUN)
        .arg("5")
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A loopback port free a moment ago.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Connects to `port` on loopback, retrying while the job starts.
fn connect(port: u16) -> TcpStream {
    let t = Instant::now();
    loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => return s,
            Err(e) if t.elapsed() < Duration::from_secs(60) => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("connect to 127.0.0.1:{port}: {e}"),
        }
    }
}

/// The byte length of the first `n` lines of `bytes`.
fn lines_len(bytes: &[u8], n: usize) -> usize {
    let mut at = 0;
    for _ in 0..n {
        at += bytes[at..].iter().position(|&b| b == b'\n').unwrap() + 1;
    }
    at
}

#[test]
fn stdin_equals_file() {
    let dir = common::tmpdir("live", "stdin");
    let bytes = gen(&dir, 20_000);
    let want = file_rows(&dir);
    let report = dir.join("report.json");
    let rep = report.to_str().unwrap().to_string();
    let mut child = start(&["--input", "-"], &["--out", "-", "--report", &rep]);
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&bytes).unwrap());
    let (o, _) = common::wait(child, "air run ysb --input -", LIMIT);
    writer.join().unwrap();
    assert!(o.status.success(), "{}", common::text(&o));
    assert_eq!(rows(&String::from_utf8_lossy(&o.stdout)), want);
    // Both workers parsed a share (5 MB in chunks of at most 512 KiB).
    let r = common::report(&report);
    let per: Vec<u64> = r["per_worker"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["events"].as_u64().unwrap())
        .collect();
    assert_eq!(per.len(), 2, "{r}");
    assert!(per.iter().all(|&n| n > 0), "{per:?}");
    assert_eq!(per.iter().sum::<u64>(), 20_000);
}

#[test]
fn tcp_connect_equals_file() {
    let dir = common::tmpdir("live", "tcp");
    let bytes = gen(&dir, 20_000);
    let want = file_rows(&dir);
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    let input = format!("tcp://127.0.0.1:{port}");
    let child = start(&["--input", &input], &["--out", "-"]);
    let (mut s, _) = server.accept().unwrap();
    // In pieces that cut lines: the reader joins them.
    for piece in bytes.chunks(7777) {
        s.write_all(piece).unwrap();
    }
    drop(s);
    let (o, _) = common::wait(child, "air run ysb --input tcp://", LIMIT);
    assert!(o.status.success(), "{}", common::text(&o));
    assert_eq!(rows(&String::from_utf8_lossy(&o.stdout)), want);
}

#[test]
fn rows_appear_before_the_input_ends() {
    let dir = common::tmpdir("live", "early");
    let bytes = gen(&dir, 20_000);
    let want = file_rows(&dir);
    let half = lines_len(&bytes, 10_000);
    let mut child = start(&["--input", "-"], &["--out", "-"]);
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&bytes[..half]).unwrap();
    stdin.flush().unwrap();
    // A row of a window before the half's end, while the input is open.
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        let mut line = String::new();
        let mut told = false;
        while out.read_line(&mut line).unwrap() > 0 {
            if !told && line.starts_with(|c: char| c.is_ascii_digit()) {
                let _ = tx.send(());
                told = true;
            }
            all.push_str(&line);
            line.clear();
        }
        all
    });
    if rx.recv_timeout(Duration::from_secs(60)).is_err() {
        let _ = child.kill();
        panic!("no row within 60 s of writing half the input");
    }
    // The input is still open: the job is running.
    assert!(child.try_wait().unwrap().is_none());
    stdin.write_all(&bytes[half..]).unwrap();
    drop(stdin);
    let (o, _) = common::wait(child, "air run ysb --input - (in halves)", LIMIT);
    assert!(o.status.success(), "{}", common::text(&o));
    assert_eq!(rows(&reader.join().unwrap()), want);
}

/// The newest complete checkpoint's id in `ck` (0: none).
fn newest_checkpoint(ck: &Path) -> u64 {
    std::fs::read_dir(ck)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.path().join("MANIFEST.json").exists())
                .filter_map(|e| {
                    let n = e.file_name().to_string_lossy().to_string();
                    n.strip_prefix("chk-")?.parse::<u64>().ok()
                })
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0)
}

/// Standard input with checkpoints: the first half of the events is
/// sent, the sender pauses until checkpoints were taken after the job
/// read it all, and the job is killed with SIGKILL; the same command is
/// rerun and sent the second half. Nothing was read after the last
/// complete checkpoint, so nothing is lost: the committed output equals
/// the file's rows. Both runs say what a live input promises; the second
/// resumes.
#[test]
fn stdin_with_checkpoints_killed_and_resumed_equals_file() {
    let dir = common::tmpdir("live", "ck");
    let bytes = gen(&dir, 20_000);
    let want = file_rows(&dir);
    let half = lines_len(&bytes, 10_000);
    let (ck, out) = (dir.join("ck"), dir.join("out.csv"));
    let (ck_s, out_s) = (ck.to_string_lossy(), out.to_string_lossy());
    let extra = [
        "--out",
        &out_s,
        "--checkpoint-dir",
        &ck_s,
        "--checkpoint-ms",
        "100",
    ];
    let mut child = start(&["--input", "-"], &extra);
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&bytes[..half]).unwrap();
    stdin.flush().unwrap();
    // Checkpoints taken well after the half was read (read in ms).
    std::thread::sleep(Duration::from_millis(500));
    let after = newest_checkpoint(&ck);
    let t = Instant::now();
    while newest_checkpoint(&ck) < after + 3 {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "no checkpoint after {after} within 60 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    let o = child.wait_with_output().unwrap();
    drop(stdin);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("checkpoints with a live input"), "{err}");

    let mut child = start(&["--input", "-"], &extra);
    let mut stdin = child.stdin.take().unwrap();
    let rest = bytes[half..].to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&rest).unwrap());
    let (o, _) = common::wait(child, "air run ysb --input - (resumed)", LIMIT);
    writer.join().unwrap();
    assert!(o.status.success(), "{}", common::text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("resuming from checkpoint"), "{err}");
    assert_eq!(rows(&std::fs::read_to_string(&out).unwrap()), want);
}

/// A followed file under checkpoints resumes at its offset: the job
/// follows a file holding half the events, is killed (SIGKILL) after a
/// checkpoint, the rest is appended, and the same command at 3 workers
/// instead of 2 reads on from the checkpoint's cut (said on stderr): its
/// committed rows equal the whole file's, no line read twice or skipped.
#[test]
fn follow_with_checkpoints_killed_and_resumed_at_its_offset_equals_file() {
    let dir = common::tmpdir("live", "follow-ck");
    let bytes = gen(&dir, 100_000);
    let want = file_rows(&dir);
    let half = lines_len(&bytes, 50_000);
    let path = dir.join("follow.json");
    let mut file = write_file(&path, &bytes[..half]);
    let (ck, out) = (dir.join("ck"), dir.join("out.csv"));
    let (p, ck_s, out_s) = (
        path.to_str().unwrap(),
        ck.to_str().unwrap(),
        out.to_str().unwrap(),
    );
    let run = |workers: &str| {
        Command::new(AIR)
            .args(["run", "ysb", "--follow", p, "--follow-idle-end-ms", "1500"])
            .args(["--workers", workers, "--no-pin", "--window-ms", "1000"])
            .args(["--seed", "5", "--out", out_s, "--checkpoint-dir", ck_s])
            .args(["--checkpoint-ms", "20"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut child = run("2");
    let t = Instant::now();
    while newest_checkpoint(&ck) < 2 {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "no checkpoint in 60 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("checkpoints with --follow"), "{err}");
    file.write_all(&bytes[half..]).unwrap();
    drop(file);

    let (o, _) = common::wait(run("3"), "air run ysb --follow (resumed)", LIMIT);
    assert!(o.status.success(), "{}", common::text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("resuming from checkpoint") && err.contains("its state goes to 3"),
        "{err}"
    );
    assert!(err.contains(&format!("{p}: resuming at byte ")), "{err}");
    assert_eq!(rows(&std::fs::read_to_string(&out).unwrap()), want);
}

/// A job with checkpoints that fails on a bad record commits nothing past
/// its last complete checkpoint as final: a followed file gets a bad line
/// (the job exits 2), the line is cut away and the rest appended, and the
/// same command resumes from the checkpoint and ends with the whole file's
/// rows (a failed job that committed its partial windows as final would
/// leave them, and its rerun would add nothing).
#[test]
fn a_job_failed_on_a_bad_record_resumes_once_the_input_is_mended() {
    let dir = common::tmpdir("live", "follow-bad");
    let bytes = gen(&dir, 60_000);
    let want = file_rows(&dir);
    let half = lines_len(&bytes, 30_000);
    let path = dir.join("follow.json");
    let mut file = write_file(&path, &bytes[..half]);
    let (ck, out) = (dir.join("ck"), dir.join("out.csv"));
    let (p, ck_s, out_s) = (
        path.to_str().unwrap(),
        ck.to_str().unwrap(),
        out.to_str().unwrap(),
    );
    let run = || {
        Command::new(AIR)
            .args(["run", "ysb", "--follow", p, "--follow-idle-end-ms", "1500"])
            .args(["--workers", "2", "--no-pin", "--window-ms", "1000"])
            .args(["--seed", "5", "--out", out_s, "--checkpoint-dir", ck_s])
            .args(["--checkpoint-ms", "20"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let child = run();
    let t = Instant::now();
    while newest_checkpoint(&ck) < 3 {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "no checkpoint in 60 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    file.write_all(b"{\"not\": \"an event\"}\n").unwrap();
    let (o, _) = common::wait(child, "air run ysb --follow (bad line)", LIMIT);
    assert_eq!(o.status.code(), Some(2), "{}", common::text(&o));
    file.set_len(half as u64).unwrap();
    std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(half as u64)).unwrap();
    file.write_all(&bytes[half..]).unwrap();
    drop(file);

    let (o, _) = common::wait(run(), "air run ysb --follow (mended)", LIMIT);
    assert!(o.status.success(), "{}", common::text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("resuming from checkpoint"), "{err}");
    assert_eq!(rows(&std::fs::read_to_string(&out).unwrap()), want);
}

/// A followed file rewritten in place after a kill (the same inode, longer
/// than the cut, other bytes before it) is not taken for the one the
/// checkpoint read: the resumed run says so and reads it from its start
/// (resuming in the middle of other bytes would read a torn line, or skip
/// lines silently).
#[test]
fn follow_resume_sees_a_file_rewritten_under_the_same_inode() {
    let dir = common::tmpdir("live", "follow-same-inode");
    let bytes = gen(&dir, 20_000);
    let half = lines_len(&bytes, 10_000);
    let path = dir.join("follow.json");
    drop(write_file(&path, &bytes[..half]));
    let (ck, out) = (dir.join("ck"), dir.join("out.csv"));
    let (p, ck_s, out_s) = (
        path.to_str().unwrap(),
        ck.to_str().unwrap(),
        out.to_str().unwrap(),
    );
    let run = || {
        Command::new(AIR)
            .args(["run", "ysb", "--follow", p, "--follow-idle-end-ms", "1000"])
            .args(["--workers", "2", "--no-pin", "--window-ms", "1000"])
            .args(["--seed", "5", "--out", out_s, "--checkpoint-dir", ck_s])
            .args(["--checkpoint-ms", "20"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut child = run();
    let t = Instant::now();
    while newest_checkpoint(&ck) < 3 {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "no checkpoint in 60 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    let _ = child.wait();
    let inode = |p: &Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap());
    let before = inode(&path);
    // Rewritten in place: the lines shifted by one, and longer.
    let shifted = lines_len(&bytes, 1);
    std::fs::write(&path, &bytes[shifted..]).unwrap();
    assert_eq!(inode(&path), before, "rewritten in place");
    let (o, _) = common::wait(run(), "air run ysb --follow (rewritten)", LIMIT);
    assert!(o.status.success(), "{}", common::text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("not the file the checkpoint read") && !err.contains("resuming at byte"),
        "{err}"
    );
}

#[test]
fn dropped_connection_mid_line_is_reported_with_its_offset() {
    let dir = common::tmpdir("live", "drop");
    let bytes = gen(&dir, 3_000);
    let whole = lines_len(&bytes, 2_000);
    let report = dir.join("report.json");
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    let input = format!("tcp://127.0.0.1:{port}");
    let rep = report.to_str().unwrap().to_string();
    let child = start(&["--input", &input], &["--out", "-", "--report", &rep]);
    let (mut s, _) = server.accept().unwrap();
    // 2000 lines, then 40 bytes of the next one, then the sender is gone.
    s.write_all(&bytes[..whole + 40]).unwrap();
    drop(s);
    let (o, _) = common::wait(child, "air run ysb (dropped sender)", LIMIT);
    assert!(o.status.success(), "{}", common::text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("{input}:2001: connection ended mid-line"))
            && err.contains(&format!("(byte offset {whole})"))
            && err.contains("partial line of 40 bytes"),
        "{}",
        common::text(&o)
    );
    let r = common::report(&report);
    assert_eq!(r["skipped_records"], 1, "{r}");
    // The 2000 whole lines were counted.
    let counted: u64 = rows(&String::from_utf8_lossy(&o.stdout))
        .iter()
        .map(|l| l.rsplit(',').next().unwrap().parse::<u64>().unwrap())
        .sum();
    let views = bytes[..whole]
        .split(|&b| b == b'\n')
        .filter(|l| l.windows(15).any(|w| w == b"\"event_type\":\"v"))
        .count() as u64;
    assert_eq!(counted, views);
}

#[test]
fn listen_with_two_senders_equals_file() {
    let dir = common::tmpdir("live", "listen");
    let bytes = gen(&dir, 20_000);
    let want = file_rows(&dir);
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    // The two senders' streams interleave: a delay that covers the whole
    // stream keeps every event on time, so the rows are exact.
    let child = start(
        &["--listen", &addr],
        &["--out", "-", "--max-delay-ms", "100000"],
    );
    let half = lines_len(&bytes, 10_000);
    let (a, b) = (bytes[..half].to_vec(), bytes[half..].to_vec());
    // Both connect before either sends: the input ends when every sender
    // that came has closed, so a sender that came late (a loaded host)
    // would find the job gone.
    let both = std::sync::Arc::new(std::sync::Barrier::new(2));
    let senders: Vec<_> = [a, b]
        .into_iter()
        .map(|part| {
            let both = both.clone();
            std::thread::spawn(move || {
                let mut s = connect(port);
                both.wait();
                for piece in part.chunks(10_000) {
                    s.write_all(piece).unwrap();
                }
            })
        })
        .collect();
    for s in senders {
        s.join().unwrap();
    }
    let (o, _) = common::wait(child, "air run ysb --listen", LIMIT);
    assert!(o.status.success(), "{}", common::text(&o));
    assert_eq!(rows(&String::from_utf8_lossy(&o.stdout)), want);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("late 0"),
        "{}",
        common::text(&o)
    );
    // Records read carry their own event times: no latency line with 0
    // samples (as for every live input).
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("(event times are not wall-clock: no latency)"),
        "{}",
        common::text(&o)
    );
}

/// The resident set of process `pid` (bytes), or `None` once it is gone.
fn resident_bytes(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: u64 = s
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

#[test]
fn a_sender_faster_than_the_job_is_held_back_not_buffered() {
    // About 99 MB of events sent from memory as fast as loopback TCP takes
    // them, into a job whose output nobody reads for a while: its sink
    // blocks, then its workers, then its reader (the chunk queues are
    // bounded: 4 chunks of 512 KiB per worker), and TCP flow control holds
    // the sender. Buffering the stream instead, the job would take it all.
    let dir = common::tmpdir("live", "fast-sender");
    let bytes = gen(&dir, 400_000);
    let want = file_rows(&dir);
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let report = dir.join("report.json");
    let mut child = start(
        &["--listen", &addr],
        &["--out", "-", "--report", report.to_str().unwrap()],
    );
    let pid = child.id();
    let stdout = child.stdout.take().unwrap();
    let total = bytes.len();
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let sender = {
        let sent = sent.clone();
        std::thread::spawn(move || {
            let mut s = connect(port);
            for piece in bytes.chunks(64 << 10) {
                s.write_all(piece).unwrap();
                sent.fetch_add(piece.len(), std::sync::atomic::Ordering::Relaxed);
            }
        })
    };
    // Wait until the sender is stuck: nothing more sent for 0.5 s.
    let t = Instant::now();
    let (mut last, mut still, mut peak) = (0, 0, 0u64);
    while still < 5 {
        std::thread::sleep(Duration::from_millis(100));
        peak = peak.max(resident_bytes(pid).unwrap_or(0));
        let now = sent.load(std::sync::atomic::Ordering::Relaxed);
        if now == total {
            break;
        }
        still = if now == last && now > 0 { still + 1 } else { 0 };
        last = now;
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the sender never stopped"
        );
    }
    let held = sent.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!("fast sender: held at {held} of {total} bytes; the job's resident set {peak} bytes");
    assert!(
        held < total / 2,
        "the job took {held} of {total} bytes while its output was not read: the stream was buffered"
    );
    assert!(
        peak < 64 << 20,
        "the job's resident set reached {peak} bytes while held at {held} bytes"
    );
    // Now read the output: everything flows, nothing was lost.
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        BufReader::new(stdout).read_to_string(&mut all).unwrap();
        all
    });
    sender.join().unwrap();
    let (o, _) = common::wait(child, "air run ysb --listen (fast sender)", LIMIT);
    assert!(o.status.success(), "{}", common::text(&o));
    assert_eq!(rows(&reader.join().unwrap()), want);
    assert_eq!(events_read(&report), 400_000);
}

#[test]
fn bad_record_on_stdin_names_the_stream_line_and_offset() {
    let dir = common::tmpdir("live", "bad");
    let bytes = gen(&dir, 100);
    let at = lines_len(&bytes, 4);
    let mut input = bytes[..at].to_vec();
    input.extend_from_slice(b"{\"not\": \"an event\"}\n");
    input.extend_from_slice(&bytes[at..]);
    let mut child = start(&["--input", "-"], &["--out", "-"]);
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let (o, _) = common::wait(child, "air run ysb --input - (bad record)", LIMIT);
    writer.join().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", common::text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("-:5: ") && err.contains(&format!("(byte offset {at})")),
        "{}",
        common::text(&o)
    );
}

/// Runs `air run ysb` over `live` (fed the first half of the events on its
/// standard input, or by `prepare` before it starts; the input left open),
/// waits for its first row, sends `signal`, and checks the job exits with
/// 128 + signal having written whole windows only (each equal to the
/// file's), and not all of them.
fn check_signal_stop(
    name: &str,
    live: &[&str],
    signal: i32,
    prepare: Option<fn(&Path, &[u8]) -> std::fs::File>,
) {
    let dir = common::tmpdir("live", name);
    let bytes = gen(&dir, 20_000);
    let want = file_rows(&dir);
    let mut by_window: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in &want {
        let w = r.split(',').next().unwrap().to_string();
        by_window.entry(w).or_default().push(r.clone());
    }
    let half = lines_len(&bytes, 10_000);
    let live: Vec<String> = live
        .iter()
        .map(|a| a.replace("{dir}", dir.to_str().unwrap()))
        .collect();
    let live: Vec<&str> = live.iter().map(|a| a.as_str()).collect();
    let file = prepare.map(|p| p(&dir, &bytes[..half]));
    let mut child = start(&live, &["--out", "-"]);
    let mut stdin = child.stdin.take().unwrap();
    if file.is_none() {
        stdin.write_all(&bytes[..half]).unwrap();
        stdin.flush().unwrap();
    }
    let mut out = child.stdout.take().unwrap();
    // Wait for the first row, keep the input open, then signal.
    let mut got = Vec::new();
    let t = Instant::now();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got)
        .lines()
        .any(|l| l.starts_with(|c: char| c.is_ascii_digit()))
    {
        assert!(t.elapsed() < Duration::from_secs(60), "no row in 60 s");
        let n = out.read(&mut buf).unwrap();
        assert!(n > 0, "output closed early");
        got.extend_from_slice(&buf[..n]);
    }
    // SAFETY: plain kill of the child this test started.
    unsafe { libc::kill(child.id() as i32, signal) };
    out.read_to_end(&mut got).unwrap();
    let (o, _) = common::wait(
        child,
        &format!("air run ysb {live:?} (signal {signal})"),
        LIMIT,
    );
    drop((stdin, file));
    assert_eq!(o.status.code(), Some(128 + signal), "{}", common::text(&o));
    let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in rows(&String::from_utf8_lossy(&got)) {
        let w = r.split(',').next().unwrap().to_string();
        seen.entry(w).or_default().push(r);
    }
    assert!(!seen.is_empty());
    // Every window written is whole: its rows equal the file's.
    for (w, r) in &seen {
        assert_eq!(Some(r), by_window.get(w), "window {w}");
    }
    // Nothing past the half was read.
    assert!(seen.len() < by_window.len());
}

#[test]
fn a_signal_stops_a_live_job_with_whole_windows() {
    // Standard input, SIGINT.
    check_signal_stop("signal", &["--input", "-"], libc::SIGINT, None);
}

#[test]
fn sigterm_stops_a_followed_file_with_whole_windows() {
    // A followed file that is still open for writing, SIGTERM.
    check_signal_stop(
        "follow-term",
        &["--follow", "{dir}/growing.json"],
        libc::SIGTERM,
        Some(|dir, half| write_file(&dir.join("growing.json"), half)),
    );
}

/// Under `mpirun -np 2` each rank connects to its own server, named by
/// `{rank}` in the address (`tcp://127.0.0.1:4{rank}NNN`: ports 40NNN and
/// 41NNN); rank 0's stream holds the even lines, rank 1's the odd ones.
/// The job's rows equal the whole file's.
#[cfg(feature = "mpi")]
#[test]
fn each_rank_reads_its_own_tcp_stream() {
    let dir = common::tmpdir("live", "mpi");
    let bytes = gen(&dir, 20_000);
    let want = file_rows(&dir);
    let (nnn, servers) = (100..1000)
        .find_map(|n| {
            let a = TcpListener::bind(("127.0.0.1", 40_000 + n)).ok()?;
            let b = TcpListener::bind(("127.0.0.1", 41_000 + n)).ok()?;
            Some((n, [a, b]))
        })
        .expect("two free ports 40NNN and 41NNN");
    let mut halves = [Vec::new(), Vec::new()];
    for (i, line) in bytes.split_inclusive(|&b| b == b'\n').enumerate() {
        halves[i % 2].extend_from_slice(line);
    }
    let out = dir.join("mpi.csv");
    let mut cmd = air_rdma::mpirun_command(2);
    cmd.arg(AIR)
        .args([
            "run",
            "ysb",
            "--input",
            &format!("tcp://127.0.0.1:4{{rank}}{nnn}"),
        ])
        .args([
            "--workers",
            "1",
            "--no-pin",
            "--window-ms",
            "1000",
            "--seed",
            "5",
        ])
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    let senders: Vec<_> = servers
        .into_iter()
        .zip(halves)
        .map(|(server, half)| {
            std::thread::spawn(move || {
                let (mut s, _) = server.accept().unwrap();
                s.write_all(&half).unwrap();
            })
        })
        .collect();
    for s in senders {
        s.join().unwrap();
    }
    let (o, _) = common::wait(
        child,
        "mpirun -np 2 air run ysb --input tcp://…{rank}…",
        LIMIT,
    );
    assert!(o.status.success(), "{}", common::text(&o));
    assert_eq!(rows(&std::fs::read_to_string(&out).unwrap()), want);
}

/// A running job's standard output and error, read line by line in two
/// threads: each line is also sent on `rx` (`true` for standard output).
struct Watch {
    rx: Receiver<(bool, String)>,
    out: JoinHandle<String>,
    err: JoinHandle<String>,
}

impl Watch {
    fn new(child: &mut Child) -> Watch {
        let (tx, rx) = channel();
        let read = |r: Box<dyn Read + Send>, is_out: bool| {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut all = String::new();
                let mut r = BufReader::new(r);
                let mut line = String::new();
                while r.read_line(&mut line).unwrap_or(0) > 0 {
                    let _ = tx.send((is_out, line.clone()));
                    all.push_str(&line);
                    line.clear();
                }
                all
            })
        };
        let out = read(Box::new(child.stdout.take().unwrap()), true);
        let err = read(Box::new(child.stderr.take().unwrap()), false);
        Watch { rx, out, err }
    }

    /// Waits up to 60 s for a line of standard output (`out`) or error
    /// that `f` accepts, and returns it.
    fn until(&self, out: bool, f: impl Fn(&str) -> bool, what: &str) -> String {
        let t = Instant::now();
        loop {
            let left = Duration::from_secs(60).saturating_sub(t.elapsed());
            match self.rx.recv_timeout(left) {
                Ok((o, l)) if o == out && f(&l) => return l,
                Ok(_) => {}
                Err(_) => panic!("no {what} within 60 s"),
            }
        }
    }

    /// Standard output and error, once the job ended.
    fn finish(self) -> (String, String) {
        (self.out.join().unwrap(), self.err.join().unwrap())
    }
}

/// A result row (not the header).
fn is_row(l: &str) -> bool {
    l.starts_with(|c: char| c.is_ascii_digit())
}

fn write_file(path: &Path, bytes: &[u8]) -> std::fs::File {
    let mut f = std::fs::File::create(path).unwrap();
    f.write_all(bytes).unwrap();
    f
}

/// Events parsed by every worker of the job, from its report.
fn events_read(report: &Path) -> u64 {
    let r = common::report(report);
    r["per_worker"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["events"].as_u64().unwrap())
        .sum()
}

#[test]
fn follow_with_a_rotation_equals_file() {
    let dir = common::tmpdir("live", "follow-rotate");
    let bytes = gen(&dir, 20_000);
    let want = file_rows(&dir);
    let path = dir.join("follow.json");
    let cut = |n| lines_len(&bytes, n);
    let (a, b, c, d) = (cut(8_000), cut(10_000), cut(12_000), cut(16_000));
    let mut old = write_file(&path, &bytes[..a]);
    let report = dir.join("report.json");
    let (p, rep) = (path.to_str().unwrap(), report.to_str().unwrap());
    let mut child = start(
        &["--follow", p],
        &[
            "--out",
            "-",
            "--follow-idle-end-ms",
            "4000",
            "--report",
            rep,
        ],
    );
    let watch = Watch::new(&mut child);
    // The job reads the file as it is written.
    watch.until(true, is_row, "row");
    old.write_all(&bytes[a..b]).unwrap();
    // Rotation: the file is renamed, its writer (still holding it) adds
    // more, then a new file is created at the path and grows.
    std::fs::rename(&path, dir.join("follow.json.1")).unwrap();
    old.write_all(&bytes[b..c]).unwrap();
    let mut new = write_file(&path, &bytes[c..d]);
    std::thread::sleep(Duration::from_millis(200));
    new.write_all(&bytes[d..]).unwrap();
    let (o, _) = common::wait(child, "air run ysb --follow (rotation)", LIMIT);
    let (out, err) = watch.finish();
    assert!(o.status.success(), "{}\n{err}", o.status);
    assert_eq!(rows(&out), want, "{err}");
    assert_eq!(err.matches(": rotated (").count(), 1, "{err}");
    assert!(
        err.contains(&format!("the old one was read to its end, {c} bytes"))
            && err.contains(&format!("as \"{p} (file 2)\"")),
        "{err}"
    );
    assert!(err.contains("late 0"), "{err}");
    assert_eq!(events_read(&report), 20_000);
}

#[test]
fn follow_with_a_truncation_equals_file() {
    let dir = common::tmpdir("live", "follow-truncate");
    let bytes = gen(&dir, 20_000);
    let want = file_rows(&dir);
    let path = dir.join("follow.json");
    let half = lines_len(&bytes, 10_000);
    let f = write_file(&path, &bytes[..half]);
    let p = path.to_str().unwrap();
    let mut child = start(
        &["--follow", p],
        &["--out", "-", "--follow-idle-end-ms", "4000"],
    );
    let watch = Watch::new(&mut child);
    watch.until(true, is_row, "row");
    // The reader reads 2.6 MB in milliseconds; the message below says how
    // much it had read when it saw the truncation.
    std::thread::sleep(Duration::from_millis(500));
    f.set_len(0).unwrap();
    drop(f);
    let said = watch.until(false, |l| l.contains(": truncated to "), "truncation line");
    assert!(
        said.contains(&format!("after {half} were read"))
            && said.contains(&format!("as \"{p} (file 2)\"")),
        "{said}"
    );
    // The file starts again with the second half (written after the job
    // saw the truncation: a file that grew past the old size first would
    // look like growth).
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    for piece in bytes[half..].chunks(100_000) {
        f.write_all(piece).unwrap();
    }
    let (o, _) = common::wait(child, "air run ysb --follow (truncation)", LIMIT);
    let (out, err) = watch.finish();
    assert!(o.status.success(), "{}\n{err}", o.status);
    assert_eq!(rows(&out), want, "{err}");
    assert_eq!(err.matches(": truncated to ").count(), 1, "{err}");
    assert!(err.contains("late 0"), "{err}");
}

#[test]
fn listen_sender_that_reconnects_equals_file() {
    let dir = common::tmpdir("live", "linger");
    let bytes = gen(&dir, 20_000);
    let want = file_rows(&dir);
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = start(
        &["--listen", &addr],
        &["--out", "-", "--listen-linger-ms", "3000"],
    );
    let watch = Watch::new(&mut child);
    let half = lines_len(&bytes, 10_000);
    // The sender sends half, drops its connection, comes back and sends
    // the rest (on a new connection).
    let mut s = connect(port);
    for piece in bytes[..half].chunks(10_000) {
        s.write_all(piece).unwrap();
    }
    drop(s);
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the job ended at the first close"
    );
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    for piece in bytes[half..].chunks(10_000) {
        s.write_all(piece).unwrap();
    }
    drop(s);
    let closed = Instant::now();
    let (o, _) = common::wait(child, "air run ysb --listen --listen-linger-ms", LIMIT);
    let lingered = closed.elapsed();
    let (out, err) = watch.finish();
    assert!(o.status.success(), "{}\n{err}", o.status);
    assert_eq!(rows(&out), want, "{err}");
    assert!(err.contains("late 0") && !err.contains("mid-line"), "{err}");
    // The input ended once no sender came back for the linger.
    assert!(lingered >= Duration::from_millis(3000), "{lingered:?}");
}

/// Checks a job whose sender was killed: it exited 0, reported the
/// partial line (if any) with its byte offset, and its rows equal those of
/// a file of the whole lines it received. `bytes` is the stream the
/// sender sends a prefix of; `name` how the stream's name in messages
/// starts.
fn check_killed_sender(
    dir: &Path,
    bytes: &[u8],
    name: &str,
    o: &std::process::Output,
    out: &str,
    err: &str,
    report: &Path,
) {
    assert_eq!(o.status.code(), Some(0), "{}\n{err}", o.status);
    let events = events_read(report);
    assert!(events > 0, "{err}");
    let whole = lines_len(bytes, events as usize);
    assert!(
        whole < bytes.len(),
        "the sender was not killed mid-run: {err}"
    );
    let r = common::report(report);
    let partial = err
        .lines()
        .find(|l| l.contains(": connection ended mid-line: "));
    eprintln!("killed sender: {events} events, {whole} bytes of whole lines, {partial:?}");
    match partial {
        Some(said) => {
            // The partial line follows the lines the workers counted.
            assert!(
                said.starts_with(&format!("warning: {name}"))
                    && said.contains(&format!(":{}: connection ended mid-line", events + 1))
                    && said.ends_with(&format!("(byte offset {whole})")),
                "{said}\n{err}"
            );
            let len: usize = said
                .split("partial line of ")
                .nth(1)
                .and_then(|t| t.split(' ').next())
                .unwrap()
                .parse()
                .unwrap();
            // The bytes received are a prefix of the stream, cut mid-line.
            assert!(len > 0 && !bytes[whole..whole + len].contains(&b'\n'));
            assert_eq!(r["skipped_records"], 1, "{r}");
        }
        None => assert_eq!(r["skipped_records"], 0, "{r}\n{err}"),
    }
    // The rows equal a file run over the whole lines received.
    let prefix = dir.join("prefix");
    std::fs::create_dir_all(&prefix).unwrap();
    std::fs::write(prefix.join("events.json"), &bytes[..whole]).unwrap();
    let o2 = Command::new(AIR)
        .args(["run", "ysb", "--input"])
        .arg(prefix.join("events.json"))
        .args(RUN)
        .args(["5", "--out", "-"])
        .output()
        .unwrap();
    assert!(o2.status.success(), "{}", common::text(&o2));
    let want = rows(&String::from_utf8_lossy(&o2.stdout));
    assert!(!want.is_empty());
    assert_eq!(rows(out), want, "{err}");
}

#[test]
fn a_killed_air_gen_sender_ends_the_job_cleanly() {
    let dir = common::tmpdir("live", "killed-gen");
    // The sender's stream is this file's first events (same seed and
    // event-time rate; --rate only paces it).
    let bytes = gen(&dir, 60_000);
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let report = dir.join("report.json");
    let mut child = start(
        &["--listen", &addr],
        &["--out", "-", "--report", report.to_str().unwrap()],
    );
    let watch = Watch::new(&mut child);
    // `air gen` connects once: start it until the job listens.
    let t = Instant::now();
    let mut sender = loop {
        let mut g = Command::new(AIR)
            .args(["gen", "ysb", "--events", "60000", "--seed", "5"])
            .args(["--events-per-s", "1000", "--rate", "10000", "--out"])
            .arg(format!("tcp://{addr}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        match g.try_wait().unwrap() {
            None => break g,
            Some(_) => {
                assert!(
                    t.elapsed() < Duration::from_secs(60),
                    "air gen cannot connect"
                );
            }
        }
    };
    watch.until(true, is_row, "row");
    std::thread::sleep(Duration::from_millis(300));
    // SIGKILL (Child::kill), mid-run.
    sender.kill().unwrap();
    let _ = sender.wait();
    let (o, _) = common::wait(child, "air run ysb --listen (killed air gen)", LIMIT);
    let (out, err) = watch.finish();
    let name = format!("listen://{addr} (connection 1 from ");
    check_killed_sender(&dir, &bytes, &name, &o, &out, &err, &report);
}

#[test]
fn a_killed_python_sender_mid_line_ends_the_job_cleanly() {
    let dir = common::tmpdir("live", "killed-py");
    let bytes = gen(&dir, 60_000);
    // A server that sends the file in 1000-byte pieces (most end
    // mid-line), about 2 MB/s, and is killed while it sends.
    let script = r#"
import socket, sys, time
data = open(sys.argv[1], "rb").read()
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(1)
print(s.getsockname()[1], flush=True)
c, _ = s.accept()
for i in range(0, len(data), 1000):
    c.sendall(data[i:i + 1000])
    time.sleep(0.0005)
time.sleep(600)
"#;
    let mut py = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(dir.join("events.json"))
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut port = String::new();
    BufReader::new(py.stdout.take().unwrap())
        .read_line(&mut port)
        .unwrap();
    let input = format!("tcp://127.0.0.1:{}", port.trim());
    let report = dir.join("report.json");
    let mut child = start(
        &["--input", &input],
        &["--out", "-", "--report", report.to_str().unwrap()],
    );
    let watch = Watch::new(&mut child);
    watch.until(true, is_row, "row");
    std::thread::sleep(Duration::from_millis(300));
    py.kill().unwrap();
    let _ = py.wait();
    let (o, _) = common::wait(child, "air run ysb --input tcp:// (killed sender)", LIMIT);
    let (out, err) = watch.finish();
    check_killed_sender(&dir, &bytes, &input, &o, &out, &err, &report);
}
