//! One channel interface, several transports.
//!
//! A channel is a stream of frames (data batches, watermarks,
//! end-of-stream) with backpressure, read by one worker. The runtime only
//! sees [`ChannelTx`] and [`ChannelRx`]; the thread tier (a [`FrameRing`] in
//! this process's memory) and the node tier (a [`FrameRing`] in a `/dev/shm`
//! segment) implement them with the shared-memory ring, one producer each;
//! the network tier (MPI RMA) with a remote ring that the workers of the
//! sending rank share (`air_rdma::OutboxSender`, [`SharedRmaRx`]).

use air_shm::{Consumer, FrameKind, FrameRing, Producer, ShmError, WaitPolicy};

/// Why a channel failed, whatever its tier.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    /// The thread or node tier (a shared-memory ring).
    #[error(transparent)]
    Shm(#[from] ShmError),
    /// The network tier (MPI RMA).
    #[cfg(feature = "mpi")]
    #[error(transparent)]
    Rma(#[from] air_rdma::RdmaError),
}

/// The sender index of a watermark frame that speaks for every sender of
/// a shared ring (the minimum of their watermarks: a network ring's
/// outbox sends watermarks once per rank, `air_rdma::RANK_SENDER`): the
/// receiver raises every sender of that channel that has not ended to it.
pub const ALL_SENDERS: usize = u16::MAX as usize;

#[cfg(feature = "mpi")]
const _: () = assert!(ALL_SENDERS == air_rdma::RANK_SENDER as usize);

/// What a non-blocking receive found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recv {
    /// A frame was handed to the callback.
    Frame,
    /// Nothing now.
    Empty,
    /// The producer closed and every frame has been read.
    Closed,
}

/// The sending end of a channel.
pub trait ChannelTx: Send {
    /// Writes one frame of `kind` without blocking: `write` gets a buffer of
    /// `max_len` bytes (16-byte aligned) and returns how many it used, or
    /// `None` to abandon the frame. Returns `Ok(false)` when the channel is
    /// full (nothing written). Frames become visible at the next
    /// [`ChannelTx::flush`] (or immediately if the transport has no batching).
    fn try_send(
        &mut self,
        kind: FrameKind,
        max_len: usize,
        write: &mut dyn FnMut(&mut [u8]) -> Option<usize>,
    ) -> Result<bool, ChannelError>;

    /// Makes every frame sent so far visible to the receiver.
    fn flush(&mut self) -> Result<(), ChannelError>;

    /// [`ChannelTx::flush`] without waking a receiver parked on its
    /// doorbell (it reads the frames at its next timer): for frames that
    /// cannot be urgent, such as a watermark. Default: `flush`.
    fn flush_quiet(&mut self) -> Result<(), ChannelError> {
        self.flush()
    }

    /// Largest frame payload in bytes.
    fn max_frame(&self) -> usize;
}

/// The receiving end of a channel.
pub trait ChannelRx: Send {
    /// Hands the next frame to `read` without blocking: its kind, the index
    /// of the worker that sent it among this channel's
    /// [`ChannelRx::senders`] (always 0 for a channel with one sender), and
    /// its payload in place.
    fn try_recv(
        &mut self,
        read: &mut dyn FnMut(FrameKind, usize, &[u8]),
    ) -> Result<Recv, ChannelError>;

    /// How many workers send into this channel: 1 for a ring per worker
    /// pair; the workers of the sending rank for a network ring they share
    /// (their frames interleave; each sender's frames stay in its order).
    fn senders(&self) -> usize {
        1
    }

    /// Returns credit for frames read so far (the transport may batch it).
    fn release(&mut self) -> Result<(), ChannelError>;

    /// Whether its sender rings the receiving worker's doorbell when it
    /// publishes (the thread and node tiers). `false` for a channel the
    /// receiver must poll, whose transport also needs the receiver to call
    /// in regularly (the network tier: MPI progress).
    fn rings_doorbell(&self) -> bool {
        true
    }

    /// The NUMA node the channel's memory (on this side) is on, measured;
    /// `None` when unknown.
    fn numa_node(&self) -> Option<usize> {
        None
    }

    /// Ring occupancy for metrics: (bytes published and not yet read,
    /// capacity of the ring in bytes); `None` for a transport without a
    /// ring. A gauge read with Relaxed loads, never a synchronisation point.
    fn occupancy(&self) -> Option<(u64, u64)> {
        None
    }
}

impl ChannelTx for Producer {
    #[inline]
    fn try_send(
        &mut self,
        kind: FrameKind,
        max_len: usize,
        write: &mut dyn FnMut(&mut [u8]) -> Option<usize>,
    ) -> Result<bool, ChannelError> {
        let mut f = match self.try_reserve(max_len) {
            Ok(f) => f,
            Err(ShmError::Full) => return Ok(false),
            Err(e) => return Err(e.into()),
        };
        if let Some(n) = write(f.payload_mut()) {
            f.truncate(n);
            f.set_kind(kind);
            f.commit_deferred();
        }
        Ok(true)
    }

    #[inline]
    fn flush(&mut self) -> Result<(), ChannelError> {
        self.publish();
        Ok(())
    }

    #[inline]
    fn flush_quiet(&mut self) -> Result<(), ChannelError> {
        self.publish_quiet();
        Ok(())
    }

    fn max_frame(&self) -> usize {
        self.max_payload()
    }
}

impl ChannelRx for Consumer {
    #[inline]
    fn try_recv(
        &mut self,
        read: &mut dyn FnMut(FrameKind, usize, &[u8]),
    ) -> Result<Recv, ChannelError> {
        match self.try_peek() {
            Ok(Some(f)) => {
                read(f.kind(), 0, f.payload());
                f.release_deferred();
                Ok(Recv::Frame)
            }
            Ok(None) => Ok(Recv::Empty),
            Err(ShmError::Closed) => Ok(Recv::Closed),
            Err(e) => Err(e.into()),
        }
    }

    #[inline]
    fn release(&mut self) -> Result<(), ChannelError> {
        self.release_pending();
        Ok(())
    }

    fn numa_node(&self) -> Option<usize> {
        Consumer::numa_node(self)
    }

    fn occupancy(&self) -> Option<(u64, u64)> {
        Some((self.queued_bytes(), self.capacity() as u64))
    }
}

/// The receiving end of a network-tier ring that the workers of one remote
/// rank share (see `docs/channels.md`): `senders` workers write into it,
/// each frame header naming its sender.
#[cfg(feature = "mpi")]
#[derive(Debug)]
pub struct SharedRmaRx<'e> {
    /// The ring.
    pub rx: air_rdma::RmaConsumer<'e>,
    /// Workers of the sending rank that write into it.
    pub senders: usize,
}

#[cfg(feature = "mpi")]
impl ChannelRx for SharedRmaRx<'_> {
    #[inline]
    fn try_recv(
        &mut self,
        read: &mut dyn FnMut(FrameKind, usize, &[u8]),
    ) -> Result<Recv, ChannelError> {
        match self
            .rx
            .try_recv_from(&mut |kind, from, payload| read(kind, from as usize, payload))
        {
            Ok(true) => Ok(Recv::Frame),
            Ok(false) => Ok(Recv::Empty),
            Err(air_rdma::RdmaError::Closed) => Ok(Recv::Closed),
            Err(e) => Err(e.into()),
        }
    }

    fn senders(&self) -> usize {
        self.senders
    }

    fn rings_doorbell(&self) -> bool {
        false
    }

    #[inline]
    fn release(&mut self) -> Result<(), ChannelError> {
        Ok(self.rx.release()?)
    }

    fn numa_node(&self) -> Option<usize> {
        self.rx.numa_node()
    }

    fn occupancy(&self) -> Option<(u64, u64)> {
        Some((self.rx.queued_bytes(), self.rx.capacity() as u64))
    }
}

#[cfg(feature = "mpi")]
impl ChannelTx for air_rdma::OutboxSender<'_, '_> {
    #[inline]
    fn try_send(
        &mut self,
        kind: FrameKind,
        max_len: usize,
        write: &mut dyn FnMut(&mut [u8]) -> Option<usize>,
    ) -> Result<bool, ChannelError> {
        Ok(air_rdma::OutboxSender::try_send(
            self, kind, max_len, write,
        )?)
    }

    #[inline]
    fn flush(&mut self) -> Result<(), ChannelError> {
        Ok(air_rdma::OutboxSender::flush(self)?)
    }

    fn max_frame(&self) -> usize {
        self.max_payload()
    }
}

/// A thread-tier channel: a ring of `capacity` bytes in this process's memory.
/// Call it on the consumer's thread (the pages are touched there first).
pub fn thread_channel(capacity: usize) -> Result<(Producer, Consumer), ShmError> {
    let ring = FrameRing::anonymous(capacity)?;
    Ok((
        ring.producer(WaitPolicy::default())?,
        ring.consumer(WaitPolicy::default())?,
    ))
}
