//! Bounds-checked big- and little-endian field access, so parsers index nothing by hand
//! (over a slice, fallible; over a fixed-size array at constant offsets, [`FixedFields`]),
//! and the compare of received bytes against a constant.

use crate::{Error, Result};

pub(crate) fn get<const N: usize>(buf: &[u8], at: usize) -> Result<[u8; N]> {
    buf.get(at..at + N)
        .and_then(|s| s.try_into().ok())
        .ok_or(Error::Truncated)
}

pub(crate) fn put(buf: &mut [u8], at: usize, value: &[u8]) -> Result<()> {
    buf.get_mut(at..at + value.len())
        .ok_or(Error::BufferTooSmall)?
        .copy_from_slice(value);
    Ok(())
}

pub(crate) fn be16(buf: &[u8], at: usize) -> Result<u16> {
    get(buf, at).map(u16::from_be_bytes)
}
pub(crate) fn be32(buf: &[u8], at: usize) -> Result<u32> {
    get(buf, at).map(u32::from_be_bytes)
}
pub(crate) fn be64(buf: &[u8], at: usize) -> Result<u64> {
    get(buf, at).map(u64::from_be_bytes)
}
pub(crate) fn le16(buf: &[u8], at: usize) -> Result<u16> {
    get(buf, at).map(u16::from_le_bytes)
}
pub(crate) fn le32(buf: &[u8], at: usize) -> Result<u32> {
    get(buf, at).map(u32::from_le_bytes)
}

/// Fields of a fixed-size block (a descriptor) at the constant offsets of its layout:
/// the slice readers above without their `Result`, as nothing can be out of bounds.
pub(crate) struct FixedFields<'a, const N: usize>(pub &'a [u8; N]);

impl<const N: usize> FixedFields<'_, N> {
    /// `M` bytes from `at` (inside the block: every caller's offsets are constants).
    pub fn array<const M: usize>(&self, at: usize) -> [u8; M] {
        core::array::from_fn(|k| self.0[at + k])
    }
    pub fn le16(&self, at: usize) -> u16 {
        u16::from_le_bytes(self.array(at))
    }
    pub fn le32(&self, at: usize) -> u32 {
        u32::from_le_bytes(self.array(at))
    }
}

/// `got == want` for a constant `want` of whole words, with every byte compared against
/// the constant unrolled: a zero part of `want` costs a load and an OR. Received MPA
/// frames and FPDUs start 2 bytes past a word boundary in a frame, so where `got` is
/// 2-aligned it is compared a halfword at a time; elsewhere byte by byte (a core without
/// misaligned loads would assemble each halfword from two bytes). Sixteen bytes at a
/// time with an exit after each: the branch bounds how many loads the scheduler hoists
/// at once, so the compare needs few registers.
#[inline(always)]
pub(crate) fn equals_constant<const N: usize>(got: &[u8; N], want: &[u8; N]) -> bool {
    const { assert!(N.is_multiple_of(4)) };
    const CHUNK: usize = 16;
    match bytemuck::try_cast_slice::<u8, u16>(got) {
        Ok(halves) => halves
            .chunks(CHUNK / 2)
            .zip(want.chunks(CHUNK))
            .all(|(g, w)| {
                g.iter()
                    .zip(w.as_chunks::<2>().0)
                    .fold(0, |diff, (&g, &w)| diff | (g ^ u16::from_ne_bytes(w)))
                    == 0
            }),
        Err(_) => got
            .chunks(CHUNK)
            .zip(want.chunks(CHUNK))
            .all(|(g, w)| g.iter().zip(w).fold(0, |diff, (&g, &w)| diff | (g ^ w)) == 0),
    }
}
