//! Bounds-checked big- and little-endian field access, so parsers index nothing by hand.

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
