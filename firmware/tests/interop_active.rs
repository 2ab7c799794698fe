//! The active side against the MPA replies Linux's iWARP responders send, byte for byte
//! as their code builds them (a pinning test: every case passes today). Our request is
//! iwnic's usual one: revision 2, CRC, peer-to-peer offering Write and Read, IRD = ORD
//! = 16, and the responder's application accepts or rejects with the values its
//! CONNECT_REQUEST gave it.

mod common;

use common::*;
use iwnic_proto::ddp::{MessageRepr, ReadRequestRepr};
use iwnic_proto::errno::ECONNREFUSED;
use iwnic_proto::mpa::{RtrTypes, REPLY_KEY};
use iwnic_proto::smoltcp_wire::TcpControl;

/// A reply as the responder lays it out: key, flags, revision 2, PD_Length counting
/// the 4-byte v2 block, the block, the application's private data.
fn reply_bytes(flags: u8, block: [u8; 4], private_data: &[u8]) -> Vec<u8> {
    let pd_length = (block.len() + private_data.len()) as u16;
    [
        &REPLY_KEY[..],
        &[flags, 2],
        &pd_length.to_be_bytes(),
        &block,
        private_data,
    ]
    .concat()
}

/// The zero-length Read Response that answers our Read RTR (into its sink STag 0, TO 0).
fn read_response() -> Vec<u8> {
    fpdu(&MessageRepr::zero_length_read_response(
        &ReadRequestRepr::default(),
    ))
}

#[test]
fn pinned_linux_responder_replies_are_handled() {
    // Accepts: (who, reply, RTR we must send, our ORD after it).
    let accepts = [
        // siw_proc_mpareq + siw_accept: the request's flags echoed (C, enhanced), IRD
        // and ORD as accepted | P2P, and Write (siw prefers it when offered).
        (
            "siw",
            reply_bytes(0x50, [0x80, 0x10, 0x80, 0x10], b"siw"),
            RtrTypes::WRITE,
            16,
        ),
        // send_mpa_reply: the RTR bit comes from the module's p2p_type (Read by
        // default), not from what the request offered; IRD/ORD from c4iw_accept_cr.
        (
            "cxgb4",
            reply_bytes(0x50, [0x80, 0x10, 0x40, 0x10], b"c4"),
            RtrTypes::READ,
            16,
        ),
        // irdma_build_mpa_v2: IRD is the device's max_hw_ird (127 on E810), ORD clamped
        // to our IRD by irdma_negotiate_mpa_v2_ird_ord, Read preferred.
        (
            "irdma",
            reply_bytes(0x50, [0x80, 0x7F, 0x40, 0x10], b"ir"),
            RtrTypes::READ,
            16,
        ),
    ];
    for (who, bytes, rtr_type, ord) in accepts {
        let mut bench = Bench::default();
        let (mut peer, _, _) = active_until_request(&mut bench, false, b"");
        bench.deliver(peer.data(&bytes));
        let sent = bench.sent();
        assert_eq!(
            kinds(&sent),
            ["DATA"],
            "{who}: the RTR acknowledges the reply"
        );
        assert_eq!(sent[0].payload, rtr(rtr_type), "{who}");
        assert_eq!(sent[0].ack, Some(peer.snd_nxt), "{who}");
        peer.saw_all(&sent);
        // siw's TCP acknowledges the Write RTR; cxgb4's and irdma's hardware answer the
        // Read RTR with its Read Response, the ACK riding on it.
        match rtr_type {
            RtrTypes::WRITE => bench.deliver(peer.ack()),
            _ => bench.deliver(peer.data(&read_response())),
        }
        let out = bench.out();
        assert_eq!(briefs(&out), ["ConnectReply(0)"], "{who}");
        let ev = event(&out[0]);
        assert_eq!(ev.private_data, &bytes[24..], "{who}");
        assert_eq!(ev.ord, ord, "{who}");
        let flow = bench.hal.flows.values().next().copied().unwrap();
        assert_eq!(
            (flow.snd_nxt, flow.rcv_nxt),
            (peer.rcv_nxt, peer.snd_nxt),
            "{who}: FPDU mode at the peer's numbers"
        );
        assert_eq!(bench.fw.buffers_in_use(), 0, "{who}");
    }

    // Rejects: (who, reply, FIN in the reply's segment).
    let rejects = [
        // siw_reject: the request's flags | R, the block as siw_proc_mpareq built it;
        // sock_release's FIN follows on its own.
        (
            "siw",
            reply_bytes(0x70, [0x80, 0x10, 0x80, 0x10], b"busy"),
            false,
        ),
        // send_mpa_reject: R | enhanced only (no C), the block with P2P and the module's
        // RTR type; c4iw_reject_cr's graceful disconnect sends FIN after it.
        (
            "cxgb4",
            reply_bytes(0x30, [0x80, 0x10, 0x40, 0x10], b"busy"),
            false,
        ),
        // irdma_send_mpa_reject: C | enhanced | R, sent with SET_ACK | SET_FIN.
        (
            "irdma",
            reply_bytes(0x70, [0x80, 0x7F, 0x40, 0x10], b"busy"),
            true,
        ),
    ];
    for (who, bytes, with_fin) in rejects {
        let mut bench = Bench::default();
        let (mut peer, _, _) = active_until_request(&mut bench, false, b"");
        let control = if with_fin {
            TcpControl::Fin
        } else {
            TcpControl::Psh
        };
        bench.deliver(peer.seg(control, &bytes));
        let out = bench.out();
        assert_eq!(
            briefs(&out),
            [format!("ConnectReply({})", -ECONNREFUSED)],
            "{who}"
        );
        assert_eq!(event(&out[0]).private_data, b"busy", "{who}");
        let fin = bench.sent();
        assert_eq!(kinds(&fin), ["FIN"], "{who}");
        assert_eq!(fin[0].ack, Some(peer.snd_nxt), "{who}");
        peer.saw_all(&fin);
        if !with_fin {
            bench.deliver(peer.fin());
        }
        bench.deliver(peer.ack());
        bench.advance(61_000);
        assert!(bench.out().is_empty(), "{who}: one CONNECT_REPLY");
        assert_eq!(bench.fw.connections(), 0, "{who}");
    }
}
