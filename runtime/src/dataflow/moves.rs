//! Key groups moving between workers during a job, with their state
//! (docs/design.md, "Hot keys: moving key groups").
//!
//! An edge whose operator can hand its keyed state over (it saves and
//! rescales: [`super::Operator::rescale`]) may change its key group →
//! worker table at a checkpoint barrier. The table in force after barrier
//! `n` is a pure function of `n` and of what every worker knows alike, so
//! no process decides for the others:
//!
//! - the sending side of such an edge ([`super::cx::EdgeTx`]) routes by the
//!   new table from the moment it sent barrier `n` to every worker;
//! - the operator, once its inputs are aligned at barrier `n`, saves its
//!   state and sends it, in [`FrameKind::State`] frames on its own input
//!   edge, to every worker (the whole state to a worker that gains one of
//!   its groups, an empty one to the others), then keeps what arrives
//!   until it has every worker's state; it then takes from those states
//!   the keys it owns under the new table ([`super::Operator::rescale`],
//!   which replaces what it held) and goes on with what it kept, in order.
//!
//! Every record sent after barrier `n` is routed by the new table and read
//! after the move, so results equal those of static routing. A state
//! frame is sent without waiting ([`pump`], at every loop of the worker):
//! a worker never blocks on a full ring while holding what the others
//! wait for, and a worker ends only once it owes nothing.
//!
//! Which table: today only `AIR_MOVE_KEY_GROUPS=rotate` (set in the
//! environment of a job with checkpoints): at every barrier `n`, every key
//! group goes to the worker `n` after its first owner
//! ([`Assignment::rotated`]), so every byte of keyed state crosses at
//! every barrier: the test that moving is exact. Tables chosen from load
//! figures come next.
//!
//! State frames may follow a sender's End (a worker whose source ended
//! still owes its operator's state at later barriers): a moving edge's
//! receiver reads every ring to its last frame, and its operator's end
//! waits while a move does ([`super::cx::EdgeConsumer::awaits_state`]).

use crate::keygroups::{Assignment, KeyGroups};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Writes a frame's payload into the ring's buffer; returns its length.
pub(crate) type WriteFrame<'a> = dyn FnMut(&mut [u8]) -> Option<usize> + 'a;

/// Tries one state frame on `(edge, dest)` of `len` bytes (`Ok(false)`:
/// no room).
pub(crate) type SendState<'a, E> =
    dyn FnMut(usize, usize, usize, &mut WriteFrame<'_>) -> Result<bool, E> + 'a;

/// Bytes of a state frame's header: the barrier id, the state's total
/// length and this piece's offset (each a little-endian `u64`).
pub(crate) const STATE_HEADER: usize = 24;

/// How a job's key groups move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoveMode {
    /// They never move (the default).
    Never,
    /// At every checkpoint barrier `n`, every group moves to the worker
    /// `n` after its first owner (`AIR_MOVE_KEY_GROUPS=rotate`; tests).
    Rotate,
}

impl MoveMode {
    /// The mode `AIR_MOVE_KEY_GROUPS` asks for (`rotate`; unset or
    /// anything else: [`MoveMode::Never`]).
    pub fn from_env() -> MoveMode {
        match std::env::var("AIR_MOVE_KEY_GROUPS").as_deref() {
            Ok("rotate") => MoveMode::Rotate,
            _ => MoveMode::Never,
        }
    }
}

thread_local! {
    /// This worker's mode (set at its start).
    static MODE: Cell<MoveMode> = const { Cell::new(MoveMode::Never) };
    /// State this worker owes other workers, oldest first.
    static OWED: RefCell<VecDeque<Owed>> = const { RefCell::new(VecDeque::new()) };
    /// This worker's figures.
    static FIGURES: Cell<MoveFigures> = const { Cell::new(MoveFigures::ZERO) };
}

/// What moving key groups cost one worker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MoveFigures {
    /// Moves its operators took part in (one per operator and barrier
    /// whose table changed).
    pub moves: u64,
    /// Key groups its operators gave away.
    pub groups_given: u64,
    /// Bytes of state it sent to other workers.
    pub bytes_sent: u64,
    /// Time its operators held their input waiting for state, ns.
    pub paused_ns: u64,
}

impl MoveFigures {
    const ZERO: MoveFigures = MoveFigures {
        moves: 0,
        groups_given: 0,
        bytes_sent: 0,
        paused_ns: 0,
    };
}

/// Sets this worker's mode at its start (clears what a job before left).
pub(crate) fn begin(mode: MoveMode) {
    MODE.with(|m| m.set(mode));
    OWED.with(|o| o.borrow_mut().clear());
    FIGURES.with(|f| f.set(MoveFigures::ZERO));
}

/// Whether key groups may move in this worker's job (set before the
/// worker builds its graph): an operator that finds a key's owner itself
/// must then ask its edge's table ([`super::Cx::owner_of_group`]).
pub fn enabled() -> bool {
    MODE.with(|m| m.get()) != MoveMode::Never
}

/// This worker's figures so far.
pub fn figures() -> MoveFigures {
    FIGURES.with(|f| f.get())
}

fn count(f: impl FnOnce(&mut MoveFigures)) {
    FIGURES.with(|c| {
        let mut v = c.get();
        f(&mut v);
        c.set(v);
    });
}

/// The table in force after barrier `id` on an edge of `groups`.
pub(crate) fn table_at(groups: KeyGroups, id: u64) -> Assignment {
    match MODE.with(|m| m.get()) {
        MoveMode::Never => Assignment::ranges(groups),
        MoveMode::Rotate => Assignment::rotated(groups, id),
    }
}

/// State owed to one worker: `bytes` (shared by every destination), of
/// which `sent` went out.
struct Owed {
    edge: usize,
    dest: usize,
    epoch: u64,
    bytes: Arc<[u8]>,
    sent: usize,
    /// A piece went (an empty state is one header-only frame).
    started: bool,
}

/// Owes `state` (an operator's saved state at barrier `epoch`) on `edge`
/// to every worker `d` for which `gives(d)`, an empty state to the others.
pub(crate) fn owe(
    edge: usize,
    epoch: u64,
    workers: usize,
    state: Vec<u8>,
    gives: impl Fn(usize) -> bool,
) {
    let bytes: Arc<[u8]> = state.into();
    let empty: Arc<[u8]> = Arc::new([]);
    OWED.with(|o| {
        let mut o = o.borrow_mut();
        for dest in 0..workers {
            let b = if gives(dest) {
                bytes.clone()
            } else {
                empty.clone()
            };
            o.push_back(Owed {
                edge,
                dest,
                epoch,
                bytes: b,
                sent: 0,
                started: false,
            });
        }
    });
}

/// Whether this worker owes state on any edge.
pub(crate) fn owes_any() -> bool {
    OWED.with(|o| !o.borrow().is_empty())
}

/// Sends what this worker owes, as far as rings have room, never waiting:
/// `send(edge, dest, payload_len, write)` tries one frame (`Ok(false)`:
/// no room) and `max_frame(edge)` is the largest payload of the edge.
pub(crate) fn pump<E>(
    mut send: impl FnMut(usize, usize, usize, &mut WriteFrame<'_>) -> Result<bool, E>,
    max_frame: impl Fn(usize) -> usize,
) -> Result<(), E> {
    pump_where(|_, _| true, &mut send, &max_frame).map(drop)
}

/// Whether this worker owes state on `edge` to `dest`.
#[inline]
pub(crate) fn owes_to(edge: usize, dest: usize) -> bool {
    OWED.with(|o| {
        let o = o.borrow();
        !o.is_empty() && o.iter().any(|w| w.edge == edge && w.dest == dest)
    })
}

/// Sends what this worker owes on `edge` to `dest` as far as the ring has
/// room ([`pump`]); returns whether all of it went. A sender of `edge`
/// calls it before each batch to `dest`: state goes before more records
/// (the receiver keeps those until it has every worker's state).
pub(crate) fn pump_to<E>(
    edge: usize,
    dest: usize,
    max_frame: usize,
    send: &mut dyn FnMut(usize, &mut WriteFrame<'_>) -> Result<bool, E>,
) -> Result<bool, E> {
    pump_where(
        |e, d| e == edge && d == dest,
        &mut |_, _, len, w| send(len, w),
        &|_| max_frame,
    )?;
    Ok(!owes_to(edge, dest))
}

/// [`pump`] for the debts `which(edge, dest)` selects.
fn pump_where<E>(
    which: impl Fn(usize, usize) -> bool,
    send: &mut SendState<'_, E>,
    max_frame: &dyn Fn(usize) -> usize,
) -> Result<(), E> {
    let mut owed = OWED.with(|o| std::mem::take(&mut *o.borrow_mut()));
    if owed.is_empty() {
        return Ok(());
    }
    let mut blocked: Vec<(usize, usize)> = Vec::new();
    let mut result = Ok(());
    for w in owed.iter_mut() {
        if !which(w.edge, w.dest) || blocked.contains(&(w.edge, w.dest)) {
            continue;
        }
        // Pieces of at most a quarter of a frame: they find room between
        // the records in a busy ring.
        let piece_max = (max_frame(w.edge) / 4).saturating_sub(STATE_HEADER).max(1);
        while !w.started || w.sent < w.bytes.len() {
            let n = piece_max.min(w.bytes.len() - w.sent);
            let (epoch, total, at) = (w.epoch, w.bytes.len() as u64, w.sent as u64);
            let piece = &w.bytes[w.sent..w.sent + n];
            let ok = match send(w.edge, w.dest, STATE_HEADER + n, &mut |buf| {
                buf[..8].copy_from_slice(&epoch.to_le_bytes());
                buf[8..16].copy_from_slice(&total.to_le_bytes());
                buf[16..24].copy_from_slice(&at.to_le_bytes());
                buf[STATE_HEADER..STATE_HEADER + n].copy_from_slice(piece);
                Some(STATE_HEADER + n)
            }) {
                Ok(ok) => ok,
                Err(e) => {
                    result = Err(e);
                    false
                }
            };
            if !ok {
                blocked.push((w.edge, w.dest));
                break;
            }
            w.started = true;
            w.sent += n;
            count(|f| f.bytes_sent += n as u64);
        }
        if result.is_err() {
            break;
        }
    }
    owed.retain(|w| !w.started || w.sent < w.bytes.len());
    OWED.with(|o| {
        let mut o = o.borrow_mut();
        // Debts owed during the sends (none today) go after these.
        let newer = std::mem::take(&mut *o);
        *o = owed;
        o.extend(newer);
    });
    result
}

/// What a single-input operator keeps while its key groups move: its
/// input after the barrier, in order.
pub(crate) enum Kept {
    /// An archived batch from worker `from` (a copy, 16-byte aligned).
    Data(usize, rkyv::util::AlignedVec<16>),
    Watermark(u64),
    Barrier(u64),
    /// Every input ended at this final watermark.
    End(u64),
}

/// The moving of one operator's key groups at one worker: the table in
/// force, the move in progress (if any) with what the operator keeps
/// meanwhile (`K`: one delivery of its input), and the states arriving.
pub(crate) struct Mover<K> {
    /// The edge its state travels on (its first input).
    edge: usize,
    me: usize,
    groups: KeyGroups,
    /// The table in force at the operator (the one its input was routed
    /// by since the last barrier it passed).
    assign: Assignment,
    moving: Option<Moving<K>>,
    /// The states of the next moves as they arrive, by barrier: a
    /// two-input operator's first input may bring them before its second
    /// passed the barrier (or while the move before is in progress).
    incoming: Vec<Incoming>,
}

/// A move in progress at barrier `epoch`.
struct Moving<K> {
    epoch: u64,
    /// The table in force once the move is done.
    to: Assignment,
    kept: VecDeque<K>,
    since: Instant,
}

/// The states of the move at barrier `epoch`, as they arrive.
struct Incoming {
    epoch: u64,
    /// Per worker: its state as far as it arrived, and the bytes still due
    /// (`None`: nothing arrived yet).
    parts: Vec<Option<(Vec<u8>, usize)>>,
    /// Workers whose state arrived whole.
    whole: usize,
}

/// A move whose every state arrived: what the operator takes its keys
/// from ([`Arrived::states`], [`Arrived::to`]), then what it kept.
pub(crate) struct Arrived<K> {
    parts: Vec<Option<(Vec<u8>, usize)>>,
    /// The rescale the operator does ([`super::Operator::rescale`]).
    pub(crate) to: super::state::Rescale,
    /// What it kept meanwhile, in order.
    pub(crate) kept: VecDeque<K>,
}

impl<K> Arrived<K> {
    /// Every worker's state (empty ones left out).
    pub(crate) fn states(&self) -> Vec<&[u8]> {
        self.parts
            .iter()
            .filter_map(|p| p.as_ref().map(|(b, _)| b.as_slice()))
            .filter(|b| !b.is_empty())
            .collect()
    }
}

/// What a barrier does to an operator's key groups.
pub(crate) enum AtBarrier<K> {
    /// The table stays: nothing moves.
    Stays,
    /// A move started: the operator keeps what it is given until every
    /// worker's state arrived ([`Mover::add`]).
    Moving,
    /// A move started and every state had arrived already.
    Moved(Arrived<K>),
}

impl<K> Mover<K> {
    /// The mover of the operator fed by `edge` (its state's edge) at
    /// worker `me`, over `groups`.
    pub(crate) fn new(edge: usize, me: usize, groups: KeyGroups) -> Mover<K> {
        Mover {
            edge,
            me,
            groups,
            assign: Assignment::ranges(groups),
            moving: None,
            incoming: Vec::new(),
        }
    }

    /// Whether a move is in progress: the operator keeps what it is given.
    #[inline(always)]
    pub(crate) fn moving(&self) -> bool {
        self.moving.is_some()
    }

    /// Keeps `k` until the move is done.
    pub(crate) fn keep(&mut self, k: K) {
        if let Some(m) = self.moving.as_mut() {
            m.kept.push_back(k);
        }
    }

    /// The operator passed barrier `id` (its inputs are aligned there,
    /// nothing after it was applied): if the table changes, its state
    /// (`save`) is owed to the workers that gain its groups, and a move
    /// starts.
    pub(crate) fn at_barrier(
        &mut self,
        id: u64,
        save: impl FnOnce() -> Option<Vec<u8>>,
    ) -> AtBarrier<K> {
        debug_assert!(self.moving.is_none());
        let to = table_at(self.groups, id);
        if to == self.assign {
            return AtBarrier::Stays;
        }
        let state = save().unwrap_or_default();
        let (me, from) = (self.me, &self.assign);
        let given = (0..from.groups())
            .filter(|&g| from.owner_of_group(g) == me && to.owner_of_group(g) != me)
            .count();
        let workers = self.groups.workers();
        owe(self.edge, id, workers, state, |d| from.gives(&to, me, d));
        count(|f| {
            f.moves += 1;
            f.groups_given += given as u64;
        });
        self.moving = Some(Moving {
            epoch: id,
            to,
            kept: VecDeque::new(),
            since: Instant::now(),
        });
        match self.arrived() {
            Some(a) => AtBarrier::Moved(a),
            None => AtBarrier::Moving,
        }
    }

    /// A state frame from worker `from`: `Ok(Some(arrived))` once every
    /// worker's state of the move in progress arrived whole (the new table
    /// is then in force).
    ///
    /// # Errors
    /// A frame of another barrier than the states arriving, one past its
    /// state's end, or from no worker.
    pub(crate) fn add(&mut self, from: usize, frame: &[u8]) -> Result<Option<Arrived<K>>, String> {
        if frame.len() < STATE_HEADER {
            return Err(format!("a state frame of {} bytes", frame.len()));
        }
        let word =
            |i: usize| u64::from_le_bytes(frame[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
        let (epoch, total, at) = (word(0), word(1) as usize, word(2) as usize);
        let piece = &frame[STATE_HEADER..];
        if let Some(m) = self.moving.as_ref().filter(|m| epoch < m.epoch) {
            return Err(format!(
                "state of barrier {epoch} from worker {from} after the move at barrier {}",
                m.epoch
            ));
        }
        let workers = self.groups.workers();
        let i = match self.incoming.iter().position(|inc| inc.epoch == epoch) {
            Some(i) => i,
            None => {
                self.incoming.push(Incoming {
                    epoch,
                    parts: (0..workers).map(|_| None).collect(),
                    whole: 0,
                });
                self.incoming.len() - 1
            }
        };
        let inc = &mut self.incoming[i];
        let Some(slot) = inc.parts.get_mut(from) else {
            return Err(format!("state from worker {from} of {workers}"));
        };
        let (buf, due) = slot.get_or_insert_with(|| (vec![0; total], total));
        if buf.len() != total || at + piece.len() > total || piece.len() > *due {
            return Err(format!(
                "a piece of {} bytes at {at} of a {total}-byte state from worker {from}",
                piece.len()
            ));
        }
        buf[at..at + piece.len()].copy_from_slice(piece);
        *due -= piece.len();
        if *due == 0 {
            inc.whole += 1;
        }
        Ok(self.arrived())
    }

    /// The move in progress, if every worker's state of it arrived.
    fn arrived(&mut self) -> Option<Arrived<K>> {
        let m = self.moving.as_ref()?;
        let i = self
            .incoming
            .iter()
            .position(|inc| inc.epoch == m.epoch && inc.whole == inc.parts.len())?;
        let inc = self.incoming.swap_remove(i);
        let m = self.moving.take().expect("moving");
        let ns = m
            .since
            .elapsed()
            .min(Duration::from_secs(1 << 30))
            .as_nanos() as u64;
        count(|f| f.paused_ns += ns);
        self.assign = m.to.clone();
        let workers = self.groups.workers();
        Some(Arrived {
            parts: inc.parts,
            to: super::state::Rescale {
                worker: self.me,
                workers,
                from: workers,
                groups: m.to,
            },
            kept: m.kept,
        })
    }
}
