//! q10, log to file system: every bid written as CSV into files
//! partitioned by the minute of its event time (the Flink nexmark suite's
//! `q10.sql`). Reads full events ([`Shard::read_full`]): the bid's
//! `extra`.
//!
//! Definition (Flink): `INSERT INTO nexmark_q10 SELECT auction, bidder,
//! price, dateTime, extra, DATE_FORMAT(dateTime, 'yyyy-MM-dd'),
//! DATE_FORMAT(dateTime, 'HH:mm') FROM bid` into a filesystem table
//! `PARTITIONED BY (dt, hm)`, CSV, committed by partition time (`$dt
//! $hm:00`) with a one-minute delay and a success file.
//!
//! Output: under `--out-dir DIR` (required; `--out` is refused), one
//! directory per minute, `DIR/dt=yyyy-MM-dd/hm=HH:mm/` (UTC), holding each
//! worker's part file `part-r<rank>-w<worker>.csv` (CSV, no header) with
//! the columns `auction, bidder, price, date_time, extra`: `date_time` as
//! `yyyy-MM-dd HH:mm:ss.SSS` (UTC, Flink's text of a `TIMESTAMP(3)`); the
//! partition columns `dt`, `hm` are the directories, not columns (as
//! Flink's filesystem sink writes them). Rows of a part file are in the
//! order the worker read them; the partition's rows are the union of its
//! part files, in no order. Written by
//! [`air_operators::graph::PartitionedCsv`], which documents the layout:
//! each worker commits its part of a minute (part file synced and closed,
//! then `_SUCCESS.r<rank>-w<worker>` beside it) once its watermark passes
//! the minute's end, and keeps `DIR/_WATERMARK.r<rank>-w<worker>` with its
//! watermark and the job's worker count. A reader takes a minute as
//! complete once every worker's `_WATERMARK` is at or past the minute's end
//! and every part file has its marker (with `--checkpoint-dir`, markers
//! and watermark files wait for the checkpoint after the commit, and a
//! resumed run cuts part files back to its checkpoint: see the sink's
//! docs and docs/guide.md, "Checkpoints"). A minute is committed as the
//! watermark passes it, from the generator and from `--input` files alike
//! (event time with `--max-delay-ms` of disorder: a file's bids older than
//! that behind the newest one its worker read are late, dropped and
//! counted); at most 1024 minutes are open per worker (a job that needs
//! more exits with an error).
//!
//! Flink and Beam differ, and we follow Flink:
//! - What: Beam's `Query10` logs every event (persons, auctions and bids,
//!   in Beam's binary coder); Flink's logs bids as CSV. We log bids as CSV.
//! - Files: Beam windows events into fixed windows (`windowSizeSec`, 10 s),
//!   shards them by hash into `5 × maxNumWorkers` shards (a group-by-key:
//!   an exchange) and writes one file per window, shard and pane
//!   (`LOG-<window end>-<shard>-<pane>-<timing>-<random>`), early panes
//!   every `maxLogEvents` events; Flink partitions by the minute of
//!   `dateTime` and rolls part files per writer. We partition by minute as
//!   Flink, with one part file per worker and minute, no exchange (the
//!   rows stay where they were read) and no rolling within a minute.
//! - Commit: Beam writes one `INDEX-<window end>` file per window listing
//!   its files, through a second group-by-key to a single writer; Flink's
//!   partition committer (one task) writes `_SUCCESS` once the watermark
//!   passes the partition time plus 1 min (the minute's end) and every
//!   writer's files of it are finished at a checkpoint. We have no single
//!   writer or coordinator: each worker writes its own marker per part file
//!   and its watermark file, and the reader combines them (above). The
//!   commit point is Flink's: a minute's end.

use super::full::full_bid;
use super::{Cx, Shard, Spec};
use air_operators::graph::{PartitionedCsv, PartitionedExt};
use air_operators::sources::nexmark::{EventKind, FullBid, Text};
use air_runtime::dataflow::{Dataflow, Head, Pipe, Stream};
use std::fmt::Write as _;
use std::io::Write as _;

/// q10 as the driver runs it.
pub const SPEC: Spec = Spec {
    what: "log to file system: every bid as CSV under --out-dir, partitioned by \
           dt=yyyy-MM-dd/hm=HH:mm of its date_time (UTC), one part file per worker and \
           minute, committed as the watermark passes the minute (no header; date_time as \
           yyyy-MM-dd HH:mm:ss.SSS)",
    nature: "a partitioned file sink: no windows",
    columns: &["auction", "bidder", "price", "date_time", "extra"],
    order: "none (each part file in read order; a minute is the union of its part files)",
    honoured: &[
        super::super::common::QueryOption::OutDir,
        super::super::common::QueryOption::MaxDelayMs,
    ],
    window_ms: 60_000,
    slide_ms: 60_000,
    held_rows_per_event: |_| None,
    windowed: false,
    reads: 1,
    global: false,
    build,
};

/// A partition: one minute of event time.
pub const PARTITION_MS: u64 = 60_000;

/// Most minutes open at once per worker (minutes the watermark has not
/// passed).
pub const MAX_OPEN_MINUTES: usize = 1024;

/// Days since 1970-01-01 → (year, month 1..=12, day 1..=31), proleptic
/// Gregorian (counting 400-year eras of 146 097 days from 0000-03-01).
fn civil(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468; // days since 0000-03-01
    let era = z / 146_097;
    let doe = z % 146_097; // day of era, 0..146096
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // 0..399
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // day of the year from March 1
    let mp = (5 * doy + 2) / 153; // month from March, 0..11
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// `dt=yyyy-MM-dd/hm=HH:mm` of the minute holding `ms` (UTC).
pub(crate) fn partition_path(ms: u64, path: &mut String) {
    let (y, mo, d) = civil(ms / 86_400_000);
    let min_of_day = ms % 86_400_000 / 60_000;
    let _ = write!(
        path,
        "dt={y:04}-{mo:02}-{d:02}/hm={:02}:{:02}",
        min_of_day / 60,
        min_of_day % 60
    );
}

/// An event time as `yyyy-MM-dd HH:mm:ss.SSS` (UTC).
struct DateTime(u64);

impl std::fmt::Display for DateTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = self.0;
        let (y, mo, d) = civil(ms / 86_400_000);
        let in_day = ms % 86_400_000;
        write!(
            f,
            "{y:04}-{mo:02}-{d:02} {:02}:{:02}:{:02}.{:03}",
            in_day / 3_600_000,
            in_day / 60_000 % 60,
            in_day / 1000 % 60,
            in_day % 1000
        )
    }
}

/// A q10 row (the columns of [`SPEC`]); written by [`RowWriter`].
struct Q10Row {
    auction: u64,
    bidder: u64,
    price: u64,
    /// ms since the Unix epoch.
    date_time: u64,
    /// Drawn (when lazy) straight into the part file's buffer.
    extra: Text,
}

fn row(b: FullBid) -> Q10Row {
    Q10Row {
        auction: b.auction,
        bidder: b.bidder,
        price: b.price,
        date_time: b.date_time,
        extra: b.extra,
    }
}

/// Writes q10's CSV rows by hand, byte for byte what the `csv` crate's
/// default writer makes of them (a field holding `,`, `"`, `\r` or `\n`
/// quoted, its quotes doubled; `\n` line ends), without serde or a
/// per-row allocation: the date's text up to the second is kept for the
/// rows of the same second.
#[derive(Default)]
struct RowWriter {
    /// The second (ms / 1000) of `prefix`, `None` before the first row.
    second: Option<u64>,
    /// `yyyy-MM-dd HH:mm:ss.` of `second`.
    prefix: Vec<u8>,
}

impl RowWriter {
    /// Appends `r`'s CSV line to `out`.
    fn write(&mut self, r: &Q10Row, out: &mut Vec<u8>) {
        push_u64(out, r.auction);
        out.push(b',');
        push_u64(out, r.bidder);
        out.push(b',');
        push_u64(out, r.price);
        out.push(b',');
        let second = r.date_time / 1000;
        if self.second != Some(second) {
            self.prefix.clear();
            let _ = write!(self.prefix, "{}", DateTime(second * 1000));
            // Drop the milliseconds, `000`.
            self.prefix.truncate(self.prefix.len() - 3);
            self.second = Some(second);
        }
        out.extend_from_slice(&self.prefix);
        let ms = r.date_time % 1000;
        out.extend_from_slice(&[
            b'0' + (ms / 100) as u8,
            b'0' + (ms / 10 % 10) as u8,
            b'0' + (ms % 10) as u8,
            b',',
        ]);
        push_csv_text(out, &r.extra);
        out.push(b'\n');
    }
}

/// Appends `v` in decimal.
fn push_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// Appends `t` as a CSV field: as is, or quoted (quotes doubled) if it
/// holds `,`, `"`, `\r` or `\n` (the `csv` crate's `QuoteStyle::Necessary`).
fn push_csv_text(out: &mut Vec<u8>, t: &Text) {
    let Some(s) = t.as_stored() else {
        // Lazy letters: `a..=z` only, never quoted.
        t.write_to(out);
        return;
    };
    if !s.bytes().any(|c| matches!(c, b',' | b'"' | b'\r' | b'\n')) {
        out.extend_from_slice(s.as_bytes());
        return;
    }
    out.push(b'"');
    for c in s.bytes() {
        if c == b'"' {
            out.push(b'"');
        }
        out.push(c);
    }
    out.push(b'"');
}

/// Full bids → rows → each worker's part files of their minutes.
fn build(cx: &Cx<'_>, df: &Dataflow, shard: &Shard<'_>) {
    let rows = df
        .source(shard.read_full_of(&[EventKind::Bid]))
        .flat_map(|e| full_bid(e).map(row));
    // Event time with `--max-delay-ms` of disorder (a file's bids that
    // are older are late: dropped, counted), so minutes commit as the
    // watermark passes them, from files as from the generator.
    q10_files(
        rows.event_time(|r: &Q10Row| r.date_time, cx.args.max_delay()),
        cx,
    );
}

/// The partitioned sink over `rows`, under `--out-dir`.
fn q10_files<H, P>(rows: Stream<H, P>, cx: &Cx<'_>)
where
    H: Head,
    P: Pipe<H::Out, Out = Q10Row>,
{
    let dir = cx
        .args
        .out_dir
        .clone()
        .expect("validated: q10 has --out-dir");
    // The last minute's path, reused while rows stay in it.
    let mut last: Option<(u64, String)> = None;
    let partition = move |r: &Q10Row, path: &mut String| {
        let minute = r.date_time / PARTITION_MS;
        match &last {
            Some((m, p)) if *m == minute => path.push_str(p),
            _ => {
                partition_path(r.date_time, path);
                last = Some((minute, path.clone()));
            }
        }
        (minute + 1).saturating_mul(PARTITION_MS)
    };
    let mut writer = RowWriter::default();
    rows.sink_partitioned_with(
        PartitionedCsv::new(dir, partition)
            .max_open(MAX_OPEN_MINUTES)
            .workers_per_rank(cx.args.runtime.job_config().workers),
        move |r: &Q10Row, out: &mut Vec<u8>| writer.write(r, out),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minutes_and_times_in_utc() {
        let p = |ms| {
            let mut s = String::new();
            partition_path(ms, &mut s);
            s
        };
        assert_eq!(p(0), "dt=1970-01-01/hm=00:00");
        // 2015-07-15 00:00:00 UTC (Beam's generator's base time) and ours,
        // 1 700 000 000 000 ms.
        assert_eq!(p(1_436_918_400_000), "dt=2015-07-15/hm=00:00");
        assert_eq!(p(1_436_918_400_000 + 61_999), "dt=2015-07-15/hm=00:01");
        assert_eq!(p(1_700_000_000_000), "dt=2023-11-14/hm=22:13");
        assert_eq!(
            DateTime(1_700_000_000_000).to_string(),
            "2023-11-14 22:13:20.000"
        );
        // 2024-02-29 23:59:59.999 and the next millisecond.
        assert_eq!(p(1_709_251_199_999), "dt=2024-02-29/hm=23:59");
        assert_eq!(p(1_709_251_200_000), "dt=2024-03-01/hm=00:00");
        assert_eq!(
            DateTime(1_709_251_199_999).to_string(),
            "2024-02-29 23:59:59.999"
        );
        assert_eq!(
            DateTime(951_782_400_000).to_string(),
            "2000-02-29 00:00:00.000"
        );
        assert_eq!(
            DateTime(4_102_444_800_123).to_string(),
            "2100-01-01 00:00:00.123"
        );
    }

    /// What the `csv` crate's writer made of a row (the writer before
    /// [`RowWriter`]).
    #[derive(serde::Serialize)]
    struct SerdeRow {
        auction: u64,
        bidder: u64,
        price: u64,
        date_time: String,
        extra: String,
    }

    #[test]
    fn hand_written_rows_equal_the_csv_crates() {
        let extras = [
            Text::from(""),
            Text::from("plain letters"),
            Text::from("a,b"),
            Text::from("say \"hi\""),
            Text::from("two\nlines\r"),
            Text::from("\""),
            Text::from(" é, ü "),
        ];
        let times = [
            0,
            999,
            1_000,
            1_700_000_000_000,
            1_700_000_000_001,
            1_700_000_000_999,
            1_700_000_001_000,
            1_700_000_000_500, // back to an earlier second
            1_709_251_199_999,
            4_102_444_800_123,
            u64::MAX,
        ];
        let mut w = RowWriter::default();
        let mut got = Vec::new();
        let mut csv = csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(Vec::new());
        let mut n = 0u64;
        for &t in &times {
            for e in &extras {
                n += 1;
                let r = Q10Row {
                    auction: n * 1_000_003,
                    bidder: u64::MAX - n,
                    price: n % 3,
                    date_time: t,
                    extra: e.clone(),
                };
                w.write(&r, &mut got);
                csv.serialize(SerdeRow {
                    auction: r.auction,
                    bidder: r.bidder,
                    price: r.price,
                    date_time: DateTime(t).to_string(),
                    extra: e.to_string(),
                })
                .unwrap();
            }
        }
        let want = csv.into_inner().unwrap();
        assert_eq!(
            String::from_utf8(got).unwrap(),
            String::from_utf8(want).unwrap()
        );
    }
}
