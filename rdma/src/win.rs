//! RMA windows (`MPI_Win_allocate`) and passive-target epochs (`lock_all`).
//!
//! Lifetimes carry MPI's rules:
//! - a [`Window`] borrows the [`Mpi`] environment, so it is freed (collective
//!   `MPI_Win_free`) before MPI is finalized, also when unwinding;
//! - an [`Epoch`] borrows its window and unlocks it on drop;
//! - an operation's origin buffer stays borrowed by its [`Pending`] handle
//!   until the operation is flushed ([`Pending::flush`], or on drop), so it
//!   cannot be changed or freed while MPI may still read (or write) it.
//!
//! Transfers over 1 GiB are split into chunks (MPI counts are `int`).

use crate::error::{RdmaError, Result};
use crate::sys::{self, check};
use crate::world::{byte_type, progress_raw, Mpi};
use mpi::ffi;
use std::marker::PhantomData;
use std::os::raw::{c_int, c_void};

/// Largest count handed to one MPI call, bytes.
const CHUNK: usize = 1 << 30;

/// Accumulate operations on `u64` words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `MPI_REPLACE`: store the origin value atomically.
    Replace,
    /// `MPI_SUM`: add the origin value.
    Sum,
    /// `MPI_NO_OP`: leave the target unchanged (with fetch: an atomic read).
    NoOp,
}

impl Op {
    fn raw(self) -> ffi::MPI_Op {
        // SAFETY: constants set by the C shim at load time.
        unsafe {
            match self {
                Op::Replace => sys::AIR_MPI_REPLACE,
                Op::Sum => sys::AIR_MPI_SUM,
                Op::NoOp => sys::AIR_MPI_NO_OP,
            }
        }
    }
}

/// A window of `len` bytes on every rank of `MPI_COMM_WORLD`, allocated by
/// MPI (`MPI_Win_allocate`: registered memory, fast lock/unlock in Open MPI,
/// unlike `MPI_Win_create` over malloc). Displacements are in bytes.
pub struct Window<'m> {
    raw: ffi::MPI_Win,
    base: *mut u8,
    len: usize,
    comm: ffi::MPI_Comm,
    _mpi: PhantomData<&'m Mpi>,
}

// SAFETY: the runtime asks for MPI_THREAD_MULTIPLE (checked in Mpi::init), so
// MPI calls on the window may come from any thread; the local memory is only
// reached through raw pointers whose users document their own invariants.
unsafe impl Send for Window<'_> {}
// SAFETY: as above.
unsafe impl Sync for Window<'_> {}

impl<'m> Window<'m> {
    /// Allocates `len` bytes on every rank, zeroed on every rank before the
    /// call returns on any; collective over all ranks of `mpi`. Each rank may
    /// ask for a different `len`.
    ///
    /// # Errors
    /// [`RdmaError::Mpi`] if MPI refuses (out of memory, no RMA support).
    pub fn allocate(mpi: &'m Mpi, len: usize) -> Result<Window<'m>> {
        let comm = mpi.world_raw();
        let mut base: *mut u8 = std::ptr::null_mut();
        // SAFETY: a constant of the rsmpi shim, set at load time.
        let mut raw: ffi::MPI_Win = unsafe { ffi::RSMPI_WIN_NULL };
        // SAFETY: valid communicator; `base` receives the address of `len`
        // bytes owned by the window; disp unit 1 (byte displacements).
        check("MPI_Win_allocate", unsafe {
            ffi::MPI_Win_allocate(
                len as ffi::MPI_Aint,
                1,
                ffi::RSMPI_INFO_NULL,
                comm,
                (&mut base as *mut *mut u8).cast::<c_void>(),
                &mut raw,
            )
        })?;
        let win = Window {
            raw,
            base,
            len,
            comm,
            _mpi: PhantomData,
        };
        // SAFETY: `raw` is the window just created.
        check("MPI_Win_set_errhandler", unsafe {
            ffi::MPI_Win_set_errhandler(raw, ffi::RSMPI_ERRORS_RETURN)
        })?;
        if len > 0 {
            // SAFETY: `base` points to `len` bytes this window owns; no rank
            // accesses them before the barrier below.
            unsafe { std::ptr::write_bytes(base, 0, len) };
        }
        // Every part is zeroed before any rank can put into it.
        // SAFETY: valid communicator.
        check("MPI_Barrier", unsafe { ffi::MPI_Barrier(comm) })?;
        Ok(win)
    }

    /// Start of this rank's part of the window.
    pub fn base(&self) -> *mut u8 {
        self.base
    }

    /// Bytes of this rank's part.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether this rank's part is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether MPI reports the unified memory model (`MPI_WIN_UNIFIED`:
    /// local loads see remote puts after `MPI_Win_sync`). The remote ring
    /// relies on it.
    pub fn is_unified(&self) -> bool {
        let mut val: *mut c_int = std::ptr::null_mut();
        let mut flag: c_int = 0;
        // SAFETY: valid window; MPI_WIN_MODEL's value is a pointer to an int
        // owned by MPI, written into `val`.
        let rc = unsafe {
            ffi::MPI_Win_get_attr(
                self.raw,
                sys::AIR_MPI_WIN_MODEL,
                (&mut val as *mut *mut c_int).cast::<c_void>(),
                &mut flag,
            )
        };
        // SAFETY: when flag is set, `val` points to the model constant.
        rc == 0 && flag != 0 && !val.is_null() && unsafe { *val == sys::AIR_MPI_WIN_UNIFIED }
    }

    /// Starts a passive-target epoch to every rank (`MPI_Win_lock_all` with
    /// `MPI_MODE_NOCHECK`): one-sided operations may follow until the epoch
    /// is dropped (`MPI_Win_unlock_all`). Not collective.
    pub fn lock_all(&self) -> Result<Epoch<'_, 'm>> {
        // SAFETY: valid window; NOCHECK: no rank takes exclusive locks.
        check("MPI_Win_lock_all", unsafe {
            ffi::MPI_Win_lock_all(sys::AIR_MPI_MODE_NOCHECK, self.raw)
        })?;
        Ok(Epoch { win: self })
    }

    /// Synchronizes the public and private copies of this rank's part
    /// (`MPI_Win_sync`): a memory barrier between remote puts and local loads.
    pub fn sync(&self) -> Result<()> {
        // SAFETY: valid window inside an epoch (callers hold an Epoch) or
        // outside one (allowed by MPI-3 for MPI_Win_sync in unified model).
        check("MPI_Win_sync", unsafe { ffi::MPI_Win_sync(self.raw) })
    }

    /// A call into MPI's progress engine (`MPI_Iprobe` on the window's
    /// communicator): MPICH progresses passive-target operations that target
    /// this rank only while it is inside MPI.
    pub fn progress(&self) {
        progress_raw(self.comm);
    }
}

impl Drop for Window<'_> {
    fn drop(&mut self) {
        // SAFETY: valid window, no epoch open (epochs borrow the window and
        // are dropped first). Collective: every rank frees its window.
        let rc = unsafe { ffi::MPI_Win_free(&mut self.raw) };
        if rc != 0 {
            tracing::warn!("MPI_Win_free: {}", sys::error_string(rc));
        }
    }
}

/// A passive-target access epoch on every rank of a window. One-sided
/// operations return [`Pending`] handles that borrow their buffers.
pub struct Epoch<'w, 'm> {
    win: &'w Window<'m>,
}

impl std::fmt::Debug for Epoch<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Epoch").field("len", &self.win.len).finish()
    }
}

/// An operation (or several to one target) not yet completed. Holds the
/// borrow of its origin (and result) buffers; [`Pending::flush`] completes it
/// at the target, [`Pending::flush_local`] only at the origin; dropping it
/// without either completes it locally (errors are then ignored).
#[must_use = "an RMA operation completes when its Pending handle is flushed"]
pub struct Pending<'e, 'b> {
    epoch: &'e Epoch<'e, 'e>,
    target: c_int,
    done: bool,
    _buf: PhantomData<&'b mut [u8]>,
}

impl<'e, 'b> Pending<'e, 'b> {
    /// One handle for this operation and `later`, to the same target: the
    /// flush of the returned handle completes both (MPI flushes every
    /// operation to a target at once), with one call instead of two.
    ///
    /// # Panics
    /// If the two operations go to different targets.
    pub fn and(mut self, later: Pending<'e, 'b>) -> Pending<'e, 'b> {
        assert_eq!(self.target, later.target, "Pending::and across targets");
        self.done = true;
        later
    }
}

impl Pending<'_, '_> {
    /// Completes the operation at the origin and the target (`MPI_Win_flush`).
    pub fn flush(mut self) -> Result<()> {
        self.done = true;
        self.epoch.flush(self.target as usize)
    }

    /// Completes the operation at the origin only (`MPI_Win_flush_local`):
    /// the buffers may be reused, the target may not have the data yet.
    pub fn flush_local(mut self) -> Result<()> {
        self.done = true;
        self.epoch.flush_local(self.target as usize)
    }
}

impl Drop for Pending<'_, '_> {
    fn drop(&mut self) {
        if !self.done {
            // The buffer's borrow ends here: MPI must be done with it.
            let _ = self.epoch.flush_local(self.target as usize);
        }
    }
}

impl<'w, 'm> Epoch<'w, 'm> {
    /// The window of this epoch.
    pub fn window(&self) -> &'w Window<'m> {
        self.win
    }

    fn pending<'e, 'b>(&'e self, target: usize) -> Pending<'e, 'b> {
        // Shorten the epoch's own lifetimes to the borrow ('w, 'm: 'e);
        // Epoch is covariant in both.
        let epoch: &'e Epoch<'e, 'e> = self;
        Pending {
            epoch,
            target: target as c_int,
            done: false,
            _buf: PhantomData,
        }
    }

    /// Writes `origin` into rank `target`'s part at byte `disp` (`MPI_Put`).
    ///
    /// # Errors
    /// [`RdmaError::Mpi`] (e.g. a displacement past the target's part).
    pub fn put<'e, 'b>(
        &'e self,
        origin: &'b [u8],
        target: usize,
        disp: usize,
    ) -> Result<Pending<'e, 'b>> {
        let p = self.pending(target);
        for (i, chunk) in origin.chunks(CHUNK).enumerate() {
            // SAFETY: `chunk` is borrowed by the returned Pending until the
            // operation is flushed; MPI_BYTE counts bytes; valid window.
            check("MPI_Put", unsafe {
                ffi::MPI_Put(
                    chunk.as_ptr().cast(),
                    chunk.len() as c_int,
                    byte_type(),
                    target as c_int,
                    (disp + i * CHUNK) as ffi::MPI_Aint,
                    chunk.len() as c_int,
                    byte_type(),
                    self.win.raw,
                )
            })?;
        }
        Ok(p)
    }

    /// Reads `len(dest)` bytes of rank `target`'s part at byte `disp` into
    /// `dest` (`MPI_Get`); `dest` holds them once the handle is flushed.
    pub fn get<'e, 'b>(
        &'e self,
        dest: &'b mut [u8],
        target: usize,
        disp: usize,
    ) -> Result<Pending<'e, 'b>> {
        let p = self.pending(target);
        for (i, chunk) in dest.chunks_mut(CHUNK).enumerate() {
            // SAFETY: `chunk` is mutably borrowed by the returned Pending
            // until the operation is flushed; byte counts; valid window.
            check("MPI_Get", unsafe {
                ffi::MPI_Get(
                    chunk.as_mut_ptr().cast(),
                    chunk.len() as c_int,
                    byte_type(),
                    target as c_int,
                    (disp + i * CHUNK) as ffi::MPI_Aint,
                    chunk.len() as c_int,
                    byte_type(),
                    self.win.raw,
                )
            })?;
        }
        Ok(p)
    }

    /// Combines `origin` into the `u64` words of rank `target`'s part at byte
    /// `disp` with `op`, each word atomically (`MPI_Accumulate`).
    pub fn accumulate<'e, 'b>(
        &'e self,
        origin: &'b [u64],
        op: Op,
        target: usize,
        disp: usize,
    ) -> Result<Pending<'e, 'b>> {
        let p = self.pending(target);
        const WORDS: usize = CHUNK / 8;
        for (i, chunk) in origin.chunks(WORDS).enumerate() {
            // SAFETY: `chunk` is borrowed by the Pending until flushed;
            // MPI_UINT64_T matches u64; valid window.
            check("MPI_Accumulate", unsafe {
                ffi::MPI_Accumulate(
                    chunk.as_ptr().cast(),
                    chunk.len() as c_int,
                    sys::AIR_MPI_UINT64_T,
                    target as c_int,
                    (disp + i * CHUNK) as ffi::MPI_Aint,
                    chunk.len() as c_int,
                    sys::AIR_MPI_UINT64_T,
                    op.raw(),
                    self.win.raw,
                )
            })?;
        }
        Ok(p)
    }

    /// Atomically combines `value` into the `u64` at byte `disp` of rank
    /// `target` with `op` and stores the previous value in `result`
    /// (`MPI_Fetch_and_op`); `result` is valid only after the handle is
    /// flushed, and stays borrowed until then.
    pub fn fetch_and_op<'e, 'b>(
        &'e self,
        value: &'b u64,
        result: &'b mut u64,
        op: Op,
        target: usize,
        disp: usize,
    ) -> Result<Pending<'e, 'b>> {
        let p = self.pending(target);
        // SAFETY: `value` and `result` are borrowed by the Pending until
        // flushed; MPI_UINT64_T matches u64; valid window.
        check("MPI_Fetch_and_op", unsafe {
            ffi::MPI_Fetch_and_op(
                (value as *const u64).cast(),
                (result as *mut u64).cast(),
                sys::AIR_MPI_UINT64_T,
                target as c_int,
                disp as ffi::MPI_Aint,
                op.raw(),
                self.win.raw,
            )
        })?;
        Ok(p)
    }

    /// Starts writing `origin` into rank `target`'s part at byte `disp`
    /// without any later call having to wait for it (`MPI_Rput`): the
    /// returned [`Request`] is polled with [`Request::test`]. The origin is
    /// `'static` because a request that never completes (a stopped or lost
    /// target) is released without waiting, and MPI may still read it.
    pub fn rput(&self, origin: &'static [u8], target: usize, disp: usize) -> Result<Request> {
        if origin.len() > CHUNK {
            return Err(out_of_range("rput", disp, origin.len(), CHUNK));
        }
        // SAFETY: a constant of the rsmpi shim, set at load time.
        let mut raw = unsafe { ffi::RSMPI_REQUEST_NULL };
        // SAFETY: `origin` lives forever; byte counts; valid window inside
        // a lock_all epoch; `raw` is a live out-pointer.
        check("MPI_Rput", unsafe {
            ffi::MPI_Rput(
                origin.as_ptr().cast(),
                origin.len() as c_int,
                byte_type(),
                target as c_int,
                disp as ffi::MPI_Aint,
                origin.len() as c_int,
                byte_type(),
                self.win.raw,
                &mut raw,
            )
        })?;
        Ok(Request { raw, done: false })
    }

    /// Starts reading `len` bytes of rank `target`'s part at byte `disp`
    /// into `dest` (`MPI_Rget`) without any later call having to wait for
    /// it: the returned [`Request`] is polled with [`Request::test`], which
    /// drives MPI's progress engine (and so serves the peers' operations on
    /// this rank) while it waits. `dest` holds the bytes once `test` says
    /// done.
    ///
    /// # Safety
    /// `dest` is valid for writes of `len` bytes, and nothing reads or
    /// writes those bytes until the request completed; a request dropped
    /// before it completed is freed without waiting, so its `dest` must
    /// then never be reused or freed (leak it).
    ///
    /// # Errors
    /// [`RdmaError::Setup`] for more than 1 GiB; [`RdmaError::Mpi`].
    pub unsafe fn rget(
        &self,
        dest: *mut u8,
        len: usize,
        target: usize,
        disp: usize,
    ) -> Result<Request> {
        if len > CHUNK {
            return Err(out_of_range("rget", disp, len, CHUNK));
        }
        // SAFETY: a constant of the rsmpi shim, set at load time.
        let mut raw = unsafe { ffi::RSMPI_REQUEST_NULL };
        // SAFETY: `dest` is writable for `len` bytes until the request
        // completes (the caller's promise); byte counts; valid window inside
        // a lock_all epoch; `raw` is a live out-pointer.
        check("MPI_Rget", unsafe {
            ffi::MPI_Rget(
                dest.cast(),
                len as c_int,
                byte_type(),
                target as c_int,
                disp as ffi::MPI_Aint,
                len as c_int,
                byte_type(),
                self.win.raw,
                &mut raw,
            )
        })?;
        Ok(Request { raw, done: false })
    }

    /// Completes every operation of this process to `target`, at the origin
    /// and at the target (`MPI_Win_flush`).
    pub fn flush(&self, target: usize) -> Result<()> {
        // SAFETY: valid window inside a lock_all epoch.
        check("MPI_Win_flush", unsafe {
            ffi::MPI_Win_flush(target as c_int, self.win.raw)
        })
    }

    /// Completes every operation of this process to `target` at the origin
    /// (`MPI_Win_flush_local`).
    pub fn flush_local(&self, target: usize) -> Result<()> {
        // SAFETY: valid window inside a lock_all epoch.
        check("MPI_Win_flush_local", unsafe {
            ffi::MPI_Win_flush_local(target as c_int, self.win.raw)
        })
    }

    /// Completes every operation of this process to every rank (`MPI_Win_flush_all`).
    pub fn flush_all(&self) -> Result<()> {
        // SAFETY: valid window inside a lock_all epoch.
        check("MPI_Win_flush_all", unsafe {
            ffi::MPI_Win_flush_all(self.win.raw)
        })
    }

    /// `MPI_Win_sync` on the window (see [`Window::sync`]).
    pub fn sync(&self) -> Result<()> {
        self.win.sync()
    }
}

/// A request-based RMA operation ([`Epoch::rput`], [`Epoch::rget`]).
#[derive(Debug)]
pub struct Request {
    raw: ffi::MPI_Request,
    done: bool,
}

// SAFETY: a request handle may be tested from any thread under
// MPI_THREAD_MULTIPLE (one thread at a time: `test` takes `&mut self`).
unsafe impl Send for Request {}

impl Request {
    /// Whether the operation completed locally (`MPI_Test`); never blocks.
    pub fn test(&mut self) -> Result<bool> {
        if self.done {
            return Ok(true);
        }
        let mut flag: c_int = 0;
        // SAFETY: `raw` is an active request; STATUS_IGNORE is predefined.
        check("MPI_Test", unsafe {
            ffi::MPI_Test(&mut self.raw, &mut flag, ffi::RSMPI_STATUS_IGNORE)
        })?;
        self.done = flag != 0;
        Ok(self.done)
    }
}

impl Drop for Request {
    fn drop(&mut self) {
        if !self.done {
            // SAFETY: an active request; freeing it does not wait; its origin
            // buffer is 'static (Epoch::rput) or leaked by the caller
            // (Epoch::rget's contract).
            unsafe { ffi::MPI_Request_free(&mut self.raw) };
        }
    }
}

impl Drop for Epoch<'_, '_> {
    fn drop(&mut self) {
        // SAFETY: the epoch was opened by lock_all on this window; Pending
        // handles borrow the epoch and are gone.
        let rc = unsafe { ffi::MPI_Win_unlock_all(self.win.raw) };
        if rc != 0 {
            tracing::warn!("MPI_Win_unlock_all: {}", sys::error_string(rc));
        }
    }
}

/// Error for a displacement range outside a window part (checked before MPI
/// sees it, since MPI's own check may be missing or abort).
pub(crate) fn out_of_range(what: &str, disp: usize, len: usize, part: usize) -> RdmaError {
    RdmaError::Setup(format!(
        "{what}: bytes {disp}..{} are outside the window part of {part} bytes",
        disp + len
    ))
}
