//! Click-through per campaign per minute from two JSON-lines inputs: ad
//! impressions joined with the clicks on them (a windowed join of two file
//! sources), then counted per campaign.
//!
//! ```sh
//! cargo run --release --example ad_clicks_json -- 'impressions/*.jsonl' 'clicks/*.jsonl.gz' [ctr.csv]
//! ```
//!
//! Inputs: JSON lines (one object per line; a file, a glob, `.gz` files
//! read through gzip), split between the workers by bytes.
//!
//! - impressions: `{"impression": 17, "campaign": "spring-sale", "time_ms": 1200}`
//! - clicks: `{"impression": 17, "time_ms": 4100}` (other fields are ignored)
//!
//! A click counts for its impression if both fall in the same 1-minute
//! window. Output: CSV `window_start,campaign,impressions_clicked,clicks`.
//! A bad line stops the job naming the file, the line and the field; set
//! `SKIP_BAD=1` to skip bad lines instead (counted, the first one named on
//! stderr). The watermark waits `MAX_DELAY_MS` (default 10 000) behind the
//! newest event of each input.

use air::prelude::*;

#[derive(Clone, Debug, serde::Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct Impression {
    impression: u64,
    campaign: String,
    time_ms: u64,
}

#[derive(Clone, Debug, serde::Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct Click {
    impression: u64,
    time_ms: u64,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(impressions), Some(clicks)) = (args.first(), args.get(1)) else {
        return Err("usage: ad_clicks_json IMPRESSIONS CLICKS [OUT.csv]".into());
    };
    let out = args.get(2);
    let delay: u64 = match std::env::var("MAX_DELAY_MS") {
        Ok(v) => v.parse().map_err(|e| format!("MAX_DELAY_MS={v:?}: {e}"))?,
        Err(_) => 10_000,
    };
    let policy = match std::env::var("SKIP_BAD").as_deref() {
        Ok("1") => OnBadRecord::Skip,
        _ => OnBadRecord::Fail,
    };
    air::Job::from_env()?.run(|df| {
        let (me, n) = (df.index(), df.workers());
        let shown = df
            .source(JsonLinesSource::<Impression>::shard(impressions, me, n).on_bad_record(policy))
            .event_time(|i| i.time_ms, delay);
        let clicked = df
            .source(JsonLinesSource::<Click>::shard(clicks, me, n).on_bad_record(policy))
            .event_time(|c| c.time_ms, delay);
        let rows = shown
            .key_by(|i| i.impression)
            .join(clicked.key_by(|c| c.impression))
            .window(Tumbling::ms(60_000), |i| i.time_ms, |c| c.time_ms)
            .key_by(|j| j.left.campaign.clone())
            .window(Tumbling::ms(60_000), |j| j.time())
            .aggregate((
                DistinctCount::of(|j: &Joined<u64, Impression, Click>| j.key),
                Count,
            ))
            .map(|r| (r.start, r.key, r.value.0, r.value.1))
            .collect();
        let header = ["window_start", "campaign", "impressions_clicked", "clicks"];
        match out {
            Some(path) => rows.sink(Csv::to_path(path).header(&header)),
            None => rows.sink(Csv::stdout().header(&header)),
        };
    })?;
    Ok(())
}
