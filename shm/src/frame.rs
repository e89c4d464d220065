//! The receive-side check of one frame header against its ring, for a
//! reader that does not trust the bytes (the network tier's remote ring in
//! `air-rdma`, whose frames arrive over RMA). Pure and allocation-free: the
//! caller copies the 16 header bytes out of the ring and learns whether to
//! skip padding, read a frame, or report the ring as corrupt.
//!
//! The header is the ring's ([`crate::ring`]): bytes 0..4 payload length
//! (u32 LE, bytes), byte 4 kind ([`FrameKind`] or [`KIND_PADDING`]),
//! bytes 5..8 reserved, bytes 8..16 sequence number (u64 LE).

use crate::ring::{frame_size, FrameKind, FRAME_ALIGN, FRAME_HEADER, KIND_PADDING};

/// What the header at a read position holds, once checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameCheck {
    /// A padding frame filling the rest of the data area: advance the read
    /// position by `skip` bytes (to the start of the area) and read again.
    Padding {
        /// Bytes from the read position to the end of the data area.
        skip: usize,
    },
    /// A frame: its payload is the `len` bytes after the header; the next
    /// frame starts `size` bytes after this one.
    Frame {
        /// What the frame carries.
        kind: FrameKind,
        /// Payload length, bytes.
        len: usize,
        /// Bytes the frame occupies (header, payload, alignment padding):
        /// [`frame_size`]`(len)`.
        size: usize,
    },
}

/// Why a frame header breaks the ring protocol. Displays as the reason the
/// network tier reports (`RdmaError::Corrupt`), e.g. `sequence 7, expected 6`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Fewer bytes published than a header needs.
    #[error("{published} bytes published")]
    Short {
        /// Bytes published from the read position.
        published: usize,
    },
    /// The read position is not a frame position of the ring (not 16-aligned,
    /// or no room for a header before the end). Never true of a reader that
    /// advances by [`FrameCheck`]'s sizes from 0.
    #[error("read offset {offset} in a data area of {cap} bytes")]
    Offset {
        /// Read position in the data area, bytes.
        offset: usize,
        /// Data area size, bytes.
        cap: usize,
    },
    /// A padding frame that does not end exactly at the end of the data
    /// area, or is not wholly published.
    #[error("padding of {len} bytes")]
    Padding {
        /// The padding's length field, bytes.
        len: usize,
    },
    /// A kind byte that is neither a [`FrameKind`] nor [`KIND_PADDING`].
    #[error("unknown frame kind {kind:#x}")]
    UnknownKind {
        /// The kind byte.
        kind: u8,
    },
    /// A frame that runs past the end of the data area or past the bytes
    /// published.
    #[error("frame of {len} bytes, {published} published, {to_end} to the end")]
    TooLong {
        /// Payload length field, bytes.
        len: usize,
        /// Bytes published from the read position.
        published: usize,
        /// Bytes from the read position to the end of the data area.
        to_end: usize,
    },
    /// A sequence number other than the next one.
    #[error("sequence {seq}, expected {expected}")]
    Sequence {
        /// The header's sequence number.
        seq: u64,
        /// The number the reader expected.
        expected: u64,
    },
}

/// Checks that at least a header's worth of bytes (16) is published from
/// the read position: call before copying the header out of the ring.
///
/// # Errors
/// [`FrameError::Short`] when `published < 16`.
#[inline]
pub fn check_published(published: usize) -> Result<(), FrameError> {
    if published < FRAME_HEADER {
        return Err(FrameError::Short { published });
    }
    Ok(())
}

/// Checks the frame header `header` found at byte `offset` of a data area
/// of `cap` bytes, with `published` bytes published from `offset` on (they
/// may wrap to the start of the area) and `expected_seq` the sequence number
/// of the next frame.
///
/// Checks, in order: bytes published ([`check_published`]), the offset, a
/// padding frame's length (bytes to the end of the area minus 16) and that
/// it is published, the kind, the frame's size against the bytes to the end
/// of the area and the bytes published, the sequence number. Total: any
/// input gives an answer, never a panic. On `Ok`, `offset + size <= cap` and
/// `size <= published` (frame), or `skip == cap - offset <= published`
/// (padding).
///
/// # Errors
/// The first [`FrameError`] found.
#[inline]
pub fn check_frame(
    header: &[u8; FRAME_HEADER],
    offset: usize,
    cap: usize,
    published: usize,
    expected_seq: u64,
) -> Result<FrameCheck, FrameError> {
    check_published(published)?;
    let to_end = match offset.checked_add(FRAME_HEADER) {
        Some(end) if end <= cap && offset % FRAME_ALIGN == 0 => cap - offset,
        _ => return Err(FrameError::Offset { offset, cap }),
    };
    let [l0, l1, l2, l3, kind, _, _, _, s0, s1, s2, s3, s4, s5, s6, s7] = *header;
    let len = u32::from_le_bytes([l0, l1, l2, l3]) as usize;
    let seq = u64::from_le_bytes([s0, s1, s2, s3, s4, s5, s6, s7]);
    if kind == KIND_PADDING {
        if len + FRAME_HEADER != to_end || published < to_end {
            return Err(FrameError::Padding { len });
        }
        return Ok(FrameCheck::Padding { skip: to_end });
    }
    let Some(kind) = FrameKind::from_u8(kind) else {
        return Err(FrameError::UnknownKind { kind });
    };
    let size = frame_size(len);
    if size > to_end || size > published {
        return Err(FrameError::TooLong {
            len,
            published,
            to_end,
        });
    }
    if seq != expected_seq {
        return Err(FrameError::Sequence {
            seq,
            expected: expected_seq,
        });
    }
    Ok(FrameCheck::Frame { kind, len, size })
}

/// Largest segment of a remote (network-tier) ring, bytes: the sender's
/// mirror of a ring is one segment of it ([`segment_bytes`]).
pub const MAX_SEGMENT: usize = 256 << 10;
/// Fewest bytes of a segment smaller than its ring (see [`segment_bytes`]).
const MIN_SEGMENT: usize = 64 << 10;

/// Bytes of one segment of a ring with a data area of `cap` bytes: frames
/// never cross a multiple of it (a padding frame fills a segment's end),
/// and the sender stages at most one segment of frames not yet put, in a
/// mirror of that size. It is `cap` itself up to [`MAX_SEGMENT`]; above,
/// the largest divisor of `cap` that is a multiple of 16 and at most
/// [`MAX_SEGMENT`], unless that is under 64 KiB (then `cap`: an odd
/// capacity keeps a whole-ring mirror rather than tiny frames). Both ends
/// compute it from `cap`, so they agree. A frame's payload is at most a
/// segment less its 16-byte header.
pub fn segment_bytes(cap: usize) -> usize {
    if cap <= MAX_SEGMENT || cap % FRAME_ALIGN != 0 {
        return cap;
    }
    let units = cap / FRAME_ALIGN;
    (MIN_SEGMENT / FRAME_ALIGN..=MAX_SEGMENT / FRAME_ALIGN)
        .rev()
        .find(|d| units % d == 0)
        .map_or(cap, |d| d * FRAME_ALIGN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_divide_the_ring_and_hold_big_frames() {
        assert_eq!(segment_bytes(4096), 4096);
        assert_eq!(segment_bytes(256 << 10), 256 << 10);
        assert_eq!(segment_bytes(1 << 20), 256 << 10);
        // 6.5 MiB = 26 × 256 KiB.
        assert_eq!(segment_bytes(6_815_744), 256 << 10);
        // 2,000,000 bytes: 256 KiB does not divide it, 250,000 does.
        assert_eq!(segment_bytes(2_000_000), 250_000);
        // 16 × a prime above 16 K: no divisor of 64-256 KiB, whole ring.
        assert_eq!(segment_bytes(16 * 65_537), 16 * 65_537);
        for cap in [300 << 10, 1 << 20, 5 << 20, 1_000_000 * 16] {
            let s = segment_bytes(cap);
            assert_eq!(cap % s, 0, "{cap}");
            assert_eq!(s % FRAME_ALIGN, 0, "{cap}");
        }
    }

    fn header(len: u32, kind: u8, seq: u64) -> [u8; FRAME_HEADER] {
        let mut h = [0u8; FRAME_HEADER];
        h[..4].copy_from_slice(&len.to_le_bytes());
        h[4] = kind;
        h[8..].copy_from_slice(&seq.to_le_bytes());
        h
    }

    #[test]
    fn a_frame_is_accepted() {
        let h = header(5, FrameKind::Data as u8, 3);
        assert_eq!(
            check_frame(&h, 16, 4096, 32, 3),
            Ok(FrameCheck::Frame {
                kind: FrameKind::Data,
                len: 5,
                size: 32
            })
        );
        // Exactly to the end of the area, exactly the bytes published.
        let h = header(48, FrameKind::End as u8, 0);
        assert_eq!(
            check_frame(&h, 0, 64, 64, 0),
            Ok(FrameCheck::Frame {
                kind: FrameKind::End,
                len: 48,
                size: 64
            })
        );
    }

    #[test]
    fn padding_is_skipped() {
        let h = header(4096 - 48 - 16, KIND_PADDING, 0);
        assert_eq!(
            check_frame(&h, 48, 4096, 4096, 9),
            Ok(FrameCheck::Padding { skip: 4048 })
        );
    }

    #[test]
    fn too_few_bytes_published() {
        let h = header(0, FrameKind::Data as u8, 0);
        let e = check_frame(&h, 0, 64, 15, 0).unwrap_err();
        assert_eq!(e, FrameError::Short { published: 15 });
        assert_eq!(e.to_string(), "15 bytes published");
        assert_eq!(check_published(16), Ok(()));
    }

    #[test]
    fn bad_offset() {
        let h = header(0, FrameKind::Data as u8, 0);
        for (offset, cap) in [(8, 64), (64, 64), (48, 60), (usize::MAX - 7, 64)] {
            let e = check_frame(&h, offset, cap, 64, 0).unwrap_err();
            assert_eq!(e, FrameError::Offset { offset, cap });
        }
        assert_eq!(
            FrameError::Offset { offset: 8, cap: 64 }.to_string(),
            "read offset 8 in a data area of 64 bytes"
        );
    }

    #[test]
    fn padding_of_the_wrong_length_or_unpublished() {
        // 48 bytes to the end: padding must say 32.
        let e = check_frame(&header(31, KIND_PADDING, 0), 16, 64, 48, 0).unwrap_err();
        assert_eq!(e, FrameError::Padding { len: 31 });
        assert_eq!(e.to_string(), "padding of 31 bytes");
        let e = check_frame(&header(32, KIND_PADDING, 0), 16, 64, 32, 0).unwrap_err();
        assert_eq!(e, FrameError::Padding { len: 32 });
        // The largest length field does not overflow.
        let e = check_frame(&header(u32::MAX, KIND_PADDING, 0), 0, 64, 64, 0).unwrap_err();
        assert_eq!(
            e,
            FrameError::Padding {
                len: u32::MAX as usize
            }
        );
    }

    #[test]
    fn unknown_kind() {
        for kind in [0, 6, 0xAA, 0xFF] {
            let e = check_frame(&header(0, kind, 0), 0, 64, 64, 0).unwrap_err();
            assert_eq!(e, FrameError::UnknownKind { kind });
        }
        assert_eq!(
            FrameError::UnknownKind { kind: 0x7 }.to_string(),
            "unknown frame kind 0x7"
        );
    }

    #[test]
    fn frame_past_the_end_or_past_the_published_bytes() {
        let data = FrameKind::Data as u8;
        // 32 bytes to the end, frame of 17 bytes needs 48.
        let e = check_frame(&header(17, data, 0), 32, 64, 64, 0).unwrap_err();
        assert_eq!(
            e,
            FrameError::TooLong {
                len: 17,
                published: 64,
                to_end: 32
            }
        );
        assert_eq!(
            e.to_string(),
            "frame of 17 bytes, 64 published, 32 to the end"
        );
        // Room to the end, but only 32 bytes published.
        let e = check_frame(&header(17, data, 0), 0, 4096, 32, 0).unwrap_err();
        assert_eq!(
            e,
            FrameError::TooLong {
                len: 17,
                published: 32,
                to_end: 4096
            }
        );
        let e = check_frame(&header(u32::MAX, data, 0), 0, 4096, 4096, 0).unwrap_err();
        assert!(matches!(e, FrameError::TooLong { .. }));
    }

    #[test]
    fn sequence_out_of_order() {
        let e = check_frame(&header(0, FrameKind::Watermark as u8, 7), 0, 64, 16, 6).unwrap_err();
        assert_eq!(
            e,
            FrameError::Sequence {
                seq: 7,
                expected: 6
            }
        );
        assert_eq!(e.to_string(), "sequence 7, expected 6");
    }
}
