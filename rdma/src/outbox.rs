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

use crate::error::{RdmaError, Result};
use crate::ring::RmaProducer;
use air_shm::FrameKind;
use std::sync::{Mutex, MutexGuard};

/// The sending side of one remote ring shared by workers of this rank.
#[derive(Debug)]
pub struct RmaOutbox<'e> {
    producer: Mutex<RmaProducer<'e>>,
    max_payload: usize,
}

impl<'e> RmaOutbox<'e> {
    /// Shares `producer` (the ring's only producer on this rank) between
    /// this rank's workers. The ring is closed (the receiver sees `Closed`
    /// after the last frame) when the outbox is dropped.
    pub fn new(producer: RmaProducer<'e>) -> Self {
        RmaOutbox {
            max_payload: producer.max_payload(),
            producer: Mutex::new(producer),
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
        self.lock()?.close()
    }

    fn lock(&self) -> Result<MutexGuard<'_, RmaProducer<'e>>> {
        // A worker that panicked inside `write` (while holding the lock)
        // left a frame half written but not committed: the ring's state is
        // unchanged, yet the job is failing; report it instead of sending on.
        self.producer.lock().map_err(|_| {
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
    /// # Errors
    /// As [`RmaProducer::try_send`]; [`RdmaError::Setup`] when another
    /// worker panicked while sending on this ring.
    pub fn try_send(
        &mut self,
        kind: FrameKind,
        max_len: usize,
        write: &mut dyn FnMut(&mut [u8]) -> Option<usize>,
    ) -> Result<bool> {
        self.outbox
            .lock()?
            .try_send_from(self.from, kind, max_len, write)
    }

    /// Publishes every frame written to the ring so far, by any worker.
    ///
    /// # Errors
    /// As [`RmaProducer::flush`].
    pub fn flush(&mut self) -> Result<()> {
        self.outbox.lock()?.flush()
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
