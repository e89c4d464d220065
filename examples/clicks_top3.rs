//! Clicks per user per 10-s window, then the 3 users with the most clicks
//! in each window: two keyed stages (exchange by user, then by window).
//!
//! ```sh
//! cargo run --release --example clicks_top3 -- clicks.csv [top3.csv]
//! mpirun -np 2 target/release/examples/clicks_top3 clicks.csv top3.csv
//! ```
//!
//! Input: CSV with a header `user,time_ms`. Output: CSV
//! `window_start,rank,user,clicks`, each window's rows best first, ranked
//! 1 to 3 (ties: the smaller user first), written as each window closes.
//!
//! Clicks may arrive out of order: the watermark waits `MAX_DELAY_MS`
//! (default 5 000) behind the newest click. Clicks later than that for
//! their window are counted as late and named on stderr at the end, with
//! the delay that would have kept them, e.g. `MAX_DELAY_MS=12000
//! clicks_top3 clicks.csv`.

use air::prelude::*;
use std::cmp::Reverse;

#[derive(Clone, Debug, serde::Deserialize)]
struct Click {
    user: u64,
    time_ms: u64,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(input) = args.first().cloned() else {
        return Err("usage: clicks_top3 CLICKS.csv [OUT.csv]".into());
    };
    let out = args.get(1).cloned();
    let delay: u64 = match std::env::var("MAX_DELAY_MS") {
        Ok(v) => v.parse().map_err(|e| format!("MAX_DELAY_MS={v:?}: {e}"))?,
        Err(_) => 5_000,
    };
    air::Job::from_env()?.run(|df| {
        let rows = df
            .source(CsvSource::<Click>::shard(&input, df.index(), df.workers()))
            .event_time(|c| c.time_ms, delay) // clicks arrive out of order
            .key_by(|c| c.user)
            .window(Tumbling::ms(10_000), |c| c.time_ms)
            .aggregate(Count)
            .key_by(|r| r.start)
            .top_n(3, |r| (r.value, Reverse(r.key))) // ties: the smaller user first
            .map(|r| (r.start, r.rank, r.key, r.value))
            .collect();
        let header = ["window_start", "rank", "user", "clicks"];
        match &out {
            Some(path) => rows.sink(Csv::to_path(path).header(&header)),
            None => rows.sink(Csv::stdout().header(&header)),
        };
    })?;
    Ok(())
}
