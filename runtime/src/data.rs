//! Records that cross an exchange: rkyv-archived batches, read in place.
//!
//! A batch of records is a `Vec<T>` archived by rkyv directly into a ring
//! frame (no intermediate buffer when it fits, which is the normal case for
//! fixed-size records); the consumer reads `&[T::Archived]` in place with
//! `access_unchecked` in release builds (one trusted job) and with rkyv's
//! validation in debug builds.

use rkyv::api::high::{HighSerializer, HighValidator};
use rkyv::bytecheck::CheckBytes;
use rkyv::rancor;
use rkyv::ser::allocator::ArenaHandle;
use rkyv::ser::writer::Buffer;
use rkyv::util::AlignedVec;
use rkyv::vec::ArchivedVec;
use rkyv::{Archive, Portable, Serialize};

/// A record type that can cross an exchange. Implemented for every type that
/// derives rkyv's `Archive` and `Serialize` (with rkyv's default bytecheck).
pub trait ExchangeData: Send + 'static + Sized {
    /// The archived form the consumer reads in place (`T::Archived`).
    type Item: Portable + 'static;

    /// Bytes an archive of `n` records needs when the record has no
    /// out-of-line data (the usual case); a first guess for variable-size ones.
    fn size_hint(n: usize) -> usize;

    /// Archives `items` into `out`; returns the archive's length in bytes, or
    /// `None` if `out` is too small. (A `&Vec`: rkyv archives the `Vec` itself
    /// as the root, an `ArchivedVec`.)
    #[allow(clippy::ptr_arg)]
    fn write_batch(items: &Vec<Self>, out: &mut [u8]) -> Option<usize>;

    /// Archives `items` into a new buffer (the fallback when a guess was too small).
    #[allow(clippy::ptr_arg)]
    fn to_bytes(items: &Vec<Self>) -> AlignedVec;

    /// The records of an archive written by `write_batch`, in place.
    ///
    /// `bytes` must be exactly the archive (the root sits at its end) and
    /// 16-byte aligned. Errors (debug builds only) when the bytes do not
    /// validate.
    fn read_batch(bytes: &[u8]) -> Result<&[Self::Item], String>;

    /// [`ExchangeData::read_batch`] with rkyv's validation in every build
    /// (`--validate`): a corrupted batch is an error, never undefined
    /// behaviour.
    fn read_batch_validated(bytes: &[u8]) -> Result<&[Self::Item], String>;
}

impl<T> ExchangeData for T
where
    T: Archive + Send + 'static,
    T: for<'a, 'b> Serialize<HighSerializer<Buffer<'b>, ArenaHandle<'a>, rancor::Error>>,
    T: for<'a> Serialize<HighSerializer<AlignedVec, ArenaHandle<'a>, rancor::Error>>,
    T::Archived: for<'a> CheckBytes<HighValidator<'a, rancor::Error>> + 'static,
{
    type Item = T::Archived;

    #[inline]
    fn size_hint(n: usize) -> usize {
        let item = std::mem::size_of::<T::Archived>();
        let align = std::mem::align_of::<T::Archived>();
        n * item + align + std::mem::size_of::<ArchivedVec<T::Archived>>() + 16
    }

    #[inline]
    fn write_batch(items: &Vec<Self>, out: &mut [u8]) -> Option<usize> {
        rkyv::api::high::to_bytes_in::<_, rancor::Error>(items, Buffer::from(out))
            .ok()
            .map(|b| b.len())
    }

    fn to_bytes(items: &Vec<Self>) -> AlignedVec {
        rkyv::api::high::to_bytes_in::<_, rancor::Error>(items, AlignedVec::new())
            .expect("archiving into a growable buffer cannot fail")
    }

    fn read_batch_validated(bytes: &[u8]) -> Result<&[Self::Item], String> {
        rkyv::access::<ArchivedVec<T::Archived>, rancor::Error>(bytes)
            .map(|v| v.as_slice())
            .map_err(|e| format!("invalid archived batch of {} bytes: {e}", bytes.len()))
    }

    #[inline]
    fn read_batch(bytes: &[u8]) -> Result<&[Self::Item], String> {
        if cfg!(debug_assertions) {
            Self::read_batch_validated(bytes)
        } else {
            // SAFETY: within one job every frame of a data channel is written
            // by `write_batch` for the same `T`, with its exact length, into a
            // 16-byte aligned payload (the ring's guarantee); so a valid
            // `ArchivedVec<T::Archived>` sits at the root position.
            Ok(unsafe { rkyv::access_unchecked::<ArchivedVec<T::Archived>>(bytes) }.as_slice())
        }
    }
}

/// A record of the graph API: it crosses exchange edges archived (rkyv) and
/// comes out of them as an owned value again (`Clone` for broadcasts and
/// fan-outs). Implemented for every type that derives rkyv's `Archive`,
/// `Serialize` and `Deserialize` and is `Clone`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot cross an exchange edge: it is not a `Record`",
    note = "derive `Clone, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize` for `{Self}` \
            (records that cross an edge, join inputs, window accumulators and rows before \
            `collect` must; add `rkyv = \"0.8\"` to your dependencies)"
)]
pub trait Record: ExchangeData + Clone {
    /// The owned record of an archived one (rkyv `deserialize`; a copy for
    /// fixed-size records, allocations for strings and vectors).
    fn from_archived(item: &Self::Item) -> Self;
}

impl<T> Record for T
where
    T: ExchangeData<Item = <T as Archive>::Archived> + Archive + Clone,
    <T as Archive>::Archived:
        rkyv::Deserialize<T, rkyv::api::high::HighDeserializer<rancor::Error>>,
{
    #[inline]
    fn from_archived(item: &Self::Item) -> Self {
        match rkyv::deserialize::<T, rancor::Error>(item) {
            Ok(v) => v,
            // Deserializing a batch this job archived allocates at most:
            // only an allocation failure (which aborts anyway) gets here.
            Err(e) => panic!("deserializing an archived record: {e}"),
        }
    }
}
