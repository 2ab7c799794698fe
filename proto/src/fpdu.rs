//! MPA FPDUs (RFC 5044 §4) without markers:
//!
//! ```text
//! | ULPDU_Length (2, BE) | ULPDU | PAD (0..3 zeros) | CRC32c (4, least significant byte first) |
//! ```
//! The CRC covers the length field, the ULPDU and the PAD. [`Splitter`] finds FPDU
//! boundaries in a TCP byte stream cut at arbitrary points, the way the datapath does.

use crate::bytes::{be16, put};
use crate::crc32c::{const_crc32c, crc32c, digest, Crc32cDigest};
use crate::{Error, Result};

/// Bytes of the ULPDU_Length field.
pub const LENGTH_LEN: usize = 2;
/// Bytes of the CRC field.
pub const CRC_LEN: usize = 4;
/// Largest ULPDU the 16-bit length field can announce.
pub const MAX_ULPDU_LEN: usize = u16::MAX as usize;

/// PAD bytes after a ULPDU of `ulpdu_len` bytes: length field + ULPDU + PAD is a
/// multiple of 4.
pub const fn pad_len(ulpdu_len: usize) -> usize {
    (4 - (LENGTH_LEN + ulpdu_len) % 4) % 4
}

/// Bytes on the wire of an FPDU carrying `ulpdu_len` bytes.
pub const fn fpdu_len(ulpdu_len: usize) -> usize {
    LENGTH_LEN + ulpdu_len + pad_len(ulpdu_len) + CRC_LEN
}

/// Largest ULPDU whose FPDU fits in `segment_len` bytes of TCP payload, or `None` if
/// not even an empty FPDU (8 bytes) fits.
pub const fn max_ulpdu_len(segment_len: usize) -> Option<usize> {
    // fpdu_len(L) = round_up_4(2 + L) + 4, so the largest L has 2 + L = round_down_4(S - 4).
    let room = segment_len.saturating_sub(CRC_LEN) & !3;
    if room < 4 {
        return None;
    }
    let ulpdu = room - LENGTH_LEN;
    Some(if ulpdu > MAX_ULPDU_LEN {
        MAX_ULPDU_LEN
    } else {
        ulpdu
    })
}

/// The FPDU carrying `ulpdu`, built at compile time (`N` is its [`fpdu_len`]): the bytes
/// [`FpduRepr::emit`] writes, for messages known in advance.
pub(crate) const fn framed<const N: usize>(ulpdu: &[u8]) -> [u8; N] {
    assert!(N == fpdu_len(ulpdu.len()));
    let mut out = [0u8; N];
    let [len_hi, len_lo] = (ulpdu.len() as u16).to_be_bytes();
    out[0] = len_hi;
    out[1] = len_lo;
    let mut i = 0;
    while i < ulpdu.len() {
        out[LENGTH_LEN + i] = ulpdu[i];
        i += 1;
    }
    let (covered, _) = out.split_at(N - CRC_LEN);
    let crc = const_crc32c(covered).to_le_bytes();
    let mut i = 0;
    while i < CRC_LEN {
        out[N - CRC_LEN + i] = crc[i];
        i += 1;
    }
    out
}

/// A read/write view of one FPDU at the start of a buffer.
#[derive(Debug, Clone)]
pub struct Fpdu<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Fpdu<T> {
    pub const fn new_unchecked(buffer: T) -> Fpdu<T> {
        Fpdu { buffer }
    }

    /// Wrap a buffer that holds at least the whole FPDU its length field announces.
    pub fn new_checked(buffer: T) -> Result<Fpdu<T>> {
        let fpdu = Self::new_unchecked(buffer);
        fpdu.check_len()?;
        Ok(fpdu)
    }

    pub fn check_len(&self) -> Result<()> {
        let len = fpdu_len(usize::from(be16(self.buffer.as_ref(), 0)?));
        if self.buffer.as_ref().len() < len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn ulpdu_len(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[0], b[1]])
    }
    /// Bytes of the whole FPDU.
    pub fn total_len(&self) -> usize {
        fpdu_len(usize::from(self.ulpdu_len()))
    }
    pub fn ulpdu(&self) -> &[u8] {
        &self.buffer.as_ref()[LENGTH_LEN..LENGTH_LEN + usize::from(self.ulpdu_len())]
    }
    /// The bytes the CRC covers: length field, ULPDU and PAD.
    pub fn covered(&self) -> &[u8] {
        &self.buffer.as_ref()[..self.total_len() - CRC_LEN]
    }
    /// The CRC field as received.
    pub fn crc(&self) -> u32 {
        let at = self.total_len() - CRC_LEN;
        let b = &self.buffer.as_ref()[at..at + CRC_LEN];
        u32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }
    /// The CRC computed over the covered bytes.
    pub fn computed_crc(&self) -> u32 {
        crc32c(self.covered())
    }
}

/// An FPDU: its ULPDU (the PAD and CRC follow from it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FpduRepr<'a> {
    pub ulpdu: &'a [u8],
}

impl<'a> FpduRepr<'a> {
    /// Parse the FPDU at the start of `bytes` and check its CRC.
    pub fn parse(bytes: &'a [u8]) -> Result<FpduRepr<'a>> {
        let fpdu = Fpdu::new_checked(bytes)?;
        let (computed, received) = (fpdu.computed_crc(), fpdu.crc());
        if computed != received {
            return Err(Error::BadCrc { computed, received });
        }
        let len = usize::from(fpdu.ulpdu_len());
        Ok(FpduRepr {
            ulpdu: &bytes[LENGTH_LEN..LENGTH_LEN + len],
        })
    }

    pub fn buffer_len(&self) -> usize {
        fpdu_len(self.ulpdu.len())
    }

    /// Write the FPDU (length, ULPDU, PAD, CRC) to the start of `buffer`; returns its length.
    pub fn emit(&self, buffer: &mut [u8]) -> Result<usize> {
        let len = self.ulpdu.len();
        if len > MAX_ULPDU_LEN {
            return Err(Error::UlpduTooLong);
        }
        let total = fpdu_len(len);
        let out = buffer.get_mut(..total).ok_or(Error::BufferTooSmall)?;
        let covered = total - CRC_LEN;
        put(out, 0, &(len as u16).to_be_bytes())?;
        put(out, LENGTH_LEN, self.ulpdu)?;
        out[LENGTH_LEN + len..covered].fill(0);
        let crc = crc32c(&out[..covered]);
        put(out, covered, &crc.to_le_bytes())?;
        Ok(total)
    }
}

/// What the [`Splitter`] found in the bytes it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitEvent<'a> {
    /// An FPDU begins; its ULPDU has this many bytes.
    Start { ulpdu_len: u16 },
    /// The next ULPDU bytes of the current FPDU (never PAD or CRC).
    Data(&'a [u8]),
    /// The current FPDU ended with a good CRC.
    End,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SplitState {
    /// Collecting the length field; `have` bytes of it so far.
    Length { have: u8, first: u8 },
    /// ULPDU bytes still to come.
    Ulpdu { left: u16, pad: u8 },
    /// PAD bytes still to come.
    Pad { left: u8 },
    /// CRC bytes: `have` received so far, little-endian into `value`.
    Crc { have: u8, value: u32 },
    /// A CRC or length error ended the stream.
    Failed,
}

/// Streaming FPDU delineation over a byte stream cut at arbitrary points, with the CRC
/// checked on the fly and nothing buffered: the ULPDU bytes are handed out as slices of
/// the input, as the hardware does. A CRC error or an over-long ULPDU is fatal to the
/// stream (RFC 5044 §7.2): every later call returns [`Error::StreamFailed`].
#[derive(Clone)]
pub struct Splitter {
    state: SplitState,
    crc: Crc32cDigest,
    max_ulpdu_len: u16,
}

impl core::fmt::Debug for Splitter {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Splitter")
            .field("state", &self.state)
            .field("max_ulpdu_len", &self.max_ulpdu_len)
            .finish()
    }
}

impl Splitter {
    /// A splitter at an FPDU boundary that refuses ULPDUs longer than `max_ulpdu_len`.
    pub fn new(max_ulpdu_len: u16) -> Splitter {
        Splitter {
            state: SplitState::Length { have: 0, first: 0 },
            crc: digest(),
            max_ulpdu_len,
        }
    }

    /// Whether the stream is at an FPDU boundary (no FPDU partly received).
    pub fn at_boundary(&self) -> bool {
        self.state == (SplitState::Length { have: 0, first: 0 })
    }

    /// Feed the next bytes of the stream; `sink` sees the events in stream order.
    pub fn push<'a>(
        &mut self,
        mut input: &'a [u8],
        mut sink: impl FnMut(SplitEvent<'a>),
    ) -> Result<()> {
        while !input.is_empty() {
            let (state, used) = match self.state {
                SplitState::Failed => return Err(Error::StreamFailed),
                SplitState::Length { have: 0, .. } => {
                    self.crc.update(&input[..1]);
                    (
                        SplitState::Length {
                            have: 1,
                            first: input[0],
                        },
                        1,
                    )
                }
                SplitState::Length { first, .. } => {
                    self.crc.update(&input[..1]);
                    let len = u16::from_be_bytes([first, input[0]]);
                    if len > self.max_ulpdu_len {
                        self.state = SplitState::Failed;
                        return Err(Error::UlpduTooLong);
                    }
                    sink(SplitEvent::Start { ulpdu_len: len });
                    let pad = pad_len(usize::from(len)) as u8;
                    (self.after_ulpdu(SplitState::Ulpdu { left: len, pad }), 1)
                }
                SplitState::Ulpdu { left, pad } => {
                    let take = input.len().min(usize::from(left));
                    let data = &input[..take];
                    self.crc.update(data);
                    sink(SplitEvent::Data(data));
                    let left = left - take as u16;
                    (self.after_ulpdu(SplitState::Ulpdu { left, pad }), take)
                }
                SplitState::Pad { left } => {
                    let take = input.len().min(usize::from(left));
                    self.crc.update(&input[..take]);
                    let left = left - take as u8;
                    let next = if left == 0 {
                        SplitState::Crc { have: 0, value: 0 }
                    } else {
                        SplitState::Pad { left }
                    };
                    (next, take)
                }
                SplitState::Crc { have, value } => {
                    let value = value | u32::from(input[0]) << (8 * have);
                    if have < 3 {
                        (
                            SplitState::Crc {
                                have: have + 1,
                                value,
                            },
                            1,
                        )
                    } else {
                        let computed = core::mem::replace(&mut self.crc, digest()).finalize();
                        if computed != value {
                            self.state = SplitState::Failed;
                            return Err(Error::BadCrc {
                                computed,
                                received: value,
                            });
                        }
                        sink(SplitEvent::End);
                        (SplitState::Length { have: 0, first: 0 }, 1)
                    }
                }
            };
            self.state = state;
            input = &input[used..];
        }
        Ok(())
    }

    fn after_ulpdu(&self, state: SplitState) -> SplitState {
        match state {
            SplitState::Ulpdu { left: 0, pad: 0 } => SplitState::Crc { have: 0, value: 0 },
            SplitState::Ulpdu { left: 0, pad } => SplitState::Pad { left: pad },
            other => other,
        }
    }
}

/// Parse every FPDU in `bytes`, which must end at an FPDU boundary.
pub fn for_each_fpdu<'a>(mut bytes: &'a [u8], mut f: impl FnMut(FpduRepr<'a>)) -> Result<()> {
    while !bytes.is_empty() {
        let repr = FpduRepr::parse(bytes)?;
        f(repr);
        bytes = &bytes[repr.buffer_len()..];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    fn fpdu(ulpdu: &[u8]) -> Vec<u8> {
        let repr = FpduRepr { ulpdu };
        let mut buf = std::vec![0u8; repr.buffer_len()];
        assert_eq!(repr.emit(&mut buf), Ok(buf.len()));
        buf
    }

    /// Runs the splitter over `stream` cut at `cuts`; returns the ULPDUs it delivered.
    fn split(stream: &[u8], cuts: &[usize]) -> Result<Vec<Vec<u8>>> {
        let mut splitter = Splitter::new(u16::MAX);
        let mut out: Vec<Vec<u8>> = Vec::new();
        let mut open = false;
        let mut at = 0;
        for &cut in cuts.iter().chain(core::iter::once(&stream.len())) {
            splitter.push(&stream[at..cut], |event| match event {
                SplitEvent::Start { ulpdu_len } => {
                    assert!(!open);
                    open = true;
                    out.push(Vec::with_capacity(usize::from(ulpdu_len)));
                }
                SplitEvent::Data(d) => out.last_mut().unwrap().extend_from_slice(d),
                SplitEvent::End => {
                    assert!(open);
                    open = false;
                }
            })?;
            at = cut;
        }
        assert!(!open && splitter.at_boundary());
        Ok(out)
    }

    #[test]
    fn pad_makes_a_multiple_of_four() {
        for len in 0..64 {
            assert_eq!((2 + len + pad_len(len)) % 4, 0);
            assert!(pad_len(len) < 4);
        }
        assert_eq!(fpdu_len(0), 8);
        assert_eq!(fpdu_len(14), 20);
        assert_eq!(fpdu_len(23), 32);
    }

    #[test]
    fn max_ulpdu_fills_the_segment() {
        assert_eq!(max_ulpdu_len(7), None);
        assert_eq!(max_ulpdu_len(8), Some(2));
        for segment in 8..2000 {
            let max = max_ulpdu_len(segment).unwrap();
            assert!(fpdu_len(max) <= segment, "segment {segment}");
            assert!(fpdu_len(max + 1) > segment, "segment {segment}");
        }
        assert_eq!(max_ulpdu_len(1_000_000), Some(MAX_ULPDU_LEN));
    }

    #[test]
    fn emit_then_parse_checks_the_crc() {
        let wire = fpdu(b"abcde");
        assert_eq!(FpduRepr::parse(&wire), Ok(FpduRepr { ulpdu: b"abcde" }));
        let mut bad = wire.clone();
        bad[3] ^= 1;
        assert!(matches!(FpduRepr::parse(&bad), Err(Error::BadCrc { .. })));
        assert_eq!(
            FpduRepr::parse(&wire[..wire.len() - 1]),
            Err(Error::Truncated)
        );
        assert_eq!(
            FpduRepr { ulpdu: b"abcde" }.emit(&mut [0; 11]),
            Err(Error::BufferTooSmall)
        );
    }

    fn stream() -> (Vec<u8>, Vec<Vec<u8>>) {
        let ulpdus: Vec<Vec<u8>> = [0usize, 1, 2, 3, 4, 5, 14, 23, 100]
            .iter()
            .map(|&n| (0..n).map(|i| (i * 7 + n) as u8).collect())
            .collect();
        let stream = ulpdus.iter().flat_map(|u| fpdu(u)).collect();
        (stream, ulpdus)
    }

    #[test]
    fn splitter_finds_every_fpdu_at_every_single_cut() {
        let (stream, ulpdus) = stream();
        for cut in 0..=stream.len() {
            assert_eq!(split(&stream, &[cut]).unwrap(), ulpdus, "cut at {cut}");
        }
    }

    #[test]
    fn splitter_finds_every_fpdu_at_every_pair_of_cuts() {
        let (stream, ulpdus) = stream();
        for a in 0..=stream.len() {
            for b in a..=stream.len() {
                assert_eq!(split(&stream, &[a, b]).unwrap(), ulpdus, "cuts at {a}, {b}");
            }
        }
    }

    #[test]
    fn splitter_byte_by_byte() {
        let (stream, ulpdus) = stream();
        let cuts: Vec<usize> = (1..stream.len()).collect();
        assert_eq!(split(&stream, &cuts).unwrap(), ulpdus);
    }

    #[test]
    fn splitter_agrees_with_for_each_fpdu() {
        let (stream, ulpdus) = stream();
        let mut seen = Vec::new();
        for_each_fpdu(&stream, |f| seen.push(f.ulpdu.to_vec())).unwrap();
        assert_eq!(seen, ulpdus);
    }

    #[test]
    fn a_crc_error_fails_the_stream_for_good() {
        let (mut stream, _) = stream();
        stream[9] ^= 0x40; // inside the second FPDU
        let mut splitter = Splitter::new(u16::MAX);
        let mut ends = 0;
        let result = splitter.push(&stream, |e| ends += usize::from(e == SplitEvent::End));
        assert!(matches!(result, Err(Error::BadCrc { .. })));
        assert_eq!(ends, 1);
        assert_eq!(splitter.push(&stream, |_| ()), Err(Error::StreamFailed));
        assert!(!splitter.at_boundary());
    }

    #[test]
    fn an_over_long_ulpdu_fails_the_stream() {
        let wire = fpdu(&[0u8; 100]);
        let mut splitter = Splitter::new(99);
        let mut events = 0;
        assert_eq!(
            splitter.push(&wire, |_| events += 1),
            Err(Error::UlpduTooLong)
        );
        assert_eq!(events, 0);
        assert_eq!(splitter.push(&wire, |_| ()), Err(Error::StreamFailed));
    }
}
