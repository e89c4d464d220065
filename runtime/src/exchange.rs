//! The exchange (key_by): per-destination staging batches pushed into
//! channels, and the receiving side that reads them in place, tracks each
//! input's watermark and end-of-stream, and hands records downstream.

use crate::channel::{ChannelRx, ChannelTx, Recv};
use crate::data::ExchangeData;
use crate::metrics::ChannelMetrics;
use crate::RuntimeError;
use air_shm::FrameKind;

/// What the receiving side of an exchange feeds: the downstream operator.
pub trait Downstream<T: ExchangeData>: Send {
    /// A batch of records from worker `from`, archived, read in place.
    fn on_batch(&mut self, from: usize, items: &[T::Item]);
    /// The minimum watermark over all inputs advanced to `wm` (ms of event
    /// time; `u64::MAX` once every input has ended): no record with an event
    /// time below `wm` will arrive any more.
    fn on_watermark(&mut self, wm: u64);
}

/// How a batch's bytes are read (checked by rkyv or trusted).
type ReadBatch<T> = fn(&[u8]) -> Result<&[<T as ExchangeData>::Item], String>;

/// Callback that drains this worker's inputs while a send waits for room
/// (so two workers blocked on each other's full rings cannot deadlock).
pub type Drain<'a> = dyn FnMut() -> Result<(), RuntimeError> + 'a;

/// The hash that decides a key's owner (`owner = key_hash(key) % workers`):
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

/// `a % d` for a fixed `d` by multiplications instead of a 64-bit division
/// (tens of cycles on every record routed): Lemire, Kaser and Kurz, "Faster
/// Remainder by Direct Computation" (2019), with a 128-bit multiplier, exact
/// for every 64-bit `a` and every `d` >= 1.
#[derive(Debug, Clone, Copy)]
pub struct FastMod {
    d: u64,
    /// `ceil(2^128 / d)` (unused when `d` is 1).
    m: u128,
}

impl FastMod {
    /// Remainders modulo `d`.
    ///
    /// # Panics
    /// If `d` is 0.
    pub fn new(d: u64) -> FastMod {
        assert!(d > 0, "modulo 0");
        let m = if d == 1 { 0 } else { u128::MAX / d as u128 + 1 };
        FastMod { d, m }
    }

    /// `a % d`.
    #[inline(always)]
    pub fn rem(&self, a: u64) -> u64 {
        // The fraction a/d in 128 fixed-point bits, times d, integer part:
        // (low * d) >> 128, from two 64x64 -> 128 products.
        let low = self.m.wrapping_mul(a as u128);
        let d = self.d as u128;
        let lo = (low as u64 as u128) * d;
        let hi = (low >> 64) * d;
        ((hi + (lo >> 64)) >> 64) as u64
    }
}

/// The sending side of an exchange at one worker: one channel and one staging
/// batch per destination worker (itself included).
pub struct Exchange<'c, T: ExchangeData> {
    me: usize,
    tx: Vec<Box<dyn ChannelTx + 'c>>,
    staging: Vec<Vec<T>>,
    batch_records: usize,
    unflushed: bool,
    /// `% workers`.
    modulo: FastMod,
    /// Counters of the sending side.
    pub metrics: ChannelMetrics,
}

impl<'c, T: ExchangeData> Exchange<'c, T> {
    /// An exchange at worker `me` over `tx` (indexed by destination worker),
    /// staging up to `batch_records` records per destination (clamped so a
    /// batch always fits a frame).
    pub fn new(me: usize, tx: Vec<Box<dyn ChannelTx + 'c>>, batch_records: usize) -> Self {
        let max_frame = tx.iter().map(|t| t.max_frame()).min().unwrap_or(usize::MAX);
        let mut batch = batch_records.max(1);
        while batch > 1 && T::size_hint(batch) > max_frame {
            batch /= 2;
        }
        let n = tx.len();
        Exchange {
            me,
            tx,
            staging: (0..n).map(|_| Vec::with_capacity(batch)).collect(),
            batch_records: batch,
            unflushed: false,
            modulo: FastMod::new(n.max(1) as u64),
            metrics: ChannelMetrics::default(),
        }
    }

    /// Number of destination workers.
    #[inline]
    pub fn workers(&self) -> usize {
        self.tx.len()
    }

    /// This worker's index.
    pub fn me(&self) -> usize {
        self.me
    }

    /// Records per batch after clamping.
    pub fn batch_records(&self) -> usize {
        self.batch_records
    }

    /// The worker that owns `key_hash`: `key_hash % workers` (computed
    /// without a division, see [`FastMod`]).
    #[inline(always)]
    pub fn owner(&self, key_hash: u64) -> usize {
        self.modulo.rem(key_hash) as usize
    }

    /// Stages `item` for worker `dest`; sends the batch when it is full.
    #[inline(always)]
    pub fn push(
        &mut self,
        dest: usize,
        item: T,
        drain: &mut Drain<'_>,
    ) -> Result<(), RuntimeError> {
        let s = &mut self.staging[dest];
        s.push(item);
        if s.len() >= self.batch_records {
            self.send_batch(dest, drain)?;
        }
        Ok(())
    }

    /// Writes one frame of `kind` to worker `dest`: `write` fills a buffer of
    /// `len` bytes and returns how many it used, or `None` if it does not fit.
    /// While the ring is full (backpressure) it publishes what was sent,
    /// keeps this worker's own inputs moving through `drain`, and retries.
    /// Returns what `write` returned.
    fn send_frame(
        &mut self,
        dest: usize,
        kind: FrameKind,
        len: usize,
        write: &mut dyn FnMut(&mut [u8]) -> Option<usize>,
        drain: &mut Drain<'_>,
    ) -> Result<Option<usize>, RuntimeError> {
        let mut waited = false;
        let mut spins = 0u32;
        loop {
            let mut used = None;
            let sent = self.tx[dest]
                .try_send(kind, len, &mut |buf| {
                    used = write(buf);
                    used
                })
                .map_err(|e| RuntimeError::channel(self.me, dest, e))?;
            if sent {
                return Ok(used);
            }
            if !waited {
                waited = true;
                self.metrics.ring_full_waits += 1;
            }
            self.tx[dest]
                .flush()
                .map_err(|e| RuntimeError::channel(self.me, dest, e))?;
            drain()?;
            spins += 1;
            if spins > 64 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }

    /// Sends worker `dest`'s staged batch, archived in place into the frame.
    fn send_batch(&mut self, dest: usize, drain: &mut Drain<'_>) -> Result<(), RuntimeError> {
        if self.staging[dest].is_empty() {
            return Ok(());
        }
        let mut items = std::mem::take(&mut self.staging[dest]);
        self.send_items(dest, &mut items, drain)?;
        items.clear();
        self.staging[dest] = items;
        Ok(())
    }

    /// Sends `items` as one frame; a batch of variable-size records (e.g.
    /// strings) that archives larger than the channel's largest frame is
    /// split in halves until each half fits. A single record that does not
    /// fit is an error.
    fn send_items(
        &mut self,
        dest: usize,
        items: &mut Vec<T>,
        drain: &mut Drain<'_>,
    ) -> Result<(), RuntimeError> {
        let max = self.tx[dest].max_frame();
        let hint = T::size_hint(items.len()).min(max);
        let bytes = match self.send_frame(
            dest,
            FrameKind::Data,
            hint,
            &mut |buf| T::write_batch(items, buf),
            drain,
        )? {
            Some(len) => len,
            None => {
                // Variable-size records: archive off-ring once, then copy.
                let archived = T::to_bytes(items);
                let len = archived.len();
                if len > max {
                    if items.len() > 1 {
                        let mut second = items.split_off(items.len() / 2);
                        self.send_items(dest, items, drain)?;
                        return self.send_items(dest, &mut second, drain);
                    }
                    return Err(RuntimeError::BatchTooLarge { bytes: len, max });
                }
                self.send_frame(
                    dest,
                    FrameKind::Data,
                    len,
                    &mut |buf| {
                        buf[..len].copy_from_slice(&archived);
                        Some(len)
                    },
                    drain,
                )?;
                len
            }
        };
        self.metrics.records_out += items.len() as u64;
        self.metrics.bytes_out += bytes as u64;
        self.metrics.batches_out += 1;
        self.unflushed = true;
        Ok(())
    }

    /// Sends every staged batch and publishes every channel.
    pub fn flush_all(&mut self, drain: &mut Drain<'_>) -> Result<(), RuntimeError> {
        for dest in 0..self.tx.len() {
            self.send_batch(dest, drain)?;
        }
        if self.unflushed {
            self.flush_channels()?;
        }
        Ok(())
    }

    /// Sends a control frame (`Watermark` with `value` as u64 LE, or `End`)
    /// to every destination, after its staged records (in-band order), and
    /// publishes.
    pub fn broadcast(
        &mut self,
        kind: FrameKind,
        value: u64,
        drain: &mut Drain<'_>,
    ) -> Result<(), RuntimeError> {
        for dest in 0..self.tx.len() {
            self.send_batch(dest, drain)?;
            let bytes = value.to_le_bytes();
            self.send_frame(
                dest,
                kind,
                8,
                &mut |buf| {
                    buf[..8].copy_from_slice(&bytes);
                    Some(8)
                },
                drain,
            )?;
        }
        if kind == FrameKind::Watermark {
            self.metrics.watermarks_out += 1;
        }
        self.flush_channels()
    }

    fn flush_channels(&mut self) -> Result<(), RuntimeError> {
        for (dest, t) in self.tx.iter_mut().enumerate() {
            t.flush()
                .map_err(|e| RuntimeError::channel(self.me, dest, e))?;
        }
        self.unflushed = false;
        Ok(())
    }
}

/// The receiving side of an exchange at one worker: one channel per source
/// worker, each with its own watermark.
pub struct Inputs<'c> {
    me: usize,
    rx: Vec<Box<dyn ChannelRx + 'c>>,
    wm: Vec<u64>,
    ended: Vec<bool>,
    n_ended: usize,
    min_wm: u64,
    validate: bool,
    /// Counters of the receiving side.
    pub metrics: ChannelMetrics,
}

impl<'c> Inputs<'c> {
    /// Validates every batch with rkyv (`--validate`), also in release builds.
    pub fn with_validation(mut self, on: bool) -> Self {
        self.validate = on;
        self
    }

    /// Inputs at worker `me` from `rx` (indexed by source worker).
    pub fn new(me: usize, rx: Vec<Box<dyn ChannelRx + 'c>>) -> Self {
        let n = rx.len();
        Inputs {
            me,
            rx,
            wm: vec![0; n],
            ended: vec![false; n],
            n_ended: 0,
            min_wm: 0,
            validate: false,
            metrics: ChannelMetrics::default(),
        }
    }

    /// Whether every input has delivered end-of-stream.
    pub fn all_ended(&self) -> bool {
        self.n_ended == self.rx.len()
    }

    /// The minimum watermark over all inputs (ms).
    pub fn watermark(&self) -> u64 {
        self.min_wm
    }

    /// Reads up to `budget` frames from each input and hands every data
    /// batch (in place) and every advance of the minimum watermark to `on`,
    /// in channel order; `on` returns the records a batch held (counted in
    /// the metrics). Returns the number of frames read. `on` errors stop
    /// the poll and are returned.
    pub fn poll_raw(
        &mut self,
        budget: usize,
        on: &mut dyn FnMut(InputEvent<'_>) -> Result<usize, RuntimeError>,
    ) -> Result<usize, RuntimeError> {
        let mut frames = 0;
        for from in 0..self.rx.len() {
            if self.ended[from] {
                continue;
            }
            let mut got = 0;
            let mut failed: Option<RuntimeError> = None;
            while got < budget {
                let wm = &mut self.wm[from];
                let ended = &mut self.ended[from];
                let m = &mut self.metrics;
                let r = self.rx[from]
                    .try_recv(&mut |kind, payload| match kind {
                        FrameKind::Data => {
                            m.bytes_in += payload.len() as u64;
                            m.batches_in += 1;
                            if failed.is_none() {
                                match on(InputEvent::Data {
                                    from,
                                    bytes: payload,
                                }) {
                                    Ok(n) => m.records_in += n as u64,
                                    Err(e) => failed = Some(e),
                                }
                            }
                        }
                        FrameKind::Watermark => {
                            let v = u64::from_le_bytes(payload[..8].try_into().unwrap_or([0; 8]));
                            *wm = (*wm).max(v);
                        }
                        FrameKind::End => {
                            let v =
                                u64::from_le_bytes(payload[..8].try_into().unwrap_or([0xff; 8]));
                            *wm = (*wm).max(v);
                            *ended = true;
                        }
                    })
                    .map_err(|e| RuntimeError::channel(from, self.me, e))?;
                if let Some(e) = failed.take() {
                    return Err(e);
                }
                match r {
                    Recv::Frame => {
                        got += 1;
                        if self.ended[from] {
                            self.n_ended += 1;
                            break;
                        }
                    }
                    Recv::Empty => break,
                    Recv::Closed => {
                        return Err(RuntimeError::channel(
                            from,
                            self.me,
                            air_shm::ShmError::PeerGone(
                                "worker closed its channel before end-of-stream",
                            ),
                        ))
                    }
                }
            }
            if got > 0 {
                self.rx[from]
                    .release()
                    .map_err(|e| RuntimeError::channel(from, self.me, e))?;
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

    /// Reads up to `budget` frames from each input and feeds `down`; calls
    /// `down.on_watermark` when the minimum watermark advances. Returns the
    /// number of frames read.
    pub fn poll<T: ExchangeData, D: Downstream<T>>(
        &mut self,
        down: &mut D,
        budget: usize,
    ) -> Result<usize, RuntimeError> {
        let read: ReadBatch<T> = if self.validate {
            T::read_batch_validated
        } else {
            T::read_batch
        };
        let me = self.me;
        self.poll_raw(budget, &mut |ev| match ev {
            InputEvent::Data { from, bytes } => {
                let items = read(bytes).map_err(|reason| RuntimeError::BadBatch {
                    from,
                    to: me,
                    reason,
                })?;
                down.on_batch(from, items);
                Ok(items.len())
            }
            InputEvent::Watermark(wm) => {
                down.on_watermark(wm);
                Ok(0)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::FastMod;

    /// `FastMod::rem` equals `%` for edge numerators and a pseudo-random
    /// sweep, for small worker counts and for divisors near the type's ends.
    #[test]
    fn fast_mod_equals_the_remainder() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let edges = [0, 1, 2, 3, u32::MAX as u64, 1 << 32, u64::MAX - 1, u64::MAX];
        let divisors = (1..=1024u64)
            .chain([
                (1 << 32) - 1,
                1 << 32,
                (1 << 32) + 1,
                (1 << 63) - 1,
                1 << 63,
                u64::MAX - 1,
                u64::MAX,
            ])
            .chain((0..64).map(|_| next() | 1));
        for d in divisors.collect::<Vec<_>>() {
            let f = FastMod::new(d);
            for &a in &edges {
                assert_eq!(f.rem(a), a % d, "{a} % {d}");
                assert_eq!(f.rem(a.wrapping_sub(d)), a.wrapping_sub(d) % d);
            }
            for _ in 0..2_000 {
                let a = next();
                assert_eq!(f.rem(a), a % d, "{a} % {d}");
            }
        }
    }
}
