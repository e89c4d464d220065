//! # air-shm: shared-memory regions and the lock-free SPSC frame ring
//!
//! Every channel of the AIR runtime is a [`FrameRing`]: one producer, one
//! consumer, variable-length frames written and read in place, bounded (a full
//! ring blocks the producer: backpressure, never a drop). The ring lives in a
//! [`Region`]: anonymous memory for threads of one process, or a named
//! `/dev/shm` segment for processes of one node. This crate knows nothing of
//! dataflows.
//!
//! ```
//! use air_shm::{FrameKind, FrameRing};
//! let (mut tx, mut rx) = FrameRing::new(4096).unwrap();
//! let mut f = tx.reserve(5).unwrap();
//! f.payload_mut().copy_from_slice(b"hello");
//! f.commit();
//! let frame = rx.peek().unwrap().unwrap();
//! assert_eq!((frame.kind(), frame.seq(), frame.payload()), (FrameKind::Data, 0, &b"hello"[..]));
//! frame.release();
//! ```
#![deny(missing_docs)]

pub mod doorbell;
mod error;
pub mod frame;
mod futex;
pub mod numa;
pub mod region;
pub mod ring;
mod sync;
mod wait;

pub use doorbell::{Bell, Doorbell, Doorbells, Ticket, DOORBELL_BYTES};
pub use error::{Result, ShmError};
pub use region::{clean_stale, job_id, shm_dir, CleanOutcome, Region, SegmentName};
pub use ring::{
    frame_size, Consumer, Frame, FrameKind, FrameMut, FrameRing, Producer, FRAME_ALIGN,
    FRAME_HEADER, HEADER_BYTES, KIND_PADDING, MIN_CAPACITY, RING_ALIGN,
};
pub use wait::WaitPolicy;
