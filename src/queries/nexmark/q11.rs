//! q11, user sessions: per bidder, the number of bids in each of their
//! sessions (Beam's `Query11`, the Flink suite's `q11`).
//!
//! A bidder's session groups their bids closer than the gap (`--window-ms`,
//! default 10 000 ms = Beam's `windowSizeSec` 10 and Flink's `INTERVAL '10'
//! SECOND`) to each other ([`air_operators::graph::Sessions`]): a session
//! is `[first bid, last bid + gap)`. Columns:
//! `bidder,bid_count,session_start_ms,session_end_ms` (Flink's
//! `SESSION_START` and `SESSION_END`), one row per session when the
//! watermark passes its end; rows sorted by `session_end, bidder`.
//! `--max-delay-ms` bounds the out-of-orderness (later bids are dropped and
//! counted).
//!
//! Where Beam and Flink differ, and what we do:
//! - Output: Beam emits `(bidder, count)` only; Flink adds the session's
//!   start and end. We follow Flink.
//! - Firing: Beam fires early every `maxLogEvents` (100 000) bids of a
//!   session and discards the fired pane, so a huge session yields several
//!   partial counts; Flink emits one count per session when it closes. We
//!   follow Flink (one row per session).
//! - Lateness: Beam allows `occasionalDelaySec / 2` of lateness; Flink's
//!   SQL none beyond the watermark. We follow Flink: `--max-delay-ms`
//!   (default 0) delays the watermark, nothing is refired.
//! - Bids exactly `gap` apart: Flink merges session windows that touch
//!   (they end up in one session); Beam merges only windows that overlap
//!   (two sessions). Our session windows follow Beam here (see
//!   [`air_operators::graph::Sessions`]).

use super::{Cx, Shard, Spec};
use crate::queries::common::QueryOption::*;
use crate::queries::driver::sink_window_rows;
use air_operators::graph::{Count, KeyedWindowExt, Sessions, Windowed};
use air_operators::sources::nexmark::Bid;
use air_runtime::dataflow::Dataflow;
use serde::Serialize;

/// q11 as the driver runs it.
pub const SPEC: Spec = Spec {
    what: "user sessions: per bidder, the bids of each session (bids closer than the gap \
           --window-ms to each other), counted when the session closes",
    nature: "session windows per bidder",
    columns: &["bidder", "bid_count", "session_start_ms", "session_end_ms"],
    order: "session_end, bidder",
    honoured: &[WindowMs, MaxDelayMs],
    window_ms: 10_000,
    slide_ms: 2_000,
    held_rows_per_event: |_| None,
    windowed: true,
    reads: 1,
    global: false,
    build,
};

/// A q11 CSV row.
#[derive(Serialize)]
struct Q11Csv {
    bidder: u64,
    bid_count: u64,
    session_start_ms: u64,
    session_end_ms: u64,
}

/// Bids keyed by bidder → session windows of gap `--window-ms` → counted
/// at the bidder's owner → rows as the sessions close.
fn build(cx: &Cx<'_>, df: &Dataflow, shard: &Shard<'_>) {
    let gap = cx.args.window();
    let sessions = df
        .source(shard.read_bids())
        .event_time(|b: &Bid| b.date_time, cx.args.max_delay())
        .key_by(|b: &Bid| b.bidder)
        .window(Sessions::with_gap(gap), |b: &Bid| b.date_time)
        .aggregate(Count);
    sink_window_rows(
        sessions,
        |r: &Windowed<u64, u64>| (r.key, r.start),
        |r| Q11Csv {
            bidder: r.key,
            bid_count: r.value,
            session_start_ms: r.start,
            session_end_ms: r.end,
        },
        cx.header,
        cx.to,
    );
}
