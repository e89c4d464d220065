//! Per URL and 1-s window: the mean and the largest latency of its visits
//! and the number of distinct users, with a user-written aggregate (the
//! shape of Flink's `AggregateFunction`: create, add, merge, result).
//!
//! ```sh
//! cargo run --release --example url_stats -- visits.csv [stats.csv]
//! ```
//!
//! Input: CSV `url,user,latency_ms,time_ms` (latency a float). Output: CSV
//! `window_start,url,mean_latency_ms,max_latency_ms,distinct_users`.
//!
//! The watermark waits `MAX_DELAY_MS` (default 2 000) behind the newest
//! visit; visits later than that for their window are named on stderr at
//! the end, with the delay that would have kept them.

use air::prelude::*;

#[derive(Clone, Debug, serde::Deserialize)]
struct Visit {
    url: String,
    user: u64,
    latency_ms: f64,
    time_ms: u64,
}

/// Sum, count and largest latency, and the users seen (sorted, distinct).
#[derive(Clone, Debug, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct Acc {
    sum: f64,
    count: u64,
    max: f64,
    users: Vec<u64>,
}

#[derive(Clone)]
struct UrlStats;

impl AggregateFunction<Visit> for UrlStats {
    type Acc = Acc;
    /// (mean latency, max latency, distinct users)
    type Out = (f64, f64, u64);

    fn create(&self) -> Acc {
        Acc {
            sum: 0.0,
            count: 0,
            max: f64::NEG_INFINITY,
            users: Vec::new(),
        }
    }

    fn add(&self, acc: &mut Acc, v: &Visit) {
        acc.sum += v.latency_ms;
        acc.count += 1;
        acc.max = acc.max.max(v.latency_ms);
        if let Err(i) = acc.users.binary_search(&v.user) {
            acc.users.insert(i, v.user);
        }
    }

    fn merge(&self, acc: &mut Acc, other: Acc) {
        acc.sum += other.sum;
        acc.count += other.count;
        acc.max = acc.max.max(other.max);
        acc.users.extend(other.users);
        acc.users.sort_unstable();
        acc.users.dedup();
    }

    fn result(&self, acc: &Acc) -> (f64, f64, u64) {
        (acc.sum / acc.count as f64, acc.max, acc.users.len() as u64)
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(input) = args.first().cloned() else {
        return Err("usage: url_stats VISITS.csv [OUT.csv]".into());
    };
    let out = args.get(1).cloned();
    let delay: u64 = match std::env::var("MAX_DELAY_MS") {
        Ok(v) => v.parse().map_err(|e| format!("MAX_DELAY_MS={v:?}: {e}"))?,
        Err(_) => 2_000,
    };
    air::Job::from_env()?.run(|df| {
        let rows = df
            .source(CsvSource::<Visit>::shard(&input, df.index(), df.workers()))
            .event_time(|v| v.time_ms, delay)
            .key_by(|v| v.url.clone())
            .window(Tumbling::ms(1_000), |v| v.time_ms)
            .aggregate(UrlStats)
            .map(|r| (r.start, r.key, r.value.0, r.value.1, r.value.2))
            .collect();
        let header = [
            "window_start",
            "url",
            "mean_latency_ms",
            "max_latency_ms",
            "distinct_users",
        ];
        match &out {
            Some(path) => rows.sink(Csv::to_path(path).header(&header)),
            None => rows.sink(Csv::stdout().header(&header)),
        };
    })?;
    Ok(())
}
