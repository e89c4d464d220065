//! Clicks per user per 1-s window from a live input, one row per user and
//! window, printed as each window closes (a user's first streaming job).
//!
//! ```sh
//! # Clicks as JSON lines on standard input:
//! printf '{"user": 1, "time_ms": 100}\n{"user": 2, "time_ms": 1200}\n' |
//!     cargo run --release --example live_clicks
//! # From a TCP server that sends lines, or from senders that connect:
//! cargo run --release --example live_clicks -- tcp://127.0.0.1:9000
//! cargo run --release --example live_clicks -- listen://127.0.0.1:9000
//! ```
//!
//! Input: one JSON object per line, `{"user": U, "time_ms": T}` (other
//! fields ignored; event time T in ms, up to 500 ms out of order). Output:
//! CSV `window_start,user,clicks` on standard output, each window's rows
//! by user, as soon as the window closes. The job ends, firing the last
//! windows, when the input ends (EOF, the server closing, every sender
//! gone); SIGINT/SIGTERM stop it with the windows already closed.
//!
//! Watermarks are per worker: a window closes once every worker has read a
//! record past its end (plus the 500 ms delay). Lines are spread over the
//! workers, so a trickle of a few lines may leave one worker without a newer
//! record and hold the window until more input (or its end) comes;
//! `AIR_WORKERS=1` closes windows on every line for such a trickle.

use air::prelude::*;

#[derive(Clone, Debug, serde::Deserialize)]
struct Click {
    user: u64,
    time_ms: u64,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let spec = std::env::args().nth(1).unwrap_or_else(|| "-".into());
    let job = air::Job::from_env()?;
    let feed = job.live_input(&spec)?;
    job.run(|df| {
        df.source(LiveSource::<Click>::json_lines(&feed, df))
            .event_time(|c| c.time_ms, 500)
            .key_by(|c| c.user)
            .window(Tumbling::ms(1_000), |c| c.time_ms)
            .aggregate(Count)
            .collect_by_window(|r| r.key)
            .map(|r| (r.start, r.key, r.value))
            .sink(Csv::stdout().header(&["window_start", "user", "clicks"]));
    })?;
    Ok(())
}
