//! Raw MPI: constants from the C shim, and error-code checking.

use crate::error::{RdmaError, Result};
use mpi::ffi;
use std::os::raw::c_int;

// Built from csrc/shim.c by build.rs, against the MPI that mpi-sys links.
extern "C" {
    pub(crate) static AIR_MPI_REPLACE: ffi::MPI_Op;
    pub(crate) static AIR_MPI_NO_OP: ffi::MPI_Op;
    pub(crate) static AIR_MPI_SUM: ffi::MPI_Op;
    pub(crate) static AIR_MPI_BYTE: ffi::MPI_Datatype;
    pub(crate) static AIR_MPI_UINT64_T: ffi::MPI_Datatype;
    pub(crate) static AIR_MPI_MODE_NOCHECK: c_int;
    pub(crate) static AIR_MPI_WIN_UNIFIED: c_int;
    pub(crate) static AIR_MPI_WIN_MODEL: c_int;
    pub(crate) static AIR_MPI_MAX_ERROR_STRING: c_int;
}

/// `MPI_SUCCESS` (0 in every MPI).
const SUCCESS: c_int = 0;

/// Turns an MPI return code into a `Result` naming the call.
#[inline]
pub(crate) fn check(call: &'static str, code: c_int) -> Result<()> {
    if code == SUCCESS {
        Ok(())
    } else {
        Err(RdmaError::Mpi {
            call,
            code,
            message: error_string(code),
        })
    }
}

/// `MPI_Error_string` of `code`.
pub(crate) fn error_string(code: c_int) -> String {
    // SAFETY: reading a constant initialized by the C shim at load time.
    let max = unsafe { AIR_MPI_MAX_ERROR_STRING }.max(64) as usize;
    let mut buf = vec![0u8; max + 1];
    let mut len: c_int = 0;
    // SAFETY: `buf` holds MPI_MAX_ERROR_STRING bytes as the call requires;
    // `len` is a valid out-pointer.
    let rc = unsafe { ffi::MPI_Error_string(code, buf.as_mut_ptr().cast(), &mut len) };
    if rc != SUCCESS {
        return format!("unknown MPI error {code}");
    }
    buf.truncate(len.clamp(0, max as c_int) as usize);
    String::from_utf8_lossy(&buf).trim().to_string()
}
