//! q8, monitor new users: persons who opened an auction in the same
//! tumbling window (Beam's `Query8`: a window join on person id = seller).

use super::{auction, person, Cx, Shard, Spec};
use crate::queries::common::QueryOption::*;
use crate::queries::driver::sink_window_rows;
use air_operators::graph::{JoinExt, Tumbling};
use air_operators::sources::nexmark::{Auction, NexEvent, Person};
use air_runtime::dataflow::Dataflow;
use serde::Serialize;

/// q8 as the driver runs it.
pub const SPEC: Spec = Spec {
    what: "monitor new users: persons who opened an auction in the same tumbling window of \
           --window-ms (join person.id = auction.seller)",
    nature: "a tumbling-window join",
    columns: &[
        "window_start_ms",
        "person_id",
        "name",
        "auction_id",
        "reserve",
    ],
    order: "window, person, auction",
    honoured: &[IdleMs, WindowMs, MaxDelayMs],
    window_ms: 10_000,
    slide_ms: 2_000,
    held_rows_per_event: |_| None,
    windowed: true,
    // Each worker reads its shard twice, once per side.
    reads: 2,
    global: false,
    build,
};

/// A q8 CSV row.
#[derive(Serialize)]
struct Q8Csv {
    window_start_ms: u64,
    person_id: u64,
    name: String,
    auction_id: u64,
    reserve: u64,
}

/// Persons and auctions (each worker reads its shard twice, once per
/// side; every event moves each side's watermark) → a window join on
/// person id = seller whose pairs leave as soon as both records are in
/// ([`air_operators::graph::JoinedStreams::window_eager`]).
fn build(cx: &Cx<'_>, df: &Dataflow, shard: &Shard<'_>) {
    let (size, delay) = (cx.args.window(), cx.args.max_delay());
    let persons = df
        .source(shard.read())
        .event_time(NexEvent::date_time, delay)
        .idle_after_ms(cx.args.idle_ms)
        .flat_map(person);
    let auctions = df
        .source(shard.read_again())
        .event_time(NexEvent::date_time, delay)
        .idle_after_ms(cx.args.idle_ms)
        .flat_map(auction);
    let pairs = persons
        .key_by(|p: &Person| p.id)
        .join(auctions.key_by(|a: &Auction| a.seller))
        .window_eager(
            Tumbling::ms(size),
            |p: &Person| p.date_time,
            |a: &Auction| a.date_time,
        );
    sink_window_rows(
        pairs,
        |j| (j.key, j.right.id),
        |j| Q8Csv {
            window_start_ms: j.start,
            person_id: j.key,
            name: j.left.name.as_str().to_string(),
            auction_id: j.right.id,
            reserve: j.right.reserve,
        },
        cx.header,
        cx.to,
    );
}
