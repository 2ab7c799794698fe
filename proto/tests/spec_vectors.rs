//! Every byte string of spec/mpa.md that is not an MPA frame (those are unit-tested in
//! `mpa.rs`): the FPDUs carrying the RTR and the "hello" Send, built from the DDP/RDMAP
//! and FPDU layers together and parsed back.

use iwnic_proto::ddp::{
    llp_code, Body, Layer, MessageRepr, Opcode, Placement, ReadRequestRepr, TerminateRepr,
};
use iwnic_proto::fpdu::FpduRepr;
use iwnic_proto::mpa::RtrTypes;
use iwnic_proto::Error;

fn hex(s: &str) -> Vec<u8> {
    s.split_whitespace()
        .map(|b| u8::from_str_radix(b, 16).unwrap())
        .collect()
}

fn fpdu_of(message: &MessageRepr) -> Vec<u8> {
    let mut ulpdu = vec![0u8; message.buffer_len()];
    assert_eq!(message.emit(&mut ulpdu), Ok(ulpdu.len()));
    let fpdu = FpduRepr { ulpdu: &ulpdu };
    let mut wire = vec![0u8; fpdu.buffer_len()];
    assert_eq!(fpdu.emit(&mut wire), Ok(wire.len()));
    wire
}

#[test]
fn rtr_as_zero_length_rdma_write() {
    let want = hex("00 0E  C1 40  00 00 00 00  00 00 00 00 00 00 00 00  A3 05 72 AB");
    let rtr = MessageRepr::rtr(RtrTypes::WRITE).unwrap();
    assert_eq!(fpdu_of(&rtr), want);
    let parsed = MessageRepr::parse(FpduRepr::parse(&want).unwrap().ulpdu).unwrap();
    assert_eq!(parsed, rtr);
    assert_eq!(parsed.rtr_type(), Some(RtrTypes::WRITE));
}

#[test]
fn send_carrying_hello() {
    let want = hex(
        "00 17  41 43  00 00 00 00  00 00 00 00  00 00 00 01  00 00 00 00  68 65 6C 6C 6F  00 00 00  B9 90 B1 0C",
    );
    let send = MessageRepr::send(b"hello", 1);
    assert_eq!(fpdu_of(&send), want);
    let parsed = MessageRepr::parse(FpduRepr::parse(&want).unwrap().ulpdu).unwrap();
    assert_eq!(parsed, send);
    assert_eq!(parsed.body, Body::Payload(b"hello"));
    assert_eq!(parsed.rtr_type(), None);
}

/// The zero-length Read Response's FPDU, framed apart, is the bytes the layers emit for
/// it, into the request's sink buffer.
#[test]
fn zero_length_read_response_fpdu_is_the_emitted_one() {
    let request = ReadRequestRepr {
        sink_stag: 0x0A0B_0C0D,
        sink_to: 0x1122_3344_5566_7788,
        ..ReadRequestRepr::default()
    };
    let message = MessageRepr::zero_length_read_response(&request);
    let framed = MessageRepr::zero_length_read_response_fpdu(&request);
    assert_eq!(&framed[..], &fpdu_of(&message)[..]);
    let parsed = MessageRepr::parse(FpduRepr::parse(&framed).unwrap().ulpdu).unwrap();
    assert_eq!(parsed, message);
    assert_eq!(
        parsed.header.placement,
        Placement::Tagged {
            stag: 0x0A0B_0C0D,
            to: 0x1122_3344_5566_7788
        }
    );
}

/// The compile-time RTR FPDUs are the bytes the layers emit, the spec's Write vector
/// among them.
#[test]
fn constant_rtr_fpdus_are_the_emitted_ones() {
    for rtr in [RtrTypes::SEND, RtrTypes::WRITE, RtrTypes::READ] {
        let emitted = fpdu_of(&MessageRepr::rtr(rtr).unwrap());
        assert_eq!(MessageRepr::rtr_fpdu(rtr), Some(&emitted[..]), "{rtr:?}");
    }
    let write = hex("00 0E  C1 40  00 00 00 00  00 00 00 00 00 00 00 00  A3 05 72 AB");
    assert_eq!(MessageRepr::rtr_fpdu(RtrTypes::WRITE), Some(&write[..]));
    assert_eq!(MessageRepr::rtr_fpdu(RtrTypes::NONE), None);
}

/// Header prediction of a received RTR: its exact bytes, at any address (the halfword
/// and the byte compare), followed by anything, and nothing else: any flipped bit, a
/// short buffer or another type.
#[test]
fn an_rtr_is_predicted_only_from_its_exact_bytes_at_any_alignment() {
    let types = [RtrTypes::SEND, RtrTypes::WRITE, RtrTypes::READ];
    for rtr in types {
        let fpdu = MessageRepr::rtr_fpdu(rtr).unwrap();
        for offset in 0..4 {
            let mut buffer = vec![0xA5u8; offset + fpdu.len() + 8];
            buffer[offset..offset + fpdu.len()].copy_from_slice(fpdu);
            let at = &mut buffer[offset..];
            let predicted = |bytes: &[u8], rtr| MessageRepr::starts_with_rtr_fpdu(bytes, rtr);
            assert_eq!(predicted(at, rtr), Some(fpdu.len()), "{rtr:?} at +{offset}");
            assert_eq!(predicted(&at[..fpdu.len() - 1], rtr), None, "{rtr:?} short");
            for other in types.into_iter().filter(|&t| t != rtr) {
                assert_eq!(predicted(at, other), None, "{rtr:?} as {other:?}");
            }
            for bit in 0..fpdu.len() * 8 {
                at[bit / 8] ^= 1 << (bit % 8);
                assert_eq!(predicted(at, rtr), None, "{rtr:?} at +{offset}, bit {bit}");
                at[bit / 8] ^= 1 << (bit % 8);
            }
        }
        assert_eq!(
            MessageRepr::starts_with_rtr_fpdu(fpdu, RtrTypes::NONE),
            None
        );
    }
}

#[test]
fn the_other_rtr_types() {
    let send = MessageRepr::rtr(RtrTypes::SEND).unwrap();
    assert_eq!(send, MessageRepr::send(&[], 1));
    assert_eq!(fpdu_of(&send).len(), 2 + 18 + 4);
    let read = MessageRepr::rtr(RtrTypes::READ).unwrap();
    assert_eq!(read.header.opcode, Opcode::ReadRequest);
    assert_eq!(
        read.header.placement,
        Placement::Untagged {
            inv_stag: 0,
            qn: 1,
            msn: 1,
            mo: 0
        }
    );
    let wire = fpdu_of(&read);
    assert_eq!(wire.len(), 2 + 18 + 28 + 4);
    let parsed = MessageRepr::parse(FpduRepr::parse(&wire).unwrap().ulpdu).unwrap();
    assert_eq!(parsed.rtr_type(), Some(RtrTypes::READ));
    // No type, or more than one, is no RTR.
    assert_eq!(MessageRepr::rtr(RtrTypes::NONE), None);
    assert_eq!(
        MessageRepr::rtr(RtrTypes {
            send: true,
            write: true,
            read: false
        }),
        None
    );
}

#[test]
fn terminate_for_an_mpa_crc_error() {
    let term = MessageRepr::terminate(TerminateRepr::llp(llp_code::CRC_ERROR), 1);
    let wire = fpdu_of(&term);
    // Untagged header with QN 2, then layer LLP (2) / etype MPA (0), code 0x02, no copies.
    assert_eq!(&wire[2..4], &[0x41, 0x47]);
    assert_eq!(&wire[8..12], &[0, 0, 0, 2]);
    assert_eq!(&wire[20..24], &[0x20, 0x02, 0x00, 0x00]);
    let parsed = MessageRepr::parse(FpduRepr::parse(&wire).unwrap().ulpdu).unwrap();
    match parsed.body {
        Body::Terminate(t) => {
            assert_eq!(
                (t.layer, t.etype, t.code),
                (Layer::Llp, llp_code::ETYPE_MPA, 0x02)
            );
        }
        other => panic!("not a terminate: {other:?}"),
    }
}

#[test]
fn ddp_rdmap_bad_inputs() {
    let good = hex("C1 40  00 00 00 00  00 00 00 00 00 00 00 00");
    let mut v = good.clone();
    v[0] = 0xC2; // DDP version 2
    assert_eq!(MessageRepr::parse(&v), Err(Error::BadVersion));
    let mut v = good.clone();
    v[1] = 0x80; // RDMAP version 2
    assert_eq!(MessageRepr::parse(&v), Err(Error::BadVersion));
    let mut v = good.clone();
    v[1] = 0x48; // opcode 8
    assert_eq!(MessageRepr::parse(&v), Err(Error::BadOpcode));
    let mut v = good.clone();
    v[0] = 0x41; // untagged Write
    assert_eq!(MessageRepr::parse(&v), Err(Error::BadOpcode));
    assert_eq!(MessageRepr::parse(&good[..13]), Err(Error::Truncated));
    // A Read Request with a short or long body.
    let read = MessageRepr::rtr(RtrTypes::READ).unwrap();
    let mut ulpdu = vec![0u8; read.buffer_len() + 1];
    read.emit(&mut ulpdu).unwrap();
    assert_eq!(
        MessageRepr::parse(&ulpdu[..ulpdu.len() - 2]),
        Err(Error::Truncated)
    );
    assert_eq!(MessageRepr::parse(&ulpdu), Err(Error::Malformed));
}
