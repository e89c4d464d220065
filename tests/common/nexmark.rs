//! NEXMark events as the tests read them back from `air gen nexmark`'s
//! JSON lines (every field of the specification), a runner of `air run
//! nexmark` that returns the CSV body, and the checks every NEXMark test
//! file makes: a query's rows equal across workers and sources, options
//! refused, two ranks under `mpirun` (feature `mpi`).

use serde_json::Value;
use std::path::{Path, PathBuf};
#[cfg(feature = "mpi")]
use std::process::Stdio;
use std::process::{Command, Output};

/// A person (Beam's `Person`).
#[derive(Clone, Debug)]
pub struct Person {
    pub id: u64,
    pub name: String,
    pub email_address: String,
    pub credit_card: String,
    pub city: String,
    pub state: String,
    /// ms.
    pub date_time: u64,
}

/// An auction (Beam's `Auction`).
#[derive(Clone, Debug)]
pub struct Auction {
    pub id: u64,
    pub item_name: String,
    pub description: String,
    /// Cents.
    pub initial_bid: u64,
    /// Cents.
    pub reserve: u64,
    /// ms.
    pub date_time: u64,
    /// ms.
    pub expires: u64,
    pub seller: u64,
    pub category: u64,
}

/// A bid (Beam's `Bid`, with the Flink suite's `channel` and `url`).
#[derive(Clone, Debug)]
pub struct Bid {
    pub auction: u64,
    pub bidder: u64,
    /// Cents.
    pub price: u64,
    pub channel: String,
    pub url: String,
    /// ms.
    pub date_time: u64,
    pub extra: String,
}

/// One event of the stream.
#[derive(Clone, Debug)]
pub enum Event {
    Person(Person),
    Auction(Auction),
    Bid(Bid),
}

/// The events of one file, in file order, and split by kind.
#[derive(Default)]
pub struct Events {
    pub all: Vec<Event>,
    pub persons: Vec<Person>,
    pub auctions: Vec<Auction>,
    pub bids: Vec<Bid>,
}

/// Reads `air gen nexmark`'s JSON lines.
pub fn load(path: &Path) -> Events {
    let mut e = Events::default();
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let u = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k} in {line}"));
        let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
        let ev = match v["type"].as_str().unwrap() {
            "person" => Event::Person(Person {
                id: u("id"),
                name: s("name"),
                email_address: s("emailAddress"),
                credit_card: s("creditCard"),
                city: s("city"),
                state: s("state"),
                date_time: u("dateTime"),
            }),
            "auction" => Event::Auction(Auction {
                id: u("id"),
                item_name: s("itemName"),
                description: s("description"),
                initial_bid: u("initialBid"),
                reserve: u("reserve"),
                date_time: u("dateTime"),
                expires: u("expires"),
                seller: u("seller"),
                category: u("category"),
            }),
            "bid" => Event::Bid(Bid {
                auction: u("auction"),
                bidder: u("bidder"),
                price: u("price"),
                channel: s("channel"),
                url: s("url"),
                date_time: u("dateTime"),
                extra: s("extra"),
            }),
            t => panic!("type {t}"),
        };
        match &ev {
            Event::Person(p) => e.persons.push(p.clone()),
            Event::Auction(a) => e.auctions.push(a.clone()),
            Event::Bid(b) => e.bids.push(b.clone()),
        }
        e.all.push(ev);
    }
    e
}

/// `air gen nexmark` options most tests use: 40 000 events at 2000
/// events/s (20 s of event time: 800 persons, 2400 auctions, 36 800
/// bids), seed 11.
pub const GEN_20S: [&str; 6] = [
    "--events",
    "40000",
    "--events-per-s",
    "2000",
    "--seed",
    "11",
];

/// A CSV field as `air` writes it: quoted (quotes doubled) if it holds a
/// comma, a quote or a line break.
pub fn csv(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The price rank of the Flink suite's q15, q16 and q17: 0 below 10 000
/// cents, 1 below 1 000 000, else 2.
pub fn rank(price: u64) -> usize {
    match price {
        0..=9_999 => 0,
        10_000..=999_999 => 1,
        _ => 2,
    }
}

/// Runs `air` with `args`.
pub fn air(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_air"))
        .args(args)
        .output()
        .expect("run air")
}

/// The lines of the CSV file `path` after its header.
pub fn csv_body(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .skip(1)
        .map(str::to_string)
        .collect()
}

/// Runs `air args --out OUT` (it must succeed) and returns the CSV body
/// (no header).
pub fn run(args: &[&str], out: &Path) -> Vec<String> {
    let mut a = args.to_vec();
    a.extend_from_slice(&["--out", out.to_str().unwrap()]);
    let o = air(&a);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    csv_body(out)
}

/// Writes `air gen nexmark GEN --out FILE` (it must succeed).
pub fn export(file: &Path, gen: &[&str]) {
    let mut args = vec!["gen", "nexmark", "--out", file.to_str().unwrap()];
    args.extend_from_slice(gen);
    let o = air(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Writes `air gen nexmark GEN --out DIR/events.json` and loads it.
pub fn generate(dir: &Path, gen: &[&str]) -> (PathBuf, Events) {
    let file = dir.join("events.json");
    export(&file, gen);
    let e = load(&file);
    (file, e)
}

/// Asserts the rows `got` equal `want`; on failure names `what`, both
/// counts and the first row that differs (not the whole tables).
pub fn assert_rows(got: &[String], want: &[String], what: &str) {
    let first = got.iter().zip(want).position(|(g, w)| g != w);
    assert!(
        got == want,
        "{what}: {} rows, want {}; first difference at {first:?}: {:?} vs {:?}",
        got.len(),
        want.len(),
        first.map(|i| &got[i]),
        first.map(|i| &want[i]),
    );
}

/// What ran and the rows it wrote: `air run nexmark --query QUERY --input
/// FILE --workers W EXTRA` (the output file beside FILE).
pub fn file_run(query: &str, file: &Path, w: &str, extra: &[&str]) -> (String, Vec<String>) {
    let mut a = vec!["run", "nexmark", "--query", query];
    a.extend_from_slice(&["--input", file.to_str().unwrap(), "--workers", w]);
    a.extend_from_slice(extra);
    let got = run(&a, &file.with_file_name(format!("{query}-w{w}.csv")));
    let what = format!("{query} {extra:?} on {w} workers ({})", file.display());
    (what, got)
}

/// [`file_run`] on each number of workers in `workers` gives the rows
/// `want`.
pub fn assert_file_on_workers(
    query: &str,
    file: &Path,
    workers: &[&str],
    extra: &[&str],
    want: &[String],
) {
    for &w in workers {
        let (what, got) = file_run(query, file, w, extra);
        assert_rows(&got, want, &what);
    }
}

/// [`assert_file_on_workers`] on 1, 2 and 4 workers (one, an even split
/// and more workers than the machine has cores).
pub fn assert_file_on_1_2_4_workers(query: &str, file: &Path, extra: &[&str], want: &[String]) {
    assert_file_on_workers(query, file, &["1", "2", "4"], extra, want);
}

/// A query's runs wherever its events come from, as (what ran, its
/// rows): `FILE` (written by `air gen nexmark GEN`) on 1, 2 and 4 workers
/// ([`file_run`]), then the generator itself, `air run nexmark --query
/// QUERY --workers 3 GEN EXTRA` (the same events, split otherwise).
pub fn runs_everywhere(
    query: &str,
    file: &Path,
    gen: &[&str],
    extra: &[&str],
) -> Vec<(String, Vec<String>)> {
    let mut runs: Vec<_> = ["1", "2", "4"]
        .into_iter()
        .map(|w| file_run(query, file, w, extra))
        .collect();
    let mut a = vec!["run", "nexmark", "--query", query, "--workers", "3"];
    a.extend_from_slice(gen);
    a.extend_from_slice(extra);
    let got = run(&a, &file.with_file_name(format!("{query}-gen.csv")));
    runs.push((format!("{query} {extra:?} from the generator"), got));
    runs
}

/// Every run of [`runs_everywhere`] gives the rows `want`.
pub fn assert_equal_everywhere(
    query: &str,
    file: &Path,
    gen: &[&str],
    extra: &[&str],
    want: &[String],
) {
    for (what, got) in runs_everywhere(query, file, gen, extra) {
        assert_rows(&got, want, &what);
    }
}

/// Runs `air ARGS` and asserts it is refused: exit code 2 (`air`'s code
/// for options that do not fit and for bad input). Returns its stderr.
pub fn refused(args: &[&str]) -> String {
    let o = air(args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    err
}

/// `air run nexmark --query QUERY --events 1000 OPTIONS` is [`refused`];
/// returns its stderr.
pub fn query_refused(query: &str, options: &[&str]) -> String {
    let mut a = vec!["run", "nexmark", "--query", query, "--events", "1000"];
    a.extend_from_slice(options);
    refused(&a)
}

/// [`query_refused`] for each of `options`.
pub fn assert_refused(query: &str, options: &[&[&str]]) {
    for opts in options {
        query_refused(query, opts);
    }
}

/// `air run nexmark --query QUERY --events 1000 OPTIONS` succeeds (the
/// options a query honours are not refused).
pub fn assert_accepted(query: &str, options: &[&str]) {
    let mut a = vec!["run", "nexmark", "--query", query, "--events", "1000"];
    a.extend_from_slice(options);
    let o = air(&a);
    assert!(
        o.status.success(),
        "{a:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The two tiers a distributed test runs on: the node tier (ranks of one
/// node share memory) and the network tier (`--force-network`: RMA even
/// within the node).
pub const TIERS: [&[&str]; 2] = [&[], &["--force-network"]];

/// Runs `mpirun -np 2 air ARGS` (the launcher of
/// `air_rdma::mpirun_command`: `AIR_MPIRUN` or `mpirun`), its output
/// captured, and asserts it succeeded.
#[cfg(feature = "mpi")]
pub fn mpirun2(args: &[&str]) -> Output {
    let mut cmd = air_rdma::mpirun_command(2);
    cmd.arg(env!("CARGO_BIN_EXE_air")).args(args);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let o = cmd.output().expect("start mpirun (is MPI installed?)");
    assert!(
        o.status.success(),
        "mpirun -np 2 air {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// On each of the [`TIERS`], `mpirun -np 2 air ARGS --out DIR/dist.csv
/// --report DIR/dist.json` ([`mpirun2`]) writes the rows `want` (those of
/// one process) and reports 2 ranks.
#[cfg(feature = "mpi")]
pub fn assert_two_ranks_give(args: &[&str], dir: &Path, want: &[String]) {
    let (out, rep) = (dir.join("dist.csv"), dir.join("dist.json"));
    for tier in TIERS {
        let mut a = args.to_vec();
        a.extend_from_slice(&["--out", out.to_str().unwrap()]);
        a.extend_from_slice(&["--report", rep.to_str().unwrap()]);
        a.extend_from_slice(tier);
        mpirun2(&a);
        assert_rows(&csv_body(&out), want, &format!("two ranks {a:?}"));
        let report: Value = serde_json::from_str(&std::fs::read_to_string(&rep).unwrap()).unwrap();
        assert_eq!(report["ranks"], 2, "{a:?}");
    }
}

/// `air ARGS --workers 2` in one process writes more than `more_than`
/// rows, and two ranks of one worker each ([`assert_two_ranks_give`])
/// write the same rows.
#[cfg(feature = "mpi")]
pub fn assert_two_ranks_equal_one_process(args: &[&str], dir: &Path, more_than: usize) {
    let mut a = args.to_vec();
    a.extend_from_slice(&["--workers", "2"]);
    let want = run(&a, &dir.join("emb.csv"));
    assert!(
        want.len() > more_than,
        "the embedded run has rows: {} of more than {more_than}",
        want.len()
    );
    a.truncate(args.len());
    a.extend_from_slice(&["--workers", "1"]);
    assert_two_ranks_give(&a, dir, &want);
}
