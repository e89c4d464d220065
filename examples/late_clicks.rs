//! Clicks per user per 10-s window that keeps late clicks instead of
//! losing them: a window waits 5 s more (allowed lateness) after the
//! watermark passes its end, and a click later still goes to a file of its
//! own.
//!
//! ```sh
//! cargo run --release --example late_clicks -- clicks.csv counts.csv late.csv
//! ```
//!
//! Input: CSV with a header `user,time_ms`. The watermark waits 2 s behind
//! the newest click. Outputs:
//!
//! - `counts.csv`: `window_start,user,clicks`, written as each window
//!   closes. A click up to 5 s late for its closed window updates it: the
//!   window's row is written again with the new count, and the later row
//!   of a (window, user) replaces the earlier one.
//! - `late.csv`: `user,time_ms`, the clicks that came after their window's
//!   end + 5 s had passed the watermark, so no count holds them.
//!
//! At the end, the job names those clicks on stderr (`air: N late
//! record(s) at the window at examples/late_clicks.rs:…, sent to its side
//! output`) with the delay that would have kept them: every click is in
//! exactly one place, a count or `late.csv`.

use air::prelude::*;

#[derive(Clone, Debug, serde::Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct Click {
    user: u64,
    time_ms: u64,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [input, counts, late] = &args[..] else {
        return Err("usage: late_clicks CLICKS.csv COUNTS.csv LATE.csv".into());
    };
    air::Job::from_env()?.run(|df| {
        let (windows, too_late) = df
            .source(CsvSource::<Click>::shard(input, df.index(), df.workers()))
            .event_time(|c| c.time_ms, 2_000)
            .key_by(|c| c.user)
            .window(Tumbling::ms(10_000), |c| c.time_ms)
            .allowed_lateness(5_000)
            .side_output_late();
        windows
            .aggregate(Count)
            .map(|r| (r.start, r.key, r.value))
            .collect()
            .sink(Csv::to_path(counts).header(&["window_start", "user", "clicks"]));
        too_late
            .map(|l| (l.record.user, l.record.time_ms))
            .collect()
            .sink(Csv::to_path(late).header(&["user", "time_ms"]));
    })?;
    Ok(())
}
