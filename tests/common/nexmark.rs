//! NEXMark events as the tests read them back from `air gen nexmark`'s
//! JSON lines (every field of the specification), and a runner of `air
//! run nexmark` that returns the CSV body.

use serde_json::Value;
use std::path::Path;
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

/// Runs `air` with `args`.
pub fn air(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_air"))
        .args(args)
        .output()
        .expect("run air")
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
    std::fs::read_to_string(out)
        .unwrap()
        .lines()
        .skip(1)
        .map(str::to_string)
        .collect()
}

/// Writes `air gen nexmark GEN --out DIR/events.json` and loads it.
pub fn generate(dir: &Path, gen: &[&str]) -> (std::path::PathBuf, Events) {
    let file = dir.join("events.json");
    let mut args = vec!["gen", "nexmark", "--out", file.to_str().unwrap()];
    args.extend_from_slice(gen);
    let o = air(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let e = load(&file);
    (file, e)
}
