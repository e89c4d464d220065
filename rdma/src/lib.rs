//! # air-rdma: MPI for the AIR runtime
//!
//! rsmpi (the `mpi` crate) has no safe one-sided API; this crate wraps the
//! raw bindings (`mpi::ffi`) for what the runtime needs, with MPI's rules in
//! the types: [`Mpi`] (initialization with `MPI_THREAD_MULTIPLE`, ranks,
//! nodes, launcher mix-ups), [`Window`] / [`Epoch`] / [`Pending`] (RMA
//! windows allocated by MPI, passive-target epochs, operations whose buffers
//! stay borrowed until flushed), the remote frame ring ([`RmaProducer`],
//! [`RmaConsumer`], and [`RmaOutbox`] for a ring several workers share) and [`Liveness`] (lost ranks). Errors come back as
//! [`RdmaError`] (`MPI_ERRORS_RETURN`), never as aborts. This crate knows
//! nothing of dataflows.
#![deny(missing_docs)]

mod error;
pub mod liveness;
pub mod outbox;
pub mod ring;
mod sys;
pub mod win;
pub mod world;

pub use air_shm::frame::{segment_bytes, MAX_SEGMENT};
pub use error::{RdmaError, Result};
pub use liveness::{heartbeat_bytes, Liveness};
pub use outbox::{OutboxSender, RmaOutbox, RANK_SENDER};
pub use ring::{ring_region_bytes, RmaConsumer, RmaProducer, CREDIT_BYTES, RING_CTRL_BYTES};
pub use win::{Epoch, Op, Pending, Window};
pub use world::{launched_ranks, mpirun_command, Mpi};
