//! CRC32c (Castagnoli): reflected polynomial 0x82F63B78, init and final XOR 0xFFFFFFFF.
//! The MPA FPDU CRC; on the wire it is sent least significant byte first.

use crc::{Crc, Digest, CRC_32_ISCSI};

/// The CRC32c algorithm (the iSCSI/SCTP CRC).
pub static CASTAGNOLI: Crc<u32> = Crc::<u32>::new(&CRC_32_ISCSI);

/// CRC32c of `bytes` at compile time, for constant frames (at run time use [`crc32c`],
/// which shares one table).
pub(crate) const fn const_crc32c(bytes: &[u8]) -> u32 {
    Crc::<u32>::new(&CRC_32_ISCSI).checksum(bytes)
}

/// A running CRC32c over bytes that arrive in pieces.
pub type Crc32cDigest = Digest<'static, u32>;

/// CRC32c of `bytes`.
pub fn crc32c(bytes: &[u8]) -> u32 {
    CASTAGNOLI.checksum(bytes)
}

/// A fresh running CRC32c.
pub fn digest() -> Crc32cDigest {
    CASTAGNOLI.digest()
}

#[cfg(test)]
mod tests {
    use super::*;

    // The vectors of spec/mpa.md.
    #[test]
    fn spec_vectors() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(&[0x00; 32]), 0x8A91_36AA);
        assert_eq!(crc32c(&[0xFF; 32]), 0x62A8_AB43);
        let ramp: [u8; 32] = core::array::from_fn(|i| i as u8);
        assert_eq!(crc32c(&ramp), 0x46DD_794E);
    }

    #[test]
    fn streaming_equals_one_shot_at_every_cut() {
        let data = b"The quick brown fox jumps over the lazy dog";
        for cut in 0..=data.len() {
            let mut d = digest();
            d.update(&data[..cut]);
            d.update(&data[cut..]);
            assert_eq!(d.finalize(), crc32c(data), "cut at {cut}");
        }
    }
}
