//! The exchange (key_by): the owner hash of a key, and the receiving side of
//! an exchange edge that reads frames in place, tracks each input's
//! watermark and end-of-stream, and hands batches to the graph's operators
//! (the sending side is the graph's, `crate::dataflow`).

use crate::channel::{ChannelRx, Recv};
use crate::metrics::ChannelMetrics;
use crate::RuntimeError;
use air_shm::FrameKind;

/// The hash that decides a key's owner (through its key group,
/// [`crate::keygroups`]):
/// FxHash of the key's `Hash` (no per-process seed, so every rank of a job
/// agrees) finished with the MurmurHash3 64-bit mixer, so that small
/// integer keys spread over the workers.
#[inline]
pub fn key_hash<K: std::hash::Hash + ?Sized>(key: &K) -> u64 {
    use std::hash::Hasher;
    let mut h = rustc_hash::FxHasher::default();
    key.hash(&mut h);
    mix64(h.finish())
}

/// MurmurHash3's 64-bit finalizer (`fmix64`, Austin Appleby): a bijection
/// on u64 whose every output bit depends on every input bit.
#[inline(always)]
pub fn mix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

/// What [`Inputs::poll_raw`] hands on.
#[derive(Debug)]
pub enum InputEvent<'b> {
    /// An archived batch from worker `from` (exactly the frame's payload).
    Data {
        /// The sending worker.
        from: usize,
        /// The archive, 16-byte aligned, read in place.
        bytes: &'b [u8],
    },
    /// The minimum watermark over every input advanced to this value (ms;
    /// `u64::MAX` once every input ended normally).
    Watermark(u64),
    /// Every open input passed checkpoint barrier `id` (and every barrier
    /// before it): everything they sent before it was handed on, nothing
    /// after it yet (the inputs are aligned; docs/design.md "Checkpoints").
    Barrier(u64),
    /// A piece of an operator's keyed state from worker `from`, on its way
    /// to this worker after a barrier that moved key groups
    /// (runtime/src/dataflow/moves.rs). Kept, like data, while its sender
    /// is held: it always comes after the barrier it belongs to.
    State {
        /// The sending worker.
        from: usize,
        /// The frame's payload.
        bytes: &'b [u8],
    },
}

/// A frame of a held sender, kept until the sender is released (in
/// arrival order).
struct HeldFrame {
    /// The sender's index within its channel.
    sender: usize,
    kind: FrameKind,
    /// The payload, 16-byte aligned like a frame in a ring.
    payload: rkyv::util::AlignedVec<16>,
}

/// The state of an edge's senders at one worker: watermarks, ends and
/// checkpoint barriers, per source worker (global index − the channel's
/// first), and the alignment of barriers.
struct Senders {
    /// Per source worker: watermark (ms) and whether it ended.
    wm: Vec<u64>,
    ended: Vec<bool>,
    /// Per source worker: the newest barrier id it sent (0: none yet).
    barrier: Vec<u64>,
    /// Per source worker: its frames waiting in `held`.
    buffered: Vec<u32>,
    /// The barrier id last handed on: the inputs are aligned there.
    aligned: u64,
    /// The largest barrier id any sender sent.
    seen: u64,
    /// When the first sender passed `aligned` (an alignment in progress).
    align_start: Option<std::time::Instant>,
    /// Alignment times, µs: the first sender's barrier to the last one's.
    alignment: hdrhistogram::Histogram<u64>,
    min_wm: u64,
    /// Bytes of the frames kept aside for held senders.
    kept_bytes: usize,
    /// Alignments given up ([`KEPT_BYTES_MAX`]).
    given_up: u64,
}

/// Bytes an edge keeps aside at a worker for senders held by an alignment
/// before it gives the alignment up (64 MiB): their frames are handed on
/// at once, and the checkpoints whose barriers were being aligned are not
/// taken at this edge (its operator never sees those barriers, so they
/// never complete; the next one is aligned again). A held sender is never
/// slowed by backpressure (its frames are read to be kept), so without a
/// bound a sender descheduled for long in the middle of an alignment
/// would let the others fill memory.
/// `AIR_KEPT_BYTES_MAX` overrides it (bytes; for tests that make
/// alignments give up).
pub const KEPT_BYTES_MAX: usize = 64 << 20;

/// [`KEPT_BYTES_MAX`], or `AIR_KEPT_BYTES_MAX` if set to a number.
fn kept_bytes_max() -> usize {
    static MAX: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *MAX.get_or_init(|| {
        std::env::var("AIR_KEPT_BYTES_MAX")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(KEPT_BYTES_MAX)
    })
}

impl Senders {
    /// Whether source worker `s` passed a barrier not handed on yet: what
    /// it sent after that barrier waits.
    #[inline(always)]
    fn held(&self, s: usize) -> bool {
        self.barrier[s] > self.aligned
    }

    /// Hands on the newest barrier every open sender passed, if it is new:
    /// first the watermark advance the frames before it made, then the
    /// barrier. Ended senders count as past every barrier.
    fn align(
        &mut self,
        on: &mut dyn FnMut(InputEvent<'_>) -> Result<usize, RuntimeError>,
    ) -> Result<(), RuntimeError> {
        let min = (0..self.barrier.len())
            .filter(|&s| !self.ended[s])
            .map(|s| self.barrier[s])
            .min()
            .unwrap_or(u64::MAX)
            .min(self.seen);
        if min <= self.aligned {
            return Ok(());
        }
        self.aligned = min;
        if let Some(t) = self.align_start.take() {
            let us = t.elapsed().as_micros().min(u64::MAX as u128) as u64;
            self.alignment.saturating_record(us.max(1));
        }
        if (0..self.barrier.len()).any(|s| self.held(s)) {
            self.align_start = Some(std::time::Instant::now());
        }
        self.hand_on_barrier(min, on)
    }

    /// Gives up the alignment in progress: every sender is released (the
    /// frames kept are handed on in order at the next poll), and the
    /// barriers up to the newest seen are not handed on.
    fn give_up(&mut self) {
        self.aligned = self.seen;
        if let Some(t) = self.align_start.take() {
            let us = t.elapsed().as_micros().min(u64::MAX as u128) as u64;
            self.alignment.saturating_record(us.max(1));
        }
        self.given_up += 1;
    }

    /// Hands on barrier `min` after the watermark advance before it.
    fn hand_on_barrier(
        &mut self,
        min: u64,
        on: &mut dyn FnMut(InputEvent<'_>) -> Result<usize, RuntimeError>,
    ) -> Result<(), RuntimeError> {
        if (0..self.ended.len()).all(|s| self.ended[s]) {
            // Every sender ended: End follows, nothing to align.
            return Ok(());
        }
        let wm = self.wm.iter().copied().min().unwrap_or(u64::MAX);
        if wm > self.min_wm {
            self.min_wm = wm;
            on(InputEvent::Watermark(wm))?;
        }
        on(InputEvent::Barrier(min)).map(drop)
    }
}

/// The receiving side of an exchange at one worker: its input channels, and
/// one watermark per source worker. A channel has one sender (a ring per
/// worker pair) or several (a network ring shared by the workers of a remote
/// rank, whose frames interleave); either way watermarks, end-of-stream
/// and checkpoint barriers are tracked per source worker, so a shared ring
/// ends when every one of its senders ended.
///
/// Barriers are aligned (docs/design.md, "Checkpoints"): a sender that
/// passed a barrier the others have not is held: its frames are still read
/// (a ring left unread could block its sender while this worker waits for
/// it: a deadlock), copied aside and handed on, in order, once the barrier
/// is.
pub struct Inputs<'c> {
    me: usize,
    rx: Vec<Box<dyn ChannelRx + 'c>>,
    /// Per channel: the global index of its sender 0 (its senders are
    /// consecutive workers).
    first: Vec<usize>,
    /// Per channel: senders that have not ended.
    open: Vec<usize>,
    /// Per channel: senders whose End frame was read from the ring (handed
    /// on or kept aside): the ring has nothing more once all have.
    ends_read: Vec<usize>,
    /// Per channel: frames of held senders.
    held: Vec<std::collections::VecDeque<HeldFrame>>,
    senders: Senders,
    /// Channels whose every sender ended.
    n_done: usize,
    /// Per channel: whether it must be polled (its sender cannot ring this
    /// worker's doorbell: the network tier).
    polled: Vec<bool>,
    /// Data and End frames read from polled channels, ever.
    polled_frames: u64,
    validate: bool,
    /// Its operator's key groups may move: state frames may follow a
    /// sender's End, so every ring is read to its last frame.
    moves: bool,
    /// Counters of the receiving side.
    pub metrics: ChannelMetrics,
}

/// One frame of sender `sender` (within channel `ch`, whose sender 0 is
/// global worker `first`) handed on, or kept aside if the sender is held
/// or has frames kept (`keep`: the frame comes from the ring, not from
/// those kept). Ends and barriers update `open` and may align the inputs.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn take_frame(
    st: &mut Senders,
    held: &mut std::collections::VecDeque<HeldFrame>,
    open: &mut usize,
    metrics: &mut ChannelMetrics,
    first: usize,
    keep: bool,
    sender: usize,
    kind: FrameKind,
    payload: &[u8],
    on: &mut dyn FnMut(InputEvent<'_>) -> Result<usize, RuntimeError>,
) -> Result<(), RuntimeError> {
    let s = first + sender;
    if keep && (st.held(s) || st.buffered[s] > 0) {
        let mut copy = rkyv::util::AlignedVec::<16>::with_capacity(payload.len());
        copy.extend_from_slice(payload);
        st.buffered[s] += 1;
        st.kept_bytes += payload.len();
        held.push_back(HeldFrame {
            sender,
            kind,
            payload: copy,
        });
        return Ok(());
    }
    let value = |fill: u8| u64::from_le_bytes(payload[..8].try_into().unwrap_or([fill; 8]));
    match kind {
        FrameKind::Data => {
            metrics.bytes_in += payload.len() as u64;
            metrics.batches_in += 1;
            let n = on(InputEvent::Data {
                from: s,
                bytes: payload,
            })?;
            metrics.records_in += n as u64;
        }
        FrameKind::State => {
            on(InputEvent::State {
                from: s,
                bytes: payload,
            })?;
        }
        FrameKind::Watermark => st.wm[s] = st.wm[s].max(value(0)),
        FrameKind::End => {
            st.wm[s] = st.wm[s].max(value(0xff));
            st.ended[s] = true;
            *open -= 1;
            st.align(on)?;
        }
        FrameKind::Barrier => {
            let id = value(0);
            if id > st.barrier[s] {
                st.barrier[s] = id;
                st.seen = st.seen.max(id);
                if id > st.aligned && st.align_start.is_none() {
                    st.align_start = Some(std::time::Instant::now());
                }
                st.align(on)?;
            }
        }
    }
    Ok(())
}

impl<'c> Inputs<'c> {
    /// Occupancy of this worker's input rings, summed: (bytes queued and
    /// not yet read, total ring capacity in bytes). For live metrics; Relaxed
    /// loads, one per ring.
    pub fn occupancy(&self) -> (u64, u64) {
        self.rx
            .iter()
            .filter_map(|r| r.occupancy())
            .fold((0, 0), |(q, c), (rq, rc)| (q + rq, c + rc))
    }

    /// Whether some input must be polled: its sender does not ring this
    /// worker's doorbell ([`ChannelRx::rings_doorbell`]; the network tier).
    pub fn polled(&self) -> bool {
        self.polled.iter().any(|&p| p)
    }

    /// Data and End frames read so far from the inputs that must be polled
    /// ([`Inputs::polled`]); watermark frames do not count. A worker's loop
    /// watches it to poll those inputs every flush interval while they carry
    /// data, and on the idle grid once they fell quiet.
    pub fn polled_frames(&self) -> u64 {
        self.polled_frames
    }

    /// Its operator's key groups may move ([`crate::dataflow::moves`]):
    /// state frames may follow a sender's End.
    pub fn with_moves(mut self, on: bool) -> Self {
        self.moves = on;
        self
    }

    /// Validates every batch with rkyv (`--validate`), also in release builds.
    pub fn with_validation(mut self, on: bool) -> Self {
        self.validate = on;
        self
    }

    /// Inputs at worker `me` from `rx`, in source-worker order: channel `i`'s
    /// senders are the [`ChannelRx::senders`] workers after those of the
    /// channels before it (a ring per worker pair: one each).
    pub fn new(me: usize, rx: Vec<Box<dyn ChannelRx + 'c>>) -> Self {
        let mut first = Vec::with_capacity(rx.len());
        let mut n = 0;
        for r in &rx {
            first.push(n);
            n += r.senders();
        }
        Inputs {
            me,
            open: rx.iter().map(|r| r.senders()).collect(),
            ends_read: vec![0; rx.len()],
            polled: rx.iter().map(|r| !r.rings_doorbell()).collect(),
            held: rx.iter().map(|_| Default::default()).collect(),
            polled_frames: 0,
            rx,
            first,
            senders: Senders {
                wm: vec![0; n],
                ended: vec![false; n],
                barrier: vec![0; n],
                buffered: vec![0; n],
                kept_bytes: 0,
                given_up: 0,
                aligned: 0,
                seen: 0,
                align_start: None,
                alignment: crate::metrics::alignment_histogram(),
                min_wm: 0,
            },
            n_done: 0,
            validate: false,
            moves: false,
            metrics: ChannelMetrics::default(),
        }
    }

    /// Whether every input has delivered end-of-stream.
    pub fn all_ended(&self) -> bool {
        self.n_done == self.rx.len()
    }

    /// The minimum watermark over all inputs (ms).
    pub fn watermark(&self) -> u64 {
        self.senders.min_wm
    }

    /// The checkpoint barrier last handed on (0: none).
    pub fn aligned_barrier(&self) -> u64 {
        self.senders.aligned
    }

    /// Alignments given up because the frames kept aside passed
    /// [`KEPT_BYTES_MAX`].
    pub fn alignments_given_up(&self) -> u64 {
        self.senders.given_up
    }

    /// Alignment times of the barriers handed on, µs (from the first
    /// sender's barrier to the last one's).
    pub fn alignment(&self) -> &hdrhistogram::Histogram<u64> {
        &self.senders.alignment
    }

    /// Reads up to `budget` frames from each input channel and hands every
    /// data batch (in place, with its source worker), every aligned
    /// checkpoint barrier and every advance of the minimum watermark to
    /// `on`, in channel order; `on` returns the records a batch held
    /// (counted in the metrics). Returns the number of frames read. `on`
    /// errors stop the poll and are returned.
    pub fn poll_raw(
        &mut self,
        budget: usize,
        on: &mut dyn FnMut(InputEvent<'_>) -> Result<usize, RuntimeError>,
    ) -> Result<usize, RuntimeError> {
        let mut frames = 0;
        for ch in 0..self.rx.len() {
            let first = self.first[ch];
            let senders = self.rx[ch].senders();
            if !self.held[ch].is_empty() {
                // Frames of senders released since: hand them on first, in
                // order (a sender held again keeps the rest).
                let was_open = self.open[ch];
                let mut keep = std::collections::VecDeque::new();
                // Senders with a frame kept: their later frames stay too.
                let mut kept = vec![false; senders];
                for f in std::mem::take(&mut self.held[ch]) {
                    let s = first + f.sender;
                    if kept[f.sender] || self.senders.held(s) {
                        kept[f.sender] = true;
                        keep.push_back(f);
                        continue;
                    }
                    self.senders.buffered[s] -= 1;
                    self.senders.kept_bytes -= f.payload.len();
                    take_frame(
                        &mut self.senders,
                        &mut keep,
                        &mut self.open[ch],
                        &mut self.metrics,
                        first,
                        false,
                        f.sender,
                        f.kind,
                        &f.payload,
                        on,
                    )?;
                    frames += 1;
                }
                self.held[ch] = keep;
                if was_open > 0 && self.open[ch] == 0 {
                    self.n_done += 1;
                }
            }
            let ended = self.open[ch] == 0 || self.ends_read[ch] == senders;
            if ended && !self.moves {
                continue;
            }
            let mut got = 0;
            // Data and End frames of this channel (not watermarks).
            let mut carried = 0u64;
            let mut failed: Option<RuntimeError> = None;
            while got < budget {
                let st = &mut self.senders;
                let held = &mut self.held[ch];
                let open = &mut self.open[ch];
                let ends = &mut self.ends_read[ch];
                let m = &mut self.metrics;
                let me = self.me;
                let r = self.rx[ch]
                    .try_recv(&mut |kind, sender, payload| {
                        if failed.is_some() {
                            return;
                        }
                        if sender == crate::channel::ALL_SENDERS && kind == FrameKind::Watermark {
                            // Every sender of the ring is at least there:
                            // after the frames it sent before this one, so
                            // behind those kept aside for a held sender.
                            let v = u64::from_le_bytes(payload[..8].try_into().unwrap_or([0; 8]));
                            for s in first..first + senders {
                                if st.ended[s] {
                                    continue;
                                }
                                if st.held(s) || st.buffered[s] > 0 {
                                    let mut copy = rkyv::util::AlignedVec::<16>::with_capacity(8);
                                    copy.extend_from_slice(&v.to_le_bytes());
                                    st.buffered[s] += 1;
                                    st.kept_bytes += 8;
                                    held.push_back(HeldFrame {
                                        sender: s - first,
                                        kind,
                                        payload: copy,
                                    });
                                } else {
                                    st.wm[s] = st.wm[s].max(v);
                                }
                            }
                            return;
                        }
                        if sender >= senders
                            || (st.ended[first + sender] && kind != FrameKind::State)
                        {
                            failed = Some(RuntimeError::channel(
                                first,
                                me,
                                air_shm::ShmError::PeerGone(if sender >= senders {
                                    "a frame names a sender outside its channel"
                                } else {
                                    "a worker sent a frame after its end-of-stream"
                                }),
                            ));
                            return;
                        }
                        if matches!(kind, FrameKind::Data | FrameKind::End) {
                            carried += 1;
                        }
                        if kind == FrameKind::End {
                            *ends += 1;
                        }
                        if let Err(e) =
                            take_frame(st, held, open, m, first, true, sender, kind, payload, on)
                        {
                            failed = Some(e);
                        }
                    })
                    .map_err(|e| RuntimeError::channel(first, self.me, e))?;
                if let Some(e) = failed.take() {
                    return Err(e);
                }
                match r {
                    Recv::Frame => {
                        got += 1;
                        if ended {
                            // A state frame after the channel's End.
                            continue;
                        }
                        if self.open[ch] == 0 {
                            self.n_done += 1;
                            break;
                        }
                        if self.ends_read[ch] == senders {
                            break;
                        }
                    }
                    Recv::Empty => break,
                    // Every sender ended and dropped its end, every frame
                    // read: a moving edge's rings are read to here.
                    Recv::Closed if ended => break,
                    Recv::Closed => {
                        return Err(RuntimeError::channel(
                            first,
                            self.me,
                            air_shm::ShmError::PeerGone(
                                "worker closed its channel before end-of-stream",
                            ),
                        ))
                    }
                }
            }
            // (Never while key groups move: the operator must see every
            // barrier at which its groups move.)
            if self.senders.kept_bytes > kept_bytes_max()
                && self.senders.aligned < self.senders.seen
                && !self.moves
            {
                self.senders.give_up();
            }
            if got > 0 {
                if self.polled[ch] {
                    self.polled_frames += carried;
                }
                self.rx[ch]
                    .release()
                    .map_err(|e| RuntimeError::channel(first, self.me, e))?;
            }
            frames += got;
        }
        if frames > 0 {
            let min = self.senders.wm.iter().copied().min().unwrap_or(u64::MAX);
            if min > self.senders.min_wm {
                self.senders.min_wm = min;
                on(InputEvent::Watermark(min))?;
            }
        }
        Ok(frames)
    }

    /// Whether batches are validated in every build (`--validate`).
    pub fn validates(&self) -> bool {
        self.validate
    }
}
