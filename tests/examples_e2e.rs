//! The example programs (`examples/clicks_top3.rs`, `url_stats.rs`,
//! `orders_payments.rs`) run as a user runs them, on inputs generated here
//! with a small seeded PRNG, against a sequential reference computed here:
//! embedded with `AIR_WORKERS` = 1, 2, 4, and (feature `mpi`) under
//! `mpirun` on the node tier, the network tier (`AIR_FORCE_NETWORK=1`) and,
//! for the window join followed by an aggregate, three ranks. A bad input
//! row stops an example with an error naming the file, the line and the
//! field. `live_clicks.rs` reads a pipe: its rows come out as windows
//! close, before the input ends.
//!
//! On inputs out of order by more than an example's default watermark
//! delay, a run exits 0 and names its late records and a delay that keeps
//! them on stderr; rerun with that delay (`MAX_DELAY_MS`), it writes
//! exactly the rows SQLite (the `sqlite3` command) computes from the same
//! files, at 1 and 2 workers and under `mpirun -np 2`. At one worker the
//! first run's rows are SQL's over the records that were on time.
//! `late_clicks.rs` (allowed lateness and a side output of late clicks)
//! puts every click in exactly one place: a count or its late file.
//!
//! The example binaries are the ones `cargo test` builds next to this
//! test's (`target/<profile>/examples/<name>`); run alone (`cargo test
//! --test examples_e2e`, which does not build them), the test builds them
//! first when they are missing or older than their sources.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Longest one run of an example may take before the test calls it a hang.
const LIMIT: Duration = Duration::from_secs(60);

/// The environment variables of `air::Job::from_env` a run sets itself, and
/// the examples' watermark delay.
const JOB_ENV: [&str; 7] = [
    "AIR_WORKERS",
    "AIR_RING_BYTES",
    "AIR_FORCE_NETWORK",
    "MAX_DELAY_MS",
    "AIR_CHECKPOINT_DIR",
    "AIR_CHECKPOINT_MS",
    "AIR_FRESH",
];

// ---------------------------------------------------------------------------
// Inputs

/// splitmix64: a small seeded PRNG.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True with probability `pct`/100.
    fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
}

/// Zipf-distributed ranks `0..n` (rank 0 the most frequent), exponent `s`.
struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    fn new(n: usize, s: f64) -> Self {
        let mut acc = 0.0;
        let mut cdf: Vec<f64> = (1..=n)
            .map(|k| {
                acc += 1.0 / (k as f64).powf(s);
                acc
            })
            .collect();
        for c in &mut cdf {
            *c /= acc;
        }
        Zipf { cdf }
    }

    fn sample(&self, rng: &mut Rng) -> u64 {
        let u = (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1) as u64
    }
}

/// Event times that grow by `0..step` ms a row; a row in `disorder_pct`
/// lags the newest time so far by up to `max_lag` ms (below the example's
/// event-time delay, so no row is late).
struct Clock {
    t: u64,
    step: u64,
    disorder_pct: u64,
    max_lag: u64,
}

impl Clock {
    fn next(&mut self, rng: &mut Rng) -> u64 {
        self.t += rng.below(self.step);
        if rng.chance(self.disorder_pct) {
            self.t.saturating_sub(rng.below(self.max_lag))
        } else {
            self.t
        }
    }
}

/// Writes `rows` (with `header`) to `path` as CSV.
fn write_csv<R: serde::Serialize>(path: &Path, rows: &[R]) {
    let mut w = csv::Writer::from_path(path).unwrap();
    for r in rows {
        w.serialize(r).unwrap();
    }
    w.flush().unwrap();
}

#[derive(Clone, Debug, serde::Serialize)]
struct Click {
    user: u64,
    time_ms: u64,
}

/// ~20k clicks over ~190 s, users Zipf-skewed (a few users click most),
/// up to 4 s out of order (the example waits 5 s).
fn clicks(seed: u64, n: usize) -> Vec<Click> {
    clicks_lagging(seed, n, 4_000)
}

/// [`clicks`], up to `max_lag` ms out of order.
fn clicks_lagging(seed: u64, n: usize, max_lag: u64) -> Vec<Click> {
    let mut rng = Rng(seed);
    let users = Zipf::new(300, 1.2);
    let mut clock = Clock {
        t: 0,
        step: 20,
        disorder_pct: 30,
        max_lag,
    };
    (0..n)
        .map(|i| {
            let mut time_ms = clock.next(&mut rng);
            if i % 97 == 0 {
                // On a window's first millisecond.
                time_ms -= time_ms % 10_000;
                time_ms = time_ms.max(clock.t.saturating_sub(max_lag));
            }
            Click {
                // Spread the ranks so users are not 0, 1, 2, …
                user: users.sample(&mut rng) * 7 + 3,
                time_ms,
            }
        })
        .collect()
}

#[derive(Clone, Debug, serde::Serialize)]
struct Visit {
    url: String,
    user: u64,
    latency_ms: f64,
    time_ms: u64,
}

/// ~15k visits over ~22 s, URLs Zipf-skewed (some needing CSV quotes),
/// integer-valued latencies (so float sums are exact in any order), up to
/// 1.5 s out of order (the example waits 2 s).
fn visits(seed: u64, n: usize) -> Vec<Visit> {
    visits_lagging(seed, n, 1_500)
}

/// [`visits`], up to `max_lag` ms out of order.
fn visits_lagging(seed: u64, n: usize, max_lag: u64) -> Vec<Visit> {
    let mut rng = Rng(seed);
    let urls = Zipf::new(40, 1.0);
    let mut clock = Clock {
        t: 0,
        step: 4,
        disorder_pct: 30,
        max_lag,
    };
    (0..n)
        .map(|_| {
            let u = urls.sample(&mut rng);
            let url = match u % 5 {
                0 => format!("/search?q=a,b&page={u}"),
                1 => format!("/item/\"{u}\""),
                _ => format!("/p/{u}/index.html"),
            };
            Visit {
                url,
                user: rng.below(60),
                latency_ms: (1 + rng.below(2_000)) as f64,
                time_ms: clock.next(&mut rng),
            }
        })
        .collect()
}

#[derive(Clone, Debug, serde::Serialize)]
struct Order {
    order: u64,
    user: u64,
    amount: i64,
    time_ms: u64,
}

#[derive(Clone, Debug, serde::Serialize)]
struct Payment {
    order: u64,
    time_ms: u64,
}

/// `n` orders over ~44 s (users Zipf-skewed) and their payments: most
/// orders paid once within 4 s (so often in the next 5-s window), some
/// twice, some never, and payments of unknown orders. Both files up to
/// 0.8 s out of order (the example waits 1 s).
fn orders_and_payments(seed: u64, n: usize) -> (Vec<Order>, Vec<Payment>) {
    orders_and_payments_lagging(seed, n, 800)
}

/// [`orders_and_payments`], both files up to `max_lag` ms out of order.
fn orders_and_payments_lagging(seed: u64, n: usize, max_lag: u64) -> (Vec<Order>, Vec<Payment>) {
    let mut rng = Rng(seed);
    let users = Zipf::new(50, 1.1);
    let mut clock = Clock {
        t: 0,
        step: 12,
        disorder_pct: 25,
        max_lag,
    };
    let mut orders = Vec::with_capacity(n);
    let mut paid_at: Vec<(u64, u64)> = Vec::new();
    for i in 0..n as u64 {
        let time_ms = clock.next(&mut rng);
        let order = 1_000 + i;
        orders.push(Order {
            order,
            user: users.sample(&mut rng),
            amount: 1 + rng.below(500) as i64,
            time_ms,
        });
        let payments = match rng.below(100) {
            0..=19 => 0,
            20..=89 => 1,
            _ => 2,
        };
        for _ in 0..payments {
            paid_at.push((clock.t + rng.below(4_000), order));
        }
        if rng.chance(3) {
            paid_at.push((clock.t + rng.below(2_000), 9_000_000 + i)); // unknown order
        }
    }
    paid_at.sort();
    let payments = paid_at
        .into_iter()
        .map(|(t, order)| Payment {
            order,
            // Sorted by t: lagging t by < max_lag ms.
            time_ms: if rng.chance(20) {
                t.saturating_sub(rng.below(max_lag))
            } else {
                t
            },
        })
        .collect();
    (orders, payments)
}

// ---------------------------------------------------------------------------
// Sequential references (rows in the order the test compares them)

/// Per 10-s window, best first: (window, rank, user, clicks) of the 3 users
/// with the most clicks (ties: the smaller user first).
fn clicks_top3_reference(clicks: &[Click]) -> Vec<(u64, u32, u64, u64)> {
    let mut counts: BTreeMap<u64, BTreeMap<u64, u64>> = BTreeMap::new();
    for c in clicks {
        *counts
            .entry(c.time_ms / 10_000 * 10_000)
            .or_default()
            .entry(c.user)
            .or_default() += 1;
    }
    let mut rows = Vec::new();
    for (w, users) in counts {
        let mut v: Vec<(u64, u64)> = users.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        rows.extend(
            (1..)
                .zip(v.into_iter().take(3))
                .map(|(rank, (u, c))| (w, rank, u, c)),
        );
    }
    rows
}

type UrlRow = (u64, String, f64, f64, u64);

/// Per 1-s window and URL: mean and max latency, distinct users; sorted by
/// (window, url).
fn url_stats_reference(visits: &[Visit]) -> Vec<UrlRow> {
    // (latency sum, visits, max latency, users)
    type Acc = (f64, u64, f64, BTreeSet<u64>);
    let mut m: BTreeMap<(u64, String), Acc> = BTreeMap::new();
    for v in visits {
        let e = m
            .entry((v.time_ms / 1_000 * 1_000, v.url.clone()))
            .or_insert((0.0, 0, f64::NEG_INFINITY, BTreeSet::new()));
        e.0 += v.latency_ms;
        e.1 += 1;
        e.2 = e.2.max(v.latency_ms);
        e.3.insert(v.user);
    }
    m.into_iter()
        .map(|((w, url), (sum, n, max, users))| (w, url, sum / n as f64, max, users.len() as u64))
        .collect()
}

/// Per 5-s window and user: the amounts of the orders whose payment fell
/// in the order's window (once per such payment); sorted by (window, user).
fn orders_payments_reference(orders: &[Order], payments: &[Payment]) -> Vec<(u64, u64, i64)> {
    let window = |t: u64| t / 5_000 * 5_000;
    let by_id: BTreeMap<u64, &Order> = orders.iter().map(|o| (o.order, o)).collect();
    let mut paid: BTreeMap<(u64, u64), i64> = BTreeMap::new();
    for p in payments {
        if let Some(o) = by_id.get(&p.order) {
            if window(o.time_ms) == window(p.time_ms) {
                *paid.entry((window(o.time_ms), o.user)).or_default() += o.amount;
            }
        }
    }
    paid.into_iter().map(|((w, u), s)| (w, u, s)).collect()
}

// ---------------------------------------------------------------------------
// Running the examples

/// The example programs this test runs.
const EXAMPLES: [&str; 6] = [
    "clicks_top3",
    "url_stats",
    "orders_payments",
    "live_clicks",
    "late_clicks",
    "ad_clicks_json",
];

/// `target/<profile>/examples/<name>`, next to this test's directory
/// (`target/<profile>/deps`). `cargo test` builds the examples, but
/// `cargo test --test examples_e2e` does not: when one is missing or
/// older than a source it is built from, they are built first, once per
/// test process, by [`build_examples`].
fn example(name: &str) -> PathBuf {
    static BUILT: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    let dir = profile_dir().join("examples");
    let path = |n: &str| dir.join(format!("{n}{}", std::env::consts::EXE_SUFFIX));
    let built = BUILT.get_or_init(|| {
        let newest = newest_source();
        let stale: Vec<&str> = EXAMPLES
            .into_iter()
            .filter(|n| modified(&path(n)).is_none_or(|t| t < newest))
            .collect();
        if stale.is_empty() {
            Ok(())
        } else {
            build_examples(&stale)
        }
    });
    if let Err(e) = built {
        panic!("{e}");
    }
    let p = path(name);
    assert!(p.is_file(), "{} is missing after the build", p.display());
    p
}

/// This test's `target/[<triple>/]<profile>` directory.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent()
        .and_then(Path::parent)
        .expect("the test binary is in target/<profile>/deps")
        .to_path_buf()
}

/// When `path` was last modified (`None`: it does not exist).
fn modified(path: &Path) -> Option<std::time::SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// The newest modification time of the files the examples are built from:
/// the manifests, `Cargo.lock`, build scripts, `examples/` and the `src/`
/// of this package and of the workspace crates it depends on.
fn newest_source() -> std::time::SystemTime {
    fn walk(p: &Path, newest: &mut std::time::SystemTime) {
        if p.is_file() {
            if let Some(t) = modified(p) {
                *newest = (*newest).max(t);
            }
        } else if let Ok(entries) = std::fs::read_dir(p) {
            for e in entries.flatten() {
                walk(&e.path(), newest);
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut newest = std::time::SystemTime::UNIX_EPOCH;
    walk(&root.join("Cargo.lock"), &mut newest);
    walk(&root.join("examples"), &mut newest);
    for krate in [".", "shm", "rdma", "runtime", "operators", "tools"] {
        for part in ["Cargo.toml", "build.rs", "src"] {
            walk(&root.join(krate).join(part), &mut newest);
        }
    }
    newest
}

/// Builds the examples with the profile, target directory, target triple
/// and features this test was built with (`cargo build --examples`), so
/// that the binaries run are those of the sources under test.
fn build_examples(stale: &[&str]) -> Result<(), String> {
    let profile_dir = profile_dir();
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev".to_string(),
        Some(p) => p.to_string(),
        None => return Err(format!("{}: no profile name", profile_dir.display())),
    };
    let mut target_dir = profile_dir.parent().unwrap().to_path_buf();
    // Cargo tags the root of its target directory; below it, a directory
    // named by the triple when built with `--target`.
    let mut triple = None;
    if !target_dir.join("CACHEDIR.TAG").exists() {
        if let Some(up) = target_dir
            .parent()
            .filter(|d| d.join("CACHEDIR.TAG").exists())
        {
            triple = target_dir.file_name().map(|t| t.to_owned());
            target_dir = up.to_path_buf();
        }
    }
    let mut features = Vec::new();
    if cfg!(feature = "mpi") {
        features.push("mpi");
    }
    if cfg!(feature = "hwloc") {
        features.push("hwloc");
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(&cargo);
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["build", "--examples", "-p", "air", "--profile", &profile])
        .arg("--target-dir")
        .arg(&target_dir);
    if let Some(t) = &triple {
        cmd.arg("--target").arg(t);
    }
    if !features.is_empty() {
        cmd.args(["--features", &features.join(",")]);
    }
    eprintln!(
        "examples_e2e: {} missing or older than the sources; building: {cmd:?}",
        stale.join(", ")
    );
    let o = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{cargo:?}: {e}"))?;
    if o.status.success() {
        Ok(())
    } else {
        Err(format!(
            "building the examples failed ({cmd:?}, {}):\n{}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        ))
    }
}

/// Waits for `child` up to `LIMIT`; kills it (and fails) on a hang.
fn wait(child: std::process::Child, what: &str) -> Output {
    let pid = child.id();
    let start = Instant::now();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(LIMIT) {
        Ok(out) => out.expect("wait for the example"),
        Err(_) => {
            // SAFETY: plain kill of the process this test started.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("{what} hung for {:?}", start.elapsed());
        }
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Runs `cmd` (an example, or a launcher of one) with `env` set and the
/// other job variables unset.
fn run_cmd(mut cmd: Command, env: &[(&str, &str)], what: &str) -> Output {
    for v in JOB_ENV {
        cmd.env_remove(v);
    }
    cmd.envs(env.iter().copied());
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap_or_else(|e| panic!("start {what}: {e}"));
    wait(child, what)
}

/// Runs example `name` with `args` and `env` on this machine.
fn run_example(name: &str, args: &[&Path], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(example(name));
    cmd.args(args);
    run_cmd(cmd, env, &format!("{name} {args:?} {env:?}"))
}

/// Runs example `name` under `mpirun -np np`.
#[cfg(feature = "mpi")]
fn mpirun_example(np: usize, name: &str, args: &[&Path], env: &[(&str, &str)]) -> Output {
    let mut cmd = air_rdma::mpirun_command(np);
    cmd.arg(example(name)).args(args);
    run_cmd(
        cmd,
        env,
        &format!("mpirun -np {np} {name} {args:?} {env:?}"),
    )
}

/// The output file's header line and its rows (fields as strings).
fn read_output(path: &Path, o: &Output) -> (String, Vec<csv::StringRecord>) {
    let text_out = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}\n{}", path.display(), text(o)));
    let header = text_out.lines().next().unwrap_or_default().to_string();
    let mut r = csv::Reader::from_reader(text_out.as_bytes());
    let rows = r.records().map(|r| r.unwrap()).collect();
    (header, rows)
}

fn num<T: std::str::FromStr>(r: &csv::StringRecord, i: usize) -> T
where
    T::Err: std::fmt::Debug,
{
    r[i].parse()
        .unwrap_or_else(|e| panic!("field {i} of {r:?}: {e:?}"))
}

// ---------------------------------------------------------------------------
// One input per example, and the check of one run

/// Checks a run's output file (the run's output and name for messages).
type Check = Box<dyn Fn(&Path, &Output, &str)>;

/// An example's input files and what a run must write.
struct Case {
    dir: common::TmpDir,
    name: &'static str,
    inputs: Vec<PathBuf>,
    check: Check,
}

impl Case {
    /// Runs the example (`launch` starts it: embedded or under mpirun) and
    /// checks its output; `tag` names the run.
    fn check_run(&self, tag: &str, launch: impl FnOnce(&str, &[&Path]) -> Output) {
        let out = self.dir.join(format!("{tag}.csv"));
        let mut args: Vec<&Path> = self.inputs.iter().map(PathBuf::as_path).collect();
        args.push(&out);
        let o = launch(self.name, &args);
        assert!(o.status.success(), "{} {tag}: {}", self.name, text(&o));
        (self.check)(&out, &o, &format!("{} {tag}", self.name));
    }

    fn embedded(&self, workers: usize, extra: &[(&str, &str)]) {
        let w = workers.to_string();
        let mut env = vec![("AIR_WORKERS", w.as_str())];
        env.extend_from_slice(extra);
        let tag = format!(
            "w{workers}{}",
            extra
                .iter()
                .map(|(k, v)| format!("-{k}{v}"))
                .collect::<String>()
        );
        self.check_run(&tag, |name, args| run_example(name, args, &env));
    }
}

fn clicks_case() -> Case {
    let dir = common::tmpdir("examples", "clicks");
    let input = dir.join("clicks.csv");
    let data = clicks(0xc11c_5eed, 20_000);
    write_csv(&input, &data);
    let want = clicks_top3_reference(&data);
    assert!(want.len() >= 3 * 15, "{} reference rows", want.len());
    Case {
        dir,
        name: "clicks_top3",
        inputs: vec![input],
        check: Box::new(move |out, o, what| {
            let (header, rows) = read_output(out, o);
            assert_eq!(header, "window_start,rank,user,clicks", "{what}");
            let mut got: Vec<(u64, u32, u64, u64)> = rows
                .iter()
                .map(|r| (num(r, 0), num(r, 1), num(r, 2), num(r, 3)))
                .collect();
            // Windows may arrive in any order; a window's rows keep theirs
            // (best first): a stable sort by window only.
            got.sort_by_key(|r| r.0);
            assert_eq!(
                got, want,
                "{what}: rows differ from the sequential reference"
            );
        }),
    }
}

fn url_stats_case() -> Case {
    let dir = common::tmpdir("examples", "urls");
    let input = dir.join("visits.csv");
    let data = visits(0x0e1_5eed, 15_000);
    write_csv(&input, &data);
    let want = url_stats_reference(&data);
    assert!(want.len() > 300, "{} reference rows", want.len());
    Case {
        dir,
        name: "url_stats",
        inputs: vec![input],
        check: Box::new(move |out, o, what| {
            let (header, rows) = read_output(out, o);
            assert_eq!(
                header, "window_start,url,mean_latency_ms,max_latency_ms,distinct_users",
                "{what}"
            );
            let mut got: Vec<UrlRow> = rows
                .iter()
                .map(|r| (num(r, 0), r[1].to_string(), num(r, 2), num(r, 3), num(r, 4)))
                .collect();
            got.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
            // Exact: latencies are whole numbers, so every sum is exact and
            // the mean is the same division; the CSV's shortest float text
            // parses back to the same f64.
            assert_eq!(got.len(), want.len(), "{what}: rows");
            for (g, w) in got.iter().zip(&want) {
                assert_eq!(g, w, "{what}");
            }
        }),
    }
}

fn orders_case(seed: u64, n: usize) -> Case {
    let dir = common::tmpdir("examples", "orders");
    let (orders_in, payments_in) = (dir.join("orders.csv"), dir.join("payments.csv"));
    let (orders, payments) = orders_and_payments(seed, n);
    write_csv(&orders_in, &orders);
    write_csv(&payments_in, &payments);
    let want = orders_payments_reference(&orders, &payments);
    assert!(want.len() > 100, "{} reference rows", want.len());
    Case {
        dir,
        name: "orders_payments",
        inputs: vec![orders_in, payments_in],
        check: Box::new(move |out, o, what| {
            let (header, rows) = read_output(out, o);
            assert_eq!(header, "window_start,user,paid", "{what}");
            let mut got: Vec<(u64, u64, i64)> = rows
                .iter()
                .map(|r| (num(r, 0), num(r, 1), num(r, 2)))
                .collect();
            got.sort();
            assert_eq!(
                got, want,
                "{what}: rows differ from the sequential reference"
            );
        }),
    }
}

// ---------------------------------------------------------------------------
// Embedded runs

#[test]
fn clicks_top3_equals_the_sequential_top3_on_1_2_4_workers() {
    let case = clicks_case();
    for w in [1, 2, 4] {
        case.embedded(w, &[]);
    }
    // The smallest rings: every edge backpressured.
    case.embedded(3, &[("AIR_RING_BYTES", "4096")]);
}

#[test]
fn url_stats_equals_the_sequential_stats_on_1_2_4_workers() {
    let case = url_stats_case();
    for w in [1, 2, 4] {
        case.embedded(w, &[]);
    }
    case.embedded(2, &[("AIR_RING_BYTES", "4096")]);
}

#[test]
fn orders_payments_equals_the_sequential_join_on_1_2_4_workers() {
    let case = orders_case(0x0dde_5eed, 8_000);
    for w in [1, 2, 4] {
        case.embedded(w, &[]);
    }
    case.embedded(4, &[("AIR_RING_BYTES", "4096")]);
}

/// A clicks file of 40 rows whose line 7 (row 5: line 1 is the header)
/// has `abc` for its time.
fn bad_clicks(dir: &Path) -> PathBuf {
    let input = dir.join("bad_clicks.csv");
    let mut text_in = String::from("user,time_ms\n");
    for (i, c) in clicks(7, 40).iter().enumerate() {
        if i == 5 {
            text_in += &format!("{},abc\n", c.user);
        } else {
            text_in += &format!("{},{}\n", c.user, c.time_ms);
        }
    }
    std::fs::write(&input, text_in).unwrap();
    input
}

/// The run failed, and its stderr names the file, line 7 and `time_ms`
/// (`path:7: field `time_ms`: …`).
fn assert_names_the_bad_row(o: &Output, input: &Path, what: &str) {
    assert!(!o.status.success(), "{what}: {}", text(o));
    let err = String::from_utf8_lossy(&o.stderr);
    let at = format!("{}:7: ", input.display());
    for part in [at.as_str(), "field `time_ms`"] {
        assert!(
            err.contains(part),
            "{what}: stderr does not name {part:?}:\n{}",
            text(o)
        );
    }
}

#[test]
fn a_bad_row_stops_the_example_naming_file_line_and_field() {
    let dir = common::tmpdir("examples", "bad");
    let input = bad_clicks(&dir);
    for w in ["1", "2", "4"] {
        let out = dir.join(format!("out{w}.csv"));
        let o = run_example("clicks_top3", &[&input, &out], &[("AIR_WORKERS", w)]);
        assert_names_the_bad_row(&o, &input, &format!("workers {w}"));
    }
}

// ---------------------------------------------------------------------------
// Under mpirun (feature `mpi`)

#[cfg(feature = "mpi")]
mod mpi {
    use super::*;

    fn on_ranks(case: &Case, np: usize, env: &[(&str, &str)]) {
        let tag = format!(
            "np{np}{}",
            env.iter()
                .map(|(k, v)| format!("-{k}{v}"))
                .collect::<String>()
        );
        case.check_run(&tag, |name, args| mpirun_example(np, name, args, env));
    }

    const NODE: &[(&str, &str)] = &[("AIR_WORKERS", "1")];
    const NETWORK: &[(&str, &str)] = &[("AIR_WORKERS", "1"), ("AIR_FORCE_NETWORK", "1")];

    #[test]
    fn clicks_top3_under_mpirun_on_the_node_and_network_tiers() {
        let case = clicks_case();
        on_ranks(&case, 2, NODE);
        on_ranks(&case, 2, NETWORK);
    }

    #[test]
    fn url_stats_under_mpirun_on_the_node_and_network_tiers() {
        let case = url_stats_case();
        on_ranks(&case, 2, NODE);
        on_ranks(&case, 2, NETWORK);
    }

    /// Under `mpirun -np 2` on `tier`: every rank ends (none hangs), the
    /// launcher exits non-zero, and stderr names the file, the line and
    /// the field.
    fn bad_row_under_mpirun(tier: &str, env: &[(&str, &str)]) {
        let dir = common::tmpdir("examples", "badmpi");
        let input = bad_clicks(&dir);
        let out = dir.join("out.csv");
        let o = mpirun_example(2, "clicks_top3", &[&input, &out], env);
        assert_names_the_bad_row(&o, &input, &format!("mpirun -np 2, {tier} tier"));
    }

    #[test]
    fn a_bad_row_under_mpirun_on_the_node_tier_names_file_line_and_field() {
        bad_row_under_mpirun("node", NODE);
    }

    #[test]
    fn a_bad_row_under_mpirun_on_the_network_tier_ends_naming_file_line_and_field() {
        bad_row_under_mpirun("network", NETWORK);
    }

    #[test]
    fn orders_payments_under_mpirun_on_2_and_3_ranks() {
        let case = orders_case(0x0dde_5eed, 8_000);
        on_ranks(&case, 2, NODE);
        on_ranks(&case, 2, NETWORK);
        // A window join followed by an aggregate on three ranks.
        on_ranks(&case, 3, NODE);
        on_ranks(&case, 3, NETWORK);
    }
}

// ---------------------------------------------------------------------------
// A live input: examples/live_clicks.rs reads JSON-lines clicks from its
// standard input (a pipe written by this test).

/// Clicks in time order over `windows` 1-s windows (a few ms apart, up
/// to 300 ms out of order, inside the example's 500 ms delay): (user,
/// time ms).
fn live_clicks(windows: u64) -> Vec<(u64, u64)> {
    let mut rng = Rng(0x11fe_c11c);
    let mut out = Vec::new();
    let mut t = 0;
    while t < windows * 1_000 {
        let jitter = rng.below(300);
        out.push((rng.below(7), t.saturating_sub(jitter)));
        t += 1 + rng.below(6);
    }
    out
}

/// The example's rows for `clicks`: per window (by start) and user, the
/// clicks, ordered by window then user.
fn live_clicks_reference(clicks: &[(u64, u64)]) -> Vec<String> {
    let mut n: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    for &(user, t) in clicks {
        *n.entry((t / 1_000 * 1_000, user)).or_default() += 1;
    }
    n.into_iter()
        .map(|((w, u), c)| format!("{w},{u},{c}"))
        .collect()
}

/// Two workers read clicks from a pipe: the rows of the first windows come
/// out while the input is still open (streaming, not at the end), and
/// every row equals the sequential count.
#[test]
fn live_clicks_from_a_pipe_emits_windows_as_they_close() {
    use std::io::{BufRead, BufReader, Write};
    let clicks = live_clicks(6);
    let expected = live_clicks_reference(&clicks);
    let mut cmd = Command::new(example("live_clicks"));
    for v in JOB_ENV {
        cmd.env_remove(v);
    }
    let mut child = cmd
        .env("AIR_WORKERS", "2")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start live_clicks");
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rows) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    // The first four windows in one write: the reader, reading faster
    // than the input comes, cuts what it read into one piece per worker,
    // so both workers' watermarks move (a worker handed nothing would
    // hold every window back until the input ends).
    let split = clicks.partition_point(|&(_, t)| t < 4_000);
    let mut s = String::new();
    for (u, t) in &clicks[..split] {
        s += &format!("{{\"user\": {u}, \"time_ms\": {t}}}\n");
    }
    stdin.write_all(s.as_bytes()).unwrap();
    stdin.flush().unwrap();
    // Window 0 closes once both workers' watermarks pass 1 500 ms: its
    // rows (and the header) come before the rest of the input is written.
    let mut got = Vec::new();
    let deadline = Instant::now() + LIMIT;
    while !got.iter().any(|l: &String| l.starts_with("1000,")) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rows.recv_timeout(left) {
            Ok(l) => got.push(l),
            Err(_) => {
                let _ = child.kill();
                panic!("no row of window 1000 while the input was open: {got:?}");
            }
        }
    }
    assert_eq!(got[0], "window_start,user,clicks");
    let mut s = String::new();
    for (u, t) in &clicks[split..] {
        s += &format!("{{\"user\": {u}, \"time_ms\": {t}}}\n");
    }
    stdin.write_all(s.as_bytes()).unwrap();
    drop(stdin);
    let out = wait(child, "live_clicks");
    reader.join().unwrap();
    got.extend(rows.try_iter());
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(got[1..], expected[..], "{}", text(&out));
}

/// A line that is not a click stops the job with an error naming the
/// stream (`-`), the line, the column and the line's byte offset.
#[test]
fn live_clicks_bad_line_names_stream_line_and_offset() {
    use std::io::Write;
    let good = "{\"user\": 1, \"time_ms\": 10}\n";
    let mut cmd = Command::new(example("live_clicks"));
    for v in JOB_ENV {
        cmd.env_remove(v);
    }
    let mut child = cmd
        .env("AIR_WORKERS", "2")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start live_clicks");
    let mut stdin = child.stdin.take().unwrap();
    let input = format!("{good}{good}{good}{{\"user\": \"one\", \"time_ms\": 20}}\n{good}");
    stdin.write_all(input.as_bytes()).unwrap();
    drop(stdin);
    let out = wait(child, "live_clicks");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{}", text(&out));
    let offset = 3 * good.len();
    assert!(
        err.contains(&format!("-:4: column 14: invalid type: string \"one\", expected u64 (line at byte offset {offset})")),
        "{err}"
    );
}

// ---------------------------------------------------------------------------
// Data out of order by more than the examples' default delay, and SQLite
// (the `sqlite3` command) as the reference: the first run, with the
// default delay, exits 0 and names its late records and a delay that
// keeps them; the second, with that delay (`MAX_DELAY_MS`), writes exactly
// the rows SQL computes from the same input.

/// A table SQLite reads from a CSV file with a header.
struct Table {
    /// `CREATE TABLE …;` (typed columns, so numbers compare as numbers).
    create: &'static str,
    name: &'static str,
    csv: PathBuf,
}

/// Runs `query` with `sqlite3` on `tables` (in memory) and returns its
/// rows, fields as SQLite prints them in CSV mode.
fn sqlite(tables: &[Table], query: &str) -> Vec<Vec<String>> {
    use std::io::Write;
    let mut script = String::from(".bail on\n.mode csv\n.headers off\n");
    for t in tables {
        script += &format!(
            "{}\n.import --csv --skip 1 \"{}\" {}\n",
            t.create,
            t.csv.display(),
            t.name
        );
    }
    script += query;
    script += "\n";
    let mut child = Command::new("sqlite3")
        .args(["-batch", ":memory:"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("sqlite3 (the reference of these tests; Debian package sqlite3): {e}")
        });
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let o = wait(child, "sqlite3");
    assert!(o.status.success(), "sqlite3 on\n{script}\n{}", text(&o));
    csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(&o.stdout[..])
        .records()
        .map(|r| r.unwrap().iter().map(str::to_string).collect())
        .collect()
}

/// How a column of an example's rows compares.
#[derive(Clone, Copy)]
enum Col {
    /// Text as written (integers, strings).
    Text,
    /// A float: equal if it parses to the same f64.
    Float,
}

/// Rows in a canonical form: floats parsed (and printed back in Rust's
/// shortest form, one text per f64); `in_window_order`: rows stable-sorted
/// by their window (column 0), keeping each window's order, else sorted.
fn canonical(rows: Vec<Vec<String>>, cols: &[Col], in_window_order: bool) -> Vec<Vec<String>> {
    let mut rows: Vec<Vec<String>> = rows
        .into_iter()
        .map(|r| {
            assert_eq!(r.len(), cols.len(), "row {r:?}");
            r.into_iter()
                .zip(cols)
                .map(|(f, c)| match c {
                    Col::Text => f,
                    Col::Float => {
                        let x: f64 = f.parse().unwrap_or_else(|e| panic!("{f:?}: {e}"));
                        format!("{x:?}")
                    }
                })
                .collect()
        })
        .collect();
    if in_window_order {
        rows.sort_by_key(|r| r[0].parse::<u64>().expect("a window start"));
    } else {
        rows.sort();
    }
    rows
}

/// What a run said about late records on stderr: per operator label, the
/// records (summed over ranks), and the largest delay suggested.
#[derive(Debug, Default)]
struct LateSaid {
    records: BTreeMap<String, u64>,
    suggested_ms: Option<u64>,
}

impl LateSaid {
    /// Parses `air: [rank R: ]N late record(s) at the LABEL (first: …)` and
    /// `air: [rank R: ]records came up to D ms behind the newest event
    /// time: …` lines.
    fn of(o: &Output) -> LateSaid {
        let mut said = LateSaid::default();
        for line in String::from_utf8_lossy(&o.stderr).lines() {
            let Some(rest) = line.strip_prefix("air: ") else {
                continue;
            };
            let rest = match rest.strip_prefix("rank ") {
                Some(r) => r.split_once(": ").map_or(r, |(_, r)| r),
                None => rest,
            };
            if let Some((n, label)) = rest.split_once(" late record(s) at the ") {
                let n: u64 = n.parse().unwrap_or_else(|e| panic!("{line:?}: {e}"));
                let label = label.split(" (first: ").next().unwrap().to_string();
                *said.records.entry(label).or_default() += n;
            } else if let Some(d) = rest.strip_prefix("records came up to ") {
                let d: u64 = d
                    .split(' ')
                    .next()
                    .and_then(|d| d.parse().ok())
                    .unwrap_or_else(|| panic!("no delay in {line:?}"));
                assert!(
                    rest.contains(&format!("of {d} or more")),
                    "the suggestion names the delay: {line:?}"
                );
                said.suggested_ms = Some(said.suggested_ms.map_or(d, |s| s.max(d)));
            }
        }
        said
    }

    fn total(&self) -> u64 {
        self.records.values().sum()
    }
}

/// Which records of one source are late for tumbling windows of
/// `window_ms` at one worker reading the whole file in order: the
/// watermark at a record is the newest event time before it − `delay_ms`,
/// and a record is late iff its window's end + `lateness_ms` is at or
/// before that watermark.
fn late_flags(times: &[u64], window_ms: u64, delay_ms: u64, lateness_ms: u64) -> Vec<bool> {
    let mut newest = 0u64;
    times
        .iter()
        .map(|&t| {
            let wm = newest.saturating_sub(delay_ms);
            newest = newest.max(t);
            t / window_ms * window_ms + window_ms + lateness_ms <= wm
        })
        .collect()
}

/// `rows` without those flagged late.
fn on_time<R: Clone>(rows: &[R], late: &[bool]) -> Vec<R> {
    rows.iter()
        .zip(late)
        .filter(|(_, &l)| !l)
        .map(|(r, _)| r.clone())
        .collect()
}

/// One example, its inputs (out of order by more than its default delay)
/// and the SQL that computes its rows.
struct SqlCase {
    dir: common::TmpDir,
    name: &'static str,
    /// The example's input files (its arguments before the output file).
    inputs: Vec<PathBuf>,
    /// The SQL's tables: the same files.
    tables: Vec<Table>,
    /// The SQL's tables at one worker without the records late there at the
    /// default delay.
    on_time_tables: Vec<Table>,
    /// Records late at one worker with the default delay.
    late_at_one_worker: u64,
    query: &'static str,
    cols: &'static [Col],
    header: &'static str,
    /// Rows compared in each window's order (top-3: best first).
    in_window_order: bool,
    /// The start of the label of the operator that judges lateness.
    judge: &'static str,
}

impl SqlCase {
    /// The example's rows (canonical) written to `out`.
    fn rows(&self, out: &Path, o: &Output) -> Vec<Vec<String>> {
        let (header, rows) = read_output(out, o);
        assert_eq!(header, self.header, "{}", self.name);
        let rows = rows
            .iter()
            .map(|r| r.iter().map(str::to_string).collect())
            .collect();
        canonical(rows, self.cols, self.in_window_order)
    }

    fn sql(&self, tables: &[Table]) -> Vec<Vec<String>> {
        canonical(sqlite(tables, self.query), self.cols, self.in_window_order)
    }

    /// Runs the example with the default delay, then with the delay its
    /// summary suggests; `launch` starts it (with extra environment), `tag`
    /// names the runs and `workers` is the total worker count.
    fn check(
        &self,
        tag: &str,
        workers: usize,
        launch: impl Fn(&str, &[&Path], &[(&str, &str)]) -> Output,
    ) {
        let what = format!("{} {tag}", self.name);
        let want = self.sql(&self.tables);
        assert!(want.len() > 30, "{what}: {} SQL rows", want.len());
        let run = |file: &str, env: &[(&str, &str)]| {
            let out = self.dir.join(format!("{tag}-{file}.csv"));
            let mut args: Vec<&Path> = self.inputs.iter().map(PathBuf::as_path).collect();
            args.push(&out);
            let o = launch(self.name, &args, env);
            assert!(o.status.success(), "{what}: {}", text(&o));
            let rows = self.rows(&out, &o);
            (o, rows)
        };

        // The default delay: late records, named, and a delay suggested.
        let (o, rows) = run("default", &[]);
        let said = LateSaid::of(&o);
        let file = format!("examples/{}.rs:", self.name);
        assert!(
            said.records
                .keys()
                .any(|l| l.starts_with(self.judge) && l.contains(&file)),
            "{what}: no late-records line of the {} at {file}: {said:?}\n{}",
            self.judge,
            text(&o)
        );
        assert!(said.total() > 0, "{what}: {said:?}");
        let Some(delay) = said.suggested_ms else {
            panic!("{what}: no suggested delay\n{}", text(&o));
        };
        if workers == 1 {
            // At one worker the late records are known: the rows are SQL's
            // over the others, and the count printed is theirs.
            assert_eq!(said.total(), self.late_at_one_worker, "{what}: {said:?}");
            assert_eq!(
                rows,
                self.sql(&self.on_time_tables),
                "{what}: rows differ from SQL over the records on time"
            );
            assert_ne!(rows, want, "{what}: late records changed no row");
        }

        // The suggested delay: no record late, SQL's rows.
        let d = delay.to_string();
        let (o, rows) = run("suggested", &[("MAX_DELAY_MS", d.as_str())]);
        let said = LateSaid::of(&o);
        assert!(
            said.records.is_empty() && said.suggested_ms.is_none(),
            "{what}: late records with MAX_DELAY_MS={d}: {said:?}\n{}",
            text(&o)
        );
        assert_eq!(rows.len(), want.len(), "{what}: rows with MAX_DELAY_MS={d}");
        for (g, w) in rows.iter().zip(&want) {
            assert_eq!(
                g, w,
                "{what}: a row with MAX_DELAY_MS={d} differs from SQL's"
            );
        }
    }

    fn embedded(&self, workers: usize) {
        let w = workers.to_string();
        self.check(&format!("w{workers}"), workers, |name, args, env| {
            let mut env = env.to_vec();
            env.push(("AIR_WORKERS", &w));
            run_example(name, args, &env)
        });
    }

    /// Under `mpirun -np 2`, one worker per rank.
    #[cfg(feature = "mpi")]
    fn on_two_ranks(&self) {
        self.check("np2", 2, |name, args, env| {
            let mut env = env.to_vec();
            env.push(("AIR_WORKERS", "1"));
            mpirun_example(2, name, args, &env)
        });
    }
}

const CLICKS_TABLE: &str = "CREATE TABLE clicks(user INTEGER, time_ms INTEGER);";

/// Clicks up to 12 s out of order (the example waits 5 s by default).
fn clicks_sql_case() -> SqlCase {
    let dir = common::tmpdir("examples", "clicks-sql");
    let data = clicks_lagging(0x5c1_c11c, 20_000, 12_000);
    let times: Vec<u64> = data.iter().map(|c| c.time_ms).collect();
    let late = late_flags(&times, 10_000, 5_000, 0);
    let (all, ok) = (dir.join("clicks.csv"), dir.join("clicks-on-time.csv"));
    write_csv(&all, &data);
    write_csv(&ok, &on_time(&data, &late));
    let table = |csv: &Path| Table {
        create: CLICKS_TABLE,
        name: "clicks",
        csv: csv.to_path_buf(),
    };
    SqlCase {
        name: "clicks_top3",
        inputs: vec![all.clone()],
        tables: vec![table(&all)],
        on_time_tables: vec![table(&ok)],
        late_at_one_worker: late.iter().filter(|&&l| l).count() as u64,
        // Ties: the smaller user first, as the example's top_n.
        query: "WITH counts AS (
                  SELECT time_ms / 10000 * 10000 AS w, user, COUNT(*) AS clicks
                  FROM clicks GROUP BY w, user),
                ranked AS (
                  SELECT w, user, clicks,
                         ROW_NUMBER() OVER (PARTITION BY w ORDER BY clicks DESC, user ASC) AS rn
                  FROM counts)
                SELECT w, rn, user, clicks FROM ranked WHERE rn <= 3 ORDER BY w, rn;",
        cols: &[Col::Text, Col::Text, Col::Text, Col::Text],
        header: "window_start,rank,user,clicks",
        in_window_order: true,
        judge: "window at",
        dir,
    }
}

const VISITS_TABLE: &str =
    "CREATE TABLE visits(url TEXT, user INTEGER, latency_ms REAL, time_ms INTEGER);";

/// Visits up to 5 s out of order (the example waits 2 s by default).
fn url_stats_sql_case() -> SqlCase {
    let dir = common::tmpdir("examples", "urls-sql");
    let data = visits_lagging(0x0e1_5c1, 15_000, 5_000);
    let times: Vec<u64> = data.iter().map(|v| v.time_ms).collect();
    let late = late_flags(&times, 1_000, 2_000, 0);
    let (all, ok) = (dir.join("visits.csv"), dir.join("visits-on-time.csv"));
    write_csv(&all, &data);
    write_csv(&ok, &on_time(&data, &late));
    let table = |csv: &Path| Table {
        create: VISITS_TABLE,
        name: "visits",
        csv: csv.to_path_buf(),
    };
    SqlCase {
        name: "url_stats",
        inputs: vec![all.clone()],
        tables: vec![table(&all)],
        on_time_tables: vec![table(&ok)],
        late_at_one_worker: late.iter().filter(|&&l| l).count() as u64,
        // 17 significant digits: every f64 exactly (SQLite prints 15).
        query: "SELECT time_ms / 1000 * 1000 AS w, url,
                       printf('%!.17g', AVG(latency_ms)), printf('%!.17g', MAX(latency_ms)),
                       COUNT(DISTINCT user)
                FROM visits GROUP BY w, url;",
        cols: &[Col::Text, Col::Text, Col::Float, Col::Float, Col::Text],
        header: "window_start,url,mean_latency_ms,max_latency_ms,distinct_users",
        in_window_order: false,
        judge: "window at",
        dir,
    }
}

const ORDERS_TABLE: &str =
    "CREATE TABLE orders(\"order\" INTEGER, user INTEGER, amount INTEGER, time_ms INTEGER);";
const PAYMENTS_TABLE: &str = "CREATE TABLE payments(\"order\" INTEGER, time_ms INTEGER);";

/// Orders and payments up to 3 s out of order (the example waits 1 s by
/// default).
fn orders_sql_case() -> SqlCase {
    let dir = common::tmpdir("examples", "orders-sql");
    let (orders, payments) = orders_and_payments_lagging(0x0dde_05c1, 8_000, 3_000);
    let late_o = late_flags(
        &orders.iter().map(|o| o.time_ms).collect::<Vec<_>>(),
        5_000,
        1_000,
        0,
    );
    let late_p = late_flags(
        &payments.iter().map(|p| p.time_ms).collect::<Vec<_>>(),
        5_000,
        1_000,
        0,
    );
    let files = [
        "orders.csv",
        "payments.csv",
        "orders-ok.csv",
        "payments-ok.csv",
    ]
    .map(|f| dir.join(f));
    write_csv(&files[0], &orders);
    write_csv(&files[1], &payments);
    write_csv(&files[2], &on_time(&orders, &late_o));
    write_csv(&files[3], &on_time(&payments, &late_p));
    let tables = |o: &Path, p: &Path| {
        vec![
            Table {
                create: ORDERS_TABLE,
                name: "orders",
                csv: o.to_path_buf(),
            },
            Table {
                create: PAYMENTS_TABLE,
                name: "payments",
                csv: p.to_path_buf(),
            },
        ]
    };
    SqlCase {
        name: "orders_payments",
        inputs: vec![files[0].clone(), files[1].clone()],
        tables: tables(&files[0], &files[1]),
        on_time_tables: tables(&files[2], &files[3]),
        late_at_one_worker: (late_o.iter().chain(&late_p).filter(|&&l| l).count()) as u64,
        // A payment counts in its order's 5-s window (once per payment).
        query: "SELECT o.time_ms / 5000 * 5000 AS w, o.user, SUM(o.amount)
                FROM orders o JOIN payments p
                  ON p.\"order\" = o.\"order\" AND p.time_ms / 5000 = o.time_ms / 5000
                GROUP BY w, o.user;",
        cols: &[Col::Text, Col::Text, Col::Text],
        header: "window_start,user,paid",
        in_window_order: false,
        judge: "windowed join at",
        dir,
    }
}

#[test]
fn clicks_top3_out_of_order_names_late_clicks_then_equals_sql_at_the_suggested_delay() {
    let case = clicks_sql_case();
    case.embedded(1);
    case.embedded(2);
}

#[test]
fn url_stats_out_of_order_names_late_visits_then_equals_sql_at_the_suggested_delay() {
    let case = url_stats_sql_case();
    case.embedded(1);
    case.embedded(2);
}

#[test]
fn orders_payments_out_of_order_names_late_records_then_equals_sql_at_the_suggested_delay() {
    let case = orders_sql_case();
    case.embedded(1);
    case.embedded(2);
}

#[cfg(feature = "mpi")]
mod mpi_sql {
    use super::*;

    #[test]
    fn clicks_top3_out_of_order_under_mpirun_equals_sql_at_the_suggested_delay() {
        clicks_sql_case().on_two_ranks();
    }

    #[test]
    fn url_stats_out_of_order_under_mpirun_equals_sql_at_the_suggested_delay() {
        url_stats_sql_case().on_two_ranks();
    }

    #[test]
    fn orders_payments_out_of_order_under_mpirun_equals_sql_at_the_suggested_delay() {
        orders_sql_case().on_two_ranks();
    }
}

// ---------------------------------------------------------------------------
// examples/late_clicks.rs: 10-s windows with 5 s of allowed lateness after
// a 2-s watermark delay; clicks too late even for that go to a file.

/// The example's rows: the last row of each (window, user) (a window that
/// fired again supersedes its earlier rows) and the late clicks (user,
/// time), sorted.
#[allow(clippy::type_complexity)]
fn late_clicks_outputs(
    counts: &Path,
    late: &Path,
    o: &Output,
) -> (BTreeMap<(u64, u64), u64>, Vec<(u64, u64)>) {
    let (header, rows) = read_output(counts, o);
    assert_eq!(header, "window_start,user,clicks");
    let mut last = BTreeMap::new();
    for r in &rows {
        last.insert((num(r, 0), num(r, 1)), num(r, 2));
    }
    let (header, rows) = read_output(late, o);
    assert_eq!(header, "user,time_ms");
    let mut late: Vec<(u64, u64)> = rows.iter().map(|r| (num(r, 0), num(r, 1))).collect();
    late.sort();
    (last, late)
}

#[test]
fn late_clicks_puts_every_click_in_a_count_or_the_late_file() {
    let dir = common::tmpdir("examples", "late");
    // Up to 12 s out of order: some clicks within the 5 s of lateness after
    // their window closed, some later still.
    let data = clicks_lagging(0x1a7e_c11c, 20_000, 12_000);
    let input = dir.join("clicks.csv");
    write_csv(&input, &data);
    let window = |t: u64| t / 10_000 * 10_000;
    let mut all: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    for c in &data {
        *all.entry((window(c.time_ms), c.user)).or_default() += 1;
    }
    // At one worker: which clicks are too late (end + 5 s at or before the
    // watermark, the newest time before − 2 s), and which only late for
    // the window's first firing (behind the watermark, window closed).
    let times: Vec<u64> = data.iter().map(|c| c.time_ms).collect();
    let too_late = late_flags(&times, 10_000, 2_000, 5_000);
    let closed = late_flags(&times, 10_000, 2_000, 0);
    let n_late = too_late.iter().filter(|&&l| l).count();
    let n_within = closed.iter().filter(|&&l| l).count() - n_late;
    assert!(
        n_late > 20 && n_within > 20,
        "{n_late} too late, {n_within} within the lateness"
    );
    let mut want_late: Vec<(u64, u64)> = data
        .iter()
        .zip(&too_late)
        .filter(|(_, &l)| l)
        .map(|(c, _)| (c.user, c.time_ms))
        .collect();
    want_late.sort();
    let mut want_counts: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    for (c, _) in data.iter().zip(&too_late).filter(|(_, &l)| !l) {
        *want_counts.entry((window(c.time_ms), c.user)).or_default() += 1;
    }

    for workers in [1, 2] {
        let what = format!("late_clicks at {workers} worker(s)");
        let counts = dir.join(format!("counts{workers}.csv"));
        let late = dir.join(format!("late{workers}.csv"));
        let w = workers.to_string();
        let o = run_example(
            "late_clicks",
            &[&input, &counts, &late],
            &[("AIR_WORKERS", &w)],
        );
        assert!(o.status.success(), "{what}: {}", text(&o));
        let (got, got_late) = late_clicks_outputs(&counts, &late, &o);
        // Every click in exactly one place: its (window, user) count or the
        // late file.
        let mut placed = got.clone();
        for &(user, t) in &got_late {
            *placed.entry((window(t), user)).or_default() += 1;
        }
        assert_eq!(placed, all, "{what}: counts + late clicks != the input");
        // The engine's summary names the late clicks, as many as the file.
        let said = LateSaid::of(&o);
        assert_eq!(
            said.total(),
            got_late.len() as u64,
            "{what}: {said:?}\n{}",
            text(&o)
        );
        assert!(
            said.records
                .keys()
                .all(|l| l.starts_with("window at examples/late_clicks.rs:")),
            "{what}: {said:?}"
        );
        assert!(said.suggested_ms.is_some(), "{what}: {}", text(&o));
        if workers == 1 {
            assert_eq!(got_late, want_late, "{what}: late clicks");
            assert_eq!(got, want_counts, "{what}: counts");
        } else {
            assert!(!got_late.is_empty(), "{what}: no late click");
        }
    }
}

// ---------------------------------------------------------------------------
// A JSON-lines join of two inputs (examples/ad_clicks_json.rs)

/// (impression, campaign, time ms) and (impression, time ms): ~6k
/// impressions over ~5 minutes, up to 3 s out of order; about a third
/// clicked once or twice, some clicks in the next minute (no pair) and
/// some for impressions that do not exist.
#[allow(clippy::type_complexity)]
fn ads(seed: u64) -> (Vec<(u64, String, u64)>, Vec<(u64, u64)>) {
    ads_n(seed, 6_000)
}

/// [`ads`] with `n` impressions.
#[allow(clippy::type_complexity)]
fn ads_n(seed: u64, n: u64) -> (Vec<(u64, String, u64)>, Vec<(u64, u64)>) {
    let mut rng = Rng(seed);
    let campaigns = ["spring-sale", "winter", "x\"quoted\"", "é-unicode"];
    let mut imps = Vec::new();
    let mut clicks = Vec::new();
    let mut t = 0u64;
    for i in 0..n {
        t += rng.below(100);
        let shown = t.saturating_sub(rng.below(3_000));
        let c = campaigns[rng.below(campaigns.len() as u64) as usize].to_string();
        imps.push((i, c, shown));
        for _ in 0..rng.below(3).saturating_sub(1) + u64::from(rng.chance(20)) {
            clicks.push((i, shown + rng.below(20_000)));
        }
        if rng.chance(2) {
            clicks.push((1_000_000 + i, shown));
        }
    }
    // Clicks in event-time order, give or take 3 s.
    clicks.sort_by_key(|c| c.1);
    for i in 1..clicks.len() {
        if rng.chance(30) && clicks[i].1 - clicks[i - 1].1 < 3_000 {
            clicks.swap(i - 1, i);
        }
    }
    (imps, clicks)
}

/// An impression as a JSON line (fields in the example's order).
fn json_imp(i: &(u64, String, u64)) -> String {
    format!(
        "{{\"impression\": {}, \"campaign\": {}, \"time_ms\": {}}}\n",
        i.0,
        serde_json::to_string(&i.1).unwrap(),
        i.2
    )
}

/// A click as a JSON line (fields in another order, one ignored).
fn json_click(c: &(u64, u64)) -> String {
    format!(
        "{{\"time_ms\":{},\"impression\":{},\"ua\":\"x\"}}\n",
        c.1, c.0
    )
}

/// The batch join of `imps` and `clicks`: per (minute, campaign), the
/// impressions clicked in their minute and those clicks.
fn ad_clicks_reference(
    imps: &[(u64, String, u64)],
    clicks: &[(u64, u64)],
) -> Vec<(u64, String, u64, u64)> {
    let window = |t: u64| t / 60_000 * 60_000;
    let by_id: BTreeMap<u64, &(u64, String, u64)> = imps.iter().map(|i| (i.0, i)).collect();
    let mut want: BTreeMap<(u64, String), (BTreeSet<u64>, u64)> = BTreeMap::new();
    for c in clicks {
        if let Some(i) = by_id.get(&c.0) {
            if window(i.2) == window(c.1) {
                let e = want.entry((window(i.2), i.1.clone())).or_default();
                e.0.insert(i.0);
                e.1 += 1;
            }
        }
    }
    want.into_iter()
        .map(|((w, c), (ids, n))| (w, c, ids.len() as u64, n))
        .collect()
}

/// The example's rows, sorted.
fn ad_clicks_rows(out: &Path, o: &Output) -> Vec<(u64, String, u64, u64)> {
    let (header, rows) = read_output(out, o);
    assert_eq!(header, "window_start,campaign,impressions_clicked,clicks");
    let mut got: Vec<(u64, String, u64, u64)> = rows
        .iter()
        .map(|r| (num(r, 0), r[1].to_string(), num(r, 2), num(r, 3)))
        .collect();
    got.sort();
    got
}

#[test]
fn ad_clicks_json_joins_two_json_inputs_like_a_batch_join() {
    let dir = common::tmpdir("examples", "ads-json");
    let (imps, clicks) = ads(0xad5_5eed);
    // Impressions in three files found by a glob; clicks half plain, half
    // gzip (read whole by one worker).
    let imp_dir = dir.join("impressions");
    let click_dir = dir.join("clicks");
    std::fs::create_dir_all(&imp_dir).unwrap();
    std::fs::create_dir_all(&click_dir).unwrap();
    for (k, part) in imps.chunks(imps.len() / 3 + 1).enumerate() {
        let text: String = part.iter().map(json_imp).collect();
        std::fs::write(imp_dir.join(format!("part-{k}.jsonl")), text).unwrap();
    }
    let half = clicks.len() / 2;
    let first: String = clicks[..half].iter().map(json_click).collect();
    let second: String = clicks[half..].iter().map(json_click).collect();
    std::fs::write(click_dir.join("a.jsonl"), first).unwrap();
    std::fs::write(click_dir.join("b.jsonl"), second).unwrap();
    let gz = Command::new("gzip")
        .arg(click_dir.join("b.jsonl"))
        .status()
        .expect("gzip");
    assert!(gz.success());

    // Reference: pairs (impression, click) in one minute, per (window,
    // campaign): distinct impressions and clicks.
    let want = ad_clicks_reference(&imps, &clicks);
    assert!(want.len() >= 15, "{} reference rows", want.len());

    let imp_glob = imp_dir.join("*.jsonl");
    let click_glob = click_dir.join("*");
    for workers in ["1", "2", "3"] {
        let what = format!("ad_clicks_json at {workers} worker(s)");
        let out = dir.join(format!("ctr{workers}.csv"));
        let o = run_example(
            "ad_clicks_json",
            &[&imp_glob, &click_glob, &out],
            &[("AIR_WORKERS", workers)],
        );
        assert!(o.status.success(), "{what}: {}", text(&o));
        assert!(
            !String::from_utf8_lossy(&o.stderr).contains("late record"),
            "{what}: {}",
            text(&o)
        );
        let got = ad_clicks_rows(&out, &o);
        assert_eq!(got, want, "{what}: rows differ from the batch join");
    }

    // A bad line stops the job naming file, line and field; SKIP_BAD=1
    // skips it (counted, named) and the rows lose only its record.
    let bad_dir = dir.join("bad");
    std::fs::create_dir_all(&bad_dir).unwrap();
    let mut text_in: String = imps.iter().take(50).map(json_imp).collect();
    text_in += "{\"impression\": 7, \"campaign\": \"winter\", \"time_ms\": \"soon\"}\n";
    let bad = bad_dir.join("imps.jsonl");
    std::fs::write(&bad, text_in).unwrap();
    for workers in ["1", "2"] {
        let out = dir.join("bad.csv");
        let o = run_example(
            "ad_clicks_json",
            &[&bad, &click_glob, &out],
            &[("AIR_WORKERS", workers)],
        );
        assert!(!o.status.success(), "{}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        for part in [format!("{}:51", bad.display()), "time_ms".to_string()] {
            assert!(
                err.contains(&part),
                "stderr does not name {part:?}:\n{}",
                text(&o)
            );
        }
        let o = run_example(
            "ad_clicks_json",
            &[&bad, &click_glob, &out],
            &[("AIR_WORKERS", workers), ("SKIP_BAD", "1")],
        );
        assert!(o.status.success(), "{}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("{}:51", bad.display())),
            "{}",
            text(&o)
        );
        assert!(err.contains("air: 1 bad record(s) skipped"), "{}", text(&o));
    }
}

/// An example program resumes too (issue 31): `ad_clicks_json` (a
/// windowed join of two JSON-lines inputs) with `AIR_CHECKPOINT_DIR`
/// (what `Job::from_env` reads) is killed with SIGKILL twice after a
/// checkpoint completed and rerun unchanged, the last time at 3 workers
/// instead of 2 (`AIR_WORKERS`: its join state and its two inputs' rest
/// are dealt out again); its rows equal the batch join's, and the reruns
/// say they resumed.
#[test]
fn ad_clicks_json_killed_and_resumed_from_its_checkpoints_equals_the_batch_join() {
    let dir = common::tmpdir("examples", "ads-ck");
    let (imps, clicks) = ads_n(0xc4ec_4901, 400_000);
    let imp = dir.join("impressions.jsonl");
    let click = dir.join("clicks.jsonl");
    std::fs::write(&imp, imps.iter().map(json_imp).collect::<String>()).unwrap();
    std::fs::write(&click, clicks.iter().map(json_click).collect::<String>()).unwrap();
    let want = ad_clicks_reference(&imps, &clicks);
    let (out, ck) = (dir.join("ctr.csv"), dir.join("ck"));
    let ck_s = ck.to_str().unwrap();
    let mut resumed = 0;
    for k in 0..3 {
        let env = [
            ("AIR_WORKERS", if k < 2 { "2" } else { "3" }),
            ("AIR_CHECKPOINT_DIR", ck_s),
            ("AIR_CHECKPOINT_MS", "20"),
        ];
        let mut cmd = Command::new(example("ad_clicks_json"));
        cmd.args([&imp, &click, &out]);
        for v in JOB_ENV {
            cmd.env_remove(v);
        }
        let mut child = cmd
            .envs(env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start ad_clicks_json");
        if k < 2 {
            // Killed once a checkpoint newer than the last one completed.
            let before = complete_checkpoints(&ck);
            let t = Instant::now();
            while complete_checkpoints(&ck) == before && t.elapsed() < LIMIT {
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            let _ = child.kill();
        }
        let o = wait(child, "ad_clicks_json with checkpoints");
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        resumed += usize::from(err.contains("resuming from checkpoint"));
        if k == 2 {
            assert!(o.status.success(), "{}", text(&o));
            assert!(err.contains("its state goes to 3"), "not rescaled: {err}");
            assert_eq!(
                ad_clicks_rows(&out, &o),
                want,
                "killed and resumed: rows differ from the batch join"
            );
        }
    }
    assert!(resumed >= 1, "no run resumed");
}

/// The ids of the complete checkpoints in `ck`, joined (to see a new one).
fn complete_checkpoints(ck: &Path) -> String {
    let mut ids: Vec<String> = std::fs::read_dir(ck)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.path().join("MANIFEST.json").exists())
                .map(|e| e.file_name().to_string_lossy().to_string())
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    ids.join(",")
}

/// Checkpoint settings from the environment that make no sense are
/// refused before the job runs, naming the variable and what it takes.
#[test]
fn bad_checkpoint_environment_is_refused_naming_the_variable() {
    let dir = common::tmpdir("examples", "ck-env");
    let (imp, click) = (dir.join("i.jsonl"), dir.join("c.jsonl"));
    std::fs::write(&imp, json_imp(&(1, "a".into(), 5))).unwrap();
    std::fs::write(&click, json_click(&(1, 6))).unwrap();
    let ck = dir.join("ck");
    let ck = ck.to_str().unwrap();
    for (env, want) in [
        (
            vec![("AIR_CHECKPOINT_DIR", "")],
            "AIR_CHECKPOINT_DIR is empty",
        ),
        (
            vec![("AIR_CHECKPOINT_DIR", ck), ("AIR_CHECKPOINT_MS", "0")],
            "AIR_CHECKPOINT_MS=\"0\": expected a number from 1 to 3600000",
        ),
        (
            vec![("AIR_CHECKPOINT_DIR", ck), ("AIR_FRESH", "yes")],
            "AIR_FRESH=\"yes\"",
        ),
    ] {
        let o = run_example("ad_clicks_json", &[&imp, &click], &env);
        assert!(!o.status.success(), "{env:?}: {}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(want),
            "{env:?}: {}",
            text(&o)
        );
    }
}
