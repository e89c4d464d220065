//! Live inputs of `air run nexmark` and `air run wordcount`, and the live
//! outputs of `air gen nexmark|wa` (`--out -`, `--out tcp://`, `--rate`),
//! with real processes on loopback: results equal the same events read
//! from a file (exact rows) for q0, q3 (full events), q5 and q8 (which
//! reads its input twice: both sides fed from the one stream), from
//! standard input, a TCP server air connects to and `--listen`; a bad
//! record on standard input is named by stream, line and byte offset; the
//! generators' paced outputs are the file's bytes, at their pace.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const AIR: &str = env!("CARGO_BIN_EXE_air");

/// Every test's bound on one `air` process.
const LIMIT: Duration = Duration::from_secs(120);

/// Events of the streams below: 20 000 at 1000 a second of event time (20
/// s: ten q5 slides, two q8 windows).
const GEN: [&str; 4] = ["--events", "20000", "--events-per-s", "1000"];

/// Writes the NEXMark events of [`GEN`] to `dir/events.json` and returns
/// their bytes.
fn gen_nexmark(dir: &Path) -> Vec<u8> {
    let out = dir.join("events.json");
    let o = Command::new(AIR)
        .args(["gen", "nexmark"])
        .args(GEN)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::text(&o));
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

/// `air run nexmark --query q` on 2 workers with `input` args, piped.
fn start_nexmark(q: &str, input: &[&str], extra: &[&str]) -> std::process::Child {
    Command::new(AIR)
        .args(["run", "nexmark", "--query", q, "--workers", "2", "--no-pin"])
        .args(input)
        .args(["--out", "-"])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The rows of query `q` over the events file in `dir` (at least `min`).
fn file_rows(dir: &Path, q: &str, min: usize) -> Vec<String> {
    let file = dir.join("events.json");
    let child = start_nexmark(q, &["--input", file.to_str().unwrap()], &[]);
    let (o, _) = common::wait(child, &format!("air run nexmark --query {q} (file)"), LIMIT);
    assert!(o.status.success(), "{}", common::text(&o));
    let r = rows(&String::from_utf8_lossy(&o.stdout));
    assert!(r.len() >= min, "{q}: {} rows", r.len());
    r
}

/// Runs query `q` with `input` args while `feed` sends the input (given
/// the child, for standard input), and returns its output.
fn live_run(
    q: &str,
    input: &[&str],
    extra: &[&str],
    feed: impl FnOnce(&mut std::process::Child) -> Option<std::thread::JoinHandle<()>>,
) -> std::process::Output {
    let mut child = start_nexmark(q, input, extra);
    let sender = feed(&mut child);
    let (o, _) = common::wait(
        child,
        &format!("air run nexmark --query {q} {input:?}"),
        LIMIT,
    );
    if let Some(s) = sender {
        s.join().unwrap();
    }
    o
}

/// Writes `bytes` to the child's standard input from a thread, then closes
/// it.
fn to_stdin(
    child: &mut std::process::Child,
    bytes: Vec<u8>,
) -> Option<std::thread::JoinHandle<()>> {
    let mut stdin = child.stdin.take().unwrap();
    Some(std::thread::spawn(move || {
        let _ = stdin.write_all(&bytes);
    }))
}

/// The byte length of the first `n` lines of `bytes`.
fn lines_len(bytes: &[u8], n: usize) -> usize {
    let mut at = 0;
    for _ in 0..n {
        at += bytes[at..].iter().position(|&b| b == b'\n').unwrap() + 1;
    }
    at
}

/// A loopback port free a moment ago.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// q0 (bids streamed out by time), q3 (full events, a keyed join), q5
/// (sliding windows, top auction) and q8 (reads its input twice: a window
/// join of persons and auctions) from standard input give the rows of the
/// same events read from a file; both workers parse a share.
#[test]
fn nexmark_stdin_equals_file() {
    let dir = common::tmpdir("livenex", "stdin");
    let bytes = gen_nexmark(&dir);
    for (q, min) in [("q0", 15_000), ("q3", 1), ("q5", 5), ("q8", 5)] {
        let want = file_rows(&dir, q, min);
        let report = dir.join(format!("{q}.json"));
        let rep = report.to_str().unwrap();
        let b = bytes.clone();
        let o = live_run(q, &["--input", "-"], &["--report", rep], |c| to_stdin(c, b));
        assert!(o.status.success(), "{q}: {}", common::text(&o));
        assert_eq!(rows(&String::from_utf8_lossy(&o.stdout)), want, "{q}");
        let r = common::report(&report);
        assert_eq!(r["source"], "live", "{q}: {r}");
        let per: Vec<u64> = r["per_worker"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["events"].as_u64().unwrap())
            .collect();
        assert_eq!(per.iter().sum::<u64>(), 20_000, "{q}: {per:?}");
        assert!(per.iter().all(|&n| n > 0), "{q}: {per:?}");
        assert_eq!(r["late_records"], 0, "{q}: {r}");
    }
}

/// q8 and q5 from a TCP server air connects to (the stream sent in pieces
/// that cut lines) give the file's rows.
#[test]
fn nexmark_tcp_connect_equals_file() {
    let dir = common::tmpdir("livenex", "tcp");
    let bytes = gen_nexmark(&dir);
    for q in ["q8", "q5"] {
        let want = file_rows(&dir, q, 5);
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = server.local_addr().unwrap().port();
        let input = format!("tcp://127.0.0.1:{port}");
        let b = bytes.clone();
        let o = live_run(q, &["--input", &input], &[], move |_| {
            Some(std::thread::spawn(move || {
                let (mut s, _) = server.accept().unwrap();
                for piece in b.chunks(7777) {
                    s.write_all(piece).unwrap();
                }
            }))
        });
        assert!(o.status.success(), "{q}: {}", common::text(&o));
        assert_eq!(rows(&String::from_utf8_lossy(&o.stdout)), want, "{q}");
    }
}

/// `air gen nexmark --rate R --out tcp://` feeds `air run nexmark --listen`
/// at its pace: the rows equal the file's, and the run took at least the
/// stream's length at that rate.
#[test]
fn gen_nexmark_rate_into_listen_equals_file() {
    let dir = common::tmpdir("livenex", "listen");
    gen_nexmark(&dir);
    let want = file_rows(&dir, "q5", 5);
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let child = start_nexmark("q5", &["--listen", &addr], &[]);
    // 20 000 events at 20 000/s: about a second. Retried while the job
    // starts (a refused connection exits 2 before sending anything).
    let t = Instant::now();
    let sent = loop {
        let o = Command::new(AIR)
            .args(["gen", "nexmark"])
            .args(GEN)
            .args(["--rate", "20000", "--out", &format!("tcp://{addr}")])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        if o.status.success() {
            break Instant::now();
        }
        assert!(
            err.contains("cannot connect") && t.elapsed() < Duration::from_secs(60),
            "{}",
            common::text(&o)
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let (o, _) = common::wait(child, "air run nexmark --listen", LIMIT);
    assert!(o.status.success(), "{}", common::text(&o));
    assert_eq!(rows(&String::from_utf8_lossy(&o.stdout)), want);
    // The last sender run was paced: it ended at least 0.95 s after the
    // first try started (its own start is later still).
    assert!(sent - t >= Duration::from_millis(950), "{:?}", sent - t);
}

/// `air gen nexmark --rate R --out -` piped into `air run nexmark --input
/// -` (q8): the file's rows; and the paced standard output is the file's
/// bytes, in both JSON forms.
#[test]
fn gen_nexmark_rate_to_stdout_pipes_into_a_live_job() {
    let dir = common::tmpdir("livenex", "pipe");
    let bytes = gen_nexmark(&dir);
    let want = file_rows(&dir, "q8", 5);
    let mut gen = Command::new(AIR)
        .args(["gen", "nexmark"])
        .args(GEN)
        .args(["--rate", "50000", "--out", "-"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let job = Command::new(AIR)
        .args([
            "run",
            "nexmark",
            "--query",
            "q8",
            "--workers",
            "2",
            "--no-pin",
        ])
        .args(["--input", "-", "--out", "-"])
        .stdin(Stdio::from(gen.stdout.take().unwrap()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (o, _) = common::wait(job, "air gen nexmark --rate | air run nexmark", LIMIT);
    let (g, _) = common::wait(gen, "air gen nexmark --rate --out -", LIMIT);
    assert!(g.status.success(), "{}", common::text(&g));
    assert!(o.status.success(), "{}", common::text(&o));
    assert_eq!(rows(&String::from_utf8_lossy(&o.stdout)), want);
    for format in ["ours", "beam"] {
        let file = dir.join(format!("{format}.json"));
        let f = Command::new(AIR)
            .args(["gen", "nexmark", "--format", format])
            .args(GEN)
            .arg("--out")
            .arg(&file)
            .output()
            .unwrap();
        assert!(f.status.success(), "{}", common::text(&f));
        let t = Instant::now();
        let s = Command::new(AIR)
            .args(["gen", "nexmark", "--format", format])
            .args(GEN)
            .args(["--rate", "40000", "--out", "-"])
            .output()
            .unwrap();
        let took = t.elapsed();
        assert!(s.status.success(), "{}", common::text(&s));
        assert_eq!(s.stdout, std::fs::read(&file).unwrap(), "{format}");
        if format == "ours" {
            assert_eq!(s.stdout, bytes);
        }
        // The last batch is due at 19 800 / 40 000 s.
        assert!(took >= Duration::from_millis(490), "{format}: {took:?}");
    }
}

/// A bad record on standard input stops the job with exit 2 and is named
/// by the stream (`-`), its line and byte offset.
#[test]
fn nexmark_bad_record_on_stdin_names_the_stream_line_and_offset() {
    let dir = common::tmpdir("livenex", "bad");
    let bytes = gen_nexmark(&dir);
    let at = lines_len(&bytes, 4);
    let mut input = bytes[..at].to_vec();
    input.extend_from_slice(b"{\"type\":\"bid\",\"auction\":\"x\"}\n");
    input.extend_from_slice(&bytes[at..]);
    for q in ["q5", "q8"] {
        let b = input.clone();
        let o = live_run(q, &["--input", "-"], &[], |c| to_stdin(c, b));
        assert_eq!(o.status.code(), Some(2), "{q}: {}", common::text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("-:5: ") && err.contains(&format!("(byte offset {at})")),
            "{q}: {}",
            common::text(&o)
        );
    }
    // Skipped under --on-bad-record skip, and counted.
    let report = dir.join("skip.json");
    let o = live_run(
        "q5",
        &["--input", "-"],
        &[
            "--on-bad-record",
            "skip",
            "--report",
            report.to_str().unwrap(),
        ],
        |c| to_stdin(c, input.clone()),
    );
    assert!(o.status.success(), "{}", common::text(&o));
    assert_eq!(
        rows(&String::from_utf8_lossy(&o.stdout)),
        file_rows(&dir, "q5", 5)
    );
    assert_eq!(common::report(&report)["skipped_records"], 1);
}

/// Generator options are refused with a live input, and a live input
/// mixed with files.
#[test]
fn nexmark_live_input_refuses_generator_options() {
    for args in [
        &["--input", "-", "--rate", "1000"][..],
        &["--input", "-", "--events", "10"],
        &["--input", "-", "events.json"],
    ] {
        let o = Command::new(AIR)
            .args(["run", "nexmark", "--query", "q5", "--no-pin"])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", common::text(&o));
    }
}

/// Text for word count: a few thousand lines, some non-ASCII, CRLF and
/// blank ones.
fn words_text() -> Vec<u8> {
    let mut t = String::new();
    for i in 0..4000 {
        match i % 7 {
            0 => t.push_str("The quick brown fox jumps over the lazy dog\n"),
            1 => t.push_str(&format!("line {i}, Straße straße ΟΔΟΣ café\r\n")),
            2 => t.push('\n'),
            3 => t.push_str("don't stop: rock'n'roll 3.14 x86_64\n"),
            _ => t.push_str(&format!("word{} word{} and the\n", i % 13, i % 29)),
        }
    }
    t.into_bytes()
}

/// `air run wordcount` on 2 workers with `input` args, piped.
fn start_wordcount(input: &[&str], extra: &[&str]) -> std::process::Child {
    Command::new(AIR)
        .args(["run", "wordcount", "--workers", "2", "--no-pin"])
        .args(input)
        .args(["--out", "-"])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Word count from standard input, from a TCP server and from `--listen`
/// gives the file's rows; invalid UTF-8 on standard input is named by
/// stream, byte and line.
#[test]
fn wordcount_live_equals_file() {
    let dir = common::tmpdir("livewc", "eq");
    let text = words_text();
    let file = dir.join("words.txt");
    std::fs::write(&file, &text).unwrap();
    let child = start_wordcount(&["--input", file.to_str().unwrap()], &[]);
    let (o, _) = common::wait(child, "air run wordcount (file)", LIMIT);
    assert!(o.status.success(), "{}", common::text(&o));
    let want = rows(&String::from_utf8_lossy(&o.stdout));
    // 572 lines of `Straße straße`.
    assert!(want.iter().any(|r| r == "straße,1144"), "{want:?}");
    // Standard input.
    let mut child = start_wordcount(&["--input", "-"], &[]);
    let w = to_stdin(&mut child, text.clone()).unwrap();
    let (o, _) = common::wait(child, "air run wordcount --input -", LIMIT);
    w.join().unwrap();
    assert!(o.status.success(), "{}", common::text(&o));
    assert_eq!(rows(&String::from_utf8_lossy(&o.stdout)), want);
    // A server air connects to, in pieces that cut lines and characters.
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    let child = start_wordcount(&["--input", &format!("tcp://127.0.0.1:{port}")], &[]);
    let (mut s, _) = server.accept().unwrap();
    for piece in text.chunks(1001) {
        s.write_all(piece).unwrap();
    }
    drop(s);
    let (o, _) = common::wait(child, "air run wordcount --input tcp://", LIMIT);
    assert!(o.status.success(), "{}", common::text(&o));
    assert_eq!(rows(&String::from_utf8_lossy(&o.stdout)), want);
    // Two senders to --listen (batch mode: one result for both).
    let port = free_port();
    let child = start_wordcount(&["--listen", &format!("127.0.0.1:{port}")], &[]);
    let half = lines_len(&text, 2000);
    let senders: Vec<_> = [text[..half].to_vec(), text[half..].to_vec()]
        .into_iter()
        .map(|part| {
            std::thread::spawn(move || {
                let t = Instant::now();
                let mut s = loop {
                    match TcpStream::connect(("127.0.0.1", port)) {
                        Ok(s) => break s,
                        Err(e) if t.elapsed() < Duration::from_secs(60) => {
                            let _ = e;
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        Err(e) => panic!("connect: {e}"),
                    }
                };
                s.write_all(&part).unwrap();
            })
        })
        .collect();
    for s in senders {
        s.join().unwrap();
    }
    let (o, _) = common::wait(child, "air run wordcount --listen", LIMIT);
    assert!(o.status.success(), "{}", common::text(&o));
    assert_eq!(rows(&String::from_utf8_lossy(&o.stdout)), want);
    // Invalid UTF-8 in line 3 (its byte 5).
    let at = lines_len(&text, 2);
    let mut bad = text[..at].to_vec();
    bad.extend_from_slice(b"abcd\xffef\n");
    bad.extend_from_slice(&text[at..]);
    let mut child = start_wordcount(&["--input", "-"], &[]);
    let w = to_stdin(&mut child, bad).unwrap();
    let (o, _) = common::wait(child, "air run wordcount --input - (bad)", LIMIT);
    w.join().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", common::text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("-: invalid UTF-8 at byte {} (line 3)", at + 4)),
        "{}",
        common::text(&o)
    );
}

/// `air gen wa --rate R --out tcp://` sends the file's bytes to a server,
/// paced.
#[test]
fn gen_wa_rate_to_tcp_is_the_file_paced() {
    let dir = common::tmpdir("livewa", "tcp");
    let file = dir.join("wa.csv");
    let gen = ["--events", "10000", "--keys", "50", "--seed", "3"];
    let f = Command::new(AIR)
        .args(["gen", "wa"])
        .args(gen)
        .arg("--out")
        .arg(&file)
        .output()
        .unwrap();
    assert!(f.status.success(), "{}", common::text(&f));
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    let t = Instant::now();
    let child = Command::new(AIR)
        .args(["gen", "wa"])
        .args(gen)
        .args([
            "--rate",
            "20000",
            "--out",
            &format!("tcp://127.0.0.1:{port}"),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (mut s, _) = server.accept().unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap();
    let took = t.elapsed();
    let (o, _) = common::wait(child, "air gen wa --rate --out tcp://", LIMIT);
    assert!(o.status.success(), "{}", common::text(&o));
    assert_eq!(got, std::fs::read(&file).unwrap());
    // The last batch is due at 9 900 / 20 000 s.
    assert!(took >= Duration::from_millis(490), "{took:?}");
}
