//! The Yahoo Streaming Benchmark (YSB) data layer.
//!
//! The benchmark is defined by Yahoo's `streaming-benchmarks` repository
//! (github: yahoo/streaming-benchmarks, `data/src/setup/core.clj` for the
//! generator and the event schema, and the Flink/Storm/Spark queries for the
//! pipeline). Its pipeline is: read JSON events → keep `event_type == "view"` →
//! project `(ad_id, event_time)` → join `ad_id` to its campaign → count per
//! campaign over 10 s tumbling event-time windows.
//!
//! This module provides everything below the dataflow runtime:
//!
//! - [`YsbEvent`]: the binary record the runtime moves (64 bytes,
//!   `#[repr(C)]`, rkyv-archivable), with [`AdType`] and [`EventType`].
//! - UUID helpers ([`format_uuid`], [`parse_uuid`]): ids are `u128` in memory
//!   and canonical lowercase `8-4-4-4-12` hex strings on the wire.
//! - [`Campaigns`]: the ad → campaign map (YSB keeps it in Redis), with a fast
//!   open-addressing lookup on the hot path and two file formats.
//! - [`YsbGenerator`]: a per-worker, seeded, very fast event generator with
//!   an exact event budget, deterministic or wall-clock event times, and a
//!   drift-free [`Pacer`] for `--rate` / `--duration` (from
//!   [`crate::sources::pace`], re-exported here).
//! - JSON lines: [`write_json_line`], [`parse_json_line`] /
//!   [`parse_json_line_with`] (full or [`ParseMode::QueryFields`]), the
//!   range-splittable [`YsbFileReader`] and [`gen_to_files`] (the backend of
//!   `air gen ysb`).
//!
//! ```
//! use air_operators::sources::ysb::*;
//! let campaigns = Campaigns::generate(100, 10, 42);
//! let config = YsbGenConfig::new(7, &campaigns).with_events(Some(1000));
//! let mut gen = YsbGenerator::new(&config, 0, 1);
//! let mut batch = vec![YsbEvent::default(); 256];
//! let mut total = 0;
//! loop {
//!     let n = gen.fill(&mut batch);
//!     if n == 0 { break; }
//!     for e in &batch[..n] {
//!         assert!(campaigns.campaign_of(e.ad_id).is_some());
//!     }
//!     total += n;
//! }
//! assert_eq!(total, 1000);
//!
//! let mut line = Vec::new();
//! write_json_line(&batch[0], &mut line);
//! assert_eq!(parse_json_line(&line).unwrap(), batch[0]);
//! ```

mod campaigns;
mod event;
mod files;
mod generator;
mod json;
mod reader;
use super::rng;

pub use super::pace::{PacedFill, Pacer};
pub use campaigns::{
    Campaigns, CampaignsError, CampaignsErrorKind, CampaignsFormat, FromPairsError,
};
pub use event::{
    format_uuid, parse_uuid, uuid_to_string, AdType, ArchivedAdType, ArchivedEventType,
    ArchivedYsbEvent, EventType, UnknownVariant, YsbEvent, UUID_LEN,
};
pub use files::{gen_to_files, gen_to_writer, GenError, GenFilesOptions, GenSummary};
pub use generator::{CampaignZipf, EventTimeMode, YsbGenConfig, YsbGenerator};
pub use json::{
    parse_ipv4, parse_json_line, parse_json_line_with, parse_millis, write_json_line, Field,
    FieldError, FieldErrorKind, ParseMode, MAX_JSON_LINE_LEN,
};
pub use reader::{
    split_ranges, OnBadRecord, ReaderOptions, SourceError, SourceErrorKind, YsbFileReader,
    DEFAULT_MAX_LINE_LEN,
};
