//! The file sources of user programs (`JsonLinesSource`, `CsvSource`) on
//! real files: every record read exactly once by 1 to 5 workers, byte
//! ranges, several files and globs, gzip, CRLF, blank lines, bad records
//! (errors naming file, line and field; the skip policy), two file sources
//! in one job.

use air_operators::graph::*;
use air_runtime::dataflow::{run_graph, Dataflow, GraphOutput, Source, SourcePoll};
use air_runtime::{JobConfig, RuntimeError};
use proptest::prelude::*;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
struct Event {
    n: u64,
    user: String,
    score: f64,
    #[serde(default)]
    tags: Vec<String>,
}

/// Event `n` as a JSON line (no `\n`), with text that needs escapes.
fn event_line(n: u64) -> String {
    let user = match n % 4 {
        0 => format!("u{n}"),
        1 => format!("quote \\\" {n}"),
        2 => format!("ünï {n} \\n"),
        _ => format!("comma, {n}"),
    };
    let tags = if n % 3 == 0 {
        r#", "tags": ["a", "b"]"#
    } else {
        ""
    };
    format!(
        r#"{{"n": {n}, "user": "{user}", "score": {}.5{tags}}}"#,
        n * 3
    )
}

fn config(workers: usize) -> JobConfig {
    JobConfig {
        workers,
        pin: false,
        flush: Duration::ZERO,
        ..JobConfig::default()
    }
}

/// A job's outcome and the (worker, record) pairs its sink saw.
type Run<T> = (Result<GraphOutput, RuntimeError>, Vec<(usize, T)>);

/// Runs one source per worker (made by `make`) into a sink that keeps
/// (worker, record).
fn run<S, F>(workers: usize, make: F) -> Run<S::Item>
where
    S: Source,
    F: Fn(&Dataflow) -> S + Sync + Send + 'static,
{
    let rows = Arc::new(Mutex::new(Vec::new()));
    let out = rows.clone();
    let r = run_graph(&config(workers), move |df| {
        let (me, out) = (df.index(), out.clone());
        df.source(make(df))
            .for_each(move |e| out.lock().unwrap().push((me, e)));
    });
    let rows = std::mem::take(&mut *rows.lock().unwrap());
    (r, rows)
}

/// [`run`] with JSON-lines sources of [`Event`]s.
fn run_json<F>(workers: usize, make: F) -> Run<Event>
where
    F: Fn(&Dataflow) -> JsonLinesSource<Event> + Sync + Send + 'static,
{
    run(workers, make)
}

/// The records of `text` parsed line by line with serde_json, blank lines
/// left out.
fn direct_parse(text: &str) -> Vec<Event> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn sorted(mut v: Vec<Event>) -> Vec<Event> {
    v.sort_by_key(|e| e.n);
    v
}

/// Checks that 1..=5 workers read exactly `want` from `path` (a file or
/// glob), each record once, and every worker something when there is
/// enough to share.
fn check_all_worker_counts(path: &Path, want: &[Event]) {
    for workers in 1..=5 {
        let p = path.to_path_buf();
        let (r, rows) = run_json(workers, move |df| {
            JsonLinesSource::shard(&p, df.index(), df.workers())
        });
        let out = r.unwrap_or_else(|e| panic!("{workers} workers: {e}"));
        assert_eq!(out.stats.get("json_records"), want.len() as u64);
        if want.len() >= 50 {
            for w in 0..workers {
                assert!(
                    rows.iter().any(|r| r.0 == w),
                    "worker {w} of {workers} read nothing"
                );
            }
        }
        let got = sorted(rows.into_iter().map(|r| r.1).collect());
        assert_eq!(got, sorted(want.to_vec()), "{workers} workers");
    }
}

#[test]
fn every_line_is_read_once_by_1_to_5_workers_with_and_without_a_trailing_newline() {
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<String> = (0..200).map(event_line).collect();
    for (name, text) in [
        ("trailing.jsonl", lines.join("\n") + "\n"),
        ("no_trailing.jsonl", lines.join("\n")),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, &text).unwrap();
        check_all_worker_counts(&path, &direct_parse(&text));
    }
}

#[test]
fn blank_lines_crlf_and_a_byte_order_mark_are_not_records() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::from("\u{feff}");
    for n in 0..120u64 {
        text += &event_line(n);
        // CRLF, blank lines and whitespace-only lines mixed in.
        text += match n % 5 {
            0 => "\r\n",
            1 => "\n\n",
            2 => "\r\n  \t \r\n",
            _ => "\n",
        };
    }
    let path = dir.path().join("mixed.jsonl");
    std::fs::write(&path, &text).unwrap();
    let want: Vec<Event> = (0..120)
        .map(|n| serde_json::from_str(&event_line(n)).unwrap())
        .collect();
    check_all_worker_counts(&path, &want);
}

#[test]
fn an_empty_file_has_no_records_and_no_error() {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in [("empty.jsonl", ""), ("blank.jsonl", "\n \n\r\n")] {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        check_all_worker_counts(&path, &[]);
    }
}

/// Writes `lines` to `path` (gzip if it ends in `.gz`), one a line.
fn write_lines(path: &Path, lines: &[String]) {
    let text = lines.iter().map(|l| format!("{l}\n")).collect::<String>();
    if path.extension().is_some_and(|e| e == "gz") {
        let f = std::fs::File::create(path).unwrap();
        let mut gz = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
        gz.write_all(text.as_bytes()).unwrap();
        gz.finish().unwrap();
    } else {
        std::fs::write(path, text).unwrap();
    }
}

#[test]
fn several_files_globs_and_lists_share_their_bytes_over_the_workers() {
    let dir = tempfile::tempdir().unwrap();
    let mut want = Vec::new();
    // Files of very different sizes: one holds most bytes.
    for (i, count) in [(0u64, 10u64), (1, 300), (2, 1), (3, 40)] {
        let lines: Vec<String> = (0..count).map(|k| event_line(i * 1000 + k)).collect();
        write_lines(&dir.path().join(format!("part-{i}.jsonl")), &lines);
        want.extend(
            lines
                .iter()
                .map(|l| serde_json::from_str::<Event>(l).unwrap()),
        );
    }
    std::fs::write(dir.path().join("other.txt"), "not json\n").unwrap();
    check_all_worker_counts(&dir.path().join("part-*.jsonl"), &want);

    // A list of a path and a pattern; workers get about equal bytes.
    let list = vec![
        dir.path().join("part-1.jsonl"),
        dir.path().join("part-[023].jsonl"),
    ];
    let total: u64 = (0..4)
        .map(|i| {
            std::fs::metadata(dir.path().join(format!("part-{i}.jsonl")))
                .unwrap()
                .len()
        })
        .sum();
    for workers in 1..=4 {
        let l = list.clone();
        let (r, rows) = run_json(workers, move |df| {
            JsonLinesSource::shard_files(&l, df.index(), df.workers())
        });
        r.unwrap();
        assert_eq!(
            sorted(rows.iter().map(|r| r.1.clone()).collect()),
            sorted(want.clone())
        );
        let line_bytes = (total / want.len() as u64) as usize;
        for w in 0..workers {
            let mine = rows.iter().filter(|r| r.0 == w).count();
            let fair = want.len() / workers;
            // Within two lines' worth of a fair share, with lines of
            // slightly different lengths.
            assert!(
                mine.abs_diff(fair) <= 2 + want.len() / 20,
                "worker {w} of {workers}: {mine} records, fair {fair} ({line_bytes} B/line)"
            );
        }
    }

    let missing = dir.path().join("*.nothing");
    let (r, rows) = run_json(2, move |df| {
        JsonLinesSource::shard(&missing, df.index(), df.workers())
    });
    let e = r.unwrap_err().to_string();
    assert!(e.contains("no file matches the pattern"), "{e}");
    assert!(rows.is_empty());
}

#[test]
fn gzip_files_are_read_whole_by_one_worker_each() {
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<String> = (0..500).map(event_line).collect();
    let one = dir.path().join("events.jsonl.gz");
    write_lines(&one, &lines);
    let want: Vec<Event> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for workers in [1, 3] {
        let p = one.clone();
        let (r, rows) = run_json(workers, move |df| {
            JsonLinesSource::shard(&p, df.index(), df.workers())
        });
        r.unwrap();
        assert!(
            rows.iter().all(|r| r.0 == 0),
            "one gzip file: worker 0 reads it all"
        );
        assert_eq!(sorted(rows.into_iter().map(|r| r.1).collect()), want);
    }
    // Two gzip files and a plain one: gzip files dealt to workers 0 and 1,
    // the plain file split over all three.
    let more: Vec<String> = (1_000..1_100).map(event_line).collect();
    let plain: Vec<String> = (2_000..2_300).map(event_line).collect();
    write_lines(&dir.path().join("more.jsonl.gz"), &more);
    write_lines(&dir.path().join("plain.jsonl"), &plain);
    let list = vec![
        one.clone(),
        dir.path().join("more.jsonl.gz"),
        dir.path().join("plain.jsonl"),
    ];
    let (r, rows) = run_json(3, move |df| {
        JsonLinesSource::shard_files(&list, df.index(), df.workers())
    });
    r.unwrap();
    let mut got: Vec<u64> = rows.iter().map(|r| r.1.n).collect();
    got.sort();
    let want3: Vec<u64> = (0..500).chain(1_000..1_100).chain(2_000..2_300).collect();
    assert_eq!(got, want3);
    let from = |w: usize, ns: std::ops::Range<u64>| {
        rows.iter()
            .filter(|r| ns.contains(&r.1.n))
            .all(|r| r.0 == w)
    };
    assert!(from(0, 0..500), "the first gzip file is worker 0's");
    assert!(from(1, 1_000..1_100), "the second gzip file is worker 1's");
    for w in 0..3 {
        assert!(
            rows.iter().any(|r| r.0 == w && r.1.n >= 2_000),
            "worker {w} reads plain bytes"
        );
    }

    // A file named .gz that is not gzip is a read error naming it.
    let fake = dir.path().join("fake.jsonl.gz");
    std::fs::write(&fake, "{\"n\": 1}\n").unwrap();
    let (r, _) = run_json(1, move |df| {
        JsonLinesSource::shard(&fake, df.index(), df.workers())
    });
    let e = r.unwrap_err().to_string();
    assert!(
        e.contains("fake.jsonl.gz") && e.contains("read error"),
        "{e}"
    );
}

/// 60 events, line 31 of the file (event 30, mid-file) bad: `user` is a
/// number.
fn file_with_bad_line(dir: &Path) -> PathBuf {
    let mut lines: Vec<String> = (0..60).map(event_line).collect();
    lines[30] = r#"{"n": 30, "user": 17, "score": 1.5}"#.into();
    let path = dir.join("bad.jsonl");
    write_lines(&path, &lines);
    path
}

#[test]
fn a_bad_line_stops_the_job_naming_file_line_and_field_after_the_records_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = file_with_bad_line(dir.path());
    for workers in [1, 3] {
        let p = path.clone();
        let (r, rows) = run_json(workers, move |df| {
            JsonLinesSource::shard(&p, df.index(), df.workers())
        });
        let e = r.unwrap_err().to_string();
        assert!(
            e.contains("bad.jsonl:31: field `user`: invalid type: integer `17`, expected a string")
                && e.contains("(column 20, byte offset"),
            "{workers} workers: {e}"
        );
        // The worker that met it delivered every record of its range
        // before the bad line.
        let failed = rows
            .iter()
            .find(|r| r.1.n == 29)
            .expect("line 30 processed")
            .0;
        let mut mine: Vec<u64> = rows
            .iter()
            .filter(|r| r.0 == failed)
            .map(|r| r.1.n)
            .collect();
        mine.sort();
        let first = mine[0];
        assert_eq!(mine, (first..30).collect::<Vec<_>>(), "{workers} workers");
        if workers == 3 {
            assert!(first > 0, "the bad line is in a later worker's range");
        }
    }
    // Syntax errors and missing fields are named too.
    for (line, what) in [
        (
            r#"{"n": 1, "user": "a", "score": }"#,
            "expected value (column",
        ),
        (r#"{"n": 1, "user": "a"}"#, "missing field `score`"),
        (
            r#"{"n": 1, "user": "a", "score": 2, "tags": ["x", 3]}"#,
            "field `tags[1]`: invalid type",
        ),
    ] {
        let p = dir.path().join("one.jsonl");
        write_lines(&p, &[event_line(0), line.to_string()]);
        let (r, rows) = run_json(1, move |df| {
            JsonLinesSource::shard(&p, df.index(), df.workers())
        });
        let e = r.unwrap_err().to_string();
        assert!(e.contains("one.jsonl:2: ") && e.contains(what), "{e}");
        assert_eq!(rows.len(), 1);
    }
}

#[test]
fn the_skip_policy_counts_bad_lines_and_reports_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines: Vec<String> = (0..90).map(event_line).collect();
    for k in [70, 45, 80] {
        lines[k] = format!(r#"{{"n": {k}, "user": "u", "score": "high"}}"#);
    }
    lines[85] = "x".repeat(300); // over the line limit set below
    let path = dir.path().join("skips.jsonl");
    write_lines(&path, &lines);
    for workers in [1, 3] {
        let p = path.clone();
        let bad = BadRecords::new();
        let report = bad.clone();
        let (r, rows) = run_json(workers, move |df| {
            JsonLinesSource::shard(&p, df.index(), df.workers())
                .on_bad_record(OnBadRecord::Skip)
                .max_line_len(200)
                .bad_records(&report)
        });
        let out = r.unwrap();
        assert_eq!(out.stats.get("skipped_records"), 4, "{workers} workers");
        assert_eq!(out.stats.get("json_records"), 86);
        assert_eq!(rows.len(), 86);
        assert_eq!(bad.count(), 4);
        let first = bad.first().unwrap();
        assert!(
            first.contains("skips.jsonl:46: field `score`: invalid type: string \"high\""),
            "{workers} workers: {first}"
        );
    }
}

#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
struct Row {
    id: u64,
    name: String,
    amount: f64,
}

/// [`run`] with CSV sources of [`Row`]s.
fn run_csv<F>(workers: usize, make: F) -> Run<Row>
where
    F: Fn(&Dataflow) -> CsvSource<Row> + Sync + Send + 'static,
{
    run(workers, make)
}

fn csv_text(ids: std::ops::Range<u64>, crlf: bool) -> String {
    let nl = if crlf { "\r\n" } else { "\n" };
    let mut s = format!("amount, id ,name{nl}");
    for id in ids {
        let name = match id % 3 {
            0 => format!("plain{id}"),
            1 => format!("\"with, comma {id}\""),
            _ => format!("\"a \"\"quote\"\" {id}\""),
        };
        s += &format!("{}.25,{id} ,{name}{nl}", id * 2);
    }
    s
}

fn csv_parse(text: &str) -> Vec<Row> {
    csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes())
        .deserialize()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn csv_rows_are_split_by_bytes_with_every_worker_reading_the_header() {
    let dir = tempfile::tempdir().unwrap();
    for crlf in [false, true] {
        let text = csv_text(0..150, crlf);
        let path = dir.path().join("rows.csv");
        std::fs::write(&path, &text).unwrap();
        let mut want = csv_parse(&text);
        assert_eq!(want.len(), 150);
        want.sort_by_key(|r| r.id);
        for workers in 1..=5 {
            let p = path.clone();
            let (r, rows) = run_csv(workers, move |df| {
                CsvSource::shard(&p, df.index(), df.workers())
            });
            let out = r.unwrap();
            assert_eq!(out.stats.get("csv_records"), 150);
            for w in 0..workers {
                // Contiguous byte ranges, not every n-th row.
                let ids: Vec<u64> = rows.iter().filter(|r| r.0 == w).map(|r| r.1.id).collect();
                assert!(
                    !ids.is_empty() && ids.windows(2).all(|p| p[1] == p[0] + 1),
                    "{ids:?}"
                );
            }
            let mut got: Vec<Row> = rows.into_iter().map(|r| r.1).collect();
            got.sort_by_key(|r| r.id);
            assert_eq!(got, want, "{workers} workers, crlf {crlf}");
        }
    }
}

#[test]
fn csv_reads_globs_of_files_with_their_own_headers_and_gzip() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.csv"), csv_text(0..40, false)).unwrap();
    // Columns in another order in the second file.
    let mut b = String::from("name,id,amount\n");
    for id in 40..90u64 {
        b += &format!("n{id},{id},{}.25\n", id * 2);
    }
    std::fs::write(dir.path().join("b.csv"), &b).unwrap();
    let gz = std::fs::File::create(dir.path().join("c.csv.gz")).unwrap();
    let mut gz = flate2::write::GzEncoder::new(gz, flate2::Compression::fast());
    gz.write_all(csv_text(90..130, true).as_bytes()).unwrap();
    gz.finish().unwrap();
    for workers in [1, 2, 4] {
        let p = dir.path().join("*.csv*");
        let (r, rows) = run_csv(workers, move |df| {
            CsvSource::shard(&p, df.index(), df.workers())
        });
        r.unwrap();
        let mut ids: Vec<u64> = rows.iter().map(|r| r.1.id).collect();
        ids.sort();
        assert_eq!(ids, (0..130).collect::<Vec<_>>(), "{workers} workers");
        let r60 = rows.iter().find(|r| r.1.id == 60).unwrap();
        assert_eq!((r60.1.name.as_str(), r60.1.amount), ("n60", 120.25));
    }
}

#[test]
fn a_bad_csv_row_names_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = csv_text(0..100, false);
    text = text.replace("140.25,70 ,", "lots,70 ,");
    let path = dir.path().join("bad.csv");
    std::fs::write(&path, &text).unwrap();
    for workers in [1, 3] {
        let p = path.clone();
        let (r, rows) = run_csv(workers, move |df| {
            CsvSource::shard(&p, df.index(), df.workers())
        });
        let e = r.unwrap_err().to_string();
        assert!(
            e.contains("bad.csv:72: field `amount`: "),
            "{workers} workers: {e}"
        );
        assert!(
            rows.iter().any(|r| r.1.id == 69),
            "the row before it is processed"
        );
    }
    let unclosed = dir.path().join("unclosed.csv");
    std::fs::write(&unclosed, "id,name,amount\n1,\"two\nlines\",3\n").unwrap();
    let (r, _) = run_csv(1, move |df| {
        CsvSource::shard(&unclosed, df.index(), df.workers())
    });
    let e = r.unwrap_err().to_string();
    assert!(e.contains("unclosed.csv:2: unclosed quote"), "{e}");
}

/// An order and its payment, from two JSON-lines files.
#[derive(Clone, Debug, serde::Deserialize)]
struct Order {
    order: u64,
    time_ms: u64,
    amount: u64,
}

#[derive(Clone, Debug, serde::Deserialize)]
struct Payment {
    order: u64,
    time_ms: u64,
}

/// A bad last line fails the job, but only after every record before it
/// was processed: each worker's windows fire at the end of its inputs as
/// after an input that ended well (a trial user lost 60% of the windows of
/// such a job, silently).
#[test]
fn a_bad_last_line_fails_the_job_after_every_window_fired() {
    #[derive(Clone, serde::Deserialize)]
    struct Click {
        user: u64,
        t: u64,
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("clicks.jsonl");
    let mut lines: Vec<String> = (0..6_000u64)
        .map(|i| format!(r#"{{"user": {}, "t": {}}}"#, i % 10, i * 10))
        .collect();
    lines.push(r#"{"user": "x", "t": 1}"#.into());
    write_lines(&path, &lines);
    for workers in [1, 2] {
        let got = Arc::new(Mutex::new(Vec::new()));
        let (out, p) = (got.clone(), path.clone());
        let r = run_graph(&config(workers), move |df| {
            let out = out.clone();
            df.source(JsonLinesSource::<Click>::shard(
                &p,
                df.index(),
                df.workers(),
            ))
            .event_time(|c| c.t, 100)
            .key_by(|c| c.user)
            .window(Tumbling::ms(1_000), |c| c.t)
            .aggregate(Count)
            .for_each(move |w| out.lock().unwrap().push((w.start, w.key, w.value)));
        });
        let e = r.unwrap_err().to_string();
        assert!(e.contains("clicks.jsonl:6001: field `user`"), "{e}");
        let mut got = std::mem::take(&mut *got.lock().unwrap());
        got.sort();
        // 60 windows of 1 s × 10 users, 10 clicks each.
        let want: Vec<(u64, u64, u64)> = (0..60u64)
            .flat_map(|w| (0..10u64).map(move |u| (w * 1_000, u, 10)))
            .collect();
        assert_eq!(got.len(), want.len(), "{workers} workers");
        assert_eq!(got, want, "{workers} workers");
    }
}

#[test]
fn two_json_sources_in_one_job_are_joined() {
    let dir = tempfile::tempdir().unwrap();
    let orders: Vec<String> = (0..400u64)
        .map(|o| {
            format!(
                r#"{{"order": {o}, "time_ms": {}, "amount": {}}}"#,
                o * 10,
                o % 7
            )
        })
        .collect();
    // Every third order is paid, 0..=30 ms later.
    let payments: Vec<String> = (0..400u64)
        .filter(|o| o % 3 == 0)
        .map(|o| format!(r#"{{"order": {o}, "time_ms": {}}}"#, o * 10 + o % 31))
        .collect();
    let (po, pp) = (
        dir.path().join("orders.jsonl"),
        dir.path().join("payments.jsonl"),
    );
    write_lines(&po, &orders);
    write_lines(&pp, &payments);
    let want: Vec<(u64, u64)> = (0..400u64)
        .filter(|o| o % 3 == 0)
        .map(|o| (o, o % 7))
        .collect();
    for workers in [1, 3] {
        let got = Arc::new(Mutex::new(Vec::new()));
        let (out, po, pp) = (got.clone(), po.clone(), pp.clone());
        run_graph(&config(workers), move |df| {
            let (me, n, out) = (df.index(), df.workers(), out.clone());
            let orders = df
                .source(JsonLinesSource::<Order>::shard(&po, me, n))
                .map(|o| (o.order, o.time_ms, o.amount))
                .event_time(|o| o.1, 1_000);
            let payments = df
                .source(JsonLinesSource::<Payment>::shard(&pp, me, n))
                .map(|p| (p.order, p.time_ms))
                .event_time(|p| p.1, 1_000);
            orders
                .key_by(|o| o.0)
                .join(payments.key_by(|p| p.0))
                .interval(0, 30, |o| o.1, |p| p.1)
                .for_each(move |j| out.lock().unwrap().push((j.key, j.left.2)));
        })
        .unwrap_or_else(|e| panic!("{workers} workers: {e}"));
        let mut got = std::mem::take(&mut *got.lock().unwrap());
        got.sort();
        assert_eq!(got, want, "{workers} workers");
    }
}

/// Polls worker `index` of `workers`' source of `files` to its end.
fn drain(files: &[PathBuf], index: usize, workers: usize) -> Vec<u64> {
    #[derive(Clone, serde::Deserialize)]
    struct Id {
        id: u64,
    }
    let mut s = JsonLinesSource::<Id>::shard_files(files, index, workers);
    let mut buf = Vec::new();
    let mut ids = Vec::new();
    loop {
        let poll = s.poll(&mut buf, 7);
        ids.extend(buf.drain(..).map(|r| r.id));
        if poll == SourcePoll::Done {
            assert_eq!(s.take_error(), None);
            return ids;
        }
    }
}

/// Worker `index` of `workers`' source of `files`: polled `cut` times (7
/// records a poll), saved as at a checkpoint barrier, then a new source
/// restored from that state and polled to its end. Returns the ids of
/// both, in order.
fn drain_resumed(files: &[PathBuf], index: usize, workers: usize, cut: usize) -> Vec<u64> {
    #[derive(Clone, serde::Deserialize)]
    struct Id {
        id: u64,
    }
    let mut ids = Vec::new();
    let mut buf = Vec::new();
    let mut first = JsonLinesSource::<Id>::shard_files(files, index, workers);
    for _ in 0..cut {
        let poll = first.poll(&mut buf, 7);
        ids.extend(buf.drain(..).map(|r| r.id));
        if poll == SourcePoll::Done {
            break;
        }
    }
    let state = first.save().expect("a file source saves its position");
    let mut second = JsonLinesSource::<Id>::shard_files(files, index, workers);
    second.restore(&state).unwrap();
    // Saved again before its first poll: the same position.
    assert_eq!(second.save().unwrap(), state);
    loop {
        let poll = second.poll(&mut buf, 7);
        ids.extend(buf.drain(..).map(|r| r.id));
        if poll == SourcePoll::Done {
            assert_eq!(second.take_error(), None);
            break;
        }
    }
    ids
}

/// A CSV source saved after `cut` polls of 5 rows and resumed: the rows
/// after the cut, read with the header's column order (the header was read
/// before the cut, so the resumed source must read it again).
#[test]
fn a_csv_source_resumes_mid_file_with_its_header() {
    let dir = tempfile::tempdir().unwrap();
    let text = csv_text(0..120, false);
    let plain = dir.path().join("rows.csv");
    std::fs::write(&plain, &text).unwrap();
    let gz = dir.path().join("rows2.csv.gz");
    let mut e = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).unwrap(),
        flate2::Compression::fast(),
    );
    e.write_all(csv_text(500..620, true).as_bytes()).unwrap();
    e.finish().unwrap();
    let mut want: Vec<u64> = (0..120).chain(500..620).collect();
    want.sort();
    for workers in [1, 2] {
        for cut in [0, 1, 3, 11, 40] {
            let mut got = Vec::new();
            for w in 0..workers {
                let files = [plain.clone(), gz.clone()];
                let mut first = CsvSource::<Row>::shard_files(&files, w, workers);
                let mut buf = Vec::new();
                for _ in 0..cut {
                    let poll = first.poll(&mut buf, 5);
                    got.extend(buf.drain(..).map(|r| r.id));
                    if poll == SourcePoll::Done {
                        break;
                    }
                }
                let state = first.save().unwrap();
                let mut second = CsvSource::<Row>::shard_files(&files, w, workers);
                second.restore(&state).unwrap();
                loop {
                    let poll = second.poll(&mut buf, 5);
                    got.extend(buf.drain(..).map(|r| r.id));
                    if poll == SourcePoll::Done {
                        assert_eq!(second.take_error(), None, "{workers} workers, cut {cut}");
                        break;
                    }
                }
            }
            got.sort();
            assert_eq!(got, want, "{workers} workers, cut {cut}");
        }
    }
}

/// A file changed after the checkpoint (appended to): the resumed source
/// fails at its first poll, naming the input, instead of reading from an
/// offset that no longer means the same.
#[test]
fn a_resume_over_a_changed_file_fails_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ids.jsonl");
    let text: String = (0..50).map(|i| format!("{{\"id\": {i}}}\n")).collect();
    std::fs::write(&path, &text).unwrap();
    let files = [path.clone()];
    let mut first = JsonLinesSource::<serde_json::Value>::shard_files(&files, 0, 1);
    let mut buf = Vec::new();
    first.poll(&mut buf, 7);
    let state = first.save().unwrap();
    std::fs::write(&path, format!("{text}{{\"id\": 50}}\n")).unwrap();
    let mut second = JsonLinesSource::<serde_json::Value>::shard_files(&files, 0, 1);
    second.restore(&state).unwrap();
    assert_eq!(second.poll(&mut buf, 7), SourcePoll::Done);
    let e = second.take_error().expect("an error");
    assert!(
        e.contains("ids.jsonl") && e.contains("not those the checkpoint"),
        "{e}"
    );
    assert!(
        JsonLinesSource::<serde_json::Value>::shard_files(&files, 0, 1)
            .restore(b"junk")
            .is_err()
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Random files (lines of random lengths, blank lines, CRLF, with or
    /// without a last `\n`) split over a random number of workers: every
    /// record is read exactly once, and each worker's records are in file
    /// order.
    #[test]
    fn any_files_split_over_any_workers_give_every_record_once(
        files in prop::collection::vec(
            prop::collection::vec((0usize..40, any::<bool>(), any::<bool>()), 0..30),
            1..4,
        ),
        last_newline in any::<bool>(),
        workers in 1usize..7,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut paths = Vec::new();
        let mut next = 0u64;
        for (f, lines) in files.iter().enumerate() {
            let mut text = String::new();
            for (k, &(pad, crlf, blank)) in lines.iter().enumerate() {
                text += &format!(r#"{{"id": {next}, "pad": "{}"}}"#, "p".repeat(pad));
                next += 1;
                if blank {
                    text += "\n";
                }
                if k + 1 < lines.len() || last_newline {
                    text += if crlf { "\r\n" } else { "\n" };
                }
            }
            let path = dir.path().join(format!("f{f}.jsonl"));
            std::fs::write(&path, text).unwrap();
            paths.push(path);
        }
        let mut all = Vec::new();
        for w in 0..workers {
            let ids = drain(&paths, w, workers);
            prop_assert!(ids.windows(2).all(|p| p[0] < p[1]), "worker {}: {:?}", w, ids);
            all.extend(ids);
        }
        all.sort();
        prop_assert_eq!(all, (0..next).collect::<Vec<_>>());
    }

    /// The same files read by workers stopped after a random number of
    /// polls, saved and resumed (a plain file entered at the saved offset,
    /// a gzip file skipped to it): every record once, in file order.
    #[test]
    fn any_files_resumed_after_any_poll_give_every_record_once(
        files in prop::collection::vec(
            prop::collection::vec((0usize..40, any::<bool>(), any::<bool>()), 0..30),
            1..4,
        ),
        gzip_last in any::<bool>(),
        workers in 1usize..5,
        cut in 0usize..12,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut paths = Vec::new();
        let mut next = 0u64;
        for (f, lines) in files.iter().enumerate() {
            let mut text = String::new();
            for &(pad, crlf, blank) in lines {
                text += &format!(r#"{{"id": {next}, "pad": "{}"}}"#, "p".repeat(pad));
                next += 1;
                if blank {
                    text += "\n";
                }
                text += if crlf { "\r\n" } else { "\n" };
            }
            let gz = gzip_last && f + 1 == files.len();
            let path = dir.path().join(format!("f{f}.jsonl{}", if gz { ".gz" } else { "" }));
            if gz {
                let mut e = flate2::write::GzEncoder::new(
                    std::fs::File::create(&path).unwrap(),
                    flate2::Compression::fast(),
                );
                e.write_all(text.as_bytes()).unwrap();
                e.finish().unwrap();
            } else {
                std::fs::write(&path, text).unwrap();
            }
            paths.push(path);
        }
        let mut all = Vec::new();
        for w in 0..workers {
            let ids = drain_resumed(&paths, w, workers, cut);
            prop_assert!(ids.windows(2).all(|p| p[0] < p[1]), "worker {}: {:?}", w, ids);
            all.extend(ids);
        }
        all.sort();
        prop_assert_eq!(all, (0..next).collect::<Vec<_>>());
    }
}

/// A record with an event time, for the rescale tests.
#[derive(Clone, Debug, serde::Deserialize)]
struct Timed {
    id: u64,
    t: u64,
}

/// Worker `w` of `workers`' JSON source of `files`, merging by `t`.
fn timed_source(files: &[PathBuf], w: usize, workers: usize) -> JsonLinesSource<Timed> {
    JsonLinesSource::<Timed>::shard_files(files, w, workers).event_time_of(|r: &Timed| r.t)
}

/// Polls `s` `polls` times (all of it: `usize::MAX`), 7 records a poll.
fn poll_some(s: &mut JsonLinesSource<Timed>, polls: usize) -> Vec<Timed> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    for _ in 0..polls {
        let poll = s.poll(&mut buf, 7);
        out.append(&mut buf);
        if poll == SourcePoll::Done {
            assert_eq!(s.take_error(), None);
            break;
        }
    }
    out
}

/// How far a stream's records fall behind the newest before them.
fn disorder(records: &[Timed]) -> u64 {
    let mut newest = 0;
    let mut worst = 0;
    for r in records {
        newest = newest.max(r.t);
        worst = worst.max(newest - r.t);
    }
    worst
}

/// `Rescale` of worker `worker` of `workers` from `from`.
fn rescale_to(worker: usize, workers: usize, from: usize) -> air_runtime::dataflow::state::Rescale {
    air_runtime::dataflow::state::Rescale {
        worker,
        workers,
        from,
        groups: air_runtime::keygroups::KeyGroups::new(64, workers)
            .unwrap()
            .into(),
    }
}

/// Input files (three, one gzip; c.jsonl first in time, then a.jsonl, then
/// b.jsonl.gz: at 2 workers each worker's stream is in time order, but
/// the second's is older than the first's) read a while by 2 workers, saved; resumed at 3 workers, read a
/// while, saved; resumed at 2 and read to the end: every record once, and
/// each resumed worker's records no further out of time order than the
/// first run's workers' were (the merge by `event_time_of`).
#[test]
fn a_file_source_resumes_at_other_worker_counts_merged_by_event_time() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    let mut id = 0u64;
    for (k, name) in ["a.jsonl", "b.jsonl.gz", "c.jsonl"].iter().enumerate() {
        let text: String = (0..400u64)
            .map(|i| {
                id += 1;
                // Lines of one length: a.jsonl and c.jsonl split at their
                // boundary at 2 workers.
                format!(
                    "{{\"id\": {id:5}, \"t\": {:6}}}\n",
                    [10_000, 20_000, 0][k] + i * 10
                )
            })
            .collect();
        let path = dir.path().join(name);
        if name.ends_with(".gz") {
            let mut e = flate2::write::GzEncoder::new(
                std::fs::File::create(&path).unwrap(),
                flate2::Compression::fast(),
            );
            e.write_all(text.as_bytes()).unwrap();
            e.finish().unwrap();
        } else {
            std::fs::write(&path, text).unwrap();
        }
        files.push(path);
    }
    // The uninterrupted run's disorder, per worker, at 2 workers: none.
    let bound = (0..2)
        .map(|w| disorder(&poll_some(&mut timed_source(&files, w, 2), usize::MAX)))
        .max()
        .unwrap();
    assert_eq!(bound, 0);
    for (cut1, cut2) in [(0, 0), (3, 5), (20, 2), (60, 40), (5, 1000), (0, 1000)] {
        let mut got = Vec::new();
        // First run: 2 workers.
        let states: Vec<Vec<u8>> = (0..2)
            .map(|w| {
                let mut s = timed_source(&files, w, 2);
                got.extend(poll_some(&mut s, cut1 + 7 * w));
                s.save().unwrap()
            })
            .collect();
        let refs: Vec<&[u8]> = states.iter().map(|s| s.as_slice()).collect();
        // Second run: 3 workers, from the first's states.
        let states: Vec<Vec<u8>> = (0..3)
            .map(|w| {
                let mut s = timed_source(&files, w, 3);
                s.rescale(&refs, rescale_to(w, 3, 2)).unwrap();
                let read = poll_some(&mut s, cut2 + w);
                assert!(disorder(&read) <= bound, "{} > {bound}", disorder(&read));
                got.extend(read);
                s.save().unwrap()
            })
            .collect();
        let refs: Vec<&[u8]> = states.iter().map(|s| s.as_slice()).collect();
        // Third run: 2 workers, to the end.
        for w in 0..2 {
            let mut s = timed_source(&files, w, 2);
            s.rescale(&refs, rescale_to(w, 2, 3)).unwrap();
            let read = poll_some(&mut s, usize::MAX);
            assert!(disorder(&read) <= bound, "{} > {bound}", disorder(&read));
            got.extend(read);
        }
        let mut ids: Vec<u64> = got.iter().map(|r| r.id).collect();
        ids.sort_unstable();
        assert_eq!(ids, (1..=id).collect::<Vec<_>>(), "cuts {cut1}, {cut2}");
    }
    // A rescaled worker's checkpoint also resumes at its own worker count
    // (restore), and another set of files is refused naming them.
    let states: Vec<Vec<u8>> = (0..2)
        .map(|w| {
            let mut s = timed_source(&files, w, 2);
            poll_some(&mut s, 4);
            s.save().unwrap()
        })
        .collect();
    let refs: Vec<&[u8]> = states.iter().map(|s| s.as_slice()).collect();
    let mut s = timed_source(&files, 0, 1);
    s.rescale(&refs, rescale_to(0, 1, 2)).unwrap();
    poll_some(&mut s, 3);
    let saved = s.save().unwrap();
    let mut again = timed_source(&files, 0, 1);
    again.restore(&saved).unwrap();
    assert_eq!(again.save().unwrap(), saved);
    let e = timed_source(&files[..2], 0, 1).restore(&saved).unwrap_err();
    assert!(
        e.contains("a.jsonl") && e.contains("not those the checkpoint"),
        "{e}"
    );
    let e = timed_source(&files[..2], 0, 3)
        .rescale(&refs, rescale_to(0, 3, 2))
        .unwrap_err();
    assert!(
        e.contains("a.jsonl") && e.contains("not those the checkpoint"),
        "{e}"
    );
}
