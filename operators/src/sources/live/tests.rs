//! Tests of the live inputs: followed files, sockets, standard input and
//! the queues to the workers.

use super::*;
use crate::sources::lines::{LineError, LineFailure};
use std::fs::File;

/// `--input` arguments: `-` and `tcp://` are live, paths are not;
/// `{rank}` becomes the rank.
#[test]
fn input_args_and_rank_names() {
    assert_eq!(
        LiveInput::from_input_arg(Path::new("-")),
        Some(LiveInput::Stdin)
    );
    assert_eq!(LiveInput::from_input_arg(Path::new("events.json")), None);
    let t = LiveInput::from_input_arg(Path::new("tcp://127.0.0.1:900{rank}")).unwrap();
    assert_eq!(t.for_rank(3), LiveInput::Connect("127.0.0.1:9003".into()));
    assert_eq!(t.for_rank(3).name(), "tcp://127.0.0.1:9003");
    let l = LiveInput::Listen("127.0.0.1:70{rank}0".into());
    assert_eq!(l.for_rank(2).name(), "listen://127.0.0.1:7020");
    let f = LiveInput::Follow("/data/events-{rank}.json".into());
    assert_eq!(
        f.for_rank(1),
        LiveInput::Follow("/data/events-1.json".into())
    );
    assert_eq!(f.for_rank(1).name(), "/data/events-1.json");
}

/// A line failure as text, to compare.
#[derive(Debug)]
struct Failed(String);

impl LineError for Failed {
    fn new(path: PathBuf, line: Option<u64>, offset: Option<u64>, f: LineFailure) -> Self {
        Failed(format!("{}:{line:?}:{offset:?}: {f:?}", path.display()))
    }
}

/// One line as a worker saw it: stream, line number, byte offset, text.
type Seen = (String, u64, u64, String);

/// Reads worker 0's lines of `feed` until the input ends (in a thread).
fn drain(feed: &LiveFeed) -> std::thread::JoinHandle<Vec<Seen>> {
    let mut lines = feed.worker::<Failed>(0, || {}).unwrap();
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        let t = Instant::now();
        loop {
            match lines.next_line().unwrap_or_else(|e| panic!("{}", e.0)) {
                Some(l) => seen.push((
                    lines.path().display().to_string(),
                    l.number,
                    l.offset,
                    String::from_utf8_lossy(lines.text(&l)).into_owned(),
                )),
                None if lines.is_finished() => return seen,
                None => std::thread::sleep(Duration::from_millis(1)),
            }
            assert!(t.elapsed() < Duration::from_secs(60), "no end in 60 s");
        }
    })
}

fn follow_opts() -> LiveOptions {
    LiveOptions {
        poll: Duration::from_millis(5),
        idle_end: Some(Duration::from_millis(400)),
        ..LiveOptions::default()
    }
}

fn append(f: &mut File, bytes: &[u8]) {
    use std::io::Write;
    f.write_all(bytes).unwrap();
    f.flush().unwrap();
}

/// Growth (a line split across writes), a rotation by rename with a
/// writer that still appends to the old file, a new file whose last
/// line has no `\n` (a line at the idle end): every line once, in
/// order, numbered per file.
#[test]
fn follow_reads_growth_and_a_rotation() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.log");
    let mut old = File::create(&path).unwrap();
    append(&mut old, b"a1\na2\n");
    let feed = LiveFeed::start(&LiveInput::Follow(path.clone()), 1, follow_opts()).unwrap();
    let reader = drain(&feed);
    std::thread::sleep(Duration::from_millis(50));
    append(&mut old, b"a3\npart");
    std::thread::sleep(Duration::from_millis(50));
    append(&mut old, b"ial\n");
    std::fs::rename(&path, dir.path().join("f.log.1")).unwrap();
    append(&mut old, b"a5-old\n");
    let mut new = File::create(&path).unwrap();
    append(&mut new, b"b1\nb2");
    let seen = reader.join().unwrap();
    let p = path.display().to_string();
    let p2 = format!("{p} (file 2)");
    let want: Vec<Seen> = [
        (&p, 1, 0, "a1"),
        (&p, 2, 3, "a2"),
        (&p, 3, 6, "a3"),
        (&p, 4, 9, "partial"),
        (&p, 5, 17, "a5-old"),
        (&p2, 1, 0, "b1"),
        (&p2, 2, 3, "b2"),
    ]
    .into_iter()
    .map(|(n, l, o, t)| (n.clone(), l, o, t.to_string()))
    .collect();
    assert_eq!(seen, want);
    let r = feed.report();
    assert_eq!((r.streams, r.partial_lines, r.bytes), (2, 0, 24 + 5));
}

/// A truncation under a line being written: the whole lines before it
/// count, the partial line is reported with its offset and dropped,
/// and the file is read again from byte 0.
#[test]
fn follow_restarts_after_a_truncation() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.log");
    let mut f = File::create(&path).unwrap();
    append(&mut f, b"x1\nx2\nx3-part");
    let feed = LiveFeed::start(&LiveInput::Follow(path.clone()), 1, follow_opts()).unwrap();
    let reader = drain(&feed);
    // Until the reader has read it all.
    let t = Instant::now();
    while feed.report().bytes < 13 {
        assert!(t.elapsed() < Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(2));
    }
    f.set_len(0).unwrap();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    append(&mut f, b"y1\n");
    let seen = reader.join().unwrap();
    let p = path.display().to_string();
    let p2 = format!("{p} (file 2)");
    let want: Vec<Seen> = vec![
        (p.clone(), 1, 0, "x1".into()),
        (p.clone(), 2, 3, "x2".into()),
        (p2, 1, 0, "y1".into()),
    ];
    assert_eq!(seen, want);
    let r = feed.report();
    assert_eq!((r.streams, r.partial_lines), (2, 1));
    assert_eq!(
        r.first_partial.as_deref(),
        Some(&*format!(
            "{p}:3: file truncated mid-line: partial line of 7 bytes dropped (byte offset 6)"
        ))
    );
}

/// A path that is missing or not a regular file is refused at start.
#[test]
fn follow_refuses_what_it_cannot_follow() {
    let dir = tempfile::tempdir().unwrap();
    let missing = LiveInput::Follow(dir.path().join("none"));
    let e = LiveFeed::start(&missing, 1, LiveOptions::default()).unwrap_err();
    assert!(e.to_string().starts_with("cannot follow "), "{e}");
    let d = LiveInput::Follow(dir.path().to_path_buf());
    let e = LiveFeed::start(&d, 1, LiveOptions::default()).unwrap_err();
    assert!(e.to_string().contains("a directory, not a file"), "{e}");
}
