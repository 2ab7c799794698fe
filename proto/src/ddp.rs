//! The DDP (RFC 5041) and RDMAP (RFC 5040) headers of the messages the connection path
//! sends or inspects itself: the zero-length RTR messages, Send and Terminate.
//!
//! ```text
//! byte 0 (DDP control):   0x80 tagged | 0x40 last | 0x03 DDP version (1)
//! byte 1 (RDMAP control): 0xC0 RDMAP version (1) | 0x0F opcode
//! tagged   (14 bytes): ctrl, rdmap ctrl, STag (4), TO (8)
//! untagged (18 bytes): ctrl, rdmap ctrl, reserved / invalidate STag (4), QN (4), MSN (4), MO (4)
//! Read Request body (28 bytes): sink STag (4), sink TO (8), size (4), source STag (4), source TO (8)
//! Terminate body (4 bytes + optional copies): layer (4 bits) | etype (4) | code (8) | M D R (3) | 0 (13)
//! ```

use crate::bytes::{be32, be64, equals_constant, put};
use crate::fpdu::{fpdu_len, framed};
use crate::mpa::RtrTypes;
use crate::{Error, Result};

pub const DDP_VERSION: u8 = 1;
pub const RDMAP_VERSION: u8 = 1;
pub const TAGGED_HEADER_LEN: usize = 14;
pub const UNTAGGED_HEADER_LEN: usize = 18;
pub const READ_REQUEST_BODY_LEN: usize = 28;
pub const TERMINATE_CONTROL_LEN: usize = 4;

const CTRL_TAGGED: u8 = 0x80;
const CTRL_LAST: u8 = 0x40;
const CTRL_DDP_VERSION: u8 = 0x03;
const RDMAP_VERSION_SHIFT: u8 = 6;
const RDMAP_OPCODE: u8 = 0x0F;

/// RDMAP opcodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Opcode {
    Write = 0,
    ReadRequest = 1,
    ReadResponse = 2,
    Send = 3,
    SendInvalidate = 4,
    SendSolicited = 5,
    SendSolicitedInvalidate = 6,
    Terminate = 7,
}

impl Opcode {
    pub fn from_u8(value: u8) -> Option<Opcode> {
        use Opcode::*;
        [
            Write,
            ReadRequest,
            ReadResponse,
            Send,
            SendInvalidate,
            SendSolicited,
            SendSolicitedInvalidate,
            Terminate,
        ]
        .get(usize::from(value))
        .copied()
    }

    /// Write and Read Response travel in tagged buffers; everything else is untagged.
    pub fn is_tagged(self) -> bool {
        matches!(self, Opcode::Write | Opcode::ReadResponse)
    }

    /// The untagged queue (QN) the message belongs to.
    pub fn queue(self) -> u32 {
        match self {
            Opcode::ReadRequest => queue::READ_REQUEST,
            Opcode::Terminate => queue::TERMINATE,
            _ => queue::SEND,
        }
    }
}

/// Untagged queue numbers.
pub mod queue {
    pub const SEND: u32 = 0;
    pub const READ_REQUEST: u32 = 1;
    pub const TERMINATE: u32 = 2;
}

/// The DDP part of the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Placement {
    Tagged {
        stag: u32,
        to: u64,
    },
    /// `inv_stag` is the reserved field, or the STag to invalidate for Send with Invalidate.
    Untagged {
        inv_stag: u32,
        qn: u32,
        msn: u32,
        mo: u32,
    },
}

/// DDP + RDMAP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HeaderRepr {
    pub last: bool,
    pub opcode: Opcode,
    pub placement: Placement,
}

impl HeaderRepr {
    pub fn buffer_len(&self) -> usize {
        match self.placement {
            Placement::Tagged { .. } => TAGGED_HEADER_LEN,
            Placement::Untagged { .. } => UNTAGGED_HEADER_LEN,
        }
    }

    /// Parse the header at the start of a ULPDU. Reserved control bits are ignored.
    pub fn parse(ulpdu: &[u8]) -> Result<HeaderRepr> {
        let (ctrl, rdmap) = match ulpdu {
            [c, r, ..] => (*c, *r),
            _ => return Err(Error::Truncated),
        };
        if ctrl & CTRL_DDP_VERSION != DDP_VERSION || rdmap >> RDMAP_VERSION_SHIFT != RDMAP_VERSION {
            return Err(Error::BadVersion);
        }
        let opcode = Opcode::from_u8(rdmap & RDMAP_OPCODE).ok_or(Error::BadOpcode)?;
        let tagged = ctrl & CTRL_TAGGED != 0;
        if tagged != opcode.is_tagged() {
            return Err(Error::BadOpcode);
        }
        let placement = if tagged {
            Placement::Tagged {
                stag: be32(ulpdu, 2)?,
                to: be64(ulpdu, 6)?,
            }
        } else {
            Placement::Untagged {
                inv_stag: be32(ulpdu, 2)?,
                qn: be32(ulpdu, 6)?,
                msn: be32(ulpdu, 10)?,
                mo: be32(ulpdu, 14)?,
            }
        };
        Ok(HeaderRepr {
            last: ctrl & CTRL_LAST != 0,
            opcode,
            placement,
        })
    }

    pub fn emit(&self, buffer: &mut [u8]) -> Result<usize> {
        if self.opcode.is_tagged() != matches!(self.placement, Placement::Tagged { .. }) {
            return Err(Error::BadOpcode);
        }
        let len = self.buffer_len();
        let out = buffer.get_mut(..len).ok_or(Error::BufferTooSmall)?;
        let tagged = if self.opcode.is_tagged() {
            CTRL_TAGGED
        } else {
            0
        };
        let last = if self.last { CTRL_LAST } else { 0 };
        out[0] = tagged | last | DDP_VERSION;
        out[1] = RDMAP_VERSION << RDMAP_VERSION_SHIFT | self.opcode as u8;
        match self.placement {
            Placement::Tagged { stag, to } => {
                put(out, 2, &stag.to_be_bytes())?;
                put(out, 6, &to.to_be_bytes())?;
            }
            Placement::Untagged {
                inv_stag,
                qn,
                msn,
                mo,
            } => {
                for (at, v) in [(2, inv_stag), (6, qn), (10, msn), (14, mo)] {
                    put(out, at, &v.to_be_bytes())?;
                }
            }
        }
        Ok(len)
    }
}

/// The body of an RDMA Read Request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ReadRequestRepr {
    pub sink_stag: u32,
    pub sink_to: u64,
    pub size: u32,
    pub source_stag: u32,
    pub source_to: u64,
}

impl ReadRequestRepr {
    pub fn parse(body: &[u8]) -> Result<ReadRequestRepr> {
        Ok(ReadRequestRepr {
            sink_stag: be32(body, 0)?,
            sink_to: be64(body, 4)?,
            size: be32(body, 12)?,
            source_stag: be32(body, 16)?,
            source_to: be64(body, 20)?,
        })
    }

    pub fn emit(&self, buffer: &mut [u8]) -> Result<usize> {
        let out = buffer
            .get_mut(..READ_REQUEST_BODY_LEN)
            .ok_or(Error::BufferTooSmall)?;
        put(out, 0, &self.sink_stag.to_be_bytes())?;
        put(out, 4, &self.sink_to.to_be_bytes())?;
        put(out, 12, &self.size.to_be_bytes())?;
        put(out, 16, &self.source_stag.to_be_bytes())?;
        put(out, 20, &self.source_to.to_be_bytes())?;
        Ok(READ_REQUEST_BODY_LEN)
    }
}

/// `want.len()` if `bytes` begin with `want`.
#[inline(always)]
fn prefix_len<const N: usize>(bytes: &[u8], want: &[u8; N]) -> Option<usize> {
    // FPDUs are whole words (`fpdu_len` pads them), as `equals_constant` needs.
    equals_constant(bytes.first_chunk()?, want).then_some(N)
}

/// Bytes of a zero-length Read Response's FPDU.
pub const ZERO_LENGTH_READ_RESPONSE_FPDU_LEN: usize = fpdu_len(TAGGED_HEADER_LEN);

// The RTR messages of `MessageRepr::rtr`, byte for byte (a test holds them to its
// emit): DDP control (last, version 1, tagged for the Write), RDMAP control (version 1,
// opcode), then the header fields: zero STag and offsets, untagged QN by opcode and
// MSN 1, and for the Read Request a zero-length read of zero STags.
const RTR_FPDU_SEND: [u8; fpdu_len(UNTAGGED_HEADER_LEN)] = framed(&[
    CTRL_LAST | DDP_VERSION,
    RDMAP_VERSION << RDMAP_VERSION_SHIFT | Opcode::Send as u8,
    0,
    0,
    0,
    0, // invalidate STag
    0,
    0,
    0,
    0, // QN: Send
    0,
    0,
    0,
    1, // MSN
    0,
    0,
    0,
    0, // MO
]);
const RTR_FPDU_WRITE: [u8; fpdu_len(TAGGED_HEADER_LEN)] = framed(&[
    CTRL_TAGGED | CTRL_LAST | DDP_VERSION,
    RDMAP_VERSION << RDMAP_VERSION_SHIFT | Opcode::Write as u8,
    0,
    0,
    0,
    0, // STag
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0, // TO
]);
const RTR_FPDU_READ: [u8; fpdu_len(UNTAGGED_HEADER_LEN + READ_REQUEST_BODY_LEN)] = framed(&{
    let mut ulpdu = [0u8; UNTAGGED_HEADER_LEN + READ_REQUEST_BODY_LEN];
    ulpdu[0] = CTRL_LAST | DDP_VERSION;
    ulpdu[1] = RDMAP_VERSION << RDMAP_VERSION_SHIFT | Opcode::ReadRequest as u8;
    ulpdu[9] = queue::READ_REQUEST as u8; // QN (bytes 6..10)
    ulpdu[13] = 1; // MSN (bytes 10..14); the Read Request body is all zero
    ulpdu
});

/// The layer a Terminate blames (RFC 5040 §7.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layer {
    Rdmap = 0,
    Ddp = 1,
    /// The lower layer protocol: MPA over TCP.
    Llp = 2,
}

/// Error codes of layer LLP, error type MPA (RFC 5044 §8, RFC 6581 §7).
pub mod llp_code {
    pub const ETYPE_MPA: u8 = 0x00;
    pub const STREAM_LOST: u8 = 0x01;
    pub const CRC_ERROR: u8 = 0x02;
    pub const MARKER_MISMATCH: u8 = 0x03;
    pub const INVALID_REQUEST_REPLY: u8 = 0x04;
    pub const LOCAL_CATASTROPHIC: u8 = 0x05;
    pub const INSUFFICIENT_IRD: u8 = 0x06;
    pub const NO_MATCHING_RTR: u8 = 0x07;
}

const TERM_M: u8 = 0x80;
const TERM_D: u8 = 0x40;
const TERM_R: u8 = 0x20;

/// The Terminate body: who failed and why, and optionally copies of the offending headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TerminateRepr<'a> {
    pub layer: Layer,
    pub etype: u8,
    pub code: u8,
    /// M: the DDP segment length field is present.
    pub segment_length_valid: bool,
    /// D: the terminated DDP header is included.
    pub ddp_header_included: bool,
    /// R: the terminated RDMAP header is included.
    pub rdmap_header_included: bool,
    /// Whatever follows the 4-byte control: segment length and header copies.
    pub copies: &'a [u8],
}

impl<'a> TerminateRepr<'a> {
    /// A Terminate for an MPA-level (LLP) error with no header copies.
    pub const fn llp(code: u8) -> TerminateRepr<'static> {
        TerminateRepr {
            layer: Layer::Llp,
            etype: llp_code::ETYPE_MPA,
            code,
            segment_length_valid: false,
            ddp_header_included: false,
            rdmap_header_included: false,
            copies: &[],
        }
    }

    pub fn parse(body: &'a [u8]) -> Result<TerminateRepr<'a>> {
        let (b0, code, flags) = match body {
            [b0, code, flags, _, ..] => (*b0, *code, *flags),
            _ => return Err(Error::Truncated),
        };
        let layer = match b0 >> 4 {
            0 => Layer::Rdmap,
            1 => Layer::Ddp,
            2 => Layer::Llp,
            _ => return Err(Error::Malformed),
        };
        Ok(TerminateRepr {
            layer,
            etype: b0 & 0x0F,
            code,
            segment_length_valid: flags & TERM_M != 0,
            ddp_header_included: flags & TERM_D != 0,
            rdmap_header_included: flags & TERM_R != 0,
            copies: &body[TERMINATE_CONTROL_LEN..],
        })
    }

    pub fn buffer_len(&self) -> usize {
        TERMINATE_CONTROL_LEN + self.copies.len()
    }

    pub fn emit(&self, buffer: &mut [u8]) -> Result<usize> {
        if self.etype > 0x0F {
            return Err(Error::Malformed);
        }
        let len = self.buffer_len();
        let out = buffer.get_mut(..len).ok_or(Error::BufferTooSmall)?;
        let bit = |on: bool, mask: u8| if on { mask } else { 0 };
        out[0] = (self.layer as u8) << 4 | self.etype;
        out[1] = self.code;
        out[2] = bit(self.segment_length_valid, TERM_M)
            | bit(self.ddp_header_included, TERM_D)
            | bit(self.rdmap_header_included, TERM_R);
        out[3] = 0;
        put(out, TERMINATE_CONTROL_LEN, self.copies)?;
        Ok(len)
    }
}

/// What follows the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Body<'a> {
    /// Write, Read Response and the Sends: the payload.
    Payload(&'a [u8]),
    ReadRequest(ReadRequestRepr),
    Terminate(TerminateRepr<'a>),
}

/// A whole ULPDU: DDP/RDMAP header and body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MessageRepr<'a> {
    pub header: HeaderRepr,
    pub body: Body<'a>,
}

impl<'a> MessageRepr<'a> {
    /// The zero-length message of the chosen RTR type (exactly one type set in `rtr`),
    /// sent as the initiator's first FPDU in peer-to-peer mode (RFC 6581 §5).
    pub fn rtr(rtr: RtrTypes) -> Option<MessageRepr<'static>> {
        let first_untagged = |qn| Placement::Untagged {
            inv_stag: 0,
            qn,
            msn: 1,
            mo: 0,
        };
        let (opcode, placement, body) = match (rtr.send, rtr.write, rtr.read) {
            (true, false, false) => (
                Opcode::Send,
                first_untagged(queue::SEND),
                Body::Payload(&[]),
            ),
            (false, true, false) => (
                Opcode::Write,
                Placement::Tagged { stag: 0, to: 0 },
                Body::Payload(&[]),
            ),
            (false, false, true) => (
                Opcode::ReadRequest,
                first_untagged(queue::READ_REQUEST),
                Body::ReadRequest(ReadRequestRepr::default()),
            ),
            _ => return None,
        };
        Some(MessageRepr {
            header: HeaderRepr {
                last: true,
                opcode,
                placement,
            },
            body,
        })
    }

    /// The RDMA Read Response that answers a zero-length Read Request `request`: zero
    /// length, into the request's sink buffer. RFC 5040 answers every Read Request; for
    /// the Read RTR the initiator keeps it among its outstanding reads (siw puts it in
    /// its ORQ), and takes the first Read Response as its answer.
    pub fn zero_length_read_response(request: &ReadRequestRepr) -> MessageRepr<'static> {
        MessageRepr {
            header: HeaderRepr {
                last: true,
                opcode: Opcode::ReadResponse,
                placement: Placement::Tagged {
                    stag: request.sink_stag,
                    to: request.sink_to,
                },
            },
            body: Body::Payload(&[]),
        }
    }

    /// [`MessageRepr::zero_length_read_response`] as an FPDU.
    pub fn zero_length_read_response_fpdu(
        request: &ReadRequestRepr,
    ) -> [u8; ZERO_LENGTH_READ_RESPONSE_FPDU_LEN] {
        let mut ulpdu = [0u8; TAGGED_HEADER_LEN];
        // A tagged header without payload fills its buffer exactly: emit cannot fail.
        let emitted = Self::zero_length_read_response(request).emit(&mut ulpdu);
        debug_assert_eq!(emitted, Ok(TAGGED_HEADER_LEN));
        framed(&ulpdu)
    }

    /// Which RTR type this message is, if it is a zero-length RTR message.
    pub fn rtr_type(&self) -> Option<RtrTypes> {
        match (self.header.opcode, self.body) {
            (Opcode::Send, Body::Payload([])) => Some(RtrTypes::SEND),
            (Opcode::Write, Body::Payload([])) => Some(RtrTypes::WRITE),
            (Opcode::ReadRequest, Body::ReadRequest(r)) if r.size == 0 => Some(RtrTypes::READ),
            _ => None,
        }
    }

    /// [`MessageRepr::rtr`] as an FPDU, as this crate sends it: constant bytes, built at
    /// compile time.
    pub fn rtr_fpdu(rtr: RtrTypes) -> Option<&'static [u8]> {
        match (rtr.send, rtr.write, rtr.read) {
            (true, false, false) => Some(&RTR_FPDU_SEND),
            (false, true, false) => Some(&RTR_FPDU_WRITE),
            (false, false, true) => Some(&RTR_FPDU_READ),
            _ => None,
        }
    }

    /// The length of [`MessageRepr::rtr_fpdu`] if `bytes` begin with it. An RTR received
    /// byte for byte as this crate sends it has a good CRC and is of that type, so the
    /// firmware takes it without computing the CRC (header prediction); any other bytes
    /// get the full check. Compared against the constant with every byte unrolled (most
    /// are zero): a quarter of a `memcmp` call's instructions on riscv32.
    pub fn starts_with_rtr_fpdu(bytes: &[u8], rtr: RtrTypes) -> Option<usize> {
        match (rtr.send, rtr.write, rtr.read) {
            (true, false, false) => prefix_len(bytes, &RTR_FPDU_SEND),
            (false, true, false) => prefix_len(bytes, &RTR_FPDU_WRITE),
            (false, false, true) => prefix_len(bytes, &RTR_FPDU_READ),
            _ => None,
        }
    }

    /// [`MessageRepr::rtr_type`] of the message `ulpdu` holds, `None` if it does not
    /// parse: read from the few bytes that decide it (the firmware checks every RTR it
    /// receives; a full parse reads every header field). A property test holds the two
    /// equal.
    pub fn rtr_type_of(ulpdu: &[u8]) -> Option<RtrTypes> {
        let (&[ctrl, rdmap], _) = ulpdu.split_first_chunk()?;
        if ctrl & CTRL_DDP_VERSION != DDP_VERSION || rdmap >> RDMAP_VERSION_SHIFT != RDMAP_VERSION {
            return None;
        }
        let tagged = ctrl & CTRL_TAGGED != 0;
        // The RDMAP Read Request's size field, after the untagged header.
        const READ_SIZE: usize = UNTAGGED_HEADER_LEN + 12;
        match Opcode::from_u8(rdmap & RDMAP_OPCODE)? {
            Opcode::Write if tagged && ulpdu.len() == TAGGED_HEADER_LEN => Some(RtrTypes::WRITE),
            Opcode::Send if !tagged && ulpdu.len() == UNTAGGED_HEADER_LEN => Some(RtrTypes::SEND),
            Opcode::ReadRequest
                if !tagged
                    && ulpdu.len() == UNTAGGED_HEADER_LEN + READ_REQUEST_BODY_LEN
                    && ulpdu[READ_SIZE..READ_SIZE + 4] == [0; 4] =>
            {
                Some(RtrTypes::READ)
            }
            _ => None,
        }
    }

    /// A Terminate message carrying `term`, with the sender's Terminate-queue MSN.
    pub fn terminate(term: TerminateRepr<'a>, msn: u32) -> MessageRepr<'a> {
        MessageRepr {
            header: HeaderRepr {
                last: true,
                opcode: Opcode::Terminate,
                placement: Placement::Untagged {
                    inv_stag: 0,
                    qn: queue::TERMINATE,
                    msn,
                    mo: 0,
                },
            },
            body: Body::Terminate(term),
        }
    }

    /// A Send carrying `payload` as message number `msn` (the first is 1), in one segment.
    pub fn send(payload: &'a [u8], msn: u32) -> MessageRepr<'a> {
        MessageRepr {
            header: HeaderRepr {
                last: true,
                opcode: Opcode::Send,
                placement: Placement::Untagged {
                    inv_stag: 0,
                    qn: queue::SEND,
                    msn,
                    mo: 0,
                },
            },
            body: Body::Payload(payload),
        }
    }

    pub fn parse(ulpdu: &'a [u8]) -> Result<MessageRepr<'a>> {
        let header = HeaderRepr::parse(ulpdu)?;
        let rest = &ulpdu[header.buffer_len()..];
        let body = match header.opcode {
            Opcode::ReadRequest if rest.len() == READ_REQUEST_BODY_LEN => {
                Body::ReadRequest(ReadRequestRepr::parse(rest)?)
            }
            Opcode::ReadRequest if rest.len() < READ_REQUEST_BODY_LEN => {
                return Err(Error::Truncated)
            }
            Opcode::ReadRequest => return Err(Error::Malformed),
            Opcode::Terminate => Body::Terminate(TerminateRepr::parse(rest)?),
            _ => Body::Payload(rest),
        };
        Ok(MessageRepr { header, body })
    }

    pub fn buffer_len(&self) -> usize {
        self.header.buffer_len()
            + match &self.body {
                Body::Payload(p) => p.len(),
                Body::ReadRequest(_) => READ_REQUEST_BODY_LEN,
                Body::Terminate(t) => t.buffer_len(),
            }
    }

    pub fn emit(&self, buffer: &mut [u8]) -> Result<usize> {
        let body_fits = matches!(
            (self.header.opcode, &self.body),
            (Opcode::ReadRequest, Body::ReadRequest(_))
                | (Opcode::Terminate, Body::Terminate(_))
                | (
                    Opcode::Write
                        | Opcode::ReadResponse
                        | Opcode::Send
                        | Opcode::SendInvalidate
                        | Opcode::SendSolicited
                        | Opcode::SendSolicitedInvalidate,
                    Body::Payload(_)
                )
        );
        if !body_fits {
            return Err(Error::BadOpcode);
        }
        let at = self.header.emit(buffer)?;
        let rest = &mut buffer[at..];
        let body = match &self.body {
            Body::Payload(p) => put(rest, 0, p).map(|_| p.len())?,
            Body::ReadRequest(r) => r.emit(rest)?,
            Body::Terminate(t) => t.emit(rest)?,
        };
        Ok(at + body)
    }
}
