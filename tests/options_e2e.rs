//! Options of `air run` and `air bench ysb --sustainable` checked the same
//! way for every query: absurd numbers and options a query does not honour
//! exit with code 2 and a message naming the option; a run without latency
//! samples reports no percentiles (JSON `null`, printed `-`), not 0 ms.

mod common;

use serde_json::Value;
use std::process::{Command, Output};

const AIR: &str = env!("CARGO_BIN_EXE_air");

fn air(args: &[&str]) -> Output {
    Command::new(AIR).args(args).output().expect("run air")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `args` and checks it is refused with exit code 2 and a message
/// containing every one of `says`.
#[track_caller]
fn refused(args: &[&str], says: &[&str]) {
    let o = air(args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    for s in says {
        assert!(err.contains(s), "{args:?}: expected {s:?} in: {err}");
    }
    assert!(!err.contains("panicked"), "{args:?}: {err}");
}

#[test]
fn runs_without_latency_samples_report_no_percentiles() {
    let dir = common::tmpdir("options", "no-latency");
    let rep = dir.join("r.json");
    let r = rep.to_str().unwrap();
    // Paced (wall-clock event times, so latency is measured) but nothing
    // fires: no events, or no bid for q5's windows.
    for args in [
        &[
            "run", "wa", "--rate", "1000", "--events", "0", "--report", r,
        ][..],
        &[
            "run", "nexmark", "--query", "q5", "--rate", "1000", "--events", "1", "--report", r,
        ],
        &["run", "ysb", "--events", "0", "--report", r],
    ] {
        let o = air(args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&rep).unwrap()).unwrap();
        let l = &v["latency_ms"];
        assert_eq!(l["samples"], 0, "{args:?}: {v}");
        for p in ["p50_ms", "p95_ms", "p99_ms", "max_ms"] {
            assert!(l[p].is_null(), "{args:?}: {p} should be null: {l}");
        }
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            out.contains("p50 - ms, p95 - ms, p99 - ms, max - ms"),
            "{args:?}: {out}"
        );
    }
}

#[test]
fn absurd_numbers_are_refused_naming_the_option_for_every_query() {
    // The runtime options every query shares, with the same parser.
    let runtime: [(&[&str], &str); 8] = [
        (&["--batch", "18446744073709551615"], "--batch"),
        (&["--batch", "0"], "--batch"),
        (&["--ring-bytes", "18446744073709551615"], "--ring-bytes"),
        (&["--ring-bytes", "100"], "--ring-bytes"),
        (&["--workers", "100000"], "--workers"),
        (&["--workers", "-2"], "--workers"),
        (&["--flush-us", "18446744073709551615"], "--flush-us"),
        (&["--timeline-s", "-1"], "--timeline-s"),
    ];
    let queries: [&[&str]; 4] = [
        &["run", "ysb", "--events", "10"],
        &["run", "wa", "--events", "10"],
        &["run", "nexmark", "--query", "q7", "--events", "10"],
        &["run", "wordcount", "--input", "/nonexistent"],
    ];
    for q in queries {
        for (extra, flag) in runtime {
            refused(&[q, extra].concat(), &[flag]);
        }
        // A negative window is a value out of range, not an unknown `-1`.
        let o = air(&[q, &["--window-ms", "-10"][..]].concat());
        assert_eq!(o.status.code(), Some(2));
        let err = stderr(&o);
        assert!(
            err.contains("--window-ms") && err.contains("must be a positive integer"),
            "{q:?}: {err}"
        );
        assert!(!err.contains("unexpected argument"), "{q:?}: {err}");
    }
    // Rates: every --rate and --events-per-s, the same way.
    for (args, flag) in [
        (&["run", "ysb", "--rate", "-5"][..], "--rate"),
        (&["run", "ysb", "--rate", "18446744073709551615"], "--rate"),
        (&["run", "wa", "--rate", "0"], "--rate"),
        (
            &["run", "nexmark", "--query", "q1", "--rate", "-1"],
            "--rate",
        ),
        (&["run", "wa", "--events-per-s", "1e-300"], "--events-per-s"),
        (&["run", "wa", "--events-per-s", "-3"], "--events-per-s"),
        (&["run", "wa", "--events-per-s", "inf"], "--events-per-s"),
        (
            &[
                "run",
                "nexmark",
                "--query",
                "q1",
                "--events-per-s",
                "1e-300",
            ],
            "--events-per-s",
        ),
        (
            &["run", "nexmark", "--query", "q7", "--events-per-s", "NaN"],
            "--events-per-s",
        ),
        (
            &["gen", "wa", "--events-per-s", "0", "--out", "x"],
            "--events-per-s",
        ),
        (
            &["gen", "nexmark", "--events-per-s", "1e-300", "--out", "x"],
            "--events-per-s",
        ),
        (
            &[
                "gen",
                "ysb",
                "--events",
                "1",
                "--events-per-s",
                "-1",
                "--out",
                "x",
            ],
            "--events-per-s",
        ),
        (&["run", "ysb", "--duration", "-1"], "--duration"),
        (
            &["run", "wa", "--rate", "10", "--duration", "NaN"],
            "--duration",
        ),
        (
            &["run", "nexmark", "--query", "q5", "--slide-ms", "-1"],
            "--slide-ms",
        ),
        (&["run", "ysb", "--max-delay-ms", "-1"], "--max-delay-ms"),
        (&["run", "wa", "--zipf", "-1"], "--zipf"),
        (&["run", "wa", "--keys", "-1"], "--keys"),
        (
            &["bench", "ysb", "--sustainable", "--window-ms", "-1"],
            "--window-ms",
        ),
        (
            &["bench", "ysb", "--sustainable", "--batch", "0"],
            "--batch",
        ),
    ] {
        refused(args, &[flag]);
    }
    // A directory where a generator's output file goes (both forms).
    for form in ["ours", "beam"] {
        refused(
            &[
                "gen", "nexmark", "--events", "10", "--format", form, "--out", "/tmp",
            ],
            &["/tmp", "is a directory"],
        );
    }
    // A rate whose stream's times overflow the millisecond clock.
    for args in [
        &[
            "run",
            "wa",
            "--events-per-s",
            "0.001",
            "--events",
            "18446744073709551615",
        ][..],
        &[
            "run",
            "nexmark",
            "--query",
            "q7",
            "--events-per-s",
            "0.001",
            "--events",
            "18446744073709551615",
        ],
    ] {
        refused(args, &["--events-per-s", "overflows"]);
    }
    // The report is a file; `-` (standard output) is for --out alone.
    refused(
        &["run", "ysb", "--events", "10", "--report", "-"],
        &["--report -"],
    );
}

#[test]
fn options_a_query_does_not_honour_are_refused_for_every_query() {
    // Window-less NEXMark queries take no window options; --slide-ms is
    // q5's alone; --shuffle, --keys and --zipf only where supported.
    let nex = |q: &'static str, extra: &'static [&'static str]| -> Vec<&'static str> {
        [
            &["run", "nexmark", "--query", q, "--events", "10"][..],
            extra,
        ]
        .concat()
    };
    for (q, flag, value) in [
        ("q1", "--window-ms", "5000"),
        ("q1", "--slide-ms", "1000"),
        ("q1", "--max-delay-ms", "0"),
        ("q2", "--window-ms", "5000"),
        ("q2", "--max-delay-ms", "10"),
        ("q7", "--slide-ms", "500"),
        ("q8", "--slide-ms", "2000"),
    ] {
        let args = nex(q, &[]);
        let args = [&args[..], &[flag, value][..]].concat();
        refused(&args, &[flag, "does not apply", &format!("nexmark {q}")]);
    }
    // The same options at their defaults, or where honoured, run.
    for args in [
        nex("q1", &[]),
        nex(
            "q5",
            &[
                "--window-ms",
                "5000",
                "--slide-ms",
                "1000",
                "--max-delay-ms",
                "5",
            ],
        ),
        nex("q7", &["--window-ms", "5000", "--max-delay-ms", "5"]),
        nex("q8", &["--window-ms", "5000"]),
    ] {
        let o = air(&args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
    // The sustainable search checks its --query by the same table.
    for (q, extra, flag) in [
        ("q1", &["--window-ms", "100"][..], "--window-ms"),
        ("q2", &["--max-delay-ms", "0"], "--max-delay-ms"),
        ("q7", &["--slide-ms", "10"], "--slide-ms"),
        ("q5", &["--shuffle"], "--shuffle"),
        ("q8", &["--shuffle"], "--shuffle"),
        ("ysb", &["--keys", "10"], "--keys"),
        ("q5", &["--zipf", "1.1"], "--zipf"),
        ("wa", &["--max-delay-ms", "5"], "--max-delay-ms"),
        ("wa", &["--slide-ms", "5"], "--slide-ms"),
    ] {
        let args = [&["bench", "ysb", "--sustainable", "--query", q][..], extra].concat();
        refused(&args, &[flag, "does not apply"]);
    }
}

/// `--out FILE` and `--out-dir DIR` alike: the run creates the file or the
/// directory, not their parents, and refuses a missing parent before it
/// starts (a mistyped path fails at once, not after the run); an absent
/// `--out-dir` whose parent exists is created.
#[test]
fn out_and_out_dir_refuse_a_missing_parent_alike() {
    let tmp = common::tmpdir("options", "parents");
    let missing = tmp.join("missing");
    let file = missing.join("rows.csv");
    let dir = missing.join("parts");
    let base = ["run", "nexmark", "--events", "1000"];
    refused(
        &[
            &base[..],
            &["--query", "q1", "--out", file.to_str().unwrap()],
        ]
        .concat(),
        &[file.to_str().unwrap(), "does not exist"],
    );
    refused(
        &[
            &base[..],
            &["--query", "q10", "--out-dir", dir.to_str().unwrap()],
        ]
        .concat(),
        &[
            "--out-dir",
            dir.to_str().unwrap(),
            missing.to_str().unwrap(),
            "does not exist",
        ],
    );
    assert!(
        !missing.exists(),
        "a refused run created {}",
        missing.display()
    );
    // With the parent there, both are created.
    std::fs::create_dir(&missing).unwrap();
    for args in [
        &["--query", "q1", "--out", file.to_str().unwrap()][..],
        &["--query", "q10", "--out-dir", dir.to_str().unwrap()],
    ] {
        let o = air(&[&base[..], args].concat());
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
    assert!(std::fs::read_to_string(&file)
        .unwrap()
        .starts_with("auction,bidder,price"));
    assert!(std::fs::read_dir(&dir).unwrap().next().is_some());
}

/// `air gen ... --out -` writes the events to standard output, the same
/// bytes as `--out FILE`, and no file named `-`; the summary goes to
/// standard error. YSB's campaign map stays a file.
#[test]
fn gen_out_dash_writes_standard_output() {
    let tmp = common::tmpdir("options", "gen-stdout");
    let file = tmp.join("events");
    let f = file.to_str().unwrap();
    let camp = tmp.join("campaigns");
    let c = camp.to_str().unwrap();
    let camp2 = tmp.join("campaigns2");
    let c2 = camp2.to_str().unwrap();
    let cases: [(&[&str], &[&str], &[&str]); 4] = [
        (&["gen", "nexmark", "--events", "3000"], &[], &[]),
        (
            &["gen", "nexmark", "--events", "300", "--format", "beam"],
            &[],
            &[],
        ),
        (&["gen", "wa", "--events", "3000", "--keys", "7"], &[], &[]),
        (
            &["gen", "ysb", "--events", "3000"],
            &["--campaigns-out", c],
            &["--campaigns-out", c2],
        ),
    ];
    for (gen, to_file, to_stdout) in cases {
        let o = air(&[gen, &["--out", f], to_file].concat());
        assert!(o.status.success(), "{gen:?}: {}", stderr(&o));
        let want = std::fs::read(&file).unwrap();
        assert!(want.len() > 1000, "{gen:?}: {} bytes", want.len());
        let args = [gen, &["--out", "-"], to_stdout].concat();
        let o = Command::new(AIR)
            .args(&args)
            .current_dir(&*tmp)
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        assert!(
            o.stdout == want,
            "{args:?}: standard output differs from the file"
        );
        assert!(!tmp.join("-").exists(), "{args:?} wrote a file named -");
        assert!(
            stderr(&o).contains("standard output"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    assert_eq!(
        std::fs::read(&camp).unwrap(),
        std::fs::read(&camp2).unwrap()
    );
    refused(
        &[
            "gen",
            "ysb",
            "--events",
            "10",
            "--out",
            f,
            "--campaigns-out",
            "-",
        ],
        &["--campaigns-out -"],
    );
}

/// A record larger than its channel's frames stops the run with the
/// `--ring-bytes` that fits it, and that value runs it: q20's rows carry
/// their auction's 100 kB description across `collect`, whose rings are
/// a sixteenth of `--ring-bytes` (64 KiB at the default 1 MiB).
#[test]
fn a_record_too_large_names_the_ring_bytes_that_fit_it() {
    let tmp = common::tmpdir("options", "big-record");
    let input = tmp.join("events.json");
    let out = tmp.join("q20.csv");
    let description = "d".repeat(100_000);
    let lines = [
        serde_json::json!({"type":"auction","id":7,"itemName":"item","description":description,
            "initialBid":5,"reserve":9,"dateTime":0,"expires":10_000,"seller":1000,
            "category":10,"extra":""}),
        serde_json::json!({"type":"bid","auction":7,"bidder":1,"price":100,"channel":"c",
            "url":"u","dateTime":10,"extra":""}),
        serde_json::json!({"type":"bid","auction":7,"bidder":2,"price":101,"channel":"c",
            "url":"u","dateTime":20,"extra":""}),
    ];
    let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    std::fs::write(&input, text.join("\n") + "\n").unwrap();
    let run = |extra: &[&str]| {
        let args = [
            &[
                "run",
                "nexmark",
                "--query",
                "q20",
                "--workers",
                "2",
                "--input",
                input.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
            ][..],
            extra,
        ]
        .concat();
        air(&args)
    };
    let o = run(&[]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("rings are a sixteenth of --ring-bytes 1048576"),
        "{err}"
    );
    let fit: usize = err
        .split(") is the smallest")
        .next()
        .and_then(|s| s.rsplit("--ring-bytes ").next())
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no --ring-bytes in: {err}"));
    // A frame of more than the description, on rings of a sixteenth.
    assert!(fit > 16 * 100_000 && fit < 16 * 110_000, "{fit}: {err}");
    let o = run(&["--ring-bytes", &fit.to_string()]);
    assert!(o.status.success(), "--ring-bytes {fit}: {}", stderr(&o));
    let rows = std::fs::read_to_string(&out).unwrap();
    assert_eq!(rows.lines().count(), 3, "a header and two rows");
    assert!(rows.contains(&description));
}

/// `air plan -- QUERY ARGS` plans the query and writes none of its
/// outputs: an existing `--timeline` file keeps its content.
#[test]
fn plan_writes_none_of_the_query_outputs() {
    let tmp = common::tmpdir("options", "plan-writes");
    let timeline = tmp.join("timeline.csv");
    std::fs::write(&timeline, "an earlier run's timeline\n").unwrap();
    let out = tmp.join("rows.csv");
    let report = tmp.join("report.json");
    let o = air(&[
        "plan",
        "--",
        "nexmark",
        "--query",
        "q5",
        "--timeline",
        timeline.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("max-by-window"));
    assert_eq!(
        std::fs::read_to_string(&timeline).unwrap(),
        "an earlier run's timeline\n"
    );
    assert!(!out.exists() && !report.exists());
    let left: Vec<_> = std::fs::read_dir(&*tmp).unwrap().flatten().collect();
    assert_eq!(left.len(), 1, "{left:?}");
}

/// A `--latency-plot` in a missing directory is refused before the run,
/// as `--out` and `--report` are (it is drawn after the run).
#[test]
fn a_latency_plot_in_a_missing_directory_is_refused_before_the_run() {
    let tmp = common::tmpdir("options", "plot-dir");
    let plot = tmp.join("missing").join("latency.png");
    let out = tmp.join("rows.csv");
    refused(
        &[
            "run",
            "ysb",
            "--rate",
            "1000",
            "--events",
            "100",
            "--latency-plot",
            plot.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        &[plot.to_str().unwrap(), "does not exist"],
    );
    assert!(!out.exists(), "the run went ahead");
}

/// `air plan --workers W -- QUERY ARGS` with `--workers` in ARGS too (a
/// copied `air run` command line): the same value is taken once, a
/// different one is refused naming both.
#[test]
fn plan_takes_an_option_given_twice_once_or_refuses_two_values() {
    let o = air(&["plan", "--workers", "3", "--", "ysb", "--workers", "3"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("× 3 workers = 3 workers"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let o = air(&[
        "plan",
        "--ring-bytes",
        "65536",
        "--",
        "ysb",
        "--ring-bytes=65536",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    refused(
        &["plan", "--workers", "5", "--", "ysb", "--workers=3"],
        &["--workers 5", "--workers 3", "differ"],
    );
    refused(
        &[
            "plan",
            "--flush-us",
            "100",
            "--",
            "ysb",
            "--flush-us",
            "200",
        ],
        &["--flush-us 100", "--flush-us 200"],
    );
}

/// The summary's channels line: its parts (process memory, which holds
/// the network tier's send mirrors too, `/dev/shm`, windows) add up to its
/// total, on the network tier where every part is there.
#[cfg(feature = "mpi")]
#[test]
fn the_summary_memory_parts_add_up_to_the_total() {
    let o = common::nexmark::mpirun2(&[
        "run",
        "ysb",
        "--workers",
        "1",
        "--events",
        "1000",
        "--force-network",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with("channels:"))
        .unwrap_or_else(|| panic!("no channels line in: {out}"));
    let num = |after: &str| -> f64 {
        let rest = &line[line
            .find(after)
            .unwrap_or_else(|| panic!("{after}: {line}"))
            + after.len()..];
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap();
        rest[..end].parse().unwrap()
    };
    let total = num(" bytes, ");
    let parts = num("(process ") + num("/dev/shm ") + num("windows ");
    assert!(num("(process ") > 0.0 && num("windows ") > 0.0, "{line}");
    assert!((total - parts).abs() <= 0.15, "{total} vs {parts}: {line}");
}

#[test]
fn air_workers_and_air_ring_bytes_set_air_run_as_they_set_a_library_job() {
    let dir = common::tmpdir("options", "env");
    let rep = dir.join("r.json");
    let run = |env: &[(&str, &str)], extra: &[&str]| {
        let o = Command::new(AIR)
            .args(["run", "ysb", "--events", "1000", "--no-pin", "--report"])
            .arg(&rep)
            .args(extra)
            .env_remove("AIR_WORKERS")
            .env_remove("AIR_RING_BYTES")
            .envs(env.iter().copied())
            .output()
            .unwrap();
        assert!(o.status.success(), "{env:?} {extra:?}: {}", stderr(&o));
        common::report(&rep)
    };
    let r = run(&[("AIR_WORKERS", "3"), ("AIR_RING_BYTES", "65536")], &[]);
    assert_eq!(r["workers"], 3, "{r}");
    let edges = r["channels"]["plan"]["edges"].as_array().unwrap();
    assert!(edges.iter().all(|e| e["ring_bytes"] == 65536), "{r}");
    // The options win over the environment.
    let r = run(&[("AIR_WORKERS", "3")], &["--workers", "1"]);
    assert_eq!(r["workers"], 1, "{r}");
    // A bad value from the environment is refused naming the variable.
    for (var, value, opt) in [
        ("AIR_WORKERS", "0", "--workers"),
        ("AIR_RING_BYTES", "100", "--ring-bytes"),
    ] {
        let o = Command::new(AIR)
            .args(["run", "ysb", "--events", "1000"])
            .env(var, value)
            .output()
            .unwrap();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(
            err.contains(&format!("invalid value '{value}' for '{opt}"))
                && err.contains(&format!("(the value of {var})")),
            "{err}"
        );
    }
}
