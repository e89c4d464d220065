//! `air run wa` end to end: results from 1, 2 and 4 workers (and with
//! `--shuffle`, and Zipf keys) equal a sequential computation in this test
//! over the events `air gen wa` exports.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

const AIR: &str = env!("CARGO_BIN_EXE_air");

fn air(args: &[&str]) -> Output {
    Command::new(AIR).args(args).output().expect("run air")
}

/// (window_start, key) → (count, sum), from the exported events.
type Table = BTreeMap<(u64, u64), (u64, i64)>;

fn reference(events_csv: &Path, window_ms: u64) -> Table {
    let text = std::fs::read_to_string(events_csv).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("time_ms,key,value"));
    let mut t = Table::new();
    for l in lines {
        let f: Vec<u64> = l.split(',').map(|x| x.parse().unwrap()).collect();
        let (time, key, value) = (f[0], f[1], f[2] as i64);
        let e = t.entry((time - time % window_ms, key)).or_default();
        e.0 += 1;
        e.1 += value;
    }
    t
}

fn results(out_csv: &Path) -> Table {
    let text = std::fs::read_to_string(out_csv).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("window_start_ms,key,count,sum"));
    let mut t = Table::new();
    let mut last = None;
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        let k = (f[0].parse().unwrap(), f[1].parse().unwrap());
        assert!(last < Some(k), "rows sorted by window, key: {l}");
        last = Some(k);
        t.insert(k, (f[2].parse().unwrap(), f[3].parse().unwrap()));
    }
    t
}

fn check(gen: &[&str], window_ms: u64, runs: &[&[&str]]) -> Table {
    let dir = common::tmpdir("wa", "check");
    let events = dir.join("events.csv");
    let mut args = vec!["gen", "wa", "--out", events.to_str().unwrap()];
    args.extend_from_slice(gen);
    let o = air(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let want = reference(&events, window_ms);
    let w = window_ms.to_string();
    for extra in runs {
        let out = dir.join("out.csv");
        let report = dir.join("report.json");
        let mut args = vec![
            "run",
            "wa",
            "--window-ms",
            &w,
            "--out",
            out.to_str().unwrap(),
            "--report",
            report.to_str().unwrap(),
        ];
        args.extend_from_slice(gen);
        args.extend_from_slice(extra);
        let o = air(&args);
        assert!(
            o.status.success(),
            "{extra:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(results(&out), want, "{extra:?}");
        let r: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
        assert_eq!(r["query"], "wa");
        assert_eq!(r["rows"], want.len() as u64);
        assert_eq!(r["late_records"], 0);
        let events: u64 = gen
            .iter()
            .position(|a| *a == "--events")
            .map(|i| gen[i + 1].parse().unwrap())
            .unwrap();
        assert_eq!(r["events"], events, "{extra:?}");
    }
    want
}

#[test]
fn uniform_keys_give_the_sequential_result_on_1_2_4_workers_and_shuffled() {
    // 100 events per ms of event time: many events sit exactly on window
    // edges (t = k·250), which open the next window.
    let gen = [
        "--events",
        "300000",
        "--keys",
        "37",
        "--events-per-s",
        "100000",
        "--seed",
        "7",
    ];
    let want = check(
        &gen,
        250,
        &[
            &["--workers", "1"],
            &["--workers", "2"],
            &["--workers", "4"],
            &["--workers", "3", "--shuffle"],
            &["--workers", "2", "--shuffle", "--validate"],
        ],
    );
    // 3000 ms of event time in 250 ms windows: 12 windows × 37 keys.
    assert_eq!(want.len(), 12 * 37);
    assert_eq!(want.values().map(|v| v.0).sum::<u64>(), 300_000);
}

#[test]
fn zipf_keys_are_skewed_and_exact() {
    let gen = [
        "--events",
        "200000",
        "--keys",
        "1000",
        "--zipf",
        "1.2",
        "--events-per-s",
        "50000",
        "--seed",
        "3",
    ];
    let want = check(&gen, 1000, &[&["--workers", "1"], &["--workers", "4"]]);
    let mut per_key: BTreeMap<u64, u64> = BTreeMap::new();
    for ((_, k), (c, _)) in &want {
        *per_key.entry(*k).or_default() += c;
    }
    let top = per_key.get(&0).copied().unwrap_or(0);
    // Key 0 has probability 1/H(1000, 1.2) ≈ 0.21; the mean key gets 0.001.
    assert!(top > 30_000, "key 0 got {top} of 200000");
    assert!(
        per_key.values().all(|&c| c <= top),
        "key 0 is the most frequent"
    );
}

/// What a run of WA with `--shuffle` at 8 workers reports of its load:
/// (max over mean at the keyed stage, records per worker there, hot-key
/// figures, sorted rows, summary).
struct Load {
    ratio: f64,
    per_worker: Vec<u64>,
    hot: serde_json::Value,
    rows: Vec<String>,
    summary: String,
}

fn wa_load(dir: &std::path::Path, extra: &[&str]) -> Load {
    let (rep, out) = (dir.join("r.json"), dir.join("rows.csv"));
    let mut args = vec![
        "run",
        "wa",
        "--keys",
        "100000",
        "--shuffle",
        "--workers",
        "8",
        "--events",
        "2000000",
        "--no-pin",
        "--report",
        rep.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend(extra);
    let o = air(&args);
    assert!(o.status.success(), "{}", common::text(&o));
    let r = common::report(&rep);
    let load = r["load"].clone();
    let (per_worker, hot, stage) = common::window_stage_load(&r);
    assert_eq!(per_worker.len(), 8, "{load}");
    let ratio = load["max_over_mean"].as_f64().unwrap();
    assert_eq!(stage["max_over_mean"].as_f64().unwrap(), ratio, "{load}");
    // The collect edge to worker 0 is not a keyed stage.
    assert!(load["stages"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["to_one_worker"] == true || s == &stage));
    let rows = common::sorted_rows(&out);
    Load {
        ratio,
        per_worker,
        hot,
        rows,
        summary: String::from_utf8_lossy(&o.stdout).into_owned(),
    }
}

/// The report's `load`: records per worker at each keyed stage over their
/// mean. Zipf 1.2 keys put key 0's fifth of the events on one worker of 8
/// with `--rebalance off`; uniform keys spread them evenly. Off, every
/// event crosses the keyed stage's edge: its per-worker records add up to
/// the events.
#[test]
fn report_load_is_uneven_with_zipf_keys_and_even_with_uniform_keys() {
    let dir = common::tmpdir("wa", "load");
    let run = |zipf: &[&str]| {
        let mut args = vec!["--rebalance", "off"];
        args.extend(zipf);
        let l = wa_load(&dir, &args);
        assert_eq!(l.per_worker.iter().sum::<u64>(), 2_000_000);
        assert_eq!(l.hot["on"], false);
        assert_eq!(l.hot["records"], 0);
        let line = format!(
            "load: max/mean {:.2} of records per worker at \"window records + window \
             hot-key partials\" (8 workers)\n",
            l.ratio
        );
        assert!(l.summary.contains(&line), "{line:?} not in {}", l.summary);
        l.ratio
    };
    let skewed = run(&["--zipf", "1.2"]);
    assert!(skewed > 1.5, "zipf 1.2: max/mean {skewed}");
    let uniform = run(&[]);
    assert!(uniform < 1.2, "uniform: max/mean {uniform}");
    eprintln!("load max/mean at 8 workers: zipf 1.2 {skewed:.3}, uniform {uniform:.3}");
}

/// `--rebalance on` (the default): with Zipf keys the senders aggregate
/// the hot key groups' records themselves and send partials, so the keyed
/// stage's load evens out (Zipf 1.2: from above 2 to at most 1.3; 1.0:
/// at most 1.1) and the rows are those of `--rebalance off`, byte for
/// byte. Every event is either received at the stage or kept at its
/// sender. Uniform keys: nothing is hot.
#[test]
fn rebalance_evens_the_load_of_zipf_keys_with_the_same_rows() {
    let dir = common::tmpdir("wa", "rebalance");
    for (zipf, bound) in [("1.2", 1.3), ("1.0", 1.1)] {
        let off = wa_load(&dir, &["--zipf", zipf, "--rebalance", "off"]);
        let on = wa_load(&dir, &["--zipf", zipf]);
        assert_eq!(on.rows, off.rows, "zipf {zipf}: rows differ");
        assert_eq!(on.hot["on"], true);
        let (kept, partials) = (
            on.hot["records"].as_u64().unwrap(),
            on.hot["partials"].as_u64().unwrap(),
        );
        assert!(kept > 100_000, "zipf {zipf}: {}", on.hot);
        assert!(partials > 0 && partials < kept / 10, "{}", on.hot);
        assert_eq!(
            on.per_worker.iter().sum::<u64>() - partials + kept,
            2_000_000,
            "{}",
            on.hot
        );
        assert!(
            on.ratio <= bound && on.ratio < off.ratio,
            "zipf {zipf}: max/mean {} on, {} off",
            on.ratio,
            off.ratio
        );
        assert!(on.summary.contains("hot keys: "), "{}", on.summary);
        eprintln!(
            "zipf {zipf}: max/mean {:.3} off, {:.3} on",
            off.ratio, on.ratio
        );
    }
    let uniform = wa_load(&dir, &[]);
    assert_eq!(uniform.hot["records"], 0, "{}", uniform.hot);
    assert_eq!(uniform.per_worker.iter().sum::<u64>(), 2_000_000);
}

/// `--zipf 0` is the Zipf law with exponent 0: uniform keys, the same
/// stream as without `--zipf` (what `air bench skew`'s exponent 0 runs).
#[test]
fn zipf_0_is_uniform_keys() {
    let gen = ["--events", "50000", "--keys", "100", "--seed", "3"];
    let uniform = check(&gen, 1000, &[&["--workers", "2"]]);
    let mut zero = gen.to_vec();
    zero.extend(["--zipf", "0"]);
    assert_eq!(check(&zero, 1000, &[&["--workers", "2"]]), uniform);
}

#[test]
fn the_same_seed_gives_the_same_stream_and_another_seed_another() {
    let dir = common::tmpdir("wa", "seed");
    let gen = |seed: &str, name: &str| {
        let p = dir.join(name);
        let o = air(&[
            "gen",
            "wa",
            "--events",
            "1000",
            "--seed",
            seed,
            "--out",
            p.to_str().unwrap(),
        ]);
        assert!(o.status.success());
        std::fs::read(p).unwrap()
    };
    assert_eq!(gen("5", "a"), gen("5", "b"));
    assert_ne!(gen("5", "a"), gen("6", "c"));
}

#[test]
fn bad_options_are_refused_with_exit_2() {
    for args in [
        &["run", "wa", "--keys", "0"][..],
        &["run", "wa", "--zipf", "-1"],
        &["run", "wa", "--zipf", "NaN"],
        &["run", "wa", "--window-ms", "0"],
        &["run", "wa", "--events-per-s", "0"],
        &["run", "wa", "--workers", "0"],
        &["run", "wa", "--out", "/nonexistent/dir/x.csv"],
    ] {
        let o = air(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("error"), "{args:?}: {err}");
    }
}

#[test]
fn overload_is_absorbed_by_backpressure_with_bounded_memory_and_exact_results() {
    // Every event crosses the exchange (--shuffle) through 4 KiB rings: the
    // generators outrun the channels, block on full rings, and nothing is
    // dropped or buffered without bound.
    let dir = common::tmpdir("wa", "overload");
    let events = dir.join("events.csv");
    let gen = [
        "--events",
        "2000000",
        "--keys",
        "50",
        "--events-per-s",
        "100000",
        "--seed",
        "4",
    ];
    let mut args = vec!["gen", "wa", "--out", events.to_str().unwrap()];
    args.extend_from_slice(&gen);
    assert!(air(&args).status.success());
    let want = reference(&events, 1000);
    std::fs::remove_file(&events).unwrap();
    let out = dir.join("o.csv");
    let rep = dir.join("r.json");
    let mut args = vec![
        "run",
        "wa",
        "--window-ms",
        "1000",
        "--shuffle",
        "--ring-bytes",
        "4096",
        "--batch",
        "64",
        "--workers",
        "2",
        "--out",
        out.to_str().unwrap(),
        "--report",
        rep.to_str().unwrap(),
    ];
    args.extend_from_slice(&gen);
    let o = air(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(results(&out), want);
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&rep).unwrap()).unwrap();
    let waits: u64 = r["per_worker"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["channels"]["ring_full_waits"].as_u64().unwrap())
        .sum();
    assert!(
        waits > 0,
        "the rings never filled: no backpressure was exercised"
    );
    let rss = r["peak_rss_bytes"].as_u64().unwrap();
    assert!(
        rss > 0 && rss < 64 << 20,
        "peak RSS {} MiB (bound 64 MiB)",
        rss >> 20
    );
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[test]
fn paced_wa_reports_input_lag_and_latency_and_counts_every_event() {
    let dir = common::tmpdir("wa", "paced");
    let (out, rep) = (dir.join("o.csv"), dir.join("r.json"));
    let t0 = now_ms();
    let started = std::time::Instant::now();
    let o = air(&[
        "run",
        "wa",
        "--rate",
        "400000",
        "--duration",
        "1.5",
        "--workers",
        "2",
        "--window-ms",
        "100",
        "--no-pin",
        "--out",
        out.to_str().unwrap(),
        "--report",
        rep.to_str().unwrap(),
    ]);
    let wall = started.elapsed().as_secs_f64();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("input lag"), "{stdout}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&rep).unwrap()).unwrap();
    // Every event the pacers allowed (200 000/s per worker for 1.5 s) was
    // generated, and every one is counted in exactly one row.
    let events = r["events"].as_u64().unwrap();
    assert_eq!(events, 600_000, "{r}");
    let t = results(&out);
    assert_eq!(t.values().map(|v| v.0).sum::<u64>(), events);
    let per_worker: Vec<&serde_json::Value> = r["per_worker"].as_array().unwrap().iter().collect();
    assert_eq!(
        per_worker
            .iter()
            .map(|w| w["events"].as_u64().unwrap())
            .sum::<u64>(),
        events
    );
    // Input lag, whole job and per worker.
    let lag = r["input_lag_max_ms"].as_f64().expect("input lag");
    assert!((0.0..1e4).contains(&lag), "{r}");
    for w in &per_worker {
        assert!(w["input_lag_max_ms"].as_f64().unwrap() <= lag, "{w}");
    }
    // Latency of every row; event times are wall-clock due times.
    let l = &r["latency_ms"];
    assert_eq!(l["samples"].as_u64(), Some(t.len() as u64), "{r}");
    assert!(l["p99_ms"].as_u64().unwrap() < 10_000, "{r}");
    let first = t.keys().next().unwrap().0;
    let last = t.keys().last().unwrap().0;
    assert!(first + 100 >= t0 && first <= t0 + 5_000, "{first} vs {t0}");
    assert!(
        (1_200..=1_600).contains(&(last + 100 - first)),
        "{first}..{last}"
    );
    // The duration is respected (a loaded machine may run a little longer).
    let secs = r["elapsed_s"].as_f64().unwrap();
    assert!(
        secs >= 1.45 && secs < wall + 0.1 && wall < 15.0,
        "{secs} s, {wall} s"
    );
    assert_eq!(r["params"]["rate"], 400_000);

    // Pacing options that cannot work are refused.
    for (args, msg) in [
        (&["--duration", "1"][..], "--rate"),
        (
            &["--rate", "1000", "--events-per-s", "5"][..],
            "cannot be used with",
        ),
        (
            &["--rate", "1", "--workers", "2"][..],
            "below one event per second",
        ),
        (&["--rate", "1000", "--duration", "0"][..], "--duration"),
    ] {
        let o = air(&[&["run", "wa"][..], args].concat());
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(msg), "{args:?}: {err}");
    }
}

/// `--latency-plot` on the shared driver: a paced WA run draws its latency
/// distribution as a PNG; a run without latency (synthetic event times) is
/// refused before it starts.
#[test]
fn latency_plot_of_a_paced_run_and_refused_without_latency() {
    let dir = common::tmpdir("wa", "latency-plot");
    let png = dir.join("l.png");
    let o = air(&[
        "run",
        "wa",
        "--rate",
        "1000000",
        "--duration",
        "1",
        "--window-ms",
        "100",
        "--workers",
        "2",
        "--no-pin",
        "--latency-plot",
        png.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bytes = std::fs::read(&png).unwrap();
    assert!(
        bytes.starts_with(b"\x89PNG") && bytes.len() > 10_000,
        "{} bytes",
        bytes.len()
    );
    let o = air(&[
        "run",
        "wa",
        "--events",
        "1000",
        "--latency-plot",
        png.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("has no latency here"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn event_times_are_exact_at_fractional_gaps() {
    // 3 events/s: event n at floor(n · 1000 / 3) ms, so events 0..=29 fall
    // in [0, 10 000) and event 30 at 10 000 ms exactly opens the next
    // window (a rounded-down fixed-point gap stamped it 1 ms early).
    let dir = common::tmpdir("wa", "exact-times");
    for workers in ["1", "2"] {
        let out = dir.join(format!("x{workers}.csv"));
        let o = air(&[
            "run",
            "wa",
            "--events",
            "31",
            "--events-per-s",
            "3",
            "--keys",
            "1",
            "--window-ms",
            "10000",
            "--workers",
            workers,
            "--no-pin",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let text = std::fs::read_to_string(&out).unwrap();
        let counts: Vec<(u64, u64)> = text
            .lines()
            .skip(1)
            .map(|l| {
                let f: Vec<u64> = l.split(',').map(|x| x.parse().unwrap()).collect();
                (f[0], f[2])
            })
            .collect();
        assert_eq!(
            counts,
            [(0, 30), (10_000, 1)],
            "{workers} worker(s): {text}"
        );
    }
    let gen = dir.join("e.csv");
    let o = air(&[
        "gen",
        "wa",
        "--events",
        "31",
        "--events-per-s",
        "3",
        "--out",
        gen.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    let times: Vec<String> = std::fs::read_to_string(&gen)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap().to_string())
        .collect();
    assert_eq!(times[3], "1000");
    assert_eq!(times[29], "9666");
    assert_eq!(times[30], "10000");
}

/// Rows stream to `--out` as their windows fire: 12 s into a 20-s paced run
/// with 1-s windows the file already holds at least 8 windows, and what it
/// held then is a prefix of the final file. After the run every window is
/// complete: its rows equal, key by key, the sequential aggregation of the
/// events stamped in it (event `n` at `start + floor(n / 2000)` ms at 2 M
/// events/s, its key and value a pure function of `n`).
#[test]
fn paced_rows_stream_to_out_as_windows_fire_and_every_window_is_complete() {
    use air_operators::sources::wa::{KeyDist, WaConfig, WaEvent, WaGenerator};
    use std::time::{Duration, Instant};
    let dir = common::tmpdir("wa", "live");
    let (out, rep) = (dir.join("live.csv"), dir.join("r.json"));
    let t0 = now_ms();
    let started = Instant::now();
    let mut child = Command::new(AIR)
        .args([
            "run",
            "wa",
            "--rate",
            "2000000",
            "--duration",
            "20",
            "--window-ms",
            "1000",
            "--no-pin",
            "--workers",
            "2",
            "--out",
            out.to_str().unwrap(),
            "--report",
            rep.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run air");
    // Poll the file while the job runs; keep what it holds at 12 s.
    let window_of = |l: &str| -> u64 { l.split(',').next().unwrap().parse().unwrap() };
    let mut seen = 0;
    let live = loop {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended after {:?}",
            started.elapsed()
        );
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        // Whole lines only (a flush may be under way).
        let whole = text[..text.rfind('\n').map_or(0, |i| i + 1)].to_string();
        let windows: std::collections::BTreeSet<u64> =
            whole.lines().skip(1).map(window_of).collect();
        assert!(windows.len() >= seen, "the file shrank");
        seen = windows.len();
        if started.elapsed() >= Duration::from_secs(12) {
            break (whole, windows);
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    assert!(
        child.try_wait().unwrap().is_none(),
        "the job still runs at the 12-s mark"
    );
    let (live, live_windows) = live;
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        live_windows.len() >= 8,
        "{} windows in the file at 12 s: {live_windows:?}",
        live_windows.len()
    );
    assert!(
        live.starts_with("window_start_ms,key,count,sum\n"),
        "{live:.60}"
    );
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(
        text.starts_with(&live),
        "the rows written by 12 s are the final file's first rows"
    );

    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&rep).unwrap()).unwrap();
    let n = r["events"].as_u64().unwrap();
    assert_eq!(n, 40_000_000, "{r}");
    assert_eq!(r["late_records"], 0, "{r}");
    let t = results(&out);
    assert_eq!(r["rows"], t.len() as u64, "{r}");
    // Every window's events: windows contiguous, each holding the events
    // stamped in it (2000 per ms from the first event's time on).
    let mut per_window: BTreeMap<u64, u64> = BTreeMap::new();
    for ((w, _), (c, _)) in &t {
        *per_window.entry(*w).or_default() += c;
    }
    let starts: Vec<u64> = per_window.keys().copied().collect();
    let s0 = starts[0];
    assert_eq!(
        starts,
        (0..starts.len() as u64)
            .map(|i| s0 + i * 1000)
            .collect::<Vec<_>>()
    );
    let c0 = per_window[&s0];
    assert!(c0 > 0 && c0 % 2000 == 0, "first window: {c0} events");
    // The first event's time: the wall clock at the job's start.
    let base = s0 + 1000 - c0 / 2000;
    assert!(
        base >= t0 && base <= t0 + 5_000,
        "first event at {base}, test started at {t0}"
    );
    let end = base + n / 2000;
    for (&w, &c) in &per_window {
        let stamped = (end.min(w + 1000) - base.max(w)) * 2000;
        assert_eq!(c, stamped, "window {w}");
    }
    assert_eq!(per_window.values().sum::<u64>(), n);
    // Key by key, against the same events aggregated sequentially.
    let cfg = WaConfig {
        seed: 1,
        events: n,
        keys: 1000,
        dist: KeyDist::Uniform,
        events_per_s: 2_000_000.0,
        base_time_ms: base,
        ..WaConfig::default()
    };
    let mut want = vec![(0u64, 0i64); starts.len() * 1000];
    let mut g = WaGenerator::new(&cfg, 0, 1);
    let mut buf = vec![WaEvent::default(); 1 << 16];
    loop {
        let k = g.fill(&mut buf);
        if k == 0 {
            break;
        }
        for e in &buf[..k] {
            let s = &mut want[((e.time_ms - s0) / 1000 * 1000 + e.key) as usize];
            s.0 += 1;
            s.1 += e.value;
        }
    }
    let want: Table = want
        .into_iter()
        .enumerate()
        .filter(|(_, v)| v.0 > 0)
        .map(|(i, v)| ((s0 + i as u64 / 1000 * 1000, i as u64 % 1000), v))
        .collect();
    assert!(t == want, "rows differ from the sequential aggregation");
}

/// `--zipf-shift-ms`: the hot keys move every 100 ms of event time; the
/// rows are the same with `--rebalance on` and `off` and at 1 worker, the
/// hottest key of each epoch is the rotation's, and the report's
/// `load.periods` counts every record of the keyed stage once.
#[test]
fn shifting_hot_keys_keep_the_rows_and_the_load_has_periods() {
    let dir = common::tmpdir("wa", "shift");
    let shift = [
        "--zipf",
        "1.2",
        "--zipf-shift-ms",
        "100",
        "--window-ms",
        "100",
    ];
    let off = wa_load(&dir, &[&shift[..], &["--rebalance", "off"]].concat());
    let on = wa_load(&dir, &[&shift[..], &["--rebalance-ms", "20"]].concat());
    assert_eq!(on.rows, off.rows, "rebalance on against off");
    // The rows of the generated events' file, at 1 worker and at 4 with
    // --shuffle.
    check(
        &[
            "--events",
            "300000",
            "--keys",
            "1000",
            "--zipf",
            "1.2",
            "--zipf-shift-ms",
            "50",
        ],
        100,
        &[&["--workers", "1"], &["--workers", "4", "--shuffle"]],
    );
    // Epoch e (100 ms of event time, 100,000 events): its hottest key is
    // e · stride mod keys, stride = ⌊100000 · 0.618…⌋ = 61803.
    let mut best: std::collections::BTreeMap<u64, (u64, u64)> = Default::default();
    for row in &off.rows {
        let f: Vec<u64> = row.split(',').map(|x| x.parse().unwrap()).collect();
        let (epoch, key, count) = (f[0] / 100, f[1], f[2]);
        let b = best.entry(epoch).or_insert((0, 0));
        if count > b.1 {
            *b = (key, count);
        }
    }
    assert_eq!(best.len(), 20);
    for (epoch, (key, _)) in best {
        assert_eq!(key, epoch * 61_803 % 100_000, "epoch {epoch}");
    }
    let r = common::report(&dir.join("r.json"));
    let p = &r["load"]["periods"];
    assert_eq!(
        p["stage"], "window records + window hot-key partials",
        "{p}"
    );
    assert_eq!(p["period_ms"], 20, "{p}");
    let total: u64 = p["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(total, on.per_worker.iter().sum::<u64>(), "{p}");
    assert_eq!(
        p["records"].as_array().unwrap().len(),
        p["max_over_mean"].as_array().unwrap().len()
    );
    assert!(
        on.summary.contains("load per 20 ms period"),
        "{}",
        on.summary
    );
    assert!(r["per_worker"][0].get("records_in_periods").is_none());
}
