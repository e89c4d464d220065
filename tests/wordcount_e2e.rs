//! `air run wordcount` end to end: 1, 2 and 4 workers over several files
//! equal a sequential count; the odd corners of text files; bad UTF-8; the
//! windowed mode sums to the batch result.

mod common;

use air_operators::sources::text::count_words_sequential;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const AIR: &str = env!("CARGO_BIN_EXE_air");

fn air(args: &[&str]) -> Output {
    Command::new(AIR).args(args).output().expect("run air")
}

fn csv_rows(path: &Path) -> Vec<(String, u64)> {
    let mut r = csv::Reader::from_path(path).unwrap();
    r.records()
        .map(|rec| {
            let rec = rec.unwrap();
            (rec[0].to_string(), rec[1].parse().unwrap())
        })
        .collect()
}

fn run_batch(files: &[PathBuf], workers: &str, extra: &[&str], out: &Path) -> Output {
    let mut args = vec![
        "run",
        "wordcount",
        "--workers",
        workers,
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    args.push("--input");
    for f in files {
        args.push(f.to_str().unwrap());
    }
    air(&args)
}

#[test]
fn corners_of_text_files() {
    let dir = common::tmpdir("wc", "corners");
    let f = dir.join("a.txt");
    // No final newline, empty lines, CRLF, punctuation, Unicode.
    std::fs::write(
        &f,
        "Hello, world! Hello...world?\r\n\n\nDon't STOP; don't stop.\n\
         Straße STRASSE straße — naïve café, ΟΔΟΣ οδος\n\n3.14 v2 x86_64",
    )
    .unwrap();
    let out = dir.join("o.csv");
    let o = run_batch(std::slice::from_ref(&f), "2", &[], &out);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got = csv_rows(&out);
    let want: Vec<(String, u64)> = [
        ("don't", 2),
        ("hello", 2),
        ("stop", 2),
        ("straße", 2),
        ("world", 2),
        ("οδος", 2),
        ("3.14", 1),
        ("café", 1),
        ("naïve", 1),
        ("strasse", 1),
        ("v2", 1),
        ("x86_64", 1),
    ]
    .iter()
    .map(|(w, c)| (w.to_string(), *c))
    .collect();
    assert_eq!(got, want, "sorted by count (descending), then word");
    assert_eq!(got, count_words_sequential(&[f], false).unwrap());
}

#[test]
fn several_files_on_1_2_4_workers_equal_the_sequential_count() {
    let dir = common::tmpdir("wc", "files");
    let words = [
        "alpha",
        "beta",
        "Gamma",
        "δέλτα",
        "ÉCOLE",
        "école",
        "naïve",
        "東京",
        "don't",
        "x",
    ];
    let mut files = Vec::new();
    let mut x: u64 = 7;
    for i in 0..3 {
        let mut text = String::new();
        for _ in 0..20_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let w = words[(x >> 33) as usize % words.len()];
            text.push_str(w);
            text.push(match (x >> 20) % 9 {
                0 => '\n',
                1 => ',',
                2 => '.',
                _ => ' ',
            });
        }
        if i == 1 {
            text.push_str("\n\n\n");
        }
        let p = dir.join(format!("f{i}.txt"));
        std::fs::write(&p, text).unwrap();
        files.push(p);
    }
    let want = count_words_sequential(&files, false).unwrap();
    // 60 000 tokens; "東京" is two words (one per ideograph, UAX #29) and
    // "x.alpha" one (a '.' between letters stays inside a word).
    let total: u64 = want.iter().map(|r| r.1).sum();
    assert!((55_000..=66_000).contains(&total), "{total} words");
    for workers in ["1", "2", "4"] {
        let out = dir.join("o.csv");
        let o = run_batch(&files, workers, &[], &out);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(csv_rows(&out), want, "{workers} workers");
    }
    // Windowed by arrival: every window is aligned, and the windows sum to
    // the batch result.
    let out = dir.join("w.csv");
    let mut args = vec![
        "run",
        "wordcount",
        "--workers",
        "2",
        "--window-ms",
        "5",
        "--out",
        out.to_str().unwrap(),
        "--input",
    ];
    for f in &files {
        args.push(f.to_str().unwrap());
    }
    let o = air(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut r = csv::Reader::from_path(&out).unwrap();
    assert_eq!(
        r.headers().unwrap().iter().collect::<Vec<_>>(),
        vec!["window_start_ms", "word", "count"]
    );
    let mut sums: BTreeMap<String, u64> = BTreeMap::new();
    for rec in r.records() {
        let rec = rec.unwrap();
        let w: u64 = rec[0].parse().unwrap();
        assert_eq!(w % 5, 0, "window start {w}");
        *sums.entry(rec[1].to_string()).or_default() += rec[2].parse::<u64>().unwrap();
    }
    let batch: BTreeMap<String, u64> = want.into_iter().collect();
    assert_eq!(sums, batch);
}

#[test]
fn invalid_utf8_is_an_error_naming_file_and_byte_or_replaced_with_lossy() {
    let dir = common::tmpdir("wc", "utf8");
    let f = dir.join("bad.txt");
    let mut bytes = b"good line\nsecond \xff\xfe line\nthird\n".to_vec();
    bytes.extend_from_slice("last word".as_bytes());
    std::fs::write(&f, &bytes).unwrap();
    let out = dir.join("o.csv");
    let o = run_batch(std::slice::from_ref(&f), "2", &[], &out);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("bad.txt: invalid UTF-8 at byte 17 (line 2)"),
        "{err}"
    );
    let o = run_batch(std::slice::from_ref(&f), "2", &["--lossy"], &out);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got: BTreeMap<String, u64> = csv_rows(&out).into_iter().collect();
    assert_eq!(got.get("line"), Some(&2));
    assert_eq!(got.get("word"), Some(&1));
    // good line / second line (U+FFFD U+FFFD is no word) / third / last word
    assert_eq!(got.values().sum::<u64>(), 7);
}

#[test]
fn bad_options_are_refused() {
    for args in [
        &["run", "wordcount", "--input", "/nonexistent.txt"][..],
        &["run", "wordcount", "--input", "/tmp", "--workers", "1"],
        &[
            "run",
            "wordcount",
            "--window-ms",
            "0",
            "--input",
            "/etc/hostname",
        ],
    ] {
        assert_eq!(air(args).status.code(), Some(2), "{args:?}");
    }
}

#[test]
fn long_tokens_cross_the_exchange_in_split_batches() {
    // 2000 distinct 1100-byte words: one batch of them archives larger than
    // a 1 MiB ring frame; the exchange splits it.
    let dir = common::tmpdir("wc", "long");
    let f = dir.join("long.txt");
    let mut text = String::new();
    for i in 0..2000u32 {
        let w: String = (0..1100)
            .map(|j| b"acgt"[((i.wrapping_mul(7919) + j * 31) % 4) as usize] as char)
            .collect();
        text.push_str(&format!("{w}{i}\n"));
    }
    std::fs::write(&f, text).unwrap();
    let out = dir.join("o.csv");
    let o = run_batch(std::slice::from_ref(&f), "1", &[], &out);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        csv_rows(&out),
        count_words_sequential(std::slice::from_ref(&f), false).unwrap()
    );
    // The input is never an output.
    let o = run_batch(std::slice::from_ref(&f), "1", &[], &f);
    assert_eq!(o.status.code(), Some(2));
    assert!(std::fs::metadata(&f).unwrap().len() > 2_000_000);
}
