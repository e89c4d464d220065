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
}

/// The receiving side of an exchange at one worker: its input channels, and
/// one watermark per source worker. A channel has one sender (a ring per
/// worker pair) or several (a network ring shared by the workers of a remote
/// rank, whose frames interleave); either way watermarks and end-of-stream
/// are tracked per source worker, so a shared ring ends when every one of its
/// senders ended.
pub struct Inputs<'c> {
    me: usize,
    rx: Vec<Box<dyn ChannelRx + 'c>>,
    /// Per channel: the global index of its sender 0 (its senders are
    /// consecutive workers).
    first: Vec<usize>,
    /// Per channel: senders that have not ended.
    open: Vec<usize>,
    /// Per source worker: watermark (ms) and whether it ended.
    wm: Vec<u64>,
    ended: Vec<bool>,
    /// Channels whose every sender ended.
    n_done: usize,
    /// Per channel: whether it must be polled (its sender cannot ring this
    /// worker's doorbell: the network tier).
    polled: Vec<bool>,
    /// Data and End frames read from polled channels, ever.
    polled_frames: u64,
    min_wm: u64,
    validate: bool,
    /// Counters of the receiving side.
    pub metrics: ChannelMetrics,
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
            polled: rx.iter().map(|r| !r.rings_doorbell()).collect(),
            polled_frames: 0,
            rx,
            first,
            wm: vec![0; n],
            ended: vec![false; n],
            n_done: 0,
            min_wm: 0,
            validate: false,
            metrics: ChannelMetrics::default(),
        }
    }

    /// Whether every input has delivered end-of-stream.
    pub fn all_ended(&self) -> bool {
        self.n_done == self.rx.len()
    }

    /// The minimum watermark over all inputs (ms).
    pub fn watermark(&self) -> u64 {
        self.min_wm
    }

    /// Reads up to `budget` frames from each input channel and hands every
    /// data batch (in place, with its source worker) and every advance of
    /// the minimum watermark to `on`, in channel order; `on` returns the
    /// records a batch held (counted in the metrics). Returns the number of
    /// frames read. `on` errors stop the poll and are returned.
    pub fn poll_raw(
        &mut self,
        budget: usize,
        on: &mut dyn FnMut(InputEvent<'_>) -> Result<usize, RuntimeError>,
    ) -> Result<usize, RuntimeError> {
        let mut frames = 0;
        for ch in 0..self.rx.len() {
            if self.open[ch] == 0 {
                continue;
            }
            let first = self.first[ch];
            let senders = self.rx[ch].senders();
            let mut got = 0;
            // Data and End frames of this channel (not watermarks).
            let mut carried = 0u64;
            let mut failed: Option<RuntimeError> = None;
            while got < budget {
                let wm = &mut self.wm[first..first + senders];
                let ended = &mut self.ended[first..first + senders];
                let open = &mut self.open[ch];
                let m = &mut self.metrics;
                let me = self.me;
                let r = self.rx[ch]
                    .try_recv(&mut |kind, sender, payload| {
                        if failed.is_some() {
                            return;
                        }
                        if sender == crate::channel::ALL_SENDERS && kind == FrameKind::Watermark {
                            // Every sender of the ring is at least there.
                            let v = u64::from_le_bytes(payload[..8].try_into().unwrap_or([0; 8]));
                            for (w, _) in wm.iter_mut().zip(ended.iter()).filter(|(_, e)| !**e) {
                                *w = (*w).max(v);
                            }
                            return;
                        }
                        let from = first + sender;
                        if sender >= senders || ended[sender] {
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
                        if kind != FrameKind::Watermark {
                            carried += 1;
                        }
                        match kind {
                            FrameKind::Data => {
                                m.bytes_in += payload.len() as u64;
                                m.batches_in += 1;
                                match on(InputEvent::Data {
                                    from,
                                    bytes: payload,
                                }) {
                                    Ok(n) => m.records_in += n as u64,
                                    Err(e) => failed = Some(e),
                                }
                            }
                            FrameKind::Watermark => {
                                let v =
                                    u64::from_le_bytes(payload[..8].try_into().unwrap_or([0; 8]));
                                wm[sender] = wm[sender].max(v);
                            }
                            FrameKind::End => {
                                let v = u64::from_le_bytes(
                                    payload[..8].try_into().unwrap_or([0xff; 8]),
                                );
                                wm[sender] = wm[sender].max(v);
                                ended[sender] = true;
                                *open -= 1;
                            }
                        }
                    })
                    .map_err(|e| RuntimeError::channel(first, self.me, e))?;
                if let Some(e) = failed.take() {
                    return Err(e);
                }
                match r {
                    Recv::Frame => {
                        got += 1;
                        if self.open[ch] == 0 {
                            self.n_done += 1;
                            break;
                        }
                    }
                    Recv::Empty => break,
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
            let min = self.wm.iter().copied().min().unwrap_or(u64::MAX);
            if min > self.min_wm {
                self.min_wm = min;
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
