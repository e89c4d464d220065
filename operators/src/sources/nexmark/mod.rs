//! The NEXMark data layer: the event model, a sharded generator and
//! JSON-lines files.
//!
//! NEXMark (Tucker et al., "NEXMark – A Benchmark for Queries over Data
//! Streams") models an online auction: persons join, open auctions and bid.
//! The generator follows the Apache Beam NEXMark generator
//! (`org.apache.beam.sdk.nexmark.sources.generator`) and its Flink port
//! (github: nexmark/nexmark):
//!
//! - event `n` (0-based) is a person if `n % 50 < 1`, an auction if
//!   `n % 50 < 4`, else a bid (proportions 1 : 3 : 46);
//! - person and auction ids are derived from `n` (from 1000 on, one more
//!   per person / auction); sellers and bidders are hot (probability
//!   `1 - 1/4`) or one of the last 1000 persons (plus a lead of 10); a bid is
//!   for the hot auction (probability `1 - 1/2`) or one of the last 100
//!   auctions (plus a lead of 10); categories `10..15`; prices log-uniform
//!   from $1 to $10^6 in cents; an auction lasts up to twice the time it
//!   takes to open 100 more;
//! - event time: `base_time_ms + floor(n · 1000 / events_per_s)` ms
//!   (fractional inter-event delay, so high rates do not round to zero).
//!
//! Event `n` is a pure function of `(config, n)` (its random numbers come
//! from wyrand seeded by `(seed, n)`), so shards are exact: worker `w` of
//! `W` generates `w, w + W, …` and the union is the sequential stream.
//!
//! This module provides:
//!
//! - [`NexEvent`] ([`Person`], [`Auction`], [`Bid`], [`Name`]): the compact,
//!   `Copy`, `#[repr(C)]`, rkyv-archivable records the runtime moves;
//! - [`NexmarkGenerator`]: the sharded, allocation-free generator of
//!   compact events ([`compact_event`] is event `n` alone);
//! - [`FullEvent`] and [`full_event`]: every field of the specification
//!   (names, e-mail, credit card, city, state, item name, description,
//!   channel, URL, `extra` padding to the spec's average sizes), with
//!   [`compact`] the projection; [`NexmarkFullGenerator`], the same shards
//!   as full events (allocating their strings);
//! - JSON lines: [`write_json_line`], [`parse_json_line`] (compact),
//!   [`parse_full_json_line`] (every field), the range-splittable
//!   [`NexmarkFileReader`] and [`NexmarkFullFileReader`], and
//!   [`gen_to_file`] (the backend of `air gen nexmark`);
//! - Apache Beam NEXMark's nested JSON form (`{"newPerson":{…},
//!   "newAuction":null,"bid":null}`, ISO-8601 or ms `dateTime`), which
//!   both parsers and readers also accept, detected per line:
//!   [`write_beam_json_line`], [`JsonForm`], [`gen_to_file_as`], [`gen_to_writer_as`] (see the
//!   `beam` module's docs on [`write_beam_json_line`]).
//!
//! ```
//! use air_operators::sources::nexmark::*;
//! let cfg = NexmarkConfig { events: Some(1000), ..NexmarkConfig::default() };
//! let mut shards: Vec<_> = (0..2).map(|w| NexmarkGenerator::new(&cfg, w, 2)).collect();
//! let mut batch = vec![NexEvent::default(); 256];
//! let n = shards[0].fill(&mut batch);
//! assert_eq!(batch[0], compact_event(&cfg, 0));
//! assert!(matches!(batch[0], NexEvent::Person(p) if p.id == 1000));
//!
//! let full = full_event(&cfg, 10);
//! assert_eq!(compact(&full), batch[5]); // shard 0 holds 0, 2, 4, …
//! let mut line = Vec::new();
//! write_json_line(&full, &mut line);
//! assert!(line.starts_with(br#"{"type":"bid","auction":"#));
//! assert_eq!(parse_json_line(&line).unwrap(), batch[5]);
//! # assert_eq!(n, 256);
//! ```

mod beam;
mod config;
mod files;
mod full;
mod generator;
mod json;
mod live;
mod model;
mod reader;
mod text;

pub use crate::sources::ysb::{split_ranges, OnBadRecord};
pub use beam::{parse_instant, write_beam_json_line, write_instant, JsonForm, MAX_ISO_MS};
pub use config::{
    NexmarkConfig, AUCTION_PROPORTION, BID_PROPORTION, DEFAULT_BASE_TIME_MS, FIRST_AUCTION_ID,
    FIRST_CATEGORY_ID, FIRST_PERSON_ID, HOT_BLOCK, NUM_CATEGORIES, PERSON_PROPORTION,
    PROPORTION_DENOMINATOR,
};
pub use files::{gen_to_file, gen_to_file_as, gen_to_writer_as, gen_to_writer_paced};
pub use full::{full_event, NexmarkFullGenerator, CHANNELS_NUMBER, HOT_CHANNELS};
pub use generator::{
    compact_event, event_kind, last_base0_auction_id, last_base0_person_id, BidFill,
    NexmarkGenerator,
};
pub use json::{
    parse_full_json_line, parse_json_line, write_json_line, Field, FieldError, FieldErrorKind,
    TYPE_VALUES,
};
pub use live::{LiveEvents, LiveFill, LiveShare, OpenLive};
pub use model::{
    compact, ArchivedAuction, ArchivedBid, ArchivedName, ArchivedNexEvent, ArchivedPerson, Auction,
    Bid, EventKind, FullAuction, FullBid, FullEvent, FullPerson, Name, NameTooLong, NexEvent,
    Person, NAME_CAP,
};
pub use reader::{
    EventFileReader, JsonEvent, NexmarkFileReader, NexmarkFullFileReader, ReaderOptions,
    SourceError, SourceErrorKind, DEFAULT_MAX_LINE_LEN,
};
pub use text::Text;
