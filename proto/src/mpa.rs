//! MPA request and reply frames (RFC 5044 §7.1) and the MPA v2 block (RFC 6581 §5).
//!
//! ```text
//! | key (16) | flags (1) | revision (1) | PD_Length (2, BE) | private data (PD_Length) |
//! ```
//! With revision 2 and the enhanced flag the first 4 bytes of the private data are the
//! [`V2Block`]; [`FrameRepr::private_data`] is the application's part after it.

use crate::bytes::{be16, equals_constant};
use crate::{Error, Result};

/// Key of an MPA request frame.
pub const REQUEST_KEY: &[u8; 16] = b"MPA ID Req Frame";
/// Key of an MPA reply frame.
pub const REPLY_KEY: &[u8; 16] = b"MPA ID Rep Frame";
/// Bytes before the private data.
pub const HEADER_LEN: usize = 20;
/// Most private data a frame may carry (RFC 5044), v2 block included.
pub const MAX_PRIVATE_DATA: usize = 512;
/// Length of the MPA v2 block.
pub const V2_BLOCK_LEN: usize = 4;
/// Longest frame: header plus the largest private data.
pub const MAX_FRAME_LEN: usize = HEADER_LEN + MAX_PRIVATE_DATA;

/// Flag bits of byte 16.
pub mod flags {
    /// Markers wanted by this sender.
    pub const MARKERS: u8 = 0x80;
    /// CRC wanted by this sender.
    pub const CRC: u8 = 0x40;
    /// Reject (reply only).
    pub const REJECT: u8 = 0x20;
    /// Enhanced connection setup: an MPA v2 block leads the private data.
    pub const ENHANCED: u8 = 0x10;
}

/// IRD/ORD value meaning "no IRD/ORD negotiation".
pub const IRD_ORD_NO_NEGOTIATION: u16 = 0x3FFF;
const IRD_ORD_MASK: u16 = 0x3FFF;
const V2_PEER_TO_PEER: u16 = 0x8000;
const V2_RTR_SEND: u16 = 0x4000;
const V2_RTR_WRITE: u16 = 0x8000;
const V2_RTR_READ: u16 = 0x4000;

mod field {
    use core::ops::Range;
    pub const KEY: Range<usize> = 0..16;
    pub const FLAGS: usize = 16;
    pub const REVISION: usize = 17;
    pub const PD_LENGTH: usize = 18;
    pub const PRIVATE_DATA: usize = 20;
}

/// A read/write view of an MPA request or reply frame.
#[derive(Debug, Clone)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Wrap a buffer without checking it; accessors of fields beyond its end panic.
    pub const fn new_unchecked(buffer: T) -> Frame<T> {
        Frame { buffer }
    }

    /// Wrap a buffer that holds at least the header and the announced private data.
    pub fn new_checked(buffer: T) -> Result<Frame<T>> {
        let frame = Self::new_unchecked(buffer);
        frame.check_len()?;
        Ok(frame)
    }

    /// `Err(Truncated)` unless the header and the announced private data are present.
    pub fn check_len(&self) -> Result<()> {
        match Self::frame_len(self.buffer.as_ref()) {
            Ok(len) if len <= self.buffer.as_ref().len() => Ok(()),
            _ => Err(Error::Truncated),
        }
    }

    /// Length of the whole frame announced by the header at the start of `bytes`:
    /// how many bytes a stream reader must collect before parsing.
    pub fn frame_len(bytes: &[u8]) -> Result<usize> {
        Ok(HEADER_LEN + usize::from(be16(bytes, field::PD_LENGTH)?))
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn key(&self) -> &[u8] {
        &self.buffer.as_ref()[field::KEY]
    }
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }
    pub fn revision(&self) -> u8 {
        self.buffer.as_ref()[field::REVISION]
    }
    pub fn pd_length(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[field::PD_LENGTH], b[field::PD_LENGTH + 1]])
    }
    /// All private data, v2 block included.
    pub fn private_data(&self) -> &[u8] {
        let end = field::PRIVATE_DATA + usize::from(self.pd_length());
        &self.buffer.as_ref()[field::PRIVATE_DATA..end]
    }
}

/// Request, accepting reply or rejecting reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrameKind {
    Request,
    Accept,
    Reject,
}

/// Zero-length messages a peer may use as the RTR (ready-to-receive) in peer-to-peer mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RtrTypes {
    /// Zero-length Send.
    pub send: bool,
    /// Zero-length RDMA Write.
    pub write: bool,
    /// Zero-length RDMA Read Request.
    pub read: bool,
}

impl RtrTypes {
    pub const NONE: RtrTypes = RtrTypes {
        send: false,
        write: false,
        read: false,
    };
    pub const SEND: RtrTypes = RtrTypes {
        send: true,
        write: false,
        read: false,
    };
    pub const WRITE: RtrTypes = RtrTypes {
        send: false,
        write: true,
        read: false,
    };
    pub const READ: RtrTypes = RtrTypes {
        send: false,
        write: false,
        read: true,
    };
    /// Each single type, in the order iwnic numbers them (the datapath's `event_rtr`
    /// reports type `k` of these as `k + 1`).
    pub const EACH: [RtrTypes; 3] = [RtrTypes::SEND, RtrTypes::WRITE, RtrTypes::READ];

    /// How many types are set.
    pub fn count(self) -> usize {
        usize::from(self.send) + usize::from(self.write) + usize::from(self.read)
    }

    /// Whether every type set in `self` is also set in `offer`.
    pub fn within(self, offer: RtrTypes) -> bool {
        (!self.send || offer.send) && (!self.write || offer.write) && (!self.read || offer.read)
    }
}

/// The MPA v2 block: peer-to-peer mode, RTR types, IRD and ORD (14 bits each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct V2Block {
    pub peer_to_peer: bool,
    pub rtr: RtrTypes,
    pub ird: u16,
    pub ord: u16,
}

impl V2Block {
    /// Parse the first 4 bytes of `bytes`.
    pub fn parse(bytes: &[u8]) -> Result<V2Block> {
        let (ird, ord) = (be16(bytes, 0)?, be16(bytes, 2)?);
        Ok(V2Block {
            peer_to_peer: ird & V2_PEER_TO_PEER != 0,
            rtr: RtrTypes {
                send: ird & V2_RTR_SEND != 0,
                write: ord & V2_RTR_WRITE != 0,
                read: ord & V2_RTR_READ != 0,
            },
            ird: ird & IRD_ORD_MASK,
            ord: ord & IRD_ORD_MASK,
        })
    }

    /// The 4 bytes of the block. IRD and ORD are cut to their 14 bits. Inlined into the
    /// frame's emit, which stores them in place (measured in the firmware: −16
    /// instructions a setup).
    #[inline(always)]
    pub fn to_bytes(&self) -> [u8; V2_BLOCK_LEN] {
        let bit = |on: bool, mask: u16| if on { mask } else { 0 };
        let ird = bit(self.peer_to_peer, V2_PEER_TO_PEER)
            | bit(self.rtr.send, V2_RTR_SEND)
            | (self.ird & IRD_ORD_MASK);
        let ord = bit(self.rtr.write, V2_RTR_WRITE)
            | bit(self.rtr.read, V2_RTR_READ)
            | (self.ord & IRD_ORD_MASK);
        let (i, o) = (ird.to_be_bytes(), ord.to_be_bytes());
        [i[0], i[1], o[0], o[1]]
    }
}

/// A parsed MPA request or reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FrameRepr<'a> {
    pub kind: FrameKind,
    /// M: this sender wants markers.
    pub markers: bool,
    /// C: this sender wants CRC.
    pub crc: bool,
    /// 1 or 2.
    pub revision: u8,
    /// Present iff revision 2 with the enhanced flag.
    pub v2: Option<V2Block>,
    /// The application's private data (after the v2 block, if any).
    pub private_data: &'a [u8],
}

impl<'a> FrameRepr<'a> {
    /// Parse a frame. Checks run in the order a stream reader can act on them: the key,
    /// revision and PD_Length are judged from the 20-byte header, before the private
    /// data has arrived (`Truncated` then means "collect [`Frame::frame_len`] bytes").
    /// Reserved flag bits are ignored, as RFC 5044 asks; R is ignored in a request.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(frame: &'a Frame<&'a T>) -> Result<FrameRepr<'a>> {
        Self::parse_bytes(frame.buffer.as_ref())
    }

    /// [`FrameRepr::parse`] over a plain byte slice that starts with the frame; bytes after
    /// the frame are not looked at.
    #[inline(always)]
    pub fn parse_bytes(bytes: &'a [u8]) -> Result<FrameRepr<'a>> {
        if bytes.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let frame = Frame::new_unchecked(bytes);
        let flags = frame.flags();
        let key: &[u8; 16] = frame.key().try_into().map_err(|_| Error::Truncated)?;
        let kind = if equals_constant(key, REQUEST_KEY) {
            FrameKind::Request
        } else if !equals_constant(key, REPLY_KEY) {
            return Err(Error::BadKey);
        } else if flags & flags::REJECT != 0 {
            FrameKind::Reject
        } else {
            FrameKind::Accept
        };
        let revision = frame.revision();
        if !(1..=2).contains(&revision) {
            return Err(Error::BadRevision);
        }
        let pd_length = usize::from(frame.pd_length());
        if pd_length > MAX_PRIVATE_DATA {
            return Err(Error::PrivateDataTooLong);
        }
        let all = bytes
            .get(HEADER_LEN..HEADER_LEN + pd_length)
            .ok_or(Error::Truncated)?;
        let (v2, private_data) = if revision == 2 && flags & flags::ENHANCED != 0 {
            if all.len() < V2_BLOCK_LEN {
                return Err(Error::MissingV2Block);
            }
            let (block, rest) = all.split_at(V2_BLOCK_LEN);
            (Some(V2Block::parse(block)?), rest)
        } else {
            (None, all)
        };
        Ok(FrameRepr {
            kind,
            markers: flags & flags::MARKERS != 0,
            crc: flags & flags::CRC != 0,
            revision,
            v2,
            private_data,
        })
    }

    /// PD_Length of the emitted frame: the application's private data plus the v2 block.
    pub fn pd_length(&self) -> usize {
        self.private_data.len() + if self.v2.is_some() { V2_BLOCK_LEN } else { 0 }
    }

    /// Length of the emitted frame.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.pd_length()
    }

    /// Write the frame to the start of `buffer`; returns its length. Fails on a short
    /// buffer, more than 512 bytes of private data, a revision other than 1 or 2, or a
    /// v2 block with revision 1.
    #[inline]
    pub fn emit(&self, buffer: &mut [u8]) -> Result<usize> {
        if !(1..=2).contains(&self.revision) || (self.v2.is_some() && self.revision != 2) {
            return Err(Error::BadRevision);
        }
        let pd_length = self.pd_length();
        if pd_length > MAX_PRIVATE_DATA {
            return Err(Error::PrivateDataTooLong);
        }
        let len = self.buffer_len();
        let out = buffer.get_mut(..len).ok_or(Error::BufferTooSmall)?;
        // `out` is `len` bytes, at least a header (and a v2 block when there is one), so
        // the `BufferTooSmall` arms below are not reached.
        let (header, pd) = out
            .split_first_chunk_mut::<HEADER_LEN>()
            .ok_or(Error::BufferTooSmall)?;
        let (key, rest) = header
            .split_first_chunk_mut::<16>()
            .ok_or(Error::BufferTooSmall)?;
        let want = match self.kind {
            FrameKind::Request => REQUEST_KEY,
            FrameKind::Accept | FrameKind::Reject => REPLY_KEY,
        };
        // Four 4-byte copies, which the compiler writes as stores of constants; one
        // 16-byte copy becomes a `memcpy` call, slow at a payload's unaligned address.
        let (key, want) = (key.as_chunks_mut::<4>().0, want.as_chunks::<4>().0);
        key[0] = want[0];
        key[1] = want[1];
        key[2] = want[2];
        key[3] = want[3];
        let bit = |on: bool, mask: u8| if on { mask } else { 0 };
        let flags = bit(self.markers, flags::MARKERS)
            | bit(self.crc, flags::CRC)
            | bit(self.kind == FrameKind::Reject, flags::REJECT)
            | bit(self.v2.is_some(), flags::ENHANCED);
        let [pd_hi, pd_lo] = (pd_length as u16).to_be_bytes();
        rest.copy_from_slice(&[flags, self.revision, pd_hi, pd_lo]);
        let app = match (&self.v2, pd.split_first_chunk_mut::<V2_BLOCK_LEN>()) {
            (Some(block), Some((v2, app))) => {
                *v2 = block.to_bytes();
                app
            }
            (Some(_), None) => return Err(Error::BufferTooSmall),
            (None, _) => pd,
        };
        if !self.private_data.is_empty() {
            app.copy_from_slice(self.private_data);
        }
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    fn concat(key: &[u8], rest: &[u8]) -> Vec<u8> {
        let mut v = key.to_vec();
        v.extend_from_slice(rest);
        v
    }

    fn emit(repr: &FrameRepr) -> Vec<u8> {
        let mut buf = [0u8; MAX_FRAME_LEN];
        let len = repr.emit(&mut buf).unwrap();
        buf[..len].to_vec()
    }

    fn v2(peer_to_peer: bool, rtr: RtrTypes) -> Option<V2Block> {
        Some(V2Block {
            peer_to_peer,
            rtr,
            ird: 16,
            ord: 16,
        })
    }

    fn repr(kind: FrameKind, v2: Option<V2Block>) -> FrameRepr<'static> {
        FrameRepr {
            kind,
            markers: false,
            crc: true,
            revision: 2,
            v2,
            private_data: &[],
        }
    }

    const OFFER: RtrTypes = RtrTypes {
        send: false,
        write: true,
        read: true,
    };

    #[test]
    fn spec_request_revision_2() {
        let wire = concat(
            REQUEST_KEY,
            &[0x50, 0x02, 0x00, 0x04, 0x80, 0x10, 0xC0, 0x10],
        );
        let want = repr(FrameKind::Request, v2(true, OFFER));
        assert_eq!(FrameRepr::parse_bytes(&wire), Ok(want));
        assert_eq!(emit(&want), wire);
    }

    #[test]
    fn spec_accepting_reply_read_rtr() {
        let wire = concat(REPLY_KEY, &[0x50, 0x02, 0x00, 0x04, 0x80, 0x10, 0x40, 0x10]);
        let want = repr(FrameKind::Accept, v2(true, RtrTypes::READ));
        assert_eq!(FrameRepr::parse_bytes(&wire), Ok(want));
        assert_eq!(emit(&want), wire);
    }

    /// The spec's reject vector, a frame iwnic takes from a peer. iwnic's own rejects put
    /// an RTR type and crossed IRD/ORD in the block, as irdma's initiator needs
    /// (`negotiation::reject` in the firmware), so they differ from this vector.
    #[test]
    fn spec_reject_reply() {
        let wire = concat(REPLY_KEY, &[0x70, 0x02, 0x00, 0x04, 0x80, 0x10, 0x00, 0x10]);
        let want = repr(FrameKind::Reject, v2(true, RtrTypes::NONE));
        assert_eq!(FrameRepr::parse_bytes(&wire), Ok(want));
        assert_eq!(emit(&want), wire);
    }

    #[test]
    fn spec_revision_1_request() {
        let wire = concat(REQUEST_KEY, &[0x40, 0x01, 0x00, 0x00]);
        let want = FrameRepr {
            revision: 1,
            ..repr(FrameKind::Request, None)
        };
        assert_eq!(FrameRepr::parse_bytes(&wire), Ok(want));
        assert_eq!(emit(&want), wire);
    }

    #[test]
    fn private_data_follows_the_v2_block() {
        let want = FrameRepr {
            private_data: b"hello",
            ..repr(FrameKind::Request, v2(true, OFFER))
        };
        let wire = emit(&want);
        assert_eq!(Frame::new_checked(&wire[..]).unwrap().pd_length(), 9);
        assert_eq!(&wire[24..], b"hello");
        assert_eq!(FrameRepr::parse_bytes(&wire), Ok(want));
    }

    #[test]
    fn bad_inputs_are_refused_in_stream_order() {
        let good = emit(&repr(FrameKind::Request, v2(true, OFFER)));
        let mut bad_key = good.clone();
        bad_key[0] = b'X';
        assert_eq!(FrameRepr::parse_bytes(&bad_key), Err(Error::BadKey));
        for revision in [0u8, 3, 255] {
            let mut bad = good.clone();
            bad[17] = revision;
            assert_eq!(FrameRepr::parse_bytes(&bad), Err(Error::BadRevision));
        }
        // PD_Length > 512 is refused from the header alone, before any private data.
        let mut long = good[..HEADER_LEN].to_vec();
        long[18..20].copy_from_slice(&513u16.to_be_bytes());
        assert_eq!(
            FrameRepr::parse_bytes(&long),
            Err(Error::PrivateDataTooLong)
        );
        // A header announcing more than has arrived is truncated, and says how much to wait for.
        assert_eq!(FrameRepr::parse_bytes(&good[..22]), Err(Error::Truncated));
        assert_eq!(Frame::<&[u8]>::frame_len(&good[..22]), Ok(24));
        assert_eq!(FrameRepr::parse_bytes(&good[..19]), Err(Error::Truncated));
        // Enhanced flag with fewer than 4 bytes of private data.
        let short = concat(REQUEST_KEY, &[0x50, 0x02, 0x00, 0x02, 0x80, 0x10]);
        assert_eq!(FrameRepr::parse_bytes(&short), Err(Error::MissingV2Block));
    }

    #[test]
    fn reserved_bits_are_ignored_and_r_in_a_request_too() {
        let wire = concat(REQUEST_KEY, &[0x40 | 0x0F | 0x20, 0x01, 0x00, 0x00]);
        let parsed = FrameRepr::parse_bytes(&wire).unwrap();
        assert_eq!(parsed.kind, FrameKind::Request);
        // Revision 1 ignores the enhanced bit: 0x10 is reserved there.
        let wire = concat(REPLY_KEY, &[0x50, 0x01, 0x00, 0x04, 1, 2, 3, 4]);
        let parsed = FrameRepr::parse_bytes(&wire).unwrap();
        assert_eq!(
            (parsed.v2, parsed.private_data),
            (None, &[1u8, 2, 3, 4][..])
        );
    }

    #[test]
    fn emit_refuses_what_cannot_be_parsed_back() {
        let big = [0u8; 509];
        let too_long = FrameRepr {
            private_data: &big,
            ..repr(FrameKind::Request, v2(true, OFFER))
        };
        assert_eq!(
            too_long.emit(&mut [0u8; 600]),
            Err(Error::PrivateDataTooLong)
        );
        let v1_with_block = FrameRepr {
            revision: 1,
            ..repr(FrameKind::Request, v2(true, OFFER))
        };
        assert_eq!(v1_with_block.emit(&mut [0u8; 64]), Err(Error::BadRevision));
        let ok = repr(FrameKind::Request, v2(true, OFFER));
        assert_eq!(ok.emit(&mut [0u8; 23]), Err(Error::BufferTooSmall));
    }

    #[test]
    fn rtr_types_within_an_offer() {
        assert!(RtrTypes::READ.within(OFFER));
        assert!(!RtrTypes::SEND.within(OFFER));
        assert_eq!(OFFER.count(), 2);
    }
}
