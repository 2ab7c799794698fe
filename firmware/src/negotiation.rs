//! MPA negotiation as spec/mpa.md states it: the frames iwnic sends, and its verdict on
//! the frames it receives. Pure functions over `iwnic_proto::mpa`; the state machine
//! decides what to send and when.

use iwnic_proto::mpa::{FrameKind, FrameRepr, RtrTypes, V2Block, IRD_ORD_NO_NEGOTIATION};

use crate::counters::Counters;

/// What the two ends agreed (or, before the reply, what was asked).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Negotiation {
    /// Revision of the frames exchanged: 1 or 2.
    pub revision: u8,
    /// A v2 block is carried.
    pub enhanced: bool,
    /// Peer-to-peer mode: the initiator's first FPDU is an RTR.
    pub peer_to_peer: bool,
    /// Initiator: the types offered, then the one chosen. Responder: offered, then chosen.
    pub rtr: RtrTypes,
    /// The peer's IRD and ORD from its frame (0x3FFF: no negotiation).
    pub peer_ird: u16,
    pub peer_ord: u16,
    /// Our IRD and ORD, after negotiation.
    pub ird: u16,
    pub ord: u16,
    /// Initiator: our Read RTR's zero-length Read Response is still to come (the
    /// responder's first FPDU), for the firmware to take before the hand-off.
    pub read_response_due: bool,
}

/// RTR types iwnic sends as initiator (RFC 6581 lets the responder pick).
pub(crate) const RTR_OFFER: RtrTypes = RtrTypes {
    send: false,
    write: true,
    read: true,
};

/// How a bad request is refused (spec/mpa.md, bad-input table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Close with RST, no reply, no event.
    Reset,
    /// Reply with R=1, then close gracefully; no event.
    RejectReply,
}

/// Counts a frame error and says how to react to it.
pub(crate) fn refuse_frame(error: iwnic_proto::Error, counters: &mut Counters) -> Refusal {
    use iwnic_proto::Error::*;
    match error {
        BadKey => counters.mpa_bad_key += 1,
        BadRevision => counters.mpa_bad_revision += 1,
        PrivateDataTooLong => counters.mpa_private_data_too_long += 1,
        MissingV2Block => {
            counters.mpa_missing_v2_block += 1;
            return Refusal::RejectReply;
        }
        _ => counters.mpa_truncated += 1,
    }
    Refusal::Reset
}

/// The request iwnic sends: revision 2, peer-to-peer offering Write and Read RTR (Write
/// alone on a device that issues no Reads, `max_ord` 0), or revision 1 when asked.
pub(crate) fn request(
    mpa_v1: bool,
    ird: u16,
    ord: u16,
    max_ord: u16,
    private_data: &[u8],
) -> (FrameRepr<'_>, Negotiation) {
    let rtr = match (mpa_v1, max_ord) {
        (true, _) => RtrTypes::NONE,
        (false, 0) => RtrTypes::WRITE,
        (false, _) => RTR_OFFER,
    };
    let neg = Negotiation {
        revision: if mpa_v1 { 1 } else { 2 },
        enhanced: !mpa_v1,
        peer_to_peer: !mpa_v1,
        rtr,
        peer_ird: 0,
        peer_ord: 0,
        ird,
        // The Read RTR offered is an RDMA Read Request: it needs an ORD of 1 at least
        // (as the kernel's cxgb4 raises it in peer-to-peer mode).
        ord: if rtr.read && ord == 0 { 1 } else { ord },
        read_response_due: false,
    };
    (frame(FrameKind::Request, &neg, private_data), neg)
}

/// An MPA frame as iwnic sends every one: CRC wanted, markers not (spec/mpa.md).
fn frame<'a>(kind: FrameKind, neg: &Negotiation, private_data: &'a [u8]) -> FrameRepr<'a> {
    FrameRepr {
        kind,
        markers: false,
        crc: true,
        revision: neg.revision,
        v2: block(neg),
        private_data,
    }
}

fn block(neg: &Negotiation) -> Option<V2Block> {
    neg.enhanced.then_some(V2Block {
        peer_to_peer: neg.peer_to_peer,
        rtr: neg.rtr,
        ird: neg.ird,
        ord: neg.ord,
    })
}

/// Judge a complete request: what it asks for, and whether it is refused (markers are
/// refused with a reject reply; the caller has already refused bad keys, revisions and
/// lengths). The negotiation comes back either way, for the reject reply to echo.
pub(crate) fn judge_request(
    frame: &FrameRepr,
    counters: &mut Counters,
) -> (Negotiation, Result<(), Refusal>) {
    let neg = asked_by(frame);
    if frame.kind != FrameKind::Request {
        counters.mpa_bad_key += 1;
        return (neg, Err(Refusal::Reset));
    }
    if frame.markers {
        counters.mpa_markers_refused += 1;
        return (neg, Err(Refusal::RejectReply));
    }
    (neg, Ok(()))
}

fn asked_by(frame: &FrameRepr) -> Negotiation {
    let (peer_to_peer, rtr, peer_ird, peer_ord) = match frame.v2 {
        Some(b) => (b.peer_to_peer, b.rtr, b.ird, b.ord),
        None => (
            false,
            RtrTypes::NONE,
            IRD_ORD_NO_NEGOTIATION,
            IRD_ORD_NO_NEGOTIATION,
        ),
    };
    Negotiation {
        revision: frame.revision,
        enhanced: frame.v2.is_some(),
        // Peer-to-peer needs an RTR type both can use.
        peer_to_peer: peer_to_peer && rtr.count() > 0,
        rtr,
        peer_ird,
        peer_ord,
        ird: 0,
        ord: 0,
        read_response_due: false,
    }
}

/// The responder's choice among the offered RTR types: a zero-length Write first, as
/// siw's responder chooses (the datapath takes it, and nothing answers it), then Read
/// (all a cxgb4 initiator offers by default; it needs a Read Response), then Send.
/// (cxgb4's responder answers with its module-wide type, Read by default, whatever
/// was offered.)
fn choose_rtr(offer: RtrTypes) -> RtrTypes {
    if offer.write {
        RtrTypes::WRITE
    } else if offer.read {
        RtrTypes::READ
    } else {
        RtrTypes::SEND
    }
}

fn clamp(ours: u16, theirs: u16) -> u16 {
    if ours == IRD_ORD_NO_NEGOTIATION || theirs == IRD_ORD_NO_NEGOTIATION {
        ours
    } else {
        ours.min(theirs)
    }
}

/// The accepting reply to a judged request, with our IRD/ORD: our ORD is relaxed to the
/// initiator's IRD (RFC 6581 lets the responder clamp instead of failing).
pub(crate) fn accept<'a>(
    neg: Negotiation,
    ird: u16,
    ord: u16,
    private_data: &'a [u8],
) -> (FrameRepr<'a>, Negotiation) {
    let neg = answered(&neg, ird, clamp(ord, neg.peer_ird));
    (frame(FrameKind::Accept, &neg, private_data), neg)
}

/// A rejecting reply: the revision of the request and, to an enhanced request, the v2
/// block an accept would carry, with the initiator's IRD and ORD crossed (our IRD its
/// ORD, our ORD its IRD), as siw's reject carries. irdma's initiator judges the block of
/// every revision-2 reply before it looks at R (`irdma_negotiate_mpa_v2_ird_ord`):
/// without an RTR type, or with an ORD above its IRD, it resets the connection instead
/// of reporting the reject and its private data.
pub(crate) fn reject<'a>(neg: &Negotiation, private_data: &'a [u8]) -> FrameRepr<'a> {
    let answered = Negotiation {
        revision: neg.revision.clamp(1, 2),
        ..answered(neg, neg.peer_ord, neg.peer_ird)
    };
    frame(FrameKind::Reject, &answered, private_data)
}

/// The block a reply to the request `neg` carries, with our `ird` and `ord`: exactly
/// one RTR type in peer-to-peer mode, none without it (the bits mean nothing then, and
/// a reply sets no type it will not send). The initiator's Read RTR is an RDMA Read
/// Request to us: it needs an IRD of 1 at least (as the kernel's cxgb4 raises it).
fn answered(neg: &Negotiation, ird: u16, ord: u16) -> Negotiation {
    let rtr = if neg.peer_to_peer {
        choose_rtr(neg.rtr)
    } else {
        RtrTypes::NONE
    };
    let ird = if rtr == RtrTypes::READ && ird == 0 {
        1
    } else {
        ird
    };
    Negotiation {
        rtr,
        ird,
        ord,
        ..*neg
    }
}

/// The initiator's verdict on a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReplyVerdict {
    Accepted(Negotiation),
    Rejected,
    /// Not a reply, or a reply we cannot work with: TERM with this LLP code (0 = none:
    /// the stream is not in FPDU mode yet), then the connection fails.
    Failed {
        term_code: u8,
    },
}

pub(crate) fn judge_reply(
    asked: &Negotiation,
    frame: &FrameRepr,
    counters: &mut Counters,
) -> ReplyVerdict {
    use iwnic_proto::ddp::llp_code;
    match frame.kind {
        FrameKind::Request => {
            counters.mpa_bad_key += 1;
            return ReplyVerdict::Failed { term_code: 0 };
        }
        FrameKind::Reject => {
            counters.mpa_rejects_received += 1;
            return ReplyVerdict::Rejected;
        }
        FrameKind::Accept => {}
    }
    if frame.markers || frame.revision > asked.revision {
        counters.mpa_bad_revision += u32::from(frame.revision > asked.revision);
        counters.mpa_markers_refused += u32::from(frame.markers);
        return ReplyVerdict::Failed {
            term_code: llp_code::INVALID_REQUEST_REPLY,
        };
    }
    let mut neg = Negotiation {
        revision: frame.revision,
        ..*asked
    };
    match frame.v2 {
        Some(b) if asked.enhanced => {
            neg.peer_ird = b.ird;
            neg.peer_ord = b.ord;
            neg.peer_to_peer = asked.peer_to_peer && b.peer_to_peer;
            if neg.peer_to_peer {
                if b.rtr.count() != 1 || !b.rtr.within(asked.rtr) {
                    counters.rtr_mismatch += 1;
                    return ReplyVerdict::Failed {
                        term_code: llp_code::NO_MATCHING_RTR,
                    };
                }
                neg.rtr = b.rtr;
            }
            // The responder's ORD must fit our IRD; our ORD is relaxed to its IRD.
            if clamp(b.ord, asked.ird) != b.ord {
                counters.ird_shortfall += 1;
                return ReplyVerdict::Failed {
                    term_code: llp_code::INSUFFICIENT_IRD,
                };
            }
            neg.ord = clamp(asked.ord, b.ird);
        }
        _ => {
            neg.enhanced = false;
            neg.peer_to_peer = false;
            neg.peer_ird = IRD_ORD_NO_NEGOTIATION;
            neg.peer_ord = IRD_ORD_NO_NEGOTIATION;
        }
    }
    if !neg.peer_to_peer {
        neg.rtr = RtrTypes::NONE;
    }
    ReplyVerdict::Accepted(neg)
}
