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

/// The environment variables of `air::Job::from_env` a run sets itself.
const JOB_ENV: [&str; 3] = ["AIR_WORKERS", "AIR_RING_BYTES", "AIR_FORCE_NETWORK"];

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
    let mut rng = Rng(seed);
    let users = Zipf::new(300, 1.2);
    let mut clock = Clock {
        t: 0,
        step: 20,
        disorder_pct: 30,
        max_lag: 4_000,
    };
    (0..n)
        .map(|i| {
            let mut time_ms = clock.next(&mut rng);
            if i % 97 == 0 {
                // On a window's first millisecond.
                time_ms -= time_ms % 10_000;
                time_ms = time_ms.max(clock.t.saturating_sub(4_000));
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
    let mut rng = Rng(seed);
    let urls = Zipf::new(40, 1.0);
    let mut clock = Clock {
        t: 0,
        step: 4,
        disorder_pct: 30,
        max_lag: 1_500,
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
    let mut rng = Rng(seed);
    let users = Zipf::new(50, 1.1);
    let mut clock = Clock {
        t: 0,
        step: 12,
        disorder_pct: 25,
        max_lag: 800,
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
            // Sorted by t: lagging t by < 1 s stays within the delay.
            time_ms: if rng.chance(20) {
                t.saturating_sub(rng.below(800))
            } else {
                t
            },
        })
        .collect();
    (orders, payments)
}

// ---------------------------------------------------------------------------
// Sequential references (rows in the order the test compares them)

/// Per 10-s window, best first: the 3 users with the most clicks (ties: the
/// smaller user first).
fn clicks_top3_reference(clicks: &[Click]) -> Vec<(u64, u64, u64)> {
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
        rows.extend(v.into_iter().take(3).map(|(u, c)| (w, u, c)));
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
const EXAMPLES: [&str; 4] = ["clicks_top3", "url_stats", "orders_payments", "live_clicks"];

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
            assert_eq!(header, "window_start,user,clicks", "{what}");
            let mut got: Vec<(u64, u64, u64)> = rows
                .iter()
                .map(|r| (num(r, 0), num(r, 1), num(r, 2)))
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
