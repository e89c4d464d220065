//! q22, get URL directories: every bid with the first three directories of
//! its url (the Flink nexmark suite's `q22.sql`; Beam has no such query).
//! Reads full events ([`Shard::read_full`]): the bid's `channel` and
//! `url`.
//!
//! Definition: `dir1`, `dir2`, `dir3` are the pieces 3, 4 and 5 (0-based)
//! of the url split at every `/`, empty pieces kept (SQL `SPLIT_INDEX(url,
//! '/', 3)` …): for `https://www.nexmark.com/a/b/c/item.htm?query=1` they
//! are `a`, `b`, `c`. A piece past the last is SQL `NULL`, written as an
//! empty field (so is an empty piece). Every bid has a row.
//!
//! Columns: `auction, bidder, price, channel, dir1, dir2, dir3,
//! date_time_ms`, one row per bid, sorted by date_time, auction, bidder,
//! price, channel, dir1, dir2, dir3. No windows, no options; like q1, rows
//! stream out in time order from the generator and are sorted at the end
//! from files.
//!
//! Where we differ from Flink: we add `date_time_ms` (the row order), and
//! write `NULL` as an empty field. Strings are carried as inline words
//! ([`Word`], heap beyond 23 bytes), projected from the full bid before any
//! exchange.

use super::full::full_bid_rows;
use super::{Cx, Shard, Spec};
use air_operators::sources::nexmark::FullBid;
use air_operators::sources::text::Word;
use air_runtime::dataflow::Dataflow;
use serde::Serialize;

/// q22 as the driver runs it.
pub const SPEC: Spec = Spec {
    what: "get URL directories: every bid with its url's first three directories (pieces 3, \
           4, 5 of the url split at '/'; empty when absent)",
    nature: "a map: no windows",
    columns: &[
        "auction",
        "bidder",
        "price",
        "channel",
        "dir1",
        "dir2",
        "dir3",
        "date_time_ms",
    ],
    order: "date_time, auction, bidder, price, channel, dir1, dir2, dir3",
    honoured: &[],
    window_ms: 10_000,
    slide_ms: 2_000,
    // From files every bid is held to be sorted.
    held_rows_per_event: |files| files.then_some(1.0),
    windowed: false,
    reads: 1,
    global: false,
    build,
};

/// A bid and its url's directories (`None`: SQL `NULL`).
#[derive(Clone, Debug, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub(crate) struct DirBid {
    auction: u64,
    bidder: u64,
    price: u64,
    date_time: u64,
    channel: Word,
    dirs: [Option<Word>; 3],
}

/// `SPLIT_INDEX(url, '/', 3..=5)`: the url's pieces 3, 4, 5 (0-based) at
/// `/`, empty pieces kept; `None` past the last piece (and for an empty
/// url, which has no pieces).
pub(crate) fn url_dirs(url: &str) -> [Option<&str>; 3] {
    let mut dirs = [None; 3];
    if !url.is_empty() {
        for (d, piece) in dirs.iter_mut().zip(url.split('/').skip(3)) {
            *d = Some(piece);
        }
    }
    dirs
}

/// q22 of one bid.
fn get_dirs(b: FullBid) -> DirBid {
    DirBid {
        auction: b.auction,
        bidder: b.bidder,
        price: b.price,
        date_time: b.date_time,
        channel: Word::new(&b.channel.to_cow()),
        dirs: url_dirs(&b.url.to_cow()).map(|d| d.map(Word::new)),
    }
}

/// A q22 CSV row (the columns of [`SPEC`]; `None` is an empty field).
#[derive(Serialize)]
struct Q22Csv {
    auction: u64,
    bidder: u64,
    price: u64,
    channel: Word,
    dir1: Option<Word>,
    dir2: Option<Word>,
    dir3: Option<Word>,
    date_time_ms: u64,
}

/// Full bids → their directories → rows, each of the millisecond it
/// happened in ([`full_bid_rows`]).
fn build(cx: &Cx<'_>, df: &Dataflow, shard: &Shard<'_>) {
    full_bid_rows(
        cx,
        df,
        shard,
        |b| Some(get_dirs(b)),
        |r: &DirBid| r.date_time,
        |w| {
            let r = &w.value;
            (
                r.date_time,
                r.auction,
                r.bidder,
                r.price,
                r.channel.clone(),
                r.dirs.clone(),
            )
        },
        |w| {
            let r = w.value;
            let [dir1, dir2, dir3] = r.dirs;
            Q22Csv {
                auction: r.auction,
                bidder: r.bidder,
                price: r.price,
                channel: r.channel,
                dir1,
                dir2,
                dir3,
                date_time_ms: r.date_time,
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_as_split_index_gives_them() {
        assert_eq!(
            url_dirs("https://www.nexmark.com/a/b/c/item.htm?query=1"),
            [Some("a"), Some("b"), Some("c")]
        );
        assert_eq!(url_dirs("https://h/a"), [Some("a"), None, None]);
        assert_eq!(url_dirs("https://h//x/"), [Some(""), Some("x"), Some("")]);
        assert_eq!(url_dirs("a/b"), [None, None, None]);
        assert_eq!(url_dirs(""), [None, None, None]);
    }
}
