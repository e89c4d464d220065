//! One remote ring shared by several workers of a rank (see
//! `docs/channels.md`, "The network ring: several local producers, one
//! remote consumer").
//!
//! The network tier multiplexes: the `W` workers of a sender rank write to
//! one ring per remote worker (and edge) instead of `W` rings. An
//! [`RmaOutbox`] owns that ring's [`RmaProducer`] behind a process-local
//! lock; each worker sends through its own [`OutboxSender`], which stamps
//! the worker's index into every frame header (the receiver reads it with
//! [`crate::RmaConsumer::try_recv_from`]). A frame is written and a publish
//! done entirely under the lock, and neither blocks (a full ring returns
//! `Ok(false)` and releases the lock), so a worker waits for the lock at
//! most one frame write or one publish of another worker.
//!
//! Flow control stays per ring: the ring's credit is the receiver worker's,
//! so a slow receiver worker holds back only the senders writing to it.
//!
//! Watermarks are sent once per rank, not once per worker: a worker's
//! watermark frame only records its watermark in the outbox; when the
//! minimum over the rank's senders rises, one frame carrying it goes into
//! the ring with the sender index [`RANK_SENDER`] (under the lock, so every
//! frame any sender wrote before is already in the ring). The receiver
//! raises every sender's watermark of that ring to it. Each worker's own
//! watermark is at least that minimum, so the promise holds for all of
//! them. End-of-stream frames stay per worker.

use crate::error::{RdmaError, Result};
use crate::ring::RmaProducer;
use air_shm::FrameKind;
use std::sync::{Mutex, MutexGuard};

/// The sender index of a watermark frame that speaks for every sender of
/// the ring: the minimum of their watermarks (see the module doc).
pub const RANK_SENDER: u16 = u16::MAX;

/// What the outbox's lock guards.
#[derive(Debug)]
struct Shared<'e> {
    producer: RmaProducer<'e>,
    /// Per sender: the highest watermark it sent.
    wms: Vec<u64>,
    /// The last [`RANK_SENDER`] watermark written into the ring.
    sent: u64,
}

impl Shared<'_> {
    /// Writes one [`RANK_SENDER`] watermark frame carrying `min` and
    /// records it as sent; `Ok(false)`: the ring is full (nothing written).
    fn send_rank_watermark(&mut self, min: u64) -> Result<bool> {
        let bytes = min.to_le_bytes();
        let written =
            self.producer
                .try_send_from(RANK_SENDER, FrameKind::Watermark, 8, &mut |b| {
                    b[..8].copy_from_slice(&bytes);
                    Some(8)
                })?;
        if written {
            self.sent = min;
        }
        Ok(written)
    }
}

/// The sending side of one remote ring shared by workers of this rank.
#[derive(Debug)]
pub struct RmaOutbox<'e> {
    shared: Mutex<Shared<'e>>,
    max_payload: usize,
}

impl<'e> RmaOutbox<'e> {
    /// Shares `producer` (the ring's only producer on this rank) between
    /// `senders` workers of this rank (indices `0..senders`). The ring is
    /// closed (the receiver sees `Closed` after the last frame) when the
    /// outbox is dropped.
    pub fn new(producer: RmaProducer<'e>, senders: usize) -> Self {
        RmaOutbox {
            max_payload: producer.max_payload(),
            shared: Mutex::new(Shared {
                producer,
                wms: vec![0; senders.max(1)],
                sent: 0,
            }),
        }
    }

    /// The sending end of worker `from` (its index within this rank, stamped
    /// into each frame it sends).
    pub fn sender(&self, from: u16) -> OutboxSender<'_, 'e> {
        OutboxSender { outbox: self, from }
    }

    /// Largest frame payload, bytes.
    pub fn max_payload(&self) -> usize {
        self.max_payload
    }

    /// Publishes what any worker left pending and closes the ring (see
    /// [`RmaProducer::close`]); later sends fail. Call it once every worker
    /// of this rank is done with the ring; dropping the outbox does it too.
    ///
    /// # Errors
    /// As [`RmaProducer::close`].
    pub fn close(&self) -> Result<()> {
        self.lock()?.producer.close()
    }

    fn lock(&self) -> Result<MutexGuard<'_, Shared<'e>>> {
        // A worker that panicked inside `write` (while holding the lock)
        // left a frame half written but not committed: the ring's state is
        // unchanged, yet the job is failing; report it instead of sending on.
        self.shared.lock().map_err(|_| {
            RdmaError::Setup("a worker sharing this remote ring panicked while sending".into())
        })
    }
}

/// One worker's sending end of an [`RmaOutbox`].
#[derive(Debug)]
pub struct OutboxSender<'o, 'e> {
    outbox: &'o RmaOutbox<'e>,
    from: u16,
}

impl OutboxSender<'_, '_> {
    /// Writes one frame as [`RmaProducer::try_send`] does, under the
    /// outbox's lock, with this worker's index in its header. `Ok(false)`:
    /// the ring is full (nothing written; the lock is released).
    ///
    /// A [`FrameKind::Watermark`] frame (its payload a little-endian `u64`)
    /// is not written as such: it raises this worker's watermark in the
    /// outbox, and only when that raises the minimum over the ring's
    /// senders is one [`RANK_SENDER`] frame with the new minimum written
    /// (`Ok(true)` when it was absorbed or written).
    ///
    /// # Errors
    /// As [`RmaProducer::try_send`]; [`RdmaError::Setup`] when another
    /// worker panicked while sending on this ring.
    pub fn try_send(
        &mut self,
        kind: FrameKind,
        max_len: usize,
        write: &mut dyn FnMut(&mut [u8]) -> Option<usize>,
    ) -> Result<bool> {
        if kind == FrameKind::Watermark {
            let mut frame = [0u8; 8];
            let Some(8) = write(&mut frame) else {
                // Not a watermark this outbox understands: send as is.
                return self.outbox.lock()?.producer.try_send_from(
                    self.from,
                    kind,
                    max_len,
                    &mut |b| {
                        let n = write(b)?;
                        Some(n)
                    },
                );
            };
            let wm = u64::from_le_bytes(frame);
            let mut g = self.outbox.lock()?;
            let mine = &mut g.wms[usize::from(self.from)];
            *mine = (*mine).max(wm);
            let min = g.wms.iter().copied().min().unwrap_or(wm);
            if min <= g.sent {
                return Ok(true);
            }
            return g.send_rank_watermark(min);
        }
        let mut g = self.outbox.lock()?;
        let mut last = None;
        let written = g
            .producer
            .try_send_from(self.from, kind, max_len, &mut |b| {
                let n = write(b)?;
                if kind == FrameKind::End && n >= 8 {
                    last = b[..8].try_into().ok().map(u64::from_le_bytes);
                }
                Some(n)
            })?;
        if let (true, Some(end)) = (written, last) {
            // An ended sender's final watermark counts in the minimum from
            // now on; the others' next watermark sends the new minimum if
            // this try finds the ring full.
            let mine = &mut g.wms[usize::from(self.from)];
            *mine = (*mine).max(end);
            let min = g.wms.iter().copied().min().unwrap_or(end);
            if min > g.sent {
                g.send_rank_watermark(min)?;
            }
        }
        Ok(written)
    }

    /// Publishes every frame written to the ring so far, by any worker.
    ///
    /// # Errors
    /// As [`RmaProducer::flush`].
    pub fn flush(&mut self) -> Result<()> {
        self.outbox.lock()?.producer.flush()
    }

    /// Largest frame payload, bytes.
    pub fn max_payload(&self) -> usize {
        self.outbox.max_payload
    }

    /// This worker's index within its rank.
    pub fn from(&self) -> u16 {
        self.from
    }
}
