//! q3, local item suggestion: who sells in category 10 from the states
//! OR, ID or CA, and which auctions (Beam's `Query3`; the Flink suite's
//! `q3.sql`). Reads full events ([`Shard::read_full`]): the person's
//! `city` and `state` are not in the compact events.
//!
//! Definition: every auction of `category = 10` joined with the person
//! whose `id` is its `seller`, if that person's `state` is exactly `OR`,
//! `ID` or `CA`. Columns: `name, city, state, id` (the person's name, city
//! and state, the auction's id: Beam's `NameCityStateId` and Flink's
//! columns, in that order). One row per joined auction. No windows;
//! `--max-delay-ms` is honoured (the bounded out-of-orderness of the
//! input: timers need a watermark).
//!
//! Row order: by the time the pair became complete (the later `date_time`
//! of the auction and the person; not a column), then by auction id. Rows
//! stream out: each is released as the watermark passes its time.
//!
//! State (Beam's `JoinDoFn`): persons and auctions, filtered, are one
//! stream keyed by person id (an auction by its seller); a key's state is
//! its person once seen and the auctions that came before it. An auction
//! finding its person is a row; a person arriving flushes its waiting
//! auctions as rows. Each event of the key sets Beam's cleanup timer at its
//! time + `maxAuctionsWaitingTime` ([`MAX_AUCTIONS_WAITING_MS`], Beam's
//! default 600 s of event time): when the key has had no event for that
//! long, its person and waiting auctions are freed (a later auction of the
//! same seller then waits for a person that will not come again, as in
//! Beam).
//!
//! Where we differ:
//! - Flink's SQL is an unbounded join: it keeps every person and every
//!   auction forever, so an auction matches its seller at any distance in
//!   time. We follow Beam's cleanup timer: a person is forgotten 600 s of
//!   event time after the last event of its id. (With the generator a
//!   seller is one of the last 1000 persons or up to 10 ahead, so the rows
//!   equal Flink's unless fewer than 1000 persons come in 600 s: below
//!   about 83 events/s.)
//! - Waiting auctions: Beam clears them only with the key's timer, which
//!   every new auction of the seller pushes back, so a seller who never
//!   comes (e.g. one outside OR, ID and CA: those persons are filtered out
//!   before the join) but keeps selling holds all its auctions. We bound
//!   each waiting auction by itself: it waits at most
//!   [`MAX_AUCTIONS_WAITING_MS`] past its own `date_time` for its seller
//!   (an event exactly that late still finds it), then it is dropped.
//!   Memory is then at most the persons and auctions of the last 600 s of
//!   event time, whatever their sellers, and the records the watermark has
//!   not passed yet. (The generator's sellers come at most 10 persons,
//!   about 500 events, after their auctions: no row is lost to this at
//!   any rate above 1 event/s.)
//! - Order of events: Beam joins in arrival order, so whether an event near
//!   a timer's time still sees the state depends on the runner's timing.
//!   We process each key's events in event-time order (a record waits at
//!   its key's owner until the watermark passes its time; within a
//!   millisecond persons go first, then auctions by id), so the rows do not
//!   depend on `--workers` or arrival order. Rows leave no later for it:
//!   the writer releases them only as the watermark passes them anyway.
//! - A second person with the id of a known one (a bad file): the first
//!   stands (Beam logs it and keeps the first too); it still counts as an
//!   event of the key for the timer, as in Beam.

use super::{bid_rows, Cx, Shard, Spec};
use crate::queries::common::QueryOption::*;
use air_operators::graph::{KeyedProcessExt, KeyedProcessFunction, ProcessCx};
use air_operators::sources::nexmark::{EventKind, FullEvent};
use air_operators::sources::text::Word;
use air_runtime::dataflow::Dataflow;
use serde::Serialize;

/// Beam's `NexmarkConfiguration.maxAuctionsWaitingTime` default (600 s),
/// in ms of event time: a key is freed when it has had no event for this
/// long, and an auction waits at most this long for its seller.
pub const MAX_AUCTIONS_WAITING_MS: u64 = 600_000;

/// The states whose sellers q3 reports (Beam's and Flink's filter).
const STATES: [&str; 3] = ["OR", "ID", "CA"];

/// The category q3 reports.
const CATEGORY: u64 = 10;

/// q3 as the driver runs it.
pub const SPEC: Spec = Spec {
    what: "local item suggestion: every category-10 auction whose seller lives in OR, ID or CA, \
           with the seller's name, city and state (a person is forgotten 600 s of event time \
           after its last event, an auction waits at most 600 s for its seller: Beam's timer)",
    nature: "an incremental join over the whole stream: no windows",
    columns: &["name", "city", "state", "id"],
    order: "the time the pair became complete (the later date_time of auction and person, not \
            a column), id",
    honoured: &[MaxDelayMs],
    window_ms: 10_000,
    slide_ms: 2_000,
    held_rows_per_event: |_| None,
    windowed: false,
    reads: 1,
    global: false,
    build,
};

/// A person of OR, ID or CA: what q3 keeps of it.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct Seller {
    /// Person id.
    pub id: u64,
    /// Event time, ms.
    pub date_time: u64,
    /// Name.
    pub name: Word,
    /// City.
    pub city: Word,
    /// State (`OR`, `ID` or `CA`).
    pub state: Word,
}

/// A category-10 auction: what q3 keeps of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct Sale {
    /// Auction id.
    pub id: u64,
    /// The seller's person id.
    pub seller: u64,
    /// Event time, ms.
    pub date_time: u64,
}

/// The join's input: a person or an auction, keyed by person id
/// ([`Side::person_id`]).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub enum Side {
    /// A person of OR, ID or CA.
    Person(Seller),
    /// An auction of category 10.
    Auction(Sale),
}

impl Side {
    /// The event if q3 uses it: a person of OR, ID or CA, or an auction of
    /// category 10.
    pub fn of(e: FullEvent) -> Option<Side> {
        match e {
            FullEvent::Person(p) if STATES.contains(&p.state.as_str()) => {
                Some(Side::Person(Seller {
                    id: p.id,
                    date_time: p.date_time,
                    name: Word::new(&p.name),
                    city: Word::new(&p.city),
                    state: Word::new(&p.state),
                }))
            }
            FullEvent::Auction(a) if a.category == CATEGORY => Some(Side::Auction(Sale {
                id: a.id,
                seller: a.seller,
                date_time: a.date_time,
            })),
            _ => None,
        }
    }

    /// The key: the person's id, or the auction's seller.
    #[inline]
    pub fn person_id(&self) -> u64 {
        match self {
            Side::Person(p) => p.id,
            Side::Auction(a) => a.seller,
        }
    }

    /// Event time, ms.
    #[inline]
    pub fn date_time(&self) -> u64 {
        match self {
            Side::Person(p) => p.date_time,
            Side::Auction(a) => a.date_time,
        }
    }

    /// The order of a key's events: by time; in one millisecond persons
    /// first (by their fields), then auctions by id.
    fn order(&self) -> (u64, u8, u64, Option<(&Word, &Word, &Word)>) {
        match self {
            Side::Person(p) => (p.date_time, 0, 0, Some((&p.name, &p.city, &p.state))),
            Side::Auction(a) => (a.date_time, 1, a.id, None),
        }
    }
}

/// A q3 result: the seller and the auction, complete at `time` (ms).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct Suggestion {
    /// When the pair became complete: the later `date_time` of the two, ms.
    pub time: u64,
    /// The auction's id.
    pub auction: u64,
    /// The seller's name.
    pub name: Word,
    /// The seller's city.
    pub city: Word,
    /// The seller's state.
    pub state: Word,
}

/// One person id's state at its owner (saved at checkpoints).
#[derive(Default, Clone, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct Key {
    /// Records not yet joined: the watermark has not passed their time
    /// (each has a timer at its time).
    pending: Vec<Side>,
    /// The person, once seen (and until the cleanup).
    person: Option<Seller>,
    /// Auctions that came before the person.
    waiting: Vec<Sale>,
    /// Time of the newest joined event, ms (Beam's timer base).
    last: u64,
    /// The cleanup timer set, if any.
    cleanup: Option<u64>,
}

impl Key {
    /// Joins one event at `t` (events in time order), emitting rows.
    fn join(&mut self, e: Side, t: u64, wait: u64, cx: &mut ProcessCx<Suggestion>) {
        if t > self.last.saturating_add(wait) {
            // Beam's cleanup timer would have fired before this event.
            self.person = None;
            self.waiting.clear();
        }
        // Each auction waits at most `wait` past its own time.
        self.waiting
            .retain(|a| t <= a.date_time.saturating_add(wait));
        match e {
            Side::Person(p) => {
                if self.person.is_none() {
                    for a in self.waiting.drain(..) {
                        cx.emit(suggestion(&p, a.id, t));
                    }
                    self.person = Some(p);
                }
            }
            Side::Auction(a) => match &self.person {
                Some(p) => cx.emit(suggestion(p, a.id, t)),
                None => self.waiting.push(a),
            },
        }
        self.last = t;
    }

    /// When the key's next cleanup is due, if it holds anything: its oldest
    /// waiting auction's deadline, or its person's.
    fn deadline(&self, wait: u64) -> Option<u64> {
        let oldest = self.waiting.iter().map(|a| a.date_time).min();
        match (oldest, &self.person) {
            (Some(a), _) => Some(a.saturating_add(wait)),
            (None, Some(_)) => Some(self.last.saturating_add(wait)),
            (None, None) => None,
        }
    }
}

fn suggestion(p: &Seller, auction: u64, time: u64) -> Suggestion {
    Suggestion {
        time,
        auction,
        name: p.name.clone(),
        city: p.city.clone(),
        state: p.state.clone(),
    }
}

/// The q3 join (see the module docs): Beam's `JoinDoFn` over a key's
/// events in event-time order.
pub struct Join {
    /// `maxAuctionsWaitingTime`, ms.
    pub wait: u64,
}

impl KeyedProcessFunction<u64, Side> for Join {
    type State = Key;
    type Out = Suggestion;

    fn process(
        &mut self,
        _id: &u64,
        record: Side,
        time: u64,
        s: &mut Key,
        cx: &mut ProcessCx<Suggestion>,
    ) {
        // Joined when the watermark passes its time: every event of the key
        // up to then has come.
        s.pending.push(record);
        cx.register_timer(time);
    }

    fn on_timer(&mut self, _id: &u64, t: u64, s: &mut Key, cx: &mut ProcessCx<Suggestion>) {
        if s.cleanup == Some(t) {
            s.cleanup = None; // fired
        }
        let mut due: Vec<Side> = Vec::new();
        s.pending.retain(|e| {
            let now = e.date_time() <= t;
            if now {
                due.push(e.clone());
            }
            !now
        });
        due.sort_by(|a, b| a.order().cmp(&b.order()));
        for e in due {
            let at = e.date_time();
            s.join(e, at, self.wait, cx);
        }
        // The watermark is past `t`: no event at or before it will come.
        if t >= s.last.saturating_add(self.wait) {
            s.person = None;
            s.waiting.clear();
        }
        let wait = self.wait;
        s.waiting.retain(|a| t < a.date_time.saturating_add(wait));
        let next = s.deadline(self.wait);
        if next != s.cleanup {
            if let Some(old) = s.cleanup {
                // Unless a pending record shares that timer.
                if !s.pending.iter().any(|e| e.date_time() == old) {
                    cx.delete_timer(old);
                }
            }
            if let Some(n) = next {
                cx.register_timer(n);
            }
            s.cleanup = next;
        }
        if s.pending.is_empty() && s.person.is_none() && s.waiting.is_empty() {
            cx.clear_state();
        }
    }
}

/// A q3 CSV row (the columns of [`SPEC`]).
#[derive(Serialize)]
struct Q3Csv {
    name: Word,
    city: Word,
    state: Word,
    id: u64,
}

/// Full events → persons of OR/ID/CA and auctions of category 10, keyed by
/// person id → the join → rows released as the watermark passes their
/// time.
fn build(cx: &Cx<'_>, df: &Dataflow, shard: &Shard<'_>) {
    let rows = df
        .source(shard.read_full_of(&[EventKind::Person, EventKind::Auction]))
        .event_time(FullEvent::date_time, cx.args.max_delay())
        .flat_map(Side::of)
        .key_by(Side::person_id)
        .process_checkpointed(
            Side::date_time,
            Join {
                wait: MAX_AUCTIONS_WAITING_MS,
            },
        );
    bid_rows(
        rows,
        |r: &Suggestion| r.time.saturating_add(1),
        |w| w.value.auction,
        |w| {
            let r = w.value;
            Q3Csv {
                name: r.name,
                city: r.city,
                state: r.state,
                id: r.auction,
            }
        },
        cx,
    );
}
